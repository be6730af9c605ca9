//! The backend's verdict on each node before shapes are known: is the operator registered for
//! this domain and opset, are all its attributes known, are the declared types supported. The
//! same code serves `onnxGetBackendCompatibility` and `onnxInitGraph`; shape-dependent checks
//! happen when the execution plan is built. Every problem is collected, so one verdict lists
//! every unsupported node, operator, version and type (its status is the first problem's).

use crate::error::{Error, Result, Status};
use crate::ir::{Attr, DataType, Graph, Node};
use crate::ops;
use crate::schema;

/// Checks every node and every declared graph input/output type of an imported graph.
pub fn check_graph(g: &Graph) -> Result<()> {
    let problems = problems(g);
    let Some(first) = problems.first() else {
        return Ok(());
    };
    let status = first.status;
    let message = if problems.len() == 1 {
        first.message.clone()
    } else {
        let list: Vec<&str> = problems.iter().map(|e| e.message.as_str()).collect();
        format!("{} problems: {}", problems.len(), list.join("; "))
    };
    Err(Error::new(status, message))
}

/// Every reason this backend cannot run the graph, in model order (graph inputs and outputs
/// first, then nodes with their subgraphs).
pub fn problems(g: &Graph) -> Vec<Error> {
    let mut out = Vec::new();
    let mut check = |r: Result<()>| {
        if let Err(e) = r {
            out.push(e);
        }
    };
    for &v in g.inputs.iter().chain(&g.outputs) {
        check(check_io(g, v));
    }
    nodes(g, &mut out);
    out
}

/// The problems of a graph's nodes, subgraphs (If / Loop / Scan bodies) included.
fn nodes(g: &Graph, out: &mut Vec<Error>) {
    for node in &g.nodes {
        if let Err(e) = check_node(g, node) {
            out.push(e);
        }
        for attr in node.attrs.values() {
            let subs: Vec<&Graph> = match attr {
                Attr::Graph(s) => vec![&s.0],
                Attr::Graphs(v) => v.iter().map(|s| &*s.0).collect(),
                _ => continue,
            };
            for sub in subs {
                nodes(sub, out);
            }
        }
    }
}

fn check_io(g: &Graph, v: usize) -> Result<()> {
    let value = &g.values[v];
    if let Some(t) = &value.declared {
        if !t.dtype.is_stored() {
            return Err(Error::new(
                Status::UnsupportedDatatype,
                format!(
                    "graph input/output '{}' has type {}, which is not supported",
                    value.name,
                    t.dtype.name()
                ),
            ));
        }
    }
    Ok(())
}

fn check_node(g: &Graph, node: &Node) -> Result<()> {
    let def = ops::lookup(&node.domain, &node.op_type).ok_or_else(|| {
        let domain = if node.domain.is_empty() {
            "ai.onnx"
        } else {
            &node.domain
        };
        Error::new(
            Status::UnsupportedOperator,
            format!(
                "{}: operator {domain}::{} is not supported",
                node.describe(),
                node.op_type
            ),
        )
    })?;
    // The version of the operator in force at the imported opset, from the schema table.
    let resolved = node
        .domain
        .is_empty()
        .then(|| schema::resolve("", &node.op_type, g.opset))
        .flatten()
        .map(|s| s.since_version);
    let implemented = match resolved {
        Some(v) => (def.min_opset..=def.newest).contains(&v),
        None => g.opset >= def.min_opset,
    };
    if !implemented {
        let which = match resolved {
            Some(v) => format!(
                "{} version {v} (in force at opset {})",
                node.op_type, g.opset
            ),
            None => format!("{} at opset {}", node.op_type, g.opset),
        };
        return Err(Error::new(
            Status::UnsupportedVersion,
            format!(
                "{}: {which} is not implemented; this backend implements versions {} to {} (supported from opset {})",
                node.describe(),
                def.min_opset,
                def.newest,
                def.min_opset
            ),
        ));
    }
    if let Some(name) = node
        .attrs
        .keys()
        .find(|k| !def.attributes.contains(&k.as_str()))
    {
        return Err(Error::new(
            Status::UnsupportedAttribute,
            format!("{}: attribute '{name}' is not supported", node.describe()),
        ));
    }
    if let Some(Some(first)) = node.inputs.first() {
        if let Some(decl) = &g.values[*first].declared {
            if !crate::ops::widen::computes(def, decl.dtype) {
                return Err(Error::new(
                    Status::UnsupportedDatatype,
                    format!(
                        "{}: input type {} is not supported (supported: {})",
                        node.describe(),
                        decl.dtype.name(),
                        type_list(def.types)
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn type_list(types: &[DataType]) -> String {
    types
        .iter()
        .map(|t| t.name())
        .collect::<Vec<_>>()
        .join(", ")
}
