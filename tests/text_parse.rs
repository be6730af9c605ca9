//! Parser and printer behaviour against hand-written expectations: the protos a text must give,
//! error positions and rendering, the nesting limit, and the printed form.
#![forbid(unsafe_code)]

use onnxifi_rust::model::onnx::attribute_proto::AttributeType;
use onnxifi_rust::model::onnx::tensor_shape_proto::{dimension, Dimension};
use onnxifi_rust::model::onnx::type_proto::{self, Value as TypeValue};
use onnxifi_rust::model::onnx::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use onnxifi_rust::text::{
    normalize_node, parse_function, parse_graph, parse_model, parse_node, parse_node_list,
    parse_type, print_model, print_node, print_type, MAX_DEPTH,
};

fn tensor_type(elem: i32, dims: &[Dimension]) -> TypeProto {
    TypeProto {
        value: Some(TypeValue::TensorType(type_proto::Tensor {
            elem_type: Some(elem),
            shape: Some(TensorShapeProto { dim: dims.to_vec() }),
        })),
        denotation: None,
    }
}

fn dv(v: i64) -> Dimension {
    Dimension {
        value: Some(dimension::Value::DimValue(v)),
        denotation: None,
    }
}

fn dp(p: &str) -> Dimension {
    Dimension {
        value: Some(dimension::Value::DimParam(p.into())),
        denotation: None,
    }
}

fn vi(name: &str, t: TypeProto) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(t),
        ..Default::default()
    }
}

fn node(outs: &[&str], op: &str, ins: &[&str]) -> NodeProto {
    NodeProto {
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        op_type: Some(op.into()),
        domain: Some(String::new()),
        ..Default::default()
    }
}

#[test]
fn parses_the_documented_example() {
    let text = r#"
        <
          ir_version: 7,
          opset_import: [ "" : 10 ]
        >
        agraph (float[N, 128] X, float[128, 10] W, float[10] B) => (float[N, 10] C)
        {
            T = MatMul(X, W)
            S = Add(T, B)
            C = Softmax(S)
        }
    "#;
    let expected = ModelProto {
        ir_version: Some(7),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(10),
        }],
        graph: Some(GraphProto {
            name: Some("agraph".into()),
            input: vec![
                vi("X", tensor_type(1, &[dp("N"), dv(128)])),
                vi("W", tensor_type(1, &[dv(128), dv(10)])),
                vi("B", tensor_type(1, &[dv(10)])),
            ],
            output: vec![vi("C", tensor_type(1, &[dp("N"), dv(10)]))],
            node: vec![
                node(&["T"], "MatMul", &["X", "W"]),
                node(&["S"], "Add", &["T", "B"]),
                node(&["C"], "Softmax", &["S"]),
            ],
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(parse_model(text).unwrap(), expected);
}

#[test]
fn shapes_scalars_and_unknown_rank() {
    // No brackets: a scalar (empty shape). `[]`: unknown rank (no shape). `?`: unknown dim.
    assert_eq!(parse_type("float").unwrap(), tensor_type(1, &[]));
    let unranked = parse_type("int64[]").unwrap();
    assert_eq!(
        unranked.value,
        Some(TypeValue::TensorType(type_proto::Tensor {
            elem_type: Some(7),
            shape: None
        }))
    );
    assert_eq!(
        parse_type("float16[?, \"a b\", -1]").unwrap(),
        tensor_type(10, &[Dimension::default(), dp("a b"), dv(-1)])
    );
    let m = parse_type("map(string, seq(optional(float8e4m3fn[2])))").unwrap();
    let Some(TypeValue::MapType(map)) = m.value else {
        panic!("not a map: {m:?}")
    };
    assert_eq!(map.key_type, Some(8));
    let Some(TypeValue::SequenceType(seq)) = map.value_type.unwrap().value else {
        panic!()
    };
    let Some(TypeValue::OptionalType(opt)) = seq.elem_type.unwrap().value else {
        panic!()
    };
    assert_eq!(*opt.elem_type.unwrap(), tensor_type(17, &[dv(2)]));
    assert!(parse_type("sparse_tensor(seq(float))").is_err());
    assert!(parse_type("float4e2m1[3]").is_ok());
}

#[test]
fn nodes_with_labels_domains_overloads_and_empty_inputs() {
    let n = parse_node("[lbl] a, , b = com.microsoft.Foo:v2 <k = 3> (x, , y, \"\")").unwrap();
    assert_eq!(n.name.as_deref(), Some("lbl"));
    assert_eq!(n.output, ["a", "", "b"]);
    assert_eq!(n.input, ["x", "", "y", ""]);
    assert_eq!(n.domain.as_deref(), Some("com.microsoft"));
    assert_eq!(n.op_type.as_deref(), Some("Foo"));
    assert_eq!(n.overload.as_deref(), Some("v2"));
    assert_eq!(n.attribute[0].i, Some(3));
    // An empty last item is dropped; attributes may follow the inputs.
    let n = parse_node("y = Foo (x,) <a = 1.5>").unwrap();
    assert_eq!(n.input, ["x"]);
    assert_eq!(n.attribute[0].f, Some(1.5));
    assert_eq!(n.attribute[0].r#type, Some(AttributeType::Float as i32));
    assert!(parse_node("y = Foo (x) trailing").is_err());
    let list = parse_node_list("{ a = X() b = Y(a) }").unwrap();
    assert_eq!(list.len(), 2);
    assert_eq!(parse_node_list("a = X() b = Y(a)").unwrap(), list);
}

#[test]
fn attribute_kinds() {
    let n = parse_node(
        r#"y = Foo <i = -4, f = 1e-2, s = "a\"b\\c", fs = [2.5, 1], is: ints = [],
                    t = int64[2] tname = {5, -6}, r = @outer, tr: float = @o2,
                    tp: type_proto = seq(float), g = body () => () { z = Bar() }> ()"#,
    )
    .unwrap();
    let by = |name: &str| {
        n.attribute
            .iter()
            .find(|a| a.name.as_deref() == Some(name))
            .unwrap()
    };
    assert_eq!(by("i").i, Some(-4));
    assert_eq!(by("f").f, Some(0.01));
    assert_eq!(by("s").s.as_deref(), Some(&b"a\"b\\c"[..]));
    assert_eq!(by("fs").floats, [2.5, 1.0]);
    assert_eq!(by("fs").r#type, Some(AttributeType::Floats as i32));
    assert_eq!(by("is").r#type, Some(AttributeType::Ints as i32));
    assert!(by("is").ints.is_empty());
    let t = by("t").t.as_ref().unwrap();
    assert_eq!(
        (t.dims.as_slice(), t.data_type, t.int64_data.as_slice()),
        (&[2i64][..], Some(7), &[5i64, -6][..])
    );
    assert_eq!(t.name.as_deref(), Some("tname"));
    assert_eq!(
        *by("r"),
        AttributeProto {
            name: Some("r".into()),
            ref_attr_name: Some("outer".into()),
            ..Default::default()
        }
    );
    assert_eq!(by("tr").r#type, Some(AttributeType::Float as i32));
    assert!(by("tp").tp.is_some());
    assert_eq!(
        by("g").g.as_ref().unwrap().node[0].op_type.as_deref(),
        Some("Bar")
    );
    // Mixed lists, and the wrong value for a declared type, are errors.
    assert!(parse_node("y = Foo <a = [1, 2.5]> ()").is_err());
    assert!(parse_node("y = Foo <a: int = 1.5> ()").is_err());
    assert!(parse_node("y = Foo <a = []> ()").is_err());
}

#[test]
fn initializers_in_inputs_and_in_angle_brackets() {
    let g = parse_graph(
        "g (float[2] w = {1, 2}, x) => (y) <int32[1] c = {-3}, float[2] v, bool[] u, \
         float[4] e = [\"location\": \"f.bin\"]> { y = Add(w, x) }",
    )
    .unwrap();
    assert_eq!(g.input.len(), 2);
    assert_eq!(g.input[1].r#type, None);
    let names: Vec<_> = g
        .initializer
        .iter()
        .map(|t| t.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["w", "c", "e"]);
    assert_eq!(g.initializer[0].float_data, [1.0, 2.0]);
    assert_eq!(g.initializer[1].int32_data, [-3]);
    assert_eq!(g.initializer[2].data_location, Some(1));
    assert_eq!(
        g.initializer[2].external_data[0].value.as_deref(),
        Some("f.bin")
    );
    assert_eq!(g.value_info.len(), 2);
    assert!(parse_graph("g () => () <int32[1] c = {2147483648}> {}").is_err());
    assert!(parse_graph("g () => () <float[N] c = {1}> {}").is_err());
}

#[test]
fn functions_with_parameters_and_value_infos() {
    let f = parse_function(
        "<domain: \"d\", overload: \"o\", opset_import: [\"\" : 18]> \
         F <a, b: int = 2> (float x, y) => (z) <float t> { z = Id(x) }",
    )
    .unwrap();
    assert_eq!(f.domain.as_deref(), Some("d"));
    assert_eq!(f.overload.as_deref(), Some("o"));
    assert_eq!(f.attribute, ["a"]);
    assert_eq!(f.attribute_proto[0].i, Some(2));
    assert_eq!(f.input, ["x", "y"]);
    let infos: Vec<_> = f
        .value_info
        .iter()
        .map(|v| v.name.clone().unwrap())
        .collect();
    assert_eq!(infos, ["x", "t"]);
}

#[test]
fn errors_point_at_the_token() {
    let text = "g (float x) => (float y) {\n  y = Foo <a = [1, 2.5]> (x)\n}";
    let e = parse_model(text).unwrap_err();
    assert_eq!((e.line, e.column), (2, 20));
    assert_eq!(e.found, "`2.5`");
    assert!(e.expected.contains("INT"), "{}", e.expected);
    let shown = e.to_string();
    let lines: Vec<&str> = shown.lines().collect();
    assert_eq!(lines[1], "2 |   y = Foo <a = [1, 2.5]> (x)");
    assert_eq!(lines[2], "  |                    ^");

    let e = parse_model("g (float x) => (float y) {\n  y = Foo(x)\n").unwrap_err();
    assert_eq!(e.found, "end of input");
    assert_eq!(e.line, 3);
    let e = parse_model("g (x) => (y) { y = Foo <s = \"open> (x) }").unwrap_err();
    assert_eq!(e.column, 29);
    assert!(e.expected.contains('"'));
}

#[test]
fn nesting_is_limited_without_overflowing_the_stack() {
    let deep = format!("{}float{}", "seq(".repeat(100_000), ")".repeat(100_000));
    let e = parse_type(&deep).unwrap_err();
    assert!(e.expected.contains("nesting"), "{e}");
    let ok = format!(
        "{}float{}",
        "seq(".repeat(MAX_DEPTH - 1),
        ")".repeat(MAX_DEPTH - 1)
    );
    assert!(parse_type(&ok).is_ok());
    let mut g = String::from("g () => () { y = If (c) <then_branch = b () => () { z = X () }> }");
    for level in 0..200 {
        g = format!("g () => () {{ y = If (c) <then_branch = {}> }}", &g);
        if level == 10 {
            assert!(parse_graph(&g).is_ok(), "shallow nesting parses");
        }
    }
    let e = parse_graph(&g).unwrap_err();
    assert!(e.expected.contains("nesting"), "{e}");
}

#[test]
fn prints_readable_text() {
    let m = parse_model(
        "<ir_version: 8, opset_import: [\"\" : 18]> g (float[N] x) => (float[N] y) \
         <float[2] c = {1, 0.5}> { [n] y = Mul <fmod = 1, alpha = 2> (x, c) }",
    )
    .unwrap();
    let expected = "<\n  ir_version: 8,\n  opset_import: [\"\" : 18]\n>\n\
                    g (float[N] x) => (float[N] y)\n  <float[2] c = {1.0, 0.5}>\n{\n  \
                    [n] y = Mul <fmod: int = 1, alpha: int = 2> (x, c)\n}\n";
    assert_eq!(print_model(&m), expected);
    let n = NodeProto {
        output: vec!["out put".into()],
        input: vec!["a".into(), String::new(), String::new()],
        op_type: Some("Op".into()),
        domain: Some("ai.x".into()),
        attribute: vec![AttributeProto {
            name: Some("t".into()),
            r#type: Some(AttributeType::Tensor as i32),
            t: Some(TensorProto {
                data_type: Some(1),
                dims: vec![3],
                float_data: vec![f32::INFINITY, -0.0, 1e-20],
                ..Default::default()
            }),
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(
        print_node(&n),
        "\"out put\" = ai.x.Op <t: tensor = float[3] {inf, -0.0, 1e-20}> (a, , \"\")"
    );
    // The constant's absent name reads back as "" (see normalize_node).
    assert_eq!(parse_node(&print_node(&n)).unwrap(), normalize_node(&n));
    assert_ne!(normalize_node(&n), n);
    assert_eq!(
        print_type(&parse_type("map(int64, seq(float[])) ").unwrap()),
        "map(int64, seq(float[]))"
    );
}
