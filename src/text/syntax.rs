//! Vocabulary shared by the parser and the printer: element-type names, attribute-type names
//! and the identifier rules.
#![forbid(unsafe_code)]

use crate::model::onnx::attribute_proto::AttributeType;

/// Every tensor element type the syntax names, with its `TensorProto.DataType` code.
pub const ELEM_TYPES: &[(&str, i32)] = &[
    ("float", 1),
    ("uint8", 2),
    ("int8", 3),
    ("uint16", 4),
    ("int16", 5),
    ("int32", 6),
    ("int64", 7),
    ("string", 8),
    ("bool", 9),
    ("float16", 10),
    ("double", 11),
    ("uint32", 12),
    ("uint64", 13),
    ("complex64", 14),
    ("complex128", 15),
    ("bfloat16", 16),
    ("float8e4m3fn", 17),
    ("float8e4m3fnuz", 18),
    ("float8e5m2", 19),
    ("float8e5m2fnuz", 20),
    ("uint4", 21),
    ("int4", 22),
    ("float4e2m1", 23),
    ("float8e8m0", 24),
    ("uint2", 25),
    ("int2", 26),
    ("float6e2m3", 27),
    ("float6e3m2", 28),
];

/// The element-type code a name stands for.
pub fn elem_type_code(name: &str) -> Option<i32> {
    ELEM_TYPES.iter().find(|(n, _)| *n == name).map(|&(_, c)| c)
}

/// The name of an element-type code.
pub fn elem_type_name(code: i32) -> Option<&'static str> {
    ELEM_TYPES
        .iter()
        .find(|&&(_, c)| c == code)
        .map(|&(n, _)| n)
}

/// Attribute-type annotations (`name: ints = [...]`) and the type each stands for.
pub const ATTR_TYPES: &[(&str, AttributeType)] = &[
    ("float", AttributeType::Float),
    ("int", AttributeType::Int),
    ("string", AttributeType::String),
    ("tensor", AttributeType::Tensor),
    ("graph", AttributeType::Graph),
    ("sparse_tensor", AttributeType::SparseTensor),
    ("type_proto", AttributeType::TypeProto),
    ("floats", AttributeType::Floats),
    ("ints", AttributeType::Ints),
    ("strings", AttributeType::Strings),
    ("tensors", AttributeType::Tensors),
    ("graphs", AttributeType::Graphs),
    ("sparse_tensors", AttributeType::SparseTensors),
    ("type_protos", AttributeType::TypeProtos),
];

/// The attribute type an annotation names.
pub fn attr_type_from_name(name: &str) -> Option<AttributeType> {
    ATTR_TYPES.iter().find(|(n, _)| *n == name).map(|&(_, t)| t)
}

/// The annotation naming an attribute type (`None` for `UNDEFINED`).
pub fn attr_type_name(t: AttributeType) -> Option<&'static str> {
    ATTR_TYPES.iter().find(|&&(_, x)| x == t).map(|&(n, _)| n)
}

/// Identifiers that open a type (`seq(...)`, `float[...]`, ...).
pub fn is_type_keyword(name: &str) -> bool {
    matches!(
        name,
        "seq" | "map" | "optional" | "sparse_tensor" | "opaque"
    ) || elem_type_code(name).is_some()
}

/// Identifiers that read as floating-point literals where a value is expected.
pub fn is_float_keyword(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    matches!(lower.as_str(), "inf" | "infinity" | "nan")
}

/// Whether `c` may start an identifier.
pub fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

/// Whether `c` may continue an identifier.
pub fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `s` is a plain identifier (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if is_ident_start(c)) && chars.all(is_ident_char)
}
