//! Verdicts on models: the IR spec's rules, and what this backend supports.
#![forbid(unsafe_code)]

pub mod compat;
