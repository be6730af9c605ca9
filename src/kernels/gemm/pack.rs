//! Packing operands into the micro-kernels' k-major micro-panels (`mr`-row panels of A,
//! `nr`-column panels of B), in float32 or as bfloat16 pairs ([`Dot`]), and the strided matrix
//! as a [`PanelSource`].
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::{tile_size, Isa, MatRef, PanelSource};
use crate::kernels::simd::{self, Dot};

/// Packs A columns `k0..k0+kc` (all rows) into `mr`-row micro-panels in `dst` (`m_pad*kc`);
/// for [`Dot::Bf16`], the slots `k0..k0+kc` of pairs.
pub(super) fn pack_a(
    (isa, dot): (Isa, Dot),
    a: &MatRef,
    k0: usize,
    kc: usize,
    dst: &mut [f32],
    par: bool,
) {
    let (mr, _) = tile_size(isa);
    let pack = |(p, panel): (usize, &mut [f32])| pack_a_panel((isa, dot), a, k0, kc, p, panel);
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

/// Packs the A micro-panel `p` (rows `p·mr ..`, columns `k0..k0+kc`) into `panel` (`kc·mr`);
/// for [`Dot::Bf16`], slots `k0..k0+kc` of pairs (columns `2·k0 ..`, see [`pack_a_panel_pairs`]).
pub(super) fn pack_a_panel(
    (isa, dot): (Isa, Dot),
    a: &MatRef,
    k0: usize,
    kc: usize,
    p: usize,
    panel: &mut [f32],
) {
    let (mr, _) = tile_size(isa);
    if dot == Dot::Bf16 {
        pack_a_panel_pairs(mr, a, k0, kc, p, panel);
        return;
    }
    {
        let i0 = p * mr;
        let rows = mr.min(a.rows - i0);
        if a.col_stride == 1 && rows == mr && mr.is_multiple_of(4) {
            let src: [&[f32]; simd::MAX_MR] = std::array::from_fn(|r| {
                let start = (i0 + r.min(rows - 1)) * a.row_stride + k0;
                &a.data[start..start + kc]
            });
            simd::interleave_rows(isa, &src[..mr], &mut panel[..mr * kc]);
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
        if b.col_stride != 1 && b.row_stride == 1 {
            // A transposed matrix (attention's keys): each column is a run of memory, copied
            // down the panel's column.
            for j in 0..cols {
                let start = (j0 + j) * b.col_stride + k0;
                let src = &b.data[start..start + kc];
                for (d, &v) in dst.chunks_exact_mut(nr).zip(src) {
                    d[j] = v;
                }
            }
            return;
        }
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

/// Slots of bfloat16 pairs converted per row at a time by [`pack_a_panel_pairs`] (one K
/// block of the AVX-512 tile).
const PAIR_CHUNK: usize = 256;

/// Packs the A micro-panel `p` (rows `mr·p ..`; the pairs' tile is AVX-512's) as bfloat16
/// pairs: slot `kk` of row `r` holds A's columns `2(k0+kk)` and `2(k0+kk)+1` rounded by
/// [`simd::bf16_pairs`], zero past A's last column or row (`panel`: `kc·mr` slots). Each row
/// is converted into a buffer on the stack, then the `mr` rows are interleaved.
pub(super) fn pack_a_panel_pairs(
    mr: usize,
    a: &MatRef,
    k0: usize,
    kc: usize,
    p: usize,
    panel: &mut [f32],
) {
    assert!(mr <= simd::MAX_MR, "bfloat16 pairs: a panel of {mr} rows");
    let i0 = p * mr;
    let rows = mr.min(a.rows - i0);
    let c0 = (2 * k0).min(a.cols);
    let c1 = (2 * (k0 + kc)).min(a.cols);
    let mut conv = [0.0f32; simd::MAX_MR * PAIR_CHUNK];
    let mut gathered = [0.0f32; 2 * PAIR_CHUNK];
    for s0 in (0..kc).step_by(PAIR_CHUNK) {
        let sc = PAIR_CHUNK.min(kc - s0);
        let (lo, hi) = ((c0 + 2 * s0).min(c1), (c0 + 2 * (s0 + sc)).min(c1));
        for (r, dst) in conv.chunks_exact_mut(sc).take(mr).enumerate() {
            if r >= rows {
                dst.fill(0.0);
            } else if a.col_stride == 1 {
                let start = (i0 + r) * a.row_stride;
                simd::bf16_pairs(&a.data[start + lo..start + hi], dst);
            } else {
                let src = &mut gathered[..hi - lo];
                for (c, v) in src.iter_mut().enumerate() {
                    *v = a.at(i0 + r, lo + c);
                }
                simd::bf16_pairs(src, dst);
            }
        }
        let rows: [&[f32]; simd::MAX_MR] =
            std::array::from_fn(|r| &conv[r.min(mr - 1) * sc..][..sc]);
        simd::interleave_rows(
            Isa::Avx512,
            &rows[..mr],
            &mut panel[s0 * mr..(s0 + sc) * mr],
        );
    }
}

/// Packs B rows `2·k0 .. 2·(k0+kc)` as bfloat16 pairs into `nr`-column micro-panels (`dst`:
/// `kc · n_pad` slots, panel `q` from `q·kc·nr`): slot `kk` of column `j` holds B's rows
/// `2(k0+kk)` and `2(k0+kk)+1` rounded by [`simd::bf16_pairs`], zero past B's last row or
/// column.
pub(super) fn pack_b_pairs(nr: usize, b: &MatRef, k0: usize, kc: usize, dst: &mut [f32]) {
    dst.fill(0.0);
    let mut two_rows = vec![0.0f32; 2 * nr];
    for (q, panel) in dst.chunks_exact_mut(kc * nr).enumerate() {
        let j0 = q * nr;
        let cols = nr.min(b.cols.saturating_sub(j0));
        for (kk, d) in panel.chunks_exact_mut(nr).enumerate() {
            let k = 2 * (k0 + kk);
            for (j, v) in two_rows.chunks_exact_mut(2).take(cols).enumerate() {
                v[0] = b.at(k, j0 + j);
                v[1] = if k + 1 < b.rows {
                    b.at(k + 1, j0 + j)
                } else {
                    0.0
                };
            }
            simd::bf16_pairs(&two_rows[..2 * cols], &mut d[..cols]);
        }
    }
}
