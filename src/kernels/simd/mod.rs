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
mod avx512;
mod portable;

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

/// Largest `mr` of all ISAs (size of the row-pointer array).
pub(crate) const MAX_MR: usize = 8;

/// What a micro-tile adds and clamps before it stores:
/// `C = clamp(alpha·A·B + beta·C + row_bias + col_bias)`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TileTail<'a> {
    /// One bias per row of the tile (at least `rows.len()` values).
    pub row_bias: Option<&'a [f32]>,
    /// One bias per column of the tile (at least `nr_eff` values).
    pub col_bias: Option<&'a [f32]>,
    /// `min(max(x, lo), hi)`, NaN kept (`Relu` is `(0, +inf)`).
    pub clamp: Option<(f32, f32)>,
}

/// The tail in the form the `unsafe` kernels take (lengths checked by [`micro_tile`]).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct RawTail {
    /// Per-row biases (one readable float per row), or null.
    row_bias: *const f32,
    /// Per-column biases (`nr_eff` readable floats), or null.
    col_bias: *const f32,
    /// Clamp bounds.
    clamp: Option<(f32, f32)>,
}

/// One micro-tile: `C[r][col..col+nr_eff] = alpha * sum_k A[r,k] B[k, ..] + beta * C[..]`, then
/// the `tail` (biases, clamp), for the `rows.len()` rows (1 ≤ rows ≤ mr) of the tile.
///
/// `a` is a packed A micro-panel (`kc * mr(isa)` floats, k-major, rows padded with zeros), `b` a
/// packed B micro-panel (`kc * nr(isa)` floats, k-major). When `beta == 0` the old content of C is
/// not read (NaN in C is ignored). The AVX2 kernel applies the tail in registers; the others in
/// a pass over the tile while it is in L1.
#[allow(clippy::too_many_arguments)]
pub(crate) fn micro_tile(
    isa: Isa,
    kc: usize,
    a: &[f32],
    b: &[f32],
    rows: &mut [&mut [f32]],
    col: usize,
    nr_eff: usize,
    alpha: f32,
    beta: f32,
    tail: &TileTail,
) {
    let mr = mr(isa);
    let nr = nr(isa);
    let m = rows.len();
    assert!((1..=mr).contains(&m) && (1..=nr).contains(&nr_eff));
    assert!(a.len() >= kc * mr && b.len() >= kc * nr);
    for r in rows.iter() {
        assert!(r.len() >= col + nr_eff);
    }
    assert!(tail.row_bias.is_none_or(|v| v.len() >= m));
    assert!(tail.col_bias.is_none_or(|v| v.len() >= nr_eff));
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2Fma {
        avx2_column(kc, a, b, rows, col, nr_eff, alpha, beta, tail);
        return;
    }
    match isa {
        Isa::Portable => portable::kernel(kc, a, b, rows, col, nr_eff, alpha, beta),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => {
            assert!(cpu::supported(isa), "avx512 not supported by this CPU");
            let mut ptrs = [std::ptr::null_mut::<f32>(); MAX_MR];
            for (p, r) in ptrs.iter_mut().zip(rows.iter_mut()) {
                *p = r[col..col + nr_eff].as_mut_ptr();
            }
            let (ap, bp) = (a.as_ptr(), b.as_ptr());
            // SAFETY: the CPU supports AVX-512F (checked above); `a` holds kc*8 floats and `b`
            // kc*32 (checked); ptrs[0..m] point to `nr_eff` writable floats each, in distinct
            // `&mut` rows, so they do not overlap; m ≤ 8 and nr_eff ≤ 32.
            unsafe {
                match m {
                    1 => avx512::kernel::<1>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                    2 => avx512::kernel::<2>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                    3 => avx512::kernel::<3>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                    4 => avx512::kernel::<4>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                    5 => avx512::kernel::<5>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                    6 => avx512::kernel::<6>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                    7 => avx512::kernel::<7>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                    _ => avx512::kernel::<8>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => unreachable!("the AVX2 kernel returned above"),
        #[cfg(not(target_arch = "x86_64"))]
        _ => portable::kernel(kc, a, b, rows, col, nr_eff, alpha, beta),
    }
    vectorize(isa, || apply_tail(rows, col, nr_eff, tail));
}

/// A column of micro-tiles: [`micro_tile`] for every `mr` rows of `rows` (the A micro-panels
/// consecutive in `a`), with `tail.row_bias` covering all of `rows`. The AVX2 kernel does the
/// whole column in one call; the other ISAs tile by tile.
#[allow(clippy::too_many_arguments)]
pub(crate) fn micro_column(
    isa: Isa,
    kc: usize,
    a: &[f32],
    b: &[f32],
    rows: &mut [&mut [f32]],
    col: usize,
    nr_eff: usize,
    alpha: f32,
    beta: f32,
    tail: &TileTail,
) {
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx2Fma {
        avx2_column(kc, a, b, rows, col, nr_eff, alpha, beta, tail);
        return;
    }
    let mr = mr(isa);
    for (ip, tile) in rows.chunks_mut(mr).enumerate() {
        let t = TileTail {
            row_bias: tail.row_bias.map(|v| &v[ip * mr..]),
            ..*tail
        };
        let a_micro = &a[ip * kc * mr..(ip + 1) * kc * mr];
        micro_tile(isa, kc, a_micro, b, tile, col, nr_eff, alpha, beta, &t);
    }
}

/// Rows per call of the AVX2 column kernel (bounds its pointer array).
#[cfg(target_arch = "x86_64")]
const COLUMN_ROWS: usize = 96;

/// [`micro_column`] by the AVX2 column kernel, `COLUMN_ROWS` rows per call.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn avx2_column(
    kc: usize,
    a: &[f32],
    b: &[f32],
    rows: &mut [&mut [f32]],
    col: usize,
    nr_eff: usize,
    alpha: f32,
    beta: f32,
    tail: &TileTail,
) {
    let isa = Isa::Avx2Fma;
    let (mr, nr) = (self::mr(isa), self::nr(isa));
    assert!(cpu::supported(isa), "avx2+fma not supported by this CPU");
    assert!((1..=nr).contains(&nr_eff) && b.len() >= kc * nr);
    assert!(a.len() >= rows.len().div_ceil(mr) * kc * mr);
    assert!(tail.row_bias.is_none_or(|v| v.len() >= rows.len()));
    assert!(tail.col_bias.is_none_or(|v| v.len() >= nr_eff));
    let mut ptrs = [std::ptr::null_mut::<f32>(); COLUMN_ROWS];
    for (chunk, part) in rows.chunks_mut(COLUMN_ROWS).enumerate() {
        let r0 = chunk * COLUMN_ROWS;
        for (p, r) in ptrs.iter_mut().zip(part.iter_mut()) {
            *p = r[col..col + nr_eff].as_mut_ptr();
        }
        let raw = RawTail {
            row_bias: tail.row_bias.map_or(std::ptr::null(), |v| v[r0..].as_ptr()),
            col_bias: tail.col_bias.map_or(std::ptr::null(), <[f32]>::as_ptr),
            clamp: tail.clamp,
        };
        let ap = a[r0 / mr * kc * mr..].as_ptr();
        // SAFETY: the CPU supports AVX2+FMA (checked); `a` holds ⌈rows/6⌉·kc·6 floats from the
        // chunk's first panel on (checked; COLUMN_ROWS is a multiple of 6), `b` kc·16 (checked);
        // the pointers come from distinct `&mut` rows, each with `nr_eff ≤ 16` floats from
        // `col` on (sliced above), so they are valid and disjoint; the row bias holds a value
        // for every row from `r0` on and the column bias `nr_eff` values (checked).
        unsafe {
            avx2::kernel_column(
                kc,
                ap,
                b.as_ptr(),
                &ptrs[..part.len()],
                nr_eff,
                alpha,
                beta,
                &raw,
            );
        }
    }
}

/// The tile tail as a pass over the stored tile (same operations, in the same order, as the
/// in-register tail of the AVX2 kernel).
#[inline(always)]
fn apply_tail(rows: &mut [&mut [f32]], col: usize, nr_eff: usize, tail: &TileTail) {
    if tail.row_bias.is_none() && tail.col_bias.is_none() && tail.clamp.is_none() {
        return;
    }
    for (r, row) in rows.iter_mut().enumerate() {
        let row = &mut row[col..col + nr_eff];
        if let Some(b) = tail.row_bias {
            let v = b[r];
            row.iter_mut().for_each(|x| *x += v);
        }
        if let Some(b) = tail.col_bias {
            row.iter_mut().zip(b).for_each(|(x, &v)| *x += v);
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
}

/// Geometry of one depthwise-convolution plane for [`depthwise_plane`].
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
}

/// One plane of a depthwise convolution with horizontal dilation 1 and horizontal stride 1 or
/// 2: `out[oy][ox] = bias + Σ w[ky][kx] · x[oy·sh + ky·dh − pt][ox·sw + kx − pl]`, positions
/// outside the input reading as zero.
///
/// Returns `false`, computing nothing, when `isa` has no such kernel (AVX-512 and AVX2 have) or the
/// geometry is outside what it handles; the caller then uses its portable loop.
pub(crate) fn depthwise_plane(
    isa: Isa,
    g: &DepthwisePlane,
    x: &[f32],
    w: &[f32],
    bias: f32,
    out: &mut [f32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let (kh, kw) = g.kernel;
        // Column positions are computed in i32 lanes by the AVX2 kernel.
        let small = g.in_hw.1 < (i32::MAX as usize) / 4 && g.out_hw.1 < (i32::MAX as usize) / 4;
        let fits = g
            .in_hw
            .0
            .checked_mul(g.in_hw.1)
            .is_some_and(|n| x.len() >= n)
            && kh.checked_mul(kw).is_some_and(|n| w.len() >= n)
            && g.out_hw
                .0
                .checked_mul(g.out_hw.1)
                .is_some_and(|n| out.len() >= n);
        let has_kernel = matches!(isa, Isa::Avx512 | Isa::Avx2Fma) && cpu::supported(isa);
        if has_kernel
            && (g.stride.1 == 1 || g.stride.1 == 2)
            && (1..=DW_MAX_KW).contains(&kw)
            && fits
            && small
        {
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
            };
            let (xp, wp, op) = (x.as_ptr(), w.as_ptr(), out.as_mut_ptr());
            // SAFETY: the CPU supports `isa` (checked); `x`, `w` and `out` hold at least
            // in_h·in_w, kh·kw and oh·ow floats (checked, without overflow); `out` is a `&mut`
            // slice, so it does not overlap `x`; kw ≤ DW_MAX_KW and the widths fit i32 lanes
            // (checked).
            unsafe {
                match (isa, g.stride.1) {
                    (Isa::Avx512, 1) => avx512::depthwise_plane::<1>(&plane, xp, wp, bias, op),
                    (Isa::Avx512, _) => avx512::depthwise_plane::<2>(&plane, xp, wp, bias, op),
                    (_, 1) => avx2::depthwise_plane::<1>(&plane, xp, wp, bias, op),
                    _ => avx2::depthwise_plane::<2>(&plane, xp, wp, bias, op),
                }
            }
            return true;
        }
    }
    let _ = (isa, g, x, w, bias, out);
    false
}

/// Runs `f` compiled with the instruction set `isa` enabled, so that plain Rust loops inside it
/// (and `#[inline(always)]` helpers they call) are auto-vectorised for that ISA.
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
