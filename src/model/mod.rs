//! The ONNX protobuf schema as prost types, and decoding of serialized models.
#![forbid(unsafe_code)]

/// Prost types generated from `proto/onnx.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod onnx {
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

pub mod wire;

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
    // Decoding cannot fail gracefully on allocation: bound its memory first.
    if let Some(size) = wire::decoded_size(bytes) {
        let limit = crate::backend::memory_limit();
        if size.decoded_bytes > limit {
            return Err(Error::new(
                Status::NoSystemMemory,
                format!(
                    "decoding the model ({} bytes, {} nodes) could take up to {} bytes, more than the {limit} this process may use",
                    bytes.len(),
                    size.nodes,
                    size.decoded_bytes
                ),
            ));
        }
    }
    onnx::ModelProto::decode(bytes).map_err(|e| {
        Error::new(
            Status::InvalidProtobuf,
            format!("not a valid ModelProto: {e}"),
        )
    })
}
