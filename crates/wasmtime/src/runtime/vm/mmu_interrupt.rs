//! The per-store state of MMU interruption: the interrupt page that
//! compiled code polls, and the call generation that ties an interrupt to
//! the call it was meant for.
//!
//! # Arming and the call it hits
//!
//! The store and every `MmuInterrupter` share one [`MmuInterruptState`]
//! through an `Arc`, so the page stays mapped for as long as anyone can
//! still arm it: an interrupter that outlives its store arms a page nobody
//! polls, which is harmless.
//!
//! `generation` is odd exactly while a call of the store is in progress (it
//! is bumped when the outermost Wasm call of the store begins and again
//! when it ends). To interrupt, a thread reads the generation; if it is
//! even no call runs and the request is dropped; otherwise it raises
//! `requested` to that generation (`fetch_max`, so a slow interrupter that
//! read an older generation can never overwrite a newer request) and only
//! then protects the page. The poll path unprotects the page *first* and
//! then takes `requested`: a request that lands between the two has
//! already re-protected the page, so the next poll faults again and sees
//! it. It acts only if the request names the current generation; a request
//! left over from an earlier call (read before that call ended, armed
//! after the next one began) is recognized as stale and costs one
//! spurious fault.

use super::sys::unix::mmap::{Mmap, host_page_size};
use anyhow::{Context, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The state a store shares with its interrupters.
#[derive(Debug)]
pub struct MmuInterruptState {
    /// One host page, readable while disarmed and `PROT_NONE` while armed.
    page: Mmap,
    /// Odd while a call of the store is in progress.
    generation: AtomicU64,
    /// The newest generation an interrupter asked to interrupt (0: none).
    requested: AtomicU64,
    /// Whether the store's Wasm is executing on some thread now: a call is
    /// in progress and not suspended at a yield.
    running: AtomicBool,
}

impl MmuInterruptState {
    /// Maps a fresh, readable interrupt page.
    ///
    /// # Errors
    ///
    /// Fails if the page cannot be mapped.
    pub fn new() -> Result<MmuInterruptState> {
        let len = host_page_size();
        let page = Mmap::reserve(len).context("failed to map the MMU interrupt page")?;
        // SAFETY: the mapping is fresh and nothing reads it yet.
        unsafe { page.protect(0, len, libc::PROT_READ) }
            .context("failed to make the MMU interrupt page readable")?;
        Ok(MmuInterruptState {
            page,
            generation: AtomicU64::new(0),
            requested: AtomicU64::new(0),
            running: AtomicBool::new(false),
        })
    }

    /// The page's address, which compiled code polls.
    pub fn page(&self) -> *const u8 {
        self.page.as_ptr()
    }

    /// The page's length in bytes (one host page).
    pub fn page_len(&self) -> usize {
        self.page.len()
    }

    /// Asks the call in progress to stop at its next poll. Does nothing
    /// when no call is in progress. Callable from any thread.
    ///
    /// Returns whether a call was in progress when the request was made.
    pub fn interrupt(&self) -> bool {
        let generation = self.generation.load(Ordering::SeqCst);
        if generation.is_multiple_of(2) {
            return false;
        }
        self.requested.fetch_max(generation, Ordering::SeqCst);
        self.set_armed(true);
        true
    }

    /// Called by the poll path after a poll faulted: disarms the page and
    /// says whether an interrupt for the call in progress was requested
    /// (consuming the request).
    pub fn take_request(&self) -> bool {
        self.set_armed(false);
        // Polls run only inside a call, whose generation is odd, so an
        // empty request (0) never matches.
        let requested = self.requested.swap(0, Ordering::SeqCst);
        requested == self.generation.load(Ordering::SeqCst)
    }

    /// Marks the start (`true`) or the end (`false`) of the store's
    /// outermost call.
    pub fn set_call_in_progress(&self, in_progress: bool) {
        let odd = self.generation.fetch_add(1, Ordering::SeqCst) % 2 == 1;
        debug_assert_eq!(odd, !in_progress, "calls begin and end in pairs");
        self.running.store(in_progress, Ordering::SeqCst);
    }

    /// Marks that the store's call is (`true`) or is not (`false`) executing
    /// on a thread right now, around fiber switches.
    pub fn set_running(&self, running: bool) {
        self.running.store(running, Ordering::SeqCst);
    }

    /// Whether the store's Wasm is executing on some thread right now.
    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::SeqCst)
    }

    fn set_armed(&self, armed: bool) {
        let prot = if armed {
            libc::PROT_NONE
        } else {
            libc::PROT_READ
        };
        // SAFETY: the page belongs to this state and holds no data: the
        // only accesses to it are polls, whose faults while armed are the
        // point. `mprotect` on a mapping we own cannot fail except for
        // resource exhaustion splitting VMAs, which a single-page mapping
        // never needs.
        if let Err(e) = unsafe { self.page.protect(0, self.page.len(), prot) } {
            // A poll that cannot be disarmed would fault forever and an
            // interrupt that cannot be armed would be lost silently:
            // neither may be ignored. Unwinding is no option either (the
            // poll path runs below Wasm frames, which cannot be unwound).
            eprintln!("wasmtime: cannot change the MMU interrupt page's protection: {e:#}");
            std::process::abort();
        }
    }
}
