//! Linear-memory address computation and bounds checks.
//!
//! The strategy follows upstream Wasmtime: no check when the memory plan's
//! reservation plus guard covers every address a 32-bit index can form;
//! otherwise the cheapest explicit comparison that, together with the
//! inaccessible pages past the current length, catches every out-of-bounds
//! access. With Spectre mitigation on (Cranelift's default), an
//! out-of-bounds index selects a null address instead of branching, and the
//! access itself faults as `MemoryOutOfBounds`.

use crate::translate::FuncTranslator;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::*;
use cranelift_codegen::ir::{self, InstBuilder, MemFlagsData, Value};
use wasmparser::MemArg;
use wasmtime_mmu_environ::{MemoryIndex, Trap, WASM_PAGE_SIZE};

impl FuncTranslator<'_, '_> {
    /// Computes the native address of a `size`-byte access at `index +
    /// memarg.offset` in memory `memarg.memory`, with the bounds checks it
    /// needs, and the flags for the access. `None` when the access always
    /// traps (the trap is emitted and the code after it is unreachable).
    pub(crate) fn prepare_addr(
        &mut self,
        memarg: &MemArg,
        size: u32,
        index: Value,
    ) -> Option<(MemFlagsData, Value)> {
        let mem = MemoryIndex::from_u32(memarg.memory);
        let plan = self.cx.memory_plans[mem];
        let ty = self.cx.module.memories[mem];
        let offset = memarg.offset;
        let offset_and_size = offset.saturating_add(u64::from(size));
        let min_bytes = ty.minimum.saturating_mul(WASM_PAGE_SIZE);
        let trap = crate::compiler::trap_code(Trap::MemoryOutOfBounds);

        if offset_and_size > ty.maximum_byte_size() {
            // No size the memory can ever have makes this access valid.
            if self.fuel.is_some() {
                self.before_return();
            }
            self.b.ins().trap(trap);
            self.unreachable_after_trap();
            return None;
        }

        let statically_in_bounds = self
            .iconst_u32(index)
            .is_some_and(|i| u64::from(i) + offset_and_size <= min_bytes);
        let index = self.b.ins().uextend(I64, index);

        let oob =
            if plan.access_needs_no_bounds_check(offset, u64::from(size)) || statically_in_bounds {
                None
            } else if !plan.may_move && plan.reservation >= offset_and_size {
                // Everything up to the reservation's end is either accessible
                // or faults, so compare with a constant.
                let limit = (plan.reservation - offset_and_size) as i64;
                Some(
                    self.b
                        .ins()
                        .icmp_imm_s(IntCC::UnsignedGreaterThan, index, limit),
                )
            } else if offset_and_size == 1 {
                let bound = self.heap_bound(mem);
                Some(
                    self.b
                        .ins()
                        .icmp(IntCC::UnsignedGreaterThanOrEqual, index, bound),
                )
            } else if offset_and_size <= plan.guard_size {
                // An in-bounds index plus the rest of the access lands at worst
                // in the guard after the reservation.
                let bound = self.heap_bound(mem);
                Some(self.b.ins().icmp(IntCC::UnsignedGreaterThan, index, bound))
            } else if offset_and_size <= min_bytes {
                // The length never drops below the minimum, so this cannot wrap.
                let bound = self.heap_bound(mem);
                let adjusted = self.b.ins().iadd_imm_s(bound, -(offset_and_size as i64));
                Some(
                    self.b
                        .ins()
                        .icmp(IntCC::UnsignedGreaterThan, index, adjusted),
                )
            } else {
                // A zero-extended 32-bit index plus a 33-bit offset cannot
                // overflow 64 bits.
                let end = self.b.ins().iadd_imm_s(index, offset_and_size as i64);
                let bound = self.heap_bound(mem);
                Some(self.b.ins().icmp(IntCC::UnsignedGreaterThan, end, bound))
            };

        let base = self.heap_base(mem);
        let mut addr = self.b.ins().iadd(base, index);
        if offset != 0 {
            addr = self.b.ins().iadd_imm_s(addr, offset as i64);
        }
        if let Some(oob) = oob {
            if self.cx.isa.flags().enable_heap_access_spectre_mitigation() {
                let null = self.b.ins().iconst(I64, 0);
                addr = self.b.ins().select_spectre_guard(oob, null, addr);
            } else {
                self.b.ins().trapnz(oob, trap);
            }
        }

        // Wasm's alignment hint is not a guarantee, so no `aligned` flag.
        let region = self.heap_region(mem);
        let flags = MemFlagsData::new()
            .with_endianness(ir::Endianness::Little)
            .with_trap_code(Some(trap))
            .with_alias_region(Some(region));
        Some((flags, addr))
    }

    /// The value of `v` if it is an `iconst`, as an unsigned 32-bit integer.
    pub(crate) fn iconst_u32(&self, v: Value) -> Option<u32> {
        let inst = self.b.func.dfg.value_def(v).inst()?;
        match self.b.func.dfg.insts[inst] {
            ir::InstructionData::UnaryImm {
                opcode: ir::Opcode::Iconst,
                imm,
            } => Some(imm.bits() as u32),
            _ => None,
        }
    }
}
