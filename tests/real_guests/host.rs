// The stub WASI host, written once for both engines: tests/real_guests.rs
// (and benches/src/component_guest.rs) include this file into a module per
// engine, where `wt` names the engine's crate (`wasmtime` or
// `upstream_wasmtime`) and `super::plan` is tests/real_guests/plan.rs.
//
// Every import of a guest gets a definition: the few functions that the
// guests call are implemented (stdout/stderr, environment, clocks, random,
// and the wasi:http calls of a handler that answers), every other function
// traps with "stub: <interface>#<function> not implemented", and every
// imported resource type gets a host type of its own.

use super::plan::{Outcome, Plan, unversioned};
use std::collections::HashMap;
use wt::component::{Component, Linker, LinkerInstance, ResourceType, Val};
use wt::{AsContextMut, Config, Engine, Store, StoreContextMut};

/// An owned handle of the host resource `R` with representation `rep`, as
/// a `Val`.
fn own_val<R: 'static>(store: &mut StoreContextMut<'_, Host>, rep: u32) -> wt::Result<Val> {
    let resource = wt::component::Resource::<R>::new_own(rep);
    Ok(Val::Resource(wt::component::ResourceAny::try_from_resource(
        resource, store,
    )?))
}

/// The representation of a handle of the host resource `R` given as a `Val`.
fn rep_of<R: 'static>(store: &mut StoreContextMut<'_, Host>, val: Val) -> wt::Result<u32> {
    match val {
        Val::Resource(any) => {
            Ok(wt::component::Resource::<R>::try_from_resource_any(any, store)?.rep())
        }
        other => wt::bail!("stub host: expected a resource, got {other:?}"),
    }
}

/// The store's data: what the guest wrote, and the host's resources.
#[derive(Default)]
pub struct Host {
    /// Bytes written to stdout and stderr.
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Every implemented import called, in order (`interface#function`).
    pub calls: Vec<String>,
    /// Where the bytes written to each output stream go, by representation.
    sinks: HashMap<u32, Sink>,
    /// Outgoing responses: status code and body, by representation.
    responses: HashMap<u32, (u16, Option<u32>)>,
    /// Outgoing bodies: bytes written and whether they were finished.
    bodies: HashMap<u32, (Vec<u8>, bool)>,
    /// The response the guest set on the `response-outparam`.
    response: Option<u32>,
    /// The last representation handed out; 0 is never used.
    last_rep: u32,
    /// The state of the deterministic "random" stream.
    random: u64,
}

#[derive(Clone, Copy)]
enum Sink {
    Stdout,
    Stderr,
    Body(u32),
}

impl Host {
    fn new_rep(&mut self) -> u32 {
        self.last_rep += 1;
        self.last_rep
    }

    /// A fixed stream of numbers (splitmix64), the same in both engines.
    fn next_random(&mut self) -> u64 {
        self.random = self.random.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.random;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn random_bytes(&mut self, len: u64) -> wt::Result<Vec<u8>> {
        if len > 1 << 20 {
            wt::bail!("stub: a request for {len} random bytes (more than 1 MiB)");
        }
        Ok((0..len).map(|_| self.next_random() as u8).collect())
    }

    /// What a finished run leaves: output, calls and the HTTP response.
    fn outcome(&self) -> Outcome {
        let response = self.response.map(|rep| {
            let (status, body) = self.responses.get(&rep).copied().unwrap_or((0, None));
            let (bytes, finished) = body
                .and_then(|b| self.bodies.get(&b).cloned())
                .unwrap_or_default();
            (status, bytes, finished)
        });
        Outcome {
            stdout: self.stdout.clone(),
            stderr: self.stderr.clone(),
            calls: self.calls.clone(),
            response,
        }
    }
}

// The host types of the resources that the implemented functions use.
/// `wasi:io/streams.output-stream`.
pub struct OutputStream;
/// `wasi:io/streams.input-stream`.
pub struct InputStream;
/// `wasi:http/types.fields`.
pub struct Fields;
/// `wasi:http/types.outgoing-response`.
pub struct OutgoingResponse;
/// `wasi:http/types.outgoing-body`.
pub struct OutgoingBody;
/// `wasi:http/types.response-outparam`.
pub struct ResponseOutparam;
/// `wasi:http/types.incoming-request`.
pub struct IncomingRequest;
/// The host type of the `N`th resource type that nothing implements.
pub struct Stub<const N: usize>;

/// The host resource type of `interface.name` (interface without version),
/// if an implemented function uses it.
fn known_resource(interface: &str, name: &str) -> Option<ResourceType> {
    Some(match (interface, name) {
        ("wasi:io/streams", "output-stream") => ResourceType::host::<OutputStream>(),
        ("wasi:io/streams", "input-stream") => ResourceType::host::<InputStream>(),
        ("wasi:http/types", "fields") => ResourceType::host::<Fields>(),
        ("wasi:http/types", "outgoing-response") => ResourceType::host::<OutgoingResponse>(),
        ("wasi:http/types", "outgoing-body") => ResourceType::host::<OutgoingBody>(),
        ("wasi:http/types", "response-outparam") => ResourceType::host::<ResponseOutparam>(),
        ("wasi:http/types", "incoming-request") => ResourceType::host::<IncomingRequest>(),
        _ => return None,
    })
}

/// A host resource type of its own for the `n`th unimplemented resource.
fn stub_resource(n: usize) -> wt::Result<ResourceType> {
    macro_rules! stubs {
        ($($i:literal)*) => {
            match n {
                $($i => ResourceType::host::<Stub<$i>>(),)*
                _ => wt::bail!("stub host: more than 48 unimplemented resource types"),
            }
        };
    }
    Ok(
        stubs!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
        24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47),
    )
}

/// An implemented import: the arguments, and the results to fill.
type HostImpl = fn(&mut StoreContextMut<'_, Host>, &[Val], &mut [Val]) -> wt::Result<()>;

fn ok_unit() -> Val {
    Val::Result(Ok(None))
}

fn ok(val: Val) -> Val {
    Val::Result(Ok(Some(Box::new(val))))
}

fn arg_u64(args: &[Val], i: usize) -> wt::Result<u64> {
    match args.get(i) {
        Some(Val::U64(n)) => Ok(*n),
        other => wt::bail!("stub host: argument {i} should be a u64, got {other:?}"),
    }
}

fn arg_bytes(args: &[Val], i: usize) -> wt::Result<Vec<u8>> {
    let Some(Val::List(items)) = args.get(i) else {
        wt::bail!("stub host: argument {i} should be a list<u8>");
    };
    items
        .iter()
        .map(|item| match item {
            Val::U8(b) => Ok(*b),
            other => wt::bail!("stub host: a list<u8> element is {other:?}"),
        })
        .collect()
}

fn bytes_val(bytes: Vec<u8>) -> Val {
    Val::List(bytes.into_iter().map(Val::U8).collect())
}

/// A handle argument's representation.
fn arg_rep<R: 'static>(
    store: &mut StoreContextMut<'_, Host>,
    args: &[Val],
    i: usize,
) -> wt::Result<u32> {
    let val = args
        .get(i)
        .cloned()
        .ok_or_else(|| wt::format_err!("stub host: no argument {i}"))?;
    rep_of::<R>(store, val)
}

fn new_stream(store: &mut StoreContextMut<'_, Host>, sink: Sink) -> wt::Result<Val> {
    let rep = store.data_mut().new_rep();
    store.data_mut().sinks.insert(rep, sink);
    own_val::<OutputStream>(store, rep)
}

fn write_stream(store: &mut StoreContextMut<'_, Host>, args: &[Val]) -> wt::Result<()> {
    let rep = arg_rep::<OutputStream>(store, args, 0)?;
    let bytes = arg_bytes(args, 1)?;
    let host = store.data_mut();
    match host.sinks.get(&rep).copied() {
        Some(Sink::Stdout) => host.stdout.extend_from_slice(&bytes),
        Some(Sink::Stderr) => host.stderr.extend_from_slice(&bytes),
        Some(Sink::Body(body)) => match host.bodies.get_mut(&body) {
            Some((buf, false)) => buf.extend_from_slice(&bytes),
            _ => wt::bail!("stub host: a write to the stream of a finished or unknown body"),
        },
        None => wt::bail!("stub host: a write to unknown output stream {rep}"),
    }
    Ok(())
}

/// The implementation of `interface#func` (interface without version), if
/// the stub host has one.
fn implemented(interface: &str, func: &str) -> Option<HostImpl> {
    Some(match (interface, func) {
        ("wasi:cli/stdout", "get-stdout") => |store, _, results| {
            results[0] = new_stream(store, Sink::Stdout)?;
            Ok(())
        },
        ("wasi:cli/stderr", "get-stderr") => |store, _, results| {
            results[0] = new_stream(store, Sink::Stderr)?;
            Ok(())
        },
        ("wasi:cli/stdin", "get-stdin") => |store, _, results| {
            let rep = store.data_mut().new_rep();
            results[0] = own_val::<InputStream>(store, rep)?;
            Ok(())
        },
        ("wasi:cli/environment", "get-environment") => |_, _, results| {
            results[0] = Val::List(Vec::new());
            Ok(())
        },
        ("wasi:cli/environment", "get-arguments") => |_, _, results| {
            results[0] = Val::List(vec![Val::String("guest".to_string())]);
            Ok(())
        },
        ("wasi:cli/environment", "initial-cwd") => |_, _, results| {
            results[0] = Val::Option(None);
            Ok(())
        },
        ("wasi:cli/terminal-stdin", "get-terminal-stdin")
        | ("wasi:cli/terminal-stdout", "get-terminal-stdout")
        | ("wasi:cli/terminal-stderr", "get-terminal-stderr") => |_, _, results| {
            results[0] = Val::Option(None);
            Ok(())
        },
        ("wasi:filesystem/preopens", "get-directories") => |_, _, results| {
            results[0] = Val::List(Vec::new());
            Ok(())
        },
        ("wasi:io/streams", "[method]output-stream.check-write") => |store, args, results| {
            arg_rep::<OutputStream>(store, args, 0)?;
            results[0] = ok(Val::U64(4096));
            Ok(())
        },
        ("wasi:io/streams", "[method]output-stream.write")
        | ("wasi:io/streams", "[method]output-stream.blocking-write-and-flush") => {
            |store, args, results| {
                write_stream(store, args)?;
                results[0] = ok_unit();
                Ok(())
            }
        }
        ("wasi:io/streams", "[method]output-stream.flush")
        | ("wasi:io/streams", "[method]output-stream.blocking-flush") => |store, args, results| {
            arg_rep::<OutputStream>(store, args, 0)?;
            results[0] = ok_unit();
            Ok(())
        },
        ("wasi:random/random", "get-random-bytes")
        | ("wasi:random/insecure", "get-insecure-random-bytes") => |store, args, results| {
            let bytes = store.data_mut().random_bytes(arg_u64(args, 0)?)?;
            results[0] = bytes_val(bytes);
            Ok(())
        },
        ("wasi:random/random", "get-random-u64")
        | ("wasi:random/insecure", "get-insecure-random-u64") => |store, _, results| {
            results[0] = Val::U64(store.data_mut().next_random());
            Ok(())
        },
        ("wasi:random/insecure-seed", "insecure-seed") => |store, _, results| {
            let host = store.data_mut();
            results[0] = Val::Tuple(vec![
                Val::U64(host.next_random()),
                Val::U64(host.next_random()),
            ]);
            Ok(())
        },
        // A clock that stands still: the same in both engines.
        ("wasi:clocks/monotonic-clock", "now") => |_, _, results| {
            results[0] = Val::U64(1_000_000_000);
            Ok(())
        },
        ("wasi:clocks/monotonic-clock", "resolution") => |_, _, results| {
            results[0] = Val::U64(1);
            Ok(())
        },
        ("wasi:clocks/wall-clock", "now") | ("wasi:clocks/wall-clock", "resolution") => {
            |_, _, results| {
                results[0] = Val::Record(vec![
                    ("seconds".to_string(), Val::U64(1_700_000_000)),
                    ("nanoseconds".to_string(), Val::U32(0)),
                ]);
                Ok(())
            }
        }
        ("wasi:http/types", "[constructor]fields") => |store, _, results| {
            let rep = store.data_mut().new_rep();
            results[0] = own_val::<Fields>(store, rep)?;
            Ok(())
        },
        ("wasi:http/types", "[static]fields.from-list") => |store, _, results| {
            let rep = store.data_mut().new_rep();
            results[0] = ok(own_val::<Fields>(store, rep)?);
            Ok(())
        },
        ("wasi:http/types", "[constructor]outgoing-response") => |store, args, results| {
            arg_rep::<Fields>(store, args, 0)?;
            let rep = store.data_mut().new_rep();
            store.data_mut().responses.insert(rep, (200, None));
            results[0] = own_val::<OutgoingResponse>(store, rep)?;
            Ok(())
        },
        ("wasi:http/types", "[method]outgoing-response.set-status-code") => {
            |store, args, results| {
                let rep = arg_rep::<OutgoingResponse>(store, args, 0)?;
                let Some(Val::U16(status)) = args.get(1) else {
                    wt::bail!("stub host: set-status-code without a u16");
                };
                let status = *status;
                match store.data_mut().responses.get_mut(&rep) {
                    Some(response) => response.0 = status,
                    None => wt::bail!("stub host: unknown outgoing-response {rep}"),
                }
                results[0] = ok_unit();
                Ok(())
            }
        }
        ("wasi:http/types", "[method]outgoing-response.body") => |store, args, results| {
            let rep = arg_rep::<OutgoingResponse>(store, args, 0)?;
            let host = store.data_mut();
            let body = host.new_rep();
            match host.responses.get_mut(&rep) {
                Some((_, slot @ None)) => *slot = Some(body),
                Some(_) => {
                    results[0] = Val::Result(Err(None));
                    return Ok(());
                }
                None => wt::bail!("stub host: unknown outgoing-response {rep}"),
            }
            host.bodies.insert(body, (Vec::new(), false));
            results[0] = ok(own_val::<OutgoingBody>(store, body)?);
            Ok(())
        },
        ("wasi:http/types", "[method]outgoing-body.write") => |store, args, results| {
            let body = arg_rep::<OutgoingBody>(store, args, 0)?;
            results[0] = ok(new_stream(store, Sink::Body(body))?);
            Ok(())
        },
        ("wasi:http/types", "[static]outgoing-body.finish") => |store, args, results| {
            let body = arg_rep::<OutgoingBody>(store, args, 0)?;
            match store.data_mut().bodies.get_mut(&body) {
                Some((_, finished)) => *finished = true,
                None => wt::bail!("stub host: unknown outgoing-body {body}"),
            }
            results[0] = ok_unit();
            Ok(())
        },
        ("wasi:http/types", "[static]response-outparam.set") => |store, args, results| {
            arg_rep::<ResponseOutparam>(store, args, 0)?;
            let response = match args.get(1) {
                Some(Val::Result(Ok(Some(response)))) => (**response).clone(),
                other => wt::bail!("stub host: response-outparam.set with {other:?}"),
            };
            let rep = rep_of::<OutgoingResponse>(store, response)?;
            store.data_mut().response = Some(rep);
            debug_assert!(results.is_empty());
            Ok(())
        },
        _ => return None,
    })
}

/// Defines `func` of instance `interface` in `instance`: implemented, or a
/// stub that traps.
fn define(instance: &mut LinkerInstance<'_, Host>, interface: &str, func: &str) -> wt::Result<()> {
    let full = format!("{interface}#{func}");
    match implemented(unversioned(interface), func) {
        Some(imp) => instance.func_new(func, move |mut store, _ty, args, results| {
            store.data_mut().calls.push(full.clone());
            imp(&mut store, args, results)
        }),
        None => instance.func_new(func, move |_, _, _, _| {
            Err(wt::format_err!("stub: {full} not implemented"))
        }),
    }
}

/// A linker with a definition for every import in `plan`.
pub fn stub_linker(engine: &Engine, plan: &Plan) -> wt::Result<Linker<Host>> {
    let mut linker = Linker::new(engine);
    let mut stubs = 0;
    let mut resource_type = |interface: &str, name: &str| match known_resource(interface, name) {
        Some(ty) => Ok(ty),
        None => {
            stubs += 1;
            stub_resource(stubs - 1)
        }
    };
    for import in &plan.instances {
        let mut instance = linker.instance(&import.name)?;
        for name in &import.resources {
            let ty = resource_type(unversioned(&import.name), name)?;
            instance.resource(name, ty, |_, _| Ok(()))?;
        }
        for func in &import.funcs {
            define(&mut instance, &import.name, func)?;
        }
    }
    let mut root = linker.root();
    for name in &plan.root_resources {
        let ty = resource_type("", name)?;
        root.resource(name, ty, |_, _| Ok(()))?;
    }
    for func in &plan.root_funcs {
        define(&mut root, "", func)?;
    }
    Ok(linker)
}

/// The engine the guests run in: the defaults plus the component model.
pub fn engine() -> wt::Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    Engine::new(&config)
}

/// What the run of a guest calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// `wasi:cli/run#run`, which must return `ok`.
    Run,
    /// `wasi:http/incoming-handler#handle` with a fresh request and
    /// response outparam.
    Handle,
}

/// Compiles, links, instantiates and runs `bytes`, saying at which step
/// it failed.
pub fn run(bytes: &[u8], plan: &Plan, call: Call) -> Result<Outcome, String> {
    let step = |what: &'static str| move |e: wt::Error| format!("{what}: {e:?}");
    let engine = engine().map_err(step("engine"))?;
    let component = Component::new(&engine, bytes).map_err(step("compile"))?;
    let linker = stub_linker(&engine, plan).map_err(step("stub host"))?;
    let pre = linker.instantiate_pre(&component).map_err(step("link"))?;
    let mut store = new_store(&engine);
    let instance = pre.instantiate(&mut store).map_err(step("instantiate"))?;
    let (export, func_name) = match call {
        Call::Run => ("wasi:cli/run@", "run"),
        Call::Handle => ("wasi:http/incoming-handler@", "handle"),
    };
    let export = plan.export(export).map_err(|e| format!("exports: {e:#}"))?;
    let index = instance
        .get_export_index(&mut store, None, export)
        .ok_or_else(|| format!("exports: no export `{export}`"))?;
    let index = instance
        .get_export_index(&mut store, Some(&index), func_name)
        .ok_or_else(|| format!("exports: `{export}` has no `{func_name}`"))?;
    let func = instance
        .get_func(&mut store, index)
        .ok_or_else(|| format!("exports: `{export}#{func_name}` is not a function"))?;
    let ty = func.ty(&store);
    let (params, results) = (ty.params().len(), ty.results().len());
    let args = match call {
        Call::Run => Vec::new(),
        Call::Handle => {
            let mut cx = store.as_context_mut();
            let request = cx.data_mut().new_rep();
            let outparam = cx.data_mut().new_rep();
            vec![
                own_val::<IncomingRequest>(&mut cx, request).map_err(step("handle arguments"))?,
                own_val::<ResponseOutparam>(&mut cx, outparam).map_err(step("handle arguments"))?,
            ]
        }
    };
    if params != args.len() || results != usize::from(call == Call::Run) {
        return Err(format!(
            "exports: `{export}#{func_name}` has {params} parameter(s) and {results} result(s)"
        ));
    }
    let mut out = vec![Val::Bool(false); results];
    let called = func.call(&mut store, &args, &mut out);
    let outcome = store.data().outcome();
    if let Err(e) = called {
        return Err(format!(
            "call: {e:?}\n  stdout so far: {:?}\n  stderr so far: {:?}\n  implemented imports called: {:?}",
            String::from_utf8_lossy(&outcome.stdout),
            String::from_utf8_lossy(&outcome.stderr),
            outcome.calls
        ));
    }
    if call == Call::Run && out[0] != ok_unit() {
        return Err(format!("call: run returned {:?}", out[0]));
    }
    Ok(outcome)
}

/// A fresh store with an empty stub host.
pub fn new_store(engine: &Engine) -> Store<Host> {
    Store::new(engine, Host::default())
}

/// Compiles `bytes` (for the benchmark).
#[allow(dead_code, reason = "used by benches/src/component_guest.rs only")]
pub fn compile(engine: &Engine, bytes: &[u8]) -> wt::Result<Component> {
    Component::new(engine, bytes)
}

/// The pre-instantiated component and a fresh store to instantiate it in
/// (for the benchmark).
#[allow(dead_code, reason = "used by benches/src/component_guest.rs only")]
pub fn instantiate_pre(
    engine: &Engine,
    component: &Component,
    plan: &Plan,
) -> wt::Result<wt::component::InstancePre<Host>> {
    stub_linker(engine, plan)?.instantiate_pre(component)
}
