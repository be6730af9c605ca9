//! Softmax and log-softmax along one axis of a tensor viewed as `[outer, axis_len, inner]`,
//! numerically stable (the maximum is subtracted first), vectorised, parallel over rows.
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::activation::exp_approx;
use super::cpu::{self, Isa};
use super::simd;

/// Below this many elements softmax runs on the calling thread.
const PAR_MIN: usize = 1 << 15;

/// `out = softmax(x)` along the middle axis of `[outer, axis_len, inner]`.
pub fn softmax(x: &[f32], out: &mut [f32], outer: usize, axis_len: usize, inner: usize) {
    run(cpu::isa(), x, out, outer, axis_len, inner, false);
}

/// `out = log_softmax(x)` along the middle axis of `[outer, axis_len, inner]`.
pub fn log_softmax(x: &[f32], out: &mut [f32], outer: usize, axis_len: usize, inner: usize) {
    run(cpu::isa(), x, out, outer, axis_len, inner, true);
}

/// [`softmax`] / [`log_softmax`] (when `log`) vectorised for an explicit ISA.
pub fn softmax_isa(
    isa: Isa,
    x: &[f32],
    out: &mut [f32],
    outer: usize,
    axis_len: usize,
    inner: usize,
    log: bool,
) {
    run(isa, x, out, outer, axis_len, inner, log);
}

fn run(
    isa: Isa,
    x: &[f32],
    out: &mut [f32],
    outer: usize,
    axis_len: usize,
    inner: usize,
    log: bool,
) {
    let block = axis_len * inner;
    assert_eq!(x.len(), outer * block, "softmax: input length");
    assert_eq!(out.len(), x.len(), "softmax: output length");
    if out.is_empty() {
        return;
    }
    let par = rayon::current_num_threads() > 1 && x.len() >= PAR_MIN;
    if inner == 1 {
        let f = |(o, xi): (&mut [f32], &[f32])| {
            simd::vectorize(
                isa,
                #[inline(always)]
                || row(xi, o, log),
            )
        };
        if par {
            out.par_chunks_mut(axis_len)
                .zip(x.par_chunks(axis_len))
                .for_each(f);
        } else {
            out.chunks_mut(axis_len).zip(x.chunks(axis_len)).for_each(f);
        }
    } else {
        let f = |(o, xi): (&mut [f32], &[f32])| {
            simd::vectorize(
                isa,
                #[inline(always)]
                || strided(xi, o, inner, log),
            )
        };
        if par {
            out.par_chunks_mut(block)
                .zip(x.par_chunks(block))
                .for_each(f);
        } else {
            out.chunks_mut(block).zip(x.chunks(block)).for_each(f);
        }
    }
}

/// Lanes of the independent accumulators (one AVX-512 register).
const LANES: usize = 16;

/// Maximum with independent lanes (vectorisable). NaN is skipped here; a row holding NaN still
/// comes out all NaN, since its exponentials and their sum are NaN.
#[inline(always)]
fn max_of(x: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = if v > *a { v } else { *a };
        }
    }
    acc.iter()
        .chain(rest)
        .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m })
}

/// One contiguous row.
#[inline(always)]
fn row(x: &[f32], out: &mut [f32], log: bool) {
    let m = max_of(x);
    let mut acc = [0.0f32; LANES];
    let mut oc = out.chunks_exact_mut(LANES);
    let mut xc = x.chunks_exact(LANES);
    for (o, xs) in (&mut oc).zip(&mut xc) {
        for ((o, &v), a) in o.iter_mut().zip(xs).zip(acc.iter_mut()) {
            let e = exp_approx(v - m);
            *o = e;
            *a += e;
        }
    }
    for ((o, &v), a) in oc
        .into_remainder()
        .iter_mut()
        .zip(xc.remainder())
        .zip(acc.iter_mut())
    {
        let e = exp_approx(v - m);
        *o = e;
        *a += e;
    }
    let s: f32 = acc.iter().sum();
    if log {
        let ls = m + s.ln();
        out.iter_mut().zip(x).for_each(|(o, &v)| *o = v - ls);
    } else {
        let r = 1.0 / s;
        out.iter_mut().for_each(|o| *o *= r);
    }
}

/// One `[axis_len, inner]` block, reduced along the axis for every inner position at once.
#[inline(always)]
fn strided(x: &[f32], out: &mut [f32], inner: usize, log: bool) {
    let mut m = vec![f32::NEG_INFINITY; inner];
    for xr in x.chunks_exact(inner) {
        for (mi, &v) in m.iter_mut().zip(xr) {
            *mi = if v > *mi || v.is_nan() { v } else { *mi };
        }
    }
    let mut s = vec![0.0f32; inner];
    for (or, xr) in out.chunks_exact_mut(inner).zip(x.chunks_exact(inner)) {
        for (((o, &v), &mi), si) in or.iter_mut().zip(xr).zip(&m).zip(s.iter_mut()) {
            let e = exp_approx(v - mi);
            *o = e;
            *si += e;
        }
    }
    if log {
        for (si, &mi) in s.iter_mut().zip(&m) {
            *si = mi + si.ln();
        }
        for (or, xr) in out.chunks_exact_mut(inner).zip(x.chunks_exact(inner)) {
            for ((o, &v), &l) in or.iter_mut().zip(xr).zip(&s) {
                *o = v - l;
            }
        }
    } else {
        s.iter_mut().for_each(|v| *v = 1.0 / *v);
        for or in out.chunks_exact_mut(inner) {
            for (o, &r) in or.iter_mut().zip(&s) {
                *o *= r;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference::{self, Rng};

    #[test]
    fn matches_reference() {
        let mut rng = Rng::new(6);
        for isa in cpu::test_isas() {
            for &(outer, axis, inner) in &[
                (1, 1, 1),
                (3, 10, 1),
                (2, 1000, 1),
                (4, 7, 5),
                (2, 3, 130),
                (64, 1001, 1),
            ] {
                let x: Vec<f32> = rng
                    .vec(outer * axis * inner)
                    .iter()
                    .map(|v| v * 30.0)
                    .collect();
                for log in [false, true] {
                    let (mut want, mut got) = (vec![0.0; x.len()], vec![0.0; x.len()]);
                    reference::softmax_ref(&x, &mut want, outer, axis, inner, log);
                    softmax_isa(isa, &x, &mut got, outer, axis, inner, log);
                    for (g, w) in got.iter().zip(&want) {
                        assert!(
                            (g - w).abs() <= 2e-6 * (1.0 + w.abs()),
                            "{isa:?} {outer}x{axis}x{inner} log={log}: {g} vs {w}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn hand_computed_and_stable() {
        let mut o = [0.0; 2];
        softmax(&[0.0, 0.0], &mut o, 1, 2, 1);
        assert_eq!(o, [0.5, 0.5]);
        // Huge inputs must not overflow.
        softmax(&[1000.0, 1000.0], &mut o, 1, 2, 1);
        assert_eq!(o, [0.5, 0.5]);
        log_softmax(&[1.0, 1.0], &mut o, 1, 2, 1);
        assert!((o[0] + std::f32::consts::LN_2).abs() < 1e-7);
    }
}
