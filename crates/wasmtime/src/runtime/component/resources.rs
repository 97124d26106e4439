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
//! Unfinished: handles do not cross the host boundary yet. Passing a
//! resource to or from the host (a [`ResourceAny`] in a [`Val`](super::Val))
//! is an error, and so is importing a resource type from the host.

use anyhow::{Result, bail};

/// A handle to a resource of any type, owned or borrowed.
///
/// Unfinished: no call produces one yet (see the module docs); the type
/// is here so that [`Val`](super::Val) has its final shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceAny {
    pub(crate) table: usize,
    pub(crate) index: u32,
    pub(crate) owned: bool,
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
                Ok(Some(rep))
            }
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
        let table = &mut self.tables[from];
        let (resource, rep) = match table.get(index)? {
            Slot::Own {
                resource,
                rep,
                loans,
            } => {
                check_type(index, resource, from_resource)?;
                if loans != 0 {
                    bail!("cannot remove owned resource while borrowed");
                }
                (resource, rep)
            }
            Slot::Borrow { .. } => bail!("handle index {index} is a borrow, not an owned handle"),
            Slot::Free => unreachable!("get() refuses free slots"),
        };
        table.remove(index);
        self.new_own(to, resource, rep)
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
            if let Ok(Slot::Own { loans, .. }) = self.tables[instance].get_mut(index) {
                *loans -= 1;
            }
        }
        Ok(())
    }
}
