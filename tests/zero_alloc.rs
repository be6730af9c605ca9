//! The engine's steady state allocates nothing: once a graph has run on some input shapes, a
//! run on the same shapes — reading its inputs into recycled storage, computing every step,
//! handing its outputs back for reuse — makes no heap allocation, at 1 and at 2 threads.
//!
//! A counting global allocator (this test binary's own) counts the allocations made by the
//! test thread and by the pool's workers while a run is measured. The models cover the kernels
//! of the benchmark models: every convolution path (staged stem, pointwise, Winograd, im2col,
//! subsampled 1×1, depthwise) with fused residual and activations, pooling, Gemm, and a
//! transformer block (LayerNormalization, MatMul with bias, batched attention MatMuls,
//! Reshape, Transpose, Softmax with a mask, an Erf GELU).
//!
//! The warmed runs also recompute the first run's outputs bit for bit although their storage
//! was recycled with NaN in it: a kernel that claims to overwrite its outputs and leaves an
//! element unwritten shows up here.

mod common;
mod counting;

use common::model_bytes;
use counting::Counting;
use onnxifi_rust::exec::Executable;
use onnxifi_rust::ir::{DataType, Tensor, TensorData};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

static MEASURING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
/// The measurement in progress, numbered from 1 ([`MeasuredThread::new`] starts the next).
static MEASUREMENT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// The measurement whose allocations this thread's count for (0: none): the test thread
    /// and its pool's workers.
    static MEASURED: Cell<usize> = const { Cell::new(0) };
}

/// Counts an allocation of a thread of the measurement in progress while measuring is on.
///
/// A thread of an earlier measurement does not count: a dropped rayon pool's workers exit
/// on their own time, and one exiting (freeing and allocating its thread's state) during the
/// next test's measurement had been counted into it.
fn note_allocation() {
    if MEASURING.load(Ordering::Relaxed) {
        let mine = MEASURED.with(Cell::get);
        if mine != 0 && mine == MEASUREMENT.load(Ordering::Relaxed) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting {
    note: note_allocation,
};

/// One measurement at a time (the counters are global).
static SERIAL: Mutex<()> = Mutex::new(());

/// Starts a new measurement and marks this thread as one of it until dropped;
/// [`MeasuredThread::id`] marks the pool's workers. The harness runs tests on a few threads,
/// and one left marked by an earlier test would count what it allocates for another test
/// (building its model text before taking [`SERIAL`]) into the measurement in progress.
struct MeasuredThread {
    id: usize,
}

impl MeasuredThread {
    fn new() -> Self {
        let id = MEASUREMENT.fetch_add(1, Ordering::SeqCst) + 1;
        MEASURED.with(|m| m.set(id));
        MeasuredThread { id }
    }

    /// The measurement this thread's allocations count for.
    fn id(&self) -> usize {
        self.id
    }
}

impl Drop for MeasuredThread {
    fn drop(&mut self) {
        MEASURED.with(|m| m.set(0));
    }
}

/// A deterministic pseudo-random sequence in [-0.5, 0.5).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
        })
        .collect()
}

/// An initializer in ONNX text, with deterministic values scaled by `scale`.
fn weight(name: &str, shape: &[usize], seed: u64, scale: f32) -> String {
    let n = shape.iter().product();
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let data: Vec<String> = values(n, seed)
        .iter()
        .map(|v| format!("{:?}", v * scale))
        .collect();
    format!("float[{}] {name} = {{{}}}", dims.join(","), data.join(","))
}

/// A small CNN through every convolution path: a 7×7 stride-2 stem on 3 channels (staged
/// input), max pooling, a pointwise 1×1, a 3×3 at 24×24 (Winograd: 36 tiles), a 3×3 stride 2
/// (im2col) plus a 1×1 stride 2 shortcut (subsampled) added as a residual, a depthwise 3×3 with
/// Clip, average pooling, global average pooling, Flatten, Gemm and Softmax; beside them, as a
/// second output, a MobileNet expansion (1×1 to 128 channels at 48², 1.2 MB, with Clip) and
/// the stride-2 depthwise 3×3 after it, which run together in bands (`ConvDepthwise`).
fn cnn() -> String {
    let weights = [
        weight("w_stem", &[16, 3, 7, 7], 1, 0.3),
        weight("b_stem", &[16], 2, 0.1),
        weight("w_pw", &[32, 16, 1, 1], 3, 0.5),
        weight("b_pw", &[32], 4, 0.1),
        weight("w_wino", &[32, 32, 3, 3], 5, 0.2),
        weight("b_wino", &[32], 6, 0.1),
        weight("w_s2", &[64, 32, 3, 3], 7, 0.2),
        weight("b_s2", &[64], 8, 0.1),
        weight("w_short", &[64, 32, 1, 1], 9, 0.3),
        weight("w_dw", &[64, 1, 3, 3], 10, 0.5),
        weight("b_dw", &[64], 11, 0.1),
        weight("w_fc", &[10, 64], 12, 0.5),
        weight("b_fc", &[10], 13, 0.1),
        weight("w_ex", &[128, 16, 1, 1], 14, 0.3),
        weight("b_ex", &[128], 15, 0.1),
        weight("w_dw2", &[128, 1, 3, 3], 16, 0.5),
        weight("b_dw2", &[128], 17, 0.1),
        "float lo = {0.0}".to_string(),
        "float hi = {6.0}".to_string(),
    ];
    format!(
        r#"<ir_version: 8, opset_import: ["" : 17]>
cnn (float[1, 3, 96, 96] x) => (float[1, 10] y, float[1, 128, 1, 1] z)
<{}>
{{
  stem = Conv <kernel_shape: ints = [7, 7], strides: ints = [2, 2], pads: ints = [3, 3, 3, 3]> (x, w_stem, b_stem)
  r0 = Relu (stem)
  p0 = MaxPool <kernel_shape: ints = [3, 3], strides: ints = [2, 2], pads: ints = [1, 1, 1, 1]> (r0)
  c1 = Conv <kernel_shape: ints = [1, 1]> (p0, w_pw, b_pw)
  r1 = Relu (c1)
  c2 = Conv <kernel_shape: ints = [3, 3], pads: ints = [1, 1, 1, 1]> (r1, w_wino, b_wino)
  r2 = Relu (c2)
  c3 = Conv <kernel_shape: ints = [3, 3], strides: ints = [2, 2], pads: ints = [1, 1, 1, 1]> (r2, w_s2, b_s2)
  sc = Conv <kernel_shape: ints = [1, 1], strides: ints = [2, 2]> (r2, w_short)
  s3 = Add (c3, sc)
  r3 = Relu (s3)
  c4 = Conv <kernel_shape: ints = [3, 3], pads: ints = [1, 1, 1, 1], group: int = 64> (r3, w_dw, b_dw)
  r4 = Clip (c4, lo, hi)
  p4 = AveragePool <kernel_shape: ints = [2, 2], strides: ints = [2, 2]> (r4)
  g = GlobalAveragePool (p4)
  f = Flatten (g)
  logits = Gemm <transB: int = 1> (f, w_fc, b_fc)
  y = Softmax (logits)
  e5 = Conv <kernel_shape: ints = [1, 1]> (r0, w_ex, b_ex)
  m5 = Clip (e5, lo, hi)
  d5 = Conv <kernel_shape: ints = [3, 3], strides: ints = [2, 2], pads: ints = [1, 1, 1, 1], group: int = 128> (m5, w_dw2, b_dw2)
  r5 = Relu (d5)
  z = GlobalAveragePool (r5)
}}"#,
        weights.join(", ")
    )
}

/// One transformer encoder block (sequence 128, width 64, 2 heads, feed-forward 256): the
/// shapes of BERT's in miniature.
fn transformer() -> String {
    let (t, d, f) = (128, 64, 256);
    let mut weights = vec![
        weight("ln_g", &[d], 20, 1.0),
        weight("ln_b", &[d], 21, 0.2),
        weight("mask", &[1, 1, 1, t], 22, 1.0),
        weight("w_o", &[d, d], 23, 0.2),
        weight("b_o", &[d], 24, 0.1),
        weight("w_1", &[d, f], 25, 0.2),
        weight("b_1", &[f], 26, 0.1),
        weight("w_2", &[f, d], 27, 0.1),
        weight("b_2", &[d], 28, 0.1),
        "int64[4] heads = {1, 128, 2, 32}".to_string(),
        "int64[3] merged = {1, 128, 64}".to_string(),
        "float scale = {0.1767767}".to_string(),
        "float half = {0.5}".to_string(),
        "float one = {1.0}".to_string(),
        "float root2 = {1.4142135}".to_string(),
    ];
    for (i, name) in ["q", "k", "v"].iter().enumerate() {
        weights.push(weight(&format!("w_{name}"), &[d, d], 30 + i as u64, 0.2));
        weights.push(weight(&format!("b_{name}"), &[d], 40 + i as u64, 0.1));
    }
    let mut body = String::from(
        "  ln = LayerNormalization <axis: int = -1, epsilon: float = 1e-5> (x, ln_g, ln_b)\n",
    );
    for name in ["q", "k", "v"] {
        body += &format!(
            "  {name}m = MatMul (ln, w_{name})\n  {name}b = Add ({name}m, b_{name})\n  \
             {name}h = Reshape ({name}b, heads)\n"
        );
    }
    body += r#"  qt = Transpose <perm: ints = [0, 2, 1, 3]> (qh)
  kt = Transpose <perm: ints = [0, 2, 3, 1]> (kh)
  vt = Transpose <perm: ints = [0, 2, 1, 3]> (vh)
  s = MatMul (qt, kt)
  ss = Mul (s, scale)
  sm = Add (ss, mask)
  p = Softmax <axis: int = -1> (sm)
  c = MatMul (p, vt)
  ct = Transpose <perm: ints = [0, 2, 1, 3]> (c)
  cm = Reshape (ct, merged)
  om = MatMul (cm, w_o)
  ob = Add (om, b_o)
  h = Add (ob, x)
  f1 = MatMul (h, w_1)
  f1b = Add (f1, b_1)
  e0 = Div (f1b, root2)
  e1 = Erf (e0)
  e2 = Add (e1, one)
  e3 = Mul (f1b, e2)
  g = Mul (e3, half)
  f2 = MatMul (g, w_2)
  f2b = Add (f2, b_2)
  y = Add (f2b, h)
"#;
    format!(
        r#"<ir_version: 8, opset_import: ["" : 17]>
block (float[1, {t}, {d}] x) => (float[1, {t}, {d}] y)
<{}>
{{
{body}}}"#,
        weights.join(", ")
    )
}

/// Runs `exe` on `input` (little-endian f32 bytes of shape `shape`) as the C ABI does: input
/// storage from the graph's pool, [`Executable::run_into`], outputs handed back with
/// [`Executable::recycle`] after `inspect` saw them. Returns the allocations counted meanwhile
/// (measured when `measure`).
fn run_once(
    exe: &Executable,
    pool: &rayon::ThreadPool,
    (shape, input): (&[usize], &[u8]),
    measure: bool,
    inspect: &mut dyn FnMut(&mut [Tensor]),
) -> usize {
    let len: usize = shape.iter().product();
    // The shape vector and the lists are the caller's; made before counting starts.
    let shape = shape.to_vec();
    let mut inputs: Vec<Tensor> = Vec::with_capacity(1);
    let mut outputs: Vec<Tensor> = Vec::with_capacity(exe.outputs().len());
    ALLOCATIONS.store(0, Ordering::SeqCst);
    MEASURING.store(measure, Ordering::SeqCst);
    let mut storage = exe
        .input_storage(DataType::F32, len)
        .expect("input storage");
    storage.read_le_bytes(input, len).expect("input bytes");
    inputs.push(Tensor {
        shape,
        data: storage,
    });
    pool.install(|| exe.run_into(&mut inputs, &mut outputs))
        .expect("run");
    MEASURING.store(false, Ordering::SeqCst);
    let counted = ALLOCATIONS.load(Ordering::SeqCst);
    inspect(&mut outputs);
    MEASURING.store(measure, Ordering::SeqCst);
    exe.recycle(std::mem::take(&mut outputs));
    MEASURING.store(false, Ordering::SeqCst);
    counted + ALLOCATIONS.load(Ordering::SeqCst)
}

/// Compiles `text` and warms it up at `threads` threads until ten runs in a row allocated
/// nothing (about [`WARM_UP_MAX`] runs at most), then checks that ten more runs allocate nothing
/// (a measurement that allocated is taken again after a new warm-up, [`ATTEMPTS`] times in
/// all) and that every run reproduces the first run's output exactly.
///
/// Why a warm-up until it settles, and attempts: the kernels' scratch buffers are the
/// process's (see `kernels/scratch.rs`), and at 2 threads which requests overlap depends on
/// which worker takes which task. A run that meets a new overlap adds a buffer once; after
/// that the same overlap allocates nothing. Ten fixed warm-up runs left that still happening
/// in about one test run in five (one or two runs of the measured ten allocating 2 to 8 times,
/// all in `scratch::take`), and after ten clean runs in about one in thirteen.
fn assert_steady_state_allocates_nothing(what: &str, text: &str, shape: &[usize], threads: usize) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let measured_thread = MeasuredThread::new();
    let id = measured_thread.id();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .start_handler(move |_| MEASURED.with(|m| m.set(id)))
        .build()
        .expect("pool");
    let exe =
        onnxifi_rust::graph::compile_executable(&model_bytes(text), Vec::new()).expect("compiles");
    let n: usize = shape.iter().product();
    let input: Vec<u8> = values(n, 99)
        .iter()
        .flat_map(|v| (v * 2.0).to_le_bytes())
        .collect();
    let mut first: Option<Vec<f32>> = None;
    let (mut clean, mut measured) = (0, 0);
    let mut misses: Vec<String> = Vec::new();
    for round in 0.. {
        let measure = clean >= 10;
        if measure {
            if measured == 10 {
                break;
            }
            measured += 1;
        }
        assert!(
            round < ATTEMPTS * (WARM_UP_MAX + 10),
            "{what} at {threads} threads: still allocating after {round} runs"
        );
        let mut seen: Option<Vec<f32>> = None;
        // Every run is counted: the warm-up goes on until its runs allocate nothing.
        let counted = run_once(&exe, &pool, (shape, &input), true, &mut |outs| {
            let mut all = Vec::new();
            for out in outs.iter_mut() {
                let TensorData::F32(y) = &mut out.data else {
                    panic!("{what}: an output is not float")
                };
                all.extend_from_slice(y);
                // The storage goes back to the pool poisoned: the next runs' steps get it.
                y.fill(f32::NAN);
            }
            seen = Some(all);
        });
        let seen = seen.expect("an output");
        assert!(
            seen.iter().all(|v| v.is_finite()),
            "{what}: non-finite output"
        );
        match &first {
            None => first = Some(seen),
            Some(want) => assert!(
                *want == seen,
                "{what} at {threads} threads: run {round} differs from the first run"
            ),
        }
        if measure && counted != 0 {
            // The scratch set met a new overlap: it grows once, and the measurement starts
            // over after a new warm-up. Failing needs every attempt to allocate.
            misses.push(format!("run {round} allocated {counted} times"));
            assert!(
                misses.len() < ATTEMPTS,
                "{what} at {threads} threads: every measurement allocated: {misses:?}"
            );
            (clean, measured) = (0, 0);
        } else if !measure {
            clean = if counted == 0 { clean + 1 } else { 0 };
        }
    }
}

/// How many times [`assert_steady_state_allocates_nothing`] measures ten runs, each after its
/// own warm-up, before a measurement with allocations fails the test.
const ATTEMPTS: usize = 5;

/// The most warm-up runs [`assert_steady_state_allocates_nothing`] allows before its ten
/// clean ones.
const WARM_UP_MAX: usize = 200;

#[test]
fn cnn_runs_allocate_nothing_at_one_thread() {
    assert_steady_state_allocates_nothing("the CNN", &cnn(), &[1, 3, 96, 96], 1);
}

#[test]
fn cnn_runs_allocate_nothing_at_two_threads() {
    assert_steady_state_allocates_nothing("the CNN", &cnn(), &[1, 3, 96, 96], 2);
}

#[test]
fn transformer_runs_allocate_nothing_at_one_thread() {
    assert_steady_state_allocates_nothing(
        "the transformer block",
        &transformer(),
        &[1, 128, 64],
        1,
    );
}

#[test]
fn transformer_runs_allocate_nothing_at_two_threads() {
    assert_steady_state_allocates_nothing(
        "the transformer block",
        &transformer(),
        &[1, 128, 64],
        2,
    );
}

/// The counter sees the allocations of a measured thread (the test cannot pass vacuously).
#[test]
fn the_counter_counts() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let _measured = MeasuredThread::new();
    ALLOCATIONS.store(0, Ordering::SeqCst);
    MEASURING.store(true, Ordering::SeqCst);
    let v: Vec<u64> = std::hint::black_box(vec![1, 2, 3]);
    MEASURING.store(false, Ordering::SeqCst);
    drop(v);
    assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 1);
}

/// A thread still marked by an earlier measurement (a dropped pool's worker on its way out)
/// does not count into the current one; the current thread does.
#[test]
fn an_earlier_measurements_thread_does_not_count() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let earlier = MeasuredThread::new().id();
    let measured = MeasuredThread::new();
    assert_ne!(earlier, measured.id());
    // Spinning on atomics: a channel would allocate on the measured thread.
    static ALLOCATED: AtomicBool = AtomicBool::new(false);
    ALLOCATED.store(false, Ordering::SeqCst);
    let stale = std::thread::spawn(move || {
        MEASURED.with(|m| m.set(earlier));
        while !MEASURING.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
        let v: Vec<u64> = std::hint::black_box(vec![4, 5, 6]);
        drop(v);
        ALLOCATED.store(true, Ordering::SeqCst);
    });
    ALLOCATIONS.store(0, Ordering::SeqCst);
    MEASURING.store(true, Ordering::SeqCst);
    while !ALLOCATED.load(Ordering::SeqCst) {
        std::hint::spin_loop();
    }
    let mine: Vec<u64> = std::hint::black_box(vec![7, 8, 9]);
    MEASURING.store(false, Ordering::SeqCst);
    drop(mine);
    stale.join().expect("the stale thread");
    assert_eq!(ALLOCATIONS.load(Ordering::SeqCst), 1);
}
