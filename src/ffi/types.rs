//! The C types and constants of the ONNXIFI API, laid out exactly as the official onnx 1.12.0
//! `onnxifi.h` and `onnxifi_ext.h` declare them. This file is cbindgen's input for
//! `include/onnxifi.h`.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]

use std::os::raw::{c_char, c_void};

/// Opaque backend ID handle (one per device × software backend).
pub type onnxBackendID = *mut c_void;
/// Opaque backend handle.
pub type onnxBackend = *mut c_void;
/// Opaque graph handle.
pub type onnxGraph = *mut c_void;
/// Opaque event handle.
pub type onnxEvent = *mut c_void;
/// Return code of every ONNXIFI function.
pub type onnxStatus = i32;
/// A 64-bit enumeration (low 32 bits standard, high 32 bits vendor).
pub type onnxEnum = u64;
/// A 64-bit set of flags.
pub type onnxBitfield = u64;
/// A pointer stored as a 64-bit integer.
pub type onnxPointer = u64;
/// The state of an event.
pub type onnxEventState = i32;
/// An info query id for `onnxGetBackendInfo`.
pub type onnxBackendInfo = i32;
/// A generic function pointer returned by `onnxGetExtensionFunctionAddress`.
pub type onnxExtensionFunctionPointer = Option<unsafe extern "C" fn() -> onnxStatus>;

/// Success.
pub const ONNXIFI_STATUS_SUCCESS: onnxStatus = 0x0000;
/// Success with a caveat.
pub const ONNXIFI_STATUS_FALLBACK: onnxStatus = 0x0001;
/// Invalid backend ID.
pub const ONNXIFI_STATUS_INVALID_ID: onnxStatus = 0x0101;
/// Invalid size.
pub const ONNXIFI_STATUS_INVALID_SIZE: onnxStatus = 0x0102;
/// Invalid pointer.
pub const ONNXIFI_STATUS_INVALID_POINTER: onnxStatus = 0x0103;
/// Invalid protobuf.
pub const ONNXIFI_STATUS_INVALID_PROTOBUF: onnxStatus = 0x0104;
/// Invalid model.
pub const ONNXIFI_STATUS_INVALID_MODEL: onnxStatus = 0x0105;
/// Invalid backend handle.
pub const ONNXIFI_STATUS_INVALID_BACKEND: onnxStatus = 0x0106;
/// Invalid graph handle.
pub const ONNXIFI_STATUS_INVALID_GRAPH: onnxStatus = 0x0107;
/// Invalid event handle.
pub const ONNXIFI_STATUS_INVALID_EVENT: onnxStatus = 0x0108;
/// Invalid object state.
pub const ONNXIFI_STATUS_INVALID_STATE: onnxStatus = 0x0109;
/// Invalid tensor name.
pub const ONNXIFI_STATUS_INVALID_NAME: onnxStatus = 0x010A;
/// Invalid shape.
pub const ONNXIFI_STATUS_INVALID_SHAPE: onnxStatus = 0x010B;
/// Invalid data type.
pub const ONNXIFI_STATUS_INVALID_DATATYPE: onnxStatus = 0x010C;
/// Invalid memory type.
pub const ONNXIFI_STATUS_INVALID_MEMORY_TYPE: onnxStatus = 0x010D;
/// Invalid memory location.
pub const ONNXIFI_STATUS_INVALID_MEMORY_LOCATION: onnxStatus = 0x010E;
/// Invalid fence type.
pub const ONNXIFI_STATUS_INVALID_FENCE_TYPE: onnxStatus = 0x010F;
/// Invalid property.
pub const ONNXIFI_STATUS_INVALID_PROPERTY: onnxStatus = 0x0110;
/// Unsupported structure tag.
pub const ONNXIFI_STATUS_UNSUPPORTED_TAG: onnxStatus = 0x0201;
/// Unsupported IR or opset version.
pub const ONNXIFI_STATUS_UNSUPPORTED_VERSION: onnxStatus = 0x0202;
/// Unsupported operator.
pub const ONNXIFI_STATUS_UNSUPPORTED_OPERATOR: onnxStatus = 0x0203;
/// Unsupported attribute.
pub const ONNXIFI_STATUS_UNSUPPORTED_ATTRIBUTE: onnxStatus = 0x0204;
/// Unsupported shape.
pub const ONNXIFI_STATUS_UNSUPPORTED_SHAPE: onnxStatus = 0x0205;
/// Unsupported data type.
pub const ONNXIFI_STATUS_UNSUPPORTED_DATATYPE: onnxStatus = 0x0206;
/// Unsupported memory type.
pub const ONNXIFI_STATUS_UNSUPPORTED_MEMORY_TYPE: onnxStatus = 0x0207;
/// Unsupported fence type.
pub const ONNXIFI_STATUS_UNSUPPORTED_FENCE_TYPE: onnxStatus = 0x0208;
/// Unsupported property.
pub const ONNXIFI_STATUS_UNSUPPORTED_PROPERTY: onnxStatus = 0x0209;
/// A required name has no binding.
pub const ONNXIFI_STATUS_UNIDENTIFIED_NAME: onnxStatus = 0x0301;
/// Shape mismatch.
pub const ONNXIFI_STATUS_MISMATCHING_SHAPE: onnxStatus = 0x0302;
/// Data type mismatch.
pub const ONNXIFI_STATUS_MISMATCHING_DATATYPE: onnxStatus = 0x0303;
/// Out of system memory.
pub const ONNXIFI_STATUS_NO_SYSTEM_MEMORY: onnxStatus = 0x0401;
/// Out of device memory.
pub const ONNXIFI_STATUS_NO_DEVICE_MEMORY: onnxStatus = 0x0402;
/// Out of system resources.
pub const ONNXIFI_STATUS_NO_SYSTEM_RESOURCES: onnxStatus = 0x0403;
/// Out of device resources.
pub const ONNXIFI_STATUS_NO_DEVICE_RESOURCES: onnxStatus = 0x0404;
/// Backend unavailable.
pub const ONNXIFI_STATUS_BACKEND_UNAVAILABLE: onnxStatus = 0x0405;
/// Internal error.
pub const ONNXIFI_STATUS_INTERNAL_ERROR: onnxStatus = 0x0406;
/// The backend failed in a way that leaves it unusable (foxi dialect only).
#[cfg(feature = "foxi")]
pub const ONNXIFI_STATUS_FATAL_ERROR: onnxStatus = 0x0407;

/// Event state reported on failure.
pub const ONNXIFI_EVENT_STATE_INVALID: onnxEventState = 0;
/// The event has not been signalled.
pub const ONNXIFI_EVENT_STATE_NONSIGNALLED: onnxEventState = 0x16BD;
/// The event has been signalled.
pub const ONNXIFI_EVENT_STATE_SIGNALLED: onnxEventState = 0x3395;

/// Neural processing unit.
pub const ONNXIFI_DEVICE_TYPE_NPU: onnxEnum = 0x01;
/// Digital signal processor.
pub const ONNXIFI_DEVICE_TYPE_DSP: onnxEnum = 0x02;
/// Graphics processor.
pub const ONNXIFI_DEVICE_TYPE_GPU: onnxEnum = 0x04;
/// General-purpose processor.
pub const ONNXIFI_DEVICE_TYPE_CPU: onnxEnum = 0x08;
/// Field-programmable gate array.
pub const ONNXIFI_DEVICE_TYPE_FPGA: onnxEnum = 0x10;
/// Several kinds of devices.
pub const ONNXIFI_DEVICE_TYPE_HETEROGENEOUS: onnxEnum = 0x20;

/// Objects may be used from any thread.
pub const ONNXIFI_CAPABILITY_THREAD_SAFE: onnxBitfield = 0x01;
/// Symbolic batch sizes are accepted.
pub const ONNXIFI_CAPABILITY_SYMBOLIC_BATCH_SIZE: onnxBitfield = 0x02;
/// Any dimension may be symbolic.
pub const ONNXIFI_CAPABILITY_SYMBOLIC_SIZE_TENSORS: onnxBitfield = 0x04;
/// The batch size may depend on data.
pub const ONNXIFI_CAPABILITY_VARIABLE_BATCH_SIZE: onnxBitfield = 0x08;
/// Output sizes may depend on data.
pub const ONNXIFI_CAPABILITY_VARIABLE_SIZE_OUTPUTS: onnxBitfield = 0x10;
/// The device can be unplugged.
pub const ONNXIFI_CAPABILITY_HOT_PLUGGABLE: onnxBitfield = 0x20;

/// Info: ONNXIFI version (uint64).
pub const ONNXIFI_BACKEND_ONNXIFI_VERSION: onnxBackendInfo = 0;
/// Info: backend name (string).
pub const ONNXIFI_BACKEND_NAME: onnxBackendInfo = 1;
/// Info: vendor (string).
pub const ONNXIFI_BACKEND_VENDOR: onnxBackendInfo = 2;
/// Info: backend version (string).
pub const ONNXIFI_BACKEND_VERSION: onnxBackendInfo = 3;
/// Info: extensions (space-separated string).
pub const ONNXIFI_BACKEND_EXTENSIONS: onnxBackendInfo = 4;
/// Info: device name (string).
pub const ONNXIFI_BACKEND_DEVICE: onnxBackendInfo = 5;
/// Info: device type (onnxEnum).
pub const ONNXIFI_BACKEND_DEVICE_TYPE: onnxBackendInfo = 6;
/// Info: supported ONNX IR versions (string).
pub const ONNXIFI_BACKEND_ONNX_IR_VERSION: onnxBackendInfo = 7;
/// Info: supported opsets (string).
pub const ONNXIFI_BACKEND_OPSET_VERSION: onnxBackendInfo = 8;
/// Info: capabilities (onnxBitfield).
pub const ONNXIFI_BACKEND_CAPABILITIES: onnxBackendInfo = 10;
/// Info: backend init properties (onnxBitfield).
pub const ONNXIFI_BACKEND_INIT_PROPERTIES: onnxBackendInfo = 11;
/// Info: memory types (onnxBitfield).
pub const ONNXIFI_BACKEND_MEMORY_TYPES: onnxBackendInfo = 12;
/// Info: graph init properties (onnxBitfield).
pub const ONNXIFI_BACKEND_GRAPH_INIT_PROPERTIES: onnxBackendInfo = 13;
/// Info: synchronization types (onnxBitfield).
pub const ONNXIFI_BACKEND_SYNCHRONIZATION_TYPES: onnxBackendInfo = 14;
/// Info: memory size in bytes (uint64).
pub const ONNXIFI_BACKEND_MEMORY_SIZE: onnxBackendInfo = 20;
/// Info: maximum graph size in bytes (uint64).
pub const ONNXIFI_BACKEND_MAX_GRAPH_SIZE: onnxBackendInfo = 21;
/// Info: maximum number of graphs (uint64).
pub const ONNXIFI_BACKEND_MAX_GRAPH_COUNT: onnxBackendInfo = 22;
/// Info: fp32 multiply-accumulates per second (uint64).
pub const ONNXIFI_BACKEND_MACS_FP32: onnxBackendInfo = 30;
/// Info: fp16 multiply-accumulates per second (uint64).
pub const ONNXIFI_BACKEND_MACS_FP16: onnxBackendInfo = 31;
/// Info: memory bandwidth in bytes per second (uint64).
pub const ONNXIFI_BACKEND_MEMORY_BANDWIDTH: onnxBackendInfo = 35;
/// Info: CPU memory read bandwidth (uint64).
pub const ONNXIFI_BACKEND_CPU_MEMORY_READ_BANDWIDTH: onnxBackendInfo = 36;
/// Info: CPU memory write bandwidth (uint64).
pub const ONNXIFI_BACKEND_CPU_MEMORY_WRITE_BANDWIDTH: onnxBackendInfo = 37;
/// Info: PCI bus id (uint64).
pub const ONNXIFI_BACKEND_PCI_BUS_ID: onnxBackendInfo = 40;
/// Info: PCI device id (uint64).
pub const ONNXIFI_BACKEND_PCI_DEVICE_ID: onnxBackendInfo = 41;
/// Info: PCI domain id (uint64).
pub const ONNXIFI_BACKEND_PCI_DOMAIN_ID: onnxBackendInfo = 42;
/// Info: DirectX adapter LUID.
pub const ONNXIFI_BACKEND_DIRECTX_ID: onnxBackendInfo = 43;
/// Info: CUDA device index (uint64).
pub const ONNXIFI_BACKEND_CUDA_INDEX: onnxBackendInfo = 44;
/// Info: OpenCL platform id.
pub const ONNXIFI_BACKEND_OPENCL_PLATFORM_ID: onnxBackendInfo = 45;
/// Info: OpenCL device id.
pub const ONNXIFI_BACKEND_OPENCL_DEVICE_ID: onnxBackendInfo = 46;
/// Backend info of this library: the SIMD kernels in use (`avx512`, `avx2+fma`, `portable`),
/// a string.
pub const ONNXIFI_BACKEND_SIMD_RUST: onnxBackendInfo = 0x5253_0001;
/// Backend info of this library: the operator table, a string of one line per operator:
/// `domain:op_type oldest..newest since-version types,...` (`ai.onnx` for the default domain).
pub const ONNXIFI_BACKEND_OPERATORS_RUST: onnxBackendInfo = 0x5253_0002;
/// Backend info of this library: the process-wide operator profile collected when
/// `ONNXIFI_RUST_PROFILE` is set, a string of one line per operator, slowest first:
/// `op_type<TAB>calls<TAB>total_ns` (empty when profiling is off).
pub const ONNXIFI_BACKEND_PROFILE_RUST: onnxBackendInfo = 0x5253_0003;
/// Backend info of this library: the default number of compute threads of a new backend
/// (`ONNXIFI_RUST_NUM_THREADS`, else every core), a uint64_t.
pub const ONNXIFI_BACKEND_NUM_THREADS_RUST: onnxBackendInfo = 0x5253_0004;

/// Data type: undefined.
pub const ONNXIFI_DATATYPE_UNDEFINED: onnxEnum = 0;
/// Data type: IEEE half.
pub const ONNXIFI_DATATYPE_FLOAT16: onnxEnum = 10;
/// Data type: IEEE single.
pub const ONNXIFI_DATATYPE_FLOAT32: onnxEnum = 1;
/// Data type: IEEE double.
pub const ONNXIFI_DATATYPE_FLOAT64: onnxEnum = 11;
/// Data type: int8.
pub const ONNXIFI_DATATYPE_INT8: onnxEnum = 3;
/// Data type: int16.
pub const ONNXIFI_DATATYPE_INT16: onnxEnum = 5;
/// Data type: int32.
pub const ONNXIFI_DATATYPE_INT32: onnxEnum = 6;
/// Data type: int64.
pub const ONNXIFI_DATATYPE_INT64: onnxEnum = 7;
/// Data type: uint8.
pub const ONNXIFI_DATATYPE_UINT8: onnxEnum = 2;
/// Data type: uint16.
pub const ONNXIFI_DATATYPE_UINT16: onnxEnum = 4;
/// Data type: uint32.
pub const ONNXIFI_DATATYPE_UINT32: onnxEnum = 12;
/// Data type: uint64.
pub const ONNXIFI_DATATYPE_UINT64: onnxEnum = 13;
/// Data type: complex of two singles.
pub const ONNXIFI_DATATYPE_COMPLEX64: onnxEnum = 14;
/// Data type: complex of two doubles.
pub const ONNXIFI_DATATYPE_COMPLEX128: onnxEnum = 15;
/// Data type: bfloat16.
pub const ONNXIFI_DATATYPE_BFLOAT16: onnxEnum = 16;

/// Memory type: cacheable CPU memory.
pub const ONNXIFI_MEMORY_TYPE_CPU: onnxEnum = 0;
/// Memory type: CUDA buffer.
pub const ONNXIFI_MEMORY_TYPE_CUDA_BUFFER: onnxEnum = 1;
/// Memory type: OpenCL buffer.
pub const ONNXIFI_MEMORY_TYPE_OPENCL_BUFFER: onnxEnum = 2;
/// Memory type: OpenGL ES 2D texture.
pub const ONNXIFI_MEMORY_TYPE_OPENGLES_TEXTURE_2D: onnxEnum = 4;
/// Memory type: Direct3D resource.
pub const ONNXIFI_MEMORY_TYPE_D3D_RESOURCE: onnxEnum = 8;

/// Backend property list terminator.
pub const ONNXIFI_BACKEND_PROPERTY_NONE: u64 = 0;
/// Backend property: optimization goal (value: `ONNXIFI_OPTIMIZATION_*`).
pub const ONNXIFI_BACKEND_PROPERTY_OPTIMIZATION: u64 = 1;
/// Backend property: log level (value: `ONNXIFI_LOG_LEVEL_*`).
pub const ONNXIFI_BACKEND_PROPERTY_LOG_LEVEL: u64 = 2;
/// Backend property: CUDA stream.
pub const ONNXIFI_BACKEND_CUDA_STREAM: u64 = 4;
/// Backend property: OpenCL context.
pub const ONNXIFI_BACKEND_OPENCL_CONTEXT: u64 = 8;
/// Backend property of this library: the number of compute threads of the backend (value
/// 1 to 1024; without it, `ONNXIFI_RUST_NUM_THREADS` or all cores).
pub const ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST: u64 = 0x5255_5354_0001;
/// Graph property list terminator.
pub const ONNXIFI_GRAPH_PROPERTY_NONE: u64 = 0;

/// Optimize for throughput.
pub const ONNXIFI_OPTIMIZATION_HIGH_THROUGHPUT: u64 = 0;
/// Optimize for latency.
pub const ONNXIFI_OPTIMIZATION_LOW_LATENCY: u64 = 1;
/// Optimize for power.
pub const ONNXIFI_OPTIMIZATION_LOW_POWER: u64 = 2;
/// Optimize for delay.
pub const ONNXIFI_OPTIMIZATION_LOW_DELAY: u64 = 3;

/// Log errors only.
pub const ONNXIFI_LOG_LEVEL_ERROR: u64 = 4;
/// Log warnings and errors (the default).
pub const ONNXIFI_LOG_LEVEL_WARNING: u64 = 3;
/// Log information too.
pub const ONNXIFI_LOG_LEVEL_INFO: u64 = 2;
/// Log everything.
pub const ONNXIFI_LOG_LEVEL_DEBUG: u64 = 1;

/// Tag of [`onnxTensorDescriptorV1`].
pub const ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1: i32 = 0x43DFBF69;
/// Tag of [`onnxMemoryFenceV1`].
pub const ONNXIFI_TAG_MEMORY_FENCE_V1: i32 = 0x23E08AAB;

/// Synchronization through an `onnxEvent` (always supported).
pub const ONNXIFI_SYNCHRONIZATION_EVENT: onnxEnum = 0;
/// Implicit synchronization (stream or in-order queue).
pub const ONNXIFI_SYNCHRONIZATION_IMPLICIT: onnxEnum = 2;

/// A tensor bound by name: weights at `onnxInitGraph`, inputs and outputs at `onnxSetGraphIO`.
#[cfg(not(feature = "foxi"))]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct onnxTensorDescriptorV1 {
    /// Must be `ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1`; checked before any other field is read.
    pub tag: i32,
    /// NUL-terminated name of the graph input, output or weight.
    pub name: *const c_char,
    /// Element type (`ONNXIFI_DATATYPE_*`).
    pub dataType: onnxEnum,
    /// Memory type (`ONNXIFI_MEMORY_TYPE_*`).
    pub memoryType: onnxEnum,
    /// Number of dimensions (0 for a scalar).
    pub dimensions: u32,
    /// `dimensions` sizes, outermost first.
    pub shape: *const u64,
    /// Address of the data.
    pub buffer: onnxPointer,
}

/// A tensor bound by name, in the foxi dialect (Glow, PyTorch's Caffe2 integration): the
/// descriptor of ONNXIFI 1.0 with quantization fields before `buffer` (96 bytes on 64-bit
/// targets). This backend computes on plain tensors: a descriptor that asks for quantization
/// (`quantizationParams` not 0) is refused with UNSUPPORTED_DATATYPE.
#[cfg(feature = "foxi")]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct onnxTensorDescriptorV1 {
    /// Must be `ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1`; checked before any other field is read.
    pub tag: i32,
    /// NUL-terminated name of the graph input, output or weight.
    pub name: *const c_char,
    /// Element type (`ONNXIFI_DATATYPE_*`).
    pub dataType: onnxEnum,
    /// Memory type (`ONNXIFI_MEMORY_TYPE_*`).
    pub memoryType: onnxEnum,
    /// Number of dimensions (0 for a scalar).
    pub dimensions: u32,
    /// `dimensions` sizes, outermost first.
    pub shape: *const u64,
    /// The axis of per-channel quantization.
    pub quantizationAxis: u32,
    /// How many scales and biases there are (0: the tensor is not quantized).
    pub quantizationParams: u64,
    /// `quantizationParams` scales.
    pub scales: *const f32,
    /// `quantizationParams` zero points.
    pub biases: *const i32,
    /// Whether a weight's data is offline (only its descriptor is given).
    pub isOffline: u8,
    /// Address of the data.
    pub buffer: onnxPointer,
}

/// A synchronization primitive guarding the inputs or outputs of a run.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct onnxMemoryFenceV1 {
    /// Must be `ONNXIFI_TAG_MEMORY_FENCE_V1`; checked before any other field is read.
    pub tag: i32,
    /// Synchronization type (`ONNXIFI_SYNCHRONIZATION_*`).
    pub r#type: onnxEnum,
    /// The event, for `ONNXIFI_SYNCHRONIZATION_EVENT`.
    pub event: onnxEvent,
}

/// Pointer type of `onnxGetBackendIDs`.
pub type onnxGetBackendIDsFunction = Option<
    unsafe extern "C" fn(backendIDs: *mut onnxBackendID, numBackends: *mut usize) -> onnxStatus,
>;
/// Pointer type of `onnxReleaseBackendID`.
pub type onnxReleaseBackendIDFunction =
    Option<unsafe extern "C" fn(backendID: onnxBackendID) -> onnxStatus>;
/// Pointer type of `onnxGetBackendInfo`.
pub type onnxGetBackendInfoFunction = Option<
    unsafe extern "C" fn(
        backendID: onnxBackendID,
        infoType: onnxBackendInfo,
        infoValue: *mut c_void,
        infoValueSize: *mut usize,
    ) -> onnxStatus,
>;
/// Pointer type of `onnxGetBackendCompatibility`.
pub type onnxGetBackendCompatibilityFunction = Option<
    unsafe extern "C" fn(
        backendID: onnxBackendID,
        onnxModelSize: usize,
        onnxModel: *const c_void,
    ) -> onnxStatus,
>;
/// Pointer type of `onnxInitBackend`.
pub type onnxInitBackendFunction = Option<
    unsafe extern "C" fn(
        backendID: onnxBackendID,
        auxPropertiesList: *const u64,
        backend: *mut onnxBackend,
    ) -> onnxStatus,
>;
/// Pointer type of `onnxReleaseBackend`.
pub type onnxReleaseBackendFunction =
    Option<unsafe extern "C" fn(backend: onnxBackend) -> onnxStatus>;
/// Pointer type of `onnxInitEvent`.
pub type onnxInitEventFunction =
    Option<unsafe extern "C" fn(backend: onnxBackend, event: *mut onnxEvent) -> onnxStatus>;
/// Pointer type of `onnxSignalEvent`.
pub type onnxSignalEventFunction = Option<unsafe extern "C" fn(event: onnxEvent) -> onnxStatus>;
/// Pointer type of `onnxGetEventState`.
pub type onnxGetEventStateFunction =
    Option<unsafe extern "C" fn(event: onnxEvent, state: *mut onnxEventState) -> onnxStatus>;
/// Pointer type of `onnxWaitEvent`.
pub type onnxWaitEventFunction = Option<unsafe extern "C" fn(event: onnxEvent) -> onnxStatus>;
/// Pointer type of `onnxReleaseEvent`.
pub type onnxReleaseEventFunction = Option<unsafe extern "C" fn(event: onnxEvent) -> onnxStatus>;
/// Pointer type of `onnxInitGraph`.
#[cfg(not(feature = "foxi"))]
pub type onnxInitGraphFunction = Option<
    unsafe extern "C" fn(
        backend: onnxBackend,
        auxPropertiesList: *const u64,
        onnxModelSize: usize,
        onnxModel: *const c_void,
        weightsCount: u32,
        weightDescriptors: *const onnxTensorDescriptorV1,
        graph: *mut onnxGraph,
    ) -> onnxStatus,
>;
/// Pointer type of `onnxInitGraph` in the foxi dialect (a maximum sequence length and a
/// deferred weight reader added).
#[cfg(feature = "foxi")]
pub type onnxInitGraphFunction = Option<
    unsafe extern "C" fn(
        backend: onnxBackend,
        auxPropertiesList: *const u64,
        onnxModelSize: usize,
        onnxModel: *const c_void,
        weightsCount: u32,
        weightDescriptors: *const onnxTensorDescriptorV1,
        graph: *mut onnxGraph,
        maxSeqLength: u32,
        deferredWeightReader: *mut c_void,
    ) -> onnxStatus,
>;
/// Pointer type of `onnxSetGraphIO`.
pub type onnxSetGraphIOFunction = Option<
    unsafe extern "C" fn(
        graph: onnxGraph,
        inputsCount: u32,
        inputDescriptors: *const onnxTensorDescriptorV1,
        outputsCount: u32,
        outputDescriptors: *const onnxTensorDescriptorV1,
    ) -> onnxStatus,
>;
/// Pointer type of `onnxRunGraph`.
pub type onnxRunGraphFunction = Option<
    unsafe extern "C" fn(
        graph: onnxGraph,
        inputFence: *const onnxMemoryFenceV1,
        outputFence: *mut onnxMemoryFenceV1,
    ) -> onnxStatus,
>;
/// Pointer type of `onnxReleaseGraph`.
pub type onnxReleaseGraphFunction = Option<unsafe extern "C" fn(graph: onnxGraph) -> onnxStatus>;
/// Pointer type of `onnxGetExtensionFunctionAddress`.
pub type onnxGetExtensionFunctionAddressFunction = Option<
    unsafe extern "C" fn(
        backendID: onnxBackendID,
        name: *const c_char,
        function: *mut onnxExtensionFunctionPointer,
    ) -> onnxStatus,
>;
/// Pointer type of the `onnxSetIOAndRunGraph` extension.
#[cfg(not(feature = "foxi"))]
pub type onnxSetIOAndRunGraphFunction = Option<
    unsafe extern "C" fn(
        graph: onnxGraph,
        inputsCount: u32,
        inputDescriptors: *const onnxTensorDescriptorV1,
        outputsCount: u32,
        outputDescriptors: *const onnxTensorDescriptorV1,
        outputFence: *mut onnxMemoryFenceV1,
    ) -> onnxStatus,
>;
/// Pointer type of the `onnxSetIOAndRunGraph` extension in the foxi dialect (a trace-event
/// list added).
#[cfg(feature = "foxi")]
pub type onnxSetIOAndRunGraphFunction = Option<
    unsafe extern "C" fn(
        graph: onnxGraph,
        inputsCount: u32,
        inputDescriptors: *const onnxTensorDescriptorV1,
        outputsCount: u32,
        outputDescriptors: *const onnxTensorDescriptorV1,
        outputFence: *mut onnxMemoryFenceV1,
        traceEvents: *mut onnxTraceEventList,
    ) -> onnxStatus,
>;

/// Characters of an `onnxTraceEvent` name (foxi dialect), without the NUL.
#[cfg(feature = "foxi")]
pub const ONNXIFI_TRACE_EVENT_NAME_SIZE: usize = 32;

/// One event of a run's timeline (foxi dialect).
#[cfg(feature = "foxi")]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct onnxTraceEvent {
    /// NUL-terminated name (the operator type, or `run`, `copy inputs`, `copy outputs`):
    /// `ONNXIFI_TRACE_EVENT_NAME_SIZE + 1` characters.
    pub eventName: [c_char; 33],
    /// `'X'`: a complete event (start and duration).
    pub eventType: c_char,
    /// Start, in microseconds since the Unix epoch.
    pub timestamp: u64,
    /// The thread that ran it.
    pub tid: u32,
    /// Duration in microseconds.
    pub duration: u64,
}

/// The trace events of a run (foxi dialect): filled by the backend when the run ends (before
/// its output fence is signalled), released with `onnxReleaseTraceEvents`.
#[cfg(feature = "foxi")]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct onnxTraceEventList {
    /// How many events `traceEvents` points to.
    pub numEvents: u64,
    /// An array of `numEvents` pointers to events the backend allocated.
    pub traceEvents: *mut *mut onnxTraceEvent,
}

/// Pointer type of `onnxReleaseTraceEvents` (foxi dialect).
#[cfg(feature = "foxi")]
pub type onnxReleaseTraceEventsFunction =
    Option<unsafe extern "C" fn(traceEvents: *mut onnxTraceEventList) -> onnxStatus>;
/// Pointer type of the `onnxWaitEventFor` extension.
pub type onnxWaitEventForFunction = Option<
    unsafe extern "C" fn(
        event: onnxEvent,
        timeoutMs: u32,
        eventState: *mut onnxEventState,
        eventStatus: *mut onnxStatus,
        message: *mut c_char,
        messageLength: *mut usize,
    ) -> onnxStatus,
>;
/// Pointer type of the `onnxGetOutputShapesRUST` extension (output types and shapes for given
/// input shapes, before `onnxSetGraphIO`).
pub type onnxGetOutputShapesRUSTFunction = Option<
    unsafe extern "C" fn(
        graph: onnxGraph,
        inputsCount: u32,
        inputDescriptors: *const onnxTensorDescriptorV1,
        outputsCount: u32,
        outputDescriptors: *mut onnxTensorDescriptorV1,
    ) -> onnxStatus,
>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn thread_property_is_the_backends() {
        assert_eq!(
            ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST,
            crate::backend::NUM_THREADS_PROPERTY
        );
    }

    /// The foxi descriptor as foxi's `onnxifi.h` lays it out on 64-bit targets: 96 bytes,
    /// the quantization fields between `shape` and `buffer`.
    #[cfg(feature = "foxi")]
    #[test]
    fn foxi_layouts() {
        let e: onnxTraceEvent = zeroed_event();
        assert_eq!(e.eventName.len(), ONNXIFI_TRACE_EVENT_NAME_SIZE + 1);
        assert_eq!(size_of::<onnxTensorDescriptorV1>(), 96);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, shape), 40);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, quantizationAxis), 48);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, quantizationParams), 56);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, scales), 64);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, biases), 72);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, isOffline), 80);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, buffer), 88);
        assert_eq!(size_of::<onnxTraceEvent>(), 64);
        assert_eq!(offset_of!(onnxTraceEvent, timestamp), 40);
        assert_eq!(offset_of!(onnxTraceEvent, duration), 56);
        assert_eq!(size_of::<onnxTraceEventList>(), 16);
    }

    /// An all-zero trace event, built field by field.
    #[cfg(feature = "foxi")]
    fn zeroed_event() -> onnxTraceEvent {
        onnxTraceEvent {
            eventName: [0; 33],
            eventType: 0,
            timestamp: 0,
            tid: 0,
            duration: 0,
        }
    }

    #[cfg(not(feature = "foxi"))]
    #[test]
    fn layouts_match_the_official_header() {
        assert_eq!(size_of::<onnxTensorDescriptorV1>(), 56);
        assert_eq!(align_of::<onnxTensorDescriptorV1>(), 8);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, tag), 0);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, name), 8);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, dataType), 16);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, memoryType), 24);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, dimensions), 32);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, shape), 40);
        assert_eq!(offset_of!(onnxTensorDescriptorV1, buffer), 48);
        assert_eq!(size_of::<onnxMemoryFenceV1>(), 24);
        assert_eq!(offset_of!(onnxMemoryFenceV1, r#type), 8);
        assert_eq!(offset_of!(onnxMemoryFenceV1, event), 16);
    }

    #[test]
    fn statuses_match_the_rust_enum() {
        use crate::error::Status;
        assert_eq!(
            Status::InvalidProperty.code(),
            ONNXIFI_STATUS_INVALID_PROPERTY
        );
        assert_eq!(
            Status::UnsupportedProperty.code(),
            ONNXIFI_STATUS_UNSUPPORTED_PROPERTY
        );
        assert_eq!(Status::InternalError.code(), ONNXIFI_STATUS_INTERNAL_ERROR);
        assert_eq!(Status::UnidentifiedName.code(), 0x0301);
        for s in Status::ALL {
            assert_eq!(Status::from_code(s.code()), Some(s));
        }
        assert_eq!(
            Status::from_code(ONNXIFI_STATUS_MISMATCHING_SHAPE),
            Some(Status::MismatchingShape)
        );
        assert_eq!(Status::from_code(0x0407), None);
    }
}
