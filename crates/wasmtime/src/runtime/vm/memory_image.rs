//! Copy-on-write images of linear memories' initial contents.
//!
//! A defined memory whose active data segments all sit at constant offsets
//! inside its minimum size gets one *image*: the bytes those segments
//! produce, from the first written host page to the last, in a sealed
//! memfd. Instantiation maps the memfd `MAP_PRIVATE` over that part of the
//! fresh memory instead of copying the segments, so every instance shares
//! the image's pages until it writes one, and a reset can send a written
//! page back to the image with one `madvise` or copy it from the image's
//! read-only view.
//!
//! A memory gets no image (its segments are copied as before) when a
//! segment's offset reads a global, when a segment does not fit (the copy
//! path traps at the right segment), when it has no segments, or when the
//! image would be mostly holes (more than [`MAX_SPARSE_FACTOR`] times the
//! data it holds, beyond [`SMALL_IMAGE`]): mapping a large file of zeros
//! would cost more address space and page cache than it saves.

use super::sys::unix::mmap::{Mmap, host_page_size};
use anyhow::{Context, Result, bail};
use std::io::IoSlice;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, OnceLock};
use wasmtime_environ::{
    ConstExpr, DataMode, DefinedMemoryIndex, EntityRef, ModuleInfo, PrimaryMap, WASM_PAGE_SIZE,
};

/// Images up to this size are built however sparse they are.
const SMALL_IMAGE: usize = 1 << 20;

/// Beyond [`SMALL_IMAGE`], an image may be at most this many times larger
/// than the data bytes it holds.
const MAX_SPARSE_FACTOR: usize = 4;

/// One memory's initial contents from `offset` on, in a sealed memfd.
#[derive(Debug)]
pub struct MemoryImage {
    fd: OwnedFd,
    offset: usize,
    len: usize,
    /// A read-only shared mapping of the memfd, for resets that copy pages
    /// back from it; made when the first one needs it, since most images
    /// (every one in a `wasmtime run`) never serve a reset.
    view: OnceLock<Mmap>,
}

impl MemoryImage {
    /// Byte offset in linear memory where the image begins (host-page
    /// aligned).
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Length in bytes (a multiple of the host page size).
    pub fn len(&self) -> usize {
        self.len
    }

    /// The memfd, for mapping.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The image's bytes of the `page`-byte page at linear-memory offset
    /// `at`, or `None` where the image does not cover that page.
    ///
    /// # Errors
    ///
    /// If the image's view cannot be mapped (the first call only).
    pub fn page(&self, at: usize, page: usize) -> Result<Option<&[u8]>> {
        let Some(start) = at.checked_sub(self.offset) else {
            return Ok(None);
        };
        Ok(self.bytes()?.get(start..start + page))
    }

    /// The image's bytes: linear-memory bytes `offset..offset + len`.
    ///
    /// # Errors
    ///
    /// If the image's view cannot be mapped (the first call only).
    pub fn bytes(&self) -> Result<&[u8]> {
        let view = match self.view.get() {
            Some(view) => view,
            None => {
                let view = Mmap::view_file(&self.fd, self.len)?;
                // Two threads may map it at once; the loser's mapping is
                // dropped here.
                self.view.get_or_init(|| view)
            }
        };
        if view.len() == 0 {
            return Ok(&[]);
        }
        // SAFETY: the view is a read-only shared mapping of a memfd sealed
        // against writes and resizing, so its `len` bytes stay mapped and
        // unchanged while `self` (which owns the view) lives.
        Ok(unsafe { std::slice::from_raw_parts(view.as_ptr(), view.len()) })
    }

    /// An image of `len` bytes (a multiple of the host page size) starting
    /// at linear-memory offset `offset`, holding each `(at, bytes)` of
    /// `pieces` at `at` bytes into it, later pieces over earlier ones, and
    /// zeros elsewhere.
    ///
    /// The pieces go into the memfd where they belong ([`write_pieces`]),
    /// without assembling the image in a buffer first: that faulted in,
    /// zeroed and copied every byte once more before the write (700 KB for
    /// libsodium-sign's image).
    fn new(offset: usize, len: usize, pieces: &[(usize, &[u8])]) -> Result<MemoryImage> {
        let name = c"wasm-memory-image";
        // SAFETY: `memfd_create` takes a NUL-terminated name and flags and
        // returns a new descriptor or -1; it touches no memory of ours.
        let raw = unsafe {
            libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        if raw < 0 {
            bail!(
                "failed to create a memory image: {}",
                std::io::Error::last_os_error()
            );
        }
        // SAFETY: `raw` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let file = std::fs::File::from(fd);
        debug_assert!(pieces.iter().all(|(at, bytes)| at + bytes.len() <= len));
        write_pieces(&file, len, pieces).context("failed to write a memory image")?;
        let fd = OwnedFd::from(file);
        let seals =
            libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
        // SAFETY: `fcntl(F_ADD_SEALS)` on our own descriptor only changes
        // what later writers of the file may do.
        let rc = unsafe {
            libc::fcntl(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                libc::F_ADD_SEALS,
                seals,
            )
        };
        if rc != 0 {
            bail!(
                "failed to seal a memory image: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(MemoryImage {
            fd,
            offset,
            len,
            view: OnceLock::new(),
        })
    }
}

/// Gaps between consecutive data segments up to this many bytes are
/// written as zeros in the same system call; longer ones start a new call
/// and stay holes, which cost the memfd no pages.
const ZERO_FILL_GAP: usize = 16 * 1024;

/// What a gap of up to [`ZERO_FILL_GAP`] bytes is written from.
static ZEROS: [u8; ZERO_FILL_GAP] = [0; ZERO_FILL_GAP];

/// The most buffers one `pwritev` takes (Linux's `UIO_MAXIOV`).
const MAX_IOVECS: usize = 1024;

/// Makes `file` `len` bytes long, holding each `(at, bytes)` of `pieces`
/// at `at`, later pieces over earlier ones, and zeros elsewhere.
///
/// Toolchains emit a module's segments in address order without overlaps,
/// often dozens of them close together; those are written with one
/// `pwritev` per run of segments whose gaps are small (quicksort's 23
/// segments took 23 `pwrite`s, about 13 µs of its first instantiation),
/// and when the zeros before the first and after the last are small too,
/// that one call also gives the file its length. Segments that overlap or
/// go backwards are written one by one, in order, which is what "later
/// over earlier" needs.
fn write_pieces(
    file: &std::fs::File,
    len: usize,
    pieces: &[(usize, &[u8])],
) -> std::io::Result<()> {
    let in_order = pieces.windows(2).all(|w| w[0].0 + w[0].1.len() <= w[1].0);
    if !in_order {
        file.set_len(len as u64)?;
        for (at, bytes) in pieces {
            file.write_all_at(bytes, *at as u64)?;
        }
        return Ok(());
    }
    // A run open at offset 0 with nothing in it yet, so that the zeros in
    // front of a first segment close to the start are written with it.
    let mut run: Vec<IoSlice<'_>> = Vec::new();
    let (mut run_start, mut run_end) = (0, 0);
    let mut file_end = 0;
    let non_empty = pieces.iter().filter(|(_, bytes)| !bytes.is_empty());
    for &(at, bytes) in non_empty.chain(std::iter::once(&(len, &[][..]))) {
        if at - run_end > ZERO_FILL_GAP || run.len() + 2 > MAX_IOVECS {
            if !run.is_empty() {
                write_all_vectored_at(file, &mut run, run_start)?;
                file_end = file_end.max(run_end);
            }
            run.clear();
            (run_start, run_end) = (at, at);
        }
        if at > run_end {
            run.push(IoSlice::new(&ZEROS[..at - run_end]));
        }
        if !bytes.is_empty() {
            run.push(IoSlice::new(bytes));
        }
        run_end = at + bytes.len();
    }
    if !run.is_empty() {
        write_all_vectored_at(file, &mut run, run_start)?;
        file_end = file_end.max(run_end);
    }
    if file_end < len {
        file.set_len(len as u64)?;
    }
    Ok(())
}

/// Writes all of `buffers`, one after another, into `file` from byte `at`
/// on, with as few `pwritev` calls as the kernel allows.
fn write_all_vectored_at(
    file: &std::fs::File,
    mut buffers: &mut [IoSlice<'_>],
    mut at: usize,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    while !buffers.is_empty() {
        let count = buffers.len().min(MAX_IOVECS);
        // SAFETY: `IoSlice` is ABI-compatible with `struct iovec` on Unix
        // (std guarantees it), and the first `count` of `buffers` are live
        // slices the kernel only reads; `file` is an open descriptor.
        let written = unsafe {
            libc::pwritev(
                file.as_raw_fd(),
                buffers.as_ptr().cast::<libc::iovec>(),
                count as libc::c_int,
                at as libc::off_t,
            )
        };
        match written {
            n if n > 0 => {
                IoSlice::advance_slices(&mut buffers, n as usize);
                at += n as usize;
            }
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            _ => {
                let error = std::io::Error::last_os_error();
                if error.kind() != std::io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
    Ok(())
}

/// The images of a module's defined memories, and which active data
/// segments they already hold.
#[derive(Debug, Default)]
pub struct ModuleImages {
    memories: PrimaryMap<DefinedMemoryIndex, Option<Arc<MemoryImage>>>,
    /// By data index: whether the segment's bytes are in an image (so
    /// instantiation does not copy them).
    in_image: Vec<bool>,
}

impl ModuleImages {
    /// No images: every segment is copied.
    pub fn none() -> ModuleImages {
        ModuleImages::default()
    }

    /// Builds the images `info`'s memories can have; `binary` is what `info`
    /// was translated from, which holds the data segments' bytes.
    ///
    /// # Errors
    ///
    /// If a memfd cannot be created, written, sealed or mapped.
    pub fn build(info: &ModuleInfo, binary: &[u8]) -> Result<ModuleImages> {
        let page = host_page_size();
        let mut images = ModuleImages {
            memories: PrimaryMap::new(),
            in_image: vec![false; info.data.len()],
        };
        for (memory, ty) in info
            .memories
            .iter()
            .skip(info.num_imported_memories as usize)
        {
            let minimum = ty.minimum.saturating_mul(WASM_PAGE_SIZE);
            let mut segments = Vec::new();
            let mut imageable = true;
            for (index, segment) in info.data.iter() {
                let DataMode::Active {
                    memory: target,
                    offset,
                } = &segment.mode
                else {
                    continue;
                };
                if *target != memory {
                    continue;
                }
                let start = constant_offset(offset);
                let len = segment.range.len() as u64;
                match start {
                    Some(start) if start.checked_add(len).is_some_and(|end| end <= minimum) => {
                        segments.push((index, start as usize, segment.range.clone()));
                    }
                    _ => imageable = false,
                }
            }
            let image = if imageable && !segments.is_empty() {
                let lo = segments.iter().map(|s| s.1).min().unwrap_or(0) / page * page;
                let hi = segments
                    .iter()
                    .map(|s| s.1 + s.2.len())
                    .max()
                    .unwrap_or(0)
                    .next_multiple_of(page);
                let data: usize = segments.iter().map(|s| s.2.len()).sum();
                let span = hi - lo;
                if data == 0 || (span > SMALL_IMAGE && span / MAX_SPARSE_FACTOR > data) {
                    None
                } else {
                    let pieces: Vec<(usize, &[u8])> = segments
                        .iter()
                        .map(|(_, start, range)| (start - lo, &binary[range.clone()]))
                        .collect();
                    for (index, _, _) in &segments {
                        images.in_image[index.index()] = true;
                    }
                    Some(Arc::new(MemoryImage::new(lo, span, &pieces)?))
                }
            } else {
                None
            };
            let defined = info
                .defined_memory_index(memory)
                .context("defined memory without a defined index")?;
            let pushed = images.memories.push(image);
            debug_assert_eq!(pushed, defined);
        }
        Ok(images)
    }

    /// The image of defined memory `index`, if it has one.
    pub fn memory(&self, index: DefinedMemoryIndex) -> Option<&Arc<MemoryImage>> {
        self.memories.get(index)?.as_ref()
    }

    /// Whether active data segment `index` is already in an image.
    pub fn holds_segment(&self, index: wasmtime_environ::DataIndex) -> bool {
        self.in_image.get(index.index()).copied().unwrap_or(false)
    }
}

/// The value of a segment offset that needs no instance (constants and
/// extended-const arithmetic on them), as an unsigned 32-bit offset; `None`
/// when it reads a global (or is malformed).
fn constant_offset(expr: &ConstExpr) -> Option<u64> {
    let value = super::instance::eval_const_expr(
        expr,
        |_| bail!("a segment offset is never a reference"),
        |_| bail!("reads a global: needs an instance"),
    )
    .ok()?;
    Some(u64::from(value.get_i32() as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The images of the module `wat`.
    fn images_of(wat: &str) -> ModuleImages {
        let bytes = wat::parse_str(wat).unwrap();
        let info = wasmtime_environ::ModuleTranslation::new(
            wasmtime_environ::wasmparser::WasmFeatures::default(),
            &bytes,
        )
        .unwrap()
        .module;
        ModuleImages::build(&info, &bytes).unwrap()
    }

    #[test]
    fn constant_segments_make_an_image() {
        let images = images_of(
            r#"(module (memory 2)
                 (data (i32.const 10) "ab")
                 (data (i32.const 70000) "cd")
                 (data (i32.const 11) "Z"))"#,
        );
        let image = images.memory(DefinedMemoryIndex::new(0)).unwrap();
        assert_eq!(image.offset(), 0);
        assert_eq!(image.len() % host_page_size(), 0);
        let bytes = image.bytes().unwrap();
        assert_eq!(
            &bytes[10..12],
            b"aZ",
            "later segments overwrite earlier ones"
        );
        assert_eq!(&bytes[70000..70002], b"cd");
        assert!((0..3).all(|i| images.holds_segment(wasmtime_environ::DataIndex::new(i))));
    }

    #[test]
    fn global_offsets_and_overflow_prevent_an_image() {
        let images = images_of(
            r#"(module (global i32 (i32.const 0)) (memory 1)
                 (data (global.get 0) "ab"))"#,
        );
        assert!(images.memory(DefinedMemoryIndex::new(0)).is_none());
        assert!(!images.holds_segment(wasmtime_environ::DataIndex::new(0)));
        let images = images_of(r#"(module (memory 1) (data (i32.const 65535) "ab"))"#);
        assert!(images.memory(DefinedMemoryIndex::new(0)).is_none());
    }

    #[test]
    fn sparse_images_are_refused() {
        let images = images_of(
            r#"(module (memory 100)
                 (data (i32.const 0) "a")
                 (data (i32.const 6000000) "b"))"#,
        );
        assert!(images.memory(DefinedMemoryIndex::new(0)).is_none());
    }

    #[test]
    fn image_offset_is_page_aligned() {
        let images = images_of(r#"(module (memory 1) (data (i32.const 9000) "xyz"))"#);
        let image = images.memory(DefinedMemoryIndex::new(0)).unwrap();
        let page = host_page_size();
        assert_eq!(image.offset(), 9000 / page * page);
        assert_eq!(
            &image.bytes().unwrap()[9000 - image.offset()..][..3],
            b"xyz"
        );
    }

    /// The image `MemoryImage::new` writes, against the same pieces laid
    /// into a zeroed buffer one after another.
    fn check_pieces(what: &str, len: usize, pieces: &[(usize, Vec<u8>)]) {
        let mut want = vec![0u8; len];
        for (at, bytes) in pieces {
            want[*at..*at + bytes.len()].copy_from_slice(bytes);
        }
        let borrowed: Vec<(usize, &[u8])> =
            pieces.iter().map(|(at, b)| (*at, b.as_slice())).collect();
        let image = MemoryImage::new(0, len, &borrowed).unwrap();
        assert_eq!(image.len(), len, "{what}");
        let file = std::fs::File::from(image.fd().try_clone().unwrap());
        assert_eq!(
            file.metadata().unwrap().len(),
            len as u64,
            "{what}: file length"
        );
        let first_wrong = image
            .bytes()
            .unwrap()
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b);
        assert_eq!(first_wrong, None, "{what}: first wrong byte");
    }

    #[test]
    fn pieces_land_where_they_belong() {
        let page = host_page_size();
        let len = 64 * page;
        let filled = |n: usize, byte: u8| vec![byte; n];
        check_pieces(
            "in order, small and large gaps, empty pieces",
            len,
            &[
                (3, filled(10, 1)),
                (13, filled(5, 2)),
                (20, Vec::new()),
                (100, filled(7, 3)),
                (100 + 7 + ZERO_FILL_GAP, filled(9, 4)),
                (
                    100 + 7 + ZERO_FILL_GAP + 9 + ZERO_FILL_GAP + 1,
                    filled(2, 5),
                ),
                (len - 4, filled(4, 6)),
            ],
        );
        check_pieces(
            "from the first byte to the last",
            len,
            &[(0, filled(10, 1)), (len - 10, filled(10, 2))],
        );
        check_pieces(
            "holes before the first and after the last",
            len,
            &[
                (ZERO_FILL_GAP + 1, filled(10, 1)),
                (4 * ZERO_FILL_GAP, filled(10, 2)),
            ],
        );
        check_pieces(
            "small zeros at both ends",
            2 * page,
            &[(100, filled(10, 1))],
        );
        check_pieces(
            "overlapping: later over earlier",
            len,
            &[(10, filled(20, 1)), (15, filled(3, 2)), (12, filled(1, 3))],
        );
        check_pieces(
            "out of order",
            len,
            &[(5000, filled(10, 1)), (10, filled(10, 2))],
        );
        let many: Vec<(usize, Vec<u8>)> = (0..3 * MAX_IOVECS)
            .map(|i| (i * 40, filled(3 + i % 30, (i % 251) as u8 + 1)))
            .collect();
        check_pieces("more pieces than one call takes", len, &many);
    }
}
