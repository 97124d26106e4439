//! [`ResourceTable`]: where a host keeps the values behind the
//! [`Resource<T>`] handles it gives to components.
//!
//! A host resource's representation (`rep`) is a 32-bit number the host
//! chooses; this table makes it an index into a vector of boxed values of
//! any type, reusing freed indices last-freed-first, so that reps stay small
//! and dense. Entries may have a parent: a child keeps its parent alive
//! (the parent cannot be deleted while it has children), which is how WASI
//! ties, say, a stream to the file it reads.

use super::Resource;
use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};

/// Entries a table holds at most unless told otherwise
/// ([`ResourceTable::set_max_capacity`]).
const DEFAULT_MAX_CAPACITY: usize = 1_000_000;

/// Why a [`ResourceTable`] operation failed. The table is unchanged after
/// any of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceTableError {
    /// The table holds its maximum number of entries.
    Full,
    /// No entry has the handle's index (never made, or deleted).
    NotPresent,
    /// The entry is of another type than the handle says.
    WrongType,
    /// The entry cannot be deleted while entries made its children exist.
    HasChildren,
}

impl std::fmt::Display for ResourceTableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ResourceTableError::Full => "resource table has no free keys",
            ResourceTableError::NotPresent => "resource not present",
            ResourceTableError::WrongType => "resource is of another type",
            ResourceTableError::HasChildren => "resource has children",
        })
    }
}

impl std::error::Error for ResourceTableError {}

/// One index of the table.
enum Slot {
    /// Free; the next free index after it, if any.
    Free {
        next: Option<u32>,
    },
    Used(Entry),
}

struct Entry {
    value: Box<dyn Any + Send>,
    parent: Option<u32>,
    children: BTreeSet<u32>,
}

/// Host values by index, handed to components as [`Resource<T>`] handles.
///
/// [`push`](ResourceTable::push) stores a value and returns an owned handle
/// whose rep is the value's index; [`get`](ResourceTable::get),
/// [`get_mut`](ResourceTable::get_mut) and [`delete`](ResourceTable::delete)
/// find it again from a handle (owned or borrowed) and check that it is of
/// the handle's type. A failed operation changes nothing.
pub struct ResourceTable {
    slots: Vec<Slot>,
    /// The most recently freed index, heading the chain of free ones.
    free: Option<u32>,
    max_capacity: usize,
}

impl Default for ResourceTable {
    fn default() -> Self {
        ResourceTable::new()
    }
}

impl std::fmt::Debug for ResourceTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceTable")
            .field("entries", &self.len())
            .field("max_capacity", &self.max_capacity)
            .finish()
    }
}

impl ResourceTable {
    /// An empty table.
    pub fn new() -> ResourceTable {
        ResourceTable::with_capacity(0)
    }

    /// An empty table with room for `capacity` entries before it
    /// reallocates.
    pub fn with_capacity(capacity: usize) -> ResourceTable {
        ResourceTable {
            slots: Vec::with_capacity(capacity),
            free: None,
            max_capacity: DEFAULT_MAX_CAPACITY,
        }
    }

    /// Whether the table holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn len(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Used(_)))
            .count()
    }

    /// The most entries the table holds (at first one million); past it,
    /// [`push`](ResourceTable::push) fails with [`ResourceTableError::Full`].
    pub fn max_capacity(&self) -> usize {
        self.max_capacity
    }

    /// Sets [`max_capacity`](ResourceTable::max_capacity). Entries already
    /// beyond a lower maximum stay; only new ones are refused.
    pub fn set_max_capacity(&mut self, max: usize) {
        self.max_capacity = max;
    }

    fn insert(&mut self, entry: Entry) -> Result<u32, ResourceTableError> {
        if let Some(index) = self.free {
            let slot = &mut self.slots[index as usize];
            let Slot::Free { next } = *slot else {
                unreachable!("the free chain holds only free slots");
            };
            self.free = next;
            *slot = Slot::Used(entry);
            return Ok(index);
        }
        if self.slots.len() >= self.max_capacity {
            return Err(ResourceTableError::Full);
        }
        let index = u32::try_from(self.slots.len()).map_err(|_| ResourceTableError::Full)?;
        self.slots.push(Slot::Used(entry));
        Ok(index)
    }

    fn entry(&self, index: u32) -> Result<&Entry, ResourceTableError> {
        match self.slots.get(index as usize) {
            Some(Slot::Used(entry)) => Ok(entry),
            _ => Err(ResourceTableError::NotPresent),
        }
    }

    fn entry_mut(&mut self, index: u32) -> Result<&mut Entry, ResourceTableError> {
        match self.slots.get_mut(index as usize) {
            Some(Slot::Used(entry)) => Ok(entry),
            _ => Err(ResourceTableError::NotPresent),
        }
    }

    /// Stores `value`; returns an owned handle of it.
    ///
    /// # Errors
    ///
    /// [`ResourceTableError::Full`] at the maximum capacity.
    pub fn push<T: Send + 'static>(&mut self, value: T) -> Result<Resource<T>, ResourceTableError> {
        let index = self.insert(Entry {
            value: Box::new(value),
            parent: None,
            children: BTreeSet::new(),
        })?;
        Ok(Resource::new_own(index))
    }

    /// Stores `value` as a child of `parent`, which then cannot be deleted
    /// before the child is; returns an owned handle of the child.
    ///
    /// # Errors
    ///
    /// [`ResourceTableError::NotPresent`] if `parent` is not in the table,
    /// [`ResourceTableError::Full`] at the maximum capacity.
    pub fn push_child<T: Send + 'static, U: 'static>(
        &mut self,
        value: T,
        parent: &Resource<U>,
    ) -> Result<Resource<T>, ResourceTableError> {
        let parent = parent.rep();
        self.entry(parent)?;
        let index = self.insert(Entry {
            value: Box::new(value),
            parent: Some(parent),
            children: BTreeSet::new(),
        })?;
        self.entry_mut(parent)
            .expect("checked above")
            .children
            .insert(index);
        Ok(Resource::new_own(index))
    }

    /// Makes the existing entry `child` a child of `parent` (it must not
    /// have a parent already).
    ///
    /// # Errors
    ///
    /// [`ResourceTableError::NotPresent`] if either is not in the table;
    /// [`ResourceTableError::HasChildren`] if `child` is `parent` or one
    /// of its ancestors, since that would make a cycle no deletion could
    /// undo; [`ResourceTableError::WrongType`] if `child` already has a
    /// parent.
    pub fn add_child<T: 'static, U: 'static>(
        &mut self,
        child: Resource<T>,
        parent: Resource<U>,
    ) -> Result<(), ResourceTableError> {
        let (child, parent) = (child.rep(), parent.rep());
        if self.entry(child)?.parent.is_some() {
            return Err(ResourceTableError::WrongType);
        }
        // Walk up from the parent: meeting the child means a cycle.
        let mut ancestor = Some(parent);
        while let Some(a) = ancestor {
            if a == child {
                return Err(ResourceTableError::HasChildren);
            }
            ancestor = self.entry(a)?.parent;
        }
        self.entry_mut(parent)?.children.insert(child);
        self.entry_mut(child)?.parent = Some(parent);
        Ok(())
    }

    /// Ends the parent–child link between `child` and `parent`.
    ///
    /// # Errors
    ///
    /// [`ResourceTableError::NotPresent`] if either is not in the table or
    /// `child` is not a child of `parent`.
    pub fn remove_child<T: 'static, U: 'static>(
        &mut self,
        child: Resource<T>,
        parent: Resource<U>,
    ) -> Result<(), ResourceTableError> {
        let (child, parent) = (child.rep(), parent.rep());
        if self.entry(child)?.parent != Some(parent) {
            return Err(ResourceTableError::NotPresent);
        }
        self.entry_mut(parent)?.children.remove(&child);
        self.entry_mut(child)?.parent = None;
        Ok(())
    }

    /// The value behind `handle`.
    ///
    /// # Errors
    ///
    /// [`ResourceTableError::NotPresent`] or
    /// [`ResourceTableError::WrongType`].
    pub fn get<T: Any>(&self, handle: &Resource<T>) -> Result<&T, ResourceTableError> {
        self.entry(handle.rep())?
            .value
            .downcast_ref()
            .ok_or(ResourceTableError::WrongType)
    }

    /// The value behind `handle`, mutably.
    ///
    /// # Errors
    ///
    /// As for [`ResourceTable::get`].
    pub fn get_mut<T: Any>(&mut self, handle: &Resource<T>) -> Result<&mut T, ResourceTableError> {
        self.entry_mut(handle.rep())?
            .value
            .downcast_mut()
            .ok_or(ResourceTableError::WrongType)
    }

    /// The value at index `rep`, whatever its type.
    ///
    /// # Errors
    ///
    /// [`ResourceTableError::NotPresent`].
    pub fn get_any_mut(&mut self, rep: u32) -> Result<&mut dyn Any, ResourceTableError> {
        Ok(&mut *self.entry_mut(rep)?.value)
    }

    /// Removes the value behind `handle` and returns it; its index becomes
    /// free for the next push.
    ///
    /// # Errors
    ///
    /// [`ResourceTableError::NotPresent`], [`ResourceTableError::WrongType`]
    /// (the value stays), or [`ResourceTableError::HasChildren`] while
    /// children of it exist.
    pub fn delete<T: Any>(&mut self, handle: Resource<T>) -> Result<T, ResourceTableError> {
        let index = handle.rep();
        let entry = self.entry(index)?;
        if !entry.value.is::<T>() {
            return Err(ResourceTableError::WrongType);
        }
        if !entry.children.is_empty() {
            return Err(ResourceTableError::HasChildren);
        }
        let slot = std::mem::replace(
            &mut self.slots[index as usize],
            Slot::Free { next: self.free },
        );
        self.free = Some(index);
        let Slot::Used(entry) = slot else {
            unreachable!("checked to be used above");
        };
        if let Some(parent) = entry.parent {
            // A parent outlives its children, so it is still here.
            self.entry_mut(parent)
                .expect("a parent outlives its children")
                .children
                .remove(&index);
        }
        Ok(*entry
            .value
            .downcast::<T>()
            .unwrap_or_else(|_| unreachable!("the type was checked above")))
    }

    /// The values of `parent`'s children, in index order.
    ///
    /// # Errors
    ///
    /// [`ResourceTableError::NotPresent`] if `parent` is not in the table.
    pub fn iter_children<T: 'static>(
        &self,
        parent: &Resource<T>,
    ) -> Result<impl Iterator<Item = &(dyn Any + Send)>, ResourceTableError> {
        let children = &self.entry(parent.rep())?.children;
        Ok(children.iter().map(|child| {
            &*self
                .entry(*child)
                .expect("a child is in the table while linked")
                .value
        }))
    }

    /// Pairs each value of `map` with the entry at its key (mutably, all
    /// at once, which distinct keys allow), or with
    /// [`ResourceTableError::NotPresent`] where there is none.
    pub fn iter_entries<T>(
        &mut self,
        map: BTreeMap<u32, T>,
    ) -> impl Iterator<Item = (Result<&mut dyn Any, ResourceTableError>, T)> {
        // The keys ascend, so each entry is split off the part of the
        // slots past the previous key.
        let mut rest: &mut [Slot] = &mut self.slots;
        let mut start = 0usize;
        let mut out = Vec::with_capacity(map.len());
        for (key, value) in map {
            let key = key as usize;
            let entry = if key < start + rest.len() {
                let (_, tail) = std::mem::take(&mut rest).split_at_mut(key - start);
                let (slot, tail) = tail.split_first_mut().expect("key within the slots");
                rest = tail;
                start = key + 1;
                match slot {
                    Slot::Used(entry) => Ok(&mut *entry.value as &mut dyn Any),
                    Slot::Free { .. } => Err(ResourceTableError::NotPresent),
                }
            } else {
                Err(ResourceTableError::NotPresent)
            };
            out.push((entry, value));
        }
        out.into_iter()
    }

    /// Every value in the table, mutably, in index order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut (dyn Any + Send)> {
        self.slots.iter_mut().filter_map(|slot| match slot {
            Slot::Used(entry) => Some(&mut *entry.value),
            Slot::Free { .. } => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_indices_are_reused_last_freed_first() {
        let mut table = ResourceTable::new();
        let a = table.push(1u32).unwrap();
        let b = table.push(2u32).unwrap();
        let c = table.push(3u32).unwrap();
        assert_eq!((a.rep(), b.rep(), c.rep()), (0, 1, 2));
        let (a_rep, c_rep) = (a.rep(), c.rep());
        assert_eq!(table.delete(a).unwrap(), 1);
        assert_eq!(table.delete(c).unwrap(), 3);
        assert_eq!(table.push(4u32).unwrap().rep(), c_rep);
        assert_eq!(table.push(5u32).unwrap().rep(), a_rep);
        assert_eq!(table.push(6u32).unwrap().rep(), 3);
        assert_eq!(*table.get(&b).unwrap(), 2);
    }

    #[test]
    fn failures_change_nothing() {
        let mut table = ResourceTable::new();
        let n = table.push(7u64).unwrap();
        let as_string = Resource::<String>::new_own(n.rep());
        assert_eq!(table.get(&as_string), Err(ResourceTableError::WrongType));
        assert_eq!(table.delete(as_string), Err(ResourceTableError::WrongType));
        assert_eq!(*table.get(&n).unwrap(), 7);
        let missing = Resource::<u64>::new_own(9);
        assert_eq!(
            table.get(&missing).map(|_| ()),
            Err(ResourceTableError::NotPresent)
        );
        table.set_max_capacity(1);
        assert_eq!(table.push(1u8).map(|_| ()), Err(ResourceTableError::Full));
        assert_eq!(table.delete(n).unwrap(), 7);
        assert!(table.is_empty());
    }

    #[test]
    fn parents_outlive_children() {
        let mut table = ResourceTable::new();
        let file = table.push("file").unwrap();
        let stream = table.push_child(10u32, &file).unwrap();
        let file_again = Resource::<&str>::new_own(file.rep());
        assert_eq!(
            table.delete(file_again),
            Err(ResourceTableError::HasChildren)
        );
        let children: Vec<u32> = table
            .iter_children(&file)
            .unwrap()
            .map(|c| *c.downcast_ref::<u32>().unwrap())
            .collect();
        assert_eq!(children, [10]);
        table.delete(stream).unwrap();
        assert_eq!(table.delete(file).unwrap(), "file");
    }

    #[test]
    fn links_cannot_make_cycles() {
        let mut table = ResourceTable::new();
        let a = table.push(0u8).unwrap();
        let b = table.push_child(1u8, &a).unwrap();
        let (a_rep, b_rep) = (a.rep(), b.rep());
        let handle = |rep| Resource::<u8>::new_own(rep);
        assert_eq!(
            table.add_child(handle(a_rep), handle(b_rep)),
            Err(ResourceTableError::HasChildren)
        );
        assert_eq!(
            table.add_child(handle(b_rep), handle(a_rep)),
            Err(ResourceTableError::WrongType),
            "b already has a parent"
        );
        table.remove_child(handle(b_rep), handle(a_rep)).unwrap();
        table.delete(a).unwrap();
        table.delete(b).unwrap();
    }

    #[test]
    fn entries_by_key_all_at_once() {
        let mut table = ResourceTable::new();
        let reps: Vec<u32> = (0..5u32).map(|i| table.push(i).unwrap().rep()).collect();
        table.delete(Resource::<u32>::new_own(reps[2])).unwrap();
        let map: BTreeMap<u32, &str> = [(1, "one"), (2, "two"), (4, "four"), (9, "nine")]
            .into_iter()
            .collect();
        let mut seen = Vec::new();
        for (entry, name) in table.iter_entries(map) {
            match entry {
                Ok(value) => {
                    let v = value.downcast_mut::<u32>().unwrap();
                    *v += 100;
                    seen.push((name, Some(*v)));
                }
                Err(e) => {
                    assert_eq!(e, ResourceTableError::NotPresent);
                    seen.push((name, None));
                }
            }
        }
        assert_eq!(
            seen,
            [
                ("one", Some(101)),
                ("two", None),
                ("four", Some(104)),
                ("nine", None)
            ]
        );
    }
}
