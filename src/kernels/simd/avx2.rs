//! AVX2+FMA kernels: the GEMM micro-kernel (an `M×16` register tile, `M ≤ 6`, two ymm
//! accumulators per row), the FMA peak probe and the A-panel interleave.

use std::arch::x86_64::*;

use super::RawTail;

/// Packed A micro-panel row count (k-major stride of A).
const MR: usize = 6;
/// Packed B micro-panel width (k-major stride of B).
const NR: usize = 16;

/// Write-back state shared by the tiles of one column of C: lane masks, alpha and beta, the
/// column bias and the clamp bounds.
struct Store {
    m0: __m256i,
    m1: __m256i,
    full: bool,
    va: __m256,
    vb: __m256,
    beta: f32,
    col_bias: Option<(__m256, __m256)>,
    clamp: Option<(__m256, __m256)>,
}

/// The [`Store`] of a column `nr` wide (`1 ≤ nr ≤ 16`).
///
/// # Safety
/// The CPU supports AVX2; `tail.col_bias` is null or readable for `nr` floats.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn store_setup(nr: usize, alpha: f32, beta: f32, tail: &RawTail) -> Store {
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let n = nr as i32;
    let m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lanes);
    let m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), lanes);
    // SAFETY: a non-null column bias holds `nr` floats (contract); the masks select exactly
    // lanes `0..nr`, and masked-off lanes are not accessed.
    let col_bias = (!tail.col_bias.is_null()).then(|| unsafe {
        (
            _mm256_maskload_ps(tail.col_bias, m0),
            _mm256_maskload_ps(tail.col_bias.wrapping_add(8), m1),
        )
    });
    Store {
        m0,
        m1,
        full: nr == NR,
        va: _mm256_set1_ps(alpha),
        vb: _mm256_set1_ps(beta),
        beta,
        col_bias,
        clamp: tail
            .clamp
            .map(|(lo, hi)| (_mm256_set1_ps(lo), _mm256_set1_ps(hi))),
    }
}

/// One `M×16` tile: accumulates over `kc`, then stores
/// `clamp(alpha·acc + beta·C + row_bias + col_bias)` through `s`; meanwhile prefetches
/// the `kc` A columns from `pf` on (the next micro-panel: any address, only prefetched) and,
/// when `PB`, the `kc` B rows from `pfb` on (`ldb` apart: the next column's micro-panel of a B
/// read in place, or of a packed B when `ldb = 16`).
///
/// # Safety
/// - The CPU supports AVX2 and FMA.
/// - `a` is readable for `kc * 6` floats, `b` for 16 floats from each `k * ldb`, `k < kc`.
/// - `c[r]` for `r < M` has the tile's `nr` floats from `col` on (`c[r].len() ≥ col + nr`;
///   the rows are distinct `&mut` slices, so disjoint from each other and from `a`/`b`).
/// - `row_bias` is null or readable for `M` floats; `res` is null or points to `M` row slices,
///   each with the tile's `nr` floats from `col` on.
/// - `pf` and `pfb` are only prefetched (a hint that never faults), never read.
#[target_feature(enable = "avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<const M: usize, const PB: bool>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: &mut [&mut [f32]],
    col: usize,
    row_bias: *const f32,
    res: *const &[f32],
    s: &Store,
    (pf, pfb): (*const f32, *const f32),
) {
    let mut acc0 = [_mm256_setzero_ps(); M];
    let mut acc1 = [_mm256_setzero_ps(); M];
    // One step of k: row k of the B panel times column k of the A micro-panel.
    let mut step = |k: usize| {
        // SAFETY: k < kc, so `b + k*ldb .. +16` and `a + k*6 .. +6` are inside the panels.
        unsafe {
            let bp = b.add(k * ldb);
            let ap = a.add(k * MR);
            let b0 = _mm256_loadu_ps(bp);
            let b1 = _mm256_loadu_ps(bp.add(8));
            for i in 0..M {
                let ai = _mm256_broadcast_ss(&*ap.add(i));
                acc0[i] = _mm256_fmadd_ps(ai, b0, acc0[i]);
                acc1[i] = _mm256_fmadd_ps(ai, b1, acc1[i]);
            }
        }
    };
    // Two steps per iteration and one prefetch of the next A micro-panel at the same depth
    // (48 bytes a line of 64 apart: no line skipped), as in the AVX-512 tile.
    for k in (0..kc & !1).step_by(2) {
        _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(k * MR) as *const i8);
        if M == 1 && ldb == NR {
            // As in the AVX-512 tile: a one-row tile streams its packed B, two lines of these
            // two steps fetched `super::VECTOR_AHEAD` floats ahead.
            let q = b.wrapping_add(k * NR + super::VECTOR_AHEAD);
            _mm_prefetch::<_MM_HINT_T0>(q as *const i8);
            _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(NR) as *const i8);
        }
        if PB {
            // The next column's B rows k and k + 1 (16 floats each: a line, or two when
            // unaligned).
            for q in [pfb.wrapping_add(k * ldb), pfb.wrapping_add((k + 1) * ldb)] {
                // A packed micro-panel (`ldb = 16`, see `TileTail::next_b`) into L2.
                if ldb == 16 {
                    _mm_prefetch::<_MM_HINT_T1>(q as *const i8);
                } else {
                    _mm_prefetch::<_MM_HINT_T0>(q as *const i8);
                    _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(15) as *const i8);
                }
            }
        }
        step(k);
        step(k + 1);
    }
    if kc % 2 == 1 {
        step(kc - 1);
    }
    for i in 0..M {
        let p0 = c[i].as_mut_ptr().wrapping_add(col);
        // Masked-off lanes are neither read nor written (vmaskmov does not fault on them), so
        // `p1` may point past the row when nr ≤ 8; `wrapping_add` keeps the arithmetic defined.
        let p1 = p0.wrapping_add(8);
        let mut r0 = _mm256_mul_ps(acc0[i], s.va);
        let mut r1 = _mm256_mul_ps(acc1[i], s.va);
        if s.beta != 0.0 {
            // SAFETY: for a full tile all 16 floats of c[i] are valid; otherwise only the lanes
            // selected by m0/m1, which are exactly c[i][0..nr], are read.
            let (c0, c1) = unsafe {
                if s.full {
                    (_mm256_loadu_ps(p0), _mm256_loadu_ps(p1))
                } else {
                    (_mm256_maskload_ps(p0, s.m0), _mm256_maskload_ps(p1, s.m1))
                }
            };
            r0 = _mm256_fmadd_ps(c0, s.vb, r0);
            r1 = _mm256_fmadd_ps(c1, s.vb, r1);
        }
        if !row_bias.is_null() {
            // SAFETY: a non-null row bias holds M floats (contract).
            let v = _mm256_set1_ps(unsafe { *row_bias.add(i) });
            r0 = _mm256_add_ps(r0, v);
            r1 = _mm256_add_ps(r1, v);
        }
        if let Some((b0, b1)) = s.col_bias {
            r0 = _mm256_add_ps(r0, b0);
            r1 = _mm256_add_ps(r1, b1);
        }
        if !res.is_null() {
            // SAFETY: a non-null `res` holds M row pointers, each readable for the tile's `nr`
            // floats (contract): all 16 for a full tile, else the lanes m0/m1 select.
            unsafe {
                let q0 = (*res.add(i)).as_ptr().wrapping_add(col);
                let q1 = q0.wrapping_add(8);
                let (z0, z1) = if s.full {
                    (_mm256_loadu_ps(q0), _mm256_loadu_ps(q1))
                } else {
                    (_mm256_maskload_ps(q0, s.m0), _mm256_maskload_ps(q1, s.m1))
                };
                r0 = _mm256_add_ps(r0, z0);
                r1 = _mm256_add_ps(r1, z1);
            }
        }
        if let Some((lo, hi)) = s.clamp {
            // max(lo, x) and min(hi, x) return x when it is NaN (the second operand), like the
            // scalar clamp.
            r0 = _mm256_min_ps(hi, _mm256_max_ps(lo, r0));
            r1 = _mm256_min_ps(hi, _mm256_max_ps(lo, r1));
        }
        // SAFETY: as for the loads above, for writes.
        unsafe {
            if s.full {
                _mm256_storeu_ps(p0, r0);
                _mm256_storeu_ps(p1, r1);
            } else {
                _mm256_maskstore_ps(p0, s.m0, r0);
                _mm256_maskstore_ps(p1, s.m1, r1);
            }
        }
    }
}

/// One column of C, `nr` wide, over `c.len()` rows: the `⌈rows/6⌉` A micro-panels in `a`
/// (`kc·6` floats each, consecutive) times the B micro-panel `b`, each tile stored as
/// `clamp(alpha·A·B + beta·C + biases + residual)` with the biases, residual and clamp of
/// `tail`. One call per column keeps the per-tile work to the accumulation and the store.
///
/// # Safety
/// - The CPU supports AVX2 and FMA.
/// - `a` is readable for `⌈c.len()/6⌉ · kc · 6` floats, `b` for 16 floats from each `k · ldb`,
///   `k < kc` (a packed micro-panel has `ldb = 16`).
/// - Every `c[r]` has `nr` floats from `col` on (`1 ≤ nr ≤ 16`, `c[r].len() ≥ col + nr`).
/// - `tail.row_bias` is null or readable for `c.len()` floats; `tail.col_bias` null or
///   readable for `nr` floats; `tail.residual` null or pointing to `c.len()` row slices,
///   each with `nr` floats from `col` on.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn kernel_column(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    c: &mut [&mut [f32]],
    col: usize,
    nr: usize,
    alpha: f32,
    beta: f32,
    tail: &RawTail,
) {
    // SAFETY: forwarded contract.
    let s = unsafe { store_setup(nr, alpha, beta, tail) };
    for (p, rows) in c.chunks_mut(MR).enumerate() {
        let ap = a.wrapping_add(p * kc * MR);
        // The next A micro-panel, prefetched by this tile.
        let pf = ap.wrapping_add(kc * MR);
        let rb = if tail.row_bias.is_null() {
            tail.row_bias
        } else {
            tail.row_bias.wrapping_add(p * MR)
        };
        let res = if tail.residual.is_null() {
            tail.residual
        } else {
            tail.residual.wrapping_add(p * MR)
        };
        // The first tile of the column also prefetches the next column's B micro-panel.
        let pfb = if p == 0 {
            tail.next_b
        } else {
            std::ptr::null()
        };
        let pfs = (pf, pfb);
        macro_rules! go {
            ($pb:literal) => {
                match rows.len() {
                    1 => tile::<1, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                    2 => tile::<2, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                    3 => tile::<3, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                    4 => tile::<4, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                    5 => tile::<5, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                    _ => tile::<6, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                }
            };
        }
        // SAFETY: panel `p` of `a` and rows `6p ..` of `c`, of the row bias and of the residual
        // are in range (contract); `rows.len()` is the tile height.
        unsafe {
            if pfb.is_null() {
                go!(false)
            } else {
                go!(true)
            }
        }
    }
}

/// One row of C's tiles, `1 ≤ c.len() ≤ 6` rows: the A micro-panel `a` times `panels` B
/// micro-panels 16 wide, panel `q` from `b + q·step` (row `k` at `+ k·ldb`), each tile stored
/// at columns `col + 16q ..` as in [`kernel_column`]; `tail.col_bias`, when not null, holds
/// the biases of all `16·panels` columns.
///
/// # Safety
/// - The CPU supports AVX2 and FMA.
/// - `a` is readable for `kc * 6` floats, `b` for 16 floats from each `q·step + k·ldb`,
///   `q < panels`, `k < kc`.
/// - Every `c[r]` has `16·panels` floats from `col` on.
/// - `tail.row_bias` is null or readable for `c.len()` floats; `tail.col_bias` null or
///   readable for `16·panels` floats; `tail.residual` null or pointing to `c.len()` row
///   slices, each with `16·panels` floats from `col` on.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn kernel_row(
    kc: usize,
    a: *const f32,
    (b, ldb, step): (*const f32, usize, usize),
    panels: usize,
    c: &mut [&mut [f32]],
    col: usize,
    alpha: f32,
    beta: f32,
    tail: &RawTail,
) {
    // Each tile prefetches the next row's A micro-panel (from the outer caches once, then
    // from L1).
    let pfs = (a.wrapping_add(kc * MR), std::ptr::null());
    for q in 0..panels {
        let t = RawTail {
            col_bias: if tail.col_bias.is_null() {
                tail.col_bias
            } else {
                tail.col_bias.wrapping_add(16 * q)
            },
            ..*tail
        };
        // SAFETY: forwarded contract, for the 16 columns of panel `q`.
        let s = unsafe { store_setup(16, alpha, beta, &t) };
        let (bq, cq, rb, res) = (
            b.wrapping_add(q * step),
            col + 16 * q,
            t.row_bias,
            t.residual,
        );
        // SAFETY: panel `q` of `b` and columns `cq .. cq + 16` of every row, of the column
        // bias and of the residual rows are in range (contract); `c.len()` is the tile height.
        unsafe {
            match c.len() {
                1 => tile::<1, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
                2 => tile::<2, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
                3 => tile::<3, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
                4 => tile::<4, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
                5 => tile::<5, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
                _ => tile::<6, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
            }
        }
    }
}

/// The edge columns of a column of C: one packed A micro-panel (`M` rows, k-major: 6 for
/// AVX2's tiles) times the `n` columns of B from `b` on (`1 ≤ n ≤ 8`), as
/// `acc[j][r] = Σ_k a[k·M + r] · b[k·ldb + j]` for `r < M` (columns past `n` are zero, lanes
/// past `M` unspecified). Each column takes one 8-lane FMA per k on a column of A with B's
/// value broadcast, where a tile spends a whole (AVX2: twelve FMAs a k) or half (AVX-512) tile
/// whatever its width: a 7×7 image's 49 columns took the work of 64 (AVX-512, `kernel_bench`,
/// 1 thread: a 512-channel 3×3 layer at 7² ran at 79 GFLOP/s and at 8², with no edge, at 104).
///
/// # Safety
/// The CPU supports AVX2 and FMA; `M` is at most 8; `a` is readable for `kc·M` floats and `b` for
/// `n` floats from each `k·ldb`, `k < kc`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn edge_columns<const M: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    n: usize,
) -> [[f32; 8]; 8] {
    let mut out = [[0.0f32; 8]; 8];
    // Few columns take several partial sums over k each, so that enough FMA chains run at
    // once (eight for one column: two FMA pipes of four cycles' latency), at most 12
    // accumulators, in the 16 registers 8-lane code can name.
    macro_rules! go {
        ($n:literal, $u:literal) => {{
            // SAFETY: forwarded contract, `n` columns.
            let acc = unsafe { edge_dot::<M, $n, $u>(kc, a, b, ldb) };
            out[..$n].copy_from_slice(&acc);
        }};
    }
    match n {
        1 => go!(1, 8),
        2 => go!(2, 4),
        3 => go!(3, 4),
        4 => go!(4, 2),
        5 => go!(5, 2),
        6 => go!(6, 2),
        7 => go!(7, 1),
        _ => go!(8, 1),
    }
    out
}

/// Widest edge AVX2's tiles leave to [`edge_columns`] (wider ones take a whole tile).
pub(super) const EDGE_MAX: usize = 6;

/// [`edge_columns`] for `N` columns with `U` partial sums per column (k taken `U` at a time).
///
/// # Safety
/// As [`edge_columns`], with `n = N`.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn edge_dot<const M: usize, const N: usize, const U: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
) -> [[f32; 8]; N] {
    let mut acc = [[_mm256_setzero_ps(); N]; U];
    // Narrower panels load the last k's column masked to its `M` rows (the others read floats
    // of the next k's column into lanes that are never used).
    let rows = _mm256_cmpgt_epi32(
        _mm256_set1_epi32(M as i32),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    );
    // One step of k into the partial sums `u`.
    let mut step = |k: usize, u: usize| {
        // SAFETY: k < kc, so `b + k·ldb .. +N` is inside, and so is the A column `a + k·M ..
        // +8` when M = 8 or k + 1 < kc (else its `M` rows, masked; masked-off lanes are not
        // accessed) (contract).
        unsafe {
            let p = a.add(k * M);
            let av = if M == 8 || k + 1 < kc {
                _mm256_loadu_ps(p)
            } else {
                _mm256_maskload_ps(p, rows)
            };
            for (j, sum) in acc[u].iter_mut().enumerate() {
                let bv = _mm256_set1_ps(*b.add(k * ldb + j));
                *sum = _mm256_fmadd_ps(av, bv, *sum);
            }
        }
    };
    let whole = kc - kc % U;
    for k in (0..whole).step_by(U) {
        for u in 0..U {
            step(k + u, u);
        }
    }
    for k in whole..kc {
        step(k, 0);
    }
    let mut out = [[0.0f32; 8]; N];
    for (j, o) in out.iter_mut().enumerate() {
        let mut sum = acc[0][j];
        for part in &acc[1..] {
            sum = _mm256_add_ps(sum, part[j]);
        }
        // SAFETY: `o` holds 8 floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), sum) };
    }
    out
}

/// `iters` steps of 12 independent FMA chains `acc = acc·a + b` (8 lanes each, from zero; 12
/// so that they and the two operands fit in the 16 registers), the sum of all their lanes:
/// the FMA units' throughput, for [`super::fma_chains`].
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn fma_chains(iters: usize, a: f32, b: f32) -> f32 {
    let (va, vb) = (_mm256_set1_ps(a), _mm256_set1_ps(b));
    let mut acc = [_mm256_setzero_ps(); 12];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm256_fmadd_ps(*x, va, vb);
        }
    }
    let sum = acc
        .iter()
        .fold(_mm256_setzero_ps(), |s, &x| _mm256_add_ps(s, x));
    let mut lanes = [0.0f32; 8];
    // SAFETY: `lanes` holds the 8 floats stored.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
    lanes.iter().sum()
}

/// Interleaves eight rows of `kc` floats k-major into `dst`, `stride` floats per k:
/// `dst[stride·k + r] = rows[r][k]` (rows `0..8` of an A micro-panel of `stride` rows, or
/// eight of them from `dst`'s start), eight columns at a time by an 8×8 transpose in
/// registers.
///
/// # Safety
/// - The CPU supports AVX2.
/// - Every `rows[r]` is readable for `kc` floats; `dst` is writable for `stride·(kc − 1) + 8`
///   floats when `kc > 0`, `stride ≥ 8`, and does not overlap the rows.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn interleave_rows8(
    rows: &[*const f32; 8],
    kc: usize,
    dst: *mut f32,
    stride: usize,
) {
    let mut k = 0;
    while k + 8 <= kc {
        // SAFETY: columns `k..k + 8` of every row and floats `stride·k ..` of `dst`, 8 at each
        // of the eight steps of k, are in range (`k + 8 ≤ kc`, contract).
        unsafe {
            let r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(rows[i].add(k)));
            // Pairs of rows interleaved: per 128-bit lane, `a0 b0 a1 b1` and `a2 b2 a3 b3`.
            let t0 = _mm256_unpacklo_ps(r[0], r[1]);
            let t1 = _mm256_unpackhi_ps(r[0], r[1]);
            let t2 = _mm256_unpacklo_ps(r[2], r[3]);
            let t3 = _mm256_unpackhi_ps(r[2], r[3]);
            let t4 = _mm256_unpacklo_ps(r[4], r[5]);
            let t5 = _mm256_unpackhi_ps(r[4], r[5]);
            let t6 = _mm256_unpacklo_ps(r[6], r[7]);
            let t7 = _mm256_unpackhi_ps(r[6], r[7]);
            // Four rows per column: per lane, column j (low lane) and j + 4 (high lane).
            let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            let d = dst.add(stride * k);
            _mm256_storeu_ps(d, _mm256_permute2f128_ps::<0x20>(s0, s4));
            _mm256_storeu_ps(d.add(stride), _mm256_permute2f128_ps::<0x20>(s1, s5));
            _mm256_storeu_ps(d.add(2 * stride), _mm256_permute2f128_ps::<0x20>(s2, s6));
            _mm256_storeu_ps(d.add(3 * stride), _mm256_permute2f128_ps::<0x20>(s3, s7));
            _mm256_storeu_ps(d.add(4 * stride), _mm256_permute2f128_ps::<0x31>(s0, s4));
            _mm256_storeu_ps(d.add(5 * stride), _mm256_permute2f128_ps::<0x31>(s1, s5));
            _mm256_storeu_ps(d.add(6 * stride), _mm256_permute2f128_ps::<0x31>(s2, s6));
            _mm256_storeu_ps(d.add(7 * stride), _mm256_permute2f128_ps::<0x31>(s3, s7));
        }
        k += 8;
    }
    for k in k..kc {
        for (r, &row) in rows.iter().enumerate() {
            // SAFETY: `k < kc`, so both accesses are in range (contract).
            unsafe { *dst.add(stride * k + r) = *row.add(k) };
        }
    }
}

/// [`interleave_rows8`] for four rows: `dst[stride·k + r] = rows[r][k]`, four columns at a
/// time by a 4×4 transpose.
///
/// # Safety
/// - The CPU supports AVX2.
/// - Every `rows[r]` is readable for `kc` floats; `dst` is writable for `stride·(kc − 1) + 4`
///   floats when `kc > 0`, `stride ≥ 4`, and does not overlap the rows.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn interleave_rows4(
    rows: &[*const f32; 4],
    kc: usize,
    dst: *mut f32,
    stride: usize,
) {
    let mut k = 0;
    while k + 4 <= kc {
        // SAFETY: columns `k..k + 4` of every row and floats `stride·k ..`, 4 at each of the
        // four steps of k, of `dst` are in range (`k + 4 ≤ kc`, contract).
        unsafe {
            let r: [__m128; 4] = std::array::from_fn(|i| _mm_loadu_ps(rows[i].add(k)));
            let t0 = _mm_unpacklo_ps(r[0], r[1]);
            let t1 = _mm_unpacklo_ps(r[2], r[3]);
            let t2 = _mm_unpackhi_ps(r[0], r[1]);
            let t3 = _mm_unpackhi_ps(r[2], r[3]);
            let d = dst.add(stride * k);
            _mm_storeu_ps(d, _mm_movelh_ps(t0, t1));
            _mm_storeu_ps(d.add(stride), _mm_movehl_ps(t1, t0));
            _mm_storeu_ps(d.add(2 * stride), _mm_movelh_ps(t2, t3));
            _mm_storeu_ps(d.add(3 * stride), _mm_movehl_ps(t3, t2));
        }
        k += 4;
    }
    for k in k..kc {
        for (r, &row) in rows.iter().enumerate() {
            // SAFETY: `k < kc`, so both accesses are in range (contract).
            unsafe { *dst.add(stride * k + r) = *row.add(k) };
        }
    }
}
