//! Synchronization: one-shot events that carry a status, the per-graph run queue, and the
//! pool workers kept polling while a run computes.
#![forbid(unsafe_code)]

pub mod event;
pub mod hot;
pub mod worker;
