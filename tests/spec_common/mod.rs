//! Shared helpers for the spec checker tests: model builders, the invalid variants (one per
//! rule), and the Python `onnx.checker` oracle.
#![forbid(unsafe_code)]
#![allow(dead_code)]

use onnxifi_rust::check::spec::{check_model_with, Options, Rule, Violation};
use onnxifi_rust::model::onnx::{
    attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto, type_proto,
    AttributeProto, DeviceConfigurationProto, FunctionProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, SparseTensorProto, StringStringEntryProto, TensorProto, TensorShapeProto,
    TrainingInfoProto, TypeProto, ValueInfoProto,
};
use std::path::{Path, PathBuf};
use std::process::Command;

pub const FLOAT: i32 = DataType::Float as i32;
pub const BOOL: i32 = DataType::Bool as i32;
pub const INT64: i32 = DataType::Int64 as i32;

pub fn so(s: &str) -> Option<String> {
    Some(s.to_string())
}

pub fn tensor_type(elem: i32, dims: Option<&[i64]>) -> TypeProto {
    TypeProto {
        denotation: None,
        value: Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: Some(elem),
            shape: dims.map(|d| TensorShapeProto {
                dim: d
                    .iter()
                    .map(|&v| tensor_shape_proto::Dimension {
                        denotation: None,
                        value: Some(tensor_shape_proto::dimension::Value::DimValue(v)),
                    })
                    .collect(),
            }),
        })),
    }
}

pub fn vi(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: so(name),
        r#type: Some(tensor_type(elem, Some(dims))),
        ..Default::default()
    }
}

pub fn node(op: &str, name: &str, ins: &[&str], outs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: so(op),
        name: if name.is_empty() { None } else { so(name) },
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

pub fn attr_f(name: &str, f: f32) -> AttributeProto {
    AttributeProto {
        name: so(name),
        r#type: Some(AttributeType::Float as i32),
        f: Some(f),
        ..Default::default()
    }
}

pub fn attr_g(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: so(name),
        r#type: Some(AttributeType::Graph as i32),
        g: Some(g),
        ..Default::default()
    }
}

pub fn ftensor(name: &str, dims: &[i64], data: &[f32]) -> TensorProto {
    TensorProto {
        name: so(name),
        dims: dims.to_vec(),
        data_type: Some(FLOAT),
        float_data: data.to_vec(),
        ..Default::default()
    }
}

pub fn opset(domain: &str, v: i64) -> OperatorSetIdProto {
    OperatorSetIdProto {
        domain: so(domain),
        version: Some(v),
    }
}

pub fn kv(k: &str, v: &str) -> StringStringEntryProto {
    StringStringEntryProto {
        key: so(k),
        value: so(v),
    }
}

/// The valid base model: `Y = LeakyRelu(X, alpha=0.1) + B`, B an initializer.
pub fn base() -> ModelProto {
    let mut lrelu = node("LeakyRelu", "lrelu1", &["X"], &["A"]);
    lrelu.attribute.push(attr_f("alpha", 0.1));
    ModelProto {
        ir_version: Some(10),
        opset_import: vec![opset("", 21)],
        producer_name: so("spec-test"),
        graph: Some(GraphProto {
            name: so("main"),
            input: vec![vi("X", FLOAT, &[2, 3])],
            initializer: vec![ftensor("B", &[3], &[1.0, 2.0, 3.0])],
            node: vec![lrelu, node("Add", "add1", &["A", "B"], &["Y"])],
            output: vec![vi("Y", FLOAT, &[2, 3])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A branch of the If model: `OUT = op(A, B)`, both outer values.
pub fn branch(name: &str, op: &str, out: &str) -> GraphProto {
    GraphProto {
        name: so(name),
        node: vec![node(op, &format!("{name}_n"), &["A", "B"], &[out])],
        output: vec![vi(out, FLOAT, &[2, 3])],
        ..Default::default()
    }
}

/// A valid model with an If whose branches read outer values: `Y = If(C, A+B, A-B)`.
pub fn with_if() -> ModelProto {
    let mut m = base();
    let g = m.graph.as_mut().unwrap();
    g.input.push(vi("C", BOOL, &[]));
    let mut iff = node("If", "if1", &["C"], &["Y"]);
    iff.attribute
        .push(attr_g("then_branch", branch("then_g", "Add", "T1")));
    iff.attribute
        .push(attr_g("else_branch", branch("else_g", "Sub", "E1")));
    g.node[1] = iff;
    m
}

/// A valid model with a local function `custom.MyRelu` used by the main graph.
pub fn with_function() -> ModelProto {
    let mut m = base();
    m.opset_import.push(opset("custom", 1));
    m.functions.push(FunctionProto {
        name: so("MyRelu"),
        domain: so("custom"),
        input: vec!["x".into()],
        output: vec!["y".into()],
        opset_import: vec![opset("", 21)],
        node: vec![node("Relu", "r", &["x"], &["y"])],
        ..Default::default()
    });
    let g = m.graph.as_mut().unwrap();
    let mut call = node("MyRelu", "call1", &["A"], &["R"]);
    call.domain = so("custom");
    g.node.insert(1, call);
    g.node[2].input[0] = "R".into();
    m
}

/// A valid training model: B is initialised by a Constant and updated by `B_new = B * B`.
pub fn with_training() -> ModelProto {
    let mut m = base();
    let mut cst = node("Constant", "c", &[], &["B_init"]);
    cst.attribute.push(AttributeProto {
        name: so("value"),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(ftensor("", &[3], &[0.0, 0.0, 0.0])),
        ..Default::default()
    });
    m.training_info.push(TrainingInfoProto {
        initialization: Some(GraphProto {
            name: so("init"),
            node: vec![cst],
            output: vec![vi("B_init", FLOAT, &[3])],
            ..Default::default()
        }),
        algorithm: Some(GraphProto {
            name: so("algo"),
            node: vec![node("Mul", "m", &["B", "B"], &["B_new"])],
            output: vec![vi("B_new", FLOAT, &[3])],
            ..Default::default()
        }),
        initialization_binding: vec![kv("B", "B_init")],
        update_binding: vec![kv("B", "B_new")],
    });
    m
}

/// A valid model with an (unused) sparse initializer S (dense [4], one value at index 2).
pub fn with_sparse() -> ModelProto {
    let mut m = base();
    let g = m.graph.as_mut().unwrap();
    g.sparse_initializer.push(SparseTensorProto {
        values: Some(ftensor("S", &[1], &[5.0])),
        indices: Some(TensorProto {
            name: so("S_idx"),
            dims: vec![1],
            data_type: Some(INT64),
            int64_data: vec![2],
            ..Default::default()
        }),
        dims: vec![4],
    });
    m
}

/// A valid model whose initializer B lives in an external file.
pub fn with_external() -> ModelProto {
    let mut m = base();
    let b = &mut m.graph.as_mut().unwrap().initializer[0];
    b.float_data.clear();
    b.data_location = Some(1);
    b.external_data = vec![
        kv("location", "weights/b.bin"),
        kv("offset", "0"),
        kv("length", "12"),
    ];
    m
}

/// A valid model with a device configuration (IR 11).
pub fn with_device_config() -> ModelProto {
    let mut m = base();
    m.ir_version = Some(11);
    m.configuration.push(DeviceConfigurationProto {
        name: so("cfg"),
        num_devices: Some(2),
        device: vec!["gpu0".into(), "gpu1".into()],
    });
    m
}

fn g(m: &mut ModelProto) -> &mut GraphProto {
    m.graph.as_mut().unwrap()
}

/// One invalid model: built from a valid one so that it breaks `rule`.
pub struct Variant {
    /// Unique name (also the file name in the agreement test).
    pub name: &'static str,
    /// The rule the variant breaks.
    pub rule: Rule,
    /// Other rules allowed to fire as a consequence (a cycle is also out of order).
    pub also: &'static [Rule],
    /// Whether the rule is pedantic (checked with `Options::pedantic`).
    pub pedantic: bool,
    /// Builds the model.
    pub build: fn() -> ModelProto,
    /// Where onnx.checker is known to accept the variant: why the spec is followed instead.
    pub checker_lenient: Option<&'static str>,
}

const fn v(name: &'static str, rule: Rule, build: fn() -> ModelProto) -> Variant {
    Variant {
        name,
        rule,
        also: &[],
        pedantic: false,
        build,
        checker_lenient: None,
    }
}

const fn lenient(
    name: &'static str,
    rule: Rule,
    build: fn() -> ModelProto,
    why: &'static str,
) -> Variant {
    Variant {
        name,
        rule,
        also: &[],
        pedantic: false,
        build,
        checker_lenient: Some(why),
    }
}

fn nest_ifs(depth: usize) -> GraphProto {
    let mut inner = GraphProto {
        name: so(&format!("g{depth}")),
        node: vec![node("Identity", "", &["A"], &[&format!("o{depth}")])],
        output: vec![vi(&format!("o{depth}"), FLOAT, &[2, 3])],
        ..Default::default()
    };
    for d in (0..depth).rev() {
        let out = format!("o{d}");
        let mut iff = node("If", "", &["C"], &[&out]);
        iff.attribute.push(attr_g("then_branch", inner));
        let eo = format!("eo{d}");
        iff.attribute.push(attr_g(
            "else_branch",
            GraphProto {
                name: so(&format!("e{d}")),
                node: vec![node("Identity", "", &["A"], &[&eo])],
                output: vec![vi(&eo, FLOAT, &[2, 3])],
                ..Default::default()
            },
        ));
        inner = GraphProto {
            name: so(&format!("g{d}")),
            node: vec![iff],
            output: vec![vi(&out, FLOAT, &[2, 3])],
            ..Default::default()
        };
    }
    inner
}

/// Every invalid variant. Each rule of `RULES` has at least one.
pub fn variants() -> Vec<Variant> {
    use Rule::*;
    vec![
        v("ir_version_missing", IrVersion, || {
            let mut m = base();
            m.ir_version = None;
            m
        }),
        v("ir_version_unknown", IrVersion, || {
            let mut m = base();
            m.ir_version = Some(99);
            m
        }),
        lenient("ir_features_graph_metadata_ir9", IrVersionFeatures, || {
            let mut m = base();
            m.ir_version = Some(9);
            g(&mut m).metadata_props.push(kv("k", "v"));
            m
        }, "onnx.checker does not compare fields against the declared IR version; the proto marks graph metadata_props as added in IR 10"),
        lenient("ir_features_function_ir7", IrVersionFeatures, || {
            let mut m = with_function();
            m.ir_version = Some(7);
            m
        }, "onnx.checker does not compare model-local functions with the declared IR version; functions were added in IR 8"),
        v("ir3_initializer_not_input", IrVersionFeatures, || {
            let mut m = base();
            m.ir_version = Some(3);
            m.opset_import = vec![opset("", 8)];
            m
        }),
        v("model_graph_missing", ModelGraph, || {
            let mut m = base();
            m.graph = None;
            m
        }),
        v("opset_import_empty", OpsetImported, || {
            let mut m = base();
            m.opset_import.clear();
            m
        }),
        v("node_domain_not_imported", OpsetImported, || {
            let mut m = base();
            g(&mut m).node[1].domain = so("com.example");
            m
        }),
        lenient("opset_version_missing", OpsetImportWellformed, || {
            let mut m = base();
            m.opset_import.push(OperatorSetIdProto {
                domain: so("ai.onnx.ml"),
                version: None,
            });
            m
        }, "onnx.checker accepts an operator set import without a version; the proto requires the version field"),
        lenient("opset_domain_twice", OneVersionPerDomain, || {
            let mut m = base();
            m.opset_import.push(opset("ai.onnx", 20));
            m
        }, "onnx.checker keeps one entry per domain without reporting the duplicate (ai.onnx and the empty domain are the same set); a model binds one version per domain"),
        v("graph_name_empty", GraphName, || {
            let mut m = base();
            g(&mut m).name = None;
            m
        }),
        v("subgraph_name_empty", GraphName, || {
            let mut m = with_if();
            g(&mut m).node[1].attribute[0].g.as_mut().unwrap().name = None;
            m
        }),
        Variant { pedantic: true, ..lenient("graph_name_reused", UniqueGraphNames, || {
            let mut m = with_if();
            m.domain = so("org.example.spec");
            g(&mut m).node[1].attribute[0].g.as_mut().unwrap().name = so("else_g");
            m
        }, "onnx.checker does not compare graph names; the IR text's Graph namespace asks for unique names, but the reference's own expanded-function models reuse them, so the rule is pedantic") },
        v("input_unnamed", IoNamed, || {
            let mut m = base();
            g(&mut m).input.push(ValueInfoProto {
                name: so(""),
                r#type: Some(tensor_type(FLOAT, Some(&[1]))),
                ..Default::default()
            });
            m
        }),
        v("output_untyped", IoTypedWithShape, || {
            let mut m = base();
            g(&mut m).output[0].r#type = None;
            m
        }),
        v("input_without_shape", IoTypedWithShape, || {
            let mut m = base();
            g(&mut m).input[0].r#type = Some(tensor_type(FLOAT, None));
            m
        }),
        lenient("value_info_without_elem_type", TypeWellformed, || {
            let mut m = base();
            g(&mut m).value_info.push(ValueInfoProto {
                name: so("A"),
                r#type: Some(TypeProto {
                    denotation: None,
                    value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                        elem_type: None,
                        shape: None,
                    })),
                }),
                ..Default::default()
            });
            m
        }, "onnx.checker does not check value_info types; the proto requires an elem_type on every tensor type"),
        lenient("value_info_type_without_kind", TypeHasKind, || {
            let mut m = base();
            g(&mut m).value_info.push(ValueInfoProto {
                name: so("A"),
                r#type: Some(TypeProto {
                    denotation: None,
                    value: None,
                }),
                ..Default::default()
            });
            m
        }, "onnx.checker accepts a type with no kind (silero-vad's subgraph outputs have one); the proto's TypeProto.value is a required oneof"),
        v("negative_dim_in_type", DimNonNegative, || {
            let mut m = base();
            g(&mut m).value_info.push(vi("A", FLOAT, &[2, -3]));
            m
        }),
        v("input_listed_twice", UniqueNames, || {
            let mut m = base();
            g(&mut m).input.push(vi("X", FLOAT, &[2, 3]));
            m
        }),
        lenient("node_name_reused", UniqueNodeNames, || {
            let mut m = base();
            g(&mut m).node[1].name = so("lrelu1");
            m
        }, "onnx.checker ignores node names; the Node namespace requires them unique within a graph"),
        lenient("output_listed_twice", UniqueNames, || {
            let mut m = base();
            g(&mut m).output.push(vi("Y", FLOAT, &[2, 3]));
            m
        }, "onnx.checker does not compare graph output names; the Value namespace requires unique names"),
        v("initializer_listed_twice", UniqueNames, || {
            let mut m = base();
            g(&mut m).initializer.push(ftensor("B", &[3], &[1.0, 2.0, 3.0]));
            m
        }),
        v("output_produced_twice", SsaSingleProducer, || {
            let mut m = base();
            g(&mut m).node.push(node("Relu", "relu2", &["X"], &["A"]));
            m
        }),
        v("node_output_redefines_input", SsaSingleProducer, || {
            let mut m = base();
            g(&mut m).node.push(node("Relu", "relu2", &["A"], &["X"]));
            m
        }),
        v("input_not_produced", InputNotProduced, || {
            let mut m = base();
            g(&mut m).node[1].input[1] = "Z".into();
            m
        }),
        v("output_not_produced", OutputNotProduced, || {
            let mut m = base();
            g(&mut m).output[0].name = so("Q");
            m
        }),
        v("nodes_out_of_order", TopologicalOrder, || {
            let mut m = base();
            g(&mut m).node.swap(0, 1);
            m
        }),
        Variant {
            also: &[TopologicalOrder],
            ..v("nodes_in_a_cycle", NoCycles, || {
                let mut m = base();
                g(&mut m).node[0].input[0] = "Y".into();
                m
            })
        },
        v("subgraph_shadows_outer_value", SubgraphScoping, || {
            let mut m = with_if();
            let then = g(&mut m).node[1].attribute[0].g.as_mut().unwrap();
            then.node[0].output[0] = "X".into();
            then.output[0].name = so("X");
            m
        }),
        v("subgraph_reads_later_value", SubgraphScoping, || {
            let mut m = with_if();
            let gr = g(&mut m);
            gr.node.push(node("Relu", "late", &["A"], &["L"]));
            gr.node[1].attribute[0].g.as_mut().unwrap().node[0].input[1] = "L".into();
            m
        }),
        v("subgraph_reads_unknown_value", InputNotProduced, || {
            let mut m = with_if();
            g(&mut m).node[1].attribute[0].g.as_mut().unwrap().node[0].input[1] = "nowhere".into();
            m
        }),
        v("subgraph_input_is_initializer", SubgraphInitializerNotInput, || {
            let mut m = with_if();
            let then = g(&mut m).node[1].attribute[0].g.as_mut().unwrap();
            then.input.push(vi("k", FLOAT, &[3]));
            then.initializer.push(ftensor("k", &[3], &[1.0, 1.0, 1.0]));
            m
        }),
        v("node_without_op_type", NodeOpType, || {
            let mut m = base();
            g(&mut m).node[1].op_type = None;
            m
        }),
        v("attribute_without_type", AttributeNameType, || {
            let mut m = base();
            g(&mut m).node[0].attribute[0].r#type = None;
            m
        }),
        v("attribute_without_name", AttributeNameType, || {
            let mut m = base();
            g(&mut m).node[0].attribute[0].name = None;
            m
        }),
        v("attribute_two_values", AttributeOneValue, || {
            let mut m = base();
            g(&mut m).node[0].attribute[0].floats = vec![0.2];
            m
        }),
        lenient("attribute_without_value", AttributeOneValue, || {
            let mut m = base();
            g(&mut m).node[0].attribute[0].f = None;
            m
        }, "onnx.checker accepts an attribute that carries no value field; the IR requires exactly one"),
        v("attribute_type_mismatch", AttributeTypeMatches, || {
            let mut m = base();
            g(&mut m).node[0].attribute[0].r#type = Some(AttributeType::Int as i32);
            m
        }),
        v("attribute_given_twice", AttributeNamesUnique, || {
            let mut m = base();
            g(&mut m).node[0].attribute.push(attr_f("alpha", 0.2));
            m
        }),
        lenient("ref_attr_outside_function", RefAttrInFunction, || {
            let mut m = base();
            let a = &mut g(&mut m).node[0].attribute[0];
            a.f = None;
            a.ref_attr_name = so("alpha");
            m
        }, "onnx.checker accepts reference attributes in the main graph; the IR allows them only in function bodies"),
        v("initializer_unnamed", InitializerNamed, || {
            let mut m = base();
            g(&mut m).initializer.push(ftensor("", &[1], &[1.0]));
            m
        }),
        v("tensor_without_data_type", TensorDataType, || {
            let mut m = base();
            g(&mut m).initializer[0].data_type = None;
            m
        }),
        v("tensor_data_in_wrong_field", TensorFieldMatchesType, || {
            let mut m = base();
            let b = &mut g(&mut m).initializer[0];
            b.float_data.clear();
            b.int64_data = vec![1, 2, 3];
            m
        }),
        v("initializer_dims_mismatch", InitializerDimsMatchData, || {
            let mut m = base();
            g(&mut m).initializer[0].dims = vec![4];
            m
        }),
        v("raw_data_size_mismatch", InitializerDimsMatchData, || {
            let mut m = base();
            let b = &mut g(&mut m).initializer[0];
            b.float_data.clear();
            b.raw_data = Some(vec![0; 10]);
            m
        }),
        v("raw_and_typed_data", RawAndTypedDataExclusive, || {
            let mut m = base();
            g(&mut m).initializer[0].raw_data = Some(vec![0; 12]);
            m
        }),
        v("external_absolute_location", ExternalDataWellformed, || {
            let mut m = with_external();
            g(&mut m).initializer[0].external_data[0] = kv("location", "/etc/passwd");
            m
        }),
        v("external_location_escapes", ExternalDataWellformed, || {
            let mut m = with_external();
            g(&mut m).initializer[0].external_data[0] = kv("location", "../../b.bin");
            m
        }),
        lenient("external_negative_offset", ExternalDataWellformed, || {
            let mut m = with_external();
            g(&mut m).initializer[0].external_data[1] = kv("offset", "-4096");
            m
        }, "onnx.checker does not parse the offset; the proto defines it as a byte position, a non-negative integer"),
        v("external_without_location", ExternalDataWellformed, || {
            let mut m = with_external();
            g(&mut m).initializer[0].external_data.remove(0);
            m
        }),
        v("external_with_inline_values", ExternalDataWellformed, || {
            let mut m = with_external();
            g(&mut m).initializer[0].float_data = vec![1.0, 2.0, 3.0];
            m
        }),
        v("sparse_index_out_of_range", SparseTensorWellformed, || {
            let mut m = with_sparse();
            g(&mut m).sparse_initializer[0].indices.as_mut().unwrap().int64_data = vec![7];
            m
        }),
        v("function_input_twice", FunctionsWellformed, || {
            let mut m = with_function();
            m.functions[0].input.push("x".into());
            m
        }),
        lenient("function_value_info_unknown_name", FunctionsWellformed, || {
            let mut m = with_function();
            m.functions[0].value_info.push(vi("elsewhere", FLOAT, &[2, 3]));
            m
        }, "onnx.checker does not relate function value_info to the body; the proto requires the names to refer to values of the function"),
        v("function_body_reads_unknown", InputNotProduced, || {
            let mut m = with_function();
            m.functions[0].node[0].input[0] = "z".into();
            m
        }),
        v("function_output_not_produced", OutputNotProduced, || {
            let mut m = with_function();
            m.functions[0].output[0] = "q".into();
            m
        }),
        v("function_defined_twice", FunctionUniqueId, || {
            let mut m = with_function();
            let f = m.functions[0].clone();
            m.functions.push(f);
            m
        }),
        v("function_calls_itself", FunctionsAcyclic, || {
            let mut m = with_function();
            let f = &mut m.functions[0];
            f.opset_import.push(opset("custom", 1));
            let mut call = node("MyRelu", "again", &["y0"], &["y"]);
            call.domain = so("custom");
            f.node[0].output[0] = "y0".into();
            f.node.push(call);
            m
        }),
        lenient("training_key_not_initializer", TrainingBindings, || {
            let mut m = with_training();
            m.training_info[0].update_binding[0] = kv("Q", "B_new");
            m
        }, "onnx.checker does not check training bindings; the IR requires keys to name initializers"),
        lenient("training_value_not_output", TrainingBindings, || {
            let mut m = with_training();
            m.training_info[0].initialization_binding[0] = kv("B", "nope");
            m
        }, "onnx.checker does not check training bindings; the IR requires values to name outputs of the step's graph"),
        lenient("training_key_bound_twice", TrainingBindings, || {
            let mut m = with_training();
            m.training_info[0].initialization_binding.push(kv("B", "B_init"));
            m
        }, "onnx.checker does not check training bindings; the IR requires unique keys"),
        lenient("training_initialization_missing", TrainingBindings, || {
            let mut m = with_training();
            m.training_info[0].initialization = None;
            m
        }, "onnx.checker does not check training bindings; initialization may be omitted only without initialization bindings"),
        lenient("device_count_mismatch", DeviceConfigWellformed, || {
            let mut m = with_device_config();
            m.configuration[0].device.pop();
            m
        }, "onnx.checker does not check device configurations; the proto requires one device name per device when names are given"),
        v("graphs_nested_too_deep", GraphDepthLimit, || {
                let mut m = with_if();
                let gr = g(&mut m);
                let mut iff = node("If", "deep", &["C"], &["D"]);
                iff.attribute.push(attr_g("then_branch", nest_ifs(70)));
                iff.attribute.push(attr_g("else_branch", branch("else_deep", "Mul", "ED")));
                gr.node.push(iff);
                gr.output.push(vi("D", FLOAT, &[2, 3]));
                m
        }),
        Variant {
            pedantic: true,
            ..lenient("name_not_c_identifier", CIdentifierNames, || {
                let mut m = base();
                m.domain = so("org.example.spec");
                let gr = g(&mut m);
                gr.node[0].output[0] = "0a".into();
                gr.node[1].input[0] = "0a".into();
                m
            }, "the newest IR text relaxed C-identifier names to SHOULD; onnx.checker does not check them")
        },
        lenient("opset_version_beyond_the_table", OpsetVersionKnown, || {
            let mut m = base();
            m.opset_import = vec![opset("", 9999)];
            m
        }, "onnx.checker resolves each operator to its newest version at or below the import and does not bound the imported version itself"),
        v("operator_unknown", OperatorExists, || {
            let mut m = base();
            g(&mut m).node[1].op_type = so("Addd");
            m
        }),
        v("operator_added_later", OperatorExists, || {
            let mut m = base();
            m.opset_import = vec![opset("", 19)];
            g(&mut m).node[0] = node("Gelu", "gelu1", &["X"], &["A"]);
            m
        }),
        v("operator_deprecated", OperatorNotDeprecated, || {
            let mut m = base();
            m.opset_import = vec![opset("", 10)];
            let gr = g(&mut m);
            gr.initializer.push(ftensor("S", &[2], &[1.0, 1.0]));
            gr.node[0] = node("Upsample", "up1", &["X", "S"], &["A"]);
            m
        }),
        v("operator_with_too_many_inputs", OperatorArity, || {
            let mut m = base();
            g(&mut m).node[0].input.push("B".into());
            m
        }),
        v("operator_with_too_few_inputs", OperatorArity, || {
            let mut m = base();
            g(&mut m).node[1].input.truncate(1);
            m
        }),
        v("required_input_left_empty", OperatorArity, || {
            let mut m = base();
            g(&mut m).node[1].input[1] = String::new();
            m
        }),
        v("attribute_not_declared", AttributeKnown, || {
            let mut m = base();
            g(&mut m).node[0].attribute.push(attr_f("beta", 0.5));
            m
        }),
        v("required_attribute_missing", AttributeRequired, || {
            let mut m = base();
            g(&mut m).node[0] = node("Cast", "cast1", &["X"], &["A"]);
            m
        }),
        v("if_without_else_branch", AttributeRequired, || {
            let mut m = with_if();
            g(&mut m).node[1]
                .attribute
                .retain(|a| a.name.as_deref() != Some("else_branch"));
            m
        }),
        v("attribute_of_the_wrong_schema_type", AttributeSchemaType, || {
            let mut m = base();
            let a = &mut g(&mut m).node[0].attribute[0];
            a.f = None;
            a.i = Some(1);
            a.r#type = Some(AttributeType::Int as i32);
            m
        }),
        v("operands_break_a_type_constraint", TypeConstraint, || {
            let mut m = base();
            g(&mut m).initializer[0] = TensorProto {
                name: so("B"),
                dims: vec![3],
                data_type: Some(7),
                int64_data: vec![1, 2, 3],
                ..Default::default()
            };
            m
        }),
        v("subgraph_output_is_an_outer_value", SubgraphOutputLocal, || {
            let mut m = with_if();
            let gr = g(&mut m);
            for a in &mut gr.node[1].attribute {
                if let Some(b) = a.g.as_mut() {
                    b.node.clear();
                    b.output[0].name = so("A");
                }
            }
            m
        }),
        v("initializer_contradicts_its_input", InitializerMatchesInput, || {
            let mut m = base();
            let gr = g(&mut m);
            gr.input.push(vi("B", FLOAT, &[4]));
            m
        }),
        v("conv_group_does_not_divide_channels", OperatorShapeRequirement, || {
            let mut m = base();
            let gr = g(&mut m);
            gr.input[0] = vi("X", FLOAT, &[1, 3, 4, 4]);
            gr.initializer
                .push(ftensor("W", &[3, 1, 1, 1], &[1.0, 1.0, 1.0]));
            let mut conv = node("ConvTranspose", "convt1", &["X", "W"], &["A"]);
            conv.attribute.push(AttributeProto {
                name: so("group"),
                i: Some(2),
                r#type: Some(AttributeType::Int as i32),
                ..Default::default()
            });
            gr.node[0] = conv;
            gr.node[1].input[1] = "A".into();
            gr.output[0] = vi("Y", FLOAT, &[1, 2, 4, 4]);
            m
        }),
        Variant {
            pedantic: true,
            ..lenient("model_without_domain", ModelDomain, base,
                "no producer sets ModelProto.domain; onnx.checker does not require it")
        },
    ]
}

/// The rules a model breaks, under the variant's options.
pub fn rules_of(m: &ModelProto, pedantic: bool) -> Vec<Violation> {
    check_model_with(
        m,
        &Options {
            pedantic,
            ..Options::default()
        },
    )
}

/// The Python interpreter with onnx: `$ONNXIFI_RUST_PYTHON`, else `.venv/bin/python` in the
/// crate root; panics when it is missing (never skips).
pub fn python() -> Option<PathBuf> {
    let p = match std::env::var_os("ONNXIFI_RUST_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"),
    };
    let ok = Command::new(&p)
        .args(["-c", "import onnx"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        return Some(p);
    }
    panic!(
        "no Python with onnx at {}: run scripts/setup-test-env.sh (or set ONNXIFI_RUST_PYTHON)",
        p.display()
    )
}

/// Runs `tests/py/onnx_check.py` with the given arguments and returns its stdout.
pub fn helper(py: &Path, args: &[&str], stdin: Option<&str>) -> String {
    use std::io::Write;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/onnx_check.py");
    let mut child = Command::new(py)
        .arg(script)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("the Python helper starts");
    {
        let mut sin = child.stdin.take().expect("stdin is piped");
        if let Some(text) = stdin {
            sin.write_all(text.as_bytes()).expect("write to the helper");
        }
    }
    let out = child.wait_with_output().expect("the Python helper runs");
    assert!(out.status.success(), "the Python helper failed: {args:?}");
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Runs onnx.checker on each file; returns, per path, `None` if accepted or the error.
pub fn onnx_checker(py: &Path, paths: &[PathBuf]) -> Vec<(PathBuf, Option<String>)> {
    let list: String = paths.iter().map(|p| format!("{}\n", p.display())).collect();
    let out = helper(py, &["check", "-"], Some(&list));
    let mut res = Vec::new();
    for line in out.lines() {
        let mut parts = line.splitn(3, '\t');
        let path = PathBuf::from(parts.next().unwrap_or(""));
        let verdict = parts.next().unwrap_or("");
        let msg = parts.next().unwrap_or("").to_string();
        res.push((path, if verdict == "OK" { None } else { Some(msg) }));
    }
    assert_eq!(res.len(), paths.len(), "one verdict per model");
    res
}
