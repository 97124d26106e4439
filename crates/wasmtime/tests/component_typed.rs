//! Typed calls (`TypedFunc`, `func_wrap`) of every built-in Rust type, both
//! ways through a guest, flat and through memory, in each string encoding;
//! and what typed lifting does with values a guest should not produce.

use wasmtime::component::{Component, ComponentNamedList, Lift, Linker, Lower};
use wasmtime::{Engine, Store};

/// A component with one export `f: func(x: T) -> T` whose core code passes
/// its core arguments to the lowered host import `h` of the same type and
/// returns what `h` returned: a value travels host → guest (lowered by
/// `TypedFunc::call`), guest → host (lifted for `func_wrap`), back
/// (lowered by the host function) and out (lifted by `TypedFunc::call`).
///
/// `flat` is `T`'s flattening as core types; past 16 the arguments travel
/// through one pointer, and past one the results through a return area.
fn forwarder(wit: &str, flat: &[&str], encoding: &str) -> String {
    let params = if flat.len() > 16 {
        vec!["i32"]
    } else {
        flat.to_vec()
    };
    let param_list = params.join(" ");
    let forward: String = (0..params.len())
        .map(|i| format!("(local.get {i}) "))
        .collect();
    let (import_ty, export_ty, body) = if flat.len() > 1 {
        (
            format!("(param {param_list} i32)"),
            format!("(param {param_list}) (result i32)"),
            format!("(call $h {forward} (i32.const 8)) (i32.const 8)"),
        )
    } else {
        let result = flat
            .first()
            .map(|r| format!("(result {r})"))
            .unwrap_or_default();
        (
            format!("(param {param_list}) {result}"),
            format!("(param {param_list}) {result}"),
            format!("(call $h {forward})"),
        )
    };
    format!(
        r#"
(component
  (type $t {wit})
  (import "h" (func $h (param "x" $t) (result $t)))
  (core module $libc
    (memory (export "memory") 1)
    (global $next (mut i32) (i32.const 1024))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $ptr i32)
      (local.set $ptr (i32.and
        (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get 2))))
      (global.set $next (i32.add (local.get $ptr) (local.get 3)))
      (if (i32.gt_u (global.get $next) (i32.mul (memory.size) (i32.const 65536)))
        (then (drop (memory.grow (i32.const 4)))))
      ;; a reallocation keeps the old bytes, as realloc must
      (if (local.get 0)
        (then (memory.copy (local.get $ptr) (local.get 0)
          (select (local.get 1) (local.get 3) (i32.lt_u (local.get 1) (local.get 3))))))
      (local.get $ptr)))
  (core instance $libc (instantiate $libc))
  (core func $h (canon lower (func $h) (memory $libc "memory")
    (realloc (func $libc "realloc")) string-encoding={encoding}))
  (core module $main
    (import "libc" "memory" (memory 1))
    (import "host" "h" (func $h {import_ty}))
    (func (export "f") {export_ty} {body}))
  (core instance $main (instantiate $main
    (with "libc" (instance $libc))
    (with "host" (instance (export "h" (func $h))))))
  (func (export "f") (param "x" $t) (result $t)
    (canon lift (core func $main "f") (memory $libc "memory")
      (realloc (func $libc "realloc")) string-encoding={encoding}))
)"#
    )
}

/// Sends `value` through [`forwarder`] as `(T,)` and checks that it comes
/// back equal and that the host saw it equal.
fn round_trip<T>(wit: &str, flat: &[&str], value: T)
where
    T: Lift + Lower + PartialEq + std::fmt::Debug + Clone + Send + Sync + 'static,
    (T,): ComponentNamedList + Lift + Lower,
{
    for encoding in ["utf8", "utf16", "latin1+utf16"] {
        let engine = Engine::default();
        let text = forwarder(wit, flat, encoding);
        let component = Component::new(&engine, &text)
            .unwrap_or_else(|e| panic!("{wit} ({encoding}): {e:?}\n{text}"));
        let mut linker = Linker::<Vec<T>>::new(&engine);
        linker
            .root()
            .func_wrap("h", |mut store, (x,): (T,)| {
                store.data_mut().push(x.clone());
                Ok((x,))
            })
            .unwrap();
        let mut store = Store::new(&engine, Vec::new());
        let instance = linker.instantiate(&mut store, &component).unwrap();
        let f = instance
            .get_typed_func::<(T,), (T,)>(&mut store, "f")
            .unwrap_or_else(|e| panic!("{wit}: {e:?}"));
        let (back,) = f
            .call(&mut store, (value.clone(),))
            .unwrap_or_else(|e| panic!("{wit} ({encoding}): {e:?}"));
        assert_eq!(back, value, "{wit} ({encoding})");
        assert_eq!(
            store.data()[..],
            *std::slice::from_ref(&value),
            "{wit} ({encoding})"
        );
    }
}

#[test]
fn numbers_bools_and_chars() {
    round_trip("u8", &["i32"], 0xfeu8);
    round_trip("s8", &["i32"], -100i8);
    round_trip("u16", &["i32"], 0xfedcu16);
    round_trip("s16", &["i32"], -30000i16);
    round_trip("u32", &["i32"], 0xfedc_ba98u32);
    round_trip("s32", &["i32"], i32::MIN);
    round_trip("u64", &["i64"], u64::MAX - 5);
    round_trip("s64", &["i64"], i64::MIN + 5);
    round_trip("f32", &["f32"], -1.5f32);
    round_trip("f64", &["f64"], 6.25e100f64);
    round_trip("bool", &["i32"], true);
    round_trip("bool", &["i32"], false);
    round_trip("char", &["i32"], '🦀');
}

#[test]
fn nan_payloads_keep_their_bits() {
    for bits in [0x7fc0_0001u32, 0xffa0_0000] {
        let engine = Engine::default();
        let component = Component::new(&engine, forwarder("f32", &["f32"], "utf8")).unwrap();
        let mut linker = Linker::<()>::new(&engine);
        linker
            .root()
            .func_wrap("h", |_, (x,): (f32,)| Ok((x,)))
            .unwrap();
        let mut store = Store::new(&engine, ());
        let instance = linker.instantiate(&mut store, &component).unwrap();
        let f = instance
            .get_typed_func::<(f32,), (f32,)>(&mut store, "f")
            .unwrap();
        let (back,) = f.call(&mut store, (f32::from_bits(bits),)).unwrap();
        assert_eq!(back.to_bits(), bits);
    }
}

#[test]
fn strings_in_every_encoding() {
    for s in ["", "plain ascii", "latin1: café", "beyond: 日本語 and 🦀"] {
        round_trip("string", &["i32", "i32"], s.to_string());
    }
}

#[test]
fn lists() {
    round_trip(
        "(list u8)",
        &["i32", "i32"],
        (0..=255u8).collect::<Vec<_>>(),
    );
    round_trip("(list u8)", &["i32", "i32"], Vec::<u8>::new());
    round_trip(
        "(list s64)",
        &["i32", "i32"],
        vec![i64::MIN, -1, 0, 1, i64::MAX],
    );
    round_trip("(list f64)", &["i32", "i32"], vec![0.5f64, -2.0, 1e300]);
    round_trip(
        "(list string)",
        &["i32", "i32"],
        vec!["a".to_string(), String::new(), "日本".to_string()],
    );
    round_trip(
        "(list (list u16))",
        &["i32", "i32"],
        vec![vec![1u16, 2], vec![], vec![0xffff]],
    );
    round_trip("(list bool)", &["i32", "i32"], vec![true, false, true]);
    round_trip("(list char)", &["i32", "i32"], vec!['a', 'é', '🦀']);
}

#[test]
fn options_and_results() {
    round_trip("(option u64)", &["i32", "i64"], Some(7u64));
    round_trip("(option u64)", &["i32", "i64"], None::<u64>);
    round_trip("(option f32)", &["i32", "f32"], Some(2.5f32));
    round_trip(
        "(option (option string))",
        &["i32", "i32", "i32", "i32"],
        Some(Some("x".to_string())),
    );
    round_trip(
        "(option (option string))",
        &["i32", "i32", "i32", "i32"],
        Some(None::<String>),
    );
    // Cases of different shapes share joined slots: f64 and u32 join in
    // an i64 slot.
    round_trip(
        "(result f64 (error u32))",
        &["i32", "i64"],
        Ok::<f64, u32>(-0.75),
    );
    round_trip(
        "(result f64 (error u32))",
        &["i32", "i64"],
        Err::<f64, u32>(0xdead_beef),
    );
    round_trip(
        "(result string (error u8))",
        &["i32", "i32", "i32"],
        Err::<String, u8>(9),
    );
    round_trip(
        "(result (error string))",
        &["i32", "i32", "i32"],
        Ok::<(), String>(()),
    );
    round_trip(
        "(result (error string))",
        &["i32", "i32", "i32"],
        Err::<(), String>("no".to_string()),
    );
    round_trip("(result)", &["i32"], Err::<(), ()>(()));
    round_trip("(result)", &["i32"], Ok::<(), ()>(()));
}

#[test]
fn tuples_flat_and_through_memory() {
    round_trip(
        "(tuple u8 string f64)",
        &["i32", "i32", "i32", "f64"],
        (3u8, "three".to_string(), 3.5f64),
    );
    // 17 flat values: arguments through a pointer, results through a
    // return area.
    let wide: (u32, u32, u32, u32, u32, u32, u32, u32, u32, u32, u32, u32) =
        (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
    round_trip(
        "(tuple (tuple u32 u32 u32 u32 u32 u32 u32 u32 u32 u32 u32 u32) (tuple u32 u32 u32 u32) string)",
        &["i32"; 18],
        (wide, (13u32, 14u32, 15u32, 16u32), "tail".to_string()),
    );
}

/// A component whose typed exports return values no honest guest would:
/// each export's core function returns fixed bits from a data segment.
const LIAR: &str = r#"
(component
  (core module $m
    (memory (export "memory") 1)
    ;; at 16: a string pointing past the end of memory
    (data (i32.const 16) "\f8\ff\00\00\10\00\00\00")
    ;; at 32: a string of invalid UTF-8 bytes at 64
    (data (i32.const 32) "\40\00\00\00\02\00\00\00")
    (data (i32.const 64) "\c3\28")
    ;; at 40: a list of u32 at a misaligned address
    (data (i32.const 40) "\41\00\00\00\01\00\00\00")
    ;; at 48: an option whose discriminant is 2
    (data (i32.const 48) "\02\00\00\00\00\00\00\00")
    ;; at 56: a result whose discriminant is 7
    (data (i32.const 56) "\07\00")
    (func (export "realloc") (param i32 i32 i32 i32) (result i32) (i32.const 512))
    (func (export "bad-pointer") (result i32) (i32.const 16))
    (func (export "bad-utf8") (result i32) (i32.const 32))
    (func (export "misaligned") (result i32) (i32.const 40))
    (func (export "bad-option") (result i32) (i32.const 48))
    (func (export "bad-char") (result i32) (i32.const 0xd800))
    (func (export "bad-discriminant") (result i32) (i32.const 56))
    (func (export "return-area-out-of-bounds") (result i32) (i32.const 0xfffffff0)))
  (core instance $i (instantiate $m))
  (func (export "bad-pointer") (result string)
    (canon lift (core func $i "bad-pointer") (memory $i "memory")))
  (func (export "bad-utf8") (result string)
    (canon lift (core func $i "bad-utf8") (memory $i "memory")))
  (func (export "misaligned") (result (list u32))
    (canon lift (core func $i "misaligned") (memory $i "memory")))
  (func (export "bad-option") (result (option u64))
    (canon lift (core func $i "bad-option") (memory $i "memory")))
  (func (export "bad-char") (result char)
    (canon lift (core func $i "bad-char")))
  (func (export "bad-discriminant") (result (result u8 (error u8)))
    (canon lift (core func $i "bad-discriminant") (memory $i "memory")))
  (func (export "return-area-out-of-bounds") (result (tuple u64 u64))
    (canon lift (core func $i "return-area-out-of-bounds") (memory $i "memory")))
)
"#;

fn liar_error<R>(name: &str) -> String
where
    R: ComponentNamedList + Lift,
{
    let engine = Engine::default();
    let component = Component::new(&engine, LIAR).unwrap();
    let mut store = Store::new(&engine, ());
    let instance = Linker::new(&engine)
        .instantiate(&mut store, &component)
        .unwrap();
    let f = instance
        .get_typed_func::<(), R>(&mut store, name)
        .unwrap_or_else(|e| panic!("{name}: {e:?}"));
    match f.call(&mut store, ()) {
        Ok(_) => panic!("{name}: a bad value was accepted"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn bad_values_from_a_guest_are_errors() {
    let cases = [
        (
            liar_error::<(String,)>("bad-pointer"),
            "string pointer/length out of bounds of memory",
        ),
        (liar_error::<(String,)>("bad-utf8"), "invalid utf-8"),
        (
            liar_error::<(Vec<u32>,)>("misaligned"),
            "list pointer is not aligned",
        ),
        (
            liar_error::<(Option<u64>,)>("bad-option"),
            "discriminant 2 out of range",
        ),
        (
            liar_error::<(char,)>("bad-char"),
            "converted integer out of range for `char`",
        ),
        (
            liar_error::<(Result<u8, u8>,)>("bad-discriminant"),
            "discriminant 7 out of range",
        ),
        (
            liar_error::<((u64, u64),)>("return-area-out-of-bounds"),
            "pointer out of bounds of memory",
        ),
    ];
    for (error, expected) in cases {
        assert!(
            error.contains(expected),
            "expected an error containing {expected:?}, got {error:?}"
        );
    }
}

#[test]
fn typed_signatures_are_checked_once() {
    let engine = Engine::default();
    let component =
        Component::new(&engine, forwarder("(list u8)", &["i32", "i32"], "utf8")).unwrap();
    let mut linker = Linker::<()>::new(&engine);
    // A host function of another type is not linked.
    linker
        .root()
        .func_wrap("h", |_, (x,): (Vec<u16>,)| Ok((x,)))
        .unwrap();
    let Err(error) = linker.instantiate(&mut Store::new(&engine, ()), &component) else {
        panic!("a mistyped host function is refused");
    };
    assert!(format!("{error:#}").contains("type mismatch"), "{error:#}");

    let mut linker = Linker::<()>::new(&engine);
    linker
        .root()
        .func_wrap("h", |_, (x,): (Vec<u8>,)| Ok((x,)))
        .unwrap();
    let mut store = Store::new(&engine, ());
    let instance = linker.instantiate(&mut store, &component).unwrap();
    for error in [
        instance
            .get_typed_func::<(Vec<u16>,), (Vec<u8>,)>(&mut store, "f")
            .err(),
        instance
            .get_typed_func::<(Vec<u8>,), (String,)>(&mut store, "f")
            .err(),
        instance
            .get_typed_func::<(Vec<u8>, u32), (Vec<u8>,)>(&mut store, "f")
            .err(),
    ] {
        let error = error.expect("a mistyped TypedFunc is refused");
        assert!(format!("{error:#}").contains("type mismatch"), "{error:#}");
    }
}

/// A component whose exports call typed host imports with arguments no
/// honest guest would pass.
const BAD_CALLER: &str = r#"
(component
  (import "take-string" (func $take-string (param "s" string)))
  (import "take-list" (func $take-list (param "l" (list u64))))
  (import "take-option" (func $take-option (param "o" (option u8))))
  (import "take-char" (func $take-char (param "c" char)))
  (import "take-many" (func $take-many (param "t" (tuple
    (tuple u32 u32 u32 u32 u32 u32 u32 u32 u32 u32 u32 u32) (tuple u32 u32 u32 u32) u32))))
  (core module $libc (memory (export "memory") 1)
    (data (i32.const 8) "\ff\fe"))
  (core instance $libc (instantiate $libc))
  (core func $take-string (canon lower (func $take-string) (memory $libc "memory")))
  (core func $take-list (canon lower (func $take-list) (memory $libc "memory")))
  (core func $take-option (canon lower (func $take-option)))
  (core func $take-char (canon lower (func $take-char)))
  (core func $take-many (canon lower (func $take-many) (memory $libc "memory")))
  (core module $main
    (import "host" "take-string" (func $take-string (param i32 i32)))
    (import "host" "take-list" (func $take-list (param i32 i32)))
    (import "host" "take-option" (func $take-option (param i32 i32)))
    (import "host" "take-char" (func $take-char (param i32)))
    (import "host" "take-many" (func $take-many (param i32)))
    (func (export "string-out-of-bounds") (call $take-string (i32.const 0xfff8) (i32.const 16)))
    (func (export "string-not-utf8") (call $take-string (i32.const 8) (i32.const 2)))
    (func (export "list-out-of-bounds") (call $take-list (i32.const 8) (i32.const 0x2000_0000)))
    (func (export "list-misaligned") (call $take-list (i32.const 4) (i32.const 1)))
    (func (export "option-discriminant") (call $take-option (i32.const 3) (i32.const 0)))
    (func (export "char-surrogate") (call $take-char (i32.const 0xdfff)))
    (func (export "args-misaligned") (call $take-many (i32.const 2)))
    (func (export "args-out-of-bounds") (call $take-many (i32.const 0xfffc))))
  (core instance $main (instantiate $main (with "host" (instance
    (export "take-string" (func $take-string))
    (export "take-list" (func $take-list))
    (export "take-option" (func $take-option))
    (export "take-char" (func $take-char))
    (export "take-many" (func $take-many))))))
  (func (export "string-out-of-bounds") (canon lift (core func $main "string-out-of-bounds")))
  (func (export "string-not-utf8") (canon lift (core func $main "string-not-utf8")))
  (func (export "list-out-of-bounds") (canon lift (core func $main "list-out-of-bounds")))
  (func (export "list-misaligned") (canon lift (core func $main "list-misaligned")))
  (func (export "option-discriminant") (canon lift (core func $main "option-discriminant")))
  (func (export "char-surrogate") (canon lift (core func $main "char-surrogate")))
  (func (export "args-misaligned") (canon lift (core func $main "args-misaligned")))
  (func (export "args-out-of-bounds") (canon lift (core func $main "args-out-of-bounds")))
)
"#;

#[test]
fn bad_arguments_to_typed_host_functions_are_errors() {
    type Many = (
        (u32, u32, u32, u32, u32, u32, u32, u32, u32, u32, u32, u32),
        (u32, u32, u32, u32),
        u32,
    );
    let engine = Engine::default();
    let component = Component::new(&engine, BAD_CALLER).unwrap();
    let mut linker = Linker::<u32>::new(&engine);
    let mut root = linker.root();
    root.func_wrap("take-string", |mut s, (_,): (String,)| {
        *s.data_mut() += 1;
        Ok(())
    })
    .unwrap();
    root.func_wrap("take-list", |mut s, (_,): (Vec<u64>,)| {
        *s.data_mut() += 1;
        Ok(())
    })
    .unwrap();
    root.func_wrap("take-option", |mut s, (_,): (Option<u8>,)| {
        *s.data_mut() += 1;
        Ok(())
    })
    .unwrap();
    root.func_wrap("take-char", |mut s, (_,): (char,)| {
        *s.data_mut() += 1;
        Ok(())
    })
    .unwrap();
    root.func_wrap("take-many", |mut s, (_,): (Many,)| {
        *s.data_mut() += 1;
        Ok(())
    })
    .unwrap();
    let cases = [
        (
            "string-out-of-bounds",
            "string pointer/length out of bounds of memory",
        ),
        ("string-not-utf8", "invalid utf-8"),
        (
            "list-out-of-bounds",
            "list pointer/length out of bounds of memory",
        ),
        ("list-misaligned", "list pointer is not aligned"),
        ("option-discriminant", "discriminant 3 out of range"),
        (
            "char-surrogate",
            "converted integer out of range for `char`",
        ),
        ("args-misaligned", "pointer not aligned"),
        ("args-out-of-bounds", "pointer out of bounds"),
    ];
    for (export, expected) in cases {
        let mut store = Store::new(&engine, 0u32);
        let instance = linker.instantiate(&mut store, &component).unwrap();
        let f = instance
            .get_typed_func::<(), ()>(&mut store, export)
            .unwrap();
        let error = match f.call(&mut store, ()) {
            Ok(()) => panic!("{export}: a bad argument was accepted"),
            Err(e) => format!("{e:#}"),
        };
        assert!(
            error.contains(expected),
            "{export}: expected an error containing {expected:?}, got {error:?}"
        );
        assert_eq!(*store.data(), 0, "{export}: the host function ran");
    }
}
