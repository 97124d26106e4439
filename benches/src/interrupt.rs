//! `bench interrupt-overhead`: the kernels with no instrumentation, with
//! epoch checks and with fuel, in both engines. Prints each mode's time, its
//! overhead over no instrumentation in the same engine, and ours / upstream
//! per mode.

use crate::Options;
use crate::kernels::{KERNELS, Runner, ours, time, upstream};
use crate::modes::Mode;
use crate::stats::{geomean, median, ratio};
use anyhow::{Context, Result, bail};
use std::time::Duration;

/// Medians of one kernel: `[engine][mode]`, engine 0 = ours, 1 = upstream.
type Medians = [[Duration; 3]; 2];

/// Runs the suite and prints two markdown tables.
pub fn run(options: &Options) -> Result<()> {
    let mut rows: Vec<(&str, Medians)> = Vec::new();
    for kernel in KERNELS.iter().filter(|k| options.selects(k.name)) {
        let mut runners: Vec<[Box<dyn Runner>; 2]> = Vec::new();
        for mode in Mode::ALL {
            let what = |engine: &str| format!("{} ({}, {engine})", kernel.name, mode.name());
            let a: Box<dyn Runner> =
                Box::new(ours::load(kernel.wat, mode).with_context(|| what("ours"))?);
            let b: Box<dyn Runner> =
                Box::new(upstream::load(kernel.wat, mode).with_context(|| what("upstream"))?);
            runners.push([a, b]);
        }
        // Warm-up, and the check that every configuration computes the same.
        let mut expected = None;
        for pair in &mut runners {
            for runner in pair.iter_mut() {
                let (_, got) = time(runner.as_mut(), kernel.arg)?;
                if *expected.get_or_insert(got) != got {
                    bail!("{}: results differ between configurations", kernel.name);
                }
            }
        }
        // Alternate engines and modes within every round.
        let mut samples: [[Vec<Duration>; 3]; 2] = Default::default();
        for _ in 0..options.runs(7) {
            for (m, pair) in runners.iter_mut().enumerate() {
                for (e, runner) in pair.iter_mut().enumerate() {
                    samples[e][m].push(time(runner.as_mut(), kernel.arg)?.0);
                }
            }
        }
        let medians: Medians =
            std::array::from_fn(|e| std::array::from_fn(|m| median(&samples[e][m])));
        eprintln!("{}: done", kernel.name);
        rows.push((kernel.name, medians));
    }
    print_tables(&rows);
    Ok(())
}

fn pct(r: f64) -> String {
    format!("{:+.1}%", (r - 1.0) * 100.0)
}

fn print_tables(rows: &[(&str, Medians)]) {
    println!("Overhead of each mode over no instrumentation, per engine (medians):");
    println!();
    println!(
        "| kernel | ours plain (ms) | ours epoch | ours fuel | upstream plain (ms) | upstream epoch | upstream fuel |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let mut overheads: [[Vec<f64>; 2]; 2] = Default::default();
    let mut ratios: [Vec<f64>; 3] = Default::default();
    for (name, m) in rows {
        let mut cells = Vec::new();
        for e in 0..2 {
            cells.push(format!("{:.1}", m[e][0].as_secs_f64() * 1e3));
            for mode in 1..3 {
                let r = ratio(m[e][mode], m[e][0]);
                overheads[e][mode - 1].push(r);
                cells.push(pct(r));
            }
        }
        for (mode, rs) in ratios.iter_mut().enumerate() {
            rs.push(ratio(m[0][mode], m[1][mode]));
        }
        println!("| {name} | {} |", cells.join(" | "));
    }
    if !rows.is_empty() {
        let g = |v: &Vec<f64>| pct(geomean(v));
        println!(
            "| geomean | | {} | {} | | {} | {} |",
            g(&overheads[0][0]),
            g(&overheads[0][1]),
            g(&overheads[1][0]),
            g(&overheads[1][1])
        );
    }
    println!();
    println!("Ours / upstream per mode (medians; < 1 means ours is faster):");
    println!();
    println!("| kernel | plain | epoch | fuel |");
    println!("|---|---:|---:|---:|");
    for (i, (name, _)) in rows.iter().enumerate() {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} |",
            ratios[0][i], ratios[1][i], ratios[2][i]
        );
    }
    if !rows.is_empty() {
        println!(
            "| geomean | {:.3} | {:.3} | {:.3} |",
            geomean(&ratios[0]),
            geomean(&ratios[1]),
            geomean(&ratios[2])
        );
    }
}
