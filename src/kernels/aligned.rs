//! Float buffers whose first element starts a cache line (64 bytes: one zmm register).
//!
//! The allocator gives large blocks 16 bytes past a page boundary, so every 64-byte load of a
//! packed GEMM panel in a plain `Vec<f32>` straddles two cache lines; an Intel core pays for
//! such a split load with a second L1 access. An [`AlignedVec`] over-allocates by one line
//! less a float and starts its view at the first aligned element, with no `unsafe`.
#![forbid(unsafe_code)]

use std::ops::{Deref, DerefMut};

/// The alignment, in bytes.
pub const ALIGN: usize = 64;

/// Floats of slack so that an aligned start fits in any allocation (one line less a float).
pub const PAD: usize = ALIGN / std::mem::size_of::<f32>() - 1;

/// The number of floats from `p` (at least 4-aligned, as any `f32` is) to the next
/// [`ALIGN`]-byte boundary: at most [`PAD`].
pub fn to_aligned(p: *const f32) -> usize {
    (p as usize).wrapping_neg() % ALIGN / std::mem::size_of::<f32>()
}

/// A zero-initialised `[f32]` of fixed length whose first element is [`ALIGN`]-byte aligned.
#[derive(Debug, Default)]
pub struct AlignedVec {
    buf: Vec<f32>,
    off: usize,
    len: usize,
}

impl AlignedVec {
    /// `len` zeros.
    pub fn zeroed(len: usize) -> Self {
        if len == 0 {
            return Self::default();
        }
        let buf = vec![0.0f32; len + PAD];
        let off = to_aligned(buf.as_ptr());
        AlignedVec { buf, off, len }
    }
}

impl AlignedVec {
    /// The allocation, where the view starts in it, and the view's length (for storage that
    /// lends the same buffer as another type, `ir::PooledF32`).
    pub fn into_parts(self) -> (Vec<f32>, usize, usize) {
        (self.buf, self.off, self.len)
    }

    /// The view of `len` floats from `off` in `buf`, as [`AlignedVec::into_parts`] gave them:
    /// a fresh zeroed buffer when `buf[off]` is not where `buf` is aligned or the view does
    /// not fit.
    pub fn from_parts(buf: Vec<f32>, off: usize, len: usize) -> Self {
        if off != to_aligned(buf.as_ptr()) || off + len > buf.len() {
            return AlignedVec::zeroed(len);
        }
        AlignedVec { buf, off, len }
    }
}

/// A clone is a fresh aligned allocation (a cloned `Vec` may land elsewhere modulo 64).
impl Clone for AlignedVec {
    fn clone(&self) -> Self {
        let mut c = AlignedVec::zeroed(self.len);
        c.copy_from_slice(self);
        c
    }
}

impl Deref for AlignedVec {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.buf[self.off..self.off + self.len]
    }
}

impl DerefMut for AlignedVec {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf[self.off..self.off + self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_a_cache_line_and_has_the_length_asked() {
        for len in [1usize, 5, 16, 17, 1000, 1 << 16, 1 << 20] {
            let mut v = AlignedVec::zeroed(len);
            assert_eq!(v.len(), len);
            assert!((v.as_ptr() as usize).is_multiple_of(ALIGN), "len {len}");
            assert!(v.iter().all(|&x| x == 0.0));
            v[len - 1] = 3.0;
            assert_eq!(v.last(), Some(&3.0));
            let c = v.clone();
            assert!(
                (c.as_ptr() as usize).is_multiple_of(ALIGN),
                "a clone is aligned too"
            );
            assert_eq!(&c[..], &v[..]);
        }
        assert!(AlignedVec::zeroed(0).is_empty());
    }
}
