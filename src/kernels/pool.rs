//! 2-D max / average pooling (NCHW) and global pooling, parallel over N×C planes.
//!
//! The caller computes `out_h`/`out_w` (this lets it implement `ceil_mode`). Window positions
//! are `iy = oy*stride_h - pad_top + ky*dilation_h` (same for x); positions outside the input
//! are ignored by max pooling and counted by average pooling as described on [`avg_pool2d`].
#![forbid(unsafe_code)]

use super::cpu::{self, Isa};
use super::{scratch, simd};
use rayon::prelude::*;

/// Shape and hyper-parameters of a 2-D pooling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pool2dParams {
    /// N.
    pub batch: usize,
    /// C.
    pub channels: usize,
    /// Input height.
    pub in_h: usize,
    /// Input width.
    pub in_w: usize,
    /// Window height.
    pub kernel_h: usize,
    /// Window width.
    pub kernel_w: usize,
    /// Vertical stride.
    pub stride_h: usize,
    /// Horizontal stride.
    pub stride_w: usize,
    /// Padding above.
    pub pad_top: usize,
    /// Padding on the left.
    pub pad_left: usize,
    /// Padding below.
    pub pad_bottom: usize,
    /// Padding on the right.
    pub pad_right: usize,
    /// Vertical dilation (≥ 1).
    pub dilation_h: usize,
    /// Horizontal dilation (≥ 1).
    pub dilation_w: usize,
    /// Output height (computed by the caller).
    pub out_h: usize,
    /// Output width (computed by the caller).
    pub out_w: usize,
}

/// Below this many input+output elements pooling runs on the calling thread.
const PAR_MIN: usize = 1 << 15;

/// For each output coordinate, the range of window taps `lo..hi` landing in `[lo_bound, hi_bound)`.
fn tap_ranges(
    out: usize,
    k: usize,
    s: usize,
    d: usize,
    pad: usize,
    lo_bound: isize,
    hi_bound: isize,
) -> Vec<(usize, usize)> {
    (0..out)
        .map(|o| {
            let base = (o * s) as isize - pad as isize;
            let mut lo = k;
            let mut hi = 0;
            for t in 0..k {
                let i = base + (t * d) as isize;
                if i >= lo_bound && i < hi_bound {
                    lo = lo.min(t);
                    hi = t + 1;
                }
            }
            if lo >= hi {
                (0, 0)
            } else {
                (lo, hi)
            }
        })
        .collect()
}

/// Per-output-coordinate ranges of window taps `lo..hi`.
type Taps = Vec<(usize, usize)>;

/// A 2-D pooling's windows, worked out once per geometry: for every output row and column the
/// taps that land inside the input, and — for average pooling that counts the pads — inside the
/// input extended by the pads.
pub struct PoolWindows {
    rows: Taps,
    cols: Taps,
    /// The taps that count, rows then columns, when they are not `rows` and `cols` (average
    /// pooling that counts the pads).
    counted: Option<(Taps, Taps)>,
}

impl PoolWindows {
    /// The windows of `p`; `count_include_pad` as for [`avg_pool2d`] (false for max pooling).
    pub fn new(p: &Pool2dParams, count_include_pad: bool) -> PoolWindows {
        let axis = |(out, k, s, d, pad): (usize, usize, usize, usize, usize), lo, hi| {
            tap_ranges(out, k, s, d, pad, lo, hi)
        };
        let y = (p.out_h, p.kernel_h, p.stride_h, p.dilation_h, p.pad_top);
        let x = (p.out_w, p.kernel_w, p.stride_w, p.dilation_w, p.pad_left);
        PoolWindows {
            rows: axis(y, 0, p.in_h as isize),
            cols: axis(x, 0, p.in_w as isize),
            counted: count_include_pad.then(|| {
                (
                    axis(y, -(p.pad_top as isize), (p.in_h + p.pad_bottom) as isize),
                    axis(x, -(p.pad_left as isize), (p.in_w + p.pad_right) as isize),
                )
            }),
        }
    }
}

fn check(p: &Pool2dParams, input: &[f32], output: &[f32]) {
    let planes = p.batch * p.channels;
    assert_eq!(
        input.len(),
        planes * p.in_h * p.in_w,
        "pool2d: input length"
    );
    assert_eq!(
        output.len(),
        planes * p.out_h * p.out_w,
        "pool2d: output length"
    );
    assert!(
        p.stride_h > 0 && p.stride_w > 0 && p.dilation_h > 0 && p.dilation_w > 0,
        "pool2d: zero stride/dilation"
    );
}

/// Runs `f(input_plane, output_plane)` over all planes, in parallel when large.
fn for_planes(
    p: &Pool2dParams,
    input: &[f32],
    output: &mut [f32],
    f: impl Fn(&[f32], &mut [f32]) + Sync,
) {
    let (ip, op) = (p.in_h * p.in_w, p.out_h * p.out_w);
    if op == 0 {
        return;
    }
    if ip == 0 {
        output.fill(0.0);
        return;
    }
    if rayon::current_num_threads() > 1 && input.len() + output.len() >= PAR_MIN {
        input
            .par_chunks(ip)
            .zip(output.par_chunks_mut(op))
            .for_each(|(i, o)| f(i, o));
    } else {
        input
            .chunks(ip)
            .zip(output.chunks_mut(op))
            .for_each(|(i, o)| f(i, o));
    }
}

/// The NaN-propagating maximum used by max pooling (`v` wins when greater or NaN).
#[inline(always)]
fn max_op(m: f32, v: f32) -> f32 {
    if v > m || v.is_nan() {
        v
    } else {
        m
    }
}

/// The contiguous range `a..b` of output coordinates whose whole window is inside the input
/// (`taps[o] == (0, k)`), or an empty range.
fn full_range(taps: &[(usize, usize)], k: usize) -> (usize, usize) {
    let full = |t: &(usize, usize)| *t == (0, k);
    match taps.iter().position(full) {
        Some(a) => {
            let b = a + taps[a..].iter().take_while(|t| full(t)).count();
            (a, b)
        }
        None => (0, 0),
    }
}

/// One output row of a separable pooling: `tmp` holds the vertical reduction of the window rows
/// (`in_w + 1` values; the last one is scratch), and each output is the reduction with `op` of its
/// horizontal taps. `init` is the value of an empty window. Output columns `a..b` (windows fully
/// inside the row) take the vectorised path when the stride is 1 or 2.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn pool_row(
    p: &Pool2dParams,
    rx: &[(usize, usize)],
    (a, b): (usize, usize),
    tmp: &[f32],
    orow: &mut [f32],
    init: f32,
    op: impl Fn(f32, f32) -> f32 + Copy,
) {
    let base = |ox: usize| (ox * p.stride_w) as isize - p.pad_left as isize;
    let generic = |ox: usize, o: &mut f32| {
        let (k0, k1) = rx[ox];
        let bx = base(ox);
        let mut m = init;
        for kx in k0..k1 {
            m = op(m, tmp[(bx + (kx * p.dilation_w) as isize) as usize]);
        }
        *o = m;
    };
    let fast = a < b && (p.stride_w == 1 || p.stride_w == 2);
    let (a, b) = if fast { (a, b) } else { (0, 0) };
    for (ox, o) in orow.iter_mut().enumerate().take(a) {
        generic(ox, o);
    }
    for (ox, o) in orow.iter_mut().enumerate().skip(b) {
        generic(ox, o);
    }
    if !fast {
        return;
    }
    let n = b - a;
    let mid = &mut orow[a..b];
    // Windows of a..b are inside the row, so base(a) >= 0.
    let start = base(a) as usize;
    if p.stride_w == 1 {
        reduce_slices(mid, p.kernel_w, |kx| &tmp[start + kx * p.dilation_w..], op);
    } else if p.kernel_w == 3 && p.dilation_w == 1 {
        // The common 3-wide stride-2 window (ResNet's stem pooling): the pair at 2·o and the
        // first of the next pair, in one pass (tap by tap, as below, ResNet-50's stem pooling
        // took 0.84 ms instead of 0.47). The last window ends at `start + 2n ≤ in_w`, so the
        // next pairs stay inside `tmp` (its scratch value past the row included).
        let pairs = tmp[start..start + 2 * n].chunks_exact(2);
        let next = tmp[start + 2..start + 2 * n + 2].chunks_exact(2);
        for ((o, c), d) in mid.iter_mut().zip(pairs).zip(next) {
            *o = op(op(c[0], c[1]), d[0]);
        }
    } else if p.kernel_w == 2 && p.dilation_w == 1 {
        // The common 2-wide stride-2 window: both taps of each output in one pass.
        for (o, c) in mid
            .iter_mut()
            .zip(tmp[start..start + 2 * n].chunks_exact(2))
        {
            *o = op(c[0], c[1]);
        }
    } else {
        // Stride 2: `tmp` has one scratch value past the row, so `2n` values from the last
        // tap's start stay in bounds (only the even ones are used).
        for kx in 0..p.kernel_w {
            let s = start + kx * p.dilation_w;
            let src = tmp[s..s + 2 * n].chunks_exact(2);
            if kx == 0 {
                for (o, c) in mid.iter_mut().zip(src) {
                    *o = c[0];
                }
            } else {
                for (o, c) in mid.iter_mut().zip(src) {
                    *o = op(*o, c[0]);
                }
            }
        }
    }
}

/// `out[i] = op(…op(src(0)[i], src(1)[i])…, src(count - 1)[i])` for every `i` (`count ≥ 1`,
/// each `src(j)` at least `out.len()` long), 16 columns at a time in registers. Reducing in
/// place instead (`out[i] = op(out[i], v)` once per source) compiled to a masked store per
/// step, which the next step's load of `out` waits for (a masked store does not forward to
/// a load): ResNet-50's stem max pooling (64 planes of 112², 3×3 at stride 2, 1 thread) took
/// 0.47 ms that way and 0.23 ms this way.
#[inline(always)]
fn reduce_slices<'a>(
    out: &mut [f32],
    count: usize,
    src: impl Fn(usize) -> &'a [f32],
    op: impl Fn(f32, f32) -> f32 + Copy,
) {
    const B: usize = 16;
    let n = out.len();
    let full = n / B * B;
    for c0 in (0..full).step_by(B) {
        let mut acc: [f32; B] = src(0)[c0..c0 + B].try_into().expect("16 floats");
        for j in 1..count {
            for (a, &v) in acc.iter_mut().zip(&src(j)[c0..c0 + B]) {
                *a = op(*a, v);
            }
        }
        out[c0..c0 + B].copy_from_slice(&acc);
    }
    for (i, o) in out.iter_mut().enumerate().skip(full) {
        let mut a = src(0)[i];
        for j in 1..count {
            a = op(a, src(j)[i]);
        }
        *o = a;
    }
}

/// Separable pooling of one plane: per output row, the vertical reduction of its window rows
/// into a scratch row, then [`pool_row`]; `fin(value, oy, ox)` finishes each output.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn pool_plane(
    p: &Pool2dParams,
    ry: &[(usize, usize)],
    rx: &[(usize, usize)],
    x: &[f32],
    out: &mut [f32],
    tmp: &mut [f32],
    init: f32,
    op: impl Fn(f32, f32) -> f32 + Copy,
    fin: impl Fn(f32, usize, usize) -> f32,
) {
    let w = p.in_w;
    let cols = full_range(rx, p.kernel_w);
    for (oy, orow) in out.chunks_exact_mut(p.out_w).enumerate() {
        let (ky0, ky1) = ry[oy];
        let by = (oy * p.stride_h) as isize - p.pad_top as isize;
        let row = |ky: usize| {
            let iy = (by + (ky * p.dilation_h) as isize) as usize;
            &x[iy * w..(iy + 1) * w]
        };
        let t = &mut tmp[..w];
        if ky0 < ky1 {
            reduce_slices(t, ky1 - ky0, |i| row(ky0 + i), op);
        } else {
            t.fill(init);
        }
        pool_row(p, rx, cols, tmp, orow, init, op);
        if ky0 >= ky1 {
            // No window row inside the input: every output is the empty-window value.
            orow.fill(init);
        }
        for (ox, o) in orow.iter_mut().enumerate() {
            *o = fin(*o, oy, ox);
        }
    }
}

/// Runs `f` on a row buffer of `len` floats filled with `init`: on the stack when the row is
/// short, else from [`scratch`].
fn with_row<R>(len: usize, init: f32, f: impl FnOnce(&mut [f32]) -> R) -> R {
    const STACK: usize = 512;
    if len <= STACK {
        f(&mut [init; STACK][..len])
    } else {
        scratch::with_f32(len, |row| {
            row.fill(init);
            f(row)
        })
    }
}

/// Max pooling. Window positions in the padding are ignored; a window that covers no input
/// element yields `-inf`.
pub fn max_pool2d(p: &Pool2dParams, input: &[f32], output: &mut [f32]) {
    max_pool2d_with(p, &PoolWindows::new(p, false), input, output);
}

/// [`max_pool2d`] with the windows of `p` worked out beforehand.
pub fn max_pool2d_with(p: &Pool2dParams, w: &PoolWindows, input: &[f32], output: &mut [f32]) {
    max_pool2d_isa(cpu::isa(), p, w, input, output);
}

/// [`max_pool2d`] compiled for `isa` (tests compare every ISA).
pub(crate) fn max_pool2d_isa(
    isa: Isa,
    p: &Pool2dParams,
    w: &PoolWindows,
    input: &[f32],
    output: &mut [f32],
) {
    check(p, input, output);
    if p.stride_w == 2
        && p.dilation_w == 1
        && (p.kernel_w == 2 || p.kernel_w == 3)
        && p.kernel_h <= simd::MAX_POOL_ROWS
        && simd::has_max_pool_stride2(isa)
    {
        for_planes(p, input, output, |x, out| {
            max_plane_stride2(isa, p, w, x, out)
        });
        return;
    }
    if narrow_same(p) {
        for_planes(p, input, output, |x, out| max_plane_same(isa, p, x, out));
        return;
    }
    for_planes(p, input, output, |x, out| {
        max_plane_separable(isa, p, w, x, out)
    });
}

/// Planes at most this many values large take [`max_plane_same`] (when their rows are
/// narrower than [`SAME_MAX_W`]): its scratch holds a whole plane.
const SAME_MAX_PLANE: usize = 4096;
/// Rows narrower than this take [`max_plane_same`]; wider ones fill the 16-value steps of the
/// row-by-row passes already.
const SAME_MAX_W: usize = 32;

/// Whether `p` pools at stride 1 (dilation 1) into planes of the input's size, on planes small
/// and narrow enough for [`max_plane_same`].
fn narrow_same(p: &Pool2dParams) -> bool {
    p.stride_h == 1
        && p.stride_w == 1
        && p.dilation_h == 1
        && p.dilation_w == 1
        && (p.out_h, p.out_w) == (p.in_h, p.in_w)
        && p.in_w < SAME_MAX_W
        && p.in_h * p.in_w <= SAME_MAX_PLANE
}

/// Max pooling of one plane at stride 1 whose output has the input's size (YOLOv8's SPPF: 5×5
/// windows over planes of 10² and 20²), both separable passes as flat runs of values, 16 at a
/// time. The plane is first copied into one framed by the pads, filled with −∞ (which no
/// maximum takes, so every window is whole): the vertical pass then runs over the framed
/// rows of every output row at once, and the horizontal pass over all of them, after which
/// the output's rows are copied out of the frame. (Row by row, rows narrower than 16 went the
/// scalar way: 128 planes of 10², 5×5, 1 thread, 2.7 window taps a nanosecond; clipping the
/// border windows instead of framing them left 40% of a plane's taps scalar.) Each output
/// reduces its taps in the order the separable path does, so both give the same bits.
fn max_plane_same(isa: Isa, p: &Pool2dParams, x: &[f32], out: &mut [f32]) {
    let (h, wd) = (p.in_h, p.in_w);
    let (kh, kw) = (p.kernel_h, p.kernel_w);
    // With the output of the input's size, the pads on each axis add up to the kernel less 1.
    let fw = wd + kw - 1;
    let fh = h + kh - 1;
    scratch::with_f32(fh * fw + h * fw, |buf| {
        // The vertical pass writes all of `vert`, and the plane's rows the frame's inside:
        // only the frame's borders take −∞.
        let (framed, vert) = buf.split_at_mut(fh * fw);
        let (top, rest) = framed.split_at_mut(p.pad_top * fw);
        let (inside, bottom) = rest.split_at_mut(h * fw);
        top.fill(f32::NEG_INFINITY);
        bottom.fill(f32::NEG_INFINITY);
        for (frow, row) in inside.chunks_exact_mut(fw).zip(x.chunks_exact(wd)) {
            let (left, rest) = frow.split_at_mut(p.pad_left);
            let (mid, right) = rest.split_at_mut(wd);
            left.fill(f32::NEG_INFINITY);
            mid.copy_from_slice(row);
            right.fill(f32::NEG_INFINITY);
        }
        simd::vectorize(
            isa,
            #[inline(always)]
            || {
                // Vertical: vert row oy = the maximum over framed rows oy .. oy + kh.
                reduce_slices(&mut vert[..h * fw], kh, |ky| &framed[ky * fw..], max_op);
                // Horizontal: framed position j (reused) = the maximum of vert j .. j + kw.
                let run = (h - 1) * fw + wd;
                reduce_slices(&mut framed[..run], kw, |kx| &vert[kx..], max_op);
            },
        );
        for (orow, frow) in out.chunks_exact_mut(wd).zip(framed.chunks(fw)) {
            orow.copy_from_slice(&frow[..wd]);
        }
    });
}

/// Max pooling of one plane, separable: per output row the window rows' maximum into a
/// scratch row, then each output's maximum over its taps in it.
fn max_plane_separable(isa: Isa, p: &Pool2dParams, w: &PoolWindows, x: &[f32], out: &mut [f32]) {
    with_row(p.in_w + 1, f32::NEG_INFINITY, |tmp| {
        simd::vectorize(
            isa,
            #[inline(always)]
            || {
                pool_plane(
                    p,
                    &w.rows,
                    &w.cols,
                    x,
                    out,
                    tmp,
                    f32::NEG_INFINITY,
                    max_op,
                    |v, _, _| v,
                )
            },
        );
    });
}

/// Input rows past a window's last row whose lines [`max_plane_stride2`] prefetches: inside a
/// model the planes come from L3 (written by the layer before). `kernel_bench` (`KB_COLD=4`,
/// ResNet-50's stem pooling, 1 thread, interleaved) read 8.6 GFLOP/s without, 11.9 at 8 rows
/// ahead, 12.6 at 16 and 32.
const PF_ROWS: usize = 16;

/// Max pooling of one plane whose windows are 2 or 3 wide at horizontal stride 2 (dilation 1)
/// and at most [`simd::MAX_POOL_ROWS`] high, through [`simd::max_pool_plane_stride2`] (each
/// output row straight from its window's input rows, in registers), or the separable loop where
/// it has no kernel. ResNet-50's stem pooling (64 planes of 112², 3×3) inside the model at 1
/// thread (`ONNXIFI_RUST_PROFILE`): 0.18–0.20 ms separable, 0.12 this way.
fn max_plane_stride2(isa: Isa, p: &Pool2dParams, w: &PoolWindows, x: &[f32], out: &mut [f32]) {
    let g = simd::MaxPoolPlane {
        taps: &w.rows,
        in_hw: (p.in_h, p.in_w),
        stride_pad_dilation: (p.stride_h, p.pad_top, p.dilation_h),
        kw: p.kernel_w,
        out_w_pad_left: (p.out_w, p.pad_left),
        ahead_rows: PF_ROWS,
    };
    if !simd::max_pool_plane_stride2(isa, &g, x, out) {
        max_plane_separable(isa, p, w, x, out);
    }
}

/// Average pooling with ONNX semantics: the sum over window positions inside the input,
/// divided by the number of window positions inside the input, or — when
/// `count_include_pad` — inside the input extended by the pads (positions beyond the pads, which
/// `ceil_mode` windows can reach, never count). A window with nothing to count yields 0.
pub fn avg_pool2d(p: &Pool2dParams, count_include_pad: bool, input: &[f32], output: &mut [f32]) {
    let w = PoolWindows::new(p, count_include_pad);
    avg_pool2d_with(p, &w, input, output);
}

/// [`avg_pool2d`] with the windows of `p` worked out beforehand (they say whether the pads
/// count).
pub fn avg_pool2d_with(p: &Pool2dParams, w: &PoolWindows, input: &[f32], output: &mut [f32]) {
    avg_pool2d_isa(cpu::isa(), p, w, input, output);
}

/// [`avg_pool2d`] compiled for `isa` (tests compare every ISA).
pub(crate) fn avg_pool2d_isa(
    isa: Isa,
    p: &Pool2dParams,
    w: &PoolWindows,
    input: &[f32],
    output: &mut [f32],
) {
    check(p, input, output);
    let (cy, cx) = w
        .counted
        .as_ref()
        .map_or((&w.rows, &w.cols), |(y, x)| (y, x));
    for_planes(p, input, output, |x, out| {
        let fin = |s: f32, oy: usize, ox: usize| {
            let count = (cy[oy].1 - cy[oy].0) * (cx[ox].1 - cx[ox].0);
            if count == 0 {
                0.0
            } else {
                s / count as f32
            }
        };
        with_row(p.in_w + 1, 0.0, |tmp| {
            simd::vectorize(
                isa,
                #[inline(always)]
                || pool_plane(p, &w.rows, &w.cols, x, out, tmp, 0.0, |a, b| a + b, fin),
            );
        });
    });
}

/// Runs `f(plane) -> value` for each of `planes` planes of `plane_size` values.
fn global(
    planes: usize,
    plane_size: usize,
    input: &[f32],
    output: &mut [f32],
    f: impl Fn(&[f32]) -> f32 + Sync,
) {
    assert_eq!(
        input.len(),
        planes * plane_size,
        "global pool: input length"
    );
    assert_eq!(output.len(), planes, "global pool: output length");
    if plane_size == 0 {
        output.fill(f(&[]));
        return;
    }
    if rayon::current_num_threads() > 1 && input.len() >= PAR_MIN {
        output
            .par_iter_mut()
            .zip(input.par_chunks(plane_size))
            .for_each(|(o, x)| *o = f(x));
    } else {
        output
            .iter_mut()
            .zip(input.chunks(plane_size))
            .for_each(|(o, x)| *o = f(x));
    }
}

/// Sum of a slice with 8 independent accumulators (vectorisable, more accurate than a chain).
fn sum(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += v;
        }
    }
    acc.iter().sum::<f32>() + rest.iter().sum::<f32>()
}

/// Mean of each of `planes` contiguous planes of `plane_size` values (`GlobalAveragePool`).
pub fn global_avg_pool(planes: usize, plane_size: usize, input: &[f32], output: &mut [f32]) {
    global(planes, plane_size, input, output, |x| {
        if x.is_empty() {
            0.0
        } else {
            sum(x) / x.len() as f32
        }
    });
}

/// Maximum of each of `planes` contiguous planes of `plane_size` values (`GlobalMaxPool`).
pub fn global_max_pool(planes: usize, plane_size: usize, input: &[f32], output: &mut [f32]) {
    global(planes, plane_size, input, output, |x| {
        x.iter().fold(
            f32::NEG_INFINITY,
            |m, &v| if v > m || v.is_nan() { v } else { m },
        )
    });
}

#[cfg(test)]
mod tests;
