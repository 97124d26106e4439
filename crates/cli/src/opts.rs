//! The option groups `-O`, `-C`, `-D`, `-W`, `-S` and `-R`, spelled as in
//! upstream Wasmtime 48.
//!
//! Each group takes `KEY[=VAL]` items, several per flag separated by commas
//! (`-W simd=n,fuel=1000`), with the value forms upstream accepts: booleans
//! `y|yes|true|n|no|false` (a bare `KEY` means true), numbers with optional
//! `_` separators or a `0x` prefix, durations `N` (seconds), `Ns`, `Nms`,
//! `Nus`, `Nns`. `-X help` lists what this engine supports and exits.
//!
//! Every upstream option name is known here. Options this engine does not
//! implement are rejected at parse time with an error naming them, except
//! that switching a feature we do not have *off* (`-W memory64=n`) is accepted,
//! since that is already the case.

use clap::builder::TypedValueParser;
use clap::error::{Error as ClapError, ErrorKind};
use std::ffi::OsStr;
use std::time::Duration;

/// One of the option groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// `-O` / `--optimize`: code generation and memory layout tuning.
    Optimize,
    /// `-C` / `--codegen`: compiler selection and compiler settings.
    Codegen,
    /// `-D` / `--debug`: debugging aids.
    Debug,
    /// `-W` / `--wasm`: WebAssembly semantics and proposals.
    Wasm,
    /// `-S` / `--wasi`: WASI.
    Wasi,
    /// `-R` / `--record`: execution recording.
    Record,
}

impl Group {
    /// The short flag letter.
    pub fn short(self) -> char {
        match self {
            Group::Optimize => 'O',
            Group::Codegen => 'C',
            Group::Debug => 'D',
            Group::Wasm => 'W',
            Group::Wasi => 'S',
            Group::Record => 'R',
        }
    }

    /// The long flag name.
    pub fn long(self) -> &'static str {
        match self {
            Group::Optimize => "optimize",
            Group::Codegen => "codegen",
            Group::Debug => "debug",
            Group::Wasm => "wasm",
            Group::Wasi => "wasi",
            Group::Record => "record",
        }
    }

    fn options(self) -> &'static [Desc] {
        match self {
            Group::Optimize => OPTIMIZE,
            Group::Codegen => CODEGEN,
            Group::Debug => DEBUG,
            Group::Wasm => WASM,
            Group::Wasi => WASI,
            Group::Record => RECORD,
        }
    }
}

/// How an option's value is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Bool,
    Num,
    Duration,
    OptLevel,
    Regalloc,
    Compiler,
    Text,
    /// `PREFIX-<KEY>[=VAL]`, e.g. `-C cranelift-<flag>=<value>`.
    Prefix,
}

impl Kind {
    fn val_help(self) -> &'static str {
        match self {
            Kind::Bool => "[=y|n]",
            Kind::Num => "=N",
            Kind::Duration => "=N|Ns|Nms|..",
            Kind::OptLevel => "=0|1|2|s",
            Kind::Regalloc => "=backtracking|single-pass",
            Kind::Compiler => "=cranelift",
            Kind::Text => "=val",
            Kind::Prefix => "[=val]",
        }
    }
}

/// Whether this engine implements an option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Support {
    /// Implemented.
    Yes,
    /// Only the value "off" (`=n`) is accepted: the feature does not exist
    /// here, so turning it off changes nothing.
    OffOnly,
    /// Only the value "on" (`=y`) is accepted: that is how this engine
    /// always works.
    OnOnly,
    /// Not implemented; any use is an error.
    No,
}

struct Desc {
    name: &'static str,
    kind: Kind,
    support: Support,
    doc: &'static str,
}

const fn d(name: &'static str, kind: Kind, support: Support, doc: &'static str) -> Desc {
    Desc {
        name,
        kind,
        support,
        doc,
    }
}

use Kind::*;
use Support::*;

#[rustfmt::skip]
const OPTIMIZE: &[Desc] = &[
    d("opt-level", OptLevel, Yes, "Optimization level of generated code (0-2, s; default: 2)"),
    d("regalloc-algorithm", Regalloc, Yes, "Register allocator algorithm choice."),
    d("memory-may-move", Bool, Yes, "Whether Wasm linear memories may move in the host process's address space."),
    d("memory-reservation", Num, Yes, "Initial virtual memory allocation size for memories."),
    d("memory-reservation-for-growth", Num, Yes, "Bytes to reserve at the end of linear memory for growth into."),
    d("memory-guard-size", Num, Yes, "Size, in bytes, of guard pages for linear memories."),
    d("gc-heap-may-move", Bool, OffOnly, "Whether the GC heap may move (GC is not supported)."),
    d("gc-heap-reservation", Num, No, "Initial virtual memory allocation size for the GC heap."),
    d("gc-heap-reservation-for-growth", Num, No, "Bytes to reserve at the end of the GC heap for growth into."),
    d("gc-heap-guard-size", Num, No, "Size, in bytes, of guard pages for the GC heap."),
    d("gc-heap-initial-size", Num, No, "Initial allocated size for the GC heap."),
    d("guard-before-linear-memory", Bool, Yes, "Whether an unmapped region of memory is placed before all linear memories."),
    d("table-lazy-init", Bool, OffOnly, "Whether to initialize tables lazily."),
    d("pooling-allocator", Bool, OffOnly, "Enable the pooling allocator, in place of the on-demand allocator."),
    d("pooling-decommit-batch-size", Num, No, "The number of decommits to do per batch."),
    d("pooling-memory-keep-resident", Num, No, "Bytes to keep resident between instantiations in linear memories."),
    d("pooling-table-keep-resident", Num, No, "Bytes to keep resident between instantiations in tables."),
    d("pooling-memory-protection-keys", Text, No, "Enable memory protection keys for the pooling allocator."),
    d("pooling-max-memory-protection-keys", Num, No, "Upper limit on memory protection keys."),
    d("memory-init-cow", Bool, OffOnly, "Initialize linear memory via a copy-on-write mapping."),
    d("memory-guaranteed-dense-image-size", Num, No, "Threshold below which CoW images are dense."),
    d("pooling-total-core-instances", Num, No, "Pooling allocator: maximum core instances."),
    d("pooling-total-component-instances", Num, No, "Pooling allocator: maximum component instances."),
    d("pooling-total-memories", Num, No, "Pooling allocator: maximum memories."),
    d("pooling-total-tables", Num, No, "Pooling allocator: maximum tables."),
    d("pooling-total-stacks", Num, No, "Pooling allocator: maximum stacks."),
    d("pooling-max-memory-size", Num, No, "Pooling allocator: maximum size of each linear memory."),
    d("pooling-table-elements", Num, No, "Pooling allocator: maximum table elements."),
    d("pooling-max-core-instance-size", Num, No, "Pooling allocator: maximum core instance metadata size."),
    d("pooling-max-unused-warm-slots", Num, No, "Pooling allocator: maximum unused warm slots."),
    d("pooling-async-stack-keep-resident", Num, No, "Pooling allocator: async stack bytes kept resident."),
    d("pooling-max-component-instance-size", Num, No, "Pooling allocator: maximum component instance size."),
    d("pooling-max-core-instances-per-component", Num, No, "Pooling allocator: core instances per component."),
    d("pooling-max-memories-per-component", Num, No, "Pooling allocator: memories per component."),
    d("pooling-max-tables-per-component", Num, No, "Pooling allocator: tables per component."),
    d("pooling-max-tables-per-module", Num, No, "Pooling allocator: tables per module."),
    d("pooling-max-memories-per-module", Num, No, "Pooling allocator: memories per module."),
    d("pooling-total-gc-heaps", Num, No, "Pooling allocator: maximum GC heaps."),
    d("signals-based-traps", Bool, OnOnly, "Use host signal handlers for traps (only `y` is supported)."),
    d("dynamic-memory-guard-size", Num, Yes, "DEPRECATED: Use `-O memory-guard-size=N` instead."),
    d("static-memory-guard-size", Num, Yes, "DEPRECATED: Use `-O memory-guard-size=N` instead."),
    d("static-memory-forced", Bool, Yes, "DEPRECATED: Use `-O memory-may-move` instead."),
    d("static-memory-maximum-size", Num, Yes, "DEPRECATED: Use `-O memory-reservation=N` instead."),
    d("dynamic-memory-reserved-for-growth", Num, Yes, "DEPRECATED: Use `-O memory-reservation-for-growth=N` instead."),
    d("pooling-pagemap-scan", Text, No, "Use `PAGEMAP_SCAN` ioctls to reset linear memory."),
    d("gc-zeal-alloc-counter", Num, No, "For internal fuzzing and debugging use only."),
];

#[rustfmt::skip]
const CODEGEN: &[Desc] = &[
    d("compiler", Compiler, Yes, "The compiler: only `cranelift` here (`winch` is not supported)."),
    d("collector", Text, No, "Which garbage collector to use (GC is not supported)."),
    d("cranelift-debug-verifier", Bool, Yes, "Enable Cranelift's internal debug verifier (expensive)"),
    d("cache", Bool, Yes, "Whether or not to enable caching of compiled modules."),
    d("cache-config", Text, Yes, "Configuration for compiled module caching."),
    d("parallel-compilation", Bool, Yes, "Whether or not to enable parallel compilation of modules."),
    d("native-unwind-info", Bool, No, "Whether native unwind information is present in compiled code."),
    d("inlining", Text, No, "Whether to perform function inlining during compilation."),
    d("metadata-for-internal-asserts", Bool, OffOnly, "Trap metadata for wasm internal assertions."),
    d("metadata-for-gc-heap-corruption", Bool, OffOnly, "Trap metadata for detection of GC corruption."),
    d("cranelift", Prefix, Yes, "Set a cranelift-specific option (`-C cranelift-<flag>=<value>`)."),
];

#[rustfmt::skip]
const DEBUG: &[Desc] = &[
    d("debug-info", Bool, OffOnly, "Enable generation of DWARF debug information in compiled code."),
    d("guest-debug", Bool, OffOnly, "Enable guest debugging instrumentation."),
    d("address-map", Bool, No, "Configure whether compiled code can map native addresses to wasm."),
    d("logging", Bool, OffOnly, "Configure whether logging is enabled."),
    d("log-to-files", Bool, OffOnly, "Configure whether logs are emitted to files."),
    d("coredump", Text, No, "Enable coredump generation to this file after a WebAssembly trap."),
    d("debugger", Text, No, "Load the given debugger component and attach it."),
    d("arg", Text, No, "Pass the given command-line argument to the debugger component."),
    d("inherit-stdin", Bool, OffOnly, "Allow the debugger component to inherit stdin."),
    d("inherit-stdout", Bool, OffOnly, "Allow the debugger component to inherit stdout."),
    d("inherit-stderr", Bool, OffOnly, "Allow the debugger component to inherit stderr."),
    d("max-backtrace", Num, Yes, "Maximum number of frames to capture in backtraces."),
    d("symbols", Bool, No, "Whether or not `*.cwasm` files have symbols in them."),
];

#[rustfmt::skip]
const WASM: &[Desc] = &[
    d("nan-canonicalization", Bool, Yes, "Enable canonicalization of all NaN values."),
    d("fuel", Num, Yes, "Enable execution fuel with N units fuel, trapping after running out of fuel."),
    d("epoch-interruption", Bool, Yes, "Check a global epoch counter at function entries and loop headers."),
    d("mmu-interruption", Bool, Yes, "Poll a page below each linear memory (or instance context) at function entries and loop headers; -Wtimeout then interrupts through it instead of epochs (Linux x86_64)."),
    d("mmu-interruption-mode", Text, Yes, "How -Wmmu-interruption arms an interrupt: `pointer-swap` (default; no system call or TLB flush, two loads per poll) or `mprotect` (one load per poll, an mprotect per interrupt)."),
    d("max-wasm-stack", Num, Yes, "Maximum stack size, in bytes, that wasm is allowed to consume before a stack overflow is reported."),
    d("async-stack-size", Num, No, "Stack size, in bytes, that will be allocated for async stacks."),
    d("async-stack-zeroing", Bool, OffOnly, "Whether async stacks are zeroed before (re)use."),
    d("unknown-exports-allow", Bool, Yes, "Allow unknown exports when running commands."),
    d("unknown-imports-trap", Bool, Yes, "Allow the main module to import unknown functions, which trap when called."),
    d("unknown-imports-default", Bool, OffOnly, "Allow the main module to import unknown functions, which return default values."),
    d("wmemcheck", Bool, OffOnly, "Enables memory error checking."),
    d("max-memory-size", Num, Yes, "Maximum size, in bytes, that a linear memory is allowed to reach."),
    d("max-table-elements", Num, Yes, "Maximum size, in table elements, that a table is allowed to reach."),
    d("max-instances", Num, Yes, "Maximum number of WebAssembly instances allowed to be created."),
    d("max-tables", Num, Yes, "Maximum number of WebAssembly tables allowed to be created."),
    d("max-memories", Num, Yes, "Maximum number of WebAssembly linear memories allowed to be created."),
    d("trap-on-grow-failure", Bool, Yes, "Force a trap on `memory.grow` and `table.grow` failure."),
    d("timeout", Duration, Yes, "Maximum execution time of wasm code before timing out (1, 2s, 100ms, etc)"),
    d("all-proposals", Bool, Yes, "Configures support for all WebAssembly proposals implemented."),
    d("bulk-memory", Bool, Yes, "Configure support for the bulk memory proposal."),
    d("multi-memory", Bool, Yes, "Configure support for the multi-memory proposal."),
    d("multi-value", Bool, Yes, "Configure support for the multi-value proposal."),
    d("reference-types", Bool, Yes, "Configure support for the reference-types proposal."),
    d("simd", Bool, Yes, "Configure support for the simd proposal."),
    d("relaxed-simd", Bool, Yes, "Configure support for the relaxed-simd proposal."),
    d("relaxed-simd-deterministic", Bool, Yes, "Force deterministic relaxed-simd behavior."),
    d("tail-call", Bool, Yes, "Configure support for the tail-call proposal."),
    d("threads", Bool, OffOnly, "Configure support for the threads proposal."),
    d("shared-memory", Bool, OffOnly, "Configure the ability to create a `shared` memory."),
    d("shared-everything-threads", Bool, OffOnly, "Configure support for the shared-everything-threads proposal."),
    d("memory64", Bool, OffOnly, "Configure support for the memory64 proposal."),
    d("component-model", Bool, OffOnly, "Configure support for the component-model proposal."),
    d("component-model-async", Bool, OffOnly, "Component model support for async lifting/lowering."),
    d("component-model-more-async-builtins", Bool, OffOnly, "Component model: more async builtins."),
    d("component-model-async-stackful", Bool, OffOnly, "Component model: stackful async."),
    d("component-model-threading", Bool, OffOnly, "Component model support for threading."),
    d("component-model-error-context", Bool, OffOnly, "Component model support for `error-context`."),
    d("component-model-gc", Bool, OffOnly, "GC support in the component model."),
    d("component-model-map", Bool, OffOnly, "Map support in the component model."),
    d("component-model-memory64", Bool, OffOnly, "Component model support for `memory64`."),
    d("function-references", Bool, Yes, "Configure support for the function-references proposal."),
    d("stack-switching", Bool, OffOnly, "Configure support for the stack-switching proposal."),
    d("gc", Bool, Yes, "Configure support for the GC proposal (its i31 slice only)."),
    d("custom-page-sizes", Bool, OffOnly, "Configure support for the custom-page-sizes proposal."),
    d("wide-arithmetic", Bool, OffOnly, "Configure support for the wide-arithmetic proposal."),
    d("branch-hinting", Bool, OffOnly, "Configure support for the branch-hinting proposal."),
    d("extended-const", Bool, Yes, "Configure support for the extended-const proposal."),
    d("exceptions", Bool, Yes, "Configure support for the exceptions proposal."),
    d("gc-support", Bool, OffOnly, "Whether or not any GC infrastructure is enabled."),
    d("component-model-fixed-length-lists", Bool, OffOnly, "Component model support for fixed-length lists."),
    d("component-model-implements", Bool, OffOnly, "Component model support for `(implements ...)`."),
    d("concurrency-support", Bool, OffOnly, "Whether or not any concurrency infrastructure is enabled."),
];

#[rustfmt::skip]
const WASI: &[Desc] = &[
    d("cli", Bool, Yes, "Enable support for WASI CLI APIs (preview1 for core modules; default: yes)."),
    d("cli-exit-with-code", Bool, Yes, "Enable WASI APIs marked as: @unstable(feature = cli-exit-with-code) (no effect on core modules)."),
    d("common", Bool, Yes, "Deprecated alias for `cli`"),
    d("nn", Bool, OffOnly, "Enable support for WASI neural network imports (experimental)"),
    d("threads", Bool, OffOnly, "Enable support for WASI threading imports (experimental)."),
    d("http", Bool, OffOnly, "Enable support for WASI HTTP imports"),
    d("http-outgoing-body-buffer-chunks", Num, No, "wasi-http: outgoing body write calls buffered."),
    d("http-outgoing-body-chunk-size", Num, No, "wasi-http: maximum size of an outgoing body write."),
    d("config", Bool, OffOnly, "Enable support for WASI config imports (experimental)"),
    d("keyvalue", Bool, OffOnly, "Enable support for WASI key-value imports (experimental)"),
    d("listenfd", Bool, OffOnly, "Inherit environment variables and file descriptors following the systemd listen fd specification."),
    d("tcplisten", Text, No, "Grant access to the given TCP listen socket."),
    d("tls", Bool, OffOnly, "Enable support for WASI TLS (Transport Layer Security) imports (experimental)"),
    d("preview2", Bool, OnOnly, "Implement WASI preview1 on the preview2 implementation (only `y`; no effect here)."),
    d("nn-graph", Text, No, "Pre-load machine learning graphs for use by wasi-nn."),
    d("inherit-network", Bool, Yes, "Inherit the host's network (WASIp2 sockets; no effect on core modules)."),
    d("allow-ip-name-lookup", Bool, Yes, "Enable `wasi:sockets/ip-name-lookup` (no effect on core modules)."),
    d("tcp", Bool, Yes, "Enable `wasi:sockets` TCP support (no effect on core modules)."),
    d("udp", Bool, Yes, "Enable `wasi:sockets` UDP support (no effect on core modules)."),
    d("network-error-code", Bool, Yes, "Enable WASI APIs marked as: @unstable(feature = network-error-code) (no effect on core modules)."),
    d("preview0", Bool, Yes, "Allows imports from the `wasi_unstable` core wasm module."),
    d("inherit-env", Bool, Yes, "Inherit all environment variables from the parent process."),
    d("inherit-stdin", Bool, Yes, "Inherit stdin from the parent process. On by default."),
    d("inherit-stdout", Bool, Yes, "Inherit stdout from the parent process. On by default."),
    d("inherit-stderr", Bool, Yes, "Inherit stderr from the parent process. On by default."),
    d("cwd", Text, Yes, "Initial current working directory reported through `wasi:cli/environment` (no effect on core modules)."),
    d("config-var", Text, No, "Pass a wasi config variable to the program."),
    d("keyvalue-in-memory-data", Text, No, "Preset data for the In-Memory provider of WASI key-value API."),
    d("p3", Bool, OffOnly, "Enable support for WASIp3 APIs."),
    d("max-resources", Num, No, "Maximum resources the guest is allowed to create simultaneously."),
    d("hostcall-fuel", Num, No, "Fuel to use for all hostcalls to limit guest<->host data transfer."),
    d("max-component-handles", Num, No, "Maximum number of simultaneously-live component-model handles."),
    d("max-random-size", Num, No, "Maximum `len` of a wasi-random 0.2 call."),
    d("max-http-fields-size", Num, No, "Maximum size of a wasi-http 0.2 `fields` resource."),
];

#[rustfmt::skip]
const RECORD: &[Desc] = &[
    d("path", Text, No, "Filename for the recorded execution trace."),
    d("validation-metadata", Bool, OffOnly, "Include signatures to facilitate validation checks during replay."),
    d("event-window-size", Num, No, "Window size of internal buffering for record events."),
];

/// A parsed option value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A boolean.
    Bool(bool),
    /// A number.
    Num(u64),
    /// A duration.
    Duration(Duration),
    /// An optimization level.
    OptLevel(wasmtime::OptLevel),
    /// Free text (also used for `regalloc-algorithm` and `compiler`).
    Text(String),
    /// A prefixed option's key (after the prefix) and value.
    Prefixed(String, Option<String>),
}

/// One `KEY[=VAL]` item of an option group.
#[derive(Clone, Debug, PartialEq)]
pub struct Setting {
    /// The group it was given to.
    pub group: Group,
    /// The option's name, as spelled on the command line.
    pub name: &'static str,
    /// Its value.
    pub value: Value,
}

fn parse_bool(val: Option<&str>) -> Result<bool, String> {
    match val {
        None | Some("y") | Some("yes") | Some("true") => Ok(true),
        Some("n") | Some("no") | Some("false") => Ok(false),
        Some(s) => Err(format!(
            "unknown boolean flag `{s}`, only yes,no,<nothing> accepted"
        )),
    }
}

fn required(val: Option<&str>) -> Result<&str, String> {
    val.ok_or_else(|| "value must be specified with `key=val` syntax".to_string())
}

fn parse_num(val: Option<&str>) -> Result<u64, String> {
    let val = required(val)?.replace('_', "");
    let parsed = match val.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => val.parse(),
    };
    parsed.map_err(|e| e.to_string())
}

/// A duration suffix and the constructor for its unit.
type Unit = (&'static str, fn(u64) -> Duration);

/// Parses a duration as upstream does: `N` (seconds), `Ns`, `Nms`, `Nus`
/// (or `Nμs`), `Nns`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(n) = s.parse() {
        return Ok(Duration::from_secs(n));
    }
    // Longer suffixes first: "ms" also ends in "s".
    let units: [Unit; 5] = [
        ("ms", Duration::from_millis),
        ("us", Duration::from_micros),
        ("μs", Duration::from_micros),
        ("ns", Duration::from_nanos),
        ("s", Duration::from_secs),
    ];
    for (suffix, make) in units {
        if let Some(n) = s.strip_suffix(suffix).and_then(|n| n.parse().ok()) {
            return Ok(make(n));
        }
    }
    Err(format!("failed to parse duration: {s}"))
}

fn parse_value(kind: Kind, key: &str, val: Option<&str>) -> Result<Value, String> {
    Ok(match kind {
        Kind::Bool => Value::Bool(parse_bool(val)?),
        Kind::Num => Value::Num(parse_num(val)?),
        Kind::Duration => Value::Duration(parse_duration(required(val)?)?),
        Kind::OptLevel => Value::OptLevel(match required(val)? {
            "0" => wasmtime::OptLevel::None,
            "1" | "2" => wasmtime::OptLevel::Speed,
            "s" => wasmtime::OptLevel::SpeedAndSize,
            other => {
                return Err(format!(
                    "unknown optimization level `{other}`, only 0,1,2,s accepted"
                ));
            }
        }),
        Kind::Regalloc => match required(val)? {
            v @ ("backtracking" | "single-pass") => Value::Text(v.to_string()),
            other => {
                return Err(format!(
                    "unknown regalloc algorithm`{other}`, only backtracking,single-pass accepted"
                ));
            }
        },
        Kind::Compiler => match required(val)? {
            v @ ("cranelift" | "winch") => Value::Text(v.to_string()),
            other => {
                return Err(format!(
                    "unknown compiler `{other}` only `cranelift` and `winch` accepted"
                ));
            }
        },
        Kind::Text => Value::Text(required(val)?.to_string()),
        Kind::Prefix => Value::Prefixed(key.to_string(), val.map(str::to_string)),
    })
}

/// Why an item was rejected.
#[derive(Debug, PartialEq)]
pub enum ParseError {
    /// Not an option of this group at all.
    Unknown(String),
    /// An upstream option this engine does not implement.
    Unsupported(String),
    /// A known option with a bad value.
    BadValue(String, String),
}

impl ParseError {
    /// The message, as printed after `error: `.
    pub fn message(&self, group: Group) -> String {
        let (s, l) = (group.short(), group.long());
        match self {
            ParseError::Unknown(key) => format!("unknown -{s} / --{l} option: {key}"),
            ParseError::Unsupported(item) => format!(
                "unsupported: -{s} {item} is not supported by this engine (`-{s} help` lists what is)"
            ),
            ParseError::BadValue(item, why) => {
                format!("failed to parse -{s} option `{item}`: {why}")
            }
        }
    }
}

/// Parses one `-X` argument: comma-separated `KEY[=VAL]` items.
pub fn parse_group(group: Group, arg: &str) -> Result<Vec<Setting>, ParseError> {
    let mut out = Vec::new();
    for item in arg.split(',') {
        let (key, val) = match item.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (item, None),
        };
        let found = group.options().iter().find_map(|desc| {
            if desc.kind == Kind::Prefix {
                let rest = key.strip_prefix(desc.name)?.strip_prefix('-')?;
                Some((desc, rest))
            } else if desc.name == key {
                Some((desc, key))
            } else {
                None
            }
        });
        let Some((desc, key)) = found else {
            return Err(ParseError::Unknown(key.to_string()));
        };
        let value = parse_value(desc.kind, key, val)
            .map_err(|why| ParseError::BadValue(item.to_string(), why))?;
        let supported = match desc.support {
            Support::Yes => true,
            Support::OffOnly => value == Value::Bool(false),
            Support::OnOnly => value == Value::Bool(true),
            Support::No => false,
        } && value != Value::Text("winch".into());
        if !supported {
            return Err(ParseError::Unsupported(item.to_string()));
        }
        out.push(Setting {
            group,
            name: desc.name,
            value,
        });
    }
    Ok(out)
}

/// The text `-X help` prints: the supported options, then the upstream
/// options this engine does not implement.
pub fn help_text(group: Group, long: bool) -> String {
    use std::fmt::Write;
    let s = group.short();
    let display = |desc: &Desc| match desc.kind {
        Kind::Prefix => format!("{}-<KEY>", desc.name),
        _ => desc.name.to_string(),
    };
    let supported: Vec<&Desc> = group
        .options()
        .iter()
        .filter(|desc| matches!(desc.support, Support::Yes | Support::OnOnly))
        .collect();
    let mut out = String::new();
    let _ = writeln!(out, "Available {} options:\n", group.long());
    let width = supported
        .iter()
        .map(|desc| display(desc).len() + desc.kind.val_help().len())
        .max()
        .unwrap_or(0);
    for desc in &supported {
        let name = display(desc);
        let vh = desc.kind.val_help();
        if long {
            let _ = writeln!(out, "  -{s} {name}{vh} --\n\n        {}\n", desc.doc);
        } else {
            let pad = width - vh.len();
            let _ = writeln!(out, "  -{s} {name:>pad$}{vh} -- {}", desc.doc);
        }
    }
    let off_only: Vec<&str> = group
        .options()
        .iter()
        .filter(|desc| desc.support == Support::OffOnly)
        .map(|desc| desc.name)
        .collect();
    let unsupported: Vec<&str> = group
        .options()
        .iter()
        .filter(|desc| desc.support == Support::No)
        .map(|desc| desc.name)
        .collect();
    if !off_only.is_empty() {
        let _ = writeln!(
            out,
            "\nUpstream Wasmtime options this engine accepts only as `=n` (the feature does not exist here):\n  {}",
            off_only.join(", ")
        );
    }
    if !unsupported.is_empty() {
        let _ = writeln!(
            out,
            "\nUpstream Wasmtime options this engine does not support:\n  {}",
            unsupported.join(", ")
        );
    }
    if !long {
        let _ = writeln!(
            out,
            "\npass `-{s} help-long` to see longer-form explanations"
        );
    }
    out
}

/// The clap value parser for one option group. As upstream, `-X help` and
/// `-X help-long` print the group's options and exit the process.
#[derive(Clone, Copy)]
pub struct GroupParser(pub Group);

impl TypedValueParser for GroupParser {
    type Value = Vec<Setting>;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<Self::Value, ClapError> {
        let group = self.0;
        let Some(value) = value.to_str() else {
            return Err(ClapError::raw(
                ErrorKind::InvalidUtf8,
                format!("-{} option is not valid UTF-8\n", group.short()),
            )
            .with_cmd(cmd));
        };
        if value == "help" || value == "help-long" {
            print!("{}", help_text(group, value == "help-long"));
            std::process::exit(0);
        }
        parse_group(group, value).map_err(|e| {
            ClapError::raw(ErrorKind::InvalidValue, format!("{}\n", e.message(group))).with_cmd(cmd)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(group: Group, arg: &str) -> Setting {
        let mut v = parse_group(group, arg).unwrap();
        assert_eq!(v.len(), 1);
        v.pop().unwrap()
    }

    #[test]
    fn booleans() {
        for (arg, want) in [
            ("simd", true),
            ("simd=y", true),
            ("simd=yes", true),
            ("simd=true", true),
            ("simd=n", false),
            ("simd=no", false),
            ("simd=false", false),
        ] {
            assert_eq!(one(Group::Wasm, arg).value, Value::Bool(want), "{arg}");
        }
        assert!(matches!(
            parse_group(Group::Wasm, "simd=maybe"),
            Err(ParseError::BadValue(..))
        ));
    }

    #[test]
    fn numbers_and_lists() {
        let v = parse_group(Group::Wasm, "fuel=1_000,max-wasm-stack=0x10000,simd=n").unwrap();
        assert_eq!(v[0].value, Value::Num(1000));
        assert_eq!(v[1].value, Value::Num(0x10000));
        assert_eq!(v[2].value, Value::Bool(false));
        assert!(matches!(
            parse_group(Group::Wasm, "fuel"),
            Err(ParseError::BadValue(..))
        ));
        assert!(matches!(
            parse_group(Group::Wasm, "fuel=lots"),
            Err(ParseError::BadValue(..))
        ));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("7us"), Ok(Duration::from_micros(7)));
        assert_eq!(parse_duration("7μs"), Ok(Duration::from_micros(7)));
        assert_eq!(parse_duration("9ns"), Ok(Duration::from_nanos(9)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("1h").is_err());
    }

    #[test]
    fn unknown_and_unsupported() {
        assert_eq!(
            parse_group(Group::Wasm, "no-such-thing"),
            Err(ParseError::Unknown("no-such-thing".into()))
        );
        let err = parse_group(Group::Wasm, "component-model").unwrap_err();
        assert_eq!(err, ParseError::Unsupported("component-model".into()));
        assert_eq!(
            err.message(Group::Wasm),
            "unsupported: -W component-model is not supported by this engine (`-W help` lists what is)"
        );
        // Turning off what does not exist is fine.
        assert_eq!(one(Group::Wasm, "memory64=n").value, Value::Bool(false));
        assert!(parse_group(Group::Wasm, "memory64=y").is_err());
        assert!(parse_group(Group::Optimize, "pooling-total-memories=10").is_err());
        assert_eq!(one(Group::Codegen, "cache=n").value, Value::Bool(false));
        assert_eq!(one(Group::Codegen, "cache").value, Value::Bool(true));
        assert!(parse_group(Group::Codegen, "compiler=winch").is_err());
        assert!(parse_group(Group::Codegen, "compiler=cranelift").is_ok());
        assert!(parse_group(Group::Optimize, "signals-based-traps=n").is_err());
        assert!(parse_group(Group::Optimize, "signals-based-traps=y").is_ok());
    }

    #[test]
    fn prefixed() {
        let s = one(Group::Codegen, "cranelift-opt-level=none");
        assert_eq!(s.name, "cranelift");
        assert_eq!(
            s.value,
            Value::Prefixed("opt-level".into(), Some("none".into()))
        );
        let s = one(Group::Codegen, "cranelift-has-avx");
        assert_eq!(s.value, Value::Prefixed("has-avx".into(), None));
        assert!(parse_group(Group::Codegen, "cranelift").is_err());
    }

    #[test]
    fn opt_levels() {
        assert_eq!(
            one(Group::Optimize, "opt-level=0").value,
            Value::OptLevel(wasmtime::OptLevel::None)
        );
        assert_eq!(
            one(Group::Optimize, "opt-level=s").value,
            Value::OptLevel(wasmtime::OptLevel::SpeedAndSize)
        );
        assert!(parse_group(Group::Optimize, "opt-level=3").is_err());
    }

    #[test]
    fn help_lists_supported_and_unsupported() {
        let h = help_text(Group::Wasm, false);
        assert!(h.starts_with("Available wasm options:"));
        assert!(h.contains("-W"));
        assert!(h.contains("simd[=y|n] -- "));
        assert!(h.contains("timeout=N|Ns|Nms|.."));
        assert!(h.contains("component-model"));
        assert!(h.contains("pass `-W help-long`"));
        // every group renders
        for g in [
            Group::Optimize,
            Group::Codegen,
            Group::Debug,
            Group::Wasm,
            Group::Wasi,
            Group::Record,
        ] {
            assert!(!help_text(g, true).is_empty());
        }
    }
}
