//! Randomized multi-node models (fixed seeds) against onnxruntime.
//!
//! Each model is written in ONNX text syntax with initializers generated here; our backend
//! parses and runs it, and `tests/py/ort_run.py` has the reference parser (`onnx.parser`) parse
//! the same text and onnxruntime run it with graph optimizations off. Results must agree to
//! rtol 1e-4, atol 1e-5.
//!
//! The models exercise the rewrites of `src/exec/fuse/` (Conv+BatchNormalization folding,
//! Conv+activation fusion — the tests assert that the rewrite happened, so they check the fused
//! path), buffer reuse across steps and runs, and symbolic batch dimensions.
//!
//! Python is `$ONNXIFI_RUST_PYTHON`, else `.venv/bin/python` under the crate root. Without it
//! (or without onnxruntime) the tests fail: run `scripts/setup-test-env.sh`.
#![forbid(unsafe_code)]

mod common;

use common::{assert_close, compile_ok, f32t, run_ok};
use onnxifi_rust::exec::Executable;
use onnxifi_rust::ir::Tensor;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

const RTOL: f32 = 1e-4;
const ATOL: f32 = 1e-5;

// ---------------------------------------------------------------------------------------------
// onnxruntime through Python

fn python() -> PathBuf {
    match std::env::var_os("ONNXIFI_RUST_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"),
    }
}

/// Whether Python with onnx and onnxruntime runs; its absence fails the test.
fn ort_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    let ok = *OK.get_or_init(|| {
        Command::new(python())
            .args(["-c", "import numpy, onnx, onnxruntime"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    });
    assert!(
        ok,
        "{} cannot import numpy, onnx and onnxruntime: run scripts/setup-test-env.sh (or set \
         ONNXIFI_RUST_PYTHON)",
        python().display()
    );
    ok
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "onnxifi-ops-ort-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `text` with onnxruntime on named float inputs; returns each output's shape and data.
fn ort_run(text: &str, inputs: &[(String, Tensor)]) -> Vec<(Vec<usize>, Vec<f32>)> {
    let dir = Scratch::new();
    let model = dir.0.join("model.txt");
    std::fs::write(&model, text).unwrap();
    let mut manifest = String::new();
    for (i, (name, t)) in inputs.iter().enumerate() {
        let path = dir.0.join(format!("in{i}.bin"));
        let bytes: Vec<u8> = common::data(t)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        std::fs::write(&path, bytes).unwrap();
        let dims: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
        manifest.push_str(&format!("{name}\t{}\t{}\n", dims.join(","), path.display()));
    }
    let manifest_path = dir.0.join("manifest.txt");
    std::fs::write(&manifest_path, manifest).unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/ort_run.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(&model)
        .arg(&manifest_path)
        .arg(&dir.0)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "onnxruntime failed:\n{}\nmodel:\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let (i, dims) = line.split_once('\t').expect("index<TAB>dims");
            let shape: Vec<usize> = dims
                .split(',')
                .filter(|d| !d.is_empty())
                .map(|d| d.parse().unwrap())
                .collect();
            let bytes = std::fs::read(dir.0.join(format!("{i}.bin"))).unwrap();
            let data = bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (shape, data)
        })
        .collect()
}

/// Runs `exe` (compiled from `text`) and onnxruntime on the same inputs, given in the model's
/// input order, and asserts agreement; returns our outputs.
fn compare(exe: &Executable, text: &str, inputs: &[(String, Tensor)], what: &str) -> Vec<Tensor> {
    compare_within(exe, text, inputs, what, RTOL, ATOL)
}

/// [`compare`] with the given tolerances.
fn compare_within(
    exe: &Executable,
    text: &str,
    inputs: &[(String, Tensor)],
    what: &str,
    rtol: f32,
    atol: f32,
) -> Vec<Tensor> {
    let names: Vec<&str> = exe.inputs().iter().map(|s| s.name.as_str()).collect();
    let given: Vec<&str> = inputs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, given, "{what}: inputs in model order");
    let ours = run_ok(exe, inputs.iter().map(|(_, t)| t.clone()).collect());
    let theirs = ort_run(text, inputs);
    assert_eq!(ours.len(), theirs.len(), "{what}: number of outputs");
    for (i, (o, (shape, want))) in ours.iter().zip(&theirs).enumerate() {
        let name = &exe.outputs()[i].name;
        assert_close(
            o,
            shape,
            want,
            rtol,
            atol,
            &format!("{what}: output '{name}'"),
        );
    }
    ours
}

/// The operator types of the executable's graph after the rewrites.
fn op_types(exe: &Executable) -> Vec<String> {
    exe.graph()
        .nodes
        .iter()
        .map(|n| n.op_type.clone())
        .collect()
}

fn count(ops: &[String], op: &str) -> usize {
    ops.iter().filter(|o| *o == op).count()
}

// ---------------------------------------------------------------------------------------------
// Deterministic data and model text

/// xorshift64* — deterministic, no dependencies.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[lo, hi)`.
    fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }

    fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }

    /// A float tensor with values uniform in `[lo, hi)`.
    fn tensor(&mut self, shape: &[usize], lo: f32, hi: f32) -> Tensor {
        f32t(shape, &self.vec(shape.iter().product(), lo, hi))
    }
}

/// A float initializer in text syntax: `float[d0,d1] name = {v, …}`.
fn init(name: &str, shape: &[usize], data: &[f32]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let vals: Vec<String> = data.iter().map(|v| format!("{v:?}")).collect();
    if shape.is_empty() {
        format!("float {name} = {{{}}}", vals.join(", "))
    } else {
        format!("float[{}] {name} = {{{}}}", dims.join(","), vals.join(", "))
    }
}

/// The initializers `list` (from [`init`]) as float16 ones: each value rounded to float16 and
/// written as its bit pattern, as the text syntax spells float16 data.
fn as_float16(list: &[String]) -> Vec<String> {
    list.iter()
        .map(|line| {
            let (head, values) = line.split_once(" = {").expect("an initializer");
            let bits: Vec<String> = values
                .trim_end_matches('}')
                .split(", ")
                .map(|v| {
                    half::f16::from_f32(v.parse().expect("a float"))
                        .to_bits()
                        .to_string()
                })
                .collect();
            format!("{}16{} = {{{}}}", &head[..5], &head[5..], bits.join(", "))
        })
        .collect()
}

/// Collects initializers of a model under construction.
struct Inits<'a> {
    rng: &'a mut Rng,
    list: Vec<String>,
}

impl Inits<'_> {
    /// Weights uniform in `±1/√fan_in` (fan_in = product of all dims but the first).
    fn weights(&mut self, name: &str, shape: &[usize]) -> &mut Self {
        let fan_in: usize = shape[1..].iter().product::<usize>().max(1);
        let s = 1.0 / (fan_in as f32).sqrt();
        let n = shape.iter().product();
        let d = self.rng.vec(n, -s, s);
        self.list.push(init(name, shape, &d));
        self
    }

    /// Values uniform in `[lo, hi)`.
    fn uniform(&mut self, name: &str, shape: &[usize], lo: f32, hi: f32) -> &mut Self {
        let d = self.rng.vec(shape.iter().product(), lo, hi);
        self.list.push(init(name, shape, &d));
        self
    }

    /// Fixed values.
    fn values(&mut self, name: &str, shape: &[usize], d: &[f32]) -> &mut Self {
        self.list.push(init(name, shape, d));
        self
    }

    /// BatchNormalization parameters `{p}_s, {p}_b, {p}_m, {p}_v` for `c` channels.
    fn batch_norm(&mut self, p: &str, c: usize) -> &mut Self {
        self.uniform(&format!("{p}_s"), &[c], 0.5, 1.5)
            .uniform(&format!("{p}_b"), &[c], -0.5, 0.5)
            .uniform(&format!("{p}_m"), &[c], -0.5, 0.5)
            .uniform(&format!("{p}_v"), &[c], 0.5, 1.5)
    }
}

/// A model in text syntax.
fn model(opset: i64, inputs: &str, outputs: &str, inits: &[String], body: &str) -> String {
    let inits = if inits.is_empty() {
        String::new()
    } else {
        format!("<\n  {}\n>\n", inits.join(",\n  "))
    };
    format!(
        "<ir_version: 8, opset_import: [\"\" : {opset}]>\ng ({inputs}) => ({outputs})\n{inits}{{\n{body}\n}}\n"
    )
}

fn named(name: &str, t: Tensor) -> (String, Tensor) {
    (name.to_string(), t)
}

// ---------------------------------------------------------------------------------------------
// Models

#[test]
fn conv_bn_relu_chain_with_symbolic_batch() {
    if !ort_available() {
        return;
    }
    let mut rng = Rng::new(1);
    let mut i = Inits {
        rng: &mut rng,
        list: Vec::new(),
    };
    i.weights("W1", &[8, 3, 3, 3])
        .uniform("B1", &[8], -0.2, 0.2)
        .batch_norm("n1", 8)
        .weights("W2", &[8, 8, 3, 3])
        .batch_norm("n2", 8)
        .weights("W3", &[5, 8])
        .uniform("B3", &[5], -0.2, 0.2);
    let inits = i.list;
    let body = "
  c1 = Conv <pads = [1, 1, 1, 1]> (X, W1, B1)
  b1 = BatchNormalization <epsilon = 0.001> (c1, n1_s, n1_b, n1_m, n1_v)
  r1 = Relu(b1)
  c2 = Conv <pads = [1, 1, 1, 1], strides = [2, 2]> (r1, W2)
  b2 = BatchNormalization(c2, n2_s, n2_b, n2_m, n2_v)
  F = Relu(b2)
  g = GlobalAveragePool(F)
  f = Flatten(g)
  Y = Gemm <transB = 1> (f, W3, B3)";
    let text = model(
        17,
        "float[N,3,8,8] X",
        "float[N,5] Y, float[N,8,4,4] F",
        &inits,
        body,
    );
    let exe = compile_ok(&text);
    let ops = op_types(&exe);
    assert_eq!(
        count(&ops, "FusedConv"),
        2,
        "both Conv+BN+Relu fused: {ops:?}"
    );
    assert_eq!(count(&ops, "BatchNormalization"), 0, "{ops:?}");
    assert_eq!(count(&ops, "Relu"), 0, "{ops:?}");
    let mut data = Rng::new(100);
    for n in [1, 3] {
        let x = data.tensor(&[n, 3, 8, 8], -1.0, 1.0);
        compare(&exe, &text, &[named("X", x)], &format!("N = {n}"));
    }
    // Back to batch 1 after batch 3 (a cached plan, reused buffers).
    let x = data.tensor(&[1, 3, 8, 8], -1.0, 1.0);
    compare(&exe, &text, &[named("X", x)], "N = 1 again");
}

#[test]
fn depthwise_separable_with_clip6_and_sigmoid() {
    if !ort_available() {
        return;
    }
    let mut rng = Rng::new(2);
    let mut i = Inits {
        rng: &mut rng,
        list: Vec::new(),
    };
    i.uniform("Wd", &[8, 1, 3, 3], -1.0, 1.0)
        .uniform("Bd", &[8], -0.5, 0.5)
        .batch_norm("nd", 8)
        .uniform("Wp", &[16, 8, 1, 1], -1.0, 1.0)
        .uniform("Bp", &[16], -0.5, 0.5)
        .uniform("Wd2", &[16, 1, 3, 3], -1.0, 1.0)
        .uniform("Wm", &[16, 1, 3, 3], -1.0, 1.0)
        .values("zero", &[], &[0.0])
        .values("six", &[], &[6.0]);
    let inits = i.list;
    let body = "
  d = Conv <group = 8, pads = [1, 1, 1, 1]> (X, Wd, Bd)
  dn = BatchNormalization(d, nd_s, nd_b, nd_m, nd_v)
  dr = Clip(dn, zero, six)
  p = Conv(dr, Wp, Bp)
  Y = Clip(p, zero, six)
  d2 = Conv <group = 16, strides = [2, 2], dilations = [2, 2], pads = [2, 2, 2, 2]> (Y, Wd2)
  Z = Sigmoid(d2)
  m = Conv <group = 8, pads = [0, 1, 2, 1]> (X, Wm)
  M = Tanh(m)";
    let text = model(
        13,
        "float[1,8,10,10] X",
        "float[1,16,10,10] Y, float[1,16,5,5] Z, float[1,16,10,10] M",
        &inits,
        body,
    );
    let exe = compile_ok(&text);
    let ops = op_types(&exe);
    // The first depthwise convolution and the 1×1 one that alone reads it become one
    // `ConvDepthwise` (a block without expansion); the others carry their activations.
    assert_eq!(count(&ops, "ConvDepthwise"), 1, "{ops:?}");
    assert_eq!(
        count(&ops, "FusedConv"),
        2,
        "every other Conv fused: {ops:?}"
    );
    assert_eq!(count(&ops, "Conv"), 0, "{ops:?}");
    let x = Rng::new(200).tensor(&[1, 8, 10, 10], -3.0, 3.0);
    let out = compare(&exe, &text, &[named("X", x)], "depthwise");
    // The data reaches both clip bounds, so the fused Clip is really tested.
    let y = common::data(&out[0]);
    assert!(
        y.contains(&0.0) && y.contains(&6.0),
        "Clip(0, 6) never clipped"
    );
}

/// Two MobileNetV2 blocks at 56² whose expansions (24 → 144 channels, 1.8 MB) and depthwise
/// layers (stride 1, then stride 2; Clip(0, 6) after each) run together in bands of rows
/// (`ConvDepthwise`), the first block with its projection and residual Add in the same node
/// (and bands, on one thread).
#[test]
fn inverted_residual_blocks_in_bands() {
    if !ort_available() {
        return;
    }
    let mut rng = Rng::new(7);
    let mut i = Inits {
        rng: &mut rng,
        list: Vec::new(),
    };
    i.weights("We", &[144, 24, 1, 1])
        .uniform("Be", &[144], -0.2, 0.5)
        .weights("Wd", &[144, 1, 3, 3])
        .uniform("Bd", &[144], -0.2, 0.5)
        .weights("Wp", &[24, 144, 1, 1])
        .uniform("Bp", &[24], -0.2, 0.2)
        .uniform("We2", &[144, 24, 1, 1], -1.0, 1.0)
        .uniform("Be2", &[144], -0.2, 0.5)
        .uniform("Wd2", &[144, 1, 3, 3], -1.0, 1.0)
        .uniform("Bd2", &[144], -0.2, 0.5)
        .values("zero", &[], &[0.0])
        .values("six", &[], &[6.0]);
    let inits = i.list;
    let body = "
  e = Conv(X, We, Be)
  er = Clip(e, zero, six)
  d = Conv <group = 144, pads = [1, 1, 1, 1]> (er, Wd, Bd)
  dr = Clip(d, zero, six)
  p = Conv(dr, Wp, Bp)
  Y = Add(p, X)
  e2 = Conv(Y, We2, Be2)
  e2r = Clip(e2, zero, six)
  d2 = Conv <group = 144, strides = [2, 2], pads = [1, 1, 1, 1]> (e2r, Wd2, Bd2)
  Z = Clip(d2, zero, six)";
    let text = model(
        13,
        "float[1,24,56,56] X",
        "float[1,24,56,56] Y, float[1,144,28,28] Z",
        &inits,
        body,
    );
    let exe = compile_ok(&text);
    let ops = op_types(&exe);
    assert_eq!(count(&ops, "ConvDepthwise"), 2, "{ops:?}");
    assert_eq!(
        count(&ops, "FusedConv"),
        0,
        "the projection joined the pair: {ops:?}"
    );
    let x = Rng::new(201).tensor(&[1, 24, 56, 56], -3.0, 3.0);
    let out = compare(&exe, &text, &[named("X", x.clone())], "inverted residual");
    // On one thread the block and its projection run in bands (the test pool has two, where
    // the projection runs after the pair): the same outputs, within ORT's tolerance.
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let banded = one.install(|| exe.run(vec![x])).expect("1-thread run");
    for (b, o) in banded.iter().zip(&out) {
        let want = common::data(o);
        assert_close(b, &o.shape, want, RTOL, ATOL, "inverted residual, 1 thread");
    }
    let z = common::data(&out[1]);
    assert!(
        z.contains(&0.0) && z.contains(&6.0),
        "Clip(0, 6) never clipped"
    );
}

#[test]
fn residual_blocks() {
    if !ort_available() {
        return;
    }
    let mut rng = Rng::new(3);
    let mut i = Inits {
        rng: &mut rng,
        list: Vec::new(),
    };
    i.weights("Wa", &[4, 4, 3, 3])
        .uniform("Ba", &[4], -0.2, 0.2)
        .batch_norm("na", 4)
        .weights("Wb", &[4, 4, 3, 3])
        .batch_norm("nb", 4)
        .weights("Wc", &[4, 4, 3, 3])
        .batch_norm("nc", 4)
        .weights("Wd", &[4, 4, 1, 1])
        .batch_norm("nd", 4);
    let inits = i.list;
    let body = "
  a = Conv <pads = [1, 1, 1, 1]> (X, Wa, Ba)
  an = BatchNormalization(a, na_s, na_b, na_m, na_v)
  ar = Relu(an)
  b = Conv <pads = [1, 1, 1, 1]> (ar, Wb)
  bn = BatchNormalization(b, nb_s, nb_b, nb_m, nb_v)
  s = Add(bn, X)
  Y = Relu(s)
  c = Conv <pads = [1, 1, 1, 1]> (Y, Wc)
  cn = BatchNormalization(c, nc_s, nc_b, nc_m, nc_v)
  cr = Relu(cn)
  d = Conv(cr, Wd)
  dn = BatchNormalization(d, nd_s, nd_b, nd_m, nd_v)
  s2 = Add(Y, dn)
  r2 = Relu(s2)
  P = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r2)";
    let text = model(
        17,
        "float[2,4,6,6] X",
        "float[2,4,6,6] Y, float[2,4,3,3] P",
        &inits,
        body,
    );
    let exe = compile_ok(&text);
    let ops = op_types(&exe);
    assert_eq!(count(&ops, "BatchNormalization"), 0, "{ops:?}");
    // Every Conv fused: `a` and `c` with their Relu, `b` and `d` with the residual Add and the
    // Relu after it (`b`'s residual is the graph input, `d`'s the first block's output `Y`).
    assert_eq!(count(&ops, "FusedConv"), 4, "{ops:?}");
    assert_eq!(
        count(&ops, "Conv") + count(&ops, "Add") + count(&ops, "Relu"),
        0,
        "{ops:?}"
    );
    let x = Rng::new(300).tensor(&[2, 4, 6, 6], -1.0, 1.0);
    compare(&exe, &text, &[named("X", x)], "residual");
}

#[test]
fn gemm_chain_with_symbolic_batch() {
    if !ort_available() {
        return;
    }
    let mut rng = Rng::new(4);
    let mut i = Inits {
        rng: &mut rng,
        list: Vec::new(),
    };
    i.weights("W1", &[32, 16])
        .uniform("b1", &[32], -0.1, 0.1)
        .weights("W2", &[32, 10])
        .uniform("c2", &[10], -0.5, 0.5)
        .weights("W3", &[10, 6])
        .uniform("c3", &[1, 6], -0.5, 0.5)
        .weights("W4", &[6, 4])
        .uniform("b4", &[4], -0.5, 0.5)
        .weights("W5", &[4, 4])
        .uniform("c5", &[4, 1], -0.5, 0.5);
    let inits = i.list;
    let body = "
  h1 = Gemm <transB = 1> (X, W1, b1)
  r1 = Relu(h1)
  h2 = Gemm <alpha = 0.5, beta = 2.0> (r1, W2, c2)
  s2 = Sigmoid(h2)
  t = Transpose(s2)
  h3 = Gemm <transA = 1> (t, W3, c3)
  m = MatMul(h3, W4)
  a = Add(m, b4)
  t4 = Tanh(a)
  Y = Softmax <axis = -1> (t4)
  Z = Gemm <transA = 1, transB = 1, alpha = 2.0, beta = -1.0> (W5, Y, c5)";
    let text = model(
        17,
        "float[N,16] X",
        "float[N,4] Y, float[4,N] Z",
        &inits,
        body,
    );
    let exe = compile_ok(&text);
    let mut data = Rng::new(400);
    for n in [1, 3, 7] {
        let x = data.tensor(&[n, 16], -2.0, 2.0);
        compare(&exe, &text, &[named("X", x)], &format!("N = {n}"));
    }
}

/// A convolution branch: name, input shape, weight shape, attributes, activation ("" for none,
/// "Clip" for ±0.5, "Clip6" for [0, 6]).
type ConvCase = (
    &'static str,
    &'static [usize],
    &'static [usize],
    &'static str,
    &'static str,
);

#[test]
fn conv_geometries_with_fused_activations() {
    if !ort_available() {
        return;
    }
    let cases: &[ConvCase] = &[
        (
            "a",
            &[1, 3, 7, 9],
            &[5, 3, 3, 3],
            "strides = [2, 1], pads = [1, 0, 2, 1]",
            "Relu",
        ),
        (
            "b",
            &[1, 4, 6, 6],
            &[4, 1, 3, 3],
            "group = 4, dilations = [2, 2], pads = [2, 2, 2, 2]",
            "Sigmoid",
        ),
        (
            "c",
            &[1, 6, 5, 5],
            &[4, 3, 2, 2],
            "group = 2, auto_pad = \"SAME_UPPER\"",
            "Tanh",
        ),
        (
            "d",
            &[2, 2, 11],
            &[3, 2, 4],
            "strides = [3], pads = [2, 1]",
            "Clip",
        ),
        ("e", &[1, 16, 9, 9], &[24, 16, 1, 1], "", "Clip6"),
        (
            "f",
            &[1, 5, 8, 8],
            &[7, 5, 5, 5],
            "strides = [2, 2], auto_pad = \"SAME_LOWER\"",
            "",
        ),
        (
            "g",
            &[1, 8, 7, 7],
            &[8, 8, 1, 1],
            "strides = [2, 2]",
            "Relu",
        ),
        (
            "h",
            &[1, 32, 14, 14],
            &[32, 32, 3, 3],
            "pads = [1, 1, 1, 1]",
            "Relu",
        ),
        (
            "i",
            &[1, 3, 10, 10],
            &[6, 3, 3, 3],
            "dilations = [2, 3], strides = [1, 2]",
            "Sigmoid",
        ),
        (
            "j",
            &[1, 12, 6, 6],
            &[12, 1, 3, 3],
            "group = 12, strides = [2, 2], pads = [1, 1, 1, 1]",
            "Clip6",
        ),
        // Pads wider than the kernel: border windows see only padding (bias alone).
        (
            "k",
            &[1, 3, 4, 4],
            &[2, 3, 1, 1],
            "pads = [1, 2, 1, 2]",
            "Tanh",
        ),
        (
            "l",
            &[1, 3, 5, 5],
            &[3, 1, 2, 2],
            "group = 3, pads = [3, 3, 3, 3]",
            "Relu",
        ),
        // Strides longer than the kernel skip input positions.
        ("m", &[1, 2, 9, 8], &[3, 2, 2, 2], "strides = [3, 3]", ""),
    ];
    let mut rng = Rng::new(5);
    let mut inits = Inits {
        rng: &mut rng,
        list: Vec::new(),
    };
    let mut ins = Vec::new();
    let mut outs = Vec::new();
    let mut body = String::new();
    let mut data = Rng::new(500);
    let mut feeds = Vec::new();
    let mut fused = 0;
    for (name, x_shape, w_shape, attrs, act) in cases {
        let dims = |s: &[usize]| {
            s.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        ins.push(format!("float[{}] X{name}", dims(x_shape)));
        let syms: Vec<String> = (0..x_shape.len()).map(|d| format!("{name}{d}")).collect();
        outs.push(format!("float[{}] Y{name}", syms.join(",")));
        inits.weights(&format!("W{name}"), w_shape).uniform(
            &format!("B{name}"),
            &w_shape[..1],
            -0.5,
            0.5,
        );
        let conv = format!("Conv <{attrs}> (X{name}, W{name}, B{name})").replace("<>", "");
        let line = match *act {
            "" => format!("  Y{name} = {conv}\n"),
            "Clip" => {
                inits.values(&format!("lo{name}"), &[], &[-0.5]).values(
                    &format!("hi{name}"),
                    &[],
                    &[0.5],
                );
                format!("  c{name} = {conv}\n  Y{name} = Clip(c{name}, lo{name}, hi{name})\n")
            }
            "Clip6" => {
                inits.values(&format!("lo{name}"), &[], &[0.0]).values(
                    &format!("hi{name}"),
                    &[],
                    &[6.0],
                );
                format!("  c{name} = {conv}\n  Y{name} = Clip(c{name}, lo{name}, hi{name})\n")
            }
            a => format!("  c{name} = {conv}\n  Y{name} = {a}(c{name})\n"),
        };
        if !act.is_empty() {
            fused += 1;
        }
        body.push_str(&line);
        feeds.push(named(&format!("X{name}"), data.tensor(x_shape, -3.0, 3.0)));
    }
    let list = inits.list;
    // Outputs are declared with symbolic dimensions only: inference decides the shapes.
    let text = model(13, &ins.join(", "), &outs.join(", "), &list, &body);
    let exe = compile_ok(&text);
    let ops = op_types(&exe);
    assert_eq!(count(&ops, "FusedConv"), fused, "{ops:?}");
    compare(&exe, &text, &feeds, "conv geometries");
}

#[test]
fn long_chain_reuses_buffers_across_steps_and_runs() {
    if !ort_available() {
        return;
    }
    // 12 blocks; each: 1×1 or 3×3 conv + activation, a residual Add with the value from two
    // blocks back, and every third block a Mul by a constant. Then MaxPool, Concat, Transpose,
    // Reshape and Softmax.
    let mut rng = Rng::new(6);
    let mut inits = Inits {
        rng: &mut rng,
        list: Vec::new(),
    };
    let mut body = String::new();
    let acts = ["Relu", "Tanh", "Sigmoid"];
    let mut prev2 = "X".to_string();
    let mut prev = "X".to_string();
    for b in 0..12 {
        let k = if b % 2 == 0 { 1 } else { 3 };
        let pads = if k == 3 { "<pads = [1, 1, 1, 1]>" } else { "" };
        inits
            .weights(&format!("w{b}"), &[4, 4, k, k])
            .uniform(&format!("b{b}"), &[4], -0.1, 0.1);
        body.push_str(&format!(
            "  c{b} = Conv {pads} ({prev}, w{b}, b{b})\n  a{b} = {}(c{b})\n  s{b} = Add(a{b}, {prev2})\n",
            acts[b % 3]
        ));
        let mut out = format!("s{b}");
        if b % 3 == 2 {
            inits.uniform(&format!("k{b}"), &[4, 1, 1], 0.5, 1.0);
            body.push_str(&format!("  m{b} = Mul(s{b}, k{b})\n"));
            out = format!("m{b}");
        }
        prev2 = std::mem::replace(&mut prev, out);
    }
    inits.list.push("int64[2] shape = {4, -1}".to_string());
    body.push_str(&format!(
        "  p = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> ({prev})
  q = AveragePool <kernel_shape = [2, 2], strides = [2, 2]> ({prev2})
  cat = Concat <axis = 1> (p, q)
  t = Transpose <perm = [0, 2, 3, 1]> (cat)
  r = Reshape(t, shape)
  Y = Softmax <axis = 1> (r)
  Z = Relu({prev})"
    ));
    let list = inits.list;
    let text = model(
        17,
        "float[1,4,8,8] X",
        "float[4,32] Y, float[1,4,8,8] Z",
        &list,
        &body,
    );
    let exe = compile_ok(&text);
    let ops = op_types(&exe);
    assert_eq!(count(&ops, "FusedConv"), 12, "{ops:?}");
    let mut data = Rng::new(600);
    let xa = data.tensor(&[1, 4, 8, 8], -1.0, 1.0);
    let xb = data.tensor(&[1, 4, 8, 8], -1.0, 1.0);
    let first = compare(&exe, &text, &[named("X", xa.clone())], "run 1 (A)");
    compare(&exe, &text, &[named("X", xb)], "run 2 (B)");
    for run in 3..6 {
        let again = run_ok(&exe, vec![xa.clone()]);
        for (i, (a, b)) in first.iter().zip(&again).enumerate() {
            assert_eq!(a.shape, b.shape, "run {run}: output {i} shape");
            let (a, b) = (common::data(a), common::data(b));
            assert!(
                a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()),
                "run {run}: output {i} differs from run 1 on the same input"
            );
        }
    }
}

#[test]
fn pooling_variants() {
    if !ort_available() {
        return;
    }
    let body = "
  A = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1> (X)
  B = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1, count_include_pad = 1> (X)
  C = AveragePool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], ceil_mode = 1> (X)
  D = AveragePool <kernel_shape = [2, 2]> (X)
  E = MaxPool <kernel_shape = [2, 3], dilations = [2, 2], pads = [1, 0, 1, 2]> (X)
  F = AveragePool <kernel_shape = [3, 2], strides = [3, 2], pads = [0, 1, 2, 0], count_include_pad = 1> (X)
  G = GlobalAveragePool(X)
  H = MaxPool <kernel_shape = [3], strides = [2], ceil_mode = 1> (X1)
  I = AveragePool <kernel_shape = [4], strides = [3], pads = [1, 2], count_include_pad = 1> (X1)
  J = MaxPool <kernel_shape = [2, 2], auto_pad = \"SAME_UPPER\", strides = [2, 2]> (X)
  K = AveragePool <kernel_shape = [3, 3], auto_pad = \"SAME_LOWER\"> (X)
  L = AveragePool <kernel_shape = [2, 2], dilations = [2, 2], pads = [1, 1, 1, 1], count_include_pad = 1> (X)
  M = AveragePool <kernel_shape = [2, 3], dilations = [2, 1], strides = [2, 2], pads = [1, 0, 1, 1], ceil_mode = 1> (X)
  N = MaxPool <kernel_shape = [3, 2], dilations = [1, 3], strides = [2, 3], pads = [0, 1, 1, 0], ceil_mode = 1> (X)
  O = AveragePool <kernel_shape = [3], dilations = [2], strides = [2], pads = [2, 2], ceil_mode = 1, count_include_pad = 1> (X1)";
    let text = model(
        19,
        "float[2,3,9,10] X, float[2,3,13] X1",
        "float[a0,a1,a2,a3] A, float[b0,b1,b2,b3] B, float[c0,c1,c2,c3] C, float[d0,d1,d2,d3] D, float[e0,e1,e2,e3] E, float[f0,f1,f2,f3] F, float[g0,g1,g2,g3] G, float[h0,h1,h2] H, float[i0,i1,i2] I, float[j0,j1,j2,j3] J, float[k0,k1,k2,k3] K, \
         float[l0,l1,l2,l3] L, float[m0,m1,m2,m3] M, float[n0,n1,n2,n3] N, float[o0,o1,o2] O",
        &[],
        body,
    );
    let exe = compile_ok(&text);
    let mut data = Rng::new(700);
    let x = data.tensor(&[2, 3, 9, 10], -2.0, 2.0);
    let x1 = data.tensor(&[2, 3, 13], -2.0, 2.0);
    compare(&exe, &text, &[named("X", x), named("X1", x1)], "pooling");
}

#[test]
fn matmul_transpose_softmax_concat() {
    if !ort_available() {
        return;
    }
    for opset in [11, 13] {
        let body = "
  M = MatMul(A, B)
  T = Transpose <perm = [0, 2, 3, 1]> (M)
  S = Softmax <axis = 1> (T)
  U = Softmax <axis = -1> (M)
  V = MatMul(v, B)
  W = Concat <axis = -3> (M, M)
  P = MatMul(A, Bs)";
        let text = model(
            opset,
            "float[2,1,3,4] A, float[3,4,5] B, float[4] v, float[4,2] Bs",
            "float[2,3,3,5] M, float[2,3,5,3] T, float[2,3,5,3] S, float[2,3,3,5] U, float[3,5] V, float[2,6,3,5] W, float[2,1,3,2] P",
            &[],
            body,
        );
        let exe = compile_ok(&text);
        let mut data = Rng::new(800 + opset as u64);
        let feeds = [
            named("A", data.tensor(&[2, 1, 3, 4], -1.0, 1.0)),
            named("B", data.tensor(&[3, 4, 5], -1.0, 1.0)),
            named("v", data.tensor(&[4], -1.0, 1.0)),
            named("Bs", data.tensor(&[4, 2], -1.0, 1.0)),
        ];
        compare(&exe, &text, &feeds, &format!("opset {opset}"));
    }
}

/// Attention-shaped batched products (12 heads), a batch broadcast against a shared B, and a
/// product above the per-batch threshold, run in a 2-thread pool: small batched products run
/// one batch per task (each GEMM on one thread), large ones one after another.
#[test]
fn batched_matmul_on_two_threads() {
    if !ort_available() {
        return;
    }
    let body = "
  S = MatMul(Q, Kt)
  O = MatMul(S, V)
  P = MatMul(Q, W)
  L = MatMul(X, Y)";
    let text = model(
        13,
        "float[1,12,16,8] Q, float[1,12,8,16] Kt, float[1,12,16,8] V, float[8,5] W, float[2,256,200] X, float[2,200,256] Y",
        "float[1,12,16,16] S, float[1,12,16,8] O, float[1,12,16,5] P, float[2,256,256] L",
        &[],
        body,
    );
    let exe = compile_ok(&text);
    let mut data = Rng::new(4242);
    let feeds = [
        named("Q", data.tensor(&[1, 12, 16, 8], -1.0, 1.0)),
        named("Kt", data.tensor(&[1, 12, 8, 16], -1.0, 1.0)),
        named("V", data.tensor(&[1, 12, 16, 8], -1.0, 1.0)),
        named("W", data.tensor(&[8, 5], -1.0, 1.0)),
        named("X", data.tensor(&[2, 256, 200], -1.0, 1.0)),
        named("Y", data.tensor(&[2, 200, 256], -1.0, 1.0)),
    ];
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("a 2-thread pool");
    pool.install(|| compare(&exe, &text, &feeds, "2 threads"));
}

#[test]
fn unfoldable_batch_norm_and_shared_conv_output() {
    if !ort_available() {
        return;
    }
    // BN parameters fed at run time (no folding); a Conv output read by BN and by Relu (no
    // fusion); a Conv with weights fed at run time followed by Relu (fused, unpacked weights).
    let mut rng = Rng::new(9);
    let mut i = Inits {
        rng: &mut rng,
        list: Vec::new(),
    };
    i.weights("W", &[6, 3, 3, 3])
        .uniform("B", &[6], -0.2, 0.2)
        .batch_norm("n", 6);
    let inits = i.list;
    let body = "
  c = Conv <pads = [1, 1, 1, 1]> (X, W, B)
  Y = BatchNormalization(c, s, n_b, n_m, n_v)
  Z = Relu(c)
  d = Conv <strides = [2, 2]> (X, Wr)
  R = Relu(d)";
    let text = model(
        17,
        "float[1,3,7,7] X, float[6] s, float[4,3,3,3] Wr",
        "float[1,6,7,7] Y, float[1,6,7,7] Z, float[1,4,3,3] R",
        &inits,
        body,
    );
    let exe = compile_ok(&text);
    let ops = op_types(&exe);
    assert_eq!(count(&ops, "BatchNormalization"), 1, "{ops:?}");
    assert_eq!(count(&ops, "Relu"), 1, "{ops:?}");
    assert_eq!(count(&ops, "FusedConv"), 1, "{ops:?}");
    let mut data = Rng::new(900);
    for run in 0..2 {
        let feeds = [
            named("X", data.tensor(&[1, 3, 7, 7], -1.0, 1.0)),
            named("s", data.tensor(&[6], 0.5, 1.5)),
            named("Wr", data.tensor(&[4, 3, 3, 3], -0.5, 0.5)),
        ];
        compare(&exe, &text, &feeds, &format!("run {run}"));
    }
}

#[test]
fn broadcasting_binary_operators() {
    if !ort_available() {
        return;
    }
    // Every operator on shapes that broadcast in different positions (both sides, middle axes,
    // rank differences, scalars). Divisors are kept away from zero.
    let body = "
  P = Add(A, B)
  Q = Sub(B, A)
  R = Mul(A, C)
  S = Div(A, D)
  T = Div(E, A)
  U = Mul(E, F)
  V = Sub(G, C)";
    let text = model(
        17,
        "float[2,1,3,1] A, float[4,1,5] B, float[3,1] C, float[1,4,1,5] D, float E, float[2,3] F, float[2,3,3,4] G",
        "float[2,4,3,5] P, float[2,4,3,5] Q, float[2,1,3,1] R, float[2,4,3,5] S, float[2,1,3,1] T, float[2,3] U, float[2,3,3,4] V",
        &[],
        body,
    );
    let exe = compile_ok(&text);
    let mut data = Rng::new(1000);
    let feeds = [
        named("A", data.tensor(&[2, 1, 3, 1], 0.5, 2.0)),
        named("B", data.tensor(&[4, 1, 5], -2.0, 2.0)),
        named("C", data.tensor(&[3, 1], -2.0, 2.0)),
        named("D", data.tensor(&[1, 4, 1, 5], 0.5, 2.0)),
        named("E", data.tensor(&[], -2.0, 2.0)),
        named("F", data.tensor(&[2, 3], -2.0, 2.0)),
        named("G", data.tensor(&[2, 3, 3, 4], -2.0, 2.0)),
    ];
    compare(&exe, &text, &feeds, "broadcasting");
}

#[test]
fn larger_gemm_and_matmul_shapes() {
    if !ort_available() {
        return;
    }
    // Sizes past the kernels' register and cache blocks, with ragged edges.
    let mut rng = Rng::new(11);
    let mut i = Inits {
        rng: &mut rng,
        list: Vec::new(),
    };
    i.weights("Wt", &[67, 129])
        .uniform("c", &[67], -1.0, 1.0)
        .weights("Wm", &[130, 17]);
    let inits = i.list;
    let body = "
  G = Gemm <transA = 1, transB = 1, alpha = 0.75, beta = 0.5> (At, Wt, c)
  M = MatMul(Am, Wm)
  N = MatMul(Am, Bm)";
    let text = model(
        17,
        "float[129,33] At, float[3,65,130] Am, float[3,130,70] Bm",
        "float[33,67] G, float[3,65,17] M, float[3,65,70] N",
        &inits,
        body,
    );
    let exe = compile_ok(&text);
    let mut data = Rng::new(1100);
    let feeds = [
        named("At", data.tensor(&[129, 33], -1.0, 1.0)),
        named("Am", data.tensor(&[3, 65, 130], -1.0, 1.0)),
        named("Bm", data.tensor(&[3, 130, 70], -0.2, 0.2)),
    ];
    compare(&exe, &text, &feeds, "large");
}

#[test]
fn data_movement_and_large_element_wise() {
    if !ort_available() {
        return;
    }
    // Transposes that take the 2-D blocked path with ragged blocks, the 3-D path, a rank-5
    // permutation and a large (parallel) one; large broadcasting arithmetic; softmax along a
    // middle axis; Concat of three inputs; Flatten and Reshape around them.
    let body = "
  T2 = Transpose(A)
  T3 = Transpose <perm = [1, 0, 2]> (B)
  T5 = Transpose <perm = [4, 1, 3, 0, 2]> (C)
  TL = Transpose <perm = [2, 0, 1]> (L)
  E = Add(L, col)
  F = Mul(E, L)
  S = Softmax <axis = 1> (L)
  K = Concat <axis = 2> (B, B, B)
  fl = Flatten <axis = 2> (K)
  R = Reshape(fl, shape)";
    let text = model(
        13,
        "float[70,90] A, float[3,40,50] B, float[2,3,4,5,6] C, float[4,130,130] L, float[130,1] col",
        "float[90,70] T2, float[40,3,50] T3, float[6,3,5,2,4] T5, float[130,4,130] TL, \
         float[4,130,130] E, float[4,130,130] F, float[4,130,130] S, float[60,300] R",
        &["int64[2] shape = {60, -1}".to_string()],
        body,
    );
    let exe = compile_ok(&text);
    let mut data = Rng::new(1200);
    let feeds = [
        named("A", data.tensor(&[70, 90], -1.0, 1.0)),
        named("B", data.tensor(&[3, 40, 50], -1.0, 1.0)),
        named("C", data.tensor(&[2, 3, 4, 5, 6], -1.0, 1.0)),
        named("L", data.tensor(&[4, 130, 130], -3.0, 3.0)),
        named("col", data.tensor(&[130, 1], -1.0, 1.0)),
    ];
    compare(&exe, &text, &feeds, "data movement");
}

#[test]
fn float16_network_computed_in_float32() {
    if !ort_available() {
        return;
    }
    // float16 weights (so the rewrites meet float16 constants: BatchNormalization folded, the
    // residual Add and the activations fused, the decomposed GELU and the MatMul bias
    // recognised), float16 activations between float32 edges. Each float16 node computes in
    // float32 and rounds its result to float16; onnxruntime computes them in float32 too
    // (casts around its float32 kernels), rounding where its regions end: a few float16 ulps
    // apart at most.
    let mut rng = Rng::new(13);
    let mut i = Inits {
        rng: &mut rng,
        list: Vec::new(),
    };
    i.weights("Wa", &[4, 4, 3, 3])
        .uniform("Ba", &[4], -0.2, 0.2)
        .batch_norm("na", 4)
        .weights("Wb", &[4, 4, 3, 3])
        .weights("Wm", &[24, 16])
        .uniform("Bm", &[16], -0.2, 0.2)
        .weights("Wg", &[8, 16])
        .uniform("Bg", &[8], -0.2, 0.2)
        .values("sqrt2", &[], &[std::f32::consts::SQRT_2])
        .values("one", &[], &[1.0])
        .values("half", &[], &[0.5]);
    let inits = as_float16(&i.list);
    let body = "
  h = Cast <to = 10> (X)
  a = Conv <pads = [1, 1, 1, 1]> (h, Wa, Ba)
  an = BatchNormalization(a, na_s, na_b, na_m, na_v)
  ar = Relu(an)
  b = Conv <pads = [1, 1, 1, 1]> (ar, Wb)
  s = Add(b, h)
  r = Relu(s)
  p = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)
  P = Cast <to = 1> (p)
  m = Cast <to = 10> (M)
  q = MatMul(m, Wm)
  qb = Add(q, Bm)
  d = Div(qb, sqrt2)
  e = Erf(d)
  e1 = Add(e, one)
  g1 = Mul(qb, e1)
  g2 = Mul(g1, half)
  z = Gemm <transB = 1> (g2, Wg, Bg)
  sm = Softmax <axis = 1> (z)
  Z = Cast <to = 1> (sm)";
    let text = model(
        17,
        "float[2,4,6,6] X, float[3,24] M",
        "float[2,4,3,3] P, float[3,8] Z",
        &inits,
        body,
    );
    let exe = compile_ok(&text);
    let ops = op_types(&exe);
    assert_eq!(count(&ops, "BatchNormalization"), 0, "{ops:?}");
    assert_eq!(count(&ops, "FusedConv"), 2, "{ops:?}");
    // The MatMul took the bias Add and the recognised GELU.
    assert_eq!(count(&ops, "FusedMatMul"), 1, "{ops:?}");
    let gone = ["Erf", "Relu", "Add", "Mul", "Div", "Activation"];
    assert_eq!(
        gone.iter().map(|o| count(&ops, o)).sum::<usize>(),
        0,
        "{ops:?}"
    );
    let mut data = Rng::new(1300);
    let feeds = [
        named("X", data.tensor(&[2, 4, 6, 6], -1.0, 1.0)),
        named("M", data.tensor(&[3, 24], -1.0, 1.0)),
    ];
    // float16 keeps 11 significant bits (a relative step of 2^-10 ≈ 1e-3).
    let ours = compare_within(&exe, &text, &feeds, "float16", 4e-3, 2e-3);
    // Every output is a float16 value widened.
    for t in &ours {
        for &v in common::data(t) {
            assert_eq!(
                half::f16::from_f32(v).to_f32(),
                v,
                "{v} is not a float16 value"
            );
        }
    }
}
