//! Damaged precompiled modules: a module (from `wasm-smith` or the seed
//! corpus, as for `differential`) is compiled and serialized, then the rest
//! of the input edits the artifact: byte flips, a truncation, an appended
//! tail, and, half of the time, a fresh checksum so that the edit reaches
//! the checks behind it. `Module::deserialize` (or, for a quarter of the
//! inputs, `Module::deserialize_file` of the artifact written to a scratch
//! file, which keeps the tables where the file is mapped) must then return
//! `Err` or a module, never panic or crash. An unedited artifact must load and have
//! the original's exports; an artifact whose edits all fell in the machine
//! code may load (the code is trusted by contract) but is never run.
//!
//! A quarter of the inputs take the module inside a component instead
//! (the component binary holds it as its one core module), and damage the
//! component artifact, which `Component::deserialize` must likewise refuse
//! or load: the component's own envelope and module table, and the module
//! artifact nested in it, are both in reach of the edits.

#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use wasmtime_mmu_fuzz::config::OursConfig;
use wasmtime_mmu_fuzz::engines::{ours_compile, ours_engine};
use wasmtime_mmu_fuzz::generate::{Purpose, module_and_rest};
use wasmtime_mmu_fuzz::stats;

fuzz_target!(|data: &[u8]| {
    let Some((wasm, mut u)) = module_and_rest(data, Purpose::Differential) else {
        stats::exec_done();
        return;
    };
    let engine = ours_engine(&OursConfig::plain());
    let Some(Ok(module)) = ours_compile(&engine, &wasm) else {
        stats::exec_done();
        return;
    };
    if u.ratio(1, 4u8).unwrap_or(false) {
        damaged_component(component_engine(), &wasm, &mut u);
        stats::exec_done();
        return;
    }
    let original = module.serialize().expect("a compiled module serializes");
    let mut artifact = original.clone();
    let _ = edit(&mut u, &mut artifact);
    // A quarter of the artifacts are loaded from a file, which keeps its
    // tables where the file is mapped instead of copying them.
    let loaded = if u.ratio(1, 4u8).unwrap_or(false) {
        stats::bump("from_file");
        load_from_file(&engine, &artifact)
    } else {
        // SAFETY: the bytes are deliberately damaged, which the `# Safety`
        // of `deserialize` forbids only because loaded machine code runs
        // unchecked; here a loaded module is never instantiated, only its
        // exports are read before it drops, so no artifact code runs.
        // Loading itself must withstand any bytes: that is what is tested.
        unsafe { wasmtime::Module::deserialize(&engine, &artifact) }
    };
    match loaded {
        Ok(loaded) => {
            if artifact == original {
                stats::bump("unedited_loaded");
                let names = |m: &wasmtime::Module| {
                    m.exports()
                        .map(|e| e.name().to_string())
                        .collect::<Vec<_>>()
                };
                assert_eq!(names(&loaded), names(&module));
            } else {
                stats::bump("edited_loaded");
            }
        }
        Err(e) => {
            assert!(
                artifact != original,
                "an unedited artifact was refused: {e:#}"
            );
            stats::bump("refused");
        }
    }
    stats::exec_done();
});

/// Writes `artifact` to this process's scratch file and loads it with
/// `Module::deserialize_file`.
fn load_from_file(
    engine: &wasmtime::Engine,
    artifact: &[u8],
) -> wasmtime::Result<wasmtime::Module> {
    let path = std::env::temp_dir().join(format!(
        "wasmtime-fuzz-deserialize-{}.cwasm",
        std::process::id()
    ));
    std::fs::write(&path, artifact).expect("the scratch file is writable");
    // SAFETY: the damaged code is never run (the module is only inspected,
    // then dropped), and loading must withstand any bytes. The file is this
    // process's own (named by its id); libFuzzer runs one input at a time,
    // so it is rewritten only by the next input, after this module drops.
    unsafe { wasmtime::Module::deserialize_file(engine, &path) }
}

/// The engine of `plain` with the component model on (the fuzzing
/// configurations fix the WebAssembly features, the component model off),
/// built once.
fn component_engine() -> &'static wasmtime::Engine {
    static ENGINE: std::sync::OnceLock<wasmtime::Engine> = std::sync::OnceLock::new();
    ENGINE.get_or_init(|| {
        let mut config = OursConfig::plain().engine_config();
        config.wasm_component_model(true);
        wasmtime::Engine::new(&config).expect("the plain configuration with components")
    })
}

/// The component whose one core module is `wasm` (a component binary's
/// header, then a core module section), compiled, serialized, damaged
/// and loaded again.
fn damaged_component(engine: &wasmtime::Engine, wasm: &[u8], u: &mut Unstructured<'_>) {
    let mut encoder = wasm_encoder::Component::new();
    encoder.section(&wasm_encoder::RawSection {
        id: wasm_encoder::ComponentSectionId::CoreModule as u8,
        data: wasm,
    });
    let binary = encoder.finish();
    // A module the component model refuses (it may use features a
    // component may not) is simply not a component input.
    let Ok(component) = wasmtime::component::Component::new(engine, &binary) else {
        stats::bump("component_refused_at_compile");
        return;
    };
    let original = component
        .serialize()
        .expect("a compiled component serializes");
    let mut artifact = original.clone();
    let _ = edit(u, &mut artifact);
    // SAFETY: the damaged artifact's code never runs: a loaded component is
    // only counted and dropped, never instantiated. Loading must withstand
    // any bytes, which is what this target tests.
    let loaded = unsafe { wasmtime::component::Component::deserialize(engine, &artifact) };
    match loaded {
        Ok(_) if artifact == original => stats::bump("component_unedited_loaded"),
        Ok(_) => stats::bump("component_edited_loaded"),
        Err(e) => {
            assert!(
                artifact != original,
                "an unedited component artifact was refused: {e:#}"
            );
            stats::bump("component_refused");
        }
    }
}

/// Applies the edits the input asks for.
fn edit(u: &mut Unstructured<'_>, artifact: &mut Vec<u8>) -> arbitrary::Result<()> {
    let flips = u.int_in_range(0..=8u8)?;
    for _ in 0..flips {
        if artifact.is_empty() {
            break;
        }
        let at = u.choose_index(artifact.len())?;
        artifact[at] ^= u.int_in_range(1..=255u8)?;
    }
    if u.ratio(1, 8)? {
        let len = u.choose_index(artifact.len() + 1)?;
        artifact.truncate(len);
    }
    if u.ratio(1, 16)? {
        let tail: Vec<u8> = u.arbitrary()?;
        artifact.extend_from_slice(&tail);
    }
    if u.arbitrary::<bool>()? {
        wasmtime::__reseal_artifact_for_fuzzing(artifact);
    }
    Ok(())
}
