//! Typed calls: [`ComponentType`], [`Lift`], [`Lower`] and
//! [`ComponentNamedList`] for Rust types, [`TypedFunc`], and the typed host
//! functions of [`LinkerInstance::func_wrap`](super::LinkerInstance::func_wrap).
//!
//! A Rust type stands for an interface type: `u32` for `u32`, `String` and
//! `&str` for `string`, `Vec<T>` and `&[T]` for `list<T>`, `Option<T>`,
//! `Result<T, E>` (with `()` for a case without payload), tuples for
//! `tuple<..>` and for parameter and result lists, [`Resource<T>`] and
//! [`ResourceAny`] for handles, and records, variants, enums and flags
//! through the derive macros. The type is checked against the component's
//! once, when a [`TypedFunc`] is made or a host function is linked, so a
//! call cannot meet a value of the wrong shape.
//!
//! Values go straight between Rust and the guest: each type lowers itself
//! into flat core values or into guest memory, and lifts itself back, with
//! the same checks, `realloc` calls and error texts as the dynamic
//! canonical ABI of [`Val`](super::Val) (`abi.rs`), whose helpers it uses.
//! Lists of numbers are copied in one piece.
//!
//! [`Resource<T>`]: super::Resource
//! [`ResourceAny`]: super::ResourceAny

use super::abi::{self, AbiCx};
use super::func::Func;
use super::types::{InterfaceType, Type};
use crate::Val as CoreVal;
use crate::{AsContext, AsContextMut};
use anyhow::{Result, anyhow, bail};
use std::marker::PhantomData;
use std::sync::Arc;

/// One side of a call as typed lifting and lowering see it: the memory,
/// `realloc`, string encoding and handle tables of the canonical options.
/// Only the runtime makes one.
#[doc(hidden)]
pub struct AbiContext<'a>(pub(crate) &'a mut dyn AbiCx);

/// The flat core values a value is lifted from.
#[doc(hidden)]
pub type FlatSource<'a> = std::slice::Iter<'a, CoreVal>;

/// A Rust type that stands for a component interface type.
///
/// Implemented for the primitive types, strings, lists, options, results,
/// tuples and resources, and by `#[derive(ComponentType)]`; the methods
/// are the runtime's, not meant to be called by embedders.
pub trait ComponentType: Send + Sync {
    /// Whether this is `()`, which also stands for "no payload" in an
    /// `option`, `result` or `variant` case.
    #[doc(hidden)]
    const IS_UNIT: bool = false;

    /// Fails unless `ty` is the interface type this Rust type stands for.
    #[doc(hidden)]
    fn typecheck(ty: &Type) -> Result<()>;
}

/// A [`ComponentType`] that can be received from a component.
pub trait Lift: ComponentType + Sized {
    /// Reads a value of type `ty` (already checked to be this Rust type's)
    /// from flat core values.
    #[doc(hidden)]
    fn lift_flat(cx: &mut AbiContext<'_>, ty: &Type, src: &mut FlatSource<'_>) -> Result<Self>;

    /// Reads a value of type `ty` stored at `offset` of the guest's memory.
    #[doc(hidden)]
    fn load(cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<Self>;

    /// Reads `len` elements of type `elem` stored one after another from
    /// `offset`, already checked to be in bounds and aligned.
    #[doc(hidden)]
    fn load_list(cx: &mut AbiContext<'_>, elem: &Type, offset: u64, len: u32) -> Result<Vec<Self>> {
        let size = u64::from(abi::layout(&elem.0).size);
        (0..u64::from(len))
            .map(|i| Self::load(cx, elem, offset + i * size))
            .collect()
    }
}

/// A [`ComponentType`] that can be passed to a component.
pub trait Lower: ComponentType {
    /// Appends the value's flat core values, as type `ty`, to `dst`.
    #[doc(hidden)]
    fn lower_flat(&self, cx: &mut AbiContext<'_>, ty: &Type, dst: &mut Vec<CoreVal>) -> Result<()>;

    /// Writes the value, as type `ty`, at `offset` of the guest's memory.
    #[doc(hidden)]
    fn store(&self, cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<()>;

    /// Writes `items`, elements of type `elem`, one after another from
    /// `offset`.
    #[doc(hidden)]
    fn store_list(items: &[Self], cx: &mut AbiContext<'_>, elem: &Type, offset: u64) -> Result<()>
    where
        Self: Sized,
    {
        let size = u64::from(abi::layout(&elem.0).size);
        for (i, item) in items.iter().enumerate() {
            item.store(cx, elem, offset + i as u64 * size)?;
        }
        Ok(())
    }
}

/// A tuple used as a list of parameters or results (`()`, `(A,)`, `(A, B)`
/// and so on, up to 16 elements).
pub trait ComponentNamedList: ComponentType {}

fn mismatch(expected: &str, ty: &Type) -> anyhow::Error {
    anyhow!("type mismatch: expected {expected}, found {}", ty.desc())
}

// ---------------------------------------------------------------------------
// Primitives

/// Numbers: flat as one core value, stored little-endian, and lists of
/// them copied in one piece.
macro_rules! numbers {
    ($($rust:ty => $variant:ident $wit:literal, $to_core:expr, $from_core:expr;)*) => {$(
        impl ComponentType for $rust {
            fn typecheck(ty: &Type) -> Result<()> {
                match ty.0 {
                    InterfaceType::$variant => Ok(()),
                    _ => Err(mismatch($wit, ty)),
                }
            }
        }

        impl Lift for $rust {
            fn lift_flat(_: &mut AbiContext<'_>, _: &Type, src: &mut FlatSource<'_>) -> Result<Self> {
                let from_core: fn(&mut FlatSource<'_>) -> Result<$rust> = $from_core;
                from_core(src)
            }

            fn load(cx: &mut AbiContext<'_>, _: &Type, offset: u64) -> Result<Self> {
                Ok(<$rust>::from_le_bytes(abi::read(cx.0, offset)?))
            }

            fn load_list(cx: &mut AbiContext<'_>, _: &Type, offset: u64, len: u32) -> Result<Vec<Self>> {
                const SIZE: usize = std::mem::size_of::<$rust>();
                let bytes = abi::mem_range(cx.0.memory()?, offset, u64::from(len) * SIZE as u64)?;
                Ok(bytes
                    .chunks_exact(SIZE)
                    .map(|c| <$rust>::from_le_bytes(c.try_into().expect("chunks of the size")))
                    .collect())
            }
        }

        impl Lower for $rust {
            fn lower_flat(&self, _: &mut AbiContext<'_>, _: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
                let to_core: fn($rust) -> CoreVal = $to_core;
                dst.push(to_core(*self));
                Ok(())
            }

            fn store(&self, cx: &mut AbiContext<'_>, _: &Type, offset: u64) -> Result<()> {
                abi::write(cx.0, offset, &self.to_le_bytes())
            }

            fn store_list(items: &[Self], cx: &mut AbiContext<'_>, _: &Type, offset: u64) -> Result<()> {
                const SIZE: usize = std::mem::size_of::<$rust>();
                let len = items.len() as u64 * SIZE as u64;
                let bytes = abi::mem_range(cx.0.memory()?, offset, len)?;
                for (slot, item) in bytes.chunks_exact_mut(SIZE).zip(items) {
                    slot.copy_from_slice(&item.to_le_bytes());
                }
                Ok(())
            }
        }
    )*};
}

numbers! {
    i8 => S8 "s8", |x| CoreVal::I32(i32::from(x)), |s| Ok(abi::next_i32(s)? as i8);
    u8 => U8 "u8", |x| CoreVal::I32(i32::from(x)), |s| Ok(abi::next_u32(s)? as u8);
    i16 => S16 "s16", |x| CoreVal::I32(i32::from(x)), |s| Ok(abi::next_i32(s)? as i16);
    u16 => U16 "u16", |x| CoreVal::I32(i32::from(x)), |s| Ok(abi::next_u32(s)? as u16);
    i32 => S32 "s32", CoreVal::I32, abi::next_i32;
    u32 => U32 "u32", |x| CoreVal::I32(x as i32), abi::next_u32;
    i64 => S64 "s64", CoreVal::I64, abi::next_i64;
    u64 => U64 "u64", |x| CoreVal::I64(x as i64), |s| Ok(abi::next_i64(s)? as u64);
    f32 => Float32 "f32", |x| CoreVal::F32(x.to_bits()), |s| Ok(f32::from_bits(abi::next_f32(s)?));
    f64 => Float64 "f64", |x| CoreVal::F64(x.to_bits()), |s| Ok(f64::from_bits(abi::next_f64(s)?));
}

impl ComponentType for bool {
    fn typecheck(ty: &Type) -> Result<()> {
        match ty.0 {
            InterfaceType::Bool => Ok(()),
            _ => Err(mismatch("bool", ty)),
        }
    }
}

impl Lift for bool {
    fn lift_flat(_: &mut AbiContext<'_>, _: &Type, src: &mut FlatSource<'_>) -> Result<Self> {
        Ok(abi::next_i32(src)? != 0)
    }

    fn load(cx: &mut AbiContext<'_>, _: &Type, offset: u64) -> Result<Self> {
        Ok(abi::read::<1>(cx.0, offset)?[0] != 0)
    }
}

impl Lower for bool {
    fn lower_flat(&self, _: &mut AbiContext<'_>, _: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
        dst.push(CoreVal::I32(i32::from(*self)));
        Ok(())
    }

    fn store(&self, cx: &mut AbiContext<'_>, _: &Type, offset: u64) -> Result<()> {
        abi::write(cx.0, offset, &[u8::from(*self)])
    }
}

impl ComponentType for char {
    fn typecheck(ty: &Type) -> Result<()> {
        match ty.0 {
            InterfaceType::Char => Ok(()),
            _ => Err(mismatch("char", ty)),
        }
    }
}

impl Lift for char {
    fn lift_flat(_: &mut AbiContext<'_>, _: &Type, src: &mut FlatSource<'_>) -> Result<Self> {
        Ok(char::try_from(abi::next_u32(src)?)?)
    }

    fn load(cx: &mut AbiContext<'_>, _: &Type, offset: u64) -> Result<Self> {
        Ok(char::try_from(abi::read_u32(cx.0, offset)?)?)
    }
}

impl Lower for char {
    fn lower_flat(&self, _: &mut AbiContext<'_>, _: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
        dst.push(CoreVal::I32(u32::from(*self) as i32));
        Ok(())
    }

    fn store(&self, cx: &mut AbiContext<'_>, _: &Type, offset: u64) -> Result<()> {
        abi::write(cx.0, offset, &u32::from(*self).to_le_bytes())
    }
}

// ---------------------------------------------------------------------------
// Strings and lists

impl ComponentType for str {
    fn typecheck(ty: &Type) -> Result<()> {
        match ty.0 {
            InterfaceType::String => Ok(()),
            _ => Err(mismatch("string", ty)),
        }
    }
}

impl Lower for str {
    fn lower_flat(&self, cx: &mut AbiContext<'_>, _: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
        let (ptr, len) = abi::lower_string(cx.0, self)?;
        dst.extend([CoreVal::I32(ptr as i32), CoreVal::I32(len as i32)]);
        Ok(())
    }

    fn store(&self, cx: &mut AbiContext<'_>, _: &Type, offset: u64) -> Result<()> {
        let (ptr, len) = abi::lower_string(cx.0, self)?;
        abi::write_pair(cx.0, offset, ptr, len)
    }
}

impl ComponentType for String {
    fn typecheck(ty: &Type) -> Result<()> {
        str::typecheck(ty)
    }
}

impl Lift for String {
    fn lift_flat(cx: &mut AbiContext<'_>, _: &Type, src: &mut FlatSource<'_>) -> Result<Self> {
        let ptr = abi::next_u32(src)?;
        let len = abi::next_u32(src)?;
        abi::lift_str(cx.0, ptr, len)
    }

    fn load(cx: &mut AbiContext<'_>, _: &Type, offset: u64) -> Result<Self> {
        let ptr = abi::read_u32(cx.0, offset)?;
        let len = abi::read_u32(cx.0, offset + 4)?;
        abi::lift_str(cx.0, ptr, len)
    }
}

impl Lower for String {
    fn lower_flat(&self, cx: &mut AbiContext<'_>, ty: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
        self.as_str().lower_flat(cx, ty, dst)
    }

    fn store(&self, cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<()> {
        self.as_str().store(cx, ty, offset)
    }
}

fn list_element(ty: &Type) -> Result<&Type> {
    match &ty.0 {
        InterfaceType::List(element) => Ok(Type::wrap(element)),
        _ => Err(mismatch("list", ty)),
    }
}

/// Copies `items` into a new guest allocation; returns pointer and length.
fn lower_list<T: Lower>(cx: &mut AbiContext<'_>, ty: &Type, items: &[T]) -> Result<(u32, u32)> {
    let elem = list_element(ty)?;
    let l = abi::layout(&elem.0);
    let size = (items.len() as u64)
        .checked_mul(u64::from(l.size))
        .ok_or_else(|| anyhow!("size overflow copying a list"))?;
    let len = u32::try_from(items.len())?;
    // Upstream allocates even for an empty list.
    let ptr = abi::realloc(cx.0, 0, 0, l.align, size)?;
    T::store_list(items, cx, elem, u64::from(ptr))?;
    Ok((ptr, len))
}

fn lift_list<T: Lift>(cx: &mut AbiContext<'_>, ty: &Type, ptr: u32, len: u32) -> Result<Vec<T>> {
    let elem = list_element(ty)?;
    abi::check_list(cx.0, abi::layout(&elem.0), ptr, len)?;
    T::load_list(cx, elem, u64::from(ptr), len)
}

impl<T: ComponentType> ComponentType for [T] {
    fn typecheck(ty: &Type) -> Result<()> {
        T::typecheck(list_element(ty)?)
    }
}

impl<T: Lower> Lower for [T] {
    fn lower_flat(&self, cx: &mut AbiContext<'_>, ty: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
        let (ptr, len) = lower_list(cx, ty, self)?;
        dst.extend([CoreVal::I32(ptr as i32), CoreVal::I32(len as i32)]);
        Ok(())
    }

    fn store(&self, cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<()> {
        let (ptr, len) = lower_list(cx, ty, self)?;
        abi::write_pair(cx.0, offset, ptr, len)
    }
}

impl<T: ComponentType> ComponentType for Vec<T> {
    fn typecheck(ty: &Type) -> Result<()> {
        <[T]>::typecheck(ty)
    }
}

impl<T: Lift> Lift for Vec<T> {
    fn lift_flat(cx: &mut AbiContext<'_>, ty: &Type, src: &mut FlatSource<'_>) -> Result<Self> {
        let ptr = abi::next_u32(src)?;
        let len = abi::next_u32(src)?;
        lift_list(cx, ty, ptr, len)
    }

    fn load(cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<Self> {
        let ptr = abi::read_u32(cx.0, offset)?;
        let len = abi::read_u32(cx.0, offset + 4)?;
        lift_list(cx, ty, ptr, len)
    }
}

impl<T: Lower> Lower for Vec<T> {
    fn lower_flat(&self, cx: &mut AbiContext<'_>, ty: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
        self.as_slice().lower_flat(cx, ty, dst)
    }

    fn store(&self, cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<()> {
        self.as_slice().store(cx, ty, offset)
    }
}

// ---------------------------------------------------------------------------
// References and boxes: the value they point to.

impl<T: ComponentType + ?Sized> ComponentType for &T {
    const IS_UNIT: bool = T::IS_UNIT;

    fn typecheck(ty: &Type) -> Result<()> {
        T::typecheck(ty)
    }
}

impl<T: Lower + ?Sized> Lower for &T {
    fn lower_flat(&self, cx: &mut AbiContext<'_>, ty: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
        T::lower_flat(self, cx, ty, dst)
    }

    fn store(&self, cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<()> {
        T::store(self, cx, ty, offset)
    }
}

impl<T: ComponentType + ?Sized> ComponentType for Box<T> {
    const IS_UNIT: bool = T::IS_UNIT;

    fn typecheck(ty: &Type) -> Result<()> {
        T::typecheck(ty)
    }
}

impl<T: Lift> Lift for Box<T> {
    fn lift_flat(cx: &mut AbiContext<'_>, ty: &Type, src: &mut FlatSource<'_>) -> Result<Self> {
        T::lift_flat(cx, ty, src).map(Box::new)
    }

    fn load(cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<Self> {
        T::load(cx, ty, offset).map(Box::new)
    }
}

impl<T: Lower + ?Sized> Lower for Box<T> {
    fn lower_flat(&self, cx: &mut AbiContext<'_>, ty: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
        T::lower_flat(self, cx, ty, dst)
    }

    fn store(&self, cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<()> {
        T::store(self, cx, ty, offset)
    }
}

// ---------------------------------------------------------------------------
// Variant-like types: what `option`, `result` and the derives share.

/// Lowers case `case` of the variant-like type `ty` into flat values: its
/// discriminant, then `payload` (given exactly when the case has one, or
/// `()` for a case without), widened to the variant's slots and padded.
#[doc(hidden)]
pub fn lower_case_flat<P: Lower + ?Sized>(
    cx: &mut AbiContext<'_>,
    ty: &Type,
    case: u32,
    payload: Option<&P>,
    dst: &mut Vec<CoreVal>,
) -> Result<()> {
    dst.push(CoreVal::I32(case as i32));
    let start = dst.len();
    match (payload, abi::case_payload(&ty.0, case)) {
        (Some(p), Some(t)) => p.lower_flat(cx, Type::wrap(t), dst)?,
        (None, None) => {}
        (Some(_), None) if P::IS_UNIT => {}
        _ => bail!("type mismatch: the payload of case {case} does not match its type"),
    }
    abi::finish_flat_case(&ty.0, dst, start)
}

/// Stores case `case` of the variant-like type `ty` at `offset`, as
/// [`lower_case_flat`] lowers it.
#[doc(hidden)]
pub fn store_case<P: Lower + ?Sized>(
    cx: &mut AbiContext<'_>,
    ty: &Type,
    case: u32,
    payload: Option<&P>,
    offset: u64,
) -> Result<()> {
    let at = abi::store_case_disc(cx.0, &ty.0, case, offset)?;
    match (payload, abi::case_payload(&ty.0, case)) {
        (Some(p), Some(t)) => p.store(cx, Type::wrap(t), at),
        (None, None) => Ok(()),
        (Some(_), None) if P::IS_UNIT => Ok(()),
        _ => bail!("type mismatch: the payload of case {case} does not match its type"),
    }
}

/// A variant-like value read from flat core values: which case, and its
/// payload's slots, lifted on demand with the case's Rust type.
#[doc(hidden)]
pub struct FlatCase<'t> {
    index: u32,
    payload: Option<&'t Type>,
    slots: Vec<CoreVal>,
}

impl<'t> FlatCase<'t> {
    /// Reads the discriminant (checked against the number of cases) and
    /// the payload slots of a value of `ty`.
    pub fn read(ty: &'t Type, src: &mut FlatSource<'_>) -> Result<FlatCase<'t>> {
        let (index, slots) = abi::read_flat_case(&ty.0, src)?;
        let payload = abi::case_payload(&ty.0, index).map(Type::wrap);
        Ok(FlatCase {
            index,
            payload,
            slots,
        })
    }

    /// The case's index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Lifts the payload as a `P` (`()` for a case without one).
    pub fn payload<P: Lift>(&self, cx: &mut AbiContext<'_>) -> Result<P> {
        match self.payload {
            Some(t) => P::lift_flat(cx, t, &mut self.slots.iter()),
            None => unit_payload(cx),
        }
    }
}

/// A variant-like value in guest memory: which case, and where its payload
/// is.
#[doc(hidden)]
pub struct StoredCase<'t> {
    index: u32,
    payload: Option<&'t Type>,
    offset: u64,
}

impl<'t> StoredCase<'t> {
    /// Reads the discriminant of the value of `ty` at `offset`, checked
    /// against the number of cases.
    pub fn read(cx: &mut AbiContext<'_>, ty: &'t Type, offset: u64) -> Result<StoredCase<'t>> {
        let (index, offset) = abi::load_case_disc(cx.0, &ty.0, offset)?;
        let payload = abi::case_payload(&ty.0, index).map(Type::wrap);
        Ok(StoredCase {
            index,
            payload,
            offset,
        })
    }

    /// The case's index.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// Loads the payload as a `P` (`()` for a case without one).
    pub fn payload<P: Lift>(&self, cx: &mut AbiContext<'_>) -> Result<P> {
        match self.payload {
            Some(t) => P::load(cx, t, self.offset),
            None => unit_payload(cx),
        }
    }
}

/// The value of a case without payload: only `()` stands for one (the
/// types were checked so).
fn unit_payload<P: Lift>(cx: &mut AbiContext<'_>) -> Result<P> {
    if !P::IS_UNIT {
        bail!("type mismatch: expected a case with a payload, found one without");
    }
    P::lift_flat(cx, Type::wrap(&InterfaceType::Bool), &mut [].iter())
}

/// An error for a discriminant that the derive's cases do not cover
/// (impossible after the type check, but never a panic).
#[doc(hidden)]
pub fn unknown_case(index: u32) -> anyhow::Error {
    anyhow!("case {index} is unknown to the Rust type")
}

/// Checks a case payload: `()` stands for a case without one.
fn typecheck_payload<T: ComponentType>(payload: Option<&InterfaceType>, what: &str) -> Result<()> {
    match payload {
        None if T::IS_UNIT => Ok(()),
        None => bail!("type mismatch: expected a {what} with a payload, found one without"),
        Some(ty) => T::typecheck(Type::wrap(ty)),
    }
}

impl<T: ComponentType> ComponentType for Option<T> {
    fn typecheck(ty: &Type) -> Result<()> {
        match &ty.0 {
            InterfaceType::Option(inner) => T::typecheck(Type::wrap(inner)),
            _ => Err(mismatch("option", ty)),
        }
    }
}

impl<T: Lift> Lift for Option<T> {
    fn lift_flat(cx: &mut AbiContext<'_>, ty: &Type, src: &mut FlatSource<'_>) -> Result<Self> {
        let case = FlatCase::read(ty, src)?;
        Ok(match case.index() {
            0 => None,
            _ => Some(case.payload(cx)?),
        })
    }

    fn load(cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<Self> {
        let case = StoredCase::read(cx, ty, offset)?;
        Ok(match case.index() {
            0 => None,
            _ => Some(case.payload(cx)?),
        })
    }
}

impl<T: Lower> Lower for Option<T> {
    fn lower_flat(&self, cx: &mut AbiContext<'_>, ty: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
        match self {
            None => lower_case_flat::<T>(cx, ty, 0, None, dst),
            Some(v) => lower_case_flat(cx, ty, 1, Some(v), dst),
        }
    }

    fn store(&self, cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<()> {
        match self {
            None => store_case::<T>(cx, ty, 0, None, offset),
            Some(v) => store_case(cx, ty, 1, Some(v), offset),
        }
    }
}

impl<T: ComponentType, E: ComponentType> ComponentType for std::result::Result<T, E> {
    fn typecheck(ty: &Type) -> Result<()> {
        match &ty.0 {
            InterfaceType::Result(cases) => {
                typecheck_payload::<T>(cases.0.as_ref(), "result `ok` case")?;
                typecheck_payload::<E>(cases.1.as_ref(), "result `err` case")
            }
            _ => Err(mismatch("result", ty)),
        }
    }
}

impl<T: Lift, E: Lift> Lift for std::result::Result<T, E> {
    fn lift_flat(cx: &mut AbiContext<'_>, ty: &Type, src: &mut FlatSource<'_>) -> Result<Self> {
        let case = FlatCase::read(ty, src)?;
        Ok(match case.index() {
            0 => Ok(case.payload(cx)?),
            _ => Err(case.payload(cx)?),
        })
    }

    fn load(cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<Self> {
        let case = StoredCase::read(cx, ty, offset)?;
        Ok(match case.index() {
            0 => Ok(case.payload(cx)?),
            _ => Err(case.payload(cx)?),
        })
    }
}

impl<T: Lower, E: Lower> Lower for std::result::Result<T, E> {
    fn lower_flat(&self, cx: &mut AbiContext<'_>, ty: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
        match self {
            Ok(v) => lower_case_flat(cx, ty, 0, Some(v), dst),
            Err(v) => lower_case_flat(cx, ty, 1, Some(v), dst),
        }
    }

    fn store(&self, cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<()> {
        match self {
            Ok(v) => store_case(cx, ty, 0, Some(v), offset),
            Err(v) => store_case(cx, ty, 1, Some(v), offset),
        }
    }
}

// ---------------------------------------------------------------------------
// Records, enums and flags: what the derives call.

/// A Rust type's check of an interface type ([`ComponentType::typecheck`]).
#[doc(hidden)]
pub type TypeCheckFn = fn(&Type) -> Result<()>;

/// Checks that `ty` is a record with exactly these fields, in this order,
/// each of the type its check accepts.
#[doc(hidden)]
pub fn typecheck_record(ty: &Type, fields: &[(&str, TypeCheckFn)]) -> Result<()> {
    let InterfaceType::Record(actual) = &ty.0 else {
        return Err(mismatch("record", ty));
    };
    if actual.len() != fields.len() {
        bail!(
            "type mismatch: expected a record of {} fields, found one of {}",
            fields.len(),
            actual.len()
        );
    }
    for ((name, check), (actual_name, actual_ty)) in fields.iter().zip(actual.iter()) {
        if name != actual_name {
            bail!("type mismatch: expected record field `{name}`, found `{actual_name}`");
        }
        check(Type::wrap(actual_ty)).map_err(|e| e.context(format!("in record field `{name}`")))?;
    }
    Ok(())
}

/// Checks that `ty` is a variant with exactly these cases, in this order,
/// each with a payload exactly when its check is given.
#[doc(hidden)]
pub fn typecheck_variant(ty: &Type, cases: &[(&str, Option<TypeCheckFn>)]) -> Result<()> {
    let InterfaceType::Variant(actual) = &ty.0 else {
        return Err(mismatch("variant", ty));
    };
    if actual.len() != cases.len() {
        bail!(
            "type mismatch: expected a variant of {} cases, found one of {}",
            cases.len(),
            actual.len()
        );
    }
    for ((name, check), (actual_name, actual_ty)) in cases.iter().zip(actual.iter()) {
        if name != actual_name {
            bail!("type mismatch: expected variant case `{name}`, found `{actual_name}`");
        }
        match (check, actual_ty) {
            (Some(check), Some(t)) => {
                check(Type::wrap(t)).map_err(|e| e.context(format!("in variant case `{name}`")))?
            }
            (None, None) => {}
            (Some(_), None) => {
                bail!("type mismatch: variant case `{name}` has no payload in the component")
            }
            (None, Some(_)) => bail!("type mismatch: variant case `{name}` has a payload"),
        }
    }
    Ok(())
}

fn typecheck_names(ty: &Type, kind: &str, names: &[&str], actual: &[String]) -> Result<()> {
    if actual.len() != names.len() {
        bail!(
            "type mismatch: expected {kind} of {} names, found one of {}",
            names.len(),
            actual.len()
        );
    }
    for (name, actual_name) in names.iter().zip(actual.iter()) {
        if name != actual_name {
            bail!(
                "type mismatch: expected {kind} name `{name}`, found `{actual_name}` in `{}`",
                ty.desc()
            );
        }
    }
    Ok(())
}

/// Checks that `ty` is an enum with exactly these names, in this order.
#[doc(hidden)]
pub fn typecheck_enum(ty: &Type, names: &[&str]) -> Result<()> {
    match &ty.0 {
        InterfaceType::Enum(actual) => typecheck_names(ty, "an enum", names, actual),
        _ => Err(mismatch("enum", ty)),
    }
}

/// Checks that `ty` is a flags type with exactly these names, in this order.
#[doc(hidden)]
pub fn typecheck_flags(ty: &Type, names: &[&str]) -> Result<()> {
    match &ty.0 {
        InterfaceType::Flags(actual) => typecheck_names(ty, "flags", names, actual),
        _ => Err(mismatch("flags", ty)),
    }
}

/// The fields of a record type in order, with where each is stored
/// relative to the record.
#[doc(hidden)]
pub struct Fields<'t> {
    fields: std::slice::Iter<'t, (String, InterfaceType)>,
    end: u64,
}

impl<'t> Fields<'t> {
    /// The fields of `ty`, which must be a record.
    pub fn of(ty: &'t Type) -> Result<Fields<'t>> {
        match &ty.0 {
            InterfaceType::Record(fields) => Ok(Fields {
                fields: fields.iter(),
                end: 0,
            }),
            _ => Err(mismatch("record", ty)),
        }
    }

    fn next_ty(&mut self) -> Result<&'t InterfaceType> {
        self.fields
            .next()
            .map(|(_, t)| t)
            .ok_or_else(|| anyhow!("type mismatch: the record has fewer fields"))
    }

    /// The next field's type.
    pub fn next_flat(&mut self) -> Result<&'t Type> {
        self.next_ty().map(Type::wrap)
    }

    /// The next field's type and offset from the start of the record.
    pub fn next_stored(&mut self) -> Result<(&'t Type, u64)> {
        let t = self.next_ty()?;
        Ok((
            Type::wrap(t),
            abi::next_field(&mut self.end, abi::layout(t)),
        ))
    }
}

/// Lowers a flags value, given as 32-bit words (flag `i` is bit `i % 32`
/// of word `i / 32`), into flat values.
#[doc(hidden)]
pub fn lower_flags(words: &[u32], dst: &mut Vec<CoreVal>) {
    dst.extend(words.iter().map(|w| CoreVal::I32(*w as i32)));
}

/// Stores a flags value of type `ty`, given as 32-bit words, at `offset`.
#[doc(hidden)]
pub fn store_flags(cx: &mut AbiContext<'_>, ty: &Type, words: &[u32], offset: u64) -> Result<()> {
    abi::store_flag_words(cx.0, &ty.0, words, offset)
}

/// Lifts a flags value of type `ty` from flat values into 32-bit words;
/// bits past the last flag are dropped.
#[doc(hidden)]
pub fn lift_flags(ty: &Type, src: &mut FlatSource<'_>) -> Result<Vec<u32>> {
    abi::lift_flag_words(&ty.0, src)
}

/// Loads a flags value of type `ty` at `offset` into 32-bit words; bits
/// past the last flag are dropped.
#[doc(hidden)]
pub fn load_flags(cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<Vec<u32>> {
    abi::load_flag_words(cx.0, &ty.0, offset)
}

// ---------------------------------------------------------------------------
// Resource handles

/// Takes the handle `index` of type `ty` (`own` or `borrow`) from the side
/// of the call `cx` stands for.
pub(crate) fn lift_handle(
    cx: &mut AbiContext<'_>,
    ty: &Type,
    index: u32,
) -> Result<super::ResourceAny> {
    match ty.0 {
        InterfaceType::Own(table) => cx.0.lift_own(table, index),
        InterfaceType::Borrow(table) => cx.0.lift_borrow(table, index),
        _ => Err(mismatch("resource", ty)),
    }
}

/// Gives `resource` to the side of the call `cx` stands for, as a handle
/// of type `ty`; returns its index there.
pub(crate) fn lower_handle(
    cx: &mut AbiContext<'_>,
    ty: &Type,
    resource: &super::ResourceAny,
) -> Result<u32> {
    match ty.0 {
        InterfaceType::Own(table) => cx.0.lower_own(table, resource),
        InterfaceType::Borrow(table) => cx.0.lower_borrow(table, resource),
        _ => Err(mismatch("resource", ty)),
    }
}

// ---------------------------------------------------------------------------
// Tuples

fn tuple_types(ty: &Type, arity: usize) -> Result<&[InterfaceType]> {
    match &ty.0 {
        InterfaceType::Tuple(tys) if tys.len() == arity => Ok(tys),
        InterfaceType::Tuple(tys) => bail!(
            "type mismatch: expected a tuple of {arity} element(s), found one of {}",
            tys.len()
        ),
        _ => Err(mismatch("tuple", ty)),
    }
}

/// The element types a tuple value of `arity` elements lifts or lowers
/// with. The empty tuple also stands for a case without payload, so it
/// accepts any type and has no elements.
fn element_types(ty: &Type, arity: usize) -> Result<&[InterfaceType]> {
    if arity == 0 {
        return Ok(&[]);
    }
    tuple_types(ty, arity)
}

macro_rules! tuples {
    ($(($($t:ident $i:tt),*))*) => {$(
        impl<$($t: ComponentType),*> ComponentType for ($($t,)*) {
            const IS_UNIT: bool = tuples!(@is_unit $($t)*);

            fn typecheck(ty: &Type) -> Result<()> {
                #[allow(unused_variables, reason = "the empty tuple checks no element")]
                let tys = tuple_types(ty, tuples!(@count $($t)*))?;
                $($t::typecheck(Type::wrap(&tys[$i]))?;)*
                Ok(())
            }
        }

        impl<$($t: Lift),*> Lift for ($($t,)*) {
            #[allow(unused_variables, reason = "the empty tuple reads nothing")]
            fn lift_flat(cx: &mut AbiContext<'_>, ty: &Type, src: &mut FlatSource<'_>) -> Result<Self> {
                let tys = element_types(ty, tuples!(@count $($t)*))?;
                Ok(($($t::lift_flat(cx, Type::wrap(&tys[$i]), src)?,)*))
            }

            #[allow(unused_variables, unused_mut, reason = "the empty tuple reads nothing")]
            fn load(cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<Self> {
                let tys = element_types(ty, tuples!(@count $($t)*))?;
                let mut end = 0;
                Ok(($({
                    let t = &tys[$i];
                    let at = abi::next_field(&mut end, abi::layout(t));
                    $t::load(cx, Type::wrap(t), offset + at)?
                },)*))
            }
        }

        impl<$($t: Lower),*> Lower for ($($t,)*) {
            #[allow(unused_variables, reason = "the empty tuple writes nothing")]
            fn lower_flat(&self, cx: &mut AbiContext<'_>, ty: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
                let tys = element_types(ty, tuples!(@count $($t)*))?;
                $(self.$i.lower_flat(cx, Type::wrap(&tys[$i]), dst)?;)*
                Ok(())
            }

            #[allow(unused_variables, unused_mut, reason = "the empty tuple writes nothing")]
            fn store(&self, cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<()> {
                let tys = element_types(ty, tuples!(@count $($t)*))?;
                let mut end = 0;
                $({
                    let t = &tys[$i];
                    let at = abi::next_field(&mut end, abi::layout(t));
                    self.$i.store(cx, Type::wrap(t), offset + at)?;
                })*
                Ok(())
            }
        }

        impl<$($t: ComponentType),*> ComponentNamedList for ($($t,)*) {}
    )*};
    (@is_unit) => { true };
    (@is_unit $($t:ident)+) => { false };
    (@count $($t:ident)*) => { <[&str]>::len(&[$(stringify!($t)),*]) };
}

tuples! {
    ()
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
    (A 0, B 1, C 2, D 3, E 4)
    (A 0, B 1, C 2, D 3, E 4, F 5)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11, M 12, N 13, O 14, P 15)
}

/// A parameter or result list as the tuple type that checks it.
pub(crate) fn list_type(tys: impl IntoIterator<Item = InterfaceType>) -> Type {
    Type(InterfaceType::Tuple(
        tys.into_iter().collect::<Vec<_>>().into(),
    ))
}

// ---------------------------------------------------------------------------
// Parameter and result lists as the four directions of a call move them.

/// Lowers a host call's arguments for a guest export whose parameters are
/// the tuple type `params`: flat, or (past 16 flat values) stored in a
/// tuple the guest's `realloc` allocates, passed by pointer.
pub(crate) fn lower_args<P: Lower>(
    cx: &mut AbiContext<'_>,
    params: &Type,
    flat: bool,
    args: &P,
) -> Result<Vec<CoreVal>> {
    let mut dst = Vec::new();
    if flat {
        args.lower_flat(cx, params, &mut dst)?;
    } else {
        let l = abi::layout(&params.0);
        let ptr = abi::realloc(cx.0, 0, 0, l.align, u64::from(l.size))?;
        args.store(cx, params, u64::from(ptr))?;
        dst.push(CoreVal::I32(ptr as i32));
    }
    Ok(dst)
}

/// Lifts a guest export's results of the tuple type `results`: flat, or
/// through the one pointer it returned.
pub(crate) fn lift_results<R: Lift>(
    cx: &mut AbiContext<'_>,
    results: &Type,
    flat: bool,
    core: &[CoreVal],
) -> Result<R> {
    if flat {
        return R::lift_flat(cx, results, &mut core.iter());
    }
    let ptr = abi::core_ptr(core.first(), "return pointer")?;
    abi::check_pointer(
        cx.0,
        ptr,
        abi::layout(&results.0),
        "return pointer not aligned",
        "pointer out of bounds of memory",
    )?;
    R::load(cx, results, u64::from(ptr))
}

/// Lifts a guest's arguments to a host import whose parameters are the
/// tuple type `params`: flat, or through one pointer to a tuple.
pub(crate) fn lift_args<P: Lift>(
    cx: &mut AbiContext<'_>,
    params: &Type,
    flat: bool,
    core: &[CoreVal],
) -> Result<P> {
    if flat {
        return P::lift_flat(cx, params, &mut core.iter());
    }
    let ptr = abi::core_ptr(core.first(), "argument pointer")?;
    abi::check_pointer(
        cx.0,
        ptr,
        abi::layout(&params.0),
        "pointer not aligned",
        "pointer out of bounds",
    )?;
    P::load(cx, params, u64::from(ptr))
}

/// Lowers a host import's results of the tuple type `results` into the
/// guest: flat into `core_results`, or stored at the return pointer, the
/// last core argument.
pub(crate) fn lower_results<R: Lower>(
    cx: &mut AbiContext<'_>,
    results: &Type,
    flat: bool,
    values: &R,
    core_args: &[CoreVal],
    core_results: &mut [CoreVal],
) -> Result<()> {
    if flat {
        let mut dst = Vec::with_capacity(core_results.len());
        values.lower_flat(cx, results, &mut dst)?;
        if dst.len() != core_results.len() {
            bail!(
                "expected {} core result slots, got {}",
                dst.len(),
                core_results.len()
            );
        }
        core_results.copy_from_slice(&dst);
        return Ok(());
    }
    if !core_results.is_empty() {
        bail!("expected no core result slots, got {}", core_results.len());
    }
    // Upstream checks the return pointer before lowering anything.
    let ptr = abi::core_ptr(core_args.last(), "return pointer")?;
    abi::check_pointer(
        cx.0,
        ptr,
        abi::layout(&results.0),
        "pointer not aligned",
        "pointer out of bounds",
    )?;
    values.store(cx, results, u64::from(ptr))
}

// ---------------------------------------------------------------------------
// TypedFunc

/// A component function with its parameter and result types known at
/// compile time, made by [`Instance::get_typed_func`](super::Instance::get_typed_func)
/// or [`Func::typed`].
///
/// `Params` and `Return` are tuples: `TypedFunc<(&str, u32), (String,)>`
/// for `func(a: string, b: u32) -> string`, `TypedFunc<(), ()>` for a
/// function without either.
pub struct TypedFunc<Params, Return> {
    func: Func,
    _types: PhantomData<fn(Params) -> Return>,
}

impl<Params, Return> Clone for TypedFunc<Params, Return> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Params, Return> Copy for TypedFunc<Params, Return> {}

impl<Params, Return> TypedFunc<Params, Return>
where
    Params: ComponentNamedList + Lower,
    Return: ComponentNamedList + Lift,
{
    pub(crate) fn new(store: impl AsContext, func: Func) -> Result<Self> {
        typecheck_signature::<Params, Return>(&func.ty(store).ty)?;
        Ok(TypedFunc {
            func,
            _types: PhantomData,
        })
    }

    /// The function without its static types.
    pub fn func(&self) -> &Func {
        &self.func
    }

    /// Calls the function; see [`Func::call`], which this does with the
    /// arguments and results moved straight between Rust and the guest.
    ///
    /// # Errors
    ///
    /// As for [`Func::call`].
    ///
    /// # Panics
    ///
    /// Panics if this function belongs to another store.
    pub fn call(&self, store: impl AsContextMut, params: Params) -> Result<Return> {
        self.func.call_with(
            store,
            |cx, func| lower_args(cx, &func.params_tuple, func.flat_params, &params),
            |cx, func, core| lift_results(cx, &func.results_tuple, func.flat_results, core),
        )
    }

    /// [`TypedFunc::call`] on a fiber; see [`Func::call_async`].
    ///
    /// # Errors
    ///
    /// As for [`Func::call_async`].
    ///
    /// # Panics
    ///
    /// Panics if this function belongs to another store.
    pub async fn call_async(
        &self,
        mut store: impl AsContextMut<Data: Send>,
        params: Params,
    ) -> Result<Return>
    where
        Params: Send + Sync,
        Return: Send + Sync,
    {
        self.func
            .call_with_async(
                store.as_context_mut(),
                |cx, func| lower_args(cx, &func.params_tuple, func.flat_params, &params),
                |cx, func, core| lift_results(cx, &func.results_tuple, func.flat_results, core),
            )
            .await
    }

    /// Does nothing, as [`Func::post_return`].
    ///
    /// # Errors
    ///
    /// Never fails.
    #[doc(hidden)]
    pub fn post_return(&self, _store: impl AsContextMut) -> Result<()> {
        Ok(())
    }
}

/// A type check for a host function's import type, kept with the linker's
/// definition of it.
pub(crate) type TypeCheck = Arc<dyn Fn(&super::types::FuncTy) -> Result<()> + Send + Sync>;

/// The type check of a host function taking `Params` and returning
/// `Return`.
pub(crate) fn host_check<Params: ComponentType + 'static, Return: ComponentType + 'static>()
-> TypeCheck {
    Arc::new(typecheck_signature::<Params, Return>)
}

/// Checks `Params` and `Return` against a function type's parameters and
/// results.
fn typecheck_signature<Params: ComponentType, Return: ComponentType>(
    ty: &super::types::FuncTy,
) -> Result<()> {
    Params::typecheck(&list_type(ty.params.iter().map(|(_, t)| t.clone())))
        .map_err(|e| e.context("type mismatch with parameters"))?;
    Return::typecheck(&list_type(ty.results.iter().cloned()))
        .map_err(|e| e.context("type mismatch with results"))
}
