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

/// Helpers shared with the other targets (the modules of `common/` this target uses).
#[path = "common"]
mod common {
    pub mod abi;
    pub mod add_model;
    pub mod descriptor;
    pub mod input;
}
#[path = "api_sequence/backend_ops.rs"]
mod backend_ops;
#[path = "api_sequence/event_ops.rs"]
mod event_ops;
#[path = "api_sequence/graph_ops.rs"]
mod graph_ops;
#[path = "api_sequence/state.rs"]
mod state;

use common::abi::{check, init_env};
use common::add_model::init_graph;
use common::input::Input;
use libfuzzer_sys::fuzz_target;
use onnxifi_rust::ffi::api::*;
use onnxifi_rust::ffi::types::*;
use state::{base, models, release_at_end, Shared, Thread, OLD, SLOTS};
use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

impl Thread<'_> {
    /// Reads one operation and runs it.
    fn run_op(&mut self, inp: &mut Input) {
        match inp.u8() % 20 {
            0 => self.get_backend_ids(inp),
            1 => self.release_backend_id(inp),
            2 => self.get_backend_info(inp),
            3 => self.get_backend_compatibility(inp),
            4 => self.init_backend(inp),
            5 => self.release_backend(inp),
            6 => self.init_event(inp),
            7 => self.signal_event(inp),
            8 => self.get_event_state(inp),
            9 => self.wait_event(inp),
            10 => self.wait_event_for(inp),
            11 => self.release_event(inp),
            12 => self.init_graph(inp),
            13 => self.release_graph(inp),
            14 => self.set_graph_io(inp),
            15 => self.run_graph(inp),
            16 => self.set_io_and_run_graph(inp),
            17 => self.get_output_shapes(inp),
            18 => self.get_last_error_message(inp),
            _ => self.get_extension_function_address(inp),
        }
    }
}

fuzz_target!(
    init: {
        init_env();
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
    let g = init_graph(base_backend as onnxBackend, &models()[0]);
    sh.graphs.lock().unwrap().push(g as usize);
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
        release_at_end(onnxReleaseEvent, e, ONNXIFI_STATUS_INVALID_EVENT);
    }
    for &g in &graphs {
        release_at_end(onnxReleaseGraph, g, ONNXIFI_STATUS_INVALID_GRAPH);
    }
    for &b in backends.iter().filter(|&&b| b != base_backend) {
        release_at_end(onnxReleaseBackend, b, ONNXIFI_STATUS_INVALID_BACKEND);
    }
    for &id in ids.iter().filter(|&&id| id != base_id) {
        release_at_end(onnxReleaseBackendID, id, ONNXIFI_STATUS_INVALID_ID);
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
