//! Loading accepts what mainstream runtimes accept: rules that exporters break without changing
//! results (duplicate node names, `-1` dimensions, types without a kind) are enforced only in
//! strict mode; and a refusal lists every unsupported node, not only the first.
#![forbid(unsafe_code)]

mod common;

use common::{assert_values, f32t, model_bytes, run_ok};
use onnxifi_rust::check::spec::{check_model_for_load, Rule};
use onnxifi_rust::error::Status;
use onnxifi_rust::graph::compile_executable;
use onnxifi_rust::model::onnx::{tensor_shape_proto, ModelProto, TypeProto, ValueInfoProto};
use prost::Message;

/// A model as real exporters write it: two nodes share a name (spox), a value_info declares a
/// `-1` dimension (Paddle), another a type with no kind (silero-vad's subgraph outputs).
fn exporter_style_model() -> ModelProto {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] X) => (float[2, 3] Y)
{
  [same] A = Relu(X)
  [same] Y = Neg(A)
}"#;
    let mut m = ModelProto::decode(model_bytes(text).as_slice()).unwrap();
    let g = m.graph.as_mut().unwrap();
    let mut minus_one = common_vi("A");
    if let Some(onnxifi_rust::model::onnx::type_proto::Value::TensorType(t)) =
        minus_one.r#type.as_mut().and_then(|t| t.value.as_mut())
    {
        let dims = &mut t.shape.as_mut().unwrap().dim;
        dims[0].value = Some(tensor_shape_proto::dimension::Value::DimValue(-1));
    }
    g.value_info.push(minus_one);
    g.value_info.push(ValueInfoProto {
        name: Some("Y2".into()),
        r#type: Some(TypeProto {
            denotation: None,
            value: None,
        }),
        ..Default::default()
    });
    m
}

/// `float[2, 3] name`.
fn common_vi(name: &str) -> ValueInfoProto {
    let text = format!(
        r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] {name}) => (float[2, 3] Z) {{ Z = Relu({name}) }}"#
    );
    let m = ModelProto::decode(model_bytes(&text).as_slice()).unwrap();
    m.graph.unwrap().input[0].clone()
}

#[test]
fn exporter_quirks_load_and_run_but_fail_strict_mode() {
    let m = exporter_style_model();
    check_model_for_load(&m, false).expect("the load path accepts exporter quirks");
    let strict = check_model_for_load(&m, true).unwrap_err();
    assert_eq!(strict.status, Status::InvalidModel);
    assert!(
        strict.message.contains(Rule::DimNonNegative.id()) && strict.message.contains("2 more"),
        "strict mode names the first broken rule and counts the rest: {strict}"
    );
    let exe = compile_executable(&m.encode_to_vec(), Vec::new()).expect("loads");
    let out = run_ok(
        &exe,
        vec![f32t(&[2, 3], &[1.0, -2.0, 3.0, -4.0, 5.0, -6.0])],
    );
    assert_values(
        &out[0],
        &[2, 3],
        &[-1.0, 0.0, -3.0, 0.0, -5.0, 0.0],
        "-relu(x)",
    );
}

#[test]
fn each_quirk_is_its_own_strict_rule() {
    let all: Vec<Rule> = onnxifi_rust::check::spec::check_model(&exporter_style_model())
        .into_iter()
        .map(|v| v.rule)
        .collect();
    for r in [
        Rule::UniqueNodeNames,
        Rule::DimNonNegative,
        Rule::TypeHasKind,
    ] {
        assert!(all.contains(&r), "{r} not reported: {all:?}");
        assert!(!r.info().load, "{r} must not block loading");
    }
    for r in [
        Rule::SsaSingleProducer,
        Rule::InputNotProduced,
        Rule::NoCycles,
    ] {
        assert!(r.info().load, "{r} changes results and must block loading");
    }
}

#[test]
fn a_refusal_lists_every_unsupported_node() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17, "com.example" : 1]>
g (float[4] X) => (float[4] Y)
{
  [c] A = Bernoulli(X)
  [r] B = Relu(A)
  [s] C = RandomUniformLike(B)
  [f] Y = com.example.Frob(C)
}"#;
    let e = compile_executable(&model_bytes(text), Vec::new())
        .err()
        .expect("refused");
    assert_eq!(e.status, Status::UnsupportedOperator, "{e}");
    for needle in [
        "3 problems",
        "node 'c' (Bernoulli)",
        "node 's' (RandomUniformLike)",
        "node 'f' (Frob)",
        "com.example::Frob",
    ] {
        assert!(e.message.contains(needle), "{needle:?} missing from: {e}");
    }
    assert!(
        !e.message.contains("(Relu)"),
        "a supported node is not listed: {e}"
    );
}
