//! AVX-512 max pooling of whole planes for windows 2 or 3 wide at horizontal stride 2 (ResNet's
//! and GoogLeNet's 3×3 stride-2 stem pooling, VGG's and U-Net's 2×2): per output row, the
//! window rows' maximum and the horizontal maximum in registers, 16 outputs at a time, with no
//! intermediate row. Positions outside the row (the padding) are masked off and read as −∞, so
//! the edge columns take the same path as the others.
#![allow(clippy::incompatible_msrv)] // AVX-512 intrinsics are stable since Rust 1.89.

use std::arch::x86_64::*;

use super::avx512_depthwise::lane_mask;

/// The maximum of `a` and `b`, a NaN when either is NaN (`VMAXPS` alone returns its second
/// operand when either is NaN, and `VRANGEPS` returns the number, so the NaN lanes of `b` are
/// put back).
#[target_feature(enable = "avx512f")]
#[inline]
fn max_nan(a: __m512, b: __m512) -> __m512 {
    let m = _mm512_max_ps(b, a);
    _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(b, b), b)
}

/// Geometry of one plane for [`max_plane_stride2`].
pub(super) struct PlaneRows<'a> {
    /// Per output row, the window taps `ky0..ky1` inside the input (empty: the row is −∞).
    pub taps: &'a [(usize, usize)],
    /// Input width.
    pub in_w: usize,
    /// Vertical stride, top padding and dilation: window row `ky` of output row `oy` is input
    /// row `oy·stride − pad + ky·dilation`.
    pub stride_pad_dilation: (usize, usize, usize),
    /// Output width and left padding: output column `ox` reads input columns
    /// `2·ox − pad_left + kx`.
    pub out_w_pad_left: (usize, usize),
    /// Input rows ahead of a window's last row whose lines are prefetched.
    pub ahead_rows: usize,
}

/// Max pooling of one plane `x` (`taps.len()` output rows of `out_w` into `out`) with windows
/// `KW` (2 or 3) wide at horizontal stride 2: each output is the maximum of its window's values
/// inside the input, a NaN when any of them is NaN, −∞ when none is inside.
///
/// # Safety
/// - The CPU supports AVX-512F.
/// - For each output row `oy < taps.len()` with `ky0 < ky1`: `ky1 − ky0 ≤ 16`, and input rows
///   `oy·stride − pad + ky·dilation` (`ky0 ≤ ky < ky1`) are rows of `x` (`in_w` floats each);
///   `out` is writable for `taps.len() · out_w` floats and overlaps no input.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn max_plane_stride2<const KW: usize>(
    g: &PlaneRows,
    x: *const f32,
    out: *mut f32,
) {
    let (stride, pad, dilation) = g.stride_pad_dilation;
    let (out_w, pad_left) = g.out_w_pad_left;
    let idx = (
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31),
    );
    let mut rows = [std::ptr::null::<f32>(); 16];
    for (oy, &(ky0, ky1)) in g.taps.iter().enumerate() {
        // SAFETY: output row `oy` of the `taps.len() · out_w` floats (contract).
        let orow = unsafe { out.add(oy * out_w) };
        let n_rows = ky1.saturating_sub(ky0);
        if n_rows > 0 {
            // The window's first row inside the input (so `oy·stride + ky0·dilation ≥ pad`).
            let first = oy * stride + ky0 * dilation - pad;
            for (i, r) in rows.iter_mut().enumerate().take(n_rows) {
                *r = x.wrapping_add((first + i * dilation) * g.in_w);
            }
        }
        let mut ox0 = 0;
        while ox0 < out_w {
            let m = (out_w - ox0).min(16);
            // The inputs of outputs ox0 .. ox0 + m start at column `s` (negative in the left
            // padding): three 16-float pieces (the third for the one float past 32 that the
            // last 3-wide window reads), lanes outside the row masked off.
            let s = (2 * ox0) as isize - pad_left as isize;
            let masks: [__mmask16; 3] =
                std::array::from_fn(|t| lane_mask(s + 16 * t as isize, g.in_w));
            if n_rows > 0 {
                // SAFETY: `n_rows ≥ 1` pointers were just set.
                let last = unsafe { *rows.as_ptr().add(n_rows - 1) }.wrapping_offset(s);
                for ahead in [g.ahead_rows, g.ahead_rows + 1] {
                    // Only prefetched: any address will do.
                    let q = last.wrapping_add(ahead.wrapping_mul(g.in_w));
                    _mm_prefetch::<_MM_HINT_T0>(q as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(16) as *const i8);
                }
            }
            // SAFETY: each of the `n_rows` pointers is a row of `x` (contract), read in the
            // lanes `masks` selects (inside the row).
            let (y, clean) = unsafe { block::<KW, false>(&rows[..n_rows], s, &masks, &idx) };
            // A NaN (or +∞ and −∞ in one lane) among the inputs: this block again, with every
            // maximum NaN-propagating (`VMAXPS` alone would drop NaNs).
            let y = if clean {
                y
            } else {
                // SAFETY: as above.
                unsafe { block::<KW, true>(&rows[..n_rows], s, &masks, &idx).0 }
            };
            let store = if m == 16 {
                0xFFFF
            } else {
                ((1u32 << m) - 1) as __mmask16
            };
            // SAFETY: lanes `0..m` are `out[oy·out_w + ox0 ..][..m]`, inside the output row.
            unsafe { _mm512_mask_storeu_ps(orow.add(ox0), store, y) };
            ox0 += m;
        }
    }
}

/// Outputs `i < 16` of one block: the maximum over `rows` and `t < KW` of column `s + 2i + t`
/// (lanes outside the row, per `masks`, read as −∞), with NaN-propagating maxima when `EXACT`
/// and plain `VMAXPS` otherwise; and whether the inputs were all clean (their sum not NaN:
/// no NaN, and no +∞ meeting a −∞), in which case the plain maxima are exact.
///
/// # Safety
/// The CPU supports AVX-512F; every row pointer is readable in the lanes `masks[t]` selects
/// from `s + 16t` on, `t < KW`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn block<const KW: usize, const EXACT: bool>(
    rows: &[*const f32],
    s: isize,
    masks: &[__mmask16; 3],
    (even, odd): &(__m512i, __m512i),
) -> (__m512, bool) {
    let max = |a: __m512, b: __m512| {
        if EXACT {
            max_nan(a, b)
        } else {
            _mm512_max_ps(a, b)
        }
    };
    let none = _mm512_set1_ps(f32::NEG_INFINITY);
    let mut v = [none; 3];
    let mut sum = _mm512_setzero_ps();
    for &row in rows {
        for (t, vt) in v.iter_mut().enumerate().take(KW) {
            // SAFETY: the lanes `masks[t]` selects are readable (contract), the others read
            // as −∞.
            let piece = unsafe {
                _mm512_mask_loadu_ps(none, masks[t], row.wrapping_offset(s + 16 * t as isize))
            };
            *vt = max(*vt, piece);
            if !EXACT {
                sum = _mm512_add_ps(sum, piece);
            }
        }
    }
    // Lane i: column s + 2i of the rows' maximum, then s + 2i + 1, then s + 2i + 2 (the even
    // lanes shifted down one, the next piece's first float last).
    let e = _mm512_permutex2var_ps(v[0], *even, v[1]);
    let o = _mm512_permutex2var_ps(v[0], *odd, v[1]);
    let mut y = max(e, o);
    if KW == 3 {
        let e2 = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
            _mm512_castps_si512(v[2]),
            _mm512_castps_si512(e),
        ));
        y = max(y, e2);
    }
    let clean = EXACT || _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(sum, sum) == 0;
    (y, clean)
}
