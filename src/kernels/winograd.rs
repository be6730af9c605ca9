//! Winograd convolution, for 3×3 kernels with stride 1, dilation 1 and one group (the 3×3
//! layers of ResNet- and VGG-style networks), in two variants ([`transforms`]): F(4×4, 3×3),
//! 36 multiplications per 4×4 output tile and channel pair where the direct method needs 144,
//! and F(2×2, 3×3), 16 where it needs 36, for the wide layers on small images.
//!
//! With `d` a `T×T` input tile (`T = R + 2` for `R×R` outputs) and `g` a 3×3 filter, the
//! output tile is `Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`, summed over input channels before the output
//! transform. So:
//! 1. the filters are transformed once, `U_e = (G g Gᵀ)_e` for the `T²` positions `e`, each an
//!    `[in_c × out_c]` matrix prepacked as a GEMM B operand ([`WinogradFilters`]);
//! 2. per block of tiles, the input transform writes `V[tile][e][c] = (Bᵀ d B)_e`;
//! 3. `T²` GEMMs `M_e[tile × out_c] = V_e[tile × in_c] · U_e`;
//! 4. the output transform `Aᵀ M A` gives the `R×R` outputs, plus bias and activation, cropped
//!    at the image edge.
//!
//! The transforms run on 8 channels at once (plain loops over fixed-size lane arrays, which the
//! compiler vectorises inside `simd::vectorize`). Zero padding is read as zeros at the tile
//! loads, never materialised. Error of F(4×4, 3×3): about 4e-6 relative to the output scale in
//! fp32 (the transforms' largest coefficients are 8), measured against the f64 direct sum in
//! the tests; F(2×2, 3×3)'s coefficients are at most 1.
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::activation::Activation;
use super::aligned::AlignedVec;
use super::conv::Conv2dParams;
use super::cpu::Isa;
use super::gemm::{self, Epilogue, MatRef, PackedB};
use super::{peak, scratch, simd};
use tiles::{input_tile, transform_out};
use transforms::{Variant, F2, F4};

/// Channels transformed together (lanes of the transform loops).
const L: usize = 8;
/// Most floats of one block's transformed inputs or GEMM outputs in [`phases`] (4 MiB
/// each).
const BLOCK_FLOATS: usize = 1 << 20;
/// Most floats of one band's transformed inputs or GEMM outputs in [`bands`] (512 KiB
/// each, so that both stay in a core's L2 cache).
const BAND_FLOATS: usize = 1 << 17;

/// One value per lane.
type Lanes = [f32; L];

/// Whether the convolution `p` is one this module computes (in either variant, see
/// [`output_tile`]).
pub fn suits(p: &Conv2dParams) -> bool {
    output_tile(p).is_some()
}

/// The output tile `R` of the variant F(R×R, 3×3) that computes `p`, if one does: 3×3, stride
/// 1, dilation 1, one group, at least 16 input and output channels and [`MIN_CHANNEL_PAIRS`]
/// channel pairs (below that the transforms cost more than the multiplications they save),
/// and at least [`MIN_TILES`] output tiles:
/// each of the GEMMs has one row per tile, and with fewer the GEMMs run short of rows while
/// the transforms cost the same per tile.
/// - F(4×4, 3×3) for at most 256×256 channel pairs: its transformed filters take 36/9 = 4×
///   the memory of the plain ones.
/// - Otherwise F(2×2, 3×3), for at most 512×512 channel pairs (16/9 of the memory) and at
///   least [`MIN_CHANNELS_F2`] channels: the wide layers on small images, where the 4×4 tiles
///   are too few and fit the image worst (ResNet-50's 512 channels at 7×7: 2×2 tiles of 4×4,
///   or 4×4 tiles of 2×2). On a core with two full-width 512-bit FMA pipes
///   ([`peak::wide_fma`]) only over at least [`MIN_TILES_F2_WIDE`] tiles.
pub fn output_tile(p: &Conv2dParams) -> Option<usize> {
    output_tile_on(p, peak::wide_fma)
}

/// [`output_tile`] with `wide_fma` telling whether the core has two full-width 512-bit FMA
/// pipes (asked only where F(2×2, 3×3) would be taken).
fn output_tile_on(p: &Conv2dParams, wide_fma: impl Fn() -> bool) -> Option<usize> {
    let tiles = |r: usize| {
        p.batch
            .saturating_mul(p.out_h().div_ceil(r))
            .saturating_mul(p.out_w().div_ceil(r))
    };
    let pairs = p.in_channels.saturating_mul(p.out_channels);
    if !plain_3x3(p) || pairs < MIN_CHANNEL_PAIRS {
        None
    } else if pairs <= MAX_CHANNEL_PAIRS && tiles(4) >= MIN_TILES {
        Some(4)
    } else if pairs <= MAX_CHANNEL_PAIRS_F2
        && p.in_channels.min(p.out_channels) >= MIN_CHANNELS_F2
        && tiles(2) >= MIN_TILES
        && (tiles(2) >= MIN_TILES_F2_WIDE || !wide_fma())
    {
        Some(2)
    } else {
        None
    }
}

/// Whether `p` is a geometry and channel count [`run`] computes (any number of tiles and
/// channel pairs).
fn plain_3x3(p: &Conv2dParams) -> bool {
    p.kernel_h == 3
        && p.kernel_w == 3
        && p.stride_h == 1
        && p.stride_w == 1
        && p.dilation_h == 1
        && p.dilation_w == 1
        && p.groups == 1
        && p.in_channels >= 16
        && p.out_channels >= 16
}

/// Fewest output tiles (over the batch) [`suits`] accepts. ResNet-50's 256-channel 3×3 layers
/// at 14×14 have 16. Per-node medians, implicit im2col GEMM → Winograd, ms per layer: Zen 4
/// 2.36 → 1.50 (1 thread), 1.33 → 0.91 (2); a 16-core Xeon 3.5 → 2.0 (1), 0.58 → 0.32 (16).
const MIN_TILES: usize = 16;

/// Fewest output tiles F(2×2, 3×3) takes on a core with two full-width 512-bit FMA pipes
/// ([`peak::wide_fma`]). Its GEMMs multiply the transformed filters, 16/9 of the plain ones,
/// by one row per tile: with few tiles each filter value serves few multiplications, and a
/// core that multiplies twice as fast waits on the filters instead. On the Intel Xeon (two
/// vCPUs, AVX-512 at 1.8× AVX2's lane rate), ResNet-50's two 512-channel 3×3 layers at 7²
/// (16 tiles) took 3.44 / 3.16 ms with F(2×2, 3×3) and 2.50 / 2.48 with the implicit im2col
/// GEMM (`perlayer.py`, 1 thread, medians of three alternations; ONNX Runtime 2.3 / 2.3),
/// where Zen 4 had measured F(2×2, 3×3) faster (see [`MIN_CHANNELS_F2`]). The 256-channel
/// layers at 14², F(4×4, 3×3) over 16 tiles, measured the same either way on the Xeon and
/// keep Winograd. 64 tiles (a batch of four at 7²) is not measured: it is where each filter
/// value serves four times the multiplications.
const MIN_TILES_F2_WIDE: usize = 64;

/// Fewest `in_c · out_c` either variant takes. `kernel_bench` (`KB_COLD=4`, GFLOP/s of the
/// direct flops, F(4×4, 3×3) → implicit im2col GEMM, 1 / 2 threads): YOLOv8's 16→16 at 80²
/// 42.6 → 56.2 / 69.6 → 101.0, 24→24 at 56² 48.5 → 65.9 / 94.4 → 117.8; but 32→32 at 40²
/// 104.4 → 79.5 / 183.2 → 138.4, and the PP-OCRv4 detector's 96→24 layers (2304 pairs) made
/// the whole model 0.82 → 1.06× ONNX Runtime on the GEMM.
const MIN_CHANNEL_PAIRS: usize = 32 * 32;

/// Most `in_c · out_c` F(4×4, 3×3) takes.
const MAX_CHANNEL_PAIRS: usize = 256 * 256;
/// Most `in_c · out_c` F(2×2, 3×3) takes.
const MAX_CHANNEL_PAIRS_F2: usize = 512 * 512;
/// Fewest input and output channels F(2×2, 3×3) takes. `kernel_bench` (1 thread, `KB_COLD=4`,
/// 3 interleaved rounds, GFLOP/s of the direct method's flops), implicit im2col GEMM →
/// F(2×2, 3×3) at 7×7: 512 channels 78–84 → 110–118, 256 75–78 → 97–108, 128 68–77 → 84–95,
/// 64 39–47 → 48–54; at 8×8, 32 channels 30–40 → 24–34 and 16 17 → 11–13.
const MIN_CHANNELS_F2: usize = 64;

/// The transformed filters of one convolution: `U_e = (G g Gᵀ)_e` for each of the `T²`
/// positions of its variant, an `[in_c × out_c]` GEMM B operand each.
#[derive(Debug)]
pub struct WinogradFilters {
    /// The variant's output tile `R` (4 or 2).
    r: usize,
    /// Input channels.
    in_c: usize,
    /// Output channels.
    out_c: usize,
    /// One packed `[in_c × out_c]` matrix per position.
    u: Vec<PackedB>,
}

impl WinogradFilters {
    /// Transforms `weights` (`[out_c, in_c, 3, 3]`, checked by the caller) for the variant of
    /// output tile `r` ([`output_tile`]: 4, else 2) and `isa`'s GEMM.
    pub fn prepare(isa: Isa, r: usize, out_c: usize, in_c: usize, weights: &[f32]) -> Self {
        let r = if r == 4 { 4 } else { 2 };
        let u = if r == 4 {
            transform_filters::<6>(isa, &F4::G, out_c, in_c, weights)
        } else {
            transform_filters::<4>(isa, &F2::G, out_c, in_c, weights)
        };
        WinogradFilters { r, in_c, out_c, u }
    }

    /// Whether these filters belong to the convolution `p`.
    pub fn fits(&self, p: &Conv2dParams) -> bool {
        output_tile(p) == Some(self.r) && self.in_c == p.in_channels && self.out_c == p.out_channels
    }
}

/// The `T²` matrices `U_e[c][o] = (G g Gᵀ)_e` of the filters `g` of `weights`
/// (`[out_c, in_c, 3, 3]`), for the `T×3` filter transform `g_t`, packed as `isa`'s GEMM
/// operands: each piece of eight output channels is written where the packed layout keeps it
/// (row-major matrices packed afterwards took a copy of them all and a pass over it, a third
/// of ResNet-50's Winograd preparation).
fn transform_filters<const T: usize>(
    isa: Isa,
    g_t: &[[f64; 3]; T],
    out_c: usize,
    in_c: usize,
    weights: &[f32],
) -> Vec<PackedB> {
    /// Output channels transformed together: one f64 lane each, so that the arithmetic
    /// vectorises (one at a time, in scalar f64, the transforms took a tenth of ResNet-50's
    /// `onnxInitGraph`). Every ISA's micro-panel is a multiple of this wide, so a piece never
    /// straddles two.
    const LANES: usize = 8;
    let mut u: Vec<PackedB> = (0..T * T)
        .map(|_| PackedB::zeroed(isa, in_c, out_c))
        .collect();
    // Output channels outer, input channels inner: the eight filters are read along their
    // rows and each matrix is written down one micro-panel, row after row, from one offset per
    // row. (Input channels outer, with each matrix's piece located on its own, the
    // preparation ran 1.4× slower than writing row-major matrices and packing them: a row's
    // pieces lie a whole micro-panel apart, 32 KiB on AVX-512, in one set of L1.)
    for o0 in (0..out_c).step_by(LANES) {
        let n = LANES.min(out_c - o0);
        simd::vectorize(
            isa,
            #[inline(always)]
            || {
                for c in 0..in_c {
                    // g[k][l]: tap k of filter (o0 + l, c); lanes past `n` stay zero.
                    let mut g = [[0.0f64; LANES]; 9];
                    for l in 0..n {
                        let f = &weights[((o0 + l) * in_c + c) * 9..][..9];
                        for (gk, &v) in g.iter_mut().zip(f) {
                            gk[l] = f64::from(v);
                        }
                    }
                    // t = G·g (T×3), then t·Gᵀ (T×T), in f64 and rounded once.
                    let mut t = [[[0.0f64; LANES]; 3]; T];
                    for (ti, gi) in t.iter_mut().zip(g_t) {
                        for (k, tk) in ti.iter_mut().enumerate() {
                            for l in 0..LANES {
                                tk[l] = gi[0] * g[k][l] + gi[1] * g[3 + k][l] + gi[2] * g[6 + k][l];
                            }
                        }
                    }
                    let at = u[0].piece_offset(c, o0, n);
                    for (i, ti) in t.iter().enumerate() {
                        for (j, gj) in g_t.iter().enumerate() {
                            let mut v = [0.0f32; LANES];
                            for (l, vl) in v.iter_mut().enumerate() {
                                *vl =
                                    (ti[0][l] * gj[0] + ti[1][l] * gj[1] + ti[2][l] * gj[2]) as f32;
                            }
                            u[i * T + j].piece_mut(at, n).copy_from_slice(&v[..n]);
                        }
                    }
                }
            },
        );
    }
    u
}

/// How [`run`] lays out its input and output tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// NCHW: each channel's plane of `H·W` floats.
    Plain,
    /// Channel-blocked (`kernels::nchwc`: `[N, C/16, H, W, 16]`), the input and output
    /// channels multiples of 16: the transforms read and write each position's 8 channels of a
    /// lane group as 8 consecutive floats, where the plain layout gathers them from 8 planes.
    Blocked,
}

impl Layout {
    /// Channels side by side at each position: the floats of one "plane" of [`run`]'s
    /// splitting (a channel's, or a block's) per position.
    fn unit(self) -> usize {
        match self {
            Layout::Plain => 1,
            Layout::Blocked => BLOCKED_UNIT,
        }
    }
}

/// Channels of a block in [`Layout::Blocked`] (`kernels::nchwc::BLOCK`).
const BLOCKED_UNIT: usize = 16;

/// Runs the convolution `p` (which [`suits`]) with filters `f`: `output = act(conv(input) +
/// bias)`, both tensors in `layout` (for [`Layout::Blocked`], `p`'s channels are multiples of
/// 16). Lengths are checked by the caller ([`super::conv::Conv2d::run`], the blocked
/// convolution operator).
///
/// Two schedules. By bands of tile rows ([`bands`]): each band's transformed inputs and
/// GEMM outputs stay in the cache of the core that made them, but every band reads all the
/// transformed filters. Phase by phase ([`phases`]): the filters are read once per block,
/// but the phases hand their data from core to core. Bands are used when the extra filter
/// reads cost less than the data the phases would move: many tiles, few channels.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    isa: Isa,
    p: &Conv2dParams,
    f: &WinogradFilters,
    (bias, act): (Option<&[f32]>, Activation),
    layout: Layout,
    input: &[f32],
    output: &mut [f32],
) {
    if layout == Layout::Blocked {
        assert!(
            p.in_channels.is_multiple_of(BLOCKED_UNIT)
                && p.out_channels.is_multiple_of(BLOCKED_UNIT),
            "winograd: blocked channels must be multiples of {BLOCKED_UNIT}"
        );
    }
    let (ic, oc) = (p.in_channels, p.out_channels);
    let r = f.r;
    let (th, tw) = (p.out_h().div_ceil(r), p.out_w().div_ceil(r));
    let tiles = th * tw;
    let per_tile = (r + 2) * (r + 2) * ic.max(oc);
    let threads = rayon::current_num_threads();
    let bands = (tiles * per_tile)
        .div_ceil(BAND_FLOATS)
        .max(threads)
        .min(th);
    let schedule = if bands > 1 && (bands - 1) * ic * oc <= tiles * (ic + oc) && oc <= BAND_PLANES {
        Schedule::Bands(bands)
    } else {
        Schedule::Phases((BLOCK_FLOATS / per_tile).clamp(1, tiles.max(1)))
    };
    run_scheduled(isa, p, f, (bias, act), layout, (input, output), schedule);
}

/// How [`run`] orders its work (tests force each).
#[derive(Clone, Copy, Debug)]
enum Schedule {
    /// Phase by phase over blocks of at most this many tiles (see [`phases`]).
    Phases(usize),
    /// By this many bands of tile rows per image (see [`bands`]).
    Bands(usize),
}

/// Runs the convolution with the variant of `f` in the order `schedule` says.
#[allow(clippy::too_many_arguments)]
fn run_scheduled(
    isa: Isa,
    p: &Conv2dParams,
    f: &WinogradFilters,
    ep: (Option<&[f32]>, Activation),
    layout: Layout,
    io: (&[f32], &mut [f32]),
    schedule: Schedule,
) {
    match (f.r, schedule) {
        (4, Schedule::Phases(b)) => phases::<4, 6, F4>(isa, p, f, ep, layout, io, b),
        (_, Schedule::Phases(b)) => phases::<2, 4, F2>(isa, p, f, ep, layout, io, b),
        (4, Schedule::Bands(c)) => bands::<4, 6, F4>(isa, p, f, ep, layout, io, c),
        (_, Schedule::Bands(c)) => bands::<2, 4, F2>(isa, p, f, ep, layout, io, c),
    }
}

/// [`run`] phase by phase over blocks of at most `block` tiles: each phase of a block is
/// parallel on its own (tiles, then positions, then output planes); for the variant
/// F(R×R, 3×3) `V`.
fn phases<const R: usize, const T: usize, V: Variant<R, T>>(
    isa: Isa,
    p: &Conv2dParams,
    f: &WinogradFilters,
    (bias, act): (Option<&[f32]>, Activation),
    layout: Layout,
    (input, output): (&[f32], &mut [f32]),
    block: usize,
) {
    let e_all = T * T;
    let (ic, oc) = (p.in_channels, p.out_channels);
    let (oh, ow) = (p.out_h(), p.out_w());
    let (th, tw) = (oh.div_ceil(R), ow.div_ceil(R));
    let tiles = th * tw;
    let threads = rayon::current_num_threads();
    let par = threads > 1;
    let lane_isa = lane_isa(isa);
    let (mut v, mut m) = take_scratch(block * e_all * ic, block * e_all * oc);
    let in_img = ic * p.in_h * p.in_w;
    let out_img = oc * oh * ow;
    if tiles == 0 {
        return;
    }
    for b in 0..p.batch {
        let x = &input[b * in_img..(b + 1) * in_img];
        let out = &mut output[b * out_img..(b + 1) * out_img];
        for t0 in (0..tiles).step_by(block) {
            let n = block.min(tiles - t0);
            let v = &mut v[..n * e_all * ic];
            let m = &mut m[..n * e_all * oc];
            // 2. Input transform, one tile per task.
            let tile_in = |(t, vt): (usize, &mut [f32])| {
                simd::vectorize(
                    lane_isa,
                    #[inline(always)]
                    || input_tile::<R, T, V>(p, layout, x, t0 + t, tw, vt),
                );
            };
            for_each_chunk(par, v, e_all * ic, tile_in);
            // 3. One GEMM per position, its rows (tiles) cut into `pieces` tasks when the
            // positions alone leave threads idle (more than 12 threads at 36 positions).
            let v = &*v;
            let rows = n.div_ceil(gemm_pieces(n, e_all, threads));
            let gemm_e = |(e, me): (usize, &mut [f32])| {
                let piece = |(r, mr): (usize, &mut [f32])| {
                    let r0 = r * rows;
                    let a = MatRef {
                        data: &v[r0 * e_all * ic + e * ic..],
                        rows: mr.len() / oc,
                        cols: ic,
                        row_stride: e_all * ic,
                        col_stride: 1,
                    };
                    gemm::sgemm_packed_with(false, 1.0, a, &f.u[e], 0.0, mr, oc, &Epilogue::NONE);
                };
                for_each_chunk(par, me, rows * oc, piece);
            };
            for_each_chunk(par, m, n * oc, gemm_e);
            // 4. Output transform, L output planes (or one block of them) per task, each
            // task's planes also cut into bands of tile rows when the tasks alone leave
            // threads idle and the block is whole tile rows (see `output_bands`).
            let m = &*m;
            let unit = layout.unit();
            // Planes per task, and the floats of one plane's row.
            let (per_task, row_len) = (L.div_ceil(unit), ow * unit);
            let whole_rows = t0 % tw == 0 && (n % tw == 0 || t0 + n == tiles);
            let tasks = (oc / unit).div_ceil(per_task);
            let bands = output_bands(tasks, n.div_ceil(tw), threads, whole_rows);
            let split = BandSplit {
                r: R,
                th: n.div_ceil(tw),
                count: bands,
                oh: oh - R * (t0 / tw),
                row_len,
                par,
            };
            let y_block = R * (t0 / tw);
            let tile_out = |(q, planes): (usize, &mut [f32])| {
                let mut group: [&mut [f32]; L] = Default::default();
                let count = planes.len().div_ceil(oh * row_len);
                for (g, plane) in group.iter_mut().zip(planes.chunks_mut(oh * row_len)) {
                    *g = plane;
                }
                let transform =
                    |(ta, tb): (usize, usize), y_base: usize, planes: &mut [&mut [f32]]| {
                        let at = (n, t0, tw, y_base);
                        let o_first = q * per_task * unit;
                        let out = (layout, o_first, planes);
                        transform_out::<R, T, V>(lane_isa, p, (m, at), ta..tb, (bias, act), out);
                    };
                if bands == 1 {
                    transform((0, n), 0, &mut group[..count]);
                    return;
                }
                // The block's rows of the group's planes, cut into bands.
                let mut rows: [&mut [f32]; L] = Default::default();
                for (r, g) in rows.iter_mut().zip(group.iter_mut()).take(count) {
                    let plane = std::mem::take(g);
                    let end = (y_block + R * split.th).min(oh) * row_len;
                    *r = &mut plane[y_block * row_len..end];
                }
                let band = |b: &mut Band| {
                    let (ta, tb) = (b.ty0 * tw, ((b.ty0 + b.rows) * tw).min(n));
                    transform((ta, tb), y_block + R * b.ty0, b.planes);
                };
                split.run(&mut rows[..count], 0, 0..bands, &band);
            };
            for_each_chunk(par, out, per_task * oh * row_len, tile_out);
        }
    }
    scratch::give(v);
    scratch::give(m);
}

/// Into how many row pieces [`phases`] cuts each of the `positions` GEMMs of a block of
/// `n` tiles on `threads` threads: enough for about three tasks a thread, each of at least 16
/// rows.
fn gemm_pieces(n: usize, positions: usize, threads: usize) -> usize {
    (3 * threads).div_ceil(positions).clamp(1, (n / 16).max(1))
}

/// Into how many bands of tile rows [`phases`] cuts each of its `groups` output tasks (`L`
/// output planes each, or in the blocked layout one block of 16 channels) for the output
/// transform, on `threads` threads, for a block of `th` tile rows (`whole_rows`: the block is
/// whole tile rows): enough for about two tasks a thread, where the groups alone would leave
/// threads idle (64 plain channels make 8 groups: half of 16 threads).
fn output_bands(groups: usize, th: usize, threads: usize, whole_rows: bool) -> usize {
    if threads < 2 || !whole_rows || groups >= 2 * threads {
        return 1;
    }
    (2 * threads).div_ceil(groups).clamp(1, th)
}

/// The ISA of the transforms. They work on L = 8 lanes, one 256-bit register: compiled for
/// AVX-512 the compiler pairs lane arrays into 512-bit registers through the stack
/// (store-forwarding stalls made the transforms 1.2x slower than with AVX2), so they use AVX2
/// there.
fn lane_isa(isa: Isa) -> Isa {
    match isa {
        Isa::Avx512 => Isa::Avx2Fma,
        other => other,
    }
}

/// Scratch buffers (see [`scratch`]) for transformed inputs and GEMM outputs, at least `v_len`
/// and `m_len` floats (contents stale); handed back with [`scratch::give`].
fn take_scratch(v_len: usize, m_len: usize) -> (AlignedVec, AlignedVec) {
    (scratch::take(v_len), scratch::take(m_len))
}

/// Calls `f(index, chunk)` for every `size`-float chunk of `data`, on rayon's pool when `par`.
fn for_each_chunk<F>(par: bool, data: &mut [f32], size: usize, f: F)
where
    F: Fn((usize, &mut [f32])) + Sync + Send,
{
    if par {
        data.par_chunks_mut(size).enumerate().for_each(f);
    } else {
        data.chunks_mut(size).enumerate().for_each(f);
    }
}

/// One task of [`bands`]: the tile rows `ty0 .. ty0 + rows` of image `b`, and the rows
/// of every output plane they cover (`planes[o]`, starting at output row `R·ty0`; in the
/// blocked layout the planes are the blocks of 16 channels).
struct Band<'t, 'o> {
    b: usize,
    ty0: usize,
    rows: usize,
    planes: &'t mut [&'o mut [f32]],
}

/// The most output channels the band schedule takes: the code that splits the planes between
/// bands keeps a piece of each on the stack.
pub(crate) const BAND_PLANES: usize = 1024;

/// [`run`] by bands: `count` bands of tile rows per image (as even as can be). Each band is one
/// task that runs all three phases on its own tiles (input transform, the GEMMs, output
/// transform); the tasks need one fork-join in all. For the variant F(R×R, 3×3) `V`.
fn bands<const R: usize, const T: usize, V: Variant<R, T>>(
    isa: Isa,
    p: &Conv2dParams,
    f: &WinogradFilters,
    (bias, act): (Option<&[f32]>, Activation),
    layout: Layout,
    (input, output): (&[f32], &mut [f32]),
    count: usize,
) {
    let (oh, ow) = (p.out_h(), p.out_w());
    let th = oh.div_ceil(R);
    if th == 0 || ow == 0 {
        return;
    }
    let count = count.clamp(1, th);
    let oc = p.out_channels;
    assert!(oc <= BAND_PLANES, "winograd: too many planes for bands");
    let unit = layout.unit();
    let split = BandSplit {
        r: R,
        th,
        count,
        oh,
        row_len: ow * unit,
        par: rayon::current_num_threads() > 1 && count > 1,
    };
    // Scratch for the largest band (bands differ by at most one tile row), so that every band
    // asks for the same sizes and the scratch set settles whichever bands overlap.
    let max_tiles = th.div_ceil(count) * ow.div_ceil(R);
    let one =
        |t: &mut Band| band_task::<R, T, V>(isa, p, f, (bias, act), layout, input, t, max_tiles);
    for (b, image) in output.chunks_mut(oc * oh * ow).enumerate() {
        let mut planes: [&mut [f32]; BAND_PLANES] = std::array::from_fn(|_| Default::default());
        for (piece, plane) in planes.iter_mut().zip(image.chunks_mut(oh * ow * unit)) {
            *piece = plane;
        }
        split.run(&mut planes[..oc / unit], b, 0..count, &one);
    }
}

/// How [`bands`] cuts an image's output planes into bands: `count` bands of the `th` tile
/// rows (`r` output rows each; band `j` starts at tile row `j·th/count`: sizes differ by at
/// most one), of an output of `oh` rows of `row_len` floats per plane (a channel's plane, or
/// in the blocked layout a block's); the bands run in parallel when `par`.
struct BandSplit {
    r: usize,
    th: usize,
    count: usize,
    oh: usize,
    row_len: usize,
    par: bool,
}

impl BandSplit {
    /// The first tile row of band `j`.
    fn start(&self, j: usize) -> usize {
        j * self.th / self.count
    }

    /// The first output row of band `j`.
    fn first_row(&self, j: usize) -> usize {
        (self.r * self.start(j)).min(self.oh)
    }

    /// Runs `f` on the bands `bands` of image `b`, whose planes' pieces `planes` start at the
    /// first row of the first of them; halves the range (the halves in parallel) down to one
    /// band. The right half's pieces live on this call's stack.
    fn run<F>(&self, planes: &mut [&mut [f32]], b: usize, bands: std::ops::Range<usize>, f: &F)
    where
        F: Fn(&mut Band) + Sync,
    {
        let j = bands.start;
        if bands.len() == 1 {
            f(&mut Band {
                b,
                ty0: self.start(j),
                rows: self.start(j + 1) - self.start(j),
                planes,
            });
            return;
        }
        let mid = j + bands.len() / 2;
        let at = (self.first_row(mid) - self.first_row(j)) * self.row_len;
        let mut right: [&mut [f32]; BAND_PLANES] = std::array::from_fn(|_| Default::default());
        let right = &mut right[..planes.len()];
        for (left, right) in planes.iter_mut().zip(right.iter_mut()) {
            let (l, r) = std::mem::take(left).split_at_mut(at);
            (*left, *right) = (l, r);
        }
        if self.par {
            rayon::join(
                || self.run(planes, b, j..mid, f),
                || self.run(right, b, mid..bands.end, f),
            );
        } else {
            self.run(planes, b, j..mid, f);
            self.run(right, b, mid..bands.end, f);
        }
    }
}

/// The three phases of one [`Band`], on this thread, with scratch buffers sized for
/// `max_tiles` tiles (the split's largest band).
#[allow(clippy::too_many_arguments)]
fn band_task<const R: usize, const T: usize, V: Variant<R, T>>(
    isa: Isa,
    p: &Conv2dParams,
    f: &WinogradFilters,
    (bias, act): (Option<&[f32]>, Activation),
    layout: Layout,
    input: &[f32],
    t: &mut Band,
    max_tiles: usize,
) {
    let (ic, oc) = (p.in_channels, p.out_channels);
    let e_all = T * T;
    let tw = p.out_w().div_ceil(R);
    let n = t.rows * tw;
    let t0 = t.ty0 * tw;
    let lane_isa = lane_isa(isa);
    let (mut v, mut m) = take_scratch(max_tiles * e_all * ic, max_tiles * e_all * oc);
    let in_img = ic * p.in_h * p.in_w;
    let x = &input[t.b * in_img..(t.b + 1) * in_img];
    {
        let v = &mut v[..n * e_all * ic];
        let m = &mut m[..n * e_all * oc];
        // 2. Input transform, tile by tile.
        simd::vectorize(
            lane_isa,
            #[inline(always)]
            || {
                for (i, vt) in v.chunks_exact_mut(e_all * ic).enumerate() {
                    input_tile::<R, T, V>(p, layout, x, t0 + i, tw, vt);
                }
            },
        );
        // 3. One GEMM per position.
        for (e, me) in m.chunks_exact_mut(n * oc).enumerate() {
            let a = MatRef {
                data: &v[e * ic..],
                rows: n,
                cols: ic,
                row_stride: e_all * ic,
                col_stride: 1,
            };
            gemm::sgemm_packed_with(false, 1.0, a, &f.u[e], 0.0, me, oc, &Epilogue::NONE);
        }
        // 4. Output transform, L output channels at a time.
        let m = &*m;
        let y_base = R * t.ty0;
        let unit = layout.unit();
        let per_task = L.div_ceil(unit);
        for (q, planes) in t.planes.chunks_mut(per_task).enumerate() {
            let out = (layout, q * per_task * unit, planes);
            transform_out::<R, T, V>(
                lane_isa,
                p,
                (m, (n, t0, tw, y_base)),
                0..n,
                (bias, act),
                out,
            );
        }
    }
    scratch::give(v);
    scratch::give(m);
}

#[cfg(test)]
mod tests;
mod tiles;
mod transforms;
