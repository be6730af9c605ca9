//! The backend through its ONNXIFI C ABI, the way a framework drives it: `dlopen`, the
//! documented call sequence, and every failed call turned into an error that names the call,
//! the status and the library's own message (`onnxGetLastErrorMessage`).

use crate::tensor::HostTensor;
use onnxifi_rust::error::Status;
use onnxifi_rust::ffi::types::{
    onnxMemoryFenceV1, onnxTensorDescriptorV1, ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST,
    ONNXIFI_MEMORY_TYPE_CPU, ONNXIFI_STATUS_FALLBACK, ONNXIFI_STATUS_SUCCESS,
    ONNXIFI_SYNCHRONIZATION_EVENT, ONNXIFI_TAG_MEMORY_FENCE_V1, ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1,
};
use std::ffi::{c_char, c_void, CString};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// An output's element type code and shape.
pub type OutputType = (i32, Vec<u64>);

/// An opaque ONNXIFI handle (backend ID, backend, graph, event).
pub type Handle = *mut c_void;

/// The descriptor and fence structures and the constants are the library's own declarations
/// (those `include/onnxifi.h` is generated from), so the CLI cannot drift from its ABI.
type TensorDescriptor = onnxTensorDescriptorV1;
type MemoryFence = onnxMemoryFenceV1;
/// `ONNXIFI_STATUS_SUCCESS`.
pub const SUCCESS: i32 = ONNXIFI_STATUS_SUCCESS;
/// `ONNXIFI_STATUS_FALLBACK`.
pub const FALLBACK: i32 = ONNXIFI_STATUS_FALLBACK;

/// The name of an `onnxStatus` code (`ONNXIFI_STATUS_` left off).
pub fn status_name(code: i32) -> String {
    Status::from_code(code).map_or_else(
        || format!("unknown status 0x{code:04x}"),
        |s| s.name().to_string(),
    )
}

/// `onnxGetLastErrorMessage(message, *length)`.
type LastErrorFn = unsafe extern "C" fn(*mut c_char, *mut usize) -> i32;
/// `onnxGetOutputShapesRUST(graph, nIn, inputs, nOut, outputs)`.
type OutputShapesFn =
    unsafe extern "C" fn(Handle, u32, *const TensorDescriptor, u32, *mut TensorDescriptor) -> i32;
/// `onnxWaitEventFor(event, timeoutMs, *state, *status, message, *length)` (foxi's form).
type WaitForFn =
    unsafe extern "C" fn(Handle, u32, *mut i32, *mut i32, *mut c_char, *mut usize) -> i32;
/// `onnxInitGraph`.
type InitGraphFn = unsafe extern "C" fn(
    Handle,
    *const u64,
    usize,
    *const c_void,
    u32,
    *const TensorDescriptor,
    *mut Handle,
) -> i32;
/// `onnxSetGraphIO`.
type SetGraphIoFn =
    unsafe extern "C" fn(Handle, u32, *const TensorDescriptor, u32, *const TensorDescriptor) -> i32;

/// The entry points the CLI uses, resolved from the loaded library. The extensions are
/// optional: another ONNXIFI library may lack them.
pub struct Onnxifi {
    /// Where the library was loaded from.
    pub path: PathBuf,
    _lib: libloading::Library,
    get_backend_ids: unsafe extern "C" fn(*mut Handle, *mut usize) -> i32,
    release_backend_id: unsafe extern "C" fn(Handle) -> i32,
    get_backend_info: unsafe extern "C" fn(Handle, i32, *mut c_void, *mut usize) -> i32,
    init_backend: unsafe extern "C" fn(Handle, *const u64, *mut Handle) -> i32,
    release_backend: unsafe extern "C" fn(Handle) -> i32,
    init_event: unsafe extern "C" fn(Handle, *mut Handle) -> i32,
    signal_event: unsafe extern "C" fn(Handle) -> i32,
    wait_event: unsafe extern "C" fn(Handle) -> i32,
    release_event: unsafe extern "C" fn(Handle) -> i32,
    init_graph: InitGraphFn,
    set_graph_io: SetGraphIoFn,
    run_graph: unsafe extern "C" fn(Handle, *const MemoryFence, *mut MemoryFence) -> i32,
    release_graph: unsafe extern "C" fn(Handle) -> i32,
    last_error: Option<LastErrorFn>,
    output_shapes: Option<OutputShapesFn>,
    wait_for: Option<WaitForFn>,
}

/// Where the library is: `--lib`, else `$ONNXIFI_RUST_LIB`, else next to the executable (a
/// build tree), else `../lib/libonnxifi-rust.so` from it (an install: `bin/` beside `lib/`),
/// else the dynamic loader's search path.
pub fn library_path(explicit: Option<PathBuf>) -> PathBuf {
    if let Some(p) = explicit {
        return p;
    }
    if let Some(p) = std::env::var_os("ONNXIFI_RUST_LIB") {
        return PathBuf::from(p);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        for candidate in [
            dir.join("libonnxifi_rust.so"),
            dir.join("libonnxifi-rust.so"),
            dir.join("../lib/libonnxifi-rust.so"),
        ] {
            if candidate.exists() {
                return candidate;
            }
        }
    }
    PathBuf::from("libonnxifi-rust.so")
}

impl Onnxifi {
    /// Loads the library and resolves every entry point the CLI uses.
    pub fn load(path: &Path) -> Result<Self, String> {
        // SAFETY: loading the backend library runs its initialisers, which is intended.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| {
            format!(
                "cannot load the ONNXIFI library {}: {e} (use --lib PATH or ONNXIFI_RUST_LIB)",
                path.display()
            )
        })?;
        macro_rules! sym {
            ($name:literal) => {{
                // SAFETY: the symbol is the ONNXIFI entry point of that name; the field type
                // is its prototype in the ONNXIFI 1.0 header.
                let s = unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("{}: {e}", $name))?;
                *s
            }};
        }
        macro_rules! optional {
            ($name:literal) => {{
                // SAFETY: as above, for this library's extension of that name and prototype.
                unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .ok()
                    .map(|s| *s)
            }};
        }
        Ok(Onnxifi {
            path: path.to_path_buf(),
            get_backend_ids: sym!("onnxGetBackendIDs"),
            release_backend_id: sym!("onnxReleaseBackendID"),
            get_backend_info: sym!("onnxGetBackendInfo"),
            init_backend: sym!("onnxInitBackend"),
            release_backend: sym!("onnxReleaseBackend"),
            init_event: sym!("onnxInitEvent"),
            signal_event: sym!("onnxSignalEvent"),
            wait_event: sym!("onnxWaitEvent"),
            release_event: sym!("onnxReleaseEvent"),
            init_graph: sym!("onnxInitGraph"),
            set_graph_io: sym!("onnxSetGraphIO"),
            run_graph: sym!("onnxRunGraph"),
            release_graph: sym!("onnxReleaseGraph"),
            last_error: optional!("onnxGetLastErrorMessage"),
            output_shapes: optional!("onnxGetOutputShapesRUST"),
            wait_for: optional!("onnxWaitEventFor"),
            _lib: lib,
        })
    }

    /// This thread's last error message from the library (empty when it has none).
    fn last_error(&self) -> String {
        let Some(f) = self.last_error else {
            return String::new();
        };
        let mut buf = vec![0u8; 4096];
        let mut len = buf.len();
        // SAFETY: `buf` holds `len` bytes.
        if unsafe { f(buf.as_mut_ptr().cast(), &mut len) } != SUCCESS {
            return String::new();
        }
        buf.truncate(len.saturating_sub(1));
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// `Ok` when `got` is `want`; else an error naming the call, the status and the library's
    /// message.
    pub fn check(&self, got: i32, want: i32, call: &str) -> Result<(), String> {
        if got == want {
            return Ok(());
        }
        Err(self.failure(call, got, &self.last_error()))
    }

    /// The text of a failed call: `call: STATUS: message` (the library's messages start
    /// with the status name, which is then not repeated).
    fn failure(&self, call: &str, status: i32, message: &str) -> String {
        let name = status_name(status);
        if message.is_empty() {
            format!("{call} failed: {name}")
        } else if message.starts_with(&name) {
            format!("{call} failed: {message}")
        } else {
            format!("{call} failed: {name}: {message}")
        }
    }

    /// Every backend ID, with the count-then-fill protocol.
    pub fn backend_ids(&self) -> Result<Vec<Handle>, String> {
        let mut n = 0usize;
        // SAFETY: the count query with a NULL array.
        let s = unsafe { (self.get_backend_ids)(std::ptr::null_mut(), &mut n) };
        self.check(s, FALLBACK, "onnxGetBackendIDs (count)")?;
        let mut ids = vec![std::ptr::null_mut(); n];
        // SAFETY: `ids` holds n entries.
        let s = unsafe { (self.get_backend_ids)(ids.as_mut_ptr(), &mut n) };
        self.check(s, SUCCESS, "onnxGetBackendIDs")?;
        ids.truncate(n);
        if ids.is_empty() {
            return Err("the library offers no ONNXIFI backend".into());
        }
        Ok(ids)
    }

    /// Releases backend IDs from [`Onnxifi::backend_ids`].
    pub fn release_ids(&self, ids: Vec<Handle>) {
        for id in ids {
            // SAFETY: IDs from onnxGetBackendIDs, released once.
            unsafe { (self.release_backend_id)(id) };
        }
    }

    /// The raw bytes of one info item (size protocol included).
    pub fn info_bytes(&self, id: Handle, info: i32) -> Result<Vec<u8>, String> {
        let mut size = 0usize;
        // SAFETY: NULL value with a valid size pointer is the documented size query.
        let s = unsafe { (self.get_backend_info)(id, info, std::ptr::null_mut(), &mut size) };
        self.check(s, FALLBACK, "onnxGetBackendInfo (size)")?;
        let mut buf = vec![0u8; size];
        // SAFETY: `buf` holds `size` bytes.
        let s = unsafe { (self.get_backend_info)(id, info, buf.as_mut_ptr().cast(), &mut size) };
        self.check(s, SUCCESS, "onnxGetBackendInfo")?;
        buf.truncate(size);
        Ok(buf)
    }

    /// A string info item (`ONNXIFI_BACKEND_NAME`, `_DEVICE`, ...).
    pub fn info_string(&self, id: Handle, info: i32) -> Result<String, String> {
        let mut buf = self.info_bytes(id, info)?;
        while buf.last() == Some(&0) {
            buf.pop();
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// A 64-bit info item.
    pub fn info_u64(&self, id: Handle, info: i32) -> Result<u64, String> {
        let buf = self.info_bytes(id, info)?;
        let bytes: [u8; 8] = buf
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| format!("backend info {info}: {} bytes, not 8", buf.len()))?;
        Ok(u64::from_ne_bytes(bytes))
    }

    /// Initialises a backend, with this library's thread-count property when `threads` is
    /// given.
    pub fn init_backend(&self, id: Handle, threads: Option<usize>) -> Result<Handle, String> {
        let props: Vec<u64> = match threads {
            Some(n) => vec![ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST, n as u64, 0],
            None => vec![0],
        };
        let mut backend = std::ptr::null_mut();
        // SAFETY: a valid ID, a terminated property list, a valid out pointer.
        let s = unsafe { (self.init_backend)(id, props.as_ptr(), &mut backend) };
        self.check(s, SUCCESS, "onnxInitBackend")?;
        Ok(backend)
    }

    /// Releases a backend made by [`Onnxifi::init_backend`].
    pub fn release_backend(&self, backend: Handle) {
        // SAFETY: a backend made above, released once, after its graphs.
        unsafe { (self.release_backend)(backend) };
    }

    /// Compiles a serialized model on `backend`.
    pub fn init_graph(&self, backend: Handle, model: &[u8]) -> Result<Handle, String> {
        let mut graph = std::ptr::null_mut();
        // SAFETY: the model slice is live for the call; no weight descriptors.
        let s = unsafe {
            (self.init_graph)(
                backend,
                std::ptr::null(),
                model.len(),
                model.as_ptr().cast(),
                0,
                std::ptr::null(),
                &mut graph,
            )
        };
        self.check(s, SUCCESS, "onnxInitGraph")?;
        Ok(graph)
    }

    /// Releases a graph made by [`Onnxifi::init_graph`] (waits for its runs).
    pub fn release_graph(&self, graph: Handle) {
        // SAFETY: a graph made above, released once.
        unsafe { (self.release_graph)(graph) };
    }

    /// The element type and shape of each named output for the inputs' shapes, from the
    /// library's shape inference (`onnxGetOutputShapesRUST`); a 0 is a dimension only a run
    /// decides. `None` when the library lacks the extension.
    pub fn output_shapes(
        &self,
        graph: Handle,
        inputs: &mut [HostTensor],
        names: &[CString],
    ) -> Result<Option<Vec<OutputType>>, String> {
        let Some(f) = self.output_shapes else {
            return Ok(None);
        };
        const CAPACITY: usize = 64;
        let ins: Vec<TensorDescriptor> = inputs.iter_mut().map(descriptor).collect();
        let mut shapes = vec![[0u64; CAPACITY]; names.len()];
        let mut outs: Vec<TensorDescriptor> = names
            .iter()
            .zip(&mut shapes)
            .map(|(n, s)| TensorDescriptor {
                tag: ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1,
                name: n.as_ptr(),
                dataType: 0,
                memoryType: ONNXIFI_MEMORY_TYPE_CPU,
                dimensions: CAPACITY as u32,
                shape: s.as_mut_ptr(),
                buffer: 0,
            })
            .collect();
        // SAFETY: descriptor arrays of the stated lengths over live names and shape arrays of
        // CAPACITY entries each.
        let s = unsafe {
            f(
                graph,
                ins.len() as u32,
                ins.as_ptr(),
                outs.len() as u32,
                outs.as_mut_ptr(),
            )
        };
        self.check(s, SUCCESS, "onnxGetOutputShapesRUST")?;
        Ok(Some(
            outs.iter()
                .zip(&shapes)
                .map(|(d, s)| (d.dataType as i32, s[..d.dimensions as usize].to_vec()))
                .collect(),
        ))
    }

    /// Binds the graph's inputs and outputs to the tensors' buffers (which must outlive every
    /// run until it is waited for).
    pub fn bind(
        &self,
        graph: Handle,
        inputs: &mut [HostTensor],
        outputs: &mut [HostTensor],
    ) -> Result<(), String> {
        let ins: Vec<TensorDescriptor> = inputs.iter_mut().map(descriptor).collect();
        let outs: Vec<TensorDescriptor> = outputs.iter_mut().map(descriptor).collect();
        // SAFETY: descriptors over buffers that outlive the runs (contract of this function).
        let s = unsafe {
            (self.set_graph_io)(
                graph,
                ins.len() as u32,
                ins.as_ptr(),
                outs.len() as u32,
                outs.as_ptr(),
            )
        };
        self.check(s, SUCCESS, "onnxSetGraphIO")
    }

    /// One run of a bound graph: an input event signalled after `onnxRunGraph` returns (as
    /// frameworks do), then the output event waited for. Returns the round-trip time.
    pub fn run_once(&self, backend: Handle, graph: Handle) -> Result<Duration, String> {
        let mut input_event = std::ptr::null_mut();
        // SAFETY: a valid backend and out pointer.
        let s = unsafe { (self.init_event)(backend, &mut input_event) };
        self.check(s, SUCCESS, "onnxInitEvent")?;
        let in_fence = MemoryFence {
            tag: ONNXIFI_TAG_MEMORY_FENCE_V1,
            r#type: ONNXIFI_SYNCHRONIZATION_EVENT,
            event: input_event,
        };
        let mut out_fence = MemoryFence {
            tag: ONNXIFI_TAG_MEMORY_FENCE_V1,
            r#type: ONNXIFI_SYNCHRONIZATION_EVENT,
            event: std::ptr::null_mut(),
        };
        let start = Instant::now();
        // SAFETY: valid graph and fences; the backend fills out_fence.event.
        let s = unsafe { (self.run_graph)(graph, &in_fence, &mut out_fence) };
        let run_error = (s != SUCCESS).then(|| self.failure("onnxRunGraph", s, &self.last_error()));
        // SAFETY: our own input event, signalled after onnxRunGraph returned.
        let signalled = unsafe { (self.signal_event)(input_event) };
        let waited = if run_error.is_none() {
            let w = self.wait(out_fence.event);
            // SAFETY: the output event the backend created, released once.
            unsafe { (self.release_event)(out_fence.event) };
            Some(w)
        } else {
            None
        };
        let took = start.elapsed();
        // SAFETY: our input event, released once.
        unsafe { (self.release_event)(input_event) };
        if let Some(e) = run_error {
            return Err(e);
        }
        self.check(signalled, SUCCESS, "onnxSignalEvent")?;
        if let Some((status, message)) = waited {
            if status != SUCCESS {
                return Err(self.failure("the run", status, &message));
            }
        }
        Ok(took)
    }

    /// Waits for an event; its status and message (`onnxWaitEventFor` when the library has
    /// it, else `onnxWaitEvent` and no message).
    fn wait(&self, event: Handle) -> (i32, String) {
        if let Some(f) = self.wait_for {
            let (mut state, mut status) = (0i32, 0i32);
            let mut message = vec![0u8; 4096];
            let mut len = message.len();
            // SAFETY: a live event; valid out pointers; `message` holds `len` bytes.
            let s = unsafe {
                f(
                    event,
                    0,
                    &mut state,
                    &mut status,
                    message.as_mut_ptr().cast(),
                    &mut len,
                )
            };
            if s == SUCCESS || s == FALLBACK {
                let end = message.iter().position(|&b| b == 0).unwrap_or(0);
                return (
                    status,
                    String::from_utf8_lossy(&message[..end]).into_owned(),
                );
            }
        }
        // SAFETY: a live event.
        (unsafe { (self.wait_event)(event) }, String::new())
    }
}

/// A descriptor over a tensor's buffer (the tensor must outlive its use).
fn descriptor(t: &mut HostTensor) -> TensorDescriptor {
    TensorDescriptor {
        tag: ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1,
        name: t.name.as_ptr(),
        dataType: t.elem as u64,
        memoryType: ONNXIFI_MEMORY_TYPE_CPU,
        dimensions: t.shape.len() as u32,
        shape: t.shape.as_ptr(),
        buffer: t.data.as_mut_ptr() as u64,
    }
}
