//! The engine's plan model, checked on hand-computed values: a plan per tuple of input
//! *shapes* (never per input contents), weights packed once per graph and shared by every plan,
//! and nodes whose shapes depend on run-time data built during the run.
#![forbid(unsafe_code)]

mod common;

use common::{assert_close, assert_values, compile_ok, f32t, i64t, run, run_ok};
use onnxifi_rust::error::Status;

/// A deterministic pseudo-random sequence in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn initializer(name: &str, shape: &[usize], v: &[f32]) -> String {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let data: Vec<String> = v.iter().map(|x| format!("{x:?}")).collect();
    format!("float[{}] {name} = {{{}}}", dims.join(","), data.join(","))
}

/// `x[m×k] · w[k×n]`, row-major.
fn matmul(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
    let mut y = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            y[i * n + j] = (0..k).map(|p| x[i * k + p] * w[p * n + j]).sum();
        }
    }
    y
}

/// A 64-token embedding + two-layer MLP (BERT's input path in miniature): token ids select rows
/// of the embedding at run time; 50 different id tensors run on one plan, and the two MatMul
/// weights are packed once.
#[test]
fn fifty_token_id_inputs_share_one_plan_and_one_packing() {
    const VOCAB: usize = 100;
    const T: usize = 64;
    const D: usize = 32;
    const H: usize = 16;
    let emb = values(VOCAB * D, 1);
    let w1 = values(D * D, 2);
    let b1 = values(D, 3);
    let w2 = values(D * H, 4);
    let text = format!(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (int64[1, {T}] ids) => (float[1, {T}, {H}] y)
<{}, {}, {}, {}>
{{
  [e] x = Gather<axis = 0>(emb, ids)
  [m1] h = MatMul(x, w1)
  [a1] hb = Add(h, b1)
  [r] hr = Relu(hb)
  [m2] y = MatMul(hr, w2)
}}"#,
        initializer("emb", &[VOCAB, D], &emb),
        initializer("w1", &[D, D], &w1),
        initializer("b1", &[D], &b1),
        initializer("w2", &[D, H], &w2),
    );
    let exe = compile_ok(&text);
    let plans_at_init = exe.plans_built();
    let packs_at_init = exe.weight_preparations();
    assert_eq!(plans_at_init, 1, "a fixed-shape model is planned at init");
    assert_eq!(
        packs_at_init, 2,
        "the two MatMul weights are packed at init"
    );
    for round in 0..50u64 {
        let ids: Vec<i64> = (0..T as u64)
            .map(|t| ((t * 7 + round * 13 + t * round) % VOCAB as u64) as i64)
            .collect();
        let out = run_ok(&exe, vec![i64t(&[1, T], &ids)]);
        let x: Vec<f32> = ids
            .iter()
            .flat_map(|&i| emb[i as usize * D..(i as usize + 1) * D].to_vec())
            .collect();
        let mut h = matmul(&x, &w1, T, D, D);
        for (i, v) in h.iter_mut().enumerate() {
            *v = (*v + b1[i % D]).max(0.0);
        }
        let want = matmul(&h, &w2, T, D, H);
        assert_close(
            &out[0],
            &[1, T, H],
            &want,
            1e-4,
            1e-5,
            &format!("round {round}"),
        );
    }
    assert_eq!(exe.plans_built(), 1, "token ids never select a new plan");
    assert_eq!(exe.weight_preparations(), 2, "weights are packed once");
}

/// A plan per input shape, all sharing the packed weights: batches 1, 2, 3 build three plans
/// and pack the Gemm weight and the Conv filters once.
#[test]
fn plans_per_shape_share_the_packed_weights() {
    let w = values(8 * 4, 5);
    let f = values(2 * 3 * 3 * 3, 6);
    let text = format!(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 8] x, float[N, 3, 4, 4] img) => (float[N, 4] y, float[N, 2, 4, 4] z)
<{}, {}>
{{
  [g] y = Gemm(x, w)
  [c] z = Conv<pads = [1, 1, 1, 1]>(img, f)
}}"#,
        initializer("w", &[8, 4], &w),
        initializer("f", &[2, 3, 3, 3], &f),
    );
    let exe = compile_ok(&text);
    assert_eq!(
        exe.plans_built(),
        0,
        "a symbolic batch is planned at the first run"
    );
    for n in [1usize, 2, 3, 2, 1] {
        let x = values(n * 8, 10 + n as u64);
        let img = values(n * 3 * 16, 20 + n as u64);
        let out = run_ok(&exe, vec![f32t(&[n, 8], &x), f32t(&[n, 3, 4, 4], &img)]);
        assert_close(
            &out[0],
            &[n, 4],
            &matmul(&x, &w, n, 8, 4),
            1e-5,
            1e-5,
            "gemm",
        );
        let mut want = vec![0.0f32; n * 2 * 16];
        for b in 0..n {
            for o in 0..2 {
                for i in 0..4i64 {
                    for j in 0..4i64 {
                        let mut acc = 0.0;
                        for c in 0..3 {
                            for ky in 0..3i64 {
                                for kx in 0..3i64 {
                                    let (yy, xx) = (i + ky - 1, j + kx - 1);
                                    if (0..4).contains(&yy) && (0..4).contains(&xx) {
                                        acc += img
                                            [((b * 3 + c) * 4 + yy as usize) * 4 + xx as usize]
                                            * f[((o * 3 + c) * 3 + ky as usize) * 3 + kx as usize];
                                    }
                                }
                            }
                        }
                        want[((b * 2 + o) * 4 + i as usize) * 4 + j as usize] = acc;
                    }
                }
            }
        }
        assert_close(&out[1], &[n, 2, 4, 4], &want, 1e-5, 1e-5, "conv");
    }
    assert_eq!(exe.plans_built(), 3, "one plan per distinct batch size");
    assert_eq!(
        exe.weight_preparations(),
        2,
        "the Gemm weight and the conv filters are packed once for all plans"
    );
}

/// A 3×3 convolution, pads 1, by the definition: `img` `[n, c, h, w]`, `f` `[m, c, 3, 3]`.
fn conv3x3_ref(
    img: &[f32],
    f: &[f32],
    (n, c, h, w): (usize, usize, usize, usize),
    m: usize,
) -> Vec<f32> {
    let mut out = vec![0.0f32; n * m * h * w];
    for b in 0..n {
        for o in 0..m {
            for i in 0..h {
                for j in 0..w {
                    let mut acc = 0.0f64;
                    for ci in 0..c {
                        for ky in 0..3 {
                            for kx in 0..3 {
                                let (yy, xx) = ((i + ky) as i64 - 1, (j + kx) as i64 - 1);
                                if (0..h as i64).contains(&yy) && (0..w as i64).contains(&xx) {
                                    let x = img[((b * c + ci) * h + yy as usize) * w + xx as usize];
                                    acc += f64::from(x)
                                        * f64::from(f[((o * c + ci) * 3 + ky) * 3 + kx]);
                                }
                            }
                        }
                    }
                    out[((b * m + o) * h + i) * w + j] = acc as f32;
                }
            }
        }
    }
    out
}

/// The form of a 3×3 convolution's prepared filters depends on the input's shape (Winograd
/// F(4×4, 3×3) needs 16 output tiles of 4×4: 4 images of 8×8, so 8 and 9 here; im2col below
/// that, 32 channels being too few for F(2×2, 3×3)), so plans of both forms live side by side
/// on one graph and each gets the filters it needs.
#[test]
fn conv_filters_per_form_across_plans() {
    let f = values(32 * 32 * 9, 7);
    let text = format!(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 32, 8, 8] img) => (float[N, 32, 8, 8] z)
<{}>
{{
  [c] z = Conv<pads = [1, 1, 1, 1]>(img, f)
}}"#,
        initializer("f", &[32, 32, 3, 3], &f),
    );
    let exe = compile_ok(&text);
    for n in [1usize, 8, 2, 9, 1] {
        let img = values(n * 32 * 64, 30 + n as u64);
        let out = run_ok(&exe, vec![f32t(&[n, 32, 8, 8], &img)]);
        let want = conv3x3_ref(&img, &f, (n, 32, 8, 8), 32);
        assert_close(
            &out[0],
            &[n, 32, 8, 8],
            &want,
            1e-4,
            1e-4,
            &format!("batch {n}"),
        );
    }
    assert_eq!(exe.plans_built(), 4, "one plan per distinct batch size");
    assert_eq!(
        exe.weight_preparations(),
        2,
        "the filters are prepared once per form (im2col and Winograd)"
    );
}

fn transpose(w: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..cols * rows)
        .map(|i| w[(i % rows) * cols + i / rows])
        .collect()
}

/// Float32 matrices that only GEMM B operands read are held only in packed form: their data
/// leaves the graph at init (one packing per distinct use: a `Gemm<transB = 1>` and a `MatMul`
/// sharing `wt` pack it twice), while a weight another operator also reads keeps it. Three
/// batch sizes plan three times, and a MatMul built during the run (after a Reshape to a
/// run-time target) finds the packed form too.
#[test]
fn gemm_weights_are_held_only_packed() {
    let w1 = values(8 * 4, 31);
    let wt = values(8 * 8, 32);
    let wk = values(8 * 4, 33);
    let text = format!(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 8] x, int64[2] s) => (float[N, 4] y, float[N, 8] t, float[?, ?] z, float[N, 4] yk, float[8, 4] k2)
<{}, {}, {}>
{{
  [m] y = MatMul(x, w1)
  [g] t0 = Gemm<transB = 1>(x, wt)
  [m2] t1 = MatMul(x, wt)
  [a] t = Add(t0, t1)
  [r] xr = Reshape(x, s)
  [mz] z = MatMul(xr, w1)
  [mk] yk = MatMul(x, wk)
  [nk] k2 = Neg(wk)
}}"#,
        initializer("w1", &[8, 4], &w1),
        initializer("wt", &[8, 8], &wt),
        initializer("wk", &[8, 4], &wk),
    );
    let exe = compile_ok(&text);
    let value = |name: &str| {
        exe.graph()
            .values
            .iter()
            .find(|v| v.name == name)
            .expect("the weight is in the graph")
    };
    for (name, shape) in [("w1", [8, 4]), ("wt", [8, 8])] {
        assert!(value(name).constant.is_none(), "{name}'s data was dropped");
        assert_eq!(value(name).packed_only.as_deref(), Some(&shape[..]));
    }
    assert!(
        value("wk").constant.is_some(),
        "Neg reads wk: it keeps its data"
    );
    assert!(value("wk").packed_only.is_none());
    assert_eq!(
        exe.weight_preparations(),
        3,
        "w1 once, wt for each of its two uses"
    );
    for n in [1usize, 3, 2, 3] {
        let x = values(n * 8, 40 + n as u64);
        let out = run_ok(&exe, vec![f32t(&[n, 8], &x), i64t(&[2], &[-1, 8])]);
        let xw1 = matmul(&x, &w1, n, 8, 4);
        assert_close(&out[0], &[n, 4], &xw1, 1e-5, 1e-5, "MatMul(x, w1)");
        let t: Vec<f32> = matmul(&x, &transpose(&wt, 8, 8), n, 8, 8)
            .iter()
            .zip(matmul(&x, &wt, n, 8, 8))
            .map(|(a, b)| a + b)
            .collect();
        assert_close(&out[1], &[n, 8], &t, 1e-5, 1e-5, "Gemm + MatMul on wt");
        assert_close(
            &out[2],
            &[n, 4],
            &xw1,
            1e-5,
            1e-5,
            "MatMul built at run time",
        );
        let xwk = matmul(&x, &wk, n, 8, 4);
        assert_close(&out[3], &[n, 4], &xwk, 1e-5, 1e-5, "MatMul(x, wk)");
        let neg: Vec<f32> = wk.iter().map(|v| -v).collect();
        assert_values(&out[4], &[8, 4], &neg, "Neg(wk)");
    }
    assert_eq!(exe.plans_built(), 3, "one plan per batch size");
    assert_eq!(
        exe.weight_preparations(),
        4,
        "wk is packed once by the first plan; nothing held packed is made again"
    );
}

/// A weight keeps its data where handing it to the packed form would lose something: a MatMul
/// of two weights (each plan folds it, which needs both) and an empty weight, even one with a
/// dimension of 2^62 (its packing would loop over that many rows; the model is refused at once
/// for its mismatched inner dimension instead).
#[test]
fn weights_keep_their_data_where_packing_would_lose_it() {
    let a = values(2 * 8, 51);
    let w = values(8 * 4, 52);
    let text = format!(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y)
<{}, {}>
{{
  [f] c = MatMul(a, w)
  [s] y = Add(c, x)
}}"#,
        initializer("a", &[2, 8], &a),
        initializer("w", &[8, 4], &w),
    );
    let exe = compile_ok(&text);
    let w_value = exe.graph().values.iter().find(|v| v.name == "w").unwrap();
    assert!(w_value.constant.is_some() && w_value.packed_only.is_none());
    let x = values(2 * 4, 53);
    let out = run_ok(&exe, vec![f32t(&[2, 4], &x)]);
    let want: Vec<f32> = matmul(&a, &w, 2, 8, 4)
        .iter()
        .zip(&x)
        .map(|(c, x)| c + x)
        .collect();
    assert_close(&out[0], &[2, 4], &want, 1e-5, 1e-5, "folded MatMul + x");

    let huge = 1usize << 62;
    let text = format!(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 3] x) => (float[1, 0] y)
<float[{huge}, 0] e = {{}}>
{{
  [m] y = MatMul(x, e)
}}"#
    );
    let Err(e) = common::compile(&text) else {
        panic!("a MatMul of [1, 3] by [2^62, 0] loaded");
    };
    assert_eq!(e.status, Status::InvalidModel, "{}", e.message);
}

/// `z = Conv(x, f, b)` (3×3, pads 1) and `h`'s pointwise convolution added to `h` itself, on
/// `x` of `shape`, and the initializers.
fn prepared_weights_model(shape: &str, f: &[f32], b: &[f32], h: &[f32]) -> String {
    format!(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[{shape}] x) => (float[{shape}] z, float[?, 8, 5, 5] s)
<{}, {}, {}>
{{
  [c] z = Conv<pads = [1, 1, 1, 1]>(x, f, b)
  [p] y = Conv(x, h)
  [a] s = Add(y, h)
}}"#,
        initializer("f", &[8, 8, 3, 3], f),
        initializer("b", &[8], b),
        initializer("h", &[8, 8, 1, 1], h),
    )
}

/// With every input shape fixed, the graph's one plan owns the weights and drops those its
/// convolutions prepared (filters and bias, read at run time from the prepared kernel only)
/// as each is built; a weight that another step reads at run time (`h`, added to a product)
/// keeps its data, and so does every weight of a graph that may plan other shapes.
#[test]
fn convolution_weights_live_only_prepared_in_the_one_plan_of_fixed_shapes() {
    let (f, b, h) = (values(8 * 8 * 9, 61), values(8, 62), values(64, 63));
    let check = |exe: &onnxifi_rust::exec::Executable, n: usize| {
        let x = values(n * 8 * 25, 64 + n as u64);
        let out = run_ok(exe, vec![f32t(&[n, 8, 5, 5], &x)]);
        let mut z = conv3x3_ref(&x, &f, (n, 8, 5, 5), 8);
        for (i, v) in z.iter_mut().enumerate() {
            *v += b[i / 25 % 8];
        }
        assert_close(&out[0], &[n, 8, 5, 5], &z, 1e-4, 1e-4, "Conv(x, f, b)");
        // y [n, 8, 5, 5] + h [8, 8, 1, 1] (n is 1 or 8): s[i, o, p] = Σ_c h[o, c]·x[i or 0, c, p]
        // + h[i, o].
        let mut s = Vec::new();
        for i in 0..8 {
            let image = if n == 1 { 0 } else { i };
            for o in 0..8 {
                for p in 0..25 {
                    let y: f32 = (0..8)
                        .map(|c| h[o * 8 + c] * x[(image * 8 + c) * 25 + p])
                        .sum();
                    s.push(y + h[i * 8 + o]);
                }
            }
        }
        assert_close(&out[1], &[8, 8, 5, 5], &s, 1e-5, 1e-5, "Conv(x, h) + h");
    };
    let fixed = compile_ok(&prepared_weights_model("1, 8, 5, 5", &f, &b, &h));
    let value = |exe: &onnxifi_rust::exec::Executable, name: &str| {
        let v = exe.graph().values.iter().find(|v| v.name == name);
        let v = v.expect("the weight is in the graph");
        (v.constant.is_some(), v.packed_only.clone())
    };
    assert_eq!(value(&fixed, "f"), (false, Some(vec![8, 8, 3, 3])));
    assert_eq!(value(&fixed, "b"), (false, Some(vec![8])));
    assert_eq!(value(&fixed, "h"), (true, None), "Add reads h at run time");
    check(&fixed, 1);
    check(&fixed, 1);
    assert_eq!(fixed.plans_built(), 1);

    let symbolic = compile_ok(&prepared_weights_model("N, 8, 5, 5", &f, &b, &h));
    check(&symbolic, 1);
    for name in ["f", "b", "h"] {
        assert!(value(&symbolic, name).0, "{name} keeps its data");
    }
    check(&symbolic, 8);
    assert_eq!(symbolic.plans_built(), 2);
}

/// A Reshape whose target is a graph input: the node is built during the run from the target's
/// contents, on one plan, and an impossible target fails that run alone.
#[test]
fn reshape_to_a_run_time_target() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 6] x, int64[2] s) => (float[?, ?] y)
{
  [r] r = Reshape(x, s)
  [n] y = Neg(r)
}"#;
    let exe = compile_ok(text);
    let x: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let neg: Vec<f32> = x.iter().map(|v| -v).collect();
    for (target, shape) in [
        ([3i64, 4], [3usize, 4]),
        ([4, 3], [4, 3]),
        ([-1, 2], [6, 2]),
        ([12, 1], [12, 1]),
        ([3, 4], [3, 4]),
    ] {
        let out = run_ok(&exe, vec![f32t(&[2, 6], &x), i64t(&[2], &target)]);
        assert_values(&out[0], &shape, &neg, &format!("target {target:?}"));
    }
    let e = run(&exe, vec![f32t(&[2, 6], &x), i64t(&[2], &[5, 5])]).unwrap_err();
    assert_ne!(e.status, Status::Success);
    let out = run_ok(&exe, vec![f32t(&[2, 6], &x), i64t(&[2], &[2, 6])]);
    assert_values(&out[0], &[2, 6], &neg, "after a failed run");
    assert_eq!(exe.plans_built(), 1, "contents never select a plan");
}

/// `Shape` of a computed value folds while planning, and so does the shape arithmetic after
/// it: YOLOv8's anchor grid (`Shape → Gather → Cast → Range`, then `Expand` and `Reshape`)
/// was built at run time, so the outputs' sizes were known only to a run.
#[test]
fn shape_arithmetic_on_computed_values_folds_while_planning() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 2, 3, 4] x) => (float[?] grid, float[?, ?] y)
{
  [c] c = Relu(x)
  [s] s = Shape(c)
  [i] i = Constant<value = int64[1] {3}>()
  [w] w = Gather<axis = 0>(s, i)
  [f] f = Cast<to = 1>(w)
  [z] z = Constant<value = float {0.0}>()
  [o] o = Constant<value = float {0.5}>()
  [q] q = Squeeze(f)
  [grid] grid = Range(z, q, o)
  [h] h = Constant<value = int64[1] {-1}>()
  [t] t = Concat<axis = 0>(h, w)
  [y] y = Reshape(c, t)
}"#;
    let exe = compile_ok(text);
    // Both sizes are known before any run: 4 / 0.5 = 8 grid points, and 24 values in rows of 4.
    let shapes = exe.output_shapes(&[vec![1, 2, 3, 4]]).unwrap();
    assert_eq!(shapes, vec![Some(vec![8]), Some(vec![6, 4])]);
    let x: Vec<f32> = (0..24).map(|i| i as f32 - 12.0).collect();
    let out = run_ok(&exe, vec![f32t(&[1, 2, 3, 4], &x)]);
    let grid: Vec<f32> = (0..8).map(|i| i as f32 * 0.5).collect();
    assert_values(&out[0], &[8], &grid, "grid");
    let relu: Vec<f32> = x.iter().map(|v| v.max(0.0)).collect();
    assert_values(&out[1], &[6, 4], &relu, "y");
}

/// Storage comes back for later runs: the graph input is freed into the pool after its last
/// reader, outputs go back with `recycle`, and `input_storage` hands out a free buffer (stale)
/// that `read_le_bytes` overwrites. The results stay right on recycled storage.
#[test]
fn run_storage_is_recycled_for_later_runs() {
    use onnxifi_rust::ir::{DataType, Tensor};
    const N: usize = 4 * 256;
    let exe = compile_ok(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 256] x) => (float[4, 256] y) { t = Relu(x) y = Neg(t) }"#,
    );
    // Nothing to recycle before the first run.
    let fresh = exe.input_storage(DataType::F32, N).expect("storage");
    assert_eq!(fresh.capacity(), 0);
    let want = |x: &[f32]| -> Vec<f32> { x.iter().map(|v| -v.max(0.0)).collect() };
    let x1 = values(N, 11);
    let out = run_ok(&exe, vec![f32t(&[4, 256], &x1)]);
    assert_values(&out[0], &[4, 256], &want(&x1), "first run");
    exe.recycle(out);
    for seed in [12, 13, 14] {
        let x = values(N, seed);
        let mut storage = exe.input_storage(DataType::F32, N).expect("storage");
        assert!(
            storage.capacity() >= N,
            "a buffer of the last run is reused"
        );
        let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
        storage.read_le_bytes(&bytes, N).expect("bytes fit");
        let input = Tensor::new(vec![4, 256], storage).expect("fits");
        let out = run_ok(&exe, vec![input]);
        assert_values(&out[0], &[4, 256], &want(&x), "run on recycled storage");
        exe.recycle(out);
    }
}

/// Concat and Split write every element of their outputs, which therefore arrive with the
/// stale content of recycled storage rather than zeroed: run after run, with the last run's
/// outputs recycled, the results are the hand-computed ones. (A concatenation along the inner
/// axis, then pieces of unequal width split back off it.)
#[test]
fn concat_and_split_fill_recycled_storage() {
    let exe = compile_ok(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 6] x, float[4, 2] z) => (float[4, 3] a, float[4, 5] b) <int64[2] parts = {3, 5}> {
  t = Concat<axis: int = 1>(x, z)
  a, b = Split<axis: int = 1>(t, parts)
}"#,
    );
    for seed in [31, 32, 33] {
        let (x, z) = (values(24, seed), values(8, seed + 100));
        let row = |r: usize| -> Vec<f32> {
            x[6 * r..6 * r + 6]
                .iter()
                .chain(&z[2 * r..2 * r + 2])
                .copied()
                .collect()
        };
        let a: Vec<f32> = (0..4).flat_map(|r| row(r)[..3].to_vec()).collect();
        let b: Vec<f32> = (0..4).flat_map(|r| row(r)[3..].to_vec()).collect();
        let out = run_ok(&exe, vec![f32t(&[4, 6], &x), f32t(&[4, 2], &z)]);
        assert_values(&out[0], &[4, 3], &a, "a");
        assert_values(&out[1], &[4, 5], &b, "b");
        exe.recycle(out);
    }
}

/// A shape operator whose input dies at it hands that storage on instead of copying it. The
/// value reshaped here is twice the input's size (`Concat(x, x)`), so only its own buffer can
/// serve a request for that much storage after the run: where it was handed on to the output,
/// none is free; where it was copied (it is read again after the Reshape), it is. The values
/// are right in every case, on every operator that forwards (Reshape, Flatten, Squeeze,
/// Unsqueeze, Identity), also in a chain, and where the reshaped value is a graph output too.
#[test]
fn shape_operators_take_over_their_dying_input() {
    use onnxifi_rust::ir::DataType;
    const N: usize = 4 * 256;
    let x = values(N, 21);
    let twice: Vec<f32> = x.iter().chain(&x).copied().collect();
    // Free buffers of at least `len` floats after a run (each request takes one).
    let free_buffers = |exe: &onnxifi_rust::exec::Executable, len: usize| {
        (0..4)
            .map(|_| exe.input_storage(DataType::F32, len).expect("storage"))
            .filter(|s| s.capacity() >= len)
            .count()
    };
    let consts = "int64[2] s = {32, 64}, int64[1] ax = {0}";
    for (body, forwarded) in [
        ("t = Concat<axis: int = 0>(x, x) y = Reshape(t, s)", true),
        (
            "t = Concat<axis: int = 0>(x, x) f = Flatten<axis: int = 0>(t) u = Unsqueeze(f, ax) \
             q = Squeeze(u, ax) i = Identity(q) y = Reshape(i, s)",
            true,
        ),
        // The concatenation outlives the first Reshape: copied there.
        (
            "t = Concat<axis: int = 0>(x, x) r = Reshape(t, s) z = Neg(t) w = Reshape(z, s) \
             y = Sub(r, w)",
            false,
        ),
    ] {
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 256] x) => (float[32, 64] y) <{consts}> {{ {body} }}"#
        );
        let exe = compile_ok(&text);
        let out = run_ok(&exe, vec![f32t(&[4, 256], &x)]);
        let scale = if forwarded { 1.0 } else { 2.0 };
        let want: Vec<f32> = twice.iter().map(|v| scale * v).collect();
        assert_values(&out[0], &[32, 64], &want, body);
        let free = free_buffers(&exe, 2 * N);
        if forwarded {
            assert_eq!(free, 0, "{body}: the concatenation became the output");
        } else {
            assert!(
                free >= 1,
                "{body}: the copied concatenation's buffer is free"
            );
        }
    }
    // A value that is a graph output and is reshaped: copied, both outputs right.
    let exe = compile_ok(&format!(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 256] x) => (float[8, 256] t, float[32, 64] y) <{consts}>
{{ t = Concat<axis: int = 0>(x, x) y = Reshape(t, s) }}"#
    ));
    let out = run_ok(&exe, vec![f32t(&[4, 256], &x)]);
    assert_values(&out[0], &[8, 256], &twice, "t");
    assert_values(&out[1], &[32, 64], &twice, "y");
    // A graph input reshaped into an output: the input is the run's own tensor here and moves.
    let exe = compile_ok(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 256] x) => (float[16, 64] y) <int64[2] s = {16, 64}> { y = Reshape(x, s) }"#,
    );
    let out = run_ok(&exe, vec![f32t(&[4, 256], &x)]);
    assert_values(&out[0], &[16, 64], &x, "reshaped input");
    assert_eq!(free_buffers(&exe, N), 0, "the input became the output");
}

/// A bfloat16 Gemm and MatMul (a graph of bfloat16 inputs, weights and outputs) compute in
/// float32 and round once: each output is the bfloat16 nearest to the exact product of the
/// bfloat16 operands, give or take one bfloat16 step where float32's own rounding decided a
/// near-tie.
#[test]
fn bfloat16_products_round_once() {
    use half::bf16;
    let (m, k, n) = (5, 40, 33);
    let round = |v: Vec<f32>| -> Vec<bf16> { v.into_iter().map(bf16::from_f32).collect() };
    let w = round(values(k * n, 71));
    let bits: Vec<String> = w.iter().map(|v| v.to_bits().to_string()).collect();
    let text = format!(
        "<ir_version: 8, opset_import: [\"\" : 13]>\n\
         g (bfloat16[{m},{k}] X) => (bfloat16[{m},{n}] Y, bfloat16[{m},{n}] G)\n\
         <bfloat16[{k},{n}] W = {{{}}}>\n\
         {{\n  Y = MatMul(X, W)\n  G = Gemm <alpha = 0.5> (X, W)\n}}\n",
        bits.join(", ")
    );
    let exe = compile_ok(&text);
    let x = round(values(m * k, 72));
    let xt = onnxifi_rust::ir::Tensor::from_vec(vec![m, k], x.clone()).unwrap();
    let out = run_ok(&exe, vec![xt]);
    let exact: Vec<f64> = (0..m * n)
        .map(|ij| {
            let (i, j) = (ij / n, ij % n);
            (0..k)
                .map(|p| x[i * k + p].to_f64() * w[p * n + j].to_f64())
                .sum()
        })
        .collect();
    for (t, scale, what) in [(&out[0], 1.0, "MatMul"), (&out[1], 0.5, "Gemm")] {
        assert_eq!(t.shape, [m, n], "{what}");
        let got = t.as_slice::<bf16>().expect("a bfloat16 output");
        for (g, e) in got.iter().zip(&exact) {
            let want = bf16::from_f64(e * scale);
            let step = (want.to_f64().abs() * 2f64.powi(-7)).max(1e-30);
            assert!(
                (g.to_f64() - want.to_f64()).abs() <= step,
                "{what}: got {g}, want {want} (exact {})",
                e * scale
            );
        }
    }
}

/// A float16 value that only float32 computations read stays float32 between them; one the
/// caller sees (a graph output) is rounded. `x·c` with `x = 1 + 3·2⁻¹⁰`, `c = 1 + 2⁻¹⁰` is
/// `1 + 2⁻⁸ + 3·2⁻²⁰`, which float16 rounds to `1 + 2⁻⁸`; minus 1 it is `2⁻⁸ + 3·2⁻²⁰`, which
/// float16 rounds to `2⁻⁸ + 2⁻¹⁸` (0.75 of a step up) where the product was kept, and which is
/// exactly `2⁻⁸` from the rounded product.
#[test]
fn float16_values_between_float32_nodes_are_rounded_only_where_they_leave() {
    use half::f16;
    let bits = |v: f64| f16::from_f64(v).to_bits();
    let (x, c) = (1.0 + 3.0 * 2f64.powi(-10), 1.0 + 2f64.powi(-10));
    let model = |outputs: &str| {
        format!(
            "<ir_version: 8, opset_import: [\"\" : 17]>\n\
             g (float16[1] x) => ({outputs})\n\
             <float16[1] c = {{{}}}, float16[1] m = {{{}}}>\n\
             {{\n  p = Mul(x, c)\n  y = Add(p, m)\n}}\n",
            bits(c),
            bits(-1.0)
        )
    };
    let input =
        || vec![onnxifi_rust::ir::Tensor::from_vec(vec![1], vec![f16::from_f64(x)]).unwrap()];
    let value = |t: &onnxifi_rust::ir::Tensor| t.as_slice::<f16>().unwrap()[0].to_f64();
    let kept = run_ok(&compile_ok(&model("float16[1] y")), input());
    assert_eq!(value(&kept[0]), 2f64.powi(-8) + 2f64.powi(-18));
    let both = run_ok(&compile_ok(&model("float16[1] p, float16[1] y")), input());
    assert_eq!(value(&both[0]), 1.0 + 2f64.powi(-8));
    assert_eq!(value(&both[1]), 2f64.powi(-8));
    // A reader built during the run (its exponent's shape comes from a run-time Reshape) whose
    // type only the kept product tells (Pow's exponent may be float32) still takes it as
    // float16 data, and gives float16.
    let text = format!(
        "<ir_version: 8, opset_import: [\"\" : 17]>\n\
         g (float16[1] x, float[1] z, int64[1] s) => (float16[1] y)\n\
         <float16[1] c = {{{}}}>\n\
         {{\n  p = Mul(x, c)\n  e = Reshape(z, s)\n  y = Pow(p, e)\n}}\n",
        bits(c)
    );
    let exe = compile_ok(&text);
    let mut ins = input();
    ins.push(f32t(&[1], &[1.0]));
    ins.push(i64t(&[1], &[1]));
    let out = run_ok(&exe, ins);
    assert_eq!(out[0].dtype(), onnxifi_rust::ir::DataType::F16);
    assert_eq!(value(&out[0]), 1.0 + 2f64.powi(-8));
}

/// Outputs that are not of a float16 node's type stay what they are, and float16 nodes of
/// constants only still compute float16: LayerNormalization's statistics are float32 (their
/// reader, a float32 Mul, gives float32), and an Add of two float16 weights gives float16.
#[test]
fn float16_nodes_keep_the_types_onnx_gives_their_outputs() {
    use half::f16;
    let h = |v: f32| f16::from_f32(v).to_bits();
    let text = format!(
        "<ir_version: 8, opset_import: [\"\" : 17]>\n\
         g (float16[2,4] x) => (float16[2,4] y, float[2,1] z, float16[2] t)\n\
         <float16[4] s = {{{one}, {one}, {one}, {one}}}, float16[2] c = {{{one}, {two}}}>\n\
         {{\n  y, m = LayerNormalization(x, s)\n  z = Mul(m, m)\n  t = Add(c, c)\n}}\n",
        one = h(1.0),
        two = h(2.0)
    );
    let exe = compile_ok(&text);
    let xs = [1.0f32, 2.0, 3.0, 6.0, -1.0, -1.0, 1.0, 1.0];
    let x = onnxifi_rust::ir::Tensor::from_vec(
        vec![2, 4],
        xs.iter().map(|&v| f16::from_f32(v)).collect(),
    )
    .unwrap();
    let out = run_ok(&exe, vec![x]);
    assert_eq!(out[0].dtype(), onnxifi_rust::ir::DataType::F16);
    // Means 3 and 0, squared.
    assert_values(
        &out[1],
        &[2, 1],
        &[9.0, 0.0],
        "LayerNormalization's mean, squared",
    );
    let t: Vec<f32> = out[2]
        .as_slice::<f16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(t, [2.0, 4.0]);
}
