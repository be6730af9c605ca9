//! Handing freed heap pages back to the system after a model loads.
//!
//! Loading decodes every weight into memory of its own, and the planner may then drop the
//! decoded copy of weights its kernels prepared (`exec::weights::release_prepared`). glibc keeps
//! what is freed from its heap resident unless it lies at the heap's top: after its dynamic
//! mmap threshold rises (on the first free of a large block), the weights are heap blocks, and
//! freeing them leaves the process's resident size where it was. `malloc_trim` returns the
//! whole pages of free heap blocks (in every arena) to the system.

/// Bytes of weights a load must have freed for it to hand pages back: trimming walks every
/// free block of the process, which in a host whose heap holds much freed memory took 20 ms
/// (the benchmark's process, after ONNX Runtime's sessions), more than a small model's load.
pub const RETURN_MIN_BYTES: usize = 16 << 20;

/// Returns the freed heap pages of the process to the system where the C library can (glibc);
/// a no-op elsewhere. It touches only memory that is already free, the host's included, so
/// that it is also safe while other threads allocate.
pub fn return_freed_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: glibc's `malloc_trim` takes no pointers and locks each arena it trims; a
        // zero pad keeps nothing beyond what is in use.
        unsafe { malloc_trim(0) };
    }
}
