//! The ONNX protobuf schema as prost types, and decoding of serialized models.
#![forbid(unsafe_code)]

/// Prost types generated from `proto/onnx.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod onnx {
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

use crate::error::{Error, Result, Status};
use prost::Message;

/// Largest serialized model accepted (protobuf's own 2 GiB limit).
pub const MAX_MODEL_BYTES: usize = i32::MAX as usize;

/// Decodes a serialized `ModelProto`.
pub fn decode(bytes: &[u8]) -> Result<onnx::ModelProto> {
    if bytes.is_empty() {
        return Err(Error::new(Status::InvalidSize, "the model is empty"));
    }
    if bytes.len() > MAX_MODEL_BYTES {
        return Err(Error::new(Status::InvalidSize, "the model exceeds 2 GiB"));
    }
    onnx::ModelProto::decode(bytes).map_err(|e| {
        Error::new(
            Status::InvalidProtobuf,
            format!("not a valid ModelProto: {e}"),
        )
    })
}
