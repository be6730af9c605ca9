//! The transposed convolution against the gathering oracle on random geometries (1-D to 3-D,
//! strides, dilations, pads, groups, batches), with packed and plain weights, on 1 and 3
//! threads, and with inputs long enough to be split into several chunks.

use super::*;
use crate::kernels::cpu;
use crate::kernels::reference::{conv_transpose_ref, size_picker, Rng};

/// The output size of one dimension (no output padding) where it is positive.
fn out_len(i: usize, k: usize, s: usize, d: usize, pads: (usize, usize)) -> Option<usize> {
    let full = (i - 1) * s + (k - 1) * d + 1;
    full.checked_sub(pads.0 + pads.1).filter(|&o| o > 0)
}

/// Runs `p` both ways on random data and compares with the oracle.
fn check(p: &ConvTransposeParams, threads: usize, rng: &mut Rng) {
    let x = rng.vec(p.batch * p.in_channels * p.in_plane());
    let w = rng.vec(p.weights_len());
    let bias = rng.vec(p.out_channels);
    let mut want = vec![0.0; p.batch * p.out_channels * p.out_plane()];
    conv_transpose_ref(p, &x, &w, Some(&bias), &mut want);
    let packed = ConvTransposeFilters::prepare(cpu::isa(), p, &w).expect("valid geometry");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("pool");
    for filters in [Filters::Packed(&packed), Filters::Plain(&w)] {
        // Stale contents must not leak into the result.
        let mut got = vec![f32::NAN; want.len()];
        pool.install(|| conv_transpose(p, &x, filters, Some(&bias), &mut got));
        let taps = (p.in_channels / p.groups * p.taps()) as f32;
        for (i, (&g, &e)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - e).abs() <= 1e-5 * taps.sqrt() * (1.0 + e.abs()) + 1e-5,
                "{p:?} threads {threads}: element {i} is {g}, expected {e}"
            );
        }
    }
}

#[test]
fn random_geometries_match_the_oracle() {
    let mut pick = size_picker(11);
    let mut rng = Rng::new(5);
    let mut ran = 0;
    while ran < 60 {
        let rank = 1 + pick(3);
        let groups = 1 + pick(3);
        let mut p = ConvTransposeParams {
            batch: 1 + pick(2),
            in_channels: groups * (1 + pick(4)),
            out_channels: groups * (1 + pick(5)),
            groups,
            in_sp: [1; 3],
            out_sp: [1; 3],
            kernel: [1; 3],
            strides: [1; 3],
            dilations: [1; 3],
            pads_begin: [0; 3],
        };
        let mut ok = true;
        for d in 3 - rank..3 {
            let (i, k, s, dl) = (1 + pick(9), 1 + pick(4), 1 + pick(3), 1 + pick(2));
            let pads = (pick(3), pick(3));
            match out_len(i, k, s, dl, pads) {
                Some(o) => {
                    // Output padding: up to stride - 1 more at the end.
                    p.out_sp[d] = o + pick(s);
                    (p.in_sp[d], p.kernel[d], p.strides[d], p.dilations[d]) = (i, k, s, dl);
                    p.pads_begin[d] = pads.0;
                }
                None => ok = false,
            }
        }
        if !ok {
            continue;
        }
        check(&p, 1 + 2 * (ran % 2), &mut rng);
        ran += 1;
    }
}

#[test]
fn inputs_split_into_chunks_match_the_oracle() {
    let mut rng = Rng::new(9);
    // 16 output channels through 3×3 taps: 144 rows of columns, about 1800 positions a chunk,
    // so 45×47 inputs take two chunks, the first ending inside a row.
    let p = ConvTransposeParams {
        batch: 1,
        in_channels: 8,
        out_channels: 16,
        groups: 1,
        in_sp: [1, 45, 47],
        out_sp: [1, 90, 94],
        kernel: [1, 3, 3],
        strides: [1, 2, 2],
        dilations: [1; 3],
        pads_begin: [0, 1, 1],
    };
    check(&p, 1, &mut rng);
    check(&p, 3, &mut rng);
    // Detection heads' upsampling: kernel 2, stride 2, no pads (the taps do not overlap).
    let p = ConvTransposeParams {
        batch: 2,
        in_channels: 24,
        out_channels: 1,
        groups: 1,
        in_sp: [1, 40, 40],
        out_sp: [1, 80, 80],
        kernel: [1, 2, 2],
        strides: [1, 2, 2],
        dilations: [1; 3],
        pads_begin: [0; 3],
    };
    check(&p, 3, &mut rng);
}

#[test]
fn bad_groups_and_weight_lengths_are_refused() {
    let mut p = ConvTransposeParams {
        batch: 1,
        in_channels: 4,
        out_channels: 6,
        groups: 4,
        in_sp: [1, 1, 3],
        out_sp: [1, 1, 5],
        kernel: [1, 1, 3],
        strides: [1; 3],
        dilations: [1; 3],
        pads_begin: [0; 3],
    };
    assert!(ConvTransposeFilters::prepare(cpu::isa(), &p, &[0.0; 24]).is_err());
    p.groups = 2;
    assert_eq!(p.weights_len(), 4 * 3 * 3);
    assert!(ConvTransposeFilters::prepare(cpu::isa(), &p, &[0.0; 35]).is_err());
    assert!(ConvTransposeFilters::prepare(cpu::isa(), &p, &[0.0; 36]).is_ok());
}
