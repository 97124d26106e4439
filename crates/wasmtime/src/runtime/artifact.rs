//! Precompiled modules: the file format that
//! [`Module::serialize`](crate::Module::serialize) writes and
//! [`Module::deserialize`](crate::Module::deserialize) reads, and the
//! checks a loading engine runs before it uses anything in one.
//!
//! An artifact is a fixed header, a body of length-prefixed records, and
//! the machine code at the end, aligned to the target's largest page size
//! so that [`Module::deserialize_file`](crate::Module::deserialize_file)
//! can map it straight from the file:
//!
//! ```text
//! header   magic, format version, file length, CRC-32 of the whole file
//!          (but the checksum field), text offset
//! body     build id | target | engine settings | module skeleton |
//!          function table | entry trampolines | trap sites |
//!          address map | libcall relocations | exception sites |
//!          exception handlers | text length
//! padding  zeros up to the text offset
//! text     the machine code, libcall slots zeroed
//! ```
//!
//! The module's metadata (types, imports, exports, segments, names) is not
//! serialized as such: the body carries a *skeleton*, the module's own
//! binary with every function body replaced by an empty one and custom
//! sections other than `name` dropped, and loading parses and validates it
//! again with the same parser that compiled it. The loader therefore never
//! trusts a decoded index: what the metadata says has been validated
//! exactly as a fresh compile validates it, and only the code tables need
//! bounds checks of their own (done where they are used: the module's
//! assembly and [`CodeMemory`](crate::runtime::vm::CodeMemory)).
//!
//! Order of the checks, each failure with its own message: magic (with
//! special messages for a plain `.wasm`, for upstream Wasmtime's ELF
//! artifacts and for an artifact of the other kind), format version,
//! length, checksum, build id, target, and then every setting that changes
//! generated code. Only then is the rest decoded.
//!
//! A component artifact has the same header (its own magic) and checks,
//! and then the component's binary and one complete module artifact per
//! core module of the component, each at an offset aligned like a text:
//!
//! ```text
//! header   magic, format version, file length, CRC-32 of header and
//!          body (but the checksum field), offset of the first module
//! body     build id | target | engine settings | component binary |
//!          (offset, length) of each module artifact
//! modules  module artifacts by static module index, each aligned to the
//!          target's largest page, the last one ending the file
//! ```
//!
//! Loading translates the component binary again, exactly as compiling
//! does (so nothing decoded from the file is trusted as metadata), loads
//! each module artifact as above, and requires each module's skeleton to
//! be the skeleton of the module the translation produced at its index.
//!

use crate::runtime::vm::{AddressMapRecord, TrapSiteRecord};
use anyhow::{Context, Result, bail, ensure};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::ops::Range;
use wasmtime_environ::Payloads;
use wasmtime_environ::builtins::HostLibcall;
use wasmtime_environ::wasmparser::{Parser, Payload};
use wasmtime_environ::{
    DefinedFuncIndex, ExceptionHandler, ExceptionSite, ExceptionTable, FunctionLoc, PrimaryMap,
    Relocation, TypeIndex,
};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The first eight bytes of every module artifact.
pub(crate) const MAGIC: [u8; 8] = *b"WMMUCWSM";

/// The first eight bytes of every component artifact.
pub(crate) const COMPONENT_MAGIC: [u8; 8] = *b"WMMUCCMP";

/// What an artifact holds, told by its magic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ArtifactKind {
    /// A core module, for `Module::deserialize`.
    Module,
    /// A component, for `component::Component::deserialize`.
    Component,
}

impl ArtifactKind {
    fn magic(self) -> [u8; 8] {
        match self {
            ArtifactKind::Module => MAGIC,
            ArtifactKind::Component => COMPONENT_MAGIC,
        }
    }

    /// The word for what the artifact holds, in messages.
    pub(crate) fn noun(self) -> &'static str {
        match self {
            ArtifactKind::Module => "module",
            ArtifactKind::Component => "component",
        }
    }

    /// The function that loads this kind.
    pub(crate) fn loader(self) -> &'static str {
        match self {
            ArtifactKind::Module => "Module::deserialize",
            ArtifactKind::Component => "Component::deserialize",
        }
    }

    fn other(self) -> ArtifactKind {
        match self {
            ArtifactKind::Module => ArtifactKind::Component,
            ArtifactKind::Component => ArtifactKind::Module,
        }
    }
}

/// The version of the layout below; a change of layout takes a new one.
const FORMAT_VERSION: u32 = 4;

/// Magic, version, a reserved word, file length, checksum, text offset.
const HEADER_LEN: usize = 8 + 4 + 4 + 8 + 4 + 4 + 8;

/// Where the header's fields are.
const VERSION: Range<usize> = 8..12;
const RESERVED: [Range<usize>; 2] = [12..16, 28..32];
const FILE_LEN: Range<usize> = 16..24;
const CHECKSUM: Range<usize> = 24..28;
/// Where the text starts (module) or the first module starts (component).
const PAYLOAD_OFFSET: Range<usize> = 32..40;

/// This build's identity (see `build.rs`): artifacts are only exchanged
/// between identical builds.
pub(crate) const BUILD_ID: &str = env!("WASMTIME_MMU_BUILD_ID");

/// What an engine's code depends on: an artifact records its compiling
/// engine's, and a loading engine must match it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    /// The target triple.
    pub target: String,
    /// `(kind.name, value)` for every setting that changes generated code;
    /// the kinds are `tunables`, `wasm` (features), `cranelift` (shared
    /// settings) and `isa` (target settings and CPU features).
    pub settings: Vec<(String, String)>,
    /// The largest page size of the target: the text's alignment in the
    /// file.
    pub text_alignment: usize,
}

impl Fingerprint {
    /// The bytes that stand for this fingerprint in a compile-cache key.
    pub fn key_bytes(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.str(BUILD_ID);
        w.str(&self.target);
        w.settings(&self.settings);
        w.0
    }
}

/// The compile-cache key of `binary` for an engine with `fingerprint`.
pub(crate) fn cache_key(fingerprint: &Fingerprint, binary: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"wasmtime-mmu compile cache key 1\0");
    let settings = fingerprint.key_bytes();
    hasher.update((settings.len() as u64).to_le_bytes());
    hasher.update(&settings);
    hasher.update(binary);
    hasher.finalize().into()
}

/// The code tables of a compiled module that the module itself keeps:
/// where everything is in the text. (The trap sites, the one other table,
/// belong to the [`CodeMemory`](crate::runtime::vm::CodeMemory) that holds
/// the text, and travel beside these.)
#[derive(Clone, Debug, Default)]
pub(crate) struct CodeTables {
    /// Each defined function's code.
    pub functions: PrimaryMap<DefinedFuncIndex, FunctionLoc>,
    /// Offset of each defined function's body in the original binary (for
    /// backtraces).
    pub func_body_offsets: PrimaryMap<DefinedFuncIndex, u32>,
    /// One entry trampoline per type of the type section.
    pub entry_trampolines: PrimaryMap<TypeIndex, FunctionLoc>,
    /// One wasm-to-host trampoline per distinct type of the imported
    /// functions, sorted by type.
    pub host_trampolines: Vec<(TypeIndex, FunctionLoc)>,
    /// Libcall slots to patch at load.
    pub relocations: Vec<Relocation>,
    /// The exception handlers of the calls inside `try_table`s.
    pub exceptions: ExceptionTable,
}

/// A checked artifact, borrowing from its bytes.
pub(crate) struct Parsed<'a> {
    /// The module's binary without function bodies.
    pub skeleton: &'a [u8],
    /// The code tables, decoded but not yet checked against the text.
    pub tables: CodeTables,
    /// The trap sites, where they lie in the artifact, likewise unchecked.
    pub trap_sites: &'a [TrapSiteRecord],
    /// The native-to-Wasm address map, where it lies, likewise.
    pub address_map: &'a [AddressMapRecord],
    /// Where the text is in the artifact.
    pub text: Range<usize>,
}

/// Writes an artifact. `text` must have its libcall slots in their
/// unpatched state (the loader overwrites them).
pub(crate) fn write(
    fingerprint: &Fingerprint,
    skeleton: &[u8],
    tables: &CodeTables,
    trap_sites: &[TrapSiteRecord],
    address_map: &[AddressMapRecord],
    text: &[u8],
) -> Vec<u8> {
    let mut w = Writer(vec![0; HEADER_LEN]);
    w.str(BUILD_ID);
    w.str(&fingerprint.target);
    w.settings(&fingerprint.settings);
    w.bytes(skeleton);
    w.u32(tables.functions.len() as u32);
    for (index, loc) in tables.functions.iter() {
        w.u32(loc.start);
        w.u32(loc.len);
        w.u32(tables.func_body_offsets[index]);
    }
    w.u32(tables.entry_trampolines.len() as u32);
    for loc in tables.entry_trampolines.values() {
        w.u32(loc.start);
        w.u32(loc.len);
    }
    w.u32(tables.host_trampolines.len() as u32);
    for (ty, loc) in &tables.host_trampolines {
        w.u32(ty.as_u32());
        w.u32(loc.start);
        w.u32(loc.len);
    }
    // Both tables are written in the form the runtime keeps them in, so a
    // loader can use them where they lie.
    w.u32(trap_sites.len() as u32);
    w.0.extend_from_slice(trap_sites.as_bytes());
    w.u32(address_map.len() as u32);
    w.0.extend_from_slice(address_map.as_bytes());
    w.u32(tables.relocations.len() as u32);
    for reloc in &tables.relocations {
        w.u32(reloc.offset);
        w.0.push(reloc.target.to_u8());
    }
    w.u32(tables.exceptions.sites.len() as u32);
    for site in &tables.exceptions.sites {
        w.u32(site.return_offset);
        w.u32(site.frame_offset);
        w.u32(site.context_offset);
        w.u32(site.handlers_end);
    }
    w.u32(tables.exceptions.handlers.len() as u32);
    for handler in &tables.exceptions.handlers {
        w.u32(handler.tag);
        w.u32(handler.target_offset);
    }
    w.u64(text.len() as u64);
    let text_offset = w.0.len().next_multiple_of(fingerprint.text_alignment);
    w.0.resize(text_offset, 0);
    w.0.extend_from_slice(text);

    finish_header(w.0, ArtifactKind::Module, text_offset)
}

/// Fills in the header of the artifact `out` (whose header bytes are
/// still zero) and seals it with its checksum.
fn finish_header(mut out: Vec<u8>, kind: ArtifactKind, payload_offset: usize) -> Vec<u8> {
    let total = out.len() as u64;
    let header = &mut out[..HEADER_LEN];
    header[0..8].copy_from_slice(&kind.magic());
    header[VERSION].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    header[FILE_LEN].copy_from_slice(&total.to_le_bytes());
    header[PAYLOAD_OFFSET].copy_from_slice(&(payload_offset as u64).to_le_bytes());
    let sum = checksum(&out, kind);
    out[CHECKSUM].copy_from_slice(&sum.to_le_bytes());
    out
}

/// Writes a component artifact: `binary` is the component's own binary
/// (loading translates it again, so that nothing decoded is trusted) and
/// `modules` the artifacts of its core modules by static module index,
/// each placed at an offset aligned as its text needs so that a file
/// loader can map each in place.
pub(crate) fn write_component(
    fingerprint: &Fingerprint,
    binary: &[u8],
    modules: &[Vec<u8>],
) -> Vec<u8> {
    let mut w = Writer(vec![0; HEADER_LEN]);
    w.str(BUILD_ID);
    w.str(&fingerprint.target);
    w.settings(&fingerprint.settings);
    w.bytes(binary);
    let align = fingerprint.text_alignment;
    let table_end = w.0.len() + 4 + 16 * modules.len();
    let payload_offset = table_end.next_multiple_of(align);
    w.u32(modules.len() as u32);
    let mut at = payload_offset;
    for module in modules {
        w.u64(at as u64);
        w.u64(module.len() as u64);
        at = (at + module.len()).next_multiple_of(align);
    }
    for module in modules {
        w.0.resize(w.0.len().next_multiple_of(align), 0);
        w.0.extend_from_slice(module);
    }
    if modules.is_empty() {
        w.0.resize(payload_offset, 0);
    }
    finish_header(w.0, ArtifactKind::Component, payload_offset)
}

/// CRC-32 (the IEEE polynomial of zip, gzip and PNG) of the artifact
/// except the checksum field itself: of the whole file for a module, of
/// the header and body for a component (its modules are artifacts with
/// checksums of their own, so nothing is summed twice). `bytes` must be at
/// least a header long.
///
/// The checksum is there for accidents (a truncated copy, a flipped bit
/// on disk): CRC-32 catches every error burst of up to 32 bits and all but
/// one in 2^32 of the others, at memory speed (it was SHA-256 first, which
/// made up two thirds of the time to load sqlite3). Against someone who
/// can write the file no checksum helps: that is `deserialize`'s safety
/// contract.
fn checksum(bytes: &[u8], kind: ArtifactKind) -> u32 {
    let end = match kind {
        ArtifactKind::Module => bytes.len(),
        // A damaged offset still sums some range, which then mismatches.
        ArtifactKind::Component => usize::try_from(read_u64(bytes, PAYLOAD_OFFSET))
            .map_or(bytes.len(), |end| end.clamp(HEADER_LEN, bytes.len())),
    };
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&bytes[..CHECKSUM.start]);
    hasher.update(&bytes[CHECKSUM.end..end]);
    hasher.finalize()
}

fn read_u64(bytes: &[u8], at: Range<usize>) -> u64 {
    u64::from_le_bytes(bytes[at].try_into().unwrap())
}

/// Checks `bytes` as an artifact for an engine with `engine`'s fingerprint
/// and decodes it.
///
/// # Errors
///
/// Anything that is not an intact artifact of this build for a compatible
/// engine, with a message saying which check failed.
pub(crate) fn parse<'a>(bytes: &'a [u8], engine: &Fingerprint) -> Result<Parsed<'a>> {
    check_envelope(bytes, ArtifactKind::Module)?;
    let text_offset = read_u64(bytes, PAYLOAD_OFFSET);
    let mut r = Reader {
        bytes,
        pos: HEADER_LEN,
    };
    check_origin(&mut r, engine, ArtifactKind::Module)?;
    let skeleton = r.bytes()?;
    let mut tables = CodeTables::default();
    // Tables are read as whole slices and decoded record by record: the
    // address map alone has an entry per few instructions.
    let le32 = |b: &[u8]| u32::from_le_bytes(b.try_into().unwrap());
    for f in r.records(12)?.chunks_exact(12) {
        tables.functions.push(FunctionLoc {
            start: le32(&f[0..4]),
            len: le32(&f[4..8]),
        });
        tables.func_body_offsets.push(le32(&f[8..12]));
    }
    for t in r.records(8)?.chunks_exact(8) {
        tables.entry_trampolines.push(FunctionLoc {
            start: le32(&t[0..4]),
            len: le32(&t[4..8]),
        });
    }
    let host_records = r.records(12)?;
    tables.host_trampolines = Vec::with_capacity(host_records.len() / 12);
    for t in host_records.chunks_exact(12) {
        // `u32::MAX` is no index (the entity types reserve it); anything
        // else is checked against the module's types when it is assembled.
        let ty = Some(le32(&t[0..4]))
            .filter(|ty| *ty != u32::MAX)
            .context("malformed artifact: a host trampoline's type is out of range")?;
        let loc = FunctionLoc {
            start: le32(&t[4..8]),
            len: le32(&t[8..12]),
        };
        tables.host_trampolines.push((TypeIndex::from_u32(ty), loc));
    }
    // Used where they lie (checked where the code and the module are put
    // together): an entry per few instructions.
    let trap_sites = r.records_in_place::<TrapSiteRecord>()?;
    let address_map = r.records_in_place::<AddressMapRecord>()?;
    for t in r.records(5)?.chunks_exact(5) {
        let target = HostLibcall::from_u8(t[4])
            .with_context(|| format!("malformed artifact: unknown libcall {:#x}", t[4]))?;
        tables.relocations.push(Relocation {
            offset: le32(&t[0..4]),
            target,
        });
    }
    tables.exceptions.sites = r
        .records(16)?
        .chunks_exact(16)
        .map(|e| ExceptionSite {
            return_offset: le32(&e[0..4]),
            frame_offset: le32(&e[4..8]),
            context_offset: le32(&e[8..12]),
            handlers_end: le32(&e[12..16]),
        })
        .collect();
    tables.exceptions.handlers = r
        .records(8)?
        .chunks_exact(8)
        .map(|e| ExceptionHandler {
            tag: le32(&e[0..4]),
            target_offset: le32(&e[4..8]),
        })
        .collect();
    let text_len = r.u64()?;
    ensure!(
        text_offset >= r.pos as u64
            && text_offset.checked_add(text_len) == Some(bytes.len() as u64),
        "malformed artifact: the text does not end the file"
    );
    let text = text_offset as usize..bytes.len();
    Ok(Parsed {
        skeleton,
        tables,
        trap_sites,
        address_map,
        text,
    })
}

/// Checks the build, target and settings an artifact records against the
/// loading engine's.
fn check_origin(r: &mut Reader<'_>, engine: &Fingerprint, kind: ArtifactKind) -> Result<()> {
    let noun = kind.noun();
    let build = r.str()?;
    ensure!(
        build == BUILD_ID,
        "the precompiled {noun} was built by a different build of this runtime \
         (build {build}; this is build {BUILD_ID}): compile the {noun} again"
    );
    let target = r.str()?;
    ensure!(
        target == engine.target,
        "the precompiled {noun} was compiled for target `{target}`, but this engine \
         compiles for `{}`",
        engine.target
    );
    let settings = r.settings()?;
    check_settings(&settings, &engine.settings, noun)
        .with_context(|| format!("the precompiled {noun} is not compatible with this engine"))
}

/// A checked component artifact, borrowing from its bytes.
pub(crate) struct ParsedComponent<'a> {
    /// The component's binary, to translate again.
    pub binary: &'a [u8],
    /// Where each core module's artifact is, by static module index: in
    /// order, not overlapping, each starting at an offset aligned for its
    /// text, the last one ending the file. Each is checked as a module
    /// artifact when it is loaded.
    pub modules: Vec<Range<usize>>,
}

/// Checks `bytes` as a component artifact for an engine with `engine`'s
/// fingerprint and finds its parts.
///
/// # Errors
///
/// As for [`parse`], with "component" in the messages.
pub(crate) fn parse_component<'a>(
    bytes: &'a [u8],
    engine: &Fingerprint,
) -> Result<ParsedComponent<'a>> {
    check_envelope(bytes, ArtifactKind::Component)?;
    let payload_offset = usize::try_from(read_u64(bytes, PAYLOAD_OFFSET))
        .ok()
        .filter(|o| (HEADER_LEN..=bytes.len()).contains(o))
        .context("malformed artifact: its modules do not start inside the file")?;
    let mut r = Reader {
        bytes: &bytes[..payload_offset],
        pos: HEADER_LEN,
    };
    check_origin(&mut r, engine, ArtifactKind::Component)?;
    let binary = r.bytes()?;
    let count = r.count(16)?;
    let mut modules = Vec::with_capacity(count as usize);
    let mut end = payload_offset;
    for _ in 0..count {
        let (start, len) = (r.u64()?, r.u64()?);
        let range = usize::try_from(start)
            .ok()
            .zip(usize::try_from(len).ok())
            .filter(|&(start, len)| {
                start >= end
                    && start.is_multiple_of(engine.text_alignment)
                    && len > 0
                    && len <= bytes.len() - start.min(bytes.len())
            })
            .map(|(start, len)| start..start + len)
            .context("malformed artifact: a module of the component is out of place")?;
        end = range.end;
        modules.push(range);
    }
    ensure!(
        end == bytes.len(),
        "malformed artifact: the component's last module does not end the file"
    );
    ensure!(
        bytes[r.pos..payload_offset].iter().all(|b| *b == 0),
        "malformed artifact: the component's padding is not zero"
    );
    Ok(ParsedComponent { binary, modules })
}

/// What `bytes` hold if they begin like an artifact of this runtime (any
/// version).
pub(crate) fn kind_of(bytes: &[u8]) -> Option<ArtifactKind> {
    [ArtifactKind::Module, ArtifactKind::Component]
        .into_iter()
        .find(|kind| bytes.starts_with(&kind.magic()))
}

/// Recomputes the checksum of an artifact that a fuzzer has edited, so that
/// the edit reaches the checks behind the checksum (the `deserialize` fuzz
/// target); does nothing to an input shorter than a header. Not for any
/// other use: a resealed artifact is only as trustworthy as its editor.
#[doc(hidden)]
pub fn reseal_for_fuzzing(bytes: &mut [u8]) {
    if bytes.len() >= HEADER_LEN {
        let kind = kind_of(bytes).unwrap_or(ArtifactKind::Module);
        let sum = checksum(bytes, kind);
        bytes[CHECKSUM].copy_from_slice(&sum.to_le_bytes());
    }
}

/// Magic, version, length and checksum.
fn check_envelope(bytes: &[u8], kind: ArtifactKind) -> Result<()> {
    let noun = kind.noun();
    if !bytes.starts_with(&kind.magic()) {
        let other = kind.other();
        if bytes.starts_with(&other.magic()) {
            bail!(
                "the input is a precompiled {}, not a precompiled {noun}: load it with `{}`",
                other.noun(),
                other.loader()
            );
        }
        if bytes.starts_with(b"\0asm") {
            let (new, precompile) = match kind {
                ArtifactKind::Module => ("Module::new", "Engine::precompile_module"),
                ArtifactKind::Component => ("Component::new", "Engine::precompile_component"),
            };
            bail!(
                "the input is a WebAssembly binary, not a precompiled {noun}: \
                 compile it with `{new}` (or precompile it with `{precompile}`)"
            );
        }
        if bytes.starts_with(b"\x7fELF") {
            bail!(
                "the input is an ELF file, such as an artifact of upstream Wasmtime; \
                 this runtime only loads {noun}s it precompiled itself"
            );
        }
        bail!(
            "the input is not a precompiled {noun} (its first bytes are not `{}`)",
            String::from_utf8_lossy(&kind.magic())
        );
    }
    ensure!(
        bytes.len() >= HEADER_LEN,
        "the precompiled {noun} is truncated: {} bytes, shorter than its header",
        bytes.len()
    );
    let version = u32::from_le_bytes(bytes[VERSION].try_into().unwrap());
    ensure!(
        version == FORMAT_VERSION,
        "the precompiled {noun} has format version {version}, but this runtime reads \
         version {FORMAT_VERSION}: compile the {noun} again"
    );
    let declared = read_u64(bytes, FILE_LEN);
    ensure!(
        declared == bytes.len() as u64,
        "the precompiled {noun} is {} bytes long, but its header says {declared}: the \
         file is truncated or has trailing bytes",
        bytes.len()
    );
    ensure!(
        RESERVED.iter().all(|r| bytes[r.clone()] == [0; 4]),
        "malformed artifact: reserved header bytes are set"
    );
    ensure!(
        checksum(bytes, kind).to_le_bytes()[..] == bytes[CHECKSUM],
        "the precompiled {noun} is corrupted: its checksum does not match"
    );
    Ok(())
}

/// Compares an artifact's settings with the loading engine's. Every
/// setting must be equal, except that code compiled without a CPU feature
/// (`isa.has_*` false) also runs where the engine has it.
fn check_settings(
    artifact: &[(&str, &str)],
    engine: &[(String, String)],
    noun: &str,
) -> Result<()> {
    // What nearly every load sees: an artifact of an engine configured the
    // same, its settings written in the same order, which pairwise
    // comparison confirms without building maps.
    if artifact.len() == engine.len()
        && artifact
            .iter()
            .zip(engine)
            .all(|((key, value), (our_key, ours))| key == our_key && value == ours)
    {
        return Ok(());
    }
    let recorded: HashMap<&str, &str> = artifact.iter().copied().collect();
    for (key, ours) in engine {
        let Some(&theirs) = recorded.get(key.as_str()) else {
            bail!("the {noun} was compiled without the setting `{key}`, which this engine has");
        };
        if theirs == ours {
            continue;
        }
        let (kind, name) = key.split_once('.').unwrap_or(("", key));
        let cpu_feature = kind == "isa" && name.starts_with("has_");
        if cpu_feature && theirs == "false" && ours == "true" {
            continue;
        }
        match kind {
            "tunables" => bail!(
                "the {noun} was compiled with `{name}` = {theirs}, but this engine is \
                 configured with {ours}"
            ),
            "wasm" => bail!(
                "the {noun} was compiled with the WebAssembly feature `{name}` {}, but this \
                 engine has it {}",
                on_off(theirs),
                on_off(ours)
            ),
            "cranelift" => bail!(
                "the {noun} was compiled with the Cranelift setting `{name}` = {theirs}, but \
                 this engine uses {ours}"
            ),
            "isa" if cpu_feature => bail!(
                "the {noun} was compiled for a CPU with `{name}`, which this engine's target \
                 does not have (the host lacks it, or a Cranelift setting turned it off)"
            ),
            _ => bail!(
                "the {noun} was compiled with the target setting `{key}` = {theirs}, but this \
                 engine uses {ours}"
            ),
        }
    }
    let ours: HashMap<&str, ()> = engine.iter().map(|(k, _)| (k.as_str(), ())).collect();
    if let Some((key, _)) = artifact.iter().find(|(k, _)| !ours.contains_key(k)) {
        bail!("the {noun} was compiled with the setting `{key}`, which this engine does not know");
    }
    Ok(())
}

fn on_off(value: &str) -> &'static str {
    if value == "true" {
        "enabled"
    } else {
        "disabled"
    }
}

/// The module binary with empty function bodies and only the `name`
/// custom section: everything `ModuleTranslation` needs to rebuild the
/// module's metadata, and nothing the compiled code already stands for.
pub(crate) fn skeleton(binary: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(binary.len() / 8);
    write_skeleton(binary, &mut out)?;
    Ok(out)
}

/// Whether `skeleton` is exactly [`skeleton`]`(binary)`, found without
/// building it (a big module's skeleton holds all its data segments).
pub(crate) fn is_skeleton_of(skeleton: &[u8], binary: &[u8]) -> Result<bool> {
    let mut compare = Compare {
        expected: skeleton,
        pos: 0,
        equal: true,
    };
    write_skeleton(binary, &mut compare)?;
    Ok(compare.equal && compare.pos == skeleton.len())
}

/// Where a skeleton goes: built into a vector, or compared as it is made.
trait SkeletonSink {
    fn put(&mut self, bytes: &[u8]);
}

impl SkeletonSink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

struct Compare<'a> {
    expected: &'a [u8],
    pos: usize,
    equal: bool,
}

impl SkeletonSink for Compare<'_> {
    fn put(&mut self, bytes: &[u8]) {
        if self.equal {
            let end = self.pos + bytes.len();
            self.equal = self.expected.get(self.pos..end) == Some(bytes);
            self.pos = end;
        }
    }
}

fn write_skeleton(binary: &[u8], out: &mut impl SkeletonSink) -> Result<()> {
    let mut payloads = Payloads::new(Parser::new(0), binary);
    loop {
        match payloads.read()? {
            Payload::Version { range, .. } => out.put(&binary[range]),
            Payload::CodeSectionStart { count, size, .. } => {
                let mut body = Vec::with_capacity(5 + 3 * count as usize);
                leb128_u32(&mut body, count);
                for _ in 0..count {
                    // Size 2: no local declarations, then `end`.
                    body.extend_from_slice(&[2, 0, 0x0b]);
                }
                section(out, 10, &body)?;
                // Only the count of bodies is needed.
                payloads.skip_code_section(size)?;
            }
            Payload::CustomSection(custom) if custom.name() != "name" => {}
            Payload::End(_) => return Ok(()),
            other => {
                if let Some((id, range)) = other.as_section() {
                    section(out, id, &binary[range])?;
                }
            }
        }
    }
}

fn section(out: &mut impl SkeletonSink, id: u8, contents: &[u8]) -> Result<()> {
    let len = u32::try_from(contents.len()).context("section larger than 4 GiB")?;
    let mut head = vec![id];
    leb128_u32(&mut head, len);
    out.put(&head);
    out.put(contents);
    Ok(())
}

fn leb128_u32(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    fn settings(&mut self, settings: &[(String, String)]) {
        self.u32(settings.len() as u32);
        for (k, v) in settings {
            self.str(k);
            self.str(v);
        }
    }
}

/// Bounds-checked little-endian reads; every failure is "malformed".
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.bytes.len())
            .context("malformed artifact: a record runs past the end")?;
        let out = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(out)
    }
    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }
    /// A count, refused if that many records of `record_len` bytes cannot
    /// fit in what is left (so that no count allocates for nothing).
    fn count(&mut self, record_len: usize) -> Result<u32> {
        let n = self.u32()?;
        let left = self.bytes.len() - self.pos;
        ensure!(
            (n as usize).saturating_mul(record_len) <= left,
            "malformed artifact: a table claims more entries than the file holds"
        );
        Ok(n)
    }
    /// A table: a count, then that many records of `record_len` bytes.
    fn records(&mut self, record_len: usize) -> Result<&'a [u8]> {
        let n = self.count(record_len)? as usize;
        self.take(n * record_len)
    }
    /// A table of records in the runtime's own form, as they lie.
    fn records_in_place<T: FromBytes + KnownLayout + Immutable + Unaligned>(
        &mut self,
    ) -> Result<&'a [T]> {
        let bytes = self.records(size_of::<T>())?;
        // Whole records of a type without alignment: this cannot fail.
        <[T]>::ref_from_bytes(bytes)
            .ok()
            .context("malformed artifact: a table ends inside a record")
    }
    fn bytes(&mut self) -> Result<&'a [u8]> {
        let len = usize::try_from(self.u64()?).context("malformed artifact: huge record")?;
        self.take(len)
    }
    fn str(&mut self) -> Result<&'a str> {
        std::str::from_utf8(self.bytes()?).context("malformed artifact: a name is not UTF-8")
    }
    fn settings(&mut self) -> Result<Vec<(&'a str, &'a str)>> {
        let n = self.count(16)?;
        (0..n).map(|_| Ok((self.str()?, self.str()?))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime_environ::{AddressMapEntry, TrapSite, TrapSiteKind};

    fn fingerprint() -> Fingerprint {
        Fingerprint {
            target: "x86_64-unknown-linux-gnu".into(),
            settings: vec![
                ("tunables.epoch_interruption".into(), "false".into()),
                ("wasm.simd".into(), "true".into()),
                ("cranelift.opt_level".into(), "speed".into()),
                ("isa.has_avx2".into(), "true".into()),
                ("isa.has_sse41".into(), "false".into()),
            ],
            text_alignment: 4096,
        }
    }

    fn tables() -> CodeTables {
        let mut t = CodeTables::default();
        t.functions.push(FunctionLoc { start: 0, len: 16 });
        t.func_body_offsets.push(30);
        t.entry_trampolines.push(FunctionLoc { start: 16, len: 8 });
        t.host_trampolines
            .push((TypeIndex::from_u32(0), FunctionLoc { start: 24, len: 8 }));
        t.relocations.push(Relocation {
            offset: 8,
            target: HostLibcall::CeilF64,
        });
        t
    }

    fn trap_sites() -> Box<[TrapSiteRecord]> {
        TrapSiteRecord::table([TrapSite {
            code_offset: 4,
            kind: TrapSiteKind::MmuPoll,
        }])
    }

    fn address_map() -> Vec<AddressMapRecord> {
        vec![AddressMapRecord::new(AddressMapEntry {
            code_offset: 0,
            wasm_offset: 31,
        })]
    }

    fn artifact() -> Vec<u8> {
        write(
            &fingerprint(),
            b"\0asm\x01\0\0\0",
            &tables(),
            &trap_sites(),
            &address_map(),
            &[0xcc; 32],
        )
    }

    /// Rewrites the checksum after a test edits the body, so that the check
    /// behind the checksum is the one that fails.
    fn reseal(bytes: &mut [u8]) {
        let sum = checksum(bytes, kind_of(bytes).unwrap());
        bytes[CHECKSUM].copy_from_slice(&sum.to_le_bytes());
    }

    fn err(bytes: &[u8], engine: &Fingerprint) -> String {
        format!("{:#}", parse(bytes, engine).err().expect("must be refused"))
    }

    #[test]
    fn round_trip() {
        let bytes = artifact();
        assert_eq!(parse(&bytes, &fingerprint()).unwrap().text.start % 4096, 0);
        let parsed = parse(&bytes, &fingerprint()).unwrap();
        assert_eq!(parsed.skeleton, b"\0asm\x01\0\0\0");
        assert_eq!(&bytes[parsed.text.clone()], &[0xcc; 32]);
        assert_eq!(parsed.trap_sites, &*trap_sites());
        assert_eq!(parsed.address_map, address_map());
        let t = parsed.tables;
        let want = tables();
        assert_eq!(
            t.functions.values().collect::<Vec<_>>(),
            want.functions.values().collect::<Vec<_>>()
        );
        assert_eq!(t.func_body_offsets[DefinedFuncIndex::from_u32(0)], 30);
        assert_eq!(t.entry_trampolines.len(), 1);
        assert_eq!(t.host_trampolines, want.host_trampolines);
        assert_eq!(t.relocations, want.relocations);
    }

    #[test]
    fn envelope_errors() {
        let good = artifact();
        let e = |b: &[u8]| err(b, &fingerprint());
        assert!(e(b"\0asm\x01\0\0\0").contains("is a WebAssembly binary"));
        assert!(e(b"\x7fELF\x02\x01\x01").contains("ELF"));
        assert!(e(b"hello").contains("not a precompiled module"));
        assert!(e(&good[..20]).contains("truncated"));
        assert!(e(&good[..good.len() - 1]).contains("header says"));
        let mut longer = good.clone();
        longer.push(0);
        assert!(e(&longer).contains("header says"));
        let mut version = good.clone();
        version[8] = 9;
        assert!(e(&version).contains("format version 9"));
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(e(&flipped).contains("checksum"));
        let mut header_flip = good.clone();
        header_flip[HEADER_LEN + 9] ^= 0x20;
        assert!(e(&header_flip).contains("checksum"));
    }

    #[test]
    fn every_byte_is_covered() {
        // Flipping any single byte after the magic is refused, whatever it
        // hits: header fields, metadata or code.
        let good = artifact();
        for i in 8..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x01;
            assert!(parse(&bad, &fingerprint()).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn build_and_target_mismatch() {
        let mut bytes = artifact();
        // The build id is the first record of the body: length, then hex.
        let first = HEADER_LEN + 8;
        bytes[first] = if bytes[first] == b'0' { b'1' } else { b'0' };
        reseal(&mut bytes);
        assert!(err(&bytes, &fingerprint()).contains("different build"));

        let mut other = fingerprint();
        other.target = "aarch64-unknown-linux-gnu".into();
        let msg = err(&artifact(), &other);
        assert!(
            msg.contains("compiled for target `x86_64-unknown-linux-gnu`"),
            "{msg}"
        );
    }

    #[test]
    fn each_setting_kind_has_its_message() {
        let bytes = artifact();
        let with = |key: &str, value: &str| {
            let mut f = fingerprint();
            f.settings.iter_mut().find(|(k, _)| k == key).unwrap().1 = value.into();
            err(&bytes, &f)
        };
        assert!(
            with("tunables.epoch_interruption", "true").contains("`epoch_interruption` = false")
        );
        assert!(with("wasm.simd", "false").contains("WebAssembly feature `simd` enabled"));
        assert!(with("cranelift.opt_level", "none").contains("Cranelift setting `opt_level`"));
        assert!(with("isa.has_avx2", "false").contains("CPU with `has_avx2`"));
        // Code compiled without SSE4.1 runs on an engine that has it.
        let mut f = fingerprint();
        f.settings
            .iter_mut()
            .find(|(k, _)| k == "isa.has_sse41")
            .unwrap()
            .1 = "true".into();
        assert!(parse(&bytes, &f).is_ok());

        let mut extra = fingerprint();
        extra.settings.push(("wasm.threads".into(), "false".into()));
        assert!(err(&bytes, &extra).contains("compiled without the setting `wasm.threads`"));
        let mut fewer = fingerprint();
        fewer.settings.retain(|(k, _)| k != "wasm.simd");
        assert!(err(&bytes, &fewer).contains("does not know"));
    }

    #[test]
    fn malformed_tables_are_refused_not_trusted() {
        // A valid checksum over a nonsensical body (a table count far past
        // the end) is an error, not an allocation or a panic.
        let good = artifact();
        let parsed = parse(&good, &fingerprint()).unwrap();
        let skeleton_end =
            parsed.skeleton.as_ptr() as usize - good.as_ptr() as usize + parsed.skeleton.len();
        let mut bad = good.clone();
        bad[skeleton_end..skeleton_end + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        reseal(&mut bad);
        assert!(err(&bad, &fingerprint()).contains("more entries than the file holds"));
    }

    #[test]
    fn an_index_no_type_can_have_is_refused() {
        // The host-trampoline record of `tables()`: count 1, type 0, start
        // 24, length 8.
        let good = artifact();
        let record: Vec<u8> = [1u32, 0, 24, 8]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let at = good
            .windows(record.len())
            .position(|w| w == record.as_slice())
            .expect("the record is in the artifact");
        let mut bad = good.clone();
        bad[at + 4..at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        reseal(&mut bad);
        assert!(err(&bad, &fingerprint()).contains("host trampoline's type is out of range"));
    }

    #[test]
    fn skeleton_drops_bodies_and_custom_sections() {
        let wasm = wat::parse_str(
            r#"(module $m
                 (memory 1)
                 (data (i32.const 0) "hello")
                 (func $f (export "f") (result i32) i32.const 42 i32.const 1 i32.add)
                 (@custom "big" "0123456789"))"#,
        )
        .unwrap();
        let s = skeleton(&wasm).unwrap();
        assert!(s.len() < wasm.len());
        assert!(!s.windows(3).any(|w| w == b"big"));
        assert!(s.windows(5).any(|w| w == b"hello"));
        let info = wasmtime_environ::ModuleTranslation::metadata(
            wasmtime_environ::wasmparser::WasmFeatures::default(),
            &s,
        )
        .unwrap();
        assert_eq!(info.name.as_deref(), Some("m"));
        assert_eq!(info.exports.len(), 1);
        assert_eq!(info.num_defined_funcs(), 1);
    }

    #[test]
    fn metadata_skips_the_bodies_and_agrees_with_a_full_translation() {
        use wasmtime_environ::ModuleTranslation;
        use wasmtime_environ::wasmparser::WasmFeatures;
        let wasm = wat::parse_str(
            r#"(module $m
                 (import "host" "log" (func $log (param i32)))
                 (memory 1) (table 2 funcref) (global $g (mut i32) (i32.const 7))
                 (func $a (export "a") (result i32) i32.const 1)
                 (func $b (param i32) local.get 0 call $log)
                 (func $init global.get $g drop)
                 (start $init)
                 (elem (i32.const 0) $a $b)
                 (data (i32.const 8) "hello"))"#,
        )
        .unwrap();
        let s = skeleton(&wasm).unwrap();
        let features = WasmFeatures::default();
        let full = ModuleTranslation::new(features, &s).unwrap();
        assert_eq!(
            full.function_bodies.len(),
            3,
            "the full translation keeps them"
        );
        let mut metadata = ModuleTranslation::metadata(features, &s).unwrap();
        let mut module = full.module;
        // Compared apart: a hash map's `Debug` order differs between maps.
        assert_eq!(metadata.func_names, module.func_names);
        metadata.func_names.clear();
        module.func_names.clear();
        assert_eq!(format!("{metadata:?}"), format!("{module:?}"));
        // What the skipped section still answers for: its count against
        // the function section's, and its length against the binary's.
        let one = wat::parse_str("(module (func))").unwrap();
        assert_eq!(
            &one[one.len() - 6..],
            [0x0a, 4, 1, 2, 0, 0x0b],
            "a code section"
        );
        let mut two_bodies = one.clone();
        let count = two_bodies.len() - 4;
        two_bodies[count] = 2;
        let mut cut = one.clone();
        cut.truncate(one.len() - 1);
        for bad in [two_bodies, cut] {
            let metadata = ModuleTranslation::metadata(features, &bad);
            let full = ModuleTranslation::new(features, &bad);
            assert!(metadata.is_err() && full.is_err(), "{bad:?}");
            // Making a skeleton skips the bodies too, with the same checks.
            assert!(skeleton(&bad).is_err(), "{bad:?}");
        }
    }

    fn component_artifact(modules: &[Vec<u8>]) -> Vec<u8> {
        write_component(&fingerprint(), b"\0asm\x0d\0\x01\0", modules)
    }

    fn component_err(bytes: &[u8]) -> String {
        format!(
            "{:#}",
            parse_component(bytes, &fingerprint())
                .err()
                .expect("must be refused")
        )
    }

    #[test]
    fn component_round_trip_places_modules_aligned() {
        let modules = vec![artifact(), artifact()];
        let bytes = component_artifact(&modules);
        let parsed = parse_component(&bytes, &fingerprint()).unwrap();
        assert_eq!(parsed.binary, b"\0asm\x0d\0\x01\0");
        assert_eq!(parsed.modules.len(), 2);
        for (range, module) in parsed.modules.iter().zip(&modules) {
            assert_eq!(range.start % fingerprint().text_alignment, 0);
            assert_eq!(&bytes[range.clone()], &module[..]);
            parse(&bytes[range.clone()], &fingerprint()).unwrap();
        }
        assert_eq!(parsed.modules[1].end, bytes.len());
        let empty = component_artifact(&[]);
        assert!(
            parse_component(&empty, &fingerprint())
                .unwrap()
                .modules
                .is_empty()
        );
    }

    #[test]
    fn module_and_component_artifacts_are_told_apart() {
        let module = artifact();
        let component = component_artifact(&[artifact()]);
        assert_eq!(kind_of(&module), Some(ArtifactKind::Module));
        assert_eq!(kind_of(&component), Some(ArtifactKind::Component));
        assert_eq!(kind_of(b"\0asm\x01\0\0\0"), None);
        let as_module = err(&component, &fingerprint());
        assert!(
            as_module.contains("is a precompiled component")
                && as_module.contains("Component::deserialize"),
            "{as_module}"
        );
        let as_component = component_err(&module);
        assert!(
            as_component.contains("is a precompiled module")
                && as_component.contains("Module::deserialize"),
            "{as_component}"
        );
        assert!(component_err(b"\0asm\x0d\0\x01\0").contains("Component::new"));
    }

    #[test]
    fn component_envelope_errors() {
        let good = component_artifact(&[artifact()]);
        assert!(component_err(&good[..20]).contains("component is truncated"));
        assert!(component_err(&good[..good.len() - 1]).contains("header says"));
        // The checksum covers header and body; a module's bytes are covered
        // by that module's own checksum.
        let mut flipped = good.clone();
        flipped[HEADER_LEN + 20] ^= 1;
        assert!(component_err(&flipped).contains("component is corrupted"));
        let parsed = parse_component(&good, &fingerprint()).unwrap();
        let mut module_flip = good.clone();
        module_flip[parsed.modules[0].start + HEADER_LEN + 3] ^= 1;
        let modules = parse_component(&module_flip, &fingerprint())
            .unwrap()
            .modules;
        let e = format!(
            "{:#}",
            parse(&module_flip[modules[0].clone()], &fingerprint())
                .err()
                .unwrap()
        );
        assert!(e.contains("module is corrupted"), "{e}");
        let mut other = fingerprint();
        other.target = "aarch64-unknown-linux-gnu".into();
        let e = format!("{:#}", parse_component(&good, &other).err().unwrap());
        assert!(
            e.contains("precompiled component was compiled for target"),
            "{e}"
        );
    }

    #[test]
    fn component_module_table_is_checked() {
        let good = component_artifact(&[artifact()]);
        let parsed = parse_component(&good, &fingerprint()).unwrap();
        let binary_end =
            parsed.binary.as_ptr() as usize - good.as_ptr() as usize + parsed.binary.len();
        let entry = binary_end + 4;
        let edit = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut bad = good.clone();
            f(&mut bad);
            reseal(&mut bad);
            component_err(&bad)
        };
        // Unaligned, past the end, empty, and a count the body cannot hold.
        let start = parsed.modules[0].start as u64;
        assert!(
            edit(&|b| b[entry..entry + 8].copy_from_slice(&(start + 1).to_le_bytes()))
                .contains("out of place")
        );
        assert!(
            edit(&|b| b[entry + 8..entry + 16].copy_from_slice(&u64::MAX.to_le_bytes()))
                .contains("out of place")
        );
        assert!(
            edit(&|b| b[entry + 8..entry + 16].copy_from_slice(&0u64.to_le_bytes()))
                .contains("out of place")
        );
        assert!(
            edit(&|b| b[binary_end..binary_end + 4].copy_from_slice(&u32::MAX.to_le_bytes()))
                .contains("more entries")
        );
        // A shorter module leaves bytes after it.
        let len = parsed.modules[0].len() as u64;
        assert!(
            edit(&|b| b[entry + 8..entry + 16].copy_from_slice(&(len - 1).to_le_bytes()))
                .contains("does not end the file")
        );
    }
}
