//! A global allocator for the tests that count allocations (its own module, apart from
//! `common`, which test binaries that forbid `unsafe` include): every call goes to the system
//! allocator unchanged, and `alloc`, `alloc_zeroed` and `realloc` first call the test's own
//! `note` (which decides whether the allocation counts: on which thread, in which window).
//! A test binary declares it with `#[global_allocator] static GLOBAL: Counting = Counting {
//! note: my_note };`.

use std::alloc::{GlobalAlloc, Layout, System};

/// The system allocator, calling `note` on every allocation first. `note` must not allocate.
pub struct Counting {
    /// Called once per allocation or reallocation.
    pub note: fn(),
}

// SAFETY: every call is forwarded unchanged to the system allocator; `note` only counts (the
// binaries' notes touch atomics and const-initialised thread-locals, which do not allocate).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        (self.note)();
        // SAFETY: the caller's layout contract is passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        (self.note)();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        (self.note)();
        // SAFETY: `ptr` came from this allocator (that is, from `System`) with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `realloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}
