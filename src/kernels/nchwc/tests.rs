//! Tests of the blocked layout: the reorders against their definition, and the convolution
//! against the naive NCHW reference (through the reorders) on random shapes with edge strips,
//! partial groups of output blocks, several passes, kernels, pads, strides, dilations,
//! batches, residuals and activations, on every ISA the CPU has.

use super::*;
use crate::kernels::conv::Conv2dParams;
use crate::kernels::cpu;
use crate::kernels::reference::{self, activation_ref, Rng};

#[test]
fn reorders_follow_the_layout_and_invert_each_other() {
    // Planes of whole transposes of 16 positions, of a tail only, and of both.
    for (isa, plane) in cpu::test_isas()
        .into_iter()
        .flat_map(|isa| [1, 7, 16, 37].map(|plane| (isa, plane)))
    {
        let (n, c) = (2, 32);
        let x: Vec<f32> = (0..n * c * plane).map(|v| v as f32).collect();
        let mut b = vec![0.0; x.len()];
        to_blocked(isa, &x, (n, c, plane), &mut b).unwrap();
        for img in 0..n {
            for ch in 0..c {
                for p in 0..plane {
                    let want = x[(img * c + ch) * plane + p];
                    let at = ((img * (c / 16) + ch / 16) * plane + p) * 16 + ch % 16;
                    assert_eq!(
                        b[at], want,
                        "{isa:?} {plane} image {img} channel {ch} at {p}"
                    );
                }
            }
        }
        let mut back = vec![0.0; x.len()];
        to_plain(isa, &b, (n, c, plane), &mut back).unwrap();
        assert_eq!(back, x, "{isa:?} {plane}");
    }
    let mut out = vec![0.0; 24];
    assert!(to_blocked(Isa::Portable, &[0.0; 24], (1, 24, 1), &mut out).is_err());
    assert!(to_plain(Isa::Portable, &[0.0; 32], (1, 16, 2), &mut out).is_err());
}

#[test]
fn a_large_reorder_in_parallel_matches() {
    let (n, c, plane) = (1, 64, 30 * 31);
    let mut rng = Rng::new(3);
    let x = rng.vec(n * c * plane);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let (mut b, mut back) = (vec![0.0; x.len()], vec![0.0; x.len()]);
    pool.install(|| {
        to_blocked(cpu::isa(), &x, (n, c, plane), &mut b).unwrap();
        to_plain(cpu::isa(), &b, (n, c, plane), &mut back).unwrap();
    });
    assert_eq!(back, x);
    assert_eq!(b[16 + 5], x[5 * plane + 1]);
}

/// One 1×1 case: `(batch, in_c, h, w, out_c, stride)`.
fn check(
    isa: Isa,
    (n, ic, h, w, oc, s): (usize, usize, usize, usize, usize, (usize, usize)),
    act: Activation,
    residual: bool,
    rng: &mut Rng,
) {
    check_window(
        isa,
        (n, ic, h, w, oc),
        Window::pointwise(s),
        act,
        residual,
        rng,
    );
}

/// One case: `(batch, in_c, h, w, out_c)` over `win`.
fn check_window(
    isa: Isa,
    (n, ic, h, w, oc): (usize, usize, usize, usize, usize),
    win: Window,
    act: Activation,
    residual: bool,
    rng: &mut Rng,
) {
    let s = win.stride;
    let p = Conv2dParams {
        batch: n,
        in_channels: ic,
        in_h: h,
        in_w: w,
        out_channels: oc,
        kernel_h: win.kernel.0,
        kernel_w: win.kernel.1,
        stride_h: s.0,
        stride_w: s.1,
        pad_top: win.pads[0],
        pad_left: win.pads[1],
        pad_bottom: win.pads[2],
        pad_right: win.pads[3],
        dilation_h: win.dilation.0,
        dilation_w: win.dilation.1,
        groups: 1,
    };
    let x = rng.vec(p.input_len());
    let wts = rng.vec(p.weights_len());
    let bias = rng.vec(oc);
    let z = rng.vec(p.output_len());
    let mut want = vec![0.0; p.output_len()];
    reference::conv2d_ref(&p, &x, &wts, Some(&bias), Activation::None, &mut want);
    if residual {
        want.iter_mut().zip(&z).for_each(|(v, z)| *v += z);
    }
    want.iter_mut().for_each(|v| *v = activation_ref(act, *v));
    let (oh, ow) = (p.out_h(), p.out_w());
    let conv = BlockedConv::new(ic, oc, win, &wts, Some(&bias)).unwrap();
    assert_eq!(conv.out_hw((h, w)), Some((oh, ow)));
    let mut xb = vec![0.0; x.len()];
    to_blocked(isa, &x, (n, ic, h * w), &mut xb).unwrap();
    let mut zb = vec![0.0; z.len()];
    to_blocked(isa, &z, (n, oc, oh * ow), &mut zb).unwrap();
    let mut got_b = vec![f32::NAN; p.output_len()];
    conv.run(
        isa,
        &xb,
        (n, h, w),
        residual.then_some(&zb[..]),
        &mut got_b,
        act,
    )
    .unwrap();
    let mut got = vec![0.0; got_b.len()];
    to_plain(isa, &got_b, (n, oc, oh * ow), &mut got).unwrap();
    let tol = 1e-5 * ((ic * win.kernel.0 * win.kernel.1) as f32).sqrt();
    for (i, (&g, &e)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - e).abs() <= tol * (1.0 + e.abs()),
            "{isa:?} n{n} {ic}->{oc} {h}x{w} {win:?} {act:?} residual {residual} [{i}]: {g} vs {e}"
        );
    }
}

#[test]
fn pointwise_matches_the_reference() {
    let mut rng = Rng::new(11);
    let cases = [
        (1, 16, 1, 1, 16, (1, 1)),
        (1, 32, 3, 5, 64, (1, 1)),
        (2, 48, 7, 7, 80, (1, 1)),
        // several passes, the last a partial one; a group of one block after four full ones
        (1, 272, 4, 6, 272, (1, 1)),
        (1, 64, 9, 11, 128, (2, 2)),
        (1, 32, 5, 8, 48, (2, 1)),
        // more positions than a chunk (192), with an edge strip
        (1, 16, 15, 17, 32, (1, 1)),
    ];
    for isa in cpu::test_isas() {
        for (k, &case) in cases.iter().enumerate() {
            let act = [Activation::None, Activation::Relu, Activation::Sigmoid][k % 3];
            check(isa, case, act, k % 2 == 1, &mut rng);
        }
    }
}

#[test]
fn pointwise_in_parallel_matches_the_reference() {
    let mut rng = Rng::new(12);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(3)
        .build()
        .unwrap();
    pool.install(|| {
        for isa in cpu::test_isas() {
            check(
                isa,
                (1, 256, 14, 14, 320, (1, 1)),
                Activation::Clip {
                    min: -0.5,
                    max: 0.5,
                },
                true,
                &mut rng,
            );
            check(
                isa,
                (2, 64, 28, 28, 64, (2, 2)),
                Activation::Silu,
                false,
                &mut rng,
            );
            // One and two output blocks: strips of 24 and 12 positions, the tasks split at
            // whole strips, edge strips at the ends.
            check(
                isa,
                (1, 32, 20, 21, 16, (1, 1)),
                Activation::Relu,
                true,
                &mut rng,
            );
            check(
                isa,
                (1, 48, 17, 19, 32, (1, 1)),
                Activation::None,
                false,
                &mut rng,
            );
        }
    });
}

#[test]
fn windows_match_the_reference() {
    let mut rng = Rng::new(13);
    let win = |k: (usize, usize), s: (usize, usize), pads: [usize; 4], d: (usize, usize)| Window {
        kernel: k,
        stride: s,
        pads,
        dilation: d,
    };
    let cases = [
        // ResNet's stride-2 3×3, small: several one-block passes, edge strips
        ((1, 32, 9, 9, 64), win((3, 3), (2, 2), [1; 4], (1, 1))),
        ((2, 16, 6, 7, 80), win((3, 3), (1, 1), [1; 4], (1, 1))),
        // uneven pads, a wide kernel, no padding, dilation
        ((1, 16, 8, 5, 16), win((3, 5), (1, 2), [0, 2, 1, 1], (1, 1))),
        ((1, 48, 7, 7, 32), win((2, 2), (1, 1), [0; 4], (1, 1))),
        (
            (1, 16, 9, 10, 32),
            win((3, 3), (2, 1), [2, 2, 2, 2], (2, 2)),
        ),
        ((1, 16, 12, 12, 16), win((7, 7), (2, 2), [3; 4], (1, 1))),
    ];
    for isa in cpu::test_isas() {
        for (k, &(dims, w)) in cases.iter().enumerate() {
            let act = [Activation::Relu, Activation::None, Activation::HardSwish][k % 3];
            check_window(isa, dims, w, act, k % 2 == 0, &mut rng);
        }
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    pool.install(|| {
        check_window(
            cpu::isa(),
            (1, 64, 28, 28, 128),
            win((3, 3), (2, 2), [1; 4], (1, 1)),
            Activation::Relu,
            true,
            &mut rng,
        );
    });
}

#[test]
fn bad_shapes_are_refused() {
    let one = Window::pointwise((1, 1));
    assert!(BlockedConv::new(24, 16, one, &[0.0; 384], None).is_err());
    assert!(BlockedConv::new(16, 16, Window::pointwise((0, 1)), &[0.0; 256], None).is_err());
    assert!(BlockedConv::new(16, 16, one, &[0.0; 255], None).is_err());
    assert!(BlockedConv::new(16, 16, one, &[0.0; 256], Some(&[0.0; 15])).is_err());
    let big = Window {
        kernel: (8, 8),
        ..one
    };
    assert!(BlockedConv::new(16, 16, big, &[0.0; 256 * 64], None).is_err());
    let three = Window {
        kernel: (3, 3),
        ..one
    };
    let conv = BlockedConv::new(16, 16, three, &[0.0; 256 * 9], None).unwrap();
    assert_eq!(conv.out_hw((2, 5)), None);
    let mut out = vec![0.0; 16 * 3];
    assert!(conv
        .run(
            Isa::Portable,
            &[0.0; 16 * 10],
            (1, 2, 5),
            None,
            &mut out,
            Activation::None
        )
        .is_err());
    let conv = BlockedConv::new(16, 32, one, &[1.0; 512], None).unwrap();
    let mut out = vec![0.0; 64];
    assert!(conv
        .run(
            Isa::Portable,
            &[1.0; 32],
            (1, 1, 2),
            None,
            &mut out,
            Activation::None
        )
        .is_ok());
    assert_eq!(out, vec![16.0; 64]);
    assert!(conv
        .run(
            Isa::Portable,
            &[1.0; 31],
            (1, 1, 2),
            None,
            &mut out,
            Activation::None
        )
        .is_err());
    assert!(conv
        .run(
            Isa::Portable,
            &[1.0; 32],
            (1, 1, 2),
            Some(&[0.0; 3]),
            &mut out,
            Activation::None
        )
        .is_err());
}
