//! Tests of the packed-A entries that serve a thread's part of a convolution: a column range
//! of a packed A ([`PackedA::columns`]) and C given as row slices ([`sgemm_packed_a_rows`]).

use super::tests::{check_close, fused_ref};
use super::*;
use crate::kernels::reference::Rng;

/// A column range of a packed A is packed like the same columns of the matrix packed
/// directly, across K blocks and ragged row panels.
#[test]
fn packed_a_columns_match_packing_the_columns() {
    let mut rng = Rng::new(41);
    for isa in crate::kernels::cpu::test_isas() {
        let kcb = kc_block(isa);
        for (m, k) in [(13, 2 * kcb + 37), (8, 40), (1, 5)] {
            let data = rng.vec(m * k);
            let whole = PackedA::with_isa(isa, MatRef::row_major(&data, m, k));
            for (k0, k1) in [
                (0, k),
                (3, k - 1),
                (kcb - 2, kcb + 5),
                (k / 2, k / 2),
                (1, k),
            ] {
                if k1 < k0 || k1 > k {
                    continue;
                }
                let window = MatRef {
                    data: &data[k0.min(data.len() - 1)..],
                    rows: m,
                    cols: k1 - k0,
                    row_stride: k,
                    col_stride: 1,
                };
                let want = PackedA::with_isa(isa, window);
                let got = whole.columns(k0, k1);
                assert_eq!((got.m, got.k), (m, k1 - k0));
                assert_eq!(
                    got.data[..],
                    want.data[..],
                    "{isa:?} {m}x{k} columns {k0}..{k1}"
                );
            }
        }
    }
}

/// C given as row slices (each thread's rows of every plane, `sgemm_packed_a_rows`) gets the
/// fused product in its columns from `col0` on and nothing outside them, whatever the shape
/// (edge tiles, several row blocks, K blocks, K = 0).
#[test]
fn packed_a_into_row_slices() {
    let mut rng = Rng::new(43);
    for isa in crate::kernels::cpu::test_isas() {
        let kcb = kc_block(isa);
        for (m, k, n) in [(5, 7, 3), (37, 40, 45), (MC + 9, kcb + 3, 70), (9, 0, 33)] {
            let (a, b) = (rng.vec(m * k), rng.vec(k * n));
            let (am, bm) = (MatRef::row_major(&a, m, k), MatRef::row_major(&b, k, n));
            let (row_bias, z) = (rng.vec(m), rng.vec(m * n));
            let want = fused_ref(&am, &bm, &row_bias, &z);
            let ep = Epilogue {
                bias: Bias::PerRow(&row_bias),
                residual: Some((&z, n)),
                activation: Activation::Relu,
            };
            let pa = PackedA::with_isa(isa, am);
            // Each row of C lies in a plane of `ld` floats, from column `col0` on.
            let (col0, ld) = (4, n + 9);
            let mut planes = vec![f32::NAN; m * ld];
            let mut rows: Vec<&mut [f32]> = planes.chunks_mut(ld).collect();
            sgemm_packed_a_rows(1.0, &pa, bm, 0.0, &mut rows, (col0, ld), &ep);
            for (i, plane) in planes.chunks(ld).enumerate() {
                let what = format!("{isa:?} {m}x{k}x{n} row {i}");
                check_close(&plane[col0..col0 + n], &want[i * n..(i + 1) * n], k, &what);
                let outside = plane[..col0].iter().chain(&plane[col0 + n..]);
                assert!(
                    outside.into_iter().all(|v| v.is_nan()),
                    "{what}: wrote outside"
                );
            }
        }
    }
}

/// A packed B filled in place, piece by piece of at most eight columns, holds what packing the
/// row-major matrix gives, across K blocks and a ragged last micro-panel; a piece across two
/// micro-panels is refused.
#[test]
fn packed_b_filled_in_place_matches_packing() {
    let mut rng = Rng::new(47);
    for isa in crate::kernels::cpu::test_isas() {
        let kcb = kc_block(isa);
        for (k, n) in [(kcb + 37, 70), (5, 8), (2 * kcb, 3)] {
            let data = rng.vec(k * n);
            let want = PackedB::with_isa(isa, MatRef::row_major(&data, k, n));
            let mut got = PackedB::zeroed(isa, k, n);
            for i in 0..k {
                for j0 in (0..n).step_by(8) {
                    let len = 8.min(n - j0);
                    let at = got.piece_offset(i, j0, len);
                    got.piece_mut(at, len)
                        .copy_from_slice(&data[i * n + j0..][..len]);
                }
            }
            assert_eq!(got.data[..], want.data[..], "{isa:?} {k}x{n}");
        }
        let nr = tile_size(isa).1;
        let b = PackedB::zeroed(isa, 4, 2 * nr);
        let across = std::panic::catch_unwind(|| b.piece_offset(0, nr - 4, 8));
        assert!(across.is_err(), "{isa:?}: a piece across two micro-panels");
    }
}
