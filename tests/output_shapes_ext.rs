//! The `onnxGetOutputShapesRUST` extension, called in-process: output types and shapes for
//! given input shapes (a symbolic batch bound per call), the capacity protocol (FALLBACK with
//! the rank written when a shape array is too small), and the statuses of bad calls.

use onnxifi_rust::ffi::api::*;
use onnxifi_rust::ffi::ext::*;
use onnxifi_rust::ffi::types::*;
use onnxifi_rust::text::parse_model;
use prost::Message;
use std::ffi::CString;
use std::os::raw::c_void;

const MODEL: &str = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 3] x) => (float[N, 3] y, int64[2] s) {
    y = Relu(x)
    s = Shape(y)
}"#;

/// A backend and a graph of [`MODEL`] (leaked: the process ends with the test binary).
fn graph() -> onnxGraph {
    let bytes = parse_model(MODEL).expect("parses").encode_to_vec();
    let mut id: onnxBackendID = std::ptr::null_mut();
    let mut n = 1usize;
    let mut backend: onnxBackend = std::ptr::null_mut();
    let mut graph: onnxGraph = std::ptr::null_mut();
    // SAFETY: valid out-pointers and a live model buffer for each call.
    unsafe {
        assert_eq!(onnxGetBackendIDs(&mut id, &mut n), ONNXIFI_STATUS_SUCCESS);
        assert_eq!(
            onnxInitBackend(id, std::ptr::null(), &mut backend),
            ONNXIFI_STATUS_SUCCESS
        );
        let st = onnxInitGraph(
            backend,
            std::ptr::null(),
            bytes.len(),
            bytes.as_ptr() as *const c_void,
            0,
            std::ptr::null(),
            &mut graph,
        );
        assert_eq!(st, ONNXIFI_STATUS_SUCCESS);
    }
    graph
}

/// A descriptor of a float tensor (the outputs' type field is overwritten by the call).
fn descriptor(name: &CString, shape: &mut [u64], rank: u32) -> onnxTensorDescriptorV1 {
    onnxTensorDescriptorV1 {
        tag: ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1,
        name: name.as_ptr(),
        dataType: ONNXIFI_DATATYPE_FLOAT32,
        memoryType: ONNXIFI_MEMORY_TYPE_CPU,
        dimensions: rank,
        shape: shape.as_mut_ptr(),
        buffer: 0,
    }
}

#[test]
fn output_shapes_follow_the_input_shapes_and_the_capacity_protocol() {
    let g = graph();
    let (x, y, s) = (
        CString::new("x").unwrap(),
        CString::new("y").unwrap(),
        CString::new("s").unwrap(),
    );
    for batch in [1u64, 5] {
        let mut xs = [batch, 3];
        let inputs = [descriptor(&x, &mut xs, 2)];
        let (mut ys, mut ss) = ([9u64; 4], [9u64; 4]);
        let mut outputs = [descriptor(&y, &mut ys, 4), descriptor(&s, &mut ss, 4)];
        outputs[1].dataType = 0;
        // SAFETY: descriptor arrays of the stated counts over live shape arrays.
        let st = unsafe { onnxGetOutputShapesRUST(g, 1, inputs.as_ptr(), 2, outputs.as_mut_ptr()) };
        assert_eq!(st, ONNXIFI_STATUS_SUCCESS);
        assert_eq!((outputs[0].dimensions, outputs[0].dataType), (2, 1)); // float
        assert_eq!((outputs[1].dimensions, outputs[1].dataType), (1, 7)); // int64
        assert_eq!(&ys[..2], &[batch, 3]);
        assert_eq!(ss[0], 2);
    }
    // A capacity of 1 for a rank-2 output: FALLBACK, rank written, shape untouched, the other
    // output still filled.
    let mut xs = [4u64, 3];
    let inputs = [descriptor(&x, &mut xs, 2)];
    let (mut ys, mut ss) = ([9u64; 1], [9u64; 1]);
    let mut outputs = [descriptor(&y, &mut ys, 1), descriptor(&s, &mut ss, 1)];
    // SAFETY: as above.
    let st = unsafe { onnxGetOutputShapesRUST(g, 1, inputs.as_ptr(), 2, outputs.as_mut_ptr()) };
    assert_eq!(st, ONNXIFI_STATUS_FALLBACK);
    assert_eq!(outputs[0].dimensions, 2);
    assert_eq!(ys[0], 9);
    assert_eq!((outputs[1].dimensions, ss[0]), (1, 2));
}

#[test]
fn bad_calls_get_a_status_and_write_nothing() {
    let g = graph();
    let (x, y, z) = (
        CString::new("x").unwrap(),
        CString::new("y").unwrap(),
        CString::new("z").unwrap(),
    );
    let mut ys = [9u64; 4];
    let mut xs = [2u64, 4];
    let call = |inputs: &[onnxTensorDescriptorV1], outputs: &mut [onnxTensorDescriptorV1]| {
        // SAFETY: descriptor slices of the stated lengths over live shape arrays.
        unsafe {
            onnxGetOutputShapesRUST(
                g,
                inputs.len() as u32,
                inputs.as_ptr(),
                outputs.len() as u32,
                outputs.as_mut_ptr(),
            )
        }
    };
    // Wrong inner dimension: the declaration says 3.
    let mut outputs = [descriptor(&y, &mut ys, 4)];
    let st = call(&[descriptor(&x, &mut xs, 2)], &mut outputs);
    assert_eq!(st, ONNXIFI_STATUS_MISMATCHING_SHAPE);
    assert_eq!((outputs[0].dimensions, ys[0]), (4, 9));
    // No input described; an unknown output name; a stale graph handle.
    assert_eq!(call(&[], &mut outputs), ONNXIFI_STATUS_UNIDENTIFIED_NAME);
    let mut xs = [2u64, 3];
    let mut unknown = [descriptor(&z, &mut ys, 4)];
    assert_eq!(
        call(&[descriptor(&x, &mut xs, 2)], &mut unknown),
        ONNXIFI_STATUS_INVALID_NAME
    );
    // SAFETY: the graph made above, released once; the call after it passes the stale handle.
    unsafe {
        assert_eq!(onnxReleaseGraph(g), ONNXIFI_STATUS_SUCCESS);
        let mut xs = [2u64, 3];
        let inputs = [descriptor(&x, &mut xs, 2)];
        let mut ys = [0u64; 4];
        let mut outputs = [descriptor(&y, &mut ys, 4)];
        assert_eq!(
            onnxGetOutputShapesRUST(g, 1, inputs.as_ptr(), 1, outputs.as_mut_ptr()),
            ONNXIFI_STATUS_INVALID_GRAPH
        );
    }
}
