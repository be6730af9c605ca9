//! What the two sequences of an exec share, the handles they pick, and per-thread state.

use crate::common::abi::{backend_id, check};
use crate::common::add_model::{encode, ADD};
use crate::common::descriptor::cpu_descriptor;
use crate::common::input::Input;
use onnxifi_rust::ffi::api::*;
use onnxifi_rust::ffi::types::*;
use std::ffi::CStr;
use std::os::raw::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Output buffers per exec (one per set-I/O call).
pub const SLOTS: usize = 256;
/// Successful inits of backends per thread and exec.
pub const MAX_BACKENDS: u32 = 3;
/// Successful inits of graphs per thread and exec.
pub const MAX_GRAPHS: u32 = 4;

/// Serialized models: the Add model, then bytes that are no model.
pub fn models() -> &'static [Vec<u8>; 3] {
    static MODELS: OnceLock<[Vec<u8>; 3]> = OnceLock::new();
    MODELS.get_or_init(|| {
        let add = encode(ADD);
        let mut cut = add.clone();
        cut.truncate(add.len() / 2);
        [add, cut, b"\x08\x07\x12\x00garbage".to_vec()]
    })
}

/// Handles of earlier execs, all released by now.
pub static OLD: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// What one exec made, shared by its two threads (handles as integers).
pub struct Shared {
    /// Backend IDs.
    pub ids: Mutex<Vec<usize>>,
    /// Backends.
    pub backends: Mutex<Vec<usize>>,
    /// Graphs.
    pub graphs: Mutex<Vec<usize>>,
    /// Events, and whether each is the output event of a run.
    pub events: Mutex<Vec<(usize, bool)>>,
    /// Address of the A and B input data (12 floats, read only).
    pub inputs: usize,
    /// Address of SLOTS output buffers of 6 floats, each handed out once.
    pub outputs: usize,
    /// The next output buffer to hand out.
    pub next_slot: AtomicUsize,
}

/// A handle: one this exec made (of `list`), of another kind, NULL, an old one or random.
pub fn handle(inp: &mut Input, list: &Mutex<Vec<usize>>, other: &Mutex<Vec<usize>>) -> *mut c_void {
    let sel = inp.u8();
    let from = |l: &Mutex<Vec<usize>>, i: u8| {
        let l = l.lock().unwrap();
        (!l.is_empty()).then(|| l[i as usize % l.len()])
    };
    let h = match sel % 16 {
        0..=10 => from(list, inp.u8()),
        11 => from(other, inp.u8()),
        12 => Some(0),
        13 => {
            let i = inp.u8();
            from(&OLD, i)
        }
        14 => Some(inp.u64() as usize),
        _ => Some(0x6f6e_6e78_0000_0000 + 16 * (inp.u8() as usize)),
    };
    h.unwrap_or(0) as *mut c_void
}

/// An event handle, and whether it is a run's output event.
pub fn event_handle(inp: &mut Input, sh: &Shared) -> (onnxEvent, bool) {
    if inp.chance(12) {
        let l = sh.events.lock().unwrap();
        if !l.is_empty() {
            let (e, out) = l[inp.u8() as usize % l.len()];
            return (e as onnxEvent, out);
        }
    }
    (handle(inp, &sh.graphs, &sh.backends), false)
}

/// The backend ID and backend every exec starts with: those of the last exec while both are
/// live, else new ones.
pub fn base() -> (usize, usize) {
    static BASE: Mutex<(usize, usize)> = Mutex::new((0, 0));
    let mut base = BASE.lock().unwrap();
    let mut size = 0usize;
    // SAFETY: any handle value is safe to pass; a writable size (NULL value: size query).
    let id_live = unsafe {
        onnxGetBackendInfo(
            base.0 as onnxBackendID,
            ONNXIFI_BACKEND_NAME,
            std::ptr::null_mut(),
            &mut size,
        )
    } == ONNXIFI_STATUS_FALLBACK;
    let mut e: onnxEvent = std::ptr::null_mut();
    // SAFETY: any handle value is safe to pass; a writable out-handle.
    let backend_live =
        unsafe { onnxInitEvent(base.1 as onnxBackend, &mut e) } == ONNXIFI_STATUS_SUCCESS;
    if backend_live {
        // SAFETY: the event just made.
        assert_eq!(unsafe { onnxReleaseEvent(e) }, ONNXIFI_STATUS_SUCCESS);
    }
    if !id_live {
        base.0 = backend_id() as usize;
    }
    if !backend_live {
        let mut b: onnxBackend = std::ptr::null_mut();
        // SAFETY: a live ID, no properties, a writable out-handle.
        let s = unsafe { onnxInitBackend(base.0 as onnxBackendID, std::ptr::null(), &mut b) };
        assert_eq!(s, ONNXIFI_STATUS_SUCCESS);
        base.1 = b as usize;
    }
    *base
}

/// A release function of the C ABI (of backend IDs, backends, graphs or events).
pub type Release = unsafe extern "C" fn(*mut c_void) -> onnxStatus;

/// Releases a fuzzed handle with `release` (named `what`): it answers SUCCESS, and then a second
/// release answers `invalid`, or it answers `invalid` at once. Returns the first answer.
pub fn release_checked(
    what: &str,
    release: Release,
    h: *mut c_void,
    invalid: onnxStatus,
) -> onnxStatus {
    // SAFETY: any handle value is safe to pass.
    let s = check(what, unsafe { release(h) });
    if s == ONNXIFI_STATUS_SUCCESS {
        // SAFETY: as above.
        assert_eq!(unsafe { release(h) }, invalid);
    } else {
        assert_eq!(s, invalid);
    }
    s
}

/// Releases a handle of the exec at its end: SUCCESS, or `invalid` when it is already released.
pub fn release_at_end(release: Release, h: usize, invalid: onnxStatus) {
    // SAFETY: any handle value is safe to pass.
    let s = unsafe { release(h as *mut c_void) };
    assert!(s == ONNXIFI_STATUS_SUCCESS || s == invalid, "{s:#x}");
}

/// Per-thread state.
pub struct Thread<'a> {
    /// What the exec made.
    pub sh: &'a Shared,
    /// Events given to runs as input fences: settled before anything that can block.
    pub owed: Vec<onnxEvent>,
    /// Backends this thread made.
    pub backends_made: u32,
    /// Graphs this thread made.
    pub graphs_made: u32,
}

impl Thread<'_> {
    /// Signals or releases every event this thread gave a run as input fence.
    pub fn settle(&mut self, inp: &mut Input) {
        for e in std::mem::take(&mut self.owed) {
            let s = if inp.chance(10) {
                // SAFETY: any handle value is safe to pass.
                unsafe { onnxSignalEvent(e) }
            } else {
                // SAFETY: any handle value is safe to pass.
                unsafe { onnxReleaseEvent(e) }
            };
            check("settle", s);
        }
    }

    /// Whether waiting on `e` without a timeout ends: it is a run's output (after settling),
    /// or not live, or signalled (an event stays signalled).
    pub fn can_wait(&mut self, inp: &mut Input, e: onnxEvent, run_output: bool) -> bool {
        if run_output {
            self.settle(inp);
            return true;
        }
        let mut state = 0;
        // SAFETY: a writable state.
        let s = check("onnxGetEventState", unsafe {
            onnxGetEventState(e, &mut state)
        });
        s == ONNXIFI_STATUS_INVALID_EVENT || state == ONNXIFI_EVENT_STATE_SIGNALLED
    }

    /// Descriptors of A, B and C for the Add model (sometimes wrong), with a fresh output
    /// buffer; `None` when the buffers are used up.
    pub fn descriptors(&self, inp: &mut Input) -> Option<(Vec<onnxTensorDescriptorV1>, usize)> {
        static SHAPE: [u64; 2] = [2, 3];
        static SWAPPED: [u64; 2] = [3, 2];
        let slot = self.sh.next_slot.fetch_add(1, Ordering::Relaxed);
        if slot >= SLOTS {
            return None;
        }
        let desc = |name: &'static CStr, buffer: usize| {
            cpu_descriptor(name, ONNXIFI_DATATYPE_FLOAT32, &SHAPE, buffer as u64)
        };
        let mut d = vec![
            desc(c"A", self.sh.inputs),
            desc(c"B", self.sh.inputs + 24),
            desc(c"C", self.sh.outputs + 24 * slot),
        ];
        // Every variant describes at most the 24 bytes each buffer has.
        match inp.u8() % 24 {
            0 => d[1].name = c"C".as_ptr(),
            1 => d[2].name = c"A".as_ptr(),
            2 => d[0].dataType = ONNXIFI_DATATYPE_INT32,
            3 => d[2].shape = SWAPPED.as_ptr(),
            4 => d[1].tag = 0,
            5 => d[2].buffer = 0,
            6 => d[0].dimensions = 1,
            7 => d[0].name = std::ptr::null(),
            _ => {}
        }
        Some((d, slot))
    }
}
