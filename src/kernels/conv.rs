//! 2-D convolution, NCHW, fp32, with fused bias and activation.
//!
//! Paths chosen once in [`Conv2d::new`]:
//! - **pointwise** (1×1, stride 1, no padding): the input plane block is already the B matrix,
//!   `out[g] = W[g] · X[g]`, one GEMM per image and group with prepacked weights; a 1×1
//!   convolution with a stride and no padding first copies the input sampled at the stride;
//! - **depthwise** (`groups == in_c == out_c`): one plane per channel, in parallel, by the loops
//!   of the `depthwise` module (an AVX-512 plane kernel, or loops vectorised along output
//!   rows);
//! - **general**: implicit im2col: a GEMM with the prepacked weights as A
//!   (`out[oc, pixels] = W[oc, k] · cols[k, pixels]`) whose B panels are gathered straight from
//!   the input while packing, so the column matrix is never materialised (memory stays bounded
//!   by the GEMM's `KC×NC` packing buffer). With pads or a horizontal stride, the panels are
//!   gathered from a staged copy of the input: zero-padded, and with its rows split into the
//!   stride's phases (even columns, then odd ones, for stride 2), so that every row segment of
//!   a panel is one contiguous copy.
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
    /// GEMM per group with prepacked weights; B is made as [`GemmInput`] says.
    Gemm(GemmInput),
}

/// Where the GEMM path's B matrix (`k × pixels` per image and group) comes from.
#[derive(Clone, Debug)]
enum GemmInput {
    /// 1×1, stride 1, no pads: the input planes are B as they are.
    Pointwise,
    /// 1×1 with a stride and no pads: B is a copy of the input sampled at the stride.
    Subsampled,
    /// Implicit im2col straight from the input, through these rows.
    Im2col(Vec<KRow>),
    /// Implicit im2col from a staged copy of the input (see [`Staged`]).
    Staged(Box<Staged>),
}

/// A staged input copy for the implicit im2col: each plane zero-padded, and each padded row
/// split into the horizontal stride's phases (`s` runs: the padded columns `≡ q (mod s)` in
/// order, for `q = 0..s`), so that consecutive output columns read consecutive elements.
#[derive(Clone, Debug)]
struct Staged {
    /// The convolution with its pads folded into the plane size (rows `in_w` long).
    geometry: Conv2dParams,
    /// Its im2col rows, addressing the phase-split rows.
    rows: Vec<KRow>,
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
    /// Where output column 0 reads in its input row when consecutive output columns read
    /// consecutive elements (stride 1, or a phase-split staged row); valid for `lo..hi`.
    src0: isize,
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
            Path::Gemm(gemm_input(&p))
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
            (Path::Gemm(how), ConvFilters::Packed(weights)) => {
                self.run_gemm(weights, how, input, output, residual, activation)
            }
            _ => unreachable!("with_filters checks that the filters fit the path"),
        }
    }

    fn run_gemm(
        &self,
        weights: &[PackedA],
        how: &GemmInput,
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
            let w = &weights[g];
            match how {
                GemmInput::Pointwise => {
                    let bm = MatRef::row_major(x, icg, pix);
                    gemm::sgemm_packed_a_with(inner_par, 1.0, w, bm, 0.0, out, pix, &ep);
                }
                GemmInput::Subsampled => {
                    let buf = subsample_planes(p, x, inner_par);
                    let bm = MatRef::row_major(&buf, icg, pix);
                    gemm::sgemm_packed_a_with(inner_par, 1.0, w, bm, 0.0, out, pix, &ep);
                }
                GemmInput::Im2col(krows) => {
                    let src = Im2col {
                        p,
                        x,
                        krows,
                        pix,
                        unit: p.stride_w == 1,
                    };
                    gemm::sgemm_packed_a_src(inner_par, 1.0, w, &src, 0.0, out, pix, &ep);
                }
                GemmInput::Staged(staged) => {
                    // The stride-1 padded copy is short next to its GEMM: serial.
                    let par = inner_par && staged.geometry.stride_w > 1;
                    let buf = stage_planes(self.isa, p, &staged.geometry, x, par);
                    let src = Im2col {
                        p: &staged.geometry,
                        x: &buf,
                        krows: &staged.rows,
                        pix,
                        unit: true,
                    };
                    gemm::sgemm_packed_a_src(inner_par, 1.0, w, &src, 0.0, out, pix, &ep);
                }
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
                src0: kd as isize - p.pad_left as isize,
                lo,
                hi,
            }
        })
        .collect()
}

/// How the GEMM path reads the input of `p` (not depthwise, not Winograd).
fn gemm_input(p: &Conv2dParams) -> GemmInput {
    let one_by_one = p.kernel_h == 1 && p.kernel_w == 1;
    let pads = p.pad_top + p.pad_left + p.pad_bottom + p.pad_right;
    if one_by_one && pads == 0 {
        return if p.stride_h == 1 && p.stride_w == 1 {
            GemmInput::Pointwise
        } else {
            GemmInput::Subsampled
        };
    }
    // A staged copy turns every im2col row segment into one contiguous copy (no border split
    // per segment, no strided gather). With a horizontal stride only for few input channels
    // (a network's first layer), where the gather is a large share of the work: ResNet-50's
    // 7×7 stride-2 stem went from 3.8 to 2.7 ms at 1 thread, while its stride-2 3×3 layers
    // did not change at 1 thread and the model leaned slower at 2. Only when the copy stays
    // near the input's size: pads far wider than the kernel (with a large vertical stride the
    // output stays small) would make it arbitrarily large.
    let staged_plane = (p
        .in_h
        .saturating_add(p.pad_top)
        .saturating_add(p.pad_bottom))
    .saturating_mul(
        p.in_w
            .saturating_add(p.pad_left)
            .saturating_add(p.pad_right),
    );
    if p.in_h > 0
        && p.in_w > 0
        && ((pads > 0 && p.stride_w == 1) || (p.stride_w > 1 && p.in_channels / p.groups <= 4))
        && staged_plane <= 4 * (p.in_h * p.in_w).max(1024)
    {
        let geometry = Conv2dParams {
            in_h: p.in_h + p.pad_top + p.pad_bottom,
            in_w: p.in_w + p.pad_left + p.pad_right,
            pad_top: 0,
            pad_left: 0,
            pad_bottom: 0,
            pad_right: 0,
            ..*p
        };
        let (w, s) = (geometry.in_w, geometry.stride_w);
        let mut rows = im2col_rows(&geometry);
        for r in &mut rows {
            r.src0 = (phase_start(w, s, r.kd % s) + r.kd / s) as isize;
        }
        return GemmInput::Staged(Box::new(Staged { geometry, rows }));
    }
    GemmInput::Im2col(im2col_rows(p))
}

/// Where phase `q` starts in a row of `w` elements split into the phases of stride `s`: the
/// sizes of phases `0..q`, phase `r` holding columns `r, r + s, …` below `w`.
fn phase_start(w: usize, s: usize, q: usize) -> usize {
    (0..q).map(|r| w.saturating_sub(r).div_ceil(s)).sum()
}

/// Copies the `icg` input planes of `x` (geometry `p`) into the staged layout of `g` (`p` with
/// its pads folded into the plane size): zero-padded, each row split into the phases of the
/// horizontal stride. In parallel over planes when `par`; the loops compiled for `isa`.
fn stage_planes(isa: Isa, p: &Conv2dParams, g: &Conv2dParams, x: &[f32], par: bool) -> Vec<f32> {
    let (in_plane, plane) = (p.in_h * p.in_w, g.in_h * g.in_w);
    let planes = x.len() / in_plane;
    let mut buf = vec![0.0f32; planes * plane];
    let (w, s) = (g.in_w, g.stride_w);
    // Per phase: the first input column it holds, and where that lands in the row.
    let phases: Vec<(usize, usize)> = (0..s)
        .filter_map(|q| {
            // The first padded column `c ≥ pad_left` with `c ≡ q (mod s)`.
            let c = p.pad_left + (q + s - p.pad_left % s) % s;
            (c < p.pad_left + p.in_w).then(|| (c - p.pad_left, phase_start(w, s, q) + c / s))
        })
        .collect();
    // Stride 2: where phase 1 starts in a row.
    let split = phase_start(w, s, 1);
    let one = |(dst, src): (&mut [f32], &[f32])| {
        simd::vectorize(
            isa,
            #[inline(always)]
            || {
                for (drow, srow) in dst[p.pad_top * w..]
                    .chunks_exact_mut(w)
                    .zip(src.chunks_exact(p.in_w))
                {
                    match (s, &phases[..]) {
                        (1, _) => drow[p.pad_left..p.pad_left + p.in_w].copy_from_slice(srow),
                        (2, &[(f0, at0), (f1, at1)]) => {
                            // Input columns alternate between the two phases: pairs, the
                            // first of each to the phase holding the row's first column.
                            let (p0, p1) = drow.split_at_mut(split);
                            let (d0, d1) = (&mut p0[at0..], &mut p1[at1 - split..]);
                            let (lead, lag, first) =
                                if f0 < f1 { (d0, d1, f0) } else { (d1, d0, f1) };
                            let pairs = srow[first..].chunks_exact(2);
                            let (n, rest) = (pairs.len(), pairs.remainder());
                            for ((pair, a), b) in pairs.zip(lead.iter_mut()).zip(lag.iter_mut()) {
                                *a = pair[0];
                                *b = pair[1];
                            }
                            if let &[v] = rest {
                                lead[n] = v;
                            }
                        }
                        _ => {
                            for &(first, at) in &phases {
                                let from = srow[first..].iter().step_by(s);
                                for (d, &v) in drow[at..].iter_mut().zip(from) {
                                    *d = v;
                                }
                            }
                        }
                    }
                }
            },
        )
    };
    if par && buf.len() >= 1 << 15 {
        buf.par_chunks_exact_mut(plane)
            .zip(x.par_chunks_exact(in_plane))
            .for_each(one);
    } else {
        buf.chunks_exact_mut(plane)
            .zip(x.chunks_exact(in_plane))
            .for_each(one);
    }
    buf
}

/// The input planes of `x` (geometry `p`, a 1×1 kernel without pads) sampled at the strides:
/// `icg` planes of `out_h × out_w`. In parallel over planes when `par`.
fn subsample_planes(p: &Conv2dParams, x: &[f32], par: bool) -> Vec<f32> {
    let (in_plane, oh, ow) = (p.in_h * p.in_w, p.out_h(), p.out_w());
    let mut buf = vec![0.0f32; x.len() / in_plane * oh * ow];
    let one = |(dst, src): (&mut [f32], &[f32])| {
        for (oy, drow) in dst.chunks_exact_mut(ow).enumerate() {
            let srow = &src[oy * p.stride_h * p.in_w..][..p.in_w];
            for (d, &v) in drow.iter_mut().zip(srow.iter().step_by(p.stride_w)) {
                *d = v;
            }
        }
    };
    if par && buf.len() >= 1 << 15 {
        buf.par_chunks_exact_mut(oh * ow)
            .zip(x.par_chunks_exact(in_plane))
            .for_each(one);
    } else {
        buf.chunks_exact_mut(oh * ow)
            .zip(x.chunks_exact(in_plane))
            .for_each(one);
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
    /// Whether consecutive output columns read consecutive elements of an input row (stride
    /// 1, or phase-split staged rows): row segments are then copies from `KRow::src0` on.
    unit: bool,
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
                if self.unit && kr.lo <= ox0 && ox0 + run <= kr.hi {
                    // Interior: one contiguous copy (the common case). `src0 + ox ≥ 0` for
                    // `ox` in `lo..hi`.
                    let start = (ox0 as isize + kr.src0) as usize;
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
                if a < b && self.unit {
                    let start = (a as isize + kr.src0) as usize;
                    copy_short(mid, &irow[start..start + (b - a)]);
                } else if a < b {
                    let start = a * p.stride_w + kr.kd - p.pad_left;
                    if p.stride_w == 2 {
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
