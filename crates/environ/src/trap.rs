//! Trap reasons, and how trap sites are encoded in compiled code's tables.

use std::fmt;

macro_rules! traps {
    ($($(#[$doc:meta])* $name:ident = $msg:literal,)*) => {
        /// Why WebAssembly execution stopped abnormally.
        ///
        /// A call that traps returns an error from which this can be
        /// recovered with `error.downcast_ref::<Trap>()`.
        #[non_exhaustive]
        #[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
        #[repr(u8)]
        pub enum Trap {
            $($(#[$doc])* $name,)*
        }

        impl Trap {
            const ALL: &'static [Trap] = &[$(Trap::$name,)*];

            /// The message shown after `wasm trap: `.
            pub fn message(self) -> &'static str {
                match self {
                    $(Trap::$name => $msg,)*
                }
            }
        }
    };
}

traps! {
    /// The call stack (`Config::max_wasm_stack`) was exhausted.
    StackOverflow = "call stack exhausted",
    /// An out-of-bounds linear-memory access.
    MemoryOutOfBounds = "out of bounds memory access",
    /// A misaligned atomic access.
    HeapMisaligned = "unaligned atomic",
    /// An out-of-bounds table access.
    TableOutOfBounds = "undefined element: out of bounds table access",
    /// `call_indirect` through a null table entry.
    IndirectCallToNull = "uninitialized element",
    /// `call_indirect` with a signature that does not match the callee.
    BadSignature = "indirect call type mismatch",
    /// Integer overflow (e.g. `i32.div_s` of `INT_MIN` by -1).
    IntegerOverflow = "integer overflow",
    /// Integer division or remainder by zero.
    IntegerDivisionByZero = "integer divide by zero",
    /// A float-to-int conversion of NaN or an out-of-range value.
    BadConversionToInteger = "invalid conversion to integer",
    /// The `unreachable` instruction was executed.
    UnreachableCodeReached = "wasm `unreachable` instruction executed",
    /// Execution was interrupted (epoch deadline, timeout, MMU interrupt).
    Interrupt = "interrupt",
    /// All fuel was consumed.
    OutOfFuel = "all fuel consumed by WebAssembly",
    /// A null reference was used where a non-null one was required.
    NullReference = "null reference",
    /// An allocation was too large to succeed.
    AllocationTooLarge = "allocation size too large",
    /// A component instance was called after a call into the store had
    /// trapped: its state may be half-updated, so the component model
    /// forbids entering it again.
    CannotEnterComponent = "cannot enter component instance",
    /// A component instance called out while it may not (while the host
    /// writes into it, or during its post-return).
    CannotLeaveComponent = "cannot leave component instance",
    /// An adapter between two components met a `char` that is not a
    /// Unicode scalar value.
    InvalidChar = "invalid `char` bit pattern",
    /// An adapter's string transcoding did not finish (a broken invariant
    /// of the adapter itself).
    DebugAssertStringEncodingFinished = "should have finished string encoding",
    /// An adapter's transcoding produced unequal code unit counts (a
    /// broken invariant of the adapter itself).
    DebugAssertEqualCodeUnits = "code units should be equal",
    /// An adapter met a misaligned pointer where it had checked alignment
    /// (a broken invariant of the adapter itself).
    DebugAssertPointerAligned = "pointer should be aligned",
    /// An adapter met upper bits set that it had cleared (a broken
    /// invariant of the adapter itself).
    DebugAssertUpperBitsUnset = "upper bits should be unset",
    /// A string an adapter copies lies outside its memory.
    StringOutOfBounds = "string content out-of-bounds",
    /// A list an adapter copies lies outside its memory.
    ListOutOfBounds = "list content out-of-bounds",
    /// An adapter met a variant discriminant out of range.
    InvalidDiscriminant = "invalid variant discriminant",
    /// An adapter met a pointer not aligned for what it points to.
    UnalignedPointer = "unaligned pointer",
    /// A WebAssembly exception reached the boundary of a component (an
    /// adapter between two components, a resource destructor, a host
    /// import): the component model lets none cross it.
    UncaughtException = "uncaught exception propagated out of component",
    /// `ref.cast` met a reference not of its target type.
    CastFailure = "cast failure",
}

impl Trap {
    /// Decodes a byte produced by `trap as u8`.
    pub fn from_u8(byte: u8) -> Option<Trap> {
        Trap::ALL.get(usize::from(byte)).copied()
    }
}

impl fmt::Display for Trap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "wasm trap: {}", self.message())
    }
}

impl std::error::Error for Trap {}

/// What a faulting instruction recorded in a trap table means.
///
/// Encoded as one byte per trap site: the [`Trap`] discriminant, or one of
/// the reserved values at the top of the byte range.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum TrapSiteKind {
    /// A Wasm trap.
    Trap(Trap),
    /// The wasm-to-host trampoline found that the host function failed (it
    /// returned an error or panicked); the error is waiting in the store.
    HostCallFailed,
    /// An MMU-interruption poll: a dead load from the store's interrupt
    /// page. It faults only while another thread has the page armed, and
    /// the fault is not a trap: the runtime handles the interrupt and the
    /// load runs again.
    MmuPoll,
}

impl TrapSiteKind {
    const HOST_CALL_FAILED: u8 = 0xff;
    const MMU_POLL: u8 = 0xfe;

    /// Encodes as one byte.
    pub fn to_u8(self) -> u8 {
        match self {
            TrapSiteKind::Trap(t) => t as u8,
            TrapSiteKind::HostCallFailed => Self::HOST_CALL_FAILED,
            TrapSiteKind::MmuPoll => Self::MMU_POLL,
        }
    }

    /// Whether `byte` encodes a kind ([`TrapSiteKind::from_u8`] gives
    /// `Some`), without branches, for checking whole tables at once.
    pub fn is_encoding(byte: u8) -> bool {
        usize::from(byte) < Trap::ALL.len()
            || byte == Self::MMU_POLL
            || byte == Self::HOST_CALL_FAILED
    }

    /// Decodes one byte.
    pub fn from_u8(byte: u8) -> Option<TrapSiteKind> {
        match byte {
            Self::HOST_CALL_FAILED => Some(TrapSiteKind::HostCallFailed),
            Self::MMU_POLL => Some(TrapSiteKind::MmuPoll),
            b => Trap::from_u8(b).map(TrapSiteKind::Trap),
        }
    }
}

/// A faulting instruction of compiled code and what its fault means.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct TrapSite {
    /// Offset of the instruction's first byte in the module's text.
    pub code_offset: u32,
    /// What a fault there means.
    pub kind: TrapSiteKind,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_is_an_encoding_exactly_when_it_decodes() {
        for byte in 0..=u8::MAX {
            let decoded = TrapSiteKind::from_u8(byte);
            assert_eq!(
                TrapSiteKind::is_encoding(byte),
                decoded.is_some(),
                "{byte:#x}"
            );
            if let Some(kind) = decoded {
                assert_eq!(kind.to_u8(), byte);
            }
        }
    }
}
