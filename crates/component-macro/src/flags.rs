//! `flags! { Name { #[component(name = "a")] const A; .. } }`: a `pub
//! struct` standing for a component `flags` type.
//!
//! The struct keeps its flags as 32-bit words, flag `i` (in the order
//! written) being bit `i % 32` of word `i / 32`, the form the runtime's
//! flags helpers take. Bits past the last flag are always clear (every
//! operation keeps them so, lifting drops them), so the derived `Eq` and
//! `Hash` compare sets, not stray bits.

use crate::derive::{check_unique, component_name};
use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Attribute, Error, Ident, LitStr, Path, Result, Token, braced};

/// Expands one `flags!` invocation, or returns the compile error that
/// explains why it cannot be.
pub(crate) fn expand(input: TokenStream) -> TokenStream {
    try_expand(input).unwrap_or_else(|e| e.to_compile_error())
}

pub(crate) fn try_expand(input: TokenStream) -> Result<TokenStream> {
    let input: FlagsInput = syn::parse2(input)?;
    Ok(input.generate())
}

struct Flag {
    /// Its doc comments, kept on its constant.
    docs: Vec<Attribute>,
    ident: Ident,
    name: LitStr,
}

struct FlagsInput {
    docs: Vec<Attribute>,
    krate: Path,
    ident: Ident,
    flags: Vec<Flag>,
}

/// The `wasmtime_crate = path` option of the type's `#[component(..)]`.
struct CrateOption(Path);

impl Parse for CrateOption {
    fn parse(input: ParseStream) -> Result<Self> {
        const EXPECTED: &str = "expected `wasmtime_crate = path`";
        if !input.peek(Ident::peek_any) {
            return Err(input.error(EXPECTED));
        }
        let word = Ident::parse_any(input)?;
        if word != "wasmtime_crate" {
            return Err(Error::new(
                word.span(),
                format!(
                    "unknown `component` option `{word}` on a flags type: {EXPECTED} \
                     (the names go on each `const`)"
                ),
            ));
        }
        input.parse::<Token![=]>()?;
        Ok(CrateOption(Path::parse_mod_style(input)?))
    }
}

/// Splits `attrs` into doc comments and `#[component(..)]` attributes;
/// anything else is refused.
fn split_attrs(attrs: Vec<Attribute>, what: &str) -> Result<(Vec<Attribute>, Vec<Attribute>)> {
    let mut docs = Vec::new();
    let mut component = Vec::new();
    for attr in attrs {
        if attr.path().is_ident("doc") {
            docs.push(attr);
        } else if attr.path().is_ident("component") {
            component.push(attr);
        } else {
            return Err(Error::new_spanned(
                &attr,
                format!("only doc comments and `#[component(..)]` may be put on {what}"),
            ));
        }
    }
    Ok((docs, component))
}

impl Parse for FlagsInput {
    fn parse(input: ParseStream) -> Result<Self> {
        let (docs, component) = split_attrs(Attribute::parse_outer(input)?, "a flags type")?;
        let mut krate = None;
        for attr in &component {
            let options =
                attr.parse_args_with(Punctuated::<CrateOption, Token![,]>::parse_terminated)?;
            for CrateOption(path) in options {
                if krate.replace(path).is_some() {
                    return Err(Error::new_spanned(
                        attr,
                        "`wasmtime_crate` given more than once",
                    ));
                }
            }
        }
        if input.peek(Token![pub]) || input.peek(Token![struct]) {
            return Err(input.error(
                "write only the type's name, as in `flags! { Permissions { const READ; } }`: \
                 the generated struct is always `pub`",
            ));
        }
        if !input.peek(Ident) {
            return Err(input.error("expected the flags type's name, as in `Permissions { .. }`"));
        }
        let ident: Ident = input.parse()?;
        if !input.peek(syn::token::Brace) {
            return Err(input.error("expected `{` and the flags, as in `{ const READ; }`"));
        }
        let body;
        braced!(body in input);
        let mut flags = Vec::new();
        while !body.is_empty() {
            let (docs, component) = split_attrs(Attribute::parse_outer(&body)?, "a flag")?;
            if !body.peek(Token![const]) {
                return Err(body.error("expected a flag: `const NAME;`"));
            }
            body.parse::<Token![const]>()?;
            let flag: Ident = body.parse()?;
            if !body.is_empty() {
                if !body.peek(Token![;]) {
                    return Err(body.error("expected `;` after the flag's name"));
                }
                body.parse::<Token![;]>()?;
            }
            let name = component_name(&component, &flag)?;
            if let Some(earlier) = flags.iter().find(|f: &&Flag| f.ident == flag) {
                return Err(Error::new(
                    flag.span(),
                    format!("the flag `{}` is defined twice", earlier.ident),
                ));
            }
            flags.push(Flag {
                docs,
                ident: flag,
                name,
            });
        }
        check_unique(flags.iter().map(|f| &f.name))?;
        if !input.is_empty() {
            return Err(
                input.error("one flags type per `flags!`: invoke the macro again for another one")
            );
        }
        Ok(FlagsInput {
            docs,
            krate: krate.unwrap_or_else(|| Ident::new("wasmtime", Span::call_site()).into()),
            ident,
            flags,
        })
    }
}

/// Number of 32-bit words that hold `count` flags.
fn word_count(count: usize) -> usize {
    count.div_ceil(32)
}

/// The words of the set of every flag, out of `count`.
fn all_words(count: usize) -> Vec<u32> {
    (0..word_count(count))
        .map(|w| match count - w * 32 {
            n if n >= 32 => u32::MAX,
            n => (1u32 << n) - 1,
        })
        .collect()
}

impl FlagsInput {
    fn generate(&self) -> TokenStream {
        let FlagsInput {
            docs,
            krate,
            ident,
            flags,
        } = self;
        let component = quote!(#krate::component);
        let internal = quote!(#krate::component::__internal);
        let count = flags.len();
        let words = word_count(count);
        let all = all_words(count);
        let wit_names: Vec<&LitStr> = flags.iter().map(|f| &f.name).collect();
        let rust_names: Vec<String> = flags.iter().map(|f| f.ident.to_string()).collect();

        let type_doc = if docs.is_empty() {
            let list = wit_names
                .iter()
                .map(|n| format!("`{}`", n.value()))
                .collect::<Vec<_>>()
                .join(", ");
            let text = format!(" A set of the component flags {list}.");
            quote!(#[doc = #text])
        } else {
            quote!(#(#docs)*)
        };
        let constants = flags.iter().enumerate().map(|(i, flag)| {
            let Flag { docs, ident, name } = flag;
            let bits = (0..words).map(|w| if w == i / 32 { 1u32 << (i % 32) } else { 0 });
            let doc = if docs.is_empty() {
                let text = format!(" The flag `{}` alone.", name.value());
                quote!(#[doc = #text])
            } else {
                quote!(#(#docs)*)
            };
            quote! {
                #doc
                pub const #ident: Self = Self { bits: [#(#bits),*] };
            }
        });

        quote! {
            #type_doc
            #[derive(Clone, Copy, PartialEq, Eq, Hash)]
            pub struct #ident {
                bits: [u32; #words],
            }

            impl #ident {
                #(#constants)*

                /// The set of no flags.
                pub const fn empty() -> Self {
                    Self { bits: [0; #words] }
                }

                /// The set of every flag.
                pub const fn all() -> Self {
                    Self { bits: [#(#all),*] }
                }

                /// The set as 32-bit words: the flag declared `i`-th (from 0)
                /// is bit `i % 32` of word `i / 32`.
                pub const fn as_array(&self) -> [u32; #words] {
                    self.bits
                }

                /// Whether every flag of `other` is in this set.
                pub fn contains(&self, other: Self) -> bool {
                    (*self & other) == other
                }

                /// Whether this set and `other` have a flag in common.
                pub fn intersects(&self, other: Self) -> bool {
                    (*self & other) != Self::empty()
                }
            }

            impl ::core::default::Default for #ident {
                /// The set of no flags.
                fn default() -> Self {
                    Self::empty()
                }
            }

            impl ::core::fmt::Debug for #ident {
                /// The Rust names of the flags in the set, as `(READ|WRITE)`.
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    let names: [&str; #count] = [#(#rust_names),*];
                    f.write_str("(")?;
                    let mut separator = "";
                    for (i, name) in names.iter().enumerate() {
                        if self.bits[i / 32] & (1u32 << (i % 32)) != 0 {
                            f.write_str(separator)?;
                            f.write_str(name)?;
                            separator = "|";
                        }
                    }
                    f.write_str(")")
                }
            }

            impl ::core::ops::BitOrAssign for #ident {
                fn bitor_assign(&mut self, rhs: Self) {
                    for (word, other) in self.bits.iter_mut().zip(rhs.bits) {
                        *word |= other;
                    }
                }
            }

            impl ::core::ops::BitAndAssign for #ident {
                fn bitand_assign(&mut self, rhs: Self) {
                    for (word, other) in self.bits.iter_mut().zip(rhs.bits) {
                        *word &= other;
                    }
                }
            }

            impl ::core::ops::BitXorAssign for #ident {
                fn bitxor_assign(&mut self, rhs: Self) {
                    for (word, other) in self.bits.iter_mut().zip(rhs.bits) {
                        *word ^= other;
                    }
                }
            }

            impl ::core::ops::BitOr for #ident {
                type Output = Self;

                fn bitor(mut self, rhs: Self) -> Self {
                    self |= rhs;
                    self
                }
            }

            impl ::core::ops::BitAnd for #ident {
                type Output = Self;

                fn bitand(mut self, rhs: Self) -> Self {
                    self &= rhs;
                    self
                }
            }

            impl ::core::ops::BitXor for #ident {
                type Output = Self;

                fn bitxor(mut self, rhs: Self) -> Self {
                    self ^= rhs;
                    self
                }
            }

            impl ::core::ops::Not for #ident {
                type Output = Self;

                /// The flags not in this set.
                fn not(self) -> Self {
                    self ^ Self::all()
                }
            }

            #[automatically_derived]
            impl #component::ComponentType for #ident {
                fn typecheck(ty: &#internal::Type) -> #internal::anyhow::Result<()> {
                    #internal::typecheck_flags(ty, &[#(#wit_names),*])
                }
            }

            #[automatically_derived]
            impl #component::Lower for #ident {
                fn lower_flat(
                    &self,
                    _cx: &mut #internal::AbiContext<'_>,
                    _ty: &#internal::Type,
                    dst: &mut ::std::vec::Vec<#internal::CoreVal>,
                ) -> #internal::anyhow::Result<()> {
                    #internal::lower_flags(&self.bits, dst);
                    ::core::result::Result::Ok(())
                }

                fn store(
                    &self,
                    cx: &mut #internal::AbiContext<'_>,
                    ty: &#internal::Type,
                    offset: u64,
                ) -> #internal::anyhow::Result<()> {
                    #internal::store_flags(cx, ty, &self.bits, offset)
                }
            }

            #[automatically_derived]
            impl #component::Lift for #ident {
                fn lift_flat(
                    _cx: &mut #internal::AbiContext<'_>,
                    ty: &#internal::Type,
                    src: &mut #internal::FlatSource<'_>,
                ) -> #internal::anyhow::Result<Self> {
                    let words = #internal::lift_flags(ty, src)?;
                    let mut set = Self::empty();
                    for (word, lifted) in set.bits.iter_mut().zip(words) {
                        *word = lifted;
                    }
                    ::core::result::Result::Ok(set & Self::all())
                }

                fn load(
                    cx: &mut #internal::AbiContext<'_>,
                    ty: &#internal::Type,
                    offset: u64,
                ) -> #internal::anyhow::Result<Self> {
                    let words = #internal::load_flags(cx, ty, offset)?;
                    let mut set = Self::empty();
                    for (word, lifted) in set.bits.iter_mut().zip(words) {
                        *word = lifted;
                    }
                    ::core::result::Result::Ok(set & Self::all())
                }
            }
        }
    }
}
