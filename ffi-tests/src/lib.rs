//! Harness for testing `libonnxifi-rust.so` from outside, as a framework would: the library is
//! opened with `dlopen` (libloading) and driven only through the ONNXIFI C ABI.
//!
//! * [`api`] loads the library once per process (path: env `ONNXIFI_RUST_LIB`, default
//!   `target/release/libonnxifi_rust.so`) and holds typed pointers to every entry point.
//! * [`models`] generates the test models and onnxruntime's expected outputs once per process
//!   with the Python environment made by `scripts/setup-test-env.sh`.
//! * The ABI types and constants are written out here from the ONNXIFI 1.0 specification,
//!   independently of the library's own definitions.

use std::ffi::{c_char, c_void, CStr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// ONNXIFI status codes (`ONNXIFI_STATUS_*`).
pub mod status {
    #![allow(missing_docs)]
    pub const SUCCESS: i32 = 0x0000;
    pub const FALLBACK: i32 = 0x0001;
    pub const INVALID_ID: i32 = 0x0101;
    pub const INVALID_SIZE: i32 = 0x0102;
    pub const INVALID_POINTER: i32 = 0x0103;
    pub const INVALID_PROTOBUF: i32 = 0x0104;
    pub const INVALID_MODEL: i32 = 0x0105;
    pub const INVALID_BACKEND: i32 = 0x0106;
    pub const INVALID_GRAPH: i32 = 0x0107;
    pub const INVALID_EVENT: i32 = 0x0108;
    pub const INVALID_STATE: i32 = 0x0109;
    pub const INVALID_NAME: i32 = 0x010A;
    pub const INVALID_SHAPE: i32 = 0x010B;
    pub const INVALID_DATATYPE: i32 = 0x010C;
    pub const INVALID_MEMORY_TYPE: i32 = 0x010D;
    pub const INVALID_MEMORY_LOCATION: i32 = 0x010E;
    pub const INVALID_FENCE_TYPE: i32 = 0x010F;
    pub const INVALID_PROPERTY: i32 = 0x0110;
    pub const UNSUPPORTED_TAG: i32 = 0x0201;
    pub const UNSUPPORTED_VERSION: i32 = 0x0202;
    pub const UNSUPPORTED_OPERATOR: i32 = 0x0203;
    pub const UNSUPPORTED_ATTRIBUTE: i32 = 0x0204;
    pub const UNSUPPORTED_SHAPE: i32 = 0x0205;
    pub const UNSUPPORTED_DATATYPE: i32 = 0x0206;
    pub const UNSUPPORTED_MEMORY_TYPE: i32 = 0x0207;
    pub const UNSUPPORTED_FENCE_TYPE: i32 = 0x0208;
    pub const UNSUPPORTED_PROPERTY: i32 = 0x0209;
    pub const UNIDENTIFIED_NAME: i32 = 0x0301;
    pub const MISMATCHING_SHAPE: i32 = 0x0302;
    pub const MISMATCHING_DATATYPE: i32 = 0x0303;
    pub const NO_SYSTEM_MEMORY: i32 = 0x0401;
    pub const NO_DEVICE_MEMORY: i32 = 0x0402;
    pub const NO_SYSTEM_RESOURCES: i32 = 0x0403;
    pub const NO_DEVICE_RESOURCES: i32 = 0x0404;
    pub const BACKEND_UNAVAILABLE: i32 = 0x0405;
    pub const INTERNAL_ERROR: i32 = 0x0406;

    /// The header's name of a status value (for assertion messages).
    pub fn name(code: i32) -> String {
        let n = match code {
            SUCCESS => "SUCCESS",
            FALLBACK => "FALLBACK",
            INVALID_ID => "INVALID_ID",
            INVALID_SIZE => "INVALID_SIZE",
            INVALID_POINTER => "INVALID_POINTER",
            INVALID_PROTOBUF => "INVALID_PROTOBUF",
            INVALID_MODEL => "INVALID_MODEL",
            INVALID_BACKEND => "INVALID_BACKEND",
            INVALID_GRAPH => "INVALID_GRAPH",
            INVALID_EVENT => "INVALID_EVENT",
            INVALID_STATE => "INVALID_STATE",
            INVALID_NAME => "INVALID_NAME",
            INVALID_SHAPE => "INVALID_SHAPE",
            INVALID_DATATYPE => "INVALID_DATATYPE",
            INVALID_MEMORY_TYPE => "INVALID_MEMORY_TYPE",
            INVALID_MEMORY_LOCATION => "INVALID_MEMORY_LOCATION",
            INVALID_FENCE_TYPE => "INVALID_FENCE_TYPE",
            INVALID_PROPERTY => "INVALID_PROPERTY",
            UNSUPPORTED_TAG => "UNSUPPORTED_TAG",
            UNSUPPORTED_VERSION => "UNSUPPORTED_VERSION",
            UNSUPPORTED_OPERATOR => "UNSUPPORTED_OPERATOR",
            UNSUPPORTED_ATTRIBUTE => "UNSUPPORTED_ATTRIBUTE",
            UNSUPPORTED_SHAPE => "UNSUPPORTED_SHAPE",
            UNSUPPORTED_DATATYPE => "UNSUPPORTED_DATATYPE",
            UNSUPPORTED_MEMORY_TYPE => "UNSUPPORTED_MEMORY_TYPE",
            UNSUPPORTED_FENCE_TYPE => "UNSUPPORTED_FENCE_TYPE",
            UNSUPPORTED_PROPERTY => "UNSUPPORTED_PROPERTY",
            UNIDENTIFIED_NAME => "UNIDENTIFIED_NAME",
            MISMATCHING_SHAPE => "MISMATCHING_SHAPE",
            MISMATCHING_DATATYPE => "MISMATCHING_DATATYPE",
            NO_SYSTEM_MEMORY => "NO_SYSTEM_MEMORY",
            NO_DEVICE_MEMORY => "NO_DEVICE_MEMORY",
            NO_SYSTEM_RESOURCES => "NO_SYSTEM_RESOURCES",
            NO_DEVICE_RESOURCES => "NO_DEVICE_RESOURCES",
            BACKEND_UNAVAILABLE => "BACKEND_UNAVAILABLE",
            INTERNAL_ERROR => "INTERNAL_ERROR",
            _ => "?",
        };
        format!("0x{code:04x} {n}")
    }
}

/// `ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1`.
pub const TAG_TENSOR_DESCRIPTOR_V1: i32 = 0x43DF_BF69;
/// `ONNXIFI_TAG_MEMORY_FENCE_V1`.
pub const TAG_MEMORY_FENCE_V1: i32 = 0x23E0_8AAB;
/// `ONNXIFI_SYNCHRONIZATION_EVENT`.
pub const SYNCHRONIZATION_EVENT: u64 = 0;
/// `ONNXIFI_SYNCHRONIZATION_IMPLICIT`.
pub const SYNCHRONIZATION_IMPLICIT: u64 = 2;
/// `ONNXIFI_MEMORY_TYPE_CPU`.
pub const MEMORY_TYPE_CPU: u64 = 0;
/// `ONNXIFI_MEMORY_TYPE_CUDA_BUFFER`.
pub const MEMORY_TYPE_CUDA_BUFFER: u64 = 1;
/// `ONNXIFI_DATATYPE_FLOAT32`.
pub const DATATYPE_FLOAT32: u64 = 1;
/// `ONNXIFI_DATATYPE_INT32`.
pub const DATATYPE_INT32: u64 = 6;
/// `ONNXIFI_DATATYPE_INT64`.
pub const DATATYPE_INT64: u64 = 7;
/// `ONNXIFI_EVENT_STATE_INVALID`.
pub const EVENT_STATE_INVALID: i32 = 0;
/// `ONNXIFI_EVENT_STATE_NONSIGNALLED`.
pub const EVENT_STATE_NONSIGNALLED: i32 = 0x16BD;
/// `ONNXIFI_EVENT_STATE_SIGNALLED`.
pub const EVENT_STATE_SIGNALLED: i32 = 0x3395;
/// `ONNXIFI_BACKEND_PROPERTY_OPTIMIZATION`.
pub const BACKEND_PROPERTY_OPTIMIZATION: u64 = 1;
/// `ONNXIFI_BACKEND_PROPERTY_LOG_LEVEL`.
pub const BACKEND_PROPERTY_LOG_LEVEL: u64 = 2;
/// `ONNXIFI_BACKEND_CUDA_STREAM`.
pub const BACKEND_CUDA_STREAM: u64 = 4;

/// `onnxTensorDescriptorV1` (onnx 1.12.0 layout: 56 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TensorDescriptor {
    /// `ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1`.
    pub tag: i32,
    /// NUL-terminated tensor name.
    pub name: *const c_char,
    /// `ONNXIFI_DATATYPE_*`.
    pub data_type: u64,
    /// `ONNXIFI_MEMORY_TYPE_*`.
    pub memory_type: u64,
    /// Rank.
    pub dimensions: u32,
    /// `dimensions` extents (may be NULL for a scalar).
    pub shape: *const u64,
    /// Buffer address.
    pub buffer: u64,
}

/// `onnxMemoryFenceV1` (24 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MemoryFence {
    /// `ONNXIFI_TAG_MEMORY_FENCE_V1`.
    pub tag: i32,
    /// `ONNXIFI_SYNCHRONIZATION_*`.
    pub fence_type: u64,
    /// The event (for EVENT fences).
    pub event: *mut c_void,
}

impl MemoryFence {
    /// An EVENT fence holding `event` (NULL for an output fence).
    pub fn event(event: *mut c_void) -> Self {
        MemoryFence {
            tag: TAG_MEMORY_FENCE_V1,
            fence_type: SYNCHRONIZATION_EVENT,
            event,
        }
    }
}

/// A CPU float32/int64/... descriptor over `buffer`; `name` and `shape` must outlive its use.
pub fn descriptor(
    name: &CStr,
    data_type: u64,
    shape: &[u64],
    buffer: *mut c_void,
) -> TensorDescriptor {
    TensorDescriptor {
        tag: TAG_TENSOR_DESCRIPTOR_V1,
        name: name.as_ptr(),
        data_type,
        memory_type: MEMORY_TYPE_CPU,
        dimensions: shape.len() as u32,
        shape: if shape.is_empty() {
            std::ptr::null()
        } else {
            shape.as_ptr()
        },
        buffer: buffer as u64,
    }
}

/// A CPU float32 descriptor over `buf`.
pub fn f32_descriptor(name: &CStr, shape: &[u64], buf: &mut [f32]) -> TensorDescriptor {
    descriptor(name, DATATYPE_FLOAT32, shape, buf.as_mut_ptr().cast())
}

/// Opaque handle type (`onnxBackendID`, `onnxBackend`, `onnxGraph`, `onnxEvent`).
pub type Handle = *mut c_void;

/// `onnxExtensionFunctionPointer`.
pub type ExtensionFunctionPointer = Option<unsafe extern "C" fn() -> i32>;

/// `onnxSetIOAndRunGraph` (onnx form).
pub type SetIoAndRunGraphFn = unsafe extern "C" fn(
    Handle,
    u32,
    *const TensorDescriptor,
    u32,
    *const TensorDescriptor,
    *mut MemoryFence,
) -> i32;

/// foxi's `onnxWaitEventFor(event, timeoutMs, *state, *status, message, *messageLength)`.
pub type WaitEventForFn =
    unsafe extern "C" fn(Handle, u32, *mut i32, *mut i32, *mut c_char, *mut usize) -> i32;

/// Every exported entry point of the library, typed as in the ONNXIFI 1.0 header.
#[allow(missing_docs)]
pub struct Api {
    _lib: libloading::Library,
    pub get_backend_ids: unsafe extern "C" fn(*mut Handle, *mut usize) -> i32,
    pub release_backend_id: unsafe extern "C" fn(Handle) -> i32,
    pub get_backend_info: unsafe extern "C" fn(Handle, i32, *mut c_void, *mut usize) -> i32,
    pub get_backend_compatibility: unsafe extern "C" fn(Handle, usize, *const c_void) -> i32,
    pub init_backend: unsafe extern "C" fn(Handle, *const u64, *mut Handle) -> i32,
    pub release_backend: unsafe extern "C" fn(Handle) -> i32,
    pub init_event: unsafe extern "C" fn(Handle, *mut Handle) -> i32,
    pub signal_event: unsafe extern "C" fn(Handle) -> i32,
    pub get_event_state: unsafe extern "C" fn(Handle, *mut i32) -> i32,
    pub wait_event: unsafe extern "C" fn(Handle) -> i32,
    pub release_event: unsafe extern "C" fn(Handle) -> i32,
    pub init_graph: unsafe extern "C" fn(
        Handle,
        *const u64,
        usize,
        *const c_void,
        u32,
        *const TensorDescriptor,
        *mut Handle,
    ) -> i32,
    pub set_graph_io: unsafe extern "C" fn(
        Handle,
        u32,
        *const TensorDescriptor,
        u32,
        *const TensorDescriptor,
    ) -> i32,
    pub run_graph: unsafe extern "C" fn(Handle, *const MemoryFence, *mut MemoryFence) -> i32,
    pub release_graph: unsafe extern "C" fn(Handle) -> i32,
    pub get_extension_function_address:
        unsafe extern "C" fn(Handle, *const c_char, *mut ExtensionFunctionPointer) -> i32,
}

// SAFETY: the struct holds plain function pointers into a library that stays loaded for the
// process lifetime; the library itself advertises thread safety (tests check that).
unsafe impl Sync for Api {}
// SAFETY: as above.
unsafe impl Send for Api {}

/// The repository root (the parent of `ffi-tests/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("ffi-tests lives in the repository")
        .to_path_buf()
}

/// Where the library under test is: env `ONNXIFI_RUST_LIB`, else `target/release/`.
pub fn library_path() -> PathBuf {
    match std::env::var_os("ONNXIFI_RUST_LIB") {
        Some(p) => PathBuf::from(p),
        None => repo_root().join("target/release/libonnxifi_rust.so"),
    }
}

/// Loads the library once per process and returns its entry points.
///
/// Panics with instructions when the library has not been built.
pub fn api() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| {
        let path = library_path();
        assert!(
            path.exists(),
            "{} does not exist: run `cargo build --release` first (or set ONNXIFI_RUST_LIB)",
            path.display()
        );
        // SAFETY: loading the library under test runs its initialisers; that is the point.
        let lib = unsafe { libloading::Library::new(&path) }
            .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display()));
        macro_rules! sym {
            ($name:literal) => {{
                // SAFETY: the symbol is an ONNXIFI entry point whose C signature matches the
                // field type it is assigned to (the official header's prototype).
                let s = unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .unwrap_or_else(|e| panic!("symbol {} missing: {e}", $name));
                *s
            }};
        }
        Api {
            get_backend_ids: sym!("onnxGetBackendIDs"),
            release_backend_id: sym!("onnxReleaseBackendID"),
            get_backend_info: sym!("onnxGetBackendInfo"),
            get_backend_compatibility: sym!("onnxGetBackendCompatibility"),
            init_backend: sym!("onnxInitBackend"),
            release_backend: sym!("onnxReleaseBackend"),
            init_event: sym!("onnxInitEvent"),
            signal_event: sym!("onnxSignalEvent"),
            get_event_state: sym!("onnxGetEventState"),
            wait_event: sym!("onnxWaitEvent"),
            release_event: sym!("onnxReleaseEvent"),
            init_graph: sym!("onnxInitGraph"),
            set_graph_io: sym!("onnxSetGraphIO"),
            run_graph: sym!("onnxRunGraph"),
            release_graph: sym!("onnxReleaseGraph"),
            get_extension_function_address: sym!("onnxGetExtensionFunctionAddress"),
            _lib: lib,
        }
    })
}

/// The directory holding the generated test models and expected outputs (made once per
/// version of their script, its inputs and the test environment, under `target/test-models/`).
///
/// Runs `ffi-tests/models/make_test_models.py` with env `ONNXIFI_TEST_PYTHON` (or
/// `ONNXIFI_RUST_PYTHON`), else `.venv/bin/python`.
pub fn models() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = repo_root();
        let python = std::env::var_os("ONNXIFI_TEST_PYTHON")
            .or_else(|| std::env::var_os("ONNXIFI_RUST_PYTHON"))
            .map(PathBuf::from)
            .unwrap_or_else(|| root.join(".venv/bin/python"));
        assert!(
            python.exists(),
            "{} missing: run scripts/setup-test-env.sh first (or set ONNXIFI_TEST_PYTHON)",
            python.display()
        );
        // Generated once per version of what they are made from (the script, the example
        // models and the module it reads, the pinned test environment), into the target
        // folder: later test processes reuse the folder, and nothing is left in the system's
        // temporary folder.
        let script = root.join("ffi-tests/models/make_test_models.py");
        let sources = [
            script.clone(),
            root.join("examples/make_small_cnn.py"),
            root.join("examples/small_cnn.onnx"),
            root.join("examples/small_cnn_dynamic.onnx"),
            root.join("scripts/setup-test-env.sh"),
        ];
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for file in &sources {
            let bytes = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            std::hash::Hasher::write(&mut hasher, &bytes);
        }
        let key = std::hash::Hasher::finish(&hasher);
        let dir = root.join(format!("target/test-models/{key:016x}"));
        if dir.is_dir() {
            return dir;
        }
        // Written beside it and renamed into place, so that a concurrent test process never
        // sees a half-written folder.
        let tmp = root.join(format!(
            "target/test-models/{key:016x}.{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&tmp);
        let out = Command::new(&python)
            .arg(&script)
            .arg(&tmp)
            .output()
            .expect("cannot run python");
        assert!(
            out.status.success(),
            "make_test_models.py failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if std::fs::rename(&tmp, &dir).is_err() {
            // Another process put its folder there first.
            let _ = std::fs::remove_dir_all(&tmp);
        }
        assert!(dir.is_dir(), "{} missing after generation", dir.display());
        dir
    })
}

/// The bytes of a generated model file.
pub fn model_bytes(name: &str) -> Vec<u8> {
    let p = models().join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A raw little-endian float32 file of the generated data.
pub fn read_f32(name: &str) -> Vec<f32> {
    let bytes = std::fs::read(models().join(name)).expect("generated file");
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The deterministic input of `examples/make_small_cnn.py`: `((i*37+11) % 101)/50 - 1`.
pub fn deterministic_input(n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 37 + 11) % 101) as f32 / 50.0 - 1.0)
        .collect()
}

/// Asserts that two float slices agree within `atol + rtol*|want|` element-wise.
pub fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-4 * w.abs(),
            "{what}: [{i}] got {g}, expected {w}\n got {got:?}\nwant {want:?}"
        );
    }
}

/// Asserts a status, naming both values on failure.
#[track_caller]
pub fn expect(got: i32, want: i32, what: &str) {
    assert_eq!(
        got,
        want,
        "{what}: got {}, expected {}",
        status::name(got),
        status::name(want)
    );
}

/// Runs `f` on another thread and panics if it takes longer than `limit` (a deadlock).
pub fn with_timeout<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: still blocked after {limit:?} (deadlock?)")
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

/// A backend ID and a backend made from it, released (backend, then all IDs) on drop.
pub struct Backend {
    /// All IDs returned by `onnxGetBackendIDs`.
    pub ids: Vec<Handle>,
    /// The backend made from `ids[0]`.
    pub backend: Handle,
}

// SAFETY: the library advertises THREAD_SAFE; handles may be used from any thread.
unsafe impl Send for Backend {}
// SAFETY: as above.
unsafe impl Sync for Backend {}

impl Backend {
    /// Gets the IDs with the two-call protocol and initialises a backend with no properties.
    pub fn new() -> Self {
        let ids = backend_ids();
        let mut backend = std::ptr::null_mut();
        // SAFETY: a valid ID, NULL property list, valid out pointer.
        let s = unsafe { (api().init_backend)(ids[0], std::ptr::null(), &mut backend) };
        expect(s, status::SUCCESS, "onnxInitBackend");
        Backend { ids, backend }
    }

    /// The first backend ID.
    pub fn id(&self) -> Handle {
        self.ids[0]
    }

    /// Initialises a graph from model bytes (no properties, no weight descriptors).
    pub fn graph(&self, model: &[u8]) -> Graph {
        let mut g = std::ptr::null_mut();
        // SAFETY: valid backend, model pointer/size from a live slice, valid out pointer.
        let s = unsafe {
            (api().init_graph)(
                self.backend,
                std::ptr::null(),
                model.len(),
                model.as_ptr().cast(),
                0,
                std::ptr::null(),
                &mut g,
            )
        };
        expect(s, status::SUCCESS, "onnxInitGraph");
        Graph(g)
    }

    /// A fresh (non-signalled) event.
    pub fn event(&self) -> Handle {
        let mut e = std::ptr::null_mut();
        // SAFETY: valid backend, valid out pointer.
        let s = unsafe { (api().init_event)(self.backend, &mut e) };
        expect(s, status::SUCCESS, "onnxInitEvent");
        e
    }
}

impl Default for Backend {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        // SAFETY: handles made by this struct, released once.
        unsafe {
            (api().release_backend)(self.backend);
            for id in &self.ids {
                (api().release_backend_id)(*id);
            }
        }
    }
}

/// A graph handle released on drop.
pub struct Graph(pub Handle);

// SAFETY: the library advertises THREAD_SAFE.
unsafe impl Send for Graph {}
// SAFETY: as above.
unsafe impl Sync for Graph {}

impl Drop for Graph {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a graph made by Backend::graph, released once.
            unsafe { (api().release_graph)(self.0) };
        }
    }
}

/// All backend IDs, with the two-call size protocol checked on the way.
pub fn backend_ids() -> Vec<Handle> {
    let mut n = 0usize;
    // SAFETY: NULL array is the documented count query; n is a valid pointer.
    let s = unsafe { (api().get_backend_ids)(std::ptr::null_mut(), &mut n) };
    expect(s, status::FALLBACK, "onnxGetBackendIDs(NULL, &n)");
    assert!(n >= 1, "no backends");
    let mut ids = vec![std::ptr::null_mut(); n];
    let mut m = n;
    // SAFETY: ids holds m entries.
    let s = unsafe { (api().get_backend_ids)(ids.as_mut_ptr(), &mut m) };
    expect(s, status::SUCCESS, "onnxGetBackendIDs(ids, &n)");
    assert_eq!(m, n);
    ids
}

/// Runs `graph` once with the current IO binding: input event, run, signal, wait.
/// Returns (the status of onnxRunGraph, the status of onnxWaitEvent or None if not run).
// The handle is opaque: it is only passed on to the library, which must validate it.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn run_once(b: &Backend, graph: Handle) -> (i32, Option<i32>) {
    let input = b.event();
    let in_fence = MemoryFence::event(input);
    let mut out_fence = MemoryFence::event(std::ptr::null_mut());
    // SAFETY: valid fences; graph may be anything the caller chose to test.
    let s = unsafe { (api().run_graph)(graph, &in_fence, &mut out_fence) };
    // SAFETY: input is our event.
    expect(
        unsafe { (api().signal_event)(input) },
        status::SUCCESS,
        "onnxSignalEvent",
    );
    let waited = if s == status::SUCCESS {
        assert!(
            !out_fence.event.is_null(),
            "onnxRunGraph stored no output event"
        );
        // SAFETY: the output event the backend just created.
        let w = unsafe { (api().wait_event)(out_fence.event) };
        // SAFETY: released once.
        unsafe { (api().release_event)(out_fence.event) };
        Some(w)
    } else {
        None
    };
    // SAFETY: released once.
    unsafe { (api().release_event)(input) };
    (s, waited)
}

/// Looks up an extension function of the first backend ID.
pub fn extension(b: &Backend, name: &CStr) -> ExtensionFunctionPointer {
    let mut f: ExtensionFunctionPointer = None;
    // SAFETY: valid ID, NUL-terminated name, valid out pointer.
    let s = unsafe { (api().get_extension_function_address)(b.id(), name.as_ptr(), &mut f) };
    expect(s, status::SUCCESS, "onnxGetExtensionFunctionAddress");
    assert!(f.is_some(), "{name:?}: NULL function");
    f
}

/// `onnxWaitEventFor` found through the extension lookup.
pub fn wait_event_for(b: &Backend) -> WaitEventForFn {
    let f = extension(b, c"onnxWaitEventForFunction").expect("checked");
    // SAFETY: the backend documents this name as the foxi onnxWaitEventFor signature.
    unsafe { std::mem::transmute::<unsafe extern "C" fn() -> i32, WaitEventForFn>(f) }
}

/// The result of one `onnxWaitEventFor` call.
#[derive(Debug)]
pub struct WaitFor {
    /// The function's return status.
    pub ret: i32,
    /// `*eventState`.
    pub state: i32,
    /// `*eventStatus`.
    pub status: i32,
    /// The message (up to the first NUL).
    pub message: String,
    /// `*messageLength` after the call.
    pub message_length: usize,
}

/// Calls `onnxWaitEventFor` with a 256-byte message buffer.
// The event is opaque: it is only passed on to the library, which must validate it.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn call_wait_for(f: WaitEventForFn, event: Handle, timeout_ms: u32) -> WaitFor {
    let mut state = -1;
    let mut st = -1;
    let mut msg = [0x55 as c_char; 256];
    let mut len = msg.len();
    // SAFETY: all out pointers are valid; msg has len bytes.
    let ret = unsafe {
        f(
            event,
            timeout_ms,
            &mut state,
            &mut st,
            msg.as_mut_ptr(),
            &mut len,
        )
    };
    let message = if msg.contains(&0) {
        // SAFETY: msg holds a NUL within its bounds.
        unsafe { CStr::from_ptr(msg.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    } else {
        String::from("<not NUL-terminated>")
    };
    WaitFor {
        ret,
        state,
        status: st,
        message,
        message_length: len,
    }
}
