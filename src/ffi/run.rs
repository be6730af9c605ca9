//! A queued run: it waits for its input fence on a pool thread, binds the caller's buffers
//! (in place or copied, see [`super::io`]), computes, writes the outputs and signals the output
//! event.

use super::api::{err, EVENTS};
use super::io::{caller_input, caller_output, read_tensor, write_tensor, written_in_place};
use super::trace_list::TraceSink;
use super::types::*;
use crate::error::{Error, Result, Status};
use crate::graph::{Binding, Graph};
use crate::ir::Tensor;
use crate::sync::event::{Event, Outcome};
use std::sync::Arc;

/// Queues a run of `g` with `binding`, started when `input` is signalled; signals `output`.
/// Fails with INVALID_GRAPH when the graph is being released.
fn queue_run(
    g: &Arc<Graph>,
    binding: Arc<Binding>,
    input: &Event,
    output: Arc<Event>,
    sink: TraceSink,
) -> Result<()> {
    let graph = g.clone();
    g.queue.submit(
        input,
        Box::new(move |fence| {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                // Spans are recorded only for a caller's trace list: a recording under way
                // makes every step's span (its shapes formatted) on this thread, and at one
                // thread the steps run on this one.
                let wanted = sink.wanted();
                let (result, events) = if wanted {
                    crate::trace::record_run(|| execute(&graph, &binding, fence, true))
                } else {
                    (execute(&graph, &binding, fence, false), Vec::new())
                };
                // SAFETY: the sink's list is the caller's, kept alive until the output fence
                // is signalled (the contract of the foxi onnxSetIOAndRunGraph), which happens
                // after this.
                unsafe { sink.fill(events) };
                result
            }))
            .unwrap_or_else(|_| {
                Err(err(
                    Status::InternalError,
                    "a panic was caught while running the graph",
                ))
            });
            let outcome = match result {
                Ok(()) => Outcome {
                    status: Status::Success,
                    message: String::new(),
                },
                Err(e) => Outcome {
                    status: e.status,
                    message: e.message,
                },
            };
            // Only this run signals its output event: the caller's onnxSignalEvent on it is
            // refused, so this signal cannot fail.
            let _ = output.signal(outcome);
        }),
    )
}

/// The body of a run, on a pool thread once its input fence fired: read the inputs, compute,
/// write the outputs.
fn execute(g: &Graph, binding: &Binding, fence: Option<Outcome>, record: bool) -> Result<()> {
    let fence = fence.ok_or_else(|| {
        err(
            Status::InvalidEvent,
            "the input event was released before it was signalled",
        )
    })?;
    if fence.status != Status::Success {
        return Err(Error::new(
            fence.status,
            format!("the input fence carries a failure: {}", fence.message),
        ));
    }
    let started = std::time::Instant::now();
    let run_span = crate::trace::span("run", "run");
    let copy_in = crate::trace::span("io", "copy inputs");
    let mut inputs: Vec<Tensor> = Vec::with_capacity(binding.inputs.len());
    for (b, &direct) in binding.inputs.iter().zip(&binding.inputs_in_place) {
        inputs.push(if direct {
            // SAFETY: `in_place` (at `onnxSetGraphIO`) checked the alignment and that no other bound buffer overlaps
            // this one; the caller keeps bound buffers alive and ready from the input fence to
            // the output fence, and `inputs` (drained by the run) is dropped before this
            // function returns, i.e. before the output fence is signalled.
            unsafe { caller_input(b) }?
        } else {
            let storage = g.exe.input_storage(b.dtype, b.shape.iter().product())?;
            // SAFETY: the caller keeps bound buffers alive and ready once the input fence fires.
            unsafe { read_tensor(b, storage) }?
        });
    }
    let mut in_place_outputs: Vec<Option<Tensor>> = Vec::with_capacity(binding.outputs.len());
    for (b, &direct) in binding.outputs.iter().zip(&binding.outputs_in_place) {
        // SAFETY: `in_place` (at `onnxSetGraphIO`) checked the alignment and that no other bound buffer overlaps this
        // one; the buffer is the caller's, reserved for this run, and every tensor over it
        // (unused ones in `in_place_outputs`, used ones among the outputs) is dropped before
        // this function returns.
        in_place_outputs.push(if direct {
            Some(unsafe { caller_output(b) }?)
        } else {
            None
        });
    }
    drop(copy_in);
    // The steps run on a thread of the backend's pool: record them there and keep them with
    // this run's events.
    let mut outputs = Vec::with_capacity(binding.outputs.len());
    let (result, steps) = g.backend.pool.install(|| {
        crate::sync::hot::with_hot_workers(|| {
            let mut run = || {
                g.exe
                    .run_in_place(&mut inputs, &mut in_place_outputs, &mut outputs)
            };
            if record {
                crate::trace::record_run(run)
            } else {
                (run(), Vec::new())
            }
        })
    });
    crate::trace::adopt(steps);
    drop(in_place_outputs);
    result?;
    let copy_out = crate::trace::span("io", "copy outputs");
    for ((t, b), spec) in outputs.iter().zip(&binding.outputs).zip(g.exe.outputs()) {
        if written_in_place(t, b) {
            continue;
        }
        // SAFETY: bound output buffers are the caller's, reserved for this run.
        unsafe { write_tensor(&spec.name, t, b) }?;
    }
    drop(copy_out);
    // Their storage serves the next run's inputs and outputs.
    g.exe.recycle(outputs);
    drop(run_span);
    crate::log::log(crate::log::Level::Debug, || {
        format!(
            "run finished in {:.3} ms",
            started.elapsed().as_secs_f64() * 1e3
        )
    });
    Ok(())
}

/// Creates the output event, queues the run and stores the event in the caller's output fence.
/// When the graph is released meanwhile, nothing is queued, the fence is left untouched and the
/// answer is INVALID_GRAPH.
///
/// # Safety
/// `output_fence` points to a writable fence whose tag was checked.
pub(super) unsafe fn start_run(
    g: &Arc<Graph>,
    binding: Arc<Binding>,
    input: &Event,
    output_fence: *mut onnxMemoryFenceV1,
    sink: TraceSink,
) -> Result<()> {
    let output = Arc::new(Event::for_run());
    queue_run(g, binding, input, output.clone(), sink)?;
    let handle = EVENTS.insert(output);
    // SAFETY: as stated for this function; only the event member is written.
    unsafe { std::ptr::addr_of_mut!((*output_fence).event).write_unaligned(handle) };
    Ok(())
}
