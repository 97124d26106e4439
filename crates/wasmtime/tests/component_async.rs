//! Async component calls on fibers: `func_wrap_async` and `func_new_async`
//! host functions whose futures are pending, `instantiate_async`,
//! `Func::call_async` and `TypedFunc::call_async`, and the errors of the
//! synchronous entry points on a store that needs async ones.

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};
use wasmtime::component::{Component, Linker, Val};
use wasmtime::{Engine, Store};

/// Polls `f` until it is ready with a waker that does nothing; returns the
/// output and how often it was pending.
fn run_counting<F: Future>(f: F) -> (F::Output, usize) {
    let mut f = pin!(f);
    let mut pending = 0;
    loop {
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => return (v, pending),
            Poll::Pending => pending += 1,
        }
    }
}

/// A future that is pending `n` times (waking itself) before it is ready.
struct PendingTimes(usize);

impl Future for PendingTimes {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 == 0 {
            return Poll::Ready(());
        }
        self.0 -= 1;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

/// `shout(s)` passes `s` to the host's `upper` and returns its result;
/// `twice(n)` calls the host's `add-one` twice.
const GUEST: &str = r#"
(component
  (import "upper" (func $upper (param "s" string) (result string)))
  (import "add-one" (func $add-one (param "n" u32) (result u32)))
  (core module $libc
    (memory (export "memory") 1)
    (global $next (mut i32) (i32.const 1024))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $ptr i32)
      (local.set $ptr (i32.and
        (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get 2))))
      (global.set $next (i32.add (local.get $ptr) (local.get 3)))
      (local.get $ptr)))
  (core instance $libc (instantiate $libc))
  (core func $upper (canon lower (func $upper)
    (memory $libc "memory") (realloc (func $libc "realloc"))))
  (core func $add-one (canon lower (func $add-one)))
  (core module $main
    (import "host" "upper" (func $upper (param i32 i32 i32)))
    (import "host" "add-one" (func $add-one (param i32) (result i32)))
    (func (export "shout") (param i32 i32) (result i32)
      (call $upper (local.get 0) (local.get 1) (i32.const 16))
      (i32.const 16))
    (func (export "twice") (param i32) (result i32)
      (call $add-one (call $add-one (local.get 0)))))
  (core instance $main (instantiate $main
    (with "host" (instance
      (export "upper" (func $upper))
      (export "add-one" (func $add-one))))))
  (func (export "shout") (param "s" string) (result string)
    (canon lift (core func $main "shout")
      (memory $libc "memory") (realloc (func $libc "realloc"))))
  (func (export "twice") (param "n" u32) (result u32)
    (canon lift (core func $main "twice")))
)
"#;

/// A linker whose `upper` is a typed async host function and whose
/// `add-one` is a dynamic one; each is pending three times per call and
/// counts its calls in the store.
fn async_linker(engine: &Engine) -> Linker<u32> {
    let mut linker = Linker::<u32>::new(engine);
    let mut root = linker.root();
    root.func_wrap_async("upper", |mut store, (s,): (String,)| {
        Box::new(async move {
            PendingTimes(3).await;
            *store.data_mut() += 1;
            Ok((s.to_uppercase(),))
        })
    })
    .unwrap();
    root.func_new_async("add-one", |mut store, _ty, args, results| {
        Box::new(async move {
            PendingTimes(3).await;
            *store.data_mut() += 1;
            let Val::U32(n) = args[0] else {
                wasmtime::bail!("expected a u32, got {:?}", args[0]);
            };
            results[0] = Val::U32(n + 1);
            Ok(())
        })
    })
    .unwrap();
    linker
}

#[test]
fn async_host_functions_suspend_the_call() -> wasmtime::Result<()> {
    let engine = Engine::default();
    let component = Component::new(&engine, GUEST)?;
    let linker = async_linker(&engine);
    let mut store = Store::new(&engine, 0);
    let (instance, _) = run_counting(linker.instantiate_async(&mut store, &component));
    let instance = instance?;

    let shout = instance.get_typed_func::<(&str,), (String,)>(&mut store, "shout")?;
    let (result, pending) = run_counting(shout.call_async(&mut store, ("quiet",)));
    assert_eq!(result?.0, "QUIET");
    assert_eq!(pending, 3, "the host's future was pending three times");

    let twice = instance
        .get_func(&mut store, "twice")
        .expect("export `twice`");
    let mut results = [Val::Bool(false)];
    let (result, pending) =
        run_counting(twice.call_async(&mut store, &[Val::U32(40)], &mut results));
    result?;
    assert_eq!(results[0], Val::U32(42));
    assert_eq!(pending, 6, "two host calls, three pendings each");
    assert_eq!(*store.data(), 3);
    Ok(())
}

#[test]
fn sync_entry_points_refuse_a_store_that_needs_async() -> wasmtime::Result<()> {
    let engine = Engine::default();
    let component = Component::new(&engine, GUEST)?;
    let linker = async_linker(&engine);

    let mut store = Store::new(&engine, 0);
    let Err(error) = linker.instantiate(&mut store, &component) else {
        panic!("a component with async imports needs instantiate_async");
    };
    assert!(format!("{error:#}").contains("`*_async`"), "{error:#}");

    let mut store = Store::new(&engine, 0);
    let instance = run_counting(linker.instantiate_async(&mut store, &component)).0?;
    let twice = instance.get_typed_func::<(u32,), (u32,)>(&mut store, "twice")?;
    let error = twice
        .call(&mut store, (1,))
        .expect_err("a synchronous call on a store that needs async ones");
    assert!(format!("{error:#}").contains("`*_async`"), "{error:#}");
    assert_eq!(*store.data(), 0, "no host function ran");
    Ok(())
}

#[test]
fn async_calls_work_without_async_imports() -> wasmtime::Result<()> {
    let engine = Engine::default();
    let component = Component::new(&engine, GUEST)?;
    let mut linker = Linker::<()>::new(&engine);
    linker
        .root()
        .func_wrap("upper", |_, (s,): (String,)| Ok((s.to_uppercase(),)))?;
    linker
        .root()
        .func_wrap("add-one", |_, (n,): (u32,)| Ok((n + 1,)))?;
    let mut store = Store::new(&engine, ());
    let instance = run_counting(linker.instantiate_async(&mut store, &component)).0?;
    let shout = instance.get_typed_func::<(&str,), (String,)>(&mut store, "shout")?;
    let (result, pending) = run_counting(shout.call_async(&mut store, ("abc",)));
    assert_eq!(result?.0, "ABC");
    assert_eq!(pending, 0);
    // The same store still takes synchronous calls.
    assert_eq!(shout.call(&mut store, ("def",))?.0, "DEF");
    Ok(())
}

#[test]
fn a_cancelled_call_poisons_the_store_for_components() -> wasmtime::Result<()> {
    let engine = Engine::default();
    let component = Component::new(&engine, GUEST)?;
    let linker = async_linker(&engine);
    let mut store = Store::new(&engine, 0);
    let instance = run_counting(linker.instantiate_async(&mut store, &component)).0?;
    let twice = instance.get_typed_func::<(u32,), (u32,)>(&mut store, "twice")?;
    {
        let mut call = pin!(twice.call_async(&mut store, (1,)));
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(call.as_mut().poll(&mut cx).is_pending());
    }
    // The cancelled call unwound like a trap: as upstream, no component
    // instance of the store may be entered again.
    let error = run_counting(twice.call_async(&mut store, (5,)))
        .0
        .expect_err("a call after a cancelled one");
    assert_eq!(
        error.downcast_ref::<wasmtime::Trap>(),
        Some(&wasmtime::Trap::CannotEnterComponent),
        "{error:#}"
    );
    // Another store is not affected.
    let mut store = Store::new(&engine, 0);
    let instance = run_counting(linker.instantiate_async(&mut store, &component)).0?;
    let twice = instance.get_typed_func::<(u32,), (u32,)>(&mut store, "twice")?;
    assert_eq!(run_counting(twice.call_async(&mut store, (5,))).0?.0, 7);
    Ok(())
}
