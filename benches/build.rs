//! Compiles the C probe of `bench mmu-roundtrip` (`probe/mmu_roundtrip.c`)
//! into a static library linked into the benchmark binary.

fn main() {
    println!("cargo::rerun-if-changed=probe/mmu_roundtrip.c");
    cc::Build::new()
        .file("probe/mmu_roundtrip.c")
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true)
        .compile("mmu_roundtrip");
}
