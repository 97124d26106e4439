//! [`WasiCtxBuilder`]: building a [`WasiCtx`] with upstream Wasmtime 48's
//! method names.

use anyhow::{Context as _, Result, bail};
use std::path::Path;
use wasi_common::sync::{Dir, ambient_authority};
use wasi_common::{WasiCtx, WasiFile};

/// Permissions of a preopened directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsPerms {
    /// The guest may only read. Not supported by this implementation:
    /// [`WasiCtxBuilder::preopened_dir`] fails with it.
    ReadOnly,
    /// The guest may read, create, modify and delete files and directories
    /// under the preopen.
    ReadWrite,
}

/// Builds a [`WasiCtx`]: the arguments, environment, stdio and preopened
/// directories a guest sees.
///
/// By default a guest gets no arguments, an empty environment, an empty
/// stdin, stdout and stderr that discard what is written, and no
/// filesystem access at all.
///
/// The method names follow upstream `wasmtime_wasi::WasiCtxBuilder` (48).
/// Methods that add arguments or environment variables cannot fail in
/// practice (the only limit is 4 GiB in total); if they do, the error is
/// kept and returned by [`WasiCtxBuilder::try_build`].
pub struct WasiCtxBuilder {
    inner: wasi_common::sync::WasiCtxBuilder,
    error: Option<anyhow::Error>,
}

impl Default for WasiCtxBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl WasiCtxBuilder {
    /// Creates a builder with the defaults described on [`WasiCtxBuilder`].
    pub fn new() -> Self {
        WasiCtxBuilder {
            inner: wasi_common::sync::WasiCtxBuilder::new(),
            error: None,
        }
    }

    fn record(&mut self, result: Result<(), wasi_common::StringArrayError>, what: &str) {
        if let Err(e) = result
            && self.error.is_none()
        {
            self.error = Some(anyhow::Error::new(e).context(format!("failed to add {what}")));
        }
    }

    /// Gives the guest `stdin` as its standard input (fd 0), e.g. a
    /// [`ReadPipe`](crate::pipe::ReadPipe).
    pub fn stdin(&mut self, stdin: impl WasiFile + 'static) -> &mut Self {
        self.inner.stdin(Box::new(stdin));
        self
    }

    /// Gives the guest `stdout` as its standard output (fd 1), e.g. a
    /// [`WritePipe`](crate::pipe::WritePipe) to capture it.
    pub fn stdout(&mut self, stdout: impl WasiFile + 'static) -> &mut Self {
        self.inner.stdout(Box::new(stdout));
        self
    }

    /// Gives the guest `stderr` as its standard error (fd 2).
    pub fn stderr(&mut self, stderr: impl WasiFile + 'static) -> &mut Self {
        self.inner.stderr(Box::new(stderr));
        self
    }

    /// Gives the guest this process's standard input.
    pub fn inherit_stdin(&mut self) -> &mut Self {
        self.inner.inherit_stdin();
        self
    }

    /// Gives the guest this process's standard output.
    pub fn inherit_stdout(&mut self) -> &mut Self {
        self.inner.inherit_stdout();
        self
    }

    /// Gives the guest this process's standard error.
    pub fn inherit_stderr(&mut self) -> &mut Self {
        self.inner.inherit_stderr();
        self
    }

    /// Gives the guest this process's standard input, output and error.
    pub fn inherit_stdio(&mut self) -> &mut Self {
        self.inner.inherit_stdio();
        self
    }

    /// Appends the environment variables `env` (name, value pairs).
    pub fn envs(&mut self, env: &[(impl AsRef<str>, impl AsRef<str>)]) -> &mut Self {
        for (k, v) in env {
            self.env(k, v);
        }
        self
    }

    /// Appends the environment variable `k=v`.
    pub fn env(&mut self, k: impl AsRef<str>, v: impl AsRef<str>) -> &mut Self {
        let r = self.inner.env(k.as_ref(), v.as_ref()).map(|_| ());
        self.record(r, "an environment variable");
        self
    }

    /// Appends all of this process's environment variables (those whose
    /// name and value are UTF-8).
    pub fn inherit_env(&mut self) -> &mut Self {
        for (k, v) in std::env::vars_os() {
            if let (Some(k), Some(v)) = (k.to_str(), v.to_str()) {
                self.env(k, v);
            }
        }
        self
    }

    /// Appends the arguments `args`. The first argument is, by convention,
    /// the program name.
    pub fn args(&mut self, args: &[impl AsRef<str>]) -> &mut Self {
        for a in args {
            self.arg(a);
        }
        self
    }

    /// Appends one argument.
    pub fn arg(&mut self, arg: impl AsRef<str>) -> &mut Self {
        let r = self.inner.arg(arg.as_ref()).map(|_| ());
        self.record(r, "an argument");
        self
    }

    /// Appends this process's arguments (those that are UTF-8).
    pub fn inherit_args(&mut self) -> &mut Self {
        for a in std::env::args_os() {
            if let Some(a) = a.to_str() {
                self.arg(a);
            }
        }
        self
    }

    /// Opens the host directory `host_path` and makes it available to the
    /// guest as the preopened directory `guest_path`.
    ///
    /// Preopens get file descriptors 3, 4, ... in the order they are added.
    /// The guest can reach only what lies below a preopen: `..` past its
    /// root and symlinks leading out of it are refused (`cap-std`).
    ///
    /// # Errors
    ///
    /// Fails if `host_path` cannot be opened as a directory, or for
    /// [`FsPerms::ReadOnly`], which this implementation does not support.
    pub fn preopened_dir(
        &mut self,
        host_path: impl AsRef<Path>,
        guest_path: impl AsRef<str>,
        perms: FsPerms,
    ) -> Result<&mut Self> {
        let host_path = host_path.as_ref();
        if perms == FsPerms::ReadOnly {
            bail!(
                "read-only preopened directories are not supported (preopening {})",
                host_path.display()
            );
        }
        let dir = Dir::open_ambient_dir(host_path, ambient_authority())
            .with_context(|| format!("failed to open directory {}", host_path.display()))?;
        self.preopened_cap_dir(dir, guest_path)
    }

    /// Makes the already open directory `dir` available to the guest as
    /// the preopened directory `guest_path` (read-write).
    ///
    /// # Errors
    ///
    /// Fails if the file descriptor table is full.
    pub fn preopened_cap_dir(
        &mut self,
        dir: Dir,
        guest_path: impl AsRef<str>,
    ) -> Result<&mut Self> {
        let guest_path = guest_path.as_ref();
        self.inner
            .preopened_dir(dir, guest_path)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("failed to preopen `{guest_path}`"))?;
        Ok(self)
    }

    /// Builds the context, leaving this builder reset to its defaults.
    ///
    /// # Errors
    ///
    /// Fails if adding an argument or environment variable failed (their
    /// total size exceeds 4 GiB).
    pub fn try_build(&mut self) -> Result<WasiCtx> {
        let ctx = self.inner.build();
        self.inner = wasi_common::sync::WasiCtxBuilder::new();
        match self.error.take() {
            Some(e) => Err(e),
            None => Ok(ctx),
        }
    }

    /// Builds the context, leaving this builder reset to its defaults.
    ///
    /// # Panics
    ///
    /// Panics if adding an argument or environment variable failed (their
    /// total size exceeds 4 GiB); use [`WasiCtxBuilder::try_build`] to get
    /// that as an error.
    pub fn build(&mut self) -> WasiCtx {
        match self.try_build() {
            Ok(ctx) => ctx,
            Err(e) => panic!("invalid WASI context: {e:#}"),
        }
    }

    /// Builds the context for WASI preview1; the same as
    /// [`WasiCtxBuilder::build`], spelled as upstream's.
    ///
    /// # Panics
    ///
    /// As [`WasiCtxBuilder::build`].
    pub fn build_p1(&mut self) -> crate::p1::WasiP1Ctx {
        self.build()
    }
}
