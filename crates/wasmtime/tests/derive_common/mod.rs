//! What `component_derive.rs` and the root package's
//! `component_derive_upstream.rs` share: one component that forwards every
//! call of its exports to host imports of the same types, and
//! `derive_suite!`, the Rust types (derived with whichever `wasmtime` is in
//! scope) with a driver that calls every export and checks the results.
//! The upstream test expands the suite a second time with upstream's
//! crate named `wasmtime`, so both runtimes and both macros run the same
//! source.

/// How a function's results reach the caller.
pub enum Ret {
    /// One flat core value of this type.
    Flat(&'static str),
    /// Through memory: the lifted export returns a pointer, the lowered
    /// import takes one (its last parameter).
    Memory,
}

/// A function that the component imports as `host.f-NAME` and exports as
/// `g-NAME`, whose core code passes its core arguments on unchanged.
pub struct Forward {
    pub name: &'static str,
    /// The component function type's parameters and results.
    pub ty: &'static str,
    /// The core parameters (one `i32` pointer past 16 flat values).
    pub params: &'static str,
    pub results: Ret,
}

pub const FORWARDS: &[Forward] = &[
    Forward {
        name: "point",
        ty: r#"(param "p" $point) (result $point)"#,
        params: "i32 i64",
        results: Ret::Memory,
    },
    Forward {
        name: "segment",
        ty: r#"(param "s" $segment) (result $segment)"#,
        params: "i32 i64 i32 i64 i32 i32",
        results: Ret::Memory,
    },
    Forward {
        name: "points",
        ty: r#"(param "ps" (list $point)) (result (list $point))"#,
        params: "i32 i32",
        results: Ret::Memory,
    },
    Forward {
        name: "v",
        ty: r#"(param "x" $v) (result $v)"#,
        params: "i32 i64 i32",
        results: Ret::Memory,
    },
    Forward {
        name: "vs",
        ty: r#"(param "xs" (list $v)) (result (list $v))"#,
        params: "i32 i32",
        results: Ret::Memory,
    },
    Forward {
        name: "color",
        ty: r#"(param "c" $color) (result $color)"#,
        params: "i32",
        results: Ret::Flat("i32"),
    },
    Forward {
        name: "big",
        ty: r#"(param "b" $big) (result $big)"#,
        params: "i32",
        results: Ret::Flat("i32"),
    },
    Forward {
        name: "f1",
        ty: r#"(param "f" $f1) (result $f1)"#,
        params: "i32",
        results: Ret::Flat("i32"),
    },
    Forward {
        name: "f9",
        ty: r#"(param "f" $f9) (result $f9)"#,
        params: "i32",
        results: Ret::Flat("i32"),
    },
    Forward {
        name: "f32",
        ty: r#"(param "f" $f32) (result $f32)"#,
        params: "i32",
        results: Ret::Flat("i32"),
    },
    Forward {
        name: "perms",
        ty: r#"(param "p" $perms) (result $perms)"#,
        params: "i32 i32 i32 i32 i32",
        results: Ret::Memory,
    },
    Forward {
        name: "permss",
        ty: r#"(param "ps" (list $perms)) (result (list $perms))"#,
        params: "i32 i32",
        results: Ret::Memory,
    },
    Forward {
        name: "many",
        ty: r#"(param "a" $segment) (param "b" $segment) (param "c" $segment) (result (tuple $segment $segment))"#,
        params: "i32",
        results: Ret::Memory,
    },
    Forward {
        name: "wrap",
        ty: r#"(param "w" $wrap) (result $wrap)"#,
        params: "i32",
        results: Ret::Flat("i32"),
    },
    Forward {
        name: "pair",
        ty: r#"(param "p" $pair) (result $pair)"#,
        params: "i32 i32 i32 i32",
        results: Ret::Memory,
    },
    Forward {
        name: "either",
        ty: r#"(param "e" $either) (result $either)"#,
        params: "i32 i32 i32",
        results: Ret::Memory,
    },
];

/// Exports whose core code makes its own results, with their bodies:
/// values a well-behaved guest would never produce.
pub const GUEST_MADE: &[(&str, &str, &str)] = &[
    // discriminant 9 of a 4-case variant, in memory
    (
        "bad-v",
        "(result $v)",
        "(i32.store8 (i32.const 3000) (i32.const 9)) (i32.const 3000)",
    ),
    // discriminant 3 of a 3-case enum, flat
    ("bad-color", "(result $color)", "(i32.const 3)"),
    // discriminant 300 of a 300-case enum, flat
    ("bad-big", "(result $big)", "(i32.const 300)"),
    // a record whose 2-byte `big` discriminant (at offset 10) is 65535
    (
        "bad-perms",
        "(result $perms)",
        "(i64.store (i32.const 3104) (i64.const 0)) (i32.store (i32.const 3100) (i32.const 0)) \
      (i32.store16 (i32.const 3110) (i32.const 65535)) (i32.const 3100)",
    ),
    // every bit of the flat word set, for 9 flags
    ("wild-f9", "(result $f9)", "(i32.const -1)"),
    // every bit of the three flags fields set in memory, valid enums
    (
        "wild-perms",
        "(result $perms)",
        "(i32.store (i32.const 3200) (i32.const -1)) (i32.store (i32.const 3204) (i32.const -1)) \
      (i32.store (i32.const 3208) (i32.const 0)) (i32.const 3200)",
    ),
    // passes discriminant 7 of `color` to the host
    (
        "call-bad-color",
        "(result $color)",
        "(call $f-color (i32.const 7))",
    ),
];

/// The component's type definitions, by name: each is defined and
/// exported in the imported instance type, then aliased out.
fn types() -> Vec<(&'static str, String)> {
    let names = |prefix: &str, n: usize| {
        (0..n)
            .map(|i| format!("\"{prefix}{i}\""))
            .collect::<Vec<_>>()
            .join(" ")
    };
    vec![
        ("point", r#"(record (field "x" u32) (field "y-coord" s64))"#.into()),
        ("segment", r#"(record (field "from" $point) (field "to" $point) (field "label" string))"#.into()),
        ("v", r#"(variant (case "a" u8) (case "b" float64) (case "c" string) (case "d"))"#.into()),
        ("color", r#"(enum "red" "green" "blue")"#.into()),
        ("big", format!("(enum {})", names("c", 300))),
        ("f1", r#"(flags "x")"#.into()),
        ("f9", format!("(flags {})", names("F", 9))),
        ("f32", format!("(flags {})", names("G", 32))),
        ("perms", r#"(record (field "one" $f1) (field "nine" $f9) (field "all" $f32) (field "color" $color) (field "big" $big))"#.into()),
        ("pair", r#"(record (field "first" string) (field "second" string))"#.into()),
        ("either", r#"(variant (case "left" u32) (case "right" string))"#.into()),
        ("wrap", r#"(record (field "v" u32))"#.into()),
    ]
}

/// Where the forwarding export `index` has the host write its results.
fn result_area(index: usize) -> usize {
    1024 + 256 * index
}

/// The component's text.
pub fn component_wat() -> String {
    let types = types();
    let mut instance_type = String::new();
    let mut aliases = String::new();
    for (name, def) in &types {
        instance_type += &format!(
            "    (type ${name}' {def})\n    (export \"{name}\" (type ${name} (eq ${name}')))\n"
        );
        aliases += &format!("  (alias export $host \"{name}\" (type ${name}))\n");
    }
    let mut lowers = String::new();
    let mut core_imports = String::new();
    let mut core_funcs = String::new();
    let mut with = String::new();
    let mut lifts = String::new();
    let options = r#"(memory $libc "memory") (realloc (func $libc "realloc"))"#;
    for (i, f) in FORWARDS.iter().enumerate() {
        let Forward {
            name,
            ty,
            params,
            results,
        } = f;
        instance_type += &format!("    (export \"f-{name}\" (func {ty}))\n");
        lowers +=
            &format!("  (core func $f-{name} (canon lower (func $host \"f-{name}\") {options}))\n");
        let gets: String = (0..params.split_whitespace().count())
            .map(|p| format!("(local.get {p}) "))
            .collect();
        let (import_sig, export_result, body) = match results {
            Ret::Flat(t) => (
                format!("(param {params}) (result {t})"),
                format!("(result {t})"),
                format!("(call $f-{name} {gets})"),
            ),
            Ret::Memory => {
                let area = result_area(i);
                (
                    format!("(param {params} i32)"),
                    "(result i32)".to_string(),
                    format!("(call $f-{name} {gets}(i32.const {area})) (i32.const {area})"),
                )
            }
        };
        core_imports +=
            &format!("    (import \"host\" \"f-{name}\" (func $f-{name} {import_sig}))\n");
        core_funcs +=
            &format!("    (func (export \"g-{name}\") (param {params}) {export_result} {body})\n");
        with += &format!("(export \"f-{name}\" (func $f-{name})) ");
        lifts += &format!(
            "  (func (export \"g-{name}\") {ty} (canon lift (core func $main \"g-{name}\") {options}))\n"
        );
    }
    for (name, ty, body) in GUEST_MADE {
        core_funcs += &format!("    (func (export \"{name}\") (result i32) {body})\n");
        lifts += &format!(
            "  (func (export \"{name}\") {ty} (canon lift (core func $main \"{name}\") {options}))\n"
        );
    }
    format!(
        r#"(component
  (import "host" (instance $host
{instance_type}  ))
{aliases}  (core module $libc
    (memory (export "memory") 16)
    (global $next (mut i32) (i32.const 65536))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $ptr i32)
      (local.set $ptr (i32.and
        (i32.add (global.get $next) (i32.sub (local.get 2) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get 2))))
      (global.set $next (i32.add (local.get $ptr) (local.get 3)))
      (local.get $ptr)))
  (core instance $libc (instantiate $libc))
{lowers}  (core module $main
    (import "libc" "memory" (memory 1))
{core_imports}{core_funcs}  )
  (core instance $main (instantiate $main
    (with "libc" (instance $libc))
    (with "host" (instance {with}))))
{lifts})
"#
    )
}

/// The Rust types of the component's, derived with the `wasmtime` crate
/// in scope where this is expanded, and `drive()`, which calls every
/// export of [`component_wat`]'s component through them.
macro_rules! derive_suite {
    () => {
        use std::fmt::Debug;
        use wasmtime::component::{
            Component, ComponentNamedList, ComponentType, Instance, Lift, Linker, Lower, flags,
        };
        use wasmtime::{Config, Engine, Store, StoreContextMut};

        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(record)]
        pub struct Point {
            pub x: u32,
            #[component(name = "y-coord")]
            pub y: i64,
        }

        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(record)]
        pub struct Segment {
            pub from: Point,
            pub to: Point,
            pub label: String,
        }

        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(variant)]
        pub enum V {
            #[component(name = "a")]
            A(u8),
            #[component(name = "b")]
            B(f64),
            #[component(name = "c")]
            C(String),
            #[component(name = "d")]
            D,
        }

        #[derive(ComponentType, Lift, Lower, Debug, Clone, Copy, PartialEq)]
        #[component(enum)]
        #[repr(u8)]
        pub enum Color {
            #[component(name = "red")]
            Red,
            #[component(name = "green")]
            Green,
            #[component(name = "blue")]
            Blue,
        }

        /// An enum of 300 cases, named `c0` to `c299` as in the component:
        /// its discriminant takes 2 bytes.
        #[derive(ComponentType, Lift, Lower, Debug, Clone, Copy, PartialEq)]
        #[component(enum)]
        #[repr(u16)]
        #[allow(
            non_camel_case_types,
            reason = "the cases are named as in the component"
        )]
        pub enum Big {
            c0,
            c1,
            c2,
            c3,
            c4,
            c5,
            c6,
            c7,
            c8,
            c9,
            c10,
            c11,
            c12,
            c13,
            c14,
            c15,
            c16,
            c17,
            c18,
            c19,
            c20,
            c21,
            c22,
            c23,
            c24,
            c25,
            c26,
            c27,
            c28,
            c29,
            c30,
            c31,
            c32,
            c33,
            c34,
            c35,
            c36,
            c37,
            c38,
            c39,
            c40,
            c41,
            c42,
            c43,
            c44,
            c45,
            c46,
            c47,
            c48,
            c49,
            c50,
            c51,
            c52,
            c53,
            c54,
            c55,
            c56,
            c57,
            c58,
            c59,
            c60,
            c61,
            c62,
            c63,
            c64,
            c65,
            c66,
            c67,
            c68,
            c69,
            c70,
            c71,
            c72,
            c73,
            c74,
            c75,
            c76,
            c77,
            c78,
            c79,
            c80,
            c81,
            c82,
            c83,
            c84,
            c85,
            c86,
            c87,
            c88,
            c89,
            c90,
            c91,
            c92,
            c93,
            c94,
            c95,
            c96,
            c97,
            c98,
            c99,
            c100,
            c101,
            c102,
            c103,
            c104,
            c105,
            c106,
            c107,
            c108,
            c109,
            c110,
            c111,
            c112,
            c113,
            c114,
            c115,
            c116,
            c117,
            c118,
            c119,
            c120,
            c121,
            c122,
            c123,
            c124,
            c125,
            c126,
            c127,
            c128,
            c129,
            c130,
            c131,
            c132,
            c133,
            c134,
            c135,
            c136,
            c137,
            c138,
            c139,
            c140,
            c141,
            c142,
            c143,
            c144,
            c145,
            c146,
            c147,
            c148,
            c149,
            c150,
            c151,
            c152,
            c153,
            c154,
            c155,
            c156,
            c157,
            c158,
            c159,
            c160,
            c161,
            c162,
            c163,
            c164,
            c165,
            c166,
            c167,
            c168,
            c169,
            c170,
            c171,
            c172,
            c173,
            c174,
            c175,
            c176,
            c177,
            c178,
            c179,
            c180,
            c181,
            c182,
            c183,
            c184,
            c185,
            c186,
            c187,
            c188,
            c189,
            c190,
            c191,
            c192,
            c193,
            c194,
            c195,
            c196,
            c197,
            c198,
            c199,
            c200,
            c201,
            c202,
            c203,
            c204,
            c205,
            c206,
            c207,
            c208,
            c209,
            c210,
            c211,
            c212,
            c213,
            c214,
            c215,
            c216,
            c217,
            c218,
            c219,
            c220,
            c221,
            c222,
            c223,
            c224,
            c225,
            c226,
            c227,
            c228,
            c229,
            c230,
            c231,
            c232,
            c233,
            c234,
            c235,
            c236,
            c237,
            c238,
            c239,
            c240,
            c241,
            c242,
            c243,
            c244,
            c245,
            c246,
            c247,
            c248,
            c249,
            c250,
            c251,
            c252,
            c253,
            c254,
            c255,
            c256,
            c257,
            c258,
            c259,
            c260,
            c261,
            c262,
            c263,
            c264,
            c265,
            c266,
            c267,
            c268,
            c269,
            c270,
            c271,
            c272,
            c273,
            c274,
            c275,
            c276,
            c277,
            c278,
            c279,
            c280,
            c281,
            c282,
            c283,
            c284,
            c285,
            c286,
            c287,
            c288,
            c289,
            c290,
            c291,
            c292,
            c293,
            c294,
            c295,
            c296,
            c297,
            c298,
            c299,
        }

        /// The cases of `Big` in order.
        pub const BIG: &[Big] = &[
            Big::c0,
            Big::c1,
            Big::c2,
            Big::c3,
            Big::c4,
            Big::c5,
            Big::c6,
            Big::c7,
            Big::c8,
            Big::c9,
            Big::c10,
            Big::c11,
            Big::c12,
            Big::c13,
            Big::c14,
            Big::c15,
            Big::c16,
            Big::c17,
            Big::c18,
            Big::c19,
            Big::c20,
            Big::c21,
            Big::c22,
            Big::c23,
            Big::c24,
            Big::c25,
            Big::c26,
            Big::c27,
            Big::c28,
            Big::c29,
            Big::c30,
            Big::c31,
            Big::c32,
            Big::c33,
            Big::c34,
            Big::c35,
            Big::c36,
            Big::c37,
            Big::c38,
            Big::c39,
            Big::c40,
            Big::c41,
            Big::c42,
            Big::c43,
            Big::c44,
            Big::c45,
            Big::c46,
            Big::c47,
            Big::c48,
            Big::c49,
            Big::c50,
            Big::c51,
            Big::c52,
            Big::c53,
            Big::c54,
            Big::c55,
            Big::c56,
            Big::c57,
            Big::c58,
            Big::c59,
            Big::c60,
            Big::c61,
            Big::c62,
            Big::c63,
            Big::c64,
            Big::c65,
            Big::c66,
            Big::c67,
            Big::c68,
            Big::c69,
            Big::c70,
            Big::c71,
            Big::c72,
            Big::c73,
            Big::c74,
            Big::c75,
            Big::c76,
            Big::c77,
            Big::c78,
            Big::c79,
            Big::c80,
            Big::c81,
            Big::c82,
            Big::c83,
            Big::c84,
            Big::c85,
            Big::c86,
            Big::c87,
            Big::c88,
            Big::c89,
            Big::c90,
            Big::c91,
            Big::c92,
            Big::c93,
            Big::c94,
            Big::c95,
            Big::c96,
            Big::c97,
            Big::c98,
            Big::c99,
            Big::c100,
            Big::c101,
            Big::c102,
            Big::c103,
            Big::c104,
            Big::c105,
            Big::c106,
            Big::c107,
            Big::c108,
            Big::c109,
            Big::c110,
            Big::c111,
            Big::c112,
            Big::c113,
            Big::c114,
            Big::c115,
            Big::c116,
            Big::c117,
            Big::c118,
            Big::c119,
            Big::c120,
            Big::c121,
            Big::c122,
            Big::c123,
            Big::c124,
            Big::c125,
            Big::c126,
            Big::c127,
            Big::c128,
            Big::c129,
            Big::c130,
            Big::c131,
            Big::c132,
            Big::c133,
            Big::c134,
            Big::c135,
            Big::c136,
            Big::c137,
            Big::c138,
            Big::c139,
            Big::c140,
            Big::c141,
            Big::c142,
            Big::c143,
            Big::c144,
            Big::c145,
            Big::c146,
            Big::c147,
            Big::c148,
            Big::c149,
            Big::c150,
            Big::c151,
            Big::c152,
            Big::c153,
            Big::c154,
            Big::c155,
            Big::c156,
            Big::c157,
            Big::c158,
            Big::c159,
            Big::c160,
            Big::c161,
            Big::c162,
            Big::c163,
            Big::c164,
            Big::c165,
            Big::c166,
            Big::c167,
            Big::c168,
            Big::c169,
            Big::c170,
            Big::c171,
            Big::c172,
            Big::c173,
            Big::c174,
            Big::c175,
            Big::c176,
            Big::c177,
            Big::c178,
            Big::c179,
            Big::c180,
            Big::c181,
            Big::c182,
            Big::c183,
            Big::c184,
            Big::c185,
            Big::c186,
            Big::c187,
            Big::c188,
            Big::c189,
            Big::c190,
            Big::c191,
            Big::c192,
            Big::c193,
            Big::c194,
            Big::c195,
            Big::c196,
            Big::c197,
            Big::c198,
            Big::c199,
            Big::c200,
            Big::c201,
            Big::c202,
            Big::c203,
            Big::c204,
            Big::c205,
            Big::c206,
            Big::c207,
            Big::c208,
            Big::c209,
            Big::c210,
            Big::c211,
            Big::c212,
            Big::c213,
            Big::c214,
            Big::c215,
            Big::c216,
            Big::c217,
            Big::c218,
            Big::c219,
            Big::c220,
            Big::c221,
            Big::c222,
            Big::c223,
            Big::c224,
            Big::c225,
            Big::c226,
            Big::c227,
            Big::c228,
            Big::c229,
            Big::c230,
            Big::c231,
            Big::c232,
            Big::c233,
            Big::c234,
            Big::c235,
            Big::c236,
            Big::c237,
            Big::c238,
            Big::c239,
            Big::c240,
            Big::c241,
            Big::c242,
            Big::c243,
            Big::c244,
            Big::c245,
            Big::c246,
            Big::c247,
            Big::c248,
            Big::c249,
            Big::c250,
            Big::c251,
            Big::c252,
            Big::c253,
            Big::c254,
            Big::c255,
            Big::c256,
            Big::c257,
            Big::c258,
            Big::c259,
            Big::c260,
            Big::c261,
            Big::c262,
            Big::c263,
            Big::c264,
            Big::c265,
            Big::c266,
            Big::c267,
            Big::c268,
            Big::c269,
            Big::c270,
            Big::c271,
            Big::c272,
            Big::c273,
            Big::c274,
            Big::c275,
            Big::c276,
            Big::c277,
            Big::c278,
            Big::c279,
            Big::c280,
            Big::c281,
            Big::c282,
            Big::c283,
            Big::c284,
            Big::c285,
            Big::c286,
            Big::c287,
            Big::c288,
            Big::c289,
            Big::c290,
            Big::c291,
            Big::c292,
            Big::c293,
            Big::c294,
            Big::c295,
            Big::c296,
            Big::c297,
            Big::c298,
            Big::c299,
        ];

        flags! {
            F1 {
                #[component(name = "x")]
                const X;
            }
        }

        flags! {
            F9 {
        const F0;
        const F1;
        const F2;
        const F3;
        const F4;
        const F5;
        const F6;
        const F7;
        const F8;
            }
        }

        flags! {
            F32 {
        const G0;
        const G1;
        const G2;
        const G3;
        const G4;
        const G5;
        const G6;
        const G7;
        const G8;
        const G9;
        const G10;
        const G11;
        const G12;
        const G13;
        const G14;
        const G15;
        const G16;
        const G17;
        const G18;
        const G19;
        const G20;
        const G21;
        const G22;
        const G23;
        const G24;
        const G25;
        const G26;
        const G27;
        const G28;
        const G29;
        const G30;
        const G31;
            }
        }

        flags! {
            F33 {
        const H0;
        const H1;
        const H2;
        const H3;
        const H4;
        const H5;
        const H6;
        const H7;
        const H8;
        const H9;
        const H10;
        const H11;
        const H12;
        const H13;
        const H14;
        const H15;
        const H16;
        const H17;
        const H18;
        const H19;
        const H20;
        const H21;
        const H22;
        const H23;
        const H24;
        const H25;
        const H26;
        const H27;
        const H28;
        const H29;
        const H30;
        const H31;
        const H32;
            }
        }

        flags! {
            F65 {
        const K0;
        const K1;
        const K2;
        const K3;
        const K4;
        const K5;
        const K6;
        const K7;
        const K8;
        const K9;
        const K10;
        const K11;
        const K12;
        const K13;
        const K14;
        const K15;
        const K16;
        const K17;
        const K18;
        const K19;
        const K20;
        const K21;
        const K22;
        const K23;
        const K24;
        const K25;
        const K26;
        const K27;
        const K28;
        const K29;
        const K30;
        const K31;
        const K32;
        const K33;
        const K34;
        const K35;
        const K36;
        const K37;
        const K38;
        const K39;
        const K40;
        const K41;
        const K42;
        const K43;
        const K44;
        const K45;
        const K46;
        const K47;
        const K48;
        const K49;
        const K50;
        const K51;
        const K52;
        const K53;
        const K54;
        const K55;
        const K56;
        const K57;
        const K58;
        const K59;
        const K60;
        const K61;
        const K62;
        const K63;
        const K64;
            }
        }

        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(record)]
        pub struct Perms {
            pub one: F1,
            pub nine: F9,
            pub all: F32,
            pub color: Color,
            pub big: Big,
        }

        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(record)]
        // Not `Pair<T>`: upstream's `Lower` derive names a generic
        // parameter of its own `T`.
        pub struct Pair<A> {
            pub first: A,
            pub second: A,
        }

        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(variant)]
        pub enum Either<L, R> {
            #[component(name = "left")]
            Left(L),
            #[component(name = "right")]
            Right(R),
        }

        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(record)]
        pub struct Wrap {
            pub v: u32,
        }

        // Types that do not match the component's.

        /// `point` with `y-coord` under its Rust name.
        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(record)]
        pub struct PointWrongName {
            pub x: u32,
            pub y: i64,
        }

        /// `point` with a third field.
        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(record)]
        pub struct PointExtraField {
            pub x: u32,
            #[component(name = "y-coord")]
            pub y: i64,
            pub z: u32,
        }

        /// `point` with its fields the other way round.
        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(record)]
        pub struct PointSwapped {
            #[component(name = "y-coord")]
            pub y: i64,
            pub x: u32,
        }

        /// `point` with a field of another type.
        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(record)]
        pub struct PointWrongType {
            pub x: u64,
            #[component(name = "y-coord")]
            pub y: i64,
        }

        /// `v` with a payload on `d`.
        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(variant)]
        pub enum VPayloadOnD {
            #[component(name = "a")]
            A(u8),
            #[component(name = "b")]
            B(f64),
            #[component(name = "c")]
            C(String),
            #[component(name = "d")]
            D(u32),
        }

        /// `v` without the payload of `a`.
        #[derive(ComponentType, Lift, Lower, Debug, Clone, PartialEq)]
        #[component(variant)]
        pub enum VNoPayloadOnA {
            #[component(name = "a")]
            A,
            #[component(name = "b")]
            B(f64),
            #[component(name = "c")]
            C(String),
            #[component(name = "d")]
            D,
        }

        /// `color` with a third name that differs.
        #[derive(ComponentType, Lift, Lower, Debug, Clone, Copy, PartialEq)]
        #[component(enum)]
        #[repr(u8)]
        #[allow(
            dead_code,
            reason = "only its type is checked; upstream's lifting never names the cases"
        )]
        pub enum ColorWrongName {
            #[component(name = "red")]
            Red,
            #[component(name = "green")]
            Green,
            #[component(name = "purple")]
            Purple,
        }

        flags! {
            // `f1` named differently (upstream's `flags!` takes no doc
            // comments on the type).
            F1WrongName {
                #[component(name = "y")]
                const Y;
            }
        }

        /// The host's function for `f-point` and friends: what it returns
        /// for what it is given.
        pub fn next_point(p: &Point) -> Point {
            Point {
                x: p.x.wrapping_add(1),
                y: p.y.wrapping_neg(),
            }
        }

        pub fn next_segment(s: &Segment) -> Segment {
            Segment {
                from: next_point(&s.to),
                to: s.from.clone(),
                label: s.label.to_uppercase(),
            }
        }

        #[allow(clippy::ptr_arg, reason = "the host function's argument type is `&T`")]
        pub fn next_points(ps: &Vec<Point>) -> Vec<Point> {
            ps.iter().rev().map(next_point).collect()
        }

        /// Moves every value to another case, so that each case's payload
        /// travels in the variant's joined slots both ways.
        pub fn next_v(v: &V) -> V {
            match v {
                V::A(n) => V::B(f64::from(*n) + 0.5),
                V::B(f) => V::C(format!("{f}")),
                V::C(s) if s.is_empty() => V::D,
                V::C(s) => V::A(s.len() as u8),
                V::D => V::A(255),
            }
        }

        #[allow(clippy::ptr_arg, reason = "the host function's argument type is `&T`")]
        pub fn next_vs(vs: &Vec<V>) -> Vec<V> {
            vs.iter().map(next_v).collect()
        }

        pub fn next_color(c: &Color) -> Color {
            match c {
                Color::Red => Color::Green,
                Color::Green => Color::Blue,
                Color::Blue => Color::Red,
            }
        }

        pub fn next_big(b: &Big) -> Big {
            let i = BIG.iter().position(|c| c == b).unwrap();
            BIG[(i + 1) % BIG.len()]
        }

        pub fn next_f1(f: &F1) -> F1 {
            !*f
        }

        pub fn next_f9(f: &F9) -> F9 {
            *f ^ (F9::F0 | F9::F8)
        }

        pub fn next_f32(f: &F32) -> F32 {
            !*f
        }

        pub fn next_perms(p: &Perms) -> Perms {
            Perms {
                one: next_f1(&p.one),
                nine: next_f9(&p.nine),
                all: p.all ^ F32::G31,
                color: next_color(&p.color),
                big: next_big(&p.big),
            }
        }

        #[allow(clippy::ptr_arg, reason = "the host function's argument type is `&T`")]
        pub fn next_permss(ps: &Vec<Perms>) -> Vec<Perms> {
            ps.iter().map(next_perms).collect()
        }

        pub fn next_wrap(w: &Wrap) -> Wrap {
            Wrap {
                v: w.v.wrapping_mul(3),
            }
        }

        pub fn next_pair(p: &Pair<String>) -> Pair<String> {
            Pair {
                first: p.second.clone(),
                second: format!("{}+", p.first),
            }
        }

        pub fn next_either(e: &Either<u32, String>) -> Either<u32, String> {
            match e {
                Either::Left(n) => Either::Right(n.to_string()),
                Either::Right(s) => Either::Left(s.len() as u32),
            }
        }

        pub fn point(x: u32, y: i64) -> Point {
            Point { x, y }
        }

        pub fn segment(label: &str, a: u32) -> Segment {
            Segment {
                from: point(a, -1),
                to: point(a + 1, i64::MIN),
                label: label.into(),
            }
        }

        pub fn perms(one: F1, nine: F9, all: F32, color: Color, big: usize) -> Perms {
            Perms {
                one,
                nine,
                all,
                color,
                big: BIG[big],
            }
        }

        pub fn engine() -> Engine {
            let mut config = Config::new();
            config.wasm_component_model(true);
            Engine::new(&config).unwrap()
        }

        pub fn component(engine: &Engine) -> Component {
            Component::new(engine, crate::derive_common::component_wat()).unwrap()
        }

        /// Defines `host.f-NAME` as `next` that also logs its argument.
        pub fn define<T>(linker: &mut Linker<Vec<String>>, name: &str, next: fn(&T) -> T)
        where
            T: ComponentType + Lift + Lower + Debug + Send + Sync + 'static,
            (T,): ComponentNamedList + Lift + Lower,
        {
            let label = format!("f-{name}");
            linker
                .instance("host")
                .unwrap()
                .func_wrap(
                    &label.clone(),
                    move |mut store: StoreContextMut<'_, Vec<String>>, (x,): (T,)| {
                        store.data_mut().push(format!("{label} got {x:?}"));
                        Ok((next(&x),))
                    },
                )
                .unwrap();
        }

        /// A linker with every `host.f-NAME` defined.
        pub fn linker(engine: &Engine) -> Linker<Vec<String>> {
            let mut linker = Linker::new(engine);
            define(&mut linker, "point", next_point);
            define(&mut linker, "segment", next_segment);
            define(&mut linker, "points", next_points);
            define(&mut linker, "v", next_v);
            define(&mut linker, "vs", next_vs);
            define(&mut linker, "color", next_color);
            define(&mut linker, "big", next_big);
            define(&mut linker, "f1", next_f1);
            define(&mut linker, "f9", next_f9);
            define(&mut linker, "f32", next_f32);
            define(&mut linker, "perms", next_perms);
            define(&mut linker, "permss", next_permss);
            define(&mut linker, "wrap", next_wrap);
            define(&mut linker, "pair", next_pair);
            define(&mut linker, "either", next_either);
            linker
                .instance("host")
                .unwrap()
                .func_wrap(
                    "f-many",
                    |mut store: StoreContextMut<'_, Vec<String>>,
                     (a, b, c): (Segment, Segment, Segment)| {
                        store
                            .data_mut()
                            .push(format!("f-many got {a:?} {b:?} {c:?}"));
                        Ok(((next_segment(&c), next_segment(&a)),))
                    },
                )
                .unwrap();
            linker
        }

        /// A fresh store and instance of the component.
        pub fn instantiate(
            engine: &Engine,
            component: &Component,
        ) -> (Store<Vec<String>>, Instance) {
            let mut store = Store::new(engine, Vec::new());
            let instance = linker(engine).instantiate(&mut store, component).unwrap();
            (store, instance)
        }

        /// Calls `g-NAME` with each input: the host must have been given
        /// the input and the caller must get back what the host made of it.
        /// Logs both.
        pub fn round_trip<T>(
            store: &mut Store<Vec<String>>,
            instance: &Instance,
            name: &str,
            next: fn(&T) -> T,
            inputs: Vec<T>,
            log: &mut Vec<String>,
        ) where
            T: ComponentType + Lift + Lower + Debug + PartialEq + Send + Sync + 'static,
            (T,): ComponentNamedList + Lift + Lower,
        {
            let g = instance
                .get_typed_func::<(T,), (T,)>(&mut *store, &*format!("g-{name}"))
                .unwrap();
            for input in inputs {
                let expected = next(&input);
                let before = format!("{input:?}");
                let (out,) = g.call(&mut *store, (input,)).unwrap();
                assert_eq!(out, expected, "g-{name}({before})");
                let host = store.data_mut().pop().expect("the host was called");
                assert_eq!(host, format!("f-{name} got {before}"));
                log.push(format!("g-{name}({before}) = {out:?}"));
            }
        }

        /// Calls an export that takes nothing and returns a `T` on a fresh
        /// instance; logs the value, or that the call failed.
        pub fn guest_made<T>(
            engine: &Engine,
            component: &Component,
            name: &str,
            log: &mut Vec<String>,
        ) -> Result<T, String>
        where
            T: ComponentType + Lift + Debug + Send + Sync + 'static,
            (T,): ComponentNamedList + Lift,
        {
            let (mut store, instance) = instantiate(engine, component);
            let f = instance
                .get_typed_func::<(), (T,)>(&mut store, name)
                .unwrap();
            match f.call(&mut store, ()) {
                Ok((v,)) => {
                    log.push(format!("{name}() = {v:?}"));
                    Ok(v)
                }
                Err(e) => {
                    log.push(format!("{name}() failed"));
                    Err(format!("{e:?}"))
                }
            }
        }

        /// Whether `g-NAME` has the type `fn(T) -> T`; logs the answer.
        pub fn typecheck<T>(
            store: &mut Store<Vec<String>>,
            instance: &Instance,
            name: &str,
            log: &mut Vec<String>,
        ) -> Result<(), String>
        where
            T: ComponentType + Lift + Lower + Send + Sync + 'static,
            (T,): ComponentNamedList + Lift + Lower,
        {
            let r = instance
                .get_typed_func::<(T,), (T,)>(&mut *store, name)
                .map(drop)
                .map_err(|e| format!("{e:?}"));
            log.push(format!(
                "typecheck {name} as {}: {}",
                std::any::type_name::<T>().rsplit("::").next().unwrap(),
                if r.is_ok() { "ok" } else { "mismatch" }
            ));
            r
        }

        /// Calls every export with several values (each case of each
        /// variant, empty and full flag sets, the enum cases around the
        /// 256 boundary), checking results and what the host saw; returns
        /// the log of all results, for comparison between runtimes.
        pub fn drive() -> Vec<String> {
            let engine = engine();
            let component = component(&engine);
            let (mut store, instance) = instantiate(&engine, &component);
            let mut log = Vec::new();
            let (s, i, l) = (&mut store, &instance, &mut log);
            round_trip(
                s,
                i,
                "point",
                next_point,
                vec![point(0, 0), point(u32::MAX, i64::MIN + 1), point(7, -7)],
                l,
            );
            round_trip(
                s,
                i,
                "segment",
                next_segment,
                vec![segment("", 1), segment("wörld", 40)],
                l,
            );
            round_trip(
                s,
                i,
                "points",
                next_points,
                vec![
                    vec![],
                    vec![point(1, 2)],
                    (0..50).map(|n| point(n, -i64::from(n))).collect(),
                ],
                l,
            );
            round_trip(
                s,
                i,
                "v",
                next_v,
                vec![
                    V::A(0),
                    V::A(200),
                    V::B(-1.25),
                    V::B(f64::MAX),
                    V::C(String::new()),
                    V::C("xyz".into()),
                    V::D,
                ],
                l,
            );
            round_trip(
                s,
                i,
                "vs",
                next_vs,
                vec![vec![], vec![V::A(1), V::B(2.5), V::C("c".into()), V::D]],
                l,
            );
            round_trip(
                s,
                i,
                "color",
                next_color,
                vec![Color::Red, Color::Green, Color::Blue],
                l,
            );
            round_trip(
                s,
                i,
                "big",
                next_big,
                [0, 1, 254, 255, 256, 257, 298, 299]
                    .iter()
                    .map(|&n| BIG[n])
                    .collect(),
                l,
            );
            round_trip(s, i, "f1", next_f1, vec![F1::empty(), F1::X], l);
            round_trip(
                s,
                i,
                "f9",
                next_f9,
                vec![F9::empty(), F9::F0, F9::F8 | F9::F3, F9::all()],
                l,
            );
            round_trip(
                s,
                i,
                "f32",
                next_f32,
                vec![F32::empty(), F32::G31, F32::G0 | F32::G16, F32::all()],
                l,
            );
            let some_perms = vec![
                perms(F1::empty(), F9::empty(), F32::empty(), Color::Red, 0),
                perms(F1::X, F9::F8, F32::G31 | F32::G7, Color::Blue, 255),
                perms(F1::X, F9::all(), F32::all(), Color::Green, 299),
            ];
            round_trip(s, i, "perms", next_perms, some_perms.clone(), l);
            round_trip(s, i, "permss", next_permss, vec![vec![], some_perms], l);
            round_trip(
                s,
                i,
                "wrap",
                next_wrap,
                vec![Wrap { v: 0 }, Wrap { v: 12345 }],
                l,
            );
            round_trip(
                s,
                i,
                "pair",
                next_pair,
                vec![Pair {
                    first: "a".into(),
                    second: String::new(),
                }],
                l,
            );
            round_trip(
                s,
                i,
                "either",
                next_either,
                vec![
                    Either::Left(9),
                    Either::Right("four".into()),
                    Either::Right(String::new()),
                ],
                l,
            );

            // More than 16 flat parameters: passed through memory.
            let many = instance
                .get_typed_func::<(Segment, Segment, Segment), ((Segment, Segment),)>(
                    &mut store, "g-many",
                )
                .unwrap();
            let (a, b, c) = (segment("a", 1), segment("b", 2), segment("c", 3));
            let (out,) = many
                .call(&mut store, (a.clone(), b.clone(), c.clone()))
                .unwrap();
            assert_eq!(out, (next_segment(&c), next_segment(&a)));
            assert_eq!(
                store.data_mut().pop().unwrap(),
                format!("f-many got {a:?} {b:?} {c:?}")
            );
            log.push(format!("g-many = {out:?}"));

            // What a guest makes up: discriminants out of range fail the
            // call, flag bits past the last flag are dropped.
            let l = &mut log;
            assert!(guest_made::<V>(&engine, &component, "bad-v", l).is_err());
            assert!(guest_made::<Color>(&engine, &component, "bad-color", l).is_err());
            assert!(guest_made::<Big>(&engine, &component, "bad-big", l).is_err());
            assert!(guest_made::<Perms>(&engine, &component, "bad-perms", l).is_err());
            assert!(guest_made::<Color>(&engine, &component, "call-bad-color", l).is_err());
            assert_eq!(
                guest_made::<F9>(&engine, &component, "wild-f9", l).unwrap(),
                F9::all()
            );
            assert_eq!(
                guest_made::<Perms>(&engine, &component, "wild-perms", l).unwrap(),
                perms(F1::all(), F9::all(), F32::all(), Color::Red, 0)
            );

            // Types that do not match.
            let (s, i, l) = (&mut store, &instance, &mut log);
            assert!(typecheck::<Point>(s, i, "g-point", l).is_ok());
            assert!(typecheck::<PointWrongName>(s, i, "g-point", l).is_err());
            assert!(typecheck::<PointExtraField>(s, i, "g-point", l).is_err());
            assert!(typecheck::<PointSwapped>(s, i, "g-point", l).is_err());
            assert!(typecheck::<PointWrongType>(s, i, "g-point", l).is_err());
            assert!(typecheck::<VPayloadOnD>(s, i, "g-v", l).is_err());
            assert!(typecheck::<VNoPayloadOnA>(s, i, "g-v", l).is_err());
            assert!(typecheck::<ColorWrongName>(s, i, "g-color", l).is_err());
            assert!(typecheck::<F1WrongName>(s, i, "g-f1", l).is_err());
            assert!(typecheck::<Pair<u32>>(s, i, "g-pair", l).is_err());
            assert!(typecheck::<Either<u32, u32>>(s, i, "g-either", l).is_err());

            // Flags beyond one word, in Rust only (components have at most
            // 32). Only sets without bits past the last flag are shown as
            // words: upstream's `!` and `all()` set those bits (its `Eq`
            // ignores them), ours keep them clear.
            let f33 = F33::H0 | F33::H32;
            log.push(format!("{f33:?} {:?} {:?}", !f33, f33.as_array()));
            let f65 = F65::K64 | F65::K31 | F65::K32;
            log.push(format!("{f65:?} {:?} {:?}", !f65, f65.as_array()));
            assert_eq!(!!f65, f65);
            assert_eq!(F65::all() ^ f65, !f65);
            log.push(format!(
                "{:?} {:?} {:?}",
                F65::empty(),
                F33::all() ^ F33::H1,
                f65 & F65::K32
            ));
            log
        }
    };
}
