//! Engine-wide settings that change generated code or memory layout.

use crate::{WASM_PAGE_SIZE, WasmMemoryType};

/// Settings shared by the compiler and the runtime. Two engines whose
/// `Tunables` differ may produce incompatible code.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Tunables {
    /// Bytes of address space reserved for each linear memory up front.
    pub memory_reservation: u64,
    /// Bytes of inaccessible address space after each linear memory's
    /// reservation.
    pub memory_guard_size: u64,
    /// Extra bytes reserved beyond the initial size of a memory that may move.
    pub memory_reservation_for_growth: u64,
    /// Whether a memory's base address may change when it grows.
    pub memory_may_move: bool,
    /// Whether a guard region also precedes each linear memory.
    pub guard_before_linear_memory: bool,
    /// Whether compiled code checks the engine's epoch counter at function
    /// entries and loop headers.
    pub epoch_interruption: bool,
    /// Whether compiled code counts fuel.
    pub consume_fuel: bool,
    /// Whether compiled code polls for MMU interrupts (a dead load below
    /// `vmctx` or a linear memory's base, `ModuleInfo::mmu_poll_memory`)
    /// at function entries, loop headers and before expensive bulk
    /// operations.
    pub mmu_interruption: bool,
    /// How an interrupt is armed, which decides what a poll looks like
    /// (only meaningful with `mmu_interruption`).
    pub mmu_interruption_mode: MmuInterruptionMode,
    /// Whether functions without loops and calls poll at their entry too
    /// (only meaningful with `mmu_interruption`); see
    /// `Config::mmu_interruption_leaf_polls`.
    pub mmu_poll_leaf_entries: bool,
    /// Whether every compiled store to linear memory also sets the write
    /// mark of the 4 KiB it starts in (`vm::WRITE_MARKS_OFFSET`), so that a
    /// reset learns which pages were written without asking the kernel.
    pub track_memory_writes: bool,
    /// Whether every relaxed-SIMD operator is compiled to its one
    /// deterministic result (`Config::relaxed_simd_deterministic`) instead
    /// of the fastest sequence the target offers.
    pub relaxed_simd_deterministic: bool,
}

/// How an MMU interrupt makes the next poll fault; the public
/// `Config::mmu_interruption_mode` documents the choice for embedders.
///
/// The two modes compile different polls, so they are part of
/// [`Tunables`]: code compiled for one cannot run in the other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MmuInterruptionMode {
    /// The interrupter makes the store's poll pages unreadable with
    /// `mprotect`, and makes them readable again on disarm. A poll is one
    /// load through a base register compiled code has anyway. Each arm is a
    /// system call, and the kernel flushes the page from the TLB of every
    /// CPU running a thread of the process.
    Mprotect,
    /// Each poll reloads a pointer, the *slot* (in a memory's poll page at
    /// `vm::MMU_POLL_SLOT_IN_PAGE`, or in the instance's `vmctx` prefix at
    /// `vm::VMCTX_MMU_POLL_SLOT_OFFSET`), to one of two process-wide pages:
    /// one always readable, one never. The interrupter stores the unreadable
    /// page's address into the slot and disarming stores the readable
    /// one's back: no system call and no TLB flush. A poll reloads the slot
    /// and reads through what it found, two loads instead of one. The
    /// default (`docs/mmu-interruption.md`, "Choosing the default").
    #[default]
    PointerSwap,
}

impl Tunables {
    /// Every setting as a `(name, value)` pair, for the compatibility check
    /// of precompiled modules: code compiled under one value may depend on
    /// it (bounds checks lean on the reservation and guards, interruption
    /// checks are compiled in), so a loading engine must match each pair.
    ///
    /// The destructuring is exhaustive on purpose: a new field does not
    /// compile until it is listed here.
    pub fn code_settings(&self) -> Vec<(&'static str, String)> {
        let Tunables {
            memory_reservation,
            memory_guard_size,
            memory_reservation_for_growth,
            memory_may_move,
            guard_before_linear_memory,
            epoch_interruption,
            consume_fuel,
            mmu_interruption,
            mmu_interruption_mode,
            mmu_poll_leaf_entries,
            track_memory_writes,
            relaxed_simd_deterministic,
        } = self;
        vec![
            ("memory_reservation", memory_reservation.to_string()),
            ("memory_guard_size", memory_guard_size.to_string()),
            (
                "memory_reservation_for_growth",
                memory_reservation_for_growth.to_string(),
            ),
            ("memory_may_move", memory_may_move.to_string()),
            (
                "guard_before_linear_memory",
                guard_before_linear_memory.to_string(),
            ),
            ("epoch_interruption", epoch_interruption.to_string()),
            ("consume_fuel", consume_fuel.to_string()),
            ("mmu_interruption", mmu_interruption.to_string()),
            (
                "mmu_interruption_mode",
                match mmu_interruption_mode {
                    MmuInterruptionMode::Mprotect => "mprotect",
                    MmuInterruptionMode::PointerSwap => "pointer-swap",
                }
                .to_string(),
            ),
            ("mmu_poll_leaf_entries", mmu_poll_leaf_entries.to_string()),
            ("track_memory_writes", track_memory_writes.to_string()),
            (
                "relaxed_simd_deterministic",
                relaxed_simd_deterministic.to_string(),
            ),
        ]
    }
}

impl Default for Tunables {
    fn default() -> Tunables {
        Tunables {
            memory_reservation: 1 << 32,
            memory_guard_size: 32 << 20,
            memory_reservation_for_growth: 2 << 30,
            memory_may_move: true,
            guard_before_linear_memory: true,
            epoch_interruption: false,
            consume_fuel: false,
            mmu_interruption: false,
            mmu_interruption_mode: MmuInterruptionMode::PointerSwap,
            mmu_poll_leaf_entries: true,
            track_memory_writes: false,
            relaxed_simd_deterministic: false,
        }
    }
}

/// How one linear memory is laid out in the address space. Both the
/// runtime's allocator and the compiler's bounds checks follow it.
///
/// The runtime reserves `guard_before` inaccessible bytes, then the
/// memory's base, then `reservation` bytes of which the first
/// `current_length` are read-write and the rest inaccessible, then
/// `guard_size` inaccessible bytes. A memory that does not move keeps this
/// reservation for life; a moving memory gets a new, larger one when it
/// outgrows it. With `mmu_poll_page`, the last host page of `guard_before`
/// is readable instead: the memory's MMU poll page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryPlan {
    /// Bytes reserved for data at allocation (at least the minimum size).
    pub reservation: u64,
    /// Inaccessible bytes after the reservation.
    pub guard_size: u64,
    /// Inaccessible bytes before the base.
    pub guard_before: u64,
    /// Whether the base pointer can change during the memory's life, so that
    /// compiled code must reload it after any call.
    pub may_move: bool,
    /// Whether the `vm::MMU_POLL_PAGE_SIZE` bytes right below the base are
    /// the memory's MMU poll page (readable, registered with the store;
    /// `Tunables::mmu_interruption`). `guard_before` is then at least one
    /// Wasm page, whatever `guard_before_linear_memory` says.
    pub mmu_poll_page: bool,
    /// Whether the guard region before the base holds the memory's write
    /// marks (`Tunables::track_memory_writes`): `guard_before` is then at
    /// least `vm::WRITE_MARKS_GUARD_BEFORE`, and the marks' bytes are
    /// read-write.
    pub write_marks: bool,
}

impl MemoryPlan {
    /// The plan for a memory of type `ty` under `tunables`.
    pub fn for_memory(ty: &WasmMemoryType, tunables: &Tunables) -> MemoryPlan {
        // Rounding to Wasm pages keeps every boundary a multiple of any host
        // page size (4, 16 or 64 KiB).
        let page = WASM_PAGE_SIZE;
        let minimum = ty.minimum.saturating_mul(WASM_PAGE_SIZE);
        let maximum = ty.maximum_byte_size();
        let fixed_size = ty.maximum == Some(ty.minimum);
        let may_move =
            tunables.memory_may_move && !fixed_size && maximum > tunables.memory_reservation;
        let reservation = if may_move {
            minimum.saturating_add(tunables.memory_reservation_for_growth)
        } else {
            tunables.memory_reservation.max(minimum)
        };
        MemoryPlan {
            reservation: round_up(reservation, page),
            guard_size: round_up(tunables.memory_guard_size, page),
            guard_before: if tunables.guard_before_linear_memory {
                round_up(tunables.memory_guard_size, page)
            } else {
                0
            }
            .max(if tunables.mmu_interruption { page } else { 0 })
            .max(if tunables.track_memory_writes {
                round_up(crate::vm::WRITE_MARKS_GUARD_BEFORE, page)
            } else {
                0
            }),
            may_move,
            mmu_poll_page: tunables.mmu_interruption,
            write_marks: tunables.track_memory_writes,
        }
    }

    /// Whether a 32-bit access at static `offset` of `access_size` bytes
    /// needs no explicit bounds check: every address a 32-bit index can form
    /// lands in the reservation or its trailing guard, where an access past
    /// the current length faults.
    pub fn access_needs_no_bounds_check(&self, offset: u64, access_size: u64) -> bool {
        !self.may_move
            && u64::from(u32::MAX)
                .checked_add(offset)
                .and_then(|end| end.checked_add(access_size))
                .is_some_and(|end| end <= self.reservation.saturating_add(self.guard_size))
    }
}

fn round_up(n: u64, to: u64) -> u64 {
    n.checked_next_multiple_of(to).unwrap_or(u64::MAX / to * to)
}
