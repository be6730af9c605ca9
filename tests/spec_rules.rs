//! One test per rule of the spec checker: a model that breaks exactly that rule (built from a
//! valid base model) must be flagged with it; the valid models must not be flagged at all.
#![forbid(unsafe_code)]

mod spec_common;

use onnxifi_rust::check::spec::{
    check_model, check_model_first, check_model_with, Level, Options, Rule, RULES,
};
use onnxifi_rust::error::Status;
use onnxifi_rust::model::onnx::{type_proto, GraphProto, ModelProto, TypeProto, ValueInfoProto};
use prost::Message;
use spec_common::*;

/// Builds the named variant and asserts its rule fires and nothing unexpected does.
fn assert_variant(name: &str) {
    let all = variants();
    let v = all
        .iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no variant {name}"));
    let m = (v.build)();
    let found = rules_of(&m, v.pedantic);
    assert!(
        found.iter().any(|x| x.rule == v.rule),
        "{name}: expected {} to fire, got {found:#?}",
        v.rule
    );
    let stray: Vec<_> = found
        .iter()
        .filter(|x| x.rule != v.rule && !v.also.contains(&x.rule))
        .collect();
    assert!(stray.is_empty(), "{name}: unexpected violations {stray:#?}");
    if v.pedantic {
        assert!(
            check_model(&m).is_empty(),
            "{name}: a pedantic rule fired without Options::pedantic"
        );
    }
}

macro_rules! variant_tests {
    ($($name:ident),* $(,)?) => {
        $( #[test] fn $name() { assert_variant(stringify!($name)); } )*
        /// The names of the variants that have a test above.
        const TESTED: &[&str] = &[$(stringify!($name)),*];
    };
}

variant_tests!(
    ir_version_missing,
    ir_version_unknown,
    ir_features_graph_metadata_ir9,
    ir_features_function_ir7,
    ir3_initializer_not_input,
    model_graph_missing,
    opset_import_empty,
    node_domain_not_imported,
    opset_version_missing,
    opset_domain_twice,
    graph_name_empty,
    subgraph_name_empty,
    graph_name_reused,
    input_unnamed,
    output_untyped,
    input_without_shape,
    value_info_without_elem_type,
    value_info_type_without_kind,
    negative_dim_in_type,
    input_listed_twice,
    node_name_reused,
    output_listed_twice,
    initializer_listed_twice,
    output_produced_twice,
    node_output_redefines_input,
    input_not_produced,
    output_not_produced,
    nodes_out_of_order,
    nodes_in_a_cycle,
    subgraph_shadows_outer_value,
    subgraph_reads_later_value,
    subgraph_reads_unknown_value,
    subgraph_input_is_initializer,
    node_without_op_type,
    attribute_without_type,
    attribute_without_name,
    attribute_two_values,
    attribute_without_value,
    attribute_type_mismatch,
    attribute_given_twice,
    ref_attr_outside_function,
    initializer_unnamed,
    tensor_without_data_type,
    tensor_data_in_wrong_field,
    initializer_dims_mismatch,
    raw_data_size_mismatch,
    raw_and_typed_data,
    external_absolute_location,
    external_location_escapes,
    external_negative_offset,
    external_without_location,
    external_with_inline_values,
    sparse_index_out_of_range,
    function_input_twice,
    function_value_info_unknown_name,
    function_body_reads_unknown,
    function_output_not_produced,
    function_defined_twice,
    function_calls_itself,
    training_key_not_initializer,
    training_value_not_output,
    training_key_bound_twice,
    training_initialization_missing,
    device_count_mismatch,
    graphs_nested_too_deep,
    name_not_c_identifier,
    model_without_domain,
    opset_version_beyond_the_table,
    operator_unknown,
    operator_added_later,
    operator_deprecated,
    operator_with_too_many_inputs,
    operator_with_too_few_inputs,
    required_input_left_empty,
    attribute_not_declared,
    required_attribute_missing,
    if_without_else_branch,
    attribute_of_the_wrong_schema_type,
    operands_break_a_type_constraint,
    subgraph_output_is_an_outer_value,
    initializer_contradicts_its_input,
    conv_group_does_not_divide_channels,
);

#[test]
fn every_variant_has_a_test_and_every_rule_a_variant() {
    let all = variants();
    for v in &all {
        assert!(TESTED.contains(&v.name), "variant {} has no test", v.name);
        assert_eq!(
            v.pedantic,
            v.rule.info().level == Level::Pedantic,
            "{}: pedantic flag disagrees with the rule's level",
            v.name
        );
    }
    let mut names: Vec<&str> = all.iter().map(|v| v.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len(), "variant names are unique");
    for r in RULES {
        assert!(
            all.iter().any(|v| v.rule == r.rule),
            "rule {} has no invalid variant",
            r.id
        );
    }
}

fn valid_models() -> Vec<(&'static str, ModelProto)> {
    let mut pedantic_clean = base();
    pedantic_clean.domain = so("org.example.spec");
    vec![
        ("base", base()),
        ("with_if", with_if()),
        ("with_function", with_function()),
        ("with_training", with_training()),
        ("with_sparse", with_sparse()),
        ("with_external", with_external()),
        ("with_device_config", with_device_config()),
        ("pedantic_clean", pedantic_clean),
    ]
}

#[test]
fn valid_models_are_not_flagged() {
    for (name, m) in valid_models() {
        let v = check_model(&m);
        assert!(v.is_empty(), "{name}: {v:#?}");
        assert_eq!(check_model_first(&m), Ok(()), "{name}");
    }
    let mut m = base();
    m.domain = so("org.example.spec");
    let pedantic = Options {
        pedantic: true,
        ..Options::default()
    };
    assert!(check_model_with(&m, &pedantic).is_empty());
}

#[test]
fn optional_empty_inputs_are_allowed() {
    let mut m = base();
    let g = m.graph.as_mut().unwrap();
    g.node.push(node("Clip", "clip1", &["Y", "", ""], &["Z"]));
    g.output.push(vi("Z", FLOAT, &[2, 3]));
    // An optional output left unnamed.
    g.node.push(node("Dropout", "drop1", &["Z"], &["W", ""]));
    g.output.push(vi("W", FLOAT, &[2, 3]));
    assert!(check_model(&m).is_empty(), "{:#?}", check_model(&m));
}

#[test]
fn initializer_may_also_be_a_main_graph_input() {
    let mut m = base();
    m.graph.as_mut().unwrap().input.push(vi("B", FLOAT, &[3]));
    assert!(check_model(&m).is_empty(), "{:#?}", check_model(&m));
    // IR 3: initializers must be inputs, and then the model is valid.
    m.ir_version = Some(3);
    m.opset_import = vec![opset("", 8)];
    assert!(check_model(&m).is_empty(), "{:#?}", check_model(&m));
}

#[test]
fn first_violation_is_an_invalid_model_error_naming_rule_and_node() {
    let mut m = base();
    m.graph.as_mut().unwrap().node[1].input[1] = "Z".into();
    let e = check_model_first(&m).unwrap_err();
    assert_eq!(e.status, Status::InvalidModel);
    assert!(e.message.contains("input-not-produced"), "{e}");
    assert!(e.message.contains("graph 'main' node 'add1' (#1)"), "{e}");
    assert!(e.message.contains("'Z'"), "{e}");
}

#[test]
fn unnamed_nodes_are_located_by_position_and_operator() {
    let mut m = base();
    let g = m.graph.as_mut().unwrap();
    g.node[1].name = None;
    g.node[1].input[1] = "Z".into();
    let v = check_model(&m);
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].location, "graph 'main' node #1 (Add)");
    assert_eq!(v[0].rule, Rule::InputNotProduced);
}

#[test]
fn nested_locations_name_the_path() {
    let mut m = with_if();
    let then = m.graph.as_mut().unwrap().node[1].attribute[0]
        .g
        .as_mut()
        .unwrap();
    then.node[0].input[1] = "nowhere".into();
    let v = check_model(&m);
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(
        v[0].location,
        "graph 'main' node 'if1' (#1) attribute 'then_branch' graph 'then_g' node 'then_g_n' (#0)"
    );
    assert!(v[0]
        .to_string()
        .starts_with("[input-not-produced] graph 'main'"));
}

#[test]
fn all_violations_are_reported_in_a_stable_order() {
    let mut m = base();
    let g = m.graph.as_mut().unwrap();
    g.name = None;
    g.node[1].input[1] = "Z".into();
    g.node[0].attribute[0].f = None;
    g.output[0].name = so("Q");
    let a = check_model(&m);
    let rules: Vec<Rule> = a.iter().map(|v| v.rule).collect();
    assert_eq!(
        rules,
        vec![
            Rule::GraphName,
            Rule::AttributeOneValue,
            Rule::InputNotProduced,
            Rule::OutputNotProduced
        ]
    );
    for _ in 0..5 {
        assert_eq!(check_model(&m), a);
    }
}

#[test]
fn subgraph_may_read_outer_values_at_any_depth() {
    let mut m = with_if();
    let then = m.graph.as_mut().unwrap().node[1].attribute[0]
        .g
        .as_mut()
        .unwrap();
    // A nested If inside the then-branch, reading A and B from the main graph and T1 from its
    // parent.
    let mut inner = node("If", "if2", &["C"], &["T2"]);
    inner
        .attribute
        .push(attr_g("then_branch", branch("inner_then", "Mul", "U1")));
    inner
        .attribute
        .push(attr_g("else_branch", branch("inner_else", "Div", "U2")));
    then.node.push(inner);
    then.node.push(node("Add", "", &["T1", "T2"], &["T3"]));
    then.output[0] = vi("T3", FLOAT, &[2, 3]);
    assert!(check_model(&m).is_empty(), "{:#?}", check_model(&m));
}

#[test]
fn cycle_through_a_subgraph_is_found() {
    // Node 0 reads, through its subgraph, the output of node 1, which reads node 0's output.
    let mut m = with_if();
    let g = m.graph.as_mut().unwrap();
    g.node[1].attribute[0].g.as_mut().unwrap().node[0].input[1] = "W".into();
    g.node.push(node("Relu", "r", &["Y"], &["W"]));
    let rules: Vec<Rule> = check_model(&m).iter().map(|v| v.rule).collect();
    assert!(rules.contains(&Rule::NoCycles), "{rules:?}");
}

#[test]
fn pedantic_rules_also_cover_dimension_variables() {
    let mut m = base();
    m.domain = so("org.example");
    let input = &mut m.graph.as_mut().unwrap().input[0];
    if let Some(TypeProto {
        value: Some(type_proto::Value::TensorType(t)),
        ..
    }) = input.r#type.as_mut()
    {
        t.shape.as_mut().unwrap().dim[0].value = Some(
            onnxifi_rust::model::onnx::tensor_shape_proto::dimension::Value::DimParam(
                "batch size".into(),
            ),
        );
    }
    assert!(check_model(&m).is_empty());
    let v = check_model_with(
        &m,
        &Options {
            pedantic: true,
            ..Options::default()
        },
    );
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].rule, Rule::CIdentifierNames);
}

#[test]
fn deeply_nested_types_are_cut_without_overflow() {
    let mut t = tensor_type(FLOAT, Some(&[1]));
    for _ in 0..1000 {
        t = TypeProto {
            denotation: None,
            value: Some(type_proto::Value::SequenceType(Box::new(
                type_proto::Sequence {
                    elem_type: Some(Box::new(t)),
                },
            ))),
        };
    }
    let mut m = base();
    m.graph.as_mut().unwrap().value_info.push(ValueInfoProto {
        name: so("A"),
        r#type: Some(t),
        ..Default::default()
    });
    let v = check_model(&m);
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].rule, Rule::GraphDepthLimit);
}

#[test]
fn depth_limit_is_configurable() {
    let m = with_if();
    let shallow = Options {
        max_depth: 0,
        ..Options::default()
    };
    let v = check_model_with(&m, &shallow);
    assert_eq!(v.len(), 2, "{v:#?}");
    assert!(v.iter().all(|v| v.rule == Rule::GraphDepthLimit));
}

#[test]
fn hostile_bytes_never_panic() {
    // Decode-then-check on truncated and bit-flipped encodings of every variant.
    for v in variants() {
        let bytes = (v.build)().encode_to_vec();
        for cut in [bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
            if let Ok(m) = ModelProto::decode(&bytes[..cut]) {
                let _ = check_model(&m);
            }
        }
        let mut flipped = bytes.clone();
        for i in (0..flipped.len()).step_by(7) {
            flipped[i] ^= 0x5a;
        }
        if let Ok(m) = ModelProto::decode(flipped.as_slice()) {
            let _ = check_model(&m);
        }
    }
}

#[test]
fn wide_graphs_are_checked_in_linear_time() {
    // 20,000 chained nodes; a quadratic checker would take minutes.
    let mut m = base();
    let g = m.graph.as_mut().unwrap();
    let mut prev = "Y".to_string();
    for i in 0..20_000 {
        let out = format!("v{i}");
        g.node
            .push(node("Relu", &format!("n{i}"), &[&prev], &[&out]));
        prev = out;
    }
    g.output[0] = vi(&prev, FLOAT, &[2, 3]);
    let t = std::time::Instant::now();
    let v = check_model(&m);
    assert!(v.is_empty(), "{:#?}", &v[..v.len().min(3)]);
    assert!(t.elapsed().as_secs() < 5, "took {:?}", t.elapsed());
}

#[test]
fn single_node_graph_check_is_fast() {
    let m = ModelProto {
        graph: Some(GraphProto {
            node: vec![node("Relu", "r", &["x"], &["y"])],
            ..base().graph.unwrap()
        }),
        ..base()
    };
    let mut m = m;
    let g = m.graph.as_mut().unwrap();
    g.initializer.clear();
    g.input[0].name = so("x");
    g.output[0].name = so("y");
    assert!(check_model(&m).is_empty(), "{:#?}", check_model(&m));
    let t = std::time::Instant::now();
    for _ in 0..1000 {
        assert!(check_model(&m).is_empty());
    }
    // Generous bound (debug build, shared machine): well under a millisecond each.
    assert!(
        t.elapsed().as_millis() < 1000,
        "1000 checks took {:?}",
        t.elapsed()
    );
}

#[test]
fn depth_limited_walk_fits_a_small_thread_stack() {
    // The checker runs on the caller's thread; 64 nested graphs must fit in 1 MiB of stack.
    let all = variants();
    let deep = all
        .iter()
        .find(|v| v.name == "graphs_nested_too_deep")
        .expect("variant exists");
    let m = (deep.build)();
    let rules = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            check_model(&m)
                .into_iter()
                .map(|v| v.rule)
                .collect::<Vec<_>>()
        })
        .expect("thread starts")
        .join()
        .expect("no stack overflow");
    assert!(
        !rules.is_empty() && rules.iter().all(|r| *r == Rule::GraphDepthLimit),
        "{rules:?}"
    );
}

#[test]
fn training_initialization_may_name_outputs_after_state_variables() {
    let mut m = with_training();
    let ti = &mut m.training_info[0];
    let init = ti.initialization.as_mut().unwrap();
    init.node[0].output[0] = "B".into();
    init.output[0].name = so("B");
    ti.initialization_binding[0] = kv("B", "B");
    assert!(check_model(&m).is_empty(), "{:#?}", check_model(&m));
}

#[test]
fn training_algorithm_may_not_redefine_main_values() {
    let mut m = with_training();
    let algo = m.training_info[0].algorithm.as_mut().unwrap();
    algo.node[0].output[0] = "A".into();
    algo.output[0].name = so("A");
    m.training_info[0].update_binding[0] = kv("B", "A");
    let rules: Vec<Rule> = check_model(&m).iter().map(|v| v.rule).collect();
    assert_eq!(rules, vec![Rule::SsaSingleProducer]);
}

#[test]
fn huge_depth_option_is_capped() {
    let all = variants();
    let deep = all
        .iter()
        .find(|v| v.name == "graphs_nested_too_deep")
        .expect("variant exists");
    let m = (deep.build)();
    let opts = Options {
        max_depth: usize::MAX,
        ..Options::default()
    };
    // 71 levels are below the cap of 256: nothing to report, and no overflow.
    assert!(check_model_with(&m, &opts).is_empty());
}
