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
//!   deleted. So [`PollSites`] hands out each of the page's slots (in-page
//!   offsets `0, 4, …, 4092`) once, nearest to the base first: two polls
//!   never share a key, whatever the control flow. A distinct offset costs
//!   nothing; the page is ours and every slot of it is readable.
//!
//! ## Past [`DISTINCT_OFFSETS`] polls in one function
//!
//! The page has [`DISTINCT_OFFSETS`] aligned `i32` slots. From the
//! `DISTINCT_OFFSETS + 1`-th poll of a function on, offsets wrap around
//! (site `k` reads slot `k % DISTINCT_OFFSETS`), and each such poll is
//! *bracketed* by two `sequence_point` instructions, emitted back to back:
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
//! matters in functions with more than a thousand polls.
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
//! * x86_64: `mov r32, dword ptr [base + disp]` whatever the offset (no
//!   or an 8-bit displacement for total offsets in -128..=127, a 32-bit
//!   one beyond).
//! * aarch64: `ldr wN, [xM, #imm]` when `page_offset` is 0. The unsigned
//!   immediate form is 12 bits scaled by the access size, so a 4-byte load
//!   reaches offsets up to 16380 directly; every poll offset is below
//!   [`POLL_SPAN`] and a multiple of 4, so the address is never
//!   materialized and no scratch register (x16/x17) is live at a poll. A
//!   negative `page_offset` beyond -256 does not fit `ldur`'s 9-bit signed
//!   immediate, and Cranelift computes the address into a register first
//!   (one more instruction per poll); the aarch64 golden files therefore
//!   use a page pointer.
//!
//! The destination is whatever register the allocator finds free; its
//! value is dead. The handler resumes at the same instruction, so nothing
//! about the poll's registers has to be restored.
//!
//! A poll is not a call: it clobbers no caller-saved registers and needs no
//! stack space, so a leaf function stays a leaf (the `leaf` golden files
//! show no call).
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
use cranelift_frontend::FunctionBuilder;

/// Bytes of the page a poll may read from: every offset handed out is below
/// this.
pub const POLL_SPAN: u32 = 4096;

/// How many distinct in-page offsets exist (one aligned `i32` slot each):
/// `POLL_SPAN / 4`. Polls beyond this many in one function reuse offsets
/// and are fenced (see the crate documentation).
pub const DISTINCT_OFFSETS: u32 = POLL_SPAN / SLOT_BYTES;

/// Bytes read by one poll (an `i32`).
const SLOT_BYTES: u32 = 4;

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
#[derive(Debug, Default)]
pub struct PollSites {
    /// Polls emitted so far; the next poll is site number `emitted`.
    emitted: u32,
    /// Where the page starts relative to the base value.
    page_offset: i32,
}

/// Where one poll reads and whether it needs fences.
struct Site {
    offset: i32,
    fenced: bool,
}

impl PollSites {
    /// An allocator for a function with no polls yet, whose polls read a
    /// page that starts at `base + page_offset` (0 when the base is the
    /// page's address itself).
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
        }
    }

    /// How many polls have been emitted with this allocator.
    pub fn emitted(&self) -> u32 {
        self.emitted
    }

    /// Allocates the next site.
    fn next_site(&mut self) -> Site {
        let k = self.emitted;
        self.emitted = k
            .checked_add(1)
            .expect("more than u32::MAX polls in one function");
        let slot = k % DISTINCT_OFFSETS;
        let page_below_base = self.page_offset + POLL_SPAN as i32 <= 0;
        let in_page = if page_below_base {
            POLL_SPAN - SLOT_BYTES * (slot + 1)
        } else {
            slot * SLOT_BYTES
        };
        debug_assert!(in_page + SLOT_BYTES <= POLL_SPAN);
        Site {
            // Cannot overflow: `new` checked `page_offset + POLL_SPAN`.
            offset: self.page_offset + in_page as i32,
            fenced: k >= DISTINCT_OFFSETS,
        }
    }
}

/// Emits one poll at the builder's current position: a load of an `i32`
/// from `base` plus the next displacement of `sites` (distinct per site,
/// inside the page, see [`PollSites`]) with trap code `trap_code`, whose
/// result is unused. Returns the load instruction. Past
/// [`DISTINCT_OFFSETS`] polls in one function the load is bracketed by
/// `sequence_point`s (see the crate documentation).
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
