//! What the machine itself is doing, independent of either engine: the
//! `--trace` columns that tell a slow iteration caused by the VM (its vCPU
//! slower, or descheduled by the hypervisor) from one caused by the code.
//!
//! Both probes do a fixed amount of work, so on a steady machine they take
//! the same time every iteration; when an engine's iteration takes twice as
//! long and a probe beside it does too, the machine changed, not the engine.

use crate::sightglass::FixedRandom;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Rounds of [`Probe::alu`]: a few milliseconds of register work.
const ALU_STEPS: u64 = 1 << 19;

/// Loads of [`Probe::memory`]'s pointer chase, each depending on the one before.
const CHASE_STEPS: usize = 1 << 14;

/// The chased array: 32 MiB of `usize`, larger than this VM's last-level
/// cache, so that most loads go to memory.
const CHASE_LEN: usize = 4 << 20;

/// The machine's speed at one moment, as the time of fixed work.
pub struct Probe {
    /// A pointer chase through a cyclic permutation larger than the cache;
    /// built once, so every probe walks the same path.
    chase: Vec<usize>,
}

impl Probe {
    pub fn new() -> Probe {
        // A single cycle through all slots (Sattolo's shuffle), drawn from
        // the benchmarks' fixed random stream so every run walks the same path.
        let mut random = FixedRandom::new();
        let mut chase: Vec<usize> = (0..CHASE_LEN).collect();
        for i in (1..CHASE_LEN).rev() {
            let j = (random.next_u64() % i as u64) as usize;
            chase.swap(i, j);
        }
        Probe { chase }
    }

    /// Time of [`ALU_STEPS`] rounds of four independent multiply-xor-shift
    /// chains: the core's execution throughput. Four chains keep the
    /// multiplier and ALU ports busy, as crypto code does, so the probe
    /// slows when another hardware thread shares the core (a single
    /// dependent chain waits on latency and would not notice).
    pub fn alu(&self) -> Duration {
        let start = Instant::now();
        let mut x = [1_u64, 2, 3, 4];
        for i in 0..ALU_STEPS {
            for (k, v) in x.iter_mut().enumerate() {
                *v =
                    (v.wrapping_mul(0x5851_f42d_4c95_7f2d) ^ (*v >> 29)).wrapping_add(i + k as u64);
            }
            x = black_box(x);
        }
        black_box(x);
        start.elapsed()
    }

    /// Time of [`CHASE_STEPS`] dependent loads mostly missing the cache:
    /// the speed of memory as this VM sees it.
    pub fn memory(&self) -> Duration {
        let start = Instant::now();
        let mut at = 0;
        for _ in 0..CHASE_STEPS {
            at = black_box(self.chase[at]);
        }
        black_box(at);
        start.elapsed()
    }
}

/// Time the hypervisor has stolen from this VM's CPUs since boot, in clock
/// ticks (the `steal` column of `/proc/stat`), or `None` where it cannot be
/// read.
pub fn stolen_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().next()?.strip_prefix("cpu ")?;
    cpu.split_whitespace().nth(7)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chase_is_one_cycle_through_every_slot() {
        let probe = Probe::new();
        let mut seen = vec![false; CHASE_LEN];
        let mut at = 0;
        for _ in 0..CHASE_LEN {
            assert!(!seen[at], "slot {at} visited twice");
            seen[at] = true;
            at = probe.chase[at];
        }
        assert_eq!(at, 0, "the walk does not return to its start");
    }
}
