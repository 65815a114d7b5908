//! Writing a [`ServiceDef`] out: the trait (methods as `impl Future + Send`),
//! the server adapter dispatching on the method index, and the typed client.

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use crate::parse::{MethodDef, ServiceDef};

pub fn expand(def: &ServiceDef, krate: &syn::Path) -> TokenStream {
    let trait_item = expand_trait(def, krate);
    let server = expand_server(def, krate);
    let client = expand_client(def, krate);
    quote! { #trait_item #server #client }
}

fn expand_trait(def: &ServiceDef, krate: &syn::Path) -> TokenStream {
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
        let stream_in = m
            .stream_in
            .iter()
            .map(|(n, t)| quote!(#n: #krate::Streaming<#t>));
        quote! {
            #(#attrs)*
            fn #name(&self, #cx_name: #cx_ty #(, #args)* #(, #stream_in)*)
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
    let arms = def.methods.iter().enumerate().filter(|(_, m)| !m.is_stream()).map(|(index, m)| {
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
    let kinds = def
        .methods
        .iter()
        .enumerate()
        .filter(|(_, m)| m.is_stream())
        .map(|(index, m)| {
            let index = Literal::usize_unsuffixed(index);
            let kind = match (m.stream_in.is_some(), m.stream_out.is_some()) {
                (true, true) => quote!(Bidi),
                (true, false) => quote!(ClientStream),
                _ => quote!(ServerStream),
            };
            quote! { #index => #krate::MethodKind::#kind, }
        });
    let stream_arms = def.methods.iter().enumerate().filter(|(_, m)| m.is_stream()).map(|(index, m)| {
        let index = Literal::usize_unsuffixed(index);
        let method = &m.name;
        let names: Vec<_> = m.args.iter().map(|(n, _)| n).collect();
        let types = m.args.iter().map(|(_, t)| t);
        let (take_in, pass_in) = match &m.stream_in {
            Some((n, _)) => (
                quote! { let #n = #krate::__private::incoming(__brisk_io.incoming, __brisk_serializer)?; },
                quote! { , #n },
            ),
            None => (quote! {}, quote! {}),
        };
        let send = match m.stream_out {
            Some(_) => quote! { #krate::__private::send_stream(__brisk_serializer, __brisk_io.out, __brisk_out).await },
            None => quote! { #krate::__private::send_one(__brisk_serializer, __brisk_io.out, __brisk_out).await },
        };
        quote! {
            #index => ::std::boxed::Box::pin(async move {
                let __brisk_serializer = __brisk_cx.serializer();
                let (#(#names,)*): (#(#types,)*) = #krate::__private::arguments(__brisk_serializer, &__brisk_body)?;
                #take_in
                let __brisk_out = <T as #trait_name>::#method(&*self.0, &__brisk_cx #(, #names)* #pass_in).await;
                #send
            }),
        }
    });
    let has_streams = def.methods.iter().any(|m| m.is_stream());
    let stream_fns = has_streams.then(|| quote! {
        fn method_kind(&self, __brisk_method: usize) -> #krate::MethodKind {
            match __brisk_method {
                #(#kinds)*
                _ => #krate::MethodKind::Unary,
            }
        }

        #[allow(unused_parens, clippy::unit_arg, clippy::let_unit_value)]
        fn stream(
            &self,
            __brisk_method: usize,
            __brisk_cx: #krate::Context,
            __brisk_body: #krate::__private::Bytes,
            __brisk_io: #krate::StreamIo,
        ) -> #krate::StreamFuture<'_> {
            match __brisk_method {
                #(#stream_arms)*
                __brisk_other => #krate::__private::unknown_stream(#service_name, __brisk_other),
            }
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

            #stream_fns
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
        match (&m.stream_in, &m.stream_out) {
            (None, Some(item)) => return quote! {
                #(#attrs)*
                pub async fn #name(&self #(, #params)*) -> ::core::result::Result<#krate::Streaming<#item>, #krate::RpcError> {
                    self.client
                        .server_stream(Self::SERVICE, #method_name, &(#(#names,)*), &self.options)
                        .await
                }
            },
            (Some((items, item)), out) => {
                let (ret, call) = match out {
                    Some(out) => (quote!(#krate::Streaming<#out>), quote!(bidi_stream)),
                    None => (quote!(#ok), quote!(client_stream)),
                };
                return quote! {
                    #(#attrs)*
                    pub async fn #name<__BriskItems>(&self #(, #params)*, #items: __BriskItems) -> ::core::result::Result<#ret, #krate::RpcError>
                    where
                        __BriskItems: #krate::Stream<Item = #item> + ::core::marker::Send + 'static,
                    {
                        self.client
                            .#call(Self::SERVICE, #method_name, &(#(#names,)*), #items, &self.options)
                            .await
                    }
                };
            }
            (None, None) => {}
        }
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
