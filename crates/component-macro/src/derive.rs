//! `#[derive(ComponentType, Lift, Lower)]` for records (`struct`s with
//! named fields), variants (`enum`s whose cases carry at most one payload)
//! and enums (`enum`s of unit cases).
//!
//! The input is first read into an [`Item`] (every attribute checked, every
//! component name fixed), then each derive writes its one `impl` from it.
//! The three derives read the same input, so a mistake is reported by each
//! of them at the same place; the compiler shows it once.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Attribute, Data, DeriveInput, Error, Generics, Ident, LitStr, Path, Result, Token, Type,
};

/// Which trait to implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Derive {
    ComponentType,
    Lift,
    Lower,
}

/// Expands one derive, or returns the compile error that explains why the
/// input cannot be derived.
pub(crate) fn expand(which: Derive, input: TokenStream) -> TokenStream {
    try_expand(which, input).unwrap_or_else(|e| e.to_compile_error())
}

pub(crate) fn try_expand(which: Derive, input: TokenStream) -> Result<TokenStream> {
    let input: DeriveInput = syn::parse2(input)?;
    let item = Item::read(&input)?;
    Ok(match which {
        Derive::ComponentType => item.component_type(),
        Derive::Lift => item.lift(),
        Derive::Lower => item.lower(),
    })
}

/// The interface type a Rust type stands for, as `#[component(..)]` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Record,
    Variant,
    Enum,
}

/// One option of a type's `#[component(..)]` attribute.
enum TypeOption {
    Kind(Kind, Span),
    Crate(Path, Span),
}

const TYPE_OPTIONS: &str = "expected `record`, `variant`, `enum` or `wasmtime_crate = path`";

impl Parse for TypeOption {
    fn parse(input: ParseStream) -> Result<Self> {
        if input.peek(Token![enum]) {
            let token: Token![enum] = input.parse()?;
            return Ok(TypeOption::Kind(Kind::Enum, token.span));
        }
        if !input.peek(Ident::peek_any) {
            return Err(input.error(TYPE_OPTIONS));
        }
        let word = Ident::parse_any(input)?;
        let span = word.span();
        match word.to_string().as_str() {
            "record" => Ok(TypeOption::Kind(Kind::Record, span)),
            "variant" => Ok(TypeOption::Kind(Kind::Variant, span)),
            "wasmtime_crate" => {
                input.parse::<Token![=]>()?;
                Ok(TypeOption::Crate(Path::parse_mod_style(input)?, span))
            }
            "flags" => Err(Error::new(
                span,
                "flags types are not derived: define them with `wasmtime::component::flags!`",
            )),
            "name" => Err(Error::new(
                span,
                "`name = \"..\"` belongs on a field or a case, not on the type \
                 (the Rust type's own name does not matter to the component)",
            )),
            other => Err(Error::new(
                span,
                format!("unknown `component` option `{other}`: {TYPE_OPTIONS}"),
            )),
        }
    }
}

/// The one option a field, a case or a flag takes: `name = "wit-name"`.
struct NameOption(LitStr);

impl Parse for NameOption {
    fn parse(input: ParseStream) -> Result<Self> {
        const EXPECTED: &str = "expected `name = \"..\"`";
        if !input.peek(Ident::peek_any) {
            return Err(input.error(EXPECTED));
        }
        let word = Ident::parse_any(input)?;
        if word != "name" {
            return Err(Error::new(
                word.span(),
                format!("unknown `component` option `{word}` here: {EXPECTED}"),
            ));
        }
        input.parse::<Token![=]>()?;
        if !input.peek(LitStr) {
            return Err(input.error("expected a string literal: `name = \"..\"`"));
        }
        Ok(NameOption(input.parse()?))
    }
}

/// The component name of a field, case or flag: its `#[component(name =
/// "..")]`, or else its Rust identifier as written (without `r#`).
pub(crate) fn component_name(attrs: &[Attribute], ident: &Ident) -> Result<LitStr> {
    let mut name: Option<LitStr> = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("component")) {
        let options =
            attr.parse_args_with(Punctuated::<NameOption, Token![,]>::parse_terminated)?;
        for NameOption(lit) in options {
            if name.is_some() {
                return Err(Error::new(lit.span(), "`name` given more than once"));
            }
            if lit.value().is_empty() {
                return Err(Error::new(lit.span(), "a component name cannot be empty"));
            }
            name = Some(lit);
        }
    }
    Ok(name.unwrap_or_else(|| LitStr::new(&ident.unraw().to_string(), ident.span())))
}

/// Fails if two of `names` are the same component name (the component
/// could never have such a type).
pub(crate) fn check_unique<'a>(names: impl IntoIterator<Item = &'a LitStr>) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for name in names {
        if !seen.insert(name.value()) {
            return Err(Error::new(
                name.span(),
                format!("the component name `{}` is used twice", name.value()),
            ));
        }
    }
    Ok(())
}

/// A record field.
struct Field<'a> {
    member: &'a Ident,
    ty: &'a Type,
    name: LitStr,
}

/// A variant or enum case.
struct Case<'a> {
    ident: &'a Ident,
    payload: Option<&'a Type>,
    name: LitStr,
}

enum Shape<'a> {
    Record(Vec<Field<'a>>),
    Variant(Vec<Case<'a>>),
    Enum(Vec<Case<'a>>),
}

/// The derive input, checked.
struct Item<'a> {
    ident: &'a Ident,
    generics: &'a Generics,
    /// The path of the `wasmtime` crate (`wasmtime` unless
    /// `wasmtime_crate = ..` says otherwise).
    krate: Path,
    shape: Shape<'a>,
}

impl<'a> Item<'a> {
    fn read(input: &'a DeriveInput) -> Result<Item<'a>> {
        let mut kind: Option<(Kind, Span)> = None;
        let mut krate: Option<Path> = None;
        for attr in input
            .attrs
            .iter()
            .filter(|a| a.path().is_ident("component"))
        {
            let options =
                attr.parse_args_with(Punctuated::<TypeOption, Token![,]>::parse_terminated)?;
            for option in options {
                match option {
                    TypeOption::Kind(k, span) => {
                        if kind.replace((k, span)).is_some() {
                            return Err(Error::new(
                                span,
                                "only one of `record`, `variant` and `enum` may be given",
                            ));
                        }
                    }
                    TypeOption::Crate(path, span) => {
                        if krate.replace(path).is_some() {
                            return Err(Error::new(span, "`wasmtime_crate` given more than once"));
                        }
                    }
                }
            }
        }
        let Some((kind, kind_span)) = kind else {
            return Err(Error::new_spanned(
                &input.ident,
                "missing `#[component(record)]`, `#[component(variant)]` or \
                 `#[component(enum)]`: say which component type this Rust type stands for",
            ));
        };
        let shape = match kind {
            Kind::Record => Shape::Record(read_record(input, kind_span)?),
            Kind::Variant => Shape::Variant(read_cases(input, Kind::Variant, kind_span)?),
            Kind::Enum => {
                let cases = read_cases(input, Kind::Enum, kind_span)?;
                check_enum(input, cases.len())?;
                Shape::Enum(cases)
            }
        };
        Ok(Item {
            ident: &input.ident,
            generics: &input.generics,
            krate: krate.unwrap_or_else(|| Ident::new("wasmtime", Span::call_site()).into()),
            shape,
        })
    }
}

/// What a Rust `struct`/`enum`/`union` is, for error messages.
fn data_desc(data: &Data) -> &'static str {
    match data {
        Data::Struct(_) => "a `struct`",
        Data::Enum(_) => "an `enum`",
        Data::Union(_) => "a `union`",
    }
}

fn read_record(input: &DeriveInput, kind_span: Span) -> Result<Vec<Field<'_>>> {
    let Data::Struct(data) = &input.data else {
        return Err(Error::new(
            kind_span,
            format!(
                "`record` needs a `struct` with named fields, and `{}` is {} \
                 (use `variant` or `enum` for an `enum`)",
                input.ident,
                data_desc(&input.data)
            ),
        ));
    };
    let syn::Fields::Named(named) = &data.fields else {
        return Err(Error::new(
            match &data.fields {
                syn::Fields::Unnamed(f) => f.span(),
                _ => input.ident.span(),
            },
            "`record` needs a `struct` with named fields (`struct S { a: u32 }`): \
             record fields have names",
        ));
    };
    let fields = named
        .named
        .iter()
        .map(|f| {
            let Some(member) = f.ident.as_ref() else {
                return Err(Error::new(f.span(), "a record field needs a name"));
            };
            Ok(Field {
                member,
                ty: &f.ty,
                name: component_name(&f.attrs, member)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    check_unique(fields.iter().map(|f| &f.name))?;
    Ok(fields)
}

fn read_cases(input: &DeriveInput, kind: Kind, kind_span: Span) -> Result<Vec<Case<'_>>> {
    let word = if kind == Kind::Variant {
        "variant"
    } else {
        "enum"
    };
    let Data::Enum(data) = &input.data else {
        return Err(Error::new(
            kind_span,
            format!(
                "`{word}` needs a Rust `enum`, and `{}` is {} (use `record` for a `struct`)",
                input.ident,
                data_desc(&input.data)
            ),
        ));
    };
    if data.variants.is_empty() {
        return Err(Error::new_spanned(
            &input.ident,
            format!("a component `{word}` needs at least one case"),
        ));
    }
    let cases = data
        .variants
        .iter()
        .map(|v| {
            let payload = match (&v.fields, kind) {
                (syn::Fields::Unit, _) => None,
                (syn::Fields::Unnamed(f), Kind::Variant) if f.unnamed.len() == 1 => {
                    Some(&f.unnamed[0].ty)
                }
                (syn::Fields::Unnamed(f), Kind::Variant) => {
                    return Err(Error::new(
                        f.span(),
                        format!(
                            "a variant case has no payload or exactly one, and `{}` has {}: \
                             make several values one tuple, `{}((A, B))`, or a record",
                            v.ident,
                            f.unnamed.len(),
                            v.ident
                        ),
                    ));
                }
                (syn::Fields::Named(f), Kind::Variant) => {
                    return Err(Error::new(
                        f.span(),
                        format!(
                            "a variant case's payload is one unnamed value, as in `{}(T)`: \
                             make the named fields a record type",
                            v.ident
                        ),
                    ));
                }
                (fields, _) => {
                    return Err(Error::new(
                        fields.span(),
                        format!(
                            "enum cases have no payload, and `{}` has one \
                             (use `#[component(variant)]` for cases with payloads)",
                            v.ident
                        ),
                    ));
                }
            };
            Ok(Case {
                ident: &v.ident,
                payload,
                name: component_name(&v.attrs, &v.ident)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    check_unique(cases.iter().map(|c| &c.name))?;
    Ok(cases)
}

/// The Rust integer type of a component enum's discriminant.
fn discriminant_repr(cases: usize) -> &'static str {
    if cases <= 1 << 8 {
        "u8"
    } else if cases <= 1 << 16 {
        "u16"
    } else {
        "u32"
    }
}

/// What `#[component(enum)]` requires beyond unit cases, as upstream
/// Wasmtime does: a `#[repr(..)]` of the discriminant's size, no explicit
/// discriminants and no generics.
fn check_enum(input: &DeriveInput, cases: usize) -> Result<()> {
    if let Some(param) = input.generics.params.first() {
        return Err(Error::new_spanned(
            param,
            "a component `enum` cannot be generic",
        ));
    }
    if let Some(clause) = &input.generics.where_clause {
        return Err(Error::new_spanned(
            clause,
            "a component `enum` cannot have a `where` clause",
        ));
    }
    let Data::Enum(data) = &input.data else {
        return Ok(()); // read_cases has refused anything else already
    };
    if let Some((_, expr)) = data.variants.iter().find_map(|v| v.discriminant.as_ref()) {
        return Err(Error::new_spanned(
            expr,
            "a component `enum` numbers its cases in order: remove the explicit discriminant",
        ));
    }
    let want = discriminant_repr(cases);
    let mut found = false;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("repr")) {
        let ok = attr.parse_args::<Ident>().is_ok_and(|repr| repr == want);
        if !ok {
            return Err(Error::new_spanned(
                attr,
                format!(
                    "a component `enum` of {cases} cases needs exactly `#[repr({want})]`, \
                     the size of its discriminant"
                ),
            ));
        }
        found = true;
    }
    if !found {
        return Err(Error::new_spanned(
            data.enum_token,
            format!(
                "missing `#[repr({want})]`: a component `enum` of {cases} cases \
                 is represented by its discriminant's type"
            ),
        ));
    }
    Ok(())
}

/// `generics` with `bound` added to every type parameter.
fn bounded(generics: &Generics, bound: &TokenStream) -> Generics {
    let mut generics = generics.clone();
    for param in generics.type_params_mut() {
        param.bounds.push(syn::parse_quote!(#bound));
    }
    generics
}

/// The match pattern of a case, with its payload (if any) bound to
/// `payload`.
fn case_pattern(case: &Case<'_>) -> TokenStream {
    let ident = case.ident;
    if case.payload.is_some() {
        quote!(Self::#ident(payload))
    } else {
        quote!(Self::#ident)
    }
}

impl Item<'_> {
    fn component(&self) -> TokenStream {
        let krate = &self.krate;
        quote!(#krate::component)
    }

    fn internal(&self) -> TokenStream {
        let krate = &self.krate;
        quote!(#krate::component::__internal)
    }

    /// `impl<..> #krate::component::#trait_name for Ident<..> { #body }`,
    /// with every type parameter bound by the same trait.
    fn implement(&self, trait_name: &str, body: TokenStream) -> TokenStream {
        let component = self.component();
        let trait_name = Ident::new(trait_name, Span::call_site());
        let generics = bounded(self.generics, &quote!(#component::#trait_name));
        let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
        let ident = self.ident;
        quote! {
            #[automatically_derived]
            impl #impl_generics #component::#trait_name for #ident #ty_generics #where_clause {
                #body
            }
        }
    }

    fn component_type(&self) -> TokenStream {
        let component = self.component();
        let internal = self.internal();
        let check = |ty: &Type| {
            let f = quote_spanned!(ty.span()=> <#ty as #component::ComponentType>::typecheck);
            quote!(#f as fn(&#internal::Type) -> #internal::anyhow::Result<()>)
        };
        let body = match &self.shape {
            Shape::Record(fields) => {
                let entries = fields.iter().map(|f| {
                    let name = &f.name;
                    let check = check(f.ty);
                    quote!((#name, #check))
                });
                quote!(#internal::typecheck_record(ty, &[#(#entries),*]))
            }
            Shape::Variant(cases) => {
                let entries = cases.iter().map(|c| {
                    let name = &c.name;
                    match c.payload {
                        Some(ty) => {
                            let check = check(ty);
                            quote!((#name, ::core::option::Option::Some(#check)))
                        }
                        None => quote!((#name, ::core::option::Option::None)),
                    }
                });
                quote!(#internal::typecheck_variant(ty, &[#(#entries),*]))
            }
            Shape::Enum(cases) => {
                let names = cases.iter().map(|c| &c.name);
                quote!(#internal::typecheck_enum(ty, &[#(#names),*]))
            }
        };
        self.implement(
            "ComponentType",
            quote! {
                fn typecheck(ty: &#internal::Type) -> #internal::anyhow::Result<()> {
                    #body
                }
            },
        )
    }

    fn lower(&self) -> TokenStream {
        let component = self.component();
        let internal = self.internal();
        let (flat, store) = match &self.shape {
            Shape::Record(fields) if fields.is_empty() => (
                quote! {
                    #internal::Fields::of(ty)?;
                    let _ = (cx, dst);
                    ::core::result::Result::Ok(())
                },
                quote! {
                    #internal::Fields::of(ty)?;
                    let _ = (cx, offset);
                    ::core::result::Result::Ok(())
                },
            ),
            Shape::Record(fields) => {
                let flat = fields.iter().map(|f| {
                    let (member, ty) = (f.member, f.ty);
                    let lower = quote_spanned!(ty.span()=> <#ty as #component::Lower>::lower_flat);
                    quote!(#lower(&self.#member, cx, fields.next_flat()?, dst)?;)
                });
                let stored = fields.iter().map(|f| {
                    let (member, ty) = (f.member, f.ty);
                    let store = quote_spanned!(ty.span()=> <#ty as #component::Lower>::store);
                    quote! {
                        let (field_ty, at) = fields.next_stored()?;
                        #store(&self.#member, cx, field_ty, offset + at)?;
                    }
                });
                (
                    quote! {
                        let mut fields = #internal::Fields::of(ty)?;
                        #(#flat)*
                        ::core::result::Result::Ok(())
                    },
                    quote! {
                        let mut fields = #internal::Fields::of(ty)?;
                        #(#stored)*
                        ::core::result::Result::Ok(())
                    },
                )
            }
            Shape::Variant(cases) => {
                let arms = |helper: TokenStream, last: TokenStream| {
                    let arms = cases.iter().enumerate().map(|(index, case)| {
                        let index = index as u32;
                        let pattern = case_pattern(case);
                        match case.payload {
                            Some(ty) => quote! {
                                #pattern => #helper::<#ty>(
                                    cx, ty, #index, ::core::option::Option::Some(payload), #last)
                            },
                            None => quote! {
                                #pattern => #helper::<()>(
                                    cx, ty, #index, ::core::option::Option::None, #last)
                            },
                        }
                    });
                    quote!(match self { #(#arms,)* })
                };
                (
                    arms(quote!(#internal::lower_case_flat), quote!(dst)),
                    arms(quote!(#internal::store_case), quote!(offset)),
                )
            }
            Shape::Enum(cases) => {
                let arms = cases.iter().enumerate().map(|(index, case)| {
                    let index = index as u32;
                    let ident = case.ident;
                    quote!(Self::#ident => #index)
                });
                let index = quote!(let case: u32 = match self { #(#arms,)* };);
                (
                    quote! {
                        #index
                        #internal::lower_case_flat::<()>(
                            cx, ty, case, ::core::option::Option::None, dst)
                    },
                    quote! {
                        #index
                        #internal::store_case::<()>(
                            cx, ty, case, ::core::option::Option::None, offset)
                    },
                )
            }
        };
        self.implement(
            "Lower",
            quote! {
                fn lower_flat(
                    &self,
                    cx: &mut #internal::AbiContext<'_>,
                    ty: &#internal::Type,
                    dst: &mut ::std::vec::Vec<#internal::CoreVal>,
                ) -> #internal::anyhow::Result<()> {
                    #flat
                }

                fn store(
                    &self,
                    cx: &mut #internal::AbiContext<'_>,
                    ty: &#internal::Type,
                    offset: u64,
                ) -> #internal::anyhow::Result<()> {
                    #store
                }
            },
        )
    }

    fn lift(&self) -> TokenStream {
        let component = self.component();
        let internal = self.internal();
        // Whether lift_flat reads anything with `cx` (named `_cx` if not).
        let mut flat_uses_cx = true;
        let (flat, load) = match &self.shape {
            Shape::Record(fields) => {
                let flat = fields.iter().map(|f| {
                    let (member, ty) = (f.member, f.ty);
                    let lift = quote_spanned!(ty.span()=> <#ty as #component::Lift>::lift_flat);
                    quote!(#member: #lift(cx, fields.next_flat()?, src)?)
                });
                let loaded = fields.iter().map(|f| {
                    let (member, ty) = (f.member, f.ty);
                    let load = quote_spanned!(ty.span()=> <#ty as #component::Lift>::load);
                    quote! {
                        #member: {
                            let (field_ty, at) = fields.next_stored()?;
                            #load(cx, field_ty, offset + at)?
                        }
                    }
                });
                if fields.is_empty() {
                    flat_uses_cx = false;
                    (
                        quote! {
                            #internal::Fields::of(ty)?;
                            let _ = src;
                            ::core::result::Result::Ok(Self {})
                        },
                        quote! {
                            #internal::Fields::of(ty)?;
                            let _ = (cx, offset);
                            ::core::result::Result::Ok(Self {})
                        },
                    )
                } else {
                    (
                        quote! {
                            let mut fields = #internal::Fields::of(ty)?;
                            ::core::result::Result::Ok(Self { #(#flat,)* })
                        },
                        quote! {
                            let mut fields = #internal::Fields::of(ty)?;
                            ::core::result::Result::Ok(Self { #(#loaded,)* })
                        },
                    )
                }
            }
            Shape::Variant(cases) | Shape::Enum(cases) => {
                flat_uses_cx = cases.iter().any(|c| c.payload.is_some());
                let arms = cases.iter().enumerate().map(|(index, case)| {
                    let index = index as u32;
                    let ident = case.ident;
                    match case.payload {
                        Some(ty) => quote! {
                            #index => ::core::result::Result::Ok(
                                Self::#ident(case.payload::<#ty>(cx)?))
                        },
                        None => quote!(#index => ::core::result::Result::Ok(Self::#ident)),
                    }
                });
                let select = quote! {
                    match case.index() {
                        #(#arms,)*
                        other => ::core::result::Result::Err(#internal::unknown_case(other)),
                    }
                };
                (
                    quote! {
                        let case = #internal::FlatCase::read(ty, src)?;
                        #select
                    },
                    quote! {
                        let case = #internal::StoredCase::read(cx, ty, offset)?;
                        #select
                    },
                )
            }
        };
        let flat_cx = if flat_uses_cx {
            quote!(cx)
        } else {
            quote!(_cx)
        };
        self.implement(
            "Lift",
            quote! {
                fn lift_flat(
                    #flat_cx: &mut #internal::AbiContext<'_>,
                    ty: &#internal::Type,
                    src: &mut #internal::FlatSource<'_>,
                ) -> #internal::anyhow::Result<Self> {
                    #flat
                }

                fn load(
                    cx: &mut #internal::AbiContext<'_>,
                    ty: &#internal::Type,
                    offset: u64,
                ) -> #internal::anyhow::Result<Self> {
                    #load
                }
            },
        )
    }
}
