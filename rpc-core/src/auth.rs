//! Token authentication: [`TokenAuth`] (server interceptor) and [`BearerToken`]
//! (client interceptor).
//!
//! The client puts `authorization: Bearer <token>` into every call's metadata;
//! the server accepts a call only when its `authorization` metadata (or, failing
//! that, `token`) holds one of the configured tokens, with or without the
//! `Bearer ` prefix, and answers every other call
//! [`RpcError::Unauthenticated`] before the handler runs. Over HTTP the same
//! metadata comes from the `x-brisk-meta-authorization` header and a rejection is
//! a `401`. Tokens are compared in constant time (for equal lengths), and every
//! configured token is compared, so the answer time does not tell which one
//! nearly matched.
//!
//! ```
//! use rpc_core::auth::{BearerToken, TokenAuth};
//!
//! let server_side = TokenAuth::new(["s3cret"]);
//! let client_side = BearerToken::new("s3cret");
//! # let _ = (server_side, client_side);
//! ```
//!
//! Tokens travel in the clear unless the connection is encrypted: use TLS.

use std::fmt;

use async_trait::async_trait;

use crate::{Interceptor, Next, RpcError, RpcRequest, RpcResponse};

/// The metadata key the token is read from and written to.
pub const AUTHORIZATION: &str = "authorization";
/// The metadata key read when `authorization` is absent.
pub const TOKEN: &str = "token";

/// Server interceptor: rejects calls without a valid token in their metadata.
#[derive(Clone)]
pub struct TokenAuth {
    tokens: Vec<Vec<u8>>,
}

impl fmt::Debug for TokenAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenAuth")
            .field("tokens", &self.tokens.len())
            .finish()
    }
}

impl TokenAuth {
    /// Accepts any of `tokens` (empty tokens are ignored, so they never match).
    pub fn new<I, T>(tokens: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        TokenAuth {
            tokens: tokens
                .into_iter()
                .map(|t| t.into().into_bytes())
                .filter(|t| !t.is_empty())
                .collect(),
        }
    }

    /// True when `presented` (with or without `Bearer `) is a configured token.
    pub fn accepts(&self, presented: &str) -> bool {
        let presented = presented
            .strip_prefix("Bearer ")
            .or_else(|| presented.strip_prefix("bearer "))
            .unwrap_or(presented)
            .trim()
            .as_bytes();
        // No early exit: every token is compared.
        self.tokens
            .iter()
            .fold(false, |found, t| found | constant_time_eq(t, presented))
    }
}

/// Compares `a` and `b` in time that depends only on their lengths (subtle's
/// `ConstantTimeEq`: no early exit on the first differing byte).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    bool::from(a.ct_eq(b))
}

#[async_trait]
impl Interceptor for TokenAuth {
    async fn call(&self, req: RpcRequest, next: Next<'_>) -> Result<RpcResponse, RpcError> {
        let presented = req
            .metadata()
            .get(AUTHORIZATION)
            .or_else(|| req.metadata().get(TOKEN));
        match presented {
            Some(token) if self.accepts(token) => next.run(req).await,
            _ => Err(RpcError::Unauthenticated(format!(
                "missing or invalid token in metadata `{AUTHORIZATION}`"
            ))),
        }
    }
}

/// Client interceptor: adds `authorization: Bearer <token>` to every call.
#[derive(Clone)]
pub struct BearerToken {
    value: String,
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BearerToken(..)")
    }
}

impl BearerToken {
    /// Sends `token` with every call.
    pub fn new(token: impl Into<String>) -> Self {
        BearerToken {
            value: format!("Bearer {}", token.into()),
        }
    }
}

#[async_trait]
impl Interceptor for BearerToken {
    async fn call(&self, mut req: RpcRequest, next: Next<'_>) -> Result<RpcResponse, RpcError> {
        if req.metadata().get(AUTHORIZATION).is_none() {
            req.metadata_mut().insert(AUTHORIZATION, self.value.clone());
        }
        next.run(req).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_configured_tokens_only() {
        let auth = TokenAuth::new(["alpha", "beta", ""]);
        assert!(auth.accepts("alpha"));
        assert!(auth.accepts("Bearer beta"));
        assert!(!auth.accepts("alph"));
        assert!(!auth.accepts("alphaa"));
        assert!(!auth.accepts(""));
        assert!(!auth.accepts("Bearer "));
    }

    #[test]
    fn constant_time_eq_matches_eq() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
    }
}
