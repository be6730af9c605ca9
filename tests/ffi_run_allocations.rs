//! A run through the C ABI allocates as much for a graph of forty steps as for one of two, once
//! warmed up: the steps themselves allocate nothing, their trace spans included (a run
//! recorded its spans, every step's input shapes formatted into strings, even when no caller
//! had asked for them). What a run's ONNXIFI calls allocate (its events, the queued job) is the
//! same for both graphs.
//!
//! A counting global allocator (this test binary's own, so it sees the library's allocations
//! on every thread: the caller's, the graph's queue and the backend's pool) counts while a
//! graph's measured runs are under way; this binary has this one test, so no other test
//! allocates meanwhile.

mod common;
mod counting;

use common::model_bytes;
use counting::Counting;
use onnxifi_rust::backend::NUM_THREADS_PROPERTY;
use onnxifi_rust::ffi::api::{
    onnxGetBackendIDs, onnxInitBackend, onnxInitEvent, onnxInitGraph, onnxReleaseBackend,
    onnxReleaseBackendID, onnxReleaseEvent, onnxReleaseGraph, onnxRunGraph, onnxSetGraphIO,
    onnxSignalEvent, onnxWaitEvent,
};
use onnxifi_rust::ffi::types::{
    onnxBackend, onnxBackendID, onnxEvent, onnxGraph, onnxMemoryFenceV1, onnxStatus,
    onnxTensorDescriptorV1, ONNXIFI_BACKEND_PROPERTY_NONE, ONNXIFI_DATATYPE_FLOAT32,
    ONNXIFI_MEMORY_TYPE_CPU, ONNXIFI_STATUS_SUCCESS, ONNXIFI_SYNCHRONIZATION_EVENT,
    ONNXIFI_TAG_MEMORY_FENCE_V1, ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1,
};
use std::ffi::CString;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

static MEASURING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

/// Counts an allocation, on any thread, while measuring is on.
fn note_allocation() {
    if MEASURING.load(Ordering::Relaxed) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting {
    note: note_allocation,
};

/// Asserts that an ONNXIFI call succeeded.
fn ok(status: onnxStatus, what: &str) {
    assert_eq!(status, ONNXIFI_STATUS_SUCCESS, "{what}: status {status:#x}");
}

/// A chain of `steps` elementwise nodes (Neg and Tanh in turn) over a `[1, 64]` input.
fn chain(steps: usize) -> String {
    let mut body = String::new();
    for i in 0..steps {
        let from = if i == 0 {
            "x".to_string()
        } else {
            format!("t{i}")
        };
        let to = if i + 1 == steps {
            "y".to_string()
        } else {
            format!("t{}", i + 1)
        };
        let op = if i % 2 == 0 { "Neg" } else { "Tanh" };
        body.push_str(&format!("  {to} = {op}({from})\n"));
    }
    format!(
        "<ir_version: 8, opset_import: [\"\" : 17]>\n\
         g (float[1, 64] x) => (float[1, 64] y) {{\n{body}}}\n"
    )
}

/// A descriptor of a `[1, 64]` float32 tensor named `name` over `buf`.
fn descriptor(name: &CString, shape: &[u64; 2], buf: &mut [f32]) -> onnxTensorDescriptorV1 {
    onnxTensorDescriptorV1 {
        tag: ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1,
        name: name.as_ptr(),
        dataType: ONNXIFI_DATATYPE_FLOAT32,
        memoryType: ONNXIFI_MEMORY_TYPE_CPU,
        dimensions: 2,
        shape: shape.as_ptr(),
        buffer: buf.as_mut_ptr() as u64,
    }
}

/// Runs `graph` once through the C ABI: a signalled input event, then waits for the output
/// event; releases both.
fn run_once(backend: onnxBackend, graph: onnxGraph) {
    let mut input: onnxEvent = std::ptr::null_mut();
    // SAFETY: a live backend and a writable out-handle.
    ok(
        unsafe { onnxInitEvent(backend, &mut input) },
        "onnxInitEvent",
    );
    // SAFETY: the event just made.
    ok(unsafe { onnxSignalEvent(input) }, "onnxSignalEvent");
    let input_fence = onnxMemoryFenceV1 {
        tag: ONNXIFI_TAG_MEMORY_FENCE_V1,
        r#type: ONNXIFI_SYNCHRONIZATION_EVENT,
        event: input,
    };
    let mut output_fence = onnxMemoryFenceV1 {
        tag: ONNXIFI_TAG_MEMORY_FENCE_V1,
        r#type: ONNXIFI_SYNCHRONIZATION_EVENT,
        event: std::ptr::null_mut(),
    };
    // SAFETY: a live graph with its IO set, and two valid fences.
    ok(
        unsafe { onnxRunGraph(graph, &input_fence, &mut output_fence) },
        "onnxRunGraph",
    );
    // SAFETY: the output event the run made, then both events, released once each.
    unsafe {
        ok(onnxWaitEvent(output_fence.event), "onnxWaitEvent");
        ok(onnxReleaseEvent(output_fence.event), "onnxReleaseEvent");
        ok(onnxReleaseEvent(input), "onnxReleaseEvent");
    }
}

/// The allocations of `runs` runs of a chain of `steps` nodes, after a warm-up, on a backend
/// of one thread; checks the output on the way (`y = tanh(-…)` of the input).
fn allocations_of_runs(backend: onnxBackend, steps: usize, runs: usize) -> usize {
    let bytes = model_bytes(&chain(steps));
    let mut graph: onnxGraph = std::ptr::null_mut();
    // SAFETY: a live backend, the model's bytes, no weight descriptors, a writable out-handle.
    ok(
        unsafe {
            onnxInitGraph(
                backend,
                std::ptr::null(),
                bytes.len(),
                bytes.as_ptr().cast(),
                0,
                std::ptr::null(),
                &mut graph,
            )
        },
        "onnxInitGraph",
    );
    let (x_name, y_name) = (CString::new("x").unwrap(), CString::new("y").unwrap());
    let shape = [1u64, 64];
    let mut x: Vec<f32> = (0..64).map(|i| i as f32 / 16.0 - 2.0).collect();
    let mut y = vec![f32::NAN; 64];
    let input = descriptor(&x_name, &shape, &mut x);
    let output = descriptor(&y_name, &shape, &mut y);
    // SAFETY: one descriptor each, over buffers that outlive every run of the graph.
    ok(
        unsafe { onnxSetGraphIO(graph, 1, &input, 1, &output) },
        "onnxSetGraphIO",
    );
    for _ in 0..10 {
        run_once(backend, graph);
    }
    ALLOCATIONS.store(0, Ordering::SeqCst);
    MEASURING.store(true, Ordering::SeqCst);
    for _ in 0..runs {
        run_once(backend, graph);
    }
    MEASURING.store(false, Ordering::SeqCst);
    let counted = ALLOCATIONS.load(Ordering::SeqCst);
    // SAFETY: the graph made above, released once, after its last run finished.
    ok(unsafe { onnxReleaseGraph(graph) }, "onnxReleaseGraph");
    let want: Vec<f32> = (0..64)
        .map(|i| {
            let mut v = i as f32 / 16.0 - 2.0;
            for s in 0..steps {
                v = if s % 2 == 0 { -v } else { v.tanh() };
            }
            v
        })
        .collect();
    for (i, (g, w)) in y.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-6,
            "{steps} steps, y[{i}] = {g}, want {w}"
        );
    }
    counted
}

#[test]
fn a_runs_allocations_do_not_grow_with_its_steps() {
    let mut id: onnxBackendID = std::ptr::null_mut();
    let mut count = 1usize;
    // SAFETY: room for one backend ID, and its count.
    ok(
        unsafe { onnxGetBackendIDs(&mut id, &mut count) },
        "onnxGetBackendIDs",
    );
    let props = [NUM_THREADS_PROPERTY, 1, ONNXIFI_BACKEND_PROPERTY_NONE];
    let mut backend: onnxBackend = std::ptr::null_mut();
    // SAFETY: the ID just listed, a property list ended by NONE, a writable out-handle.
    ok(
        unsafe { onnxInitBackend(id, props.as_ptr(), &mut backend) },
        "onnxInitBackend",
    );
    let runs = 20;
    let short = allocations_of_runs(backend, 2, runs);
    let long = allocations_of_runs(backend, 40, runs);
    // SAFETY: the backend (its graphs released) and its ID, released once each.
    unsafe {
        ok(onnxReleaseBackend(backend), "onnxReleaseBackend");
        ok(onnxReleaseBackendID(id), "onnxReleaseBackendID");
    }
    // Thirty-eight more steps per run: one allocation per step and run would add 760.
    assert!(
        long <= short + runs,
        "{runs} runs of 40 steps made {long} allocations, of 2 steps {short}"
    );
}
