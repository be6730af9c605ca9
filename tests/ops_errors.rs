//! The backend's verdicts on models it cannot run, and on runs with inputs that contradict the
//! model: each asserted on the ONNXIFI status and on the message naming what is wrong (the
//! node, by name and operator, or the value).
#![forbid(unsafe_code)]

mod common;

use common::{assert_values, compile, compile_ok, f32t, i64t, run, run_ok};
use onnxifi_rust::error::{Error, Status};
use onnxifi_rust::ir::{Tensor, TensorData};

/// Compiles `text`, expecting failure with `status` and a message containing every `needle`.
fn expect_compile_error(text: &str, status: Status, needles: &[&str]) -> Error {
    let e = match compile(text) {
        Ok(_) => panic!("the model compiled, expected {status}:\n{text}"),
        Err(e) => e,
    };
    assert_message(&e, status, needles);
    e
}

/// Asserts an error's status and that its message contains every `needle`.
fn assert_message(e: &Error, status: Status, needles: &[&str]) {
    assert_eq!(e.status, status, "wrong status for: {}", e.message);
    for n in needles {
        assert!(
            e.message.contains(n),
            "message {:?} does not mention {n:?}",
            e.message
        );
    }
}

#[test]
fn unsupported_operator_names_node_and_operator() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[4] X) => (float[4] Y)
{ [sampler] Y = Bernoulli(X) }"#;
    expect_compile_error(
        text,
        Status::UnsupportedOperator,
        &["node 'sampler' (Bernoulli)", "ai.onnx::Bernoulli"],
    );
}

#[test]
fn unsupported_operator_in_another_domain() {
    // A registered operator name in a foreign domain is not that operator.
    let text = r#"<ir_version: 8, opset_import: ["" : 17, "com.example" : 1]>
g (float[4] X) => (float[4] Y)
{ a = Relu(X)
  [custom] Y = com.example.Relu(a) }"#;
    expect_compile_error(
        text,
        Status::UnsupportedOperator,
        &["node 'custom' (Relu)", "com.example::Relu"],
    );
}

#[test]
fn unsupported_operator_without_a_node_name_is_named_by_position() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[4] X) => (float[4] Y)
{ a = Relu(X)
  Y = Bernoulli(a) }"#;
    expect_compile_error(
        text,
        Status::UnsupportedOperator,
        &["node '#1' (Bernoulli)", "ai.onnx::Bernoulli"],
    );
}

#[test]
fn unknown_attribute_names_node_and_attribute() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[4] X) => (float[4] Y)
{ [r] Y = Relu <alpha = 0.5> (X) }"#;
    // The operator's schema declares no such attribute: the model is invalid.
    expect_compile_error(
        text,
        Status::InvalidModel,
        &["[attribute-known]", "node 'r' (#0)", "'alpha'"],
    );
    // Also on an operator with many attributes.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,3] X) => (float[1,1,2,2] Y)
<float[1,1,2,2] W = {1, 0, 0, 1}>
{ [c] Y = Conv <padding = [1, 1, 1, 1]> (X, W) }"#;
    expect_compile_error(
        text,
        Status::InvalidModel,
        &["[attribute-known]", "node 'c' (#0)", "'padding'"],
    );
}

/// Strings live inside a graph: copied, compared, concatenated. (They have no byte layout in
/// an ONNXIFI buffer, so the C ABI refuses a string input or output: see the status matrix.)
#[test]
fn strings_are_copied_compared_and_concatenated_inside_a_graph() {
    let text = r#"<ir_version: 8, opset_import: ["" : 20]>
g (string[2] X) => (string[2] Y, bool[2] E, string[2] C)
<string[1] w = {"b"}>
{
  [id] Y = Identity(X)
  [eq] E = Equal(X, w)
  [cat] C = StringConcat(X, w)
}"#;
    let exe = compile_ok(text);
    let x = Tensor::new(vec![2], TensorData::String(vec!["a".into(), "b".into()])).unwrap();
    let out = run_ok(&exe, vec![x.clone()]);
    assert_eq!(out[0], x);
    assert_eq!(out[1].data, TensorData::Bool(vec![false, true]));
    assert_eq!(
        out[2].data,
        TensorData::String(vec!["ab".into(), "bb".into()])
    );
}

#[test]
fn strings_in_a_computing_operator_are_an_unsupported_datatype() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (string[2] X) => (string[2] Y)
{ [t] Y = Transpose(X) }"#;
    expect_compile_error(text, Status::UnsupportedDatatype, &["node 't'", "string"]);
}

/// Every integer width and the half types are stored and moved: Identity, Transpose and
/// Concat carry int16 / uint32 / float16 values through unchanged.
#[test]
fn narrow_and_half_types_move_through_data_operators() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (int16[2, 3] A, uint32[2] B, float16[2] C) => (int16[3, 2] TA, uint32[4] BB, float16[2] CC)
{
  [t] TA = Transpose(A)
  [c] BB = Concat<axis = 0>(B, B)
  [i] CC = Identity(C)
}"#;
    let exe = compile_ok(text);
    let a = Tensor::new(vec![2, 3], TensorData::I16(vec![1, -2, 3, -4, 5, -32768])).unwrap();
    let b = Tensor::new(vec![2], TensorData::U32(vec![7, 4_000_000_000])).unwrap();
    let c = Tensor::new(
        vec![2],
        TensorData::F16(vec![
            half::f16::from_f32(0.5),
            half::f16::from_f32(-65504.0),
        ]),
    )
    .unwrap();
    let out = run_ok(&exe, vec![a, b, c.clone()]);
    assert_eq!(out[0].data, TensorData::I16(vec![1, -4, -2, 5, 3, -32768]));
    assert_eq!(out[0].shape, vec![3, 2]);
    assert_eq!(
        out[1].data,
        TensorData::U32(vec![7, 4_000_000_000, 7, 4_000_000_000])
    );
    assert_eq!(out[2], c);
}

#[test]
fn double_input_to_a_float_operator_names_the_node() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (double[4] X) => (double[4] Y)
{ [r] Y = Relu(X) }"#;
    expect_compile_error(
        text,
        Status::UnsupportedDatatype,
        &["node 'r' (Relu)", "double"],
    );
}

#[test]
fn declared_output_shape_contradicting_inference() {
    // A 3×3 image and a 2×2 kernel give 2×2, not 3×3.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,3,3] X) => (float[1,1,3,3] Y)
<float[1,1,2,2] W = {1, 0, 0, 1}>
{ [conv] Y = Conv(X, W) }"#;
    expect_compile_error(
        text,
        Status::MismatchingShape,
        &["node 'conv' (Conv)", "'Y'", "[1, 1, 3, 3]", "[1, 1, 2, 2]"],
    );
    // Wrong rank.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] X) => (float[6] Y)
{ [t] Y = Transpose(X) }"#;
    expect_compile_error(
        text,
        Status::MismatchingShape,
        &["node 't' (Transpose)", "'Y'", "[6]", "[3, 2]"],
    );
}

#[test]
fn declared_intermediate_shape_contradicting_inference() {
    // value_info for an inner value: `h` is [2,2] after MatMul, declared [2,3].
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] X) => (float[2,2] Y)
<float[3,2] W = {1, 0, 0, 1, 1, 1}, float[2,3] h>
{ [mm] h = MatMul(X, W)
  [r] Y = Relu(h) }"#;
    expect_compile_error(
        text,
        Status::MismatchingShape,
        &["node 'mm' (MatMul)", "'h'", "[2, 3]"],
    );
}

#[test]
fn declared_output_type_contradicting_inference() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2] X) => (int64[2] Y)
{ [r] Y = Relu(X) }"#;
    // Relu's type constraint binds its output to its input's type.
    expect_compile_error(
        text,
        Status::InvalidModel,
        &["[type-constraint]", "node 'r' (#0)", "'Y'", "int64"],
    );
}

#[test]
fn declared_shape_with_symbolic_batch_is_checked_at_run_time() {
    // [N,3] · [3,2] is [N,2], declared [N,3]: the contradiction shows once N is known.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[N,3] X) => (float[N,3] Y)
<float[3,2] W = {1, 0, 0, 1, 1, 1}>
{ [mm] Y = MatMul(X, W) }"#;
    let exe = compile_ok(text);
    let e = run(&exe, vec![f32t(&[1, 3], &[1., 2., 3.])]).expect_err("must fail");
    assert_message(
        &e,
        Status::MismatchingShape,
        &["node 'mm' (MatMul)", "'Y'", "[N, 3]", "[1, 2]"],
    );
}

#[test]
fn bad_reshape_target_is_an_invalid_model() {
    for (target, needle) in [
        ("{4, 4}", "16"),
        ("{-1, -1}", "-1"),
        ("{-2, 3}", "-2"),
        ("{0, 0, 0, 6}", "0"),
    ] {
        let n = target.matches(',').count() + 1;
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 14]>
g (float[2,3] X) => (float[6] Y)
<int64[{n}] s = {target}>
{{ [r] Y = Reshape(X, s) }}"#
        );
        expect_compile_error(&text, Status::InvalidModel, &["node 'r' (Reshape)", needle]);
    }
}

#[test]
fn bad_reshape_target_fed_at_run_time() {
    // The target is a graph input: a good one runs, a bad one fails that run cleanly, and the
    // executable still runs afterwards.
    let text = r#"<ir_version: 8, opset_import: ["" : 14]>
g (float[2,3] X, int64[2] S) => (float[a,b] Y)
{ [r] Y = Reshape(X, S) }"#;
    let exe = compile_ok(text);
    let x = || f32t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
    let e = run(&exe, vec![x(), i64t(&[2], &[4, 4])]).expect_err("16 ≠ 6 elements");
    assert_message(&e, Status::InvalidModel, &["node 'r' (Reshape)"]);
    let out = run_ok(&exe, vec![x(), i64t(&[2], &[3, 2])]);
    assert_values(
        &out[0],
        &[3, 2],
        &[1., 2., 3., 4., 5., 6.],
        "after the failure",
    );
}

/// A model with a symbolic batch shared by two inputs: `Y = A + B`, `[N,2]`.
const TWO_INPUTS: &str = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[N,2] A, float[N,2] B) => (float[N,2] Y)
{ [add] Y = Add(A, B) }"#;

#[test]
fn run_with_wrong_input_dtype_fails_cleanly() {
    let exe = compile_ok(TWO_INPUTS);
    let ints = Tensor::new(vec![1, 2], TensorData::I64(vec![1, 2])).unwrap();
    let e = run(&exe, vec![f32t(&[1, 2], &[1., 2.]), ints]).expect_err("int64 for float");
    assert_message(&e, Status::MismatchingDatatype, &["'B'", "float", "int64"]);
    let out = run_ok(
        &exe,
        vec![f32t(&[1, 2], &[1., 2.]), f32t(&[1, 2], &[3., 4.])],
    );
    assert_values(&out[0], &[1, 2], &[4., 6.], "after the failure");
}

#[test]
fn run_with_wrong_input_shape_fails_cleanly() {
    let exe = compile_ok(TWO_INPUTS);
    // A fixed dimension wrong.
    let e = run(
        &exe,
        vec![f32t(&[1, 3], &[1., 2., 3.]), f32t(&[1, 2], &[1., 2.])],
    )
    .expect_err("[1,3] for [N,2]");
    assert_message(&e, Status::MismatchingShape, &["'A'"]);
    // The wrong rank.
    let e = run(&exe, vec![f32t(&[2], &[1., 2.]), f32t(&[1, 2], &[1., 2.])])
        .expect_err("rank 1 for rank 2");
    assert_message(&e, Status::MismatchingShape, &["'A'", "rank"]);
    // N bound to 1 by A and 2 by B.
    let e = run(
        &exe,
        vec![f32t(&[1, 2], &[1., 2.]), f32t(&[2, 2], &[1., 2., 3., 4.])],
    )
    .expect_err("N = 1 and N = 2");
    assert_message(&e, Status::MismatchingShape, &["'N'", "'B'"]);
    // Still usable, with N = 2.
    let out = run_ok(
        &exe,
        vec![
            f32t(&[2, 2], &[1., 2., 3., 4.]),
            f32t(&[2, 2], &[10., 20., 30., 40.]),
        ],
    );
    assert_values(
        &out[0],
        &[2, 2],
        &[11., 22., 33., 44.],
        "after the failures",
    );
}

#[test]
fn run_with_fixed_shape_mismatch() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,2] X) => (float[2,2] Y)
{ [r] Y = Relu(X) }"#;
    let exe = compile_ok(text);
    let e = run(&exe, vec![f32t(&[2, 1], &[1., 2.])]).expect_err("[2,1] for [2,2]");
    assert_message(&e, Status::MismatchingShape, &["'X'"]);
}

#[test]
fn operator_too_new_for_the_opset() {
    // Reshape with a shape input exists from opset 5; under opset 4 Reshape takes one input.
    let text = r#"<ir_version: 4, opset_import: ["" : 4]>
g (float[2,3] X) => (float[6] Y)
<int64[1] s = {6}>
{ [r] Y = Reshape(X, s) }"#;
    expect_compile_error(
        text,
        Status::InvalidModel,
        &["[operator-arity]", "node 'r' (#0)", "1 input(s)"],
    );
    // Reshape version 1 (the shape as an attribute) is valid, and not implemented here.
    let text = r#"<ir_version: 4, opset_import: ["" : 4]>
g (float[2,3] X) => (float[6] Y)
{ [r] Y = Reshape <shape = [6]> (X) }"#;
    expect_compile_error(
        text,
        Status::UnsupportedVersion,
        &["node 'r' (Reshape)", "opset 5"],
    );
}

#[test]
fn unsupported_features_of_supported_operators() {
    // BatchNormalization in training mode.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,2] X) => (float[1,1,2] Y)
<float[1] s = {1}, float[1] b = {0}, float[1] m = {0}, float[1] v = {1}>
{ [bn] Y = BatchNormalization <training_mode = 1> (X, s, b, m, v) }"#;
    expect_compile_error(
        text,
        Status::UnsupportedAttribute,
        &["node 'bn' (BatchNormalization)", "training"],
    );
    // The legacy Add broadcast axis (opset 6).
    let text = r#"<ir_version: 8, opset_import: ["" : 6]>
g (float[2,3] X) => (float[2,3] Y)
<float[2] b = {1, 2}>
{ [add] Y = Add <broadcast = 1, axis = 0> (X, b) }"#;
    expect_compile_error(
        text,
        Status::UnsupportedAttribute,
        &["node 'add' (Add)", "axis"],
    );
}

#[test]
fn shape_errors_name_the_node() {
    // Gemm inner dimensions.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] A) => (float[2,2] Y)
<float[2,2] B = {1, 0, 0, 1}>
{ [gemm] Y = Gemm(A, B) }"#;
    expect_compile_error(text, Status::InvalidModel, &["node 'gemm' (Gemm)", "inner"]);
    // Conv channels that do not fit the groups: declared, so the load-time checker sees it.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,2,2] X) => (float[1,2,2,2] Y)
<float[2,1,1,1] W = {1, 1}>
{ [conv] Y = Conv <group = 2> (X, W) }"#;
    expect_compile_error(
        text,
        Status::InvalidModel,
        &[
            "[operator-shape-requirement]",
            "node 'conv' (#0)",
            "group 2",
        ],
    );
    // The same contradiction found only once the symbolic channel count is bound: the plan
    // builder names the node.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,C,2,2] X) => (float[1,2,2,2] Y)
<float[2,1,1,1] W = {1, 1}>
{ [conv] Y = Conv <group = 2> (X, W) }"#;
    let exe = compile_ok(text);
    let e = run(&exe, vec![f32t(&[1, 3, 2, 2], &[0.0; 12])]).unwrap_err();
    assert_message(&e, Status::InvalidModel, &["node 'conv' (Conv)", "group 2"]);
    // Broadcasting that cannot happen.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] A, float[2] B) => (float[2,3] Y)
{ [mul] Y = Mul(A, B) }"#;
    expect_compile_error(
        text,
        Status::InvalidModel,
        &["node 'mul' (Mul)", "broadcast"],
    );
    // Concat inputs whose other dimensions differ.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] A, float[3,3] B) => (float[2,6] Y)
{ [cat] Y = Concat <axis = 1> (A, B) }"#;
    expect_compile_error(text, Status::InvalidModel, &["node 'cat' (Concat)"]);
    // An axis out of range.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] A) => (float[2,3] Y)
{ [sm] Y = Softmax <axis = 2> (A) }"#;
    expect_compile_error(
        text,
        Status::InvalidModel,
        &["node 'sm' (Softmax)", "axis 2"],
    );
    // A pooling window larger than the padded input.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,2,2] X) => (float[1,1,1,1] Y)
{ [mp] Y = MaxPool <kernel_shape = [3, 3]> (X) }"#;
    expect_compile_error(text, Status::InvalidModel, &["node 'mp' (MaxPool)"]);
}
#[test]
fn concat_of_scalars_is_an_invalid_model() {
    // Concat needs rank ≥ 1 (axis must lie in [-r, r-1], empty for scalars).
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1] X) => (float[2] Y, float[1] Z)
<float a = {1}, float b = {2}>
{ [cat] Y = Concat <axis = 0> (a, b)
  Z = Identity(X) }"#;
    expect_compile_error(text, Status::InvalidModel, &["node 'cat' (Concat)"]);
}

#[test]
fn reshape_target_whose_element_count_overflows() {
    // (2⁶¹ + 1)·(2⁶² + 6) = 2¹²³ + 2⁶⁴ + 6 ≡ 6 (mod 2⁶⁴): a wrapping product would take this
    // for the 6 elements of X.
    let text = r#"<ir_version: 8, opset_import: ["" : 14]>
g (float[6] X) => (float[a,b] Y)
<int64[2] s = {2305843009213693953, 4611686018427387910}>
{ [r] Y = Reshape(X, s) }"#;
    expect_compile_error(text, Status::InvalidModel, &["node 'r' (Reshape)"]);
    // Also with -1 to infer: 2⁶³ (two dims of 2³² · 2³¹) overflows before dividing.
    let text = r#"<ir_version: 8, opset_import: ["" : 14]>
g (float[6] X) => (float[a,b,c] Y)
<int64[3] s = {4294967296, 4294967296, -1}>
{ [r] Y = Reshape(X, s) }"#;
    expect_compile_error(text, Status::InvalidModel, &["node 'r' (Reshape)"]);
}

#[test]
fn output_shape_whose_element_count_overflows() {
    // Pads of 2⁴⁰ make a 2⁴¹ × 2⁴¹ output per plane: 2⁸² elements.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,2,2] X) => (float[a,b,c,d] Y)
{ [mp] Y = MaxPool <kernel_shape = [1, 1], pads = [1099511627776, 1099511627776, 1099511627776, 1099511627776]> (X) }"#;
    expect_compile_error(text, Status::UnsupportedShape, &["node 'mp' (MaxPool)"]);
    // Pads near i64::MAX: the padded size itself overflows.
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,2,2] X) => (float[a,b,c,d] Y)
<float[1,1,1,1] W = {1}>
{ [conv] Y = Conv <pads = [9223372036854775807, 0, 9223372036854775807, 0]> (X, W) }"#;
    let e = compile(text).err().expect("must be refused");
    assert!(
        matches!(e.status, Status::InvalidModel | Status::UnsupportedShape),
        "{e}"
    );
    assert!(e.message.contains("node 'conv' (Conv)"), "{e}");
}

/// A MatMul whose batch dimension is 2^40 answers NO_SYSTEM_MEMORY at load instead of aborting
/// the process on an allocation failure (found by the hostile-model run of the reliability
/// issue).
#[test]
fn huge_matmul_batch_is_no_system_memory() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1099511627776, 2, 4, 3] a, float[3, 5] b) => (float[1099511627776, 2, 4, 5] y)
{ [mm] y = MatMul(a, b) }"#;
    expect_compile_error(text, Status::NoSystemMemory, &["node 'mm' (MatMul)"]);
}

/// MaxPool's Indices output (row-major and, with `storage_order = 1`, column-major spatial
/// order) and a 3-D convolution, once refused, now compute hand-checked values.
#[test]
fn maxpool_indices_and_conv3d_compute() {
    for (order, want) in [(0, 1i64), (1, 2)] {
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,2,2] X) => (float[1,1,1,1] Y, int64[1,1,1,1] I)
{{ [mp] Y, I = MaxPool <kernel_shape = [2, 2], storage_order = {order}> (X) }}"#
        );
        let exe = compile_ok(&text);
        let out = run_ok(&exe, vec![f32t(&[1, 1, 2, 2], &[1.0, 4.0, 3.0, 2.0])]);
        assert_values(&out[0], &[1, 1, 1, 1], &[4.0], "max");
        assert_eq!(
            out[1].data,
            TensorData::I64(vec![want]),
            "storage_order {order}"
        );
    }
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,2,2,2] X) => (float[1,1,1,1,1] Y)
<float[1,1,2,2,2] W = {1, 1, 1, 1, 1, 1, 1, 1}>
{ [c3] Y = Conv(X, W) }"#;
    let exe = compile_ok(text);
    let x: Vec<f32> = (1..=8).map(|v| v as f32).collect();
    let out = run_ok(&exe, vec![f32t(&[1, 1, 2, 2, 2], &x)]);
    assert_values(&out[0], &[1, 1, 1, 1, 1], &[36.0], "sum of 1..8");
}

/// A model may name the internal `FusedMatMul` itself: permutations that are not ones, and a
/// transposed B that is a constant, are refused with INVALID_MODEL naming the node; a valid
/// permutation computes the transposed product.
#[test]
fn fused_matmul_with_bad_permutations_is_refused() {
    let model = |attrs: &str, b: &str| {
        format!(
            r#"<ir_version: 8, opset_import: ["" : 17, "onnxifi.rust" : 1]>
g (float[2, 3] a{b}) => (float[3, 3] y) <float[2, 3] w = {{1, 2, 3, 4, 5, 6}}>
{{ [fm] y = onnxifi.rust.FusedMatMul<{attrs}>(a, {}) }}"#,
            if b.is_empty() { "w" } else { "b" }
        )
    };
    for perm in ["[1, 1]", "[0]", "[1, 0, 2]", "[-1, 0]", "[2, 0]"] {
        expect_compile_error(
            &model(&format!("perm_a: ints = {perm}"), ", float[2, 3] b"),
            Status::InvalidModel,
            &["fm", "perm"],
        );
    }
    expect_compile_error(
        &model("perm_a: ints = [1, 0], perm_b: ints = [1, 0]", ""),
        Status::InvalidModel,
        &["fm", "perm_b"],
    );
    // aᵀ·b with a = [[1,2,3],[4,5,6]] and b = [[1,0,2],[0,1,1]].
    let exe = compile_ok(&model("perm_a: ints = [1, 0]", ", float[2, 3] b"));
    let a = f32t(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = f32t(&[2, 3], &[1.0, 0.0, 2.0, 0.0, 1.0, 1.0]);
    let out = run_ok(&exe, vec![a, b]);
    assert_values(
        &out[0],
        &[3, 3],
        &[1.0, 4.0, 6.0, 2.0, 5.0, 9.0, 3.0, 6.0, 12.0],
        "aᵀ·b",
    );
}

/// A product whose following Add cannot broadcast is refused as the Add alone would be, though
/// the rewrites fold that Add into the product: INVALID_MODEL naming the shapes.
#[test]
fn a_fused_addend_that_does_not_broadcast_is_refused() {
    let text = r#"<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] a, float[3, 4] b, float[5] z) => (float[2, 4] y)
{ [m] p = MatMul(a, b)  [s] y = Add(p, z) }"#;
    expect_compile_error(text, Status::InvalidModel, &["[5]", "broadcast"]);
}
