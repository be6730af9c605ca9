//! Fuzz target: the input bytes are a serialized ONNX model, driven through the C ABI only.
//!
//! Once per process: `onnxGetBackendIDs` and `onnxInitBackend` (one compute thread). Each exec:
//! `onnxGetBackendCompatibility` and `onnxInitGraph` on the bytes (they must agree), and when
//! the graph compiles, small inputs are made from the model's declared graph inputs (symbolic
//! dimensions get 1 to 3, one size per symbol), `onnxGetOutputShapesRUST` sizes the outputs, and
//! the graph runs through `onnxSetGraphIO` + `onnxRunGraph` + `onnxWaitEvent` or through
//! `onnxSetIOAndRunGraph`. Every status must be one of the ONNXIFI statuses.
//!
//! Seed the corpus with the ONNX backend node test models (`scripts/fuzz.sh model_bytes 60`).
#![no_main]

/// Helpers shared with the other targets (the modules of `common/` this target uses).
#[path = "common"]
mod common {
    pub mod abi;
    pub mod backend;
    pub mod descriptor;
}

use common::abi::{check, event_fence, init_env};
use common::backend::{new_event, single_thread_backend};
use common::descriptor::cpu_descriptor;
use libfuzzer_sys::fuzz_target;
use onnxifi_rust::ffi::api::*;
use onnxifi_rust::ffi::ext::{onnxGetOutputShapesRUST, onnxSetIOAndRunGraph};
use onnxifi_rust::ffi::types::*;
use onnxifi_rust::ir::DataType;
use onnxifi_rust::model::onnx::{tensor_shape_proto::dimension, type_proto, ModelProto};
use std::collections::HashMap;
use std::ffi::CString;
use std::os::raw::c_void;
use std::sync::OnceLock;

/// Largest input tensor made, in elements.
const MAX_INPUT_ELEMENTS: usize = 4096;
/// Largest output tensor accepted, in elements (larger ones are not run).
const MAX_OUTPUT_ELEMENTS: usize = 1 << 16;
/// Longest output rank `onnxGetOutputShapesRUST` may write.
const SHAPE_CAPACITY: usize = 64;

/// The backend ID and backend, made on first use.
fn backend() -> (onnxBackendID, onnxBackend) {
    /// Both as integers (handles are registry ids).
    static BACKEND: OnceLock<(usize, usize)> = OnceLock::new();
    let (id, b) = *BACKEND.get_or_init(|| {
        let (id, b) = single_thread_backend();
        (id as usize, b as usize)
    });
    (id as onnxBackendID, b as onnxBackend)
}

/// A deterministic generator of input values, seeded from the model bytes.
struct Rng(u64);

impl Rng {
    /// A generator seeded with a hash of `data`.
    fn seeded(data: &[u8]) -> Rng {
        // FNV-1a over the bytes.
        let mut h = 0xcbf2_9ce4_8422_2325u64;
        for &b in data {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Rng(h | 1)
    }

    /// The next value (xorshift64).
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A small value in -2..=3.
    fn small(&mut self) -> i64 {
        (self.next() % 6) as i64 - 2
    }
}

/// Operators whose kernels panic on empty tensors, which zeros in integer inputs (sizes,
/// shapes) make: models using them get no zero integers, so that a known crash does not stop
/// every run within a minute, unless `FUZZ_KEEP_KNOWN_CRASHES=1` (to replay it). Empty now:
/// the one this target found (`MatMul` with an empty output matrix) is fixed.
const KNOWN_EMPTY_TENSOR_CRASHES: [&str; 0] = [];

/// Whether inputs steer around KNOWN_EMPTY_TENSOR_CRASHES (unless `FUZZ_KEEP_KNOWN_CRASHES=1`).
fn avoid_known_crashes() -> bool {
    static AVOID: OnceLock<bool> = OnceLock::new();
    *AVOID.get_or_init(|| std::env::var_os("FUZZ_KEEP_KNOWN_CRASHES").is_none_or(|v| v != "1"))
}

/// Whether a graph (or one of its subgraphs) uses one of `ops`.
fn uses_op(graph: &onnxifi_rust::model::onnx::GraphProto, ops: &[&str]) -> bool {
    graph.node.iter().any(|n| {
        ops.contains(&n.op_type.as_deref().unwrap_or(""))
            || n.attribute
                .iter()
                .any(|a| a.g.iter().chain(&a.graphs).any(|g| uses_op(g, ops)))
    })
}

/// Which float values inputs may take.
#[derive(Clone, Copy)]
struct Values {
    /// No zero integers.
    nonzero_ints: bool,
    /// Only finite, non-zero numbers: for models with a `Loop`, whose trip count may come from
    /// a division by an input (ONNX's expanded `Range`: a zero `delta`, float or integer cast
    /// to float, gives an infinite trip count, and a run of 2^24 iterations before the loop
    /// is stopped: minutes under ASan; the model's meaning, not a library bug).
    tame: bool,
}

/// Little-endian bytes of `n` elements of `dtype`: small numbers, now and then a special float
/// (NaN, ±inf, 1e30).
fn fill(dtype: DataType, n: usize, bytes: usize, values: Values, rng: &mut Rng) -> Vec<u8> {
    let Values { nonzero_ints, tame } = values;
    let mut out = Vec::with_capacity(bytes);
    for _ in 0..n {
        let mut v = rng.small();
        let special = rng.next().is_multiple_of(32) && !tame;
        if v == 0 && (tame || (nonzero_ints && dtype.is_integer())) {
            v = 1;
        }
        match dtype {
            DataType::F32 => {
                let f = if special {
                    [f32::NAN, f32::INFINITY, -f32::INFINITY, 1e30][(rng.next() % 4) as usize]
                } else {
                    v as f32 * 0.75
                };
                out.extend_from_slice(&f.to_le_bytes());
            }
            DataType::F64 => {
                let f = match special {
                    false => v as f64 * 0.75,
                    true if rng.next().is_multiple_of(2) => f64::INFINITY,
                    true => f64::NAN,
                };
                out.extend_from_slice(&f.to_le_bytes());
            }
            DataType::F16 => {
                // -2, -1, 0, 1, 2, 0.5 as IEEE half.
                let bits = [0xc000u16, 0xbc00, 0x0000, 0x3c00, 0x4000, 0x3800][(v + 2) as usize];
                out.extend_from_slice(&bits.to_le_bytes());
            }
            DataType::BF16 => {
                let bits = ((v as f32 * 0.75).to_bits() >> 16) as u16;
                out.extend_from_slice(&bits.to_le_bytes());
            }
            DataType::I8 | DataType::U8 => out.push(if dtype == DataType::U8 {
                v.unsigned_abs() as u8
            } else {
                v as i8 as u8
            }),
            DataType::Bool => out.push((v & 1) as u8),
            DataType::I16 => out.extend_from_slice(&(v as i16).to_le_bytes()),
            DataType::U16 => out.extend_from_slice(&(v.unsigned_abs() as u16).to_le_bytes()),
            DataType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            DataType::U32 => out.extend_from_slice(&(v.unsigned_abs() as u32).to_le_bytes()),
            DataType::I64 => out.extend_from_slice(&v.to_le_bytes()),
            DataType::U64 => out.extend_from_slice(&v.unsigned_abs().to_le_bytes()),
            _ => {}
        }
    }
    // Narrow (float8, 4- and 2-bit) types: any bytes.
    while out.len() < bytes {
        out.push(rng.next() as u8);
    }
    out.truncate(bytes);
    out
}

/// One graph input to bind: its name, type, shape and data.
struct GraphInput {
    name: CString,
    dtype: DataType,
    shape: Vec<u64>,
    data: Vec<u8>,
}

/// The graph inputs the caller binds (declared inputs without an initializer), with shapes
/// chosen for their symbolic dimensions; `None` when one cannot be made small and valid.
fn make_inputs(model: &ModelProto, rng: &mut Rng) -> Option<Vec<GraphInput>> {
    let graph = model.graph.as_ref()?;
    let initialized: Vec<&str> = graph
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    let values = Values {
        nonzero_ints: avoid_known_crashes() && uses_op(graph, &KNOWN_EMPTY_TENSOR_CRASHES),
        tame: uses_op(graph, &["Loop"]),
    };
    let mut symbols: HashMap<String, u64> = HashMap::new();
    let mut inputs = Vec::new();
    for vi in &graph.input {
        let name = vi.name.as_deref().unwrap_or("");
        if initialized.contains(&name) {
            continue;
        }
        let Some(type_proto::Value::TensorType(t)) = vi.r#type.as_ref()?.value.as_ref() else {
            return None;
        };
        let dtype = DataType::from_code(i64::from(t.elem_type?))?;
        let mut shape = Vec::new();
        for d in t.shape.as_ref().map_or(&[][..], |s| &s.dim[..]) {
            let v = match &d.value {
                Some(dimension::Value::DimValue(v)) if *v > 0 => *v as u64,
                Some(dimension::Value::DimValue(_)) => return None,
                Some(dimension::Value::DimParam(p)) => *symbols
                    .entry(p.clone())
                    .or_insert_with(|| 1 + rng.next() % 3),
                None => 1 + rng.next() % 3,
            };
            shape.push(v);
        }
        let n = shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))?;
        if n > MAX_INPUT_ELEMENTS {
            return None;
        }
        let bytes = dtype.byte_len(n)?;
        let data = fill(dtype, n, bytes, values, rng);
        inputs.push(GraphInput {
            name: CString::new(name).ok()?,
            dtype,
            shape,
            data,
        });
    }
    Some(inputs)
}

/// A descriptor of the tensor `name` of `dtype` and `shape` at `buffer` (CPU memory).
fn descriptor(
    name: &CString,
    dtype: DataType,
    shape: &[u64],
    buffer: u64,
) -> onnxTensorDescriptorV1 {
    cpu_descriptor(name, dtype.code() as onnxEnum, shape, buffer)
}

/// Sizes the outputs with `onnxGetOutputShapesRUST`, binds and runs once, waits.
///
/// # Safety
/// `graph` is a live graph handle of this process.
unsafe fn run(graph: onnxGraph, backend: onnxBackend, model: &ModelProto, rng: &mut Rng) {
    let Some(inputs) = make_inputs(model, rng) else {
        return;
    };
    let Some(g) = model.graph.as_ref() else {
        return;
    };
    let out_names: Option<Vec<CString>> = g
        .output
        .iter()
        .map(|o| CString::new(o.name.as_deref().unwrap_or("")).ok())
        .collect();
    let Some(out_names) = out_names else {
        return;
    };
    if out_names.is_empty() {
        return;
    }
    let in_descs: Vec<onnxTensorDescriptorV1> = inputs
        .iter()
        .map(|i| descriptor(&i.name, i.dtype, &i.shape, i.data.as_ptr() as u64))
        .collect();
    let mut out_shapes: Vec<Vec<u64>> = vec![vec![0; SHAPE_CAPACITY]; out_names.len()];
    let mut out_descs: Vec<onnxTensorDescriptorV1> = out_names
        .iter()
        .zip(&mut out_shapes)
        .map(|(n, s)| onnxTensorDescriptorV1 {
            dimensions: SHAPE_CAPACITY as u32,
            shape: s.as_mut_ptr(),
            ..cpu_descriptor(n, ONNXIFI_DATATYPE_UNDEFINED, &[], 0)
        })
        .collect();
    // SAFETY: live graph; descriptor arrays of the stated lengths whose names are NUL-terminated
    // and whose shape arrays hold `dimensions` entries (writable for the outputs).
    let s = check("onnxGetOutputShapesRUST", unsafe {
        onnxGetOutputShapesRUST(
            graph,
            in_descs.len() as u32,
            in_descs.as_ptr(),
            out_descs.len() as u32,
            out_descs.as_mut_ptr(),
        )
    });
    if s != ONNXIFI_STATUS_SUCCESS {
        return;
    }
    // The outputs: a dimension only the run decides (0) is guessed as 1; a wrong guess must be
    // refused by the run (MISMATCHING_SHAPE) before anything is written.
    let mut outputs: Vec<(DataType, Vec<u64>, Vec<u8>)> = Vec::new();
    for d in &out_descs {
        let Some(dtype) = DataType::from_code(d.dataType as i64) else {
            panic!("onnxGetOutputShapesRUST wrote data type {}", d.dataType);
        };
        let rank = d.dimensions as usize;
        assert!(
            rank <= SHAPE_CAPACITY,
            "SUCCESS with rank {rank} over the capacity"
        );
        // SAFETY: the shape array has SHAPE_CAPACITY entries, `rank` of them written.
        let dims: Vec<u64> = unsafe { std::slice::from_raw_parts(d.shape, rank) }
            .iter()
            .map(|&v| v.max(1))
            .collect();
        let Some(n) = dims
            .iter()
            .try_fold(1usize, |acc, &v| acc.checked_mul(usize::try_from(v).ok()?))
        else {
            return;
        };
        if n > MAX_OUTPUT_ELEMENTS {
            return;
        }
        let Some(bytes) = dtype.byte_len(n) else {
            return; // strings and types with no byte layout cannot be bound
        };
        outputs.push((dtype, dims, vec![0u8; bytes.max(1)]));
    }
    let out_descs: Vec<onnxTensorDescriptorV1> = out_names
        .iter()
        .zip(&mut outputs)
        .map(|(n, (t, s, b))| descriptor(n, *t, s, b.as_mut_ptr() as u64))
        .collect();
    let mut out_fence = event_fence(std::ptr::null_mut());
    if rng.next().is_multiple_of(2) {
        // SAFETY: live graph; descriptors whose buffers hold the described tensors and stay
        // alive until the graph's binding is dropped (below, before they are freed).
        let s = check("onnxSetGraphIO", unsafe {
            onnxSetGraphIO(
                graph,
                in_descs.len() as u32,
                in_descs.as_ptr(),
                out_descs.len() as u32,
                out_descs.as_ptr(),
            )
        });
        if s != ONNXIFI_STATUS_SUCCESS {
            return;
        }
        let ready = new_event(backend);
        let in_fence = event_fence(ready);
        // SAFETY: a live event.
        assert_eq!(unsafe { onnxSignalEvent(ready) }, ONNXIFI_STATUS_SUCCESS);
        // SAFETY: live graph, readable input fence, writable output fence.
        let s = check("onnxRunGraph", unsafe {
            onnxRunGraph(graph, &in_fence, &mut out_fence)
        });
        // SAFETY: a live event.
        assert_eq!(unsafe { onnxReleaseEvent(ready) }, ONNXIFI_STATUS_SUCCESS);
        if s != ONNXIFI_STATUS_SUCCESS {
            return;
        }
    } else {
        // SAFETY: as for onnxSetGraphIO above, with a writable output fence.
        let s = check("onnxSetIOAndRunGraph", unsafe {
            onnxSetIOAndRunGraph(
                graph,
                in_descs.len() as u32,
                in_descs.as_ptr(),
                out_descs.len() as u32,
                out_descs.as_ptr(),
                &mut out_fence,
            )
        });
        if s != ONNXIFI_STATUS_SUCCESS {
            return;
        }
    }
    // SAFETY: the output event the run made (signalled when it ends).
    check("onnxWaitEvent", unsafe { onnxWaitEvent(out_fence.event) });
    let mut state: onnxEventState = 0;
    // SAFETY: a live event and a writable state.
    let s = unsafe { onnxGetEventState(out_fence.event, &mut state) };
    assert_eq!(
        (s, state),
        (ONNXIFI_STATUS_SUCCESS, ONNXIFI_EVENT_STATE_SIGNALLED)
    );
    // SAFETY: a live event.
    assert_eq!(
        unsafe { onnxReleaseEvent(out_fence.event) },
        ONNXIFI_STATUS_SUCCESS
    );
    // SAFETY: a released event is not found.
    let s = unsafe { onnxWaitEvent(out_fence.event) };
    assert_eq!(s, ONNXIFI_STATUS_INVALID_EVENT);
}

fuzz_target!(
    init: {
        init_env();
        backend();
    },
    |data: &[u8]| {
    let (id, backend) = backend();
    let ptr = data.as_ptr() as *const c_void;
    // SAFETY: a live backend ID and `data.len()` readable bytes.
    let compat = check("onnxGetBackendCompatibility", unsafe {
        onnxGetBackendCompatibility(id, data.len(), ptr)
    });
    let mut graph: onnxGraph = 0x1 as onnxGraph;
    // SAFETY: a live backend, no properties, `data.len()` readable bytes, no weights and a
    // writable out-handle.
    let init = check("onnxInitGraph", unsafe {
        onnxInitGraph(backend, std::ptr::null(), data.len(), ptr, 0, std::ptr::null(), &mut graph)
    });
    assert_eq!(
        compat, init,
        "onnxGetBackendCompatibility and onnxInitGraph disagree"
    );
    if init != ONNXIFI_STATUS_SUCCESS {
        assert!(graph.is_null(), "a failed onnxInitGraph left a handle");
        return;
    }
    assert!(!graph.is_null());
    if let Ok(model) = onnxifi_rust::model::decode(data) {
        let mut rng = Rng::seeded(data);
        // SAFETY: a live graph.
        unsafe { run(graph, backend, &model, &mut rng) };
    }
    // SAFETY: a live graph; releasing it drops its binding to this exec's buffers.
    assert_eq!(unsafe { onnxReleaseGraph(graph) }, ONNXIFI_STATUS_SUCCESS);
    // SAFETY: a released graph is not found.
    assert_eq!(unsafe { onnxReleaseGraph(graph) }, ONNXIFI_STATUS_INVALID_GRAPH);
});
