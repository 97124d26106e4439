//! Real guest components under a stub WASI host, in our engine and in
//! upstream Wasmtime 48: `cargo test --release --test real_guests`.
//!
//! `ci/build-guests.sh` builds the guests from registry packages into
//! `target/guests/` ($WASMTIME_REAL_GUESTS_DIR): two componentize-py
//! components (a `wasi:cli/command` that prints a line, a `wasi:http/proxy`
//! whose handler answers with a fixed body) and a C program compiled to a
//! WASI preview1 core module, which this test turns into a
//! `wasi:cli/command` component with wit-component and upstream's preview1
//! command adapter (both Rust crates, pinned in Cargo.lock, so no other
//! tool is needed).
//!
//! Each guest is compiled, linked against a stub host that defines every
//! import the guest's WIT world lists (`real_guests/host.rs`: the few
//! functions the guests call are implemented, the rest trap with "stub:
//! <name> not implemented"), instantiated, and its export is called:
//! `wasi:cli/run#run` must return `ok` and print the expected line; the
//! handler must set a 200 response with the expected, finished body. Both
//! engines must leave the same outcome: output, response, and the same
//! sequence of host calls.
//!
//! Without the guests the test says why and which command builds them, and
//! passes as skipped, unless `WASMTIME_REQUIRE_REAL_GUESTS=1`, when a
//! missing guest fails it. Prints `real-guests: P passed, F failed, S
//! skipped` (guest × engine cases), so it runs without libtest.

#[path = "real_guests/plan.rs"]
mod plan;

/// Our engine.
mod ours {
    use wasmtime as wt;

    include!("real_guests/host.rs");
}

/// Upstream Wasmtime 48, the reference.
mod upstream {
    use upstream_wasmtime as wt;

    /// The names of the component's imports by upstream's reflection
    /// (an independent check of the WIT-derived plan).
    pub fn import_names(bytes: &[u8]) -> Result<Vec<String>, String> {
        let engine = engine().map_err(|e| format!("{e:?}"))?;
        let component = Component::new(&engine, bytes).map_err(|e| format!("{e:?}"))?;
        let ty = component.component_type();
        let names = ty
            .imports(&engine)
            .map(|(name, _)| name.to_string())
            .collect();
        Ok(names)
    }

    include!("real_guests/host.rs");
}

use plan::{Outcome, Plan};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How a guest is made from what ci/build-guests.sh built.
enum Source {
    /// A component, as built.
    Component(&'static str),
    /// A preview1 core module, to wrap with the command adapter.
    CoreCommand(&'static str),
}

/// What a guest's run must leave.
enum Expect {
    Stdout(&'static str),
    Response(u16, &'static str),
}

struct Guest {
    name: &'static str,
    source: Source,
    call: Call,
    expect: Expect,
}

/// Which export is called (the same enum exists in both engine modules).
#[derive(Clone, Copy)]
enum Call {
    Run,
    Handle,
}

const GUESTS: &[Guest] = &[
    Guest {
        name: "py-command",
        source: Source::Component("py-command.wasm"),
        call: Call::Run,
        expect: Expect::Stdout("hello from a python component\n"),
    },
    Guest {
        name: "py-proxy",
        source: Source::Component("py-proxy.wasm"),
        call: Call::Handle,
        expect: Expect::Response(200, "hello from a python proxy"),
    },
    Guest {
        name: "c-hello",
        source: Source::CoreCommand("c-hello.core.wasm"),
        call: Call::Run,
        expect: Expect::Stdout("hello from a c component\n"),
    },
];

fn guests_dir() -> PathBuf {
    match std::env::var_os("WASMTIME_REAL_GUESTS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/guests"),
    }
}

/// Wraps a WASI preview1 core module into a `wasi:cli/command` component
/// with upstream's preview1 command adapter.
fn command_component(core: &[u8]) -> anyhow::Result<Vec<u8>> {
    use wasi_preview1_component_adapter_provider as adapters;
    wit_component::ComponentEncoder::default()
        .validate(true)
        .module(core)?
        .adapter(
            adapters::WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            adapters::WASI_SNAPSHOT_PREVIEW1_COMMAND_ADAPTER,
        )?
        .encode()
}

/// Checks what a run left against what the guest must do.
fn check_expected(expect: &Expect, outcome: &Outcome) -> Result<(), String> {
    match expect {
        Expect::Stdout(line) => {
            if outcome.stdout != line.as_bytes() {
                return Err(format!(
                    "stdout is {:?}, expected {line:?} (stderr {:?})",
                    String::from_utf8_lossy(&outcome.stdout),
                    String::from_utf8_lossy(&outcome.stderr)
                ));
            }
        }
        Expect::Response(status, body) => match &outcome.response {
            Some((got, bytes, true)) if got == status && bytes == body.as_bytes() => {}
            other => {
                return Err(format!(
                    "the response is {other:?} (status, body, finished), expected ({status}, {body:?}, true); stderr {:?}",
                    String::from_utf8_lossy(&outcome.stderr)
                ));
            }
        },
    }
    Ok(())
}

/// Counts of the summary line.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    skipped: usize,
}

/// Loads one guest, checks the plan against upstream's reflection, runs it
/// in both engines and compares.
fn run_guest(guest: &Guest, dir: &Path, require: bool, tally: &mut Tally) {
    let file = match guest.source {
        Source::Component(file) | Source::CoreCommand(file) => dir.join(file),
    };
    let bytes = match std::fs::read(&file) {
        Ok(bytes) => bytes,
        Err(e) => {
            let why = format!(
                "{} is missing ({e}); build the guests with `ci/build-guests.sh` \
                 (needs PyPI the first time, and the Debian packages of ci/install.sh)",
                file.display()
            );
            if require {
                println!(
                    "FAIL {}: {why} (WASMTIME_REQUIRE_REAL_GUESTS=1)",
                    guest.name
                );
                tally.failed += 2;
            } else {
                println!("skip {}: {why}", guest.name);
                tally.skipped += 2;
            }
            return;
        }
    };
    let bytes = match guest.source {
        Source::Component(_) => bytes,
        Source::CoreCommand(_) => match command_component(&bytes) {
            Ok(component) => component,
            Err(e) => {
                println!(
                    "FAIL {}: wrapping {} with the command adapter: {e:?}",
                    guest.name,
                    file.display()
                );
                tally.failed += 2;
                return;
            }
        },
    };
    let plan = match Plan::of_component(&bytes) {
        Ok(plan) => plan,
        Err(e) => {
            println!("FAIL {}: reading its WIT world: {e:?}", guest.name);
            tally.failed += 2;
            return;
        }
    };
    println!(
        "{}: {:.1} MB, imports {} interfaces with {} functions and {} resource types; exports {:?}",
        guest.name,
        bytes.len() as f64 / 1e6,
        plan.instances.len(),
        plan.func_count(),
        plan.resource_count(),
        plan.exports
    );
    // The stub host is built from the WIT world; upstream's reflection
    // must list the same imports.
    let mut from_wit: Vec<String> = plan.instances.iter().map(|i| i.name.clone()).collect();
    from_wit.extend(plan.root_funcs.iter().cloned());
    from_wit.extend(plan.root_resources.iter().cloned());
    from_wit.sort();
    match upstream::import_names(&bytes) {
        Ok(mut names) => {
            names.sort();
            if names != from_wit {
                println!(
                    "FAIL {}: the WIT world's imports {from_wit:?} are not upstream's {names:?}",
                    guest.name
                );
                tally.failed += 2;
                return;
            }
        }
        Err(e) => {
            println!("FAIL {}: upstream's reflection: {e}", guest.name);
            tally.failed += 2;
            return;
        }
    }

    let upstream_result = upstream::run(
        &bytes,
        &plan,
        match guest.call {
            Call::Run => upstream::Call::Run,
            Call::Handle => upstream::Call::Handle,
        },
    );
    let ours_result = ours::run(
        &bytes,
        &plan,
        match guest.call {
            Call::Run => ours::Call::Run,
            Call::Handle => ours::Call::Handle,
        },
    );
    let upstream_outcome =
        match upstream_result.and_then(|o| check_expected(&guest.expect, &o).map(|()| o)) {
            Ok(outcome) => {
                println!(
                    "ok   {} [upstream]: {} implemented imports called",
                    guest.name,
                    outcome.calls.len()
                );
                tally.passed += 1;
                Some(outcome)
            }
            Err(e) => {
                println!("FAIL {} [upstream]: {e}", guest.name);
                tally.failed += 1;
                None
            }
        };
    match ours_result.and_then(|o| check_expected(&guest.expect, &o).map(|()| o)) {
        Ok(outcome) => match &upstream_outcome {
            Some(reference) if *reference != outcome => {
                println!(
                    "FAIL {} [ours]: a different outcome from upstream's\n  ours:     {outcome:?}\n  upstream: {reference:?}",
                    guest.name
                );
                tally.failed += 1;
            }
            _ => {
                println!(
                    "ok   {} [ours]: {} implemented imports called ({:?}), same as upstream",
                    guest.name,
                    outcome.calls.len(),
                    outcome.calls
                );
                tally.passed += 1;
            }
        },
        Err(e) => {
            println!("FAIL {} [ours]: {e}", guest.name);
            tally.failed += 1;
        }
    }
}

fn main() -> ExitCode {
    let dir = guests_dir();
    let require = std::env::var("WASMTIME_REQUIRE_REAL_GUESTS").as_deref() == Ok("1");
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut tally = Tally::default();
    for guest in GUESTS {
        if !filter.is_empty() && !filter.iter().any(|f| guest.name.contains(f.as_str())) {
            continue;
        }
        run_guest(guest, &dir, require, &mut tally);
    }
    println!(
        "real-guests: {} passed, {} failed, {} skipped",
        tally.passed, tally.failed, tally.skipped
    );
    if tally.failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
