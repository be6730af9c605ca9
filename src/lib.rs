//! onnxifi-rust: an ONNXIFI backend that runs ONNX models on the CPU.
//!
//! The crate builds as a C shared library (`libonnxifi-rust.so`) whose only door is [`ffi`];
//! everything below it is safe Rust. See `ARCHITECTURE.md` for the layers.

pub mod error;
pub mod model;
pub mod text;
