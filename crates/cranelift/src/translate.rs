//! Operator-by-operator translation of a Wasm function body to Cranelift IR.
//!
//! The operand stack holds SSA values; control constructs map to Cranelift
//! blocks whose parameters carry Wasm block results (or loop parameters).
//! `v128` values travel as `i8x16` across block boundaries, calls, locals
//! and globals, and are bitcast to the lane type an operator needs.

use crate::compiler::{ModuleContext, value_type};
use anyhow::{Result, bail};
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::immediates::{Ieee32, Ieee64, Offset32};
use cranelift_codegen::ir::types::*;
use cranelift_codegen::ir::{
    self, Block, BlockArg, Inst, InstBuilder, JumpTableData, MemFlagsData, SourceLoc, Type, Value,
};
use cranelift_codegen::packed_option::ReservedValue;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use wasmparser::{
    BinaryReader, BlockType, FuncValidator, FunctionBody, MemArg, Operator, OperatorsReader,
    ValidatorResources,
};
use wasmtime_mmu_environ::{
    DataIndex, ElemIndex, FuncIndex, GlobalIndex, MemoryIndex, TableIndex, Trap, TypeIndex,
    WasmValType,
};

/// What follows an `if` whose `else` has not been seen yet.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ElseData {
    /// No `else` block exists yet: the `brif` of the head branches to the
    /// placeholder (the `if`'s destination) and is redirected if an `else`
    /// shows up. Only possible when the `if` has as many params as results
    /// of the same types.
    NoElse {
        branch_inst: Inst,
        placeholder: Block,
    },
    /// The `else` block was created eagerly.
    WithElse { else_block: Block },
}

/// One entry of the control stack.
#[derive(Debug)]
pub(crate) enum ControlFrame {
    If {
        destination: Block,
        else_data: ElseData,
        num_params: usize,
        num_results: usize,
        original_stack_size: usize,
        exit_is_branched_to: bool,
        /// Whether the code before the `if` was reachable.
        head_is_reachable: bool,
        /// Whether the end of the consequent was reachable, once known.
        consequent_ends_reachable: Option<bool>,
    },
    /// A `block`, or a `try_table` (with `handler_checkpoint`: how many
    /// handlers were in scope outside it).
    Block {
        destination: Block,
        num_results: usize,
        original_stack_size: usize,
        exit_is_branched_to: bool,
        handler_checkpoint: Option<usize>,
    },
    Loop {
        header: Block,
        destination: Block,
        num_params: usize,
        num_results: usize,
        original_stack_size: usize,
    },
}

impl ControlFrame {
    fn following_code(&self) -> Block {
        match *self {
            ControlFrame::If { destination, .. }
            | ControlFrame::Block { destination, .. }
            | ControlFrame::Loop { destination, .. } => destination,
        }
    }

    pub(crate) fn br_destination(&self) -> Block {
        match *self {
            ControlFrame::If { destination, .. } | ControlFrame::Block { destination, .. } => {
                destination
            }
            ControlFrame::Loop { header, .. } => header,
        }
    }

    fn num_results(&self) -> usize {
        match *self {
            ControlFrame::If { num_results, .. }
            | ControlFrame::Block { num_results, .. }
            | ControlFrame::Loop { num_results, .. } => num_results,
        }
    }

    /// How many values a branch to this frame carries.
    fn branch_arity(&self) -> usize {
        match self {
            ControlFrame::Loop { num_params, .. } => *num_params,
            _ => self.num_results(),
        }
    }

    fn original_stack_size(&self) -> usize {
        match *self {
            ControlFrame::If {
                original_stack_size,
                ..
            }
            | ControlFrame::Block {
                original_stack_size,
                ..
            }
            | ControlFrame::Loop {
                original_stack_size,
                ..
            } => original_stack_size,
        }
    }

    fn exit_is_branched_to(&self) -> bool {
        match *self {
            ControlFrame::If {
                exit_is_branched_to,
                ..
            }
            | ControlFrame::Block {
                exit_is_branched_to,
                ..
            } => exit_is_branched_to,
            ControlFrame::Loop { .. } => false,
        }
    }

    pub(crate) fn set_branched_to_exit(&mut self) {
        match self {
            ControlFrame::If {
                exit_is_branched_to,
                ..
            }
            | ControlFrame::Block {
                exit_is_branched_to,
                ..
            } => *exit_is_branched_to = true,
            ControlFrame::Loop { .. } => {}
        }
    }
}

/// Fuel accounting state (see `func_environ.rs`).
pub(crate) struct FuelState {
    /// The cached `VMStoreContext::fuel_consumed`.
    pub var: Variable,
    /// Cost of the operators translated since the last flush into `var`.
    pub pending: i64,
}

/// Epoch-interruption state (see `func_environ.rs`).
pub(crate) struct EpochState {
    /// The cached `VMStoreContext::epoch_deadline`.
    pub deadline_var: Variable,
    /// The engine's epoch counter address.
    pub counter_ptr_var: Variable,
}

/// MMU-interruption state (see `func_environ.rs`).
pub(crate) struct MmuPollState {
    /// The value whose poll page this function's polls read.
    pub base: PollBase,
    /// Distinct in-page offsets, one per poll of this function.
    pub sites: wasmtime_mmu_dead_load::PollSites,
}

/// What a function's polls read through (see `function_entry` in
/// `func_environ.rs`).
#[derive(Clone, Copy)]
pub(crate) enum PollBase {
    /// `vmctx`: the instance's page at `VMCTX_MMU_POLL_PAGE_OFFSET`
    /// (mprotect mode), or its slot at `VMCTX_MMU_POLL_SLOT_OFFSET`
    /// (pointer swap).
    Vmctx,
    /// This memory's base: the page below it, at `HEAP_MMU_POLL_PAGE_OFFSET`,
    /// whose last word is the slot in pointer-swap mode.
    Heap(MemoryIndex),
}

/// Translation state of one function.
pub(crate) struct FuncTranslator<'a, 'f> {
    pub b: FunctionBuilder<'f>,
    pub cx: &'a ModuleContext<'a>,
    pub stack: Vec<Value>,
    pub control: Vec<ControlFrame>,
    pub reachable: bool,
    /// This function's `VMContext` (the callee vmctx parameter).
    pub vmctx: Value,
    pub sig_refs: HashMap<TypeIndex, ir::SigRef>,
    pub func_refs: HashMap<FuncIndex, ir::FuncRef>,
    pub builtin_sigs: HashMap<u32, ir::SigRef>,
    pub fuel: Option<FuelState>,
    pub epoch: Option<EpochState>,
    pub mmu: Option<MmuPollState>,
    /// The handlers in scope, outermost `try_table` first; each
    /// `try_table`'s clauses in reverse (see `exceptions.rs`). `None` is a
    /// catch-all.
    pub handlers: Vec<(Option<wasmtime_mmu_environ::TagIndex>, Block)>,
    /// With write marks: the stores marked so far in the block being
    /// filled (the block, and each store's memory, index value and static
    /// offset), whose marks later stores of the block may rely on.
    pub marked_stores: (Option<Block>, Vec<(MemoryIndex, Value, u64)>),
}

/// Translates the body of one defined function into `func`, validating it
/// as it goes.
pub(crate) fn translate_function(
    cx: &ModuleContext<'_>,
    func: &mut ir::Function,
    builder_ctx: &mut FunctionBuilderContext,
    validator: &mut FuncValidator<ValidatorResources>,
    body: &FunctionBody<'_>,
) -> Result<()> {
    crate::func_environ::set_stack_limit(func);
    let mut reader = body.get_binary_reader();
    reader.set_features(*validator.features());
    let mut b = FunctionBuilder::new(func, builder_ctx);
    b.set_srcloc(srcloc(&reader));
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    b.ensure_inserted_block();
    let params = b.block_params(entry).to_vec();
    let returns: Vec<Type> = b
        .func
        .signature
        .returns
        .iter()
        .map(|r| r.value_type)
        .collect();

    let mut t = FuncTranslator {
        b,
        cx,
        stack: Vec::new(),
        control: Vec::new(),
        reachable: true,
        vmctx: params[0],
        sig_refs: HashMap::new(),
        func_refs: HashMap::new(),
        builtin_sigs: HashMap::new(),
        fuel: None,
        epoch: None,
        mmu: None,
        marked_stores: (None, Vec::new()),
        handlers: Vec::new(),
    };

    // Wasm locals are variables 0.., parameters first.
    for &param in &params[2..] {
        let ty = t.b.func.dfg.value_type(param);
        let var = t.b.declare_var(ty);
        t.b.def_var(var, param);
    }
    let local_groups = reader.read_var_u32()?;
    for _ in 0..local_groups {
        let pos = reader.original_position();
        let count = reader.read_var_u32()?;
        let ty: wasmparser::ValType = reader.read()?;
        validator.define_locals(pos, count, ty)?;
        let ty = WasmValType::from_wasmparser(ty)?;
        let zero = t.zero_value(ty);
        for _ in 0..count {
            let var = t.b.declare_var(value_type(ty));
            t.b.def_var(var, zero);
        }
    }

    let exit = t.b.create_block();
    for &ty in &returns {
        t.b.append_block_param(exit, ty);
    }
    t.control.push(ControlFrame::Block {
        destination: exit,
        num_results: returns.len(),
        original_stack_size: 0,
        exit_is_branched_to: false,
        handler_checkpoint: None,
    });

    t.function_entry(&reader);
    t.translate_body(validator, reader)?;

    if t.reachable && !t.b.is_unreachable() {
        t.before_return();
        let mut results = std::mem::take(&mut t.stack);
        t.canonicalize(&mut results);
        t.b.ins().return_(&results);
    }
    let frontend = cx.isa.frontend_config();
    t.b.finalize(frontend);
    Ok(())
}

fn srcloc(reader: &BinaryReader<'_>) -> SourceLoc {
    SourceLoc::new(reader.original_position() as u32)
}

/// The little-endian flags with which vectors are bitcast between lane
/// types.
fn vector_bitcast_flags() -> MemFlagsData {
    MemFlagsData::new().with_endianness(ir::Endianness::Little)
}

impl<'a, 'f> FuncTranslator<'a, 'f> {
    fn translate_body(
        &mut self,
        validator: &mut FuncValidator<ValidatorResources>,
        reader: BinaryReader<'_>,
    ) -> Result<()> {
        let mut ops = OperatorsReader::new(reader);
        while !ops.eof() {
            let pos = ops.original_position();
            self.b.set_srcloc(SourceLoc::new(pos as u32));
            let op = ops.read()?;
            validator.op(pos, &op)?;
            if self.fuel.is_some() && self.reachable {
                self.fuel_before_op(&op);
            }
            if self.reachable {
                self.translate_operator(&op)?;
                if self.fuel.is_some() && self.reachable {
                    self.fuel_after_op(&op);
                }
            } else {
                self.translate_unreachable_operator(&op)?;
            }
        }
        ops.finish()?;
        Ok(())
    }

    // ---- operand stack ----

    pub(crate) fn push1(&mut self, v: Value) {
        self.stack.push(v);
    }

    pub(crate) fn pop1(&mut self) -> Value {
        self.stack
            .pop()
            .expect("validated: operand stack underflow")
    }

    pub(crate) fn pop2(&mut self) -> (Value, Value) {
        let b = self.pop1();
        let a = self.pop1();
        (a, b)
    }

    pub(crate) fn pop3(&mut self) -> (Value, Value, Value) {
        let c = self.pop1();
        let b = self.pop1();
        let a = self.pop1();
        (a, b, c)
    }

    pub(crate) fn peekn(&self, n: usize) -> &[Value] {
        &self.stack[self.stack.len() - n..]
    }

    pub(crate) fn popn(&mut self, n: usize) {
        let len = self.stack.len() - n;
        self.stack.truncate(len);
    }

    /// Bitcasts a vector value to `ty` if it has another lane type.
    pub(crate) fn bitcast_to(&mut self, v: Value, ty: Type) -> Value {
        if self.b.func.dfg.value_type(v) == ty {
            v
        } else {
            self.b.ins().bitcast(ty, vector_bitcast_flags(), v)
        }
    }

    /// Bitcasts every vector in `values` to `i8x16`, the type `v128` has at
    /// block boundaries, calls, locals and globals.
    pub(crate) fn canonicalize(&mut self, values: &mut [Value]) {
        for v in values.iter_mut() {
            let ty = self.b.func.dfg.value_type(*v);
            if ty.is_vector() && ty != I8X16 {
                *v = self.b.ins().bitcast(I8X16, vector_bitcast_flags(), *v);
            }
        }
    }

    fn canonical_top(&mut self, n: usize) -> Vec<BlockArg> {
        let mut values = self.peekn(n).to_vec();
        self.canonicalize(&mut values);
        values.into_iter().map(BlockArg::Value).collect()
    }

    fn jump_with_top(&mut self, block: Block, n: usize) {
        let args = self.canonical_top(n);
        self.b.ins().jump(block, &args);
    }

    fn push_block_params(&mut self, block: Block) {
        let params = self.b.block_params(block).to_vec();
        self.stack.extend(params);
    }

    pub(crate) fn zero_value(&mut self, ty: WasmValType) -> Value {
        match ty {
            WasmValType::I32 => self.b.ins().iconst(I32, 0),
            WasmValType::I64 | WasmValType::Ref(_) => self.b.ins().iconst(I64, 0),
            WasmValType::F32 => self.b.ins().f32const(Ieee32::with_bits(0)),
            WasmValType::F64 => self.b.ins().f64const(Ieee64::with_bits(0)),
            WasmValType::V128 => self.v128_const(0),
        }
    }

    pub(crate) fn v128_const(&mut self, bits: u128) -> Value {
        let handle = self
            .b
            .func
            .dfg
            .constants
            .insert(bits.to_le_bytes().to_vec().into());
        self.b.ins().vconst(I8X16, handle)
    }

    pub(crate) fn blocktype(&self, ty: BlockType) -> Result<(Vec<Type>, Vec<Type>)> {
        Ok(match ty {
            BlockType::Empty => (vec![], vec![]),
            BlockType::Type(t) => (vec![], vec![value_type(WasmValType::from_wasmparser(t)?)]),
            BlockType::FuncType(i) => {
                let ty = &self.cx.module.types[TypeIndex::from_u32(i)];
                (
                    ty.params.iter().map(|t| value_type(*t)).collect(),
                    ty.results.iter().map(|t| value_type(*t)).collect(),
                )
            }
        })
    }

    pub(crate) fn block_with_params(&mut self, types: &[Type]) -> Block {
        let block = self.b.create_block();
        for &ty in types {
            self.b.append_block_param(block, ty);
        }
        block
    }

    pub(crate) fn trap(&mut self, trap: Trap) {
        let code = crate::compiler::trap_code(trap);
        self.b.ins().trap(code);
    }

    // ---- unreachable code ----

    fn translate_unreachable_operator(&mut self, op: &Operator<'_>) -> Result<()> {
        match *op {
            Operator::If { .. } => {
                // No branch reaches this `if`: only its nesting matters.
                self.control.push(ControlFrame::If {
                    destination: Block::reserved_value(),
                    else_data: ElseData::NoElse {
                        branch_inst: Inst::reserved_value(),
                        placeholder: Block::reserved_value(),
                    },
                    num_params: 0,
                    num_results: 0,
                    original_stack_size: self.stack.len(),
                    exit_is_branched_to: false,
                    head_is_reachable: false,
                    consequent_ends_reachable: None,
                });
            }
            Operator::Loop { .. } | Operator::Block { .. } | Operator::TryTable { .. } => {
                // No call in it is reachable either: no handlers.
                self.control.push(ControlFrame::Block {
                    destination: Block::reserved_value(),
                    num_results: 0,
                    original_stack_size: self.stack.len(),
                    exit_is_branched_to: false,
                    handler_checkpoint: None,
                });
            }
            Operator::Else => {
                let frame = self.control.last_mut().expect("validated: else without if");
                if let ControlFrame::If {
                    else_data,
                    head_is_reachable,
                    consequent_ends_reachable,
                    num_params,
                    original_stack_size,
                    ..
                } = frame
                {
                    *consequent_ends_reachable = Some(false);
                    if *head_is_reachable {
                        let else_data = *else_data;
                        let keep = *original_stack_size + *num_params;
                        self.reachable = true;
                        self.stack.truncate(keep);
                        let else_block = self.else_block(else_data);
                        self.b.switch_to_block(else_block);
                    }
                } else {
                    bail!("validated: else without if");
                }
            }
            Operator::End => {
                let frame = self.control.pop().expect("validated: unbalanced end");
                self.stack.truncate(frame.original_stack_size());
                if let ControlFrame::Block {
                    handler_checkpoint: Some(checkpoint),
                    ..
                } = frame
                {
                    self.end_try_table(checkpoint);
                }
                let reachable_anyway = match frame {
                    ControlFrame::Loop { header, .. } => {
                        self.b.seal_block(header);
                        false
                    }
                    ControlFrame::If {
                        head_is_reachable,
                        consequent_ends_reachable: None,
                        ..
                    } => head_is_reachable,
                    ControlFrame::If {
                        head_is_reachable,
                        consequent_ends_reachable: Some(consequent),
                        ..
                    } => head_is_reachable && consequent,
                    ControlFrame::Block { .. } => false,
                };
                if frame.exit_is_branched_to() || reachable_anyway {
                    let next = frame.following_code();
                    self.b.switch_to_block(next);
                    self.b.seal_block(next);
                    self.push_block_params(next);
                    self.reachable = true;
                }
            }
            // Block-like operators of proposals we do not translate would
            // desynchronize the control stack.
            Operator::Try { .. }
            | Operator::Catch { .. }
            | Operator::CatchAll
            | Operator::Delegate { .. } => bail!(
                "unsupported operator `{}` (legacy exception handling is not supported)",
                operator_name(op)
            ),
            _ => {}
        }
        Ok(())
    }

    // ---- reachable code ----

    fn translate_operator(&mut self, op: &Operator<'_>) -> Result<()> {
        use Operator as O;
        match *op {
            O::Nop => {}
            O::Unreachable => {
                self.trap(Trap::UnreachableCodeReached);
                self.reachable = false;
            }
            O::Drop => {
                self.pop1();
            }
            O::Select | O::TypedSelect { .. } => {
                let (mut a, mut b, cond) = self.pop3();
                if self.b.func.dfg.value_type(a).is_vector() {
                    a = self.bitcast_to(a, I8X16);
                    b = self.bitcast_to(b, I8X16);
                }
                let v = self.b.ins().select(cond, a, b);
                self.push1(v);
            }
            O::TypedSelectMulti { .. } => bail!("multi-value `select` is not supported"),

            // ---- locals and globals ----
            O::LocalGet { local_index } => {
                let v = self.b.use_var(Variable::from_u32(local_index));
                self.push1(v);
            }
            O::LocalSet { local_index } => {
                let mut v = self.pop1();
                if self.b.func.dfg.value_type(v).is_vector() {
                    v = self.bitcast_to(v, I8X16);
                }
                self.b.def_var(Variable::from_u32(local_index), v);
            }
            O::LocalTee { local_index } => {
                let mut v = *self.stack.last().expect("validated");
                if self.b.func.dfg.value_type(v).is_vector() {
                    v = self.bitcast_to(v, I8X16);
                }
                self.b.def_var(Variable::from_u32(local_index), v);
            }
            O::GlobalGet { global_index } => {
                let v = self.global_get(GlobalIndex::from_u32(global_index));
                self.push1(v);
            }
            O::GlobalSet { global_index } => {
                let mut v = self.pop1();
                if self.b.func.dfg.value_type(v).is_vector() {
                    v = self.bitcast_to(v, I8X16);
                }
                self.global_set(GlobalIndex::from_u32(global_index), v);
            }

            // ---- control ----
            O::Block { blockty } => {
                let (params, results) = self.blocktype(blockty)?;
                let next = self.block_with_params(&results);
                self.control.push(ControlFrame::Block {
                    destination: next,
                    num_results: results.len(),
                    original_stack_size: self.stack.len() - params.len(),
                    exit_is_branched_to: false,
                    handler_checkpoint: None,
                });
            }
            O::Loop { blockty } => {
                let (params, results) = self.blocktype(blockty)?;
                let header = self.block_with_params(&params);
                let next = self.block_with_params(&results);
                self.jump_with_top(header, params.len());
                self.popn(params.len());
                self.control.push(ControlFrame::Loop {
                    header,
                    destination: next,
                    num_params: params.len(),
                    num_results: results.len(),
                    original_stack_size: self.stack.len(),
                });
                self.b.switch_to_block(header);
                self.push_block_params(header);
                self.loop_header_checks();
            }
            O::If { blockty } => {
                let cond = self.pop1();
                let (params, results) = self.blocktype(blockty)?;
                let then_block = self.b.create_block();
                let destination = self.block_with_params(&results);
                let else_data = if params == results {
                    // Without an `else`, the false edge carries the params
                    // straight to the destination; an `else` found later
                    // redirects it.
                    let args = self.canonical_top(params.len());
                    let branch_inst = self.b.ins().brif(cond, then_block, &[], destination, &args);
                    ElseData::NoElse {
                        branch_inst,
                        placeholder: destination,
                    }
                } else {
                    let else_block = self.b.create_block();
                    self.b.ins().brif(cond, then_block, &[], else_block, &[]);
                    self.b.seal_block(else_block);
                    ElseData::WithElse { else_block }
                };
                self.b.seal_block(then_block);
                self.b.switch_to_block(then_block);
                // A second copy of the params serves the consequent; the
                // originals (which dominate both arms) stay below it for the
                // `else` arm.
                let n = params.len();
                let original_stack_size = self.stack.len() - n;
                self.stack.extend_from_within(original_stack_size..);
                self.control.push(ControlFrame::If {
                    destination,
                    else_data,
                    num_params: n,
                    num_results: results.len(),
                    original_stack_size,
                    exit_is_branched_to: false,
                    head_is_reachable: true,
                    consequent_ends_reachable: None,
                });
            }
            O::Else => {
                let (destination, else_data, num_params, num_results, original_stack_size) =
                    match self.control.last_mut() {
                        Some(ControlFrame::If {
                            destination,
                            else_data,
                            num_params,
                            num_results,
                            original_stack_size,
                            consequent_ends_reachable,
                            ..
                        }) => {
                            *consequent_ends_reachable = Some(true);
                            (
                                *destination,
                                *else_data,
                                *num_params,
                                *num_results,
                                *original_stack_size,
                            )
                        }
                        _ => bail!("validated: else without if"),
                    };
                self.jump_with_top(destination, num_results);
                self.stack.truncate(original_stack_size + num_params);
                let else_block = self.else_block(else_data);
                self.b.switch_to_block(else_block);
            }
            O::End => {
                let frame = self.control.pop().expect("validated: unbalanced end");
                if let ControlFrame::Block {
                    handler_checkpoint: Some(checkpoint),
                    ..
                } = frame
                {
                    self.end_try_table(checkpoint);
                }
                let next = frame.following_code();
                let n = frame.num_results();
                self.jump_with_top(next, n);
                self.b.switch_to_block(next);
                self.b.seal_block(next);
                if let ControlFrame::Loop { header, .. } = frame {
                    self.b.seal_block(header);
                }
                self.stack.truncate(frame.original_stack_size());
                self.push_block_params(next);
            }
            O::Br { relative_depth } => {
                let i = self.control.len() - 1 - relative_depth as usize;
                let frame = &mut self.control[i];
                frame.set_branched_to_exit();
                let (n, dest) = (frame.branch_arity(), frame.br_destination());
                self.jump_with_top(dest, n);
                self.popn(n);
                self.reachable = false;
            }
            O::BrIf { relative_depth } => {
                let cond = self.pop1();
                self.branch_if(cond, relative_depth);
            }
            O::BrTable { ref targets } => self.translate_br_table(targets)?,
            O::BrOnNull { relative_depth } => self.translate_br_on_null(relative_depth, true),
            O::BrOnNonNull { relative_depth } => self.translate_br_on_null(relative_depth, false),
            O::Return => {
                let n = self.control[0].num_results();
                let mut results = self.peekn(n).to_vec();
                self.canonicalize(&mut results);
                self.b.ins().return_(&results);
                self.popn(n);
                self.reachable = false;
            }

            // ---- exceptions ----
            O::TryTable { ref try_table } => self.translate_try_table(try_table)?,
            O::Throw { tag_index } => {
                self.translate_throw(wasmtime_mmu_environ::TagIndex::from_u32(tag_index));
            }
            O::ThrowRef => self.translate_throw_ref(),

            // ---- calls ----
            O::Call { function_index } => {
                self.translate_call(FuncIndex::from_u32(function_index), false)
            }
            O::CallIndirect {
                type_index,
                table_index,
            } => self.translate_call_indirect(
                TypeIndex::from_u32(type_index),
                TableIndex::from_u32(table_index),
                false,
            ),
            // Tail calls leave this frame, so no handler of this function
            // applies to them.
            O::ReturnCall { function_index } => {
                self.translate_call(FuncIndex::from_u32(function_index), true)
            }
            O::ReturnCallIndirect {
                type_index,
                table_index,
            } => self.translate_call_indirect(
                TypeIndex::from_u32(type_index),
                TableIndex::from_u32(table_index),
                true,
            ),

            O::CallRef { type_index } => {
                self.translate_call_ref(TypeIndex::from_u32(type_index), false)
            }
            O::ReturnCallRef { type_index } => {
                self.translate_call_ref(TypeIndex::from_u32(type_index), true)
            }

            // ---- memory ----
            O::I32Load { memarg } => self.translate_load(&memarg, ir::Opcode::Load, I32)?,
            O::I64Load { memarg } => self.translate_load(&memarg, ir::Opcode::Load, I64)?,
            O::F32Load { memarg } => self.translate_load(&memarg, ir::Opcode::Load, F32)?,
            O::F64Load { memarg } => self.translate_load(&memarg, ir::Opcode::Load, F64)?,
            O::I32Load8S { memarg } => self.translate_load(&memarg, ir::Opcode::Sload8, I32)?,
            O::I32Load8U { memarg } => self.translate_load(&memarg, ir::Opcode::Uload8, I32)?,
            O::I32Load16S { memarg } => self.translate_load(&memarg, ir::Opcode::Sload16, I32)?,
            O::I32Load16U { memarg } => self.translate_load(&memarg, ir::Opcode::Uload16, I32)?,
            O::I64Load8S { memarg } => self.translate_load(&memarg, ir::Opcode::Sload8, I64)?,
            O::I64Load8U { memarg } => self.translate_load(&memarg, ir::Opcode::Uload8, I64)?,
            O::I64Load16S { memarg } => self.translate_load(&memarg, ir::Opcode::Sload16, I64)?,
            O::I64Load16U { memarg } => self.translate_load(&memarg, ir::Opcode::Uload16, I64)?,
            O::I64Load32S { memarg } => self.translate_load(&memarg, ir::Opcode::Sload32, I64)?,
            O::I64Load32U { memarg } => self.translate_load(&memarg, ir::Opcode::Uload32, I64)?,
            O::I32Store { memarg }
            | O::I64Store { memarg }
            | O::F32Store { memarg }
            | O::F64Store { memarg } => self.translate_store(&memarg, ir::Opcode::Store)?,
            O::I32Store8 { memarg } | O::I64Store8 { memarg } => {
                self.translate_store(&memarg, ir::Opcode::Istore8)?
            }
            O::I32Store16 { memarg } | O::I64Store16 { memarg } => {
                self.translate_store(&memarg, ir::Opcode::Istore16)?
            }
            O::I64Store32 { memarg } => self.translate_store(&memarg, ir::Opcode::Istore32)?,
            O::MemorySize { mem } => {
                let v = self.memory_size(MemoryIndex::from_u32(mem));
                self.push1(v);
            }
            O::MemoryGrow { mem } => {
                let delta = self.pop1();
                let v = self.memory_grow(MemoryIndex::from_u32(mem), delta);
                self.push1(v);
            }
            O::MemoryInit { data_index, mem } => {
                let (dst, src, len) = self.pop3();
                self.memory_init(
                    MemoryIndex::from_u32(mem),
                    DataIndex::from_u32(data_index),
                    dst,
                    src,
                    len,
                );
            }
            O::DataDrop { data_index } => self.data_drop(DataIndex::from_u32(data_index)),
            O::MemoryCopy { dst_mem, src_mem } => {
                let (dst, src, len) = self.pop3();
                self.memory_copy(
                    MemoryIndex::from_u32(dst_mem),
                    MemoryIndex::from_u32(src_mem),
                    dst,
                    src,
                    len,
                );
            }
            O::MemoryFill { mem } => {
                let (dst, val, len) = self.pop3();
                self.memory_fill(MemoryIndex::from_u32(mem), dst, val, len);
            }

            // ---- references and tables ----
            O::RefNull { .. } => {
                let v = self.b.ins().iconst(I64, 0);
                self.push1(v);
            }
            O::RefAsNonNull => {
                let r = self.pop1();
                self.trap_if_null(r);
                self.push1(r);
            }
            // ---- the `i31` slice of GC (see `environ::i31_word`) ----
            O::RefI31 => {
                // Shifting in 32 bits drops bit 31, so the word is the
                // same for every i32 with the same low 31 bits, which is
                // what `ref.eq` compares.
                let x = self.pop1();
                let shifted = self.b.ins().ishl_imm_u(x, 1);
                let tagged = self.b.ins().bor_imm_u(shifted, 1);
                let word = self.b.ins().uextend(I64, tagged);
                self.push1(word);
            }
            O::I31GetS | O::I31GetU => {
                let r = self.pop1();
                self.trap_if_null(r);
                let low = self.b.ins().ireduce(I32, r);
                let v = match op {
                    O::I31GetS => self.b.ins().sshr_imm_u(low, 1),
                    _ => self.b.ins().ushr_imm_u(low, 1),
                };
                self.push1(v);
            }
            O::RefEq => {
                let (a, b) = self.pop2();
                let eq = self.b.ins().icmp(IntCC::Equal, a, b);
                let v = self.b.ins().uextend(I32, eq);
                self.push1(v);
            }
            O::RefTestNonNull { hty }
            | O::RefTestNullable { hty }
            | O::RefCastNonNull { hty }
            | O::RefCastNullable { hty } => {
                let nullable = matches!(op, O::RefTestNullable { .. } | O::RefCastNullable { .. });
                let r = self.pop1();
                let ok = self.internal_ref_test(r, hty, nullable)?;
                if matches!(op, O::RefCastNonNull { .. } | O::RefCastNullable { .. }) {
                    let trap = crate::compiler::trap_code(wasmtime_mmu_environ::Trap::CastFailure);
                    self.b.ins().trapz(ok, trap);
                    self.push1(r);
                } else {
                    let v = self.b.ins().uextend(I32, ok);
                    self.push1(v);
                }
            }
            O::RefIsNull => {
                let r = self.pop1();
                let is_null = self.b.ins().icmp_imm_s(IntCC::Equal, r, 0);
                let v = self.b.ins().uextend(I32, is_null);
                self.push1(v);
            }
            O::RefFunc { function_index } => {
                let v = self.ref_func(FuncIndex::from_u32(function_index));
                self.push1(v);
            }
            O::TableGet { table } => {
                let index = self.pop1();
                let v = self.table_get(TableIndex::from_u32(table), index);
                self.push1(v);
            }
            O::TableSet { table } => {
                let (index, value) = self.pop2();
                self.table_set(TableIndex::from_u32(table), index, value);
            }
            O::TableSize { table } => {
                let v = self.table_size(TableIndex::from_u32(table));
                self.push1(v);
            }
            O::TableGrow { table } => {
                let (init, delta) = self.pop2();
                let v = self.table_grow(TableIndex::from_u32(table), init, delta);
                self.push1(v);
            }
            O::TableFill { table } => {
                let (dst, value, len) = self.pop3();
                self.table_fill(TableIndex::from_u32(table), dst, value, len);
            }
            O::TableCopy {
                dst_table,
                src_table,
            } => {
                let (dst, src, len) = self.pop3();
                self.table_copy(
                    TableIndex::from_u32(dst_table),
                    TableIndex::from_u32(src_table),
                    dst,
                    src,
                    len,
                );
            }
            O::TableInit { elem_index, table } => {
                let (dst, src, len) = self.pop3();
                self.table_init(
                    TableIndex::from_u32(table),
                    ElemIndex::from_u32(elem_index),
                    dst,
                    src,
                    len,
                );
            }
            O::ElemDrop { elem_index } => self.elem_drop(ElemIndex::from_u32(elem_index)),

            // ---- constants ----
            O::I32Const { value } => {
                let v = self.b.ins().iconst(I32, i64::from(value as u32));
                self.push1(v);
            }
            O::I64Const { value } => {
                let v = self.b.ins().iconst(I64, value);
                self.push1(v);
            }
            O::F32Const { value } => {
                let v = self.b.ins().f32const(Ieee32::with_bits(value.bits()));
                self.push1(v);
            }
            O::F64Const { value } => {
                let v = self.b.ins().f64const(Ieee64::with_bits(value.bits()));
                self.push1(v);
            }

            // ---- integer unary ----
            O::I32Clz | O::I64Clz => self.unary(|b, x| b.ins().clz(x)),
            O::I32Ctz | O::I64Ctz => self.unary(|b, x| b.ins().ctz(x)),
            O::I32Popcnt | O::I64Popcnt => self.unary(|b, x| b.ins().popcnt(x)),
            O::I32Eqz | O::I64Eqz => self.unary(|b, x| {
                let c = b.ins().icmp_imm_s(IntCC::Equal, x, 0);
                b.ins().uextend(I32, c)
            }),
            O::I64ExtendI32S => self.unary(|b, x| b.ins().sextend(I64, x)),
            O::I64ExtendI32U => self.unary(|b, x| b.ins().uextend(I64, x)),
            O::I32WrapI64 => self.unary(|b, x| b.ins().ireduce(I32, x)),
            O::I32Extend8S => self.unary(|b, x| {
                let n = b.ins().ireduce(I8, x);
                b.ins().sextend(I32, n)
            }),
            O::I32Extend16S => self.unary(|b, x| {
                let n = b.ins().ireduce(I16, x);
                b.ins().sextend(I32, n)
            }),
            O::I64Extend8S => self.unary(|b, x| {
                let n = b.ins().ireduce(I8, x);
                b.ins().sextend(I64, n)
            }),
            O::I64Extend16S => self.unary(|b, x| {
                let n = b.ins().ireduce(I16, x);
                b.ins().sextend(I64, n)
            }),
            O::I64Extend32S => self.unary(|b, x| {
                let n = b.ins().ireduce(I32, x);
                b.ins().sextend(I64, n)
            }),

            // ---- integer binary ----
            O::I32Add | O::I64Add => self.binary(|b, x, y| b.ins().iadd(x, y)),
            O::I32Sub | O::I64Sub => self.binary(|b, x, y| b.ins().isub(x, y)),
            O::I32Mul | O::I64Mul => self.binary(|b, x, y| b.ins().imul(x, y)),
            O::I32DivS | O::I64DivS => self.binary(|b, x, y| b.ins().sdiv(x, y)),
            O::I32DivU | O::I64DivU => self.binary(|b, x, y| b.ins().udiv(x, y)),
            O::I32RemS | O::I64RemS => self.binary(|b, x, y| b.ins().srem(x, y)),
            O::I32RemU | O::I64RemU => self.binary(|b, x, y| b.ins().urem(x, y)),
            O::I32And | O::I64And => self.binary(|b, x, y| b.ins().band(x, y)),
            O::I32Or | O::I64Or => self.binary(|b, x, y| b.ins().bor(x, y)),
            O::I32Xor | O::I64Xor => self.binary(|b, x, y| b.ins().bxor(x, y)),
            O::I32Shl | O::I64Shl => self.binary(|b, x, y| b.ins().ishl(x, y)),
            O::I32ShrS | O::I64ShrS => self.binary(|b, x, y| b.ins().sshr(x, y)),
            O::I32ShrU | O::I64ShrU => self.binary(|b, x, y| b.ins().ushr(x, y)),
            O::I32Rotl | O::I64Rotl => self.binary(|b, x, y| b.ins().rotl(x, y)),
            O::I32Rotr | O::I64Rotr => self.binary(|b, x, y| b.ins().rotr(x, y)),

            // ---- integer comparisons ----
            O::I32Eq | O::I64Eq => self.icmp(IntCC::Equal),
            O::I32Ne | O::I64Ne => self.icmp(IntCC::NotEqual),
            O::I32LtS | O::I64LtS => self.icmp(IntCC::SignedLessThan),
            O::I32LtU | O::I64LtU => self.icmp(IntCC::UnsignedLessThan),
            O::I32GtS | O::I64GtS => self.icmp(IntCC::SignedGreaterThan),
            O::I32GtU | O::I64GtU => self.icmp(IntCC::UnsignedGreaterThan),
            O::I32LeS | O::I64LeS => self.icmp(IntCC::SignedLessThanOrEqual),
            O::I32LeU | O::I64LeU => self.icmp(IntCC::UnsignedLessThanOrEqual),
            O::I32GeS | O::I64GeS => self.icmp(IntCC::SignedGreaterThanOrEqual),
            O::I32GeU | O::I64GeU => self.icmp(IntCC::UnsignedGreaterThanOrEqual),

            // ---- float ----
            O::F32Abs | O::F64Abs => self.unary(|b, x| b.ins().fabs(x)),
            O::F32Neg | O::F64Neg => self.unary(|b, x| b.ins().fneg(x)),
            O::F32Sqrt | O::F64Sqrt => self.unary(|b, x| b.ins().sqrt(x)),
            O::F32Ceil | O::F64Ceil => self.unary(|b, x| b.ins().ceil(x)),
            O::F32Floor | O::F64Floor => self.unary(|b, x| b.ins().floor(x)),
            O::F32Trunc | O::F64Trunc => self.unary(|b, x| b.ins().trunc(x)),
            O::F32Nearest | O::F64Nearest => self.unary(|b, x| b.ins().nearest(x)),
            O::F32Add | O::F64Add => self.binary(|b, x, y| b.ins().fadd(x, y)),
            O::F32Sub | O::F64Sub => self.binary(|b, x, y| b.ins().fsub(x, y)),
            O::F32Mul | O::F64Mul => self.binary(|b, x, y| b.ins().fmul(x, y)),
            O::F32Div | O::F64Div => self.binary(|b, x, y| b.ins().fdiv(x, y)),
            O::F32Min | O::F64Min => self.binary(|b, x, y| b.ins().fmin(x, y)),
            O::F32Max | O::F64Max => self.binary(|b, x, y| b.ins().fmax(x, y)),
            O::F32Copysign | O::F64Copysign => self.binary(|b, x, y| b.ins().fcopysign(x, y)),
            O::F32Eq | O::F64Eq => self.fcmp(FloatCC::Equal),
            O::F32Ne | O::F64Ne => self.fcmp(FloatCC::NotEqual),
            O::F32Lt | O::F64Lt => self.fcmp(FloatCC::LessThan),
            O::F32Gt | O::F64Gt => self.fcmp(FloatCC::GreaterThan),
            O::F32Le | O::F64Le => self.fcmp(FloatCC::LessThanOrEqual),
            O::F32Ge | O::F64Ge => self.fcmp(FloatCC::GreaterThanOrEqual),

            // ---- conversions ----
            O::F32ConvertI32S | O::F32ConvertI64S => {
                self.unary(|b, x| b.ins().fcvt_from_sint(F32, x))
            }
            O::F32ConvertI32U | O::F32ConvertI64U => {
                self.unary(|b, x| b.ins().fcvt_from_uint(F32, x))
            }
            O::F64ConvertI32S | O::F64ConvertI64S => {
                self.unary(|b, x| b.ins().fcvt_from_sint(F64, x))
            }
            O::F64ConvertI32U | O::F64ConvertI64U => {
                self.unary(|b, x| b.ins().fcvt_from_uint(F64, x))
            }
            O::F32DemoteF64 => self.unary(|b, x| b.ins().fdemote(F32, x)),
            O::F64PromoteF32 => self.unary(|b, x| b.ins().fpromote(F64, x)),
            O::I32TruncF32S | O::I32TruncF64S => self.unary(|b, x| b.ins().fcvt_to_sint(I32, x)),
            O::I32TruncF32U | O::I32TruncF64U => self.unary(|b, x| b.ins().fcvt_to_uint(I32, x)),
            O::I64TruncF32S | O::I64TruncF64S => self.unary(|b, x| b.ins().fcvt_to_sint(I64, x)),
            O::I64TruncF32U | O::I64TruncF64U => self.unary(|b, x| b.ins().fcvt_to_uint(I64, x)),
            O::I32TruncSatF32S | O::I32TruncSatF64S => {
                self.unary(|b, x| b.ins().fcvt_to_sint_sat(I32, x))
            }
            O::I32TruncSatF32U | O::I32TruncSatF64U => {
                self.unary(|b, x| b.ins().fcvt_to_uint_sat(I32, x))
            }
            O::I64TruncSatF32S | O::I64TruncSatF64S => {
                self.unary(|b, x| b.ins().fcvt_to_sint_sat(I64, x))
            }
            O::I64TruncSatF32U | O::I64TruncSatF64U => {
                self.unary(|b, x| b.ins().fcvt_to_uint_sat(I64, x))
            }
            O::F32ReinterpretI32 => self.unary(|b, x| b.ins().bitcast(F32, MemFlagsData::new(), x)),
            O::F64ReinterpretI64 => self.unary(|b, x| b.ins().bitcast(F64, MemFlagsData::new(), x)),
            O::I32ReinterpretF32 => self.unary(|b, x| b.ins().bitcast(I32, MemFlagsData::new(), x)),
            O::I64ReinterpretF64 => self.unary(|b, x| b.ins().bitcast(I64, MemFlagsData::new(), x)),

            ref other => {
                if !self.translate_simd_operator(other)? {
                    bail!(
                        "unsupported operator `{}` (proposal not supported by this runtime)",
                        operator_name(other)
                    );
                }
            }
        }
        Ok(())
    }

    fn unary(&mut self, f: impl FnOnce(&mut FunctionBuilder<'f>, Value) -> Value) {
        let x = self.pop1();
        let v = f(&mut self.b, x);
        self.push1(v);
    }

    fn binary(&mut self, f: impl FnOnce(&mut FunctionBuilder<'f>, Value, Value) -> Value) {
        let (x, y) = self.pop2();
        let v = f(&mut self.b, x, y);
        self.push1(v);
    }

    fn icmp(&mut self, cc: IntCC) {
        self.binary(|b, x, y| {
            let c = b.ins().icmp(cc, x, y);
            b.ins().uextend(I32, c)
        });
    }

    fn fcmp(&mut self, cc: FloatCC) {
        self.binary(|b, x, y| {
            let c = b.ins().fcmp(cc, x, y);
            b.ins().uextend(I32, c)
        });
    }

    /// The block of an `else` arm, created now if the `if` head branched to
    /// its destination instead.
    fn else_block(&mut self, else_data: ElseData) -> Block {
        match else_data {
            ElseData::NoElse {
                branch_inst,
                placeholder,
            } => {
                // The redirected edge still carries the `if` params (as the
                // results of an empty `else`), so the new block takes them
                // as unused params; the arm uses the dominating originals.
                let else_block = self.b.create_block();
                let types: Vec<Type> = self
                    .b
                    .func
                    .dfg
                    .block_params(placeholder)
                    .iter()
                    .map(|v| self.b.func.dfg.value_type(*v))
                    .collect();
                for ty in types {
                    self.b.append_block_param(else_block, ty);
                }
                self.b
                    .change_jump_destination(branch_inst, placeholder, else_block);
                self.b.seal_block(else_block);
                else_block
            }
            ElseData::WithElse { else_block } => else_block,
        }
    }

    /// Whether `r`, a reference of the `any` hierarchy, has heap type
    /// `hty` (null counting if `nullable`), as an `i8` 0 or 1. Every
    /// non-null value of that hierarchy here is an `i31` (low bit set), so
    /// `any`, `eq` and `i31` hold for every non-null value and `none` for
    /// none; the low-bit test keeps that true should other values appear.
    /// Casts to function or extern types are refused.
    fn internal_ref_test(
        &mut self,
        r: Value,
        hty: wasmparser::HeapType,
        nullable: bool,
    ) -> Result<Value> {
        use wasmtime_mmu_environ::WasmHeapType as H;
        let target = H::from_wasmparser(hty)?;
        let is_null = self.b.ins().icmp_imm_s(IntCC::Equal, r, 0);
        let non_null_ok = match target {
            H::Any | H::Eq | H::I31 => {
                let tag = self.b.ins().band_imm_u(r, 1);
                self.b.ins().icmp_imm_s(IntCC::NotEqual, tag, 0)
            }
            H::None => self.b.ins().iconst(ir::types::I8, 0),
            other => bail!(
                "`ref.test`/`ref.cast` to `{other}` is not supported (only the `any` hierarchy's abstract types)"
            ),
        };
        Ok(if nullable {
            self.b.ins().bor(is_null, non_null_ok)
        } else {
            non_null_ok
        })
    }

    /// Traps with `Trap::NullReference` if the reference `r` is null.
    fn trap_if_null(&mut self, r: Value) {
        let trap = crate::compiler::trap_code(wasmtime_mmu_environ::Trap::NullReference);
        self.b.ins().trapz(r, trap);
    }

    /// Branches to the label `relative_depth` out, with the label's
    /// arguments from the top of the stack, when `cond` is not zero, and
    /// falls through otherwise (the stack unchanged).
    fn branch_if(&mut self, cond: Value, relative_depth: u32) {
        let i = self.control.len() - 1 - relative_depth as usize;
        let frame = &mut self.control[i];
        frame.set_branched_to_exit();
        let (n, dest) = (frame.branch_arity(), frame.br_destination());
        let args = self.canonical_top(n);
        let next = self.b.create_block();
        self.b.ins().brif(cond, dest, &args, next, &[]);
        self.b.seal_block(next);
        self.b.switch_to_block(next);
    }

    /// `br_on_null` (`on_null`) and `br_on_non_null`. The first branches
    /// without the reference and keeps it on the fall-through path; the
    /// second passes it to the target (its last branch argument) and drops
    /// it on the fall-through path.
    fn translate_br_on_null(&mut self, relative_depth: u32, on_null: bool) {
        if on_null {
            let r = self.pop1();
            let is_null = self.b.ins().icmp_imm_s(IntCC::Equal, r, 0);
            self.branch_if(is_null, relative_depth);
            self.push1(r);
        } else {
            let r = *self
                .stack
                .last()
                .expect("validated: reference on the stack");
            self.branch_if(r, relative_depth);
            self.pop1();
        }
    }

    fn translate_br_table(&mut self, targets: &wasmparser::BrTable<'_>) -> Result<()> {
        let index = self.pop1();
        let default = targets.default();
        let depths = targets.targets().collect::<Result<Vec<u32>, _>>()?;
        let min_depth = depths.iter().copied().fold(default, u32::min);
        let arity = {
            let i = self.control.len() - 1 - min_depth as usize;
            self.control[i].branch_arity()
        };
        let dest_of = |t: &mut Self, depth: u32| {
            let i = t.control.len() - 1 - depth as usize;
            let frame = &mut t.control[i];
            frame.set_branched_to_exit();
            frame.br_destination()
        };
        if arity == 0 {
            let mut calls = Vec::with_capacity(depths.len());
            for &d in &depths {
                let block = dest_of(self, d);
                calls.push(self.b.func.dfg.block_call(block, &[]));
            }
            let block = dest_of(self, default);
            let default_call = self.b.func.dfg.block_call(block, &[]);
            let jt = self
                .b
                .create_jump_table(JumpTableData::new(default_call, &calls));
            self.b.ins().br_table(index, jt);
        } else {
            // `br_table` cannot pass block arguments: split the edges with
            // one block per distinct target that jumps on with them.
            let mut edge_blocks: HashMap<u32, Block> = HashMap::new();
            let mut order = Vec::new();
            let mut edge = |t: &mut Self, depth: u32| match edge_blocks.entry(depth) {
                Entry::Occupied(e) => *e.get(),
                Entry::Vacant(e) => {
                    let block = t.b.create_block();
                    order.push((depth, block));
                    *e.insert(block)
                }
            };
            let mut calls = Vec::with_capacity(depths.len());
            for &d in &depths {
                let block = edge(self, d);
                calls.push(self.b.func.dfg.block_call(block, &[]));
            }
            let block = edge(self, default);
            let default_call = self.b.func.dfg.block_call(block, &[]);
            let jt = self
                .b
                .create_jump_table(JumpTableData::new(default_call, &calls));
            // Canonicalizing may emit bitcasts (float vectors to `i8x16`),
            // which must come before the terminator.
            let args = self.canonical_top(arity);
            self.b.ins().br_table(index, jt);
            for (depth, block) in order {
                self.b.switch_to_block(block);
                self.b.seal_block(block);
                let dest = dest_of(self, depth);
                self.b.ins().jump(dest, &args);
            }
        }
        self.popn(arity);
        self.reachable = false;
        Ok(())
    }

    fn translate_load(&mut self, memarg: &MemArg, opcode: ir::Opcode, ty: Type) -> Result<()> {
        if let Some(v) = self.load_value(memarg, opcode, ty) {
            self.push1(v);
        }
        Ok(())
    }

    /// Pops an address and loads from it with `opcode`; `None` when the
    /// access always traps.
    pub(crate) fn load_value(
        &mut self,
        memarg: &MemArg,
        opcode: ir::Opcode,
        ty: Type,
    ) -> Option<Value> {
        let size = match opcode {
            ir::Opcode::Sload8 | ir::Opcode::Uload8 => 1,
            ir::Opcode::Sload16 | ir::Opcode::Uload16 => 2,
            ir::Opcode::Sload32 | ir::Opcode::Uload32 => 4,
            _ => ty.bytes(),
        };
        let index = self.pop1();
        let (flags, addr) = self.prepare_addr(memarg, size, index)?;
        let flags = self.b.func.dfg.mem_flags.insert(flags).unwrap();
        let (inst, dfg) = self.b.ins().Load(opcode, ty, flags, Offset32::new(0), addr);
        Some(dfg.first_result(inst))
    }

    pub(crate) fn translate_store(&mut self, memarg: &MemArg, opcode: ir::Opcode) -> Result<()> {
        let value = self.pop1();
        let ty = self.b.func.dfg.value_type(value);
        let size = match opcode {
            ir::Opcode::Istore8 => 1,
            ir::Opcode::Istore16 => 2,
            ir::Opcode::Istore32 => 4,
            _ => ty.bytes(),
        };
        let index = self.pop1();
        let Some((flags, addr)) = self.prepare_addr(memarg, size, index) else {
            return Ok(());
        };
        let flags = self.b.func.dfg.mem_flags.insert(flags).unwrap();
        self.b
            .ins()
            .Store(opcode, ty, flags, Offset32::new(0), value, addr);
        // After the store: one that traps never marks (a mark past the
        // memory's end would lie outside the marks).
        if self.cx.tunables.track_memory_writes {
            let mem = MemoryIndex::from_u32(memarg.memory);
            self.mark_store(mem, index, memarg.offset, u64::from(size));
        }
        Ok(())
    }

    /// Marks the rest of the block unreachable after an operator that
    /// always traps.
    pub(crate) fn unreachable_after_trap(&mut self) {
        self.reachable = false;
    }
}

/// The name of an operator for error messages.
fn operator_name(op: &Operator<'_>) -> String {
    let s = format!("{op:?}");
    s.split([' ', '{', '(']).next().unwrap_or("?").to_string()
}
