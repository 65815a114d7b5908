//! [`CallOptions`]: what a single call may override — and what a call made
//! from inside a handler inherits from the call it serves
//! (`CallOptions::from(&cx)`).

use std::time::{Duration, Instant};

use rpc_core::{CancelSignal, Context, Metadata, SerializerKind, WriteMode};

/// Per-call settings; anything left `None` falls back to the client's config.
#[derive(Debug, Clone, Default)]
pub struct CallOptions {
    /// Timeout of this call (beats the per-method and the default timeout).
    pub timeout: Option<Duration>,
    /// A deadline the call must not outlive, whatever its timeout (a parent
    /// call's: the time left is measured when the call starts).
    pub deadline: Option<Instant>,
    /// Metadata sent with the call.
    pub metadata: Metadata,
    /// Serializer for this call.
    pub serializer: Option<SerializerKind>,
    /// Write mode for this call.
    pub write_mode: Option<WriteMode>,
    /// The key the `consistent_hash` balancer places this call by: calls with
    /// the same key go to the same server (other balancers ignore it).
    pub hash_key: Option<String>,
    /// Whether this call may run twice (beats `idempotent_methods`): an
    /// idempotent call is also retried after a failure that may have come
    /// after the server ran it (see `ClientConfig::max_try_count`).
    pub idempotent: Option<bool>,
    /// The call gives up (with `Cancelled`, sending the server a `Cancel`)
    /// once this token is cancelled: a parent call's, say.
    pub cancel: Option<CancelSignal>,
}

impl From<&Context> for CallOptions {
    /// The options of a call made on behalf of the call `cx` serves: its
    /// deadline (each call made with these options gets the time left when
    /// it starts), its trace metadata ([`Context::inherited_metadata`])
    /// and its cancellation.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use rpc_client::CallOptions;
    /// use rpc_core::{Context, SerializerKind};
    ///
    /// let parent = Context::new(1, SerializerKind::MsgPack).with_timeout(Duration::from_millis(300));
    /// let options = CallOptions::from(&parent);
    /// assert_eq!(options.deadline, parent.deadline());
    /// parent.cancel();
    /// assert!(options.cancel.unwrap().is_cancelled());
    /// ```
    fn from(cx: &Context) -> Self {
        CallOptions {
            deadline: cx.deadline(),
            metadata: cx.inherited_metadata(),
            cancel: Some(cx.cancellation().clone()),
            ..CallOptions::default()
        }
    }
}

impl CallOptions {
    /// Options with a timeout.
    pub fn timeout(timeout: Duration) -> Self {
        CallOptions {
            timeout: Some(timeout),
            ..CallOptions::default()
        }
    }

    /// Adds a metadata entry.
    pub fn with_metadata(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.metadata.insert(key, value);
        self
    }

    /// Sets the timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the serializer.
    pub fn with_serializer(mut self, serializer: SerializerKind) -> Self {
        self.serializer = Some(serializer);
        self
    }

    /// Marks the call as safe to run twice (or not), whatever the config says.
    pub fn with_idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = Some(idempotent);
        self
    }

    /// Gives up the call once `signal` is cancelled.
    pub fn with_cancel(mut self, signal: CancelSignal) -> Self {
        self.cancel = Some(signal);
        self
    }

    /// Sets the consistent-hash key (a user id, a cache key…).
    pub fn with_hash_key(mut self, key: impl Into<String>) -> Self {
        self.hash_key = Some(key.into());
        self
    }
}
