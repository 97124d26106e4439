//! `bench interrupt-overhead` (and `bench kernels --mode ...`): the kernels
//! with no instrumentation, with epoch checks, with fuel and (ours only)
//! with MMU polls, in both engines. Prints each mode's time, its overhead
//! over no instrumentation in the same engine, ours / upstream per mode
//! (our MMU mode against upstream's epochs, see [`Mode::upstream_peer`]),
//! and the MMU summary ratios.

use crate::Options;
use crate::kernels::{KERNELS, Runner, ours, time, upstream};
use crate::modes::{MMU_NOT_AGAINST_EPOCHS, MmuRatios, Mode, print_mmu_summary};
use crate::stats::{geomean, median, ratio};
use anyhow::{Context, Result, bail};
use std::time::Duration;

/// Medians of one kernel: `[mode][engine]`, engine 0 = ours, 1 = upstream
/// (`None` where upstream lacks the mode).
type Medians = Vec<[Option<Duration>; 2]>;

/// Runs the suite in `modes` (plain first) and prints the tables.
pub fn run(options: &Options, modes: &[Mode]) -> Result<()> {
    assert_eq!(modes.first(), Some(&Mode::Plain), "plain comes first");
    let mut rows: Vec<(&str, Medians)> = Vec::new();
    for kernel in KERNELS.iter().filter(|k| options.selects(k.name)) {
        let mut runners: Vec<[Option<Box<dyn Runner>>; 2]> = Vec::new();
        for &mode in modes {
            let what = |engine: &str| format!("{} ({}, {engine})", kernel.name, mode.name());
            let a: Box<dyn Runner> =
                Box::new(ours::load(kernel.wat, mode).with_context(|| what("ours"))?);
            let b: Option<Box<dyn Runner>> = if mode.in_upstream() {
                Some(Box::new(
                    upstream::load(kernel.wat, mode).with_context(|| what("upstream"))?,
                ))
            } else {
                None
            };
            runners.push([Some(a), b]);
        }
        // Warm-up, and the check that every configuration computes the same.
        let mut expected = None;
        for pair in &mut runners {
            for runner in pair.iter_mut().flatten() {
                let (_, got) = time(runner.as_mut(), kernel.arg)?;
                if *expected.get_or_insert(got) != got {
                    bail!("{}: results differ between configurations", kernel.name);
                }
            }
        }
        // Alternate engines and modes within every round.
        let mut samples: Vec<[Vec<Duration>; 2]> =
            modes.iter().map(|_| Default::default()).collect();
        for _ in 0..options.runs(7) {
            for (m, pair) in runners.iter_mut().enumerate() {
                for (e, runner) in pair.iter_mut().enumerate() {
                    if let Some(runner) = runner {
                        samples[m][e].push(time(runner.as_mut(), kernel.arg)?.0);
                    }
                }
            }
        }
        let medians: Medians = samples
            .iter()
            .map(|pair| std::array::from_fn(|e| (!pair[e].is_empty()).then(|| median(&pair[e]))))
            .collect();
        eprintln!("{}: done", kernel.name);
        rows.push((kernel.name, medians));
    }
    print_tables(&rows, modes);
    Ok(())
}

fn pct(r: f64) -> String {
    format!("{:+.1}%", (r - 1.0) * 100.0)
}

/// The median of (`mode`, `engine`), which was measured.
fn at(m: &Medians, modes: &[Mode], mode: Mode, engine: usize) -> Duration {
    let i = modes
        .iter()
        .position(|&x| x == mode)
        .expect("mode measured");
    m[i][engine].expect("engine measured in this mode")
}

fn print_tables(rows: &[(&str, Medians)], modes: &[Mode]) {
    let others = &modes[1..];
    // The overhead columns of each engine: the modes besides plain it has.
    let columns: [Vec<Mode>; 2] = [
        others.to_vec(),
        others.iter().copied().filter(|m| m.in_upstream()).collect(),
    ];
    println!("Overhead of each mode over no instrumentation, per engine (medians):");
    println!();
    let mut header = String::from("| kernel |");
    for (e, engine) in ["ours", "upstream"].iter().enumerate() {
        header.push_str(&format!(" {engine} plain (ms) |"));
        for mode in &columns[e] {
            header.push_str(&format!(" {engine} {} |", mode.name()));
        }
    }
    println!("{header}");
    println!(
        "|---|{}",
        "---:|".repeat(2 + columns[0].len() + columns[1].len())
    );
    let mut overheads: [Vec<Vec<f64>>; 2] = columns.clone().map(|c| vec![Vec::new(); c.len()]);
    let peers: Vec<Mode> = modes.iter().map(|m| m.upstream_peer(modes)).collect();
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for (name, m) in rows {
        let mut cells = Vec::new();
        for e in 0..2 {
            let plain = at(m, modes, Mode::Plain, e);
            cells.push(format!("{:.1}", plain.as_secs_f64() * 1e3));
            for (k, &mode) in columns[e].iter().enumerate() {
                let r = ratio(at(m, modes, mode, e), plain);
                overheads[e][k].push(r);
                cells.push(pct(r));
            }
        }
        for (i, rs) in ratios.iter_mut().enumerate() {
            rs.push(ratio(at(m, modes, modes[i], 0), at(m, modes, peers[i], 1)));
        }
        println!("| {name} | {} |", cells.join(" | "));
    }
    if !rows.is_empty() {
        let mut cells = Vec::new();
        for engine_overheads in &overheads {
            cells.push(String::new());
            for v in engine_overheads {
                cells.push(pct(geomean(v)));
            }
        }
        println!("| geomean | {} |", cells.join(" | "));
    }
    println!();
    println!("Ours / upstream per mode (medians; < 1 means ours is faster):");
    println!();
    let names: Vec<String> = modes
        .iter()
        .zip(&peers)
        .map(|(m, p)| {
            if m == p {
                m.name().to_owned()
            } else {
                format!("{} / upstream {}", m.name(), p.name())
            }
        })
        .collect();
    println!("| kernel | {} |", names.join(" | "));
    println!("|---|{}", "---:|".repeat(modes.len()));
    for (i, (name, _)) in rows.iter().enumerate() {
        let cells: Vec<String> = ratios.iter().map(|r| format!("{:.3}", r[i])).collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
    if !rows.is_empty() {
        let cells: Vec<String> = ratios
            .iter()
            .map(|r| format!("{:.3}", geomean(r)))
            .collect();
        println!("| geomean | {} |", cells.join(" | "));
    }
    if modes.contains(&Mode::Mmu) && !rows.is_empty() {
        let summary: Vec<MmuRatios<'_>> = rows
            .iter()
            .map(|(name, m)| {
                let mmu = at(m, modes, Mode::Mmu, 0);
                MmuRatios {
                    name,
                    overhead: ratio(mmu, at(m, modes, Mode::Plain, 0)),
                    vs_upstream_epoch: modes
                        .contains(&Mode::Epoch)
                        .then(|| ratio(mmu, at(m, modes, Mode::Epoch, 1))),
                }
            })
            .collect();
        println!();
        println!("MMU interruption summary:");
        println!();
        print_mmu_summary("medians", "kernels", &summary);
        if !modes.contains(&Mode::Epoch) {
            println!("{MMU_NOT_AGAINST_EPOCHS}");
        }
    }
}
