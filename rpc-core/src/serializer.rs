//! [`SerializerKind`]: which serializer a frame body uses.
//!
//! Only the identity lives here (id, name, parsing); the encoders live in
//! `rpc-codec`, so that configs and error messages can name a serializer without
//! pulling the encoders in.

use std::fmt;
use std::str::FromStr;

use crate::RpcError;

/// Which serializer a frame body uses.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum SerializerKind {
    /// MessagePack via rmp-serde (structs as maps with field names, so they evolve safely).
    #[default]
    #[serde(alias = "messagepack")]
    MsgPack = 1,
    /// Protocol Buffers wire format (fields numbered by declaration order).
    #[serde(alias = "proto")]
    Protobuf = 2,
    /// JSON via serde_json.
    Json = 3,
}

impl SerializerKind {
    /// All serializers, in id order.
    pub const ALL: [SerializerKind; 3] = [
        SerializerKind::MsgPack,
        SerializerKind::Protobuf,
        SerializerKind::Json,
    ];

    /// The id written in frame headers.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// Looks an id up; an unknown id is [`RpcError::UnknownSerializer`].
    pub fn from_id(id: u8) -> Result<Self, RpcError> {
        match id {
            1 => Ok(SerializerKind::MsgPack),
            2 => Ok(SerializerKind::Protobuf),
            3 => Ok(SerializerKind::Json),
            other => Err(RpcError::UnknownSerializer(other)),
        }
    }

    /// The name used in configs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            SerializerKind::MsgPack => "msgpack",
            SerializerKind::Protobuf => "protobuf",
            SerializerKind::Json => "json",
        }
    }
}

impl fmt::Display for SerializerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SerializerKind {
    type Err = RpcError;

    fn from_str(s: &str) -> Result<Self, RpcError> {
        match s.to_ascii_lowercase().as_str() {
            "msgpack" | "messagepack" | "rmp" => Ok(SerializerKind::MsgPack),
            "protobuf" | "proto" | "pb" => Ok(SerializerKind::Protobuf),
            "json" => Ok(SerializerKind::Json),
            other => Err(RpcError::config(
                "serializer",
                format!("unknown serializer `{other}` (expected msgpack, protobuf or json)"),
            )),
        }
    }
}
