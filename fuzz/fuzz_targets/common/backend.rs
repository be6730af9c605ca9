//! A backend with one compute thread, and events on it.

use onnxifi_rust::ffi::api::{onnxInitBackend, onnxInitEvent};
use onnxifi_rust::ffi::types::*;

/// A new backend ID and a backend on it with one compute thread (both asserted to succeed).
pub fn single_thread_backend() -> (onnxBackendID, onnxBackend) {
    let id = super::abi::backend_id();
    let props = [ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST, 1, 0];
    let mut backend: onnxBackend = std::ptr::null_mut();
    // SAFETY: a live ID, a terminated property list, a writable out-handle.
    let s = unsafe { onnxInitBackend(id, props.as_ptr(), &mut backend) };
    assert_eq!(s, ONNXIFI_STATUS_SUCCESS);
    (id, backend)
}

/// A new (unsignalled) event on a live backend (asserted to succeed).
pub fn new_event(backend: onnxBackend) -> onnxEvent {
    let mut e: onnxEvent = std::ptr::null_mut();
    // SAFETY: a live backend and a writable out-handle.
    assert_eq!(
        unsafe { onnxInitEvent(backend, &mut e) },
        ONNXIFI_STATUS_SUCCESS
    );
    e
}
