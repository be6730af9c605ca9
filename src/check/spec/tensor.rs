//! Checks on values: tensors (dense, sparse, external) and types.
#![forbid(unsafe_code)]

use super::names::is_c_identifier;
use super::walk::Ctx;
use super::Rule;
use crate::model::onnx::{
    tensor_shape_proto::dimension::Value as Dim, type_proto::Value as Ty, SparseTensorProto,
    TensorProto, TensorShapeProto, TypeProto,
};
use std::collections::HashSet;

/// The typed field of `TensorProto` that holds a data type's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Float,
    Int32,
    String,
    Int64,
    Double,
    Uint64,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Float => "float_data",
            Field::Int32 => "int32_data",
            Field::String => "string_data",
            Field::Int64 => "int64_data",
            Field::Double => "double_data",
            Field::Uint64 => "uint64_data",
        }
    }
}

/// What the checker needs to know about one `TensorProto.DataType`.
#[derive(Clone, Copy, Debug)]
struct DType {
    name: &'static str,
    field: Field,
    /// Field entries per element (2 for complex numbers).
    mult: u64,
    /// Elements per field entry (2 for 4-bit types, 4 for 2-bit types).
    pack: u64,
    /// Bits per element in `raw_data` (0 for strings, which cannot use it).
    bits: u64,
    /// The first IR version with this data type.
    min_ir: i64,
}

const fn dt(name: &'static str, field: Field, bits: u64, min_ir: i64) -> DType {
    DType {
        name,
        field,
        mult: 1,
        pack: 1,
        bits,
        min_ir,
    }
}

/// Looks up a data type value; `None` for UNDEFINED and unknown values.
fn dtype(v: i32) -> Option<DType> {
    use Field::*;
    Some(match v {
        1 => dt("FLOAT", Float, 32, 1),
        2 => dt("UINT8", Int32, 8, 1),
        3 => dt("INT8", Int32, 8, 1),
        4 => dt("UINT16", Int32, 16, 1),
        5 => dt("INT16", Int32, 16, 1),
        6 => dt("INT32", Int32, 32, 1),
        7 => dt("INT64", Int64, 64, 1),
        8 => dt("STRING", String, 0, 1),
        9 => dt("BOOL", Int32, 8, 1),
        10 => dt("FLOAT16", Int32, 16, 1),
        11 => dt("DOUBLE", Double, 64, 1),
        12 => dt("UINT32", Uint64, 32, 1),
        13 => dt("UINT64", Uint64, 64, 1),
        14 => DType {
            mult: 2,
            ..dt("COMPLEX64", Float, 64, 1)
        },
        15 => DType {
            mult: 2,
            ..dt("COMPLEX128", Double, 128, 1)
        },
        16 => dt("BFLOAT16", Int32, 16, 4),
        17 => dt("FLOAT8E4M3FN", Int32, 8, 9),
        18 => dt("FLOAT8E4M3FNUZ", Int32, 8, 9),
        19 => dt("FLOAT8E5M2", Int32, 8, 9),
        20 => dt("FLOAT8E5M2FNUZ", Int32, 8, 9),
        21 => DType {
            pack: 2,
            ..dt("UINT4", Int32, 4, 10)
        },
        22 => DType {
            pack: 2,
            ..dt("INT4", Int32, 4, 10)
        },
        23 => DType {
            pack: 2,
            ..dt("FLOAT4E2M1", Int32, 4, 11)
        },
        24 => dt("FLOAT8E8M0", Int32, 8, 12),
        25 => DType {
            pack: 4,
            ..dt("UINT2", Int32, 2, 13)
        },
        26 => DType {
            pack: 4,
            ..dt("INT2", Int32, 2, 13)
        },
        27 => dt("FLOAT6E2M3", Int32, 6, 14),
        28 => dt("FLOAT6E3M2", Int32, 6, 14),
        _ => return None,
    })
}

/// Data types allowed as map keys: the integral types and STRING.
fn is_map_key(v: i32) -> bool {
    matches!(v, 2..=8 | 12 | 13)
}

/// Why an external-data location is unacceptable, if it is.
fn bad_location(p: &str) -> Option<&'static str> {
    if p.is_empty() {
        return Some("is empty");
    }
    if p.contains('\0') {
        return Some("contains a NUL byte");
    }
    let b = p.as_bytes();
    if b[0] == b'/' || b[0] == b'\\' {
        return Some("is an absolute path");
    }
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Some("starts with a drive letter");
    }
    if p.split(['/', '\\']).any(|c| c == "..") {
        return Some("leaves the model's directory through '..'");
    }
    None
}

/// Parses a non-negative decimal integer written as digits only.
fn parse_count(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `ceil(a / b)` for `b > 0`.
fn div_ceil(a: u64, b: u64) -> u64 {
    a / b + u64::from(!a.is_multiple_of(b))
}

impl Ctx<'_> {
    /// Checks a dense tensor: data type, dims, the field holding its data, and its size.
    pub(crate) fn tensor(&mut self, t: &TensorProto, loc: &str) {
        if !t.metadata_props.is_empty() {
            self.need_ir(10, "tensor metadata_props", loc);
        }
        let d = match t.data_type {
            None | Some(0) => {
                self.push(
                    Rule::TensorDataType,
                    loc,
                    "the tensor has no data type".into(),
                );
                None
            }
            Some(v) => match dtype(v) {
                Some(d) => {
                    self.need_ir(d.min_ir, &format!("data type {}", d.name), loc);
                    Some(d)
                }
                None => {
                    self.push(
                        Rule::TensorDataType,
                        loc,
                        format!("data type {v} is not a defined TensorProto.DataType"),
                    );
                    None
                }
            },
        };
        // Element count from dims; None when a dim is negative or the product overflows.
        let mut numel = Some(1u64);
        for (k, &dim) in t.dims.iter().enumerate() {
            if dim < 0 {
                self.push(
                    Rule::InitializerDimsMatchData,
                    loc,
                    format!("dimension #{k} is negative ({dim})"),
                );
                numel = None;
            } else {
                numel = numel.and_then(|n| n.checked_mul(dim as u64));
            }
        }
        let typed: Vec<(Field, usize)> = [
            (Field::Float, t.float_data.len()),
            (Field::Int32, t.int32_data.len()),
            (Field::String, t.string_data.len()),
            (Field::Int64, t.int64_data.len()),
            (Field::Double, t.double_data.len()),
            (Field::Uint64, t.uint64_data.len()),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect();
        let raw = t.raw_data.as_ref();
        match t.data_location {
            None | Some(0) => {
                if !t.external_data.is_empty() {
                    self.push(
                        Rule::ExternalDataWellformed,
                        loc,
                        "external_data is given but data_location is not EXTERNAL".into(),
                    );
                }
            }
            Some(1) => {
                self.external(t, loc, d, numel, !typed.is_empty() || raw.is_some());
                return;
            }
            Some(v) => {
                self.push(
                    Rule::ExternalDataWellformed,
                    loc,
                    format!("data_location {v} is neither DEFAULT nor EXTERNAL"),
                );
                return;
            }
        }
        if raw.is_some() && !typed.is_empty() {
            self.push(
                Rule::RawAndTypedDataExclusive,
                loc,
                format!("the tensor sets raw_data and {}", typed[0].0.name()),
            );
        }
        if typed.len() > 1 {
            self.push(
                Rule::TensorFieldMatchesType,
                loc,
                format!(
                    "the tensor sets several typed fields ({} and {})",
                    typed[0].0.name(),
                    typed[1].0.name()
                ),
            );
        }
        let Some(d) = d else { return };
        for (f, _) in &typed {
            if *f != d.field {
                self.push(
                    Rule::TensorFieldMatchesType,
                    loc,
                    format!(
                        "a {} tensor keeps its data in {}, not {}",
                        d.name,
                        d.field.name(),
                        f.name()
                    ),
                );
            }
        }
        if raw.is_some() && d.field == Field::String {
            self.push(
                Rule::TensorFieldMatchesType,
                loc,
                "a STRING tensor cannot use raw_data".into(),
            );
            return;
        }
        if t.segment.is_some() {
            return; // a segment holds only a slice of the tensor
        }
        let Some(n) = numel else {
            if !t.dims.iter().any(|&x| x < 0) {
                self.push(
                    Rule::InitializerDimsMatchData,
                    loc,
                    "the element count overflows 64 bits".into(),
                );
            }
            return;
        };
        if let Some(raw) = raw {
            let want = n.checked_mul(d.bits).map(|b| div_ceil(b, 8));
            if want != Some(raw.len() as u64) {
                self.push(
                    Rule::InitializerDimsMatchData,
                    loc,
                    format!(
                        "raw_data has {} bytes, but {n} {} elements take {}",
                        raw.len(),
                        d.name,
                        want.map_or("more than 2^64".into(), |w| w.to_string())
                    ),
                );
            }
        } else if let [(f, len)] = typed.as_slice() {
            if *f == d.field {
                let want = n.checked_mul(d.mult).map(|x| div_ceil(x, d.pack));
                if want != Some(*len as u64) {
                    self.push(
                        Rule::InitializerDimsMatchData,
                        loc,
                        format!(
                            "{} has {len} entries, but dims {:?} of {} need {}",
                            f.name(),
                            t.dims,
                            d.name,
                            want.map_or("more than 2^64".into(), |w| w.to_string())
                        ),
                    );
                }
            }
        } else if typed.is_empty() && n != 0 {
            self.push(
                Rule::InitializerDimsMatchData,
                loc,
                format!("the tensor holds no data for its {n} elements"),
            );
        }
    }

    /// Checks a tensor stored outside the model file.
    fn external(
        &mut self,
        t: &TensorProto,
        loc: &str,
        d: Option<DType>,
        numel: Option<u64>,
        has_values: bool,
    ) {
        let rule = Rule::ExternalDataWellformed;
        if has_values {
            self.push(
                rule,
                loc,
                "an external tensor also stores values in the model".into(),
            );
        }
        if d.is_some_and(|d| d.field == Field::String) {
            self.push(
                rule,
                loc,
                "a STRING tensor cannot be stored externally".into(),
            );
        }
        let mut keys: HashSet<&str> = HashSet::new();
        let mut has_location = false;
        for e in &t.external_data {
            let key = e.key.as_deref().unwrap_or("");
            let value = e.value.as_deref().unwrap_or("");
            if !keys.insert(key) {
                self.push(
                    rule,
                    loc,
                    format!("external_data key '{key}' is given twice"),
                );
            }
            match key {
                "location" => {
                    has_location = true;
                    if let Some(why) = bad_location(value) {
                        self.push(rule, loc, format!("external location '{value}' {why}"));
                    }
                }
                "offset" | "length" => match parse_count(value) {
                    None => self.push(
                        rule,
                        loc,
                        format!("external {key} '{value}' is not a non-negative integer"),
                    ),
                    Some(len) if key == "length" => {
                        let want =
                            d.and_then(|d| numel?.checked_mul(d.bits).map(|b| div_ceil(b, 8)));
                        if d.is_some_and(|d| d.bits > 0) && want.is_some_and(|w| w != len) {
                            self.push(
                                Rule::InitializerDimsMatchData,
                                loc,
                                format!(
                                    "external length {len} differs from the {} bytes the dims need",
                                    want.unwrap_or(0)
                                ),
                            );
                        }
                    }
                    Some(_) => {}
                },
                _ => {}
            }
        }
        if !has_location {
            self.push(
                rule,
                loc,
                "an external tensor has no 'location' entry".into(),
            );
        }
    }

    /// Checks a sparse tensor: its dims, values and indices.
    pub(crate) fn sparse(&mut self, sp: &SparseTensorProto, loc: &str) {
        let rule = Rule::SparseTensorWellformed;
        let mut dense = Some(1u64);
        for &dim in &sp.dims {
            if dim < 0 {
                self.push(rule, loc, format!("dense dimension {dim} is negative"));
                dense = None;
            } else {
                dense = dense.and_then(|n| n.checked_mul(dim as u64));
            }
        }
        let Some(values) = sp.values.as_ref() else {
            self.push(rule, loc, "the sparse tensor has no values".into());
            return;
        };
        self.tensor(values, &format!("{loc} values"));
        let nnz = match values.dims.as_slice() {
            [n] if *n >= 0 => *n as u64,
            _ => {
                self.push(
                    rule,
                    loc,
                    format!("values must be 1-D, but have dims {:?}", values.dims),
                );
                return;
            }
        };
        let Some(ix) = sp.indices.as_ref() else {
            if nnz > 0 {
                self.push(rule, loc, "the sparse tensor has no indices".into());
            }
            return;
        };
        self.tensor(ix, &format!("{loc} indices"));
        if ix.data_type != Some(7) {
            self.push(rule, loc, "indices must be INT64".into());
            return;
        }
        let rank = sp.dims.len() as u64;
        let two_d = match ix.dims.as_slice() {
            [n] if *n as u64 == nnz => false,
            [n, r] if *n as u64 == nnz && *r as u64 == rank => true,
            _ => {
                self.push(
                    rule,
                    loc,
                    format!(
                        "indices have dims {:?}, not [{nnz}] or [{nnz}, {rank}]",
                        ix.dims
                    ),
                );
                return;
            }
        };
        let Some(dense) = dense else { return };
        // Read the indices when they are stored in the message.
        let idx: Vec<i64> = if !ix.int64_data.is_empty() {
            ix.int64_data.clone()
        } else if let Some(raw) = ix.raw_data.as_ref() {
            raw.chunks_exact(8)
                .map(|c| {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(c);
                    i64::from_le_bytes(b)
                })
                .collect()
        } else {
            return;
        };
        let width = if two_d { rank.max(1) as usize } else { 1 };
        if (idx.len() as u64) != nnz.saturating_mul(width as u64) {
            return; // already reported as a size mismatch of the indices tensor
        }
        let mut prev: Option<&[i64]> = None;
        for (k, row) in idx.chunks(width).enumerate() {
            let in_range = if two_d {
                row.iter().zip(&sp.dims).all(|(&i, &d)| i >= 0 && i < d)
            } else {
                row[0] >= 0 && (row[0] as u64) < dense
            };
            if !in_range {
                self.push(
                    rule,
                    loc,
                    format!("index #{k} {row:?} is outside dims {:?}", sp.dims),
                );
                return;
            }
            if prev.is_some_and(|p| p >= row) {
                self.push(
                    rule,
                    loc,
                    format!(
                        "index #{k} {row:?} is not after the previous one (indices must ascend)"
                    ),
                );
                return;
            }
            prev = Some(row);
        }
    }

    /// Checks a type: its kind, element and key types, and shape.
    pub(crate) fn type_proto(&mut self, tp: &TypeProto, loc: &str, depth: usize) {
        if depth > self.max_depth() {
            self.push(
                Rule::GraphDepthLimit,
                loc,
                format!(
                    "the type nests deeper than {} levels; the rest is not checked",
                    self.max_depth()
                ),
            );
            return;
        }
        let rule = Rule::TypeWellformed;
        match tp.value.as_ref() {
            None => self.push(Rule::TypeHasKind, loc, "the type has no kind".into()),
            Some(Ty::TensorType(t)) => {
                self.elem_type(t.elem_type, loc);
                self.shape(t.shape.as_ref(), loc);
            }
            Some(Ty::SparseTensorType(t)) => {
                self.need_ir(8, "sparse tensor types", loc);
                self.elem_type(t.elem_type, loc);
                self.shape(t.shape.as_ref(), loc);
            }
            Some(Ty::SequenceType(sq)) => match sq.elem_type.as_deref() {
                None => self.push(rule, loc, "a sequence type has no element type".into()),
                Some(e) => self.type_proto(e, loc, depth + 1),
            },
            Some(Ty::OptionalType(o)) => {
                self.need_ir(8, "optional types", loc);
                match o.elem_type.as_deref() {
                    None => self.push(rule, loc, "an optional type has no element type".into()),
                    Some(e) => self.type_proto(e, loc, depth + 1),
                }
            }
            Some(Ty::MapType(m)) => {
                match m.key_type {
                    Some(k) if is_map_key(k) => {}
                    k => self.push(
                        rule,
                        loc,
                        format!(
                            "map key type {} is not an integral type or STRING",
                            k.map_or("(missing)".into(), |k| k.to_string())
                        ),
                    ),
                }
                match m.value_type.as_deref() {
                    None => self.push(rule, loc, "a map type has no value type".into()),
                    Some(e) => self.type_proto(e, loc, depth + 1),
                }
            }
            Some(Ty::OpaqueType(_)) => {}
        }
    }

    /// Checks a tensor type's element type.
    fn elem_type(&mut self, et: Option<i32>, loc: &str) {
        match et {
            None | Some(0) => self.push(
                Rule::TypeWellformed,
                loc,
                "a tensor type has no element type".into(),
            ),
            Some(v) => match dtype(v) {
                Some(d) => self.need_ir(d.min_ir, &format!("data type {}", d.name), loc),
                None => self.push(
                    Rule::TypeWellformed,
                    loc,
                    format!("element type {v} is not a defined TensorProto.DataType"),
                ),
            },
        }
    }

    /// Checks a static shape: sizes non-negative, dimension variables C identifiers (pedantic).
    fn shape(&mut self, shape: Option<&TensorShapeProto>, loc: &str) {
        let Some(shape) = shape else { return };
        for (k, d) in shape.dim.iter().enumerate() {
            match d.value.as_ref() {
                Some(Dim::DimValue(v)) if *v < 0 => self.push(
                    Rule::DimNonNegative,
                    loc,
                    format!("dimension #{k} has negative size {v}"),
                ),
                Some(Dim::DimParam(p))
                    if self.enabled(Rule::CIdentifierNames) && !is_c_identifier(p) =>
                {
                    self.push(
                        Rule::CIdentifierNames,
                        loc,
                        format!("dimension variable '{p}' is not a C identifier"),
                    );
                }
                _ => {}
            }
        }
    }

    /// Checks that a main-graph input or output type states a shape when it is a tensor.
    pub(crate) fn main_io_shape(&mut self, tp: &TypeProto, loc: &str) {
        let shape = match tp.value.as_ref() {
            Some(Ty::TensorType(t)) => t.shape.as_ref(),
            Some(Ty::SparseTensorType(t)) => t.shape.as_ref(),
            _ => return,
        };
        if shape.is_none() {
            self.push(
                Rule::IoTypedWithShape,
                loc,
                "the main graph's tensor input/output has no shape (rank)".into(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations() {
        assert_eq!(bad_location("weights.bin"), None);
        assert_eq!(bad_location("sub/dir/w.bin"), None);
        assert!(bad_location("").is_some());
        assert!(bad_location("/etc/passwd").is_some());
        assert!(bad_location("\\\\server\\share").is_some());
        assert!(bad_location("C:\\w.bin").is_some());
        assert!(bad_location("../w.bin").is_some());
        assert!(bad_location("a/../../w.bin").is_some());
        assert!(bad_location("a\\..\\w.bin").is_some());
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("0"), Some(0));
        assert_eq!(parse_count("4096"), Some(4096));
        assert_eq!(parse_count("-1"), None);
        assert_eq!(parse_count("+1"), None);
        assert_eq!(parse_count(""), None);
        assert_eq!(parse_count("1e3"), None);
    }

    #[test]
    fn data_types() {
        assert!(dtype(0).is_none());
        assert!(dtype(29).is_none());
        assert_eq!(
            dtype(22).map(|d| (d.pack, d.bits, d.min_ir)),
            Some((2, 4, 10))
        );
        assert_eq!(dtype(15).map(|d| (d.mult, d.bits)), Some((2, 128)));
        assert!(is_map_key(7) && is_map_key(8) && !is_map_key(1));
    }
}
