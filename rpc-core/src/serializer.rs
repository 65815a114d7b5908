//! [`SerializerKind`]: which serializer a frame body uses.
//!
//! Only the identity lives here (id, name, parsing); the encoders live in
//! `rpc-codec`, so that configs and error messages can name a serializer without
//! pulling the encoders in.

use crate::RpcError;

crate::named_enum! {
    /// Which serializer a frame body uses.
    #[derive(Default)]
    #[repr(u8)]
    pub enum SerializerKind: "serializer" {
        /// MessagePack via rmp-serde (structs as maps with field names, so they evolve safely).
        #[default]
        MsgPack = 1 => "msgpack" | "messagepack" | "rmp",
        /// Protocol Buffers wire format (fields numbered by declaration order).
        Protobuf = 2 => "protobuf" | "proto" | "pb",
        /// JSON via serde_json.
        Json = 3 => "json",
    }
}

impl SerializerKind {
    /// The id written in frame headers.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// Looks an id up; an unknown id is [`RpcError::UnknownSerializer`].
    pub fn from_id(id: u8) -> Result<Self, RpcError> {
        SerializerKind::ALL
            .iter()
            .copied()
            .find(|s| s.id() == id)
            .ok_or(RpcError::UnknownSerializer(id))
    }
}
