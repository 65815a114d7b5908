//! Writing a [`ServiceDef`] out: the trait (methods as `impl Future + Send`),
//! the server adapter dispatching on the method index, and the typed client.

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use crate::parse::{MethodDef, ServiceDef};

pub fn expand(def: &ServiceDef, krate: &syn::Path) -> TokenStream {
    let trait_item = expand_trait(def);
    let server = expand_server(def, krate);
    let client = expand_client(def, krate);
    quote! { #trait_item #server #client }
}

fn expand_trait(def: &ServiceDef) -> TokenStream {
    let ServiceDef {
        attrs, vis, name, ..
    } = def;
    let methods = def.methods.iter().map(|m| {
        let MethodDef {
            attrs,
            name,
            cx_name,
            cx_ty,
            ret,
            ..
        } = m;
        let args = m.args.iter().map(|(n, t)| quote!(#n: #t));
        quote! {
            #(#attrs)*
            fn #name(&self, #cx_name: #cx_ty #(, #args)*)
                -> impl ::core::future::Future<Output = #ret> + ::core::marker::Send;
        }
    });
    quote! {
        #(#attrs)*
        #vis trait #name: ::core::marker::Send + ::core::marker::Sync + 'static {
            #(#methods)*
        }
    }
}

fn expand_server(def: &ServiceDef, krate: &syn::Path) -> TokenStream {
    let ServiceDef { vis, name, .. } = def;
    let server = format_ident!("{}Server", name);
    let service_name = name.to_string();
    let method_names = def.methods.iter().map(|m| m.name.to_string());
    let doc = format!(
        "Serves a [`{name}`] implementation: `Server::builder().service({server}::new(imp))`."
    );
    let trait_name = name;
    let arms = def.methods.iter().enumerate().map(|(index, m)| {
        let index = Literal::usize_unsuffixed(index);
        let method = &m.name;
        let names: Vec<_> = m.args.iter().map(|(n, _)| n).collect();
        let types = m.args.iter().map(|(_, t)| t);
        // The generated locals are prefixed so that no argument name of the
        // user's (`cx`, `body`, `serializer`…) can shadow them.
        quote! {
            #index => ::std::boxed::Box::pin(async move {
                let __brisk_serializer = __brisk_cx.serializer();
                let (#(#names,)*): (#(#types,)*) = __brisk_serializer.decode_bytes(&__brisk_body)?;
                let __brisk_out = <T as #trait_name>::#method(&*self.0, &__brisk_cx #(, #names)*).await;
                #krate::__private::answer(__brisk_serializer, __brisk_cx, __brisk_out)
            }),
        }
    });
    quote! {
        #[doc = #doc]
        #vis struct #server<T>(::std::sync::Arc<T>);

        impl<T: #name> #server<T> {
            /// Wraps an implementation.
            pub fn new(service: T) -> Self {
                Self(::std::sync::Arc::new(service))
            }

            /// Wraps an implementation that is shared elsewhere too.
            pub fn from_arc(service: ::std::sync::Arc<T>) -> Self {
                Self(service)
            }
        }

        impl<T: #name> #krate::ServiceHandler for #server<T> {
            fn service_name(&self) -> &'static str {
                #service_name
            }

            fn method_names(&self) -> &'static [&'static str] {
                &[#(#method_names),*]
            }

            #[allow(unused_parens, clippy::unit_arg, clippy::let_unit_value)]
            fn call(
                &self,
                __brisk_method: usize,
                __brisk_cx: #krate::Context,
                __brisk_body: #krate::__private::Bytes,
            ) -> #krate::HandlerFuture<'_> {
                use #krate::__private::BodyCodec as _;
                match __brisk_method {
                    #(#arms)*
                    __brisk_other => #krate::__private::unknown_method(#service_name, __brisk_other),
                }
            }
        }
    }
}

fn expand_client(def: &ServiceDef, krate: &syn::Path) -> TokenStream {
    let ServiceDef { vis, name, .. } = def;
    let client = format_ident!("{}Client", name);
    let service_name = name.to_string();
    let doc = format!("Typed client of [`{name}`].");
    let methods = def.methods.iter().map(|m| {
        let MethodDef {
            attrs, name, ok, ..
        } = m;
        let method_name = name.to_string();
        let params = m.args.iter().map(|(n, t)| quote!(#n: #t));
        let names = m.args.iter().map(|(n, _)| n);
        quote! {
            #(#attrs)*
            pub async fn #name(&self #(, #params)*) -> ::core::result::Result<#ok, #krate::RpcError> {
                self.client
                    .call(Self::SERVICE, #method_name, &(#(#names,)*), &self.options)
                    .await
            }
        }
    });
    quote! {
        #[doc = #doc]
        #[derive(Clone)]
        #vis struct #client {
            client: #krate::Client,
            options: #krate::CallOptions,
        }

        impl #client {
            /// The service name on the wire.
            pub const SERVICE: &'static str = #service_name;

            /// Calls the service through `client`.
            pub fn new(client: #krate::Client) -> Self {
                Self { client, options: #krate::CallOptions::default() }
            }

            /// A copy whose calls use `options` (timeout, metadata, serializer…).
            pub fn with_options(&self, options: #krate::CallOptions) -> Self {
                Self { client: self.client.clone(), options }
            }

            /// A copy whose calls are made on behalf of the call `cx` serves:
            /// they inherit its remaining deadline and trace metadata and are
            /// cancelled with it.
            pub fn with_context(&self, cx: &#krate::Context) -> Self {
                self.with_options(#krate::CallOptions::from(cx))
            }

            /// The untyped client underneath.
            pub fn client(&self) -> &#krate::Client {
                &self.client
            }

            #(#methods)*
        }
    }
}
