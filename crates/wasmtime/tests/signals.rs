//! Faults that are not Wasm traps must reach whatever handled them before
//! the runtime installed its signal handler. Each test re-runs this test
//! binary in a child process (only that test, marked by an environment
//! variable) and checks how the child ends.

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};
use wasmtime::*;

const CHILD: &str = "WASMTIME_SIGNAL_TEST_CHILD";

fn is_child(name: &str) -> bool {
    std::env::var(CHILD).as_deref() == Ok(name)
}

fn run_child(name: &str) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(CHILD, name)
        .output()
        .unwrap()
}

extern "C" fn exit_42(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: `_exit` is async-signal-safe.
    unsafe { libc::_exit(42) }
}

extern "C" fn exit_43(_: libc::c_int) {
    // SAFETY: `_exit` is async-signal-safe.
    unsafe { libc::_exit(43) }
}

fn install(signal: libc::c_int, handler: usize, siginfo: bool) {
    // SAFETY: installing a valid handler for a synchronous signal.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler;
        action.sa_flags = if siginfo { libc::SA_SIGINFO } else { 0 };
        libc::sigemptyset(&mut action.sa_mask);
        assert_eq!(libc::sigaction(signal, &action, std::ptr::null_mut()), 0);
    }
}

fn segfault() {
    // SAFETY: deliberately faulting; the process ends in the handler.
    unsafe { std::ptr::read_volatile(16 as *const usize) };
}

#[test]
fn chains_to_siginfo_handler() {
    if is_child("chains_to_siginfo_handler") {
        install(libc::SIGSEGV, exit_42 as *const () as usize, true);
        let _engine = Engine::default();
        segfault();
        return;
    }
    let out = run_child("chains_to_siginfo_handler");
    assert_eq!(out.status.code(), Some(42), "{out:?}");
}

#[test]
fn chains_to_plain_handler() {
    if is_child("chains_to_plain_handler") {
        install(libc::SIGSEGV, exit_43 as *const () as usize, false);
        let _engine = Engine::default();
        segfault();
        return;
    }
    let out = run_child("chains_to_plain_handler");
    assert_eq!(out.status.code(), Some(43), "{out:?}");
}

#[test]
fn default_action_still_kills() {
    if is_child("default_action_still_kills") {
        install(libc::SIGSEGV, libc::SIG_DFL, false);
        install(libc::SIGILL, libc::SIG_DFL, false);
        let _engine = Engine::default();
        segfault();
        return;
    }
    let out = run_child("default_action_still_kills");
    assert_eq!(out.status.signal(), Some(libc::SIGSEGV), "{out:?}");
}

fn illegal_instruction() {
    // SAFETY: deliberately raising SIGILL outside of Wasm; the process ends
    // in the handler or by the default action.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::asm!("ud2")
    };
    // SAFETY: as on x86_64: the fault ends the process.
    #[cfg(target_arch = "aarch64")]
    unsafe {
        std::arch::asm!("udf #0")
    };
}

#[test]
fn default_action_for_sigill() {
    if is_child("default_action_for_sigill") {
        install(libc::SIGILL, libc::SIG_DFL, false);
        let _engine = Engine::default();
        illegal_instruction();
        return;
    }
    let out = run_child("default_action_for_sigill");
    assert_eq!(out.status.signal(), Some(libc::SIGILL), "{out:?}");
}

/// `SIG_DFL` installed together with `SA_SIGINFO` is still the default
/// action, not a handler at address 0: calling it would fault with
/// `SIGSEGV`, and the process would die of the wrong signal.
#[test]
fn default_action_set_with_siginfo_flag() {
    let name = "default_action_set_with_siginfo_flag";
    if is_child(name) {
        install(libc::SIGILL, libc::SIG_DFL, true);
        install(libc::SIGSEGV, libc::SIG_DFL, false);
        let _engine = Engine::default();
        illegal_instruction();
        return;
    }
    let out = run_child(name);
    assert_eq!(out.status.signal(), Some(libc::SIGILL), "{out:?}");
}

#[test]
fn fault_in_host_function_called_from_wasm_is_not_a_trap() {
    let name = "fault_in_host_function_called_from_wasm_is_not_a_trap";
    if is_child(name) {
        install(libc::SIGSEGV, exit_42 as *const () as usize, true);
        let engine = Engine::default();
        let module = Module::new(
            &engine,
            r#"(module (import "" "f" (func $f)) (func (export "run") call $f))"#,
        )
        .unwrap();
        let mut store = Store::new(&engine, ());
        let f = Func::wrap(&mut store, segfault);
        let i = Instance::new(&mut store, &module, &[f.into()]).unwrap();
        let run = i.get_typed_func::<(), ()>(&mut store, "run").unwrap();
        let _ = run.call(&mut store, ());
        // SAFETY: reporting that the fault was swallowed.
        unsafe { libc::_exit(1) };
    }
    let out = run_child(name);
    assert_eq!(out.status.code(), Some(42), "{out:?}");
}

#[test]
fn wasm_traps_on_a_thread_without_alternate_stack() -> Result<()> {
    let engine = Engine::default();
    let module = Module::new(&engine, r#"(module (func (export "boom") unreachable))"#)?;
    std::thread::spawn(move || -> Result<()> {
        // SAFETY: disabling this thread's alternate signal stack; the
        // runtime installs its own on first entry into Wasm.
        unsafe {
            let disable = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            libc::sigaltstack(&disable, std::ptr::null_mut());
        }
        let mut store = Store::new(&engine, ());
        let i = Instance::new(&mut store, &module, &[])?;
        let boom = i.get_typed_func::<(), ()>(&mut store, "boom")?;
        let err = boom.call(&mut store, ()).unwrap_err();
        assert_eq!(
            err.downcast_ref::<Trap>(),
            Some(&Trap::UnreachableCodeReached)
        );
        Ok(())
    })
    .join()
    .unwrap()
}
