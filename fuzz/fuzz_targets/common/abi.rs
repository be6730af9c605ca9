//! The C ABI basics every target that calls it uses: status checks, the process environment,
//! backend IDs and event fences.

use onnxifi_rust::error::Status;
use onnxifi_rust::ffi::api::onnxGetBackendIDs;
use onnxifi_rust::ffi::types::*;

/// Asserts that `status`, returned by `what`, is one of the ONNXIFI statuses; returns it.
pub fn check(what: &str, status: onnxStatus) -> onnxStatus {
    assert!(
        Status::from_code(status).is_some(),
        "{what} returned {status:#x}, not an ONNXIFI status"
    );
    status
}

/// One compute thread per backend and no logging: set before the library reads either (in the
/// targets' `init`).
pub fn init_env() {
    std::env::set_var("ONNXIFI_RUST_NUM_THREADS", "1");
    std::env::set_var("ONNXIFI_RUST_LOG", "0");
}

/// A new backend ID from `onnxGetBackendIDs` (asserted to succeed).
pub fn backend_id() -> onnxBackendID {
    let mut id: onnxBackendID = std::ptr::null_mut();
    let mut n = 1usize;
    // SAFETY: one writable ID slot and its count.
    assert_eq!(
        unsafe { onnxGetBackendIDs(&mut id, &mut n) },
        ONNXIFI_STATUS_SUCCESS
    );
    id
}

/// A well-formed memory fence of the event kind on `event`.
pub fn event_fence(event: onnxEvent) -> onnxMemoryFenceV1 {
    onnxMemoryFenceV1 {
        tag: ONNXIFI_TAG_MEMORY_FENCE_V1,
        r#type: ONNXIFI_SYNCHRONIZATION_EVENT,
        event,
    }
}
