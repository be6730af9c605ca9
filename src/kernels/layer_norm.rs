//! Layer normalization of rows: `y = (x − mean) / √(var + ε) · scale + bias` per row, its
//! statistics in float64 over lane-parallel partial sums (so that they vectorise), parallel over
//! rows.
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::cpu::{self, Isa};
use super::simd;

/// Independent partial sums per reduction: four AVX-512 registers of float64, enough to hide
/// the adds' latency.
const LANES: usize = 32;

/// Below this many elements the rows run on the calling thread.
const PAR_MIN: usize = 1 << 14;

/// Normalises each row of `x` (rows of `scale.len()` elements) into `y`:
/// `y = (x − mean) · (var + eps)^(−1/2) · scale + bias`, with the mean and the biased
/// variance of the row computed in float64 (two passes), and the affine map in float64 too,
/// rounded once to float32. `bias`, when given, has a value per element of a row.
///
/// # Panics
/// If `x` and `y` differ in length, it is not a multiple of the row, or `bias` is not as long
/// as `scale`.
pub fn layer_norm_rows(x: &[f32], scale: &[f32], bias: Option<&[f32]>, eps: f64, y: &mut [f32]) {
    layer_norm_rows_isa(cpu::isa(), x, scale, bias, eps, y);
}

/// [`layer_norm_rows`] vectorised for an explicit ISA.
pub fn layer_norm_rows_isa(
    isa: Isa,
    x: &[f32],
    scale: &[f32],
    bias: Option<&[f32]>,
    eps: f64,
    y: &mut [f32],
) {
    let inner = scale.len();
    assert!(x.len() == y.len() && (inner == 0 || x.len().is_multiple_of(inner)));
    assert!(bias.is_none_or(|b| b.len() == inner));
    if inner == 0 {
        return;
    }
    let row = |(yr, xr): (&mut [f32], &[f32])| {
        simd::vectorize(
            isa,
            #[inline(always)]
            || normalize_row(xr, scale, bias, eps, yr),
        )
    };
    if x.len() >= PAR_MIN {
        y.par_chunks_mut(inner)
            .zip(x.par_chunks(inner))
            .for_each(row);
    } else {
        y.chunks_mut(inner).zip(x.chunks(inner)).for_each(row);
    }
}

/// One row of [`layer_norm_rows`]; inlined into the caller's ISA.
#[inline(always)]
fn normalize_row(x: &[f32], scale: &[f32], bias: Option<&[f32]>, eps: f64, y: &mut [f32]) {
    let n = x.len() as f64;
    let mean = sum_f64(x, f64::from) / n;
    let var = sum_f64(x, |v| (f64::from(v) - mean).powi(2)) / n;
    let inv = 1.0 / (var + eps).sqrt();
    let norm = |v: f32, g: f32| (f64::from(v) - mean) * inv * f64::from(g);
    let rows = y.iter_mut().zip(x).zip(scale);
    match bias {
        Some(bias) => {
            for (((o, &v), &g), &b) in rows.zip(bias) {
                *o = (norm(v, g) + f64::from(b)) as f32;
            }
        }
        None => {
            for ((o, &v), &g) in rows {
                *o = norm(v, g) as f32;
            }
        }
    }
}

/// `Σ term(x)` in float64: [`LANES`] partial sums, added at the end.
#[inline(always)]
fn sum_f64(x: &[f32], term: impl Fn(f32) -> f64) -> f64 {
    let mut acc = [0.0f64; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += term(v);
        }
    }
    let tail: f64 = chunks.remainder().iter().map(|&v| term(v)).sum();
    acc.iter().sum::<f64>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference::Rng;

    /// Every ISA against the definition (sequential float64 sums), on rows shorter and longer
    /// than the partial sums, with and without a bias, on one thread and in parallel.
    #[test]
    fn rows_match_the_definition() {
        let mut rng = Rng::new(5);
        for isa in cpu::test_isas() {
            for &(rows, inner) in &[(3, 1), (2, 31), (5, 32), (4, 77), (128, 768), (40, 1000)] {
                // Rows centred on 3, and rows of mean exactly zero (±v pairs).
                let x: Vec<f32> = match inner % 2 {
                    0 => rng
                        .vec(rows * inner / 2)
                        .iter()
                        .flat_map(|&v| [v, -v])
                        .collect(),
                    _ => rng
                        .vec(rows * inner)
                        .iter()
                        .map(|v| 3.0 + 2.0 * v)
                        .collect(),
                };
                let scale = rng.vec(inner);
                let bias = rng.vec(inner);
                for b in [None, Some(&bias[..])] {
                    let mut y = vec![f32::NAN; rows * inner];
                    layer_norm_rows_isa(isa, &x, &scale, b, 1e-5, &mut y);
                    for (r, (yr, xr)) in y.chunks(inner).zip(x.chunks(inner)).enumerate() {
                        let n = inner as f64;
                        let mean = xr.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
                        let var = xr
                            .iter()
                            .map(|&v| (f64::from(v) - mean).powi(2))
                            .sum::<f64>()
                            / n;
                        let inv = 1.0 / (var + 1e-5).sqrt();
                        for (j, (&g, &v)) in yr.iter().zip(xr).enumerate() {
                            let want = (f64::from(v) - mean) * inv * f64::from(scale[j])
                                + b.map_or(0.0, |b| f64::from(b[j]));
                            assert!(
                                (f64::from(g) - want).abs() <= 1e-6 * (1.0 + want.abs()),
                                "{isa:?} {rows}x{inner} row {r} [{j}]: {g} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }
}
