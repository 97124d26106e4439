//! The engine-independent half of the component `.wast` runner: the
//! per-file header flags, encoding modules and components, and matching
//! results and error messages. Engines hand their values over as [`Value`]
//! and [`CoreValue`], so that one matcher serves every engine.

use crate::core_values::{f32_matches, f64_matches, null_type_is, v128_matches};
use wast::component::WastVal;
use wast::core::{AbstractHeapType, WastRetCore};
use wast::parser::{self, ParseBuffer};
use wast::{QuoteWat, QuoteWatTest, Wat};

/// A core-wasm proposal that a file's `;;! name = bool` header switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoreFeature {
    /// `multi_memory`
    MultiMemory,
    /// `reference_types`
    ReferenceTypes,
    /// `bulk_memory`
    BulkMemory,
    /// `function_references`
    FunctionReferences,
    /// `gc`
    Gc,
    /// `exceptions`
    Exceptions,
    /// `memory64`
    Memory64,
    /// `simd`
    Simd,
    /// `tail_call`
    TailCall,
    /// `threads`
    Threads,
}

/// The core-wasm features a file's header asks for, in order.
///
/// Upstream's own test harness reads the same `;;!` lines and applies them
/// to its `Config`; the core ones are applied here too, so that a file gets
/// what it declares on every engine. The component-model keys (`async`,
/// maps, fixed-length lists, ...) are not applied: the files that need a
/// component proposal upstream 48 leaves off are skipped instead, and
/// `hogs_memory` only tunes upstream's CI.
pub fn header_features(text: &str) -> Vec<(CoreFeature, bool)> {
    let mut features = Vec::new();
    for line in text.lines() {
        let Some(flag) = line.strip_prefix(";;!") else {
            // The header is the run of `;;!` lines at the top.
            break;
        };
        let Some((key, value)) = flag.split_once('=') else {
            continue;
        };
        let enable = match value.trim() {
            "true" => true,
            "false" => false,
            _ => continue,
        };
        let feature = match key.trim() {
            "multi_memory" => CoreFeature::MultiMemory,
            "reference_types" => CoreFeature::ReferenceTypes,
            "bulk_memory" => CoreFeature::BulkMemory,
            "function_references" => CoreFeature::FunctionReferences,
            "gc" => CoreFeature::Gc,
            "exceptions" => CoreFeature::Exceptions,
            "memory64" => CoreFeature::Memory64,
            "simd" => CoreFeature::Simd,
            "tail_call" => CoreFeature::TailCall,
            "threads" => CoreFeature::Threads,
            _ => continue,
        };
        features.push((feature, enable));
    }
    features
}

/// The binary form of a module or component directive.
pub enum Binary {
    /// The bytes to compile.
    Bytes(Vec<u8>),
    /// Quoted text that does not parse; the parser's message, which is
    /// what `assert_malformed` matches (an engine given this text would
    /// report the same parse error).
    Unparsable(String),
}

/// Encodes a directive's module or component.
///
/// A module written out as text (not quoted) that cannot be encoded is a
/// mistake in the file rather than an expected failure, and is an `Err`
/// even where the directive expects an error: upstream's runner rejects
/// the whole file in that case.
pub fn binary(module: &mut QuoteWat<'_>) -> Result<Binary, String> {
    match module.to_test() {
        Ok(QuoteWatTest::Binary(bytes)) => Ok(Binary::Bytes(bytes)),
        Ok(QuoteWatTest::Text(text)) => Ok(match parse_text(&text) {
            Ok(bytes) => Binary::Bytes(bytes),
            Err(message) => Binary::Unparsable(message),
        }),
        Err(e) => Err(format!("cannot encode the module: {e}")),
    }
}

/// Encodes a `Wat` that the directive has as its own (not quoted) text.
pub fn encode_wat(wat: &mut Wat<'_>) -> Result<Vec<u8>, String> {
    wat.encode()
        .map_err(|e| format!("cannot encode the module: {e}"))
}

/// Parses and encodes the text of a quoted module or component, as an
/// engine's text front end would.
pub fn parse_text(text: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(text).map_err(|e| format!("input is not UTF-8: {e}"))?;
    let buf = ParseBuffer::new(text).map_err(|e| e.to_string())?;
    let mut wat = parser::parse::<Wat<'_>>(&buf).map_err(|e| e.to_string())?;
    wat.encode().map_err(|e| e.to_string())
}

/// Whether `bytes` start like a core module (version 1, layer 0) rather
/// than a component: upstream's runner picks `Module::new` or
/// `Component::new` by this test, so a malformed binary goes to the
/// component decoder, whose message the file then has to match.
pub fn is_core_wasm(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..4] == *b"\0asm" && bytes[4..8] == [1, 0, 0, 0]
}

/// Whether an error says what an `assert_invalid`, `assert_malformed` or
/// `assert_unlinkable` expects. `actual` is the error's `{:?}` rendering,
/// which holds the whole cause chain: the message the file names is often
/// a cause of a higher-level error.
pub fn error_mentions(actual: &str, expected: &str) -> bool {
    actual.contains(expected)
}

/// Whether a trap says what an `assert_trap` expects, with the same
/// allowances as upstream's runner: the engine's wording differs from the
/// reference interpreter's in a few known places.
pub fn trap_mentions(actual: &str, expected: &str) -> bool {
    actual.contains(expected)
        // The reference interpreter names the element; the engine does not.
        || (expected.contains("uninitialized element 2")
            && actual.contains("uninitialized element"))
        || (expected.contains("null function")
            && (actual.contains("uninitialized element") || actual.contains("null reference")))
        || (expected.contains("null")
            && expected.contains("reference")
            && actual.contains("null reference"))
        // The component-model tests say which lowering could not write or
        // read memory in more detail than the engine does.
        || (expected.contains("cannot write") && actual.contains("cannot write"))
        || (expected.contains("cannot read") && actual.contains("cannot read"))
}

/// A component value as the engine returned it, in a form that does not
/// depend on the engine's types.
#[derive(Debug)]
pub enum Value {
    Bool(bool),
    S8(i8),
    U8(u8),
    S16(i16),
    U16(u16),
    S32(i32),
    U32(u32),
    S64(i64),
    U64(u64),
    /// The bits of an `f32`, so that NaN payloads survive.
    Float32(u32),
    /// The bits of an `f64`.
    Float64(u64),
    Char(char),
    String(String),
    List(Vec<Value>),
    Record(Vec<(String, Value)>),
    Tuple(Vec<Value>),
    Variant(String, Option<Box<Value>>),
    Enum(String),
    Option(Option<Box<Value>>),
    Result(Result<Option<Box<Value>>, Option<Box<Value>>>),
    Flags(Vec<String>),
    /// Anything the text format cannot write down (resources, streams,
    /// ...), shown as the engine renders it.
    Other(String),
}

/// Checks one result of an `assert_return` against the expected value.
/// Floats compare bit for bit: the component text format writes exact
/// values only, and `f32.const nan` is a NaN with the canonical payload.
pub fn match_value(expected: &WastVal<'_>, actual: &Value) -> Result<(), String> {
    let ok = match (expected, actual) {
        (WastVal::Bool(e), Value::Bool(a)) => e == a,
        (WastVal::S8(e), Value::S8(a)) => e == a,
        (WastVal::U8(e), Value::U8(a)) => e == a,
        (WastVal::S16(e), Value::S16(a)) => e == a,
        (WastVal::U16(e), Value::U16(a)) => e == a,
        (WastVal::S32(e), Value::S32(a)) => e == a,
        (WastVal::U32(e), Value::U32(a)) => e == a,
        (WastVal::S64(e), Value::S64(a)) => e == a,
        (WastVal::U64(e), Value::U64(a)) => e == a,
        (WastVal::F32(e), Value::Float32(a)) => e.bits == *a,
        (WastVal::F64(e), Value::Float64(a)) => e.bits == *a,
        (WastVal::Char(e), Value::Char(a)) => e == a,
        (WastVal::String(e), Value::String(a)) => e == a,
        (WastVal::Enum(e), Value::Enum(a)) => e == a,
        (WastVal::Flags(e), Value::Flags(a)) => {
            // Flags are a set: the order in which they are written is not
            // part of the value.
            let mut e: Vec<&str> = e.to_vec();
            let mut a: Vec<&str> = a.iter().map(String::as_str).collect();
            e.sort_unstable();
            a.sort_unstable();
            e == a
        }
        (WastVal::List(e), Value::List(a)) | (WastVal::Tuple(e), Value::Tuple(a)) => {
            if e.len() != a.len() {
                return Err(format!(
                    "expected {} elements, got {}: {}",
                    e.len(),
                    a.len(),
                    show(actual)
                ));
            }
            for (i, (e, a)) in e.iter().zip(a).enumerate() {
                match_value(e, a).map_err(|why| format!("element {i}: {why}"))?;
            }
            true
        }
        (WastVal::Record(e), Value::Record(a)) => {
            if e.len() != a.len() {
                return Err(format!(
                    "expected {} fields, got {}: {}",
                    e.len(),
                    a.len(),
                    show(actual)
                ));
            }
            for ((e_name, e), (a_name, a)) in e.iter().zip(a) {
                if e_name != a_name {
                    return Err(format!("expected field `{e_name}`, got `{a_name}`"));
                }
                match_value(e, a).map_err(|why| format!("field `{e_name}`: {why}"))?;
            }
            true
        }
        (WastVal::Variant(e_case, e), Value::Variant(a_case, a)) => {
            if e_case != a_case {
                return Err(format!("expected case `{e_case}`, got `{a_case}`"));
            }
            return match_payload(e_case, e.as_deref(), a.as_deref());
        }
        (WastVal::Option(e), Value::Option(a)) => match (e, a) {
            (None, None) => true,
            (Some(e), Some(a)) => return match_value(e, a).map_err(|why| format!("some: {why}")),
            _ => false,
        },
        (WastVal::Result(e), Value::Result(a)) => match (e, a) {
            (Ok(e), Ok(a)) => return match_payload("ok", e.as_deref(), a.as_deref()),
            (Err(e), Err(a)) => return match_payload("error", e.as_deref(), a.as_deref()),
            _ => false,
        },
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "expected {}, got {}",
            show_expected(expected),
            show(actual)
        ))
    }
}

fn match_payload(
    case: &str,
    expected: Option<&WastVal<'_>>,
    actual: Option<&Value>,
) -> Result<(), String> {
    match (expected, actual) {
        (None, None) => Ok(()),
        (Some(e), Some(a)) => match_value(e, a).map_err(|why| format!("case `{case}`: {why}")),
        (Some(_), None) => Err(format!("expected a payload for case `{case}`, got none")),
        (None, Some(a)) => Err(format!(
            "expected no payload for case `{case}`, got {}",
            show(a)
        )),
    }
}

/// Renders an expected value in the text format's own notation.
pub fn show_expected(v: &WastVal<'_>) -> String {
    let join = |items: &[WastVal<'_>]| {
        items
            .iter()
            .map(show_expected)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let payload = |p: &Option<Box<WastVal<'_>>>| match p {
        Some(v) => format!(" {}", show_expected(v)),
        None => String::new(),
    };
    match v {
        WastVal::Bool(b) => format!("(bool.const {b})"),
        WastVal::S8(n) => format!("(s8.const {n})"),
        WastVal::U8(n) => format!("(u8.const {n})"),
        WastVal::S16(n) => format!("(s16.const {n})"),
        WastVal::U16(n) => format!("(u16.const {n})"),
        WastVal::S32(n) => format!("(s32.const {n})"),
        WastVal::U32(n) => format!("(u32.const {n})"),
        WastVal::S64(n) => format!("(s64.const {n})"),
        WastVal::U64(n) => format!("(u64.const {n})"),
        WastVal::F32(f) => format!("(f32.const {} {:#010x})", f32::from_bits(f.bits), f.bits),
        WastVal::F64(f) => format!("(f64.const {} {:#018x})", f64::from_bits(f.bits), f.bits),
        WastVal::Char(c) => format!("(char.const {c:?})"),
        WastVal::String(s) => format!("(str.const {s:?})"),
        WastVal::List(items) => format!("(list.const {})", join(items)),
        WastVal::Tuple(items) => format!("(tuple.const {})", join(items)),
        WastVal::Record(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(name, v)| format!("(field {name:?} {})", show_expected(v)))
                .collect();
            format!("(record.const {})", fields.join(" "))
        }
        WastVal::Variant(case, p) => format!("(variant.const {case:?}{})", payload(p)),
        WastVal::Enum(case) => format!("(enum.const {case:?})"),
        WastVal::Option(None) => "(option.none)".to_string(),
        WastVal::Option(Some(v)) => format!("(option.some {})", show_expected(v)),
        WastVal::Result(Ok(p)) => format!("(result.ok{})", payload(p)),
        WastVal::Result(Err(p)) => format!("(result.err{})", payload(p)),
        WastVal::Flags(names) => {
            let names: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
            format!("(flags.const {})", names.join(" "))
        }
    }
}

/// Renders an actual value in the notation of [`show_expected`], so that
/// the two can be compared by eye.
pub fn show(v: &Value) -> String {
    let join = |items: &[Value]| items.iter().map(show).collect::<Vec<_>>().join(" ");
    let payload = |p: &Option<Box<Value>>| match p {
        Some(v) => format!(" {}", show(v)),
        None => String::new(),
    };
    match v {
        Value::Bool(b) => format!("(bool.const {b})"),
        Value::S8(n) => format!("(s8.const {n})"),
        Value::U8(n) => format!("(u8.const {n})"),
        Value::S16(n) => format!("(s16.const {n})"),
        Value::U16(n) => format!("(u16.const {n})"),
        Value::S32(n) => format!("(s32.const {n})"),
        Value::U32(n) => format!("(u32.const {n})"),
        Value::S64(n) => format!("(s64.const {n})"),
        Value::U64(n) => format!("(u64.const {n})"),
        Value::Float32(bits) => format!("(f32.const {} {bits:#010x})", f32::from_bits(*bits)),
        Value::Float64(bits) => format!("(f64.const {} {bits:#018x})", f64::from_bits(*bits)),
        Value::Char(c) => format!("(char.const {c:?})"),
        Value::String(s) => format!("(str.const {s:?})"),
        Value::List(items) => format!("(list.const {})", join(items)),
        Value::Tuple(items) => format!("(tuple.const {})", join(items)),
        Value::Record(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(name, v)| format!("(field {name:?} {})", show(v)))
                .collect();
            format!("(record.const {})", fields.join(" "))
        }
        Value::Variant(case, p) => format!("(variant.const {case:?}{})", payload(p)),
        Value::Enum(case) => format!("(enum.const {case:?})"),
        Value::Option(None) => "(option.none)".to_string(),
        Value::Option(Some(v)) => format!("(option.some {})", show(v)),
        Value::Result(Ok(p)) => format!("(result.ok{})", payload(p)),
        Value::Result(Err(p)) => format!("(result.err{})", payload(p)),
        Value::Flags(names) => {
            let names: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
            format!("(flags.const {})", names.join(" "))
        }
        Value::Other(debug) => debug.clone(),
    }
}

/// A core value as the engine returned it.
pub enum CoreValue {
    I32(i32),
    I64(i64),
    /// The bits of an `f32`.
    F32(u32),
    /// The bits of an `f64`.
    F64(u64),
    V128(u128),
    /// A `funcref`; `true` if null.
    FuncRef(bool),
    /// An `externref`; `true` if null.
    ExternRef(bool),
    /// Any other reference, shown as the engine renders it.
    Other(String),
}

/// Checks one result of a core `assert_return`, with the spec's NaN
/// patterns.
pub fn match_core(expected: &WastRetCore<'_>, actual: &CoreValue) -> Result<(), String> {
    if core_matches(expected, actual)? {
        Ok(())
    } else {
        Err(format!("expected {expected:?}, got {}", show_core(actual)))
    }
}

/// Renders a core value in the text format's notation.
pub fn show_core(v: &CoreValue) -> String {
    match v {
        CoreValue::I32(n) => format!("(i32.const {n} {:#x})", *n as u32),
        CoreValue::I64(n) => format!("(i64.const {n} {:#x})", *n as u64),
        CoreValue::F32(bits) => format!("(f32.const {} {bits:#010x})", f32::from_bits(*bits)),
        CoreValue::F64(bits) => format!("(f64.const {} {bits:#018x})", f64::from_bits(*bits)),
        CoreValue::V128(bits) => format!("v128 {bits:#034x}"),
        CoreValue::FuncRef(true) => "(ref.null func)".to_string(),
        CoreValue::FuncRef(false) => "a non-null funcref".to_string(),
        CoreValue::ExternRef(true) => "(ref.null extern)".to_string(),
        CoreValue::ExternRef(false) => "a non-null externref".to_string(),
        CoreValue::Other(debug) => debug.clone(),
    }
}

fn core_matches(expected: &WastRetCore<'_>, actual: &CoreValue) -> Result<bool, String> {
    Ok(match (expected, actual) {
        (WastRetCore::Either(options), _) => {
            for option in options {
                if core_matches(option, actual)? {
                    return Ok(true);
                }
            }
            false
        }
        (WastRetCore::I32(e), CoreValue::I32(a)) => e == a,
        (WastRetCore::I64(e), CoreValue::I64(a)) => e == a,
        (WastRetCore::F32(e), CoreValue::F32(a)) => f32_matches(e, *a),
        (WastRetCore::F64(e), CoreValue::F64(a)) => f64_matches(e, *a),
        (WastRetCore::V128(e), CoreValue::V128(a)) => v128_matches(e, *a),
        (WastRetCore::RefNull(ty), CoreValue::FuncRef(null)) => {
            *null
                && null_type_is(
                    ty.as_ref(),
                    &[AbstractHeapType::Func, AbstractHeapType::NoFunc],
                )
        }
        (WastRetCore::RefNull(ty), CoreValue::ExternRef(null)) => {
            *null
                && null_type_is(
                    ty.as_ref(),
                    &[AbstractHeapType::Extern, AbstractHeapType::NoExtern],
                )
        }
        // The index in `(ref.func $f)` cannot be observed through the
        // embedding API, so any non-null function reference matches.
        (WastRetCore::RefFunc(_), CoreValue::FuncRef(null)) => !*null,
        (WastRetCore::RefExtern(None), CoreValue::ExternRef(null)) => !*null,
        (
            WastRetCore::RefExtern(Some(_))
            | WastRetCore::RefHost(_)
            | WastRetCore::RefAny
            | WastRetCore::RefEq
            | WastRetCore::RefArray
            | WastRetCore::RefStruct
            | WastRetCore::RefI31
            | WastRetCore::RefI31Shared,
            _,
        ) => return Err(format!("unsupported expected core value {expected:?}")),
        _ => false,
    })
}

/// The `simple-module` that the host's `host` instance provides: a global
/// `g` of 100 and a function `f` returning 101, which `instance.wast`
/// checks.
pub const SIMPLE_MODULE: &str = r#"
    (module
        (global (export "g") i32 i32.const 100)
        (func (export "f") (result i32) i32.const 101))
"#;
