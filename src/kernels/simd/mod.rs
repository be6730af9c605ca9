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
const MAX_MR: usize = 8;

/// One micro-tile: `C[r][col..col+nr_eff] = alpha * sum_k A[r,k] B[k, ..] + beta * C[..]` for the
/// `rows.len()` rows (1 ≤ rows ≤ mr) of the tile.
///
/// `a` is a packed A micro-panel (`kc * mr(isa)` floats, k-major, rows padded with zeros), `b` a
/// packed B micro-panel (`kc * nr(isa)` floats, k-major). When `beta == 0` the old content of C is
/// not read (NaN in C is ignored).
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
) {
    let mr = mr(isa);
    let nr = nr(isa);
    let m = rows.len();
    assert!((1..=mr).contains(&m) && (1..=nr).contains(&nr_eff));
    assert!(a.len() >= kc * mr && b.len() >= kc * nr);
    for r in rows.iter() {
        assert!(r.len() >= col + nr_eff);
    }
    match isa {
        Isa::Portable => portable::kernel(kc, a, b, rows, col, nr_eff, alpha, beta),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx2Fma => {
            assert!(
                cpu::supported(isa),
                "{} not supported by this CPU",
                cpu::name(isa)
            );
            let mut ptrs = [std::ptr::null_mut::<f32>(); MAX_MR];
            for (p, r) in ptrs.iter_mut().zip(rows.iter_mut()) {
                *p = r[col..col + nr_eff].as_mut_ptr();
            }
            let (ap, bp) = (a.as_ptr(), b.as_ptr());
            if isa == Isa::Avx512 {
                // SAFETY: the CPU supports AVX-512F (checked above); `a` holds kc*8 floats and
                // `b` kc*32 (checked); ptrs[0..m] point to `nr_eff` writable floats each, in
                // distinct `&mut` rows, so they do not overlap; m ≤ 8 and nr_eff ≤ 32.
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
            } else {
                // SAFETY: the CPU supports AVX2+FMA (checked above); `a` holds kc*6 floats and
                // `b` kc*16 (checked); ptrs[0..m] point to `nr_eff` writable floats each, in
                // distinct `&mut` rows, so they do not overlap; m ≤ 6 and nr_eff ≤ 16.
                unsafe {
                    match m {
                        1 => avx2::kernel::<1>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                        2 => avx2::kernel::<2>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                        3 => avx2::kernel::<3>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                        4 => avx2::kernel::<4>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                        5 => avx2::kernel::<5>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                        _ => avx2::kernel::<6>(kc, ap, bp, &ptrs, nr_eff, alpha, beta),
                    }
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        _ => portable::kernel(kc, a, b, rows, col, nr_eff, alpha, beta),
    }
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
/// Returns `false`, computing nothing, when `isa` has no such kernel (only AVX-512 has) or the
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
        if isa == Isa::Avx512
            && cpu::supported(isa)
            && (g.stride.1 == 1 || g.stride.1 == 2)
            && (1..=avx512::DW_MAX_KW).contains(&kw)
            && fits
        {
            let plane = avx512::DwPlane {
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
            // SAFETY: the CPU supports AVX-512F (checked); `x`, `w` and `out` hold at least
            // in_h·in_w, kh·kw and oh·ow floats (checked, without overflow); `out` is a `&mut`
            // slice, so it does not overlap `x`; kw ≤ DW_MAX_KW (checked).
            unsafe {
                if g.stride.1 == 1 {
                    avx512::depthwise_plane::<1>(&plane, xp, wp, bias, op);
                } else {
                    avx512::depthwise_plane::<2>(&plane, xp, wp, bias, op);
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
