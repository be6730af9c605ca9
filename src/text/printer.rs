//! Printer: renders ONNX protos in the text syntax that [`super::parse_model`] reads back.
//!
//! What the syntax cannot hold (doc strings below the model, `raw_data` bytes, sparse tensors,
//! ...) is listed in [`super::normalize`]; everything else prints so that parsing the text
//! gives the proto back.
#![forbid(unsafe_code)]

use std::fmt::Write as _;

use super::normalize::{attr_kind, decode_raw};
use super::syntax::{
    attr_type_name, elem_type_name, is_float_keyword, is_identifier, is_type_keyword,
};
use crate::model::onnx::attribute_proto::AttributeType;
use crate::model::onnx::tensor_proto::DataLocation;
use crate::model::onnx::tensor_shape_proto::dimension;
use crate::model::onnx::type_proto::Value as TypeValue;
use crate::model::onnx::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

/// Indentation added per nesting level.
const INDENT: &str = "  ";

/// Renders a whole model.
pub fn model(m: &ModelProto) -> String {
    let mut out = String::new();
    let mut fields = Vec::new();
    if let Some(v) = m.ir_version {
        fields.push(format!("ir_version: {v}"));
    }
    if !m.opset_import.is_empty() {
        fields.push(format!("opset_import: {}", opsets(&m.opset_import)));
    }
    let strings = [
        ("producer_name", &m.producer_name),
        ("producer_version", &m.producer_version),
        ("domain", &m.domain),
    ];
    for (key, value) in strings {
        if let Some(v) = value {
            fields.push(format!("{key}: {}", quote(v)));
        }
    }
    if let Some(v) = m.model_version {
        fields.push(format!("model_version: {v}"));
    }
    if let Some(v) = &m.doc_string {
        fields.push(format!("doc_string: {}", quote(v)));
    }
    if !m.metadata_props.is_empty() {
        fields.push(format!(
            "metadata_props: {}",
            str_str_list(&m.metadata_props)
        ));
    }
    header(&mut out, &fields);
    let default_graph = GraphProto::default();
    graph_into(
        &mut out,
        m.graph.as_ref().unwrap_or(&default_graph),
        0,
        false,
    );
    out.push('\n');
    for f in &m.functions {
        out.push('\n');
        function_into(&mut out, f);
    }
    out
}

/// Renders a graph (top-level form: its name may be quoted).
pub fn graph(g: &GraphProto) -> String {
    let mut out = String::new();
    graph_into(&mut out, g, 0, false);
    out.push('\n');
    out
}

/// Renders a function with its header.
pub fn function(f: &FunctionProto) -> String {
    let mut out = String::new();
    function_into(&mut out, f);
    out
}

/// Renders one node on one line (more if it holds graph attributes), without a line break.
pub fn node(n: &NodeProto) -> String {
    let mut out = String::new();
    node_into(&mut out, n, 0);
    out
}

/// Renders a type (`float[N,3]`, `seq(int64)`, ...).
pub fn type_text(t: &TypeProto) -> String {
    let mut out = String::new();
    type_into(&mut out, t);
    out
}

/// `<\n  key: value,\n ...\n>\n`, or nothing when there are no fields.
fn header(out: &mut String, fields: &[String]) {
    if fields.is_empty() {
        return;
    }
    out.push_str("<\n");
    for (i, f) in fields.iter().enumerate() {
        out.push_str(INDENT);
        out.push_str(f);
        out.push_str(if i + 1 < fields.len() { ",\n" } else { "\n" });
    }
    out.push_str(">\n");
}

/// `["" : 18, "com.x" : 1]`
fn opsets(list: &[OperatorSetIdProto]) -> String {
    let items: Vec<String> = list
        .iter()
        .map(|o| {
            format!(
                "{} : {}",
                quote(o.domain.as_deref().unwrap_or("")),
                o.version.unwrap_or(0)
            )
        })
        .collect();
    format!("[{}]", items.join(", "))
}

/// `["k": "v", ...]`
fn str_str_list(list: &[StringStringEntryProto]) -> String {
    let items: Vec<String> = list
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                quote(e.key.as_deref().unwrap_or("")),
                quote(e.value.as_deref().unwrap_or(""))
            )
        })
        .collect();
    format!("[{}]", items.join(", "))
}

/// A quoted string: `"` and `\` are escaped with `\`; everything else is written as is.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

/// Bytes as a quoted string (invalid UTF-8 is replaced: the syntax holds text only).
fn quote_bytes(b: &[u8]) -> String {
    quote(&String::from_utf8_lossy(b))
}

/// A name: bare when it is an identifier that cannot be mistaken for a keyword, else quoted.
pub fn name(s: &str) -> String {
    if is_identifier(s) && !is_type_keyword(s) && !is_float_keyword(s) {
        s.to_string()
    } else {
        quote(s)
    }
}

/// A comma-separated list of value names; an empty name is an absent optional value.
fn names(list: &[String]) -> String {
    let last = list.len().saturating_sub(1);
    let items: Vec<String> = list
        .iter()
        .enumerate()
        .map(|(i, n)| match n.is_empty() {
            // An empty last item would be dropped on reading, so it is spelled out.
            true if i == last => "\"\"".to_string(),
            true => String::new(),
            false => name(n),
        })
        .collect();
    items.join(", ")
}

/// Writes `depth` indentation units.
fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str(INDENT);
    }
}

/// Writes a graph. `in_attr` graphs are attribute values, whose names cannot be quoted.
fn graph_into(out: &mut String, g: &GraphProto, depth: usize, in_attr: bool) {
    let gname = g.name.as_deref().unwrap_or("");
    if in_attr && is_identifier(gname) {
        out.push_str(gname);
    } else {
        out.push_str(&name(gname));
    }
    out.push_str(" (");
    let inputs: Vec<String> = g.input.iter().map(value_info).collect();
    out.push_str(&inputs.join(", "));
    out.push_str(") => (");
    let outputs: Vec<String> = g.output.iter().map(value_info).collect();
    out.push_str(&outputs.join(", "));
    out.push(')');
    let mut extra: Vec<String> = g.initializer.iter().map(initializer).collect();
    extra.extend(g.value_info.iter().map(value_info));
    if !extra.is_empty() {
        out.push('\n');
        indent(out, depth + 1);
        out.push('<');
        out.push_str(&extra.join(", "));
        out.push_str(">\n");
        indent(out, depth);
        out.push('{');
    } else {
        out.push_str(" {");
    }
    out.push('\n');
    for n in &g.node {
        indent(out, depth + 1);
        node_into(out, n, depth + 1);
        out.push('\n');
    }
    indent(out, depth);
    out.push('}');
}

/// `type name` or just `name` when the type is absent.
fn value_info(v: &ValueInfoProto) -> String {
    let n = name(v.name.as_deref().unwrap_or(""));
    match v.r#type.as_ref() {
        Some(t) if t.value.is_some() => format!("{} {n}", type_text(t)),
        _ => n,
    }
}

/// `type name = {data}` or `type name = ["location": ...]` for an initializer.
fn initializer(t: &TensorProto) -> String {
    let mut out = tensor_type(t);
    out.push(' ');
    out.push_str(&name(t.name.as_deref().unwrap_or("")));
    out.push_str(" = ");
    if t.data_location == Some(DataLocation::External as i32) {
        out.push_str(&str_str_list(&t.external_data));
    } else {
        tensor_data(&mut out, t);
    }
    out
}

/// `elem[d0,d1]` (or just `elem` for a scalar) for a tensor constant.
fn tensor_type(t: &TensorProto) -> String {
    let elem = elem_type_name(t.data_type.unwrap_or(0)).unwrap_or("undefined");
    if t.dims.is_empty() {
        return elem.to_string();
    }
    let dims: Vec<String> = t.dims.iter().map(i64::to_string).collect();
    format!("{elem}[{}]", dims.join(","))
}

/// `{v, ...}` with the tensor's values, decoding `raw_data` when the values are there.
fn tensor_data(out: &mut String, t: &TensorProto) {
    let values = tensor_values(t);
    out.push('{');
    out.push_str(&values.join(", "));
    out.push('}');
}

/// The tensor's values as literals.
fn tensor_values(t: &TensorProto) -> Vec<String> {
    let decoded;
    let t = if t.raw_data.is_some() {
        decoded = decode_raw(t);
        &decoded
    } else {
        t
    };
    match t.data_type.unwrap_or(0) {
        1 | 14 => t.float_data.iter().map(|&v| fmt_f32(v)).collect(),
        11 | 15 => t.double_data.iter().map(|&v| fmt_f64(v)).collect(),
        7 => t.int64_data.iter().map(i64::to_string).collect(),
        12 | 13 => t.uint64_data.iter().map(u64::to_string).collect(),
        8 => t.string_data.iter().map(|s| quote_bytes(s)).collect(),
        _ => t.int32_data.iter().map(i32::to_string).collect(),
    }
}

/// An `f32` literal that reads back as the same value (NaN payloads aside).
pub fn fmt_f32(v: f32) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        return format!("{v:e}");
    }
    with_point(format!("{v}"))
}

/// An `f64` literal that reads back as the same value (NaN payloads aside).
pub fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        return format!("{v:e}");
    }
    with_point(format!("{v}"))
}

/// Appends `.0` to an integral-looking number so it reads as a float.
fn with_point(mut s: String) -> String {
    if !s.contains(['.', 'e', 'E']) {
        s.push_str(".0");
    }
    s
}

/// Writes a type.
fn type_into(out: &mut String, t: &TypeProto) {
    match &t.value {
        Some(TypeValue::TensorType(tt)) => {
            out.push_str(elem_type_name(tt.elem_type.unwrap_or(0)).unwrap_or("undefined"));
            shape_into(out, tt.shape.as_ref());
        }
        Some(TypeValue::SparseTensorType(st)) => {
            out.push_str("sparse_tensor(");
            out.push_str(elem_type_name(st.elem_type.unwrap_or(0)).unwrap_or("undefined"));
            shape_into(out, st.shape.as_ref());
            out.push(')');
        }
        Some(TypeValue::SequenceType(s)) => {
            out.push_str("seq(");
            inner_type(out, s.elem_type.as_deref());
            out.push(')');
        }
        Some(TypeValue::OptionalType(o)) => {
            out.push_str("optional(");
            inner_type(out, o.elem_type.as_deref());
            out.push(')');
        }
        Some(TypeValue::MapType(m)) => {
            out.push_str("map(");
            out.push_str(elem_type_name(m.key_type.unwrap_or(0)).unwrap_or("undefined"));
            out.push_str(", ");
            inner_type(out, m.value_type.as_deref());
            out.push(')');
        }
        Some(TypeValue::OpaqueType(o)) => {
            out.push_str("opaque(");
            let domain = o.domain.as_deref().unwrap_or("");
            let name = o.name.as_deref().unwrap_or("");
            if !domain.is_empty() {
                out.push_str(domain);
                out.push_str(", ");
            }
            out.push_str(name);
            out.push(')');
        }
        // A missing value has no spelling.
        None => out.push_str("undefined"),
    }
}

/// Writes a nested type (or `undefined` when absent, which does not read back).
fn inner_type(out: &mut String, t: Option<&TypeProto>) {
    match t {
        Some(t) => type_into(out, t),
        None => out.push_str("undefined"),
    }
}

/// Writes a shape: nothing for rank 0, `[]` for unknown rank, `[d,...]` otherwise.
fn shape_into(out: &mut String, shape: Option<&TensorShapeProto>) {
    let Some(shape) = shape else {
        out.push_str("[]");
        return;
    };
    if shape.dim.is_empty() {
        return;
    }
    out.push('[');
    for (i, d) in shape.dim.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match &d.value {
            Some(dimension::Value::DimValue(v)) => {
                let _ = write!(out, "{v}");
            }
            Some(dimension::Value::DimParam(p)) => out.push_str(&name(p)),
            None => out.push('?'),
        }
    }
    out.push(']');
}

/// Writes a node (no indentation before it, no line break after it).
fn node_into(out: &mut String, n: &NodeProto, depth: usize) {
    if let Some(label) = &n.name {
        out.push('[');
        out.push_str(&name(label));
        out.push_str("] ");
    }
    if !n.output.is_empty() {
        out.push_str(&names(&n.output));
        out.push(' ');
    }
    out.push_str("= ");
    if let Some(d) = n.domain.as_deref().filter(|d| !d.is_empty()) {
        out.push_str(d);
        out.push('.');
    }
    out.push_str(n.op_type.as_deref().unwrap_or(""));
    if let Some(o) = &n.overload {
        out.push(':');
        out.push_str(o);
    }
    let attrs: Vec<&AttributeProto> = n.attribute.iter().filter(|a| printable(a)).collect();
    let has_graph = attrs.iter().any(|a| a.g.is_some() || !a.graphs.is_empty());
    let mut attr_text = String::new();
    if !attrs.is_empty() {
        attr_text.push_str(" <");
        for (i, a) in attrs.iter().enumerate() {
            if i > 0 {
                attr_text.push_str(", ");
            }
            attr_into(&mut attr_text, a, depth);
        }
        attr_text.push('>');
    }
    if !has_graph {
        out.push_str(&attr_text);
    }
    out.push_str(" (");
    out.push_str(&names(&n.input));
    out.push(')');
    if has_graph {
        out.push_str(&attr_text);
    }
}

/// Whether an attribute has a spelling (sparse tensors have none).
fn printable(a: &AttributeProto) -> bool {
    !matches!(
        a.r#type.and_then(|t| AttributeType::try_from(t).ok()),
        Some(AttributeType::SparseTensor | AttributeType::SparseTensors)
    )
}

/// Writes `name: type = value` (or `name = @ref` for an untyped reference).
fn attr_into(out: &mut String, a: &AttributeProto, depth: usize) {
    out.push_str(a.name.as_deref().unwrap_or(""));
    let kind = attr_kind(a);
    if let Some(tn) = attr_type_name(kind) {
        out.push_str(": ");
        out.push_str(tn);
    }
    out.push_str(" = ");
    if let Some(r) = &a.ref_attr_name {
        out.push('@');
        out.push_str(r);
        return;
    }
    let list = |items: Vec<String>| format!("[{}]", items.join(", "));
    match kind {
        AttributeType::Float => out.push_str(&fmt_f32(a.f.unwrap_or(0.0))),
        AttributeType::Int => {
            let _ = write!(out, "{}", a.i.unwrap_or(0));
        }
        AttributeType::String => out.push_str(&quote_bytes(a.s.as_deref().unwrap_or(b""))),
        AttributeType::Tensor => tensor_const(out, a.t.as_ref().unwrap_or(&TensorProto::default())),
        AttributeType::Graph => graph_into(
            out,
            a.g.as_ref().unwrap_or(&GraphProto::default()),
            depth,
            true,
        ),
        AttributeType::TypeProto => type_into(out, a.tp.as_ref().unwrap_or(&TypeProto::default())),
        AttributeType::Floats => {
            out.push_str(&list(a.floats.iter().map(|&v| fmt_f32(v)).collect()))
        }
        AttributeType::Ints => out.push_str(&list(a.ints.iter().map(i64::to_string).collect())),
        AttributeType::Strings => {
            out.push_str(&list(a.strings.iter().map(|s| quote_bytes(s)).collect()))
        }
        AttributeType::Tensors => {
            let items = a
                .tensors
                .iter()
                .map(|t| {
                    let mut s = String::new();
                    tensor_const(&mut s, t);
                    s
                })
                .collect();
            out.push_str(&list(items));
        }
        AttributeType::Graphs => {
            out.push('[');
            for (i, g) in a.graphs.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                graph_into(out, g, depth, true);
            }
            out.push(']');
        }
        AttributeType::TypeProtos => {
            out.push_str(&list(a.type_protos.iter().map(type_text).collect()))
        }
        AttributeType::Undefined | AttributeType::SparseTensor | AttributeType::SparseTensors => {
            out.push_str("[]")
        }
    }
}

/// Writes a tensor constant: `type name? {values}`.
fn tensor_const(out: &mut String, t: &TensorProto) {
    out.push_str(&tensor_type(t));
    // Only identifiers can name a constant; other names are left out.
    if let Some(n) = t.name.as_deref().filter(|n| is_identifier(n)) {
        out.push(' ');
        out.push_str(n);
    }
    out.push(' ');
    tensor_data(out, t);
}

/// Writes a function with its header.
fn function_into(out: &mut String, f: &FunctionProto) {
    let mut fields = Vec::new();
    if let Some(d) = &f.domain {
        fields.push(format!("domain: {}", quote(d)));
    }
    if let Some(o) = &f.overload {
        fields.push(format!("overload: {}", quote(o)));
    }
    if let Some(d) = &f.doc_string {
        fields.push(format!("doc_string: {}", quote(d)));
    }
    if !f.opset_import.is_empty() {
        fields.push(format!("opset_import: {}", opsets(&f.opset_import)));
    }
    header(out, &fields);
    out.push_str(&name(f.name.as_deref().unwrap_or("")));
    if !f.attribute.is_empty() || !f.attribute_proto.is_empty() {
        out.push_str(" <");
        let mut first = true;
        for a in &f.attribute {
            if !first {
                out.push_str(", ");
            }
            first = false;
            out.push_str(a);
        }
        for a in &f.attribute_proto {
            if !first {
                out.push_str(", ");
            }
            first = false;
            attr_into(out, a, 0);
        }
        out.push('>');
    }
    let io = |list: &[String]| list.iter().map(|n| name(n)).collect::<Vec<_>>().join(", ");
    out.push_str(" (");
    out.push_str(&io(&f.input));
    out.push_str(") => (");
    out.push_str(&io(&f.output));
    out.push(')');
    if !f.value_info.is_empty() {
        let infos: Vec<String> = f.value_info.iter().map(value_info).collect();
        out.push('\n');
        out.push_str(INDENT);
        out.push('<');
        out.push_str(&infos.join(", "));
        out.push('>');
    }
    out.push_str("\n{\n");
    for n in &f.node {
        out.push_str(INDENT);
        node_into(out, n, 1);
        out.push('\n');
    }
    out.push_str("}\n");
}
