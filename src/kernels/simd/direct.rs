//! The safe entry of the direct convolution kernel for few input channels
//! ([`direct_planes`]): its geometry, its weights' layout, and the checks made before the
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

/// Whether [`direct_planes`] has a kernel for `isa` on this CPU.
pub(crate) fn has_direct(isa: Isa) -> bool {
    cfg!(target_arch = "x86_64") && isa == Isa::Avx512 && cpu::supported(isa)
}

/// Lays out filters `[planes][taps]` for [`direct_planes`]: per block of [`DIRECT_OCB`]
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

/// Computes `planes = out.len() / (oh·ow)` output planes of a convolution by the direct
/// kernel: `out[o][oy][ox] = clamp(bias[o] + Σ_t filter[o][t] · x[taps[t] + oy·row_step + ox])`
/// with the filters laid out by [`direct_weights`] in `w` and `bias` padded to whole blocks
/// of [`DIRECT_OCB`]. With `clamp = Some((lo, hi))` every output is clamped to
/// `min(max(v, lo), hi)` (NaN kept) before it is stored.
///
/// Returns `false`, computing nothing, when `isa` has no such kernel ([`has_direct`]) or a
/// buffer is too short for the geometry.
pub(crate) fn direct_planes(
    isa: Isa,
    g: &DirectGeometry,
    x: &[f32],
    w: &[f32],
    bias: &[f32],
    clamp: Option<(f32, f32)>,
    out: &mut [f32],
) -> bool {
    let Some(plane) = g.oh.checked_mul(g.ow).filter(|&p| p > 0) else {
        return false;
    };
    let planes = out.len() / plane;
    let blocks = planes.div_ceil(DIRECT_OCB);
    let reach = g.taps.iter().max().and_then(|&t| {
        (g.oh - 1)
            .checked_mul(g.row_step)
            .and_then(|r| r.checked_add(t))
            .and_then(|r| r.checked_add(g.ow))
    });
    let fits = out.len() == planes * plane
        && reach.is_some_and(|r| r <= x.len())
        && blocks
            .checked_mul(g.taps.len() * DIRECT_OCB)
            .is_some_and(|n| n <= w.len())
        && blocks * DIRECT_OCB <= bias.len();
    if !has_direct(isa) || !fits {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: the CPU supports AVX-512F (`has_direct`); every tap's reads of the `oh` rows
        // end below `max(taps) + (oh − 1)·row_step + ow ≤ x.len()`, and `w`, `bias` and `out`
        // hold the weights, biases and planes counted (checked above, without overflow);
        // `out` is a `&mut` slice, so it overlaps none of the others.
        unsafe {
            super::avx512_direct::direct_planes(
                g,
                planes,
                x.as_ptr(),
                w.as_ptr(),
                bias.as_ptr(),
                clamp,
                out.as_mut_ptr(),
            );
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = clamp;
        false
    }
}
