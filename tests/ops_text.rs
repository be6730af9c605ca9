//! Every supported operator on tiny models written in ONNX text syntax, against values computed
//! by hand (the arithmetic is spelled out next to each expectation).
//!
//! The models go through the whole compile path (`compile_executable`: decode, spec check,
//! import, compatibility check, rewrites, planning) and run in a rayon pool. Inputs are small
//! integers, so results are exact except for the transcendental activations.
#![forbid(unsafe_code)]

mod common;

use common::{assert_values, compile_ok, f32t, i64t, iota, run_ok};
use onnxifi_rust::ir::Tensor;

/// Compiles `text`, runs it on `inputs` and checks every output against `(shape, values)`.
fn check(text: &str, inputs: Vec<Tensor>, want: &[(&[usize], &[f32])]) {
    let exe = compile_ok(text);
    let out = run_ok(&exe, inputs);
    assert_eq!(out.len(), want.len(), "number of outputs");
    for (i, (t, (shape, values))) in out.iter().zip(want).enumerate() {
        assert_values(t, shape, values, &format!("output {i}"));
    }
}

/// `1, 2, …, 9` as a 1×1×3×3 image: rows `[1 2 3] [4 5 6] [7 8 9]`.
fn nine() -> Tensor {
    f32t(&[1, 1, 3, 3], &[1., 2., 3., 4., 5., 6., 7., 8., 9.])
}

// ---------------------------------------------------------------------------------------------
// Conv

#[test]
fn conv_2x2_kernel_valid() {
    // W = [[1 0] [0 1]]: y[i][j] = x[i][j] + x[i+1][j+1].
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,3] X) => (float[1,1,2,2] Y)
<float[1,1,2,2] W = {1, 0, 0, 1}>
{ [conv] Y = Conv(X, W) }"#;
    check(text, vec![nine()], &[(&[1, 1, 2, 2], &[6., 8., 12., 14.])]);
}

#[test]
fn conv_pads_strides_bias() {
    // pads 1, stride 2: windows start at rows/cols -1 and 1; W = [[1 2] [3 4]], bias 10.
    // (0,0): only x00·w11 = 4          → 14
    // (0,1): x01·w10 + x02·w11 = 6+12  → 28
    // (1,0): x10·w01 + x20·w11 = 8+28  → 46
    // (1,1): 5·1 + 6·2 + 8·3 + 9·4 = 77 → 87
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,3] X) => (float[1,1,2,2] Y)
<float[1,1,2,2] W = {1, 2, 3, 4}, float[1] B = {10}>
{ Y = Conv <pads = [1, 1, 1, 1], strides = [2, 2], kernel_shape = [2, 2]> (X, W, B) }"#;
    check(
        text,
        vec![nine()],
        &[(&[1, 1, 2, 2], &[14., 28., 46., 87.])],
    );
}

#[test]
fn conv_dilation() {
    // Dilation 2 spreads the 2×2 kernel over the corners: 1·1 + 3·2 + 7·3 + 9·4 = 64.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,3] X) => (float[1,1,1,1] Y)
<float[1,1,2,2] W = {1, 2, 3, 4}>
{ Y = Conv <dilations = [2, 2]> (X, W) }"#;
    check(text, vec![nine()], &[(&[1, 1, 1, 1], &[64.])]);
}

#[test]
fn conv_asymmetric_pads() {
    // pads = [top 0, left 1, bottom 0, right 0], W = [1 10] (1×2):
    // y[r][c] = x[r][c-1] + 10·x[r][c]; rows [1 2 3] and [4 5 6].
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,2,3] X) => (float[1,1,2,3] Y)
<float[1,1,1,2] W = {1, 10}>
{ Y = Conv <pads = [0, 1, 0, 0]> (X, W) }"#;
    let x = f32t(&[1, 1, 2, 3], &[1., 2., 3., 4., 5., 6.]);
    check(
        text,
        vec![x],
        &[(&[1, 1, 2, 3], &[10., 21., 32., 40., 54., 65.])],
    );
}

#[test]
fn conv_groups_with_channel_multiplier() {
    // group 2, 2 inputs, 4 outputs: outputs 0,1 read channel 0, outputs 2,3 read channel 1.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,1,2] X) => (float[1,4,1,2] Y)
<float[4,1,1,1] W = {1, 2, 3, 4}>
{ Y = Conv <group = 2> (X, W) }"#;
    let x = f32t(&[1, 2, 1, 2], &[1., 2., 5., 6.]);
    check(
        text,
        vec![x],
        &[(&[1, 4, 1, 2], &[1., 2., 2., 4., 15., 18., 20., 24.])],
    );
}

#[test]
fn conv_groups_with_two_channels_per_group() {
    // C = 4, group 2, W [2,2,1,1] = [[1 2] [3 4]]:
    // y0 = x0 + 2·x1 = [1+6, 2+8]; y1 = 3·x2 + 4·x3 = [15+28, 18+32].
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,1,2] X) => (float[1,2,1,2] Y)
<float[2,2,1,1] W = {1, 2, 3, 4}>
{ Y = Conv <group = 2> (X, W) }"#;
    let x = f32t(&[1, 4, 1, 2], &[1., 2., 3., 4., 5., 6., 7., 8.]);
    check(text, vec![x], &[(&[1, 2, 1, 2], &[7., 10., 43., 50.])]);
}

#[test]
fn conv_depthwise_3x3_padded() {
    // Depthwise (group = C = M = 2), pads 1: channel 0 has a centre-only kernel (identity),
    // channel 1 an all-ones kernel on an all-ones image (counts of in-image taps:
    // corners 4, edges 6, centre 9).
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,3,3] X) => (float[1,2,3,3] Y)
<float[2,1,3,3] W = {0, 0, 0, 0, 1, 0, 0, 0, 0,  1, 1, 1, 1, 1, 1, 1, 1, 1}, float[2] B = {0, 0.5}>
{ Y = Conv <group = 2, pads = [1, 1, 1, 1]> (X, W, B) }"#;
    let mut x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    x.extend([1.0; 9]);
    let mut want: Vec<f32> = (1..=9).map(|v| v as f32).collect();
    want.extend([4.5, 6.5, 4.5, 6.5, 9.5, 6.5, 4.5, 6.5, 4.5]);
    check(
        text,
        vec![f32t(&[1, 2, 3, 3], &x)],
        &[(&[1, 2, 3, 3], &want)],
    );
}

#[test]
fn conv_1d_strides_pads() {
    // x = [1 2 4 8 16], W = [1 0 -1], pads 1, stride 2: windows start at -1, 1, 3.
    // y0 = 0 - x1 = -2; y1 = x1 - x3 = -6; y2 = x3 - 0 = 8.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,5] X) => (float[1,1,3] Y)
<float[1,1,3] W = {1, 0, -1}>
{ Y = Conv <pads = [1, 1], strides = [2]> (X, W) }"#;
    let x = f32t(&[1, 1, 5], &[1., 2., 4., 8., 16.]);
    check(text, vec![x], &[(&[1, 1, 3], &[-2., -6., 8.])]);
}

#[test]
fn conv_auto_pad_same_upper_and_lower() {
    // Kernel [1 10] on [1 2 3 4]: one pad column in total; SAME_UPPER puts it at the end
    // (y[i] = x[i] + 10·x[i+1]), SAME_LOWER at the start (y[i] = x[i-1] + 10·x[i]).
    for (mode, want) in [
        ("SAME_UPPER", [21., 32., 43., 4.]),
        ("SAME_LOWER", [10., 21., 32., 43.]),
    ] {
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,1,4] X) => (float[1,1,1,4] Y)
<float[1,1,1,2] W = {{1, 10}}>
{{ Y = Conv <auto_pad = "{mode}"> (X, W) }}"#
        );
        let x = f32t(&[1, 1, 1, 4], &[1., 2., 3., 4.]);
        check(&text, vec![x], &[(&[1, 1, 1, 4], &want)]);
    }
}

#[test]
fn conv_auto_pad_valid_with_stride() {
    // VALID ignores pads: 3×3 input, 2×2 ones kernel, stride 2 → one window, 1+2+4+5 = 12.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,3] X) => (float[1,1,1,1] Y)
<float[1,1,2,2] W = {1, 1, 1, 1}>
{ Y = Conv <auto_pad = "VALID", strides = [2, 2]> (X, W) }"#;
    check(text, vec![nine()], &[(&[1, 1, 1, 1], &[12.])]);
}

#[test]
fn conv_weights_and_bias_as_graph_inputs() {
    // Weights known only at run time: same arithmetic as conv_pads_strides_bias, run twice
    // with different weights through one executable.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,3] X, float[1,1,2,2] W, float[1] B) => (float[1,1,2,2] Y)
{ Y = Conv <pads = [1, 1, 1, 1], strides = [2, 2]> (X, W, B) }"#;
    let exe = compile_ok(text);
    let w = f32t(&[1, 1, 2, 2], &[1., 2., 3., 4.]);
    let out = run_ok(&exe, vec![nine(), w, f32t(&[1], &[10.])]);
    assert_values(
        &out[0],
        &[1, 1, 2, 2],
        &[14., 28., 46., 87.],
        "first weights",
    );
    // W = [[0 0] [0 1]]: every window's bottom-right tap: x00, x02, x20, x22; bias -1.
    let w = f32t(&[1, 1, 2, 2], &[0., 0., 0., 1.]);
    let out = run_ok(&exe, vec![nine(), w, f32t(&[1], &[-1.])]);
    assert_values(&out[0], &[1, 1, 2, 2], &[0., 2., 6., 8.], "second weights");
}

#[test]
fn conv_two_images_two_output_channels() {
    // N = 2, M = 2, 1×1 kernels [1] and [-2] with biases [0, 1]: y0 = x, y1 = 1 - 2x.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,1,1,2] X) => (float[2,2,1,2] Y)
<float[2,1,1,1] W = {1, -2}, float[2] B = {0, 1}>
{ Y = Conv(X, W, B) }"#;
    let x = f32t(&[2, 1, 1, 2], &[1., 2., 3., 4.]);
    check(
        text,
        vec![x],
        &[(&[2, 2, 1, 2], &[1., 2., -1., -3., 3., 4., -5., -7.])],
    );
}

// ---------------------------------------------------------------------------------------------
// Conv rewrites (fusion and BatchNormalization folding), hand-computed

/// `x = [0 1 2 3]` as a 1×1×1×4 image.
fn ramp4() -> Tensor {
    f32t(&[1, 1, 1, 4], &[0., 1., 2., 3.])
}

#[test]
fn conv_relu_fused() {
    // 1×1 conv: 2x - 3 = [-3 -1 1 3]; Relu → [0 0 1 3].
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,1,4] X) => (float[1,1,1,4] Y)
<float[1,1,1,1] W = {2}, float[1] B = {-3}>
{ C = Conv(X, W, B)
  Y = Relu(C) }"#;
    check(text, vec![ramp4()], &[(&[1, 1, 1, 4], &[0., 0., 1., 3.])]);
}

#[test]
fn conv_clip_fused_bounds_as_initializers_and_attributes() {
    // 2x - 3 = [-3 -1 1 3] clipped to [-2, 2] → [-2 -1 1 2]: opset 13 (bounds as inputs) and
    // opset 6 (bounds as attributes).
    let t13 = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,1,4] X) => (float[1,1,1,4] Y)
<float[1,1,1,1] W = {2}, float[1] B = {-3}, float lo = {-2}, float hi = {2}>
{ C = Conv(X, W, B)
  Y = Clip(C, lo, hi) }"#;
    check(t13, vec![ramp4()], &[(&[1, 1, 1, 4], &[-2., -1., 1., 2.])]);
    let t6 = r#"<ir_version: 8, opset_import: ["" : 6]>
g (float[1,1,1,4] X) => (float[1,1,1,4] Y)
<float[1,1,1,1] W = {2}, float[1] B = {-3}>
{ C = Conv(X, W, B)
  Y = Clip <min = -2.0, max = 2.0> (C) }"#;
    check(t6, vec![ramp4()], &[(&[1, 1, 1, 4], &[-2., -1., 1., 2.])]);
}

#[test]
fn conv_clip_with_only_max_and_with_runtime_min() {
    // Clip(C, , hi=0): [-3 -1 0 0]. Then with min a graph input (no fusion possible): min = -1.
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,1,4] X, float lo) => (float[1,1,1,4] Y, float[1,1,1,4] Z)
<float[1,1,1,1] W = {2}, float[1] B = {-3}, float hi = {0}>
{ C = Conv(X, W, B)
  Y = Clip(C, , hi)
  D = Conv(X, W, B)
  Z = Clip(D, lo, hi) }"#;
    let exe = compile_ok(text);
    let out = run_ok(&exe, vec![ramp4(), f32t(&[], &[-1.])]);
    assert_values(&out[0], &[1, 1, 1, 4], &[-3., -1., 0., 0.], "max only");
    assert_values(&out[1], &[1, 1, 1, 4], &[-1., -1., 0., 0.], "runtime min");
}

#[test]
fn conv_sigmoid_and_tanh_fused() {
    // 1×1 conv with weight ln 3 on [0 1] and weight ln 2 on [0 1]:
    // sigmoid(0) = 1/2, sigmoid(ln 3) = 3/4; tanh(0) = 0, tanh(ln 2) = (4-1)/(4+1) = 3/5.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,1,2] X) => (float[1,1,1,2] S, float[1,1,1,2] T)
<float[1,1,1,1] W3 = {1.0986122886681098}, float[1,1,1,1] W2 = {0.6931471805599453}>
{ A = Conv(X, W3)
  S = Sigmoid(A)
  B = Conv(X, W2)
  T = Tanh(B) }"#;
    let x = f32t(&[1, 1, 1, 2], &[0., 1.]);
    check(
        text,
        vec![x],
        &[(&[1, 1, 1, 2], &[0.5, 0.75]), (&[1, 1, 1, 2], &[0., 0.6])],
    );
}

#[test]
fn conv_output_read_twice_is_not_fused_away() {
    // The conv result is both a graph output and the Relu input: both must be right.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,1,4] X) => (float[1,1,1,4] C, float[1,1,1,4] Y)
<float[1,1,1,1] W = {2}, float[1] B = {-3}>
{ C = Conv(X, W, B)
  Y = Relu(C) }"#;
    check(
        text,
        vec![ramp4()],
        &[
            (&[1, 1, 1, 4], &[-3., -1., 1., 3.]),
            (&[1, 1, 1, 4], &[0., 0., 1., 3.]),
        ],
    );
}

#[test]
fn conv_batchnorm_relu_folded() {
    // Conv: y = 2x + 1 = [1 3 5 7]. BN with scale 3, bias 1, mean 3, var 3.5, eps 0.5
    // (√4 = 2): 3(y - 3)/2 + 1 = [-2 1 4 7]. Relu → [0 1 4 7].
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,1,4] X) => (float[1,1,1,4] Y, float[1,1,1,4] Z)
<float[1,1,1,1] W = {2}, float[1] B = {1}, float[1] s = {3}, float[1] b = {1},
 float[1] m = {3}, float[1] v = {3.5}>
{ C = Conv(X, W, B)
  Y = BatchNormalization <epsilon = 0.5> (C, s, b, m, v)
  C2 = Conv(X, W, B)
  N2 = BatchNormalization <epsilon = 0.5> (C2, s, b, m, v)
  Z = Relu(N2) }"#;
    check(
        text,
        vec![ramp4()],
        &[
            (&[1, 1, 1, 4], &[-2., 1., 4., 7.]),
            (&[1, 1, 1, 4], &[0., 1., 4., 7.]),
        ],
    );
}

#[test]
fn conv_batchnorm_without_conv_bias_two_channels() {
    // Conv without bias, M = 2 (weights 1 and -1) on [0 1 2 3]; BN per channel:
    // ch0: scale 2, bias 0, mean 1, var 0.75 with eps 0.25 (√1): 2(x - 1) = [-2 0 2 4];
    // ch1: scale 1, bias 10, mean 0, var 3.75 (√4): -x/2 + 10 = [10 9.5 9 8.5].
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,1,4] X) => (float[1,2,1,4] Y)
<float[2,1,1,1] W = {1, -1}, float[2] s = {2, 1}, float[2] b = {0, 10},
 float[2] m = {1, 0}, float[2] v = {0.75, 3.75}>
{ C = Conv(X, W)
  Y = BatchNormalization <epsilon = 0.25> (C, s, b, m, v) }"#;
    check(
        text,
        vec![ramp4()],
        &[(&[1, 2, 1, 4], &[-2., 0., 2., 4., 10., 9.5, 9., 8.5])],
    );
}

// ---------------------------------------------------------------------------------------------
// MaxPool, AveragePool, GlobalAveragePool

#[test]
fn max_pool_padding_never_wins() {
    // All-negative image, 2×2 windows, stride 2, pads 1: a zero pad would win everywhere.
    // (0,0): x00 = -1; (0,1): max(-2,-3); (1,0): max(-4,-7); (1,1): max(-5,-6,-8,-9).
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,3] X) => (float[1,1,2,2] Y)
{ Y = MaxPool <kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 1, 1]> (X) }"#;
    let x = f32t(
        &[1, 1, 3, 3],
        &[-1., -2., -3., -4., -5., -6., -7., -8., -9.],
    );
    check(text, vec![x], &[(&[1, 1, 2, 2], &[-1., -2., -4., -5.])]);
}

#[test]
fn max_pool_ceil_mode() {
    // 3×3, 2×2 windows, stride 2: floor mode → one window (max 5); ceil mode → 2×2 with the
    // partial windows [3 6], [7 8], [9].
    let floor = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,3] X) => (float[1,1,1,1] Y)
{ Y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (X) }"#;
    check(floor, vec![nine()], &[(&[1, 1, 1, 1], &[5.])]);
    let ceil = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,3] X) => (float[1,1,2,2] Y)
{ Y = MaxPool <kernel_shape = [2, 2], strides = [2, 2], ceil_mode = 1> (X) }"#;
    check(ceil, vec![nine()], &[(&[1, 1, 2, 2], &[5., 6., 8., 9.])]);
}

#[test]
fn max_pool_ceil_mode_drops_a_window_starting_in_the_end_padding() {
    // Width 5, window 2, stride 2, ceil: windows at 0, 2, 4 → [2 4 5].
    let t5 = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,1,5] X) => (float[1,1,1,3] Y)
{ Y = MaxPool <kernel_shape = [1, 2], strides = [1, 2], ceil_mode = 1> (X) }"#;
    let x = f32t(&[1, 1, 1, 5], &[1., 2., 3., 4., 5.]);
    check(t5, vec![x], &[(&[1, 1, 1, 3], &[2., 4., 5.])]);
    // Width 4 with one pad column at the end: ceil((4+1-2)/2)+1 = 3 windows, but the third
    // would start at 4, inside the end padding, so it is dropped → [2 4].
    let t4 = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,1,4] X) => (float[1,1,1,2] Y)
{ Y = MaxPool <kernel_shape = [1, 2], strides = [1, 2], pads = [0, 0, 0, 1], ceil_mode = 1> (X) }"#;
    let x = f32t(&[1, 1, 1, 4], &[1., 2., 3., 4.]);
    check(t4, vec![x], &[(&[1, 1, 1, 2], &[2., 4.])]);
}

#[test]
fn max_pool_dilation_and_1d() {
    // x = [1 5 2 4 3], window 2 dilated by 2 (taps i, i+2): [max(1,2) max(5,4) max(2,3)].
    let t2 = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,1,5] X) => (float[1,1,1,3] Y)
{ Y = MaxPool <kernel_shape = [1, 2], dilations = [1, 2]> (X) }"#;
    let x = [1., 5., 2., 4., 3.];
    check(
        t2,
        vec![f32t(&[1, 1, 1, 5], &x)],
        &[(&[1, 1, 1, 3], &[2., 5., 3.])],
    );
    // The same as a 1-D pooling (rank-3 input).
    let t1 = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,5] X) => (float[1,1,3] Y)
{ Y = MaxPool <kernel_shape = [2], dilations = [2]> (X) }"#;
    check(
        t1,
        vec![f32t(&[1, 1, 5], &x)],
        &[(&[1, 1, 3], &[2., 5., 3.])],
    );
}

#[test]
fn average_pool_count_include_pad() {
    // 2×2 windows, stride 2, pads 1 on 1..9:
    // (0,0) {1}: 1/1 or 1/4; (0,1) {2,3}: 5/2 or 5/4; (1,0) {4,7}: 11/2 or 11/4;
    // (1,1) {5,6,8,9}: 28/4 either way.
    for (cip, want) in [(0, [1., 2.5, 5.5, 7.]), (1, [0.25, 1.25, 2.75, 7.])] {
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,3] X) => (float[1,1,2,2] Y)
{{ Y = AveragePool <kernel_shape = [2, 2], strides = [2, 2], pads = [1, 1, 1, 1], count_include_pad = {cip}> (X) }}"#
        );
        check(&text, vec![nine()], &[(&[1, 1, 2, 2], &want)]);
    }
}

#[test]
fn average_pool_ceil_mode_counts() {
    // No pads, ceil mode, 2×2 stride 2 on 1..9: (1+2+4+5)/4, (3+6)/2, (7+8)/2, 9/1 — the part
    // of a ceil window past the input is not padding, so count_include_pad changes nothing.
    for cip in [0, 1] {
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,3] X) => (float[1,1,2,2] Y)
{{ Y = AveragePool <kernel_shape = [2, 2], strides = [2, 2], ceil_mode = 1, count_include_pad = {cip}> (X) }}"#
        );
        check(&text, vec![nine()], &[(&[1, 1, 2, 2], &[3., 4.5, 7.5, 9.])]);
    }
    // Width 4 = [1 2 3 4], window 3, stride 2, pads 1 each side, ceil: windows at -1, 1, 3.
    // Window -1 {pad,1,2}: 3/3 with pads counted, 3/2 without; window 1 {2,3,4}: 9/3;
    // window 3 {4, pad, beyond}: 4/2 with the pad counted (not the position beyond it), 4/1.
    for (cip, want) in [(1, [1., 3., 2.]), (0, [1.5, 3., 4.])] {
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,1,4] X) => (float[1,1,1,3] Y)
{{ Y = AveragePool <kernel_shape = [1, 3], strides = [1, 2], pads = [0, 1, 0, 1], ceil_mode = 1, count_include_pad = {cip}> (X) }}"#
        );
        let x = f32t(&[1, 1, 1, 4], &[1., 2., 3., 4.]);
        check(&text, vec![x], &[(&[1, 1, 1, 3], &want)]);
    }
}

#[test]
fn average_pool_1d() {
    // [1 2 3 4 5], window 2, stride 1 → means [1.5 2.5 3.5 4.5].
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,5] X) => (float[1,1,4] Y)
{ Y = AveragePool <kernel_shape = [2]> (X) }"#;
    let x = f32t(&[1, 1, 5], &[1., 2., 3., 4., 5.]);
    check(text, vec![x], &[(&[1, 1, 4], &[1.5, 2.5, 3.5, 4.5])]);
}

#[test]
fn global_average_pool() {
    // Channel means: (1+2+3+4)/4 = 2.5, (5+6+7+9)/4 = 6.75; image 2: 0 and -1.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,2,2,2] X) => (float[2,2,1,1] Y)
{ Y = GlobalAveragePool(X) }"#;
    let x = f32t(
        &[2, 2, 2, 2],
        &[
            1., 2., 3., 4., 5., 6., 7., 9., -1., 1., -2., 2., -1., -1., -1., -1.,
        ],
    );
    check(text, vec![x], &[(&[2, 2, 1, 1], &[2.5, 6.75, 0., -1.])]);
}

// ---------------------------------------------------------------------------------------------
// BatchNormalization

#[test]
fn batch_normalization_constant_and_runtime_parameters() {
    // eps 0.25, var [3.75 15.75] → √ = [2 4].
    // ch0: 2(x - 2)/2 + 1 = x - 1 on [1 3] → [0 2]; ch1: 0.5(x - 0)/4 - 1 on [2 4] → [-0.75 -0.5].
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,1,2] X, float[2] mr) => (float[1,2,1,2] Y, float[1,2,1,2] Z)
<float[2] s = {2, 0.5}, float[2] b = {1, -1}, float[2] m = {2, 0}, float[2] v = {3.75, 15.75}>
{ Y = BatchNormalization <epsilon = 0.25> (X, s, b, m, v)
  Z = BatchNormalization <epsilon = 0.25> (X, s, b, mr, v) }"#;
    let exe = compile_ok(text);
    let x = f32t(&[1, 2, 1, 2], &[1., 3., 2., 4.]);
    let out = run_ok(&exe, vec![x.clone(), f32t(&[2], &[2., 0.])]);
    assert_values(&out[0], &[1, 2, 1, 2], &[0., 2., -0.75, -0.5], "constant");
    assert_values(
        &out[1],
        &[1, 2, 1, 2],
        &[0., 2., -0.75, -0.5],
        "runtime mean",
    );
    // A different runtime mean: ch0 mean 0 → x + 1 = [2 4]; ch1 mean 4 → (x-4)/8 - 1.
    let out = run_ok(&exe, vec![x, f32t(&[2], &[0., 4.])]);
    assert_values(&out[1], &[1, 2, 1, 2], &[2., 4., -1.25, -1.], "second mean");
}

#[test]
fn batch_normalization_rank_2() {
    // [N, C] input: per-column affine. eps 0.5, var [0.5 3.5] → √ = [1 2]; scale 1, bias 0,
    // mean [1 2]: (x - m)/√ on [[1 2] [3 6]] → [[0 0] [2 2]].
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,2] X) => (float[2,2] Y)
<float[2] s = {1, 1}, float[2] b = {0, 0}, float[2] m = {1, 2}, float[2] v = {0.5, 3.5}>
{ Y = BatchNormalization <epsilon = 0.5> (X, s, b, m, v) }"#;
    let x = f32t(&[2, 2], &[1., 2., 3., 6.]);
    check(text, vec![x], &[(&[2, 2], &[0., 0., 2., 2.])]);
}

// ---------------------------------------------------------------------------------------------
// Gemm and MatMul

/// A = [[1 2 3] [4 5 6]]; B = [[1 0] [0 1] [1 1]]; A·B = [[4 5] [10 11]].
const A23: &str = "{1, 2, 3, 4, 5, 6}";
const B32: &str = "{1, 0, 0, 1, 1, 1}";

#[test]
fn gemm_plain_and_transposed() {
    for (attrs, a_decl, a, b_decl, b) in [
        ("", "float[2,3]", A23, "float[3,2]", B32),
        // Aᵀ stored as [[1 4] [2 5] [3 6]].
        (
            "<transA = 1>",
            "float[3,2]",
            "{1, 4, 2, 5, 3, 6}",
            "float[3,2]",
            B32,
        ),
        // Bᵀ stored as [[1 0 1] [0 1 1]].
        (
            "<transB = 1>",
            "float[2,3]",
            A23,
            "float[2,3]",
            "{1, 0, 1, 0, 1, 1}",
        ),
        (
            "<transA = 1, transB = 1>",
            "float[3,2]",
            "{1, 4, 2, 5, 3, 6}",
            "float[2,3]",
            "{1, 0, 1, 0, 1, 1}",
        ),
    ] {
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 17]>
g ({a_decl} A) => (float[2,2] Y)
<{b_decl} B = {b}>
{{ Y = Gemm {attrs} (A, B) }}"#
        );
        let shape: Vec<usize> = if a_decl == "float[2,3]" {
            vec![2, 3]
        } else {
            vec![3, 2]
        };
        let a_vals: Vec<f32> = a
            .trim_matches(|c| c == '{' || c == '}')
            .split(',')
            .map(|s| s.trim().parse().unwrap())
            .collect();
        check(
            &text,
            vec![f32t(&shape, &a_vals)],
            &[(&[2, 2], &[4., 5., 10., 11.])],
        );
    }
}

#[test]
fn gemm_alpha_beta_and_broadcast_c() {
    // Y = alpha·A·B + beta·C with A·B = [[4 5] [10 11]].
    for (attrs, c_decl, c, want) in [
        // Row C [10 20], alpha 2, beta 0.5: [[8+5 10+10] [20+5 22+10]].
        (
            "<alpha = 2.0, beta = 0.5>",
            "float[2]",
            "{10, 20}",
            [13., 20., 25., 32.],
        ),
        // Column C [[1] [2]]: [[5 6] [12 13]].
        ("", "float[2,1]", "{1, 2}", [5., 6., 12., 13.]),
        // One-element C [3]: +3 everywhere.
        ("", "float[1]", "{3}", [7., 8., 13., 14.]),
        // Scalar C 3 with beta -1: -3 everywhere.
        ("<beta = -1.0>", "float", "{3}", [1., 2., 7., 8.]),
        // Full C, beta 2: + 2·[[1 2] [3 4]].
        (
            "<beta = 2.0>",
            "float[2,2]",
            "{1, 2, 3, 4}",
            [6., 9., 16., 19.],
        ),
        // [1,2] C: a row again.
        ("", "float[1,2]", "{-4, -5}", [0., 0., 6., 6.]),
        // beta 0: C does not count.
        (
            "<beta = 0.0>",
            "float[2,2]",
            "{1, 2, 3, 4}",
            [4., 5., 10., 11.],
        ),
    ] {
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] A) => (float[2,2] Y)
<float[3,2] B = {B32}, {c_decl} C = {c}>
{{ Y = Gemm {attrs} (A, B, C) }}"#
        );
        check(
            &text,
            vec![f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.])],
            &[(&[2, 2], &want)],
        );
    }
}

#[test]
fn gemm_c_as_graph_input() {
    // C known only at run time, transB, alpha 0.5: 0.5·[[4 5] [10 11]] + [1 1].
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] A, float[2] C) => (float[2,2] Y)
<float[2,3] B = {1, 0, 1, 0, 1, 1}>
{ Y = Gemm <transB = 1, alpha = 0.5> (A, B, C) }"#;
    let a = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    check(
        text,
        vec![a, f32t(&[2], &[1., 1.])],
        &[(&[2, 2], &[3., 3.5, 6., 6.5])],
    );
}

#[test]
fn matmul_1d_promotion() {
    let b = "<float[3,2] B = {1, 0, 0, 1, 1, 1}>";
    // [1 2 3] · B = [1+3, 2+3], shape [2].
    let t = format!(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[3] a) => (float[2] y)
{b}
{{ y = MatMul(a, B) }}"#
    );
    check(&t, vec![f32t(&[3], &[1., 2., 3.])], &[(&[2], &[4., 5.])]);
    // A · [1 0 1] = [1+3, 4+6], shape [2].
    let t = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] A) => (float[2] y)
<float[3] b = {1, 0, 1}>
{ y = MatMul(A, b) }"#;
    check(
        t,
        vec![f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.])],
        &[(&[2], &[4., 10.])],
    );
    // [1 2 3] · [4 5 6] = 32, a scalar.
    let t = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[3] a) => (float y)
<float[3] b = {4, 5, 6}>
{ y = MatMul(a, b) }"#;
    check(t, vec![f32t(&[3], &[1., 2., 3.])], &[(&[], &[32.])]);
    // [1 1] · B[3,2,2] → [3,2]: column sums of each matrix.
    let t = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2] a) => (float[3,2] y)
<float[3,2,2] B = {1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 1, 0}>
{ y = MatMul(a, B) }"#;
    check(
        t,
        vec![f32t(&[2], &[1., 1.])],
        &[(&[3, 2], &[4., 6., 12., 14., 1., 1.])],
    );
}

/// B batches `[[1 2] [3 4]]`, `[[5 6] [7 8]]`, `[[0 1] [1 0]]` (shape [3,2,2]).
const B322: [f32; 12] = [1., 2., 3., 4., 5., 6., 7., 8., 0., 1., 1., 0.];

#[test]
fn matmul_batch_broadcast() {
    // A [2,1,2,2] = [I, 2I] against B [3,2,2]: out[i][j] = (i+1)·B[j], shape [2,3,2,2].
    let t = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,1,2,2] A, float[3,2,2] B) => (float[2,3,2,2] Y)
{ Y = MatMul(A, B) }"#;
    let a = f32t(&[2, 1, 2, 2], &[1., 0., 0., 1., 2., 0., 0., 2.]);
    let mut want: Vec<f32> = B322.to_vec();
    want.extend(B322.iter().map(|v| 2. * v));
    check(
        t,
        vec![a.clone(), f32t(&[3, 2, 2], &B322)],
        &[(&[2, 3, 2, 2], &want)],
    );
    // Swapped: B[3,2,2] · A[2,1,2,2] → out[i][j] = B[j]·(i+1)I = (i+1)·B[j].
    let t = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[3,2,2] B, float[2,1,2,2] A) => (float[2,3,2,2] Y)
{ Y = MatMul(B, A) }"#;
    check(
        t,
        vec![f32t(&[3, 2, 2], &B322), a],
        &[(&[2, 3, 2, 2], &want)],
    );
}

#[test]
fn matmul_batched_a_shared_b() {
    // A [2,2,3] · B [3,2]: batch 0 = [[1 2 3] [4 5 6]] → [[4 5] [10 11]];
    // batch 1 = [[1 1 1] [0 0 1]] → [[2 2] [1 1]].
    let t = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,2,3] A) => (float[2,2,2] Y)
<float[3,2] B = {1, 0, 0, 1, 1, 1}>
{ Y = MatMul(A, B) }"#;
    let a = f32t(
        &[2, 2, 3],
        &[1., 2., 3., 4., 5., 6., 1., 1., 1., 0., 0., 1.],
    );
    check(
        t,
        vec![a],
        &[(&[2, 2, 2], &[4., 5., 10., 11., 2., 2., 1., 1.])],
    );
    // A [2,3] · B [2,3,2] (A shared): both batches of B are B32 and its negation.
    let t = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] A) => (float[2,2,2] Y)
<float[2,3,2] B = {1, 0, 0, 1, 1, 1, -1, 0, 0, -1, -1, -1}>
{ Y = MatMul(A, B) }"#;
    let a = f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    check(
        t,
        vec![a],
        &[(&[2, 2, 2], &[4., 5., 10., 11., -4., -5., -10., -11.])],
    );
}

// ---------------------------------------------------------------------------------------------
// Element-wise binary operators

#[test]
fn add_sub_mul_div_broadcast() {
    let a = || f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    for (op, b_decl, b, want) in [
        // + [10 20 30] on every row.
        (
            "Add",
            "float[3]",
            "{10, 20, 30}",
            [11., 22., 33., 14., 25., 36.],
        ),
        // - [[1] [2]] per row.
        ("Sub", "float[2,1]", "{1, 2}", [0., 1., 2., 2., 3., 4.]),
        // · 2 (a scalar).
        ("Mul", "float", "{2}", [2., 4., 6., 8., 10., 12.]),
        // / [1 2 4] as [1,3].
        (
            "Div",
            "float[1,3]",
            "{1, 2, 4}",
            [1., 1., 0.75, 4., 2.5, 1.5],
        ),
        // Same shape.
        (
            "Sub",
            "float[2,3]",
            "{6, 5, 4, 3, 2, 1}",
            [-5., -3., -1., 1., 3., 5.],
        ),
    ] {
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] A) => (float[2,3] Y)
<{b_decl} B = {b}>
{{ Y = {op}(A, B) }}"#
        );
        check(&text, vec![a()], &[(&[2, 3], &want)]);
    }
}

#[test]
fn binary_broadcast_both_ways_and_constant_first() {
    // [2,1] + [1,3] → [2,3]: [[11 21 31] [12 22 32]].
    let t = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,1] A, float[1,3] B) => (float[2,3] Y)
{ Y = Add(A, B) }"#;
    check(
        t,
        vec![f32t(&[2, 1], &[1., 2.]), f32t(&[1, 3], &[10., 20., 30.])],
        &[(&[2, 3], &[11., 21., 31., 12., 22., 32.])],
    );
    // Constant on the left: 12 / [1 2 3 4] and 1 - x, rank 3 against rank 1.
    let t = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,2] X) => (float[1,2,2] D, float[1,2,2] S)
<float[1] twelve = {12}, float[2] one = {1, 1}>
{ D = Div(twelve, X)
  S = Sub(one, X) }"#;
    check(
        t,
        vec![f32t(&[1, 2, 2], &[1., 2., 3., 4.])],
        &[
            (&[1, 2, 2], &[12., 6., 4., 3.]),
            (&[1, 2, 2], &[0., -1., -2., -3.]),
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// Activations

#[test]
fn relu_sigmoid_tanh() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[4] X) => (float[4] R, float[4] S, float[4] T)
{ R = Relu(X)
  S = Sigmoid(X)
  T = Tanh(X) }"#;
    let ln3 = 3f32.ln();
    let x = f32t(&[4], &[-2., 0., ln3, -ln3]);
    check(
        text,
        vec![x],
        &[
            (&[4], &[0., 0., ln3, 0.]),
            // sigmoid(±ln 3) = 3/4, 1/4; sigmoid(-2) = 1/(1+e²).
            (&[4], &[1. / (1. + 2f32.exp()), 0.5, 0.75, 0.25]),
            // tanh(±ln 3) = ±(9-1)/(9+1); tanh(-2) = (e⁻⁴ - 1)/(e⁻⁴ + 1).
            (
                &[4],
                &[((-4f32).exp() - 1.) / ((-4f32).exp() + 1.), 0., 0.8, -0.8],
            ),
        ],
    );
}

#[test]
fn clip_bounds_as_inputs_opset_13() {
    let x = || f32t(&[4], &[-2., -0.5, 0.5, 3.]);
    for (args, inits, want) in [
        (
            "X, lo, hi",
            "float lo = {-1}, float hi = {1}",
            [-1., -0.5, 0.5, 1.],
        ),
        ("X, , hi", "float hi = {0}", [-2., -0.5, 0., 0.]),
        ("X, lo", "float lo = {0}", [0., 0., 0.5, 3.]),
        // min > max: everything becomes max.
        (
            "X, lo, hi",
            "float lo = {2}, float hi = {1}",
            [1., 1., 1., 1.],
        ),
        // One-element [1] bounds are accepted as scalars too.
        (
            "X, lo, hi",
            "float[1] lo = {-0.5}, float[1] hi = {0.5}",
            [-0.5, -0.5, 0.5, 0.5],
        ),
    ] {
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[4] X) => (float[4] Y)
<{inits}>
{{ Y = Clip({args}) }}"#
        );
        check(&text, vec![x()], &[(&[4], &want)]);
    }
    // No bounds at all: identity.
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[4] X) => (float[4] Y)
{ Y = Clip(X) }"#;
    check(text, vec![x()], &[(&[4], &[-2., -0.5, 0.5, 3.])]);
}

#[test]
fn clip_bounds_as_graph_inputs() {
    // Bounds fed at run time; one executable, two different bound pairs.
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[4] X, float lo, float hi) => (float[4] Y)
{ Y = Clip(X, lo, hi) }"#;
    let exe = compile_ok(text);
    let x = || f32t(&[4], &[-2., -0.5, 0.5, 3.]);
    let out = run_ok(&exe, vec![x(), f32t(&[], &[-1.]), f32t(&[], &[1.])]);
    assert_values(&out[0], &[4], &[-1., -0.5, 0.5, 1.], "[-1, 1]");
    let out = run_ok(&exe, vec![x(), f32t(&[], &[0.]), f32t(&[], &[2.])]);
    assert_values(&out[0], &[4], &[0., 0., 0.5, 2.], "[0, 2]");
}

#[test]
fn clip_bounds_as_attributes_opset_6() {
    let text = r#"<ir_version: 8, opset_import: ["" : 6]>
g (float[4] X) => (float[4] Y, float[4] Z)
{ Y = Clip <min = -1.0, max = 1.0> (X)
  Z = Clip <max = 0.0> (X) }"#;
    let x = f32t(&[4], &[-2., -0.5, 0.5, 3.]);
    check(
        text,
        vec![x],
        &[(&[4], &[-1., -0.5, 0.5, 1.]), (&[4], &[-2., -0.5, 0., 0.])],
    );
}

// ---------------------------------------------------------------------------------------------
// Softmax

/// X [1,2,2] = [[0 0] [ln 3, ln 3]].
fn softmax_input() -> Tensor {
    let l = 3f32.ln();
    f32t(&[1, 2, 2], &[0., 0., l, l])
}

#[test]
fn softmax_axis_opset_13_is_one_axis() {
    // axis 1: pairs (0, ln 3) down the columns → 1/4, 3/4; default axis -1: rows of equal
    // values → 1/2 each.
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,2] X) => (float[1,2,2] A, float[1,2,2] D, float[1,2,2] N)
{ A = Softmax <axis = 1> (X)
  D = Softmax(X)
  N = Softmax <axis = -2> (X) }"#;
    check(
        text,
        vec![softmax_input()],
        &[
            (&[1, 2, 2], &[0.25, 0.25, 0.75, 0.75]),
            (&[1, 2, 2], &[0.5, 0.5, 0.5, 0.5]),
            (&[1, 2, 2], &[0.25, 0.25, 0.75, 0.75]),
        ],
    );
}

#[test]
fn softmax_axis_opset_11_coerces_to_2d() {
    // axis 1 (also the default): the input is [1, 4]: e⁰, e⁰, 3, 3 over 8 → 1/8 1/8 3/8 3/8.
    // axis -1 = 2: [2, 2] rows → 1/2 each. axis 0: everything in one row too.
    let text = r#"<ir_version: 8, opset_import: ["" : 11]>
g (float[1,2,2] X) => (float[1,2,2] A, float[1,2,2] D, float[1,2,2] L, float[1,2,2] Z)
{ A = Softmax <axis = 1> (X)
  D = Softmax(X)
  L = Softmax <axis = -1> (X)
  Z = Softmax <axis = 0> (X) }"#;
    let eighths: &[f32] = &[0.125, 0.125, 0.375, 0.375];
    check(
        text,
        vec![softmax_input()],
        &[
            (&[1, 2, 2], eighths),
            (&[1, 2, 2], eighths),
            (&[1, 2, 2], &[0.5, 0.5, 0.5, 0.5]),
            (&[1, 2, 2], eighths),
        ],
    );
}

#[test]
fn softmax_large_inputs_do_not_overflow() {
    // softmax([1000, 1000 + ln 3]) = [1/4, 3/4] (needs the max subtracted first).
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2] X) => (float[2] Y)
{ Y = Softmax(X) }"#;
    let x = f32t(&[2], &[1000., 1000. + 3f32.ln()]);
    // 1000 + ln 3 rounds in f32 (ulp 2⁻¹⁴ ≈ 6e-5), so allow for the rounding of the input.
    let exe = compile_ok(text);
    let out = run_ok(&exe, vec![x]);
    common::assert_close(
        &out[0],
        &[2],
        &[0.25, 0.75],
        0.,
        1e-4,
        "softmax of large inputs",
    );
}

// ---------------------------------------------------------------------------------------------
// Reshape, Flatten, Transpose, Concat, Constant, Identity

#[test]
fn reshape_zero_and_minus_one() {
    let x = || f32t(&[2, 3, 4], &iota(24));
    for (target, shape) in [
        ("{0, -1}", vec![2usize, 12]),
        ("{4, 0, 2}", vec![4, 3, 2]),
        ("{-1}", vec![24]),
        ("{2, -1, 3}", vec![2, 4, 3]),
        ("{0, 0, 2, 2}", vec![2, 3, 2, 2]),
    ] {
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        let n = target.matches(',').count() + 1;
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 14]>
g (float[2,3,4] X) => (float[{}] Y)
<int64[{n}] s = {target}>
{{ Y = Reshape(X, s) }}"#,
            dims.join(",")
        );
        check(&text, vec![x()], &[(&shape, &iota(24))]);
    }
}

#[test]
fn reshape_allowzero() {
    // An empty [0,3] initializer reshaped to [3,0]: with allowzero = 1 the 0 is a real zero
    // (shape [3,0]); without it, 0 copies the input's 3 and 9 ≠ 0 elements is an error.
    let text = r#"<ir_version: 8, opset_import: ["" : 14]>
g (float[1] X) => (float[3,0] Y, float[1] Z)
<float[0,3] e = {}, int64[2] s = {3, 0}>
{ Y = Reshape <allowzero = 1> (e, s)
  Z = Identity(X) }"#;
    check(
        text,
        vec![f32t(&[1], &[5.])],
        &[(&[3, 0], &[]), (&[1], &[5.])],
    );
    let bad = text.replace("allowzero = 1", "allowzero = 0");
    let e = common::compile(&bad)
        .err()
        .expect("allowzero = 0 must fail");
    assert_eq!(e.status, onnxifi_rust::error::Status::InvalidModel, "{e}");
}

#[test]
fn reshape_target_as_int64_graph_input() {
    // One executable, two targets fed at run time: [3, 2] and [-1, 1].
    let text = r#"<ir_version: 8, opset_import: ["" : 14]>
g (float[2,3] X, int64[2] S) => (float[a,b] Y)
{ Y = Reshape(X, S) }"#;
    let exe = compile_ok(text);
    let x = || f32t(&[2, 3], &iota(6));
    let out = run_ok(&exe, vec![x(), i64t(&[2], &[3, 2])]);
    assert_values(&out[0], &[3, 2], &iota(6), "[3, 2]");
    let out = run_ok(&exe, vec![x(), i64t(&[2], &[-1, 1])]);
    assert_values(&out[0], &[6, 1], &iota(6), "[-1, 1]");
    let out = run_ok(&exe, vec![x(), i64t(&[2], &[0, -1])]);
    assert_values(&out[0], &[2, 3], &iota(6), "[0, -1]");
}

#[test]
fn flatten_axes() {
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3,4] X) => (float[2,12] D, float[1,24] Z, float[6,4] L, float[24,1] E)
{ D = Flatten(X)
  Z = Flatten <axis = 0> (X)
  L = Flatten <axis = -1> (X)
  E = Flatten <axis = 3> (X) }"#;
    let v = iota(24);
    check(
        text,
        vec![f32t(&[2, 3, 4], &v)],
        &[
            (&[2, 12], &v),
            (&[1, 24], &v),
            (&[6, 4], &v),
            (&[24, 1], &v),
        ],
    );
}

#[test]
fn transpose_default_and_perm() {
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] X, float[2,3,4] Z) => (float[3,2] Y, float[3,4,2] P, float[4,3,2] R)
{ Y = Transpose(X)
  P = Transpose <perm = [1, 2, 0]> (Z)
  R = Transpose(Z) }"#;
    // P[i][j][k] = Z[k][i][j] = 12k + 4i + j; R[i][j][k] = Z[k][j][i] = 12k + 4j + i.
    let mut p = Vec::new();
    for i in 0..3 {
        for j in 0..4 {
            for k in 0..2 {
                p.push((12 * k + 4 * i + j) as f32);
            }
        }
    }
    let mut r = Vec::new();
    for i in 0..4 {
        for j in 0..3 {
            for k in 0..2 {
                r.push((12 * k + 4 * j + i) as f32);
            }
        }
    }
    check(
        text,
        vec![
            f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]),
            f32t(&[2, 3, 4], &iota(24)),
        ],
        &[
            (&[3, 2], &[1., 4., 2., 5., 3., 6.]),
            (&[3, 4, 2], &p),
            (&[4, 3, 2], &r),
        ],
    );
}

#[test]
fn transpose_int64_constant() {
    // Integer tensors move too: the [2,1] int64 column {3, 2} transposed to [1,2], flattened
    // to [2] by a Reshape to [-1], becomes the target of the Reshape of X.
    let text = r#"<ir_version: 8, opset_import: ["" : 14]>
g (float[6] X) => (float[3,2] Y)
<int64[2,1] s = {3, 2}, int64[1] minus = {-1}>
{ t = Transpose(s)
  r = Reshape(t, minus)
  Y = Reshape(X, r) }"#;
    check(text, vec![f32t(&[6], &iota(6))], &[(&[3, 2], &iota(6))]);
}

#[test]
fn concat_axes() {
    // axis -1: [[1] [2]] ++ [[3 4] [5 6]] → [[1 3 4] [2 5 6]]; axis 0: rows appended.
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,1] A, float[2,2] B) => (float[2,3] Y, float[4,2] Z)
<float[2,2] C = {7, 8, 9, 10}>
{ Y = Concat <axis = -1> (A, B)
  Z = Concat <axis = 0> (B, C) }"#;
    check(
        text,
        vec![f32t(&[2, 1], &[1., 2.]), f32t(&[2, 2], &[3., 4., 5., 6.])],
        &[
            (&[2, 3], &[1., 3., 4., 2., 5., 6.]),
            (&[4, 2], &[3., 4., 5., 6., 7., 8., 9., 10.]),
        ],
    );
}

#[test]
fn concat_three_inputs_middle_axis() {
    // [1,1,2] ++ [1,2,2] ++ [1,1,2] on axis -2 (= 1) → [1,4,2].
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,2] A, float[1,2,2] B) => (float[1,4,2] Y)
<float[1,1,2] C = {9, 9}>
{ Y = Concat <axis = -2> (A, B, C) }"#;
    check(
        text,
        vec![
            f32t(&[1, 1, 2], &[1., 2.]),
            f32t(&[1, 2, 2], &[3., 4., 5., 6.]),
        ],
        &[(&[1, 4, 2], &[1., 2., 3., 4., 5., 6., 9., 9.])],
    );
}

#[test]
fn constant_forms() {
    // value tensor, value_float, value_floats, and value_ints as a Reshape target.
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2,2] X) => (float[2,2] A, float[2,2] B, float[2,2] C, float[4] D, float[2] K)
{ t = Constant <value = float[2,2] {1, 2, 3, 4}> ()
  A = Add(X, t)
  f = Constant <value_float = 10.0> ()
  B = Mul(X, f)
  fs = Constant <value_floats = [1.0, -1.0]> ()
  C = Mul(X, fs)
  s = Constant <value_ints = [4]> ()
  D = Reshape(X, s)
  K = Constant <value_floats = [5.0, 6.0]> () }"#;
    let x = f32t(&[2, 2], &[1., 1., 2., 2.]);
    check(
        text,
        vec![x],
        &[
            (&[2, 2], &[2., 3., 5., 6.]),
            (&[2, 2], &[10., 10., 20., 20.]),
            (&[2, 2], &[1., -1., 2., -2.]),
            (&[4], &[1., 1., 2., 2.]),
            (&[2], &[5., 6.]),
        ],
    );
}

#[test]
fn constant_subgraph_is_folded_and_correct() {
    // (c + c) · 3 computed while planning, then added to X.
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[2] X) => (float[2] Y)
<float[2] c = {1, 2}, float three = {3}>
{ d = Add(c, c)
  e = Mul(d, three)
  Y = Add(X, e) }"#;
    check(text, vec![f32t(&[2], &[0.5, 0.5])], &[(&[2], &[6.5, 12.5])]);
}

#[test]
fn identity_of_input_and_of_initializer() {
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[3] X) => (float[3] Y, float[2] W)
<float[2] w = {7, 8}>
{ Y = Identity(X)
  W = Identity(w) }"#;
    check(
        text,
        vec![f32t(&[3], &[1., -2., 3.])],
        &[(&[3], &[1., -2., 3.]), (&[2], &[7., 8.])],
    );
}

#[test]
fn symbolic_batch_small_graph() {
    // Conv (1×1, weight 2) → Flatten → Gemm with a [N, 2] result, for N = 1 and N = 2.
    // Image n is [n+1, n+2]: conv → [2n+2, 2n+4]; Gemm with B = [[1 0] [1 1]], C = [0 1]:
    // [2n+2 + 2n+4, 2n+4 + 1].
    let text = r#"<ir_version: 8, opset_import: ["" : 13]>
g (float[N,1,1,2] X) => (float[N,2] Y)
<float[1,1,1,1] W = {2}, float[2,2] B = {1, 0, 1, 1}, float[2] C = {0, 1}>
{ c = Conv(X, W)
  f = Flatten(c)
  Y = Gemm(f, B, C) }"#;
    let exe = compile_ok(text);
    for n in [1usize, 2] {
        let x: Vec<f32> = (0..n)
            .flat_map(|i| [i as f32 + 1., i as f32 + 2.])
            .collect();
        let want: Vec<f32> = (0..n)
            .flat_map(|i| {
                let i = i as f32;
                [4. * i + 6., 2. * i + 5.]
            })
            .collect();
        let out = run_ok(&exe, vec![f32t(&[n, 1, 1, 2], &x)]);
        assert_values(&out[0], &[n, 2], &want, &format!("N = {n}"));
    }
}
