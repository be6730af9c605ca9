//! Numpy-style broadcasting walks for element-wise kernels of any element type: each output
//! element is computed from the input elements its index maps to (a size-1 or missing input
//! dimension repeats). The innermost dimension runs as a tight loop with a per-input step of 0
//! or 1; large outputs are split across the rayon pool by rows.

use rayon::prelude::*;

/// Outputs smaller than this many elements are computed on the calling thread.
const PARALLEL_MIN: usize = 1 << 15;

/// The multidirectional broadcast of shapes, or `None` when they do not broadcast (the
/// pairwise [`broadcast_shape`](super::elementwise::broadcast_shape), folded).
pub fn broadcast_shapes(shapes: &[&[usize]]) -> Option<Vec<usize>> {
    shapes.iter().try_fold(Vec::new(), |acc, s| {
        super::elementwise::broadcast_shape(&acc, s)
    })
}

/// Element strides of `shape` seen through `out_shape` (0 along broadcast dimensions).
fn strides_in(shape: &[usize], out_shape: &[usize]) -> Vec<usize> {
    let rank = out_shape.len();
    let lead = rank - shape.len();
    let mut strides = vec![0usize; rank];
    let mut acc = 1;
    for d in (0..shape.len()).rev() {
        strides[lead + d] = if shape[d] == 1 { 0 } else { acc };
        acc *= shape[d];
    }
    strides
}

/// The offsets, in each of `N` inputs, of the first element of output row `row` (a row is the
/// innermost dimension).
fn row_offsets<const N: usize>(
    row: usize,
    out_shape: &[usize],
    strides: &[Vec<usize>; N],
) -> [usize; N] {
    let mut offs = [0usize; N];
    let rank = out_shape.len();
    let mut rest = row;
    for d in (0..rank.saturating_sub(1)).rev() {
        let i = rest % out_shape[d];
        rest /= out_shape[d];
        for k in 0..N {
            offs[k] += i * strides[k][d];
        }
    }
    offs
}

/// Calls `f(out_row, [offset per input], [inner step per input])` for every output row.
fn walk<O: Send, const N: usize>(
    shapes: [&[usize]; N],
    out: &mut [O],
    out_shape: &[usize],
    f: impl Fn(&mut [O], [usize; N], [usize; N]) + Sync,
) {
    let inner = out_shape.last().copied().unwrap_or(1);
    if out.is_empty() || inner == 0 {
        return;
    }
    let strides: [Vec<usize>; N] = std::array::from_fn(|k| strides_in(shapes[k], out_shape));
    let steps: [usize; N] = std::array::from_fn(|k| strides[k].last().copied().unwrap_or(0).min(1));
    let run =
        |(row, chunk): (usize, &mut [O])| f(chunk, row_offsets(row, out_shape, &strides), steps);
    if out.len() >= PARALLEL_MIN {
        out.par_chunks_mut(inner).enumerate().for_each(run);
    } else {
        out.chunks_mut(inner).enumerate().for_each(run);
    }
}

/// `out[i] = f(x[i'])` with `x` broadcast to `out_shape`.
pub fn map1<A: Copy + Sync, O: Send>(
    x: (&[A], &[usize]),
    out: &mut [O],
    out_shape: &[usize],
    f: impl Fn(A) -> O + Sync,
) {
    walk([x.1], out, out_shape, |row, [o], [s]| {
        for (j, dst) in row.iter_mut().enumerate() {
            *dst = f(x.0[o + j * s]);
        }
    });
}

/// `out[i] = f(a[i'], b[i''])` with both inputs broadcast to `out_shape`.
pub fn map2<A: Copy + Sync, B: Copy + Sync, O: Send>(
    a: (&[A], &[usize]),
    b: (&[B], &[usize]),
    out: &mut [O],
    out_shape: &[usize],
    f: impl Fn(A, B) -> O + Sync,
) {
    walk([a.1, b.1], out, out_shape, |row, [oa, ob], [sa, sb]| {
        for (j, dst) in row.iter_mut().enumerate() {
            *dst = f(a.0[oa + j * sa], b.0[ob + j * sb]);
        }
    });
}

/// `out[i] = f(a[i'], b[i''], c[i'''])` with the three inputs broadcast to `out_shape`.
pub fn map3<A: Copy + Sync, B: Copy + Sync, C: Copy + Sync, O: Send>(
    a: (&[A], &[usize]),
    b: (&[B], &[usize]),
    c: (&[C], &[usize]),
    out: &mut [O],
    out_shape: &[usize],
    f: impl Fn(A, B, C) -> O + Sync,
) {
    walk(
        [a.1, b.1, c.1],
        out,
        out_shape,
        |row, [oa, ob, oc], [sa, sb, sc]| {
            for (j, dst) in row.iter_mut().enumerate() {
                *dst = f(a.0[oa + j * sa], b.0[ob + j * sb], c.0[oc + j * sc]);
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_broadcast_like_numpy() {
        assert_eq!(broadcast_shapes(&[&[2, 3, 4], &[4]]), Some(vec![2, 3, 4]));
        assert_eq!(
            broadcast_shapes(&[&[2, 1, 4], &[3, 1], &[]]),
            Some(vec![2, 3, 4])
        );
        assert_eq!(broadcast_shapes(&[&[2, 3], &[4, 3]]), None);
        assert_eq!(broadcast_shapes(&[&[0, 3], &[1, 3]]), Some(vec![0, 3]));
    }

    #[test]
    fn map2_matches_hand_computed_broadcast() {
        // a: [2, 1, 3], b: [2, 1] -> [2, 2, 3]
        let a = [1, 2, 3, 10, 20, 30];
        let b = [100, 200];
        let mut out = [0; 12];
        map2(
            (&a, &[2, 1, 3]),
            (&b, &[2, 1]),
            &mut out,
            &[2, 2, 3],
            |x, y| x + y,
        );
        assert_eq!(
            out,
            [101, 102, 103, 201, 202, 203, 110, 120, 130, 210, 220, 230]
        );
    }

    #[test]
    fn map3_and_large_parallel_outputs() {
        let n = PARALLEL_MIN * 2 + 7;
        let cond: Vec<bool> = (0..n).map(|i| i % 3 == 0).collect();
        let x: Vec<i64> = (0..n as i64).collect();
        let y = [-1i64];
        let mut out = vec![0i64; n];
        map3(
            (&cond, &[n]),
            (&x, &[n]),
            (&y, &[1]),
            &mut out,
            &[n],
            |c, a, b| {
                if c {
                    a
                } else {
                    b
                }
            },
        );
        for (i, &v) in out.iter().enumerate() {
            assert_eq!(v, if i % 3 == 0 { i as i64 } else { -1 });
        }
        let mut sq = vec![0i64; n];
        map1((&x, &[n]), &mut sq, &[n], |v| v * 2);
        assert_eq!(sq[n - 1], 2 * (n as i64 - 1));
    }

    #[test]
    fn scalars_and_empty_outputs() {
        let mut out = [0.0f32; 1];
        map2((&[2.0f32], &[]), (&[3.0f32], &[]), &mut out, &[], |a, b| {
            a * b
        });
        assert_eq!(out, [6.0]);
        let mut none: [f32; 0] = [];
        map2(
            (&[], &[0]),
            (&[1.0f32], &[1]),
            &mut none,
            &[0],
            |a: f32, b| a + b,
        );
    }
}
