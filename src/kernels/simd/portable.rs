//! Portable (plain Rust) GEMM micro-kernel, auto-vectorised for the baseline target.
#![forbid(unsafe_code)]

/// Register tile height.
pub(crate) const MR: usize = 4;
/// Register tile width.
pub(crate) const NR: usize = 8;

/// Portable micro-kernel; see [`super::micro_column`] for the contract (already checked there).
#[allow(clippy::too_many_arguments)]
pub(crate) fn kernel(
    kc: usize,
    a: &[f32],
    b: &[f32],
    ldb: usize,
    rows: &mut [&mut [f32]],
    col: usize,
    nr_eff: usize,
    alpha: f32,
    beta: f32,
) {
    let mut acc = [[0.0f32; NR]; MR];
    for (k, av) in a.chunks_exact(MR).take(kc).enumerate() {
        let bv = &b[k * ldb..k * ldb + NR];
        for (acc_row, &ai) in acc.iter_mut().zip(av) {
            for (c, &bj) in acc_row.iter_mut().zip(bv) {
                *c += ai * bj;
            }
        }
    }
    for (row, acc_row) in rows.iter_mut().zip(acc.iter()) {
        let dst = &mut row[col..col + nr_eff];
        if beta == 0.0 {
            for (d, &s) in dst.iter_mut().zip(acc_row) {
                *d = alpha * s;
            }
        } else {
            for (d, &s) in dst.iter_mut().zip(acc_row) {
                *d = alpha * s + beta * *d;
            }
        }
    }
}
