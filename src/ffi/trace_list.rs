//! Where a run's timeline goes when the caller asks for it: foxi's `onnxTraceEventList`,
//! filled by the run before its output fence is signalled, and released with
//! `onnxReleaseTraceEvents`. In the ONNXIFI 1.0 build nobody asks, and [`TraceSink::NONE`] is
//! the only sink.

#[cfg(feature = "foxi")]
use super::types::*;
use crate::trace::RunEvent;

/// The address of a caller's trace-event list, or none.
#[derive(Clone, Copy, Debug)]
pub struct TraceSink {
    addr: usize,
}

impl TraceSink {
    /// No list: nothing is recorded for the caller.
    pub const NONE: TraceSink = TraceSink { addr: 0 };

    /// The caller's list (NULL: none).
    #[cfg(feature = "foxi")]
    pub fn of(list: *mut onnxTraceEventList) -> TraceSink {
        TraceSink {
            addr: list as usize,
        }
    }

    /// Whether a list waits for the run's events.
    pub fn wanted(&self) -> bool {
        self.addr != 0
    }

    /// Writes `events` to the list (allocating them; [`release`] frees them).
    ///
    /// # Safety
    /// When [`TraceSink::wanted`], the list is writable and alive (the caller keeps it until
    /// the run's output fence is signalled, which happens after this call).
    pub unsafe fn fill(self, events: Vec<RunEvent>) {
        #[cfg(feature = "foxi")]
        if self.wanted() {
            let list = self.addr as *mut onnxTraceEventList;
            let (count, array) = allocate(&events);
            // SAFETY: as stated for this function.
            unsafe {
                std::ptr::addr_of_mut!((*list).numEvents).write_unaligned(count);
                std::ptr::addr_of_mut!((*list).traceEvents).write_unaligned(array);
            }
        }
        let _ = (self, events);
    }
}

/// Event arrays handed to callers, by the address of their pointer array: the events and the
/// pointers, freed by [`release`].
#[cfg(feature = "foxi")]
type Allocations = std::collections::HashMap<usize, (Box<[onnxTraceEvent]>, Box<[usize]>)>;

#[cfg(feature = "foxi")]
fn allocations() -> &'static std::sync::Mutex<Allocations> {
    static MAP: std::sync::OnceLock<std::sync::Mutex<Allocations>> = std::sync::OnceLock::new();
    MAP.get_or_init(Default::default)
}

/// The events as foxi lays them out, and the array of pointers to them.
#[cfg(feature = "foxi")]
fn allocate(events: &[RunEvent]) -> (u64, *mut *mut onnxTraceEvent) {
    let mut items: Box<[onnxTraceEvent]> = events
        .iter()
        .map(|e| {
            let mut name = [0 as std::os::raw::c_char; ONNXIFI_TRACE_EVENT_NAME_SIZE + 1];
            for (d, b) in name
                .iter_mut()
                .zip(e.name.bytes().take(ONNXIFI_TRACE_EVENT_NAME_SIZE))
            {
                *d = b as std::os::raw::c_char;
            }
            onnxTraceEvent {
                eventName: name,
                eventType: b'X' as std::os::raw::c_char,
                timestamp: e.start_us,
                tid: e.thread,
                duration: e.duration_us,
            }
        })
        .collect();
    let mut pointers: Box<[usize]> = items
        .iter_mut()
        .map(|e| e as *mut onnxTraceEvent as usize)
        .collect();
    let array = pointers.as_mut_ptr() as *mut *mut onnxTraceEvent;
    allocations()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(array as usize, (items, pointers));
    (events.len() as u64, array)
}

/// Frees the events a run wrote to `list` and empties it; INVALID_POINTER for a NULL list or
/// one whose events this library did not allocate (already released, or someone else's).
///
/// # Safety
/// `list` is NULL or a readable and writable `onnxTraceEventList`.
#[cfg(feature = "foxi")]
pub unsafe fn release(list: *mut onnxTraceEventList) -> crate::error::Result<()> {
    use crate::error::{Error, Status};
    if list.is_null() {
        return Err(Error::new(Status::InvalidPointer, "traceEvents is NULL"));
    }
    // SAFETY: as stated for this function.
    let array = unsafe { std::ptr::addr_of!((*list).traceEvents).read_unaligned() };
    if array.is_null() {
        return Ok(());
    }
    let freed = allocations()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&(array as usize));
    if freed.is_none() {
        return Err(Error::new(
            Status::InvalidPointer,
            "traceEvents holds events this backend did not allocate (or released already)",
        ));
    }
    // SAFETY: as stated for this function.
    unsafe {
        std::ptr::addr_of_mut!((*list).numEvents).write_unaligned(0);
        std::ptr::addr_of_mut!((*list).traceEvents).write_unaligned(std::ptr::null_mut());
    }
    Ok(())
}
