//! Entry trampolines (host → Wasm) and wasm-to-host trampolines; see
//! environ's `compiled.rs` for their contracts.

use crate::Compiler;
use crate::compiler::{CompiledFunc, codegen, host_call_failed_code, value_type, wasm_signature};
use crate::func_environ::{RegionKind, readonly, region_in};
use anyhow::{Result, bail};
use cranelift_codegen::Context;
use cranelift_codegen::ir::types::*;
use cranelift_codegen::ir::{self, InstBuilder, MemFlagsData, UserFuncName, Value};
use cranelift_codegen::isa::CallConv;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use wasmtime_mmu_environ::vm::*;
use wasmtime_mmu_environ::{
    CompiledTrampoline, TrapSite, VMHOST_FUNC_CONTEXT_ARRAY_CALL_OFFSET, WasmFuncType, WasmValType,
};

/// Size of one `ValRaw` slot.
pub(crate) const VALRAW_SIZE: u32 = 16;

fn valraw_flags(func: &mut ir::Function) -> MemFlagsData {
    let region = region_in(func, RegionKind::ValRaw, 0);
    MemFlagsData::trusted()
        .with_endianness(ir::Endianness::Little)
        .with_alias_region(Some(region))
}

pub(crate) fn load_values(
    b: &mut FunctionBuilder<'_>,
    types: &[WasmValType],
    values: Value,
) -> Vec<Value> {
    let flags = valraw_flags(b.func);
    types
        .iter()
        .enumerate()
        .map(|(i, ty)| {
            b.ins().load(
                value_type(*ty),
                flags,
                values,
                (i as u32 * VALRAW_SIZE) as i32,
            )
        })
        .collect()
}

pub(crate) fn store_values(b: &mut FunctionBuilder<'_>, vals: &[Value], values: Value) {
    let flags = valraw_flags(b.func);
    for (i, v) in vals.iter().enumerate() {
        b.ins()
            .store(flags, *v, values, (i as u32 * VALRAW_SIZE) as i32);
    }
}

/// Compiles the entry trampoline for functions of type `ty`
/// (`VMEntryTrampoline`).
pub(crate) fn compile_entry(
    compiler: &Compiler,
    ty: &WasmFuncType,
    ctx: &mut Context,
) -> Result<CompiledFunc> {
    let isa = &*compiler.isa;
    let mut sig = ir::Signature::new(CallConv::triple_default(isa.triple()));
    sig.params.extend([ir::AbiParam::new(I64); 3]);
    ctx.clear();
    ctx.func = ir::Function::with_name_signature(UserFuncName::default(), sig);
    let mut fb_ctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fb_ctx);
    let block0 = b.create_block();
    b.append_block_params_for_function_params(block0);
    b.switch_to_block(block0);
    b.seal_block(block0);
    let [callee, caller_vmctx, values] = b.block_params(block0) else {
        bail!("entry trampoline signature");
    };
    let (callee, caller_vmctx, values) = (*callee, *caller_vmctx, *values);

    let flags = MemFlagsData::trusted().with_readonly();
    let code = b
        .ins()
        .load(I64, flags, callee, VMFUNCREF_WASM_CALL_OFFSET as i32);
    let callee_vmctx = b
        .ins()
        .load(I64, flags, callee, VMFUNCREF_VMCTX_OFFSET as i32);
    let mut args = vec![callee_vmctx, caller_vmctx];
    args.extend(load_values(&mut b, &ty.params, values));
    let wasm_sig = b.import_signature(wasm_signature(ty));
    let call = b.ins().call_indirect(wasm_sig, code, &args);
    let results = b.inst_results(call).to_vec();
    store_values(&mut b, &results, values);
    b.ins().return_(&[]);
    b.finalize(isa.frontend_config());
    codegen(isa, ctx, false)
}

/// Compiles the wasm-to-host trampoline for functions of type `ty` on its
/// own, for the engine to load by itself.
pub(crate) fn compile_wasm_to_host(
    compiler: &Compiler,
    ty: &WasmFuncType,
) -> Result<CompiledTrampoline> {
    let f = compile_wasm_to_host_func(compiler, ty, &mut Context::new())?;
    let mut relocations = Vec::new();
    for r in f.relocs {
        match r.target {
            crate::compiler::RelocTarget::Libcall(target) => {
                relocations.push(wasmtime_mmu_environ::Relocation {
                    offset: r.offset,
                    target,
                })
            }
            crate::compiler::RelocTarget::Func(_) => {
                bail!("wasm-to-host trampoline calls a Wasm function")
            }
        }
    }
    Ok(CompiledTrampoline {
        text: f.code,
        trap_sites: f
            .traps
            .into_iter()
            .map(|(code_offset, kind)| TrapSite { code_offset, kind })
            .collect(),
        relocations,
    })
}

/// Compiles the wasm-to-host trampoline for functions of type `ty`, to be
/// laid out in a module's text or loaded on its own.
pub(crate) fn compile_wasm_to_host_func(
    compiler: &Compiler,
    ty: &WasmFuncType,
    ctx: &mut Context,
) -> Result<CompiledFunc> {
    let isa = &*compiler.isa;
    ctx.clear();
    ctx.func = ir::Function::with_name_signature(UserFuncName::default(), wasm_signature(ty));
    let mut fb_ctx = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut ctx.func, &mut fb_ctx);
    let block0 = b.create_block();
    b.append_block_params_for_function_params(block0);
    b.switch_to_block(block0);
    b.seal_block(block0);
    let params = b.block_params(block0).to_vec();
    let (callee_vmctx, caller_vmctx) = (params[0], params[1]);

    // Record the exit frame for backtraces: our caller's frame pointer (the
    // one our prologue saved) and our return address into it.
    let store = b.ins().load(
        I64,
        readonly(),
        caller_vmctx,
        VMCTX_STORE_CONTEXT_OFFSET as i32,
    );
    let exit_region = region_in(b.func, RegionKind::ExitFrame, 0);
    let exit_flags = MemFlagsData::trusted().with_alias_region(Some(exit_region));
    let fp = b.ins().get_frame_pointer(I64);
    let caller_fp = b.ins().load(I64, MemFlagsData::trusted(), fp, 0);
    b.ins().store(
        exit_flags,
        caller_fp,
        store,
        VMSTORE_CONTEXT_LAST_WASM_EXIT_FP_OFFSET as i32,
    );
    let pc = b.ins().get_return_address(I64);
    b.ins().store(
        exit_flags,
        pc,
        store,
        VMSTORE_CONTEXT_LAST_WASM_EXIT_PC_OFFSET as i32,
    );

    let len = ty.array_len();
    let slot = b.create_sized_stack_slot(ir::StackSlotData::new(
        ir::StackSlotKind::ExplicitSlot,
        (len.max(1) as u32) * VALRAW_SIZE,
        4,
    ));
    let values = b.ins().stack_addr(I64, slot, 0);
    store_values(&mut b, &params[2..], values);

    let array_call = b.ins().load(
        I64,
        MemFlagsData::trusted().with_readonly(),
        callee_vmctx,
        VMHOST_FUNC_CONTEXT_ARRAY_CALL_OFFSET as i32,
    );
    let mut host_sig = ir::Signature::new(CallConv::triple_default(isa.triple()));
    host_sig.params.extend([ir::AbiParam::new(I64); 4]);
    host_sig.returns.push(ir::AbiParam::new(I8));
    let host_sig = b.import_signature(host_sig);
    let len = b.ins().iconst(I64, len as i64);
    let call = b.ins().call_indirect(
        host_sig,
        array_call,
        &[callee_vmctx, caller_vmctx, values, len],
    );
    let ok = b.inst_results(call)[0];
    b.ins().trapz(ok, host_call_failed_code());
    let results = load_values(&mut b, &ty.results, values);
    b.ins().return_(&results);
    b.finalize(isa.frontend_config());

    codegen(isa, ctx, false)
}
