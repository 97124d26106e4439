//! The CI proof of MMU polls on aarch64, where this machine has no aarch64
//! Rust standard library to build the runtime with.
//!
//! The test
//!
//! 1. compiles two Wasm modules with **our translator** for
//!    `aarch64-unknown-linux-gnu` with `Tunables::mmu_interruption`: one
//!    with a linear memory, where every poll reads through memory 0's
//!    base (also in the functions that touch no memory), and one without,
//!    where every poll reads through the vmctx. Both have polls at
//!    function entries and at loop headers (also nested), more polls in
//!    one function than aarch64 encodes directly (so that some wrap around
//!    with fences), and loops keeping many values live in x and v
//!    registers;
//! 2. checks every poll in the machine code: an `ldur`/`ldr wT, [xN,
//!    #imm]` (decoded with `mmu_poll::decode_aarch64`, the runtime
//!    handler's decoder) whose base is neither x16 nor x17 and whose
//!    displacement is the one `PollSites::for_isa` hands out;
//! 3. writes `gen.h` (both modules' code, laid out one after the other,
//!    the poll sites, where each function and entry trampoline starts,
//!    the test cases and every structure offset the code and the harness
//!    need, all from `wasmtime_mmu_environ`'s constants) into a temporary
//!    directory;
//! 4. builds `tests/aarch64/harness.c` and `tests/aarch64/probe.S` with
//!    `aarch64-linux-gnu-gcc`, together with the runtime's own trampoline
//!    source `crates/wasmtime/src/runtime/vm/arch/aarch64_mmu_poll.s`,
//!    unchanged;
//! 5. runs the harness under `qemu-aarch64` (see its header for what it
//!    does) and requires its last line to be
//!    `aarch64 polls: N interrupts, M checks, 0 failures` with N, M > 0.
//!
//! This is done at `OptLevel::Speed` and `OptLevel::None` (different
//! register allocation and spilling), and in both arming modes: with
//! `MmuInterruptionMode::Mprotect`, as above, and with
//! `MmuInterruptionMode::PointerSwap`, where step 2 instead requires every
//! poll to be the dead load at displacement 0 right after its own reload
//! of the slot (`ldur xB, [xN, #slot]` into the poll's base register xB),
//! with exactly as many reloads in each function as poll trap records, and
//! the harness arms by swapping the slot's pointer and repairs the poll's
//! base register in its handler. The test then prints one line per mode,
//! `aarch64 polls (MODE): N interrupts, M checks, 0 failures`, and last
//! the totals over all runs in the harness's format. Without the cross
//! tools (Debian: `qemu-user gcc-aarch64-linux-gnu
//! binutils-aarch64-linux-gnu libc6-dev-arm64-cross`) it says so and
//! passes without running.
//! `ci/aarch64-check.sh` runs just this test.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wasmparser::{Operator, WasmFeatures};
use wasmtime_mmu_cranelift::{Compiler, CompilerConfig, OptLevel};
use wasmtime_mmu_dead_load::{DirectOffsets, PollSites};
use wasmtime_mmu_environ::mmu_poll::decode_aarch64;
use wasmtime_mmu_environ::vm::{
    HEAP_MMU_POLL_PAGE_OFFSET, HEAP_MMU_POLL_SLOT_OFFSET, MMU_POLL_PAGE_SIZE,
    MMU_POLL_SLOT_IN_PAGE, VMCONTEXT_MAGIC, VMCTX_MAGIC_OFFSET, VMCTX_MMU_POLL_PAGE_OFFSET,
    VMCTX_MMU_POLL_SLOT_OFFSET, VMCTX_PREFIX_SIZE, VMCTX_STORE_CONTEXT_OFFSET, VMContextHeader,
    VMFUNCREF_VMCTX_OFFSET, VMFUNCREF_WASM_CALL_OFFSET, VMFuncRef, VMMEMORY_BASE_OFFSET,
    VMMEMORY_CURRENT_LENGTH_OFFSET, VMSTORE_CONTEXT_STACK_LIMIT_OFFSET, VMStoreContext, ValRaw,
};
use wasmtime_mmu_environ::{
    CompiledModuleArtifacts, DefinedMemoryIndex, EntityIndex, EntityRef, MmuInterruptionMode,
    ModuleInfo, ModuleTranslation, TrapSiteKind, Tunables, VMOffsets,
};

const GCC: &str = "aarch64-linux-gnu-gcc";
const QEMU: &str = "qemu-aarch64";

/// How long one harness run may take under qemu.
const RUN_LIMIT: Duration = Duration::from_secs(400);

/// Sequential loops in the `wrap*` functions: with the entry poll, more
/// polls than the 60 (vmctx) or 64 (heap) directly encodable slots.
const WRAP_LOOPS: usize = 70;

/// Linear memory 0's size: one Wasm page, fixed (so its base never moves).
const MEMORY_BYTES: u64 = 1 << 16;

fn features() -> WasmFeatures {
    WasmFeatures::WASM2 | WasmFeatures::MULTI_MEMORY | WasmFeatures::EXTENDED_CONST
}

/// The two test modules, in the order their code is laid out.
struct TestModule {
    /// The prefix of its functions' names in the harness.
    name: &'static str,
    /// Whether it has a linear memory, and with it the functions `heap`
    /// and `wrap_heap`, which load and store it.
    memory: bool,
}

const MODULES: [TestModule; 2] = [
    TestModule {
        name: "mem",
        memory: true,
    },
    TestModule {
        name: "nomem",
        memory: false,
    },
];

/// A test module. Every function is exported under its own name. Both
/// modules have the functions that touch no memory (`mix`, `calls`,
/// `nested_fp`, `simd`, `live_gprs`, `wrap`); the one with a memory also
/// has `heap` and `wrap_heap`.
fn module_wat(memory: bool) -> String {
    let mut wat = String::from("(module\n");
    if memory {
        wat.push_str("  (memory 1 1)\n");
    }
    wat.push_str(
        r#"
  ;; No loop, no memory access: only the entry poll.
  (func $mix (export "mix") (param $a i64) (param $b i64) (result i64)
    (i64.add
      (i64.mul (local.get $a) (i64.const 0x9e3779b97f4a7c15))
      (i64.rotl (i64.xor (local.get $b) (local.get $a)) (i64.const 17))))

  ;; A loop calling $mix: its entry poll runs at a high rate.
  (func $calls (export "calls") (param $n i32) (param $acc i64) (result i64)
    (local $i i32)
    (loop $l
      (local.set $acc (call $mix (local.get $acc) (i64.extend_i32_u (local.get $i))))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                          (local.get $n))))
    (local.get $acc))

  ;; Nested loops over f64 values (v registers) and an f32.
  (func $nested_fp (export "nested_fp") (param $n i32) (param $m i32) (param $x f64) (result f64)
    (local $i i32) (local $j i32)
    (local $f0 f64) (local $f1 f64) (local $f2 f64) (local $f3 f64)
    (local $f4 f64) (local $f5 f64) (local $f6 f64) (local $f7 f64)
    (local $g f32)
    (local.set $f0 (local.get $x))
    (local.set $f1 (f64.mul (local.get $x) (f64.const 0.5)))
    (local.set $f2 (f64.add (local.get $x) (f64.const 1.25)))
    (local.set $f3 (f64.sub (local.get $x) (f64.const 3.5)))
    (local.set $f4 (f64.const 0.75))
    (local.set $f5 (f64.neg (local.get $x)))
    (local.set $f6 (f64.sqrt (f64.abs (local.get $x))))
    (local.set $f7 (f64.const -2.0))
    (local.set $g (f32.demote_f64 (local.get $x)))
    (loop $outer
      (local.set $j (i32.const 0))
      (loop $inner
        (local.set $f0 (f64.add (f64.mul (local.get $f0) (f64.const 0.999)) (local.get $f1)))
        (local.set $f1 (f64.sub (local.get $f1) (f64.mul (local.get $f2) (f64.const 0.125))))
        (local.set $f2 (f64.add (local.get $f2) (f64.sqrt (f64.abs (local.get $f3)))))
        (local.set $f3 (f64.sub (f64.mul (local.get $f3) (f64.const 1.0001)) (local.get $f4)))
        (local.set $f4 (f64.add (local.get $f4) (f64.convert_i32_u (local.get $j))))
        (local.set $f5 (f64.max (local.get $f5) (f64.sub (local.get $f0) (local.get $f6))))
        (local.set $f6 (f64.mul (local.get $f6) (f64.const 0.9995)))
        (local.set $f7 (f64.add (f64.min (local.get $f7) (local.get $f2)) (f64.const 0.5)))
        (local.set $g (f32.add (f32.mul (local.get $g) (f32.const 0.75)) (f32.const 1.5)))
        (br_if $inner (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 1)))
                                (local.get $m))))
      (local.set $f4 (f64.mul (local.get $f4) (f64.const 0.5)))
      (br_if $outer (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                              (local.get $n))))
    (f64.add
      (f64.add (f64.add (local.get $f0) (local.get $f1)) (f64.add (local.get $f2) (local.get $f3)))
      (f64.add
        (f64.add (f64.add (local.get $f4) (local.get $f5)) (f64.add (local.get $f6) (local.get $f7)))
        (f64.promote_f32 (local.get $g)))))

  ;; v128 values live across the loop header.
  (func $simd (export "simd") (param $n i32) (param $v v128) (result v128)
    (local $i i32)
    (local $a v128) (local $b v128) (local $c v128) (local $d v128) (local $e v128) (local $f v128)
    (local.set $a (local.get $v))
    (local.set $b (i32x4.add (local.get $v) (v128.const i32x4 1 2 3 4)))
    (local.set $c (f32x4.convert_i32x4_s (local.get $v)))
    (local.set $d (i16x8.splat (i32.const 7)))
    (local.set $e (i64x2.splat (i64.const 0x0123456789abcdef)))
    (local.set $f (v128.not (local.get $v)))
    (loop $l
      (local.set $a (i32x4.add (local.get $a) (local.get $b)))
      (local.set $b (v128.xor (local.get $b)
        (i8x16.shuffle 3 1 4 1 5 9 2 6 5 3 5 8 9 7 9 3 (local.get $a) (local.get $e))))
      (local.set $c (f32x4.add (f32x4.mul (local.get $c) (v128.const f32x4 0.5 0.25 0.125 2.0))
                               (f32x4.convert_i32x4_u (local.get $d))))
      (local.set $d (i16x8.add (i16x8.mul (local.get $d) (local.get $a)) (i16x8.splat (local.get $i))))
      (local.set $e (i64x2.add (local.get $e) (i64x2.shl (local.get $f) (i32.const 3))))
      (local.set $f (v128.bitselect (local.get $f) (local.get $b) (local.get $a)))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                          (local.get $n))))
    (v128.xor
      (v128.xor (v128.xor (local.get $a) (local.get $b)) (i32x4.trunc_sat_f32x4_s (local.get $c)))
      (v128.xor (v128.xor (local.get $d) (local.get $e)) (local.get $f))))
"#,
    );
    if memory {
        wat.push_str(
            r#"
  ;; Loads and stores in nested loops.
  (func $heap (export "heap") (param $n i32) (param $seed i32) (result i32)
    (local $i i32) (local $j i32) (local $acc i32)
    (loop $fill
      (i32.store (i32.shl (local.get $i) (i32.const 2))
                 (i32.add (i32.mul (local.get $i) (local.get $seed)) (i32.const 7)))
      (br_if $fill (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                             (local.get $n))))
    (local.set $i (i32.const 0))
    (loop $outer
      (local.set $j (i32.const 0))
      (loop $inner
        (local.set $acc
          (i32.xor
            (i32.add (i32.mul (local.get $acc) (i32.const 31))
                     (i32.load (i32.shl (local.get $j) (i32.const 2))))
            (i32.load offset=4 (i32.shl (local.get $i) (i32.const 2)))))
        (br_if $inner (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 1)))
                                (i32.const 48))))
      (br_if $outer (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1)))
                              (i32.sub (local.get $n) (i32.const 1)))))
    (local.get $acc))
"#,
        );
    }
    wat.push_str(
        r#"
  ;; Many integer values live in x registers across the loop header.
  (func $live_gprs (export "live_gprs") (param $n i32) (param $s i64) (result i64)
    (local $i i32)
"#,
    );
    const LIVE: usize = 14;
    for k in 0..LIVE {
        writeln!(wat, "    (local $v{k} i64)").unwrap();
    }
    for k in 0..LIVE {
        writeln!(
            wat,
            "    (local.set $v{k} (i64.add (i64.mul (local.get $s) (i64.const {})) (i64.const {})))",
            2 * k + 3,
            k * 977 + 1
        )
        .unwrap();
    }
    wat.push_str("    (loop $l\n");
    for k in 0..LIVE {
        let next = (k + 1) % LIVE;
        let op = ["i64.add", "i64.xor", "i64.sub", "i64.mul"][k % 4];
        writeln!(
            wat,
            "      (local.set $v{k} ({op} (local.get $v{k}) (i64.rotl (local.get $v{next}) (i64.const {}))))",
            k * 5 + 1
        )
        .unwrap();
    }
    wat.push_str(
        "      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))\n",
    );
    wat.push_str("    (local.get $v0)\n");
    for k in 1..LIVE {
        writeln!(wat, "    (local.get $v{k}) (i64.xor)").unwrap();
    }
    wat.push_str("  )\n");

    // More polls than aarch64's direct offsets (60 through the vmctx, 64
    // through a heap base), in a function without memory accesses and,
    // where there is a memory, in one that stores in every loop.
    let wraps: &[(&str, bool)] = if memory {
        &[("wrap", false), ("wrap_heap", true)]
    } else {
        &[("wrap", false)]
    };
    for &(name, store) in wraps {
        writeln!(
            wat,
            "  (func ${name} (export \"{name}\") (param $n i32) (param $s i64) (result i64)\n    (local $i i32)"
        )
        .unwrap();
        for k in 0..WRAP_LOOPS {
            let store = if store {
                format!(" (i64.store offset={} (i32.const 0) (local.get $s))", k * 8)
            } else {
                String::new()
            };
            writeln!(
                wat,
                "    (local.set $i (i32.const 0))\n    (loop $l{k} (local.set $s (i64.add (i64.mul (local.get $s) (i64.const {})) (i64.const {k}))){store}\n      (br_if $l{k} (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 1))) (local.get $n))))",
                2 * k + 3
            )
            .unwrap();
        }
        if store {
            wat.push_str("    (i64.add (local.get $s) (i64.load offset=24 (i32.const 0)))\n  )\n");
        } else {
            wat.push_str("    (local.get $s)\n  )\n");
        }
    }
    wat.push_str(")\n");
    wat
}

/// One call the harness makes: a function of a module and its arguments.
struct Case {
    /// Index into [`MODULES`].
    module: usize,
    /// The export name.
    func: &'static str,
    params: Vec<[u64; 2]>,
}

impl Case {
    /// The function's name in the harness: `module.export`.
    fn name(&self) -> String {
        format!("{}.{}", MODULES[self.module].name, self.func)
    }
}

fn i32_arg(v: i32) -> [u64; 2] {
    [u64::from(v as u32), 0]
}

fn i64_arg(v: i64) -> [u64; 2] {
    [v as u64, 0]
}

/// Every call of the run: the ones that need a memory in the module with
/// one, all others in both modules with the same arguments.
fn cases() -> Vec<Case> {
    let call = |func: &'static str, params: Vec<[u64; 2]>| (func, params);
    let calls = vec![
        call("mix", vec![i64_arg(3), i64_arg(-5)]),
        call("calls", vec![i32_arg(20_000), i64_arg(11)]),
        call("calls", vec![i32_arg(7_000), i64_arg(-12345)]),
        call(
            "nested_fp",
            vec![i32_arg(90), i32_arg(200), [2.5f64.to_bits(), 0]],
        ),
        call(
            "nested_fp",
            vec![i32_arg(40), i32_arg(300), [(-7.25f64).to_bits(), 0]],
        ),
        call(
            "simd",
            vec![
                i32_arg(15_000),
                [0x0102_0304_0506_0708, 0x1112_1314_1516_1718],
            ],
        ),
        call("heap", vec![i32_arg(300), i32_arg(0x1234_5677)]),
        call("heap", vec![i32_arg(1_000), i32_arg(-99)]),
        call(
            "live_gprs",
            vec![i32_arg(25_000), i64_arg(0x7777_1234_5678)],
        ),
        call("wrap", vec![i32_arg(1_500), i64_arg(5)]),
        call("wrap_heap", vec![i32_arg(1_500), i64_arg(-6)]),
    ];
    in_both_modules(calls)
}

/// The calls of the harness's sticky phase, in which a poll page stays
/// armed for a whole call, so that every poll the call executes is
/// interrupted: each function once, with small arguments.
fn sticky_cases() -> Vec<Case> {
    in_both_modules(vec![
        ("mix", vec![i64_arg(-7), i64_arg(9)]),
        ("calls", vec![i32_arg(5), i64_arg(11)]),
        (
            "nested_fp",
            vec![i32_arg(3), i32_arg(4), [1.5f64.to_bits(), 0]],
        ),
        ("simd", vec![i32_arg(6), [0x0a0b_0c0d, 0x0e0f]]),
        // At least 48, so that it reads only what it wrote.
        ("heap", vec![i32_arg(48), i32_arg(77)]),
        ("live_gprs", vec![i32_arg(7), i64_arg(-3)]),
        ("wrap", vec![i32_arg(2), i64_arg(5)]),
        ("wrap_heap", vec![i32_arg(2), i64_arg(-6)]),
    ])
}

/// Each of `calls` in the module with a memory and, unless it needs a
/// memory, also in the one without.
fn in_both_modules(calls: Vec<(&'static str, Vec<[u64; 2]>)>) -> Vec<Case> {
    let mut cases = Vec::new();
    for (module, m) in MODULES.iter().enumerate() {
        for (func, params) in &calls {
            if m.memory || !matches!(*func, "heap" | "wrap_heap") {
                cases.push(Case {
                    module,
                    func,
                    params: params.clone(),
                });
            }
        }
    }
    cases
}

/// What the integer functions of [`module_wat`] return, computed here
/// independently of the compiled code: checks that the harness enters the
/// compiled functions correctly (entry trampoline, arguments, results).
/// `None` for the floating-point and SIMD functions, which are compared
/// across opt levels instead.
fn model(case: &Case) -> Option<u64> {
    let arg = |i: usize| case.params[i][0];
    let mix = |a: u64, b: u64| {
        a.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add((b ^ a).rotate_left(17))
    };
    // Every loop of the module runs its body once before testing `i < n`.
    let times = |n: u64| n.max(1);
    Some(match case.func {
        "mix" => mix(arg(0), arg(1)),
        "calls" => {
            let mut acc = arg(1);
            for i in 0..times(arg(0)) {
                acc = mix(acc, i);
            }
            acc
        }
        "heap" => {
            let (n, seed) = (arg(0) as u32, arg(1) as u32);
            let mut mem = vec![0u32; n as usize + 1];
            for i in 0..n.max(1) {
                mem[i as usize] = i.wrapping_mul(seed).wrapping_add(7);
            }
            let mut acc = 0u32;
            for i in 0..n.saturating_sub(1).max(1) {
                for j in 0..48 {
                    acc = acc.wrapping_mul(31).wrapping_add(mem[j]) ^ mem[i as usize + 1];
                }
            }
            u64::from(acc)
        }
        "live_gprs" => {
            const LIVE: usize = 14;
            let s = arg(1);
            let mut v: Vec<u64> = (0..LIVE as u64)
                .map(|k| s.wrapping_mul(2 * k + 3).wrapping_add(k * 977 + 1))
                .collect();
            for _ in 0..times(arg(0)) {
                for k in 0..LIVE {
                    let other = v[(k + 1) % LIVE].rotate_left(k as u32 * 5 + 1);
                    v[k] = match k % 4 {
                        0 => v[k].wrapping_add(other),
                        1 => v[k] ^ other,
                        2 => v[k].wrapping_sub(other),
                        _ => v[k].wrapping_mul(other),
                    };
                }
            }
            v.iter().fold(0, |a, b| a ^ b)
        }
        "wrap" | "wrap_heap" => {
            let mut s = arg(1);
            let mut stored = [0u64; WRAP_LOOPS];
            for (k, slot) in stored.iter_mut().enumerate() {
                for _ in 0..times(arg(0)) {
                    s = s.wrapping_mul(2 * k as u64 + 3).wrapping_add(k as u64);
                    *slot = s;
                }
            }
            if case.func == "wrap_heap" {
                s.wrapping_add(stored[3])
            } else {
                s
            }
        }
        _ => return None,
    })
}

/// How many polls a call of `case` executes: the entry poll, and a loop's
/// poll every time its header runs (every iteration, the first included).
/// With the pages armed for the whole call, each of them is interrupted.
fn poll_executions(case: &Case) -> u64 {
    let arg = |i: usize| case.params[i][0] & 0xffff_ffff;
    let times = |n: u64| n.max(1);
    1 + match case.func {
        "mix" => 0,
        // The loop's poll and `mix`'s entry poll per iteration.
        "calls" => 2 * times(arg(0)),
        "nested_fp" => times(arg(0)) * (1 + times(arg(1))),
        "simd" | "live_gprs" => times(arg(0)),
        // The fill loop, then the outer loop with 48 inner iterations.
        "heap" => times(arg(0)) + times(arg(0).saturating_sub(1)) * 49,
        "wrap" | "wrap_heap" => WRAP_LOOPS as u64 * times(arg(0)),
        other => panic!("no poll count for {other}"),
    }
}

/// The harness's baseline lines, `case K NAME: LOW HIGH`.
fn baseline_of(output: &str) -> Vec<(String, u64, u64)> {
    output
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("case ")?;
            let (head, values) = rest.split_once(": ")?;
            let name = head.split_once(' ')?.1.to_string();
            let (lo, hi) = values.split_once(' ')?;
            Some((
                name,
                u64::from_str_radix(lo, 16).ok()?,
                u64::from_str_radix(hi, 16).ok()?,
            ))
        })
        .collect()
}

/// A poll site, as the harness sees it.
struct Poll {
    /// In the laid-out code of both modules (in one module's text before
    /// [`lay_out`]).
    offset: u32,
    /// Index into the functions (of both modules after [`lay_out`]).
    func: usize,
    entry: bool,
    heap: bool,
    /// Past the function's distinct offsets, so fenced (mprotect mode
    /// only: pointer-swap polls all read at displacement 0).
    wrapped: bool,
    /// The dead load's base register (`decode_aarch64`), which the
    /// pointer-swap handler repairs.
    reg: u8,
    disp: i32,
}

/// A function, as the harness sees it.
struct Func {
    /// `module.export`.
    name: String,
    /// Index into [`MODULES`]: whose instance (vmctx) it runs in.
    module: usize,
    start: u32,
    len: u32,
    trampoline: u32,
    results: usize,
    /// Index into the polls.
    entry_poll: usize,
}

/// Decodes `ldur xT, [xN, #simm9]` (a 64-bit load, the form a slot
/// reload takes: the slot lies a small distance below its base); returns
/// the destination register, the base register and the displacement.
fn decode_ldur_x(insn: u32) -> Option<(u8, u8, i32)> {
    if insn & 0xffe0_0c00 != 0xf840_0000 {
        return None;
    }
    let imm9 = ((insn >> 12) & 0x1ff) as i32;
    Some((
        (insn & 31) as u8,
        ((insn >> 5) & 31) as u8,
        if imm9 >= 256 { imm9 - 512 } else { imm9 },
    ))
}

/// The Wasm offset the address map gives `code_offset`.
fn wasm_offset_at(artifacts: &CompiledModuleArtifacts, code_offset: u32) -> u32 {
    let i = artifacts
        .address_map
        .partition_point(|e| e.code_offset <= code_offset);
    artifacts.address_map[i - 1].wasm_offset
}

/// What the test needs of one function body: the offsets of its `loop`s,
/// in order, and whether it loads or stores memory anywhere.
struct Body {
    loops: Vec<u32>,
    touches_memory: bool,
}

/// Each defined function body, in order.
fn bodies_of(wasm: &[u8]) -> Vec<Body> {
    let mut out = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        if let wasmparser::Payload::CodeSectionEntry(body) = payload.unwrap() {
            let mut b = Body {
                loops: Vec::new(),
                touches_memory: false,
            };
            let mut ops = body.get_operators_reader().unwrap();
            while !ops.eof() {
                let (op, offset) = ops.read_with_offset().unwrap();
                match op {
                    Operator::Loop { .. } => b.loops.push(offset as u32),
                    // The modules' memory operators.
                    Operator::I32Load { .. }
                    | Operator::I32Store { .. }
                    | Operator::I64Load { .. }
                    | Operator::I64Store { .. } => b.touches_memory = true,
                    _ => {}
                }
            }
            out.push(b);
        }
    }
    out
}

/// The harness fills in the same VMContext header (magic, store context)
/// in both instances' vmctx. Checks that those offsets do not depend on
/// the module: they lie inside the fixed `VMContextHeader`, and every area
/// `VMOffsets` lays out for `module` (a test module has only memories and
/// function references) starts after it.
fn check_vmctx_header(module: &ModuleInfo, offsets: &VMOffsets) {
    let header = std::mem::size_of::<VMContextHeader>() as u32;
    assert!(VMCTX_MAGIC_OFFSET + 4 <= header);
    assert!(VMCTX_STORE_CONTEXT_OFFSET + 8 <= header);
    assert_eq!(
        (
            module.num_imported_memories,
            module.num_imported_tables,
            module.num_imported_globals
        ),
        (0, 0, 0)
    );
    assert!(module.tables.is_empty() && module.globals.is_empty());
    for i in 0..module.num_defined_memories() {
        let memory = offsets.defined_memory(DefinedMemoryIndex::from_u32(i));
        assert!(memory >= header, "memory {i}'s definition at {memory}");
    }
    for f in module.functions.keys() {
        assert!(offsets.func_ref(f) >= header, "{f:?}'s VMFuncRef");
    }
    assert!(offsets.size() >= header);
}

/// One compiled module; offsets are into its own text.
struct CompiledModule {
    text: Vec<u8>,
    funcs: Vec<Func>,
    /// Sorted by offset.
    polls: Vec<Poll>,
    offsets: VMOffsets,
}

/// The arming modes the test runs, with their names in its output.
const MODES: [(MmuInterruptionMode, &str); 2] = [
    (MmuInterruptionMode::Mprotect, "mprotect"),
    (MmuInterruptionMode::PointerSwap, "pointer-swap"),
];

/// Compiles module `index` of [`MODULES`] for aarch64 at `opt_level`, with
/// polls for `mode`, and checks every poll.
fn compile(
    index: usize,
    wasm: &[u8],
    opt_level: OptLevel,
    mode: MmuInterruptionMode,
) -> CompiledModule {
    let TestModule {
        name: prefix,
        memory,
    } = MODULES[index];
    let config = CompilerConfig {
        opt_level,
        target: Some("aarch64-unknown-linux-gnu".parse().unwrap()),
        enable_verifier: true,
        ..CompilerConfig::default()
    };
    let tunables = Tunables {
        mmu_interruption: true,
        mmu_interruption_mode: mode,
        ..Tunables::default()
    };
    let compiler = Compiler::new(&config, &tunables).unwrap();
    let translation = ModuleTranslation::new(features(), wasm).unwrap();
    let module = translation.module.clone();
    let offsets = VMOffsets::new(&module);
    let artifacts = compiler.compile_module(translation).unwrap();
    assert!(
        artifacts.relocations.is_empty(),
        "the harness patches no relocations, but {prefix}'s code has {:?}",
        artifacts.relocations
    );
    assert_eq!(module.num_imported_funcs, 0);
    if memory {
        assert_eq!(module.memories.len(), 1);
        assert_eq!(module.num_defined_memories(), 1);
        assert_eq!(module.memories.values().next().unwrap().minimum, 1);
    } else {
        assert!(module.memories.is_empty());
    }
    check_vmctx_header(&module, &offsets);

    let bodies = bodies_of(wasm);
    // The module with a memory has both kinds of function the rule must
    // treat alike: ones that touch memory and ones that do not.
    assert!(bodies.iter().any(|b| !b.touches_memory));
    assert_eq!(bodies.iter().any(|b| b.touches_memory), memory);
    let isa_sites = |page_offset| {
        let triple: target_lexicon::Triple = "aarch64-unknown-linux-gnu".parse().unwrap();
        let direct = DirectOffsets::for_architecture(triple.architecture);
        PollSites::with_direct_offsets(page_offset, direct)
    };
    // What the translator promises (`function_entry` in
    // src/func_environ.rs, `ModuleInfo::mmu_poll_memory`): in a module with
    // a linear memory every poll of a function that touches memory reads
    // through a memory's base, here always memory 0's (the only one); a
    // function that touches none does so too in mprotect mode, and reads
    // through its vmctx (the prefix's slot) in pointer-swap mode. In a
    // module without memory every poll reads through the vmctx. Either way
    // a function's polls take that base's offsets in emission order: the
    // entry, then the loops in Wasm order.
    let heap_sites = isa_sites(HEAP_MMU_POLL_PAGE_OFFSET);
    let vmctx_sites = isa_sites(VMCTX_MMU_POLL_PAGE_OFFSET);
    assert_eq!(heap_sites.distinct_offsets(), 64);
    assert_eq!(vmctx_sites.distinct_offsets(), 60);

    let mut funcs = Vec::new();
    let mut polls = Vec::new();
    for (name, entity) in &module.exports {
        let EntityIndex::Function(func_index) = *entity else {
            continue;
        };
        let defined = module.defined_func_index(func_index).unwrap();
        let loc = &artifacts.functions[defined];
        let ty = module.functions[func_index];
        let loops = &bodies[defined.index()].loops;
        let heap = memory
            && (mode == MmuInterruptionMode::Mprotect || bodies[defined.index()].touches_memory);
        let sites = if heap { &heap_sites } else { &vmctx_sites };
        let func = funcs.len();
        let what = format!("{prefix}.{name} at {opt_level:?} ({mode:?})");
        let word = |at: u32| {
            let at = at as usize;
            u32::from_le_bytes(artifacts.text[at..at + 4].try_into().unwrap())
        };

        // Expected (Wasm offset of the loop, ordinal), the entry first.
        let mut expected = vec![(None, 0u32)];
        for (ordinal, &l) in (1..).zip(loops) {
            expected.push((Some(l), ordinal));
        }

        // This function's polls, with their Wasm offsets.
        let mut mine: Vec<(u32, u32)> = artifacts
            .trap_sites
            .iter()
            .filter(|t| t.kind == TrapSiteKind::MmuPoll && loc.range().contains(&t.code_offset))
            .map(|t| (wasm_offset_at(&artifacts, t.code_offset), t.code_offset))
            .collect();
        assert_eq!(mine.len(), expected.len(), "{what}: poll count");
        // In emission order: the entry poll, then the loops in Wasm order.
        let is_loop = |w: u32| loops.contains(&w);
        mine.sort_by_key(|&(w, c)| (is_loop(w), w, c));

        // Pointer-swap polls: every reload of the slot in the function,
        // `ldur xT, [xN, #slot]` (`dead_load_through_slot`). There must be
        // exactly one per poll trap record: a reload that alias analysis
        // merged into another would leave a poll reading a stale page.
        let slot = if heap {
            HEAP_MMU_POLL_SLOT_OFFSET
        } else {
            VMCTX_MMU_POLL_SLOT_OFFSET
        };
        let mut reloads: Vec<(u32, u8)> = Vec::new();
        if mode == MmuInterruptionMode::PointerSwap {
            for at in (loc.start..loc.start + loc.len).step_by(4) {
                if let Some((dest, base, disp)) = decode_ldur_x(word(at))
                    && disp == slot
                    && base != 31
                {
                    reloads.push((at, dest));
                }
            }
            assert_eq!(
                reloads.len(),
                mine.len(),
                "{what}: {} reloads of the slot at {slot} ({:x?}) for {} polls",
                reloads.len(),
                reloads.iter().map(|r| r.0).collect::<Vec<_>>(),
                mine.len()
            );
        }

        let first_poll = polls.len();
        for (&(wasm_offset, code_offset), &(loop_offset, ordinal)) in mine.iter().zip(&expected) {
            let insn = word(code_offset);
            // The decoder the runtime's handler and the compiler's check use.
            let load = decode_aarch64(insn).unwrap_or_else(|| {
                panic!("{what}: the poll at {code_offset:#x} ({insn:#010x}) is not an immediate-offset load")
            });
            let (base, disp) = (load.base, load.displacement);
            assert!(
                base != 16 && base != 17,
                "{what}: the poll at {code_offset:#x} reads through x{base}"
            );
            let entry = loop_offset.is_none();
            if let Some(l) = loop_offset {
                assert_eq!(wasm_offset, l, "{what}: the poll at {code_offset:#x}");
            }
            let wrapped = match mode {
                MmuInterruptionMode::Mprotect => {
                    assert_eq!(
                        disp,
                        sites.offset(ordinal),
                        "{what}: the poll at {code_offset:#x} (Wasm offset {wasm_offset:#x}, \
                         ordinal {ordinal}) through the {}",
                        if heap { "heap base" } else { "vmctx" }
                    );
                    ordinal >= sites.distinct_offsets()
                }
                MmuInterruptionMode::PointerSwap => {
                    assert_eq!(
                        disp, 0,
                        "{what}: the poll at {code_offset:#x} reads at a displacement"
                    );
                    // Its reload is the instruction right before it and
                    // loads the poll's base register.
                    let before = code_offset.checked_sub(4);
                    assert!(
                        reloads
                            .iter()
                            .any(|&(at, dest)| Some(at) == before && dest == base),
                        "{what}: the poll at {code_offset:#x} (x{base}) does not follow a reload \
                         of the slot into x{base} (reloads at {:x?})",
                        reloads
                    );
                    false
                }
            };
            polls.push(Poll {
                offset: code_offset,
                func,
                entry,
                heap,
                wrapped,
                reg: base,
                disp,
            });
        }
        funcs.push(Func {
            name: format!("{prefix}.{name}"),
            module: index,
            start: loc.start,
            len: loc.len,
            trampoline: artifacts.entry_trampolines[ty].start,
            results: module.func_type(func_index).results.len(),
            entry_poll: first_poll,
        });
    }
    assert_eq!(
        polls.iter().any(|p| p.wrapped),
        mode == MmuInterruptionMode::Mprotect,
        "{prefix}: whether polls wrap"
    );
    // The harness looks polls up by code offset.
    let entry_offsets: Vec<u32> = funcs.iter().map(|f| polls[f.entry_poll].offset).collect();
    polls.sort_by_key(|p| p.offset);
    for (f, offset) in funcs.iter_mut().zip(entry_offsets) {
        f.entry_poll = polls.iter().position(|p| p.offset == offset).unwrap();
    }
    CompiledModule {
        text: artifacts.text,
        funcs,
        polls,
        offsets,
    }
}

/// Where each module's text starts is a multiple of this, so that the
/// code keeps every alignment it had relative to its own start.
const TEXT_ALIGN: usize = 4096;

/// Both modules' code, laid out one after the other for the harness.
struct Compiled {
    text: Vec<u8>,
    /// Where each module's text starts in `text`.
    starts: Vec<u32>,
    funcs: Vec<Func>,
    /// Sorted by offset.
    polls: Vec<Poll>,
    /// Each module's VMContext layout.
    offsets: Vec<VMOffsets>,
}

/// Lays the modules' texts out in one executable image. Each text stays
/// contiguous (calls between its functions are PC-relative); its
/// function, trampoline and poll offsets move with it.
fn lay_out(modules: Vec<CompiledModule>, mode: MmuInterruptionMode) -> Compiled {
    let mut out = Compiled {
        text: Vec::new(),
        starts: Vec::new(),
        funcs: Vec::new(),
        polls: Vec::new(),
        offsets: Vec::new(),
    };
    for m in modules {
        // Zero padding: `udf #0`, should anything ever jump there.
        out.text
            .resize(out.text.len().next_multiple_of(TEXT_ALIGN), 0);
        let start = u32::try_from(out.text.len()).unwrap();
        let (first_func, first_poll) = (out.funcs.len(), out.polls.len());
        out.starts.push(start);
        out.text.extend_from_slice(&m.text);
        for f in m.funcs {
            out.funcs.push(Func {
                start: f.start + start,
                trampoline: f.trampoline + start,
                entry_poll: f.entry_poll + first_poll,
                ..f
            });
        }
        for p in m.polls {
            out.polls.push(Poll {
                offset: p.offset + start,
                func: p.func + first_func,
                ..p
            });
        }
        out.offsets.push(m.offsets);
    }
    assert!(out.polls.windows(2).all(|w| w[0].offset < w[1].offset));
    for p in &out.polls {
        let f = &out.funcs[p.func];
        assert!((f.start..f.start + f.len).contains(&p.offset), "{}", f.name);
        // Which functions of a module with memory poll through its base
        // is checked in `compile`; here only that nothing else does.
        if mode == MmuInterruptionMode::Mprotect {
            assert_eq!(p.heap, MODULES[f.module].memory, "{}", f.name);
        } else {
            assert!(!p.heap || MODULES[f.module].memory, "{}", f.name);
        }
    }
    // Every kind of poll through both bases (wrapped ones only where
    // polls have distinct offsets).
    for heap in [false, true] {
        let through = |p: &&Poll| p.heap == heap;
        assert!(out.polls.iter().filter(through).any(|p| p.entry));
        assert!(out.polls.iter().filter(through).any(|p| !p.entry));
        assert_eq!(
            out.polls.iter().filter(through).any(|p| p.wrapped),
            mode == MmuInterruptionMode::Mprotect
        );
    }
    out
}

/// `gen.h`: everything the harness needs, generated from the Rust side.
///
/// The `#define`s are also read by `probe.S`: their values are wrapped in
/// `GEN_I64`, which adds C's `LL` suffix and nothing in assembly, and the
/// C tables are hidden from the assembler.
fn header(
    compiled: &Compiled,
    cases: &[Case],
    sticky: &[Case],
    mode: MmuInterruptionMode,
) -> String {
    let mut h = String::new();
    h.push_str(
        "// Generated by crates/cranelift/tests/aarch64_polls.rs from wasmtime_mmu_environ's\n\
         // layout constants and the compiled modules; do not edit.\n\n\
         #ifdef __ASSEMBLER__\n#define GEN_I64(v) v\n#else\n#define GEN_I64(v) v##LL\n#endif\n\n",
    );
    writeln!(
        h,
        "// Polls compiled for {mode:?}.\n#define GEN_POINTER_SWAP {}\n",
        u8::from(mode == MmuInterruptionMode::PointerSwap)
    )
    .unwrap();
    // The harness has one instance of each module: the module with a
    // memory (its vmctx holds memory 0's definition; no poll page) and the
    // one without (its vmctx has a poll page below it).
    let mem = MODULES.iter().position(|m| m.memory).unwrap();
    let nomem = MODULES.iter().position(|m| !m.memory).unwrap();
    assert_eq!(MODULES.len(), 2);
    let mem0 = compiled.offsets[mem].defined_memory(DefinedMemoryIndex::new(0));
    let defines: &[(&str, i64)] = &[
        ("GEN_MODULE_MEM", mem as i64),
        ("GEN_MODULE_NOMEM", nomem as i64),
        ("GEN_VMCONTEXT_MAGIC", i64::from(VMCONTEXT_MAGIC)),
        ("GEN_VMCTX_MAGIC_OFFSET", i64::from(VMCTX_MAGIC_OFFSET)),
        (
            "GEN_VMCTX_STORE_CONTEXT_OFFSET",
            i64::from(VMCTX_STORE_CONTEXT_OFFSET),
        ),
        ("GEN_VMCTX_MEMORY0_OFFSET", i64::from(mem0)),
        (
            "GEN_VMCTX_SIZE_MEM",
            i64::from(compiled.offsets[mem].size()),
        ),
        (
            "GEN_VMCTX_SIZE_NOMEM",
            i64::from(compiled.offsets[nomem].size()),
        ),
        ("GEN_VMCTX_PREFIX_SIZE", VMCTX_PREFIX_SIZE as i64),
        ("GEN_MMU_POLL_PAGE_SIZE", MMU_POLL_PAGE_SIZE as i64),
        (
            "GEN_VMCTX_MMU_POLL_PAGE_OFFSET",
            i64::from(VMCTX_MMU_POLL_PAGE_OFFSET),
        ),
        (
            "GEN_HEAP_MMU_POLL_PAGE_OFFSET",
            i64::from(HEAP_MMU_POLL_PAGE_OFFSET),
        ),
        ("GEN_MMU_POLL_SLOT_IN_PAGE", MMU_POLL_SLOT_IN_PAGE as i64),
        (
            "GEN_VMCTX_MMU_POLL_SLOT_OFFSET",
            i64::from(VMCTX_MMU_POLL_SLOT_OFFSET),
        ),
        (
            "GEN_HEAP_MMU_POLL_SLOT_OFFSET",
            i64::from(HEAP_MMU_POLL_SLOT_OFFSET),
        ),
        ("GEN_VMMEMORY_BASE_OFFSET", i64::from(VMMEMORY_BASE_OFFSET)),
        (
            "GEN_VMMEMORY_CURRENT_LENGTH_OFFSET",
            i64::from(VMMEMORY_CURRENT_LENGTH_OFFSET),
        ),
        (
            "GEN_VMSTORE_CONTEXT_STACK_LIMIT_OFFSET",
            i64::from(VMSTORE_CONTEXT_STACK_LIMIT_OFFSET),
        ),
        (
            "GEN_VMSTORE_CONTEXT_SIZE",
            std::mem::size_of::<VMStoreContext>() as i64,
        ),
        (
            "GEN_VMFUNCREF_SIZE",
            std::mem::size_of::<VMFuncRef>() as i64,
        ),
        (
            "GEN_VMFUNCREF_WASM_CALL_OFFSET",
            i64::from(VMFUNCREF_WASM_CALL_OFFSET),
        ),
        (
            "GEN_VMFUNCREF_VMCTX_OFFSET",
            i64::from(VMFUNCREF_VMCTX_OFFSET),
        ),
        ("GEN_VALRAW_SIZE", std::mem::size_of::<ValRaw>() as i64),
        ("GEN_MEMORY_BYTES", MEMORY_BYTES as i64),
    ];
    for (name, value) in defines {
        writeln!(h, "#define {name} (GEN_I64({value}))").unwrap();
    }
    writeln!(h, "#define GEN_NUM_POLLS {}", compiled.polls.len()).unwrap();
    writeln!(h, "#define GEN_NUM_FUNCS {}", compiled.funcs.len()).unwrap();
    writeln!(h, "#define GEN_NUM_CASES {}", cases.len()).unwrap();
    writeln!(h, "#define GEN_NUM_STICKY_CASES {}\n", sticky.len()).unwrap();
    h.push_str("#ifndef __ASSEMBLER__\n\n");

    for (m, start) in MODULES.iter().zip(&compiled.starts) {
        writeln!(h, "// {}'s text starts at {start:#x}.", m.name).unwrap();
    }
    h.push_str("static const unsigned char gen_code[] __attribute__((aligned(16))) = {");
    for (i, byte) in compiled.text.iter().enumerate() {
        if i % 16 == 0 {
            h.push_str("\n   ");
        }
        write!(h, " {byte:#04x},").unwrap();
    }
    h.push_str("\n};\n\n");

    h.push_str("static const struct gen_poll gen_polls[GEN_NUM_POLLS] = {\n");
    for p in &compiled.polls {
        writeln!(
            h,
            "    {{{:#x}, {}, {}, {}, {}, {}, {}}}, // {}",
            p.offset,
            p.func,
            if p.entry { "KIND_ENTRY" } else { "KIND_LOOP" },
            if p.heap { "BASE_HEAP" } else { "BASE_VMCTX" },
            u8::from(p.wrapped),
            p.reg,
            p.disp,
            compiled.funcs[p.func].name
        )
        .unwrap();
    }
    h.push_str("};\n\n");

    h.push_str("static const struct gen_func gen_funcs[GEN_NUM_FUNCS] = {\n");
    for f in &compiled.funcs {
        writeln!(
            h,
            "    {{\"{}\", {}, {:#x}, {:#x}, {:#x}, {}}},",
            f.name, f.module, f.start, f.len, f.trampoline, f.entry_poll
        )
        .unwrap();
    }
    h.push_str("};\n\n");

    for (array, len, cases) in [
        ("gen_cases", "GEN_NUM_CASES", cases),
        ("gen_sticky_cases", "GEN_NUM_STICKY_CASES", sticky),
    ] {
        writeln!(h, "static const struct gen_case {array}[{len}] = {{").unwrap();
        for c in cases {
            let func = compiled
                .funcs
                .iter()
                .position(|f| f.name == c.name())
                .unwrap();
            let results = compiled.funcs[func].results;
            assert!(c.params.len() <= 4 && results <= 4);
            write!(
                h,
                "    {{{func}, {}, {results}, {}ULL, {{",
                c.params.len(),
                poll_executions(c)
            )
            .unwrap();
            for p in &c.params {
                write!(h, "{{{:#x}ULL, {:#x}ULL}}, ", p[0], p[1]).unwrap();
            }
            writeln!(h, "}}}}, // {}", c.name()).unwrap();
        }
        h.push_str("};\n\n");
    }
    h.push_str("#endif\n");
    h
}

/// Whether `tool --version` runs.
fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `cmd` to completion within `limit`, returning its status and
/// output.
fn run_with_limit(mut cmd: Command, limit: Duration) -> (bool, String) {
    let dir = std::env::temp_dir();
    let out_path = dir.join(format!("aarch64_polls_{}.out", std::process::id()));
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = cmd
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    match status {
        Some(status) => (status.success(), text),
        None => (false, format!("{text}\n(killed after {limit:?})")),
    }
}

/// Parses the harness's last line.
fn parse_summary(output: &str) -> Option<(u64, u64, u64)> {
    let line = output.lines().rev().find(|l| !l.trim().is_empty())?;
    let rest = line.strip_prefix("aarch64 polls: ")?;
    let mut numbers = rest
        .split(", ")
        .map(|part| part.split(' ').next().and_then(|n| n.parse().ok()));
    let (n, m, f) = (numbers.next()??, numbers.next()??, numbers.next()??);
    (rest == format!("{n} interrupts, {m} checks, {f} failures")).then_some((n, m, f))
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn aarch64_polls_under_qemu() {
    for tool in [GCC, QEMU] {
        if !have(tool) {
            println!(
                "aarch64 polls skipped: `{tool}` is not installed (Debian: apt-get install \
                 qemu-user gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu \
                 libc6-dev-arm64-cross)"
            );
            return;
        }
    }
    let wasms: Vec<Vec<u8>> = MODULES
        .iter()
        .map(|m| wat::parse_str(module_wat(m.memory)).unwrap())
        .collect();
    let cases = cases();
    let sticky = sticky_cases();
    let root = repo_root();
    let sources = [
        root.join("crates/cranelift/tests/aarch64/harness.c"),
        root.join("crates/cranelift/tests/aarch64/probe.S"),
        root.join("crates/wasmtime/src/runtime/vm/arch/aarch64_mmu_poll.s"),
    ];
    let (mut interrupts, mut checks) = (0, 0);
    let mut baselines = Vec::new();
    let mut per_mode = Vec::new();
    for (mode, mode_name) in MODES {
        let (mut mode_interrupts, mut mode_checks) = (0, 0);
        for opt_level in [OptLevel::Speed, OptLevel::None] {
            let (n, m, baseline) = run_harness(&wasms, &cases, &sticky, &sources, opt_level, mode);
            mode_interrupts += n;
            mode_checks += m;
            baselines.push((mode, opt_level, baseline));
        }
        per_mode.push((mode_name, mode_interrupts, mode_checks));
        interrupts += mode_interrupts;
        checks += mode_checks;
    }
    // The floating-point and SIMD results agree between the opt levels and
    // the modes.
    for (mode, opt_level, baseline) in &baselines[1..] {
        assert_eq!(
            &baselines[0].2, baseline,
            "results at {:?} ({:?}) and at {opt_level:?} ({mode:?})",
            baselines[0].1, baselines[0].0
        );
    }
    for (name, n, m) in per_mode {
        println!("aarch64 polls ({name}): {n} interrupts, {m} checks, 0 failures");
    }
    println!("aarch64 polls: {interrupts} interrupts, {checks} checks, 0 failures");
}

/// One harness run: compiles both modules at `opt_level` for `mode`, lays
/// them out, builds the harness and runs it under qemu; checks its results
/// and returns its interrupts, checks and baseline.
fn run_harness(
    wasms: &[Vec<u8>],
    cases: &[Case],
    sticky: &[Case],
    sources: &[PathBuf],
    opt_level: OptLevel,
    mode: MmuInterruptionMode,
) -> (u64, u64, Vec<(String, u64, u64)>) {
    let compiled = lay_out(
        wasms
            .iter()
            .enumerate()
            .map(|(index, wasm)| compile(index, wasm, opt_level, mode))
            .collect(),
        mode,
    );
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("aarch64_polls")
        .join(format!("{mode:?}"))
        .join(format!("{opt_level:?}"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("gen.h"), header(&compiled, cases, sticky, mode)).unwrap();
    // The laid-out code, for `aarch64-linux-gnu-objdump -D -b binary -m aarch64`.
    std::fs::write(dir.join("code.bin"), &compiled.text).unwrap();
    for (m, wasm) in MODULES.iter().zip(wasms) {
        std::fs::write(dir.join(format!("{}.wasm", m.name)), wasm).unwrap();
    }
    let exe = dir.join("harness");
    let mut gcc = Command::new(GCC);
    gcc.args(["-std=gnu11", "-O2", "-g", "-Wall", "-Wextra"])
        .args(["-static", "-pthread", "-Wa,--noexecstack"])
        .arg("-I")
        .arg(&dir)
        .arg("-o")
        .arg(&exe)
        .args(sources);
    let (ok, output) = run_with_limit(gcc, Duration::from_secs(300));
    assert!(ok, "building the harness failed:\n{output}");
    if !output.trim().is_empty() {
        println!("{GCC}: {output}");
    }
    let mut qemu = Command::new(QEMU);
    qemu.arg(&exe);
    let (ok, output) = run_with_limit(qemu, RUN_LIMIT);
    println!(
        "--- opt_level={opt_level:?}, mode={mode:?} ({}):\n{output}",
        dir.display()
    );
    let summary = parse_summary(&output);
    let at = format!("{opt_level:?} ({mode:?})");
    assert!(ok, "the harness failed at {at} (summary {summary:?})");
    let (n, m, f) = summary.unwrap_or_else(|| {
        panic!("the harness's last line is not `aarch64 polls: N interrupts, M checks, F failures`")
    });
    assert!(
        n > 0 && m > 0 && f == 0,
        "{n} interrupts, {m} checks, {f} failures"
    );

    // The uninterrupted results against the model.
    let baseline = baseline_of(&output);
    assert_eq!(baseline.len(), cases.len(), "the harness's baseline lines");
    for (case, (name, lo, _)) in cases.iter().zip(&baseline) {
        assert_eq!(&case.name(), name);
        if let Some(want) = model(case) {
            let got = if case.func == "heap" {
                *lo & 0xffff_ffff
            } else {
                *lo
            };
            assert_eq!(got, want, "{name} at {at}: result");
        }
    }
    // A function has the same results in both modules, whichever base its
    // polls read through.
    for (case, result) in cases.iter().zip(&baseline) {
        for (other, other_result) in cases.iter().zip(&baseline) {
            if other.module != case.module && other.func == case.func && other.params == case.params
            {
                assert_eq!(
                    (result.1, result.2),
                    (other_result.1, other_result.2),
                    "{} and {} at {at}",
                    case.name(),
                    other.name()
                );
            }
        }
    }
    (n, m, baseline)
}
