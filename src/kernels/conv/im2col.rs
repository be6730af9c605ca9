//! Where the GEMM path of a convolution gets its B matrix (`k × pixels` per image and group):
//! the input planes as they are (pointwise), a copy sampled at the stride (1×1 with a stride),
//! or the implicit im2col ([`Im2col`], a GEMM panel source) read straight from the input or
//! from a staged copy: zero-padded, each row split into the horizontal stride's phases, so that
//! every row segment of a panel is one contiguous copy.
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::{valid_range, Conv2dParams};
use crate::kernels::cpu::Isa;
use crate::kernels::gemm::PanelSource;
use crate::kernels::simd;

/// Widest GEMM register tile (`nr`) of any ISA: the most pixels one packed panel holds.
const MAX_NR: usize = 32;

/// Where the GEMM path's B matrix (`k × pixels` per image and group) comes from.
#[derive(Clone, Debug)]
pub(super) enum GemmInput {
    /// 1×1, stride 1, no pads: the input planes are B as they are.
    Pointwise,
    /// 1×1 with a stride and no pads: B is a copy of the input sampled at the stride.
    Subsampled,
    /// Implicit im2col straight from the input, through these rows.
    Im2col(Vec<KRow>),
    /// Implicit im2col from a staged copy of the input (see [`Staged`]).
    Staged(Box<Staged>),
}

/// A staged input copy for the implicit im2col: each plane zero-padded, and each padded row
/// split into the horizontal stride's phases (`s` runs: the padded columns `≡ q (mod s)` in
/// order, for `q = 0..s`), so that consecutive output columns read consecutive elements.
#[derive(Clone, Debug)]
pub(super) struct Staged {
    /// The convolution with its pads folded into the plane size (rows `in_w` long).
    geometry: Conv2dParams,
    /// Its im2col rows, addressing the phase-split rows.
    rows: Vec<KRow>,
    /// Per phase holding input columns: the first input column it holds, and where that
    /// lands in a staged row.
    phases: Vec<(usize, usize)>,
    /// Per im2col row, where output pixel (0, 0) reads in the staged planes: pixel
    /// `(oy, ox)` reads `flat + oy·stride_h·in_w + ox` (the staged copy has no pads left, and
    /// its phase-split rows hold every output column's input consecutively).
    flat: Vec<usize>,
}

/// Precomputed addressing of one im2col row `r = (c, ky, kx)`.
#[derive(Clone, Copy, Debug)]
pub(super) struct KRow {
    /// Offset of input plane `c` in the image/group.
    plane: usize,
    /// `ky * dilation_h`.
    ky_off: usize,
    /// `kx * dilation_w`.
    kd: usize,
    /// Where output column 0 reads in its input row when consecutive output columns read
    /// consecutive elements (stride 1, or a phase-split staged row); valid for `lo..hi`.
    src0: isize,
    /// Output columns whose input column is inside the image: `lo..hi`.
    lo: usize,
    hi: usize,
}

/// Addressing of every im2col row `(c, ky, kx)` of one image/group.
fn im2col_rows(p: &Conv2dParams) -> Vec<KRow> {
    let k = (p.in_channels / p.groups) * p.kernel_h * p.kernel_w;
    let ow = p.out_w();
    (0..k)
        .map(|r| {
            let (c, ky, kx) = (
                r / (p.kernel_h * p.kernel_w),
                (r / p.kernel_w) % p.kernel_h,
                r % p.kernel_w,
            );
            let kd = kx * p.dilation_w;
            let (lo, hi) = valid_range(ow, p.in_w, p.stride_w, kd, p.pad_left);
            KRow {
                plane: c * p.in_h * p.in_w,
                ky_off: ky * p.dilation_h,
                kd,
                src0: kd as isize - p.pad_left as isize,
                lo,
                hi,
            }
        })
        .collect()
}

/// How the GEMM path reads the input of `p` (not depthwise, not Winograd).
pub(super) fn gemm_input(p: &Conv2dParams) -> GemmInput {
    let one_by_one = p.kernel_h == 1 && p.kernel_w == 1;
    let pads = p.pad_top + p.pad_left + p.pad_bottom + p.pad_right;
    if one_by_one && pads == 0 {
        return if p.stride_h == 1 && p.stride_w == 1 {
            GemmInput::Pointwise
        } else {
            GemmInput::Subsampled
        };
    }
    // A staged copy turns every im2col row segment into one contiguous copy (no border split
    // per segment, no strided gather). ResNet-50's 7×7 stride-2 stem went from 3.8 to 2.7 ms
    // at 1 thread. Its stride-2 3×3 layers, on the Intel machine of the seventh session, did
    // not change; on Zen 4 (`kernel_bench`, 1 thread, `KB_COLD=4`, GFLOP/s) 128 channels at
    // 56² went from 73–79 to 87, 256 at 28² from 80–81 to 90–91, 512 at 14² unchanged
    // (80–81), where the strided gather had taken 28% of the first one's time. Only when the
    // copy stays near the input's size: pads far wider than the kernel (with a large vertical
    // stride the output stays small) would make it arbitrarily large.
    let staged_plane = (p
        .in_h
        .saturating_add(p.pad_top)
        .saturating_add(p.pad_bottom))
    .saturating_mul(
        p.in_w
            .saturating_add(p.pad_left)
            .saturating_add(p.pad_right),
    );
    if p.in_h > 0
        && p.in_w > 0
        && (pads > 0 || p.stride_w > 1)
        && staged_plane <= 4 * (p.in_h * p.in_w).max(1024)
    {
        let geometry = Conv2dParams {
            in_h: p.in_h + p.pad_top + p.pad_bottom,
            in_w: p.in_w + p.pad_left + p.pad_right,
            pad_top: 0,
            pad_left: 0,
            pad_bottom: 0,
            pad_right: 0,
            ..*p
        };
        let (w, s) = (geometry.in_w, geometry.stride_w);
        let mut rows = im2col_rows(&geometry);
        for r in &mut rows {
            r.src0 = (phase_start(w, s, r.kd % s) + r.kd / s) as isize;
        }
        // (Phases from `w` on hold no column.)
        let phases = (0..s.min(w))
            .filter_map(|q| {
                // The first padded column `c ≥ pad_left` with `c ≡ q (mod s)`.
                let c = p.pad_left + (q + s - p.pad_left % s) % s;
                (c < p.pad_left + p.in_w).then(|| (c - p.pad_left, phase_start(w, s, q) + c / s))
            })
            .collect();
        let flat = rows
            .iter()
            .map(|r| r.plane + r.ky_off * w + r.src0 as usize)
            .collect();
        return GemmInput::Staged(Box::new(Staged {
            geometry,
            rows,
            phases,
            flat,
        }));
    }
    GemmInput::Im2col(im2col_rows(p))
}

/// Where phase `q` starts in a row of `w` elements split into the phases of stride `s`: the
/// sizes of phases `0..q`, phase `r` holding columns `r, r + s, …` below `w`.
fn phase_start(w: usize, s: usize, q: usize) -> usize {
    (0..q.min(w)).map(|r| (w - r).div_ceil(s)).sum()
}

impl Staged {
    /// Floats of the staged copy of the input planes `x` (geometry `p`).
    pub(super) fn len(&self, p: &Conv2dParams, x: &[f32]) -> usize {
        x.len() / (p.in_h * p.in_w) * self.geometry.in_h * self.geometry.in_w
    }

    /// Copies the `icg` input planes of `x` (geometry `p`, the convolution this staging was
    /// made for) into `buf` ([`Staged::len`] floats, stale) in the staged layout: zero-padded,
    /// each row split into the phases of the horizontal stride. In parallel over planes when
    /// `par`; the loops compiled for `isa`.
    pub(super) fn stage(&self, isa: Isa, p: &Conv2dParams, x: &[f32], par: bool, buf: &mut [f32]) {
        stage_planes(isa, p, &self.geometry, &self.phases, x, par, buf);
    }

    /// Per im2col row (input channel, kernel row, kernel column), where output pixel (0, 0)
    /// reads in the staged planes; pixel `(oy, ox)` reads [`Staged::row_step`]`·oy + ox` further.
    pub(super) fn taps(&self) -> &[usize] {
        &self.flat
    }

    /// Floats between where consecutive output rows read in the staged planes.
    pub(super) fn row_step(&self) -> usize {
        self.geometry.stride_h * self.geometry.in_w
    }

    /// The implicit im2col of `staged` (made by [`Staged::stage`]) over `pix` output pixels.
    pub(super) fn panels<'a>(&'a self, staged: &'a [f32], pix: usize) -> Im2col<'a> {
        Im2col {
            p: &self.geometry,
            x: staged,
            krows: &self.rows,
            flat: &self.flat,
            pix,
            unit: true,
        }
    }
}

/// [`Staged::stage`] for the staged geometry `g` and its `phases`.
fn stage_planes(
    isa: Isa,
    p: &Conv2dParams,
    g: &Conv2dParams,
    phases: &[(usize, usize)],
    x: &[f32],
    par: bool,
    buf: &mut [f32],
) {
    let (in_plane, plane) = (p.in_h * p.in_w, g.in_h * g.in_w);
    assert_eq!(buf.len(), x.len() / in_plane * plane, "staging buffer");
    let (w, s) = (g.in_w, g.stride_w);
    // Stride 2: where phase 1 starts in a row.
    let split = phase_start(w, s, 1);
    let one = |(dst, src): (&mut [f32], &[f32])| {
        simd::vectorize(
            isa,
            #[inline(always)]
            || {
                let (top, rest) = dst.split_at_mut(p.pad_top * w);
                let (rows, bottom) = rest.split_at_mut(p.in_h * w);
                top.fill(0.0);
                bottom.fill(0.0);
                for (drow, srow) in rows.chunks_exact_mut(w).zip(src.chunks_exact(p.in_w)) {
                    // The pads are zeroed row by row, not the whole plane first (at 2 threads
                    // that fill took 14% of MobileNetV2's stem): per phase `q` (staged
                    // columns `start..end`), those before and after the input columns it
                    // holds (`a..b`, none for a phase of pads only). Phases from `w` on are
                    // empty.
                    let mut held = phases.iter().peekable();
                    let mut start = 0;
                    for q in 0..s.min(w) {
                        let end = start + (w - q).div_ceil(s);
                        let (a, b) = match held.peek() {
                            Some(&&(first, at)) if (p.pad_left + first) % s == q => {
                                held.next();
                                (at, at + (p.in_w - first).div_ceil(s))
                            }
                            _ => (start, start),
                        };
                        drow[start..a].fill(0.0);
                        drow[b..end].fill(0.0);
                        start = end;
                    }
                    match (s, phases) {
                        (1, _) => drow[p.pad_left..p.pad_left + p.in_w].copy_from_slice(srow),
                        (2, &[(f0, at0), (f1, at1)]) => {
                            // Input columns alternate between the two phases: pairs, the
                            // first of each to the phase holding the row's first column.
                            let (p0, p1) = drow.split_at_mut(split);
                            let (d0, d1) = (&mut p0[at0..], &mut p1[at1 - split..]);
                            let (lead, lag, first) =
                                if f0 < f1 { (d0, d1, f0) } else { (d1, d0, f1) };
                            let pairs = srow[first..].chunks_exact(2);
                            let (n, rest) = (pairs.len(), pairs.remainder());
                            for ((pair, a), b) in pairs.zip(lead.iter_mut()).zip(lag.iter_mut()) {
                                *a = pair[0];
                                *b = pair[1];
                            }
                            if let &[v] = rest {
                                lead[n] = v;
                            }
                        }
                        _ => {
                            for &(first, at) in phases {
                                let from = srow[first..].iter().step_by(s);
                                for (d, &v) in drow[at..].iter_mut().zip(from) {
                                    *d = v;
                                }
                            }
                        }
                    }
                }
            },
        )
    };
    if par && buf.len() >= 1 << 15 {
        buf.par_chunks_exact_mut(plane)
            .zip(x.par_chunks_exact(in_plane))
            .for_each(one);
    } else {
        buf.chunks_exact_mut(plane)
            .zip(x.chunks_exact(in_plane))
            .for_each(one);
    }
}

/// Floats of the subsampled copy of the input planes `x` (geometry `p`).
pub(super) fn subsampled_len(p: &Conv2dParams, x: &[f32]) -> usize {
    x.len() / (p.in_h * p.in_w) * p.out_h() * p.out_w()
}

/// The input planes of `x` (geometry `p`, a 1×1 kernel without pads) sampled at the strides
/// into `buf` ([`subsampled_len`] floats, stale): `icg` planes of `out_h × out_w`. In parallel
/// over planes when `par`.
pub(super) fn subsample_planes(p: &Conv2dParams, x: &[f32], par: bool, buf: &mut [f32]) {
    let (in_plane, oh, ow) = (p.in_h * p.in_w, p.out_h(), p.out_w());
    assert_eq!(buf.len(), subsampled_len(p, x), "subsampling buffer");
    let one = |(dst, src): (&mut [f32], &[f32])| {
        for (oy, drow) in dst.chunks_exact_mut(ow).enumerate() {
            let srow = &src[oy * p.stride_h * p.in_w..][..p.in_w];
            for (d, &v) in drow.iter_mut().zip(srow.iter().step_by(p.stride_w)) {
                *d = v;
            }
        }
    };
    if par && buf.len() >= 1 << 15 {
        buf.par_chunks_exact_mut(oh * ow)
            .zip(x.par_chunks_exact(in_plane))
            .for_each(one);
    } else {
        buf.chunks_exact_mut(oh * ow)
            .zip(x.chunks_exact(in_plane))
            .for_each(one);
    }
}

/// The implicit im2col matrix of one image/group (`k = icg·kh·kw` rows × `pix` columns),
/// packed straight into GEMM B panels without materialising the column matrix.
pub(super) struct Im2col<'a> {
    p: &'a Conv2dParams,
    /// The `icg` input planes of the image/group.
    x: &'a [f32],
    /// Addressing of every row.
    krows: &'a [KRow],
    /// For a staged input, [`Staged::flat`] (then every row segment is one copy from there);
    /// empty otherwise.
    flat: &'a [usize],
    pix: usize,
    /// Whether consecutive output columns read consecutive elements of an input row (stride
    /// 1, or phase-split staged rows): row segments are then copies from `KRow::src0` on.
    unit: bool,
}

impl<'a> Im2col<'a> {
    /// The implicit im2col of the input planes `x` of one image/group (geometry `p`, rows
    /// `krows` from [`GemmInput::Im2col`]) over `pix` output pixels.
    pub(super) fn direct(p: &'a Conv2dParams, x: &'a [f32], krows: &'a [KRow], pix: usize) -> Self {
        Im2col {
            p,
            x,
            krows,
            flat: &[],
            pix,
            unit: p.stride_w == 1,
        }
    }
}

impl PanelSource for Im2col<'_> {
    fn rows(&self) -> usize {
        self.krows.len()
    }

    fn cols(&self) -> usize {
        self.pix
    }

    fn fill_panel(&self, k0: usize, kc: usize, j0: usize, cols: usize, nr: usize, dst: &mut [f32]) {
        let p = self.p;
        let ow = p.out_w();
        debug_assert!(cols <= nr && nr <= MAX_NR);
        // Split the pixels j0..j0+cols into runs within one output row:
        // (first input row without ky, ox0, len, offset in the panel row).
        let mut segs = [(0isize, 0usize, 0usize, 0usize); MAX_NR];
        let mut n_segs = 0;
        let mut d = 0;
        while d < cols && n_segs < MAX_NR {
            let pix = j0 + d;
            let (oy, ox0) = (pix / ow, pix % ow);
            let run = (ow - ox0).min(cols - d);
            segs[n_segs] = ((oy * p.stride_h) as isize - p.pad_top as isize, ox0, run, d);
            n_segs += 1;
            d += run;
        }
        let segs = &segs[..n_segs];
        if !self.flat.is_empty() {
            return self.fill_staged(k0, kc, segs, nr, dst);
        }
        for (kr, drow) in self.krows[k0..k0 + kc].iter().zip(dst.chunks_exact_mut(nr)) {
            let plane = &self.x[kr.plane..kr.plane + p.in_h * p.in_w];
            for &(iy0, ox0, run, off) in segs {
                let seg = &mut drow[off..off + run];
                let iy = iy0 + kr.ky_off as isize;
                if iy < 0 || iy >= p.in_h as isize {
                    zero_short(seg);
                    continue;
                }
                let irow = &plane[iy as usize * p.in_w..(iy as usize + 1) * p.in_w];
                if self.unit && kr.lo <= ox0 && ox0 + run <= kr.hi {
                    // Interior: one contiguous copy (the common case). `src0 + ox ≥ 0` for
                    // `ox` in `lo..hi`.
                    let start = (ox0 as isize + kr.src0) as usize;
                    let src = &irow[start..start + run];
                    match (
                        <&mut [f32; MAX_NR]>::try_from(&mut *seg),
                        <&[f32; MAX_NR]>::try_from(src),
                    ) {
                        // Fixed size: compiled to a few vector moves.
                        (Ok(d), Ok(s)) => *d = *s,
                        _ => copy_short(seg, src),
                    }
                    continue;
                }
                let (a, b) = (kr.lo.clamp(ox0, ox0 + run), kr.hi.clamp(ox0, ox0 + run));
                let (head, rest) = seg.split_at_mut(a - ox0);
                let (mid, tail) = rest.split_at_mut(b - a);
                zero_short(head);
                zero_short(tail);
                if a < b && self.unit {
                    let start = (a as isize + kr.src0) as usize;
                    copy_short(mid, &irow[start..start + (b - a)]);
                } else if a < b {
                    let start = a * p.stride_w + kr.kd - p.pad_left;
                    if p.stride_w == 2 {
                        // Exact-length source: no bounds checks in the loop.
                        let src = &irow[start..start + 2 * (b - a) - 1];
                        for (i, o) in mid.iter_mut().enumerate() {
                            *o = src[2 * i];
                        }
                    } else {
                        for (o, &v) in mid.iter_mut().zip(irow[start..].iter().step_by(p.stride_w))
                        {
                            *o = v;
                        }
                    }
                }
            }
        }
    }
}

impl Im2col<'_> {
    /// [`PanelSource::fill_panel`] of a staged input, with its pixel runs `segs` (as there):
    /// every run is in the image, so each row of the panel is one copy per run. A panel
    /// within one output row, as wide as the tile, is one fixed-size copy per row. Against
    /// the general loop (per row and run: bounds, borders, the row's addressing), measured
    /// with `kernel_bench` (`KB_COLD=4`, 1 thread, medians of 5 interleaved rounds, GFLOP/s):
    /// ResNet-50's 7×7 stem 78 → 88, its stride-2 3×3 layers of 128 channels at 56² 87 → 92
    /// and of 512 at 14² 80 → 84, the 512-channel 3×3 at 7² 82 → 85.
    fn fill_staged(
        &self,
        k0: usize,
        kc: usize,
        segs: &[(isize, usize, usize, usize)],
        nr: usize,
        dst: &mut [f32],
    ) {
        let flat = &self.flat[k0..k0 + kc];
        // Staged planes have no pads: a run's first input row `oy · stride_h` is ≥ 0.
        let base =
            |(iy0, ox0, _, _): (isize, usize, usize, usize)| iy0 as usize * self.p.in_w + ox0;
        if let &[seg @ (_, _, MAX_NR, 0)] = segs {
            let b = base(seg);
            for (&f, d) in flat.iter().zip(dst.chunks_exact_mut(MAX_NR)) {
                // Fixed size: a few vector moves, no `memcpy` call.
                let d: &mut [f32; MAX_NR] = d.try_into().expect("chunks of MAX_NR");
                *d = self.x[f + b..f + b + MAX_NR]
                    .try_into()
                    .expect("MAX_NR floats");
            }
            return;
        }
        for (&f, drow) in flat.iter().zip(dst.chunks_exact_mut(nr)) {
            for &seg in segs {
                let (b, run, off) = (base(seg), seg.2, seg.3);
                copy_short(&mut drow[off..off + run], &self.x[f + b..f + b + run]);
            }
        }
    }
}

/// Copies a short slice (≤ a few dozen floats) without a `memcpy` call: 8-wide blocks, then
/// 4/2/1 steps (`dst.len() == src.len()`).
#[inline(always)]
fn copy_short(dst: &mut [f32], src: &[f32]) {
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (dc, sc) in (&mut d).zip(&mut s) {
        let block: [f32; 8] = [sc[0], sc[1], sc[2], sc[3], sc[4], sc[5], sc[6], sc[7]];
        dc.copy_from_slice(&block);
    }
    let (mut d, mut s) = (d.into_remainder(), s.remainder());
    if d.len() >= 4 {
        d[..4].copy_from_slice(&[s[0], s[1], s[2], s[3]]);
        (d, s) = (&mut d[4..], &s[4..]);
    }
    if d.len() >= 2 {
        d[..2].copy_from_slice(&[s[0], s[1]]);
        (d, s) = (&mut d[2..], &s[2..]);
    }
    if let (Some(x), Some(&y)) = (d.first_mut(), s.first()) {
        *x = y;
    }
}

/// Zeroes a short slice without a `memset` call.
#[inline(always)]
fn zero_short(dst: &mut [f32]) {
    let mut d = dst.chunks_exact_mut(8);
    for dc in &mut d {
        dc.copy_from_slice(&[0.0; 8]);
    }
    for x in d.into_remainder() {
        *x = 0.0;
    }
}
