//! Golden disassembly of MMU polls, and proofs that every poll survives.
//!
//! Each shape below is built with a `FunctionBuilder` the way our Wasm
//! translator builds functions (tail calling convention, vmctx first, the
//! interrupt page at a constant offset below the vmctx), compiled for x86_64 and
//! aarch64 at every opt level with the shared settings of
//! `wasmtime_mmu_cranelift::Compiler::new`, and compared with
//! `tests/disas/NAME.ISA.OPT.txt`. `BLESS=1 cargo test --release -p
//! wasmtime-mmu-dead-load` rewrites the files.
//!
//! Independently of the golden files, every compilation checks that the
//! number of trap records with the poll trap code equals
//! `PollSites::emitted()`, and decodes the instruction at each poll's trap
//! record: a 32-bit load from the page with an in-range offset (and, on
//! aarch64, an `ldr wN, [xM, #imm]` whose base is not x16/x17).
//!
//! How the page is addressed differs per target. On x86_64 the base is the
//! vmctx itself and the page starts [`ENGINE_PAGE_OFFSET`] bytes from it,
//! as in our engine: any displacement fits the load. On aarch64 (not yet
//! supported by the runtime) the tests use a page pointer loaded from the
//! vmctx with `page_offset` 0, the form whose offsets fit `ldr`'s
//! immediate; a negative offset of -4112 would need the address computed
//! into a scratch register first.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use cranelift_codegen::Context;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I32, I64};
use cranelift_codegen::ir::{
    self, AbiParam, AliasRegion, AliasRegionData, ArgumentPurpose, BlockArg, Function, InstBuilder,
    MemFlagsData, Signature, TrapCode, UserFuncName, Value,
};
use cranelift_codegen::isa::{self, CallConv, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use target_lexicon::{Architecture, Triple};
use wasmtime_mmu_dead_load::{DISTINCT_OFFSETS, POLL_SPAN, PollSites, dead_load_with_context};

/// The trap code our engine gives polls (`MMU_POLL_CODE` in
/// crates/cranelift/src/compiler.rs).
const POLL: TrapCode = TrapCode::unwrap_user(249);

/// Where the (imaginary) vmctx keeps the interrupt page's address (the
/// aarch64 addressing).
const VMCTX_PAGE_OFFSET: i32 = 16;

/// Where our engine's poll page starts relative to the vmctx
/// (`VMCTX_MMU_POLL_PAGE_OFFSET` in crates/environ/src/vm.rs: one page and
/// the 16-byte prefix below it). The x86_64 addressing.
const ENGINE_PAGE_OFFSET: i32 = -(4096 + 16);

/// The targets: file-name tag and triple.
const ISAS: [(&str, &str); 2] = [
    ("x86_64", "x86_64-unknown-linux-gnu"),
    ("aarch64", "aarch64-unknown-linux-gnu"),
];

/// Cranelift's opt levels, as the `opt_level` setting spells them.
const OPT_LEVELS: [&str; 3] = ["none", "speed", "speed_and_size"];

/// A target with the shared settings our engine's `Compiler::new` uses.
fn target(triple: &str, opt_level: &str) -> OwnedTargetIsa {
    let mut shared = settings::builder();
    for (name, value) in [
        ("opt_level", opt_level),
        ("enable_verifier", "true"),
        ("enable_nan_canonicalization", "false"),
        ("preserve_frame_pointers", "true"),
        ("enable_probestack", "true"),
        ("probestack_strategy", "inline"),
        ("enable_multi_ret_implicit_sret", "true"),
        ("unwind_info", "false"),
        ("use_colocated_libcalls", "false"),
    ] {
        shared
            .set(name, value)
            .unwrap_or_else(|e| panic!("setting {name}={value}: {e}"));
    }
    let triple: Triple = triple.parse().expect("a valid triple");
    isa::lookup(triple)
        .expect("the target is compiled in")
        .finish(settings::Flags::new(shared))
        .expect("the target builds")
}

// ---- how polls are emitted ----

/// How a function's polls are emitted: our scheme, or one of the naive
/// alternatives the demonstrations show to be unsound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scheme {
    /// `dead_load_with_context`.
    Ours,
    /// Every poll at offset 0, no fences.
    SameOffset,
    /// Offsets as ours, but without any fences past `DISTINCT_OFFSETS`.
    WrapWithoutFences,
    /// Offsets as ours, with only the leading `sequence_point`.
    LeadingFenceOnly,
}

struct Poller {
    scheme: Scheme,
    sites: PollSites,
    naive_emitted: u32,
    /// Where the page starts relative to the base value.
    page_offset: i32,
}

impl Poller {
    fn new(scheme: Scheme, page_offset: i32) -> Poller {
        Poller {
            scheme,
            sites: PollSites::new(page_offset),
            naive_emitted: 0,
            page_offset,
        }
    }

    fn poll(&mut self, b: &mut FunctionBuilder<'_>, base: Value) {
        if self.scheme == Scheme::Ours {
            dead_load_with_context(b, &mut self.sites, base, POLL);
            return;
        }
        let k = self.naive_emitted;
        self.naive_emitted += 1;
        let offset = match self.scheme {
            Scheme::SameOffset => 0,
            _ => (k % DISTINCT_OFFSETS) * 4,
        };
        let fence = self.scheme == Scheme::LeadingFenceOnly && k >= DISTINCT_OFFSETS;
        if fence {
            b.ins().sequence_point();
        }
        let flags = MemFlagsData::new()
            .with_aligned()
            .with_trap_code(Some(POLL));
        b.ins()
            .load(I32, flags, base, self.page_offset + offset as i32);
    }

    fn emitted(&self) -> u32 {
        match self.scheme {
            Scheme::Ours => self.sites.emitted(),
            _ => self.naive_emitted,
        }
    }
}

// ---- the shapes ----

/// What a shape's body works with.
struct Cx<'a, 'b> {
    b: &'a mut FunctionBuilder<'b>,
    poller: &'a mut Poller,
    /// What polls address the page from (see [`addressing`]).
    base: Value,
    /// An `i32` parameter.
    x: Value,
    /// An `i32` parameter: the trip count of every loop.
    n: Value,
    /// An `i64` parameter: a heap base for stores.
    heap: Value,
    /// The alias region of heap stores (like our engine's Wasm memories).
    heap_region: AliasRegion,
}

impl Cx<'_, '_> {
    fn poll(&mut self) {
        self.poller.poll(self.b, self.base);
    }

    /// `for i in 0..n { acc = body(i, acc) }` (at least once), with a poll
    /// at the loop header. Returns the final `acc`.
    fn counted_loop(
        &mut self,
        acc: Value,
        body: &mut dyn FnMut(&mut Self, Value, Value) -> Value,
    ) -> Value {
        let header = self.b.create_block();
        let i = self.b.append_block_param(header, I32);
        let a = self.b.append_block_param(header, I32);
        let exit = self.b.create_block();
        let result = self.b.append_block_param(exit, I32);
        let zero = self.b.ins().iconst(I32, 0);
        self.b
            .ins()
            .jump(header, &[BlockArg::Value(zero), BlockArg::Value(acc)]);
        self.b.switch_to_block(header);
        self.poll();
        let a2 = body(self, i, a);
        let i2 = self.b.ins().iadd_imm_s(i, 1);
        let more = self.b.ins().icmp(IntCC::UnsignedLessThan, i2, self.n);
        self.b.ins().brif(
            more,
            header,
            &[BlockArg::Value(i2), BlockArg::Value(a2)],
            exit,
            &[BlockArg::Value(a2)],
        );
        self.b.seal_block(header);
        self.b.switch_to_block(exit);
        self.b.seal_block(exit);
        result
    }
}

/// One step of loop arithmetic on live values.
fn mix(cx: &mut Cx<'_, '_>, i: Value, acc: Value) -> Value {
    let t = cx.b.ins().imul(acc, cx.x);
    let t = cx.b.ins().bxor(t, i);
    cx.b.ins().iadd_imm_s(t, 7)
}

/// A shape: builds the body after the entry block (and its page load, on aarch64), and
/// returns the function's result.
type Shape = fn(&mut Cx<'_, '_>) -> Value;

/// (1) A leaf: only the entry poll, then a computed value.
fn leaf(cx: &mut Cx<'_, '_>) -> Value {
    cx.poll();
    let t = cx.b.ins().imul_imm_s(cx.x, 3);
    cx.b.ins().iadd(t, cx.n)
}

/// (2) An entry poll and a store-free loop polling at its header.
fn simple_loop(cx: &mut Cx<'_, '_>) -> Value {
    cx.poll();
    let x = cx.x;
    cx.counted_loop(x, &mut mix)
}

/// (3) Nested loops: the entry and both headers poll.
fn nested_loops(cx: &mut Cx<'_, '_>) -> Value {
    cx.poll();
    let x = cx.x;
    cx.counted_loop(x, &mut |cx, i, acc| {
        cx.counted_loop(acc, &mut |cx, j, acc| {
            let t = cx.b.ins().imul(i, j);
            let t = cx.b.ins().iadd(acc, t);
            mix(cx, j, t)
        })
    })
}

/// (4) A loop whose body stores to the heap (another address, in its own
/// alias region, so the store is not a fence for the polls).
fn loop_with_store(cx: &mut Cx<'_, '_>) -> Value {
    cx.poll();
    let x = cx.x;
    cx.counted_loop(x, &mut |cx, i, acc| {
        let acc = mix(cx, i, acc);
        let index = cx.b.ins().uextend(I64, i);
        let byte_offset = cx.b.ins().ishl_imm_u(index, 2);
        let addr = cx.b.ins().iadd(cx.heap, byte_offset);
        let flags = MemFlagsData::new()
            .with_aligned()
            .with_alias_region(Some(cx.heap_region));
        cx.b.ins().store(flags, acc, addr, 0);
        acc
    })
}

/// Loops in sequence inside loops in sequence: 1 + OUTER * (1 + INNER)
/// polls, more than `DISTINCT_OFFSETS`, no stores at all.
fn many_loops(cx: &mut Cx<'_, '_>) -> Value {
    const OUTER: usize = 3;
    const INNER: usize = 400;
    cx.poll();
    let mut acc = cx.x;
    for _ in 0..OUTER {
        acc = cx.counted_loop(acc, &mut |cx, _i, mut acc| {
            for _ in 0..INNER {
                acc = cx.counted_loop(acc, &mut mix);
            }
            acc
        });
    }
    acc
}

/// The signature of our Wasm functions, `(vmctx, caller_vmctx, x: i32,
/// n: i32, heap: i64) -> i32`, with the tail convention.
fn signature() -> Signature {
    let mut sig = Signature::new(CallConv::Tail);
    sig.params
        .push(AbiParam::special(I64, ArgumentPurpose::VMContext));
    sig.params.push(AbiParam::new(I64));
    sig.params.push(AbiParam::new(I32));
    sig.params.push(AbiParam::new(I32));
    sig.params.push(AbiParam::new(I64));
    sig.returns.push(AbiParam::new(I32));
    sig
}

/// The base value polls use on `isa` and the page's offset from it: the
/// vmctx itself on x86_64 (our engine's layout); on aarch64 a page
/// pointer, a read-only, movable load from the vmctx.
fn addressing(isa: &OwnedTargetIsa, b: &mut FunctionBuilder<'_>, vmctx: Value) -> (Value, i32) {
    match isa.triple().architecture {
        Architecture::X86_64 => (vmctx, ENGINE_PAGE_OFFSET),
        _ => {
            let flags = MemFlagsData::trusted().with_readonly().with_can_move();
            (b.ins().load(I64, flags, vmctx, VMCTX_PAGE_OFFSET), 0)
        }
    }
}

/// The page offset [`addressing`] picks for `arch`.
fn page_offset_for(arch: Architecture) -> i32 {
    match arch {
        Architecture::X86_64 => ENGINE_PAGE_OFFSET,
        _ => 0,
    }
}

/// Starts a function: entry block, parameters.
fn begin<'b>(
    func: &'b mut Function,
    fctx: &'b mut FunctionBuilderContext,
) -> (FunctionBuilder<'b>, [Value; 5]) {
    let mut b = FunctionBuilder::new(func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let p = b.block_params(entry);
    let params = [p[0], p[1], p[2], p[3], p[4]];
    (b, params)
}

/// Builds `shape` with `scheme`; returns the function and its poll count.
fn build(isa: &OwnedTargetIsa, shape: Shape, scheme: Scheme) -> (Function, u32) {
    let mut func = Function::with_name_signature(UserFuncName::user(0, 0), signature());
    let mut fctx = FunctionBuilderContext::new();
    let heap_region = func.dfg.alias_regions.insert(AliasRegionData {
        user_id: 1,
        description: "heap".into(),
    });
    let (mut b, [vmctx, _caller, x, n, heap]) = begin(&mut func, &mut fctx);
    let (base, page_offset) = addressing(isa, &mut b, vmctx);
    let mut poller = Poller::new(scheme, page_offset);
    let mut cx = Cx {
        b: &mut b,
        poller: &mut poller,
        base,
        x,
        n,
        heap,
        heap_region,
    };
    let result = shape(&mut cx);
    b.ins().return_(&[result]);
    b.seal_all_blocks();
    b.finalize(isa.frontend_config());
    (func, poller.emitted())
}

/// A function whose polls are emitted out of dominance order: the entry
/// jumps to `a`, `a` jumps to `b`, `b` returns; `b` is filled first with
/// `DISTINCT_OFFSETS` polls (every offset once), then `a` gets one more
/// poll, which wraps to offset 0 and dominates `b`'s first poll.
fn out_of_order(isa: &OwnedTargetIsa, scheme: Scheme) -> (Function, u32) {
    let mut func = Function::with_name_signature(UserFuncName::user(0, 1), signature());
    let mut fctx = FunctionBuilderContext::new();
    let (mut b, [vmctx, _caller, x, _n, _heap]) = begin(&mut func, &mut fctx);
    let (page, page_offset) = addressing(isa, &mut b, vmctx);
    let block_a = b.create_block();
    let block_b = b.create_block();
    b.ins().jump(block_a, &[]);
    let mut poller = Poller::new(scheme, page_offset);

    b.switch_to_block(block_b);
    for _ in 0..DISTINCT_OFFSETS {
        poller.poll(&mut b, page);
    }
    b.ins().return_(&[x]);

    b.switch_to_block(block_a);
    poller.poll(&mut b, page);
    b.ins().jump(block_b, &[]);

    b.seal_all_blocks();
    b.finalize(isa.frontend_config());
    (func, poller.emitted())
}

// ---- compiling and checking ----

/// What one compilation produced.
struct Compiled {
    /// Disassembly and trap records, the golden file's contents.
    text: String,
    /// In-page offsets read by the poll instructions, in code order.
    poll_offsets: Vec<u32>,
    /// Whether the code contains a call.
    has_call: bool,
}

/// Compiles `func`, checks every poll's trap record and instruction, and
/// renders the golden text.
fn compile(isa: &OwnedTargetIsa, func: Function, polls: u32, what: &str) -> Compiled {
    let mut ctx = Context::for_function(func);
    ctx.set_disasm(true);
    let code = match ctx.compile(&**isa, &mut ControlPlane::default()) {
        Ok(code) => code,
        Err(e) => panic!(
            "{what}: Cranelift failed: {:?}\n{}",
            e.inner,
            e.func.display()
        ),
    };
    let vcode = code.vcode.clone().expect("disassembly was requested");
    let bytes = code.buffer.data();
    let traps = code.buffer.traps();

    let mut text = vcode.clone();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(";; trap records (offset: code)\n");
    for trap in traps {
        writeln!(text, ";; {:#06x}: {}", trap.offset, trap.code).unwrap();
    }

    let poll_traps: Vec<u32> = traps
        .iter()
        .filter(|t| t.code == POLL)
        .map(|t| t.offset)
        .collect();
    assert_eq!(
        poll_traps.len(),
        polls as usize,
        "{what}: {} poll trap records for {polls} polls emitted",
        poll_traps.len()
    );
    let arch = isa.triple().architecture;
    let page_offset = page_offset_for(arch);
    let poll_offsets = poll_traps
        .iter()
        .map(|&at| decode_poll(arch, &bytes[at as usize..], page_offset, what, at))
        .collect();

    let has_call = vcode.lines().any(|line| {
        let mnemonic = line.split_whitespace().next().unwrap_or("");
        matches!(mnemonic, "call" | "call_indirect" | "bl" | "blr")
            || mnemonic.starts_with("call")
            || mnemonic.starts_with("return_call")
    });
    Compiled {
        text,
        poll_offsets,
        has_call,
    }
}

/// Decodes the poll instruction at the start of `code` and returns its
/// in-page offset (its displacement less `page_offset`). Panics unless it
/// is a 32-bit load with a base register and an immediate displacement
/// that lands in `[0, POLL_SPAN)` of the page.
fn decode_poll(arch: Architecture, code: &[u8], page_offset: i32, what: &str, at: u32) -> u32 {
    let offset = match arch {
        Architecture::X86_64 => decode_x64_load32(code),
        Architecture::Aarch64(_) => decode_a64_ldr_w(code),
        other => panic!("unexpected architecture {other}"),
    };
    let displacement = offset
        .unwrap_or_else(|why| panic!("{what}: the poll at {at:#x} is not a plain load: {why}"));
    let offset = displacement - i64::from(page_offset);
    assert!(
        (0..i64::from(POLL_SPAN)).contains(&offset) && offset % 4 == 0,
        "{what}: the poll at {at:#x} reads offset {offset} of the page \
         (displacement {displacement})"
    );
    offset as u32
}

/// `mov r32, dword ptr [base + disp]`: optional REX without W, 0x8B, a
/// memory ModRM (with SIB if the base needs one), disp0/8/32.
fn decode_x64_load32(code: &[u8]) -> Result<i64, String> {
    let mut i = 0;
    if (0x40..=0x4f).contains(&code[0]) {
        if code[0] & 0x08 != 0 {
            return Err("REX.W set: a 64-bit load".into());
        }
        i = 1;
    }
    if code[i] != 0x8b {
        return Err(format!(
            "opcode {:#04x}, not 0x8b (mov r32, r/m32)",
            code[i]
        ));
    }
    let modrm = code[i + 1];
    let (md, rm) = (modrm >> 6, modrm & 7);
    let mut j = i + 2;
    if md == 3 {
        return Err("register operand, not memory".into());
    }
    if rm == 4 {
        let sib = code[j];
        j += 1;
        if md == 0 && sib & 7 == 5 {
            return Err("absolute address, no base register".into());
        }
    } else if md == 0 && rm == 5 {
        return Err("RIP-relative, not the page".into());
    }
    let disp = match md {
        0 => 0,
        1 => i64::from(code[j] as i8),
        _ => i64::from(i32::from_le_bytes(code[j..j + 4].try_into().unwrap())),
    };
    Ok(disp)
}

/// `ldr wT, [xN, #imm]`, unsigned scaled 12-bit immediate, base not x16/x17.
fn decode_a64_ldr_w(code: &[u8]) -> Result<i64, String> {
    let insn = u32::from_le_bytes(code[..4].try_into().unwrap());
    if insn & 0xffc0_0000 != 0xb940_0000 {
        return Err(format!("{insn:#010x} is not `ldr wT, [xN, #imm]`"));
    }
    let base = (insn >> 5) & 31;
    if base == 16 || base == 17 {
        return Err(format!("base register x{base} is a scratch register"));
    }
    Ok(i64::from((insn >> 10) & 0xfff) * 4)
}

/// The golden file for one compilation.
fn golden_path(name: &str, isa: &str, opt: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/disas")
        .join(format!("{name}.{isa}.{opt}.txt"))
}

/// Compares `actual` with the golden file (or rewrites it under `BLESS`);
/// returns a description of the difference, if any.
fn check_golden(name: &str, isa: &str, opt: &str, actual: &str) -> Option<String> {
    let path = golden_path(name, isa, opt);
    let header = format!(
        ";; {name} for {isa} at opt_level={opt}: golden output of tests/disas.rs\n\
         ;; (`BLESS=1 cargo test --release -p wasmtime-mmu-dead-load` rewrites it)\n"
    );
    let actual = format!("{header}{actual}");
    if std::env::var_os("BLESS").is_some_and(|v| !v.is_empty() && v != "0") {
        std::fs::write(&path, &actual).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return None;
    }
    let expected = match std::fs::read_to_string(&path) {
        Ok(expected) => expected,
        Err(e) => {
            return Some(format!(
                "{}: {e} (run with BLESS=1 to create it)",
                path.display()
            ));
        }
    };
    if expected == actual {
        return None;
    }
    Some(format!(
        "{} differs (run with BLESS=1 to accept):\n--- expected\n+++ actual\n{}",
        path.display(),
        diff(&expected, &actual)
    ))
}

/// A line diff (longest common subsequence): unchanged lines with ` `,
/// removed with `-`, added with `+`, keeping three lines of context.
fn diff(expected: &str, actual: &str) -> String {
    let a: Vec<&str> = expected.lines().collect();
    let b: Vec<&str> = actual.lines().collect();
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut ops = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            ops.push((' ', a[i]));
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            ops.push(('-', a[i]));
            i += 1;
        } else {
            ops.push(('+', b[j]));
            j += 1;
        }
    }
    const CONTEXT: usize = 3;
    let near_change = |k: usize| {
        let lo = k.saturating_sub(CONTEXT);
        let hi = (k + CONTEXT + 1).min(ops.len());
        ops[lo..hi].iter().any(|(op, _)| *op != ' ')
    };
    let mut out = String::new();
    let mut skipped = false;
    for (k, (op, line)) in ops.iter().enumerate() {
        if near_change(k) {
            if skipped {
                out.push_str("@@\n");
                skipped = false;
            }
            writeln!(out, "{op}{line}").unwrap();
        } else {
            skipped = true;
        }
    }
    out
}

/// Builds and compiles `shape` for every target and opt level, checks the
/// polls, compares with the golden files, and returns the offsets of the
/// polls per (isa, opt).
fn run_golden(name: &str, shape: Shape) -> BTreeMap<(String, String), Compiled> {
    let mut failures = Vec::new();
    let mut all = BTreeMap::new();
    for (isa_name, triple) in ISAS {
        for opt in OPT_LEVELS {
            let isa = target(triple, opt);
            let (func, polls) = build(&isa, shape, Scheme::Ours);
            let what = format!("{name}.{isa_name}.{opt}");
            let compiled = compile(&isa, func, polls, &what);
            let mut distinct = compiled.poll_offsets.clone();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(
                distinct.len(),
                compiled.poll_offsets.len(),
                "{what}: two polls read the same offset: {:?}",
                compiled.poll_offsets
            );
            if let Some(failure) = check_golden(name, isa_name, opt, &compiled.text) {
                failures.push(failure);
            }
            all.insert((isa_name.to_string(), opt.to_string()), compiled);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    all
}

// ---- the tests ----

#[test]
fn golden_leaf() {
    for ((isa, opt), compiled) in run_golden("leaf", leaf) {
        assert!(
            !compiled.has_call,
            "leaf.{isa}.{opt}: a poll must not make a leaf call anything:\n{}",
            compiled.text
        );
        // A page below the base (x86_64) is handed out from its top, the
        // slot nearest the vmctx (displacement -20, one byte); a page
        // pointer (aarch64) from its start.
        let first = if isa == "x86_64" { POLL_SPAN - 4 } else { 0 };
        assert_eq!(compiled.poll_offsets, [first], "leaf.{isa}.{opt}");
    }
}

#[test]
fn golden_simple_loop() {
    run_golden("loop", simple_loop);
}

#[test]
fn golden_nested_loops() {
    run_golden("nested", nested_loops);
}

#[test]
fn golden_loop_with_store() {
    run_golden("store", loop_with_store);
}

/// More than `DISTINCT_OFFSETS` polls in a store-free loop nest: every one
/// keeps its trap record at every opt level on both targets.
#[test]
fn more_polls_than_offsets() {
    for (isa_name, triple) in ISAS {
        for opt in OPT_LEVELS {
            let isa = target(triple, opt);
            let (func, polls) = build(&isa, many_loops, Scheme::Ours);
            assert!(polls > DISTINCT_OFFSETS + 100, "{polls} polls");
            let what = format!("many_loops.{isa_name}.{opt}");
            let compiled = compile(&isa, func, polls, &what);
            // Every offset is in use, each at most ceil(polls / 1024) times.
            let mut uses = BTreeMap::new();
            for offset in &compiled.poll_offsets {
                *uses.entry(*offset).or_insert(0u32) += 1;
            }
            assert_eq!(uses.len() as u32, DISTINCT_OFFSETS, "{what}");
            let most = polls.div_ceil(DISTINCT_OFFSETS);
            assert!(uses.values().all(|&n| n <= most), "{what}: {uses:?}");
        }
    }
}

/// Polls emitted out of dominance order past `DISTINCT_OFFSETS`: the
/// bracketing fences keep all of them.
#[test]
fn out_of_order_polls_survive() {
    for (isa_name, triple) in ISAS {
        for opt in OPT_LEVELS {
            let isa = target(triple, opt);
            let (func, polls) = out_of_order(&isa, Scheme::Ours);
            assert_eq!(polls, DISTINCT_OFFSETS + 1);
            compile(&isa, func, polls, &format!("out_of_order.{isa_name}.{opt}"));
        }
    }
}

/// Trap records with the poll code after compiling `func`.
fn surviving_polls(isa: &OwnedTargetIsa, func: Function) -> usize {
    let mut ctx = Context::for_function(func);
    let code = ctx
        .compile(&**isa, &mut ControlPlane::default())
        .map_err(|e| format!("{:?}", e.inner))
        .unwrap();
    code.buffer
        .traps()
        .iter()
        .filter(|t| t.code == POLL)
        .count()
}

/// Why the scheme is what it is: each naive alternative loses polls at
/// `opt_level=speed` on both targets (and our scheme, on the same
/// functions, does not).
#[test]
fn naive_schemes_lose_polls() {
    type Builder = fn(&OwnedTargetIsa, Scheme) -> (Function, u32);
    let cases: [(&str, Builder, Scheme); 4] = [
        (
            "loop, every poll at offset 0",
            |isa, s| build(isa, simple_loop, s),
            Scheme::SameOffset,
        ),
        (
            "loop with a heap store, every poll at offset 0",
            |isa, s| build(isa, loop_with_store, s),
            Scheme::SameOffset,
        ),
        (
            "many loops, offsets wrap without fences",
            |isa, s| build(isa, many_loops, s),
            Scheme::WrapWithoutFences,
        ),
        (
            "out-of-order polls, only a leading fence",
            out_of_order,
            Scheme::LeadingFenceOnly,
        ),
    ];
    for (isa_name, triple) in ISAS {
        let isa = target(triple, "speed");
        for (what, builder, naive) in cases {
            let (func, polls) = builder(&isa, naive);
            let survived = surviving_polls(&isa, func);
            assert!(
                survived < polls as usize,
                "{isa_name}, {what}: expected the optimizer to drop a poll, \
                 but all {polls} survived"
            );
            let (func, polls) = builder(&isa, Scheme::Ours);
            assert_eq!(
                surviving_polls(&isa, func),
                polls as usize,
                "{isa_name}, {what}, our scheme"
            );
        }
    }
}

/// The IR a poll is: a trapping, aligned, non-readonly, unmovable `i32`
/// load without an alias region, with a result nobody uses; fenced only
/// past `DISTINCT_OFFSETS`.
#[test]
fn poll_instruction_flags() {
    let isa = target(ISAS[0].1, "none");
    let (func, polls) = out_of_order(&isa, Scheme::Ours);
    let mut loads = 0;
    let mut fences = 0;
    for block in func.layout.blocks() {
        for inst in func.layout.block_insts(block) {
            match func.dfg.insts[inst] {
                ir::InstructionData::Load {
                    opcode: ir::Opcode::Load,
                    flags,
                    offset,
                    ..
                } => {
                    let flags = func.dfg.mem_flags[flags];
                    if flags.trap_code() != Some(POLL) {
                        continue;
                    }
                    loads += 1;
                    assert!(flags.aligned() && !flags.notrap());
                    assert!(!flags.readonly() && !flags.can_move());
                    assert_eq!(flags.alias_region(), None);
                    assert_eq!(func.dfg.value_type(func.dfg.first_result(inst)), I32);
                    let offset = i64::from(offset) - i64::from(ENGINE_PAGE_OFFSET);
                    assert!((0..i64::from(POLL_SPAN)).contains(&offset));
                }
                ir::InstructionData::NullAry {
                    opcode: ir::Opcode::SequencePoint,
                } => fences += 1,
                _ => {}
            }
        }
    }
    assert_eq!(loads, polls);
    // Only the one poll past DISTINCT_OFFSETS is bracketed.
    assert_eq!(fences, 2);
}

#[test]
fn offsets_are_handed_out_in_order() {
    let isa = target(ISAS[0].1, "none");
    let mut func = Function::with_name_signature(UserFuncName::user(0, 2), signature());
    let mut fctx = FunctionBuilderContext::new();
    let (mut b, [vmctx, ..]) = begin(&mut func, &mut fctx);
    let mut sites = PollSites::new(ENGINE_PAGE_OFFSET);
    assert_eq!(sites.emitted(), 0);
    let mut offsets = Vec::new();
    for _ in 0..DISTINCT_OFFSETS + 3 {
        let inst = dead_load_with_context(&mut b, &mut sites, vmctx, POLL);
        match b.func.dfg.insts[inst] {
            ir::InstructionData::Load { offset, .. } => offsets.push(i64::from(offset)),
            ref other => panic!("not a load: {other:?}"),
        }
    }
    assert_eq!(sites.emitted(), DISTINCT_OFFSETS + 3);
    let expected: Vec<i64> = (0..i64::from(DISTINCT_OFFSETS))
        .chain(0..3)
        // The page lies below the vmctx, so slots go from its top down.
        .map(|k| i64::from(ENGINE_PAGE_OFFSET) + i64::from(POLL_SPAN) - 4 - k * 4)
        .collect();
    assert_eq!(offsets, expected);
    let x = b.block_params(b.current_block().unwrap())[2];
    b.ins().return_(&[x]);
    b.finalize(isa.frontend_config());
}
