//! Traps and Wasm backtraces: [`Trap`], [`WasmBacktrace`], [`FrameInfo`].

use crate::{AsContext, Module};
use std::fmt;

pub use wasmtime_environ::Trap;

/// The WebAssembly frames that were on the stack when a call failed, or
/// when [`WasmBacktrace::capture`] ran.
///
/// When a call traps, or a host function it called fails, the error the
/// call returns carries one as [`anyhow`] context:
/// `error.downcast_ref::<WasmBacktrace>()` gets it back, and printing the
/// error with `{:?}` shows it. The runtime finds the frames by walking
/// frame pointers, and lists them innermost first, keeping at most the
/// number of frames set with
/// [`Config::wasm_backtrace_max_frames`](crate::Config::wasm_backtrace_max_frames).
/// Host frames between them are left out.
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

    /// The frames, innermost (the one that failed) first.
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

/// One frame of a [`WasmBacktrace`]: a WebAssembly function and where in
/// it execution was.
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

    /// The function's index in its module's function index space (imported
    /// functions first, then the module's own).
    pub fn func_index(&self) -> u32 {
        self.func_index
    }

    /// The module the function belongs to.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The function's name from the module's name section, if it has one
    /// (as stored: not demangled).
    pub fn func_name(&self) -> Option<&str> {
        self.func_name.as_deref()
    }

    /// The byte offset, in the module binary, of the instruction the frame
    /// was executing (for a caller's frame, the call); `None` when the
    /// address map has no entry for it.
    pub fn module_offset(&self) -> Option<usize> {
        Some(self.instr? as usize)
    }

    /// The same position as [`FrameInfo::module_offset`], counted from the
    /// start of the function's body instead of the start of the module.
    pub fn func_offset(&self) -> Option<usize> {
        Some(self.instr?.checked_sub(self.func_start?)? as usize)
    }

    /// Debug-info symbols for this frame (never any in this runtime, which
    /// does not read DWARF).
    pub fn symbols(&self) -> &[FrameSymbol] {
        &[]
    }
}

/// What DWARF debug information would say about a frame (upstream's
/// [`FrameInfo::symbols`] items).
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
    /// The source-level function name.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The source file.
    pub fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }

    /// The source line, counting from 1.
    pub fn line(&self) -> Option<u32> {
        self.line
    }

    /// The source column, counting from 1.
    pub fn column(&self) -> Option<u32> {
        self.column
    }
}
