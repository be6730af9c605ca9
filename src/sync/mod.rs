//! Synchronization: one-shot events that carry a status, and the per-graph run queue.
#![forbid(unsafe_code)]

pub mod event;
pub mod worker;
