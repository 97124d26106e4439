//! `#[derive(ComponentType, Lift, Lower)]` and `flags!` through real
//! components: records, variants, enums and flags passed flat and through
//! memory in all four directions of a call (host to guest export, guest to
//! host import, and back), checked against the dynamic `Val` ABI, type
//! mismatches reported when a typed function is made or linked, and guest
//! values that no Rust value stands for refused with an error.
//!
//! `tests/component_derive_upstream.rs` in the root package runs the same
//! suite (`derive_common`) with upstream Wasmtime and compares the logs.

#[macro_use]
mod derive_common;

/// The shared suite, with this crate's `wasmtime`.
mod suite {
    derive_suite!();
}

use std::collections::HashSet;
use suite::*;
use wasmtime::component::Val;

#[test]
fn every_export_round_trips_through_the_guest_and_the_host() {
    let log = drive();
    // Spot checks of the log that the upstream comparison relies on.
    assert!(log.contains(&"g-color(Blue) = Red".to_string()), "{log:#?}");
    assert!(log.contains(&"g-big(c255) = c256".to_string()), "{log:#?}");
    assert!(
        log.contains(&"wild-f9() = (F0|F1|F2|F3|F4|F5|F6|F7|F8)".to_string()),
        "{log:#?}"
    );
    assert!(log.contains(&"bad-v() failed".to_string()), "{log:#?}");
}

fn rec(fields: &[(&str, Val)]) -> Val {
    Val::Record(
        fields
            .iter()
            .map(|(n, v)| (n.to_string(), v.clone()))
            .collect(),
    )
}

fn case(name: &str, payload: Option<Val>) -> Val {
    Val::Variant(name.into(), payload.map(Box::new))
}

fn flag_names(names: &[&str]) -> Val {
    Val::Flags(names.iter().map(|n| n.to_string()).collect())
}

fn point_val(x: u32, y: i64) -> Val {
    rec(&[("x", Val::U32(x)), ("y-coord", Val::S64(y))])
}

fn segment_val(s: &Segment) -> Val {
    rec(&[
        ("from", point_val(s.from.x, s.from.y)),
        ("to", point_val(s.to.x, s.to.y)),
        ("label", Val::String(s.label.clone())),
    ])
}

/// Calls `g-NAME` with `args` where `host.f-NAME` is a dynamic host
/// function that fails unless it is given `expect` (as `Val`s, read by
/// the dynamic ABI) and returns `reply`: the typed lowering must write what
/// the dynamic lifting reads, and the typed lifting must read what the
/// dynamic lowering writes.
fn against_dynamic<P, R>(name: &str, args: P, expect: Vec<Val>, reply: Val) -> wasmtime::Result<R>
where
    P: wasmtime::component::ComponentNamedList + wasmtime::component::Lower + 'static,
    R: wasmtime::component::ComponentNamedList + wasmtime::component::Lift + 'static,
{
    let engine = engine();
    let component = component(&engine);
    let mut linker = linker(&engine);
    linker.allow_shadowing(true);
    linker
        .instance("host")?
        .func_new(&format!("f-{name}"), move |_, _, args, results| {
            if args != expect.as_slice() {
                wasmtime::bail!("the host got {args:?}, expected {expect:?}");
            }
            results[0] = reply.clone();
            Ok(())
        })?;
    let mut store = wasmtime::Store::new(&engine, Vec::new());
    let instance = linker.instantiate(&mut store, &component)?;
    let f = instance.get_typed_func::<P, R>(&mut store, &*format!("g-{name}"))?;
    f.call(&mut store, args)
}

#[test]
fn records_match_the_dynamic_abi() -> wasmtime::Result<()> {
    let (p,): (Point,) = against_dynamic(
        "point",
        (point(5, -6),),
        vec![point_val(5, -6)],
        point_val(1, 2),
    )?;
    assert_eq!(p, point(1, 2));

    let s = segment("nested", 3);
    let reply = segment("reply", 9);
    let (out,): (Segment,) = against_dynamic(
        "segment",
        (s.clone(),),
        vec![segment_val(&s)],
        segment_val(&reply),
    )?;
    assert_eq!(out, reply);

    let (ps,): (Vec<Point>,) = against_dynamic(
        "points",
        (vec![point(1, 1), point(2, -2)],),
        vec![Val::List(vec![point_val(1, 1), point_val(2, -2)])],
        Val::List(vec![point_val(3, 3)]),
    )?;
    assert_eq!(ps, [point(3, 3)]);

    let (w,): (Wrap,) = against_dynamic(
        "wrap",
        (Wrap { v: 77 },),
        vec![rec(&[("v", Val::U32(77))])],
        rec(&[("v", Val::U32(78))]),
    )?;
    assert_eq!(w, Wrap { v: 78 });

    let (pair,): (Pair<String>,) = against_dynamic(
        "pair",
        (Pair {
            first: "1".to_string(),
            second: "2".to_string(),
        },),
        vec![rec(&[
            ("first", Val::String("1".into())),
            ("second", Val::String("2".into())),
        ])],
        rec(&[
            ("first", Val::String("x".into())),
            ("second", Val::String("y".into())),
        ]),
    )?;
    assert_eq!(pair.first, "x");
    assert_eq!(pair.second, "y");

    // Three segments are 18 flat values: the parameters go through memory.
    let (a, b, c) = (segment("a", 1), segment("b", 2), segment("c", 3));
    let ((x, y),): ((Segment, Segment),) = against_dynamic(
        "many",
        (a.clone(), b.clone(), c.clone()),
        vec![segment_val(&a), segment_val(&b), segment_val(&c)],
        Val::Tuple(vec![segment_val(&c), segment_val(&a)]),
    )?;
    assert_eq!((x, y), (c, a));
    Ok(())
}

#[test]
fn variants_match_the_dynamic_abi_in_every_case() -> wasmtime::Result<()> {
    let pairs = [
        (V::A(7), case("a", Some(Val::U8(7)))),
        (V::B(-2.5), case("b", Some(Val::Float64(-2.5)))),
        (
            V::C("see".into()),
            case("c", Some(Val::String("see".into()))),
        ),
        (V::D, case("d", None)),
    ];
    for (value, val) in &pairs {
        for (reply, reply_val) in &pairs {
            let (out,): (V,) =
                against_dynamic("v", (value.clone(),), vec![val.clone()], reply_val.clone())?;
            assert_eq!(&out, reply, "{value:?} answered with {reply:?}");
        }
    }
    let (vs,): (Vec<V>,) = against_dynamic(
        "vs",
        (pairs.iter().map(|p| p.0.clone()).collect::<Vec<_>>(),),
        vec![Val::List(pairs.iter().map(|p| p.1.clone()).collect())],
        Val::List(pairs.iter().rev().map(|p| p.1.clone()).collect()),
    )?;
    assert_eq!(
        vs,
        pairs.iter().rev().map(|p| p.0.clone()).collect::<Vec<_>>()
    );

    let (e,): (Either<u32, String>,) = against_dynamic(
        "either",
        (Either::<u32, String>::Right("hi".to_string()),),
        vec![case("right", Some(Val::String("hi".into())))],
        case("left", Some(Val::U32(4))),
    )?;
    assert_eq!(e, Either::Left(4));
    Ok(())
}

#[test]
fn enums_and_flags_match_the_dynamic_abi() -> wasmtime::Result<()> {
    let (c,): (Color,) = against_dynamic(
        "color",
        (Color::Green,),
        vec![Val::Enum("green".into())],
        Val::Enum("blue".into()),
    )?;
    assert_eq!(c, Color::Blue);

    let (b,): (Big,) = against_dynamic(
        "big",
        (BIG[256],),
        vec![Val::Enum("c256".into())],
        Val::Enum("c299".into()),
    )?;
    assert_eq!(b, BIG[299]);

    let (f,): (F9,) = against_dynamic(
        "f9",
        (F9::F0 | F9::F8,),
        vec![flag_names(&["F0", "F8"])],
        flag_names(&["F3"]),
    )?;
    assert_eq!(f, F9::F3);

    let (f,): (F1,) = against_dynamic("f1", (F1::X,), vec![flag_names(&["x"])], flag_names(&[]))?;
    assert_eq!(f, F1::empty());

    // Flags of 1, 2 and 4 bytes and enums of 1 and 2 bytes in memory.
    let p = perms(F1::X, F9::F1 | F9::F8, F32::G0 | F32::G31, Color::Blue, 258);
    let p_val = rec(&[
        ("one", flag_names(&["x"])),
        ("nine", flag_names(&["F1", "F8"])),
        ("all", flag_names(&["G0", "G31"])),
        ("color", Val::Enum("blue".into())),
        ("big", Val::Enum("c258".into())),
    ]);
    let reply = rec(&[
        ("one", flag_names(&[])),
        ("nine", flag_names(&["F7"])),
        ("all", flag_names(&["G15", "G16"])),
        ("color", Val::Enum("red".into())),
        ("big", Val::Enum("c1".into())),
    ]);
    let (out,): (Perms,) = against_dynamic("perms", (p,), vec![p_val], reply)?;
    assert_eq!(
        out,
        perms(F1::empty(), F9::F7, F32::G15 | F32::G16, Color::Red, 1)
    );
    Ok(())
}

/// The error of making `g-NAME` a typed function of `T` to `T`.
fn mismatch<T>(name: &str) -> String
where
    T: wasmtime::component::ComponentType
        + wasmtime::component::Lift
        + wasmtime::component::Lower
        + Send
        + Sync
        + 'static,
{
    let engine = engine();
    let component = component(&engine);
    let (mut store, instance) = instantiate(&engine, &component);
    let mut log = Vec::new();
    typecheck::<T>(&mut store, &instance, name, &mut log).expect_err("a mismatch")
}

#[track_caller]
fn assert_contains(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "expected {part:?} in {text:?}");
    }
}

#[test]
fn type_mismatches_name_what_differs() {
    assert_contains(
        &mismatch::<PointWrongName>("g-point"),
        &["expected record field `y`, found `y-coord`"],
    );
    assert_contains(
        &mismatch::<PointExtraField>("g-point"),
        &["expected a record of 3 fields, found one of 2"],
    );
    assert_contains(
        &mismatch::<PointSwapped>("g-point"),
        &["expected record field `y-coord`, found `x`"],
    );
    assert_contains(
        &mismatch::<PointWrongType>("g-point"),
        &["in record field `x`", "expected u64, found u32"],
    );
    assert_contains(
        &mismatch::<VPayloadOnD>("g-v"),
        &["variant case `d` has no payload in the component"],
    );
    assert_contains(
        &mismatch::<VNoPayloadOnA>("g-v"),
        &["variant case `a` has a payload"],
    );
    assert_contains(
        &mismatch::<ColorWrongName>("g-color"),
        &["expected an enum name `purple`, found `blue`"],
    );
    assert_contains(
        &mismatch::<F1WrongName>("g-f1"),
        &["expected flags name `y`, found `x`"],
    );
    assert_contains(
        &mismatch::<Pair<u32>>("g-pair"),
        &["in record field `first`", "expected u32, found string"],
    );
    assert_contains(
        &mismatch::<Either<u32, u32>>("g-either"),
        &["in variant case `right`", "expected u32, found string"],
    );
    // A record is not a variant, nor flags an enum.
    assert_contains(&mismatch::<V>("g-point"), &["expected variant"]);
    assert_contains(&mismatch::<Color>("g-f1"), &["expected enum"]);
}

#[test]
fn a_host_function_of_a_mismatched_type_is_not_linked() {
    let engine = engine();
    let component = component(&engine);
    let mut linker = linker(&engine);
    linker.allow_shadowing(true);
    linker
        .instance("host")
        .unwrap()
        .func_wrap("f-point", |_, (p,): (PointWrongName,)| Ok((p,)))
        .unwrap();
    let mut store = wasmtime::Store::new(&engine, Vec::new());
    let err = linker
        .instantiate(&mut store, &component)
        .expect_err("a type mismatch");
    assert_contains(
        &format!("{err:?}"),
        &["f-point", "expected record field `y`, found `y-coord`"],
    );
}

/// The error of calling the guest-made export `name` returning a `T`.
fn guest_error<T>(name: &str) -> String
where
    T: wasmtime::component::ComponentType
        + wasmtime::component::Lift
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let engine = engine();
    let component = component(&engine);
    let mut log = Vec::new();
    guest_made::<T>(&engine, &component, name, &mut log).expect_err("the call fails")
}

#[test]
fn a_discriminant_out_of_range_fails_the_call() {
    assert_contains(&guest_error::<V>("bad-v"), &["discriminant 9 out of range"]);
    assert_contains(
        &guest_error::<Color>("bad-color"),
        &["discriminant 3 out of range"],
    );
    assert_contains(
        &guest_error::<Big>("bad-big"),
        &["discriminant 300 out of range"],
    );
    assert_contains(
        &guest_error::<Perms>("bad-perms"),
        &["discriminant 65535 out of range"],
    );
    // The same when the guest passes one to a typed host function.
    assert_contains(
        &guest_error::<Color>("call-bad-color"),
        &["discriminant 7 out of range"],
    );
}

#[test]
fn flag_bits_past_the_last_flag_are_dropped() {
    let engine = engine();
    let component = component(&engine);
    let mut log = Vec::new();
    let f9 = guest_made::<F9>(&engine, &component, "wild-f9", &mut log).unwrap();
    assert_eq!(f9, F9::all());
    assert_eq!(f9.as_array(), [0x1ff]);
    let p = guest_made::<Perms>(&engine, &component, "wild-perms", &mut log).unwrap();
    assert_eq!(p.one.as_array(), [1]);
    assert_eq!(p.nine.as_array(), [0x1ff]);
    assert_eq!(p.all.as_array(), [u32::MAX]);
}

#[test]
fn flags_of_several_words() {
    assert_eq!(F33::H0.as_array(), [1, 0]);
    assert_eq!(F33::H32.as_array(), [0, 1]);
    assert_eq!(F33::all().as_array(), [u32::MAX, 1]);
    assert_eq!((!F33::H31).as_array(), [u32::MAX >> 1, 1]);
    assert_eq!(F65::all().as_array(), [u32::MAX, u32::MAX, 1]);
    assert_eq!(F65::K64.as_array(), [0, 0, 1]);
    assert_eq!(!F65::all(), F65::empty());
    assert_eq!(!!F65::K33, F65::K33);
    assert_eq!(format!("{:?}", F33::H0 | F33::H32), "(H0|H32)");
    assert_eq!(format!("{:?}", F65::empty()), "()");
    assert_eq!(F65::default(), F65::empty());

    let mut f = F65::K1 | F65::K40;
    assert!(f.contains(F65::K40) && !f.contains(F65::K40 | F65::K2));
    assert!(f.intersects(F65::K1 | F65::K64) && !f.intersects(F65::K0));
    f |= F65::K64;
    f &= !F65::K1;
    f ^= F65::K40 | F65::K0;
    assert_eq!(f, F65::K0 | F65::K64);
    assert_eq!(f & F65::K64, F65::K64);
    assert_eq!(f ^ f, F65::empty());

    // Equal sets hash alike, however they were made.
    let set: HashSet<F33> = [F33::all() ^ F33::H5, !F33::H5, F33::H5]
        .into_iter()
        .collect();
    assert_eq!(set.len(), 2);
}

#[test]
fn one_flag_and_its_operators() {
    assert_eq!(F1::X.as_array(), [1]);
    assert_eq!(!F1::X, F1::empty());
    assert_eq!(F1::all(), F1::X);
    assert_eq!(format!("{:?}", F1::all()), "(X)");
    assert_eq!(format!("{:?}", F9::F2 | F9::F5), "(F2|F5)");
    assert_eq!(F9::all().as_array(), [0x1ff]);
}

/// `wasmtime_crate` names the crate where `wasmtime` is something else.
mod renamed_crate {
    #[allow(dead_code, reason = "stands in the way of the default path")]
    mod wasmtime {}

    use ::wasmtime as real;
    use real::component::{ComponentType, Lift, Lower};

    #[derive(ComponentType, Lift, Lower, Debug, PartialEq)]
    #[component(record)]
    #[component(wasmtime_crate = real)]
    pub struct Wrap {
        pub v: u32,
    }

    #[derive(ComponentType, Lift, Lower, Debug, PartialEq)]
    #[component(variant, wasmtime_crate = ::wasmtime)]
    pub enum Either {
        #[component(name = "left")]
        Left(u32),
        #[component(name = "right")]
        Right(String),
    }

    real::component::flags! {
        #[component(wasmtime_crate = real)]
        F1 {
            #[component(name = "x")]
            const X;
        }
    }
}

#[test]
fn a_renamed_crate_path_works() -> wasmtime::Result<()> {
    let engine = engine();
    let component = component(&engine);
    let (mut store, instance) = instantiate(&engine, &component);
    let f = instance
        .get_typed_func::<(renamed_crate::Wrap,), (renamed_crate::Wrap,)>(&mut store, "g-wrap")?;
    let (w,) = f.call(&mut store, (renamed_crate::Wrap { v: 5 },))?;
    assert_eq!(w, renamed_crate::Wrap { v: 15 });
    let f = instance.get_typed_func::<(renamed_crate::Either,), (renamed_crate::Either,)>(
        &mut store, "g-either",
    )?;
    let (e,) = f.call(&mut store, (renamed_crate::Either::Left(12),))?;
    assert_eq!(e, renamed_crate::Either::Right("12".into()));
    let f = instance
        .get_typed_func::<(renamed_crate::F1,), (renamed_crate::F1,)>(&mut store, "g-f1")?;
    let (x,) = f.call(&mut store, (renamed_crate::F1::empty(),))?;
    assert_eq!(x, renamed_crate::F1::X);
    Ok(())
}
