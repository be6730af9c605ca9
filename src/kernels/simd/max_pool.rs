//! The safe entry of the max-pooling plane kernel (windows 2 or 3 wide at horizontal stride
//! 2): checks the plane's geometry against its buffers and the CPU before entering
//! [`super::avx512_pool`].

use super::cpu::Isa;
#[cfg(target_arch = "x86_64")]
use super::{avx512_pool, cpu};

/// Most window rows [`max_pool_plane_stride2`] takes.
pub(crate) const MAX_POOL_ROWS: usize = 16;

/// Whether [`max_pool_plane_stride2`] has a kernel on `isa` (AVX-512).
pub(crate) fn has_max_pool_stride2(isa: Isa) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        isa == Isa::Avx512 && cpu::supported(isa)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = isa;
        false
    }
}

/// One plane of a max pooling with windows [`MaxPoolPlane::kw`] (2 or 3) wide at horizontal
/// stride 2 and dilation 1.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MaxPoolPlane<'a> {
    /// Per output row, the window taps `ky0..ky1` that fall inside the input.
    pub taps: &'a [(usize, usize)],
    /// Input height and width.
    pub in_hw: (usize, usize),
    /// Vertical stride, top padding and dilation.
    pub stride_pad_dilation: (usize, usize, usize),
    /// Window width.
    pub kw: usize,
    /// Output width and left padding: output column `ox` reads input columns
    /// `2·ox − pad_left + kx`, `kx < kw`.
    pub out_w_pad_left: (usize, usize),
    /// Input rows past a window's last row whose lines are prefetched meanwhile.
    pub ahead_rows: usize,
}

/// Every output of one max-pooling plane (`x` is one `in_h × in_w` plane, `out` the
/// `taps.len() × out_w` outputs): the maximum of its window's values inside the input, a NaN
/// when any of them is NaN, −∞ when none is inside.
///
/// Returns `false`, computing nothing, when `isa` has no such kernel
/// ([`has_max_pool_stride2`]), `kw` is not 2 or 3, a window has more than [`MAX_POOL_ROWS`]
/// rows or rows outside the plane, or the buffers do not have the plane's sizes; the caller
/// then uses its portable loop.
pub(crate) fn max_pool_plane_stride2(
    isa: Isa,
    g: &MaxPoolPlane,
    x: &[f32],
    out: &mut [f32],
) -> bool {
    let (in_h, in_w) = g.in_hw;
    let (stride, pad, dilation) = g.stride_pad_dilation;
    let (out_w, pad_left) = g.out_w_pad_left;
    let windows_fit = g.taps.iter().enumerate().all(|(oy, &(ky0, ky1))| {
        ky0 >= ky1 || {
            let first = oy
                .checked_mul(stride)
                .and_then(|v| v.checked_add(ky0.checked_mul(dilation)?))
                .and_then(|v| v.checked_sub(pad));
            let last = first.and_then(|f| f.checked_add((ky1 - ky0 - 1).checked_mul(dilation)?));
            ky1 - ky0 <= MAX_POOL_ROWS && last.is_some_and(|l| l < in_h)
        }
    });
    // Column positions are worked out in `isize`.
    let small = out_w < isize::MAX as usize / 4 && pad_left < isize::MAX as usize / 4;
    if !has_max_pool_stride2(isa)
        || !(g.kw == 2 || g.kw == 3)
        || !windows_fit
        || !small
        || in_h.checked_mul(in_w) != Some(x.len())
        || g.taps.len().checked_mul(out_w) != Some(out.len())
    {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let rows = avx512_pool::PlaneRows {
            taps: g.taps,
            in_w,
            stride_pad_dilation: g.stride_pad_dilation,
            out_w_pad_left: g.out_w_pad_left,
            ahead_rows: g.ahead_rows,
        };
        let go = if g.kw == 2 {
            avx512_pool::max_plane_stride2::<2>
        } else {
            avx512_pool::max_plane_stride2::<3>
        };
        // SAFETY: AVX-512F is present, and every window's rows (at most 16) lie inside
        // the plane, `x` being exactly the plane and `out` exactly its outputs (all checked
        // above); `out` is a distinct `&mut`, so it overlaps no input.
        unsafe { go(&rows, x.as_ptr(), out.as_mut_ptr()) };
    }
    true
}
