//! Naive reference implementations ("oracles") of every kernel, written as plain loops that are
//! obviously correct. Used by the tests of `kernels` (and of other modules); never fast.
#![forbid(unsafe_code)]

use super::activation::Activation;
use super::conv::Conv2dParams;
use super::conv_transpose::ConvTransposeParams;
use super::elementwise::BinaryOp;
use super::gemm::MatRef;
use super::pool::Pool2dParams;

/// A deterministic picker of random sizes for shape tests: each call `pick(m)` returns the next
/// value in `0..m` of a 64-bit LCG started at `seed`.
pub fn size_picker(seed: u64) -> impl FnMut(usize) -> usize {
    let mut state = seed;
    move |m| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) as usize) % m
    }
}

/// A small deterministic pseudo-random generator (xorshift64*) for test data.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A uniform value in `[-1, 1)`.
    pub fn next_f32(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let v = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40; // 24 bits
        v as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// `len` uniform values in `[-1, 1)`.
    pub fn vec(&mut self, len: usize) -> Vec<f32> {
        (0..len).map(|_| self.next_f32()).collect()
    }
}

/// `C = alpha·A·B + beta·C` (beta == 0 ignores C), accumulated in f64.
pub fn gemm_ref(alpha: f32, a: &MatRef, b: &MatRef, beta: f32, c: &mut [f32], ldc: usize) {
    assert_eq!(a.cols, b.rows);
    for i in 0..a.rows {
        for j in 0..b.cols {
            let mut s = 0.0f64;
            for k in 0..a.cols {
                s += a.data[i * a.row_stride + k * a.col_stride] as f64
                    * b.data[k * b.row_stride + j * b.col_stride] as f64;
            }
            let old = if beta == 0.0 {
                0.0
            } else {
                beta as f64 * c[i * ldc + j] as f64
            };
            c[i * ldc + j] = (alpha as f64 * s + old) as f32;
        }
    }
}

/// Scalar activation with `std` math.
pub fn activation_ref(act: Activation, x: f32) -> f32 {
    match act {
        Activation::None => x,
        Activation::Relu => {
            if x < 0.0 {
                0.0
            } else {
                x
            }
        }
        Activation::LeakyRelu(a) => {
            if x < 0.0 {
                a * x
            } else {
                x
            }
        }
        Activation::Clip { min, max } => {
            if x < min {
                min
            } else if x > max {
                max
            } else {
                x
            }
        }
        Activation::Sigmoid => (1.0 / (1.0 + (-(x as f64)).exp())) as f32,
        Activation::Tanh => (x as f64).tanh() as f32,
        Activation::Erf => erf_f64(x as f64) as f32,
        Activation::Gelu => {
            let x = x as f64;
            (0.5 * x * (1.0 + erf_f64(x * std::f64::consts::FRAC_1_SQRT_2))) as f32
        }
        Activation::HardSwish => {
            let x = x as f64;
            (x * (x / 6.0 + 0.5).clamp(0.0, 1.0)) as f32
        }
        Activation::Silu => (x as f64 / (1.0 + (-(x as f64)).exp())) as f32,
    }
}

/// The error function in double precision, by the series
/// `erf(x) = 2/√π · e^(-x²) · Σ 2ⁿ x^(2n+1) / (1·3·…·(2n+1))`, whose terms are all of one sign
/// (no cancellation). Beyond |x| = 6 the result is ±1 to well under f64 display precision
/// for f32 purposes. Slow; the oracle for [`crate::kernels::activation::erf_approx`].
pub fn erf_f64(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    let a = x.abs();
    if a >= 6.0 {
        return x.signum();
    }
    let two_x2 = 2.0 * a * a;
    let mut term = a;
    let mut sum = a;
    let mut n = 0.0;
    while term > sum * 1e-17 {
        n += 1.0;
        term *= two_x2 / (2.0 * n + 1.0);
        sum += term;
    }
    (2.0 / std::f64::consts::PI.sqrt() * (-a * a).exp() * sum)
        .min(1.0)
        .copysign(x)
}

/// Direct NCHW convolution; `weights` is `[out_c, in_c/groups, kh, kw]`.
pub fn conv2d_ref(
    p: &Conv2dParams,
    input: &[f32],
    weights: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    output: &mut [f32],
) {
    let (oh, ow) = (p.out_h(), p.out_w());
    let icg = p.in_channels / p.groups;
    let ocg = p.out_channels / p.groups;
    for n in 0..p.batch {
        for oc in 0..p.out_channels {
            let g = oc / ocg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut s = bias.map_or(0.0, |b| b[oc] as f64);
                    for ic in 0..icg {
                        let c = g * icg + ic;
                        for ky in 0..p.kernel_h {
                            for kx in 0..p.kernel_w {
                                let iy = (oy * p.stride_h + ky * p.dilation_h) as isize
                                    - p.pad_top as isize;
                                let ix = (ox * p.stride_w + kx * p.dilation_w) as isize
                                    - p.pad_left as isize;
                                if iy < 0
                                    || ix < 0
                                    || iy >= p.in_h as isize
                                    || ix >= p.in_w as isize
                                {
                                    continue;
                                }
                                let x = input[((n * p.in_channels + c) * p.in_h + iy as usize)
                                    * p.in_w
                                    + ix as usize];
                                let w =
                                    weights[((oc * icg + ic) * p.kernel_h + ky) * p.kernel_w + kx];
                                s += x as f64 * w as f64;
                            }
                        }
                    }
                    output[((n * p.out_channels + oc) * oh + oy) * ow + ox] =
                        activation_ref(act, s as f32);
                }
            }
        }
    }
}

/// Transposed convolution by gathering: each output element sums, over the input channels of
/// its group and the kernel taps, the input element at `(o + pad − k·dilation) / stride` where
/// that divides exactly and lies inside the input; `weights` is `[C, M/groups, kernel…]`.
pub fn conv_transpose_ref(
    p: &ConvTransposeParams,
    input: &[f32],
    weights: &[f32],
    bias: Option<&[f32]>,
    output: &mut [f32],
) {
    let (cg, mg) = (p.in_channels / p.groups, p.out_channels / p.groups);
    let (in_plane, out_plane, taps) = (p.in_plane(), p.out_plane(), p.taps());
    // The input index of output index `o` through tap `k` of dimension `d`, if any.
    let source = |d: usize, o: usize, k: usize| -> Option<usize> {
        let at = o as i64 + p.pads_begin[d] as i64 - (k * p.dilations[d]) as i64;
        let s = p.strides[d] as i64;
        (at >= 0 && at % s == 0 && at / s < p.in_sp[d] as i64).then_some((at / s) as usize)
    };
    for n in 0..p.batch {
        for m in 0..p.out_channels {
            let (g, mi) = (m / mg, m % mg);
            for o in 0..out_plane {
                let os = [
                    o / (p.out_sp[1] * p.out_sp[2]),
                    o / p.out_sp[2] % p.out_sp[1],
                    o % p.out_sp[2],
                ];
                let mut s = bias.map_or(0.0, |b| b[m] as f64);
                for t in 0..taps {
                    let ks = [
                        t / (p.kernel[1] * p.kernel[2]),
                        t / p.kernel[2] % p.kernel[1],
                        t % p.kernel[2],
                    ];
                    let (Some(iz), Some(iy), Some(ix)) = (
                        source(0, os[0], ks[0]),
                        source(1, os[1], ks[1]),
                        source(2, os[2], ks[2]),
                    ) else {
                        continue;
                    };
                    let i = (iz * p.in_sp[1] + iy) * p.in_sp[2] + ix;
                    for ci in 0..cg {
                        let c = g * cg + ci;
                        let x = input[(n * p.in_channels + c) * in_plane + i];
                        let w = weights[(c * mg + mi) * taps + t];
                        s += x as f64 * w as f64;
                    }
                }
                output[(n * p.out_channels + m) * out_plane + o] = s as f32;
            }
        }
    }
}

/// Window positions `(iy, ix)` of output `(oy, ox)`, as signed input coordinates.
fn window(p: &Pool2dParams, oy: usize, ox: usize) -> Vec<(isize, isize)> {
    let mut v = Vec::new();
    for ky in 0..p.kernel_h {
        for kx in 0..p.kernel_w {
            let iy = (oy * p.stride_h + ky * p.dilation_h) as isize - p.pad_top as isize;
            let ix = (ox * p.stride_w + kx * p.dilation_w) as isize - p.pad_left as isize;
            v.push((iy, ix));
        }
    }
    v
}

/// Max pooling; positions outside the input are ignored (a window with none gives `-inf`).
pub fn max_pool2d_ref(p: &Pool2dParams, input: &[f32], output: &mut [f32]) {
    let (h, w) = (p.in_h as isize, p.in_w as isize);
    for plane in 0..p.batch * p.channels {
        for oy in 0..p.out_h {
            for ox in 0..p.out_w {
                let mut m = f32::NEG_INFINITY;
                for (iy, ix) in window(p, oy, ox) {
                    if iy >= 0 && ix >= 0 && iy < h && ix < w {
                        m = m.max(input[(plane * p.in_h + iy as usize) * p.in_w + ix as usize]);
                    }
                }
                output[(plane * p.out_h + oy) * p.out_w + ox] = m;
            }
        }
    }
}

/// Average pooling with ONNX semantics: the divisor counts window positions inside the input
/// (or inside input + pads when `count_include_pad`); a window with none gives 0.
pub fn avg_pool2d_ref(
    p: &Pool2dParams,
    count_include_pad: bool,
    input: &[f32],
    output: &mut [f32],
) {
    let (h, w) = (p.in_h as isize, p.in_w as isize);
    let (pt, pl) = (p.pad_top as isize, p.pad_left as isize);
    let (hb, wb) = (h + p.pad_bottom as isize, w + p.pad_right as isize);
    for plane in 0..p.batch * p.channels {
        for oy in 0..p.out_h {
            for ox in 0..p.out_w {
                let mut s = 0.0f64;
                let mut count = 0usize;
                for (iy, ix) in window(p, oy, ox) {
                    let inside = iy >= 0 && ix >= 0 && iy < h && ix < w;
                    if inside {
                        s += input[(plane * p.in_h + iy as usize) * p.in_w + ix as usize] as f64;
                    }
                    let in_padded = iy >= -pt && ix >= -pl && iy < hb && ix < wb;
                    if (count_include_pad && in_padded) || inside {
                        count += 1;
                    }
                }
                output[(plane * p.out_h + oy) * p.out_w + ox] = if count == 0 {
                    0.0
                } else {
                    (s / count as f64) as f32
                };
            }
        }
    }
}

/// Mean of each of `planes` contiguous planes of `plane_size` values.
pub fn global_avg_pool_ref(planes: usize, plane_size: usize, input: &[f32], output: &mut [f32]) {
    for p in 0..planes {
        let s: f64 = input[p * plane_size..(p + 1) * plane_size]
            .iter()
            .map(|&v| v as f64)
            .sum();
        output[p] = (s / plane_size as f64) as f32;
    }
}

/// Maximum of each of `planes` contiguous planes of `plane_size` values.
pub fn global_max_pool_ref(planes: usize, plane_size: usize, input: &[f32], output: &mut [f32]) {
    for p in 0..planes {
        output[p] = input[p * plane_size..(p + 1) * plane_size]
            .iter()
            .fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    }
}

/// Scalar binary operation.
pub fn binary_op_ref(op: BinaryOp, a: f32, b: f32) -> f32 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Max if a.is_nan() || b.is_nan() => f32::NAN,
        BinaryOp::Min if a.is_nan() || b.is_nan() => f32::NAN,
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::Pow => a.powf(b),
    }
}

/// Numpy-broadcast binary operation by explicit index arithmetic.
pub fn binary_ref(
    op: BinaryOp,
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    out: &mut [f32],
    out_shape: &[usize],
) {
    let rank = out_shape.len();
    let total: usize = out_shape.iter().product();
    let index = |shape: &[usize], coords: &[usize]| -> usize {
        let off = rank - shape.len();
        let mut idx = 0;
        for (d, &s) in shape.iter().enumerate() {
            let c = if s == 1 { 0 } else { coords[off + d] };
            idx = idx * s + c;
        }
        idx
    };
    let mut coords = vec![0usize; rank];
    for (flat, o) in out.iter_mut().enumerate().take(total) {
        let mut rem = flat;
        for d in (0..rank).rev() {
            coords[d] = rem % out_shape[d];
            rem /= out_shape[d];
        }
        *o = binary_op_ref(op, a[index(a_shape, &coords)], b[index(b_shape, &coords)]);
    }
}

/// Softmax along the middle axis of an `[outer, axis_len, inner]` tensor, in f64.
pub fn softmax_ref(
    x: &[f32],
    out: &mut [f32],
    outer: usize,
    axis_len: usize,
    inner: usize,
    log: bool,
) {
    for o in 0..outer {
        for i in 0..inner {
            let at = |a: usize| (o * axis_len + a) * inner + i;
            let m = (0..axis_len)
                .map(|a| x[at(a)] as f64)
                .fold(f64::NEG_INFINITY, f64::max);
            let s: f64 = (0..axis_len).map(|a| (x[at(a)] as f64 - m).exp()).sum();
            for a in 0..axis_len {
                let v = x[at(a)] as f64 - m;
                out[at(a)] = if log {
                    (v - s.ln()) as f32
                } else {
                    (v.exp() / s) as f32
                };
            }
        }
    }
}

/// Transpose by explicit index arithmetic: `out` dim `d` is input dim `perm[d]`.
pub fn transpose_ref<T: Copy>(x: &[T], shape: &[usize], perm: &[usize], out: &mut [T]) {
    let rank = shape.len();
    let mut in_strides = vec![1usize; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        in_strides[d] = in_strides[d + 1] * shape[d + 1];
    }
    let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    let total: usize = shape.iter().product();
    for (flat, o) in out.iter_mut().enumerate().take(total) {
        let mut rem = flat;
        let mut src = 0;
        for d in (0..rank).rev() {
            let c = rem % out_shape[d];
            rem /= out_shape[d];
            src += c * in_strides[perm[d]];
        }
        *o = x[src];
    }
}

/// `out[n, c, s] = x[n, c, s] * scale[c] + shift[c]`.
pub fn channel_affine_ref(
    x: &[f32],
    out: &mut [f32],
    n: usize,
    c: usize,
    spatial: usize,
    scale: &[f32],
    shift: &[f32],
) {
    for i in 0..n * c * spatial {
        let ch = (i / spatial) % c;
        out[i] = x[i] * scale[ch] + shift[ch];
    }
}
