//! The host's side of Wasm exceptions (exceptions proposal): [`Tag`],
//! [`ExnType`], [`ExnRefPre`], what the host can do with an [`ExnRef`], and
//! the store's *pending exception* that travels with a
//! [`ThrownException`] error.
//!
//! An exception that no Wasm handler catches ends the call into Wasm with a
//! [`ThrownException`] error and stays in the store as its pending
//! exception, which [`Store::take_pending_exception`] hands over. A host
//! function throws into its Wasm caller by returning the error of
//! [`Store::throw`] (or of [`StoreContextMut::throw`] through its
//! [`Caller`](crate::Caller)), which makes the exception pending; the
//! calling Wasm's handlers then get their chance, as if the host function
//! had been Wasm that threw.

use crate::runtime::store::{StoreId, StoreOpaque};
use crate::{
    AsContext, AsContextMut, Engine, ExnRef, FuncType, Result, Rooted, Store, StoreContextMut,
    TagType, Val,
};
use anyhow::{Context, bail};
use std::fmt;
use wasmtime_environ::vm::{VMTagDefinition, ValRaw};

/// The error of a call that a WebAssembly exception left without being
/// caught.
///
/// The exception itself is not in the error: it waits in the store as the
/// pending exception, for [`Store::take_pending_exception`] (or is thrown on
/// into Wasm when a host function returns this error to its caller).
#[derive(Debug)]
pub struct ThrownException;

impl fmt::Display for ThrownException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a WebAssembly exception was thrown and not caught")
    }
}

impl std::error::Error for ThrownException {}

/// An exception tag: what a `catch` clause matches and what an exception
/// carries, with the types of its payload.
///
/// Tags come from instances' exports, or from [`Tag::new`]; each is
/// distinct from every other, even from one of the same type (two
/// instances of one module define two tags per tag they declare). A tag
/// belongs to one store.
#[derive(Copy, Clone, Debug)]
pub struct Tag {
    store: StoreId,
    /// The address of its `VMTagDefinition`, its identity.
    definition: usize,
}

impl Tag {
    /// A new tag in `store`, whose exceptions carry payloads of `ty`.
    ///
    /// # Errors
    ///
    /// Fails if `ty`'s function type has results (a tag's has none) or
    /// belongs to another engine.
    pub fn new(mut store: impl AsContextMut, ty: &TagType) -> Result<Tag> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        let func = ty.ty();
        if !Engine::same(func.engine(), opaque.engine()) {
            bail!("the tag type belongs to a different engine than the store");
        }
        if func.results().len() != 0 {
            bail!("a tag's function type must have no results, found `{func}`");
        }
        let definition = Box::new(VMTagDefinition {
            type_index: func.index(),
            reserved: 0,
        });
        let address = &*definition as *const VMTagDefinition as usize;
        opaque.host_tags.push(definition);
        Ok(Tag {
            store: opaque.id(),
            definition: address,
        })
    }

    /// The tag's type.
    ///
    /// # Panics
    ///
    /// Panics if the tag belongs to a different store.
    pub fn ty(&self, store: impl AsContext) -> TagType {
        let store = store.as_context();
        let opaque = &store.0.opaque;
        opaque.assert_store(self.store, "tag");
        TagType::new(self.payload_type(opaque))
    }

    /// Whether `a` and `b` are the same tag.
    ///
    /// # Panics
    ///
    /// Panics if either belongs to a different store than `store`.
    #[allow(clippy::should_implement_trait, reason = "upstream API")]
    pub fn eq(a: &Tag, b: &Tag, store: impl AsContext) -> bool {
        let store = store.as_context();
        store.0.opaque.assert_store(a.store, "tag");
        store.0.opaque.assert_store(b.store, "tag");
        a.definition == b.definition
    }

    /// The tag whose definition is at `definition` in `store`.
    pub(crate) fn from_definition(store: &StoreOpaque, definition: *const VMTagDefinition) -> Tag {
        Tag {
            store: store.id(),
            definition: definition as usize,
        }
    }

    /// The tag's identity, as compiled code and exceptions hold it.
    pub(crate) fn definition(&self) -> *const VMTagDefinition {
        self.definition as *const VMTagDefinition
    }

    pub(crate) fn comes_from_same_store(&self, store: &StoreOpaque) -> bool {
        self.store == store.id()
    }

    /// The payload's function type (its params are the payload).
    ///
    /// # Panics
    ///
    /// If the tag belongs to another store (every caller checks first and
    /// reports that as an error; this keeps the read below sound anyway).
    pub(crate) fn payload_type(&self, store: &StoreOpaque) -> FuncType {
        assert!(
            self.comes_from_same_store(store),
            "a tag used with a store it does not belong to"
        );
        // SAFETY: `self` belongs to `store` (asserted above), and a tag of a
        // store points at a definition the store keeps (in an instance's
        // `VMContext` or its host tags) for its whole life; definitions are
        // never written after they are made, so the read cannot race.
        let index = unsafe { (*self.definition()).type_index };
        FuncType::from_index(store.engine(), index)
    }
}

/// The type of an exception: the payload types of its tag.
#[derive(Debug, Clone)]
pub struct ExnType {
    tag: TagType,
}

impl ExnType {
    /// The type of the exceptions of tags of type `ty`.
    ///
    /// # Errors
    ///
    /// Fails if `ty`'s function type has results.
    pub fn from_tag_type(ty: &TagType) -> Result<ExnType> {
        if ty.ty().results().len() != 0 {
            bail!("a tag's function type must have no results");
        }
        Ok(ExnType { tag: ty.clone() })
    }

    /// The tag type this exception type was made from.
    pub fn tag_type(&self) -> &TagType {
        &self.tag
    }
}

/// What [`ExnRef::new`] needs to make exceptions of one type in one store
/// (upstream pre-registers the type with its collector; here it only
/// carries the type).
#[derive(Debug, Clone)]
pub struct ExnRefPre {
    store: StoreId,
    ty: ExnType,
}

impl ExnRefPre {
    /// Prepares making exceptions of type `ty` in `store`.
    pub fn new(mut store: impl AsContextMut, ty: ExnType) -> ExnRefPre {
        let store = store.as_context_mut();
        ExnRefPre {
            store: store.0.opaque.id(),
            ty,
        }
    }
}

impl ExnRef {
    /// A new exception of `tag` with payload `fields`, for the host to throw
    /// with [`Store::throw`] (or to hand to Wasm as an `exnref`).
    ///
    /// # Errors
    ///
    /// Fails if `allocator` or `tag` belong to another store, if `tag`'s
    /// type is not `allocator`'s, or if `fields` do not match the payload
    /// types (count, types, stores).
    pub fn new(
        mut store: impl AsContextMut,
        allocator: &ExnRefPre,
        tag: &Tag,
        fields: &[Val],
    ) -> Result<Rooted<ExnRef>> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        opaque.check_store(allocator.store, "exception allocator")?;
        opaque.check_store(tag.store, "tag")?;
        let ty = tag.payload_type(opaque);
        if !FuncType::eq(&ty, allocator.ty.tag_type().ty()) {
            bail!("the tag's type is not the exception allocator's type");
        }
        let params = &ty.wasm().params;
        if fields.len() != params.len() {
            bail!(
                "an exception of this tag has {} fields, {} given",
                params.len(),
                fields.len()
            );
        }
        let payload = fields
            .iter()
            .zip(params.iter())
            .map(|(v, t)| (*v).to_raw_wasm(opaque, *t))
            .collect::<Result<Box<[ValRaw]>>>()?;
        let handle = opaque
            .exceptions
            .insert(crate::runtime::vm::throw::Exception {
                tag: tag.definition(),
                payload,
                escaped: true,
            })?;
        Ok(ExnRef::from_raw_handle(opaque, handle as usize).expect("just inserted"))
    }

    /// The exception's tag.
    ///
    /// # Errors
    ///
    /// Fails if the exception belongs to another store.
    pub fn tag(&self, mut store: impl AsContextMut) -> Result<Tag> {
        let store = store.as_context_mut();
        let opaque = &store.0.opaque;
        let tag = opaque.exception(self.raw_handle(opaque)?)?.tag;
        Ok(Tag::from_definition(opaque, tag))
    }

    /// Field `index` of the exception's payload.
    ///
    /// # Errors
    ///
    /// Fails if the exception belongs to another store or has no such
    /// field.
    pub fn field(&self, mut store: impl AsContextMut, index: usize) -> Result<Val> {
        let store = store.as_context_mut();
        let fields = self.fields_of(&mut store.0.opaque)?;
        fields
            .into_iter()
            .nth(index)
            .with_context(|| format!("the exception has no field {index}"))
    }

    /// The exception's payload, field by field.
    ///
    /// # Errors
    ///
    /// Fails if the exception belongs to another store.
    pub fn fields(&self, mut store: impl AsContextMut) -> Result<Vec<Val>> {
        let store = store.as_context_mut();
        self.fields_of(&mut store.0.opaque)
    }

    fn fields_of(&self, opaque: &mut StoreOpaque) -> Result<Vec<Val>> {
        let handle = self.raw_handle(opaque)?;
        let exception = opaque.exception(handle)?;
        let ty = Tag::from_definition(opaque, exception.tag).payload_type(opaque);
        let payload = exception.payload.clone();
        Ok(ty
            .wasm()
            .params
            .iter()
            .zip(payload.iter())
            // SAFETY: the payload was written for these types, of this
            // store, by compiled code (validated) or by `ExnRef::new`
            // (checked against the types and the store).
            .map(|(t, raw)| unsafe { Val::from_raw_wasm(opaque, *raw, *t) })
            .collect())
    }
}

impl StoreOpaque {
    /// The live exception `handle`.
    pub(crate) fn exception(&self, handle: usize) -> Result<&crate::runtime::vm::throw::Exception> {
        self.exceptions
            .get(handle)
            .context("the exception reference is no longer valid")
    }

    /// Makes `exception` the pending exception and returns the error that
    /// carries it up (see [`Store::throw`]).
    pub(crate) fn throw(&mut self, exception: &Rooted<ExnRef>) -> anyhow::Error {
        match exception.raw_handle(self) {
            Ok(handle) => {
                self.pending_exception = Some(handle as u32);
                anyhow::Error::new(ThrownException)
            }
            Err(e) => e,
        }
    }

    /// Takes the pending exception.
    pub(crate) fn take_pending_exception(&mut self) -> Option<Rooted<ExnRef>> {
        let handle = self.pending_exception.take()?;
        ExnRef::from_raw_handle(self, handle as usize)
    }

    /// For the trap path of a wasm-to-host trampoline: when the host
    /// function failed with [`ThrownException`] and an exception is
    /// pending, takes both and returns the exception (handle and tag) to
    /// throw on into the calling Wasm.
    ///
    /// # Safety
    ///
    /// `store` must be live with no other reference to it in use.
    pub(crate) unsafe fn take_exception_from_host(
        store: *mut StoreOpaque,
    ) -> Option<(usize, *const VMTagDefinition)> {
        // SAFETY: the store is live and no other reference to it is in use
        // (this function's `# Safety`), so a unique borrow is sound.
        let store = unsafe { &mut *store };
        let thrown = matches!(
            &store.pending,
            Some(crate::runtime::store::PendingError::Error(e)) if e.is::<ThrownException>()
        );
        if !thrown {
            return None;
        }
        let handle = store.pending_exception? as usize;
        let tag = store.exceptions.get(handle)?.tag;
        store.pending = None;
        store.pending_exception = None;
        Some((handle, tag))
    }

    /// Leaves exception `handle`, which no handler of the current
    /// activation caught, pending with a [`ThrownException`] error for the
    /// activation's entry to return.
    ///
    /// # Safety
    ///
    /// `store` must be live with no other reference to it in use.
    pub(crate) unsafe fn leave_exception_pending(store: *mut StoreOpaque, handle: usize) {
        // SAFETY: the store is live and no other reference to it is in use
        // (this function's `# Safety`), so a unique borrow is sound.
        let store = unsafe { &mut *store };
        if let Some(exception) = store.exceptions.get_mut(handle) {
            // The host may take it.
            exception.escaped = true;
        }
        store.pending_exception = Some(handle as u32);
        store.set_pending(crate::runtime::store::PendingError::Error(
            anyhow::Error::new(ThrownException),
        ));
    }
}

impl<T: 'static> Store<T> {
    /// Makes `exception` this store's pending exception and returns the
    /// [`ThrownException`] error that carries it: a host function that
    /// returns this error throws the exception into the WebAssembly that
    /// called it. Always `Err`; the type parameter lets it stand for any
    /// result.
    ///
    /// # Errors
    ///
    /// Always: [`ThrownException`], or an error if `exception` belongs to
    /// another store. A pending exception already there is replaced.
    pub fn throw<R>(&mut self, exception: Rooted<ExnRef>) -> Result<R> {
        Err(self.as_context_mut().0.opaque.throw(&exception))
    }

    /// Takes the pending exception: the one a [`ThrownException`] error
    /// that reached the host stands for.
    pub fn take_pending_exception(&mut self) -> Option<Rooted<ExnRef>> {
        self.as_context_mut().0.opaque.take_pending_exception()
    }

    /// Whether an exception is pending (see [`Store::take_pending_exception`]).
    pub fn has_pending_exception(&self) -> bool {
        self.as_context().0.opaque.pending_exception.is_some()
    }
}

impl<T: 'static> StoreContextMut<'_, T> {
    /// As [`Store::throw`].
    ///
    /// # Errors
    ///
    /// As [`Store::throw`].
    pub fn throw<R>(&mut self, exception: Rooted<ExnRef>) -> Result<R> {
        Err(self.0.opaque.throw(&exception))
    }

    /// As [`Store::take_pending_exception`].
    pub fn take_pending_exception(&mut self) -> Option<Rooted<ExnRef>> {
        self.0.opaque.take_pending_exception()
    }

    /// As [`Store::has_pending_exception`].
    pub fn has_pending_exception(&self) -> bool {
        self.0.opaque.pending_exception.is_some()
    }
}
