//! The Hello service shared by `hello_server` and `hello_client`.

use brisk::{Context, Status};

/// Greets people.
#[brisk::service]
pub trait Hello {
    /// A greeting for `name`.
    async fn greet(&self, cx: &Context, name: String) -> Result<String, Status>;
}
