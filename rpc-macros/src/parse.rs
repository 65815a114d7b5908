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
        let args = inputs.map(typed).collect::<syn::Result<Vec<_>>>()?;
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
        Ok(MethodDef {
            attrs: f.attrs,
            name: sig.ident.clone(),
            cx_name,
            cx_ty,
            args,
            ret,
            ok,
        })
    }
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
    fn the_crate_path_can_be_renamed() {
        let path = crate_path(quote::quote!(crate = my_brisk)).unwrap();
        assert_eq!(quote::quote!(#path).to_string(), "my_brisk");
        assert!(crate_path(quote::quote!(krate = x)).is_err());
    }
}
