# A wasi:cli/command guest for tests/real_guests.rs: prints one known line
# on stdout from `wasi:cli/run#run`.
from wit_world import exports


class Run(exports.Run):
    def run(self) -> None:
        print("hello from a python component")
