//! The two engines behind one interface: [`ours`] and [`upstream`] are the
//! same source (`engine_body.rs`) compiled against each engine's crate;
//! ours adds the `*_async` entry points.

pub mod ours {
    use wasmtime as wt;
    include!("engine_body.rs");

    // Only ours runs asynchronously (upstream is built without its `async`
    // feature), so these two live here and not in `engine_body.rs`.

    /// [`instantiate`] through `Linker::instantiate_async`.
    pub async fn instantiate_async(
        store: &mut wt::Store<Host>,
        module: &wt::Module,
    ) -> Result<wt::Instance, Outcome> {
        let linker = define_imports(store, module).map_err(classify)?;
        linker
            .instantiate_async(&mut *store, module)
            .await
            .map_err(classify)
    }

    /// [`call`] through `Func::call_async`.
    pub async fn call_async(
        store: &mut wt::Store<Host>,
        instance: &wt::Instance,
        name: &str,
        args: &[Value],
    ) -> Outcome {
        let (func, params, mut results) = match prepare_call(store, instance, name, args) {
            Ok(prepared) => prepared,
            Err(outcome) => return outcome,
        };
        let called = func.call_async(&mut *store, &params, &mut results).await;
        call_outcome(store, called, &results)
    }
}

pub mod upstream {
    use upstream_wasmtime as wt;
    include!("engine_body.rs");
}

use crate::config::{EngineKey, OursConfig, upstream_config};
use crate::stats;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

/// Upstream's engine for one relaxed-SIMD mode: one of each for the whole
/// run, its configuration otherwise fixed.
pub fn upstream_engine(relaxed_simd_deterministic: bool) -> &'static upstream_wasmtime::Engine {
    static ENGINES: [OnceLock<upstream_wasmtime::Engine>; 2] = [OnceLock::new(), OnceLock::new()];
    ENGINES[usize::from(relaxed_simd_deterministic)].get_or_init(|| {
        upstream_wasmtime::Engine::new(&upstream_config(relaxed_simd_deterministic)).unwrap()
    })
}

/// Our engine for `config`, cached: creating one per input would cost more
/// than many of the inputs themselves.
pub fn ours_engine(config: &OursConfig) -> wasmtime::Engine {
    static ENGINES: OnceLock<Mutex<HashMap<EngineKey, wasmtime::Engine>>> = OnceLock::new();
    let mut engines = ENGINES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    engines
        .entry(config.engine_key())
        .or_insert_with(|| {
            wasmtime::Engine::new(&config.engine_config())
                .unwrap_or_else(|e| panic!("our engine rejects {config:?}: {e:?}"))
        })
        .clone()
}

/// Engine bugs already reported, each with the message of its panic and
/// the counter it is tallied under. An input hitting one is skipped (and
/// counted) instead of stopping the run, so fuzzing goes on finding new
/// ones; `FUZZ_STRICT=1` turns the skip off. An entry leaves this list when
/// its fix lands (its regression test is in `tests/fuzz_regressions.rs`).
/// None at present: finding 1 (a `br_table` passing a float vector) was
/// fixed; keep the mechanism for the next one.
const KNOWN_BUGS: &[(&str, &str)] = &[];
/// Compiles `wasm` in ours; `None` if that hit a [`KNOWN_BUGS`] panic.
pub fn ours_compile(
    engine: &wasmtime::Engine,
    wasm: &[u8],
) -> Option<Result<wasmtime::Module, String>> {
    if std::env::var_os("FUZZ_STRICT").is_some() {
        return Some(ours::compile(engine, wasm));
    }
    // libFuzzer's panic hook aborts the process; a quiet hook while
    // compiling lets a known panic be caught, an unknown one is printed and
    // resumed so that it still ends the run as a crash.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ours::compile(engine, wasm)));
    std::panic::set_hook(hook);
    let known = |message: &str| {
        KNOWN_BUGS
            .iter()
            .find(|(m, _)| message.contains(m))
            .map(|(_, counter)| stats::bump(counter))
            .is_some()
    };
    match result {
        // The translator turns its own panics into "internal compiler
        // error"s.
        Ok(Err(e)) if e.contains("internal compiler error") && known(&e) => None,
        Ok(result) => Some(result),
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("");
            if known(message) {
                return None;
            }
            eprintln!("our compiler panicked: {message}");
            std::panic::resume_unwind(payload)
        }
    }
}
