//! Typed calls: [`ComponentType`], [`Lift`], [`Lower`] and
//! [`ComponentNamedList`] for Rust types, [`TypedFunc`], and the typed host
//! functions of [`LinkerInstance::func_wrap`](super::LinkerInstance::func_wrap).
//!
//! A Rust type stands for an interface type: `u32` for `u32`, `String` and
//! `&str` for `string`, `Vec<T>` and `&[T]` for `list<T>`, `Option<T>`,
//! `Result<T, E>` (with `()` for a case without payload), tuples for
//! `tuple<..>` and for parameter and result lists. The type is checked
//! against the component's once, when a [`TypedFunc`] is made or a host
//! function is linked, so a call cannot meet a value of the wrong shape.
//!
//! Unfinished: values are converted through [`Val`] and the dynamic
//! canonical ABI, which costs an allocation per compound value; there is no
//! derive for records, variants, enums and flags yet, and resources
//! (`Resource<T>`) cannot be passed.

use super::func::Func;
use super::types::{InterfaceType, Type};
use super::values::Val;
use crate::{AsContext, AsContextMut};
use anyhow::{Result, anyhow, bail};
use std::marker::PhantomData;
use std::sync::Arc;

/// A Rust type that stands for a component interface type.
///
/// Implemented for the primitive types, strings, lists, options, results
/// and tuples; the methods are the runtime's, not meant to be called or
/// implemented by embedders.
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
    /// The Rust value of a value already checked to have the type.
    #[doc(hidden)]
    fn from_val(val: Val) -> Result<Self>;
}

/// A [`ComponentType`] that can be passed to a component.
pub trait Lower: ComponentType {
    /// The value as a [`Val`].
    #[doc(hidden)]
    fn to_val(&self) -> Result<Val>;
}

/// A tuple used as a list of parameters or results (`()`, `(A,)`, `(A, B)`
/// and so on, up to 16 elements).
pub trait ComponentNamedList: ComponentType {}

fn mismatch(expected: &str, ty: &Type) -> anyhow::Error {
    anyhow!("type mismatch: expected {expected}, found {}", ty.desc())
}

fn shape(val: &Val, expected: &str) -> anyhow::Error {
    anyhow!("type mismatch: expected {expected}, found {}", val.desc())
}

macro_rules! primitives {
    ($($rust:ty => $variant:ident $wit:literal,)*) => {$(
        impl ComponentType for $rust {
            fn typecheck(ty: &Type) -> Result<()> {
                match ty.0 {
                    InterfaceType::$variant => Ok(()),
                    _ => Err(mismatch($wit, ty)),
                }
            }
        }

        impl Lift for $rust {
            fn from_val(val: Val) -> Result<Self> {
                match val {
                    Val::$variant(v) => Ok(v),
                    other => Err(shape(&other, $wit)),
                }
            }
        }

        impl Lower for $rust {
            fn to_val(&self) -> Result<Val> {
                Ok(Val::$variant(*self))
            }
        }
    )*};
}

primitives! {
    bool => Bool "bool",
    i8 => S8 "s8",
    u8 => U8 "u8",
    i16 => S16 "s16",
    u16 => U16 "u16",
    i32 => S32 "s32",
    u32 => U32 "u32",
    i64 => S64 "s64",
    u64 => U64 "u64",
    f32 => Float32 "f32",
    f64 => Float64 "f64",
    char => Char "char",
}

impl ComponentType for str {
    fn typecheck(ty: &Type) -> Result<()> {
        match ty.0 {
            InterfaceType::String => Ok(()),
            _ => Err(mismatch("string", ty)),
        }
    }
}

impl Lower for str {
    fn to_val(&self) -> Result<Val> {
        Ok(Val::String(self.to_string()))
    }
}

impl ComponentType for String {
    fn typecheck(ty: &Type) -> Result<()> {
        str::typecheck(ty)
    }
}

impl Lift for String {
    fn from_val(val: Val) -> Result<Self> {
        match val {
            Val::String(s) => Ok(s),
            other => Err(shape(&other, "string")),
        }
    }
}

impl Lower for String {
    fn to_val(&self) -> Result<Val> {
        Ok(Val::String(self.clone()))
    }
}

impl<T: ComponentType + ?Sized> ComponentType for &T {
    fn typecheck(ty: &Type) -> Result<()> {
        T::typecheck(ty)
    }
}

impl<T: Lower + ?Sized> Lower for &T {
    fn to_val(&self) -> Result<Val> {
        T::to_val(self)
    }
}

impl<T: ComponentType + ?Sized> ComponentType for Box<T> {
    fn typecheck(ty: &Type) -> Result<()> {
        T::typecheck(ty)
    }
}

impl<T: Lift> Lift for Box<T> {
    fn from_val(val: Val) -> Result<Self> {
        T::from_val(val).map(Box::new)
    }
}

impl<T: Lower + ?Sized> Lower for Box<T> {
    fn to_val(&self) -> Result<Val> {
        T::to_val(self)
    }
}

fn typecheck_list<T: ComponentType + ?Sized>(ty: &Type) -> Result<()> {
    match &ty.0 {
        InterfaceType::List(element) => T::typecheck(&Type((**element).clone())),
        _ => Err(mismatch("list", ty)),
    }
}

impl<T: ComponentType> ComponentType for [T] {
    fn typecheck(ty: &Type) -> Result<()> {
        typecheck_list::<T>(ty)
    }
}

impl<T: Lower> Lower for [T] {
    fn to_val(&self) -> Result<Val> {
        Ok(Val::List(
            self.iter().map(T::to_val).collect::<Result<_>>()?,
        ))
    }
}

impl<T: ComponentType> ComponentType for Vec<T> {
    fn typecheck(ty: &Type) -> Result<()> {
        typecheck_list::<T>(ty)
    }
}

impl<T: Lift> Lift for Vec<T> {
    fn from_val(val: Val) -> Result<Self> {
        match val {
            Val::List(items) => items.into_iter().map(T::from_val).collect(),
            other => Err(shape(&other, "list")),
        }
    }
}

impl<T: Lower> Lower for Vec<T> {
    fn to_val(&self) -> Result<Val> {
        self.as_slice().to_val()
    }
}

/// Checks a case payload: `()` stands for a case without one.
fn typecheck_payload<T: ComponentType>(payload: &Option<InterfaceType>, what: &str) -> Result<()> {
    match payload {
        None if T::IS_UNIT => Ok(()),
        None => bail!("type mismatch: expected a {what} with a payload, found one without"),
        Some(ty) => T::typecheck(&Type(ty.clone())),
    }
}

fn lift_payload<T: Lift>(payload: Option<Box<Val>>) -> Result<T> {
    match payload {
        Some(v) => T::from_val(*v),
        // Only `()` is checked to stand for no payload.
        None => T::from_val(Val::Tuple(Vec::new())),
    }
}

fn lower_payload<T: Lower>(v: &T) -> Result<Option<Box<Val>>> {
    if T::IS_UNIT {
        return Ok(None);
    }
    Ok(Some(Box::new(v.to_val()?)))
}

impl<T: ComponentType> ComponentType for Option<T> {
    fn typecheck(ty: &Type) -> Result<()> {
        match &ty.0 {
            InterfaceType::Option(inner) => T::typecheck(&Type((**inner).clone())),
            _ => Err(mismatch("option", ty)),
        }
    }
}

impl<T: Lift> Lift for Option<T> {
    fn from_val(val: Val) -> Result<Self> {
        match val {
            Val::Option(None) => Ok(None),
            Val::Option(Some(v)) => Ok(Some(T::from_val(*v)?)),
            other => Err(shape(&other, "option")),
        }
    }
}

impl<T: Lower> Lower for Option<T> {
    fn to_val(&self) -> Result<Val> {
        Ok(Val::Option(match self {
            None => None,
            Some(v) => Some(Box::new(v.to_val()?)),
        }))
    }
}

impl<T: ComponentType, E: ComponentType> ComponentType for std::result::Result<T, E> {
    fn typecheck(ty: &Type) -> Result<()> {
        match &ty.0 {
            InterfaceType::Result(cases) => {
                typecheck_payload::<T>(&cases.0, "result `ok` case")?;
                typecheck_payload::<E>(&cases.1, "result `err` case")
            }
            _ => Err(mismatch("result", ty)),
        }
    }
}

impl<T: Lift, E: Lift> Lift for std::result::Result<T, E> {
    fn from_val(val: Val) -> Result<Self> {
        match val {
            Val::Result(Ok(v)) => Ok(Ok(lift_payload(v)?)),
            Val::Result(Err(v)) => Ok(Err(lift_payload(v)?)),
            other => Err(shape(&other, "result")),
        }
    }
}

impl<T: Lower, E: Lower> Lower for std::result::Result<T, E> {
    fn to_val(&self) -> Result<Val> {
        Ok(Val::Result(match self {
            Ok(v) => Ok(lower_payload(v)?),
            Err(v) => Err(lower_payload(v)?),
        }))
    }
}

macro_rules! tuples {
    ($(($($t:ident $i:tt),*))*) => {$(
        impl<$($t: ComponentType),*> ComponentType for ($($t,)*) {
            const IS_UNIT: bool = tuples!(@is_unit $($t)*);

            fn typecheck(ty: &Type) -> Result<()> {
                match &ty.0 {
                    InterfaceType::Tuple(tys) => {
                        let expected = <[&str]>::len(&[$(stringify!($t)),*]);
                        if tys.len() != expected {
                            bail!(
                                "type mismatch: expected a tuple of {expected} element(s), found one of {}",
                                tys.len()
                            );
                        }
                        $($t::typecheck(&Type(tys[$i].clone()))?;)*
                        Ok(())
                    }
                    _ => Err(mismatch("tuple", ty)),
                }
            }
        }

        impl<$($t: Lift),*> Lift for ($($t,)*) {
            #[allow(unused_variables, unused_mut, reason = "the empty tuple reads nothing")]
            fn from_val(val: Val) -> Result<Self> {
                let Val::Tuple(items) = val else {
                    return Err(shape(&val, "tuple"));
                };
                let expected = <[&str]>::len(&[$(stringify!($t)),*]);
                if items.len() != expected {
                    bail!("expected a tuple of {expected} element(s), found one of {}", items.len());
                }
                let mut items = items.into_iter();
                Ok(($($t::from_val(items.next().expect("length checked"))?,)*))
            }
        }

        impl<$($t: Lower),*> Lower for ($($t,)*) {
            fn to_val(&self) -> Result<Val> {
                Ok(Val::Tuple(vec![$(self.$i.to_val()?),*]))
            }
        }

        impl<$($t: ComponentType),*> ComponentNamedList for ($($t,)*) {}
    )*};
    (@is_unit) => { true };
    (@is_unit $($t:ident)+) => { false };
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

/// The values of a lowered list (a tuple's elements).
pub(crate) fn list_values<L: Lower + ?Sized>(list: &L) -> Result<Vec<Val>> {
    match list.to_val()? {
        Val::Tuple(items) => Ok(items),
        other => Err(shape(&other, "a parameter or result list")),
    }
}

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
    /// arguments and results converted.
    ///
    /// # Errors
    ///
    /// As for [`Func::call`].
    ///
    /// # Panics
    ///
    /// Panics if this function belongs to another store.
    pub fn call(&self, mut store: impl AsContextMut, params: Params) -> Result<Return> {
        let args = list_values(&params)?;
        let count = self.func.ty(&store).ty.results.len();
        let mut results = vec![Val::Bool(false); count];
        self.func
            .call(store.as_context_mut(), &args, &mut results)?;
        Return::from_val(Val::Tuple(results))
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
