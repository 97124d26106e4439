//! `wasmtime compile`: write a module's or a component's machine code to
//! a `.cwasm` file that `wasmtime run --allow-precompiled` (or
//! `Module::deserialize_file`, `Component::deserialize_file`) loads
//! without compiling.

use crate::run::{CommonOptions, is_component, wasm_binary};
use anyhow::{Context as _, Result, bail};
use std::path::PathBuf;
use wasmtime::{Engine, Precompiled};

/// Compiles a WebAssembly module or component
#[derive(clap::Args, Debug)]
pub struct CompileCommand {
    #[command(flatten)]
    common: CommonOptions,

    /// The path of the output compiled module or component; defaults to
    /// `<MODULE>.cwasm`
    #[arg(short = 'o', long, value_name = "OUTPUT")]
    output: Option<PathBuf>,

    /// The path of the WebAssembly module or component to compile
    #[arg(index = 1, value_name = "MODULE")]
    module: PathBuf,
}

impl CompileCommand {
    /// Compiles the module or component with the engine the options
    /// describe and writes the artifact. The artifact only loads into an
    /// engine with the same code-shaping options, so `run` needs the same
    /// `-O`, `-C` and `-W` settings that shape code.
    ///
    /// # Errors
    ///
    /// Bad options, an unreadable or invalid module or component, or an
    /// unwritable
    /// output.
    pub fn execute(self) -> Result<()> {
        let resolved = self.common.resolve()?;
        let engine = Engine::new(&resolved.config)?;
        let bytes = std::fs::read(&self.module)
            .with_context(|| format!("failed to read input file: {}", self.module.display()))?;
        if let Some(kind) = engine.detect_precompiled(&bytes) {
            let what = match kind {
                Precompiled::Module => "module",
                Precompiled::Component => "component",
            };
            bail!(
                "`{}` is already a precompiled {what}",
                self.module.display()
            );
        }
        let binary = wasm_binary(&self.module, bytes)?;
        let artifact = if is_component(&binary) {
            engine.precompile_component(&binary)?
        } else {
            engine.precompile_module(&binary)?
        };
        let output = match self.output {
            Some(output) => output,
            // As upstream: the input's file name with a `.cwasm` extension,
            // in the current directory.
            None => {
                let mut name = PathBuf::from(
                    self.module
                        .file_name()
                        .context("the input path has no file name")?,
                );
                name.set_extension("cwasm");
                name
            }
        };
        std::fs::write(&output, artifact)
            .with_context(|| format!("failed to write `{}`", output.display()))
    }
}
