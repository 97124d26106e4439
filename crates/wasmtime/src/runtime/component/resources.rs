//! Resources: handle tables of component instances, and [`ResourceAny`].
//!
//! Every component instance inside a component has its own table of
//! handles. A handle is a small index (never 0) that stands for a resource
//! the instance owns (`own`) or borrows for the duration of a call
//! (`borrow`). Handles are made by `resource.new`, read by `resource.rep`,
//! released by `resource.drop` (which runs the resource's destructor for
//! an owned handle), and moved between two instances' tables by the
//! adapter modules when a handle is passed in a call.
//!
//! Borrows follow the component model's rules: lending an owned handle
//! counts a loan on it, an owned handle with loans cannot be dropped or
//! moved, and a call must drop every borrow it was given before it
//! returns; the loans end when the call does.
//!
//! Across the host boundary a handle becomes a [`ResourceAny`] (or a typed
//! [`Resource<T>`] for a host resource type): a value that carries the
//! resource's type, its representation and whether it is owned, plus a
//! liveness flag that all its clones share, so that a handle passed back
//! into a component or dropped cannot be used a second time, and a borrow
//! lent to the host for one call cannot be used after it.

use super::abi;
use super::typed::{AbiContext, ComponentType, FlatSource, Lift, Lower, lift_handle, lower_handle};
use super::types::{InterfaceType, Type};
use crate::Val as CoreVal;
use crate::{AsContextMut, StoreContextMut};
use anyhow::{Result, bail};
use std::any::{Any, TypeId};
use std::marker::PhantomData;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The type of a resource: a host type (`ResourceType::host::<T>()`), or a
/// resource that one component instance defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ResourceType(pub(crate) ResourceKind);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ResourceKind {
    Host(TypeId),
    /// Defined resource `resource` of the component instance at `instance`
    /// in its store's list. Every instantiation makes new types, in any
    /// store: `instantiation` is unique in the process.
    Guest {
        instance: u32,
        resource: usize,
        instantiation: u64,
    },
}

impl ResourceType {
    /// The resource type that the Rust type `T` stands for. Two host
    /// resource types are the same exactly when their `T` is.
    pub fn host<T: 'static>() -> ResourceType {
        ResourceType(ResourceKind::Host(TypeId::of::<T>()))
    }
}

/// A host resource's destructor, as
/// [`LinkerInstance::resource`](super::LinkerInstance::resource) defines it.
pub(crate) type HostDtor<T> = Arc<dyn Fn(StoreContextMut<'_, T>, u32) -> Result<()> + Send + Sync>;

/// A handle to a resource of any type, owned or borrowed, outside any
/// component: received from a component, or made from a [`Resource<T>`].
///
/// Clones share one liveness: once the handle is passed as an owned
/// argument, dropped with [`ResourceAny::resource_drop`], or (for a
/// borrow) outlives the call that lent it, every clone is dead and using
/// one is an error.
#[derive(Clone)]
pub struct ResourceAny {
    pub(crate) ty: ResourceType,
    pub(crate) rep: u32,
    pub(crate) owned: bool,
    pub(crate) alive: Arc<AtomicBool>,
    /// The host destructor (a `HostDtor<T>`) of a host resource that came
    /// back from a component, so that dropping it here runs it.
    pub(crate) dtor: Option<Arc<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for ResourceAny {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceAny")
            .field("ty", &self.ty)
            .field("rep", &self.rep)
            .field("owned", &self.owned)
            .field("alive", &self.alive.load(Ordering::Relaxed))
            .finish()
    }
}

impl PartialEq for ResourceAny {
    fn eq(&self, other: &ResourceAny) -> bool {
        Arc::ptr_eq(&self.alive, &other.alive)
            || (self.ty == other.ty && self.rep == other.rep && self.owned == other.owned)
    }
}

impl Eq for ResourceAny {}

const USED_UP: &str = "unknown handle index: this resource handle was already passed on or dropped";

impl ResourceAny {
    pub(crate) fn new(ty: ResourceType, rep: u32, owned: bool) -> ResourceAny {
        ResourceAny {
            ty,
            rep,
            owned,
            alive: Arc::new(AtomicBool::new(true)),
            dtor: None,
        }
    }

    #[cfg(test)]
    pub(crate) fn for_tests(table: usize, rep: u32, owned: bool) -> ResourceAny {
        ResourceAny::new(
            ResourceType(ResourceKind::Guest {
                instance: 0,
                resource: table,
                instantiation: 0,
            }),
            rep,
            owned,
        )
    }

    /// The resource's type.
    pub fn ty(&self) -> ResourceType {
        self.ty
    }

    /// Whether this is an owned handle (`own`) rather than a borrow.
    pub fn owned(&self) -> bool {
        self.owned
    }

    /// Ends this handle for good (every clone); fails if it already ended.
    pub(crate) fn consume(&self) -> Result<()> {
        if !self.alive.swap(false, Ordering::AcqRel) {
            bail!("{USED_UP}");
        }
        Ok(())
    }

    pub(crate) fn check_alive(&self) -> Result<()> {
        if !self.alive.load(Ordering::Acquire) {
            bail!("{USED_UP}");
        }
        Ok(())
    }

    /// Drops the handle: an owned one runs the resource's destructor (the
    /// host's, or the defining component's); a borrow just ends.
    ///
    /// # Errors
    ///
    /// Fails if the handle was already passed on or dropped, or if the
    /// destructor fails or traps.
    ///
    /// # Panics
    ///
    /// Panics if a component-defined resource's handle is dropped in
    /// another store than the one of its component.
    pub fn resource_drop(self, mut store: impl AsContextMut) -> Result<()> {
        self.consume()?;
        if !self.owned {
            return Ok(());
        }
        let mut store = store.as_context_mut();
        match self.ty.0 {
            ResourceKind::Host(_) => drop_host_rep(&mut store, self.dtor.as_deref(), self.rep),
            ResourceKind::Guest {
                instance, resource, ..
            } => {
                let data = store.0.opaque.component_instances[instance as usize].clone();
                data.run_destructor(&mut store, resource, self.rep)
            }
        }
    }
}

/// Runs a host destructor kept as `Any` on `rep`.
pub(crate) fn drop_host_rep<T: 'static>(
    store: &mut StoreContextMut<'_, T>,
    dtor: Option<&(dyn Any + Send + Sync)>,
    rep: u32,
) -> Result<()> {
    match dtor.map(|d| d.downcast_ref::<HostDtor<T>>()) {
        Some(Some(dtor)) => dtor(store.as_context_mut(), rep),
        Some(None) => bail!("a resource destructor of another store's data type"),
        None => Ok(()),
    }
}

/// A handle to a host resource of Rust type `T` (the type only names the
/// resource; the handle holds the `u32` representation the host chose).
pub struct Resource<T> {
    rep: u32,
    owned: bool,
    _ty: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Resource<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resource")
            .field("rep", &self.rep)
            .field("owned", &self.owned)
            .finish()
    }
}

impl<T: 'static> Resource<T> {
    /// An owned handle to the host's resource `rep`.
    pub fn new_own(rep: u32) -> Resource<T> {
        Resource {
            rep,
            owned: true,
            _ty: PhantomData,
        }
    }

    /// A borrowed handle to the host's resource `rep`.
    pub fn new_borrow(rep: u32) -> Resource<T> {
        Resource {
            rep,
            owned: false,
            _ty: PhantomData,
        }
    }

    /// The representation the host chose for the resource.
    pub fn rep(&self) -> u32 {
        self.rep
    }

    /// Whether this is an owned handle.
    pub fn owned(&self) -> bool {
        self.owned
    }
}

fn typecheck_handle(ty: &Type) -> Result<()> {
    match ty.0 {
        InterfaceType::Own(_) | InterfaceType::Borrow(_) => Ok(()),
        _ => bail!("type mismatch: expected resource, found {}", ty.desc()),
    }
}

impl<T: 'static> ComponentType for Resource<T> {
    // Which resource a handle table holds is known only in an instance, so
    // the resource itself is checked when a handle arrives (`from_val`).
    fn typecheck(ty: &Type) -> Result<()> {
        typecheck_handle(ty)
    }
}

impl<T: 'static> Resource<T> {
    /// The host's view of a handle lifted out of a guest: only a handle of
    /// this host resource type is one.
    fn from_any(any: ResourceAny) -> Result<Self> {
        if any.ty != ResourceType::host::<T>() {
            bail!("mismatched resource types");
        }
        if any.owned {
            any.consume()?;
        } else {
            any.check_alive()?;
        }
        Ok(Resource {
            rep: any.rep,
            owned: any.owned,
            _ty: PhantomData,
        })
    }

    fn to_any(&self) -> ResourceAny {
        ResourceAny::new(ResourceType::host::<T>(), self.rep, self.owned)
    }

    /// The typed handle behind `resource`, a handle of the host resource
    /// type `T` (for example one that a dynamic host function received as
    /// a [`Val::Resource`](super::Val::Resource)). An owned `resource` is
    /// used up: its clones can no longer be passed on or dropped.
    ///
    /// # Errors
    ///
    /// Fails if `resource` is of another resource type, or was already
    /// used up (passed on as `own`, dropped, or a borrow whose call ended).
    pub fn try_from_resource_any(
        resource: ResourceAny,
        _store: impl AsContextMut,
    ) -> Result<Resource<T>> {
        Resource::from_any(resource)
    }

    /// This handle as a [`ResourceAny`], to pass through the dynamic API;
    /// the same as [`ResourceAny::try_from_resource`].
    ///
    /// # Errors
    ///
    /// Never fails today; a `Result` as upstream's is.
    pub fn try_into_resource_any(self, store: impl AsContextMut) -> Result<ResourceAny> {
        ResourceAny::try_from_resource(self, store)
    }
}

impl ResourceAny {
    /// `resource` as a dynamically typed handle of the host resource type
    /// `T`.
    ///
    /// # Errors
    ///
    /// Never fails today; a `Result` as upstream's is.
    pub fn try_from_resource<T: 'static>(
        resource: Resource<T>,
        _store: impl AsContextMut,
    ) -> Result<ResourceAny> {
        Ok(resource.to_any())
    }

    /// This handle as a typed one; see [`Resource::try_from_resource_any`].
    ///
    /// # Errors
    ///
    /// As for [`Resource::try_from_resource_any`].
    pub fn try_into_resource<T: 'static>(self, store: impl AsContextMut) -> Result<Resource<T>> {
        Resource::try_from_resource_any(self, store)
    }
}

impl<T: 'static> Lift for Resource<T> {
    fn lift_flat(cx: &mut AbiContext<'_>, ty: &Type, src: &mut FlatSource<'_>) -> Result<Self> {
        let index = abi::next_u32(src)?;
        Self::from_any(lift_handle(cx, ty, index)?)
    }

    fn load(cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<Self> {
        let index = abi::read_u32(cx.0, offset)?;
        Self::from_any(lift_handle(cx, ty, index)?)
    }
}

impl<T: 'static> Lower for Resource<T> {
    fn lower_flat(&self, cx: &mut AbiContext<'_>, ty: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
        dst.push(CoreVal::I32(lower_handle(cx, ty, &self.to_any())? as i32));
        Ok(())
    }

    fn store(&self, cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<()> {
        let index = lower_handle(cx, ty, &self.to_any())?;
        abi::write(cx.0, offset, &index.to_le_bytes())
    }
}

impl ComponentType for ResourceAny {
    fn typecheck(ty: &Type) -> Result<()> {
        typecheck_handle(ty)
    }
}

impl Lift for ResourceAny {
    fn lift_flat(cx: &mut AbiContext<'_>, ty: &Type, src: &mut FlatSource<'_>) -> Result<Self> {
        let index = abi::next_u32(src)?;
        lift_handle(cx, ty, index)
    }

    fn load(cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<Self> {
        let index = abi::read_u32(cx.0, offset)?;
        lift_handle(cx, ty, index)
    }
}

impl Lower for ResourceAny {
    fn lower_flat(&self, cx: &mut AbiContext<'_>, ty: &Type, dst: &mut Vec<CoreVal>) -> Result<()> {
        dst.push(CoreVal::I32(lower_handle(cx, ty, self)? as i32));
        Ok(())
    }

    fn store(&self, cx: &mut AbiContext<'_>, ty: &Type, offset: u64) -> Result<()> {
        let index = lower_handle(cx, ty, self)?;
        abi::write(cx.0, offset, &index.to_le_bytes())
    }
}

/// What one handle slot holds.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Free,
    Own {
        resource: usize,
        rep: u32,
        /// Borrows of this handle outstanding in calls.
        loans: u32,
    },
    Borrow {
        resource: usize,
        rep: u32,
        /// The call scope the borrow belongs to.
        scope: usize,
    },
}

/// The handle table of one component instance.
#[derive(Debug, Default)]
struct HandleTable {
    /// Slot 0 is never used: 0 is not a valid handle.
    slots: Vec<Slot>,
    free: Vec<u32>,
}

/// A synchronous call between two components in progress: the loans it
/// made and how many borrows it still holds.
#[derive(Debug, Default)]
struct Scope {
    lenders: Vec<(usize, u32)>,
    outstanding: u32,
}

/// The resource state of a component instance: one handle table per
/// component instance inside it, and the stack of calls between them.
#[derive(Debug)]
pub(crate) struct ResourceState {
    tables: Vec<HandleTable>,
    scopes: Vec<Scope>,
}

impl HandleTable {
    fn insert(&mut self, slot: Slot) -> Result<u32> {
        if self.slots.is_empty() {
            self.slots.push(Slot::Free);
        }
        if let Some(index) = self.free.pop() {
            self.slots[index as usize] = slot;
            return Ok(index);
        }
        let index = u32::try_from(self.slots.len())
            .ok()
            .filter(|i| *i < u32::MAX)
            .ok_or_else(|| anyhow::anyhow!("a handle table is full"))?;
        self.slots.push(slot);
        Ok(index)
    }

    fn get(&self, index: u32) -> Result<Slot> {
        match self.slots.get(index as usize) {
            Some(slot) if index != 0 && !matches!(slot, Slot::Free) => Ok(*slot),
            _ => bail!("unknown handle index {index}"),
        }
    }

    fn get_mut(&mut self, index: u32) -> Result<&mut Slot> {
        match self.slots.get_mut(index as usize) {
            Some(slot) if index != 0 && !matches!(slot, Slot::Free) => Ok(slot),
            _ => bail!("unknown handle index {index}"),
        }
    }

    fn remove(&mut self, index: u32) {
        self.slots[index as usize] = Slot::Free;
        self.free.push(index);
    }
}

fn check_type(index: u32, found: usize, expected: usize) -> Result<()> {
    if found != expected {
        bail!(
            "handle index {index} used with the wrong type, expected guest-defined resource but found a different guest-defined resource"
        );
    }
    Ok(())
}

impl ResourceState {
    pub(crate) fn new(component_instances: usize) -> ResourceState {
        ResourceState {
            tables: (0..component_instances)
                .map(|_| HandleTable::default())
                .collect(),
            scopes: Vec::new(),
        }
    }

    /// `resource.new`: a new owned handle to `rep` in `instance`'s table.
    pub(crate) fn new_own(&mut self, instance: usize, resource: usize, rep: u32) -> Result<u32> {
        self.tables[instance].insert(Slot::Own {
            resource,
            rep,
            loans: 0,
        })
    }

    /// `resource.rep`: the representation behind a handle of `resource`.
    pub(crate) fn rep(&self, instance: usize, resource: usize, index: u32) -> Result<u32> {
        match self.tables[instance].get(index)? {
            Slot::Own {
                resource: r, rep, ..
            }
            | Slot::Borrow {
                resource: r, rep, ..
            } => {
                check_type(index, r, resource)?;
                Ok(rep)
            }
            Slot::Free => unreachable!("get() refuses free slots"),
        }
    }

    /// `resource.drop`: removes a handle; for an owned one, returns the
    /// representation whose destructor must run.
    pub(crate) fn drop_handle(
        &mut self,
        instance: usize,
        resource: usize,
        index: u32,
    ) -> Result<Option<u32>> {
        let table = &mut self.tables[instance];
        match table.get(index)? {
            Slot::Own { .. } => self.take_own(instance, resource, index).map(Some),
            Slot::Borrow {
                resource: r, scope, ..
            } => {
                check_type(index, r, resource)?;
                table.remove(index);
                if let Some(scope) = self.scopes.get_mut(scope) {
                    scope.outstanding -= 1;
                }
                Ok(None)
            }
            Slot::Free => unreachable!("get() refuses free slots"),
        }
    }

    /// Moves an owned handle from one instance's table to another's.
    pub(crate) fn transfer_own(
        &mut self,
        (from, from_resource): (usize, usize),
        index: u32,
        to: usize,
    ) -> Result<u32> {
        let rep = self.take_own(from, from_resource, index)?;
        self.new_own(to, from_resource, rep)
    }

    /// Lends a handle of `from`'s table to `to` for the current call. The
    /// defining instance of the resource gets the representation itself,
    /// any other a new borrowed handle.
    pub(crate) fn transfer_borrow(
        &mut self,
        (from, from_resource): (usize, usize),
        index: u32,
        to: usize,
        to_defines_resource: bool,
    ) -> Result<u32> {
        let scope = self
            .scopes
            .len()
            .checked_sub(1)
            .ok_or_else(|| anyhow::anyhow!("a borrow is passed outside of a call"))?;
        let slot = self.tables[from].get_mut(index)?;
        let (resource, rep) = match slot {
            Slot::Own {
                resource,
                rep,
                loans,
            } => {
                check_type(index, *resource, from_resource)?;
                *loans += 1;
                let lent = (*resource, *rep);
                self.scopes[scope].lenders.push((from, index));
                lent
            }
            Slot::Borrow { resource, rep, .. } => {
                check_type(index, *resource, from_resource)?;
                (*resource, *rep)
            }
            Slot::Free => unreachable!("get_mut() refuses free slots"),
        };
        if to_defines_resource {
            return Ok(rep);
        }
        self.scopes[scope].outstanding += 1;
        self.tables[to].insert(Slot::Borrow {
            resource,
            rep,
            scope,
        })
    }

    /// Takes an owned handle out of `instance`'s table, for the host.
    pub(crate) fn take_own(&mut self, instance: usize, resource: usize, index: u32) -> Result<u32> {
        let table = &mut self.tables[instance];
        match table.get(index)? {
            Slot::Own {
                resource: r,
                rep,
                loans,
            } => {
                check_type(index, r, resource)?;
                if loans != 0 {
                    bail!("cannot remove owned resource while borrowed");
                }
                table.remove(index);
                Ok(rep)
            }
            Slot::Borrow { .. } => bail!("handle index {index} is a borrow, not an owned handle"),
            Slot::Free => unreachable!("get() refuses free slots"),
        }
    }

    /// Lends a handle of `instance`'s table to the host for one call: its
    /// representation, with a loan counted on an owned handle until
    /// [`ResourceState::end_loan`].
    pub(crate) fn lend_to_host(
        &mut self,
        instance: usize,
        resource: usize,
        index: u32,
    ) -> Result<(u32, bool)> {
        match self.tables[instance].get_mut(index)? {
            Slot::Own {
                resource: r,
                rep,
                loans,
            } => {
                check_type(index, *r, resource)?;
                *loans += 1;
                Ok((*rep, true))
            }
            Slot::Borrow {
                resource: r, rep, ..
            } => {
                check_type(index, *r, resource)?;
                Ok((*rep, false))
            }
            Slot::Free => unreachable!("get_mut() refuses free slots"),
        }
    }

    /// Ends a loan on an owned handle (one that
    /// [`ResourceState::lend_to_host`] or a borrow transfer counted).
    pub(crate) fn end_loan(&mut self, instance: usize, index: u32) {
        if let Ok(Slot::Own { loans, .. }) = self.tables[instance].get_mut(index) {
            *loans -= 1;
        }
    }

    /// Lends `rep` to `instance` for the current call: a new borrowed
    /// handle that the call must drop before it returns.
    pub(crate) fn lend(&mut self, instance: usize, resource: usize, rep: u32) -> Result<u32> {
        let scope = self
            .scopes
            .len()
            .checked_sub(1)
            .ok_or_else(|| anyhow::anyhow!("a borrow is passed outside of a call"))?;
        self.scopes[scope].outstanding += 1;
        self.tables[instance].insert(Slot::Borrow {
            resource,
            rep,
            scope,
        })
    }

    /// Ends the current call's scope after the call failed: nothing is
    /// checked, the loans just end.
    pub(crate) fn abandon_call(&mut self) {
        if let Some(scope) = self.scopes.pop() {
            for (instance, index) in scope.lenders {
                self.end_loan(instance, index);
            }
        }
    }

    /// How many call scopes are open.
    pub(crate) fn scope_depth(&self) -> usize {
        self.scopes.len()
    }

    /// Ends, as [`ResourceState::abandon_call`] does, every scope opened
    /// past `depth`: a trap can leave scopes of inner calls open.
    pub(crate) fn abandon_calls_to(&mut self, depth: usize) {
        while self.scopes.len() > depth {
            self.abandon_call();
        }
    }

    /// A call between two components begins.
    pub(crate) fn enter_call(&mut self) {
        self.scopes.push(Scope::default());
    }

    /// A call between two components ends: every borrow it received must
    /// be gone, and its loans end.
    pub(crate) fn exit_call(&mut self) -> Result<()> {
        let Some(scope) = self.scopes.pop() else {
            bail!("a call ends that did not begin");
        };
        if scope.outstanding != 0 {
            bail!("borrow handles still remain at the end of the call");
        }
        for (instance, index) in scope.lenders {
            self.end_loan(instance, index);
        }
        Ok(())
    }
}
