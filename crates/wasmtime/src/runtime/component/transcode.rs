//! The string transcoder builtins that FACT adapter modules import, as
//! core host functions over the two memories involved.
//!
//! Upstream runs these as libcalls on raw host pointers and relies on the
//! adapter having bounds-checked every range first; a few of its internal
//! assertions (alignment, overlap, buffer sizes) would panic on arguments
//! the adapter never produces. Here the arguments are re-checked and every
//! such case is an error instead, worded as upstream's panic or trap is, so
//! differential runs still compare "failed" with "failed".

use crate::Val as CoreVal;
use crate::component::info::Transcode;
use anyhow::{Result, anyhow, bail};
use core::ops::Range;

/// The memories a transcoder reads from and writes to. `same` is true when
/// both are the same memory (then `src` and `dst` return the same bytes).
pub(crate) trait TranscodeMemories {
    fn same(&self) -> bool;
    fn src(&mut self) -> &[u8];
    fn dst(&mut self) -> &mut [u8];
}

/// Set in a compact-UTF-16 string's length when it is stored as UTF-16.
const UTF16_TAG: u32 = 1 << 31;

// Upstream's `format_err!` texts, which is what a guest sees on a trap.
const INVALID_UTF8: &str = "invalid utf8 encoding";
const INVALID_UTF16: &str = "invalid utf16 encoding";
// The trap the adapter raises for a string outside its memory; upstream
// never gets that far, so this is what the same guest bug reports there.
const OUT_OF_BOUNDS: &str = "string content out-of-bounds";

/// The core signature of `op` as (params, results), all `i32` for 32-bit
/// memories.
pub(crate) fn signature(op: Transcode) -> (usize, usize) {
    use Transcode::*;
    match op {
        CopyUtf8 | CopyUtf16 | CopyLatin1 | Latin1ToUtf16 => (3, 0),
        Utf8ToUtf16 | Utf16ToCompactProbablyUtf16 => (3, 1),
        Utf8ToLatin1 | Utf16ToLatin1 => (3, 2),
        Latin1ToUtf8 | Utf16ToUtf8 => (5, 2),
        Utf8ToCompactUtf16 | Utf16ToCompactUtf16 => (5, 1),
    }
}

/// Bytes per code unit of (source, destination).
fn unit_sizes(op: Transcode) -> (u32, u32) {
    use Transcode::*;
    match op {
        CopyUtf8 | CopyLatin1 | Latin1ToUtf8 | Utf8ToLatin1 => (1, 1),
        CopyUtf16 | Utf16ToCompactProbablyUtf16 | Utf16ToCompactUtf16 => (2, 2),
        Latin1ToUtf16 | Utf8ToUtf16 | Utf8ToCompactUtf16 => (1, 2),
        Utf16ToLatin1 | Utf16ToUtf8 => (2, 1),
    }
}

/// Runs transcoder `op` with the core arguments the adapter passed, writing
/// the core results.
pub(crate) fn transcode(
    op: Transcode,
    mems: &mut dyn TranscodeMemories,
    args: &[CoreVal],
    results: &mut [CoreVal],
) -> Result<()> {
    let (nparams, nresults) = signature(op);
    if args.len() != nparams || results.len() != nresults {
        bail!(
            "transcoder {op:?} takes {nparams} arguments and returns {nresults} results, \
             got {} and room for {}",
            args.len(),
            results.len()
        );
    }
    let mut params = [0u32; 5];
    for (param, arg) in params.iter_mut().zip(args) {
        // The adapter passes addresses and lengths as i32 and upstream
        // zero-extends them, so the bits are read as unsigned.
        *param = match arg {
            CoreVal::I32(v) => *v as u32,
            #[allow(unreachable_patterns)]
            other => bail!("transcoder {op:?} expects i32 arguments, got {other:?}"),
        };
    }
    let src_ptr = params[0];
    let src_len = params[1];
    let dst_ptr = params[2];
    // The three-argument forms size the destination by the source's code
    // units.
    let (dst_len, extra) = if nparams == 5 {
        (params[3], params[4])
    } else {
        (src_len, 0)
    };

    // Same order as upstream: its shims check 16-bit pointers' alignment
    // (source, then destination) before the body asserts no overlap.
    let (src_unit, dst_unit) = unit_sizes(op);
    if (src_unit == 2 && src_ptr % 2 != 0) || (dst_unit == 2 && dst_ptr % 2 != 0) {
        bail!("unaligned 16-bit pointer");
    }
    let src_range = byte_range(mems.src().len(), src_ptr, src_len, src_unit)?;
    let dst_range = byte_range(mems.dst().len(), dst_ptr, dst_len, dst_unit)?;
    if mems.same() {
        check_no_overlap(&src_range, &dst_range)?;
    }

    // Copied out because `src` and `dst` cannot be borrowed at once, and
    // with one memory they are the same bytes.
    let src = mems.src()[src_range].to_vec();
    let dst = &mut mems.dst()[dst_range];

    use Transcode::*;
    let out: [u32; 2] = match op {
        CopyUtf8 => {
            core::str::from_utf8(&src).map_err(|_| anyhow!(INVALID_UTF8))?;
            dst.copy_from_slice(&src);
            [0, 0]
        }
        CopyUtf16 => {
            utf16_to_utf16(&src, dst)?;
            [0, 0]
        }
        CopyLatin1 => {
            dst.copy_from_slice(&src);
            [0, 0]
        }
        Latin1ToUtf16 => {
            for (i, b) in src.iter().enumerate() {
                put_u16(dst, i, u16::from(*b));
            }
            [0, 0]
        }
        Utf8ToUtf16 => {
            let s = core::str::from_utf8(&src).map_err(|_| anyhow!(INVALID_UTF8))?;
            [utf8_into_utf16(s, dst), 0]
        }
        Latin1ToUtf8 => latin1_to_utf8(&src, dst, extra != 0),
        Utf16ToUtf8 => utf16_to_utf8(&src, dst, extra != 0)?,
        Utf16ToCompactProbablyUtf16 => {
            if utf16_to_utf16(&src, dst)? {
                // Upstream deflates in place, leaving the UTF-16 bytes past
                // the first `src_len` as they were; the adapter shrinks the
                // buffer afterwards but the guest's memory still holds them.
                for i in 0..src_len as usize {
                    dst[i] = dst[2 * i];
                }
                [src_len, 0]
            } else {
                [src_len | UTF16_TAG, 0]
            }
        }
        Utf8ToLatin1 => utf8_to_latin1(&src, dst),
        Utf16ToLatin1 => {
            let mut n = 0;
            for (i, unit) in units(&src).enumerate() {
                match u8::try_from(unit) {
                    Ok(b) => dst[i] = b,
                    Err(_) => break,
                }
                n += 1;
            }
            [n, n]
        }
        Utf8ToCompactUtf16 => {
            let rest = inflate_latin1(dst, extra)?;
            let s = core::str::from_utf8(&src).map_err(|_| anyhow!(INVALID_UTF8))?;
            [utf8_into_utf16(s, rest).wrapping_add(extra), 0]
        }
        Utf16ToCompactUtf16 => {
            let rest = inflate_latin1(dst, extra)?;
            utf16_to_utf16(&src, rest)?;
            // Upstream reports the source's unit count, not what it wrote;
            // for valid UTF-16 the two agree.
            [src_len.wrapping_add(extra), 0]
        }
    };
    for (result, value) in results.iter_mut().zip(out) {
        *result = CoreVal::I32(value as i32);
    }
    Ok(())
}

/// The bytes `[ptr, ptr + units * unit)` of a memory of `mem_len` bytes.
fn byte_range(mem_len: usize, ptr: u32, units: u32, unit: u32) -> Result<Range<usize>> {
    // In u64 neither the product nor the sum of two u32-sized values can
    // overflow.
    let start = u64::from(ptr);
    let end = start + u64::from(units) * u64::from(unit);
    if end > mem_len as u64 {
        bail!(OUT_OF_BOUNDS);
    }
    // Both are at most `mem_len`, so they fit in usize.
    Ok(start as usize..end as usize)
}

/// Upstream's `assert_no_overlap`, including its asymmetry for empty
/// ranges: an empty source at or inside a non-empty destination fails, and
/// so does an empty destination strictly inside the source.
fn check_no_overlap(src: &Range<usize>, dst: &Range<usize>) -> Result<()> {
    if src.start < dst.start {
        if src.end > dst.start {
            bail!("assertion failed: a_end <= b_start");
        }
    } else if dst.end > src.start {
        bail!("assertion failed: b_end <= a_start");
    }
    Ok(())
}

/// Little-endian code units, as the canonical ABI stores them.
fn units(bytes: &[u8]) -> impl Iterator<Item = u16> + '_ {
    bytes
        .chunks_exact(2)
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]))
}

fn put_u16(dst: &mut [u8], index: usize, unit: u16) {
    dst[2 * index..2 * index + 2].copy_from_slice(&unit.to_le_bytes());
}

/// Decodes the scalar value starting at code unit `i` of `src`, returning it
/// and how many units it took.
fn decode_utf16_at(src: &[u16], i: usize) -> Result<(char, usize)> {
    let unit = src[i];
    if let Some(c) = char::from_u32(u32::from(unit)) {
        return Ok((c, 1));
    }
    // A surrogate is only valid as a lead followed by a trail; a lone trail,
    // or a lead at the end or before a non-trail, is an error.
    if (0xd800..0xdc00).contains(&unit)
        && let Some(&trail) = src.get(i + 1)
        && (0xdc00..0xe000).contains(&trail)
        && let Some(c) = char::from_u32(
            0x10000 + ((u32::from(unit) - 0xd800) << 10) + (u32::from(trail) - 0xdc00),
        )
    {
        return Ok((c, 2));
    }
    bail!(INVALID_UTF16)
}

/// Re-encodes UTF-16 `src` into `dst` unit by unit, returning whether every
/// scalar fits in Latin-1.
///
/// Like upstream this writes as it validates, so on an unpaired surrogate
/// the units before it have already been written.
fn utf16_to_utf16(src: &[u8], dst: &mut [u8]) -> Result<bool> {
    let src: Vec<u16> = units(src).collect();
    let dst_units = dst.len() / 2;
    let mut all_latin1 = true;
    let (mut read, mut written) = (0, 0);
    while read < src.len() {
        let (c, n) = decode_utf16_at(&src, read)?;
        all_latin1 &= u32::from(c) <= 0xff;
        if dst_units - written < n {
            // Only reachable through `Utf16ToCompactUtf16` with a destination
            // shorter than the adapter ever passes; upstream panics in
            // `char::encode_utf16` with this text.
            bail!(
                "encode_utf16: need {n} bytes to encode U+{:04X} but buffer has just {}",
                u32::from(c),
                dst_units - written
            );
        }
        let mut buf = [0u16; 2];
        for unit in c.encode_utf16(&mut buf) {
            put_u16(dst, written, *unit);
            written += 1;
        }
        read += n;
    }
    Ok(all_latin1)
}

/// Writes as many UTF-16 units of `s` as fit in `dst` (silently truncating,
/// as upstream's `zip` does) and returns how many were written.
fn utf8_into_utf16(s: &str, dst: &mut [u8]) -> u32 {
    let mut written = 0;
    for (i, unit) in s.encode_utf16().take(dst.len() / 2).enumerate() {
        put_u16(dst, i, unit);
        written += 1;
    }
    written
}

/// Latin-1 to UTF-8, stopping at the first byte that does not fit in what
/// is left of `dst` (or, in the first pass, at the first non-ASCII byte).
/// Returns (bytes read, bytes written).
fn latin1_to_utf8(src: &[u8], dst: &mut [u8], first_pass: bool) -> [u32; 2] {
    let (mut read, mut written) = (0, 0);
    for &b in src {
        if b >= 0x80 {
            if first_pass || dst.len() - written < 2 {
                break;
            }
            dst[written] = 0xc0 | (b >> 6);
            dst[written + 1] = 0x80 | (b & 0x3f);
            written += 2;
        } else {
            if written == dst.len() {
                break;
            }
            dst[written] = b;
            written += 1;
        }
        read += 1;
    }
    // Both are bounded by u32 lengths.
    [read as u32, written as u32]
}

/// UTF-16 to UTF-8, stopping before a scalar that does not fit in what is
/// left of `dst` (or, in the first pass, before the first non-ASCII one).
/// Returns (code units read, bytes written).
fn utf16_to_utf8(src: &[u8], dst: &mut [u8], first_pass: bool) -> Result<[u32; 2]> {
    let src: Vec<u16> = units(src).collect();
    let (mut read, mut written) = (0, 0);
    while read < src.len() {
        // Upstream validates a scalar before deciding to stop at it, so a
        // bad surrogate fails even where the pass would have ended there.
        let (c, n) = decode_utf16_at(&src, read)?;
        if first_pass && u32::from(c) >= 0x80 {
            break;
        }
        let len = c.len_utf8();
        if dst.len() - written < len {
            break;
        }
        c.encode_utf8(&mut dst[written..written + len]);
        written += len;
        read += n;
    }
    Ok([read as u32, written as u32])
}

/// Deflates the longest prefix of `src` made of ASCII bytes and well-formed
/// two-byte sequences for U+0080..=U+00FF (lead byte 0xC2 or 0xC3); whatever
/// follows, valid or not, is left to `Utf8ToCompactUtf16`, which validates
/// it. Returns (bytes read, bytes written).
fn utf8_to_latin1(src: &[u8], dst: &mut [u8]) -> [u32; 2] {
    let (mut read, mut written) = (0, 0);
    while read < src.len() {
        let b = src[read];
        if b < 0x80 {
            dst[written] = b;
            read += 1;
        } else if (b == 0xc2 || b == 0xc3) && src.get(read + 1).is_some_and(|t| t & 0xc0 == 0x80) {
            dst[written] = ((b & 0x1f) << 6) | (src[read + 1] & 0x3f);
            read += 2;
        } else {
            break;
        }
        written += 1;
    }
    [read as u32, written as u32]
}

/// Widens the first `latin1_bytes` bytes of `dst` in place to UTF-16 units
/// and returns the rest of `dst`, where transcoding continues.
fn inflate_latin1(dst: &mut [u8], latin1_bytes: u32) -> Result<&mut [u8]> {
    let n = latin1_bytes as usize;
    if n > dst.len() / 2 {
        // Upstream's `split_at_mut` panic; the adapter never passes more
        // bytes than the destination has code units.
        bail!("mid > len");
    }
    // Backwards, so no byte is overwritten before it has been widened.
    for i in (0..n).rev() {
        dst[2 * i] = dst[i];
        dst[2 * i + 1] = 0;
    }
    Ok(&mut dst[2 * n..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use Transcode::*;

    /// Two distinct memories.
    struct Two {
        src: Vec<u8>,
        dst: Vec<u8>,
    }

    impl TranscodeMemories for Two {
        fn same(&self) -> bool {
            false
        }
        fn src(&mut self) -> &[u8] {
            &self.src
        }
        fn dst(&mut self) -> &mut [u8] {
            &mut self.dst
        }
    }

    /// One memory used as both source and destination.
    struct One(Vec<u8>);

    impl TranscodeMemories for One {
        fn same(&self) -> bool {
            true
        }
        fn src(&mut self) -> &[u8] {
            &self.0
        }
        fn dst(&mut self) -> &mut [u8] {
            &mut self.0
        }
    }

    fn utf16(s: &str) -> Vec<u8> {
        s.encode_utf16().flat_map(u16::to_le_bytes).collect()
    }

    fn raw_utf16(units: &[u16]) -> Vec<u8> {
        units.iter().flat_map(|u| u.to_le_bytes()).collect()
    }

    fn latin1(s: &str) -> Vec<u8> {
        s.chars()
            .map(|c| u8::try_from(u32::from(c)).unwrap())
            .collect()
    }

    /// A source memory holding `src` at address 8 (so a zero address is
    /// distinguishable) and a zeroed destination of `dst_size` bytes.
    fn two(src: &[u8], dst_size: usize) -> Two {
        let mut mem = vec![0xaa; 8];
        mem.extend_from_slice(src);
        mem.extend_from_slice(&[0xaa; 8]);
        Two {
            src: mem,
            dst: vec![0; dst_size],
        }
    }

    fn run(op: Transcode, mems: &mut dyn TranscodeMemories, args: &[u32]) -> Result<Vec<u32>> {
        let args: Vec<CoreVal> = args.iter().map(|a| CoreVal::I32(*a as i32)).collect();
        let mut results = vec![CoreVal::I32(-1); signature(op).1];
        transcode(op, mems, &args, &mut results)?;
        Ok(results
            .into_iter()
            .map(|r| match r {
                CoreVal::I32(v) => v as u32,
                other => panic!("non-i32 result {other:?}"),
            })
            .collect())
    }

    fn err(op: Transcode, mems: &mut dyn TranscodeMemories, args: &[u32]) -> String {
        match run(op, mems, args) {
            Ok(r) => panic!("{op:?} succeeded with {r:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn signatures_match_upstream_fact() {
        // From `fact/transcode.rs`: ptr/len/ptr, plus dst len and a fifth
        // argument for the two-buffer forms.
        let expected = [
            (CopyUtf8, (3, 0)),
            (CopyUtf16, (3, 0)),
            (CopyLatin1, (3, 0)),
            (Latin1ToUtf16, (3, 0)),
            (Utf8ToUtf16, (3, 1)),
            (Utf16ToUtf8, (5, 2)),
            (Latin1ToUtf8, (5, 2)),
            (Utf16ToCompactProbablyUtf16, (3, 1)),
            (Utf8ToLatin1, (3, 2)),
            (Utf16ToLatin1, (3, 2)),
            (Utf8ToCompactUtf16, (5, 1)),
            (Utf16ToCompactUtf16, (5, 1)),
        ];
        for (op, sig) in expected {
            assert_eq!(signature(op), sig, "{op:?}");
        }
    }

    #[test]
    fn copy_utf8() {
        for s in ["", "hello", "héllo", "日本語", "a😀b"] {
            let mut m = two(s.as_bytes(), 64);
            assert_eq!(run(CopyUtf8, &mut m, &[8, s.len() as u32, 4]).unwrap(), []);
            assert_eq!(&m.dst[4..4 + s.len()], s.as_bytes());
            assert!(m.dst[..4].iter().all(|b| *b == 0));
            assert!(m.dst[4 + s.len()..].iter().all(|b| *b == 0));
        }
    }

    #[test]
    fn copy_utf8_rejects_invalid_without_writing() {
        for bad in [&b"a\xffb"[..], b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f\x98"] {
            let mut m = two(bad, 16);
            assert_eq!(
                err(CopyUtf8, &mut m, &[8, bad.len() as u32, 0]),
                "invalid utf8 encoding"
            );
            assert!(m.dst.iter().all(|b| *b == 0));
        }
    }

    #[test]
    fn copy_latin1_copies_any_bytes() {
        let bytes = [0u8, 0x41, 0x80, 0xe9, 0xff];
        let mut m = two(&bytes, 8);
        run(CopyLatin1, &mut m, &[8, 5, 1]).unwrap();
        assert_eq!(m.dst, [0, 0, 0x41, 0x80, 0xe9, 0xff, 0, 0]);
    }

    #[test]
    fn copy_utf16() {
        for s in ["", "abc", "é", "日本", "😀x😀"] {
            let enc = utf16(s);
            let n = enc.len() as u32 / 2;
            let mut m = two(&enc, 64);
            run(CopyUtf16, &mut m, &[8, n, 2]).unwrap();
            assert_eq!(&m.dst[2..2 + enc.len()], &enc[..]);
        }
    }

    #[test]
    fn copy_utf16_unpaired_surrogate_writes_prefix_then_fails() {
        // Upstream encodes as it decodes, so "ab" lands before the error.
        for units in [
            &[0x61, 0x62, 0xd800][..],
            &[0x61, 0x62, 0xdc00, 0x63],
            &[0x61, 0x62, 0xd83d, 0x63],
        ] {
            let enc = raw_utf16(units);
            let mut m = two(&enc, 8);
            assert_eq!(
                err(CopyUtf16, &mut m, &[8, units.len() as u32, 0]),
                "invalid utf16 encoding"
            );
            assert_eq!(m.dst, [0x61, 0, 0x62, 0, 0, 0, 0, 0]);
        }
    }

    #[test]
    fn latin1_to_utf16_widens() {
        let mut m = two(&latin1("aé\u{ff}"), 8);
        run(Latin1ToUtf16, &mut m, &[8, 3, 2]).unwrap();
        assert_eq!(m.dst, [0, 0, 0x61, 0, 0xe9, 0, 0xff, 0]);
    }

    #[test]
    fn utf8_to_utf16_returns_units_written() {
        for (s, units) in [("", 0), ("abc", 3), ("é日", 2), ("😀", 2), ("a😀日é", 5)] {
            let mut m = two(s.as_bytes(), 2 * s.len() + 4);
            let r = run(Utf8ToUtf16, &mut m, &[8, s.len() as u32, 0]).unwrap();
            assert_eq!(r, [units], "{s}");
            assert_eq!(&m.dst[..2 * units as usize], &utf16(s)[..]);
        }
        let mut m = two(b"a\x80", 8);
        assert_eq!(
            err(Utf8ToUtf16, &mut m, &[8, 2, 0]),
            "invalid utf8 encoding"
        );
        assert!(m.dst.iter().all(|b| *b == 0));
    }

    #[test]
    fn latin1_to_utf8_first_pass_stops_at_non_ascii() {
        // Hand-checked against upstream `latin1_to_utf8`: with first_pass it
        // only transcodes `src[..position(>= 0x80)]`.
        let src = latin1("abé");
        let mut m = two(&src, 3);
        assert_eq!(run(Latin1ToUtf8, &mut m, &[8, 3, 0, 3, 1]).unwrap(), [2, 2]);
        assert_eq!(m.dst, *b"ab\0");
        // All ASCII: the whole string in one pass.
        let mut m = two(b"xyz", 3);
        assert_eq!(run(Latin1ToUtf8, &mut m, &[8, 3, 0, 3, 1]).unwrap(), [3, 3]);
    }

    #[test]
    fn latin1_to_utf8_second_pass_is_greedy() {
        // Hand-checked against encoding_rs's `convert_latin1_to_utf8_partial`
        // (what upstream calls): a two-byte sequence needs two free bytes,
        // and it stops rather than skipping to an ASCII byte that would fit.
        let src = latin1("éa");
        for (dst_len, expect, bytes) in [
            (0, [0, 0], &b""[..]),
            (1, [0, 0], b""),
            (2, [1, 2], b"\xc3\xa9"),
            (3, [2, 3], b"\xc3\xa9a"),
            (9, [2, 3], b"\xc3\xa9a"),
        ] {
            let mut m = two(&src, 9);
            let r = run(Latin1ToUtf8, &mut m, &[8, 2, 0, dst_len, 0]).unwrap();
            assert_eq!(r, expect, "dst_len {dst_len}");
            assert_eq!(&m.dst[..bytes.len()], bytes);
            assert!(m.dst[bytes.len()..].iter().all(|b| *b == 0));
        }
        let src = latin1("a\u{ff}");
        let mut m = two(&src, 2);
        assert_eq!(run(Latin1ToUtf8, &mut m, &[8, 2, 0, 2, 0]).unwrap(), [1, 1]);
    }

    #[test]
    fn utf16_to_utf8_passes() {
        // Hand-checked against upstream `utf16_to_utf8`: the first pass stops
        // before the first scalar >= 0x80; the second stops before a scalar
        // whose UTF-8 form no longer fits; src_read counts code units, so a
        // surrogate pair reads two.
        let enc = utf16("ab😀é");
        let n = enc.len() as u32 / 2;
        assert_eq!(n, 5);
        let mut m = two(&enc, 16);
        assert_eq!(run(Utf16ToUtf8, &mut m, &[8, n, 0, 5, 1]).unwrap(), [2, 2]);
        let mut m = two(&enc, 16);
        assert_eq!(run(Utf16ToUtf8, &mut m, &[8, n, 0, 5, 0]).unwrap(), [2, 2]);
        let mut m = two(&enc, 16);
        assert_eq!(run(Utf16ToUtf8, &mut m, &[8, n, 0, 6, 0]).unwrap(), [4, 6]);
        let mut m = two(&enc, 16);
        assert_eq!(run(Utf16ToUtf8, &mut m, &[8, n, 0, 8, 0]).unwrap(), [5, 8]);
        assert_eq!(&m.dst[..8], "ab😀é".as_bytes());
        // The adapter's second call: the rest of the source into the rest of
        // a 3x buffer.
        let mut m = two(&enc, 16);
        let r = run(Utf16ToUtf8, &mut m, &[8 + 4, 3, 2, 13, 0]).unwrap();
        assert_eq!(r, [3, 6]);
        assert_eq!(&m.dst[2..8], "😀é".as_bytes());
    }

    #[test]
    fn utf16_to_utf8_validates_before_stopping() {
        // A lone surrogate fails even in the first pass, where a non-ASCII
        // scalar would merely stop it.
        let enc = raw_utf16(&[0x61, 0xdfff, 0x62]);
        let mut m = two(&enc, 8);
        assert_eq!(
            err(Utf16ToUtf8, &mut m, &[8, 3, 0, 3, 1]),
            "invalid utf16 encoding"
        );
        assert_eq!(m.dst[0], 0x61);
        // But one past where the pass stops is never looked at.
        let enc = raw_utf16(&[0x61, 0xe9, 0xd800]);
        let mut m = two(&enc, 8);
        assert_eq!(run(Utf16ToUtf8, &mut m, &[8, 3, 0, 3, 1]).unwrap(), [1, 1]);
        // A full destination, though, does not stop it before the check.
        let enc = raw_utf16(&[0x61, 0x62, 0xd800]);
        let mut m = two(&enc, 8);
        assert_eq!(
            err(Utf16ToUtf8, &mut m, &[8, 3, 0, 2, 0]),
            "invalid utf16 encoding"
        );
        // A lead surrogate at the end has no trail.
        let enc = raw_utf16(&[0xd83d]);
        let mut m = two(&enc, 8);
        assert_eq!(
            err(Utf16ToUtf8, &mut m, &[8, 1, 0, 8, 0]),
            "invalid utf16 encoding"
        );
    }

    #[test]
    fn utf16_to_compact_probably_utf16_latin1_deflates_in_place() {
        let enc = utf16("aé\u{ff}");
        let mut m = two(&enc, 6);
        assert_eq!(
            run(Utf16ToCompactProbablyUtf16, &mut m, &[8, 3, 0]).unwrap(),
            [3]
        );
        // First three bytes are Latin-1; the rest keep their UTF-16 bytes.
        assert_eq!(m.dst, [0x61, 0xe9, 0xff, 0, 0xff, 0]);
        let mut m = two(&[], 0);
        assert_eq!(
            run(Utf16ToCompactProbablyUtf16, &mut m, &[8, 0, 0]).unwrap(),
            [0]
        );
    }

    #[test]
    fn utf16_to_compact_probably_utf16_tags_utf16() {
        for s in ["aĀ", "日", "😀"] {
            let enc = utf16(s);
            let n = enc.len() as u32 / 2;
            let mut m = two(&enc, enc.len());
            assert_eq!(
                run(Utf16ToCompactProbablyUtf16, &mut m, &[8, n, 0]).unwrap(),
                [n | UTF16_TAG]
            );
            assert_eq!(m.dst, enc);
        }
        let enc = raw_utf16(&[0x61, 0xdc00]);
        let mut m = two(&enc, 4);
        assert_eq!(
            err(Utf16ToCompactProbablyUtf16, &mut m, &[8, 2, 0]),
            "invalid utf16 encoding"
        );
    }

    #[test]
    fn utf8_to_latin1_prefix() {
        // (string bytes, src_read, dst_written, latin1 bytes)
        let cases: [(&[u8], u32, u32, &[u8]); 8] = [
            (b"abc", 3, 3, b"abc"),
            // U+0100 is the first scalar past Latin-1.
            ("é\u{100}".as_bytes(), 2, 1, b"\xe9"),
            ("aé\u{ff}".as_bytes(), 5, 3, b"a\xe9\xff"),
            ("aé€x".as_bytes(), 3, 2, b"a\xe9"),
            ("😀".as_bytes(), 0, 0, b""),
            // Invalid UTF-8 just ends the prefix; the second call rejects it.
            (b"ab\xff", 2, 2, b"ab"),
            (b"a\xc3", 1, 1, b"a"),
            // Overlong 0xC1 0x81 is not Latin-1 here.
            (b"\xc1\x81", 0, 0, b""),
        ];
        for (src, read, written, out) in cases {
            let mut m = two(src, src.len());
            let r = run(Utf8ToLatin1, &mut m, &[8, src.len() as u32, 0]).unwrap();
            assert_eq!(r, [read, written], "{src:?}");
            assert_eq!(&m.dst[..out.len()], out);
            assert!(m.dst[out.len()..].iter().all(|b| *b == 0));
        }
    }

    #[test]
    fn utf16_to_latin1_prefix() {
        let enc = raw_utf16(&[0x61, 0xff, 0x100, 0x62]);
        let mut m = two(&enc, 4);
        assert_eq!(run(Utf16ToLatin1, &mut m, &[8, 4, 0]).unwrap(), [2, 2]);
        assert_eq!(m.dst, [0x61, 0xff, 0, 0]);
        // Surrogates are not Latin-1 and are not validated here.
        let enc = raw_utf16(&[0x61, 0xd800]);
        let mut m = two(&enc, 2);
        assert_eq!(run(Utf16ToLatin1, &mut m, &[8, 2, 0]).unwrap(), [1, 1]);
    }

    /// Drives the adapter's `string_to_compact` sequence: a Latin-1 attempt,
    /// then the UTF-16 call on the rest, and checks the final buffer.
    #[test]
    fn utf8_to_compact_utf16_after_latin1() {
        let s = "aé日😀";
        let len = s.len() as u32; // 10 bytes
        let mut m = two(s.as_bytes(), 2 * s.len());
        let [read, written] = run(Utf8ToLatin1, &mut m, &[8, len, 0]).unwrap()[..] else {
            unreachable!()
        };
        assert_eq!((read, written), (3, 2));
        let r = run(
            Utf8ToCompactUtf16,
            &mut m,
            &[8 + read, len - read, 0, len, written],
        )
        .unwrap();
        let expect = utf16(s);
        assert_eq!(r, [expect.len() as u32 / 2]);
        assert_eq!(&m.dst[..expect.len()], &expect[..]);
    }

    #[test]
    fn utf8_to_compact_utf16_inflates_before_validating() {
        let mut m = two(b"\xff", 8);
        m.dst[..2].copy_from_slice(b"a\xe9");
        assert_eq!(
            err(Utf8ToCompactUtf16, &mut m, &[8, 1, 0, 4, 2]),
            "invalid utf8 encoding"
        );
        assert_eq!(m.dst[..4], [0x61, 0, 0xe9, 0]);
    }

    #[test]
    fn utf8_to_compact_utf16_truncates_to_destination() {
        // Upstream zips the encoder with the destination, so a short one
        // just means fewer units, not an error.
        let mut m = two("日本語".as_bytes(), 4);
        assert_eq!(
            run(Utf8ToCompactUtf16, &mut m, &[8, 9, 0, 2, 0]).unwrap(),
            [2]
        );
    }

    #[test]
    fn utf16_to_compact_utf16_after_latin1() {
        let s = "é\u{ff}Ā😀";
        let enc = utf16(s);
        let len = enc.len() as u32 / 2; // 5 units
        let mut m = two(&enc, enc.len());
        let r = run(Utf16ToLatin1, &mut m, &[8, len, 0]).unwrap();
        assert_eq!(r, [2, 2]);
        let r = run(Utf16ToCompactUtf16, &mut m, &[8 + 4, len - 2, 0, len, 2]).unwrap();
        assert_eq!(r, [len]);
        assert_eq!(m.dst, enc);
    }

    #[test]
    fn utf16_to_compact_utf16_errors() {
        let enc = raw_utf16(&[0x100, 0xd800]);
        let mut m = two(&enc, 8);
        assert_eq!(
            err(Utf16ToCompactUtf16, &mut m, &[8, 2, 0, 4, 0]),
            "invalid utf16 encoding"
        );
        assert_eq!(m.dst[..2], [0, 1]);
        // Room for fewer units than the source has: upstream panics in
        // `encode_utf16`.
        let enc = utf16("ab");
        let mut m = two(&enc, 8);
        assert_eq!(
            err(Utf16ToCompactUtf16, &mut m, &[8, 2, 0, 2, 1]),
            "encode_utf16: need 1 bytes to encode U+0062 but buffer has just 0"
        );
        // More Latin-1 bytes than destination units.
        let mut m = two(&enc, 8);
        assert_eq!(
            err(Utf16ToCompactUtf16, &mut m, &[8, 0, 0, 2, 3]),
            "mid > len"
        );
        let mut m = two(&enc, 8);
        assert_eq!(
            err(Utf8ToCompactUtf16, &mut m, &[8, 0, 0, 2, 3]),
            "mid > len"
        );
    }

    #[test]
    fn out_of_bounds_ranges() {
        let mut m = two(b"abcd", 4);
        let src_len = m.src.len() as u32; // 20
        // Source one past the end, destination one past the end, and
        // 32-bit overflow of ptr + len.
        assert_eq!(
            err(CopyUtf8, &mut m, &[src_len - 3, 4, 0]),
            "string content out-of-bounds"
        );
        assert_eq!(
            err(CopyUtf8, &mut m, &[8, 4, 1]),
            "string content out-of-bounds"
        );
        assert_eq!(
            err(CopyLatin1, &mut m, &[u32::MAX, 2, 0]),
            "string content out-of-bounds"
        );
        // The 16-bit side counts two bytes per unit, and u32::MAX units
        // must not wrap.
        assert_eq!(
            err(Latin1ToUtf16, &mut m, &[8, 3, 0]),
            "string content out-of-bounds"
        );
        assert_eq!(
            err(CopyUtf16, &mut m, &[0, u32::MAX, 0]),
            "string content out-of-bounds"
        );
        assert_eq!(
            err(Utf16ToUtf8, &mut m, &[8, 2, 0, 5, 0]),
            "string content out-of-bounds"
        );
        assert_eq!(
            err(Utf8ToCompactUtf16, &mut m, &[8, 1, 0, 0x8000_0000, 0]),
            "string content out-of-bounds"
        );
        // Exactly at the end is fine, and an empty string at the end too.
        assert!(run(CopyLatin1, &mut m, &[src_len - 4, 4, 0]).is_ok());
        assert!(run(CopyLatin1, &mut m, &[src_len, 0, 4]).is_ok());
        assert!(m.dst.iter().all(|b| *b == 0xaa));
    }

    #[test]
    fn unaligned_utf16_pointers() {
        let mut m = two(&utf16("ab"), 8);
        assert_eq!(
            err(CopyUtf16, &mut m, &[9, 1, 0]),
            "unaligned 16-bit pointer"
        );
        assert_eq!(
            err(Latin1ToUtf16, &mut m, &[9, 1, 1]),
            "unaligned 16-bit pointer"
        );
        // Byte-sized sides may be odd.
        assert!(run(Utf16ToLatin1, &mut m, &[8, 1, 1]).is_ok());
        // Alignment is checked before bounds, as upstream's shim runs first.
        assert_eq!(
            err(Utf16ToUtf8, &mut m, &[u32::MAX, 9, 0, 0, 0]),
            "unaligned 16-bit pointer"
        );
    }

    #[test]
    fn same_memory_disjoint_ranges() {
        let mut mem = vec![0; 32];
        mem[..3].copy_from_slice(b"abc");
        let mut m = One(mem);
        run(CopyUtf8, &mut m, &[0, 3, 3]).unwrap();
        assert_eq!(&m.0[..6], b"abcabc");
        // Destination before the source, exactly adjacent.
        let mut mem = vec![0; 32];
        mem[16..22].copy_from_slice(&utf16("aé😀")[..6]);
        let mut m = One(mem);
        let r = run(Utf16ToCompactProbablyUtf16, &mut m, &[16, 2, 12]).unwrap();
        assert_eq!(r, [2]);
        assert_eq!(&m.0[12..16], [0x61, 0xe9, 0xe9, 0]);
    }

    #[test]
    fn same_memory_overlap_is_refused() {
        // Upstream's `assert_no_overlap(src, dst)` with src as `a`.
        let mut m = One(b"abcdefgh".to_vec());
        assert_eq!(
            err(CopyUtf8, &mut m, &[0, 4, 3]),
            "assertion failed: a_end <= b_start"
        );
        assert_eq!(
            err(CopyUtf8, &mut m, &[3, 4, 0]),
            "assertion failed: b_end <= a_start"
        );
        assert_eq!(
            err(CopyLatin1, &mut m, &[2, 2, 2]),
            "assertion failed: b_end <= a_start"
        );
        // The destination's byte length, not its unit count, is compared.
        assert_eq!(
            err(Latin1ToUtf16, &mut m, &[3, 2, 0]),
            "assertion failed: b_end <= a_start"
        );
        assert_eq!(m.0, b"abcdefgh");
        // Its asymmetry for empty ranges: an empty source at the start of a
        // non-empty destination fails, an empty destination at the start of
        // the source does not.
        assert_eq!(
            err(Utf8ToCompactUtf16, &mut m, &[2, 0, 2, 1, 0]),
            "assertion failed: b_end <= a_start"
        );
        assert!(run(Utf16ToUtf8, &mut m, &[2, 1, 2, 0, 0]).is_ok());
        assert_eq!(
            err(Utf16ToUtf8, &mut m, &[2, 2, 4, 0, 0]),
            "assertion failed: a_end <= b_start"
        );
        assert!(run(CopyUtf8, &mut m, &[2, 0, 2]).is_ok());
        // Separate memories never overlap, whatever the addresses.
        let mut t = two(b"abcd", 20);
        assert!(run(CopyUtf8, &mut t, &[8, 4, 8]).is_ok());
    }

    #[test]
    fn bad_arguments_are_errors() {
        let mut m = two(b"ab", 8);
        let mut none: [CoreVal; 0] = [];
        assert!(transcode(CopyUtf8, &mut m, &[CoreVal::I32(8)], &mut none).is_err());
        let args = [CoreVal::I32(8), CoreVal::I64(2), CoreVal::I32(0)];
        assert!(transcode(CopyUtf8, &mut m, &args, &mut none).is_err());
        let args = [CoreVal::I32(8), CoreVal::I32(2), CoreVal::I32(0)];
        let mut one = [CoreVal::I32(0)];
        assert!(transcode(CopyUtf8, &mut m, &args, &mut one).is_err());
        assert!(m.dst.iter().all(|b| *b == 0));
    }

    #[test]
    fn results_are_i32_bit_patterns() {
        // A tagged length has bit 31 set, so the i32 result is negative.
        let enc = utf16("日");
        let mut m = two(&enc, 2);
        let args = [CoreVal::I32(8), CoreVal::I32(1), CoreVal::I32(0)];
        let mut results = [CoreVal::I32(0)];
        transcode(Utf16ToCompactProbablyUtf16, &mut m, &args, &mut results).unwrap();
        assert!(
            matches!(results, [CoreVal::I32(v)] if v == i32::MIN | 1),
            "{results:?}"
        );
    }
}
