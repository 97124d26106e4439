//! What counts as "the same result".
//!
//! Both engines compile with the same Cranelift, so results are expected to
//! be bit-for-bit equal. The one relaxation is the one the Wasm spec grants:
//! an instruction that produces a NaN may choose its payload
//! nondeterministically, so
//!
//! * an `f32`/`f64` value matches if the bits are equal or both are NaN;
//! * a `v128` value matches if the bits are equal, or if, read as `f32x4`
//!   (or as `f64x2`), every lane either has equal bits or is NaN on both
//!   sides. The lane shape of a `v128` is not known from its type, so both
//!   readings are tried; an integer vector whose differing lanes happen to
//!   be NaN patterns is accepted too (counted as `nan_relaxed_match`);
//! * memories are compared bit-for-bit: a NaN payload that reaches memory
//!   would have to be the same in both engines (same Cranelift lowering).
//!   Should a legitimate payload difference ever show up there, it is a
//!   finding to be looked at, not silently accepted.

use crate::stats;
use crate::value::{Outcome, Snapshot, Value};

fn f32_nan(bits: u32) -> bool {
    f32::from_bits(bits).is_nan()
}

fn f64_nan(bits: u64) -> bool {
    f64::from_bits(bits).is_nan()
}

fn lanes_match<const N: usize>(a: u128, b: u128) -> bool {
    let width = 128 / N;
    let mask = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    (0..N).all(|i| {
        let (x, y) = ((a >> (i * width)) & mask, (b >> (i * width)) & mask);
        x == y
            || match width {
                32 => f32_nan(x as u32) && f32_nan(y as u32),
                _ => f64_nan(x as u64) && f64_nan(y as u64),
            }
    })
}

/// Whether two values match under the NaN rule above.
pub fn values_match(a: &Value, b: &Value) -> bool {
    let relaxed = match (*a, *b) {
        (Value::I32(x), Value::I32(y)) => return x == y,
        (Value::I64(x), Value::I64(y)) => return x == y,
        (Value::F32(x), Value::F32(y)) => x == y || (f32_nan(x) && f32_nan(y)),
        (Value::F64(x), Value::F64(y)) => x == y || (f64_nan(x) && f64_nan(y)),
        (Value::V128(x), Value::V128(y)) => {
            x == y || lanes_match::<4>(x, y) || lanes_match::<2>(x, y)
        }
        (Value::FuncRef { non_null: x }, Value::FuncRef { non_null: y }) => return x == y,
        (Value::ExternRef(x), Value::ExternRef(y)) => return x == y,
        _ => return false,
    };
    if relaxed && !bits_equal(a, b) {
        stats::bump("nan_relaxed_match");
    }
    relaxed
}

fn bits_equal(a: &Value, b: &Value) -> bool {
    match (*a, *b) {
        (Value::F32(x), Value::F32(y)) => x == y,
        (Value::F64(x), Value::F64(y)) => x == y,
        (Value::V128(x), Value::V128(y)) => x == y,
        _ => true,
    }
}

/// Whether two outcomes match; `Err` says how they differ.
pub fn outcomes_match(ours: &Outcome, upstream: &Outcome) -> Result<(), String> {
    let same = match (ours, upstream) {
        (Outcome::Returned(a), Outcome::Returned(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| values_match(x, y))
        }
        (Outcome::Trap(a), Outcome::Trap(b)) => a == b,
        (Outcome::HostError(a), Outcome::HostError(b)) => a == b,
        (Outcome::Error(_), Outcome::Error(_)) => true,
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(format!("ours: {ours:?}\nupstream: {upstream:?}"))
    }
}

/// Whether two snapshots match; `Err` says where they differ first.
pub fn snapshots_match(ours: &Snapshot, upstream: &Snapshot) -> Result<(), String> {
    if ours.memories.len() != upstream.memories.len() {
        return Err(format!(
            "exported memories: ours {}, upstream {}",
            ours.memories.len(),
            upstream.memories.len()
        ));
    }
    for ((name, a), (_, b)) in ours.memories.iter().zip(&upstream.memories) {
        if a.len() != b.len() {
            return Err(format!(
                "memory {name:?}: ours {} bytes, upstream {} bytes",
                a.len(),
                b.len()
            ));
        }
        if let Some(at) = a.iter().zip(b).position(|(x, y)| x != y) {
            let end = (at + 16).min(a.len());
            return Err(format!(
                "memory {name:?} differs at {at:#x}: ours {:02x?}, upstream {:02x?}",
                &a[at..end],
                &b[at..end]
            ));
        }
    }
    if ours.globals.len() != upstream.globals.len() {
        return Err("number of exported globals differs".into());
    }
    for ((name, a), (_, b)) in ours.globals.iter().zip(&upstream.globals) {
        if !values_match(a, b) {
            return Err(format!("global {name:?}: ours {a:?}, upstream {b:?}"));
        }
    }
    if ours.tables.len() != upstream.tables.len() {
        return Err("number of exported tables differs".into());
    }
    for ((name, size_a, a), (_, size_b, b)) in ours.tables.iter().zip(&upstream.tables) {
        if size_a != size_b {
            return Err(format!(
                "table {name:?}: ours size {size_a}, upstream size {size_b}"
            ));
        }
        if let Some(at) = a.iter().zip(b).position(|(x, y)| x != y) {
            return Err(format!(
                "table {name:?} element {at}: ours non-null={}, upstream non-null={}",
                a[at], b[at]
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_rule() {
        assert!(values_match(
            &Value::F32(0x7fc0_0000),
            &Value::F32(0xffc0_0001)
        ));
        assert!(!values_match(&Value::F32(0x7fc0_0000), &Value::F32(0)));
        let a = 0x7fc0_0000_u128 | (5 << 32);
        let b = 0x7fc0_0001_u128 | (5 << 32);
        assert!(values_match(&Value::V128(a), &Value::V128(b)));
        let c = 0x7fc0_0000_u128 | (6 << 32);
        assert!(!values_match(&Value::V128(a), &Value::V128(c)));
        let d = 0x7ff8_0000_0000_0000_u128;
        let e = 0xfff8_0000_0000_0001_u128;
        assert!(values_match(&Value::V128(d), &Value::V128(e)));
    }
}
