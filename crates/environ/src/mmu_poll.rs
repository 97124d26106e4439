//! The machine form of a pointer-swap poll's faulting load, shared by the
//! compiler (which checks every poll site it emits) and the signal handler
//! (which repairs the load's base register before the load runs again).
//!
//! In `MmuInterruptionMode::PointerSwap` a poll is two loads: the *reload*
//! of the slot, which yields a page address, and the *dead load* through
//! that address. Arming stores the never-readable page's address into the
//! slot, so the dead load faults with the bad address in its base
//! register. Running the dead load again after disarming would fault again
//! (the register still holds the bad address), and running the reload
//! again is sound only if nothing between the two instructions changed
//! state that the reload does not recompute, which Cranelift's register
//! allocator does not promise. So the handler rewrites exactly the base
//! register, in the interrupted context, to the always-readable page; the
//! dead load then runs again and succeeds, and its (unused) result is the
//! only thing it writes.
//!
//! Finding the base register takes decoding the one instruction at the
//! poll's PC. The decoders below accept only the forms Cranelift emits for
//! `load.i32 [base + imm]` into an integer register, and reject anything
//! else (an index register, a PC-relative or absolute address, a 64-bit
//! load, the stack pointer as base). The compiler runs the same decoder on
//! every poll site it emits, so a Cranelift change that lowered the load
//! differently would fail compilation instead of reaching the handler.

/// A decoded dead load: the register whose value, plus `displacement`, is
/// the address read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollLoad {
    /// The base register's hardware number: on x86_64 0–15 in the
    /// encoding's order (`rax`, `rcx`, `rdx`, `rbx`, `rsp`, `rbp`, `rsi`,
    /// `rdi`, `r8`–`r15`), never 4 (`rsp`); on aarch64 0–30 (`x0`–`x30`).
    pub base: u8,
    /// The constant added to the base register.
    pub displacement: i32,
    /// Length of the instruction in bytes.
    pub len: usize,
}

/// Decodes `code`, the bytes at a poll's PC, as an x86_64
/// `mov r32, dword ptr [base + disp]` (opcode `8B`, optional REX prefix
/// without `W` or `X`, no index register, not RIP-relative).
///
/// Returns `None` for any other instruction, or when `code` is too short
/// to hold it.
pub fn decode_x86_64(code: &[u8]) -> Option<PollLoad> {
    let mut at = 0;
    let mut rex = 0u8;
    if let Some(&b) = code.first()
        && (0x40..=0x4f).contains(&b)
    {
        rex = b;
        at = 1;
    }
    const REX_W: u8 = 0b1000;
    const REX_X: u8 = 0b0010;
    const REX_B: u8 = 0b0001;
    if rex & (REX_W | REX_X) != 0 || *code.get(at)? != 0x8b {
        return None;
    }
    let modrm = *code.get(at + 1)?;
    at += 2;
    let mode = modrm >> 6;
    let rm = modrm & 7;
    if mode == 3 {
        return None;
    }
    let base_low = if rm == 4 {
        let sib = *code.get(at)?;
        at += 1;
        let index = (sib >> 3) & 7;
        let base = sib & 7;
        // Index 4 without REX.X means "no index"; base 5 with mode 0 means
        // "no base, disp32".
        if index != 4 || (base == 5 && mode == 0) {
            return None;
        }
        base
    } else {
        // rm 5 with mode 0 is RIP-relative.
        if rm == 5 && mode == 0 {
            return None;
        }
        rm
    };
    let base = base_low | if rex & REX_B != 0 { 8 } else { 0 };
    if base == 4 {
        return None;
    }
    let displacement = match mode {
        0 => 0,
        1 => i32::from(*code.get(at)? as i8),
        _ => i32::from_le_bytes(code.get(at..at + 4)?.try_into().ok()?),
    };
    at += match mode {
        0 => 0,
        1 => 1,
        _ => 4,
    };
    Some(PollLoad {
        base,
        displacement,
        len: at,
    })
}

/// Decodes `insn`, the instruction word at a poll's PC, as an aarch64
/// 32-bit load from a base register plus an immediate: `ldr wT, [xN, #imm]`
/// (unsigned offset, scaled by 4) or `ldur wT, [xN, #simm9]`. The base may
/// not be `sp`.
///
/// Returns `None` for any other instruction.
pub fn decode_aarch64(insn: u32) -> Option<PollLoad> {
    let base = ((insn >> 5) & 31) as u8;
    let displacement = if insn & 0xffc0_0000 == 0xb940_0000 {
        (((insn >> 10) & 0xfff) * 4) as i32
    } else if insn & 0xffe0_0c00 == 0xb840_0000 {
        // Sign-extend the 9-bit immediate at bits 12..21.
        (((insn >> 12) & 0x1ff) as i32) << 23 >> 23
    } else {
        return None;
    };
    if base == 31 {
        return None;
    }
    Some(PollLoad {
        base,
        displacement,
        len: 4,
    })
}

/// [`decode_aarch64`] of the instruction word at the start of `code` (the
/// bytes at a poll's PC, little-endian). `None` if `code` holds less than
/// one instruction or another instruction.
pub fn decode_aarch64_code(code: &[u8]) -> Option<PollLoad> {
    let word: [u8; 4] = code.get(..4)?.try_into().ok()?;
    decode_aarch64(u32::from_le_bytes(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x86(bytes: &[u8]) -> Option<(u8, i32, usize)> {
        decode_x86_64(bytes).map(|l| (l.base, l.displacement, l.len))
    }

    // Encodings from GNU as (`as --64`, Intel syntax).
    #[test]
    fn x86_64_accepts_base_plus_displacement_loads() {
        // mov eax, [rax]
        assert_eq!(x86(&[0x8b, 0x00]), Some((0, 0, 2)));
        // mov eax, [rcx + 8]
        assert_eq!(x86(&[0x8b, 0x41, 0x08]), Some((1, 8, 3)));
        // mov edx, [rbx - 8]
        assert_eq!(x86(&[0x8b, 0x53, 0xf8]), Some((3, -8, 3)));
        // mov r8d, [r13 + 0]
        assert_eq!(x86(&[0x45, 0x8b, 0x45, 0x00]), Some((13, 0, 4)));
        // mov eax, [r12]
        assert_eq!(x86(&[0x41, 0x8b, 0x04, 0x24]), Some((12, 0, 4)));
        // mov esi, [rdi + 0x1000]
        assert_eq!(
            x86(&[0x8b, 0xb7, 0x00, 0x10, 0x00, 0x00]),
            Some((7, 0x1000, 6))
        );
        // mov r15d, [r9 + 4]
        assert_eq!(x86(&[0x45, 0x8b, 0x79, 0x04]), Some((9, 4, 4)));
        // Trailing bytes of the next instruction are ignored.
        assert_eq!(x86(&[0x8b, 0x00, 0x90, 0x90]), Some((0, 0, 2)));
    }

    #[test]
    fn x86_64_rejects_every_other_form() {
        // mov rax, [rax] (64-bit)
        assert_eq!(x86(&[0x48, 0x8b, 0x00]), None);
        // mov eax, [rip + 0]
        assert_eq!(x86(&[0x8b, 0x05, 0, 0, 0, 0]), None);
        // mov eax, [rax + rcx]
        assert_eq!(x86(&[0x8b, 0x04, 0x08]), None);
        // mov eax, [rax + r12] (REX.X)
        assert_eq!(x86(&[0x42, 0x8b, 0x04, 0x20]), None);
        // mov eax, [disp32]
        assert_eq!(x86(&[0x8b, 0x04, 0x25, 0, 0, 0, 0]), None);
        // mov eax, [rsp + 8]
        assert_eq!(x86(&[0x8b, 0x44, 0x24, 0x08]), None);
        // mov eax, ecx (register form)
        assert_eq!(x86(&[0x8b, 0xc1]), None);
        // movzx eax, byte ptr [rax]
        assert_eq!(x86(&[0x0f, 0xb6, 0x00]), None);
        // Truncated instructions.
        assert_eq!(x86(&[]), None);
        assert_eq!(x86(&[0x8b]), None);
        assert_eq!(x86(&[0x8b, 0x41]), None);
        assert_eq!(x86(&[0x8b, 0x81, 0, 0]), None);
        assert_eq!(x86(&[0x41, 0x8b, 0x04]), None);
    }

    // Encodings from GNU as (`aarch64-linux-gnu-as`).
    #[test]
    fn aarch64_accepts_ldr_and_ldur() {
        let a = |w| decode_aarch64(w).map(|l| (l.base, l.displacement, l.len));
        // ldr w0, [x1]
        assert_eq!(a(0xb940_0020), Some((1, 0, 4)));
        // ldr w5, [x9, #4092]
        assert_eq!(a(0xb94f_fd25), Some((9, 4092, 4)));
        // ldur w2, [x3, #-8]
        assert_eq!(a(0xb85f_8062), Some((3, -8, 4)));
        // ldur w7, [x30, #-256]
        assert_eq!(a(0xb850_03c7), Some((30, -256, 4)));
    }

    #[test]
    fn aarch64_rejects_every_other_form() {
        let a = decode_aarch64;
        // ldr w0, [sp]
        assert_eq!(a(0xb940_03e0), None);
        // ldr x0, [x1] (64-bit)
        assert_eq!(a(0xf940_0020), None);
        // ldr w0, [x1, x2]
        assert_eq!(a(0xb862_6820), None);
        // ldr w0, [x1, #4]! (pre-index)
        assert_eq!(a(0xb840_4c20), None);
        // nop
        assert_eq!(a(0xd503_201f), None);
        // From bytes: the same word, little-endian; too short is `None`.
        assert_eq!(
            decode_aarch64_code(&[0x20, 0x00, 0x40, 0xb9, 0xff]),
            decode_aarch64(0xb940_0020)
        );
        assert_eq!(decode_aarch64_code(&[0x20, 0x00, 0x40]), None);
    }
}
