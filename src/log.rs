//! What the library writes to stderr: nothing unless asked. `ONNXIFI_RUST_LOG` (read once per
//! process) or a backend's `ONNXIFI_BACKEND_PROPERTY_LOG_LEVEL` sets the threshold, with the
//! ONNXIFI levels: `error` (every failed API call, with its status and message), `warn`, `info`
//! (backends made, graphs compiled, plans built) and `debug` (every run). The environment wins
//! over the property; a property applies from the backend's creation on, to the whole process
//! (the lowest level any backend asked for).
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The environment variable that sets the threshold.
pub const LOG_ENV: &str = "ONNXIFI_RUST_LOG";

/// Message levels, with the values of `ONNXIFI_LOG_LEVEL_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Each run.
    Debug = 1,
    /// Backends, graphs and plans made.
    Info = 2,
    /// Something the caller may want to fix, that did not fail the call.
    Warn = 3,
    /// A failed call.
    Error = 4,
}

impl Level {
    fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// The threshold from `ONNXIFI_RUST_LOG`: `error`, `warn`/`warning`, `info`, `debug`, or `1`
/// (an older spelling of `error`); `Some(0)` for `0`/`off`/empty (nothing, whatever a property
/// says); `None` when unset or unreadable.
fn env_threshold() -> Option<u64> {
    static LEVEL: OnceLock<Option<u64>> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let v = std::env::var(LOG_ENV).ok()?;
        Some(match v.trim().to_ascii_lowercase().as_str() {
            "" | "0" | "off" | "none" => 0,
            "debug" => 1,
            "info" => 2,
            "warn" | "warning" => 3,
            _ => 4, // "error", "1" and anything else asks for errors at least
        })
    })
}

/// The lowest level a backend's property asked for (0: none asked).
static PROPERTY: AtomicU64 = AtomicU64::new(0);

/// Records a backend's `LOG_LEVEL` property (1 debug … 4 error).
pub fn note_backend_level(level: u64) {
    let _ = PROPERTY.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
        (cur == 0 || level < cur).then_some(level)
    });
}

/// Whether messages of `level` are written.
pub fn enabled(level: Level) -> bool {
    let threshold = match env_threshold() {
        Some(t) => t,
        None => PROPERTY.load(Ordering::Relaxed),
    };
    threshold != 0 && level as u64 >= threshold
}

/// Writes `message` at `level` when enabled (the message is only formatted then).
pub fn log(level: Level, message: impl FnOnce() -> String) {
    if enabled(level) {
        eprintln!("onnxifi-rust [{}]: {}", level.name(), message());
    }
}
