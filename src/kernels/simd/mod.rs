//! SIMD code: the GEMM micro-kernels per ISA and the trampolines that compile plain loops
//! with a wider instruction set.
//!
//! This is one of the two places in `kernels` where `unsafe` is allowed (the other being the
//! per-ISA files below it). The safe wrappers here check every length and the CPU feature before
//! entering `#[target_feature]` code, so that callers cannot cause undefined behaviour.

use super::cpu::{self, Isa};

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx2_depthwise;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod avx512_depthwise;
#[cfg(target_arch = "x86_64")]
mod avx512_direct;
#[cfg(target_arch = "x86_64")]
mod avx512_nchwc;
#[cfg(target_arch = "x86_64")]
mod avx512_pool;
mod direct;
mod max_pool;
mod nchwc;
mod pack;
mod portable;
mod rows;

pub(crate) use direct::{direct_rows, direct_weights, has_direct, DirectGeometry, DIRECT_OCB};
pub(crate) use max_pool::{
    has_max_pool_stride2, max_pool_plane_stride2, MaxPoolPlane, MAX_POOL_ROWS,
};
pub(crate) use nchwc::{conv_strips, reorder_block, strip_len, StripRun, GROUP_BLOCKS};
pub(crate) use pack::{bf16_pairs, interleave_rows};
pub(crate) use rows::CheckedRows;

/// Register tile height (rows of C) of the micro-kernel of `isa`.
pub(crate) const fn mr(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 8,
        Isa::Avx2Fma => 6,
        Isa::Portable => portable::MR,
    }
}

/// Register tile width (columns of C) of the micro-kernel of `isa`.
pub(crate) const fn nr(isa: Isa) -> usize {
    match isa {
        Isa::Avx512 => 32,
        Isa::Avx2Fma => 16,
        Isa::Portable => portable::NR,
    }
}

/// What the micro-tiles multiply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dot {
    /// Float32 operands, one FMA per product.
    F32,
    /// Bfloat16 pairs: each 32-bit slot of the packed operands holds two consecutive values of
    /// the shared dimension (the lower one in the low half), multiplied by AVX512_BF16's
    /// `vdpbf16ps` into float32 sums (AVX-512 only; see [`crate::kernels::cpu::bf16_dot`]).
    Bf16,
}

/// Largest `mr` of all ISAs (size of the row-pointer array).
pub(crate) const MAX_MR: usize = 8;

/// How far ahead (in floats: 8 KiB) a one-row tile over a packed B prefetches it. Such a tile
/// (a matrix times a vector: a classifier's fully connected layer) reads B once, from memory,
/// in one stream, which ran slower with the hardware prefetchers alone. `kernel_bench`,
/// 1 thread, weights from memory (`KB_COLD=16`), 1280→1000: 12–17 → 15–17 GFLOP/s (16 KiB
/// ahead measured the same), unchanged from L3; inside MobileNetV2 at 1 thread its `Gemm` took
/// 0.160–0.174 ms without it, 0.143–0.158 with it (three interleaved pairs of 200 runs).
/// (Since the twenty-seventh session a matrix A of one row takes `gemm::gemv` instead; the tile
/// still serves one row of packed weights, a convolution to one channel.)
#[cfg(target_arch = "x86_64")]
const VECTOR_AHEAD: usize = 2048;

/// What a micro-tile adds and clamps before it stores:
/// `C = clamp(alpha·A·B + beta·C + row_bias + col_bias + residual)`. An empty slice means none.
///
/// (Empty slices rather than `Option`s: with `None` the slice length in the tail's stack slot
/// is never written, and LLVM compared it before the discriminant in the length checks, a
/// branch on an uninitialised value that valgrind reports.)
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TileTail<'a> {
    /// One bias per row of the tile (at least `rows.len()` values), or empty.
    pub row_bias: &'a [f32],
    /// One bias per column of the tile (at least `nr_eff` values), or empty.
    pub col_bias: &'a [f32],
    /// A matrix added element-wise, one piece per row of C, indexed like the rows of C (the
    /// tile reads `residual[r][col..col + nr_eff]`), or empty.
    pub residual: &'a [&'a [f32]],
    /// `min(max(x, lo), hi)`, NaN kept (`Relu` is `(0, +inf)`).
    pub clamp: Option<(f32, f32)>,
    /// The B micro-panel of the next column (same row stride as this one), only prefetched,
    /// never read: a B read in place, whose rows are far apart, is brought into L1 while this
    /// column computes, and a packed one (row stride `nr`, contiguous) into L2, where it does
    /// not evict the panel in use. A B read in place with a next column is wider than two
    /// tiles, so its row stride is never `nr`. Empty: none.
    pub next_b: &'a [f32],
}

/// The start of `v`, or null when it is empty (the kernels' "none").
#[cfg(target_arch = "x86_64")]
fn nonempty_ptr<T>(v: &[T]) -> *const T {
    if v.is_empty() {
        std::ptr::null()
    } else {
        v.as_ptr()
    }
}

/// The tail in the form the `unsafe` kernels take (lengths checked by [`micro_column`]).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct RawTail<'a> {
    /// Per-row biases (one readable float per row), or null.
    row_bias: *const f32,
    /// Per-column biases (`nr_eff` readable floats), or null.
    col_bias: *const f32,
    /// One residual row slice per row of C (each with `nr_eff` floats from the column on), or
    /// null.
    residual: *const &'a [f32],
    /// Clamp bounds.
    clamp: Option<(f32, f32)>,
    /// The next column's B micro-panel (only prefetched), or null.
    next_b: *const f32,
}

#[cfg(target_arch = "x86_64")]
impl<'a> RawTail<'a> {
    /// The raw form of `tail` (empty slices as null).
    fn of(tail: &TileTail<'a>) -> Self {
        RawTail {
            row_bias: nonempty_ptr(tail.row_bias),
            col_bias: nonempty_ptr(tail.col_bias),
            residual: nonempty_ptr(tail.residual),
            clamp: tail.clamp,
            next_b: nonempty_ptr(tail.next_b),
        }
    }
}

/// A column of micro-tiles: for every `mr` rows of `rows` (the A micro-panels consecutive in
/// `a`, `kc * mr(isa)` floats each, k-major, rows padded with zeros) and the B micro-panel `b`
/// (`nr(isa)` floats of each of its `kc` rows, row `k` at `b[k * ldb]`: a packed k-major panel
/// has `ldb = nr(isa)`, a row-major matrix read in place its row stride):
/// `C[r][col..col+nr_eff] = clamp(alpha·A·B + beta·C + row_bias + col_bias + residual)`, with
/// `tail.row_bias` covering all of `rows` and the residual the one `rows` was checked with
/// (`tail.residual` must be empty).
///
/// When `beta == 0` the old content of C is not read (NaN in C is ignored). The SIMD kernels
/// do a whole column per call and apply the tail in registers; the portable one tile by tile,
/// with the tail in a pass over the tile while it is in L1.
///
/// With [`Dot::Bf16`] (AVX-512 only) `a` and `b` hold bfloat16 pairs and `kc` counts pairs.
#[allow(clippy::too_many_arguments)]
pub(crate) fn micro_column(
    (isa, dot): (Isa, Dot),
    kc: usize,
    a: &[f32],
    b: &[f32],
    ldb: usize,
    checked: &mut CheckedRows,
    col: usize,
    nr_eff: usize,
    alpha: f32,
    beta: f32,
    tail: &TileTail,
) {
    let (mr, nr) = (mr(isa), nr(isa));
    let m = checked.rows.len();
    assert!((1..=nr).contains(&nr_eff) && ldb >= nr);
    assert!(kc == 0 || b.len() >= (kc - 1) * ldb + nr);
    assert!(a.len() >= m.div_ceil(mr) * kc * mr);
    assert!(tail.residual.is_empty() && col + nr_eff <= checked.width);
    let tail = &TileTail {
        residual: checked.residual,
        ..*tail
    };
    check_tail(m, nr_eff, tail);
    check_dot(isa, dot);
    let rows = &mut *checked.rows;
    #[cfg(target_arch = "x86_64")]
    if matches!(isa, Isa::Avx2Fma | Isa::Avx512) {
        let (tiles, edge) = edge_split(isa, dot, nr_eff);
        if tiles > 0 {
            simd_column(
                (isa, dot),
                kc,
                a,
                b,
                ldb,
                rows,
                col,
                tiles,
                alpha,
                beta,
                tail,
            );
        }
        if edge > 0 {
            let t = TileTail {
                col_bias: tail.col_bias.get(tiles..).unwrap_or(&[]),
                ..*tail
            };
            let at = (&b[tiles..], ldb);
            edge_column(isa, kc, a, at, rows, (col + tiles, edge), (alpha, beta), &t);
        }
        return;
    }
    for (ip, tile) in rows.chunks_mut(mr).enumerate() {
        let a_micro = &a[ip * kc * mr..(ip + 1) * kc * mr];
        portable::kernel(kc, a_micro, b, ldb, tile, col, nr_eff, alpha, beta);
        let t = TileTail {
            row_bias: tail.row_bias.get(ip * mr..).unwrap_or(&[]),
            residual: tail.residual.get(ip * mr..).unwrap_or(&[]),
            ..*tail
        };
        apply_tail(tile, col, nr_eff, &t);
    }
}

/// Panics unless `dot` is one the micro-kernels of `isa` do on this CPU: bfloat16 pairs only
/// by AVX-512 with AVX512_BF16.
fn check_dot(isa: Isa, dot: Dot) {
    assert!(
        dot == Dot::F32 || (isa == Isa::Avx512 && cpu::bf16_dot_hardware()),
        "gemm: bfloat16 pairs need AVX-512 with AVX512_BF16"
    );
}

/// Panics unless every row of C has `width` floats from `col` on and `tail` covers them: a
/// bias per row, `width` column biases, a residual piece per row as long as the rows.
fn check_rows_and_tail(rows: &[&mut [f32]], col: usize, width: usize, tail: &TileTail) {
    let m = rows.len();
    assert!(rows.iter().all(|r| r.len() >= col + width));
    let z = tail.residual;
    assert!(z.is_empty() || (z.len() >= m && z.iter().take(m).all(|r| r.len() >= col + width)));
    check_tail(m, width, tail);
}

/// Panics unless the biases of `tail` cover `m` rows and `width` columns.
fn check_tail(m: usize, width: usize, tail: &TileTail) {
    let (rb, cb) = (tail.row_bias, tail.col_bias);
    assert!(rb.is_empty() || rb.len() >= m);
    assert!(cb.is_empty() || cb.len() >= width);
}

/// A row of micro-tiles: the A micro-panel `a` (`kc * mr(isa)` floats, k-major; `rows.len() ≤
/// mr(isa)`) times `panels` B micro-panels `nr(isa)` wide, panel `q` from `b[q * step..]` (its
/// row `k` at `+ k * ldb`), stored at columns `col + q·nr ..` of `rows` with the tail of
/// [`micro_column`] (`tail.col_bias`, when given, covers all `panels · nr` columns;
/// `tail.next_b` is not used: a row's B panels are each read once).
///
/// The A-outer order of a shallow product takes a row of tiles per call: its tiles are short
/// (16 to 128 steps of k), and a call per tile spent a tenth of the time in the checks and
/// set-up around the kernel. [`Dot::Bf16`] as for [`micro_column`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn micro_row(
    (isa, dot): (Isa, Dot),
    kc: usize,
    a: &[f32],
    (b, ldb, step): (&[f32], usize, usize),
    rows: &mut [&mut [f32]],
    col: usize,
    panels: usize,
    alpha: f32,
    beta: f32,
    tail: &TileTail,
) {
    let (mr, nr) = (mr(isa), nr(isa));
    let m = rows.len();
    let width = panels * nr;
    assert!((1..=mr).contains(&m) && ldb >= nr && (kc == 0 || step >= nr));
    assert!(a.len() >= kc * mr);
    assert!(kc == 0 || panels == 0 || b.len() >= (panels - 1) * step + (kc - 1) * ldb + nr);
    check_rows_and_tail(rows, col, width, tail);
    check_dot(isa, dot);
    #[cfg(target_arch = "x86_64")]
    if matches!(isa, Isa::Avx2Fma | Isa::Avx512) {
        assert_supported(isa);
        let raw = RawTail::of(tail);
        let kernel = match (isa, dot) {
            (_, Dot::Bf16) => avx512::kernel_row_bf16,
            (Isa::Avx512, _) => avx512::kernel_row,
            _ => avx2::kernel_row,
        };
        // SAFETY: the CPU supports `isa`, and AVX512_BF16 for pairs (checked); `a` holds kc·mr
        // floats (slots, for pairs) and `b` nr from each q·step + k·ldb, q < panels, k < kc;
        // every row is a distinct `&mut` slice with `panels·nr` floats from `col` on; the row bias holds a value per row, the column
        // bias `panels·nr` values and the residual a row slice per row with `panels·nr` floats
        // from `col` on (all checked above).
        unsafe {
            kernel(
                kc,
                a.as_ptr(),
                (b.as_ptr(), ldb, step),
                panels,
                rows,
                col,
                alpha,
                beta,
                &raw,
            )
        };
        return;
    }
    let mut checked = CheckedRows::new(rows, tail.residual, col + width);
    for q in 0..panels {
        let t = TileTail {
            col_bias: tail.col_bias.get(q * nr..).unwrap_or(&[]),
            residual: &[],
            ..*tail
        };
        micro_column(
            (isa, dot),
            kc,
            a,
            &b[q * step..],
            ldb,
            &mut checked,
            col + q * nr,
            nr,
            alpha,
            beta,
            &t,
        );
    }
}

/// Panics unless the CPU supports `isa` (before any of its `#[target_feature]` kernels runs).
#[cfg(target_arch = "x86_64")]
fn assert_supported(isa: Isa) {
    assert!(
        cpu::supported(isa),
        "{} not supported by this CPU",
        cpu::name(isa)
    );
}

/// [`micro_column`] by the AVX2 or AVX-512 column kernel (lengths checked by the caller). The
/// kernels index the row slices themselves: no per-column pointer arrays.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn simd_column(
    (isa, dot): (Isa, Dot),
    kc: usize,
    a: &[f32],
    b: &[f32],
    ldb: usize,
    rows: &mut [&mut [f32]],
    col: usize,
    nr_eff: usize,
    alpha: f32,
    beta: f32,
    tail: &TileTail,
) {
    assert_supported(isa);
    let raw = RawTail::of(tail);
    let kernel = match (isa, dot) {
        (_, Dot::Bf16) => avx512::kernel_column_bf16,
        (Isa::Avx512, _) => avx512::kernel_column,
        _ => avx2::kernel_column,
    };
    // SAFETY: the CPU supports `isa` (checked), and AVX512_BF16 for pairs; `a` holds
    // ⌈rows/mr⌉·kc·mr floats and `b` nr floats from each k·ldb, k < kc; every row is a
    // distinct `&mut` slice with `nr_eff ≤ nr` floats from `col` on; the row bias holds a value
    // per row, the column bias `nr_eff` values, and the residual a row slice per row of C,
    // each with `nr_eff` floats from `col` on (all but the ISA checked by the caller,
    // `micro_column`).
    unsafe {
        kernel(
            kc,
            a.as_ptr(),
            b.as_ptr(),
            ldb,
            rows,
            col,
            nr_eff,
            alpha,
            beta,
            &raw,
        )
    }
}

/// How a column of C `nr_eff` wide splits between the ISA's register tiles and edge columns
/// ([`edge_column`]): `(tile columns, edge columns)`. AVX-512's tiles compute 16-lane halves,
/// so a column of at most 8, or a half plus at most 8, leaves those last columns to the edge
/// kernel, which costs about an eighth of a half tile per column. A half plus one column (a
/// 7×7 image's 49 = 32 + 17) stays whole: the half tile computes that column in its own loop
/// (one masked 16-lane FMA per k beside its eight full ones), where the edge kernel read A and B
/// again (`kernel_bench`, 1 thread, five interleaved pairs: MobileNetV2's 1×1 layers at 7²
/// 81–88 → 90–99 GFLOP/s). AVX2's 16-column tiles spend twelve FMAs a k whatever their width:
/// a column of at most [`avx2::EDGE_MAX`] goes to its edge kernel (one FMA per column and k).
/// Bfloat16 pairs have no edge kernel: their masked tiles take every column.
fn edge_split(isa: Isa, dot: Dot, nr_eff: usize) -> (usize, usize) {
    match (isa, dot, nr_eff) {
        (Isa::Avx512, Dot::F32, 1..=8) => (0, nr_eff),
        (Isa::Avx512, Dot::F32, 17) => (17, 0),
        (Isa::Avx512, Dot::F32, 17..=24) => (16, nr_eff - 16),
        (Isa::Avx2Fma, Dot::F32, 1..=avx2::EDGE_MAX) => (0, nr_eff),
        _ => (nr_eff, 0),
    }
}

/// The columns `col .. col + n` of `rows` by the edge kernel of `isa` (AVX-512: `n ≤ 8`; AVX2:
/// `n ≤ avx2::EDGE_MAX`): the `⌈rows/mr⌉` A micro-panels of `a` times the columns of `b` (row
/// stride `ldb`): `alpha·A·B + beta·C`, then the tile tail of the portable path
/// ([`apply_tail`]: biases, residual, clamp).
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn edge_column(
    isa: Isa,
    kc: usize,
    a: &[f32],
    (b, ldb): (&[f32], usize),
    rows: &mut [&mut [f32]],
    (col, n): (usize, usize),
    (alpha, beta): (f32, f32),
    tail: &TileTail,
) {
    let mr = mr(isa);
    let widest = if isa == Isa::Avx512 {
        8
    } else {
        avx2::EDGE_MAX
    };
    assert!(matches!(isa, Isa::Avx512 | Isa::Avx2Fma) && cpu::supported(isa));
    assert!(cpu::supported(Isa::Avx2Fma));
    assert!((1..=widest).contains(&n));
    assert!(kc == 0 || b.len() >= (kc - 1) * ldb + n);
    for (ip, tile) in rows.chunks_mut(mr).enumerate() {
        let a_micro = &a[ip * kc * mr..(ip + 1) * kc * mr];
        let (ap, bp) = (a_micro.as_ptr(), b.as_ptr());
        // SAFETY: the CPU supports the ISA (checked; AVX-512 for its panels of
        // `avx512::MR` rows, else AVX2 and FMA for their 6-row ones): `a_micro` holds kc·mr floats, and `b` holds `n ≤ 8`
        // floats from each k·ldb, k < kc (checked).
        let acc: [[f32; 16]; 8] = unsafe {
            if isa == Isa::Avx512 {
                avx512::edge_columns(kc, ap, bp, ldb, n)
            } else {
                avx2::edge_columns::<6>(kc, ap, bp, ldb, n).map(|c| {
                    let mut wide = [0.0; 16];
                    wide[..8].copy_from_slice(&c);
                    wide
                })
            }
        };
        vectorize(
            isa,
            #[inline(always)]
            || {
                for (r, row) in tile.iter_mut().enumerate() {
                    for (j, x) in row[col..col + n].iter_mut().enumerate() {
                        let v = alpha * acc[j][r];
                        *x = if beta != 0.0 { x.mul_add(beta, v) } else { v };
                    }
                }
                let t = TileTail {
                    row_bias: tail.row_bias.get(ip * mr..).unwrap_or(&[]),
                    residual: tail.residual.get(ip * mr..).unwrap_or(&[]),
                    ..*tail
                };
                apply_tail(tile, col, n, &t);
            },
        );
    }
}

/// The tile tail as a pass over the stored tile (same operations, in the same order, as the
/// in-register tail of the SIMD kernels).
#[inline(always)]
fn apply_tail(rows: &mut [&mut [f32]], col: usize, nr_eff: usize, tail: &TileTail) {
    for (r, row) in rows.iter_mut().enumerate() {
        let row = &mut row[col..col + nr_eff];
        if let Some(&v) = tail.row_bias.get(r) {
            row.iter_mut().for_each(|x| *x += v);
        }
        row.iter_mut()
            .zip(tail.col_bias)
            .for_each(|(x, &v)| *x += v);
        if let Some(z) = tail.residual.get(r) {
            row.iter_mut()
                .zip(&z[col..col + nr_eff])
                .for_each(|(x, &v)| *x += v);
        }
        if let Some((lo, hi)) = tail.clamp {
            row.iter_mut().for_each(|x| {
                let v = if *x < lo { lo } else { *x };
                *x = if v > hi { hi } else { v };
            });
        }
    }
}

/// Widest kernel the depthwise plane kernels handle.
#[cfg(target_arch = "x86_64")]
const DW_MAX_KW: usize = 8;

/// Geometry of one depthwise plane, as the per-ISA plane kernels take it.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct DwPlane {
    /// Input rows.
    in_h: usize,
    /// Input columns.
    in_w: usize,
    /// Output rows.
    oh: usize,
    /// Output columns.
    ow: usize,
    /// Kernel rows.
    kh: usize,
    /// Kernel columns (≤ [`DW_MAX_KW`]).
    kw: usize,
    /// Vertical stride.
    stride_h: usize,
    /// Vertical dilation.
    dilation_h: usize,
    /// Zero rows above.
    pad_top: usize,
    /// Zero columns on the left.
    pad_left: usize,
    /// Distance between consecutive input planes, in floats (≥ `in_h·in_w`).
    in_plane: usize,
    /// Distance between consecutive output planes, in floats (≥ `oh·ow`).
    out_plane: usize,
    /// Bounds every output is clamped to before it is stored.
    clamp: Option<(f32, f32)>,
}

/// Geometry of one depthwise-convolution plane for [`depthwise_planes`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct DepthwisePlane {
    /// Input height and width.
    pub in_hw: (usize, usize),
    /// Output height and width.
    pub out_hw: (usize, usize),
    /// Kernel height and width.
    pub kernel: (usize, usize),
    /// Strides (vertical, horizontal).
    pub stride: (usize, usize),
    /// Vertical dilation (the horizontal one must be 1).
    pub dilation_h: usize,
    /// Zero rows above and columns on the left.
    pub pad: (usize, usize),
    /// Distances between consecutive input planes and between consecutive output planes, in
    /// floats: at least `in_h·in_w` and `oh·ow` (equal when the planes are packed; larger for
    /// a band of rows of taller planes).
    pub plane_len: (usize, usize),
}

impl DepthwisePlane {
    /// Whether [`depthwise_planes`] has a kernel for this geometry on `isa` (else it returns
    /// `false` and computes nothing).
    pub(crate) fn has_kernel(&self, isa: Isa) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            // Column positions are computed in i32 lanes by the AVX2 kernel.
            let small =
                self.in_hw.1 < (i32::MAX as usize) / 4 && self.out_hw.1 < (i32::MAX as usize) / 4;
            matches!(isa, Isa::Avx512 | Isa::Avx2Fma)
                && cpu::supported(isa)
                && (self.stride.1 == 1 || self.stride.1 == 2)
                && (1..=DW_MAX_KW).contains(&self.kernel.1)
                && small
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = isa;
            false
        }
    }
}

/// `planes` consecutive planes of a depthwise convolution with horizontal dilation 1 and
/// horizontal stride 1 or 2: plane `c` is
/// `out[c][oy][ox] = bias[c] + Σ w[c][ky][kx] · x[c][oy·sh + ky·dh − pt][ox·sw + kx − pl]`,
/// positions outside the input reading as zero, with input plane `c` of `x` (`in_h·in_w` floats
/// from `c·plane_len.0` on), filter `c` of `w` (`kh·kw` each), `bias[c]` (0 without biases) and
/// output plane `c` of `out` (`oh·ow` floats from `c·plane_len.1` on; the floats between
/// planes are left alone).
///
/// With `clamp = Some((lo, hi))` every output is clamped to `min(max(v, lo), hi)` (NaN kept)
/// before it is stored.
///
/// Returns `false`, computing nothing, when `isa` has no such kernel
/// ([`DepthwisePlane::has_kernel`]) or the buffers are too short for the geometry; the caller
/// then uses its portable loop.
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_planes(
    isa: Isa,
    g: &DepthwisePlane,
    planes: usize,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    clamp: Option<(f32, f32)>,
    out: &mut [f32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let (kh, kw) = g.kernel;
        // Planes `0..planes` of `len` floats each, `step` apart, lie inside `have` floats.
        let holds = |have: usize, len: Option<usize>, step: usize| match len {
            Some(len) if step >= len => {
                planes == 0
                    || (planes - 1)
                        .checked_mul(step)
                        .and_then(|s| s.checked_add(len))
                        .is_some_and(|n| have >= n)
            }
            _ => false,
        };
        let fits = holds(x.len(), g.in_hw.0.checked_mul(g.in_hw.1), g.plane_len.0)
            && holds(w.len(), kh.checked_mul(kw), kh.saturating_mul(kw))
            && holds(out.len(), g.out_hw.0.checked_mul(g.out_hw.1), g.plane_len.1)
            && bias.is_none_or(|b| b.len() >= planes);
        if g.has_kernel(isa) && fits {
            let plane = DwPlane {
                in_h: g.in_hw.0,
                in_w: g.in_hw.1,
                oh: g.out_hw.0,
                ow: g.out_hw.1,
                kh,
                kw,
                stride_h: g.stride.0,
                dilation_h: g.dilation_h,
                pad_top: g.pad.0,
                pad_left: g.pad.1,
                in_plane: g.plane_len.0,
                out_plane: g.plane_len.1,
                clamp,
            };
            let (xp, wp, op) = (x.as_ptr(), w.as_ptr(), out.as_mut_ptr());
            let bp = bias.map_or(std::ptr::null(), <[f32]>::as_ptr);
            if isa == Isa::Avx512 {
                // SAFETY: the CPU supports AVX-512 (`has_kernel`); input plane `c < planes`
                // starts `c·in_plane` floats into `x` and holds in_h·in_w floats, output plane
                // `c` starts `c·out_plane` floats into `out` and holds oh·ow, and `w` and the
                // biases hold planes·kh·kw and planes floats (checked, without overflow);
                // `out` is a `&mut` slice, so it does not overlap `x`; kw ≤ DW_MAX_KW
                // (`has_kernel`).
                unsafe {
                    if g.stride.1 == 1 {
                        avx512_depthwise::depthwise_planes::<1>(&plane, planes, xp, wp, bp, op)
                    } else {
                        avx512_depthwise::depthwise_planes::<2>(&plane, planes, xp, wp, bp, op)
                    }
                }
                return true;
            }
            // SAFETY: the CPU supports AVX2 and FMA (`has_kernel`); the planes, filters,
            // biases and outputs lie inside the buffers as above (checked, without overflow);
            // `out` does not overlap `x`; kw ≤ DW_MAX_KW and the widths fit i32 lanes
            // (`has_kernel`).
            unsafe {
                if g.stride.1 == 1 {
                    avx2_depthwise::depthwise_planes::<1>(&plane, planes, xp, wp, bp, op)
                } else {
                    avx2_depthwise::depthwise_planes::<2>(&plane, planes, xp, wp, bp, op)
                }
            }
            return true;
        }
    }
    let _ = (isa, g, planes, x, w, bias, clamp, out);
    false
}

/// `iters` steps of independent FMA chains `acc = acc·a + b` in the widest registers of `isa`:
/// `(the sum of all the chains' lanes, the flops done)`, or `None` for an ISA without FMA
/// registers or that the CPU lacks. With `a = 1` every lane ends at `iters·b` (exact while
/// that is a multiple of `b` below `2²⁴·b`); the caller should pass `a` opaquely (e.g. through
/// `black_box`), or the compiler may turn the multiply-adds into adds.
pub(crate) fn fma_chains(isa: Isa, iters: usize, a: f32, b: f32) -> Option<(f32, f64)> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if cpu::supported(Isa::Avx512) => {
            // SAFETY: the CPU supports AVX-512F (checked by the match guard).
            let sum = unsafe { avx512::fma_chains(iters, a, b) };
            Some((sum, (iters * 16 * 16 * 2) as f64))
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma if cpu::supported(Isa::Avx2Fma) => {
            // SAFETY: the CPU supports AVX2 and FMA (checked by the match guard).
            let sum = unsafe { avx2::fma_chains(iters, a, b) };
            Some((sum, (iters * 12 * 8 * 2) as f64))
        }
        _ => {
            let _ = (iters, a, b);
            None
        }
    }
}

/// Runs `f` compiled with the instruction set `isa` enabled, so that plain Rust loops inside it
/// (and `#[inline(always)]` helpers they call) are auto-vectorised for that ISA.
///
/// `f` must be a closure marked `#[inline(always)]` (`vectorize(isa, #[inline(always)] || ...)`):
/// otherwise LLVM may keep a large closure out of line, compiled for the baseline ISA, and the
/// trampoline only calls it (every kernel closure was SSE2-only that way until 2026-11-25).
/// The test `every_vectorized_closure_is_inlined` checks every call in `src/kernels/`.
///
/// Falls back to a plain call when `isa` is `Portable` or not supported by the CPU.
#[inline]
pub(crate) fn vectorize<R>(isa: Isa, f: impl FnOnce() -> R) -> R {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 if cpu::supported(Isa::Avx512) => {
            // SAFETY: the CPU supports AVX-512F, AVX2 and FMA (checked by the match guard).
            unsafe { with_avx512(f) }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma if cpu::supported(Isa::Avx2Fma) => {
            // SAFETY: the CPU supports AVX2 and FMA (checked by the match guard).
            unsafe { with_avx2(f) }
        }
        _ => f(),
    }
}

/// Trampoline compiled with AVX-512F; `f` is inlined into it.
///
/// # Safety
/// The CPU must support AVX-512F, AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn with_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Trampoline compiled with AVX2 and FMA; `f` is inlined into it.
///
/// # Safety
/// The CPU must support AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(test)]
mod tests {
    /// Every `vectorize(isa, …)` call in the kernels passes a closure marked
    /// `#[inline(always)]`: without it the closure body can stay out of line, compiled for the
    /// baseline ISA, and the ISA trampoline only calls it.
    #[test]
    fn every_vectorized_closure_is_inlined() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernels");
        let mut dirs = vec![root];
        let mut calls = 0;
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                    continue;
                }
                if path.ends_with("simd/mod.rs") {
                    continue; // defines vectorize (and this test)
                }
                let text = std::fs::read_to_string(&path).unwrap();
                for (at, _) in text.match_indices("simd::vectorize(") {
                    calls += 1;
                    // The call's first two arguments, without whitespace.
                    let args: String = text[at..]
                        .chars()
                        .filter(|c| !c.is_whitespace())
                        .take(80)
                        .collect();
                    let closure = args.split_once(',').map_or("", |(_, rest)| rest);
                    assert!(
                        closure.starts_with("#[inline(always)]"),
                        "{}: a closure given to simd::vectorize must be #[inline(always)]: {args}",
                        path.display()
                    );
                }
            }
        }
        assert!(calls >= 10, "only {calls} vectorize calls found");
    }
}
