//! Reading a service trait: its name, visibility and attributes, and per
//! method the name, the context parameter, the arguments and the result
//! type. Anything the expansion cannot serve (generics, a default body, a
//! method that is not `async`, a pattern argument, a result that is not a
//! `Result`) is an error at the tokens that caused it.

use proc_macro2::TokenStream;
use syn::spanned::Spanned;
use syn::{
    Attribute, FnArg, GenericArgument, Ident, ItemTrait, Pat, PathArguments, ReturnType, TraitItem,
    Type, Visibility,
};

/// A service trait, read.
pub struct ServiceDef {
    pub attrs: Vec<Attribute>,
    pub vis: Visibility,
    pub name: Ident,
    pub methods: Vec<MethodDef>,
}

/// One method of the service.
pub struct MethodDef {
    pub attrs: Vec<Attribute>,
    pub name: Ident,
    /// The context parameter as written (`cx`, `_cx`).
    pub cx_name: Ident,
    pub cx_ty: Type,
    pub args: Vec<(Ident, Type)>,
    /// The whole return type, as written (`Result<T, Status>`).
    pub ret: Type,
    /// `T` of the `Result`.
    pub ok: Type,
    /// A client stream: the last parameter, `name: Streaming<T>` (its name
    /// and `T`); it is not in `args`.
    pub stream_in: Option<(Ident, Type)>,
    /// A server stream: the `X` of an `Ok` type `impl Stream<Item =
    /// Result<X, E>>`.
    pub stream_out: Option<Type>,
}

impl MethodDef {
    /// Whether the method streams either way.
    pub fn is_stream(&self) -> bool {
        self.stream_in.is_some() || self.stream_out.is_some()
    }
}

/// Names the generated client defines itself, or that would shadow its
/// `Clone`.
const RESERVED: [&str; 5] = ["new", "client", "with_options", "with_context", "clone"];

/// The facade path from `crate = path` in the attribute (`::brisk` without).
pub fn crate_path(attr: TokenStream) -> syn::Result<syn::Path> {
    let mut krate: syn::Path = syn::parse_quote!(::brisk);
    if attr.is_empty() {
        return Ok(krate);
    }
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("crate") {
            krate = meta.value()?.parse()?;
            Ok(())
        } else {
            Err(meta.error("unknown argument; the only one is `crate = path::to::brisk`"))
        }
    });
    syn::parse::Parser::parse2(parser, attr)?;
    Ok(krate)
}

impl ServiceDef {
    pub fn from_trait(item: ItemTrait) -> syn::Result<ServiceDef> {
        if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
            return Err(syn::Error::new(
                item.generics.span(),
                "a service trait takes no generics: its methods travel by name",
            ));
        }
        if let Some(unsafety) = item.unsafety {
            return Err(syn::Error::new(
                unsafety.span(),
                "a service trait is not unsafe",
            ));
        }
        let mut methods = Vec::new();
        for entry in item.items {
            match entry {
                TraitItem::Fn(f) => methods.push(MethodDef::from_fn(f)?),
                other => {
                    return Err(syn::Error::new(
                        other.span(),
                        "a service trait holds only `async fn` methods",
                    ))
                }
            }
        }
        Ok(ServiceDef {
            attrs: item.attrs,
            vis: item.vis,
            name: item.ident,
            methods,
        })
    }
}

impl MethodDef {
    fn from_fn(f: syn::TraitItemFn) -> syn::Result<MethodDef> {
        let sig = &f.sig;
        if let Some(body) = &f.default {
            return Err(syn::Error::new(
                body.span(),
                "service methods have no default body: the server's type implements them",
            ));
        }
        if sig.asyncness.is_none() {
            return Err(syn::Error::new(
                sig.fn_token.span(),
                "service methods are `async fn`",
            ));
        }
        if !sig.generics.params.is_empty() {
            return Err(syn::Error::new(
                sig.generics.span(),
                "service methods take no generics: their arguments are decoded by type",
            ));
        }
        if RESERVED.contains(&sig.ident.to_string().as_str()) {
            return Err(syn::Error::new(
                sig.ident.span(),
                format!(
                    "`{}` names a method of the generated client; call the service method something else",
                    sig.ident
                ),
            ));
        }
        if let Some(attr) = f.attrs.iter().find(|a| a.path().is_ident("cfg")) {
            return Err(syn::Error::new(
                attr.span(),
                "`#[cfg]` on a service method is not supported: the server, the client and the method table must agree",
            ));
        }
        let mut inputs = sig.inputs.iter();
        match inputs.next() {
            Some(FnArg::Receiver(r)) if r.reference.is_some() && r.mutability.is_none() => {}
            _ => {
                return Err(syn::Error::new(
                    sig.inputs.span(),
                    "the first parameter of a service method is `&self`",
                ))
            }
        }
        let typed = |arg: &FnArg| -> syn::Result<(Ident, Type)> {
            match arg {
                FnArg::Typed(t) => match &*t.pat {
                    Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                        Ok((p.ident.clone(), (*t.ty).clone()))
                    }
                    other => Err(syn::Error::new(
                        other.span(),
                        "name each parameter with a plain identifier",
                    )),
                },
                FnArg::Receiver(r) => Err(syn::Error::new(r.span(), "`self` comes first")),
            }
        };
        let (cx_name, cx_ty) = match inputs.next() {
            Some(arg) => typed(arg)?,
            None => return Err(syn::Error::new(
                sig.inputs.span(),
                "the second parameter of a service method is the call's context: `cx: &Context`",
            )),
        };
        if !matches!(cx_ty, Type::Reference(ref r) if r.mutability.is_none()) {
            return Err(syn::Error::new(
                cx_ty.span(),
                "the second parameter of a service method is the call's context, by shared reference: `cx: &Context`",
            ));
        }
        let mut args = inputs.map(typed).collect::<syn::Result<Vec<_>>>()?;
        if let Some(at) = args.iter().position(|(_, t)| streaming_item(t).is_some()) {
            if at + 1 != args.len() {
                return Err(syn::Error::new(
                    args[at].1.span(),
                    "a `Streaming<T>` parameter comes last: the other arguments travel when the stream opens",
                ));
            }
        }
        let last_item = args.last().and_then(|(_, t)| streaming_item(t)).cloned();
        let stream_in = match last_item {
            Some(item) => args.pop().map(|(name, _)| (name, item)),
            None => None,
        };
        let ret = match &sig.output {
            ReturnType::Type(_, ty) => (**ty).clone(),
            ReturnType::Default => {
                return Err(syn::Error::new(
                    sig.span(),
                    "a service method returns `Result<T, Status>`",
                ))
            }
        };
        let ok = result_ok_type(&ret)?;
        let stream_out = stream_item(&ok)?;
        Ok(MethodDef {
            attrs: f.attrs,
            name: sig.ident.clone(),
            cx_name,
            cx_ty,
            args,
            ret,
            ok,
            stream_in,
            stream_out,
        })
    }
}

/// `T` of a `Streaming<T>` (any path ending in `Streaming` with one type argument).
fn streaming_item(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    if last.ident != "Streaming" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    match args.args.iter().collect::<Vec<_>>().as_slice() {
        [GenericArgument::Type(t)] => Some(t),
        _ => None,
    }
}

/// For an `Ok` type `impl Stream<Item = Result<X, E>> + …`, `X`; `None` for
/// any other type. An `impl Stream` whose items are not `Result`s is refused.
fn stream_item(ok: &Type) -> syn::Result<Option<Type>> {
    let Type::ImplTrait(imp) = ok else {
        return Ok(None);
    };
    for bound in &imp.bounds {
        let syn::TypeParamBound::Trait(t) = bound else {
            continue;
        };
        let Some(last) = t.path.segments.last() else {
            continue;
        };
        if last.ident != "Stream" {
            continue;
        }
        let item = match &last.arguments {
            PathArguments::AngleBracketed(args) => args.args.iter().find_map(|a| match a {
                GenericArgument::AssocType(b) if b.ident == "Item" => Some(&b.ty),
                _ => None,
            }),
            _ => None,
        };
        let refuse = || {
            syn::Error::new(
                t.span(),
                "a server stream returns `Result<impl Stream<Item = Result<T, Status>> + Send, Status>`",
            )
        };
        let item = item.ok_or_else(refuse)?;
        return result_ok_type(item).map(Some).map_err(|_| refuse());
    }
    Err(syn::Error::new(
        imp.span(),
        "the only `impl Trait` a service method may return is `impl Stream<Item = Result<T, Status>> + Send`",
    ))
}

/// `T` of a `Result<T, E>` (any path ending in `Result` with two type arguments).
fn result_ok_type(ret: &Type) -> syn::Result<Type> {
    let not_result = || syn::Error::new(ret.span(), "a service method returns `Result<T, Status>`");
    let Type::Path(path) = ret else {
        return Err(not_result());
    };
    let last = path.path.segments.last().ok_or_else(not_result)?;
    if last.ident != "Result" {
        return Err(not_result());
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return Err(not_result());
    };
    let types: Vec<&Type> = args
        .args
        .iter()
        .filter_map(|a| match a {
            GenericArgument::Type(t) => Some(t),
            _ => None,
        })
        .collect();
    match types.as_slice() {
        [ok, _err] => Ok((*ok).clone()),
        _ => Err(not_result()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(tokens: TokenStream) -> syn::Result<ServiceDef> {
        ServiceDef::from_trait(syn::parse2(tokens).expect("a trait"))
    }

    fn error(tokens: TokenStream) -> String {
        match read(tokens) {
            Ok(_) => panic!("accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_service_trait_is_read_method_by_method() {
        let def = read(quote::quote! {
            /// Greets.
            pub trait Hello {
                async fn greet(&self, cx: &Context, name: String, times: u32) -> Result<String, Status>;
                async fn ping(&self, _cx: &Context) -> Result<(), Status>;
            }
        })
        .unwrap();
        assert_eq!(def.name, "Hello");
        assert_eq!(def.methods.len(), 2);
        let greet = &def.methods[0];
        assert_eq!(greet.name, "greet");
        assert_eq!(greet.cx_name, "cx");
        let args: Vec<String> = greet.args.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(args, ["name", "times"]);
        let ok = &greet.ok;
        assert_eq!(quote::quote!(#ok).to_string(), "String");
        assert!(def.methods[1].args.is_empty());
    }

    #[test]
    fn what_cannot_be_served_is_refused_with_a_reason() {
        let cases = [
            (
                quote::quote! { trait S { fn f(&self, cx: &Context) -> Result<(), Status>; } },
                "are `async fn`",
            ),
            (
                quote::quote! { trait S { async fn f(&self, cx: &Context) -> String; } },
                "returns `Result<T, Status>`",
            ),
            (
                quote::quote! { trait S { async fn f(&self, cx: &Context); } },
                "returns `Result<T, Status>`",
            ),
            (
                quote::quote! { trait S { async fn f(&self, cx: Context) -> Result<(), Status>; } },
                "`cx: &Context`",
            ),
            (
                quote::quote! { trait S { async fn f(&self) -> Result<(), Status>; } },
                "the call's context",
            ),
            (
                quote::quote! { trait S { async fn f(cx: &Context) -> Result<(), Status>; } },
                "`&self`",
            ),
            (
                quote::quote! { trait S<T> { async fn f(&self, cx: &Context) -> Result<T, Status>; } },
                "no generics",
            ),
            (
                quote::quote! { trait S { async fn f(&self, cx: &Context) -> Result<(), Status> { Ok(()) } } },
                "no default body",
            ),
            (
                quote::quote! { trait S { const N: u32; } },
                "only `async fn`",
            ),
            (
                quote::quote! { trait S { async fn new(&self, cx: &Context) -> Result<(), Status>; } },
                "generated client",
            ),
            (
                quote::quote! { trait S { #[cfg(test)] async fn f(&self, cx: &Context) -> Result<(), Status>; } },
                "`#[cfg]`",
            ),
        ];
        for (tokens, expected) in cases {
            let text = tokens.to_string();
            let message = error(tokens);
            assert!(message.contains(expected), "{text}: {message}");
        }
    }

    #[test]
    fn streams_are_read_from_their_types() {
        let def = read(quote::quote! {
            trait S {
                async fn watch(&self, cx: &Context, from: u64) -> Result<impl Stream<Item = Result<Event, Status>> + Send, Status>;
                async fn upload(&self, cx: &Context, name: String, chunks: Streaming<Chunk>) -> Result<u64, Status>;
                async fn chat(&self, cx: &Context, lines: brisk::Streaming<Line>) -> Result<impl Stream<Item = Result<Line, Status>> + Send, Status>;
                async fn plain(&self, cx: &Context) -> Result<(), Status>;
            }
        })
        .unwrap();
        let kinds: Vec<(bool, bool)> = def
            .methods
            .iter()
            .map(|m| (m.stream_in.is_some(), m.stream_out.is_some()))
            .collect();
        assert_eq!(
            kinds,
            [(false, true), (true, false), (true, true), (false, false)]
        );
        let upload = &def.methods[1];
        assert_eq!(upload.args.len(), 1, "the stream is not an argument");
        let (name, item) = upload.stream_in.as_ref().unwrap();
        assert_eq!(name, "chunks");
        assert_eq!(quote::quote!(#item).to_string(), "Chunk");
        let out = def.methods[0].stream_out.as_ref().unwrap();
        assert_eq!(quote::quote!(#out).to_string(), "Event");
    }

    #[test]
    fn misplaced_or_misshapen_streams_are_refused() {
        for (tokens, says) in [
            (
                quote::quote! { trait S { async fn f(&self, cx: &Context, s: Streaming<u8>, n: u32) -> Result<(), Status>; } },
                "comes last",
            ),
            (
                quote::quote! { trait S { async fn f(&self, cx: &Context) -> Result<impl Stream<Item = u8> + Send, Status>; } },
                "Result<impl Stream",
            ),
            (
                quote::quote! { trait S { async fn f(&self, cx: &Context) -> Result<impl Iterator<Item = u8>, Status>; } },
                "only `impl Trait`",
            ),
        ] {
            let e = error(tokens);
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn the_crate_path_can_be_renamed() {
        let path = crate_path(quote::quote!(crate = my_brisk)).unwrap();
        assert_eq!(quote::quote!(#path).to_string(), "my_brisk");
        assert!(crate_path(quote::quote!(krate = x)).is_err());
    }
}
