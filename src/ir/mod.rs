//! The internal graph: element types, tensors, typed attributes, nodes and values, imported from
//! a `ModelProto` (plus weights passed beside it).
#![forbid(unsafe_code)]

mod caller;
mod dtype;
mod elem;
pub mod import;
pub mod narrow;
mod pooled;
mod tensor;
mod value;

pub use caller::CallerF32;
pub use dtype::DataType;
pub use elem::Elem;
pub use import::Outer;
pub use import::{import, Weight};
pub use pooled::PooledF32;
pub use tensor::{numel, row_major_strides, try_filled, Tensor, TensorData};
pub use value::Value;

use std::collections::BTreeMap;

/// Index of a value in [`Graph::values`].
pub type ValueId = usize;

/// One dimension of a declared shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A fixed size.
    Fixed(usize),
    /// A named size, bound when the caller gives concrete shapes.
    Symbol(String),
    /// A size nobody named.
    Unknown,
}

/// A declared tensor type: element type and (maybe partly symbolic) shape, if known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorType {
    /// Element type.
    pub dtype: DataType,
    /// Dimensions, or `None` when the rank is unknown.
    pub dims: Option<Vec<Dim>>,
}

impl TensorType {
    /// The concrete shape, if every dimension is fixed.
    pub fn fixed_shape(&self) -> Option<Vec<usize>> {
        self.dims
            .as_ref()?
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => Some(*n),
                _ => None,
            })
            .collect()
    }
}

/// A typed attribute value.
#[derive(Clone, Debug, PartialEq)]
pub enum Attr {
    /// A float.
    Float(f32),
    /// An integer.
    Int(i64),
    /// A byte string.
    String(Vec<u8>),
    /// A tensor.
    Tensor(Tensor),
    /// A list of floats.
    Floats(Vec<f32>),
    /// A list of integers.
    Ints(Vec<i64>),
    /// A list of byte strings.
    Strings(Vec<Vec<u8>>),
    /// A graph (the body of If, Loop, Scan).
    Graph(Subgraph),
    /// A list of graphs.
    Graphs(Vec<Subgraph>),
    /// A kind this backend does not evaluate (sparse tensors, type protos, tensor lists).
    Other(&'static str),
}

/// A subgraph attribute: an imported graph whose `inputs` are its formal inputs followed by the
/// values it captures from enclosing graphs (named in [`Graph::captures`]).
#[derive(Clone, Debug)]
pub struct Subgraph(pub std::sync::Arc<Graph>);

impl PartialEq for Subgraph {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Attr {
    /// The ONNX name of this attribute's kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Attr::Float(_) => "float",
            Attr::Int(_) => "int",
            Attr::String(_) => "string",
            Attr::Tensor(_) => "tensor",
            Attr::Floats(_) => "floats",
            Attr::Ints(_) => "ints",
            Attr::Strings(_) => "strings",
            Attr::Graph(_) => "graph",
            Attr::Graphs(_) => "graphs",
            Attr::Other(k) => k,
        }
    }
}

/// A node: an operator applied to values.
#[derive(Clone, Debug)]
pub struct Node {
    /// The node's name (may be empty in the model; import names unnamed nodes by position).
    pub name: String,
    /// Operator type.
    pub op_type: String,
    /// Operator domain ("" for the default ONNX domain).
    pub domain: String,
    /// Input values; `None` for an omitted optional input.
    pub inputs: Vec<Option<ValueId>>,
    /// Output values; `None` for an omitted optional output.
    pub outputs: Vec<Option<ValueId>>,
    /// Attributes by name.
    pub attrs: BTreeMap<String, Attr>,
    /// Names of the values this node's subgraphs capture from the enclosing graph; they are the
    /// last `captured.len()` entries of `inputs` (implicit inputs).
    pub captured: Vec<String>,
}

impl Node {
    /// "Op 'name'" for error messages.
    pub fn describe(&self) -> String {
        format!("node '{}' ({})", self.name, self.op_type)
    }
}

/// A value of the graph: a graph input, a weight, or a node output.
#[derive(Clone, Debug)]
pub struct ValueInfo {
    /// Its name in the model.
    pub name: String,
    /// Declared type, if the model gave one.
    pub declared: Option<TensorType>,
    /// Its data, for weights and constants known at import.
    pub constant: Option<std::sync::Arc<Tensor>>,
    /// The shape of a float32 weight whose data lives only in its consumers' prepared forms
    /// (packed GEMM panels in the executable's weight cache): `constant` was dropped once they
    /// were made, so the weight is not resident twice. `None` for every other value.
    pub packed_only: Option<Vec<usize>>,
    /// The half-precision type of a weight widened to float32 at load (`exec::fuse`, whose
    /// readers all compute in float32): its values are exactly those of that type. `None`
    /// for every other value.
    pub widened_from: Option<DataType>,
}

/// The imported graph.
#[derive(Clone, Debug)]
pub struct Graph {
    /// Every value.
    pub values: Vec<ValueInfo>,
    /// Nodes in a topological order.
    pub nodes: Vec<Node>,
    /// Graph inputs the caller must bind (weights excluded).
    pub inputs: Vec<ValueId>,
    /// Graph outputs.
    pub outputs: Vec<ValueId>,
    /// The default-domain opset version the model imports.
    pub opset: i64,
    /// The model's IR version.
    pub ir_version: i64,
    /// For a subgraph: the names of the values it captures from enclosing graphs, in the order
    /// they follow the formal inputs in `inputs` (empty for the main graph).
    pub captures: Vec<String>,
}

impl Graph {
    /// The number of formal inputs (those a caller or the owning operator binds).
    pub fn formal_inputs(&self) -> usize {
        self.inputs.len() - self.captures.len()
    }
}
