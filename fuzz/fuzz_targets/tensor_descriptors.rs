//! Fuzz target: tensor descriptors and memory fences with fuzzed fields, through the C ABI.
//!
//! Two graphs are made once, `C = Add(A, B)` on `float[2,3]` and on `float[N,3]`. Each exec
//! builds a few rounds of input/output descriptor arrays whose tag, name (from a table of good
//! and bad names, or NULL), data type, memory type, rank, shape pointer and dimensions are
//! fuzzed, calls `onnxSetGraphIO` (and sometimes `onnxGetOutputShapesRUST`), then
//! `onnxRunGraph` with fuzzed input and output fences and `onnxWaitEvent`.
//!
//! Only what the library can check is fuzzed: every buffer handed over holds at least the
//! bytes its own descriptor describes (or the descriptor describes more than `isize::MAX`
//! bytes, which the library must refuse), and every shape pointer has `dimensions` entries.
#![no_main]

/// Helpers shared with the other targets (the modules of `common/` this target uses).
#[path = "common"]
mod common {
    pub mod abi;
    pub mod add_model;
    pub mod backend;
    pub mod input;
}

use common::abi::{check, event_fence, init_env};
use common::add_model::{encode, init_graph, ADD};
use common::backend::{new_event, single_thread_backend};
use common::input::Input;
use libfuzzer_sys::fuzz_target;
use onnxifi_rust::ffi::api::*;
use onnxifi_rust::ffi::ext::onnxGetOutputShapesRUST;
use onnxifi_rust::ffi::types::*;
use onnxifi_rust::ir::DataType;
use std::os::raw::c_char;
use std::sync::OnceLock;

/// Largest buffer made for a descriptor; descriptors asking for more get small dimensions.
const MAX_BUFFER: usize = 1 << 16;
/// Largest rank given with a non-NULL shape pointer.
const MAX_GIVEN_RANK: u32 = 200;

/// The Add model on `float[N,3]` tensors (the one on `float[2,3]` is [`ADD`]).
const SYMBOLIC: &str = r#"<ir_version: 8, opset_import: ["" : 14]>
symbolic (float[N,3] A, float[N,3] B) => (float[N,3] C) { C = Add(A, B) }"#;

/// NUL-terminated names: the graphs' three, then wrong ones.
const NAMES: [&[u8]; 10] = [
    b"A\0",
    b"B\0",
    b"C\0",
    b"D\0",
    b"\0",
    b"a\0",
    b"A \0",
    b"\xff\xfeA\0",
    b"C\xc3\0",
    b"AB\0",
];

/// The backend and graphs every exec uses, made once.
struct Setup {
    /// The backend (as an integer: handles are registry ids).
    backend: usize,
    /// The `float[2,3]` graph, then the `float[N,3]` one.
    graphs: [usize; 2],
    /// A NUL-terminated name of 5000 bytes.
    long_name: Vec<u8>,
}

/// The backend and graphs, made on first use.
fn setup() -> &'static Setup {
    static SETUP: OnceLock<Setup> = OnceLock::new();
    SETUP.get_or_init(|| {
        let (_, backend) = single_thread_backend();
        let graphs = [ADD, SYMBOLIC].map(|text| init_graph(backend, &encode(text)) as usize);
        let mut long_name = vec![b'A'; 5000];
        long_name.push(0);
        Setup {
            backend: backend as usize,
            graphs,
            long_name,
        }
    })
}

/// One descriptor with the memory it points to.
struct Desc {
    /// The descriptor tag.
    tag: i32,
    /// Index into NAMES, NAMES.len() for the long name, or None for NULL.
    name: Option<usize>,
    data_type: u64,
    memory_type: u64,
    dimensions: u32,
    /// `dimensions` entries (or more), or None for a NULL shape pointer.
    shape: Option<Vec<u64>>,
    /// Owned memory (8-aligned), or None for a NULL buffer.
    buffer: Option<Vec<u64>>,
}

/// Data types other than FLOAT32: known ones, unknown ones and codes over 32 bits.
const DATA_TYPES: [u64; 12] = [0, 2, 7, 8, 9, 10, 11, 14, 21, 29, 1 << 32 | 1, u64::MAX];
/// Memory types other than CPU.
const MEMORY_TYPES: [u64; 7] = [1, 2, 3, 4, 8, 16, 1 << 40];
/// Dimensions written over a shape's entries: small, huge and overflowing ones.
const DIMS: [u64; 12] = [
    0,
    1,
    2,
    3,
    4,
    6,
    1 << 31,
    1 << 32,
    1 << 40,
    1 << 62,
    u64::MAX,
    (i64::MAX as u64) + 1,
];

/// Bytes the library reads or writes for a descriptor it accepts: `None` when it must refuse
/// it (a type with no byte layout, or more than `isize::MAX` bytes).
fn described_bytes(data_type: u64, dims: &[u64]) -> Option<usize> {
    let dtype = DataType::from_code(i64::try_from(data_type).ok()?)?;
    let n = dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))?;
    dtype.byte_len(n).filter(|&b| b <= isize::MAX as usize)
}

/// The size of the buffer to give a descriptor: what it describes, or 64 bytes when the
/// library must refuse it before touching any buffer (no shape pointer, a type without byte
/// layout, more than `isize::MAX` bytes). A shape describing more than [`MAX_BUFFER`] bytes is
/// replaced by ones.
fn buffer_bytes(data_type: u64, shape: &mut Option<Vec<u64>>) -> usize {
    let Some(dims) = shape.as_mut() else {
        return 64;
    };
    match described_bytes(data_type, dims) {
        None => 64,
        Some(b) if b <= MAX_BUFFER => b.max(1),
        Some(_) => {
            dims.iter_mut().for_each(|d| *d = 1);
            described_bytes(data_type, dims).unwrap_or(64).max(1)
        }
    }
}

/// `usual` with probability about `k`/16, else an entry of `others`.
fn usually<T: Copy>(inp: &mut Input, k: u8, usual: T, others: &[T]) -> T {
    if inp.chance(k) {
        usual
    } else {
        inp.pick(others)
    }
}

/// A descriptor of input or output `default_name` (an index into NAMES) of the fixed or the
/// symbolic graph, with fuzzed fields, and its memory.
fn make_desc(inp: &mut Input, default_name: usize, symbolic: bool) -> Desc {
    let tag = usually(
        inp,
        15,
        ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1,
        &[
            0,
            ONNXIFI_TAG_MEMORY_FENCE_V1,
            ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1 + 1,
            -1,
        ],
    );
    let name = if inp.chance(13) {
        Some(default_name)
    } else if inp.chance(2) {
        None
    } else {
        Some(inp.u8() as usize % (NAMES.len() + 1))
    };
    let data_type = usually(inp, 13, ONNXIFI_DATATYPE_FLOAT32, &DATA_TYPES);
    let memory_type = usually(inp, 14, ONNXIFI_MEMORY_TYPE_CPU, &MEMORY_TYPES);
    let first = if symbolic {
        1 + u64::from(inp.u8() % 4)
    } else {
        2
    };
    let mut dims = vec![first, 3];
    if inp.chance(3) {
        let rank = if inp.chance(14) {
            u32::from(inp.u8() % 9)
        } else {
            u32::from(inp.u8()).min(MAX_GIVEN_RANK)
        };
        dims = (0..rank).map(|_| 1 + u64::from(inp.u8() % 3)).collect();
    }
    for _ in 0..4 {
        if dims.is_empty() || !inp.chance(2) {
            break;
        }
        let i = inp.u8() as usize % dims.len();
        dims[i] = if inp.chance(8) {
            inp.pick(&DIMS)
        } else {
            inp.u64()
        };
    }
    let mut dimensions = dims.len() as u32;
    let mut shape = Some(dims);
    if inp.chance(1) {
        // A NULL shape: any rank is safe, none of it is read.
        shape = None;
        dimensions = inp.pick(&[0, 1, 2, 65, u32::MAX]);
    }
    let bytes = buffer_bytes(data_type, &mut shape);
    let mut buffer: Vec<u64> = vec![0; bytes.div_ceil(8)];
    for (i, w) in buffer.iter_mut().enumerate().take(8) {
        *w = if inp.chance(1) {
            inp.u64()
        } else {
            // Two small floats per word.
            let lo = (i as f32 - 2.5).to_bits() as u64;
            let hi = (f32::from(inp.u8() % 8) * 0.5).to_bits() as u64;
            lo | hi << 32
        };
    }
    let buffer = if inp.chance(1) { None } else { Some(buffer) };
    Desc {
        tag,
        name,
        data_type,
        memory_type,
        dimensions,
        shape,
        buffer,
    }
}

impl Desc {
    /// The C descriptor (pointing into `self`, NAMES or `long_name`).
    fn raw(&self, long_name: &[u8]) -> onnxTensorDescriptorV1 {
        let name: *const c_char = match self.name {
            Some(i) if i < NAMES.len() => NAMES[i].as_ptr().cast(),
            Some(_) => long_name.as_ptr().cast(),
            None => std::ptr::null(),
        };
        onnxTensorDescriptorV1 {
            tag: self.tag,
            name,
            dataType: self.data_type,
            memoryType: self.memory_type,
            dimensions: self.dimensions,
            shape: self.shape.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            buffer: self.buffer.as_ref().map_or(0, |b| b.as_ptr() as u64),
        }
    }

    /// The float values the shape describes, read from the buffer (which must be there).
    fn floats(&self) -> Vec<f32> {
        let n: u64 = self.shape.as_deref().unwrap_or(&[]).iter().product();
        let words = self.buffer.as_deref().unwrap_or(&[]);
        (0..n as usize)
            .map(|i| {
                let w = words[i / 2];
                f32::from_bits(if i % 2 == 0 {
                    w as u32
                } else {
                    (w >> 32) as u32
                })
            })
            .collect()
    }
}

/// An event this exec made for an input fence, with what became of it.
struct Made {
    event: onnxEvent,
    signalled: bool,
    released: bool,
}

/// Makes (or picks) the event of an input fence.
fn fence_event(inp: &mut Input, backend: onnxBackend, made: &mut Vec<Made>) -> onnxEvent {
    match inp.u8() % 8 {
        0 => std::ptr::null_mut(),
        1 => inp.u64() as usize as onnxEvent,
        2 => backend, // a live handle of another kind
        kind => {
            let e = new_event(backend);
            let mut m = Made {
                event: e,
                signalled: false,
                released: false,
            };
            if kind >= 4 {
                // SAFETY: a live event.
                assert_eq!(unsafe { onnxSignalEvent(e) }, ONNXIFI_STATUS_SUCCESS);
                m.signalled = true;
            }
            if kind == 7 && inp.chance(4) {
                // SAFETY: a live event; afterwards it must be unknown.
                assert_eq!(unsafe { onnxReleaseEvent(e) }, ONNXIFI_STATUS_SUCCESS);
                m.released = true;
            }
            made.push(m);
            e
        }
    }
}

/// A memory fence on `event` with a fuzzed tag and type.
fn fence(inp: &mut Input, event: onnxEvent) -> onnxMemoryFenceV1 {
    onnxMemoryFenceV1 {
        tag: usually(
            inp,
            15,
            ONNXIFI_TAG_MEMORY_FENCE_V1,
            &[0, ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1, -1],
        ),
        r#type: usually(
            inp,
            15,
            ONNXIFI_SYNCHRONIZATION_EVENT,
            &[ONNXIFI_SYNCHRONIZATION_IMPLICIT, 1, 4, 1 << 33],
        ),
        event,
    }
}

fuzz_target!(
    init: {
        init_env();
        setup();
    },
    |data: &[u8]| {
    let s = setup();
    let mut inp = Input(data);
    let backend = s.backend as onnxBackend;
    let which = (inp.u8() % 2) as usize;
    let graph = s.graphs[which] as onnxGraph;
    let mut made: Vec<Made> = Vec::new();
    // Every descriptor of the exec stays alive (with its buffer) until the binding is dropped.
    let mut kept: Vec<Vec<Desc>> = Vec::new();
    let rounds = 1 + inp.u8() % 3;
    for _ in 0..rounds {
        let n_in = if inp.chance(12) { 2 } else { inp.u8() % 4 };
        let n_out = if inp.chance(13) { 1 } else { inp.u8() % 3 };
        let mut descs: Vec<Desc> = (0..n_in)
            .map(|i| make_desc(&mut inp, i as usize, which == 1))
            .collect();
        // Outputs describe C; in the symbolic graph their first dimension follows A's.
        for _ in 0..n_out {
            let mut d = make_desc(&mut inp, 2, which == 1);
            if which == 1 && inp.chance(14) {
                if let (Some(a), Some(c)) = (descs.first().and_then(|a| a.shape.as_ref()), d.shape.as_mut()) {
                    if a.len() == 2 && c.len() == 2 && a[0] <= 4 {
                        c[0] = a[0];
                        let bytes = buffer_bytes(d.data_type, &mut d.shape);
                        d.buffer = d.buffer.map(|_| vec![0; bytes.div_ceil(8)]);
                    }
                }
            }
            descs.push(d);
        }
        let raw: Vec<onnxTensorDescriptorV1> = descs.iter().map(|d| d.raw(&s.long_name)).collect();
        let (ins, outs) = raw.split_at(n_in as usize);
        let in_ptr = inp.or_null(15, ins.as_ptr());
        let out_ptr = inp.or_null(15, outs.as_ptr());
        if inp.chance(2) {
            // Output shapes for these inputs, written into copies with their own shape arrays.
            let mut shapes: Vec<Vec<u64>> = descs[n_in as usize..]
                .iter()
                .map(|d| vec![0; d.dimensions.min(MAX_GIVEN_RANK) as usize])
                .collect();
            let mut copies: Vec<onnxTensorDescriptorV1> = outs
                .iter()
                .zip(&mut shapes)
                .map(|(d, sh)| onnxTensorDescriptorV1 {
                    dimensions: sh.len() as u32,
                    shape: if d.shape.is_null() { std::ptr::null() } else { sh.as_mut_ptr() },
                    ..*d
                })
                .collect();
            let out_copy = if out_ptr.is_null() { std::ptr::null_mut() } else { copies.as_mut_ptr() };
            // SAFETY: a live graph; `n_in` readable input descriptors (or NULL); `n_out`
            // writable output descriptors whose shape arrays hold `dimensions` entries.
            let st = check("onnxGetOutputShapesRUST", unsafe {
                onnxGetOutputShapesRUST(graph, u32::from(n_in), in_ptr, u32::from(n_out), out_copy)
            });
            if st == ONNXIFI_STATUS_SUCCESS {
                for c in &copies {
                    assert_eq!(c.dataType, ONNXIFI_DATATYPE_FLOAT32);
                    assert_eq!(c.dimensions, 2);
                }
            }
        }
        // SAFETY: a live graph; descriptor arrays of the stated counts (or NULL), with names
        // NUL-terminated, shapes of `dimensions` entries and buffers that hold what each
        // descriptor describes (kept alive until the binding is dropped at the end).
        let set = check("onnxSetGraphIO", unsafe {
            onnxSetGraphIO(graph, u32::from(n_in), in_ptr, u32::from(n_out), out_ptr)
        });
        if set == ONNXIFI_STATUS_SUCCESS {
            assert!(n_out >= 1 && !out_ptr.is_null());
            for d in &descs {
                assert_eq!(d.tag, ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1, "a bad tag was accepted");
                assert_eq!(d.data_type, ONNXIFI_DATATYPE_FLOAT32, "a wrong type was accepted");
                assert_eq!(d.memory_type, ONNXIFI_MEMORY_TYPE_CPU, "a bad memory type was accepted");
                assert!(d.buffer.is_some(), "a NULL buffer was accepted");
            }
            let names: Vec<Option<usize>> = descs.iter().map(|d| d.name).collect();
            assert!(
                names == [Some(0), Some(1), Some(2)] || names == [Some(1), Some(0), Some(2)],
                "accepted names {names:?} for inputs (A, B) and output (C)"
            );
        }
        // The run: fuzzed fences.
        let in_event = fence_event(&mut inp, backend, &mut made);
        let in_fence = fence(&mut inp, in_event);
        let garbage = inp.u64() as usize as onnxEvent;
        let mut out_fence = fence(&mut inp, garbage);
        let in_fence_ptr = inp.or_null(15, &in_fence as *const onnxMemoryFenceV1);
        let out_fence_ptr = inp.or_null_mut(15, &mut out_fence as *mut onnxMemoryFenceV1);
        // SAFETY: a live graph and readable/writable fences (or NULL).
        let ran = check("onnxRunGraph", unsafe { onnxRunGraph(graph, in_fence_ptr, out_fence_ptr) });
        if ran == ONNXIFI_STATUS_SUCCESS {
            assert_eq!(set, ONNXIFI_STATUS_SUCCESS, "a run without a binding was accepted");
            let m = made.iter_mut().find(|m| m.event == in_event).expect("a live input event");
            assert!(!m.released, "a released input event was accepted");
            if !m.signalled {
                // Settle the input fence, or the run would wait for ever.
                if inp.chance(8) {
                    // SAFETY: a live event.
                    assert_eq!(unsafe { onnxSignalEvent(in_event) }, ONNXIFI_STATUS_SUCCESS);
                    m.signalled = true;
                } else {
                    // SAFETY: a live event; the run waiting on it must fail.
                    assert_eq!(unsafe { onnxReleaseEvent(in_event) }, ONNXIFI_STATUS_SUCCESS);
                    m.released = true;
                }
            }
            let out_event = out_fence.event;
            // SAFETY: the run's output event, signalled when the run ends.
            let w = check("onnxWaitEvent", unsafe { onnxWaitEvent(out_event) });
            if m.signalled {
                assert_eq!(w, ONNXIFI_STATUS_SUCCESS, "a bound Add run failed");
                let named = |n: usize| descs.iter().find(|d| d.name == Some(n)).unwrap().floats();
                let (a, b, c) = (named(0), named(1), named(2));
                for ((x, y), z) in a.iter().zip(&b).zip(&c) {
                    let want = x + y;
                    assert!(want == *z || (want.is_nan() && z.is_nan()), "{x} + {y} gave {z}");
                }
            } else {
                assert_eq!(w, ONNXIFI_STATUS_INVALID_EVENT);
            }
            // SAFETY: a run-owned event may not be signalled by the caller.
            assert_eq!(unsafe { onnxSignalEvent(out_event) }, ONNXIFI_STATUS_INVALID_STATE);
            // SAFETY: a live event.
            assert_eq!(unsafe { onnxReleaseEvent(out_event) }, ONNXIFI_STATUS_SUCCESS);
            let mut state = -1;
            // SAFETY: a released event and a writable state.
            let st = unsafe { onnxGetEventState(out_event, &mut state) };
            assert_eq!((st, state), (ONNXIFI_STATUS_INVALID_EVENT, ONNXIFI_EVENT_STATE_INVALID));
        } else if !out_fence_ptr.is_null() {
            assert_eq!(out_fence.event, garbage, "a failed run wrote the output fence");
        }
        kept.push(descs);
    }
    // Drop the binding (a failing onnxSetGraphIO drops it) before the buffers go, and check that
    // a run is then refused.
    // SAFETY: a live graph; NULL descriptors are refused.
    let s2 = unsafe { onnxSetGraphIO(graph, 0, std::ptr::null(), 0, std::ptr::null()) };
    assert_eq!(s2, ONNXIFI_STATUS_INVALID_POINTER);
    let e = new_event(backend);
    // SAFETY: a live event.
    assert_eq!(unsafe { onnxSignalEvent(e) }, ONNXIFI_STATUS_SUCCESS);
    let f_in = event_fence(e);
    let mut f_out = f_in;
    // SAFETY: a live graph and valid fences.
    let st = unsafe { onnxRunGraph(graph, &f_in, &mut f_out) };
    assert_eq!(st, ONNXIFI_STATUS_UNIDENTIFIED_NAME, "a run after a failed onnxSetGraphIO");
    made.push(Made { event: e, signalled: true, released: false });
    for m in made.iter().filter(|m| !m.released) {
        // SAFETY: a live event this exec made.
        assert_eq!(unsafe { onnxReleaseEvent(m.event) }, ONNXIFI_STATUS_SUCCESS);
    }
    drop(kept);
});
