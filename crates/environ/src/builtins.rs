//! Runtime functions that compiled code calls ("builtins").
//!
//! `VMContextHeader::builtin_functions` points at an array of function
//! pointers, one per builtin, in the order [`foreach_builtin_function!`]
//! lists them. Compiled code loads the pointer at
//! `index * size_of::<usize>()` and calls it with the host's C calling
//! convention. Every builtin takes the caller's instance `vmctx` first.
//!
//! Parameter types are written as `vmctx`, `i32` (Rust `u32`), `i64`
//! (`u64`) and `pointer` (`usize`: a `funcref` pointer or an
//! extern-reference handle).
//!
//! Return conventions:
//! * `-> bool`: `false` means the builtin failed and left an error (a
//!   [`crate::Trap`] or a host error) in the store. Compiled code then
//!   executes a trap instruction recorded as
//!   [`crate::TrapSiteKind::HostCallFailed`], so the error surfaces with a
//!   backtrace that starts at the calling Wasm function.
//! * `-> i64` for the `*_grow` builtins: the old size; `u64::MAX` (-1)
//!   when growth was refused (not a trap: Wasm sees -1); or
//!   [`GROW_FAILED_WITH_ERROR`] (-2) when it failed with an error left in the
//!   store (a resource limiter's error, e.g. `trap_on_grow_failure`), which
//!   compiled code turns into a `HostCallFailed` trap.
//! * `-> i64` for `new_epoch`: the new deadline, or `u64::MAX` when it
//!   failed, which compiled code turns into a `HostCallFailed` trap.
//! * `throw` and `throw_ref` do not return when they succeed: the runtime
//!   resumes at the handler that catches the exception, or at the entry
//!   into Wasm. Compiled code calls them with the `tail` convention, inside
//!   a `try_table` as a `try_call`, so that a handler of the throwing
//!   function itself can catch. On x86_64 that convention's integer
//!   argument registers are the C convention's; on aarch64 they start at
//!   `x2`, and the runtime's exit shims for these two move them down.

/// What a `*_grow` builtin returns when the growth failed with an error that
/// must trap (see the module docs): -2 as a signed value, never a valid old
/// size (sizes are below 2^32 pages or elements).
pub const GROW_FAILED_WITH_ERROR: u64 = u64::MAX - 1;

/// Calls `$mac!` with the list of builtins, each written as
/// `name(param: type, ...) -> ret;` where the return is omitted for `()`.
#[macro_export]
macro_rules! foreach_builtin_function {
    ($mac:ident) => {
        $mac! {
            /// `memory.grow`: returns the old size in pages, -1, or
            /// [`GROW_FAILED_WITH_ERROR`].
            memory_grow(vmctx: vmctx, memory: i32, delta_pages: i64) -> i64;
            /// `memory.fill` of native addresses that compiled code has
            /// bounds-checked: a `memset`.
            memory_fill(vmctx: vmctx, dst: pointer, value: i32, len: i64);
            /// `memory.copy` (possibly between two memories) of native
            /// addresses that compiled code has bounds-checked: a `memmove`.
            memory_copy(vmctx: vmctx, dst: pointer, src: pointer, len: i64);
            /// `memory.init`; fails with `MemoryOutOfBounds`.
            memory_init(vmctx: vmctx, memory: i32, data: i32, dst: i64, src: i32, len: i32) -> bool;
            /// `data.drop`.
            data_drop(vmctx: vmctx, data: i32);
            /// `table.grow`: returns the old size, -1, or
            /// [`GROW_FAILED_WITH_ERROR`].
            table_grow(vmctx: vmctx, table: i32, delta: i64, init: pointer) -> i64;
            /// `table.fill`; fails with `TableOutOfBounds`.
            table_fill(vmctx: vmctx, table: i32, dst: i64, value: pointer, len: i64) -> bool;
            /// `table.copy` (possibly between two tables); fails with
            /// `TableOutOfBounds`.
            table_copy(vmctx: vmctx, dst_table: i32, src_table: i32, dst: i64, src: i64, len: i64) -> bool;
            /// `table.init`; fails with `TableOutOfBounds`.
            table_init(vmctx: vmctx, table: i32, elem: i32, dst: i64, src: i32, len: i32) -> bool;
            /// `elem.drop`.
            elem_drop(vmctx: vmctx, elem: i32);
            /// The epoch counter reached the deadline compiled code cached:
            /// unless the real `VMStoreContext::epoch_deadline` is later
            /// (the cache was stale), the runtime runs the store's epoch
            /// policy (trap, yield, callback) and stores a new deadline.
            /// Returns the deadline for compiled code to cache, or
            /// `u64::MAX` when the policy failed (an error is left in the
            /// store and compiled code traps with `HostCallFailed`).
            new_epoch(vmctx: vmctx) -> i64;
            /// `VMStoreContext::fuel_consumed` became non-negative: the
            /// runtime refuels (or yields) or fails with `OutOfFuel`;
            /// compiled code reloads the fuel counter.
            out_of_gas(vmctx: vmctx) -> bool;
            /// `throw`: makes an exception of tag `tag` (an index in the
            /// caller's tag space) whose payload is in the `ValRaw` slots at
            /// `values`, and throws it. Returns only if that failed, with
            /// an error left in the store (compiled code then traps with
            /// `HostCallFailed`).
            throw(vmctx: vmctx, tag: i32, values: pointer);
            /// `throw_ref`: throws the caught exception `exn` again. Returns
            /// only if that failed (a null `exn`), as `throw` does.
            throw_ref(vmctx: vmctx, exn: pointer);
            /// A `catch` of a tag: copies the payload of exception `exn`
            /// into the `ValRaw` slots at `values`; with `release` (a
            /// `catch` without `_ref`, so the exception cannot be used
            /// again) the store may then reuse its slot.
            exn_payload(vmctx: vmctx, exn: pointer, values: pointer, release: i32);
            /// A `catch_all` (no payload, no reference): the store may reuse
            /// exception `exn`'s slot.
            exn_release(vmctx: vmctx, exn: pointer);
        }
    };
}

macro_rules! declare_indices {
    ($($(#[$doc:meta])* $name:ident($($pname:ident: $pty:ident),*) $(-> $ret:ident)?;)*) => {
        /// Index of a builtin in the builtin-function array.
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        #[allow(non_camel_case_types, reason = "variants are named after the builtins")]
        #[repr(u32)]
        pub enum BuiltinFunctionIndex {
            $($(#[$doc])* $name,)*
        }

        impl BuiltinFunctionIndex {
            /// Every builtin, in array order.
            pub const ALL: &'static [BuiltinFunctionIndex] = &[$(BuiltinFunctionIndex::$name,)*];

            /// The builtin's name.
            pub fn name(self) -> &'static str {
                match self {
                    $(BuiltinFunctionIndex::$name => stringify!($name),)*
                }
            }

            /// Parameter types, `vmctx` first.
            pub const fn params(self) -> &'static [BuiltinType] {
                match self {
                    $(BuiltinFunctionIndex::$name => &[$(BuiltinType::$pty,)*],)*
                }
            }

            /// Return type, if any.
            pub fn ret(self) -> Option<BuiltinType> {
                match self {
                    $(BuiltinFunctionIndex::$name => {
                        None$(.or(Some(BuiltinType::$ret)))?
                    })*
                }
            }
        }
    };
}

foreach_builtin_function!(declare_indices);

/// The abstract type of a builtin's parameter or result.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types, reason = "named as written in the builtin list")]
pub enum BuiltinType {
    /// The caller's instance `VMContext` pointer.
    vmctx,
    /// A 32-bit integer.
    i32,
    /// A 64-bit integer.
    i64,
    /// A pointer-sized value.
    pointer,
    /// A success flag (one byte).
    bool,
}

impl BuiltinFunctionIndex {
    /// The offset of this builtin's pointer in the builtin-function array.
    pub fn array_offset(self) -> u32 {
        self as u32 * std::mem::size_of::<usize>() as u32
    }
}

/// Host math functions that Cranelift may call when the target lacks an
/// instruction (for example `floor` without SSE4.1). The compiler records a
/// [`crate::Relocation`] to one of these; the runtime patches in its address.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum HostLibcall {
    /// `f32` floor.
    FloorF32,
    /// `f64` floor.
    FloorF64,
    /// `f32` ceil.
    CeilF32,
    /// `f64` ceil.
    CeilF64,
    /// `f32` truncate.
    TruncF32,
    /// `f64` truncate.
    TruncF64,
    /// `f32` round-to-nearest-even.
    NearestF32,
    /// `f64` round-to-nearest-even.
    NearestF64,
    /// `f32` fused multiply-add.
    FmaF32,
    /// `f64` fused multiply-add.
    FmaF64,
    /// `i8x16.swizzle` helper when the target has no `pshufb`.
    X86Pshufb,
}

impl HostLibcall {
    /// Encodes as one byte, the libcall's tag in precompiled artifacts. The
    /// tags are fixed: a new libcall takes a new one.
    pub fn to_u8(self) -> u8 {
        match self {
            HostLibcall::FloorF32 => 0,
            HostLibcall::FloorF64 => 1,
            HostLibcall::CeilF32 => 2,
            HostLibcall::CeilF64 => 3,
            HostLibcall::TruncF32 => 4,
            HostLibcall::TruncF64 => 5,
            HostLibcall::NearestF32 => 6,
            HostLibcall::NearestF64 => 7,
            HostLibcall::FmaF32 => 8,
            HostLibcall::FmaF64 => 9,
            HostLibcall::X86Pshufb => 10,
        }
    }

    /// Decodes a byte written by [`HostLibcall::to_u8`]; `None` for a byte
    /// that names no libcall.
    pub fn from_u8(byte: u8) -> Option<HostLibcall> {
        Some(match byte {
            0 => HostLibcall::FloorF32,
            1 => HostLibcall::FloorF64,
            2 => HostLibcall::CeilF32,
            3 => HostLibcall::CeilF64,
            4 => HostLibcall::TruncF32,
            5 => HostLibcall::TruncF64,
            6 => HostLibcall::NearestF32,
            7 => HostLibcall::NearestF64,
            8 => HostLibcall::FmaF32,
            9 => HostLibcall::FmaF64,
            10 => HostLibcall::X86Pshufb,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::HostLibcall;

    #[test]
    fn libcall_tags_round_trip() {
        let mut seen = 0;
        for byte in 0..=u8::MAX {
            if let Some(libcall) = HostLibcall::from_u8(byte) {
                assert_eq!(libcall.to_u8(), byte);
                seen += 1;
            }
        }
        assert_eq!(seen, 11, "every libcall has a tag that decodes back");
    }
}
