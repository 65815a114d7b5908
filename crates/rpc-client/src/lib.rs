//! rpc-client
