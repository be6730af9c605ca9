//! AVX-512F GEMM micro-kernel: an `M×32` register tile (`M ≤ 8`), two zmm accumulators per row.
#![allow(clippy::incompatible_msrv)] // AVX-512 intrinsics are stable since Rust 1.89.

use std::arch::x86_64::*;

use super::{DwPlane, DW_MAX_KW};

/// Packed A micro-panel row count (k-major stride of A).
const MR: usize = 8;
/// Packed B micro-panel width (k-major stride of B).
const NR: usize = 32;

/// Computes `C[r][0..nr] = alpha * (A·B)[r] + beta * C[r]` for rows `r < M`.
///
/// # Safety
/// - The CPU supports AVX-512F.
/// - `a` is readable for `kc * 8` floats, `b` for `kc * 32` floats.
/// - For `r < M`, `c[r]` is valid for reads and writes of `nr` floats (`1 ≤ nr ≤ 32`), and these
///   ranges do not overlap each other nor `a`/`b`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn kernel<const M: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: &[*mut f32; 8],
    nr: usize,
    alpha: f32,
    beta: f32,
) {
    let mut acc0 = [_mm512_setzero_ps(); M];
    let mut acc1 = [_mm512_setzero_ps(); M];
    for k in 0..kc {
        // SAFETY: k < kc, so `b + k*32 .. +32` and `a + k*8 .. +8` are inside the panels.
        unsafe {
            let bp = b.add(k * NR);
            let ap = a.add(k * MR);
            let b0 = _mm512_loadu_ps(bp);
            let b1 = _mm512_loadu_ps(bp.add(16));
            for i in 0..M {
                let ai = _mm512_set1_ps(*ap.add(i));
                acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
                acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
            }
        }
    }
    let m0: __mmask16 = if nr >= 16 { 0xFFFF } else { (1u16 << nr) - 1 };
    let m1: __mmask16 = if nr >= 32 {
        0xFFFF
    } else if nr > 16 {
        (1u16 << (nr - 16)) - 1
    } else {
        0
    };
    let va = _mm512_set1_ps(alpha);
    let vb = _mm512_set1_ps(beta);
    for i in 0..M {
        let p0 = c[i];
        // Masked-off lanes are neither read nor written, so `p1` may point past the row when
        // nr ≤ 16 (mask m1 is then 0); `wrapping_add` keeps the pointer arithmetic defined.
        let p1 = p0.wrapping_add(16);
        let r0 = _mm512_mul_ps(acc0[i], va);
        let r1 = _mm512_mul_ps(acc1[i], va);
        // SAFETY: lanes selected by m0/m1 are exactly c[i][0..nr], valid per the contract.
        unsafe {
            if beta == 0.0 {
                _mm512_mask_storeu_ps(p0, m0, r0);
                _mm512_mask_storeu_ps(p1, m1, r1);
            } else {
                let c0 = _mm512_maskz_loadu_ps(m0, p0);
                let c1 = _mm512_maskz_loadu_ps(m1, p1);
                _mm512_mask_storeu_ps(p0, m0, _mm512_fmadd_ps(c0, vb, r0));
                _mm512_mask_storeu_ps(p1, m1, _mm512_fmadd_ps(c1, vb, r1));
            }
        }
    }
}

/// Lanes `i < 16` whose index `start + i` lies in `0..len`.
#[inline(always)]
fn lane_mask(start: isize, len: usize) -> __mmask16 {
    let lo = (-start).clamp(0, 16) as u32;
    let hi = (len as isize - start).clamp(0, 16) as u32;
    if hi <= lo {
        return 0;
    }
    let upto = if hi == 16 { 0xFFFF } else { (1u32 << hi) - 1 };
    (upto & !((1u32 << lo) - 1)) as __mmask16
}

/// One plane of a depthwise convolution with horizontal stride `S` (1 or 2) and dilation 1:
/// `out[oy][ox] = bias + Σ_ky Σ_kx w[ky][kx] · x[oy·sh + ky·dh − pad_top][ox·S + kx − pad_left]`,
/// positions outside the input reading as zero (padding is never materialised).
///
/// Columns are walked in groups of up to four 16-wide blocks; the load masks of a group are
/// computed once for all its rows. Each block has two accumulators (even and odd kernel rows),
/// so that independent FMA chains hide the FMA latency.
///
/// # Safety
/// - The CPU supports AVX-512F.
/// - `x` is valid for reads of `in_h·in_w` floats, `w` of `kh·kw`, `out` for writes of `oh·ow`
///   and does not overlap `x`; `kw ≤ DW_MAX_KW`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn depthwise_plane<const S: usize>(
    g: &DwPlane,
    x: *const f32,
    w: *const f32,
    bias: f32,
    out: *mut f32,
) {
    let mut ox0 = 0;
    while ox0 < g.ow {
        let blocks = (g.ow - ox0).div_ceil(16);
        // SAFETY: forwarded contract; the blocks written lie in columns `ox0..ow`.
        unsafe {
            match blocks {
                1 => depthwise_blocks::<S, 1>(g, x, w, bias, out, ox0),
                2 => depthwise_blocks::<S, 2>(g, x, w, bias, out, ox0),
                3 => depthwise_blocks::<S, 3>(g, x, w, bias, out, ox0),
                _ => depthwise_blocks::<S, 4>(g, x, w, bias, out, ox0),
            }
        }
        ox0 += 16 * blocks.min(4);
    }
}

/// Columns `ox0 .. ox0 + 16·NB` of every row of [`depthwise_plane`].
///
/// # Safety
/// As [`depthwise_plane`], with `ox0 < ow`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn depthwise_blocks<const S: usize, const NB: usize>(
    g: &DwPlane,
    x: *const f32,
    w: *const f32,
    bias: f32,
    out: *mut f32,
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
    for oy in 0..g.oh {
        let mut even = [_mm512_set1_ps(bias); NB];
        let mut odd = [_mm512_setzero_ps(); NB];
        for ky in 0..g.kh {
            let iy = (oy * g.stride_h + ky * g.dilation_h) as isize - g.pad_top as isize;
            if iy < 0 || iy >= g.in_h as isize {
                continue;
            }
            // Rows outside the image were skipped, so `row` is the start of an input row.
            let row = x.wrapping_add(iy as usize * g.in_w);
            let acc = if ky % 2 == 0 { &mut even } else { &mut odd };
            for kx in 0..g.kw {
                // SAFETY: `w` holds `kh·kw` floats (contract). Loads are masked to the columns
                // `0..in_w` of row `iy < in_h` (masked-off lanes are not accessed), so they stay
                // inside `x`; `wrapping_offset` keeps the address arithmetic defined.
                unsafe {
                    let wv = _mm512_set1_ps(*w.add(ky * g.kw + kx));
                    for b in 0..NB {
                        let (m0, m1) = masks[kx][b];
                        let p = row.wrapping_offset(start[kx][b]);
                        let lo = _mm512_maskz_loadu_ps(m0, p);
                        let v = if S == 1 {
                            lo
                        } else {
                            let hi = _mm512_maskz_loadu_ps(m1, p.wrapping_add(16));
                            _mm512_permutex2var_ps(lo, even_idx, hi)
                        };
                        acc[b] = _mm512_fmadd_ps(wv, v, acc[b]);
                    }
                }
            }
        }
        for b in 0..NB {
            let o = ox0 + 16 * b;
            if o >= g.ow {
                break;
            }
            let n = (g.ow - o).min(16);
            let mask = if n == 16 { 0xFFFF } else { (1u16 << n) - 1 };
            // SAFETY: lanes `0..n` are `out[oy·ow + o ..][..n]`, inside the `oh·ow` floats.
            unsafe {
                _mm512_mask_storeu_ps(out.add(oy * g.ow + o), mask, _mm512_add_ps(even[b], odd[b]))
            };
        }
    }
}
