//! 2-D convolution, NCHW, fp32, with fused bias and activation.
//!
//! Paths chosen once in [`Conv2d::new`]:
//! - **pointwise** (1×1, stride 1, no padding): the input plane block is already the B matrix,
//!   `out[g] = W[g] · X[g]`, one GEMM per image and group with prepacked weights;
//! - **depthwise** (`groups == in_c == out_c`): a direct loop per channel plane, vectorised
//!   along output rows;
//! - **general**: im2col per image and group, in pixel tiles so the column buffer stays under
//!   [`COL_BUDGET`] floats, then a GEMM with the prepacked weights as A
//!   (`out[oc, pixels] = W[oc, k] · cols[k, pixels]`).
//!
//! Work is parallel over images × groups when there are enough of them, otherwise inside the
//! GEMM (and im2col).
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::activation::Activation;
use super::cpu::{self, Isa};
use super::gemm::{self, Bias, Epilogue, MatRef, PackedA};
use super::simd;
use super::KernelError;

/// Upper bound on the im2col column buffer of one tile, in floats (1 MiB of f32).
pub const COL_BUDGET: usize = 1 << 18;

/// Shape and hyper-parameters of a 2-D convolution (NCHW input, OIHW weights).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Conv2dParams {
    /// N.
    pub batch: usize,
    /// C of the input.
    pub in_channels: usize,
    /// H of the input.
    pub in_h: usize,
    /// W of the input.
    pub in_w: usize,
    /// C of the output (M).
    pub out_channels: usize,
    /// Kernel height.
    pub kernel_h: usize,
    /// Kernel width.
    pub kernel_w: usize,
    /// Vertical stride (≥ 1).
    pub stride_h: usize,
    /// Horizontal stride (≥ 1).
    pub stride_w: usize,
    /// Zero rows added above.
    pub pad_top: usize,
    /// Zero columns added on the left.
    pub pad_left: usize,
    /// Zero rows added below.
    pub pad_bottom: usize,
    /// Zero columns added on the right.
    pub pad_right: usize,
    /// Vertical dilation (≥ 1).
    pub dilation_h: usize,
    /// Horizontal dilation (≥ 1).
    pub dilation_w: usize,
    /// Groups (divides both channel counts).
    pub groups: usize,
}

impl Conv2dParams {
    /// Output height (0 when the dilated kernel is taller than the padded input).
    pub fn out_h(&self) -> usize {
        out_dim(
            self.in_h + self.pad_top + self.pad_bottom,
            self.kernel_h,
            self.dilation_h,
            self.stride_h,
        )
    }

    /// Output width (0 when the dilated kernel is wider than the padded input).
    pub fn out_w(&self) -> usize {
        out_dim(
            self.in_w + self.pad_left + self.pad_right,
            self.kernel_w,
            self.dilation_w,
            self.stride_w,
        )
    }

    /// Elements of the input tensor.
    pub fn input_len(&self) -> usize {
        self.batch * self.in_channels * self.in_h * self.in_w
    }

    /// Elements of the output tensor.
    pub fn output_len(&self) -> usize {
        self.batch * self.out_channels * self.out_h() * self.out_w()
    }

    /// Elements of the weight tensor `[out_c, in_c/groups, kh, kw]`.
    pub fn weights_len(&self) -> usize {
        self.out_channels * (self.in_channels / self.groups.max(1)) * self.kernel_h * self.kernel_w
    }

    /// Checks that the parameters describe a valid convolution.
    pub fn validate(&self) -> Result<(), KernelError> {
        let bad = |m: &str| Err(KernelError::new(format!("conv2d: {m} ({self:?})")));
        if self.groups == 0
            || self.in_channels % self.groups != 0
            || self.out_channels % self.groups != 0
        {
            return bad("groups must divide the channel counts");
        }
        if self.stride_h == 0 || self.stride_w == 0 || self.dilation_h == 0 || self.dilation_w == 0
        {
            return bad("strides and dilations must be ≥ 1");
        }
        if self.kernel_h == 0 || self.kernel_w == 0 {
            return bad("kernel must be non-empty");
        }
        Ok(())
    }
}

/// `floor((padded - dilated_kernel) / stride) + 1`, or 0.
fn out_dim(padded: usize, k: usize, d: usize, s: usize) -> usize {
    let eff = d * (k - 1) + 1;
    if padded < eff || s == 0 {
        0
    } else {
        (padded - eff) / s + 1
    }
}

/// How a [`Conv2d`] computes.
#[derive(Clone, Debug)]
enum Path {
    /// Per-channel direct loop; weights `[c, kh*kw]`.
    Depthwise(Vec<f32>),
    /// GEMM per group with prepacked weights (pointwise or im2col).
    Gemm {
        weights: Vec<PackedA>,
        pointwise: bool,
    },
}

/// A convolution prepared once (weights prepacked) and run many times.
#[derive(Clone, Debug)]
pub struct Conv2d {
    p: Conv2dParams,
    isa: Isa,
    bias: Option<Vec<f32>>,
    path: Path,
}

impl Conv2d {
    /// Prepares a convolution for the process's ISA. `weights` is `[out_c, in_c/groups, kh, kw]`,
    /// `bias` (if any) has `out_c` values.
    pub fn new(
        p: Conv2dParams,
        weights: &[f32],
        bias: Option<&[f32]>,
    ) -> Result<Self, KernelError> {
        Self::with_isa(cpu::isa(), p, weights, bias)
    }

    /// [`Conv2d::new`] for an explicit ISA (tests, benchmarks).
    pub fn with_isa(
        isa: Isa,
        p: Conv2dParams,
        weights: &[f32],
        bias: Option<&[f32]>,
    ) -> Result<Self, KernelError> {
        p.validate()?;
        if weights.len() != p.weights_len() {
            return Err(KernelError::new(format!(
                "conv2d: {} weights, expected {}",
                weights.len(),
                p.weights_len()
            )));
        }
        if let Some(b) = bias {
            if b.len() != p.out_channels {
                return Err(KernelError::new(format!(
                    "conv2d: {} biases, expected {}",
                    b.len(),
                    p.out_channels
                )));
            }
        }
        let depthwise = p.groups == p.in_channels && p.groups == p.out_channels;
        let path = if depthwise {
            Path::Depthwise(weights.to_vec())
        } else {
            let ocg = p.out_channels / p.groups;
            let k = (p.in_channels / p.groups) * p.kernel_h * p.kernel_w;
            let weights = (0..p.groups)
                .map(|g| {
                    PackedA::with_isa(
                        isa,
                        MatRef::row_major(&weights[g * ocg * k..(g + 1) * ocg * k], ocg, k),
                    )
                })
                .collect();
            let pointwise = p.kernel_h == 1
                && p.kernel_w == 1
                && p.stride_h == 1
                && p.stride_w == 1
                && p.pad_top + p.pad_left + p.pad_bottom + p.pad_right == 0;
            Path::Gemm { weights, pointwise }
        };
        Ok(Conv2d {
            p,
            isa,
            bias: bias.map(<[f32]>::to_vec),
            path,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &Conv2dParams {
        &self.p
    }

    /// Runs the convolution: `output = act(conv(input) + bias)`. `input` has
    /// [`Conv2dParams::input_len`] elements and `output` [`Conv2dParams::output_len`].
    pub fn run(&self, input: &[f32], output: &mut [f32], activation: Activation) {
        let p = &self.p;
        assert_eq!(input.len(), p.input_len(), "conv2d: input length");
        assert_eq!(output.len(), p.output_len(), "conv2d: output length");
        if output.is_empty() {
            return;
        }
        match &self.path {
            Path::Depthwise(w) => self.run_depthwise(w, input, output, activation),
            Path::Gemm { weights, pointwise } => {
                self.run_gemm(weights, *pointwise, input, output, activation)
            }
        }
    }

    fn run_gemm(
        &self,
        weights: &[PackedA],
        pointwise: bool,
        input: &[f32],
        output: &mut [f32],
        act: Activation,
    ) {
        let p = &self.p;
        let (oh, ow) = (p.out_h(), p.out_w());
        let pix = oh * ow;
        let ocg = p.out_channels / p.groups;
        let icg = p.in_channels / p.groups;
        let in_plane = p.in_h * p.in_w;
        let k = icg * p.kernel_h * p.kernel_w;
        let tasks = p.batch * p.groups;
        let threads = rayon::current_num_threads();
        let outer_par =
            threads > 1 && tasks >= threads && (tasks % threads == 0 || tasks >= 4 * threads);
        let one = |idx: usize, out: &mut [f32], inner_par: bool| {
            let (b, g) = (idx / p.groups, idx % p.groups);
            let x = &input[(b * p.in_channels + g * icg) * in_plane..][..icg * in_plane];
            let bias = self.bias.as_ref().map(|v| &v[g * ocg..(g + 1) * ocg]);
            let ep = Epilogue {
                bias: bias.map_or(Bias::None, Bias::PerRow),
                activation: act,
            };
            if pointwise {
                let bm = MatRef::row_major(x, icg, pix);
                gemm::sgemm_packed_a_with(inner_par, 1.0, &weights[g], bm, 0.0, out, pix, &ep);
                return;
            }
            let tp = (COL_BUDGET / k.max(1)).max(64).min(pix);
            let tp = if tp < pix { (tp / 32).max(2) * 32 } else { tp };
            let mut cols = vec![0.0f32; k * tp.min(pix)];
            for p0 in (0..pix).step_by(tp) {
                let w = tp.min(pix - p0);
                let cols = &mut cols[..k * w];
                im2col(p, x, p0, w, cols, inner_par);
                let c = &mut out[p0..(ocg - 1) * pix + p0 + w];
                gemm::sgemm_packed_a_with(
                    inner_par,
                    1.0,
                    &weights[g],
                    MatRef::row_major(cols, k, w),
                    0.0,
                    c,
                    pix,
                    &ep,
                );
            }
        };
        let chunk = ocg * pix;
        if outer_par {
            output
                .par_chunks_mut(chunk)
                .enumerate()
                .for_each(|(i, o)| one(i, o, false));
        } else {
            output
                .chunks_mut(chunk)
                .enumerate()
                .for_each(|(i, o)| one(i, o, true));
        }
    }

    fn run_depthwise(&self, w: &[f32], input: &[f32], output: &mut [f32], act: Activation) {
        let p = &self.p;
        let (oh, ow) = (p.out_h(), p.out_w());
        let in_plane = p.in_h * p.in_w;
        let khw = p.kernel_h * p.kernel_w;
        let isa = self.isa;
        let plane = |(idx, out): (usize, &mut [f32])| {
            let c = idx % p.in_channels;
            let x = &input[idx * in_plane..(idx + 1) * in_plane];
            let wc = &w[c * khw..(c + 1) * khw];
            let b = self.bias.as_ref().map_or(0.0, |v| v[c]);
            simd::vectorize(isa, || depthwise_plane(p, x, wc, b, out));
            act.apply_isa(isa, out);
        };
        let par = rayon::current_num_threads() > 1 && output.len() * khw >= 1 << 16;
        if par {
            output.par_chunks_mut(oh * ow).enumerate().for_each(plane);
        } else {
            output.chunks_mut(oh * ow).enumerate().for_each(plane);
        }
    }
}

/// Output columns `ox` whose input column `ox*s + k*d - pad` lies in `0..len`: the range `lo..hi`.
#[inline(always)]
fn valid_range(out_len: usize, len: usize, s: usize, kd: usize, pad: usize) -> (usize, usize) {
    // ix >= 0  ⇔  ox*s >= pad - kd
    let lo = if pad > kd { (pad - kd).div_ceil(s) } else { 0 };
    // ix < len ⇔  ox*s < len + pad - kd
    let hi = if len + pad > kd {
        (len + pad - kd).div_ceil(s)
    } else {
        0
    };
    (lo.min(out_len), hi.min(out_len).max(lo.min(out_len)))
}

/// One depthwise output plane: `out = bias + sum_{ky,kx} w[ky,kx] * shifted(x)`.
#[inline(always)]
fn depthwise_plane(p: &Conv2dParams, x: &[f32], w: &[f32], bias: f32, out: &mut [f32]) {
    let (oh, ow) = (p.out_h(), p.out_w());
    out.fill(bias);
    for (oy, orow) in out.chunks_exact_mut(ow).enumerate().take(oh) {
        for ky in 0..p.kernel_h {
            let iy = (oy * p.stride_h + ky * p.dilation_h) as isize - p.pad_top as isize;
            if iy < 0 || iy >= p.in_h as isize {
                continue;
            }
            let irow = &x[iy as usize * p.in_w..(iy as usize + 1) * p.in_w];
            for kx in 0..p.kernel_w {
                let wv = w[ky * p.kernel_w + kx];
                let kd = kx * p.dilation_w;
                let (lo, hi) = valid_range(ow, p.in_w, p.stride_w, kd, p.pad_left);
                if lo >= hi {
                    continue;
                }
                let start = lo * p.stride_w + kd - p.pad_left;
                if p.stride_w == 1 {
                    let src = &irow[start..start + (hi - lo)];
                    for (o, &v) in orow[lo..hi].iter_mut().zip(src) {
                        *o += wv * v;
                    }
                } else {
                    let src = irow[start..].iter().step_by(p.stride_w);
                    for (o, &v) in orow[lo..hi].iter_mut().zip(src) {
                        *o += wv * v;
                    }
                }
            }
        }
    }
}

/// Fills `cols` (`k × w`, row-major) with the im2col columns of output pixels `p0..p0+w` of one
/// image/group `x` (`icg` planes).
fn im2col(p: &Conv2dParams, x: &[f32], p0: usize, w: usize, cols: &mut [f32], par: bool) {
    let ow = p.out_w();
    let (kh, kw) = (p.kernel_h, p.kernel_w);
    let in_plane = p.in_h * p.in_w;
    let row = |(r, dst): (usize, &mut [f32])| {
        let (c, ky, kx) = (r / (kh * kw), (r / kw) % kh, r % kw);
        let plane = &x[c * in_plane..(c + 1) * in_plane];
        let kd = kx * p.dilation_w;
        let (lo, hi) = valid_range(ow, p.in_w, p.stride_w, kd, p.pad_left);
        let mut pix = p0;
        let mut d = 0;
        while d < w {
            let (oy, ox0) = (pix / ow, pix % ow);
            let run = (ow - ox0).min(w - d);
            let seg = &mut dst[d..d + run];
            let iy = (oy * p.stride_h + ky * p.dilation_h) as isize - p.pad_top as isize;
            if iy < 0 || iy >= p.in_h as isize {
                seg.fill(0.0);
            } else {
                let irow = &plane[iy as usize * p.in_w..(iy as usize + 1) * p.in_w];
                let (a, b) = (lo.clamp(ox0, ox0 + run), hi.clamp(ox0, ox0 + run));
                seg[..a - ox0].fill(0.0);
                seg[b - ox0..].fill(0.0);
                if a < b {
                    let start = a * p.stride_w + kd - p.pad_left;
                    let mid = &mut seg[a - ox0..b - ox0];
                    if p.stride_w == 1 {
                        mid.copy_from_slice(&irow[start..start + (b - a)]);
                    } else {
                        for (o, &v) in mid.iter_mut().zip(irow[start..].iter().step_by(p.stride_w))
                        {
                            *o = v;
                        }
                    }
                }
            }
            pix += run;
            d += run;
        }
    };
    if par && cols.len() >= 1 << 15 {
        cols.par_chunks_mut(w).enumerate().for_each(row);
    } else {
        cols.chunks_mut(w).enumerate().for_each(row);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference::{self, Rng};

    #[allow(clippy::too_many_arguments)]
    fn params(
        n: usize,
        ic: usize,
        h: usize,
        w: usize,
        oc: usize,
        k: (usize, usize),
        s: (usize, usize),
        pad: [usize; 4],
        d: (usize, usize),
        g: usize,
    ) -> Conv2dParams {
        Conv2dParams {
            batch: n,
            in_channels: ic,
            in_h: h,
            in_w: w,
            out_channels: oc,
            kernel_h: k.0,
            kernel_w: k.1,
            stride_h: s.0,
            stride_w: s.1,
            pad_top: pad[0],
            pad_left: pad[1],
            pad_bottom: pad[2],
            pad_right: pad[3],
            dilation_h: d.0,
            dilation_w: d.1,
            groups: g,
        }
    }

    fn check(isa: Isa, p: Conv2dParams, act: Activation, rng: &mut Rng) {
        let x = rng.vec(p.input_len());
        let w = rng.vec(p.weights_len());
        let bias = rng.vec(p.out_channels);
        for with_bias in [false, true] {
            let b = with_bias.then_some(&bias[..]);
            let mut want = vec![0.0; p.output_len()];
            reference::conv2d_ref(&p, &x, &w, b, act, &mut want);
            let conv = Conv2d::with_isa(isa, p, &w, b).unwrap();
            let mut got = vec![f32::NAN; p.output_len()];
            conv.run(&x, &mut got, act);
            let k = (p.in_channels / p.groups * p.kernel_h * p.kernel_w) as f32;
            for (i, (&g, &e)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - e).abs() <= 1e-5 * k.sqrt().max(1.0) * (1.0 + e.abs()),
                    "{isa:?} {p:?} [{i}]: {g} vs {e}"
                );
            }
        }
    }

    fn all(isa: Isa) {
        let mut rng = Rng::new(5);
        let cases = [
            params(1, 3, 7, 9, 4, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 1),
            params(2, 4, 8, 8, 6, (1, 1), (1, 1), [0, 0, 0, 0], (1, 1), 1),
            params(2, 4, 8, 8, 6, (1, 1), (2, 2), [0, 0, 0, 0], (1, 1), 2),
            params(1, 5, 11, 10, 7, (3, 2), (2, 3), [2, 0, 1, 3], (1, 1), 1),
            params(1, 4, 12, 12, 8, (3, 3), (1, 1), [2, 2, 2, 2], (2, 2), 2),
            params(3, 6, 9, 7, 6, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 6),
            params(1, 6, 9, 7, 6, (5, 5), (2, 2), [2, 1, 2, 3], (1, 2), 6),
            params(1, 3, 5, 5, 6, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 3),
            params(1, 2, 4, 4, 3, (5, 5), (1, 1), [0, 0, 0, 0], (1, 1), 1),
            params(1, 16, 20, 20, 33, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 1),
            params(1, 64, 17, 19, 20, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 1),
            params(1, 1, 1, 40, 5, (1, 7), (1, 1), [0, 3, 0, 3], (1, 1), 1),
        ];
        for p in cases {
            check(isa, p, Activation::None, &mut rng);
            check(isa, p, Activation::Relu, &mut rng);
        }
    }

    #[test]
    fn conv_portable() {
        all(Isa::Portable);
    }

    #[test]
    fn conv_avx2() {
        if let Some(isa) = cpu::test_isa(Isa::Avx2Fma) {
            all(isa);
        }
    }

    #[test]
    fn conv_avx512() {
        if let Some(isa) = cpu::test_isa(Isa::Avx512) {
            all(isa);
        }
    }

    #[test]
    fn hand_computed() {
        // 1 channel 3x3 input, 2x2 kernel of ones, no pad: sums of 2x2 windows.
        let p = params(1, 1, 3, 3, 1, (2, 2), (1, 1), [0, 0, 0, 0], (1, 1), 1);
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
        let conv = Conv2d::new(p, &[1.0; 4], Some(&[0.5])).unwrap();
        let mut out = [0.0; 4];
        conv.run(&x, &mut out, Activation::None);
        assert_eq!(out, [12.5, 16.5, 24.5, 28.5]);
        assert_eq!((p.out_h(), p.out_w()), (2, 2));
        assert!(Conv2d::new(p, &[1.0; 3], None).is_err());
    }

    #[test]
    fn im2col_tiles_bounded() {
        // Large K forces several pixel tiles.
        let mut rng = Rng::new(9);
        let p = params(1, 300, 20, 20, 4, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 1);
        check(cpu::isa(), p, Activation::None, &mut rng);
    }
}
