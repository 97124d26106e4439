//! Checks of the generated code: trap sites, the address map, relocations,
//! resolved calls, bounds checks, and the epoch and fuel checks.

use wasmparser::{Operator, WasmFeatures};
use wasmtime_mmu_cranelift::{ClifForTest, Compiler, CompilerConfig};
use wasmtime_mmu_environ::builtins::HostLibcall;
use wasmtime_mmu_environ::{
    CompiledModuleArtifacts, ModuleTranslation, Trap, TrapSiteKind, Tunables, WasmFuncType,
    WasmValType,
};

fn features() -> WasmFeatures {
    WasmFeatures::WASM2 | WasmFeatures::MULTI_MEMORY | WasmFeatures::EXTENDED_CONST
}

fn compiler(tunables: &Tunables) -> Compiler {
    let config = CompilerConfig {
        enable_verifier: true,
        ..CompilerConfig::default()
    };
    Compiler::new(&config, tunables).unwrap()
}

fn compile(wat: &str, tunables: &Tunables) -> (Vec<u8>, CompiledModuleArtifacts) {
    let wasm = wat::parse_str(wat).unwrap();
    let artifacts = compiler(tunables)
        .compile_module(ModuleTranslation::new(features(), &wasm).unwrap())
        .unwrap();
    (wasm, artifacts)
}

fn clif(wat: &str, func: u32, tunables: &Tunables) -> ClifForTest {
    let wasm = wat::parse_str(wat).unwrap();
    compiler(tunables)
        .compile_function_clif_for_test(ModuleTranslation::new(features(), &wasm).unwrap(), func)
        .unwrap()
}

/// Offsets in `wasm` of the operators of function bodies for which `pick`
/// is true.
fn operator_offsets(wasm: &[u8], pick: impl Fn(&Operator<'_>) -> bool) -> Vec<u32> {
    let mut out = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        if let wasmparser::Payload::CodeSectionEntry(body) = payload.unwrap() {
            let mut ops = body.get_operators_reader().unwrap();
            while !ops.eof() {
                let (op, offset) = ops.read_with_offset().unwrap();
                if pick(&op) {
                    out.push(offset as u32);
                }
            }
        }
    }
    out
}

fn kinds_in(artifacts: &CompiledModuleArtifacts, func: usize) -> Vec<TrapSiteKind> {
    let range = artifacts.functions.values().nth(func).unwrap().range();
    artifacts
        .trap_sites
        .iter()
        .filter(|t| range.contains(&t.code_offset))
        .map(|t| t.kind)
        .collect()
}

fn wasm_offset_at(artifacts: &CompiledModuleArtifacts, code_offset: u32) -> u32 {
    let i = artifacts
        .address_map
        .partition_point(|e| e.code_offset <= code_offset);
    artifacts.address_map[i - 1].wasm_offset
}

const DIVS: &str = r#"(module
  (func (export "div_u") (param i32 i32) (result i32)
    local.get 0 local.get 1 i32.div_u)
  (func (export "div_s") (param i64 i64) (result i64)
    local.get 0 local.get 1 i64.div_s)
  (func (export "trap") unreachable)
  (func (export "trunc") (param f64) (result i32) local.get 0 i32.trunc_f64_s))"#;

#[test]
fn trap_sites_and_address_map() {
    let (wasm, a) = compile(DIVS, &Tunables::default());
    assert_eq!(a.functions.len(), 4);
    assert_eq!(a.entry_trampolines.len(), 4, "one per type");
    assert!(a.trap_sites.is_sorted_by_key(|t| t.code_offset));
    assert!(a.address_map.is_sorted_by_key(|e| e.code_offset));
    assert!(a.relocations.is_empty());

    let t = |trap| TrapSiteKind::Trap(trap);
    let div_u = kinds_in(&a, 0);
    assert!(div_u.contains(&t(Trap::IntegerDivisionByZero)), "{div_u:?}");
    let div_s = kinds_in(&a, 1);
    assert!(div_s.contains(&t(Trap::IntegerDivisionByZero)), "{div_s:?}");
    assert!(div_s.contains(&t(Trap::IntegerOverflow)), "{div_s:?}");
    assert!(kinds_in(&a, 2).contains(&t(Trap::UnreachableCodeReached)));
    let trunc = kinds_in(&a, 3);
    assert!(
        trunc.contains(&t(Trap::BadConversionToInteger)),
        "{trunc:?}"
    );
    assert!(trunc.contains(&t(Trap::IntegerOverflow)), "{trunc:?}");

    // Each trap maps back to the Wasm operator that caused it.
    let div_u_at = operator_offsets(&wasm, |op| matches!(op, Operator::I32DivU))[0];
    let unreachable_at = operator_offsets(&wasm, |op| matches!(op, Operator::Unreachable))[0];
    for site in &a.trap_sites {
        match site.kind {
            TrapSiteKind::Trap(Trap::UnreachableCodeReached) => {
                assert_eq!(wasm_offset_at(&a, site.code_offset), unreachable_at)
            }
            TrapSiteKind::Trap(Trap::IntegerDivisionByZero)
                if a.functions
                    .values()
                    .next()
                    .unwrap()
                    .range()
                    .contains(&site.code_offset) =>
            {
                assert_eq!(wasm_offset_at(&a, site.code_offset), div_u_at)
            }
            _ => {}
        }
    }
    // Every Wasm offset in the map lies in the code section.
    for e in &a.address_map {
        assert!(e.wasm_offset == u32::MAX || (e.wasm_offset as usize) < wasm.len());
    }
}

#[test]
fn stack_limit_check_in_prologue() {
    let wat = r#"(module
      (func $f (param i32) (result i32)
        local.get 0 i32.eqz if (result i32) i32.const 0 else local.get 0 i32.const 1 i32.sub call $f end))"#;
    let (_, a) = compile(wat, &Tunables::default());
    assert!(kinds_in(&a, 0).contains(&TrapSiteKind::Trap(Trap::StackOverflow)));
    let c = clif(wat, 0, &Tunables::default());
    assert!(c.clif.contains("stack_limit"), "{}", c.clif);
}

const LOADS: &str = r#"(module (memory 1)
  (func (param i32) (result i32)
    (i32.add (i32.load offset=4 (local.get 0)) (i32.load8_u (local.get 0)))))"#;

#[test]
fn default_tunables_elide_bounds_checks() {
    let (_, a) = compile(LOADS, &Tunables::default());
    let kinds = kinds_in(&a, 0);
    let oob = kinds
        .iter()
        .filter(|k| **k == TrapSiteKind::Trap(Trap::MemoryOutOfBounds))
        .count();
    assert_eq!(oob, 2, "{kinds:?}");
    let c = clif(LOADS, 0, &Tunables::default());
    assert!(!c.clif.contains("icmp"), "{}", c.clif);
    assert!(!c.clif.contains("select_spectre_guard"), "{}", c.clif);
    assert!(!c.clif.contains("trapnz"), "{}", c.clif);
}

#[test]
fn no_reservation_means_explicit_checks() {
    let tunables = Tunables {
        memory_reservation: 0,
        ..Tunables::default()
    };
    let c = clif(LOADS, 0, &tunables);
    assert!(c.clif.contains("icmp"), "{}", c.clif);
    assert!(c.clif.contains("select_spectre_guard"), "{}", c.clif);
    let (_, a) = compile(LOADS, &tunables);
    assert!(kinds_in(&a, 0).contains(&TrapSiteKind::Trap(Trap::MemoryOutOfBounds)));

    // Without the guard region the checks cover the whole access.
    let tunables = Tunables {
        memory_reservation: 0,
        memory_guard_size: 0,
        guard_before_linear_memory: false,
        ..Tunables::default()
    };
    let c = clif(LOADS, 0, &tunables);
    assert!(c.clif.contains("icmp"), "{}", c.clif);
}

#[test]
fn big_offsets_are_checked() {
    // An offset beyond the guard needs a check even with a 4 GiB
    // reservation.
    let wat = r#"(module (memory 1)
      (func (param i32) (result i32) (i32.load offset=0x10000000 (local.get 0))))"#;
    let c = clif(wat, 0, &Tunables::default());
    assert!(c.clif.contains("icmp"), "{}", c.clif);
}

#[test]
fn calls_are_resolved_in_the_text() {
    let wat = r#"(module
      (func $callee (result i32) i32.const 42)
      (func (export "caller") (result i32) call $callee))"#;
    let target = "x86_64-unknown-linux-gnu";
    let config = CompilerConfig {
        enable_verifier: true,
        target: Some(target.parse().unwrap()),
        ..CompilerConfig::default()
    };
    let wasm = wat::parse_str(wat).unwrap();
    let a = Compiler::new(&config, &Tunables::default())
        .unwrap()
        .compile_module(ModuleTranslation::new(features(), &wasm).unwrap())
        .unwrap();
    assert!(a.relocations.is_empty());
    let callee = a.functions.values().next().unwrap().start;
    let caller = a.functions.values().nth(1).unwrap().range();
    assert_eq!(callee % 16, 0);
    assert_eq!(caller.start % 16, 0);
    // Find a `call rel32` in the caller whose target is the callee.
    let code = &a.text[caller.start as usize..caller.end as usize];
    let found = code.windows(5).enumerate().any(|(i, w)| {
        w[0] == 0xe8 && {
            let rel = i32::from_le_bytes(w[1..5].try_into().unwrap());
            let next = caller.start as i64 + i as i64 + 5;
            next + rel as i64 == callee as i64
        }
    });
    assert!(found, "no call to the callee in the caller");

    // aarch64: a `bl` whose target is the callee.
    let config = CompilerConfig {
        target: Some("aarch64-unknown-linux-gnu".parse().unwrap()),
        ..config
    };
    let a = Compiler::new(&config, &Tunables::default())
        .unwrap()
        .compile_module(ModuleTranslation::new(features(), &wasm).unwrap())
        .unwrap();
    let callee = a.functions.values().next().unwrap().start as i64;
    let caller = a.functions.values().nth(1).unwrap().range();
    let found = (caller.start..caller.end).step_by(4).any(|at| {
        let insn = u32::from_le_bytes(a.text[at as usize..at as usize + 4].try_into().unwrap());
        insn >> 26 == 0b100101 && {
            let imm = ((insn & 0x03ff_ffff) << 6) as i32 >> 6;
            at as i64 + i64::from(imm) * 4 == callee
        }
    });
    assert!(found, "no bl to the callee in the caller");
}

#[test]
fn libcalls_become_relocations() {
    // Baseline x86-64 has no SSE4.1 `roundss`, so `floor` is a libcall.
    let wat = r#"(module
      (func (param f32 f64) (result f32 f64)
        local.get 0 f32.floor local.get 1 f64.nearest))"#;
    let config = CompilerConfig {
        enable_verifier: true,
        target: Some("x86_64-unknown-linux-gnu".parse().unwrap()),
        ..CompilerConfig::default()
    };
    let wasm = wat::parse_str(wat).unwrap();
    let a = Compiler::new(&config, &Tunables::default())
        .unwrap()
        .compile_module(ModuleTranslation::new(features(), &wasm).unwrap())
        .unwrap();
    let targets: Vec<HostLibcall> = a.relocations.iter().map(|r| r.target).collect();
    assert!(targets.contains(&HostLibcall::FloorF32), "{targets:?}");
    assert!(targets.contains(&HostLibcall::NearestF64), "{targets:?}");
    let f = a.functions.values().next().unwrap().range();
    for r in &a.relocations {
        assert!(f.start <= r.offset && r.offset + 8 <= f.end);
    }
}

#[test]
fn wasm_to_host_trampoline() {
    let c = compiler(&Tunables::default());
    let ty = WasmFuncType {
        params: vec![WasmValType::I32, WasmValType::V128, WasmValType::F64].into(),
        results: vec![WasmValType::I64; 9].into(),
    };
    let t = c.compile_wasm_to_host_trampoline(&ty).unwrap();
    assert!(!t.text.is_empty());
    assert!(t.relocations.is_empty());
    assert!(
        t.trap_sites
            .iter()
            .any(|s| s.kind == TrapSiteKind::HostCallFailed)
    );
    let aarch64 = Compiler::new(
        &CompilerConfig {
            enable_verifier: true,
            target: Some("aarch64-unknown-linux-gnu".parse().unwrap()),
            ..CompilerConfig::default()
        },
        &Tunables::default(),
    )
    .unwrap();
    aarch64.compile_wasm_to_host_trampoline(&ty).unwrap();
}

/// The name Cranelift gives the alias region described as `desc`.
fn region_name(clif: &str, desc: &str) -> Option<String> {
    clif.lines()
        .find(|l| l.contains(&format!("\"{desc}\"")))
        .map(|l| l.trim().split(' ').next().unwrap().to_string())
}

fn count_loads_in_region(clif: &str, desc: &str) -> usize {
    let Some(region) = region_name(clif, desc) else {
        return 0;
    };
    clif.lines()
        .filter(|l| l.contains(" = load.") && l.split_whitespace().any(|w| w == region))
        .count()
}

const LOOPS: &str = r#"(module
  (func (param i32) (result i32)
    (loop $a (br_if $a (i32.eqz (local.tee 0 (i32.sub (local.get 0) (i32.const 1))))))
    (loop $b (br_if $b (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))))
    (local.get 0)))"#;

#[test]
fn epoch_checks_at_entry_and_loop_headers() {
    let tunables = Tunables {
        epoch_interruption: true,
        ..Tunables::default()
    };
    let c = clif(LOOPS, 0, &tunables);
    // One load of the epoch counter per check survives optimization.
    assert_eq!(
        count_loads_in_region(&c.clif, "epoch counter"),
        3,
        "{}",
        c.clif
    );
    // Every check can call `new_epoch`.
    let calls = c.disasm.lines().filter(|l| l.contains("call")).count();
    assert_eq!(calls, 3, "{}", c.disasm);

    let off = clif(LOOPS, 0, &Tunables::default());
    assert_eq!(count_loads_in_region(&off.clif, "epoch counter"), 0);
    assert_eq!(off.disasm.lines().filter(|l| l.contains("call")).count(), 0);
}

#[test]
fn fuel_checks_at_entry_and_loop_headers() {
    let tunables = Tunables {
        consume_fuel: true,
        ..Tunables::default()
    };
    let c = clif(LOOPS, 0, &tunables);
    let calls = c.disasm.lines().filter(|l| l.contains("call")).count();
    assert_eq!(calls, 3, "{}", c.disasm);
    // Fuel is saved to the store before returning.
    assert!(count_loads_in_region(&c.clif, "fuel") >= 1, "{}", c.clif);
    assert!(c.clif.contains("store"), "{}", c.clif);
}

const POLL_BASES: &str = r#"(module
  (memory 1) (memory 1)
  (func (param i32) (result i32)
    (loop $l (br_if $l (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))))
    (local.get 0))
  (func (param i32) (result i32)
    (loop $l
      (i32.store (local.get 0) (i32.add (i32.load (local.get 0)) (i32.const 1)))
      (br_if $l (local.tee 0 (i32.sub (local.get 0) (i32.const 4)))))
    (local.get 0))
  (func (param i32) (result i32)
    (loop $l
      (i32.store 1 (local.get 0) (i32.add (i32.load 1 (local.get 0)) (i32.const 1)))
      (br_if $l (local.tee 0 (i32.sub (local.get 0) (i32.const 4)))))
    (local.get 0))
  (func (param i32) (result i32)
    (loop $outer
      (loop $inner (br_if $inner (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))))
      (i32.store (local.get 0) (i32.add (i32.load (local.get 0)) (i32.const 1)))
      (br_if $outer (local.tee 0 (i32.sub (local.get 0) (i32.const 4)))))
    (local.get 0)))"#;

/// The registers through which the polls at the first `n` slots below
/// `page_end` (the page's end relative to the base) read, in code order.
fn poll_bases(disasm: &str, page_end: i32, n: i32) -> Vec<String> {
    // The disassembler writes displacements below 10 in decimal.
    let written = |o: i32| match -o {
        d @ 0..=9 => format!("movl -{d}(%"),
        d => format!("movl -{d:#x}(%"),
    };
    let offsets: Vec<String> = (1..=n).map(|k| written(page_end - 4 * k)).collect();
    disasm
        .lines()
        .filter_map(|l| {
            let at = offsets
                .iter()
                .find_map(|o| l.find(o.as_str()).map(|i| i + o.len()))?;
            Some(l[at..].split(')').next().unwrap().to_string())
        })
        .collect()
}

/// In a module with memory a function that loads or stores memory polls
/// through the base of the memory it touches first (the page right below
/// it), the register its accesses use. One that touches none polls through
/// memory 0's base in mprotect mode, through its `vmctx` slot in
/// pointer-swap mode. A module without memory polls through `vmctx`.
#[test]
fn mmu_polls_read_through_the_accessed_memory_base() {
    use wasmtime_mmu_environ::vm::{HEAP_MMU_POLL_PAGE_OFFSET, VMCTX_MMU_POLL_PAGE_OFFSET};
    // The mprotect mode's one-load polls (the slot polls of the default
    // mode read through the same base; `tests/disas` shows them).
    let tunables = Tunables {
        mmu_interruption: true,
        mmu_interruption_mode: wasmtime_mmu_environ::MmuInterruptionMode::Mprotect,
        ..Tunables::default()
    };
    let page = wasmtime_mmu_environ::vm::MMU_POLL_PAGE_SIZE as i32;
    let vmctx_page_end = VMCTX_MMU_POLL_PAGE_OFFSET + page;
    let heap_page_end = HEAP_MMU_POLL_PAGE_OFFSET + page;

    // No memory in the module: entry and loop polls through `vmctx` (%rdi).
    let no_memory = r#"(module
      (func (param i32) (result i32)
        (loop $l (br_if $l (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))))
        (local.get 0)))"#;
    let c = clif(no_memory, 0, &tunables);
    assert_eq!(
        poll_bases(&c.disasm, vmctx_page_end, 3),
        ["rdi", "rdi"],
        "{}",
        c.disasm
    );
    assert!(
        poll_bases(&c.disasm, heap_page_end, 3).is_empty(),
        "{}",
        c.disasm
    );

    // A function without memory accesses, a loop on memory 0, one on
    // memory 1, and nested loops of which only the outer touches memory 0:
    // every poll through one heap base, loaded from the `VMContext` (into
    // any register, `vmctx`'s own once it is dead).
    let mut base_loads = Vec::new();
    for (func, polls) in [(0, 2), (1, 2), (2, 2), (3, 3)] {
        let c = clif(POLL_BASES, func, &tunables);
        let what = format!("function {func}:\n{}", c.disasm);
        assert!(
            poll_bases(&c.disasm, vmctx_page_end, 3).is_empty(),
            "{what}"
        );
        let bases = poll_bases(&c.disasm, heap_page_end, 3);
        assert_eq!(bases.len(), polls, "{what}");
        assert!(bases.iter().all(|b| *b == bases[0]), "{what}");
        if func > 0 {
            // The accesses use the same base: `(%base, %index)`.
            assert!(c.disasm.contains(&format!("(%{}, %", bases[0])), "{what}");
        }
        let base_load = c
            .disasm
            .lines()
            .find(|l| l.contains("(%rdi), %") && l.ends_with(&format!("%{}", bases[0])))
            .map(|l| l.split(',').next().unwrap().trim().to_string());
        base_loads.push(base_load.unwrap_or_else(|| panic!("{what}")));
    }
    // Memory 0 for functions 0, 1 and 3; memory 1 for function 2.
    assert_eq!(base_loads[0], base_loads[1], "{base_loads:?}");
    assert_ne!(
        base_loads[1], base_loads[2],
        "memories 0 and 1 poll the same page"
    );
    assert_eq!(base_loads[1], base_loads[3], "{base_loads:?}");

    // Pointer swap: the function that touches no memory reloads its
    // instance's slot, one load from `vmctx`, and never loads a memory's
    // base; the others reload the slot below the base they use.
    let swap = Tunables {
        mmu_interruption_mode: wasmtime_mmu_environ::MmuInterruptionMode::PointerSwap,
        ..tunables
    };
    let vmctx_slot = format!(
        "movq {}(%rdi), %",
        wasmtime_mmu_environ::vm::VMCTX_MMU_POLL_SLOT_OFFSET
    );
    for (func, polls) in [(0, 2), (1, 2), (2, 2), (3, 3)] {
        let c = clif(POLL_BASES, func, &swap);
        let what = format!("function {func}, pointer swap:\n{}", c.disasm);
        let slot_reloads = c.disasm.lines().filter(|l| l.contains(&vmctx_slot)).count();
        let base_loaded = c.disasm.contains(&base_loads[func as usize]);
        if func == 0 {
            assert_eq!(slot_reloads, polls, "{what}");
            assert!(!base_loaded, "{what}");
        } else {
            assert_eq!(slot_reloads, 0, "{what}");
            assert!(base_loaded, "{what}");
        }
    }
}

#[test]
fn invalid_bodies_are_errors() {
    // Type error inside a body: the module-level parse accepts it, the
    // compiler's validation rejects it with wasmparser's message.
    let wasm = wat::parse_str(r#"(module (func (result i32) i64.const 1))"#).unwrap();
    let t = ModuleTranslation::new(features(), &wasm).unwrap();
    let err = compiler(&Tunables::default())
        .compile_module(t)
        .unwrap_err()
        .to_string();
    assert!(err.contains("type mismatch"), "{err}");
}

#[test]
fn small_constant_memory_copies_are_inline() {
    let wat = r#"(module (memory 1)
      (func (param i32 i32) (memory.copy (local.get 0) (local.get 1) (i32.const 40)))
      (func (param i32 i32 i32) (memory.copy (local.get 0) (local.get 1) (local.get 2))))"#;
    let inline = clif(wat, 0, &Tunables::default());
    assert!(!inline.disasm.contains("call"), "{}", inline.disasm);
    assert!(inline.clif.contains("trapnz"), "{}", inline.clif);
    let dynamic = clif(wat, 1, &Tunables::default());
    assert!(dynamic.disasm.contains("call"), "{}", dynamic.disasm);
}

#[test]
fn configuration() {
    let bad = CompilerConfig {
        flags: vec![("no_such_setting".into(), "true".into())],
        ..CompilerConfig::default()
    };
    assert!(Compiler::new(&bad, &Tunables::default()).is_err());
    let bad_value = CompilerConfig {
        flags: vec![("opt_level".into(), "fastest".into())],
        ..CompilerConfig::default()
    };
    assert!(Compiler::new(&bad_value, &Tunables::default()).is_err());
    let isa_flag = CompilerConfig {
        target: Some("x86_64-unknown-linux-gnu".parse().unwrap()),
        flags: vec![("has_sse41".into(), "true".into())],
        ..CompilerConfig::default()
    };
    let c = Compiler::new(&isa_flag, &Tunables::default()).unwrap();
    assert_eq!(c.triple().to_string(), "x86_64-unknown-linux-gnu");
    let arm = CompilerConfig {
        target: Some("aarch64-unknown-linux-gnu".parse().unwrap()),
        opt_level: wasmtime_mmu_cranelift::OptLevel::None,
        ..CompilerConfig::default()
    };
    let c = Compiler::new(&arm, &Tunables::default()).unwrap();
    assert_eq!(
        c.triple().architecture,
        target_lexicon::Architecture::Aarch64(target_lexicon::Aarch64Architecture::Aarch64)
    );
    let wasm = wat::parse_str(DIVS).unwrap();
    c.compile_module(ModuleTranslation::new(features(), &wasm).unwrap())
        .unwrap();
}

/// Prints one function's CLIF and machine code: `DUMP_WAT` (text) or
/// `DUMP_WASM` (a binary's path) gives the module, `DUMP_FUNC` the
/// function's index (imports counted, as in backtraces and perf map
/// names; default 0), and `DUMP_MMU=swap`
/// or `mprotect` compiles it with that mode's polls, e.g.
/// `DUMP_WASM=x.wasm DUMP_FUNC=7 DUMP_MMU=swap cargo test --release -p
/// wasmtime-mmu-cranelift --test codegen dump_clif -- --ignored --nocapture`.
#[test]
#[ignore = "prints code for inspection"]
fn dump_clif() {
    let wat = std::env::var("DUMP_WAT").unwrap_or_else(|_| {
        r#"(module (memory 1) (global $g (mut i32) (i32.const 0))
          (table 10 funcref)
          (type $t (func (param i32) (result i32)))
          (func (param i32 i32) (result i32) (local i32)
            (loop $l
              (local.set 2 (i32.add (local.get 2) (i32.load (local.get 0))))
              (local.set 0 (i32.add (local.get 0) (i32.const 4)))
              (br_if $l (local.tee 1 (i32.sub (local.get 1) (i32.const 1)))))
            (global.set $g (local.get 2))
            (call_indirect (type $t) (local.get 2) (local.get 1))))"#
            .to_string()
    });
    let func = std::env::var("DUMP_FUNC").map_or(0, |f| f.parse().unwrap());
    let mmu = |mode| Tunables {
        mmu_interruption: true,
        mmu_interruption_mode: mode,
        ..Tunables::default()
    };
    let tunables = match std::env::var("DUMP_MMU").as_deref() {
        Err(_) => Tunables::default(),
        Ok("swap") => mmu(wasmtime_mmu_environ::MmuInterruptionMode::PointerSwap),
        Ok("mprotect") => mmu(wasmtime_mmu_environ::MmuInterruptionMode::Mprotect),
        Ok(other) => panic!("DUMP_MMU={other}: swap or mprotect"),
    };
    let wasm = match std::env::var_os("DUMP_WASM") {
        Some(path) => std::fs::read(path).unwrap(),
        None => wat::parse_str(&wat).unwrap(),
    };
    let c = compiler(&tunables)
        .compile_function_clif_for_test(ModuleTranslation::new(features(), &wasm).unwrap(), func)
        .unwrap();
    println!("{}\n{}", c.clif, c.disasm);
}

/// With `track_memory_writes` every store is followed by one byte store of
/// 1 into the write marks, `vm::WRITE_MARKS_OFFSET` below the base the
/// store itself used, at the store's address shifted right by 12; loads
/// mark nothing, and the function stays a leaf.
#[test]
fn write_marks_follow_every_store() {
    let wat = r#"(module (memory 1)
      (func (param i32 i64)
        (i64.store offset=8 (local.get 0) (local.get 1))
        (drop (i64.load (local.get 0)))
        (i32.store8 (i32.add (local.get 0) (i32.const 1)) (i32.const 3))))"#;
    let marked = Tunables {
        track_memory_writes: true,
        ..Tunables::default()
    };
    let offset = format!(
        "-{:#x}(",
        wasmtime_mmu_environ::vm::WRITE_MARKS_OFFSET.unsigned_abs()
    );
    let marks = |disasm: &str| -> Vec<String> {
        disasm
            .lines()
            .filter(|l| l.contains(&offset))
            .map(|l| l.trim().to_string())
            .collect()
    };
    let c = clif(wat, 0, &marked);
    let found = marks(&c.disasm);
    assert_eq!(found.len(), 2, "{}", c.disasm);
    for line in &found {
        assert!(line.starts_with("movb $0x1,"), "{line}\n{}", c.disasm);
    }
    assert!(c.disasm.matches("shrq $0xc,").count() >= 2, "{}", c.disasm);
    assert!(!c.disasm.contains("call"), "{}", c.disasm);
    let plain = clif(wat, 0, &Tunables::default());
    assert!(marks(&plain.disasm).is_empty(), "{}", plain.disasm);

    // Fields of one structure through one pointer: the first store's mark
    // reaches the next two (`vm::WRITE_MARK_REACH`), not the fourth, and
    // not the store in the next block.
    let fields = r#"(module (memory 1)
      (func (param i32 i64)
        (i64.store offset=0 (local.get 0) (local.get 1))
        (i64.store offset=8 (local.get 0) (local.get 1))
        (i64.store offset=248 (local.get 0) (local.get 1))
        (i64.store offset=256 (local.get 0) (local.get 1))
        (if (local.get 0) (then (i64.store offset=16 (local.get 0) (local.get 1))))))"#;
    let c = clif(fields, 0, &marked);
    assert_eq!(marks(&c.disasm).len(), 3, "{}", c.disasm);
}
