//! Compiles the C probes of `bench mmu-roundtrip` (`probe/mmu_roundtrip.c`)
//! and `bench mmu-load` (`probe/mmu_load.c`) into a static library linked
//! into the benchmark binary.

fn main() {
    println!("cargo::rerun-if-changed=probe/mmu_roundtrip.c");
    println!("cargo::rerun-if-changed=probe/mmu_load.c");
    cc::Build::new()
        .file("probe/mmu_roundtrip.c")
        .file("probe/mmu_load.c")
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true)
        .compile("mmu_roundtrip");
}
