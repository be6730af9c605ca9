//! Element-wise binary operations with numpy (multidirectional) broadcasting, and the
//! per-channel affine transform used for BatchNormalization.
//!
//! Broadcasting is reduced to a few dense loop shapes: dimensions of size 1 are dropped and
//! neighbouring dimensions that stay contiguous for both operands are merged, so that the
//! innermost loop is one of "same shape", "a row + scalar b", "scalar a + b row" (per-channel
//! and trailing-dims broadcasts land here), each vectorised for the CPU's ISA and split over
//! rayon for large outputs.
#![forbid(unsafe_code)]

use rayon::prelude::*;
use smallvec::{smallvec, SmallVec};

use super::cpu::{self, Isa};
use super::simd;

/// A binary element-wise operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `max(a, b)` (a NaN operand is ignored, as `f32::max`).
    Max,
    /// `min(a, b)` (a NaN operand is ignored, as `f32::min`).
    Min,
    /// `a.powf(b)`.
    Pow,
}

/// Below this many output elements a kernel runs on the calling thread.
const PAR_MIN: usize = 1 << 16;
/// Elements per parallel chunk (rounded to whole rows).
const PAR_CHUNK: usize = 1 << 14;

/// The numpy broadcast of two shapes, or `None` if they are incompatible.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    broadcast_dims(a, b).collect()
}

/// Whether `a` and `b` broadcast to `out` ([`broadcast_shape`] without allocating).
fn broadcasts_to(a: &[usize], b: &[usize], out: &[usize]) -> bool {
    out.len() == a.len().max(b.len()) && broadcast_dims(a, b).zip(out).all(|(d, &o)| d == Some(o))
}

/// The dimensions of the numpy broadcast of `a` and `b`, outermost first (`None` where they
/// are incompatible).
fn broadcast_dims<'s>(a: &'s [usize], b: &'s [usize]) -> impl Iterator<Item = Option<usize>> + 's {
    let rank = a.len().max(b.len());
    let get = move |s: &[usize], d: usize| {
        if d + s.len() >= rank {
            s[d + s.len() - rank]
        } else {
            1
        }
    };
    (0..rank).map(move |d| match (get(a, d), get(b, d)) {
        (x, y) if x == y => Some(x),
        (1, y) => Some(y),
        (x, 1) => Some(x),
        _ => None,
    })
}

/// The larger of two values; a NaN operand gives NaN (numpy's `maximum`, ONNX's `Max`).
#[inline(always)]
pub fn max_nan(x: f32, y: f32) -> f32 {
    if x.is_nan() || y.is_nan() {
        f32::NAN
    } else {
        x.max(y)
    }
}

/// The smaller of two values; a NaN operand gives NaN (numpy's `minimum`, ONNX's `Min`).
#[inline(always)]
pub fn min_nan(x: f32, y: f32) -> f32 {
    if x.is_nan() || y.is_nan() {
        f32::NAN
    } else {
        x.min(y)
    }
}

/// `out = a op b` with numpy broadcasting; `out_shape` must be `broadcast_shape(a_shape, b_shape)`.
///
/// Panics if the shapes do not broadcast to `out_shape` or a slice length does not match its shape.
pub fn binary(
    op: BinaryOp,
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    out: &mut [f32],
    out_shape: &[usize],
) {
    binary_isa(cpu::isa(), op, a, a_shape, b, b_shape, out, out_shape);
}

/// [`binary`] vectorised for an explicit ISA.
#[allow(clippy::too_many_arguments)]
pub fn binary_isa(
    isa: Isa,
    op: BinaryOp,
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    out: &mut [f32],
    out_shape: &[usize],
) {
    assert!(
        broadcasts_to(a_shape, b_shape, out_shape),
        "binary: {a_shape:?} and {b_shape:?} do not broadcast to {out_shape:?}"
    );
    assert_eq!(
        a.len(),
        a_shape.iter().product::<usize>(),
        "binary: a length"
    );
    assert_eq!(
        b.len(),
        b_shape.iter().product::<usize>(),
        "binary: b length"
    );
    assert_eq!(
        out.len(),
        out_shape.iter().product::<usize>(),
        "binary: out length"
    );
    match op {
        BinaryOp::Add => run(isa, |x, y| x + y, a, a_shape, b, b_shape, out, out_shape),
        BinaryOp::Sub => run(isa, |x, y| x - y, a, a_shape, b, b_shape, out, out_shape),
        BinaryOp::Mul => run(isa, |x, y| x * y, a, a_shape, b, b_shape, out, out_shape),
        BinaryOp::Div => run(isa, |x, y| x / y, a, a_shape, b, b_shape, out, out_shape),
        BinaryOp::Max => run(isa, max_nan, a, a_shape, b, b_shape, out, out_shape),
        BinaryOp::Min => run(isa, min_nan, a, a_shape, b, b_shape, out, out_shape),
        BinaryOp::Pow => run(isa, f32::powf, a, a_shape, b, b_shape, out, out_shape),
    }
}

/// Dimensions or strides of an iteration space, inline up to rank 8.
type Dims = SmallVec<[usize; 8]>;

/// Collapsed iteration space: output dims with the element strides of `a` and `b` (0 = broadcast).
fn collapse(a_shape: &[usize], b_shape: &[usize], out_shape: &[usize]) -> (Dims, Dims, Dims) {
    let rank = out_shape.len();
    let strides = |s: &[usize]| {
        let mut st: Dims = smallvec![0; rank];
        let mut acc = 1;
        for d in (0..s.len()).rev() {
            let od = d + rank - s.len();
            st[od] = if s[d] == 1 { 0 } else { acc };
            acc *= s[d];
        }
        st
    };
    let (sa, sb) = (strides(a_shape), strides(b_shape));
    let (mut dims, mut xa, mut xb) = (Dims::new(), Dims::new(), Dims::new());
    for d in 0..rank {
        if out_shape[d] == 1 {
            continue;
        }
        if let (Some(&last), Some(&la), Some(&lb)) = (dims.last(), xa.last(), xb.last()) {
            // Merge the previous (outer) dim into this one if both operands stay contiguous.
            if la == sa[d] * out_shape[d] && lb == sb[d] * out_shape[d] {
                let n = dims.len();
                dims[n - 1] = last * out_shape[d];
                xa[n - 1] = sa[d];
                xb[n - 1] = sb[d];
                continue;
            }
        }
        dims.push(out_shape[d]);
        xa.push(sa[d]);
        xb.push(sb[d]);
    }
    (dims, xa, xb)
}

/// The generic broadcast driver for one operation `f`.
#[allow(clippy::too_many_arguments)]
fn run<F: Fn(f32, f32) -> f32 + Copy + Sync>(
    isa: Isa,
    f: F,
    a: &[f32],
    a_shape: &[usize],
    b: &[f32],
    b_shape: &[usize],
    out: &mut [f32],
    out_shape: &[usize],
) {
    if out.is_empty() {
        return;
    }
    let (dims, sa, sb) = collapse(a_shape, b_shape, out_shape);
    if dims.is_empty() {
        out[0] = f(a[0], b[0]);
        return;
    }
    let inner = *dims.last().unwrap_or(&1);
    let (ia, ib) = (sa[sa.len() - 1], sb[sb.len() - 1]);
    let outer = &dims[..dims.len() - 1];
    // Processes rows `row0..` of the output into `chunk` (whole rows).
    let rows = |row0: usize, chunk: &mut [f32]| {
        simd::vectorize(
            isa,
            #[inline(always)]
            || {
                // Odometer over the outer dims, starting at row0.
                let mut coord: Dims = smallvec![0; outer.len()];
                let mut rem = row0;
                for d in (0..outer.len()).rev() {
                    coord[d] = rem % outer[d];
                    rem /= outer[d];
                }
                let mut oa: usize = coord.iter().zip(&sa).map(|(c, s)| c * s).sum();
                let mut ob: usize = coord.iter().zip(&sb).map(|(c, s)| c * s).sum();
                for orow in chunk.chunks_exact_mut(inner) {
                    match (ia, ib) {
                        (0, 0) => orow.fill(f(a[oa], b[ob])),
                        (0, _) => {
                            let x = a[oa];
                            for (o, &y) in orow.iter_mut().zip(&b[ob..ob + inner]) {
                                *o = f(x, y);
                            }
                        }
                        (_, 0) => {
                            let y = b[ob];
                            for (o, &x) in orow.iter_mut().zip(&a[oa..oa + inner]) {
                                *o = f(x, y);
                            }
                        }
                        _ => {
                            for ((o, &x), &y) in orow
                                .iter_mut()
                                .zip(&a[oa..oa + inner])
                                .zip(&b[ob..ob + inner])
                            {
                                *o = f(x, y);
                            }
                        }
                    }
                    // Advance the odometer.
                    for d in (0..outer.len()).rev() {
                        coord[d] += 1;
                        oa += sa[d];
                        ob += sb[d];
                        if coord[d] < outer[d] {
                            break;
                        }
                        oa -= sa[d] * outer[d];
                        ob -= sb[d] * outer[d];
                        coord[d] = 0;
                    }
                }
            },
        )
    };
    if rayon::current_num_threads() > 1 && out.len() >= PAR_MIN {
        let rows_per = PAR_CHUNK.div_ceil(inner).max(1);
        out.par_chunks_mut(rows_per * inner)
            .enumerate()
            .for_each(|(i, c)| rows(i * rows_per, c));
    } else {
        rows(0, out);
    }
}

/// `out[n, c, s] = x[n, c, s] * scale[c] + shift[c]` for an `[n, c, spatial]` tensor.
pub fn channel_affine(
    x: &[f32],
    out: &mut [f32],
    n: usize,
    c: usize,
    spatial: usize,
    scale: &[f32],
    shift: &[f32],
) {
    channel_affine_isa(cpu::isa(), x, out, n, c, spatial, scale, shift);
}

/// [`channel_affine`] vectorised for an explicit ISA.
#[allow(clippy::too_many_arguments)]
pub fn channel_affine_isa(
    isa: Isa,
    x: &[f32],
    out: &mut [f32],
    n: usize,
    c: usize,
    spatial: usize,
    scale: &[f32],
    shift: &[f32],
) {
    assert_eq!(x.len(), n * c * spatial, "channel_affine: x length");
    assert_eq!(out.len(), x.len(), "channel_affine: out length");
    assert!(
        scale.len() == c && shift.len() == c,
        "channel_affine: scale/shift length"
    );
    if out.is_empty() {
        return;
    }
    let plane = |(i, (o, xi)): (usize, (&mut [f32], &[f32]))| {
        let (s, t) = (scale[i % c], shift[i % c]);
        simd::vectorize(
            isa,
            #[inline(always)]
            || o.iter_mut().zip(xi).for_each(|(o, &v)| *o = v * s + t),
        );
    };
    if rayon::current_num_threads() > 1 && out.len() >= PAR_MIN {
        out.par_chunks_mut(spatial)
            .zip(x.par_chunks(spatial))
            .enumerate()
            .for_each(plane);
    } else {
        out.chunks_mut(spatial)
            .zip(x.chunks(spatial))
            .enumerate()
            .for_each(plane);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference::{self, Rng};

    const OPS: [BinaryOp; 7] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Pow,
    ];

    fn check(isa: Isa, a_shape: &[usize], b_shape: &[usize], rng: &mut Rng) {
        let out_shape = broadcast_shape(a_shape, b_shape).unwrap();
        let a: Vec<f32> = rng
            .vec(a_shape.iter().product())
            .iter()
            .map(|v| v + 1.5)
            .collect();
        let b = rng.vec(b_shape.iter().product());
        let len = out_shape.iter().product();
        for op in OPS {
            let (mut want, mut got) = (vec![0.0; len], vec![f32::NAN; len]);
            reference::binary_ref(op, &a, a_shape, &b, b_shape, &mut want, &out_shape);
            binary_isa(isa, op, &a, a_shape, &b, b_shape, &mut got, &out_shape);
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    g == w || (g - w).abs() <= 1e-6 * w.abs(),
                    "{op:?} {a_shape:?} {b_shape:?} [{i}] {g} vs {w}"
                );
            }
        }
    }

    #[test]
    fn broadcasting_matches_reference() {
        let mut rng = Rng::new(4);
        let cases: &[(&[usize], &[usize])] = &[
            (&[], &[]),
            (&[5], &[]),
            (&[], &[7]),
            (&[3, 4], &[3, 4]),
            (&[2, 3, 4, 5], &[3, 1, 1]),
            (&[2, 3, 4, 5], &[1, 3, 1, 1]),
            (&[2, 3, 4, 5], &[5]),
            (&[2, 1, 4], &[3, 1]),
            (&[1, 3, 1], &[2, 1, 5]),
            (&[4, 1, 6, 1], &[1, 5, 1, 7]),
            (&[1], &[3, 1, 2]),
            (&[2, 64, 30, 30], &[64, 1, 1]),
            (&[300, 257], &[257]),
            (&[300, 257], &[300, 1]),
            (&[0, 3], &[3]),
        ];
        for isa in cpu::test_isas() {
            for (a, b) in cases {
                check(isa, a, b, &mut rng);
                check(isa, b, a, &mut rng);
            }
        }
    }

    #[test]
    fn hand_computed() {
        let mut out = [0.0; 6];
        binary(
            BinaryOp::Add,
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            &[2, 3],
            &[10.0, 20.0],
            &[2, 1],
            &mut out,
            &[2, 3],
        );
        assert_eq!(out, [11.0, 12.0, 13.0, 24.0, 25.0, 26.0]);
        binary(
            BinaryOp::Pow,
            &[2.0],
            &[],
            &[1.0, 2.0, 3.0, 0.0, 0.5, -1.0],
            &[6],
            &mut out,
            &[6],
        );
        assert_eq!(out, [2.0, 4.0, 8.0, 1.0, 2f32.sqrt(), 0.5]);
        assert_eq!(broadcast_shape(&[2, 1, 4], &[3, 1]), Some(vec![2, 3, 4]));
        assert_eq!(broadcast_shape(&[2, 3], &[4]), None);
    }

    #[test]
    fn channel_affine_matches_reference() {
        let mut rng = Rng::new(8);
        for isa in cpu::test_isas() {
            for &(n, c, s) in &[(1, 1, 1), (2, 3, 17), (4, 64, 300)] {
                let x = rng.vec(n * c * s);
                let (scale, shift) = (rng.vec(c), rng.vec(c));
                let (mut want, mut got) = (vec![0.0; x.len()], vec![0.0; x.len()]);
                reference::channel_affine_ref(&x, &mut want, n, c, s, &scale, &shift);
                channel_affine_isa(isa, &x, &mut got, n, c, s, &scale, &shift);
                assert_eq!(got, want);
            }
        }
    }
}

#[cfg(test)]
mod nan_tests {
    use super::*;

    #[test]
    fn max_and_min_propagate_nan_like_numpy() {
        for isa in cpu::test_isas() {
            let a = [1.0, f32::NAN, 3.0, -0.5, 7.0, 2.0, f32::NAN, 0.0, 9.0];
            let b = [f32::NAN, 2.0, 1.0, -1.0, 8.0, 2.0, 5.0, f32::NAN, -9.0];
            let mut out = [0.0f32; 9];
            binary_isa(isa, BinaryOp::Max, &a, &[9], &b, &[9], &mut out, &[9]);
            let want_max = [
                f32::NAN,
                f32::NAN,
                3.0,
                -0.5,
                8.0,
                2.0,
                f32::NAN,
                f32::NAN,
                9.0,
            ];
            for (g, w) in out.iter().zip(want_max) {
                assert!(
                    (g.is_nan() && w.is_nan()) || *g == w,
                    "{isa:?} max: {out:?}"
                );
            }
            binary_isa(isa, BinaryOp::Min, &a, &[9], &b, &[9], &mut out, &[9]);
            let want_min = [
                f32::NAN,
                f32::NAN,
                1.0,
                -1.0,
                7.0,
                2.0,
                f32::NAN,
                f32::NAN,
                -9.0,
            ];
            for (g, w) in out.iter().zip(want_min) {
                assert!(
                    (g.is_nan() && w.is_nan()) || *g == w,
                    "{isa:?} min: {out:?}"
                );
            }
        }
    }
}
