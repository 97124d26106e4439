//! How compiled code reaches the runtime's data: `VMContext` fields,
//! globals, memories, tables, calls, builtins, and the fuel and epoch
//! checks.
//!
//! Memory flags follow one rule: a load of something that never changes
//! after instantiation is `readonly` + `notrap` + `can_move`, so that the
//! optimizer treats it as pure and can deduplicate it and hoist it out of
//! loops; everything else compiled code or the runtime may write gets an
//! alias region, so that stores to one kind of data do not force reloads of
//! another.

use crate::compiler::{host_call_failed_code, mmu_poll_code, value_type, wasm_signature};
use crate::exceptions::Callee;
use crate::translate::{EpochState, FuelState, FuncTranslator, MmuPollState, PollBase};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::immediates::{Ieee32, Ieee64, Offset32};
use cranelift_codegen::ir::types::*;
use cranelift_codegen::ir::{self, AliasRegion, AliasRegionData, InstBuilder, MemFlagsData, Value};
use cranelift_codegen::isa::CallConv;
use std::borrow::Cow;
use wasmparser::Operator;
use wasmtime_mmu_environ::builtins::{BuiltinFunctionIndex, BuiltinType};
use wasmtime_mmu_environ::vm::*;
use wasmtime_mmu_environ::{
    ConstOp, DataIndex, ElemIndex, FuncIndex, GlobalIndex, MemoryIndex, MmuInterruptionMode,
    TableIndex, Trap, TypeIndex,
};

/// Alias-region kinds; a region's id is `kind << 24 | index`.
#[derive(Clone, Copy)]
#[repr(u32)]
pub(crate) enum RegionKind {
    /// Bytes of a defined linear memory (indexed by defined memory).
    DefinedHeap = 1,
    /// Bytes of any imported linear memory (they may be the same memory).
    ImportedHeap,
    /// Mutable fields (`base` of a moving memory, `current_length`) of
    /// every `VMMemoryDefinition`.
    MemoryDefinition,
    /// Storage of a defined global (indexed by defined global).
    DefinedGlobal,
    /// Storage of any imported global.
    ImportedGlobal,
    /// Elements of a defined table (indexed by defined table).
    DefinedTable,
    /// Elements of any imported table.
    ImportedTable,
    /// Mutable fields of every `VMTableDefinition`.
    TableDefinition,
    /// `VMStoreContext::fuel_consumed`.
    Fuel,
    /// `VMStoreContext::epoch_deadline`.
    EpochDeadline,
    /// The engine's epoch counter.
    EpochCounter,
    /// `ValRaw` arrays of the array-call ABI.
    ValRaw,
    /// `VMStoreContext::last_wasm_exit_{fp,pc}`.
    ExitFrame,
    /// The write marks of every linear memory (`vm::WRITE_MARKS_OFFSET`):
    /// compiled code only stores to them, so they need no ordering against
    /// anything it loads.
    WriteMarks,
}

/// Flags for a load of data that never changes once the instance exists.
pub(crate) fn readonly() -> MemFlagsData {
    MemFlagsData::trusted().with_readonly().with_can_move()
}

/// Adds the alias region `kind`/`index` to `func`.
pub(crate) fn region_in(func: &mut ir::Function, kind: RegionKind, index: u32) -> AliasRegion {
    let user_id = (kind as u32) << 24 | index;
    if let Some(r) = func.dfg.alias_regions.get(user_id) {
        return r;
    }
    let description = match kind {
        RegionKind::DefinedHeap => Cow::Owned(format!("defined memory {index}")),
        RegionKind::ImportedHeap => Cow::Borrowed("imported memories"),
        RegionKind::MemoryDefinition => Cow::Borrowed("memory definitions"),
        RegionKind::DefinedGlobal => Cow::Owned(format!("defined global {index}")),
        RegionKind::ImportedGlobal => Cow::Borrowed("imported globals"),
        RegionKind::DefinedTable => Cow::Owned(format!("defined table {index}")),
        RegionKind::ImportedTable => Cow::Borrowed("imported tables"),
        RegionKind::TableDefinition => Cow::Borrowed("table definitions"),
        RegionKind::Fuel => Cow::Borrowed("fuel"),
        RegionKind::EpochDeadline => Cow::Borrowed("epoch deadline"),
        RegionKind::EpochCounter => Cow::Borrowed("epoch counter"),
        RegionKind::ValRaw => Cow::Borrowed("ValRaw array"),
        RegionKind::ExitFrame => Cow::Borrowed("last wasm exit"),
        RegionKind::WriteMarks => Cow::Borrowed("write marks"),
    };
    func.dfg.alias_regions.insert(AliasRegionData {
        user_id,
        description,
    })
}

/// Makes every prologue of `func` compare the stack pointer with
/// `VMStoreContext::stack_limit`, found through the vmctx parameter.
pub(crate) fn set_stack_limit(func: &mut ir::Function) {
    let vmctx = func.create_global_value(ir::GlobalValueData::VMContext);
    let ro = func.dfg.mem_flags.insert(readonly()).unwrap();
    let store = func.create_global_value(ir::GlobalValueData::Load {
        base: vmctx,
        offset: Offset32::new(VMCTX_STORE_CONTEXT_OFFSET as i32),
        global_type: I64,
        flags: ro,
    });
    let plain = func.dfg.mem_flags.insert(MemFlagsData::trusted()).unwrap();
    let limit = func.create_global_value(ir::GlobalValueData::Load {
        base: store,
        offset: Offset32::new(VMSTORE_CONTEXT_STACK_LIMIT_OFFSET as i32),
        global_type: I64,
        flags: plain,
    });
    func.stack_limit = Some(limit);
}

/// The Cranelift type of a builtin's parameter or result.
fn builtin_type(ty: BuiltinType) -> ir::Type {
    match ty {
        BuiltinType::vmctx | BuiltinType::i64 | BuiltinType::pointer => I64,
        BuiltinType::i32 => I32,
        BuiltinType::bool => I8,
    }
}

/// The signature of builtin `which` in calling convention `conv`.
pub(crate) fn builtin_signature(which: BuiltinFunctionIndex, conv: CallConv) -> ir::Signature {
    let mut sig = ir::Signature::new(conv);
    sig.params.extend(
        which
            .params()
            .iter()
            .map(|t| ir::AbiParam::new(builtin_type(*t))),
    );
    sig.returns
        .extend(which.ret().map(|t| ir::AbiParam::new(builtin_type(t))));
    sig
}

/// How `memory.copy`-like operations are charged fuel.
const BULK_COST_PER_UNIT: i64 = 1;
/// `memory.copy`s of constant lengths up to this are expanded inline.
const INLINE_COPY_MAX_BYTES: u32 = 128;
const _: () = assert!(
    INLINE_COPY_MAX_BYTES as u64 <= WRITE_MARK_REACH,
    "an inline copy is marked once, for its first byte"
);
/// Bulk operations statically known to cost at most this need no
/// fuel/epoch check of their own (as upstream).
const SMALL_BULK_OP_COST: i64 = 128;

impl FuncTranslator<'_, '_> {
    pub(crate) fn region(&mut self, kind: RegionKind, index: u32) -> AliasRegion {
        region_in(self.b.func, kind, index)
    }

    fn load_readonly(&mut self, base: Value, offset: u32) -> Value {
        self.b.ins().load(I64, readonly(), base, offset as i32)
    }

    fn store_context(&mut self) -> Value {
        let vmctx = self.vmctx;
        self.load_readonly(vmctx, VMCTX_STORE_CONTEXT_OFFSET)
    }

    // ---- globals ----

    /// Where global `index` lives, and the flags to access it with.
    fn global_location(&mut self, index: GlobalIndex) -> (Value, i32, MemFlagsData) {
        let mutable = self.cx.module.globals[index].mutable;
        let (base, offset, region) = match self.cx.module.defined_global_index(index) {
            Some(d) => {
                let region = self.region(RegionKind::DefinedGlobal, d.as_u32());
                (self.vmctx, self.cx.offsets.defined_global(d), region)
            }
            None => {
                let vmctx = self.vmctx;
                let ptr = self.load_readonly(vmctx, self.cx.offsets.imported_global(index));
                (ptr, 0, self.region(RegionKind::ImportedGlobal, 0))
            }
        };
        let flags = if mutable {
            MemFlagsData::trusted()
                .with_endianness(ir::Endianness::Little)
                .with_alias_region(Some(region))
        } else {
            readonly().with_endianness(ir::Endianness::Little)
        };
        (base, offset as i32, flags)
    }

    pub(crate) fn global_get(&mut self, index: GlobalIndex) -> Value {
        let ty = self.cx.module.globals[index];
        if !ty.mutable
            && let Some(d) = self.cx.module.defined_global_index(index)
            && let [op] = &*self.cx.module.global_inits[d].ops
        {
            // An immutable global with a constant initializer is that
            // constant (as upstream does).
            match *op {
                ConstOp::I32Const(x) => return self.b.ins().iconst(I32, i64::from(x as u32)),
                ConstOp::I64Const(x) => return self.b.ins().iconst(I64, x),
                ConstOp::F32Const(x) => return self.b.ins().f32const(Ieee32::with_bits(x)),
                ConstOp::F64Const(x) => return self.b.ins().f64const(Ieee64::with_bits(x)),
                ConstOp::V128Const(x) => return self.v128_const(x),
                _ => {}
            }
        }
        let (base, offset, flags) = self.global_location(index);
        self.b
            .ins()
            .load(value_type(ty.content), flags, base, offset)
    }

    pub(crate) fn global_set(&mut self, index: GlobalIndex, value: Value) {
        let (base, offset, flags) = self.global_location(index);
        self.b.ins().store(flags, value, base, offset);
    }

    // ---- memories ----

    /// The address of memory `index`'s `VMMemoryDefinition`, as a base and
    /// an offset.
    fn memory_definition(&mut self, index: MemoryIndex) -> (Value, u32) {
        match self.cx.module.defined_memory_index(index) {
            Some(d) => (self.vmctx, self.cx.offsets.defined_memory(d)),
            None => {
                let vmctx = self.vmctx;
                let ptr = self.load_readonly(vmctx, self.cx.offsets.imported_memory(index));
                (ptr, 0)
            }
        }
    }

    /// Memory `index`'s base address. Hoistable when the memory never
    /// moves; otherwise reloaded after anything that may grow it.
    pub(crate) fn heap_base(&mut self, index: MemoryIndex) -> Value {
        let (def, offset) = self.memory_definition(index);
        let flags = if self.cx.memory_plans[index].may_move {
            let region = self.region(RegionKind::MemoryDefinition, 0);
            MemFlagsData::trusted().with_alias_region(Some(region))
        } else {
            readonly()
        };
        self.b
            .ins()
            .load(I64, flags, def, (offset + VMMEMORY_BASE_OFFSET) as i32)
    }

    /// Memory `index`'s current length in bytes (an `i64`).
    pub(crate) fn heap_bound(&mut self, index: MemoryIndex) -> Value {
        let (def, offset) = self.memory_definition(index);
        let region = self.region(RegionKind::MemoryDefinition, 0);
        let flags = MemFlagsData::trusted().with_alias_region(Some(region));
        self.b.ins().load(
            I64,
            flags,
            def,
            (offset + VMMEMORY_CURRENT_LENGTH_OFFSET) as i32,
        )
    }

    /// The alias region of memory `index`'s bytes.
    pub(crate) fn heap_region(&mut self, index: MemoryIndex) -> AliasRegion {
        match self.cx.module.defined_memory_index(index) {
            Some(d) => self.region(RegionKind::DefinedHeap, d.as_u32()),
            None => self.region(RegionKind::ImportedHeap, 0),
        }
    }

    pub(crate) fn memory_size(&mut self, index: MemoryIndex) -> Value {
        let bytes = self.heap_bound(index);
        let pages = self.b.ins().ushr_imm_u(bytes, 16);
        self.b.ins().ireduce(I32, pages)
    }

    pub(crate) fn memory_grow(&mut self, index: MemoryIndex, delta: Value) -> Value {
        let mem = self.b.ins().iconst(I32, i64::from(index.as_u32()));
        let delta = self.b.ins().uextend(I64, delta);
        let vmctx = self.vmctx;
        let old = self
            .call_builtin(BuiltinFunctionIndex::memory_grow, &[vmctx, mem, delta])
            .expect("memory_grow returns a value");
        self.trap_if_grow_failed_with_error(old);
        self.b.ins().ireduce(I32, old)
    }

    /// Marks a `size`-byte store at `index + offset` of memory `mem`, unless
    /// an earlier store of the current block through the same index value
    /// was marked at an offset whose mark reaches this one
    /// (`vm::WRITE_MARK_REACH`): the earlier mark dominates this store and
    /// stays set for the rest of the call (only a reset clears marks, and
    /// none can run while the instance's code is on the stack).
    pub(crate) fn mark_store(&mut self, mem: MemoryIndex, index: Value, offset: u64, size: u64) {
        let block = self.b.current_block();
        if self.marked_stores.0 != block {
            self.marked_stores = (block, Vec::new());
        }
        let covered = self.marked_stores.1.iter().any(|&(m, v, marked)| {
            m == mem
                && v == index
                && marked <= offset
                && offset
                    .checked_add(size)
                    .is_some_and(|end| end <= marked.saturating_add(WRITE_MARK_REACH))
        });
        if !covered {
            self.mark_written(mem, index, offset);
            self.marked_stores.1.push((mem, index, offset));
        }
    }

    /// Sets the write mark of the 4 KiB of memory `mem` that Wasm address
    /// `index + offset` (a 32-bit index) lies in, after a store there.
    ///
    /// One mark per store, for its first byte: a store of up to 16 bytes
    /// that crosses into the next 4 KiB writes at most 15 bytes there, and a
    /// reset restores the first `vm::WRITE_MARK_REACH - 1` bytes after every
    /// run of marked 4 KiB blocks (see `Memory::reset` in the runtime), so
    /// the second mark is not needed.
    fn mark_written(&mut self, mem: MemoryIndex, index: Value, offset: u64) {
        let index = self.b.ins().uextend(I64, index);
        // An index that reached this point addressed a byte of the memory,
        // so `index + offset` is below 4 GiB and needs no overflow check.
        let address = if offset == 0 {
            index
        } else {
            self.b.ins().iadd_imm_s(index, offset as i64)
        };
        let mark = self
            .b
            .ins()
            .ushr_imm_u(address, i64::from(WRITE_MARK_SHIFT));
        self.store_mark_byte(mem, mark);
    }

    /// Sets the write marks of the 4 KiB blocks that `[dst, dst + len)` of
    /// memory `mem` touches, after a bulk write there or an inline copy.
    /// `dst` and `len` are `i64` and already bounds-checked, so their sum
    /// does not pass the memory's size.
    fn mark_written_range(&mut self, mem: MemoryIndex, dst: Value, len: Value) {
        let shift = i64::from(WRITE_MARK_SHIFT);
        let first = self.b.ins().ushr_imm_u(dst, shift);
        let end = self.b.ins().iadd(dst, len);
        let end = self.b.ins().iadd_imm_s(end, (1 << shift) - 1);
        let end = self.b.ins().ushr_imm_u(end, shift);
        let count = self.b.ins().isub(end, first);
        let base = self.heap_base(mem);
        let marks = self.b.ins().iadd(base, first);
        let marks = self
            .b
            .ins()
            .iadd_imm_s(marks, i64::from(WRITE_MARKS_OFFSET));
        let one = self.b.ins().iconst(I32, 1);
        let vmctx = self.vmctx;
        // The fill builtin is a bare `memset`; the marks lie inside the
        // memory's mapping (its leading guard), `count` of them at most one
        // past the memory's last 4 KiB.
        self.call_builtin(
            BuiltinFunctionIndex::memory_fill,
            &[vmctx, marks, one, count],
        );
    }

    /// Stores 1 into write mark number `mark` (an `i64`) of memory `mem`.
    fn store_mark_byte(&mut self, mem: MemoryIndex, mark: Value) {
        let base = self.heap_base(mem);
        let at = self.b.ins().iadd(base, mark);
        let one = self.b.ins().iconst(I8, 1);
        let region = self.region(RegionKind::WriteMarks, 0);
        let flags = MemFlagsData::trusted().with_alias_region(Some(region));
        self.b.ins().store(flags, one, at, WRITE_MARKS_OFFSET);
    }

    pub(crate) fn memory_fill(&mut self, index: MemoryIndex, dst: Value, val: Value, len: Value) {
        self.before_bulk_op(len);
        // Bounds-checked here, as upstream does, so that the builtin is a
        // bare `memset`: no instance or store lookups per call.
        let len = self.b.ins().uextend(I64, len);
        let dst_index = self.b.ins().uextend(I64, dst);
        let dst = self.dynamic_checked_range_addr(index, dst, len);
        let vmctx = self.vmctx;
        self.call_builtin(BuiltinFunctionIndex::memory_fill, &[vmctx, dst, val, len]);
        if self.cx.tunables.track_memory_writes {
            self.mark_written_range(index, dst_index, len);
        }
    }

    pub(crate) fn memory_copy(
        &mut self,
        dst_mem: MemoryIndex,
        src_mem: MemoryIndex,
        dst: Value,
        src: Value,
        len: Value,
    ) {
        self.before_bulk_op(len);
        if let Some(n) = self.iconst_u32(len).filter(|n| *n <= INLINE_COPY_MAX_BYTES) {
            self.inline_memory_copy(dst_mem, src_mem, dst, src, n);
            return;
        }
        // Both ranges are checked before anything is written, here rather
        // than in the builtin (a bare `memmove`), as upstream does: programs
        // that copy often pay for the call, not for lookups behind it.
        let len = self.b.ins().uextend(I64, len);
        let dst_index = self.b.ins().uextend(I64, dst);
        let dst = self.dynamic_checked_range_addr(dst_mem, dst, len);
        let src = self.dynamic_checked_range_addr(src_mem, src, len);
        let vmctx = self.vmctx;
        self.call_builtin(BuiltinFunctionIndex::memory_copy, &[vmctx, dst, src, len]);
        if self.cx.tunables.track_memory_writes {
            self.mark_written_range(dst_mem, dst_index, len);
        }
    }

    /// `memory.copy` of a small constant length as loads and stores, which
    /// is much cheaper than the builtin call (as upstream does).
    fn inline_memory_copy(
        &mut self,
        dst_mem: MemoryIndex,
        src_mem: MemoryIndex,
        dst: Value,
        src: Value,
        len: u32,
    ) {
        // Both ranges are checked before anything is written: an
        // out-of-bounds copy must not write at all.
        let dst_addr = self.checked_range_addr(dst_mem, dst, len);
        let src_addr = self.checked_range_addr(src_mem, src, len);
        let src_region = self.heap_region(src_mem);
        let dst_region = self.heap_region(dst_mem);
        let load_flags = MemFlagsData::trusted()
            .with_endianness(ir::Endianness::Little)
            .with_alias_region(Some(src_region));
        let store_flags = MemFlagsData::trusted()
            .with_endianness(ir::Endianness::Little)
            .with_alias_region(Some(dst_region));
        let mut chunks = Vec::new();
        let (mut offset, mut remaining) = (0u32, len);
        for (width, ty) in [(16, I8X16), (8, I64), (4, I32), (2, I16), (1, I8)] {
            while remaining >= width {
                chunks.push((offset as i32, ty));
                offset += width;
                remaining -= width;
            }
        }
        // Everything is loaded before anything is stored, so overlapping
        // ranges copy correctly.
        let values: Vec<Value> = chunks
            .iter()
            .map(|&(off, ty)| self.b.ins().load(ty, load_flags, src_addr, off))
            .collect();
        for (&(off, _), v) in chunks.iter().zip(values) {
            self.b.ins().store(store_flags, v, dst_addr, off);
        }
        if self.cx.tunables.track_memory_writes && len > 0 {
            // The first byte's mark reaches all of them (see the assertion
            // under `INLINE_COPY_MAX_BYTES`).
            self.mark_written(dst_mem, dst, 0);
        }
    }

    /// The native address of `[index, index + len)` in memory `mem`, trapping
    /// with `MemoryOutOfBounds` unless the whole range is in bounds.
    fn checked_range_addr(&mut self, mem: MemoryIndex, index: Value, len: u32) -> Value {
        let len = self.b.ins().iconst(I64, i64::from(len));
        self.dynamic_checked_range_addr(mem, index, len)
    }

    /// [`Self::checked_range_addr`] for a length known only at run time:
    /// an `i64` zero-extended from the Wasm `i32`, so `index + len` cannot
    /// wrap.
    fn dynamic_checked_range_addr(&mut self, mem: MemoryIndex, index: Value, len: Value) -> Value {
        let index = self.b.ins().uextend(I64, index);
        let end = self.b.ins().iadd(index, len);
        let bound = self.heap_bound(mem);
        let oob = self.b.ins().icmp(IntCC::UnsignedGreaterThan, end, bound);
        self.b
            .ins()
            .trapnz(oob, crate::compiler::trap_code(Trap::MemoryOutOfBounds));
        let base = self.heap_base(mem);
        self.b.ins().iadd(base, index)
    }

    pub(crate) fn memory_init(
        &mut self,
        index: MemoryIndex,
        data: DataIndex,
        dst: Value,
        src: Value,
        len: Value,
    ) {
        self.before_bulk_op(len);
        let mem = self.b.ins().iconst(I32, i64::from(index.as_u32()));
        let data = self.b.ins().iconst(I32, i64::from(data.as_u32()));
        let dst = self.b.ins().uextend(I64, dst);
        let vmctx = self.vmctx;
        self.call_builtin(
            BuiltinFunctionIndex::memory_init,
            &[vmctx, mem, data, dst, src, len],
        );
        if self.cx.tunables.track_memory_writes {
            let len = self.b.ins().uextend(I64, len);
            self.mark_written_range(index, dst, len);
        }
    }

    pub(crate) fn data_drop(&mut self, data: DataIndex) {
        let data = self.b.ins().iconst(I32, i64::from(data.as_u32()));
        let vmctx = self.vmctx;
        self.call_builtin(BuiltinFunctionIndex::data_drop, &[vmctx, data]);
    }

    // ---- tables ----

    fn table_is_fixed(&self, index: TableIndex) -> bool {
        let ty = self.cx.module.tables[index];
        ty.maximum == Some(ty.minimum)
    }

    fn table_definition(&mut self, index: TableIndex) -> (Value, u32) {
        match self.cx.module.defined_table_index(index) {
            Some(d) => (self.vmctx, self.cx.offsets.defined_table(d)),
            None => {
                let vmctx = self.vmctx;
                let ptr = self.load_readonly(vmctx, self.cx.offsets.imported_table(index));
                (ptr, 0)
            }
        }
    }

    /// Table `index`'s current number of elements (an `i64`).
    fn table_bound(&mut self, index: TableIndex) -> Value {
        if self.table_is_fixed(index) {
            let n = self.cx.module.tables[index].minimum;
            return self.b.ins().iconst(I64, n as i64);
        }
        let (def, offset) = self.table_definition(index);
        let region = self.region(RegionKind::TableDefinition, 0);
        let flags = MemFlagsData::trusted().with_alias_region(Some(region));
        self.b.ins().load(
            I64,
            flags,
            def,
            (offset + VMTABLE_CURRENT_ELEMENTS_OFFSET) as i32,
        )
    }

    fn table_base(&mut self, index: TableIndex) -> Value {
        let (def, offset) = self.table_definition(index);
        // A table that cannot grow never moves.
        let flags = if self.table_is_fixed(index) {
            readonly()
        } else {
            let region = self.region(RegionKind::TableDefinition, 0);
            MemFlagsData::trusted().with_alias_region(Some(region))
        };
        self.b
            .ins()
            .load(I64, flags, def, (offset + VMTABLE_BASE_OFFSET) as i32)
    }

    /// The address of element `elem` (an `i32`) of table `index`, bounds
    /// checked, and the flags to access it with.
    fn table_element(&mut self, index: TableIndex, elem: Value) -> (Value, MemFlagsData) {
        let bound = self.table_bound(index);
        let elem = self.b.ins().uextend(I64, elem);
        let oob = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, elem, bound);
        let base = self.table_base(index);
        let scaled = self.b.ins().ishl_imm_u(elem, 3);
        let addr = self.b.ins().iadd(base, scaled);
        let region = match self.cx.module.defined_table_index(index) {
            Some(d) => self.region(RegionKind::DefinedTable, d.as_u32()),
            None => self.region(RegionKind::ImportedTable, 0),
        };
        let flags = MemFlagsData::new()
            .with_aligned()
            .with_alias_region(Some(region));
        let trap = crate::compiler::trap_code(Trap::TableOutOfBounds);
        if self.cx.isa.flags().enable_table_access_spectre_mitigation() {
            // An out-of-bounds index becomes a null address whose access
            // faults as `TableOutOfBounds`.
            let null = self.b.ins().iconst(I64, 0);
            let addr = self.b.ins().select_spectre_guard(oob, null, addr);
            (addr, flags.with_trap_code(Some(trap)))
        } else {
            self.b.ins().trapnz(oob, trap);
            (addr, flags.with_trap_code(None))
        }
    }

    pub(crate) fn table_get(&mut self, index: TableIndex, elem: Value) -> Value {
        let (addr, flags) = self.table_element(index, elem);
        self.b.ins().load(I64, flags, addr, 0)
    }

    pub(crate) fn table_set(&mut self, index: TableIndex, elem: Value, value: Value) {
        let (addr, flags) = self.table_element(index, elem);
        self.b.ins().store(flags, value, addr, 0);
    }

    pub(crate) fn table_size(&mut self, index: TableIndex) -> Value {
        let n = self.table_bound(index);
        self.b.ins().ireduce(I32, n)
    }

    pub(crate) fn table_grow(&mut self, index: TableIndex, init: Value, delta: Value) -> Value {
        self.before_bulk_op(delta);
        let table = self.b.ins().iconst(I32, i64::from(index.as_u32()));
        let delta = self.b.ins().uextend(I64, delta);
        let vmctx = self.vmctx;
        let old = self
            .call_builtin(
                BuiltinFunctionIndex::table_grow,
                &[vmctx, table, delta, init],
            )
            .expect("table_grow returns a value");
        self.trap_if_grow_failed_with_error(old);
        self.b.ins().ireduce(I32, old)
    }

    /// A `*_grow` builtin's error (a resource limiter's, left in the store)
    /// becomes a `HostCallFailed` trap in this function.
    fn trap_if_grow_failed_with_error(&mut self, old: Value) {
        let failed = self.b.ins().icmp_imm_s(
            IntCC::Equal,
            old,
            wasmtime_mmu_environ::builtins::GROW_FAILED_WITH_ERROR as i64,
        );
        self.b.ins().trapnz(failed, host_call_failed_code());
    }

    pub(crate) fn table_fill(&mut self, index: TableIndex, dst: Value, value: Value, len: Value) {
        self.before_bulk_op(len);
        let table = self.b.ins().iconst(I32, i64::from(index.as_u32()));
        let dst = self.b.ins().uextend(I64, dst);
        let len = self.b.ins().uextend(I64, len);
        let vmctx = self.vmctx;
        self.call_builtin(
            BuiltinFunctionIndex::table_fill,
            &[vmctx, table, dst, value, len],
        );
    }

    pub(crate) fn table_copy(
        &mut self,
        dst_table: TableIndex,
        src_table: TableIndex,
        dst: Value,
        src: Value,
        len: Value,
    ) {
        self.before_bulk_op(len);
        let dst_table = self.b.ins().iconst(I32, i64::from(dst_table.as_u32()));
        let src_table = self.b.ins().iconst(I32, i64::from(src_table.as_u32()));
        let dst = self.b.ins().uextend(I64, dst);
        let src = self.b.ins().uextend(I64, src);
        let len = self.b.ins().uextend(I64, len);
        let vmctx = self.vmctx;
        self.call_builtin(
            BuiltinFunctionIndex::table_copy,
            &[vmctx, dst_table, src_table, dst, src, len],
        );
    }

    pub(crate) fn table_init(
        &mut self,
        index: TableIndex,
        elem: ElemIndex,
        dst: Value,
        src: Value,
        len: Value,
    ) {
        self.before_bulk_op(len);
        let table = self.b.ins().iconst(I32, i64::from(index.as_u32()));
        let elem = self.b.ins().iconst(I32, i64::from(elem.as_u32()));
        let dst = self.b.ins().uextend(I64, dst);
        let vmctx = self.vmctx;
        self.call_builtin(
            BuiltinFunctionIndex::table_init,
            &[vmctx, table, elem, dst, src, len],
        );
    }

    pub(crate) fn elem_drop(&mut self, elem: ElemIndex) {
        let elem = self.b.ins().iconst(I32, i64::from(elem.as_u32()));
        let vmctx = self.vmctx;
        self.call_builtin(BuiltinFunctionIndex::elem_drop, &[vmctx, elem]);
    }

    pub(crate) fn ref_func(&mut self, index: FuncIndex) -> Value {
        let offset = self.cx.offsets.func_ref(index);
        self.b.ins().iadd_imm_s(self.vmctx, i64::from(offset))
    }

    // ---- calls ----

    fn sig_ref(&mut self, ty: TypeIndex) -> ir::SigRef {
        if let Some(&s) = self.sig_refs.get(&ty) {
            return s;
        }
        let sig = wasm_signature(&self.cx.module.types[ty]);
        let s = self.b.import_signature(sig);
        self.sig_refs.insert(ty, s);
        s
    }

    /// Pops the arguments of a call of type `ty` and returns them behind
    /// the callee and caller vmctx slots.
    fn call_args(&mut self, ty: TypeIndex, callee_vmctx: Value) -> Vec<Value> {
        let n = self.cx.module.types[ty].params.len();
        let mut args = Vec::with_capacity(n + 2);
        args.push(callee_vmctx);
        args.push(self.vmctx);
        args.extend_from_slice(self.peekn(n));
        self.canonicalize(&mut args[2..]);
        self.popn(n);
        args
    }

    /// `call` (or, with `tail`, `return_call`) of function `callee`.
    pub(crate) fn translate_call(&mut self, callee: FuncIndex, tail: bool) {
        let ty = self.cx.module.functions[callee];
        let sig = self.sig_ref(ty);
        let call = if self.cx.module.defined_func_index(callee).is_some() {
            // Same module: a direct, colocated call that the text layout
            // resolves, passing our own vmctx as the callee's.
            let fref = match self.func_refs.get(&callee) {
                Some(&f) => f,
                None => {
                    let def = self.cx.module.defined_func_index(callee).unwrap();
                    let name = self
                        .b
                        .func
                        .declare_imported_user_function(ir::UserExternalName::new(0, def.as_u32()));
                    let f = self.b.import_function(ir::ExtFuncData {
                        name: ir::ExternalName::user(name),
                        signature: sig,
                        colocated: true,
                        patchable: false,
                    });
                    self.func_refs.insert(callee, f);
                    f
                }
            };
            let args = self.call_args(ty, self.vmctx);
            if tail {
                self.b.ins().return_call(fref, &args);
                self.reachable = false;
                return;
            }
            self.emit_call(Callee::Direct(fref), &args)
        } else {
            // An import's `VMFuncRef` is a copy of the exporter's, written
            // once at instantiation.
            let base = self.cx.offsets.func_ref(callee);
            let vmctx = self.vmctx;
            let code = self.load_readonly(vmctx, base + VMFUNCREF_WASM_CALL_OFFSET);
            let callee_vmctx = self.load_readonly(vmctx, base + VMFUNCREF_VMCTX_OFFSET);
            let args = self.call_args(ty, callee_vmctx);
            if tail {
                self.b.ins().return_call_indirect(sig, code, &args);
                self.reachable = false;
                return;
            }
            self.emit_call(Callee::Indirect(sig, code), &args)
        };
        self.stack.extend(call);
    }

    /// `call_indirect` (or, with `tail`, `return_call_indirect`).
    pub(crate) fn translate_call_indirect(&mut self, ty: TypeIndex, table: TableIndex, tail: bool) {
        let index = self.pop1();
        let funcref = self.table_get(table, index);

        // Signature check against the engine-wide id of `ty`; a null
        // funcref faults on the load of its type id.
        let vmctx = self.vmctx;
        let type_ids = self.load_readonly(vmctx, VMCTX_TYPE_IDS_OFFSET);
        let expected = self
            .b
            .ins()
            .load(I32, readonly(), type_ids, (ty.as_u32() * 4) as i32);
        let null_trap = crate::compiler::trap_code(Trap::IndirectCallToNull);
        let actual = self.b.ins().load(
            I32,
            MemFlagsData::trusted()
                .with_readonly()
                .with_trap_code(Some(null_trap)),
            funcref,
            VMFUNCREF_TYPE_INDEX_OFFSET as i32,
        );
        let matches = self.b.ins().icmp(IntCC::Equal, actual, expected);
        self.b
            .ins()
            .trapz(matches, crate::compiler::trap_code(Trap::BadSignature));

        self.call_funcref(ty, funcref, None, tail);
    }

    /// Calls `funcref`, a `VMFuncRef` of function type `ty`, with the
    /// arguments on the stack; `null_trap` is the trap code of the load of
    /// its code pointer, for a reference nothing has checked for null yet.
    fn call_funcref(&mut self, ty: TypeIndex, funcref: Value, null_trap: Option<Trap>, tail: bool) {
        let flags = MemFlagsData::trusted().with_readonly();
        let code_flags = match null_trap {
            Some(trap) => flags.with_trap_code(Some(crate::compiler::trap_code(trap))),
            None => flags,
        };
        let code = self
            .b
            .ins()
            .load(I64, code_flags, funcref, VMFUNCREF_WASM_CALL_OFFSET as i32);
        let callee_vmctx = self
            .b
            .ins()
            .load(I64, flags, funcref, VMFUNCREF_VMCTX_OFFSET as i32);
        let sig = self.sig_ref(ty);
        let args = self.call_args(ty, callee_vmctx);
        if tail {
            self.b.ins().return_call_indirect(sig, code, &args);
            self.reachable = false;
            return;
        }
        let results = self.emit_call(Callee::Indirect(sig, code), &args);
        self.stack.extend(results);
    }

    /// `call_ref` / `return_call_ref`: calls the function reference on top
    /// of the stack, whose type validation proved to be `ty`, so there is
    /// no signature check; null traps on the load of its code pointer.
    pub(crate) fn translate_call_ref(&mut self, ty: TypeIndex, tail: bool) {
        let funcref = self.pop1();
        self.call_funcref(ty, funcref, Some(Trap::NullReference), tail);
    }

    /// Calls a builtin through `vmctx.builtin_functions` with the host's
    /// C convention. A `bool` result of 0 traps as `HostCallFailed`.
    pub(crate) fn call_builtin(
        &mut self,
        which: BuiltinFunctionIndex,
        args: &[Value],
    ) -> Option<Value> {
        let sig = match self.builtin_sigs.get(&(which as u32)) {
            Some(&s) => s,
            None => {
                let conv = CallConv::triple_default(self.cx.isa.triple());
                let s = self.b.import_signature(builtin_signature(which, conv));
                self.builtin_sigs.insert(which as u32, s);
                s
            }
        };
        let func = self.builtin_address(which);
        let call = self.b.ins().call_indirect(sig, func, args);
        let result = self.b.inst_results(call).first().copied();
        match which.ret() {
            Some(BuiltinType::bool) => {
                let ok = result.expect("bool builtins return a value");
                self.b.ins().trapz(ok, host_call_failed_code());
                None
            }
            _ => result,
        }
    }

    /// The address of builtin `which`, from `vmctx.builtin_functions`.
    pub(crate) fn builtin_address(&mut self, which: BuiltinFunctionIndex) -> Value {
        // Not `can_move`: hoisting these loads out of the (usually cold)
        // blocks that call builtins would keep them live in registers
        // across hot loops.
        let flags = MemFlagsData::trusted().with_readonly();
        let array = self.b.ins().load(
            I64,
            flags,
            self.vmctx,
            VMCTX_BUILTIN_FUNCTIONS_OFFSET as i32,
        );
        self.b
            .ins()
            .load(I64, flags, array, which.array_offset() as i32)
    }

    // ---- fuel, epochs and MMU polls ----

    /// Sets up fuel, epoch and MMU-poll state and runs the function-entry
    /// checks.
    ///
    /// `body` is the function's code after its locals, read once more here
    /// to choose the polls' page.
    ///
    /// Every poll reads at a constant offset from a value compiled code
    /// has anyway (`ModuleInfo::mmu_poll_memory` says which). A function
    /// that loads or stores linear memory polls below the base of the
    /// memory it touches first, which it keeps in a register (or reloads)
    /// wherever it touches memory. Polling through `vmctx` instead made
    /// register-hungry loops that had spilled it hold or reload it at their
    /// header, and regalloc2's reaction cost more than the poll: the
    /// Sightglass programs ran 3.7 % more instructions with polls through
    /// `vmctx`, 2.5 % with polls through the heap base, and two mixed rules
    /// (entry polls, or loops without memory accesses, through `vmctx`)
    /// came out in between. A function that touches no memory has no base
    /// at hand: in mprotect mode it loads memory 0's (one page fewer to
    /// protect per arming), in pointer-swap mode it reloads the slot in its
    /// `vmctx` prefix (docs/mmu-interruption.md).
    pub(crate) fn function_entry(&mut self, body: &wasmparser::BinaryReader<'_>) {
        if self.cx.tunables.mmu_interruption {
            // Which memory a function touches first matters when there is
            // a choice of memories, or (pointer swap) whether it touches
            // one at all; otherwise the body is not read twice.
            let memories = self.cx.module.memories.len();
            let mode = self.cx.tunables.mmu_interruption_mode;
            let first =
                if memories > 1 || (memories == 1 && mode == MmuInterruptionMode::PointerSwap) {
                    first_memory_accessed(body, memories)
                } else {
                    None
                };
            let (base, page_offset) = match self.cx.module.mmu_poll_memory(first, mode) {
                Some(index) => (PollBase::Heap(index), HEAP_MMU_POLL_PAGE_OFFSET),
                None => (PollBase::Vmctx, VMCTX_MMU_POLL_PAGE_OFFSET),
            };
            self.mmu = Some(MmuPollState {
                base,
                sites: wasmtime_mmu_dead_load::PollSites::for_isa(page_offset, self.cx.isa),
            });
            // Like the epoch check below: a call tree without loops must
            // still be interruptible, so every entry polls, unless the
            // function can neither loop nor call (its caller polls once it
            // returns) and the embedder chose to leave those alone.
            if self.cx.tunables.mmu_poll_leaf_entries || !is_loop_free_leaf(body) {
                self.mmu_poll();
            }
        }
        if self.cx.tunables.consume_fuel {
            let var = self.b.declare_var(I64);
            // Entering a function costs one unit, as upstream charges it
            // ("even empty functions should consume at least some fuel").
            self.fuel = Some(FuelState { var, pending: 1 });
            self.fuel_load();
            self.fuel_check();
        }
        if self.cx.tunables.epoch_interruption {
            let deadline_var = self.b.declare_var(I64);
            let counter_ptr_var = self.b.declare_var(I64);
            let vmctx = self.vmctx;
            let ptr = self.load_readonly(vmctx, VMCTX_EPOCH_COUNTER_OFFSET);
            self.b.def_var(counter_ptr_var, ptr);
            self.epoch = Some(EpochState {
                deadline_var,
                counter_ptr_var,
            });
            // Calls can form an exponential call tree without loops, so
            // every entry checks, always against a fresh deadline.
            let cont = self.b.create_block();
            let now = self.epoch_load_counter();
            self.epoch_load_deadline();
            self.epoch_check_cached(now, cont);
            self.epoch_call_new_epoch(cont);
        }
    }

    /// The checks at every loop header (and before expensive bulk
    /// operations).
    pub(crate) fn loop_header_checks(&mut self) {
        self.mmu_poll();
        if self.fuel.is_some() {
            self.fuel_check();
        }
        if self.epoch.is_some() {
            let cont = self.b.create_block();
            let now = self.epoch_load_counter();
            self.epoch_check_cached(now, cont);
            // The cached deadline may be stale (a callee may have moved it
            // later); `new_epoch` checks the real one first and then just
            // returns it.
            self.epoch_call_new_epoch(cont);
        }
    }

    /// Before a return that falls off the end of the body.
    pub(crate) fn before_return(&mut self) {
        if self.fuel.is_some() {
            self.fuel_flush_pending();
            self.fuel_save();
        }
    }

    /// Upstream's default operator costs.
    fn fuel_cost(op: &Operator<'_>) -> i64 {
        match op {
            Operator::Nop
            | Operator::Drop
            | Operator::Block { .. }
            | Operator::Loop { .. }
            | Operator::Unreachable
            | Operator::Return
            | Operator::Else
            | Operator::End => 0,
            _ => 1,
        }
    }

    pub(crate) fn fuel_before_op(&mut self, op: &Operator<'_>) {
        if let Some(fuel) = &mut self.fuel {
            fuel.pending += Self::fuel_cost(op);
        }
        match op {
            // Control leaves the function: the store must see the count.
            op if is_call(op)
                || matches!(
                    op,
                    Operator::Unreachable
                        | Operator::Return
                        | Operator::Throw { .. }
                        | Operator::ThrowRef
                ) =>
            {
                self.fuel_flush_pending();
                self.fuel_save();
            }
            // The end of a basic block: account for what ran so far.
            Operator::Loop { .. }
            | Operator::If { .. }
            | Operator::Br { .. }
            | Operator::BrIf { .. }
            | Operator::BrTable { .. }
            | Operator::BrOnNull { .. }
            | Operator::BrOnNonNull { .. }
            | Operator::End
            | Operator::Else => self.fuel_flush_pending(),
            _ => {}
        }
    }

    pub(crate) fn fuel_after_op(&mut self, op: &Operator<'_>) {
        if let Operator::Call { .. } | Operator::CallIndirect { .. } | Operator::CallRef { .. } = op
        {
            // The callee may have consumed fuel.
            self.fuel_load();
        }
    }

    fn fuel_flush_pending(&mut self) {
        let Some(fuel) = &mut self.fuel else { return };
        let pending = std::mem::take(&mut fuel.pending);
        let var = fuel.var;
        if pending != 0 {
            let v = self.b.use_var(var);
            let v = self.b.ins().iadd_imm_s(v, pending);
            self.b.def_var(var, v);
        }
    }

    /// At the start of a handler block: what follows a call that returned
    /// (the callees may have consumed fuel), for calls that threw.
    pub(crate) fn after_exceptional_return(&mut self) {
        self.fuel_load();
    }

    fn fuel_load(&mut self) {
        let Some(var) = self.fuel.as_ref().map(|f| f.var) else {
            return;
        };
        let store = self.store_context();
        let region = self.region(RegionKind::Fuel, 0);
        let v = self.b.ins().load(
            I64,
            MemFlagsData::trusted().with_alias_region(Some(region)),
            store,
            VMSTORE_CONTEXT_FUEL_CONSUMED_OFFSET as i32,
        );
        self.b.def_var(var, v);
    }

    fn fuel_save(&mut self) {
        let Some(var) = self.fuel.as_ref().map(|f| f.var) else {
            return;
        };
        let store = self.store_context();
        let region = self.region(RegionKind::Fuel, 0);
        let v = self.b.use_var(var);
        self.b.ins().store(
            MemFlagsData::trusted().with_alias_region(Some(region)),
            v,
            store,
            VMSTORE_CONTEXT_FUEL_CONSUMED_OFFSET as i32,
        );
    }

    /// Calls `out_of_gas` when the (negative-while-fuel-remains) counter
    /// reaches zero.
    fn fuel_check(&mut self) {
        self.fuel_flush_pending();
        let Some(var) = self.fuel.as_ref().map(|f| f.var) else {
            return;
        };
        let out_of_gas = self.b.create_block();
        let cont = self.b.create_block();
        self.b.set_cold_block(out_of_gas);
        let v = self.b.use_var(var);
        let exhausted = self
            .b
            .ins()
            .icmp_imm_s(IntCC::SignedGreaterThanOrEqual, v, 0);
        self.b.ins().brif(exhausted, out_of_gas, &[], cont, &[]);
        self.b.seal_block(out_of_gas);
        self.b.switch_to_block(out_of_gas);
        self.fuel_save();
        let vmctx = self.vmctx;
        self.call_builtin(BuiltinFunctionIndex::out_of_gas, &[vmctx]);
        self.fuel_load();
        self.b.ins().jump(cont, &[]);
        self.b.seal_block(cont);
        self.b.switch_to_block(cont);
    }

    /// Charges a bulk operation of `units` elements and checks fuel, epochs
    /// and the MMU interrupt page before it unless it is statically cheap,
    /// as upstream does for fuel and epochs.
    fn before_bulk_op(&mut self, units: Value) {
        if self.fuel.is_none() && self.epoch.is_none() && self.mmu.is_none() {
            return;
        }
        let constant = self.iconst_value(units);
        if let Some(fuel) = &mut self.fuel {
            match constant {
                Some(n) => {
                    fuel.pending = fuel
                        .pending
                        .saturating_add(n.saturating_mul(BULK_COST_PER_UNIT))
                }
                None => {
                    let var = fuel.var;
                    self.fuel_flush_pending();
                    let units64 = self.b.ins().uextend(I64, units);
                    let cost = self.b.ins().imul_imm_s(units64, BULK_COST_PER_UNIT);
                    let v = self.b.use_var(var);
                    let v = self.b.ins().iadd(v, cost);
                    self.b.def_var(var, v);
                }
            }
        }
        if constant.is_some_and(|n| n.saturating_mul(BULK_COST_PER_UNIT) <= SMALL_BULK_OP_COST) {
            return;
        }
        self.loop_header_checks();
    }

    /// Emits one MMU poll (a dead load from the interrupt page) when MMU
    /// interruption is on. It is not a call: no register is clobbered and a
    /// leaf function stays a leaf.
    fn mmu_poll(&mut self) {
        let Some(poll_base) = self.mmu.as_ref().map(|mmu| mmu.base) else {
            return;
        };
        // The heap base is loaded afresh at every poll; the optimizer
        // merges the loads as it merges those of memory accesses (hoisted
        // once for a memory that never moves, reloaded after calls for one
        // that may).
        let base = match poll_base {
            PollBase::Vmctx => self.vmctx,
            PollBase::Heap(index) => self.heap_base(index),
        };
        match self.cx.tunables.mmu_interruption_mode {
            MmuInterruptionMode::Mprotect => {
                let sites = &mut self.mmu.as_mut().expect("checked above").sites;
                wasmtime_mmu_dead_load::dead_load_with_context(
                    &mut self.b,
                    sites,
                    base,
                    mmu_poll_code(),
                );
            }
            MmuInterruptionMode::PointerSwap => {
                // Both slots lie a small negative offset from their base,
                // which every target encodes in the load.
                let slot_offset = match poll_base {
                    PollBase::Vmctx => VMCTX_MMU_POLL_SLOT_OFFSET,
                    PollBase::Heap(_) => HEAP_MMU_POLL_SLOT_OFFSET,
                };
                wasmtime_mmu_dead_load::dead_load_through_slot(
                    &mut self.b,
                    base,
                    slot_offset,
                    mmu_poll_code(),
                );
            }
        }
    }

    /// The value of `v` if it is an `iconst` (as an unsigned 32-bit count).
    fn iconst_value(&self, v: Value) -> Option<i64> {
        let inst = self.b.func.dfg.value_def(v).inst()?;
        match self.b.func.dfg.insts[inst] {
            ir::InstructionData::UnaryImm {
                opcode: ir::Opcode::Iconst,
                imm,
            } => Some(i64::from(imm.bits() as u32)),
            _ => None,
        }
    }

    fn epoch_load_counter(&mut self) -> Value {
        let ptr_var = self.epoch.as_ref().unwrap().counter_ptr_var;
        let ptr = self.b.use_var(ptr_var);
        let region = self.region(RegionKind::EpochCounter, 0);
        self.b.ins().load(
            I64,
            MemFlagsData::trusted().with_alias_region(Some(region)),
            ptr,
            0,
        )
    }

    /// Branches to `cont` while `now` is below the cached deadline and
    /// continues in a new cold block otherwise.
    fn epoch_check_cached(&mut self, now: Value, cont: ir::Block) {
        let deadline_var = self.epoch.as_ref().unwrap().deadline_var;
        let reached = self.b.create_block();
        self.b.set_cold_block(reached);
        let deadline = self.b.use_var(deadline_var);
        let cmp = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, now, deadline);
        self.b.ins().brif(cmp, reached, &[], cont, &[]);
        self.b.seal_block(reached);
        self.b.switch_to_block(reached);
    }

    /// In the cold block of a check: calls `new_epoch`, traps if it failed
    /// and caches the deadline it returns; continues in `cont`.
    ///
    /// Taking the new deadline from the call's result (as upstream does),
    /// rather than reloading it from the store context, keeps neither the
    /// store-context pointer nor the deadline live across the calls of the
    /// cold paths, which in tight loops otherwise costs callee-saved
    /// registers and spills.
    fn epoch_call_new_epoch(&mut self, cont: ir::Block) {
        let deadline_var = self.epoch.as_ref().unwrap().deadline_var;
        let vmctx = self.vmctx;
        let deadline = self
            .call_builtin(BuiltinFunctionIndex::new_epoch, &[vmctx])
            .expect("`new_epoch` returns the new deadline");
        let failed = self.b.ins().icmp_imm_s(IntCC::Equal, deadline, -1);
        self.b.ins().trapnz(failed, host_call_failed_code());
        self.b.def_var(deadline_var, deadline);
        self.b.ins().jump(cont, &[]);
        self.b.seal_block(cont);
        self.b.switch_to_block(cont);
    }

    fn epoch_load_deadline(&mut self) {
        let deadline_var = self.epoch.as_ref().unwrap().deadline_var;
        let store = self.store_context();
        let region = self.region(RegionKind::EpochDeadline, 0);
        let v = self.b.ins().load(
            I64,
            MemFlagsData::trusted().with_alias_region(Some(region)),
            store,
            VMSTORE_CONTEXT_EPOCH_DEADLINE_OFFSET as i32,
        );
        self.b.def_var(deadline_var, v);
    }
}

/// The linear memory that the first load or store of a function body
/// accesses, if it has any. `body` is the code after the locals and is not
/// validated yet: a body that fails to parse, or names a memory the module
/// lacks (not one of `memories`), gives `None`, and the translation that
/// follows reports the error.
/// Whether a function body has no `loop` and no call of any kind: it then
/// runs through its code at most once per call, so without an entry poll
/// an interrupt still waits no longer than the function's length before
/// its caller polls (`Config::mmu_interruption_leaf_polls`). Wasm's only
/// backward branches target `loop`s. A body that fails to decode counts as
/// not a leaf (the validator reports it).
fn is_loop_free_leaf(body: &wasmparser::BinaryReader<'_>) -> bool {
    let mut ops = wasmparser::OperatorsReader::new(body.clone());
    while !ops.eof() {
        match ops.read() {
            Ok(Operator::Loop { .. }) | Err(_) => return false,
            Ok(op) if is_call(&op) => return false,
            Ok(_) => {}
        }
    }
    true
}

/// Whether `op` calls a function, returning here or not (tail calls).
fn is_call(op: &Operator<'_>) -> bool {
    matches!(
        op,
        Operator::Call { .. }
            | Operator::CallIndirect { .. }
            | Operator::CallRef { .. }
            | Operator::ReturnCall { .. }
            | Operator::ReturnCallIndirect { .. }
            | Operator::ReturnCallRef { .. }
    )
}

fn first_memory_accessed(
    body: &wasmparser::BinaryReader<'_>,
    memories: usize,
) -> Option<MemoryIndex> {
    use Operator as O;
    let mut ops = wasmparser::OperatorsReader::new(body.clone());
    while !ops.eof() {
        let op = ops.read().ok()?;
        let memarg = match op {
            O::I32Load { memarg }
            | O::I64Load { memarg }
            | O::F32Load { memarg }
            | O::F64Load { memarg }
            | O::I32Load8S { memarg }
            | O::I32Load8U { memarg }
            | O::I32Load16S { memarg }
            | O::I32Load16U { memarg }
            | O::I64Load8S { memarg }
            | O::I64Load8U { memarg }
            | O::I64Load16S { memarg }
            | O::I64Load16U { memarg }
            | O::I64Load32S { memarg }
            | O::I64Load32U { memarg }
            | O::I32Store { memarg }
            | O::I64Store { memarg }
            | O::F32Store { memarg }
            | O::F64Store { memarg }
            | O::I32Store8 { memarg }
            | O::I32Store16 { memarg }
            | O::I64Store8 { memarg }
            | O::I64Store16 { memarg }
            | O::I64Store32 { memarg }
            | O::V128Load { memarg }
            | O::V128Load8x8S { memarg }
            | O::V128Load8x8U { memarg }
            | O::V128Load16x4S { memarg }
            | O::V128Load16x4U { memarg }
            | O::V128Load32x2S { memarg }
            | O::V128Load32x2U { memarg }
            | O::V128Load8Splat { memarg }
            | O::V128Load16Splat { memarg }
            | O::V128Load32Splat { memarg }
            | O::V128Load64Splat { memarg }
            | O::V128Load32Zero { memarg }
            | O::V128Load64Zero { memarg }
            | O::V128Store { memarg }
            | O::V128Load8Lane { memarg, .. }
            | O::V128Load16Lane { memarg, .. }
            | O::V128Load32Lane { memarg, .. }
            | O::V128Load64Lane { memarg, .. }
            | O::V128Store8Lane { memarg, .. }
            | O::V128Store16Lane { memarg, .. }
            | O::V128Store32Lane { memarg, .. }
            | O::V128Store64Lane { memarg, .. } => memarg,
            _ => continue,
        };
        let index = MemoryIndex::from_u32(memarg.memory);
        return ((memarg.memory as usize) < memories).then_some(index);
    }
    None
}
