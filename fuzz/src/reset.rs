//! The `reset` target's pieces that are not about running: its engine
//! knobs, its `wasm-smith` configuration, the rewrite that exports every
//! entity and adds drop-flag probes, and its reset-cycle counter.
//!
//! Input layout as in `generate.rs`: first byte odd, an embedded module
//! (the seed corpus's spec modules); otherwise `wasm-smith` data, drawn
//! with [`smith_config`] rather than the differential target's
//! configuration, so that memories, tables, globals and data and element
//! segments, passive ones included, are in most modules.

use crate::config::{MemoryKnobs, OptLevel, features};
use crate::generate::{Purpose, module_and_rest as embedded_or_smith};
use crate::stats;
use arbitrary::{Result, Unstructured};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;
use wasm_encoder::reencode::{self, Reencode};
use wasm_encoder::{ExportKind, SectionId};
use wasmparser::{ElementItems, ExternalKind, Parser, Payload, RefType, TypeRef};

/// Fuel for each instantiation and each call: generous for a module of a
/// few hundred instructions, small enough that a loop that never ends
/// costs well under a millisecond. Running out is an ordinary trap, and
/// happens at the same instruction in the reset instance and the fresh one.
pub const FUEL: u64 = 100_000;

/// Bytes a linear memory may grow to (`StoreLimits`): a few MiB, so that
/// comparing every byte after every reset stays cheap.
pub const MEMORY_LIMIT: usize = 4 << 20;
/// Elements a table may grow to.
pub const TABLE_LIMIT: usize = 2_000;

/// [`wasmtime::ResetPolicy`], hashable, for caching engines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    Copy,
    ShootdownFree { resident_budget: usize },
    Decommit,
}

impl Policy {
    pub fn to_wasmtime(self) -> wasmtime::ResetPolicy {
        match self {
            Policy::Copy => wasmtime::ResetPolicy::Copy,
            Policy::ShootdownFree { resident_budget } => {
                wasmtime::ResetPolicy::ShootdownFree { resident_budget }
            }
            Policy::Decommit => wasmtime::ResetPolicy::Decommit,
        }
    }
}

/// Everything of the engine's configuration this target draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Knobs {
    pub policy: Policy,
    /// `Config::memory_init_cow`.
    pub memory_init_cow: bool,
    /// Layout: a reservation of 0 makes every growth move the memory (and
    /// a reset of a moved memory takes its own path, a fresh mapping).
    pub memory: MemoryKnobs,
    pub opt_level: OptLevel,
    /// MMU polls compiled in (never armed): memories then carry a poll
    /// page below their base, which a moving reset re-registers.
    pub mmu_polls: bool,
    /// The pooling allocator, sometimes: memories in warm slots that other
    /// inputs' instances used before.
    pub pool: Option<PoolKnobs>,
    /// `Config::track_memory_writes`: resets read the write marks compiled
    /// stores set, and ask the kernel only after the host wrote.
    pub write_marks: bool,
}

/// A pooling allocator's release policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PoolKnobs {
    /// `linear_memory_keep_resident`.
    pub keep_resident: usize,
    /// `pagemap_scan` (`Enabled::Auto` when true).
    pub pagemap_scan: bool,
    /// `max_unused_warm_slots`.
    pub warm_slots: u32,
}

/// Slots of a fuzzing pool: A and up to eight B's of one store, one memory
/// each (`max_memories_per_module` is 1), with room to spare. Small,
/// because every pooled engine in the cache reserves this many 4 GiB
/// slots for the life of the process.
const POOL_SLOTS: u32 = 12;

impl Knobs {
    pub fn arbitrary(u: &mut Unstructured<'_>) -> Result<Knobs> {
        let policy = match u.int_in_range(0..=5)? {
            0 | 1 => Policy::Copy,
            2 => Policy::Decommit,
            // From a budget no written set fits in (every reset decommits)
            // to one every set fits in (none does).
            _ => Policy::ShootdownFree {
                resident_budget: *u.choose(&[0, 4096, 16 << 10, 256 << 10, 1 << 20, 1 << 30])?,
            },
        };
        let memory_init_cow = u.ratio(3, 4)?;
        let guard_before = u.arbitrary()?;
        let memory = match u.int_in_range(0..=2)? {
            // Large reservations: growth in place, or refused when the
            // memory may not move past them.
            0 => MemoryKnobs {
                reservation: *u.choose(&[4 << 30, 8 << 30])?,
                guard: *u.choose(&[32 << 20, 2 << 30, 0, 1 << 16])?,
                reservation_for_growth: 2 << 30,
                may_move: !u.ratio(1, 4)?,
                guard_before,
            },
            // Every growth (or nearly) moves the memory.
            1 => MemoryKnobs {
                reservation: 0,
                guard: *u.choose(&[0, 1 << 16])?,
                reservation_for_growth: *u.choose(&[0, 1 << 16])?,
                may_move: true,
                guard_before,
            },
            // Small reservations: some growths fit, some move.
            _ => MemoryKnobs {
                reservation: *u.choose(&[1 << 16, 1 << 20, 16 << 20])?,
                guard: *u.choose(&[0, 1 << 16, 32 << 20])?,
                reservation_for_growth: *u.choose(&[0, 1 << 16, 1 << 20])?,
                may_move: true,
                guard_before,
            },
        };
        let opt_level = *u.choose(&[OptLevel::Speed, OptLevel::None])?;
        let mmu_polls = u.ratio(1, 4)?;
        let pool = if u.ratio(1, 3)? {
            Some(PoolKnobs {
                keep_resident: *u.choose(&[0, 8 << 10, 1 << 20])?,
                pagemap_scan: u.arbitrary()?,
                warm_slots: *u.choose(&[0, 2, 100])?,
            })
        } else {
            None
        };
        // Pooled slots have one fixed layout (the default one), so that the
        // cache holds few pooled engines and their reservations stay small.
        let memory = match pool {
            Some(_) => MemoryKnobs {
                reservation: 4 << 30,
                guard: 32 << 20,
                reservation_for_growth: 2 << 30,
                may_move: false,
                guard_before,
            },
            None => memory,
        };
        // Drawn last, so that the draws before it mean what they meant
        // before the knob existed.
        let write_marks = u.arbitrary()?;
        Ok(Knobs {
            policy,
            memory_init_cow,
            memory,
            opt_level,
            mmu_polls,
            pool,
            write_marks,
        })
    }

    pub fn engine_config(&self) -> wasmtime::Config {
        let mut c = wasmtime::Config::new();
        c.wasm_features(wasmparser::WasmFeatures::all(), false);
        c.wasm_features(features(), true);
        c.parallel_compilation(false);
        c.cranelift_opt_level(match self.opt_level {
            OptLevel::None => wasmtime::OptLevel::None,
            OptLevel::Speed => wasmtime::OptLevel::Speed,
            OptLevel::SpeedAndSize => wasmtime::OptLevel::SpeedAndSize,
        });
        c.memory_reservation(self.memory.reservation);
        c.memory_guard_size(self.memory.guard);
        c.memory_reservation_for_growth(self.memory.reservation_for_growth);
        c.memory_may_move(self.memory.may_move);
        c.guard_before_linear_memory(self.memory.guard_before);
        c.consume_fuel(true);
        c.mmu_interruption(self.mmu_polls);
        c.memory_init_cow(self.memory_init_cow);
        c.instance_reset_policy(self.policy.to_wasmtime());
        c.track_memory_writes(self.write_marks);
        if let Some(pool) = self.pool {
            let mut p = wasmtime::PoolingAllocationConfig::new();
            p.total_memories(POOL_SLOTS)
                .total_core_instances(4 * POOL_SLOTS)
                .total_tables(16 * POOL_SLOTS)
                .total_stacks(1)
                .max_tables_per_module(16)
                .table_elements(TABLE_LIMIT)
                .max_memory_size(4 << 30)
                .max_core_instance_size(64 << 20)
                .linear_memory_keep_resident(pool.keep_resident)
                .max_unused_warm_slots(pool.warm_slots)
                .pagemap_scan(if pool.pagemap_scan {
                    wasmtime::Enabled::Auto
                } else {
                    wasmtime::Enabled::No
                });
            c.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(p));
        }
        c
    }
}

/// The most engines [`engine`] keeps. The knobs combine into thousands of
/// engines, and a pooled one reserves about 50 GiB of address space and
/// many mappings up front: a run of the 2026-12-06 (with the write-marks
/// knob, which doubled the combinations) ran out of address space after
/// about 18 minutes with an unbounded cache.
const CACHED_ENGINES: usize = 64;

/// The engine for `knobs`, cached (as `engines::ours_engine` does), at
/// most [`CACHED_ENGINES`] at a time: a full cache is emptied (engines of
/// the current input live on in the caller's clone).
pub fn engine(knobs: &Knobs) -> wasmtime::Engine {
    static ENGINES: OnceLock<Mutex<HashMap<Knobs, wasmtime::Engine>>> = OnceLock::new();
    let mut engines = ENGINES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if engines.len() >= CACHED_ENGINES && !engines.contains_key(knobs) {
        engines.clear();
        crate::stats::bump("reset_engine_cache_emptied");
    }
    engines
        .entry(*knobs)
        .or_insert_with(|| {
            wasmtime::Engine::new(&knobs.engine_config())
                .unwrap_or_else(|e| panic!("our engine rejects {knobs:?}: {e:?}"))
        })
        .clone()
}

/// Splits `data` into a module and the data left for everything else, as
/// `generate::module_and_rest` does, with [`smith_config`] for the
/// `wasm-smith` case.
pub fn module_and_rest(data: &[u8]) -> Option<(Vec<u8>, Unstructured<'_>)> {
    match data.first() {
        Some(kind) if kind & 1 == 1 => embedded_or_smith(data, Purpose::Differential),
        _ => {
            let mut u = Unstructured::new(data.get(1..).unwrap_or(&[]));
            let config = smith_config(&mut u).ok()?;
            let wasm = wasm_smith::Module::new(config, &mut u).ok()?.to_bytes();
            Some((wasm, u))
        }
    }
}

/// A swarm `wasm-smith` configuration for resets: the proposals of
/// `config::features` with bulk memory always on (passive segments and
/// their drop flags are part of what a reset restores), at least one
/// memory, table, global and segment in most modules, small memories,
/// everything exported, and imports only of host functions, from
/// [`host_import_module`] (a reset refuses instances whose segments write
/// imported memories or tables, and imported state is not the instance's
/// to restore).
pub fn smith_config(u: &mut Unstructured<'_>) -> Result<wasm_smith::Config> {
    let reference_types = u.ratio(3, 4)?;
    let with_imports = u.ratio(1, 3)?;
    let max_memories = u.int_in_range(1..=3)?;
    let max_tables = if reference_types {
        u.int_in_range(1..=3)?
    } else {
        1
    };
    let max_globals = u.int_in_range(1..=12)?;
    let max_data_segments = u.int_in_range(1..=8)?;
    let max_element_segments = u.int_in_range(1..=8)?;
    Ok(wasm_smith::Config {
        simd_enabled: u.ratio(1, 2)?,
        bulk_memory_enabled: true,
        reference_types_enabled: reference_types,
        multi_value_enabled: u.ratio(3, 4)?,
        saturating_float_to_int_enabled: u.ratio(3, 4)?,
        sign_extension_ops_enabled: u.ratio(3, 4)?,
        extended_const_enabled: u.arbitrary()?,
        allow_floats: u.ratio(7, 8)?,
        min_memories: u32::from(u.ratio(7, 8)?),
        max_memories,
        min_tables: u32::from(u.ratio(3, 4)?),
        max_tables,
        min_globals: u.int_in_range(0..=max_globals.min(3))?,
        max_globals,
        min_data_segments: u.int_in_range(0..=max_data_segments.min(2))?,
        max_data_segments,
        min_element_segments: u.int_in_range(0..=max_element_segments.min(2))?,
        max_element_segments,
        max_elements: u.int_in_range(1..=40)?,
        max_table_elements: *u.choose(&[4, 32, 256, 1000])?,
        // At most 4 MiB at instantiation (and the store lets nothing grow
        // past `MEMORY_LIMIT`), so comparing every byte stays cheap.
        max_memory32_bytes: *u.choose(&[1 << 16, 2 << 16, 8 << 16, 1 << 20, 4 << 20])?,
        memory_max_size_required: u.ratio(1, 4)?,
        min_funcs: 1,
        max_funcs: u.int_in_range(1..=12)?,
        max_instructions: u.int_in_range(1..=300)?,
        max_types: u.int_in_range(1..=20)?,
        max_imports: if with_imports { 6 } else { 0 },
        available_imports: with_imports.then(host_import_module),
        max_nesting_depth: u.int_in_range(1..=10)?,
        export_everything: true,
        disallow_traps: u.ratio(1, 4)?,
        ..crate::generate::proposals_both_engines_run()
    })
}

/// A module that only imports host functions, of MVP signatures (the only
/// ones valid under every feature set [`smith_config`] draws):
/// `wasm-smith` picks its imports among these.
pub fn host_import_module() -> Vec<u8> {
    use wasm_encoder::ValType::{F32, F64, I32, I64};
    let signatures: [(&[wasm_encoder::ValType], &[wasm_encoder::ValType]); 6] = [
        (&[], &[]),
        (&[I32], &[I32]),
        (&[I64, I32], &[I64]),
        (&[F32, F64], &[F64]),
        (&[I32, I32, I32], &[]),
        (&[], &[F32]),
    ];
    let mut types = wasm_encoder::TypeSection::new();
    let mut imports = wasm_encoder::ImportSection::new();
    for (i, (params, results)) in signatures.iter().enumerate() {
        types
            .ty()
            .function(params.iter().copied(), results.iter().copied());
        imports.import(
            "host",
            &format!("f{i}"),
            wasm_encoder::EntityType::Function(i as u32),
        );
    }
    let mut module = wasm_encoder::Module::new();
    module.section(&types).section(&imports);
    module.finish()
}

/// A module after [`instrument`].
pub struct Instrumented {
    pub wasm: Vec<u8>,
    /// The probe functions, by export name, with what each one probes.
    pub probes: Vec<(String, String)>,
    /// For each imported function: the export of a function returning
    /// `ref.func` of it, and an export of the function itself. An instance
    /// refers to an imported function through its own copy of the
    /// function's reference, so the references in its tables and globals
    /// are not the imported `Func`'s: these say which address is which.
    pub import_refs: Vec<(String, String)>,
}

/// The prefix of every export [`instrument`] adds.
pub const ADDED_EXPORT_PREFIX: &str = "__reset_";

/// What a function [`instrument`] adds does: `memory.init`/`table.init`
/// of a probe, or returning `ref.func` of an imported function.
#[derive(Clone, Copy, Debug)]
enum ProbeOp {
    MemoryInit { memory: u32, data: u32 },
    TableInit { table: u32, elem: u32 },
    RefFunc { func: u32 },
}

/// What the rewrite needs to know of a module.
#[derive(Default)]
struct Shape {
    types: u32,
    funcs: u32,
    imported_funcs: u32,
    /// The first export of each exported function.
    func_exports: HashMap<u32, String>,
    tables: Vec<RefType>,
    memories: u32,
    globals: u32,
    /// Length of each data segment.
    data: Vec<usize>,
    /// Element type and length of each element segment.
    elems: Vec<(RefType, u32)>,
    exported: HashSet<(u8, u32)>,
    names: HashSet<String>,
    has_data_count: bool,
}

fn kind_code(kind: ExportKind) -> u8 {
    match kind {
        ExportKind::Func => 0,
        ExportKind::Table => 1,
        ExportKind::Memory => 2,
        ExportKind::Global => 3,
        _ => 4,
    }
}

fn scan(wasm: &[u8]) -> wasmparser::Result<Shape> {
    let mut shape = Shape::default();
    for payload in Parser::new(0).parse_all(wasm) {
        match payload? {
            Payload::TypeSection(reader) => {
                for group in reader {
                    shape.types += group?.into_types().count() as u32;
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    match import?.ty {
                        TypeRef::Func(_) | TypeRef::FuncExact(_) => {
                            shape.funcs += 1;
                            shape.imported_funcs += 1;
                        }
                        TypeRef::Table(t) => shape.tables.push(t.element_type),
                        TypeRef::Memory(_) => shape.memories += 1,
                        TypeRef::Global(_) => shape.globals += 1,
                        TypeRef::Tag(_) => {}
                    }
                }
            }
            Payload::FunctionSection(reader) => shape.funcs += reader.count(),
            Payload::TableSection(reader) => {
                for table in reader {
                    shape.tables.push(table?.ty.element_type);
                }
            }
            Payload::MemorySection(reader) => shape.memories += reader.count(),
            Payload::GlobalSection(reader) => shape.globals += reader.count(),
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export?;
                    shape.names.insert(export.name.to_string());
                    let kind = match export.kind {
                        ExternalKind::Func | ExternalKind::FuncExact => ExportKind::Func,
                        ExternalKind::Table => ExportKind::Table,
                        ExternalKind::Memory => ExportKind::Memory,
                        ExternalKind::Global => ExportKind::Global,
                        ExternalKind::Tag => ExportKind::Tag,
                    };
                    shape.exported.insert((kind_code(kind), export.index));
                    if kind == ExportKind::Func {
                        shape
                            .func_exports
                            .entry(export.index)
                            .or_insert_with(|| export.name.to_string());
                    }
                }
            }
            Payload::ElementSection(reader) => {
                for elem in reader {
                    shape.elems.push(match elem?.items {
                        ElementItems::Functions(r) => (RefType::FUNCREF, r.count()),
                        ElementItems::Expressions(ty, r) => (ty, r.count()),
                    });
                }
            }
            Payload::DataCountSection { .. } => shape.has_data_count = true,
            Payload::DataSection(reader) => {
                for data in reader {
                    shape.data.push(data?.data.len());
                }
            }
            _ => {}
        }
    }
    Ok(shape)
}

/// Most probes a module gets (a memory or table per segment each).
const MAX_PROBES: usize = 64;

struct Rewrite {
    shape: Shape,
    probes: Vec<(String, ProbeOp)>,
    exports: Vec<(String, ExportKind, u32)>,
    /// Which of type, function, export, data count and code sections are
    /// written (the module's own, extended, or one added).
    done: [bool; 5],
}

const TYPES: usize = 0;
const FUNCS: usize = 1;
const EXPORTS: usize = 2;
const DATA_COUNT: usize = 3;
const CODE: usize = 4;

/// Where a section goes in a module (the binary format's order).
fn rank(id: SectionId) -> u8 {
    match id {
        SectionId::Type => 1,
        SectionId::Import => 2,
        SectionId::Function => 3,
        SectionId::Table => 4,
        SectionId::Memory => 5,
        SectionId::Tag => 6,
        SectionId::Global => 7,
        SectionId::Export => 8,
        SectionId::Start => 9,
        SectionId::Element => 10,
        SectionId::DataCount => 11,
        SectionId::Code => 12,
        SectionId::Data => 13,
        _ => 0,
    }
}

impl Rewrite {
    /// The index of the added type of `op`'s function: `() -> ()` first,
    /// `() -> funcref` next, after every type of the module.
    fn type_of(&self, op: ProbeOp) -> u32 {
        match op {
            ProbeOp::RefFunc { .. } => self.shape.types + 1,
            _ => self.shape.types,
        }
    }

    fn add_types(&mut self, types: &mut wasm_encoder::TypeSection) {
        if !self.probes.is_empty() {
            types.ty().function([], []);
            types.ty().function(
                [],
                [wasm_encoder::ValType::Ref(wasm_encoder::RefType::FUNCREF)],
            );
        }
        self.done[TYPES] = true;
    }

    fn add_funcs(&mut self, funcs: &mut wasm_encoder::FunctionSection) {
        for (_, op) in &self.probes {
            funcs.function(self.type_of(*op));
        }
        self.done[FUNCS] = true;
    }

    fn add_exports(&mut self, exports: &mut wasm_encoder::ExportSection) {
        for (name, kind, index) in &self.exports {
            exports.export(name, *kind, *index);
        }
        for (i, (name, _)) in self.probes.iter().enumerate() {
            exports.export(name, ExportKind::Func, self.shape.funcs + i as u32);
        }
        self.done[EXPORTS] = true;
    }

    fn add_bodies(&mut self, code: &mut wasm_encoder::CodeSection) {
        for (_, op) in &self.probes {
            let mut f = wasm_encoder::Function::new([]);
            let mut sink = f.instructions();
            // Destination 0, source 0, one element: traps exactly when the
            // segment was dropped (it is not empty) or the destination is
            // empty, which is the same for both instances.
            match *op {
                ProbeOp::MemoryInit { memory, data } => sink
                    .i32_const(0)
                    .i32_const(0)
                    .i32_const(1)
                    .memory_init(memory, data),
                ProbeOp::TableInit { table, elem } => sink
                    .i32_const(0)
                    .i32_const(0)
                    .i32_const(1)
                    .table_init(table, elem),
                // Valid: every function is exported, which declares it.
                ProbeOp::RefFunc { func } => sink.ref_func(func),
            };
            sink.end();
            code.function(&f);
        }
        self.done[CODE] = true;
    }

    fn needs_data_count(&self) -> bool {
        !self.shape.has_data_count
            && self
                .probes
                .iter()
                .any(|(_, op)| matches!(op, ProbeOp::MemoryInit { .. }))
    }
}

impl Reencode for Rewrite {
    type Error = std::convert::Infallible;

    fn parse_type_section(
        &mut self,
        types: &mut wasm_encoder::TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> std::result::Result<(), reencode::Error<Self::Error>> {
        reencode::utils::parse_type_section(self, types, section)?;
        self.add_types(types);
        Ok(())
    }

    fn parse_function_section(
        &mut self,
        funcs: &mut wasm_encoder::FunctionSection,
        section: wasmparser::FunctionSectionReader<'_>,
    ) -> std::result::Result<(), reencode::Error<Self::Error>> {
        reencode::utils::parse_function_section(self, funcs, section)?;
        self.add_funcs(funcs);
        Ok(())
    }

    fn parse_export_section(
        &mut self,
        exports: &mut wasm_encoder::ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> std::result::Result<(), reencode::Error<Self::Error>> {
        reencode::utils::parse_export_section(self, exports, section)?;
        self.add_exports(exports);
        Ok(())
    }

    fn parse_code_section(
        &mut self,
        code: &mut wasm_encoder::CodeSection,
        section: wasmparser::CodeSectionReader<'_>,
    ) -> std::result::Result<(), reencode::Error<Self::Error>> {
        reencode::utils::parse_code_section(self, code, section)?;
        self.add_bodies(code);
        Ok(())
    }

    /// Writes the sections the module lacks and the additions need, where
    /// the binary format wants them: before the first section that must
    /// follow them (a section the module has is extended where it is).
    fn intersperse_section_hook(
        &mut self,
        module: &mut wasm_encoder::Module,
        _after: Option<SectionId>,
        before: Option<SectionId>,
    ) -> std::result::Result<(), reencode::Error<Self::Error>> {
        let next = before.map_or(u8::MAX, rank);
        let has_probes = !self.probes.is_empty();
        if has_probes && !self.done[TYPES] && next > rank(SectionId::Type) {
            let mut types = wasm_encoder::TypeSection::new();
            self.add_types(&mut types);
            module.section(&types);
        }
        if has_probes && !self.done[FUNCS] && next > rank(SectionId::Function) {
            let mut funcs = wasm_encoder::FunctionSection::new();
            self.add_funcs(&mut funcs);
            module.section(&funcs);
        }
        let has_exports = has_probes || !self.exports.is_empty();
        if has_exports && !self.done[EXPORTS] && next > rank(SectionId::Export) {
            let mut exports = wasm_encoder::ExportSection::new();
            self.add_exports(&mut exports);
            module.section(&exports);
        }
        if self.needs_data_count() && !self.done[DATA_COUNT] && next > rank(SectionId::DataCount) {
            self.done[DATA_COUNT] = true;
            module.section(&wasm_encoder::DataCountSection {
                count: self.shape.data.len() as u32,
            });
        }
        if has_probes && !self.done[CODE] && next > rank(SectionId::Code) {
            let mut code = wasm_encoder::CodeSection::new();
            self.add_bodies(&mut code);
            module.section(&code);
        }
        Ok(())
    }
}

/// `wasm` with an export for every function, table, memory and global
/// that had none (`__reset_func3`, ...), so that every part of an
/// instance's state can be compared from the host, and one exported probe
/// function per pair of a non-empty data segment and a memory, and of a
/// non-empty element segment and a table of its type (up to
/// [`MAX_PROBES`]): `memory.init`/`table.init` of one item at 0, which
/// traps or not depending on the segment's drop flag; and one exported
/// function per imported function returning `ref.func` of it (see
/// [`Instrumented::import_refs`]). `None` if `wasm` is not valid under
/// `config::features` (the added functions could make some invalid
/// modules valid: an element naming a function one past the last).
///
/// # Panics
///
/// If the rewritten module does not validate (a bug here).
pub fn instrument(wasm: &[u8]) -> Option<Instrumented> {
    let valid = |bytes: &[u8]| {
        wasmparser::Validator::new_with_features(features())
            .validate_all(bytes)
            .is_ok()
    };
    if !valid(wasm) {
        return None;
    }
    let shape = scan(wasm).ok()?;
    let mut names = shape.names.clone();
    let mut fresh = |base: String| {
        let mut name = base;
        while !names.insert(name.clone()) {
            name.push('_');
        }
        name
    };
    let mut exports = Vec::new();
    let mut func_exports = shape.func_exports.clone();
    for (kind, count, label) in [
        (ExportKind::Func, shape.funcs, "func"),
        (ExportKind::Table, shape.tables.len() as u32, "table"),
        (ExportKind::Memory, shape.memories, "memory"),
        (ExportKind::Global, shape.globals, "global"),
    ] {
        for index in 0..count {
            if !shape.exported.contains(&(kind_code(kind), index)) {
                let name = fresh(format!("{ADDED_EXPORT_PREFIX}{label}{index}"));
                if kind == ExportKind::Func {
                    func_exports.insert(index, name.clone());
                }
                exports.push((name, kind, index));
            }
        }
    }
    let mut probes = Vec::new();
    for (data, &len) in shape.data.iter().enumerate() {
        for memory in (0..shape.memories).filter(|_| len > 0) {
            let name = fresh(format!(
                "{ADDED_EXPORT_PREFIX}probe_data{data}_memory{memory}"
            ));
            let data = data as u32;
            probes.push((name, ProbeOp::MemoryInit { memory, data }));
        }
    }
    for (elem, &(ty, len)) in shape.elems.iter().enumerate() {
        for (table, _) in (shape.tables.iter().enumerate()).filter(|(_, t)| **t == ty && len > 0) {
            let name = fresh(format!(
                "{ADDED_EXPORT_PREFIX}probe_elem{elem}_table{table}"
            ));
            let (table, elem) = (table as u32, elem as u32);
            probes.push((name, ProbeOp::TableInit { table, elem }));
        }
    }
    probes.truncate(MAX_PROBES);
    let mut import_refs = Vec::new();
    for func in 0..shape.imported_funcs {
        let name = fresh(format!("{ADDED_EXPORT_PREFIX}ref_func{func}"));
        import_refs.push((name.clone(), func_exports[&func].clone()));
        probes.push((name, ProbeOp::RefFunc { func }));
    }
    let mut rewrite = Rewrite {
        shape,
        probes,
        exports,
        done: [false; 5],
    };
    let mut module = wasm_encoder::Module::new();
    rewrite
        .parse_core_module(&mut module, Parser::new(0), wasm)
        .ok()?;
    let out = module.finish();
    assert!(valid(&out), "the reset rewrite broke a valid module");
    let probes = rewrite
        .probes
        .iter()
        .filter(|(_, op)| !matches!(op, ProbeOp::RefFunc { .. }))
        .map(|(name, op)| (name.clone(), format!("{op:?}")))
        .collect();
    Some(Instrumented {
        wasm: out,
        probes,
        import_refs,
    })
}

static RESET_CYCLES: AtomicU64 = AtomicU64::new(0);

/// Counts one reset that was then compared (a reset cycle), and prints a
/// summary line every 100,000.
pub fn count_reset_cycle() {
    static STARTED: OnceLock<Instant> = OnceLock::new();
    let started = *STARTED.get_or_init(Instant::now);
    let n = RESET_CYCLES.fetch_add(1, Ordering::Relaxed) + 1;
    stats::bump("reset_cycles");
    if n.is_multiple_of(100_000) {
        let secs = started.elapsed().as_secs_f64();
        eprintln!(
            "reset: {n} reset cycles compared in {secs:.0} s ({:.0}/s), no difference",
            n as f64 / secs.max(1e-9)
        );
    }
}

/// Whether the machine has swap (`/proc/swaps` lists a device): only then
/// can `MADV_PAGEOUT` actually push a memory's pages out, so that a reset
/// meets swapped-out pages.
pub fn swap_present() -> bool {
    static SWAP: OnceLock<bool> = OnceLock::new();
    *SWAP.get_or_init(|| {
        std::fs::read_to_string("/proc/swaps").is_ok_and(|s| s.lines().nth(1).is_some())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instrument_adds_exports_and_probes() {
        // (module (memory 1) (table 2 funcref) (global (mut i32) (i32.const 1))
        //   (func $f) (elem (i32.const 0) $f) (elem funcref (ref.func $f))
        //   (data (i32.const 0) "a") (data "bc"))
        use wasm_encoder as we;
        let mut m = we::Module::new();
        let mut types = we::TypeSection::new();
        types.ty().function([], []);
        m.section(&types);
        let mut funcs = we::FunctionSection::new();
        funcs.function(0);
        m.section(&funcs);
        let mut tables = we::TableSection::new();
        tables.table(we::TableType {
            element_type: we::RefType::FUNCREF,
            table64: false,
            minimum: 2,
            maximum: None,
            shared: false,
        });
        m.section(&tables);
        let mut memories = we::MemorySection::new();
        memories.memory(we::MemoryType {
            minimum: 1,
            maximum: None,
            memory64: false,
            shared: false,
            page_size_log2: None,
        });
        m.section(&memories);
        let mut globals = we::GlobalSection::new();
        globals.global(
            we::GlobalType {
                val_type: we::ValType::I32,
                mutable: true,
                shared: false,
            },
            &we::ConstExpr::i32_const(1),
        );
        m.section(&globals);
        let mut elems = we::ElementSection::new();
        elems.active(
            None,
            &we::ConstExpr::i32_const(0),
            we::Elements::Functions([0].as_slice().into()),
        );
        elems.passive(we::Elements::Expressions(
            we::RefType::FUNCREF,
            [we::ConstExpr::ref_func(0)].as_slice().into(),
        ));
        m.section(&elems);
        m.section(&we::DataCountSection { count: 2 });
        let mut code = we::CodeSection::new();
        let mut f = we::Function::new([]);
        f.instructions().end();
        code.function(&f);
        m.section(&code);
        let mut data = we::DataSection::new();
        data.active(0, &we::ConstExpr::i32_const(0), b"a".iter().copied());
        data.passive(b"bc".iter().copied());
        m.section(&data);
        let wasm = m.finish();

        let out = instrument(&wasm).unwrap();
        wasmparser::Validator::new_with_features(features())
            .validate_all(&out.wasm)
            .unwrap();
        // Two data segments × one memory, two element segments × one table.
        assert_eq!(out.probes.len(), 4);
        let shape = scan(&out.wasm).unwrap();
        // The four entities and the four probes.
        assert_eq!(shape.exported.len(), 4 + 4);
        assert_eq!(shape.funcs, 1 + 4);
    }
}
