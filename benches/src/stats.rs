//! Medians and ratios, and sizing the batches they are taken over.

use std::time::{Duration, Instant};

/// The median of `samples` (the mean of the middle two for an even count).
pub fn median(samples: &[Duration]) -> Duration {
    let secs: Vec<f64> = samples.iter().map(Duration::as_secs_f64).collect();
    Duration::from_secs_f64(median_f64(&secs))
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median_f64(values: &[f64]) -> f64 {
    assert!(!values.is_empty(), "median of no values");
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    }
}

/// `ours / theirs` as a float.
pub fn ratio(ours: Duration, theirs: Duration) -> f64 {
    ours.as_secs_f64() / theirs.as_secs_f64()
}

/// The geometric mean of `values`.
pub fn geomean(values: &[f64]) -> f64 {
    let log_sum: f64 = values.iter().map(|v| v.ln()).sum();
    (log_sum / values.len() as f64).exp()
}

/// Milliseconds with three decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

/// How many units `run` must do to take about `target`: after one warm-up
/// run of 200 units, runs of 100, 400, 1,600, ... units until one takes at
/// least a quarter of `target`, scaled from that one. At least 1.
pub fn batch_for<E>(target: Duration, mut run: impl FnMut(u64) -> Result<(), E>) -> Result<u64, E> {
    run(200)?;
    let mut n = 100u64;
    loop {
        let start = Instant::now();
        run(n)?;
        let took = start.elapsed();
        if took >= target / 4 {
            let per = took.as_secs_f64() / n as f64;
            return Ok(((target.as_secs_f64() / per) as u64).max(1));
        }
        n *= 4;
    }
}
