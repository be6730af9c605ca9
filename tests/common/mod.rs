//! Helpers shared by the operator tests (`tests/ops_*.rs`): build a model from ONNX text,
//! compile it with the backend, run it inside a rayon pool, and compare float results.
//!
//! Each test binary uses only some of the helpers, hence the `dead_code` allowance.
#![allow(dead_code)]

use onnxifi_rust::error::Error;
use onnxifi_rust::exec::Executable;
use onnxifi_rust::ir::{DataType, Tensor, TensorData};
use prost::Message;
use std::sync::OnceLock;

/// Parses ONNX text (panicking with the parse error: a test's model must parse) and serialises
/// the model.
pub fn model_bytes(text: &str) -> Vec<u8> {
    let m = onnxifi_rust::text::parse_model(text)
        .unwrap_or_else(|e| panic!("the test model does not parse: {e}\n{text}"));
    m.encode_to_vec()
}

/// Compiles a model given as ONNX text, as `onnxInitGraph` would (no weight descriptors).
pub fn compile(text: &str) -> Result<Executable, Error> {
    onnxifi_rust::graph::compile_executable(&model_bytes(text), Vec::new())
}

/// [`compile`], panicking with the error and the model when it fails.
pub fn compile_ok(text: &str) -> Executable {
    compile(text).unwrap_or_else(|e| panic!("compile failed: {e}\n{text}"))
}

/// A 2-thread pool, like the backend's, so parallel kernel paths run too.
fn pool() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .expect("thread pool")
    })
}

/// Runs an executable inside the pool.
pub fn run(exe: &Executable, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, Error> {
    pool().install(|| exe.run(inputs))
}

/// [`run`], panicking with the error when it fails.
pub fn run_ok(exe: &Executable, inputs: Vec<Tensor>) -> Vec<Tensor> {
    run(exe, inputs).unwrap_or_else(|e| panic!("run failed: {e}"))
}

/// A float tensor.
pub fn f32t(shape: &[usize], data: &[f32]) -> Tensor {
    Tensor::f32(shape.to_vec(), data.to_vec()).expect("data fits the shape")
}

/// An int64 tensor.
pub fn i64t(shape: &[usize], data: &[i64]) -> Tensor {
    Tensor::new(shape.to_vec(), TensorData::I64(data.to_vec())).expect("data fits the shape")
}

/// `0, 1, 2, …` as floats.
pub fn iota(n: usize) -> Vec<f32> {
    (0..n).map(|i| i as f32).collect()
}

/// The float data of a result (panics when it is not float).
pub fn data(t: &Tensor) -> &[f32] {
    t.as_f32()
        .unwrap_or_else(|e| panic!("expected a float tensor: {e}"))
}

/// Whether `got` matches `want` within `atol + rtol·|want|` (NaN matches NaN, an infinity only
/// itself).
pub fn within(got: f32, want: f32, rtol: f32, atol: f32) -> bool {
    if want.is_nan() {
        got.is_nan()
    } else if want.is_infinite() {
        got == want
    } else {
        (got - want).abs() <= atol + rtol * want.abs()
    }
}

/// Asserts a result's type, shape and values: each `|got − want| ≤ atol + rtol·|want|`.
pub fn assert_close(got: &Tensor, shape: &[usize], want: &[f32], rtol: f32, atol: f32, what: &str) {
    assert_eq!(got.dtype(), DataType::F32, "{what}: element type");
    assert_eq!(got.shape, shape, "{what}: shape");
    let g = data(got);
    assert_eq!(g.len(), want.len(), "{what}: element count");
    let bad: Vec<usize> = (0..g.len())
        .filter(|&i| !within(g[i], want[i], rtol, atol))
        .collect();
    if let Some(&i) = bad.first() {
        panic!(
            "{what}: {} of {} values differ (rtol {rtol}, atol {atol}); first at {i}: got {}, want {}\n got: {:?}\nwant: {:?}",
            bad.len(),
            g.len(),
            g[i],
            want[i],
            &g[..g.len().min(32)],
            &want[..want.len().min(32)]
        );
    }
}

/// Asserts hand-computed values: tolerance 1e-6 absolute plus 1e-6 relative (exact arithmetic
/// on small integers, a few ulps for transcendental functions).
pub fn assert_values(got: &Tensor, shape: &[usize], want: &[f32], what: &str) {
    assert_close(got, shape, want, 1e-6, 1e-6, what);
}
