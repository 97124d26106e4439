//! Engine-neutral values, types and outcomes, so that the two engines'
//! results can be compared without either's `Val` type.

use arbitrary::{Result, Unstructured};

/// A value type, as both engines see it for Wasm 2.0 modules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    I32,
    I64,
    F32,
    F64,
    V128,
    FuncRef,
    ExternRef,
}

/// A value. References carry only what can be compared across engines:
/// whether a `funcref` is null, and the host payload of an `externref`.
#[derive(Clone, Copy, Debug)]
pub enum Value {
    I32(i32),
    I64(i64),
    F32(u32),
    F64(u64),
    V128(u128),
    FuncRef { non_null: bool },
    ExternRef(Option<u64>),
}

impl Value {
    /// A value of kind `kind` drawn from the fuzz input, biased towards the
    /// edges where engines tend to differ.
    pub fn arbitrary(u: &mut Unstructured<'_>, kind: Kind) -> Result<Value> {
        Ok(match kind {
            Kind::I32 => Value::I32(interesting_i32(u)?),
            Kind::I64 => Value::I64(if u.ratio(1, 4)? {
                i64::from(interesting_i32(u)?)
            } else {
                *u.choose(&[0, 1, -1, i64::MIN, i64::MAX, 1 << 32, 0x8000_0000])?
            }),
            Kind::F32 => Value::F32(interesting_f32(u)?),
            Kind::F64 => Value::F64(interesting_f64(u)?),
            Kind::V128 => Value::V128(match u.int_in_range(0..=3)? {
                0 => u.arbitrary()?,
                1 => {
                    let mut lanes = [0u32; 4];
                    for lane in &mut lanes {
                        *lane = interesting_f32(u)?;
                    }
                    lanes
                        .iter()
                        .rev()
                        .fold(0u128, |acc, &l| (acc << 32) | u128::from(l))
                }
                2 => (u128::from(interesting_f64(u)?) << 64) | u128::from(interesting_f64(u)?),
                _ => {
                    u128::from(interesting_i32(u)? as u32)
                        * 0x0000_0001_0000_0001_0000_0001_0000_0001
                }
            }),
            // A non-null `funcref` argument would have to name a function of
            // each engine's own store; null is what both can share.
            Kind::FuncRef => Value::FuncRef { non_null: false },
            Kind::ExternRef => Value::ExternRef(if u.arbitrary()? {
                Some(u.arbitrary()?)
            } else {
                None
            }),
        })
    }

    /// The value a host function returns for result `index` of a call whose
    /// arguments hash to `hash`: any fixed function of the arguments would
    /// do, this one makes different calls return different values.
    pub fn from_hash(kind: Kind, hash: u64, index: usize) -> Value {
        let h = hash
            .wrapping_add(index as u64)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
        match kind {
            Kind::I32 => Value::I32(h as i32),
            Kind::I64 => Value::I64(h as i64),
            Kind::F32 => Value::F32(h as u32),
            Kind::F64 => Value::F64(h),
            Kind::V128 => Value::V128((u128::from(h) << 64) | u128::from(h.rotate_left(17))),
            Kind::FuncRef => Value::FuncRef { non_null: false },
            Kind::ExternRef => Value::ExternRef(if h & 1 == 0 { None } else { Some(h >> 1) }),
        }
    }

    /// Folds this value into `hash`, engine-independently.
    pub fn hash_into(&self, hash: u64) -> u64 {
        let bits: u128 = match *self {
            Value::I32(v) => u128::from(v as u32),
            Value::I64(v) => u128::from(v as u64),
            Value::F32(v) => u128::from(v),
            Value::F64(v) => u128::from(v),
            Value::V128(v) => v,
            Value::FuncRef { non_null } => u128::from(non_null),
            Value::ExternRef(v) => v.map_or(0, |v| u128::from(v) + 1),
        };
        let mut h = hash ^ 0xcbf2_9ce4_8422_2325;
        for chunk in [bits as u64, (bits >> 64) as u64] {
            h = (h ^ chunk).wrapping_mul(0x0000_0100_0000_01b3);
        }
        h
    }
}

fn interesting_i32(u: &mut Unstructured<'_>) -> Result<i32> {
    Ok(if u.ratio(1, 2)? {
        *u.choose(&[
            0,
            1,
            -1,
            2,
            i32::MIN,
            i32::MAX,
            0x7f,
            0x80,
            0xff,
            0xffff,
            0x1_0000,
            65536 * 16 - 4,
        ])?
    } else {
        u.arbitrary()?
    })
}

fn interesting_f32(u: &mut Unstructured<'_>) -> Result<u32> {
    Ok(if u.ratio(1, 2)? {
        *u.choose(&[
            0.0f32.to_bits(),
            (-0.0f32).to_bits(),
            1.0f32.to_bits(),
            (-1.5f32).to_bits(),
            f32::INFINITY.to_bits(),
            f32::NEG_INFINITY.to_bits(),
            0x7fc0_0000, // canonical NaN
            0xffc0_0000,
            0x7f80_0001, // signalling NaN
            0x7fa0_0000,
            f32::MIN_POSITIVE.to_bits(),
            1, // smallest subnormal
            2147483648.0f32.to_bits(),
            (-2147483904.0f32).to_bits(),
            4294967296.0f32.to_bits(),
            f32::MAX.to_bits(),
        ])?
    } else {
        u.arbitrary()?
    })
}

fn interesting_f64(u: &mut Unstructured<'_>) -> Result<u64> {
    Ok(if u.ratio(1, 2)? {
        *u.choose(&[
            0.0f64.to_bits(),
            (-0.0f64).to_bits(),
            1.0f64.to_bits(),
            (-1.5f64).to_bits(),
            f64::INFINITY.to_bits(),
            f64::NEG_INFINITY.to_bits(),
            0x7ff8_0000_0000_0000, // canonical NaN
            0xfff8_0000_0000_0000,
            0x7ff0_0000_0000_0001, // signalling NaN
            0x7ff4_0000_0000_0000,
            f64::MIN_POSITIVE.to_bits(),
            1,
            2147483648.0f64.to_bits(),
            (-2147483649.0f64).to_bits(),
            9223372036854775808.0f64.to_bits(),
            f64::MAX.to_bits(),
        ])?
    } else {
        u.arbitrary()?
    })
}

/// How a call (or an instantiation) ended, engine-neutrally.
#[derive(Clone, Debug)]
pub enum Outcome {
    Returned(Vec<Value>),
    /// A Wasm trap: the `Trap` variant's name (both engines' `Trap` enums
    /// use the same names).
    Trap(String),
    /// The error a fuzz host function returned on purpose.
    HostError(u64),
    /// Any other error (link errors, resource limits): only its presence is
    /// compared, messages differ between engines.
    Error(String),
}

impl Outcome {
    pub fn trap_name(&self) -> Option<&str> {
        match self {
            Outcome::Trap(name) => Some(name),
            _ => None,
        }
    }
}

/// The error message of a fuzz host function that fails on purpose; the
/// number identifies the call so that both engines must fail in the same
/// one.
pub const HOST_ERROR_PREFIX: &str = "fuzz host function failed on purpose #";

/// Everything observable in an instance after a call: exported memories,
/// globals and tables, in export order.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    pub memories: Vec<(String, Vec<u8>)>,
    pub globals: Vec<(String, Value)>,
    /// Size and which elements are non-null.
    pub tables: Vec<(String, u64, Vec<bool>)>,
}
