//! Import of a decoded `ModelProto` (and weights passed beside it) into a [`Graph`].

use super::{Attr, Dim, Graph, Node, Subgraph, Tensor, TensorType, ValueId, ValueInfo};
use crate::error::{Error, Result, Status};
use crate::ir::DataType;
use crate::model::onnx::{self, attribute_proto::AttributeType, type_proto, ModelProto};
use std::collections::HashMap;
use std::sync::Arc;

/// Oldest IR version accepted (opset imports appeared in IR 3).
pub const MIN_IR_VERSION: i64 = 3;
/// Newest IR version accepted.
pub const MAX_IR_VERSION: i64 = 14;
/// Newest default-domain opset accepted.
pub const MAX_OPSET: i64 = 28;
/// Oldest default-domain opset accepted.
pub const MIN_OPSET: i64 = 1;

/// A weight passed through `onnxInitGraph`'s descriptors, already copied.
#[derive(Clone, Debug)]
pub struct Weight {
    /// The graph input it gives a value to.
    pub name: String,
    /// Its data.
    pub tensor: Tensor,
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(Status::InvalidModel, msg)
}

/// Imports a model; weights, if any, replace the initializer list. The model is consumed: each
/// initializer's serialized bytes are freed as soon as it is decoded, so a model's weights are
/// never resident twice over (as bytes and as tensors) while it loads.
pub fn import(mut model: ModelProto, weights: Vec<Weight>) -> Result<Graph> {
    let ir_version = model.ir_version.unwrap_or(0);
    if ir_version < 1 {
        return Err(invalid("the model has no ir_version"));
    }
    if !(MIN_IR_VERSION..=MAX_IR_VERSION).contains(&ir_version) {
        return Err(Error::new(
            Status::UnsupportedVersion,
            format!("IR version {ir_version} is not supported (supported: {MIN_IR_VERSION}..={MAX_IR_VERSION})"),
        ));
    }
    let opset = default_opset(&model)?;
    let g = model
        .graph
        .as_mut()
        .ok_or_else(|| invalid("the model has no graph"))?;
    if !weights.is_empty() && (!g.initializer.is_empty() || !g.sparse_initializer.is_empty()) {
        return Err(invalid(
            "weights were passed both as initializers and as weight descriptors",
        ));
    }
    refuse_sparse(g)?;
    let initializers = std::mem::take(&mut g.initializer);
    let mut constants = HashMap::with_capacity(initializers.len());
    for init in initializers {
        // `init` (and the bytes it holds) is dropped at the end of each iteration.
        add_initializer(&mut constants, &init)?;
    }
    import_graph(g, opset, ir_version, constants, weights, None)
}

/// Refuses a graph with sparse initializers.
fn refuse_sparse(g: &onnx::GraphProto) -> Result<()> {
    if g.sparse_initializer.is_empty() {
        return Ok(());
    }
    Err(Error::new(
        Status::UnsupportedDatatype,
        "sparse initializers are not supported",
    ))
}

/// Decodes initializer `init` into `constants`, refusing a missing or repeated name.
fn add_initializer(
    constants: &mut HashMap<String, Tensor>,
    init: &onnx::TensorProto,
) -> Result<()> {
    let name = init.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(invalid("an initializer has no name"));
    }
    let t = Tensor::from_proto(init)?;
    if constants.insert(name.clone(), t).is_some() {
        return Err(invalid(format!("initializer '{name}' is defined twice")));
    }
    Ok(())
}

/// A value an enclosing graph makes visible to a subgraph.
#[derive(Clone, Debug)]
pub struct Outer {
    /// Its name.
    pub name: String,
    /// Its data, when it is a weight (shared, not captured at run time).
    pub constant: Option<Arc<Tensor>>,
    /// Its declared type.
    pub declared: Option<TensorType>,
}

/// The names a graph uses but does not define (its own inputs, initializers and node outputs),
/// including those its nested subgraphs use, in order of first use.
fn free_names(g: &onnx::GraphProto) -> Vec<String> {
    let mut defined: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for n in g.input.iter().filter_map(|v| v.name.as_deref()) {
        defined.insert(n);
    }
    for n in g.initializer.iter().filter_map(|t| t.name.as_deref()) {
        defined.insert(n);
    }
    for node in &g.node {
        for o in &node.output {
            defined.insert(o);
        }
    }
    let mut out: Vec<String> = Vec::new();
    let note = |n: &str, out: &mut Vec<String>| {
        if !n.is_empty() && !defined.contains(n) && !out.iter().any(|o| o == n) {
            out.push(n.to_string());
        }
    };
    for node in &g.node {
        for i in &node.input {
            note(i, &mut out);
        }
        for a in &node.attribute {
            for sub in a.g.iter().chain(&a.graphs) {
                for n in free_names(sub) {
                    note(&n, &mut out);
                }
            }
        }
    }
    for o in g.output.iter().filter_map(|v| v.name.as_deref()) {
        note(o, &mut out);
    }
    out
}

/// Imports one graph: the main graph (`outer` is `None`), or a subgraph seeing `outer` values
/// of its enclosing graphs (constants are shared, the others become captured inputs).
/// `constants` holds its initializers, already decoded (those left in `g` are added to them).
fn import_graph(
    g: &onnx::GraphProto,
    opset: i64,
    ir_version: i64,
    mut constants: HashMap<String, Tensor>,
    weights: Vec<Weight>,
    outer: Option<&[Outer]>,
) -> Result<Graph> {
    refuse_sparse(g)?;

    let mut values: Vec<ValueInfo> = Vec::new();
    let mut by_name: HashMap<String, ValueId> = HashMap::new();
    let mut declared: HashMap<&str, &onnx::ValueInfoProto> = HashMap::new();
    for vi in g.input.iter().chain(&g.output).chain(&g.value_info) {
        declared
            .entry(vi.name.as_deref().unwrap_or(""))
            .or_insert(vi);
    }

    for init in &g.initializer {
        add_initializer(&mut constants, init)?;
    }
    let graph_input_names: Vec<&str> = g
        .input
        .iter()
        .map(|v| v.name.as_deref().unwrap_or(""))
        .collect();
    for w in weights {
        if !graph_input_names.contains(&w.name.as_str()) {
            return Err(invalid(format!(
                "weight descriptor '{}' names no graph input",
                w.name
            )));
        }
        if constants.insert(w.name.clone(), w.tensor).is_some() {
            return Err(invalid(format!("weight '{}' is given twice", w.name)));
        }
    }

    let mut inputs = Vec::new();
    let define = |name: &str,
                  values: &mut Vec<ValueInfo>,
                  by_name: &mut HashMap<String, ValueId>|
     -> Result<ValueId> {
        if name.is_empty() {
            return Err(invalid("a value has an empty name"));
        }
        if by_name.contains_key(name) {
            return Err(invalid(format!("value '{name}' is defined more than once")));
        }
        let decl = match declared.get(name) {
            Some(vi) => tensor_type_of(vi)?,
            None => None,
        };
        values.push(ValueInfo {
            name: name.to_string(),
            declared: decl,
            constant: None,
            packed_only: None,
            widened_from: None,
        });
        by_name.insert(name.to_string(), values.len() - 1);
        Ok(values.len() - 1)
    };

    for vi in &g.input {
        let name = vi.name.as_deref().unwrap_or("");
        let id = define(name, &mut values, &mut by_name)?;
        if let Some(t) = constants.remove(name) {
            check_weight_against_declared(name, &t, values[id].declared.as_ref())?;
            values[id].constant = Some(Arc::new(t));
        } else {
            if values[id].declared.is_none() && outer.is_none() {
                return Err(invalid(format!("graph input '{name}' has no tensor type")));
            }
            inputs.push(id);
        }
    }
    let mut rest: Vec<(String, Tensor)> = constants.into_iter().collect();
    rest.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, t) in rest {
        let id = define(&name, &mut values, &mut by_name)?;
        values[id].constant = Some(Arc::new(t));
    }

    let mut captures = Vec::new();
    for o in outer.unwrap_or(&[]) {
        if by_name.contains_key(&o.name) {
            continue;
        }
        values.push(ValueInfo {
            name: o.name.clone(),
            declared: o.declared.clone(),
            constant: o.constant.clone(),
            packed_only: None,
            widened_from: None,
        });
        let id = values.len() - 1;
        by_name.insert(o.name.clone(), id);
        if o.constant.is_none() {
            inputs.push(id);
            captures.push(o.name.clone());
        }
    }

    let mut nodes = Vec::with_capacity(g.node.len());
    for (index, n) in g.node.iter().enumerate() {
        let name = match n.name.as_deref() {
            Some(s) if !s.is_empty() => s.to_string(),
            _ => format!("#{index}"),
        };
        let op_type = n.op_type.clone().unwrap_or_default();
        if op_type.is_empty() {
            return Err(invalid(format!("node '{name}' has no op_type")));
        }
        let mut node_inputs = Vec::with_capacity(n.input.len());
        for input in &n.input {
            if input.is_empty() {
                node_inputs.push(None);
                continue;
            }
            match by_name.get(input.as_str()) {
                Some(&id) => node_inputs.push(Some(id)),
                None => {
                    return Err(invalid(format!(
                        "node '{name}' ({op_type}) uses '{input}', which no graph input, initializer or earlier node defines"
                    )))
                }
            }
        }
        let mut node_outputs = Vec::with_capacity(n.output.len());
        for output in &n.output {
            if output.is_empty() {
                node_outputs.push(None);
                continue;
            }
            let id = define(output, &mut values, &mut by_name)
                .map_err(|e| e.context(format!("node '{name}' ({op_type})")))?;
            node_outputs.push(Some(id));
        }
        let mut attrs = std::collections::BTreeMap::new();
        let mut captured: Vec<String> = Vec::new();
        for a in &n.attribute {
            let here = || format!("node '{name}' ({op_type})");
            let mut sub = |body: &onnx::GraphProto| -> Result<Subgraph> {
                let visible = free_names(body)
                    .into_iter()
                    .map(|fname| {
                        let id = *by_name.get(&fname).ok_or_else(|| {
                            invalid(format!(
                                "a subgraph of {} uses '{fname}', which nothing defines before it",
                                here()
                            ))
                        })?;
                        let v = &values[id];
                        if v.constant.is_none() && !captured.contains(&fname) {
                            captured.push(fname.clone());
                        }
                        Ok(Outer {
                            name: fname,
                            constant: v.constant.clone(),
                            declared: v.declared.clone(),
                        })
                    })
                    .collect::<Result<Vec<Outer>>>()?;
                let graph = import_graph(
                    body,
                    opset,
                    ir_version,
                    HashMap::new(),
                    Vec::new(),
                    Some(&visible),
                )
                .map_err(|e| e.context(here()))?;
                Ok(Subgraph(Arc::new(graph)))
            };
            let (aname, value) = match (a.g.as_ref(), a.graphs.is_empty()) {
                (Some(body), _) => (a.name.clone().unwrap_or_default(), Attr::Graph(sub(body)?)),
                (None, false) if a.r#type == Some(AttributeType::Graphs as i32) => (
                    a.name.clone().unwrap_or_default(),
                    Attr::Graphs(a.graphs.iter().map(&mut sub).collect::<Result<_>>()?),
                ),
                _ => convert_attribute(a).map_err(|e| e.context(here()))?,
            };
            if attrs.insert(aname.clone(), value).is_some() {
                return Err(invalid(format!(
                    "node '{name}' ({op_type}) has attribute '{aname}' twice"
                )));
            }
        }
        for c in &captured {
            node_inputs.push(Some(by_name[c]));
        }
        nodes.push(Node {
            name,
            op_type,
            domain: n.domain.clone().unwrap_or_default(),
            inputs: node_inputs,
            outputs: node_outputs,
            attrs,
            captured,
        });
    }

    let mut outputs = Vec::with_capacity(g.output.len());
    for vi in &g.output {
        let name = vi.name.as_deref().unwrap_or("");
        let id = *by_name
            .get(name)
            .ok_or_else(|| invalid(format!("graph output '{name}' is never computed")))?;
        if values[id].declared.is_none() {
            values[id].declared = tensor_type_of(vi)?;
        }
        outputs.push(id);
    }
    if outputs.is_empty() {
        return Err(invalid("the graph has no outputs"));
    }

    Ok(Graph {
        values,
        nodes,
        inputs,
        outputs,
        opset,
        ir_version,
        captures,
    })
}

/// The version of the default ONNX domain the model imports.
fn default_opset(model: &ModelProto) -> Result<i64> {
    let mut found = None;
    for o in &model.opset_import {
        let domain = o.domain.as_deref().unwrap_or("");
        if domain.is_empty() || domain == "ai.onnx" {
            if found.is_some() {
                return Err(invalid("the default ONNX domain is imported twice"));
            }
            found = Some(o.version.unwrap_or(0));
        }
    }
    let v = match found {
        Some(v) => v,
        // A graph using only other domains needs no default opset; a node of the default
        // domain will be refused later by the compatibility check.
        None if model.opset_import.is_empty() => {
            return Err(invalid("the model imports no operator set"))
        }
        None => 0,
    };
    if v != 0 && !(MIN_OPSET..=MAX_OPSET).contains(&v) {
        return Err(Error::new(
            Status::UnsupportedVersion,
            format!("opset {v} of the default domain is not supported (supported: {MIN_OPSET}..={MAX_OPSET})"),
        ));
    }
    Ok(v)
}

/// The declared tensor type of a value info; `None` when it declares no type at all.
fn tensor_type_of(vi: &onnx::ValueInfoProto) -> Result<Option<TensorType>> {
    let name = vi.name.as_deref().unwrap_or("");
    let Some(tp) = &vi.r#type else {
        return Ok(None);
    };
    let tt = match &tp.value {
        Some(type_proto::Value::TensorType(t)) => t,
        None => return Ok(None),
        Some(_) => {
            return Err(Error::new(
                Status::UnsupportedDatatype,
                format!("value '{name}' is not a tensor (sequences, maps, optionals and sparse tensors are not supported)"),
            ))
        }
    };
    let code = tt.elem_type.unwrap_or(0) as i64;
    let dtype = DataType::from_code(code)
        .ok_or_else(|| invalid(format!("value '{name}' has unknown element type {code}")))?;
    let dims = tt.shape.as_ref().map(|s| {
        s.dim
            .iter()
            .map(|d| match &d.value {
                Some(onnx::tensor_shape_proto::dimension::Value::DimValue(v)) if *v >= 0 => {
                    Dim::Fixed(*v as usize)
                }
                // A name binds equal sizes only when it is a real identifier: exporters write
                // "?" (Paddle) for any unknown size, which ONNX Runtime does not tie together.
                Some(onnx::tensor_shape_proto::dimension::Value::DimParam(p))
                    if is_identifier(p) =>
                {
                    Dim::Symbol(p.clone())
                }
                _ => Dim::Unknown,
            })
            .collect()
    });
    Ok(Some(TensorType { dtype, dims }))
}

/// Whether a dimension name is a C-style identifier.
fn is_identifier(p: &str) -> bool {
    let mut chars = p.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn check_weight_against_declared(name: &str, t: &Tensor, decl: Option<&TensorType>) -> Result<()> {
    let Some(decl) = decl else { return Ok(()) };
    if decl.dtype != t.dtype() {
        return Err(Error::new(
            Status::MismatchingDatatype,
            format!(
                "weight '{name}' is {} but the graph declares {}",
                t.dtype().name(),
                decl.dtype.name()
            ),
        ));
    }
    if let Some(dims) = &decl.dims {
        let ok = dims.len() == t.shape.len()
            && dims.iter().zip(&t.shape).all(|(d, &s)| match d {
                Dim::Fixed(n) => *n == s,
                _ => true,
            });
        if !ok {
            return Err(Error::new(
                Status::MismatchingShape,
                format!(
                    "weight '{name}' has shape {:?}, which contradicts the graph's declaration",
                    t.shape
                ),
            ));
        }
    }
    Ok(())
}

/// Converts one attribute; its kind comes from `type` or, for old models, from the set field.
fn convert_attribute(a: &onnx::AttributeProto) -> Result<(String, Attr)> {
    let name = a.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(invalid("an attribute has no name"));
    }
    if a.ref_attr_name.is_some() {
        return Err(invalid(format!(
            "attribute '{name}' refers to a function attribute outside a function"
        )));
    }
    let kind = match a.r#type {
        Some(t) => AttributeType::try_from(t)
            .map_err(|_| invalid(format!("attribute '{name}' has unknown type {t}")))?,
        None => infer_kind(a),
    };
    let value = match kind {
        AttributeType::Float => Attr::Float(a.f.unwrap_or(0.0)),
        AttributeType::Int => Attr::Int(a.i.unwrap_or(0)),
        AttributeType::String => Attr::String(a.s.clone().unwrap_or_default()),
        AttributeType::Tensor => match &a.t {
            Some(t) => Attr::Tensor(Tensor::from_proto(t)?),
            None => return Err(invalid(format!("tensor attribute '{name}' has no tensor"))),
        },
        AttributeType::Floats => Attr::Floats(a.floats.clone()),
        AttributeType::Ints => Attr::Ints(a.ints.clone()),
        AttributeType::Strings => Attr::Strings(a.strings.clone()),
        AttributeType::Graph => Attr::Other("graph"),
        AttributeType::Graphs => Attr::Other("graphs"),
        AttributeType::SparseTensor => Attr::Other("sparse_tensor"),
        AttributeType::SparseTensors => Attr::Other("sparse_tensors"),
        AttributeType::Tensors => Attr::Other("tensors"),
        AttributeType::TypeProto => Attr::Other("type_proto"),
        AttributeType::TypeProtos => Attr::Other("type_protos"),
        AttributeType::Undefined => {
            return Err(invalid(format!("attribute '{name}' has no value")))
        }
    };
    Ok((name, value))
}

fn infer_kind(a: &onnx::AttributeProto) -> AttributeType {
    if a.f.is_some() {
        AttributeType::Float
    } else if a.i.is_some() {
        AttributeType::Int
    } else if a.s.is_some() {
        AttributeType::String
    } else if a.t.is_some() {
        AttributeType::Tensor
    } else if a.g.is_some() {
        AttributeType::Graph
    } else if !a.floats.is_empty() {
        AttributeType::Floats
    } else if !a.ints.is_empty() {
        AttributeType::Ints
    } else if !a.strings.is_empty() {
        AttributeType::Strings
    } else if !a.tensors.is_empty() {
        AttributeType::Tensors
    } else if !a.graphs.is_empty() {
        AttributeType::Graphs
    } else {
        AttributeType::Undefined
    }
}
