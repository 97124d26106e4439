//! Wasm → Cranelift translation and compilation for the `wasmtime` runtime.
//!
//! [`Compiler::compile_module`] validates and translates every function body
//! of a [`ModuleTranslation`] to Cranelift IR, compiles the functions (in
//! parallel by default) together with one entry trampoline per type of the
//! type section, and lays everything out in one text section whose internal
//! calls are already resolved. [`Compiler::compile_wasm_to_host_trampoline`]
//! compiles the per-type trampolines through which Wasm calls host
//! functions. The calling conventions, the `VMContext` layout and the
//! artifact format are those of `wasmtime-mmu-environ`.

#![deny(missing_docs)]

mod bounds_checks;
mod compiler;
mod exceptions;
mod func_environ;
mod simd;
mod trampolines;
mod translate;

use anyhow::{Result, anyhow, bail};
use cranelift_codegen::isa::{self, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable, SetError};
use wasmtime_mmu_environ::{CompiledModuleArtifacts, CompiledTrampoline, Tunables};
use wasmtime_mmu_environ::{ModuleTranslation, WasmFuncType};

pub use compiler::ClifForTest;

/// How hard Cranelift optimizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OptLevel {
    /// No optimizations.
    None,
    /// Optimize for speed (the default).
    #[default]
    Speed,
    /// Optimize for speed and code size.
    SpeedAndSize,
}

/// One Cranelift setting as `(name, value)`, both as Cranelift spells them.
pub type Setting = (String, String);

/// Configuration of a [`Compiler`].
#[derive(Clone, Debug)]
pub struct CompilerConfig {
    /// Optimization level; defaults to [`OptLevel::Speed`].
    pub opt_level: OptLevel,
    /// Target to compile for; `None` compiles for the host with the CPU
    /// features detected at run time.
    pub target: Option<target_lexicon::Triple>,
    /// Extra Cranelift settings as `(name, value)`, applied to the shared
    /// settings or, failing that, to the ISA settings. An unknown name is an
    /// error.
    pub flags: Vec<(String, String)>,
    /// Whether floating-point results are NaN-canonicalized; defaults to
    /// false.
    pub nan_canonicalization: bool,
    /// Whether functions are compiled in parallel (with rayon); defaults to
    /// true.
    pub parallel: bool,
    /// Whether Cranelift's IR verifier runs on every function; defaults to
    /// false.
    pub enable_verifier: bool,
}

impl Default for CompilerConfig {
    fn default() -> CompilerConfig {
        CompilerConfig {
            opt_level: OptLevel::Speed,
            target: None,
            flags: Vec::new(),
            nan_canonicalization: false,
            parallel: true,
            enable_verifier: false,
        }
    }
}

/// A configured Wasm compiler for one target. `Send + Sync`: one compiler
/// serves an engine's threads.
pub struct Compiler {
    isa: OwnedTargetIsa,
    tunables: Tunables,
    parallel: bool,
}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Compiler>();
};

impl Compiler {
    /// Builds a compiler for `config` and `tunables`.
    ///
    /// # Errors
    ///
    /// An unsupported target or an unknown or invalid Cranelift setting.
    pub fn new(config: &CompilerConfig, tunables: &Tunables) -> Result<Compiler> {
        let mut shared = settings::builder();
        let opt_level = match config.opt_level {
            OptLevel::None => "none",
            OptLevel::Speed => "speed",
            OptLevel::SpeedAndSize => "speed_and_size",
        };
        let set = |b: &mut settings::Builder, name: &str, value: &str| {
            b.set(name, value)
                .map_err(|e| anyhow!("Cranelift setting `{name}={value}`: {e}"))
        };
        set(&mut shared, "opt_level", opt_level)?;
        set(
            &mut shared,
            "enable_verifier",
            if config.enable_verifier {
                "true"
            } else {
                "false"
            },
        )?;
        set(
            &mut shared,
            "enable_nan_canonicalization",
            if config.nan_canonicalization {
                "true"
            } else {
                "false"
            },
        )?;
        // Backtraces walk frame pointers (see environ's `compiled.rs`).
        set(&mut shared, "preserve_frame_pointers", "true")?;
        // Like upstream: probe large frames inline so that they cannot skip
        // the thread's guard page, without needing a `__probestack` symbol.
        set(&mut shared, "enable_probestack", "true")?;
        set(&mut shared, "probestack_strategy", "inline")?;
        // Functions with more results than return registers return the rest
        // through an implicit pointer.
        set(&mut shared, "enable_multi_ret_implicit_sret", "true")?;
        // Frames are walked with frame pointers, not unwind tables.
        set(&mut shared, "unwind_info", "false")?;
        // Libcalls (e.g. `floor` without SSE4.1) must go through an absolute
        // 8-byte address that the runtime patches (`Relocation`).
        set(&mut shared, "use_colocated_libcalls", "false")?;

        let mut isa_builder = match &config.target {
            None => cranelift_native::builder()
                .map_err(|e| anyhow!("host is not supported by Cranelift: {e}"))?,
            Some(triple) => isa::lookup(triple.clone())
                .map_err(|e| anyhow!("target `{triple}` is not supported: {e}"))?,
        };

        for (name, value) in &config.flags {
            match shared.set(name, value) {
                Ok(()) => {}
                Err(SetError::BadName(_)) => isa_builder
                    .set(name, value)
                    .map_err(|e| anyhow!("Cranelift setting `{name}={value}`: {e}"))?,
                Err(e) => bail!("Cranelift setting `{name}={value}`: {e}"),
            }
        }

        let isa = isa_builder
            .finish(settings::Flags::new(shared))
            .map_err(|e| anyhow!("cannot build the Cranelift target: {e}"))?;
        if isa.pointer_bytes() != 8 {
            bail!("only 64-bit targets are supported");
        }
        match isa.triple().architecture {
            target_lexicon::Architecture::X86_64 | target_lexicon::Architecture::Aarch64(_) => {}
            other => bail!("architecture `{other}` is not supported (x86_64 and aarch64 are)"),
        }
        Ok(Compiler {
            isa,
            tunables: tunables.clone(),
            parallel: config.parallel,
        })
    }

    /// The target this compiler produces code for.
    pub fn triple(&self) -> &target_lexicon::Triple {
        self.isa.triple()
    }

    /// The Cranelift settings behind this compiler's code, as
    /// `(name, value)` pairs: first the shared settings, then the target's
    /// own, whose `has_*` booleans are the CPU features the code may use.
    /// Precompiled modules record them so that a loading engine can refuse
    /// code it could not run.
    ///
    /// `enable_verifier` is left out: it checks the IR while compiling and
    /// never changes the code produced.
    pub fn code_settings(&self) -> (Vec<Setting>, Vec<Setting>) {
        let shared = self
            .isa
            .flags()
            .iter()
            .filter(|v| v.name != "enable_verifier")
            .map(|v| (v.name.to_string(), v.value_string()))
            .collect();
        let target = self
            .isa
            .isa_flags()
            .iter()
            .map(|v| (v.name.to_string(), v.value_string()))
            .collect();
        (shared, target)
    }

    /// Validates every function body (driving its `FuncToValidate`) while
    /// translating it, compiles all defined functions and one entry
    /// trampoline per type of the type section, lays them out in one text
    /// section and resolves the calls between them.
    ///
    /// # Errors
    ///
    /// An invalid function body (wasmparser's message and offset), an
    /// unsupported operator, or a code-generation failure.
    pub fn compile_module(
        &self,
        translation: ModuleTranslation<'_>,
    ) -> Result<CompiledModuleArtifacts> {
        compiler::compile_module(self, translation)
    }

    /// Compiles the wasm-to-host trampoline for functions of type `ty` (see
    /// environ's `compiled.rs`).
    ///
    /// # Errors
    ///
    /// A code-generation failure.
    pub fn compile_wasm_to_host_trampoline(&self, ty: &WasmFuncType) -> Result<CompiledTrampoline> {
        trampolines::compile_wasm_to_host(self, ty)
    }

    /// Translates and compiles one defined function of `translation` (by its
    /// index in the function index space) and returns its optimized CLIF
    /// and its disassembly, for tests that inspect generated code.
    ///
    /// # Errors
    ///
    /// As for [`Compiler::compile_module`], or an index that is not a
    /// defined function.
    pub fn compile_function_clif_for_test(
        &self,
        translation: ModuleTranslation<'_>,
        func_index: u32,
    ) -> Result<ClifForTest> {
        compiler::compile_function_for_test(self, translation, func_index)
    }
}
