//! Products with one row of A (a fully connected layer on one sample, a MatMul of one token):
//! `c = act(alpha·a·B + beta·c + bias + residual)` as a vector–matrix product.
//!
//! Such a product reads each element of B once: it runs as fast as B streams from memory. The
//! blocked driver ran it through its one-row tile, K block by K block, with one accumulator
//! chain per column vector and C loaded and stored again at every block. Here B is read in the
//! order it is stored (a prepacked B K block by K block, each block's micro-panels one after
//! the other; a row-major B a block of columns at a time down its rows) into four independent
//! sums per column vector, with the partial sums of a K block in a scratch row. With several
//! threads, each takes a range of whole micro-panels of columns. `kernel_bench` (`KB_COLD=4`,
//! 1 thread, two interleaved rounds on the Zen 4): 1×1280×1000 5.8–8.8 → 12.1–13.1 GFLOP/s,
//! 1×2048×1000 6.0–6.9 → 9.9–10.8; MobileNetV2's classifier in the model 0.39–0.56 → 0.22–0.34
//! ms.
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::driver::{epilogue_row, Src};
use super::{kc_block, Epilogue, Isa, MatRef};
use crate::kernels::{scratch, simd};

/// Below this many elements of B (`k·n`) the product stays on the calling thread.
const PAR_MIN_ELEMENTS: usize = 1 << 16;

/// Independent sums per column vector (the FMA latency over its throughput).
const CHAINS: usize = 4;

/// Computes the product of the one-row `a` and `b` into the first `n` elements of `c` and
/// returns `true`, or returns `false` (nothing written) where this path does not apply: A
/// strided, B a generated or transposed operand.
#[allow(clippy::too_many_arguments)]
pub(super) fn gemv(
    isa: Isa,
    alpha: f32,
    a: &MatRef,
    b: &Src,
    beta: f32,
    c: &mut [f32],
    ep: &Epilogue,
    parallel: bool,
) -> bool {
    if a.rows != 1 || (a.col_stride != 1 && a.cols > 1) {
        return false;
    }
    let (k, n) = match b {
        Src::PackedB(p) => (p.k, p.n),
        Src::Mat(v) if v.col_stride == 1 || v.cols == 1 => (v.rows, v.cols),
        _ => return false,
    };
    let x = &a.data[..k];
    let c = &mut c[..n];
    let z = ep.residual_row(0, n);
    let threads = if parallel && k * n >= PAR_MIN_ELEMENTS {
        rayon::current_num_threads()
    } else {
        1
    };
    match isa {
        Isa::Avx512 => {
            split::<{ simd::nr(Isa::Avx512) }, true>(isa, x, b, c, z, threads, (alpha, beta, ep))
        }
        Isa::Avx2Fma => {
            split::<{ simd::nr(Isa::Avx2Fma) }, true>(isa, x, b, c, z, threads, (alpha, beta, ep))
        }
        Isa::Portable => {
            split::<{ simd::nr(Isa::Portable) }, false>(isa, x, b, c, z, threads, (alpha, beta, ep))
        }
    }
    true
}

/// Splits the columns of `c` between `threads` in whole micro-panels of `NR` columns; each
/// range sums its columns into a scratch buffer, then [`finish`]es them into `c`.
fn split<const NR: usize, const FMA: bool>(
    isa: Isa,
    x: &[f32],
    b: &Src,
    c: &mut [f32],
    z: Option<&[f32]>,
    threads: usize,
    scale: (f32, f32, &Epilogue),
) {
    let panels = c.len().div_ceil(NR);
    let parts = threads.min(panels).max(1);
    let width = panels.div_ceil(parts) * NR;
    let part = |(i, c): (usize, &mut [f32])| {
        let j0 = i * width;
        let z = z.map(|z| &z[j0..j0 + c.len()]);
        scratch::with_f32(c.len().next_multiple_of(NR), |sums| {
            simd::vectorize(
                isa,
                #[inline(always)]
                || {
                    match b {
                        Src::PackedB(p) => packed_sums::<NR, FMA>(isa, x, &p.data, p.n, j0, sums),
                        Src::Mat(v) => {
                            for (q, s) in sums.chunks_exact_mut(NR).enumerate() {
                                let sum = matrix_columns::<NR, FMA>(x, v, j0 + q * NR);
                                s.copy_from_slice(&sum);
                            }
                        }
                        _ => unreachable!("gemv: checked operand"),
                    }
                    finish::<FMA>(c, sums, z, j0, scale);
                },
            )
        });
    };
    if parts > 1 {
        c.par_chunks_mut(width).enumerate().for_each(part);
    } else {
        part((0, c));
    }
}

/// `c = act(alpha·sums + beta·c + bias + z)` for columns `j0..j0 + c.len()` of C.
#[inline(always)]
fn finish<const FMA: bool>(
    c: &mut [f32],
    sums: &[f32],
    z: Option<&[f32]>,
    j0: usize,
    (alpha, beta, ep): (f32, f32, &Epilogue),
) {
    for (o, &s) in c.iter_mut().zip(sums) {
        *o = if beta == 0.0 {
            alpha * s
        } else {
            mul_add::<FMA>(beta, *o, alpha * s)
        };
    }
    epilogue_row(ep, c, z, 0, j0);
}

/// `sums = x · B[:, j0..j0 + sums.len()]` for a B packed in `NR`-wide micro-panels (`n`
/// columns; see [`super::PackedB`]), read K block by K block: in the order it is stored,
/// which keeps the hardware prefetcher on one stream (micro-panel by micro-panel, each K
/// block's panel of a column sits a whole block away from the previous one).
#[inline(always)]
fn packed_sums<const NR: usize, const FMA: bool>(
    isa: Isa,
    x: &[f32],
    data: &[f32],
    n: usize,
    j0: usize,
    sums: &mut [f32],
) {
    let kcb = kc_block(isa);
    let n_pad = n.div_ceil(NR) * NR;
    for (blk, xb) in x.chunks(kcb).enumerate() {
        let kc = xb.len();
        let block = &data[blk * kcb * n_pad..];
        for (q, s) in sums.chunks_exact_mut(NR).enumerate() {
            let panel = &block[(j0 + q * NR) * kc..][..kc * NR];
            let mut acc = [[0.0f32; NR]; CHAINS];
            accumulate::<NR, FMA>(&mut acc, xb, panel, NR);
            let sum = reduce(acc);
            if blk == 0 {
                s.copy_from_slice(&sum);
            } else {
                s.iter_mut().zip(sum).for_each(|(s, v)| *s += v);
            }
        }
    }
}

/// `x · B[:, j..j + NR]` for a B whose rows are contiguous (`v.col_stride == 1`, or one
/// column), the columns past B's last counted as zeros.
#[inline(always)]
fn matrix_columns<const NR: usize, const FMA: bool>(x: &[f32], v: &MatRef, j: usize) -> [f32; NR] {
    let mut acc = [[0.0f32; NR]; CHAINS];
    let width = NR.min(v.cols - j);
    if width == NR {
        accumulate::<NR, FMA>(&mut acc, x, &v.data[j..], v.row_stride);
    } else {
        for (kk, &xv) in x.iter().enumerate() {
            let row = &v.data[kk * v.row_stride + j..][..width];
            for (a, &bv) in acc[0].iter_mut().zip(row) {
                *a = mul_add::<FMA>(xv, bv, *a);
            }
        }
    }
    reduce(acc)
}

/// Adds `x[kk] · rows[kk·ld..kk·ld + NR]` over `kk` to the sums, row `kk` into chain
/// `kk mod CHAINS`.
#[inline(always)]
fn accumulate<const NR: usize, const FMA: bool>(
    acc: &mut [[f32; NR]; CHAINS],
    x: &[f32],
    rows: &[f32],
    ld: usize,
) {
    let [mut s0, mut s1, mut s2, mut s3] = *acc;
    let full = x.len() / CHAINS * CHAINS;
    for k0 in (0..full).step_by(CHAINS) {
        let r = |u: usize| &rows[(k0 + u) * ld..(k0 + u) * ld + NR];
        let (r0, r1, r2, r3) = (r(0), r(1), r(2), r(3));
        let (x0, x1, x2, x3) = (x[k0], x[k0 + 1], x[k0 + 2], x[k0 + 3]);
        for j in 0..NR {
            s0[j] = mul_add::<FMA>(x0, r0[j], s0[j]);
            s1[j] = mul_add::<FMA>(x1, r1[j], s1[j]);
            s2[j] = mul_add::<FMA>(x2, r2[j], s2[j]);
            s3[j] = mul_add::<FMA>(x3, r3[j], s3[j]);
        }
    }
    for (kk, &xv) in x.iter().enumerate().skip(full) {
        let r = &rows[kk * ld..kk * ld + NR];
        for j in 0..NR {
            s0[j] = mul_add::<FMA>(xv, r[j], s0[j]);
        }
    }
    *acc = [s0, s1, s2, s3];
}

/// The chains summed, column by column.
#[inline(always)]
fn reduce<const NR: usize>(acc: [[f32; NR]; CHAINS]) -> [f32; NR] {
    let mut sum = acc[0];
    for chain in &acc[1..] {
        for (s, &v) in sum.iter_mut().zip(chain) {
            *s += v;
        }
    }
    sum
}

/// `a·b + c`, fused where the ISA has FMA (elsewhere `mul_add` would be a library call).
#[inline(always)]
fn mul_add<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

#[cfg(test)]
mod tests {
    use super::super::{sgemm_packed, sgemm_with, Bias, PackedB};
    use super::*;
    use crate::kernels::activation::Activation;
    use crate::kernels::cpu;
    use crate::kernels::reference::{self, Rng};

    /// `act(alpha·x·B + beta·c0 + bias + z)` in f64 sums, `B` row-major `k × n`.
    #[allow(clippy::too_many_arguments)]
    fn want(
        x: &[f32],
        b: &[f32],
        n: usize,
        (alpha, beta): (f32, f32),
        c0: &[f32],
        bias: &[f32],
        z: &[f32],
        act: Activation,
    ) -> Vec<f32> {
        (0..n)
            .map(|j| {
                let dot: f64 = x
                    .iter()
                    .enumerate()
                    .map(|(kk, &xv)| xv as f64 * b[kk * n + j] as f64)
                    .sum();
                let v = alpha as f64 * dot + beta as f64 * c0[j] as f64 + (bias[j] + z[j]) as f64;
                reference::activation_ref(act, v as f32)
            })
            .collect()
    }

    #[test]
    fn one_row_against_the_sum_on_every_isa_and_pool() {
        // Shared dimensions below, at and past the chains and K blocks (256 for AVX-512, 512
        // for AVX2); widths below, at and past the micro-panels and the parallel split;
        // alpha, beta, per-column bias, residual and activations, on 1–3 threads, B packed
        // and read in place. A NaN in C before the call must not survive beta = 0.
        let mut rng = Rng::new(5);
        let shapes = [
            (1, 1),
            (3, 7),
            (5, 33),
            (256, 64),
            (300, 100),
            (1280, 1000),
            (600, 70),
        ];
        for isa in cpu::test_isas() {
            for &(k, n) in &shapes {
                let (x, b) = (rng.vec(k), rng.vec(k * n));
                let (c0, bias, z) = (rng.vec(n), rng.vec(n), rng.vec(n));
                let zero = vec![0.0; n];
                let pb = PackedB::with_isa(isa, MatRef::row_major(&b, k, n));
                let cases = [
                    (1.0, 0.0, false, Activation::None),
                    (0.5, 2.0, true, Activation::Relu),
                    (-1.5, 0.0, true, Activation::Sigmoid),
                ];
                for (alpha, beta, fused, act) in cases {
                    let ep = Epilogue {
                        bias: if fused {
                            Bias::PerCol(&bias)
                        } else {
                            Bias::None
                        },
                        residual: fused.then_some((&z[..], n)),
                        activation: act,
                    };
                    let (bias_w, z_w) = if fused { (&bias, &z) } else { (&zero, &zero) };
                    let expect = want(&x, &b, n, (alpha, beta), &c0, bias_w, z_w, act);
                    let start = if beta == 0.0 {
                        vec![f32::NAN; n]
                    } else {
                        c0.clone()
                    };
                    let xm = MatRef::row_major(&x, 1, k);
                    let bm = MatRef::row_major(&b, k, n);
                    for threads in [1, 2, 3] {
                        let pool = rayon::ThreadPoolBuilder::new()
                            .num_threads(threads)
                            .build()
                            .unwrap();
                        let what =
                            format!("{isa:?} k={k} n={n} a={alpha} b={beta} {act:?} t{threads}");
                        let mut packed = start.clone();
                        pool.install(|| sgemm_packed(alpha, xm, &pb, beta, &mut packed, n, &ep));
                        let mut direct = start.clone();
                        pool.install(|| {
                            sgemm_with(isa, true, alpha, xm, bm, beta, &mut direct, n, &ep)
                        });
                        let tol = 1e-5 * (k as f32).sqrt().max(1.0);
                        for (j, ((&p, &d), &w)) in
                            packed.iter().zip(&direct).zip(&expect).enumerate()
                        {
                            for (g, how) in [(p, "packed"), (d, "in place")] {
                                assert!(
                                    (g - w).abs() <= tol * (1.0 + w.abs()),
                                    "{what} {how}: column {j}: got {g}, want {w}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn declines_what_it_does_not_stream() {
        // A strided row of A and a transposed B go to the blocked driver (nothing written).
        let (x, b) = ([1.0f32, 2.0, 3.0, 4.0], [1.0f32; 8]);
        let mut c = [7.0f32; 2];
        let isa = cpu::isa();
        let strided = MatRef::row_major(&x, 2, 2).t();
        let one_row = MatRef { rows: 1, ..strided };
        let bm = MatRef::row_major(&b, 2, 2);
        let ep = Epilogue::NONE;
        assert!(!gemv(
            isa,
            1.0,
            &one_row,
            &Src::Mat(bm),
            0.0,
            &mut c,
            &ep,
            false
        ));
        let xm = MatRef::row_major(&x, 1, 4);
        let bt = MatRef::row_major(&b, 2, 4).t();
        assert!(!gemv(isa, 1.0, &xm, &Src::Mat(bt), 0.0, &mut c, &ep, false));
        assert_eq!(c, [7.0; 2]);
        assert!(gemv(
            isa,
            1.0,
            &MatRef::row_major(&x[..2], 1, 2),
            &Src::Mat(bm),
            0.0,
            &mut c,
            &ep,
            false
        ));
        assert_eq!(c, [3.0; 2]);
    }
}
