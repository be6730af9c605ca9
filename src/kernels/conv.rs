//! 2-D convolution, NCHW, fp32, with fused bias and activation.
//!
//! Paths chosen once in [`Conv2d::new`]:
//! - **pointwise** (1×1, stride 1, no padding): the input plane block is already the B matrix,
//!   `out[g] = W[g] · X[g]`, one GEMM per image and group with prepacked weights;
//! - **depthwise** (`groups == in_c == out_c`): one plane per channel, in parallel, by the loops
//!   of the `depthwise` module (an AVX-512 plane kernel, or loops vectorised along output
//!   rows);
//! - **general**: implicit im2col: a GEMM with the prepacked weights as A
//!   (`out[oc, pixels] = W[oc, k] · cols[k, pixels]`) whose B panels are gathered straight from
//!   the input while packing, so the column matrix is never materialised (memory stays bounded
//!   by the GEMM's `KC×NC` packing buffer).
//!
//! Work is parallel over images × groups when there are enough of them, otherwise inside the
//! GEMM (including its packing).
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::activation::Activation;
use super::cpu::{self, Isa};
use super::gemm::{self, Bias, Epilogue, MatRef, PackedA, PanelSource};
use super::winograd::{self, WinogradFilters};
use super::{depthwise, simd, KernelError};
use std::sync::Arc;

/// Widest GEMM register tile (`nr`) of any ISA: the most pixels one packed panel holds.
const MAX_NR: usize = 32;

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
    /// Whether every channel is its own group (one filter per channel).
    pub fn is_depthwise(&self) -> bool {
        self.groups == self.in_channels && self.groups == self.out_channels
    }

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
            || !self.in_channels.is_multiple_of(self.groups)
            || !self.out_channels.is_multiple_of(self.groups)
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

/// A convolution's filters, prepared for its ISA. They depend only on the channels, groups
/// and kernel size, not on the image size, so one preparation serves every input shape.
#[derive(Debug)]
pub enum ConvFilters {
    /// Depthwise: weights `[c, kh*kw]` as they are.
    Depthwise(Vec<f32>),
    /// One prepacked GEMM `A` operand per group.
    Packed(Vec<PackedA>),
    /// Winograd-transformed filters (3×3, stride 1, see [`winograd::suits`]).
    Winograd(WinogradFilters),
}

impl ConvFilters {
    /// Prepares `weights` (`[out_c, in_c/groups, kh, kw]`) for the convolution `p` on `isa`.
    pub fn prepare(isa: Isa, p: &Conv2dParams, weights: &[f32]) -> Result<Self, KernelError> {
        p.validate()?;
        if weights.len() != p.weights_len() {
            return Err(KernelError::new(format!(
                "conv2d: {} weights, expected {}",
                weights.len(),
                p.weights_len()
            )));
        }
        if p.is_depthwise() {
            return Ok(ConvFilters::Depthwise(weights.to_vec()));
        }
        if winograd::suits(p) {
            return Ok(ConvFilters::Winograd(WinogradFilters::prepare(
                isa,
                p.out_channels,
                p.in_channels,
                weights,
            )));
        }
        let ocg = p.out_channels / p.groups;
        let k = (p.in_channels / p.groups) * p.kernel_h * p.kernel_w;
        Ok(ConvFilters::Packed(
            (0..p.groups)
                .map(|g| {
                    PackedA::with_isa(
                        isa,
                        MatRef::row_major(&weights[g * ocg * k..(g + 1) * ocg * k], ocg, k),
                    )
                })
                .collect(),
        ))
    }
}

/// How a [`Conv2d`] computes.
#[derive(Clone, Debug)]
enum Path {
    /// Per-channel direct loop.
    Depthwise,
    /// Winograd F(4×4, 3×3).
    Winograd,
    /// GEMM per group with prepacked weights (pointwise or im2col).
    Gemm {
        pointwise: bool,
        /// Per im2col row: where it reads (empty for pointwise).
        krows: Vec<KRow>,
        /// For stride-1 padded convolutions: the geometry of the zero-padded input copy
        /// (same output size, no pads) and its im2col rows.
        padded: Option<Box<(Conv2dParams, Vec<KRow>)>>,
    },
}

/// Precomputed addressing of one im2col row `r = (c, ky, kx)`.
#[derive(Clone, Copy, Debug)]
struct KRow {
    /// Offset of input plane `c` in the image/group.
    plane: usize,
    /// `ky * dilation_h`.
    ky_off: usize,
    /// `kx * dilation_w`.
    kd: usize,
    /// Output columns whose input column is inside the image: `lo..hi`.
    lo: usize,
    hi: usize,
}

/// A convolution prepared once (weights prepacked) and run many times.
#[derive(Clone, Debug)]
pub struct Conv2d {
    p: Conv2dParams,
    isa: Isa,
    bias: Option<Vec<f32>>,
    filters: Arc<ConvFilters>,
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
        let filters = Arc::new(ConvFilters::prepare(isa, &p, weights)?);
        Self::with_filters(isa, p, filters, bias)
    }

    /// A convolution over filters prepared already (shared between convolutions that differ
    /// only in the image size). `filters` must come from [`ConvFilters::prepare`] for `isa`
    /// and the same channels, groups and kernel size.
    pub fn with_filters(
        isa: Isa,
        p: Conv2dParams,
        filters: Arc<ConvFilters>,
        bias: Option<&[f32]>,
    ) -> Result<Self, KernelError> {
        p.validate()?;
        if let Some(b) = bias {
            if b.len() != p.out_channels {
                return Err(KernelError::new(format!(
                    "conv2d: {} biases, expected {}",
                    b.len(),
                    p.out_channels
                )));
            }
        }
        let fits = match &*filters {
            ConvFilters::Depthwise(w) => p.is_depthwise() && w.len() == p.weights_len(),
            ConvFilters::Packed(g) => {
                !p.is_depthwise() && !winograd::suits(&p) && g.len() == p.groups
            }
            ConvFilters::Winograd(f) => f.fits(&p),
        };
        if !fits {
            return Err(KernelError::new(
                "conv2d: the prepared filters belong to another convolution",
            ));
        }
        let path = if p.is_depthwise() {
            Path::Depthwise
        } else if winograd::suits(&p) {
            Path::Winograd
        } else {
            let pointwise = p.kernel_h == 1
                && p.kernel_w == 1
                && p.stride_h == 1
                && p.stride_w == 1
                && p.pad_top + p.pad_left + p.pad_bottom + p.pad_right == 0;
            let krows = if pointwise {
                Vec::new()
            } else {
                im2col_rows(&p)
            };
            // Stride-1 padded convolutions read a zero-padded copy of the input, so that every
            // im2col row segment is one contiguous copy (no border split per segment). Only
            // when the copy stays near the input's size: pads far wider than the kernel (with a
            // large vertical stride the output stays small) would make it arbitrarily large.
            let padded_plane = (p
                .in_h
                .saturating_add(p.pad_top)
                .saturating_add(p.pad_bottom))
            .saturating_mul(
                p.in_w
                    .saturating_add(p.pad_left)
                    .saturating_add(p.pad_right),
            );
            let padded = (!pointwise
                && p.stride_w == 1
                && p.in_h > 0
                && p.in_w > 0
                && p.pad_top + p.pad_left + p.pad_bottom + p.pad_right > 0
                && padded_plane <= 4 * (p.in_h * p.in_w).max(1024))
            .then(|| {
                let pp = Conv2dParams {
                    in_h: p.in_h + p.pad_top + p.pad_bottom,
                    in_w: p.in_w + p.pad_left + p.pad_right,
                    pad_top: 0,
                    pad_left: 0,
                    pad_bottom: 0,
                    pad_right: 0,
                    ..p
                };
                let rows = im2col_rows(&pp);
                Box::new((pp, rows))
            });
            Path::Gemm {
                pointwise,
                krows,
                padded,
            }
        };
        Ok(Conv2d {
            p,
            isa,
            bias: bias.map(<[f32]>::to_vec),
            filters,
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
        self.run_with_residual(input, output, None, activation);
    }

    /// Runs the convolution with a residual added before the activation:
    /// `output = act(conv(input) + bias + residual)`, `residual` (when given) of the output's
    /// length and layout. The GEMM path adds it in the micro-kernel's registers; the others in
    /// a pass over the output.
    pub fn run_with_residual(
        &self,
        input: &[f32],
        output: &mut [f32],
        residual: Option<&[f32]>,
        activation: Activation,
    ) {
        let p = &self.p;
        assert_eq!(input.len(), p.input_len(), "conv2d: input length");
        assert_eq!(output.len(), p.output_len(), "conv2d: output length");
        assert!(
            residual.is_none_or(|z| z.len() == output.len()),
            "conv2d: residual length"
        );
        if output.is_empty() {
            return;
        }
        // The paths without a fused residual compute `conv + bias`, then add it in one pass.
        let late = |out: &mut [f32], z: &[f32]| {
            simd::vectorize(
                self.isa,
                #[inline(always)]
                || {
                    out.iter_mut().zip(z).for_each(|(o, &v)| *o += v);
                    activation.apply_inline(out);
                },
            )
        };
        let early = if residual.is_some() {
            Activation::None
        } else {
            activation
        };
        match (&self.path, &*self.filters) {
            (Path::Depthwise, ConvFilters::Depthwise(w)) => {
                self.run_depthwise(w, input, output, early);
                if let Some(z) = residual {
                    late(output, z);
                }
            }
            (Path::Winograd, ConvFilters::Winograd(f)) => {
                winograd::run(self.isa, p, f, self.bias.as_deref(), early, input, output);
                if let Some(z) = residual {
                    late(output, z);
                }
            }
            (
                Path::Gemm {
                    pointwise,
                    krows,
                    padded,
                },
                ConvFilters::Packed(weights),
            ) => {
                let padded = padded.as_deref().map(|(pp, rows)| (pp, &rows[..]));
                self.run_gemm(
                    weights, *pointwise, krows, padded, input, output, residual, activation,
                )
            }
            _ => unreachable!("with_filters checks that the filters fit the path"),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn run_gemm(
        &self,
        weights: &[PackedA],
        pointwise: bool,
        krows: &[KRow],
        padded: Option<(&Conv2dParams, &[KRow])>,
        input: &[f32],
        output: &mut [f32],
        residual: Option<&[f32]>,
        act: Activation,
    ) {
        let p = &self.p;
        let (oh, ow) = (p.out_h(), p.out_w());
        let pix = oh * ow;
        let ocg = p.out_channels / p.groups;
        let icg = p.in_channels / p.groups;
        let in_plane = p.in_h * p.in_w;
        let tasks = p.batch * p.groups;
        let threads = rayon::current_num_threads();
        let outer_par = threads > 1
            && tasks >= threads
            && (tasks.is_multiple_of(threads) || tasks >= 4 * threads);
        let one = |idx: usize, out: &mut [f32], inner_par: bool| {
            let (b, g) = (idx / p.groups, idx % p.groups);
            let x = &input[(b * p.in_channels + g * icg) * in_plane..][..icg * in_plane];
            let bias = self.bias.as_ref().map(|v| &v[g * ocg..(g + 1) * ocg]);
            let ep = Epilogue {
                bias: bias.map_or(Bias::None, Bias::PerRow),
                // The output piece of this image and group, in the same layout.
                residual: residual.map(|z| (&z[idx * ocg * pix..(idx + 1) * ocg * pix], pix)),
                activation: act,
            };
            if pointwise {
                let bm = MatRef::row_major(x, icg, pix);
                gemm::sgemm_packed_a_with(inner_par, 1.0, &weights[g], bm, 0.0, out, pix, &ep);
                return;
            }
            if let Some((pp, prows)) = padded {
                let buf = pad_planes(p, pp, x, icg);
                let src = Im2col {
                    p: pp,
                    x: &buf,
                    krows: prows,
                    pix,
                };
                gemm::sgemm_packed_a_src(inner_par, 1.0, &weights[g], &src, 0.0, out, pix, &ep);
                return;
            }
            let src = Im2col { p, x, krows, pix };
            gemm::sgemm_packed_a_src(inner_par, 1.0, &weights[g], &src, 0.0, out, pix, &ep);
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
        let out_len = p.out_h() * p.out_w();
        let channels = p.in_channels;
        if output.is_empty() || channels == 0 {
            return;
        }
        let (in_len, khw) = (p.in_h * p.in_w, p.kernel_h * p.kernel_w);
        let isa = self.isa;
        let threads = rayon::current_num_threads();
        let par = threads > 1 && output.len() * khw >= 1 << 16;
        // Channels per call of the plane kernel: an image's all on one thread; in parallel
        // about four chunks per thread over the batch.
        let chunk = if par {
            channels.div_ceil((4 * threads).div_ceil(p.batch)).max(1)
        } else {
            channels
        };
        let image = |(n, out): (usize, &mut [f32])| {
            let run = |(q, o): (usize, &mut [f32])| {
                let c0 = q * chunk;
                let count = o.len() / out_len;
                let x = &input[(n * channels + c0) * in_len..][..count * in_len];
                let wc = &w[c0 * khw..(c0 + count) * khw];
                let b = self.bias.as_ref().map(|v| &v[c0..c0 + count]);
                depthwise::planes(isa, p, count, x, wc, b, act, o);
            };
            if par {
                out.par_chunks_mut(chunk * out_len)
                    .enumerate()
                    .for_each(run);
            } else {
                out.chunks_mut(chunk * out_len).enumerate().for_each(run);
            }
        };
        if par {
            output
                .par_chunks_mut(channels * out_len)
                .enumerate()
                .for_each(image);
        } else {
            output
                .chunks_mut(channels * out_len)
                .enumerate()
                .for_each(image);
        }
    }
}

/// Addressing of every im2col row `(c, ky, kx)` of one image/group.
fn im2col_rows(p: &Conv2dParams) -> Vec<KRow> {
    let k = (p.in_channels / p.groups) * p.kernel_h * p.kernel_w;
    let ow = p.out_w();
    (0..k)
        .map(|r| {
            let (c, ky, kx) = (
                r / (p.kernel_h * p.kernel_w),
                (r / p.kernel_w) % p.kernel_h,
                r % p.kernel_w,
            );
            let kd = kx * p.dilation_w;
            let (lo, hi) = valid_range(ow, p.in_w, p.stride_w, kd, p.pad_left);
            KRow {
                plane: c * p.in_h * p.in_w,
                ky_off: ky * p.dilation_h,
                kd,
                lo,
                hi,
            }
        })
        .collect()
}

/// Copies the `planes` input planes of `x` (geometry `p`) into zero-padded planes of the
/// geometry `pp` (`p` with its pads folded into the plane size).
fn pad_planes(p: &Conv2dParams, pp: &Conv2dParams, x: &[f32], planes: usize) -> Vec<f32> {
    let (ph, pw) = (pp.in_h, pp.in_w);
    let mut buf = vec![0.0f32; planes * ph * pw];
    for (dst, src) in buf
        .chunks_exact_mut(ph * pw)
        .zip(x.chunks_exact(p.in_h * p.in_w))
    {
        for (drow, srow) in dst[p.pad_top * pw..]
            .chunks_exact_mut(pw)
            .zip(src.chunks_exact(p.in_w))
        {
            drow[p.pad_left..p.pad_left + p.in_w].copy_from_slice(srow);
        }
    }
    buf
}

/// Output columns `ox` whose input column `ox*s + k*d - pad` lies in `0..len`: the range `lo..hi`.
#[inline(always)]
pub(super) fn valid_range(
    out_len: usize,
    len: usize,
    s: usize,
    kd: usize,
    pad: usize,
) -> (usize, usize) {
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

/// The implicit im2col matrix of one image/group (`k = icg·kh·kw` rows × `pix` columns),
/// packed straight into GEMM B panels without materialising the column matrix.
struct Im2col<'a> {
    p: &'a Conv2dParams,
    /// The `icg` input planes of the image/group.
    x: &'a [f32],
    /// Addressing of every row.
    krows: &'a [KRow],
    pix: usize,
}

impl PanelSource for Im2col<'_> {
    fn rows(&self) -> usize {
        self.krows.len()
    }

    fn cols(&self) -> usize {
        self.pix
    }

    fn fill_panel(&self, k0: usize, kc: usize, j0: usize, cols: usize, nr: usize, dst: &mut [f32]) {
        let p = self.p;
        let ow = p.out_w();
        debug_assert!(cols <= nr && nr <= MAX_NR);
        // Split the pixels j0..j0+cols into runs within one output row:
        // (first input row without ky, ox0, len, offset in the panel row).
        let mut segs = [(0isize, 0usize, 0usize, 0usize); MAX_NR];
        let mut n_segs = 0;
        let mut d = 0;
        while d < cols && n_segs < MAX_NR {
            let pix = j0 + d;
            let (oy, ox0) = (pix / ow, pix % ow);
            let run = (ow - ox0).min(cols - d);
            segs[n_segs] = ((oy * p.stride_h) as isize - p.pad_top as isize, ox0, run, d);
            n_segs += 1;
            d += run;
        }
        let segs = &segs[..n_segs];
        for (kr, drow) in self.krows[k0..k0 + kc].iter().zip(dst.chunks_exact_mut(nr)) {
            let plane = &self.x[kr.plane..kr.plane + p.in_h * p.in_w];
            for &(iy0, ox0, run, off) in segs {
                let seg = &mut drow[off..off + run];
                let iy = iy0 + kr.ky_off as isize;
                if iy < 0 || iy >= p.in_h as isize {
                    zero_short(seg);
                    continue;
                }
                let irow = &plane[iy as usize * p.in_w..(iy as usize + 1) * p.in_w];
                if p.stride_w == 1 && kr.lo <= ox0 && ox0 + run <= kr.hi {
                    // Interior: one contiguous copy (the common case).
                    let start = ox0 + kr.kd - p.pad_left;
                    let src = &irow[start..start + run];
                    match (
                        <&mut [f32; MAX_NR]>::try_from(&mut *seg),
                        <&[f32; MAX_NR]>::try_from(src),
                    ) {
                        // Fixed size: compiled to a few vector moves.
                        (Ok(d), Ok(s)) => *d = *s,
                        _ => copy_short(seg, src),
                    }
                    continue;
                }
                let (a, b) = (kr.lo.clamp(ox0, ox0 + run), kr.hi.clamp(ox0, ox0 + run));
                let (head, rest) = seg.split_at_mut(a - ox0);
                let (mid, tail) = rest.split_at_mut(b - a);
                zero_short(head);
                zero_short(tail);
                if a < b {
                    let start = a * p.stride_w + kr.kd - p.pad_left;
                    if p.stride_w == 1 {
                        copy_short(mid, &irow[start..start + (b - a)]);
                    } else if p.stride_w == 2 {
                        // Exact-length source: no bounds checks in the loop.
                        let src = &irow[start..start + 2 * (b - a) - 1];
                        for (i, o) in mid.iter_mut().enumerate() {
                            *o = src[2 * i];
                        }
                    } else {
                        for (o, &v) in mid.iter_mut().zip(irow[start..].iter().step_by(p.stride_w))
                        {
                            *o = v;
                        }
                    }
                }
            }
        }
    }
}

/// Copies a short slice (≤ a few dozen floats) without a `memcpy` call: 8-wide blocks, then
/// 4/2/1 steps (`dst.len() == src.len()`).
#[inline(always)]
fn copy_short(dst: &mut [f32], src: &[f32]) {
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (dc, sc) in (&mut d).zip(&mut s) {
        let block: [f32; 8] = [sc[0], sc[1], sc[2], sc[3], sc[4], sc[5], sc[6], sc[7]];
        dc.copy_from_slice(&block);
    }
    let (mut d, mut s) = (d.into_remainder(), s.remainder());
    if d.len() >= 4 {
        d[..4].copy_from_slice(&[s[0], s[1], s[2], s[3]]);
        (d, s) = (&mut d[4..], &s[4..]);
    }
    if d.len() >= 2 {
        d[..2].copy_from_slice(&[s[0], s[1]]);
        (d, s) = (&mut d[2..], &s[2..]);
    }
    if let (Some(x), Some(&y)) = (d.first_mut(), s.first()) {
        *x = y;
    }
}

/// Zeroes a short slice without a `memset` call.
#[inline(always)]
fn zero_short(dst: &mut [f32]) {
    let mut d = dst.chunks_exact_mut(8);
    for dc in &mut d {
        dc.copy_from_slice(&[0.0; 8]);
    }
    for x in d.into_remainder() {
        *x = 0.0;
    }
}

#[cfg(test)]
mod tests;
