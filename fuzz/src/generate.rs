//! From fuzz input to module.
//!
//! Input layout, shared by `differential` and `interrupt_liveness`:
//!
//! * first byte even (or empty input): the rest is `arbitrary` data; a
//!   swarm `wasm-smith` configuration and a module are drawn from it, and
//!   what is left drives configuration and arguments;
//! * first byte odd: a little-endian `u32` length `n`, then `n` bytes of a
//!   module, then the `arbitrary` data. The seed corpus puts the spec
//!   testsuite's modules here (see `corpus-seed`), so libFuzzer starts from
//!   modules that use every instruction.

use arbitrary::{Result, Unstructured};

/// How the module should be shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// Comparison: everything exported, so everything is compared.
    Differential,
    /// Interruption: guards against traps, so that runs last until
    /// interrupted rather than ending in the first trap.
    Liveness,
}

/// Splits `data` into a module and the data left for everything else.
/// `None` when the input is too short to hold a module.
pub fn module_and_rest<'a>(
    data: &'a [u8],
    purpose: Purpose,
) -> Option<(Vec<u8>, Unstructured<'a>)> {
    match data.split_first() {
        Some((kind, rest)) if kind & 1 == 1 => {
            let (len, rest) = rest.split_at_checked(4)?;
            let len = u32::from_le_bytes(len.try_into().unwrap()) as usize;
            let (wasm, rest) = rest.split_at_checked(len)?;
            Some((wasm.to_vec(), Unstructured::new(rest)))
        }
        _ => {
            let mut u = Unstructured::new(data.get(1..).unwrap_or(&[]));
            let wasm = smith_module(&mut u, purpose).ok()?;
            Some((wasm, u))
        }
    }
}

/// `wasm-smith`'s defaults with every proposal that neither engine enables
/// here turned off: the base of every target's configuration.
pub fn proposals_both_engines_run() -> wasm_smith::Config {
    wasm_smith::Config {
        gc_enabled: false,
        exceptions_enabled: false,
        tail_call_enabled: false,
        threads_enabled: false,
        memory64_enabled: false,
        relaxed_simd_enabled: false,
        custom_page_sizes_enabled: false,
        wide_arithmetic_enabled: false,
        shared_everything_threads_enabled: false,
        custom_descriptors_enabled: false,
        ..wasm_smith::Config::default()
    }
}

/// A `wasm-smith` configuration restricted to the proposals both engines
/// run, with the rest of the knobs drawn (swarm testing), kept small so that
/// compilation does not dominate the time of an input.
pub fn smith_config(u: &mut Unstructured<'_>, purpose: Purpose) -> Result<wasm_smith::Config> {
    let mut c = wasm_smith::Config {
        // Wasm 2.0, each on or off: swarm testing finds more with fewer
        // features at a time.
        simd_enabled: u.ratio(3, 4)?,
        bulk_memory_enabled: u.ratio(3, 4)?,
        reference_types_enabled: u.ratio(3, 4)?,
        multi_value_enabled: u.ratio(3, 4)?,
        saturating_float_to_int_enabled: u.ratio(3, 4)?,
        sign_extension_ops_enabled: u.ratio(3, 4)?,
        extended_const_enabled: u.arbitrary()?,
        tail_call_enabled: u.arbitrary()?,
        allow_floats: u.ratio(7, 8)?,
        max_memories: u.int_in_range(0..=3)?,
        max_tables: u.int_in_range(0..=3)?,
        max_funcs: u.int_in_range(1..=12)?,
        max_instructions: u.int_in_range(1..=300)?,
        max_types: u.int_in_range(1..=20)?,
        max_imports: u.int_in_range(0..=8)?,
        max_globals: u.int_in_range(0..=10)?,
        max_data_segments: u.int_in_range(0..=5)?,
        max_element_segments: u.int_in_range(0..=5)?,
        max_elements: u.int_in_range(0..=30)?,
        max_table_elements: u.int_in_range(0..=2000)?,
        max_memory32_bytes: *u.choose(&[0, 1 << 16, 4 << 16, 1 << 20])?,
        max_nesting_depth: u.int_in_range(1..=10)?,
        min_funcs: 1,
        export_everything: true,
        canonicalize_nans: u.ratio(1, 16)?,
        disallow_traps: match purpose {
            Purpose::Differential => u.ratio(1, 4)?,
            Purpose::Liveness => u.ratio(3, 4)?,
        },
        ..proposals_both_engines_run()
    };
    if purpose == Purpose::Liveness {
        // Host functions return; only the module's own functions are made
        // never to.
        c.max_imports = 0;
    }
    if !c.reference_types_enabled {
        c.max_tables = c.max_tables.min(1);
    }
    // Relaxed SIMD builds on SIMD; drawn last, as it was added last.
    c.relaxed_simd_enabled = c.simd_enabled && u.arbitrary()?;
    Ok(c)
}

/// A module from `wasm-smith`.
pub fn smith_module(u: &mut Unstructured<'_>, purpose: Purpose) -> Result<Vec<u8>> {
    let config = smith_config(u, purpose)?;
    Ok(wasm_smith::Module::new(config, u)?.to_bytes())
}
