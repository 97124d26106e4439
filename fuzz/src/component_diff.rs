//! The `component_diff` target: our `wasmtime::component` against
//! upstream Wasmtime 48's, on generated components (docs/fuzzing.md).
//!
//! An input becomes a [`draw::Case`]: 1–4 random function signatures over
//! every interface type, one or more layers of forwarding components
//! ([`text`]) with random string encodings, post-return functions and
//! now and then a deliberately invalid value, and a list of calls with
//! random arguments and random host behaviour. Both engines run the same
//! steps ([`ours::run`], [`upstream::run`]) and every step must agree:
//! results, the kind of failure, the arguments each host call received,
//! and after each call every layer's `realloc` count, argument hash, bump
//! pointer and memory hash.

pub mod draw;
pub mod text;

use crate::stats;
use draw::V;

/// The message of the error the host functions return on purpose.
pub const HOST_ERROR: &str = "cdiff: host function fails on purpose";

/// What one step came to.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Success, with the results (none for compile and instantiate).
    Ok(Vec<V>),
    /// The host function's own error came back.
    HostError,
    /// A trap: its `Debug` name (compared) and its message.
    Trap(String, String),
    /// Any other error; the message is only reported, never compared.
    Error(String),
}

impl PartialEq for Outcome {
    fn eq(&self, other: &Outcome) -> bool {
        match (self, other) {
            (Outcome::Ok(a), Outcome::Ok(b)) => a == b,
            (Outcome::HostError, Outcome::HostError) => true,
            (Outcome::Trap(a, _), Outcome::Trap(b, _)) => a == b,
            (Outcome::Error(_), Outcome::Error(_)) => true,
            _ => false,
        }
    }
}

/// One step: what it was, its outcome, and the host calls made during
/// it (import index, arguments).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// `compile`, `instantiate`, `call` or `stats`.
    pub what: &'static str,
    /// How it ended.
    pub outcome: Outcome,
    /// The host calls it made.
    pub host: Vec<(usize, Vec<V>)>,
}

impl Step {
    fn new(what: &'static str, outcome: Outcome) -> Step {
        Step {
            what,
            outcome,
            host: Vec::new(),
        }
    }
}

/// Our engine.
pub mod ours {
    use wasmtime as wt;
    include!("component_diff/engine_body.rs");
}

/// Upstream Wasmtime 48, the oracle.
pub mod upstream {
    use upstream_wasmtime as wt;
    include!("component_diff/engine_body.rs");
}

/// Runs one fuzz input; panics with a report on a divergence.
pub fn run(data: &[u8]) {
    let mut u = arbitrary::Unstructured::new(data);
    let avoid = avoid();
    let Ok(case) = draw::draw_case(&mut u, avoid) else {
        stats::bump("skip_input_too_short");
        return;
    };
    let text = text::component(&case);
    let wasm = match wat::parse_str(&text) {
        Ok(w) => w,
        Err(e) => panic!("the generator wrote invalid text: {e}\n{text}"),
    };
    if std::env::var_os("CDIFF_PRINT").is_some() {
        eprintln!("{text}\n{case:#?}");
    }
    let up = upstream::run(&wasm, &case, avoid.calls_after_failure);
    let ours = ours::run(&wasm, &case, avoid.calls_after_failure);
    if let Some(Step {
        outcome: Outcome::Error(e),
        what: "compile",
        ..
    }) = up.first()
    {
        // The generator should only write valid components.
        panic!("upstream refuses the component: {e}\n{text}");
    }
    for (i, (a, b)) in up.iter().zip(&ours).enumerate() {
        if !same(a, b, avoid) {
            divergence(&text, &case, &up, &ours, i);
        }
    }
    if up.len() != ours.len() {
        divergence(&text, &case, &up, &ours, up.len().min(ours.len()));
    }
    count(&case, &up);
}

/// Whether upstream's step `up` and ours agree, given the known bugs
/// `avoid` tolerates.
fn same(up: &Step, ours: &Step, avoid: draw::Avoid) -> bool {
    if up == ours {
        return true;
    }
    if up.what != ours.what || up.host != ours.host {
        return false;
    }
    match (&up.outcome, &ours.outcome) {
        (Outcome::Trap(_, msg), Outcome::Error(text))
            if avoid.adapter_traps && text.contains(msg) =>
        {
            stats::bump("known_bug_2_adapter_trap_not_a_trap");
            true
        }
        _ => false,
    }
}

/// The switches, read once.
fn avoid() -> draw::Avoid {
    static AVOID: std::sync::OnceLock<draw::Avoid> = std::sync::OnceLock::new();
    *AVOID.get_or_init(|| {
        let avoid = draw::Avoid::from_env();
        eprintln!("component_diff: avoiding {avoid:?}");
        avoid
    })
}

fn count(case: &draw::Case, steps: &[Step]) {
    stats::bump("cases");
    stats::add("layers", case.layers.len() as u64);
    if case.layers.len() > 1 {
        stats::bump("cases_nested");
    }
    for s in &case.sigs {
        if s.params_indirect() {
            stats::bump("sigs_params_indirect");
        }
        if s.results_indirect() {
            stats::bump("sigs_results_indirect");
        }
    }
    for step in steps {
        stats::add("host_calls", step.host.len() as u64);
        let kind = match (step.what, &step.outcome) {
            ("call", Outcome::Ok(_)) => "calls_ok",
            ("call", Outcome::HostError) => "calls_host_error",
            ("call", Outcome::Trap(..)) => "calls_trap",
            ("call", Outcome::Error(_)) => "calls_error",
            ("instantiate", Outcome::Ok(_)) => "instantiated",
            ("instantiate", _) => "instantiate_failed",
            ("stats", Outcome::Ok(_)) => "stats_ok",
            ("stats", _) => "stats_failed",
            _ => continue,
        };
        stats::bump(kind);
    }
}

fn divergence(text: &str, case: &draw::Case, up: &[Step], ours: &[Step], at: usize) -> ! {
    let show = |steps: &[Step]| {
        steps
            .iter()
            .enumerate()
            .map(|(i, s)| format!("  [{i}] {s:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    panic!(
        "component_diff: divergence at step {at}\n== component\n{text}\n== case\n{case:#?}\n\
         == upstream\n{}\n== ours\n{}",
        show(up),
        show(ours)
    );
}
