//! [`Memory`]: linear memories.

use crate::runtime::store::{StoreId, StoreOpaque};
use crate::runtime::vm;
use crate::{AsContext, AsContextMut, Engine, MemoryType, StoreContext, StoreContextMut};
use anyhow::{Result, bail};
use std::fmt;

/// The error of [`Memory::read`] and [`Memory::write`] when the range falls
/// outside the memory.
#[derive(Debug)]
#[non_exhaustive]
pub struct MemoryAccessError {
    // Keep struct internals private for future extensibility.
    _private: (),
}

impl fmt::Display for MemoryAccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "out of bounds memory access")
    }
}

impl std::error::Error for MemoryAccessError {}

/// A linear memory: a byte array, zero-initialized, whose size is a whole
/// number of 64 KiB WebAssembly pages and can only grow.
///
/// A `Memory` is a handle into the [`Store`](crate::Store) that owns it:
/// created by a module instance or by [`Memory::new`]. Its base address may
/// change when it grows (depending on
/// [`Config::memory_may_move`](crate::Config::memory_may_move)), so slices
/// obtained from [`Memory::data`] must not be held across calls that can
/// grow it; the borrow checker enforces this through the store borrow.
#[derive(Copy, Clone, Debug)]
pub struct Memory {
    pub(crate) store: StoreId,
    pub(crate) index: u32,
}

impl Memory {
    /// A new memory of type `ty` in `store`, made by the host (for example
    /// to pass as an import), subject to the store's limiter.
    ///
    /// The memory is allocated by the engine's memory settings (reservation,
    /// guards) and starts with `ty.minimum()` zeroed pages.
    ///
    /// # Errors
    ///
    /// Fails if the minimum exceeds 65536 pages (4 GiB), the maximum is
    /// smaller than the minimum, or the address space cannot be reserved.
    pub fn new(mut store: impl AsContextMut, ty: MemoryType) -> Result<Memory> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        // SAFETY: with `None` for the definition the memory allocates and
        // owns its own, so `new_memory`'s only precondition, about a
        // caller-provided definition, does not apply.
        let index = unsafe { opaque.new_memory(ty.wasm(), None, None, false)? };
        Ok(Memory {
            store: opaque.id(),
            index: u32::try_from(index)?,
        })
    }

    /// Puts this memory back into the state the instantiation of the
    /// instance that defines it left it in: its size (growth is undone) and
    /// every byte, the start function's writes included. Only the memory:
    /// see [`Instance::reset`](crate::Instance::reset) for the whole
    /// instance. The cost grows with the pages written since the last
    /// reset, as there.
    ///
    /// # Errors
    ///
    /// Fails, changing nothing, if the memory belongs to another store, was
    /// created by the host with [`Memory::new`] (it has no initial image to
    /// go back to), or WebAssembly of the store is running (from a host
    /// function called by a guest). Fails if a kernel call fails while
    /// restoring; the memory's contents are then unspecified, and it may be
    /// reset again.
    pub fn reset_to_image(&self, mut store: impl AsContextMut) -> Result<()> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        opaque.check_store(self.store, "memory")?;
        opaque.check_no_wasm_running("a memory")?;
        let policy = opaque.engine().config().reset_policy;
        opaque.memories[self.index as usize].reset(policy)
    }

    fn vm<'a>(&self, store: &'a StoreOpaque) -> &'a vm::Memory {
        store.assert_store(self.store, "memory");
        &store.memories[self.index as usize]
    }

    /// The memory's type: its limits as declared, not its current size.
    ///
    /// # Panics
    ///
    /// Panics if this memory belongs to a different store.
    pub fn ty(&self, store: impl AsContext) -> MemoryType {
        let store = store.as_context();
        MemoryType::from_wasm(self.vm(&store.0.opaque).ty())
    }

    /// Copies `buffer.len()` bytes starting at byte `offset` of the memory
    /// into `buffer`.
    ///
    /// # Errors
    ///
    /// Returns an error if `offset + buffer.len()` is past the end of the
    /// memory.
    ///
    /// # Panics
    ///
    /// Panics if this memory belongs to a different store.
    pub fn read(
        &self,
        store: impl AsContext,
        offset: usize,
        buffer: &mut [u8],
    ) -> Result<(), MemoryAccessError> {
        let store = store.as_context();
        let data = self.data(&store);
        let src = offset
            .checked_add(buffer.len())
            .and_then(|end| data.get(offset..end))
            .ok_or(MemoryAccessError { _private: () })?;
        buffer.copy_from_slice(src);
        Ok(())
    }

    /// Copies `buffer` into the memory, starting at byte `offset`.
    ///
    /// # Errors
    ///
    /// Returns an error if `offset + buffer.len()` is past the end of the
    /// memory.
    ///
    /// # Panics
    ///
    /// Panics if this memory belongs to a different store.
    pub fn write(
        &self,
        mut store: impl AsContextMut,
        offset: usize,
        buffer: &[u8],
    ) -> Result<(), MemoryAccessError> {
        let mut store = store.as_context_mut();
        let data = self.data_mut(&mut store);
        let dst = offset
            .checked_add(buffer.len())
            .and_then(|end| data.get_mut(offset..end))
            .ok_or(MemoryAccessError { _private: () })?;
        dst.copy_from_slice(buffer);
        Ok(())
    }

    /// The memory's current contents as a byte slice, borrowed from the
    /// store (so WebAssembly cannot run, and the memory cannot grow or
    /// move, while the slice lives).
    ///
    /// # Panics
    ///
    /// Panics if this memory belongs to a different store.
    pub fn data<'a, T: 'static>(&self, store: impl Into<StoreContext<'a, T>>) -> &'a [u8] {
        let store = store.into();
        let opaque: &'a StoreOpaque = &store.0.opaque;
        let memory = self.vm(opaque);
        if memory.byte_size() == 0 {
            return &[];
        }
        // SAFETY: the memory's first `byte_size` (non-zero) bytes from
        // `base` are mapped read-write and owned by it; the shared store
        // borrow for `'a` keeps Wasm from running and the memory from being
        // written, grown, reset or moved (all need the store mutably).
        unsafe { std::slice::from_raw_parts(memory.base(), memory.byte_size()) }
    }

    /// The memory's current contents as a mutable byte slice, borrowed from
    /// the store exclusively.
    ///
    /// # Panics
    ///
    /// Panics if this memory belongs to a different store.
    pub fn data_mut<'a, T: 'static>(
        &self,
        store: impl Into<StoreContextMut<'a, T>>,
    ) -> &'a mut [u8] {
        let store = store.into();
        let opaque: &'a mut StoreOpaque = &mut store.0.opaque;
        let memory = self.vm(opaque);
        memory.note_host_write();
        if memory.byte_size() == 0 {
            return &mut [];
        }
        // SAFETY: the memory's first `byte_size` (non-zero) bytes from
        // `base` are mapped read-write and owned by it; the exclusive store
        // borrow for `'a` keeps Wasm and every other accessor of the memory
        // away, and stops it from growing, resetting or moving.
        unsafe { std::slice::from_raw_parts_mut(memory.base(), memory.byte_size()) }
    }

    /// [`Memory::data_mut`] plus the store's data `T`, borrowed at the same
    /// time (they are disjoint), for host code that needs both.
    ///
    /// # Panics
    ///
    /// Panics if this memory belongs to a different store.
    pub fn data_and_store_mut<'a, T: 'static>(
        &self,
        store: impl Into<StoreContextMut<'a, T>>,
    ) -> (&'a mut [u8], &'a mut T) {
        let store = store.into();
        let inner = store.0;
        let memory = self.vm(&inner.opaque);
        memory.note_host_write();
        let (base, len) = (memory.base(), memory.byte_size());
        let data: &'a mut [u8] = if len == 0 {
            &mut []
        } else {
            // SAFETY: `len` (non-zero) bytes from `base` are the memory's
            // mapped, read-write bytes; `inner` is borrowed exclusively for
            // `'a`, which keeps Wasm and other accessors away and the memory
            // in place, and the mapping is not part of `T`, so the two
            // borrows handed out are disjoint.
            unsafe { std::slice::from_raw_parts_mut(base, len) }
        };
        (data, &mut inner.data)
    }

    /// The address of the memory's first byte in the host's address space.
    ///
    /// It stays valid only until the memory next grows (a grown memory may
    /// move, see [`Config::memory_may_move`](crate::Config::memory_may_move)).
    ///
    /// # Panics
    ///
    /// Panics if this memory belongs to a different store.
    pub fn data_ptr(&self, store: impl AsContext) -> *mut u8 {
        let store = store.as_context();
        let memory = self.vm(&store.0.opaque);
        memory.note_host_pointer();
        memory.base()
    }

    /// The memory's current size in bytes.
    ///
    /// # Panics
    ///
    /// Panics if this memory belongs to a different store.
    pub fn data_size(&self, store: impl AsContext) -> usize {
        let store = store.as_context();
        self.vm(&store.0.opaque).byte_size()
    }

    /// The memory's current size in 64 KiB pages.
    ///
    /// # Panics
    ///
    /// Panics if this memory belongs to a different store.
    pub fn size(&self, store: impl AsContext) -> u64 {
        let store = store.as_context();
        self.vm(&store.0.opaque).pages()
    }

    /// The memory's page size in bytes: 65536, as this runtime has no
    /// custom page sizes.
    pub fn page_size(&self, store: impl AsContext) -> u64 {
        let _ = store;
        wasmtime_environ::WASM_PAGE_SIZE
    }

    /// The base-2 logarithm of [`Memory::page_size`]: always 16.
    pub fn page_size_log2(&self, store: impl AsContext) -> u8 {
        let _ = store;
        16
    }

    /// Adds `delta` pages to the memory and returns its size in pages
    /// before the growth. The new pages read as zero.
    ///
    /// The store's limiter is asked first, as for `memory.grow`.
    ///
    /// # Errors
    ///
    /// Fails if the memory would exceed its maximum (declared, or 4 GiB), if
    /// it would need to move and may not (see
    /// [`Config::memory_may_move`](crate::Config::memory_may_move)), or if
    /// the store's limiter refuses or returns an error.
    ///
    /// # Panics
    ///
    /// Panics if this memory belongs to a different store.
    pub fn grow(&self, mut store: impl AsContextMut, delta: u64) -> Result<u64> {
        let store = store.as_context_mut();
        let opaque = &mut store.0.opaque;
        opaque.assert_store(self.store, "memory");
        match opaque.grow_memory(self.index as usize, delta)? {
            Some(old) => Ok(old),
            None => bail!("failed to grow memory by `{delta}`"),
        }
    }

    pub(crate) fn comes_from_same_store(&self, store: &StoreOpaque) -> bool {
        self.store == store.id()
    }
}

/// A memory shared between threads (threads proposal).
///
/// This runtime does not implement the threads proposal: no
/// `SharedMemory` can be created. The type exists for API compatibility.
#[derive(Clone)]
pub struct SharedMemory {
    _private: (),
}

impl fmt::Debug for SharedMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedMemory").finish_non_exhaustive()
    }
}

impl SharedMemory {
    /// Would create a shared memory; always fails here.
    ///
    /// # Errors
    ///
    /// Always: shared memories are not supported.
    pub fn new(engine: &Engine, ty: MemoryType) -> Result<Self> {
        let _ = (engine, ty);
        bail!("shared memories (threads proposal) are not supported by this runtime")
    }

    /// The memory's type.
    pub fn ty(&self) -> MemoryType {
        MemoryType::new(0, Some(0))
    }
}
