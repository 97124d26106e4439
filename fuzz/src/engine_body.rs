// One engine's side of a run, written once against the embedding API both
// engines share. `engines.rs` includes this file twice, with `wt` naming
// our `wasmtime` once and upstream's once, so that both sides run exactly
// the same embedding code and any difference comes from the engines.

use crate::config::{MEMORY_LIMIT, TABLE_LIMIT};
use crate::value::{HOST_ERROR_PREFIX, Kind, Outcome, Snapshot, Value};
use wt::{AsContext, AsContextMut};

/// A store's data: resource limits (identical on both sides) and how often
/// host functions fail on purpose.
pub struct Host {
    limits: wt::StoreLimits,
    host_fail_one_in: u64,
}

pub fn kind(ty: &wt::ValType) -> Kind {
    match ty {
        wt::ValType::I32 => Kind::I32,
        wt::ValType::I64 => Kind::I64,
        wt::ValType::F32 => Kind::F32,
        wt::ValType::F64 => Kind::F64,
        wt::ValType::V128 => Kind::V128,
        wt::ValType::Ref(_) if ty.is_externref() => Kind::ExternRef,
        wt::ValType::Ref(_) => Kind::FuncRef,
    }
}

fn to_val(mut store: impl AsContextMut, value: Value) -> wt::Result<wt::Val> {
    Ok(match value {
        Value::I32(v) => wt::Val::I32(v),
        Value::I64(v) => wt::Val::I64(v),
        Value::F32(v) => wt::Val::F32(v),
        Value::F64(v) => wt::Val::F64(v),
        Value::V128(v) => wt::Val::V128(v.into()),
        Value::FuncRef { .. } => wt::Val::FuncRef(None),
        Value::ExternRef(None) => wt::Val::ExternRef(None),
        Value::ExternRef(Some(n)) => {
            wt::Val::ExternRef(Some(wt::ExternRef::new(store.as_context_mut(), n)?))
        }
    })
}

fn from_val(store: impl AsContext, val: &wt::Val) -> Value {
    match val {
        wt::Val::I32(v) => Value::I32(*v),
        wt::Val::I64(v) => Value::I64(*v),
        wt::Val::F32(v) => Value::F32(*v),
        wt::Val::F64(v) => Value::F64(*v),
        wt::Val::V128(v) => Value::V128(v.as_u128()),
        wt::Val::FuncRef(f) => Value::FuncRef {
            non_null: f.is_some(),
        },
        wt::Val::ExternRef(None) => Value::ExternRef(None),
        wt::Val::ExternRef(Some(r)) => {
            let payload = r
                .data(store.as_context())
                .ok()
                .flatten()
                .and_then(|d| d.downcast_ref::<u64>().copied());
            // Every extern reference comes from this harness and carries a
            // `u64`; anything else shows up as a mismatch.
            Value::ExternRef(Some(payload.unwrap_or(u64::MAX)))
        }
        other => panic!("a Wasm 2.0 module produced {other:?}"),
    }
}

/// Turns an error from a call or an instantiation into an outcome.
pub fn classify(err: wt::Error) -> Outcome {
    if let Some(trap) = err.downcast_ref::<wt::Trap>() {
        return Outcome::Trap(format!("{trap:?}"));
    }
    let msg = format!("{err:?}");
    if let Some(at) = msg.find(HOST_ERROR_PREFIX) {
        let digits: String = msg[at + HOST_ERROR_PREFIX.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Ok(n) = digits.parse() {
            return Outcome::HostError(n);
        }
    }
    Outcome::Error(err.to_string())
}

pub fn compile(engine: &wt::Engine, wasm: &[u8]) -> Result<wt::Module, String> {
    wt::Module::from_binary(engine, wasm).map_err(|e| format!("{e:?}"))
}

pub fn new_store(engine: &wt::Engine, host_fail_one_in: u64) -> wt::Store<Host> {
    let limits = wt::StoreLimitsBuilder::new()
        .memory_size(MEMORY_LIMIT)
        .table_elements(TABLE_LIMIT)
        .build();
    let mut store = wt::Store::new(
        engine,
        Host {
            limits,
            host_fail_one_in,
        },
    );
    store.limiter(|host| &mut host.limits);
    store
}

/// Imports that are a fixed function of the import's position and type,
/// so both engines see the same ones.
fn define_imports(
    store: &mut wt::Store<Host>,
    module: &wt::Module,
) -> wt::Result<wt::Linker<Host>> {
    let mut linker = wt::Linker::new(store.engine());
    linker.allow_shadowing(true);
    for (i, import) in module.imports().enumerate() {
        let seed = Value::I64(i as i64).hash_into(0);
        let item: wt::Extern = match import.ty() {
            wt::ExternType::Func(ty) => {
                let results: Vec<Kind> = ty.results().map(|t| kind(&t)).collect();
                linker.func_new(
                    import.module(),
                    import.name(),
                    ty,
                    move |mut caller: wt::Caller<'_, Host>,
                          params: &[wt::Val],
                          out: &mut [wt::Val]| {
                        let hash = params
                            .iter()
                            .fold(seed, |h, p| from_val(&caller, p).hash_into(h));
                        let one_in = caller.data().host_fail_one_in;
                        if one_in != 0 && hash.is_multiple_of(one_in) {
                            return Err(wt::Error::msg(format!("{HOST_ERROR_PREFIX}{hash}")));
                        }
                        for (j, (slot, k)) in out.iter_mut().zip(&results).enumerate() {
                            *slot = to_val(&mut caller, Value::from_hash(*k, hash, j))?;
                        }
                        Ok(())
                    },
                )?;
                continue;
            }
            wt::ExternType::Global(ty) => {
                let value = Value::from_hash(kind(ty.content()), seed, 0);
                let value = to_val(&mut *store, value)?;
                wt::Global::new(&mut *store, ty, value)?.into()
            }
            wt::ExternType::Memory(ty) => wt::Memory::new(&mut *store, ty)?.into(),
            wt::ExternType::Table(ty) => {
                let init = wt::Ref::null(ty.element().heap_type());
                wt::Table::new(&mut *store, ty, init)?.into()
            }
            #[allow(unreachable_patterns, reason = "only upstream has tags")]
            other => wt::bail!("unsupported import {other:?}"),
        };
        linker.define(&*store, import.module(), import.name(), item)?;
    }
    Ok(linker)
}

pub fn instantiate(
    store: &mut wt::Store<Host>,
    module: &wt::Module,
) -> Result<wt::Instance, Outcome> {
    let linker = define_imports(store, module).map_err(classify)?;
    linker.instantiate(&mut *store, module).map_err(classify)
}


/// Exported functions: name and parameter kinds, in export order.
pub fn exported_funcs(module: &wt::Module) -> Vec<(String, Vec<Kind>)> {
    module
        .exports()
        .filter_map(|e| match e.ty() {
            wt::ExternType::Func(ty) => Some((
                e.name().to_string(),
                ty.params().map(|t| kind(&t)).collect(),
            )),
            _ => None,
        })
        .collect()
}

/// The exported function `name`, its parameters made from `args` and room
/// for its results.
fn prepare_call(
    store: &mut wt::Store<Host>,
    instance: &wt::Instance,
    name: &str,
    args: &[Value],
) -> Result<(wt::Func, Vec<wt::Val>, Vec<wt::Val>), Outcome> {
    let func = instance
        .get_func(&mut *store, name)
        .expect("exported function");
    let ty = func.ty(&*store);
    let params = args
        .iter()
        .map(|arg| to_val(&mut *store, *arg))
        .collect::<wt::Result<Vec<_>>>()
        .map_err(classify)?;
    let results = vec![wt::Val::I32(0); ty.results().len()];
    Ok((func, params, results))
}

fn call_outcome(store: &wt::Store<Host>, called: wt::Result<()>, results: &[wt::Val]) -> Outcome {
    match called {
        Ok(()) => Outcome::Returned(results.iter().map(|r| from_val(store, r)).collect()),
        Err(e) => classify(e),
    }
}

pub fn call(
    store: &mut wt::Store<Host>,
    instance: &wt::Instance,
    name: &str,
    args: &[Value],
) -> Outcome {
    let (func, params, mut results) = match prepare_call(store, instance, name, args) {
        Ok(prepared) => prepared,
        Err(outcome) => return outcome,
    };
    let called = func.call(&mut *store, &params, &mut results);
    call_outcome(store, called, &results)
}

pub fn snapshot(
    store: &mut wt::Store<Host>,
    module: &wt::Module,
    instance: &wt::Instance,
) -> Snapshot {
    let mut snap = Snapshot::default();
    for export in module.exports() {
        let name = export.name();
        match export.ty() {
            wt::ExternType::Memory(_) => {
                let memory = instance.get_memory(&mut *store, name).unwrap();
                snap.memories
                    .push((name.to_string(), memory.data(&*store).to_vec()));
            }
            wt::ExternType::Global(_) => {
                let global = instance.get_global(&mut *store, name).unwrap();
                let value = global.get(&mut *store);
                snap.globals
                    .push((name.to_string(), from_val(&*store, &value)));
            }
            wt::ExternType::Table(_) => {
                let table = instance.get_table(&mut *store, name).unwrap();
                let size = table.size(&*store);
                let non_null = (0..size.min(TABLE_LIMIT as u64))
                    .map(|i| table.get(&mut *store, i).is_some_and(|r| !r.is_null()))
                    .collect();
                snap.tables.push((name.to_string(), size, non_null));
            }
            _ => {}
        }
    }
    snap
}
