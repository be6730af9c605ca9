//! ONNX backend conformance: every node test of the `onnx` package's backend test data is run
//! through the library. A test whose model the backend refuses (UNSUPPORTED_*) is counted as
//! unsupported; every test it accepts must reproduce the expected outputs, except those listed
//! in `tests/conformance/known_failures.txt` with a reason. Every case named in
//! `tests/conformance/allow_list.txt` must pass (a regression fails the test); passes not yet
//! listed are reported. `ONNXIFI_RUST_CONFORMANCE_REPORT=FILE` writes one line per case
//! (`name verdict reason`), from which the allow-list is regenerated.

use onnxifi_rust::graph::compile_executable;
use onnxifi_rust::ir::{DataType, Tensor, TensorData};
use onnxifi_rust::model::onnx::TensorProto;
use prost::Message;
use std::path::{Path, PathBuf};

/// Finds the backend node test data: `$ONNX_BACKEND_TEST_DATA`, else `.testdata/node`, which
/// `scripts/gen_node_tests.py` writes from the installed `onnx` package.
fn data_dir() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("ONNX_BACKEND_TEST_DATA") {
        return Some(PathBuf::from(p));
    }
    Some(Path::new(env!("CARGO_MANIFEST_DIR")).join(".testdata/node"))
}

fn load_tensor(path: &Path) -> Tensor {
    let bytes = std::fs::read(path).unwrap();
    let proto = TensorProto::decode(bytes.as_slice()).unwrap();
    Tensor::from_proto(&proto).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The elements as f64, for the floating-point types.
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
    if got.shape != want.shape {
        return Err(format!("shape {:?}, expected {:?}", got.shape, want.shape));
    }
    if got.dtype() != want.dtype() {
        return Err(format!(
            "type {}, expected {}",
            got.dtype().name(),
            want.dtype().name()
        ));
    }
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
                let ok =
                    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-5 + rtol * b.abs();
                if !ok {
                    return Err(format!("element {i}: {a}, expected {b}"));
                }
            }
            Ok(())
        }
        _ if got == want => Ok(()),
        _ => Err(format!("values differ: {:?} vs {:?}", got.data, want.data)),
    }
}

enum Verdict {
    Pass,
    Unsupported(String),
    Fail(String),
}

fn run_case(dir: &Path, pool: &rayon::ThreadPool) -> Verdict {
    let bytes = std::fs::read(dir.join("model.onnx")).unwrap();
    let exe = match compile_executable(&bytes, Vec::new()) {
        Ok(e) => e,
        Err(e) if e.status.name().starts_with("UNSUPPORTED") => {
            return Verdict::Unsupported(e.to_string())
        }
        Err(e) => return Verdict::Fail(format!("compile: {e}")),
    };
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    for set in sets {
        let inputs: Vec<Tensor> = (0..exe.inputs().len())
            .map(|i| load_tensor(&set.join(format!("input_{i}.pb"))))
            .collect();
        let outputs = match pool.install(|| exe.run(inputs)) {
            Ok(o) => o,
            Err(e) if e.status.name().starts_with("UNSUPPORTED") => {
                return Verdict::Unsupported(e.to_string())
            }
            Err(e) => return Verdict::Fail(format!("run: {e}")),
        };
        for (i, got) in outputs.iter().enumerate() {
            let want = load_tensor(&set.join(format!("output_{i}.pb")));
            if let Err(m) = close(got, &want) {
                return Verdict::Fail(format!("output {i}: {m}"));
            }
        }
    }
    Verdict::Pass
}

#[test]
fn onnx_backend_node_tests() {
    let Some(root) = data_dir().filter(|p| p.is_dir()) else {
        panic!("the ONNX backend test data is missing: run scripts/test.sh (or scripts/setup-test-env.sh and scripts/gen_node_tests.py)");
    };
    let list = |file: &str| -> Vec<String> {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split('#').next())
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    };
    let known = list("tests/conformance/known_failures.txt");
    let allowed = list("tests/conformance/allow_list.txt");
    let mut report = String::new();
    let mut passed_names = Vec::new();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    cases.sort();
    let (mut pass, mut unsupported, mut failed, mut known_failed) = (0, 0, Vec::new(), 0);
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        let verdict = run_case(case, &pool);
        let (tag, why) = match &verdict {
            Verdict::Pass => ("pass", String::new()),
            Verdict::Unsupported(w) => ("unsupported", w.clone()),
            Verdict::Fail(w) => ("fail", w.clone()),
        };
        report.push_str(&format!("{name} {tag} {}\n", why.replace('\n', " ")));
        match verdict {
            Verdict::Pass => {
                pass += 1;
                passed_names.push(name.clone());
            }
            Verdict::Unsupported(why) => {
                unsupported += 1;
                if std::env::var_os("ONNXIFI_RUST_VERBOSE").is_some() {
                    eprintln!("unsupported {name}: {why}");
                }
            }
            Verdict::Fail(m) if known.contains(&name) => {
                known_failed += 1;
                eprintln!("known failure {name}: {m}");
            }
            Verdict::Fail(m) => failed.push(format!("{name}: {m}")),
        }
    }
    println!(
        "ONNX backend node tests: {pass} passed, {} failed, {known_failed} known failures, {unsupported} unsupported, {} total",
        failed.len(),
        cases.len()
    );
    if let Some(path) = std::env::var_os("ONNXIFI_RUST_CONFORMANCE_REPORT") {
        std::fs::write(path, &report).expect("cannot write the conformance report");
    }
    let regressed: Vec<&String> = allowed
        .iter()
        .filter(|a| !passed_names.contains(a))
        .collect();
    let new: Vec<&String> = passed_names
        .iter()
        .filter(|p| !allowed.contains(p))
        .collect();
    println!(
        "allow-list: {} of {} listed cases pass; {} passes not yet listed{}",
        allowed.len() - regressed.len(),
        allowed.len(),
        new.len(),
        if new.is_empty() {
            String::new()
        } else {
            format!(
                " (add them to tests/conformance/allow_list.txt): {}",
                new.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
            )
        }
    );
    assert!(
        regressed.is_empty(),
        "{} cases of the allow-list no longer pass: {regressed:?}",
        regressed.len()
    );
    assert!(
        failed.is_empty(),
        "{} accepted models gave wrong results:\n{}",
        failed.len(),
        failed.join("\n")
    );
}
