//! Real models against ONNX Runtime, with data made at test time (never committed):
//! - the 11 `.onnx` models shipped inside the magika, nudenet, rapidocr-onnxruntime and silero-vad
//!   wheels, downloaded by `scripts/real_models.py` (pinned versions) with realistic inputs;
//! - six small model families built by `scripts/model_families.py` with the onnx helper.
//!
//! Each model either runs and matches ONNX Runtime (rtol 1e-3, atol 1e-4) or is refused with an
//! UNSUPPORTED_* status naming what is missing; a wrong answer, or any other error, fails. The
//! wheel models in [`MUST_RUN`] and every family must run.
#![forbid(unsafe_code)]

use onnxifi_rust::graph::compile_executable;
use onnxifi_rust::ir::{Tensor, TensorData};
use onnxifi_rust::model::onnx::TensorProto;
use prost::Message;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Cases that run and match ONNX Runtime today; a regression here fails the test.
const MUST_RUN: &[&str] = &[
    "magika_standard_v3_3",
    "nudenet_320n",
    "rapidocr_ppocr_mobile_v2_cls",
    "rapidocr_ppocrv4_det",
    "rapidocr_ppocrv4_rec",
    "silero_vad",
    "silero_vad_16k_op15",
    "silero_vad_16k_sequence",
    "silero_vad_half",
    "silero_vad_op18_ifless",
    "silero_vad_openvino_16k",
];

fn python() -> Option<PathBuf> {
    let p = std::env::var_os("ONNXIFI_RUST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    p.exists().then_some(p)
}

fn load(path: &Path) -> Tensor {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Tensor::from_proto(&TensorProto::decode(bytes.as_slice()).expect("tensor proto"))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn as_f64(t: &Tensor) -> Option<Vec<f64>> {
    Some(match &t.data {
        TensorData::F32(v) => v.iter().map(|&x| x as f64).collect(),
        TensorData::F64(v) => v.clone(),
        TensorData::F16(v) => v.iter().map(|x| x.to_f64()).collect(),
        _ => return None,
    })
}

/// `Ok(())` when `got` matches `want` (rtol 1e-3, atol 1e-4; exact for non-float types).
fn matches(got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.shape != want.shape || got.dtype() != want.dtype() {
        return Err(format!(
            "{:?} {} instead of {:?} {}",
            got.shape,
            got.dtype().name(),
            want.shape,
            want.dtype().name()
        ));
    }
    match (as_f64(got), as_f64(want)) {
        (Some(g), Some(w)) => {
            let worst = g
                .iter()
                .zip(&w)
                .map(|(a, b)| (a - b).abs() / (1e-4 + 1e-3 * b.abs()))
                .fold(0.0f64, f64::max);
            if worst <= 1.0 {
                Ok(())
            } else {
                Err(format!("differs: worst error {worst:.2}× the tolerance"))
            }
        }
        _ if got == want => Ok(()),
        _ => Err("values differ".into()),
    }
}

/// Makes the cases with `script` (a Python script of `scripts/`) unless `probe` exists.
fn ensure_cases(script: &str, probe: &Path) -> bool {
    if probe.is_file() {
        return true;
    }
    let Some(py) = python() else {
        panic!("no Python venv: run scripts/setup-test-env.sh");
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(py)
        .arg(root.join("scripts").join(script))
        .output()
        .unwrap_or_else(|e| panic!("run scripts/{script}: {e}"));
    assert!(
        out.status.success(),
        "scripts/{script} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    true
}

/// What running every case of a directory gave: the names that ran and matched, the refusals
/// (UNSUPPORTED_*), and everything else (wrong answers, other errors).
struct Outcome {
    ran: Vec<String>,
    refused: Vec<String>,
    failures: Vec<String>,
    total: usize,
}

fn run_cases(cases: &Path) -> Outcome {
    let mut names: Vec<String> = std::fs::read_dir(cases)
        .expect("case directory")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("model.onnx").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let mut o = Outcome {
        ran: Vec::new(),
        refused: Vec::new(),
        failures: Vec::new(),
        total: names.len(),
    };
    for name in &names {
        let dir = cases.join(name);
        let bytes = std::fs::read(dir.join("model.onnx")).unwrap();
        let verdict = (|| -> Result<(), (bool, String)> {
            let exe = compile_executable(&bytes, Vec::new())
                .map_err(|e| (e.status.name().starts_with("UNSUPPORTED"), e.to_string()))?;
            let inputs: Vec<Tensor> = (0..exe.inputs().len())
                .map(|i| load(&dir.join(format!("input_{i}.pb"))))
                .collect();
            let outputs = pool
                .install(|| exe.run(inputs))
                .map_err(|e| (e.status.name().starts_with("UNSUPPORTED"), e.to_string()))?;
            for (i, got) in outputs.iter().enumerate() {
                let want = load(&dir.join(format!("output_{i}.pb")));
                matches(got, &want).map_err(|m| (false, format!("output {i}: {m}")))?;
            }
            Ok(())
        })();
        match verdict {
            Ok(()) => o.ran.push(name.clone()),
            Err((true, why)) => o.refused.push(format!("{name}: {why}")),
            Err((false, why)) => o.failures.push(format!("{name}: {why}")),
        }
    }
    o
}

#[test]
fn wheel_models_match_onnxruntime_or_are_refused_precisely() {
    let cases = Path::new(env!("CARGO_MANIFEST_DIR")).join(".testdata/real/cases");
    if !ensure_cases("real_models.py", &cases.join("silero_vad/output_0.pb")) {
        return;
    }
    let o = run_cases(&cases);
    assert_eq!(o.total, 11, "expected 11 wheel models");
    println!(
        "wheel models: {} of {} run and match ONNX Runtime: {:?}",
        o.ran.len(),
        o.total,
        o.ran
    );
    for r in &o.refused {
        println!("refused: {}", r.chars().take(300).collect::<String>());
    }
    assert!(
        o.failures.is_empty(),
        "wrong answers or errors:\n{}",
        o.failures.join("\n")
    );
    for must in MUST_RUN {
        assert!(o.ran.iter().any(|r| r == must), "{must} no longer runs");
    }
}

/// Small models of the families people run, built with the onnx helper at test time by
/// `scripts/model_families.py` the way exporters write them: a BERT block with an attention
/// mask, a GPT-2 block with a causal mask, a Llama block with RMSNorm and rotary embeddings, an
/// LSTM voice-activity model with If branches, a YOLO-style head (Resize/Split/Concat) and a
/// CTC text-recognition head. Every one must run and match ONNX Runtime.
#[test]
fn model_families_match_onnxruntime() {
    let cases = Path::new(env!("CARGO_MANIFEST_DIR")).join(".testdata/families");
    if !ensure_cases("model_families.py", &cases.join("ctc_head/output_1.pb")) {
        return;
    }
    let o = run_cases(&cases);
    println!(
        "model families: {} of {} run and match ONNX Runtime: {:?}",
        o.ran.len(),
        o.total,
        o.ran
    );
    assert_eq!(o.total, 6, "expected 6 model families");
    let problems: Vec<&String> = o.refused.iter().chain(&o.failures).collect();
    assert!(problems.is_empty(), "{problems:#?}");
}
