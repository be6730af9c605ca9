//! Operator signatures: every node of the main graph, of every nested graph and of every
//! model-local function is checked against its operator's schema (see [`crate::schema`]) under
//! the operator-set version its model or function imports: the operator exists there, input and
//! output counts fit, required attributes are present, unknown ones absent and types right, and
//! type constraints hold where value types are known (declared, or carried forward from the
//! inputs by the schema's constraints).
//!
//! Nodes of domains the table does not know (custom operators), of versions newer than the table
//! knows, and calls of model-local functions are left alone.
#![forbid(unsafe_code)]

use super::names::{norm_domain, show_domain};
use super::walk::{node_loc, Ctx, Opsets};
use super::Rule;
use crate::model::onnx::{
    attribute_proto::AttributeType, type_proto, AttributeProto, FunctionProto, GraphProto,
    ModelProto, NodeProto, TypeProto,
};
use crate::schema::{self, OpSchema, ParamOption};
use std::collections::{HashMap, HashSet};

/// Value types known in one graph and the graphs around it (innermost last).
struct Types<'p> {
    own: HashMap<String, String>,
    /// Declared dimensions (`None` for a symbolic or unknown one), where the rank is known.
    dims: HashMap<String, Vec<Option<i64>>>,
    parent: Option<&'p Types<'p>>,
}

impl Types<'_> {
    fn dims(&self, name: &str) -> Option<&[Option<i64>]> {
        match self.dims.get(name) {
            Some(d) => Some(d),
            None => self.parent.and_then(|p| p.dims(name)),
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        match self.own.get(name) {
            Some(t) => Some(t),
            None => self.parent.and_then(|p| p.get(name)),
        }
    }
}

/// How deep a declared type may nest before it counts as unknown here (the walk reports deeper
/// types under `graph-depth-limit`).
const TYPE_DEPTH: usize = 16;

/// The ONNX type string of a declared type (`tensor(float)`, `seq(tensor(int64))` …), when its
/// element types are known and it nests at most [`TYPE_DEPTH`] levels.
pub(crate) fn type_string(t: &TypeProto) -> Option<String> {
    nested_type_string(t, 0)
}

fn nested_type_string(t: &TypeProto, depth: usize) -> Option<String> {
    use type_proto::Value;
    if depth > TYPE_DEPTH {
        return None;
    }
    let type_string = |t: &TypeProto| nested_type_string(t, depth + 1);
    let elem = |code: Option<i32>| {
        let code = code.filter(|&c| c != 0)?;
        crate::ir::DataType::from_code(i64::from(code)).map(|d| d.name())
    };
    Some(match t.value.as_ref()? {
        Value::TensorType(tt) => format!("tensor({})", elem(tt.elem_type)?),
        Value::SparseTensorType(tt) => format!("sparse_tensor({})", elem(tt.elem_type)?),
        Value::SequenceType(s) => format!("seq({})", type_string(s.elem_type.as_ref()?)?),
        Value::OptionalType(o) => format!("optional({})", type_string(o.elem_type.as_ref()?)?),
        Value::OpaqueType(o) => format!(
            "opaque({},{})",
            o.domain.as_deref().unwrap_or(""),
            o.name.as_deref().unwrap_or("")
        ),
        Value::MapType(m) => format!(
            "map({},{})",
            elem(m.key_type)?,
            type_string(m.value_type.as_ref()?)?
        ),
    })
}

/// The declared dimensions of a tensor type (`None` for symbolic or unknown ones), when its
/// rank is known.
fn declared_dims(t: &TypeProto) -> Option<Vec<Option<i64>>> {
    use crate::model::onnx::tensor_shape_proto::dimension::Value as D;
    let type_proto::Value::TensorType(tt) = t.value.as_ref()? else {
        return None;
    };
    Some(
        tt.shape
            .as_ref()?
            .dim
            .iter()
            .map(|d| match d.value {
                Some(D::DimValue(v)) if v >= 0 => Some(v),
                _ => None,
            })
            .collect(),
    )
}

/// The schema's name for an attribute type.
fn attr_kind(t: i32) -> Option<&'static str> {
    use AttributeType as T;
    Some(match AttributeType::try_from(t).ok()? {
        T::Float => "FLOAT",
        T::Int => "INT",
        T::String => "STRING",
        T::Tensor => "TENSOR",
        T::Graph => "GRAPH",
        T::SparseTensor => "SPARSE_TENSOR",
        T::TypeProto => "TYPE_PROTO",
        T::Floats => "FLOATS",
        T::Ints => "INTS",
        T::Strings => "STRINGS",
        T::Tensors => "TENSORS",
        T::Graphs => "GRAPHS",
        T::SparseTensors => "SPARSE_TENSORS",
        T::TypeProtos => "TYPE_PROTOS",
        T::Undefined => return None,
    })
}

/// The state of the signature walk.
struct Walk<'c, 'm, 'x> {
    cx: &'c mut Ctx<'x>,
    /// Model-local functions, by (normalised domain, name).
    local: HashSet<(&'m str, &'m str)>,
    max_depth: usize,
}

/// Checks every node of the model against its operator's schema.
pub(crate) fn check(cx: &mut Ctx<'_>, m: &ModelProto, model_opsets: &Opsets<'_>) {
    let local = m
        .functions
        .iter()
        .map(|f| {
            (
                norm_domain(f.domain.as_deref().unwrap_or("")),
                f.name.as_deref().unwrap_or(""),
            )
        })
        .collect();
    let max_depth = cx.max_depth();
    let mut w = Walk {
        cx,
        local,
        max_depth,
    };
    w.versions(model_opsets, "model");
    if let Some(g) = &m.graph {
        let loc = format!("graph '{}'", g.name.as_deref().unwrap_or(""));
        w.graph(g, &loc, model_opsets, None, 0);
    }
    for f in &m.functions {
        w.function(f);
    }
}

impl<'m> Walk<'_, 'm, '_> {
    /// Every imported version of a domain the table knows must exist.
    fn versions(&mut self, opsets: &Opsets<'_>, owner: &str) {
        let mut list: Vec<(&str, i64)> = opsets.iter().map(|(d, v)| (*d, *v)).collect();
        list.sort();
        for (d, v) in list {
            if let Some((lo, hi)) = schema::domain_versions(d) {
                if !(lo..=hi).contains(&v) {
                    self.cx.push(
                        Rule::OpsetVersionKnown,
                        owner,
                        format!(
                            "imports version {v} of domain '{}', which has versions {lo} to {hi}",
                            show_domain(d)
                        ),
                    );
                }
            }
        }
    }

    fn function(&mut self, f: &'m FunctionProto) {
        let mut opsets = Opsets::new();
        for o in &f.opset_import {
            if let Some(v) = o.version {
                opsets.insert(norm_domain(o.domain.as_deref().unwrap_or("")), v);
            }
        }
        let floc = format!(
            "function '{}' (domain '{}')",
            f.name.as_deref().unwrap_or(""),
            f.domain.as_deref().unwrap_or("")
        );
        self.versions(&opsets, &floc);
        let mut types = Types {
            own: HashMap::new(),
            dims: HashMap::new(),
            parent: None,
        };
        for (i, node) in f.node.iter().enumerate() {
            let nloc = node_loc(&floc, node, i);
            self.node(node, &nloc, &opsets, &mut types, 0);
        }
    }

    fn graph(
        &mut self,
        g: &'m GraphProto,
        loc: &str,
        opsets: &Opsets<'_>,
        parent: Option<&Types<'_>>,
        depth: usize,
    ) {
        if depth > self.max_depth {
            return;
        }
        let mut own = HashMap::new();
        let mut dims = HashMap::new();
        let declared = g.input.iter().chain(&g.value_info).chain(&g.output);
        for vi in declared {
            if let (Some(n), Some(t)) = (&vi.name, vi.r#type.as_ref().and_then(type_string)) {
                own.insert(n.clone(), t);
            }
            if let (Some(n), Some(d)) = (&vi.name, vi.r#type.as_ref().and_then(declared_dims)) {
                dims.insert(n.clone(), d);
            }
        }
        for t in &g.initializer {
            if let Some(n) = &t.name {
                dims.insert(n.clone(), t.dims.iter().map(|&d| Some(d)).collect());
            }
            if let (Some(n), Some(code)) = (&t.name, t.data_type) {
                if let Some(d) = crate::ir::DataType::from_code(i64::from(code)) {
                    own.insert(n.clone(), format!("tensor({})", d.name()));
                }
            }
        }
        for t in &g.sparse_initializer {
            let values = t.values.as_ref();
            if let (Some(n), Some(code)) = (
                values.and_then(|v| v.name.as_ref()),
                values.and_then(|v| v.data_type),
            ) {
                if let Some(d) = crate::ir::DataType::from_code(i64::from(code)) {
                    own.insert(n.clone(), format!("sparse_tensor({})", d.name()));
                }
            }
        }
        let mut types = Types { own, dims, parent };
        for (i, node) in g.node.iter().enumerate() {
            let nloc = node_loc(loc, node, i);
            self.node(node, &nloc, opsets, &mut types, depth);
        }
    }

    fn node(
        &mut self,
        node: &'m NodeProto,
        nloc: &str,
        opsets: &Opsets<'_>,
        types: &mut Types<'_>,
        depth: usize,
    ) {
        // Nested graphs first see the values known before this node.
        for a in &node.attribute {
            let gloc = |k: usize| {
                format!(
                    "{nloc} attribute '{}' graph #{k}",
                    a.name.as_deref().unwrap_or("")
                )
            };
            for (k, g) in a.g.iter().chain(&a.graphs).enumerate() {
                let sub = Types {
                    own: HashMap::new(),
                    dims: HashMap::new(),
                    parent: Some(types),
                };
                self.graph(g, &gloc(k), opsets, Some(&sub), depth + 1);
            }
        }
        let op = node.op_type.as_deref().unwrap_or("");
        let domain = norm_domain(node.domain.as_deref().unwrap_or(""));
        if op.is_empty() || self.local.contains(&(domain, op)) {
            return;
        }
        let Some(version) = opsets.get(domain).copied() else {
            return; // `opset-imported` reports it.
        };
        let Some((_, newest)) = schema::domain_versions(domain) else {
            return; // A custom domain.
        };
        if version > newest {
            return; // Newer than the table; `opset-version-known` reports it.
        }
        let Some(s) = schema::resolve(domain, op, version) else {
            let later = schema::versions(domain, op).first();
            let message = match later {
                Some(l) => format!(
                    "operator '{op}' was added to domain '{}' in version {}, but version {version} is imported",
                    show_domain(domain),
                    l.since_version
                ),
                None => format!(
                    "operator '{op}' does not exist in domain '{}'",
                    show_domain(domain)
                ),
            };
            self.cx.push(Rule::OperatorExists, nloc, message);
            return;
        };
        if s.deprecated {
            self.cx.push(
                Rule::OperatorNotDeprecated,
                nloc,
                format!(
                    "operator '{op}' is deprecated in version {version} of domain '{}'",
                    show_domain(domain)
                ),
            );
        }
        self.arity(node, nloc, s);
        self.attributes(node, nloc, s);
        self.types(node, nloc, s, types);
        self.shapes(node, nloc, s, types);
    }

    /// The shape requirements an operator's documentation states that declared dimensions can
    /// break: for `Conv` and `ConvTranspose`, the input channels are a multiple of `group` and
    /// agree with the weights.
    fn shapes(&mut self, node: &NodeProto, nloc: &str, s: &OpSchema, types: &Types<'_>) {
        let conv = match (s.domain, s.name) {
            ("", "Conv") => true,
            ("", "ConvTranspose") => false,
            _ => return,
        };
        let group = node
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some("group"))
            .and_then(|a| a.i)
            .unwrap_or(1);
        let dim = |k: usize, axis: usize| {
            let name = node.input.get(k).filter(|n| !n.is_empty())?;
            types.dims(name)?.get(axis).copied().flatten()
        };
        let Some(c) = dim(0, 1) else { return };
        if group < 1 || c % group != 0 {
            self.cx.push(
                Rule::OperatorShapeRequirement,
                nloc,
                format!(
                    "{} has {c} input channels, which group {group} does not divide",
                    s.name
                ),
            );
            return;
        }
        // Conv weights are [M, C/group, ...]; ConvTranspose weights are [C, M/group, ...].
        let (axis, want) = if conv { (1, c / group) } else { (0, c) };
        if let Some(w) = dim(1, axis) {
            if w != want {
                self.cx.push(
                    Rule::OperatorShapeRequirement,
                    nloc,
                    format!(
                        "{} has {c} input channels and group {group}, so its weights need {want} at dimension {axis}, not {w}",
                        s.name
                    ),
                );
            }
        }
    }

    fn arity(&mut self, node: &NodeProto, nloc: &str, s: &OpSchema) {
        let sides = [
            (
                "input",
                &node.input,
                s.min_inputs,
                s.max_inputs,
                s.inputs().collect::<Vec<_>>(),
            ),
            (
                "output",
                &node.output,
                s.min_outputs,
                s.max_outputs,
                s.outputs().collect(),
            ),
        ];
        for (what, names, lo, hi, formals) in sides {
            let n = names.len();
            if (n as u64) < u64::from(lo) || (n as u64) > u64::from(hi) {
                let range = if hi == u32::MAX {
                    format!("at least {lo}")
                } else if lo == hi {
                    format!("{lo}")
                } else {
                    format!("{lo} to {hi}")
                };
                self.cx.push(
                    Rule::OperatorArity,
                    nloc,
                    format!(
                        "{} version {} takes {range} {what}(s), the node has {n}",
                        s.name, s.since_version
                    ),
                );
                continue;
            }
            for (k, name) in names.iter().enumerate() {
                let Some(f) = formals.get(k.min(formals.len().saturating_sub(1))) else {
                    break;
                };
                if name.is_empty() && f.option != ParamOption::Optional {
                    self.cx.push(
                        Rule::OperatorArity,
                        nloc,
                        format!(
                            "{what} #{k} ('{}') of {} is required, but its name is empty",
                            f.name, s.name
                        ),
                    );
                }
            }
        }
    }

    fn attributes(&mut self, node: &NodeProto, nloc: &str, s: &OpSchema) {
        for a in &node.attribute {
            let name = a.name.as_deref().unwrap_or("");
            if name.is_empty() {
                continue;
            }
            let Some(spec) = s.attribute(name) else {
                self.cx.push(
                    Rule::AttributeKnown,
                    nloc,
                    format!(
                        "{} version {} has no attribute '{name}'",
                        s.name, s.since_version
                    ),
                );
                continue;
            };
            if let Some(kind) = given_kind(a) {
                if kind != spec.kind {
                    self.cx.push(
                        Rule::AttributeSchemaType,
                        nloc,
                        format!(
                            "attribute '{name}' of {} is {}, but the node gives {kind}",
                            s.name, spec.kind
                        ),
                    );
                }
            }
        }
        for spec in s.attributes().filter(|a| a.required) {
            if !node
                .attribute
                .iter()
                .any(|a| a.name.as_deref() == Some(spec.name))
            {
                self.cx.push(
                    Rule::AttributeRequired,
                    nloc,
                    format!(
                        "{} version {} requires attribute '{}' ({})",
                        s.name, s.since_version, spec.name, spec.kind
                    ),
                );
            }
        }
    }

    fn types(&mut self, node: &NodeProto, nloc: &str, s: &OpSchema, types: &mut Types<'_>) {
        let ins: Vec<_> = s.inputs().collect();
        let outs: Vec<_> = s.outputs().collect();
        let mut bound: HashMap<&str, String> = HashMap::new();
        let mut broken = false;
        let sides = [
            ("input", &node.input, &ins),
            ("output", &node.output, &outs),
        ];
        for (what, names, formals) in sides {
            for (k, name) in names.iter().enumerate() {
                let Some(f) = formals.get(k.min(formals.len().saturating_sub(1))) else {
                    break;
                };
                let Some(t) = (!name.is_empty()).then(|| types.get(name)).flatten() else {
                    continue;
                };
                let problem = match s.constraint(f.type_str) {
                    Some(c) if !c.allowed.contains(&t) => Some(format!(
                        "{what} #{k} '{name}' has type {t}, which {}'s {} ('{}') does not allow",
                        s.name, c.param, f.name
                    )),
                    Some(c) => {
                        let joint = f.option != ParamOption::Variadic || f.homogeneous;
                        match bound.get(c.param) {
                            Some(b) if joint && b != t => Some(format!(
                                "{what} #{k} '{name}' has type {t}, but {} is already {b} in this node",
                                c.param
                            )),
                            _ => {
                                if joint {
                                    bound.insert(c.param, t.to_string());
                                }
                                None
                            }
                        }
                    }
                    None if f.type_str != t && f.type_str.contains('(') => Some(format!(
                        "{what} #{k} '{name}' has type {t}, but {} takes {} there",
                        s.name, f.type_str
                    )),
                    None => None,
                };
                if let Some(p) = problem {
                    broken = true;
                    self.cx.push(Rule::TypeConstraint, nloc, p);
                }
            }
        }
        if broken {
            return;
        }
        // Operators whose output type an attribute decides.
        if let (Some(out), Some(t)) = (node.output.first(), attribute_typed_output(node, s)) {
            if !out.is_empty() && types.get(out).is_none() {
                types.own.insert(out.clone(), t);
            }
        }
        // Carry types forward to outputs not declared.
        for (k, name) in node.output.iter().enumerate() {
            let Some(f) = outs.get(k.min(outs.len().saturating_sub(1))) else {
                break;
            };
            if name.is_empty() || types.get(name).is_some() {
                continue;
            }
            let t = match s.constraint(f.type_str) {
                Some(c) => bound
                    .get(c.param)
                    .cloned()
                    .or_else(|| (c.allowed.len() == 1).then(|| c.allowed[0].to_string())),
                None if f.type_str.contains('(') => Some(f.type_str.to_string()),
                None => None,
            };
            if let Some(t) = t {
                types.own.insert(name.clone(), t);
            }
        }
    }
}

/// The output type of `Constant` (from the attribute that holds the value) and of `Cast` (its
/// `to`), when the node states it.
fn attribute_typed_output(node: &NodeProto, s: &OpSchema) -> Option<String> {
    let name_of = |code: i64| crate::ir::DataType::from_code(code).map(|d| d.name());
    let attr = |n: &str| node.attribute.iter().find(|a| a.name.as_deref() == Some(n));
    match (s.domain, s.name) {
        ("", "Constant") => {
            let a = node.attribute.first()?;
            let elem = match a.name.as_deref()? {
                "value" => name_of(i64::from(a.t.as_ref()?.data_type?))?,
                "sparse_value" => {
                    let code = a.sparse_tensor.as_ref()?.values.as_ref()?.data_type?;
                    return Some(format!("sparse_tensor({})", name_of(i64::from(code))?));
                }
                "value_float" | "value_floats" => "float".into(),
                "value_int" | "value_ints" => "int64".into(),
                "value_string" | "value_strings" => "string".into(),
                _ => return None,
            };
            Some(format!("tensor({elem})"))
        }
        ("", "Cast") => Some(format!("tensor({})", name_of(attr("to")?.i?)?)),
        _ => None,
    }
}

/// The type an attribute is given: its `type` field (unset before IR 2), when the value field
/// in use agrees with it (`attribute-type-matches` reports the attributes where it does not).
fn given_kind(a: &AttributeProto) -> Option<&'static str> {
    let kind = a.r#type.and_then(attr_kind)?;
    let fields = [
        ("FLOAT", a.f.is_some()),
        ("INT", a.i.is_some()),
        ("STRING", a.s.is_some()),
        ("TENSOR", a.t.is_some()),
        ("GRAPH", a.g.is_some()),
        ("SPARSE_TENSOR", a.sparse_tensor.is_some()),
        ("TYPE_PROTO", a.tp.is_some()),
        ("FLOATS", !a.floats.is_empty()),
        ("INTS", !a.ints.is_empty()),
        ("STRINGS", !a.strings.is_empty()),
        ("TENSORS", !a.tensors.is_empty()),
        ("GRAPHS", !a.graphs.is_empty()),
        ("SPARSE_TENSORS", !a.sparse_tensors.is_empty()),
        ("TYPE_PROTOS", !a.type_protos.is_empty()),
    ];
    let mut set = fields.iter().filter(|f| f.1).map(|f| f.0);
    match (set.next(), set.next()) {
        (Some(one), None) if one != kind => None,
        (_, Some(_)) => None,
        _ => Some(kind),
    }
}
