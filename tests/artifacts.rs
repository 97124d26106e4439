//! Precompiled modules and the compile cache, through the public API:
//! `Module::serialize`, `Module::deserialize(_file)`,
//! `Engine::precompile_module`, `Config::cache`.

use std::sync::Arc;
use wasmtime::*;

/// A module that exercises what an artifact must carry besides code: a
/// memory with data, a table with elements, globals, a start function,
/// imports, exports and names (for backtraces).
const MODULE: &str = r#"
(module $artifact_test
  (import "host" "add_one" (func $add_one (param i32) (result i32)))
  (memory (export "mem") 1)
  (data (i32.const 16) "precompiled")
  (table 4 funcref)
  (elem (i32.const 1) $double $boom)
  (global $counter (mut i32) (i32.const 5))
  (global (export "seven") i32 (i32.const 7))
  (type $unary (func (param i32) (result i32)))
  (func $start (global.set $counter (i32.add (global.get $counter) (i32.const 1))))
  (start $start)
  (func $double (param i32) (result i32) (i32.mul (local.get 0) (i32.const 2)))
  (func $boom (param i32) (result i32) unreachable)
  (func (export "call") (param i32 i32) (result i32)
    (call_indirect (type $unary) (local.get 1) (local.get 0)))
  (func (export "counter") (result i32) (global.get $counter))
  (func (export "via_host") (param i32) (result i32) (call $add_one (local.get 0)))
  (func (export "byte") (param i32) (result i32) (i32.load8_u (local.get 0)))
  (func (export "floor") (param f64) (result f64) (f64.floor (local.get 0))))
"#;

fn instantiate(engine: &Engine, module: &Module) -> (Store<()>, Instance) {
    let mut store = Store::new(engine, ());
    let add_one = Func::wrap(&mut store, |x: i32| x + 1);
    let instance = Instance::new(&mut store, module, &[add_one.into()]).unwrap();
    (store, instance)
}

/// Everything the module does, as one comparable record.
fn behaviour(engine: &Engine, module: &Module) -> Vec<String> {
    let (mut store, instance) = instantiate(engine, module);
    let call = instance
        .get_typed_func::<(i32, i32), i32>(&mut store, "call")
        .unwrap();
    let byte = instance
        .get_typed_func::<i32, i32>(&mut store, "byte")
        .unwrap();
    let mut out = vec![
        format!("double {:?}", call.call(&mut store, (1, 21)).ok()),
        format!(
            "counter {:?}",
            instance
                .get_typed_func::<(), i32>(&mut store, "counter")
                .unwrap()
                .call(&mut store, ())
        ),
        format!(
            "host {:?}",
            instance
                .get_typed_func::<i32, i32>(&mut store, "via_host")
                .unwrap()
                .call(&mut store, 41)
        ),
        format!(
            "floor {:?}",
            instance
                .get_typed_func::<f64, f64>(&mut store, "floor")
                .unwrap()
                .call(&mut store, -1.5)
        ),
        format!(
            "data {:?}",
            (16..27)
                .map(|i| byte.call(&mut store, i).unwrap() as u8 as char)
                .collect::<String>()
        ),
        format!(
            "global {:?}",
            instance
                .get_global(&mut store, "seven")
                .map(|g| g.get(&mut store).i32())
        ),
        format!(
            "exports {:?}",
            module
                .exports()
                .map(|e| e.name().to_string())
                .collect::<Vec<_>>()
        ),
        format!(
            "imports {:?}",
            module
                .imports()
                .map(|i| i.name().to_string())
                .collect::<Vec<_>>()
        ),
        format!("name {:?}", module.name()),
    ];
    // A trap keeps its message and its backtrace (function names come from
    // the name section, offsets from the address map).
    let trap = call.call(&mut store, (2, 1)).unwrap_err();
    out.push(format!("trap {:?}", trap.downcast_ref::<Trap>()));
    out.push(format!(
        "backtrace {}",
        format!("{trap:?}")
            .lines()
            .filter(|l| l.contains("artifact_test"))
            .collect::<Vec<_>>()
            .join("|")
    ));
    let missing = call.call(&mut store, (7, 1)).unwrap_err();
    out.push(format!("oob {:?}", missing.downcast_ref::<Trap>()));
    out
}

#[test]
fn round_trip_behaves_like_the_original() {
    let engine = Engine::default();
    let module = Module::new(&engine, MODULE).unwrap();
    let want = behaviour(&engine, &module);
    assert!(want.iter().any(|l| l.contains("boom")), "{want:?}");

    let bytes = module.serialize().unwrap();
    // SAFETY: `bytes` is `module.serialize()` of this engine a few lines
    // above, held in memory and never written out, so it is an unaltered
    // artifact of this runtime.
    let loaded = unsafe { Module::deserialize(&engine, &bytes) }.unwrap();
    assert_eq!(behaviour(&engine, &loaded), want);
    // Serializing a loaded module gives the same artifact.
    assert_eq!(loaded.serialize().unwrap(), bytes);
    assert_eq!(engine.precompile_module(MODULE.as_bytes()).unwrap(), bytes);

    // Another engine with the same settings loads it too.
    let other = Engine::default();
    // SAFETY: `bytes` is the same in-memory artifact, made by this process,
    // and `other` has the default configuration of the engine that made it.
    let in_other = unsafe { Module::deserialize(&other, &bytes) }.unwrap();
    assert_eq!(behaviour(&other, &in_other), want);
}

#[test]
fn deserialize_file_maps_in_place_and_survives_unlink() {
    let engine = Engine::default();
    let bytes = engine.precompile_module(MODULE.as_bytes()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.cwasm");
    std::fs::write(&path, &bytes).unwrap();
    assert_eq!(
        engine.detect_precompiled_file(&path).unwrap(),
        Some(Precompiled::Module)
    );
    // SAFETY: the file holds this engine's `precompile_module` output,
    // written just above into this test's own temporary directory; nothing
    // writes or truncates it afterwards (it is only unlinked, which leaves
    // the mapping's pages in place).
    let module = unsafe { Module::deserialize_file(&engine, &path) }.unwrap();
    std::fs::remove_file(&path).unwrap();
    let original = Module::new(&engine, MODULE).unwrap();
    assert_eq!(behaviour(&engine, &module), behaviour(&engine, &original));
    // The module keeps its skeleton where the file is mapped instead of
    // copying it; serializing reads it from there, after the unlink too.
    assert_eq!(module.serialize().unwrap(), bytes);
    // SAFETY: the file was removed above, so opening it fails before
    // anything is mapped.
    let missing = unsafe { Module::deserialize_file(&engine, &path) }.unwrap_err();
    assert!(format!("{missing:#}").contains("m.cwasm"), "{missing:#}");
}

#[test]
fn detection_and_wrong_inputs() {
    let engine = Engine::default();
    let wasm = wat::parse_str(MODULE).unwrap();
    let bytes = engine.precompile_module(&wasm).unwrap();
    assert_eq!(engine.detect_precompiled(&bytes), Some(Precompiled::Module));
    assert_eq!(engine.detect_precompiled(&wasm), None);

    let err = |r: Result<Module>| format!("{:#}", r.unwrap_err());
    // Every input below is this test's own bytes (a Wasm binary, an ELF
    // header, or an artifact this engine made above, cut short or with a
    // bit flipped), and `err` panics on a load that succeeds without
    // instantiating it, so no unvetted machine code can run.
    // SAFETY: a plain Wasm binary of this test, refused as not an artifact
    // before anything is mapped.
    let e = err(unsafe { Module::deserialize(&engine, &wasm) });
    assert!(e.contains("is a WebAssembly binary"), "{e}");
    let e = err(Module::new(&engine, &bytes));
    assert!(e.contains("Module::deserialize"), "{e}");
    let e = format!("{:#}", engine.precompile_module(&bytes).unwrap_err());
    assert!(e.contains("Module::deserialize"), "{e}");
    // SAFETY: half of an artifact this engine made in memory above; `err`
    // would panic on a successful load without running anything.
    let e = err(unsafe { Module::deserialize(&engine, &bytes[..bytes.len() / 2]) });
    assert!(e.contains("truncated"), "{e}");
    // SAFETY: ten bytes of that in-memory artifact; nothing loaded runs.
    let e = err(unsafe { Module::deserialize(&engine, &bytes[..10]) });
    assert!(e.contains("truncated"), "{e}");
    for at in [70, bytes.len() / 2, bytes.len() - 1] {
        let mut bad = bytes.clone();
        bad[at] ^= 0x40;
        // SAFETY: the in-memory artifact with one bit flipped by this test,
        // which the checksum must catch; nothing loaded is ever run.
        let e = err(unsafe { Module::deserialize(&engine, &bad) });
        assert!(e.contains("corrupted"), "flip at {at}: {e}");
    }
    // SAFETY: a bare ELF header, too short to hold any code.
    let e = err(unsafe { Module::deserialize(&engine, b"\x7fELF\x02\x01\x01\x00") });
    assert!(e.contains("ELF"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.cwasm");
    std::fs::write(&empty, b"").unwrap();
    // SAFETY: an empty file this test just wrote in its own directory:
    // there is nothing to map, let alone run.
    let e = err(unsafe { Module::deserialize_file(&engine, &empty) });
    assert!(e.contains("empty"), "{e}");
}

/// Compiles with `compile` and loads into an engine built from `load`;
/// returns the load error's message.
fn mismatch(compile: impl Fn(&mut Config), load: impl Fn(&mut Config)) -> String {
    let mut c = Config::new();
    compile(&mut c);
    let bytes = Engine::new(&c)
        .unwrap()
        .precompile_module(MODULE.as_bytes())
        .unwrap();
    let mut l = Config::new();
    load(&mut l);
    let engine = Engine::new(&l).unwrap();
    // SAFETY: `bytes` was made just above, in memory, by an engine of this
    // build that differs only in configuration; a module that does load is
    // dropped at once without being instantiated, so none of its code runs.
    match unsafe { Module::deserialize(&engine, &bytes) } {
        Ok(_) => "loaded".to_string(),
        Err(e) => format!("{e:#}"),
    }
}

/// A change to a `Config`.
type Setting = Box<dyn Fn(&mut Config)>;

#[test]
fn each_code_shaping_setting_is_checked() {
    let none = |_: &mut Config| {};
    let cases: Vec<(&str, Setting, &str)> = vec![
        (
            "epochs",
            Box::new(|c: &mut Config| {
                c.epoch_interruption(true);
            }),
            "`epoch_interruption` = false, but this engine is configured with true",
        ),
        (
            "fuel",
            Box::new(|c: &mut Config| {
                c.consume_fuel(true);
            }),
            "`consume_fuel` = false",
        ),
        (
            "reservation",
            Box::new(|c: &mut Config| {
                c.memory_reservation(1 << 31);
            }),
            "`memory_reservation` = 4294967296",
        ),
        (
            "guard",
            Box::new(|c: &mut Config| {
                c.memory_guard_size(1 << 16);
            }),
            "`memory_guard_size`",
        ),
        (
            "feature",
            Box::new(|c: &mut Config| {
                c.wasm_simd(false);
            }),
            "WebAssembly feature `simd` enabled, but this engine has it disabled",
        ),
        (
            "relaxed SIMD",
            Box::new(|c: &mut Config| {
                c.relaxed_simd_deterministic(true);
            }),
            "`relaxed_simd_deterministic` = false, but this engine is configured with true",
        ),
        (
            "opt level",
            Box::new(|c: &mut Config| {
                c.cranelift_opt_level(OptLevel::None);
            }),
            "Cranelift setting `opt_level` = speed, but this engine uses none",
        ),
        (
            "nan canonicalization",
            Box::new(|c: &mut Config| {
                c.cranelift_nan_canonicalization(true);
            }),
            "Cranelift setting `enable_nan_canonicalization`",
        ),
    ];
    for (what, load, want) in cases {
        let msg = mismatch(none, load);
        assert!(
            msg.contains("not compatible with this engine"),
            "{what}: {msg}"
        );
        assert!(msg.contains(want), "{what}: {msg}");
    }
    // Settings that do not shape code are not compared.
    assert_eq!(
        mismatch(none, |c| {
            c.cranelift_debug_verifier(true).parallel_compilation(false);
        }),
        "loaded"
    );
}

#[test]
fn interruption_knobs_are_checked() {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        println!("skipped: MMU interruption runs on Linux x86_64 only");
        return;
    }
    let msg = mismatch(
        |_| {},
        |c| {
            c.mmu_interruption(true);
        },
    );
    assert!(msg.contains("`mmu_interruption` = false"), "{msg}");
    let msg = mismatch(
        |c| {
            c.mmu_interruption(true)
                .mmu_interruption_mode(MmuInterruptionMode::Mprotect);
        },
        |c| {
            c.mmu_interruption(true)
                .mmu_interruption_mode(MmuInterruptionMode::PointerSwap);
        },
    );
    assert!(
        msg.contains(
            "`mmu_interruption_mode` = mprotect, but this engine is configured with pointer-swap"
        ),
        "{msg}"
    );
}

#[test]
fn cpu_features_may_be_fewer_never_more() {
    #[cfg(target_arch = "x86_64")]
    {
        if !std::arch::is_x86_feature_detected!("sse4.1") {
            println!("skipped: this host has no SSE4.1 to switch off");
            return;
        }
        // SAFETY: switching a CPU feature off only narrows the instructions
        // Cranelift may use; the code stays correct.
        let without = |c: &mut Config| unsafe {
            c.cranelift_flag_set("has_sse41", "false");
        };
        // Code compiled for fewer features runs on an engine with more...
        assert_eq!(mismatch(without, |_| {}), "loaded");
        // ...but not the other way round.
        let msg = mismatch(|_| {}, without);
        assert!(msg.contains("compiled for a CPU with `has_sse41`"), "{msg}");
        // Without SSE4.1, `f64.floor` is a libcall: the artifact's
        // relocation must be patched in the loading process.
        let mut c = Config::new();
        without(&mut c);
        let bytes = Engine::new(&c)
            .unwrap()
            .precompile_module(MODULE.as_bytes())
            .unwrap();
        let engine = Engine::default();
        // SAFETY: `bytes` was compiled just above, in memory, by an engine
        // of this build for this host with SSE4.1 switched off, which the
        // default engine accepts (checked above), so the code is trusted.
        let module = unsafe { Module::deserialize(&engine, &bytes) }.unwrap();
        let (mut store, instance) = instantiate(&engine, &module);
        let floor = instance
            .get_typed_func::<f64, f64>(&mut store, "floor")
            .unwrap();
        assert_eq!(floor.call(&mut store, -1.5).unwrap(), -2.0);
    }
}

fn cache_in(dir: &std::path::Path) -> Cache {
    let mut config = CacheConfig::new();
    config.with_directory(dir);
    Cache::new(config).unwrap()
}

fn cached_engine(cache: &Cache) -> Engine {
    let mut config = Config::new();
    config.cache(Some(cache.clone()));
    Engine::new(&config).unwrap()
}

fn entries(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir.join("modules"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    v.sort();
    v
}

#[test]
fn cache_hits_the_second_time_and_replaces_a_corrupt_entry() {
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_in(dir.path());
    let engine = cached_engine(&cache);
    let want = behaviour(&engine, &Module::new(&engine, MODULE).unwrap());
    assert_eq!((cache.hits(), cache.misses()), (0, 1));
    let stored = entries(dir.path());
    assert_eq!(stored.len(), 1, "{stored:?}");

    let again = Module::new(&engine, MODULE).unwrap();
    assert_eq!((cache.hits(), cache.misses()), (1, 1));
    assert_eq!(behaviour(&engine, &again), want);

    // Damage the entry (in a new file, as a disk error would look to a
    // reader): it is detected, compiled again and replaced.
    let mut bytes = std::fs::read(&stored[0]).unwrap();
    let at = bytes.len() - 3;
    bytes[at] ^= 0xff;
    std::fs::remove_file(&stored[0]).unwrap();
    std::fs::write(&stored[0], &bytes).unwrap();
    let recompiled = Module::new(&engine, MODULE).unwrap();
    assert_eq!(cache.replaced_corrupt(), 1);
    assert_eq!(behaviour(&engine, &recompiled), want);
    let fixed = Module::new(&engine, MODULE).unwrap();
    assert_eq!(cache.hits(), 2);
    assert_eq!(behaviour(&engine, &fixed), want);

    // A different engine setting is a different entry, not a failed load.
    let mut epochs = Config::new();
    epochs.cache(Some(cache.clone())).epoch_interruption(true);
    Module::new(&Engine::new(&epochs).unwrap(), MODULE).unwrap();
    assert_eq!(cache.replaced_corrupt(), 1);
    assert_eq!(entries(dir.path()).len(), 2);
}

#[test]
fn concurrent_compiles_of_one_module_both_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let cache = cache_in(dir.path());
    let barrier = Arc::new(std::sync::Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let cache = cache.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let engine = cached_engine(&cache);
                barrier.wait();
                let module = Module::new(&engine, MODULE).unwrap();
                behaviour(&engine, &module)
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(results.windows(2).all(|w| w[0] == w[1]));
    assert_eq!(cache.hits() + cache.misses(), 4);
    assert_eq!(cache.replaced_corrupt(), 0);
    assert_eq!(entries(dir.path()).len(), 1);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("modules"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_none_or(|e| e != "cwasm"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

/// `Config::target`: an engine for another target writes artifacts for it
/// and refuses to load code into this process; this host refuses its
/// artifacts by target.
#[test]
fn cross_compiled_artifacts_are_written_not_run() {
    let mut config = Config::new();
    let Err(e) = config.target("not a triple") else {
        panic!("refused")
    };
    assert!(e.to_string().contains("not a target triple"), "{e}");
    let e = match Engine::new(Config::new().target("riscv64gc-unknown-linux-gnu").unwrap()) {
        Ok(_) => panic!("riscv64 is not supported"),
        Err(e) => format!("{e:#}"),
    };
    assert!(e.contains("riscv64"), "{e}");

    config.target("aarch64-unknown-linux-gnu").unwrap();
    let aarch64 = Engine::new(&config).unwrap();
    let artifact = aarch64.precompile_module(MODULE.as_bytes()).unwrap();
    let component = aarch64
        .precompile_component(
            br#"(component
                  (core module $m (func (export "f") (result i32) i32.const 7))
                  (core instance $i (instantiate $m))
                  (func (export "f") (result u32) (canon lift (core func $i "f"))))"#,
        )
        .unwrap();
    let err = |r: Result<Module>| format!("{:#}", r.expect_err("refused"));
    for e in [
        err(Module::new(&aarch64, MODULE)),
        // SAFETY: refused before anything is mapped executable.
        err(unsafe { Module::deserialize(&aarch64, &artifact) }),
    ] {
        assert!(
            e.contains("compiles for `aarch64-unknown-linux-gnu`")
                && e.contains("not for this host"),
            "{e}"
        );
    }
    let e = match component::Component::new(&aarch64, "(component)") {
        Ok(_) => panic!("refused"),
        Err(e) => format!("{e:#}"),
    };
    assert!(e.contains("cannot compile a component to run"), "{e}");
    // SAFETY: `component` was made above by `aarch64` in this process; an
    // engine for another target refuses to load anything to run here.
    let e = match unsafe { component::Component::deserialize(&aarch64, &component) } {
        Ok(_) => panic!("refused"),
        Err(e) => format!("{e:#}"),
    };
    assert!(e.contains("cannot load a precompiled component"), "{e}");

    let host = Engine::default();
    // SAFETY: refused by its recorded target before anything is mapped.
    let e = err(unsafe { Module::deserialize(&host, &artifact) });
    assert!(
        e.contains("compiled for target `aarch64-unknown-linux-gnu`"),
        "{e}"
    );
    // SAFETY: `component` was made above by `aarch64` in this process and
    // is refused by its recorded target before any module is mapped.
    let e = match unsafe { component::Component::deserialize(&host, &component) } {
        Ok(_) => panic!("refused"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        e.contains("precompiled component was compiled for target `aarch64"),
        "{e}"
    );
    // The host's own triple, named explicitly, runs here (baseline CPU).
    let mut explicit = Config::new();
    explicit.target(&target_lexicon::HOST.to_string()).unwrap();
    let explicit = Engine::new(&explicit).unwrap();
    let module = Module::new(&explicit, MODULE).unwrap();
    assert_eq!(
        behaviour(&explicit, &module),
        behaviour(&host, &Module::new(&host, MODULE).unwrap())
    );
}
