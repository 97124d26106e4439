//! Fiber stacks: a pool that reserves address space up front and commits a
//! stack only when it is first used.
//!
//! # Layout
//!
//! A pool is one or more *regions*, each a single `PROT_NONE`,
//! `MAP_NORESERVE` reservation of `slots × (guard + stack)` bytes:
//!
//! ```text
//! region: [ guard | stack 0 ][ guard | stack 1 ] ... [ guard | stack n-1 ]
//!           ^ one page, never accessible      ^ top of stack 0 (initial SP)
//! ```
//!
//! Reserving costs address space only: no page is resident and no memory is
//! committed, so a pool for 1,000 stacks of 2 MiB is 2 GiB of address space
//! and nothing else. A slot's stack becomes read-write (one `mprotect`) the
//! first time the slot is handed out; its pages become resident only as the
//! fiber touches them, from the top down. The guard page below each stack
//! stays `PROT_NONE` for the pool's life, so an overflow faults instead of
//! running into the neighbouring stack.
//!
//! # Reuse
//!
//! A returned stack goes on a free list and is handed out again before any
//! fresh slot (most recently returned first, so its top pages are likely
//! still warm). On return, everything below the top
//! [`StackPoolConfig::keep_resident`] bytes is released with
//! `madvise(MADV_DONTNEED)`: the kernel drops those pages (they read as
//! zero if touched again), so a stack that once ran deep recursion does not
//! stay large in the pool, while the top, which nearly every call uses, does
//! not fault again. One `madvise` per return is cheap because stores cache
//! their last stack and return it to the pool only when they drop.
//!
//! # Growth
//!
//! A pool with a fixed capacity (the pooling allocation strategy) reserves
//! all of it at creation and fails an allocation once every slot is in use.
//! Otherwise the pool reserves [`CHUNK_SLOTS`] slots at a time, as needed,
//! and never gives address space back before the engine drops.

use super::sys::unix::mmap::{Mmap, host_page_size};
use anyhow::{Context, Result, bail};
use std::sync::{Arc, Mutex};

/// Slots reserved at a time by a pool without a fixed capacity.
pub const CHUNK_SLOTS: usize = 16;

/// How a [`StackPool`] is sized.
#[derive(Clone, Copy, Debug)]
pub struct StackPoolConfig {
    /// Usable bytes per stack (rounded up to whole pages).
    pub stack_size: usize,
    /// `Some(n)`: reserve `n` stacks now and never more; `None`: grow by
    /// [`CHUNK_SLOTS`] as needed.
    pub capacity: Option<usize>,
    /// Bytes at the top of a returned stack that stay resident (rounded up
    /// to whole pages); the rest is released.
    pub keep_resident: usize,
}

/// A pool of fiber stacks (see the module documentation).
#[derive(Clone, Debug)]
pub struct StackPool {
    inner: Arc<PoolInner>,
}

#[derive(Debug)]
struct PoolInner {
    /// Usable bytes per stack, page-aligned.
    stack_size: usize,
    /// Guard page plus stack.
    slot_size: usize,
    page_size: usize,
    keep_resident: usize,
    capacity: Option<usize>,
    state: Mutex<PoolState>,
}

#[derive(Debug, Default)]
struct PoolState {
    regions: Vec<Mmap>,
    /// Slots handed out from the last region so far.
    used_in_last: usize,
    /// Slots of the last region.
    last_len: usize,
    /// Returned stacks (already read-write), by slot start address.
    free: Vec<usize>,
    /// Stacks currently handed out.
    in_use: usize,
}

impl StackPool {
    /// Creates a pool; with a fixed capacity, reserves its address space
    /// now.
    ///
    /// # Errors
    ///
    /// Fails if the sizes overflow or the address space cannot be reserved.
    pub fn new(config: StackPoolConfig) -> Result<StackPool> {
        let page_size = host_page_size();
        let round = |n: usize| n.checked_next_multiple_of(page_size);
        let stack_size = round(config.stack_size.max(1)).context("fiber stack size overflows")?;
        let slot_size = stack_size
            .checked_add(page_size)
            .context("fiber stack size overflows")?;
        let keep_resident = round(config.keep_resident)
            .context("fiber stack keep-resident size overflows")?
            .min(stack_size);
        let inner = PoolInner {
            stack_size,
            slot_size,
            page_size,
            keep_resident,
            capacity: config.capacity,
            state: Mutex::new(PoolState::default()),
        };
        if let Some(capacity) = config.capacity {
            let mut state = inner.lock();
            inner.reserve_region(&mut state, capacity)?;
        }
        Ok(StackPool {
            inner: Arc::new(inner),
        })
    }

    /// Stacks currently handed out.
    #[cfg_attr(not(test), allow(dead_code, reason = "used by tests"))]
    pub fn in_use(&self) -> usize {
        self.inner.lock().in_use
    }

    /// Bytes of address space reserved so far.
    #[cfg_attr(not(test), allow(dead_code, reason = "used by tests"))]
    pub fn reserved_bytes(&self) -> usize {
        self.inner.lock().regions.iter().map(|r| r.len()).sum()
    }

    /// Hands out a stack: a returned one if any, else a fresh slot, made
    /// read-write now.
    ///
    /// # Errors
    ///
    /// Fails if a fixed-capacity pool is exhausted or the kernel refuses a
    /// mapping or protection change.
    pub fn allocate(&self) -> Result<FiberStack> {
        let inner = &self.inner;
        let mut state = inner.lock();
        let slot = match state.free.pop() {
            Some(slot) => slot,
            None => {
                if state.used_in_last == state.last_len {
                    if inner.capacity.is_some() {
                        bail!("all {} fiber stacks of the pool are in use", state.in_use);
                    }
                    inner.reserve_region(&mut state, CHUNK_SLOTS)?;
                }
                let region = state.regions.last().expect("a region was reserved");
                let slot = region.as_ptr() as usize + state.used_in_last * inner.slot_size;
                // SAFETY: the slot lies in the region (`used_in_last` is
                // below `last_len`) and has never been handed out, and we
                // hold the pool lock, so nothing uses or relies on its
                // range; its first page stays the guard.
                unsafe {
                    region.make_accessible(
                        slot - region.as_ptr() as usize + inner.page_size,
                        inner.stack_size,
                    )?
                };
                state.used_in_last += 1;
                slot
            }
        };
        state.in_use += 1;
        Ok(FiberStack {
            guard: slot,
            pool: self.inner.clone(),
        })
    }
}

impl PoolInner {
    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn reserve_region(&self, state: &mut PoolState, slots: usize) -> Result<()> {
        let len = slots
            .checked_mul(self.slot_size)
            .context("fiber stack pool size overflows")?;
        let region = Mmap::reserve(len).context("failed to reserve fiber stacks")?;
        state.regions.push(region);
        state.used_in_last = 0;
        state.last_len = slots;
        Ok(())
    }

    /// Takes a stack back (see the module documentation on reuse).
    fn release(&self, guard: usize) {
        let bottom = guard + self.page_size;
        let release = self.stack_size - self.keep_resident;
        if release > 0 {
            // SAFETY: the range is the lower part of this slot's stack, and
            // the `FiberStack` handing it back drops only after any coroutine
            // that ran on it has completed or been unwound, so no frame lives
            // on it; the pages read as zero if the slot is reused.
            unsafe {
                libc::madvise(bottom as *mut libc::c_void, release, libc::MADV_DONTNEED);
            }
        }
        let mut state = self.lock();
        state.in_use -= 1;
        state.free.push(guard);
    }
}

/// A stack handed out by a [`StackPool`]; goes back to the pool on drop.
#[derive(Debug)]
pub struct FiberStack {
    /// Start of the slot: the guard page, then the stack.
    guard: usize,
    pool: Arc<PoolInner>,
}

impl FiberStack {
    /// The first byte of the guard page.
    pub fn guard_start(&self) -> usize {
        self.guard
    }

    /// The lowest usable address (just above the guard page).
    pub fn bottom(&self) -> usize {
        self.guard + self.pool.page_size
    }

    /// One past the highest usable address: the initial stack pointer.
    pub fn top(&self) -> usize {
        self.bottom() + self.pool.stack_size
    }
}

impl Drop for FiberStack {
    fn drop(&mut self) {
        self.pool.release(self.guard);
    }
}

// SAFETY: the stack is a read-write range with a guard page below it, at
// least one page (`MIN_STACK_SIZE`) large, page-aligned at both ends, and
// owned exclusively by this value until it drops.
unsafe impl corosensei::stack::Stack for FiberStack {
    fn base(&self) -> corosensei::stack::StackPointer {
        corosensei::stack::StackPointer::new(self.top()).expect("stack top is not null")
    }

    fn limit(&self) -> corosensei::stack::StackPointer {
        corosensei::stack::StackPointer::new(self.guard).expect("stack guard is not null")
    }
}

/// Resident set size of this process in bytes, from `/proc/self/statm`
/// (for tests and benchmarks).
#[cfg_attr(not(test), allow(dead_code, reason = "used by tests"))]
pub fn resident_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * host_page_size())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(capacity: Option<usize>, stack_size: usize) -> StackPool {
        StackPool::new(StackPoolConfig {
            stack_size,
            capacity,
            keep_resident: 0,
        })
        .unwrap()
    }

    #[test]
    fn reserving_1000_stacks_commits_nothing() {
        const MIB: usize = 1 << 20;
        let before = resident_bytes().unwrap();
        let big = pool(Some(1000), 2 * MIB);
        let after = resident_bytes().unwrap();
        assert!(big.reserved_bytes() >= 1000 * 2 * MIB);
        // 2 GiB reserved; the resident set may move by page-table noise
        // only.
        assert!(
            after.saturating_sub(before) < 4 * MIB,
            "resident memory grew by {} bytes",
            after - before
        );
        // First use makes one stack accessible; touching its top commits
        // only the touched pages.
        let stack = big.allocate().unwrap();
        // SAFETY: the top page of an allocated stack is read-write.
        unsafe { std::ptr::write_volatile((stack.top() - 8) as *mut u64, 1) };
        let touched = resident_bytes().unwrap();
        assert!(touched.saturating_sub(before) < 4 * MIB);
    }

    #[test]
    fn stacks_are_reused_and_bounded() {
        let p = pool(Some(2), 64 * 1024);
        let a = p.allocate().unwrap();
        let b = p.allocate().unwrap();
        assert_ne!(a.top(), b.top());
        assert!(p.allocate().is_err(), "a fixed pool is exhausted");
        let a_top = a.top();
        drop(a);
        let c = p.allocate().unwrap();
        assert_eq!(c.top(), a_top, "returned stacks are reused");
        assert_eq!(p.in_use(), 2);
        drop((b, c));
        assert_eq!(p.in_use(), 0);
    }

    #[test]
    fn growing_pool_reserves_chunks() {
        let p = pool(None, 64 * 1024);
        assert_eq!(p.reserved_bytes(), 0);
        let stacks: Vec<_> = (0..CHUNK_SLOTS + 1)
            .map(|_| p.allocate().unwrap())
            .collect();
        assert_eq!(p.in_use(), CHUNK_SLOTS + 1);
        assert!(p.reserved_bytes() >= 2 * CHUNK_SLOTS * 64 * 1024);
        for s in &stacks {
            assert_eq!(s.top() - s.bottom(), 64 * 1024);
            assert_eq!(s.bottom() - s.guard_start(), host_page_size());
        }
    }

    #[test]
    fn released_stacks_read_as_zero() {
        let p = pool(Some(1), 64 * 1024);
        let s = p.allocate().unwrap();
        let low = s.bottom() + 8;
        // SAFETY: `low` is an aligned word inside the read-write stack of
        // `s`, which this test owns and nothing runs on.
        unsafe { std::ptr::write_volatile(low as *mut u64, 7) };
        drop(s);
        let s = p.allocate().unwrap();
        // SAFETY: the pool has one slot, so `s` is the same stack again,
        // read-write, and `low` is an aligned word inside it that nothing
        // else uses; its page was released, so it reads as zero.
        assert_eq!(unsafe { std::ptr::read_volatile(low as *const u64) }, 0);
        drop(s);
    }
}
