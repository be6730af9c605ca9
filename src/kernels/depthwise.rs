//! The per-plane loops of depthwise convolution (one filter per channel), used by
//! [`super::conv::Conv2d`]: the ISA's plane kernel where it has one (AVX-512: padding read as
//! zeros by masked loads), otherwise auto-vectorised loops over a zero-padded copy of the plane
//! (horizontal stride 1 or 2) or over shifted rows (any stride and dilation).
#![forbid(unsafe_code)]

use super::activation::Activation;
use super::conv::{valid_range, Conv2dParams};
use super::cpu::Isa;
use super::simd;

/// `count` consecutive output planes `out[c] = act(bias[c] + Σ_{ky,kx} w[c][ky,kx] · shifted(x[c]))`
/// of the channel inputs in `x` (`in_h·in_w` floats each), the filters in `w`
/// (`kernel_h·kernel_w` each) and the biases (0 without), by the fastest path `isa` has for the
/// geometry `p` (the ISA's plane kernel clamps Relu/Clip in registers).
#[allow(clippy::too_many_arguments)]
pub(super) fn planes(
    isa: Isa,
    p: &Conv2dParams,
    count: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    act: Activation,
    out: &mut [f32],
) {
    let (in_len, w_len) = (p.in_h * p.in_w, p.kernel_h * p.kernel_w);
    let out_len = p.out_h() * p.out_w();
    let out = &mut out[..count * out_len];
    let empty_input = in_len == 0;
    let clamp = act.clamp_bounds();
    if !empty_input && depthwise_planes_simd(isa, p, count, (x, w, bias), clamp, out) {
        if clamp.is_none() {
            act.apply_isa(isa, out);
        }
        return;
    }
    for (c, o) in out.chunks_exact_mut(out_len.max(1)).enumerate() {
        let xc = &x[c * in_len..(c + 1) * in_len];
        let wc = &w[c * w_len..(c + 1) * w_len];
        plane_portable(isa, p, xc, wc, bias.map_or(0.0, |b| b[c]), o);
    }
    act.apply_isa(isa, out);
}

/// [`plane`] without the ISA's plane kernel and without the activation.
fn plane_portable(isa: Isa, p: &Conv2dParams, x: &[f32], w: &[f32], b: f32, out: &mut [f32]) {
    let empty_input = p.in_h == 0 || p.in_w == 0;
    // The padded-copy paths need rows of about `out_w·S + (kernel_w-1)·dilation_w` floats; with
    // pads or dilations far wider than the input (the output can still be small) that copy
    // could be far larger than input and output, so the shifted-rows path takes them.
    let padded_row = p
        .out_w()
        .saturating_add(16)
        .saturating_mul(p.stride_w)
        .saturating_add((p.kernel_w - 1).saturating_mul(p.dilation_w))
        .max(p.pad_left.saturating_add(p.in_w));
    let stride = if empty_input || padded_row > 2 * p.in_w + 128 {
        0
    } else {
        p.stride_w
    };
    match (stride, p.out_w() > 8) {
        (1, true) => simd::vectorize(
            isa,
            #[inline(always)]
            || depthwise_plane_fast::<1, 16>(p, x, w, b, out),
        ),
        (1, false) => simd::vectorize(
            isa,
            #[inline(always)]
            || depthwise_plane_fast::<1, 8>(p, x, w, b, out),
        ),
        (2, true) => simd::vectorize(
            isa,
            #[inline(always)]
            || depthwise_plane_fast::<2, 16>(p, x, w, b, out),
        ),
        (2, false) => simd::vectorize(
            isa,
            #[inline(always)]
            || depthwise_plane_fast::<2, 8>(p, x, w, b, out),
        ),
        _ => simd::vectorize(
            isa,
            #[inline(always)]
            || depthwise_plane(p, x, w, b, out),
        ),
    }
}

/// One depthwise output plane for horizontal stride `S` (1 or 2): the input rows are copied into
/// a zero-padded plane wide enough that every block of `BLK` output columns reads its taps
/// without bounds special cases; each block accumulates all taps in registers and is stored once.
/// Rows of the window outside the input are skipped (vertical padding).
#[inline(always)]
fn depthwise_plane_fast<const S: usize, const BLK: usize>(
    p: &Conv2dParams,
    x: &[f32],
    w: &[f32],
    bias: f32,
    out: &mut [f32],
) {
    let (oh, ow) = (p.out_h(), p.out_w());
    let (kw, dw) = (p.kernel_w, p.dilation_w);
    let nblk = ow.div_ceil(BLK);
    let wp = (nblk * BLK * S + (kw - 1) * dw).max(p.pad_left + p.in_w);
    let mut padded = vec![0.0f32; p.in_h * wp];
    for (prow, xrow) in padded.chunks_exact_mut(wp).zip(x.chunks_exact(p.in_w)) {
        prow[p.pad_left..p.pad_left + p.in_w].copy_from_slice(xrow);
    }
    for (oy, orow) in out.chunks_exact_mut(ow).enumerate().take(oh) {
        for blk in 0..nblk {
            let ox0 = blk * BLK;
            let mut acc = [bias; BLK];
            for ky in 0..p.kernel_h {
                let iy = (oy * p.stride_h + ky * p.dilation_h) as isize - p.pad_top as isize;
                if iy < 0 || iy >= p.in_h as isize {
                    continue;
                }
                let prow = &padded[iy as usize * wp..(iy as usize + 1) * wp];
                for (kx, &wv) in w[ky * kw..(ky + 1) * kw].iter().enumerate() {
                    let st = ox0 * S + kx * dw;
                    let src = &prow[st..st + BLK * S];
                    for (a, c) in acc.iter_mut().zip(src.chunks_exact(S)) {
                        *a += wv * c[0];
                    }
                }
            }
            let n = BLK.min(ow - ox0);
            orow[ox0..ox0 + n].copy_from_slice(&acc[..n]);
        }
    }
}

/// `count` depthwise output planes by the ISA's plane kernel ([`simd::depthwise_planes`]),
/// padding read as zeros in the kernel; `false` (nothing written) when the ISA or geometry has
/// none.
fn depthwise_planes_simd(
    isa: Isa,
    p: &Conv2dParams,
    count: usize,
    (x, w, bias): (&[f32], &[f32], Option<&[f32]>),
    clamp: Option<(f32, f32)>,
    out: &mut [f32],
) -> bool {
    match plane_geometry(p) {
        Some(g) => simd::depthwise_planes(isa, &g, count, x, w, bias, clamp, out),
        None => false,
    }
}

/// The geometry of the depthwise convolution `p` as the ISA's plane kernels take it (planes
/// packed), or `None` when they cannot compute it (horizontal dilation).
pub(super) fn plane_geometry(p: &Conv2dParams) -> Option<simd::DepthwisePlane> {
    (p.dilation_w == 1).then(|| simd::DepthwisePlane {
        in_hw: (p.in_h, p.in_w),
        out_hw: (p.out_h(), p.out_w()),
        kernel: (p.kernel_h, p.kernel_w),
        stride: (p.stride_h, p.stride_w),
        dilation_h: p.dilation_h,
        pad: (p.pad_top, p.pad_left),
        plane_len: (p.in_h * p.in_w, p.out_h() * p.out_w()),
    })
}

/// One depthwise output plane: `out = bias + sum_{ky,kx} w[ky,kx] * shifted(x)`.
#[inline(always)]
fn depthwise_plane(p: &Conv2dParams, x: &[f32], w: &[f32], bias: f32, out: &mut [f32]) {
    let (oh, ow) = (p.out_h(), p.out_w());
    out.fill(bias);
    for (oy, orow) in out.chunks_exact_mut(ow).enumerate().take(oh) {
        for ky in 0..p.kernel_h {
            let iy = (oy * p.stride_h + ky * p.dilation_h) as isize - p.pad_top as isize;
            if iy < 0 || iy >= p.in_h as isize {
                continue;
            }
            let irow = &x[iy as usize * p.in_w..(iy as usize + 1) * p.in_w];
            for kx in 0..p.kernel_w {
                let wv = w[ky * p.kernel_w + kx];
                let kd = kx * p.dilation_w;
                let (lo, hi) = valid_range(ow, p.in_w, p.stride_w, kd, p.pad_left);
                if lo >= hi {
                    continue;
                }
                let start = lo * p.stride_w + kd - p.pad_left;
                if p.stride_w == 1 {
                    let src = &irow[start..start + (hi - lo)];
                    for (o, &v) in orow[lo..hi].iter_mut().zip(src) {
                        *o += wv * v;
                    }
                } else {
                    let src = irow[start..].iter().step_by(p.stride_w);
                    for (o, &v) in orow[lo..hi].iter_mut().zip(src) {
                        *o += wv * v;
                    }
                }
            }
        }
    }
}
