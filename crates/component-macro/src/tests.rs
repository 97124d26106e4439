//! The macros' compile errors, checked on their `proc_macro2` halves: each
//! bad input must give an error (never a panic) whose text says what is
//! wrong, and good input must expand to valid Rust items.

use crate::derive::{self, Derive};
use crate::flags;
use proc_macro2::TokenStream;
use quote::quote;

/// The error message every derive gives for `input`; fails if one of them
/// accepts it or the three disagree.
fn derive_error(input: TokenStream) -> String {
    let messages: Vec<String> = [Derive::ComponentType, Derive::Lift, Derive::Lower]
        .into_iter()
        .map(|which| match derive::try_expand(which, input.clone()) {
            Ok(tokens) => panic!("{which:?} accepted the input, giving {tokens}"),
            Err(e) => e.to_string(),
        })
        .collect();
    assert!(messages.iter().all(|m| *m == messages[0]), "{messages:?}");
    messages[0].clone()
}

fn assert_derive_error(input: TokenStream, expected: &str) {
    let message = derive_error(input);
    assert!(
        message.contains(expected),
        "expected an error containing {expected:?}, got {message:?}"
    );
}

/// Expands every derive for `input` and parses the result as Rust items.
fn derive_ok(input: TokenStream) -> Vec<syn::File> {
    [Derive::ComponentType, Derive::Lift, Derive::Lower]
        .into_iter()
        .map(|which| {
            let tokens = derive::try_expand(which, input.clone())
                .unwrap_or_else(|e| panic!("{which:?} refused the input: {e}"));
            syn::parse2::<syn::File>(tokens).expect("the expansion is valid Rust")
        })
        .collect()
}

fn flags_error(input: TokenStream, expected: &str) {
    match flags::try_expand(input) {
        Ok(tokens) => panic!("flags! accepted the input, giving {tokens}"),
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.contains(expected),
                "expected an error containing {expected:?}, got {message:?}"
            );
        }
    }
}

#[test]
fn good_input_expands_to_valid_items() {
    derive_ok(quote! {
        #[component(record)]
        struct Point<T: Copy> where T: Default {
            #[component(name = "x-coord")]
            x: T,
            r#type: u32,
        }
    });
    derive_ok(quote! {
        #[component(variant, wasmtime_crate = ::other::wasmtime)]
        enum V<'a, T> { A(&'a str), #[component(name = "b")] B, C(T) }
    });
    derive_ok(quote! {
        #[derive(Clone)]
        #[component(enum)]
        #[repr(u8)]
        enum E { #[component(name = "x")] X, Y }
    });
    derive_ok(quote!(
        #[component(record)]
        struct Empty {}
    ));
    let tokens = flags::try_expand(quote! {
        /// Docs.
        Perms { #[component(name = "read")] const READ; const WRITE; }
    })
    .expect("valid flags");
    syn::parse2::<syn::File>(tokens).expect("the expansion is valid Rust");
    for n in [0u32, 1, 32, 33, 65] {
        let consts = (0..n).map(|i| quote::format_ident!("F{}", i));
        let tokens = flags::try_expand(quote!(Many { #(const #consts;)* })).expect("valid");
        syn::parse2::<syn::File>(tokens).expect("the expansion is valid Rust");
    }
}

#[test]
fn the_kind_is_required_and_unique() {
    assert_derive_error(
        quote!(
            struct S {
                a: u32,
            }
        ),
        "missing `#[component(record)]`, `#[component(variant)]` or `#[component(enum)]`",
    );
    assert_derive_error(
        quote!(
            #[component(record)]
            #[component(variant)]
            struct S {
                a: u32,
            }
        ),
        "only one of `record`, `variant` and `enum` may be given",
    );
    assert_derive_error(
        quote!(
            #[component(record, wasmtime_crate = a, wasmtime_crate = b)]
            struct S {
                a: u32,
            }
        ),
        "`wasmtime_crate` given more than once",
    );
}

#[test]
fn unknown_options_are_named() {
    assert_derive_error(
        quote!(
            #[component(recrod)]
            struct S {
                a: u32,
            }
        ),
        "unknown `component` option `recrod`: expected `record`, `variant`, `enum` or `wasmtime_crate = path`",
    );
    assert_derive_error(
        quote!(
            #[component("record")]
            struct S {
                a: u32,
            }
        ),
        "expected `record`, `variant`, `enum` or `wasmtime_crate = path`",
    );
    assert_derive_error(
        quote!(
            #[component(flags)]
            struct S {
                a: u32,
            }
        ),
        "define them with `wasmtime::component::flags!`",
    );
    assert_derive_error(
        quote!(
            #[component(name = "s")]
            struct S {
                a: u32,
            }
        ),
        "belongs on a field or a case",
    );
    assert_derive_error(
        quote!(
            #[component]
            struct S {
                a: u32,
            }
        ),
        "expected attribute arguments in parentheses",
    );
    assert_derive_error(
        quote!(
            #[component(record)]
            struct S {
                #[component(rename = "b")]
                a: u32,
            }
        ),
        "unknown `component` option `rename` here: expected `name = \"..\"`",
    );
    assert_derive_error(
        quote!(
            #[component(record)]
            struct S {
                #[component(name = b)]
                a: u32,
            }
        ),
        "expected a string literal",
    );
    assert_derive_error(
        quote!(
            #[component(variant)]
            enum V {
                #[component(record)]
                A,
            }
        ),
        "unknown `component` option `record` here",
    );
}

#[test]
fn names_must_be_given_once_and_differ() {
    assert_derive_error(
        quote!(
            #[component(record)]
            struct S {
                #[component(name = "a")]
                #[component(name = "b")]
                x: u32,
            }
        ),
        "`name` given more than once",
    );
    assert_derive_error(
        quote!(
            #[component(record)]
            struct S {
                #[component(name = "")]
                x: u32,
            }
        ),
        "a component name cannot be empty",
    );
    assert_derive_error(
        quote!(
            #[component(record)]
            struct S {
                #[component(name = "b")]
                a: u32,
                b: u32,
            }
        ),
        "the component name `b` is used twice",
    );
    assert_derive_error(
        quote!(
            #[component(variant)]
            enum V {
                #[component(name = "B")]
                A,
                B,
            }
        ),
        "the component name `B` is used twice",
    );
}

#[test]
fn records_are_structs_with_named_fields() {
    assert_derive_error(
        quote!(
            #[component(record)]
            enum E {
                A,
            }
        ),
        "`record` needs a `struct` with named fields, and `E` is an `enum`",
    );
    assert_derive_error(
        quote!(#[component(record)] union U { a: u32 }),
        "`record` needs a `struct` with named fields, and `U` is a `union`",
    );
    assert_derive_error(
        quote!(
            #[component(record)]
            struct T(u32);
        ),
        "`record` needs a `struct` with named fields",
    );
    assert_derive_error(
        quote!(
            #[component(record)]
            struct U;
        ),
        "`record` needs a `struct` with named fields",
    );
}

#[test]
fn variant_cases_have_at_most_one_unnamed_payload() {
    assert_derive_error(
        quote!(
            #[component(variant)]
            struct S {
                a: u32,
            }
        ),
        "`variant` needs a Rust `enum`, and `S` is a `struct`",
    );
    assert_derive_error(
        quote!(
            #[component(variant)]
            enum V {}
        ),
        "a component `variant` needs at least one case",
    );
    assert_derive_error(
        quote!(
            #[component(variant)]
            enum V {
                A(u32, u64),
            }
        ),
        "a variant case has no payload or exactly one, and `A` has 2",
    );
    assert_derive_error(
        quote!(
            #[component(variant)]
            enum V {
                A(),
            }
        ),
        "a variant case has no payload or exactly one, and `A` has 0",
    );
    assert_derive_error(
        quote!(
            #[component(variant)]
            enum V {
                A { x: u32 },
            }
        ),
        "make the named fields a record type",
    );
}

#[test]
fn enums_are_unit_cases_with_the_discriminant_repr() {
    assert_derive_error(
        quote!(
            #[component(enum)]
            #[repr(u8)]
            enum E {
                A(u32),
            }
        ),
        "enum cases have no payload, and `A` has one",
    );
    assert_derive_error(
        quote!(
            #[component(enum)]
            enum E {
                A,
                B,
            }
        ),
        "missing `#[repr(u8)]`",
    );
    assert_derive_error(
        quote!(
            #[component(enum)]
            #[repr(u32)]
            enum E {
                A,
                B,
            }
        ),
        "needs exactly `#[repr(u8)]`",
    );
    assert_derive_error(
        quote!(
            #[component(enum)]
            #[repr(C)]
            enum E {
                A,
                B,
            }
        ),
        "needs exactly `#[repr(u8)]`",
    );
    let cases: Vec<_> = (0..257u32)
        .map(|i| quote::format_ident!("C{}", i))
        .collect();
    assert_derive_error(
        quote!(#[component(enum)] #[repr(u8)] enum E { #(#cases),* }),
        "a component `enum` of 257 cases needs exactly `#[repr(u16)]`",
    );
    derive_ok(quote!(#[component(enum)] #[repr(u16)] enum E { #(#cases),* }));
    assert_derive_error(
        quote!(
            #[component(enum)]
            #[repr(u8)]
            enum E {
                A = 1,
                B,
            }
        ),
        "remove the explicit discriminant",
    );
    assert_derive_error(
        quote!(
            #[component(enum)]
            #[repr(u8)]
            enum E<T> {
                A,
                B,
            }
        ),
        "a component `enum` cannot be generic",
    );
    assert_derive_error(
        quote!(
            #[component(enum)]
            struct S {
                a: u32,
            }
        ),
        "`enum` needs a Rust `enum`, and `S` is a `struct`",
    );
}

#[test]
fn bad_flags_input_is_explained() {
    flags_error(
        quote!(pub Perms { const READ; }),
        "write only the type's name",
    );
    flags_error(
        quote!(struct Perms { const READ; }),
        "write only the type's name",
    );
    flags_error(quote!(Perms { READ; }), "expected a flag: `const NAME;`");
    flags_error(
        quote!(Perms { const READ WRITE; }),
        "expected `;` after the flag's name",
    );
    flags_error(
        quote!(Perms { const READ; const READ; }),
        "the flag `READ` is defined twice",
    );
    flags_error(
        quote!(Perms { #[component(name = "a")] const READ; #[component(name = "a")] const WRITE; }),
        "the component name `a` is used twice",
    );
    flags_error(
        quote!(Perms { #[component(nme = "a")] const READ; }),
        "unknown `component` option `nme` here",
    );
    flags_error(
        quote!(Perms { #[cfg(x)] const READ; }),
        "only doc comments and `#[component(..)]`",
    );
    flags_error(
        quote!(Perms { const READ; } Other { const A; }),
        "one flags type per `flags!`",
    );
    flags_error(
        quote!(#[component(record)] Perms { const READ; }),
        "unknown `component` option `record` on a flags type",
    );
    flags_error(quote!(Perms), "expected `{` and the flags");
    flags_error(quote!(), "expected the flags type's name");
}
