//! Random interface types, values of them, and the whole test case an
//! input becomes ([`Case`]).

use arbitrary::{Result, Unstructured};

/// An interface type. Compound types name their members by position:
/// record fields `f{i}`, variant cases `c{i}`, enum cases `e{i}`, flags
/// `g{i}` ([`field`], [`case`], [`enum_case`], [`flag`]).
#[derive(Debug, Clone, PartialEq)]
#[allow(
    missing_docs,
    reason = "each variant is the interface type of its name"
)]
pub enum Ty {
    Bool,
    S8,
    U8,
    S16,
    U16,
    S32,
    U32,
    S64,
    U64,
    F32,
    F64,
    Char,
    String,
    List(Box<Ty>),
    /// At least one field.
    Record(Vec<Ty>),
    /// At least one member.
    Tuple(Vec<Ty>),
    /// At least one case; `None` is a case without payload.
    Variant(Vec<Option<Ty>>),
    /// The number of cases, at least one.
    Enum(u32),
    Option(Box<Ty>),
    Result(Option<Box<Ty>>, Option<Box<Ty>>),
    /// The number of flags, 1 to 32 (the validator refuses more).
    Flags(u32),
}

/// The name of record field `i`.
pub fn field(i: usize) -> String {
    format!("f{i}")
}
/// The name of variant case `i`.
pub fn case(i: usize) -> String {
    format!("c{i}")
}
/// The name of enum case `i`.
pub fn enum_case(i: usize) -> String {
    format!("e{i}")
}
/// The name of flag `i`.
pub fn flag(i: usize) -> String {
    format!("g{i}")
}

/// A core Wasm value type of the flat (canonical ABI) representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "the core types of their names")]
pub enum Core {
    I32,
    I64,
    F32,
    F64,
}

impl Core {
    /// The type's name in the text format.
    pub fn name(self) -> &'static str {
        match self {
            Core::I32 => "i32",
            Core::I64 => "i64",
            Core::F32 => "f32",
            Core::F64 => "f64",
        }
    }

    /// The canonical ABI's `join` of two flat types that share a slot in a
    /// variant's flattening.
    fn join(self, other: Core) -> Core {
        match (self, other) {
            (a, b) if a == b => a,
            (Core::I32, Core::F32) | (Core::F32, Core::I32) => Core::I32,
            _ => Core::I64,
        }
    }
}

/// Most core values a function's parameters may flatten to before they go
/// through memory instead.
pub const MAX_FLAT_PARAMS: usize = 16;
/// Most core values a function's results may flatten to before they go
/// through memory instead.
pub const MAX_FLAT_RESULTS: usize = 1;

impl Ty {
    /// The canonical ABI's flattening of the type, appended to `out`.
    pub fn flatten(&self, out: &mut Vec<Core>) {
        match self {
            Ty::Bool
            | Ty::S8
            | Ty::U8
            | Ty::S16
            | Ty::U16
            | Ty::S32
            | Ty::U32
            | Ty::Char
            | Ty::Enum(_) => out.push(Core::I32),
            Ty::S64 | Ty::U64 => out.push(Core::I64),
            Ty::F32 => out.push(Core::F32),
            Ty::F64 => out.push(Core::F64),
            Ty::String | Ty::List(_) => out.extend([Core::I32, Core::I32]),
            Ty::Record(ts) | Ty::Tuple(ts) => ts.iter().for_each(|t| t.flatten(out)),
            Ty::Flags(n) => out.extend((0..n.div_ceil(32)).map(|_| Core::I32)),
            Ty::Variant(cases) => flatten_variant(cases.iter().map(Option::as_ref), out),
            Ty::Option(t) => flatten_variant([None, Some(&**t)].into_iter(), out),
            Ty::Result(ok, err) => {
                flatten_variant([ok.as_deref(), err.as_deref()].into_iter(), out)
            }
        }
    }

    /// The flattening as a new vector.
    pub fn flat(&self) -> Vec<Core> {
        let mut out = Vec::new();
        self.flatten(&mut out);
        out
    }
}

fn flatten_variant<'a>(cases: impl Iterator<Item = Option<&'a Ty>>, out: &mut Vec<Core>) {
    let mut joined: Vec<Core> = Vec::new();
    for payload in cases.flatten() {
        for (i, c) in payload.flat().into_iter().enumerate() {
            match joined.get_mut(i) {
                Some(slot) => *slot = slot.join(c),
                None => joined.push(c),
            }
        }
    }
    out.push(Core::I32);
    out.extend(joined);
}

/// A function signature: named parameters `p{i}` and at most one result.
#[derive(Debug, Clone)]
pub struct Sig {
    /// The parameter types.
    pub params: Vec<Ty>,
    /// The result type, if any.
    pub result: Option<Ty>,
}

impl Sig {
    /// The flattened parameters, all of them (before the 16-value limit).
    pub fn flat_params(&self) -> Vec<Core> {
        let mut out = Vec::new();
        self.params.iter().for_each(|t| t.flatten(&mut out));
        out
    }

    /// The flattened result, before the one-value limit.
    pub fn flat_results(&self) -> Vec<Core> {
        self.result.as_ref().map_or_else(Vec::new, Ty::flat)
    }

    /// Whether the parameters go through memory (a pointer) rather than
    /// flat.
    pub fn params_indirect(&self) -> bool {
        self.flat_params().len() > MAX_FLAT_PARAMS
    }

    /// Whether the result goes through memory (a return pointer).
    pub fn results_indirect(&self) -> bool {
        self.flat_results().len() > MAX_FLAT_RESULTS
    }
}

/// How many type nodes one signature may have in all.
const TYPE_FUEL: u32 = 40;
/// How deep types nest.
const MAX_DEPTH: u32 = 3;

/// A random type, at most `depth` levels of compound types deep.
pub fn ty(u: &mut Unstructured<'_>, depth: u32, fuel: &mut u32) -> Result<Ty> {
    *fuel = fuel.saturating_sub(1);
    let max = if depth == 0 || *fuel == 0 { 12 } else { 20 };
    let d = depth.saturating_sub(1);
    Ok(match u.int_in_range(0..=max)? {
        0 => Ty::Bool,
        1 => Ty::S8,
        2 => Ty::U8,
        3 => Ty::S16,
        4 => Ty::U16,
        5 => Ty::S32,
        6 => Ty::U32,
        7 => Ty::S64,
        8 => Ty::U64,
        9 => Ty::F32,
        10 => Ty::F64,
        11 => Ty::Char,
        12 => Ty::String,
        13 => Ty::List(Box::new(ty(u, d, fuel)?)),
        14 => Ty::Record(members(u, d, fuel)?),
        15 => Ty::Tuple(members(u, d, fuel)?),
        16 => {
            let n = u.int_in_range(1..=6)?;
            let mut cases = Vec::new();
            for _ in 0..n {
                cases.push(if u.arbitrary()? {
                    Some(ty(u, d, fuel)?)
                } else {
                    None
                });
            }
            // Now and then more than 256 cases: a 2-byte discriminant.
            if u.ratio(1, 16)? {
                cases.resize(u.int_in_range(250..=300)?, None);
            }
            Ty::Variant(cases)
        }
        17 => Ty::Enum(if u.ratio(1, 8)? {
            u.int_in_range(250..=300)?
        } else {
            u.int_in_range(1..=8)?
        }),
        18 => Ty::Option(Box::new(ty(u, d, fuel)?)),
        19 => {
            let ok = if u.arbitrary()? {
                Some(Box::new(ty(u, d, fuel)?))
            } else {
                None
            };
            let err = if u.arbitrary()? {
                Some(Box::new(ty(u, d, fuel)?))
            } else {
                None
            };
            Ty::Result(ok, err)
        }
        _ => Ty::Flags(u.int_in_range(1..=32)?),
    })
}

fn members(u: &mut Unstructured<'_>, depth: u32, fuel: &mut u32) -> Result<Vec<Ty>> {
    let n = u.int_in_range(1..=5)?;
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(ty(u, depth, fuel)?);
    }
    Ok(out)
}

/// A random signature; a quarter of them have enough parameters to
/// flatten to more than 16 values.
pub fn sig(u: &mut Unstructured<'_>) -> Result<Sig> {
    let mut fuel = TYPE_FUEL;
    let n = if u.ratio(1, 4)? {
        u.int_in_range(9..=20)?
    } else {
        u.int_in_range(0..=4)?
    };
    let mut params = Vec::new();
    for _ in 0..n {
        params.push(ty(u, MAX_DEPTH, &mut fuel)?);
    }
    let result = if u.ratio(5, 6)? {
        Some(ty(u, MAX_DEPTH, &mut fuel)?)
    } else {
        None
    };
    Ok(Sig { params, result })
}

/// A component value in a form both engines' `Val` convert to and from:
/// the same shape, with floats as their bits so that NaN payloads compare.
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs, reason = "each variant is the `Val` variant of its name")]
pub enum V {
    Bool(bool),
    S8(i8),
    U8(u8),
    S16(i16),
    U16(u16),
    S32(i32),
    U32(u32),
    S64(i64),
    U64(u64),
    /// The bits of an `f32`.
    F32(u32),
    /// The bits of an `f64`.
    F64(u64),
    Char(char),
    String(String),
    List(Vec<V>),
    Record(Vec<(String, V)>),
    Tuple(Vec<V>),
    Variant(String, Option<Box<V>>),
    Enum(String),
    Option(Option<Box<V>>),
    Result(Result2),
    Flags(Vec<String>),
    /// A value neither side should produce (a resource, a future...): its
    /// kind.
    Unexpected(String),
}

/// The payload of [`V::Result`].
pub type Result2 = std::result::Result<Option<Box<V>>, Option<Box<V>>>;

/// Characters drawn for strings: ASCII, Latin-1, other BMP, astral, NUL.
const CHARS: &[char] = &[
    'a',
    'Z',
    '0',
    ' ',
    '\0',
    '\u{7f}',
    '\u{80}',
    'é',
    'ÿ',
    'Ā',
    'ሴ',
    '中',
    '\u{d7ff}',
    '\u{e000}',
    '\u{fffd}',
    '\u{ffff}',
    '😀',
    '\u{10000}',
    '\u{10ffff}',
];

fn char_(u: &mut Unstructured<'_>) -> Result<char> {
    if u.ratio(3, 4)? {
        Ok(*u.choose(CHARS)?)
    } else {
        Ok(char::from_u32(u.int_in_range(0..=0x10ffff)?).unwrap_or('x'))
    }
}

fn f32_bits(u: &mut Unstructured<'_>) -> Result<u32> {
    Ok(match u.int_in_range(0..=7)? {
        0 => 0x7fc0_0000,                                  // canonical NaN
        1 => 0x7f80_0000 | u.int_in_range(1..=0x7f_ffff)?, // NaN with a payload
        2 => 0x8000_0000,                                  // -0
        3 => 0x7f80_0000,                                  // inf
        4 => 0xff80_0000,                                  // -inf
        5 => 0xffc0_0001,                                  // negative NaN, payload
        _ => u.arbitrary()?,
    })
}

fn f64_bits(u: &mut Unstructured<'_>) -> Result<u64> {
    Ok(match u.int_in_range(0..=7)? {
        0 => 0x7ff8_0000_0000_0000,
        1 => 0x7ff0_0000_0000_0000 | u.int_in_range(1..=0xf_ffff_ffff_ffff)?,
        2 => 0x8000_0000_0000_0000,
        3 => 0x7ff0_0000_0000_0000,
        4 => 0xfff0_0000_0000_0000,
        5 => 0xfff8_0000_0000_0001,
        _ => u.arbitrary()?,
    })
}

/// A random value of type `t`.
pub fn val(u: &mut Unstructured<'_>, t: &Ty) -> Result<V> {
    Ok(match t {
        Ty::Bool => V::Bool(u.arbitrary()?),
        Ty::S8 => V::S8(u.arbitrary()?),
        Ty::U8 => V::U8(u.arbitrary()?),
        Ty::S16 => V::S16(u.arbitrary()?),
        Ty::U16 => V::U16(u.arbitrary()?),
        Ty::S32 => V::S32(u.arbitrary()?),
        Ty::U32 => V::U32(u.arbitrary()?),
        Ty::S64 => V::S64(u.arbitrary()?),
        Ty::U64 => V::U64(u.arbitrary()?),
        Ty::F32 => V::F32(f32_bits(u)?),
        Ty::F64 => V::F64(f64_bits(u)?),
        Ty::Char => V::Char(char_(u)?),
        Ty::String => {
            let n = len(u)?;
            let mut s = String::new();
            for _ in 0..n {
                s.push(char_(u)?);
            }
            V::String(s)
        }
        Ty::List(e) => {
            let n = len(u)?;
            let mut out = Vec::new();
            for _ in 0..n {
                out.push(val(u, e)?);
            }
            V::List(out)
        }
        Ty::Record(fs) => V::Record(
            fs.iter()
                .enumerate()
                .map(|(i, f)| Ok((field(i), val(u, f)?)))
                .collect::<Result<_>>()?,
        ),
        Ty::Tuple(ts) => V::Tuple(ts.iter().map(|t| val(u, t)).collect::<Result<_>>()?),
        Ty::Variant(cases) => {
            let i = u.choose_index(cases.len())?;
            let payload = match &cases[i] {
                Some(p) => Some(Box::new(val(u, p)?)),
                None => None,
            };
            V::Variant(case(i), payload)
        }
        Ty::Enum(n) => V::Enum(enum_case(u.int_in_range(0..=*n - 1)? as usize)),
        Ty::Option(t) => V::Option(if u.arbitrary()? {
            Some(Box::new(val(u, t)?))
        } else {
            None
        }),
        Ty::Result(ok, err) => {
            let side = |u: &mut Unstructured<'_>, t: &Option<Box<Ty>>| -> Result<_> {
                Ok(match t {
                    Some(t) => Some(Box::new(val(u, t)?)),
                    None => None,
                })
            };
            V::Result(if u.arbitrary()? {
                Ok(side(u, ok)?)
            } else {
                Err(side(u, err)?)
            })
        }
        Ty::Flags(n) => {
            let mut set = Vec::new();
            for i in 0..*n as usize {
                if u.arbitrary()? {
                    set.push(flag(i));
                }
            }
            V::Flags(set)
        }
    })
}

/// A list or string length: mostly short, sometimes longer.
fn len(u: &mut Unstructured<'_>) -> Result<usize> {
    if u.ratio(1, 10)? {
        u.int_in_range(5..=40)
    } else {
        u.int_in_range(0..=4)
    }
}

/// A string encoding of `canon lift`/`canon lower`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs, reason = "the encodings of their names")]
pub enum Encoding {
    Utf8,
    Utf16,
    Latin1Utf16,
}

impl Encoding {
    /// The option's text.
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf8",
            Encoding::Utf16 => "utf16",
            Encoding::Latin1Utf16 => "latin1+utf16",
        }
    }

    fn draw(u: &mut Unstructured<'_>) -> Result<Encoding> {
        Ok(*u.choose(&[Encoding::Utf8, Encoding::Utf16, Encoding::Latin1Utf16])?)
    }
}

/// A deliberately wrong value the glue hands on instead of a correct one
/// (so that both engines meet the same invalid guest behaviour).
#[derive(Debug, Clone, Copy)]
pub enum Corrupt {
    /// Flat parameter `index` passed to the import is replaced by `bits`.
    Param {
        /// The flat parameter's index.
        index: usize,
        /// The value, truncated to the parameter's core type.
        bits: u64,
    },
    /// The flat result the export returns is replaced by `bits`.
    Result {
        /// The value, truncated to the result's core type.
        bits: u64,
    },
    /// The byte at `offset` in the return area is overwritten with
    /// `byte` before the export returns it.
    RetArea {
        /// Byte offset into the return area.
        offset: u32,
        /// The byte written.
        byte: u8,
    },
}

/// The options of one function in one layer of forwarders.
#[derive(Debug, Clone)]
pub struct FuncOpts {
    /// `string-encoding` of the `canon lower` of the import.
    pub lower: Encoding,
    /// `string-encoding` of the `canon lift` of the export.
    pub lift: Encoding,
    /// Whether the export has a `post-return` function.
    pub post_return: bool,
    /// An invalid value the glue passes on, if any.
    pub corrupt: Option<Corrupt>,
}

/// One forwarding component: for each function, a core function that
/// passes its arguments to the lowered import and its result back.
#[derive(Debug, Clone)]
pub struct Layer {
    /// The options per function.
    pub funcs: Vec<FuncOpts>,
    /// `realloc` misbehaves on its `n`-th call (1-based): returns an
    /// unaligned pointer (`false`) or one out of bounds (`true`).
    pub realloc_fault: Option<(u32, bool)>,
}

/// What the host function does on one call.
#[derive(Debug, Clone)]
pub enum HostAction {
    /// Returns this result (of the function's result type), or nothing.
    Return(Option<V>),
    /// Returns an error: both engines must trap.
    Error,
    /// Returns a result of the wrong type: both must fail.
    WrongType,
}

/// One call of an export.
#[derive(Debug, Clone)]
pub struct Call {
    /// Which function.
    pub func: usize,
    /// The arguments.
    pub args: Vec<V>,
    /// What the host does when the import is called.
    pub host: HostAction,
}

/// The whole test case.
#[derive(Debug, Clone)]
pub struct Case {
    /// The signatures, each imported as `host-{i}` and exported as
    /// `guest-{i}`.
    pub sigs: Vec<Sig>,
    /// The forwarders, innermost (the one calling the host) first. One
    /// layer: the root component is the forwarder; more: nested
    /// components composed inside the root, each calling the previous.
    pub layers: Vec<Layer>,
    /// The calls, in order.
    pub calls: Vec<Call>,
}

/// Switches that keep the fuzzer away from constructs whose divergences
/// are already reported (`BUGS.md` of the branch that added the target,
/// summarized in docs/fuzzing.md), so that fuzzing goes on finding new
/// ones. All are on by default; `CDIFF_STRICT=1` turns them all off, and
/// `CDIFF_AVOID=name,...` turns on only those named.
#[derive(Debug, Clone, Copy, Default)]
pub struct Avoid {
    /// `corruption`: no deliberately invalid values from the glue or
    /// `realloc`.
    pub corruption: bool,
    /// `calls_after_failure`: no more calls once a call has failed
    /// (upstream refuses every later call into a store whose Wasm has
    /// trapped, with `Trap::CannotEnterComponent`; ours does not: bug 1).
    pub calls_after_failure: bool,
    /// `adapter_traps`: a trap of upstream that ours reports as an error
    /// that is not a `wasmtime::Trap` but carries the trap's message
    /// counts as the same outcome (ours turns a trap of a FACT adapter
    /// module, e.g. an unaligned pointer from `realloc`, into a plain
    /// error: bug 2).
    pub adapter_traps: bool,
}

impl Avoid {
    /// The switches from the environment.
    pub fn from_env() -> Avoid {
        if std::env::var_os("CDIFF_STRICT").is_some_and(|v| v == "1") {
            return Avoid::default();
        }
        let Ok(list) = std::env::var("CDIFF_AVOID") else {
            return Avoid {
                corruption: false,
                calls_after_failure: true,
                adapter_traps: true,
            };
        };
        let has = |name: &str| list.split(',').any(|s| s.trim() == name);
        Avoid {
            corruption: has("corruption"),
            calls_after_failure: has("calls_after_failure"),
            adapter_traps: has("adapter_traps"),
        }
    }
}

/// The test case an input becomes.
pub fn draw_case(u: &mut Unstructured<'_>, avoid: Avoid) -> Result<Case> {
    let nsigs = u.int_in_range(1..=4)?;
    let sigs = (0..nsigs).map(|_| sig(u)).collect::<Result<Vec<_>>>()?;
    let nlayers = if u.arbitrary()? {
        1
    } else {
        u.int_in_range(2..=3)?
    };
    let mut layers = Vec::new();
    for _ in 0..nlayers {
        let mut funcs = Vec::new();
        for s in &sigs {
            // Mostly one encoding per function everywhere, so that strings
            // arrive intact; otherwise the glue hands bytes of one
            // encoding to a lowering that reads another.
            let lower = Encoding::draw(u)?;
            let lift = if u.ratio(3, 4)? {
                lower
            } else {
                Encoding::draw(u)?
            };
            let corrupt = if !avoid.corruption && u.ratio(1, 10)? {
                corrupt(u, s)?
            } else {
                None
            };
            funcs.push(FuncOpts {
                lower,
                lift,
                post_return: u.arbitrary()?,
                corrupt,
            });
        }
        let realloc_fault = if !avoid.corruption && u.ratio(1, 16)? {
            Some((u.int_in_range(1..=4)?, u.arbitrary()?))
        } else {
            None
        };
        layers.push(Layer {
            funcs,
            realloc_fault,
        });
    }
    // Each layer's functions must agree on the encoding the glue sees:
    // what layer k lowers with is what it lifts with unless the case
    // chose otherwise above, which the glue does not translate.
    let ncalls = u.int_in_range(1..=8)?;
    let mut calls = Vec::new();
    for _ in 0..ncalls {
        let func = u.choose_index(sigs.len())?;
        let s = &sigs[func];
        let args = s.params.iter().map(|t| val(u, t)).collect::<Result<_>>()?;
        let host = match u.int_in_range(0..=31)? {
            0 | 1 => HostAction::Error,
            2 if s.result.is_some() => HostAction::WrongType,
            _ => HostAction::Return(match &s.result {
                Some(t) => Some(val(u, t)?),
                None => None,
            }),
        };
        calls.push(Call { func, args, host });
    }
    Ok(Case {
        sigs,
        layers,
        calls,
    })
}

fn corrupt(u: &mut Unstructured<'_>, s: &Sig) -> Result<Option<Corrupt>> {
    let bits: u64 = match u.int_in_range(0..=5)? {
        0 => 2,
        1 => 0xd800, // a surrogate: not a char
        2 => 0x11_0000,
        3 => 0xffff_fff0, // a pointer out of bounds
        4 => 0x7fff_ffff,
        _ => u.arbitrary()?,
    };
    Ok(match u.int_in_range(0..=2)? {
        0 => {
            let n = if s.params_indirect() {
                1
            } else {
                s.flat_params().len()
            };
            if n == 0 {
                None
            } else {
                Some(Corrupt::Param {
                    index: u.choose_index(n)?,
                    bits,
                })
            }
        }
        1 if !s.results_indirect() && s.result.is_some() => Some(Corrupt::Result { bits }),
        1 => None,
        _ if s.results_indirect() => Some(Corrupt::RetArea {
            offset: u.int_in_range(0..=8 * s.flat_results().len() as u32 - 1)?,
            byte: *u.choose(&[2, 0xff, 0x80, 0xd8, 0x11, 7])?,
        }),
        _ => None,
    })
}
