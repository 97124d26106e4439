//! Translation of the 128-bit SIMD operators.
//!
//! Operands arrive as whatever vector type produced them and are bitcast to
//! the lane type each operator works on; results keep their natural lane
//! type until something needs `i8x16`.

use crate::translate::FuncTranslator;
use anyhow::Result;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::types::*;
use cranelift_codegen::ir::{self, ConstantData, InstBuilder, MemFlagsData, Type, Value};
use cranelift_frontend::FunctionBuilder;
use wasmparser::{MemArg, Operator};

impl<'f> FuncTranslator<'_, 'f> {
    fn pop1_as(&mut self, ty: Type) -> Value {
        let v = self.pop1();
        self.bitcast_to(v, ty)
    }

    fn pop2_as(&mut self, ty: Type) -> (Value, Value) {
        let (a, b) = self.pop2();
        (self.bitcast_to(a, ty), self.bitcast_to(b, ty))
    }

    fn vunary(&mut self, ty: Type, f: impl FnOnce(&mut FunctionBuilder<'f>, Value) -> Value) {
        let a = self.pop1_as(ty);
        let v = f(&mut self.b, a);
        self.push1(v);
    }

    fn vbinary(
        &mut self,
        ty: Type,
        f: impl FnOnce(&mut FunctionBuilder<'f>, Value, Value) -> Value,
    ) {
        let (a, b) = self.pop2_as(ty);
        let v = f(&mut self.b, a, b);
        self.push1(v);
    }

    fn vshift(
        &mut self,
        ty: Type,
        f: impl FnOnce(&mut FunctionBuilder<'f>, Value, Value) -> Value,
    ) {
        // Cranelift's vector shifts take the amount modulo the lane width,
        // as Wasm specifies.
        let amount = self.pop1();
        let a = self.pop1_as(ty);
        let v = f(&mut self.b, a, amount);
        self.push1(v);
    }

    fn vicmp(&mut self, ty: Type, cc: IntCC) {
        self.vbinary(ty, |b, x, y| b.ins().icmp(cc, x, y));
    }

    fn vfcmp(&mut self, ty: Type, cc: FloatCC) {
        self.vbinary(ty, |b, x, y| b.ins().fcmp(cc, x, y));
    }

    /// `op(widen_low(a), widen_low(b))` or the high halves.
    fn vwiden_binary(
        &mut self,
        ty: Type,
        signed: bool,
        high: bool,
        f: impl FnOnce(&mut FunctionBuilder<'f>, Value, Value) -> Value,
    ) {
        let (a, b) = self.pop2_as(ty);
        let (a, b) = match (signed, high) {
            (true, false) => (self.b.ins().swiden_low(a), self.b.ins().swiden_low(b)),
            (true, true) => (self.b.ins().swiden_high(a), self.b.ins().swiden_high(b)),
            (false, false) => (self.b.ins().uwiden_low(a), self.b.ins().uwiden_low(b)),
            (false, true) => (self.b.ins().uwiden_high(a), self.b.ins().uwiden_high(b)),
        };
        let v = f(&mut self.b, a, b);
        self.push1(v);
    }

    fn vextadd_pairwise(&mut self, ty: Type, signed: bool) {
        let a = self.pop1_as(ty);
        let (lo, hi) = if signed {
            (self.b.ins().swiden_low(a), self.b.ins().swiden_high(a))
        } else {
            (self.b.ins().uwiden_low(a), self.b.ins().uwiden_high(a))
        };
        let v = self.b.ins().iadd_pairwise(lo, hi);
        self.push1(v);
    }

    fn vzero(&mut self, ty: Type) -> Value {
        let handle = self.b.func.dfg.constants.insert(vec![0u8; 16].into());
        self.b.ins().vconst(ty, handle)
    }

    /// A load of `size` bytes whose result is built by `f` from the flags
    /// and address; `false` when the access always traps.
    fn vload(
        &mut self,
        memarg: &MemArg,
        size: u32,
        f: impl FnOnce(&mut FunctionBuilder<'f>, MemFlagsData, Value) -> Value,
    ) {
        let index = self.pop1();
        if let Some((flags, addr)) = self.prepare_addr(memarg, size, index) {
            let v = f(&mut self.b, flags, addr);
            self.push1(v);
        }
    }

    fn vload_splat(&mut self, memarg: &MemArg, ty: Type) {
        let lane = ty.lane_type();
        if let Some(v) = self.load_value(memarg, ir::Opcode::Load, lane) {
            let v = self.b.ins().splat(ty, v);
            self.push1(v);
        }
    }

    fn vload_zero(&mut self, memarg: &MemArg, ty: Type) {
        let lane = ty.lane_type();
        if let Some(v) = self.load_value(memarg, ir::Opcode::Load, lane) {
            let v = self.b.ins().scalar_to_vector(ty, v);
            self.push1(v);
        }
    }

    fn vload_lane(&mut self, memarg: &MemArg, ty: Type, lane: u8) {
        let vector = self.pop1_as(ty);
        if let Some(v) = self.load_value(memarg, ir::Opcode::Load, ty.lane_type()) {
            let v = self.b.ins().insertlane(vector, v, lane);
            self.push1(v);
        }
    }

    fn vstore_lane(&mut self, memarg: &MemArg, ty: Type, lane: u8) -> Result<()> {
        let vector = self.pop1_as(ty);
        let v = self.b.ins().extractlane(vector, lane);
        self.push1(v);
        self.translate_store(memarg, ir::Opcode::Store)
    }

    fn vsplat(&mut self, ty: Type) {
        let mut x = self.pop1();
        if ty.lane_bits() < 32 {
            x = self.b.ins().ireduce(ty.lane_type(), x);
        }
        let v = self.b.ins().splat(ty, x);
        self.push1(v);
    }

    fn vextract(&mut self, ty: Type, lane: u8, extend: Option<bool>) {
        let vector = self.pop1_as(ty);
        let mut v = self.b.ins().extractlane(vector, lane);
        match extend {
            Some(true) => v = self.b.ins().sextend(I32, v),
            Some(false) => v = self.b.ins().uextend(I32, v),
            None => {}
        }
        self.push1(v);
    }

    fn vreplace(&mut self, ty: Type, lane: u8) {
        let mut x = self.pop1();
        let vector = self.pop1_as(ty);
        if ty.lane_bits() < 32 {
            x = self.b.ins().ireduce(ty.lane_type(), x);
        }
        let v = self.b.ins().insertlane(vector, x, lane);
        self.push1(v);
    }

    /// Wasm's `pmin`/`pmax`: `b < a ? b : a` and `a < b ? b : a`, in the
    /// operand order the backends pattern-match.
    fn vpminmax(&mut self, ty: Type, max: bool) {
        let (a, b) = self.pop2_as(ty);
        let cmp = if max {
            self.b.ins().fcmp(FloatCC::LessThan, a, b)
        } else {
            self.b.ins().fcmp(FloatCC::LessThan, b, a)
        };
        let cmp = self.bitcast_to(cmp, ty);
        let v = self.b.ins().bitselect(cmp, b, a);
        self.push1(v);
    }

    /// Translates `op` if it is a SIMD operator; `Ok(false)` otherwise.
    pub(crate) fn translate_simd_operator(&mut self, op: &Operator<'_>) -> Result<bool> {
        use Operator as O;
        match *op {
            // ---- memory ----
            O::V128Load { memarg } => {
                if let Some(v) = self.load_value(&memarg, ir::Opcode::Load, I8X16) {
                    self.push1(v);
                }
            }
            O::V128Store { memarg } => self.translate_store(&memarg, ir::Opcode::Store)?,
            O::V128Load8x8S { memarg } => {
                self.vload(&memarg, 8, |b, f, a| b.ins().sload8x8(f, a, 0))
            }
            O::V128Load8x8U { memarg } => {
                self.vload(&memarg, 8, |b, f, a| b.ins().uload8x8(f, a, 0))
            }
            O::V128Load16x4S { memarg } => {
                self.vload(&memarg, 8, |b, f, a| b.ins().sload16x4(f, a, 0))
            }
            O::V128Load16x4U { memarg } => {
                self.vload(&memarg, 8, |b, f, a| b.ins().uload16x4(f, a, 0))
            }
            O::V128Load32x2S { memarg } => {
                self.vload(&memarg, 8, |b, f, a| b.ins().sload32x2(f, a, 0))
            }
            O::V128Load32x2U { memarg } => {
                self.vload(&memarg, 8, |b, f, a| b.ins().uload32x2(f, a, 0))
            }
            O::V128Load8Splat { memarg } => self.vload_splat(&memarg, I8X16),
            O::V128Load16Splat { memarg } => self.vload_splat(&memarg, I16X8),
            O::V128Load32Splat { memarg } => self.vload_splat(&memarg, I32X4),
            O::V128Load64Splat { memarg } => self.vload_splat(&memarg, I64X2),
            O::V128Load32Zero { memarg } => self.vload_zero(&memarg, I32X4),
            O::V128Load64Zero { memarg } => self.vload_zero(&memarg, I64X2),
            O::V128Load8Lane { memarg, lane } => self.vload_lane(&memarg, I8X16, lane),
            O::V128Load16Lane { memarg, lane } => self.vload_lane(&memarg, I16X8, lane),
            O::V128Load32Lane { memarg, lane } => self.vload_lane(&memarg, I32X4, lane),
            O::V128Load64Lane { memarg, lane } => self.vload_lane(&memarg, I64X2, lane),
            O::V128Store8Lane { memarg, lane } => self.vstore_lane(&memarg, I8X16, lane)?,
            O::V128Store16Lane { memarg, lane } => self.vstore_lane(&memarg, I16X8, lane)?,
            O::V128Store32Lane { memarg, lane } => self.vstore_lane(&memarg, I32X4, lane)?,
            O::V128Store64Lane { memarg, lane } => self.vstore_lane(&memarg, I64X2, lane)?,

            // ---- constants, splats, lanes ----
            O::V128Const { value } => {
                let v = self.v128_const(u128::from_le_bytes(*value.bytes()));
                self.push1(v);
            }
            O::I8x16Splat => self.vsplat(I8X16),
            O::I16x8Splat => self.vsplat(I16X8),
            O::I32x4Splat => self.vsplat(I32X4),
            O::I64x2Splat => self.vsplat(I64X2),
            O::F32x4Splat => self.vsplat(F32X4),
            O::F64x2Splat => self.vsplat(F64X2),
            O::I8x16ExtractLaneS { lane } => self.vextract(I8X16, lane, Some(true)),
            O::I8x16ExtractLaneU { lane } => self.vextract(I8X16, lane, Some(false)),
            O::I16x8ExtractLaneS { lane } => self.vextract(I16X8, lane, Some(true)),
            O::I16x8ExtractLaneU { lane } => self.vextract(I16X8, lane, Some(false)),
            O::I32x4ExtractLane { lane } => self.vextract(I32X4, lane, None),
            O::I64x2ExtractLane { lane } => self.vextract(I64X2, lane, None),
            O::F32x4ExtractLane { lane } => self.vextract(F32X4, lane, None),
            O::F64x2ExtractLane { lane } => self.vextract(F64X2, lane, None),
            O::I8x16ReplaceLane { lane } => self.vreplace(I8X16, lane),
            O::I16x8ReplaceLane { lane } => self.vreplace(I16X8, lane),
            O::I32x4ReplaceLane { lane } => self.vreplace(I32X4, lane),
            O::I64x2ReplaceLane { lane } => self.vreplace(I64X2, lane),
            O::F32x4ReplaceLane { lane } => self.vreplace(F32X4, lane),
            O::F64x2ReplaceLane { lane } => self.vreplace(F64X2, lane),
            O::I8x16Shuffle { lanes } => {
                let (a, b) = self.pop2_as(I8X16);
                let mask = self
                    .b
                    .func
                    .dfg
                    .immediates
                    .push(ConstantData::from(&lanes[..]));
                let v = self.b.ins().shuffle(a, b, mask);
                self.push1(v);
            }
            O::I8x16Swizzle => self.vbinary(I8X16, |b, x, y| b.ins().swizzle(x, y)),

            // ---- bitwise ----
            O::V128Not => {
                let a = self.pop1();
                let v = self.b.ins().bnot(a);
                self.push1(v);
            }
            O::V128And => self.vbinary(I8X16, |b, x, y| b.ins().band(x, y)),
            O::V128AndNot => self.vbinary(I8X16, |b, x, y| b.ins().band_not(x, y)),
            O::V128Or => self.vbinary(I8X16, |b, x, y| b.ins().bor(x, y)),
            O::V128Xor => self.vbinary(I8X16, |b, x, y| b.ins().bxor(x, y)),
            O::V128Bitselect => {
                let c = self.pop1_as(I8X16);
                let (a, b) = self.pop2_as(I8X16);
                let v = self.b.ins().bitselect(c, a, b);
                self.push1(v);
            }
            O::V128AnyTrue => self.vunary(I8X16, |b, x| {
                let t = b.ins().vany_true(x);
                b.ins().uextend(I32, t)
            }),
            O::I8x16AllTrue => self.all_true(I8X16),
            O::I16x8AllTrue => self.all_true(I16X8),
            O::I32x4AllTrue => self.all_true(I32X4),
            O::I64x2AllTrue => self.all_true(I64X2),
            O::I8x16Bitmask => self.vunary(I8X16, |b, x| b.ins().vhigh_bits(I32, x)),
            O::I16x8Bitmask => self.vunary(I16X8, |b, x| b.ins().vhigh_bits(I32, x)),
            O::I32x4Bitmask => self.vunary(I32X4, |b, x| b.ins().vhigh_bits(I32, x)),
            O::I64x2Bitmask => self.vunary(I64X2, |b, x| b.ins().vhigh_bits(I32, x)),

            // ---- integer comparisons ----
            O::I8x16Eq => self.vicmp(I8X16, IntCC::Equal),
            O::I16x8Eq => self.vicmp(I16X8, IntCC::Equal),
            O::I32x4Eq => self.vicmp(I32X4, IntCC::Equal),
            O::I64x2Eq => self.vicmp(I64X2, IntCC::Equal),
            O::I8x16Ne => self.vicmp(I8X16, IntCC::NotEqual),
            O::I16x8Ne => self.vicmp(I16X8, IntCC::NotEqual),
            O::I32x4Ne => self.vicmp(I32X4, IntCC::NotEqual),
            O::I64x2Ne => self.vicmp(I64X2, IntCC::NotEqual),
            O::I8x16LtS => self.vicmp(I8X16, IntCC::SignedLessThan),
            O::I16x8LtS => self.vicmp(I16X8, IntCC::SignedLessThan),
            O::I32x4LtS => self.vicmp(I32X4, IntCC::SignedLessThan),
            O::I64x2LtS => self.vicmp(I64X2, IntCC::SignedLessThan),
            O::I8x16LtU => self.vicmp(I8X16, IntCC::UnsignedLessThan),
            O::I16x8LtU => self.vicmp(I16X8, IntCC::UnsignedLessThan),
            O::I32x4LtU => self.vicmp(I32X4, IntCC::UnsignedLessThan),
            O::I8x16GtS => self.vicmp(I8X16, IntCC::SignedGreaterThan),
            O::I16x8GtS => self.vicmp(I16X8, IntCC::SignedGreaterThan),
            O::I32x4GtS => self.vicmp(I32X4, IntCC::SignedGreaterThan),
            O::I64x2GtS => self.vicmp(I64X2, IntCC::SignedGreaterThan),
            O::I8x16GtU => self.vicmp(I8X16, IntCC::UnsignedGreaterThan),
            O::I16x8GtU => self.vicmp(I16X8, IntCC::UnsignedGreaterThan),
            O::I32x4GtU => self.vicmp(I32X4, IntCC::UnsignedGreaterThan),
            O::I8x16LeS => self.vicmp(I8X16, IntCC::SignedLessThanOrEqual),
            O::I16x8LeS => self.vicmp(I16X8, IntCC::SignedLessThanOrEqual),
            O::I32x4LeS => self.vicmp(I32X4, IntCC::SignedLessThanOrEqual),
            O::I64x2LeS => self.vicmp(I64X2, IntCC::SignedLessThanOrEqual),
            O::I8x16LeU => self.vicmp(I8X16, IntCC::UnsignedLessThanOrEqual),
            O::I16x8LeU => self.vicmp(I16X8, IntCC::UnsignedLessThanOrEqual),
            O::I32x4LeU => self.vicmp(I32X4, IntCC::UnsignedLessThanOrEqual),
            O::I8x16GeS => self.vicmp(I8X16, IntCC::SignedGreaterThanOrEqual),
            O::I16x8GeS => self.vicmp(I16X8, IntCC::SignedGreaterThanOrEqual),
            O::I32x4GeS => self.vicmp(I32X4, IntCC::SignedGreaterThanOrEqual),
            O::I64x2GeS => self.vicmp(I64X2, IntCC::SignedGreaterThanOrEqual),
            O::I8x16GeU => self.vicmp(I8X16, IntCC::UnsignedGreaterThanOrEqual),
            O::I16x8GeU => self.vicmp(I16X8, IntCC::UnsignedGreaterThanOrEqual),
            O::I32x4GeU => self.vicmp(I32X4, IntCC::UnsignedGreaterThanOrEqual),

            // ---- float comparisons ----
            O::F32x4Eq => self.vfcmp(F32X4, FloatCC::Equal),
            O::F64x2Eq => self.vfcmp(F64X2, FloatCC::Equal),
            O::F32x4Ne => self.vfcmp(F32X4, FloatCC::NotEqual),
            O::F64x2Ne => self.vfcmp(F64X2, FloatCC::NotEqual),
            O::F32x4Lt => self.vfcmp(F32X4, FloatCC::LessThan),
            O::F64x2Lt => self.vfcmp(F64X2, FloatCC::LessThan),
            O::F32x4Gt => self.vfcmp(F32X4, FloatCC::GreaterThan),
            O::F64x2Gt => self.vfcmp(F64X2, FloatCC::GreaterThan),
            O::F32x4Le => self.vfcmp(F32X4, FloatCC::LessThanOrEqual),
            O::F64x2Le => self.vfcmp(F64X2, FloatCC::LessThanOrEqual),
            O::F32x4Ge => self.vfcmp(F32X4, FloatCC::GreaterThanOrEqual),
            O::F64x2Ge => self.vfcmp(F64X2, FloatCC::GreaterThanOrEqual),

            // ---- integer arithmetic ----
            O::I8x16Add => self.vbinary(I8X16, |b, x, y| b.ins().iadd(x, y)),
            O::I16x8Add => self.vbinary(I16X8, |b, x, y| b.ins().iadd(x, y)),
            O::I32x4Add => self.vbinary(I32X4, |b, x, y| b.ins().iadd(x, y)),
            O::I64x2Add => self.vbinary(I64X2, |b, x, y| b.ins().iadd(x, y)),
            O::I8x16Sub => self.vbinary(I8X16, |b, x, y| b.ins().isub(x, y)),
            O::I16x8Sub => self.vbinary(I16X8, |b, x, y| b.ins().isub(x, y)),
            O::I32x4Sub => self.vbinary(I32X4, |b, x, y| b.ins().isub(x, y)),
            O::I64x2Sub => self.vbinary(I64X2, |b, x, y| b.ins().isub(x, y)),
            O::I16x8Mul => self.vbinary(I16X8, |b, x, y| b.ins().imul(x, y)),
            O::I32x4Mul => self.vbinary(I32X4, |b, x, y| b.ins().imul(x, y)),
            O::I64x2Mul => self.vbinary(I64X2, |b, x, y| b.ins().imul(x, y)),
            O::I8x16AddSatS => self.vbinary(I8X16, |b, x, y| b.ins().sadd_sat(x, y)),
            O::I16x8AddSatS => self.vbinary(I16X8, |b, x, y| b.ins().sadd_sat(x, y)),
            O::I8x16AddSatU => self.vbinary(I8X16, |b, x, y| b.ins().uadd_sat(x, y)),
            O::I16x8AddSatU => self.vbinary(I16X8, |b, x, y| b.ins().uadd_sat(x, y)),
            O::I8x16SubSatS => self.vbinary(I8X16, |b, x, y| b.ins().ssub_sat(x, y)),
            O::I16x8SubSatS => self.vbinary(I16X8, |b, x, y| b.ins().ssub_sat(x, y)),
            O::I8x16SubSatU => self.vbinary(I8X16, |b, x, y| b.ins().usub_sat(x, y)),
            O::I16x8SubSatU => self.vbinary(I16X8, |b, x, y| b.ins().usub_sat(x, y)),
            O::I8x16MinS => self.vbinary(I8X16, |b, x, y| b.ins().smin(x, y)),
            O::I16x8MinS => self.vbinary(I16X8, |b, x, y| b.ins().smin(x, y)),
            O::I32x4MinS => self.vbinary(I32X4, |b, x, y| b.ins().smin(x, y)),
            O::I8x16MinU => self.vbinary(I8X16, |b, x, y| b.ins().umin(x, y)),
            O::I16x8MinU => self.vbinary(I16X8, |b, x, y| b.ins().umin(x, y)),
            O::I32x4MinU => self.vbinary(I32X4, |b, x, y| b.ins().umin(x, y)),
            O::I8x16MaxS => self.vbinary(I8X16, |b, x, y| b.ins().smax(x, y)),
            O::I16x8MaxS => self.vbinary(I16X8, |b, x, y| b.ins().smax(x, y)),
            O::I32x4MaxS => self.vbinary(I32X4, |b, x, y| b.ins().smax(x, y)),
            O::I8x16MaxU => self.vbinary(I8X16, |b, x, y| b.ins().umax(x, y)),
            O::I16x8MaxU => self.vbinary(I16X8, |b, x, y| b.ins().umax(x, y)),
            O::I32x4MaxU => self.vbinary(I32X4, |b, x, y| b.ins().umax(x, y)),
            O::I8x16AvgrU => self.vbinary(I8X16, |b, x, y| b.ins().avg_round(x, y)),
            O::I16x8AvgrU => self.vbinary(I16X8, |b, x, y| b.ins().avg_round(x, y)),
            O::I8x16Neg => self.vunary(I8X16, |b, x| b.ins().ineg(x)),
            O::I16x8Neg => self.vunary(I16X8, |b, x| b.ins().ineg(x)),
            O::I32x4Neg => self.vunary(I32X4, |b, x| b.ins().ineg(x)),
            O::I64x2Neg => self.vunary(I64X2, |b, x| b.ins().ineg(x)),
            O::I8x16Abs => self.vunary(I8X16, |b, x| b.ins().iabs(x)),
            O::I16x8Abs => self.vunary(I16X8, |b, x| b.ins().iabs(x)),
            O::I32x4Abs => self.vunary(I32X4, |b, x| b.ins().iabs(x)),
            O::I64x2Abs => self.vunary(I64X2, |b, x| b.ins().iabs(x)),
            O::I8x16Popcnt => self.vunary(I8X16, |b, x| b.ins().popcnt(x)),
            O::I16x8Q15MulrSatS => self.vbinary(I16X8, |b, x, y| b.ins().sqmul_round_sat(x, y)),
            O::I32x4DotI16x8S => {
                let (a, b) = self.pop2_as(I16X8);
                let v = self.signed_dot(a, b);
                self.push1(v);
            }
            O::I16x8ExtMulLowI8x16S => {
                self.vwiden_binary(I8X16, true, false, |b, x, y| b.ins().imul(x, y))
            }
            O::I16x8ExtMulHighI8x16S => {
                self.vwiden_binary(I8X16, true, true, |b, x, y| b.ins().imul(x, y))
            }
            O::I16x8ExtMulLowI8x16U => {
                self.vwiden_binary(I8X16, false, false, |b, x, y| b.ins().imul(x, y))
            }
            O::I16x8ExtMulHighI8x16U => {
                self.vwiden_binary(I8X16, false, true, |b, x, y| b.ins().imul(x, y))
            }
            O::I32x4ExtMulLowI16x8S => {
                self.vwiden_binary(I16X8, true, false, |b, x, y| b.ins().imul(x, y))
            }
            O::I32x4ExtMulHighI16x8S => {
                self.vwiden_binary(I16X8, true, true, |b, x, y| b.ins().imul(x, y))
            }
            O::I32x4ExtMulLowI16x8U => {
                self.vwiden_binary(I16X8, false, false, |b, x, y| b.ins().imul(x, y))
            }
            O::I32x4ExtMulHighI16x8U => {
                self.vwiden_binary(I16X8, false, true, |b, x, y| b.ins().imul(x, y))
            }
            O::I64x2ExtMulLowI32x4S => {
                self.vwiden_binary(I32X4, true, false, |b, x, y| b.ins().imul(x, y))
            }
            O::I64x2ExtMulHighI32x4S => {
                self.vwiden_binary(I32X4, true, true, |b, x, y| b.ins().imul(x, y))
            }
            O::I64x2ExtMulLowI32x4U => {
                self.vwiden_binary(I32X4, false, false, |b, x, y| b.ins().imul(x, y))
            }
            O::I64x2ExtMulHighI32x4U => {
                self.vwiden_binary(I32X4, false, true, |b, x, y| b.ins().imul(x, y))
            }
            O::I16x8ExtAddPairwiseI8x16S => self.vextadd_pairwise(I8X16, true),
            O::I16x8ExtAddPairwiseI8x16U => self.vextadd_pairwise(I8X16, false),
            O::I32x4ExtAddPairwiseI16x8S => self.vextadd_pairwise(I16X8, true),
            O::I32x4ExtAddPairwiseI16x8U => self.vextadd_pairwise(I16X8, false),

            // ---- shifts ----
            O::I8x16Shl => self.vshift(I8X16, |b, x, y| b.ins().ishl(x, y)),
            O::I16x8Shl => self.vshift(I16X8, |b, x, y| b.ins().ishl(x, y)),
            O::I32x4Shl => self.vshift(I32X4, |b, x, y| b.ins().ishl(x, y)),
            O::I64x2Shl => self.vshift(I64X2, |b, x, y| b.ins().ishl(x, y)),
            O::I8x16ShrS => self.vshift(I8X16, |b, x, y| b.ins().sshr(x, y)),
            O::I16x8ShrS => self.vshift(I16X8, |b, x, y| b.ins().sshr(x, y)),
            O::I32x4ShrS => self.vshift(I32X4, |b, x, y| b.ins().sshr(x, y)),
            O::I64x2ShrS => self.vshift(I64X2, |b, x, y| b.ins().sshr(x, y)),
            O::I8x16ShrU => self.vshift(I8X16, |b, x, y| b.ins().ushr(x, y)),
            O::I16x8ShrU => self.vshift(I16X8, |b, x, y| b.ins().ushr(x, y)),
            O::I32x4ShrU => self.vshift(I32X4, |b, x, y| b.ins().ushr(x, y)),
            O::I64x2ShrU => self.vshift(I64X2, |b, x, y| b.ins().ushr(x, y)),

            // ---- narrowing and widening ----
            O::I8x16NarrowI16x8S => self.vbinary(I16X8, |b, x, y| b.ins().snarrow(x, y)),
            O::I8x16NarrowI16x8U => self.vbinary(I16X8, |b, x, y| b.ins().unarrow(x, y)),
            O::I16x8NarrowI32x4S => self.vbinary(I32X4, |b, x, y| b.ins().snarrow(x, y)),
            O::I16x8NarrowI32x4U => self.vbinary(I32X4, |b, x, y| b.ins().unarrow(x, y)),
            O::I16x8ExtendLowI8x16S => self.vunary(I8X16, |b, x| b.ins().swiden_low(x)),
            O::I16x8ExtendHighI8x16S => self.vunary(I8X16, |b, x| b.ins().swiden_high(x)),
            O::I16x8ExtendLowI8x16U => self.vunary(I8X16, |b, x| b.ins().uwiden_low(x)),
            O::I16x8ExtendHighI8x16U => self.vunary(I8X16, |b, x| b.ins().uwiden_high(x)),
            O::I32x4ExtendLowI16x8S => self.vunary(I16X8, |b, x| b.ins().swiden_low(x)),
            O::I32x4ExtendHighI16x8S => self.vunary(I16X8, |b, x| b.ins().swiden_high(x)),
            O::I32x4ExtendLowI16x8U => self.vunary(I16X8, |b, x| b.ins().uwiden_low(x)),
            O::I32x4ExtendHighI16x8U => self.vunary(I16X8, |b, x| b.ins().uwiden_high(x)),
            O::I64x2ExtendLowI32x4S => self.vunary(I32X4, |b, x| b.ins().swiden_low(x)),
            O::I64x2ExtendHighI32x4S => self.vunary(I32X4, |b, x| b.ins().swiden_high(x)),
            O::I64x2ExtendLowI32x4U => self.vunary(I32X4, |b, x| b.ins().uwiden_low(x)),
            O::I64x2ExtendHighI32x4U => self.vunary(I32X4, |b, x| b.ins().uwiden_high(x)),

            // ---- float arithmetic ----
            O::F32x4Add => self.vbinary(F32X4, |b, x, y| b.ins().fadd(x, y)),
            O::F64x2Add => self.vbinary(F64X2, |b, x, y| b.ins().fadd(x, y)),
            O::F32x4Sub => self.vbinary(F32X4, |b, x, y| b.ins().fsub(x, y)),
            O::F64x2Sub => self.vbinary(F64X2, |b, x, y| b.ins().fsub(x, y)),
            O::F32x4Mul => self.vbinary(F32X4, |b, x, y| b.ins().fmul(x, y)),
            O::F64x2Mul => self.vbinary(F64X2, |b, x, y| b.ins().fmul(x, y)),
            O::F32x4Div => self.vbinary(F32X4, |b, x, y| b.ins().fdiv(x, y)),
            O::F64x2Div => self.vbinary(F64X2, |b, x, y| b.ins().fdiv(x, y)),
            O::F32x4Min => self.vbinary(F32X4, |b, x, y| b.ins().fmin(x, y)),
            O::F64x2Min => self.vbinary(F64X2, |b, x, y| b.ins().fmin(x, y)),
            O::F32x4Max => self.vbinary(F32X4, |b, x, y| b.ins().fmax(x, y)),
            O::F64x2Max => self.vbinary(F64X2, |b, x, y| b.ins().fmax(x, y)),
            O::F32x4PMin => self.vpminmax(F32X4, false),
            O::F64x2PMin => self.vpminmax(F64X2, false),
            O::F32x4PMax => self.vpminmax(F32X4, true),
            O::F64x2PMax => self.vpminmax(F64X2, true),
            O::F32x4Sqrt => self.vunary(F32X4, |b, x| b.ins().sqrt(x)),
            O::F64x2Sqrt => self.vunary(F64X2, |b, x| b.ins().sqrt(x)),
            O::F32x4Neg => self.vunary(F32X4, |b, x| b.ins().fneg(x)),
            O::F64x2Neg => self.vunary(F64X2, |b, x| b.ins().fneg(x)),
            O::F32x4Abs => self.vunary(F32X4, |b, x| b.ins().fabs(x)),
            O::F64x2Abs => self.vunary(F64X2, |b, x| b.ins().fabs(x)),
            O::F32x4Ceil => self.vunary(F32X4, |b, x| b.ins().ceil(x)),
            O::F64x2Ceil => self.vunary(F64X2, |b, x| b.ins().ceil(x)),
            O::F32x4Floor => self.vunary(F32X4, |b, x| b.ins().floor(x)),
            O::F64x2Floor => self.vunary(F64X2, |b, x| b.ins().floor(x)),
            O::F32x4Trunc => self.vunary(F32X4, |b, x| b.ins().trunc(x)),
            O::F64x2Trunc => self.vunary(F64X2, |b, x| b.ins().trunc(x)),
            O::F32x4Nearest => self.vunary(F32X4, |b, x| b.ins().nearest(x)),
            O::F64x2Nearest => self.vunary(F64X2, |b, x| b.ins().nearest(x)),

            // ---- conversions ----
            O::F32x4ConvertI32x4S => self.vunary(I32X4, |b, x| b.ins().fcvt_from_sint(F32X4, x)),
            O::F32x4ConvertI32x4U => self.vunary(I32X4, |b, x| b.ins().fcvt_from_uint(F32X4, x)),
            O::F64x2ConvertLowI32x4S => self.vunary(I32X4, |b, x| {
                let w = b.ins().swiden_low(x);
                b.ins().fcvt_from_sint(F64X2, w)
            }),
            O::F64x2ConvertLowI32x4U => self.vunary(I32X4, |b, x| {
                let w = b.ins().uwiden_low(x);
                b.ins().fcvt_from_uint(F64X2, w)
            }),
            O::F64x2PromoteLowF32x4 => self.vunary(F32X4, |b, x| b.ins().fvpromote_low(x)),
            O::F32x4DemoteF64x2Zero => self.vunary(F64X2, |b, x| b.ins().fvdemote(x)),
            O::I32x4TruncSatF32x4S => self.vunary(F32X4, |b, x| b.ins().fcvt_to_sint_sat(I32X4, x)),
            O::I32x4TruncSatF32x4U | O::I32x4RelaxedTruncF32x4U => {
                self.vunary(F32X4, |b, x| b.ins().fcvt_to_uint_sat(I32X4, x))
            }
            O::I32x4TruncSatF64x2SZero => self.trunc_f64x2_s_zero(false),
            // Unsigned relaxed truncation is the saturating one everywhere:
            // x86 has no unsigned vector conversion whose out-of-range
            // results would be cheaper and still allowed.
            O::I32x4TruncSatF64x2UZero | O::I32x4RelaxedTruncF64x2UZero => {
                let a = self.pop1_as(F64X2);
                let v = if self.targets_x86_64() && !self.cx.isa.has_round() {
                    // The vector lowering needs SSE4.1 rounding; convert
                    // the two lanes as scalars instead (as upstream does).
                    let lane0 = self.b.ins().extractlane(a, 0);
                    let lane1 = self.b.ins().extractlane(a, 1);
                    let lane0 = self.b.ins().fcvt_to_uint_sat(I32, lane0);
                    let lane1 = self.b.ins().fcvt_to_uint_sat(I32, lane1);
                    let zero = self.vzero(I32X4);
                    let v = self.b.ins().insertlane(zero, lane0, 0);
                    self.b.ins().insertlane(v, lane1, 1)
                } else {
                    let converted = self.b.ins().fcvt_to_uint_sat(I64X2, a);
                    let zero = self.vzero(I64X2);
                    self.b.ins().uunarrow(converted, zero)
                };
                self.push1(v);
            }

            // ---- relaxed SIMD (see `relaxed_may_vary`) ----
            O::I8x16RelaxedSwizzle => {
                let pshufb = self.relaxed_may_vary() && self.cx.isa.has_x86_pshufb_lowering();
                self.vbinary(I8X16, |b, x, y| {
                    // `pshufb` zeroes a lane whose index has its top bit
                    // set and takes `index % 16` otherwise; both are
                    // allowed results for an index of 16 or more.
                    if pshufb {
                        b.ins().x86_pshufb(x, y)
                    } else {
                        b.ins().swizzle(x, y)
                    }
                })
            }
            O::I32x4RelaxedTruncF32x4S => {
                let cvtt = self.relaxed_may_vary() && self.targets_x86_64();
                self.vunary(F32X4, |b, x| {
                    // `cvttps2dq` gives `i32::MIN` for NaN and out-of-range
                    // lanes, one of the allowed results, without the
                    // saturating version's fix-up.
                    if cvtt {
                        b.ins().x86_cvtt2dq(I32X4, x)
                    } else {
                        b.ins().fcvt_to_sint_sat(I32X4, x)
                    }
                })
            }
            O::I32x4RelaxedTruncF64x2SZero => {
                let cvtt = self.relaxed_may_vary() && self.targets_x86_64();
                self.trunc_f64x2_s_zero(cvtt)
            }
            O::F32x4RelaxedMadd => self.relaxed_madd(F32X4, false),
            O::F32x4RelaxedNmadd => self.relaxed_madd(F32X4, true),
            O::F64x2RelaxedMadd => self.relaxed_madd(F64X2, false),
            O::F64x2RelaxedNmadd => self.relaxed_madd(F64X2, true),
            O::I8x16RelaxedLaneselect => self.relaxed_laneselect(I8X16),
            O::I16x8RelaxedLaneselect => self.relaxed_laneselect(I16X8),
            O::I32x4RelaxedLaneselect => self.relaxed_laneselect(I32X4),
            O::I64x2RelaxedLaneselect => self.relaxed_laneselect(I64X2),
            O::F32x4RelaxedMin => self.relaxed_min_max(F32X4, false),
            O::F32x4RelaxedMax => self.relaxed_min_max(F32X4, true),
            O::F64x2RelaxedMin => self.relaxed_min_max(F64X2, false),
            O::F64x2RelaxedMax => self.relaxed_min_max(F64X2, true),
            O::I16x8RelaxedQ15mulrS => {
                let pmulhrsw = self.relaxed_may_vary() && self.cx.isa.has_x86_pmulhrsw_lowering();
                self.vbinary(I16X8, |b, x, y| {
                    // `pmulhrsw` differs from the saturating version only
                    // for `i16::MIN * i16::MIN`, where it wraps to
                    // `i16::MIN`: an allowed result.
                    if pmulhrsw {
                        b.ins().x86_pmulhrsw(x, y)
                    } else {
                        b.ins().sqmul_round_sat(x, y)
                    }
                })
            }
            O::I16x8RelaxedDotI8x16I7x16S => {
                let (a, b) = self.pop2_as(I8X16);
                let v = self.relaxed_dot_i16x8(a, b);
                self.push1(v);
            }
            O::I32x4RelaxedDotI8x16I7x16AddS => {
                let acc = self.pop1_as(I32X4);
                let (a, b) = self.pop2_as(I8X16);
                let sums = if self.relaxed_pmaddubsw() {
                    let pairs = self.relaxed_dot_i16x8(a, b);
                    self.pairwise_sum_widening(pairs)
                } else {
                    // Exact: the four products of each i32 lane summed
                    // with no 16-bit pair sum in between to overflow.
                    let (lo, hi) = self.widened_products(a, b);
                    let lo = self.pairwise_sum_widening(lo);
                    let hi = self.pairwise_sum_widening(hi);
                    self.b.ins().iadd_pairwise(lo, hi)
                };
                let v = self.b.ins().iadd(sums, acc);
                self.push1(v);
            }

            _ => return Ok(false),
        }
        Ok(true)
    }

    fn all_true(&mut self, ty: Type) {
        self.vunary(ty, |b, x| {
            let t = b.ins().vall_true(x);
            b.ins().uextend(I32, t)
        });
    }

    fn targets_x86_64(&self) -> bool {
        self.cx.isa.triple().architecture == target_lexicon::Architecture::X86_64
    }

    /// Whether a relaxed-SIMD operator may be compiled to the target's
    /// fastest sequence, whose results for the inputs the proposal leaves
    /// open depend on the hardware; otherwise each compiles to the
    /// sequence that gives its deterministic result on every target
    /// (`Tunables::relaxed_simd_deterministic`). Every fast sequence is
    /// x86-specific: on aarch64 the deterministic sequences are already
    /// single instructions.
    fn relaxed_may_vary(&self) -> bool {
        !self.cx.tunables.relaxed_simd_deterministic
    }

    /// Whether the relaxed dot products use `pmaddubsw`, which reads the
    /// second operand as unsigned and saturates each pair sum: both allowed
    /// when a lane of that operand has its top bit set, and exact otherwise.
    fn relaxed_pmaddubsw(&self) -> bool {
        self.relaxed_may_vary() && self.cx.isa.has_x86_pmaddubsw_lowering()
    }

    /// The products of the lanes of `a` and `b`, sign-extended to twice
    /// their width, as the low and high halves.
    fn widened_products(&mut self, a: Value, b: Value) -> (Value, Value) {
        let (alo, blo) = (self.b.ins().swiden_low(a), self.b.ins().swiden_low(b));
        let lo = self.b.ins().imul(alo, blo);
        let (ahi, bhi) = (self.b.ins().swiden_high(a), self.b.ins().swiden_high(b));
        let hi = self.b.ins().imul(ahi, bhi);
        (lo, hi)
    }

    /// Lanes twice as wide as `a`'s, each the sum of the signed products of
    /// two adjacent lanes (wrapping, as Wasm's `i32x4.dot_i16x8_s`).
    fn signed_dot(&mut self, a: Value, b: Value) -> Value {
        let (lo, hi) = self.widened_products(a, b);
        self.b.ins().iadd_pairwise(lo, hi)
    }

    /// Adjacent lanes of `v` sign-extended and summed into lanes twice as
    /// wide.
    fn pairwise_sum_widening(&mut self, v: Value) -> Value {
        let lo = self.b.ins().swiden_low(v);
        let hi = self.b.ins().swiden_high(v);
        self.b.ins().iadd_pairwise(lo, hi)
    }

    /// `i16x8.relaxed_dot_i8x16_i7x16_s`. Deterministically, both operands
    /// are signed and each pair sum wraps in 16 bits, as in the
    /// specification's reference interpreter and upstream Wasmtime; the
    /// one pair that overflows, (-128 * -128) twice, then gives -32768,
    /// which is also what `pmaddubsw` gives for it.
    fn relaxed_dot_i16x8(&mut self, a: Value, b: Value) -> Value {
        if self.relaxed_pmaddubsw() {
            // Cranelift's operand order: signed bytes first.
            self.b.ins().x86_pmaddubsw(a, b)
        } else {
            self.signed_dot(a, b)
        }
    }

    /// `i32x4.trunc_sat_f64x2_s_zero`, or with `cvtt` its relaxed form
    /// through `cvttpd2dq` (which Cranelift matches as this `snarrow` of
    /// `x86_cvtt2dq` with zero): `i32::MIN` for NaN and out-of-range lanes.
    fn trunc_f64x2_s_zero(&mut self, cvtt: bool) {
        let a = self.pop1_as(F64X2);
        let converted = if cvtt {
            self.b.ins().x86_cvtt2dq(I64X2, a)
        } else {
            self.b.ins().fcvt_to_sint_sat(I64X2, a)
        };
        let zero = self.vzero(I64X2);
        let v = self.b.ins().snarrow(converted, zero);
        self.push1(v);
    }

    /// `relaxed_madd` (`a * b + c`) and, with `negate_product`,
    /// `relaxed_nmadd` (`-(a * b) + c`).
    ///
    /// Deterministically the result is fused (one rounding), as in the
    /// reference interpreter and upstream Wasmtime; the prose of the
    /// specification's deterministic profile says unfused, and the two
    /// disagree (docs/architecture.md, "Relaxed SIMD"). A CPU without FMA
    /// then gets Cranelift's per-lane `fma` libcalls. The fast form uses
    /// the FMA instruction where there is one and an unfused multiply and
    /// add where there is not; both roundings are allowed.
    fn relaxed_madd(&mut self, ty: Type, negate_product: bool) {
        let c = self.pop1_as(ty);
        let (a, b) = self.pop2_as(ty);
        // Negating an operand is exact, so it negates the product.
        let a = if negate_product {
            self.b.ins().fneg(a)
        } else {
            a
        };
        let v = if self.cx.isa.has_native_fma() || !self.relaxed_may_vary() {
            self.b.ins().fma(a, b, c)
        } else {
            let product = self.b.ins().fmul(a, b);
            self.b.ins().fadd(product, c)
        };
        self.push1(v);
    }

    /// `relaxed_laneselect`: `v128.bitselect` deterministically; the fast
    /// form is a `blendv` where the target has one for `ty`, which looks
    /// at each mask lane's top bit only. The two agree whenever each mask
    /// lane is all ones or all zeros, the case the proposal defines.
    fn relaxed_laneselect(&mut self, ty: Type) {
        let mask = self.pop1_as(ty);
        let (a, b) = self.pop2_as(ty);
        let v = if self.relaxed_may_vary() && self.cx.isa.has_blendv_lowering(ty) {
            self.b.ins().blendv(mask, a, b)
        } else {
            self.b.ins().bitselect(mask, a, b)
        };
        self.push1(v);
    }

    /// `relaxed_min`/`relaxed_max`: Wasm's `min`/`max` deterministically;
    /// on x86 the `pmin`/`pmax` comparison and select, one `minps`/`maxps`,
    /// which return an operand instead of a NaN or of the right zero in
    /// the cases the proposal leaves open.
    fn relaxed_min_max(&mut self, ty: Type, max: bool) {
        if self.relaxed_may_vary() && self.targets_x86_64() {
            self.vpminmax(ty, max);
        } else if max {
            self.vbinary(ty, |b, x, y| b.ins().fmax(x, y));
        } else {
            self.vbinary(ty, |b, x, y| b.ins().fmin(x, y));
        }
    }
}
