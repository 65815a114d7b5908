//! placeholder until the protobuf serde module lands
use bytes::BytesMut;
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PbError(pub String);
impl std::fmt::Display for PbError { fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str(&self.0) } }
pub fn encode<T: serde::Serialize + ?Sized>(_v: &T, _out: &mut BytesMut) -> Result<(), PbError> { Err(PbError("todo".into())) }
pub fn decode<T: serde::de::DeserializeOwned>(_b: &[u8]) -> Result<T, PbError> { Err(PbError("todo".into())) }
