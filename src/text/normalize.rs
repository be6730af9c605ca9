//! The canonical form of a proto with respect to the text syntax: what printing then parsing
//! gives back.
//!
//! The syntax cannot hold everything a proto can. [`normalize_model`] rewrites a model to what
//! survives `parse_model(print_model(m))`:
//!
//! * every `doc_string` except the model's and functions' is dropped, and so are
//!   `metadata_props` below the model, `training_info`, `configuration`,
//!   `quantization_annotation`, `sparse_initializer`, node `device_configurations`, type and
//!   dimension `denotation`s, tensor `segment`s;
//! * a node's absent `domain` becomes `""`, an absent graph or value name becomes `""`, an
//!   absent tensor-constant name becomes `""`, an opset entry's absent domain/version becomes
//!   `""`/`0`;
//! * tensor `raw_data` is decoded into the typed field (`float_data`, `int32_data`, ...) that
//!   the text spells; data in fields that do not belong to the element type is dropped;
//!   `data_location` is kept only when it is `EXTERNAL`;
//! * every NaN becomes the quiet NaN of its sign; strings that are not UTF-8 are decoded lossily;
//! * an attribute keeps only its name, type and the one value its type names (or its
//!   reference); an attribute without a type gets the type of its value; sparse-tensor
//!   attributes, which have no spelling, are dropped;
//! * a value info whose type holds no type is left untyped;
//! * a tensor constant in an attribute loses a name that is not an identifier, and its
//!   external-data reference.
//!
//! Some things have no spelling at all and are not normalised: attribute, operator, domain and
//! overload names and the names of graphs inside attributes must be identifiers, element types
//! must be known, opaque types need identifier names (a dotted domain), and missing nested types
//! cannot be written. Printing such a
//! proto gives text that does not parse.
#![forbid(unsafe_code)]

use crate::model::onnx::attribute_proto::AttributeType;
use crate::model::onnx::tensor_proto::DataLocation;
use crate::model::onnx::type_proto::Value as TypeValue;
use crate::model::onnx::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    StringStringEntryProto, TensorProto, TypeProto, ValueInfoProto,
};

/// The model as it reads back after printing (see the module documentation).
pub fn normalize_model(m: &ModelProto) -> ModelProto {
    ModelProto {
        ir_version: m.ir_version,
        opset_import: m.opset_import.iter().map(opset).collect(),
        producer_name: m.producer_name.clone(),
        producer_version: m.producer_version.clone(),
        domain: m.domain.clone(),
        model_version: m.model_version,
        doc_string: m.doc_string.clone(),
        graph: Some(normalize_graph(
            m.graph.as_ref().unwrap_or(&GraphProto::default()),
        )),
        metadata_props: m.metadata_props.iter().map(str_str).collect(),
        training_info: Vec::new(),
        functions: m.functions.iter().map(normalize_function).collect(),
        configuration: Vec::new(),
    }
}

/// The graph as it reads back after printing.
pub fn normalize_graph(g: &GraphProto) -> GraphProto {
    GraphProto {
        node: g.node.iter().map(normalize_node).collect(),
        name: Some(g.name.clone().unwrap_or_default()),
        initializer: g.initializer.iter().map(tensor).collect(),
        input: g.input.iter().map(value_info).collect(),
        output: g.output.iter().map(value_info).collect(),
        value_info: g.value_info.iter().map(value_info).collect(),
        ..Default::default()
    }
}

/// The function as it reads back after printing.
pub fn normalize_function(f: &FunctionProto) -> FunctionProto {
    FunctionProto {
        name: Some(f.name.clone().unwrap_or_default()),
        input: f.input.clone(),
        output: f.output.clone(),
        attribute: f.attribute.clone(),
        attribute_proto: f.attribute_proto.iter().filter_map(attribute).collect(),
        node: f.node.iter().map(normalize_node).collect(),
        doc_string: f.doc_string.clone(),
        opset_import: f.opset_import.iter().map(opset).collect(),
        domain: f.domain.clone(),
        overload: f.overload.clone(),
        value_info: f.value_info.iter().map(value_info).collect(),
        metadata_props: Vec::new(),
    }
}

/// The node as it reads back after printing.
pub fn normalize_node(n: &NodeProto) -> NodeProto {
    NodeProto {
        input: n.input.clone(),
        output: n.output.clone(),
        name: n.name.clone(),
        op_type: Some(n.op_type.clone().unwrap_or_default()),
        domain: Some(n.domain.clone().unwrap_or_default()),
        overload: n.overload.clone(),
        attribute: n.attribute.iter().filter_map(attribute).collect(),
        ..Default::default()
    }
}

/// Opset entry with both fields present.
fn opset(o: &OperatorSetIdProto) -> OperatorSetIdProto {
    OperatorSetIdProto {
        domain: Some(o.domain.clone().unwrap_or_default()),
        version: Some(o.version.unwrap_or(0)),
    }
}

/// Key/value entry with both fields present.
fn str_str(e: &StringStringEntryProto) -> StringStringEntryProto {
    StringStringEntryProto {
        key: Some(e.key.clone().unwrap_or_default()),
        value: Some(e.value.clone().unwrap_or_default()),
    }
}

/// Value info: name and type only.
fn value_info(v: &ValueInfoProto) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(v.name.clone().unwrap_or_default()),
        r#type: v
            .r#type
            .as_ref()
            .filter(|t| t.value.is_some())
            .map(type_proto),
        ..Default::default()
    }
}

/// Type without denotations.
fn type_proto(t: &TypeProto) -> TypeProto {
    use crate::model::onnx::type_proto as tp;
    let shape = |s: &Option<crate::model::onnx::TensorShapeProto>| {
        s.as_ref().map(|s| crate::model::onnx::TensorShapeProto {
            dim: s
                .dim
                .iter()
                .map(|d| crate::model::onnx::tensor_shape_proto::Dimension {
                    value: d.value.clone(),
                    denotation: None,
                })
                .collect(),
        })
    };
    let boxed = |t: &Option<Box<TypeProto>>| t.as_deref().map(|t| Box::new(type_proto(t)));
    let value = t.value.as_ref().map(|v| match v {
        TypeValue::TensorType(x) => TypeValue::TensorType(tp::Tensor {
            elem_type: x.elem_type,
            shape: shape(&x.shape),
        }),
        TypeValue::SparseTensorType(x) => TypeValue::SparseTensorType(tp::SparseTensor {
            elem_type: x.elem_type,
            shape: shape(&x.shape),
        }),
        TypeValue::SequenceType(x) => TypeValue::SequenceType(Box::new(tp::Sequence {
            elem_type: boxed(&x.elem_type),
        })),
        TypeValue::OptionalType(x) => TypeValue::OptionalType(Box::new(tp::Optional {
            elem_type: boxed(&x.elem_type),
        })),
        TypeValue::MapType(x) => TypeValue::MapType(Box::new(tp::Map {
            key_type: x.key_type,
            value_type: boxed(&x.value_type),
        })),
        // An empty domain or name is not printed, so it reads back as absent.
        TypeValue::OpaqueType(x) => TypeValue::OpaqueType(crate::model::onnx::type_proto::Opaque {
            domain: x.domain.clone().filter(|d| !d.is_empty()),
            name: x.name.clone().filter(|n| !n.is_empty()),
        }),
    });
    TypeProto {
        value,
        denotation: None,
    }
}

/// The type an attribute's value has: its `type` field, else the kind of value present.
pub(crate) fn attr_kind(a: &AttributeProto) -> AttributeType {
    if let Some(t) = a.r#type.and_then(|t| AttributeType::try_from(t).ok()) {
        if t != AttributeType::Undefined {
            return t;
        }
    }
    if a.ref_attr_name.is_some() {
        return AttributeType::Undefined;
    }
    let candidates = [
        (a.f.is_some(), AttributeType::Float),
        (a.i.is_some(), AttributeType::Int),
        (a.s.is_some(), AttributeType::String),
        (a.t.is_some(), AttributeType::Tensor),
        (a.g.is_some(), AttributeType::Graph),
        (a.tp.is_some(), AttributeType::TypeProto),
        (!a.floats.is_empty(), AttributeType::Floats),
        (!a.ints.is_empty(), AttributeType::Ints),
        (!a.strings.is_empty(), AttributeType::Strings),
        (!a.tensors.is_empty(), AttributeType::Tensors),
        (!a.graphs.is_empty(), AttributeType::Graphs),
        (!a.type_protos.is_empty(), AttributeType::TypeProtos),
    ];
    candidates
        .iter()
        .find(|c| c.0)
        .map_or(AttributeType::Undefined, |c| c.1)
}

/// Attribute with only its name, type and value; `None` for sparse-tensor attributes.
fn attribute(a: &AttributeProto) -> Option<AttributeProto> {
    let kind = attr_kind(a);
    let mut out = AttributeProto {
        name: a.name.clone(),
        ..Default::default()
    };
    if let Some(r) = &a.ref_attr_name {
        out.ref_attr_name = Some(r.clone());
        out.r#type = a.r#type.filter(|&t| t != AttributeType::Undefined as i32);
        return Some(out);
    }
    out.r#type = Some(kind as i32);
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned().into_bytes();
    match kind {
        AttributeType::Float => out.f = Some(canon_f32(a.f.unwrap_or(0.0))),
        AttributeType::Int => out.i = Some(a.i.unwrap_or(0)),
        AttributeType::String => out.s = Some(lossy(a.s.as_deref().unwrap_or(b""))),
        AttributeType::Tensor => {
            out.t = Some(const_tensor(
                a.t.as_ref().unwrap_or(&TensorProto::default()),
            ))
        }
        AttributeType::Graph => {
            out.g = Some(normalize_graph(
                a.g.as_ref().unwrap_or(&GraphProto::default()),
            ))
        }
        AttributeType::TypeProto => {
            out.tp = Some(type_proto(a.tp.as_ref().unwrap_or(&TypeProto::default())))
        }
        AttributeType::Floats => out.floats = a.floats.iter().map(|&f| canon_f32(f)).collect(),
        AttributeType::Ints => out.ints.clone_from(&a.ints),
        AttributeType::Strings => out.strings = a.strings.iter().map(|s| lossy(s)).collect(),
        AttributeType::Tensors => out.tensors = a.tensors.iter().map(const_tensor).collect(),
        AttributeType::Graphs => out.graphs = a.graphs.iter().map(normalize_graph).collect(),
        AttributeType::TypeProtos => {
            out.type_protos = a.type_protos.iter().map(type_proto).collect()
        }
        AttributeType::SparseTensor | AttributeType::SparseTensors => return None,
        AttributeType::Undefined => out.r#type = None,
    }
    Some(out)
}

/// A tensor constant inside an attribute: like [`tensor`], except that a name that is not an
/// identifier (or is absent) becomes `""` and external data is dropped (constants spell their
/// values inline only).
fn const_tensor(t: &TensorProto) -> TensorProto {
    let mut out = tensor(t);
    if !out
        .name
        .as_deref()
        .is_some_and(crate::text::syntax::is_identifier)
    {
        out.name = Some(String::new());
    }
    out.external_data.clear();
    out.data_location = None;
    out
}

/// Tensor reduced to dims, type, name and the data the text spells.
fn tensor(t: &TensorProto) -> TensorProto {
    let decoded = decode_raw(t);
    let t = &decoded;
    let mut out = TensorProto {
        dims: t.dims.clone(),
        data_type: t.data_type,
        name: t.name.clone(),
        ..Default::default()
    };
    if t.data_location == Some(DataLocation::External as i32) {
        out.data_location = t.data_location;
        out.external_data = t.external_data.iter().map(str_str).collect();
        return out;
    }
    match t.data_type.unwrap_or(0) {
        1 | 14 => out.float_data = t.float_data.iter().map(|&f| canon_f32(f)).collect(),
        11 | 15 => out.double_data = t.double_data.iter().map(|&f| canon_f64(f)).collect(),
        7 => out.int64_data.clone_from(&t.int64_data),
        12 | 13 => out.uint64_data.clone_from(&t.uint64_data),
        8 => {
            out.string_data = t
                .string_data
                .iter()
                .map(|s| String::from_utf8_lossy(s).into_owned().into_bytes())
                .collect()
        }
        0 => {}
        _ => out.int32_data.clone_from(&t.int32_data),
    }
    out
}

/// The tensor with `raw_data` (little-endian) decoded into its typed field. 4-, 2- and 6-bit
/// types keep their packed bytes, one per `int32_data` value.
pub(crate) fn decode_raw(t: &TensorProto) -> TensorProto {
    let mut out = t.clone();
    let Some(raw) = out.raw_data.take() else {
        return out;
    };
    fn chunks<const N: usize>(raw: &[u8]) -> impl Iterator<Item = [u8; N]> + '_ {
        raw.chunks_exact(N).map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            a
        })
    }
    match t.data_type.unwrap_or(0) {
        1 | 14 => out.float_data = chunks::<4>(&raw).map(f32::from_le_bytes).collect(),
        11 | 15 => out.double_data = chunks::<8>(&raw).map(f64::from_le_bytes).collect(),
        7 => out.int64_data = chunks::<8>(&raw).map(i64::from_le_bytes).collect(),
        13 => out.uint64_data = chunks::<8>(&raw).map(u64::from_le_bytes).collect(),
        12 => {
            out.uint64_data = chunks::<4>(&raw)
                .map(|b| u64::from(u32::from_le_bytes(b)))
                .collect()
        }
        6 => out.int32_data = chunks::<4>(&raw).map(i32::from_le_bytes).collect(),
        5 => {
            out.int32_data = chunks::<2>(&raw)
                .map(|b| i32::from(i16::from_le_bytes(b)))
                .collect()
        }
        4 | 10 | 16 => {
            out.int32_data = chunks::<2>(&raw)
                .map(|b| i32::from(u16::from_le_bytes(b)))
                .collect()
        }
        3 => out.int32_data = raw.iter().map(|&b| i32::from(b as i8)).collect(),
        8 => {}
        _ => out.int32_data = raw.iter().map(|&b| i32::from(b)).collect(),
    }
    out
}

/// NaNs become the quiet NaN of the same sign (the only NaNs the text spells).
fn canon_f32(v: f32) -> f32 {
    if v.is_nan() {
        f32::NAN.copysign(v)
    } else {
        v
    }
}

/// NaNs become the quiet NaN of the same sign (the only NaNs the text spells).
fn canon_f64(v: f64) -> f64 {
    if v.is_nan() {
        f64::NAN.copysign(v)
    } else {
        v
    }
}
