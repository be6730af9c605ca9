//! The task grids of the parallel GEMM: how C is cut into row blocks × column chunks, and
//! the tasks that run over them ([`for_each_task`]); C as a row-major matrix or as row slices
//! ([`COut`]).
#![forbid(unsafe_code)]

use rayon::prelude::*;

use super::MC;

/// The task grid of a parallel GEMM over `m` rows and `nc` columns: row blocks of `mb` rows ×
/// column chunks of `cb` columns, about `target` tasks (row blocks of at most [`MC`] rows).
pub(super) fn task_grid(
    m: usize,
    nc: usize,
    mr: usize,
    nr: usize,
    target: usize,
) -> (usize, usize) {
    let nc_panels = nc.div_ceil(nr);
    let nrb0 = m.div_ceil(MC);
    let ncb = target.div_ceil(nrb0).clamp(1, nc_panels);
    let cb = nc_panels.div_ceil(ncb) * nr;
    let ncb = nc.div_ceil(cb);
    let nrb = nrb0.max(target.div_ceil(ncb)).min(m.div_ceil(mr));
    (m.div_ceil(nrb).div_ceil(mr) * mr, cb)
}

/// From this many threads on, [`whole_k_grid`] keeps the general grid. One task a thread
/// leaves the work stealing nothing to even out, and on a shared host the threads do not run
/// equally fast: on a borrowed 16-core Xeon (a KVM guest) a 1-thread sgemm 1024³ pinned to
/// each vCPU in turn read medians of 72 to 131 GFLOP/s. There, at 16 threads, ResNet-50 took
/// 24.4 / 17.4 ms (two passes of a busy call, ratio to ONNX Runtime 1.32 / 1.11) with the
/// general grid against 55.0 / 20.6 ms (2.44 / 1.34) with one task a thread.
const ROWS_ONLY_MAX_THREADS: usize = 8;

/// The task grid of the whole-K parallel driver (`driver::gemm_whole_k`). A task reads its
/// rows of A and its columns of B over the whole of K, so a grid of `r × c` tasks reads A `c`
/// times and B `r` times. The general grid ([`task_grid`], about three tasks a thread) splits
/// the columns too. Below [`ROWS_ONLY_MAX_THREADS`] threads, splitting only the rows, into a
/// multiple of `threads` tasks of at most [`MC`] rows, is taken instead when it reads less in
/// all (each thread then streams its own part of the weights once, and B once), when its
/// critical path (waves of `threads` equally fast tasks) is at least an eighth shorter, or
/// when it is shorter at all for at most an eighth more reads (ResNet-50's 512→2048 1×1
/// layers at 7²: 16 tasks of 128 rows, 8 waves, against the general grid's 11 blocks of 192
/// rows in 6 waves, one thread idle for the last; the rows-only tasks read the 49 columns of
/// B 16 times instead of 11). The rows-only blocks are as even as a few more of them make
/// them ([`balanced_rows`]), and a general grid that splits only the rows takes them too
/// (the MatMul 1024³ on 2 threads: 8 blocks of 128 rows instead of 6 of 176).
/// Measured at 2 threads with `bench/compare_ort.py`, four runs of each library (paired ratio
/// to ONNX Runtime, general grid → this): ResNet-50 1.58–1.64 → 1.54–1.57, BERT 1.13–1.18 →
/// 1.12–1.14; MobileNetV2 within the noise (1.33–1.47 → 1.34–1.53).
pub(super) fn whole_k_grid(
    m: usize,
    n: usize,
    (mr, nr): (usize, usize),
    threads: usize,
) -> (usize, usize) {
    let general = task_grid(m, n, mr, nr, 3 * threads);
    let (tiles, n_pad) = (m.div_ceil(mr), n.div_ceil(nr) * nr);
    let row_tasks = m.div_ceil(MC).div_ceil(threads) * threads;
    if tiles < 2 * row_tasks || threads >= ROWS_ONLY_MAX_THREADS {
        return general;
    }
    let rows_only = (balanced_rows(tiles, threads, row_tasks) * mr, n_pad);
    if general.1 >= n_pad {
        // The general grid splits only the rows too, in blocks of equal height: the balanced
        // blocks end no later.
        return rows_only;
    }
    // Rows of A and columns of B read, summed over the tasks.
    let reads = |(mb, cb): (usize, usize)| n.div_ceil(cb) * m + m.div_ceil(mb) * n_pad;
    // The critical path in register tiles: waves of `threads` tasks, each as long as a whole
    // task.
    let span = |(mb, cb): (usize, usize)| {
        let tasks = m.div_ceil(mb) * n.div_ceil(cb);
        tasks.div_ceil(threads) * (mb / mr) * cb.div_ceil(nr)
    };
    let (reads_r, reads_g, span_r, span_g) = (
        reads(rows_only),
        reads(general),
        span(rows_only),
        span(general),
    );
    if reads_r <= reads_g
        || 8 * span_r <= 7 * span_g
        || (span_r < span_g && 8 * reads_r <= 9 * reads_g)
    {
        rows_only
    } else {
        general
    }
}

/// Register tiles per row block when `tiles` rows of tiles are split into about `fewest` (a
/// multiple of `threads`) or a few more blocks: the height whose waves of `threads` equally
/// fast tasks end soonest, the fewest blocks among equals (each block reads all of B; more
/// blocks are never taller than `fewest` of them, so they keep [`MC`]'s bound). Blocks
/// of equal height only divide the rows evenly by chance: 128 rows of tiles (a 1024-row
/// MatMul) in 6 blocks are 22 tiles high, and the thread with three of them does 66 against
/// the other's 62, where 8 blocks of 16 split them 64 / 64.
pub(super) fn balanced_rows(tiles: usize, threads: usize, fewest: usize) -> usize {
    let span = |h: usize| tiles.div_ceil(h).div_ceil(threads) * h;
    (fewest..=fewest + 2 * threads)
        .step_by(threads)
        .map(|blocks| tiles.div_ceil(blocks))
        .min_by_key(|&h| (span(h), tiles.div_ceil(h)))
        .unwrap_or(1)
}

/// C as the driver writes it.
pub(super) enum COut<'a, 'c> {
    /// Row-major, its rows `ldc` apart (the second field).
    Flat(&'a mut [f32], usize),
    /// Row `i` is `rows[i][col0..col0 + n]`: C whose rows lie between other threads' (each
    /// thread's rows of every plane of a convolution's output). Computed serially; `ld` is
    /// how far apart the rows lie in memory, for the choice of loop order.
    Rows {
        rows: &'a mut [&'c mut [f32]],
        col0: usize,
        ld: usize,
    },
}

impl COut<'_, '_> {
    /// How far apart C's rows lie in memory; panics unless C holds `m` rows of `n` floats.
    pub(super) fn check(&self, m: usize, n: usize) -> usize {
        match self {
            COut::Flat(c, ldc) => {
                let ldc = *ldc;
                assert!(ldc >= n, "gemm: ldc {ldc} < n {n}");
                let need = (m - 1) * ldc + n;
                assert!(
                    c.len() >= need,
                    "gemm: C has {} elements, needs {need}",
                    c.len()
                );
                ldc
            }
            COut::Rows { rows, col0, ld } => {
                assert!(
                    rows.len() >= m && rows.iter().take(m).all(|r| r.len() >= col0 + n),
                    "gemm: C's rows are too few or too short"
                );
                *ld
            }
        }
    }
}

/// One parallel unit: rows `i0..i0+rows.len()` × columns `j0..j0+width` of the current C block,
/// with the matching pieces of the epilogue's residual (empty when it has none). The row pieces
/// live on the stack of the code that splits the grid ([`for_each_task`]): no allocation.
pub(super) struct Task<'t, 'c> {
    pub(super) i0: usize,
    pub(super) j0: usize,
    pub(super) rows: &'t mut [&'c mut [f32]],
    pub(super) residual: &'t [&'t [f32]],
}

/// The most rows a task has: a grid's row blocks are at most [`MC`] rows (see [`task_grid`]).
pub(super) const TASK_ROWS: usize = MC;

/// The task grid of one parallel region over C: its `m` rows (from row `rows0` of the whole
/// product on) and the columns `cols`, cut into row blocks × column chunks of
/// `block = (mb, cb)`, run in parallel when `par`.
pub(super) struct Grid {
    pub(super) m: usize,
    pub(super) rows0: usize,
    pub(super) cols: std::ops::Range<usize>,
    pub(super) block: (usize, usize),
    pub(super) par: bool,
}

impl Grid {
    /// The row block height and the number of row blocks; panics on a grid with empty blocks
    /// or blocks taller than a task holds.
    fn row_blocks(&self) -> (usize, usize) {
        let (mb, cb) = self.block;
        assert!((1..=TASK_ROWS).contains(&mb) && cb > 0, "gemm: task grid");
        (mb, self.m.div_ceil(mb))
    }
}

/// Runs `f` on every task of `grid` over C (leading dimension `ldc`), with the matching pieces
/// of `residual` (a matrix of C's shape with its own leading dimension) when it is given. Row
/// blocks are contiguous slices of C; each block's row pieces are gathered on the stack and
/// split between column chunks by halving (see [`split_columns`]).
pub(super) fn for_each_task<F>(
    c: &mut [f32],
    ldc: usize,
    residual: Option<(&[f32], usize)>,
    grid: &Grid,
    f: &F,
) where
    F: Fn(&mut Task) + Sync,
{
    let (mb, nrb) = grid.row_blocks();
    let block = |(b, block): (usize, &mut [f32])| {
        let cols = grid.cols.clone();
        let rows = block.chunks_mut(ldc).map(|row| &mut row[cols.clone()]);
        run_block(b, rows, residual, grid, f);
    };
    if grid.par {
        c.par_chunks_mut(mb * ldc)
            .take(nrb)
            .enumerate()
            .for_each(block);
    } else {
        c.chunks_mut(mb * ldc).take(nrb).enumerate().for_each(block);
    }
}

/// [`for_each_task`] (serially) over C given as row slices: row `i` of C is
/// `c[i][col0 + j]` for the grid's columns `j`.
pub(super) fn for_each_task_in_rows<F>(
    c: &mut [&mut [f32]],
    col0: usize,
    residual: Option<(&[f32], usize)>,
    grid: &Grid,
    f: &F,
) where
    F: Fn(&mut Task) + Sync,
{
    assert!(!grid.par, "gemm: C given as rows is computed serially");
    let (mb, nrb) = grid.row_blocks();
    let cols = col0 + grid.cols.start..col0 + grid.cols.end;
    for (b, block) in c.chunks_mut(mb).take(nrb).enumerate() {
        let rows = block.iter_mut().map(|row| &mut row[cols.clone()]);
        run_block(b, rows, residual, grid, f);
    }
}

/// Runs `f` on the tasks of row block `b` of `grid`, whose rows' pieces (the grid's columns)
/// `rows` yields, with the matching pieces of `residual`.
fn run_block<'c, F>(
    b: usize,
    rows: impl Iterator<Item = &'c mut [f32]>,
    residual: Option<(&[f32], usize)>,
    grid: &Grid,
    f: &F,
) where
    F: Fn(&mut Task) + Sync,
{
    let (mb, cb) = grid.block;
    let n_rows = mb.min(grid.m - b * mb);
    let i0 = grid.rows0 + b * mb;
    let mut pieces: [&mut [f32]; TASK_ROWS] = std::array::from_fn(|_| Default::default());
    for (piece, row) in pieces.iter_mut().zip(rows).take(n_rows) {
        *piece = row;
    }
    let mut z: [&[f32]; TASK_ROWS] = [&[]; TASK_ROWS];
    let z = match residual {
        Some((r, ld)) => {
            for (i, piece) in z.iter_mut().enumerate().take(n_rows) {
                *piece = &r[(i0 + i) * ld..][grid.cols.clone()];
            }
            &z[..n_rows]
        }
        None => &z[..0],
    };
    split_columns(&mut pieces[..n_rows], z, (i0, 0), cb, grid.par, f);
}

/// Runs `f` on the tasks of one row block: `rows` (and `residual`, empty or one piece per row)
/// start at row `i0` and column `j0` of the grid, and are cut into chunks of `cb` columns by
/// halving, the halves run in parallel when `par`.
fn split_columns<F>(
    rows: &mut [&mut [f32]],
    residual: &[&[f32]],
    (i0, j0): (usize, usize),
    cb: usize,
    par: bool,
    f: &F,
) where
    F: Fn(&mut Task) + Sync,
{
    let width = rows.first().map_or(0, |r| r.len());
    if width <= cb {
        f(&mut Task {
            i0,
            j0,
            rows,
            residual,
        });
        return;
    }
    let mid = width.div_ceil(cb) / 2 * cb;
    let mut right: [&mut [f32]; TASK_ROWS] = std::array::from_fn(|_| Default::default());
    let right = &mut right[..rows.len()];
    for (left, right) in rows.iter_mut().zip(right.iter_mut()) {
        let (l, r) = std::mem::take(left).split_at_mut(mid);
        (*left, *right) = (l, r);
    }
    let mut z: [&[f32]; TASK_ROWS] = [&[]; TASK_ROWS];
    for (piece, r) in z.iter_mut().zip(residual) {
        *piece = &r[mid..];
    }
    let z = &z[..residual.len()];
    if par {
        rayon::join(
            || split_columns(rows, residual, (i0, j0), cb, par, f),
            || split_columns(right, z, (i0, j0 + mid), cb, par, f),
        );
    } else {
        split_columns(rows, residual, (i0, j0), cb, par, f);
        split_columns(right, z, (i0, j0 + mid), cb, par, f);
    }
}
