//! Static checks on decoded models, run before a model is accepted.
//!
//! [`spec`] checks every rule the ONNX IR specification states as a requirement (MUST) that
//! can be decided from the model alone, without the operator schemas.
#![forbid(unsafe_code)]

pub mod spec;
