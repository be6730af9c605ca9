//! What an operator sees while it is built, and helpers shared by operators.

use super::Kernel;
use crate::error::{Error, Result, Status};
use crate::exec::WeightCache;
use crate::ir::{Attr, DataType, Node, Tensor, ValueId};
use std::any::Any;
use std::cell::Cell;
use std::sync::Arc;

/// A node input as known at planning time.
#[derive(Clone, Copy, Debug)]
pub struct InputInfo<'a> {
    /// Element type.
    pub dtype: DataType,
    /// Concrete shape.
    pub shape: &'a [usize],
    /// Its data, when known while planning (weights, constants, folded values).
    pub constant: Option<&'a Tensor>,
    /// Its data when the node is built at run time (a value computed from run-time data):
    /// read only through [`BuildCtx::const_input`], which records the read.
    pub run_time: Option<&'a Tensor>,
    /// The graph value, when the data is one of the graph's own weights (shared by every plan,
    /// so what is derived from it can be cached per graph).
    pub weight: Option<ValueId>,
}

impl<'a> InputInfo<'a> {
    /// Type and shape only.
    pub fn new(dtype: DataType, shape: &'a [usize]) -> Self {
        InputInfo {
            dtype,
            shape,
            constant: None,
            run_time: None,
            weight: None,
        }
    }
}

/// The context in which an operator builds its kernel.
pub struct BuildCtx<'a> {
    /// The node.
    pub node: &'a Node,
    /// Its position in the graph (keys what is prepared once per node).
    pub node_index: usize,
    /// The default-domain opset version of the model.
    pub opset: i64,
    /// Inputs in order; `None` for omitted optional inputs.
    pub inputs: Vec<Option<InputInfo<'a>>>,
    /// The graph's cache of prepared weights, shared by all plans.
    pub weights: Option<&'a WeightCache>,
    /// The half-precision type of a node built through its float32 kernels (`ops::widen`):
    /// its inputs arrive widened to float32, and a kernel may still use that type's own
    /// arithmetic where the CPU has it (bfloat16 products, `gemm::PackedB::bf16_pairs`).
    pub half: Option<DataType>,
    /// Bit `i` is set when the build read the contents of input `i` through
    /// [`BuildCtx::const_input`] (bit 63 stands for every input from 63 on).
    reads: Cell<u64>,
    /// Set when [`BuildCtx::const_input`] asked for contents that only a run will know.
    wants_run_time_data: Cell<bool>,
}

impl<'a> BuildCtx<'a> {
    /// A context for building `node` under `opset` with the given inputs.
    pub fn new(
        node: &'a Node,
        node_index: usize,
        opset: i64,
        inputs: Vec<Option<InputInfo<'a>>>,
        weights: Option<&'a WeightCache>,
    ) -> Self {
        BuildCtx {
            node,
            node_index,
            opset,
            inputs,
            weights,
            half: None,
            reads: Cell::new(0),
            wants_run_time_data: Cell::new(false),
        }
    }

    /// Which inputs' contents the build read (bit per input, see the field).
    pub fn content_reads(&self) -> u64 {
        self.reads.get()
    }

    /// Whether the build failed only because an input's contents are not known until a run.
    pub fn wants_run_time_data(&self) -> bool {
        self.wants_run_time_data.get()
    }

    /// The prepared form of weight input `i` under `tag` (which must name every parameter the
    /// preparation depends on): made once per graph and shared by all its plans when the input
    /// is one of the graph's weights, made afresh otherwise.
    pub fn prepared<T: Any + Send + Sync>(
        &self,
        i: usize,
        tag: &str,
        make: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        let weight = self.input(i)?.weight;
        match (weight, self.weights) {
            (Some(id), Some(cache)) => cache.get_or_make(id, tag, make),
            _ => make().map(Arc::new),
        }
    }

    /// What this node prepares once per graph under `tag` (compiled subgraphs, say), shared
    /// by every plan.
    pub fn per_node<T: Any + Send + Sync>(
        &self,
        tag: &str,
        make: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        match self.weights {
            Some(cache) => {
                cache.get_or_make(usize::MAX, &format!("node{}/{tag}", self.node_index), make)
            }
            None => make().map(Arc::new),
        }
    }

    /// A graph attribute (a subgraph), which must be present.
    pub fn attr_graph(&self, name: &str) -> Result<&'a crate::ir::Graph> {
        match self.attr(name) {
            Some(Attr::Graph(g)) => Ok(&g.0),
            Some(other) => Err(self.wrong_kind(name, "a graph", other)),
            None => Err(self.err(
                Status::InvalidModel,
                format!("attribute '{name}' is required"),
            )),
        }
    }

    /// An error of the given status naming this node.
    pub fn err(&self, status: Status, msg: impl std::fmt::Display) -> Error {
        Error::new(status, format!("{}: {msg}", self.node.describe()))
    }

    /// Refuses an output of `shape` that cannot fit in memory (NO_SYSTEM_MEMORY; an element
    /// count that overflows is UNSUPPORTED_SHAPE), for builders that prepare tables or scratch
    /// proportional to their output before the planner checks the output itself.
    pub fn check_fits(&self, dtype: DataType, shape: &[usize]) -> Result<()> {
        crate::exec::fitting_bytes(dtype, shape)
            .map(|_| ())
            .map_err(|e| e.context(self.node.describe()))
    }

    /// Input `i`, which must be present.
    pub fn input(&self, i: usize) -> Result<InputInfo<'a>> {
        self.inputs
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| self.err(Status::InvalidModel, format!("input {i} is required")))
    }

    /// Input `i` if present.
    pub fn opt_input(&self, i: usize) -> Option<InputInfo<'a>> {
        self.inputs.get(i).copied().flatten()
    }

    /// Checks the number of inputs and outputs.
    pub fn arity(
        &self,
        min_in: usize,
        max_in: usize,
        min_out: usize,
        max_out: usize,
    ) -> Result<()> {
        let n_in = self.node.inputs.len();
        let n_out = self.node.outputs.len();
        if n_in < min_in || n_in > max_in {
            return Err(self.err(
                Status::InvalidModel,
                format!("takes {min_in}..={max_in} inputs, has {n_in}"),
            ));
        }
        if n_out < min_out || n_out > max_out {
            return Err(self.err(
                Status::InvalidModel,
                format!("has {min_out}..={max_out} outputs, has {n_out}"),
            ));
        }
        Ok(())
    }

    /// Input `i`, which must be float.
    pub fn float_input(&self, i: usize) -> Result<InputInfo<'a>> {
        let x = self.input(i)?;
        if x.dtype != DataType::F32 {
            return Err(self.err(
                Status::UnsupportedDatatype,
                format!("input {i} is {}; only float is supported", x.dtype.name()),
            ));
        }
        Ok(x)
    }

    /// The data of input `i`, whose contents shape the node's outputs: a constant, or the
    /// run-time value when the node is built during a run. While planning, a value that only
    /// a run knows makes the planner build this node at run time instead.
    pub fn const_input(&self, i: usize, what: &str) -> Result<&'a Tensor> {
        let x = self.input(i)?;
        self.reads.set(self.reads.get() | 1u64 << i.min(63));
        x.constant.or(x.run_time).ok_or_else(|| {
            self.wants_run_time_data.set(true);
            self.err(
                Status::UnsupportedShape,
                format!("{what} (input {i}) is only known at run time"),
            )
        })
    }

    /// The contents of integer input `i` (see [`BuildCtx::const_input`]) as i64 values.
    pub fn const_ints(&self, i: usize, what: &str) -> Result<Vec<i64>> {
        self.const_input(i, what)?
            .to_i64_vec()
            .map_err(|e| self.err(Status::InvalidModel, format!("{what}: {}", e.message)))
    }

    /// The contents of integer input `i` as a shape: non-negative sizes (see
    /// [`BuildCtx::const_input`]).
    pub fn const_dims(&self, i: usize, what: &str) -> Result<Vec<usize>> {
        let dims = self.const_ints(i, what)?;
        dims.iter()
            .map(|&d| usize::try_from(d))
            .collect::<std::result::Result<Vec<usize>, _>>()
            .map_err(|_| {
                self.err(
                    Status::InvalidModel,
                    format!("{what} {dims:?} has a negative dimension"),
                )
            })
    }

    /// A tensor attribute, if present.
    pub fn attr_tensor(&self, name: &str) -> Result<Option<&'a Tensor>> {
        match self.attr(name) {
            None => Ok(None),
            Some(Attr::Tensor(t)) => Ok(Some(t)),
            Some(other) => Err(self.wrong_kind(name, "a tensor", other)),
        }
    }

    fn attr(&self, name: &str) -> Option<&'a Attr> {
        self.node.attrs.get(name)
    }

    fn wrong_kind(&self, name: &str, want: &str, got: &Attr) -> Error {
        self.err(
            Status::InvalidModel,
            format!("attribute '{name}' must be {want}, not {}", got.kind()),
        )
    }

    /// An int attribute, or its default.
    pub fn attr_int(&self, name: &str, default: i64) -> Result<i64> {
        match self.attr(name) {
            None => Ok(default),
            Some(Attr::Int(v)) => Ok(*v),
            Some(other) => Err(self.wrong_kind(name, "an int", other)),
        }
    }

    /// A float attribute, or its default.
    pub fn attr_float(&self, name: &str, default: f32) -> Result<f32> {
        match self.attr(name) {
            None => Ok(default),
            Some(Attr::Float(v)) => Ok(*v),
            Some(other) => Err(self.wrong_kind(name, "a float", other)),
        }
    }

    /// An ints attribute, if present.
    pub fn attr_ints(&self, name: &str) -> Result<Option<&'a [i64]>> {
        match self.attr(name) {
            None => Ok(None),
            Some(Attr::Ints(v)) => Ok(Some(v)),
            Some(other) => Err(self.wrong_kind(name, "a list of ints", other)),
        }
    }

    /// A floats attribute, if present.
    pub fn attr_floats(&self, name: &str) -> Result<Option<&'a [f32]>> {
        match self.attr(name) {
            None => Ok(None),
            Some(Attr::Floats(v)) => Ok(Some(v)),
            Some(other) => Err(self.wrong_kind(name, "a list of floats", other)),
        }
    }

    /// A string attribute, or its default.
    pub fn attr_string(&self, name: &str, default: &str) -> Result<String> {
        match self.attr(name) {
            None => Ok(default.to_string()),
            Some(Attr::String(v)) => Ok(String::from_utf8_lossy(v).into_owned()),
            Some(other) => Err(self.wrong_kind(name, "a string", other)),
        }
    }

    /// A strings attribute as text (lossy UTF-8), empty when absent.
    pub fn attr_strings(&self, name: &str) -> Result<Vec<String>> {
        match self.attr(name) {
            None => Ok(Vec::new()),
            Some(Attr::Strings(v)) => Ok(v
                .iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .collect()),
            Some(other) => Err(self.wrong_kind(name, "a list of strings", other)),
        }
    }

    /// Normalises a possibly negative axis for a tensor of rank `rank` (`rank + 1` when
    /// `extra` allows the one-past-the-end position).
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize> {
        let r = rank as i64;
        let a = if axis < 0 { axis + r } else { axis };
        if a < 0 || a >= r.max(1) {
            return Err(self.err(
                Status::InvalidModel,
                format!("axis {axis} is out of range for rank {rank}"),
            ));
        }
        Ok(a as usize)
    }
}

/// Numpy-style multidirectional broadcast of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    crate::kernels::elementwise::broadcast_shape(a, b)
}

/// A kernel that copies its first input into its first output (same element count): Identity,
/// Reshape, Flatten, Squeeze, Unsqueeze, a ReduceX without axes under `noop_with_empty_axes`.
/// A run moves the input's storage to the output instead where the input dies at the step
/// ([`Kernel::forwards_input`]).
pub struct CopyKernel;

impl Kernel for CopyKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "copy without input"))?;
        outputs[0].data.copy_from(&x.data);
        Ok(())
    }

    fn overwrites_outputs(&self) -> bool {
        true
    }

    fn forwards_input(&self) -> bool {
        true
    }
}

/// A kernel whose result was fixed while planning (`Constant`, and `Shape` and `Size` of a
/// value whose shape the plan knows).
pub struct ConstKernel(pub Tensor);

impl Kernel for ConstKernel {
    fn run(&self, _inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        outputs[0] = self.0.clone();
        Ok(())
    }

    /// Its inputs' contents never matter, so the planner folds it whatever they are.
    fn reads_input(&self, _index: usize) -> bool {
        false
    }
}

/// The float data of a present input at run time.
pub fn f32_of<'t>(inputs: &[Option<&'t Tensor>], i: usize) -> Result<&'t [f32]> {
    inputs
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| {
            Error::new(
                Status::InternalError,
                format!("input {i} missing at run time"),
            )
        })?
        .as_f32()
}

/// The float data of an output at run time.
pub fn f32_out(t: &mut Tensor) -> Result<&mut [f32]> {
    match &mut t.data {
        crate::ir::TensorData::F32(v) => Ok(v),
        crate::ir::TensorData::Pooled(p) => Ok(p.as_mut_slice()),
        crate::ir::TensorData::Caller(c) => c
            .as_mut_slice()
            .ok_or_else(|| Error::new(Status::InternalError, "an input buffer is never written")),
        other => Err(Error::new(
            Status::InternalError,
            format!("output is {}, expected float", other.dtype().name()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_follows_numpy() {
        assert_eq!(broadcast(&[2, 3, 4], &[4]), Some(vec![2, 3, 4]));
        assert_eq!(broadcast(&[2, 1, 4], &[3, 1]), Some(vec![2, 3, 4]));
        assert_eq!(broadcast(&[], &[5]), Some(vec![5]));
        assert_eq!(broadcast(&[2, 3], &[4, 3]), None);
    }
}
