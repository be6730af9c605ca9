//! AVX2+FMA GEMM micro-kernel: an `M×16` register tile (`M ≤ 6`), two ymm accumulators per row.

use std::arch::x86_64::*;

/// Packed A micro-panel row count (k-major stride of A).
const MR: usize = 6;
/// Packed B micro-panel width (k-major stride of B).
const NR: usize = 16;

/// Computes `C[r][0..nr] = alpha * (A·B)[r] + beta * C[r]` for rows `r < M`.
///
/// # Safety
/// - The CPU supports AVX2 and FMA.
/// - `a` is readable for `kc * 6` floats, `b` for `kc * 16` floats.
/// - For `r < M`, `c[r]` is valid for reads and writes of `nr` floats (`1 ≤ nr ≤ 16`), and these
///   ranges do not overlap each other nor `a`/`b`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn kernel<const M: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    c: &[*mut f32; 8],
    nr: usize,
    alpha: f32,
    beta: f32,
) {
    let mut acc0 = [_mm256_setzero_ps(); M];
    let mut acc1 = [_mm256_setzero_ps(); M];
    for k in 0..kc {
        // SAFETY: k < kc, so `b + k*16 .. +16` and `a + k*6 .. +6` are inside the panels.
        unsafe {
            let bp = b.add(k * NR);
            let ap = a.add(k * MR);
            let b0 = _mm256_loadu_ps(bp);
            let b1 = _mm256_loadu_ps(bp.add(8));
            for i in 0..M {
                let ai = _mm256_broadcast_ss(&*ap.add(i));
                acc0[i] = _mm256_fmadd_ps(ai, b0, acc0[i]);
                acc1[i] = _mm256_fmadd_ps(ai, b1, acc1[i]);
            }
        }
    }
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let n = nr as i32;
    let m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lanes);
    let m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), lanes);
    let full = nr == NR;
    let va = _mm256_set1_ps(alpha);
    let vb = _mm256_set1_ps(beta);
    for i in 0..M {
        let p0 = c[i];
        // Masked-off lanes are neither read nor written (vmaskmov does not fault on them), so
        // `p1` may point past the row when nr ≤ 8; `wrapping_add` keeps the arithmetic defined.
        let p1 = p0.wrapping_add(8);
        let r0 = _mm256_mul_ps(acc0[i], va);
        let r1 = _mm256_mul_ps(acc1[i], va);
        // SAFETY: for a full tile all 16 floats of c[i] are valid; otherwise only the lanes
        // selected by m0/m1, which are exactly c[i][0..nr], are touched.
        unsafe {
            if full {
                if beta == 0.0 {
                    _mm256_storeu_ps(p0, r0);
                    _mm256_storeu_ps(p1, r1);
                } else {
                    _mm256_storeu_ps(p0, _mm256_fmadd_ps(_mm256_loadu_ps(p0), vb, r0));
                    _mm256_storeu_ps(p1, _mm256_fmadd_ps(_mm256_loadu_ps(p1), vb, r1));
                }
            } else if beta == 0.0 {
                _mm256_maskstore_ps(p0, m0, r0);
                _mm256_maskstore_ps(p1, m1, r1);
            } else {
                let c0 = _mm256_maskload_ps(p0, m0);
                let c1 = _mm256_maskload_ps(p1, m1);
                _mm256_maskstore_ps(p0, m0, _mm256_fmadd_ps(c0, vb, r0));
                _mm256_maskstore_ps(p1, m1, _mm256_fmadd_ps(c1, vb, r1));
            }
        }
    }
}
