//! rpc-transport
