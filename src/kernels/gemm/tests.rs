//! Tests of the GEMM: every entry point against the naive oracle on every ISA the CPU has.

use super::*;
use crate::kernels::reference::{self, Rng};

pub(super) fn check_close(got: &[f32], want: &[f32], k: usize, what: &str) {
    let tol = 1e-5 * (k as f32).sqrt().max(1.0);
    for (idx, (&g, &w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "{what}: index {idx}: got {g}, want {w}"
        );
    }
}

/// Runs one GEMM case on `isa` through every entry point and compares with the oracle.
#[allow(clippy::too_many_arguments)]
fn case(
    isa: Isa,
    m: usize,
    n: usize,
    k: usize,
    ta: bool,
    tb: bool,
    alpha: f32,
    beta: f32,
    rng: &mut Rng,
) {
    let a_data = rng.vec(m * k);
    let b_data = rng.vec(k * n);
    let a = if ta {
        MatRef::row_major(&a_data, k, m).t()
    } else {
        MatRef::row_major(&a_data, m, k)
    };
    let b = if tb {
        MatRef::row_major(&b_data, n, k).t()
    } else {
        MatRef::row_major(&b_data, k, n)
    };
    let ldc = n + 3;
    let c0 = rng.vec(m * ldc);
    let mut want = c0.clone();
    reference::gemm_ref(alpha, &a, &b, beta, &mut want, ldc);
    let what = format!("{isa:?} m={m} n={n} k={k} ta={ta} tb={tb} a={alpha} b={beta}");
    for parallel in [false, true] {
        let mut got = c0.clone();
        sgemm_with(
            isa,
            parallel,
            alpha,
            a,
            b,
            beta,
            &mut got,
            ldc,
            &Epilogue::NONE,
        );
        check_close(&got, &want, k, &what);
    }
    let pa = PackedA::with_isa(isa, a);
    let mut got = c0.clone();
    sgemm_packed_a(alpha, &pa, b, beta, &mut got, ldc, &Epilogue::NONE);
    check_close(&got, &want, k, &format!("{what} packed A"));
    let pb = PackedB::with_isa(isa, b);
    let mut got = c0.clone();
    sgemm_packed(alpha, a, &pb, beta, &mut got, ldc, &Epilogue::NONE);
    check_close(&got, &want, k, &format!("{what} packed B"));
}

fn all_shapes(isa: Isa) {
    let mut rng = Rng::new(7);
    let dims = [1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 31, 33, 64, 65];
    for &m in &dims {
        for &n in &[1, 3, 8, 9, 15, 16, 17, 24, 25, 32, 33, 47, 49, 70] {
            for &k in &[1, 4, 19] {
                case(isa, m, n, k, false, false, 1.0, 0.0, &mut rng);
            }
        }
    }
    for &(m, n, k) in &[
        (100, 130, 300),
        (97, 301, 513),
        (257, 77, 260),
        (1, 1000, 700),
        (300, 1, 64),
        // 49 columns: a tile and a 17-wide column (its last column in the half tile's loop).
        (75, 49, 300),
    ] {
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            case(isa, m, n, k, ta, tb, 0.5, 0.0, &mut rng);
            case(isa, m, n, k, ta, tb, 1.0, -1.5, &mut rng);
        }
    }
    // Wide N crosses the NC block boundary.
    case(isa, 9, NC + 45, 20, false, true, 1.0, 1.0, &mut rng);
}

#[test]
fn gemm_portable() {
    all_shapes(Isa::Portable);
}

#[test]
fn gemm_avx2() {
    if let Some(isa) = cpu::test_isa(Isa::Avx2Fma) {
        all_shapes(isa);
    }
}

#[test]
fn gemm_avx512() {
    if let Some(isa) = cpu::test_isa(Isa::Avx512) {
        all_shapes(isa);
    }
}

#[test]
fn hand_computed() {
    // [1 2; 3 4] · [5 6; 7 8] = [19 22; 43 50]
    let a = [1.0, 2.0, 3.0, 4.0];
    let b = [5.0, 6.0, 7.0, 8.0];
    let mut c = [f32::NAN; 4];
    sgemm(
        1.0,
        MatRef::row_major(&a, 2, 2),
        MatRef::row_major(&b, 2, 2),
        0.0,
        &mut c,
        2,
    );
    assert_eq!(c, [19.0, 22.0, 43.0, 50.0]);
    // beta accumulates, alpha scales; transposed A = [1 3; 2 4].
    let mut c = [1.0, 1.0, 1.0, 1.0];
    sgemm(
        2.0,
        MatRef::row_major(&a, 2, 2).t(),
        MatRef::row_major(&b, 2, 2),
        1.0,
        &mut c,
        2,
    );
    // A^T·B = [1*5+3*7, 1*6+3*8; 2*5+4*7, 2*6+4*8] = [26 30; 38 44]
    assert_eq!(c, [53.0, 61.0, 77.0, 89.0]);
}

#[test]
fn beta_zero_ignores_nan_and_k_zero() {
    for isa in cpu::test_isas() {
        let mut rng = Rng::new(3);
        let (m, n, k) = (19, 37, 11);
        let a = rng.vec(m * k);
        let b = rng.vec(k * n);
        let mut c = vec![f32::NAN; m * n];
        sgemm_with(
            isa,
            true,
            1.0,
            MatRef::row_major(&a, m, k),
            MatRef::row_major(&b, k, n),
            0.0,
            &mut c,
            n,
            &Epilogue::NONE,
        );
        assert!(c.iter().all(|v| v.is_finite()));
        let mut c = vec![2.0f32; 6];
        let empty: [f32; 0] = [];
        sgemm_with(
            isa,
            false,
            1.0,
            MatRef::row_major(&empty, 2, 0),
            MatRef::row_major(&empty, 0, 3),
            0.5,
            &mut c,
            3,
            &Epilogue::NONE,
        );
        assert_eq!(c, vec![1.0; 6]);
    }
}

#[test]
fn epilogue_fused() {
    for isa in cpu::test_isas() {
        let mut rng = Rng::new(11);
        // (100, 700, 64) and (11, 8200, 16) take the A-outer order (a row of tiles per call):
        // B packed with a shallow K and wide C, and B read in place with K ≤ 32 and rows 8192
        // apart. The last two end on a 17-wide column, whose last column is fused into its
        // half tile. With
        // more than `MC` rows a single thread packs A and runs the tiles a row block at a
        // time, the biases and residual of the second block offset by its first row.
        for &(m, n, k) in &[
            (5, 7, 3),
            (70, 90, 300),
            (33, 65, 257),
            (MC + 9, 40, 300),
            (100, 700, 64),
            (11, 8200, 16),
            (29, 49, 200),
            (9, 17, 40),
        ] {
            let a = rng.vec(m * k);
            let b = rng.vec(k * n);
            let row_bias = rng.vec(m);
            let col_bias = rng.vec(n);
            let (am, bm) = (MatRef::row_major(&a, m, k), MatRef::row_major(&b, k, n));
            let clip = Activation::Clip {
                min: -0.3,
                max: 0.4,
            };
            for (bias, act) in [
                (Bias::PerRow(&row_bias), Activation::Relu),
                (Bias::PerCol(&col_bias), Activation::Sigmoid),
                (Bias::None, Activation::Tanh),
                (Bias::PerCol(&col_bias), Activation::Relu),
                (Bias::PerRow(&row_bias), clip),
                (Bias::PerCol(&col_bias), clip),
                (Bias::None, Activation::Relu),
            ] {
                // The residual has a leading dimension wider than n (a strided view).
                let ldz = n + 3;
                let z = rng.vec(m * ldz);
                for residual in [None, Some((&z[..], ldz))] {
                    let mut want = vec![0.0; m * n];
                    reference::gemm_ref(1.0, &am, &bm, 0.0, &mut want, n);
                    for i in 0..m {
                        for j in 0..n {
                            let v = &mut want[i * n + j];
                            *v += match bias {
                                Bias::None => 0.0,
                                Bias::PerRow(b) => b[i],
                                Bias::PerCol(b) => b[j],
                            };
                            if let Some((z, ld)) = residual {
                                *v += z[i * ld + j];
                            }
                            *v = reference::activation_ref(act, *v);
                        }
                    }
                    let ep = Epilogue {
                        bias,
                        residual,
                        activation: act,
                    };
                    let what = format!(
                        "{isa:?} {m}x{n}x{k} {act:?} residual {}",
                        residual.is_some()
                    );
                    for parallel in [false, true] {
                        let mut got = vec![f32::NAN; m * n];
                        sgemm_with(isa, parallel, 1.0, am, bm, 0.0, &mut got, n, &ep);
                        check_close(&got, &want, k, &format!("{what} parallel {parallel}"));
                    }
                    let pb = PackedB::with_isa(isa, bm);
                    let mut got = vec![f32::NAN; m * n];
                    sgemm_packed(1.0, am, &pb, 0.0, &mut got, n, &ep);
                    check_close(&got, &want, k, &format!("packed {what}"));
                }
            }
        }
    }
}

#[test]
fn fused_clamp_keeps_nan() {
    // Row 0 of A holds a NaN: row 0 of C is NaN before and after Relu/Clip (like the
    // activation operators); row 1 gives -(k·(j+1)+…) < -1, clamped to the lower bound.
    for isa in cpu::test_isas() {
        let (m, n, k) = (2, 19, 3);
        let a = [f32::NAN, 1.0, 1.0, -1.0, -1.0, -1.0];
        let b: Vec<f32> = (0..k * n).map(|i| 1.0 + i as f32).collect();
        for (act, low) in [
            (Activation::Relu, 0.0),
            (
                Activation::Clip {
                    min: -1.0,
                    max: 1.0,
                },
                -1.0,
            ),
        ] {
            let ep = Epilogue {
                bias: Bias::None,
                residual: None,
                activation: act,
            };
            let mut c = vec![0.5f32; m * n];
            sgemm_with(
                isa,
                false,
                1.0,
                MatRef::row_major(&a, m, k),
                MatRef::row_major(&b, k, n),
                0.0,
                &mut c,
                n,
                &ep,
            );
            assert!(c[..n].iter().all(|v| v.is_nan()), "{isa:?} {act:?}: {c:?}");
            assert!(c[n..].iter().all(|&v| v == low), "{isa:?} {act:?}: {c:?}");
        }
    }
}

/// `C = relu(A·B + row_bias + z)` by the naive oracle.
pub(super) fn fused_ref(am: &MatRef, bm: &MatRef, row_bias: &[f32], z: &[f32]) -> Vec<f32> {
    let (m, n) = (am.rows, bm.cols);
    let mut want = vec![0.0; m * n];
    reference::gemm_ref(1.0, am, bm, 0.0, &mut want, n);
    for (i, row) in want.chunks_mut(n).enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = (*v + row_bias[i] + z[i * n + j]).max(0.0);
        }
    }
    want
}

/// Random operands of `C = relu(A·B + row_bias + z)`, `m×k` times `k×n`, both row-major.
struct Fused {
    a: Vec<f32>,
    b: Vec<f32>,
    row_bias: Vec<f32>,
    z: Vec<f32>,
    m: usize,
    n: usize,
    k: usize,
}

impl Fused {
    fn new(rng: &mut Rng, m: usize, n: usize, k: usize) -> Fused {
        let (a, b) = (rng.vec(m * k), rng.vec(k * n));
        let (row_bias, z) = (rng.vec(m), rng.vec(m * n));
        Fused {
            a,
            b,
            row_bias,
            z,
            m,
            n,
            k,
        }
    }

    fn am(&self) -> MatRef<'_> {
        MatRef::row_major(&self.a, self.m, self.k)
    }

    fn bm(&self) -> MatRef<'_> {
        MatRef::row_major(&self.b, self.k, self.n)
    }

    /// The expected C, by the naive oracle.
    fn want(&self) -> Vec<f32> {
        fused_ref(&self.am(), &self.bm(), &self.row_bias, &self.z)
    }

    /// The epilogue: per-row bias, the residual `z` and Relu.
    fn ep(&self) -> Epilogue<'_> {
        Epilogue {
            bias: Bias::PerRow(&self.row_bias),
            residual: Some((&self.z, self.n)),
            activation: Activation::Relu,
        }
    }
}

#[test]
fn rows_outer_order() {
    // A shallow K block and wide C (K ≤ 128, N ≥ 512, B packed): A micro-panels outermost.
    for isa in cpu::test_isas() {
        let mut rng = Rng::new(29);
        for &(m, n, k) in &[(100, 700, 64), (257, 600, 100), (130, 3136, 128)] {
            let f = Fused::new(&mut rng, m, n, k);
            let (am, bm, want, ep) = (f.am(), f.bm(), f.want(), f.ep());
            if isa != Isa::Portable {
                assert!(!read_b_in_place(isa, &Src::Mat(bm), m, k), "{m}x{n}x{k}");
            }
            for parallel in [false, true] {
                let what = format!("{isa:?} {m}x{n}x{k} parallel {parallel}");
                let pa = PackedA::with_isa(isa, am);
                let mut got = vec![f32::NAN; m * n];
                sgemm_packed_a_with(parallel, 1.0, &pa, bm, 0.0, &mut got, n, &ep);
                check_close(&got, &want, k, &what);
            }
        }
    }
}

#[test]
fn b_read_in_place() {
    // Shapes whose B is read where it lies (few rows of C, or a shallow B): edge columns,
    // several K blocks, B rows wider than its columns (a strided view), the NC block boundary,
    // the whole-K parallel driver, rows of C at least 8192 apart with K ≤ 32 (A micro-panels
    // outermost), contractions (K ≥ M) of many rows, tiles of 12 rows and 8 (any row count);
    // with a per-row bias, a residual and Relu.
    for isa in cpu::test_isas() {
        let mut rng = Rng::new(23);
        for &(m, n, k, parallel) in &[
            (1, 70, 5, false),
            (7, 33, 300, false),
            (24, 3136, 144, true),
            (48, 2000, 300, true),
            (64, 95, 600, false),
            (20, NC + 45, 300, false),
            (200, 333, 17, true),
            (96, 12544, 16, false),
            (30, 8203, 24, true),
            (128, 700, 256, true),
            (100, 65, 400, false),
            // 12-row tiles starting at row 4 of a micro-panel, then a 17-wide column.
            (44, 49, 200, false),
        ] {
            let ldb = n + 5;
            let a = rng.vec(m * k);
            let b = rng.vec(k * ldb);
            let am = MatRef::row_major(&a, m, k);
            let bm = MatRef {
                data: &b,
                rows: k,
                cols: n,
                row_stride: ldb,
                col_stride: 1,
            };
            if isa != Isa::Portable {
                assert!(read_b_in_place(isa, &Src::Mat(bm), m, k), "{m}x{n}x{k}");
            }
            let row_bias = rng.vec(m);
            let z = rng.vec(m * n);
            let want = fused_ref(&am, &bm, &row_bias, &z);
            let ep = Epilogue {
                bias: Bias::PerRow(&row_bias),
                residual: Some((&z, n)),
                activation: Activation::Relu,
            };
            let what = format!("{isa:?} {m}x{n}x{k} parallel {parallel}");
            let mut got = vec![f32::NAN; m * n];
            sgemm_with(isa, parallel, 1.0, am, bm, 0.0, &mut got, n, &ep);
            check_close(&got, &want, k, &what);
            let pa = PackedA::with_isa(isa, am);
            let mut got = vec![f32::NAN; m * n];
            sgemm_packed_a_with(parallel, 1.0, &pa, bm, 0.0, &mut got, n, &ep);
            check_close(&got, &want, k, &format!("packed A {what}"));
        }
    }
}

#[test]
fn b_packed_when_its_rows_alias_in_cache() {
    // A contraction (K ≥ M) of many rows is read in place, unless B's rows are a multiple of
    // 1 KiB apart (sgemm 1024³), B is at most 64 columns wide (a 7² image), or C is an
    // expansion (K < M).
    for isa in cpu::test_isas().into_iter().filter(|&i| i != Isa::Portable) {
        let b = vec![0.0f32; 512 * 1024];
        let view = |cols| Src::Mat(MatRef::row_major(&b, 512, cols));
        assert!(read_b_in_place(isa, &view(1000), 256, 512));
        assert!(!read_b_in_place(isa, &view(1024), 256, 512));
        assert!(!read_b_in_place(isa, &view(1000), 1024, 512));
        assert!(read_b_in_place(isa, &view(65), 256, 512));
        assert!(!read_b_in_place(isa, &view(49), 256, 512));
        // Few rows of C are read in place at any width.
        assert!(read_b_in_place(isa, &view(49), 64, 512));
    }
}

#[test]
fn whole_k_grid_splits_rows_when_that_is_shorter_or_reads_less() {
    // ResNet-50's 256-channel 3×3 layer at 14² (M 256, N 196) on 2 threads: two tasks of 128
    // rows over all 224 (padded) columns read A once and B twice (256 + 2·224 = 704 rows and
    // columns), where the general 2×3 grid of 128 × 96 reads 3·256 + 2·224 = 1216.
    assert_eq!(whole_k_grid(256, 196, (8, 32), 2), (128, 224));
    // A wide, short product (M 64, N 3136): the general grid, which splits the columns.
    assert_eq!(
        whole_k_grid(64, 3136, (8, 32), 2),
        grid::task_grid(64, 3136, 8, 32, 6)
    );
    // M 2048, N 49 (ResNet-50's 512→2048 layers at 7²): the general grid's 11 row blocks of
    // 192 rows run in 6 waves of 24 rows of tiles, the last with one thread idle (144 in
    // all); 16 blocks of 128 rows run in 8 waves of 16 (128), reading B's 64 padded columns
    // 16 times instead of 11 (2048 + 16·64 = 3072 rows and columns read against 2752, less
    // than an eighth more).
    assert_eq!(whole_k_grid(2048, 49, (8, 32), 2), (128, 64));
    // M 1024, N 1024 (the MatMul): the general grid splits only the rows as well, into 6
    // blocks of 176 that take 3 waves of 22 rows of tiles on one thread and 2 of 22 and one
    // of 18 on the other; 8 balanced blocks of 128 take 4 waves of 16 on each.
    assert_eq!(grid::task_grid(1024, 1024, 8, 32, 6), (176, 1024));
    assert_eq!(whole_k_grid(1024, 1024, (8, 32), 2), (128, 1024));
    // The 256-channel layer at 14² on 4 threads: 4 tasks of 64 rows, which read less (256 +
    // 4·224 rows and columns) than the general grid's 12 tasks of 88 rows × 64 columns (4·256
    // + 3·224).
    assert_eq!(grid::task_grid(256, 196, 8, 32, 12), (88, 64));
    assert_eq!(whole_k_grid(256, 196, (8, 32), 4), (64, 224));
    // On 8 threads and more, the general grid (about three tasks a thread) whatever the
    // rows-only one would read or take.
    for threads in [8, 16] {
        assert_eq!(
            whole_k_grid(256, 196, (8, 32), threads),
            grid::task_grid(256, 196, 8, 32, 3 * threads)
        );
    }
}

#[test]
fn balanced_rows_end_the_waves_soonest() {
    // 128 rows of tiles on 2 threads from 6 blocks: 6 of 22 take 3 waves (66), 8 of 16 take
    // 4 (64), 10 of 13 take 5 (65).
    assert_eq!(grid::balanced_rows(128, 2, 6), 16);
    // 256 on 2 from 12: 12 of 22 (132), 14 of 19 (133), 16 of 16 (128).
    assert_eq!(grid::balanced_rows(256, 2, 12), 16);
    // Already even: the fewest blocks among equally short paths.
    assert_eq!(grid::balanced_rows(32, 2, 2), 16);
    assert_eq!(grid::balanced_rows(96, 4, 4), 24);
    // 7 rows of tiles on 3 threads from 3 blocks: 3 of 3 (3), 6 of 2 (4 in 2 waves), 9 of 1
    // (7 blocks, 3 waves of 1): 3.
    assert_eq!(grid::balanced_rows(7, 3, 3), 3);
}

#[test]
fn whole_k_parallel_on_several_pool_sizes() {
    // The whole-K parallel driver (packed A, B packed on the fly, bias, residual and Relu) on
    // pools of 2, 3, 4 and 16 threads, whose grids split the rows only or rows and columns.
    for isa in cpu::test_isas() {
        let mut rng = Rng::new(31);
        for &(m, n, k) in &[(256, 196, 600), (200, 333, 300), (64, 900, 260)] {
            let f = Fused::new(&mut rng, m, n, k);
            let (am, bm, want, ep) = (f.am(), f.bm(), f.want(), f.ep());
            let pa = PackedA::with_isa(isa, am);
            for threads in [2, 3, 4, 16] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let mut got = vec![f32::NAN; m * n];
                pool.install(|| sgemm_packed_a_with(true, 1.0, &pa, bm, 0.0, &mut got, n, &ep));
                check_close(
                    &got,
                    &want,
                    k,
                    &format!("{isa:?} {m}x{n}x{k} {threads} threads"),
                );
            }
        }
    }
}

#[test]
fn streamed_b_panels() {
    // A generated B (a panel source, as a convolution's implicit im2col) over K > 128 with at
    // most MC rows of C is packed one micro-panel at a time, on the calling thread and on pools
    // of 2, 3 and 16 threads (the whole-K driver, or the blocked one below the parallel
    // threshold): one K block, several with edge columns, one tile row, more columns than an NC
    // block; a shallow one is packed whole.
    for isa in cpu::test_isas() {
        let mut rng = Rng::new(37);
        for &(m, n, k) in &[
            (64, 3136, 147),
            (100, 517, 600),
            (8, 45, 300),
            (192, 70, 27),
            (16, NC + 45, 200),
        ] {
            let f = Fused::new(&mut rng, m, n, k);
            let (am, bm, want, ep) = (f.am(), f.bm(), f.want(), f.ep());
            let src = pack::MatSource(bm);
            let panels: &dyn PanelSource = &src;
            assert_eq!(
                driver::stream_b(isa, &Src::Panels(panels), m, k),
                isa != Isa::Portable && k > 128,
                "{m}x{n}x{k}"
            );
            let pa = PackedA::with_isa(isa, am);
            let mut got = vec![f32::NAN; m * n];
            sgemm_packed_a_src(false, 1.0, &pa, panels, 0.0, &mut got, n, &ep);
            check_close(&got, &want, k, &format!("{isa:?} {m}x{n}x{k}"));
            for threads in [2, 3, 16] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let mut got = vec![f32::NAN; m * n];
                pool.install(|| sgemm_packed_a_src(true, 1.0, &pa, panels, 0.0, &mut got, n, &ep));
                check_close(
                    &got,
                    &want,
                    k,
                    &format!("{isa:?} {m}x{n}x{k} {threads} threads"),
                );
            }
        }
    }
}

#[test]
fn streamed_b_panels_per_column_bias() {
    // A streamed B with a per-column bias and an activation applied after the store.
    let (m, n, k) = (40, 300, 150);
    for isa in cpu::test_isas() {
        let mut rng = Rng::new(41);
        let (a, b, col_bias) = (rng.vec(m * k), rng.vec(k * n), rng.vec(n));
        let (am, bm) = (MatRef::row_major(&a, m, k), MatRef::row_major(&b, k, n));
        let mut want = vec![0.0; m * n];
        reference::gemm_ref(1.0, &am, &bm, 0.0, &mut want, n);
        for row in want.chunks_mut(n) {
            for (v, &c) in row.iter_mut().zip(&col_bias) {
                *v = reference::activation_ref(Activation::Sigmoid, *v + c);
            }
        }
        let ep = Epilogue {
            bias: Bias::PerCol(&col_bias),
            residual: None,
            activation: Activation::Sigmoid,
        };
        let src = pack::MatSource(bm);
        let pa = PackedA::with_isa(isa, am);
        let mut got = vec![f32::NAN; m * n];
        sgemm_packed_a_src(false, 1.0, &pa, &src, 0.0, &mut got, n, &ep);
        check_close(&got, &want, k, &format!("{isa:?}"));
    }
}

/// `v` rounded to bfloat16 and back (to nearest, ties to even).
fn bf16_round(v: &[f32]) -> Vec<f32> {
    v.iter()
        .map(|&x| half::bf16::from_f32(x).to_f32())
        .collect()
}

/// A product over a B packed as bfloat16 pairs is the float32 product of A and B rounded to
/// bfloat16 (ties to even), on one thread and in parallel, with every epilogue, odd and even
/// K (a last slot half empty), edge rows and columns, a transposed A and the blocked and
/// whole-K drivers (K over two blocks of pairs). Where the CPU lacks AVX512_BF16 (or the SIMD
/// kernels are off) no such packing is made.
#[test]
fn bf16_pairs_products() {
    let mut rng = Rng::new(23);
    let b0 = rng.vec(6);
    let packed = PackedB::bf16_pairs(MatRef::row_major(&b0, 2, 3));
    assert_eq!(packed.is_some(), cpu::test_bf16_dot());
    if packed.is_none() {
        return;
    }
    for &(m, n, k, ta) in &[
        (1, 1, 1, false),
        (5, 7, 3, false),
        (8, 32, 2, false),
        (9, 33, 41, true),
        (17, 70, 513, false),
        (70, 90, 300, true),
        (MC + 9, 40, 1030, false),
        (128, 768, 768, false),
        (1, 1000, 129, false),
    ] {
        let a = rng.vec(m * k);
        let b = rng.vec(k * n);
        let am = if ta {
            MatRef::row_major(&a, k, m).t()
        } else {
            MatRef::row_major(&a, m, k)
        };
        let bm = MatRef::row_major(&b, k, n);
        let (ar, br) = (bf16_round(&a), bf16_round(&b));
        let arm = if ta {
            MatRef::row_major(&ar, k, m).t()
        } else {
            MatRef::row_major(&ar, m, k)
        };
        let pb = PackedB::bf16_pairs(bm).expect("AVX512_BF16");
        assert!(pb.is_bf16() && pb.rows() == k && pb.cols() == n);
        let col_bias = rng.vec(n);
        let ldc = n + 2;
        let c0 = rng.vec(m * ldc);
        let z = rng.vec(m * n);
        for (alpha, beta, ep) in [
            (1.0, 0.0, Epilogue::NONE),
            (0.5, -1.5, Epilogue::NONE),
            (
                1.0,
                0.0,
                Epilogue {
                    bias: Bias::PerCol(&col_bias),
                    residual: Some((&z, n)),
                    activation: Activation::Relu,
                },
            ),
        ] {
            let mut want = c0.clone();
            reference::gemm_ref(
                alpha,
                &arm,
                &MatRef::row_major(&br, k, n),
                beta,
                &mut want,
                ldc,
            );
            for i in 0..m {
                for j in 0..n {
                    let v = &mut want[i * ldc + j];
                    if let Bias::PerCol(bias) = ep.bias {
                        *v += bias[j];
                    }
                    if let Some((z, ld)) = ep.residual {
                        *v += z[i * ld + j];
                    }
                    *v = reference::activation_ref(ep.activation, *v);
                }
            }
            for parallel in [false, true] {
                let mut got = c0.clone();
                sgemm_packed_with(parallel, alpha, am, &pb, beta, &mut got, ldc, &ep);
                let what = format!("bf16 {m}x{n}x{k} ta={ta} a={alpha} b={beta} par={parallel}");
                check_close(&got, &want, k, &what);
            }
        }
    }
}

/// Hand-computed: bfloat16 keeps 8 significant bits, so `1 + 2⁻⁸` rounds to 1 (a tie, to the
/// even 1) and `1 + 3·2⁻⁸` to `1 + 2⁻⁶` (a tie, to the even neighbour); A's row
/// `[1 + 2⁻⁸, 1 + 3·2⁻⁸, 3]` times B's columns `[1, 0, 2]` and `[0, 1, 0]` gives 7 and
/// `1.015625`, where float32 gives `7.00390625` and `1.01171875`.
#[test]
fn bf16_pairs_round_their_operands() {
    let a = [1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8), 3.0];
    let b = [1.0, 0.0, 0.0, 1.0, 2.0, 0.0];
    let Some(pb) = PackedB::bf16_pairs(MatRef::row_major(&b, 3, 2)) else {
        assert!(!cpu::test_bf16_dot());
        return;
    };
    let mut c = [f32::NAN; 2];
    let am = MatRef::row_major(&a, 1, 3);
    sgemm_packed(1.0, am, &pb, 0.0, &mut c, 2, &Epilogue::NONE);
    assert_eq!(c, [7.0, 1.015625]);
    let mut f = [0.0; 2];
    sgemm(1.0, am, MatRef::row_major(&b, 3, 2), 0.0, &mut f, 2);
    assert_eq!(f, [7.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8)]);
}
