//! Interruption instrumentation as a benchmark dimension: the same program
//! runs with no instrumentation, with epoch checks (deadline far in the
//! future) and with fuel accounting (more fuel than it can use), in either
//! engine, and in ours also with MMU polls (the interrupt page never
//! armed). Upstream Wasmtime 48 has no MMU interruption: where a table sets
//! our MMU mode against upstream, upstream runs its nearest equivalent, its
//! epochs (see [`Mode::upstream_peer`]).
//!
//! The two `wasmtime` crates have the same API but different types, so a
//! mode is applied with the macros below, from inside code compiled once
//! per crate (see `kernels::runner_for!`). Any suite that builds its own
//! `Config` and `Store` (for example a Sightglass runner) applies a mode the
//! same way:
//!
//! ```ignore
//! let mut config = wasmtime::Config::new();
//! crate::apply_mode_to_config!(mode, config);
//! let engine = wasmtime::Engine::new(&config)?;
//! let mut store = wasmtime::Store::new(&engine, data);
//! crate::apply_mode_to_store!(mode, store);
//! ```

/// How compiled code is instrumented for interruption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No instrumentation.
    Plain,
    /// `Config::epoch_interruption`, with the deadline far in the future.
    Epoch,
    /// `Config::consume_fuel`, with `u64::MAX` fuel.
    Fuel,
    /// `Config::mmu_interruption` (ours only): the polls are compiled in
    /// and run, but nothing ever arms the interrupt page, so every poll is
    /// a load that hits the cache.
    Mmu,
    /// `Config::track_memory_writes` (ours only): every store also sets
    /// its 4 KiB block's write mark. Not in [`Mode::ALL`]: it is not a way
    /// to interrupt, and `--mode marks` measures it alone against plain.
    Marks,
}

impl Mode {
    /// Every mode, in table order: MMU polls next to plain, so that within
    /// a round the two runs of ours whose ratio is the poll overhead run
    /// close together.
    pub const ALL: [Mode; 4] = [Mode::Plain, Mode::Mmu, Mode::Epoch, Mode::Fuel];

    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::Epoch => "epoch",
            Mode::Fuel => "fuel",
            Mode::Mmu => "mmu",
            Mode::Marks => "marks",
        }
    }

    /// Whether upstream Wasmtime 48 can run in this mode.
    pub fn in_upstream(self) -> bool {
        !matches!(self, Mode::Mmu | Mode::Marks)
    }

    /// The upstream mode that ours in `self` is set against, among the
    /// `measured` modes: the same mode where upstream has it; for
    /// [`Mode::Mmu`] upstream's epochs (the issue's headline comparison:
    /// both stop a running loop from another thread), or its plain run
    /// where epochs were not measured.
    pub fn upstream_peer(self, measured: &[Mode]) -> Mode {
        if self.in_upstream() {
            self
        } else if self == Mode::Marks {
            Mode::Plain
        } else if measured.contains(&Mode::Epoch) {
            Mode::Epoch
        } else {
            Mode::Plain
        }
    }
}

/// Turns on MMU interruption in a `Config` of either crate: ours has it,
/// upstream 48 does not, so there the call fails.
pub trait MmuConfig {
    /// `Config::mmu_interruption(true)`, or an error where the crate has
    /// no such setting.
    fn enable_mmu_polls(&mut self) -> anyhow::Result<()>;

    /// `Config::track_memory_writes(true)`, or an error where the crate
    /// has no such setting.
    fn enable_write_marks(&mut self) -> anyhow::Result<()>;
}

/// How ours arms MMU interrupts in [`Mode::Mmu`] for the whole process
/// (`--arming` of `sightglass`, `kernels` and `interrupt-overhead`; the
/// engine's default, pointer swap, unless set). Set once, before any engine
/// is made.
static MMU_ARMING: std::sync::OnceLock<wasmtime::MmuInterruptionMode> = std::sync::OnceLock::new();

/// Makes every later [`Mode::Mmu`] engine of ours arm with `mode`.
///
/// # Errors
///
/// If another mode was set before.
pub fn set_mmu_arming(mode: wasmtime::MmuInterruptionMode) -> anyhow::Result<()> {
    let set = *MMU_ARMING.get_or_init(|| mode);
    anyhow::ensure!(set == mode, "the MMU arming mode is already {set:?}");
    Ok(())
}

/// The arming mode [`Mode::Mmu`] engines of ours use.
pub fn mmu_arming() -> wasmtime::MmuInterruptionMode {
    MMU_ARMING.get().copied().unwrap_or_default()
}

impl MmuConfig for wasmtime::Config {
    fn enable_mmu_polls(&mut self) -> anyhow::Result<()> {
        self.mmu_interruption(true);
        self.mmu_interruption_mode(mmu_arming());
        Ok(())
    }

    fn enable_write_marks(&mut self) -> anyhow::Result<()> {
        self.track_memory_writes(true);
        Ok(())
    }
}

impl MmuConfig for upstream_wasmtime::Config {
    fn enable_mmu_polls(&mut self) -> anyhow::Result<()> {
        anyhow::bail!("upstream Wasmtime 48 has no MMU interruption")
    }

    fn enable_write_marks(&mut self) -> anyhow::Result<()> {
        anyhow::bail!("upstream Wasmtime 48 has no write marks")
    }
}

/// One program's ratios for [`print_mmu_summary`].
pub struct MmuRatios<'a> {
    /// The program (or kernel).
    pub name: &'a str,
    /// Ours with MMU polls / ours plain: the cost of the polls.
    pub overhead: f64,
    /// Ours with MMU polls / upstream 48 with epochs, where upstream's
    /// epochs were measured.
    pub vs_upstream_epoch: Option<f64>,
}

/// What the summary says in place of ours-mmu against upstream-epochs
/// where upstream's epochs were not measured.
pub const MMU_NOT_AGAINST_EPOCHS: &str =
    "* Ours mmu against upstream 48 epochs: not measured (needs `--mode mmu` or `--mode all`).";

/// The poll-overhead target on the geometric mean (ours mmu / ours plain).
pub const MMU_OVERHEAD_GEOMEAN_TARGET: f64 = 1.01;

/// No single program's poll overhead may exceed this.
pub const MMU_OVERHEAD_PROGRAM_LIMIT: f64 = 1.03;

/// Ours with MMU must be at least this many times faster than upstream 48
/// with epochs, on the geometric mean (upstream epoch / ours mmu).
pub const MMU_SPEEDUP_TARGET: f64 = 1.18;

/// Prints the issue's two summary ratios for `rows` (`what` they are:
/// "programs", "kernels"), measured as `how` (for example "execution
/// medians"): the poll overhead (geomean, the worst program, and which
/// programs exceed [`MMU_OVERHEAD_PROGRAM_LIMIT`]) and, where every row has
/// it, ours-mmu against upstream-epochs (else the caller says it was not
/// measured, see [`MMU_NOT_AGAINST_EPOCHS`]).
pub fn print_mmu_summary(how: &str, what: &str, rows: &[MmuRatios<'_>]) {
    if rows.is_empty() {
        return;
    }
    let met = |ok: bool| if ok { "met" } else { "MISSED" };
    let pct = |r: f64| format!("{:+.1}%", (r - 1.0) * 100.0);
    let overheads: Vec<f64> = rows.iter().map(|r| r.overhead).collect();
    let g = crate::stats::geomean(&overheads);
    let worst = rows
        .iter()
        .max_by(|a, b| a.overhead.total_cmp(&b.overhead))
        .expect("rows is not empty");
    let over: Vec<&str> = rows
        .iter()
        .filter(|r| r.overhead > MMU_OVERHEAD_PROGRAM_LIMIT)
        .map(|r| r.name)
        .collect();
    let listed = match over.len() {
        0 => String::new(),
        1..=12 => format!(": {}", over.join(", ")),
        _ => format!(": {}, ...", over[..12].join(", ")),
    };
    println!(
        "* MMU poll overhead ({how}, ours mmu / ours plain): geomean {g:.3} ({}), worst {:.3} ({}, {}), {} of {} {what} over {}{listed}. Targets: geomean at most {} ({}), none over {} ({}).",
        pct(g),
        worst.overhead,
        pct(worst.overhead),
        worst.name,
        over.len(),
        rows.len(),
        pct(MMU_OVERHEAD_PROGRAM_LIMIT),
        pct(MMU_OVERHEAD_GEOMEAN_TARGET),
        met(g <= MMU_OVERHEAD_GEOMEAN_TARGET),
        pct(MMU_OVERHEAD_PROGRAM_LIMIT),
        met(over.is_empty()),
    );
    let vs: Vec<(f64, &str)> = rows
        .iter()
        .filter_map(|r| Some((r.vs_upstream_epoch?, r.name)))
        .collect();
    if vs.len() < rows.len() {
        return;
    }
    let g = crate::stats::geomean(&vs.iter().map(|v| v.0).collect::<Vec<_>>());
    let (slowest, name) = vs
        .iter()
        .copied()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .expect("rows is not empty");
    println!(
        "* Ours mmu against upstream 48 epochs ({how}): ours mmu / upstream epoch geomean {g:.3}, so ours is {:.3}× as fast (target at least {MMU_SPEEDUP_TARGET:.2}×: {}); least gain {:.3}× ({name}).",
        1.0 / g,
        met(1.0 / g >= MMU_SPEEDUP_TARGET),
        1.0 / slowest,
    );
}

/// Whether this host has MMU interruption (x86_64 Linux), so that
/// [`Mode::Mmu`] can run.
pub const MMU_AVAILABLE: bool = cfg!(all(target_arch = "x86_64", target_os = "linux"));

/// Epoch ticks until the deadline in [`Mode::Epoch`]: never reached.
pub const FAR_DEADLINE: u64 = 1 << 40;

/// Applies a [`Mode`] to a `wasmtime::Config` of either crate; `?`s the
/// error of [`Mode::Mmu`] in upstream's.
#[macro_export]
macro_rules! apply_mode_to_config {
    ($mode:expr, $config:expr) => {
        match $mode {
            $crate::modes::Mode::Plain => {}
            $crate::modes::Mode::Epoch => {
                $config.epoch_interruption(true);
            }
            $crate::modes::Mode::Fuel => {
                $config.consume_fuel(true);
            }
            $crate::modes::Mode::Mmu => {
                $crate::modes::MmuConfig::enable_mmu_polls(&mut $config)?;
            }
            $crate::modes::Mode::Marks => {
                $crate::modes::MmuConfig::enable_write_marks(&mut $config)?;
            }
        }
    };
}

/// Applies a [`Mode`] to a `wasmtime::Store` of either crate (deadline or
/// fuel); `?`s the fuel error.
#[macro_export]
macro_rules! apply_mode_to_store {
    ($mode:expr, $store:expr) => {
        match $mode {
            // MMU polls need nothing from the store: its interrupt page
            // exists from the start and stays readable.
            $crate::modes::Mode::Plain | $crate::modes::Mode::Mmu | $crate::modes::Mode::Marks => {}
            $crate::modes::Mode::Epoch => $store.set_epoch_deadline($crate::modes::FAR_DEADLINE),
            $crate::modes::Mode::Fuel => $store.set_fuel(u64::MAX)?,
        }
    };
}

#[cfg(test)]
mod tests {
    use super::{MmuConfig, Mode};

    #[test]
    fn mmu_is_set_against_upstream_epochs_where_measured() {
        let all = Mode::ALL;
        assert_eq!(Mode::Mmu.upstream_peer(&all), Mode::Epoch);
        assert_eq!(
            Mode::Mmu.upstream_peer(&[Mode::Plain, Mode::Mmu]),
            Mode::Plain
        );
        for mode in [Mode::Plain, Mode::Epoch, Mode::Fuel] {
            assert_eq!(mode.upstream_peer(&all), mode);
        }
    }

    #[test]
    fn only_ours_has_mmu_polls() {
        assert!(wasmtime::Config::new().enable_mmu_polls().is_ok());
        assert!(upstream_wasmtime::Config::new().enable_mmu_polls().is_err());
    }
}
