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
//!    `alpha`/`beta`; after the last `KC` block the [`Epilogue`] (bias + activation) is applied to
//!    the tile while it is still in registers (AVX2: biases, Relu, Clip) or in L1.
//!
//! Tiny problems run on the calling thread (no rayon overhead). Packing buffers are cached per
//! thread between calls. A B operand can also be generated on the fly while packing (the
//! crate-internal `PanelSource`, used by the convolution's implicit im2col).
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::thread::LocalKey;

use rayon::prelude::*;

use super::activation::Activation;
use super::cpu::{self, Isa};
use super::simd::{self, TileTail};

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
    data: Vec<f32>,
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
        let mut data = vec![0.0; m_pad * a.cols];
        let kcb = kc_block(isa);
        for k0 in (0..a.cols).step_by(kcb) {
            let kc = kcb.min(a.cols - k0);
            pack_a(
                isa,
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
}

/// A constant B operand (`k×n`, e.g. fully-connected weights) packed once into micro-panels.
///
/// Layout: the `KC` block starting at `k0` (height `kc`) begins at `k0 * n_pad`; inside it the
/// `nr`-column panel `q` is `kc*nr` floats, k-major.
#[derive(Clone, Debug)]
pub struct PackedB {
    isa: Isa,
    k: usize,
    n: usize,
    data: Vec<f32>,
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
        let mut data = vec![0.0; n_pad * b.rows];
        let kcb = kc_block(isa);
        for k0 in (0..b.rows).step_by(kcb) {
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
            k: b.rows,
            n: b.cols,
            data,
        }
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

/// An operand: a view to pack on the fly, or prepacked.
#[derive(Clone, Copy)]
enum Src<'a> {
    Mat(MatRef<'a>),
    PackedA(&'a PackedA),
    PackedB(&'a PackedB),
    Panels(&'a dyn PanelSource),
}

/// One parallel unit: rows `i0..i0+rows.len()` × columns `j0..j0+width` of the current C block,
/// with the matching pieces of the epilogue's residual (empty when it has none).
struct Task<'c> {
    i0: usize,
    j0: usize,
    rows: Vec<&'c mut [f32]>,
    residual: Vec<&'c [f32]>,
}

/// The driver behind every public entry point.
#[allow(clippy::too_many_arguments)]
fn gemm(
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
    let k = ka;
    if m == 0 || n == 0 {
        return;
    }
    assert!(ldc >= n, "gemm: ldc {ldc} < n {n}");
    assert!(
        c.len() >= (m - 1) * ldc + n,
        "gemm: C has {} elements, needs {}",
        c.len(),
        (m - 1) * ldc + n
    );
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
        for (i, row) in c.chunks_mut(ldc).take(m).enumerate() {
            let row = &mut row[..n];
            if beta == 0.0 {
                row.fill(0.0);
            } else {
                row.iter_mut().for_each(|v| *v *= beta);
            }
            let z = ep.residual_row(i, n);
            simd::vectorize(isa, || epilogue_row(ep, row, z, i, 0));
        }
        return;
    }

    let threads = if parallel {
        rayon::current_num_threads()
    } else {
        1
    };
    let par = threads > 1 && 2 * m * n * k >= PAR_MIN_FLOPS;
    let m_pad = m.div_ceil(mr) * mr;
    if par {
        let n_pad = n.div_ceil(nr) * nr;
        let a_len = if matches!(a, Src::Mat(_)) {
            m_pad * k
        } else {
            0
        };
        let b_len = match b {
            Src::Mat(_) | Src::Panels(_) => k * n_pad,
            _ => 0,
        };
        if a_len <= KEEP_MAX && b_len <= KEEP_MAX {
            gemm_whole_k(isa, alpha, (a, b), beta, c, ldc, ep, (m, n, k), threads);
            return;
        }
    }

    // Packing buffers, reused across calls on this thread (see `take_buffer`).
    let mut a_buf = match a {
        Src::Mat(_) => take_buffer(&A_BUF, m_pad * kcb.min(k)),
        _ => Vec::new(),
    };
    let mut b_buf = match b {
        Src::Mat(_) | Src::Panels(_) => {
            take_buffer(&B_BUF, kcb.min(k) * NC.min(n.div_ceil(nr) * nr))
        }
        _ => Vec::new(),
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
            let a_pan: &[f32] = match a {
                Src::Mat(v) => {
                    let buf = &mut a_buf[..m_pad * kc];
                    pack_a(isa, &v, pc, kc, buf, par);
                    buf
                }
                Src::PackedA(p) => {
                    let mp = p.m.div_ceil(mr) * mr;
                    &p.data[pc * mp..(pc + kc) * mp]
                }
                Src::PackedB(_) | Src::Panels(_) => unreachable!(),
            };
            let b_pan: &[f32] = match b {
                Src::Mat(v) => {
                    let buf = &mut b_buf[..kc * nc_panels * nr];
                    pack_b(isa, &MatSource(v), pc, kc, jc, nc, buf, par);
                    buf
                }
                Src::Panels(src) => {
                    let buf = &mut b_buf[..kc * nc_panels * nr];
                    pack_b(isa, src, pc, kc, jc, nc, buf, par);
                    buf
                }
                Src::PackedB(p) => {
                    let np = p.n.div_ceil(nr) * nr;
                    let blk = &p.data[pc * np..(pc + kc) * np];
                    &blk[jc * kc..(jc + nc_panels * nr) * kc]
                }
                Src::PackedA(_) => unreachable!(),
            };
            let beta_eff = if first { beta } else { 1.0 };

            let residual = ep.residual.filter(|_| last);
            let mut tasks = split_tasks(c, ldc, m, jc..jc + nc, (mb, cb), residual);
            let run = |t: &mut Task| {
                run_task(
                    isa,
                    t,
                    kc,
                    a_pan,
                    b_pan,
                    alpha,
                    beta_eff,
                    jc,
                    last.then_some(ep),
                );
            };
            if par {
                tasks.par_iter_mut().for_each(run);
            } else {
                tasks.iter_mut().for_each(run);
            }
        }
    }
    give_back_buffer(&A_BUF, a_buf);
    give_back_buffer(&B_BUF, b_buf);
}

/// The task grid of a parallel GEMM over `m` rows and `nc` columns: row blocks of `mb` rows ×
/// column chunks of `cb` columns, about `target` tasks (row blocks of at most [`MC`] rows).
fn task_grid(m: usize, nc: usize, mr: usize, nr: usize, target: usize) -> (usize, usize) {
    let nc_panels = nc.div_ceil(nr);
    let nrb0 = m.div_ceil(MC);
    let ncb = target.div_ceil(nrb0).clamp(1, nc_panels);
    let cb = nc_panels.div_ceil(ncb) * nr;
    let ncb = nc.div_ceil(cb);
    let nrb = nrb0.max(target.div_ceil(ncb)).min(m.div_ceil(mr));
    (m.div_ceil(nrb).div_ceil(mr) * mr, cb)
}

/// Splits the columns `cols` of the `m` rows of C (leading dimension `ldc`) into the tasks of
/// the grid `(mb, cb)`: disjoint `&mut` row pieces, with the matching pieces of `residual`
/// (a matrix of C's shape with its own leading dimension) when it is given.
fn split_tasks<'c>(
    c: &'c mut [f32],
    ldc: usize,
    m: usize,
    cols: std::ops::Range<usize>,
    (mb, cb): (usize, usize),
    residual: Option<(&'c [f32], usize)>,
) -> Vec<Task<'c>> {
    let nrb = m.div_ceil(mb);
    let ncb = cols.len().div_ceil(cb);
    let mut tasks: Vec<Task> = (0..nrb * ncb)
        .map(|t| Task {
            i0: (t / ncb) * mb,
            j0: (t % ncb) * cb,
            rows: Vec::new(),
            residual: Vec::new(),
        })
        .collect();
    for (i, row) in c.chunks_mut(ldc).take(m).enumerate() {
        for (q, piece) in row[cols.clone()].chunks_mut(cb).enumerate() {
            tasks[(i / mb) * ncb + q].rows.push(piece);
        }
        if let Some((z, ld)) = residual {
            for (q, piece) in z[i * ld..][cols.clone()].chunks(cb).enumerate() {
                tasks[(i / mb) * ncb + q].residual.push(piece);
            }
        }
    }
    tasks
}

/// One packing job of [`gemm_whole_k`]: micro-panel `panel` of A (`b == false`) or B at the K
/// block `k0` (`kc` deep), and where it goes.
struct PackJob<'b> {
    b: bool,
    k0: usize,
    kc: usize,
    panel: usize,
    dst: &'b mut [f32],
}

/// Adds a [`PackJob`] for every `width`-wide micro-panel of every K block of one operand, whose
/// block at `k0` takes `padded · kc` floats of `buf` (the layout of [`PackedA`] / [`PackedB`]).
fn push_panel_jobs<'b>(
    jobs: &mut Vec<PackJob<'b>>,
    b: bool,
    mut buf: &'b mut [f32],
    (k, kcb): (usize, usize),
    padded: usize,
    width: usize,
) {
    for k0 in (0..k).step_by(kcb) {
        let kc = kcb.min(k - k0);
        let (blk, rest) = std::mem::take(&mut buf).split_at_mut(padded * kc);
        buf = rest;
        for (panel, dst) in blk.chunks_mut(kc * width).enumerate() {
            jobs.push(PackJob {
                b,
                k0,
                kc,
                panel,
                dst,
            });
        }
    }
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
    threads: usize,
) {
    let (mr, nr) = tile_size(isa);
    let kcb = kc_block(isa);
    let mat_b = match b {
        Src::Mat(v) => Some(MatSource(v)),
        _ => None,
    };
    let b_src: Option<&dyn PanelSource> = match b {
        Src::Panels(p) => Some(p),
        _ => mat_b.as_ref().map(|s| s as &dyn PanelSource),
    };
    let (m_pad, n_pad) = (m.div_ceil(mr) * mr, n.div_ceil(nr) * nr);
    let mut a_buf = match a {
        Src::Mat(_) => take_buffer(&A_BUF, m_pad * k),
        _ => Vec::new(),
    };
    let mut b_buf = match b_src {
        Some(_) => take_buffer(&B_BUF, k * n_pad),
        None => Vec::new(),
    };

    // 1. Pack: one job per micro-panel, each with its own piece of the buffers.
    let mut jobs = Vec::new();
    if let Src::Mat(_) = a {
        push_panel_jobs(
            &mut jobs,
            false,
            &mut a_buf[..m_pad * k],
            (k, kcb),
            m_pad,
            mr,
        );
    }
    if b_src.is_some() {
        push_panel_jobs(
            &mut jobs,
            true,
            &mut b_buf[..k * n_pad],
            (k, kcb),
            n_pad,
            nr,
        );
    }
    jobs.par_iter_mut().for_each(|j| match (j.b, a, b_src) {
        (false, Src::Mat(v), _) => pack_a_panel(isa, &v, j.k0, j.kc, j.panel, j.dst),
        (true, _, Some(src)) => pack_b_panel(isa, src, j.k0, j.kc, 0, n, j.panel, j.dst),
        _ => unreachable!("jobs are made only for the operands to pack"),
    });
    drop(jobs);

    // 2. Compute: the K block at `k0` of either operand starts at `k0 · m_pad` / `k0 · n_pad`,
    // in the prepacked layouts as in the buffers.
    let a_full: &[f32] = match a {
        Src::PackedA(p) => &p.data,
        _ => &a_buf[..m_pad * k],
    };
    let b_full: &[f32] = match b {
        Src::PackedB(p) => &p.data,
        _ => &b_buf[..k * n_pad],
    };
    let grid = task_grid(m, n, mr, nr, 3 * threads);
    let mut tasks = split_tasks(c, ldc, m, 0..n, grid, ep.residual);
    tasks.par_iter_mut().for_each(|t| {
        for k0 in (0..k).step_by(kcb) {
            let kc = kcb.min(k - k0);
            let a_pan = &a_full[k0 * m_pad..(k0 + kc) * m_pad];
            let b_pan = &b_full[k0 * n_pad..(k0 + kc) * n_pad];
            let beta_eff = if k0 == 0 { beta } else { 1.0 };
            let last = k0 + kc == k;
            run_task(
                isa,
                t,
                kc,
                a_pan,
                b_pan,
                alpha,
                beta_eff,
                0,
                last.then_some(ep),
            );
        }
    });
    drop(tasks);
    give_back_buffer(&A_BUF, a_buf);
    give_back_buffer(&B_BUF, b_buf);
}

thread_local! {
    /// Per-thread A packing buffer kept between GEMM calls.
    static A_BUF: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
    /// Per-thread B packing buffer kept between GEMM calls.
    static B_BUF: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Buffers larger than this (in floats) are not kept between calls.
const KEEP_MAX: usize = 1 << 22;

/// Takes this thread's cached buffer (leaving an empty one, so that a GEMM nested in a rayon
/// job stolen while this one waits simply allocates its own) and sizes it to `len`. The content
/// is stale; the packing routines overwrite every element they hand to the micro-kernels.
fn take_buffer(slot: &'static LocalKey<Cell<Vec<f32>>>, len: usize) -> Vec<f32> {
    let mut v = slot.with(Cell::take);
    if v.len() < len {
        v.resize(len, 0.0);
    }
    v
}

/// Returns a buffer to this thread's cache.
fn give_back_buffer(slot: &'static LocalKey<Cell<Vec<f32>>>, v: Vec<f32>) {
    if v.capacity() > 0 && v.capacity() <= KEEP_MAX {
        slot.with(|c| {
            let old = c.take();
            c.set(if old.capacity() > v.capacity() {
                old
            } else {
                v
            });
        });
    }
}

/// Runs the micro-kernels of one task (see [`Task`]); `ep` is `Some` on the last `KC` block.
#[allow(clippy::too_many_arguments)]
fn run_task(
    isa: Isa,
    t: &mut Task,
    kc: usize,
    a_pan: &[f32],
    b_pan: &[f32],
    alpha: f32,
    beta: f32,
    jc: usize,
    ep: Option<&Epilogue>,
) {
    let (mr, nr) = tile_size(isa);
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
    let a_task = &a_pan[(t.i0 / mr) * kc * mr..];
    let b_task = &b_pan[(t.j0 / nr) * kc * nr..];
    for (jp, b_micro) in b_task.chunks(kc * nr).take(width.div_ceil(nr)).enumerate() {
        let col = jp * nr;
        let nr_eff = nr.min(width - col);
        let j = jc + t.j0 + col;
        let rows = &mut t.rows[..];
        let a_rows = &a_task[..rows.len().div_ceil(mr) * kc * mr];
        let tail = match ep {
            Some(e) => TileTail {
                row_bias: match e.bias {
                    Bias::PerRow(b) => Some(&b[t.i0..t.i0 + rows.len()]),
                    _ => None,
                },
                col_bias: match e.bias {
                    Bias::PerCol(b) => Some(&b[j..j + nr_eff]),
                    _ => None,
                },
                residual: (!t.residual.is_empty()).then_some(&t.residual[..]),
                clamp,
            },
            None => TileTail::default(),
        };
        simd::micro_column(
            isa, kc, a_rows, b_micro, rows, col, nr_eff, alpha, beta, &tail,
        );
        if rest != Activation::None {
            simd::vectorize(isa, || {
                for row in rows.iter_mut() {
                    rest.apply_inline(&mut row[col..col + nr_eff]);
                }
            });
        }
    }
}

/// Applies bias, residual (`z`, the matching piece of the residual's row) and activation to
/// `row`, the piece of C row `i` starting at column `j`. Inlined into callers compiled for the
/// right ISA (inside `simd::vectorize`).
#[inline(always)]
fn epilogue_row(ep: &Epilogue, row: &mut [f32], z: Option<&[f32]>, i: usize, j: usize) {
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

/// Packs A columns `k0..k0+kc` (all rows) into `mr`-row micro-panels in `dst` (`m_pad*kc`).
fn pack_a(isa: Isa, a: &MatRef, k0: usize, kc: usize, dst: &mut [f32], par: bool) {
    let (mr, _) = tile_size(isa);
    let pack = |(p, panel): (usize, &mut [f32])| pack_a_panel(isa, a, k0, kc, p, panel);
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

/// Packs the A micro-panel `p` (rows `p·mr ..`, columns `k0..k0+kc`) into `panel` (`kc·mr`).
fn pack_a_panel(isa: Isa, a: &MatRef, k0: usize, kc: usize, p: usize, panel: &mut [f32]) {
    let (mr, _) = tile_size(isa);
    {
        let i0 = p * mr;
        let rows = mr.min(a.rows - i0);
        if a.col_stride == 1 && rows == mr {
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
struct MatSource<'a>(MatRef<'a>);

impl PanelSource for MatSource<'_> {
    fn rows(&self) -> usize {
        self.0.rows
    }

    fn cols(&self) -> usize {
        self.0.cols
    }

    fn fill_panel(&self, k0: usize, kc: usize, j0: usize, cols: usize, nr: usize, dst: &mut [f32]) {
        let b = &self.0;
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
fn pack_b(
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
fn pack_b_panel(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference::{self, Rng};

    fn check_close(got: &[f32], want: &[f32], k: usize, what: &str) {
        let tol = 1e-5 * (k as f32).sqrt().max(1.0);
        for (idx, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g - w).abs() <= tol * (1.0 + w.abs()),
                "{what}: index {idx}: got {g}, want {w}"
            );
        }
    }

    /// Runs one GEMM case on `isa` through every entry point and compares with the oracle.
    #[allow(clippy::too_many_arguments)]
    fn case(
        isa: Isa,
        m: usize,
        n: usize,
        k: usize,
        ta: bool,
        tb: bool,
        alpha: f32,
        beta: f32,
        rng: &mut Rng,
    ) {
        let a_data = rng.vec(m * k);
        let b_data = rng.vec(k * n);
        let a = if ta {
            MatRef::row_major(&a_data, k, m).t()
        } else {
            MatRef::row_major(&a_data, m, k)
        };
        let b = if tb {
            MatRef::row_major(&b_data, n, k).t()
        } else {
            MatRef::row_major(&b_data, k, n)
        };
        let ldc = n + 3;
        let c0 = rng.vec(m * ldc);
        let mut want = c0.clone();
        reference::gemm_ref(alpha, &a, &b, beta, &mut want, ldc);
        let what = format!("{isa:?} m={m} n={n} k={k} ta={ta} tb={tb} a={alpha} b={beta}");
        for parallel in [false, true] {
            let mut got = c0.clone();
            sgemm_with(
                isa,
                parallel,
                alpha,
                a,
                b,
                beta,
                &mut got,
                ldc,
                &Epilogue::NONE,
            );
            check_close(&got, &want, k, &what);
        }
        let pa = PackedA::with_isa(isa, a);
        let mut got = c0.clone();
        sgemm_packed_a(alpha, &pa, b, beta, &mut got, ldc, &Epilogue::NONE);
        check_close(&got, &want, k, &format!("{what} packed A"));
        let pb = PackedB::with_isa(isa, b);
        let mut got = c0.clone();
        sgemm_packed(alpha, a, &pb, beta, &mut got, ldc, &Epilogue::NONE);
        check_close(&got, &want, k, &format!("{what} packed B"));
    }

    fn all_shapes(isa: Isa) {
        let mut rng = Rng::new(7);
        let dims = [1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 31, 33, 64, 65];
        for &m in &dims {
            for &n in &[1, 3, 15, 16, 17, 32, 33, 47, 70] {
                for &k in &[1, 4, 19] {
                    case(isa, m, n, k, false, false, 1.0, 0.0, &mut rng);
                }
            }
        }
        for &(m, n, k) in &[
            (100, 130, 300),
            (97, 301, 513),
            (257, 77, 260),
            (1, 1000, 700),
            (300, 1, 64),
        ] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                case(isa, m, n, k, ta, tb, 0.5, 0.0, &mut rng);
                case(isa, m, n, k, ta, tb, 1.0, -1.5, &mut rng);
            }
        }
        // Wide N crosses the NC block boundary.
        case(isa, 9, NC + 45, 20, false, true, 1.0, 1.0, &mut rng);
    }

    #[test]
    fn gemm_portable() {
        all_shapes(Isa::Portable);
    }

    #[test]
    fn gemm_avx2() {
        if let Some(isa) = cpu::test_isa(Isa::Avx2Fma) {
            all_shapes(isa);
        }
    }

    #[test]
    fn gemm_avx512() {
        if let Some(isa) = cpu::test_isa(Isa::Avx512) {
            all_shapes(isa);
        }
    }

    #[test]
    fn hand_computed() {
        // [1 2; 3 4] · [5 6; 7 8] = [19 22; 43 50]
        let a = [1.0, 2.0, 3.0, 4.0];
        let b = [5.0, 6.0, 7.0, 8.0];
        let mut c = [f32::NAN; 4];
        sgemm(
            1.0,
            MatRef::row_major(&a, 2, 2),
            MatRef::row_major(&b, 2, 2),
            0.0,
            &mut c,
            2,
        );
        assert_eq!(c, [19.0, 22.0, 43.0, 50.0]);
        // beta accumulates, alpha scales; transposed A = [1 3; 2 4].
        let mut c = [1.0, 1.0, 1.0, 1.0];
        sgemm(
            2.0,
            MatRef::row_major(&a, 2, 2).t(),
            MatRef::row_major(&b, 2, 2),
            1.0,
            &mut c,
            2,
        );
        // A^T·B = [1*5+3*7, 1*6+3*8; 2*5+4*7, 2*6+4*8] = [26 30; 38 44]
        assert_eq!(c, [53.0, 61.0, 77.0, 89.0]);
    }

    #[test]
    fn beta_zero_ignores_nan_and_k_zero() {
        for isa in cpu::test_isas() {
            let mut rng = Rng::new(3);
            let (m, n, k) = (19, 37, 11);
            let a = rng.vec(m * k);
            let b = rng.vec(k * n);
            let mut c = vec![f32::NAN; m * n];
            sgemm_with(
                isa,
                true,
                1.0,
                MatRef::row_major(&a, m, k),
                MatRef::row_major(&b, k, n),
                0.0,
                &mut c,
                n,
                &Epilogue::NONE,
            );
            assert!(c.iter().all(|v| v.is_finite()));
            let mut c = vec![2.0f32; 6];
            let empty: [f32; 0] = [];
            sgemm_with(
                isa,
                false,
                1.0,
                MatRef::row_major(&empty, 2, 0),
                MatRef::row_major(&empty, 0, 3),
                0.5,
                &mut c,
                3,
                &Epilogue::NONE,
            );
            assert_eq!(c, vec![1.0; 6]);
        }
    }

    #[test]
    fn epilogue_fused() {
        for isa in cpu::test_isas() {
            let mut rng = Rng::new(11);
            for &(m, n, k) in &[(5, 7, 3), (70, 90, 300), (33, 65, 257)] {
                let a = rng.vec(m * k);
                let b = rng.vec(k * n);
                let row_bias = rng.vec(m);
                let col_bias = rng.vec(n);
                let (am, bm) = (MatRef::row_major(&a, m, k), MatRef::row_major(&b, k, n));
                let clip = Activation::Clip {
                    min: -0.3,
                    max: 0.4,
                };
                for (bias, act) in [
                    (Bias::PerRow(&row_bias), Activation::Relu),
                    (Bias::PerCol(&col_bias), Activation::Sigmoid),
                    (Bias::None, Activation::Tanh),
                    (Bias::PerCol(&col_bias), Activation::Relu),
                    (Bias::PerRow(&row_bias), clip),
                    (Bias::PerCol(&col_bias), clip),
                    (Bias::None, Activation::Relu),
                ] {
                    // The residual has a leading dimension wider than n (a strided view).
                    let ldz = n + 3;
                    let z = rng.vec(m * ldz);
                    for residual in [None, Some((&z[..], ldz))] {
                        let mut want = vec![0.0; m * n];
                        reference::gemm_ref(1.0, &am, &bm, 0.0, &mut want, n);
                        for i in 0..m {
                            for j in 0..n {
                                let v = &mut want[i * n + j];
                                *v += match bias {
                                    Bias::None => 0.0,
                                    Bias::PerRow(b) => b[i],
                                    Bias::PerCol(b) => b[j],
                                };
                                if let Some((z, ld)) = residual {
                                    *v += z[i * ld + j];
                                }
                                *v = reference::activation_ref(act, *v);
                            }
                        }
                        let ep = Epilogue {
                            bias,
                            residual,
                            activation: act,
                        };
                        let what = format!(
                            "{isa:?} {m}x{n}x{k} {act:?} residual {}",
                            residual.is_some()
                        );
                        let mut got = vec![f32::NAN; m * n];
                        sgemm_with(isa, true, 1.0, am, bm, 0.0, &mut got, n, &ep);
                        check_close(&got, &want, k, &what);
                        let pb = PackedB::with_isa(isa, bm);
                        let mut got = vec![f32::NAN; m * n];
                        sgemm_packed(1.0, am, &pb, 0.0, &mut got, n, &ep);
                        check_close(&got, &want, k, &format!("packed {what}"));
                    }
                }
            }
        }
    }

    #[test]
    fn fused_clamp_keeps_nan() {
        // Row 0 of A holds a NaN: row 0 of C is NaN before and after Relu/Clip (like the
        // activation operators); row 1 gives -(k·(j+1)+…) < -1, clamped to the lower bound.
        for isa in cpu::test_isas() {
            let (m, n, k) = (2, 19, 3);
            let a = [f32::NAN, 1.0, 1.0, -1.0, -1.0, -1.0];
            let b: Vec<f32> = (0..k * n).map(|i| 1.0 + i as f32).collect();
            for (act, low) in [
                (Activation::Relu, 0.0),
                (
                    Activation::Clip {
                        min: -1.0,
                        max: 1.0,
                    },
                    -1.0,
                ),
            ] {
                let ep = Epilogue {
                    bias: Bias::None,
                    residual: None,
                    activation: act,
                };
                let mut c = vec![0.5f32; m * n];
                sgemm_with(
                    isa,
                    false,
                    1.0,
                    MatRef::row_major(&a, m, k),
                    MatRef::row_major(&b, k, n),
                    0.0,
                    &mut c,
                    n,
                    &ep,
                );
                assert!(c[..n].iter().all(|v| v.is_nan()), "{isa:?} {act:?}: {c:?}");
                assert!(c[n..].iter().all(|&v| v == low), "{isa:?} {act:?}: {c:?}");
            }
        }
    }
}
