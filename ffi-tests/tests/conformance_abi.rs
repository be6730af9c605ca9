//! The ONNX backend test cases through the C ABI, as a framework runs them: `onnxInitGraph`,
//! `onnxSetGraphIO` with tensor descriptors of every element type, `onnxRunGraph` fenced on an
//! event, `onnxWaitEvent`, then the caller's output buffers are compared with the expected
//! outputs. Every case of `tests/conformance/allow_list.txt` must pass this way, except those
//! ONNXIFI cannot describe (a tensor with a zero dimension, which descriptors forbid). The test
//! data is read with the library's Rust types; the computation only goes through `dlopen`.

use onnxifi_ffi_tests::status::*;
use onnxifi_ffi_tests::*;
use onnxifi_rust::ir::{DataType, Tensor, TensorData};
use onnxifi_rust::model::onnx::TensorProto;
use prost::Message;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::ptr::null_mut;

fn load(path: &Path) -> Tensor {
    let bytes = std::fs::read(path).unwrap();
    Tensor::from_proto(&TensorProto::decode(bytes.as_slice()).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn floats(t: &Tensor) -> Option<Vec<f64>> {
    Some(match &t.data {
        TensorData::F32(v) => v.iter().map(|&x| x as f64).collect(),
        TensorData::F64(v) => v.clone(),
        TensorData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
        TensorData::BF16(v) => v.iter().map(|x| x.to_f64()).collect(),
        _ => return None,
    })
}

fn close(got: &Tensor, want: &Tensor) -> Result<(), String> {
    match (floats(got), floats(want)) {
        (Some(g), Some(w)) => {
            // Half types carry about 3 (float16) or 2-3 (bfloat16) significant digits, and a graph
            // computed in wider precision rounds once where the reference rounds after every op.
            let rtol = match want.dtype() {
                DataType::BF16 => 2e-2,
                DataType::F16 => 1e-2,
                _ => 1e-3,
            };
            for (i, (a, b)) in g.iter().zip(&w).enumerate() {
                if !((a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-5 + rtol * b.abs())
                {
                    return Err(format!("element {i}: {a}, expected {b}"));
                }
            }
            Ok(())
        }
        _ if got.data == want.data => Ok(()),
        _ => Err("values differ".into()),
    }
}

/// One tensor as the caller holds it: a name, a type code, a shape and a byte buffer.
struct Held {
    name: CString,
    dtype: DataType,
    shape: Vec<u64>,
    bytes: Vec<u8>,
}

impl Held {
    fn new(name: &str, t: &Tensor) -> Held {
        let mut bytes = vec![0u8; t.dtype().byte_len(t.len()).unwrap_or(0)];
        t.data.write_le_bytes(&mut bytes);
        Held {
            name: CString::new(name).unwrap(),
            dtype: t.dtype(),
            shape: t.shape.iter().map(|&d| d as u64).collect(),
            bytes,
        }
    }

    fn descriptor(&mut self) -> TensorDescriptor {
        descriptor(
            &self.name,
            self.dtype.code() as u64,
            &self.shape,
            self.bytes.as_mut_ptr().cast(),
        )
    }

    fn tensor(&self) -> Tensor {
        let shape: Vec<usize> = self.shape.iter().map(|&d| d as usize).collect();
        let len = shape.iter().product();
        Tensor::new(
            shape,
            TensorData::from_le_bytes(self.dtype, &self.bytes, len).unwrap(),
        )
        .unwrap()
    }
}

enum Verdict {
    Pass,
    Unsupported,
    NotDescribable,
    Fail(String),
}

fn run_case(b: &Backend, dir: &Path) -> Verdict {
    let bytes = std::fs::read(dir.join("model.onnx")).unwrap();
    let model = onnxifi_rust::model::decode(&bytes).unwrap();
    let graph = model.graph.as_ref().unwrap();
    let inits: Vec<&str> = graph
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    let input_names: Vec<&str> = graph
        .input
        .iter()
        .filter_map(|v| v.name.as_deref())
        .filter(|n| !inits.contains(n))
        .collect();
    let output_names: Vec<&str> = graph
        .output
        .iter()
        .filter_map(|v| v.name.as_deref())
        .collect();
    let mut g = null_mut();
    // SAFETY: a live backend, model bytes from a live slice, a valid out pointer.
    let s = unsafe {
        (api().init_graph)(
            b.backend,
            std::ptr::null(),
            bytes.len(),
            bytes.as_ptr().cast(),
            0,
            std::ptr::null(),
            &mut g,
        )
    };
    if name(s).starts_with("UNSUPPORTED") {
        return Verdict::Unsupported;
    }
    if s != SUCCESS {
        return Verdict::Fail(format!("onnxInitGraph: {}", name(s)));
    }
    let graph_handle = Graph(g);
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    for set in sets {
        let inputs: Vec<Tensor> = (0..input_names.len())
            .map(|i| load(&set.join(format!("input_{i}.pb"))))
            .collect();
        let wants: Vec<Tensor> = (0..output_names.len())
            .map(|i| load(&set.join(format!("output_{i}.pb"))))
            .collect();
        // ONNXIFI descriptors cannot hold zero-size dimensions, nor strings (no byte layout).
        if inputs
            .iter()
            .chain(&wants)
            .any(|t| t.shape.contains(&0) || t.dtype() == DataType::String)
        {
            return Verdict::NotDescribable;
        }
        let mut held_in: Vec<Held> = input_names
            .iter()
            .zip(&inputs)
            .map(|(n, t)| Held::new(n, t))
            .collect();
        let mut held_out: Vec<Held> = output_names
            .iter()
            .zip(&wants)
            .map(|(n, t)| {
                let mut h = Held::new(n, t);
                h.bytes.fill(0);
                h
            })
            .collect();
        let ins: Vec<TensorDescriptor> = held_in.iter_mut().map(Held::descriptor).collect();
        let outs: Vec<TensorDescriptor> = held_out.iter_mut().map(Held::descriptor).collect();
        // SAFETY: descriptor arrays over buffers that outlive the run (waited for below).
        let s = unsafe {
            (api().set_graph_io)(
                graph_handle.0,
                ins.len() as u32,
                if ins.is_empty() {
                    std::ptr::null()
                } else {
                    ins.as_ptr()
                },
                outs.len() as u32,
                outs.as_ptr(),
            )
        };
        if name(s).starts_with("UNSUPPORTED") {
            return Verdict::Unsupported;
        }
        if s != SUCCESS {
            return Verdict::Fail(format!("onnxSetGraphIO: {}", name(s)));
        }
        let (s, waited) = run_once(b, graph_handle.0);
        if s != SUCCESS {
            return Verdict::Fail(format!("onnxRunGraph: {}", name(s)));
        }
        match waited {
            Some(w) if name(w).starts_with("UNSUPPORTED") => return Verdict::Unsupported,
            Some(w) if w != SUCCESS => return Verdict::Fail(format!("onnxWaitEvent: {}", name(w))),
            _ => {}
        }
        for (i, (h, want)) in held_out.iter().zip(&wants).enumerate() {
            if let Err(m) = close(&h.tensor(), want) {
                return Verdict::Fail(format!("output {i}: {m}"));
            }
        }
    }
    Verdict::Pass
}

#[test]
fn allow_listed_backend_cases_pass_through_the_c_abi() {
    let root = repo_root();
    let data = root.join(".testdata/node");
    assert!(
        data.is_dir(),
        "the ONNX backend test data is missing: run scripts/test.sh"
    );
    let allowed: Vec<String> =
        std::fs::read_to_string(root.join("tests/conformance/allow_list.txt"))
            .unwrap()
            .lines()
            .filter_map(|l| l.split('#').next())
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
    let b = Backend::new();
    let (mut pass, mut unsupported, mut undescribable, mut failed) = (0, 0, Vec::new(), Vec::new());
    for case in &allowed {
        match run_case(&b, &data.join(case)) {
            Verdict::Pass => pass += 1,
            Verdict::Unsupported => unsupported += 1,
            Verdict::NotDescribable => undescribable.push(case.clone()),
            Verdict::Fail(m) => failed.push(format!("{case}: {m}")),
        }
    }
    println!(
        "C ABI conformance: {pass} of {} allow-listed cases pass through dlopen; {} not describable by ONNXIFI (zero-size dims, strings); {unsupported} refused; {} failed",
        allowed.len(),
        undescribable.len(),
        failed.len()
    );
    assert!(
        failed.is_empty() && unsupported == 0,
        "{} allow-listed cases fail through the C ABI ({unsupported} refused):\n{}",
        failed.len(),
        failed.join("\n")
    );
}
