//! Tests of the 2-D convolution: its paths against the naive reference on random shapes, on
//! every ISA the CPU has, and hand-computed values.

use super::*;
use crate::kernels::reference::{self, Rng};

#[allow(clippy::too_many_arguments)]
fn params(
    n: usize,
    ic: usize,
    h: usize,
    w: usize,
    oc: usize,
    k: (usize, usize),
    s: (usize, usize),
    pad: [usize; 4],
    d: (usize, usize),
    g: usize,
) -> Conv2dParams {
    Conv2dParams {
        batch: n,
        in_channels: ic,
        in_h: h,
        in_w: w,
        out_channels: oc,
        kernel_h: k.0,
        kernel_w: k.1,
        stride_h: s.0,
        stride_w: s.1,
        pad_top: pad[0],
        pad_left: pad[1],
        pad_bottom: pad[2],
        pad_right: pad[3],
        dilation_h: d.0,
        dilation_w: d.1,
        groups: g,
    }
}

fn check(isa: Isa, p: Conv2dParams, act: Activation, rng: &mut Rng) {
    let x = rng.vec(p.input_len());
    let w = rng.vec(p.weights_len());
    let bias = rng.vec(p.out_channels);
    for with_bias in [false, true] {
        let b = with_bias.then_some(&bias[..]);
        let mut want = vec![0.0; p.output_len()];
        reference::conv2d_ref(&p, &x, &w, b, act, &mut want);
        let conv = Conv2d::with_isa(isa, p, &w, b).unwrap();
        let mut got = vec![f32::NAN; p.output_len()];
        conv.run(&x, &mut got, act);
        let k = (p.in_channels / p.groups * p.kernel_h * p.kernel_w) as f32;
        let close = |got: &[f32], want: &[f32], what: &str| {
            for (i, (&g, &e)) in got.iter().zip(want).enumerate() {
                assert!(
                    (g - e).abs() <= 1e-5 * k.sqrt().max(1.0) * (1.0 + e.abs()),
                    "{isa:?} {p:?} {what} [{i}]: {g} vs {e}"
                );
            }
        };
        close(&got, &want, "");
        // With a residual: act(conv + bias + z), on every path.
        let z = rng.vec(p.output_len());
        reference::conv2d_ref(&p, &x, &w, b, Activation::None, &mut want);
        for (e, &v) in want.iter_mut().zip(&z) {
            *e = reference::activation_ref(act, *e + v);
        }
        got.fill(f32::NAN);
        conv.run_with_residual(&x, &mut got, Some(&z), act);
        close(&got, &want, "residual");
    }
}

fn all(isa: Isa) {
    let mut rng = Rng::new(5);
    let cases = [
        params(1, 3, 7, 9, 4, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 1),
        params(2, 4, 8, 8, 6, (1, 1), (1, 1), [0, 0, 0, 0], (1, 1), 1),
        params(2, 4, 8, 8, 6, (1, 1), (2, 2), [0, 0, 0, 0], (1, 1), 2),
        params(1, 5, 11, 10, 7, (3, 2), (2, 3), [2, 0, 1, 3], (1, 1), 1),
        params(1, 4, 12, 12, 8, (3, 3), (1, 1), [2, 2, 2, 2], (2, 2), 2),
        params(3, 6, 9, 7, 6, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 6),
        params(1, 6, 9, 7, 6, (5, 5), (2, 2), [2, 1, 2, 3], (1, 2), 6),
        params(1, 3, 5, 5, 6, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 3),
        params(1, 2, 4, 4, 3, (5, 5), (1, 1), [0, 0, 0, 0], (1, 1), 1),
        params(1, 16, 20, 20, 33, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 1),
        params(1, 64, 17, 19, 20, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 1),
        params(1, 1, 1, 40, 5, (1, 7), (1, 1), [0, 3, 0, 3], (1, 1), 1),
        // More pixels than one GEMM column block (NC).
        params(1, 2, 70, 70, 3, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 1),
        params(2, 3, 9, 1, 4, (3, 1), (2, 1), [1, 0, 1, 0], (1, 1), 1),
        // Implicit im2col on a zero-padded copy (stride_w 1 with pads): asymmetric pads,
        // dilations, vertical stride, odd widths.
        params(1, 3, 16, 16, 8, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 1),
        params(1, 5, 13, 37, 9, (3, 3), (2, 1), [0, 2, 1, 0], (1, 2), 1),
        params(2, 4, 9, 11, 6, (5, 3), (1, 1), [2, 1, 3, 0], (2, 1), 2),
        params(1, 3, 6, 5, 4, (3, 3), (1, 1), [3, 3, 3, 3], (1, 1), 1),
        params(1, 2, 33, 35, 5, (2, 2), (1, 1), [0, 0, 1, 1], (1, 1), 1),
        // Staged copies split into stride phases: stems (7×7 and 3×3 at stride 2), odd and
        // even widths, strides 2 and 3, dilation, asymmetric pads, no pads, groups, widths
        // below the stride.
        params(1, 3, 30, 31, 8, (7, 7), (2, 2), [3, 3, 3, 3], (1, 1), 1),
        params(2, 3, 17, 18, 5, (3, 3), (2, 2), [1, 1, 1, 1], (1, 1), 1),
        params(1, 4, 13, 23, 6, (3, 4), (1, 3), [0, 2, 1, 1], (1, 2), 2),
        params(1, 3, 12, 12, 4, (2, 2), (2, 2), [0, 0, 0, 0], (1, 1), 1),
        params(1, 5, 9, 20, 3, (5, 3), (3, 2), [2, 0, 2, 1], (2, 3), 1),
        params(1, 2, 5, 1, 3, (3, 3), (2, 2), [1, 1, 1, 1], (1, 1), 1),
        params(1, 40, 15, 15, 9, (3, 3), (2, 2), [1, 1, 1, 1], (1, 1), 1),
        // Staged rows wider than a tile: panels inside one output row (one copy per panel
        // row) and panels across two, at strides 2 and 1.
        params(1, 3, 9, 140, 5, (7, 7), (2, 2), [3, 3, 3, 3], (1, 1), 1),
        params(1, 2, 4, 80, 3, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 1),
        // A horizontal stride with pads too wide to stage: the strided gather.
        params(1, 2, 4, 5, 3, (3, 3), (1, 2), [1, 1000, 1, 999], (1, 1), 1),
        // 1×1 with strides and no pads: the input sampled at the stride, then pointwise.
        params(2, 6, 9, 11, 5, (1, 1), (2, 3), [0, 0, 0, 0], (1, 1), 1),
        params(1, 20, 14, 14, 33, (1, 1), (2, 2), [0, 0, 0, 0], (1, 1), 1),
        params(1, 4, 7, 8, 6, (1, 1), (3, 1), [0, 0, 0, 0], (1, 1), 2),
        // Pads far wider than the input with a vertical stride that keeps the output
        // small: no zero-padded copy of (2·10⁹ + 8) rows (it aborted on allocation).
        params(
            1,
            2,
            8,
            8,
            2,
            (3, 3),
            (1_000_000_000, 1),
            [1_000_000_000, 0, 1_000_000_000, 0],
            (1, 1),
            1,
        ),
        // Empty input planes with pads: outputs are bias only.
        params(1, 2, 1, 0, 3, (1, 1), (1, 1), [0, 1, 0, 1], (1, 1), 1),
        // No input channels at all (not the direct path, whose filters need a tap).
        params(1, 0, 5, 6, 3, (3, 3), (2, 2), [1, 1, 1, 1], (1, 1), 1),
        params(1, 2, 0, 2, 2, (1, 1), (1, 1), [1, 0, 1, 0], (1, 1), 2),
        // Depthwise with pads far wider than the input and a vertical stride that keeps the
        // output small: the padded-copy path would need 2^16 rows of 2^21 floats (512 GiB).
        params(
            1,
            2,
            1 << 16,
            1,
            2,
            (3, 3),
            (1 << 40, 2),
            [0, 1 << 20, 0, 1 << 20],
            (1, 2),
            2,
        ),
        // Depthwise: odd sizes, strides 1-3, dilations, asymmetric pads, wide rows.
        params(1, 8, 8, 8, 8, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 8),
        params(1, 3, 16, 16, 3, (3, 3), (2, 2), [1, 1, 1, 1], (1, 1), 3),
        params(2, 5, 13, 37, 5, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 5),
        params(1, 4, 15, 33, 4, (3, 3), (2, 2), [0, 1, 1, 0], (1, 1), 4),
        params(1, 3, 11, 29, 3, (5, 3), (1, 2), [2, 0, 1, 3], (2, 3), 3),
        params(1, 3, 11, 29, 3, (3, 5), (2, 1), [0, 4, 2, 4], (1, 2), 3),
        params(1, 2, 10, 23, 2, (3, 3), (3, 3), [1, 1, 1, 1], (1, 1), 2),
        params(1, 2, 7, 7, 2, (7, 7), (1, 1), [3, 3, 3, 3], (1, 1), 2),
        params(1, 2, 2, 3, 2, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 2),
        params(1, 2, 5, 1, 2, (3, 1), (1, 1), [1, 0, 1, 0], (1, 1), 2),
        params(1, 2, 6, 57, 2, (1, 1), (2, 2), [0, 0, 0, 0], (1, 1), 2),
        params(1, 4, 56, 56, 4, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 4),
        params(1, 2, 9, 17, 2, (2, 2), (2, 2), [0, 0, 1, 1], (1, 1), 2),
    ];
    for p in cases {
        check(isa, p, Activation::None, &mut rng);
        check(isa, p, Activation::Relu, &mut rng);
        let clip = Activation::Clip {
            min: -0.5,
            max: 0.75,
        };
        check(isa, p, clip, &mut rng);
    }
}

#[test]
fn conv_portable() {
    all(Isa::Portable);
}

#[test]
fn conv_avx2() {
    if let Some(isa) = cpu::test_isa(Isa::Avx2Fma) {
        all(isa);
    }
}

#[test]
fn conv_avx512() {
    if let Some(isa) = cpu::test_isa(Isa::Avx512) {
        all(isa);
    }
}

#[test]
fn depthwise_random_shapes() {
    let mut rng = Rng::new(11);
    let mut next = reference::size_picker(99);
    for isa in cpu::test_isas() {
        // Widths past 64 cover several column groups of the AVX-512 kernel.
        for _ in 0..150 {
            let c = 1 + next(4);
            let k = (1 + next(5), 1 + next(5));
            let s = (1 + next(3), 1 + next(3));
            let d = (1 + next(2), 1 + next(2));
            let pad = [next(k.0), next(k.1), next(k.0), next(k.1)];
            let h = d.0 * (k.0 - 1) + 1 + next(10);
            let w = d.1 * (k.1 - 1) + 1 + next(150);
            let p = params(1 + next(2), c, h, w, c, k, s, pad, d, c);
            check(isa, p, Activation::None, &mut rng);
        }
        // Many channels: the plane kernel takes several planes per call, split over the
        // threads in chunks that do not cross images.
        for (n, c, hw, st) in [(2, 96, 7, 1), (1, 37, 14, 2), (3, 20, 20, 1)] {
            let pad = [1, 1, 1, 1];
            let p = params(n, c, hw, hw, c, (3, 3), (st, st), pad, (1, 1), c);
            check(isa, p, Activation::Relu, &mut rng);
        }
        // 3×3 filters (the AVX-512 kernel's own rows) on wide planes, several 16-column blocks
        // and column groups, clamped by Clip, at strides 1 and 2; and one with a vertical
        // dilation of 2, which takes the general rows.
        let clip = Activation::Clip {
            min: -0.5,
            max: 0.5,
        };
        for st in [1, 2] {
            let p = params(1, 3, 9, 70, 3, (3, 3), (st, st), [1, 1, 1, 1], (1, 1), 3);
            check(isa, p, clip, &mut rng);
        }
        let p = params(1, 3, 11, 20, 3, (3, 3), (1, 1), [1, 1, 1, 1], (2, 1), 3);
        check(isa, p, Activation::Relu, &mut rng);
        // Output planes of 56 rows or more: the AVX-512 3×3 rows prefetch input rows ahead,
        // up to the plane's last row.
        for (st, h, pad) in [(1, 57, 1), (1, 60, 0), (2, 113, 1), (2, 116, 0)] {
            let p = params(1, 2, h, 37, 2, (3, 3), (st, st), [pad; 4], (1, 1), 2);
            assert!(p.out_h() >= 56);
            check(isa, p, clip, &mut rng);
        }
        // Rows at most 7 wide with one column of padding on the left: the AVX-512 kernel puts
        // two planes in a vector, the odd last plane through the other kernels. Widths 1–7,
        // 0–2 columns of padding on the right (outputs one narrower to one wider than the
        // input), pads above and below of 0–2, heights around the four-row blocks.
        for c in [2, 5, 8] {
            for w in 1..=7 {
                for (h, pad) in [(7, [1, 1, 1, 1]), (5, [0, 1, 2, 0]), (9, [2, 1, 0, 2])] {
                    if w + pad[1] + pad[3] < 3 {
                        continue;
                    }
                    let p = params(1 + c % 2, c, h, w, c, (3, 3), (1, 1), pad, (1, 1), c);
                    check(isa, p, clip, &mut rng);
                }
            }
        }
        // The AVX2 3×3 tiles: rows 8 to 25 wide end with a block moved back (widths just
        // past a multiple of 8 recompute 7 columns); rows narrower than 8 store whole vectors
        // into the rows after, but not past the plane's end; rows too wide for the zero row
        // take the general kernel.
        for st in [1, 2] {
            for w in [8, 9, 15, 16, 17, 23, 25] {
                let p = params(
                    2,
                    3,
                    6,
                    w * st,
                    3,
                    (3, 3),
                    (st, st),
                    [1, 1, 1, 1],
                    (1, 1),
                    3,
                );
                check(isa, p, clip, &mut rng);
            }
            let p = params(
                1,
                2,
                5,
                1100 * st,
                2,
                (3, 3),
                (st, st),
                [1, 1, 1, 1],
                (1, 1),
                2,
            );
            check(isa, p, clip, &mut rng);
        }
        // The AVX-512 3×3 rows compute blocks of four output rows, each input row feeding
        // every row of the block it reaches: heights around the block size, pads of 0 to 2
        // above and below (asymmetric), at strides 1 and 2.
        for st in [1, 2] {
            for h in [1, 2, 3, 4, 5, 7, 8, 9, 13] {
                for pad in [[0, 0, 0, 0], [1, 1, 1, 1], [2, 1, 0, 1], [0, 0, 2, 1]] {
                    let w = [5, 40][h % 2];
                    if h + pad[0] + pad[2] < 3 || w + pad[1] + pad[3] < 3 {
                        continue;
                    }
                    let p = params(1, 2, h, w, 2, (3, 3), (st, st), pad, (1, 1), 2);
                    check(isa, p, clip, &mut rng);
                }
            }
        }
    }
}

#[test]
fn hand_computed() {
    // 1 channel 3x3 input, 2x2 kernel of ones, no pad: sums of 2x2 windows.
    let p = params(1, 1, 3, 3, 1, (2, 2), (1, 1), [0, 0, 0, 0], (1, 1), 1);
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    let conv = Conv2d::new(p, &[1.0; 4], Some(&[0.5])).unwrap();
    let mut out = [0.0; 4];
    conv.run(&x, &mut out, Activation::None);
    assert_eq!(out, [12.5, 16.5, 24.5, 28.5]);
    assert_eq!((p.out_h(), p.out_w()), (2, 2));
    assert!(Conv2d::new(p, &[1.0; 3], None).is_err());
}

#[test]
fn large_k() {
    // K = 2700 spans several KC blocks of the GEMM.
    let mut rng = Rng::new(9);
    let p = params(1, 300, 20, 20, 4, (3, 3), (1, 1), [1, 1, 1, 1], (1, 1), 1);
    check(cpu::isa(), p, Activation::None, &mut rng);
}

#[test]
fn direct_path_random_shapes() {
    let Some(isa) = cpu::test_isa(Isa::Avx512) else {
        return;
    };
    let mut rng = Rng::new(21);
    let mut next = reference::size_picker(77);
    let (mut direct, mut want_direct) = (0, 0);
    // One to four input channels: channels past a block of four, widths around the 16-wide
    // vectors and past six of them (chunks of the row), strides, dilations, pads.
    for i in 0..120 {
        let ic = 1 + next(4);
        let oc = [2, 5, 8, 13, 32][i % 5];
        let k = (1 + next(7), 1 + next(7));
        let s = (1 + next(3), 1 + next(3));
        let d = (1 + next(2), 1 + next(2));
        let pad = [next(k.0), next(k.1), next(k.0), next(k.1)];
        let h = d.0 * (k.0 - 1) + 1 + next(12);
        let w = d.1 * (k.1 - 1) + 1 + [next(20), 15 + next(4), 90 + next(120)][i % 3];
        let p = params(1 + next(2), ic, h, w, oc, k, s, pad, d, 1);
        let conv = Conv2d::with_isa(isa, p, &rng.vec(p.weights_len()), None).unwrap();
        if matches!(conv.path, Path::Direct(..)) {
            direct += 1;
        }
        // Only 1×1 kernels without pads and with a horizontal stride or none at all stay on
        // the GEMM path.
        if k != (1, 1) || pad != [0; 4] || (s.1 == 1 && s.0 > 1) {
            want_direct += 1;
        }
        let act = [Activation::None, Activation::Relu, Activation::Sigmoid][i % 3];
        check(isa, p, act, &mut rng);
    }
    assert_eq!(direct, want_direct);
    assert!(direct > 100);
    // Stems large enough to run in parallel, in pools of 2 and 3, with MobileNetV2's
    // Clip(0, 6): at most 32 channels split their rows between the threads (halves of halves,
    // uneven at 3); more channels (72), or too few rows for every thread (a 12-row image),
    // split the channel blocks (shared unevenly; with fewer than two blocks a thread, each
    // block's rows cut in pieces too).
    let clip6 = Activation::Clip { min: 0.0, max: 6.0 };
    for threads in [2, 3] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        for (oc, s, h) in [
            (32, 2, 64),
            (21, 1, 64),
            (4, 1, 64),
            (6, 2, 64),
            (72, 1, 40),
            (13, 1, 12),
        ] {
            let p = params(2, 3, h, 62, oc, (3, 3), (s, s), [1, 1, 1, 1], (1, 1), 1);
            assert!(direct_input(isa, &p).is_some());
            pool.install(|| check(isa, p, clip6, &mut rng));
        }
    }
}
