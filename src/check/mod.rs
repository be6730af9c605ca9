//! Verdicts on decoded models, run before a model is accepted.
//!
//! [`spec`] checks every rule the ONNX IR specification states as a requirement (MUST) that can
//! be decided from the model alone; [`compat`] decides what this backend supports.
#![forbid(unsafe_code)]

pub mod compat;
pub mod spec;
