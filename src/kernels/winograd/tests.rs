//! Tests of the Winograd convolution against the direct one, of its schedules and of the
//! geometries it takes.

use super::*;
use crate::kernels::cpu;
use crate::kernels::reference::{self, Rng};

fn params(n: usize, c: usize, h: usize, w: usize, oc: usize, pad: [usize; 4]) -> Conv2dParams {
    Conv2dParams {
        batch: n,
        in_channels: c,
        in_h: h,
        in_w: w,
        out_channels: oc,
        kernel_h: 3,
        kernel_w: 3,
        stride_h: 1,
        stride_w: 1,
        pad_top: pad[0],
        pad_left: pad[1],
        pad_bottom: pad[2],
        pad_right: pad[3],
        dilation_h: 1,
        dilation_w: 1,
        groups: 1,
    }
}

/// Checks the variant of output tile `r` (4 or 2) on `p`, whichever [`output_tile`] would pick,
/// in the order `block` forces (else [`run`]'s), with its tensors in the plain layout,
/// against the direct f64 sum: the error stays below 1e-5 of the output scale (Σ|w·x| over
/// the window, the sum's own conditioning).
fn check(
    isa: Isa,
    (p, r): (Conv2dParams, usize),
    act: Activation,
    block: Option<Schedule>,
    rng: &mut Rng,
) {
    check_in(isa, (p, r), act, block, Layout::Plain, rng)
}

/// [`check`] with the tensors in `layout`: a blocked run reads the input reordered to the
/// blocked layout, and its output is reordered back before the comparison (`NaN` outside
/// what it writes would show as a mismatch).
fn check_in(
    isa: Isa,
    (p, r): (Conv2dParams, usize),
    act: Activation,
    block: Option<Schedule>,
    layout: Layout,
    rng: &mut Rng,
) {
    let x = rng.vec(p.input_len());
    let w = rng.vec(p.weights_len());
    let bias = rng.vec(p.out_channels);
    let f = WinogradFilters::prepare(isa, r, p.out_channels, p.in_channels, &w);
    assert_eq!(f.fits(&p), output_tile(&p) == Some(r));
    let mut want = vec![0.0; p.output_len()];
    reference::conv2d_ref(&p, &x, &w, Some(&bias), act, &mut want);
    let mut got = vec![f32::NAN; p.output_len()];
    let ep = (Some(&bias[..]), act);
    let blocked = layout == Layout::Blocked;
    let input = if blocked {
        let mut b = vec![f32::NAN; x.len()];
        let dims = (p.batch, p.in_channels, p.in_h * p.in_w);
        crate::kernels::nchwc::to_blocked(isa, &x, dims, &mut b).unwrap();
        b
    } else {
        x.clone()
    };
    let mut out = vec![f32::NAN; p.output_len()];
    match block {
        Some(s) => run_scheduled(isa, &p, &f, ep, layout, (&input, &mut out), s),
        None => run(isa, &p, &f, ep, layout, &input, &mut out),
    }
    if blocked {
        let dims = (p.batch, p.out_channels, p.out_h() * p.out_w());
        crate::kernels::nchwc::to_plain(isa, &out, dims, &mut got).unwrap();
    } else {
        got = out;
    }
    // Inputs and weights are in [-1, 1): the window sum of |w·x| is at most 9·in_c.
    let scale = 9.0 * p.in_channels as f32;
    for (i, (&g, &e)) in got.iter().zip(&want).enumerate() {
        assert!(
            (g - e).abs() <= 1e-5 * scale,
            "{isa:?} {p:?} [{i}]: {g} vs {e}"
        );
    }
}

/// The blocked layout (channels in blocks of 16) gives the direct convolution's values too,
/// in every schedule: edge tiles, pads on one side, outputs smaller than a tile, several
/// blocks of channels, a batch, and more threads than bands.
#[test]
fn blocked_layout_matches_direct_convolution() {
    let mut rng = Rng::new(29);
    for isa in cpu::test_isas() {
        for (p, act) in [
            (params(1, 16, 8, 8, 16, [1, 1, 1, 1]), Activation::Relu),
            (params(2, 32, 11, 13, 48, [0, 0, 0, 0]), Activation::None),
            (params(1, 32, 9, 7, 16, [2, 0, 1, 2]), Activation::Sigmoid),
            (params(1, 16, 2, 5, 32, [1, 1, 0, 1]), Activation::None),
            (params(1, 64, 14, 14, 64, [1, 1, 1, 1]), Activation::Relu),
        ] {
            for r in [4, 2] {
                check_in(isa, (p, r), act, None, Layout::Blocked, &mut rng);
            }
        }
        for schedule in [
            Schedule::Phases(5),
            Schedule::Phases(1000),
            Schedule::Bands(3),
            Schedule::Bands(9),
        ] {
            for r in [4, 2] {
                let p = params(2, 16, 13, 10, 32, [1, 1, 1, 1]);
                let case = (p, r);
                check_in(
                    isa,
                    case,
                    Activation::Relu,
                    Some(schedule),
                    Layout::Blocked,
                    &mut rng,
                );
            }
        }
    }
    // Phases whose output transform cuts blocks into bands (more threads than blocks).
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(8)
        .build()
        .unwrap();
    pool.install(|| {
        for isa in cpu::test_isas() {
            let p = params(1, 16, 24, 24, 32, [1, 1, 1, 1]);
            let case = (p, 4);
            check_in(
                isa,
                case,
                Activation::None,
                Some(Schedule::Phases(36)),
                Layout::Blocked,
                &mut rng,
            );
        }
    });
}

#[test]
fn matches_direct_convolution() {
    let mut rng = Rng::new(21);
    for isa in cpu::test_isas() {
        for (p, act) in [
            (params(1, 16, 8, 8, 16, [1, 1, 1, 1]), Activation::None),
            (params(1, 16, 8, 8, 16, [1, 1, 1, 1]), Activation::Relu),
            // Output sizes that are not multiples of 4, no padding, asymmetric padding.
            (params(2, 17, 11, 13, 21, [0, 0, 0, 0]), Activation::None),
            (params(1, 20, 9, 7, 33, [2, 0, 1, 2]), Activation::Sigmoid),
            // Outputs smaller than one tile.
            (params(1, 16, 3, 3, 16, [0, 0, 0, 0]), Activation::None),
            (params(1, 16, 2, 5, 18, [1, 1, 0, 1]), Activation::None),
            // ResNet-like.
            (params(1, 64, 14, 14, 64, [1, 1, 1, 1]), Activation::Relu),
        ] {
            for r in [4, 2] {
                check(isa, (p, r), act, None, &mut rng);
            }
        }
        // Several tile blocks, a partial last one; bands of unequal sizes, one band per
        // tile row, and more bands asked for than there are tile rows.
        for schedule in [
            Schedule::Phases(5),
            Schedule::Bands(3),
            Schedule::Bands(4),
            Schedule::Bands(9),
        ] {
            for r in [4, 2] {
                check(
                    isa,
                    (params(2, 16, 13, 10, 24, [1, 1, 1, 1]), r),
                    Activation::Relu,
                    Some(schedule),
                    &mut rng,
                );
            }
        }
    }
}

/// On more than 12 threads the phase schedule cuts each position's GEMM into row pieces,
/// and the result is still the direct convolution's: blocks of 37 and 50 tiles on pools of
/// 16 and 40 threads (pieces of 19 + 18, 25 + 25, 19 + 18 and 17 + 17 + 16 rows; each
/// image's last block, of 26 tiles, in one piece). Blocks of 50 tiles are 5 whole tile rows,
/// so the output transform also cuts its 3 groups of planes into 5 bands of one tile row.
#[test]
fn phases_cut_into_row_pieces_on_many_threads() {
    assert_eq!(gemm_pieces(200, 36, 2), 1);
    assert_eq!(gemm_pieces(200, 36, 16), 2);
    assert_eq!(gemm_pieces(200, 36, 40), 4);
    assert_eq!(gemm_pieces(20, 36, 40), 1);
    // F(2×2, 3×3)'s 16 positions: 48 tasks on 16 threads are 3 pieces of each.
    assert_eq!(gemm_pieces(200, 16, 16), 3);
    // 24 channels are 3 groups of 8 planes.
    assert_eq!(output_bands(3, 5, 16, true), 5);
    assert_eq!(output_bands(3, 5, 16, false), 1);
    // ResNet-50's 64-channel layer at 56² (14 tile rows) on 16 threads: 8 groups × 4 bands
    // (the blocked layout's 4 blocks × 8 bands).
    assert_eq!(output_bands(8, 14, 16, true), 4);
    assert_eq!(output_bands(4, 14, 16, true), 8);
    assert_eq!(output_bands(32, 4, 16, true), 1);
    assert_eq!(output_bands(8, 14, 1, true), 1);
    let mut rng = Rng::new(23);
    for threads in [16, 40] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        for isa in cpu::test_isas() {
            for block in [37, 50] {
                // 10 × 10 tiles per image, two images.
                let p = params(2, 16, 40, 40, 24, [1, 1, 1, 1]);
                pool.install(|| {
                    check(
                        isa,
                        (p, 4),
                        Activation::Relu,
                        Some(Schedule::Phases(block)),
                        &mut rng,
                    )
                });
            }
        }
    }
}

#[test]
fn suits_only_plain_3x3() {
    let base = params(1, 32, 8, 8, 32, [1, 1, 1, 1]);
    // 2 images of 2×4 tiles: 16 tiles, the fewest it takes (one 14×14 image has 16).
    let base = Conv2dParams {
        batch: 2,
        in_h: 8,
        in_w: 16,
        ..base
    };
    assert!(suits(&base));
    assert!(!suits(&Conv2dParams { batch: 1, ..base }));
    assert!(suits(&Conv2dParams {
        batch: 1,
        in_h: 14,
        in_w: 14,
        ..base
    }));
    assert!(!suits(&Conv2dParams {
        stride_w: 2,
        ..base
    }));
    assert!(!suits(&Conv2dParams {
        dilation_h: 2,
        ..base
    }));
    assert!(!suits(&Conv2dParams {
        kernel_w: 5,
        ..base
    }));
    assert!(!suits(&Conv2dParams { groups: 2, ..base }));
    assert!(!suits(&Conv2dParams {
        in_channels: 8,
        ..base
    }));
    // Fewer than 32×32 channel pairs: the implicit im2col GEMM measured faster.
    assert!(!suits(&Conv2dParams {
        in_channels: 16,
        ..base
    }));
    assert!(!suits(&Conv2dParams {
        out_channels: 24,
        ..base
    }));
    assert!(suits(&Conv2dParams {
        in_channels: 96,
        out_channels: 24,
        ..base
    }));
    // Wider layers take F(2×2, 3×3), up to 512×512 channel pairs.
    assert_eq!(output_tile(&base), Some(4));
    let wide = Conv2dParams {
        in_channels: 512,
        out_channels: 512,
        ..base
    };
    assert_eq!(output_tile_on(&wide, || false), Some(2));
    assert!(!suits(&Conv2dParams {
        in_channels: 1024,
        ..wide
    }));
    // ResNet-50's 512 channels at 7×7: 4 tiles of 4×4 are too few, 16 of 2×2 are enough;
    // 32 channels are too few for F(2×2, 3×3); one 5×5 image has 9 tiles of 2×2.
    let resnet = params(1, 512, 7, 7, 512, [1, 1, 1, 1]);
    assert_eq!(output_tile_on(&resnet, || false), Some(2));
    // With two full-width 512-bit FMA pipes, 16 tiles are too few for F(2×2, 3×3); a batch of
    // four has enough. F(4×4, 3×3) does not ask.
    assert_eq!(output_tile_on(&resnet, || true), None);
    let batch4 = Conv2dParams { batch: 4, ..resnet };
    assert_eq!(output_tile_on(&batch4, || true), Some(2));
    assert_eq!(output_tile_on(&base, || panic!("asked")), Some(4));
    assert_eq!(output_tile(&resnet).is_some(), !peak::wide_fma());
    assert_eq!(
        output_tile_on(
            &Conv2dParams {
                in_channels: 64,
                ..resnet
            },
            || false
        ),
        Some(2)
    );
    assert_eq!(
        output_tile(&Conv2dParams {
            out_channels: 32,
            ..resnet
        }),
        None
    );
    assert_eq!(output_tile(&params(1, 64, 5, 5, 64, [1, 1, 1, 1])), None);
}
