//! The safe entry of the direct convolution kernel for few input channels
//! ([`direct_rows`]): its geometry, its weights' layout, and the checks made before the
//! AVX-512 code runs.

use crate::kernels::cpu::{self, Isa};

/// Output channels per block of the direct kernel's weights (and of its register tile).
pub(crate) const DIRECT_OCB: usize = 4;

/// Where the direct kernel reads: output pixel `(oy, ox)` sums tap `t` from
/// `x[taps[t] + oy·row_step + ox]` (consecutive output columns read consecutive floats, as in
/// a zero-padded input whose rows are split into the stride's phases).
#[derive(Clone, Copy, Debug)]
pub(crate) struct DirectGeometry<'a> {
    /// Per kernel tap (input channel, kernel row, kernel column), where output pixel (0, 0)
    /// reads.
    pub taps: &'a [usize],
    /// Floats between where consecutive output rows read.
    pub row_step: usize,
    /// Output height.
    pub oh: usize,
    /// Output width.
    pub ow: usize,
}

/// Whether [`direct_rows`] has a kernel for `isa` on this CPU.
pub(crate) fn has_direct(isa: Isa) -> bool {
    cfg!(target_arch = "x86_64") && isa == Isa::Avx512 && cpu::supported(isa)
}

/// Lays out filters `[planes][taps]` for [`direct_rows`]: per block of [`DIRECT_OCB`]
/// output channels, per tap, the block's channels (zeros past the last channel).
pub(crate) fn direct_weights(planes: usize, taps: usize, filters: &[f32]) -> Vec<f32> {
    let blocks = planes.div_ceil(DIRECT_OCB);
    let mut w = vec![0.0; blocks * taps * DIRECT_OCB];
    for (o, f) in filters.chunks_exact(taps).take(planes).enumerate() {
        let (b, lane) = (o / DIRECT_OCB, o % DIRECT_OCB);
        for (t, &v) in f.iter().enumerate() {
            w[(b * taps + t) * DIRECT_OCB + lane] = v;
        }
    }
    w
}

/// Computes output rows `rows` of one block of [`DIRECT_OCB`] output channels by the direct
/// kernel: `out[o][(oy − r0)·ow + ox] = clamp(bias[o] + Σ_t filter[o][t] · x[taps[t] + oy·row_step + ox])`
/// for `oy` in `r0..r1`, with the block's filters laid out by [`direct_weights`] in `w`
/// (`taps.len() · DIRECT_OCB` floats) and its biases in `bias`. Each `out[o]` holds the rows'
/// `(r1 − r0)·ow` floats of channel `o`, or is empty for a channel past the last. With
/// `clamp = Some((lo, hi))` every output is clamped to `min(max(v, lo), hi)` (NaN kept) before
/// it is stored.
///
/// Returns `false`, computing nothing, when `isa` has no such kernel ([`has_direct`]), the rows
/// are not inside the `oh` rows, or a buffer is too short for the geometry.
#[allow(clippy::too_many_arguments)]
pub(crate) fn direct_rows(
    isa: Isa,
    g: &DirectGeometry,
    rows: std::ops::Range<usize>,
    x: &[f32],
    w: &[f32],
    bias: &[f32],
    clamp: Option<(f32, f32)>,
    out: &mut [&mut [f32]; DIRECT_OCB],
) -> bool {
    let (r0, r1) = (rows.start, rows.end);
    let Some(len) = (r1.saturating_sub(r0)).checked_mul(g.ow) else {
        return false;
    };
    let reach = g.taps.iter().max().and_then(|&t| {
        r1.checked_sub(1)?
            .checked_mul(g.row_step)
            .and_then(|r| r.checked_add(t))
            .and_then(|r| r.checked_add(g.ow))
    });
    let fits = r0 <= r1
        && r1 <= g.oh
        && (r0 == r1 || reach.is_some_and(|r| r <= x.len()))
        && g.taps
            .len()
            .checked_mul(DIRECT_OCB)
            .is_some_and(|n| n <= w.len())
        && bias.len() >= DIRECT_OCB
        && out.iter().all(|o| o.is_empty() || o.len() == len);
    if !has_direct(isa) || !fits {
        return false;
    }
    if len == 0 {
        return true;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let dst = std::array::from_fn(|o| {
            let o = &mut out[o];
            if o.is_empty() {
                std::ptr::null_mut()
            } else {
                o.as_mut_ptr()
            }
        });
        // SAFETY: the CPU supports AVX-512F (`has_direct`); every tap's reads of rows `r0..r1`
        // end below `max(taps) + (r1 − 1)·row_step + ow ≤ x.len()`, `w` and `bias` hold the
        // block's weights and biases, and each non-empty output holds the rows'
        // `(r1 − r0)·ow` floats (checked above, without overflow); the outputs are distinct
        // `&mut` slices, so they overlap neither each other nor the inputs.
        unsafe {
            super::avx512_direct::direct_rows(
                g,
                (r0, r1),
                x.as_ptr(),
                (w.as_ptr(), bias.as_ptr()),
                clamp,
                dst,
            );
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (clamp, out);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_by_hand_and_refusals() {
        let isa = Isa::Avx512;
        if !has_direct(isa) {
            return;
        }
        // One input channel, a 1×2 kernel: channel 0 = x[i] + 10·x[i+1], channel 1 = 2·x[i],
        // each output row reading from 5 floats further than the one before.
        let taps = [0, 1];
        let g = DirectGeometry {
            taps: &taps,
            row_step: 5,
            oh: 2,
            ow: 4,
        };
        let filters = [1.0, 10.0, 2.0, 0.0];
        let w = direct_weights(2, 2, &filters);
        assert_eq!(w, [1.0, 2.0, 0.0, 0.0, 10.0, 0.0, 0.0, 0.0]);
        let bias = [0.5, -1.0, 0.0, 0.0];
        let x: Vec<f32> = (0..10).map(|v| v as f32).collect();
        let (mut c0, mut c1) = (vec![0.0; 8], vec![0.0; 8]);
        let mut out: [&mut [f32]; DIRECT_OCB] = [&mut c0, &mut c1, &mut [], &mut []];
        assert!(direct_rows(isa, &g, 0..2, &x, &w, &bias, None, &mut out));
        let want0: Vec<f32> = [0, 1, 2, 3, 5, 6, 7, 8]
            .iter()
            .map(|&i| 0.5 + x[i] + 10.0 * x[i + 1])
            .collect();
        let want1: Vec<f32> = [0, 1, 2, 3, 5, 6, 7, 8]
            .iter()
            .map(|&i| -1.0 + 2.0 * x[i])
            .collect();
        assert_eq!((&c0[..], &c1[..]), (&want0[..], &want1[..]));
        // The second row alone, clamped to [0, 10].
        let (mut r0, mut r1) = (vec![0.0; 4], vec![0.0; 4]);
        let mut out: [&mut [f32]; DIRECT_OCB] = [&mut r0, &mut r1, &mut [], &mut []];
        assert!(direct_rows(
            isa,
            &g,
            1..2,
            &x,
            &w,
            &bias,
            Some((0.0, 10.0)),
            &mut out
        ));
        assert_eq!(r0, [10.0; 4]);
        assert_eq!(r1, [9.0, 10.0, 10.0, 10.0]);
        // Refused: rows past `oh`, an input one float short, an output of the wrong length,
        // too few weights or biases, another ISA.
        let mut c = vec![0.0; 8];
        let mut one: [&mut [f32]; DIRECT_OCB] = [&mut c, &mut [], &mut [], &mut []];
        assert!(!direct_rows(isa, &g, 1..3, &x, &w, &bias, None, &mut one));
        assert!(!direct_rows(
            isa,
            &g,
            0..2,
            &x[..9],
            &w,
            &bias,
            None,
            &mut one
        ));
        assert!(!direct_rows(isa, &g, 0..1, &x, &w, &bias, None, &mut one));
        assert!(!direct_rows(
            isa,
            &g,
            0..2,
            &x,
            &w[..7],
            &bias,
            None,
            &mut one
        ));
        assert!(!direct_rows(
            isa,
            &g,
            0..2,
            &x,
            &w,
            &bias[..3],
            None,
            &mut one
        ));
        assert!(!direct_rows(
            Isa::Avx2Fma,
            &g,
            0..2,
            &x,
            &w,
            &bias,
            None,
            &mut one
        ));
    }
}
