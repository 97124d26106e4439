//! Translation of the exceptions proposal: `try_table`, `throw`,
//! `throw_ref`, and the calls made inside a `try_table`.
//!
//! # How a throw reaches its handler
//!
//! Inside a `try_table`, every call (to a Wasm or host function, and to the
//! `throw`/`throw_ref` builtins) is a Cranelift `try_call` whose exception
//! table lists the handlers in scope, innermost `try_table` first and each
//! `try_table`'s clauses in their written order, ending at the first
//! catch-all. Cranelift records, for each such call, the return address,
//! the frame size, where the frame keeps `vmctx` (the table's *context*
//! item) and the handler blocks; the compiler turns that into the module's
//! [`ExceptionTable`](wasmtime_mmu_environ::ExceptionTable). The runtime's
//! unwinder walks the frame-pointer chain from the throw, finds the first
//! site whose handler matches, and resumes at the handler block with the
//! frame's stack and frame pointers and the exception handle in the first
//! payload register. A `try_call` clobbers every register, so nothing else
//! needs restoring.
//!
//! A handler's tag is written into the exception table as the offset of the
//! tag's slot in the catching instance's `VMContext`: the unwinder compares
//! the pointer in that slot (of the frame's own `vmctx`) with the thrown
//! exception's tag, so an imported tag matches the exporter's exceptions
//! and two instances of one module keep distinct tags.
//!
//! # Exceptions are store handles
//!
//! An `exnref` is a handle into the store's exception slots (0 is null),
//! like an `externref`. `throw` hands the payload to the runtime in a stack
//! array of `ValRaw` slots; a `catch` gets it back through `exn_payload`. A
//! `catch`/`catch_all` without `_ref` releases the exception, since nothing
//! can name it afterwards; an exception a `_ref` clause hands to Wasm stays
//! in its store until the store is dropped (there is no collector).

use crate::func_environ::builtin_signature;
use crate::trampolines::{VALRAW_SIZE, load_values, store_values};
use crate::translate::{ControlFrame, FuncTranslator};
use anyhow::Result;
use cranelift_codegen::ir::types::*;
use cranelift_codegen::ir::{
    self, Block, BlockArg, ExceptionTableData, ExceptionTableItem, ExceptionTag, InstBuilder, Value,
};
use cranelift_codegen::isa::CallConv;
use wasmtime_mmu_environ::TagIndex;
use wasmtime_mmu_environ::builtins::BuiltinFunctionIndex;

/// What a call inside the translator calls.
pub(crate) enum Callee {
    /// A function of the text, by its imported-function reference.
    Direct(ir::FuncRef),
    /// A code address with a signature.
    Indirect(ir::SigRef, Value),
}

impl<'a, 'f> FuncTranslator<'a, 'f> {
    /// Emits a call, as a `try_call` when handlers are in scope, and
    /// returns its results.
    pub(crate) fn emit_call(&mut self, callee: Callee, args: &[Value]) -> Vec<Value> {
        let sig = match callee {
            Callee::Direct(f) => self.b.func.dfg.ext_funcs[f].signature,
            Callee::Indirect(sig, _) => sig,
        };
        let Some((table, cont)) = self.exception_table(sig) else {
            let call = match callee {
                Callee::Direct(f) => self.b.ins().call(f, args),
                Callee::Indirect(sig, code) => self.b.ins().call_indirect(sig, code, args),
            };
            return self.b.inst_results(call).to_vec();
        };
        match callee {
            Callee::Direct(f) => self.b.ins().try_call(f, args, table),
            Callee::Indirect(_, code) => self.b.ins().try_call_indirect(code, args, table),
        };
        self.b.seal_block(cont);
        self.b.switch_to_block(cont);
        self.b.block_params(cont).to_vec()
    }

    /// The exception table for a call of signature `sig` and the block its
    /// normal return continues in (whose parameters are the call's
    /// results), or `None` outside every `try_table`.
    fn exception_table(&mut self, sig: ir::SigRef) -> Option<(ir::ExceptionTable, Block)> {
        if self.handlers.is_empty() {
            return None;
        }
        let cont = self.b.create_block();
        let returns: Vec<ir::Type> = self.b.func.dfg.signatures[sig]
            .returns
            .iter()
            .map(|r| r.value_type)
            .collect();
        let mut rets = Vec::with_capacity(returns.len());
        for (i, ty) in returns.into_iter().enumerate() {
            self.b.append_block_param(cont, ty);
            rets.push(BlockArg::TryCallRet(i as u32));
        }
        let normal = self.b.func.dfg.block_call(cont, &rets);
        let mut items = vec![ExceptionTableItem::Context(self.vmctx)];
        // Innermost first; within one `try_table` the clauses were pushed
        // in reverse, so walking back yields them in written order.
        for &(tag, block) in self.handlers.iter().rev() {
            let call = self
                .b
                .func
                .dfg
                .block_call(block, &[BlockArg::TryCallExn(0)]);
            match tag {
                Some(tag) => {
                    let slot = self.cx.offsets.tag(tag);
                    items.push(ExceptionTableItem::Tag(ExceptionTag::from_u32(slot), call));
                }
                None => {
                    // Nothing outside a catch-all can catch here.
                    items.push(ExceptionTableItem::Default(call));
                    break;
                }
            }
        }
        let data = ExceptionTableData::new(sig, normal, items);
        Some((self.b.func.dfg.exception_tables.push(data), cont))
    }

    /// `try_table`: creates the handler block of each clause and opens a
    /// block whose calls catch with them.
    pub(crate) fn translate_try_table(&mut self, try_table: &wasmparser::TryTable) -> Result<()> {
        let (params, results) = self.blocktype(try_table.ty)?;
        let destination = self.block_with_params(&results);
        // The body goes on in a block of its own, so that the handler
        // blocks can be filled first.
        let body = self.b.create_block();
        self.b.ins().jump(body, &[]);
        self.b.seal_block(body);
        let checkpoint = self.handlers.len();
        for catch in try_table.catches.iter().rev() {
            let handler = self.catch_block(catch);
            self.handlers.push(handler);
        }
        self.control.push(ControlFrame::Block {
            destination,
            num_results: results.len(),
            original_stack_size: self.stack.len() - params.len(),
            exit_is_branched_to: false,
            handler_checkpoint: Some(checkpoint),
        });
        self.b.switch_to_block(body);
        Ok(())
    }

    /// The end of a `try_table` whose handlers start at `checkpoint`: no
    /// more calls can reach them.
    pub(crate) fn end_try_table(&mut self, checkpoint: usize) {
        for (_, block) in self.handlers.drain(checkpoint..) {
            self.b.seal_block(block);
        }
    }

    /// The handler block of one clause: unpacks the exception as the
    /// clause says and branches to its label.
    fn catch_block(&mut self, catch: &wasmparser::Catch) -> (Option<TagIndex>, Block) {
        let (tag, is_ref, label) = match *catch {
            wasmparser::Catch::One { tag, label } => (Some(tag), false, label),
            wasmparser::Catch::OneRef { tag, label } => (Some(tag), true, label),
            wasmparser::Catch::All { label } => (None, false, label),
            wasmparser::Catch::AllRef { label } => (None, true, label),
        };
        let tag = tag.map(TagIndex::from_u32);
        let block = self.b.create_block();
        let exn = self.b.append_block_param(block, I64);
        self.b.set_cold_block(block);
        self.b.switch_to_block(block);
        // The callees may have consumed fuel.
        self.after_exceptional_return();

        let vmctx = self.vmctx;
        let mut args = Vec::new();
        match tag {
            Some(tag) => {
                let types = self.cx.module.tag_type(tag).params.clone();
                let slots = self.valraw_slots(types.len());
                let release = self.b.ins().iconst(I32, i64::from(!is_ref));
                self.call_builtin(
                    BuiltinFunctionIndex::exn_payload,
                    &[vmctx, exn, slots, release],
                );
                args = load_values(&mut self.b, &types, slots);
            }
            None if !is_ref => {
                self.call_builtin(BuiltinFunctionIndex::exn_release, &[vmctx, exn]);
            }
            None => {}
        }
        if is_ref {
            args.push(exn);
        }
        self.canonicalize(&mut args);
        // Labels count from the `try_table`'s enclosing block: its own
        // frame is pushed only after its clauses.
        let i = self.control.len() - 1 - label as usize;
        let frame = &mut self.control[i];
        frame.set_branched_to_exit();
        let dest = frame.br_destination();
        let args: Vec<BlockArg> = args.into_iter().map(BlockArg::Value).collect();
        self.b.ins().jump(dest, &args);
        (tag, block)
    }

    /// `count` `ValRaw` slots in this frame (at least one), by address.
    fn valraw_slots(&mut self, count: usize) -> Value {
        let slot = self.b.create_sized_stack_slot(ir::StackSlotData::new(
            ir::StackSlotKind::ExplicitSlot,
            count.max(1) as u32 * VALRAW_SIZE,
            4,
        ));
        self.b.ins().stack_addr(I64, slot, 0)
    }

    /// `throw tag`: the payload is the top of the operand stack.
    pub(crate) fn translate_throw(&mut self, tag: TagIndex) {
        let n = self.cx.module.tag_type(tag).params.len();
        let mut values = self.peekn(n).to_vec();
        self.canonicalize(&mut values);
        let slots = self.valraw_slots(n);
        store_values(&mut self.b, &values, slots);
        self.popn(n);
        let tag = self.b.ins().iconst(I32, i64::from(tag.as_u32()));
        let vmctx = self.vmctx;
        self.call_throwing_builtin(BuiltinFunctionIndex::throw, &[vmctx, tag, slots]);
    }

    /// `throw_ref`: the exception is the top of the operand stack.
    pub(crate) fn translate_throw_ref(&mut self) {
        let exn = self.pop1();
        let vmctx = self.vmctx;
        self.call_throwing_builtin(BuiltinFunctionIndex::throw_ref, &[vmctx, exn]);
    }

    /// Calls `throw` or `throw_ref`, which return only when they failed
    /// (with an error in the store), and traps after them.
    ///
    /// They are called with the `tail` convention so that inside a
    /// `try_table` the call is a `try_call` whose exceptional edge
    /// Cranelift treats as clobbering every register (with the C
    /// convention it would expect callee-saved registers back, which a
    /// resumed handler does not get) and a handler of this very function
    /// can catch. The builtins are C functions: on x86_64 `tail` puts the
    /// arguments in the C convention's registers; on aarch64 it starts at
    /// `x2`, and the builtins' exit shims move them down (the runtime's
    /// `libcalls.rs`).
    fn call_throwing_builtin(&mut self, which: BuiltinFunctionIndex, args: &[Value]) {
        let sig = self
            .b
            .import_signature(builtin_signature(which, CallConv::Tail));
        let func = self.builtin_address(which);
        self.emit_call(Callee::Indirect(sig, func), args);
        self.b.ins().trap(crate::compiler::host_call_failed_code());
        self.unreachable_after_trap();
    }
}
