//! WASI preview1 through this runtime, with small WAT guests.

use anyhow::Result;
use wasmtime::{Engine, Instance, Linker, Module, Store};
use wasmtime_mmu_wasi::pipe::WritePipe;
use wasmtime_mmu_wasi::{FsPerms, I32Exit, WasiCtx, WasiCtxBuilder};

// WASI errno values.
const ESUCCESS: i32 = 0;
const EBADF: i32 = 8;
const EFAULT: i32 = 21;
const ENOENT: i32 = 44;
const EILSEQ: i32 = 25;
const EINVAL: i32 = 28;
const EPERM: i32 = 63;
const ENOTCAPABLE: i32 = 76;

/// The imports every test guest may use, and a 1-page memory.
const PRELUDE: &str = r#"
    (import "wasi_snapshot_preview1" "args_sizes_get" (func $args_sizes_get (param i32 i32) (result i32)))
    (import "wasi_snapshot_preview1" "args_get" (func $args_get (param i32 i32) (result i32)))
    (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes_get (param i32 i32) (result i32)))
    (import "wasi_snapshot_preview1" "environ_get" (func $environ_get (param i32 i32) (result i32)))
    (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
    (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
    (import "wasi_snapshot_preview1" "fd_close" (func $fd_close (param i32) (result i32)))
    (import "wasi_snapshot_preview1" "path_open" (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
    (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
    (import "wasi_snapshot_preview1" "clock_time_get" (func $clock_time_get (param i32 i64 i32) (result i32)))
    (import "wasi_snapshot_preview1" "fd_prestat_get" (func $fd_prestat_get (param i32 i32) (result i32)))
    (import "wasi_snapshot_preview1" "fd_prestat_dir_name" (func $fd_prestat_dir_name (param i32 i32 i32) (result i32)))
    (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
    (memory (export "memory") 1)

    ;; write(fd, ptr, len) -> errno, using an iovec at 0x100 and nwritten at 0x108
    (func $write (param $fd i32) (param $ptr i32) (param $len i32) (result i32)
        (i32.store (i32.const 0x100) (local.get $ptr))
        (i32.store (i32.const 0x104) (local.get $len))
        (call $fd_write (local.get $fd) (i32.const 0x100) (i32.const 1) (i32.const 0x108)))
"#;

fn module(engine: &Engine, body: &str) -> Result<Module> {
    Module::new(engine, format!("(module {PRELUDE} {body})"))
}

/// Instantiates `body` with WASI from `builder`; stdout is captured.
struct Guest {
    store: Store<WasiCtx>,
    instance: Instance,
    stdout: WritePipe<std::io::Cursor<Vec<u8>>>,
}

impl Guest {
    fn new(body: &str, builder: &mut WasiCtxBuilder) -> Result<Guest> {
        let engine = Engine::default();
        let module = module(&engine, body)?;
        let mut linker: Linker<WasiCtx> = Linker::new(&engine);
        wasmtime_mmu_wasi::add_to_linker(&mut linker, |cx| cx)?;
        let stdout = WritePipe::new_in_memory();
        let wasi = builder.stdout(stdout.clone()).try_build()?;
        let mut store = Store::new(&engine, wasi);
        let instance = linker.instantiate(&mut store, &module)?;
        Ok(Guest {
            store,
            instance,
            stdout,
        })
    }

    fn call(&mut self, name: &str) -> Result<i32> {
        let f = self
            .instance
            .get_typed_func::<(), i32>(&mut self.store, name)?;
        f.call(&mut self.store, ())
    }

    fn call_with(&mut self, name: &str, a: i32, b: i32) -> Result<i32> {
        let f = self
            .instance
            .get_typed_func::<(i32, i32), i32>(&mut self.store, name)?;
        f.call(&mut self.store, (a, b))
    }

    fn write_memory(&mut self, offset: usize, bytes: &[u8]) {
        let memory = self.instance.get_memory(&mut self.store, "memory").unwrap();
        memory.write(&mut self.store, offset, bytes).unwrap();
    }

    fn read_memory(&mut self, offset: usize, len: usize) -> Vec<u8> {
        let memory = self.instance.get_memory(&mut self.store, "memory").unwrap();
        let mut buf = vec![0; len];
        memory.read(&mut self.store, offset, &mut buf).unwrap();
        buf
    }

    fn stdout(self) -> Vec<u8> {
        drop(self.store);
        self.stdout
            .try_into_inner()
            .map_err(|_| ())
            .expect("stdout pipe still shared")
            .into_inner()
    }
}

#[test]
fn fd_write_to_captured_stdout() -> Result<()> {
    let mut g = Guest::new(
        r#"(data (i32.const 16) "hello, wasi\n")
           (func (export "run") (result i32)
               (call $write (i32.const 1) (i32.const 16) (i32.const 12)))"#,
        &mut WasiCtxBuilder::new(),
    )?;
    assert_eq!(g.call("run")?, ESUCCESS);
    // nwritten
    assert_eq!(g.read_memory(0x108, 4), 12u32.to_le_bytes());
    assert_eq!(g.stdout(), b"hello, wasi\n");
    Ok(())
}

#[test]
fn args_and_env_round_trip() -> Result<()> {
    // Writes the argument buffer, then the environment buffer, to stdout
    // (NUL-separated as WASI lays them out).
    let body = r#"
        (func (export "run") (result i32)
            (local $errno i32)
            (local.set $errno (call $args_sizes_get (i32.const 0x200) (i32.const 0x204)))
            (if (local.get $errno) (then (return (local.get $errno))))
            (local.set $errno (call $args_get (i32.const 0x300) (i32.const 0x1000)))
            (if (local.get $errno) (then (return (local.get $errno))))
            (local.set $errno (call $write (i32.const 1) (i32.const 0x1000) (i32.load (i32.const 0x204))))
            (if (local.get $errno) (then (return (local.get $errno))))
            (local.set $errno (call $environ_sizes_get (i32.const 0x208) (i32.const 0x20c)))
            (if (local.get $errno) (then (return (local.get $errno))))
            (local.set $errno (call $environ_get (i32.const 0x400) (i32.const 0x2000)))
            (if (local.get $errno) (then (return (local.get $errno))))
            (call $write (i32.const 1) (i32.const 0x2000) (i32.load (i32.const 0x20c))))
    "#;
    let mut g = Guest::new(
        body,
        WasiCtxBuilder::new()
            .args(&["prog.wasm", "a b", "ünï"])
            .env("FOO", "bar")
            .envs(&[("EMPTY", ""), ("X", "1=2")]),
    )?;
    assert_eq!(g.call("run")?, ESUCCESS);
    // argc and envc
    assert_eq!(g.read_memory(0x200, 4), 3u32.to_le_bytes());
    assert_eq!(g.read_memory(0x208, 4), 3u32.to_le_bytes());
    // argv[1] points at "a b"
    let argv1 = u32::from_le_bytes(g.read_memory(0x304, 4).try_into().unwrap());
    assert_eq!(g.read_memory(argv1 as usize, 4), b"a b\0");
    let out = g.stdout();
    assert_eq!(
        out,
        "prog.wasm\0a b\0ünï\0FOO=bar\0EMPTY=\0X=1=2\0".as_bytes()
    );
    Ok(())
}

#[test]
fn proc_exit_code() -> Result<()> {
    let mut g = Guest::new(
        r#"(func (export "run") (result i32)
               (call $proc_exit (i32.const 3))
               unreachable)"#,
        &mut WasiCtxBuilder::new(),
    )?;
    let err = g.call("run").unwrap_err();
    let exit = err
        .downcast_ref::<I32Exit>()
        .unwrap_or_else(|| panic!("expected I32Exit, got {err:?}"));
    assert_eq!(exit.0, 3);
    Ok(())
}

#[test]
fn proc_exit_out_of_range_is_an_error() -> Result<()> {
    let mut g = Guest::new(
        r#"(func (export "run") (result i32)
               (call $proc_exit (i32.const 200))
               unreachable)"#,
        &mut WasiCtxBuilder::new(),
    )?;
    let err = g.call("run").unwrap_err();
    assert!(err.downcast_ref::<I32Exit>().is_none());
    assert!(format!("{err:?}").contains("exit status"), "{err:?}");
    Ok(())
}

/// Bad guest pointers never reach outside guest memory and never end the
/// run: a pointer or length outside guest memory is `EFAULT`, a misaligned
/// pointer or an argument outside its enum (an unknown clock) is `EINVAL`,
/// and bad data behind a valid pointer (a non-UTF-8 path) is `EILSEQ`.
#[test]
fn bad_pointers_and_bad_values_yield_errno() -> Result<()> {
    let body = r#"
        (func (export "fd_write_raw") (param $iovs i32) (param $nwritten i32) (result i32)
            (call $fd_write (i32.const 1) (local.get $iovs) (i32.const 1) (local.get $nwritten)))
        (func (export "args_get_raw") (param $argv i32) (param $buf i32) (result i32)
            (call $args_get (local.get $argv) (local.get $buf)))
        (func (export "random_raw") (param $buf i32) (param $len i32) (result i32)
            (call $random_get (local.get $buf) (local.get $len)))
        (func (export "clock_raw") (param $id i32) (param $out i32) (result i32)
            (call $clock_time_get (local.get $id) (i64.const 0) (local.get $out)))
        (func (export "open_raw") (param $path i32) (param $len i32) (result i32)
            (call $path_open (i32.const 3) (i32.const 0) (local.get $path) (local.get $len)
                (i32.const 0) (i64.const 0x1fffffff) (i64.const 0x1fffffff) (i32.const 0) (i32.const 0x500)))
    "#;
    let dir = tempfile::tempdir()?;
    let mut g = Guest::new(
        body,
        WasiCtxBuilder::new()
            .args(&["prog", "argument"])
            .preopened_dir(dir.path(), ".", FsPerms::ReadWrite)?,
    )?;
    let end = 65536;
    let errno = |r: Result<i32>, expected: i32, what: &str| match r {
        Ok(got) => assert_eq!(got, expected, "{what}"),
        Err(e) => panic!("{what}: expected errno {expected}, got an error: {e:?}"),
    };
    let faults = |r: Result<i32>, what: &str| errno(r, EFAULT, what);
    // The iovec array runs past the end of memory, or wraps around.
    faults(g.call_with("fd_write_raw", end - 4, 0x108), "iovs at end");
    faults(g.call_with("fd_write_raw", -8, 0x108), "iovs wrap");
    // An iovec pointing at a buffer that runs past the end of memory.
    g.write_memory(0x100, &(end as u32 - 4).to_le_bytes());
    g.write_memory(0x104, &100u32.to_le_bytes());
    faults(g.call_with("fd_write_raw", 0x100, 0x108), "buffer past end");
    // An iovec whose pointer + length overflows 32 bits.
    g.write_memory(0x100, &0xffff_fff0u32.to_le_bytes());
    g.write_memory(0x104, &0x20u32.to_le_bytes());
    faults(g.call_with("fd_write_raw", 0x100, 0x108), "buffer wraps");
    // The result pointer outside memory, or misaligned.
    g.write_memory(0x100, &0u32.to_le_bytes());
    g.write_memory(0x104, &0u32.to_le_bytes());
    faults(g.call_with("fd_write_raw", 0x100, end), "nwritten at end");
    faults(g.call_with("fd_write_raw", 0x100, -1), "nwritten wraps");
    errno(
        g.call_with("fd_write_raw", 0x101, 0x108),
        EINVAL,
        "misaligned iovs",
    );
    // args_get writing past the end.
    faults(g.call_with("args_get_raw", end - 4, 0x1000), "argv at end");
    faults(
        g.call_with("args_get_raw", 0x300, end - 3),
        "argv_buf at end",
    );
    // random_get of a range running off the end, and of a huge length.
    faults(g.call_with("random_raw", end - 10, 100), "random past end");
    faults(g.call_with("random_raw", 0, -1), "random huge");
    assert_eq!(g.call_with("random_raw", 0x600, 32)?, ESUCCESS);
    // clock_time_get with an invalid clock, and with a bad result pointer.
    errno(g.call_with("clock_raw", 99, 0x700), EINVAL, "unknown clock");
    faults(g.call_with("clock_raw", 0, end - 4), "clock result at end");
    assert_eq!(g.call_with("clock_raw", 1, 0x700)?, ESUCCESS);
    // path_open with a path running off the end of memory, and with a
    // path that is not UTF-8.
    faults(g.call_with("open_raw", end - 2, 100), "path past end");
    faults(g.call_with("open_raw", 0, -1), "path huge");
    g.write_memory(0x800, &[0xff, 0xfe]);
    assert_eq!(g.call_with("open_raw", 0x800, 2)?, EILSEQ);
    // The instance is still usable after those errors.
    assert_eq!(g.call_with("random_raw", 0x600, 32)?, ESUCCESS);
    // Nothing above disturbed stdout.
    assert_eq!(g.stdout(), b"");
    Ok(())
}

/// A guest that opens `path` (at 0x800) relative to fd 3 and reads up to
/// 64 bytes from it into 0x900, writing the bytes to stdout. Returns errno.
const CAT: &str = r#"
    (func (export "cat") (param $len i32) (param $unused i32) (result i32)
        (local $errno i32) (local $fd i32)
        (local.set $errno
            (call $path_open (i32.const 3) (i32.const 1) (i32.const 0x800) (local.get $len)
                (i32.const 0) (i64.const 0x1fffffff) (i64.const 0x1fffffff) (i32.const 0) (i32.const 0x500)))
        (if (local.get $errno) (then (return (local.get $errno))))
        (local.set $fd (i32.load (i32.const 0x500)))
        (i32.store (i32.const 0x100) (i32.const 0x900))
        (i32.store (i32.const 0x104) (i32.const 64))
        (local.set $errno (call $fd_read (local.get $fd) (i32.const 0x100) (i32.const 1) (i32.const 0x108)))
        (if (local.get $errno) (then (return (local.get $errno))))
        (local.set $errno (call $write (i32.const 1) (i32.const 0x900) (i32.load (i32.const 0x108))))
        (if (local.get $errno) (then (return (local.get $errno))))
        (call $fd_close (local.get $fd)))
    (func (export "prestat") (result i32)
        (local $errno i32)
        (local.set $errno (call $fd_prestat_get (i32.const 3) (i32.const 0x600)))
        (if (local.get $errno) (then (return (local.get $errno))))
        (local.set $errno (call $fd_prestat_dir_name (i32.const 3) (i32.const 0x610) (i32.load (i32.const 0x604))))
        (if (local.get $errno) (then (return (local.get $errno))))
        (call $write (i32.const 1) (i32.const 0x610) (i32.load (i32.const 0x604))))
    (func (export "prestat4") (result i32)
        (call $fd_prestat_get (i32.const 4) (i32.const 0x600)))
"#;

fn cat(g: &mut Guest, path: &str) -> Result<i32> {
    g.write_memory(0x800, path.as_bytes());
    g.call_with("cat", path.len() as i32, 0)
}

#[test]
fn path_open_inside_preopen_and_escapes_refused() -> Result<()> {
    let root = tempfile::tempdir()?;
    let inside = root.path().join("sandbox");
    std::fs::create_dir(&inside)?;
    std::fs::create_dir(inside.join("sub"))?;
    std::fs::write(inside.join("hello.txt"), "hello from the sandbox\n")?;
    std::fs::write(inside.join("sub/nested.txt"), "nested\n")?;
    std::fs::write(root.path().join("secret.txt"), "SECRET\n")?;
    #[cfg(unix)]
    std::os::unix::fs::symlink(root.path().join("secret.txt"), inside.join("link"))?;

    let mut g = Guest::new(
        CAT,
        WasiCtxBuilder::new().preopened_dir(&inside, "/sandbox", FsPerms::ReadWrite)?,
    )?;
    assert_eq!(g.call("prestat")?, ESUCCESS);
    assert_eq!(g.call("prestat4")?, EBADF);
    assert_eq!(cat(&mut g, "hello.txt")?, ESUCCESS);
    assert_eq!(cat(&mut g, "sub/../sub/nested.txt")?, ESUCCESS);
    assert_eq!(cat(&mut g, "missing.txt")?, ENOENT);
    for escape in [
        "../secret.txt",
        "sub/../../secret.txt",
        "/etc/passwd",
        "..",
        #[cfg(unix)]
        "link",
    ] {
        let errno = cat(&mut g, escape)?;
        assert!(
            [EPERM, ENOTCAPABLE].contains(&errno),
            "opening {escape:?} gave errno {errno}"
        );
    }
    let out = String::from_utf8(g.stdout())?;
    assert_eq!(out, "/sandboxhello from the sandbox\nnested\n");
    Ok(())
}

#[test]
fn no_preopen_no_filesystem() -> Result<()> {
    let mut g = Guest::new(CAT, &mut WasiCtxBuilder::new())?;
    assert_eq!(cat(&mut g, "hello.txt")?, EBADF);
    assert_eq!(g.call("prestat")?, EBADF);
    Ok(())
}

#[test]
fn read_only_preopen_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let err = WasiCtxBuilder::new()
        .preopened_dir(dir.path(), ".", FsPerms::ReadOnly)
        .err()
        .expect("read-only preopens are not supported");
    assert!(err.to_string().contains("read-only"), "{err}");
    let err = WasiCtxBuilder::new()
        .preopened_dir(dir.path().join("missing"), ".", FsPerms::ReadWrite)
        .err()
        .expect("missing directory");
    assert!(
        err.to_string().contains("failed to open directory"),
        "{err}"
    );
}

#[test]
fn memoryless_guest_can_exit() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
            (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
            (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
            (func (export "write") (result i32)
                (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 0)))
            (func (export "exit") (call $exit (i32.const 5))))"#,
    )?;
    let mut linker: Linker<WasiCtx> = Linker::new(&engine);
    wasmtime_mmu_wasi::add_to_linker(&mut linker, |cx| cx)?;
    let mut store = Store::new(&engine, WasiCtxBuilder::new().build());
    let instance = linker.instantiate(&mut store, &module)?;
    let write = instance.get_typed_func::<(), i32>(&mut store, "write")?;
    // Without a memory every pointer is out of bounds.
    assert_eq!(write.call(&mut store, ())?, EFAULT);
    let exit = instance.get_typed_func::<(), ()>(&mut store, "exit")?;
    let err = exit.call(&mut store, ()).unwrap_err();
    assert_eq!(err.downcast_ref::<I32Exit>().map(|e| e.0), Some(5));
    Ok(())
}

#[test]
fn preview0_is_linked_too() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
            (import "wasi_unstable" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
            (memory (export "memory") 1)
            (data (i32.const 16) "p0\n")
            (func (export "run") (result i32)
                (i32.store (i32.const 0) (i32.const 16))
                (i32.store (i32.const 4) (i32.const 3))
                (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))"#,
    )?;
    let mut linker: Linker<WasiCtx> = Linker::new(&engine);
    wasmtime_mmu_wasi::add_to_linker(&mut linker, |cx| cx)?;
    let stdout = WritePipe::new_in_memory();
    let mut store = Store::new(
        &engine,
        WasiCtxBuilder::new().stdout(stdout.clone()).build(),
    );
    let instance = linker.instantiate(&mut store, &module)?;
    let run = instance.get_typed_func::<(), i32>(&mut store, "run")?;
    assert_eq!(run.call(&mut store, ())?, ESUCCESS);
    drop(store);
    let out = stdout
        .try_into_inner()
        .map_err(|_| ())
        .unwrap()
        .into_inner();
    assert_eq!(out, b"p0\n");
    Ok(())
}

#[test]
fn p1_spelling_and_embedder_data() -> Result<()> {
    // The store data is an embedder struct holding the context.
    struct Host {
        wasi: wasmtime_mmu_wasi::p1::WasiP1Ctx,
        calls: u32,
    }
    let engine = Engine::default();
    let module = Module::new(
        &engine,
        r#"(module
            (import "wasi_snapshot_preview1" "sched_yield" (func $yield (result i32)))
            (import "host" "count" (func $count))
            (func (export "run") (result i32) (call $count) (call $yield)))"#,
    )?;
    let mut linker: Linker<Host> = Linker::new(&engine);
    wasmtime_mmu_wasi::p1::add_to_linker_sync(&mut linker, |h: &mut Host| &mut h.wasi)?;
    linker.func_wrap("host", "count", |mut c: wasmtime::Caller<'_, Host>| {
        c.data_mut().calls += 1;
    })?;
    let mut store = Store::new(
        &engine,
        Host {
            wasi: WasiCtxBuilder::new().build_p1(),
            calls: 0,
        },
    );
    let instance = linker.instantiate(&mut store, &module)?;
    let run = instance.get_typed_func::<(), i32>(&mut store, "run")?;
    assert_eq!(run.call(&mut store, ())?, ESUCCESS);
    assert_eq!(store.data().calls, 1);
    Ok(())
}
