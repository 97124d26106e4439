//! Which pages of a linear memory hold data that a reset must undo, read
//! from the kernel's page tables instead of from the memory itself.
//!
//! Two sources, both through the `PAGEMAP_SCAN` ioctl on
//! `/proc/self/pagemap` (Linux 6.7+):
//!
//! * **Write protection** (userfaultfd in `WP_ASYNC` mode): a range
//!   registered with the process's userfaultfd and then write-protected
//!   ("armed") records the first write to each page in the page table; the
//!   kernel resolves that fault itself, so no thread ever blocks on the
//!   userfaultfd and it never needs to be read. Re-protecting after a reset
//!   starts a fresh record, so a page restored by `memcpy` is not reported
//!   again next time ([`PageTracker::written_since_protect`]). Only pages
//!   that hold data need arming: a never-touched page is reported only
//!   once a write gives it data.
//! * **Anonymous pages**, without userfaultfd: a page that is neither the
//!   file's page (`FILE`) nor the shared zero page (`PFNZERO`) but present
//!   or swapped was written at some point since it was mapped
//!   ([`PageTracker::anonymous_pages`]). It cannot tell a restored page from
//!   a dirty one, so it over-reports after a `memcpy` restore until the page
//!   is given back with `MADV_DONTNEED`.
//!
//! The kernel behaviour this relies on was measured on the build machine
//! and is written up in the project's reference notes on dirty-page
//! tracking; the points that shaped the code are repeated where they
//! matter.

use super::mmap::host_page_size;
use anyhow::{Context, Result, bail};
use std::io;
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

// ---------------------------------------------------------------------------
// Kernel ABI. Neither the installed kernel headers (6.1) nor `libc` 0.2.191
// have `PAGEMAP_SCAN` or the userfaultfd definitions, so they are spelled
// out here from the kernel's uapi headers (`linux/fs.h`,
// `linux/userfaultfd.h`).
// ---------------------------------------------------------------------------

/// Page categories of `PAGEMAP_SCAN` (`PAGE_IS_*`). Only the ones the
/// filters below use.
///
/// `WRITTEN` means "not userfaultfd-write-protected": outside an armed
/// range every page has it, untouched ones included.
const PAGE_IS_WRITTEN: u64 = 1 << 1;
/// The page is the page-cache page of a file mapping. A written page of a
/// `MAP_PRIVATE` file mapping is a private copy and loses this category.
const PAGE_IS_FILE: u64 = 1 << 2;
const PAGE_IS_PRESENT: u64 = 1 << 3;
/// In swap, or (on armed memory) a userfaultfd-wp marker in an
/// unpopulated page-table entry.
const PAGE_IS_SWAPPED: u64 = 1 << 4;
/// The shared zero page (a read of a never-written anonymous page).
const PAGE_IS_PFNZERO: u64 = 1 << 5;

/// Write-protect the matching pages.
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
/// Fail with `EPERM` on any area not registered for async write protection
/// (instead of treating its pages as written or skipping it).
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;

/// `struct pm_scan_arg` (`linux/fs.h`). A page matches when
/// `((categories ^ category_inverted) & category_mask) == category_mask`
/// and, if `category_anyof_mask` is non-zero,
/// `(categories ^ category_inverted) & category_anyof_mask != 0`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types, reason = "the kernel's name")]
struct pm_scan_arg {
    /// `size_of::<pm_scan_arg>()`; anything else is `EINVAL`.
    size: u64,
    flags: u64,
    /// Page-aligned, or `EINVAL`.
    start: u64,
    end: u64,
    /// Out: where the walk stopped (the first match not reported when the
    /// region buffer filled up).
    walk_end: u64,
    /// Address of `vec_len` `page_region`s (0 with `vec_len == 0`).
    vec: u64,
    vec_len: u64,
    /// 0: no limit.
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    /// Categories reported in `page_region::categories`; 0 merges every
    /// run of adjacent matches into one region.
    return_mask: u64,
}

/// `struct page_region` (`linux/fs.h`): one run of matching pages.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
#[allow(non_camel_case_types, reason = "the kernel's name")]
#[allow(
    dead_code,
    reason = "`categories` is written by the kernel; with return_mask 0 it is always 0"
)]
struct page_region {
    start: u64,
    end: u64,
    categories: u64,
}

/// `struct uffdio_api` (`linux/userfaultfd.h`).
#[repr(C)]
#[allow(non_camel_case_types, reason = "the kernel's name")]
#[allow(dead_code, reason = "`ioctls` is written by the kernel and not needed")]
struct uffdio_api {
    api: u64,
    features: u64,
    ioctls: u64,
}

/// `struct uffdio_range` (`linux/userfaultfd.h`).
#[repr(C)]
#[allow(non_camel_case_types, reason = "the kernel's name")]
struct uffdio_range {
    start: u64,
    len: u64,
}

/// `struct uffdio_register` (`linux/userfaultfd.h`).
#[repr(C)]
#[allow(non_camel_case_types, reason = "the kernel's name")]
#[allow(dead_code, reason = "`ioctls` is written by the kernel and not needed")]
struct uffdio_register {
    range: uffdio_range,
    mode: u64,
    ioctls: u64,
}

/// `UFFD_API`: the only userfaultfd API version.
const UFFD_API: u64 = 0xAA;
/// The userfaultfd's ioctl type byte (`UFFDIO`).
const UFFDIO: u32 = 0xAA;
/// `userfaultfd(2)` flag: only faults from user mode are reported. An
/// unprivileged process (with `vm.unprivileged_userfaultfd = 0`) may only
/// create this kind. Async write protection does not care: the kernel
/// resolves every fault, and kernel-mode writes (`read(2)` into the page)
/// are still recorded.
const UFFD_USER_MODE_ONLY: libc::c_int = 1;
/// Write-protect unpopulated entries too (with a marker), so that a first
/// write to a never-touched page is recorded.
const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
/// Write-protect faults are resolved by the kernel, which clears the
/// protection and so records the write; nobody reads the userfaultfd.
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
/// The features the tracker needs from `UFFDIO_API`.
const UFFD_FEATURES: u64 = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;
/// `UFFDIO_REGISTER_MODE_WP`.
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;

/// `_IOWR(ty, nr, size)` in the asm-generic encoding used by x86_64,
/// aarch64 and riscv64: the direction (read | write = 3) in bits 30–31, the
/// argument's size in bits 16–29, the type in bits 8–15, the number in bits
/// 0–7. (On an architecture with another encoding the numbers are wrong,
/// the probe's `ioctl` fails with `ENOTTY`, and [`PageTracker::get`] says
/// `None`: a degradation, not a misbehaviour.)
const fn iowr(ty: u32, nr: u32, size: usize) -> libc::Ioctl {
    const READ_WRITE: u32 = 0b11;
    assert!(ty < 1 << 8 && nr < 1 << 8 && size < 1 << 14);
    ((READ_WRITE << 30) | ((size as u32) << 16) | (ty << 8) | nr) as libc::Ioctl
}

/// `PAGEMAP_SCAN = _IOWR('f', 16, struct pm_scan_arg)` = `0xC060_6610`.
const PAGEMAP_SCAN: libc::Ioctl = iowr(b'f' as u32, 16, size_of::<pm_scan_arg>());
/// `UFFDIO_API = _IOWR(UFFDIO, 0x3F, struct uffdio_api)` = `0xC018_AA3F`.
const UFFDIO_API: libc::Ioctl = iowr(UFFDIO, 0x3F, size_of::<uffdio_api>());
/// `UFFDIO_REGISTER = _IOWR(UFFDIO, 0x00, struct uffdio_register)` =
/// `0xC020_AA00`.
const UFFDIO_REGISTER: libc::Ioctl = iowr(UFFDIO, 0x00, size_of::<uffdio_register>());

/// Regions per `PAGEMAP_SCAN` call. The kernel passes regions out through a
/// bounce buffer of at most 512 entries; a call that reports more than that
/// leaves `walk_end` at the last bounce-buffer boundary although the walk
/// went on (measured here: 1024 regions back, `walk_end` just after the
/// 512th), so resuming from it would report regions twice. With at most 512
/// a full buffer always means "stopped early, resume at `walk_end`", and a
/// buffer that is not full means the walk reached the end.
///
/// Fewer still: the kernel allocates its bounce buffer (24 bytes a region)
/// on every call, and 512 of them (12 KiB) is above the largest slab size,
/// so each call took pages from the page allocator and gave them back, 15 %
/// of a 256 KiB memory's reset. 64 regions (1.5 KiB) come from a slab; a
/// reset that finds more runs of written pages than that makes one more
/// call per 64, each resuming where the last stopped.
const REGION_BUF_LEN: usize = 64;

// ---------------------------------------------------------------------------
// The tracker.
// ---------------------------------------------------------------------------

/// Process-wide oracle of page state for resetting linear memories.
///
/// Holds one `/proc/self/pagemap` descriptor (opening one costs 4–27 µs, so
/// it is kept) and, where the kernel allows it, one userfaultfd that every
/// write-protected range in the process is registered with. Both are
/// `O_CLOEXEC` and stay open for the life of the process: closing the
/// userfaultfd would silently unregister every range, turning all their
/// pages "written".
///
/// # Fork
///
/// A `pagemap` descriptor inherited through `fork` still describes the
/// *parent's* address space (and write-protecting through it would arm the
/// parent's pages). A `pthread_atfork` child handler therefore reopens
/// `/proc/self/pagemap` in the child and puts it on the same descriptor
/// number, so `&'static PageTracker` stays valid there; if that fails, every
/// scan in the child is an error. (A child made by a raw `clone` system
/// call, which runs no fork handlers, is not covered.)
///
/// The userfaultfd is not reopened: registrations are not inherited (the
/// fd is created without `UFFD_FEATURE_EVENT_FORK`), so in the child every
/// inherited range scans as an error (`EPERM` from the registration check),
/// which is the truth: nothing there is tracked any more. The inherited
/// userfaultfd still operates on the parent's address space (a
/// `UFFDIO_REGISTER` through it in the child registers the parent's range
/// at that address), so the child also reports
/// [`PageTracker::write_protect_available`] as `false` and refuses to
/// register anything.
#[derive(Debug)]
pub struct PageTracker {
    /// `/proc/self/pagemap`, read-only, `O_CLOEXEC`. Its number is also in
    /// [`PAGEMAP_FD`] for the fork handler, which replaces the open file
    /// behind it.
    pagemap: OwnedFd,
    /// The userfaultfd, `WP_ASYNC | WP_UNPOPULATED`, `O_CLOEXEC`.
    uffd: Option<OwnedFd>,
    /// Why there is no userfaultfd, for error messages.
    uffd_unavailable: Option<String>,
}

/// The process's tracker, probed on first use.
static TRACKER: OnceLock<Option<PageTracker>> = OnceLock::new();
/// The tracker's `pagemap` descriptor number (-1 before it exists), read by
/// the fork handler, which must not touch the `OnceLock`.
static PAGEMAP_FD: AtomicI32 = AtomicI32::new(-1);
/// Set in a forked child whose `pagemap` reopen failed: the descriptor still
/// describes the parent, and every scan must refuse to use it.
static PAGEMAP_STALE: AtomicBool = AtomicBool::new(false);
/// Set in a forked child: the userfaultfd belongs to the parent's address
/// space.
static IN_FORKED_CHILD: AtomicBool = AtomicBool::new(false);

impl PageTracker {
    /// The process's tracker, probed once.
    ///
    /// `None` when `PAGEMAP_SCAN` is unavailable: `/proc/self/pagemap`
    /// cannot be opened (no procfs, or a process that made itself
    /// non-dumpable, e.g. by `setuid`), or a probe scan of an empty range
    /// fails (`ENOTTY`/`EINVAL` before Linux 6.7), or the fork handler
    /// cannot be installed. Callers then have to reset memories wholesale.
    ///
    /// The userfaultfd is probed too:
    /// `userfaultfd(O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY)` and then
    /// `UFFDIO_API` asking for `WP_ASYNC | WP_UNPOPULATED`. If either fails
    /// (old kernel, seccomp, a kernel built without userfaultfd-wp), the
    /// tracker still exists, without write protection: see
    /// [`PageTracker::write_protect_available`].
    pub fn get() -> Option<&'static PageTracker> {
        TRACKER
            .get_or_init(|| match PageTracker::probe() {
                Ok(tracker) => Some(tracker),
                Err(e) => {
                    log::debug!("no page tracking for memory resets: {e:#}");
                    None
                }
            })
            .as_ref()
    }

    fn probe() -> Result<PageTracker> {
        let fd = open_pagemap().context("cannot open /proc/self/pagemap")?;
        // SAFETY: `fd` was just opened and nothing else owns it.
        let pagemap = unsafe { OwnedFd::from_raw_fd(fd) };

        // An empty walk: it fails on kernels without the ioctl and has no
        // effect anywhere else.
        let mut arg = pm_scan_arg {
            size: size_of::<pm_scan_arg>() as u64,
            ..pm_scan_arg::default()
        };
        // SAFETY: `vec_len` is 0, so the kernel writes no regions, and the
        // range is empty, so it looks at (and protects) no page.
        unsafe { pagemap_scan(pagemap.as_raw_fd(), &mut arg) }
            .context("PAGEMAP_SCAN is unavailable (it needs Linux 6.7 or later)")?;

        let (uffd, uffd_unavailable) = match open_uffd() {
            Ok(fd) => (Some(fd), None),
            Err(e) => {
                let why = format!("{e:#}");
                log::debug!("no write protection for memory resets: {why}");
                (None, Some(why))
            }
        };

        // The handler reads the number from here; publish it first. The
        // probe runs once per process (inside the `OnceLock`), so the handler
        // is installed once; children inherit the installation.
        PAGEMAP_FD.store(pagemap.as_raw_fd(), Ordering::SeqCst);
        // SAFETY: the handler is an `extern "C"` function with no arguments
        // that only makes async-signal-safe system calls (see its comments),
        // as a handler run in the child of a multithreaded process must.
        let rc = unsafe { libc::pthread_atfork(None, None, Some(reopen_pagemap_in_child)) };
        if rc != 0 {
            // Without the handler a child would scan (and arm) its parent.
            // `pagemap` is closed on the way out; no handler will look.
            PAGEMAP_FD.store(-1, Ordering::SeqCst);
            bail!(
                "cannot install the fork handler that reopens /proc/self/pagemap: {}",
                io::Error::from_raw_os_error(rc)
            );
        }

        Ok(PageTracker {
            pagemap,
            uffd,
            uffd_unavailable,
        })
    }

    /// Whether [`register_write_protect`](Self::register_write_protect),
    /// [`write_protect`](Self::write_protect) and
    /// [`written_since_protect`](Self::written_since_protect) can work: the
    /// userfaultfd probe succeeded, and this is not a forked child of the
    /// process that made it.
    pub fn write_protect_available(&self) -> bool {
        self.uffd.is_some() && !IN_FORKED_CHILD.load(Ordering::Relaxed)
    }

    /// Registers `[addr, addr + len)` with the process's userfaultfd in
    /// `UFFDIO_REGISTER_MODE_WP`, so that it can be armed with
    /// [`write_protect`](Self::write_protect).
    ///
    /// The range must be page-aligned and non-empty, and every page of it
    /// mapped (parts may be `PROT_NONE`: the registration survives a later
    /// `mprotect`, so a memory's whole reservation can be registered once).
    /// Registering splits kernel memory areas at the range's ends; mind
    /// `vm.max_map_count` with many memories. Registering a range twice is
    /// harmless; a range registered with another userfaultfd fails with
    /// `EBUSY`. Until a page that holds data is armed with
    /// [`write_protect`](Self::write_protect), it reads as written.
    ///
    /// An error (saying why) when write protection is unavailable, see
    /// [`write_protect_available`](Self::write_protect_available).
    ///
    /// # Safety
    ///
    /// The range must be a mapping the caller owns, and stay owned while
    /// registered: registration changes how faults in it are handled and
    /// splits its kernel areas, which is only the owner's business.
    /// Unmapping the range ends its registration; nothing else is needed to
    /// undo it.
    pub unsafe fn register_write_protect(&self, addr: *mut u8, len: usize) -> Result<()> {
        let uffd = self.usable_uffd()?;
        let start = addr.addr();
        let end = checked_range(start, len)?;
        if len == 0 {
            bail!("cannot register an empty range for write protection");
        }
        let mut register = uffdio_register {
            range: uffdio_range {
                start: start as u64,
                len: len as u64,
            },
            mode: UFFDIO_REGISTER_MODE_WP,
            ioctls: 0,
        };
        loop {
            // SAFETY: `register` is a live, exclusively borrowed
            // `uffdio_register`, the type `UFFDIO_REGISTER` is encoded with;
            // the kernel reads the range and writes `ioctls` back. What
            // registration does to the range is covered by the caller's
            // ownership of it (this function's contract).
            let rc = unsafe { libc::ioctl(uffd, UFFDIO_REGISTER, &raw mut register) };
            if rc == 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                bail!(
                    "cannot register {start:#x}..{end:#x} for userfaultfd write protection: {err}"
                );
            }
        }
    }

    /// Write-protects every page of `[addr, addr + len)`, so that the next
    /// write to each page (by the program or by the kernel on its behalf)
    /// marks it written for
    /// [`written_since_protect`](Self::written_since_protect).
    ///
    /// One `PAGEMAP_SCAN` with `WP_MATCHING | CHECK_WPASYNC` and no region
    /// output: a single walk and a single TLB flush for the whole range.
    /// Unpopulated entries get a marker, which the record does not need (a
    /// never-touched page is not reported until written, marker or not) but
    /// every later scan visits: protect the pages that hold data, not a
    /// whole memory. It filters on no category (`category_mask` 0)
    /// because the intent is "every page": a `WRITTEN` filter would name
    /// the same pages (protecting a protected page changes nothing, and the
    /// kernel skips those anyway) but make the result depend on how the
    /// kernel categorises unpopulated entries, which the ABI leaves open (on
    /// this machine a hole reads `WRITTEN` inside a registered area and has
    /// no category at all outside one); with no filter, a hole the filter
    /// missed cannot stay unprotected and silently unreported.
    ///
    /// Restore pages *before* protecting them again: a restore after this
    /// call takes a write fault per page and leaves the page written.
    ///
    /// An error if write protection is unavailable or any mapped part of the
    /// range is not registered (`EPERM` from `CHECK_WPASYNC`); pages before
    /// the failing area may have been protected by then. Unmapped gaps in the
    /// range are skipped. An empty range is a no-op.
    ///
    /// # Safety
    ///
    /// The range must be mapped and owned by the caller (registered with
    /// [`register_write_protect`](Self::register_write_protect)): its
    /// protection state is the owner's record of what to restore, and
    /// protecting someone else's range would erase their record of writes,
    /// so that their reset would leave stale data behind.
    ///
    /// No write is ever lost or blocked: the kernel resolves the fault of a
    /// write to a protected page itself. But a write by another thread that
    /// races with this call may or may not be reported later (it may land
    /// just before its page is protected); a caller that needs an exact
    /// record must keep writers out while protecting.
    pub unsafe fn write_protect(&self, addr: *mut u8, len: usize) -> Result<()> {
        self.usable_uffd()?;
        let start = addr.addr();
        let end = checked_range(start, len)?;
        if len == 0 {
            return Ok(());
        }
        let fd = self.pagemap_fd()?;
        let mut arg = pm_scan_arg {
            size: size_of::<pm_scan_arg>() as u64,
            flags: PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
            start: start as u64,
            end: end as u64,
            ..pm_scan_arg::default()
        };
        // SAFETY: `vec_len` is 0, so the kernel writes no regions. The walk
        // changes only the write-protect bits of page-table entries in a
        // range the caller owns (this function's contract), and, with
        // `CHECK_WPASYNC`, only in async-registered areas, where a write to
        // a protected page is resolved by the kernel: no access faults or
        // blocks because of it.
        unsafe { pagemap_scan(fd, &mut arg) }
            .map_err(|err| scan_error(err, start, end, true, "write-protect"))?;
        // A walk without region output runs to the end in one go; check it
        // rather than trust it, since a short walk would leave pages
        // unprotected and their writes unreported.
        if arg.walk_end < end as u64 {
            bail!(
                "PAGEMAP_SCAN stopped write-protecting {start:#x}..{end:#x} at {:#x}",
                arg.walk_end
            );
        }
        Ok(())
    }

    /// Appends to `out` the pages of `[addr, addr + len)` written since
    /// they were last write-protected with
    /// [`write_protect`](Self::write_protect): byte ranges relative to
    /// `addr`, page-aligned, sorted, adjacent ones merged (and merged with
    /// nothing already in `out`).
    ///
    /// This includes writes by the kernel (`read(2)` into the memory) and
    /// pages that were written and are now in swap (a swapped entry keeps
    /// its write-protect bit). The filter is `WRITTEN & !FILE & !PFNZERO`
    /// among pages that hold data (`PRESENT` or `SWAPPED`): a written page
    /// of a `MAP_PRIVATE` file mapping is a private copy and no longer
    /// `FILE`; the shared zero page (a read) is never data to restore; and
    /// an unpopulated entry holds nothing (without a marker the kernel
    /// reads it as `WRITTEN` inside a registered area, so the filter must
    /// exclude it; a marker reads `SWAPPED` and protected). So a page never
    /// touched is not reported, armed or not, and its
    /// first write makes a page without protection, which is: arming only
    /// the pages that hold data gives an exact record, and a page a caller
    /// zaps (`MADV_DONTNEED`) drops out of it (it reads zeros or the file
    /// again; restoring what it held is the zapper's business).
    /// Writes through a `MAP_SHARED` mapping are not found (they stay
    /// `FILE`); those reach the file and are not a reset's business.
    ///
    /// An error if write protection is unavailable or any mapped part of the
    /// range is not registered (`CHECK_WPASYNC`): a lost registration (a
    /// forked child; a closed userfaultfd) would otherwise read as "every
    /// page written" or "nothing written". Unmapped gaps in the range report
    /// nothing. The range must be page-aligned. On error nothing is appended.
    ///
    /// Only reads page tables; a write by another thread during the call may
    /// or may not be reported.
    pub fn written_since_protect(
        &self,
        addr: *const u8,
        len: usize,
        out: &mut Vec<Range<usize>>,
    ) -> Result<()> {
        self.usable_uffd()?;
        self.collect(addr, len, Filter::WRITTEN_DATA, out)
    }

    /// Appends to `out` (in the same form as
    /// [`written_since_protect`](Self::written_since_protect)) the pages of
    /// `[addr, addr + len)` that hold private anonymous data: not `FILE`,
    /// not `PFNZERO`, and present *or* swapped. (Requiring `PRESENT` would
    /// miss written pages that went to swap, leaving their data to the next
    /// user of the memory.)
    ///
    /// On an anonymous or `MAP_PRIVATE` file mapping that was never armed
    /// this is exactly "written since it was mapped", kernel writes
    /// included. It cannot tell a page restored by `memcpy` from a dirty
    /// one: such a page is reported until `MADV_DONTNEED` drops it.
    ///
    /// Only meaningful on ranges that are not armed with
    /// [`write_protect`](Self::write_protect): there, unpopulated entries
    /// hold write-protect markers, which read as `SWAPPED`, so untouched
    /// pages would be reported too. Unmapped gaps report nothing. The range
    /// must be page-aligned. On error nothing is appended.
    pub fn anonymous_pages(
        &self,
        addr: *const u8,
        len: usize,
        out: &mut Vec<Range<usize>>,
    ) -> Result<()> {
        self.collect(addr, len, Filter::PRIVATE_DATA, out)
    }

    /// Appends to `out` (in the same form as
    /// [`written_since_protect`](Self::written_since_protect)) the pages of
    /// `[addr, addr + len)` that are mapped to a page frame now: private
    /// data, the shared zero page and file pages alike: the pages that are
    /// mapped for free today and would cost a fault to map again once
    /// released. Swapped-out pages and write-protect markers are not among
    /// them (no page frame backs them; touching them faults either way).
    /// Unmapped gaps report nothing. The range must be page-aligned. On
    /// error nothing is appended.
    pub fn present_pages(
        &self,
        addr: *const u8,
        len: usize,
        out: &mut Vec<Range<usize>>,
    ) -> Result<()> {
        self.collect(addr, len, Filter::PRESENT, out)
    }

    /// The userfaultfd, or an error saying why there is none to use.
    fn usable_uffd(&self) -> Result<RawFd> {
        let Some(uffd) = &self.uffd else {
            bail!(
                "userfaultfd write protection is unavailable in this process: {}",
                self.uffd_unavailable.as_deref().unwrap_or("unknown reason")
            );
        };
        if IN_FORKED_CHILD.load(Ordering::Relaxed) {
            bail!(
                "userfaultfd write protection is unavailable in a forked child: \
                 registrations are not inherited, and the inherited userfaultfd \
                 belongs to the parent's address space"
            );
        }
        Ok(uffd.as_raw_fd())
    }

    /// The `pagemap` descriptor, unless a fork left it describing the
    /// parent.
    fn pagemap_fd(&self) -> Result<RawFd> {
        if PAGEMAP_STALE.load(Ordering::Relaxed) {
            bail!(
                "/proc/self/pagemap could not be reopened after fork; \
                 the inherited descriptor describes the parent process"
            );
        }
        Ok(self.pagemap.as_raw_fd())
    }

    /// Runs a read-only scan of `[addr, addr + len)` with `filter`,
    /// resuming while the region buffer comes back full, and appends the
    /// matches to `out` relative to `addr`.
    fn collect(
        &self,
        addr: *const u8,
        len: usize,
        filter: Filter,
        out: &mut Vec<Range<usize>>,
    ) -> Result<()> {
        // An empty range has nothing to report, wherever it points (an
        // empty memory's base is a dangling, unaligned pointer).
        if len == 0 {
            return Ok(());
        }
        let base = addr.addr();
        let end = checked_range(base, len)?;
        let fd = self.pagemap_fd()?;
        let first = out.len();
        let result = (|| {
            let mut regions = [page_region::default(); REGION_BUF_LEN];
            let mut start = base;
            loop {
                let mut arg = pm_scan_arg {
                    size: size_of::<pm_scan_arg>() as u64,
                    flags: if filter.check_wpasync {
                        PM_SCAN_CHECK_WPASYNC
                    } else {
                        0
                    },
                    start: start as u64,
                    end: end as u64,
                    vec: regions.as_mut_ptr().addr() as u64,
                    vec_len: REGION_BUF_LEN as u64,
                    category_inverted: filter.inverted,
                    category_mask: filter.mask,
                    category_anyof_mask: filter.anyof,
                    ..pm_scan_arg::default()
                };
                // SAFETY: `vec` points at `regions`, `REGION_BUF_LEN`
                // writable entries that nothing else uses during the call,
                // and `vec_len` says so. The flags never include
                // `WP_MATCHING`, so the walk only reads page tables; any
                // address range is fine for that (the kernel checks it).
                let n = unsafe { pagemap_scan(fd, &mut arg) }
                    .map_err(|err| scan_error(err, base, end, filter.check_wpasync, "scan"))?;
                let Some(found) = regions.get(..n) else {
                    bail!("PAGEMAP_SCAN reported {n} regions into a buffer of {REGION_BUF_LEN}");
                };
                for region in found {
                    push_region(out, first, base, end, region)?;
                }
                if n < REGION_BUF_LEN {
                    // Not full: nothing stopped the walk before `end`.
                    return Ok(());
                }
                let walk_end = usize::try_from(arg.walk_end)?;
                if walk_end >= end {
                    return Ok(());
                }
                if walk_end <= start {
                    bail!("PAGEMAP_SCAN of {base:#x}..{end:#x} made no progress at {walk_end:#x}");
                }
                start = walk_end;
            }
        })();
        if result.is_err() {
            out.truncate(first);
        }
        result
    }
}

/// The category filter of a read-only scan.
#[derive(Clone, Copy)]
struct Filter {
    /// Pass `PM_SCAN_CHECK_WPASYNC`: fail on areas not registered for async
    /// write protection.
    check_wpasync: bool,
    mask: u64,
    inverted: u64,
    anyof: u64,
}

impl Filter {
    /// Pages holding private data: present or swapped (never require
    /// present: a written page may be in swap), neither a file page nor
    /// the zero page.
    const PRIVATE_DATA: Filter = Filter {
        check_wpasync: false,
        mask: PAGE_IS_FILE | PAGE_IS_PFNZERO,
        inverted: PAGE_IS_FILE | PAGE_IS_PFNZERO,
        anyof: PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
    };

    /// [`Filter::PRIVATE_DATA`] written since last write-protected, in
    /// areas that must be registered for it.
    const WRITTEN_DATA: Filter = Filter {
        check_wpasync: true,
        mask: Filter::PRIVATE_DATA.mask | PAGE_IS_WRITTEN,
        ..Filter::PRIVATE_DATA
    };

    /// Pages mapped to a page frame, whatever it holds.
    const PRESENT: Filter = Filter {
        check_wpasync: false,
        mask: 0,
        inverted: 0,
        anyof: PAGE_IS_PRESENT,
    };
}

/// Checks that `[start, start + len)` is page-aligned and does not wrap;
/// returns its end.
fn checked_range(start: usize, len: usize) -> Result<usize> {
    let page = host_page_size();
    if !start.is_multiple_of(page) || !len.is_multiple_of(page) {
        bail!("range {start:#x}+{len:#x} is not aligned to the {page:#x}-byte page size");
    }
    match start.checked_add(len) {
        Some(end) => Ok(end),
        None => bail!("range {start:#x}+{len:#x} wraps around the address space"),
    }
}

/// Appends `region` (absolute addresses inside `[base, end)`) to `out`
/// relative to `base`, merging it into the last range appended by this
/// scan (those from `first` on) when they touch. Regions the kernel split
/// (at a resume point, or a page-table boundary) come back whole that way.
fn push_region(
    out: &mut Vec<Range<usize>>,
    first: usize,
    base: usize,
    end: usize,
    region: &page_region,
) -> Result<()> {
    let (start, stop) = (usize::try_from(region.start)?, usize::try_from(region.end)?);
    if start < base || stop > end || start >= stop {
        bail!("PAGEMAP_SCAN returned region {start:#x}..{stop:#x} outside {base:#x}..{end:#x}");
    }
    let range = start - base..stop - base;
    if let Some(last) = out[first..].last_mut() {
        if range.start < last.start {
            bail!("PAGEMAP_SCAN returned regions out of order");
        }
        if range.start <= last.end {
            last.end = last.end.max(range.end);
            return Ok(());
        }
    }
    out.push(range);
    Ok(())
}

/// The error for a failed scan of `[start, end)`.
fn scan_error(
    err: io::Error,
    start: usize,
    end: usize,
    checked: bool,
    what: &str,
) -> anyhow::Error {
    if checked && err.raw_os_error() == Some(libc::EPERM) {
        anyhow::anyhow!(
            "PAGEMAP_SCAN ({what}) of {start:#x}..{end:#x}: part of the range is not registered \
             for asynchronous userfaultfd write protection (never registered, or the \
             registration was lost: a forked child, a closed userfaultfd): {err}"
        )
    } else {
        anyhow::anyhow!("PAGEMAP_SCAN ({what}) of {start:#x}..{end:#x} failed: {err}")
    }
}

/// One `PAGEMAP_SCAN` call on `fd`, retried on `EINTR`; the number of
/// regions written to `arg.vec`.
///
/// # Safety
///
/// `arg.vec` must point at `arg.vec_len` writable `page_region`s that
/// nothing else accesses during the call (or `vec_len` be 0). If
/// `arg.flags` has `PM_SCAN_WP_MATCHING`, the caller must own the range
/// (write-protecting it rewrites its owner's record of writes).
unsafe fn pagemap_scan(fd: RawFd, arg: &mut pm_scan_arg) -> io::Result<usize> {
    loop {
        // SAFETY: `arg` is a live, exclusively borrowed `pm_scan_arg`, the
        // type `PAGEMAP_SCAN` is encoded with; the kernel writes only
        // `walk_end` back into it, and regions only into `vec`, which this
        // function's `# Safety` makes `vec_len` writable entries that
        // nothing else accesses. A retry after `EINTR` starts over from the
        // unchanged `start`: nothing of the interrupted call was reported.
        let rc = unsafe { libc::ioctl(fd, PAGEMAP_SCAN, &raw mut *arg) };
        if let Ok(n) = usize::try_from(rc) {
            return Ok(n);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Opens `/proc/self/pagemap` read-only and `O_CLOEXEC`, retrying on
/// `EINTR`. Only system calls: the fork handler uses it too.
fn open_pagemap() -> io::Result<RawFd> {
    loop {
        // SAFETY: the path is a NUL-terminated literal; `open` has no other
        // requirement, and the new descriptor is the caller's.
        let fd = unsafe {
            libc::open(
                c"/proc/self/pagemap".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if fd >= 0 {
            return Ok(fd);
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Creates the userfaultfd and enables async write protection on it.
fn open_uffd() -> Result<OwnedFd> {
    // `O_NONBLOCK` because nothing ever reads it (async mode sends no fault
    // messages); user mode only because that is all an unprivileged process
    // may create, and all async write protection needs.
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY;
    // SAFETY: `userfaultfd` takes only flags and creates a new descriptor.
    let rc = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
    if rc < 0 {
        bail!(
            "userfaultfd(UFFD_USER_MODE_ONLY) failed: {}",
            io::Error::last_os_error()
        );
    }
    let fd = RawFd::try_from(rc)?;
    // SAFETY: `fd` was just created and nothing else owns it.
    let uffd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut api = uffdio_api {
        api: UFFD_API,
        features: UFFD_FEATURES,
        ioctls: 0,
    };
    loop {
        // SAFETY: `api` is a live, exclusively borrowed `uffdio_api`, the
        // type `UFFDIO_API` is encoded with; the kernel writes the supported
        // features and ioctls back into it.
        let rc = unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_API, &raw mut api) };
        if rc == 0 {
            break;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            bail!("UFFDIO_API with WP_ASYNC | WP_UNPOPULATED failed: {err}");
        }
    }
    if api.features & UFFD_FEATURES != UFFD_FEATURES {
        bail!(
            "userfaultfd lacks WP_ASYNC | WP_UNPOPULATED (features {:#x})",
            api.features
        );
    }
    Ok(uffd)
}

/// The `pthread_atfork` child handler: gives the child a `pagemap`
/// descriptor for its own address space, on the tracker's descriptor number.
///
/// It runs in the child of a possibly multithreaded process before `fork`
/// returns, so it only makes async-signal-safe system calls (`open`,
/// `dup3`, `close`) and touches atomics: no allocation, no locks.
extern "C" fn reopen_pagemap_in_child() {
    IN_FORKED_CHILD.store(true, Ordering::Relaxed);
    let target = PAGEMAP_FD.load(Ordering::SeqCst);
    if target < 0 {
        return;
    }
    let Ok(fresh) = open_pagemap() else {
        PAGEMAP_STALE.store(true, Ordering::Relaxed);
        return;
    };
    // `dup3` rather than `dup2`: `dup2` clears close-on-exec on the target,
    // which would leak the descriptor into programs the child executes.
    let replaced = loop {
        // SAFETY: `fresh` is the descriptor just opened; `target` is the
        // tracker's own `pagemap` descriptor, which this atomically points
        // at the child's pagemap. Nothing else owns that number (the
        // tracker never closes it), so no one else's file is replaced.
        let rc = unsafe { libc::dup3(fresh, target, libc::O_CLOEXEC) };
        if rc >= 0 {
            break true;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            break false;
        }
    };
    // The outcome is stored either way: a grandchild that reopens
    // successfully repairs what its parent's failure left.
    PAGEMAP_STALE.store(!replaced, Ordering::Relaxed);
    // SAFETY: `fresh` was opened above, is owned by nothing else, and is no
    // longer needed (its file now also sits on `target`).
    unsafe { libc::close(fresh) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::Write;
    use std::ptr;

    fn page() -> usize {
        host_page_size()
    }

    fn tracker() -> &'static PageTracker {
        PageTracker::get().expect("PAGEMAP_SCAN is available on the build machine")
    }

    /// A test mapping, unmapped on drop.
    struct Mapping {
        ptr: *mut u8,
        len: usize,
    }

    impl Mapping {
        /// `pages` pages of anonymous memory with protection `prot`, without
        /// transparent huge pages (a huge page would make one write a 2 MiB
        /// region and break the exact expectations).
        fn anon(pages: usize, prot: libc::c_int) -> Mapping {
            let len = pages * page();
            // SAFETY: a new private mapping at a kernel-chosen address.
            let ptr = unsafe {
                libc::mmap(
                    ptr::null_mut(),
                    len,
                    prot,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            assert_ne!(ptr, libc::MAP_FAILED, "{}", io::Error::last_os_error());
            let mapping = Mapping {
                ptr: ptr.cast(),
                len,
            };
            mapping.no_huge_pages();
            mapping
        }

        /// A `MAP_PRIVATE`, read-write mapping of a memfd holding `data`.
        fn memfd_private(data: &[u8]) -> Mapping {
            // SAFETY: the name is a NUL-terminated literal.
            let fd = unsafe { libc::memfd_create(c"dirty-pages-test".as_ptr(), libc::MFD_CLOEXEC) };
            assert!(fd >= 0, "{}", io::Error::last_os_error());
            // SAFETY: `fd` was just created and nothing else owns it.
            let mut file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
            file.write_all(data).unwrap();
            // SAFETY: a new private mapping of the memfd (which nothing
            // truncates) at a kernel-chosen address. The mapping keeps the
            // file alive after `file` is closed.
            let ptr = unsafe {
                libc::mmap(
                    ptr::null_mut(),
                    data.len(),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE,
                    file.as_raw_fd(),
                    0,
                )
            };
            assert_ne!(ptr, libc::MAP_FAILED, "{}", io::Error::last_os_error());
            let mapping = Mapping {
                ptr: ptr.cast(),
                len: data.len(),
            };
            mapping.no_huge_pages();
            mapping
        }

        fn no_huge_pages(&self) {
            // SAFETY: advice on this test's own mapping; it changes no
            // contents.
            let rc = unsafe { libc::madvise(self.ptr.cast(), self.len, libc::MADV_NOHUGEPAGE) };
            assert_eq!(rc, 0, "{}", io::Error::last_os_error());
        }

        fn page_ptr(&self, index: usize) -> *mut u8 {
            assert!((index + 1) * page() <= self.len);
            self.ptr.wrapping_add(index * page())
        }

        fn write(&self, index: usize, byte: u8) {
            // SAFETY: the page is inside this mapping (checked by
            // `page_ptr`), and the tests only write accessible pages.
            unsafe { ptr::write_bytes(self.page_ptr(index), byte, page()) };
        }

        fn read(&self, index: usize) -> u8 {
            // SAFETY: `page_ptr` checked that the page is inside this
            // mapping, the tests only read accessible pages, and a `u8`
            // needs no alignment; volatile so that the read (which maps the
            // zero page or the file's page) really happens.
            unsafe { ptr::read_volatile(self.page_ptr(index)) }
        }

        /// Copies page `index` back from `image` (a copy of the whole
        /// mapping's original contents).
        fn restore(&self, index: usize, image: &[u8]) {
            let src = &image[index * page()..(index + 1) * page()];
            // SAFETY: the page is inside this mapping and `src` is a
            // separate buffer of one page.
            unsafe { ptr::copy_nonoverlapping(src.as_ptr(), self.page_ptr(index), page()) };
        }

        fn anonymous(&self) -> Vec<Range<usize>> {
            let mut out = Vec::new();
            tracker()
                .anonymous_pages(self.ptr, self.len, &mut out)
                .unwrap();
            out
        }

        fn written(&self) -> Vec<Range<usize>> {
            let mut out = Vec::new();
            tracker()
                .written_since_protect(self.ptr, self.len, &mut out)
                .unwrap();
            out
        }

        fn register(&self) {
            // SAFETY: the range is this mapping's, mapped for its whole
            // length and owned by the test alone, so registering it changes
            // no one else's memory.
            unsafe {
                tracker()
                    .register_write_protect(self.ptr, self.len)
                    .unwrap()
            };
        }

        fn register_and_protect(&self) {
            self.register();
            self.protect();
        }

        fn protect(&self) {
            // SAFETY: the whole range is this mapping, mapped for its full
            // length and owned by the test alone, so its protection state is
            // no one else's record of writes.
            unsafe { tracker().write_protect(self.ptr, self.len).unwrap() };
        }
    }

    impl Drop for Mapping {
        fn drop(&mut self) {
            // SAFETY: the mapping is this value's own, and nothing refers to
            // it any more.
            unsafe { libc::munmap(self.ptr.cast(), self.len) };
        }
    }

    /// `pages` pages of non-zero, page-distinct bytes.
    fn image(pages: usize) -> Vec<u8> {
        (0..pages * page())
            .map(|i| (i / page() % 250 + 1) as u8)
            .collect()
    }

    fn skip_without_write_protect() -> bool {
        if tracker().write_protect_available() {
            return false;
        }
        eprintln!(
            "skipped: userfaultfd write protection is unavailable here ({})",
            tracker().uffd_unavailable.as_deref().unwrap_or("?")
        );
        true
    }

    #[test]
    #[allow(
        clippy::unnecessary_cast,
        reason = "`libc::Ioctl` is `c_ulong` here but `c_int` with other C libraries"
    )]
    fn ioctl_numbers_match_the_kernel_formula() {
        assert_eq!(size_of::<pm_scan_arg>(), 96);
        assert_eq!(size_of::<page_region>(), 24);
        assert_eq!(size_of::<uffdio_api>(), 24);
        assert_eq!(size_of::<uffdio_register>(), 32);
        // _IOWR(type, nr, size) = (READ|WRITE = 3) << 30 | size << 16 | type << 8 | nr.
        let formula = |ty: u64, nr: u64, size: u64| (3 << 30) | (size << 16) | (ty << 8) | nr;
        assert_eq!(PAGEMAP_SCAN as u64, formula(b'f'.into(), 16, 96));
        assert_eq!(PAGEMAP_SCAN as u64, 0xC060_6610);
        assert_eq!(UFFDIO_API as u64, formula(0xAA, 0x3F, 24));
        assert_eq!(UFFDIO_REGISTER as u64, formula(0xAA, 0x00, 32));
        // And libc's own encoder agrees.
        assert_eq!(PAGEMAP_SCAN, libc::_IOWR::<pm_scan_arg>(b'f'.into(), 16));
        assert_eq!(UFFDIO_API, libc::_IOWR::<uffdio_api>(0xAA, 0x3F));
        assert_eq!(UFFDIO_REGISTER, libc::_IOWR::<uffdio_register>(0xAA, 0x00));
    }

    /// 1. Fresh anonymous memory: written pages are reported, a page only
    ///    read (the zero page) and untouched pages are not.
    #[test]
    fn anonymous_mapping_reports_exactly_written_pages() {
        let m = Mapping::anon(64, libc::PROT_READ | libc::PROT_WRITE);
        assert_eq!(m.anonymous(), vec![]);
        m.write(3, 1);
        m.write(10, 2);
        m.write(11, 3);
        assert_eq!(m.read(20), 0);
        assert_eq!(m.anonymous(), pages(&[3, 10, 11]));
    }

    /// 2. A `MAP_PRIVATE` file mapping: pages only read are the file's
    ///    (`FILE`), the written one became a private copy.
    #[test]
    fn memfd_private_mapping_reports_the_written_page() {
        let data = image(16);
        let m = Mapping::memfd_private(&data);
        for i in 0..16 {
            assert_eq!(m.read(i), data[i * page()]);
        }
        assert_eq!(m.anonymous(), vec![]);
        m.write(5, 0xEE);
        assert_eq!(m.anonymous(), pages(&[5]));
    }

    /// The cycle a reset runs: scan, restore by memcpy, re-protect; three
    /// rounds with different pages. Each round must report exactly its own
    /// pages: none of the previous round's (no ratchet), none untouched.
    fn write_protect_cycle(m: &Mapping, image: &[u8]) {
        m.register_and_protect();
        assert_eq!(m.written(), vec![], "nothing written right after arming");
        let rounds: [&[usize]; 4] = [&[1, 100], &[2, 3, 4, 200], &[0, 255], &[100, 101, 150]];
        for (k, round) in rounds.into_iter().enumerate() {
            for &i in round {
                m.write(i, 0x5A);
            }
            // A page no round writes, only read: not reported.
            assert_eq!(m.read(60 + k), image[(60 + k) * page()]);
            let expected = pages(round);
            assert_eq!(m.written(), expected, "round {round:?}");
            // Restore first, then protect again (the other order faults on
            // every restored page and leaves it written).
            for &i in round {
                m.restore(i, image);
            }
            m.protect();
            assert_eq!(m.written(), vec![], "after restoring {round:?}");
            for &i in round {
                assert_eq!(m.read(i), image[i * page()]);
            }
        }
    }

    /// Sorted page indices as byte ranges, adjacent pages merged.
    fn pages(indices: &[usize]) -> Vec<Range<usize>> {
        let mut out: Vec<Range<usize>> = Vec::new();
        for &i in indices {
            match out.last_mut() {
                Some(last) if last.end == i * page() => last.end += page(),
                _ => out.push(i * page()..(i + 1) * page()),
            }
        }
        out
    }

    /// 3. Write-protect cycle on anonymous memory.
    #[test]
    fn write_protect_cycle_anonymous() {
        if skip_without_write_protect() {
            return;
        }
        let m = Mapping::anon(256, libc::PROT_READ | libc::PROT_WRITE);
        write_protect_cycle(&m, &vec![0; 256 * page()]);
    }

    /// 4. Write-protect cycle on a `MAP_PRIVATE` memfd mapping, with every
    ///    page read (mapped from the file) before and after arming.
    #[test]
    fn write_protect_cycle_memfd_private() {
        if skip_without_write_protect() {
            return;
        }
        let data = image(256);
        let m = Mapping::memfd_private(&data);
        for i in (0..256).step_by(2) {
            assert_eq!(m.read(i), data[i * page()]);
        }
        m.register_and_protect();
        for i in 0..256 {
            assert_eq!(m.read(i), data[i * page()]);
        }
        assert_eq!(m.written(), vec![], "reads are not writes");
        write_protect_cycle(&m, &data);
    }

    /// 5. A write by the kernel (`read(2)` from a pipe) into a protected
    ///    page is recorded.
    #[test]
    fn kernel_writes_are_tracked() {
        if skip_without_write_protect() {
            return;
        }
        let m = Mapping::anon(16, libc::PROT_READ | libc::PROT_WRITE);
        m.register_and_protect();
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors were just created and are owned here.
        let (reader, writer) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        File::from(writer).write_all(b"kernel write").unwrap();
        // SAFETY: page 7 is inside the mapping and writable; `read` writes
        // at most 12 bytes there.
        let n = unsafe { libc::read(reader.as_raw_fd(), m.page_ptr(7).add(100).cast(), 12) };
        assert_eq!(n, 12, "{}", io::Error::last_os_error());
        assert_eq!(m.read(7), 0);
        assert_eq!(m.written(), pages(&[7]));
    }

    /// 6. More regions than one call can report: every other page written,
    ///    every region reported exactly once, around the 512 boundary and
    ///    well past it, by both scans.
    #[test]
    fn many_regions_resume_from_walk_end() {
        let around_buffer = [REGION_BUF_LEN - 1, REGION_BUF_LEN, REGION_BUF_LEN + 1];
        for regions in around_buffer.into_iter().chain([511, 512, 513, 1024, 2048]) {
            let m = Mapping::anon(2 * regions, libc::PROT_READ | libc::PROT_WRITE);
            for i in 0..regions {
                m.write(2 * i, 1);
            }
            let expected: Vec<Range<usize>> = (0..regions)
                .map(|i| 2 * i * page()..(2 * i + 1) * page())
                .collect();
            assert_eq!(m.anonymous(), expected, "{regions} regions, anonymous");

            if !tracker().write_protect_available() {
                continue;
            }
            let m = Mapping::anon(2 * regions, libc::PROT_READ | libc::PROT_WRITE);
            m.register_and_protect();
            for i in 0..regions {
                m.write(2 * i + 1, 1);
            }
            let expected: Vec<Range<usize>> = (0..regions)
                .map(|i| (2 * i + 1) * page()..(2 * i + 2) * page())
                .collect();
            assert_eq!(m.written(), expected, "{regions} regions, written");
        }
    }

    /// Regions the kernel splits (at a resume point) are joined again;
    /// regions outside the walked range, or going backwards, are errors.
    #[test]
    fn regions_are_merged_and_checked() {
        let region = |start: u64, end: u64| page_region {
            start,
            end,
            categories: 0,
        };
        let (base, end) = (0x10_0000, 0x20_0000);
        // An entry from before this scan, which must stay as it is.
        let earlier = 0..0x1000;
        let mut out = vec![earlier];
        for r in [
            region(0x10_0000, 0x10_2000),
            region(0x10_2000, 0x10_3000),
            region(0x10_5000, 0x10_6000),
            region(0x10_5000, 0x10_7000),
        ] {
            push_region(&mut out, 1, base, end, &r).unwrap();
        }
        assert_eq!(out, vec![0..0x1000, 0..0x3000, 0x5000..0x7000]);
        assert!(push_region(&mut out, 1, base, end, &region(0x10_1000, 0x10_2000)).is_err());
        assert!(push_region(&mut out, 1, base, end, &region(0x1f_f000, 0x20_1000)).is_err());
        assert!(push_region(&mut out, 1, base, end, &region(0x0f_f000, 0x10_0000)).is_err());
        assert!(push_region(&mut out, 1, base, end, &region(0x18_0000, 0x18_0000)).is_err());
    }

    /// Appending does not merge with (or disturb) what `out` held before.
    #[test]
    fn results_append_after_existing_entries() {
        let m = Mapping::anon(8, libc::PROT_READ | libc::PROT_WRITE);
        m.write(0, 1);
        let earlier = 0..page();
        let mut out = vec![earlier.clone()];
        tracker().anonymous_pages(m.ptr, m.len, &mut out).unwrap();
        assert_eq!(out, vec![earlier.clone(), earlier]);
    }

    /// 7. An unregistered (but mapped) range is an error for the
    ///    write-protect operations, not an empty result.
    #[test]
    fn unregistered_range_is_an_error() {
        let m = Mapping::anon(16, libc::PROT_READ | libc::PROT_WRITE);
        m.write(2, 1);
        let mut out = Vec::new();
        let err = tracker()
            .written_since_protect(m.ptr, m.len, &mut out)
            .unwrap_err();
        eprintln!("written_since_protect on an unregistered range: {err:#}");
        assert!(out.is_empty());
        // SAFETY: the range is `m`, mapped for its full length and owned by
        // this test alone, so protecting it (were it registered) would
        // touch no one else's record of writes.
        let err = unsafe { tracker().write_protect(m.ptr, m.len) }.unwrap_err();
        eprintln!("write_protect on an unregistered range: {err:#}");
        if tracker().write_protect_available() {
            assert!(format!("{err:#}").contains("not registered"), "{err:#}");
        }
        // Misaligned ranges are refused before the kernel sees them.
        assert!(
            tracker()
                .anonymous_pages(m.ptr.wrapping_add(1), page(), &mut out)
                .is_err()
        );
        assert!(tracker().anonymous_pages(m.ptr, 1, &mut out).is_err());
    }

    /// Whether `/proc/swaps` lists a swap device.
    fn have_swap() -> bool {
        std::fs::read_to_string("/proc/swaps")
            .map(|s| s.lines().skip(1).any(|l| !l.trim().is_empty()))
            .unwrap_or(false)
    }

    /// Whether the pagemap entry of `addr` says "swapped" (bit 62).
    fn in_swap(addr: *const u8) -> bool {
        let file = File::open("/proc/self/pagemap").unwrap();
        let mut entry = [0u8; 8];
        let offset = (addr.addr() / page() * 8) as u64;
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut entry, offset).unwrap();
        u64::from_ne_bytes(entry) & (1 << 62) != 0
    }

    fn page_out(m: &Mapping, index: usize) {
        // SAFETY: advice on this test's own page; the data comes back from
        // swap on the next access.
        let rc = unsafe { libc::madvise(m.page_ptr(index).cast(), page(), libc::MADV_PAGEOUT) };
        assert_eq!(rc, 0, "{}", io::Error::last_os_error());
    }

    /// 8. A written page pushed to swap is still reported by both scans.
    #[test]
    fn swapped_pages_are_reported() {
        if !have_swap() {
            eprintln!("skipped: no swap on this machine");
            return;
        }
        let m = Mapping::anon(16, libc::PROT_READ | libc::PROT_WRITE);
        m.write(4, 9);
        page_out(&m, 4);
        if !in_swap(m.page_ptr(4)) {
            eprintln!("skipped: MADV_PAGEOUT did not swap the page out");
            return;
        }
        assert_eq!(m.anonymous(), pages(&[4]));

        if skip_without_write_protect() {
            return;
        }
        let m = Mapping::anon(16, libc::PROT_READ | libc::PROT_WRITE);
        m.register_and_protect();
        m.write(6, 9);
        page_out(&m, 6);
        if !in_swap(m.page_ptr(6)) {
            eprintln!("skipped (write-protect half): MADV_PAGEOUT did not swap the page out");
            return;
        }
        assert_eq!(m.written(), pages(&[6]));
        assert_eq!(m.read(6), 9);
    }

    /// 9. Growth: a registered reservation with only its first 16 pages
    ///    accessible, armed whole; pages made accessible later by `mprotect`
    ///    are still registered and armed.
    #[test]
    fn mprotect_growth_stays_tracked() {
        if skip_without_write_protect() {
            return;
        }
        let m = Mapping::anon(64, libc::PROT_NONE);
        // SAFETY: this test's own mapping; nothing uses its pages yet.
        let rc = unsafe {
            libc::mprotect(
                m.ptr.cast(),
                16 * page(),
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        assert_eq!(rc, 0);
        m.register_and_protect();
        assert_eq!(m.written(), vec![]);
        // SAFETY: pages 16..32 lie inside this test's own mapping (checked
        // by `page_ptr` for the first, 64 pages in all), and nothing uses
        // them yet, so making them accessible affects no one.
        let rc = unsafe {
            libc::mprotect(
                m.page_ptr(16).cast(),
                16 * page(),
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
        assert_eq!(rc, 0);
        assert_eq!(m.read(17), 0);
        m.write(20, 1);
        assert_eq!(m.written(), pages(&[20]));
    }

    /// 10. What the `FILE` and `PFNZERO` exclusions of
    ///     `written_since_protect` are for: pages that hold the file's data
    ///     or the zero page are never reported, even where their entries say
    ///     "not write-protected".
    #[test]
    fn file_and_zero_pages_are_never_written() {
        if skip_without_write_protect() {
            return;
        }
        // Armed anonymous memory: a zapped page loses its protection and
        // its data; it is a hole again, which is not reported (it reads
        // zeros, and whoever zapped it restores what it must), and reading
        // it maps the zero page, which is not reported either.
        let m = Mapping::anon(16, libc::PROT_READ | libc::PROT_WRITE);
        m.register_and_protect();
        m.write(3, 1);
        assert_eq!(m.written(), pages(&[3]));
        // SAFETY: advice on this test's own page; its contents become zero.
        let rc = unsafe { libc::madvise(m.page_ptr(3).cast(), page(), libc::MADV_DONTNEED) };
        assert_eq!(rc, 0);
        assert_eq!(m.written(), vec![]);
        assert_eq!(m.read(3), 0);
        assert_eq!(m.written(), vec![]);

        // A registered file mapping before arming: the pages only read are
        // the file's, the one never touched is a hole; nothing is reported.
        let data = image(8);
        let f = Mapping::memfd_private(&data);
        f.register();
        for i in 0..8 {
            if i != 4 {
                assert_eq!(f.read(i), data[i * page()]);
            }
        }
        assert_eq!(f.written(), vec![]);
        f.write(6, 9);
        assert_eq!(f.written(), pages(&[6]));
    }

    /// 11. Arming only the pages that hold data is enough for an exact
    ///     record: a page never touched is a hole, not reported, and its
    ///     first write makes a page without protection, reported. This is
    ///     what lets a reset protect just the pages it restored instead of
    ///     the whole memory, whose markers every later scan would walk.
    #[test]
    fn arming_the_pages_that_hold_data_is_exact() {
        if skip_without_write_protect() {
            return;
        }
        for file in [false, true] {
            let data = image(16);
            let m = if file {
                Mapping::memfd_private(&data)
            } else {
                Mapping::anon(16, libc::PROT_READ | libc::PROT_WRITE)
            };
            m.register();
            m.write(2, 1);
            m.write(3, 1);
            let _ = m.read(9);
            assert_eq!(m.written(), pages(&[2, 3]), "file: {file}");
            // Protect only what holds data, pages 2 and 3.
            // SAFETY: pages 2 and 3 lie inside this test's own mapping,
            // registered above and used by no one else, so protecting them
            // erases no one else's record of writes.
            unsafe { tracker().write_protect(m.page_ptr(2), 2 * page()).unwrap() };
            assert_eq!(m.written(), vec![], "file: {file}");
            m.write(12, 1);
            assert_eq!(m.written(), pages(&[12]), "file: {file}");
            m.write(3, 2);
            assert_eq!(m.written(), pages(&[3, 12]), "file: {file}");
            // A page only read stays unreported until it is written.
            m.write(9, 5);
            assert_eq!(m.written(), pages(&[3, 9, 12]), "file: {file}");
        }
    }

    /// A forked child gets its own pagemap (on the same, still close-on-exec
    /// descriptor) and no write protection.
    #[test]
    fn forked_child_scans_its_own_address_space() {
        let t = tracker();
        let m = Mapping::anon(16, libc::PROT_READ | libc::PROT_WRITE);
        m.write(3, 1);
        // Allocate before forking: the child should need no allocator.
        let mut out = Vec::with_capacity(16);
        // SAFETY: the child only runs the code below (system calls, writes
        // to its copy of `m`, no allocation on the success path) and leaves
        // with `_exit`, never returning into the test harness.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "{}", io::Error::last_os_error());
        if pid == 0 {
            let mut code = 0;
            m.write(5, 1);
            if t.anonymous_pages(m.ptr, m.len, &mut out).is_err() {
                code |= 1;
            } else if out.len() != 2
                || out[0] != (3 * page()..4 * page())
                || out[1] != (5 * page()..6 * page())
            {
                code |= 2;
            }
            // `write_protect_available` is the predicate that
            // `register_write_protect` refuses by. The child does not call
            // the latter: its refusal builds an error, which allocates and
            // may capture a backtrace under a lock that another test thread
            // can hold at the moment of the fork, and the child would wait
            // for it forever.
            if t.write_protect_available() {
                code |= 4;
            }
            // SAFETY: `fcntl(F_GETFD)` only reads descriptor flags.
            let fd_flags = unsafe { libc::fcntl(t.pagemap.as_raw_fd(), libc::F_GETFD) };
            if fd_flags < 0 || fd_flags & libc::FD_CLOEXEC == 0 {
                code |= 16;
            }
            // SAFETY: ends the child without running the parent's
            // destructors or the test harness.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for the child created above.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(rc, pid);
        assert!(libc::WIFEXITED(status), "child status {status:#x}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "child failure bits");
        // The parent's view is unchanged by the child's write.
        assert_eq!(m.anonymous(), pages(&[3]));
        assert!(!PAGEMAP_STALE.load(Ordering::Relaxed));
    }
}
