//! Packing operands into the micro-kernels' k-major micro-panels (`mr`-row panels of A,
//! `nr`-column panels of B), and the strided matrix as a [`PanelSource`].
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::{tile_size, Isa, MatRef, PanelSource};
use crate::kernels::simd;

/// Packs A columns `k0..k0+kc` (all rows) into `mr`-row micro-panels in `dst` (`m_pad*kc`).
pub(super) fn pack_a(isa: Isa, a: &MatRef, k0: usize, kc: usize, dst: &mut [f32], par: bool) {
    let (mr, _) = tile_size(isa);
    let pack = |(p, panel): (usize, &mut [f32])| pack_a_panel(isa, a, k0, kc, p, panel);
    let np = a.rows.div_ceil(mr);
    if par && a.rows * kc >= 1 << 15 {
        dst.par_chunks_mut(kc * mr)
            .take(np)
            .enumerate()
            .for_each(pack);
    } else {
        dst.chunks_mut(kc * mr).take(np).enumerate().for_each(pack);
    }
}

/// Packs the A micro-panel `p` (rows `p·mr ..`, columns `k0..k0+kc`) into `panel` (`kc·mr`).
pub(super) fn pack_a_panel(
    isa: Isa,
    a: &MatRef,
    k0: usize,
    kc: usize,
    p: usize,
    panel: &mut [f32],
) {
    let (mr, _) = tile_size(isa);
    {
        let i0 = p * mr;
        let rows = mr.min(a.rows - i0);
        if a.col_stride == 1 && rows == 8 && mr == 8 {
            let rows8: [&[f32]; 8] = std::array::from_fn(|r| {
                let start = (i0 + r) * a.row_stride + k0;
                &a.data[start..start + kc]
            });
            simd::interleave_rows8(isa, &rows8, &mut panel[..8 * kc]);
        } else if a.col_stride == 1 && rows == mr {
            // Full panel: walk k, reading the `mr` rows side by side (sequential reads, one
            // contiguous write per k).
            let mut src: [&[f32]; simd::MAX_MR] = [&[]; simd::MAX_MR];
            for (r, s) in src.iter_mut().enumerate().take(mr) {
                let start = (i0 + r) * a.row_stride + k0;
                *s = &a.data[start..start + kc];
            }
            for (kk, d) in panel.chunks_exact_mut(mr).take(kc).enumerate() {
                for (dv, s) in d.iter_mut().zip(&src) {
                    *dv = s[kk];
                }
            }
        } else if a.col_stride == 1 {
            for r in 0..rows {
                let start = (i0 + r) * a.row_stride + k0;
                let src = &a.data[start..start + kc];
                for (d, &s) in panel.iter_mut().skip(r).step_by(mr).zip(src) {
                    *d = s;
                }
            }
        } else if a.row_stride == 1 {
            for (kk, d) in panel.chunks_exact_mut(mr).enumerate() {
                let start = (k0 + kk) * a.col_stride + i0;
                d[..rows].copy_from_slice(&a.data[start..start + rows]);
            }
        } else {
            for (kk, d) in panel.chunks_exact_mut(mr).enumerate() {
                for (r, v) in d.iter_mut().take(rows).enumerate() {
                    *v = a.at(i0 + r, k0 + kk);
                }
            }
        }
        if rows < mr {
            for d in panel.chunks_exact_mut(mr) {
                d[rows..].fill(0.0);
            }
        }
    }
}

/// A strided matrix as a [`PanelSource`].
pub(super) struct MatSource<'a>(pub(super) MatRef<'a>);

impl PanelSource for MatSource<'_> {
    fn rows(&self) -> usize {
        self.0.rows
    }

    fn cols(&self) -> usize {
        self.0.cols
    }

    fn fill_panel(&self, k0: usize, kc: usize, j0: usize, cols: usize, nr: usize, dst: &mut [f32]) {
        let b = &self.0;
        for (kk, d) in dst.chunks_exact_mut(nr).take(kc).enumerate() {
            if b.col_stride == 1 {
                let start = (k0 + kk) * b.row_stride + j0;
                copy_panel_row(&mut d[..cols], &b.data[start..start + cols]);
            } else {
                for (j, v) in d[..cols].iter_mut().enumerate() {
                    *v = b.at(k0 + kk, j0 + j);
                }
            }
        }
    }
}

/// Copies one row of a B micro-panel: full rows of the SIMD widths as fixed-size moves (a
/// `memcpy` call per 128 bytes costs more than the copy), others with `copy_from_slice`.
#[inline(always)]
fn copy_panel_row(dst: &mut [f32], src: &[f32]) {
    if let (Ok(d), Ok(s)) = (
        <&mut [f32; 32]>::try_from(&mut *dst),
        <&[f32; 32]>::try_from(src),
    ) {
        *d = *s;
    } else if let (Ok(d), Ok(s)) = (
        <&mut [f32; 16]>::try_from(&mut *dst),
        <&[f32; 16]>::try_from(src),
    ) {
        *d = *s;
    } else {
        dst.copy_from_slice(src);
    }
}

/// Packs B rows `k0..k0+kc`, columns `j0..j0+nc` into `nr`-column micro-panels in `dst`.
#[allow(clippy::too_many_arguments)]
pub(super) fn pack_b(
    isa: Isa,
    b: &dyn PanelSource,
    k0: usize,
    kc: usize,
    j0: usize,
    nc: usize,
    dst: &mut [f32],
    par: bool,
) {
    let (_, nr) = tile_size(isa);
    let pack = |(q, panel): (usize, &mut [f32])| pack_b_panel(isa, b, k0, kc, j0, nc, q, panel);
    let np = nc.div_ceil(nr);
    if par && nc * kc >= 1 << 15 {
        dst.par_chunks_mut(kc * nr)
            .take(np)
            .enumerate()
            .for_each(pack);
    } else {
        dst.chunks_mut(kc * nr).take(np).enumerate().for_each(pack);
    }
}

/// Packs the B micro-panel `q` of the block at columns `j0..j0+nc` (rows `k0..k0+kc`) into
/// `panel` (`kc·nr`), the columns past `nc` zeroed.
#[allow(clippy::too_many_arguments)]
pub(super) fn pack_b_panel(
    isa: Isa,
    b: &dyn PanelSource,
    k0: usize,
    kc: usize,
    j0: usize,
    nc: usize,
    q: usize,
    panel: &mut [f32],
) {
    let (_, nr) = tile_size(isa);
    let c0 = j0 + q * nr;
    let cols = nr.min(j0 + nc - c0);
    if cols < nr {
        panel.fill(0.0);
    }
    b.fill_panel(k0, kc, c0, cols, nr, panel);
}
