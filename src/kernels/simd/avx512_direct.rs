//! AVX-512F direct convolution for few input channels (an image's three colour planes): each
//! output row is computed in 16-wide column vectors, four output channels at a time, every
//! kernel tap's input vectors loaded once and multiplied by the four channels' weights.
#![allow(clippy::incompatible_msrv)] // AVX-512 intrinsics are stable since Rust 1.89.

use std::arch::x86_64::*;

use super::avx512_depthwise::lane_mask;
use super::direct::{DirectGeometry, DIRECT_OCB};

/// Most 16-wide column vectors of a row computed together: with [`DIRECT_OCB`] channels, 24
/// accumulators, the four weights and one input vector fit in the 32 registers.
const MAX_VECTORS: usize = 6;

/// Rows `r0..r1` of one block of four output channels:
/// `dst[o][(oy − r0)·ow + ox] = clamp(bias[o] + Σ_t w[t][o] · x[taps[t] + oy·row_step + ox])`,
/// with `w` the block's weights (`taps.len() · 4` floats, tap by tap) and `bias` its four
/// biases; a null `dst[o]` (a channel past the last) is not written. With
/// `clamp = Some((lo, hi))` every output is clamped to `min(max(v, lo), hi)` (NaN kept).
///
/// # Safety
/// - The CPU supports AVX-512F.
/// - `x` is valid for reads of `max(taps) + (r1 − 1)·row_step + ow` floats when `r0 < r1`,
///   `w` of `taps.len()·4` and `bias` of 4, each non-null `dst[o]` for writes of
///   `(r1 − r0)·ow` floats, not overlapping the others or the inputs.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn direct_rows(
    g: &DirectGeometry,
    (r0, r1): (usize, usize),
    x: *const f32,
    (w, bias): (*const f32, *const f32),
    clamp: Option<(f32, f32)>,
    dst: [*mut f32; DIRECT_OCB],
) {
    let (ow, taps) = (g.ow, g.taps);
    let clamp = clamp.map(|(lo, hi)| (_mm512_set1_ps(lo), _mm512_set1_ps(hi)));
    let vectors = ow.div_ceil(16);
    // The row's vectors in near-equal chunks of at most `MAX_VECTORS` (7 → 4 + 3).
    let chunks = vectors.div_ceil(MAX_VECTORS);
    for oy in r0..r1 {
        // SAFETY: row `oy < r1` reads from `oy·row_step` on and writes `(oy − r0)·ow` floats
        // into each output (contract).
        let (row, d) = unsafe {
            let d = dst.map(|p| {
                if p.is_null() {
                    p
                } else {
                    p.add((oy - r0) * ow)
                }
            });
            (x.add(oy * g.row_step), d)
        };
        let mut v0 = 0;
        for q in 0..chunks {
            let n = (vectors - v0).div_ceil(chunks - q);
            let at = (row, w, bias, d);
            // SAFETY: forwarded contract; vectors `v0 .. v0 + n` lie in columns `0..ow`.
            unsafe {
                match n {
                    1 => chunk::<1>(taps, ow, 16 * v0, at, clamp),
                    2 => chunk::<2>(taps, ow, 16 * v0, at, clamp),
                    3 => chunk::<3>(taps, ow, 16 * v0, at, clamp),
                    4 => chunk::<4>(taps, ow, 16 * v0, at, clamp),
                    5 => chunk::<5>(taps, ow, 16 * v0, at, clamp),
                    _ => chunk::<6>(taps, ow, 16 * v0, at, clamp),
                }
            }
            v0 += n;
        }
    }
}

/// `V` column vectors from `x0` on of one output row for one block of channels: `row` is where
/// the row's column 0 reads (taps add to it), `w` the block's weights (`[tap][4]`), `bias` its
/// four biases, `dst` the four channels' output rows (null for a channel past the last).
///
/// # Safety
/// As [`direct_rows`], for this row; `x0 + 16·(V − 1) < ow`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn chunk<const V: usize>(
    taps: &[usize],
    ow: usize,
    x0: usize,
    (row, w, bias, dst): (*const f32, *const f32, *const f32, [*mut f32; DIRECT_OCB]),
    clamp: Option<(__m512, __m512)>,
) {
    let masks: [__mmask16; V] = std::array::from_fn(|v| lane_mask((x0 + 16 * v) as isize, ow));
    // SAFETY: the block's four biases (contract).
    let mut acc: [[__m512; V]; DIRECT_OCB] =
        std::array::from_fn(|o| [_mm512_set1_ps(unsafe { *bias.add(o) }); V]);
    for (t, &tap) in taps.iter().enumerate() {
        // SAFETY: tap `t`'s read of this row starts inside `x` and its vectors' lanes in the
        // masks stay below `ow` columns from it (contract); the block's weights of tap `t`.
        unsafe {
            let p = row.add(tap + x0);
            let wt = w.add(t * DIRECT_OCB);
            let k: [__m512; DIRECT_OCB] = std::array::from_fn(|o| _mm512_set1_ps(*wt.add(o)));
            for v in 0..V {
                let xv = _mm512_maskz_loadu_ps(masks[v], p.add(16 * v));
                for o in 0..DIRECT_OCB {
                    acc[o][v] = _mm512_fmadd_ps(xv, k[o], acc[o][v]);
                }
            }
        }
    }
    for (o, &d) in dst.iter().enumerate() {
        if d.is_null() {
            continue;
        }
        for v in 0..V {
            let mut s = acc[o][v];
            if let Some((lo, hi)) = clamp {
                // max(lo, v) and min(hi, v) return v when it is NaN (the second operand).
                s = _mm512_min_ps(hi, _mm512_max_ps(lo, s));
            }
            // SAFETY: the lanes in the mask are columns below `ow` of this output row.
            unsafe { _mm512_mask_storeu_ps(d.add(x0 + 16 * v), masks[v], s) };
        }
    }
}
