//! Single-precision GEMM, BLIS-style: `C = act(alpha·A·B + beta·C + bias)`.
//!
//! # Algorithm
//! Loops, outermost first (`mr`/`nr` = register tile of the ISA's micro-kernel, see
//! [`tile_size`]):
//! 1. `jc` over columns of C in blocks of [`NC`] (B block `KC×NC`, lives in L3),
//! 2. `pc` over the shared dimension in blocks of `KC` ([`kc_block`]: 256 for AVX-512's 8×32
//!    tile, 512 for AVX2's 6×16 tile, so that a `KC×nr` B micro-panel is 32 KiB),
//!    - pack B block `KC×NC` into `nr`-wide k-major micro-panels (skipped for [`PackedB`]),
//!    - pack A `M×KC` into `mr`-tall k-major micro-panels (skipped for [`PackedA`]),
//! 3. C is split in tasks of up to [`MC`] rows × a column chunk, run in parallel on rayon's
//!    current pool; inside a task `jr` walks `nr`-wide B micro-panels (kept in L1) and `ir` walks
//!    the `mr`-tall A micro-panels of the task (an `MC×KC` A block, kept in L2),
//! 4. the micro-kernel accumulates an `mr×nr` tile in registers over `KC` and writes it back with
//!    `alpha`/`beta`; after the last `KC` block the [`Epilogue`] (biases, residual, activation)
//!    is applied to the tile while it is still in registers (SIMD kernels: biases, residual,
//!    Relu, Clip) or in L1 (other activations, the portable kernel).
//!
//! When several threads share the work and the operands to pack fit the per-thread buffers, the
//! parallel driver instead packs every micro-panel of both operands in one parallel region and
//! runs each task over all K blocks in a second one (two fork-joins per GEMM); where its tasks
//! split only the rows of C, each task packs its own rows of A, one K block at a time.
//!
//! Tiny problems run on the calling thread (no rayon overhead). Packing buffers are cached per
//! thread between calls. A B operand can also be generated on the fly while packing (the
//! crate-internal `PanelSource`, used by the convolution's implicit im2col).
//!
//! A product with one row of A runs as a vector–matrix product instead (`gemv`: B streamed
//! once, no packing).
//!
//! Modules: `driver` (the loops, tasks and buffers), `gemv` (one row of A), `grid` (the
//! parallel task grids, the tasks run over them, and C as rows or as a matrix), `pack`
//! (micro-panel packing).
#![forbid(unsafe_code)]

mod driver;
mod gemv;
mod grid;
mod pack;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_packed;

use super::aligned::AlignedVec;
use super::cpu::{self, Isa};
use super::simd;
#[cfg(test)]
use driver::read_b_in_place;
use driver::{gemm, Src};
#[cfg(test)]
use grid::whole_k_grid;
use pack::{pack_a, pack_b, pack_b_pairs, MatSource};
use simd::Dot;

use super::activation::Activation;

/// Shared-dimension block size (rows of a packed B block / columns of a packed A block) of
/// `isa`: the `KC×nr` B micro-panel should fill about half of L1. Measured on Zen 4 with
/// AVX-512's 8×32 tile, 256 (a 32 KiB panel) beat 128 and 192; on Zen 3 with AVX2's 6×16 tile,
/// 512 (32 KiB) beat 256, 384 and 768 (sgemm 1024³: 81 GFLOP/s against 71 at 256).
pub const fn kc_block(isa: Isa) -> usize {
    match isa {
        Isa::Avx2Fma => 512,
        _ => 256,
    }
}

/// Rows of C per task (A block `MC×KC` of 192–384 KiB stays in L2). A multiple of every `mr`.
/// 192 rather than 96 keeps BERT's 128-token GEMMs in one row block, so each B micro-panel is
/// brought in once per K block (BERT-base 2 layers: ≈ 2% faster on Zen 4; ResNet-50 unchanged).
pub const MC: usize = 192;
/// Columns of C per B block (`KC×NC` floats ≈ 4 MiB). A multiple of every `nr`.
pub const NC: usize = 4096;
/// Below this many flops (`2·m·n·k`) a GEMM runs single-threaded.
const PAR_MIN_FLOPS: usize = 1 << 21;

/// The register tile `(mr, nr)` of the micro-kernel used for `isa`.
pub fn tile_size(isa: Isa) -> (usize, usize) {
    (simd::mr(isa), simd::nr(isa))
}

/// A read-only strided matrix view: element `(i, j)` is `data[i*row_stride + j*col_stride]`.
///
/// A transposed matrix is the same data with the strides swapped ([`MatRef::t`]).
#[derive(Clone, Copy, Debug)]
pub struct MatRef<'a> {
    /// Backing storage.
    pub data: &'a [f32],
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// Distance between rows, in elements.
    pub row_stride: usize,
    /// Distance between columns, in elements.
    pub col_stride: usize,
}

impl<'a> MatRef<'a> {
    /// A dense row-major `rows×cols` view.
    pub fn row_major(data: &'a [f32], rows: usize, cols: usize) -> Self {
        MatRef {
            data,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }

    /// The transposed view (no copy).
    pub fn t(self) -> Self {
        MatRef {
            data: self.data,
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
        }
    }

    /// Panics unless every element of the view lies inside `data`.
    fn check(&self, what: &str) {
        if self.rows == 0 || self.cols == 0 {
            return;
        }
        let last = (self.rows - 1).checked_mul(self.row_stride).and_then(|r| {
            (self.cols - 1)
                .checked_mul(self.col_stride)
                .and_then(|c| r.checked_add(c))
        });
        assert!(
            matches!(last, Some(l) if l < self.data.len()),
            "gemm: matrix {what} ({}x{}, strides {}/{}) exceeds its {} elements",
            self.rows,
            self.cols,
            self.row_stride,
            self.col_stride,
            self.data.len()
        );
    }

    /// Element `(i, j)`.
    #[inline]
    fn at(&self, i: usize, j: usize) -> f32 {
        self.data[i * self.row_stride + j * self.col_stride]
    }
}

/// A bias added to C before the activation.
#[derive(Clone, Copy, Debug, Default)]
pub enum Bias<'a> {
    /// No bias.
    #[default]
    None,
    /// One value per row of C (`len ≥ m`), e.g. per output channel of a convolution.
    PerRow(&'a [f32]),
    /// One value per column of C (`len ≥ n`), e.g. the bias of a fully-connected layer.
    PerCol(&'a [f32]),
}

/// Work fused into the GEMM write-back: `C = act(alpha·A·B + beta·C + bias + residual)`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Epilogue<'a> {
    /// Bias added after accumulation.
    pub bias: Bias<'a>,
    /// A matrix of C's shape added after the bias (e.g. a residual connection): element
    /// `(i, j)` is `data[i * ld + j]`, with `ld` the second field (`≥ n`).
    pub residual: Option<(&'a [f32], usize)>,
    /// Activation applied last.
    pub activation: Activation,
}

impl Epilogue<'static> {
    /// No bias, no residual, no activation.
    pub const NONE: Epilogue<'static> = Epilogue {
        bias: Bias::None,
        residual: None,
        activation: Activation::None,
    };
}

impl Epilogue<'_> {
    fn is_none(&self) -> bool {
        matches!(self.bias, Bias::None)
            && self.residual.is_none()
            && self.activation == Activation::None
    }

    /// Row `i` of the residual, from column 0 (`n` elements).
    fn residual_row(&self, i: usize, n: usize) -> Option<&[f32]> {
        self.residual.map(|(z, ld)| &z[i * ld..i * ld + n])
    }
}

/// A constant A operand (`m×k`, e.g. convolution weights) packed once into micro-panels.
///
/// Layout: the `KC` block starting at `k0` (width `kc`) begins at `k0 * m_pad`; inside it the
/// `mr`-row panel `p` is `kc*mr` floats, k-major.
#[derive(Clone, Debug)]
pub struct PackedA {
    isa: Isa,
    m: usize,
    k: usize,
    data: AlignedVec,
}

impl PackedA {
    /// Packs `a` for the process's ISA.
    pub fn new(a: MatRef) -> Self {
        Self::with_isa(cpu::isa(), a)
    }

    /// Packs `a` for the micro-kernel of `isa`.
    pub fn with_isa(isa: Isa, a: MatRef) -> Self {
        a.check("A");
        let (mr, _) = tile_size(isa);
        let m_pad = a.rows.div_ceil(mr) * mr;
        let mut data = AlignedVec::zeroed(m_pad * a.cols);
        let kcb = kc_block(isa);
        for k0 in (0..a.cols).step_by(kcb) {
            let kc = kcb.min(a.cols - k0);
            pack_a(
                (isa, Dot::F32),
                &a,
                k0,
                kc,
                &mut data[k0 * m_pad..(k0 + kc) * m_pad],
                false,
            );
        }
        PackedA {
            isa,
            m: a.rows,
            k: a.cols,
            data,
        }
    }

    /// Rows of the packed matrix.
    pub fn rows(&self) -> usize {
        self.m
    }

    /// Columns (shared dimension) of the packed matrix.
    pub fn cols(&self) -> usize {
        self.k
    }

    /// The ISA it was packed for.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// Columns `k0..k1` of the packed matrix, packed as a matrix of their own for the same
    /// ISA (a product over part of the shared dimension, e.g. one thread's input channels).
    /// Panics unless `k0 ≤ k1 ≤ cols`.
    pub fn columns(&self, k0: usize, k1: usize) -> PackedA {
        assert!(
            k0 <= k1 && k1 <= self.k,
            "PackedA::columns: {k0}..{k1} of {}",
            self.k
        );
        let (mr, _) = tile_size(self.isa);
        let (kcb, m_pad, width) = (kc_block(self.isa), self.m.div_ceil(mr) * mr, k1 - k0);
        // Row-major, from the layout in the type's documentation.
        let mut plain = vec![0.0f32; self.m * width];
        for (i, row) in plain.chunks_exact_mut(width.max(1)).enumerate() {
            for (j, v) in row.iter_mut().enumerate().take(width) {
                let k = k0 + j;
                let block = k / kcb * kcb;
                let kc = kcb.min(self.k - block);
                *v = self.data[block * m_pad + i / mr * kc * mr + (k - block) * mr + i % mr];
            }
        }
        Self::with_isa(self.isa, MatRef::row_major(&plain, self.m, width))
    }
}

/// A constant B operand (`k×n`, e.g. fully-connected weights) packed once into micro-panels.
///
/// Layout: the `KC` block starting at `k0` (height `kc`) begins at `k0 * n_pad`; inside it the
/// `nr`-column panel `q` is `kc*nr` floats, k-major. Packed as bfloat16 pairs
/// ([`PackedB::bf16_pairs`]), the same with `⌈k/2⌉` rows of 32-bit slots.
#[derive(Clone, Debug)]
pub struct PackedB {
    isa: Isa,
    dot: Dot,
    k: usize,
    n: usize,
    data: AlignedVec,
}

impl PackedB {
    /// Packs `b` for the process's ISA.
    pub fn new(b: MatRef) -> Self {
        Self::with_isa(cpu::isa(), b)
    }

    /// Packs `b` for the micro-kernel of `isa`.
    pub fn with_isa(isa: Isa, b: MatRef) -> Self {
        b.check("B");
        let (_, nr) = tile_size(isa);
        let n_pad = b.cols.div_ceil(nr) * nr;
        let mut data = AlignedVec::zeroed(n_pad * b.rows);
        let kcb = kc_block(isa);
        // An empty B packs to nothing, however many rows it has (no loop over 2^62 of them).
        let rows = if n_pad == 0 { 0 } else { b.rows };
        for k0 in (0..rows).step_by(kcb) {
            let kc = kcb.min(b.rows - k0);
            pack_b(
                isa,
                &MatSource(b),
                k0,
                kc,
                0,
                b.cols,
                &mut data[k0 * n_pad..(k0 + kc) * n_pad],
                false,
            );
        }
        PackedB {
            isa,
            dot: Dot::F32,
            k: b.rows,
            n: b.cols,
            data,
        }
    }

    /// A `k × n` matrix of zeros packed for the micro-kernel of `isa`, to be filled in place
    /// ([`PackedB::piece_offset`], [`PackedB::piece_mut`]): a producer that computes B's
    /// elements writes them where they go, instead of into a row-major matrix then packed.
    pub fn zeroed(isa: Isa, k: usize, n: usize) -> Self {
        let (_, nr) = tile_size(isa);
        let n_pad = n.div_ceil(nr) * nr;
        PackedB {
            isa,
            dot: Dot::F32,
            k,
            n,
            data: AlignedVec::zeroed(n_pad * k),
        }
    }

    /// Where elements `(i, j0..j0 + len)` of a float32 packed matrix start in its storage (a
    /// K block's micro-panels of `nr` columns, each row of a panel contiguous): the same for
    /// every matrix of B's size and ISA. Panics unless the piece lies inside B and inside one
    /// micro-panel.
    pub fn piece_offset(&self, i: usize, j0: usize, len: usize) -> usize {
        let (_, nr) = tile_size(self.isa);
        assert!(
            self.dot == Dot::F32 && i < self.k && j0 + len <= self.n && j0 % nr + len <= nr,
            "gemm: packed B piece ({i}, {j0}..{}) outside B or across a micro-panel",
            j0 + len
        );
        let kcb = kc_block(self.isa);
        let n_pad = self.n.div_ceil(nr) * nr;
        let k0 = i / kcb * kcb;
        let kc = kcb.min(self.k - k0);
        k0 * n_pad + j0 / nr * kc * nr + (i - k0) * nr + j0 % nr
    }

    /// The `len` stored elements from `at` on (a piece [`PackedB::piece_offset`] located).
    pub fn piece_mut(&mut self, at: usize, len: usize) -> &mut [f32] {
        &mut self.data[at..at + len]
    }

    /// Packs `b` rounded to bfloat16 (to nearest, ties to even), for products whose operands
    /// are bfloat16: a GEMM with it rounds A to bfloat16 as it packs it, and multiplies pairs
    /// of the shared dimension with AVX512_BF16's dot products (`vdpbf16ps`), twice the work
    /// per instruction of float32 FMAs, summing in float32. `None` unless
    /// [`cpu::bf16_dot`] (AVX-512 with AVX512_BF16, the SIMD kernels not turned off).
    pub fn bf16_pairs(b: MatRef) -> Option<Self> {
        if !cpu::bf16_dot() {
            return None;
        }
        b.check("B");
        let isa = Isa::Avx512;
        let (_, nr) = tile_size(isa);
        let n_pad = b.cols.div_ceil(nr) * nr;
        let slots = if n_pad == 0 { 0 } else { b.rows.div_ceil(2) };
        let mut data = AlignedVec::zeroed(n_pad * slots);
        let kcb = kc_block(isa);
        for k0 in (0..slots).step_by(kcb) {
            let kc = kcb.min(slots - k0);
            pack_b_pairs(nr, &b, k0, kc, &mut data[k0 * n_pad..(k0 + kc) * n_pad]);
        }
        Some(PackedB {
            isa,
            dot: Dot::Bf16,
            k: b.rows,
            n: b.cols,
            data,
        })
    }

    /// Whether it holds bfloat16 pairs ([`PackedB::bf16_pairs`]).
    pub fn is_bf16(&self) -> bool {
        self.dot == Dot::Bf16
    }

    /// Rows (shared dimension) of the packed matrix.
    pub fn rows(&self) -> usize {
        self.k
    }

    /// Columns of the packed matrix.
    pub fn cols(&self) -> usize {
        self.n
    }

    /// The ISA it was packed for.
    pub fn isa(&self) -> Isa {
        self.isa
    }
}

/// `C = alpha·A·B + beta·C`; C is `a.rows × b.cols`, row-major with leading dimension `ldc`.
///
/// When `beta == 0` the old content of C is ignored (even NaN). Panics if the views do not fit
/// their slices, the inner dimensions differ, or `c` is too short.
pub fn sgemm(alpha: f32, a: MatRef, b: MatRef, beta: f32, c: &mut [f32], ldc: usize) {
    gemm(
        cpu::isa(),
        alpha,
        Src::Mat(a),
        Src::Mat(b),
        beta,
        c,
        ldc,
        &Epilogue::NONE,
        true,
    );
}

/// [`sgemm`] with a fused [`Epilogue`]: `C = act(alpha·A·B + beta·C + bias)`.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_ep(
    alpha: f32,
    a: MatRef,
    b: MatRef,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    epilogue: &Epilogue,
) {
    gemm(
        cpu::isa(),
        alpha,
        Src::Mat(a),
        Src::Mat(b),
        beta,
        c,
        ldc,
        epilogue,
        true,
    );
}

/// [`sgemm_ep`] with a prepacked B.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_packed(
    alpha: f32,
    a: MatRef,
    b: &PackedB,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    epilogue: &Epilogue,
) {
    sgemm_packed_with(true, alpha, a, b, beta, c, ldc, epilogue);
}

/// [`sgemm_packed`] with a parallelism switch (kernels that already parallelise outside).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm_packed_with(
    parallel: bool,
    alpha: f32,
    a: MatRef,
    b: &PackedB,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    epilogue: &Epilogue,
) {
    gemm(
        b.isa,
        alpha,
        Src::Mat(a),
        Src::PackedB(b),
        beta,
        c,
        ldc,
        epilogue,
        parallel,
    );
}

/// [`sgemm_ep`] with a prepacked A.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_packed_a(
    alpha: f32,
    a: &PackedA,
    b: MatRef,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    epilogue: &Epilogue,
) {
    gemm(
        a.isa,
        alpha,
        Src::PackedA(a),
        Src::Mat(b),
        beta,
        c,
        ldc,
        epilogue,
        true,
    );
}

/// [`sgemm_ep`] with an explicit ISA and parallelism switch (tests, benchmarks, and kernels that
/// already parallelise outside).
#[allow(clippy::too_many_arguments)]
pub fn sgemm_with(
    isa: Isa,
    parallel: bool,
    alpha: f32,
    a: MatRef,
    b: MatRef,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    epilogue: &Epilogue,
) {
    gemm(
        isa,
        alpha,
        Src::Mat(a),
        Src::Mat(b),
        beta,
        c,
        ldc,
        epilogue,
        parallel,
    );
}

/// [`sgemm_packed_a`] with a parallelism switch (the ISA is the one `a` was packed for).
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm_packed_a_with(
    parallel: bool,
    alpha: f32,
    a: &PackedA,
    b: MatRef,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    epilogue: &Epilogue,
) {
    gemm(
        a.isa,
        alpha,
        Src::PackedA(a),
        Src::Mat(b),
        beta,
        c,
        ldc,
        epilogue,
        parallel,
    );
}

/// [`sgemm_packed_a_with`], serially, with C given as row slices: row `i` of C is
/// `c[i][col0..col0 + n]`, where C's rows lie between other threads' rows (each thread's rows
/// of every plane of a convolution's output); `ld` is how far apart they lie in memory.
/// Panics where a row is too short.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm_packed_a_rows(
    alpha: f32,
    a: &PackedA,
    b: MatRef,
    beta: f32,
    c: &mut [&mut [f32]],
    (col0, ld): (usize, usize),
    epilogue: &Epilogue,
) {
    let c = grid::COut::Rows { rows: c, col0, ld };
    let operands = (Src::PackedA(a), Src::Mat(b));
    driver::gemm_into(a.isa, alpha, operands, beta, c, epilogue, false);
}

/// A B operand computed on the fly (e.g. implicit im2col), written straight into packed panels.
pub(crate) trait PanelSource: Sync {
    /// Rows of B (the shared dimension).
    fn rows(&self) -> usize;
    /// Columns of B.
    fn cols(&self) -> usize;
    /// Writes `B[k0 + kk][j0 + j]` to `dst[kk * nr + j]` for `kk < kc`, `j < cols` (`cols ≤ nr`).
    /// Entries with `j ≥ cols` are zeroed by the caller.
    #[allow(clippy::too_many_arguments)]
    fn fill_panel(&self, k0: usize, kc: usize, j0: usize, cols: usize, nr: usize, dst: &mut [f32]);
}

/// `C = act(alpha·A·B + beta·C + bias)` with a prepacked A and a B produced by `b`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn sgemm_packed_a_src(
    parallel: bool,
    alpha: f32,
    a: &PackedA,
    b: &dyn PanelSource,
    beta: f32,
    c: &mut [f32],
    ldc: usize,
    epilogue: &Epilogue,
) {
    gemm(
        a.isa,
        alpha,
        Src::PackedA(a),
        Src::Panels(b),
        beta,
        c,
        ldc,
        epilogue,
        parallel,
    );
}
