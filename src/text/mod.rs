//! The ONNX text syntax: parse models, graphs, functions and nodes written as text, and print
//! protos back as text.
//!
//! ```text
//! <ir_version: 8, opset_import: ["" : 18]>
//! agraph (float[N, 128] X, float[128, 10] W) => (float[N, 10] C) {
//!     T = MatMul(X, W)
//!     C = Softmax <axis = 1> (T)
//! }
//! ```
//!
//! The parser follows the grammar of the ONNX text-syntax document and agrees with the
//! reference parser (`onnx.parser`) on the protos it builds; see `tests/text_reference.rs`.
//! Deliberate differences: `parse_graph`, `parse_function` and `parse_node` reject trailing
//! text (the reference ignores it), and lists of tensors, graphs or types are kept (the
//! reference drops their elements, and accepts `[@ref]` as an empty attribute).
//!
//! Printing then parsing gives the proto back, except for what the syntax cannot hold; that is
//! exactly what [`normalize_model`] removes or rewrites.
#![forbid(unsafe_code)]

mod error;
mod normalize;
mod parser;
mod printer;
pub mod syntax;

pub use error::ParseError;
pub use normalize::{normalize_function, normalize_graph, normalize_model, normalize_node};
pub use parser::MAX_DEPTH;

use crate::model::onnx::{FunctionProto, GraphProto, ModelProto, NodeProto, TypeProto};
use parser::Parser;

/// Parses a model: an optional `<key: value, ...>` header, the main graph, then functions.
pub fn parse_model(text: &str) -> Result<ModelProto, ParseError> {
    let mut p = Parser::new(text);
    let m = p.model()?;
    p.finish()?;
    Ok(m)
}

/// Parses one graph: `name (inputs) => (outputs) <initializers, value infos>? { nodes }`.
pub fn parse_graph(text: &str) -> Result<GraphProto, ParseError> {
    let mut p = Parser::new(text);
    let g = p.graph()?;
    p.finish()?;
    Ok(g)
}

/// Parses one function: `<domain: ..., opset_import: [...]>? name <params>? (ins) => (outs)
/// <value infos>? { nodes }`.
pub fn parse_function(text: &str) -> Result<FunctionProto, ParseError> {
    let mut p = Parser::new(text);
    let f = p.function()?;
    p.finish()?;
    Ok(f)
}

/// Parses one node: `[label]? outs = domain.Op:overload <attrs>? (ins) <attrs>?`.
pub fn parse_node(text: &str) -> Result<NodeProto, ParseError> {
    let mut p = Parser::new(text);
    let n = p.node()?;
    p.finish()?;
    Ok(n)
}

/// Parses a node list: either `{ node* }` or nodes one after another up to the end.
pub fn parse_node_list(text: &str) -> Result<Vec<NodeProto>, ParseError> {
    let mut p = Parser::new(text);
    let nodes = p.nodes()?;
    p.finish()?;
    Ok(nodes)
}

/// Parses a type: `float[N,3]`, `seq(int64)`, `map(string, float)`, `optional(...)`,
/// `sparse_tensor(...)`.
pub fn parse_type(text: &str) -> Result<TypeProto, ParseError> {
    let mut p = Parser::new(text);
    let t = p.type_()?;
    p.finish()?;
    Ok(t)
}

/// Prints a model (header, main graph, functions).
pub fn print_model(model: &ModelProto) -> String {
    printer::model(model)
}

/// Prints a graph.
pub fn print_graph(graph: &GraphProto) -> String {
    printer::graph(graph)
}

/// Prints a function with its `<domain, opset_import, ...>` header.
pub fn print_function(function: &FunctionProto) -> String {
    printer::function(function)
}

/// Prints one node, without a trailing line break.
pub fn print_node(node: &NodeProto) -> String {
    printer::node(node)
}

/// Prints a type.
pub fn print_type(ty: &TypeProto) -> String {
    printer::type_text(ty)
}
