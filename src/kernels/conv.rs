//! 2-D convolution, NCHW, fp32, with fused bias and activation.
//!
//! Paths chosen once in [`Conv2d::new`]:
//! - **pointwise** (1×1, stride 1, no padding): the input plane block is already the B matrix,
//!   `out[g] = W[g] · X[g]`, one GEMM per image and group with prepacked weights; a 1×1
//!   convolution with a stride and no padding first copies the input sampled at the stride;
//! - **depthwise** (`groups == in_c == out_c`): one plane per channel, in parallel, by the loops
//!   of the `depthwise` module (an AVX-512 plane kernel, or loops vectorised along output
//!   rows);
//! - **direct** (at most four input channels, one group, on AVX-512: a network's stem): each
//!   output row computed in place from the staged input rows (module `direct`);
//! - **general**: implicit im2col: a GEMM with the prepacked weights as A
//!   (`out[oc, pixels] = W[oc, k] · cols[k, pixels]`) whose B panels are gathered straight from
//!   the input while packing, so the column matrix is never materialised (memory stays bounded
//!   by the GEMM's `KC×NC` packing buffer). With pads or a horizontal stride, the panels are
//!   gathered from a staged copy of the input: zero-padded, and with its rows split into the
//!   stride's phases (even columns, then odd ones, for stride 2), so that every row segment of
//!   a panel is one contiguous copy.
//!
//! A 1×1 convolution and the depthwise one that reads its output can run together in bands of
//! rows ([`PointwiseDepthwise`], module `banded`).
//!
//! Work is parallel over images × groups when there are enough of them, otherwise inside the
//! GEMM (including its packing).
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::activation::Activation;
use super::cpu::{self, Isa};
use super::gemm::{self, Bias, Epilogue, MatRef, PackedA};
use super::winograd::{self, WinogradFilters};
use super::{depthwise, scratch, simd, KernelError};
use direct::{direct_input, DirectInput};
use im2col::{gemm_input, subsample_planes, subsampled_len, GemmInput, Im2col};
use std::sync::Arc;

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
    /// A 1×1 convolution with stride 1, no padding and one group, from `in_channels` to
    /// `out_channels` over `batch` images of `h×w`.
    pub fn pointwise(
        batch: usize,
        in_channels: usize,
        (h, w): (usize, usize),
        out_channels: usize,
    ) -> Self {
        Conv2dParams {
            batch,
            in_channels,
            in_h: h,
            in_w: w,
            out_channels,
            kernel_h: 1,
            kernel_w: 1,
            stride_h: 1,
            stride_w: 1,
            dilation_h: 1,
            dilation_w: 1,
            groups: 1,
            ..Default::default()
        }
    }

    /// The depthwise convolution over this convolution's output (its images, channels and
    /// size), with the given kernel, strides, pads `[top, left, bottom, right]` and dilations.
    pub fn depthwise_of_output(
        &self,
        kernel: (usize, usize),
        stride: (usize, usize),
        pads: [usize; 4],
        dilation: (usize, usize),
    ) -> Self {
        Conv2dParams {
            batch: self.batch,
            in_channels: self.out_channels,
            in_h: self.out_h(),
            in_w: self.out_w(),
            out_channels: self.out_channels,
            kernel_h: kernel.0,
            kernel_w: kernel.1,
            stride_h: stride.0,
            stride_w: stride.1,
            pad_top: pads[0],
            pad_left: pads[1],
            pad_bottom: pads[2],
            pad_right: pads[3],
            dilation_h: dilation.0,
            dilation_w: dilation.1,
            groups: self.out_channels,
        }
    }

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
    /// Filters laid out for the direct kernel (few input channels; `simd::direct_weights`).
    Direct(Vec<f32>),
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
        if let Some(r) = winograd::output_tile(p) {
            return Ok(ConvFilters::Winograd(WinogradFilters::prepare(
                isa,
                r,
                p.out_channels,
                p.in_channels,
                weights,
            )));
        }
        let ocg = p.out_channels / p.groups;
        let k = (p.in_channels / p.groups) * p.kernel_h * p.kernel_w;
        if direct_input(isa, p).is_some() {
            return Ok(ConvFilters::Direct(simd::direct_weights(
                p.out_channels,
                k,
                weights,
            )));
        }
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
    /// Output rows computed in place from the input's; the biases padded to whole blocks of
    /// `simd::DIRECT_OCB` channels.
    Direct(DirectInput, Vec<f32>),
    /// GEMM per group with prepacked weights; B is made as [`GemmInput`] says.
    Gemm(GemmInput),
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
        // Where the direct path would read (built once: it stages through `gemm_input`).
        let direct = direct_input(isa, &p);
        let fits = match &*filters {
            ConvFilters::Depthwise(w) => p.is_depthwise() && w.len() == p.weights_len(),
            ConvFilters::Packed(g) => {
                !p.is_depthwise() && !winograd::suits(&p) && direct.is_none() && g.len() == p.groups
            }
            ConvFilters::Direct(w) => {
                direct.is_some()
                    && w.len()
                        == p.out_channels.div_ceil(simd::DIRECT_OCB)
                            * simd::DIRECT_OCB
                            * (p.weights_len() / p.out_channels.max(1))
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
        } else if let Some(how) = direct {
            let mut padded =
                vec![0.0; p.out_channels.div_ceil(simd::DIRECT_OCB) * simd::DIRECT_OCB];
            if let Some(b) = bias {
                padded[..b.len()].copy_from_slice(b);
            }
            Path::Direct(how, padded)
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

    /// The packed weights of a convolution with one group on the GEMM path (a 1×1
    /// convolution's `[out_c, in_c]` matrix, packed as A); `None` on any other path.
    pub(super) fn single_packed(&self) -> Option<&PackedA> {
        match &*self.filters {
            ConvFilters::Packed(w) if w.len() == 1 => Some(&w[0]),
            _ => None,
        }
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
                let ep = (self.bias.as_deref(), early);
                winograd::run(self.isa, p, f, ep, winograd::Layout::Plain, input, output);
                if let Some(z) = residual {
                    late(output, z);
                }
            }
            (Path::Direct(how, bias), ConvFilters::Direct(w)) => {
                direct::run(self.isa, p, how, w, bias, early, input, output);
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
                GemmInput::Subsampled => scratch::with_f32(subsampled_len(p, x), |buf| {
                    subsample_planes(p, x, inner_par, buf);
                    let bm = MatRef::row_major(buf, icg, pix);
                    gemm::sgemm_packed_a_with(inner_par, 1.0, w, bm, 0.0, out, pix, &ep);
                }),
                GemmInput::Im2col(krows) => {
                    let src = Im2col::direct(p, x, krows, pix);
                    gemm::sgemm_packed_a_src(inner_par, 1.0, w, &src, 0.0, out, pix, &ep);
                }
                GemmInput::Staged(staged) => {
                    // The stride-1 padded copy is short next to its GEMM: serial.
                    let par = inner_par && p.stride_w > 1;
                    scratch::with_f32(staged.len(p, x), |buf| {
                        staged.stage(self.isa, p, x, par, buf);
                        let src = staged.panels(buf, pix);
                        gemm::sgemm_packed_a_src(inner_par, 1.0, w, &src, 0.0, out, pix, &ep);
                    });
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

mod banded;
mod direct;
mod im2col;
#[cfg(test)]
mod tests;

pub use banded::PointwiseDepthwise;

/// Whether convolution `p` runs on the direct path on `isa` (its filters then take that
/// path's layout, so plans of other image sizes may need other filters).
pub fn has_direct_path(isa: Isa, p: &Conv2dParams) -> bool {
    direct_input(isa, p).is_some()
}
