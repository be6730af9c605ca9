//! AVX-512F kernels: the GEMM micro-kernel (an `M×32` register tile, `M ≤ 8`, two zmm
//! accumulators per row, biases, residual and clamp applied in registers) and the
//! depthwise-convolution plane kernel.
#![allow(clippy::incompatible_msrv)] // AVX-512 intrinsics are stable since Rust 1.89.

use std::arch::x86_64::*;

use super::{DwPlane, RawTail, DW_MAX_KW};

/// Packed A micro-panel row count (k-major stride of A).
const MR: usize = 8;

/// Write-back state shared by the tiles of one column of C: lane masks, alpha and beta, the
/// column bias and the clamp bounds.
struct Store {
    m0: __mmask16,
    m1: __mmask16,
    va: __m512,
    vb: __m512,
    beta: f32,
    col_bias: Option<(__m512, __m512)>,
    clamp: Option<(__m512, __m512)>,
}

/// The [`Store`] of a column `nr` wide (`1 ≤ nr ≤ 32`).
///
/// # Safety
/// The CPU supports AVX-512F; `tail.col_bias` is null or readable for `nr` floats.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store_setup(nr: usize, alpha: f32, beta: f32, tail: &RawTail) -> Store {
    let m0: __mmask16 = if nr >= 16 { 0xFFFF } else { (1u16 << nr) - 1 };
    let m1: __mmask16 = if nr >= 32 {
        0xFFFF
    } else if nr > 16 {
        (1u16 << (nr - 16)) - 1
    } else {
        0
    };
    // SAFETY: a non-null column bias holds `nr` floats (contract); the masks select exactly
    // lanes `0..nr`, and masked-off lanes are not accessed.
    let col_bias = (!tail.col_bias.is_null()).then(|| unsafe {
        (
            _mm512_maskz_loadu_ps(m0, tail.col_bias),
            _mm512_maskz_loadu_ps(m1, tail.col_bias.wrapping_add(16)),
        )
    });
    Store {
        m0,
        m1,
        va: _mm512_set1_ps(alpha),
        vb: _mm512_set1_ps(beta),
        beta,
        col_bias,
        clamp: tail
            .clamp
            .map(|(lo, hi)| (_mm512_set1_ps(lo), _mm512_set1_ps(hi))),
    }
}

/// One `M×32` tile (`M×16` when `W2` is false: a column at most 16 wide, whose second half
/// is neither computed nor stored): accumulates over `kc`, then stores
/// `clamp(alpha·acc + beta·C + row_bias + col_bias + residual)` through `s`; meanwhile prefetches
/// the `kc` A columns from `pf` on (the next micro-panel: any address, only prefetched) and,
/// when `PB`, the `kc` B rows from `pfb` on (`ldb` apart: the next column's micro-panel of a B
/// read in place).
///
/// # Safety
/// - The CPU supports AVX-512F.
/// - `a` is readable for `kc * 8` floats, `b` for 32 floats from each `k * ldb`, `k < kc`.
/// - `c[r]` for `r < M` has the tile's `nr` floats from `col` on (`c[r].len() ≥ col + nr`;
///   the rows are distinct `&mut` slices, so disjoint from each other and from `a`/`b`),
///   and `W2` is false only when `nr ≤ 16`.
/// - `row_bias` is null or readable for `M` floats; `res` is null or points to `M` row slices,
///   each with the tile's `nr` floats from `col` on.
/// - `pf` and `pfb` are only prefetched (a hint that never faults), never read.
#[target_feature(enable = "avx512f")]
#[inline]
#[allow(clippy::too_many_arguments)]
unsafe fn tile<const M: usize, const W2: bool, const PB: bool>(
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
    let mut acc0 = [_mm512_setzero_ps(); M];
    let mut acc1 = [_mm512_setzero_ps(); M];
    // One step of k: row k of the B panel times column k of the A micro-panel.
    let mut step = |k: usize| {
        // SAFETY: k < kc, so `b + k*ldb .. +32` and `a + k*8 .. +8` are inside the panels.
        unsafe {
            let bp = b.add(k * ldb);
            let ap = a.add(k * MR);
            let b0 = _mm512_loadu_ps(bp);
            let b1 = if W2 { _mm512_loadu_ps(bp.add(16)) } else { b0 };
            for i in 0..M {
                let ai = _mm512_set1_ps(*ap.add(i));
                acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
                if W2 {
                    acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
                }
            }
        }
    };
    // Two steps per iteration and one prefetch of the next A micro-panel, the 64-byte line
    // its same two steps read: inside a model the weights come from memory, and their
    // stream restarted at every micro-panel (ResNet-50's 512→2048 1×1 layer with data out of
    // cache: 73 → 95 GFLOP/s).
    for k in (0..kc & !1).step_by(2) {
        _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(k * MR) as *const i8);
        if PB {
            for q in [pfb.wrapping_add(k * ldb), pfb.wrapping_add((k + 1) * ldb)] {
                _mm_prefetch::<_MM_HINT_T0>(q as *const i8);
                _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(16) as *const i8);
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
        // Masked-off lanes are neither read nor written, so `p1` may point past the row when
        // nr ≤ 16 (mask m1 is then 0); `wrapping_add` keeps the pointer arithmetic defined.
        let p1 = p0.wrapping_add(16);
        // The next column's two lines of this row, for the tile that stores there one
        // column of tiles later: hides the fetch for ownership of C's lines. A hint for
        // writing (`prefetcht0` without the `prfchw` feature), on any address: it never
        // faults, so past the end of the row it only wastes a fetch.
        _mm_prefetch::<_MM_HINT_ET0>(p0.wrapping_add(32) as *const i8);
        _mm_prefetch::<_MM_HINT_ET0>(p0.wrapping_add(48) as *const i8);
        let mut r0 = _mm512_mul_ps(acc0[i], s.va);
        let mut r1 = _mm512_mul_ps(acc1[i], s.va);
        if s.beta != 0.0 {
            // SAFETY: the lanes selected by m0/m1 are exactly c[i][0..nr], valid per the
            // contract.
            let (c0, c1) = unsafe {
                (
                    _mm512_maskz_loadu_ps(s.m0, p0),
                    _mm512_maskz_loadu_ps(s.m1, p1),
                )
            };
            r0 = _mm512_fmadd_ps(c0, s.vb, r0);
            r1 = _mm512_fmadd_ps(c1, s.vb, r1);
        }
        if !row_bias.is_null() {
            // SAFETY: a non-null row bias holds M floats (contract).
            let v = _mm512_set1_ps(unsafe { *row_bias.add(i) });
            r0 = _mm512_add_ps(r0, v);
            r1 = _mm512_add_ps(r1, v);
        }
        if let Some((b0, b1)) = s.col_bias {
            r0 = _mm512_add_ps(r0, b0);
            r1 = _mm512_add_ps(r1, b1);
        }
        if !res.is_null() {
            // SAFETY: a non-null `res` holds M row pointers, each readable for the lanes the
            // masks select (contract).
            unsafe {
                let q0 = (*res.add(i)).as_ptr().wrapping_add(col);
                r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(s.m0, q0));
                if W2 {
                    r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(s.m1, q0.wrapping_add(16)));
                }
            }
        }
        if let Some((lo, hi)) = s.clamp {
            // max(lo, x) and min(hi, x) return x when it is NaN (the second operand), like the
            // scalar clamp.
            r0 = _mm512_min_ps(hi, _mm512_max_ps(lo, r0));
            r1 = _mm512_min_ps(hi, _mm512_max_ps(lo, r1));
        }
        // SAFETY: as for the loads above, for writes.
        unsafe {
            _mm512_mask_storeu_ps(p0, s.m0, r0);
            if W2 {
                _mm512_mask_storeu_ps(p1, s.m1, r1);
            }
        }
    }
}

/// One column of C, `nr` wide, over `c.len()` rows: the `⌈rows/8⌉` A micro-panels in `a`
/// (`kc·8` floats each, consecutive) times the B micro-panel `b`, each tile stored as
/// `clamp(alpha·A·B + beta·C + biases + residual)` with the biases, residual and clamp of
/// `tail`. A column at most 16 wide computes only the first half of each tile.
///
/// # Safety
/// - The CPU supports AVX-512F.
/// - `a` is readable for `⌈c.len()/8⌉ · kc · 8` floats, `b` for 32 floats from each `k · ldb`,
///   `k < kc` (a packed micro-panel has `ldb = 32`).
/// - Every `c[r]` has `nr` floats from `col` on (`1 ≤ nr ≤ 32`, `c[r].len() ≥ col + nr`).
/// - `tail.row_bias` is null or readable for `c.len()` floats; `tail.col_bias` null or
///   readable for `nr` floats; `tail.residual` null or pointing to `c.len()` row slices,
///   each with `nr` floats from `col` on.
#[target_feature(enable = "avx512f")]
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
    let wide = nr > 16;
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
            ($w:literal, $pb:literal) => {
                match rows.len() {
                    1 => tile::<1, $w, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                    2 => tile::<2, $w, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                    3 => tile::<3, $w, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                    4 => tile::<4, $w, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                    5 => tile::<5, $w, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                    6 => tile::<6, $w, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                    7 => tile::<7, $w, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                    _ => tile::<8, $w, $pb>(kc, ap, b, ldb, rows, col, rb, res, &s, pfs),
                }
            };
        }
        // SAFETY: panel `p` of `a` and rows `8p ..` of `c`, of the row bias and of the
        // residual are in range (contract); `rows.len()` is the tile height, and the narrow
        // tile is used only when `nr ≤ 16`.
        unsafe {
            match (wide, pfb.is_null()) {
                (true, true) => go!(true, false),
                (true, false) => go!(true, true),
                (false, _) => go!(false, false),
            }
        }
    }
}

/// One row of C's tiles, `1 ≤ c.len() ≤ 8` rows: the A micro-panel `a` times `panels` B
/// micro-panels 32 wide, panel `q` from `b + q·step` (row `k` at `+ k·ldb`), each tile stored
/// at columns `col + 32q ..` as in [`kernel_column`]; `tail.col_bias`, when not null, holds
/// the biases of all `32·panels` columns.
///
/// # Safety
/// - The CPU supports AVX-512F.
/// - `a` is readable for `kc * 8` floats, `b` for 32 floats from each `q·step + k·ldb`,
///   `q < panels`, `k < kc`.
/// - Every `c[r]` has `32·panels` floats from `col` on.
/// - `tail.row_bias` is null or readable for `c.len()` floats; `tail.col_bias` null or
///   readable for `32·panels` floats; `tail.residual` null or pointing to `c.len()` row
///   slices, each with `32·panels` floats from `col` on.
#[target_feature(enable = "avx512f")]
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
                tail.col_bias.wrapping_add(32 * q)
            },
            ..*tail
        };
        // SAFETY: forwarded contract, for the 32 columns of panel `q`.
        let s = unsafe { store_setup(32, alpha, beta, &t) };
        let (bq, cq, rb, res) = (
            b.wrapping_add(q * step),
            col + 32 * q,
            t.row_bias,
            t.residual,
        );
        // SAFETY: panel `q` of `b` and columns `cq .. cq + 32` of every row, of the column
        // bias and of the residual rows are in range (contract); `c.len()` is the tile height.
        unsafe {
            match c.len() {
                1 => tile::<1, true, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
                2 => tile::<2, true, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
                3 => tile::<3, true, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
                4 => tile::<4, true, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
                5 => tile::<5, true, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
                6 => tile::<6, true, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
                7 => tile::<7, true, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
                _ => tile::<8, true, false>(kc, a, bq, ldb, c, cq, rb, res, &s, pfs),
            }
        }
    }
}

/// The edge columns of a column of C: one packed A micro-panel (`MR` rows, k-major) times the
/// `n` columns of B from `b` on (`1 ≤ n ≤ 8`), as `acc[j][r] = Σ_k a[k·MR + r] · b[k·ldb + j]`
/// (columns past `n` are zero). Each column takes one 8-lane FMA per k on a column of A with
/// B's value broadcast, where the tiles spend a 16-lane half tile: a 7×7 image's 49 columns
/// took the work of 64 (`kernel_bench`, 1 thread: a 512-channel 3×3 layer at 7² ran at 79
/// GFLOP/s and at 8², with no edge, at 104).
///
/// # Safety
/// The CPU supports AVX-512F; `a` is readable for `kc·8` floats and `b` for `n` floats from
/// each `k·ldb`, `k < kc`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn edge_columns(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    n: usize,
) -> [[f32; MR]; 8] {
    let mut out = [[0.0f32; MR]; 8];
    // Few columns take several partial sums over k each, so that enough FMA chains run at
    // once; at most 12 accumulators, in the 16 registers 8-lane code can name.
    macro_rules! go {
        ($n:literal, $u:literal) => {{
            // SAFETY: forwarded contract, `n` columns.
            let acc = unsafe { edge_dot::<$n, $u>(kc, a, b, ldb) };
            out[..$n].copy_from_slice(&acc);
        }};
    }
    match n {
        1 => go!(1, 4),
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

/// [`edge_columns`] for `N` columns with `U` partial sums per column (k taken `U` at a time).
///
/// # Safety
/// As [`edge_columns`], with `n = N`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn edge_dot<const N: usize, const U: usize>(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
) -> [[f32; MR]; N] {
    let mut acc = [[_mm256_setzero_ps(); N]; U];
    // One step of k into the partial sums `u`.
    let mut step = |k: usize, u: usize| {
        // SAFETY: k < kc, so the A column `a + k·MR .. +8` and `b + k·ldb .. +N` are inside
        // (contract).
        unsafe {
            let av = _mm256_loadu_ps(a.add(k * MR));
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
    let mut out = [[0.0f32; MR]; N];
    for (j, o) in out.iter_mut().enumerate() {
        let mut sum = acc[0][j];
        for part in &acc[1..] {
            sum = _mm256_add_ps(sum, part[j]);
        }
        // SAFETY: `o` holds MR = 8 floats.
        unsafe { _mm256_storeu_ps(o.as_mut_ptr(), sum) };
    }
    out
}

/// Lanes `i < 16` whose index `start + i` lies in `0..len`.
#[inline(always)]
fn lane_mask(start: isize, len: usize) -> __mmask16 {
    let lo = (-start).clamp(0, 16) as u32;
    let hi = (len as isize - start).clamp(0, 16) as u32;
    if hi <= lo {
        return 0;
    }
    let upto = if hi == 16 { 0xFFFF } else { (1u32 << hi) - 1 };
    (upto & !((1u32 << lo) - 1)) as __mmask16
}

/// `planes` consecutive planes of a depthwise convolution with horizontal stride `S` (1 or 2)
/// and dilation 1, plane `c` reading input plane `c` of `x`, filter `c` of `w` (`kh·kw` each)
/// and bias `c` (0 when `bias` is null):
/// `out[c][oy][ox] = bias[c] + Σ_ky Σ_kx w[c][ky][kx] · x[c][oy·sh + ky·dh − pad_top][ox·S + kx − pad_left]`,
/// positions outside the input reading as zero (padding is never materialised).
///
/// Columns are walked in groups of up to four 16-wide blocks; the load masks of a group are
/// computed once for all its rows and, when the plane is one group wide (at most 64 columns),
/// for all the planes: at 7×7 or 14×14 that setup cost as much as the arithmetic. Each block
/// has two accumulators (even and odd kernel rows), so that independent FMA chains hide the
/// FMA latency.
///
/// # Safety
/// - The CPU supports AVX-512F.
/// - `x` is valid for reads of `planes·in_h·in_w` floats, `w` of `planes·kh·kw`, `bias` (when
///   not null) of `planes`, `out` for writes of `planes·oh·ow` and does not overlap `x`;
///   `kw ≤ DW_MAX_KW`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn depthwise_planes<const S: usize>(
    g: &DwPlane,
    planes: usize,
    x: *const f32,
    w: *const f32,
    bias: *const f32,
    out: *mut f32,
) {
    let (in_len, out_len, w_len) = (g.in_h * g.in_w, g.oh * g.ow, g.kh * g.kw);
    // The 3×3 rows keep `DW_ROWS` rows of accumulators: at most two blocks wide, so that
    // they, the inputs and the weights fit in the 32 registers.
    let widest = if dw_3x3_rows::<S>(g) { 2 } else { 4 };
    // Planes at most 64 wide: each column group's setup is made once for all the planes (at
    // 56², plane by plane through both of the 3×3 rows' groups measured no faster).
    let one_group = g.ow <= 64;
    let groups_of = |c: usize| if one_group { planes - c } else { 1 };
    let mut c = 0;
    while c < planes {
        let n = groups_of(c);
        // SAFETY: planes `c .. c + n` are inside the buffers (contract).
        let (xc, wc, oc) = unsafe { (x.add(c * in_len), w.add(c * w_len), out.add(c * out_len)) };
        // (A null `bias` stays null: offsetting it would make it look like biases.)
        let bc = if bias.is_null() {
            bias
        } else {
            bias.wrapping_add(c)
        };
        let mut ox0 = 0;
        while ox0 < g.ow {
            let blocks = (g.ow - ox0).div_ceil(16).min(widest);
            let at = (xc, wc, bc, oc);
            // SAFETY: forwarded contract for planes `c .. c + n`; the blocks written lie in
            // columns `ox0..ow`.
            unsafe {
                match blocks {
                    1 => depthwise_blocks::<S, 1>(g, n, at, ox0),
                    2 => depthwise_blocks::<S, 2>(g, n, at, ox0),
                    3 => depthwise_blocks::<S, 3>(g, n, at, ox0),
                    _ => depthwise_blocks::<S, 4>(g, n, at, ox0),
                }
            }
            ox0 += 16 * blocks;
        }
        c += n;
    }
}

/// Whether [`depthwise_rows_3x3`] computes the planes of `g` (horizontal stride `S`).
fn dw_3x3_rows<const S: usize>(g: &DwPlane) -> bool {
    g.kh == 3 && g.kw == 3 && g.dilation_h == 1 && g.stride_h == S
}

/// Columns `ox0 .. ox0 + 16·NB` of every row of `planes` planes of [`depthwise_planes`], whose
/// input, filters, biases (or null) and output start at `(x, w, bias, out)`.
///
/// # Safety
/// As [`depthwise_planes`], with `ox0 < ow`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn depthwise_blocks<const S: usize, const NB: usize>(
    g: &DwPlane,
    planes: usize,
    (x, w, bias, out): (*const f32, *const f32, *const f32, *mut f32),
    ox0: usize,
) {
    // Per kernel column and block: where its 16 (strided) inputs start, and their load masks
    // (two 16-lane halves when S = 2).
    let mut start = [[0isize; NB]; DW_MAX_KW];
    let mut masks = [[(0 as __mmask16, 0 as __mmask16); NB]; DW_MAX_KW];
    for kx in 0..g.kw {
        for b in 0..NB {
            let s0 = ((ox0 + 16 * b) * S + kx) as isize - g.pad_left as isize;
            start[kx][b] = s0;
            masks[kx][b] = (lane_mask(s0, g.in_w), lane_mask(s0 + 16, g.in_w));
        }
    }
    let even_idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let clamp = g
        .clamp
        .map(|(lo, hi)| (_mm512_set1_ps(lo), _mm512_set1_ps(hi)));
    let pieces = Dw3Pieces::new::<S>(g, ox0);
    for c in 0..planes {
        // SAFETY: plane `c < planes` of each buffer (contract).
        let (x, w, out, bias) = unsafe {
            (
                x.add(c * g.in_h * g.in_w),
                w.add(c * g.kh * g.kw),
                out.add(c * g.oh * g.ow),
                if bias.is_null() { 0.0 } else { *bias.add(c) },
            )
        };
        let at = (x, w, bias, out);
        // SAFETY: one plane of the contract's buffers, `ox0 < ow`; a 3×3 filter for the
        // 3×3 rows.
        unsafe {
            if dw_3x3_rows::<S>(g) {
                depthwise_rows_3x3::<S, NB>(g, at, ox0, &pieces, clamp)
            } else {
                depthwise_rows::<S, NB>(g, at, ox0, (&start, &masks), even_idx, clamp)
            }
        };
    }
}

/// Stores the `NB` 16-column blocks `sums` of output row `oy` of a depthwise plane from column
/// `ox0` on, clamped to `clamp`; lanes past the row's end are not written.
///
/// # Safety
/// `out` holds the plane's `oh·ow` floats, `oy < oh` and `ox0 < ow`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store_dw_row<const NB: usize>(
    g: &DwPlane,
    out: *mut f32,
    (oy, ox0): (usize, usize),
    sums: [__m512; NB],
    clamp: Option<(__m512, __m512)>,
) {
    for (b, &sum) in sums.iter().enumerate() {
        let o = ox0 + 16 * b;
        if o >= g.ow {
            break;
        }
        let n = (g.ow - o).min(16);
        let mask = if n == 16 { 0xFFFF } else { (1u16 << n) - 1 };
        let mut v = sum;
        if let Some((lo, hi)) = clamp {
            // max(lo, v) and min(hi, v) return v when it is NaN (the second operand).
            v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
        }
        // SAFETY: lanes `0..n` are `out[oy·ow + o ..][..n]`, inside the `oh·ow` floats.
        unsafe { _mm512_mask_storeu_ps(out.add(oy * g.ow + o), mask, v) };
    }
}

/// The 16 inputs of one kernel tap for a block of 16 output columns at horizontal stride `S`
/// (1 or 2), from `p` on: lanes outside the masks read as zeros (at stride 2, two masked
/// loads and the even lanes of both).
///
/// # Safety
/// The lanes `(m0, m1)` select (from `p` and `p + 16`) are readable.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn dw_inputs<const S: usize>(
    p: *const f32,
    (m0, m1): (__mmask16, __mmask16),
    even_idx: __m512i,
) -> __m512 {
    // SAFETY: masked-off lanes are not accessed; the others are readable (contract).
    let lo = unsafe { _mm512_maskz_loadu_ps(m0, p) };
    if S == 1 {
        lo
    } else {
        // SAFETY: as above.
        let hi = unsafe { _mm512_maskz_loadu_ps(m1, p.wrapping_add(16)) };
        _mm512_permutex2var_ps(lo, even_idx, hi)
    }
}

/// Output rows [`depthwise_rows_3x3`] computes together: each input row is loaded once for
/// every row of the block it feeds (up to three at stride 1), and the block's rows are
/// independent FMA chains.
const DW_ROWS: usize = 4;

/// Most 16-float pieces of an input row the 3×3 rows read per column group (`2·4 + 1` for
/// four blocks at stride 2).
const DW3_PIECES: usize = 9;

/// Where the 3×3 rows read an input row for the blocks from output column `ox0` on: the
/// 16-float pieces from column `base = ox0·S − pad_left` on, and each piece's load mask (the
/// lanes inside the row).
struct Dw3Pieces {
    base: isize,
    masks: [__mmask16; DW3_PIECES],
}

impl Dw3Pieces {
    /// The pieces for horizontal stride `S`.
    fn new<const S: usize>(g: &DwPlane, ox0: usize) -> Self {
        let base = (ox0 * S) as isize - g.pad_left as isize;
        Dw3Pieces {
            base,
            masks: std::array::from_fn(|t| lane_mask(base + 16 * t as isize, g.in_w)),
        }
    }
}

/// The inputs of the three kernel columns for `NB` 16-column blocks of one input row `row` at
/// horizontal stride `S` (1 or 2): `v[kx][b]` lane `i` is `row[base + S·(16b + i) + kx]`, zero
/// outside the row. Each 16-float piece of the row is loaded once (masked to the row), and
/// the taps are its lanes shifted (`valignd`) or, at stride 2, its even and odd lanes.
///
/// # Safety
/// The lanes the masks of `p` select, from `row + p.base`, are readable.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn dw3_inputs<const S: usize, const NB: usize>(
    row: *const f32,
    p: &Dw3Pieces,
) -> [[__m512; NB]; 3] {
    // SAFETY: masked-off lanes are not accessed, the others are readable (contract);
    // `wrapping_offset` keeps the address arithmetic defined.
    let piece = |t: usize| unsafe {
        _mm512_maskz_loadu_ps(p.masks[t], row.wrapping_offset(p.base + 16 * t as isize))
    };
    let mut v = [[_mm512_setzero_ps(); NB]; 3];
    let [v0, v1, v2] = &mut v;
    if S == 1 {
        let mut lo = piece(0);
        for (b, ((v0, v1), v2)) in v0.iter_mut().zip(v1).zip(v2).enumerate() {
            let hi = piece(b + 1);
            *v0 = lo;
            *v1 = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
                _mm512_castps_si512(hi),
                _mm512_castps_si512(lo),
            ));
            *v2 = _mm512_castsi512_ps(_mm512_alignr_epi32::<2>(
                _mm512_castps_si512(hi),
                _mm512_castps_si512(lo),
            ));
            lo = hi;
        }
    } else {
        let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        let mut first = piece(0);
        for (b, ((v0, v1), v2)) in v0.iter_mut().zip(v1).zip(v2).enumerate() {
            let second = piece(2 * b + 1);
            let next = piece(2 * b + 2);
            let e = _mm512_permutex2var_ps(first, even, second);
            *v0 = e;
            *v1 = _mm512_permutex2var_ps(first, odd, second);
            // Lanes 1..16 of the even lanes, then the next piece's first float.
            *v2 = _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
                _mm512_castps_si512(next),
                _mm512_castps_si512(e),
            ));
            first = next;
        }
    }
    v
}

/// [`depthwise_rows`] for a 3×3 filter with equal strides `S` (1 or 2) and vertical dilation 1:
/// its nine weights stay in registers, and [`DW_ROWS`] output rows are computed together, each
/// input row loaded once ([`dw3_inputs`]) for all the rows it feeds. One row at a time loaded
/// each input row three times per kernel column, and its masks and column starts did not fit
/// in registers beside it (the loop spent more on reloading them than on its FMAs:
/// `kernel_bench`, 1 thread, 144 channels at 56² 28 → 40–50 GFLOP/s, 576 at 14² 21 → 40–50).
///
/// # Safety
/// As [`depthwise_rows`], with `kh = kw = 3`, `stride_h = S`, `dilation_h = 1`, and `pieces`
/// made for `g` and `ox0`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn depthwise_rows_3x3<const S: usize, const NB: usize>(
    g: &DwPlane,
    (x, w, bias, out): (*const f32, *const f32, f32, *mut f32),
    ox0: usize,
    pieces: &Dw3Pieces,
    clamp: Option<(__m512, __m512)>,
) {
    // SAFETY: `w` holds the filter's 9 floats (contract).
    let wv: [__m512; 9] = std::array::from_fn(|i| _mm512_set1_ps(unsafe { *w.add(i) }));
    let mut oy0 = 0;
    while oy0 < g.oh {
        let mut acc = [[_mm512_set1_ps(bias); NB]; DW_ROWS];
        // Input row `top + j` feeds output row `oy0 + r` through kernel row `j - r·S`.
        let top = (oy0 * S) as isize - g.pad_top as isize;
        for j in 0..(DW_ROWS - 1) * S + 3 {
            let iy = top + j as isize;
            if iy < 0 || iy >= g.in_h as isize {
                continue;
            }
            // SAFETY: the pieces' masks select the columns `0..in_w` of row `iy < in_h`,
            // inside `x`.
            let v = unsafe { dw3_inputs::<S, NB>(x.wrapping_add(iy as usize * g.in_w), pieces) };
            for (r, acc) in acc.iter_mut().enumerate() {
                let Some(ky) = j.checked_sub(r * S).filter(|&ky| ky < 3) else {
                    continue;
                };
                for (kx, v) in v.iter().enumerate() {
                    for (a, &v) in acc.iter_mut().zip(v) {
                        *a = _mm512_fmadd_ps(wv[ky * 3 + kx], v, *a);
                    }
                }
            }
        }
        // Rows past the plane's end (the last block) were computed but are not stored.
        for (r, &sums) in acc.iter().enumerate().take(g.oh - oy0) {
            // SAFETY: row `oy0 + r < oh` of the plane's output, `ox0 < ow` (contract).
            unsafe { store_dw_row(g, out, (oy0 + r, ox0), sums, clamp) };
        }
        oy0 += DW_ROWS;
    }
}

/// The rows of one plane of [`depthwise_blocks`], with its column starts and load masks.
///
/// # Safety
/// As [`depthwise_planes`] for one plane whose input, filter and output start at `x`, `w`
/// and `out`, with `ox0 < ow`.
#[target_feature(enable = "avx512f")]
#[inline]
#[allow(clippy::type_complexity)]
unsafe fn depthwise_rows<const S: usize, const NB: usize>(
    g: &DwPlane,
    (x, w, bias, out): (*const f32, *const f32, f32, *mut f32),
    ox0: usize,
    (start, masks): (
        &[[isize; NB]; DW_MAX_KW],
        &[[(__mmask16, __mmask16); NB]; DW_MAX_KW],
    ),
    even_idx: __m512i,
    clamp: Option<(__m512, __m512)>,
) {
    for oy in 0..g.oh {
        let mut even = [_mm512_set1_ps(bias); NB];
        let mut odd = [_mm512_setzero_ps(); NB];
        // Adds kernel row `ky` into `acc` (skipped when the row falls in the padding). A macro
        // rather than a choice of `&mut even` or `&mut odd` at run time: a reference chosen at
        // run time keeps both arrays in memory, and every FMA then waits on a store.
        macro_rules! kernel_row {
            ($ky:expr, $acc:ident) => {{
                let ky = $ky;
                let iy = (oy * g.stride_h + ky * g.dilation_h) as isize - g.pad_top as isize;
                if iy >= 0 && iy < g.in_h as isize {
                    // Rows outside the image were skipped, so `row` is the start of an input
                    // row.
                    let row = x.wrapping_add(iy as usize * g.in_w);
                    for kx in 0..g.kw {
                        // SAFETY: `w` holds `kh·kw` floats (contract). Loads are masked to the
                        // columns `0..in_w` of row `iy < in_h` (masked-off lanes are not
                        // accessed), so they stay inside `x`; `wrapping_offset` keeps the
                        // address arithmetic defined.
                        unsafe {
                            let wv = _mm512_set1_ps(*w.add(ky * g.kw + kx));
                            for b in 0..NB {
                                let p = row.wrapping_offset(start[kx][b]);
                                let v = dw_inputs::<S>(p, masks[kx][b], even_idx);
                                $acc[b] = _mm512_fmadd_ps(wv, v, $acc[b]);
                            }
                        }
                    }
                }
            }};
        }
        // Even kernel rows into `even`, odd ones into `odd`: two independent FMA chains.
        for pair in 0..g.kh.div_ceil(2) {
            kernel_row!(2 * pair, even);
            if 2 * pair + 1 < g.kh {
                kernel_row!(2 * pair + 1, odd);
            }
        }
        let sums: [__m512; NB] = std::array::from_fn(|b| _mm512_add_ps(even[b], odd[b]));
        // SAFETY: row `oy < oh` of the plane's output, `ox0 < ow` (contract).
        unsafe { store_dw_row(g, out, (oy, ox0), sums, clamp) };
    }
}
