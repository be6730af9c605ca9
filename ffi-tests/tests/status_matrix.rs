//! The ONNXIFI status matrix, checked from outside through `dlopen`: one test per documented
//! status case of every entry point, plus the asynchronous behaviour (fences, extension wait,
//! failing runs, release while running, concurrency).
//!
//! Needs `cargo build --release` (or env `ONNXIFI_RUST_LIB`) and `scripts/setup-test-env.sh`
//! (models and expected outputs are generated with onnx/onnxruntime at test time).

use onnxifi_ffi_tests::status::*;
use onnxifi_ffi_tests::*;
use std::process::Command;
use std::ptr::{null, null_mut};
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(60);

/// Runs `body` in a child process (this test binary, filtered to `name`), so that a crash on
/// a bogus handle fails only this test and reports the signal.
fn isolated(name: &str, body: fn()) {
    const VAR: &str = "ONNXIFI_FFI_ISOLATED";
    if std::env::var(VAR).as_deref() == Ok(name) {
        body();
        return;
    }
    let out = Command::new(std::env::current_exe().expect("test binary"))
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(VAR, name)
        .output()
        .expect("cannot re-run the test binary");
    assert!(
        out.status.success(),
        "{name} failed in its child process ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "{name}: the child process did not run the test:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// A pointer that is not a handle the library ever made.
fn bogus() -> Handle {
    0xdead_beef_usize as Handle
}

// ---------------------------------------------------------------- onnxGetBackendIDs

#[test]
fn backend_ids_count_query_is_fallback_then_success() {
    let ids = backend_ids();
    assert_eq!(ids.len(), 1, "a CPU backend exposes exactly one device");
    for id in ids {
        // SAFETY: an ID from onnxGetBackendIDs, released once.
        expect(
            unsafe { (api().release_backend_id)(id) },
            SUCCESS,
            "onnxReleaseBackendID",
        );
    }
}

#[test]
fn backend_ids_null_count_is_invalid_pointer() {
    let mut ids = [null_mut(); 4];
    // SAFETY: a NULL count pointer is the case under test.
    let s = unsafe { (api().get_backend_ids)(ids.as_mut_ptr(), null_mut()) };
    expect(s, INVALID_POINTER, "onnxGetBackendIDs(ids, NULL)");
}

#[test]
fn backend_ids_too_small_capacity_is_fallback_with_count() {
    let mut ids = [null_mut(); 1];
    let mut n = 0usize;
    // SAFETY: capacity 0 for a 1-entry array.
    let s = unsafe { (api().get_backend_ids)(ids.as_mut_ptr(), &mut n) };
    expect(s, FALLBACK, "onnxGetBackendIDs capacity 0");
    assert_eq!(n, 1, "available count stored");
    assert!(ids[0].is_null(), "no ID written on FALLBACK");
}

#[test]
fn backend_ids_larger_capacity_is_success_with_actual_count() {
    let mut ids = [null_mut(); 8];
    let mut n = ids.len();
    // SAFETY: ids has n entries.
    let s = unsafe { (api().get_backend_ids)(ids.as_mut_ptr(), &mut n) };
    expect(s, SUCCESS, "onnxGetBackendIDs capacity 8");
    assert_eq!(n, 1);
    assert!(!ids[0].is_null());
    // SAFETY: released once.
    expect(
        unsafe { (api().release_backend_id)(ids[0]) },
        SUCCESS,
        "release",
    );
}

#[test]
fn release_backend_id_null_and_bogus_are_invalid_id() {
    // SAFETY: invalid IDs are the case under test.
    unsafe {
        expect(
            (api().release_backend_id)(null_mut()),
            INVALID_ID,
            "release NULL",
        );
        expect(
            (api().release_backend_id)(bogus()),
            INVALID_ID,
            "release 0xdeadbeef",
        );
    }
}

#[test]
fn stale_and_foreign_backend_ids_are_invalid_id() {
    isolated("stale_and_foreign_backend_ids_are_invalid_id", || {
        let ids = backend_ids();
        let id = ids[0];
        // SAFETY: released once here; the later uses of the stale ID are the test.
        expect(
            unsafe { (api().release_backend_id)(id) },
            SUCCESS,
            "release",
        );
        let mut on_stack = [0u64; 8];
        let foreign: Handle = on_stack.as_mut_ptr().cast();
        for (what, h) in [
            ("released ID", id),
            ("stack object", foreign),
            ("0xdeadbeef", bogus()),
        ] {
            let mut size = 8usize;
            let mut v = 0u64;
            let mut backend: Handle = 1usize as Handle;
            // SAFETY: bogus handles are the case under test; out pointers are valid.
            unsafe {
                expect((api().release_backend_id)(h), INVALID_ID, what);
                expect(
                    (api().get_backend_info)(h, 0, (&mut v as *mut u64).cast(), &mut size),
                    INVALID_ID,
                    what,
                );
                let model = model_bytes("add.onnx");
                expect(
                    (api().get_backend_compatibility)(h, model.len(), model.as_ptr().cast()),
                    INVALID_ID,
                    what,
                );
                expect(
                    (api().init_backend)(h, null(), &mut backend),
                    INVALID_ID,
                    what,
                );
                assert!(
                    backend.is_null(),
                    "{what}: failed onnxInitBackend left a handle"
                );
            }
        }
        assert_eq!(
            on_stack, [0u64; 8],
            "the library wrote into a foreign object"
        );
    });
}

// ---------------------------------------------------------------- onnxGetBackendInfo

const SUPPORTED_INFO: [i32; 20] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 20, 21, 22, 30, 31, 35,
];
const STRING_INFO: [i32; 7] = [1, 2, 3, 4, 5, 7, 8];
const UNSUPPORTED_INFO: [i32; 13] = [9, 36, 37, 40, 41, 42, 43, 44, 45, 46, 999, -1, 23];

/// Queries an info item with the full size protocol checked; returns its bytes.
fn info_bytes(id: Handle, info: i32) -> Vec<u8> {
    let api = api();
    let mut size = 0usize;
    // SAFETY: NULL value is the documented size query.
    let s = unsafe { (api.get_backend_info)(id, info, null_mut(), &mut size) };
    expect(s, FALLBACK, &format!("info {info}: NULL value"));
    assert!(size > 0, "info {info}: size query returned 0");
    if size > 1 {
        let mut small = vec![0xEEu8; size - 1];
        let mut sz = small.len();
        // SAFETY: small holds sz bytes.
        let s = unsafe { (api.get_backend_info)(id, info, small.as_mut_ptr().cast(), &mut sz) };
        expect(s, FALLBACK, &format!("info {info}: buffer one byte short"));
        assert_eq!(
            sz, size,
            "info {info}: FALLBACK must store the required size"
        );
        assert!(
            small.iter().all(|&b| b == 0xEE),
            "info {info}: wrote into a short buffer"
        );
    }
    let mut buf = vec![0xEEu8; size + 16];
    let mut sz = size;
    // SAFETY: buf holds more than sz bytes; the tail checks for overruns.
    let s = unsafe { (api.get_backend_info)(id, info, buf.as_mut_ptr().cast(), &mut sz) };
    expect(s, SUCCESS, &format!("info {info}: exact buffer"));
    assert_eq!(sz, size, "info {info}: size changed");
    assert!(
        buf[size..].iter().all(|&b| b == 0xEE),
        "info {info}: wrote past the size"
    );
    let mut big = vec![0u8; size + 64];
    let mut bsz = big.len();
    // SAFETY: big holds bsz bytes.
    let s = unsafe { (api.get_backend_info)(id, info, big.as_mut_ptr().cast(), &mut bsz) };
    expect(s, SUCCESS, &format!("info {info}: larger buffer"));
    assert_eq!(
        bsz, size,
        "info {info}: a larger buffer must report the actual size"
    );
    buf.truncate(size);
    buf
}

fn info_u64(id: Handle, info: i32) -> u64 {
    let b = info_bytes(id, info);
    assert_eq!(b.len(), 8, "info {info} is a 64-bit value");
    u64::from_ne_bytes(b.try_into().expect("8 bytes"))
}

fn info_string(id: Handle, info: i32) -> String {
    let b = info_bytes(id, info);
    assert_eq!(
        *b.last().expect("non-empty"),
        0,
        "info {info}: size must include the NUL"
    );
    assert!(
        !b[..b.len() - 1].contains(&0),
        "info {info}: NUL inside the string"
    );
    String::from_utf8(b[..b.len() - 1].to_vec()).expect("UTF-8")
}

#[test]
fn backend_info_size_protocol_for_every_supported_id() {
    let b = Backend::new();
    for info in SUPPORTED_INFO {
        let bytes = info_bytes(b.id(), info);
        if STRING_INFO.contains(&info) {
            info_string(b.id(), info);
        } else {
            assert_eq!(bytes.len(), 8, "info {info} is 64-bit");
        }
    }
}

#[test]
fn backend_info_unsupported_ids_are_unsupported_attribute() {
    let b = Backend::new();
    for info in UNSUPPORTED_INFO {
        let mut buf = [0u8; 64];
        let mut size = buf.len();
        // SAFETY: buf holds size bytes.
        let s =
            unsafe { (api().get_backend_info)(b.id(), info, buf.as_mut_ptr().cast(), &mut size) };
        expect(s, UNSUPPORTED_ATTRIBUTE, &format!("info {info}"));
        let mut size = 0usize;
        // SAFETY: NULL value, valid size pointer.
        let s = unsafe { (api().get_backend_info)(b.id(), info, null_mut(), &mut size) };
        expect(s, UNSUPPORTED_ATTRIBUTE, &format!("info {info} size query"));
    }
}

#[test]
fn backend_info_null_size_is_invalid_pointer_and_bad_id_is_invalid_id() {
    let b = Backend::new();
    let mut v = 0u64;
    // SAFETY: the NULL size pointer is the case under test.
    let s = unsafe { (api().get_backend_info)(b.id(), 0, (&mut v as *mut u64).cast(), null_mut()) };
    expect(s, INVALID_POINTER, "NULL infoValueSize");
    let mut size = 8usize;
    // SAFETY: NULL ID is the case under test.
    let s =
        unsafe { (api().get_backend_info)(null_mut(), 0, (&mut v as *mut u64).cast(), &mut size) };
    expect(s, INVALID_ID, "NULL backend ID");
}

#[test]
fn backend_info_values_are_sensible() {
    let b = Backend::new();
    let id = b.id();
    assert_eq!(info_u64(id, 0), 1 << 32, "ONNXIFI version 1.0");
    assert!(!info_string(id, 1).is_empty(), "name");
    assert!(!info_string(id, 2).is_empty(), "vendor");
    let version = info_string(id, 3);
    assert!(
        !version.is_empty() && version.is_ascii(),
        "version {version:?}"
    );
    let ext = info_string(id, 4);
    assert!(
        ext.split(' ').any(|e| e == "onnx_extension_function"),
        "extensions {ext:?} must list onnx_extension_function"
    );
    assert!(!info_string(id, 5).is_empty(), "device");
    assert_eq!(info_u64(id, 6), 0x08, "device type CPU");
    let ir = info_string(id, 7);
    let irs: Vec<u64> = ir
        .split(' ')
        .map(|v| v.parse().expect("decimal IR version"))
        .collect();
    assert!(
        irs.contains(&8),
        "IR versions {ir:?} must include 8 (the examples use it)"
    );
    let opset = info_string(id, 8);
    let ai_onnx = opset
        .split(' ')
        .find_map(|t| {
            let (d, v) = t.split_once(':')?;
            (d == "ai.onnx" || d.is_empty()).then(|| v.parse::<u64>().expect("opset number"))
        })
        .unwrap_or_else(|| panic!("opsets {opset:?} lack ai.onnx"));
    assert!(ai_onnx >= 13, "opset {ai_onnx} < 13");
    let caps = info_u64(id, 10);
    assert!(caps & 0x01 != 0, "THREAD_SAFE expected (caps 0x{caps:x})");
    assert_eq!(caps & 0x20, 0, "a CPU is not hot-pluggable");
    if caps & 0x04 != 0 {
        assert!(
            caps & 0x02 != 0,
            "SYMBOLIC_SIZE_TENSORS implies SYMBOLIC_BATCH_SIZE"
        );
    }
    assert_eq!(
        info_u64(id, 11) & 0xFFFF_FFFF & !0x3,
        0,
        "init properties: only 1|2 standard"
    );
    assert_eq!(info_u64(id, 12), 0, "memory types: CPU only (0)");
    assert_eq!(info_u64(id, 14), 0, "synchronization types: EVENT only (0)");
    let mem = info_u64(id, 20);
    assert!(mem > 1 << 20, "memory size {mem}");
    assert!(info_u64(id, 21) > 0, "max graph size");
    assert!(info_u64(id, 22) > 0, "max graph count");
    assert!(info_u64(id, 30) > 0, "FP32 MAC/s of a CPU");
    assert!(info_u64(id, 35) > 0, "memory bandwidth");
}

// ---------------------------------------------------------------- onnxGetBackendCompatibility

#[test]
fn compatibility_statuses() {
    let b = Backend::new();
    let c = |bytes: &[u8]| {
        // SAFETY: a live slice.
        unsafe { (api().get_backend_compatibility)(b.id(), bytes.len(), bytes.as_ptr().cast()) }
    };
    expect(c(&model_bytes("small_cnn.onnx")), SUCCESS, "small CNN");
    expect(
        c(&model_bytes("small_cnn_noinit.onnx")),
        SUCCESS,
        "small CNN without weights",
    );
    expect(c(&model_bytes("add.onnx")), SUCCESS, "add");
    expect(
        c(b"\xff\xff\xff\xff garbage \x00\x01"),
        INVALID_PROTOBUF,
        "garbage",
    );
    expect(
        c(&model_bytes("invalid.onnx")),
        INVALID_MODEL,
        "undefined input",
    );
    expect(
        c(&model_bytes("custom_op.onnx")),
        UNSUPPORTED_OPERATOR,
        "unknown domain op",
    );
    // SAFETY: NULL model / zero size / NULL ID are the cases under test.
    unsafe {
        expect(
            (api().get_backend_compatibility)(b.id(), 10, null()),
            INVALID_POINTER,
            "NULL",
        );
        let m = model_bytes("add.onnx");
        expect(
            (api().get_backend_compatibility)(b.id(), 0, m.as_ptr().cast()),
            INVALID_SIZE,
            "size 0",
        );
        expect(
            (api().get_backend_compatibility)(null_mut(), m.len(), m.as_ptr().cast()),
            INVALID_ID,
            "NULL ID",
        );
    }
}

// ---------------------------------------------------------------- onnxInitBackend

fn init_backend_with(props: &[u64]) -> (i32, Handle) {
    let ids = backend_ids();
    let mut backend: Handle = 1usize as Handle;
    // SAFETY: props is terminated by the caller; valid out pointer.
    let s = unsafe { (api().init_backend)(ids[0], props.as_ptr(), &mut backend) };
    // SAFETY: cleanup of what this function made.
    unsafe {
        if s == SUCCESS {
            expect(
                (api().release_backend)(backend),
                SUCCESS,
                "onnxReleaseBackend",
            );
        }
        for id in ids {
            (api().release_backend_id)(id);
        }
    }
    (s, backend)
}

#[test]
fn init_backend_properties() {
    let (s, _) = init_backend_with(&[0]);
    expect(s, SUCCESS, "empty property list");
    let (s, _) = init_backend_with(&[BACKEND_PROPERTY_LOG_LEVEL, 3, 0]);
    expect(s, SUCCESS, "LOG_LEVEL WARNING");
    for level in [1, 2, 3, 4] {
        let (s, _) = init_backend_with(&[BACKEND_PROPERTY_LOG_LEVEL, level, 0]);
        expect(s, SUCCESS, &format!("LOG_LEVEL {level}"));
    }
    for opt in [0, 1, 2, 3] {
        let (s, _) = init_backend_with(&[BACKEND_PROPERTY_OPTIMIZATION, opt, 0]);
        expect(s, SUCCESS, &format!("OPTIMIZATION {opt}"));
    }
    let (s, _) = init_backend_with(&[
        BACKEND_PROPERTY_OPTIMIZATION,
        1,
        BACKEND_PROPERTY_LOG_LEVEL,
        4,
        0,
    ]);
    expect(s, SUCCESS, "two properties");
    let (s, h) = init_backend_with(&[0x1234, 1, 0]);
    expect(s, UNSUPPORTED_PROPERTY, "unknown key 0x1234");
    assert!(h.is_null(), "failed onnxInitBackend must store NULL");
    let (s, h) = init_backend_with(&[BACKEND_PROPERTY_OPTIMIZATION, 99, 0]);
    expect(s, INVALID_PROPERTY, "OPTIMIZATION 99");
    assert!(h.is_null(), "failed onnxInitBackend must store NULL");
    let (s, _) = init_backend_with(&[BACKEND_PROPERTY_LOG_LEVEL, 7, 0]);
    expect(s, INVALID_PROPERTY, "LOG_LEVEL 7");
}

#[test]
fn init_backend_cuda_stream_is_unsupported_unless_advertised() {
    let b = Backend::new();
    let props = info_u64(b.id(), 11);
    if props & BACKEND_CUDA_STREAM == 0 {
        let (s, _) = init_backend_with(&[BACKEND_CUDA_STREAM, 0x1000, 0]);
        expect(s, UNSUPPORTED_PROPERTY, "CUDA_STREAM on a CPU backend");
    }
}

#[test]
fn init_backend_null_out_and_bad_id() {
    let ids = backend_ids();
    // SAFETY: NULL out pointer / NULL ID are the cases under test.
    unsafe {
        expect(
            (api().init_backend)(ids[0], null(), null_mut()),
            INVALID_POINTER,
            "NULL out",
        );
        let mut h: Handle = 1usize as Handle;
        expect(
            (api().init_backend)(null_mut(), null(), &mut h),
            INVALID_ID,
            "NULL ID",
        );
        assert!(h.is_null(), "out handle must be NULL after failure");
        expect(
            (api().release_backend)(null_mut()),
            INVALID_BACKEND,
            "release NULL backend",
        );
        for id in ids {
            (api().release_backend_id)(id);
        }
    }
}

#[test]
fn stale_and_foreign_backends_are_invalid_backend() {
    isolated("stale_and_foreign_backends_are_invalid_backend", || {
        let ids = backend_ids();
        let mut backend = null_mut();
        let mut on_stack = [0u64; 8];
        let foreign: Handle = on_stack.as_mut_ptr().cast();
        // SAFETY: bogus handles are the case under test; out pointers are valid.
        unsafe {
            expect(
                (api().init_backend)(ids[0], null(), &mut backend),
                SUCCESS,
                "init",
            );
            expect((api().release_backend)(backend), SUCCESS, "release");
            let model = model_bytes("add.onnx");
            for (what, h) in [
                ("released", backend),
                ("stack", foreign),
                ("0xdeadbeef", bogus()),
            ] {
                expect((api().release_backend)(h), INVALID_BACKEND, what);
                let mut e: Handle = 1usize as Handle;
                expect((api().init_event)(h, &mut e), INVALID_BACKEND, what);
                assert!(e.is_null(), "{what}: onnxInitEvent failure must store NULL");
                let mut g: Handle = 1usize as Handle;
                let s = (api().init_graph)(
                    h,
                    null(),
                    model.len(),
                    model.as_ptr().cast(),
                    0,
                    null(),
                    &mut g,
                );
                expect(s, INVALID_BACKEND, what);
                assert!(g.is_null(), "{what}: onnxInitGraph failure must store NULL");
            }
            for id in ids {
                (api().release_backend_id)(id);
            }
        }
        assert_eq!(
            on_stack, [0u64; 8],
            "the library wrote into a foreign object"
        );
    });
}

// ---------------------------------------------------------------- events

#[test]
fn event_states_and_double_signal() {
    let b = Backend::new();
    let e = b.event();
    let mut st = 0;
    // SAFETY: e is a live event; out pointers valid.
    unsafe {
        expect((api().get_event_state)(e, &mut st), SUCCESS, "state");
        assert_eq!(st, EVENT_STATE_NONSIGNALLED, "a new event is non-signalled");
        expect((api().signal_event)(e), SUCCESS, "signal");
        expect((api().get_event_state)(e, &mut st), SUCCESS, "state");
        assert_eq!(st, EVENT_STATE_SIGNALLED);
        expect((api().signal_event)(e), INVALID_STATE, "second signal");
        expect((api().wait_event)(e), SUCCESS, "wait on a signalled event");
        expect(
            (api().get_event_state)(e, null_mut()),
            INVALID_POINTER,
            "NULL state",
        );
        expect((api().release_event)(e), SUCCESS, "release");
    }
}

#[test]
fn event_null_arguments() {
    let b = Backend::new();
    let mut st = EVENT_STATE_SIGNALLED;
    // SAFETY: NULL arguments are the cases under test.
    unsafe {
        expect(
            (api().init_event)(b.backend, null_mut()),
            INVALID_POINTER,
            "NULL out",
        );
        let mut e: Handle = 1usize as Handle;
        expect(
            (api().init_event)(null_mut(), &mut e),
            INVALID_BACKEND,
            "NULL backend",
        );
        assert!(e.is_null(), "failed onnxInitEvent must store NULL");
        expect(
            (api().signal_event)(null_mut()),
            INVALID_EVENT,
            "signal NULL",
        );
        expect((api().wait_event)(null_mut()), INVALID_EVENT, "wait NULL");
        expect(
            (api().release_event)(null_mut()),
            INVALID_EVENT,
            "release NULL",
        );
        expect(
            (api().get_event_state)(null_mut(), &mut st),
            INVALID_EVENT,
            "state NULL",
        );
        assert_eq!(
            st, EVENT_STATE_INVALID,
            "a failed onnxGetEventState stores INVALID"
        );
    }
}

#[test]
fn stale_and_foreign_events_are_invalid_event() {
    isolated("stale_and_foreign_events_are_invalid_event", || {
        let b = Backend::new();
        let e = b.event();
        let mut on_stack = [0u64; 8];
        let foreign: Handle = on_stack.as_mut_ptr().cast();
        // SAFETY: bogus handles are the case under test.
        unsafe {
            expect((api().release_event)(e), SUCCESS, "release");
            for (what, h) in [("released", e), ("stack", foreign), ("0xdeadbeef", bogus())] {
                let mut st = EVENT_STATE_SIGNALLED;
                expect((api().get_event_state)(h, &mut st), INVALID_EVENT, what);
                assert_eq!(st, EVENT_STATE_INVALID, "{what}: state after failure");
                expect((api().signal_event)(h), INVALID_EVENT, what);
                expect((api().wait_event)(h), INVALID_EVENT, what);
                expect((api().release_event)(h), INVALID_EVENT, what);
            }
        }
        assert_eq!(
            on_stack, [0u64; 8],
            "the library wrote into a foreign object"
        );
    });
}

// ---------------------------------------------------------------- onnxInitGraph

fn init_graph_raw(
    b: &Backend,
    props: *const u64,
    model: &[u8],
    weights: &[TensorDescriptor],
) -> (i32, Handle) {
    let mut g: Handle = 1usize as Handle;
    // SAFETY: live slices; the descriptors point at live buffers (or deliberately not).
    let s = unsafe {
        (api().init_graph)(
            b.backend,
            props,
            model.len(),
            model.as_ptr().cast(),
            weights.len() as u32,
            if weights.is_empty() {
                null()
            } else {
                weights.as_ptr()
            },
            &mut g,
        )
    };
    (s, g)
}

/// A copy of a model with its IR version and/or default-domain opset version replaced.
fn with_versions(model: &[u8], ir: Option<i64>, opset: Option<i64>) -> Vec<u8> {
    use prost::Message;
    let mut m = onnxifi_rust::model::decode(model).expect("a valid model");
    if ir.is_some() {
        m.ir_version = ir;
    }
    if let Some(v) = opset {
        for o in &mut m.opset_import {
            if o.domain.as_deref().unwrap_or("").is_empty() {
                o.version = Some(v);
            }
        }
    }
    m.encode_to_vec()
}

fn release_if(s: i32, g: Handle) {
    if s == SUCCESS {
        // SAFETY: a graph just created.
        expect(
            unsafe { (api().release_graph)(g) },
            SUCCESS,
            "onnxReleaseGraph",
        );
    }
}

#[test]
fn init_graph_statuses() {
    let b = Backend::new();
    let add = model_bytes("add.onnx");
    for (what, bytes, want) in [
        (
            "garbage",
            b"\x08\x07\x12\xff\xff\xff\xff\x0f garbage".to_vec(),
            INVALID_PROTOBUF,
        ),
        (
            "undefined input",
            model_bytes("invalid.onnx"),
            INVALID_MODEL,
        ),
        (
            "unknown domain op",
            model_bytes("custom_op.onnx"),
            UNSUPPORTED_OPERATOR,
        ),
        (
            "IR version newer than the backend knows",
            with_versions(&add, Some(1000), None),
            UNSUPPORTED_VERSION,
        ),
        (
            "operator set version newer than the backend knows",
            with_versions(&add, None, Some(9999)),
            UNSUPPORTED_VERSION,
        ),
    ] {
        let (s, g) = init_graph_raw(&b, null(), &bytes, &[]);
        expect(s, want, what);
        assert!(g.is_null(), "{what}: failed onnxInitGraph must store NULL");
        release_if(s, g);
    }
    let (s, g) = init_graph_raw(&b, [0u64].as_ptr(), &add, &[]);
    expect(s, SUCCESS, "empty graph property list");
    release_if(s, g);
    let (s, g) = init_graph_raw(&b, [0x1234u64, 1, 0].as_ptr(), &add, &[]);
    expect(s, UNSUPPORTED_PROPERTY, "unknown graph property");
    assert!(g.is_null());
    release_if(s, g);
    // SAFETY: NULL / empty arguments are the cases under test.
    unsafe {
        let mut g: Handle = 1usize as Handle;
        let s = (api().init_graph)(b.backend, null(), 10, null(), 0, null(), &mut g);
        expect(s, INVALID_POINTER, "NULL model");
        assert!(g.is_null());
        let s = (api().init_graph)(b.backend, null(), 0, add.as_ptr().cast(), 0, null(), &mut g);
        expect(s, INVALID_SIZE, "size 0");
        let s = (api().init_graph)(
            b.backend,
            null(),
            add.len(),
            add.as_ptr().cast(),
            0,
            null(),
            null_mut(),
        );
        expect(s, INVALID_POINTER, "NULL graph out");
        let s = (api().init_graph)(
            b.backend,
            null(),
            add.len(),
            add.as_ptr().cast(),
            2,
            null(),
            &mut g,
        );
        expect(s, INVALID_POINTER, "weightsCount 2 with NULL descriptors");
        let s = (api().init_graph)(
            null_mut(),
            null(),
            add.len(),
            add.as_ptr().cast(),
            0,
            null(),
            &mut g,
        );
        expect(s, INVALID_BACKEND, "NULL backend");
        expect(
            (api().release_graph)(null_mut()),
            INVALID_GRAPH,
            "release NULL graph",
        );
    }
}

/// The small CNN's weights as (name, shape, data), from the generated manifest.
fn cnn_weights() -> Vec<(std::ffi::CString, Vec<u64>, Vec<f32>)> {
    let text = std::fs::read_to_string(models().join("weights.txt")).expect("weights.txt");
    let blob = read_f32("weights.bin");
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let off: usize = f[2].parse::<usize>().expect("offset") / 4;
            let shape: Vec<u64> = f[3..].iter().map(|d| d.parse().expect("dim")).collect();
            let n = shape.iter().product::<u64>() as usize;
            (
                std::ffi::CString::new(f[0]).expect("name"),
                shape,
                blob[off..off + n].to_vec(),
            )
        })
        .collect()
}

/// Sets IO of the small CNN (batch `n`) and runs it once; returns the output.
fn run_cnn(b: &Backend, g: Handle, batch: usize) -> Vec<f32> {
    let mut x = deterministic_input(batch * 3 * 16 * 16);
    let mut y = vec![f32::NAN; batch * 10];
    let xs = [batch as u64, 3, 16, 16];
    let ys = [batch as u64, 10];
    let i = f32_descriptor(c"input", &xs, &mut x);
    let o = f32_descriptor(c"probs", &ys, &mut y);
    // SAFETY: descriptors over live buffers.
    expect(
        unsafe { (api().set_graph_io)(g, 1, &i, 1, &o) },
        SUCCESS,
        "onnxSetGraphIO",
    );
    let (s, w) = run_once(b, g);
    expect(s, SUCCESS, "onnxRunGraph");
    expect(w.expect("ran"), SUCCESS, "onnxWaitEvent");
    y
}

#[test]
fn small_cnn_matches_onnxruntime() {
    let b = Backend::new();
    let g = b.graph(&model_bytes("small_cnn.onnx"));
    let want = read_f32("small_cnn.b1.out.bin");
    for _ in 0..3 {
        assert_close(&run_cnn(&b, g.0, 1), &want, "small CNN");
    }
}

#[test]
fn weight_descriptors_give_the_same_output() {
    let b = Backend::new();
    let model = model_bytes("small_cnn_noinit.onnx");
    let g = {
        // Copies that are scribbled over and freed right after onnxInitGraph.
        let mut weights = cnn_weights();
        let descs: Vec<TensorDescriptor> = weights
            .iter_mut()
            .map(|(n, s, d)| f32_descriptor(n, s, d))
            .collect();
        let (s, g) = init_graph_raw(&b, null(), &model, &descs);
        expect(s, SUCCESS, "onnxInitGraph with weight descriptors");
        for (_, shape, data) in weights.iter_mut() {
            data.iter_mut().for_each(|v| *v = f32::NAN);
            shape.iter_mut().for_each(|d| *d = 0);
        }
        Graph(g)
    };
    assert_close(
        &run_cnn(&b, g.0, 1),
        &read_f32("small_cnn.b1.out.bin"),
        "weights path",
    );
}

#[test]
fn weight_descriptors_and_initializers_together_are_invalid_model() {
    let b = Backend::new();
    let mut weights = cnn_weights();
    let descs: Vec<TensorDescriptor> = weights
        .iter_mut()
        .map(|(n, s, d)| f32_descriptor(n, s, d))
        .collect();
    let (s, g) = init_graph_raw(&b, null(), &model_bytes("small_cnn.onnx"), &descs);
    expect(s, INVALID_MODEL, "initializers and weight descriptors");
    assert!(g.is_null());
    release_if(s, g);
}

#[test]
fn bad_weight_descriptors() {
    let b = Backend::new();
    let model = model_bytes("small_cnn_noinit.onnx");
    static ZERO_DIM: [u64; 4] = [0, 3, 3, 3];
    type Mutate = fn(&mut TensorDescriptor);
    let cases: [(&str, Mutate, i32); 7] = [
        ("zero dim", |d| d.shape = ZERO_DIM.as_ptr(), INVALID_SHAPE),
        ("type 999", |d| d.data_type = 999, INVALID_DATATYPE),
        // ONNX type 8 (string) has no byte layout in a caller's buffer.
        ("string type", |d| d.data_type = 8, UNSUPPORTED_DATATYPE),
        (
            "memory type 999",
            |d| d.memory_type = 999,
            INVALID_MEMORY_TYPE,
        ),
        ("NULL buffer", |d| d.buffer = 0, INVALID_MEMORY_LOCATION),
        (
            "CUDA memory",
            |d| d.memory_type = MEMORY_TYPE_CUDA_BUFFER,
            UNSUPPORTED_MEMORY_TYPE,
        ),
        ("bad tag", |d| d.tag = 0x1234, UNSUPPORTED_TAG),
    ];
    for (what, mutate, want) in cases {
        let mut weights = cnn_weights();
        let mut descs: Vec<TensorDescriptor> = weights
            .iter_mut()
            .map(|(n, s, d)| f32_descriptor(n, s, d))
            .collect();
        mutate(&mut descs[0]); // conv1_w, shape [8,3,3,3]
        let (s, g) = init_graph_raw(&b, null(), &model, &descs);
        expect(s, want, what);
        assert!(g.is_null(), "{what}: NULL graph after failure");
        release_if(s, g);
    }
}

// ---------------------------------------------------------------- onnxSetGraphIO

/// The add model's buffers: A[i] = i, B[i] = 10 i, Y = NaN.
struct AddIo {
    a: Vec<f32>,
    b: Vec<f32>,
    y: Vec<f32>,
}

const S23: [u64; 2] = [2, 3];

impl AddIo {
    fn new() -> Self {
        AddIo {
            a: (0..6).map(|i| i as f32).collect(),
            b: (0..6).map(|i| 10.0 * i as f32).collect(),
            y: vec![f32::NAN; 6],
        }
    }
    fn inputs(&mut self) -> [TensorDescriptor; 2] {
        [
            f32_descriptor(c"A", &S23, &mut self.a),
            f32_descriptor(c"B", &S23, &mut self.b),
        ]
    }
    fn output(&mut self) -> TensorDescriptor {
        f32_descriptor(c"Y", &S23, &mut self.y)
    }
    fn expected() -> Vec<f32> {
        (0..6).map(|i| 11.0 * i as f32).collect()
    }
}

fn set_io(g: Handle, inputs: &[TensorDescriptor], outputs: &[TensorDescriptor]) -> i32 {
    // SAFETY: descriptor arrays of the given lengths (contents may be deliberately invalid).
    unsafe {
        (api().set_graph_io)(
            g,
            inputs.len() as u32,
            if inputs.is_empty() {
                null()
            } else {
                inputs.as_ptr()
            },
            outputs.len() as u32,
            outputs.as_ptr(),
        )
    }
}

#[test]
fn add_model_runs_and_matches_hand_computed_values() {
    let b = Backend::new();
    let g = b.graph(&model_bytes("add.onnx"));
    let mut io = AddIo::new();
    expect(set_io(g.0, &io.inputs(), &[io.output()]), SUCCESS, "set IO");
    let (s, w) = run_once(&b, g.0);
    expect(s, SUCCESS, "run");
    expect(w.expect("ran"), SUCCESS, "wait");
    assert_close(&io.y, &AddIo::expected(), "A + B");
    // Input order must not matter.
    let [a, bb] = io.inputs();
    io.y.fill(f32::NAN);
    let out = io.output();
    expect(
        set_io(g.0, &[bb, a], &[out]),
        SUCCESS,
        "set IO, inputs reversed",
    );
    let (s, w) = run_once(&b, g.0);
    expect(s, SUCCESS, "run");
    expect(w.expect("ran"), SUCCESS, "wait");
    assert_close(&io.y, &AddIo::expected(), "A + B (reversed descriptors)");
}

#[test]
fn run_before_set_io_is_unidentified_name() {
    let b = Backend::new();
    let g = b.graph(&model_bytes("add.onnx"));
    let (s, _) = run_once(&b, g.0);
    expect(s, UNIDENTIFIED_NAME, "run without onnxSetGraphIO");
}

#[test]
fn failed_set_io_drops_the_previous_binding() {
    let b = Backend::new();
    let g = b.graph(&model_bytes("add.onnx"));
    let mut io = AddIo::new();
    expect(set_io(g.0, &io.inputs(), &[io.output()]), SUCCESS, "set IO");
    let mut bad = io.inputs();
    bad[1].name = c"nosuch".as_ptr();
    expect(
        set_io(g.0, &bad, &[io.output()]),
        INVALID_NAME,
        "bad set IO",
    );
    let (s, _) = run_once(&b, g.0);
    expect(s, UNIDENTIFIED_NAME, "run after a failed onnxSetGraphIO");
    expect(
        set_io(g.0, &io.inputs(), &[io.output()]),
        SUCCESS,
        "set IO again",
    );
    let (s, w) = run_once(&b, g.0);
    expect(s, SUCCESS, "run");
    expect(w.expect("ran"), SUCCESS, "wait");
    assert_close(&io.y, &AddIo::expected(), "A + B after rebinding");
}

#[test]
fn set_io_descriptor_errors() {
    let b = Backend::new();
    let g = b.graph(&model_bytes("add.onnx"));
    let mut io = AddIo::new();
    let ok_in = io.inputs();
    let ok_out = io.output();
    static S32: [u64; 2] = [3, 2];
    static S6: [u64; 1] = [6];
    static S03: [u64; 2] = [0, 3];
    type Mutate = Box<dyn Fn(&mut [TensorDescriptor; 2], &mut TensorDescriptor)>;
    let cases: Vec<(&str, Mutate, i32)> = vec![
        (
            "unknown input name",
            Box::new(|i, _| i[1].name = c"C".as_ptr()),
            INVALID_NAME,
        ),
        (
            "duplicated input name",
            Box::new(|i, _| i[1].name = c"A".as_ptr()),
            INVALID_NAME,
        ),
        (
            "unknown output name",
            Box::new(|_, o| o.name = c"Z".as_ptr()),
            INVALID_NAME,
        ),
        (
            // Found by the tensor_descriptors fuzz target: the roles were swapped, so the
            // backend would have written the caller's input buffer.
            "an input descriptor naming the output and the output descriptor naming an input",
            Box::new(|i, o| {
                i[1].name = c"Y".as_ptr();
                o.name = c"B".as_ptr();
            }),
            INVALID_NAME,
        ),
        (
            "wrong shape",
            Box::new(|i, _| i[0].shape = S32.as_ptr()),
            MISMATCHING_SHAPE,
        ),
        (
            "wrong rank",
            Box::new(|i, _| {
                i[0].dimensions = 1;
                i[0].shape = S6.as_ptr();
            }),
            MISMATCHING_SHAPE,
        ),
        (
            "wrong output shape",
            Box::new(|_, o| o.shape = S32.as_ptr()),
            MISMATCHING_SHAPE,
        ),
        (
            "INT32 for float",
            Box::new(|i, _| i[0].data_type = DATATYPE_INT32),
            MISMATCHING_DATATYPE,
        ),
        (
            "type 999",
            Box::new(|i, _| i[0].data_type = 999),
            INVALID_DATATYPE,
        ),
        (
            "zero dim",
            Box::new(|i, _| i[0].shape = S03.as_ptr()),
            INVALID_SHAPE,
        ),
        (
            "NULL buffer",
            Box::new(|i, _| i[0].buffer = 0),
            INVALID_MEMORY_LOCATION,
        ),
        (
            "NULL output buffer",
            Box::new(|_, o| o.buffer = 0),
            INVALID_MEMORY_LOCATION,
        ),
        (
            "memory type 999",
            Box::new(|i, _| i[0].memory_type = 999),
            INVALID_MEMORY_TYPE,
        ),
        (
            "CUDA memory",
            Box::new(|i, _| i[0].memory_type = MEMORY_TYPE_CUDA_BUFFER),
            UNSUPPORTED_MEMORY_TYPE,
        ),
        (
            "bad input tag",
            Box::new(|i, _| i[0].tag = 0x1234),
            UNSUPPORTED_TAG,
        ),
        (
            "bad output tag",
            Box::new(|_, o| o.tag = 0),
            UNSUPPORTED_TAG,
        ),
    ];
    for (what, mutate, want) in cases {
        let mut i = ok_in;
        let mut o = ok_out;
        mutate(&mut i, &mut o);
        expect(set_io(g.0, &i, &[o]), want, what);
    }
    expect(
        set_io(g.0, &ok_in[..1], &[ok_out]),
        UNIDENTIFIED_NAME,
        "missing input B",
    );
    // "outputsCount must be greater than zero" names no status: INVALID_SIZE (a bad count) or
    // UNIDENTIFIED_NAME (the graph output has no descriptor) are both readings of the header.
    let s = set_io(g.0, &ok_in, &[]);
    assert!(
        s == INVALID_SIZE || s == UNIDENTIFIED_NAME,
        "no outputs: got {}",
        status::name(s)
    );
    // SAFETY: NULL arrays / NULL graph are the cases under test.
    unsafe {
        expect(
            (api().set_graph_io)(g.0, 2, ok_in.as_ptr(), 1, null()),
            INVALID_POINTER,
            "NULL outputs",
        );
        expect(
            (api().set_graph_io)(g.0, 2, null(), 1, &ok_out),
            INVALID_POINTER,
            "NULL inputs, count 2",
        );
        expect(
            (api().set_graph_io)(null_mut(), 2, ok_in.as_ptr(), 1, &ok_out),
            INVALID_GRAPH,
            "NULL graph",
        );
    }
    // After all that, a correct binding still works.
    expect(set_io(g.0, &ok_in, &[ok_out]), SUCCESS, "good set IO");
    let (s, w) = run_once(&b, g.0);
    expect(s, SUCCESS, "run");
    expect(w.expect("ran"), SUCCESS, "wait");
    assert_close(&io.y, &AddIo::expected(), "A + B");
}

// ---------------------------------------------------------------- onnxRunGraph

#[test]
fn run_graph_fence_errors() {
    let b = Backend::new();
    let g = b.graph(&model_bytes("add.onnx"));
    let mut io = AddIo::new();
    expect(set_io(g.0, &io.inputs(), &[io.output()]), SUCCESS, "set IO");
    let input = b.event();
    let good_in = MemoryFence::event(input);
    let cases: [(&str, MemoryFence, MemoryFence, i32); 6] = [
        (
            "bad input tag",
            MemoryFence { tag: 7, ..good_in },
            MemoryFence::event(null_mut()),
            UNSUPPORTED_TAG,
        ),
        (
            "bad output tag",
            good_in,
            MemoryFence {
                tag: 7,
                ..MemoryFence::event(null_mut())
            },
            UNSUPPORTED_TAG,
        ),
        (
            "input fence type 99",
            MemoryFence {
                fence_type: 99,
                ..good_in
            },
            MemoryFence::event(null_mut()),
            INVALID_FENCE_TYPE,
        ),
        (
            "output fence type 99",
            good_in,
            MemoryFence {
                fence_type: 99,
                ..MemoryFence::event(null_mut())
            },
            INVALID_FENCE_TYPE,
        ),
        (
            "IMPLICIT fence",
            MemoryFence {
                fence_type: SYNCHRONIZATION_IMPLICIT,
                ..good_in
            },
            MemoryFence::event(null_mut()),
            UNSUPPORTED_FENCE_TYPE,
        ),
        (
            "NULL input event",
            MemoryFence::event(null_mut()),
            MemoryFence::event(null_mut()),
            INVALID_EVENT,
        ),
    ];
    for (what, inf, mut outf, want) in cases {
        // SAFETY: fences are valid structs (with deliberately bad contents).
        let s = unsafe { (api().run_graph)(g.0, &inf, &mut outf) };
        expect(s, want, what);
    }
    let mut outf = MemoryFence::event(null_mut());
    // SAFETY: NULL fences / NULL graph are the cases under test.
    unsafe {
        expect(
            (api().run_graph)(g.0, null(), &mut outf),
            INVALID_POINTER,
            "NULL input fence",
        );
        expect(
            (api().run_graph)(g.0, &good_in, null_mut()),
            INVALID_POINTER,
            "NULL output",
        );
        expect(
            (api().run_graph)(null_mut(), &good_in, &mut outf),
            INVALID_GRAPH,
            "NULL graph",
        );
        expect((api().release_event)(input), SUCCESS, "release input");
    }
}

#[test]
fn run_does_not_block_on_the_input_fence_and_reads_inputs_late() {
    let b = Backend::new();
    let g = b.graph(&model_bytes("add.onnx"));
    let mut io = AddIo::new();
    expect(set_io(g.0, &io.inputs(), &[io.output()]), SUCCESS, "set IO");
    let real_a = io.a.clone();
    io.a.fill(-1000.0);
    let input = b.event();
    let junk = 0x1234usize as Handle;
    let (g_addr, in_addr) = (g.0 as usize, input as usize);
    let (s, out_addr) = with_timeout(LONG, "onnxRunGraph with an unsignalled input", move || {
        let inf = MemoryFence::event(in_addr as Handle);
        let mut outf = MemoryFence::event(0x1234usize as Handle);
        // SAFETY: valid graph and fences (the caller keeps the graph alive; it waits for us).
        let s = unsafe { (api().run_graph)(g_addr as Handle, &inf, &mut outf) };
        (s, outf.event as usize)
    });
    expect(s, SUCCESS, "run");
    let outf = MemoryFence::event(out_addr as Handle);
    assert!(
        outf.event != junk && !outf.event.is_null(),
        "output event must be overwritten"
    );
    let mut st = 0;
    // SAFETY: live events and buffers.
    unsafe {
        expect(
            (api().get_event_state)(outf.event, &mut st),
            SUCCESS,
            "state",
        );
        assert_eq!(
            st, EVENT_STATE_NONSIGNALLED,
            "output signalled before the input was"
        );
        io.a.copy_from_slice(&real_a); // inputs become valid only now
        expect((api().signal_event)(input), SUCCESS, "signal input");
        // The caller may release its input event as soon as it is signalled.
        expect((api().release_event)(input), SUCCESS, "release input");
        expect((api().wait_event)(outf.event), SUCCESS, "wait");
        expect(
            (api().get_event_state)(outf.event, &mut st),
            SUCCESS,
            "state",
        );
        assert_eq!(st, EVENT_STATE_SIGNALLED);
        expect(
            (api().signal_event)(outf.event),
            INVALID_STATE,
            "signal a signalled output",
        );
        expect((api().release_event)(outf.event), SUCCESS, "release output");
    }
    assert_close(
        &io.y,
        &AddIo::expected(),
        "inputs written after onnxRunGraph returned",
    );
}

#[test]
fn stale_and_foreign_graphs_are_invalid_graph() {
    isolated("stale_and_foreign_graphs_are_invalid_graph", || {
        let b = Backend::new();
        let g = b.graph(&model_bytes("add.onnx"));
        let released = g.0;
        std::mem::forget(g);
        let mut on_stack = [0u64; 8];
        let foreign: Handle = on_stack.as_mut_ptr().cast();
        let mut io = AddIo::new();
        let input = b.event();
        // SAFETY: bogus handles are the case under test.
        unsafe {
            expect((api().release_graph)(released), SUCCESS, "release");
            for (what, h) in [
                ("released", released),
                ("stack", foreign),
                ("0xdeadbeef", bogus()),
            ] {
                expect(set_io(h, &io.inputs(), &[io.output()]), INVALID_GRAPH, what);
                let inf = MemoryFence::event(input);
                let mut outf = MemoryFence::event(null_mut());
                expect((api().run_graph)(h, &inf, &mut outf), INVALID_GRAPH, what);
                expect((api().release_graph)(h), INVALID_GRAPH, what);
            }
            (api().release_event)(input);
        }
        assert_eq!(
            on_stack, [0u64; 8],
            "the library wrote into a foreign object"
        );
    });
}

// ---------------------------------------------------------------- extensions

#[test]
fn extension_lookup_both_spellings_and_unknown_name() {
    let b = Backend::new();
    for name in [
        c"onnxSetIOAndRunGraph",
        c"onnxSetIOAndRunGraphFunction",
        c"onnxWaitEventFor",
        c"onnxWaitEventForFunction",
    ] {
        extension(&b, name);
    }
    let mut f: ExtensionFunctionPointer = Some(dummy);
    // SAFETY: valid ID/name/out pointer.
    let s = unsafe {
        (api().get_extension_function_address)(b.id(), c"onnxNoSuchThing".as_ptr(), &mut f)
    };
    expect(s, UNIDENTIFIED_NAME, "unknown extension");
    assert!(f.is_none(), "*function must be NULL after failure");
    f = Some(dummy);
    // SAFETY: NULL arguments / ID are the cases under test.
    unsafe {
        let s = (api().get_extension_function_address)(b.id(), null(), &mut f);
        expect(s, INVALID_POINTER, "NULL name");
        assert!(f.is_none());
        let s = (api().get_extension_function_address)(
            b.id(),
            c"onnxSetIOAndRunGraph".as_ptr(),
            null_mut(),
        );
        expect(s, INVALID_POINTER, "NULL out");
        f = Some(dummy);
        let s = (api().get_extension_function_address)(
            null_mut(),
            c"onnxSetIOAndRunGraph".as_ptr(),
            &mut f,
        );
        expect(s, INVALID_ID, "NULL ID");
        assert!(f.is_none());
    }
}

extern "C" fn dummy() -> i32 {
    -1
}

#[test]
fn set_io_and_run_graph_extension_runs_the_small_cnn() {
    let b = Backend::new();
    let g = b.graph(&model_bytes("small_cnn.onnx"));
    let want = read_f32("small_cnn.b1.out.bin");
    for name in [c"onnxSetIOAndRunGraph", c"onnxSetIOAndRunGraphFunction"] {
        let f = extension(&b, name).expect("checked");
        // SAFETY: the documented onnx signature of onnxSetIOAndRunGraph.
        let f: SetIoAndRunGraphFn = unsafe { std::mem::transmute(f) };
        let mut x = deterministic_input(3 * 16 * 16);
        let mut y = vec![f32::NAN; 10];
        let xs = [1u64, 3, 16, 16];
        let ys = [1u64, 10];
        let i = f32_descriptor(c"input", &xs, &mut x);
        let o = f32_descriptor(c"probs", &ys, &mut y);
        let mut fence = MemoryFence::event(null_mut());
        // SAFETY: live descriptors and fence.
        unsafe {
            expect(
                f(g.0, 1, &i, 1, &o, &mut fence),
                SUCCESS,
                "onnxSetIOAndRunGraph",
            );
            assert!(!fence.event.is_null());
            expect((api().wait_event)(fence.event), SUCCESS, "wait");
            expect((api().release_event)(fence.event), SUCCESS, "release");
        }
        assert_close(&y, &want, "onnxSetIOAndRunGraph");
        let mut bad = i;
        bad.name = c"nope".as_ptr();
        let mut fence = MemoryFence::event(null_mut());
        // SAFETY: as above, with a bad name.
        let s = unsafe { f(g.0, 1, &bad, 1, &o, &mut fence) };
        expect(s, INVALID_NAME, "onnxSetIOAndRunGraph bad name");
    }
}

#[test]
fn wait_event_for_times_out_then_signals() {
    let b = Backend::new();
    let wait_for = wait_event_for(&b);
    let g = b.graph(&model_bytes("add.onnx"));
    let mut io = AddIo::new();
    expect(set_io(g.0, &io.inputs(), &[io.output()]), SUCCESS, "set IO");
    let input = b.event();
    let inf = MemoryFence::event(input);
    let mut outf = MemoryFence::event(null_mut());
    // SAFETY: live graph, fences.
    expect(
        unsafe { (api().run_graph)(g.0, &inf, &mut outf) },
        SUCCESS,
        "run",
    );
    let t = Instant::now();
    let w = call_wait_for(wait_for, input, 150);
    assert!(
        t.elapsed() >= Duration::from_millis(140),
        "returned after {:?}",
        t.elapsed()
    );
    expect(w.ret, SUCCESS, "onnxWaitEventFor on a timeout");
    assert_eq!(w.state, EVENT_STATE_NONSIGNALLED, "{w:?}");
    let w = call_wait_for(wait_for, outf.event, 100);
    expect(w.ret, SUCCESS, "onnxWaitEventFor output, timeout");
    assert_eq!(
        w.state, EVENT_STATE_NONSIGNALLED,
        "output before input signalled: {w:?}"
    );
    // SAFETY: live events.
    unsafe { expect((api().signal_event)(input), SUCCESS, "signal") };
    let w = call_wait_for(wait_for, input, 1000);
    assert_eq!(
        (w.ret, w.state, w.status),
        (SUCCESS, EVENT_STATE_SIGNALLED, SUCCESS),
        "{w:?}"
    );
    let w = call_wait_for(wait_for, outf.event, 30_000);
    assert_eq!(
        (w.ret, w.state, w.status),
        (SUCCESS, EVENT_STATE_SIGNALLED, SUCCESS),
        "{w:?}"
    );
    let w = call_wait_for(wait_for, null_mut(), 10);
    expect(w.ret, INVALID_EVENT, "onnxWaitEventFor(NULL)");
    // SAFETY: released once.
    unsafe {
        (api().release_event)(input);
        (api().release_event)(outf.event);
    }
    assert_close(&io.y, &AddIo::expected(), "A + B");
}

#[test]
fn failing_run_reports_its_status_through_the_output_event() {
    let b = Backend::new();
    let wait_for = wait_event_for(&b);
    let g = b.graph(&model_bytes("reshape.onnx"));
    let mut x: Vec<f32> = (0..6).map(|i| i as f32 + 0.5).collect();
    let mut y = vec![f32::NAN; 6];
    let mut shape = [3i64, 2];
    let xs = [2u64, 3];
    let ss = [2u64];
    let ys = [3u64, 2];
    let ins = [
        f32_descriptor(c"X", &xs, &mut x),
        descriptor(c"S", DATATYPE_INT64, &ss, shape.as_mut_ptr().cast()),
    ];
    let out = [f32_descriptor(c"Y", &ys, &mut y)];
    expect(set_io(g.0, &ins, &out), SUCCESS, "set IO");
    // A good run first: Reshape keeps the data.
    let (s, w) = run_once(&b, g.0);
    expect(s, SUCCESS, "run");
    expect(w.expect("ran"), SUCCESS, "good reshape");
    assert_close(&y, &x, "reshape");
    // Now the shape input asks for 25 elements out of 6: the run itself must fail.
    shape.copy_from_slice(&[5, 5]);
    let (s, w) = run_once(&b, g.0);
    expect(
        s,
        SUCCESS,
        "onnxRunGraph is asynchronous: it accepts the run",
    );
    let w = w.expect("ran");
    assert_ne!(
        w,
        SUCCESS,
        "onnxWaitEvent must report the failed run, got {}",
        status::name(w)
    );
    // The same through onnxWaitEventFor, with a message.
    let input = b.event();
    let inf = MemoryFence::event(input);
    let mut outf = MemoryFence::event(null_mut());
    // SAFETY: live graph, fences and events.
    unsafe {
        expect((api().run_graph)(g.0, &inf, &mut outf), SUCCESS, "run");
        expect((api().signal_event)(input), SUCCESS, "signal");
    }
    let r = call_wait_for(wait_for, outf.event, 30_000);
    expect(
        r.ret,
        SUCCESS,
        "onnxWaitEventFor returns SUCCESS for a signalled event",
    );
    assert_eq!(r.state, EVENT_STATE_SIGNALLED, "{r:?}");
    assert_eq!(
        r.status, w,
        "onnxWaitEventFor and onnxWaitEvent disagree: {r:?}"
    );
    assert!(
        !r.message.is_empty(),
        "a failed run should carry a message: {r:?}"
    );
    assert!(
        r.message_length == r.message.len() + 1 || r.message_length == r.message.len(),
        "messageLength must be the used size: {r:?}"
    );
    // SAFETY: released once.
    unsafe {
        (api().release_event)(input);
        (api().release_event)(outf.event);
    }
}

#[test]
fn release_graph_blocks_until_the_pending_run_finishes() {
    let b = Backend::new();
    let g = b.graph(&model_bytes("small_cnn.onnx"));
    let mut x = vec![0f32; 3 * 16 * 16];
    let mut y = vec![f32::NAN; 10];
    let xs = [1u64, 3, 16, 16];
    let ys = [1u64, 10];
    let i = f32_descriptor(c"input", &xs, &mut x);
    let o = f32_descriptor(c"probs", &ys, &mut y);
    expect(set_io(g.0, &[i], &[o]), SUCCESS, "set IO");
    let input = b.event();
    let inf = MemoryFence::event(input);
    let mut outf = MemoryFence::event(null_mut());
    // SAFETY: live graph and fences.
    expect(
        unsafe { (api().run_graph)(g.0, &inf, &mut outf) },
        SUCCESS,
        "run",
    );
    let n = x.len();
    x.copy_from_slice(&deterministic_input(n));
    let input_addr = input as usize;
    let signaller = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        // SAFETY: the input event stays alive until this thread is joined.
        unsafe { (api().signal_event)(input_addr as Handle) }
    });
    let graph = g.0 as usize;
    std::mem::forget(g);
    let t = Instant::now();
    let s = with_timeout(LONG, "onnxReleaseGraph with a pending run", move || {
        // SAFETY: a live graph, released once.
        unsafe { (api().release_graph)(graph as Handle) }
    });
    let took = t.elapsed();
    expect(s, SUCCESS, "onnxReleaseGraph");
    expect(
        signaller.join().expect("thread"),
        SUCCESS,
        "signal from another thread",
    );
    assert!(
        took >= Duration::from_millis(250),
        "release returned after {took:?}, before the run"
    );
    let mut st = 0;
    // SAFETY: the output event outlives its graph until the caller releases it.
    unsafe {
        expect(
            (api().get_event_state)(outf.event, &mut st),
            SUCCESS,
            "output state",
        );
        assert_eq!(
            st, EVENT_STATE_SIGNALLED,
            "run finished before release returned"
        );
        expect((api().wait_event)(outf.event), SUCCESS, "wait");
        (api().release_event)(outf.event);
        (api().release_event)(input);
    }
    assert_close(
        &y,
        &read_f32("small_cnn.b1.out.bin"),
        "output of the run finished by release",
    );
}

#[test]
fn many_graphs_run_concurrently_from_several_threads() {
    let b = std::sync::Arc::new(Backend::new());
    let model = std::sync::Arc::new(model_bytes("small_cnn_dynamic.onnx"));
    let wants: Vec<Vec<f32>> = (1..=3)
        .map(|n| read_f32(&format!("small_cnn.b{n}.out.bin")))
        .collect();
    let wants = std::sync::Arc::new(wants);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (b, model, wants) = (b.clone(), model.clone(), wants.clone());
            std::thread::spawn(move || {
                let g = b.graph(&model);
                for r in 0..8 {
                    let batch = 1 + (t + r) % 3;
                    let y = run_cnn(&b, g.0, batch);
                    assert_close(
                        &y,
                        &wants[batch - 1],
                        &format!("thread {t} run {r} batch {batch}"),
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("worker thread");
    }
}

#[test]
fn handles_are_distinct() {
    let b = Backend::new();
    let e1 = b.event();
    let e2 = b.event();
    assert_ne!(e1, e2);
    let g1 = b.graph(&model_bytes("add.onnx"));
    let g2 = b.graph(&model_bytes("add.onnx"));
    assert_ne!(g1.0, g2.0);
    // SAFETY: released once.
    unsafe {
        (api().release_event)(e1);
        (api().release_event)(e2);
    }
}

// ---------------------------------------------------------------- races at the boundary

/// `onnxRunGraph` racing `onnxReleaseGraph` from another thread: the run is either refused
/// with INVALID_GRAPH, or it has finished writing the caller's buffer when the release returns.
/// (Before the queue was closed under its lock, a run could be queued after the release drained
/// an empty queue and write into a buffer the caller had already reused.)
#[test]
fn run_racing_release_graph_is_refused_or_finished_before_release_returns() {
    let b = Backend::new();
    let model = model_bytes("add.onnx");
    let ready = b.event();
    // SAFETY: our event.
    expect(unsafe { (api().signal_event)(ready) }, SUCCESS, "signal");
    let ready_addr = ready as usize;
    let (mut refused, mut finished) = (0, 0);
    for round in 0..300 {
        let mut g = b.graph(&model);
        let mut io = AddIo::new();
        expect(set_io(g.0, &io.inputs(), &[io.output()]), SUCCESS, "set IO");
        let graph = g.0 as usize;
        g.0 = null_mut(); // released below, by hand
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let b2 = barrier.clone();
        let runner = std::thread::spawn(move || {
            let inf = MemoryFence::event(ready_addr as Handle);
            let mut outf = MemoryFence::event(null_mut());
            b2.wait();
            // SAFETY: a graph handle that may be released concurrently (the case under test).
            let s = unsafe { (api().run_graph)(graph as Handle, &inf, &mut outf) };
            (s, outf.event as usize)
        });
        barrier.wait();
        // SAFETY: a live graph, released once.
        expect(
            unsafe { (api().release_graph)(graph as Handle) },
            SUCCESS,
            "release",
        );
        // The caller now owns its buffer again and reuses it.
        let y_ptr = io.y.as_mut_ptr();
        // SAFETY: our buffer; a correct library no longer touches it.
        unsafe { std::ptr::write_volatile(y_ptr, -1.0) };
        let (s, event) = runner.join().expect("runner thread");
        match s {
            INVALID_GRAPH => refused += 1,
            SUCCESS => {
                finished += 1;
                let mut st = 0;
                // SAFETY: the output event the run made.
                unsafe {
                    expect(
                        (api().get_event_state)(event as Handle, &mut st),
                        SUCCESS,
                        "state",
                    );
                    expect((api().wait_event)(event as Handle), SUCCESS, "wait");
                    (api().release_event)(event as Handle);
                }
                assert_eq!(st, EVENT_STATE_SIGNALLED, "round {round}: run not finished");
            }
            other => panic!("round {round}: onnxRunGraph answered {}", name(other)),
        }
        // SAFETY: our buffer.
        let y0 = unsafe { std::ptr::read_volatile(y_ptr) };
        assert_eq!(y0, -1.0, "round {round}: the run wrote after the release");
    }
    eprintln!("run/release race: {finished} runs finished before the release, {refused} refused");
    // SAFETY: released once.
    unsafe { (api().release_event)(ready) };
}

/// `onnxSignalEvent` on an output event made by `onnxRunGraph` is INVALID_STATE: only the run
/// signals it, after writing the outputs, so a downstream run never reads a half-written buffer.
#[test]
fn signalling_a_runs_output_event_is_invalid_state() {
    let b = Backend::new();
    let g = b.graph(&model_bytes("add.onnx"));
    let mut io = AddIo::new();
    expect(set_io(g.0, &io.inputs(), &[io.output()]), SUCCESS, "set IO");
    let input = b.event();
    let inf = MemoryFence::event(input);
    let mut outf = MemoryFence::event(null_mut());
    // SAFETY: live graph and fences; our events, released once.
    unsafe {
        expect((api().run_graph)(g.0, &inf, &mut outf), SUCCESS, "run");
        expect(
            (api().signal_event)(outf.event),
            INVALID_STATE,
            "caller signals the run's output event",
        );
        let mut st = 0;
        expect(
            (api().get_event_state)(outf.event, &mut st),
            SUCCESS,
            "state",
        );
        assert_eq!(
            st, EVENT_STATE_NONSIGNALLED,
            "the refused signal changed nothing"
        );
        expect((api().signal_event)(input), SUCCESS, "signal input");
        expect((api().wait_event)(outf.event), SUCCESS, "wait");
        expect(
            (api().signal_event)(outf.event),
            INVALID_STATE,
            "signal after the run",
        );
        (api().release_event)(outf.event);
        (api().release_event)(input);
    }
    assert_close(&io.y, &AddIo::expected(), "A + B");
}
