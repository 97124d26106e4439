//! Traps and Wasm backtraces: [`Trap`], [`WasmBacktrace`], [`FrameInfo`].

use crate::{AsContext, Module};
use std::fmt;

pub use wasmtime_environ::Trap;

/// Representation of a backtrace of function frames in a WebAssembly
/// module for where an error happened.
///
/// This structure is attached to the [`anyhow::Error`] returned from many
/// functions in this crate (a trap, or a failing host function called from
/// WebAssembly) and can be retrieved with `error.downcast_ref::<WasmBacktrace>()`.
/// It can also be captured explicitly with [`WasmBacktrace::capture`].
///
/// Frames are listed innermost first and hold at most
/// [`Config::wasm_backtrace_max_frames`](crate::Config::wasm_backtrace_max_frames)
/// entries.
#[derive(Debug)]
pub struct WasmBacktrace {
    wasm_trace: Vec<FrameInfo>,
}

impl WasmBacktrace {
    pub(crate) fn new(wasm_trace: Vec<FrameInfo>) -> WasmBacktrace {
        WasmBacktrace { wasm_trace }
    }

    /// Captures a trace of the WebAssembly frames of `store` currently on
    /// the stack.
    ///
    /// Called from a host function invoked by WebAssembly, this lists the
    /// WebAssembly frames that led to the call; outside of any WebAssembly
    /// call it is empty. It is also empty when backtraces are disabled with
    /// [`Config::wasm_backtrace_max_frames`](crate::Config::wasm_backtrace_max_frames).
    pub fn capture(store: impl AsContext) -> WasmBacktrace {
        let store = store.as_context();
        store.0.opaque.capture_backtrace()
    }

    /// Like [`WasmBacktrace::capture`]; provided for upstream API
    /// compatibility (this runtime honors the configured frame limit in both).
    pub fn force_capture(store: impl AsContext) -> WasmBacktrace {
        WasmBacktrace::capture(store)
    }

    /// Returns a list of function frames in WebAssembly this backtrace
    /// represents, innermost first.
    pub fn frames(&self) -> &[FrameInfo] {
        &self.wasm_trace
    }
}

impl fmt::Display for WasmBacktrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "error while executing at wasm backtrace:")?;
        for (i, frame) in self.wasm_trace.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            let name = frame.module().name().unwrap_or("<unknown>");
            write!(f, "  {i:>3}: ")?;
            if let Some(offset) = frame.module_offset() {
                write!(f, "{offset:#8x} - ")?;
            }
            write!(f, "{name}!")?;
            match frame.func_name() {
                Some(func) => demangle_function_name(f, func)?,
                None => write!(f, "<wasm function {}>", frame.func_index())?,
            }
        }
        Ok(())
    }
}

/// Writes `name` demangled as a Rust or C++ symbol if it is one.
fn demangle_function_name(f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
    if let Ok(demangled) = rustc_demangle::try_demangle(name) {
        return write!(f, "{demangled}");
    }
    if let Ok(symbol) = cpp_demangle::Symbol::new(name)
        && let Ok(demangled) = symbol.demangle()
    {
        return write!(f, "{demangled}");
    }
    write!(f, "{name}")
}

/// Description of a frame in a backtrace for a [`WasmBacktrace`].
///
/// Whenever an error happens while WebAssembly is executing a
/// [`WasmBacktrace`] will be attached to the error returned which can be
/// used to acquire this `FrameInfo`. For more information see
/// [`WasmBacktrace`].
#[derive(Debug)]
pub struct FrameInfo {
    module: Module,
    func_index: u32,
    func_name: Option<String>,
    func_start: Option<u32>,
    instr: Option<u32>,
}

impl FrameInfo {
    /// The frame of the function of `module` containing text offset
    /// `text_offset`, if any (trampolines have none).
    pub(crate) fn new(module: &Module, text_offset: usize) -> Option<FrameInfo> {
        let defined = module.func_by_text_offset(text_offset)?;
        let info = module.info();
        let index = info.func_index(defined);
        let instr = module.wasm_offset(text_offset, module.func_text_start(defined));
        Some(FrameInfo {
            module: module.clone(),
            func_index: index.as_u32(),
            func_name: info.func_name(index).map(|s| s.to_string()),
            func_start: module.func_body_offset(defined),
            instr,
        })
    }

    /// Returns the WebAssembly function index for this frame.
    ///
    /// This function index is the index in the function index space of the
    /// WebAssembly module that this frame comes from.
    pub fn func_index(&self) -> u32 {
        self.func_index
    }

    /// Returns the module for this frame.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Returns a descriptive name of the function for this frame, if one is
    /// available (from the module's name section).
    pub fn func_name(&self) -> Option<&str> {
        self.func_name.as_deref()
    }

    /// Returns the offset within the original wasm module this frame's
    /// program counter was at, if known.
    pub fn module_offset(&self) -> Option<usize> {
        Some(self.instr? as usize)
    }

    /// Returns the offset from the original wasm module's function to this
    /// frame's program counter, if known.
    pub fn func_offset(&self) -> Option<usize> {
        Some(self.instr?.checked_sub(self.func_start?)? as usize)
    }

    /// Debug-info symbols for this frame (never any in this runtime, which
    /// does not read DWARF).
    pub fn symbols(&self) -> &[FrameSymbol] {
        &[]
    }
}

/// Debug information for a symbol that is attached to a [`FrameInfo`].
///
/// This runtime does not read DWARF, so no `FrameSymbol` is ever created;
/// the type exists for API compatibility.
#[derive(Debug)]
pub struct FrameSymbol {
    name: Option<String>,
    file: Option<String>,
    line: Option<u32>,
    column: Option<u32>,
}

impl FrameSymbol {
    /// Returns the function name associated with this symbol.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Returns the source code filename this symbol was defined in.
    pub fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }

    /// Returns the 1-indexed source code line number this symbol was
    /// defined on.
    pub fn line(&self) -> Option<u32> {
        self.line
    }

    /// Returns the 1-indexed source code column number this symbol was
    /// defined on.
    pub fn column(&self) -> Option<u32> {
        self.column
    }
}
