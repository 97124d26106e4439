//! Memory mappings: anonymous ones, and private read-only views of files.

use anyhow::{Result, bail};
use std::io;
use std::ptr::{self, NonNull};
use std::sync::OnceLock;
use wasmtime_environ::MmuInterruptionMode;

/// The host's page size in bytes.
pub fn host_page_size() -> usize {
    static SIZE: OnceLock<usize> = OnceLock::new();
    *SIZE.get_or_init(|| {
        // SAFETY: `sysconf` has no memory-safety preconditions.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size)
            .ok()
            .filter(|s| *s > 0)
            .unwrap_or(4096)
    })
}

/// An owned anonymous mapping, unmapped on drop.
///
/// A zero-length `Mmap` owns nothing and has a dangling (but aligned)
/// pointer.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
    /// Whether dropping this value unmaps the range (false for a view of
    /// part of another mapping, see [`Mmap::view`]).
    owned: bool,
}

// SAFETY: an `Mmap` is just an owned address range; the bytes are accessed
// through raw pointers whose users synchronize as they need.
unsafe impl Send for Mmap {}
// SAFETY: `&Mmap` gives no access to the bytes by itself: the safe methods
// only read `ptr` and `len`, and whatever touches the bytes or changes
// their protection is `unsafe` and synchronizes as its user needs.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// An empty mapping.
    pub fn empty() -> Mmap {
        Mmap {
            ptr: NonNull::dangling(),
            len: 0,
            owned: false,
        }
    }

    /// Reserves `len` bytes of inaccessible address space (no memory is
    /// committed until parts are made accessible).
    pub fn reserve(len: usize) -> Result<Mmap> {
        Mmap::map(len, libc::PROT_NONE)
    }

    /// [`Mmap::reserve`] for linear memories: never backed by transparent
    /// huge pages (see [`refuse_huge_pages`]).
    pub fn reserve_for_memory(len: usize) -> Result<Mmap> {
        let mmap = Mmap::reserve(len)?;
        refuse_huge_pages(mmap.ptr.as_ptr(), mmap.len)?;
        Ok(mmap)
    }

    /// Maps `len` bytes of zeroed read-write memory.
    pub fn read_write(len: usize) -> Result<Mmap> {
        Mmap::map(len, libc::PROT_READ | libc::PROT_WRITE)
    }

    /// Maps all of `file` read-only and private: pages are shared with the
    /// page cache until written (after making them writable), and writes
    /// never reach the file. An empty file is an error.
    ///
    /// # Safety
    ///
    /// Nothing may truncate or write `file` while the mapping lives: a
    /// truncation turns reads of the lost pages into `SIGBUS`, and writes
    /// by others may show through pages this process has not written.
    pub unsafe fn map_file_private(file: &std::fs::File) -> Result<Mmap> {
        let len = file.metadata()?.len();
        // SAFETY: the range is the whole file, and our caller promises that
        // nothing writes or truncates it while the mapping lives, which is
        // all the range mapping needs.
        unsafe { Mmap::map_file_range_private(file, 0..len) }
    }

    /// Maps the bytes `range` of `file` as [`Mmap::map_file_private`] maps
    /// a whole file (a precompiled component keeps each of its modules at
    /// a page-aligned offset, and each gets a mapping of its own). The
    /// range must start on a host page boundary and lie in the file; an
    /// empty range is an error.
    ///
    /// # Safety
    ///
    /// Nothing may truncate or write `file` while the mapping lives: a
    /// truncation turns reads of the lost pages into `SIGBUS`, and writes by
    /// others may show through pages this process has not written.
    pub unsafe fn map_file_range_private(
        file: &std::fs::File,
        range: std::ops::Range<u64>,
    ) -> Result<Mmap> {
        use std::os::fd::AsRawFd;
        let file_len = file.metadata()?.len();
        if range.start >= range.end {
            bail!("cannot map an empty file (or an empty part of one)");
        }
        if range.end > file_len || !range.start.is_multiple_of(host_page_size() as u64) {
            bail!(
                "cannot map bytes {range:?} of a {file_len}-byte file: the range must lie in \
                 the file and start on a page boundary"
            );
        }
        let len = usize::try_from(range.end - range.start)?;
        let offset = libc::off_t::try_from(range.start)?;
        // SAFETY: a private mapping at a kernel-chosen address aliases no
        // existing memory; what can happen to the file meanwhile is the
        // caller's promise above.
        let ptr = unsafe {
            raw_mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_PRIVATE,
                (file.as_raw_fd(), offset),
                "failed to map the file",
            )?
        };
        Ok(Mmap::owned(ptr, len))
    }

    fn map(len: usize, prot: libc::c_int) -> Result<Mmap> {
        Mmap::map_with(len, prot, 0)
    }

    /// A fresh read-write mapping of `len` bytes whose pages are all
    /// allocated (zeroed) by the `mmap` call itself, for memory that is
    /// written in full at once: one call instead of a page fault per page
    /// (about 2 µs each on a virtual machine; loading a module copies its
    /// code into such a mapping).
    pub fn read_write_populated(len: usize) -> Result<Mmap> {
        Mmap::map_with(len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_POPULATE)
    }

    fn map_with(len: usize, prot: libc::c_int, extra_flags: libc::c_int) -> Result<Mmap> {
        if len == 0 {
            return Ok(Mmap::empty());
        }
        // SAFETY: an anonymous private mapping at a kernel-chosen address
        // cannot alias anything else.
        let ptr = unsafe {
            raw_mmap(
                ptr::null_mut(),
                len,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | extra_flags,
                (-1, 0),
                "failed to reserve address space",
            )?
        };
        Ok(Mmap::owned(ptr, len))
    }

    fn owned(ptr: NonNull<u8>, len: usize) -> Mmap {
        Mmap {
            ptr,
            len,
            owned: true,
        }
    }

    /// Fails unless `[offset, offset + len)` lies inside the mapping.
    fn check_range(&self, offset: usize, len: usize, what: &str) -> Result<()> {
        if offset.checked_add(len).is_some_and(|end| end <= self.len) {
            return Ok(());
        }
        bail!("{what} outside of the mapping")
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The length in bytes.
    #[cfg_attr(not(test), allow(dead_code, reason = "used by tests"))]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Changes the protection of `[offset, offset + len)`.
    ///
    /// # Safety
    ///
    /// Removing access from bytes that something still uses is undefined
    /// behavior for that user; making code executable is only sound once it
    /// is fully written.
    pub unsafe fn protect(&self, offset: usize, len: usize, prot: libc::c_int) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.check_range(offset, len, "protection change")?;
        // SAFETY: the range is inside this mapping (checked above); the
        // caller guarantees (this function's `# Safety`) that nothing relies
        // on access the change removes, and that code made executable is
        // complete.
        let rc = unsafe { libc::mprotect(self.ptr.as_ptr().add(offset).cast(), len, prot) };
        if rc != 0 {
            bail!(
                "failed to change memory protection: {}",
                io::Error::last_os_error()
            );
        }
        Ok(())
    }

    /// Makes `[offset, offset + len)` an MMU poll page for `mode`.
    ///
    /// In mprotect mode the page is read-only, and marked `MADV_WIPEONFORK`
    /// so that its kernel area (VMA) carries a flag its neighbours lack.
    /// The kernel merges adjacent areas only when their flags and
    /// protections agree, so protecting and unprotecting the page (arming a
    /// store) changes one area's protection instead of merging it into the
    /// `PROT_NONE` guard region below and splitting it out again, which
    /// made every interrupt about 0.4 µs slower. (A shared zero mapping has
    /// the same effect but costs a shared-memory object per page;
    /// docs/mmu-interruption.md.) A forked child gets the page zeroed,
    /// which is what it holds anyway.
    ///
    /// In pointer-swap mode the page is readable and writable (its slot is
    /// written on every arm and disarm) and its protection never changes
    /// again, so there is nothing to keep from merging; a forked child
    /// keeps the slot's value like any other memory.
    ///
    /// # Safety
    ///
    /// In mprotect mode nothing may rely on writing the range, which
    /// becomes read-only. In either mode nothing may rely on access that
    /// the new protection removes.
    pub unsafe fn make_poll_page(
        &self,
        offset: usize,
        len: usize,
        mode: MmuInterruptionMode,
    ) -> Result<()> {
        if mode == MmuInterruptionMode::PointerSwap {
            // SAFETY: `make_accessible` only requires that nothing rely on
            // the range being executable, which this function's `# Safety`
            // covers (no one relies on access the change removes); it
            // checks the bounds itself.
            return unsafe { self.make_accessible(offset, len) };
        }
        // SAFETY: read-only removes write (and any execute) access, and
        // this function's `# Safety` says nothing relies on either in this
        // mode; it makes nothing executable, and `protect` checks the bounds.
        unsafe { self.protect(offset, len, libc::PROT_READ)? };
        // SAFETY: the range is inside this private anonymous mapping
        // (checked by `protect` above); the advice only changes what a fork
        // copies.
        let rc = unsafe {
            libc::madvise(
                self.ptr.as_ptr().add(offset).cast(),
                len,
                libc::MADV_WIPEONFORK,
            )
        };
        if rc != 0 {
            bail!(
                "failed to mark an MMU poll page: {}",
                io::Error::last_os_error()
            );
        }
        Ok(())
    }

    /// Makes `[offset, offset + len)` readable and writable.
    ///
    /// # Safety
    ///
    /// Nothing may rely on the range being executable (this removes
    /// execute access).
    pub unsafe fn make_accessible(&self, offset: usize, len: usize) -> Result<()> {
        // SAFETY: read-write removes only execute access, on which this
        // function's `# Safety` says nothing relies, and makes nothing
        // executable; `protect` checks the bounds.
        unsafe { self.protect(offset, len, libc::PROT_READ | libc::PROT_WRITE) }
    }

    /// Makes `[offset, offset + len)` readable and executable (and no longer
    /// writable).
    ///
    /// # Safety
    ///
    /// Nothing may still write the range, and the code in it must be fully
    /// written: it may run as soon as this returns.
    pub unsafe fn make_executable(&self, offset: usize, len: usize) -> Result<()> {
        // SAFETY: this function's `# Safety` says nothing writes the range
        // any more and its code is complete, which is all that removing write
        // access and adding execute access need; `protect` checks the bounds.
        unsafe { self.protect(offset, len, libc::PROT_READ | libc::PROT_EXEC) }
    }
}

impl Mmap {
    /// Maps `fd` (from its start, `len` bytes) shared and read-only at a
    /// kernel-chosen address: a view of the file's bytes that follows the
    /// file and can never be written through.
    pub fn view_file(fd: &std::os::fd::OwnedFd, len: usize) -> Result<Mmap> {
        use std::os::fd::AsRawFd;
        if len == 0 {
            return Ok(Mmap::empty());
        }
        // SAFETY: a new mapping at a kernel-chosen address aliases no
        // existing memory; `PROT_READ` means nothing here can write the
        // file through it.
        let ptr = unsafe {
            raw_mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                (fd.as_raw_fd(), 0),
                "failed to map a file view",
            )?
        };
        Ok(Mmap::owned(ptr, len))
    }

    /// Replaces `[offset, offset + len)` of this mapping with the first
    /// `len` bytes of `fd`, private and read-write: reads see the file's
    /// pages (shared with every other such mapping) until a write copies
    /// the written page.
    ///
    /// # Safety
    ///
    /// The range's old contents are discarded: nothing may still use them.
    /// The file must hold at least `len` bytes and never shrink (a sealed
    /// memfd), or reads past its end raise `SIGBUS`.
    pub unsafe fn map_file_at(
        &self,
        offset: usize,
        len: usize,
        fd: &std::os::fd::OwnedFd,
    ) -> Result<()> {
        use std::os::fd::AsRawFd;
        if len == 0 {
            return Ok(());
        }
        self.check_range(offset, len, "file mapping")?;
        // SAFETY: `MAP_FIXED` replaces pages of our own reservation only
        // (bounds checked above), whose contents the caller gave up.
        unsafe {
            raw_mmap(
                self.ptr.as_ptr().add(offset),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_FIXED,
                (fd.as_raw_fd(), 0),
                "failed to map a memory image",
            )?
        };
        Ok(())
    }

    /// Throws away the private contents of `[offset, offset + len)`: later
    /// reads see the backing file's bytes again (for a private file
    /// mapping) or zeros (anonymous memory). Protection is unchanged.
    ///
    /// # Safety
    ///
    /// Nothing may rely on the range's current contents.
    pub unsafe fn decommit(&self, offset: usize, len: usize) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.check_range(offset, len, "decommit")?;
        // SAFETY: the range is inside this private mapping (checked
        // above); the caller gave up its contents.
        let rc = unsafe {
            libc::madvise(
                self.ptr.as_ptr().add(offset).cast(),
                len,
                libc::MADV_DONTNEED,
            )
        };
        if rc != 0 {
            bail!("failed to decommit memory: {}", io::Error::last_os_error());
        }
        Ok(())
    }
}

impl Mmap {
    /// A non-owning handle on `[ptr, ptr + len)`, part of a mapping that
    /// someone else owns (a pool slot): the same operations, but dropping
    /// it unmaps nothing.
    ///
    /// # Safety
    ///
    /// The range must be mapped, page-aligned, and outlive the returned
    /// value; whoever holds the view is the only user of the range.
    pub unsafe fn view(ptr: *mut u8, len: usize) -> Mmap {
        Mmap {
            ptr: NonNull::new(ptr).unwrap_or(NonNull::dangling()),
            len,
            owned: false,
        }
    }

    /// Replaces the whole range with fresh inaccessible address space, as
    /// [`Mmap::reserve_for_memory`] would give: every page, file mapping and
    /// userfaultfd registration in it is dropped.
    ///
    /// # Safety
    ///
    /// Nothing may use the range's contents any more.
    pub unsafe fn replace_with_reservation(&self) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        // SAFETY: `MAP_FIXED` over exactly this range, which we own (or
        // view exclusively) and whose contents the caller gave up.
        unsafe {
            raw_mmap(
                self.ptr.as_ptr(),
                self.len,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_FIXED,
                (-1, 0),
                "failed to reset a memory reservation",
            )?
        };
        // A new mapping: the old one's flags went with it.
        refuse_huge_pages(self.ptr.as_ptr(), self.len)
    }
}

/// Marks `[addr, addr + len)` `MADV_NOHUGEPAGE`, so that the kernel backs
/// it with base pages only, whatever the host's transparent-huge-page
/// setting.
///
/// A linear memory is made accessible and written piecemeal, and its
/// written pages are found and released page by page (instance reset,
/// pooled slot reuse); many guests share a host, so what a guest touches
/// should be what it costs. On a host whose THP setting is `always`, the
/// first write into an aligned 2 MiB stretch of an accessible area would
/// allocate and zero 2 MiB; every later scan would report all 512 pages of
/// it as written, a reset would compare or copy all of them, and releasing
/// one page would split it. The price is more TLB misses for guests that
/// sweep large memories on such hosts. Where THP is `madvise` (as on this
/// project's machines) only the call itself is added, about 0.8 µs per
/// reservation, so the call is skipped where no setting would give this
/// mapping huge pages unasked ([`huge_pages_unasked`]). Kernels built
/// without THP refuse the advice with `EINVAL`, which then means there is
/// nothing to refuse; any other failure is an error.
fn refuse_huge_pages(addr: *mut u8, len: usize) -> Result<()> {
    if len == 0 || !huge_pages_unasked() {
        return Ok(());
    }
    // SAFETY: advice on a range this process mapped; `MADV_NOHUGEPAGE`
    // only sets a flag on the mapping and changes no page's contents.
    let rc = unsafe { libc::madvise(addr.cast(), len, libc::MADV_NOHUGEPAGE) };
    if rc != 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINVAL) {
            bail!("failed to turn off transparent huge pages for a reservation: {err}");
        }
    }
    Ok(())
}

/// Whether the kernel may back an anonymous mapping that was never advised
/// `MADV_HUGEPAGE` with pages larger than the base page: the global THP
/// setting is `always`, or any per-size setting (multi-size THP, Linux 6.8
/// and later) is `always`. Read once per process; where the settings
/// cannot be read (no sysfs in a container, say) the answer is yes, so the
/// advice is given as before.
///
/// An administrator who switches THP to `always` while the process runs
/// is not seen until it restarts; what that costs is speed, not
/// correctness: a huge page is reported and restored as the 4 KiB pages it
/// covers.
fn huge_pages_unasked() -> bool {
    static UNASKED: OnceLock<bool> = OnceLock::new();
    *UNASKED.get_or_init(|| {
        const THP: &str = "/sys/kernel/mm/transparent_hugepage";
        let always = |path: &std::path::Path| match std::fs::read_to_string(path) {
            // The selected value is the bracketed one: "always [madvise] never".
            Ok(text) => Some(text.contains("[always]")),
            Err(_) => None,
        };
        let Some(global) = always(std::path::Path::new(&format!("{THP}/enabled"))) else {
            return true;
        };
        if global {
            return true;
        }
        // Per-size settings; "inherit" follows the global one, not `always`
        // here. A size without an `enabled` file is for shared memory only.
        let Ok(sizes) = std::fs::read_dir(THP) else {
            return true;
        };
        sizes.flatten().any(|entry| {
            let enabled = entry.path().join("enabled");
            entry
                .file_name()
                .to_string_lossy()
                .starts_with("hugepages-")
                && enabled.exists()
                && always(&enabled).unwrap_or(true)
        })
    })
}

/// One `mmap(2)` call: the mapping's start, or an error saying `what`
/// failed and why.
///
/// # Safety
///
/// With `MAP_FIXED`, `[addr, addr + len)` must be the caller's to replace,
/// and nothing may use its old contents. Without it, `addr` is only a hint.
unsafe fn raw_mmap(
    addr: *mut u8,
    len: usize,
    prot: libc::c_int,
    flags: libc::c_int,
    (fd, offset): (std::os::fd::RawFd, libc::off_t),
    what: &str,
) -> Result<NonNull<u8>> {
    // SAFETY: without `MAP_FIXED` the kernel picks free address space, so
    // the new mapping replaces nothing; with it, this function's `# Safety`
    // makes the replaced range the caller's, with its old contents unused.
    let ptr = unsafe { libc::mmap(addr.cast(), len, prot, flags, fd, offset) };
    if ptr == libc::MAP_FAILED {
        bail!("{what} ({len:#x} bytes): {}", io::Error::last_os_error());
    }
    NonNull::new(ptr.cast()).ok_or_else(|| anyhow::anyhow!("{what}: mmap returned null"))
}

impl Drop for Mmap {
    fn drop(&mut self) {
        if self.len == 0 || !self.owned {
            return;
        }
        // SAFETY: this mapping is owned and unmapped exactly once.
        let rc = unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
        debug_assert_eq!(rc, 0, "munmap failed: {}", io::Error::last_os_error());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_then_commit() {
        let page = host_page_size();
        let m = Mmap::reserve(4 * page).unwrap();
        // SAFETY: nothing uses the mapping yet.
        unsafe { m.make_accessible(page, page).unwrap() };
        // SAFETY: the second page is read-write now.
        unsafe {
            *m.as_ptr().add(page) = 7;
            assert_eq!(*m.as_ptr().add(page + page - 1), 0);
        }
        // SAFETY: out of range requests are rejected, not performed.
        assert!(unsafe { m.make_accessible(3 * page, 2 * page) }.is_err());
    }

    #[test]
    fn empty_mapping() {
        let m = Mmap::reserve(0).unwrap();
        assert_eq!(m.len(), 0);
    }
}
