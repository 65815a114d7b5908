//! `#[brisk::service]`: one trait becomes the server's dispatch and a typed
//! client.
//!
//! The attribute goes on a plain trait of native `async fn`s, each taking
//! `&self`, the call's context and the arguments, and returning
//! `Result<T, E>` with `E: Into<Status>`:
//!
//! ```text
//! #[brisk::service]
//! pub trait Hello {
//!     async fn greet(&self, cx: &Context, name: String) -> Result<String, Status>;
//! }
//! ```
//!
//! It expands to
//! - the trait itself, its methods desugared to `fn … -> impl Future + Send`
//!   so that every implementation's future is `Send` (implementations write
//!   plain `async fn`; no `async_trait`);
//! - `HelloServer<T: Hello>`, a `ServiceHandler` that dispatches on the
//!   method *index* the router resolved (no second string match);
//! - `HelloClient`, one method per call with the same arguments (minus the
//!   context), plus `with_options` and `with_context` for per-call options
//!   or a parent call's deadline, trace metadata and cancellation.
//!
//! A method streams when its `Ok` type is `impl Stream<Item = Result<T,
//! E>> + Send` (a server stream) and/or its last parameter is a
//! `Streaming<T>` (a client stream; both: bidirectional). The server
//! adapter then implements `ServiceHandler::stream` for it (sending each
//! item as credit allows, a client stream's one answer as one item), and the
//! client method returns a `Streaming<T>` and/or takes any `Stream` of the
//! caller's items.
//!
//! Generated code names the facade as `::brisk`; a crate that renames it
//! says so: `#[brisk::service(crate = my_brisk)]`.
//!
//! The files: `parse.rs` reads the trait into a `ServiceDef` (with errors
//! pointing at the offending tokens), `expand.rs` writes the three items.

mod expand;
mod parse;

use proc_macro::TokenStream;

/// Defines a brisk service from a trait; see the crate docs.
#[proc_macro_attribute]
pub fn service(attr: TokenStream, item: TokenStream) -> TokenStream {
    let krate = match parse::crate_path(attr.into()) {
        Ok(path) => path,
        Err(e) => return e.to_compile_error().into(),
    };
    let item = syn::parse_macro_input!(item as syn::ItemTrait);
    match parse::ServiceDef::from_trait(item) {
        Ok(def) => expand::expand(&def, &krate).into(),
        Err(e) => e.to_compile_error().into(),
    }
}
