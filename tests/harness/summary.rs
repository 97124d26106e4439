//! The last line of every `harness = false` suite.

/// Prints `{label}: P passed, F failed, S skipped`, the line that scripts
/// and people look for at the end of a run, in one format for all suites.
pub fn print_summary(label: &str, passed: usize, failed: usize, skipped: usize) {
    println!("{label}: {passed} passed, {failed} failed, {skipped} skipped");
}
