//! Resizing of planes (the last two axes of a tensor) by separable interpolation: every output
//! element is a weighted sum over a few input rows (the taps of its output row) of a weighted
//! sum over a few input columns (the taps of its output column). Nearest-neighbour axes, whose
//! every output takes one input with weight 1, are gathers. Rows are computed in parallel.
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::cpu::Isa;
use super::simd;

/// Output rows (of all planes) per parallel task, at least.
const ROWS_PER_TASK: usize = 8;

/// Below this many output elements the planes are resized on the calling thread.
const PAR_MIN: usize = 1 << 15;

/// One resized axis: for every output index, `taps` (input index, weight) pairs.
#[derive(Clone, Debug)]
pub struct AxisTaps {
    out_len: usize,
    taps: usize,
    index: Vec<usize>,
    weight: Vec<f32>,
    /// The one input index of every output index, when each output takes a single input
    /// with weight 1 (the other taps weigh 0).
    nearest: Option<Vec<usize>>,
    /// `f` when the axis repeats every input `f` times in order (output `o` takes input
    /// `o / f`: nearest upsampling by an integer factor, YOLO's 2×).
    repeat: Option<usize>,
}

/// `f` when `nearest` (of `out_len` outputs) takes input `o / f` at every output `o`.
fn repeat_factor(nearest: Option<&[usize]>, out_len: usize) -> Option<usize> {
    let cx = nearest?;
    let f = cx.iter().take_while(|&&i| i == 0).count();
    (f > 0 && out_len.is_multiple_of(f) && cx.iter().enumerate().all(|(o, &i)| i == o / f))
        .then_some(f)
}

impl AxisTaps {
    /// The axis whose output index `o` sums `weight[o·taps + t] · input[index[o·taps + t]]`
    /// over `t < taps`; every index must lie inside the input axis.
    ///
    /// # Panics
    /// When `index` or `weight` is not `out_len · taps` long.
    pub fn new(out_len: usize, taps: usize, index: Vec<usize>, weight: &[f64]) -> Self {
        assert!(index.len() == out_len * taps && weight.len() == index.len());
        let nearest = (taps > 0)
            .then(|| {
                (0..out_len)
                    .map(|o| {
                        let w = &weight[o * taps..(o + 1) * taps];
                        let one = w.iter().position(|&v| v == 1.0)?;
                        let rest_zero = w.iter().enumerate().all(|(t, &v)| t == one || v == 0.0);
                        rest_zero.then_some(index[o * taps + one])
                    })
                    .collect::<Option<Vec<usize>>>()
            })
            .flatten();
        AxisTaps {
            out_len,
            taps,
            index,
            weight: weight.iter().map(|&w| w as f32).collect(),
            repeat: repeat_factor(nearest.as_deref(), out_len),
            nearest,
        }
    }

    /// An axis of `len` copied as it is.
    pub fn identity(len: usize) -> Self {
        AxisTaps {
            out_len: len,
            taps: 1,
            index: (0..len).collect(),
            weight: vec![1.0; len],
            nearest: Some((0..len).collect()),
            repeat: Some(1),
        }
    }

    /// Output length.
    pub fn out_len(&self) -> usize {
        self.out_len
    }

    /// The largest input index read, plus one (0 when nothing is read).
    pub fn reads(&self) -> usize {
        self.index.iter().max().map_or(0, |&i| i + 1)
    }

    /// Taps of output index `o`.
    fn taps_of(&self, o: usize) -> impl Iterator<Item = (usize, f32)> + '_ {
        let at = o * self.taps..(o + 1) * self.taps;
        self.index[at.clone()]
            .iter()
            .copied()
            .zip(self.weight[at].iter().copied())
            .filter(|&(_, w)| w != 0.0)
    }
}

/// Resizes `planes` planes of `in_h × in_w` (`x`) into planes of `rows.out_len() ×
/// cols.out_len()` (`out`), `rows` interpolating between input rows and `cols` between input
/// columns.
///
/// # Panics
/// When a length does not match, or a tap reads outside the input plane.
pub fn resize_planes(
    isa: Isa,
    planes: usize,
    (in_h, in_w): (usize, usize),
    (rows, cols): (&AxisTaps, &AxisTaps),
    x: &[f32],
    out: &mut [f32],
) {
    let (oh, ow) = (rows.out_len, cols.out_len);
    assert_eq!(x.len(), planes * in_h * in_w, "input length");
    assert_eq!(out.len(), planes * oh * ow, "output length");
    assert!(
        rows.reads() <= in_h && cols.reads() <= in_w,
        "taps outside the input"
    );
    if out.is_empty() {
        return;
    }
    // Runs of `ROWS_PER_TASK` output rows: a row whose nearest input row is the previous
    // row's (in the same plane) is a copy of it.
    let run = |(k, orows): (usize, &mut [f32])| {
        let mut prev: Option<(usize, usize)> = None;
        for (i, r) in (k * ROWS_PER_TASK..)
            .enumerate()
            .take(orows.len() / ow.max(1))
        {
            let (plane, oy) = (r / oh, r % oh);
            let source = rows.nearest.as_ref().map(|ry| (plane, ry[oy]));
            let (done, orow) = orows.split_at_mut(i * ow);
            let orow = &mut orow[..ow];
            if source.is_some() && source == prev {
                orow.copy_from_slice(&done[(i - 1) * ow..]);
                continue;
            }
            prev = source;
            let xp = &x[plane * in_h * in_w..(plane + 1) * in_h * in_w];
            simd::vectorize(
                isa,
                #[inline(always)]
                || output_row(xp, in_w, rows, cols, oy, orow),
            )
        }
    };
    let chunk = ow * ROWS_PER_TASK;
    if rayon::current_num_threads() > 1 && out.len() >= PAR_MIN {
        out.par_chunks_mut(chunk).enumerate().for_each(run);
    } else {
        out.chunks_mut(chunk).enumerate().for_each(run);
    }
}

/// Output row `oy` of one plane `xp` (rows of `in_w`).
#[inline(always)]
fn output_row(
    xp: &[f32],
    in_w: usize,
    rows: &AxisTaps,
    cols: &AxisTaps,
    oy: usize,
    orow: &mut [f32],
) {
    let src = |iy: usize| &xp[iy * in_w..(iy + 1) * in_w];
    match (&rows.nearest, &cols.nearest) {
        (Some(ry), Some(cx)) => {
            let s = src(ry[oy]);
            match cols.repeat {
                Some(1) => orow.copy_from_slice(&s[..orow.len()]),
                Some(2) => {
                    for (pair, &v) in orow.chunks_exact_mut(2).zip(s) {
                        pair[0] = v;
                        pair[1] = v;
                    }
                }
                Some(f) => {
                    for (run, &v) in orow.chunks_exact_mut(f).zip(s) {
                        run.fill(v);
                    }
                }
                None => {
                    for (o, &ix) in orow.iter_mut().zip(cx) {
                        *o = s[ix];
                    }
                }
            }
        }
        (Some(ry), None) => horizontal(src(ry[oy]), cols, 1.0, orow, false),
        (None, _) => {
            orow.fill(0.0);
            for (iy, wy) in rows.taps_of(oy) {
                horizontal(src(iy), cols, wy, orow, true);
            }
        }
    }
}

/// `orow[o] (+)= wy · Σ_t w_t · s[i_t]` over the column taps of each output column `o`
/// (added when `add`, else stored).
#[inline(always)]
fn horizontal(s: &[f32], cols: &AxisTaps, wy: f32, orow: &mut [f32], add: bool) {
    match &cols.nearest {
        Some(cx) => {
            for (o, &ix) in orow.iter_mut().zip(cx) {
                *o = if add { *o + wy * s[ix] } else { wy * s[ix] };
            }
        }
        None => {
            let taps = cols.taps;
            for (o, (idx, w)) in orow.iter_mut().zip(
                cols.index
                    .chunks_exact(taps)
                    .zip(cols.weight.chunks_exact(taps)),
            ) {
                // Taps of weight 0 are skipped, as the f64 path does: an infinite input there
                // would otherwise make the output NaN.
                let v: f32 = idx
                    .iter()
                    .zip(w)
                    .filter(|&(_, &w)| w != 0.0)
                    .map(|(&i, &w)| w * s[i])
                    .sum();
                *o = if add { *o + wy * v } else { wy * v };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu;
    use crate::kernels::reference::Rng;

    /// The oracle: the interpolation written out per output element, in f64.
    fn naive(
        x: &[f32],
        (in_h, in_w): (usize, usize),
        rows: &AxisTaps,
        cols: &AxisTaps,
    ) -> Vec<f32> {
        let planes = x.len() / (in_h * in_w);
        let mut out = Vec::new();
        for p in 0..planes {
            for oy in 0..rows.out_len {
                for ox in 0..cols.out_len {
                    let mut s = 0.0f64;
                    for ty in 0..rows.taps {
                        for tx in 0..cols.taps {
                            let (iy, wy) = (
                                rows.index[oy * rows.taps + ty],
                                rows.weight[oy * rows.taps + ty],
                            );
                            let (ix, wx) = (
                                cols.index[ox * cols.taps + tx],
                                cols.weight[ox * cols.taps + tx],
                            );
                            s += wy as f64 * wx as f64 * x[(p * in_h + iy) * in_w + ix] as f64;
                        }
                    }
                    out.push(s as f32);
                }
            }
        }
        out
    }

    /// Taps of an axis from `in_len` to `out_len`: nearest (floor of `o·in/out`, a second tap
    /// of weight 0) or linear between the two inputs around the asymmetric source coordinate.
    fn axis(in_len: usize, out_len: usize, linear: bool) -> AxisTaps {
        let mut index = Vec::new();
        let mut weight = Vec::new();
        for o in 0..out_len {
            let src = o as f64 * in_len as f64 / out_len as f64;
            let i0 = (src.floor() as usize).min(in_len - 1);
            let i1 = (i0 + 1).min(in_len - 1);
            let f = if linear { src - i0 as f64 } else { 0.0 };
            index.extend([i0, i1]);
            weight.extend([1.0 - f, f]);
        }
        AxisTaps::new(out_len, 2, index, &weight)
    }

    #[test]
    fn nearest_linear_and_mixed_axes_match_the_oracle() {
        let mut rng = Rng::new(3);
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .expect("pool");
        for (in_hw, out_hw) in [
            ((5, 7), (10, 14)),
            ((80, 80), (160, 160)),
            ((9, 4), (4, 11)),
            // a factor of 3, and of 1 (a copy), nearest rows repeated across planes
            ((4, 5), (12, 15)),
            ((6, 8), (6, 8)),
        ] {
            let x = rng.vec(3 * in_hw.0 * in_hw.1);
            for (ly, lx) in [(false, false), (true, true), (false, true), (true, false)] {
                let rows = axis(in_hw.0, out_hw.0, ly);
                let cols = axis(in_hw.1, out_hw.1, lx);
                // (Linear taps at the same size weigh 1 and 0: nearest as well.)
                assert_eq!(rows.nearest.is_some(), !ly || in_hw.0 == out_hw.0);
                let want = naive(&x, in_hw, &rows, &cols);
                let mut got = vec![f32::NAN; want.len()];
                pool.install(|| resize_planes(cpu::isa(), 3, in_hw, (&rows, &cols), &x, &mut got));
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert!(
                        (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
                        "{in_hw:?}→{out_hw:?} {ly}/{lx}: element {i} {g} vs {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn taps_of_weight_zero_do_not_read_infinities() {
        // Linear ×2 both ways: output (0, 0) sits on input (0, 0) exactly, its other taps weigh
        // 0, and one of them reads an infinity.
        let (rows, cols) = (axis(2, 4, true), axis(4, 8, true));
        let mut x: Vec<f32> = (0..8).map(|v| v as f32).collect();
        x[1] = f32::INFINITY;
        x[4] = f32::INFINITY;
        let mut got = vec![0.0; 32];
        resize_planes(cpu::isa(), 1, (2, 4), (&rows, &cols), &x, &mut got);
        assert_eq!(got[0], 0.0);
        assert!(got[1].is_infinite(), "a tap of weight 1/2 on the infinity");
    }

    #[test]
    fn identity_axes_copy() {
        let x: Vec<f32> = (0..24).map(|v| v as f32).collect();
        let mut got = vec![0.0; 24];
        let (r, c) = (AxisTaps::identity(4), AxisTaps::identity(3));
        resize_planes(cpu::isa(), 2, (4, 3), (&r, &c), &x, &mut got);
        assert_eq!(got, x);
    }
}
