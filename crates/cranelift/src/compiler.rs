//! Orchestration: per-function compilation (in parallel), extraction of trap
//! sites, source locations and relocations from Cranelift's output, and the
//! layout of one text section with all calls between its functions resolved.

use crate::Compiler;
use crate::translate::translate_function;
use anyhow::{Context as _, Result, anyhow, bail};
use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::{self, ExternalName, LibCall, TrapCode, UserFuncName};
use cranelift_codegen::isa::{CallConv, TargetIsa};
use cranelift_codegen::print_errors::pretty_error;
use cranelift_codegen::{
    Context, ExceptionContextLoc, FinalizedMachExceptionHandler, FinalizedRelocTarget,
};
use cranelift_frontend::FunctionBuilderContext;
use rayon::prelude::*;
use target_lexicon::Architecture;
use wasmparser::FuncValidatorAllocations;
use wasmtime_mmu_environ::builtins::HostLibcall;
use wasmtime_mmu_environ::{
    AddressMapEntry, CATCH_ALL_TAG, CompiledModuleArtifacts, DefinedFuncIndex, EntityRef,
    ExceptionHandler, ExceptionSite, FunctionBodyData, FunctionLoc, MemoryIndex, MemoryPlan,
    MmuInterruptionMode, ModuleInfo, ModuleTranslation, PrimaryMap, Relocation, Trap, TrapSite,
    TrapSiteKind, Tunables, TypeIndex, VMOffsets, WasmFuncType, WasmValType, mmu_poll,
};

/// Alignment of every function in the text.
const FUNCTION_ALIGNMENT: u32 = 16;

/// User trap code for [`TrapSiteKind::HostCallFailed`]; Wasm traps use
/// `1 + Trap as u8` (see [`trap_code`]).
const HOST_CALL_FAILED_CODE: u8 = 250;
/// User trap code for [`TrapSiteKind::MmuPoll`].
const MMU_POLL_CODE: u8 = 249;

/// The Cranelift trap code that records `trap`.
pub(crate) fn trap_code(trap: Trap) -> TrapCode {
    match trap {
        Trap::StackOverflow => TrapCode::STACK_OVERFLOW,
        Trap::MemoryOutOfBounds => TrapCode::HEAP_OUT_OF_BOUNDS,
        Trap::IntegerOverflow => TrapCode::INTEGER_OVERFLOW,
        Trap::IntegerDivisionByZero => TrapCode::INTEGER_DIVISION_BY_ZERO,
        Trap::BadConversionToInteger => TrapCode::BAD_CONVERSION_TO_INTEGER,
        other => TrapCode::unwrap_user(1 + other as u8),
    }
}

/// The Cranelift trap code for a failed builtin or host call.
pub(crate) const fn host_call_failed_code() -> TrapCode {
    TrapCode::unwrap_user(HOST_CALL_FAILED_CODE)
}

/// The Cranelift trap code of an MMU-interruption poll.
pub(crate) const fn mmu_poll_code() -> TrapCode {
    TrapCode::unwrap_user(MMU_POLL_CODE)
}

fn trap_site_kind(code: TrapCode) -> Result<TrapSiteKind> {
    Ok(TrapSiteKind::Trap(match code {
        TrapCode::STACK_OVERFLOW => Trap::StackOverflow,
        TrapCode::HEAP_OUT_OF_BOUNDS => Trap::MemoryOutOfBounds,
        TrapCode::INTEGER_OVERFLOW => Trap::IntegerOverflow,
        TrapCode::INTEGER_DIVISION_BY_ZERO => Trap::IntegerDivisionByZero,
        TrapCode::BAD_CONVERSION_TO_INTEGER => Trap::BadConversionToInteger,
        other if other == host_call_failed_code() => return Ok(TrapSiteKind::HostCallFailed),
        other if other == mmu_poll_code() => return Ok(TrapSiteKind::MmuPoll),
        other => other
            .as_raw()
            .get()
            .checked_sub(1)
            .and_then(Trap::from_u8)
            .ok_or_else(|| anyhow!("Cranelift emitted unknown trap code {other}"))?,
    }))
}

/// Module-wide facts every function translation needs.
pub(crate) struct ModuleContext<'a> {
    pub module: &'a ModuleInfo,
    pub offsets: VMOffsets,
    pub isa: &'a dyn TargetIsa,
    pub tunables: &'a Tunables,
    pub memory_plans: PrimaryMap<MemoryIndex, MemoryPlan>,
}

impl<'a> ModuleContext<'a> {
    pub fn new(compiler: &'a Compiler, module: &'a ModuleInfo) -> ModuleContext<'a> {
        ModuleContext {
            module,
            offsets: VMOffsets::new(module),
            isa: &*compiler.isa,
            tunables: &compiler.tunables,
            memory_plans: module
                .memories
                .values()
                .map(|ty| MemoryPlan::for_memory(ty, &compiler.tunables))
                .collect(),
        }
    }
}

/// The Cranelift type of a Wasm value.
pub(crate) fn value_type(ty: WasmValType) -> ir::Type {
    match ty {
        WasmValType::I32 => ir::types::I32,
        WasmValType::I64 => ir::types::I64,
        WasmValType::F32 => ir::types::F32,
        WasmValType::F64 => ir::types::F64,
        WasmValType::V128 => ir::types::I8X16,
        WasmValType::Ref(_) => ir::types::I64,
    }
}

/// The signature of a Wasm function of type `ty`:
/// `(callee_vmctx, caller_vmctx, params...) -> results` with the tail
/// convention.
pub(crate) fn wasm_signature(ty: &WasmFuncType) -> ir::Signature {
    let mut sig = ir::Signature::new(CallConv::Tail);
    sig.params.push(ir::AbiParam::special(
        ir::types::I64,
        ir::ArgumentPurpose::VMContext,
    ));
    sig.params.push(ir::AbiParam::new(ir::types::I64));
    sig.params
        .extend(ty.params.iter().map(|t| ir::AbiParam::new(value_type(*t))));
    sig.returns
        .extend(ty.results.iter().map(|t| ir::AbiParam::new(value_type(*t))));
    sig
}

/// What a relocation in one compiled function points at.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RelocTarget {
    /// A defined function of the module being compiled.
    Func(DefinedFuncIndex),
    /// A host math routine, patched in by the runtime.
    Libcall(HostLibcall),
}

/// A relocation inside one compiled function.
#[derive(Clone, Debug)]
pub(crate) struct FuncReloc {
    pub offset: u32,
    pub kind: Reloc,
    pub addend: i64,
    pub target: RelocTarget,
}

/// The machine code of one function plus what the text needs about it.
pub(crate) struct CompiledFunc {
    pub code: Vec<u8>,
    pub alignment: u32,
    pub relocs: Vec<FuncReloc>,
    pub traps: Vec<(u32, TrapSiteKind)>,
    /// `(code offset, wasm offset)` at each change of source location.
    pub srclocs: Vec<(u32, u32)>,
    /// The calls with exception handlers and their handlers, offsets
    /// relative to the function (`handlers_end` counts within the
    /// function's own handlers).
    pub exception_sites: Vec<ExceptionSite>,
    /// Those sites' handlers, site after site.
    pub exception_handlers: Vec<ExceptionHandler>,
    /// Disassembly, when asked for.
    pub disasm: Option<String>,
}

/// Reusable per-thread compilation state.
pub(crate) struct ThreadState {
    pub builder_ctx: FunctionBuilderContext,
    pub codegen_ctx: Context,
    pub validator_allocs: FuncValidatorAllocations,
}

impl Default for ThreadState {
    fn default() -> ThreadState {
        ThreadState {
            builder_ctx: FunctionBuilderContext::new(),
            codegen_ctx: Context::new(),
            validator_allocs: FuncValidatorAllocations::default(),
        }
    }
}

fn libcall_target(libcall: LibCall) -> Result<HostLibcall> {
    Ok(match libcall {
        LibCall::FloorF32 => HostLibcall::FloorF32,
        LibCall::FloorF64 => HostLibcall::FloorF64,
        LibCall::CeilF32 => HostLibcall::CeilF32,
        LibCall::CeilF64 => HostLibcall::CeilF64,
        LibCall::TruncF32 => HostLibcall::TruncF32,
        LibCall::TruncF64 => HostLibcall::TruncF64,
        LibCall::NearestF32 => HostLibcall::NearestF32,
        LibCall::NearestF64 => HostLibcall::NearestF64,
        LibCall::FmaF32 => HostLibcall::FmaF32,
        LibCall::FmaF64 => HostLibcall::FmaF64,
        LibCall::X86Pshufb => HostLibcall::X86Pshufb,
        other => bail!("Cranelift emitted a call to unsupported libcall `{other}`"),
    })
}

/// Runs Cranelift on the function in `ctx` and extracts everything the
/// text needs from the result.
pub(crate) fn codegen(
    isa: &dyn TargetIsa,
    ctx: &mut Context,
    want_disasm: bool,
) -> Result<CompiledFunc> {
    ctx.set_disasm(want_disasm);
    ctx.compile(isa, &mut ControlPlane::default())
        .map_err(|e| anyhow!("Cranelift failed: {}", pretty_error(e.func, e.inner)))?;
    let code = ctx.compiled_code().expect("just compiled");
    let buffer = &code.buffer;
    let names = ctx.func.params.user_named_funcs();
    let mut relocs = Vec::with_capacity(buffer.relocs().len());
    for r in buffer.relocs() {
        let target = match &r.target {
            FinalizedRelocTarget::ExternalName(ExternalName::User(name)) => {
                RelocTarget::Func(DefinedFuncIndex::from_u32(names[*name].index))
            }
            FinalizedRelocTarget::ExternalName(ExternalName::LibCall(lc)) => {
                if r.kind != Reloc::Abs8 || r.addend != 0 {
                    bail!("unexpected relocation {:?} for libcall `{lc}`", r.kind);
                }
                RelocTarget::Libcall(libcall_target(*lc)?)
            }
            other => bail!("unexpected relocation target {other:?}"),
        };
        relocs.push(FuncReloc {
            offset: r.offset,
            kind: r.kind,
            addend: r.addend,
            target,
        });
    }
    let traps = buffer
        .traps()
        .iter()
        .map(|t| Ok((t.offset, trap_site_kind(t.code)?)))
        .collect::<Result<Vec<_>>>()?;
    let mut srclocs: Vec<(u32, u32)> = Vec::new();
    for loc in buffer.get_srclocs_sorted() {
        if loc.loc.is_default() {
            continue;
        }
        if srclocs.last().is_none_or(|&(_, w)| w != loc.loc.bits()) {
            srclocs.push((loc.start, loc.loc.bits()));
        }
    }
    let (exception_sites, exception_handlers) = exception_sites(buffer)?;
    let alignment = FUNCTION_ALIGNMENT.max(isa.function_alignment().preferred);
    Ok(CompiledFunc {
        code: buffer.data().to_vec(),
        alignment,
        relocs,
        traps,
        srclocs,
        exception_sites,
        exception_handlers,
        disasm: code.vcode.clone(),
    })
}

/// The calls of a compiled function that have exception handlers (see
/// `exceptions.rs`), as the runtime's unwinder reads them.
fn exception_sites(
    buffer: &cranelift_codegen::MachBufferFinalized<cranelift_codegen::Final>,
) -> Result<(Vec<ExceptionSite>, Vec<ExceptionHandler>)> {
    let mut sites = Vec::new();
    let mut handlers = Vec::new();
    for site in buffer.call_sites() {
        if site.exception_handlers.is_empty() {
            continue;
        }
        let mut context = None;
        for handler in site.exception_handlers {
            match *handler {
                FinalizedMachExceptionHandler::Context(ExceptionContextLoc::SPOffset(o)) => {
                    context = Some(o)
                }
                FinalizedMachExceptionHandler::Context(ExceptionContextLoc::GPR(r)) => {
                    bail!("Cranelift kept an exception context in register {r}, not in the frame")
                }
                FinalizedMachExceptionHandler::Tag(tag, target) => {
                    handlers.push(ExceptionHandler {
                        tag: tag.as_u32(),
                        target_offset: target,
                    })
                }
                FinalizedMachExceptionHandler::Default(target) => handlers.push(ExceptionHandler {
                    tag: CATCH_ALL_TAG,
                    target_offset: target,
                }),
            }
        }
        let context_offset =
            context.context("a call with exception handlers has no context in its frame")?;
        let frame_offset = site
            .frame_offset
            .context("a call with exception handlers has no known frame size")?;
        sites.push(ExceptionSite {
            return_offset: site.ret_addr,
            frame_offset,
            context_offset,
            handlers_end: u32::try_from(handlers.len()).context("too many exception handlers")?,
        });
    }
    Ok((sites, handlers))
}

fn compile_function(
    cx: &ModuleContext<'_>,
    index: DefinedFuncIndex,
    body: FunctionBodyData<'_>,
    ts: &mut ThreadState,
    want_disasm: bool,
) -> Result<(CompiledFunc, String)> {
    let func_index = cx.module.func_index(index);
    let ty = cx.module.func_type(func_index);
    let mut func = ir::Function::with_name_signature(
        UserFuncName::user(0, func_index.as_u32()),
        wasm_signature(ty),
    );
    let mut validator = body
        .validator
        .into_validator(std::mem::take(&mut ts.validator_allocs));
    if let Err(e) = translate_function(
        cx,
        &mut func,
        &mut ts.builder_ctx,
        &mut validator,
        &body.body,
    ) {
        // An aborted translation leaves the builder context mid-function.
        ts.builder_ctx = FunctionBuilderContext::new();
        return Err(e);
    }
    ts.validator_allocs = validator.into_allocations();
    ts.codegen_ctx.clear();
    ts.codegen_ctx.func = func;
    let name = cx
        .module
        .func_name(func_index)
        .map(|n| format!(" `{n}`"))
        .unwrap_or_default();
    let compiled = codegen(cx.isa, &mut ts.codegen_ctx, want_disasm)
        .with_context(|| format!("compiling function {}{name}", func_index.as_u32()))?;
    if cx.tunables.mmu_interruption
        && cx.tunables.mmu_interruption_mode == MmuInterruptionMode::PointerSwap
    {
        check_slot_polls(cx.isa, &compiled)
            .with_context(|| format!("compiling function {}{name}", func_index.as_u32()))?;
    }
    let clif = if want_disasm {
        ts.codegen_ctx.func.display().to_string()
    } else {
        String::new()
    };
    Ok((compiled, clif))
}

/// Checks that every MMU poll of a function compiled for pointer-swap
/// polls is an instruction the signal handler can repair: a 32-bit load
/// from a base register plus an immediate, decoded by the same function the
/// handler uses (`wasmtime_mmu_environ::mmu_poll`). A Cranelift that
/// lowered the poll otherwise would make interrupts crash the process;
/// failing here turns that into a compile error.
fn check_slot_polls(isa: &dyn TargetIsa, compiled: &CompiledFunc) -> Result<()> {
    let arch = isa.triple().architecture;
    for &(offset, kind) in &compiled.traps {
        if kind != TrapSiteKind::MmuPoll {
            continue;
        }
        let code = compiled.code.get(offset as usize..).unwrap_or_default();
        let decoded = match arch {
            Architecture::X86_64 => mmu_poll::decode_x86_64(code),
            Architecture::Aarch64(_) => mmu_poll::decode_aarch64_code(code),
            other => bail!("pointer-swap MMU polls are not supported on {other}"),
        };
        let Some(load) = decoded else {
            bail!(
                "internal compiler error: the MMU poll at code offset {offset:#x} is not a \
                 32-bit load from a base register plus an immediate ({:02x?})",
                &code[..code.len().min(8)]
            );
        };
        // The handler repairs only a base register that holds exactly the
        // unreadable page's address, so the load must add nothing to it.
        if load.displacement != 0 {
            bail!(
                "internal compiler error: the MMU poll at code offset {offset:#x} reads at \
                 displacement {} from the reloaded page, not 0",
                load.displacement
            );
        }
        // The aarch64 trampoline resumes through x16 (and Cranelift may use
        // x17 as scratch), so neither may be the register it repairs.
        if matches!(arch, Architecture::Aarch64(_)) && matches!(load.base, 16 | 17) {
            bail!(
                "internal compiler error: the MMU poll at code offset {offset:#x} reads \
                 through x{}, a scratch register",
                load.base
            );
        }
    }
    Ok(())
}

/// Compiles `items` with `f`, in parallel when `parallel`, keeping order and
/// reporting the first error in order.
fn map_maybe_parallel<T: Send, R: Send>(
    parallel: bool,
    items: Vec<T>,
    f: impl Fn(&mut ThreadState, T) -> Result<R> + Sync + Send,
) -> Result<Vec<R>> {
    // A panic inside Cranelift is a compiler bug, but it must not take the
    // embedder down: report it as an error and start over with fresh state.
    let f = |ts: &mut ThreadState, item: T| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(ts, item))).unwrap_or_else(
            |payload| {
                *ts = ThreadState::default();
                let msg = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                Err(anyhow!("internal compiler error: {msg}"))
            },
        )
    };
    let results: Vec<Result<R>> = if parallel {
        items
            .into_par_iter()
            .map_init(ThreadState::default, |ts, item| f(ts, item))
            .collect()
    } else {
        let mut ts = ThreadState::default();
        items.into_iter().map(|item| f(&mut ts, item)).collect()
    };
    results.into_iter().collect()
}

pub(crate) fn compile_module(
    compiler: &Compiler,
    translation: ModuleTranslation<'_>,
) -> Result<CompiledModuleArtifacts> {
    let ModuleTranslation {
        module,
        function_bodies,
        ..
    } = translation;
    let cx = ModuleContext::new(compiler, &module);
    let bodies: Vec<(DefinedFuncIndex, FunctionBodyData<'_>)> =
        function_bodies.into_iter().collect();
    let funcs = map_maybe_parallel(compiler.parallel, bodies, |ts, (index, body)| {
        compile_function(&cx, index, body, ts, false).map(|(f, _)| f)
    })?;
    let types: Vec<TypeIndex> = module.types.keys().collect();
    let trampolines = map_maybe_parallel(compiler.parallel, types, |ts, ty| {
        crate::trampolines::compile_entry(compiler, &module.types[ty], &mut ts.codegen_ctx)
    })?;
    // Host functions are what a module's imports are usually bound to; their
    // trampolines compiled here, in parallel and cached with the module,
    // spare every process that loads it a compile per type.
    let mut host_types: Vec<TypeIndex> = module
        .functions
        .iter()
        .take(module.num_imported_funcs as usize)
        .map(|(_, ty)| *ty)
        .collect();
    host_types.sort_unstable();
    host_types.dedup();
    let host_trampolines = map_maybe_parallel(compiler.parallel, host_types.clone(), |ts, ty| {
        crate::trampolines::compile_wasm_to_host_func(
            compiler,
            &module.types[ty],
            &mut ts.codegen_ctx,
        )
    })?;
    let num_entry_trampolines = trampolines.len();
    let (mut artifacts, trampoline_locs) = link(
        compiler.isa.as_ref(),
        funcs,
        trampolines.into_iter().chain(host_trampolines).collect(),
    )?;
    let mut trampoline_locs = trampoline_locs.into_iter();
    artifacts.entry_trampolines = trampoline_locs
        .by_ref()
        .take(num_entry_trampolines)
        .collect();
    artifacts.host_trampolines = host_types.into_iter().zip(trampoline_locs).collect();
    Ok(artifacts)
}

/// Lays out `funcs` then `trampolines` in one text and resolves the calls
/// between them. Returns the artifacts with their function table, and the
/// trampolines' places in order (which table each belongs to is the
/// caller's to say).
fn link(
    isa: &dyn TargetIsa,
    funcs: Vec<CompiledFunc>,
    trampolines: Vec<CompiledFunc>,
) -> Result<(CompiledModuleArtifacts, Vec<FunctionLoc>)> {
    let mut artifacts = CompiledModuleArtifacts::default();
    let mut text = isa.text_section_builder(funcs.len() + trampolines.len());
    let mut ctrl = ControlPlane::default();
    let num_funcs = funcs.len();
    let mut locs = Vec::with_capacity(funcs.len() + trampolines.len());
    for (i, f) in funcs.iter().chain(trampolines.iter()).enumerate() {
        let start = text.append(true, &f.code, f.alignment, &mut ctrl);
        let start = u32::try_from(start).context("text section larger than 4 GiB")?;
        for r in &f.relocs {
            let at = start + r.offset;
            match r.target {
                RelocTarget::Func(callee) => {
                    if callee.index() >= num_funcs {
                        bail!("call to unknown function {}", callee.index());
                    }
                    if !text.resolve_reloc(u64::from(at), r.kind, r.addend, callee.index()) {
                        bail!("cannot resolve relocation {:?} in the text", r.kind);
                    }
                }
                RelocTarget::Libcall(target) => artifacts
                    .relocations
                    .push(Relocation { offset: at, target }),
            }
        }
        artifacts
            .trap_sites
            .extend(f.traps.iter().map(|&(o, kind)| TrapSite {
                code_offset: start + o,
                kind,
            }));
        let handlers_base = artifacts.exceptions.handlers.len() as u32;
        for site in &f.exception_sites {
            artifacts.exceptions.sites.push(ExceptionSite {
                return_offset: start + site.return_offset,
                handlers_end: handlers_base + site.handlers_end,
                ..*site
            });
        }
        artifacts
            .exceptions
            .handlers
            .extend(f.exception_handlers.iter().map(|h| ExceptionHandler {
                tag: h.tag,
                target_offset: start + h.target_offset,
            }));
        let is_trampoline = i >= num_funcs;
        if is_trampoline || f.srclocs.first().is_none_or(|&(o, _)| o != 0) {
            // Code without a Wasm location (prologues, trampolines) maps to
            // the function's first operator, or nowhere for trampolines.
            let wasm_offset = match (is_trampoline, f.srclocs.first()) {
                (false, Some(&(_, w))) => w,
                _ => u32::MAX,
            };
            artifacts.address_map.push(AddressMapEntry {
                code_offset: start,
                wasm_offset,
            });
        }
        artifacts
            .address_map
            .extend(f.srclocs.iter().map(|&(o, w)| AddressMapEntry {
                code_offset: start + o,
                wasm_offset: w,
            }));
        locs.push(FunctionLoc {
            start,
            len: u32::try_from(f.code.len()).context("function larger than 4 GiB")?,
        });
    }
    artifacts.text = text.finish(&mut ctrl);
    let trampoline_locs = locs.split_off(num_funcs);
    artifacts.functions = locs.into_iter().collect();
    artifacts.trap_sites.sort_by_key(|t| t.code_offset);
    artifacts.address_map.sort_by_key(|e| e.code_offset);
    artifacts.relocations.sort_by_key(|r| r.offset);
    Ok((artifacts, trampoline_locs))
}

/// The optimized CLIF and the disassembly of one compiled function.
#[derive(Clone, Debug)]
pub struct ClifForTest {
    /// The function's CLIF after Cranelift's optimizations.
    pub clif: String,
    /// The disassembly of the machine code (Cranelift's VCode listing).
    pub disasm: String,
    /// The trap sites, offsets relative to the function.
    pub trap_sites: Vec<TrapSite>,
}

pub(crate) fn compile_function_for_test(
    compiler: &Compiler,
    translation: ModuleTranslation<'_>,
    func_index: u32,
) -> Result<ClifForTest> {
    let ModuleTranslation {
        module,
        function_bodies,
        ..
    } = translation;
    let cx = ModuleContext::new(compiler, &module);
    let index = module
        .defined_func_index(wasmtime_mmu_environ::FuncIndex::from_u32(func_index))
        .filter(|i| i.index() < function_bodies.len())
        .ok_or_else(|| anyhow!("function {func_index} is not a defined function"))?;
    let body = function_bodies
        .into_iter()
        .find(|(i, _)| *i == index)
        .map(|(_, b)| b)
        .ok_or_else(|| anyhow!("function {func_index} has no body"))?;
    let mut ts = ThreadState::default();
    let (f, clif) = compile_function(&cx, index, body, &mut ts, true)?;
    Ok(ClifForTest {
        clif,
        disasm: f.disasm.unwrap_or_default(),
        trap_sites: f
            .traps
            .iter()
            .map(|&(code_offset, kind)| TrapSite { code_offset, kind })
            .collect(),
    })
}
