//! Regression tests for what the hostile-model set (`scripts/hostile_models.py`) and the fuzz
//! targets found: each model once aborted, panicked or hung the process, and must now be
//! answered with a clear status, at init or at run time, leaving the executable usable.
#![forbid(unsafe_code)]

mod common;

use common::{compile, compile_ok, f32t, i64t, run, run_ok};
use onnxifi_rust::error::{Error, Status};

/// Asserts an error's status and that its message contains `needle`.
fn assert_refused(result: Result<impl Sized, Error>, status: Status, needle: &str) {
    let e = match result {
        Ok(_) => panic!("accepted; expected {status} mentioning {needle:?}"),
        Err(e) => e,
    };
    assert_eq!(e.status, status, "wrong status for: {}", e.message);
    assert!(
        e.message.contains(needle),
        "{:?} lacks {needle:?}",
        e.message
    );
}

#[test]
fn resize_to_a_huge_size_is_refused_before_its_tables_are_built() {
    // Once: an abort allocating one table entry per output index (2^40 of them).
    let sizes = r#"<ir_version: 8, opset_import: ["" : 19]>
g (float[1,1,2,2] X) => (float[1,1,a,b] Y)
<int64[4] sizes = {1, 1, 1099511627776, 1099511627776}>
{ [r] Y = Resize(X, , , sizes) }"#;
    assert_refused(compile(sizes), Status::UnsupportedShape, "Resize");
    let scales = r#"<ir_version: 8, opset_import: ["" : 19]>
g (float[1,1,2,2] X) => (float[1,1,a,b] Y)
<float[4] scales = {1.0, 1.0, 1e9, 1e9}>
{ [r] Y = Resize(X, , scales) }"#;
    assert_refused(
        compile(scales),
        Status::NoSystemMemory,
        "does not fit in memory",
    );
}

#[test]
fn resize_sizes_fed_at_run_time_are_checked_at_run_time() {
    let text = r#"<ir_version: 8, opset_import: ["" : 19]>
g (float[1,1,2,2] X, int64[4] S) => (float[1,1,a,b] Y)
{ [r] Y = Resize(X, , , S) }"#;
    let exe = compile_ok(text);
    let x = || f32t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let huge = i64t(&[4], &[1, 1, 1 << 40, 1 << 40]);
    assert_refused(
        run(&exe, vec![x(), huge]),
        Status::UnsupportedShape,
        "Resize",
    );
    let out = run_ok(&exe, vec![x(), i64t(&[4], &[1, 1, 4, 4])]);
    assert_eq!(out[0].shape, vec![1, 1, 4, 4]);
}

#[test]
fn resize_of_float_planes_to_an_empty_leading_axis() {
    // Once (model_bytes): the float32 plane path counted its planes from the input's leading
    // axes, so sizes {0, 1, 1, 1} made it expect one output element and panic on none.
    let text = r#"<ir_version: 8, opset_import: ["" : 19]>
g (float[1,1,2,104] X, int64[4] S) => (float[1,1,a,b] Y)
{ [r] Y = Resize <mode: string = "nearest"> (X, , , S) }"#;
    let exe = compile_ok(text);
    let x = || f32t(&[1, 1, 2, 104], &[1.5; 208]);
    for sizes in [[0, 1, 1, 1], [1, 0, 2, 3], [0, 0, 3, 3]] {
        let out = run_ok(&exe, vec![x(), i64t(&[4], &sizes)]);
        let want: Vec<usize> = sizes.iter().map(|&d| d as usize).collect();
        assert_eq!(out[0].shape, want);
        assert!(out[0].as_f32().unwrap().is_empty());
    }
    // The same executable still resizes a non-empty output: every element is the one value.
    let out = run_ok(&exe, vec![x(), i64t(&[4], &[1, 1, 3, 5])]);
    assert_eq!(out[0].shape, vec![1, 1, 3, 5]);
    assert_eq!(out[0].as_f32().unwrap(), &[1.5; 15][..]);
}

#[test]
fn depth_to_space_with_a_blocksize_whose_square_wraps() {
    // Once: blocksize² wrapped to 0 and `c % 0` panicked.
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,4,2,2] X) => (float[1,1,4,4] Y)
{ [d] Y = DepthToSpace <blocksize: int = 4294967296> (X) }"#;
    assert_refused(compile(text), Status::InvalidModel, "blocksize 4294967296");
}

#[test]
fn max_unpool_output_shape_fed_at_run_time_that_cannot_exist() {
    // Once: the output's element count overflowed to 0 and the kernel indexed past it.
    let text = r#"<ir_version: 8, opset_import: ["" : 11]>
g (float[1,1,2,2] X, int64[1,1,2,2] I, int64[4] S) => (float[1,1,a,b] Y)
{ [u] Y = MaxUnpool <kernel_shape: ints = [2, 2], strides: ints = [2, 2]> (X, I, S) }"#;
    let exe = compile_ok(text);
    let x = || f32t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let i = || i64t(&[1, 1, 2, 2], &[0, 3, 8, 15]);
    let huge = i64t(&[4], &[1, 1, 1 << 40, 1 << 40]);
    assert_refused(
        run(&exe, vec![x(), i(), huge]),
        Status::UnsupportedShape,
        "MaxUnpool",
    );
    let out = run_ok(&exe, vec![x(), i(), i64t(&[4], &[1, 1, 4, 4])]);
    assert_eq!(out[0].shape, vec![1, 1, 4, 4]);
}

#[test]
fn a_loop_whose_scan_outputs_outgrow_memory_is_stopped() {
    // Once: 2^31 iterations each stacking float[262144] aborted on an allocation (here while
    // init folds the all-constant loop). Now the loop stops once its scan outputs pass half the
    // memory limit. The limit is made small (a 2 GiB address space) by running the CLI in a
    // shell with `ulimit -v`.
    let text = r#"<ir_version: 8, opset_import: ["" : 16]>
g () => (float[n, 262144] Y)
<int64 M = {2147483648}>
{ shp = Constant <value = int64[1] {262144}> ()
  X = ConstantOfShape <value = float[1] {0.5}> (shp)
  c = Constant <value = bool {1}> ()
  [loop] Y = Loop (M, c) <body = b (int64 i, bool cin) => (bool cout, float[262144] s) {
      cout = Identity(cin)
      s = Identity(X)
  }> }"#;
    // The CLI built for this test, and the release library (`cargo build --release`, which
    // scripts/test.sh runs first) or the one ONNXIFI_RUST_LIB names.
    let lib = std::env::var_os("ONNXIFI_RUST_LIB").map_or_else(
        || {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target/release/libonnxifi_rust.so")
        },
        std::path::PathBuf::from,
    );
    assert!(
        lib.exists(),
        "{} is missing: run `cargo build --release` first",
        lib.display()
    );
    let dir = std::env::temp_dir().join(format!("onnxifi-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("loop.txt");
    std::fs::write(&model, text).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(r#"ulimit -v 2097152 && exec "$0" run "$1""#)
        .arg(env!("CARGO_BIN_EXE_onnxifi-run"))
        .arg(&model)
        .env("ONNXIFI_RUST_LIB", &lib)
        .env("ONNXIFI_RUST_NUM_THREADS", "1")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{:?}: {stderr}", out.status);
    assert!(stderr.contains("NO_SYSTEM_MEMORY"), "{stderr}");
    assert!(stderr.contains("scan outputs"), "{stderr}");
}

#[test]
fn a_loop_with_a_few_scan_outputs_still_runs() {
    let text = r#"<ir_version: 8, opset_import: ["" : 16]>
g (int64 M, float[4] X) => (float[n, 4] Y)
{ c = Constant <value = bool {1}> ()
  [loop] Y = Loop (M, c) <body = b (int64 i, bool cin) => (bool cout, float[4] s) {
      cout = Identity(cin)
      s = Identity(X)
  }> }"#;
    let exe = compile_ok(text);
    let m = onnxifi_rust::ir::Tensor::from_vec(vec![], vec![3i64]).unwrap();
    let out = run_ok(&exe, vec![m, f32t(&[4], &[1., 2., 3., 4.])]);
    assert_eq!(out[0].shape, vec![3, 4]);
}

#[test]
fn roi_align_with_an_endless_sampling_grid_is_refused() {
    // Once: a sampling_ratio of 2^40 (or an adaptive grid over a region scaled by 1e30) ran
    // for ever.
    let ratio = r#"<ir_version: 8, opset_import: ["" : 16]>
g (float[1,1,4,4] X, float[1,4] R, int64[1] B) => (float[1,1,1,1] Y)
{ [roi] Y = RoiAlign <output_height: int = 1, output_width: int = 1, sampling_ratio: int = 1099511627776> (X, R, B) }"#;
    let scale = r#"<ir_version: 8, opset_import: ["" : 16]>
g (float[1,1,4,4] X, float[1,4] R, int64[1] B) => (float[1,1,1,1] Y)
{ [roi] Y = RoiAlign <output_height: int = 1, output_width: int = 1, spatial_scale: float = 1e30> (X, R, B) }"#;
    for text in [ratio, scale] {
        let exe = compile_ok(text);
        let inputs = vec![
            f32t(
                &[1, 1, 4, 4],
                &(0..16).map(|v| v as f32).collect::<Vec<_>>(),
            ),
            f32t(&[1, 4], &[0., 0., 3., 3.]),
            i64t(&[1], &[0]),
        ];
        assert_refused(run(&exe, inputs), Status::UnsupportedShape, "sampling grid");
    }
}

#[test]
fn a_model_that_decodes_into_more_memory_than_the_process_has() {
    // 2^22 empty NodeProtos: 8 MiB on the wire, about 2^22 × 200 bytes decoded. The estimate
    // must exceed the wire size many times over; past the memory limit it is refused.
    let mut graph = Vec::new();
    for _ in 0..(1 << 22) {
        graph.extend_from_slice(&[0x0a, 0x00]);
    }
    let mut bytes = vec![0x3a];
    let mut len = graph.len();
    while len >= 0x80 {
        bytes.push((len as u8) | 0x80);
        len >>= 7;
    }
    bytes.push(len as u8);
    bytes.extend_from_slice(&graph);
    let size = onnxifi_rust::model::wire::decoded_size(&bytes).expect("well-formed wire data");
    assert_eq!(size.nodes, 1 << 22);
    assert!(size.decoded_bytes > 100 * bytes.len() as u64, "{size:?}");
    if size.decoded_bytes > onnxifi_rust::backend::memory_limit() {
        assert_refused(
            onnxifi_rust::model::decode(&bytes),
            Status::NoSystemMemory,
            "decoding the model",
        );
    }
}

#[test]
fn attention_with_values_shorter_than_keys_is_an_invalid_model() {
    // Found by the model_bytes fuzz target: V with 8 positions against K's 10 was indexed past
    // its end (a panic caught as INTERNAL_ERROR).
    let text = r#"<ir_version: 10, opset_import: ["" : 23]>
g (float[2,3,4,8] Q, float[2,3,10,8] K, float[2,3,8,8] V) => (float[2,3,4,8] Y)
{ [att] Y = Attention(Q, K, V) }"#;
    assert_refused(compile(text), Status::InvalidModel, "do not fit together");
}

#[test]
fn grid_sample_at_coordinates_far_outside_the_input() {
    // Found by the model_bytes fuzz target: the tap index next to a coordinate of 1e30
    // overflowed i64 (a panic with overflow checks on).
    for mode in ["linear", "cubic", "nearest"] {
        for padding in ["zeros", "border", "reflection"] {
            let text = format!(
                r#"<ir_version: 8, opset_import: ["" : 16]>
g (float[1,1,3,2] X, float[1,1,2,2] G) => (float[1,1,1,2] Y)
{{ [gs] Y = GridSample <mode: string = "{mode}", padding_mode: string = "{padding}"> (X, G) }}"#
            );
            let exe = compile_ok(&text);
            let x = f32t(&[1, 1, 3, 2], &[1., 2., 3., 4., 5., 6.]);
            let g = f32t(&[1, 1, 2, 2], &[1e30, -1e30, -1e30, 1e30]);
            let y = run_ok(&exe, vec![x, g]);
            let y = y[0].as_f32().unwrap();
            assert!(y.iter().all(|v| v.is_finite()), "{mode}/{padding}: {y:?}");
            if padding == "zeros" {
                assert_eq!(y, &[0.0, 0.0], "{mode}: outside is zero padding");
            }
        }
    }
}

#[test]
fn resize_with_a_region_of_interest_far_outside_the_input() {
    // Found by the model_bytes fuzz target: tf_crop_and_resize with an roi of 1e30 overflowed
    // the first tap index. Every sample lies outside the input: extrapolation_value.
    let text = r#"<ir_version: 8, opset_import: ["" : 19]>
g (float[1,1,4,4] X, float[4] R) => (float[1,1,2,2] Y)
<int64[2] sizes = {2, 2}>
{ [r] Y = Resize <axes: ints = [2, 3], coordinate_transformation_mode: string = "tf_crop_and_resize", mode: string = "linear", extrapolation_value: float = 7.0> (X, R, , sizes) }"#;
    let exe = compile_ok(text);
    let x = f32t(
        &[1, 1, 4, 4],
        &(0..16).map(|v| v as f32).collect::<Vec<_>>(),
    );
    let roi = f32t(&[4], &[1e30, 1e30, 2e30, 2e30]);
    let y = run_ok(&exe, vec![x, roi]);
    assert_eq!(y[0].as_f32().unwrap(), &[7.0; 4]);
}

#[test]
fn split_of_a_scalar_is_an_invalid_model() {
    // Found by the model_bytes fuzz target: axis 0 of a rank-0 input indexed an empty shape.
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float X) => (float A, float B)
{ [s] A, B = Split(X) }"#;
    assert_refused(compile(text), Status::InvalidModel, "cannot split a scalar");
}

#[test]
fn mat_mul_with_an_empty_side_gives_an_empty_product() {
    // Found by the model_bytes fuzz target: M = 0 made the per-batch chunk size 0 (a panic).
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,M,3] A, float[2,3,4] B) => (float[2,M,4] Y)
{ [mm] Y = MatMul(A, B) }"#;
    let exe = compile_ok(text);
    let out = run_ok(
        &exe,
        vec![f32t(&[2, 0, 3], &[]), f32t(&[2, 3, 4], &[1.0; 24])],
    );
    assert_eq!(out[0].shape, vec![2, 0, 4]);
    // K = 0: every element is an empty sum.
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,K] A, float[K,3] B) => (float[2,3] Y)
{ [mm] Y = MatMul(A, B) }"#;
    let exe = compile_ok(text);
    let out = run_ok(&exe, vec![f32t(&[2, 0], &[]), f32t(&[0, 3], &[])]);
    assert_eq!(out[0].as_f32().unwrap(), &[0.0; 6]);
}

#[test]
fn rotary_embedding_with_too_few_position_ids() {
    // Found by the model_bytes fuzz target in a CI run: position_ids shorter than batch ×
    // sequence were indexed past their end.
    let text = r#"<ir_version: 10, opset_import: ["" : 23]>
g (float[1,2,2,4] X, float[4,2] C, float[4,2] S, int64[1,1] P) => (float[1,2,2,4] Y)
{ [rope] Y = RotaryEmbedding(X, C, S, P) }"#;
    let exe = compile(text);
    let exe = match exe {
        Ok(exe) => exe,
        // Refusing the mismatch at load is as good as refusing it at run time.
        Err(e) => return assert_eq!(e.status, Status::InvalidModel, "{}", e.message),
    };
    let inputs = vec![
        f32t(&[1, 2, 2, 4], &[1.0; 16]),
        f32t(&[4, 2], &[1.0; 8]),
        f32t(&[4, 2], &[0.0; 8]),
        i64t(&[1, 1], &[0]),
    ];
    assert_refused(run(&exe, inputs), Status::InvalidShape, "position ids");
}

/// Compiles each model (ONNX text, opset 1 to 23 as it says) and asserts that it is refused as
/// an invalid model mentioning `needle`. `BuildCtx::axis` accepts axis 0 of a rank-0 input
/// (some operators allow an axis on scalars), so every operator whose axis must index the
/// input's shape refuses scalars itself.
fn assert_all_invalid(models: &[&str], needle: &str) {
    for text in models {
        eprintln!("model:\n{text}");
        assert_refused(compile(text), Status::InvalidModel, needle);
    }
}

#[test]
fn top_k_of_a_scalar_is_an_invalid_model() {
    // Once: axis 0 of a rank-0 input indexed an empty shape (a panic).
    let text = r#"<ir_version: 8, opset_import: ["" : 11]>
g (float X) => (float V, int64 I)
<int64[1] k = {0}>
{ [t] V, I = TopK <axis: int = 0> (X, k) }"#;
    assert_all_invalid(&[text], "scalar");
}

#[test]
fn cum_sum_of_a_scalar_is_an_invalid_model() {
    // Once: axis 0 of a rank-0 input indexed an empty shape (a panic).
    let text = r#"<ir_version: 8, opset_import: ["" : 14]>
g (float X) => (float Y)
<int64 a = {0}>
{ [c] Y = CumSum(X, a) }"#;
    assert_all_invalid(&[text], "scalar");
}

#[test]
fn arg_max_and_arg_min_of_a_scalar_are_invalid_models() {
    // Once: the default axis 0 of a rank-0 input indexed an empty shape (a panic).
    let max = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float X) => (int64 Y)
{ [a] Y = ArgMax(X) }"#;
    let min = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float X) => (int64 Y)
{ [a] Y = ArgMin <keepdims: int = 0> (X) }"#;
    assert_all_invalid(&[max, min], "scalar");
}

#[test]
fn lp_normalization_of_a_scalar_is_an_invalid_model() {
    // Once: axis 0 of a rank-0 input indexed an empty shape (a panic).
    let text = r#"<ir_version: 8, opset_import: ["" : 1]>
g (float X) => (float Y)
{ [l] Y = LpNormalization <axis: int = 0> (X) }"#;
    assert_all_invalid(&[text], "scalar");
}

#[test]
fn reducing_a_scalar_over_an_axis_is_an_invalid_model() {
    // Once: axes [0] of a rank-0 input indexed an empty table of reduced axes (a panic).
    let sum = r#"<ir_version: 8, opset_import: ["" : 18]>
g (float X) => (float Y)
<int64[1] a = {0}>
{ [r] Y = ReduceSum(X, a) }"#;
    let l2 = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float X) => (float Y)
{ [r] Y = ReduceL2 <axes: ints = [0]> (X) }"#;
    assert_all_invalid(&[sum, l2], "scalar");
    // Without axes, a scalar reduces to itself.
    let mean = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float X) => (float Y)
{ [r] Y = ReduceMean(X) }"#;
    let exe = compile_ok(mean);
    let y = run_ok(&exe, vec![f32t(&[], &[2.5])]);
    assert_eq!(y[0].as_f32().unwrap(), &[2.5]);
}

#[test]
fn resize_of_a_scalar_along_axes_is_an_invalid_model() {
    // Once: axes [0] of a rank-0 input indexed an empty table of scales (a panic).
    let scales = r#"<ir_version: 8, opset_import: ["" : 19]>
g (float X) => (float Y)
<float[1] s = {2.0}>
{ [r] Y = Resize <axes: ints = [0]> (X, , s) }"#;
    let sizes = r#"<ir_version: 8, opset_import: ["" : 19]>
g (float X) => (float Y)
<int64[1] s = {2}>
{ [r] Y = Resize <axes: ints = [0]> (X, , , s) }"#;
    assert_all_invalid(&[scales, sizes], "scalar");
}

#[test]
fn slice_of_a_scalar_is_an_invalid_model() {
    // Once: axis 0 (given, or the default) of a rank-0 input indexed an empty shape (a panic).
    let axes = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float X) => (float Y)
<int64[1] s = {0}, int64[1] e = {1}, int64[1] a = {0}>
{ [s] Y = Slice(X, s, e, a) }"#;
    let default_axes = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float X) => (float Y)
<int64[1] s = {0}, int64[1] e = {1}>
{ [s] Y = Slice(X, s, e) }"#;
    let attributes = r#"<ir_version: 8, opset_import: ["" : 1]>
g (float X) => (float Y)
{ [s] Y = Slice <starts: ints = [0], ends: ints = [1], axes: ints = [0]> (X) }"#;
    assert_all_invalid(&[axes, default_axes, attributes], "scalar");
}

#[test]
fn slice_backwards_over_an_empty_dimension_is_empty() {
    // Found auditing Slice: a negative step over a dimension of size 0 clamped the start to
    // 0..=-1 (`clamp` panics when its bounds cross).
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[N,2] X) => (float[M,2] Y)
<int64[1] s = {0}, int64[1] e = {-10}, int64[1] a = {0}, int64[1] st = {-1}>
{ [s] Y = Slice(X, s, e, a, st) }"#;
    let exe = compile_ok(text);
    let y = run_ok(&exe, vec![f32t(&[0, 2], &[])]);
    assert_eq!(y[0].shape, vec![0, 2]);
    let y = run_ok(&exe, vec![f32t(&[2, 2], &[1., 2., 3., 4.])]);
    assert_eq!(y[0].shape, vec![1, 2]);
    assert_eq!(y[0].as_f32().unwrap(), &[1., 2.]);
}

#[test]
fn slice_with_steps_at_the_ends_of_i64_takes_one_element() {
    // Found auditing Slice: the element count `(span + step - 1) / step` overflowed for a step
    // near i64::MAX or i64::MIN (a panic with overflow checks on, else an empty output).
    for (start, end, step, want) in [(0, 5, i64::MAX, 1.0), (-1, i64::MIN, i64::MIN, 3.0)] {
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[3] X) => (float[1] Y)
<int64[1] s = {{{start}}}, int64[1] e = {{{end}}}, int64[1] st = {{{step}}}>
{{ [s] Y = Slice(X, s, e, , st) }}"#
        );
        let exe = compile_ok(&text);
        let y = run_ok(&exe, vec![f32t(&[3], &[1., 2., 3.])]);
        assert_eq!(y[0].as_f32().unwrap(), &[want], "step {step}");
    }
}

#[test]
fn transpose_of_a_scalar_with_a_perm_is_an_invalid_model() {
    // Once: perm [0] of a rank-0 input indexed an empty table of seen axes (a panic).
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float X) => (float Y)
{ [t] Y = Transpose <perm: ints = [0]> (X) }"#;
    assert_all_invalid(&[text], "does not fit rank 0");
}

#[test]
fn padding_a_scalar_along_axes_is_an_invalid_model() {
    // Once: axes [0] of a rank-0 input indexed an empty table of pads (a panic).
    for mode in ["constant", "reflect", "edge", "wrap"] {
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 19]>
g (float X) => (float Y)
<int64[2] p = {{1, 1}}, int64[1] a = {{0}}>
{{ [p] Y = Pad <mode: string = "{mode}"> (X, p, , a) }}"#
        );
        assert_all_invalid(&[&text], "scalar");
    }
}

#[test]
fn pooling_paths_that_read_channels_of_a_low_rank_input() {
    // Once: the N-D pooling path read the channel count (dimension 1) of a scalar or 1-D input
    // before checking its rank (a panic): LpPool, GlobalLpPool, and MaxPool asked for Indices.
    let lp = r#"<ir_version: 8, opset_import: ["" : 18]>
g (float X) => (float Y)
{ [p] Y = LpPool <kernel_shape: ints = [1]> (X) }"#;
    let global = r#"<ir_version: 8, opset_import: ["" : 12]>
g (float[2] X) => (float Y)
{ [p] Y = GlobalLpPool(X) }"#;
    let max = r#"<ir_version: 8, opset_import: ["" : 12]>
g (float X) => (float Y, int64 I)
{ [p] Y, I = MaxPool <kernel_shape: ints = [1]> (X) }"#;
    assert_all_invalid(&[lp, global, max], "has no spatial dims");
}

#[test]
fn gather_nd_and_scatter_nd_with_empty_index_tuples() {
    // Found auditing the ND operators: index tuples of length 0 each select the whole data,
    // but the kernels walked the (empty) index buffer and gathered or scattered nothing.
    let gather = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2] X) => (float[3,2] Y)
<int64[3,0] I = {}>
{ [g] Y = GatherND(X, I) }"#;
    let exe = compile_ok(gather);
    let y = run_ok(&exe, vec![f32t(&[2], &[1., 2.])]);
    assert_eq!(y[0].as_f32().unwrap(), &[1., 2., 1., 2., 1., 2.]);
    let scatter = r#"<ir_version: 8, opset_import: ["" : 16]>
g (float[2] X) => (float[2] Y)
<int64[3,0] I = {}, float[3,2] U = {1.0, 2.0, 3.0, 4.0, 5.0, 6.0}>
{ [s] Y = ScatterND <reduction: string = "add"> (X, I, U) }"#;
    let exe = compile_ok(scatter);
    let y = run_ok(&exe, vec![f32t(&[2], &[10., 20.])]);
    assert_eq!(y[0].as_f32().unwrap(), &[19., 32.]);
}

#[test]
fn scatter_operators_refuse_the_ranks_their_spec_excludes() {
    // Found auditing Scatter*: ScatterElements of a scalar wrote its update without reading
    // the index (never bounds-checked), and ScatterND took a rank-0 indices tensor.
    let elements = r#"<ir_version: 8, opset_import: ["" : 16]>
g (float X, float U) => (float Y)
<int64 I = {5}>
{ [s] Y = ScatterElements(X, I, U) }"#;
    let nd = r#"<ir_version: 8, opset_import: ["" : 16]>
g (float[2] X, float[2] U) => (float[2] Y)
<int64 I = {0}>
{ [s] Y = ScatterND(X, I, U) }"#;
    assert_all_invalid(&[elements, nd], "rank");
}

#[test]
fn same_padded_pooling_over_an_empty_dimension_is_empty() {
    // Once (model_bytes fuzz target): `out - 1` underflowed for an input dimension of 0 while
    // computing SAME padding, a panic.
    let text = r#"<ir_version: 8, opset_import: ["" : 12]>
g (float[1,3,0,32] X) => (float[1,3,c,d] Y)
{ [p] Y = MaxPool <auto_pad: string = "SAME_UPPER", kernel_shape: ints = [126, 2]> (X) }"#;
    let exe = compile_ok(text);
    let out = run_ok(&exe, vec![f32t(&[1, 3, 0, 32], &[])]);
    assert_eq!(out[0].shape, vec![1, 3, 0, 32]);
}

#[test]
fn scan_whose_body_has_fewer_outputs_than_the_node() {
    // Once (model_bytes fuzz target): the builder indexed the body's outputs by the node's
    // output count, a panic.
    let text = r#"<ir_version: 8, opset_import: ["" : 16]>
g (float[2] S, float[3,2] X) => (float[2] T, float[3,2] Y)
{ [s] T, Y = Scan <num_scan_inputs: int = 1, body: graph = b (float[2] s, float[2] x) => (float[2] t) { t = Add(s, x) }> (S, X) }"#;
    assert_refused(
        compile(text),
        Status::InvalidModel,
        "the body has 2 inputs and 1 outputs",
    );
}

#[test]
fn conv_transpose_with_a_short_or_huge_output_shape() {
    // Once (the model_bytes fuzz target): an `output_shape` with fewer values than spatial
    // dimensions indexed past its end while the plan was built.
    let short = r#"<ir_version: 8, opset_import: ["" : 11]>
g (float[1,1,3,3] X, float[1,1,2,2] W) => (float[1,1,a,b] Y)
{ [ct] Y = ConvTranspose <output_shape: ints = [5]> (X, W) }"#;
    assert_refused(compile(short), Status::InvalidModel, "output_shape");
    let negative = r#"<ir_version: 8, opset_import: ["" : 11]>
g (float[1,1,3,3] X, float[1,1,2,2] W) => (float[1,1,a,b] Y)
{ [ct] Y = ConvTranspose <output_shape: ints = [-5, 4]> (X, W) }"#;
    assert_refused(compile(negative), Status::InvalidModel, "output_shape");
    // Strides and output padding whose products overflow i64 are refused, not wrapped.
    let huge = r#"<ir_version: 8, opset_import: ["" : 11]>
g (float[1,1,3,3] X, float[1,1,2,2] W) => (float[1,1,a,b] Y)
{ [ct] Y = ConvTranspose <strides: ints = [9223372036854775807, 1], output_padding: ints = [9223372036854775807, 0]> (X, W) }"#;
    assert!(compile(huge).is_err());
    // The well-formed one still compiles: 3 + 2 - 1 = 4 by 4.
    let ok = r#"<ir_version: 8, opset_import: ["" : 11]>
g (float[1,1,3,3] X, float[1,1,2,2] W) => (float[1,1,a,b] Y)
{ [ct] Y = ConvTranspose <output_shape: ints = [4, 4]> (X, W) }"#;
    let exe = compile_ok(ok);
    let out = run_ok(
        &exe,
        vec![
            f32t(&[1, 1, 3, 3], &[1.0; 9]),
            f32t(&[1, 1, 2, 2], &[1.0; 4]),
        ],
    );
    assert_eq!(out[0].shape, vec![1, 1, 4, 4]);
    // Corner of the full transposed convolution of ones: one overlap; centre: four.
    assert_eq!(out[0].as_f32().unwrap()[0], 1.0);
    assert_eq!(out[0].as_f32().unwrap()[5], 4.0);
}
