//! Relaxed SIMD against a model written here from the proposal.
//!
//! Every one of the twenty instructions runs on corner values and on
//! pseudo-random vectors, in both modes of
//! `Config::relaxed_simd_deterministic`, optimized and not, and on x86_64
//! also with the CPU features switched off that the fast sequences and the
//! deterministic `fma` use (FMA; SSSE3 and SSE4.1). For each lane:
//!
//! * deterministic mode must give exactly the model's deterministic
//!   result (the reference interpreter's; any NaN where it gives a NaN),
//!   whatever the CPU features;
//! * the fast mode must give one of the results the proposal allows.
//!
//! The spec testsuite's relaxed-SIMD files (`tests/spec.rs`) check fixed
//! values; this covers many more inputs and the fallbacks.

use wasmtime::{Config, Engine, Instance, Module, OptLevel, Store, V128};

const WAT: &str = r#"
(module
  (func (export "swizzle") (param v128 v128) (result v128)
    (i8x16.relaxed_swizzle (local.get 0) (local.get 1)))
  (func (export "trunc_f32x4_s") (param v128 v128) (result v128)
    (i32x4.relaxed_trunc_f32x4_s (local.get 0)))
  (func (export "trunc_f32x4_u") (param v128 v128) (result v128)
    (i32x4.relaxed_trunc_f32x4_u (local.get 0)))
  (func (export "trunc_f64x2_s_zero") (param v128 v128) (result v128)
    (i32x4.relaxed_trunc_f64x2_s_zero (local.get 0)))
  (func (export "trunc_f64x2_u_zero") (param v128 v128) (result v128)
    (i32x4.relaxed_trunc_f64x2_u_zero (local.get 0)))
  (func (export "f32x4_madd") (param v128 v128 v128) (result v128)
    (f32x4.relaxed_madd (local.get 0) (local.get 1) (local.get 2)))
  (func (export "f32x4_nmadd") (param v128 v128 v128) (result v128)
    (f32x4.relaxed_nmadd (local.get 0) (local.get 1) (local.get 2)))
  (func (export "f64x2_madd") (param v128 v128 v128) (result v128)
    (f64x2.relaxed_madd (local.get 0) (local.get 1) (local.get 2)))
  (func (export "f64x2_nmadd") (param v128 v128 v128) (result v128)
    (f64x2.relaxed_nmadd (local.get 0) (local.get 1) (local.get 2)))
  (func (export "i8x16_laneselect") (param v128 v128 v128) (result v128)
    (i8x16.relaxed_laneselect (local.get 0) (local.get 1) (local.get 2)))
  (func (export "i16x8_laneselect") (param v128 v128 v128) (result v128)
    (i16x8.relaxed_laneselect (local.get 0) (local.get 1) (local.get 2)))
  (func (export "i32x4_laneselect") (param v128 v128 v128) (result v128)
    (i32x4.relaxed_laneselect (local.get 0) (local.get 1) (local.get 2)))
  (func (export "i64x2_laneselect") (param v128 v128 v128) (result v128)
    (i64x2.relaxed_laneselect (local.get 0) (local.get 1) (local.get 2)))
  (func (export "f32x4_min") (param v128 v128) (result v128)
    (f32x4.relaxed_min (local.get 0) (local.get 1)))
  (func (export "f32x4_max") (param v128 v128) (result v128)
    (f32x4.relaxed_max (local.get 0) (local.get 1)))
  (func (export "f64x2_min") (param v128 v128) (result v128)
    (f64x2.relaxed_min (local.get 0) (local.get 1)))
  (func (export "f64x2_max") (param v128 v128) (result v128)
    (f64x2.relaxed_max (local.get 0) (local.get 1)))
  (func (export "q15mulr") (param v128 v128) (result v128)
    (i16x8.relaxed_q15mulr_s (local.get 0) (local.get 1)))
  (func (export "dot") (param v128 v128) (result v128)
    (i16x8.relaxed_dot_i8x16_i7x16_s (local.get 0) (local.get 1)))
  (func (export "dot_add") (param v128 v128 v128) (result v128)
    (i32x4.relaxed_dot_i8x16_i7x16_add_s (local.get 0) (local.get 1) (local.get 2)))
)
"#;

/// The instructions, by export name, and how many operands each takes.
const OPS: &[(&str, usize)] = &[
    ("swizzle", 2),
    ("trunc_f32x4_s", 1),
    ("trunc_f32x4_u", 1),
    ("trunc_f64x2_s_zero", 1),
    ("trunc_f64x2_u_zero", 1),
    ("f32x4_madd", 3),
    ("f32x4_nmadd", 3),
    ("f64x2_madd", 3),
    ("f64x2_nmadd", 3),
    ("i8x16_laneselect", 3),
    ("i16x8_laneselect", 3),
    ("i32x4_laneselect", 3),
    ("i64x2_laneselect", 3),
    ("f32x4_min", 2),
    ("f32x4_max", 2),
    ("f64x2_min", 2),
    ("f64x2_max", 2),
    ("q15mulr", 2),
    ("dot", 2),
    ("dot_add", 3),
];

/// Random vectors per instruction, on top of the corner cases.
const RANDOM_INPUTS: usize = 3000;

// ---- lanes ----

fn bytes(v: u128) -> [u8; 16] {
    v.to_le_bytes()
}
fn i8s(v: u128) -> [i8; 16] {
    bytes(v).map(|b| b as i8)
}
fn i16s(v: u128) -> [i16; 8] {
    let b = bytes(v);
    std::array::from_fn(|i| i16::from_le_bytes([b[2 * i], b[2 * i + 1]]))
}
fn u32s(v: u128) -> [u32; 4] {
    std::array::from_fn(|i| (v >> (32 * i)) as u32)
}
fn u64s(v: u128) -> [u64; 2] {
    std::array::from_fn(|i| (v >> (64 * i)) as u64)
}
fn f32s(v: u128) -> [f32; 4] {
    u32s(v).map(f32::from_bits)
}
fn f64s(v: u128) -> [f64; 2] {
    u64s(v).map(f64::from_bits)
}

// ---- what one lane may be ----

/// The results one lane may have.
#[derive(Debug)]
enum Lane {
    /// Exactly these bits.
    Bits(u64),
    /// A float lane that is NaN, with any payload and sign.
    Nan,
    /// Anything (a relaxed truncation of NaN or out-of-range input).
    Any,
}

impl Lane {
    fn float32(x: f32) -> Lane {
        if x.is_nan() {
            Lane::Nan
        } else {
            Lane::Bits(x.to_bits().into())
        }
    }
    fn float64(x: f64) -> Lane {
        if x.is_nan() {
            Lane::Nan
        } else {
            Lane::Bits(x.to_bits())
        }
    }
    fn admits(&self, bits: u64, float_width: Option<u32>) -> bool {
        match *self {
            Lane::Bits(want) => want == bits,
            Lane::Nan => match float_width {
                Some(32) => f32::from_bits(bits as u32).is_nan(),
                Some(64) => f64::from_bits(bits).is_nan(),
                _ => unreachable!("a NaN lane in an integer result"),
            },
            Lane::Any => true,
        }
    }
}

/// For each lane of one instruction's result: its deterministic value
/// (first) and every other value the fast mode may give instead.
struct Expected {
    lane_bits: u32,
    float: bool,
    lanes: Vec<Vec<Lane>>,
}

/// Wasm's `min` (`max` with `max`) of two float lanes, widened to `f64`
/// (exact for `f32` lanes: every value, zero sign and NaN survives).
fn wasm_min_max(a: f64, b: f64, max: bool) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else if a == 0.0 && b == 0.0 {
        // The zero of the wanted sign: -0 for `min`, +0 for `max`.
        if a.is_sign_negative() != max { a } else { b }
    } else if max {
        a.max(b)
    } else {
        a.min(b)
    }
}

/// The float lanes of `v`, `bits` wide, widened to `f64`.
fn float_lanes(v: u128, bits: u32) -> Vec<f64> {
    if bits == 32 {
        f32s(v).iter().map(|&x| f64::from(x)).collect()
    } else {
        f64s(v).to_vec()
    }
}

/// A float lane `bits` wide holding `x` (narrowed back, exactly, from a
/// value [`float_lanes`] widened).
fn float_lane(x: f64, bits: u32) -> Lane {
    if bits == 32 {
        Lane::float32(x as f32)
    } else {
        Lane::float64(x)
    }
}

/// The fused result of `a * b + c` (the deterministic one) and the
/// unfused one, for lanes `bits` wide. `f32` lanes are computed in `f32`:
/// in `f64` each operation would round differently.
fn fused_and_unfused(a: f64, b: f64, c: f64, bits: u32) -> Vec<Lane> {
    if bits == 32 {
        let (a, b, c) = (a as f32, b as f32, c as f32);
        vec![Lane::float32(a.mul_add(b, c)), Lane::float32(a * b + c)]
    } else {
        vec![Lane::float64(a.mul_add(b, c)), Lane::float64(a * b + c)]
    }
}

/// The proposal's choices for `relaxed_min`/`relaxed_max` of one lane
/// pair beyond Wasm's `min`/`max`: an operand in place of a NaN, and
/// either zero for zeros of opposite signs.
fn min_max_alternatives(a_nan: bool, b_nan: bool, zeros: bool) -> (bool, bool) {
    // (may be `a`, may be `b`)
    (b_nan || zeros, a_nan || zeros)
}

fn expected(op: &str, args: &[u128]) -> Expected {
    let ints = |lane_bits, lanes| Expected {
        lane_bits,
        float: false,
        lanes,
    };
    let floats = |lane_bits, lanes| Expected {
        lane_bits,
        float: true,
        lanes,
    };
    match op {
        "swizzle" => {
            let (a, idx) = (bytes(args[0]), bytes(args[1]));
            ints(
                8,
                idx.iter()
                    .map(|&i| {
                        let exact = if i < 16 { a[usize::from(i)] } else { 0 };
                        let mut allowed = vec![Lane::Bits(exact.into())];
                        if (16..128).contains(&i) {
                            allowed.push(Lane::Bits(a[usize::from(i % 16)].into()));
                        }
                        allowed
                    })
                    .collect(),
            )
        }
        "trunc_f32x4_s" | "trunc_f32x4_u" | "trunc_f64x2_s_zero" | "trunc_f64x2_u_zero" => {
            let signed = op.contains("_s");
            let inputs: Vec<f64> = if op.contains("f32x4") {
                f32s(args[0]).iter().map(|&x| f64::from(x)).collect()
            } else {
                f64s(args[0]).to_vec()
            };
            let mut lanes: Vec<Vec<Lane>> = inputs
                .iter()
                .map(|&x| {
                    // Rust's `as` is Wasm's saturating truncation.
                    let saturated = if signed {
                        u64::from(x as i32 as u32)
                    } else {
                        u64::from(x as u32)
                    };
                    let t = x.trunc();
                    let in_range = if signed {
                        (-2147483648.0..2147483648.0).contains(&t)
                    } else {
                        (0.0..4294967296.0).contains(&t)
                    };
                    let mut allowed = vec![Lane::Bits(saturated)];
                    if !in_range {
                        allowed.push(Lane::Any);
                    }
                    allowed
                })
                .collect();
            lanes.resize_with(4, || vec![Lane::Bits(0)]);
            ints(32, lanes)
        }
        "f32x4_madd" | "f32x4_nmadd" | "f64x2_madd" | "f64x2_nmadd" => {
            let bits = if op.starts_with("f32") { 32 } else { 64 };
            let negate = op.ends_with("nmadd");
            let [a, b, c] = [0, 1, 2].map(|k| float_lanes(args[k], bits));
            floats(
                bits,
                (0..a.len())
                    .map(|i| {
                        let a = if negate { -a[i] } else { a[i] };
                        fused_and_unfused(a, b[i], c[i], bits)
                    })
                    .collect(),
            )
        }
        "i8x16_laneselect" | "i16x8_laneselect" | "i32x4_laneselect" | "i64x2_laneselect" => {
            let bits: u32 = op[1..op.find('x').unwrap()].parse().unwrap();
            let lane_mask = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            let lane = |v: u128, i: u32| (v >> (bits * i)) as u64 & lane_mask;
            ints(
                bits,
                (0..128 / bits)
                    .map(|i| {
                        let (a, b, m) = (lane(args[0], i), lane(args[1], i), lane(args[2], i));
                        let top = if m >> (bits - 1) & 1 == 1 {
                            lane_mask
                        } else {
                            0
                        };
                        vec![
                            Lane::Bits((a & m) | (b & !m & lane_mask)),
                            Lane::Bits((a & top) | (b & !top & lane_mask)),
                        ]
                    })
                    .collect(),
            )
        }
        "f32x4_min" | "f32x4_max" | "f64x2_min" | "f64x2_max" => {
            let bits = if op.starts_with("f32") { 32 } else { 64 };
            let max = op.ends_with("max");
            let (a, b) = (float_lanes(args[0], bits), float_lanes(args[1], bits));
            floats(
                bits,
                a.iter()
                    .zip(&b)
                    .map(|(&x, &y)| {
                        let mut allowed = vec![float_lane(wasm_min_max(x, y, max), bits)];
                        let (may_a, may_b) =
                            min_max_alternatives(x.is_nan(), y.is_nan(), x == 0.0 && y == 0.0);
                        if may_a {
                            allowed.push(float_lane(x, bits));
                        }
                        if may_b {
                            allowed.push(float_lane(y, bits));
                        }
                        allowed
                    })
                    .collect(),
            )
        }
        "q15mulr" => {
            let (a, b) = (i16s(args[0]), i16s(args[1]));
            ints(
                16,
                (0..8)
                    .map(|i| {
                        let product = (i32::from(a[i]) * i32::from(b[i]) + 0x4000) >> 15;
                        let saturated = product.clamp(-32768, 32767) as i16 as u16;
                        let mut allowed = vec![Lane::Bits(saturated.into())];
                        if a[i] == i16::MIN && b[i] == i16::MIN {
                            allowed.push(Lane::Bits(i16::MIN as u16 as u64));
                        }
                        allowed
                    })
                    .collect(),
            )
        }
        "dot" => {
            let (a, b) = (i8s(args[0]), i8s(args[1]));
            ints(
                16,
                (0..8)
                    .map(|i| {
                        let mut allowed = Vec::new();
                        for b_signed in [true, false] {
                            let y = |k: usize| {
                                if b_signed {
                                    i32::from(b[k])
                                } else {
                                    i32::from(b[k] as u8)
                                }
                            };
                            let sum = i32::from(a[2 * i]) * y(2 * i)
                                + i32::from(a[2 * i + 1]) * y(2 * i + 1);
                            // Wrapping first: the deterministic result.
                            allowed.push(Lane::Bits(u64::from(sum as i16 as u16)));
                            allowed.push(Lane::Bits(u64::from(
                                sum.clamp(-32768, 32767) as i16 as u16
                            )));
                        }
                        allowed
                    })
                    .collect(),
            )
        }
        "dot_add" => {
            let (a, b, c) = (i8s(args[0]), i8s(args[1]), u32s(args[2]));
            ints(
                32,
                (0..4)
                    .map(|i| {
                        let mut allowed = Vec::new();
                        for b_signed in [true, false] {
                            let product = |k: usize| {
                                let y = if b_signed {
                                    i32::from(b[k])
                                } else {
                                    i32::from(b[k] as u8)
                                };
                                i32::from(a[k]) * y
                            };
                            let k = 4 * i;
                            let exact =
                                product(k) + product(k + 1) + product(k + 2) + product(k + 3);
                            let pair =
                                |j: usize| (product(j) + product(j + 1)).clamp(-32768, 32767);
                            let saturated_pairs = pair(k) + pair(k + 2);
                            // Exact first: the deterministic result.
                            for sum in [exact, saturated_pairs] {
                                allowed
                                    .push(Lane::Bits(u64::from((sum as u32).wrapping_add(c[i]))));
                            }
                        }
                        allowed
                    })
                    .collect(),
            )
        }
        other => unreachable!("no model for {other}"),
    }
}

/// Checks `result` of `op` on `args`; `deterministic` allows only each
/// lane's first value.
fn check(op: &str, args: &[u128], result: u128, deterministic: bool) -> Result<(), String> {
    let want = expected(op, args);
    let mask = if want.lane_bits == 64 {
        u64::MAX
    } else {
        (1u64 << want.lane_bits) - 1
    };
    for (i, allowed) in want.lanes.iter().enumerate() {
        let got = (result >> (want.lane_bits as usize * i)) as u64 & mask;
        let float_width = want.float.then_some(want.lane_bits);
        let choices = if deterministic {
            &allowed[..1]
        } else {
            &allowed[..]
        };
        if !choices.iter().any(|lane| lane.admits(got, float_width)) {
            return Err(format!(
                "{op}({}) lane {i} = {got:#x}, allowed {choices:?}",
                args.iter()
                    .map(|a| format!("{a:#034x}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(())
}

// ---- inputs ----

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const F32_SPECIAL: &[f32] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.5,
    -0.99,
    1.5,
    -2.5,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::MAX,
    f32::MIN,
    f32::MIN_POSITIVE,
    1e-45,
    2147483520.0,
    2147483648.0,
    -2147483648.0,
    -2147483904.0,
    4294967040.0,
    4294967296.0,
    1e10,
    -1e10,
];
const F64_SPECIAL: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    -0.99,
    -2.5,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::MAX,
    f64::MIN,
    f64::MIN_POSITIVE,
    5e-324,
    2147483647.0,
    2147483647.9,
    2147483648.0,
    -2147483648.0,
    -2147483648.9,
    -2147483649.0,
    4294967295.0,
    4294967295.9,
    4294967296.0,
    1e10,
    -1e10,
];
const F32_NANS: &[u32] = &[0x7fc0_0000, 0xffc0_0000, 0x7f80_0001, 0x7fd2_3456];
const F64_NANS: &[u64] = &[
    0x7ff8_0000_0000_0000,
    0xfff8_0000_0000_0000,
    0x7ff0_0000_0000_0001,
];
const BYTE_SPECIAL: &[u8] = &[
    0, 1, 2, 15, 16, 17, 31, 32, 64, 100, 127, 128, 129, 200, 240, 255,
];
const I16_SPECIAL: &[u16] = &[0, 1, 0x4000, 0x7fff, 0x8000, 0x8001, 0xffff, 0xc000];

/// A random vector read as lanes of `kind`: mostly corner values, the
/// rest random bits (or, for floats, random values of moderate size, where
/// fused and unfused multiply-add differ in their last bit).
fn vector(rng: &mut Rng, kind: &str) -> u128 {
    let mut v = 0u128;
    match kind {
        "f32" => {
            for i in 0..4 {
                let bits = match rng.below(8) {
                    0..=2 => F32_SPECIAL[rng.below(F32_SPECIAL.len())].to_bits(),
                    3 => F32_NANS[rng.below(F32_NANS.len())],
                    4 => rng.next() as u32,
                    _ => {
                        // Sign, an exponent within 2^±20, a random mantissa.
                        let exponent = 127 - 20 + rng.below(41) as u32;
                        (rng.next() as u32 & 0x807f_ffff) | (exponent << 23)
                    }
                };
                v |= u128::from(bits) << (32 * i);
            }
        }
        "f64" => {
            for i in 0..2 {
                let bits = match rng.below(8) {
                    0..=2 => F64_SPECIAL[rng.below(F64_SPECIAL.len())].to_bits(),
                    3 => F64_NANS[rng.below(F64_NANS.len())],
                    4 => rng.next(),
                    _ => {
                        let exponent = 1023 - 40 + rng.below(81) as u64;
                        (rng.next() & 0x800f_ffff_ffff_ffff) | (exponent << 52)
                    }
                };
                v |= u128::from(bits) << (64 * i);
            }
        }
        "i16" => {
            for i in 0..8 {
                let lane = if rng.below(2) == 0 {
                    I16_SPECIAL[rng.below(I16_SPECIAL.len())]
                } else {
                    rng.next() as u16
                };
                v |= u128::from(lane) << (16 * i);
            }
        }
        "mask" => {
            // Laneselect masks: whole lanes of ones or zeros, half-set
            // bytes, or random bits.
            for i in 0..16 {
                let byte = match rng.below(4) {
                    0 => 0xff,
                    1 => 0,
                    2 => [0x80, 0x7f, 0x0f, 0xf0][rng.below(4)],
                    _ => rng.next() as u8,
                };
                v |= u128::from(byte) << (8 * i);
            }
        }
        _ => {
            for i in 0..16 {
                let byte = if rng.below(2) == 0 {
                    BYTE_SPECIAL[rng.below(BYTE_SPECIAL.len())]
                } else {
                    rng.next() as u8
                };
                v |= u128::from(byte) << (8 * i);
            }
        }
    }
    v
}

/// The lane kind of each operand of `op`.
fn operand_kinds(op: &str) -> [&'static str; 3] {
    if op.starts_with("trunc_f32") || op.starts_with("f32x4") {
        ["f32", "f32", "f32"]
    } else if op.starts_with("trunc_f64") || op.starts_with("f64x2") {
        ["f64", "f64", "f64"]
    } else if op.ends_with("laneselect") {
        ["bytes", "bytes", "mask"]
    } else if op == "q15mulr" {
        ["i16", "i16", "i16"]
    } else {
        ["bytes", "bytes", "bytes"]
    }
}

/// `b` in every byte lane.
fn splat8(b: u8) -> u128 {
    u128::from_le_bytes([b; 16])
}

/// `h` in every 16-bit lane.
fn splat16(h: u16) -> u128 {
    (0..8).fold(0u128, |v, i| v | u128::from(h) << (16 * i))
}

/// Hand-picked inputs for each instruction: the cases the proposal leaves
/// open, whatever the random ones happen to hit.
fn corner_inputs(op: &str) -> Vec<[u128; 3]> {
    let f32x4 = |l: [f32; 4]| (0..4).fold(0u128, |v, i| v | u128::from(l[i].to_bits()) << (32 * i));
    let f64x2 = |l: [f64; 2]| u128::from(l[0].to_bits()) | u128::from(l[1].to_bits()) << 64;
    let iota = u128::from_le_bytes(std::array::from_fn(|i| 0x10 + i as u8));
    match op {
        "swizzle" => vec![
            [
                iota,
                u128::from_le_bytes(std::array::from_fn(|i| i as u8 * 17)),
                0,
            ],
            [iota, splat8(0x10), 0],
            [iota, splat8(0x7f), 0],
            [iota, splat8(0x80), 0],
        ],
        "dot" | "dot_add" => vec![
            [splat8(0x80), splat8(0x80), 0],
            [splat8(0x80), splat8(0x81), 7],
            [splat8(0x7f), splat8(0x7f), u128::MAX],
            [splat8(0x80), splat8(0x7f), 0],
        ],
        "q15mulr" => vec![[splat16(0x8000), splat16(0x8000), 0]],
        "f32x4_min" | "f32x4_max" => vec![[
            f32x4([0.0, -0.0, f32::NAN, 1.0]),
            f32x4([-0.0, 0.0, 1.0, f32::NAN]),
            0,
        ]],
        "f64x2_min" | "f64x2_max" => vec![
            [f64x2([0.0, f64::NAN]), f64x2([-0.0, 1.0]), 0],
            [f64x2([-0.0, 1.0]), f64x2([0.0, f64::NAN]), 0],
        ],
        "trunc_f32x4_s" | "trunc_f32x4_u" => vec![[f32x4([f32::NAN, 3e9, -3e9, -0.5]), 0, 0]],
        "trunc_f64x2_s_zero" | "trunc_f64x2_u_zero" => {
            vec![[f64x2([f64::NAN, 5e9]), 0, 0], [f64x2([-5e9, -0.5]), 0, 0]]
        }
        // 1 + 2^-23 squared minus (1 + 2^-22): fused gives 2^-46, unfused 0.
        "f32x4_madd" => vec![[
            f32x4([1.0 + f32::EPSILON; 4]),
            f32x4([1.0 + f32::EPSILON; 4]),
            f32x4([-(1.0 + 2.0 * f32::EPSILON); 4]),
        ]],
        "f64x2_madd" => vec![[
            f64x2([1.0 + f64::EPSILON; 2]),
            f64x2([1.0 + f64::EPSILON; 2]),
            f64x2([-(1.0 + 2.0 * f64::EPSILON); 2]),
        ]],
        _ => Vec::new(),
    }
}

// ---- running ----

/// One engine configuration: a mode, whether Cranelift optimizes (the
/// x86 sequences are matched in lowering, which must work on IR the
/// optimizer has not touched too) and, on x86_64, CPU features turned off.
struct Variant {
    name: &'static str,
    deterministic: bool,
    unoptimized: bool,
    cpu_off: &'static [&'static str],
}

/// Everything the SSE2 baseline lacks: off, no fast sequence is possible
/// and every fallback (Cranelift's `pshufb` and `fma` libcalls among
/// them) is taken.
const SSE2_ONLY: &[&str] = &[
    "has_sse3",
    "has_ssse3",
    "has_sse41",
    "has_sse42",
    "has_avx",
    "has_avx2",
    "has_fma",
    "has_avx512f",
    "has_avx512vl",
    "has_avx512dq",
    "has_avx512bitalg",
    "has_avx512vbmi",
];

fn variants() -> Vec<Variant> {
    let mut v = vec![
        Variant {
            name: "fast",
            deterministic: false,
            unoptimized: false,
            cpu_off: &[],
        },
        Variant {
            name: "deterministic",
            deterministic: true,
            unoptimized: false,
            cpu_off: &[],
        },
        Variant {
            name: "fast, unoptimized",
            deterministic: false,
            unoptimized: true,
            cpu_off: &[],
        },
        Variant {
            name: "deterministic, unoptimized",
            deterministic: true,
            unoptimized: true,
            cpu_off: &[],
        },
    ];
    if cfg!(target_arch = "x86_64") {
        for deterministic in [false, true] {
            v.push(Variant {
                name: if deterministic {
                    "deterministic, no FMA"
                } else {
                    "fast, no FMA"
                },
                deterministic,
                unoptimized: false,
                cpu_off: &["has_fma"],
            });
            v.push(Variant {
                name: if deterministic {
                    "deterministic, SSE2 only"
                } else {
                    "fast, SSE2 only"
                },
                deterministic,
                unoptimized: false,
                cpu_off: SSE2_ONLY,
            });
        }
    }
    v
}

fn engine(variant: &Variant) -> Engine {
    let mut config = Config::new();
    config.relaxed_simd_deterministic(variant.deterministic);
    if variant.unoptimized {
        config.cranelift_opt_level(OptLevel::None);
    }
    for flag in variant.cpu_off {
        // SAFETY: turning a CPU feature off only narrows the instructions
        // Cranelift may use, so the code it produces still runs on this
        // host; no setting here changes the generated code's conventions.
        unsafe {
            config.cranelift_flag_set(flag, "false");
        }
    }
    Engine::new(&config).unwrap_or_else(|e| panic!("{}: {e:#}", variant.name))
}

/// Calls `op` of `instance` on `args`.
fn call(
    store: &mut Store<()>,
    instance: &Instance,
    op: &str,
    arity: usize,
    args: &[u128; 3],
) -> u128 {
    let [a, b, c] = args.map(V128::from);
    let result = match arity {
        1 | 2 => instance
            .get_typed_func::<(V128, V128), V128>(&mut *store, op)
            .unwrap()
            .call(&mut *store, (a, b)),
        3 => instance
            .get_typed_func::<(V128, V128, V128), V128>(&mut *store, op)
            .unwrap()
            .call(&mut *store, (a, b, c)),
        _ => unreachable!(),
    };
    result.unwrap().into()
}

/// Every input each instruction runs on, the same for every variant.
fn inputs() -> Vec<(&'static str, usize, Vec<[u128; 3]>)> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    OPS.iter()
        .map(|&(op, arity)| {
            let kinds = operand_kinds(op);
            let mut all = corner_inputs(op);
            for _ in 0..RANDOM_INPUTS {
                all.push(std::array::from_fn(|i| vector(&mut rng, kinds[i])));
            }
            (op, arity, all)
        })
        .collect()
}

#[test]
fn every_result_is_allowed_and_deterministic_mode_is_exact() {
    let inputs = inputs();
    let mut failures = Vec::new();
    let mut checked = 0usize;
    for variant in variants() {
        let engine = engine(&variant);
        let module =
            Module::new(&engine, WAT).unwrap_or_else(|e| panic!("{}: {e:#}", variant.name));
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).unwrap();
        for (op, arity, args) in &inputs {
            for args in args {
                let result = call(&mut store, &instance, op, *arity, args);
                checked += 1;
                if let Err(e) = check(op, &args[..*arity], result, variant.deterministic) {
                    failures.push(format!("{}: {e}", variant.name));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} results are not allowed:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    println!("relaxed SIMD: {checked} results checked");
}

/// On x86_64 the fast mode must really take the fast sequences: for these
/// inputs each gives another allowed result than the deterministic one.
/// Without this, a fast mode that compiled the deterministic sequences
/// would pass everything else.
#[test]
fn fast_mode_differs_where_the_hardware_does() {
    #[cfg(not(target_arch = "x86_64"))]
    println!("skipped: only x86_64 has fast sequences that differ");
    #[cfg(target_arch = "x86_64")]
    fast_mode_differs_on_x86_64();
}

#[cfg(target_arch = "x86_64")]
fn fast_mode_differs_on_x86_64() {
    if !std::arch::is_x86_feature_detected!("sse4.1") {
        println!("skipped: this host lacks SSE4.1, which the fast sequences use");
        return;
    }
    let cases: &[(&str, usize, [u128; 3])] = &[
        // An index of 16: `pshufb` reads lane 0, swizzle gives 0.
        ("swizzle", 2, [splat8(7), splat8(16), 0]),
        // NaN: `cvttps2dq` gives i32::MIN, saturation 0.
        ("trunc_f32x4_s", 1, [splat8(0xff), 0, 0]),
        ("trunc_f64x2_s_zero", 1, [splat8(0xff), 0, 0]),
        // `pmulhrsw` wraps i16::MIN squared.
        ("q15mulr", 2, [splat16(0x8000), splat16(0x8000), 0]),
        // `pmaddubsw` reads 0x81 as 129.
        ("dot", 2, [splat8(0x01), splat8(0x81), 0]),
        ("dot_add", 3, [splat8(0x01), splat8(0x81), 0]),
        // `blendv` looks at the top bit only.
        ("i8x16_laneselect", 3, [splat8(0xff), 0, splat8(0x80)]),
        // For a NaN second operand the x86 sequence returns the first,
        // 0.0, where Wasm's `min` gives NaN.
        ("f32x4_min", 2, [0, splat8(0xff), 0]),
    ];
    let results = |deterministic: bool| {
        let engine = engine(&Variant {
            name: "",
            deterministic,
            unoptimized: false,
            cpu_off: &[],
        });
        let module = Module::new(&engine, WAT).unwrap();
        let mut store = Store::new(&engine, ());
        let instance = Instance::new(&mut store, &module, &[]).unwrap();
        cases
            .iter()
            .map(|(op, arity, args)| call(&mut store, &instance, op, *arity, args))
            .collect::<Vec<_>>()
    };
    let (fast, deterministic) = (results(false), results(true));
    for (i, (op, arity, args)) in cases.iter().enumerate() {
        assert_ne!(
            fast[i], deterministic[i],
            "{op}: the fast mode gave the deterministic result"
        );
        check(op, &args[..*arity], fast[i], false).unwrap();
        check(op, &args[..*arity], deterministic[i], true).unwrap();
    }
}

#[test]
fn simd_off_takes_relaxed_simd_with_it() {
    let relaxed = "(module (func (param v128 v128) (result v128) (i8x16.relaxed_swizzle (local.get 0) (local.get 1))))";
    let mut config = Config::new();
    config.wasm_simd(false);
    let engine = Engine::new(&config).unwrap();
    assert!(Module::new(&engine, relaxed).is_err());

    // Asked for explicitly, relaxed SIMD without SIMD is refused.
    let mut config = Config::new();
    config.wasm_relaxed_simd(true).wasm_simd(false);
    let msg = Engine::new(&config).err().unwrap().to_string();
    assert!(
        msg.contains("`Config::wasm_relaxed_simd` needs `Config::wasm_simd`"),
        "{msg}"
    );

    // Turned off alone, SIMD stays.
    let mut config = Config::new();
    config.wasm_relaxed_simd(false);
    let engine = Engine::new(&config).unwrap();
    let err = Module::new(&engine, relaxed).err().unwrap();
    assert!(format!("{err:#}").contains("relaxed SIMD"), "{err:#}");
    Module::new(
        &engine,
        "(module (func (param v128) (result v128) (local.get 0)))",
    )
    .unwrap();

    // Naming it in `wasm_features` chooses it too.
    let mut config = Config::new();
    config
        .wasm_features(wasmtime::wasmparser::WasmFeatures::RELAXED_SIMD, true)
        .wasm_simd(false);
    assert!(Engine::new(&config).is_err());
}
