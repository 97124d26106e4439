//! Shared pieces of the fuzz targets: how an input becomes a module and a
//! configuration, how each engine runs it, and what counts as a divergence.
//!
//! The targets are in `fuzz_targets/`; `docs/fuzzing.md` says how to run
//! them and what they found.

pub mod compare;
pub mod component_diff;
pub mod config;
pub mod engines;
pub mod generate;
pub mod liveness;
pub mod reset;
pub mod stats;
pub mod value;
