//! The canonical ABI for dynamically typed values ([`Val`]).
//!
//! Lifting reads a value of an [`InterfaceType`] out of core wasm values or
//! linear memory; lowering writes one in. Everything a guest hands us is
//! untrusted: every pointer, length, discriminant, code point and code unit
//! is checked, and a bad one is an error, never a panic. Memory is always
//! addressed with 64-bit arithmetic so that `ptr + len * size` of 32-bit
//! operands cannot wrap.
//!
//! The behaviour (order of checks, `realloc` calls and their arguments, what
//! is ignored, error texts) follows Wasmtime 48's host-side lifting and
//! lowering, since embedders and differential fuzzing compare against it.

use super::info::StringEncoding;
use super::resources::ResourceAny;
use super::types::InterfaceType;
use super::values::Val;
use crate::Val as CoreVal;
use anyhow::{Result, anyhow, bail};

/// Most core parameters a function passes flat; beyond, one pointer.
pub(crate) const MAX_FLAT_PARAMS: usize = 16;
/// Most core results a function returns flat; beyond, one pointer.
pub(crate) const MAX_FLAT_RESULTS: usize = 1;

/// The high bit of a latin1+utf16 string's length says "utf16".
const UTF16_TAG: u32 = 1 << 31;
/// Longest string (in bytes of its encoding) we will copy into a guest; a
/// longer one could not be told apart from a tagged latin1+utf16 length.
const MAX_STRING_BYTE_LENGTH: u64 = (1 << 31) - 1;

/// A core wasm value type, as the canonical ABI flattens into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlatTy {
    I32,
    I64,
    F32,
    F64,
}

impl FlatTy {
    fn zero(self) -> CoreVal {
        match self {
            FlatTy::I32 => CoreVal::I32(0),
            FlatTy::I64 => CoreVal::I64(0),
            FlatTy::F32 => CoreVal::F32(0),
            FlatTy::F64 => CoreVal::F64(0),
        }
    }

    fn name(self) -> &'static str {
        match self {
            FlatTy::I32 => "i32",
            FlatTy::I64 => "i64",
            FlatTy::F32 => "f32",
            FlatTy::F64 => "f64",
        }
    }

    /// The type a variant's flat slot takes when two cases put `self` and
    /// `other` there.
    fn join(self, other: FlatTy) -> FlatTy {
        match (self, other) {
            (a, b) if a == b => a,
            (FlatTy::I32, FlatTy::F32) | (FlatTy::F32, FlatTy::I32) => FlatTy::I32,
            _ => FlatTy::I64,
        }
    }
}

/// Size and alignment of a value in a 32-bit linear memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub size: u32,
    pub align: u32,
}

/// One side of a call: its memory, allocator, string encoding and handle tables.
pub(crate) trait AbiCx {
    fn encoding(&self) -> StringEncoding;
    /// The memory's bytes now; error "... no memory" if the options have none. Never hold the slice across `realloc` (it calls into the guest, which may grow memory).
    fn memory(&mut self) -> anyhow::Result<&mut [u8]>;
    /// Calls the guest's realloc; the result is NOT yet checked (you check alignment and bounds, with upstream's messages). Error if the options have no realloc.
    fn realloc(
        &mut self,
        old_ptr: u32,
        old_size: u32,
        align: u32,
        new_size: u32,
    ) -> anyhow::Result<u32>;
    fn lift_own(&mut self, table: usize, index: u32) -> anyhow::Result<ResourceAny>;
    fn lift_borrow(&mut self, table: usize, index: u32) -> anyhow::Result<ResourceAny>;
    fn lower_own(&mut self, table: usize, r: &ResourceAny) -> anyhow::Result<u32>;
    fn lower_borrow(&mut self, table: usize, r: &ResourceAny) -> anyhow::Result<u32>;
}

/// A type's name as upstream's `desc` spells it in type-mismatch errors.
fn ty_desc(ty: &InterfaceType) -> &'static str {
    match ty {
        InterfaceType::Own(_) => "owned resource",
        InterfaceType::Borrow(_) => "borrowed resource",
        other => other.desc(),
    }
}

fn unexpected(ty: &InterfaceType, val: &Val) -> anyhow::Error {
    anyhow!(
        "type mismatch: expected {}, found {}",
        ty_desc(ty),
        val.desc()
    )
}

// ---------------------------------------------------------------------------
// Layout

fn align_to(n: u32, align: u32) -> u32 {
    // Saturating: an absurd type gets an absurd size, which no memory can
    // hold, so the bounds checks reject it instead of wrapping to a small one.
    n.saturating_add(align - 1) & !(align - 1)
}

/// The cases of a variant-like type, each with its payload type if any.
#[derive(Clone, Copy)]
enum Cases<'a> {
    Variant(&'a [(String, Option<InterfaceType>)]),
    Option(&'a InterfaceType),
    Result(Option<&'a InterfaceType>, Option<&'a InterfaceType>),
    Enum(usize),
}

impl<'a> Cases<'a> {
    fn of(ty: &'a InterfaceType) -> Option<Cases<'a>> {
        Some(match ty {
            InterfaceType::Variant(cases) => Cases::Variant(cases),
            InterfaceType::Option(t) => Cases::Option(t),
            InterfaceType::Result(r) => Cases::Result(r.0.as_ref(), r.1.as_ref()),
            InterfaceType::Enum(names) => Cases::Enum(names.len()),
            _ => return None,
        })
    }

    fn len(self) -> usize {
        match self {
            Cases::Variant(c) => c.len(),
            Cases::Option(_) | Cases::Result(..) => 2,
            Cases::Enum(n) => n,
        }
    }

    fn payload(self, i: usize) -> Option<&'a InterfaceType> {
        match self {
            Cases::Variant(c) => c.get(i).and_then(|(_, t)| t.as_ref()),
            Cases::Option(t) => (i == 1).then_some(t),
            Cases::Result(ok, err) => match i {
                0 => ok,
                1 => err,
                _ => None,
            },
            Cases::Enum(_) => None,
        }
    }

    fn payloads(self) -> impl Iterator<Item = &'a InterfaceType> {
        let n = match self {
            // No case of an enum has a payload; skip walking its names.
            Cases::Enum(_) => 0,
            _ => self.len(),
        };
        (0..n).filter_map(move |i| self.payload(i))
    }
}

fn discriminant_size(cases: usize) -> u32 {
    if cases <= 1 << 8 {
        1
    } else if cases <= 1 << 16 {
        2
    } else {
        4
    }
}

#[derive(Clone, Copy)]
struct VariantLayout {
    layout: Layout,
    disc_size: u32,
    payload_offset: u32,
}

fn variant_layout(cases: Cases<'_>) -> VariantLayout {
    let disc_size = discriminant_size(cases.len());
    let mut size = 0;
    let mut align = disc_size;
    for t in cases.payloads() {
        let l = layout(t);
        size = size.max(l.size);
        align = align.max(l.align);
    }
    let payload_offset = align_to(disc_size, align);
    VariantLayout {
        layout: Layout {
            size: align_to(payload_offset.saturating_add(size), align),
            align,
        },
        disc_size,
        payload_offset,
    }
}

pub(crate) fn record_layout<'a>(fields: impl Iterator<Item = &'a InterfaceType>) -> Layout {
    let mut size = 0;
    let mut align = 1;
    for f in fields {
        let l = layout(f);
        size = align_to(size, l.align).saturating_add(l.size);
        align = align.max(l.align);
    }
    Layout {
        size: align_to(size, align),
        align,
    }
}

/// Number of 32-bit words a flags value of `n` flags flattens to.
fn flag_words(n: usize) -> usize {
    n.div_ceil(32)
}

/// Canonical ABI size and alignment of `ty` in a 32-bit memory.
pub(crate) fn layout(ty: &InterfaceType) -> Layout {
    let scalar = |n| Layout { size: n, align: n };
    match ty {
        InterfaceType::Bool | InterfaceType::S8 | InterfaceType::U8 => scalar(1),
        InterfaceType::S16 | InterfaceType::U16 => scalar(2),
        InterfaceType::S32
        | InterfaceType::U32
        | InterfaceType::Float32
        | InterfaceType::Char
        | InterfaceType::Own(_)
        | InterfaceType::Borrow(_) => scalar(4),
        InterfaceType::S64 | InterfaceType::U64 | InterfaceType::Float64 => scalar(8),
        InterfaceType::String | InterfaceType::List(_) => Layout { size: 8, align: 4 },
        InterfaceType::Record(fields) => record_layout(fields.iter().map(|(_, t)| t)),
        InterfaceType::Tuple(types) => record_layout(types.iter()),
        InterfaceType::Enum(names) => scalar(discriminant_size(names.len())),
        InterfaceType::Variant(_) | InterfaceType::Option(_) | InterfaceType::Result(_) => {
            variant_layout(Cases::of(ty).expect("variant-like type")).layout
        }
        InterfaceType::Flags(names) => match names.len() {
            0 => Layout { size: 0, align: 1 },
            1..=8 => scalar(1),
            9..=16 => scalar(2),
            n => Layout {
                size: u32::try_from(flag_words(n) * 4).unwrap_or(u32::MAX),
                align: 4,
            },
        },
    }
}

/// Bumps `offset` past the next field of layout `l`; returns the field's offset.
pub(crate) fn next_field(offset: &mut u64, l: Layout) -> u64 {
    let align = u64::from(l.align);
    let start = offset.div_ceil(align) * align;
    *offset = start + u64::from(l.size);
    start
}

// ---------------------------------------------------------------------------
// Flattening

/// Appends the flat core types of `ty` to `out`.
pub(crate) fn flatten(ty: &InterfaceType, out: &mut Vec<FlatTy>) {
    match ty {
        InterfaceType::Bool
        | InterfaceType::S8
        | InterfaceType::U8
        | InterfaceType::S16
        | InterfaceType::U16
        | InterfaceType::S32
        | InterfaceType::U32
        | InterfaceType::Char
        | InterfaceType::Enum(_)
        | InterfaceType::Own(_)
        | InterfaceType::Borrow(_) => out.push(FlatTy::I32),
        InterfaceType::S64 | InterfaceType::U64 => out.push(FlatTy::I64),
        InterfaceType::Float32 => out.push(FlatTy::F32),
        InterfaceType::Float64 => out.push(FlatTy::F64),
        InterfaceType::String | InterfaceType::List(_) => {
            out.extend([FlatTy::I32, FlatTy::I32]);
        }
        InterfaceType::Record(fields) => fields.iter().for_each(|(_, t)| flatten(t, out)),
        InterfaceType::Tuple(types) => types.iter().for_each(|t| flatten(t, out)),
        InterfaceType::Variant(_) | InterfaceType::Option(_) | InterfaceType::Result(_) => {
            out.push(FlatTy::I32);
            let start = out.len();
            let mut case = Vec::new();
            for t in Cases::of(ty).expect("variant-like type").payloads() {
                case.clear();
                flatten(t, &mut case);
                for (i, &ft) in case.iter().enumerate() {
                    match out.get_mut(start + i) {
                        Some(slot) => *slot = slot.join(ft),
                        None => out.push(ft),
                    }
                }
            }
        }
        InterfaceType::Flags(names) => {
            out.extend(std::iter::repeat_n(FlatTy::I32, flag_words(names.len())));
        }
    }
}

/// Number of flat core values of `ty`.
pub(crate) fn flat_count(ty: &InterfaceType) -> usize {
    match ty {
        InterfaceType::String | InterfaceType::List(_) => 2,
        InterfaceType::Record(fields) => fields.iter().map(|(_, t)| flat_count(t)).sum(),
        InterfaceType::Tuple(types) => types.iter().map(flat_count).sum(),
        InterfaceType::Variant(_) | InterfaceType::Option(_) | InterfaceType::Result(_) => {
            let cases = Cases::of(ty).expect("variant-like type");
            1 + cases.payloads().map(flat_count).max().unwrap_or(0)
        }
        InterfaceType::Flags(names) => flag_words(names.len()),
        _ => 1,
    }
}

pub(crate) fn flat_count_all(types: &[InterfaceType]) -> usize {
    types.iter().map(flat_count).sum()
}

fn flatten_all(types: &[InterfaceType]) -> Vec<FlatTy> {
    let mut out = Vec::new();
    types.iter().for_each(|t| flatten(t, &mut out));
    out
}

/// Core parameters of an import as the guest calls it (`canon lower`).
pub(crate) fn core_params_lower(
    params: &[InterfaceType],
    results: &[InterfaceType],
) -> Vec<FlatTy> {
    let mut out = core_params_lift(params);
    if flat_count_all(results) > MAX_FLAT_RESULTS {
        out.push(FlatTy::I32);
    }
    out
}

/// Core results of an import as the guest calls it (`canon lower`).
pub(crate) fn core_results_lower(results: &[InterfaceType]) -> Vec<FlatTy> {
    if flat_count_all(results) > MAX_FLAT_RESULTS {
        Vec::new()
    } else {
        flatten_all(results)
    }
}

/// Core parameters of an export's core function (`canon lift`).
pub(crate) fn core_params_lift(params: &[InterfaceType]) -> Vec<FlatTy> {
    if flat_count_all(params) > MAX_FLAT_PARAMS {
        vec![FlatTy::I32]
    } else {
        flatten_all(params)
    }
}

/// Core results of an export's core function (`canon lift`).
pub(crate) fn core_results_lift(results: &[InterfaceType]) -> Vec<FlatTy> {
    if flat_count_all(results) > MAX_FLAT_RESULTS {
        vec![FlatTy::I32]
    } else {
        flatten_all(results)
    }
}

// ---------------------------------------------------------------------------
// Core values

#[allow(unreachable_patterns, reason = "the real core value has more variants")]
fn core_name(v: &CoreVal) -> &'static str {
    match v {
        CoreVal::I32(_) => "i32",
        CoreVal::I64(_) => "i64",
        CoreVal::F32(_) => "f32",
        CoreVal::F64(_) => "f64",
        _ => "non-numeric value",
    }
}

fn core_mismatch(want: FlatTy, got: &CoreVal) -> anyhow::Error {
    anyhow!(
        "core value type mismatch: expected {}, found {}",
        want.name(),
        core_name(got)
    )
}

pub(crate) fn next_core<'a>(src: &mut std::slice::Iter<'a, CoreVal>) -> Result<&'a CoreVal> {
    src.next()
        .ok_or_else(|| anyhow!("too few core values for the lifted type"))
}

pub(crate) fn next_i32(src: &mut std::slice::Iter<'_, CoreVal>) -> Result<i32> {
    match next_core(src)? {
        CoreVal::I32(x) => Ok(*x),
        other => Err(core_mismatch(FlatTy::I32, other)),
    }
}

pub(crate) fn next_u32(src: &mut std::slice::Iter<'_, CoreVal>) -> Result<u32> {
    next_i32(src).map(|x| x as u32)
}

pub(crate) fn next_i64(src: &mut std::slice::Iter<'_, CoreVal>) -> Result<i64> {
    match next_core(src)? {
        CoreVal::I64(x) => Ok(*x),
        other => Err(core_mismatch(FlatTy::I64, other)),
    }
}

pub(crate) fn next_f32(src: &mut std::slice::Iter<'_, CoreVal>) -> Result<u32> {
    match next_core(src)? {
        CoreVal::F32(x) => Ok(*x),
        other => Err(core_mismatch(FlatTy::F32, other)),
    }
}

pub(crate) fn next_f64(src: &mut std::slice::Iter<'_, CoreVal>) -> Result<u64> {
    match next_core(src)? {
        CoreVal::F64(x) => Ok(*x),
        other => Err(core_mismatch(FlatTy::F64, other)),
    }
}

/// Reads a variant's joined slot as the type the chosen case flattens to.
/// Narrowing keeps the low bits, as a raw 64-bit slot read as 32 bits does.
fn coerce_for_lift(v: &CoreVal, want: FlatTy) -> Result<CoreVal> {
    Ok(match (v, want) {
        (CoreVal::I32(x), FlatTy::I32) => CoreVal::I32(*x),
        (CoreVal::I32(x), FlatTy::F32) => CoreVal::F32(*x as u32),
        (CoreVal::I64(x), FlatTy::I64) => CoreVal::I64(*x),
        (CoreVal::I64(x), FlatTy::I32) => CoreVal::I32(*x as i32),
        (CoreVal::I64(x), FlatTy::F32) => CoreVal::F32(*x as u32),
        (CoreVal::I64(x), FlatTy::F64) => CoreVal::F64(*x as u64),
        (CoreVal::F32(x), FlatTy::F32) => CoreVal::F32(*x),
        (CoreVal::F64(x), FlatTy::F64) => CoreVal::F64(*x),
        (other, _) => return Err(core_mismatch(want, other)),
    })
}

/// Widens a case's flat value to the variant's joined slot type; integers
/// and float bits are zero-extended, as upstream's raw slots are.
fn coerce_for_lower(v: CoreVal, joined: FlatTy) -> Result<CoreVal> {
    Ok(match (v, joined) {
        (CoreVal::I32(x), FlatTy::I32) => CoreVal::I32(x),
        (CoreVal::F32(x), FlatTy::I32) => CoreVal::I32(x as i32),
        (CoreVal::I32(x), FlatTy::I64) => CoreVal::I64(i64::from(x as u32)),
        (CoreVal::F32(x), FlatTy::I64) => CoreVal::I64(i64::from(x)),
        (CoreVal::F64(x), FlatTy::I64) => CoreVal::I64(x as i64),
        (CoreVal::I64(x), FlatTy::I64) => CoreVal::I64(x),
        (CoreVal::F32(x), FlatTy::F32) => CoreVal::F32(x),
        (CoreVal::F64(x), FlatTy::F64) => CoreVal::F64(x),
        (other, _) => return Err(core_mismatch(joined, &other)),
    })
}

// ---------------------------------------------------------------------------
// Memory access

pub(crate) fn mem_len(cx: &mut dyn AbiCx) -> Result<u64> {
    Ok(cx.memory()?.len() as u64)
}

/// Bounds-checked view of `len` bytes at `off`. Callers check bounds with
/// their own messages first; this only keeps a logic error from panicking.
pub(crate) fn mem_range(mem: &mut [u8], off: u64, len: u64) -> Result<&mut [u8]> {
    usize::try_from(off)
        .ok()
        .zip(usize::try_from(len).ok())
        .and_then(|(off, len)| mem.get_mut(off..)?.get_mut(..len))
        .ok_or_else(|| anyhow!("pointer out of bounds of memory"))
}

pub(crate) fn read<const N: usize>(cx: &mut dyn AbiCx, off: u64) -> Result<[u8; N]> {
    let bytes = mem_range(cx.memory()?, off, N as u64)?;
    let mut out = [0; N];
    out.copy_from_slice(bytes);
    Ok(out)
}

pub(crate) fn read_u32(cx: &mut dyn AbiCx, off: u64) -> Result<u32> {
    read::<4>(cx, off).map(u32::from_le_bytes)
}

pub(crate) fn write(cx: &mut dyn AbiCx, off: u64, bytes: &[u8]) -> Result<()> {
    mem_range(cx.memory()?, off, bytes.len() as u64)?.copy_from_slice(bytes);
    Ok(())
}

/// Calls the guest's `realloc` and checks what it returned.
pub(crate) fn realloc(
    cx: &mut dyn AbiCx,
    old_ptr: u32,
    old_size: u32,
    align: u32,
    new_size: u64,
) -> Result<u32> {
    // Upstream converts the size to the guest's u32 just before the call,
    // failing with the conversion's own message.
    let new_size32 = u32::try_from(new_size)?;
    let ptr = cx.realloc(old_ptr, old_size, align, new_size32)?;
    if !ptr.is_multiple_of(align) {
        bail!("realloc return: result not aligned");
    }
    if u64::from(ptr) + new_size > mem_len(cx)? {
        bail!("realloc return: beyond end of memory");
    }
    Ok(ptr)
}

/// Checks a pointer to a whole value (params, results) before it is used.
pub(crate) fn check_pointer(
    cx: &mut dyn AbiCx,
    ptr: u32,
    l: Layout,
    misaligned: &str,
    out_of_bounds: &str,
) -> Result<()> {
    if !ptr.is_multiple_of(l.align) {
        bail!("{misaligned}");
    }
    if u64::from(ptr) + u64::from(l.size) > mem_len(cx)? {
        bail!("{out_of_bounds}");
    }
    Ok(())
}

/// Reads a variant-like value's discriminant and its payload slots from
/// flat core values: the slots are taken as a block (what the chosen case
/// does not use is padding, never looked at), and the ones it uses come
/// back as the types that case flattens to.
pub(crate) fn read_flat_case(
    ty: &InterfaceType,
    src: &mut std::slice::Iter<'_, CoreVal>,
) -> Result<(u32, Vec<CoreVal>)> {
    let cases = Cases::of(ty).ok_or_else(|| not_variant(ty))?;
    let slot_count = flat_count(ty) - 1;
    let disc = next_u32(src)?;
    if disc as usize >= cases.len() {
        return Err(discriminant_error(disc, cases.len()));
    }
    let slots = src
        .as_slice()
        .get(..slot_count)
        .ok_or_else(|| anyhow!("too few core values for the lifted type"))?;
    if let Some(last) = slots.len().checked_sub(1) {
        src.nth(last);
    }
    let vals = match cases.payload(disc as usize) {
        None => Vec::new(),
        Some(t) => {
            let mut want = Vec::new();
            flatten(t, &mut want);
            slots
                .iter()
                .zip(&want)
                .map(|(v, &w)| coerce_for_lift(v, w))
                .collect::<Result<Vec<_>>>()?
        }
    };
    Ok((disc, vals))
}

fn not_variant(ty: &InterfaceType) -> anyhow::Error {
    anyhow!("`{}` is not a variant type", ty_desc(ty))
}

/// The payload type of case `disc` of a variant-like type, if it has one.
pub(crate) fn case_payload(ty: &InterfaceType, disc: u32) -> Option<&InterfaceType> {
    Cases::of(ty)?.payload(disc as usize)
}

/// Ends the flat lowering of a variant-like value whose discriminant was
/// pushed at `start - 1` and whose payload (if any) follows it in `dst`:
/// widens the payload to the joined slot types and pads the rest.
pub(crate) fn finish_flat_case(
    ty: &InterfaceType,
    dst: &mut Vec<CoreVal>,
    start: usize,
) -> Result<()> {
    let mut joined = Vec::new();
    flatten(ty, &mut joined);
    let used = dst.len() - start;
    let slots = joined
        .get(1..)
        .filter(|s| s.len() >= used)
        .ok_or_else(|| anyhow!("variant payload flattened past its type"))?;
    for (v, &j) in dst[start..].iter_mut().zip(slots) {
        *v = coerce_for_lower(*v, j)?;
    }
    dst.extend(slots[used..].iter().map(|j| j.zero()));
    Ok(())
}

/// Writes a variant-like value's discriminant at `off`; returns where its
/// payload goes.
pub(crate) fn store_case_disc(
    cx: &mut dyn AbiCx,
    ty: &InterfaceType,
    disc: u32,
    off: u64,
) -> Result<u64> {
    let vl = variant_layout(Cases::of(ty).ok_or_else(|| not_variant(ty))?);
    let d = disc.to_le_bytes();
    write(cx, off, &d[..vl.disc_size as usize])?;
    Ok(off + u64::from(vl.payload_offset))
}

/// Reads and checks a variant-like value's discriminant at `off`; returns
/// it with where the payload is.
pub(crate) fn load_case_disc(
    cx: &mut dyn AbiCx,
    ty: &InterfaceType,
    off: u64,
) -> Result<(u32, u64)> {
    let cases = Cases::of(ty).ok_or_else(|| not_variant(ty))?;
    let vl = variant_layout(cases);
    let disc = match vl.disc_size {
        1 => u32::from(read::<1>(cx, off)?[0]),
        2 => u32::from(u16::from_le_bytes(read::<2>(cx, off)?)),
        _ => read_u32(cx, off)?,
    };
    if disc as usize >= cases.len() {
        return Err(discriminant_error(disc, cases.len()));
    }
    Ok((disc, off + u64::from(vl.payload_offset)))
}

/// Writes a flags value's 32-bit words at `off` in the type's layout.
pub(crate) fn store_flag_words(
    cx: &mut dyn AbiCx,
    ty: &InterfaceType,
    words: &[u32],
    off: u64,
) -> Result<()> {
    let first = words.first().copied().unwrap_or(0);
    match layout(ty).size {
        0 => Ok(()),
        1 => write(cx, off, &[first as u8]),
        2 => write(cx, off, &(first as u16).to_le_bytes()),
        _ => {
            let b: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            write(cx, off, &b)
        }
    }
}

/// Reads a flags value's 32-bit words at `off`; bits past the last flag
/// are cleared, as upstream ignores them.
pub(crate) fn load_flag_words(
    cx: &mut dyn AbiCx,
    ty: &InterfaceType,
    off: u64,
) -> Result<Vec<u32>> {
    let InterfaceType::Flags(names) = ty else {
        bail!("`{}` is not a flags type", ty_desc(ty));
    };
    let mut words = match layout(ty).size {
        0 => Vec::new(),
        1 => vec![u32::from(read::<1>(cx, off)?[0])],
        2 => vec![u32::from(u16::from_le_bytes(read::<2>(cx, off)?))],
        _ => (0..flag_words(names.len()))
            .map(|w| read_u32(cx, off + 4 * w as u64))
            .collect::<Result<_>>()?,
    };
    mask_flag_words(names.len(), &mut words);
    Ok(words)
}

/// Reads a flags value's words from flat core values, masked as
/// [`load_flag_words`] does.
pub(crate) fn lift_flag_words(
    ty: &InterfaceType,
    src: &mut std::slice::Iter<'_, CoreVal>,
) -> Result<Vec<u32>> {
    let InterfaceType::Flags(names) = ty else {
        bail!("`{}` is not a flags type", ty_desc(ty));
    };
    let mut words = (0..flag_words(names.len()))
        .map(|_| next_u32(src))
        .collect::<Result<Vec<_>>>()?;
    mask_flag_words(names.len(), &mut words);
    Ok(words)
}

fn mask_flag_words(flags: usize, words: &mut [u32]) {
    if let Some(last) = words.last_mut()
        && !flags.is_multiple_of(32)
    {
        *last &= (1u32 << (flags % 32)) - 1;
    }
}

/// Checks a list's pointer and length against memory and the element
/// layout, with upstream's messages (bounds first, then alignment);
/// returns the list's length in bytes.
pub(crate) fn check_list(cx: &mut dyn AbiCx, elem: Layout, ptr: u32, len: u32) -> Result<u64> {
    let byte_len = u64::from(len) * u64::from(elem.size);
    if u64::from(ptr) + byte_len > mem_len(cx)? {
        bail!("list pointer/length out of bounds of memory");
    }
    if !ptr.is_multiple_of(elem.align) {
        bail!("list pointer is not aligned");
    }
    Ok(byte_len)
}

// ---------------------------------------------------------------------------
// Lifting

pub(crate) fn lift_char(bits: u32) -> Result<Val> {
    Ok(Val::Char(char::try_from(bits)?))
}

fn discriminant_error(disc: u32, len: usize) -> anyhow::Error {
    anyhow!("discriminant {disc} out of range [0..{len})")
}

/// Builds the value of a variant-like type from its case and payload.
fn variant_val(ty: &InterfaceType, disc: u32, payload: Option<Box<Val>>) -> Result<Val> {
    let i = disc as usize;
    Ok(match ty {
        InterfaceType::Variant(cases) => Val::Variant(cases[i].0.clone(), payload),
        InterfaceType::Enum(names) => Val::Enum(names[i].clone()),
        InterfaceType::Option(_) => Val::Option(payload),
        InterfaceType::Result(_) if disc == 0 => Val::Result(Ok(payload)),
        InterfaceType::Result(_) => Val::Result(Err(payload)),
        other => bail!("`{}` is not a variant type", ty_desc(other)),
    })
}

/// Collects the names of the set flags among bits `offset..offset + 32`;
/// bits past the last flag are ignored, as upstream does.
fn push_flags(names: &[String], set: &mut Vec<String>, offset: usize, mut bits: u32) {
    let mut i = offset;
    while bits != 0 && i < names.len() {
        if bits & 1 != 0 {
            set.push(names[i].clone());
        }
        bits >>= 1;
        i += 1;
    }
}

/// Lifts a value of type `ty` from flat core values.
pub(crate) fn lift_flat(
    cx: &mut dyn AbiCx,
    ty: &InterfaceType,
    src: &mut std::slice::Iter<'_, CoreVal>,
) -> anyhow::Result<Val> {
    Ok(match ty {
        InterfaceType::Bool => Val::Bool(next_i32(src)? != 0),
        InterfaceType::S8 => Val::S8(next_i32(src)? as i8),
        InterfaceType::U8 => Val::U8(next_u32(src)? as u8),
        InterfaceType::S16 => Val::S16(next_i32(src)? as i16),
        InterfaceType::U16 => Val::U16(next_u32(src)? as u16),
        InterfaceType::S32 => Val::S32(next_i32(src)?),
        InterfaceType::U32 => Val::U32(next_u32(src)?),
        InterfaceType::S64 => Val::S64(next_i64(src)?),
        InterfaceType::U64 => Val::U64(next_i64(src)? as u64),
        InterfaceType::Float32 => Val::Float32(f32::from_bits(next_f32(src)?)),
        InterfaceType::Float64 => Val::Float64(f64::from_bits(next_f64(src)?)),
        InterfaceType::Char => lift_char(next_u32(src)?)?,
        InterfaceType::String => {
            let ptr = next_u32(src)?;
            let len = next_u32(src)?;
            lift_string(cx, ptr, len)?
        }
        InterfaceType::List(elem) => {
            let ptr = next_u32(src)?;
            let len = next_u32(src)?;
            lift_list(cx, elem, ptr, len)?
        }
        InterfaceType::Record(fields) => Val::Record(
            fields
                .iter()
                .map(|(name, t)| Ok((name.clone(), lift_flat(cx, t, src)?)))
                .collect::<Result<_>>()?,
        ),
        InterfaceType::Tuple(types) => Val::Tuple(
            types
                .iter()
                .map(|t| lift_flat(cx, t, src))
                .collect::<Result<_>>()?,
        ),
        InterfaceType::Variant(_)
        | InterfaceType::Enum(_)
        | InterfaceType::Option(_)
        | InterfaceType::Result(_) => {
            let (disc, slots) = read_flat_case(ty, src)?;
            let payload = match case_payload(ty, disc) {
                None => None,
                Some(t) => Some(Box::new(lift_flat(cx, t, &mut slots.iter())?)),
            };
            variant_val(ty, disc, payload)?
        }
        InterfaceType::Flags(names) => {
            let mut set = Vec::new();
            for w in 0..flag_words(names.len()) {
                let bits = next_u32(src)?;
                push_flags(names, &mut set, w * 32, bits);
            }
            Val::Flags(set)
        }
        InterfaceType::Own(table) => {
            let index = next_u32(src)?;
            Val::Resource(cx.lift_own(*table, index)?)
        }
        InterfaceType::Borrow(table) => {
            let index = next_u32(src)?;
            Val::Resource(cx.lift_borrow(*table, index)?)
        }
    })
}

/// Decodes a fixed-size scalar from its little-endian bytes; `None` for
/// types that are not such scalars (or whose bytes may be invalid, `char`).
fn scalar_from_bytes(ty: &InterfaceType, b: &[u8]) -> Option<Val> {
    let arr = |n: usize| -> Option<[u8; 8]> {
        let mut out = [0; 8];
        out[..n].copy_from_slice(b.get(..n)?);
        Some(out)
    };
    Some(match ty {
        InterfaceType::Bool => Val::Bool(*b.first()? != 0),
        InterfaceType::S8 => Val::S8(*b.first()? as i8),
        InterfaceType::U8 => Val::U8(*b.first()?),
        InterfaceType::S16 => Val::S16(u64::from_le_bytes(arr(2)?) as i16),
        InterfaceType::U16 => Val::U16(u64::from_le_bytes(arr(2)?) as u16),
        InterfaceType::S32 => Val::S32(u64::from_le_bytes(arr(4)?) as i32),
        InterfaceType::U32 => Val::U32(u64::from_le_bytes(arr(4)?) as u32),
        InterfaceType::S64 => Val::S64(u64::from_le_bytes(arr(8)?) as i64),
        InterfaceType::U64 => Val::U64(u64::from_le_bytes(arr(8)?)),
        InterfaceType::Float32 => Val::Float32(f32::from_bits(u64::from_le_bytes(arr(4)?) as u32)),
        InterfaceType::Float64 => Val::Float64(f64::from_bits(u64::from_le_bytes(arr(8)?))),
        _ => return None,
    })
}

fn is_scalar(ty: &InterfaceType) -> bool {
    scalar_from_bytes(ty, &[0; 8]).is_some()
}

fn lift_string(cx: &mut dyn AbiCx, ptr: u32, len: u32) -> Result<Val> {
    lift_str(cx, ptr, len).map(Val::String)
}

/// Decodes the guest string at `ptr` (`len` code units, tagged for utf16
/// in latin1+utf16) in the call's encoding.
pub(crate) fn lift_str(cx: &mut dyn AbiCx, ptr: u32, len: u32) -> Result<String> {
    #[derive(Clone, Copy)]
    enum Form {
        Utf8,
        Utf16,
        Latin1,
    }
    let (form, units, align) = match cx.encoding() {
        StringEncoding::Utf8 => (Form::Utf8, len, 1),
        StringEncoding::Utf16 => (Form::Utf16, len, 2),
        StringEncoding::CompactUtf16 if len & UTF16_TAG == 0 => (Form::Latin1, len, 2),
        StringEncoding::CompactUtf16 => (Form::Utf16, len ^ UTF16_TAG, 2),
    };
    let byte_len = match form {
        Form::Utf16 => u64::from(units) * 2,
        Form::Utf8 | Form::Latin1 => u64::from(units),
    };
    if !ptr.is_multiple_of(align) {
        bail!("string pointer not aligned to {align}");
    }
    let mem = cx.memory()?;
    if u64::from(ptr) + byte_len > mem.len() as u64 {
        bail!("string pointer/length out of bounds of memory");
    }
    let bytes = mem_range(mem, u64::from(ptr), byte_len)?;
    // The decoders' own errors are what upstream reports ("invalid utf-8
    // sequence ...", "incomplete utf-8 byte sequence ...", "unpaired
    // surrogate found ...").
    let s = match form {
        Form::Utf8 => std::str::from_utf8(bytes)?.to_owned(),
        Form::Utf16 => char::decode_utf16(
            bytes
                .chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]])),
        )
        .collect::<Result<String, _>>()?,
        Form::Latin1 => bytes.iter().map(|&b| char::from(b)).collect(),
    };
    Ok(s)
}

fn lift_list(cx: &mut dyn AbiCx, elem: &InterfaceType, ptr: u32, len: u32) -> Result<Val> {
    let l = layout(elem);
    // Bounds before alignment, unlike strings: upstream's host side does so,
    // and which error a bad list gets is visible to callers.
    let byte_len = check_list(cx, l, ptr, len)?;
    let size = u64::from(l.size);
    if is_scalar(elem) {
        // One pass over one borrow of memory: no element can fail or call
        // back into the guest.
        let bytes = mem_range(cx.memory()?, u64::from(ptr), byte_len)?;
        let items = bytes
            .chunks_exact(l.size as usize)
            .map(|c| scalar_from_bytes(elem, c).expect("scalar type"))
            .collect();
        return Ok(Val::List(items));
    }
    (0..u64::from(len))
        .map(|i| load_at(cx, elem, u64::from(ptr) + i * size))
        .collect::<Result<_>>()
        .map(Val::List)
}

/// Loads a value whose bytes at `off` are known to be in bounds and aligned.
fn load_at(cx: &mut dyn AbiCx, ty: &InterfaceType, off: u64) -> Result<Val> {
    Ok(match ty {
        InterfaceType::Bool
        | InterfaceType::S8
        | InterfaceType::U8
        | InterfaceType::S16
        | InterfaceType::U16
        | InterfaceType::S32
        | InterfaceType::U32
        | InterfaceType::S64
        | InterfaceType::U64
        | InterfaceType::Float32
        | InterfaceType::Float64 => {
            let size = u64::from(layout(ty).size);
            let bytes = mem_range(cx.memory()?, off, size)?;
            scalar_from_bytes(ty, bytes).expect("scalar type")
        }
        InterfaceType::Char => lift_char(read_u32(cx, off)?)?,
        InterfaceType::String => {
            let ptr = read_u32(cx, off)?;
            let len = read_u32(cx, off + 4)?;
            lift_string(cx, ptr, len)?
        }
        InterfaceType::List(elem) => {
            let ptr = read_u32(cx, off)?;
            let len = read_u32(cx, off + 4)?;
            lift_list(cx, elem, ptr, len)?
        }
        InterfaceType::Record(fields) => {
            let mut at = 0;
            Val::Record(
                fields
                    .iter()
                    .map(|(name, t)| {
                        let field = next_field(&mut at, layout(t));
                        Ok((name.clone(), load_at(cx, t, off + field)?))
                    })
                    .collect::<Result<_>>()?,
            )
        }
        InterfaceType::Tuple(types) => {
            let mut at = 0;
            Val::Tuple(
                types
                    .iter()
                    .map(|t| {
                        let field = next_field(&mut at, layout(t));
                        load_at(cx, t, off + field)
                    })
                    .collect::<Result<_>>()?,
            )
        }
        InterfaceType::Variant(_)
        | InterfaceType::Enum(_)
        | InterfaceType::Option(_)
        | InterfaceType::Result(_) => {
            let (disc, payload_off) = load_case_disc(cx, ty, off)?;
            let payload = match case_payload(ty, disc) {
                None => None,
                Some(t) => Some(Box::new(load_at(cx, t, payload_off)?)),
            };
            variant_val(ty, disc, payload)?
        }
        InterfaceType::Flags(names) => {
            let mut set = Vec::new();
            match layout(ty).size {
                0 => {}
                1 => push_flags(names, &mut set, 0, u32::from(read::<1>(cx, off)?[0])),
                2 => {
                    let bits = u16::from_le_bytes(read::<2>(cx, off)?);
                    push_flags(names, &mut set, 0, u32::from(bits));
                }
                _ => {
                    for w in 0..flag_words(names.len()) {
                        let bits = read_u32(cx, off + 4 * w as u64)?;
                        push_flags(names, &mut set, w * 32, bits);
                    }
                }
            }
            Val::Flags(set)
        }
        InterfaceType::Own(table) => {
            let index = read_u32(cx, off)?;
            Val::Resource(cx.lift_own(*table, index)?)
        }
        InterfaceType::Borrow(table) => {
            let index = read_u32(cx, off)?;
            Val::Resource(cx.lift_borrow(*table, index)?)
        }
    })
}

/// Loads a value of type `ty` stored at `ptr`, after checking that it is
/// aligned and in bounds.
#[cfg(test)]
fn load(cx: &mut dyn AbiCx, ty: &InterfaceType, ptr: u32) -> anyhow::Result<Val> {
    check_pointer(
        cx,
        ptr,
        layout(ty),
        "pointer not aligned",
        "pointer out of bounds",
    )?;
    load_at(cx, ty, u64::from(ptr))
}

// ---------------------------------------------------------------------------
// Lowering

/// The case a variant value selects, checked against the type: its index
/// and its payload with the payload's type.
type Case<'a> = (u32, Option<(&'a Val, &'a InterfaceType)>);

fn payload_of<'a>(
    val: Option<&'a Val>,
    ty: Option<&'a InterfaceType>,
    provided: impl FnOnce() -> String,
    expected: impl FnOnce() -> String,
) -> Result<Option<(&'a Val, &'a InterfaceType)>> {
    match (val, ty) {
        (Some(v), Some(t)) => Ok(Some((v, t))),
        (None, None) => Ok(None),
        (Some(_), None) => Err(anyhow!("{}", provided())),
        (None, Some(_)) => Err(anyhow!("{}", expected())),
    }
}

/// Checks a variant-like value against its type; `Ok(None)` when the value
/// is of another kind altogether.
fn select_case<'a>(ty: &'a InterfaceType, val: &'a Val) -> Result<Option<Case<'a>>> {
    Ok(Some(match (ty, val) {
        (InterfaceType::Variant(cases), Val::Variant(name, payload)) => {
            let i = cases
                .iter()
                .position(|(n, _)| n == name)
                .ok_or_else(|| anyhow!("unknown variant case: `{name}`"))?;
            let payload = payload_of(
                payload.as_deref(),
                cases[i].1.as_ref(),
                || format!("did not expect a payload for case `{name}`"),
                || format!("expected a payload for case `{name}`"),
            )?;
            (i as u32, payload)
        }
        (InterfaceType::Enum(names), Val::Enum(name)) => {
            let i = names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| anyhow!("enum variant name `{name}` is not valid"))?;
            (i as u32, None)
        }
        (InterfaceType::Option(t), Val::Option(v)) => match v {
            None => (0, None),
            Some(v) => (1, Some((&**v, &**t))),
        },
        (InterfaceType::Result(r), Val::Result(Ok(v))) => {
            let payload = payload_of(
                v.as_deref(),
                r.0.as_ref(),
                || "payload provided to `ok` but not expected".into(),
                || "payload expected to `ok` but not provided".into(),
            )?;
            (0, payload)
        }
        (InterfaceType::Result(r), Val::Result(Err(v))) => {
            let payload = payload_of(
                v.as_deref(),
                r.1.as_ref(),
                || "payload provided to `err` but not expected".into(),
                || "payload expected to `err` but not provided".into(),
            )?;
            (1, payload)
        }
        _ => return Ok(None),
    }))
}

/// The 32-bit words of a flags value, with each named flag's bit set.
fn flag_bits(names: &[String], set: &[String]) -> Result<Vec<u32>> {
    let mut words = vec![0u32; flag_words(names.len())];
    for flag in set {
        let bit = names
            .iter()
            .position(|n| n == flag)
            .ok_or_else(|| anyhow!("unknown flag: `{flag}`"))?;
        words[bit / 32] |= 1 << (bit % 32);
    }
    Ok(words)
}

fn check_record<'a>(
    fields: &'a [(String, InterfaceType)],
    vals: &'a [(String, Val)],
) -> Result<impl Iterator<Item = Result<(&'a Val, &'a InterfaceType)>>> {
    if fields.len() != vals.len() {
        bail!("expected {} fields, got {}", fields.len(), vals.len());
    }
    // Names are checked one field at a time, interleaved with lowering, as
    // upstream does: the guest can see how far lowering got (`realloc`).
    Ok(vals.iter().zip(fields).map(|((name, v), (fname, t))| {
        if name != fname {
            bail!("expected field `{fname}`, got `{name}`");
        }
        Ok((v, t))
    }))
}

fn check_tuple<'a>(types: &'a [InterfaceType], vals: &'a [Val]) -> Result<()> {
    if types.len() != vals.len() {
        bail!("expected {} types, got {}", types.len(), vals.len());
    }
    Ok(())
}

/// Lowers a value of type `ty` into flat core values appended to `dst`.
pub(crate) fn lower_flat(
    cx: &mut dyn AbiCx,
    ty: &InterfaceType,
    val: &Val,
    dst: &mut Vec<CoreVal>,
) -> anyhow::Result<()> {
    let int = CoreVal::I32;
    match (ty, val) {
        (InterfaceType::Bool, Val::Bool(b)) => dst.push(int(i32::from(*b))),
        (InterfaceType::S8, Val::S8(x)) => dst.push(int(i32::from(*x))),
        (InterfaceType::U8, Val::U8(x)) => dst.push(int(i32::from(*x))),
        (InterfaceType::S16, Val::S16(x)) => dst.push(int(i32::from(*x))),
        (InterfaceType::U16, Val::U16(x)) => dst.push(int(i32::from(*x))),
        (InterfaceType::S32, Val::S32(x)) => dst.push(int(*x)),
        (InterfaceType::U32, Val::U32(x)) => dst.push(int(*x as i32)),
        (InterfaceType::S64, Val::S64(x)) => dst.push(CoreVal::I64(*x)),
        (InterfaceType::U64, Val::U64(x)) => dst.push(CoreVal::I64(*x as i64)),
        (InterfaceType::Float32, Val::Float32(x)) => dst.push(CoreVal::F32(x.to_bits())),
        (InterfaceType::Float64, Val::Float64(x)) => dst.push(CoreVal::F64(x.to_bits())),
        (InterfaceType::Char, Val::Char(c)) => dst.push(int(u32::from(*c) as i32)),
        (InterfaceType::String, Val::String(s)) => {
            let (ptr, len) = lower_string(cx, s)?;
            dst.extend([int(ptr as i32), int(len as i32)]);
        }
        (InterfaceType::List(elem), Val::List(items)) => {
            let (ptr, len) = lower_list(cx, elem, items)?;
            dst.extend([int(ptr as i32), int(len as i32)]);
        }
        (InterfaceType::Record(fields), Val::Record(vals)) => {
            for field in check_record(fields, vals)? {
                let (v, t) = field?;
                lower_flat(cx, t, v, dst)?;
            }
        }
        (InterfaceType::Tuple(types), Val::Tuple(vals)) => {
            check_tuple(types, vals)?;
            for (v, t) in vals.iter().zip(types.iter()) {
                lower_flat(cx, t, v, dst)?;
            }
        }
        (InterfaceType::Flags(names), Val::Flags(set)) => {
            dst.extend(flag_bits(names, set)?.into_iter().map(|w| int(w as i32)));
        }
        (InterfaceType::Own(table), Val::Resource(r)) => {
            dst.push(int(cx.lower_own(*table, r)? as i32));
        }
        (InterfaceType::Borrow(table), Val::Resource(r)) => {
            dst.push(int(cx.lower_borrow(*table, r)? as i32));
        }
        _ => {
            let Some((disc, payload)) = select_case(ty, val)? else {
                return Err(unexpected(ty, val));
            };
            dst.push(int(disc as i32));
            let start = dst.len();
            if let Some((v, t)) = payload {
                lower_flat(cx, t, v, dst)?;
            }
            finish_flat_case(ty, dst, start)?;
        }
    }
    Ok(())
}

/// Copies `s` into the guest in its encoding; returns pointer and length
/// (code units, tagged for utf16 in latin1+utf16). The `realloc` calls and
/// their arguments are upstream's, since the guest sees them.
pub(crate) fn lower_string(cx: &mut dyn AbiCx, s: &str) -> Result<(u32, u32)> {
    let too_large = || anyhow!("string length of {} too large to copy into wasm", s.len());
    let n = s.len() as u64;
    match cx.encoding() {
        StringEncoding::Utf8 => {
            if n > MAX_STRING_BYTE_LENGTH {
                return Err(too_large());
            }
            let ptr = realloc(cx, 0, 0, 1, n)?;
            write(cx, u64::from(ptr), s.as_bytes())?;
            Ok((ptr, n as u32))
        }
        StringEncoding::Utf16 => {
            // Allocate for the worst case (one unit per byte), then shrink.
            let size = n * 2;
            if size > MAX_STRING_BYTE_LENGTH {
                return Err(too_large());
            }
            let mut ptr = realloc(cx, 0, 0, 2, size)?;
            let units: Vec<u8> = s.encode_utf16().flat_map(u16::to_le_bytes).collect();
            write(cx, u64::from(ptr), &units)?;
            let used = units.len() as u64;
            if used < size {
                ptr = realloc(cx, ptr, size as u32, 2, used)?;
            }
            Ok((ptr, (used / 2) as u32))
        }
        StringEncoding::CompactUtf16 => {
            let mut ptr = realloc(cx, 0, 0, 2, n)?;
            let latin1_end = s
                .char_indices()
                .find(|(_, c)| u32::from(*c) > 0xff)
                .map(|(i, _)| i);
            let latin1: Vec<u8> = s[..latin1_end.unwrap_or(s.len())]
                .chars()
                .map(|c| u32::from(c) as u8)
                .collect();
            write(cx, u64::from(ptr), &latin1)?;
            let Some(rest) = latin1_end else {
                let used = latin1.len() as u64;
                if used < n {
                    ptr = realloc(cx, ptr, n as u32, 2, used)?;
                }
                return Ok((ptr, used as u32));
            };
            // A character beyond latin1: switch to utf16 at worst-case size.
            let worst = n * 2;
            if worst > MAX_STRING_BYTE_LENGTH {
                bail!("byte length too large");
            }
            ptr = realloc(cx, ptr, n as u32, 2, worst)?;
            let mem = cx.memory()?;
            let dst = mem_range(mem, u64::from(ptr), worst)?;
            // Widen the latin1 prefix where `realloc` left it (upstream reads
            // it back from the new allocation rather than from the host
            // string), back to front so nothing is overwritten before use.
            let prefix = latin1.len();
            for i in (0..prefix).rev() {
                dst[2 * i] = dst[i];
                dst[2 * i + 1] = 0;
            }
            let mut units = prefix;
            for (u, slot) in s[rest..]
                .encode_utf16()
                .zip(dst[2 * prefix..].chunks_exact_mut(2))
            {
                slot.copy_from_slice(&u.to_le_bytes());
                units += 1;
            }
            let used = 2 * units as u64;
            if worst > used {
                ptr = realloc(cx, ptr, worst as u32, 2, used)?;
            }
            Ok((ptr, units as u32 | UTF16_TAG))
        }
    }
}

/// Encodes a scalar value's little-endian bytes into `out`; `Ok(false)` if
/// `ty` is not a plain scalar, an error if `val` is not of type `ty`.
fn scalar_to_bytes(ty: &InterfaceType, val: &Val, out: &mut Vec<u8>) -> Result<bool> {
    match (ty, val) {
        (InterfaceType::Bool, Val::Bool(b)) => out.push(u8::from(*b)),
        (InterfaceType::S8, Val::S8(x)) => out.extend(x.to_le_bytes()),
        (InterfaceType::U8, Val::U8(x)) => out.push(*x),
        (InterfaceType::S16, Val::S16(x)) => out.extend(x.to_le_bytes()),
        (InterfaceType::U16, Val::U16(x)) => out.extend(x.to_le_bytes()),
        (InterfaceType::S32, Val::S32(x)) => out.extend(x.to_le_bytes()),
        (InterfaceType::U32, Val::U32(x)) => out.extend(x.to_le_bytes()),
        (InterfaceType::S64, Val::S64(x)) => out.extend(x.to_le_bytes()),
        (InterfaceType::U64, Val::U64(x)) => out.extend(x.to_le_bytes()),
        (InterfaceType::Float32, Val::Float32(x)) => out.extend(x.to_bits().to_le_bytes()),
        (InterfaceType::Float64, Val::Float64(x)) => out.extend(x.to_bits().to_le_bytes()),
        (InterfaceType::Char, Val::Char(c)) => out.extend(u32::from(*c).to_le_bytes()),
        (
            InterfaceType::Bool
            | InterfaceType::S8
            | InterfaceType::U8
            | InterfaceType::S16
            | InterfaceType::U16
            | InterfaceType::S32
            | InterfaceType::U32
            | InterfaceType::S64
            | InterfaceType::U64
            | InterfaceType::Float32
            | InterfaceType::Float64
            | InterfaceType::Char,
            _,
        ) => return Err(unexpected(ty, val)),
        _ => return Ok(false),
    }
    Ok(true)
}

fn lower_list(cx: &mut dyn AbiCx, elem: &InterfaceType, items: &[Val]) -> Result<(u32, u32)> {
    let l = layout(elem);
    let size = (items.len() as u64)
        .checked_mul(u64::from(l.size))
        .ok_or_else(|| anyhow!("size overflow copying a list"))?;
    let len = u32::try_from(items.len())?;
    // Upstream allocates even for an empty list.
    let ptr = realloc(cx, 0, 0, l.align, size)?;
    let mut bytes = Vec::new();
    let mut first = items.iter();
    if let Some(v) = first.next()
        && scalar_to_bytes(elem, v, &mut bytes)?
    {
        // Scalars go in one copy. A mistyped element still leaves the ones
        // before it written, as element-wise stores would.
        let mut result = Ok(());
        bytes.reserve(size as usize);
        for v in first {
            if let Err(e) = scalar_to_bytes(elem, v, &mut bytes) {
                result = Err(e);
                break;
            }
        }
        write(cx, u64::from(ptr), &bytes)?;
        return result.map(|()| (ptr, len));
    }
    for (i, v) in items.iter().enumerate() {
        store_at(cx, elem, v, u64::from(ptr) + i as u64 * u64::from(l.size))?;
    }
    Ok((ptr, len))
}

pub(crate) fn write_pair(cx: &mut dyn AbiCx, off: u64, ptr: u32, len: u32) -> Result<()> {
    let mut b = [0; 8];
    b[..4].copy_from_slice(&ptr.to_le_bytes());
    b[4..].copy_from_slice(&len.to_le_bytes());
    write(cx, off, &b)
}

/// Stores `val` at `off`, known to be in bounds and aligned for `ty`.
/// Padding (between fields, after a short payload) is left as it was.
fn store_at(cx: &mut dyn AbiCx, ty: &InterfaceType, val: &Val, off: u64) -> Result<()> {
    let mut bytes = Vec::new();
    if scalar_to_bytes(ty, val, &mut bytes)? {
        return write(cx, off, &bytes);
    }
    match (ty, val) {
        (InterfaceType::String, Val::String(s)) => {
            let (ptr, len) = lower_string(cx, s)?;
            write_pair(cx, off, ptr, len)
        }
        (InterfaceType::List(elem), Val::List(items)) => {
            let (ptr, len) = lower_list(cx, elem, items)?;
            write_pair(cx, off, ptr, len)
        }
        (InterfaceType::Record(fields), Val::Record(vals)) => {
            let mut at = 0;
            for field in check_record(fields, vals)? {
                let (v, t) = field?;
                let field = next_field(&mut at, layout(t));
                store_at(cx, t, v, off + field)?;
            }
            Ok(())
        }
        (InterfaceType::Tuple(types), Val::Tuple(vals)) => {
            check_tuple(types, vals)?;
            let mut at = 0;
            for (v, t) in vals.iter().zip(types.iter()) {
                let field = next_field(&mut at, layout(t));
                store_at(cx, t, v, off + field)?;
            }
            Ok(())
        }
        (InterfaceType::Flags(names), Val::Flags(set)) => {
            let words = flag_bits(names, set)?;
            store_flag_words(cx, ty, &words, off)
        }
        (InterfaceType::Own(table), Val::Resource(r)) => {
            let index = cx.lower_own(*table, r)?;
            write(cx, off, &index.to_le_bytes())
        }
        (InterfaceType::Borrow(table), Val::Resource(r)) => {
            let index = cx.lower_borrow(*table, r)?;
            write(cx, off, &index.to_le_bytes())
        }
        _ => {
            let Some((disc, payload)) = select_case(ty, val)? else {
                return Err(unexpected(ty, val));
            };
            let payload_off = store_case_disc(cx, ty, disc, off)?;
            match payload {
                Some((v, t)) => store_at(cx, t, v, payload_off),
                None => Ok(()),
            }
        }
    }
}

/// Stores `val` as a value of type `ty` at `ptr`, after checking that the
/// place is aligned and in bounds.
#[cfg(test)]
fn store(cx: &mut dyn AbiCx, ty: &InterfaceType, val: &Val, ptr: u32) -> anyhow::Result<()> {
    check_pointer(
        cx,
        ptr,
        layout(ty),
        "pointer not aligned",
        "pointer out of bounds",
    )?;
    store_at(cx, ty, val, u64::from(ptr))
}

// ---------------------------------------------------------------------------
// The four directions of a call

pub(crate) fn core_ptr(v: Option<&CoreVal>, what: &str) -> Result<u32> {
    match v {
        Some(CoreVal::I32(x)) => Ok(*x as u32),
        Some(other) => Err(core_mismatch(FlatTy::I32, other)),
        None => bail!("missing {what} core value"),
    }
}

/// Lifts values laid out as the fields of a tuple at `ptr`.
fn load_fields(cx: &mut dyn AbiCx, types: &[InterfaceType], ptr: u32) -> Result<Vec<Val>> {
    let mut at = 0;
    types
        .iter()
        .map(|t| {
            let field = next_field(&mut at, layout(t));
            load_at(cx, t, u64::from(ptr) + field)
        })
        .collect()
}

fn store_fields(cx: &mut dyn AbiCx, types: &[InterfaceType], vals: &[Val], ptr: u32) -> Result<()> {
    let mut at = 0;
    for (v, t) in vals.iter().zip(types) {
        let field = next_field(&mut at, layout(t));
        store_at(cx, t, v, u64::from(ptr) + field)?;
    }
    Ok(())
}

fn lift_all_flat(
    cx: &mut dyn AbiCx,
    types: &[InterfaceType],
    core: &[CoreVal],
) -> Result<Vec<Val>> {
    let mut src = core.iter();
    types.iter().map(|t| lift_flat(cx, t, &mut src)).collect()
}

fn lower_all_flat(
    cx: &mut dyn AbiCx,
    types: &[InterfaceType],
    vals: &[Val],
) -> Result<Vec<CoreVal>> {
    let mut out = Vec::new();
    for (v, t) in vals.iter().zip(types) {
        lower_flat(cx, t, v, &mut out)?;
    }
    Ok(out)
}

/// Guest called a host import: lift its arguments (flat, or through one pointer to a tuple when params flatten to >16).
pub(crate) fn lift_import_args(
    cx: &mut dyn AbiCx,
    params: &[InterfaceType],
    core_args: &[CoreVal],
) -> anyhow::Result<Vec<Val>> {
    let count = flat_count_all(params);
    if count <= MAX_FLAT_PARAMS {
        // A trailing return pointer, if any, is not ours to read here.
        let flat = core_args.get(..count).ok_or_else(|| {
            anyhow!(
                "expected at least {count} core arguments, got {}",
                core_args.len()
            )
        })?;
        lift_all_flat(cx, params, flat)
    } else {
        let ptr = core_ptr(core_args.first(), "argument pointer")?;
        let l = record_layout(params.iter());
        check_pointer(cx, ptr, l, "pointer not aligned", "pointer out of bounds")?;
        load_fields(cx, params, ptr)
    }
}

/// ...and lower the host's results: flat into core_results, or stored at the retptr (the last core arg) when results flatten to >1.
pub(crate) fn lower_import_results(
    cx: &mut dyn AbiCx,
    results: &[InterfaceType],
    vals: &[Val],
    core_args: &[CoreVal],
    core_results: &mut [CoreVal],
) -> anyhow::Result<()> {
    if vals.len() != results.len() {
        bail!("expected {} result(s), got {}", results.len(), vals.len());
    }
    if flat_count_all(results) <= MAX_FLAT_RESULTS {
        let flat = lower_all_flat(cx, results, vals)?;
        if flat.len() != core_results.len() {
            bail!(
                "expected {} core result slots, got {}",
                flat.len(),
                core_results.len()
            );
        }
        core_results.copy_from_slice(&flat);
        Ok(())
    } else {
        if !core_results.is_empty() {
            bail!("expected no core result slots, got {}", core_results.len());
        }
        // Upstream checks the return pointer before lowering anything.
        let ptr = core_ptr(core_args.last(), "return pointer")?;
        let l = record_layout(results.iter());
        check_pointer(cx, ptr, l, "pointer not aligned", "pointer out of bounds")?;
        store_fields(cx, results, vals, ptr)
    }
}

/// Host calls a guest export: lower the arguments (flat, or realloc a tuple and pass its pointer when >16 — match upstream's realloc call).
pub(crate) fn lower_export_args(
    cx: &mut dyn AbiCx,
    params: &[InterfaceType],
    vals: &[Val],
) -> anyhow::Result<Vec<CoreVal>> {
    if vals.len() != params.len() {
        bail!("expected {} argument(s), got {}", params.len(), vals.len());
    }
    if flat_count_all(params) <= MAX_FLAT_PARAMS {
        lower_all_flat(cx, params, vals)
    } else {
        let l = record_layout(params.iter());
        let ptr = realloc(cx, 0, 0, l.align, u64::from(l.size))?;
        store_fields(cx, params, vals, ptr)?;
        Ok(vec![CoreVal::I32(ptr as i32)])
    }
}

/// ...and lift its results (flat, or load through the one returned pointer when >1).
pub(crate) fn lift_export_results(
    cx: &mut dyn AbiCx,
    results: &[InterfaceType],
    core_results: &[CoreVal],
) -> anyhow::Result<Vec<Val>> {
    let expected = if flat_count_all(results) <= MAX_FLAT_RESULTS {
        flat_count_all(results)
    } else {
        1
    };
    if core_results.len() != expected {
        bail!(
            "expected {expected} core results, got {}",
            core_results.len()
        );
    }
    if flat_count_all(results) <= MAX_FLAT_RESULTS {
        lift_all_flat(cx, results, core_results)
    } else {
        let ptr = core_ptr(core_results.first(), "return pointer")?;
        let l = record_layout(results.iter());
        check_pointer(
            cx,
            ptr,
            l,
            "return pointer not aligned",
            "pointer out of bounds of memory",
        )?;
        load_fields(cx, results, ptr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Core values compared by their debug form: the engine's core value
    /// has no `PartialEq` (it can hold references).
    fn debug(vals: &[CoreVal]) -> Vec<String> {
        vals.iter().map(|v| format!("{v:?}")).collect()
    }
    use std::sync::Arc;

    type Call = (u32, u32, u32, u32);

    /// A guest side over a plain byte vector, with a bump allocator that
    /// copies on reallocation (as a real `realloc` must) and logs its calls.
    struct TestCx {
        mem: Vec<u8>,
        encoding: StringEncoding,
        next: u32,
        calls: Vec<Call>,
        /// When set, `realloc` returns this instead of allocating.
        fixed: Option<u32>,
        has_memory: bool,
    }

    impl TestCx {
        fn new(encoding: StringEncoding) -> TestCx {
            TestCx {
                mem: vec![0; 65536],
                encoding,
                next: 16,
                calls: Vec::new(),
                fixed: None,
                has_memory: true,
            }
        }

        fn utf8() -> TestCx {
            TestCx::new(StringEncoding::Utf8)
        }
    }

    impl AbiCx for TestCx {
        fn encoding(&self) -> StringEncoding {
            self.encoding
        }
        fn memory(&mut self) -> Result<&mut [u8]> {
            if !self.has_memory {
                bail!("canonical options have no memory");
            }
            Ok(&mut self.mem)
        }
        fn realloc(
            &mut self,
            old_ptr: u32,
            old_size: u32,
            align: u32,
            new_size: u32,
        ) -> Result<u32> {
            self.calls.push((old_ptr, old_size, align, new_size));
            if let Some(p) = self.fixed {
                return Ok(p);
            }
            let ptr = self.next.div_ceil(align) * align;
            self.next = ptr + new_size;
            let keep = old_size.min(new_size) as usize;
            self.mem
                .copy_within(old_ptr as usize..old_ptr as usize + keep, ptr as usize);
            Ok(ptr)
        }
        fn lift_own(&mut self, table: usize, index: u32) -> Result<ResourceAny> {
            Ok(ResourceAny::for_tests(table, index, true))
        }
        fn lift_borrow(&mut self, table: usize, index: u32) -> Result<ResourceAny> {
            Ok(ResourceAny::for_tests(table, index, false))
        }
        fn lower_own(&mut self, table: usize, r: &ResourceAny) -> Result<u32> {
            if r.ty != ResourceAny::for_tests(table, 0, true).ty || !r.owned {
                bail!("resource of the wrong type");
            }
            Ok(r.rep)
        }
        fn lower_borrow(&mut self, table: usize, r: &ResourceAny) -> Result<u32> {
            if r.ty != ResourceAny::for_tests(table, 0, true).ty {
                bail!("resource of the wrong type");
            }
            Ok(r.rep)
        }
    }

    use InterfaceType as T;

    fn rec(fields: &[(&str, T)]) -> T {
        T::Record(
            fields
                .iter()
                .map(|(n, t)| (n.to_string(), t.clone()))
                .collect(),
        )
    }
    fn tup(types: &[T]) -> T {
        T::Tuple(types.iter().cloned().collect())
    }
    fn var(cases: &[(&str, Option<T>)]) -> T {
        T::Variant(
            cases
                .iter()
                .map(|(n, t)| (n.to_string(), t.clone()))
                .collect(),
        )
    }
    fn names(n: usize) -> Arc<[String]> {
        (0..n).map(|i| format!("n{i}")).collect()
    }
    fn list(t: T) -> T {
        T::List(Arc::new(t))
    }
    fn opt(t: T) -> T {
        T::Option(Arc::new(t))
    }
    fn res(ok: Option<T>, err: Option<T>) -> T {
        T::Result(Arc::new((ok, err)))
    }
    fn bx(v: Val) -> Option<Box<Val>> {
        Some(Box::new(v))
    }
    fn lay(size: u32, align: u32) -> Layout {
        Layout { size, align }
    }
    fn flat(ty: &T) -> Vec<FlatTy> {
        let mut out = Vec::new();
        flatten(ty, &mut out);
        assert_eq!(out.len(), flat_count(ty), "flat_count of {ty:?}");
        out
    }
    fn flat_ty(v: &CoreVal) -> FlatTy {
        match v {
            CoreVal::I32(_) => FlatTy::I32,
            CoreVal::I64(_) => FlatTy::I64,
            CoreVal::F32(_) => FlatTy::F32,
            CoreVal::F64(_) => FlatTy::F64,
            other => panic!("not a number: {other:?}"),
        }
    }

    fn roundtrip_flat(cx: &mut TestCx, ty: &T, val: &Val) {
        let mut core = Vec::new();
        lower_flat(cx, ty, val, &mut core).unwrap();
        let types: Vec<FlatTy> = core.iter().map(flat_ty).collect();
        assert_eq!(types, flat(ty), "flat types of {val:?}");
        let mut src = core.iter();
        let back = lift_flat(cx, ty, &mut src).unwrap();
        assert!(src.next().is_none());
        assert_eq!(&back, val);
    }

    fn roundtrip_mem(cx: &mut TestCx, ty: &T, val: &Val) {
        let l = layout(ty);
        let ptr = cx.realloc(0, 0, l.align, l.size).unwrap();
        store(cx, ty, val, ptr).unwrap();
        let back = load(cx, ty, ptr).unwrap();
        assert_eq!(&back, val);
    }

    fn roundtrip(ty: &T, val: &Val) {
        for enc in [
            StringEncoding::Utf8,
            StringEncoding::Utf16,
            StringEncoding::CompactUtf16,
        ] {
            roundtrip_flat(&mut TestCx::new(enc), ty, val);
            roundtrip_mem(&mut TestCx::new(enc), ty, val);
        }
    }

    fn err_text(r: Result<impl std::fmt::Debug>) -> String {
        format!("{:#}", r.expect_err("expected an error"))
    }

    #[track_caller]
    fn assert_err(r: Result<impl std::fmt::Debug>, want: &str) {
        let got = err_text(r);
        assert!(
            got.contains(want),
            "error {got:?} does not contain {want:?}"
        );
    }

    #[test]
    fn layouts_of_scalars_and_pointers() {
        assert_eq!(layout(&T::Bool), lay(1, 1));
        assert_eq!(layout(&T::S16), lay(2, 2));
        assert_eq!(layout(&T::Char), lay(4, 4));
        assert_eq!(layout(&T::Float64), lay(8, 8));
        assert_eq!(layout(&T::String), lay(8, 4));
        assert_eq!(layout(&list(T::U64)), lay(8, 4));
        assert_eq!(layout(&T::Own(3)), lay(4, 4));
        assert_eq!(layout(&tup(&[])), lay(0, 1));
        assert_eq!(flat(&T::String), [FlatTy::I32, FlatTy::I32]);
        assert_eq!(flat(&T::Float32), [FlatTy::F32]);
    }

    #[test]
    fn layouts_of_nested_records() {
        // inner: c@0 (u16), d@2 (u8) -> size 3, padded to 4, align 2.
        let inner = rec(&[("c", T::U16), ("d", T::U8)]);
        assert_eq!(layout(&inner), lay(4, 2));
        // a@0, inner@2..6, e@8..16.
        let outer = rec(&[("a", T::U8), ("b", inner), ("e", T::U64)]);
        assert_eq!(layout(&outer), lay(16, 8));
        // a@0, (u8@4, u32@8)..12, c@12 -> 13, padded to 16.
        let t = rec(&[("a", T::U8), ("b", tup(&[T::U8, T::U32])), ("c", T::U8)]);
        assert_eq!(layout(&t), lay(16, 4));
        let val = Val::Record(vec![
            ("a".into(), Val::U8(1)),
            ("b".into(), Val::Tuple(vec![Val::U8(2), Val::U32(3)])),
            ("c".into(), Val::U8(4)),
        ]);
        let mut cx = TestCx::utf8();
        store(&mut cx, &t, &val, 32).unwrap();
        assert_eq!(cx.mem[32], 1);
        assert_eq!(cx.mem[36], 2);
        assert_eq!(&cx.mem[40..44], &3u32.to_le_bytes());
        assert_eq!(cx.mem[44], 4);
    }

    #[test]
    fn layouts_of_variants() {
        use FlatTy::*;
        let v = var(&[("a", Some(T::Float32)), ("b", Some(T::S64))]);
        assert_eq!(flat(&v), [I32, I64]);
        assert_eq!(layout(&v), lay(16, 8));
        assert_eq!(
            flat(&var(&[("a", Some(T::Float32)), ("b", Some(T::U32))])),
            [I32, I32]
        );
        assert_eq!(
            flat(&var(&[("a", Some(T::Float32)), ("b", None)])),
            [I32, F32]
        );
        assert_eq!(
            flat(&var(&[("a", Some(T::Float64)), ("b", Some(T::Float32))])),
            [I32, I64]
        );
        let v = var(&[
            ("a", Some(tup(&[T::U8, T::Float32]))),
            ("b", Some(tup(&[T::Float32, T::U64, T::U8]))),
        ]);
        assert_eq!(flat(&v), [I32, I32, I64, I32]);
        assert_eq!(layout(&opt(T::U8)), lay(2, 1));
        assert_eq!(layout(&opt(tup(&[]))), lay(1, 1));
        assert_eq!(layout(&res(Some(T::U64), Some(T::String))), lay(16, 8));
        assert_eq!(layout(&res(None, None)), lay(1, 1));
        assert_eq!(flat(&res(None, None)), [I32]);
        // A u16 payload after a 1-byte discriminant starts at offset 2.
        assert_eq!(
            variant_layout(Cases::of(&opt(T::U16)).unwrap()).payload_offset,
            2
        );
    }

    #[test]
    fn layouts_of_flags_and_enums() {
        let f = |n| T::Flags(names(n));
        assert_eq!((layout(&f(0)), flat(&f(0)).len()), (lay(0, 1), 0));
        assert_eq!((layout(&f(8)), flat(&f(8)).len()), (lay(1, 1), 1));
        assert_eq!((layout(&f(9)), flat(&f(9)).len()), (lay(2, 2), 1));
        assert_eq!((layout(&f(32)), flat(&f(32)).len()), (lay(4, 4), 1));
        assert_eq!((layout(&f(33)), flat(&f(33)).len()), (lay(8, 4), 2));
        assert_eq!(layout(&T::Enum(names(256))), lay(1, 1));
        assert_eq!(layout(&T::Enum(names(257))), lay(2, 2));
        assert_eq!(layout(&T::Enum(names(65537))), lay(4, 4));
        assert_eq!(flat(&T::Enum(names(257))), [FlatTy::I32]);
        // A 257-case variant with a u8 payload: 2-byte discriminant first.
        let mut cases: Vec<(String, Option<T>)> =
            (0..257).map(|i| (format!("c{i}"), None)).collect();
        cases[0].1 = Some(T::U8);
        assert_eq!(layout(&T::Variant(cases.into())), lay(4, 2));
    }

    #[test]
    fn core_signatures() {
        use FlatTy::*;
        let sixteen = vec![T::U32; 16];
        let seventeen = vec![T::U32; 17];
        assert_eq!(core_params_lift(&sixteen).len(), 16);
        assert_eq!(core_params_lift(&seventeen), [I32]);
        assert_eq!(core_params_lift(&[T::String, T::Float64]), [I32, I32, F64]);
        assert_eq!(core_results_lift(&[T::U64]), [I64]);
        assert_eq!(core_results_lift(&[T::String]), [I32]);
        assert_eq!(core_results_lift(&[]), []);
        assert_eq!(core_params_lower(&[T::U8], &[T::String]), [I32, I32]);
        assert_eq!(core_params_lower(&seventeen, &[T::String]), [I32, I32]);
        assert_eq!(core_params_lower(&[T::U8], &[T::U8]), [I32]);
        assert_eq!(core_results_lower(&[T::String]), []);
        assert_eq!(core_results_lower(&[T::Float32]), [F32]);
        assert_eq!(core_results_lower(&[T::Flags(names(0))]), []);
    }

    #[test]
    fn roundtrip_scalars() {
        roundtrip(&T::Bool, &Val::Bool(true));
        roundtrip(&T::Bool, &Val::Bool(false));
        roundtrip(&T::S8, &Val::S8(-128));
        roundtrip(&T::U8, &Val::U8(255));
        roundtrip(&T::S16, &Val::S16(-2));
        roundtrip(&T::U16, &Val::U16(65535));
        roundtrip(&T::S32, &Val::S32(i32::MIN));
        roundtrip(&T::U32, &Val::U32(u32::MAX));
        roundtrip(&T::S64, &Val::S64(i64::MIN));
        roundtrip(&T::U64, &Val::U64(u64::MAX));
        roundtrip(&T::Float32, &Val::Float32(-0.0));
        roundtrip(&T::Float64, &Val::Float64(f64::INFINITY));
        roundtrip(&T::Char, &Val::Char('\u{10ffff}'));
        roundtrip(&T::Char, &Val::Char('é'));
    }

    #[test]
    fn nan_payloads_are_kept() {
        let mut cx = TestCx::utf8();
        let bits32 = 0x7fa0_0001u32;
        let mut core = Vec::new();
        lower_flat(
            &mut cx,
            &T::Float32,
            &Val::Float32(f32::from_bits(bits32)),
            &mut core,
        )
        .unwrap();
        assert_eq!(debug(&core), debug(&[CoreVal::F32(bits32)]));
        store(
            &mut cx,
            &T::Float64,
            &Val::Float64(f64::from_bits(0xfff8_0000_dead_beef)),
            64,
        )
        .unwrap();
        match load(&mut cx, &T::Float64, 64).unwrap() {
            Val::Float64(f) => assert_eq!(f.to_bits(), 0xfff8_0000_dead_beef),
            other => panic!("{other:?}"),
        }
        match lift_flat(
            &mut cx,
            &T::Float32,
            &mut [CoreVal::F32(0xffc0_0abc)].iter(),
        )
        .unwrap()
        {
            Val::Float32(f) => assert_eq!(f.to_bits(), 0xffc0_0abc),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flat_integers_take_low_bits_and_bool_any_nonzero() {
        let mut cx = TestCx::utf8();
        let mut lift =
            |ty: &T, v: i32| lift_flat(&mut cx, ty, &mut [CoreVal::I32(v)].iter()).unwrap();
        assert_eq!(lift(&T::U8, 0x1ff), Val::U8(0xff));
        assert_eq!(lift(&T::S8, 0x80), Val::S8(-128));
        assert_eq!(lift(&T::U16, -1), Val::U16(0xffff));
        assert_eq!(lift(&T::S16, 0x1_8000), Val::S16(-32768));
        assert_eq!(lift(&T::Bool, 2), Val::Bool(true));
        assert_eq!(lift(&T::Bool, i32::MIN), Val::Bool(true));
        assert_eq!(lift(&T::Bool, 0), Val::Bool(false));
        cx.mem[100] = 7;
        assert_eq!(load(&mut cx, &T::Bool, 100).unwrap(), Val::Bool(true));
        // s8 lowers sign-extended, u8 zero-extended.
        let mut core = Vec::new();
        lower_flat(&mut cx, &T::S8, &Val::S8(-1), &mut core).unwrap();
        lower_flat(&mut cx, &T::U8, &Val::U8(255), &mut core).unwrap();
        assert_eq!(debug(&core), debug(&[CoreVal::I32(-1), CoreVal::I32(255)]));
    }

    #[test]
    fn roundtrip_strings_all_encodings() {
        for s in [
            "",
            "hello",
            "héllo wörld ÿ",
            "a€b",
            "😀 emoji",
            "ÿ\u{100}",
            "\u{0}",
        ] {
            roundtrip(&T::String, &Val::String(s.into()));
        }
        let long: String = "abc€".repeat(300);
        roundtrip(&T::String, &Val::String(long));
    }

    #[test]
    fn string_realloc_calls_match_upstream() {
        let lower = |enc, s: &str| {
            let mut cx = TestCx::new(enc);
            let mut core = Vec::new();
            lower_flat(&mut cx, &T::String, &Val::String(s.into()), &mut core).unwrap();
            let back = lift_flat(&mut cx, &T::String, &mut core.iter()).unwrap();
            assert_eq!(back, Val::String(s.into()));
            let len = match core[1] {
                CoreVal::I32(l) => l as u32,
                _ => unreachable!(),
            };
            (cx.calls, len)
        };
        assert_eq!(
            lower(StringEncoding::Utf8, "hello"),
            (vec![(0, 0, 1, 5)], 5)
        );
        assert_eq!(lower(StringEncoding::Utf8, ""), (vec![(0, 0, 1, 0)], 0));
        // utf16: worst case 2 bytes per utf8 byte, then shrink to fit.
        assert_eq!(lower(StringEncoding::Utf16, "abc"), (vec![(0, 0, 2, 6)], 3));
        assert_eq!(
            lower(StringEncoding::Utf16, "héllo"),
            (vec![(0, 0, 2, 12), (16, 12, 2, 10)], 5)
        );
        // latin1+utf16, all latin1: one byte per char, shrunk from utf8 size.
        assert_eq!(
            lower(StringEncoding::CompactUtf16, "abc"),
            (vec![(0, 0, 2, 3)], 3)
        );
        assert_eq!(
            lower(StringEncoding::CompactUtf16, "héllo"),
            (vec![(0, 0, 2, 6), (16, 6, 2, 5)], 5)
        );
        // latin1+utf16 that needs utf16: grow to worst case, then shrink.
        assert_eq!(
            lower(StringEncoding::CompactUtf16, "aé€"),
            (
                vec![(0, 0, 2, 6), (16, 6, 2, 12), (22, 12, 2, 6)],
                3 | UTF16_TAG
            )
        );
    }

    #[test]
    fn compact_strings_read_both_forms() {
        let mut cx = TestCx::new(StringEncoding::CompactUtf16);
        cx.mem[64..67].copy_from_slice(&[b'a', 0xe9, b'z']);
        let latin1 = [CoreVal::I32(64), CoreVal::I32(3)];
        assert_eq!(
            lift_flat(&mut cx, &T::String, &mut latin1.iter()).unwrap(),
            Val::String("aéz".into())
        );
        cx.mem[80..84].copy_from_slice(&[0xac, 0x20, b'x', 0]);
        let utf16 = [CoreVal::I32(80), CoreVal::I32((2 | UTF16_TAG) as i32)];
        assert_eq!(
            lift_flat(&mut cx, &T::String, &mut utf16.iter()).unwrap(),
            Val::String("€x".into())
        );
        // A latin1 string may not start at an odd address either.
        let odd = [CoreVal::I32(65), CoreVal::I32(0)];
        assert_err(
            lift_flat(&mut cx, &T::String, &mut odd.iter()),
            "string pointer not aligned to 2",
        );
    }

    #[test]
    fn roundtrip_lists() {
        roundtrip(&list(T::U8), &Val::List(vec![]));
        roundtrip(&list(T::U8), &Val::List((0..=255).map(Val::U8).collect()));
        roundtrip(&list(T::S16), &Val::List(vec![Val::S16(-1), Val::S16(7)]));
        roundtrip(
            &list(T::U64),
            &Val::List(vec![Val::U64(1), Val::U64(u64::MAX)]),
        );
        roundtrip(&list(T::Float32), &Val::List(vec![Val::Float32(1.5)]));
        roundtrip(
            &list(T::Char),
            &Val::List(vec![Val::Char('x'), Val::Char('€')]),
        );
        roundtrip(
            &list(T::Bool),
            &Val::List(vec![Val::Bool(true), Val::Bool(false)]),
        );
        roundtrip(
            &list(T::String),
            &Val::List(vec![Val::String("a".into()), Val::String("€€".into())]),
        );
        roundtrip(
            &list(list(T::U32)),
            &Val::List(vec![Val::List(vec![Val::U32(1)]), Val::List(vec![])]),
        );
        let elem = rec(&[("a", T::U8), ("b", T::U64)]);
        let item = |a, b| Val::Record(vec![("a".into(), Val::U8(a)), ("b".into(), Val::U64(b))]);
        roundtrip(
            &list(elem.clone()),
            &Val::List(vec![item(1, 2), item(3, 4)]),
        );
        // Stride is the element size (16), not the unpadded 9 bytes.
        let mut cx = TestCx::utf8();
        let mut core = Vec::new();
        lower_flat(
            &mut cx,
            &list(elem),
            &Val::List(vec![item(1, 2), item(3, 4)]),
            &mut core,
        )
        .unwrap();
        assert_eq!(cx.calls, [(0, 0, 8, 32)]);
        assert_eq!(cx.mem[16 + 16], 3);
        roundtrip(&list(tup(&[])), &Val::List(vec![Val::Tuple(vec![]); 3]));
    }

    #[test]
    fn list_realloc_calls_match_upstream() {
        let mut cx = TestCx::utf8();
        let mut core = Vec::new();
        let ty = list(T::U32);
        lower_flat(
            &mut cx,
            &ty,
            &Val::List(vec![Val::U32(1), Val::U32(2)]),
            &mut core,
        )
        .unwrap();
        assert_eq!(cx.calls, [(0, 0, 4, 8)]);
        assert_eq!(debug(&core), debug(&[CoreVal::I32(16), CoreVal::I32(2)]));
        assert_eq!(&cx.mem[16..24], &[1, 0, 0, 0, 2, 0, 0, 0]);
        // An empty list still allocates.
        let mut cx = TestCx::utf8();
        lower_flat(&mut cx, &list(T::U64), &Val::List(vec![]), &mut Vec::new()).unwrap();
        assert_eq!(cx.calls, [(0, 0, 8, 0)]);
    }

    #[test]
    fn byte_list_mismatch_keeps_written_prefix() {
        let mut cx = TestCx::utf8();
        let items = vec![Val::U8(9), Val::U8(8), Val::S8(3), Val::U8(7)];
        let r = lower_flat(&mut cx, &list(T::U8), &Val::List(items), &mut Vec::new());
        assert_err(r, "type mismatch: expected u8, found s8");
        assert_eq!(&cx.mem[16..19], &[9, 8, 0]);
        assert_eq!(cx.calls.len(), 1);
    }

    #[test]
    fn roundtrip_records_tuples_variants() {
        let r = rec(&[("x", T::U8), ("y", T::String), ("z", T::Float64)]);
        roundtrip(
            &r,
            &Val::Record(vec![
                ("x".into(), Val::U8(1)),
                ("y".into(), Val::String("hi".into())),
                ("z".into(), Val::Float64(2.5)),
            ]),
        );
        roundtrip(&rec(&[]), &Val::Record(vec![]));
        roundtrip(
            &tup(&[T::Char, T::S64]),
            &Val::Tuple(vec![Val::Char('q'), Val::S64(-9)]),
        );
        let v = var(&[
            ("none", None),
            ("f", Some(T::Float32)),
            ("i", Some(T::S64)),
            ("s", Some(T::String)),
            ("u", Some(T::U32)),
        ]);
        roundtrip(&v, &Val::Variant("none".into(), None));
        roundtrip(&v, &Val::Variant("f".into(), bx(Val::Float32(-3.25))));
        roundtrip(&v, &Val::Variant("i".into(), bx(Val::S64(i64::MIN))));
        roundtrip(&v, &Val::Variant("s".into(), bx(Val::String("€".into()))));
        roundtrip(&v, &Val::Variant("u".into(), bx(Val::U32(u32::MAX))));
        let e = T::Enum(names(300));
        roundtrip(&e, &Val::Enum("n0".into()));
        roundtrip(&e, &Val::Enum("n299".into()));
        let o = opt(opt(T::U16));
        roundtrip(&o, &Val::Option(None));
        roundtrip(&o, &Val::Option(bx(Val::Option(None))));
        roundtrip(&o, &Val::Option(bx(Val::Option(bx(Val::U16(5))))));
        let r = res(Some(T::U8), Some(T::String));
        roundtrip(&r, &Val::Result(Ok(bx(Val::U8(1)))));
        roundtrip(&r, &Val::Result(Err(bx(Val::String("bad".into())))));
        let r = res(None, None);
        roundtrip(&r, &Val::Result(Ok(None)));
        roundtrip(&r, &Val::Result(Err(None)));
    }

    #[test]
    fn variant_slots_join_and_pad() {
        let mut cx = TestCx::utf8();
        let v = var(&[
            ("a", Some(T::Float32)),
            ("b", Some(T::S64)),
            ("c", None),
            ("d", Some(T::U32)),
        ]);
        let lower = |cx: &mut TestCx, val: Val| {
            let mut core = Vec::new();
            lower_flat(cx, &v, &val, &mut core).unwrap();
            core
        };
        let a = lower(&mut cx, Val::Variant("a".into(), bx(Val::Float32(1.5))));
        assert_eq!(
            debug(&a),
            debug(&[CoreVal::I32(0), CoreVal::I64(i64::from(1.5f32.to_bits()))])
        );
        let c = lower(&mut cx, Val::Variant("c".into(), None));
        assert_eq!(debug(&c), debug(&[CoreVal::I32(2), CoreVal::I64(0)]));
        // u32 payloads are zero-extended into an i64 slot.
        let d = lower(&mut cx, Val::Variant("d".into(), bx(Val::U32(u32::MAX))));
        assert_eq!(
            debug(&d),
            debug(&[CoreVal::I32(3), CoreVal::I64(0xffff_ffff)])
        );
        // ...and read back from its low bits, whatever the high bits are.
        let src = [CoreVal::I32(3), CoreVal::I64(0x1234_5678_0000_0007)];
        assert_eq!(
            lift_flat(&mut cx, &v, &mut src.iter()).unwrap(),
            Val::Variant("d".into(), bx(Val::U32(7)))
        );
        let src = [
            CoreVal::I32(0),
            CoreVal::I64(0xdead_0000_3fc0_0000u64 as i64),
        ];
        assert_eq!(
            lift_flat(&mut cx, &v, &mut src.iter()).unwrap(),
            Val::Variant("a".into(), bx(Val::Float32(1.5)))
        );
        // A record after a variant starts after all of the variant's slots.
        let t = tup(&[v.clone(), T::U8]);
        let src = [CoreVal::I32(2), CoreVal::I64(99), CoreVal::I32(4)];
        assert_eq!(
            lift_flat(&mut cx, &t, &mut src.iter()).unwrap(),
            Val::Tuple(vec![Val::Variant("c".into(), None), Val::U8(4)])
        );
        // i32 and f32 cases share an i32 slot holding the float's bits.
        let w = var(&[("f", Some(T::Float32)), ("u", Some(T::U8))]);
        let mut core = Vec::new();
        lower_flat(
            &mut cx,
            &w,
            &Val::Variant("f".into(), bx(Val::Float32(-2.0))),
            &mut core,
        )
        .unwrap();
        assert_eq!(
            debug(&core),
            debug(&[CoreVal::I32(0), CoreVal::I32((-2.0f32).to_bits() as i32)])
        );
    }

    #[test]
    fn variant_memory_leaves_padding_and_uses_payload_offset() {
        let mut cx = TestCx::utf8();
        let v = var(&[("a", None), ("b", Some(T::U64))]);
        cx.mem[64..80].fill(0xaa);
        store(&mut cx, &v, &Val::Variant("b".into(), bx(Val::U64(5))), 64).unwrap();
        assert_eq!(cx.mem[64], 1);
        assert_eq!(&cx.mem[65..72], &[0xaa; 7]);
        assert_eq!(&cx.mem[72..80], &5u64.to_le_bytes());
        let e = T::Enum(names(257));
        store(&mut cx, &e, &Val::Enum("n256".into()), 96).unwrap();
        assert_eq!(&cx.mem[96..98], &256u16.to_le_bytes());
    }

    #[test]
    fn roundtrip_flags() {
        for n in [0usize, 1, 8, 9, 16, 17, 32, 33, 64, 65] {
            let ty = T::Flags(names(n));
            roundtrip(&ty, &Val::Flags(vec![]));
            let all: Vec<String> = names(n).to_vec();
            roundtrip(&ty, &Val::Flags(all));
            if n > 0 {
                roundtrip(&ty, &Val::Flags(vec![format!("n{}", n - 1)]));
            }
        }
        let mut cx = TestCx::utf8();
        let ty = T::Flags(names(33));
        let mut core = Vec::new();
        lower_flat(
            &mut cx,
            &ty,
            &Val::Flags(vec!["n32".into(), "n0".into()]),
            &mut core,
        )
        .unwrap();
        assert_eq!(debug(&core), debug(&[CoreVal::I32(1), CoreVal::I32(1)]));
    }

    #[test]
    fn flags_ignore_bits_past_the_last_flag() {
        let mut cx = TestCx::utf8();
        let ty = T::Flags(names(3));
        let got = lift_flat(&mut cx, &ty, &mut [CoreVal::I32(-7)].iter()).unwrap();
        assert_eq!(got, Val::Flags(vec!["n0".into()]));
        cx.mem[64] = 0xfe;
        assert_eq!(
            load(&mut cx, &ty, 64).unwrap(),
            Val::Flags(vec!["n1".into(), "n2".into()])
        );
        let nine = T::Flags(names(9));
        cx.mem[66..68].copy_from_slice(&[0xff, 0xff]);
        assert_eq!(
            load(&mut cx, &nine, 66).unwrap(),
            Val::Flags(names(9).to_vec())
        );
        let src = [CoreVal::I32(0), CoreVal::I32(-1)];
        let got = lift_flat(&mut cx, &T::Flags(names(34)), &mut src.iter()).unwrap();
        assert_eq!(got, Val::Flags(vec!["n32".into(), "n33".into()]));
    }

    #[test]
    fn roundtrip_resources() {
        let own = Val::Resource(ResourceAny::for_tests(2, 7, true));
        let borrow = Val::Resource(ResourceAny::for_tests(1, 3, false));
        roundtrip(&T::Own(2), &own);
        roundtrip(&T::Borrow(1), &borrow);
        roundtrip(&list(T::Own(2)), &Val::List(vec![own.clone(), own.clone()]));
        let mut cx = TestCx::utf8();
        assert_err(
            lower_flat(&mut cx, &T::Own(5), &own, &mut Vec::new()),
            "resource of the wrong type",
        );
        assert_err(
            lower_flat(&mut cx, &T::Own(5), &Val::U32(1), &mut Vec::new()),
            "type mismatch: expected owned resource, found u32",
        );
    }

    fn big_params() -> Vec<T> {
        let mut p = vec![T::U32; 15];
        p.push(T::String);
        p.push(T::U8);
        p
    }

    fn big_args() -> Vec<Val> {
        let mut v: Vec<Val> = (0..15).map(Val::U32).collect();
        v.push(Val::String("spilled".into()));
        v.push(Val::U8(200));
        v
    }

    #[test]
    fn many_params_go_through_memory() {
        let params = big_params();
        assert_eq!(flat_count_all(&params), 18);
        let mut cx = TestCx::utf8();
        let core = lower_export_args(&mut cx, &params, &big_args()).unwrap();
        // One allocation for the tuple (15*4 + 8 + 1 = 69, padded to 72),
        // then the string's.
        assert_eq!(cx.calls, [(0, 0, 4, 72), (0, 0, 1, 7)]);
        assert_eq!(debug(&core), debug(&[CoreVal::I32(16)]));
        let back = lift_import_args(&mut cx, &params, &core).unwrap();
        assert_eq!(back, big_args());
        // Flat params ignore a trailing return pointer.
        let params = [T::U8, T::S64];
        let core = [CoreVal::I32(3), CoreVal::I64(-4), CoreVal::I32(1000)];
        assert_eq!(
            lift_import_args(&mut cx, &params, &core).unwrap(),
            [Val::U8(3), Val::S64(-4)]
        );
    }

    #[test]
    fn many_results_go_through_memory() {
        let results = [tup(&[T::U64, T::String])];
        let vals = [Val::Tuple(vec![Val::U64(77), Val::String("ret".into())])];
        let mut cx = TestCx::utf8();
        let core_args = [CoreVal::I32(1), CoreVal::I32(128)];
        lower_import_results(&mut cx, &results, &vals, &core_args, &mut []).unwrap();
        assert_eq!(&cx.mem[128..136], &77u64.to_le_bytes());
        let back = lift_export_results(&mut cx, &results, &[CoreVal::I32(128)]).unwrap();
        assert_eq!(back, vals);
        // One flat result goes into the core result slot.
        let mut slot = [CoreVal::I32(0)];
        lower_import_results(&mut cx, &[T::Float64], &[Val::Float64(1.0)], &[], &mut slot).unwrap();
        assert_eq!(debug(&slot), debug(&[CoreVal::F64(1.0f64.to_bits())]));
        assert_eq!(
            lift_export_results(&mut cx, &[T::Float64], &slot).unwrap(),
            [Val::Float64(1.0)]
        );
        assert_eq!(lift_export_results(&mut cx, &[], &[]).unwrap(), []);
    }

    #[test]
    fn call_pointer_checks() {
        let results = [tup(&[T::U64, T::U64])];
        let vals = [Val::Tuple(vec![Val::U64(1), Val::U64(2)])];
        let mut cx = TestCx::utf8();
        assert_err(
            lift_export_results(&mut cx, &results, &[CoreVal::I32(4)]),
            "return pointer not aligned",
        );
        assert_err(
            lift_export_results(&mut cx, &results, &[CoreVal::I32(65536 - 8)]),
            "pointer out of bounds of memory",
        );
        assert_err(
            lower_import_results(&mut cx, &results, &vals, &[CoreVal::I32(12)], &mut []),
            "pointer not aligned",
        );
        assert_err(
            lower_import_results(&mut cx, &results, &vals, &[CoreVal::I32(-8)], &mut []),
            "pointer out of bounds",
        );
        let params = big_params();
        assert_err(
            lift_import_args(&mut cx, &params, &[CoreVal::I32(2)]),
            "pointer not aligned",
        );
        assert_err(
            lift_import_args(&mut cx, &params, &[CoreVal::I32(65532)]),
            "pointer out of bounds",
        );
    }

    #[test]
    fn arity_and_shape_errors() {
        let mut cx = TestCx::utf8();
        assert_err(
            lower_export_args(&mut cx, &[T::U8, T::U8], &[Val::U8(1)]),
            "expected 2 argument(s), got 1",
        );
        assert_err(
            lower_import_results(&mut cx, &[T::U8], &[], &[], &mut [CoreVal::I32(0)]),
            "expected 1 result(s), got 0",
        );
        let mut lower = |ty: &T, val: Val| lower_flat(&mut cx, ty, &val, &mut Vec::new());
        assert_err(
            lower(&T::U32, Val::S32(1)),
            "type mismatch: expected u32, found s32",
        );
        assert_err(
            lower(&T::String, Val::List(vec![])),
            "type mismatch: expected string, found list",
        );
        let r = rec(&[("a", T::U8), ("b", T::U8)]);
        assert_err(
            lower(&r, Val::Record(vec![("a".into(), Val::U8(1))])),
            "expected 2 fields, got 1",
        );
        assert_err(
            lower(
                &r,
                Val::Record(vec![("a".into(), Val::U8(1)), ("c".into(), Val::U8(2))]),
            ),
            "expected field `b`, got `c`",
        );
        assert_err(
            lower(&tup(&[T::U8]), Val::Tuple(vec![Val::U8(1), Val::U8(2)])),
            "expected 1 types, got 2",
        );
        let v = var(&[("a", None), ("b", Some(T::U8))]);
        assert_err(
            lower(&v, Val::Variant("z".into(), None)),
            "unknown variant case: `z`",
        );
        assert_err(
            lower(&v, Val::Variant("a".into(), bx(Val::U8(1)))),
            "did not expect a payload for case `a`",
        );
        assert_err(
            lower(&v, Val::Variant("b".into(), None)),
            "expected a payload for case `b`",
        );
        assert_err(
            lower(&v, Val::Enum("a".into())),
            "type mismatch: expected variant, found enum",
        );
        assert_err(
            lower(&T::Enum(names(2)), Val::Enum("x".into())),
            "enum variant name `x` is not valid",
        );
        assert_err(
            lower(&T::Flags(names(2)), Val::Flags(vec!["q".into()])),
            "unknown flag: `q`",
        );
        assert_err(
            lower(&T::Flags(names(0)), Val::Flags(vec!["q".into()])),
            "unknown flag: `q`",
        );
        let r = res(None, Some(T::U8));
        assert_err(
            lower(&r, Val::Result(Ok(bx(Val::U8(1))))),
            "payload provided to `ok` but not expected",
        );
        assert_err(
            lower(&r, Val::Result(Err(None))),
            "payload expected to `err` but not provided",
        );
        assert_err(
            lower(&opt(T::U8), Val::Option(bx(Val::S8(1)))),
            "type mismatch: expected u8, found s8",
        );
        // The same checks hold when storing to memory.
        assert_err(
            store(&mut cx, &r, &Val::Result(Ok(bx(Val::U8(1)))), 64),
            "payload provided to `ok` but not expected",
        );
        assert_err(
            store(&mut cx, &T::U16, &Val::U16(1), 65),
            "pointer not aligned",
        );
        assert_err(
            store(&mut cx, &T::U64, &Val::U64(1), 65536),
            "pointer out of bounds",
        );
        assert_err(
            load(&mut cx, &T::U64, u32::MAX - 7),
            "pointer out of bounds",
        );
    }

    #[test]
    fn core_value_mismatches_are_errors() {
        let mut cx = TestCx::utf8();
        assert_err(
            lift_flat(&mut cx, &T::U32, &mut [CoreVal::I64(1)].iter()),
            "core value type mismatch: expected i32, found i64",
        );
        assert_err(
            lift_flat(&mut cx, &T::String, &mut [CoreVal::I32(0)].iter()),
            "too few core values",
        );
        let v = var(&[("a", Some(T::U64))]);
        assert_err(
            lift_flat(&mut cx, &v, &mut [CoreVal::I32(0), CoreVal::F64(0)].iter()),
            "expected i64, found f64",
        );
        assert_err(
            lift_export_results(&mut cx, &[T::U8], &[]),
            "expected 1 core results, got 0",
        );
        cx.has_memory = false;
        assert_err(
            lift_flat(
                &mut cx,
                &T::String,
                &mut [CoreVal::I32(0), CoreVal::I32(0)].iter(),
            ),
            "no memory",
        );
    }

    #[test]
    fn string_lift_traps() {
        let mut cx = TestCx::utf8();
        let lift = |cx: &mut TestCx, ptr: i32, len: i32| {
            lift_flat(
                cx,
                &T::String,
                &mut [CoreVal::I32(ptr), CoreVal::I32(len)].iter(),
            )
        };
        assert_err(
            lift(&mut cx, 65535, 2),
            "string pointer/length out of bounds of memory",
        );
        assert_err(
            lift(&mut cx, i32::MIN, 1),
            "string pointer/length out of bounds of memory",
        );
        assert_err(
            lift(&mut cx, -1, -1),
            "string pointer/length out of bounds of memory",
        );
        assert_eq!(lift(&mut cx, 65536, 0).unwrap(), Val::String(String::new()));
        cx.mem[10] = 0xff;
        assert_err(lift(&mut cx, 10, 1), "invalid utf-8");
        cx.mem[10..12].copy_from_slice(&[0xe2, 0x82]);
        assert_err(lift(&mut cx, 10, 2), "incomplete utf-8 byte sequence");
        let mut cx = TestCx::new(StringEncoding::Utf16);
        assert_err(lift(&mut cx, 1, 0), "string pointer not aligned to 2");
        assert_err(
            lift(&mut cx, 65534, 2),
            "string pointer/length out of bounds of memory",
        );
        // utf16 byte length 2 * 0xffff_ffff must not wrap.
        assert_err(
            lift(&mut cx, 0, -1),
            "string pointer/length out of bounds of memory",
        );
        cx.mem[20..22].copy_from_slice(&0xd800u16.to_le_bytes());
        assert_err(lift(&mut cx, 20, 1), "unpaired surrogate");
    }

    #[test]
    fn list_lift_traps() {
        let ty = list(T::U32);
        let lift = |cx: &mut TestCx, ty: &T, ptr: i32, len: i32| {
            lift_flat(cx, ty, &mut [CoreVal::I32(ptr), CoreVal::I32(len)].iter())
        };
        let mut cx = TestCx::utf8();
        assert_err(
            lift(&mut cx, &ty, 65532, 2),
            "list pointer/length out of bounds of memory",
        );
        assert_err(lift(&mut cx, &ty, 2, 1), "list pointer is not aligned");
        // Bounds are checked before alignment.
        assert_err(
            lift(&mut cx, &ty, 2, -1),
            "list pointer/length out of bounds of memory",
        );
        assert_err(
            lift(&mut cx, &list(T::U64), -16, -1),
            "list pointer/length out of bounds of memory",
        );
        assert_eq!(lift(&mut cx, &ty, 65536, 0).unwrap(), Val::List(vec![]));
        // In memory too, and through nested lists.
        let mut cx = TestCx::utf8();
        cx.mem[64..72].copy_from_slice(&[0xfc, 0xff, 0, 0, 9, 0, 0, 0]);
        assert_err(
            load(&mut cx, &list(T::U8), 64),
            "list pointer/length out of bounds of memory",
        );
    }

    #[test]
    fn discriminant_traps() {
        let mut cx = TestCx::utf8();
        let o = opt(T::U8);
        let src = [CoreVal::I32(2), CoreVal::I32(0)];
        assert_err(
            lift_flat(&mut cx, &o, &mut src.iter()),
            "discriminant 2 out of range [0..2)",
        );
        let e = T::Enum(names(3));
        assert_err(
            lift_flat(&mut cx, &e, &mut [CoreVal::I32(-1)].iter()),
            "discriminant 4294967295 out of range [0..3)",
        );
        cx.mem[64] = 5;
        let v = var(&[("a", None), ("b", Some(T::U32))]);
        assert_err(load(&mut cx, &v, 64), "discriminant 5 out of range [0..2)");
        assert_err(
            load(&mut cx, &res(None, None), 64),
            "discriminant 5 out of range [0..2)",
        );
    }

    #[test]
    fn char_traps() {
        for bits in [0xd800u32, 0xdfff, 0x11_0000, u32::MAX] {
            let mut cx = TestCx::utf8();
            let src = [CoreVal::I32(bits as i32)];
            assert_err(
                lift_flat(&mut cx, &T::Char, &mut src.iter()),
                "converted integer out of range for `char`",
            );
            cx.mem[64..68].copy_from_slice(&bits.to_le_bytes());
            assert_err(
                load(&mut cx, &list(T::Char), 0).and(load(&mut cx, &T::Char, 64)),
                "out of range",
            );
        }
    }

    #[test]
    fn realloc_result_traps() {
        let lower = |cx: &mut TestCx, ty: &T, val: Val| lower_flat(cx, ty, &val, &mut Vec::new());
        let two = Val::List(vec![Val::U32(1), Val::U32(2)]);
        let mut cx = TestCx::utf8();
        cx.fixed = Some(-4i32 as u32);
        assert_err(
            lower(&mut cx, &list(T::U32), two.clone()),
            "realloc return: beyond end of memory",
        );
        // Even a zero-size allocation must be in bounds.
        assert_err(
            lower(&mut cx, &list(T::U32), Val::List(vec![])),
            "realloc return: beyond end of memory",
        );
        cx.fixed = Some(65536);
        lower(&mut cx, &list(T::U32), Val::List(vec![])).unwrap();
        cx.fixed = Some(u32::MAX);
        // Alignment is checked before bounds.
        assert_err(
            lower(&mut cx, &list(T::U32), two),
            "realloc return: result not aligned",
        );
        assert_err(
            lower(&mut cx, &T::String, Val::String("é".into())),
            "realloc return: beyond end of memory",
        );
        let mut cx = TestCx::new(StringEncoding::Utf16);
        cx.fixed = Some(3);
        assert_err(
            lower(&mut cx, &T::String, Val::String("x".into())),
            "realloc return: result not aligned",
        );
        // A failing realloc's own error comes through unchanged.
        let mut cx = TestCx::utf8();
        cx.has_memory = false;
        assert_err(
            lower(&mut cx, &T::String, Val::String("a".into())),
            "no memory",
        );
    }

    /// Arbitrary memory and core values must give values or errors, never a
    /// panic, for every shape of type.
    #[test]
    fn garbage_never_panics() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let v = var(&[
            ("a", Some(T::Float32)),
            ("b", Some(list(T::String))),
            ("c", None),
            ("d", Some(tup(&[T::Char, T::S64]))),
        ]);
        let types = [
            T::String,
            list(T::U16),
            list(list(T::Char)),
            v.clone(),
            list(v.clone()),
            rec(&[
                ("x", opt(T::String)),
                ("y", T::Flags(names(40))),
                ("z", T::Enum(names(3))),
            ]),
            res(Some(T::Char), Some(list(T::Own(0)))),
        ];
        for enc in [
            StringEncoding::Utf8,
            StringEncoding::Utf16,
            StringEncoding::CompactUtf16,
        ] {
            let mut cx = TestCx::new(enc);
            cx.mem = vec![0; 4096];
            for round in 0..3000 {
                for b in cx.mem.iter_mut() {
                    // Mostly small numbers so that pointers often land inside.
                    *b = match rand() % 4 {
                        0 => rand() as u8,
                        _ => (rand() % 16) as u8,
                    };
                }
                let ty = &types[round % types.len()];
                let ptr = (rand() % 4200) as u32 & !7;
                let _ = load(&mut cx, ty, ptr);
                let core: Vec<CoreVal> = flat(ty)
                    .iter()
                    .map(|t| match t {
                        FlatTy::I32 => CoreVal::I32((rand() % 5000) as i32),
                        FlatTy::I64 => CoreVal::I64(rand() as i64),
                        FlatTy::F32 => CoreVal::F32(rand() as u32),
                        FlatTy::F64 => CoreVal::F64(rand()),
                    })
                    .collect();
                let _ = lift_flat(&mut cx, ty, &mut core.iter());
            }
        }
    }
}
