// Runs a case in one engine. Included twice (`ours` and `upstream` in
// `component_diff.rs`), each time with `wt` naming that engine's crate, so
// that both run exactly the same steps.

use super::draw::{Case, HostAction, V};
use super::{HOST_ERROR, Outcome, Step};
use wt::component::{Component, Linker, Val};

/// The engine for every case: one per process, component model on,
/// Cranelift without optimizations (compiling dominates a run).
pub fn engine() -> &'static wt::Engine {
    static ENGINE: std::sync::OnceLock<wt::Engine> = std::sync::OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut c = wt::Config::new();
        c.wasm_component_model(true);
        c.cranelift_opt_level(wt::OptLevel::None);
        wt::Engine::new(&c).expect("engine")
    })
}

/// `v` as a `Val`.
pub fn to_val(v: &V) -> Val {
    let boxed = |p: &Option<Box<V>>| p.as_ref().map(|p| Box::new(to_val(p)));
    match v {
        V::Bool(x) => Val::Bool(*x),
        V::S8(x) => Val::S8(*x),
        V::U8(x) => Val::U8(*x),
        V::S16(x) => Val::S16(*x),
        V::U16(x) => Val::U16(*x),
        V::S32(x) => Val::S32(*x),
        V::U32(x) => Val::U32(*x),
        V::S64(x) => Val::S64(*x),
        V::U64(x) => Val::U64(*x),
        V::F32(x) => Val::Float32(f32::from_bits(*x)),
        V::F64(x) => Val::Float64(f64::from_bits(*x)),
        V::Char(x) => Val::Char(*x),
        V::String(x) => Val::String(x.clone()),
        V::List(x) => Val::List(x.iter().map(to_val).collect()),
        V::Record(x) => Val::Record(x.iter().map(|(n, v)| (n.clone(), to_val(v))).collect()),
        V::Tuple(x) => Val::Tuple(x.iter().map(to_val).collect()),
        V::Variant(n, p) => Val::Variant(n.clone(), boxed(p)),
        V::Enum(n) => Val::Enum(n.clone()),
        V::Option(p) => Val::Option(boxed(p)),
        V::Result(Ok(p)) => Val::Result(Ok(boxed(p))),
        V::Result(Err(p)) => Val::Result(Err(boxed(p))),
        V::Flags(x) => Val::Flags(x.clone()),
        V::Unexpected(what) => unreachable!("never generated: {what}"),
    }
}

/// `v` in the neutral form.
pub fn from_val(v: &Val) -> V {
    let boxed = |p: &Option<Box<Val>>| p.as_ref().map(|p| Box::new(from_val(p)));
    match v {
        Val::Bool(x) => V::Bool(*x),
        Val::S8(x) => V::S8(*x),
        Val::U8(x) => V::U8(*x),
        Val::S16(x) => V::S16(*x),
        Val::U16(x) => V::U16(*x),
        Val::S32(x) => V::S32(*x),
        Val::U32(x) => V::U32(*x),
        Val::S64(x) => V::S64(*x),
        Val::U64(x) => V::U64(*x),
        Val::Float32(x) => V::F32(x.to_bits()),
        Val::Float64(x) => V::F64(x.to_bits()),
        Val::Char(x) => V::Char(*x),
        Val::String(x) => V::String(x.to_string()),
        Val::List(x) => V::List(x.iter().map(from_val).collect()),
        Val::Record(x) => V::Record(x.iter().map(|(n, v)| (n.clone(), from_val(v))).collect()),
        Val::Tuple(x) => V::Tuple(x.iter().map(from_val).collect()),
        Val::Variant(n, p) => V::Variant(n.clone(), boxed(p)),
        Val::Enum(n) => V::Enum(n.clone()),
        Val::Option(p) => V::Option(boxed(p)),
        Val::Result(Ok(p)) => V::Result(Ok(boxed(p))),
        Val::Result(Err(p)) => V::Result(Err(boxed(p))),
        Val::Flags(x) => V::Flags(x.clone()),
        other => V::Unexpected(format!("{other:?}")),
    }
}

/// The store's data: what the host functions do and what they saw.
struct Host {
    /// The actions of the calls, by call index.
    actions: Vec<HostAction>,
    /// The call in progress.
    current: usize,
    /// Each host call: import index and the arguments it received.
    log: Vec<(usize, Vec<V>)>,
}

/// `Component::new`, remembered for the last few hundred components: most
/// mutations change only the calls, not the component, and compiling
/// dominates a run. A compiled component is immutable, so reusing one is
/// the same as compiling it again.
fn compile(engine: &wt::Engine, wasm: &[u8]) -> wt::Result<Component> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static CACHE: OnceLock<Mutex<HashMap<Vec<u8>, Component>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(c) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(wasm) {
        crate::stats::bump(concat!(module_path!(), "::compile_cached"));
        return Ok(c.clone());
    }
    let c = Component::new(engine, wasm)?;
    let mut map = cache.lock().unwrap_or_else(|e| e.into_inner());
    if map.len() >= 512 {
        map.clear();
    }
    map.insert(wasm.to_vec(), c.clone());
    Ok(c)
}

fn classify(e: &wt::Error) -> Outcome {
    if let Some(trap) = e.downcast_ref::<wt::Trap>() {
        return Outcome::Trap(format!("{trap:?}"), trap.to_string());
    }
    // `{:#}`: the chain of messages without a backtrace (resolving one
    // costs more than a whole run).
    let text = format!("{e:#}");
    if text.contains(HOST_ERROR) {
        Outcome::HostError
    } else {
        Outcome::Error(text)
    }
}

/// Compiles `wasm`, instantiates it and makes the case's calls; after
/// each call, reads every layer's `stats`. Every step's outcome is
/// recorded, with the host calls made during it.
///
/// With `stop_after_failure`, a failed call ends the run.
pub fn run(wasm: &[u8], case: &Case, stop_after_failure: bool) -> Vec<Step> {
    let mut steps = Vec::new();
    let engine = engine();
    let component = match compile(engine, wasm) {
        Ok(c) => c,
        Err(e) => {
            steps.push(Step::new("compile", classify(&e)));
            return steps;
        }
    };
    steps.push(Step::new("compile", Outcome::Ok(Vec::new())));
    let mut linker = Linker::<Host>::new(engine);
    for (i, sig) in case.sigs.iter().enumerate() {
        let has_result = sig.result.is_some();
        let defined = linker.root().func_new(
            &format!("host-{i}"),
            move |mut store, _ty, params, results| {
                let host = store.data_mut();
                host.log.push((i, params.iter().map(from_val).collect()));
                let action = host.actions.get(host.current).cloned();
                match action {
                    Some(HostAction::Return(value)) => {
                        if let (Some(v), Some(slot)) = (value, results.first_mut()) {
                            *slot = to_val(&v);
                        }
                        Ok(())
                    }
                    Some(HostAction::WrongType) if has_result => {
                        // No generated type is an empty tuple.
                        results[0] = Val::Tuple(Vec::new());
                        Ok(())
                    }
                    _ => Err(wt::Error::msg(HOST_ERROR)),
                }
            },
        );
        if let Err(e) = defined {
            steps.push(Step::new("define", classify(&e)));
            return steps;
        }
    }
    let mut store = wt::Store::new(
        engine,
        Host {
            actions: case.calls.iter().map(|c| c.host.clone()).collect(),
            current: 0,
            log: Vec::new(),
        },
    );
    let instance = match linker.instantiate(&mut store, &component) {
        Ok(i) => i,
        Err(e) => {
            steps.push(Step::new("instantiate", classify(&e)));
            return steps;
        }
    };
    steps.push(Step::new("instantiate", Outcome::Ok(Vec::new())));

    let call = |store: &mut wt::Store<Host>, name: &str, args: &[Val], nresults: usize| {
        let Some(func) = instance.get_func(&mut *store, name) else {
            return Outcome::Error(format!("no export `{name}`"));
        };
        let mut results = vec![Val::Bool(false); nresults];
        match func.call(&mut *store, args, &mut results) {
            Ok(()) => Outcome::Ok(results.iter().map(from_val).collect()),
            Err(e) => classify(&e),
        }
    };
    for (n, c) in case.calls.iter().enumerate() {
        store.data_mut().current = n;
        let args: Vec<Val> = c.args.iter().map(to_val).collect();
        let nresults = usize::from(case.sigs[c.func].result.is_some());
        let outcome = call(&mut store, &format!("guest-{}", c.func), &args, nresults);
        let failed = !matches!(outcome, Outcome::Ok(_));
        let mut step = Step::new("call", outcome);
        step.host = std::mem::take(&mut store.data_mut().log);
        steps.push(step);
        if failed && stop_after_failure {
            break;
        }
        for k in 0..case.layers.len() {
            for which in 0..4u32 {
                let outcome = call(&mut store, &format!("stats-{k}"), &[Val::U32(which)], 1);
                let mut step = Step::new("stats", outcome);
                step.host = std::mem::take(&mut store.data_mut().log);
                steps.push(step);
            }
        }
    }
    steps
}
