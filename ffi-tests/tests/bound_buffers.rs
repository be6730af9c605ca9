//! Bound buffers through the C ABI: the library reads float32 inputs and writes float32 outputs
//! in the caller's buffers when they are aligned and overlap no other binding, and copies
//! otherwise. Whichever it does, a run must give the values a copying backend gives: these
//! tests bind buffers that share memory (an output over its own input, partly or wholly),
//! misaligned buffers, and outputs of kernels that replace their storage, and compare with
//! hand-computed values over several runs.

use onnxifi_ffi_tests::status::*;
use onnxifi_ffi_tests::*;
use prost::Message;
use std::ffi::c_void;

/// The bytes of a model written in the ONNX text syntax.
fn text_model(text: &str) -> Vec<u8> {
    onnxifi_rust::text::parse_model(text)
        .expect("the test model parses")
        .encode_to_vec()
}

fn set_io(g: Handle, inputs: &[TensorDescriptor], outputs: &[TensorDescriptor]) -> i32 {
    // SAFETY: descriptor arrays of the given lengths over buffers that outlive the runs.
    unsafe {
        (api().set_graph_io)(
            g,
            inputs.len() as u32,
            inputs.as_ptr(),
            outputs.len() as u32,
            outputs.as_ptr(),
        )
    }
}

fn run(b: &Backend, g: Handle, what: &str) {
    let (s, w) = run_once(b, g);
    expect(s, SUCCESS, what);
    expect(w.expect("ran"), SUCCESS, what);
}

/// `x` (2×3, row-major) transposed.
fn transposed(x: &[f32]) -> Vec<f32> {
    (0..6).map(|k| x[(k % 2) * 3 + k / 2]).collect()
}

const S23: [u64; 2] = [2, 3];
const S32: [u64; 2] = [3, 2];
const S22: [u64; 2] = [2, 2];

#[test]
fn separate_buffers_give_hand_computed_values_on_every_run() {
    let b = Backend::new();
    let g = b.graph(&text_model(
        r#"
        <ir_version: 8, opset_import: ["" : 13]>
        agraph (float[2, 3] X) => (float[2, 2] Y, float[2, 3] R, float[3, 2] T)
            <float[3, 2] W = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}> {
            Y = MatMul(X, W)
            R = Relu(X)
            T = Transpose(X)
        }"#,
    ));
    let mut x = vec![0.0f32; 6];
    let (mut y, mut r, mut t) = (vec![0.0f32; 4], vec![0.0f32; 6], vec![0.0f32; 6]);
    let ins = [f32_descriptor(c"X", &S23, &mut x)];
    let outs = [
        f32_descriptor(c"Y", &S22, &mut y),
        f32_descriptor(c"R", &S23, &mut r),
        f32_descriptor(c"T", &S32, &mut t),
    ];
    expect(set_io(g.0, &ins, &outs), SUCCESS, "set IO");
    let w = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    for (round, values) in [
        [1.0f32, -2.0, 3.0, -4.0, 5.0, -6.0],
        [0.5, 0.25, -1.0, 2.0, -3.0, 4.0],
        [-1.0, -1.0, -1.0, 7.0, 8.0, 9.0],
    ]
    .iter()
    .enumerate()
    {
        // The same buffers, new contents: each run reads the inputs as they are now and
        // overwrites every output element.
        x.copy_from_slice(values);
        for buf in [&mut y, &mut r, &mut t] {
            buf.fill(f32::NAN);
        }
        run(&b, g.0, &format!("round {round}"));
        let want_y: Vec<f32> = (0..4)
            .map(|k| (0..3).map(|p| x[(k / 2) * 3 + p] * w[p * 2 + k % 2]).sum())
            .collect();
        assert_eq!(y, want_y, "round {round}: X·W");
        let want_r: Vec<f32> = x.iter().map(|v| v.max(0.0)).collect();
        assert_eq!(r, want_r, "round {round}: Relu(X)");
        assert_eq!(t, transposed(&x), "round {round}: Transpose(X)");
    }
}

const TRANSPOSE: &str = r#"
    <ir_version: 8, opset_import: ["" : 13]>
    agraph (float[2, 3] X) => (float[3, 2] T) {
        T = Transpose(X)
    }"#;

#[test]
fn an_output_over_its_own_input_is_computed_from_the_input_as_bound() {
    let b = Backend::new();
    let g = b.graph(&text_model(TRANSPOSE));
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    // Wholly shared: T's buffer is X's.
    let mut buf = x.to_vec();
    let p: *mut c_void = buf.as_mut_ptr().cast();
    let ins = [descriptor(c"X", DATATYPE_FLOAT32, &S23, p)];
    let outs = [descriptor(c"T", DATATYPE_FLOAT32, &S32, p)];
    expect(set_io(g.0, &ins, &outs), SUCCESS, "set IO, shared buffer");
    run(&b, g.0, "shared buffer");
    assert_eq!(buf, transposed(&x), "T over X");
    // Partly shared: T starts two elements into X.
    let mut buf = vec![0.0f32; 8];
    buf[..6].copy_from_slice(&x);
    let base = buf.as_mut_ptr();
    let ins = [descriptor(c"X", DATATYPE_FLOAT32, &S23, base.cast())];
    let outs = [descriptor(
        c"T",
        DATATYPE_FLOAT32,
        &S32,
        base.wrapping_add(2).cast(),
    )];
    expect(
        set_io(g.0, &ins, &outs),
        SUCCESS,
        "set IO, overlapping buffers",
    );
    run(&b, g.0, "overlapping buffers");
    assert_eq!(&buf[2..], transposed(&x).as_slice(), "T two floats into X");
    assert_eq!(&buf[..2], &x[..2], "X's first two floats untouched");
}

#[test]
fn misaligned_buffers_give_the_same_values() {
    let b = Backend::new();
    let g = b.graph(&text_model(TRANSPOSE));
    let x = [1.5f32, -2.0, 3.25, 4.0, -5.5, 6.0];
    // Bytes 1.. of one allocation hold X; bytes 3.. of another take T.
    let mut xb = vec![0u8; 4 * 6 + 1];
    for (i, v) in x.iter().enumerate() {
        xb[1 + 4 * i..5 + 4 * i].copy_from_slice(&v.to_le_bytes());
    }
    let mut tb = vec![0xFFu8; 4 * 6 + 3];
    let ins = [descriptor(
        c"X",
        DATATYPE_FLOAT32,
        &S23,
        xb.as_mut_ptr().wrapping_add(1).cast(),
    )];
    let outs = [descriptor(
        c"T",
        DATATYPE_FLOAT32,
        &S32,
        tb.as_mut_ptr().wrapping_add(3).cast(),
    )];
    expect(set_io(g.0, &ins, &outs), SUCCESS, "set IO, misaligned");
    run(&b, g.0, "misaligned buffers");
    let got: Vec<f32> = tb[3..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(got, transposed(&x));
    assert_eq!(&tb[..3], &[0xFF; 3], "bytes before T untouched");
}

#[test]
fn outputs_of_copying_and_storage_replacing_kernels() {
    let b = Backend::new();
    let g = b.graph(&text_model(
        r#"
        <ir_version: 8, opset_import: ["" : 13]>
        agraph (float[2, 3] X) => (float[2, 3] I, float[2, 3] D, float[2, 3] N) {
            I = Identity(X)
            D = Dropout(X)
            N = Neg(I)
        }"#,
    ));
    let mut x = vec![0.0f32; 6];
    let (mut i, mut d, mut n) = (vec![0.0f32; 6], vec![0.0f32; 6], vec![0.0f32; 6]);
    let ins = [f32_descriptor(c"X", &S23, &mut x)];
    let outs = [
        f32_descriptor(c"I", &S23, &mut i),
        f32_descriptor(c"D", &S23, &mut d),
        f32_descriptor(c"N", &S23, &mut n),
    ];
    expect(set_io(g.0, &ins, &outs), SUCCESS, "set IO");
    for round in 0..2 {
        let values: Vec<f32> = (0..6)
            .map(|k| (k as f32 - 2.5) * (round + 1) as f32)
            .collect();
        x.copy_from_slice(&values);
        for buf in [&mut i, &mut d, &mut n] {
            buf.fill(f32::NAN);
        }
        run(&b, g.0, &format!("round {round}"));
        assert_eq!(i, values, "round {round}: Identity(X)");
        assert_eq!(d, values, "round {round}: Dropout(X)");
        let neg: Vec<f32> = values.iter().map(|v| -v).collect();
        assert_eq!(n, neg, "round {round}: -Identity(X)");
    }
}

#[test]
fn an_input_bound_as_an_output_too_and_buffers_that_touch() {
    let b = Backend::new();
    let g = b.graph(&text_model(
        r#"
        <ir_version: 8, opset_import: ["" : 13]>
        agraph (float[2, 3] X) => (float[2, 3] X, float[3, 2] T) {
            T = Transpose(X)
        }"#,
    ));
    // One allocation: X, then T right after it, then the copy of X (each ends where the next
    // starts, sharing no byte).
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut buf = vec![f32::NAN; 18];
    buf[..6].copy_from_slice(&x);
    let base = buf.as_mut_ptr();
    let ins = [descriptor(c"X", DATATYPE_FLOAT32, &S23, base.cast())];
    let outs = [
        descriptor(c"X", DATATYPE_FLOAT32, &S23, base.wrapping_add(12).cast()),
        descriptor(c"T", DATATYPE_FLOAT32, &S32, base.wrapping_add(6).cast()),
    ];
    expect(set_io(g.0, &ins, &outs), SUCCESS, "set IO");
    run(&b, g.0, "touching buffers");
    assert_eq!(&buf[..6], &x, "X untouched");
    assert_eq!(&buf[6..12], transposed(&x).as_slice(), "T");
    assert_eq!(&buf[12..], &x, "X copied to its output");
}
