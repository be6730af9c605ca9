//! Float storage that lives in a caller's buffer for the length of one run: an ONNXIFI input
//! read in place, or an output written in place, instead of being copied into (or out of) the
//! engine's own storage.
//!
//! The slices are `'static` only by the C-ABI layer's promise: it makes them from the buffers
//! bound with `onnxSetGraphIO`, which the caller keeps valid until the run's output fence is
//! signalled, and every tensor holding one is dropped before the run ends. Nothing here hands
//! the `'static` slice out: the accessors borrow from `self`, and a clone is an owned copy
//! ([`TensorData`](super::TensorData)'s `Clone`), so no reference outlives the tensor.

/// Float elements in a caller's buffer: read-only (a bound input) or writable (a bound output).
pub struct CallerF32(Access);

enum Access {
    Read(&'static [f32]),
    Write(&'static mut [f32]),
}

impl CallerF32 {
    /// A bound input, read in place.
    pub fn read(elems: &'static [f32]) -> CallerF32 {
        CallerF32(Access::Read(elems))
    }

    /// A bound output, written in place.
    pub fn write(elems: &'static mut [f32]) -> CallerF32 {
        CallerF32(Access::Write(elems))
    }

    /// The elements.
    pub fn as_slice(&self) -> &[f32] {
        match &self.0 {
            Access::Read(s) => s,
            Access::Write(s) => s,
        }
    }

    /// The elements, mutably: `None` for a bound input, which is never written.
    pub fn as_mut_slice(&mut self) -> Option<&mut [f32]> {
        match &mut self.0 {
            Access::Read(_) => None,
            Access::Write(s) => Some(s),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The address of the first element (to recognise an output already in its buffer).
    pub fn addr(&self) -> usize {
        self.as_slice().as_ptr() as usize
    }
}

impl std::fmt::Debug for CallerF32 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.0 {
            Access::Read(_) => "read",
            Access::Write(_) => "write",
        };
        write!(f, "CallerF32({kind}, {} elements)", self.len())
    }
}

impl PartialEq for CallerF32 {
    fn eq(&self, other: &CallerF32) -> bool {
        self.as_slice() == other.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bound_input_is_never_writable_and_an_output_is() {
        static IN: [f32; 3] = [1.0, 2.0, 3.0];
        let mut input = CallerF32::read(&IN);
        assert_eq!(input.as_slice(), &[1.0, 2.0, 3.0]);
        assert!(input.as_mut_slice().is_none());
        let out: &'static mut [f32] = Box::leak(vec![0.0f32; 2].into_boxed_slice());
        let mut output = CallerF32::write(out);
        output.as_mut_slice().unwrap()[1] = 5.0;
        assert_eq!(output.as_slice(), &[0.0, 5.0]);
        assert_eq!(output.len(), 2);
    }
}
