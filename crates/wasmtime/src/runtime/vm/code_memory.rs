//! Executable memory holding compiled code.

use super::sys::unix::mmap::{Mmap, host_page_size};
use anyhow::{Result, bail};
use std::ops::Range;
use wasmtime_environ::builtins::HostLibcall;
use wasmtime_environ::{AddressMapEntry, ExceptionTable, Relocation, TrapSite, TrapSiteKind};
use zerocopy::little_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// One entry of a trap table, in the form artifacts store it: the
/// instruction's offset in the text (little-endian) and its
/// [`TrapSiteKind::to_u8`] byte. Trap tables hold these, not
/// [`TrapSite`]s, so that the table of code run from a mapped artifact is
/// read where it lies in the file instead of being decoded and copied
/// (46,000 sites in sqlite3, a tenth of loading it).
#[repr(C)]
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
pub struct TrapSiteRecord {
    code_offset: U32,
    kind: u8,
}

impl TrapSiteRecord {
    /// Encodes `sites`, for [`CodeMemory::new`].
    pub fn table(sites: impl IntoIterator<Item = TrapSite>) -> Box<[TrapSiteRecord]> {
        sites.into_iter().map(TrapSiteRecord::new).collect()
    }

    /// Encodes `site`.
    pub fn new(site: TrapSite) -> TrapSiteRecord {
        TrapSiteRecord {
            code_offset: site.code_offset.into(),
            kind: site.kind.to_u8(),
        }
    }

    /// Offset of the instruction's first byte in the text.
    pub fn code_offset(&self) -> u32 {
        self.code_offset.get()
    }

    /// The same site where its code was copied to `code_offset`, its kind
    /// byte kept as it is.
    pub fn moved_to(&self, code_offset: u32) -> TrapSiteRecord {
        TrapSiteRecord {
            code_offset: code_offset.into(),
            kind: self.kind,
        }
    }

    /// What a fault there means; `None` for a byte that is no kind, which
    /// a [`CodeMemory`] never holds (it refuses such tables).
    pub fn kind(&self) -> Option<TrapSiteKind> {
        TrapSiteKind::from_u8(self.kind)
    }
}

/// One entry of a native-to-Wasm address map in the form artifacts store
/// it (little-endian offsets; [`AddressMapEntry`] decoded), for the same
/// reason as [`TrapSiteRecord`]: sqlite3's map has 115,000 entries.
#[repr(C)]
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
pub struct AddressMapRecord {
    code_offset: U32,
    wasm_offset: U32,
}

impl AddressMapRecord {
    /// Encodes `entry`.
    pub fn new(entry: AddressMapEntry) -> AddressMapRecord {
        AddressMapRecord {
            code_offset: entry.code_offset.into(),
            wasm_offset: entry.wasm_offset.into(),
        }
    }

    /// Offset in the text.
    pub fn code_offset(&self) -> u32 {
        self.code_offset.get()
    }

    /// Offset in the Wasm binary (`u32::MAX`: none).
    pub fn wasm_offset(&self) -> u32 {
        self.wasm_offset.get()
    }
}

/// A table a module keeps beside its code: records of its own, or a byte
/// range of the artifact file its code runs from
/// ([`CodeMemory::from_file_mapping`]), in the header and body before the
/// text, where the records lie ([`CodeMemory::records`]). The records are
/// plain bytes (any value is a valid record: [`TrapSiteRecord::kind`]
/// decodes on use), so a range needs no more than the bounds checked when
/// it is read.
#[derive(Debug)]
pub enum Records<T> {
    /// Memory of its own: compiled code, and artifacts loaded from bytes or
    /// whose code had to be copied.
    Owned(Box<[T]>),
    /// Where the artifact file is mapped.
    InArtifact(Range<usize>),
}

/// The records `records` stands for in `mmap`, whose text starts at
/// `text_offset`; `None` if a range is not before the text or not whole
/// records.
fn records_in<'a, T: FromBytes + KnownLayout + Immutable>(
    mmap: &'a Mmap,
    text_offset: usize,
    records: &'a Records<T>,
) -> Option<&'a [T]> {
    match records {
        Records::Owned(records) => Some(records),
        Records::InArtifact(range) => {
            <[T]>::ref_from_bytes(bytes_before(mmap, text_offset, range.clone())?).ok()
        }
    }
}

/// The bytes at `range` of `mmap`'s part before `text_offset`; `None` if
/// `range` reaches into the text.
fn bytes_before(mmap: &Mmap, text_offset: usize, range: Range<usize>) -> Option<&[u8]> {
    if range.start > range.end || range.end > text_offset {
        return None;
    }
    // SAFETY: the range lies in the mapping before the text, which is mapped
    // readable for the mapping's whole life and never written: relocations
    // patch the text only, and `from_file_mapping`'s caller promised that
    // nothing writes or truncates the file while the code memory lives.
    Some(unsafe { std::slice::from_raw_parts(mmap.as_ptr().add(range.start), range.len()) })
}

/// A block of machine code loaded into its own read-execute mapping, with
/// the trap sites that its faulting instructions stand for.
///
/// The bytes and the trap table never change after construction, so the
/// signal handler may read both without synchronization.
#[derive(Debug)]
pub struct CodeMemory {
    /// The mapping holding the text: a fresh anonymous one, or a private
    /// mapping of a whole precompiled-module file with the text at
    /// `text_offset`.
    mmap: Mmap,
    text_offset: usize,
    text_len: usize,
    /// Sorted by offset, every kind valid (checked at construction).
    trap_sites: Records<TrapSiteRecord>,
    /// The exception handlers of the text's calls (empty but for modules
    /// with `try_table`s), checked by the module that owns the code.
    exceptions: ExceptionTable,
}

impl CodeMemory {
    /// Copies `text` into fresh memory, patches `relocations` with the
    /// addresses of the host libcalls, and makes it executable.
    ///
    /// `trap_sites` must lie in the text, sorted by offset (as the compiler
    /// produces them).
    ///
    /// # Errors
    ///
    /// A relocation or trap site outside the text, trap sites out of order,
    /// an unknown trap kind or libcall, or a failure to map memory.
    pub fn new(
        text: &[u8],
        relocations: &[Relocation],
        trap_sites: Box<[TrapSiteRecord]>,
    ) -> Result<CodeMemory> {
        let page = host_page_size();
        let len = text.len().max(1).next_multiple_of(page);
        let mmap = Mmap::read_write_populated(len)?;
        // SAFETY: the mapping is fresh, read-write and at least `text.len()`
        // bytes long.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), mmap.as_ptr(), text.len()) };
        // SAFETY: `0..text.len()` starts on a page boundary and lies in the
        // mapping, which is read-write and was made above, so nothing else
        // refers to it.
        unsafe { CodeMemory::finish(mmap, 0..text.len(), relocations, Records::Owned(trap_sites)) }
    }

    /// Runs the text that sits at `text` in `file` (a private, read-only
    /// mapping of a whole precompiled-module file, from
    /// [`Mmap::map_file_private`]) in place: only the pages with libcall
    /// slots are copied, when they are patched. A trap table
    /// [`Records::InArtifact`] is a range of that file before the text.
    ///
    /// # Safety
    ///
    /// `text.start` must be a multiple of the host page size and `text`
    /// must lie in the mapping, and nothing may write or truncate the
    /// mapped file while the result lives (the text runs, and the trap
    /// table is read, straight from the mapping).
    ///
    /// # Errors
    ///
    /// As [`CodeMemory::new`].
    pub unsafe fn from_file_mapping(
        file: Mmap,
        text: Range<usize>,
        relocations: &[Relocation],
        trap_sites: Records<TrapSiteRecord>,
    ) -> Result<CodeMemory> {
        // SAFETY: the mapping is not executable yet, so nothing relies on
        // execute access; no pointer into the text has been handed out.
        // Making it writable lets the private mapping copy the pages that
        // relocations patch.
        unsafe { file.make_accessible(text.start, text.len())? };
        // SAFETY: our caller promised that `text` lies in `file` and starts
        // on a page boundary; it was made writable just above, and `file`
        // was moved in here, so nothing else refers to its text.
        unsafe { CodeMemory::finish(file, text, relocations, trap_sites) }
    }

    /// Patches the libcall slots, checks the trap sites, and makes `text`
    /// executable.
    ///
    /// # Safety
    ///
    /// `text` must lie in `mmap`, start on a page boundary, and be
    /// writable, with nothing else referring to it.
    unsafe fn finish(
        mmap: Mmap,
        text: Range<usize>,
        relocations: &[Relocation],
        trap_sites: Records<TrapSiteRecord>,
    ) -> Result<CodeMemory> {
        let text_len = text.len();
        // SAFETY: our `# Safety` has `text` inside `mmap`, so its start is
        // an offset within the mapping.
        let base = unsafe { mmap.as_ptr().add(text.start) };
        for reloc in relocations {
            let offset = reloc.offset as usize;
            if offset.checked_add(8).is_none_or(|end| end > text_len) {
                bail!("relocation at {offset:#x} is outside the text");
            }
            let addr = libcall_address(reloc.target)? as u64;
            // SAFETY: `offset + 8 <= text_len` (checked above), and our
            // `# Safety` makes the text writable with nothing else referring
            // to it, so this unaligned write races with no reader.
            unsafe { std::ptr::write_unaligned(base.add(offset).cast::<u64>(), addr.to_le()) };
        }
        let Some(sites) = records_in(&mmap, text.start, &trap_sites) else {
            bail!("the trap table is not whole records before the text");
        };
        // A loaded module's table has an entry per few instructions: one
        // pass without early exits finds whether anything is wrong, a
        // second says what. The compiler sorts its tables; a loader keeps
        // them as they are, and may keep them where they lie, so order is
        // checked, not made.
        let (mut last, mut wrong) = (0, false);
        for site in sites {
            wrong |= site.code_offset() < last || !TrapSiteKind::is_encoding(site.kind);
            last = site.code_offset();
        }
        if wrong || (!sites.is_empty() && last as usize >= text_len) {
            let mut last = 0;
            for site in sites {
                let offset = site.code_offset();
                if offset as usize >= text_len {
                    bail!("trap site at {offset:#x} is outside the text");
                }
                if site.kind().is_none() {
                    bail!("unknown trap code {:#x} at {offset:#x}", site.kind);
                }
                if offset < last {
                    bail!("the trap table is not sorted by offset (at {offset:#x})");
                }
                last = offset;
            }
        }
        // SAFETY: all bytes are written; from now on the text is only
        // executed and read.
        unsafe { mmap.make_executable(text.start, text_len.max(1))? };
        flush_icache(base, text_len);
        Ok(CodeMemory {
            mmap,
            text_offset: text.start,
            text_len,
            trap_sites,
            exceptions: ExceptionTable::default(),
        })
    }

    /// Address of the first byte of the text.
    pub fn text_start(&self) -> usize {
        self.mmap.as_ptr() as usize + self.text_offset
    }

    /// The text's bytes (with libcall slots patched).
    pub fn text(&self) -> &[u8] {
        // SAFETY: the text lies in the mapping, is readable for the
        // mapping's life and never written after construction.
        unsafe { std::slice::from_raw_parts(self.text_start() as *const u8, self.text_len) }
    }

    /// The address range of the text.
    pub fn text_range(&self) -> Range<usize> {
        self.text_start()..self.text_start() + self.text_len
    }

    /// The trap sites, sorted by offset, every kind valid.
    pub fn trap_sites(&self) -> &[TrapSiteRecord] {
        self.records(&self.trap_sites)
            .expect("a code memory's trap table was checked when it was made")
    }

    /// Whether the trap table is read where the artifact file lies.
    #[cfg(test)]
    pub fn trap_sites_in_artifact(&self) -> bool {
        matches!(self.trap_sites, Records::InArtifact(_))
    }

    /// The records `records` stands for: its own, or those in the range of
    /// this code's artifact file; `None` if that range is not whole records
    /// before the text.
    pub fn records<'a, T: FromBytes + KnownLayout + Immutable>(
        &'a self,
        records: &'a Records<T>,
    ) -> Option<&'a [T]> {
        records_in(&self.mmap, self.text_offset, records)
    }

    /// Attaches the exception table of the text's calls, before the code
    /// is shared (the unwinder reads it without synchronization).
    pub fn set_exceptions(&mut self, exceptions: ExceptionTable) {
        self.exceptions = exceptions;
    }

    /// The exception handlers of the text's calls.
    pub fn exceptions(&self) -> &ExceptionTable {
        &self.exceptions
    }
}

/// Binary search of a sorted trap table; usable from a signal handler (no
/// allocation, no locks).
pub fn lookup_trap_site(sites: &[TrapSiteRecord], offset: u32) -> Option<TrapSiteKind> {
    sites
        .binary_search_by_key(&offset, |t| t.code_offset())
        .ok()
        .and_then(|i| sites[i].kind())
}

/// Makes freshly written code visible to instruction fetch.
#[cfg(target_arch = "x86_64")]
fn flush_icache(_start: *mut u8, _len: usize) {
    // x86 keeps instruction caches coherent with data writes; crossing the
    // `mprotect` system call serializes the pipeline.
}

/// Makes freshly written code visible to instruction fetch.
///
/// UNVERIFIED on hardware: cleans the data cache and invalidates the
/// instruction cache line by line, as the Arm ARM prescribes for
/// self-modifying code.
#[cfg(target_arch = "aarch64")]
fn flush_icache(start: *mut u8, len: usize) {
    use std::arch::asm;
    let ctr: u64;
    // SAFETY: CTR_EL0 is readable from EL0 on Linux.
    unsafe { asm!("mrs {0}, ctr_el0", out(reg) ctr, options(nomem, nostack)) };
    let dline = 4usize << ((ctr >> 16) & 0xf);
    let iline = 4usize << (ctr & 0xf);
    let begin = start as usize;
    let end = begin + len;
    let mut addr = begin & !(dline - 1);
    while addr < end {
        // SAFETY: cache maintenance on mapped addresses has no other effect.
        unsafe { asm!("dc cvau, {0}", in(reg) addr, options(nostack)) };
        addr += dline;
    }
    // SAFETY: barrier instructions only.
    unsafe { asm!("dsb ish", options(nostack)) };
    let mut addr = begin & !(iline - 1);
    while addr < end {
        // SAFETY: invalidating the instruction-cache line of an address in
        // the text we just wrote (still mapped) changes no memory and no
        // register; it only makes instruction fetch see the new bytes.
        unsafe { asm!("ic ivau, {0}", in(reg) addr, options(nostack)) };
        addr += iline;
    }
    // SAFETY: barrier instructions only.
    unsafe { asm!("dsb ish", "isb", options(nostack)) };
}

/// The address of the host implementation of `libcall`.
fn libcall_address(libcall: HostLibcall) -> Result<usize> {
    use super::libcalls::math;
    Ok(match libcall {
        HostLibcall::FloorF32 => math::floor_f32 as *const () as usize,
        HostLibcall::FloorF64 => math::floor_f64 as *const () as usize,
        HostLibcall::CeilF32 => math::ceil_f32 as *const () as usize,
        HostLibcall::CeilF64 => math::ceil_f64 as *const () as usize,
        HostLibcall::TruncF32 => math::trunc_f32 as *const () as usize,
        HostLibcall::TruncF64 => math::trunc_f64 as *const () as usize,
        HostLibcall::NearestF32 => math::nearest_f32 as *const () as usize,
        HostLibcall::NearestF64 => math::nearest_f64 as *const () as usize,
        HostLibcall::FmaF32 => math::fma_f32 as *const () as usize,
        HostLibcall::FmaF64 => math::fma_f64 as *const () as usize,
        #[cfg(target_arch = "x86_64")]
        HostLibcall::X86Pshufb => math::x86_pshufb as *const () as usize,
        #[allow(unreachable_patterns, reason = "only reachable on non-x86 hosts")]
        other => bail!("libcall {other:?} is not available on this host"),
    })
}
