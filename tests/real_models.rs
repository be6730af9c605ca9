//! The models people try first: the 11 `.onnx` models shipped inside the magika, nudenet,
//! rapidocr-onnxruntime and silero-vad wheels, downloaded at test time by
//! `scripts/real_models.py` (pinned versions, never committed) with realistic inputs and ONNX
//! Runtime's outputs. Each model either runs and matches ONNX Runtime (rtol 1e-3, atol 1e-4),
//! or is refused with an UNSUPPORTED_* status naming what is missing; the models listed in
//! [`MUST_RUN`] must run. A wrong answer, or any other error, fails the test.
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

#[test]
fn wheel_models_match_onnxruntime_or_are_refused_precisely() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let cases = root.join(".testdata/real/cases");
    if !cases.join("silero_vad/output_0.pb").is_file() {
        let Some(py) = python() else {
            if std::env::var_os("CI").is_some() {
                panic!("no Python venv: run scripts/setup-test-env.sh");
            }
            eprintln!("skipped: no Python venv (run scripts/setup-test-env.sh)");
            return;
        };
        let out = Command::new(py)
            .arg(root.join("scripts/real_models.py"))
            .output()
            .expect("run scripts/real_models.py");
        assert!(
            out.status.success(),
            "scripts/real_models.py failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(&cases)
        .expect("case directory")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 11, "expected 11 wheel models: {names:?}");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let (mut ran, mut refused, mut failures) = (Vec::new(), Vec::new(), Vec::new());
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
            Ok(()) => ran.push(name.clone()),
            Err((true, why)) => refused.push(format!("{name}: {why}")),
            Err((false, why)) => failures.push(format!("{name}: {why}")),
        }
    }
    println!(
        "wheel models: {} of {} run and match ONNX Runtime: {ran:?}",
        ran.len(),
        names.len()
    );
    for r in &refused {
        println!("refused: {}", r.chars().take(300).collect::<String>());
    }
    assert!(
        failures.is_empty(),
        "wrong answers or errors:\n{}",
        failures.join("\n")
    );
    for must in MUST_RUN {
        assert!(ran.iter().any(|r| r == must), "{must} no longer runs");
    }
}
