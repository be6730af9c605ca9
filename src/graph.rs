//! The object behind an `onnxGraph`: the compiled model, the backend it runs on, the current
//! I/O binding and the run queue.
#![forbid(unsafe_code)]

use crate::backend::Backend;
use crate::check;
use crate::error::{Error, Result, Status};
use crate::exec::Executable;
use crate::ir::{self, DataType};
use crate::model;
use crate::sync::worker::RunQueue;
use std::sync::{Arc, Mutex};

/// A tensor bound by `onnxSetGraphIO`: its type, shape and the caller's buffer address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundTensor {
    /// Element type.
    pub dtype: DataType,
    /// Concrete shape.
    pub shape: Vec<usize>,
    /// Address of the caller's buffer (CPU memory).
    pub addr: u64,
}

impl BoundTensor {
    /// Size of the buffer in bytes (sub-byte types packed as ONNX packs them).
    pub fn byte_len(&self) -> usize {
        self.dtype
            .byte_len(self.shape.iter().product::<usize>())
            .unwrap_or(0)
    }
}

/// The buffers of one successful `onnxSetGraphIO`, in the executable's input/output order.
#[derive(Clone, Debug, Default)]
pub struct Binding {
    /// One per graph input.
    pub inputs: Vec<BoundTensor>,
    /// One per graph output.
    pub outputs: Vec<BoundTensor>,
    /// Per input, whether a run reads its buffer in place (decided once, when bound).
    pub inputs_in_place: Vec<bool>,
    /// Per output, whether a run may compute into its buffer in place.
    pub outputs_in_place: Vec<bool>,
}

/// A compiled graph on a backend.
pub struct Graph {
    /// The backend whose pool runs it.
    pub backend: Arc<Backend>,
    /// The compiled model.
    pub exe: Arc<Executable>,
    /// The binding of the last successful `onnxSetGraphIO`, if the last call succeeded.
    pub binding: Mutex<Option<Arc<Binding>>>,
    /// Serialises this graph's runs.
    pub queue: RunQueue,
}

impl Graph {
    /// Compiles a serialized model with optional weights.
    pub fn compile(backend: Arc<Backend>, bytes: &[u8], weights: Vec<ir::Weight>) -> Result<Graph> {
        let span = crate::trace::span("init", "onnxInitGraph")
            .map(|sp| sp.arg("model bytes", bytes.len().to_string()));
        // Init-time folding and weight packing run on the backend's own pool.
        let exe = backend
            .pool
            .install(|| compile_executable(bytes, weights))?;
        drop(span);
        crate::log::log(crate::log::Level::Info, || {
            format!(
                "graph compiled: {} nodes after fusion, {} inputs, {} outputs",
                exe.graph().nodes.len(),
                exe.inputs().len(),
                exe.outputs().len()
            )
        });
        let queue = RunQueue::new(backend.pool.clone());
        Ok(Graph {
            backend,
            exe: Arc::new(exe),
            binding: Mutex::new(None),
            queue,
        })
    }

    /// The current binding.
    pub fn binding(&self) -> Option<Arc<Binding>> {
        self.binding
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Replaces (or, with `None`, drops) the binding.
    pub fn set_binding(&self, b: Option<Binding>) {
        *self.binding.lock().unwrap_or_else(|p| p.into_inner()) = b.map(Arc::new);
    }
}

/// Compiles a model for `onnxGetBackendCompatibility`, which has no backend (so no pool): on a
/// one-thread pool of the library's own, never on rayon's global pool (which belongs to the
/// host process).
pub fn check_compatibility(bytes: &[u8]) -> Result<()> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "onnxifi-compat".into())
            .build()
            .ok()
    });
    // Callers outside the C ABI (the CLI's `check`) get a panic as INTERNAL_ERROR too.
    let compile = || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            compile_executable(bytes, Vec::new()).map(drop)
        }))
        .unwrap_or_else(|_| {
            Err(Error::new(
                Status::InternalError,
                "compiling the model panicked (a bug in onnxifi-rust)",
            ))
        })
    };
    match pool {
        Some(pool) => pool.install(compile),
        None => compile(),
    }
}

/// Whether loading enforces every required rule of the IR specification, including those that
/// exporters commonly break without changing results (`ONNXIFI_RUST_STRICT=1`, read once).
pub fn strict_mode() -> bool {
    static STRICT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *STRICT.get_or_init(|| {
        std::env::var("ONNXIFI_RUST_STRICT").is_ok_and(|v| !v.is_empty() && v != "0")
    })
}

/// Every reason this backend would refuse a model at load, for tools (`onnxifi-run check`):
/// the load-level spec verdict, or an import failure, or every unsupported node, operator,
/// version and type, or else the first problem planning finds. Empty when the model loads.
pub fn refusals(proto: &model::onnx::ModelProto) -> Vec<Error> {
    if let Err(e) = check::spec::check_model_for_load(proto, strict_mode()) {
        return vec![e];
    }
    let graph = match ir::import(proto.clone(), Vec::new()) {
        Ok(g) => g,
        Err(e) => return vec![e],
    };
    let problems = check::compat::problems(&graph);
    if !problems.is_empty() {
        return problems;
    }
    match check_compatibility(&prost::Message::encode_to_vec(proto)) {
        Ok(()) => Vec::new(),
        Err(e) => vec![e],
    }
}

/// Decodes, imports and checks a model: the path shared by `onnxInitGraph` and
/// `onnxGetBackendCompatibility`.
pub fn compile_executable(bytes: &[u8], weights: Vec<ir::Weight>) -> Result<Executable> {
    let proto = model::decode(bytes)?;
    check::spec::check_model_for_load(&proto, strict_mode())?;
    // Import frees each initializer's bytes once it is decoded, so the model's weights are
    // never resident twice while it loads.
    let graph = ir::import(proto, weights)?;
    Executable::new(graph)
}
