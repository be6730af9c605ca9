//! Transposed convolution (the gradient of a convolution with respect to its input) over up to
//! three spatial dimensions, NC…-ordered, as a GEMM and a scatter: for each image and group,
//! the transposed weights times the input give every output channel's contribution through
//! every kernel tap at every input position (the "columns"), which are then added into the
//! output where each tap reaches (col2im). The input positions are taken in chunks so that the
//! columns stay in the outer caches; the GEMM and the scatter (by output channel) are parallel.
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::cpu::{self, Isa};
use super::gemm::{self, Epilogue, MatRef, PackedA};
use super::{scratch, simd, KernelError};

/// Most floats of columns computed at once (1 MiB: the columns are written by the GEMM and
/// read back by the scatter while they are in L2).
const CHUNK_FLOATS: usize = 1 << 18;

/// Below this many column floats per chunk the scatter runs on the calling thread.
const PAR_MIN: usize = 1 << 14;

/// The geometry of a transposed convolution. Spatial arrays hold depth, height and width;
/// a 1-D or 2-D operator has leading sizes of 1 (kernel 1, stride 1, dilation 1, pad 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvTransposeParams {
    /// Images.
    pub batch: usize,
    /// Input channels (`C`, the weights' first dimension).
    pub in_channels: usize,
    /// Output channels (`M`: the weights' second dimension times the groups).
    pub out_channels: usize,
    /// Groups (dividing both channel counts).
    pub groups: usize,
    /// Input spatial sizes.
    pub in_sp: [usize; 3],
    /// Output spatial sizes (after pads and output padding).
    pub out_sp: [usize; 3],
    /// Kernel spatial sizes.
    pub kernel: [usize; 3],
    /// Strides.
    pub strides: [usize; 3],
    /// Dilations.
    pub dilations: [usize; 3],
    /// Pads at the beginning of each spatial dimension (what is cut off the full output).
    pub pads_begin: [usize; 3],
}

impl ConvTransposeParams {
    /// Input positions per channel.
    pub fn in_plane(&self) -> usize {
        self.in_sp.iter().product()
    }

    /// Output positions per channel.
    pub fn out_plane(&self) -> usize {
        self.out_sp.iter().product()
    }

    /// Taps per kernel.
    pub fn taps(&self) -> usize {
        self.kernel.iter().product()
    }

    /// Input channels per group.
    fn cg(&self) -> usize {
        self.in_channels / self.groups
    }

    /// Output channels per group.
    fn mg(&self) -> usize {
        self.out_channels / self.groups
    }

    /// Floats of the weights: `[C, M/groups, kernel…]`.
    pub fn weights_len(&self) -> usize {
        self.in_channels * self.mg() * self.taps()
    }

    /// Checks that the groups divide both channel counts and no stride or dilation is 0.
    pub fn validate(&self) -> Result<(), KernelError> {
        if self.groups == 0
            || !self.in_channels.is_multiple_of(self.groups)
            || !self.out_channels.is_multiple_of(self.groups)
        {
            return Err(KernelError::new(format!(
                "{} input and {} output channels in {} groups",
                self.in_channels, self.out_channels, self.groups
            )));
        }
        if self.strides.contains(&0) || self.dilations.contains(&0) {
            return Err(KernelError::new("a stride or dilation of 0"));
        }
        Ok(())
    }
}

/// The weights of a transposed convolution packed once as GEMM operands: per group, the
/// `(M/groups · taps) × (C/groups)` transpose of its weights.
#[derive(Debug)]
pub struct ConvTransposeFilters {
    groups: Vec<PackedA>,
}

impl ConvTransposeFilters {
    /// Packs `w` (`[C, M/groups, kernel…]`) for the micro-kernels of `isa`.
    pub fn prepare(isa: Isa, p: &ConvTransposeParams, w: &[f32]) -> Result<Self, KernelError> {
        p.validate()?;
        if w.len() != p.weights_len() {
            return Err(KernelError::new(format!(
                "{} weights, expected {}",
                w.len(),
                p.weights_len()
            )));
        }
        let rows = p.mg() * p.taps();
        let per_group = p.cg() * rows;
        let groups = (0..p.groups)
            .map(|g| {
                let wg = &w[g * per_group..(g + 1) * per_group];
                PackedA::with_isa(isa, MatRef::row_major(wg, p.cg(), rows).t())
            })
            .collect();
        Ok(ConvTransposeFilters { groups })
    }
}

/// The weights as [`conv_transpose`] takes them.
#[derive(Clone, Copy, Debug)]
pub enum Filters<'a> {
    /// Packed once ([`ConvTransposeFilters::prepare`] for the same geometry).
    Packed(&'a ConvTransposeFilters),
    /// As stored, `[C, M/groups, kernel…]` (weights known only at run time).
    Plain(&'a [f32]),
}

/// `out = bias + conv_transpose(x, w)` for the geometry `p`: `x` holds `batch · C` input
/// planes, `out` `batch · M` output planes, `bias` (when given) one value per output channel.
///
/// # Panics
/// When a length does not match `p`, or the filters were packed for another geometry.
pub fn conv_transpose(
    p: &ConvTransposeParams,
    x: &[f32],
    filters: Filters,
    bias: Option<&[f32]>,
    out: &mut [f32],
) {
    let (in_plane, out_plane) = (p.in_plane(), p.out_plane());
    let (cg, mg) = (p.cg(), p.mg());
    let rows = mg * p.taps();
    assert_eq!(x.len(), p.batch * p.in_channels * in_plane, "input length");
    assert_eq!(
        out.len(),
        p.batch * p.out_channels * out_plane,
        "output length"
    );
    assert!(
        bias.is_none_or(|b| b.len() == p.out_channels),
        "bias length"
    );
    match filters {
        Filters::Packed(f) => assert_eq!(f.groups.len(), p.groups, "packed groups"),
        Filters::Plain(w) => assert_eq!(w.len(), p.weights_len(), "weights length"),
    }
    if out_plane == 0 {
        return;
    }
    let isa = match filters {
        Filters::Packed(f) => f.groups.first().map_or_else(cpu::isa, PackedA::isa),
        Filters::Plain(_) => cpu::isa(),
    };
    let fill =
        |(m, plane): (usize, &mut [f32])| plane.fill(bias.map_or(0.0, |b| b[m % p.out_channels]));
    out.par_chunks_mut(out_plane).enumerate().for_each(fill);
    if cg == 0 || in_plane == 0 || rows == 0 {
        return;
    }
    // Whole multiples of 32 positions (the micro-kernels' width) where there are that many.
    let chunk = (CHUNK_FLOATS / rows).max(32).min(in_plane);
    let chunk = if chunk >= 64 { chunk / 32 * 32 } else { chunk };
    scratch::with_f32(rows * chunk, |cols| {
        for n in 0..p.batch {
            for g in 0..p.groups {
                let x_g = &x[(n * p.in_channels + g * cg) * in_plane..][..cg * in_plane];
                let out_g = &mut out[(n * p.out_channels + g * mg) * out_plane..][..mg * out_plane];
                for p0 in (0..in_plane).step_by(chunk) {
                    let len = chunk.min(in_plane - p0);
                    let b = MatRef {
                        data: &x_g[p0..],
                        rows: cg,
                        cols: len,
                        row_stride: in_plane,
                        col_stride: 1,
                    };
                    let c = &mut cols[..rows * len];
                    match filters {
                        Filters::Packed(f) => {
                            gemm::sgemm_packed_a(1.0, &f.groups[g], b, 0.0, c, len, &Epilogue::NONE)
                        }
                        Filters::Plain(w) => {
                            let wg = &w[g * cg * rows..(g + 1) * cg * rows];
                            let a = MatRef::row_major(wg, cg, rows).t();
                            gemm::sgemm(1.0, a, b, 0.0, c, len)
                        }
                    }
                    let per_plane = p.taps() * len;
                    let add = |(plane, cols): (&mut [f32], &[f32])| {
                        simd::vectorize(
                            isa,
                            #[inline(always)]
                            || add_columns(p, cols, (p0, len), plane),
                        )
                    };
                    let planes = out_g.par_chunks_mut(out_plane).zip(c.par_chunks(per_plane));
                    if rayon::current_num_threads() > 1 && rows * len >= PAR_MIN {
                        planes.for_each(add);
                    } else {
                        out_g
                            .chunks_mut(out_plane)
                            .zip(c.chunks(per_plane))
                            .for_each(add);
                    }
                }
            }
        }
    });
}

/// The input indices `i` of one spatial dimension whose output index `i·stride + offset`
/// lies in `0..out_len`, as a range of `0..in_len`.
fn tap_range(in_len: usize, out_len: usize, stride: usize, offset: i128) -> (usize, usize) {
    let s = stride as i128;
    let lo = if offset >= 0 {
        0
    } else {
        (-offset + s - 1) / s
    };
    let room = out_len as i128 - offset;
    let hi = if room <= 0 { 0 } else { (room + s - 1) / s };
    let lo = lo.min(in_len as i128) as usize;
    (lo, (hi.min(in_len as i128) as usize).max(lo))
}

/// Adds one output channel's columns (`taps` rows of `len` floats: input positions
/// `p0 .. p0 + len` through each kernel tap) into its output plane.
#[inline(always)]
fn add_columns(
    p: &ConvTransposeParams,
    cols: &[f32],
    (p0, len): (usize, usize),
    plane: &mut [f32],
) {
    let [kd, kh, kw] = p.kernel;
    let [_, ih, iw] = p.in_sp;
    let [_, oh, ow] = p.out_sp;
    let offset =
        |d: usize, k: usize| (k as i128) * (p.dilations[d] as i128) - p.pads_begin[d] as i128;
    for kz in 0..kd {
        let (z_lo, z_hi) = tap_range(p.in_sp[0], p.out_sp[0], p.strides[0], offset(0, kz));
        for ky in 0..kh {
            let (y_lo, y_hi) = tap_range(ih, oh, p.strides[1], offset(1, ky));
            for kx in 0..kw {
                let x_off = offset(2, kx);
                let (x_lo, x_hi) = tap_range(iw, ow, p.strides[2], x_off);
                if x_lo >= x_hi {
                    continue;
                }
                let col = &cols[((kz * kh + ky) * kw + kx) * len..][..len];
                // Walk the chunk's positions a row (of the input's last dimension) at a time.
                let mut pos = p0;
                while pos < p0 + len {
                    let (row, ix0) = (pos / iw, pos % iw);
                    let ix1 = iw.min(ix0 + (p0 + len - pos));
                    let (iz, iy) = (row / ih, row % ih);
                    let (a, b) = (ix0.max(x_lo), ix1.min(x_hi));
                    if (z_lo..z_hi).contains(&iz) && (y_lo..y_hi).contains(&iy) && a < b {
                        let at = |i: usize, d: usize, off: i128| {
                            (i as i128 * p.strides[d] as i128 + off) as usize
                        };
                        let (oz, oy) = (at(iz, 0, offset(0, kz)), at(iy, 1, offset(1, ky)));
                        let o0 = at(a, 2, x_off);
                        let orow = &mut plane[(oz * oh + oy) * ow..][..ow];
                        let src = &col[pos - p0 + (a - ix0)..][..b - a];
                        add_row(orow, o0, p.strides[2], src);
                    }
                    pos += ix1 - ix0;
                }
            }
        }
    }
}

/// `row[o0 + i·stride] += src[i]` for every `i`.
#[inline(always)]
fn add_row(row: &mut [f32], o0: usize, stride: usize, src: &[f32]) {
    if stride == 1 {
        for (o, &v) in row[o0..o0 + src.len()].iter_mut().zip(src) {
            *o += v;
        }
    } else {
        for (o, &v) in row[o0..].iter_mut().step_by(stride).zip(src) {
            *o += v;
        }
    }
}

#[cfg(test)]
mod tests;
