//! Interruption instrumentation as a benchmark dimension: the same program
//! runs with no instrumentation, with epoch checks (deadline far in the
//! future) and with fuel accounting (more fuel than it can use), in either
//! engine.
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
}

impl Mode {
    /// Every mode, in table order.
    pub const ALL: [Mode; 3] = [Mode::Plain, Mode::Epoch, Mode::Fuel];

    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::Epoch => "epoch",
            Mode::Fuel => "fuel",
        }
    }
}

/// Epoch ticks until the deadline in [`Mode::Epoch`]: never reached.
pub const FAR_DEADLINE: u64 = 1 << 40;

/// Applies a [`Mode`] to a `wasmtime::Config` of either crate.
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
        }
    };
}

/// Applies a [`Mode`] to a `wasmtime::Store` of either crate (deadline or
/// fuel); `?`s the fuel error.
#[macro_export]
macro_rules! apply_mode_to_store {
    ($mode:expr, $store:expr) => {
        match $mode {
            $crate::modes::Mode::Plain => {}
            $crate::modes::Mode::Epoch => $store.set_epoch_deadline($crate::modes::FAR_DEADLINE),
            $crate::modes::Mode::Fuel => $store.set_fuel(u64::MAX)?,
        }
    };
}
