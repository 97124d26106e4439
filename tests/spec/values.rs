//! Converting wast constants into `Val`s and matching results against the
//! expected patterns of `assert_return`.

use super::core_values::{f32_matches, f64_matches, lanes, null_type_is, v128_matches};
use std::fmt::Write as _;
use wasmtime::*;
use wast::core::{AbstractHeapType, HeapType, NanPattern, V128Const, V128Pattern};
use wast::core::{WastArgCore, WastRetCore};
use wast::{WastArg, WastRet};

/// Builds the argument value for an `invoke`.
pub fn arg(store: &mut Store<()>, arg: &WastArg<'_>) -> Result<Val> {
    let core = match arg {
        WastArg::Core(core) => core,
        _ => bail!("component-model arguments are not supported"),
    };
    Ok(match core {
        WastArgCore::I32(v) => Val::I32(*v),
        WastArgCore::I64(v) => Val::I64(*v),
        WastArgCore::F32(v) => Val::F32(v.bits),
        WastArgCore::F64(v) => Val::F64(v.bits),
        WastArgCore::V128(v) => Val::V128(V128::from(v128_bits(v))),
        WastArgCore::RefNull(ty) => match abstract_heap_type(ty) {
            Some(AbstractHeapType::Func | AbstractHeapType::NoFunc) => Val::FuncRef(None),
            Some(AbstractHeapType::Extern | AbstractHeapType::NoExtern) => Val::ExternRef(None),
            Some(AbstractHeapType::Exn | AbstractHeapType::NoExn) => Val::ExnRef(None),
            _ => bail!("unsupported null reference argument: {ty:?}"),
        },
        WastArgCore::RefExtern(n) => Val::ExternRef(Some(ExternRef::new(&mut *store, *n)?)),
        WastArgCore::RefHost(_) => bail!("`ref.host` arguments need the GC proposal"),
    })
}

fn v128_bits(v: &V128Const) -> u128 {
    u128::from_le_bytes(v.to_le_bytes())
}

fn abstract_heap_type(ty: &HeapType<'_>) -> Option<AbstractHeapType> {
    match ty {
        HeapType::Abstract { shared: false, ty } => Some(*ty),
        _ => None,
    }
}

/// Checks one result of an `assert_return`; the error says what was expected
/// and what came back.
pub fn check(store: &Store<()>, actual: &Val, expected: &WastRet<'_>) -> Result<()> {
    let expected = match expected {
        WastRet::Core(core) => core,
        _ => bail!("component-model results are not supported"),
    };
    if matches(store, actual, expected)? {
        Ok(())
    } else {
        bail!(
            "expected {}, got {}",
            describe_expected(expected),
            describe(store, actual, Some(expected))
        )
    }
}

fn matches(store: &Store<()>, actual: &Val, expected: &WastRetCore<'_>) -> Result<bool> {
    Ok(match (expected, actual) {
        (WastRetCore::Either(options), _) => {
            for option in options {
                if matches(store, actual, option)? {
                    return Ok(true);
                }
            }
            false
        }
        (WastRetCore::I32(e), Val::I32(a)) => e == a,
        (WastRetCore::I64(e), Val::I64(a)) => e == a,
        (WastRetCore::F32(e), Val::F32(a)) => f32_matches(e, *a),
        (WastRetCore::F64(e), Val::F64(a)) => f64_matches(e, *a),
        (WastRetCore::V128(e), Val::V128(a)) => v128_matches(e, a.as_u128()),
        (WastRetCore::RefNull(ty), Val::FuncRef(f)) => {
            f.is_none()
                && null_type_is(
                    ty.as_ref(),
                    &[AbstractHeapType::Func, AbstractHeapType::NoFunc],
                )
        }
        (WastRetCore::RefNull(ty), Val::ExternRef(r)) => {
            r.is_none()
                && null_type_is(
                    ty.as_ref(),
                    &[AbstractHeapType::Extern, AbstractHeapType::NoExtern],
                )
        }
        (WastRetCore::RefNull(ty), Val::ExnRef(r)) => {
            r.is_none()
                && null_type_is(
                    ty.as_ref(),
                    &[AbstractHeapType::Exn, AbstractHeapType::NoExn],
                )
        }
        (WastRetCore::RefNull(ty), Val::AnyRef(r)) => {
            r.is_none()
                && null_type_is(
                    ty.as_ref(),
                    &[
                        AbstractHeapType::Any,
                        AbstractHeapType::Eq,
                        AbstractHeapType::I31,
                        AbstractHeapType::None,
                    ],
                )
        }
        // Every non-null internal reference here is an `i31`, a value of
        // `any`, `eq` and `i31` alike.
        (WastRetCore::RefI31 | WastRetCore::RefEq | WastRetCore::RefAny, Val::AnyRef(Some(r))) => {
            r.is_i31(store)?
        }
        // The index in `(ref.func $f)` cannot be observed through the
        // embedding API, so any non-null function reference matches.
        (WastRetCore::RefFunc(_), Val::FuncRef(f)) => f.is_some(),
        (WastRetCore::RefExtern(None), Val::ExternRef(r)) => r.is_some(),
        (WastRetCore::RefExtern(Some(n)), Val::ExternRef(Some(r))) => {
            extern_payload(store, r)? == Some(*n)
        }
        _ => false,
    })
}

/// The `u32` that the harness put into an `externref`, if it holds one.
fn extern_payload(store: &Store<()>, r: &Rooted<ExternRef>) -> Result<Option<u32>> {
    Ok(r.data(store)?
        .and_then(|d| d.downcast_ref::<u32>())
        .copied())
}

fn describe_expected(expected: &WastRetCore<'_>) -> String {
    match expected {
        WastRetCore::I32(v) => format!("i32 {v} ({:#x})", *v as u32),
        WastRetCore::I64(v) => format!("i64 {v} ({:#x})", *v as u64),
        WastRetCore::F32(p) => format!("f32 {}", describe_f32_pattern(p)),
        WastRetCore::F64(p) => format!("f64 {}", describe_f64_pattern(p)),
        WastRetCore::V128(p) => format!("v128 {}", describe_v128_pattern(p)),
        WastRetCore::RefNull(None) => "a null reference".to_string(),
        WastRetCore::RefNull(Some(ty)) => match abstract_heap_type(ty) {
            Some(AbstractHeapType::Func) => "ref.null func".to_string(),
            Some(AbstractHeapType::Extern) => "ref.null extern".to_string(),
            _ => format!("ref.null {ty:?}"),
        },
        WastRetCore::RefFunc(_) => "a non-null funcref".to_string(),
        WastRetCore::RefExtern(None) => "a non-null externref".to_string(),
        WastRetCore::RefExtern(Some(n)) => format!("ref.extern {n}"),
        WastRetCore::Either(options) => {
            let options: Vec<_> = options.iter().map(describe_expected).collect();
            format!("either of [{}]", options.join(", "))
        }
        other => format!("{other:?}"),
    }
}

fn describe_f32_pattern(p: &NanPattern<wast::token::F32>) -> String {
    match p {
        NanPattern::CanonicalNan => "nan:canonical".to_string(),
        NanPattern::ArithmeticNan => "nan:arithmetic".to_string(),
        NanPattern::Value(v) => describe_f32(v.bits),
    }
}

fn describe_f64_pattern(p: &NanPattern<wast::token::F64>) -> String {
    match p {
        NanPattern::CanonicalNan => "nan:canonical".to_string(),
        NanPattern::ArithmeticNan => "nan:arithmetic".to_string(),
        NanPattern::Value(v) => describe_f64(v.bits),
    }
}

fn describe_f32(bits: u32) -> String {
    format!("{} ({bits:#010x})", f32::from_bits(bits))
}

fn describe_f64(bits: u64) -> String {
    format!("{} ({bits:#018x})", f64::from_bits(bits))
}

fn describe_v128_pattern(p: &V128Pattern) -> String {
    fn join<T>(items: &[T], f: impl Fn(&T) -> String) -> String {
        items.iter().map(f).collect::<Vec<_>>().join(" ")
    }
    match p {
        V128Pattern::I8x16(l) => format!("i8x16 {}", join(l, |v| v.to_string())),
        V128Pattern::I16x8(l) => format!("i16x8 {}", join(l, |v| v.to_string())),
        V128Pattern::I32x4(l) => format!("i32x4 {}", join(l, |v| v.to_string())),
        V128Pattern::I64x2(l) => format!("i64x2 {}", join(l, |v| v.to_string())),
        V128Pattern::F32x4(l) => format!("f32x4 {}", join(l, describe_f32_pattern)),
        V128Pattern::F64x2(l) => format!("f64x2 {}", join(l, describe_f64_pattern)),
    }
}

/// Renders a value; a vector is shown in the lane shape of `like` so that
/// it can be compared with the expectation by eye.
pub fn describe(store: &Store<()>, val: &Val, like: Option<&WastRetCore<'_>>) -> String {
    match val {
        Val::I32(v) => format!("i32 {v} ({:#x})", *v as u32),
        Val::I64(v) => format!("i64 {v} ({:#x})", *v as u64),
        Val::F32(bits) => format!("f32 {}", describe_f32(*bits)),
        Val::F64(bits) => format!("f64 {}", describe_f64(*bits)),
        Val::V128(v) => describe_v128(v.as_u128(), like),
        Val::FuncRef(None) => "ref.null func".to_string(),
        Val::FuncRef(Some(_)) => "a non-null funcref".to_string(),
        Val::ExternRef(None) => "ref.null extern".to_string(),
        Val::ExternRef(Some(r)) => match extern_payload(store, r) {
            Ok(Some(n)) => format!("ref.extern {n}"),
            Ok(None) => "an externref without a u32 payload".to_string(),
            Err(e) => format!("an unreadable externref ({e})"),
        },
        #[allow(unreachable_patterns, reason = "other runtimes have fewer variants")]
        other => format!("{other:?}"),
    }
}

fn describe_v128(bits: u128, like: Option<&WastRetCore<'_>>) -> String {
    let bytes = bits.to_le_bytes();
    let mut out = String::new();
    match like {
        Some(WastRetCore::V128(V128Pattern::I8x16(_))) => {
            out.push_str("i8x16");
            for b in bytes {
                write!(out, " {}", b as i8).unwrap();
            }
        }
        Some(WastRetCore::V128(V128Pattern::I16x8(_))) => {
            out.push_str("i16x8");
            for l in lanes::<2>(&bytes) {
                write!(out, " {}", l as u16 as i16).unwrap();
            }
        }
        Some(WastRetCore::V128(V128Pattern::I64x2(_))) => {
            out.push_str("i64x2");
            for l in lanes::<8>(&bytes) {
                write!(out, " {}", l as i64).unwrap();
            }
        }
        Some(WastRetCore::V128(V128Pattern::F32x4(_))) => {
            out.push_str("f32x4");
            for l in lanes::<4>(&bytes) {
                write!(out, " {}", describe_f32(l as u32)).unwrap();
            }
        }
        Some(WastRetCore::V128(V128Pattern::F64x2(_))) => {
            out.push_str("f64x2");
            for l in lanes::<8>(&bytes) {
                write!(out, " {}", describe_f64(l)).unwrap();
            }
        }
        _ => {
            out.push_str("i32x4");
            for l in lanes::<4>(&bytes) {
                write!(out, " {}", l as u32 as i32).unwrap();
            }
        }
    }
    format!("v128 {out} ({bits:#034x})")
}
