//! onnxifi-rust: an ONNXIFI backend that runs ONNX models on the CPU.
//!
//! The crate builds as a C shared library (`libonnxifi-rust.so`) whose only door is [`ffi`];
//! everything below it is safe Rust except the SIMD kernels. See `ARCHITECTURE.md` for the
//! layers.

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
