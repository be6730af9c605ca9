//! Inputs read and outputs written in the caller's storage ([`CallerF32`]), as the C ABI does
//! with bound buffers: the step computing a graph output writes straight into its buffer when
//! the output's type and shape match, the others fall back to the engine's storage, and the
//! values agree with hand-computed ones either way.
#![forbid(unsafe_code)]

mod common;

use common::{compile_ok, f32t};
use onnxifi_rust::ir::{CallerF32, Tensor, TensorData};

/// A buffer that lives for the rest of the test process, as a caller's bound buffer lives for
/// the run.
fn leaked(v: Vec<f32>) -> &'static mut [f32] {
    Box::leak(v.into_boxed_slice())
}

fn caller_input(shape: &[usize], v: Vec<f32>) -> Tensor {
    Tensor::new(
        shape.to_vec(),
        TensorData::Caller(CallerF32::read(leaked(v))),
    )
    .unwrap()
}

fn caller_output(shape: &[usize]) -> Tensor {
    let n = shape.iter().product();
    let buf = leaked(vec![f32::NAN; n]);
    Tensor::new(shape.to_vec(), TensorData::Caller(CallerF32::write(buf))).unwrap()
}

fn address(t: &Tensor) -> Option<usize> {
    match &t.data {
        TensorData::Caller(c) => Some(c.addr()),
        _ => None,
    }
}

const MODEL: &str = r#"
<ir_version: 8, opset_import: ["" : 13]>
agraph (float[2, 3] X) => (float[2, 2] Y, float[2, 3] R, float[3, 2] T) <float[3, 2] W = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}> {
    Y = MatMul(X, W)
    R = Relu(X)
    T = Transpose(X)
}
"#;

/// `x[2×3] · w[3×2]` by hand, and the other two outputs.
fn expected(x: &[f32]) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let mut y = vec![0.0; 4];
    for i in 0..2 {
        for j in 0..2 {
            y[i * 2 + j] = (0..3).map(|p| x[i * 3 + p] * w[p * 2 + j]).sum();
        }
    }
    let r = x.iter().map(|v| v.max(0.0)).collect();
    let t = (0..6).map(|k| x[(k % 2) * 3 + k / 2]).collect();
    (y, r, t)
}

#[test]
fn outputs_are_computed_into_the_callers_storage_and_inputs_read_from_it() {
    let exe = compile_ok(MODEL);
    for (round, x) in [
        vec![1.0, -2.0, 3.0, -4.0, 5.0, -6.0],
        vec![0.5, 0.25, -1.0, 2.0, -3.0, 4.0],
    ]
    .into_iter()
    .enumerate()
    {
        let (y, r, t) = expected(&x);
        let mut inputs = vec![caller_input(&[2, 3], x)];
        let mut in_place = vec![
            Some(caller_output(&[2, 2])),
            Some(caller_output(&[2, 3])),
            Some(caller_output(&[3, 2])),
        ];
        let want: Vec<Option<usize>> = in_place.iter().map(|t| address(t.as_ref()?)).collect();
        let mut outputs = Vec::new();
        exe.run_in_place(&mut inputs, &mut in_place, &mut outputs)
            .unwrap();
        assert!(
            in_place.iter().all(Option::is_none),
            "round {round}: every output was computed in place"
        );
        let got: Vec<Option<usize>> = outputs.iter().map(address).collect();
        assert_eq!(got, want, "round {round}: outputs are the caller's buffers");
        assert_eq!(
            outputs[0].as_f32().unwrap(),
            y.as_slice(),
            "round {round}: Y"
        );
        assert_eq!(
            outputs[1].as_f32().unwrap(),
            r.as_slice(),
            "round {round}: R"
        );
        assert_eq!(
            outputs[2].as_f32().unwrap(),
            t.as_slice(),
            "round {round}: T"
        );
    }
}

#[test]
fn storage_of_another_shape_or_type_is_left_alone() {
    let exe = compile_ok(MODEL);
    let x = vec![1.0, -2.0, 3.0, -4.0, 5.0, -6.0];
    let (y, r, t) = expected(&x);
    let mut inputs = vec![f32t(&[2, 3], &x)];
    // Y's storage has T's shape, R has none, T's is right.
    let mut in_place = vec![
        Some(caller_output(&[3, 2])),
        None,
        Some(caller_output(&[3, 2])),
    ];
    let wrong = address(in_place[0].as_ref().unwrap());
    let mut outputs = Vec::new();
    exe.run_in_place(&mut inputs, &mut in_place, &mut outputs)
        .unwrap();
    let untouched = in_place[0].take().expect("Y's storage was not used");
    assert_eq!(address(&untouched), wrong);
    assert!(untouched.as_f32().unwrap().iter().all(|v| v.is_nan()));
    assert!(address(&outputs[0]).is_none() && address(&outputs[1]).is_none());
    assert!(address(&outputs[2]).is_some());
    assert_eq!(outputs[0].as_f32().unwrap(), y.as_slice());
    assert_eq!(outputs[1].as_f32().unwrap(), r.as_slice());
    assert_eq!(outputs[2].as_f32().unwrap(), t.as_slice());
}

#[test]
fn a_copy_of_a_callers_tensor_owns_its_elements() {
    let t = caller_input(&[3], vec![1.0, 2.0, 3.0]);
    let copy = t.clone();
    assert!(matches!(copy.data, TensorData::F32(_)));
    assert_eq!(copy.as_f32().unwrap(), &[1.0, 2.0, 3.0]);
    // An input's storage is never written.
    let mut t = t;
    assert!(t.as_mut_slice::<f32>().is_err());
    // An output's storage takes a copy of the same length in place.
    let mut out = caller_output(&[3]);
    let at = address(&out);
    out.data.copy_from(&t.data);
    assert_eq!(address(&out), at);
    assert_eq!(out.as_f32().unwrap(), &[1.0, 2.0, 3.0]);
}

#[test]
fn an_input_that_is_also_an_output_is_copied_into_the_outputs_storage() {
    let exe = compile_ok(
        r#"
        <ir_version: 8, opset_import: ["" : 13]>
        agraph (float[3] X) => (float[3] X, float[3] N) {
            N = Neg(X)
        }"#,
    );
    let mut inputs = vec![caller_input(&[3], vec![1.0, -2.0, 3.0])];
    let mut in_place = vec![Some(caller_output(&[3])), Some(caller_output(&[3]))];
    let out_x = address(in_place[0].as_ref().unwrap());
    let mut outputs = Vec::new();
    exe.run_in_place(&mut inputs, &mut in_place, &mut outputs)
        .unwrap();
    // No step computes X: its storage stays unused and the output is the input's own tensor
    // (which the C ABI then copies into the output buffer).
    assert!(in_place[0].is_some() && in_place[1].is_none());
    assert_ne!(address(&outputs[0]), out_x);
    assert_eq!(outputs[0].as_f32().unwrap(), &[1.0, -2.0, 3.0]);
    assert_eq!(outputs[1].as_f32().unwrap(), &[-1.0, 2.0, -3.0]);
}
