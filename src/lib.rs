//! onnxifi-rust: an ONNXIFI backend that runs ONNX models on the CPU.
//!
//! The crate builds as a C shared library (`libonnxifi-rust.so`) whose only door is [`ffi`];
//! everything below it is safe Rust except the SIMD kernels. See `ARCHITECTURE.md` for the
//! layers.

// Handles cross the C ABI as registry ids stored in pointer-sized values; on a 32-bit target
// they would be truncated. Refuse to build there rather than hand out ambiguous handles.
#[cfg(not(target_pointer_width = "64"))]
compile_error!("onnxifi-rust supports 64-bit targets only (ONNXIFI handles carry 64-bit ids)");

pub mod backend;
pub mod check;
pub mod error;
pub mod exec;
pub mod ffi;
pub mod graph;
pub mod ir;
pub mod kernels;
pub mod log;
pub mod model;
pub mod ops;
pub mod schema;
pub mod sync;
pub mod text;
pub mod trace;
