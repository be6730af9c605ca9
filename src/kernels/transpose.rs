//! N-D transpose (permutation of axes) for any `Copy` element type.
//!
//! Axes of size 1 are dropped and runs of input axes that stay adjacent and in order in the
//! output are merged, so most real permutations become a 2-D transpose (cache-blocked) or a
//! 3-D one (`[a, b, c] -> [b, a, c]`-like, copied row by row). Large tensors are split over rayon.
#![forbid(unsafe_code)]

use rayon::prelude::*;
use smallvec::{smallvec, SmallVec};

/// Dimensions, strides or axes, inline up to rank 8.
type Dims = SmallVec<[usize; 8]>;

/// Output elements per parallel chunk / below which it runs on the calling thread.
const PAR_MIN: usize = 1 << 16;
/// Side of the square blocks of the 2-D path.
const BLOCK: usize = 32;

/// `out` = `x` (shape `shape`) with its axes permuted: output axis `d` is input axis `perm[d]`.
///
/// Panics if `perm` is not a permutation of `0..shape.len()` or the lengths do not match.
pub fn transpose<T: Copy + Send + Sync>(x: &[T], shape: &[usize], perm: &[usize], out: &mut [T]) {
    let rank = shape.len();
    assert_eq!(perm.len(), rank, "transpose: perm rank");
    let mut seen: SmallVec<[bool; 8]> = smallvec![false; rank];
    for &p in perm {
        assert!(
            p < rank && !seen[p],
            "transpose: {perm:?} is not a permutation"
        );
        seen[p] = true;
    }
    let total: usize = shape.iter().product();
    assert_eq!(x.len(), total, "transpose: input length");
    assert_eq!(out.len(), total, "transpose: output length");
    if total == 0 {
        return;
    }
    let (shape, perm) = simplify(shape, perm);
    let rank = shape.len();
    if rank <= 1 {
        out.copy_from_slice(x);
        return;
    }
    // Input strides of the simplified shape.
    let mut strides: Dims = smallvec![1; rank];
    for d in (0..rank - 1).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    if rank == 2 {
        // perm is [1, 0]: out is shape[1] x shape[0].
        transpose_2d(x, shape[0], shape[1], out);
        return;
    }
    let out_shape: Dims = perm.iter().map(|&p| shape[p]).collect();
    let out_strides: Dims = perm.iter().map(|&p| strides[p]).collect();
    let inner = out_shape[rank - 1];
    let inner_stride = out_strides[rank - 1];
    let outer = &out_shape[..rank - 1];
    let rows = |row0: usize, chunk: &mut [T]| {
        let mut coord: Dims = smallvec![0; outer.len()];
        let mut rem = row0;
        for d in (0..outer.len()).rev() {
            coord[d] = rem % outer[d];
            rem /= outer[d];
        }
        let mut off: usize = coord.iter().zip(&out_strides).map(|(c, s)| c * s).sum();
        for orow in chunk.chunks_exact_mut(inner) {
            if inner_stride == 1 {
                orow.copy_from_slice(&x[off..off + inner]);
            } else {
                for (o, v) in orow.iter_mut().zip(x[off..].iter().step_by(inner_stride)) {
                    *o = *v;
                }
            }
            for d in (0..outer.len()).rev() {
                coord[d] += 1;
                off += out_strides[d];
                if coord[d] < outer[d] {
                    break;
                }
                off -= out_strides[d] * outer[d];
                coord[d] = 0;
            }
        }
    };
    if rayon::current_num_threads() > 1 && total >= PAR_MIN {
        let rows_per = PAR_MIN.div_ceil(4 * inner).max(1);
        out.par_chunks_mut(rows_per * inner)
            .enumerate()
            .for_each(|(i, c)| rows(i * rows_per, c));
    } else {
        rows(0, out);
    }
}

/// Drops size-1 axes and merges input axes that stay consecutive in the output.
fn simplify(shape: &[usize], perm: &[usize]) -> (Dims, Dims) {
    // Keep only axes with size > 1, renumbered.
    let keep: Dims = (0..shape.len()).filter(|&d| shape[d] != 1).collect();
    let renum = |d: usize| keep.iter().position(|&k| k == d);
    let perm1: Dims = perm.iter().filter_map(|&p| renum(p)).collect();
    let shape1: Dims = keep.iter().map(|&d| shape[d]).collect();
    // Group output axes whose input axes are consecutive (perm1[i+1] == perm1[i] + 1), each
    // group as its first input axis and its length.
    let mut groups: SmallVec<[(usize, usize); 8]> = SmallVec::new();
    for &p in &perm1 {
        match groups.last_mut() {
            Some((first, len)) if *first + *len == p => *len += 1,
            _ => groups.push((p, 1)),
        }
    }
    // New input axes: groups ordered by their first input axis.
    let mut order: Dims = (0..groups.len()).collect();
    order.sort_unstable_by_key(|&g| groups[g].0);
    let new_shape: Dims = order
        .iter()
        .map(|&g| {
            let (first, len) = groups[g];
            shape1[first..first + len].iter().product()
        })
        .collect();
    let mut new_perm: Dims = smallvec![0; groups.len()];
    for (new_in, &g) in order.iter().enumerate() {
        new_perm[g] = new_in;
    }
    (new_shape, new_perm)
}

/// `out[c][r] = x[r][c]` for an `r_n × c_n` row-major `x`, in cache blocks.
fn transpose_2d<T: Copy + Send + Sync>(x: &[T], r_n: usize, c_n: usize, out: &mut [T]) {
    // One unit = BLOCK output rows (= BLOCK input columns).
    let unit = |(bi, chunk): (usize, &mut [T])| {
        let c0 = bi * BLOCK;
        let cols = chunk.len() / r_n;
        for r0 in (0..r_n).step_by(BLOCK) {
            let r1 = (r0 + BLOCK).min(r_n);
            for c in 0..cols {
                let orow = &mut chunk[c * r_n..(c + 1) * r_n];
                for r in r0..r1 {
                    orow[r] = x[r * c_n + c0 + c];
                }
            }
        }
    };
    if rayon::current_num_threads() > 1 && x.len() >= PAR_MIN {
        out.par_chunks_mut(BLOCK * r_n).enumerate().for_each(unit);
    } else {
        out.chunks_mut(BLOCK * r_n).enumerate().for_each(unit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference;

    fn perms(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![vec![]];
        }
        let mut out = Vec::new();
        for p in perms(n - 1) {
            for i in 0..=p.len() {
                let mut q = p.clone();
                q.insert(i, n - 1);
                out.push(q);
            }
        }
        out
    }

    #[test]
    fn all_permutations_match_reference() {
        let shapes: &[&[usize]] = &[
            &[],
            &[5],
            &[3, 4],
            &[1, 7],
            &[2, 3, 4],
            &[2, 1, 3, 5],
            &[3, 4, 5, 6],
            &[2, 3, 1, 4, 5],
            &[70, 300],
            &[3, 64, 40, 9],
        ];
        for shape in shapes {
            let total: usize = shape.iter().product();
            let x: Vec<u32> = (0..total as u32).collect();
            for perm in perms(shape.len()) {
                let (mut want, mut got) = (vec![0u32; total], vec![u32::MAX; total]);
                reference::transpose_ref(&x, shape, &perm, &mut want);
                transpose(&x, shape, &perm, &mut got);
                assert_eq!(got, want, "{shape:?} {perm:?}");
            }
        }
    }

    #[test]
    fn hand_computed() {
        let mut out = [0.0f32; 6];
        transpose(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &[1, 0], &mut out);
        assert_eq!(out, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    }
}
