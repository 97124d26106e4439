//! MMU-interruption polls for Cranelift, emitted through a
//! [`FunctionBuilder`].
//!
//! A *poll* is a load whose result nobody uses, from a page that the
//! runtime owns (the store's interrupt page). While the page is readable
//! the load costs one instruction. To interrupt, another thread makes the
//! page unreadable; the next poll faults, the runtime's SIGSEGV handler
//! recognizes the faulting instruction by its trap code, handles the
//! interrupt, and resumes by running the same load again. Published
//! Cranelift (0.135) has no dedicated instruction for this, so
//! [`dead_load_with_context`] emits one ordinary `load.i32` with carefully
//! chosen flags and a per-site offset. This crate knows nothing about the
//! runtime: it only guarantees that every poll it emits reaches the machine
//! code as one load with a trap record.
//!
//! # Why a poll survives the optimizer
//!
//! A poll is a load of an `i32` from `base + page_offset + slot`, where
//! the page starts at `base + page_offset` (the caller picks both, giving
//! `page_offset` to [`PollSites::new`]: a page pointer with offset 0, or, as
//! our runtime does, the function's `vmctx` with the page at a constant
//! distance from it) and `slot` is the site's own 4-byte slot of the page.
//! Its flags:
//!
//! * **trapping**: it carries the caller's trap code and is *not*
//!   `notrap`. Cranelift deletes a load with an unused result only when it
//!   cannot trap, so a trapping load is never dead code; the egraph treats
//!   it as a side effect, so it is not hoisted out of its loop, sunk, or
//!   value-numbered away; and its trap code is what lets the signal handler
//!   tell a poll from a genuine fault.
//! * **`aligned`**: true by construction (every offset is a multiple of 4
//!   and the caller's page start is aligned to at least 4); the access is
//!   a single naturally aligned instruction.
//! * **not `readonly`, not `can_move`**: a load that is `readonly`,
//!   `notrap` and `can_move` is a pure value to the egraph, free to be
//!   merged, hoisted or dropped. A poll is the opposite of that: the page's
//!   protection changes under the running code, and the point of the load
//!   is *where* it executes. Neither flag is set, so no current or future
//!   rule may treat two polls as interchangeable or move one.
//! * **a distinct offset per poll site**. The trap code does *not* protect
//!   a load from redundant-load elimination: alias analysis replaces a load
//!   by an earlier, dominating load with the same key, where the key is
//!   (memory version, base value, offset, type, extension, byte order)
//!   and the memory version of a load without an alias region is the last
//!   fence-like instruction before it (a call, an atomic, a fence, a
//!   `sequence_point`, or a store without an alias region). In a loop
//!   without such instructions (stores tagged with alias regions do not
//!   count) a loop-header poll at the same offset as the entry poll would be
//!   deleted. So [`PollSites`] hands out each slot it uses (of the page's
//!   in-page offsets `0, 4, …, 4092`) once, nearest to the base first: two
//!   polls never share a key, whatever the control flow. A distinct offset costs
//!   nothing; the page is ours and every slot of it is readable.
//!
//! ## Past the last distinct offset
//!
//! The page has [`DISTINCT_OFFSETS`] aligned `i32` slots; an allocator
//! limited to directly encodable offsets ([`PollSites::for_isa`], see
//! "Lowering") uses fewer of them, [`PollSites::distinct_offsets`]. Call
//! that number `D`. From the `D + 1`-th poll of a function on, offsets
//! wrap around (site `k` reads the allocator's slot `k % D`), and each such
//! poll is *bracketed* by two `sequence_point` instructions, emitted back
//! to back:
//!
//! ```text
//! sequence_point
//! v = load.i32 aligned <trap code> page+OFFSET   ; the poll
//! sequence_point
//! ```
//!
//! Alias analysis treats `sequence_point` as a memory fence, which starts a
//! new memory version. The bracketed poll's key therefore names its own
//! leading `sequence_point`, and no other load can have that version: the
//! only instruction between the two fences is the poll itself. So a
//! bracketed poll can neither be replaced by another load nor stand in for
//! one. The trailing fence is needed because a [`FunctionBuilder`] may fill
//! blocks in any order: a site allocated later (wrapped offset, fenced) may
//! end up dominating an earlier site with the same offset; without the
//! trailing fence the earlier site would see the leading fence as its
//! memory version and be merged into the later poll (the test suite builds
//! exactly that function and shows the loss). `sequence_point` itself emits
//! no machine code on x86_64 or aarch64; its cost is that loads elsewhere in
//! the function (from the vmctx, say) are not reused across it, which only
//! matters in functions with more than `D` polls: a thousand on x86_64, 60
//! or 64 on aarch64 with our engine's pages (see "Lowering").
//!
//! ## No alias region
//!
//! A poll has no alias region, deliberately. A region could not separate
//! two polls: nothing ever stores into the poll's region, so its memory
//! version falls back to the last fence, exactly as without a region. A
//! region would not narrow anything either: a trapping load already counts
//! as observing every region (stores before a poll are never removed as
//! dead, which the handler relies on anyway). And it could hurt: regions
//! are identified by user ids that the embedder allocates (and that
//! inlining merges by id), so a generic helper choosing one could collide
//! with the embedder's numbering and assert a disjointness that is false.
//!
//! # What "context" means here
//!
//! The handler must find the store whose interrupt page faulted. It does
//! *not* read a pinned register or an extra operand of the poll: it uses
//! the faulting thread's innermost Wasm activation, a thread-local record
//! the runtime keeps on every entry into Wasm, which names the store. So a
//! poll needs no fixed register, Cranelift's register allocation and
//! calling conventions stay exactly as upstream, and the only operand is
//! the base register. The "context" in `dead_load_with_context` is that
//! implicit per-thread context. Which *page* faulted is the fault address,
//! which the handler checks against the store's pages.
//!
//! # Lowering
//!
//! A poll must be one load instruction whose address is the base register
//! plus an immediate: no address computed into another register first.
//! That costs nothing while the page is readable, and it is what the
//! runtime's aarch64 trampoline relies on: it resumes at the poll through
//! x16, one of Cranelift's two scratch registers, so no poll may read
//! through x16 or x17 (see `crates/wasmtime/src/runtime/vm/arch/
//! aarch64_mmu_poll.s`).
//!
//! * x86_64: `mov r32, dword ptr [base + disp]` whatever the offset (no
//!   or an 8-bit displacement for total offsets in -128..=127, a 32-bit
//!   one beyond). Every slot is directly encodable ([`DirectOffsets::ANY`]).
//! * aarch64: `ldur wN, [xM, #simm9]` for total offsets in -256..=255, and
//!   `ldr wN, [xM, #imm]` (12 bits scaled by 4) for multiples of 4 in
//!   0..=16380 ([`DirectOffsets::AARCH64`]). Any other offset makes
//!   Cranelift move the constant into a register first (`movn`/`movz`
//!   into an allocated register and a register-offset load, or, where the
//!   offset is only legalized at emission, the scratch register x16): one
//!   more instruction and one more live register per poll. So on aarch64
//!   the translator builds its allocators with [`PollSites::for_isa`],
//!   which keeps only the slots in range. Our engine's pages lie below
//!   their bases: the `vmctx`-relative page (offset -4112, ending 16 bytes
//!   below `vmctx`) gives the 60 slots `vmctx - 20` down to `vmctx - 256`,
//!   the page below a linear memory's base (offset -4096) the 64 slots
//!   `base - 4` down to `base - 256`; both are `ldur`. A function with more
//!   polls than that wraps around with fences, as described above. A page
//!   pointer as the base (offset 0) would get all 1,024 slots as `ldr`.
//!
//! The golden files `tests/disas/*.aarch64.*.txt` list, for every poll,
//! its base register and displacement, and the tests check that each poll
//! is an immediate-offset load through a register other than x16/x17.
//!
//! The destination is whatever register the allocator finds free; its
//! value is dead. The handler resumes at the same instruction, so nothing
//! about the poll's registers has to be restored.
//!
//! A poll is not a call: it clobbers no caller-saved registers and needs no
//! stack space, so a leaf function stays a leaf (the `leaf` golden files
//! show no call).
//!
//! # Polls through a slot (pointer swap)
//!
//! [`dead_load_through_slot`] emits the other kind of poll: the page is not
//! at a fixed place but wherever a pointer, the *slot*, says. The runtime
//! arms by storing the address of a never-readable page into the slot (no
//! system call, no TLB flush) and disarms by storing a readable page's
//! address back. A poll is therefore two loads:
//!
//! ```text
//! sequence_point
//! page = load.i64 notrap aligned slot_base+SLOT   ; the reload
//! v    = load.i32 aligned <trap code> page        ; the poll
//! ```
//!
//! The reload must run at every poll site, or a loop would keep polling the
//! page it found when it was entered. Unlike the poll, it cannot get a
//! distinct offset per site (there is one slot), and alias analysis would
//! replace every reload in a store-free loop by the first one: same base,
//! offset, type and memory version. The leading `sequence_point` gives each
//! reload a memory version of its own (the fence right before it, which no
//! other load follows directly), so no two reloads share a key. The poll
//! then reads through a value that differs per site, so it cannot be merged
//! either, and it needs no distinct offset. The fence emits no code; what it
//! costs is that loads elsewhere in the function are not reused across a
//! poll, measured on the Sightglass programs in `docs/benchmarks.md`. The
//! reload is `notrap` (the slot is always mapped) but neither `readonly`
//! nor `can_move`: its value changes under the running code.
//!
//! The poll's base register holds the never-readable page's address when
//! it faults, so running it again after disarming would fault again. A
//! runtime must either repair that register or resume at the reload; see
//! `wasmtime_mmu_environ::mmu_poll` for what ours does and why.
//!
//! # Caveats for the embedder
//!
//! * Do not emit other loads from or stores to the page at poll offsets;
//!   only this crate's polls should touch it. When the base is shared (a
//!   `vmctx`), no other access through it may land in
//!   `[page_offset, page_offset + POLL_SPAN)`.
//! * A poll in a block that turns out unreachable is removed along with the
//!   block; [`PollSites::emitted`] still counts it.
//!
//! # Tests and blessing
//!
//! `cargo test --release -p wasmtime-mmu-dead-load` compiles several
//! functions for x86_64 and aarch64 at every opt level and compares the
//! disassembly and trap records with `tests/disas/NAME.ISA.OPT.txt`.
//! After an intended change, `BLESS=1 cargo test --release -p
//! wasmtime-mmu-dead-load` rewrites those files; review the diff. Whatever
//! the files say, every test also checks that the number of trap records
//! with the poll trap code equals [`PollSites::emitted`].

#![deny(missing_docs)]

use cranelift_codegen::ir::{self, InstBuilder, MemFlagsData, TrapCode, types};
use cranelift_codegen::isa::TargetIsa;
use cranelift_frontend::FunctionBuilder;
use target_lexicon::Architecture;

/// Bytes of the page a poll may read from: every offset handed out is below
/// this.
pub const POLL_SPAN: u32 = 4096;

/// How many distinct in-page offsets exist (one aligned `i32` slot each):
/// `POLL_SPAN / 4`. An allocator that may use every slot
/// ([`PollSites::new`], or any target whose loads encode every offset)
/// reuses offsets, fenced, only past this many polls in one function; one
/// limited to directly encodable offsets may have fewer
/// ([`PollSites::distinct_offsets`]).
pub const DISTINCT_OFFSETS: u32 = POLL_SPAN / SLOT_BYTES;

/// Bytes read by one poll (an `i32`).
const SLOT_BYTES: u32 = 4;

/// The displacements, relative to the base register, that a target's
/// 4-byte load can carry in the instruction itself: a closed range of
/// offsets, meant for offsets that are multiples of 4 (every poll offset
/// is one).
///
/// A poll whose total offset (`page_offset + slot`) lies outside this range
/// still works, but the target needs the address (or the offset) in a
/// register first: one more instruction and one more register per poll,
/// and, on aarch64, a register that may be one of Cranelift's scratch
/// registers x16/x17 when the offset is only legalized at emission. A
/// runtime whose poll trampoline resumes through a scratch register (ours
/// on aarch64) needs every poll to be a single load through an allocatable
/// register. [`PollSites::for_isa`] limits a function's polls to this
/// range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DirectOffsets {
    /// Smallest encodable offset.
    min: i32,
    /// Largest encodable offset.
    max: i32,
}

impl DirectOffsets {
    /// Every `i32` offset: x86_64, whose loads take a 32-bit displacement.
    pub const ANY: DirectOffsets = DirectOffsets {
        min: i32::MIN,
        max: i32::MAX,
    };

    /// aarch64: `ldur wT, [xN, #simm9]` reaches -256..=255 and
    /// `ldr wT, [xN, #uimm12 * 4]` the multiples of 4 in 0..=16380. For
    /// offsets that are multiples of 4 the two together cover -256..=16380
    /// without a gap, and Cranelift selects one of them for any such offset
    /// (`ldr` from 0 up, `ldur` for negative offsets).
    pub const AARCH64: DirectOffsets = DirectOffsets {
        min: -256,
        max: 16380,
    };

    /// The offsets `min..=max`.
    ///
    /// # Panics
    ///
    /// If `min > max`.
    pub const fn new(min: i32, max: i32) -> DirectOffsets {
        assert!(min <= max, "an empty range of direct offsets");
        DirectOffsets { min, max }
    }

    /// The range for `isa`'s architecture: [`DirectOffsets::AARCH64`] on
    /// aarch64 and [`DirectOffsets::ANY`] everywhere else. Only x86_64 and
    /// aarch64 are checked by this crate's tests; other targets are not
    /// restricted (their polls get every slot, as with [`PollSites::new`]).
    pub fn for_isa(isa: &dyn TargetIsa) -> DirectOffsets {
        DirectOffsets::for_architecture(isa.triple().architecture)
    }

    /// As [`DirectOffsets::for_isa`], from the architecture alone.
    pub fn for_architecture(arch: Architecture) -> DirectOffsets {
        match arch {
            Architecture::Aarch64(_) => DirectOffsets::AARCH64,
            _ => DirectOffsets::ANY,
        }
    }

    /// Smallest offset of the range.
    pub fn min(&self) -> i32 {
        self.min
    }

    /// Largest offset of the range.
    pub fn max(&self) -> i32 {
        self.max
    }

    /// Whether a 4-byte load at `offset` (a multiple of 4) from its base
    /// register encodes the offset directly.
    pub fn contains(&self, offset: i32) -> bool {
        (self.min..=self.max).contains(&offset)
    }
}

/// Per-function allocator of poll sites: it knows where the page lies
/// relative to the base value the polls read through, and hands each poll
/// its own displacement. Create one per function being built and pass it
/// to every [`dead_load_with_context`] call for that function.
///
/// Slots are handed out **nearest to the base first**: from the page's
/// start up when the page starts at or above the base, from its top down
/// when it lies wholly below. The first polls of a function thus get the
/// smallest displacements, which x86_64 encodes in one byte (-128..=127)
/// instead of four: with a page ending 20 bytes below the base, as in our
/// engine, the first 28 polls of every function are 3-byte loads.
///
/// An allocator made by [`PollSites::for_isa`] or
/// [`PollSites::with_direct_offsets`] uses only the slots whose total
/// offset the target encodes in the load itself, in the same order; past
/// the last of them it wraps around to the first, with fences (see the
/// crate documentation). On aarch64 that is 60 slots for our engine's
/// `vmctx`-relative page (`vmctx - 20` down to `vmctx - 256`) and 64 for a
/// page right below a linear memory's base (`base - 4` down to
/// `base - 256`).
#[derive(Debug)]
pub struct PollSites {
    /// Polls emitted so far; the next poll is site number `emitted`.
    emitted: u32,
    /// Where the page starts relative to the base value.
    page_offset: i32,
    /// The first slot in use, as an index into the nearest-first order of
    /// the page's slots.
    first_slot: u32,
    /// How many consecutive slots of that order are in use (at least 1).
    slots: u32,
}

impl Default for PollSites {
    /// The same as `PollSites::new(0)`: a page pointer as the base, every
    /// slot in use.
    fn default() -> PollSites {
        PollSites::new(0)
    }
}

/// Where one poll reads and whether it needs fences.
struct Site {
    offset: i32,
    fenced: bool,
}

impl PollSites {
    /// An allocator for a function with no polls yet, whose polls read a
    /// page that starts at `base + page_offset` (0 when the base is the
    /// page's address itself). Every one of the page's
    /// [`DISTINCT_OFFSETS`] slots is used, whether or not the target
    /// encodes its offset directly; see [`PollSites::for_isa`].
    ///
    /// # Panics
    ///
    /// If the page's end, `page_offset + POLL_SPAN`, overflows an `i32`.
    pub fn new(page_offset: i32) -> PollSites {
        assert!(
            page_offset.checked_add(POLL_SPAN as i32).is_some(),
            "the page's span from its base must fit in an i32 (page_offset {page_offset})"
        );
        PollSites {
            emitted: 0,
            page_offset,
            first_slot: 0,
            slots: DISTINCT_OFFSETS,
        }
    }

    /// An allocator whose polls use only the page's slots at total offsets
    /// (`page_offset + slot`) that `isa`'s 4-byte loads encode directly
    /// ([`DirectOffsets::for_isa`]), so that no poll needs its address or
    /// offset in a register. On x86_64 this is exactly [`PollSites::new`].
    ///
    /// # Panics
    ///
    /// As for [`PollSites::with_direct_offsets`].
    pub fn for_isa(page_offset: i32, isa: &dyn TargetIsa) -> PollSites {
        PollSites::with_direct_offsets(page_offset, DirectOffsets::for_isa(isa))
    }

    /// An allocator whose polls use only the page's slots whose total
    /// offset lies in `direct`, handed out nearest to the base first and
    /// wrapping (with fences) past the last of them.
    ///
    /// # Panics
    ///
    /// If `page_offset + POLL_SPAN` overflows an `i32`, if `page_offset` is
    /// not a multiple of 4 (a poll is an aligned load from an aligned base),
    /// or if no slot of the page lies in `direct`.
    pub fn with_direct_offsets(page_offset: i32, direct: DirectOffsets) -> PollSites {
        let mut sites = PollSites::new(page_offset);
        assert!(
            page_offset % SLOT_BYTES as i32 == 0,
            "the page must start at a multiple of 4 from its base (page_offset {page_offset})"
        );
        let in_range = |j: &u32| direct.contains(sites.slot_offset(*j));
        let first = (0..DISTINCT_OFFSETS).find(in_range);
        let last = (0..DISTINCT_OFFSETS).rev().find(in_range);
        let (Some(first), Some(last)) = (first, last) else {
            panic!(
                "no slot of a page at offset {page_offset} from its base is directly \
                 encodable (offsets {}..={})",
                direct.min, direct.max
            );
        };
        // The order is monotonic in the offset and `direct` is a range, so
        // the slots in range are consecutive in it.
        sites.first_slot = first;
        sites.slots = last - first + 1;
        sites
    }

    /// How many polls have been emitted with this allocator.
    pub fn emitted(&self) -> u32 {
        self.emitted
    }

    /// How many distinct offsets this allocator hands out before it wraps
    /// around and fences: [`DISTINCT_OFFSETS`], or fewer when limited to
    /// directly encodable offsets.
    pub fn distinct_offsets(&self) -> u32 {
        self.slots
    }

    /// The displacement from the base that poll number `site` of the
    /// function reads (whether or not it has been emitted yet).
    pub fn offset(&self, site: u32) -> i32 {
        self.slot_offset(self.first_slot + site % self.slots)
    }

    /// The total offset of slot `j` of the nearest-first order.
    fn slot_offset(&self, j: u32) -> i32 {
        debug_assert!(j < DISTINCT_OFFSETS);
        let page_below_base = self.page_offset + POLL_SPAN as i32 <= 0;
        let in_page = if page_below_base {
            POLL_SPAN - SLOT_BYTES * (j + 1)
        } else {
            j * SLOT_BYTES
        };
        debug_assert!(in_page + SLOT_BYTES <= POLL_SPAN);
        // Cannot overflow: `new` checked `page_offset + POLL_SPAN`.
        self.page_offset + in_page as i32
    }

    /// Allocates the next site.
    fn next_site(&mut self) -> Site {
        let k = self.emitted;
        self.emitted = k
            .checked_add(1)
            .expect("more than u32::MAX polls in one function");
        Site {
            offset: self.offset(k),
            fenced: k >= self.slots,
        }
    }
}

/// Emits one poll at the builder's current position: a load of an `i32`
/// from `base` plus the next displacement of `sites` (distinct per site,
/// inside the page, see [`PollSites`]) with trap code `trap_code`, whose
/// result is unused. Returns the load instruction. Past
/// [`PollSites::distinct_offsets`] polls in one function the load is
/// bracketed by `sequence_point`s (see the crate documentation).
///
/// `base` is an `I64` value that dominates the current position: a page
/// pointer (`PollSites::new(0)`), or a register the function keeps live
/// anyway, such as its `vmctx`, with the page at the constant distance
/// given to [`PollSites::new`]. The page must be aligned to 4 and at least
/// [`POLL_SPAN`] bytes long. `trap_code` is the code the signal handler
/// looks for in the trap records, normally a user code
/// (`TrapCode::unwrap_user(1..=250)`).
///
/// # Panics
///
/// If `base` is not an `I64` value, or if the builder has no current block
/// (as for any instruction emitted through [`FunctionBuilder::ins`]).
pub fn dead_load_with_context(
    builder: &mut FunctionBuilder<'_>,
    sites: &mut PollSites,
    base: ir::Value,
    trap_code: TrapCode,
) -> ir::Inst {
    let base_ty = builder.func.dfg.value_type(base);
    assert_eq!(
        base_ty,
        types::I64,
        "the base of the interrupt page must be an I64 value, not {base_ty}"
    );
    let site = sites.next_site();
    let flags = MemFlagsData::new()
        .with_aligned()
        .with_trap_code(Some(trap_code));
    debug_assert!(!flags.notrap() && !flags.readonly() && !flags.can_move());
    debug_assert!(flags.alias_region().is_none());
    if site.fenced {
        builder.ins().sequence_point();
    }
    let value = builder.ins().load(types::I32, flags, base, site.offset);
    if site.fenced {
        builder.ins().sequence_point();
    }
    builder
        .func
        .dfg
        .value_def(value)
        .inst()
        .expect("a load's result is defined by the load")
}

/// The two instructions of a poll through a slot
/// ([`dead_load_through_slot`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotPoll {
    /// The reload of the slot: `load.i64` of the page address.
    pub reload: ir::Inst,
    /// The poll itself: `load.i32` through the reloaded address, carrying
    /// the trap code.
    pub poll: ir::Inst,
}

/// Emits one poll through a slot at the builder's current position: a
/// `sequence_point`, a reload of the page address from
/// `slot_base + slot_offset`, and a load of an `i32` through that address
/// with trap code `trap_code`, whose result is unused (see "Polls through a
/// slot" in the crate documentation for why each reload survives).
///
/// `slot_base` is an `I64` value that dominates the current position, and
/// `slot_base + slot_offset` an 8-byte aligned, always-readable location
/// holding the address of a page at least 4 bytes long and aligned to 4.
/// Give `slot_offset` a value the target encodes in the load itself
/// (within [`DirectOffsets::for_isa`]), so that the reload needs no
/// register besides its result.
///
/// # Panics
///
/// If `slot_base` is not an `I64` value, if `slot_offset` is not a
/// multiple of 8, or if the builder has no current block.
pub fn dead_load_through_slot(
    builder: &mut FunctionBuilder<'_>,
    slot_base: ir::Value,
    slot_offset: i32,
    trap_code: TrapCode,
) -> SlotPoll {
    let base_ty = builder.func.dfg.value_type(slot_base);
    assert_eq!(
        base_ty,
        types::I64,
        "the base of the slot must be an I64 value, not {base_ty}"
    );
    assert!(
        slot_offset % 8 == 0,
        "the slot must be 8-byte aligned (offset {slot_offset})"
    );
    builder.ins().sequence_point();
    let reload_flags = MemFlagsData::new().with_notrap().with_aligned();
    debug_assert!(!reload_flags.readonly() && !reload_flags.can_move());
    let page = builder
        .ins()
        .load(types::I64, reload_flags, slot_base, slot_offset);
    let poll_flags = MemFlagsData::new()
        .with_aligned()
        .with_trap_code(Some(trap_code));
    let value = builder.ins().load(types::I32, poll_flags, page, 0);
    let inst_of = |v: ir::Value| {
        builder
            .func
            .dfg
            .value_def(v)
            .inst()
            .expect("a load's result is defined by the load")
    };
    SlotPoll {
        reload: inst_of(page),
        poll: inst_of(value),
    }
}
