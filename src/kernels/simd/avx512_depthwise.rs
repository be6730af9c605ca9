//! AVX-512F depthwise-convolution plane kernels: 16-wide column blocks with masked loads
//! (padding is never materialised), and for 3×3 filters several output rows at a time, each
//! input row loaded once, with the nine weights in registers.
#![allow(clippy::incompatible_msrv)] // AVX-512 intrinsics are stable since Rust 1.89.

use std::arch::x86_64::*;

use super::{DwPlane, DW_MAX_KW};

/// Lanes `i < 16` whose index `start + i` lies in `0..len` (the load mask of 16 floats from
/// `start` on in a row of `len`).
#[inline(always)]
pub(super) fn lane_mask(start: isize, len: usize) -> __mmask16 {
    let lo = (-start).clamp(0, 16) as u32;
    let hi = (len as isize - start).clamp(0, 16) as u32;
    if hi <= lo {
        return 0;
    }
    let upto = if hi == 16 { 0xFFFF } else { (1u32 << hi) - 1 };
    (upto & !((1u32 << lo) - 1)) as __mmask16
}

/// `planes` consecutive planes of a depthwise convolution with horizontal stride `S` (1 or 2)
/// and dilation 1, plane `c` reading input plane `c` of `x` (`in_plane` floats apart), filter
/// `c` of `w` (`kh·kw` each) and bias `c` (0 when `bias` is null), writing output plane `c`
/// (`out_plane` floats apart):
/// `out[c][oy][ox] = bias[c] + Σ_ky Σ_kx w[c][ky][kx] · x[c][oy·sh + ky·dh − pad_top][ox·S + kx − pad_left]`,
/// positions outside the input reading as zero (padding is never materialised).
///
/// Columns are walked in groups of up to four 16-wide blocks; the load masks of a group are
/// computed once for all its rows and, when the plane is one group wide (at most 64 columns),
/// for all the planes: at 7×7 or 14×14 that setup cost as much as the arithmetic. Each block
/// has two accumulators (even and odd kernel rows), so that independent FMA chains hide the
/// FMA latency.
///
/// # Safety
/// - The CPU supports AVX-512F.
/// - `x` is valid for reads of `(planes−1)·in_plane + in_h·in_w` floats, `w` of `planes·kh·kw`,
///   `bias` (when not null) of `planes`, `out` for writes of `(planes−1)·out_plane + oh·ow`
///   and does not overlap `x`; `kw ≤ DW_MAX_KW`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn depthwise_planes<const S: usize>(
    g: &DwPlane,
    planes: usize,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    out: *mut f32,
) {
    // Planes at most 7 wide go two to a vector ([`depthwise_pairs_3x3`]); an odd last one
    // takes the kernels below.
    let (x, w, bias, out, planes) = if S == 1 && dw_pairs(g) && planes >= 2 {
        let pairs = planes / 2;
        // SAFETY: forwarded contract, for planes `0..2·pairs`.
        unsafe { depthwise_pairs_3x3(g, pairs, x, w, bias, out) };
        let done = 2 * pairs;
        (
            x.wrapping_add(done * g.in_plane),
            w.wrapping_add(done * 9),
            if bias.is_null() {
                bias
            } else {
                bias.wrapping_add(done)
            },
            out.wrapping_add(done * g.out_plane),
            planes - done,
        )
    } else {
        (x, w, bias, out, planes)
    };
    if planes == 0 {
        return;
    }
    // Chosen once here: a choice per plane, with both variants of the rows inlined where it
    // is made, slowed the small planes by 6–9%.
    // SAFETY: forwarded contract (the planes left, from the first not done above).
    unsafe {
        if g.oh >= PREFETCH_MIN_ROWS {
            planes_with::<S, true>(g, planes, x, w, bias, out)
        } else {
            planes_with::<S, false>(g, planes, x, w, bias, out)
        }
    }
}

/// [`depthwise_planes`], whose 3×3 rows prefetch input rows ahead when `PF`.
///
/// # Safety
/// As [`depthwise_planes`].
#[target_feature(enable = "avx512f")]
unsafe fn planes_with<const S: usize, const PF: bool>(
    g: &DwPlane,
    planes: usize,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    out: *mut f32,
) {
    let w_len = g.kh * g.kw;
    // The 3×3 rows keep `DW_ROWS` rows of accumulators: at most two blocks wide, so that
    // they, the inputs and the weights fit in the 32 registers.
    let widest = if dw_3x3_rows::<S>(g) { 2 } else { 4 };
    // Planes at most 64 wide: each column group's setup is made once for all the planes (at
    // 56², plane by plane through both of the 3×3 rows' groups measured no faster).
    let one_group = g.ow <= 64;
    let groups_of = |c: usize| if one_group { planes - c } else { 1 };
    let mut c = 0;
    while c < planes {
        let n = groups_of(c);
        // SAFETY: planes `c .. c + n` are inside the buffers (contract).
        let (xc, wc, oc) = unsafe {
            (
                x.add(c * g.in_plane),
                w.add(c * w_len),
                out.add(c * g.out_plane),
            )
        };
        // (A null `bias` stays null: offsetting it would make it look like biases.)
        let bc = if bias.is_null() {
            bias
        } else {
            bias.wrapping_add(c)
        };
        let mut ox0 = 0;
        while ox0 < g.ow {
            let blocks = (g.ow - ox0).div_ceil(16).min(widest);
            let at = (xc, wc, bc, oc);
            // SAFETY: forwarded contract for planes `c .. c + n`; the blocks written lie in
            // columns `ox0..ow`.
            unsafe {
                match blocks {
                    1 => depthwise_blocks::<S, 1, PF>(g, n, at, ox0),
                    2 => depthwise_blocks::<S, 2, PF>(g, n, at, ox0),
                    3 => depthwise_blocks::<S, 3, PF>(g, n, at, ox0),
                    _ => depthwise_blocks::<S, 4, PF>(g, n, at, ox0),
                }
            }
            ox0 += 16 * blocks;
        }
        c += n;
    }
}

/// Whether [`depthwise_rows_3x3`] computes the planes of `g` (horizontal stride `S`).
fn dw_3x3_rows<const S: usize>(g: &DwPlane) -> bool {
    g.kh == 3 && g.kw == 3 && g.dilation_h == 1 && g.stride_h == S
}

/// Columns `ox0 .. ox0 + 16·NB` of every row of `planes` planes of [`depthwise_planes`], whose
/// input, filters, biases (or null) and output start at `(x, w, bias, out)`.
///
/// # Safety
/// As [`depthwise_planes`], with `ox0 < ow`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn depthwise_blocks<const S: usize, const NB: usize, const PF: bool>(
    g: &DwPlane,
    planes: usize,
    (x, w, bias, out): (*const f32, *const f32, *const f32, *mut f32),
    ox0: usize,
) {
    // Per kernel column and block: where its 16 (strided) inputs start, and their load masks
    // (two 16-lane halves when S = 2).
    let mut start = [[0isize; NB]; DW_MAX_KW];
    let mut masks = [[(0 as __mmask16, 0 as __mmask16); NB]; DW_MAX_KW];
    for kx in 0..g.kw {
        for b in 0..NB {
            let s0 = ((ox0 + 16 * b) * S + kx) as isize - g.pad_left as isize;
            start[kx][b] = s0;
            masks[kx][b] = (lane_mask(s0, g.in_w), lane_mask(s0 + 16, g.in_w));
        }
    }
    let even_idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let clamp = g
        .clamp
        .map(|(lo, hi)| (_mm512_set1_ps(lo), _mm512_set1_ps(hi)));
    let pieces = Dw3Pieces::new::<S>(g, ox0);
    for c in 0..planes {
        // SAFETY: plane `c < planes` of each buffer (contract).
        let (x, w, out, bias) = unsafe {
            (
                x.add(c * g.in_plane),
                w.add(c * g.kh * g.kw),
                out.add(c * g.out_plane),
                if bias.is_null() { 0.0 } else { *bias.add(c) },
            )
        };
        // The bias goes apart from the pointers: in one tuple, LLVM copied the bias and the
        // output pointer as one 16-byte load of two separate stores, which cannot be
        // forwarded, so every plane waited for the store buffer (the previous plane's output,
        // going to memory) to drain: 40% of the kernel's samples in a banded MobileNetV2 pair.
        let at = (x, w, out);
        // SAFETY: one plane of the contract's buffers, `ox0 < ow`; a 3×3 filter for the
        // 3×3 rows.
        unsafe {
            if dw_3x3_rows::<S>(g) {
                depthwise_rows_3x3::<S, NB, PF>(g, at, bias, ox0, &pieces, clamp)
            } else {
                depthwise_rows::<S, NB>(g, at, bias, ox0, (&start, &masks), even_idx, clamp)
            }
        };
    }
}

/// Stores the `NB` 16-column blocks `sums` of output row `oy` of a depthwise plane from column
/// `ox0` on, clamped to `clamp`; lanes past the row's end are not written.
///
/// # Safety
/// `out` holds the plane's `oh·ow` floats, `oy < oh` and `ox0 < ow`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store_dw_row<const NB: usize>(
    g: &DwPlane,
    out: *mut f32,
    (oy, ox0): (usize, usize),
    sums: [__m512; NB],
    clamp: Option<(__m512, __m512)>,
) {
    for (b, &sum) in sums.iter().enumerate() {
        let o = ox0 + 16 * b;
        if o >= g.ow {
            break;
        }
        let n = (g.ow - o).min(16);
        let mask = if n == 16 { 0xFFFF } else { (1u16 << n) - 1 };
        let mut v = sum;
        if let Some((lo, hi)) = clamp {
            // max(lo, v) and min(hi, v) return v when it is NaN (the second operand).
            v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
        }
        // SAFETY: lanes `0..n` are `out[oy·ow + o ..][..n]`, inside the `oh·ow` floats.
        unsafe { _mm512_mask_storeu_ps(out.add(oy * g.ow + o), mask, v) };
    }
}

/// The 16 inputs of one kernel tap for a block of 16 output columns at horizontal stride `S`
/// (1 or 2), from `p` on: lanes outside the masks read as zeros (at stride 2, two masked
/// loads and the even lanes of both).
///
/// # Safety
/// The lanes `(m0, m1)` select (from `p` and `p + 16`) are readable.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn dw_inputs<const S: usize>(
    p: *const f32,
    (m0, m1): (__mmask16, __mmask16),
    even_idx: __m512i,
) -> __m512 {
    // SAFETY: masked-off lanes are not accessed; the others are readable (contract).
    let lo = unsafe { _mm512_maskz_loadu_ps(m0, p) };
    if S == 1 {
        lo
    } else {
        // SAFETY: as above.
        let hi = unsafe { _mm512_maskz_loadu_ps(m1, p.wrapping_add(16)) };
        _mm512_permutex2var_ps(lo, even_idx, hi)
    }
}

/// Whether [`depthwise_pairs_3x3`] computes the planes of `g` (horizontal stride 1): a 3×3
/// filter with vertical stride 1 and dilation 1, one column of padding on the left, and input
/// and output rows at most 7 wide (MobileNet's 7×7 layers).
fn dw_pairs(g: &DwPlane) -> bool {
    dw_3x3_rows::<1>(g) && g.pad_left == 1 && (1..=7).contains(&g.in_w) && g.ow <= 7
}

/// `pairs` pairs of planes of [`depthwise_planes`] at horizontal stride 1 whose geometry
/// passes [`dw_pairs`], two planes to a vector: lanes `1..=in_w` hold a row of the first
/// plane, lanes `9..=8 + in_w` the same row of the second, and the lanes between read as
/// zeros, which are the padding on either side of both. At 7×7, one plane to a vector used 7
/// of its 16 lanes.
///
/// # Safety
/// As [`depthwise_planes`] for `2·pairs` planes, with [`dw_pairs`] true.
#[target_feature(enable = "avx512f")]
unsafe fn depthwise_pairs_3x3(
    g: &DwPlane,
    pairs: usize,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    out: *mut f32,
) {
    let first: __mmask16 = ((1u16 << g.in_w) - 1) << 1;
    let second = first << 8;
    let out_first: __mmask16 = (1u16 << g.ow) - 1;
    let out_second = out_first << 8;
    let zero = _mm512_setzero_ps();
    let clamp = g
        .clamp
        .map(|(lo, hi)| (_mm512_set1_ps(lo), _mm512_set1_ps(hi)));
    // Two values, one per half.
    let halves = |a: f32, b: f32| _mm512_mask_mov_ps(_mm512_set1_ps(a), 0xFF00, _mm512_set1_ps(b));
    for pair in 0..pairs {
        let c = 2 * pair;
        // SAFETY: planes `c` and `c + 1` are inside the buffers (contract).
        let (xa, xb, oa, ob, wc) = unsafe {
            (
                x.add(c * g.in_plane),
                x.add((c + 1) * g.in_plane),
                out.add(c * g.out_plane),
                out.add((c + 1) * g.out_plane),
                w.add(c * 9),
            )
        };
        // SAFETY: `w` holds both filters' 9 floats, a non-null `bias` both biases (contract).
        let wv: [__m512; 9] =
            std::array::from_fn(|t| unsafe { halves(*wc.add(t), *wc.add(9 + t)) });
        let bv = if bias.is_null() {
            zero
        } else {
            // SAFETY: as above.
            unsafe { halves(*bias.add(c), *bias.add(c + 1)) }
        };
        let mut oy0 = 0;
        while oy0 < g.oh {
            let mut acc = [bv; DW_ROWS];
            let top = oy0 as isize - g.pad_top as isize;
            for j in 0..DW_ROWS + 2 {
                let iy = top + j as isize;
                if iy < 0 || iy >= g.in_h as isize {
                    continue;
                }
                let at = iy as usize * g.in_w;
                // SAFETY: the masks select columns `0..in_w` of row `iy < in_h` of both planes
                // (lane 1 + i of the first, lane 9 + i of the second, for column i); masked-off
                // lanes are not accessed, and `wrapping_sub` keeps the address arithmetic
                // defined.
                let v0 = unsafe {
                    let a = _mm512_maskz_loadu_ps(first, xa.add(at).wrapping_sub(1));
                    _mm512_mask_loadu_ps(a, second, xb.add(at).wrapping_sub(9))
                };
                let shift = |v: __m512, n: usize| {
                    let (v, z) = (_mm512_castps_si512(v), _mm512_castps_si512(zero));
                    _mm512_castsi512_ps(if n == 1 {
                        _mm512_alignr_epi32::<1>(z, v)
                    } else {
                        _mm512_alignr_epi32::<2>(z, v)
                    })
                };
                let taps = [v0, shift(v0, 1), shift(v0, 2)];
                for (r, acc) in acc.iter_mut().enumerate() {
                    let Some(ky) = j.checked_sub(r).filter(|&ky| ky < 3) else {
                        continue;
                    };
                    for (kx, &v) in taps.iter().enumerate() {
                        *acc = _mm512_fmadd_ps(wv[ky * 3 + kx], v, *acc);
                    }
                }
            }
            for (r, &sum) in acc.iter().enumerate().take(g.oh - oy0) {
                let mut v = sum;
                if let Some((lo, hi)) = clamp {
                    // max(lo, v) and min(hi, v) return v when it is NaN (the second operand).
                    v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
                }
                let at = (oy0 + r) * g.ow;
                // SAFETY: lanes `0..ow` are row `oy0 + r < oh` of the first output plane,
                // lanes `8..8 + ow` the same row of the second; masked-off lanes are not
                // accessed.
                unsafe {
                    _mm512_mask_storeu_ps(oa.add(at), out_first, v);
                    _mm512_mask_storeu_ps(ob.add(at).wrapping_sub(8), out_second, v);
                }
            }
            oy0 += DW_ROWS;
        }
    }
}

/// Output rows [`depthwise_rows_3x3`] computes together: each input row is loaded once for
/// every row of the block it feeds (up to three at stride 1), and the block's rows are
/// independent FMA chains.
const DW_ROWS: usize = 4;

/// Output planes at least this many rows high have [`depthwise_rows_3x3`] prefetch their
/// input rows two steps ahead. Inside a model the input comes from beyond L2 (the expansion
/// before it wrote it), and each step waited on its rows. `kernel_bench` (`KB_COLD=4`, 1
/// thread, medians of 10 interleaved rounds against the kernel without it, GFLOP/s):
/// MobileNetV2's stride-2 layer of 96 channels at 112² 12.1 → 19.4, 144 channels at 56² 61 →
/// 69, 32 at 112² 67 → 71. The smaller planes run the variant without it, yet read 3–6% slower
/// with it compiled in (576 channels at 14² 68 → 64, 960 at 7² 32 → 30, 144 at 56² with stride
/// 2 43 → 42); prefetching in their loop had lost 10–18%. In the model at 1 thread the
/// 96-channel layer went from 0.23 to 0.18–0.21 ms, the whole model 3.95 → 3.91 ms.
const PREFETCH_MIN_ROWS: usize = 56;

/// Most 16-float pieces of an input row the 3×3 rows read per column group (`2·4 + 1` for
/// four blocks at stride 2).
const DW3_PIECES: usize = 9;

/// Where the 3×3 rows read an input row for the blocks from output column `ox0` on: the
/// 16-float pieces from column `base = ox0·S − pad_left` on, and each piece's load mask (the
/// lanes inside the row).
struct Dw3Pieces {
    base: isize,
    masks: [__mmask16; DW3_PIECES],
}

impl Dw3Pieces {
    /// The pieces for horizontal stride `S`.
    fn new<const S: usize>(g: &DwPlane, ox0: usize) -> Self {
        let base = (ox0 * S) as isize - g.pad_left as isize;
        Dw3Pieces {
            base,
            masks: std::array::from_fn(|t| lane_mask(base + 16 * t as isize, g.in_w)),
        }
    }
}

/// The inputs of the three kernel columns for `NB` 16-column blocks of one input row `row` at
/// horizontal stride `S` (1 or 2): `v[kx][b]` lane `i` is `row[base + S·(16b + i) + kx]`, zero
/// outside the row. Each 16-float piece of the row is loaded once (masked to the row), and
/// the taps are its lanes shifted (`valignd`) or, at stride 2, its even and odd lanes.
///
/// # Safety
/// The lanes the masks of `p` select, from `row + p.base`, are readable.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn dw3_inputs<const S: usize, const NB: usize>(
    row: *const f32,
    p: &Dw3Pieces,
) -> [[__m512; NB]; 3] {
    // SAFETY: masked-off lanes are not accessed, the others are readable (contract);
    // `wrapping_offset` keeps the address arithmetic defined.
    let piece = |t: usize| unsafe {
        _mm512_maskz_loadu_ps(p.masks[t], row.wrapping_offset(p.base + 16 * t as isize))
    };
    let mut v = [[_mm512_setzero_ps(); NB]; 3];
    let [v0, v1, v2] = &mut v;
    if S == 1 {
        let mut lo = piece(0);
        for (b, ((v0, v1), v2)) in v0.iter_mut().zip(v1).zip(v2).enumerate() {
            let hi = piece(b + 1);
            *v0 = lo;
            *v1 = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
                _mm512_castps_si512(hi),
                _mm512_castps_si512(lo),
            ));
            *v2 = _mm512_castsi512_ps(_mm512_alignr_epi32::<2>(
                _mm512_castps_si512(hi),
                _mm512_castps_si512(lo),
            ));
            lo = hi;
        }
    } else {
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        let mut first = piece(0);
        for (b, ((v0, v1), v2)) in v0.iter_mut().zip(v1).zip(v2).enumerate() {
            let second = piece(2 * b + 1);
            let next = piece(2 * b + 2);
            let e = _mm512_permutex2var_ps(first, even, second);
            *v0 = e;
            *v1 = _mm512_permutex2var_ps(first, odd, second);
            // Lanes 1..16 of the even lanes, then the next piece's first float.
            *v2 = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
                _mm512_castps_si512(next),
                _mm512_castps_si512(e),
            ));
            first = next;
        }
    }
    v
}

/// Prefetches `lines` 64-byte lines from column `base` on of `rows` rows `ld` apart from `x`.
#[inline(never)]
fn prefetch_rows(x: *const f32, ld: usize, rows: usize, base: isize, lines: usize) {
    for j in 0..rows {
        let row = x.wrapping_add(j * ld);
        for t in 0..lines {
            let q = row.wrapping_offset(base + 16 * t as isize);
            // SAFETY: a prefetch is a hint that never faults, on any address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(q as *const i8) };
        }
    }
}

/// [`depthwise_rows`] for a 3×3 filter with equal strides `S` (1 or 2) and vertical dilation 1:
/// its nine weights stay in registers, and [`DW_ROWS`] output rows are computed together, each
/// input row loaded once ([`dw3_inputs`]) for all the rows it feeds. One row at a time loaded
/// each input row three times per kernel column, and its masks and column starts did not fit
/// in registers beside it (the loop spent more on reloading them than on its FMAs:
/// `kernel_bench`, 1 thread, 144 channels at 56² 28 → 40–50 GFLOP/s, 576 at 14² 21 → 40–50).
///
/// # Safety
/// As [`depthwise_rows`], with `kh = kw = 3`, `stride_h = S`, `dilation_h = 1`, and `pieces`
/// made for `g` and `ox0`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn depthwise_rows_3x3<const S: usize, const NB: usize, const PF: bool>(
    g: &DwPlane,
    (x, w, out): (*const f32, *const f32, *mut f32),
    bias: f32,
    ox0: usize,
    pieces: &Dw3Pieces,
    clamp: Option<(__m512, __m512)>,
) {
    // SAFETY: `w` holds the filter's 9 floats (contract).
    let wv: [__m512; 9] = std::array::from_fn(|i| _mm512_set1_ps(unsafe { *w.add(i) }));
    let mut oy0 = 0;
    while oy0 < g.oh {
        let mut acc = [[_mm512_set1_ps(bias); NB]; DW_ROWS];
        // Input row `top + j` feeds output row `oy0 + r` through kernel row `j - r·S`.
        let top = (oy0 * S) as isize - g.pad_top as isize;
        // The input rows that the step after next reads first (those the next step does not),
        // fetched meanwhile: a plane from beyond L2 otherwise waits on every row.
        let ahead = top + ((2 * DW_ROWS - 1) * S + 3) as isize;
        if PF && (0..g.in_h as isize).contains(&ahead) {
            let rows = (g.in_h - ahead as usize).min(DW_ROWS * S);
            prefetch_rows(
                x.wrapping_add(ahead as usize * g.in_w),
                g.in_w,
                rows,
                pieces.base,
                2 * NB + 1,
            );
        }
        for j in 0..(DW_ROWS - 1) * S + 3 {
            let iy = top + j as isize;
            if iy < 0 || iy >= g.in_h as isize {
                continue;
            }
            // SAFETY: the pieces' masks select the columns `0..in_w` of row `iy < in_h`,
            // inside `x`.
            let v = unsafe { dw3_inputs::<S, NB>(x.wrapping_add(iy as usize * g.in_w), pieces) };
            for (r, acc) in acc.iter_mut().enumerate() {
                let Some(ky) = j.checked_sub(r * S).filter(|&ky| ky < 3) else {
                    continue;
                };
                for (kx, v) in v.iter().enumerate() {
                    for (a, &v) in acc.iter_mut().zip(v) {
                        *a = _mm512_fmadd_ps(wv[ky * 3 + kx], v, *a);
                    }
                }
            }
        }
        // Rows past the plane's end (the last block) were computed but are not stored.
        for (r, &sums) in acc.iter().enumerate().take(g.oh - oy0) {
            // SAFETY: row `oy0 + r < oh` of the plane's output, `ox0 < ow` (contract).
            unsafe { store_dw_row(g, out, (oy0 + r, ox0), sums, clamp) };
        }
        oy0 += DW_ROWS;
    }
}

/// The rows of one plane of [`depthwise_blocks`], with its column starts and load masks.
///
/// # Safety
/// As [`depthwise_planes`] for one plane whose input, filter and output start at `x`, `w`
/// and `out`, with `ox0 < ow`.
#[target_feature(enable = "avx512f")]
#[inline]
#[allow(clippy::type_complexity)]
unsafe fn depthwise_rows<const S: usize, const NB: usize>(
    g: &DwPlane,
    (x, w, out): (*const f32, *const f32, *mut f32),
    bias: f32,
    ox0: usize,
    (start, masks): (
        &[[isize; NB]; DW_MAX_KW],
        &[[(__mmask16, __mmask16); NB]; DW_MAX_KW],
    ),
    even_idx: __m512i,
    clamp: Option<(__m512, __m512)>,
) {
    for oy in 0..g.oh {
        let mut even = [_mm512_set1_ps(bias); NB];
        let mut odd = [_mm512_setzero_ps(); NB];
        // Adds kernel row `ky` into `acc` (skipped when the row falls in the padding). A macro
        // rather than a choice of `&mut even` or `&mut odd` at run time: a reference chosen at
        // run time keeps both arrays in memory, and every FMA then waits on a store.
        macro_rules! kernel_row {
            ($ky:expr, $acc:ident) => {{
                let ky = $ky;
                let iy = (oy * g.stride_h + ky * g.dilation_h) as isize - g.pad_top as isize;
                if iy >= 0 && iy < g.in_h as isize {
                    // Rows outside the image were skipped, so `row` is the start of an input
                    // row.
                    let row = x.wrapping_add(iy as usize * g.in_w);
                    for kx in 0..g.kw {
                        // SAFETY: `w` holds `kh·kw` floats (contract). Loads are masked to the
                        // columns `0..in_w` of row `iy < in_h` (masked-off lanes are not
                        // accessed), so they stay inside `x`; `wrapping_offset` keeps the
                        // address arithmetic defined.
                        unsafe {
                            let wv = _mm512_set1_ps(*w.add(ky * g.kw + kx));
                            for b in 0..NB {
                                let p = row.wrapping_offset(start[kx][b]);
                                let v = dw_inputs::<S>(p, masks[kx][b], even_idx);
                                $acc[b] = _mm512_fmadd_ps(wv, v, $acc[b]);
                            }
                        }
                    }
                }
            }};
        }
        // Even kernel rows into `even`, odd ones into `odd`: two independent FMA chains.
        for pair in 0..g.kh.div_ceil(2) {
            kernel_row!(2 * pair, even);
            if 2 * pair + 1 < g.kh {
                kernel_row!(2 * pair + 1, odd);
            }
        }
        let sums: [__m512; NB] = std::array::from_fn(|b| _mm512_add_ps(even[b], odd[b]));
        // SAFETY: row `oy < oh` of the plane's output, `ox0 < ow` (contract).
        unsafe { store_dw_row(g, out, (oy, ox0), sums, clamp) };
    }
}
