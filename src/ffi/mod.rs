//! The C door: every exported `onnx*` function is a thin shell that catches panics, validates
//! pointers, tags and sizes, looks handles up in the registries, calls one safe function and
//! writes out-parameters only on success.
//!
//! `unsafe` in this crate lives here (and in the SIMD kernels): reading the caller's structures
//! and buffers through raw pointers, each with a `// SAFETY:` note on what the ONNXIFI contract
//! guarantees.

pub mod api;
pub mod ext;
pub mod handles;
pub mod heap;
pub mod info;
pub mod io;
pub mod run;
pub mod trace_list;
pub mod types;

use crate::error::{Error, Status};
use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    static LAST_ERROR: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The message of the last failed call on this thread.
pub fn last_error() -> String {
    LAST_ERROR.with(|e| e.borrow().clone())
}

fn set_last_error(msg: &str) {
    LAST_ERROR.with(|e| {
        let mut e = e.borrow_mut();
        e.clear();
        e.push_str(msg);
    });
}

/// Runs a body that reports its own status (one that must not touch the last error, like
/// `onnxGetLastErrorMessage`): a panic becomes INTERNAL_ERROR.
pub(crate) fn guard_plain(body: impl FnOnce() -> types::onnxStatus) -> types::onnxStatus {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(Status::InternalError.code())
}

/// Runs the body of an exported function: a panic becomes INTERNAL_ERROR, an error its status
/// (its message kept for `onnxGetLastErrorMessage` and, with `ONNXIFI_RUST_LOG=1`, printed).
pub(crate) fn guard(body: impl FnOnce() -> Result<Status, Error>) -> types::onnxStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(status)) => status.code(),
        Ok(Err(err)) => {
            set_last_error(&err.to_string());
            crate::log::log(crate::log::Level::Error, || err.to_string());
            err.status.code()
        }
        Err(_) => {
            set_last_error("INTERNAL_ERROR: a panic was caught at the API boundary");
            Status::InternalError.code()
        }
    }
}
