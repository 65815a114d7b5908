//! The Hello service shared by `hello_server` and `hello_client`.

brisk::service! {
    /// Greets people.
    pub trait Hello {
        /// A greeting for `name`.
        async fn greet(name: String) -> String;
    }
}
