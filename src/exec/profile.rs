//! Time spent per operator type, collected when `ONNXIFI_RUST_PROFILE` is set (read once):
//! every step of every run adds its wall time to a process-wide table, which
//! [`report`] returns sorted by total time.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The environment variable that turns collection on (any value but empty or `0`).
pub const PROFILE_ENV: &str = "ONNXIFI_RUST_PROFILE";

/// Whether steps are timed (the environment is read once per process).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(PROFILE_ENV).is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Per operator type: calls and total time.
fn table() -> &'static Mutex<HashMap<String, (u64, Duration)>> {
    static TABLE: OnceLock<Mutex<HashMap<String, (u64, Duration)>>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// Adds one step's time to `op`'s entry.
pub(crate) fn record(op: &str, took: Duration) {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    let e = t.entry(op.to_string()).or_default();
    e.0 += 1;
    e.1 += took;
}

/// One row of the profile.
#[derive(Clone, Debug)]
pub struct ProfileRow {
    /// Operator type (fused operators carry their own names, e.g. `FusedConv`).
    pub op: String,
    /// Steps run.
    pub calls: u64,
    /// Wall time of those steps.
    pub total: Duration,
}

/// Everything collected so far, longest total first; `reset` clears the table.
pub fn report(reset: bool) -> Vec<ProfileRow> {
    let mut t = table().lock().unwrap_or_else(|e| e.into_inner());
    let mut rows: Vec<ProfileRow> = t
        .iter()
        .map(|(op, &(calls, total))| ProfileRow {
            op: op.clone(),
            calls,
            total,
        })
        .collect();
    if reset {
        t.clear();
    }
    rows.sort_by(|a, b| b.total.cmp(&a.total).then_with(|| a.op.cmp(&b.op)));
    rows
}
