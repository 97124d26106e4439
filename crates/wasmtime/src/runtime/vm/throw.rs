//! Wasm exceptions at run time: the store's exception slots, and the
//! search for a handler when Wasm (or a host function) throws.
//!
//! How compiled code cooperates is in the translator's `exceptions.rs`: a
//! call inside a `try_table` is a `try_call` whose handlers the module's
//! [`ExceptionTable`](wasmtime_environ::ExceptionTable) lists by return
//! address. [`throw`] walks the frame-pointer chain of the innermost
//! activation from the throwing frame towards the entry, and resumes at the
//! first handler whose tag matches, with the handler frame's stack and frame
//! pointers and the exception's handle in the first payload register. Every
//! frame it passes over is compiled code (Wasm functions, a wasm-to-host
//! trampoline) or a builtin that holds nothing to drop when it calls
//! [`throw`]; a `try_call` clobbers every register, so the handler needs no
//! other state back. With no handler in the activation, the exception
//! becomes the store's pending exception and the activation ends as a
//! failed host call does, with a [`ThrownException`](crate::ThrownException)
//! error.

use super::arch;
use super::traphandlers::{Activation, innermost_activation, unwind_to_entry};
use wasmtime_environ::CATCH_ALL_TAG;
use wasmtime_environ::vm::{VMTagDefinition, ValRaw};

/// One thrown exception.
#[derive(Debug)]
pub struct Exception {
    /// The tag's identity (its definition's address).
    pub tag: *const VMTagDefinition,
    /// The payload, one slot per parameter of the tag's type.
    pub payload: Box<[ValRaw]>,
    /// Whether a handle to it may exist outside the runtime: it was thrown
    /// again by `throw_ref` (so Wasm held it), or the host saw it. An
    /// exception that never escaped is released when a `catch` without
    /// `_ref` takes it, since nothing can name it afterwards.
    pub escaped: bool,
}

/// The exceptions of one store, by handle (index plus one; 0 is null).
///
/// There is no collector: an escaped exception stays until the store is
/// dropped. One that is caught by a clause without `_ref`, having never
/// escaped, gives its slot back.
#[derive(Debug, Default)]
pub struct ExceptionSlots {
    slots: Vec<Option<Exception>>,
    free: Vec<u32>,
}

impl ExceptionSlots {
    /// Stores `exception` and returns its handle.
    pub fn insert(&mut self, exception: Exception) -> anyhow::Result<u32> {
        if let Some(handle) = self.free.pop() {
            self.slots[handle as usize - 1] = Some(exception);
            return Ok(handle);
        }
        let handle = u32::try_from(self.slots.len() + 1)
            .ok()
            .filter(|h| *h != u32::MAX)
            .ok_or_else(|| anyhow::anyhow!("too many live exceptions in one store"))?;
        self.slots.push(Some(exception));
        Ok(handle)
    }

    /// The exception with `handle`, if it is live.
    pub fn get(&self, handle: usize) -> Option<&Exception> {
        self.slots.get(handle.checked_sub(1)?)?.as_ref()
    }

    /// As [`ExceptionSlots::get`], mutably.
    pub fn get_mut(&mut self, handle: usize) -> Option<&mut Exception> {
        self.slots.get_mut(handle.checked_sub(1)?)?.as_mut()
    }

    /// Gives back `handle`'s slot unless the exception escaped.
    pub fn release(&mut self, handle: usize) {
        if let Some(slot) = handle.checked_sub(1).and_then(|i| self.slots.get_mut(i))
            && slot.as_ref().is_some_and(|e| !e.escaped)
        {
            *slot = None;
            self.free.push(handle as u32);
        }
    }
}

/// Throws the exception `handle` of tag `tag` from the Wasm frame whose
/// frame pointer is `fp`, at `pc` (the return address of the call that
/// threw, or any PC of a frame without handlers, such as a wasm-to-host
/// trampoline's): resumes at the innermost matching handler of the
/// innermost activation, or ends that activation with the exception
/// pending in the store.
///
/// # Safety
///
/// Called on the thread and stack of the innermost activation, whose store
/// owns the exception, with `(pc, fp)` a frame of that activation (or
/// zero), from a frame that has nothing left to drop: the frames between
/// here and the handler are abandoned.
pub unsafe fn throw(handle: usize, tag: *const VMTagDefinition, pc: usize, fp: usize) -> ! {
    let activation = innermost_activation();
    // SAFETY: we run on the innermost activation's thread and stack (this
    // function's `# Safety`), so `activation` is a live local of a
    // `call_wasm` frame above us, and its frames from `(pc, fp)` up to the
    // catch frame are intact below that. A found handler is a `try_call`
    // of one of those frames, and the frames in between, ours included,
    // have nothing to drop (also `# Safety`), so resuming there, or jumping
    // back to the entry with `unwind_to_entry` (same requirements), is sound.
    unsafe {
        if let Some(handler) = find_handler(&*activation, tag, pc, fp) {
            arch::resume_to_exception_handler(handler.pc, handler.sp, handler.fp, handle)
        }
        unwind_to_entry(activation, handle, pc, fp)
    }
}

/// Where a handler resumes.
struct Handler {
    pc: usize,
    sp: usize,
    fp: usize,
}

/// The innermost handler for `tag` in `activation`, walking from `(pc,
/// fp)`.
///
/// # Safety
///
/// `activation` must be the live innermost activation of this thread, and
/// `(pc, fp)` one of its frames on this stack (or zero), whose chain of
/// frame records leads to the activation's catch frame.
unsafe fn find_handler(
    activation: &Activation,
    tag: *const VMTagDefinition,
    mut pc: usize,
    mut fp: usize,
) -> Option<Handler> {
    let stop = activation.catch_fp();
    // SAFETY: `activation` is live (this function's `# Safety`), and the
    // snapshot is used only inside this call, which `activation`'s borrow
    // outlasts.
    let snapshot = unsafe { activation.code_snapshot() };
    while fp != 0 && fp < stop {
        if let Some((text_start, site, handlers)) = snapshot.exception_site(pc) {
            let sp = fp - site.frame_offset as usize;
            // SAFETY: the site is a call of this frame, whose frame keeps
            // its `vmctx` at this offset above the stack pointer during the
            // call (Cranelift's record of the exception context), and the
            // call has not returned.
            let vmctx = unsafe { *((sp + site.context_offset as usize) as *const usize) };
            for handler in handlers {
                let matches = handler.tag == CATCH_ALL_TAG || {
                    // SAFETY: the module's loader checked that every tag of
                    // its exception table is a tag slot of its `VMContext`
                    // layout, and `vmctx` is an instance of that module.
                    let slot = unsafe { *((vmctx + handler.tag as usize) as *const usize) };
                    slot == tag as usize
                };
                if matches {
                    return Some(Handler {
                        pc: text_start + handler.target_offset as usize,
                        sp,
                        fp,
                    });
                }
            }
        }
        // SAFETY: the first `fp` is a live frame of the activation (this
        // function's `# Safety`); each later one was read from the previous
        // frame record and checked to lie above it and below the catch
        // frame, so it is the next live record on this stack.
        let (next_fp, next_pc) = unsafe { arch::next_frame(fp) };
        if next_fp <= fp {
            break;
        }
        fp = next_fp;
        pc = next_pc;
    }
    None
}
