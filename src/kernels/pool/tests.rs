//! Pooling against the naive reference (`kernels::reference`) on every ISA the CPU has:
//! random geometries, the flat-plane and stride-2 paths, NaN placement, hand-computed values.

use super::*;
use crate::kernels::reference::{self, Rng};

/// Output size with optional ceil mode (ONNX rule: the last window must start inside
/// input + left pad).
fn out(len: usize, k: usize, s: usize, d: usize, pb: usize, pe: usize, ceil: bool) -> usize {
    let eff = d * (k - 1) + 1;
    let span = len + pb + pe - eff;
    let mut o = if ceil {
        span.div_ceil(s) + 1
    } else {
        span / s + 1
    };
    if ceil && (o - 1) * s >= len + pb {
        o -= 1;
    }
    o
}

#[allow(clippy::too_many_arguments)]
fn params(
    n: usize,
    c: usize,
    h: usize,
    w: usize,
    k: (usize, usize),
    s: (usize, usize),
    pad: [usize; 4],
    d: (usize, usize),
    ceil: bool,
) -> Pool2dParams {
    Pool2dParams {
        batch: n,
        channels: c,
        in_h: h,
        in_w: w,
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
        out_h: out(h, k.0, s.0, d.0, pad[0], pad[2], ceil),
        out_w: out(w, k.1, s.1, d.1, pad[1], pad[3], ceil),
    }
}

fn check_all(isa: Isa, p: Pool2dParams, rng: &mut Rng) {
    let x = rng.vec(p.batch * p.channels * p.in_h * p.in_w);
    let len = p.batch * p.channels * p.out_h * p.out_w;
    let (mut want, mut got) = (vec![0.0; len], vec![f32::NAN; len]);
    reference::max_pool2d_ref(&p, &x, &mut want);
    max_pool2d_isa(isa, &p, &PoolWindows::new(&p, false), &x, &mut got);
    assert_eq!(got, want, "max {isa:?} {p:?}");
    for cip in [false, true] {
        reference::avg_pool2d_ref(&p, cip, &x, &mut want);
        got.fill(f32::NAN);
        avg_pool2d_isa(isa, &p, &PoolWindows::new(&p, cip), &x, &mut got);
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
                "avg {isa:?} cip={cip} {p:?}: {g} vs {w}"
            );
        }
    }
}

#[test]
fn matches_reference() {
    let mut rng = Rng::new(1);
    let cases = [
        params(1, 3, 8, 8, (2, 2), (2, 2), [0; 4], (1, 1), false),
        params(2, 5, 7, 9, (3, 3), (2, 2), [1, 1, 1, 1], (1, 1), false),
        params(2, 5, 7, 9, (3, 3), (2, 2), [1, 1, 1, 1], (1, 1), true),
        params(1, 2, 6, 6, (3, 3), (2, 2), [0; 4], (1, 1), true),
        params(1, 2, 10, 11, (3, 2), (3, 2), [2, 1, 0, 1], (2, 1), true),
        params(1, 4, 5, 5, (5, 5), (1, 1), [2, 2, 2, 2], (1, 1), false),
        params(1, 64, 56, 56, (3, 3), (2, 2), [1, 1, 1, 1], (1, 1), false),
        params(1, 8, 16, 16, (2, 2), (2, 2), [0; 4], (1, 1), false),
        params(1, 3, 17, 33, (2, 2), (2, 2), [0; 4], (1, 1), true),
        params(1, 3, 17, 33, (3, 3), (1, 1), [1; 4], (1, 1), false),
        params(1, 2, 9, 40, (3, 5), (1, 2), [0, 2, 1, 2], (1, 2), true),
        params(1, 2, 9, 41, (2, 3), (2, 1), [1, 0, 0, 1], (2, 3), false),
        params(1, 1, 1, 1, (1, 1), (1, 1), [0; 4], (1, 1), false),
        params(1, 1, 3, 3, (3, 3), (2, 2), [2; 4], (1, 1), true),
        params(2, 3, 12, 30, (7, 7), (3, 3), [3; 4], (1, 1), true),
        // Stride 2 with windows 2 and 3 wide: pads as wide as the window (columns and rows
        // whose windows miss the input give −∞), rows of 1 to 3 blocks of 16, a window
        // taller than the kernel's 16 rows, dilated rows.
        params(1, 2, 5, 20, (3, 3), (2, 2), [3, 3, 3, 3], (1, 1), false),
        params(1, 2, 6, 19, (2, 2), (2, 2), [2, 2, 2, 2], (1, 1), true),
        params(1, 3, 9, 97, (3, 3), (2, 2), [1, 0, 2, 1], (3, 1), true),
        params(1, 1, 20, 35, (17, 3), (2, 2), [1; 4], (1, 1), false),
    ];
    for isa in cpu::test_isas() {
        for p in cases {
            check_all(isa, p, &mut rng);
        }
    }
}

#[test]
fn random_shapes_match_reference() {
    let mut rng = Rng::new(7);
    let mut next = reference::size_picker(12345);
    for isa in cpu::test_isas() {
        for _ in 0..150 {
            let k = (1 + next(4), 1 + next(4));
            let s = (1 + next(3), 1 + next(3));
            let d = (1 + next(2), 1 + next(2));
            let pad = [next(k.0), next(k.1), next(k.0), next(k.1)];
            let h = d.0 * (k.0 - 1) + 1 + next(12);
            let w = d.1 * (k.1 - 1) + 1 + next(40);
            let p = params(1 + next(2), 1 + next(3), h, w, k, s, pad, d, next(2) == 1);
            check_all(isa, p, &mut rng);
        }
    }
}

#[test]
fn same_size_stride_one_planes_match_reference_and_the_row_path() {
    // The flat-plane path (`max_plane_same`): windows 1–7 wide and high (even ones with
    // uneven pads), planes from 1×1 to 25×31 and the SPPF's 10² and 20² with 5×5 windows.
    let mut rng = Rng::new(11);
    let mut next = reference::size_picker(777);
    let mut shapes: Vec<(usize, usize, usize, usize)> = vec![
        (10, 10, 5, 5),
        (20, 20, 5, 5),
        (1, 1, 3, 3),
        (3, 31, 7, 1),
        (25, 2, 1, 6),
    ];
    for _ in 0..60 {
        shapes.push((1 + next(25), 1 + next(31), 1 + next(7), 1 + next(7)));
    }
    for isa in cpu::test_isas() {
        for &(h, w, kh, kw) in &shapes {
            let pad = [(kh - 1) / 2, (kw - 1) / 2, kh / 2, kw / 2];
            let p = params(1, 2, h, w, (kh, kw), (1, 1), pad, (1, 1), false);
            assert!(narrow_same(&p), "{p:?}");
            // Signed zeros among the values: the maximum of -0 and +0 depends on the order
            // of the taps, which both paths share.
            let mut x = rng.vec(2 * h * w);
            for v in x.iter_mut().step_by(3) {
                *v = if *v < 0.0 { -0.0 } else { 0.0 };
            }
            let mut want = vec![0.0; x.len()];
            reference::max_pool2d_ref(&p, &x, &mut want);
            let windows = PoolWindows::new(&p, false);
            let (mut got, mut rows) = (vec![f32::NAN; x.len()], vec![f32::NAN; x.len()]);
            max_pool2d_isa(isa, &p, &windows, &x, &mut got);
            assert_eq!(got, want, "{isa:?} {p:?}");
            for (xp, op) in x.chunks(h * w).zip(rows.chunks_mut(h * w)) {
                max_plane_separable(isa, &p, &windows, xp, op);
            }
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&rows), "{isa:?} {p:?}");
            // One NaN: exactly the outputs whose window holds it are NaN.
            let at = next(h * w);
            let mut xn = vec![1.0f32; h * w];
            xn[at] = f32::NAN;
            let q = Pool2dParams { channels: 1, ..p };
            let mut o = vec![0.0; h * w];
            max_pool2d_isa(isa, &q, &windows, &xn, &mut o);
            let (iy, ix) = (at / w, at % w);
            for (i, v) in o.iter().enumerate() {
                let (oy, ox) = (i / w, i % w);
                let near =
                    |o: usize, i: usize, pad: usize, k: usize| (o..o + k).contains(&(i + pad));
                let want_nan = near(oy, iy, pad[0], kh) && near(ox, ix, pad[1], kw);
                assert_eq!(v.is_nan(), want_nan, "{isa:?} {q:?} NaN at {at}: {i}");
            }
        }
    }
}

#[test]
fn nan_propagates() {
    for isa in cpu::test_isas() {
        let p = params(1, 1, 4, 8, (2, 2), (2, 2), [0; 4], (1, 1), false);
        let mut x = vec![1.0f32; 32];
        x[8 + 3] = f32::NAN;
        let mut o = vec![0.0; 8];
        max_pool2d_isa(isa, &p, &PoolWindows::new(&p, false), &x, &mut o);
        assert!(o[1].is_nan(), "{isa:?} {o:?}");
        assert!(o.iter().enumerate().all(|(i, v)| i == 1 || *v == 1.0));
    }
    // 3×3 windows at stride 2 (the one-pass path) and at stride 1, rows of 40 (blocks of
    // 16 and a remainder): an output is NaN exactly when its window holds the NaN.
    for isa in cpu::test_isas() {
        for s in [1, 2] {
            let p = params(1, 1, 5, 40, (3, 3), (s, s), [1; 4], (1, 1), false);
            for at in [0, 1, 2, 17, 40 + 33, 2 * 40 + 39, 4 * 40 + 16] {
                let (iy, ix) = (at / 40, at % 40);
                let mut x = vec![1.0f32; 200];
                x[at] = f32::NAN;
                let mut o = vec![0.0; p.out_h * p.out_w];
                max_pool2d_isa(isa, &p, &PoolWindows::new(&p, false), &x, &mut o);
                for (i, v) in o.iter().enumerate() {
                    let (oy, ox) = (i / p.out_w, i % p.out_w);
                    let inside = |o: usize, i: usize| (o * s..o * s + 3).contains(&(i + 1));
                    let want_nan = inside(oy, iy) && inside(ox, ix);
                    assert_eq!(v.is_nan(), want_nan, "{isa:?} stride {s} NaN at {at}: {i}");
                    assert!(v.is_nan() || *v == 1.0);
                }
            }
        }
    }
}

#[test]
fn hand_computed() {
    // 1x1x3x3, 2x2 window stride 1 with ceil pad: corners.
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    let p = params(1, 1, 3, 3, (2, 2), (2, 2), [0; 4], (1, 1), true);
    assert_eq!((p.out_h, p.out_w), (2, 2));
    let mut o = [0.0; 4];
    max_pool2d(&p, &x, &mut o);
    assert_eq!(o, [5.0, 6.0, 8.0, 9.0]);
    avg_pool2d(&p, false, &x, &mut o);
    assert_eq!(o, [3.0, 4.5, 7.5, 9.0]);
    // count_include_pad without pads: the ceil window beyond the input is not counted.
    avg_pool2d(&p, true, &x, &mut o);
    assert_eq!(o, [3.0, 4.5, 7.5, 9.0]);
    // pad 1 all round, 3x3 window, stride 1 at the corner: 4 inside, 9 with pads.
    let p = params(1, 1, 3, 3, (3, 3), (1, 1), [1; 4], (1, 1), false);
    let mut o = [0.0; 9];
    avg_pool2d(&p, true, &x, &mut o);
    assert_eq!(o[0], 12.0 / 9.0);
    avg_pool2d(&p, false, &x, &mut o);
    assert_eq!(o[0], 3.0);
}

#[test]
fn global_pools() {
    let mut rng = Rng::new(2);
    for &(planes, size) in &[(1, 1), (3, 7), (64, 49), (512, 100)] {
        let x = rng.vec(planes * size);
        let (mut want, mut got) = (vec![0.0; planes], vec![0.0; planes]);
        reference::global_avg_pool_ref(planes, size, &x, &mut want);
        global_avg_pool(planes, size, &x, &mut got);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() < 1e-6);
        }
        reference::global_max_pool_ref(planes, size, &x, &mut want);
        global_max_pool(planes, size, &x, &mut got);
        assert_eq!(got, want);
    }
    let mut o = [0.0; 2];
    global_avg_pool(2, 2, &[1.0, 2.0, 3.0, 5.0], &mut o);
    assert_eq!(o, [1.5, 4.0]);
}
