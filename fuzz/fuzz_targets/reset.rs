//! `Instance::reset` must leave an instance indistinguishable from a fresh
//! instantiation of the same module in the same store.
//!
//! An input becomes a module (`wasm-smith`, or an embedded spec module;
//! `src/reset.rs` rewrites it so that every function, table, memory and
//! global is exported and adds a drop-flag probe per segment), engine
//! knobs (reset policy, copy-on-write images, memory layout, so that
//! growth moves memories in some engines, write marks) and 2–8 cycles. Instance A is
//! instantiated once; each cycle:
//!
//! 1. changes A: calls of its exported functions with drawn arguments
//!    (traps and running out of fuel are fine), and from the host, growth
//!    of its memories and tables, byte writes over one page, many pages or
//!    a page in each of many, table and mutable-global stores; sometimes
//!    nothing at all (a reset of untouched pages); sometimes
//!    `MADV_PAGEOUT` of its memories;
//! 2. resets A;
//! 3. instantiates B, fresh, from the same module and the same host
//!    functions in the same store, and compares A with B and with A's
//!    state right after its own instantiation: every memory byte for byte
//!    (and so its size), every table's size and elements, every global's
//!    bits;
//! 4. runs every probe on A and on B (a data or element segment's drop
//!    flag shows as a trap or none), then the same drawn steps on both,
//!    comparing each outcome, and compares the states again.
//!
//! A `funcref` is compared by what it names, not by its address: A's
//! elements name A's functions and B's name B's, so each is mapped to the
//! first export of its own instance that holds the same function (every
//! function is exported, and both instances have the same exports in the
//! same order); a reference that names no function of its own instance
//! (one of another instance) counts as different from every function.
//! An `externref` is compared by its host payload.
//!
//! The same store is the one the contract names; it also lets A and B
//! share the very same host functions, so that nothing but the instances
//! differs. Any difference, and any error from `reset`, panics, except
//! for the bugs already reported in `KNOWN_BUGS`. See `dump` for writing
//! out the module of an input, as in `differential`.

#![no_main]

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use std::collections::HashMap;
use std::fmt::Write as _;
use wasmtime::{
    ExternRef, ExternType, Func, Global, Instance, Memory, Module, Mutability, Ref, Store,
    StoreLimits, StoreLimitsBuilder, Table, Trap, Val, ValType,
};
use wasmtime_mmu_fuzz::engines::ours_compile;
use wasmtime_mmu_fuzz::reset::{self, FUEL, Knobs};
use wasmtime_mmu_fuzz::stats;
use wasmtime_mmu_fuzz::value::Value;

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
    stats::exec_done();
});

struct Host {
    limits: StoreLimits,
}

fn new_store(engine: &wasmtime::Engine) -> Store<Host> {
    let limits = StoreLimitsBuilder::new()
        .memory_size(reset::MEMORY_LIMIT)
        .table_elements(reset::TABLE_LIMIT)
        .build();
    let mut store = Store::new(engine, Host { limits });
    store.limiter(|host| &mut host.limits);
    store
}

fn run(data: &[u8]) -> Result<()> {
    let Some((wasm, mut u)) = reset::module_and_rest(data) else {
        stats::bump("skip_no_module");
        return Ok(());
    };
    dump(&wasm, &u);
    let knobs = Knobs::arbitrary(&mut u)?;
    let Some(instrumented) = reset::instrument(&wasm) else {
        stats::bump("skip_invalid_module");
        return Ok(());
    };
    let engine = reset::engine(&knobs);
    let Some(Ok(module)) = ours_compile(&engine, &instrumented.wasm) else {
        stats::bump("skip_invalid_module");
        return Ok(());
    };
    let mut store = new_store(&engine);
    let Some(imports) = host_functions(&mut store, &module) else {
        stats::bump("skip_non_function_import");
        return Ok(());
    };
    store.set_fuel(FUEL).unwrap();
    let a = match Instance::new(&mut store, &module, &imports) {
        Ok(a) => a,
        Err(e) => {
            // A start function that traps or runs out of fuel, or a
            // memory or table larger than the store allows.
            stats::bump(if e.downcast_ref::<Trap>().is_some() {
                "skip_instantiation_trapped"
            } else if known_bug(&format!("{e:?}")) {
                "skip_instantiation_known_bug"
            } else {
                "skip_instantiation_error"
            });
            return Ok(());
        }
    };
    let va = View::new(&mut store, &module, a, &instrumented);
    // A quarter of the inputs never read A before its first reset, so that
    // the first reset meets pages nobody has touched since mapping.
    let pristine = if u.ratio(3, 4)? {
        Some(State::of(&mut store, &va))
    } else {
        stats::bump("first_reset_of_untouched_instance");
        None
    };
    let cycles = u.int_in_range(2..=8)?;
    let context = format!("knobs: {knobs:?}\nswap present: {}", reset::swap_present());
    for cycle in 0..cycles {
        // The cycle's draws come first: running out of input then shortens
        // the run instead of stopping in the middle of a cycle.
        let Ok(plan) = Plan::arbitrary(&mut u, &va) else {
            break;
        };
        if knobs.write_marks {
            let host_wrote = plan.before.iter().any(|step| {
                matches!(
                    step,
                    Step::Write { .. } | Step::Fill { .. } | Step::Sprinkle { .. }
                )
            });
            stats::bump(if host_wrote {
                "write_marks_cycles_host_wrote"
            } else {
                "write_marks_cycles_marks_only"
            });
        }
        let went_on = run_cycle(
            &mut store,
            &module,
            &instrumented,
            &imports,
            &va,
            &pristine,
            &plan,
            |what| format!("{what}\ncycle {cycle} of {cycles}\n{context}\nplan: {plan:#?}"),
        );
        if !went_on {
            break;
        }
    }
    Ok(())
}

/// Reset bugs already found and reported but not yet fixed in the engine,
/// each by a piece of its error message and the counter it is tallied
/// under, as `KNOWN_BUGS` in `src/engines.rs` does for the compiler: an
/// input hitting one ends there (counted) instead of stopping the run, so
/// that a run goes on looking for others; `FUZZ_STRICT=1` turns the skip
/// off. An entry goes when its fix lands.
///
/// Empty since the fix of the first finding (an empty memory with no
/// reservation, see docs/fuzzing.md); kept for the next one.
const KNOWN_BUGS: &[(&str, &str)] = &[];

/// Whether `message` is one of [`KNOWN_BUGS`] (counting it), unless
/// `FUZZ_STRICT` is set.
fn known_bug(message: &str) -> bool {
    if std::env::var_os("FUZZ_STRICT").is_some() {
        return false;
    }
    KNOWN_BUGS
        .iter()
        .find(|(m, _)| message.contains(m))
        .map(|(_, counter)| stats::bump(counter))
        .is_some()
}

/// One host function per import, the same `Func`s for every instance:
/// results a fixed hash of the import's position and the arguments.
/// `None` if the module imports anything but functions.
fn host_functions(store: &mut Store<Host>, module: &Module) -> Option<Vec<wasmtime::Extern>> {
    let mut out = Vec::new();
    for (i, import) in module.imports().enumerate() {
        let ExternType::Func(ty) = import.ty() else {
            return None;
        };
        let seed = Value::I64(i as i64).hash_into(0);
        let results: Vec<ValType> = ty.results().collect();
        let func = Func::new(&mut *store, ty, move |_, params, out| {
            let hash = params.iter().fold(seed, |h, p| number(p).hash_into(h));
            for (j, (slot, ty)) in out.iter_mut().zip(&results).enumerate() {
                *slot = match (ty, Value::from_hash(wasmtime_kind(ty), hash, j)) {
                    (_, Value::I32(v)) => Val::I32(v),
                    (_, Value::I64(v)) => Val::I64(v),
                    (_, Value::F32(v)) => Val::F32(v),
                    (_, Value::F64(v)) => Val::F64(v),
                    (_, Value::V128(v)) => Val::V128(v.into()),
                    (ty, _) => Val::null_ref(ty.unwrap_ref().heap_type()),
                };
            }
            Ok(())
        });
        out.push(func.into());
    }
    Some(out)
}

fn wasmtime_kind(ty: &ValType) -> wasmtime_mmu_fuzz::value::Kind {
    use wasmtime_mmu_fuzz::value::Kind;
    match ty {
        ValType::I32 => Kind::I32,
        ValType::I64 => Kind::I64,
        ValType::F32 => Kind::F32,
        ValType::F64 => Kind::F64,
        ValType::V128 => Kind::V128,
        _ if ty.is_externref() => Kind::ExternRef,
        _ => Kind::FuncRef,
    }
}

/// A host function's argument as a hashable value (references only by
/// null-ness: host functions of the drawn modules take numbers).
fn number(val: &Val) -> Value {
    match val {
        Val::I32(v) => Value::I32(*v),
        Val::I64(v) => Value::I64(*v),
        Val::F32(v) => Value::F32(*v),
        Val::F64(v) => Value::F64(*v),
        Val::V128(v) => Value::V128(v.as_u128()),
        Val::FuncRef(f) => Value::FuncRef {
            non_null: f.is_some(),
        },
        _ => Value::ExternRef(None),
    }
}

/// An instance's exports, in the module's export order (the same for every
/// instance of it).
struct View {
    instance: Instance,
    /// Exported functions other than the probes: name, handle, parameters.
    funcs: Vec<(String, Func, Vec<ValType>)>,
    /// The probes: name, what it probes, handle.
    probes: Vec<(String, String, Func)>,
    memories: Vec<(String, Memory)>,
    tables: Vec<(String, Table, ValType)>,
    /// Name, handle, type, mutability.
    globals: Vec<(String, Global, ValType, bool)>,
    /// A function's raw reference to the position in `funcs` of its first
    /// export; for an imported function, also the instance's own copy of
    /// its reference (`Instrumented::import_refs`).
    func_positions: HashMap<usize, usize>,
}

impl View {
    fn new(
        store: &mut Store<Host>,
        module: &Module,
        instance: Instance,
        instrumented: &reset::Instrumented,
    ) -> View {
        let probes = &instrumented.probes;
        let import_refs = &instrumented.import_refs;
        let mut view = View {
            instance,
            funcs: Vec::new(),
            probes: Vec::new(),
            memories: Vec::new(),
            tables: Vec::new(),
            globals: Vec::new(),
            func_positions: HashMap::new(),
        };
        for export in module.exports() {
            let name = export.name().to_string();
            match export.ty() {
                ExternType::Func(ty) => {
                    let func = instance.get_func(&mut *store, &name).unwrap();
                    if let Some((_, what)) = probes.iter().find(|(p, _)| *p == name) {
                        view.probes.push((name, what.clone(), func));
                        continue;
                    }
                    if import_refs.iter().any(|(r, _)| *r == name) {
                        continue;
                    }
                    let raw = func.to_raw(&mut *store) as usize;
                    view.func_positions.entry(raw).or_insert(view.funcs.len());
                    view.funcs.push((name, func, ty.params().collect()));
                }
                ExternType::Memory(_) => {
                    let memory = instance.get_memory(&mut *store, &name).unwrap();
                    view.memories.push((name, memory));
                }
                ExternType::Table(ty) => {
                    let table = instance.get_table(&mut *store, &name).unwrap();
                    view.tables.push((name, table, ty.element().clone().into()));
                }
                ExternType::Global(ty) => {
                    let global = instance.get_global(&mut *store, &name).unwrap();
                    let mutable = ty.mutability() == Mutability::Var;
                    view.globals
                        .push((name, global, ty.content().clone(), mutable));
                }
                // A tag has no contents to restore or compare: reset keeps
                // the instance and so its tag identities, while a fresh
                // instance has new ones by definition.
                ExternType::Tag(_) => {}
            }
        }
        for (ref_func, import) in import_refs {
            let local = instance.get_func(&mut *store, ref_func).unwrap();
            let mut result = [Val::I32(0)];
            store.set_fuel(FUEL).unwrap();
            local.call(&mut *store, &[], &mut result).unwrap();
            let Val::FuncRef(Some(local)) = result[0] else {
                panic!("{ref_func} returned {:?}", result[0]);
            };
            let local = local.to_raw(&mut *store) as usize;
            let host = instance.get_func(&mut *store, import).unwrap();
            let host = host.to_raw(&mut *store) as usize;
            let position = view.func_positions[&host];
            view.func_positions.insert(local, position);
        }
        view
    }

    fn class(&self, store: &mut Store<Host>, val: &Val) -> Class {
        match val {
            Val::I32(v) => Class::I32(*v),
            Val::I64(v) => Class::I64(*v),
            Val::F32(v) => Class::F32(*v),
            Val::F64(v) => Class::F64(*v),
            Val::V128(v) => Class::V128(v.as_u128()),
            Val::FuncRef(f) => self.func_class(store, f.as_ref()),
            Val::ExternRef(e) => extern_class(store, e.as_ref()),
            other => Class::Other(format!("{other:?}")),
        }
    }

    fn ref_class(&self, store: &mut Store<Host>, r: &Ref) -> Class {
        match r {
            Ref::Func(f) => self.func_class(store, f.as_ref()),
            Ref::Extern(e) => extern_class(store, e.as_ref()),
            other => Class::Other(format!("{other:?}")),
        }
    }

    fn func_class(&self, store: &mut Store<Host>, f: Option<&Func>) -> Class {
        let Some(f) = f else {
            return Class::Null;
        };
        let raw = f.to_raw(&mut *store) as usize;
        match self.func_positions.get(&raw) {
            Some(&position) => Class::Func(position),
            None => {
                stats::bump("funcref_of_another_instance");
                Class::ForeignFunc
            }
        }
    }

    /// `arg` as a value in this instance (a function argument names this
    /// instance's function at that export position).
    fn val(&self, store: &mut Store<Host>, arg: &Arg) -> Val {
        match *arg {
            Arg::Number(Value::I32(v)) => Val::I32(v),
            Arg::Number(Value::I64(v)) => Val::I64(v),
            Arg::Number(Value::F32(v)) => Val::F32(v),
            Arg::Number(Value::F64(v)) => Val::F64(v),
            Arg::Number(Value::V128(v)) => Val::V128(v.into()),
            Arg::Func(position) => Val::FuncRef(position.map(|p| self.funcs[p].1)),
            Arg::Extern(payload) => Val::ExternRef(
                payload.map(|n| ExternRef::new(&mut *store, n).expect("an externref")),
            ),
            Arg::Number(other) => panic!("not a number argument: {other:?}"),
        }
    }

    fn reference(&self, store: &mut Store<Host>, arg: &Arg) -> Ref {
        self.val(store, arg).ref_().expect("a reference argument")
    }
}

fn extern_class(store: &Store<Host>, e: Option<&wasmtime::Rooted<ExternRef>>) -> Class {
    let Some(e) = e else {
        return Class::Null;
    };
    let payload = e
        .data(store)
        .ok()
        .flatten()
        .and_then(|d| d.downcast_ref::<u64>().copied());
    // Every extern reference comes from this harness with a `u64`.
    Class::Extern(payload.unwrap_or(u64::MAX))
}

/// A value as compared between instances: numbers by their bits, a
/// `funcref` by the export position of what it names.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Class {
    I32(i32),
    I64(i64),
    F32(u32),
    F64(u64),
    V128(u128),
    Null,
    Func(usize),
    ForeignFunc,
    Extern(u64),
    Other(String),
}

/// Everything observable of an instance from the host, in export order.
#[derive(Debug, PartialEq)]
struct State {
    memories: Vec<Vec<u8>>,
    tables: Vec<Vec<Class>>,
    globals: Vec<Class>,
}

impl State {
    fn of(store: &mut Store<Host>, view: &View) -> State {
        let memories = view
            .memories
            .iter()
            .map(|(_, m)| m.data(&*store).to_vec())
            .collect();
        let tables = view
            .tables
            .iter()
            .map(|(_, t, _)| {
                (0..t.size(&*store))
                    .map(|i| {
                        let r = t.get(&mut *store, i).expect("an element below the size");
                        view.ref_class(store, &r)
                    })
                    .collect()
            })
            .collect();
        let globals = view
            .globals
            .iter()
            .map(|(_, g, _, _)| {
                let v = g.get(&mut *store);
                view.class(store, &v)
            })
            .collect();
        State {
            memories,
            tables,
            globals,
        }
    }

    /// The differences from `other`, described with `view`'s names; empty
    /// if there are none.
    fn differences(&self, other: &State, view: &View) -> String {
        let mut out = String::new();
        for ((a, b), (name, _)) in self
            .memories
            .iter()
            .zip(&other.memories)
            .zip(&view.memories)
        {
            if a.len() != b.len() {
                let _ = writeln!(out, "memory {name:?}: {} bytes, {} bytes", a.len(), b.len());
            }
            let differing: Vec<usize> = (0..a.len().min(b.len()))
                .filter(|&i| a[i] != b[i])
                .collect();
            if let (Some(first), Some(last)) = (differing.first(), differing.last()) {
                let _ = writeln!(
                    out,
                    "memory {name:?}: {} bytes differ, from {first:#x} ({:#04x} vs {:#04x}) to {last:#x}; \
                     host pages {:#x}..={:#x}",
                    differing.len(),
                    a[*first],
                    b[*first],
                    first / 4096,
                    last / 4096
                );
            }
        }
        for ((a, b), (name, _, _)) in self.tables.iter().zip(&other.tables).zip(&view.tables) {
            if a.len() != b.len() {
                let _ = writeln!(out, "table {name:?}: {} elements, {}", a.len(), b.len());
            }
            for (i, (x, y)) in a.iter().zip(b).enumerate().filter(|(_, (x, y))| x != y) {
                let _ = writeln!(out, "table {name:?}[{i}]: {x:?} vs {y:?}");
            }
        }
        for ((a, b), (name, ..)) in self.globals.iter().zip(&other.globals).zip(&view.globals) {
            if a != b {
                let _ = writeln!(out, "global {name:?}: {a:?} vs {b:?}");
            }
        }
        out
    }
}

/// An argument, drawn once and applied to either instance.
#[derive(Clone, Debug)]
enum Arg {
    Number(Value),
    /// A `funcref`: null, or the function at this export position.
    Func(Option<usize>),
    Extern(Option<u64>),
}

impl Arg {
    fn arbitrary(u: &mut Unstructured<'_>, ty: &ValType, view: &View) -> Result<Arg> {
        use wasmtime_mmu_fuzz::value::Kind;
        Ok(match wasmtime_kind(ty) {
            Kind::FuncRef => Arg::Func(if view.funcs.is_empty() || u.ratio(1, 4)? {
                None
            } else {
                Some(u.choose_index(view.funcs.len())?)
            }),
            Kind::ExternRef => Arg::Extern(if u.ratio(1, 4)? {
                None
            } else {
                Some(u.int_in_range(0..=1000)?)
            }),
            kind => Arg::Number(Value::arbitrary(u, kind)?),
        })
    }
}

/// One thing done to an instance. Offsets and indices are reduced modulo
/// the current size when applied, so a step means the same in both
/// instances whenever their sizes agree.
#[derive(Clone, Debug)]
enum Step {
    Call {
        func: usize,
        args: Vec<Arg>,
    },
    /// Bytes written at an offset (within one or two pages).
    Write {
        memory: usize,
        offset: u32,
        bytes: Vec<u8>,
    },
    /// `len` copies of `byte` from an offset: many pages at once.
    Fill {
        memory: usize,
        offset: u32,
        len: u32,
        byte: u8,
    },
    /// One byte every `stride` bytes over the whole memory: many scattered
    /// pages.
    Sprinkle {
        memory: usize,
        stride: u32,
        phase: u32,
        byte: u8,
    },
    GrowMemory {
        memory: usize,
        pages: u64,
    },
    GrowTable {
        table: usize,
        delta: u64,
        init: Arg,
    },
    SetTable {
        table: usize,
        index: u32,
        value: Arg,
    },
    SetGlobal {
        global: usize,
        value: Arg,
    },
}

impl Step {
    fn arbitrary(u: &mut Unstructured<'_>, view: &View) -> Result<Step> {
        let memories = view.memories.len();
        let tables = view.tables.len();
        let mutable: Vec<usize> = (0..view.globals.len())
            .filter(|&g| view.globals[g].3)
            .collect();
        let mut kinds = Vec::new();
        if !view.funcs.is_empty() {
            kinds.extend([0, 0, 0, 0]);
        }
        if memories > 0 {
            kinds.extend([1, 1, 2, 3, 4]);
        }
        if tables > 0 {
            kinds.extend([5, 6]);
        }
        if !mutable.is_empty() {
            kinds.push(7);
        }
        if kinds.is_empty() {
            return Err(arbitrary::Error::NotEnoughData);
        }
        Ok(match *u.choose(&kinds)? {
            0 => {
                let func = u.choose_index(view.funcs.len())?;
                let args = view.funcs[func]
                    .2
                    .iter()
                    .map(|ty| Arg::arbitrary(u, ty, view))
                    .collect::<Result<_>>()?;
                Step::Call { func, args }
            }
            1 => Step::Write {
                memory: u.choose_index(memories)?,
                offset: u.arbitrary()?,
                bytes: {
                    let len = u.int_in_range(1..=64)?;
                    u.bytes(len)?.to_vec()
                },
            },
            2 => Step::Fill {
                memory: u.choose_index(memories)?,
                offset: u.arbitrary()?,
                len: *u.choose(&[1, 4096, 4097, 65536, 300_000, 4 << 20])?,
                byte: u.arbitrary()?,
            },
            3 => Step::Sprinkle {
                memory: u.choose_index(memories)?,
                stride: 4096 * u.int_in_range(1..=17)?,
                phase: u.arbitrary()?,
                byte: u.arbitrary()?,
            },
            4 => Step::GrowMemory {
                memory: u.choose_index(memories)?,
                pages: u.int_in_range(0..=4)?,
            },
            5 => {
                let table = u.choose_index(tables)?;
                Step::GrowTable {
                    table,
                    delta: *u.choose(&[0, 1, 3, 16, 100])?,
                    init: Arg::arbitrary(u, &view.tables[table].2, view)?,
                }
            }
            6 => {
                let table = u.choose_index(tables)?;
                Step::SetTable {
                    table,
                    index: u.arbitrary()?,
                    value: Arg::arbitrary(u, &view.tables[table].2, view)?,
                }
            }
            _ => {
                let global = *u.choose(&mutable)?;
                Step::SetGlobal {
                    global,
                    value: Arg::arbitrary(u, &view.globals[global].2, view)?,
                }
            }
        })
    }

    fn apply(&self, store: &mut Store<Host>, view: &View) -> Outcome {
        match self {
            Step::Call { func, args } => {
                let (_, f, _) = &view.funcs[*func];
                let params: Vec<Val> = args.iter().map(|a| view.val(store, a)).collect();
                call(store, view, *f, &params)
            }
            Step::Write {
                memory,
                offset,
                bytes,
            } => {
                let data = view.memories[*memory].1.data_mut(&mut *store);
                if !data.is_empty() {
                    let at = *offset as usize % data.len();
                    let n = bytes.len().min(data.len() - at);
                    data[at..at + n].copy_from_slice(&bytes[..n]);
                }
                Outcome::Done
            }
            Step::Fill {
                memory,
                offset,
                len,
                byte,
            } => {
                let data = view.memories[*memory].1.data_mut(&mut *store);
                if !data.is_empty() {
                    let at = *offset as usize % data.len();
                    let n = (*len as usize).min(data.len() - at);
                    data[at..at + n].fill(*byte);
                }
                Outcome::Done
            }
            Step::Sprinkle {
                memory,
                stride,
                phase,
                byte,
            } => {
                let data = view.memories[*memory].1.data_mut(&mut *store);
                let stride = *stride as usize;
                let mut at = *phase as usize % stride;
                while at < data.len() {
                    data[at] = *byte;
                    at += stride;
                }
                Outcome::Done
            }
            Step::GrowMemory { memory, pages } => {
                Outcome::Grew(view.memories[*memory].1.grow(&mut *store, *pages).ok())
            }
            Step::GrowTable { table, delta, init } => {
                let init = view.reference(store, init);
                Outcome::Grew(view.tables[*table].1.grow(&mut *store, *delta, init).ok())
            }
            Step::SetTable {
                table,
                index,
                value,
            } => {
                let t = view.tables[*table].1;
                let size = t.size(&*store);
                // One past the end now and then: an error, in both.
                let index = u64::from(*index) % (size + 1);
                let value = view.reference(store, value);
                Outcome::Set(t.set(&mut *store, index, value).is_ok())
            }
            Step::SetGlobal { global, value } => {
                let value = view.val(store, value);
                Outcome::Set(view.globals[*global].1.set(&mut *store, value).is_ok())
            }
        }
    }
}

/// How a step ended.
#[derive(Debug, PartialEq)]
enum Outcome {
    Returned(Vec<Class>),
    /// A trap, by `Trap` variant (running out of fuel included).
    Trap(String),
    /// Any other error, by message.
    Error(String),
    /// A growth: the old size, or `None` if it failed.
    Grew(Option<u64>),
    /// A host store: whether it succeeded.
    Set(bool),
    Done,
}

fn call(store: &mut Store<Host>, view: &View, f: Func, params: &[Val]) -> Outcome {
    let mut results = vec![Val::I32(0); f.ty(&*store).results().len()];
    store.set_fuel(FUEL).unwrap();
    match f.call(&mut *store, params, &mut results) {
        Ok(()) => Outcome::Returned(results.iter().map(|r| view.class(store, r)).collect()),
        Err(e) => match e.downcast_ref::<Trap>() {
            Some(trap) => {
                if *trap == Trap::OutOfFuel {
                    stats::bump("calls_out_of_fuel");
                }
                Outcome::Trap(format!("{trap:?}"))
            }
            None => Outcome::Error(e.to_string()),
        },
    }
}

/// What one cycle does, drawn before it runs.
#[derive(Debug)]
struct Plan {
    /// Done to A before the reset.
    before: Vec<Step>,
    /// `MADV_PAGEOUT` over A's memories before the reset.
    pageout: bool,
    /// Done to both A and B after the reset (and the probes).
    after: Vec<Step>,
}

impl Plan {
    fn arbitrary(u: &mut Unstructured<'_>, view: &View) -> Result<Plan> {
        let before = if u.ratio(1, 5)? {
            0
        } else {
            u.int_in_range(1..=16)?
        };
        let before = (0..before)
            .map(|_| Step::arbitrary(u, view))
            .collect::<Result<_>>()
            .unwrap_or_default();
        let pageout = u.ratio(1, 8)?;
        let after = u.int_in_range(0..=6)?;
        let after = (0..after)
            .map(|_| Step::arbitrary(u, view))
            .collect::<Result<_>>()
            .unwrap_or_default();
        Ok(Plan {
            before,
            pageout,
            after,
        })
    }
}

#[allow(clippy::too_many_arguments, reason = "one cycle's whole context")]
fn run_cycle(
    store: &mut Store<Host>,
    module: &Module,
    instrumented: &reset::Instrumented,
    imports: &[wasmtime::Extern],
    va: &View,
    pristine: &Option<State>,
    plan: &Plan,
    context: impl Fn(&str) -> String,
) -> bool {
    let mut log = String::new();
    for step in &plan.before {
        let outcome = step.apply(store, va);
        let _ = writeln!(log, "  {step:?} -> {outcome:?}");
    }
    if plan.before.is_empty() {
        stats::bump("cycles_without_changes");
    }
    if plan.pageout {
        pageout(store, va);
    }
    if let Err(e) = va.instance.reset(&mut *store) {
        if known_bug(&format!("{e:?}")) {
            return false;
        }
        panic!(
            "reset failed: {e:?}\n{}",
            context(&format!("done to A before:\n{log}"))
        );
    }
    reset::count_reset_cycle();

    store.set_fuel(FUEL).unwrap();
    let b = match Instance::new(&mut *store, module, imports) {
        Ok(b) => b,
        Err(e) if known_bug(&format!("{e:?}")) => return false,
        Err(e) => panic!(
            "a fresh instantiation failed where the first one succeeded: {e:?}\n{}",
            context("")
        ),
    };
    let vb = View::new(store, module, b, instrumented);
    // `against_pristine`: right after the reset, A must also equal what it
    // was right after its own instantiation (which a bug that corrupted
    // instantiation itself, in B too, would not keep equal).
    let check = |store: &mut Store<Host>, when: &str, against_pristine: bool| {
        let (sa, sb) = (State::of(store, va), State::of(store, &vb));
        let differences = sa.differences(&sb, va);
        if !differences.is_empty() {
            panic!(
                "A after reset differs from a fresh instance B ({when}):\n{differences}{}",
                context(&format!("done to A before the reset:\n{log}"))
            );
        }
        if let Some(pristine) = pristine
            && against_pristine
        {
            let differences = sa.differences(pristine, va);
            if !differences.is_empty() {
                panic!(
                    "A after reset differs from A right after its instantiation (B agrees \
                     with A):\n{differences}{}",
                    context(&format!("done to A before the reset:\n{log}"))
                );
            }
        }
    };
    check(store, "right after the reset", true);

    for ((name, what, pa), (_, _, pb)) in va.probes.iter().zip(&vb.probes) {
        let (oa, ob) = (call(store, va, *pa, &[]), call(store, &vb, *pb, &[]));
        stats::bump(if oa == Outcome::Returned(Vec::new()) {
            "probe_segment_live"
        } else {
            "probe_segment_dropped_or_trapped"
        });
        if oa != ob {
            panic!(
                "drop flag probe {name} ({what}): A after reset {oa:?}, fresh B {ob:?}\n{}",
                context(&format!("done to A before the reset:\n{log}"))
            );
        }
    }
    let mut lockstep = String::new();
    for step in &plan.after {
        let (oa, ob) = (step.apply(store, va), step.apply(store, &vb));
        let _ = writeln!(lockstep, "  {step:?} -> {oa:?}");
        if oa != ob {
            panic!(
                "the same step differs: A after reset {oa:?}, fresh B {ob:?}\nstep: {step:?}\n{}",
                context(&format!(
                    "done to A before the reset:\n{log}done to both after:\n{lockstep}"
                ))
            );
        }
        stats::bump("lockstep_steps_equal");
    }
    check(store, "after the probes and the steps done to both", false);
    true
}

/// `MADV_PAGEOUT` over every memory of `view`: asks the kernel to reclaim
/// the pages now, which only happens to anonymous and shared-memory pages
/// when there is swap (`reset::swap_present`).
fn pageout(store: &mut Store<Host>, view: &View) {
    for (_, memory) in &view.memories {
        // Through a shared borrow: `data_ptr` would tell the engine that the
        // host may write the memory at any time, and turn write marks off.
        let data = memory.data(&*store);
        let (ptr, len) = (data.as_ptr(), data.len());
        if len == 0 {
            continue;
        }
        // SAFETY: the range is the memory's accessible part, mapped and
        // page-aligned; `MADV_PAGEOUT` never changes what it holds (the
        // kernel only moves the pages out), so the shared borrow it came
        // from is not written through.
        let rc = unsafe { libc::madvise(ptr.cast_mut().cast(), len, libc::MADV_PAGEOUT) };
        stats::bump(match (rc, reset::swap_present()) {
            (0, true) => "pageout_with_swap",
            (0, false) => "pageout_without_swap_no_effect",
            _ => "pageout_failed",
        });
        if rc == 0 && reset::swap_present() {
            // What the reset will meet: pages the kernel really moved out
            // (the advice is only a request).
            stats::add("pages_in_swap_after_pageout", pages_in_swap(ptr, len));
        }
    }
}

/// How many pages of `ptr..ptr + len` (page-aligned) the kernel's page
/// map says are in swap (bit 62 of each `/proc/self/pagemap` entry).
fn pages_in_swap(ptr: *const u8, len: usize) -> u64 {
    use std::os::unix::fs::FileExt;
    const PAGE: usize = 4096;
    const SWAPPED: u64 = 1 << 62;
    let Ok(map) = std::fs::File::open("/proc/self/pagemap") else {
        stats::bump("pagemap_unreadable");
        return 0;
    };
    let mut entries = vec![0u8; len / PAGE * 8];
    if map
        .read_exact_at(&mut entries, (ptr as usize / PAGE * 8) as u64)
        .is_err()
    {
        stats::bump("pagemap_unreadable");
        return 0;
    }
    entries
        .chunks_exact(8)
        .filter(|e| u64::from_ne_bytes((*e).try_into().unwrap()) & SWAPPED != 0)
        .count() as u64
}

/// With `FUZZ_DUMP_WASM=path`, writes the module (before the rewrite);
/// with `FUZZ_DUMP_DATA=path`, the data after it, as in `differential`
/// (`corpus-seed input` makes an input of an edited module and these).
fn dump(wasm: &[u8], u: &Unstructured<'_>) {
    if let Ok(path) = std::env::var("FUZZ_DUMP_WASM") {
        std::fs::write(path, wasm).unwrap();
    }
    if let Ok(path) = std::env::var("FUZZ_DUMP_DATA") {
        std::fs::write(path, u.peek_bytes(u.len()).unwrap()).unwrap();
    }
}
