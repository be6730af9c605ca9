//! The task grids of the parallel GEMM: how C is cut into row blocks × column chunks.
#![forbid(unsafe_code)]

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
/// all (each thread then streams its own part of the weights once, and B once), or when its
/// critical path (waves of `threads` equally fast tasks) is at least an eighth shorter.
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
    // Rows of A and columns of B read, summed over the tasks.
    let reads = |(mb, cb): (usize, usize)| n.div_ceil(cb) * m + m.div_ceil(mb) * n_pad;
    // The critical path in register tiles: waves of `threads` tasks, each as long as a whole
    // task.
    let span = |(mb, cb): (usize, usize)| {
        let tasks = m.div_ceil(mb) * n.div_ceil(cb);
        tasks.div_ceil(threads) * (mb / mr) * cb.div_ceil(nr)
    };
    let rows_only = (tiles.div_ceil(row_tasks) * mr, n_pad);
    if reads(rows_only) <= reads(general) || 8 * span(rows_only) <= 7 * span(general) {
        rows_only
    } else {
        general
    }
}
