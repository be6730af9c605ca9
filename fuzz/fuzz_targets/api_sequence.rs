//! Fuzz target: random sequences of ONNXIFI calls from two threads, through the C ABI only.
//!
//! The input is split in two halves, one per thread (`std::thread::scope`); each half is read
//! as a list of operations: get/release backend IDs, backend info with random sizes,
//! compatibility, init/release backends, graphs and events, signal, state, wait, set I/O, run,
//! the extensions. Handles are taken from those this exec made (live or released), from the
//! previous execs (released), of the wrong kind, NULL or random integers: handles are registry
//! ids that the library looks up and never dereferences (`src/ffi/handles.rs`), so any value
//! is safe to pass. Pointers to caller memory are always valid for what the ABI reads or
//! writes.
//!
//! No call may block for ever: a thread only waits without a timeout on an event that is
//! signalled, not live, or the output of a run; before any call that can block (waits, graph
//! release) it settles (signals or releases) every event it gave a run as input fence.
//! Every status must be an ONNXIFI status, and a released handle must answer INVALID_*.
#![no_main]

use libfuzzer_sys::fuzz_target;
use onnxifi_rust::error::Status;
use onnxifi_rust::ffi::api::*;
use onnxifi_rust::ffi::ext::*;
use onnxifi_rust::ffi::types::*;
use prost::Message;
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

const ADD: &str = r#"<ir_version: 8, opset_import: ["" : 14]>
add (float[2,3] A, float[2,3] B) => (float[2,3] C) { C = Add(A, B) }"#;

/// Output buffers per exec (one per set-I/O call).
const SLOTS: usize = 256;
/// Successful inits per thread and exec, of backends and of graphs.
const MAX_BACKENDS: u32 = 3;
const MAX_GRAPHS: u32 = 4;

/// Serialized models: the Add model, then bytes that are no model.
fn models() -> &'static [Vec<u8>; 3] {
    static MODELS: OnceLock<[Vec<u8>; 3]> = OnceLock::new();
    MODELS.get_or_init(|| {
        let add = onnxifi_rust::text::parse_model(ADD)
            .expect("the model text parses")
            .encode_to_vec();
        let mut cut = add.clone();
        cut.truncate(add.len() / 2);
        [add, cut, b"\x08\x07\x12\x00garbage".to_vec()]
    })
}

/// Handles of earlier execs, all released by now.
static OLD: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn check(what: &str, status: onnxStatus) -> onnxStatus {
    assert!(
        Status::from_code(status).is_some(),
        "{what} returned {status:#x}, not an ONNXIFI status"
    );
    status
}

/// What one exec made, shared by its two threads (handles as integers).
struct Shared {
    ids: Mutex<Vec<usize>>,
    backends: Mutex<Vec<usize>>,
    graphs: Mutex<Vec<usize>>,
    /// Events, and whether each is the output event of a run.
    events: Mutex<Vec<(usize, bool)>>,
    /// Address of the A and B input data (12 floats, read only).
    inputs: usize,
    /// Address of SLOTS output buffers of 6 floats, each handed out once.
    outputs: usize,
    next_slot: AtomicUsize,
}

/// Reads one thread's half of the input; zeros once it is used up.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u64(&mut self) -> u64 {
        let mut v = [0u8; 8];
        for b in &mut v {
            *b = self.u8();
        }
        u64::from_le_bytes(v)
    }
    fn chance(&mut self, k: u8) -> bool {
        self.u8() % 16 < k
    }
    fn pick<T: Copy>(&mut self, table: &[T]) -> T {
        table[self.u8() as usize % table.len()]
    }
}

/// A handle: one this exec made (of `list`), of another kind, NULL, an old one or random.
fn handle(inp: &mut Input, list: &Mutex<Vec<usize>>, other: &Mutex<Vec<usize>>) -> *mut c_void {
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
fn event_handle(inp: &mut Input, sh: &Shared) -> (onnxEvent, bool) {
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
fn base() -> (usize, usize) {
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
        let mut id: onnxBackendID = std::ptr::null_mut();
        let mut n = 1;
        // SAFETY: one writable ID and its count.
        assert_eq!(
            unsafe { onnxGetBackendIDs(&mut id, &mut n) },
            ONNXIFI_STATUS_SUCCESS
        );
        base.0 = id as usize;
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

/// Per-thread state.
struct Thread<'a> {
    sh: &'a Shared,
    /// Events given to runs as input fences: settled before anything that can block.
    owed: Vec<onnxEvent>,
    backends_made: u32,
    graphs_made: u32,
}

impl Thread<'_> {
    /// Signals or releases every event this thread gave a run as input fence.
    fn settle(&mut self, inp: &mut Input) {
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
    fn can_wait(&mut self, inp: &mut Input, e: onnxEvent, run_output: bool) -> bool {
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
    fn descriptors(&self, inp: &mut Input) -> Option<(Vec<onnxTensorDescriptorV1>, usize)> {
        static SHAPE: [u64; 2] = [2, 3];
        static SWAPPED: [u64; 2] = [3, 2];
        let slot = self.sh.next_slot.fetch_add(1, Ordering::Relaxed);
        if slot >= SLOTS {
            return None;
        }
        let desc = |name: &'static CStr, buffer: usize| onnxTensorDescriptorV1 {
            tag: ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1,
            name: name.as_ptr(),
            dataType: ONNXIFI_DATATYPE_FLOAT32,
            memoryType: ONNXIFI_MEMORY_TYPE_CPU,
            dimensions: 2,
            shape: SHAPE.as_ptr(),
            buffer: buffer as u64,
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

    fn run_op(&mut self, inp: &mut Input) {
        let sh = self.sh;
        match inp.u8() % 20 {
            0 => {
                let mut ids = [std::ptr::null_mut::<c_void>(); 4];
                let mut n = (inp.u8() % 5) as usize;
                let ids_ptr = if inp.chance(14) {
                    ids.as_mut_ptr()
                } else {
                    std::ptr::null_mut()
                };
                let n_ptr: *mut usize = if inp.chance(15) {
                    &mut n
                } else {
                    std::ptr::null_mut()
                };
                // SAFETY: `ids` holds 4 ≥ n entries; `n` is writable (or NULL).
                let s = check("onnxGetBackendIDs", unsafe {
                    onnxGetBackendIDs(ids_ptr, n_ptr)
                });
                match s {
                    ONNXIFI_STATUS_SUCCESS => {
                        assert!(n == 1 && !ids[0].is_null());
                        sh.ids.lock().unwrap().push(ids[0] as usize);
                    }
                    ONNXIFI_STATUS_FALLBACK => assert_eq!(n, 1),
                    _ => assert_eq!(s, ONNXIFI_STATUS_INVALID_POINTER),
                }
            }
            1 => {
                let id = handle(inp, &sh.ids, &sh.backends);
                // SAFETY: any handle value is safe to pass.
                let s = check("onnxReleaseBackendID", unsafe { onnxReleaseBackendID(id) });
                if s == ONNXIFI_STATUS_SUCCESS {
                    // SAFETY: as above.
                    assert_eq!(
                        unsafe { onnxReleaseBackendID(id) },
                        ONNXIFI_STATUS_INVALID_ID
                    );
                } else {
                    assert_eq!(s, ONNXIFI_STATUS_INVALID_ID);
                }
            }
            2 => {
                let id = handle(inp, &sh.ids, &sh.backends);
                let kind = if inp.chance(13) {
                    inp.pick(&[
                        0,
                        1,
                        2,
                        3,
                        4,
                        5,
                        6,
                        7,
                        8,
                        10,
                        11,
                        12,
                        13,
                        14,
                        20,
                        21,
                        22,
                        30,
                        31,
                        0x5253_0001,
                        0x5253_0002,
                        0x5253_0003,
                        0x5253_0004,
                        9,
                        40,
                        46,
                        -1,
                    ])
                } else {
                    inp.u64() as i32
                };
                let mut buf = vec![0u8; 8192];
                let mut size = if inp.chance(12) {
                    inp.pick(&[0usize, 1, 7, 8, 9, 16, 64, 8192])
                } else {
                    (inp.u64() % 8193) as usize
                };
                let cap = size;
                let buf_ptr = if inp.chance(14) {
                    buf.as_mut_ptr() as *mut c_void
                } else {
                    std::ptr::null_mut()
                };
                let size_ptr: *mut usize = if inp.chance(15) {
                    &mut size
                } else {
                    std::ptr::null_mut()
                };
                // SAFETY: `buf` holds 8192 ≥ size bytes; `size` is writable (or NULL).
                let s = check("onnxGetBackendInfo", unsafe {
                    onnxGetBackendInfo(id, kind, buf_ptr, size_ptr)
                });
                if s == ONNXIFI_STATUS_SUCCESS {
                    assert!(size <= cap, "SUCCESS wrote {size} > {cap} bytes");
                } else if s == ONNXIFI_STATUS_FALLBACK {
                    assert!(size > cap || buf_ptr.is_null());
                }
            }
            3 => {
                let id = handle(inp, &sh.ids, &sh.backends);
                let m = &models()[inp.u8() as usize % 3];
                let len = if inp.chance(15) { m.len() } else { 0 };
                // SAFETY: `len` ≤ m.len() readable bytes.
                check("onnxGetBackendCompatibility", unsafe {
                    onnxGetBackendCompatibility(id, len, m.as_ptr().cast())
                });
            }
            4 => {
                if self.backends_made >= MAX_BACKENDS {
                    return;
                }
                let id = handle(inp, &sh.ids, &sh.backends);
                static NO_END: OnceLock<Vec<u64>> = OnceLock::new();
                let mut props: Vec<u64> = Vec::new();
                for _ in 0..inp.u8() % 4 {
                    let (k, v) = inp.pick(&[
                        (ONNXIFI_BACKEND_PROPERTY_OPTIMIZATION, 1),
                        (ONNXIFI_BACKEND_PROPERTY_OPTIMIZATION, 7),
                        (ONNXIFI_BACKEND_PROPERTY_LOG_LEVEL, 4),
                        (ONNXIFI_BACKEND_PROPERTY_LOG_LEVEL, 0),
                        (ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST, 1),
                        (ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST, 2),
                        (ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST, 0),
                        (ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST, 1025),
                        (ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST, u64::MAX),
                        (ONNXIFI_BACKEND_CUDA_STREAM, 0),
                        (0x77, 0),
                    ]);
                    props.extend([k, v]);
                }
                props.push(0);
                let list = match inp.u8() % 16 {
                    0 => std::ptr::null(),
                    // 4097 pairs of (OPTIMIZATION, 0) and no terminator within the limit.
                    1 => NO_END
                        .get_or_init(|| {
                            let mut v = [1u64, 0].repeat(4097);
                            v.push(0);
                            v
                        })
                        .as_ptr(),
                    _ => props.as_ptr(),
                };
                let mut b: onnxBackend = 0x10 as onnxBackend;
                let out: *mut onnxBackend = if inp.chance(15) {
                    &mut b
                } else {
                    std::ptr::null_mut()
                };
                // SAFETY: a terminated property list (or NULL), a writable out-handle (or NULL).
                let s = check("onnxInitBackend", unsafe { onnxInitBackend(id, list, out) });
                if s == ONNXIFI_STATUS_SUCCESS {
                    assert!(!b.is_null());
                    self.backends_made += 1;
                    sh.backends.lock().unwrap().push(b as usize);
                } else if !out.is_null() {
                    assert!(b.is_null(), "a failed onnxInitBackend left a handle");
                }
            }
            5 => {
                let b = handle(inp, &sh.backends, &sh.ids);
                // SAFETY: any handle value is safe to pass.
                let s = check("onnxReleaseBackend", unsafe { onnxReleaseBackend(b) });
                if s == ONNXIFI_STATUS_SUCCESS {
                    // SAFETY: as above.
                    assert_eq!(
                        unsafe { onnxReleaseBackend(b) },
                        ONNXIFI_STATUS_INVALID_BACKEND
                    );
                } else {
                    assert_eq!(s, ONNXIFI_STATUS_INVALID_BACKEND);
                }
            }
            6 => {
                let b = handle(inp, &sh.backends, &sh.graphs);
                let mut e: onnxEvent = 0x10 as onnxEvent;
                let out: *mut onnxEvent = if inp.chance(15) {
                    &mut e
                } else {
                    std::ptr::null_mut()
                };
                // SAFETY: a writable out-handle (or NULL).
                let s = check("onnxInitEvent", unsafe { onnxInitEvent(b, out) });
                if s == ONNXIFI_STATUS_SUCCESS {
                    sh.events.lock().unwrap().push((e as usize, false));
                } else if !out.is_null() {
                    assert!(e.is_null());
                }
            }
            7 => {
                let (e, out) = event_handle(inp, sh);
                // SAFETY: any handle value is safe to pass.
                let s = check("onnxSignalEvent", unsafe { onnxSignalEvent(e) });
                if s == ONNXIFI_STATUS_SUCCESS {
                    assert!(!out, "the caller signalled a run's output event");
                    let mut state = 0;
                    // SAFETY: a writable state.
                    let st = unsafe { onnxGetEventState(e, &mut state) };
                    assert!(
                        st == ONNXIFI_STATUS_INVALID_EVENT
                            || (st == ONNXIFI_STATUS_SUCCESS
                                && state == ONNXIFI_EVENT_STATE_SIGNALLED)
                    );
                }
            }
            8 => {
                let (e, _) = event_handle(inp, sh);
                let mut state = 7;
                let p: *mut onnxEventState = if inp.chance(15) {
                    &mut state
                } else {
                    std::ptr::null_mut()
                };
                // SAFETY: a writable state (or NULL).
                let s = check("onnxGetEventState", unsafe { onnxGetEventState(e, p) });
                match s {
                    ONNXIFI_STATUS_SUCCESS => assert!(
                        state == ONNXIFI_EVENT_STATE_SIGNALLED
                            || state == ONNXIFI_EVENT_STATE_NONSIGNALLED
                    ),
                    ONNXIFI_STATUS_INVALID_EVENT => assert_eq!(state, ONNXIFI_EVENT_STATE_INVALID),
                    _ => assert_eq!(s, ONNXIFI_STATUS_INVALID_POINTER),
                }
            }
            9 => {
                let (e, out) = event_handle(inp, sh);
                if self.can_wait(inp, e, out) {
                    // SAFETY: any handle value is safe to pass; this wait ends (see can_wait).
                    check("onnxWaitEvent", unsafe { onnxWaitEvent(e) });
                }
            }
            10 => {
                let (e, out) = event_handle(inp, sh);
                // A timeout makes the exec sleep: only now and then on an event that may be
                // unsignalled.
                let mut timeout = u32::from(inp.u8() % 2);
                if !self.can_wait(inp, e, out) {
                    if !inp.chance(1) {
                        return;
                    }
                    timeout = 1;
                }
                let mut state = 0;
                let mut status = -1;
                let mut msg = [0 as c_char; 128];
                let mut len = (inp.u8() % 129) as usize;
                let with_msg = inp.u8() % 4;
                let msg_ptr = if with_msg != 0 {
                    msg.as_mut_ptr()
                } else {
                    std::ptr::null_mut()
                };
                let len_ptr: *mut usize = if with_msg != 1 {
                    &mut len
                } else {
                    std::ptr::null_mut()
                };
                let state_ptr: *mut onnxEventState = if inp.chance(15) {
                    &mut state
                } else {
                    std::ptr::null_mut()
                };
                // SAFETY: writable state and status (or NULL), a message buffer of 128 ≥ len
                // bytes (or NULL); the wait ends (a timeout, or see can_wait).
                let s = check("onnxWaitEventFor", unsafe {
                    onnxWaitEventFor(e, timeout, state_ptr, &mut status, msg_ptr, len_ptr)
                });
                if s == ONNXIFI_STATUS_SUCCESS {
                    check("onnxWaitEventFor's event status", status);
                    assert!(
                        state == ONNXIFI_EVENT_STATE_SIGNALLED
                            || state == ONNXIFI_EVENT_STATE_NONSIGNALLED
                    );
                }
            }
            11 => {
                let (e, _) = event_handle(inp, sh);
                // SAFETY: any handle value is safe to pass.
                let s = check("onnxReleaseEvent", unsafe { onnxReleaseEvent(e) });
                if s == ONNXIFI_STATUS_SUCCESS {
                    // SAFETY: as above.
                    assert_eq!(unsafe { onnxReleaseEvent(e) }, ONNXIFI_STATUS_INVALID_EVENT);
                    // SAFETY: as above; a released event is not waited on.
                    assert_eq!(unsafe { onnxWaitEvent(e) }, ONNXIFI_STATUS_INVALID_EVENT);
                } else {
                    assert_eq!(s, ONNXIFI_STATUS_INVALID_EVENT);
                }
            }
            12 => {
                if self.graphs_made >= MAX_GRAPHS {
                    return;
                }
                let b = handle(inp, &sh.backends, &sh.ids);
                let m = &models()[if inp.chance(12) {
                    0
                } else {
                    inp.u8() as usize % 3
                }];
                let props = [inp.pick(&[0u64, 0, 0, 1, 0x5255_5354_0001]), 0, 0];
                let (count, weights) = match inp.u8() % 8 {
                    0 => (1 + u32::from(inp.u8() % 4), std::ptr::null()),
                    _ => (
                        0,
                        std::ptr::NonNull::<onnxTensorDescriptorV1>::dangling().as_ptr()
                            as *const _,
                    ),
                };
                let mut g: onnxGraph = 0x10 as onnxGraph;
                let out: *mut onnxGraph = if inp.chance(15) {
                    &mut g
                } else {
                    std::ptr::null_mut()
                };
                let model_ptr: *const c_void = if inp.chance(15) {
                    m.as_ptr().cast()
                } else {
                    std::ptr::null()
                };
                // SAFETY: a terminated property list, m.len() readable bytes (or NULL), no
                // weight descriptor is read (count 0, or NULL), a writable out-handle (or NULL).
                let s = check("onnxInitGraph", unsafe {
                    onnxInitGraph(b, props.as_ptr(), m.len(), model_ptr, count, weights, out)
                });
                if s == ONNXIFI_STATUS_SUCCESS {
                    assert!(!g.is_null());
                    self.graphs_made += 1;
                    sh.graphs.lock().unwrap().push(g as usize);
                } else if !out.is_null() {
                    assert!(g.is_null(), "a failed onnxInitGraph left a handle");
                }
            }
            13 => {
                let g = handle(inp, &sh.graphs, &sh.backends);
                // Releasing waits for the graph's queued runs: settle their input fences.
                self.settle(inp);
                // SAFETY: any handle value is safe to pass.
                let s = check("onnxReleaseGraph", unsafe { onnxReleaseGraph(g) });
                if s == ONNXIFI_STATUS_SUCCESS {
                    // SAFETY: as above.
                    assert_eq!(unsafe { onnxReleaseGraph(g) }, ONNXIFI_STATUS_INVALID_GRAPH);
                } else {
                    assert_eq!(s, ONNXIFI_STATUS_INVALID_GRAPH);
                }
            }
            14 => {
                let g = handle(inp, &sh.graphs, &sh.backends);
                let Some((d, _)) = self.descriptors(inp) else {
                    return;
                };
                let n_out = if inp.chance(15) { 1 } else { 0 };
                // SAFETY: descriptors naming NUL-terminated names, shapes of 2 entries, buffers
                // of 24 bytes that outlive every graph of this exec.
                check("onnxSetGraphIO", unsafe {
                    onnxSetGraphIO(g, 2, d.as_ptr(), n_out, d[2..].as_ptr())
                });
            }
            15 => {
                let g = handle(inp, &sh.graphs, &sh.backends);
                let (e, _) = if inp.chance(4) {
                    let b = handle(inp, &sh.backends, &sh.ids);
                    let mut e: onnxEvent = std::ptr::null_mut();
                    // SAFETY: a writable out-handle.
                    if unsafe { onnxInitEvent(b, &mut e) } == ONNXIFI_STATUS_SUCCESS {
                        sh.events.lock().unwrap().push((e as usize, false));
                    }
                    (e, false)
                } else {
                    event_handle(inp, sh)
                };
                let in_fence = onnxMemoryFenceV1 {
                    tag: if inp.chance(15) {
                        ONNXIFI_TAG_MEMORY_FENCE_V1
                    } else {
                        0
                    },
                    r#type: if inp.chance(15) {
                        ONNXIFI_SYNCHRONIZATION_EVENT
                    } else {
                        2
                    },
                    event: e,
                };
                let mut out_fence = onnxMemoryFenceV1 {
                    tag: ONNXIFI_TAG_MEMORY_FENCE_V1,
                    r#type: ONNXIFI_SYNCHRONIZATION_EVENT,
                    event: std::ptr::null_mut(),
                };
                // SAFETY: readable and writable fences.
                let s = check("onnxRunGraph", unsafe {
                    onnxRunGraph(g, &in_fence, &mut out_fence)
                });
                if s == ONNXIFI_STATUS_SUCCESS {
                    assert!(!out_fence.event.is_null());
                    sh.events
                        .lock()
                        .unwrap()
                        .push((out_fence.event as usize, true));
                    self.owed.push(e);
                }
            }
            16 => {
                let g = handle(inp, &sh.graphs, &sh.backends);
                let Some((d, _)) = self.descriptors(inp) else {
                    return;
                };
                let mut out_fence = onnxMemoryFenceV1 {
                    tag: if inp.chance(15) {
                        ONNXIFI_TAG_MEMORY_FENCE_V1
                    } else {
                        0
                    },
                    r#type: ONNXIFI_SYNCHRONIZATION_EVENT,
                    event: std::ptr::null_mut(),
                };
                // SAFETY: as for onnxSetGraphIO, and a writable output fence.
                let s = check("onnxSetIOAndRunGraph", unsafe {
                    onnxSetIOAndRunGraph(g, 2, d.as_ptr(), 1, d[2..].as_ptr(), &mut out_fence)
                });
                if s == ONNXIFI_STATUS_SUCCESS {
                    assert!(!out_fence.event.is_null());
                    sh.events
                        .lock()
                        .unwrap()
                        .push((out_fence.event as usize, true));
                }
            }
            17 => {
                let g = handle(inp, &sh.graphs, &sh.backends);
                let Some((mut d, _)) = self.descriptors(inp) else {
                    return;
                };
                let mut shape = [0u64; 4];
                let cap = u32::from(inp.u8() % 5);
                d[2].dimensions = cap;
                d[2].shape = shape.as_mut_ptr();
                let (ins, outs) = d.split_at_mut(2);
                // SAFETY: readable input descriptors; a writable output descriptor whose shape
                // has `cap` ≤ 4 writable entries.
                let s = check("onnxGetOutputShapesRUST", unsafe {
                    onnxGetOutputShapesRUST(g, 2, ins.as_ptr(), 1, outs.as_mut_ptr())
                });
                if s == ONNXIFI_STATUS_SUCCESS {
                    assert_eq!((outs[0].dimensions, &shape[..2]), (2, &[2u64, 3][..]));
                }
            }
            18 => {
                let mut buf = [0 as c_char; 256];
                let mut len = (inp.u8() as usize) % 257;
                let cap = len;
                let p = if inp.chance(14) {
                    buf.as_mut_ptr()
                } else {
                    std::ptr::null_mut()
                };
                let lp: *mut usize = if inp.chance(15) {
                    &mut len
                } else {
                    std::ptr::null_mut()
                };
                // SAFETY: a buffer of 256 ≥ len bytes (or NULL), a writable length (or NULL).
                let s = check("onnxGetLastErrorMessage", unsafe {
                    onnxGetLastErrorMessage(p, lp)
                });
                if s == ONNXIFI_STATUS_SUCCESS {
                    assert!(len <= cap && len >= 1 && buf[len - 1] == 0);
                }
            }
            _ => {
                let id = handle(inp, &sh.ids, &sh.backends);
                let name: &[u8] = inp.pick(&[
                    &b"onnxSetIOAndRunGraph\0"[..],
                    b"onnxSetIOAndRunGraphFunction\0",
                    b"onnxWaitEventFor\0",
                    b"onnxGetOutputShapesRUST\0",
                    b"onnxGetLastErrorMessage\0",
                    b"onnxReleaseTraceEvents\0",
                    b"onnxRunGraph\0",
                    b"Function\0",
                    b"\0",
                    b"\xff\0",
                ]);
                let name_ptr = if inp.chance(15) {
                    name.as_ptr() as *const c_char
                } else {
                    std::ptr::null()
                };
                let mut f: onnxExtensionFunctionPointer = None;
                let fp: *mut onnxExtensionFunctionPointer = if inp.chance(15) {
                    &mut f
                } else {
                    std::ptr::null_mut()
                };
                // SAFETY: a NUL-terminated name (or NULL), a writable function pointer (or NULL).
                let s = check("onnxGetExtensionFunctionAddress", unsafe {
                    onnxGetExtensionFunctionAddress(id, name_ptr, fp)
                });
                assert_eq!(s == ONNXIFI_STATUS_SUCCESS, f.is_some());
            }
        }
    }
}

fuzz_target!(
    init: {
        std::env::set_var("ONNXIFI_RUST_NUM_THREADS", "1");
        std::env::set_var("ONNXIFI_RUST_LOG", "0");
        models();
    },
    |data: &[u8]| {
    let inputs: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
    let mut outputs: Vec<f32> = vec![0.0; 6 * SLOTS];
    let sh = Shared {
        ids: Mutex::new(Vec::new()),
        backends: Mutex::new(Vec::new()),
        graphs: Mutex::new(Vec::new()),
        events: Mutex::new(Vec::new()),
        inputs: inputs.as_ptr() as usize,
        outputs: outputs.as_mut_ptr() as usize,
        next_slot: AtomicUsize::new(0),
    };
    // The exec starts with a backend ID, a backend and a graph, so that sequences go deep. The
    // ID and backend are kept from exec to exec (a fresh backend costs a thread) unless a
    // sequence released them.
    let (base_id, base_backend) = base();
    sh.ids.lock().unwrap().push(base_id);
    sh.backends.lock().unwrap().push(base_backend);
    {
        let m = &models()[0];
        let mut g: onnxGraph = std::ptr::null_mut();
        // SAFETY: a live backend, the model's bytes, no weights, a writable out-handle.
        let s = unsafe {
            onnxInitGraph(base_backend as onnxBackend, std::ptr::null(), m.len(), m.as_ptr().cast(), 0, std::ptr::null(), &mut g)
        };
        assert_eq!(s, ONNXIFI_STATUS_SUCCESS);
        sh.graphs.lock().unwrap().push(g as usize);
    }
    let (first, second) = data.split_at(data.len() / 2);
    // Both sequences start together (a new thread takes a while to start).
    let start = std::sync::Barrier::new(2);
    let sequence = |half: &[u8]| {
        start.wait();
        let mut inp = Input(half);
        let mut t = Thread { sh: &sh, owed: Vec::new(), backends_made: 0, graphs_made: 0 };
        while !inp.0.is_empty() {
            t.run_op(&mut inp);
        }
        t.settle(&mut inp);
    };
    // The first half on a new thread, the second on this one.
    std::thread::scope(|scope| {
        scope.spawn(|| sequence(first));
        sequence(second);
    });
    // Clean up: settle every event (so that queued runs can end), then release the graphs
    // (waiting for their runs), backends and IDs. Each answers SUCCESS or, already released,
    // INVALID_*.
    let events = std::mem::take(&mut *sh.events.lock().unwrap());
    let graphs = std::mem::take(&mut *sh.graphs.lock().unwrap());
    let backends = std::mem::take(&mut *sh.backends.lock().unwrap());
    let ids = std::mem::take(&mut *sh.ids.lock().unwrap());
    for &(e, _) in &events {
        // SAFETY: any handle value is safe to pass.
        check("onnxSignalEvent", unsafe { onnxSignalEvent(e as onnxEvent) });
    }
    for &(e, _) in &events {
        // SAFETY: any handle value is safe to pass.
        let s = unsafe { onnxReleaseEvent(e as onnxEvent) };
        assert!(s == ONNXIFI_STATUS_SUCCESS || s == ONNXIFI_STATUS_INVALID_EVENT, "{s:#x}");
    }
    for &g in &graphs {
        // SAFETY: any handle value is safe to pass.
        let s = unsafe { onnxReleaseGraph(g as onnxGraph) };
        assert!(s == ONNXIFI_STATUS_SUCCESS || s == ONNXIFI_STATUS_INVALID_GRAPH, "{s:#x}");
    }
    for &b in backends.iter().filter(|&&b| b != base_backend) {
        // SAFETY: any handle value is safe to pass.
        let s = unsafe { onnxReleaseBackend(b as onnxBackend) };
        assert!(s == ONNXIFI_STATUS_SUCCESS || s == ONNXIFI_STATUS_INVALID_BACKEND, "{s:#x}");
    }
    for &id in ids.iter().filter(|&&id| id != base_id) {
        // SAFETY: any handle value is safe to pass.
        let s = unsafe { onnxReleaseBackendID(id as onnxBackendID) };
        assert!(s == ONNXIFI_STATUS_SUCCESS || s == ONNXIFI_STATUS_INVALID_ID, "{s:#x}");
    }
    // Keep some of them as released handles for later execs.
    let mut old = OLD.lock().unwrap();
    old.extend(
        events
            .iter()
            .map(|&(e, _)| e)
            .chain(graphs)
            .chain(backends)
            .chain(ids)
            .filter(|&h| h != base_id && h != base_backend)
            .take(16),
    );
    let excess = old.len().saturating_sub(64);
    old.drain(..excess);
    drop(old);
    drop(outputs);
});
