//! Float storage recycled by a run's buffer pool: a buffer kept at the longest length it has
//! held, of which a tensor uses the first `len` elements.
//!
//! A plain `Vec` must be exactly as long as its tensor, and lengthening one that held a smaller
//! tensor writes every new element (safe Rust hands out no uninitialised memory): recycling
//! buffers between differently sized values that way zero-filled about 11 MB per MobileNetV2
//! run, 5% of its time. A pooled buffer only ever grows, once, to the largest tensor it serves.
//!
//! The tensor starts at the buffer's first cache-line-aligned element when the buffer was
//! allocated here (see `kernels::aligned`: the GEMM reads activations and writes its output
//! with 64-byte accesses, which straddle two lines from the allocator's 16-byte offset).

use crate::error::{Error, Result, Status};
use crate::kernels::aligned::{to_aligned, AlignedVec, PAD};

/// A pooled float buffer and the tensor in it: `len` elements from `off` (`off + len ≤
/// buf.len()`).
#[derive(Debug)]
pub struct PooledF32 {
    buf: Vec<f32>,
    off: usize,
    len: usize,
}

impl PooledF32 {
    /// A tensor of `len` elements in `buf` (from its first aligned element when the
    /// allocation holds them from there, so that a buffer with room for `len` never
    /// reallocates here), lengthened first when it is shorter (the new elements zero;
    /// fallible like any allocation of the engine).
    pub fn new(mut buf: Vec<f32>, len: usize) -> Result<PooledF32> {
        let off = to_aligned(buf.as_ptr());
        let off = if off + len <= buf.capacity() { off } else { 0 };
        if buf.len() < off {
            // A vector shorter than its aligned start (its capacity holds it: no
            // reallocation): the skipped floats become part of the buffer.
            buf.resize(off, 0.0);
        }
        let mut p = PooledF32 { buf, off, len: 0 };
        p.set_len(len)?;
        Ok(p)
    }

    /// Makes the tensor `len` elements long; the elements kept from earlier uses are stale,
    /// the new ones zero. Reallocates only past [`PooledF32::capacity`]; a new allocation
    /// puts the tensor on a cache line (the kept elements move with it).
    pub fn set_len(&mut self, len: usize) -> Result<()> {
        let end = self.off + len;
        if end > self.buf.len() {
            let kept = self.buf.len() - self.off;
            if end > self.buf.capacity() {
                let want = len + PAD;
                self.buf
                    .try_reserve_exact(want.saturating_sub(self.buf.len()))
                    .map_err(|_| {
                        Error::new(
                            Status::NoSystemMemory,
                            format!("cannot allocate {len} float elements"),
                        )
                    })?;
                let off = to_aligned(self.buf.as_ptr());
                if off + len > self.buf.len() {
                    self.buf.resize(off + len, 0.0);
                }
                self.buf.copy_within(self.off..self.off + kept, off);
                self.off = off;
                // Moved down, the kept elements leave copies of themselves behind.
                self.buf[off + kept..off + len].fill(0.0);
            } else {
                self.buf.resize(end, 0.0);
            }
        }
        self.len = len;
        Ok(())
    }

    /// The tensor's elements.
    pub fn as_slice(&self) -> &[f32] {
        &self.buf[self.off..self.off + self.len]
    }

    /// The tensor's elements, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.buf[self.off..self.off + self.len]
    }

    /// Number of elements of the tensor.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most elements the tensor can have without reallocating.
    pub fn capacity(&self) -> usize {
        self.buf.capacity() - self.off
    }

    /// A tensor of all the floats of a scratch buffer (`kernels::scratch`), aligned as it is.
    pub fn from_aligned(a: AlignedVec) -> PooledF32 {
        let (buf, off, len) = a.into_parts();
        PooledF32 { buf, off, len }
    }

    /// The buffer back as a scratch buffer of every float it holds from the tensor's start
    /// (the contents stale), to give back to `kernels::scratch`.
    pub fn into_aligned(self) -> AlignedVec {
        let len = self.buf.len() - self.off;
        AlignedVec::from_parts(self.buf, self.off, len)
    }

    /// The tensor's elements as a vector of exactly its length (the buffer, its elements
    /// moved to its start and shortened).
    pub fn into_vec(mut self) -> Vec<f32> {
        self.buf.copy_within(self.off..self.off + self.len, 0);
        self.buf.truncate(self.len);
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pooled_buffer_keeps_its_length_and_grows_only_past_it() {
        let mut p = PooledF32::new(vec![1.0, 2.0, 3.0, 4.0], 2).unwrap();
        assert_eq!(p.as_slice(), &[1.0, 2.0]);
        p.set_len(4).unwrap();
        // The elements beyond the tensor were kept, not rewritten.
        assert_eq!(p.as_slice(), &[1.0, 2.0, 3.0, 4.0]);
        p.set_len(6).unwrap();
        assert_eq!(p.as_slice(), &[1.0, 2.0, 3.0, 4.0, 0.0, 0.0]);
        p.as_mut_slice()[5] = 9.0;
        p.set_len(3).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p.into_vec(), vec![1.0, 2.0, 3.0]);
    }

    #[test]
    fn storage_allocated_here_starts_on_a_cache_line() {
        use crate::kernels::aligned::ALIGN;
        // A recycled vector exactly as long as the tensor it now serves keeps it in place,
        // aligned or not: no reallocation.
        let v = vec![2.0f32; 100];
        let at = v.as_ptr();
        let p = PooledF32::new(v, 100).unwrap();
        assert_eq!(p.as_slice().as_ptr(), at);
        assert!(p.capacity() >= 100);
        // A short vector with room (a tensor that left a run, shortened): placed inside its
        // allocation, aligned, whatever its length.
        for len in [0usize, 1, 20] {
            let mut v = Vec::with_capacity(300);
            v.resize(len, 4.0f32);
            let (lo, hi) = (v.as_ptr() as usize, v.as_ptr() as usize + 300 * 4);
            let p = PooledF32::new(v, 200).unwrap();
            let at = p.as_slice().as_ptr() as usize;
            assert!(lo <= at && at + 200 * 4 <= hi, "len {len}");
            assert!(at.is_multiple_of(ALIGN), "len {len}");
            if len == 0 {
                assert!(
                    p.as_slice().iter().all(|&x| x == 0.0),
                    "new elements are zero"
                );
            }
        }
        let aligned = |p: &PooledF32| (p.as_slice().as_ptr() as usize).is_multiple_of(ALIGN);
        let mut p = PooledF32::new(Vec::new(), 1000).unwrap();
        assert!(aligned(&p));
        assert!(p.as_slice().iter().all(|&v| v == 0.0));
        p.as_mut_slice()[..3].copy_from_slice(&[1.0, 2.0, 3.0]);
        // Grown past its capacity: a new allocation, aligned again, the tensor's elements
        // carried over and the new ones zero.
        let cap = p.capacity();
        p.set_len(cap + 100).unwrap();
        assert!(aligned(&p));
        assert_eq!(&p.as_slice()[..4], &[1.0, 2.0, 3.0, 0.0]);
        assert!(p.as_slice()[1000..].iter().all(|&v| v == 0.0));
        // Shrunk and regrown within its capacity: no new allocation.
        let at = p.as_slice().as_ptr();
        p.set_len(10).unwrap();
        p.set_len(cap).unwrap();
        assert_eq!(p.as_slice().as_ptr(), at);
        assert_eq!(p.into_vec()[..3], [1.0, 2.0, 3.0]);
    }

    #[test]
    fn pooled_data_is_float32_data_of_its_tensor_length() {
        use crate::ir::{DataType, TensorData};
        let pooled = || TensorData::Pooled(PooledF32::new(vec![5.0; 8], 3).unwrap());
        let mut d = pooled();
        assert_eq!(d.dtype(), DataType::F32);
        assert_eq!(d.len(), 3);
        assert_eq!(d, TensorData::F32(vec![5.0; 3]));
        assert_ne!(d, TensorData::F32(vec![5.0; 4]));
        assert!(matches!(d.clone(), TensorData::F32(v) if v == vec![5.0; 3]));
        // Zeroing touches the tensor's elements; a longer tensor then sees the stale rest.
        d.reset(2).unwrap();
        d.resize_stale(4).unwrap();
        assert_eq!(d, TensorData::F32(vec![0.0, 0.0, 5.0, 5.0]));
        d.copy_from(&TensorData::F32(vec![1.0, 2.0]));
        assert_eq!(d, TensorData::F32(vec![1.0, 2.0]));
        let mut bytes = vec![0u8; 8];
        d.write_le_bytes(&mut bytes);
        let mut e = pooled();
        e.read_le_bytes(&bytes, 2).unwrap();
        assert_eq!(e, TensorData::F32(vec![1.0, 2.0]));
        assert!(e.read_le_bytes(&bytes, 3).is_err());
    }
}
