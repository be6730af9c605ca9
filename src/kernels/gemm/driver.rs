//! The GEMM drivers: the blocked loops (`jc`, `pc`, tasks of C) and the whole-K parallel
//! driver, the per-thread packing buffers, and the micro-kernel calls of one task.
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::grid::{
    for_each_task, for_each_task_in_rows, task_grid, whole_k_grid, COut, Grid, Task,
};
use super::pack::{pack_a, pack_a_panel, pack_b, pack_b_panel, MatSource};
use super::{
    kc_block, tile_size, Activation, Bias, Epilogue, Isa, MatRef, PackedA, PackedB, PanelSource,
    MC, NC, PAR_MIN_FLOPS,
};
use crate::kernels::aligned::AlignedVec;
use crate::kernels::scratch;
use crate::kernels::simd::{self, Dot, TileTail};

/// An operand: a view to pack on the fly, or prepacked.
#[derive(Clone, Copy)]
pub(super) enum Src<'a> {
    Mat(MatRef<'a>),
    PackedA(&'a PackedA),
    PackedB(&'a PackedB),
    Panels(&'a dyn PanelSource),
}

/// The B operand of one K block as the micro-kernels read it.
#[derive(Clone, Copy)]
enum BBlock<'a> {
    /// `nr`-wide k-major micro-panels of the block's columns (from the block's first column).
    Packed(&'a [f32]),
    /// A row-major matrix read in place (no packing): `rows` starts at the block's first row,
    /// `ld` apart, and its column `j` is column `j` of C.
    Direct { rows: &'a [f32], ld: usize },
    /// Packed one micro-panel at a time, just before the tiles of its column use it: rows
    /// `k0..` of `src`, whose column `j` is column `j` of C (see [`stream_b`]).
    Stream { src: &'a dyn PanelSource, k0: usize },
}

/// Whether B is packed one micro-panel at a time while the tiles run ([`BBlock::Stream`])
/// rather than all at once before them: for a generated B (a convolution's implicit im2col)
/// when C has at most [`MC`] rows (a task covers them all, so every micro-panel is packed
/// once; in parallel, [`gemm`] streams only where the task grid keeps the rows whole, since
/// each row block packs its own). The packed panel then stays in L1 for the tiles that use it, where a B packed
/// whole (ResNet-50's 7×7 stem: 147 × 12544 floats) goes out to L3 and is read back:
/// `kernel_bench` (`KB_COLD=4`, best of 5 rounds) on the stem 77 → 80 GFLOP/s at 1 thread,
/// 136 → 157 at 2; stride-2 3×3 layers of 128 and 256 channels unchanged. Only over more than
/// 128 rows of B: a shallower B packed whole is walked A micro-panel first, writing C along its
/// rows (see [`run_task`]), which MobileNetV2's 3×3 stem (K = 27) lost when streamed (0.55 →
/// 0.64 ms). A matrix B keeps whole packing for the same reason.
pub(super) fn stream_b(isa: Isa, b: &Src, m: usize, k: usize) -> bool {
    isa != Isa::Portable && m <= MC && k > 128 && matches!(b, Src::Panels(_))
}

/// Whether B (row-major) is read in place rather than packed, for a product of `m` rows over a
/// shared dimension `k`. Packing copies all of B once per GEMM and pays for itself when each
/// packed micro-panel serves many A micro-panels. With few rows of C, or a shallow B, the copy
/// costs about as much as the arithmetic. Measured at 1 thread (ms per layer, packed → in
/// place): MobileNetV2's 1×1 convolutions to 16–32 channels 0.34 → 0.23 (144→24 at 56²),
/// 0.22 → 0.12 (32→16 at 112²), 0.18 → 0.13 (192→32 at 28²), and 16→96 at 112² 0.67 → 0.60.
///
/// Since a column of tiles prefetches the next column's micro-panel of a B read in place
/// (`TileTail::next_b`), reading in place also wins for contractions (`k ≥ m`) whose rows are
/// not a multiple of 1 KiB apart (such rows fall in a few cache sets; sgemm 1024³ went from 89
/// to 82 GFLOP/s). `kernel_bench`, `KB_COLD=4`, GFLOP/s packed → in place at 1 / 2 threads:
/// ResNet-50's 256→128 at 56² 73 → 80 / 136 → 156, 512→128 at 28² 76 → 87 / 158 → 174,
/// 1024→256 at 14² 89 → 87 / 152 → 174, 2048→512 at 7² 82 → 81 / 135 → 157; MobileNetV2's
/// 576→96 at 14² 81 → 90 / 131 → 155. Expansions stay packed: 64→256 at 56² lost 3–11%,
/// 160→960 at 7² up to 6%.
///
/// Except a contraction over at most 64 columns (the 7² images of ResNet-50 and MobileNetV2):
/// a micro-panel of such a B read in place takes 32 floats from each of its rows, 196 bytes
/// apart at 49 columns, so its K block of 256 rows touches some 700 cache lines (about 45 KiB,
/// nearly all of L1's 48), and with the A micro-panels and C streaming through L1 each tile
/// down the column fetched much of it again. On Zen 5 (`kernel_bench`,
/// `KB_COLD=4`, 4 interleaved rounds, GFLOP/s in place → packed at 1 / 2 threads): 2048→512 at
/// 7² 178 → 191 / 346 → 370, 960→320 at 7² 172 → 174 / 318 → 342; inside ResNet-50 its two
/// 2048→512 layers took 0.92–0.93 of their time. At 14² and 28² reading in place still won
/// (packed: 576→96 at 14² 203 → 192, 512→128 at 28² 226 → 206 at 1 thread).
pub(super) fn read_b_in_place(isa: Isa, b: &Src, m: usize, k: usize) -> bool {
    match b {
        Src::Mat(v) if v.col_stride == 1 && isa != Isa::Portable => {
            m <= 64 || k <= 32 || (k >= m && v.row_stride % 256 != 0 && v.cols > 64)
        }
        _ => false,
    }
}

/// The driver behind every public entry point with a row-major C ([`gemm_into`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn gemm(
    isa: Isa,
    alpha: f32,
    a: Src,
    b: Src,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    ep: &Epilogue,
    parallel: bool,
) {
    gemm_into(isa, alpha, (a, b), beta, COut::Flat(c, ldc), ep, parallel);
}

/// The driver behind every public entry point: `C = epilogue(alpha·A·B + beta·C)`, in
/// parallel when `parallel` (and C is row-major).
pub(super) fn gemm_into(
    isa: Isa,
    alpha: f32,
    (a, b): (Src, Src),
    beta: f32,
    mut c: COut,
    ep: &Epilogue,
    parallel: bool,
) {
    let (m, ka) = match a {
        Src::Mat(v) => {
            v.check("A");
            (v.rows, v.cols)
        }
        Src::PackedA(p) => (p.m, p.k),
        Src::PackedB(_) | Src::Panels(_) => unreachable!("B operand passed as A"),
    };
    let (kb, n) = match b {
        Src::Mat(v) => {
            v.check("B");
            (v.rows, v.cols)
        }
        Src::PackedB(p) => (p.k, p.n),
        Src::Panels(p) => (p.rows(), p.cols()),
        Src::PackedA(_) => unreachable!("A operand passed as B"),
    };
    assert_eq!(
        ka, kb,
        "gemm: inner dimensions differ ({m}x{ka} · {kb}x{n})"
    );
    // A B packed as bfloat16 pairs makes the product one of pairs: A is packed the same way
    // (so it must be a matrix), and the shared dimension is counted in slots of two.
    let dot = match b {
        Src::PackedB(p) => p.dot,
        _ => Dot::F32,
    };
    assert!(
        dot == Dot::F32 || matches!(a, Src::Mat(_)),
        "gemm: a bfloat16 product packs its own A"
    );
    let k = match dot {
        Dot::F32 => ka,
        Dot::Bf16 => ka.div_ceil(2),
    };
    if m == 0 || n == 0 {
        return;
    }
    // How far apart C's rows lie in memory (for the loop order).
    let ldc = c.check(m, n);
    match ep.bias {
        Bias::PerRow(bias) => assert!(bias.len() >= m, "gemm: per-row bias too short"),
        Bias::PerCol(bias) => assert!(bias.len() >= n, "gemm: per-col bias too short"),
        Bias::None => {}
    }
    if let Some((z, ld)) = ep.residual {
        assert!(
            ld >= n && z.len() >= (m - 1) * ld + n,
            "gemm: residual too short"
        );
    }
    // A packed operand fixes the ISA; an unsupported one degrades to a checked panic in simd.
    let (mr, nr) = tile_size(isa);
    let kcb = kc_block(isa);

    if k == 0 {
        let scale = |i: usize, row: &mut [f32]| {
            if beta == 0.0 {
                row.fill(0.0);
            } else {
                row.iter_mut().for_each(|v| *v *= beta);
            }
            let z = ep.residual_row(i, n);
            simd::vectorize(
                isa,
                #[inline(always)]
                || epilogue_row(ep, row, z, i, 0),
            );
        };
        match &mut c {
            COut::Flat(c, ldc) => {
                (c.chunks_mut(*ldc).take(m).enumerate()).for_each(|(i, r)| scale(i, &mut r[..n]))
            }
            COut::Rows { rows, col0, .. } => (rows.iter_mut().take(m).enumerate())
                .for_each(|(i, r)| scale(i, &mut r[*col0..*col0 + n])),
        }
        return;
    }

    if let (1, Dot::F32, Src::Mat(v), COut::Flat(c, _)) = (m, dot, a, &mut c) {
        if super::gemv::gemv(isa, alpha, &v, &b, beta, c, ep, parallel) {
            return;
        }
    }

    let threads = if parallel && matches!(c, COut::Flat(..)) {
        rayon::current_num_threads()
    } else {
        1
    };
    let par = threads > 1 && 2 * m * n * k >= PAR_MIN_FLOPS;
    let m_pad = m.div_ceil(mr) * mr;
    let direct_b = read_b_in_place(isa, &b, m, k);
    // A streamed B is packed by every row block of the grid that uses its columns, so in
    // parallel it is streamed only where the grid keeps the rows whole; otherwise it is packed
    // once, in parallel. `kernel_bench` (`KB_COLD=4`, 2 threads, 6 interleaved rounds):
    // ResNet-50's stride-2 3×3 layer of 128 channels at 56² (two row blocks) 321 → 345
    // GFLOP/s; on the borrowed 16-core Xeon the layer took 0.47 ms against 0.69 inside the
    // model at 16 threads (a noisy call: ONNX Runtime's own layer 0.33 → 0.37 in the same two
    // runs).
    let stream = stream_b(isa, &b, m, k) && (!par || task_grid(m, n, mr, nr, 3 * threads).0 >= m);
    let stream_src: Option<&dyn PanelSource> = match b {
        Src::Panels(p) if stream => Some(p),
        _ => None,
    };
    if par {
        let n_pad = n.div_ceil(nr) * nr;
        let a_len = if matches!(a, Src::Mat(_)) {
            m_pad * k
        } else {
            0
        };
        let b_len = match b {
            _ if stream => 0,
            Src::Mat(_) if direct_b => 0,
            Src::Mat(_) | Src::Panels(_) => k * n_pad,
            _ => 0,
        };
        if let (true, COut::Flat(c, _)) = (
            a_len <= scratch::KEEP_MAX && b_len <= scratch::KEEP_MAX,
            &mut c,
        ) {
            let shape = (m, n, k);
            gemm_whole_k(
                isa,
                alpha,
                (a, b),
                beta,
                c,
                ldc,
                ep,
                shape,
                (threads, direct_b, stream_src, dot),
            );
            return;
        }
    }

    // On one thread A is packed a row block at a time, just before the block's tiles use it
    // (then in L2); in parallel all of it first, per K block.
    let a_lazy = !par && matches!(a, Src::Mat(_));
    // Rows of A the buffer holds: one row block when packed lazily, else all of them.
    let a_rows = if a_lazy {
        m_pad.min(MC.next_multiple_of(mr))
    } else {
        m_pad
    };
    // Packing buffers, kept between calls (see `scratch`).
    let mut a_buf = match a {
        Src::Mat(_) => scratch::take(a_rows * kcb.min(k)),
        _ => AlignedVec::default(),
    };
    let mut b_buf = match b {
        _ if stream => AlignedVec::default(),
        Src::Mat(_) if direct_b => AlignedVec::default(),
        Src::Mat(_) | Src::Panels(_) => scratch::take(kcb.min(k) * NC.min(n.div_ceil(nr) * nr)),
        _ => AlignedVec::default(),
    };

    // Task grid: row blocks of `mb` rows × column chunks of `cb` columns.
    let target = if par { 3 * threads } else { 1 };

    for jc in (0..n).step_by(NC) {
        let nc = NC.min(n - jc);
        let nc_panels = nc.div_ceil(nr);
        let (mb, cb) = if par {
            task_grid(m, nc, mr, nr, target)
        } else {
            (MC, nc_panels * nr)
        };
        for pc in (0..k).step_by(kcb) {
            let kc = kcb.min(k - pc);
            let first = pc == 0;
            let last = pc + kc == k;
            if let (Src::Mat(v), false) = (a, a_lazy) {
                pack_a((isa, dot), &v, pc, kc, &mut a_buf[..m_pad * kc], par);
            }
            let b_pan = match (b, stream_src) {
                (_, Some(src)) => BBlock::Stream { src, k0: pc },
                (Src::Mat(v), _) if direct_b => BBlock::Direct {
                    rows: &v.data[pc * v.row_stride..],
                    ld: v.row_stride,
                },
                (Src::Mat(v), _) => {
                    let buf = &mut b_buf[..kc * nc_panels * nr];
                    pack_b(isa, &MatSource(v), pc, kc, jc, nc, buf, par);
                    BBlock::Packed(buf)
                }
                (Src::Panels(src), _) => {
                    let buf = &mut b_buf[..kc * nc_panels * nr];
                    pack_b(isa, src, pc, kc, jc, nc, buf, par);
                    BBlock::Packed(buf)
                }
                (Src::PackedB(p), _) => {
                    let np = p.n.div_ceil(nr) * nr;
                    let blk = &p.data[pc * np..(pc + kc) * np];
                    BBlock::Packed(&blk[jc * kc..(jc + nc_panels * nr) * kc])
                }
                (Src::PackedA(_), _) => unreachable!(),
            };
            let beta_eff = if first { beta } else { 1.0 };

            let residual = ep.residual.filter(|_| last);
            // Row blocks of C, each with its A micro-panels packed just before it when A is
            // packed lazily; else all of C at once.
            let row_step = if a_lazy { mb } else { m };
            for r0 in (0..m).step_by(row_step) {
                let rows = row_step.min(m - r0);
                // A packed lazily holds only this row block's micro-panels, from the buffer's
                // start: the same 192 KiB (AVX-512) from one block to the next, where a buffer of all
                // the rows had each block write fresh lines (sgemm 1024³ with a prepacked B,
                // 1 thread, 8 interleaved rounds: +1%).
                let a_row0 = if a_lazy { r0 } else { 0 };
                if let (Src::Mat(v), true) = (a, a_lazy) {
                    for p in r0 / mr..(r0 + rows).div_ceil(mr) {
                        let dst = &mut a_buf[(p - a_row0 / mr) * kc * mr..][..kc * mr];
                        pack_a_panel((isa, dot), &v, pc, kc, p, dst);
                    }
                }
                let a_pan: &[f32] = match a {
                    Src::Mat(_) => &a_buf[..a_rows * kc],
                    Src::PackedA(p) => {
                        let mp = p.m.div_ceil(mr) * mr;
                        &p.data[pc * mp..(pc + kc) * mp]
                    }
                    Src::PackedB(_) | Src::Panels(_) => unreachable!(),
                };
                let run = |t: &mut Task| {
                    run_task(
                        (isa, dot),
                        t,
                        kc,
                        (a_pan, a_row0),
                        b_pan,
                        alpha,
                        beta_eff,
                        (jc, ldc),
                        last.then_some(ep),
                    );
                };
                let grid = Grid {
                    m: rows,
                    rows0: r0,
                    cols: jc..jc + nc,
                    block: (mb, cb),
                    par,
                };
                match &mut c {
                    COut::Flat(c, _) => {
                        for_each_task(&mut c[r0 * ldc..], ldc, residual, &grid, &run)
                    }
                    COut::Rows { rows, col0, .. } => {
                        for_each_task_in_rows(&mut rows[r0..], *col0, residual, &grid, &run)
                    }
                }
            }
        }
    }
    scratch::give(a_buf);
    scratch::give(b_buf);
}

/// Packs every `width`-wide micro-panel of every K block of one operand in parallel, into
/// `buf`, whose block at `k0` takes `padded · kc` floats (the layout of [`PackedA`] /
/// [`PackedB`]); `pack(k0, kc, panel, dst)` packs one.
fn pack_panels<P>(buf: &mut [f32], (k, kcb): (usize, usize), padded: usize, width: usize, pack: P)
where
    P: Fn(usize, usize, usize, &mut [f32]) + Sync,
{
    buf.par_chunks_mut(padded * kcb)
        .enumerate()
        .for_each(|(kb, blk)| {
            let k0 = kb * kcb;
            let kc = kcb.min(k - k0);
            blk.par_chunks_mut(kc * width)
                .enumerate()
                .for_each(|(panel, dst)| pack(k0, kc, panel, dst));
        });
}

/// The parallel driver when the operands to pack fit whole in the per-thread buffers: every
/// micro-panel of every K block is packed in one parallel region, then each task computes its
/// piece of C over all K blocks in a second one. Two fork-joins per GEMM, where the blocked
/// driver needs two or three per K block (18 K blocks for a 3×3 convolution of 512 channels).
#[allow(clippy::too_many_arguments)]
fn gemm_whole_k(
    isa: Isa,
    alpha: f32,
    (a, b): (Src, Src),
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    ep: &Epilogue,
    (m, n, k): (usize, usize, usize),
    (threads, direct_b, stream, dot): (usize, bool, Option<&dyn PanelSource>, Dot),
) {
    let (mr, nr) = tile_size(isa);
    let kcb = kc_block(isa);
    let mat_b = match b {
        Src::Mat(v) if !direct_b => Some(MatSource(v)),
        _ => None,
    };
    let b_src: Option<&dyn PanelSource> = match b {
        _ if stream.is_some() => None,
        Src::Panels(p) => Some(p),
        _ => mat_b.as_ref().map(|s| s as &dyn PanelSource),
    };
    let (m_pad, n_pad) = (m.div_ceil(mr) * mr, n.div_ceil(nr) * nr);
    // A streamed B is packed by every task that uses its columns: the tasks split only the
    // columns where there are enough of them.
    let block = match stream {
        Some(_) => task_grid(m, n, mr, nr, 3 * threads),
        None => whole_k_grid(m, n, (mr, nr), threads),
    };
    // When the tasks split only the rows, each packs its own rows of A one K block at a time,
    // just before its tiles use them (then in L2), rather than all of A first (then in L3).
    let a_per_task = matches!(a, Src::Mat(_)) && block.1 >= n;
    let mut a_buf = match a {
        Src::Mat(_) if !a_per_task => scratch::take(m_pad * k),
        _ => AlignedVec::default(),
    };
    let mut b_buf = match b_src {
        Some(_) => scratch::take(k * n_pad),
        None => AlignedVec::default(),
    };

    // 1. Pack: every micro-panel of both operands in one parallel region.
    let pack_a_all = || {
        if let (Src::Mat(v), false) = (a, a_per_task) {
            pack_panels(
                &mut a_buf[..m_pad * k],
                (k, kcb),
                m_pad,
                mr,
                |k0, kc, p, dst| pack_a_panel((isa, dot), &v, k0, kc, p, dst),
            );
        }
    };
    let pack_b_all = || {
        if let Some(src) = b_src {
            pack_panels(
                &mut b_buf[..k * n_pad],
                (k, kcb),
                n_pad,
                nr,
                |k0, kc, p, dst| pack_b_panel(isa, src, k0, kc, 0, n, p, dst),
            );
        }
    };
    rayon::join(pack_a_all, pack_b_all);

    // 2. Compute: the K block at `k0` of either operand starts at `k0 · m_pad` / `k0 · n_pad`,
    // in the prepacked layouts as in the buffers.
    let a_full: &[f32] = match a {
        Src::PackedA(p) => &p.data,
        _ if a_per_task => &[],
        _ => &a_buf[..m_pad * k],
    };
    let b_full: &[f32] = match b {
        _ if stream.is_some() => &[],
        Src::PackedB(p) => &p.data,
        Src::Mat(v) if direct_b => v.data,
        _ => &b_buf[..k * n_pad],
    };
    let run = |t: &mut Task| {
        let panels = t.rows.len().div_ceil(mr);
        let mut own = match a {
            Src::Mat(_) if a_per_task => scratch::take(panels * mr * kcb.min(k)),
            _ => AlignedVec::default(),
        };
        for k0 in (0..k).step_by(kcb) {
            let kc = kcb.min(k - k0);
            let a_pan = match a {
                Src::Mat(v) if a_per_task => {
                    let first = t.i0 / mr;
                    for (q, dst) in own.chunks_exact_mut(kc * mr).take(panels).enumerate() {
                        pack_a_panel((isa, dot), &v, k0, kc, first + q, dst);
                    }
                    (&own[..panels * kc * mr], t.i0)
                }
                _ => (&a_full[k0 * m_pad..(k0 + kc) * m_pad], 0),
            };
            let b_pan = match (b, stream) {
                (_, Some(src)) => BBlock::Stream { src, k0 },
                (Src::Mat(v), _) if direct_b => BBlock::Direct {
                    rows: &b_full[k0 * v.row_stride..],
                    ld: v.row_stride,
                },
                _ => BBlock::Packed(&b_full[k0 * n_pad..(k0 + kc) * n_pad]),
            };
            let beta_eff = if k0 == 0 { beta } else { 1.0 };
            let last = k0 + kc == k;
            run_task(
                (isa, dot),
                t,
                kc,
                a_pan,
                b_pan,
                alpha,
                beta_eff,
                (0, ldc),
                last.then_some(ep),
            );
        }
        scratch::give(own);
    };
    let grid = Grid {
        m,
        rows0: 0,
        cols: 0..n,
        block,
        par: true,
    };
    for_each_task(c, ldc, ep.residual, &grid, &run);
    scratch::give(a_buf);
    scratch::give(b_buf);
}

/// Runs the micro-kernels of one task (see [`Task`]) of a block of C starting at column `jc`,
/// whose rows are `ldc` apart; `ep` is `Some` on the last `KC` block. `a_pan` holds the packed
/// A micro-panels of the K block from row `a_row0` on (a multiple of `mr`).
#[allow(clippy::too_many_arguments)]
fn run_task(
    (isa, dot): (Isa, Dot),
    t: &mut Task,
    kc: usize,
    (a_pan, a_row0): (&[f32], usize),
    b_pan: BBlock,
    alpha: f32,
    beta: f32,
    (jc, ldc): (usize, usize),
    ep: Option<&Epilogue>,
) {
    let (mr, nr) = tile_size(isa);
    assert!(
        a_row0.is_multiple_of(mr) && a_row0 <= t.i0,
        "gemm: A panels of another task"
    );
    let ep = ep.filter(|e| !e.is_none());
    // Relu and Clip are clamps the micro-tile applies with the biases; other activations run
    // over the stored tile.
    let act = ep.map_or(Activation::None, |e| e.activation);
    let clamp = act.clamp_bounds();
    let rest = if clamp.is_some() {
        Activation::None
    } else {
        act
    };
    let width = t.rows.first().map_or(0, |r| r.len());
    let n_rows = t.rows.len();
    // Loop order. By default B micro-panels are outermost (each read once, kept in L1) and C
    // is written in columns `nr` wide down all the task's rows: with `ldc` ≥ 512 floats those
    // are hundreds of 128-byte pieces a page apart, and with a shallow K block that write costs
    // as much as the arithmetic. Then A micro-panels go outermost instead, so C is written
    // along its rows, and the packed B block is re-read from L2. Measured at 1 thread on
    // ResNet-50's 64→256 1×1 layers at 56² (K = 64): 1.36 → 0.92 ms; 128→512 at 28²: 1.02 →
    // 0.96; with N = 196 (MobileNetV2 at 14²) it was slower, as it was for K = 256. A B read
    // in place (then re-read from L2 or beyond for every A micro-panel) goes rows-outer only
    // for K ≤ 32 when C's rows are at least 32 KiB apart (images of 112²): MobileNetV2's and
    // EfficientNet's expansions at 112² went from 35–40 to 61 GFLOP/s (16→96), 51 to 63
    // (24→144), 60 to 68 (32→192) (`kernel_bench`, 1 thread, `KB_COLD=4`), while at 56² (rows
    // 12 KiB apart) they were slower by 5–15%.
    let rows_outer = match b_pan {
        BBlock::Packed(_) => kc <= 128 && width >= 512,
        BBlock::Direct { .. } => kc <= 32 && ldc >= 8192,
        BBlock::Stream { .. } => false,
    };
    // The micro-panel of a streamed B.
    let mut streamed = match b_pan {
        BBlock::Stream { .. } => scratch::take(kc * nr),
        _ => AlignedVec::default(),
    };
    let row_step = if rows_outer { mr } else { n_rows.max(1) };
    for r0 in (0..n_rows).step_by(row_step) {
        let r1 = (r0 + row_step).min(n_rows);
        let a_task = &a_pan[((t.i0 + r0 - a_row0) / mr) * kc * mr..];
        // A-outer order: the full micro-panels of the row block in one call.
        let full = if rows_outer {
            let full = width / nr;
            let b_row = match b_pan {
                BBlock::Packed(p) => Some((&p[(t.j0 / nr) * kc * nr..], nr, kc * nr)),
                BBlock::Direct { rows, ld } => Some((&rows[jc + t.j0..], ld, nr)),
                BBlock::Stream { .. } => None,
            };
            match b_row {
                Some(b_row) if full > 0 => {
                    let rows = &mut t.rows[r0..r1];
                    let j = jc + t.j0;
                    let rs = (t.i0 + r0, t.residual.get(r0..r1).unwrap_or(&[]));
                    let tail = tile_tail(ep, rs, j..j + full * nr, clamp, &[]);
                    simd::micro_row(
                        (isa, dot),
                        kc,
                        a_task,
                        b_row,
                        rows,
                        0,
                        full,
                        alpha,
                        beta,
                        &tail,
                    );
                    let each = rows.iter_mut().map(|r| &mut **r);
                    apply_rest(isa, rest, each, 0..full * nr);
                    full
                }
                _ => 0,
            }
        } else {
            0
        };
        // The rows' lengths (and the residual's, added on the last K block) checked once for
        // all the columns.
        let residual = match ep {
            Some(_) => t.residual.get(r0..r1).unwrap_or(&[]),
            None => &[],
        };
        let rows = &mut simd::CheckedRows::new(&mut t.rows[r0..r1], residual, width);
        for jp in full..width.div_ceil(nr) {
            let col = jp * nr;
            let nr_eff = nr.min(width - col);
            let j = jc + t.j0 + col;
            // The next column's micro-panel, prefetched by this one: of a B read in place,
            // whose rows are far apart (into L1), and of a packed B over more than one A
            // micro-panel (into L2: prepacked weights come from memory, and their panels were
            // first fetched by the tile that used them; `kernel_bench`, cold, 1 thread, one
            // binary with and without it, BERT's 128-token GEMMs 768→3072 93 → 99 GFLOP/s,
            // 3072→768 97 → 101, 1024³ and the convolutions unchanged). Not a packed B that one A micro-panel uses (a matrix
            // times a vector): a fully connected layer of 1280 → 1000 gained 12–19% with its
            // weights from memory, but lost 10–24% with them in L3, as inside MobileNetV2.
            let next_b: &[f32] = match b_pan {
                BBlock::Direct { rows, .. } if !rows_outer && col + 2 * nr <= width => {
                    &rows[j + nr..]
                }
                BBlock::Packed(p) if !rows_outer && rows.len() > mr && col + nr < width => {
                    &p[(t.j0 / nr + jp + 1) * kc * nr..]
                }
                _ => &[],
            };
            let mut column = |b_micro: &[f32], ldb: usize| {
                let a_rows = &a_task[..rows.len().div_ceil(mr) * kc * mr];
                let tail = tile_tail(ep, (t.i0 + r0, &[]), j..j + nr_eff, clamp, next_b);
                simd::micro_column(
                    (isa, dot),
                    kc,
                    a_rows,
                    b_micro,
                    ldb,
                    rows,
                    col,
                    nr_eff,
                    alpha,
                    beta,
                    &tail,
                );
                apply_rest(isa, rest, rows.iter_mut(), col..col + nr_eff);
            };
            match b_pan {
                BBlock::Packed(p) => column(&p[(t.j0 / nr + jp) * kc * nr..], nr),
                BBlock::Direct { rows, ld } if nr_eff == nr => column(&rows[j..], ld),
                BBlock::Stream { src, k0 } => {
                    let panel = &mut streamed[..kc * nr];
                    if nr_eff < nr {
                        panel.fill(0.0);
                    }
                    src.fill_panel(k0, kc, j, nr_eff, nr, panel);
                    column(panel, nr)
                }
                BBlock::Direct { rows, ld } => {
                    // The last micro-panel of a B read in place, narrower than `nr`: copied
                    // with zeros past its end, as packing would have (the kernels read `nr`
                    // columns).
                    let mut edge = [0.0f32; EDGE_FLOATS];
                    for (k, d) in edge.chunks_exact_mut(nr).take(kc).enumerate() {
                        d[..nr_eff].copy_from_slice(&rows[k * ld + j..][..nr_eff]);
                    }
                    column(&edge[..kc * nr], nr);
                }
            }
        }
    }
    scratch::give(streamed);
}

/// The [`TileTail`] of the tiles of C's rows from `i0` on (as many as `residual` has pieces,
/// or the tile's rows when it is empty) and its columns `cols`, on the last K block (`ep` is
/// `Some`); `next_b` is only prefetched.
fn tile_tail<'a>(
    ep: Option<&Epilogue<'a>>,
    (i0, residual): (usize, &'a [&'a [f32]]),
    cols: std::ops::Range<usize>,
    clamp: Option<(f32, f32)>,
    next_b: &'a [f32],
) -> TileTail<'a> {
    match ep {
        Some(e) => TileTail {
            row_bias: match e.bias {
                Bias::PerRow(b) => &b[i0..],
                _ => &[],
            },
            col_bias: match e.bias {
                Bias::PerCol(b) => &b[cols],
                _ => &[],
            },
            residual,
            clamp,
            next_b,
        },
        None => TileTail {
            next_b,
            ..TileTail::default()
        },
    }
}

/// Applies `act` (the activation the tiles did not fuse; none: nothing) to columns `cols` of
/// the just-stored `rows` of C, while they are in L1.
fn apply_rest<'r>(
    isa: Isa,
    act: Activation,
    rows: impl Iterator<Item = &'r mut [f32]>,
    cols: std::ops::Range<usize>,
) {
    if act != Activation::None {
        simd::vectorize(
            isa,
            #[inline(always)]
            || {
                for row in rows {
                    act.apply_inline(&mut row[cols.clone()]);
                }
            },
        );
    }
}

/// Floats of the edge micro-panel of a B read in place: `kc · nr` for every ISA's block depth
/// and tile width.
const EDGE_FLOATS: usize = 256 * 32;
const _: () = assert!(
    kc_block(Isa::Avx512) * simd::nr(Isa::Avx512) <= EDGE_FLOATS
        && kc_block(Isa::Avx2Fma) * simd::nr(Isa::Avx2Fma) <= EDGE_FLOATS
);

/// Applies bias, residual (`z`, the matching piece of the residual's row) and activation to
/// `row`, the piece of C row `i` starting at column `j`. Inlined into callers compiled for the
/// right ISA (inside `simd::vectorize`).
#[inline(always)]
pub(super) fn epilogue_row(ep: &Epilogue, row: &mut [f32], z: Option<&[f32]>, i: usize, j: usize) {
    match ep.bias {
        Bias::None => {}
        Bias::PerRow(b) => {
            let v = b[i];
            row.iter_mut().for_each(|x| *x += v);
        }
        Bias::PerCol(b) => {
            let len = row.len();
            row.iter_mut()
                .zip(&b[j..j + len])
                .for_each(|(x, &v)| *x += v);
        }
    }
    if let Some(z) = z {
        row.iter_mut().zip(z).for_each(|(x, &v)| *x += v);
    }
    ep.activation.apply_inline(row);
}
