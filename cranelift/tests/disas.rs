//! Golden disassembly of MMU polls, and proofs that every poll survives.
//!
//! Each shape below is built with a `FunctionBuilder` the way our Wasm
//! translator builds functions (tail calling convention, vmctx first, the
//! interrupt page at a constant offset below the vmctx or below a heap
//! base), compiled for x86_64 and aarch64 at every opt level with the
//! shared settings of `wasmtime_mmu_cranelift::Compiler::new`, and compared
//! with `tests/disas/NAME.ISA.OPT.txt`. `BLESS=1 cargo test --release -p
//! wasmtime-mmu-dead-load` rewrites the files.
//!
//! Independently of the golden files, every compilation checks that the
//! number of trap records with the poll trap code equals
//! `PollSites::emitted()`, and decodes the instruction at each poll's trap
//! record: a 32-bit load from the page with an in-range offset encoded in
//! the instruction (on aarch64 an `ldur wT, [xN, #simm9]` or
//! `ldr wT, [xN, #imm]` whose base is not x16/x17). The aarch64 golden
//! files end with that decoding, one line per poll.
//!
//! The page is addressed as our engine does on both targets: from the
//! vmctx with the page at [`ENGINE_PAGE_OFFSET`] (-4112), or, in the
//! `heap_*` shapes, from a heap base with the page at
//! [`HEAP_PAGE_OFFSET`] (-4096). Polls get their slots from
//! `PollSites::for_isa`: every slot on x86_64, whose loads take any
//! displacement; on aarch64 only those within `ldur`'s reach (60 below the
//! vmctx, 64 below a heap base), wrapping with fences past them.

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
use wasmtime_mmu_dead_load::{
    DISTINCT_OFFSETS, DirectOffsets, POLL_SPAN, PollSites, dead_load_through_slot,
    dead_load_with_context,
};

/// The trap code our engine gives polls (`MMU_POLL_CODE` in
/// crates/cranelift/src/compiler.rs).
const POLL: TrapCode = TrapCode::unwrap_user(249);

/// Where our engine's poll page starts relative to the vmctx
/// (`VMCTX_MMU_POLL_PAGE_OFFSET` in crates/environ/src/vm.rs: one page and
/// the 16-byte prefix below it).
const ENGINE_PAGE_OFFSET: i32 = -(4096 + 16);

/// Where a linear memory's poll page starts relative to the memory's base
/// (`HEAP_MMU_POLL_PAGE_OFFSET` in crates/environ/src/vm.rs: the page right
/// below the base).
const HEAP_PAGE_OFFSET: i32 = -4096;

/// How a function's polls address the page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Addressing {
    /// Through the vmctx, page at [`ENGINE_PAGE_OFFSET`].
    Vmctx,
    /// Through the heap base parameter, page at [`HEAP_PAGE_OFFSET`].
    Heap,
}

impl Addressing {
    fn page_offset(self) -> i32 {
        match self {
            Addressing::Vmctx => ENGINE_PAGE_OFFSET,
            Addressing::Heap => HEAP_PAGE_OFFSET,
        }
    }
}

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
/// alternatives the demonstrations show to be unsound (or, on aarch64,
/// costly).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scheme {
    /// `dead_load_with_context` with `PollSites::for_isa`.
    Ours,
    /// `dead_load_with_context` with `PollSites::new`: every slot of the
    /// page, encodable or not.
    AllSlots,
    /// Every poll at our first offset, no fences.
    SameOffset,
    /// Offsets as ours, but without any fences past the last distinct one.
    WrapWithoutFences,
    /// Offsets as ours, with only the leading `sequence_point`.
    LeadingFenceOnly,
    /// `dead_load_through_slot`: a fenced reload of the slot, then the
    /// poll through the reloaded page address.
    Slot,
    /// The slot poll without its fence: the reloads merge.
    SlotWithoutFence,
}

/// Where our engine's slot lies relative to the vmctx
/// (`VMCTX_MMU_POLL_SLOT_OFFSET`: the second word of the 16 bytes the
/// runtime keeps before it).
const ENGINE_SLOT_OFFSET: i32 = -8;

/// Where a linear memory's slot lies relative to its base
/// (`HEAP_MMU_POLL_SLOT_OFFSET`).
const HEAP_SLOT_OFFSET: i32 = HEAP_PAGE_OFFSET + 4096 - 8;

impl Scheme {
    fn through_slot(self) -> bool {
        matches!(self, Scheme::Slot | Scheme::SlotWithoutFence)
    }
}

struct Poller {
    scheme: Scheme,
    sites: PollSites,
    naive_emitted: u32,
    /// The slot's offset from the polls' base, for the slot schemes.
    slot_offset: i32,
}

impl Poller {
    fn new(scheme: Scheme, page_offset: i32, isa: &OwnedTargetIsa) -> Poller {
        let sites = match scheme {
            Scheme::AllSlots => PollSites::new(page_offset),
            _ => PollSites::for_isa(page_offset, &**isa),
        };
        let slot_offset = if page_offset == HEAP_PAGE_OFFSET {
            HEAP_SLOT_OFFSET
        } else {
            ENGINE_SLOT_OFFSET
        };
        Poller {
            scheme,
            sites,
            naive_emitted: 0,
            slot_offset,
        }
    }

    fn poll(&mut self, b: &mut FunctionBuilder<'_>, base: Value) {
        if matches!(self.scheme, Scheme::Ours | Scheme::AllSlots) {
            dead_load_with_context(b, &mut self.sites, base, POLL);
            return;
        }
        let k = self.naive_emitted;
        self.naive_emitted += 1;
        match self.scheme {
            Scheme::Slot => {
                dead_load_through_slot(b, base, self.slot_offset, POLL);
                return;
            }
            Scheme::SlotWithoutFence => {
                let reload = MemFlagsData::new().with_notrap().with_aligned();
                let page = b.ins().load(I64, reload, base, self.slot_offset);
                let flags = MemFlagsData::new()
                    .with_aligned()
                    .with_trap_code(Some(POLL));
                b.ins().load(I32, flags, page, 0);
                return;
            }
            _ => {}
        }
        let offset = match self.scheme {
            Scheme::SameOffset => self.sites.offset(0),
            _ => self.sites.offset(k),
        };
        let fence = self.scheme == Scheme::LeadingFenceOnly && k >= self.sites.distinct_offsets();
        if fence {
            b.ins().sequence_point();
        }
        let flags = MemFlagsData::new()
            .with_aligned()
            .with_trap_code(Some(POLL));
        b.ins().load(I32, flags, base, offset);
    }

    fn emitted(&self) -> u32 {
        match self.scheme {
            Scheme::Ours | Scheme::AllSlots => self.sites.emitted(),
            _ => self.naive_emitted,
        }
    }
}

// ---- the shapes ----

/// What a shape's body works with.
struct Cx<'a, 'b> {
    b: &'a mut FunctionBuilder<'b>,
    poller: &'a mut Poller,
    /// What polls address the page from: the vmctx or the heap base.
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

/// A shape: builds the body after the entry block, and returns the
/// function's result.
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

/// More polls in a row than aarch64 encodes directly (60 below the vmctx,
/// 64 below a heap base), so that the last ones wrap around with fences;
/// then a computed value.
fn many_polls(cx: &mut Cx<'_, '_>) -> Value {
    const POLLS: usize = 70;
    for _ in 0..POLLS {
        cx.poll();
    }
    let t = cx.b.ins().imul_imm_s(cx.x, 5);
    cx.b.ins().iadd(t, cx.n)
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

/// A function built for a test, with what checking its polls needs.
struct Built {
    func: Function,
    /// Polls emitted.
    polls: u32,
    /// Where the page starts relative to the polls' base (0 for polls
    /// through a slot, which read the page they reloaded at offset 0).
    page_offset: i32,
    /// Distinct offsets the function's allocator hands out.
    distinct: u32,
    /// For polls through a slot: the slot's offset from the base.
    slot_offset: Option<i32>,
}

/// Builds `shape` with `scheme`, polling through the vmctx.
fn build(isa: &OwnedTargetIsa, shape: Shape, scheme: Scheme) -> Built {
    build_with(isa, shape, scheme, Addressing::Vmctx)
}

/// Builds `shape` with `scheme`, polling as `addressing` says.
fn build_with(isa: &OwnedTargetIsa, shape: Shape, scheme: Scheme, addressing: Addressing) -> Built {
    let mut func = Function::with_name_signature(UserFuncName::user(0, 0), signature());
    let mut fctx = FunctionBuilderContext::new();
    let heap_region = func.dfg.alias_regions.insert(AliasRegionData {
        user_id: 1,
        description: "heap".into(),
    });
    let (mut b, [vmctx, _caller, x, n, heap]) = begin(&mut func, &mut fctx);
    let base = match addressing {
        Addressing::Vmctx => vmctx,
        Addressing::Heap => heap,
    };
    let page_offset = addressing.page_offset();
    let mut poller = Poller::new(scheme, page_offset, isa);
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
    let through_slot = scheme.through_slot();
    Built {
        func,
        polls: poller.emitted(),
        page_offset: if through_slot { 0 } else { page_offset },
        distinct: if through_slot {
            1
        } else {
            poller.sites.distinct_offsets()
        },
        slot_offset: through_slot.then_some(poller.slot_offset),
    }
}

/// A function whose polls are emitted out of dominance order: the entry
/// jumps to `a`, `a` jumps to `b`, `b` returns; `b` is filled first with
/// as many polls as the allocator has distinct offsets (every offset
/// once), then `a` gets one more poll, which wraps to the first offset and
/// dominates `b`'s first poll.
fn out_of_order(isa: &OwnedTargetIsa, scheme: Scheme) -> Built {
    let mut func = Function::with_name_signature(UserFuncName::user(0, 1), signature());
    let mut fctx = FunctionBuilderContext::new();
    let (mut b, [vmctx, _caller, x, _n, _heap]) = begin(&mut func, &mut fctx);
    let block_a = b.create_block();
    let block_b = b.create_block();
    b.ins().jump(block_a, &[]);
    let mut poller = Poller::new(scheme, ENGINE_PAGE_OFFSET, isa);

    b.switch_to_block(block_b);
    for _ in 0..poller.sites.distinct_offsets() {
        poller.poll(&mut b, vmctx);
    }
    b.ins().return_(&[x]);

    b.switch_to_block(block_a);
    poller.poll(&mut b, vmctx);
    b.ins().jump(block_b, &[]);

    b.seal_all_blocks();
    b.finalize(isa.frontend_config());
    Built {
        func,
        polls: poller.emitted(),
        page_offset: ENGINE_PAGE_OFFSET,
        distinct: poller.sites.distinct_offsets(),
        slot_offset: None,
    }
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
    /// For polls through a slot: reloads of the slot left after
    /// optimization.
    reloads: usize,
}

/// Compiles `built`, checks every poll's trap record and instruction, and
/// renders the golden text.
fn compile(isa: &OwnedTargetIsa, built: Built, what: &str) -> Compiled {
    let Built {
        func,
        polls,
        page_offset,
        slot_offset,
        ..
    } = built;
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
    let mut poll_offsets = Vec::with_capacity(poll_traps.len());
    let mut poll_lines = String::new();
    for &at in &poll_traps {
        let (offset, line) = decode_poll(arch, &bytes[at as usize..], page_offset, what, at);
        poll_offsets.push(offset);
        writeln!(poll_lines, ";; {at:#06x}: {line}").unwrap();
    }
    // On aarch64 the golden files also show how each poll was encoded:
    // the trampoline resumes through x16, which no poll may read through.
    if matches!(arch, Architecture::Aarch64(_)) {
        text.push_str(";; polls (offset: decoded load; none reads through x16/x17)\n");
        text.push_str(&poll_lines);
    }

    let has_call = vcode.lines().any(|line| {
        let mnemonic = line.split_whitespace().next().unwrap_or("");
        matches!(mnemonic, "call" | "call_indirect" | "bl" | "blr")
            || mnemonic.starts_with("call")
            || mnemonic.starts_with("return_call")
    });
    let reloads = slot_offset.map_or(0, |slot| slot_reloads(&ctx.func, slot));
    Compiled {
        text,
        poll_offsets,
        has_call,
        reloads,
    }
}

/// The `load.i64` instructions at `slot_offset` in `func` (after
/// optimization, when called on a compiled context's function).
fn slot_reloads(func: &Function, slot_offset: i32) -> usize {
    func.layout
        .blocks()
        .flat_map(|block| func.layout.block_insts(block))
        .filter(|&inst| match func.dfg.insts[inst] {
            ir::InstructionData::Load {
                opcode: ir::Opcode::Load,
                offset,
                ..
            } => {
                i32::from(offset) == slot_offset
                    && func.dfg.value_type(func.dfg.first_result(inst)) == I64
            }
            _ => false,
        })
        .count()
}

/// Decodes the poll instruction at the start of `code` and returns its
/// in-page offset (its displacement less `page_offset`) and a rendering
/// of the load. Panics unless it is a 32-bit load with a base register and
/// an immediate displacement that lands in `[0, POLL_SPAN)` of the page.
fn decode_poll(
    arch: Architecture,
    code: &[u8],
    page_offset: i32,
    what: &str,
    at: u32,
) -> (u32, String) {
    let decoded = match arch {
        Architecture::X86_64 => decode_x64_load32(code).map(|d| (d, format!("disp {d}"))),
        Architecture::Aarch64(_) => decode_a64_load_w(code),
        other => panic!("unexpected architecture {other}"),
    };
    let (displacement, line) = decoded
        .unwrap_or_else(|why| panic!("{what}: the poll at {at:#x} is not a plain load: {why}"));
    let offset = displacement - i64::from(page_offset);
    assert!(
        (0..i64::from(POLL_SPAN)).contains(&offset) && offset % 4 == 0,
        "{what}: the poll at {at:#x} reads offset {offset} of the page \
         (displacement {displacement})"
    );
    (offset as u32, line)
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

/// `ldr wT, [xN, #imm]` (unsigned 12-bit immediate scaled by 4) or
/// `ldur wT, [xN, #simm9]` (signed, unscaled), with a base other than
/// x16/x17 (and other than sp, which a poll never uses). Returns the
/// displacement and the instruction as text.
fn decode_a64_load_w(code: &[u8]) -> Result<(i64, String), String> {
    let insn = u32::from_le_bytes(code[..4].try_into().unwrap());
    let (mnemonic, displacement) = if insn & 0xffc0_0000 == 0xb940_0000 {
        ("ldr", i64::from((insn >> 10) & 0xfff) * 4)
    } else if insn & 0xffe0_0c00 == 0xb840_0000 {
        // imm9 in bits 20..12, sign-extended.
        let imm9 = ((insn >> 12) & 0x1ff) as i64;
        ("ldur", if imm9 >= 256 { imm9 - 512 } else { imm9 })
    } else {
        return Err(format!(
            "{insn:#010x} is neither `ldr wT, [xN, #imm]` nor `ldur wT, [xN, #simm9]`"
        ));
    };
    let base = (insn >> 5) & 31;
    let target = insn & 31;
    if base == 16 || base == 17 {
        return Err(format!("base register x{base} is a scratch register"));
    }
    if base == 31 {
        return Err("base register is sp".into());
    }
    Ok((
        displacement,
        format!("{mnemonic} w{target}, [x{base}, #{displacement}]"),
    ))
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
    run_golden_with(name, shape, Addressing::Vmctx)
}

/// [`run_golden`] with the polls addressed as `addressing` says. Polls
/// past the allocator's distinct offsets reuse offsets (fenced); every
/// offset is used at most `ceil(polls / distinct)` times.
fn run_golden_with(
    name: &str,
    shape: Shape,
    addressing: Addressing,
) -> BTreeMap<(String, String), Compiled> {
    let mut failures = Vec::new();
    let mut all = BTreeMap::new();
    for (isa_name, triple) in ISAS {
        for opt in OPT_LEVELS {
            let isa = target(triple, opt);
            let built = build_with(&isa, shape, Scheme::Ours, addressing);
            let (polls, distinct) = (built.polls, built.distinct);
            let what = format!("{name}.{isa_name}.{opt}");
            let compiled = compile(&isa, built, &what);
            let mut uses = BTreeMap::new();
            for offset in &compiled.poll_offsets {
                *uses.entry(*offset).or_insert(0u32) += 1;
            }
            let most = polls.div_ceil(distinct);
            assert!(
                uses.values().all(|&n| n <= most) && uses.len() as u32 <= distinct,
                "{what}: offsets reused beyond wrapping: {:?}",
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
        // A page below the base is handed out from its top, the slot
        // nearest the vmctx (displacement -20: one byte on x86_64, `ldur`
        // on aarch64).
        assert_eq!(compiled.poll_offsets, [POLL_SPAN - 4], "leaf.{isa}.{opt}");
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

/// The heap-relative form: a loop storing to the heap, polling through the
/// heap base (page at -4096).
#[test]
fn golden_heap_loop_with_store() {
    for ((isa, opt), compiled) in run_golden_with("heap_store", loop_with_store, Addressing::Heap) {
        // Slots from the page's top: `base - 4`, then `base - 8`.
        assert_eq!(
            compiled.poll_offsets,
            [POLL_SPAN - 4, POLL_SPAN - 8],
            "heap_store.{isa}.{opt}"
        );
    }
}

/// More polls than aarch64 encodes below the vmctx (60): the last ten wrap
/// around to `vmctx - 20`, `vmctx - 24`, ... and are fenced; on x86_64
/// all 70 are distinct.
#[test]
fn golden_more_polls_than_direct_offsets() {
    let all = run_golden("wrap", many_polls);
    for ((isa, opt), compiled) in all {
        let distinct = if isa == "aarch64" { 60 } else { 70 };
        let mut offsets = compiled.poll_offsets.clone();
        offsets.sort_unstable();
        offsets.dedup();
        assert_eq!(offsets.len(), distinct, "wrap.{isa}.{opt}");
        if isa == "aarch64" {
            // Every displacement is within `ldur`'s reach.
            assert!(
                offsets
                    .iter()
                    .all(|&o| (-256..0).contains(&(ENGINE_PAGE_OFFSET + o as i32))),
                "wrap.{isa}.{opt}: {offsets:?}"
            );
        }
    }
}

/// The same below a heap base (64 slots on aarch64).
#[test]
fn golden_heap_more_polls_than_direct_offsets() {
    let all = run_golden_with("heap_wrap", many_polls, Addressing::Heap);
    for ((isa, opt), compiled) in all {
        let distinct = if isa == "aarch64" { 64 } else { 70 };
        let mut offsets = compiled.poll_offsets.clone();
        offsets.sort_unstable();
        offsets.dedup();
        assert_eq!(offsets.len(), distinct, "heap_wrap.{isa}.{opt}");
        if isa == "aarch64" {
            assert!(
                offsets
                    .iter()
                    .all(|&o| (-256..0).contains(&(HEAP_PAGE_OFFSET + o as i32))),
                "heap_wrap.{isa}.{opt}: {offsets:?}"
            );
        }
    }
}

/// Why aarch64 limits the slots: with every slot of the page
/// (`PollSites::new`), polls beyond `ldur`'s reach are no longer a single
/// immediate-offset load (Cranelift puts the offset in a register first:
/// `movn x0, #259; ldr w0, [x2, x0]` for `vmctx - 260`), while with
/// `PollSites::for_isa` every poll is.
#[test]
fn unlimited_slots_need_a_register_on_aarch64() {
    for addressing in [Addressing::Vmctx, Addressing::Heap] {
        for opt in OPT_LEVELS {
            let isa = target(ISAS[1].1, opt);
            let built = build_with(&isa, many_polls, Scheme::AllSlots, addressing);
            assert_eq!(built.distinct, DISTINCT_OFFSETS);
            let page_offset = built.page_offset;
            let mut ctx = Context::for_function(built.func);
            let code = ctx
                .compile(&*isa, &mut ControlPlane::default())
                .map_err(|e| format!("{:?}", e.inner))
                .unwrap();
            let bytes = code.buffer.data();
            let (direct, indirect): (Vec<u32>, Vec<u32>) = code
                .buffer
                .traps()
                .iter()
                .filter(|t| t.code == POLL)
                .map(|t| t.offset)
                .partition(|&at| decode_a64_load_w(&bytes[at as usize..]).is_ok());
            // The first 60 (vmctx) or 64 (heap) slots are within reach.
            let reach = ((page_offset + POLL_SPAN as i32 + 256) / 4) as usize;
            assert_eq!(direct.len(), reach, "{addressing:?} at {opt}");
            assert_eq!(indirect.len(), 70 - reach, "{addressing:?} at {opt}");
        }
    }
}

/// More than `DISTINCT_OFFSETS` polls in a store-free loop nest (and so
/// far more than aarch64's 60 direct offsets): every one keeps its trap
/// record at every opt level on both targets.
#[test]
fn more_polls_than_offsets() {
    for (isa_name, triple) in ISAS {
        for opt in OPT_LEVELS {
            let isa = target(triple, opt);
            let built = build(&isa, many_loops, Scheme::Ours);
            let (polls, distinct) = (built.polls, built.distinct);
            assert!(polls > DISTINCT_OFFSETS + 100, "{polls} polls");
            let what = format!("many_loops.{isa_name}.{opt}");
            let compiled = compile(&isa, built, &what);
            // Every offset is in use, each at most ceil(polls / distinct)
            // times.
            let mut uses = BTreeMap::new();
            for offset in &compiled.poll_offsets {
                *uses.entry(*offset).or_insert(0u32) += 1;
            }
            assert_eq!(uses.len() as u32, distinct, "{what}");
            let most = polls.div_ceil(distinct);
            assert!(uses.values().all(|&n| n <= most), "{what}: {uses:?}");
        }
    }
}

/// Polls emitted out of dominance order past the last distinct offset:
/// the bracketing fences keep all of them.
#[test]
fn out_of_order_polls_survive() {
    for (isa_name, triple) in ISAS {
        for opt in OPT_LEVELS {
            let isa = target(triple, opt);
            let built = out_of_order(&isa, Scheme::Ours);
            assert_eq!(built.polls, built.distinct + 1);
            compile(&isa, built, &format!("out_of_order.{isa_name}.{opt}"));
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
    type Builder = fn(&OwnedTargetIsa, Scheme) -> Built;
    let cases: [(&str, Builder, Scheme); 4] = [
        (
            "loop, every poll at one offset",
            |isa, s| build(isa, simple_loop, s),
            Scheme::SameOffset,
        ),
        (
            "loop with a heap store, every poll at one offset",
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
            let built = builder(&isa, naive);
            let polls = built.polls;
            let survived = surviving_polls(&isa, built.func);
            assert!(
                survived < polls as usize,
                "{isa_name}, {what}: expected the optimizer to drop a poll, \
                 but all {polls} survived"
            );
            let built = builder(&isa, Scheme::Ours);
            assert_eq!(
                surviving_polls(&isa, built.func),
                built.polls as usize,
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
    let Built { func, polls, .. } = out_of_order(&isa, Scheme::Ours);
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
    // Only the one poll past the last distinct offset is bracketed.
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

/// On aarch64 `PollSites::for_isa` hands out only the slots `ldur` reaches,
/// nearest the base first, and wraps (fenced) past them: 60 below the vmctx
/// (`vmctx - 20` down to `vmctx - 256`), 64 below a heap base.
#[test]
fn aarch64_offsets_stay_directly_encodable() {
    let isa = target(ISAS[1].1, "none");
    for (page_offset, top, count) in [(ENGINE_PAGE_OFFSET, -20, 60), (HEAP_PAGE_OFFSET, -4, 64)] {
        let sites = PollSites::for_isa(page_offset, &*isa);
        assert_eq!(sites.distinct_offsets(), count);
        let offsets: Vec<i32> = (0..count * 2 + 1).map(|k| sites.offset(k)).collect();
        let expected: Vec<i32> = (0..count)
            .chain(0..count)
            .chain(0..1)
            .map(|k| top - 4 * k as i32)
            .collect();
        assert_eq!(offsets, expected, "page at {page_offset}");
        assert_eq!(*offsets.iter().min().unwrap(), -256);
    }
    // x86_64 is unrestricted: `for_isa` equals `new`.
    let x64 = target(ISAS[0].1, "none");
    for page_offset in [ENGINE_PAGE_OFFSET, HEAP_PAGE_OFFSET, 0] {
        let ours = PollSites::for_isa(page_offset, &*x64);
        let all = PollSites::new(page_offset);
        assert_eq!(ours.distinct_offsets(), DISTINCT_OFFSETS);
        assert!((0..3000).all(|k| ours.offset(k) == all.offset(k)));
    }
    // A page pointer on aarch64: every slot, as `ldr`.
    assert_eq!(
        PollSites::for_isa(0, &*isa).distinct_offsets(),
        DISTINCT_OFFSETS
    );
    // A straddling page: only the part within -256..=16380.
    let sites = PollSites::with_direct_offsets(-1000, DirectOffsets::AARCH64);
    assert_eq!(sites.offset(0), -256);
    assert_eq!(sites.distinct_offsets(), (4092 - 1000 + 256) / 4 + 1);
}

/// A page none of whose slots the target encodes directly is refused.
#[test]
#[should_panic(expected = "directly encodable")]
fn no_direct_slot_panics() {
    let _ = PollSites::with_direct_offsets(-8192, DirectOffsets::AARCH64);
}

/// Golden files and checks for polls through a slot (pointer-swap arming):
/// every poll keeps its trap record and decodes as a load at offset 0 of
/// the reloaded page, and every poll keeps its own reload of the slot.
fn run_slot_golden(name: &str, shape: Shape, addressing: Addressing) {
    let mut failures = Vec::new();
    for (isa_name, triple) in ISAS {
        for opt in OPT_LEVELS {
            let isa = target(triple, opt);
            let built = build_with(&isa, shape, Scheme::Slot, addressing);
            let polls = built.polls;
            let what = format!("{name}.{isa_name}.{opt}");
            let compiled = compile(&isa, built, &what);
            assert_eq!(
                compiled.reloads, polls as usize,
                "{what}: {} reloads of the slot for {polls} polls",
                compiled.reloads
            );
            assert!(compiled.poll_offsets.iter().all(|&o| o == 0), "{what}");
            if let Some(failure) = check_golden(name, isa_name, opt, &compiled.text) {
                failures.push(failure);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn golden_slot_leaf() {
    run_slot_golden("slot_leaf", leaf, Addressing::Vmctx);
}

#[test]
fn golden_slot_nested_loops() {
    run_slot_golden("slot_nested", nested_loops, Addressing::Vmctx);
}

#[test]
fn golden_slot_heap_loop_with_store() {
    run_slot_golden("slot_heap_store", loop_with_store, Addressing::Heap);
}

/// Thousands of polls through a slot in a store-free loop nest: every
/// reload and every poll survive on both targets at every opt level.
#[test]
fn slot_polls_survive_in_many_loops() {
    for (isa_name, triple) in ISAS {
        for opt in OPT_LEVELS {
            let isa = target(triple, opt);
            let built = build_with(&isa, many_loops, Scheme::Slot, Addressing::Heap);
            let polls = built.polls;
            let compiled = compile(&isa, built, &format!("slot_many.{isa_name}.{opt}"));
            assert_eq!(compiled.reloads, polls as usize, "{isa_name} {opt}");
        }
    }
}

/// Why the slot poll has its fence: without it the optimizer keeps one
/// reload for the entry and the loop header of a store-free loop (the loop
/// would poll the page it saw on entry forever), on both targets.
#[test]
fn slot_reloads_merge_without_the_fence() {
    for (isa_name, triple) in ISAS {
        let isa = target(triple, "speed");
        for shape in [simple_loop as Shape, nested_loops] {
            let built = build_with(&isa, shape, Scheme::SlotWithoutFence, Addressing::Heap);
            let polls = built.polls as usize;
            let slot = built.slot_offset.expect("a slot scheme");
            let mut ctx = Context::for_function(built.func);
            let traps = ctx
                .compile(&*isa, &mut ControlPlane::default())
                .map_err(|e| format!("{:?}", e.inner))
                .unwrap()
                .buffer
                .traps()
                .iter()
                .filter(|t| t.code == POLL)
                .count();
            let reloads = slot_reloads(&ctx.func, slot);
            // With one reload left, the polls through it share their
            // address and merge too.
            assert!(
                reloads < polls && traps < polls,
                "{isa_name}: expected reloads and polls to merge, but {reloads} reloads \
                 and {traps} polls of {polls} survived"
            );
            let built = build_with(&isa, shape, Scheme::Slot, Addressing::Heap);
            let compiled = compile(&isa, built, &format!("slot.{isa_name}"));
            assert_eq!(compiled.reloads, polls, "{isa_name}, with the fence");
        }
    }
}
