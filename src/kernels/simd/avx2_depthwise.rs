//! AVX2+FMA depthwise-convolution plane kernels (the counterpart of `avx512_depthwise`, with
//! 8-lane vectors and 16 registers): 3×3 filters in tiles of four output rows by two 8-column
//! blocks (eight accumulator chains), any other kernel a row at a time. Padding is read as
//! zeros by masked loads at the image's edges and from a row of zeros above and below, never
//! materialised.

use std::arch::x86_64::*;

use super::{DwPlane, DW_MAX_KW};

/// `planes` consecutive planes of a depthwise convolution with horizontal stride `S` (1 or 2)
/// and dilation 1, plane `c` reading input plane `c` of `x` (`in_plane` floats apart), filter
/// `c` of `w` (`kh·kw` each) and bias `c` (0 when `bias` is null), writing output plane `c`
/// (`out_plane` floats apart):
/// `out[c][oy][ox] = bias[c] + Σ_ky Σ_kx w[c][ky][kx] · x[c][oy·sh + ky·dh − pad_top][ox·S + kx − pad_left]`,
/// positions outside the input reading as zero, clamped to `g.clamp` when it is set.
///
/// # Safety
/// - The CPU supports AVX2 and FMA.
/// - `x` is valid for reads of `(planes−1)·in_plane + in_h·in_w` floats, `w` of `planes·kh·kw`,
///   `bias` (when not null) of `planes`, `out` for writes of `(planes−1)·out_plane + oh·ow`
///   and does not overlap `x`; `kw ≤ DW_MAX_KW`; `in_w` and `ow·S + kw + 16` fit in `i32`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn depthwise_planes<const S: usize>(
    g: &DwPlane,
    planes: usize,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    out: *mut f32,
) {
    let rows_3x3 =
        g.kh == 3 && g.kw == 3 && g.dilation_h == 1 && g.stride_h == S && zero_row_fits(g);
    let w_len = g.kh * g.kw;
    for c in 0..planes {
        // SAFETY: plane `c < planes` of each buffer (contract).
        let (xc, wc, oc) = unsafe {
            (
                x.add(c * g.in_plane),
                w.add(c * w_len),
                out.add(c * g.out_plane),
            )
        };
        // SAFETY: as above (a non-null `bias` holds `planes` floats).
        let b = if bias.is_null() {
            0.0
        } else {
            unsafe { *bias.add(c) }
        };
        // SAFETY: one plane of the contract's buffers; a 3×3 filter for `plane_3x3`.
        unsafe {
            if rows_3x3 {
                plane_3x3::<S>(g, xc, wc, b, oc)
            } else {
                plane_any::<S>(g, xc, wc, b, oc)
            }
        }
    }
}

/// Floats of [`ZEROS`], the row that rows above and below the input read as.
const ZEROS_LEN: usize = 2048;
/// Floats of [`ZEROS`] before the column it stands for as column 0 (left padding).
const ZEROS_LEFT: usize = 16;
/// A row of zeros, for the rows of a tile above and below the input ([`tile_rows`]).
static ZEROS: [f32; ZEROS_LEN] = [0.0; ZEROS_LEN];

/// Whether [`ZEROS`] can stand for an input row of `g` in [`plane_3x3`] (whose blocks read
/// from `−pad_left` to `ow·S + 24` columns at most).
fn zero_row_fits(g: &DwPlane) -> bool {
    g.pad_left <= ZEROS_LEFT && g.ow * 2 + 24 + ZEROS_LEFT <= ZEROS_LEN && g.in_w * 2 < ZEROS_LEN
}

/// Output rows a tile of [`plane_3x3`] computes together: each input row is loaded once for
/// every row it feeds (up to three at stride 1).
const ROWS: usize = 4;

/// Most 8-column blocks of one tile of [`plane_3x3`]: with [`ROWS`] rows, eight independent
/// accumulator chains (two FMAs a cycle at a latency of four need eight), and the three taps
/// of a row beside them in the 16 registers; the weights are read from memory by the FMAs.
const BLOCKS: usize = 2;

/// One plane of [`depthwise_planes`] with a 3×3 filter, vertical stride `S` and dilation 1, in
/// tiles of [`ROWS`] output rows by up to [`BLOCKS`] blocks of 8 columns ([`tile_s1`], [`tile_s2`]). Rows at
/// least 8 wide end with a block moved back to end at the row's end (its first columns
/// computed twice, to the same values), so every store is whole; narrower rows store 8 lanes,
/// spilling into the rows after (written later), except where that would pass the plane's
/// end. At stride 2 the taps hold their columns in the order `0 1 4 5 2 3 6 7` (one in-lane
/// shuffle each), and the sums are put in order once, before the store.
///
/// # Safety
/// As [`depthwise_planes`] for one plane whose input, filter and output start at `x`, `w` and
/// `out`, with `kh = kw = 3`, `stride_h = S` and `dilation_h = 1`.
#[target_feature(enable = "avx2,fma")]
unsafe fn plane_3x3<const S: usize>(
    g: &DwPlane,
    x: *const f32,
    w: *const f32,
    bias: f32,
    out: *mut f32,
) {
    // The stride-2 tiles' weights (the stride-1 tiles broadcast them from `w` per tap).
    // SAFETY: `w` holds the filter's 9 floats (contract).
    let wv: [__m256; 9] = std::array::from_fn(|i| _mm256_set1_ps(unsafe { *w.add(i) }));
    let clamp = g
        .clamp
        .map(|(lo, hi)| (_mm256_set1_ps(lo), _mm256_set1_ps(hi)));
    // Input columns a block's loads cover from its first: 8 + 2 at stride 1; at stride 2 two
    // vectors from the first and two from the third.
    let span = if S == 1 { 10 } else { 18 };
    let last = g.ow.saturating_sub(8);
    let inside = |ox0: usize| {
        let base = (ox0 * S) as isize - g.pad_left as isize;
        base >= 0 && base + span <= g.in_w as isize
    };
    let mut oy0 = 0;
    while oy0 < g.oh {
        let rows = (g.oh - oy0).min(ROWS);
        let mut next = Some(0);
        while let Some(first) = next {
            // The tile's blocks: up to `BLOCKS` from `first` on.
            let mut cols = [first; BLOCKS];
            let mut n = 1;
            let mut edge = !inside(first);
            next = (first < last).then(|| (first + 8).min(last));
            while n < BLOCKS {
                let Some(c) = next else { break };
                cols[n] = c;
                edge |= !inside(c);
                n += 1;
                next = (c < last).then(|| (c + 8).min(last));
            }
            // At stride 2, the weights through an opaque reference, so that the FMAs read them
            // from memory rather than holding all nine in registers beside the accumulators
            // (at stride 1 they go unused and are not made).
            let weights = if S == 2 {
                std::hint::black_box(&wv)
            } else {
                &wv
            };
            // SAFETY: the tile's loads stay inside the input rows: unmasked only when every
            // block lies inside (`edge` false).
            let sums = unsafe {
                match (S, n, edge) {
                    (1, 1, false) => spread(tile_s1::<1, false>(g, x, w, bias, oy0, cols)),
                    (1, 1, true) => spread(tile_s1::<1, true>(g, x, w, bias, oy0, cols)),
                    (1, _, false) => tile_s1::<BLOCKS, false>(g, x, w, bias, oy0, cols),
                    (1, _, true) => tile_s1::<BLOCKS, true>(g, x, w, bias, oy0, cols),
                    (_, 1, false) => spread(tile_s2::<1, false>(g, x, weights, bias, oy0, cols)),
                    (_, 1, true) => spread(tile_s2::<1, true>(g, x, weights, bias, oy0, cols)),
                    (_, _, false) => tile_s2::<BLOCKS, false>(g, x, weights, bias, oy0, cols),
                    (_, _, true) => tile_s2::<BLOCKS, true>(g, x, weights, bias, oy0, cols),
                }
            };
            for (r, row) in sums.iter().enumerate().take(rows) {
                for (&ox0, &sum) in cols.iter().zip(row).take(n) {
                    // SAFETY: row `oy0 + r < oh`, block from `ox0 ≤ last` (contract).
                    unsafe { store_block::<S>(g, out, (oy0 + r, ox0), sum, clamp) };
                }
            }
        }
        oy0 += ROWS;
    }
}

/// A one-block tile's sums in the shape of a [`BLOCKS`]-block tile's (the other blocks unused).
#[inline(always)]
fn spread(sums: [[__m256; 1]; ROWS]) -> [[__m256; BLOCKS]; ROWS] {
    sums.map(|[v]| [v; BLOCKS])
}

/// Stores the 8 sums of the block of output row `oy` from column `ox0` of [`plane_3x3`]
/// (ordered first at stride 2, clamped when `clamp` is set).
///
/// # Safety
/// As [`plane_3x3`], with `oy < oh` and `ox0 ≤ max(ow − 8, 0)`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn store_block<const S: usize>(
    g: &DwPlane,
    out: *mut f32,
    (oy, ox0): (usize, usize),
    sum: __m256,
    clamp: Option<(__m256, __m256)>,
) {
    let mut v = sum;
    if S == 2 {
        v = _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(v)));
    }
    if let Some((lo, hi)) = clamp {
        // max(lo, v) and min(hi, v) return v when it is NaN (the second operand).
        v = _mm256_min_ps(hi, _mm256_max_ps(lo, v));
    }
    let at = oy * g.ow + ox0;
    if at + 8 <= g.oh * g.ow {
        // SAFETY: floats `at .. at + 8` lie inside the plane's `oh·ow`; those past this row's
        // end (only when `ow < 8`) belong to later rows, stored after this one.
        unsafe { _mm256_storeu_ps(out.add(at), v) };
    } else {
        let n = g.ow.min(8);
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 floats; `out[at .. at + n]` is this row's last `n ≤ ow`
        // columns from `ox0`, inside the plane.
        unsafe {
            _mm256_storeu_ps(lanes.as_mut_ptr(), v);
            std::ptr::copy_nonoverlapping(lanes.as_ptr(), out.add(at), n);
        }
    }
}

/// The input rows `top .. top + N` of a plane (`top` may be negative), the rows outside the
/// input standing for the zero row, so that a tile is straight-line code.
fn tile_rows<const N: usize>(g: &DwPlane, x: *const f32, top: isize) -> [*const f32; N] {
    std::array::from_fn(|j| {
        let iy = top + j as isize;
        if iy < 0 || iy >= g.in_h as isize {
            ZEROS.as_ptr().wrapping_add(ZEROS_LEFT)
        } else {
            x.wrapping_add(iy as usize * g.in_w)
        }
    })
}

/// The sums of one tile of [`plane_3x3`] at stride 2: output rows `oy0 .. oy0 + ROWS` (those
/// past the plane are computed and dropped by the caller) of the `NB` blocks of 8 columns from
/// `cols[b]` on, starting from `bias`, their lanes in the order `0 1 4 5 2 3 6 7`. Each input
/// row's three taps are made once per block (two vectors from the block's first column, their
/// even and odd lanes, and the even lanes of two from the third) and multiplied into the one or
/// two rows they feed, the weights `wv` read from memory. With `EDGE` the loads are masked to
/// the row.
///
/// # Safety
/// As [`plane_3x3`]; without `EDGE`, every block's input columns `2·cols[b] − pad_left + 0 ..
/// 18` lie inside the row.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn tile_s2<const NB: usize, const EDGE: bool>(
    g: &DwPlane,
    x: *const f32,
    wv: &[__m256; 9],
    bias: f32,
    oy0: usize,
    cols: [usize; BLOCKS],
) -> [[__m256; NB]; ROWS] {
    const OFFSETS: [isize; 4] = [0, 8, 2, 10];
    let bases: [isize; NB] = std::array::from_fn(|b| (cols[b] * 2) as isize - g.pad_left as isize);
    let masks: [[__m256i; 4]; NB] = std::array::from_fn(|b| {
        std::array::from_fn(|i| {
            if EDGE {
                // SAFETY: AVX2 is enabled; columns fit in i32 (contract).
                unsafe { lane_mask(bases[b] + OFFSETS[i], g.in_w) }
            } else {
                _mm256_setzero_si256()
            }
        })
    });
    let mut acc = [[_mm256_set1_ps(bias); NB]; ROWS];
    let top = (oy0 * 2) as isize - g.pad_top as isize;
    let rows = tile_rows::<{ (ROWS - 1) * 2 + 3 }>(g, x, top);
    for (j, &row) in rows.iter().enumerate() {
        for b in 0..NB {
            // SAFETY: `row` is an input row or the zero row (`zero_row_fits`); the loads are
            // inside its columns (contract) or masked to them (masked-off lanes are not
            // accessed); `wrapping_offset` keeps the address arithmetic defined.
            let load = |i: usize| unsafe {
                let p = row.wrapping_offset(bases[b] + OFFSETS[i]);
                if EDGE {
                    _mm256_maskload_ps(p, masks[b][i])
                } else {
                    _mm256_loadu_ps(p)
                }
            };
            let (lo, hi) = (load(0), load(1));
            let (lo2, hi2) = (load(2), load(3));
            let taps = [
                _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi),
                _mm256_shuffle_ps::<0b11_01_11_01>(lo, hi),
                _mm256_shuffle_ps::<0b10_00_10_00>(lo2, hi2),
            ];
            for (r, acc) in acc.iter_mut().enumerate() {
                let Some(ky) = j.checked_sub(2 * r).filter(|&ky| ky < 3) else {
                    continue;
                };
                for (kx, &v) in taps.iter().enumerate() {
                    acc[b] = _mm256_fmadd_ps(wv[ky * 3 + kx], v, acc[b]);
                }
            }
        }
    }
    acc
}

/// The sums of one tile of [`plane_3x3`] at stride 1 (as [`tile_s2`], lanes in order), with
/// the weights stationary: per filter tap, its weight is broadcast once and multiplied into
/// every row and block of the tile, the FMAs reading the inputs straight from the rows (eight
/// accumulators and a weight in registers; holding each input row's taps for the three rows
/// they feed left too few registers and spilled the accumulators).
///
/// # Safety
/// As [`plane_3x3`]; without `EDGE`, every block's input columns `cols[b] − pad_left + 0 ..
/// 10` lie inside the row.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn tile_s1<const NB: usize, const EDGE: bool>(
    g: &DwPlane,
    x: *const f32,
    w: *const f32,
    bias: f32,
    oy0: usize,
    cols: [usize; BLOCKS],
) -> [[__m256; NB]; ROWS] {
    let bases: [isize; NB] = std::array::from_fn(|b| cols[b] as isize - g.pad_left as isize);
    let rows = tile_rows::<{ ROWS + 2 }>(g, x, oy0 as isize - g.pad_top as isize);
    let mut acc = [[_mm256_set1_ps(bias); NB]; ROWS];
    for kx in 0..3 {
        let masks: [__m256i; NB] = std::array::from_fn(|b| {
            if EDGE {
                // SAFETY: AVX2 is enabled; columns fit in i32 (contract).
                unsafe { lane_mask(bases[b] + kx as isize, g.in_w) }
            } else {
                _mm256_setzero_si256()
            }
        });
        for ky in 0..3 {
            // SAFETY: `w` holds the filter's 9 floats (contract).
            let wv = unsafe { _mm256_broadcast_ss(&*w.add(ky * 3 + kx)) };
            for (r, acc) in acc.iter_mut().enumerate() {
                let row = rows[r + ky];
                for b in 0..NB {
                    let p = row.wrapping_offset(bases[b] + kx as isize);
                    // SAFETY: `row` is an input row or the zero row (`zero_row_fits`); the
                    // load is inside its columns (contract) or masked to them.
                    let v = unsafe {
                        if EDGE {
                            _mm256_maskload_ps(p, masks[b])
                        } else {
                            _mm256_loadu_ps(p)
                        }
                    };
                    acc[b] = _mm256_fmadd_ps(wv, v, acc[b]);
                }
            }
        }
    }
    acc
}

/// Lanes `i < 8` whose column `start + i` lies in `0..len`, as an all-ones/all-zeros lane mask.
///
/// # Safety
/// The CPU supports AVX2; `start` and `len` fit in `i32` with `start + 8` (checked by callers).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn lane_mask(start: isize, len: usize) -> __m256i {
    let idx = _mm256_add_epi32(
        _mm256_set1_epi32(start as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    );
    let ge0 = _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(-1));
    let lt = _mm256_cmpgt_epi32(_mm256_set1_epi32(len as i32), idx);
    _mm256_and_si256(ge0, lt)
}

/// Loads the 8 floats at `p`, the lanes outside `mask` reading as zero; a full mask is a plain
/// load (faster than a masked one).
///
/// # Safety
/// The CPU supports AVX2; the lanes selected by `mask` are readable. Unselected lanes are not
/// accessed (AVX masked loads suppress their faults).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn load_masked(p: *const f32, mask: __m256i, full: bool) -> __m256 {
    // SAFETY: per the contract, every lane read is readable.
    unsafe {
        if full {
            _mm256_loadu_ps(p)
        } else {
            _mm256_maskload_ps(p, mask)
        }
    }
}

/// One plane of a depthwise convolution of any kernel size (at most [`DW_MAX_KW`] wide) with
/// horizontal stride `S` (1 or 2) and dilation 1, positions outside the input reading as zero
/// (padding is never materialised): columns in groups of up to four 8-wide blocks, two
/// accumulator chains (even and odd kernel rows) per block, load masks computed once per group.
///
/// # Safety
/// - The CPU supports AVX2 and FMA.
/// - `x` is valid for reads of `in_h·in_w` floats, `w` of `kh·kw`, `out` for writes of `oh·ow`
///   and does not overlap `x`; `kw ≤ DW_MAX_KW`; `in_w` and `ow·S + kw + 16` fit in `i32`.
#[target_feature(enable = "avx2,fma")]
unsafe fn plane_any<const S: usize>(
    g: &DwPlane,
    x: *const f32,
    w: *const f32,
    bias: f32,
    out: *mut f32,
) {
    let mut ox0 = 0;
    while ox0 < g.ow {
        let blocks = (g.ow - ox0).div_ceil(8);
        // SAFETY: forwarded contract; the blocks written lie in columns `ox0..ow`.
        unsafe {
            match blocks {
                1 => depthwise_blocks::<S, 1>(g, x, w, bias, out, ox0),
                2 => depthwise_blocks::<S, 2>(g, x, w, bias, out, ox0),
                3 => depthwise_blocks::<S, 3>(g, x, w, bias, out, ox0),
                _ => depthwise_blocks::<S, 4>(g, x, w, bias, out, ox0),
            }
        }
        ox0 += 8 * blocks.min(4);
    }
}

/// Columns `ox0 .. ox0 + 8·NB` of every row of [`plane_any`].
///
/// # Safety
/// As [`plane_any`], with `ox0 < ow`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn depthwise_blocks<const S: usize, const NB: usize>(
    g: &DwPlane,
    x: *const f32,
    w: *const f32,
    bias: f32,
    out: *mut f32,
    ox0: usize,
) {
    // Per kernel column and block: where its 8 (strided) inputs start, the load masks of the
    // 8-lane halves (two when S = 2), and whether they are full.
    let zero = _mm256_setzero_si256();
    let mut start = [[0isize; NB]; DW_MAX_KW];
    let mut masks = [[(zero, zero); NB]; DW_MAX_KW];
    let mut full = [[false; NB]; DW_MAX_KW];
    for kx in 0..g.kw {
        for b in 0..NB {
            let s0 = ((ox0 + 8 * b) * S + kx) as isize - g.pad_left as isize;
            start[kx][b] = s0;
            // SAFETY: AVX2 is enabled; columns fit in i32 (contract).
            let (m0, m1) = unsafe { (lane_mask(s0, g.in_w), lane_mask(s0 + 8, g.in_w)) };
            let all = |m: __m256i| _mm256_movemask_ps(_mm256_castsi256_ps(m)) == 0xFF;
            full[kx][b] = all(m0) && (S == 1 || all(m1));
            masks[kx][b] = (m0, m1);
        }
    }
    let clamp = g
        .clamp
        .map(|(lo, hi)| (_mm256_set1_ps(lo), _mm256_set1_ps(hi)));
    for oy in 0..g.oh {
        let mut even = [_mm256_set1_ps(bias); NB];
        let mut odd = [_mm256_setzero_ps(); NB];
        let mut last = [_mm256_setzero_ps(); NB];
        // Adds kernel row `ky` into `acc` (skipped when the row falls in the padding); a macro
        // so that the accumulators stay in registers (see the AVX-512 kernel).
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
                        // columns `0..in_w` of row `iy < in_h` (a full mask means all 8 lanes
                        // are inside), so they stay inside `x`; `wrapping_offset` keeps the
                        // address arithmetic defined.
                        unsafe {
                            let wv = _mm256_set1_ps(*w.add(ky * g.kw + kx));
                            for b in 0..NB {
                                let (m0, m1) = masks[kx][b];
                                let f = full[kx][b];
                                let p = row.wrapping_offset(start[kx][b]);
                                let lo = load_masked(p, m0, f);
                                let v = if S == 1 {
                                    lo
                                } else {
                                    let hi = load_masked(p.wrapping_add(8), m1, f);
                                    // [lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6] → [lo0 lo2 lo4 lo6 hi0 … hi6]
                                    let t = _mm256_shuffle_ps::<0b10_00_10_00>(lo, hi);
                                    _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(
                                        _mm256_castps_pd(t),
                                    ))
                                };
                                $acc[b] = _mm256_fmadd_ps(wv, v, $acc[b]);
                            }
                        }
                    }
                }
            }};
        }
        if g.kh == 3 {
            // A 3×3 filter: a chain of three FMAs per kernel row (even and odd rows would
            // make one of six, whose latency bounds planes of one or two blocks).
            kernel_row!(0, even);
            kernel_row!(1, odd);
            kernel_row!(2, last);
        } else {
            // Even kernel rows into `even`, odd ones into `odd`: two independent FMA chains.
            for pair in 0..g.kh.div_ceil(2) {
                kernel_row!(2 * pair, even);
                if 2 * pair + 1 < g.kh {
                    kernel_row!(2 * pair + 1, odd);
                }
            }
        }
        for b in 0..NB {
            let o = ox0 + 8 * b;
            if o >= g.ow {
                break;
            }
            let n = (g.ow - o).min(8);
            let mut sum = _mm256_add_ps(_mm256_add_ps(even[b], odd[b]), last[b]);
            if let Some((lo, hi)) = clamp {
                // max(lo, v) and min(hi, v) return v when it is NaN (the second operand).
                sum = _mm256_min_ps(hi, _mm256_max_ps(lo, sum));
            }
            let dst = out.wrapping_add(oy * g.ow + o);
            // SAFETY: lanes `0..n` are `out[oy·ow + o ..][..n]`, inside the `oh·ow` floats.
            unsafe {
                if n == 8 {
                    _mm256_storeu_ps(dst, sum);
                } else {
                    _mm256_maskstore_ps(dst, lane_mask(0, n), sum);
                }
            }
        }
    }
}
