//! Time spent per operator type, collected when `ONNXIFI_RUST_PROFILE` is set (read once):
//! every step of every run adds its wall time to a process-wide table, which
//! [`report`] returns sorted by total time. With `ONNXIFI_RUST_PROFILE=shape` the rows are
//! split further by the shapes of the step's inputs and first output.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The environment variable that turns collection on (any value but empty or `0`).
pub const PROFILE_ENV: &str = "ONNXIFI_RUST_PROFILE";

/// How steps are keyed in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Not collecting.
    Off,
    /// By operator type.
    ByOp,
    /// By operator type and shapes.
    ByShape,
}

/// The mode, read from the environment once per process.
fn mode() -> Mode {
    static MODE: OnceLock<Mode> = OnceLock::new();
    *MODE.get_or_init(|| match std::env::var(PROFILE_ENV).as_deref() {
        Ok("") | Ok("0") | Err(_) => Mode::Off,
        Ok("shape") => Mode::ByShape,
        Ok(_) => Mode::ByOp,
    })
}

/// Whether steps are timed.
pub fn enabled() -> bool {
    mode() != Mode::Off
}

/// Whether the table is keyed by shapes too (then callers pass them to [`record`]).
pub(crate) fn by_shape() -> bool {
    mode() == Mode::ByShape
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
