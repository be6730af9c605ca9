//! Channel-blocked tensors (`NCHW16c`: `[N, C/16, H, W, 16]`, the 16 channels of a block
//! side by side at each position) and the direct convolution on them.
//!
//! Why: a 1×1 convolution over NCHW is a GEMM whose B (the input) has its rows a plane apart,
//! and ResNet-50's 1×1 layers ran at 113–146 GFLOP/s that way on one core of a Xeon with a
//! peak of 227. On the blocked layout each position's channels lie in one cache line, every
//! input block streams contiguously, and the filters are the vector operand: a strip of six
//! positions times 64 output channels (24 accumulators) takes four weight loads and six
//! broadcasts per input channel and kernel tap. A stand-alone C loop of that strip ran those
//! layers at 186–196 GFLOP/s. The graph rewrite (`exec::fuse::nchwc`) keeps chains of such
//! convolutions in this layout, reordering only at the chain's edges.
//!
//! The convolution walks the input channels in passes (8 blocks of a 1×1 kernel, one of a
//! 3×3: the pass's filters, 32–36 KiB, stay in L1 while the strips stream the input), each
//! pass adding into the output strip by strip while the next pass's filters are prefetched
//! into L2; in parallel, tasks split the groups of 64 output channels and then the positions.
//! A padded convolution first copies each image into a zero-bordered buffer.
#![forbid(unsafe_code)]

use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};

use super::activation::Activation;
use super::aligned::AlignedVec;
use super::cpu::Isa;
use super::simd::{self, strip_len, StripRun, GROUP_BLOCKS};
use super::{scratch, KernelError};

/// Channels per block.
pub const BLOCK: usize = 16;
/// Input blocks per pass of a 1×1 convolution (128 channels; a kernel of `t` taps takes
/// `8 / t` blocks, at least one).
const PASS_BLOCKS: usize = 8;
/// Fewest output positions of a parallel task that splits a group's positions: each task
/// reads all of the group's filters, which a few strips would not amortise.
const TASK_MIN_POSITIONS: usize = 48;
/// Fewest floats a reorder splits into parallel pieces.
const PAR_MIN: usize = 1 << 15;

/// Whether a tensor of `channels` channels can be blocked.
pub fn blockable(channels: usize) -> bool {
    channels > 0 && channels.is_multiple_of(BLOCK)
}

/// Reorders `x` (`[n, c, plane]`, NCHW with `plane = H·W`) into `out` (`[n, c/16, plane,
/// 16]`).
pub fn to_blocked(
    isa: Isa,
    x: &[f32],
    (n, c, plane): (usize, usize, usize),
    out: &mut [f32],
) -> Result<(), KernelError> {
    reorder(isa, x, (n, c, plane), out, true)
}

/// Reorders `x` (`[n, c/16, plane, 16]`) into `out` (`[n, c, plane]`, NCHW).
pub fn to_plain(
    isa: Isa,
    x: &[f32],
    (n, c, plane): (usize, usize, usize),
    out: &mut [f32],
) -> Result<(), KernelError> {
    reorder(isa, x, (n, c, plane), out, false)
}

fn reorder(
    isa: Isa,
    x: &[f32],
    (n, c, plane): (usize, usize, usize),
    out: &mut [f32],
    blocking: bool,
) -> Result<(), KernelError> {
    let len = n.checked_mul(c).and_then(|v| v.checked_mul(plane));
    if !blockable(c) || len != Some(x.len()) || x.len() != out.len() {
        return Err(KernelError::new(format!(
            "cannot reorder {} floats as {n} images of {c} channels of {plane} positions into {}",
            x.len(),
            out.len()
        )));
    }
    if x.is_empty() {
        return Ok(());
    }
    let piece = BLOCK * plane;
    let one = |(src, dst): (&[f32], &mut [f32])| {
        if simd::reorder_block(isa, src, dst, plane, blocking) {
            return;
        }
        simd::vectorize(
            isa,
            #[inline(always)]
            || {
                if blocking {
                    for (p, d) in dst.chunks_exact_mut(BLOCK).enumerate() {
                        for (l, d) in d.iter_mut().enumerate() {
                            *d = src[l * plane + p];
                        }
                    }
                } else {
                    for (l, d) in dst.chunks_exact_mut(plane).enumerate() {
                        for (p, d) in d.iter_mut().enumerate() {
                            *d = src[p * BLOCK + l];
                        }
                    }
                }
            },
        )
    };
    if rayon::current_num_threads() > 1 && x.len() >= PAR_MIN {
        x.par_chunks(piece)
            .zip(out.par_chunks_mut(piece))
            .for_each(one);
    } else {
        x.chunks(piece).zip(out.chunks_mut(piece)).for_each(one);
    }
    Ok(())
}

/// Most kernel taps of a blocked convolution (7×7).
pub const MAX_TAPS: usize = 49;

/// The window of a blocked convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Kernel height and width.
    pub kernel: (usize, usize),
    /// Vertical and horizontal stride (≥ 1).
    pub stride: (usize, usize),
    /// Zero rows above, columns on the left, rows below, columns on the right.
    pub pads: [usize; 4],
    /// Vertical and horizontal dilation (≥ 1).
    pub dilation: (usize, usize),
}

impl Window {
    /// A 1×1 window without padding.
    pub fn pointwise(stride: (usize, usize)) -> Self {
        Window {
            kernel: (1, 1),
            stride,
            pads: [0; 4],
            dilation: (1, 1),
        }
    }

    fn taps(&self) -> usize {
        self.kernel.0 * self.kernel.1
    }

    /// The padded input's height and width and the output's, for an input of `h×w`; `None`
    /// when the dilated kernel does not fit the padded input.
    fn sizes(&self, (h, w): (usize, usize)) -> Option<((usize, usize), (usize, usize))> {
        let hp = h.checked_add(self.pads[0])?.checked_add(self.pads[2])?;
        let wp = w.checked_add(self.pads[1])?.checked_add(self.pads[3])?;
        let kh = self.dilation.0.checked_mul(self.kernel.0 - 1)? + 1;
        let kw = self.dilation.1.checked_mul(self.kernel.1 - 1)? + 1;
        let oh = hp.checked_sub(kh)? / self.stride.0 + 1;
        let ow = wp.checked_sub(kw)? / self.stride.1 + 1;
        Some(((hp, wp), (oh, ow)))
    }
}

/// A 2-D convolution of one group on blocked tensors, its filters packed once: `out =
/// act(conv(x, W) + b + z)` with an optional residual `z` of the output's shape. The padding
/// is staged: each image is copied into a zero-bordered buffer first (none without pads).
#[derive(Clone, Debug)]
pub struct BlockedConv {
    in_channels: usize,
    out_channels: usize,
    window: Window,
    /// `[group][in block][tap][16 channels][64]`: 64 output channels per group, zero past the
    /// last one.
    weights: AlignedVec,
    /// `[group][64]`, zero past the last channel.
    bias: Vec<f32>,
}

impl BlockedConv {
    /// Packs `weights` (OIHW, `out_channels × in_channels × kh × kw`) and `bias`; both channel
    /// counts must be multiples of [`BLOCK`], the strides and dilations positive, the kernel
    /// at most [`MAX_TAPS`] taps.
    pub fn new(
        in_channels: usize,
        out_channels: usize,
        window: Window,
        weights: &[f32],
        bias: Option<&[f32]>,
    ) -> Result<Self, KernelError> {
        let taps = window.taps();
        let (s, d) = (window.stride, window.dilation);
        if !blockable(in_channels)
            || !blockable(out_channels)
            || !(1..=MAX_TAPS).contains(&taps)
            || s.0 == 0
            || s.1 == 0
            || d.0 == 0
            || d.1 == 0
            || in_channels
                .checked_mul(out_channels)
                .and_then(|v| v.checked_mul(taps))
                != Some(weights.len())
            || bias.is_some_and(|b| b.len() != out_channels)
        {
            return Err(KernelError::new(format!(
                "no blocked convolution from {in_channels} to {out_channels} channels over \
                 {window:?} with {} weights and {:?} biases",
                weights.len(),
                bias.map(<[f32]>::len)
            )));
        }
        let width = 16 * GROUP_BLOCKS;
        let groups = out_channels.div_ceil(width);
        let blocks = in_channels / BLOCK;
        let mut packed = AlignedVec::zeroed(groups * in_channels * taps * width);
        let mut packed_bias = vec![0.0; groups * width];
        for (o, filter) in weights.chunks_exact(in_channels * taps).enumerate() {
            let (g, lane) = (o / width, o % width);
            for (c, channel) in filter.chunks_exact(taps).enumerate() {
                let (cb, k) = (c / BLOCK, c % BLOCK);
                for (t, &v) in channel.iter().enumerate() {
                    packed[((g * blocks + cb) * taps + t) * 1024 + k * width + lane] = v;
                }
            }
            packed_bias[o] = bias.map_or(0.0, |b| b[o]);
        }
        Ok(BlockedConv {
            in_channels,
            out_channels,
            window,
            weights: packed,
            bias: packed_bias,
        })
    }

    /// Output channels.
    pub fn out_channels(&self) -> usize {
        self.out_channels
    }

    /// Input channels.
    pub fn in_channels(&self) -> usize {
        self.in_channels
    }

    /// The output's height and width for an input of `h×w`; `None` when the kernel does not
    /// fit the padded input.
    pub fn out_hw(&self, hw: (usize, usize)) -> Option<(usize, usize)> {
        self.window.sizes(hw).map(|(_, o)| o)
    }

    /// Computes `out` (`[batch, out/16, oh, ow, 16]`) from `x` (`[batch, in/16, h, w, 16]`)
    /// and the residual `z` (the output's shape), on rayon's current pool.
    pub fn run(
        &self,
        isa: Isa,
        x: &[f32],
        (batch, h, w): (usize, usize, usize),
        z: Option<&[f32]>,
        out: &mut [f32],
        act: Activation,
    ) -> Result<(), KernelError> {
        let sizes = self.window.sizes((h, w));
        let in_len = [batch, self.in_channels, h, w]
            .iter()
            .try_fold(1usize, |a, &v| a.checked_mul(v));
        let out_len = sizes.and_then(|(_, (oh, ow))| {
            [batch, self.out_channels, oh, ow]
                .iter()
                .try_fold(1usize, |a, &v| a.checked_mul(v))
        });
        let (Some(((hp, wp), (oh, ow))), true) = (
            sizes,
            in_len == Some(x.len())
                && out_len == Some(out.len())
                // The staged image, and with it every tap's offset, in range.
                && sizes.and_then(|((hp, wp), _)| {
                    self.in_channels.checked_mul(hp)?.checked_mul(wp)?.checked_mul(16)
                }).is_some()
                && z.is_none_or(|z| Some(z.len()) == out_len),
        ) else {
            return Err(KernelError::new(format!(
                "blocked convolution over {:?} of {batch} images of {}×{h}×{w}: {} input \
                 floats, {} output floats",
                self.window,
                self.in_channels,
                x.len(),
                out.len()
            )));
        };
        if out.is_empty() {
            return Ok(());
        }
        let (kh, kw) = self.window.kernel;
        let (dh, dw) = self.window.dilation;
        let mut taps = [0usize; MAX_TAPS];
        for (t, tap) in taps.iter_mut().enumerate().take(kh * kw) {
            *tap = 16 * ((t / kw) * dh * wp + (t % kw) * dw);
        }
        let geo = Geometry {
            refused: AtomicBool::new(false),
            isa,
            in_plane: hp * wp,
            w: wp,
            ow,
            out_plane: oh * ow,
            taps,
            tap_count: kh * kw,
            clamp: act.clamp_bounds(),
            act,
        };
        let image_in = self.in_channels * h * w;
        let image_out = self.out_channels * oh * ow;
        let group_out = 16 * GROUP_BLOCKS * geo.out_plane;
        let threads = rayon::current_num_threads();
        let parallel = threads > 1;
        // Tasks: the groups of an image (the images run one after another, each in its own
        // parallel region), each split into position ranges only when there are fewer than
        // about four groups a thread.
        let groups = self.out_channels.div_ceil(16 * GROUP_BLOCKS);
        let parts = if parallel {
            (4 * threads)
                .div_ceil(groups)
                .min(geo.out_plane / TASK_MIN_POSITIONS)
                .max(1)
        } else {
            1
        };
        let padded = self.window.pads != [0; 4];
        for n in 0..batch {
            let xi = &x[n * image_in..(n + 1) * image_in];
            let zi = z.map(|z| &z[n * image_out..(n + 1) * image_out]);
            let oi = &mut out[n * image_out..(n + 1) * image_out];
            let image = |xi: &[f32], oi: &mut [f32]| {
                let group = |(g, o): (usize, &mut [f32])| {
                    let zg = zi.map(|z| &z[g * group_out..(g * group_out + o.len())]);
                    self.group(&geo, g, xi, zg, o, parts);
                };
                if parallel {
                    oi.par_chunks_mut(group_out).enumerate().for_each(group);
                } else {
                    oi.chunks_mut(group_out).enumerate().for_each(group);
                }
            };
            if padded {
                let len = self.in_channels * hp * wp;
                scratch::with_f32(len, |staged| {
                    self.stage(xi, (h, w), staged, parallel);
                    image(staged, oi);
                });
            } else {
                image(xi, oi);
            }
        }
        if geo.refused.load(Ordering::Relaxed) {
            return Err(KernelError::new(format!(
                "blocked convolution over {:?}: a strip fell outside its tensors",
                self.window
            )));
        }
        Ok(())
    }

    /// Copies one blocked image `x` of `h×w` into `staged` (its blocks `hp×wp` with the
    /// window's zero borders).
    fn stage(&self, x: &[f32], (h, w): (usize, usize), staged: &mut [f32], parallel: bool) {
        let [top, left, _, _] = self.window.pads;
        let wp = w + left + self.window.pads[3];
        let hp = h + top + self.window.pads[2];
        if h * w == 0 {
            // An empty image: only zeros to read (chunks of an empty block would not split).
            staged.fill(0.0);
            return;
        }
        let one = |(src, dst): (&[f32], &mut [f32])| {
            for (y, row) in dst.chunks_exact_mut(16 * wp).enumerate() {
                match y.checked_sub(top).filter(|&iy| iy < h) {
                    None => row.fill(0.0),
                    Some(iy) => {
                        let (l, rest) = row.split_at_mut(16 * left);
                        let (mid, r) = rest.split_at_mut(16 * w);
                        l.fill(0.0);
                        mid.copy_from_slice(&src[16 * w * iy..16 * w * (iy + 1)]);
                        r.fill(0.0);
                    }
                }
            }
        };
        let (src_block, dst_block) = (16 * h * w, 16 * hp * wp);
        if parallel && staged.len() >= PAR_MIN {
            x.par_chunks(src_block)
                .zip(staged.par_chunks_mut(dst_block))
                .for_each(one);
        } else {
            x.chunks(src_block)
                .zip(staged.chunks_mut(dst_block))
                .for_each(one);
        }
    }

    /// Group `g` of 64 output channels of one image: `out` its blocks (one to four, each
    /// `out_plane · 16` floats), `z` the residual's; its positions in `parts` parallel tasks.
    fn group(
        &self,
        geo: &Geometry,
        g: usize,
        x: &[f32],
        z: Option<&[f32]>,
        out: &mut [f32],
        parts: usize,
    ) {
        let block = 16 * geo.out_plane;
        let nb = out.len() / block;
        let mut pieces: [&mut [f32]; GROUP_BLOCKS] = Default::default();
        let mut rest = out;
        for piece in pieces.iter_mut().take(nb) {
            let (a, b) = std::mem::take(&mut rest).split_at_mut(block);
            *piece = a;
            rest = b;
        }
        let zp: [&[f32]; GROUP_BLOCKS] = std::array::from_fn(|j| {
            z.filter(|_| j < nb)
                .map_or(&[][..], |z| &z[j * block..][..block])
        });
        let task = Task {
            conv: self,
            geo,
            g,
            x,
            blocks: nb,
            residual: z.is_some(),
        };
        task.range(pieces, zp, (0, geo.out_plane), parts);
    }
}

/// What every strip of a convolution's run shares: the (padded) input plane and width, the
/// output width and plane, the taps' offsets in the input.
struct Geometry {
    /// Set when the strip kernel refused a strip (its offsets outside the tensors), which
    /// would leave outputs unwritten: the run then fails.
    refused: AtomicBool,
    isa: Isa,
    in_plane: usize,
    w: usize,
    ow: usize,
    out_plane: usize,
    taps: [usize; MAX_TAPS],
    tap_count: usize,
    clamp: Option<(f32, f32)>,
    act: Activation,
}

/// One group's positions, split in parallel halves.
struct Task<'a> {
    conv: &'a BlockedConv,
    geo: &'a Geometry,
    g: usize,
    x: &'a [f32],
    blocks: usize,
    residual: bool,
}

impl Task<'_> {
    /// Positions `a..b` of the group: `out[j]` / `z[j]` hold them for block `j`. Split into
    /// `parts` near-equal ranges (whole strips) run on the pool.
    fn range(
        &self,
        mut out: [&mut [f32]; GROUP_BLOCKS],
        z: [&[f32]; GROUP_BLOCKS],
        (a, b): (usize, usize),
        parts: usize,
    ) {
        if parts > 1 {
            let left = parts / 2;
            let strip = strip_len(self.blocks);
            let mid = (a + ((b - a) * left / parts).div_ceil(strip) * strip).min(b);
            let at = 16 * (mid - a);
            let mut left_out: [&mut [f32]; GROUP_BLOCKS] = Default::default();
            let mut right_out: [&mut [f32]; GROUP_BLOCKS] = Default::default();
            for (j, o) in out.iter_mut().enumerate().take(self.blocks) {
                let (l, r) = std::mem::take(o).split_at_mut(at);
                left_out[j] = l;
                right_out[j] = r;
            }
            let zl = z.map(|z| if z.is_empty() { z } else { &z[..at] });
            let zr = z.map(|z| if z.is_empty() { z } else { &z[at..] });
            rayon::join(
                || self.range(left_out, zl, (a, mid), left),
                || self.range(right_out, zr, (mid, b), parts - left),
            );
            return;
        }
        if a < b {
            self.passes(&mut out, &z, (a, b));
        }
        if self.geo.clamp.is_none() && self.geo.act != Activation::None {
            for o in out.iter_mut().take(self.blocks) {
                self.geo.act.apply_isa(self.geo.isa, o);
            }
        }
    }

    /// Every pass over positions `a..b`, each over all of them (running the passes over
    /// chunks of 192 positions instead, so that the output stays in L2 between them, measured
    /// 3–7% slower: the pass's filters are loaded into L1 once per chunk).
    fn passes(
        &self,
        out: &mut [&mut [f32]; GROUP_BLOCKS],
        z: &[&[f32]; GROUP_BLOCKS],
        (a, b): (usize, usize),
    ) {
        let geo = self.geo;
        let conv = self.conv;
        let blocks_in = conv.in_channels / BLOCK;
        let width = 16 * GROUP_BLOCKS;
        let taps = &geo.taps[..geo.tap_count];
        // Floats of one input block's filters (all taps, 16 channels, 64 outputs).
        let per_block = taps.len() * 1024;
        let group_len = blocks_in * per_block;
        let wg = &conv.weights[self.g * group_len..][..group_len];
        let bias = &conv.bias[self.g * width..][..width];
        let z: &[&[f32]] = if self.residual {
            &z[..self.blocks]
        } else {
            &[]
        };
        let (sh, sw) = conv.window.stride;
        // Output row `r`, column `c` reads input position `r·sh·w + c·sw`.
        let (row_step, col_step) = (sh * geo.w, sw);
        // A pass's filters stay in L1: 8 blocks of a 1×1 kernel, one of a 3×3.
        let pass_blocks = (PASS_BLOCKS / taps.len()).max(1);
        let strips = (b - a).div_ceil(strip_len(self.blocks));
        let mut b0 = 0;
        while b0 < blocks_in {
            let nbi = pass_blocks.min(blocks_in - b0);
            let w = &wg[b0 * per_block..(b0 + nbi) * per_block];
            // The next pass's filters (or the next group's first), spread over this pass's
            // strips.
            let next_at = (self.g * group_len + (b0 + nbi) * per_block).min(conv.weights.len());
            let next = &conv.weights[next_at..];
            let next = &next[..next.len().min(pass_blocks * per_block)];
            let per_strip = next.len().div_ceil(strips).next_multiple_of(16);
            let run = StripRun {
                start: a,
                end: b,
                ow: geo.ow,
                row_step,
                col_step,
                x_base: b0 * 16 * geo.in_plane,
                x_block: 16 * geo.in_plane,
                blocks_in: nbi,
                blocks_out: self.blocks,
                first: b0 == 0,
                last: b0 + nbi == blocks_in,
            };
            let done = simd::conv_strips(
                geo.isa,
                &run,
                taps,
                self.x,
                (w, bias),
                (next, per_strip),
                z,
                &mut out[..self.blocks],
                geo.clamp,
            );
            if !done {
                geo.refused.store(true, Ordering::Relaxed);
            }
            b0 += nbi;
        }
    }
}

#[cfg(test)]
mod tests;
