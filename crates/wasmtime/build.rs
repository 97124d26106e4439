//! Computes the build id that precompiled modules carry
//! (`WASMTIME_MMU_BUILD_ID`): a SHA-256 over the sources that decide what
//! compiled code looks like and what the runtime expects of it (this crate,
//! the translator, the shared layout crate, our Cranelift helpers), the lock
//! file (the exact Cranelift and parser versions) and the Rust compiler's
//! version. Two builds with the same id produce and accept the same code;
//! an artifact from any other build is refused before it is looked at.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest
        .parent()
        .and_then(Path::parent)
        .expect("crates/wasmtime sits two levels below the workspace root")
        .to_path_buf();
    let mut hasher = Sha256::new();
    for dir in [
        "crates/wasmtime/src",
        "crates/environ/src",
        "crates/cranelift/src",
        "cranelift/src",
    ] {
        let dir = workspace.join(dir);
        println!("cargo:rerun-if-changed={}", dir.display());
        let mut files = Vec::new();
        collect_files(&dir, &mut files);
        files.sort();
        for file in files {
            let relative = file.strip_prefix(&workspace).unwrap_or(&file);
            hasher.update(relative.to_string_lossy().as_bytes());
            hasher.update([0]);
            let bytes = std::fs::read(&file)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(&bytes);
        }
    }
    let lock = workspace.join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    // A checkout without a lock file still gets an id; it is then only as
    // precise as the sources.
    if let Ok(bytes) = std::fs::read(&lock) {
        hasher.update(&bytes);
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .map(|o| o.stdout)
        .unwrap_or_default();
    hasher.update(&version);
    hasher.update(std::env::var("TARGET").unwrap_or_default().as_bytes());
    let digest = hasher.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=WASMTIME_MMU_BUILD_ID={hex}");
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries =
        std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            collect_files(&path, out);
        } else {
            out.push(path);
        }
    }
}
