//! Linear memories.
//!
//! A memory is allocated exactly as its [`MemoryPlan`] says: `guard_before`
//! inaccessible bytes, then the base, then `reservation` bytes of which the
//! current size is read-write, then `guard_size` inaccessible bytes. Growth
//! within the reservation only changes page protection; growth past it
//! moves the memory to a new, larger reservation when the plan allows.
//!
//! The memory's [`VMMemoryDefinition`] (base and length, read by compiled
//! code) lives wherever the owner put it: inline in the defining instance's
//! `VMContext`, or, for a memory created by the host, in an allocation the
//! memory owns. Every change of size or base is written there.
//!
//! With MMU interruption the plan's `mmu_poll_page` makes the host page right
//! below the base a readable poll page (`Mmap::make_poll_page`): compiled code of a module with this
//! memory polls there (`HEAP_MMU_POLL_PAGE_OFFSET`). The page is registered with the store's
//! [`MmuInterruptState`] for as long as it is mapped, so that arming
//! protects it; a memory that moves registers its new page before its base
//! is published and unregisters the old one before unmapping it.
//!
//! With the plan's `write_marks` the leading guard also holds the memory's
//! write marks (`vm::WRITE_MARKS_OFFSET`), read-write: compiled code sets
//! mark `k` after each store that starts in the `k`th 4 KiB, and a reset
//! reads and clears them instead of asking the kernel (see
//! [`Memory::reset`]).

use super::memory_image::MemoryImage;
use super::mmu_interrupt::MmuInterruptState;
use super::pooling::{MemoryPool, SlotContents, SlotLease};
use super::sys::unix::dirty_pages::PageTracker;
use super::sys::unix::mmap::{Mmap, host_page_size};
use crate::ResetPolicy;
use anyhow::{Context, Result, bail};
use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use wasmtime_environ::vm::{
    MMU_POLL_PAGE_SIZE, VMMemoryDefinition, WRITE_MARK_REACH, WRITE_MARK_SHIFT, WRITE_MARKS_OFFSET,
    write_marks_len,
};
use wasmtime_environ::{
    MemoryPlan, MmuInterruptionMode, Tunables, WASM_PAGE_SIZE, WASM32_MAX_PAGES, WasmMemoryType,
};

/// A linear memory.
#[derive(Debug)]
pub struct Memory {
    mmap: Mmap,
    /// Offset of byte 0 in `mmap`.
    base_offset: usize,
    /// Bytes reserved for data from the base (accessible or not).
    reservation: usize,
    /// Current size in bytes (read-write).
    accessible: usize,
    /// The most this memory may ever hold.
    maximum_bytes: u64,
    plan: MemoryPlan,
    growth_reservation: u64,
    ty: WasmMemoryType,
    definition: *mut VMMemoryDefinition,
    _owned_definition: Option<Box<UnsafeCell<VMMemoryDefinition>>>,
    /// The store's MMU state, with which the poll page below the base is
    /// registered (when the plan has one).
    mmu: Option<Arc<MmuInterruptState>>,
    /// The copy-on-write image of the memory's initial contents, mapped at
    /// its offset while `mapping_has_image`.
    image: Option<Arc<MemoryImage>>,
    /// Whether `mmap` is still the mapping made at creation (growth that
    /// moves the memory replaces it with a plain copy).
    original_mapping: bool,
    /// The state a reset returns to, for memories defined by an instance
    /// (`Memory::capture_pristine`).
    pristine: Option<Box<Pristine>>,
    /// For a memory in a pooling allocator's slot (then `mmap` is a view
    /// of the slot): the slot, given back on drop.
    slot: Option<SlotLease>,
    /// How many write marks the leading guard holds (0: the plan has none).
    write_marks: usize,
    /// Whether the host may have written the memory since the last reset
    /// (it borrowed the bytes mutably): the next reset cannot trust the
    /// write marks alone.
    host_may_have_written: AtomicBool,
    /// Whether the host ever took the memory's raw address
    /// (`Memory::data_ptr`), through which it may write at any time: no
    /// reset can trust the write marks alone.
    host_has_pointer: AtomicBool,
}

/// A host page of zeros, the pristine bytes of every page that neither the
/// image nor instantiation filled (64 KiB: the largest host page we
/// support).
static ZERO_PAGE: [u8; 65536] = [0; 65536];

/// `len` zero bytes, `len` at most a host page: the pristine bytes of a
/// page outside the image.
pub(crate) fn zeros(len: usize) -> &'static [u8] {
    &ZERO_PAGE[..len]
}

/// The bytes one write mark stands for.
const MARKED_BLOCK: usize = 1 << WRITE_MARK_SHIFT;

/// How far past the end of a marked block a write a mark vouches for can
/// reach (see `vm::WRITE_MARK_REACH`): a store that starts in the block's
/// last bytes, or one whose own mark compiled code left out because an
/// earlier mark reaches it.
const STORE_SPILL_BYTES: usize = WRITE_MARK_REACH as usize - 1;

/// What a defined memory held right after its instance was instantiated,
/// and how its resets find the pages written since.
#[derive(Debug)]
struct Pristine {
    /// Size in bytes at the end of instantiation.
    accessible: usize,
    /// Byte offsets (sorted, host-page aligned) of the pages instantiation
    /// wrote on top of the image or zeros: data segments that are not in
    /// the image, and whatever the start function wrote.
    overlay_offsets: Vec<usize>,
    /// Their bytes, one host page each, in the same order.
    overlay_bytes: Vec<u8>,
    discovery: Discovery,
    /// Reused from reset to reset, so that a reset allocates nothing.
    written: Vec<Range<usize>>,
    /// Bytes the last reset found written (for tests and benchmarks).
    last_written_bytes: usize,
    /// With write marks and `ResetPolicy::ShootdownFree`, and with
    /// `ResetPolicy::Copy`: the pages restored by copying since the last
    /// decommit (they hold private memory).
    copied: CopiedPages,
    /// `ResetPolicy::Copy`: the pages to write-protect after a reset that
    /// decommitted (the overlay pages it wrote back); reused like
    /// `written`.
    rewritten: Vec<Range<usize>>,
    /// The page tables a trimming reset releases whole (see
    /// [`Memory::page_tables_to_release`]), and the present pages it looked
    /// at to choose them; both reused like `written`.
    released_tables: Vec<Range<usize>>,
    present: Vec<Range<usize>>,
}

impl Pristine {
    /// With `decommit`, makes `written` every page copied since the last
    /// decommit (this reset's among them), so that they all go back to the
    /// image at once, and starts the copied set over. Returns `decommit`.
    fn decommit_copied_if(
        &mut self,
        decommit: bool,
        page: usize,
        written: &mut Vec<Range<usize>>,
    ) -> bool {
        if decommit {
            written.clear();
            self.copied.ranges(page, written);
            self.copied.clear();
        }
        decommit
    }
}

/// How a reset learns which pages were written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Discovery {
    /// Pages holding private data (`PageTracker::anonymous_pages`): exactly
    /// those written since mapping, or since last decommitted; a page
    /// restored by copying stays in the set. Where the kernel cannot tell
    /// (no `PAGEMAP_SCAN`, so no tracker): every page.
    PrivateData,
    /// Registered with userfaultfd and write-protected: exactly the pages
    /// written since the last reset.
    WriteProtected,
}

// SAFETY: the memory exclusively owns its mapping; the definition pointer
// is to memory owned by the same store, which moves between threads as a
// whole.
unsafe impl Send for Memory {}
// SAFETY: the public `&self` methods only compute addresses, read fields
// and set the two host flags, which are atomics; the private `&self`
// helpers that write (`publish`, the mark and restore helpers, poll-page
// registration) run only from `new` and `&mut self` methods, and compiled
// code writes only while the store is borrowed mutably.
unsafe impl Sync for Memory {}

impl Memory {
    /// Creates a memory of type `ty`.
    ///
    /// `definition` is where compiled code reads the memory's base and
    /// length; `None` makes the memory own it. `mmu` is the owning store's
    /// MMU state when MMU interruption is on; the memory's poll page is
    /// registered with it.
    ///
    /// # Errors
    ///
    /// If the type's limits are invalid, the address space cannot be
    /// reserved, or MMU interruption is on and `mmu` is `None`.
    ///
    /// # Safety
    ///
    /// A `Some(definition)` must point to an aligned `VMMemoryDefinition`
    /// that stays valid as long as this memory lives and that nothing but
    /// this memory writes (the store's compiled code may read it). The
    /// memory must be created, grown, reset and dropped only on the thread
    /// that owns the store of `mmu`, in host code, never at a poll: those
    /// register and unregister its poll page with `mmu`.
    pub unsafe fn new(
        ty: &WasmMemoryType,
        tunables: &Tunables,
        definition: Option<*mut VMMemoryDefinition>,
        mmu: Option<Arc<MmuInterruptState>>,
        image: Option<Arc<MemoryImage>>,
        pool: Option<&Arc<MemoryPool>>,
    ) -> Result<Box<Memory>> {
        if ty.minimum > WASM32_MAX_PAGES {
            bail!(
                "memory minimum size of {} pages exceeds memory limits",
                ty.minimum
            );
        }
        if let Some(max) = ty.maximum
            && max < ty.minimum
        {
            bail!("memory maximum size is smaller than its minimum size");
        }
        let mut plan = MemoryPlan::for_memory(ty, tunables);
        if plan.mmu_poll_page && mmu.is_none() {
            bail!("a memory with an MMU poll page needs its store's MMU state");
        }
        let minimum = usize::try_from(ty.minimum * WASM_PAGE_SIZE)?;
        let mut maximum_bytes = ty.maximum_byte_size();
        if let Some(pool) = pool {
            maximum_bytes = maximum_bytes.min(pool.max_memory_size() as u64);
        }
        // A pooled slot keeps its marks mapped from one user to the next,
        // and the next may be larger: map them for the largest memory any
        // user of the slot may have.
        let write_marks = match (plan.write_marks, pool) {
            (false, _) => 0,
            (true, None) => write_marks_len(maximum_bytes),
            (true, Some(pool)) => write_marks_len(pool.max_memory_size() as u64),
        };
        let poll_mode = mmu.as_deref().map(MmuInterruptState::mode);
        if let Some(image) = &image
            && image.offset() + image.len() > minimum
        {
            bail!("a memory image does not fit in its memory's minimum size");
        }
        let (mmap, slot, reservation) = match pool {
            None => {
                let reservation = usize::try_from(plan.reservation)?;
                let mmap = map_memory(
                    &plan,
                    reservation,
                    minimum,
                    poll_mode,
                    image.as_deref(),
                    write_marks,
                )?;
                (mmap, None, reservation)
            }
            Some(pool) => {
                let limit = pool.max_memory_size();
                if minimum > limit {
                    bail!(
                        "memory has a minimum byte size of {minimum} which exceeds the limit of {limit} bytes"
                    );
                }
                // A slot's memory never moves: it grows in place up to the
                // pool's limit (which `Pool::new` keeps within the
                // reservation every plan assumes; `maximum_bytes` is
                // already capped by it).
                plan.may_move = false;
                let reservation = limit;
                let taken = pool.take(image.as_ref())?;
                let base = usize::try_from(plan.guard_before)?;
                // SAFETY: the slot is ours alone; its ranges below are
                // inside it (the pool sized slots for this plan), and
                // their old contents are the image and zeros, or nothing.
                unsafe {
                    match taken.ready {
                        Some(ready) if ready >= minimum => {
                            taken
                                .view
                                .protect(base + minimum, ready - minimum, libc::PROT_NONE)?
                        }
                        Some(ready) => taken.view.make_accessible(base + ready, minimum - ready)?,
                        None => {
                            taken.view.make_accessible(base, minimum)?;
                            map_write_marks(&taken.view, base, write_marks)?;
                            if let Some(image) = &image {
                                taken.view.map_file_at(
                                    base + image.offset(),
                                    image.len(),
                                    image.fd(),
                                )?;
                            }
                        }
                    }
                    // A warm slot of this module still has its readable
                    // poll page (`taken.poll_page`): the pool belongs to one
                    // engine, so the page was made for this arming mode.
                    match (plan.mmu_poll_page, taken.poll_page) {
                        (true, false) => {
                            let mode = poll_mode
                                .context("a memory with an MMU poll page needs its store's mode")?;
                            taken
                                .view
                                .make_poll_page(base - MMU_POLL_PAGE_SIZE, MMU_POLL_PAGE_SIZE, mode)
                                .context("failed to map a linear memory's MMU poll page")?;
                        }
                        (false, true) => taken.view.protect(
                            base - MMU_POLL_PAGE_SIZE,
                            MMU_POLL_PAGE_SIZE,
                            libc::PROT_NONE,
                        )?,
                        (true, true) | (false, false) => {}
                    }
                }
                (taken.view, Some(taken.lease), reservation)
            }
        };
        let (definition, owned) = match definition {
            Some(d) => (d, None),
            None => {
                let owned = Box::new(UnsafeCell::new(VMMemoryDefinition {
                    base: std::ptr::null_mut(),
                    current_length: 0,
                }));
                (owned.get(), Some(owned))
            }
        };
        let memory = Box::new(Memory {
            base_offset: usize::try_from(plan.guard_before)?,
            mmap,
            reservation,
            accessible: minimum,
            maximum_bytes,
            plan,
            growth_reservation: tunables.memory_reservation_for_growth,
            ty: *ty,
            definition,
            _owned_definition: owned,
            mmu: if plan.mmu_poll_page { mmu } else { None },
            image,
            original_mapping: true,
            pristine: None,
            slot,
            write_marks,
            host_may_have_written: AtomicBool::new(false),
            host_has_pointer: AtomicBool::new(false),
        });
        memory.register_poll_page();
        memory.publish();
        Ok(memory)
    }

    /// The start of the poll page below the base, if the memory has one.
    fn poll_page(&self) -> Option<(&MmuInterruptState, usize)> {
        let mmu = self.mmu.as_deref()?;
        Some((mmu, self.base() as usize - MMU_POLL_PAGE_SIZE))
    }

    fn register_poll_page(&self) {
        if let Some((mmu, page)) = self.poll_page() {
            // SAFETY: `map_memory` (or the pool, for a slot taken with
            // its page kept) made this page (the last of the leading
            // guard, page-aligned because the base is) readable, and it
            // holds no data (a kept pointer-swap page's slot is a stale
            // target, which `add_page` overwrites); it stays mapped until
            // `unregister_poll_page`, which runs before the mapping is
            // replaced or dropped. We run from `new`, `grow` or `remap`,
            // which `Memory::new`'s caller promised happen only on the
            // store's thread, in host code, outside any poll.
            unsafe { mmu.add_page(page) };
        }
    }

    /// Unregisters the poll page, if any; returns whether it was left
    /// unreadable (see `MmuInterruptState::remove_page`).
    fn unregister_poll_page(&self) -> bool {
        match self.poll_page() {
            // SAFETY: `remove_page` needs only the store's thread outside
            // any poll; we run from `grow`, `remap` or `drop`, which the
            // caller of `Memory::new` promised happen there, in host code.
            Some((mmu, page)) => unsafe { mmu.remove_page(page) },
            None => false,
        }
    }

    fn publish(&self) {
        // SAFETY: `definition` is our own boxed cell, or one the caller of
        // `Memory::new` promised stays valid while this memory lives and is
        // written by nothing else; `publish` runs only from `new` and
        // `&mut self` methods, so no shared reader of ours overlaps it.
        unsafe {
            *self.definition = VMMemoryDefinition {
                base: self.base(),
                current_length: self.accessible,
            }
        };
    }

    /// Address of byte 0.
    pub fn base(&self) -> *mut u8 {
        // SAFETY: `base_offset` is within the mapping (it precedes the
        // reservation).
        unsafe { self.mmap.as_ptr().add(self.base_offset) }
    }

    /// Current size in bytes.
    pub fn byte_size(&self) -> usize {
        self.accessible
    }

    /// Current size in Wasm pages.
    pub fn pages(&self) -> u64 {
        self.accessible as u64 / WASM_PAGE_SIZE
    }

    /// The memory's declared type.
    pub fn ty(&self) -> &WasmMemoryType {
        &self.ty
    }

    /// Where compiled code reads this memory's base and length.
    pub fn definition(&self) -> *mut VMMemoryDefinition {
        self.definition
    }

    /// Records that the host borrowed the bytes mutably: the next reset
    /// asks the kernel which pages were written instead of trusting the
    /// write marks, which only compiled code sets.
    pub fn note_host_write(&self) {
        if self.write_marks > 0 {
            self.host_may_have_written.store(true, Ordering::Relaxed);
        }
    }

    /// Records that the host took the memory's raw address, through which
    /// it may write whenever it likes: from now on every reset asks the
    /// kernel.
    pub fn note_host_pointer(&self) {
        if self.write_marks > 0 {
            self.host_has_pointer.store(true, Ordering::Relaxed);
        }
    }

    /// The first write mark.
    fn marks(&self) -> *mut u8 {
        debug_assert!(self.write_marks > 0);
        self.base().wrapping_offset(WRITE_MARKS_OFFSET as isize)
    }

    /// How many marks compiled code may have set while the memory was
    /// `accessible` bytes large: one per 4 KiB, one more for a zero-length
    /// bulk operation at the end; 0 for a memory without marks.
    fn marks_in_use(&self, accessible: usize) -> usize {
        (accessible / MARKED_BLOCK + 1).min(self.write_marks)
    }

    /// Clears the first `count` write marks, appending the byte ranges of
    /// the marked blocks that lie below `limit` to `written` (sorted,
    /// adjacent blocks merged). Reads every mark but writes only the words
    /// that hold a set one, so that untouched pages of marks stay
    /// uncommitted.
    fn take_marks(&self, count: usize, limit: usize, written: &mut Vec<Range<usize>>) {
        if count == 0 {
            return;
        }
        let marks = self.marks();
        let mut push = |block: usize| {
            let start = block * MARKED_BLOCK;
            if start >= limit {
                return;
            }
            let end = (start + MARKED_BLOCK).min(limit);
            match written.last_mut() {
                Some(last) if last.end == start => last.end = end,
                _ => written.push(start..end),
            }
        };
        // SAFETY: the first `count` marks lie among the `write_marks` bytes
        // `map_write_marks` made read-write, starting at a page boundary (so
        // aligned for `u64`); no guest code runs during a reset or capture
        // (the store is borrowed mutably) and nothing else refers to the
        // marks, so this is the only access while the slices live.
        let (words, tail) = unsafe {
            (
                std::slice::from_raw_parts_mut(marks.cast::<u64>(), count / 8),
                std::slice::from_raw_parts_mut(marks.add(count / 8 * 8), count % 8),
            )
        };
        // Nearly all marks are clear: test four cache lines at a time (at
        // 16 MiB one line at a time took 0.19 µs per reset, four 0.09 to
        // 0.13), then the words of a group that holds a set one, writing
        // only those that do.
        const GROUP_WORDS: usize = 32;
        let mut take_words = |words: &mut [u64], first_word: usize| {
            for (i, word) in words.iter_mut().enumerate() {
                if *word == 0 {
                    continue;
                }
                let mut set = std::mem::take(word);
                while set != 0 {
                    // The lowest marked block of the word (a mark is any
                    // non-zero byte).
                    let byte = set.trailing_zeros() as usize / 8;
                    push((first_word + i) * 8 + byte);
                    set &= !(0xff << (8 * byte));
                }
            }
        };
        let mut groups = words.chunks_exact_mut(GROUP_WORDS);
        for (index, group) in (&mut groups).enumerate() {
            if group.iter().fold(0, |any, &word| any | word) != 0 {
                take_words(group, index * GROUP_WORDS);
            }
        }
        let rest = groups.into_remainder();
        let rest_start = count / 8 - rest.len();
        take_words(rest, rest_start);
        for (i, mark) in tail.iter_mut().enumerate() {
            if std::mem::take(mark) != 0 {
                push(count / 8 * 8 + i);
            }
        }
    }

    /// Grows by `delta_pages`, returning the old size in pages, or `None` if
    /// the memory cannot grow that much (maximum reached, reservation
    /// exhausted and moving not allowed, or the host refused memory).
    pub fn grow(&mut self, delta_pages: u64) -> Option<u64> {
        let old_pages = self.pages();
        if delta_pages == 0 {
            return Some(old_pages);
        }
        let new_bytes = old_pages
            .checked_add(delta_pages)?
            .checked_mul(WASM_PAGE_SIZE)?;
        if new_bytes > self.maximum_bytes {
            return None;
        }
        let new_len = usize::try_from(new_bytes).ok()?;
        if new_len <= self.reservation {
            // SAFETY: the grown range lies inside the reservation and was
            // inaccessible; nothing relies on it faulting any more.
            unsafe {
                self.mmap
                    .make_accessible(
                        self.base_offset + self.accessible,
                        new_len - self.accessible,
                    )
                    .ok()?
            };
        } else {
            if !self.plan.may_move {
                return None;
            }
            let reservation = new_bytes
                .saturating_add(self.growth_reservation)
                .min(self.maximum_bytes)
                .max(new_bytes)
                .checked_next_multiple_of(WASM_PAGE_SIZE)?;
            let reservation = usize::try_from(reservation).ok()?;
            let poll_mode = self.mmu.as_deref().map(MmuInterruptState::mode);
            // The new mapping's marks start clear: a reset of a memory that
            // moved maps it afresh (`Memory::remap`) and ignores them.
            let mmap = map_memory(
                &self.plan,
                reservation,
                new_len,
                poll_mode,
                None,
                self.write_marks,
            )
            .ok()?;
            // SAFETY: both ranges are read-write and at least `accessible`
            // bytes long; the mappings are distinct.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.base(),
                    mmap.as_ptr().add(self.base_offset),
                    self.accessible,
                )
            };
            // The old page is forgotten before it is unmapped, and the new
            // one registered (armed at once if the store is armed) before
            // compiled code can see the new base. No poll runs in between:
            // growth runs in host code.
            self.unregister_poll_page();
            let old = std::mem::replace(&mut self.mmap, mmap);
            self.register_poll_page();
            drop(old);
            self.reservation = reservation;
            self.original_mapping = false;
        }
        self.accessible = new_len;
        self.publish();
        Some(old_pages)
    }
}

impl Memory {
    /// Records the memory's current state as the one resets return to.
    /// Called once, at the end of instantiating the instance that defines
    /// it.
    ///
    /// `written_by_instantiation` says whether anything may have written
    /// the memory since it was mapped (a data segment copied instead of
    /// imaged, or a start function); if not, the pristine state is the
    /// image and zeros, and nothing is scanned or copied.
    ///
    /// # Errors
    ///
    /// If the kernel's page query fails.
    pub fn capture_pristine(&mut self, written_by_instantiation: bool) -> Result<()> {
        let mut pristine = Box::new(Pristine {
            accessible: self.accessible,
            overlay_offsets: Vec::new(),
            overlay_bytes: Vec::new(),
            discovery: Discovery::PrivateData,
            written: Vec::new(),
            last_written_bytes: 0,
            copied: CopiedPages::default(),
            rewritten: Vec::new(),
            released_tables: Vec::new(),
            present: Vec::new(),
        });
        // What the start function marked is part of the pristine state
        // (found below through the kernel), not something to undo.
        self.take_marks(self.marks_in_use(self.accessible), 0, &mut pristine.written);
        if written_by_instantiation {
            let page = host_page_size();
            let mut written = Vec::new();
            // Probed here and at the first reset, not for every memory: a
            // process that never resets (a `wasmtime run`) never opens
            // `pagemap` or a userfaultfd.
            match PageTracker::get() {
                Some(tracker) => {
                    tracker.anonymous_pages(self.base(), self.accessible, &mut written)?
                }
                // Without the kernel's help, compare every page with what
                // it would hold untouched (only on kernels before 6.7).
                None => {
                    for offset in (0..self.accessible).step_by(page) {
                        if self.page_bytes(offset) != self.untouched_page(offset, page)? {
                            written.push(offset..offset + page);
                        }
                    }
                }
            }
            for range in written {
                for offset in range.step_by(page) {
                    pristine.overlay_offsets.push(offset);
                    pristine
                        .overlay_bytes
                        .extend_from_slice(self.page_bytes(offset));
                }
            }
        }
        self.pristine = Some(pristine);
        Ok(())
    }

    /// The `page` bytes at `offset` as they are now.
    fn page_bytes(&self, offset: usize) -> &[u8] {
        debug_assert!(offset + host_page_size() <= self.accessible);
        // SAFETY: the page is inside the accessible part of the memory; the
        // caller (a reset or capture, with the store borrowed mutably) runs
        // no guest code meanwhile, so nothing writes it while borrowed.
        unsafe { std::slice::from_raw_parts(self.base().add(offset), host_page_size()) }
    }

    /// What page `offset` holds when nothing has written it: the image's
    /// bytes, or `None` for zeros.
    fn image_page(&self, offset: usize) -> Result<Option<&[u8]>> {
        match self.image.as_deref() {
            Some(image) => image.page(offset, host_page_size()),
            None => Ok(None),
        }
    }

    /// What page `offset` held right after instantiation: the overlay's
    /// bytes, the image's, or `None` for zeros.
    fn pristine_page<'a>(
        &'a self,
        pristine: &'a Pristine,
        offset: usize,
        page: usize,
    ) -> Result<Option<&'a [u8]>> {
        match overlay_page(pristine, offset, page) {
            Some(bytes) => Ok(Some(bytes)),
            None => self.image_page(offset),
        }
    }

    fn untouched_page(&self, offset: usize, page: usize) -> Result<&[u8]> {
        Ok(self.image_page(offset)?.unwrap_or(zeros(page)))
    }

    /// Puts the memory back into the state recorded by
    /// [`Memory::capture_pristine`]: its size, and every byte.
    ///
    /// # Errors
    ///
    /// If the memory has no recorded state (it was created by the host, not
    /// by an instance), or a kernel call fails; the memory's contents are
    /// then unspecified, but it stays mapped and usable, and a later reset
    /// may succeed.
    pub fn reset(&mut self, policy: ResetPolicy) -> Result<()> {
        let mut pristine = self.pristine.take().context(
            "this memory was created by the host, not by an instance: it has no initial state to reset to",
        )?;
        let result = self.reset_to(&mut pristine, policy);
        self.pristine = Some(pristine);
        result
    }

    fn reset_to(&mut self, pristine: &mut Pristine, policy: ResetPolicy) -> Result<()> {
        let host_wrote = self.host_may_have_written.swap(false, Ordering::Relaxed);
        if !self.original_mapping {
            return self.remap(pristine);
        }
        let page = host_page_size();
        // Marks compiled code set while the memory was at its largest:
        // every one is cleared, whether or not this reset trusts them.
        let marks_in_use = self.marks_in_use(self.accessible);
        if self.accessible > pristine.accessible {
            let grown = self.accessible - pristine.accessible;
            let start = self.base_offset + pristine.accessible;
            // SAFETY: the grown pages are this memory's own; nothing runs
            // guest code during a reset, and the memory's published length
            // shrinks below them right after, so nobody may rely on them.
            unsafe {
                self.mmap.decommit(start, grown)?;
                self.mmap.protect(start, grown, libc::PROT_NONE)?;
            }
            self.accessible = pristine.accessible;
            self.publish();
        }
        let mut written = std::mem::take(&mut pristine.written);
        written.clear();
        let tracker = PageTracker::get();
        let marked =
            marks_in_use > 0 && !host_wrote && !self.host_has_pointer.load(Ordering::Relaxed);
        self.take_marks(marks_in_use, pristine.accessible, &mut written);
        if !marked {
            written.clear();
            match (pristine.discovery, tracker) {
                (Discovery::PrivateData, Some(tracker)) => {
                    tracker.anonymous_pages(self.base(), pristine.accessible, &mut written)?
                }
                (Discovery::WriteProtected, Some(tracker)) => {
                    tracker.written_since_protect(self.base(), pristine.accessible, &mut written)?
                }
                _ => written.push(0..pristine.accessible),
            }
        }
        let written_bytes: usize = written.iter().map(|r| r.len()).sum();
        pristine.last_written_bytes = written_bytes;
        let decommit = match policy {
            ResetPolicy::Decommit => true,
            ResetPolicy::ShootdownFree { resident_budget } if marked => {
                // The marks say what this call wrote, not what stays
                // private from earlier resets' copies: count those here.
                let copied = pristine.copied.note(&written, page);
                pristine.decommit_copied_if(copied * page > resident_budget, page, &mut written)
            }
            ResetPolicy::ShootdownFree { resident_budget } => written_bytes > resident_budget,
            ResetPolicy::Copy if !marked => {
                // Every page restored stays resident, and each later scan
                // looks at it: trim the set when it outgrows what this
                // reset restores by far (see `copy_should_trim`).
                let copied = pristine.copied.note(&written, page);
                let trim = copy_should_trim(copied, written_bytes.div_ceil(page));
                pristine.decommit_copied_if(trim, page, &mut written)
            }
            _ => false,
        };
        pristine.rewritten.clear();
        pristine.released_tables.clear();
        // A trim releases pages gathered over several resets; a `Decommit`
        // reset releases only its own, every time, and would pay the look
        // for present pages on every reset.
        if decommit
            && !marked
            && policy != ResetPolicy::Decommit
            && let Some(tracker) = tracker
        {
            self.page_tables_to_release(tracker, pristine, &written)?;
        }
        for range in &written {
            if decommit {
                if !covered(&pristine.released_tables, range.clone()) {
                    // SAFETY: the range is inside the accessible memory
                    // (the scan covered nothing else); its contents are
                    // about to be replaced by the pristine ones, which is
                    // the point.
                    unsafe {
                        self.mmap
                            .decommit(self.base_offset + range.start, range.len())?
                    };
                }
                for offset in range.clone().step_by(page) {
                    if let Some(bytes) = overlay_page(pristine, offset, page) {
                        self.write_page(offset, bytes);
                        pristine.rewritten.push(offset..offset + page);
                    }
                }
            } else {
                for offset in range.clone().step_by(page) {
                    self.restore_bytes(pristine, offset, page, page)?;
                }
            }
        }
        for table in &pristine.released_tables {
            // SAFETY: `page_tables_to_release` chose whole page tables
            // inside the accessible memory, outside the image's mapping,
            // holding no overlay page and no present page that is not
            // being released anyway: what they hold is pristine (the image
            // or zeros) once released, and no guest code runs during a
            // reset.
            unsafe {
                self.mmap
                    .decommit(self.base_offset + table.start, table.len())?
            };
        }
        if policy == ResetPolicy::Copy && !marked && decommit {
            // The overlay pages written back are what stays resident now.
            pristine.copied.note(&pristine.rewritten, page);
        }
        if marked {
            // A write a mark vouches for may run into the block after the
            // marked one, which is not marked for it.
            for i in 0..written.len() {
                let end = written[i].end;
                let next_is_written = written.get(i + 1).is_some_and(|r| r.start == end);
                if end < pristine.accessible && !next_is_written {
                    let len = STORE_SPILL_BYTES.min(pristine.accessible - end);
                    self.restore_bytes(pristine, end, len, page)?;
                }
            }
        } else if matches!(policy, ResetPolicy::ShootdownFree { .. }) && self.write_marks > 0 {
            // The kernel's answer is every private page: those copied now
            // are the copied set from here on.
            pristine.copied.clear();
            if !decommit {
                pristine.copied.note(&written, page);
            }
        }
        // A memory that was empty after instantiation has nothing to track
        // (growth is undone wholesale), and maybe no mapping to register.
        // With write marks the kernel's write protection is not needed.
        if policy == ResetPolicy::Copy
            && self.write_marks == 0
            && pristine.accessible > 0
            && let Some(tracker) = tracker
            && tracker.write_protect_available()
        {
            if pristine.discovery == Discovery::PrivateData {
                // The first reset under this policy: from now on the
                // kernel tells exactly which pages get written.
                // SAFETY: the reservation is this memory's own mapping;
                // registration outlives it harmlessly (unmapping
                // unregisters).
                unsafe { tracker.register_write_protect(self.base(), self.reservation)? };
                pristine.discovery = Discovery::WriteProtected;
            }
            // Arm the pages just restored, which are all the pages that hold
            // private data (the first time too: the private-data scan named
            // every one). A page never touched needs no arming (its first
            // write is reported anyway), and arming the whole memory would
            // put a marker in every entry, which each later scan walks: at
            // 16 MiB every reset took 25 µs instead of 7.
            if pristine.discovery == Discovery::WriteProtected {
                // After a decommit only the overlay pages written back hold
                // private data; the released ones read the image or zeros.
                let restored = if decommit {
                    &pristine.rewritten
                } else {
                    &written
                };
                for span in write_protect_spans(restored) {
                    // SAFETY: inside the registered, accessible memory.
                    unsafe { tracker.write_protect(self.base().add(span.start), span.len())? };
                }
            }
        }
        pristine.written = written;
        Ok(())
    }

    /// Sets `pristine.released_tables` to the page tables (as sorted,
    /// disjoint byte ranges of the memory, one table's reach each) that a
    /// reset releasing `released` (sorted) should release whole.
    ///
    /// Releasing a few pages leaves their page table behind, empty, and
    /// every later `PAGEMAP_SCAN` walks all of its entries (about 1.2 µs a
    /// table here): with requests writing new pages each time, a trim after
    /// a trim leaves empty tables all over a large memory, and at 16 MiB
    /// every scan walked eight of them. The kernel frees a table when one
    /// `MADV_DONTNEED` covers all of it and leaves it empty, so a table is
    /// released whole when that loses nothing:
    ///
    /// * it lies inside the accessible memory and outside the image's
    ///   mapping, so one mapping covers it (the kernel frees only a table
    ///   whose range one call zaps within one mapping) and releasing it
    ///   yields zeros, the pristine bytes of every page there that is not
    ///   an overlay page;
    /// * it holds no overlay page (those would be written back at once);
    /// * every present page in it is being released anyway: a page the
    ///   guest only read (the zero page) would cost a fault to bring back.
    ///   Swapped-out pages and write-protect markers do not count: a page
    ///   not in `released` holds its pristine bytes or was never written
    ///   (the scan that found `released` reports every other one), so
    ///   dropping it loses nothing, and a dropped marker only means that a
    ///   later first write is found as a page holding data.
    ///
    /// Costs one read-only scan of the candidate tables per trim.
    fn page_tables_to_release(
        &self,
        tracker: &PageTracker,
        pristine: &mut Pristine,
        released: &[Range<usize>],
    ) -> Result<()> {
        let Pristine {
            accessible,
            overlay_offsets,
            released_tables: out,
            present,
            ..
        } = pristine;
        out.clear();
        let page = host_page_size();
        let span = page_table_reach(page);
        let base = self.base().addr();
        // Whole tables are addressed absolutely; `from` is the first
        // table boundary at or after the base.
        let from = base.next_multiple_of(span) - base;
        let image = self
            .image
            .as_deref()
            .map_or(0..0, |image| image.offset()..image.offset() + image.len());
        for range in released {
            let mut table = from + (range.start.max(from) - from) / span * span;
            while table < range.end && table + span <= *accessible {
                let candidate = table..table + span;
                let holds_overlay = {
                    let i = overlay_offsets.partition_point(|&o| o < candidate.start);
                    overlay_offsets.get(i).is_some_and(|&o| o < candidate.end)
                };
                let in_image = image.start < candidate.end && candidate.start < image.end;
                if !holds_overlay && !in_image && out.last() != Some(&candidate) {
                    out.push(candidate);
                }
                table += span;
            }
        }
        if out.is_empty() {
            return Ok(());
        }
        // One scan per run of adjacent candidates.
        present.clear();
        let mut run_start = 0;
        for i in 0..out.len() {
            if out.get(i + 1).is_some_and(|next| next.start == out[i].end) {
                continue;
            }
            let run = out[run_start].start..out[i].end;
            let before = present.len();
            tracker.present_pages(self.base().wrapping_add(run.start), run.len(), present)?;
            // The scan reports offsets from where it started.
            for found in &mut present[before..] {
                *found = found.start + run.start..found.end + run.start;
            }
            run_start = i + 1;
        }
        out.retain(|table| {
            let i = present.partition_point(|p| p.end <= table.start);
            present[i..]
                .iter()
                .take_while(|p| p.start < table.end)
                .all(|p| covered(released, p.start.max(table.start)..p.end.min(table.end)))
        });
        Ok(())
    }

    /// Restores the `len` bytes at `offset` (within one host page) to their
    /// pristine value, writing only the cache lines that differ (see
    /// [`copy_changed_lines`]): a page nobody wrote is only read, and stays
    /// shared with the image or the zero page.
    ///
    /// # Errors
    ///
    /// If the image's view cannot be mapped (see [`MemoryImage::bytes`]).
    fn restore_bytes(
        &self,
        pristine: &Pristine,
        offset: usize,
        len: usize,
        page: usize,
    ) -> Result<()> {
        let page_start = offset - offset % page;
        let within = offset - page_start;
        let source = self
            .pristine_page(pristine, page_start, page)?
            .unwrap_or(zeros(page));
        // SAFETY: `offset + len` is inside the accessible memory (callers
        // check it against the pristine size or iterate over ranges of
        // it); no guest code runs during a reset, so nothing else reads or
        // writes these bytes meanwhile, and the source (the image's
        // read-only view, the overlay or `ZERO_PAGE`) is not linear memory.
        let now = unsafe { std::slice::from_raw_parts_mut(self.base().add(offset), len) };
        copy_changed_lines(now, &source[within..within + len]);
        Ok(())
    }

    /// How many bytes the last reset found written, if this memory was
    /// ever reset.
    #[cfg(test)]
    pub fn last_reset_written_bytes(&self) -> Option<usize> {
        self.pristine.as_ref().map(|p| p.last_written_bytes)
    }

    fn write_page(&self, offset: usize, bytes: &[u8]) {
        debug_assert!(offset + bytes.len() <= self.accessible);
        // SAFETY: the page is inside the accessible memory, and `bytes`
        // (the image's read-only view or the overlay) is not linear memory;
        // the only caller is a reset, which holds `&mut self` and runs no
        // guest code, so nothing else touches the page meanwhile.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base().add(offset), bytes.len())
        };
    }

    /// The reset of a memory that growth moved: a fresh mapping of the
    /// original reservation with the image, the overlay copied in.
    fn remap(&mut self, pristine: &mut Pristine) -> Result<()> {
        let page = host_page_size();
        let reservation = usize::try_from(self.plan.reservation)?.max(pristine.accessible);
        let poll_mode = self.mmu.as_deref().map(MmuInterruptState::mode);
        let mmap = map_memory(
            &self.plan,
            reservation,
            pristine.accessible,
            poll_mode,
            self.image.as_deref(),
            self.write_marks,
        )?;
        for (i, &offset) in pristine.overlay_offsets.iter().enumerate() {
            let bytes = &pristine.overlay_bytes[i * page..(i + 1) * page];
            // SAFETY: the overlay's pages lie below the pristine size, all
            // accessible in the new mapping, which nothing else uses yet.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    bytes.as_ptr(),
                    mmap.as_ptr().add(self.base_offset + offset),
                    page,
                )
            };
        }
        // The old poll page is forgotten before its mapping goes and the
        // new one registered before `publish` shows compiled code the new
        // base; no poll runs in between, since a reset runs in host code.
        self.unregister_poll_page();
        let old = std::mem::replace(&mut self.mmap, mmap);
        self.register_poll_page();
        drop(old);
        self.reservation = reservation;
        self.accessible = pristine.accessible;
        self.original_mapping = true;
        pristine.discovery = Discovery::PrivateData;
        pristine.copied.clear();
        self.publish();
        Ok(())
    }
}

/// Makes `now` equal to `pristine` a cache line (64 bytes) at a time,
/// writing only the lines that differ. A restored page usually differs in
/// a few lines (a guest wrote some fields, not the whole page), and reading
/// a line that is not cached costs less than writing it, which fetches it
/// first and writes it back later: restoring two such zero pages took
/// 0.36 µs this way against 0.5 µs with `memset` (docs/benchmarks.md,
/// "Write marks"). A page written all over pays one more read per line.
///
/// Where `pristine` comes from [`zeros`] the lines are only tested for
/// zero, which reads one stream instead of two. On x86_64 hosts with AVX2
/// the same loops are compiled a second time for 32-byte registers and
/// picked at run time: a reset restores hot pages too (the ones a request
/// just wrote), where the loop's instructions, not the memory, set the
/// pace ("Restoring with AVX2" in docs/benchmarks.md).
pub(crate) fn copy_changed_lines(now: &mut [u8], pristine: &[u8]) {
    assert_eq!(
        now.len(),
        pristine.len(),
        "restored bytes and source differ in length"
    );
    let zero = is_zero_source(pristine);
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, checked just above; that is the only
        // condition the function's `target_feature` puts on its caller.
        unsafe { restore_lines_avx2(now, pristine, zero) };
        return;
    }
    restore_lines(now, pristine, zero);
}

/// Whether `bytes` is a slice of [`ZERO_PAGE`], i.e. came from [`zeros`].
fn is_zero_source(bytes: &[u8]) -> bool {
    let zero = ZERO_PAGE.as_ptr_range();
    let range = bytes.as_ptr_range();
    zero.start <= range.start && range.end <= zero.end
}

/// [`restore_lines`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn restore_lines_avx2(now: &mut [u8], pristine: &[u8], zero: bool) {
    restore_lines(now, pristine, zero);
}

/// The loop of [`copy_changed_lines`], inlined into each caller so that
/// each compiles it for its own target features. With `zero`, `pristine`
/// is known to be all zeros and is not read.
#[inline(always)]
fn restore_lines(now: &mut [u8], pristine: &[u8], zero: bool) {
    let (now_lines, now_rest) = now.as_chunks_mut::<64>();
    if zero {
        for line in now_lines {
            if line_is_nonzero(line) {
                *line = [0; 64];
            }
        }
        if now_rest.iter().any(|&b| b != 0) {
            now_rest.fill(0);
        }
        return;
    }
    let (pristine_lines, pristine_rest) = pristine.as_chunks::<64>();
    for (line, source) in now_lines.iter_mut().zip(pristine_lines) {
        if lines_differ(line, source) {
            *line = *source;
        }
    }
    // Pages have no rest. Asking `memcmp` about the empty one anyway costs
    // about 180 ns per page here: glibc's EVEX version issues a masked
    // load with an empty mask at the slice's address, the next page, which
    // is often not mapped, and the CPU suppresses that fault in microcode.
    if !now_rest.is_empty() && now_rest != pristine_rest {
        now_rest.copy_from_slice(pristine_rest);
    }
}

/// Whether two cache lines differ: the exclusive or of their words, or-ed
/// together, tested once (the compiler keeps it in vector registers and
/// makes no call).
#[inline(always)]
fn lines_differ(a: &[u8; 64], b: &[u8; 64]) -> bool {
    let (a_words, _) = a.as_chunks::<8>();
    let (b_words, _) = b.as_chunks::<8>();
    a_words.iter().zip(b_words).fold(0, |any, (x, y)| {
        any | (u64::from_ne_bytes(*x) ^ u64::from_ne_bytes(*y))
    }) != 0
}

/// Whether a cache line holds a byte other than zero.
#[inline(always)]
fn line_is_nonzero(line: &[u8; 64]) -> bool {
    let (words, _) = line.as_chunks::<8>();
    words
        .iter()
        .fold(0, |any, word| any | u64::from_ne_bytes(*word))
        != 0
}

/// The bytes one last-level page table maps with `page`-sized pages: a
/// page of 8-byte entries (2 MiB with 4 KiB pages, 32 MiB with 16 KiB).
fn page_table_reach(page: usize) -> usize {
    page / size_of::<u64>() * page
}

/// Whether `ranges` (sorted, disjoint) cover every byte of `r`.
fn covered(ranges: &[Range<usize>], r: Range<usize>) -> bool {
    let mut at = r.start;
    while at < r.end {
        let i = ranges.partition_point(|x| x.end <= at);
        match ranges.get(i) {
            Some(x) if x.start <= at => at = x.end,
            _ => return false,
        }
    }
    true
}

/// Under `ResetPolicy::Copy`, whether a reset should decommit the pages
/// kept resident by copying (`copied` of them, this reset's `written`
/// included) instead of copying `written` back: when they number more
/// than [`COPY_TRIM_FACTOR`] times the pages this reset restores, and more
/// than [`COPY_TRIM_MIN_PAGES`].
///
/// Each resident page costs every later reset's scan about 34 ns (140 µs
/// for the 4,096 pages of a 16 MiB memory). A decommit costs a TLB flush,
/// and each page the guest writes again afterwards a fault that allocates
/// (a protected page faults too, but keeps its page): with requests
/// writing new pages each time, trimming a small set costs more than the
/// walks it saves (a 256 KiB memory trimmed at 32 pages reset 15–27 %
/// slower than untrimmed), so small sets are never trimmed. A request that
/// writes the same pages every time keeps its set at one request's size
/// and never trims either.
fn copy_should_trim(copied_pages: usize, written_pages: usize) -> bool {
    copied_pages > COPY_TRIM_MIN_PAGES.max(written_pages.saturating_mul(COPY_TRIM_FACTOR))
}

/// See [`copy_should_trim`]: a resident set this many times one reset's
/// pages is trimmed.
const COPY_TRIM_FACTOR: usize = 16;

/// See [`copy_should_trim`]: a resident set of at most this many pages is
/// never trimmed (256 KiB of 4 KiB pages; walking it costs about 2 µs).
const COPY_TRIM_MIN_PAGES: usize = 64;

/// Ranges closer than this are write-protected by one call: 2 MiB, what one
/// page table maps with 4 KiB pages. One call flushes the TLB once where a
/// call per range would flush per range, but it also puts a marker in every
/// unpopulated entry between the ranges, and a marker makes the kernel keep
/// and walk that page table in every later scan; within one table the walk
/// visits those entries anyway.
const WRITE_PROTECT_JOIN_GAP: usize = 2 << 20;

/// `written` (sorted, disjoint) joined into the spans that
/// [`Memory::reset`] write-protects, one call each: ranges less than
/// [`WRITE_PROTECT_JOIN_GAP`] apart share a span.
fn write_protect_spans(written: &[Range<usize>]) -> impl Iterator<Item = Range<usize>> + '_ {
    let mut ranges = written.iter().peekable();
    std::iter::from_fn(move || {
        let first = ranges.next()?;
        let mut span = first.clone();
        while let Some(next) = ranges.next_if(|r| r.start - span.end < WRITE_PROTECT_JOIN_GAP) {
            span.end = next.end;
        }
        Some(span)
    })
}

/// A set of pages, one bit each, with its size kept as bits get set (a
/// reset must not count the whole bitmap of a large memory).
#[derive(Debug, Default)]
struct CopiedPages {
    bits: Vec<u64>,
    len: usize,
}

impl CopiedPages {
    /// Adds the pages of `ranges`; returns the set's new size in pages.
    fn note(&mut self, ranges: &[Range<usize>], page: usize) -> usize {
        for range in ranges {
            for index in range.start / page..range.end.div_ceil(page) {
                let word = index / 64;
                if word >= self.bits.len() {
                    self.bits.resize(word + 1, 0);
                }
                let bit = 1 << (index % 64);
                if self.bits[word] & bit == 0 {
                    self.bits[word] |= bit;
                    self.len += 1;
                }
            }
        }
        self.len
    }

    /// Appends the set as sorted byte ranges.
    fn ranges(&self, page: usize, out: &mut Vec<Range<usize>>) {
        for (w, &word) in self.bits.iter().enumerate() {
            let mut bits = word;
            while bits != 0 {
                let bit = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let start = (w * 64 + bit) * page;
                match out.last_mut() {
                    Some(last) if last.end == start => last.end = start + page,
                    _ => out.push(start..start + page),
                }
            }
        }
    }

    fn clear(&mut self) {
        self.bits.fill(0);
        self.len = 0;
    }
}

/// The overlay's bytes for page `offset`, if instantiation wrote it.
fn overlay_page(pristine: &Pristine, offset: usize, page: usize) -> Option<&[u8]> {
    let i = pristine.overlay_offsets.binary_search(&offset).ok()?;
    Some(&pristine.overlay_bytes[i * page..(i + 1) * page])
}

impl Drop for Memory {
    fn drop(&mut self) {
        let poll_page_unreadable = self.unregister_poll_page();
        if let Some(slot) = self.slot.take() {
            let written_known = self
                .pristine
                .as_ref()
                .is_none_or(|p| p.discovery != Discovery::WriteProtected);
            slot.release(Some(SlotContents {
                base_offset: self.base_offset,
                accessible: self.accessible,
                image: self.image.as_ref(),
                written_known,
                poll_page: self.plan.mmu_poll_page && !poll_page_unreadable,
                write_marks: self.marks_in_use(self.accessible),
            }));
        }
    }
}

/// Maps `guard_before + reservation + guard_size` bytes and makes the first
/// `accessible` bytes after the leading guard read-write, and, with an MMU
/// poll page, the last page of the leading guard a poll page for
/// `poll_mode`, the store's arming mode (`Mmap::make_poll_page`).
fn map_memory(
    plan: &MemoryPlan,
    reservation: usize,
    accessible: usize,
    poll_mode: Option<MmuInterruptionMode>,
    image: Option<&MemoryImage>,
    write_marks: usize,
) -> Result<Mmap> {
    let total = plan
        .guard_before
        .checked_add(reservation as u64)
        .and_then(|n| n.checked_add(plan.guard_size))
        .and_then(|n| usize::try_from(n).ok());
    let Some(total) = total else {
        bail!("linear memory reservation is too large for the address space");
    };
    let mmap = Mmap::reserve_for_memory(total)?;
    let guard_before = usize::try_from(plan.guard_before)?;
    // SAFETY: the mapping is fresh and `accessible <= reservation`.
    unsafe { mmap.make_accessible(guard_before, accessible)? };
    if let Some(image) = image {
        if image.offset() + image.len() > accessible {
            bail!("a memory image does not fit in its memory");
        }
        // SAFETY: the range lies in the fresh, accessible part of the
        // reservation (checked just above), which holds only zeros nobody
        // has seen; the image's memfd is sealed against shrinking and holds
        // `len` bytes.
        unsafe { mmap.map_file_at(guard_before + image.offset(), image.len(), image.fd())? };
    }
    if plan.mmu_poll_page {
        // `MemoryPlan::for_memory` makes the leading guard at least one Wasm
        // page when there is a poll page.
        let page = guard_before
            .checked_sub(MMU_POLL_PAGE_SIZE)
            .context("no room for an MMU poll page before a linear memory")?;
        let mode = poll_mode.context("a memory with an MMU poll page needs its store's mode")?;
        // SAFETY: the page lies in the fresh mapping's leading guard, which
        // nothing uses; it becomes zeros, readable (and, in pointer-swap
        // mode, writable).
        unsafe { mmap.make_poll_page(page, MMU_POLL_PAGE_SIZE, mode) }
            .context("failed to map a linear memory's MMU poll page")?;
    }
    map_write_marks(&mmap, guard_before, write_marks)?;
    Ok(mmap)
}

/// Makes the first `count` write marks of the memory whose base is
/// `base_offset` bytes into `mmap` readable and writable (they read as
/// zeros until compiled code sets them).
fn map_write_marks(mmap: &Mmap, base_offset: usize, count: usize) -> Result<()> {
    if count == 0 {
        return Ok(());
    }
    let start = base_offset
        .checked_sub(WRITE_MARKS_OFFSET.unsigned_abs() as usize)
        .context("no room for write marks before a linear memory")?;
    let len = count.next_multiple_of(host_page_size());
    // SAFETY: `MemoryPlan::for_memory` makes the leading guard at least
    // `WRITE_MARKS_GUARD_BEFORE` bytes when the plan has marks, and the
    // marks (at most `WRITE_MARKS_MAX` bytes, rounded to a page) end below
    // the poll page; that part of the guard is not used for anything else,
    // so making it accessible breaks no one's assumption.
    unsafe { mmap.protect(start, len, libc::PROT_READ | libc::PROT_WRITE) }
        .context("failed to map a linear memory's write marks")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loop `copy_changed_lines` may pick: `(now, pristine, zero)`.
    type Restorer = fn(&mut [u8], &[u8], bool);

    /// Every way `copy_changed_lines` can restore: the portable loop and,
    /// where the CPU has it, the AVX2 one, each from a source with data
    /// and from zeros.
    fn restorers() -> Vec<(&'static str, Restorer)> {
        let mut all: Vec<(&'static str, Restorer)> = vec![("portable", restore_lines)];
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            all.push(("avx2", |now, pristine, zero| {
                // SAFETY: this function joins the list only after AVX2 was
                // detected on this CPU, and the tests call it on no other.
                unsafe { restore_lines_avx2(now, pristine, zero) }
            }));
        } else {
            println!("this CPU has no AVX2: only the portable loop is tested");
        }
        all
    }

    #[test]
    fn changed_lines_are_restored() {
        // Lengths around and between lines, and a difference in every
        // position a line or the remainder can hold one.
        for (name, restore) in restorers() {
            for len in [0, 1, 63, 64, 65, 255, 4096] {
                let pristine: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
                for changed in 0..len {
                    let mut now = pristine.clone();
                    now[changed] ^= 0x80;
                    restore(&mut now, &pristine, false);
                    assert_eq!(
                        now, pristine,
                        "{name}: length {len}, byte {changed} changed"
                    );
                    // The same from zeros, with every other byte nonzero too.
                    let mut now = vec![0; len];
                    now[changed] = 1;
                    if changed % 2 == 0 {
                        now[len - 1 - changed / 2] = 0xff;
                    }
                    restore(&mut now, zeros(len), true);
                    assert!(
                        now.iter().all(|&b| b == 0),
                        "{name}: zeros, length {len}, byte {changed} set"
                    );
                }
            }
        }
        assert!(!lines_differ(&[5; 64], &[5; 64]));
        assert!(!line_is_nonzero(&[0; 64]));
        for byte in 0..64 {
            let mut line = [5; 64];
            line[byte] = 6;
            assert!(lines_differ(&line, &[5; 64]), "byte {byte} of a line");
            let mut line = [0; 64];
            line[byte] = 0x80;
            assert!(line_is_nonzero(&line), "byte {byte} of a zero line");
        }
    }

    #[test]
    fn only_slices_of_the_zero_page_count_as_zeros() {
        assert!(is_zero_source(zeros(4096)));
        assert!(is_zero_source(&zeros(4096)[100..200]));
        assert!(is_zero_source(zeros(0)));
        // Zero bytes elsewhere are not known to stay zero: they are
        // compared, not assumed.
        let elsewhere = vec![0u8; 4096];
        assert!(!is_zero_source(&elsewhere));
        // Through the public entry, a zero source and a copied one agree.
        let mut a: Vec<u8> = (0..4096).map(|i| i as u8).collect();
        let mut b = a.clone();
        copy_changed_lines(&mut a, zeros(4096));
        copy_changed_lines(&mut b, &elsewhere);
        assert_eq!(a, elsewhere);
        assert_eq!(b, elsewhere);
    }

    #[test]
    fn copy_trims_only_a_set_that_outgrows_its_resets() {
        // The same pages every time: the set is one reset's, never trimmed,
        // however large.
        assert!(!copy_should_trim(2, 2));
        assert!(!copy_should_trim(5000, 5000));
        // New pages every time: trimmed past the floor and the factor.
        assert!(!copy_should_trim(COPY_TRIM_MIN_PAGES, 1));
        assert!(copy_should_trim(COPY_TRIM_MIN_PAGES + 1, 1));
        assert!(!copy_should_trim(16 * 100, 100));
        assert!(copy_should_trim(16 * 100 + 1, 100));
        assert!(!copy_should_trim(usize::MAX, usize::MAX / 2));
    }

    #[test]
    fn write_protect_spans_join_only_near_ranges() {
        let mb = 1 << 20;
        let spans = |ranges: &[Range<usize>]| write_protect_spans(ranges).collect::<Vec<_>>();
        assert_eq!(spans(&[]), vec![]);
        let one_page = std::slice::from_ref(&(0..4096));
        assert_eq!(spans(one_page), one_page.to_vec());
        // Less than the gap apart: one span, one TLB flush.
        assert_eq!(
            spans(&[0..4096, 8192..12288, 2 * mb - 4096..2 * mb]),
            vec![0..2 * mb]
        );
        // The gap or more apart: separate spans.
        assert_eq!(
            spans(&[0..4096, 4096 + 2 * mb..8192 + 2 * mb, 16 * mb..17 * mb]),
            vec![0..4096, 4096 + 2 * mb..8192 + 2 * mb, 16 * mb..17 * mb]
        );
    }

    #[test]
    fn copied_pages_count_each_page_once() {
        let mut copied = CopiedPages::default();
        assert_eq!(copied.note(&[0..8192, 4096..12288], 4096), 3);
        assert_eq!(copied.note(&[8192..8193, 64 * 4096..65 * 4096], 4096), 4);
        let mut ranges = Vec::new();
        copied.ranges(4096, &mut ranges);
        assert_eq!(ranges, [0..12288, 64 * 4096..65 * 4096]);
        copied.clear();
        assert_eq!(copied.note(&[4096..4097, 4100..4200], 4096), 1);
    }

    fn ty(minimum: u64, maximum: Option<u64>) -> WasmMemoryType {
        WasmMemoryType { minimum, maximum }
    }

    #[test]
    fn grow_in_place() {
        let tunables = Tunables::default();
        // SAFETY: no `definition` (the memory owns its own) and no `mmu`
        // (no poll page to register), so `Memory::new` asks nothing.
        let mut m =
            unsafe { Memory::new(&ty(1, Some(4)), &tunables, None, None, None, None) }.unwrap();
        let base = m.base();
        // SAFETY: `m` owns and keeps its definition; the byte written is the
        // last of the one accessible page, and nothing else uses `m`.
        unsafe {
            assert_eq!((*m.definition()).current_length, 65536);
            *base.add(65535) = 1;
        }
        assert_eq!(m.grow(2), Some(1));
        assert_eq!(m.base(), base);
        // SAFETY: the memory now has 3 pages.
        unsafe {
            assert_eq!((*m.definition()).current_length, 3 * 65536);
            *base.add(3 * 65536 - 1) = 2;
            assert_eq!(*base.add(65535), 1);
        }
        assert_eq!(m.grow(2), None);
        assert_eq!(m.grow(1), Some(3));
        assert_eq!(m.grow(0), Some(4));
    }

    #[test]
    fn grow_moves_when_reservation_is_small() {
        let tunables = Tunables {
            memory_reservation: 0,
            memory_reservation_for_growth: 65536,
            ..Tunables::default()
        };
        // SAFETY: no `definition` (the memory owns its own) and no `mmu`
        // (no poll page to register), so `Memory::new` asks nothing.
        let mut m =
            unsafe { Memory::new(&ty(1, None), &tunables, None, None, None, None) }.unwrap();
        // SAFETY: one page is accessible.
        unsafe { *m.base().add(10) = 42 };
        let old = m.base();
        assert_eq!(m.grow(1), Some(1));
        assert_eq!(m.base(), old, "growth within the reservation stays put");
        assert_eq!(m.grow(5), Some(2));
        assert_ne!(m.base(), old);
        // SAFETY: the memory has 7 pages now and its definition is owned.
        unsafe {
            assert_eq!(*m.base().add(10), 42);
            assert_eq!((*m.definition()).base, m.base());
            assert_eq!((*m.definition()).current_length, 7 * 65536);
            *m.base().add(7 * 65536 - 1) = 1;
        }
    }

    #[test]
    fn no_move_when_disallowed() {
        let tunables = Tunables {
            memory_reservation: 2 * 65536,
            memory_may_move: false,
            ..Tunables::default()
        };
        // SAFETY: no `definition` (the memory owns its own) and no `mmu`
        // (no poll page to register), so `Memory::new` asks nothing.
        let mut m =
            unsafe { Memory::new(&ty(1, None), &tunables, None, None, None, None) }.unwrap();
        assert_eq!(m.grow(1), Some(1));
        assert_eq!(m.grow(1), None);
    }

    /// A memory of `pages` Wasm pages with `b"image"` at 4096 in a CoW
    /// image, its pristine state captured.
    fn imaged_memory(pages: u64) -> Box<Memory> {
        let mut m = uncaptured_imaged_memory(pages);
        m.capture_pristine(false).unwrap();
        m
    }

    /// [`imaged_memory`] before its pristine state is captured.
    fn uncaptured_imaged_memory(pages: u64) -> Box<Memory> {
        let wat = format!(r#"(module (memory {pages}) (data (i32.const 4096) "image"))"#);
        let bytes = wat::parse_str(&wat).unwrap();
        let info = wasmtime_environ::ModuleTranslation::new(
            wasmtime_environ::wasmparser::WasmFeatures::default(),
            &bytes,
        )
        .unwrap()
        .module;
        let images = super::super::memory_image::ModuleImages::build(&info, &bytes).unwrap();
        let image = images
            .memory(wasmtime_environ::DefinedMemoryIndex::from_u32(0))
            .cloned();
        assert!(image.is_some());
        // SAFETY: no `definition` (the memory owns its own) and no `mmu`
        // (no poll page to register), so `Memory::new` asks nothing.
        unsafe {
            Memory::new(
                &ty(pages, None),
                &Tunables::default(),
                None,
                None,
                image,
                None,
            )
        }
        .unwrap()
    }

    fn poke(m: &Memory, offset: usize, value: u8) {
        assert!(offset < m.byte_size());
        // SAFETY: in bounds (checked above).
        unsafe { *m.base().add(offset) = value };
    }

    fn peek(m: &Memory, offset: usize) -> u8 {
        assert!(offset < m.byte_size());
        // SAFETY: in bounds (checked above).
        unsafe { *m.base().add(offset) }
    }

    /// Writes two different pages per round and returns what each reset
    /// found written, checking the contents every time.
    fn rotate(m: &mut Memory, policy: ResetPolicy, rounds: usize) -> Vec<usize> {
        let page = host_page_size();
        let pages = m.byte_size() / page;
        (0..rounds)
            .map(|round| {
                poke(m, 4096, b'X');
                poke(m, (round * 2 + 5) % pages * page + 7, 1);
                m.reset(policy).unwrap();
                assert_eq!(peek(m, 4096), b'i', "round {round}: the image is back");
                assert_eq!(
                    peek(m, (round * 2 + 5) % pages * page + 7),
                    0,
                    "round {round}"
                );
                m.last_reset_written_bytes().unwrap() / page
            })
            .collect()
    }

    #[test]
    fn copy_policy_is_exact_with_write_protection() {
        let Some(tracker) = PageTracker::get() else {
            eprintln!("skipped: this kernel has no PAGEMAP_SCAN");
            return;
        };
        let mut m = imaged_memory(4);
        let found = rotate(&mut m, ResetPolicy::Copy, 20);
        if tracker.write_protect_available() {
            assert!(found.iter().all(|&n| n == 2), "no ratchet: {found:?}");
        } else {
            eprintln!("userfaultfd refused here: checking the ratchet instead");
            assert!(found.windows(2).all(|w| w[1] >= w[0]), "{found:?}");
        }
    }

    #[test]
    fn shootdown_free_ratchets_within_its_budget() {
        if PageTracker::get().is_none() {
            eprintln!("skipped: this kernel has no PAGEMAP_SCAN");
            return;
        }
        let page = host_page_size();
        let mut m = imaged_memory(4);
        let policy = ResetPolicy::ShootdownFree {
            resident_budget: 8 * page,
        };
        let found = rotate(&mut m, policy, 12);
        // Restored pages stay private: the set grows by one page a round
        // (the image page is the same each time) until it outgrows the
        // budget, and that reset decommits it and starts over.
        assert_eq!(&found[..8], &[2, 3, 4, 5, 6, 7, 8, 9], "{found:?}");
        assert_eq!(found[8], 2, "{found:?}");
    }

    #[test]
    fn trims_release_whole_page_tables_that_hold_nothing_else() {
        let Some(tracker) = PageTracker::get() else {
            eprintln!("skipped: this kernel has no PAGEMAP_SCAN");
            return;
        };
        let page = host_page_size();
        let span = page_table_reach(page);
        // 10 MiB and 64 KiB: at least four tables lie wholly inside past
        // the image's page (at 4096), wherever the base falls, and the last
        // one reaches past the end unless the base falls just so.
        let mut m = uncaptured_imaged_memory(161);
        // The first table boundary past the image's page.
        let from = (m.base().addr() + 4096 + page).next_multiple_of(span) - m.base().addr();
        let table = |i: usize| from + i * span;
        assert!(table(4) <= m.byte_size());
        // An overlay page in table 2: instantiation wrote it.
        poke(&m, table(2) + 3 * page, 9);
        m.capture_pristine(true).unwrap();
        // Table 0: two written pages, nothing else. Table 1: a written page
        // and a page the guest only read (the zero page is mapped there).
        // Table 2: a written page beside the overlay page. Table 3: written
        // pages and a read one, all released. The image's page is released
        // too; its table is never whole-released.
        for at in [
            table(0),
            table(0) + page,
            table(1),
            table(2),
            table(3),
            table(3) + page,
        ] {
            poke(&m, at + 5, 1);
        }
        assert_eq!(peek(&m, table(1) + 7 * page), 0);
        assert_eq!(peek(&m, table(3) + 2 * page), 0);
        poke(&m, 4096, b'X');
        let released = [
            4096..4096 + page,
            table(0)..table(0) + 2 * page,
            table(1)..table(1) + page,
            table(2)..table(2) + page,
            table(3)..table(3) + 3 * page,
        ];
        let mut pristine = m.pristine.take().unwrap();
        m.page_tables_to_release(tracker, &mut pristine, &released)
            .unwrap();
        assert_eq!(
            pristine.released_tables,
            [table(0)..table(1), table(3)..table(4)],
            "only tables whose present pages are all released (table 1 keeps a read page, \
             table 2 an overlay page)"
        );
        // A table reaching past the accessible memory is never chosen.
        let tail = from + (m.byte_size() - from) / span * span;
        if tail < m.byte_size() {
            let past_the_end = tail..m.byte_size();
            let past_the_end = std::slice::from_ref(&past_the_end);
            m.page_tables_to_release(tracker, &mut pristine, past_the_end)
                .unwrap();
            assert_eq!(
                pristine.released_tables,
                [],
                "the last table reaches past the memory"
            );
        } else {
            println!("this memory ends on a table boundary: no table reaches past it");
        }
        m.pristine = Some(pristine);

        // Through resets: `ShootdownFree` with a budget of two pages trims
        // every reset here; the read page of table 1 stays mapped, the
        // overlay page and the image come back, and the written pages read
        // zeros.
        let policy = ResetPolicy::ShootdownFree {
            resident_budget: 2 * page,
        };
        for round in 0..3 {
            for at in [table(0), table(0) + page, table(1), table(3)] {
                poke(&m, at + 5, 1);
            }
            poke(&m, table(2) + 3 * page, 1);
            m.reset(policy).unwrap();
            // Before reading anything back, which maps pages again.
            let mut present = Vec::new();
            tracker
                .present_pages(m.base(), m.byte_size(), &mut present)
                .unwrap();
            let read = table(1) + 7 * page;
            assert!(
                present.iter().any(|r| r.contains(&read)),
                "round {round}: the page only read is still mapped: {present:?}"
            );
            assert!(
                !present
                    .iter()
                    .any(|r| r.start < table(1) && table(0) < r.end),
                "round {round}: table 0 was released: {present:?}"
            );
            for at in [table(0), table(0) + page, table(1), table(3)] {
                assert_eq!(peek(&m, at + 5), 0, "round {round}");
            }
            assert_eq!(
                peek(&m, table(2) + 3 * page),
                9,
                "round {round}: the overlay"
            );
            assert_eq!(peek(&m, 4096), b'i', "round {round}: the image");
        }
    }

    #[test]
    fn covered_needs_every_byte() {
        let ranges = [0..10, 10..20, 30..40];
        assert!(covered(&ranges, 0..20));
        assert!(covered(&ranges, 5..15));
        assert!(covered(&ranges, 35..40));
        assert!(covered(&ranges, 7..7));
        assert!(!covered(&ranges, 15..31));
        assert!(!covered(&ranges, 39..41));
        assert!(!covered(&[], 0..1));
        assert_eq!(page_table_reach(4096), 2 << 20);
        assert_eq!(page_table_reach(16384), 32 << 20);
    }

    #[test]
    fn decommit_policy_is_exact() {
        if PageTracker::get().is_none() {
            eprintln!("skipped: this kernel has no PAGEMAP_SCAN");
            return;
        }
        let mut m = imaged_memory(4);
        let found = rotate(&mut m, ResetPolicy::Decommit, 10);
        assert!(found.iter().all(|&n| n == 2), "{found:?}");
    }

    #[test]
    fn reset_undoes_growth_and_moves() {
        let mut m = imaged_memory(1);
        assert_eq!(m.grow(2), Some(1));
        poke(&m, 2 * 65536 + 5, 3);
        m.reset(ResetPolicy::Copy).unwrap();
        assert_eq!(m.byte_size(), 65536);
        assert_eq!(m.grow(2), Some(1));
        assert_eq!(peek(&m, 2 * 65536 + 5), 0, "grown pages come back as zeros");
        // A memory with no pristine state refuses.
        // SAFETY: no `definition` (the memory owns its own) and no `mmu`
        // (no poll page to register), so `Memory::new` asks nothing.
        let mut host =
            unsafe { Memory::new(&ty(1, None), &Tunables::default(), None, None, None, None) }
                .unwrap();
        assert!(host.reset(ResetPolicy::Copy).is_err());
    }

    #[test]
    fn limits() {
        let tunables = Tunables::default();
        // SAFETY: no `definition` (the memory owns its own) and no `mmu`
        // (no poll page to register), so `Memory::new` asks nothing.
        assert!(
            unsafe { Memory::new(&ty(65537, None), &tunables, None, None, None, None) }.is_err()
        );
        // SAFETY: no `definition` (the memory owns its own) and no `mmu`
        // (no poll page to register), so `Memory::new` asks nothing.
        let mut m =
            unsafe { Memory::new(&ty(0, None), &tunables, None, None, None, None) }.unwrap();
        assert_eq!(m.grow(65537), None);
        assert_eq!(m.grow(u64::MAX), None);
        assert_eq!(m.byte_size(), 0);
    }
}
