//! Tests of the `wasmtime` binary: options, WASI, exit statuses and error
//! messages, compared with what upstream Wasmtime 48 prints. The guests are
//! WAT files in `tests/cli/`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn wasmtime() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmtime"));
    // Error output must not depend on the developer's environment.
    cmd.env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .env_remove("WASMTIME_LOG");
    // Nor on the developer's compile cache and its configuration file: the
    // default cache (on, as upstream) lives under the test target folder.
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    cmd.env("XDG_CACHE_HOME", tmp.join("cli-cache"))
        .env("XDG_CONFIG_HOME", tmp.join("cli-config"));
    cmd
}

fn guest(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/cli")
        .join(name)
}

/// Runs `wasmtime` with `args`, no stdin.
fn run(args: &[&str]) -> Output {
    run_with(wasmtime().args(args))
}

fn run_with(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .expect("failed to spawn wasmtime")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn assert_status(o: &Output, code: i32) {
    assert_eq!(
        o.status.code(),
        Some(code),
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        stdout(o),
        stderr(o)
    );
}

fn tool() -> String {
    guest("wasi-tool.wat").to_str().unwrap().to_string()
}

fn invoke(func: &str, args: &[&str]) -> Output {
    let path = guest("invoke.wat");
    let mut all = vec!["--invoke", func, path.to_str().unwrap()];
    all.extend_from_slice(args);
    run(&all)
}

#[test]
fn invoke_prints_each_value_type() {
    for (func, args, want) in [
        ("add", &["3", "-5"][..], "-2\n"),
        ("add", &["0x10", "0X01"][..], "17\n"),
        ("neg64", &["-9000000000"][..], "9000000000\n"),
        ("half32", &["3"][..], "1.5\n"),
        ("double64", &["0.1"][..], "0.2\n"),
        ("nan", &[][..], "NaN\n"),
        // v128 as one unsigned decimal integer, as upstream.
        ("vec", &[][..], "8589934593\n"),
        ("funcref", &[][..], "<funcref>\n"),
        ("null-funcref", &[][..], "<null funcref>\n"),
        ("null-externref", &[][..], "<null externref>\n"),
        ("two", &[][..], "7\n-8\n"),
        ("nothing", &[][..], ""),
    ] {
        let o = invoke(func, args);
        assert_status(&o, 0);
        assert_eq!(stdout(&o), want, "--invoke {func} {args:?}");
        let warned = stderr(&o).contains("returns values is experimental");
        assert_eq!(warned, !want.is_empty(), "{func}: {}", stderr(&o));
    }
    // i32x4 1 2 0 0, little-endian lanes.
    assert_eq!(2u128 << 32 | 1, 8589934593);
}

#[test]
fn invoke_errors() {
    let o = invoke("nope", &[]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("no func export named `nope` found"),
        "{}",
        stderr(&o)
    );

    let o = invoke("add", &["1"]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("not enough arguments for `add`"),
        "{}",
        stderr(&o)
    );

    let o = invoke("add", &["1", "x"]);
    assert_status(&o, 1);
    assert!(stderr(&o).contains("invalid digit"), "{}", stderr(&o));

    let o = invoke("takes-v128", &["1"]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("unsupported argument type"),
        "{}",
        stderr(&o)
    );

    // A global is not a function.
    let o = invoke("g", &[]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("no func export named `g` found"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn args_and_argv0() {
    let t = tool();
    let o = run(&[&t, "args", "x y", "-z", "--dir"]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "wasi-tool.wat\nargs\nx y\n-z\n--dir\n");

    let o = run(&["run", "--argv0", "prog", &t, "args"]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "prog\nargs\n");
}

#[test]
fn env_is_empty_by_default_and_set_by_flags() {
    let t = tool();
    let o = run_with(wasmtime().env("HOST_ONLY", "1").args([&t, "env"]));
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "");

    let o = run_with(
        wasmtime()
            .env("INHERITED", "from host")
            .env_remove("NOT_SET_ANYWHERE")
            .args([
                "--env",
                "FOO=bar",
                "--env",
                "EQ=a=b",
                "--env",
                "INHERITED",
                "--env",
                "NOT_SET_ANYWHERE",
                &t,
                "env",
            ]),
    );
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "FOO=bar\nEQ=a=b\nINHERITED=from host\n");

    let o =
        run_with(
            wasmtime()
                .env("MARKER_FOR_TEST", "42")
                .args(["-S", "inherit-env", &t, "env"]),
        );
    assert_status(&o, 0);
    assert!(
        stdout(&o).contains("MARKER_FOR_TEST=42\n"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn dir_sandboxing() {
    let root = tempfile::tempdir().unwrap();
    let sandbox = root.path().join("sandbox");
    std::fs::create_dir(&sandbox).unwrap();
    std::fs::create_dir(sandbox.join("sub")).unwrap();
    std::fs::write(sandbox.join("inside.txt"), "inside\n").unwrap();
    std::fs::write(sandbox.join("sub/deeper.txt"), "deeper\n").unwrap();
    std::fs::write(root.path().join("secret.txt"), "SECRET\n").unwrap();
    let t = tool();
    let dir = format!("{}::/data", sandbox.display());

    let o = run(&["--dir", &dir, &t, "cat", "inside.txt"]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "inside\n");
    let o = run(&["--dir", &dir, &t, "cat", "sub/../sub/deeper.txt"]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "deeper\n");
    let o = run(&["--dir", &dir, &t, "prestat"]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "/data\n");

    // Escapes fail with ENOTCAPABLE (76) or EPERM (63), the guest's exit code.
    for escape in ["../secret.txt", "sub/../../secret.txt", "/etc/passwd", ".."] {
        let o = run(&["--dir", &dir, &t, "cat", escape]);
        let code = o.status.code();
        assert!(
            code == Some(76) || code == Some(63),
            "{escape}: {:?} {}",
            o.status,
            stderr(&o)
        );
        assert!(!stdout(&o).contains("SECRET"));
    }
    // Missing file: ENOENT (44).
    let o = run(&["--dir", &dir, &t, "cat", "missing.txt"]);
    assert_status(&o, 44);
    // No --dir: no fd 3 at all (EBADF, 8).
    let o = run(&[&t, "cat", "inside.txt"]);
    assert_status(&o, 8);

    // HOST without ::GUEST is preopened under its own name.
    let o =
        run_with(
            wasmtime()
                .current_dir(&sandbox)
                .args(["--dir", ".", &t, "cat", "inside.txt"]),
        );
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "inside\n");

    let o = run(&["--dir", "/definitely/not/here", &t, "args"]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("/definitely/not/here"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn stdin_is_inherited() {
    use std::io::Write;
    let t = tool();
    let mut child = wasmtime()
        .args([&t, "stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"through stdin\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "through stdin\n");

    let o = run(&["-S", "inherit-stdout=n", &t, "args"]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "");
}

#[test]
fn exit_codes() {
    let t = tool();
    for code in [0, 3, 7] {
        let o = run(&[&t, "exit", &code.to_string()]);
        assert_status(&o, code);
        assert_eq!(stderr(&o), "", "proc_exit prints nothing");
    }
}

#[test]
fn trap_message_and_status() {
    let t = tool();
    let o = run(&[&t, "trap"]);
    assert_status(&o, 134);
    let err = stderr(&o);
    assert!(
        err.starts_with("Error: failed to run main module `"),
        "{err}"
    );
    assert!(err.contains("wasi-tool.wat`\n\nCaused by:\n    0: failed to invoke command default\n    1: error while executing at wasm backtrace:\n"), "{err}");
    assert!(
        err.contains("wasm trap: wasm `unreachable` instruction executed"),
        "{err}"
    );
    assert!(!err.contains("Stack backtrace"), "{err}");
}

#[test]
fn fuel_and_timeout_interrupt() {
    let t = tool();
    let o = run(&["-W", "fuel=100000", &t, "loop"]);
    assert_status(&o, 134);
    assert!(
        stderr(&o).contains("wasm trap: all fuel consumed"),
        "{}",
        stderr(&o)
    );

    let o = run(&["-W", "fuel=100000", &t, "args"]);
    assert_status(&o, 0);

    let start = std::time::Instant::now();
    let o = run(&["-Wtimeout=200ms", &t, "loop"]);
    assert_status(&o, 134);
    assert!(
        stderr(&o).contains("wasm trap: interrupt"),
        "{}",
        stderr(&o)
    );
    assert!(start.elapsed() < std::time::Duration::from_secs(30));

    let o = run(&["-W", "timeout=10s,epoch-interruption=y", &t, "args"]);
    assert_status(&o, 0);
}

/// `-Wtimeout` with `-Wmmu-interruption=y` stops a runaway guest through the
/// MMU, with exactly the message and exit status of the epoch timeout; a
/// guest that finishes in time is not disturbed.
#[test]
fn mmu_timeout_matches_epoch_timeout() {
    let t = tool();
    let epoch = run(&["-Wtimeout=200ms", &t, "loop"]);
    let start = std::time::Instant::now();
    let mmu = run(&["-Wtimeout=200ms", "-Wmmu-interruption=y", &t, "loop"]);
    assert!(start.elapsed() < std::time::Duration::from_secs(30));
    assert_status(&mmu, 134);
    assert_eq!(mmu.status.code(), epoch.status.code());
    assert!(
        stderr(&mmu).contains("wasm trap: interrupt"),
        "{}",
        stderr(&mmu)
    );
    assert_eq!(
        stderr(&mmu),
        stderr(&epoch),
        "same message, backtrace included"
    );

    // The same through mprotect arming (the default is pointer swap).
    let mprotect = run(&[
        "-Wtimeout=200ms",
        "-Wmmu-interruption=y",
        "-Wmmu-interruption-mode=mprotect",
        &t,
        "loop",
    ]);
    assert_status(&mprotect, 134);
    assert_eq!(
        stderr(&mprotect),
        stderr(&epoch),
        "same message in mprotect mode"
    );
    let bad = run(&[
        "-Wmmu-interruption=y",
        "-Wmmu-interruption-mode=swap",
        &t,
        "args",
    ]);
    assert_ne!(bad.status.code(), Some(0));
    assert!(
        stderr(&bad).contains("expects `mprotect` or `pointer-swap`"),
        "{}",
        stderr(&bad)
    );

    let o = run(&["-W", "timeout=10s,mmu-interruption=y", &t, "args"]);
    assert_status(&o, 0);
    // MMU interruption without a timeout only adds polls.
    let o = run(&["-Wmmu-interruption=y", &t, "args"]);
    assert_status(&o, 0);
}

/// `-W max-memory-size` refuses growth past it (Wasm sees -1), and with
/// `trap-on-grow-failure` the refusal traps with the limiter's message.
#[test]
fn store_limits() {
    let path = guest("grow.wat");
    let grow = |flags: &[&str]| {
        let mut args = flags.to_vec();
        args.extend(["--invoke", "grow", path.to_str().unwrap(), "5"]);
        run(&args)
    };
    let o = grow(&[]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "1\n");
    let o = grow(&["-W", "max-memory-size=131072"]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "-1\n");
    let o = grow(&["-Wmax-memory-size=131072,trap-on-grow-failure=y"]);
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("forcing trap when growing memory to 393216 bytes"),
        "{}",
        stderr(&o)
    );
    let o = grow(&["-W", "max-instances=0"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("instance count too high"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn unknown_flag() {
    let o = run(&["--bogus-flag", "x.wasm"]);
    assert_status(&o, 2);
    assert!(
        stderr(&o).contains("unexpected argument '--bogus-flag'"),
        "{}",
        stderr(&o)
    );
    let o = run(&["-W", "bogus", "x.wasm"]);
    assert_status(&o, 2);
    assert!(
        stderr(&o).contains("unknown -W / --wasm option: bogus"),
        "{}",
        stderr(&o)
    );
    let o = run(&["-W", "simd=maybe", "x.wasm"]);
    assert_status(&o, 2);
    assert!(
        stderr(&o).contains("failed to parse -W option `simd=maybe`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn unsupported_flags_are_named() {
    let t = tool();
    for (flag, shown) in [
        (&["-W", "component-model"][..], "-W component-model"),
        (&["-Wmemory64=y"][..], "-W memory64=y"),
        (&["-W", "simd,threads"][..], "-W threads"),
        (&["-O", "pooling-allocator"][..], "-O pooling-allocator"),
        (&["-C", "compiler=winch"][..], "-C compiler=winch"),
        (&["-S", "http"][..], "-S http"),
        (&["-D", "coredump=x"][..], "-D coredump=x"),
    ] {
        let mut args = flag.to_vec();
        args.extend([t.as_str(), "args"]);
        let o = run(&args);
        assert_status(&o, 2);
        let want = format!("unsupported: {shown} is not supported by this engine");
        assert!(stderr(&o).contains(&want), "{flag:?}: {}", stderr(&o));
    }
    // Accepted forms: off switches for absent features, `cache=n`,
    // comma lists, attached values, booleans in every spelling.
    let o = run(&[
        "-W",
        "memory64=n,component-model=no,simd=yes",
        "-Wbulk-memory=true",
        "-Wmulti-value",
        "-C",
        "cache=n,parallel-compilation=false",
        "-O",
        "opt-level=0,memory-guard-size=65536",
        "-Ccranelift-opt-level=speed",
        &t,
        "args",
    ]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "wasi-tool.wat\nargs\n");
    // A Cranelift setting that does not exist is an error.
    let o = run(&["-C", "cranelift-no-such-setting=1", &t, "args"]);
    assert_status(&o, 1);
}

#[test]
fn disabled_proposal_rejects_module() {
    let o = run(&[
        "-W",
        "simd=n",
        "--invoke",
        "vec",
        guest("invoke.wat").to_str().unwrap(),
    ]);
    assert_status(&o, 1);
    assert!(stderr(&o).to_lowercase().contains("simd"), "{}", stderr(&o));
}

#[test]
fn relaxed_simd_flags() {
    let dir = tempfile::tempdir().unwrap();
    let wat = dir.path().join("relaxed.wat");
    // Index 16: lane 0 (7) with `pshufb`, 0 with the deterministic swizzle.
    std::fs::write(
        &wat,
        r#"(module (func (export "f") (result i32)
            (i8x16.extract_lane_u 0 (i8x16.relaxed_swizzle
              (i8x16.splat (i32.const 7)) (i8x16.splat (i32.const 16))))))"#,
    )
    .unwrap();
    let wat = wat.to_str().unwrap();
    let o = run(&["-W", "relaxed-simd-deterministic=y", "--invoke", "f", wat]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "0\n");
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("ssse3") {
        let o = run(&["--invoke", "f", wat]);
        assert_status(&o, 0);
        assert_eq!(stdout(&o), "7\n");
    }
    let o = run(&["-W", "relaxed-simd=n", "--invoke", "f", wat]);
    assert_status(&o, 1);
    assert!(stderr(&o).contains("relaxed SIMD"), "{}", stderr(&o));
    // Asked for by name, relaxed SIMD without SIMD is refused.
    let o = run(&["-W", "relaxed-simd=y,simd=n", "--invoke", "f", wat]);
    assert_status(&o, 1);
    assert!(stderr(&o).contains("wasm_relaxed_simd"), "{}", stderr(&o));
}

#[test]
fn option_group_help() {
    let o = run(&["-W", "help"]);
    assert_status(&o, 0);
    let out = stdout(&o);
    assert!(out.starts_with("Available wasm options:"), "{out}");
    assert!(out.contains(" simd[=y|n] -- "), "{out}");
    assert!(out.contains("timeout=N|Ns|Nms|.."), "{out}");
    assert!(out.contains("component-model"), "{out}");
    for group in ["-O", "-C", "-D", "-S", "-R"] {
        let o = run(&[group, "help"]);
        assert_status(&o, 0);
        assert!(stdout(&o).starts_with("Available "), "{group}");
    }
    let o = run(&["-W", "help-long"]);
    assert_status(&o, 0);
}

#[test]
fn malformed_modules() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.wasm");
    std::fs::write(&bad, b"\0asm\x01\0\0\0\x01\xff\xff").unwrap();
    let o = run(&[bad.to_str().unwrap()]);
    assert_status(&o, 1);
    assert!(stderr(&o).starts_with("Error: "), "{}", stderr(&o));

    let bad = dir.path().join("bad.wat");
    std::fs::write(&bad, "(module (func (export \"_start\") (i32.add)))").unwrap();
    let o = run(&[bad.to_str().unwrap()]);
    assert_status(&o, 1);
    assert!(stderr(&o).starts_with("Error: "), "{}", stderr(&o));

    let bad = dir.path().join("syntax.wat");
    std::fs::write(&bad, "(module (func ").unwrap();
    let o = run(&[bad.to_str().unwrap()]);
    assert_status(&o, 1);
    assert!(stderr(&o).contains("syntax.wat:1:"), "{}", stderr(&o));

    let o = run(&["/no/such/module.wasm"]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("failed to open wasm module \"/no/such/module.wasm\""),
        "{}",
        stderr(&o)
    );

    let comp = dir.path().join("component.wasm");
    std::fs::write(&comp, b"\0asm\x0d\0\x01\0").unwrap();
    let o = run(&[comp.to_str().unwrap()]);
    assert_status(&o, 1);
    assert!(stderr(&o).contains("component"), "{}", stderr(&o));

    // No WASI: its imports are unknown.
    let o = run(&["-S", "cli=n", &tool(), "args"]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("wasi_snapshot_preview1::args_sizes_get"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn preload() {
    let lib = format!("lib={}", guest("preload-lib.wat").display());
    let main = guest("preload-main.wat");
    let o = run(&[
        "--preload",
        &lib,
        "--invoke",
        "run",
        main.to_str().unwrap(),
        "14",
    ]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "42\n");

    // Without the preload the import is unknown.
    let o = run(&["--invoke", "run", main.to_str().unwrap(), "14"]);
    assert_status(&o, 1);
    assert!(stderr(&o).contains("lib::triple"), "{}", stderr(&o));
    // With -Wunknown-imports-trap it links, and calling it fails (as
    // upstream, with the unknown-import error, which is not a trap).
    let o = run(&[
        "-Wunknown-imports-trap",
        "--invoke",
        "run",
        main.to_str().unwrap(),
        "14",
    ]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("unknown import: `lib::triple` has not been defined"),
        "{}",
        stderr(&o)
    );

    let o = run(&["--preload", "nope", main.to_str().unwrap()]);
    assert_status(&o, 2);
    assert!(stderr(&o).contains("exactly one equals"), "{}", stderr(&o));
}

#[test]
fn version_help_and_subcommands() {
    let o = run(&["--version"]);
    assert_status(&o, 0);
    assert!(stdout(&o).starts_with("wasmtime "), "{}", stdout(&o));

    let o = run(&["help"]);
    assert_status(&o, 0);
    let out = stdout(&o);
    assert!(out.contains("Usage:"), "{out}");
    assert!(out.contains("--invoke"), "{out}");
    assert!(out.contains("If a subcommand is not provided"), "{out}");

    let o = run(&["run", "--help"]);
    assert_status(&o, 0);
    assert!(stdout(&o).contains("--preload"), "{}", stdout(&o));

    let o = run(&[]);
    assert_status(&o, 2);

    let o = run(&["objdump", "foo.cwasm"]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("the `wasmtime objdump` subcommand is not supported by this engine"),
        "{}",
        stderr(&o)
    );
    let o = run(&["compile", "no-such-file.wasm"]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("failed to read input file: no-such-file.wasm"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn compile_then_run_precompiled() {
    let dir = tempfile::tempdir().unwrap();
    let cwasm = dir.path().join("invoke.cwasm");
    let wat = guest("invoke.wat");
    let o = run(&[
        "compile",
        wat.to_str().unwrap(),
        "-o",
        cwasm.to_str().unwrap(),
    ]);
    assert_status(&o, 0);
    let c = cwasm.to_str().unwrap();
    // As upstream, a precompiled module runs only when allowed.
    let o = run(&["--invoke", "add", c, "1", "2"]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("running a precompiled module requires the `--allow-precompiled` flag"),
        "{}",
        stderr(&o)
    );
    let o = run(&["--allow-precompiled", "--invoke", "add", c, "40", "2"]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "42\n");
    // Options that shape code must match the ones it was compiled with.
    let o = run(&[
        "-Oopt-level=0",
        "--allow-precompiled",
        "--invoke",
        "add",
        c,
        "1",
        "2",
    ]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("Cranelift setting `opt_level` = speed, but this engine uses none"),
        "{}",
        stderr(&o)
    );
    let o = run(&["compile", "-Oopt-level=0", wat.to_str().unwrap(), "-o", c]);
    assert_status(&o, 0);
    let o = run(&[
        "-Oopt-level=0",
        "--allow-precompiled",
        "--invoke",
        "add",
        c,
        "1",
        "2",
    ]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "3\n");
    // Without `-o`, the output is named after the input, in the current
    // directory; compiling an artifact again is refused.
    let o = run_with(
        wasmtime()
            .current_dir(dir.path())
            .args(["compile", wat.to_str().unwrap()]),
    );
    assert_status(&o, 0);
    assert!(dir.path().join("invoke.cwasm").exists());
    let o = run(&["compile", c]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("already a precompiled module"),
        "{}",
        stderr(&o)
    );
    // Damage is reported, not run.
    let mut bytes = std::fs::read(&cwasm).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&cwasm, &bytes).unwrap();
    let o = run(&[
        "-Oopt-level=0",
        "--allow-precompiled",
        "--invoke",
        "add",
        c,
        "1",
        "2",
    ]);
    assert_status(&o, 1);
    assert!(stderr(&o).contains("corrupted"), "{}", stderr(&o));
}

#[test]
fn compile_a_component() {
    let dir = tempfile::tempdir().unwrap();
    let wat = dir.path().join("c.wat");
    std::fs::write(
        &wat,
        r#"(component
             (core module $m (func (export "f") (result i32) i32.const 7))
             (core instance $i (instantiate $m))
             (func (export "f") (result u32) (canon lift (core func $i "f"))))"#,
    )
    .unwrap();
    let o = run_with(
        wasmtime()
            .current_dir(dir.path())
            .args(["compile", wat.to_str().unwrap()]),
    );
    assert_status(&o, 0);
    let cwasm = dir.path().join("c.cwasm");
    assert!(cwasm.exists());
    let c = cwasm.to_str().unwrap();
    let o = run(&["compile", c]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("already a precompiled component"),
        "{}",
        stderr(&o)
    );
    let o = run(&[c]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("requires the `--allow-precompiled` flag"),
        "{}",
        stderr(&o)
    );
    // `run` of components is not there yet (WASI 0.2 comes first); it says
    // so instead of misreading the artifact.
    let o = run(&["--allow-precompiled", c]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("is a precompiled WebAssembly component"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn compile_for_another_target() {
    let dir = tempfile::tempdir().unwrap();
    let cwasm = dir.path().join("a64.cwasm");
    let c = cwasm.to_str().unwrap();
    let wat = guest("invoke.wat");
    let o = run(&[
        "compile",
        "--target",
        "aarch64-unknown-linux-gnu",
        wat.to_str().unwrap(),
        "-o",
        c,
    ]);
    assert_status(&o, 0);
    let o = run(&["--allow-precompiled", "--invoke", "add", c, "1", "2"]);
    assert_status(&o, 1);
    assert!(
        stderr(&o).contains("compiled for target `aarch64-unknown-linux-gnu`"),
        "{}",
        stderr(&o)
    );
    let o = run(&[
        "compile",
        "--target",
        "no-such-thing",
        wat.to_str().unwrap(),
    ]);
    assert_status(&o, 1);
    assert!(stderr(&o).contains("not a target triple"), "{}", stderr(&o));
}

#[test]
fn compile_cache_is_used_and_configurable() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cache.toml");
    let cache_dir = dir.path().join("cache");
    std::fs::write(
        &config,
        format!("[cache]\ndirectory = {:?}\n", cache_dir.to_str().unwrap()),
    )
    .unwrap();
    let cfg = format!("cache-config={}", config.display());
    let wat = guest("invoke.wat");
    let w = wat.to_str().unwrap();
    let logged =
        |args: &[&str]| run_with(wasmtime().env("WASMTIME_LOG", "wasmtime=debug").args(args));
    let o = logged(&["-C", &cfg, "--invoke", "add", w, "1", "2"]);
    assert_status(&o, 0);
    assert!(stderr(&o).contains("compile cache miss"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("compile cache stored"),
        "{}",
        stderr(&o)
    );
    let o = logged(&["-C", &cfg, "--invoke", "add", w, "1", "2"]);
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "3\n");
    assert!(stderr(&o).contains("compile cache hit"), "{}", stderr(&o));
    let entries = std::fs::read_dir(cache_dir.join("modules"))
        .unwrap()
        .count();
    assert_eq!(entries, 1);
    // `-C cache=n` neither reads nor writes it.
    let o = logged(&["-C", &cfg, "-C", "cache=n", "--invoke", "add", w, "1", "2"]);
    assert_status(&o, 0);
    assert!(!stderr(&o).contains("compile cache"), "{}", stderr(&o));
    // A bad configuration file is an error that names it.
    std::fs::write(&config, "[cache]\nno-such-key = \"1\"\n").unwrap();
    let o = run(&["-C", &cfg, "--invoke", "add", w, "1", "2"]);
    assert_status(&o, 1);
    assert!(stderr(&o).contains("no-such-key"), "{}", stderr(&o));
    // Two processes compiling one module at once both succeed.
    std::fs::write(
        &config,
        format!(
            "[cache]\ndirectory = {:?}\n",
            dir.path().join("fresh").to_str().unwrap()
        ),
    )
    .unwrap();
    let spawn = || {
        wasmtime()
            .args(["-C", &cfg, "--invoke", "add", w, "2", "2"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    for child in [a, b] {
        let o = child.wait_with_output().unwrap();
        assert_status(&o, 0);
        assert_eq!(stdout(&o), "4\n");
    }
}

/// `-W` switches of the Wasm 3.0 proposals this engine has really switch
/// them: each module runs by default and is refused with its proposal off.
#[test]
fn proposal_switches_take_effect() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, body) in [
        (
            "tail-call",
            r#"(func $f) (func (export "_start") (return_call $f))"#,
        ),
        (
            "function-references",
            r#"(type $t (func)) (func $f (type $t)) (elem declare func $f)
               (func (export "_start") (call_ref $t (ref.func $f)))"#,
        ),
        (
            "exceptions",
            r#"(tag $e) (func (export "_start")
                 (block $h (try_table (catch $e $h) (throw $e))))"#,
        ),
    ] {
        let path = dir.path().join(format!("{flag}.wat"));
        std::fs::write(&path, format!("(module {body})")).unwrap();
        let path = path.to_str().unwrap();
        if flag == "exceptions" && !cfg!(target_arch = "x86_64") {
            println!("{flag}: skipped: exceptions exist on x86_64 only");
            continue;
        }
        assert_status(&run(&[path]), 0);
        assert_status(&run(&["-W", &format!("{flag}=y"), path]), 0);
        for off in [format!("{flag}=n"), "all-proposals=n".to_string()] {
            let o = run(&["-W", &off, path]);
            assert_status(&o, 1);
            assert!(stderr(&o).starts_with("Error: "), "{off}: {}", stderr(&o));
        }
    }
    // GC (its `i31` slice) is off by default, as the engine's knob.
    let path = dir.path().join("gc.wat");
    std::fs::write(
        &path,
        r#"(module (func (export "_start") (drop (i31.get_u (ref.i31 (i32.const 1))))))"#,
    )
    .unwrap();
    let path = path.to_str().unwrap();
    assert_status(&run(&[path]), 1);
    assert_status(&run(&["-W", "gc=y", path]), 0);
    assert_status(&run(&["-W", "gc=n", path]), 1);
}

/// `--profile=perfmap` leaves `perf` a line for each guest function in
/// `/tmp/perf-PID.map`; other profilers are refused by name.
#[test]
fn profile_perfmap_names_guest_functions() {
    let child = wasmtime()
        .args(["run", "--profile=perfmap", "--invoke", "add"])
        .arg(guest("invoke.wat"))
        .args(["1", "2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("failed to spawn wasmtime");
    let map = format!("/tmp/perf-{}.map", child.id());
    let o = child.wait_with_output().unwrap();
    assert_status(&o, 0);
    assert_eq!(stdout(&o), "3\n");
    let text = std::fs::read_to_string(&map).unwrap_or_else(|e| panic!("{map}: {e}"));
    std::fs::remove_file(&map).unwrap();
    // `$f` is the module's first function; the others have no names.
    for want in ["::function[0]::f", "::function[1]"] {
        assert!(
            text.lines().any(|l| l.ends_with(want)),
            "no line ending in {want}:\n{text}"
        );
    }

    let path = guest("invoke.wat");
    for (profile, want) in [
        (
            "jitdump",
            "unsupported: --profile=jitdump is not supported by this engine",
        ),
        (
            "guest,out.json",
            "unsupported: --profile=guest,out.json is not supported",
        ),
        ("perf", "unknown profiling strategy `perf`"),
    ] {
        let o = run(&[
            "run",
            &format!("--profile={profile}"),
            path.to_str().unwrap(),
        ]);
        assert_status(&o, 2);
        assert!(stderr(&o).contains(want), "{profile}: {}", stderr(&o));
    }
}
