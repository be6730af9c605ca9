//! Well-formed tensor descriptors of CPU memory.

use onnxifi_rust::ffi::types::*;
use std::ffi::CStr;

/// A descriptor of the tensor `name` of type `data_type` and shape `shape` at `buffer` in CPU
/// memory (the name and shape are borrowed: they must outlive the descriptor's use).
pub fn cpu_descriptor(
    name: &CStr,
    data_type: onnxEnum,
    shape: &[u64],
    buffer: u64,
) -> onnxTensorDescriptorV1 {
    onnxTensorDescriptorV1 {
        tag: ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1,
        name: name.as_ptr(),
        dataType: data_type,
        memoryType: ONNXIFI_MEMORY_TYPE_CPU,
        dimensions: shape.len() as u32,
        shape: shape.as_ptr(),
        buffer,
    }
}
