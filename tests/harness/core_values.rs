//! Matching core results against the expected patterns of `assert_return`
//! where the rule is the spec's own, whatever the engine's value type.

use wast::core::{AbstractHeapType, HeapType, NanPattern, V128Pattern};

/// Whether the bits of an `f32` match the expected value or NaN pattern.
pub fn f32_matches(expected: &NanPattern<wast::token::F32>, bits: u32) -> bool {
    match expected {
        NanPattern::CanonicalNan => bits & 0x7fff_ffff == 0x7fc0_0000,
        NanPattern::ArithmeticNan => bits & 0x7fc0_0000 == 0x7fc0_0000,
        // A NaN literal with an explicit payload must match bit for bit.
        NanPattern::Value(e) => e.bits == bits,
    }
}

/// Whether the bits of an `f64` match the expected value or NaN pattern.
pub fn f64_matches(expected: &NanPattern<wast::token::F64>, bits: u64) -> bool {
    match expected {
        NanPattern::CanonicalNan => bits & 0x7fff_ffff_ffff_ffff == 0x7ff8_0000_0000_0000,
        NanPattern::ArithmeticNan => bits & 0x7ff8_0000_0000_0000 == 0x7ff8_0000_0000_0000,
        NanPattern::Value(e) => e.bits == bits,
    }
}

/// Whether a `v128` matches the expected lanes, each float lane with its
/// own NaN pattern.
pub fn v128_matches(expected: &V128Pattern, actual: u128) -> bool {
    let bytes = actual.to_le_bytes();
    match expected {
        V128Pattern::I8x16(e) => e.iter().zip(bytes).all(|(e, a)| *e as u8 == a),
        V128Pattern::I16x8(e) => e
            .iter()
            .zip(lanes::<2>(&bytes))
            .all(|(e, a)| *e as u16 as u64 == a),
        V128Pattern::I32x4(e) => e
            .iter()
            .zip(lanes::<4>(&bytes))
            .all(|(e, a)| *e as u32 as u64 == a),
        V128Pattern::I64x2(e) => e
            .iter()
            .zip(lanes::<8>(&bytes))
            .all(|(e, a)| *e as u64 == a),
        V128Pattern::F32x4(e) => e
            .iter()
            .zip(lanes::<4>(&bytes))
            .all(|(e, a)| f32_matches(e, a as u32)),
        V128Pattern::F64x2(e) => e
            .iter()
            .zip(lanes::<8>(&bytes))
            .all(|(e, a)| f64_matches(e, a)),
    }
}

/// Splits a little-endian vector into lanes of `N` bytes, each
/// zero-extended.
pub fn lanes<const N: usize>(bytes: &[u8; 16]) -> impl Iterator<Item = u64> + '_ {
    bytes.chunks(N).map(|lane| {
        let mut wide = [0u8; 8];
        wide[..N].copy_from_slice(lane);
        u64::from_le_bytes(wide)
    })
}

/// Whether a null reference matches the type of an expected `ref.null`: a
/// null of no stated type matches any null; otherwise the type must be one
/// of `allowed`.
pub fn null_type_is(ty: Option<&HeapType<'_>>, allowed: &[AbstractHeapType]) -> bool {
    match ty {
        None => true,
        Some(HeapType::Abstract { shared: false, ty }) => allowed.contains(ty),
        Some(_) => false,
    }
}
