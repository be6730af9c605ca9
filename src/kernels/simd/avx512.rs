//! AVX-512F GEMM micro-kernel: an `M×32` register tile, `M ≤ 12` (see [`MR`]), two zmm
//! accumulators per row, biases, residual and clamp applied in registers (the depthwise plane kernels are in
//! `avx512_depthwise`). The same tile multiplies bfloat16 operands with AVX512_BF16's dot
//! products (the `*_bf16` kernels): each 32-bit slot of the packed panels then holds two
//! consecutive values of the shared dimension, and one `vdpbf16ps` does the work of two FMAs.
#![allow(clippy::incompatible_msrv)] // AVX-512 intrinsics are stable since Rust 1.89.

use std::arch::x86_64::*;

use super::RawTail;

/// Packed A micro-panel row count (k-major stride of A), and the height of the row driver's
/// tiles and of most column tiles. The column driver also takes 12-row tiles (24
/// accumulators, two B vectors and the broadcast A value in the 32 registers) over a B read in
/// place, each reading its rows from two consecutive micro-panels (see [`tile_height`]). A
/// packed layout of 12-row panels, tried in the thirty-seventh session, measured no faster
/// inside ResNet-50: its power-of-two channel counts left a 4-row tile at every GEMM's end,
/// Winograd's 16-tile products at 14² ran as 12 + 4, and MobileNetV2's 112² blocks, whose row
/// driver took 12-row tiles over K = 16, lost 6–17%.
const MR: usize = 8;

/// Steps of k ahead that a tile over a B read in place fetches B's rows.
const B_AHEAD: usize = 8;

/// The height of the next tile of a column with `rest` rows left. A tall column (`tall`: a B
/// read in place over at least [`TALL_MIN_K`] steps of k) takes tiles of 12 rows (24
/// accumulators) where its remaining rows split into tiles of 12 and 8, so that no tile of 4
/// is left at the end (16 rows: 8 + 8; 20: 12 + 8; 64: 4 × 12 + 2 × 8); any other column
/// tiles of 8. The whole rest when it fits one tile, but for the heights the column driver
/// does not instantiate: a tile starts at row 0 or 4 (`off`) of an A micro-panel, and takes
/// 1–8 or 12 rows from row 0, 1–4, 8 or 12 from row 4, so a rest of 9–11 rows takes 8 first,
/// and one of 5–7 from row 4 takes 4 first (11 tiles per width where every height from either
/// row made 20, which the sanitizer builds of the fuzz targets compiled for over 11 minutes).
///
/// Why only a B read in place: the rows of such a B lie far apart and its micro-panel does
/// not stay in L1 between the column's tiles, so each tile fetches it again from L2 (see
/// [`B_AHEAD`]); 12-row tiles make a third fewer passes over it. `kernel_bench`, 1 thread,
/// `KB_COLD=4`, three interleaved pairs, GFLOP/s 8 → 12 rows: ResNet-50's 256→128 at 56²
/// 77–82 → 83–91, 512→128 at 28² 95–102 → 105–107, 1024→256 at 14² 100–103 → 108–117. A
/// packed micro-panel stays in L1, where the 8-row tile is already bound by its FMAs, and a
/// 12-row tile reads half of one A micro-panel, which the next tile reads again: ResNet-50's
/// packed 1×1 layers at 7² ran 0–5% slower with 12, the Winograd layers the same.
fn tile_height(rest: usize, tall: bool, off: usize) -> usize {
    if !tall {
        return rest.min(MR);
    }
    match rest {
        0..=4 => rest,
        5..=7 if off != 0 => 4,
        5..=8 => rest,
        9..=11 | 13..=16 => 8,
        _ => 12,
    }
}

/// Fewest steps of k of a column whose tiles are 12 rows tall (see [`tile_height`]). Below
/// it the 8-row tile was faster: MobileNetV2's 1×1 convolution 16→96 at 112², fused with its
/// depthwise one, 50–52 → 54–55 GFLOP/s with 8 (`kernel_bench`, three interleaved pairs).
const TALL_MIN_K: usize = 64;

/// Write-back state shared by the tiles of one column of C: lane masks, alpha and beta, the
/// column bias and the clamp bounds.
struct Store {
    m0: __mmask16,
    m1: __mmask16,
    va: __m512,
    vb: __m512,
    /// `alpha == 1`: the biases then start the sums instead of being added to the product
    /// (one vector operation fewer per output vector, and no multiply by alpha).
    unit: bool,
    alpha: f32,
    beta: f32,
    /// The bias of column 16 (the fused edge column of a 17-wide column), if any.
    edge_bias: Option<f32>,
    /// The clamp bounds as scalars, for the fused edge column.
    clamp_bounds: Option<(f32, f32)>,
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
        unit: alpha == 1.0,
        alpha,
        beta,
        // SAFETY: a non-null column bias holds `nr ≥ 17` floats here (contract).
        edge_bias: (nr > 16 && !tail.col_bias.is_null()).then(|| unsafe { *tail.col_bias.add(16) }),
        clamp_bounds: tail.clamp,
        col_bias,
        clamp: tail
            .clamp
            .map(|(lo, hi)| (_mm512_set1_ps(lo), _mm512_set1_ps(hi))),
    }
}

/// Defines the GEMM tile `$tile` and its column and row drivers `$column` and `$row`, compiled
/// with the target features `$features`, whose tiles accumulate with `$madd(acc, a, b)`:
/// float32 FMAs, or bfloat16 dot products over pairs (then every "float" of the panels below is
/// a 32-bit slot of two bfloat16 values of consecutive k, and `kc` counts slots). One
/// definition for both, since a kernel's instructions need its own `#[target_feature]`.
macro_rules! gemm_kernels {
    (
        $tile:ident,
        $column:ident,
        $row:ident,
        $features:literal,
        $madd:ident,
        $edge:literal,
        $in_place:tt
    ) => {
        /// One `M×32` tile (`M×16` when `W2` is false: a column at most 16 wide, whose second half
        /// is neither computed nor stored; `M×17` when `E1` is also true, column 16 computed
        /// its `M` rows to one masked 16-lane FMA per k and stored by [`store_edge`]): accumulates over `kc`, then stores
        /// `clamp(alpha·acc + beta·C + row_bias + col_bias + residual)` through `s`. Its rows
        /// `i < S` are A's rows at `a + k·MR + i`, the others (`M > S`: a tile reaching into
        /// the next micro-panel) at `a_hi + k·MR + i - S`. Meanwhile it prefetches
        /// the `kc` A columns from `pf` on (the next micro-panel: any address, only prefetched) and,
        /// when `PB` and `pfb` is not null, the `kc` B rows from `pfb` on (`ldb` apart: the next
        /// column's micro-panel of a B read in place, or of a packed B when `ldb = 32`). `PB` tells
        /// the column driver's tiles (true) from the row driver's (false), which never prefetch B.
        ///
        /// # Safety
        /// - The CPU supports AVX-512F.
        /// - `a` is readable for `min(M, S)` floats from each `k * MR`, and when `M > S`,
        ///   `a_hi` for `M - S` floats from each `k * MR` (`S ≤ MR`, `M - S ≤ MR`); `b` for 32
        ///   floats from each `k * ldb`, `k < kc`.
        /// - `c[r]` for `r < M` has the tile's `nr` floats from `col` on (`c[r].len() ≥ col + nr`;
        ///   the rows are distinct `&mut` slices, so disjoint from each other and from `a`/`b`),
        ///   and `W2` is false only when `nr ≤ 16`, or `nr = 17` with `E1` (then `c[r]` and the
        ///   residual rows hold column `col + 16` too, and B's column 16 is read at `k·ldb + 16`).
        /// - `row_bias` is null or readable for `M` floats; `res` is null or points to `M` row slices,
        ///   each with the tile's `nr` floats from `col` on.
        /// - `pf` and `pfb` are only prefetched (a hint that never faults), never read.
        #[target_feature(enable = $features)]
        #[inline]
        #[allow(clippy::too_many_arguments)]
        unsafe fn $tile<
            const M: usize,
            const S: usize,
            const W2: bool,
            const PB: bool,
            const E1: bool,
        >(
            kc: usize,
            (a, a_hi): (*const f32, *const f32),
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
            if s.unit {
                // The sums start from the biases (with alpha = 1, `A·B + biases` either way): at a
                // shared dimension of 16 (MobileNetV2's 1×1 layer at 112²), 22% of the samples
                // of the tiles fell outside the k loop, mostly in the stores.
                let zero = _mm512_setzero_ps();
                let (c0, c1) = s.col_bias.unwrap_or((zero, zero));
                for i in 0..M {
                    let (mut v0, mut v1) = (c0, c1);
                    if !row_bias.is_null() {
                        // SAFETY: a non-null row bias holds M floats (contract).
                        let v = _mm512_set1_ps(unsafe { *row_bias.add(i) });
                        v0 = _mm512_add_ps(v0, v);
                        v1 = _mm512_add_ps(v1, v);
                    }
                    acc0[i] = v0;
                    acc1[i] = v1;
                }
            }
            // The fused edge column (column 16 of a 17-wide column, `E1`): the A column times
            // B's value, its `M` rows in one masked 16-lane FMA per k.
            let mut edge = _mm512_setzero_ps();
            // The A column's rows in each of its two micro-panels (lanes `0..S` from `a`, lanes
            // `S..M` from `a_hi`; the lanes past them would read the next k's column).
            let lo_rows: __mmask16 = ((1u32 << M.min(S)) - 1) as __mmask16;
            let hi_rows: __mmask16 = (((1u32 << M) - 1) & !((1u32 << S.min(M)) - 1)) as __mmask16;
            // One step of k: row k of the B panel times column k of the A micro-panel.
            let mut step = |k: usize| {
                // SAFETY: k < kc, so `b + k*ldb .. +32`, `a + k*MR .. + min(M, S)` and (for
                // `M > S`) `a_hi + k*MR .. + M - S` are inside the panels.
                unsafe {
                    let bp = b.add(k * ldb);
                    let ap = a.add(k * MR);
                    let hp = a_hi.wrapping_add(k * MR);
                    let b0 = _mm512_loadu_ps(bp);
                    let b1 = if W2 { _mm512_loadu_ps(bp.add(16)) } else { b0 };
                    for i in 0..M {
                        let ai = _mm512_set1_ps(if i < S { *ap.add(i) } else { *hp.add(i - S) });
                        acc0[i] = $madd(acc0[i], ai, b0);
                        if W2 {
                            acc1[i] = $madd(acc1[i], ai, b1);
                        }
                    }
                    if E1 {
                        let bv = _mm512_set1_ps(*bp.add(16));
                        let mut av = _mm512_maskz_loadu_ps(lo_rows, ap);
                        if M > S {
                            // Lane `i ≥ S` is row `i - S` of the second micro-panel.
                            av = _mm512_mask_loadu_ps(av, hi_rows, hp.wrapping_sub(S));
                        }
                        edge = _mm512_fmadd_ps(av, bv, edge);
                    }
                }
            };
            // Two steps per iteration and one prefetch of the next A micro-panel, the 64-byte line
            // its same two steps read: inside a model the weights come from memory, and their
            // stream restarted at every micro-panel (ResNet-50's 512→2048 1×1 layer with data out of
            // cache: 73 → 95 GFLOP/s). A one-row tile (a matrix times a vector) over a packed B
            // also fetches B's four lines of these two steps `super::VECTOR_AHEAD` floats ahead:
            // one stream through all of B.
            let fetch_a = |k: usize| {
                _mm_prefetch::<_MM_HINT_T0>(pf.wrapping_add(k * MR) as *const i8);
                if M == 1 && ldb == 32 {
                    let q = b.wrapping_add(k * 32 + super::VECTOR_AHEAD);
                    for t in 0..4 {
                        _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(16 * t) as *const i8);
                    }
                }
            };
            // The loop in three versions, each with only the prefetches its case needs: tests
            // of the others inside the loop cost 3–9% on sgemm 256³ and 512³ (`kernel_bench`,
            // 1 thread, three interleaved pairs, against a loop with no B prefetch at all).
            let pairs = kc & !1;
            if $in_place && PB && ldb != 32 {
                for k in (0..pairs).step_by(2) {
                    fetch_a(k);
                    if k + B_AHEAD + 1 < kc {
                        // A B read in place: its rows, far apart, fall in few of L1's sets (at
                        // 56² in 32 of its 64), so the micro-panel the column's tiles share does
                        // not stay in L1 between them, and each tile fetched it again at L2's
                        // latency. Every tile fetches its rows `B_AHEAD` steps ahead
                        // (`kernel_bench`, 1 thread, 8-row tiles: ResNet-50's 256→128 at 56² 96
                        // → 109–111 GFLOP/s, 512→128 at 28² 104 → 111–112, 1024→256 at 14²
                        // unchanged).
                        for q in [
                            b.wrapping_add((k + B_AHEAD) * ldb),
                            b.wrapping_add((k + 1 + B_AHEAD) * ldb),
                        ] {
                            _mm_prefetch::<_MM_HINT_T0>(q as *const i8);
                            _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(16) as *const i8);
                        }
                    }
                    if !pfb.is_null() {
                        // The next column's micro-panel into L1 (see `TileTail::next_b`).
                        for q in [pfb.wrapping_add(k * ldb), pfb.wrapping_add((k + 1) * ldb)] {
                            _mm_prefetch::<_MM_HINT_T0>(q as *const i8);
                            _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(16) as *const i8);
                        }
                    }
                    step(k);
                    step(k + 1);
                }
            } else if PB && !pfb.is_null() {
                // The next column's packed micro-panel (`ldb = 32`) into L2: its four lines of
                // these two steps.
                for k in (0..pairs).step_by(2) {
                    fetch_a(k);
                    let q = pfb.wrapping_add(k * 32);
                    for t in 0..4 {
                        _mm_prefetch::<_MM_HINT_T1>(q.wrapping_add(16 * t) as *const i8);
                    }
                    step(k);
                    step(k + 1);
                }
            } else {
                for k in (0..pairs).step_by(2) {
                    fetch_a(k);
                    step(k);
                    step(k + 1);
                }
            }
            if kc % 2 == 1 {
                step(kc - 1);
            }
            if E1 {
                // SAFETY: forwarded contract (`c[i]` holds column `col + 16`, and so does a
                // residual row).
                unsafe { store_edge::<M>(edge, c, col + 16, row_bias, res, s) };
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
                let (mut r0, mut r1) = if s.unit {
                    (acc0[i], acc1[i])
                } else {
                    (_mm512_mul_ps(acc0[i], s.va), _mm512_mul_ps(acc1[i], s.va))
                };
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
                if !s.unit && !row_bias.is_null() {
                    // SAFETY: a non-null row bias holds M floats (contract).
                    let v = _mm512_set1_ps(unsafe { *row_bias.add(i) });
                    r0 = _mm512_add_ps(r0, v);
                    r1 = _mm512_add_ps(r1, v);
                }
                if let (false, Some((b0, b1))) = (s.unit, s.col_bias) {
                    r0 = _mm512_add_ps(r0, b0);
                    r1 = _mm512_add_ps(r1, b1);
                }
                if !res.is_null() {
                    // SAFETY: a non-null `res` holds M row pointers, each readable for the lanes the
                    // masks select (contract).
                    unsafe {
                        let q0 = (*res.add(i)).as_ptr().wrapping_add(col);
                        // The next column's two lines of this residual row, as for C above: a
                        // residual written layers before comes from the outer caches.
                        _mm_prefetch::<_MM_HINT_T0>(q0.wrapping_add(32) as *const i8);
                        _mm_prefetch::<_MM_HINT_T0>(q0.wrapping_add(48) as *const i8);
                        r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(s.m0, q0));
                        if W2 {
                            r1 =
                                _mm512_add_ps(r1, _mm512_maskz_loadu_ps(s.m1, q0.wrapping_add(16)));
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

        /// One column of C, `nr` wide, over `c.len()` rows: the `⌈rows/MR⌉` A micro-panels in `a`
        /// (`kc·MR` floats each, consecutive) times the B micro-panel `b`, each tile stored as
        /// `clamp(alpha·A·B + beta·C + biases + residual)` with the biases, residual and clamp of
        /// `tail`. A column at most 16 wide computes only the first half of each tile. The tiles
        /// are 8 rows tall, or 12 over a B read in place (see [`tile_height`]).
        ///
        /// # Safety
        /// - The CPU supports AVX-512F.
        /// - `a` is readable for `⌈c.len()/8⌉ · kc · 8` floats, `b` for 32 floats from each `k · ldb`,
        ///   `k < kc` (a packed micro-panel has `ldb = 32`).
        /// - Every `c[r]` has `nr` floats from `col` on (`1 ≤ nr ≤ 32`, `c[r].len() ≥ col + nr`).
        /// - `tail.row_bias` is null or readable for `c.len()` floats; `tail.col_bias` null or
        ///   readable for `nr` floats; `tail.residual` null or pointing to `c.len()` row slices,
        ///   each with `nr` floats from `col` on.
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        pub(super) unsafe fn $column(
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
            let e1 = $edge && nr == 17;
            // Tiles of 12 rows over a B read in place (see `tile_height`).
            let tall = $in_place && ldb != 32 && kc >= TALL_MIN_K;
            let mut r0 = 0;
            while r0 < c.len() {
                // The tile's rows from A's micro-panel `p`, from its row `off` (0 or 4) on, and
                // past it from the next one.
                let (p, off) = (r0 / MR, r0 % MR);
                let h = tile_height(c.len() - r0, tall, off);
                // The heights instantiated below, from the rows they read them from (the
                // safety of the 1–7-row tiles rests on it: from row 4 they would read past
                // the micro-panel).
                assert!(off == 0 || h <= 4 || h == 8 || h == 12);
                let rows = &mut c[r0..r0 + h];
                let ap = a.wrapping_add(p * kc * MR + off);
                let hi = a.wrapping_add((p + 1) * kc * MR);
                // The micro-panel after the tile's last, prefetched by this tile.
                let pf = a.wrapping_add(((r0 + h - 1) / MR + 1) * kc * MR);
                let rb = if tail.row_bias.is_null() {
                    tail.row_bias
                } else {
                    tail.row_bias.wrapping_add(r0)
                };
                let res = if tail.residual.is_null() {
                    tail.residual
                } else {
                    tail.residual.wrapping_add(r0)
                };
                // The first tile of the column also prefetches the next column's B micro-panel.
                // Whether it does is decided at run time, inside one instantiation of the tile per
                // height: each then has this one call site and is inlined here (a constant `PB` per
                // case made the full 8-row tile a function of its own, called from both drivers:
                // MatMul 1024³ inside the model took 0.968 [0.957, 0.988] of the time this way, 1
                // thread, ten interleaved pairs; 2 threads 0.981).
                let pfb = if r0 == 0 {
                    tail.next_b
                } else {
                    std::ptr::null()
                };
                let pfs = (pf, pfb);
                let aps = (ap, hi);
                // `S`: rows of the tile in its first micro-panel (all of them when `S ≥ M`).
                // Kernels that never read B in place take only the 8-row tiles' heights, from
                // row 0 of a micro-panel.
                macro_rules! go {
                    (true, $w:literal, $e:literal) => {
                        match (h, off) {
                            (1, _) => $tile::<1, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            (2, _) => $tile::<2, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            (3, _) => $tile::<3, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            (4, _) => $tile::<4, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            (5, _) => $tile::<5, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            (6, _) => $tile::<6, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            (7, _) => $tile::<7, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            (8, 0) => $tile::<8, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            (8, _) => $tile::<8, 4, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            (12, 0) => $tile::<12, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            _ => $tile::<12, 4, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                        }
                    };
                    (false, $w:literal, $e:literal) => {
                        match h {
                            1 => $tile::<1, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            2 => $tile::<2, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            3 => $tile::<3, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            4 => $tile::<4, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            5 => $tile::<5, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            6 => $tile::<6, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            7 => $tile::<7, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                            _ => $tile::<8, 8, $w, true, $e>(kc, aps, b, ldb, rows, col, rb, res, &s, pfs),
                        }
                    };
                }
                // SAFETY: rows `r0 .. r0 + h` of `c`, of the row bias and of the residual are in
                // range, and so are A's micro-panels that hold them (`p`, and `p + 1` when the
                // tile reaches past `p`: `S = MR - off < h`) (contract); `h` is the tile height,
                // and the narrow tile is used only when `nr ≤ 16`, or with its fused edge
                // column when `nr = 17`.
                unsafe {
                    if e1 {
                        go!($in_place, false, true)
                    } else if wide {
                        go!($in_place, true, false)
                    } else {
                        go!($in_place, false, false)
                    }
                }
                r0 += h;
            }
        }

        /// One row of C's tiles, `1 ≤ c.len() ≤ MR` rows: the A micro-panel `a` times `panels` B
        /// micro-panels 32 wide, panel `q` from `b + q·step` (row `k` at `+ k·ldb`), each tile stored
        /// at columns `col + 32q ..` as in the column driver above; `tail.col_bias`, when not null, holds
        /// the biases of all `32·panels` columns.
        ///
        /// # Safety
        /// - The CPU supports AVX-512F.
        /// - `a` is readable for `kc * MR` floats, `b` for 32 floats from each `q·step + k·ldb`,
        ///   `q < panels`, `k < kc`.
        /// - Every `c[r]` has `32·panels` floats from `col` on.
        /// - `tail.row_bias` is null or readable for `c.len()` floats; `tail.col_bias` null or
        ///   readable for `32·panels` floats; `tail.residual` null or pointing to `c.len()` row
        ///   slices, each with `32·panels` floats from `col` on.
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        pub(super) unsafe fn $row(
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
                        1 => $tile::<1, 8, true, false, false>(kc, (a, a), bq, ldb, c, cq, rb, res, &s, pfs),
                        2 => $tile::<2, 8, true, false, false>(kc, (a, a), bq, ldb, c, cq, rb, res, &s, pfs),
                        3 => $tile::<3, 8, true, false, false>(kc, (a, a), bq, ldb, c, cq, rb, res, &s, pfs),
                        4 => $tile::<4, 8, true, false, false>(kc, (a, a), bq, ldb, c, cq, rb, res, &s, pfs),
                        5 => $tile::<5, 8, true, false, false>(kc, (a, a), bq, ldb, c, cq, rb, res, &s, pfs),
                        6 => $tile::<6, 8, true, false, false>(kc, (a, a), bq, ldb, c, cq, rb, res, &s, pfs),
                        7 => $tile::<7, 8, true, false, false>(kc, (a, a), bq, ldb, c, cq, rb, res, &s, pfs),
                        _ => $tile::<8, 8, true, false, false>(kc, (a, a), bq, ldb, c, cq, rb, res, &s, pfs),
                    }
                }
            }
        }
    };
}

gemm_kernels!(
    tile,
    kernel_column,
    kernel_row,
    "avx512f",
    fma_f32,
    true,
    true
);
gemm_kernels!(
    tile_bf16,
    kernel_column_bf16,
    kernel_row_bf16,
    "avx512f,avx512bf16",
    dot_bf16,
    false,
    false
);

/// Stores the fused edge column of a tile: lane `i < M` of `edge` (row `i`'s product in
/// column `col`) as `clamp(alpha·acc + beta·C + row_bias + col_bias + residual)`, in that order
/// (that of the separate edge kernel's tail).
///
/// # Safety
/// `c[i]` for `i < M` holds column `col`; `row_bias` is null or readable for `M` floats;
/// `res` is null or points to `M` row slices, each holding column `col`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn store_edge<const M: usize>(
    edge: __m512,
    c: &mut [&mut [f32]],
    col: usize,
    row_bias: *const f32,
    res: *const &[f32],
    s: &Store,
) {
    let mut lanes = [0.0f32; 16];
    // SAFETY: `lanes` holds 16 floats.
    unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), edge) };
    for (i, &acc) in lanes.iter().enumerate().take(M) {
        let x = &mut c[i][col];
        let mut v = s.alpha * acc;
        if s.beta != 0.0 {
            v = x.mul_add(s.beta, v);
        }
        if !row_bias.is_null() {
            // SAFETY: a non-null row bias holds M floats (contract).
            v += unsafe { *row_bias.add(i) };
        }
        if let Some(b) = s.edge_bias {
            v += b;
        }
        if !res.is_null() {
            // SAFETY: a non-null `res` holds M row slices (contract), each holding `col`.
            v += unsafe { (*res.add(i))[col] };
        }
        if let Some((lo, hi)) = s.clamp_bounds {
            let y = if v < lo { lo } else { v };
            v = if y > hi { hi } else { y };
        }
        *x = v;
    }
}

/// The edge columns of a column of C: one packed A micro-panel ([`MR`] rows, k-major) times
/// the `n` columns of B from `b` on (`1 ≤ n ≤ 8`), as `acc[j][r] = Σ_k a[k·MR + r] ·
/// b[k·ldb + j]` for `r < MR` (columns past `n` and lanes past `MR` are zero). Each column
/// takes one FMA per k on the A column (its `MR` lanes, masked) with B's value broadcast,
/// where a tile spends a half tile whatever its width (see `super::edge_split`).
///
/// # Safety
/// The CPU supports AVX-512F; `a` is readable for `kc·MR` floats and `b` for `n` floats from
/// each `k·ldb`, `k < kc`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn edge_columns(
    kc: usize,
    a: *const f32,
    b: *const f32,
    ldb: usize,
    n: usize,
) -> [[f32; 16]; 8] {
    let mut out = [[0.0f32; 16]; 8];
    // Few columns take several partial sums over k each, so that enough FMA chains run at
    // once (eight for one column: two FMA pipes of four cycles' latency).
    macro_rules! go {
        ($n:literal, $u:literal) => {{
            // SAFETY: forwarded contract, `n` columns.
            let acc = unsafe { edge_dot::<$n, $u>(kc, a, b, ldb) };
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
        7 => go!(7, 2),
        _ => go!(8, 2),
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
) -> [[f32; 16]; N] {
    let rows: __mmask16 = ((1u32 << MR) - 1) as __mmask16;
    let mut acc = [[_mm512_setzero_ps(); N]; U];
    // One step of k into the partial sums `u`.
    let mut step = |k: usize, u: usize| {
        // SAFETY: k < kc, so `b + k·ldb .. +N` and the A column's `MR` lanes at `a + k·MR` are
        // inside (contract); masked-off lanes are not accessed.
        unsafe {
            let av = _mm512_maskz_loadu_ps(rows, a.add(k * MR));
            for (j, sum) in acc[u].iter_mut().enumerate() {
                let bv = _mm512_set1_ps(*b.add(k * ldb + j));
                *sum = _mm512_fmadd_ps(av, bv, *sum);
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
    let mut out = [[0.0f32; 16]; N];
    for (j, o) in out.iter_mut().enumerate() {
        let mut sum = acc[0][j];
        for part in &acc[1..] {
            sum = _mm512_add_ps(sum, part[j]);
        }
        // SAFETY: `o` holds 16 floats.
        unsafe { _mm512_storeu_ps(o.as_mut_ptr(), sum) };
    }
    out
}

/// `acc + a·b` per lane (one FMA).
#[target_feature(enable = "avx512f")]
#[inline]
fn fma_f32(acc: __m512, a: __m512, b: __m512) -> __m512 {
    _mm512_fmadd_ps(a, b, acc)
}

/// `acc + a₀·b₀ + a₁·b₁` per 32-bit lane, over its two bfloat16 halves (`vdpbf16ps`, which
/// reads bfloat16 subnormals as zero and flushes subnormal results, as its definition says).
#[target_feature(enable = "avx512f,avx512bf16")]
#[inline]
fn dot_bf16(acc: __m512, a: __m512, b: __m512) -> __m512 {
    // SAFETY: `__m512` and `__m512bh` are both 64 bytes, and every bit pattern is a valid value
    // of either.
    let (a, b): (__m512bh, __m512bh) = unsafe {
        (
            std::mem::transmute::<__m512, __m512bh>(a),
            std::mem::transmute::<__m512, __m512bh>(b),
        )
    };
    _mm512_dpbf16_ps(acc, a, b)
}

/// Rounds `len` floats from `src` to bfloat16 (to nearest, ties to even; `vcvtne2ps2bf16`),
/// two per 32-bit slot: slot `i` of `dst` holds `src[2i]` in its low half and `src[2i + 1]` in
/// its high half, a missing last value zero; writes `⌈len/2⌉` slots.
///
/// # Safety
/// The CPU supports AVX-512F and AVX512_BF16; `src` is readable for `len` floats and `dst`
/// writable for `⌈len/2⌉`, not overlapping them.
#[target_feature(enable = "avx512f,avx512bf16")]
pub(super) unsafe fn bf16_pairs(src: *const f32, len: usize, dst: *mut f32) {
    let mut i = 0;
    while i + 32 <= len {
        // SAFETY: floats `i .. i + 32` of `src` and slots `i/2 .. i/2 + 16` of `dst` are in
        // range (contract).
        unsafe {
            let lo = _mm512_loadu_ps(src.add(i));
            let hi = _mm512_loadu_ps(src.add(i + 16));
            let v: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
            _mm512_storeu_si512(dst.add(i / 2) as *mut __m512i, v);
        }
        i += 32;
    }
    let rest = len - i;
    if rest > 0 {
        let lanes = |n: usize| -> __mmask16 { ((1u32 << n.min(16)) - 1) as __mmask16 };
        // SAFETY: the masks select floats `i .. len` of `src` and slots `i/2 .. ⌈len/2⌉` of
        // `dst`, in range (contract); masked-off lanes are not accessed.
        unsafe {
            let lo = _mm512_maskz_loadu_ps(lanes(rest), src.add(i));
            let hi =
                _mm512_maskz_loadu_ps(lanes(rest.saturating_sub(16)), src.wrapping_add(i + 16));
            let v: __m512i = std::mem::transmute(_mm512_cvtne2ps_pbh(hi, lo));
            _mm512_mask_storeu_epi32(dst.add(i / 2) as *mut i32, lanes(rest.div_ceil(2)), v);
        }
    }
}

/// `iters` steps of 16 independent FMA chains `acc = acc·a + b` (16 lanes each, from zero),
/// the sum of all their lanes: the FMA units' throughput, for [`super::fma_chains`].
///
/// # Safety
/// The CPU supports AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn fma_chains(iters: usize, a: f32, b: f32) -> f32 {
    let (va, vb) = (_mm512_set1_ps(a), _mm512_set1_ps(b));
    let mut acc = [_mm512_setzero_ps(); 16];
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm512_fmadd_ps(*x, va, vb);
        }
    }
    let sum = acc
        .iter()
        .fold(_mm512_setzero_ps(), |s, &x| _mm512_add_ps(s, x));
    _mm512_reduce_add_ps(sum)
}

#[cfg(test)]
mod tests;
