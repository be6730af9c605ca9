//! The exported extension functions: those of onnx's `onnxifi_ext.h` (`onnxSetIOAndRunGraph`,
//! `onnxGetExtensionFunctionAddress`), foxi's `onnxWaitEventFor` (and, with the `foxi`
//! feature, its `onnxReleaseTraceEvents` and trace-event form of `onnxSetIOAndRunGraph`), and
//! this library's `onnxGetLastErrorMessage` and `onnxGetOutputShapesRUST`.
#![allow(non_snake_case, clippy::missing_safety_doc)]

use super::api::{backend_id, err, event, graph, read_binding, read_fence};
use super::guard;
use super::io::read_shape_descriptors;
use super::run::start_run;
use super::trace_list::TraceSink;
use super::types::*;
use crate::error::{Result, Status};
use crate::sync::event::Event;
use std::ffi::CStr;
use std::os::raw::c_char;
use std::sync::Arc;
use std::time::Duration;

/// Extension: binds I/O and runs at once, with an input fence that is already signalled.
#[cfg(not(feature = "foxi"))]
#[no_mangle]
pub unsafe extern "C" fn onnxSetIOAndRunGraph(
    graph_: onnxGraph,
    inputsCount: u32,
    inputDescriptors: *const onnxTensorDescriptorV1,
    outputsCount: u32,
    outputDescriptors: *const onnxTensorDescriptorV1,
    outputFence: *mut onnxMemoryFenceV1,
) -> onnxStatus {
    // SAFETY: forwarded contract.
    unsafe {
        set_io_and_run(
            graph_,
            (inputsCount, inputDescriptors),
            (outputsCount, outputDescriptors),
            outputFence,
            TraceSink::NONE,
        )
    }
}

/// Extension (foxi dialect): binds I/O and runs at once; when `traceEvents` is not NULL, the
/// run's timeline (its steps, the input and output copies) is written to it before the output
/// fence is signalled, so the list must stay valid until then. Release the events with
/// `onnxReleaseTraceEvents`.
#[cfg(feature = "foxi")]
#[no_mangle]
pub unsafe extern "C" fn onnxSetIOAndRunGraph(
    graph_: onnxGraph,
    inputsCount: u32,
    inputDescriptors: *const onnxTensorDescriptorV1,
    outputsCount: u32,
    outputDescriptors: *const onnxTensorDescriptorV1,
    outputFence: *mut onnxMemoryFenceV1,
    traceEvents: *mut onnxTraceEventList,
) -> onnxStatus {
    // SAFETY: forwarded contract.
    unsafe {
        set_io_and_run(
            graph_,
            (inputsCount, inputDescriptors),
            (outputsCount, outputDescriptors),
            outputFence,
            TraceSink::of(traceEvents),
        )
    }
}

/// The body of both `onnxSetIOAndRunGraph` forms.
///
/// # Safety
/// The descriptor arrays hold the stated counts; `outputFence` is NULL or a writable fence.
unsafe fn set_io_and_run(
    graph_: onnxGraph,
    (inputsCount, inputDescriptors): (u32, *const onnxTensorDescriptorV1),
    (outputsCount, outputDescriptors): (u32, *const onnxTensorDescriptorV1),
    outputFence: *mut onnxMemoryFenceV1,
    sink: TraceSink,
) -> onnxStatus {
    guard(|| {
        let g = graph(graph_)?;
        // SAFETY: NULL or a readable fence.
        unsafe { read_fence(outputFence, "outputFence") }?;
        g.set_binding(None);
        // SAFETY: the caller gives the stated number of descriptors.
        let binding = Arc::new(unsafe {
            read_binding(
                &g,
                inputsCount,
                inputDescriptors,
                outputsCount,
                outputDescriptors,
            )
        }?);
        *g.binding.lock().unwrap_or_else(|p| p.into_inner()) = Some(binding.clone());
        let ready = Arc::new(Event::new());
        ready.signal_success()?;
        // SAFETY: `outputFence` was read (non-NULL, tagged) by `read_fence` above.
        unsafe { start_run(&g, binding, &ready, outputFence, sink) }?;
        Ok(Status::Success)
    })
}

/// Extension (foxi): waits at most `timeoutMs` (0: forever); reports the state, the status the
/// event carries, and its message.
#[no_mangle]
pub unsafe extern "C" fn onnxWaitEventFor(
    event_: onnxEvent,
    timeoutMs: u32,
    eventState: *mut onnxEventState,
    eventStatus: *mut onnxStatus,
    message: *mut c_char,
    messageLength: *mut usize,
) -> onnxStatus {
    guard(|| {
        if eventState.is_null() || eventStatus.is_null() {
            return Err(err(
                Status::InvalidPointer,
                "eventState and eventStatus must not be NULL",
            ));
        }
        if !message.is_null() && messageLength.is_null() {
            return Err(err(Status::InvalidPointer, "message without messageLength"));
        }
        let e = event(event_)?;
        let outcome = if timeoutMs == 0 {
            e.wait()
        } else {
            e.wait_for(Duration::from_millis(timeoutMs.into()))
        };
        let (state, status, text) = match outcome {
            Some(o) => (ONNXIFI_EVENT_STATE_SIGNALLED, o.status.code(), o.message),
            None => (
                ONNXIFI_EVENT_STATE_NONSIGNALLED,
                ONNXIFI_STATUS_SUCCESS,
                String::new(),
            ),
        };
        // SAFETY: checked non-NULL.
        unsafe {
            eventState.write(state);
            eventStatus.write(status);
        }
        if !message.is_null() {
            // SAFETY: checked non-NULL; `*messageLength` is the capacity of `message`.
            let capacity = unsafe { messageLength.read() };
            if capacity > 0 {
                let n = text.len().min(capacity - 1);
                // SAFETY: n + 1 ≤ capacity bytes are written.
                unsafe {
                    std::ptr::copy_nonoverlapping(text.as_ptr(), message as *mut u8, n);
                    message.add(n).write(0);
                    messageLength.write(n + 1);
                }
            }
        }
        Ok(Status::Success)
    })
}

/// Extension: copies the message of this thread's last failed call (NUL-terminated) with the
/// byte-size protocol of `onnxGetBackendInfo`.
#[no_mangle]
pub unsafe extern "C" fn onnxGetLastErrorMessage(
    message: *mut c_char,
    messageLength: *mut usize,
) -> onnxStatus {
    // The same panic guard as every export, without replacing the message being read.
    super::guard_plain(|| {
        let text = super::last_error();
        if messageLength.is_null() {
            return ONNXIFI_STATUS_INVALID_POINTER;
        }
        let needed = text.len() + 1;
        // SAFETY: checked non-NULL.
        let capacity = unsafe { messageLength.read() };
        // SAFETY: checked non-NULL.
        unsafe { messageLength.write(needed) };
        if message.is_null() || capacity < needed {
            return ONNXIFI_STATUS_FALLBACK;
        }
        // SAFETY: the buffer holds `capacity` ≥ needed bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), message as *mut u8, text.len());
            message.add(text.len()).write(0);
        }
        ONNXIFI_STATUS_SUCCESS
    })
}

/// Extension: the data type and shape of every output described in `outputDescriptors`, for
/// the input shapes described in `inputDescriptors` (every graph input, by name; their
/// `buffer` fields are ignored), as the backend's shape inference gives them, so that a caller
/// can size the output buffers before `onnxSetGraphIO`.
///
/// Each output descriptor names an output; its `shape` points to `dimensions` writable entries
/// (the capacity). On return `dataType` holds the output's type, `dimensions` its rank and
/// `shape` its dimensions, 0 for a dimension only a run decides. When a capacity is too small
/// the rank is still written, the shape is not, and the call answers FALLBACK after filling
/// the others. Nothing is written on any other failure.
#[no_mangle]
pub unsafe extern "C" fn onnxGetOutputShapesRUST(
    graph_: onnxGraph,
    inputsCount: u32,
    inputDescriptors: *const onnxTensorDescriptorV1,
    outputsCount: u32,
    outputDescriptors: *mut onnxTensorDescriptorV1,
) -> onnxStatus {
    guard(|| {
        let g = graph(graph_)?;
        let exe = &g.exe;
        if inputDescriptors.is_null() && inputsCount > 0 {
            return Err(err(
                Status::InvalidPointer,
                "inputDescriptors is NULL but inputsCount > 0",
            ));
        }
        if outputDescriptors.is_null() && outputsCount > 0 {
            return Err(err(
                Status::InvalidPointer,
                "outputDescriptors is NULL but outputsCount > 0",
            ));
        }
        let inputs = if inputsCount == 0 {
            Vec::new()
        } else {
            // SAFETY: the caller gives `inputsCount` descriptors.
            unsafe { read_shape_descriptors(inputDescriptors, inputsCount) }?
        };
        let mut shapes: Vec<Option<Vec<usize>>> = vec![None; exe.inputs().len()];
        for d in inputs {
            let i = exe
                .inputs()
                .iter()
                .position(|s| s.name == d.name)
                .ok_or_else(|| {
                    err(
                        Status::InvalidName,
                        format!("'{}' is not an input of the graph", d.name),
                    )
                })?;
            if shapes[i].replace(d.tensor.shape).is_some() {
                return Err(err(
                    Status::InvalidName,
                    format!("'{}' is described twice", d.name),
                ));
            }
        }
        let shapes: Vec<Vec<usize>> = shapes
            .into_iter()
            .zip(exe.inputs())
            .map(|(s, spec)| {
                s.ok_or_else(|| {
                    err(
                        Status::UnidentifiedName,
                        format!("input '{}' has no descriptor", spec.name),
                    )
                })
            })
            .collect::<Result<_>>()?;
        let inferred = exe.output_shapes(&shapes)?;
        // Read every output descriptor (tag first) and resolve its name before writing any.
        let mut plan = Vec::with_capacity(outputsCount as usize);
        for i in 0..outputsCount as usize {
            // SAFETY: the caller gives `outputsCount` descriptors; the tag, the first field, is
            // read alone first.
            let tag =
                unsafe { std::ptr::addr_of!((*outputDescriptors.add(i)).tag).read_unaligned() };
            if tag != ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1 {
                return Err(err(
                    Status::UnsupportedTag,
                    format!("output descriptor {i} has tag {tag:#x}"),
                ));
            }
            // SAFETY: a V1 descriptor is readable whole.
            let d = unsafe { outputDescriptors.add(i).read_unaligned() };
            if d.name.is_null() {
                return Err(err(
                    Status::InvalidPointer,
                    format!("output descriptor {i} has a NULL name"),
                ));
            }
            // SAFETY: a NUL-terminated name (contract).
            let name = unsafe { CStr::from_ptr(d.name) }.to_string_lossy();
            let o = exe
                .outputs()
                .iter()
                .position(|s| *s.name == *name)
                .ok_or_else(|| {
                    err(
                        Status::InvalidName,
                        format!("'{name}' is not an output of the graph"),
                    )
                })?;
            if d.dimensions > 0 && d.shape.is_null() {
                return Err(err(
                    Status::InvalidPointer,
                    format!("'{name}': NULL shape with capacity {}", d.dimensions),
                ));
            }
            let spec = &exe.outputs()[o];
            let dims: Vec<u64> = match (&inferred[o], &spec.declared.dims) {
                (Some(s), _) => s.iter().map(|&v| v as u64).collect(),
                (None, Some(declared)) => declared
                    .iter()
                    .map(|d| match d {
                        crate::ir::Dim::Fixed(v) => *v as u64,
                        _ => 0,
                    })
                    .collect(),
                (None, None) => {
                    return Err(err(
                        Status::UnsupportedShape,
                        format!("output '{name}': its rank is only known after a run"),
                    ))
                }
            };
            plan.push((i, d.dimensions as usize, spec.declared.dtype, dims));
        }
        let mut status = Status::Success;
        for (i, capacity, dtype, dims) in plan {
            let slot = outputDescriptors.wrapping_add(i);
            // SAFETY: descriptor `i` is the caller's, writable (contract); its shape array has
            // `capacity` writable entries (checked non-NULL above when capacity > 0).
            unsafe {
                std::ptr::addr_of_mut!((*slot).dataType).write_unaligned(dtype.code() as u64);
                std::ptr::addr_of_mut!((*slot).dimensions).write_unaligned(dims.len() as u32);
                if dims.len() <= capacity {
                    let shape = std::ptr::addr_of!((*slot).shape).read_unaligned() as *mut u64;
                    for (j, &v) in dims.iter().enumerate() {
                        shape.add(j).write_unaligned(v);
                    }
                } else {
                    status = Status::Fallback;
                }
            }
        }
        Ok(status)
    })
}

/// Extension (foxi dialect): frees the events a run wrote to `traceEvents` and empties the
/// list.
#[cfg(feature = "foxi")]
#[no_mangle]
pub unsafe extern "C" fn onnxReleaseTraceEvents(
    traceEvents: *mut onnxTraceEventList,
) -> onnxStatus {
    guard(|| {
        // SAFETY: NULL or the caller's list (contract).
        unsafe { super::trace_list::release(traceEvents) }?;
        Ok(Status::Success)
    })
}

/// Looks up an extension function by name (with or without the `Function` suffix).
#[no_mangle]
pub unsafe extern "C" fn onnxGetExtensionFunctionAddress(
    backendID: onnxBackendID,
    name: *const c_char,
    function: *mut onnxExtensionFunctionPointer,
) -> onnxStatus {
    guard(|| {
        if function.is_null() {
            return Err(err(Status::InvalidPointer, "function is NULL"));
        }
        // SAFETY: checked non-NULL; cleared first so failure leaves NULL.
        unsafe { function.write(None) };
        backend_id(backendID)?;
        if name.is_null() {
            return Err(err(Status::InvalidPointer, "name is NULL"));
        }
        // SAFETY: a NUL-terminated name.
        let name = unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned();
        let base = name.strip_suffix("Function").unwrap_or(&name);
        // SAFETY (all three transmutes): casting one `extern "C"` function pointer type to
        // another is how ONNXIFI hands out extensions; the caller casts back to the true type.
        let f: onnxExtensionFunctionPointer = match base {
            "onnxSetIOAndRunGraph" => Some(unsafe {
                std::mem::transmute::<*const (), unsafe extern "C" fn() -> onnxStatus>(
                    onnxSetIOAndRunGraph as *const (),
                )
            }),
            "onnxWaitEventFor" => Some(unsafe {
                std::mem::transmute::<*const (), unsafe extern "C" fn() -> onnxStatus>(
                    onnxWaitEventFor as *const (),
                )
            }),
            "onnxGetOutputShapesRUST" => Some(unsafe {
                std::mem::transmute::<*const (), unsafe extern "C" fn() -> onnxStatus>(
                    onnxGetOutputShapesRUST as *const (),
                )
            }),
            #[cfg(feature = "foxi")]
            "onnxReleaseTraceEvents" => Some(unsafe {
                std::mem::transmute::<*const (), unsafe extern "C" fn() -> onnxStatus>(
                    onnxReleaseTraceEvents as *const (),
                )
            }),
            "onnxGetLastErrorMessage" => Some(unsafe {
                std::mem::transmute::<*const (), unsafe extern "C" fn() -> onnxStatus>(
                    onnxGetLastErrorMessage as *const (),
                )
            }),
            _ => {
                return Err(err(
                    Status::UnidentifiedName,
                    format!("no extension function '{name}'"),
                ))
            }
        };
        // SAFETY: checked non-NULL.
        unsafe { function.write(f) };
        Ok(Status::Success)
    })
}
