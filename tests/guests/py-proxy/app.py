# A wasi:http/proxy guest for tests/real_guests.rs: answers every request
# with status 200 and a known body, written in one call.
from wit_world import exports
from wit_world.imports.types import (
    Fields,
    IncomingRequest,
    OutgoingBody,
    OutgoingResponse,
    ResponseOutparam,
)
from componentize_py_types import Ok


class IncomingHandler(exports.IncomingHandler):
    def handle(self, request: IncomingRequest, response_out: ResponseOutparam) -> None:
        response = OutgoingResponse(Fields())
        response.set_status_code(200)
        body = response.body()
        ResponseOutparam.set(response_out, Ok(response))
        stream = body.write()
        stream.blocking_write_and_flush(b"hello from a python proxy")
        stream.__exit__(None, None, None)
        OutgoingBody.finish(body, None)
