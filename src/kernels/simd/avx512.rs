//! AVX-512F GEMM micro-kernel: an `M×32` register tile (`M ≤ 8`), two zmm accumulators per row.
#![allow(clippy::incompatible_msrv)] // AVX-512 intrinsics are stable since Rust 1.89.

use std::arch::x86_64::*;

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
