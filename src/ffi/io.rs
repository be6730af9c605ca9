//! Reading the caller's tensor descriptors, and moving tensors between the caller's buffers and
//! the engine: float32 buffers that overlap no other binding are used in place for a run, the
//! others are copied in and out.

use super::types::*;
use crate::error::{Error, Result, Status};
use crate::graph::BoundTensor;
use crate::ir::{CallerF32, DataType, Tensor, TensorData};
use std::ffi::CStr;

/// Longest accepted rank of a described tensor.
const MAX_RANK: u32 = 64;

/// A descriptor copied out of the caller's memory and checked field by field.
#[derive(Clone, Debug)]
pub struct Described {
    /// The tensor's name.
    pub name: String,
    /// The tensor's type, shape and buffer.
    pub tensor: BoundTensor,
}

/// Copies and validates an array of descriptors.
///
/// # Safety
/// `ptr` must point to `count` readable descriptors whose `name` and `shape` pointers, once
/// the tag is checked, are valid as the ONNXIFI contract requires (NUL-terminated name; `shape`
/// holding `dimensions` entries).
pub unsafe fn read_descriptors(
    ptr: *const onnxTensorDescriptorV1,
    count: u32,
) -> Result<Vec<Described>> {
    // SAFETY: forwarded contract.
    unsafe { read_descriptors_with(ptr, count, true) }
}

/// [`read_descriptors`] for descriptors that only describe a type and shape: their `buffer`
/// is not looked at (it may be 0) and the result's `addr` must not be used.
///
/// # Safety
/// As for [`read_descriptors`].
pub unsafe fn read_shape_descriptors(
    ptr: *const onnxTensorDescriptorV1,
    count: u32,
) -> Result<Vec<Described>> {
    // SAFETY: forwarded contract.
    unsafe { read_descriptors_with(ptr, count, false) }
}

/// # Safety
/// As for [`read_descriptors`].
unsafe fn read_descriptors_with(
    ptr: *const onnxTensorDescriptorV1,
    count: u32,
    need_buffer: bool,
) -> Result<Vec<Described>> {
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        // SAFETY: the caller gives `count` descriptors at `ptr`; the tag is the first field and
        // is read alone before anything else, as the header requires.
        let tag = unsafe { std::ptr::addr_of!((*ptr.add(i)).tag).read_unaligned() };
        if tag != ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1 {
            return Err(Error::new(
                Status::UnsupportedTag,
                format!("descriptor {i} has tag {tag:#x}, not ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1"),
            ));
        }
        // SAFETY: the tag says this is a V1 descriptor, so the whole struct is readable.
        let d = unsafe { ptr.add(i).read_unaligned() };
        out.push(unsafe { read_one(i, &d, need_buffer) }?);
    }
    Ok(out)
}

/// # Safety
/// As for [`read_descriptors`], for one descriptor.
unsafe fn read_one(i: usize, d: &onnxTensorDescriptorV1, need_buffer: bool) -> Result<Described> {
    if d.name.is_null() {
        return Err(Error::new(
            Status::InvalidPointer,
            format!("descriptor {i} has a NULL name"),
        ));
    }
    // SAFETY: the contract requires a NUL-terminated name that stays valid during the call.
    let name = unsafe { CStr::from_ptr(d.name) }
        .to_string_lossy()
        .into_owned();
    let dtype =
        match DataType::from_code(d.dataType as i64).filter(|_| d.dataType <= i32::MAX as u64) {
            Some(t) if d.dataType != 0 => t,
            _ => {
                return Err(Error::new(
                    Status::InvalidDatatype,
                    format!("'{name}': data type {} is not defined", d.dataType),
                ))
            }
        };
    match d.memoryType {
        ONNXIFI_MEMORY_TYPE_CPU => {}
        ONNXIFI_MEMORY_TYPE_CUDA_BUFFER
        | ONNXIFI_MEMORY_TYPE_OPENCL_BUFFER
        | ONNXIFI_MEMORY_TYPE_OPENGLES_TEXTURE_2D
        | ONNXIFI_MEMORY_TYPE_D3D_RESOURCE => {
            return Err(Error::new(
                Status::UnsupportedMemoryType,
                format!("'{name}': only CPU memory is supported"),
            ))
        }
        m => {
            return Err(Error::new(
                Status::InvalidMemoryType,
                format!("'{name}': memory type {m} is not defined"),
            ))
        }
    }
    #[cfg(feature = "foxi")]
    if d.quantizationParams != 0 || d.isOffline != 0 {
        return Err(Error::new(
            Status::UnsupportedDatatype,
            format!(
                "'{name}': quantized ({} parameters) or offline tensors are not supported",
                d.quantizationParams
            ),
        ));
    }
    if dtype.bits().is_none() {
        return Err(Error::new(
            Status::UnsupportedDatatype,
            format!(
                "'{name}': {} tensors have no byte layout in an ONNXIFI buffer",
                dtype.name()
            ),
        ));
    }
    if d.dimensions > MAX_RANK {
        return Err(Error::new(
            Status::UnsupportedShape,
            format!("'{name}': rank {} is too large", d.dimensions),
        ));
    }
    let mut shape = Vec::with_capacity(d.dimensions as usize);
    if d.dimensions > 0 {
        if d.shape.is_null() {
            return Err(Error::new(
                Status::InvalidPointer,
                format!("'{name}': NULL shape with {} dimensions", d.dimensions),
            ));
        }
        // SAFETY: the contract gives `dimensions` readable entries at `shape`.
        let dims = unsafe { std::slice::from_raw_parts(d.shape, d.dimensions as usize) };
        for &dim in dims {
            if dim == 0 {
                return Err(Error::new(
                    Status::InvalidShape,
                    format!("'{name}': shape {dims:?} has a zero dimension"),
                ));
            }
            shape.push(
                usize::try_from(dim)
                    .map_err(|_| Error::new(Status::UnsupportedShape, "dimension too large"))?,
            );
        }
    }
    if need_buffer && d.buffer == 0 {
        return Err(Error::new(
            Status::InvalidMemoryLocation,
            format!("'{name}': NULL buffer"),
        ));
    }
    let fits = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .and_then(|n| dtype.byte_len(n))
        .is_some_and(|bytes| bytes <= isize::MAX as usize);
    if !fits {
        return Err(Error::new(
            Status::UnsupportedShape,
            format!("'{name}': tensor too large"),
        ));
    }
    Ok(Described {
        name,
        tensor: BoundTensor {
            dtype,
            shape,
            addr: d.buffer,
        },
    })
}

/// Copies a bound input out of the caller's buffer into `storage` (of the input's type; its
/// allocation is reused when large enough).
///
/// # Safety
/// `b.addr` must point to `b.byte_len()` readable bytes (the caller keeps bound buffers alive
/// and ready once the input fence is signalled).
pub unsafe fn read_tensor(b: &BoundTensor, mut storage: TensorData) -> Result<Tensor> {
    // SAFETY: as stated for this function.
    let bytes = unsafe { std::slice::from_raw_parts(b.addr as usize as *const u8, b.byte_len()) };
    let len = b.shape.iter().product::<usize>();
    if storage.dtype() == b.dtype {
        storage.read_le_bytes(bytes, len)?;
    } else {
        storage = TensorData::from_le_bytes(b.dtype, bytes, len)?;
    }
    Tensor::new(b.shape.clone(), storage)
}

/// Copies an output into the caller's buffer, checking type and shape.
///
/// # Safety
/// `b.addr` must point to `b.byte_len()` writable bytes not used by anyone else during the run.
pub unsafe fn write_tensor(name: &str, t: &Tensor, b: &BoundTensor) -> Result<()> {
    if t.dtype() != b.dtype {
        return Err(Error::new(
            Status::MismatchingDatatype,
            format!(
                "output '{name}' is {}, its buffer is {}",
                t.dtype().name(),
                b.dtype.name()
            ),
        ));
    }
    if t.shape != b.shape {
        return Err(Error::new(
            Status::MismatchingShape,
            format!(
                "output '{name}' has shape {:?}, its buffer {:?}",
                t.shape, b.shape
            ),
        ));
    }
    // SAFETY: as stated for this function; the length matches the checked shape and type.
    let bytes = unsafe { std::slice::from_raw_parts_mut(b.addr as usize as *mut u8, b.byte_len()) };
    t.data.write_le_bytes(bytes);
    Ok(())
}

/// The most bound buffers (inputs and outputs together) for which a run looks for overlaps to
/// use buffers in place; a graph with more copies them all.
const MAX_IN_PLACE: usize = 64;

/// Which bound buffers a run uses in place (see [`caller_input`] and [`caller_output`]):
/// float32 buffers aligned for floats whose bytes overlap no other bound buffer (so an output
/// written in place is never read or written through another binding). Returns one flag per
/// input and one per output.
pub fn in_place(inputs: &[BoundTensor], outputs: &[BoundTensor]) -> (Vec<bool>, Vec<bool>) {
    let all: Vec<&BoundTensor> = inputs.iter().chain(outputs).collect();
    let range = |b: &BoundTensor| (b.addr as usize, b.addr as usize + b.byte_len());
    let usable = |i: usize| {
        let b = all[i];
        let (start, end) = range(b);
        b.dtype == DataType::F32
            && all.len() <= MAX_IN_PLACE
            && start % std::mem::align_of::<f32>() == 0
            && all.iter().enumerate().all(|(j, o)| {
                let (s, e) = range(o);
                j == i || e <= start || end <= s
            })
    };
    let flags: Vec<bool> = (0..all.len()).map(usable).collect();
    let (ins, outs) = flags.split_at(inputs.len());
    (ins.to_vec(), outs.to_vec())
}

/// A bound float32 input read in place for the length of one run.
///
/// # Safety
/// `b.addr` is aligned for `f32` and points to `b.byte_len()` readable bytes that stay valid
/// and unwritten while the returned tensor lives; the tensor must be dropped before the run
/// that uses it ends (the caller's buffers are guaranteed only until the output fence).
pub unsafe fn caller_input(b: &BoundTensor) -> Result<Tensor> {
    let len = b.shape.iter().product::<usize>();
    // SAFETY: as stated for this function: aligned, readable for `len` floats, and the
    // `'static` lifetime is not relied on past the run (the tensor is dropped before it ends,
    // and `CallerF32` never hands the slice out beyond a borrow of itself).
    let elems: &'static [f32] = unsafe { std::slice::from_raw_parts(b.addr as usize as _, len) };
    Tensor::new(b.shape.clone(), TensorData::Caller(CallerF32::read(elems)))
}

/// A bound float32 output written in place during one run.
///
/// # Safety
/// `b.addr` is aligned for `f32` and points to `b.byte_len()` writable bytes that nothing else
/// reads or writes while the returned tensor lives (no other bound buffer overlaps them, see
/// [`in_place`]); the tensor must be dropped before the run that uses it ends.
pub unsafe fn caller_output(b: &BoundTensor) -> Result<Tensor> {
    let len = b.shape.iter().product::<usize>();
    // SAFETY: as stated for this function: aligned, writable and unaliased for `len` floats
    // during the run, and the `'static` lifetime is not relied on past it (see `caller_input`).
    let elems: &'static mut [f32] =
        unsafe { std::slice::from_raw_parts_mut(b.addr as usize as _, len) };
    Tensor::new(b.shape.clone(), TensorData::Caller(CallerF32::write(elems)))
}

/// Whether `t` was computed in place into the buffer of `b` (nothing to copy).
pub fn written_in_place(t: &Tensor, b: &BoundTensor) -> bool {
    matches!(&t.data, TensorData::Caller(c) if c.addr() == b.addr as usize) && t.shape == b.shape
}
