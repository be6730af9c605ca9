//! The exported core ONNXIFI functions (the API of onnx 1.12.0 `onnxifi.h`), the handle
//! registries and the helpers the extensions in [`super::ext`] share (runs: [`super::run`]).
#![allow(non_snake_case, clippy::missing_safety_doc)]

use super::guard;
use super::handles::Registry;
use super::io::{in_place, read_descriptors, read_tensor, Described};
use super::run::start_run;
use super::trace_list::TraceSink;
use super::types::*;
use crate::backend::{Backend, Settings};
use crate::error::{Error, Result, Status};
use crate::graph::{check_compatibility, Binding, BoundTensor, Graph};
use crate::ir::{TensorData, Weight};
use crate::sync::event::Event;
use std::os::raw::c_void;
use std::sync::Arc;

/// A backend ID object (there is one backend: this CPU).
pub struct BackendId;

static BACKEND_IDS: Registry<BackendId> = Registry::new();
static BACKENDS: Registry<Backend> = Registry::new();
static GRAPHS: Registry<Graph> = Registry::new();
/// Live events (also read by the run path, [`super::run`]).
pub(super) static EVENTS: Registry<Event> = Registry::new();

/// Longest accepted property list, in (key, value) pairs, before giving up on a terminator.
const MAX_PROPERTIES: usize = 4096;

pub(super) fn err(status: Status, msg: impl Into<String>) -> Error {
    Error::new(status, msg)
}

pub(super) fn backend_id(id: onnxBackendID) -> Result<Arc<BackendId>> {
    BACKEND_IDS
        .get(id)
        .ok_or_else(|| err(Status::InvalidId, "not a live backend ID"))
}

fn backend(b: onnxBackend) -> Result<Arc<Backend>> {
    BACKENDS
        .get(b)
        .ok_or_else(|| err(Status::InvalidBackend, "not a live backend"))
}

pub(super) fn graph(g: onnxGraph) -> Result<Arc<Graph>> {
    GRAPHS
        .get(g)
        .ok_or_else(|| err(Status::InvalidGraph, "not a live graph"))
}

pub(super) fn event(e: onnxEvent) -> Result<Arc<Event>> {
    EVENTS
        .get(e)
        .ok_or_else(|| err(Status::InvalidEvent, "not a live event"))
}

/// Reads a property list terminated by key 0 as (key, value) pairs.
///
/// # Safety
/// `list` is NULL or points to key/value pairs ending with a 0 key.
unsafe fn read_properties(list: *const u64) -> Result<Vec<(u64, u64)>> {
    let mut props = Vec::new();
    if list.is_null() {
        return Ok(props);
    }
    for i in 0..MAX_PROPERTIES {
        // SAFETY: the list is readable up to and including its terminating key.
        let key = unsafe { list.add(2 * i).read_unaligned() };
        if key == ONNXIFI_BACKEND_PROPERTY_NONE {
            return Ok(props);
        }
        // SAFETY: a non-terminating key is followed by its value.
        let value = unsafe { list.add(2 * i + 1).read_unaligned() };
        props.push((key, value));
    }
    Err(err(
        Status::InvalidProperty,
        "the property list has no terminator",
    ))
}

/// Borrows the model bytes.
///
/// # Safety
/// `model` points to `size` readable bytes.
unsafe fn model_bytes<'a>(size: usize, model: *const c_void) -> Result<&'a [u8]> {
    if model.is_null() {
        return Err(err(Status::InvalidPointer, "the model pointer is NULL"));
    }
    if size == 0 {
        return Err(err(Status::InvalidSize, "the model size is 0"));
    }
    if size > isize::MAX as usize {
        return Err(err(
            Status::InvalidSize,
            "the model size is impossibly large",
        ));
    }
    // SAFETY: as stated for this function.
    Ok(unsafe { std::slice::from_raw_parts(model as *const u8, size) })
}

/// Lists the backend IDs (one: the CPU), with the count-then-fill size protocol.
#[no_mangle]
pub unsafe extern "C" fn onnxGetBackendIDs(
    backendIDs: *mut onnxBackendID,
    numBackends: *mut usize,
) -> onnxStatus {
    guard(|| {
        if numBackends.is_null() {
            return Err(err(Status::InvalidPointer, "numBackends is NULL"));
        }
        // SAFETY: checked non-NULL; the caller passes a readable and writable size_t.
        let capacity = unsafe { numBackends.read() };
        let available = 1usize;
        if backendIDs.is_null() || capacity < available {
            // SAFETY: as above.
            unsafe { numBackends.write(available) };
            return Ok(Status::Fallback);
        }
        let id = BACKEND_IDS.insert(Arc::new(BackendId));
        // SAFETY: the caller's array holds `capacity` ≥ 1 IDs.
        unsafe {
            backendIDs.write(id);
            numBackends.write(available);
        }
        Ok(Status::Success)
    })
}

/// Releases a backend ID.
#[no_mangle]
pub unsafe extern "C" fn onnxReleaseBackendID(backendID: onnxBackendID) -> onnxStatus {
    guard(|| {
        BACKEND_IDS
            .remove(backendID)
            .ok_or_else(|| err(Status::InvalidId, "not a live backend ID"))?;
        Ok(Status::Success)
    })
}

/// Answers one info query with the byte-size protocol.
#[no_mangle]
pub unsafe extern "C" fn onnxGetBackendInfo(
    backendID: onnxBackendID,
    infoType: onnxBackendInfo,
    infoValue: *mut c_void,
    infoValueSize: *mut usize,
) -> onnxStatus {
    guard(|| {
        backend_id(backendID)?;
        if infoValueSize.is_null() {
            return Err(err(Status::InvalidPointer, "infoValueSize is NULL"));
        }
        let value = super::info::value(infoType)?;
        // SAFETY: checked non-NULL; a readable and writable size_t.
        let capacity = unsafe { infoValueSize.read() };
        if infoValue.is_null() || capacity < value.len() {
            // SAFETY: as above.
            unsafe { infoValueSize.write(value.len()) };
            return Ok(Status::Fallback);
        }
        // SAFETY: the caller's buffer holds `capacity` ≥ value.len() bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(value.as_ptr(), infoValue as *mut u8, value.len());
            infoValueSize.write(value.len());
        }
        Ok(Status::Success)
    })
}

/// Tells whether a serialized model can run here.
#[no_mangle]
pub unsafe extern "C" fn onnxGetBackendCompatibility(
    backendID: onnxBackendID,
    onnxModelSize: usize,
    onnxModel: *const c_void,
) -> onnxStatus {
    guard(|| {
        backend_id(backendID)?;
        // SAFETY: the caller gives `onnxModelSize` readable bytes.
        let bytes = unsafe { model_bytes(onnxModelSize, onnxModel) }?;
        check_compatibility(bytes)?;
        Ok(Status::Success)
    })
}

/// Creates a backend (with its compute pool).
#[no_mangle]
pub unsafe extern "C" fn onnxInitBackend(
    backendID: onnxBackendID,
    auxPropertiesList: *const u64,
    backend: *mut onnxBackend,
) -> onnxStatus {
    guard(|| {
        if backend.is_null() {
            return Err(err(Status::InvalidPointer, "backend is NULL"));
        }
        // SAFETY: checked non-NULL; the out-handle is cleared first so failure leaves NULL.
        unsafe { backend.write(std::ptr::null_mut()) };
        backend_id(backendID)?;
        // SAFETY: NULL or a terminated property list.
        let props = unsafe { read_properties(auxPropertiesList) }?;
        let b = Backend::new(Settings::from_properties(&props)?)?;
        let handle = BACKENDS.insert(Arc::new(b));
        // SAFETY: as above.
        unsafe { backend.write(handle) };
        Ok(Status::Success)
    })
}

/// Destroys a backend.
#[no_mangle]
pub unsafe extern "C" fn onnxReleaseBackend(backend: onnxBackend) -> onnxStatus {
    guard(|| {
        BACKENDS
            .remove(backend)
            .ok_or_else(|| err(Status::InvalidBackend, "not a live backend"))?;
        crate::trace::flush();
        Ok(Status::Success)
    })
}

/// Creates a non-signalled event.
#[no_mangle]
pub unsafe extern "C" fn onnxInitEvent(backend_: onnxBackend, event: *mut onnxEvent) -> onnxStatus {
    guard(|| {
        if event.is_null() {
            return Err(err(Status::InvalidPointer, "event is NULL"));
        }
        // SAFETY: checked non-NULL; cleared first so failure leaves NULL.
        unsafe { event.write(std::ptr::null_mut()) };
        backend(backend_)?;
        let handle = EVENTS.insert(Arc::new(Event::new()));
        // SAFETY: as above.
        unsafe { event.write(handle) };
        Ok(Status::Success)
    })
}

/// Signals an event; a second signal is INVALID_STATE, and so is signalling an output event
/// that `onnxRunGraph` made (its run signals it when the outputs are written).
#[no_mangle]
pub unsafe extern "C" fn onnxSignalEvent(event_: onnxEvent) -> onnxStatus {
    guard(|| {
        event(event_)?.signal_by_caller()?;
        Ok(Status::Success)
    })
}

/// Reads an event's state without waiting.
#[no_mangle]
pub unsafe extern "C" fn onnxGetEventState(
    event_: onnxEvent,
    state: *mut onnxEventState,
) -> onnxStatus {
    guard(|| {
        if state.is_null() {
            return Err(err(Status::InvalidPointer, "state is NULL"));
        }
        let value = match event(event_) {
            Ok(e) if e.outcome().is_some() => ONNXIFI_EVENT_STATE_SIGNALLED,
            Ok(_) => ONNXIFI_EVENT_STATE_NONSIGNALLED,
            Err(e) => {
                // SAFETY: checked non-NULL; the header asks for INVALID on failure.
                unsafe { state.write(ONNXIFI_EVENT_STATE_INVALID) };
                return Err(e);
            }
        };
        // SAFETY: checked non-NULL.
        unsafe { state.write(value) };
        Ok(Status::Success)
    })
}

/// Waits for an event; returns the status it was signalled with (a failed run's status).
#[no_mangle]
pub unsafe extern "C" fn onnxWaitEvent(event_: onnxEvent) -> onnxStatus {
    guard(|| {
        let e = event(event_)?;
        let outcome = e.wait().ok_or_else(|| {
            err(
                Status::InvalidEvent,
                "the event was released while being waited for",
            )
        })?;
        if outcome.status == Status::Success {
            Ok(Status::Success)
        } else {
            Err(Error::new(outcome.status, outcome.message))
        }
    })
}

/// Releases an event. A run still waiting on it as its input fence then fails.
#[no_mangle]
pub unsafe extern "C" fn onnxReleaseEvent(event: onnxEvent) -> onnxStatus {
    guard(|| {
        let e = EVENTS
            .remove(event)
            .ok_or_else(|| err(Status::InvalidEvent, "not a live event"))?;
        e.abandon();
        Ok(Status::Success)
    })
}

/// Copies the weight descriptors' data and metadata.
///
/// # Safety
/// `weights` points to `count` descriptors whose buffers hold the described data.
unsafe fn read_weights(count: u32, weights: *const onnxTensorDescriptorV1) -> Result<Vec<Weight>> {
    if count == 0 {
        return Ok(Vec::new());
    }
    if weights.is_null() {
        return Err(err(
            Status::InvalidPointer,
            "weightDescriptors is NULL but weightsCount > 0",
        ));
    }
    // SAFETY: as stated for this function.
    let described = unsafe { read_descriptors(weights, count) }?;
    let mut out = Vec::with_capacity(described.len());
    for Described { name, tensor } in described {
        if !tensor.dtype.is_stored() {
            return Err(err(
                Status::UnsupportedDatatype,
                format!("weight '{name}' has type {}", tensor.dtype.name()),
            ));
        }
        // SAFETY: the descriptor's buffer holds its data during onnxInitGraph.
        let t = unsafe { read_tensor(&tensor, TensorData::zeros(tensor.dtype, 0)?) }?;
        out.push(Weight { name, tensor: t });
    }
    Ok(out)
}

/// Compiles a model into a graph.
#[cfg(not(feature = "foxi"))]
#[no_mangle]
pub unsafe extern "C" fn onnxInitGraph(
    backend_: onnxBackend,
    auxPropertiesList: *const u64,
    onnxModelSize: usize,
    onnxModel: *const c_void,
    weightsCount: u32,
    weightDescriptors: *const onnxTensorDescriptorV1,
    graph: *mut onnxGraph,
) -> onnxStatus {
    // SAFETY: forwarded contract.
    unsafe {
        init_graph(
            backend_,
            auxPropertiesList,
            (onnxModelSize, onnxModel),
            (weightsCount, weightDescriptors),
            graph,
            false,
        )
    }
}

/// Compiles a model into a graph (foxi dialect). `maxSeqLength` is a hint this backend does
/// not need (plans are made per input shape); a deferred weight reader is not supported
/// (UNSUPPORTED_PROPERTY): weights come from the model or from weight descriptors.
#[cfg(feature = "foxi")]
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn onnxInitGraph(
    backend_: onnxBackend,
    auxPropertiesList: *const u64,
    onnxModelSize: usize,
    onnxModel: *const c_void,
    weightsCount: u32,
    weightDescriptors: *const onnxTensorDescriptorV1,
    graph: *mut onnxGraph,
    maxSeqLength: u32,
    deferredWeightReader: *mut c_void,
) -> onnxStatus {
    let _ = maxSeqLength;
    // SAFETY: forwarded contract.
    unsafe {
        init_graph(
            backend_,
            auxPropertiesList,
            (onnxModelSize, onnxModel),
            (weightsCount, weightDescriptors),
            graph,
            !deferredWeightReader.is_null(),
        )
    }
}

/// The body of both `onnxInitGraph` forms.
///
/// # Safety
/// As the ONNXIFI contract of `onnxInitGraph` states for each argument.
unsafe fn init_graph(
    backend_: onnxBackend,
    auxPropertiesList: *const u64,
    (onnxModelSize, onnxModel): (usize, *const c_void),
    (weightsCount, weightDescriptors): (u32, *const onnxTensorDescriptorV1),
    graph: *mut onnxGraph,
    deferred_weights: bool,
) -> onnxStatus {
    guard(|| {
        if graph.is_null() {
            return Err(err(Status::InvalidPointer, "graph is NULL"));
        }
        // SAFETY: checked non-NULL; cleared first so failure leaves NULL.
        unsafe { graph.write(std::ptr::null_mut()) };
        let b = backend(backend_)?;
        if deferred_weights {
            return Err(err(
                Status::UnsupportedProperty,
                "a deferred weight reader is not supported: give weights in the model or as \
                 weight descriptors",
            ));
        }
        // SAFETY: the caller gives `onnxModelSize` readable bytes.
        let bytes = unsafe { model_bytes(onnxModelSize, onnxModel) }?;
        // SAFETY: NULL or a terminated property list.
        let props = unsafe { read_properties(auxPropertiesList) }?;
        if let Some((key, _)) = props.first() {
            return Err(err(
                Status::UnsupportedProperty,
                format!("graph property {key:#x} is not supported"),
            ));
        }
        // SAFETY: the caller gives `weightsCount` descriptors.
        let weights = unsafe { read_weights(weightsCount, weightDescriptors) }?;
        let g = Graph::compile(b, bytes, weights)?;
        if g.exe.released_weight_bytes() >= super::heap::RETURN_MIN_BYTES {
            super::heap::return_freed_pages();
        }
        let handle = GRAPHS.insert(Arc::new(g));
        // SAFETY: as above.
        unsafe { graph.write(handle) };
        Ok(Status::Success)
    })
}

/// Validates descriptors against the graph and builds a binding.
fn bind(g: &Graph, inputs: Vec<Described>, outputs: Vec<Described>) -> Result<Binding> {
    let exe = &g.exe;
    let mut bound_in: Vec<Option<BoundTensor>> = vec![None; exe.inputs().len()];
    let mut bound_out: Vec<Option<BoundTensor>> = vec![None; exe.outputs().len()];
    // An input descriptor binds a graph input and an output descriptor a graph output, never
    // the other way round: the backend writes only the buffers the caller gave as outputs.
    let described = inputs
        .into_iter()
        .map(|d| (d, true))
        .chain(outputs.into_iter().map(|d| (d, false)));
    for (d, is_input) in described {
        let (specs, bound, kind) = if is_input {
            (exe.inputs(), &mut bound_in, "input")
        } else {
            (exe.outputs(), &mut bound_out, "output")
        };
        let Some(i) = specs.iter().position(|s| s.name == d.name) else {
            return Err(err(
                Status::InvalidName,
                format!("'{}' is not an {kind} of the graph", d.name),
            ));
        };
        let (slot, spec) = (&mut bound[i], &specs[i]);
        if slot.is_some() {
            return Err(err(
                Status::InvalidName,
                format!("'{}' is described twice", d.name),
            ));
        }
        if d.tensor.dtype != spec.declared.dtype {
            return Err(err(
                Status::MismatchingDatatype,
                format!(
                    "'{}' is {} in the model, {} given",
                    d.name,
                    spec.declared.dtype.name(),
                    d.tensor.dtype.name()
                ),
            ));
        }
        *slot = Some(d.tensor);
    }
    let missing = |specs: &[crate::exec::IoSpec], bound: &[Option<BoundTensor>]| {
        specs
            .iter()
            .zip(bound)
            .find(|(_, b)| b.is_none())
            .map(|(s, _)| s.name.clone())
    };
    if let Some(name) =
        missing(exe.inputs(), &bound_in).or_else(|| missing(exe.outputs(), &bound_out))
    {
        return Err(err(
            Status::UnidentifiedName,
            format!("'{name}' has no descriptor"),
        ));
    }
    let inputs: Vec<BoundTensor> = bound_in.into_iter().flatten().collect();
    let outputs: Vec<BoundTensor> = bound_out.into_iter().flatten().collect();
    let shapes: Vec<Vec<usize>> = inputs.iter().map(|b| b.shape.clone()).collect();
    let expected = exe.output_shapes(&shapes)?;
    for ((b, spec), want) in outputs.iter().zip(exe.outputs()).zip(expected) {
        match want {
            Some(want) if b.shape != want => {
                return Err(err(
                    Status::MismatchingShape,
                    format!(
                        "output '{}' has shape {want:?}, the descriptor says {:?}",
                        spec.name, b.shape
                    ),
                ))
            }
            // Decided by the run: the rank must still agree with the declaration.
            None => {
                if let Some(dims) = &spec.declared.dims {
                    if dims.len() != b.shape.len() {
                        return Err(err(
                            Status::MismatchingShape,
                            format!(
                                "output '{}' has rank {}, the descriptor {}",
                                spec.name,
                                dims.len(),
                                b.shape.len()
                            ),
                        ));
                    }
                }
            }
            Some(_) => {}
        }
    }
    let (inputs_in_place, outputs_in_place) = in_place(&inputs, &outputs);
    Ok(Binding {
        inputs,
        outputs,
        inputs_in_place,
        outputs_in_place,
    })
}

/// Binds the graph's inputs and outputs to the caller's buffers. A failure drops the previous
/// binding.
#[no_mangle]
pub unsafe extern "C" fn onnxSetGraphIO(
    graph_: onnxGraph,
    inputsCount: u32,
    inputDescriptors: *const onnxTensorDescriptorV1,
    outputsCount: u32,
    outputDescriptors: *const onnxTensorDescriptorV1,
) -> onnxStatus {
    guard(|| {
        let g = graph(graph_)?;
        g.set_binding(None);
        // SAFETY: the caller gives the stated number of descriptors.
        let binding = unsafe {
            read_binding(
                &g,
                inputsCount,
                inputDescriptors,
                outputsCount,
                outputDescriptors,
            )
        }?;
        g.set_binding(Some(binding));
        Ok(Status::Success)
    })
}

/// # Safety
/// The descriptor arrays hold the stated counts.
pub(super) unsafe fn read_binding(
    g: &Graph,
    inputsCount: u32,
    inputDescriptors: *const onnxTensorDescriptorV1,
    outputsCount: u32,
    outputDescriptors: *const onnxTensorDescriptorV1,
) -> Result<Binding> {
    if outputDescriptors.is_null() {
        return Err(err(Status::InvalidPointer, "outputDescriptors is NULL"));
    }
    if inputDescriptors.is_null() && inputsCount > 0 {
        return Err(err(
            Status::InvalidPointer,
            "inputDescriptors is NULL but inputsCount > 0",
        ));
    }
    if outputsCount == 0 {
        return Err(err(Status::InvalidSize, "outputsCount is 0"));
    }
    let inputs = if inputsCount == 0 {
        Vec::new()
    } else {
        // SAFETY: as stated for this function.
        unsafe { read_descriptors(inputDescriptors, inputsCount) }?
    };
    // SAFETY: as stated for this function.
    let outputs = unsafe { read_descriptors(outputDescriptors, outputsCount) }?;
    bind(g, inputs, outputs)
}

/// What `onnxRunGraph` checked about a fence.
fn check_fence_header(f: &onnxMemoryFenceV1, which: &str) -> Result<()> {
    match f.r#type {
        ONNXIFI_SYNCHRONIZATION_EVENT => Ok(()),
        ONNXIFI_SYNCHRONIZATION_IMPLICIT => Err(err(
            Status::UnsupportedFenceType,
            format!("{which}: implicit synchronization does not apply to a CPU backend"),
        )),
        t => Err(err(
            Status::InvalidFenceType,
            format!("{which}: fence type {t} is not defined"),
        )),
    }
}

/// Reads a fence after checking its tag.
///
/// # Safety
/// `f` points to a readable fence (its tag is read first).
pub(super) unsafe fn read_fence(
    f: *const onnxMemoryFenceV1,
    which: &str,
) -> Result<onnxMemoryFenceV1> {
    if f.is_null() {
        return Err(err(Status::InvalidPointer, format!("{which} is NULL")));
    }
    // SAFETY: the tag, the first field, is read alone first, as the header requires.
    let tag = unsafe { std::ptr::addr_of!((*f).tag).read_unaligned() };
    if tag != ONNXIFI_TAG_MEMORY_FENCE_V1 {
        return Err(err(
            Status::UnsupportedTag,
            format!("{which} has tag {tag:#x}, not ONNXIFI_TAG_MEMORY_FENCE_V1"),
        ));
    }
    // SAFETY: a V1 fence is readable whole.
    let fence = unsafe { f.read_unaligned() };
    check_fence_header(&fence, which)?;
    Ok(fence)
}

/// Starts an asynchronous run: validates, creates the output event, queues the run and returns
/// at once. The run waits for the input fence on its own thread.
#[no_mangle]
pub unsafe extern "C" fn onnxRunGraph(
    graph_: onnxGraph,
    inputFence: *const onnxMemoryFenceV1,
    outputFence: *mut onnxMemoryFenceV1,
) -> onnxStatus {
    guard(|| {
        // SAFETY: NULL or a readable fence.
        let input_fence = unsafe { read_fence(inputFence, "inputFence") }?;
        // SAFETY: NULL or a readable fence (the caller sets its tag and type).
        unsafe { read_fence(outputFence, "outputFence") }?;
        let g = graph(graph_)?;
        let input = event(input_fence.event).map_err(|e| e.context("inputFence"))?;
        let binding = g.binding().ok_or_else(|| {
            err(
                Status::UnidentifiedName,
                "no successful onnxSetGraphIO precedes this run",
            )
        })?;
        // SAFETY: `outputFence` was read (non-NULL, tagged) by `read_fence` above.
        unsafe { start_run(&g, binding, &input, outputFence, TraceSink::NONE) }?;
        Ok(Status::Success)
    })
}

/// Destroys a graph, waiting for its in-flight runs. A run racing this call is either finished
/// before it returns or refused with INVALID_GRAPH.
#[no_mangle]
pub unsafe extern "C" fn onnxReleaseGraph(graph: onnxGraph) -> onnxStatus {
    guard(|| {
        let g = GRAPHS
            .remove(graph)
            .ok_or_else(|| err(Status::InvalidGraph, "not a live graph"))?;
        g.queue.close_and_drain();
        crate::trace::flush();
        Ok(Status::Success)
    })
}
