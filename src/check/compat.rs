//! The backend's verdict on each node before shapes are known: is the operator registered for
//! this domain and opset, are all its attributes known, are the declared types supported. The
//! same code serves `onnxGetBackendCompatibility` and `onnxInitGraph`; shape-dependent checks
//! happen when the execution plan is built.

use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Graph};
use crate::ops;

/// Checks every node and every declared graph input/output type of an imported graph.
pub fn check_graph(g: &Graph) -> Result<()> {
    for &v in g.inputs.iter().chain(&g.outputs) {
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
    }
    for node in &g.nodes {
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
        if g.opset < def.min_opset {
            return Err(Error::new(
                Status::UnsupportedVersion,
                format!(
                    "{}: {} is supported from opset {}, the model imports {}",
                    node.describe(),
                    node.op_type,
                    def.min_opset,
                    g.opset
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
                if !def.types.contains(&decl.dtype) {
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
