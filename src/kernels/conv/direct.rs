//! The direct path of a convolution with few input channels (a network's stem, reading an
//! image's colour planes): with `k = channels·kh·kw` of about 27, the GEMM path spent as much
//! time gathering and packing its B panels and storing its short tiles as in its
//! multiplications. Here each output row is computed in place from the (staged) input rows,
//! which stay in L1 while the kernel's four output channels read them (`simd::direct_rows`).
#![forbid(unsafe_code)]

use rayon::prelude::*;
use std::ops::Range;

use super::im2col::{gemm_input, GemmInput, Staged};
use super::Conv2dParams;
use crate::kernels::activation::Activation;
use crate::kernels::cpu::Isa;
use crate::kernels::{scratch, simd, winograd};

/// Most input channels per group of a convolution the direct path computes.
const MAX_CHANNELS: usize = 4;

/// Below this many multiply-adds an image stays on the calling thread.
const PAR_MIN_MACS: usize = 1 << 18;

/// Output rows a piece of a block takes at least when its rows are split between threads.
const PART_MIN_ROWS: usize = 8;

/// Output channels per block of the kernel.
const OCB: usize = simd::DIRECT_OCB;

/// Most output channels of a convolution whose threads split its rows rather than its
/// channels (the planes' pieces of a part are held in arrays of this size, [`split_rows`]). MobileNetV2's
/// 32-channel stem feeds a block that splits its rows too; split by rows, that block took 0.93×
/// the time at 2 threads (per node, twelve interleaved pairs of 150 runs) and the stem 0.98×.
/// ResNet-50's 64-channel stem feeds a max pool that splits channels: split by rows, the stem
/// took 1.02× and the pool 1.06×.
const ROWS_FIRST_MAX_CHANNELS: usize = 32;

/// Where the direct path reads its input.
#[derive(Clone, Debug)]
pub(super) enum DirectInput {
    /// No pads and horizontal stride 1: the input planes as they are, tap `t` of output pixel
    /// (0, 0) at these offsets.
    Plain(Vec<usize>),
    /// A staged copy of the input (zero-padded, rows split into the stride's phases).
    Staged(Box<Staged>),
}

/// How the direct path reads the input of `p` on `isa`, or `None` where it does not compute
/// `p`: an ISA without the kernel, no input channels or more than [`MAX_CHANNELS`], groups, a
/// depthwise or Winograd convolution, pads the staged copy refuses (far wider than the
/// kernel), a 1×1 kernel with a horizontal stride and no pads (not staged: its subsampled
/// copy is already the GEMM's B), or a pointwise convolution (1×1, stride 1, no pads: the
/// banded blocks multiply its packed filters band by band).
pub(super) fn direct_input(isa: Isa, p: &Conv2dParams) -> Option<DirectInput> {
    if !simd::has_direct(isa)
        || p.in_channels == 0
        || p.groups != 1
        || p.is_depthwise()
        || p.in_channels > MAX_CHANNELS
        || winograd::suits(p)
    {
        return None;
    }
    let pads = p.pad_top + p.pad_left + p.pad_bottom + p.pad_right;
    match gemm_input(p) {
        GemmInput::Staged(s) => Some(DirectInput::Staged(s)),
        GemmInput::Subsampled | GemmInput::Im2col(_) if pads == 0 && p.stride_w == 1 => {
            let plane = p.in_h * p.in_w;
            let (khw, kw) = (p.kernel_h * p.kernel_w, p.kernel_w);
            let taps = (0..p.in_channels * khw)
                .map(|t| {
                    let (c, ky, kx) = (t / khw, (t % khw) / kw, t % kw);
                    c * plane + ky * p.dilation_h * p.in_w + kx * p.dilation_w
                })
                .collect();
            Some(DirectInput::Plain(taps))
        }
        _ => None,
    }
}

/// `output = act(conv(input) + bias)` for the convolution `p` read as `how` says, with the
/// filters laid out by `simd::direct_weights` in `w` and `bias` padded to whole blocks of
/// `simd::DIRECT_OCB` channels (zeros without biases). Images one after the other; an
/// image's blocks of output channels in parallel.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    isa: Isa,
    p: &Conv2dParams,
    how: &DirectInput,
    w: &[f32],
    bias: &[f32],
    act: Activation,
    input: &[f32],
    output: &mut [f32],
) {
    let (oh, ow) = (p.out_h(), p.out_w());
    let plane = oh * ow;
    let (in_image, out_image) = (p.in_channels * p.in_h * p.in_w, p.out_channels * plane);
    let (taps, row_step) = match how {
        DirectInput::Plain(taps) => (taps.as_slice(), p.stride_h * p.in_w),
        DirectInput::Staged(s) => (s.taps(), s.row_step()),
    };
    let g = simd::DirectGeometry {
        taps,
        row_step,
        oh,
        ow,
    };
    let blocks = p.out_channels.div_ceil(OCB);
    let threads = rayon::current_num_threads();
    let par = threads > 1 && out_image.saturating_mul(taps.len()) >= PAR_MIN_MACS;
    // In parallel, one task per block of output channels, each cut into pieces of rows when
    // the blocks are fewer than two a thread.
    let parts = if par {
        (2 * threads).div_ceil(blocks.max(1))
    } else {
        1
    };
    // In parallel, a convolution with few channels splits its rows between the threads, each
    // computing every channel of its rows: the next layer (MobileNetV2's first block, split by
    // rows) then reads them from its own core's caches.
    let rows_first =
        par && p.out_channels <= ROWS_FIRST_MAX_CHANNELS && oh >= threads * PART_MIN_ROWS;
    let compute = |x: &[f32], out: &mut [f32]| {
        let rows_of = |b: usize| Rows {
            isa,
            g: &g,
            x,
            w: &w[b * taps.len() * OCB..][..taps.len() * OCB],
            bias: &bias[b * OCB..][..OCB],
            act,
        };
        if rows_first {
            let mut planes: [&mut [f32]; ROWS_FIRST_MAX_CHANNELS] =
                std::array::from_fn(|_| Default::default());
            for (piece, o) in planes.iter_mut().zip(out.chunks_mut(plane)) {
                *piece = o;
            }
            let planes = &mut planes[..p.out_channels];
            return split_rows(&rows_of, 0..oh, planes, threads);
        }
        let block = |(b, o): (usize, &mut [f32])| {
            let mut planes: [&mut [f32]; OCB] = Default::default();
            let mut n = 0;
            for (piece, o) in planes.iter_mut().zip(o.chunks_mut(plane)) {
                *piece = o;
                n += 1;
            }
            split_rows(&|i| rows_of(b + i), 0..oh, &mut planes[..n], parts);
        };
        if par {
            out.par_chunks_mut(OCB * plane).enumerate().for_each(block);
        } else {
            out.chunks_mut(OCB * plane).enumerate().for_each(block);
        }
    };
    for (x, out) in input
        .chunks_exact(in_image)
        .zip(output.chunks_exact_mut(out_image))
    {
        match how {
            DirectInput::Plain(_) => compute(x, out),
            DirectInput::Staged(s) => scratch::with_f32(s.len(p, x), |buf| {
                s.stage(isa, p, x, par, buf);
                compute(buf, out);
            }),
        }
    }
}

/// Output rows `rows` of the channels in `planes` (each channel's pieces of those rows, at
/// most [`ROWS_FIRST_MAX_CHANNELS`]), in `parts` pieces of rows run in parallel (recursive
/// halves, at least [`PART_MIN_ROWS`] rows each), each computing its rows of every block of
/// [`OCB`] channels (block `b` through `rows_of(b)`).
fn split_rows<'a>(
    rows_of: &(impl Fn(usize) -> Rows<'a> + Sync),
    rows: Range<usize>,
    planes: &mut [&mut [f32]],
    parts: usize,
) {
    assert!(
        planes.len() <= ROWS_FIRST_MAX_CHANNELS,
        "conv2d: too many planes to split"
    );
    let n = rows.len();
    if parts > 1 && n >= 2 * PART_MIN_ROWS {
        let mid = rows.start + n / 2;
        let at = (mid - rows.start) * rows_of(0).g.ow;
        let mut lo: [&mut [f32]; ROWS_FIRST_MAX_CHANNELS] =
            std::array::from_fn(|_| Default::default());
        let mut hi: [&mut [f32]; ROWS_FIRST_MAX_CHANNELS] =
            std::array::from_fn(|_| Default::default());
        for ((l, h), plane) in lo.iter_mut().zip(hi.iter_mut()).zip(planes.iter_mut()) {
            (*l, *h) = std::mem::take(plane).split_at_mut(at);
        }
        let c = planes.len();
        rayon::join(
            || split_rows(rows_of, rows.start..mid, &mut lo[..c], parts / 2),
            || split_rows(rows_of, mid..rows.end, &mut hi[..c], parts - parts / 2),
        );
        return;
    }
    for (b, block) in planes.chunks_mut(OCB).enumerate() {
        let mut pieces = block.iter_mut().map(std::mem::take);
        rows_of(b).compute(
            rows.clone(),
            std::array::from_fn(|_| pieces.next().unwrap_or_default()),
        );
    }
}

/// One block of output channels of one image: what every piece of its rows computes from.
struct Rows<'a> {
    isa: Isa,
    g: &'a simd::DirectGeometry<'a>,
    /// The image's input (staged or plain).
    x: &'a [f32],
    /// The block's weights and biases.
    w: &'a [f32],
    bias: &'a [f32],
    act: Activation,
}

impl Rows<'_> {
    /// Output rows `rows` of the block into `out` (each channel's rows, or empty past the
    /// last channel).
    fn compute(&self, rows: Range<usize>, out: [&mut [f32]; OCB]) {
        let clamp = self.act.clamp_bounds();
        let mut out = out;
        let done = simd::direct_rows(
            self.isa, self.g, rows, self.x, self.w, self.bias, clamp, &mut out,
        );
        assert!(done, "conv2d: the direct kernel refused its own geometry");
        if clamp.is_none() && self.act != Activation::None {
            for o in out {
                simd::vectorize(
                    self.isa,
                    #[inline(always)]
                    || self.act.apply_inline(o),
                );
            }
        }
    }
}
