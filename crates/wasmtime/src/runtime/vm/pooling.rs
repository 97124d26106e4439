//! The pooling allocator's linear-memory slots and its concurrency limits.
//!
//! With `InstanceAllocationStrategy::Pooling` the engine reserves, when it
//! is created, one `PROT_NONE` region of `total_memories` equal slots, each
//! big enough for any memory the engine's plans allow (leading guard,
//! `memory_reservation`, trailing guard). A memory takes a slot, makes its
//! pages accessible and maps its image there; when the memory is dropped
//! the slot goes back to the pool *warm*: its written pages restored to the
//! image (by copying up to `linear_memory_keep_resident` bytes, by
//! `madvise` beyond), the image left mapped. The next memory of the same
//! module that takes it finds it ready: no `mmap`, no image mapping, no
//! page faults for the kept pages. A slot of another module, or a warm slot
//! beyond `max_unused_warm_slots`, is wiped with one `mmap(MAP_FIXED)` of
//! fresh `PROT_NONE` memory.
//!
//! Tables defined by instances take slots of a second region, read-write
//! from the start (pages are committed when first written), each holding
//! `table_elements` elements: a released slot is zeroed in place up to
//! `table_keep_resident` bytes and decommitted beyond. Instances are
//! counted against `total_core_instances`; their `VMContext`s come from the
//! global allocator, as upstream's do (see docs/architecture.md, "The
//! pooling allocator").

use super::memory::{copy_changed_lines, zeros};
use super::memory_image::MemoryImage;
use super::sys::unix::dirty_pages::PageTracker;
use super::sys::unix::mmap::{Mmap, host_page_size};
use anyhow::{Result, bail};
use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The limits and policies of a pool, from `PoolingAllocationConfig`.
#[derive(Clone, Debug)]
pub struct PoolLimits {
    /// Live core instances at once.
    pub total_core_instances: usize,
    /// Live pooled linear memories at once (the number of slots).
    pub total_memories: usize,
    /// Live tables defined by instances at once.
    pub total_tables: usize,
    /// The most bytes one pooled memory may grow to.
    pub max_memory_size: usize,
    /// Bytes of a released table slot zeroed in place, not decommitted.
    pub table_keep_resident: usize,
    /// The most bytes an instance's `VMContext` may take.
    pub max_core_instance_size: usize,
    /// The most elements a table defined by an instance may have.
    pub table_elements: usize,
    /// Memories one module may define.
    pub max_memories_per_module: usize,
    /// Tables one module may define.
    pub max_tables_per_module: usize,
    /// Free slots kept warm (image mapped, pages resident).
    pub max_unused_warm_slots: usize,
    /// Bytes of written pages restored by copying, not decommitting, when
    /// a slot is released.
    pub linear_memory_keep_resident: usize,
    /// Whether releasing a slot asks the kernel which pages were written
    /// (`PAGEMAP_SCAN`) instead of treating the first
    /// `linear_memory_keep_resident` bytes as written and decommitting the
    /// rest.
    pub pagemap_scan: bool,
}

/// Upstream's error when a pool is exhausted: a limit on concurrent
/// objects was reached. Returned (inside `anyhow::Error`) by
/// instantiation and memory creation; embedders may downcast to it to
/// tell "retry later" from other failures.
#[derive(Debug)]
pub struct PoolConcurrencyLimitError {
    limit: usize,
    kind: &'static str,
}

impl fmt::Display for PoolConcurrencyLimitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "maximum concurrent limit of {} for {} reached",
            self.limit, self.kind
        )
    }
}

impl std::error::Error for PoolConcurrencyLimitError {}

/// A counter of live objects under a limit.
#[derive(Debug)]
pub struct Quota {
    live: AtomicUsize,
    limit: usize,
    kind: &'static str,
}

impl Quota {
    fn new(limit: usize, kind: &'static str) -> Quota {
        Quota {
            live: AtomicUsize::new(0),
            limit,
            kind,
        }
    }

    /// Takes `n` units, or fails with [`PoolConcurrencyLimitError`] (taking
    /// nothing).
    pub fn acquire(self: &Arc<Self>, n: usize) -> Result<QuotaLease> {
        let taken = self
            .live
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |live| {
                live.checked_add(n).filter(|&total| total <= self.limit)
            });
        if taken.is_err() {
            return Err(PoolConcurrencyLimitError {
                limit: self.limit,
                kind: self.kind,
            }
            .into());
        }
        Ok(QuotaLease {
            quota: self.clone(),
            n,
        })
    }
}

/// Units of a [`Quota`], given back on drop.
#[derive(Debug)]
pub struct QuotaLease {
    quota: Arc<Quota>,
    n: usize,
}

impl Drop for QuotaLease {
    fn drop(&mut self) {
        self.quota.live.fetch_sub(self.n, Ordering::AcqRel);
    }
}

/// The engine's pool: memory slots plus the instance and table quotas.
#[derive(Debug)]
pub struct Pool {
    /// The limits it was made with.
    pub limits: PoolLimits,
    /// Live core instances.
    pub instances: Arc<Quota>,
    /// The table slots.
    pub tables: Arc<TablePool>,
    /// The memory slots.
    pub memories: Arc<MemoryPool>,
}

impl Pool {
    /// Reserves the pool's address space: `total_memories` slots of
    /// `slot_size` bytes each (a memory's base sits `guard_before` bytes in).
    ///
    /// # Errors
    ///
    /// If the limits contradict the engine's memory settings, or the
    /// address space cannot be reserved.
    pub fn new(limits: PoolLimits, slot_size: usize, reservation: usize) -> Result<Pool> {
        if limits.max_memory_size > reservation {
            bail!(
                "maximum memory size of {:#x} bytes exceeds the configured memory reservation of {:#x} bytes",
                limits.max_memory_size,
                reservation
            );
        }
        let page = host_page_size();
        let stride = slot_size
            .checked_next_multiple_of(page)
            .filter(|s| *s > 0)
            .ok_or_else(|| anyhow::anyhow!("pooled memory slot size overflows"))?;
        let total = stride
            .checked_mul(limits.total_memories)
            .ok_or_else(|| anyhow::anyhow!("the memory pool's size overflows the address space"))?;
        let mapping = Mmap::reserve_for_memory(total).map_err(|e| {
            e.context(format!(
                "failed to reserve {} memory slots of {stride:#x} bytes for the pooling allocator",
                limits.total_memories
            ))
        })?;
        let memories = Arc::new(MemoryPool {
            mapping,
            stride,
            slots: Mutex::new(SlotList {
                free: (0..limits.total_memories)
                    .rev()
                    .map(FreeSlot::cold)
                    .collect(),
                warm: 0,
            }),
            limits: limits.clone(),
        });
        let table_stride = limits
            .table_elements
            .checked_mul(size_of::<usize>())
            .and_then(|b| b.checked_next_multiple_of(page))
            .ok_or_else(|| anyhow::anyhow!("the table pool's slot size overflows"))?;
        let table_total = table_stride
            .checked_mul(limits.total_tables)
            .ok_or_else(|| anyhow::anyhow!("the table pool's size overflows the address space"))?;
        let tables = Arc::new(TablePool {
            mapping: Mmap::read_write(table_total).map_err(|e| {
                e.context(format!(
                    "failed to reserve {} table slots for the pooling allocator",
                    limits.total_tables
                ))
            })?,
            stride: table_stride,
            capacity: limits.table_elements,
            free: Mutex::new((0..limits.total_tables).rev().collect()),
            keep_resident: limits.table_keep_resident,
            total: limits.total_tables,
        });
        Ok(Pool {
            instances: Arc::new(Quota::new(limits.total_core_instances, "core instances")),
            tables,
            memories,
            limits,
        })
    }
}

/// The linear-memory slots of a pool.
#[derive(Debug)]
pub struct MemoryPool {
    mapping: Mmap,
    stride: usize,
    slots: Mutex<SlotList>,
    limits: PoolLimits,
}

/// Free slots, most recently released last. Warm ones (those with an
/// `image` or resident pages) are at most `max_unused_warm_slots`.
#[derive(Debug)]
struct SlotList {
    free: Vec<FreeSlot>,
    warm: usize,
}

/// What a free slot holds.
#[derive(Debug)]
struct FreeSlot {
    index: usize,
    /// `None`: wiped (fresh `PROT_NONE`). `Some`: warm: the first
    /// `accessible` bytes after the base are read-write and hold exactly
    /// the image (or zeros where it has none), the rest `PROT_NONE`.
    warm: Option<WarmState>,
}

#[derive(Debug)]
struct WarmState {
    image: Option<Arc<MemoryImage>>,
    accessible: usize,
    /// Whether the page below the base is a readable poll page
    /// (`SlotContents::poll_page`).
    poll_page: bool,
}

impl FreeSlot {
    fn cold(index: usize) -> FreeSlot {
        FreeSlot { index, warm: None }
    }
}

/// A slot taken from the pool: where it is, and what it already holds.
#[derive(Debug)]
pub struct TakenSlot {
    /// A non-owning view of the slot's whole range.
    pub view: Mmap,
    /// If the slot is warm with the requested image: how many bytes after
    /// the base are already read-write (holding the image and zeros).
    pub ready: Option<usize>,
    /// Whether the page below the base is still a readable poll page from
    /// the previous user (never when `ready` is `None`: a slot that is not
    /// warm for this image holds no page).
    pub poll_page: bool,
    /// Given back to the pool when dropped.
    pub lease: SlotLease,
}

/// Ownership of one slot; its drop does nothing by itself: the memory
/// gives the slot back with [`MemoryPool::release`], which needs to know
/// what the memory left in it.
#[derive(Debug)]
pub struct SlotLease {
    pool: Arc<MemoryPool>,
    index: usize,
    released: bool,
}

impl SlotLease {
    /// Gives the slot back. `left` says what its memory left in it (`None`:
    /// unknown, so the slot is wiped).
    pub fn release(mut self, left: Option<SlotContents<'_>>) {
        self.released = true;
        self.pool.give_back(self.index, left);
    }
}

impl Drop for SlotLease {
    fn drop(&mut self) {
        if !self.released {
            // Released without a report (the memory failed half-way
            // through creation): wipe the slot so no state leaks.
            let index = self.index;
            self.pool.give_back(index, None);
        }
    }
}

impl MemoryPool {
    /// The base offset of slot `index` in the pool mapping.
    fn slot_start(&self, index: usize) -> *mut u8 {
        // SAFETY: every index passed here comes from the free list or a
        // lease, which hold only `0..total_memories`, and the mapping is
        // `stride * total_memories` bytes, so the offset stays inside it.
        unsafe { self.mapping.as_ptr().add(index * self.stride) }
    }

    /// The most bytes one pooled memory may hold.
    pub fn max_memory_size(&self) -> usize {
        self.limits.max_memory_size
    }

    /// Takes a slot, preferring a warm one that already holds `image` (the
    /// same `Arc`, or both `None`).
    ///
    /// # Errors
    ///
    /// [`PoolConcurrencyLimitError`] when every slot is in use; an error if
    /// wiping a slot of another module fails.
    pub fn take(self: &Arc<Self>, image: Option<&Arc<MemoryImage>>) -> Result<TakenSlot> {
        let same = |state: &WarmState| match (&state.image, image) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        let slot = {
            let mut list = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let position = list
                .free
                .iter()
                .rposition(|s| s.warm.as_ref().is_some_and(same))
                .or_else(|| list.free.iter().rposition(|s| s.warm.is_none()))
                .or_else(|| list.free.len().checked_sub(1));
            let Some(position) = position else {
                return Err(PoolConcurrencyLimitError {
                    limit: self.limits.total_memories,
                    kind: "memories",
                }
                .into());
            };
            let slot = list.free.remove(position);
            if slot.warm.is_some() {
                list.warm -= 1;
            }
            slot
        };
        let lease = SlotLease {
            pool: self.clone(),
            index: slot.index,
            released: false,
        };
        // SAFETY: the slot is ours alone now (taken from the free list
        // under the lock) and lies inside the pool mapping, which outlives
        // the lease (the lease holds the pool).
        let view = unsafe { Mmap::view(self.slot_start(slot.index), self.stride) };
        let (ready, poll_page) = match slot.warm {
            Some(state) if same(&state) => (Some(state.accessible), state.poll_page),
            Some(_) => {
                wipe(&view)?;
                (None, false)
            }
            None => (None, false),
        };
        Ok(TakenSlot {
            view,
            ready,
            poll_page,
            lease,
        })
    }

    fn give_back(&self, index: usize, left: Option<SlotContents<'_>>) {
        // SAFETY: the slot is inside the pool mapping (which `self` keeps
        // alive past the view), page-aligned since `stride` is a multiple
        // of the page size, and still only ours: the lease being released
        // owned it and it is not yet back in the free list.
        let view = unsafe { Mmap::view(self.slot_start(index), self.stride) };
        // A slot registered for userfaultfd write protection would confuse
        // its next user's page queries (the markers read as swapped pages):
        // wipe it.
        let left = left.filter(|contents| contents.written_known);
        let warm = left.and_then(|contents| match self.clean(&view, &contents) {
            Ok(()) => Some(WarmState {
                image: contents.image.cloned(),
                accessible: contents.accessible,
                poll_page: contents.poll_page,
            }),
            Err(e) => {
                log::warn!("wiping a pooled memory slot that could not be cleaned: {e:#}");
                None
            }
        });
        let warm = match warm {
            Some(state) if self.limits.max_unused_warm_slots > 0 => Some(state),
            _ => None,
        };
        if warm.is_none()
            && let Err(e) = wipe(&view)
        {
            // The slot keeps whatever it held; it must not be reused.
            log::error!("leaking a pooled memory slot that could not be wiped: {e:#}");
            return;
        }
        let mut list = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        if warm.is_some() {
            list.warm += 1;
        }
        list.free.push(FreeSlot { index, warm });
        // Too many warm slots: the oldest warm one gets wiped. (Done under
        // the lock; it is one `mmap` and rare in steady state.)
        if list.warm > self.limits.max_unused_warm_slots
            && let Some(oldest) = list.free.iter().position(|s| s.warm.is_some())
        {
            let index = list.free[oldest].index;
            // SAFETY: the slot is free and we hold the list's lock, so no
            // memory uses it and no `take` can hand it out before the view
            // drops; it is a page-aligned range of the live pool mapping.
            let view = unsafe { Mmap::view(self.slot_start(index), self.stride) };
            if wipe(&view).is_ok() {
                list.free[oldest].warm = None;
                list.warm -= 1;
            } else {
                list.free.remove(oldest);
                list.warm -= 1;
                log::error!("leaking a pooled memory slot that could not be wiped");
            }
        }
    }

    /// Restores the written pages of a released slot to the image and
    /// zeros, keeping up to `linear_memory_keep_resident` bytes of them
    /// resident (copied) and decommitting the rest.
    fn clean(&self, view: &Mmap, contents: &SlotContents<'_>) -> Result<()> {
        let page = host_page_size();
        let keep = self
            .limits
            .linear_memory_keep_resident
            .next_multiple_of(page);
        let base = contents.base_offset;
        let mut written: Vec<Range<usize>> = Vec::new();
        match (self.limits.pagemap_scan, PageTracker::get()) {
            (true, Some(tracker)) => {
                // SAFETY: the accessible range lies inside the slot view.
                let start = unsafe { view.as_ptr().add(base) };
                tracker.anonymous_pages(start, contents.accessible, &mut written)?
            }
            _ => {
                // Unknown: the first `keep` bytes are restored in place,
                // the rest decommitted.
                let kept = keep.min(contents.accessible);
                if kept > 0 {
                    written.push(0..kept);
                }
                if contents.accessible > kept {
                    // SAFETY: inside the slot; the memory is gone, so its
                    // bytes are no one's.
                    unsafe { view.decommit(base + kept, contents.accessible - kept)? };
                }
            }
        }
        let total: usize = written.iter().map(|r| r.len()).sum();
        for range in &written {
            if total > keep {
                // SAFETY: `range` lies within the `accessible` bytes after
                // `base`, inside the slot; the memory that used them has
                // been dropped, so nothing relies on their contents.
                unsafe { view.decommit(base + range.start, range.len())? };
                continue;
            }
            for offset in range.clone().step_by(page) {
                let source = match contents.image {
                    Some(image) => image.page(offset, page)?,
                    None => None,
                };
                // SAFETY: the page is inside the slot's accessible range,
                // read-write; the memory that used it is gone, so nothing
                // else reads or writes it, and the source (the image or
                // static zeros) is not slot memory.
                let now = unsafe {
                    std::slice::from_raw_parts_mut(view.as_ptr().add(base + offset), page)
                };
                // Written lines only: a page its memory never wrote is read
                // (mapping the image or the zero page), not filled.
                copy_changed_lines(now, source.unwrap_or(zeros(page)));
            }
        }
        if contents.write_marks > 0 {
            let marks = base - wasmtime_environ::vm::WRITE_MARKS_OFFSET.unsigned_abs() as usize;
            // SAFETY: the marks lie in the slot's leading guard, made
            // read-write when the slot was first used (a wiped slot has
            // none, and its next user maps them again); the memory that
            // set them is gone.
            unsafe { std::ptr::write_bytes(view.as_ptr().add(marks), 0, contents.write_marks) };
        }
        // A readable poll page below the base stays as it is: the next user
        // of this warm slot is an instance of the same module in the same
        // engine, which needs the same page (its store registers it, which
        // rewrites a pointer-swap slot), and a user without one protects
        // it. Keeping it saves the two system calls that make a poll page.
        Ok(())
    }
}

/// What a memory leaves in its slot when it is dropped.
#[derive(Debug)]
pub struct SlotContents<'a> {
    /// Offset of the memory's base in the slot.
    pub base_offset: usize,
    /// Read-write bytes after the base.
    pub accessible: usize,
    /// The image mapped at its offset, if any.
    pub image: Option<&'a Arc<MemoryImage>>,
    /// Whether the pages' private-data state tells which were written
    /// (false once userfaultfd write protection was registered on them:
    /// its markers read as swapped).
    pub written_known: bool,
    /// Whether the page below the base is a readable poll page (made by
    /// `Mmap::make_poll_page` and not left protected by an armed store).
    pub poll_page: bool,
    /// How many write marks (`vm::WRITE_MARKS_OFFSET`) compiled code may
    /// have set: the next user of the slot must find them clear.
    pub write_marks: usize,
}

/// Replaces a whole slot with fresh `PROT_NONE` address space: no pages,
/// no image, no userfaultfd registration.
fn wipe(view: &Mmap) -> Result<()> {
    // SAFETY: every caller passes a slot no memory uses: one just taken
    // from the free list (its last memory gone), one being released by its
    // dropped memory, or a free one under the list's lock.
    unsafe { view.replace_with_reservation() }
}

/// The table slots of a pool: one read-write region, `total` slots of
/// `capacity` elements, zero wherever no table wrote since the last
/// release.
#[derive(Debug)]
pub struct TablePool {
    mapping: Mmap,
    stride: usize,
    capacity: usize,
    free: Mutex<Vec<usize>>,
    keep_resident: usize,
    total: usize,
}

impl TablePool {
    /// Takes a zeroed slot.
    ///
    /// # Errors
    ///
    /// [`PoolConcurrencyLimitError`] when every slot is in use.
    pub fn take(self: &Arc<Self>) -> Result<TableSlot> {
        let index = self
            .free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .ok_or(PoolConcurrencyLimitError {
                limit: self.total,
                kind: "tables",
            })?;
        Ok(TableSlot {
            pool: self.clone(),
            index,
        })
    }
}

/// A table slot taken from a [`TablePool`], given back (cleaned) by
/// [`TableSlot::release`] or, failing that, on drop.
#[derive(Debug)]
pub struct TableSlot {
    pool: Arc<TablePool>,
    index: usize,
}

// SAFETY: a slot is an exclusively owned range of the pool's mapping, used
// only by the table that holds it (which moves with its store).
unsafe impl Send for TableSlot {}
// SAFETY: `&TableSlot` offers only `base` and `capacity`, which compute an
// address and read an immutable field; the elements themselves are read and
// written only through the owning table, with its store borrowed.
unsafe impl Sync for TableSlot {}

impl TableSlot {
    /// The first element.
    pub fn base(&self) -> *mut usize {
        // SAFETY: `index` came from the free list, which holds only
        // `0..total`, and the mapping is `stride * total` bytes, so the
        // offset stays inside it.
        unsafe {
            self.pool
                .mapping
                .as_ptr()
                .add(self.index * self.pool.stride)
                .cast()
        }
    }

    /// How many elements the slot holds.
    pub fn capacity(&self) -> usize {
        self.pool.capacity
    }

    /// Gives the slot back, zeroing its first `high_water` elements (the
    /// only ones its table may have written): in place up to
    /// `table_keep_resident` bytes, by decommitting the pages beyond.
    pub fn release(&mut self, high_water: usize) {
        let page = host_page_size();
        let used = (high_water.min(self.pool.capacity) * size_of::<usize>()).next_multiple_of(page);
        let keep = self.pool.keep_resident.min(used) / page * page;
        let start = self.index * self.pool.stride;
        // SAFETY: `[start, start + used)` is this slot's (used <= stride),
        // and its table is being dropped: nothing reads it any more.
        let cleaned = unsafe {
            std::ptr::write_bytes(self.pool.mapping.as_ptr().add(start), 0, keep);
            self.pool.mapping.decommit(start + keep, used - keep)
        };
        match cleaned {
            Ok(()) => self
                .pool
                .free
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(self.index),
            // Never reuse a slot that may still hold a table's elements.
            Err(e) => log::error!("leaking a pooled table slot that could not be cleaned: {e:#}"),
        }
    }
}
