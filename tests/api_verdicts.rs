//! The verdicts of `onnxGetBackendCompatibility` and `onnxInitGraph`, called in-process: the
//! status, and the message (read with the `onnxGetLastErrorMessage` extension) naming the spec
//! rule or the unsupported node. Models are written in the ONNX text syntax.

use onnxifi_rust::ffi::api::*;
use onnxifi_rust::ffi::ext::*;
use onnxifi_rust::ffi::types::*;
use onnxifi_rust::text::parse_model;
use prost::Message;
use std::os::raw::c_void;

fn backend_id() -> onnxBackendID {
    let mut id: onnxBackendID = std::ptr::null_mut();
    let mut n = 1usize;
    // SAFETY: valid out-pointers for one ID.
    assert_eq!(
        unsafe { onnxGetBackendIDs(&mut id, &mut n) },
        ONNXIFI_STATUS_SUCCESS
    );
    id
}

fn last_message() -> String {
    let mut buf = vec![0u8; 4096];
    let mut len = buf.len();
    // SAFETY: the buffer holds `len` bytes.
    let st = unsafe { onnxGetLastErrorMessage(buf.as_mut_ptr().cast(), &mut len) };
    assert_eq!(st, ONNXIFI_STATUS_SUCCESS);
    String::from_utf8_lossy(&buf[..len - 1]).into_owned()
}

/// Compatibility status and message for a model in text syntax.
fn verdict(text: &str) -> (onnxStatus, String) {
    let bytes = parse_model(text)
        .unwrap_or_else(|e| panic!("{e}"))
        .encode_to_vec();
    let id = backend_id();
    // SAFETY: `bytes` is alive for the call.
    let st =
        unsafe { onnxGetBackendCompatibility(id, bytes.len(), bytes.as_ptr() as *const c_void) };
    let msg = if st == ONNXIFI_STATUS_SUCCESS {
        String::new()
    } else {
        last_message()
    };
    // SAFETY: a live ID.
    assert_eq!(unsafe { onnxReleaseBackendID(id) }, ONNXIFI_STATUS_SUCCESS);
    (st, msg)
}

#[test]
fn a_supported_model_is_compatible() {
    let (st, msg) = verdict(
        r#"<ir_version: 8, opset_import: ["" : 13]>
        g (float[1, 4] x) => (float[1, 4] y) {
            h = Relu(x)
            y = Sigmoid(h)
        }"#,
    );
    assert_eq!(st, ONNXIFI_STATUS_SUCCESS, "{msg}");
}

#[test]
fn a_spec_violation_names_the_rule_and_the_node() {
    // 'z' is used by node 'second' but produced by nobody.
    let (st, msg) = verdict(
        r#"<ir_version: 8, opset_import: ["" : 13]>
        g (float[2] x) => (float[2] y) {
            [first] h = Relu(x)
            [second] y = Add(h, z)
        }"#,
    );
    assert_eq!(st, ONNXIFI_STATUS_INVALID_MODEL, "{msg}");
    assert!(
        msg.contains("input-not-produced") && msg.contains("second"),
        "{msg}"
    );
}

#[test]
fn an_unsupported_operator_names_the_node_and_the_op() {
    let (st, msg) = verdict(
        r#"<ir_version: 8, opset_import: ["" : 15]>
        g (float[2] x) => (float[2] y) {
            [the_node] y = Bernoulli(x)
        }"#,
    );
    assert_eq!(st, ONNXIFI_STATUS_UNSUPPORTED_OPERATOR, "{msg}");
    assert!(
        msg.contains("the_node") && msg.contains("Bernoulli"),
        "{msg}"
    );
}

#[test]
fn an_attribute_the_operator_does_not_declare_is_an_invalid_model() {
    let (st, msg) = verdict(
        r#"<ir_version: 8, opset_import: ["" : 13]>
        g (float[2] x) => (float[2] y) {
            [r] y = Relu <color = 3> (x)
        }"#,
    );
    assert_eq!(st, ONNXIFI_STATUS_INVALID_MODEL, "{msg}");
    assert!(
        msg.contains("attribute-known") && msg.contains("color") && msg.contains("'r'"),
        "{msg}"
    );
}

#[test]
fn a_declared_attribute_value_the_backend_cannot_honour_is_unsupported() {
    // Add version 6 declares the legacy `broadcast`/`axis` attributes; this backend does not
    // implement axis-aligned broadcasting.
    let (st, msg) = verdict(
        r#"<ir_version: 3, opset_import: ["" : 6]>
        g (float[2, 3] x, float[2] b) => (float[2, 3] y) {
            [a] y = Add <broadcast = 1, axis = 0> (x, b)
        }"#,
    );
    assert_eq!(st, ONNXIFI_STATUS_UNSUPPORTED_ATTRIBUTE, "{msg}");
    assert!(msg.contains("axis") && msg.contains("'a'"), "{msg}");
}

#[test]
fn a_contradicting_output_shape_is_a_mismatch() {
    let (st, msg) = verdict(
        r#"<ir_version: 8, opset_import: ["" : 13]>
        g (float[2, 3] x) => (float[3, 3] y) {
            y = Relu(x)
        }"#,
    );
    assert_eq!(st, ONNXIFI_STATUS_MISMATCHING_SHAPE, "{msg}");
}

#[test]
fn an_unsupported_type_is_unsupported() {
    let (st, _) = verdict(
        r#"<ir_version: 8, opset_import: ["" : 14]>
        g (int16[2] x) => (int16[2] y) {
            y = Relu(x)
        }"#,
    );
    assert_eq!(st, ONNXIFI_STATUS_UNSUPPORTED_DATATYPE);
}

#[test]
fn a_newer_opset_than_supported_is_unsupported_version() {
    let (st, _) = verdict(
        r#"<ir_version: 8, opset_import: ["" : 99]>
        g (float[2] x) => (float[2] y) {
            y = Relu(x)
        }"#,
    );
    assert_eq!(st, ONNXIFI_STATUS_UNSUPPORTED_VERSION);
}

#[test]
fn a_newer_ir_version_than_supported_is_unsupported_version() {
    let (st, msg) = verdict(
        r#"<ir_version: 1000, opset_import: ["" : 13]>
        g (float[2] x) => (float[2] y) {
            y = Relu(x)
        }"#,
    );
    assert_eq!(st, ONNXIFI_STATUS_UNSUPPORTED_VERSION, "{msg}");
    assert!(msg.contains("IR version 1000"), "{msg}");
}

#[test]
fn a_model_too_large_for_memory_is_refused_not_aborted() {
    let (st, msg) = verdict(
        r#"<ir_version: 8, opset_import: ["" : 13]>
        g (float[1000000, 1000000, 1000] x) => (float[1000000, 1000000, 1000] y) {
            y = Relu(x)
        }"#,
    );
    assert_eq!(st, ONNXIFI_STATUS_NO_SYSTEM_MEMORY, "{msg}");
}
