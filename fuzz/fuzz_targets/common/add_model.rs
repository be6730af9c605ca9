//! The `C = Add(A, B)` model on `float[2,3]`, models from ONNX text and graphs made from them.

use onnxifi_rust::ffi::api::onnxInitGraph;
use onnxifi_rust::ffi::types::*;
use prost::Message;

/// `C = Add(A, B)` on `float[2,3]` tensors, as ONNX text.
pub const ADD: &str = r#"<ir_version: 8, opset_import: ["" : 14]>
add (float[2,3] A, float[2,3] B) => (float[2,3] C) { C = Add(A, B) }"#;

/// The serialized model of an ONNX text (which must parse).
pub fn encode(text: &str) -> Vec<u8> {
    onnxifi_rust::text::parse_model(text)
        .expect("the model text parses")
        .encode_to_vec()
}

/// A graph of `model` (serialized, without weights) on a live backend; it must compile.
pub fn init_graph(backend: onnxBackend, model: &[u8]) -> onnxGraph {
    let mut g: onnxGraph = std::ptr::null_mut();
    // SAFETY: a live backend, the model's bytes, no weights, a writable out-handle.
    let s = unsafe {
        onnxInitGraph(
            backend,
            std::ptr::null(),
            model.len(),
            model.as_ptr().cast(),
            0,
            std::ptr::null(),
            &mut g,
        )
    };
    assert_eq!(s, ONNXIFI_STATUS_SUCCESS, "the model compiles");
    g
}
