//! Wire compatibility of `proto/onnx.proto`: every model the `onnx` Python package wrote (the
//! backend test models shipped in its wheel, and the node test models generated from it by
//! `scripts/gen_node_tests.py`) decodes with our prost types and re-encodes to the same bytes.

use onnxifi_rust::model::onnx::ModelProto;
use prost::Message;
use std::path::{Path, PathBuf};

fn python() -> String {
    std::env::var("ONNXIFI_RUST_PYTHON")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/.venv/bin/python").to_string())
}

/// The backend test data directory of the installed `onnx` package.
fn onnx_data_dir() -> Option<PathBuf> {
    let out = std::process::Command::new(python())
        .args([
            "-c",
            "import onnx, os; print(os.path.dirname(onnx.__file__))",
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| Path::new(String::from_utf8_lossy(&out.stdout).trim()).join("backend/test/data"))
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "onnx") {
            out.push(p);
        }
    }
}

#[test]
fn models_written_by_onnx_round_trip_to_identical_bytes() {
    let mut files = Vec::new();
    if let Some(d) = onnx_data_dir() {
        collect(&d, &mut files);
    }
    collect(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(".testdata/node"),
        &mut files,
    );
    assert!(
        files.len() >= 100,
        "ONNX test models missing ({} found): run scripts/test.sh",
        files.len()
    );
    let mut differ = Vec::new();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let m =
            ModelProto::decode(bytes.as_slice()).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        if m.encode_to_vec() != bytes {
            differ.push(f.display().to_string());
        }
    }
    println!(
        "proto wire round trip: {} of {} models re-encode to identical bytes",
        files.len() - differ.len(),
        files.len()
    );
    assert!(
        differ.is_empty(),
        "{} models re-encode differently, e.g. {:?}",
        differ.len(),
        &differ[..differ.len().min(5)]
    );
}

#[test]
fn a_model_built_by_onnx_helper_decodes_field_by_field() {
    // A model exercising functions, training info, sparse initializers, external data entries,
    // metadata and device configurations, written by the onnx package; compared by fields.
    let script = r#"
import sys, onnx
from onnx import helper, TensorProto
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="n")], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
    [helper.make_tensor("w", TensorProto.INT64, [2], [7, -8])],
    sparse_initializer=[helper.make_sparse_tensor(helper.make_tensor("sv", TensorProto.FLOAT, [1], [3.5]),
                                                  helper.make_tensor("si", TensorProto.INT64, [1], [1]), [4])])
ext = TensorProto(name="e", data_type=TensorProto.FLOAT, dims=[2], raw_data=bytes(8))
onnx.external_data_helper.set_external_data(ext, "weights.bin", offset=16, length=8)
ext.ClearField("raw_data")
g.initializer.append(ext)
f = helper.make_function("local", "F", ["a"], ["b"], [helper.make_node("Relu", ["a"], ["b"])],
                         [helper.make_opsetid("", 19)], attributes=["alpha"])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19), helper.make_opsetid("local", 1)],
                      functions=[f], producer_name="wire-test", doc_string="doc")
helper.set_model_props(m, {"k": "v"})
t = m.training_info.add()
t.initialization.name = "init"
t.initialization_binding.add(key="w", value="y")
c = m.configuration.add(name="cfg", num_devices=2)
c.device.extend(["cpu0", "cpu1"])
sys.stdout.buffer.write(m.SerializeToString())
"#;
    let out = std::process::Command::new(python())
        .args(["-c", script])
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o.stdout,
        _ => panic!("python with onnx is required: run scripts/setup-test-env.sh"),
    };
    let m = ModelProto::decode(out.as_slice()).unwrap();
    assert_eq!(m.encode_to_vec(), out);
    assert_eq!(m.producer_name.as_deref(), Some("wire-test"));
    assert_eq!(m.metadata_props[0].key.as_deref(), Some("k"));
    let g = m.graph.as_ref().unwrap();
    assert_eq!(g.initializer[0].int64_data, vec![7, -8]);
    assert_eq!(g.sparse_initializer[0].dims, vec![4]);
    assert_eq!(g.initializer[1].data_location, Some(1));
    let ext: Vec<(&str, &str)> = g.initializer[1]
        .external_data
        .iter()
        .map(|e| (e.key.as_deref().unwrap(), e.value.as_deref().unwrap()))
        .collect();
    assert_eq!(
        ext,
        vec![
            ("location", "weights.bin"),
            ("offset", "16"),
            ("length", "8")
        ]
    );
    assert_eq!(m.functions[0].name.as_deref(), Some("F"));
    assert_eq!(m.functions[0].attribute, vec!["alpha".to_string()]);
    assert_eq!(
        m.training_info[0].initialization_binding[0]
            .value
            .as_deref(),
        Some("y")
    );
    assert_eq!(
        m.configuration[0].device,
        vec!["cpu0".to_string(), "cpu1".to_string()]
    );
}
