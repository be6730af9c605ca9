//! The banded kernels against the reference convolutions.

use super::super::Conv2dParams;
use super::*;
use crate::kernels::cpu::{self, Isa};
use crate::kernels::reference::{self, Rng};

/// The pair computed by the reference convolution twice.
#[allow(clippy::too_many_arguments)]
fn reference_pair(
    p1: &Conv2dParams,
    p2: &Conv2dParams,
    x: &[f32],
    (w1, b1): (&[f32], &[f32]),
    (w2, b2): (&[f32], &[f32]),
    (act1, act2): (Activation, Activation),
) -> Vec<f32> {
    let mut mid = vec![0.0; p1.output_len()];
    reference::conv2d_ref(p1, x, w1, Some(b1), act1, &mut mid);
    let mut want = vec![0.0; p2.output_len()];
    reference::conv2d_ref(p2, &mid, w2, Some(b2), act2, &mut want);
    want
}

/// Random pairs (strides 1 and 2, 3×3 and 5×5, pads, odd sizes, channel counts off the
/// split unit, batches) on every ISA the CPU has, banded into bands of a few rows (the
/// buffer's sliding rows, the image's top and bottom edges), at 1 and 3 threads, against
/// the reference; and the unbanded path.
#[test]
fn bands_match_the_two_convolutions() {
    let mut rng = Rng::new(11);
    // (batch, in_c, mid_c, h, w, k, stride, pads [top, left, bottom, right])
    let cases = [
        (1, 3, 16, 17, 19, 3, 1, [1, 1, 1, 1]),
        (1, 4, 20, 23, 21, 3, 2, [1, 1, 1, 1]),
        (2, 5, 9, 14, 33, 3, 2, [0, 1, 1, 0]),
        (1, 6, 24, 30, 12, 5, 1, [2, 2, 2, 2]),
        (1, 2, 17, 9, 40, 5, 2, [2, 0, 3, 2]),
        (1, 3, 8, 6, 6, 3, 1, [0, 0, 0, 0]),
        (1, 3, 8, 5, 7, 3, 2, [4, 1, 4, 1]),
        // No input channels: the intermediate is the pointwise biases.
        (1, 0, 8, 6, 6, 3, 1, [1, 1, 1, 1]),
    ];
    let acts = [
        (
            Activation::Clip { min: 0.0, max: 6.0 },
            Activation::Clip { min: 0.0, max: 6.0 },
        ),
        (Activation::Relu, Activation::None),
        (Activation::Sigmoid, Activation::Relu),
    ];
    for isa in cpu::test_isas() {
        for (i, &(n, cin, mid, h, w, k, s, pad)) in cases.iter().enumerate() {
            let p1 = Conv2dParams::pointwise(n, cin, (h, w), mid);
            let p2 = p1.depthwise_of_output((k, k), (s, s), pad, (1, 1));
            let x = rng.vec(p1.input_len());
            let (w1, b1) = (rng.vec(p1.weights_len()), rng.vec(mid));
            let (w2, b2) = (rng.vec(p2.weights_len()), rng.vec(mid));
            let (act1, act2) = acts[i % acts.len()];
            let want = reference_pair(&p1, &p2, &x, (&w1, &b1), (&w2, &b2), (act1, act2));
            let pw = Conv2d::with_isa(isa, p1, &w1, Some(&b1)).unwrap();
            let dw = Conv2d::with_isa(isa, p2, &w2, Some(&b2)).unwrap();
            let fused = PointwiseDepthwise::new(pw, &w1, act1, dw).unwrap();
            // Bands of about two to six rows; then one band; then no bands.
            let row = mid * w * 4;
            for (band, min) in [
                (row * 3, 0),
                (row * 13, 0),
                (usize::MAX / 2, 0),
                (1, usize::MAX),
            ] {
                let kernel = fused.clone().with_band_bytes(band, min);
                for threads in [1, 3] {
                    let pool = rayon::ThreadPoolBuilder::new()
                        .num_threads(threads)
                        .build()
                        .unwrap();
                    let mut got = vec![f32::NAN; p2.output_len()];
                    pool.install(|| kernel.run(&x, &mut got, act2));
                    for (j, (&g, &e)) in got.iter().zip(&want).enumerate() {
                        assert!(
                            (g - e).abs() <= 1e-4 * (1.0 + e.abs()),
                            "{isa:?} case {i} band {band} t{threads} [{j}]: {g} vs {e}"
                        );
                    }
                }
            }
        }
    }
}

/// The pair with its projection (a residual or none, an activation or none) against the
/// reference convolutions, banded into bands of a few rows and in one band, on 1 thread
/// (bands) and 3 (the pair, then the projection; or with enough rows, each thread a range of
/// them), on every ISA the CPU has; and the
/// depthwise convolution alone with the projection, on the pointwise output.
#[test]
fn projected_bands_match_the_three_convolutions() {
    let mut rng = Rng::new(13);
    // (batch, in_c, mid_c, out_c, h, w, stride, pads)
    let cases = [
        (1, 3, 16, 5, 17, 19, 1, [1, 1, 1, 1]),
        (2, 4, 20, 9, 23, 21, 2, [1, 1, 1, 1]),
        (1, 6, 24, 33, 14, 30, 1, [1, 1, 1, 1]),
        (1, 2, 17, 8, 9, 40, 2, [0, 1, 1, 0]),
        // Rows enough for 3 threads to split them (`PART_MIN_ROWS`), at strides 1 and 2.
        (1, 3, 12, 7, 70, 9, 1, [1, 1, 1, 1]),
        (2, 4, 9, 10, 101, 6, 2, [1, 0, 1, 1]),
    ];
    let relu6 = Activation::Clip { min: 0.0, max: 6.0 };
    for isa in cpu::test_isas() {
        for (i, &(n, cin, mid, cout, h, w, s, pad)) in cases.iter().enumerate() {
            let p1 = Conv2dParams::pointwise(n, cin, (h, w), mid);
            let p2 = p1.depthwise_of_output((3, 3), (s, s), pad, (1, 1));
            let p3 = Conv2dParams::pointwise(n, mid, (p2.out_h(), p2.out_w()), cout);
            let x = rng.vec(p1.input_len());
            let (w1, b1) = (rng.vec(p1.weights_len()), rng.vec(mid));
            let (w2, b2) = (rng.vec(p2.weights_len()), rng.vec(mid));
            let (w3, b3) = (rng.vec(p3.weights_len()), rng.vec(cout));
            let z = rng.vec(p3.output_len());
            let mut expanded = vec![0.0; p1.output_len()];
            reference::conv2d_ref(&p1, &x, &w1, Some(&b1), relu6, &mut expanded);
            let mut pair = vec![0.0; p2.output_len()];
            reference::conv2d_ref(&p2, &expanded, &w2, Some(&b2), relu6, &mut pair);
            let pw = Conv2d::with_isa(isa, p1, &w1, Some(&b1)).unwrap();
            let dw = Conv2d::with_isa(isa, p2, &w2, Some(&b2)).unwrap();
            let proj = Conv2d::with_isa(isa, p3, &w3, Some(&b3)).unwrap();
            let fused = PointwiseDepthwise::new(pw, &w1, relu6, dw.clone())
                .unwrap()
                .with_projection(proj.clone())
                .unwrap();
            let alone = PointwiseDepthwise::depthwise_only(dw)
                .unwrap()
                .with_projection(proj)
                .unwrap();
            let proj_act = if i % 2 == 0 {
                Activation::None
            } else {
                Activation::Relu
            };
            for residual in [None, Some(&z[..])] {
                let mut want = vec![0.0; p3.output_len()];
                reference::conv2d_ref(&p3, &pair, &w3, Some(&b3), Activation::None, &mut want);
                for (j, v) in want.iter_mut().enumerate() {
                    *v = reference::activation_ref(proj_act, *v + residual.map_or(0.0, |z| z[j]));
                }
                let row = mid * w * 4;
                let kernels = [(&fused, &x), (&alone, &expanded)];
                for ((kernel, x), band) in iproduct(kernels, [row * 6, usize::MAX / 2]) {
                    let kernel = kernel.clone().with_band_bytes(band, 0);
                    let first = if kernel.pointwise.is_some() {
                        "pair"
                    } else {
                        "alone"
                    };
                    for threads in [1, 2, 3] {
                        let pool = rayon::ThreadPoolBuilder::new()
                            .num_threads(threads)
                            .build()
                            .unwrap();
                        let mut got = vec![f32::NAN; p3.output_len()];
                        pool.install(|| {
                            kernel.run_projected(x, residual, &mut got, (relu6, proj_act))
                        });
                        // Too few rows for two parts, with an expansion: the channels and
                        // the projection's sum split (`run_split`).
                        let split = threads > 1
                            && p2.out_h() < threads * PART_MIN_ROWS
                            && kernel.pointwise.is_some()
                            && mid >= threads * CHANNEL_UNIT
                            && isa != Isa::Portable;
                        assert_eq!(kernel.splits[threads].get().is_some(), split, "{isa:?} {i}");
                        for (j, (&g, &e)) in got.iter().zip(&want).enumerate() {
                            assert!(
                                (g - e).abs() <= 1e-4 * (1.0 + e.abs()),
                                "{isa:?} {first} case {i} band {band} t{threads} residual {} \
                                 [{j}]: {g} vs {e}",
                                residual.is_some()
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Pairs that are not a 1×1 convolution then a depthwise one over its output are refused.
#[test]
fn refuses_what_is_not_a_pointwise_depthwise_pair() {
    let isa = Isa::Portable;
    let p1 = Conv2dParams::pointwise(1, 2, (5, 5), 4);
    let dw = Conv2dParams {
        in_channels: 4,
        kernel_h: 3,
        kernel_w: 3,
        groups: 4,
        ..p1
    };
    let make = |p: Conv2dParams| Conv2d::with_isa(isa, p, &vec![1.0; p.weights_len()], None);
    let w1 = vec![1.0; 8];
    let ok = PointwiseDepthwise::new(make(p1).unwrap(), &w1, Activation::None, make(dw).unwrap());
    assert!(ok.is_ok());
    let strided = Conv2dParams { stride_h: 2, ..p1 };
    let wider = Conv2dParams { in_w: 6, ..dw };
    let dense = Conv2dParams { groups: 1, ..dw };
    for (a, b) in [(strided, dw), (p1, wider), (p1, dense)] {
        let r = PointwiseDepthwise::new(make(a).unwrap(), &w1, Activation::None, make(b).unwrap());
        assert!(r.is_err(), "{a:?} {b:?}");
    }
    let short = PointwiseDepthwise::new(
        make(p1).unwrap(),
        &w1[..7],
        Activation::None,
        make(dw).unwrap(),
    );
    assert!(short.is_err());
    assert!(PointwiseDepthwise::depthwise_only(make(dw).unwrap()).is_ok());
    assert!(PointwiseDepthwise::depthwise_only(make(dense).unwrap()).is_err());
}

/// Every pair of an item of `a` and one of `b`, `a` outermost.
fn iproduct<A: Copy, B: Copy>(a: [A; 2], b: [B; 2]) -> impl Iterator<Item = (A, B)> {
    a.into_iter()
        .flat_map(move |x| b.into_iter().map(move |y| (x, y)))
}
