//! The execution plan for one set of concrete input shapes: nodes lowered to kernels, constant
//! subgraphs folded, and for every step the values that die after it (so their buffers are
//! reused by later steps).

use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Dim, Graph, Tensor, TensorData, ValueId};
use crate::ops::{self, BuildCtx, InputInfo, Kernel};
use std::sync::Arc;

/// One kernel invocation.
pub struct Step {
    /// Index of the node in the graph.
    pub node: usize,
    /// The prepared kernel.
    pub kernel: Box<dyn Kernel>,
    /// Input values (`None` for omitted optional inputs).
    pub inputs: Vec<Option<ValueId>>,
    /// Output values (`None` for omitted optional outputs).
    pub outputs: Vec<Option<ValueId>>,
    /// Values whose last use is this step.
    pub frees: Vec<ValueId>,
}

/// A graph lowered for concrete input shapes.
pub struct Plan {
    /// Steps in execution order.
    pub steps: Vec<Step>,
    /// Known data per value: weights, folded constants, shape-like inputs.
    pub constants: Vec<Option<Arc<Tensor>>>,
    /// Type and shape per value.
    pub types: Vec<Option<(DataType, Vec<usize>)>>,
    /// Graph inputs fed at run time, in order (`None` for shape-like inputs folded in).
    pub inputs: Vec<Option<ValueId>>,
    /// Graph outputs.
    pub outputs: Vec<ValueId>,
}

impl Plan {
    /// Plans `graph` for the given inputs: each a shape, plus contents for shape-like inputs.
    pub fn build(graph: &Graph, inputs: &[(Vec<usize>, Option<Tensor>)]) -> Result<Plan> {
        let n = graph.values.len();
        let mut constants: Vec<Option<Arc<Tensor>>> =
            graph.values.iter().map(|v| v.constant.clone()).collect();
        let mut types: Vec<Option<(DataType, Vec<usize>)>> = constants
            .iter()
            .map(|c| c.as_ref().map(|t| (t.dtype(), t.shape.clone())))
            .collect();
        let mut fed = Vec::with_capacity(inputs.len());
        for (&id, (shape, contents)) in graph.inputs.iter().zip(inputs) {
            let dtype = graph.values[id]
                .declared
                .as_ref()
                .map_or(DataType::F32, |d| d.dtype);
            types[id] = Some((dtype, shape.clone()));
            match contents {
                Some(t) => {
                    constants[id] = Some(Arc::new(t.clone()));
                    fed.push(None);
                }
                None => fed.push(Some(id)),
            }
        }

        let mut steps = Vec::new();
        let mut total_bytes = 0u64;
        for (index, node) in graph.nodes.iter().enumerate() {
            let def = ops::lookup(&node.domain, &node.op_type).ok_or_else(|| {
                Error::new(
                    Status::UnsupportedOperator,
                    format!("{}: not supported", node.describe()),
                )
            })?;
            let mut infos = Vec::with_capacity(node.inputs.len());
            for input in &node.inputs {
                infos.push(match input {
                    None => None,
                    Some(id) => {
                        let (dtype, shape) = types[*id].as_ref().ok_or_else(|| {
                            Error::new(
                                Status::InternalError,
                                format!("{}: input without a type", node.describe()),
                            )
                        })?;
                        Some(InputInfo {
                            dtype: *dtype,
                            shape,
                            constant: constants[*id].as_deref(),
                        })
                    }
                });
            }
            let ctx = BuildCtx {
                node,
                opset: graph.opset,
                inputs: infos,
            };
            let built = (def.build)(&ctx)?;
            if built.outputs.len() < node.outputs.iter().filter(|o| o.is_some()).count() {
                return Err(Error::new(
                    Status::UnsupportedOperator,
                    format!(
                        "{}: only {} output(s) supported",
                        node.describe(),
                        built.outputs.len()
                    ),
                ));
            }
            for (slot, (dtype, shape)) in node.outputs.iter().zip(&built.outputs) {
                let elements = crate::ir::numel(shape).map_err(|_| {
                    Error::new(
                        Status::UnsupportedShape,
                        format!(
                            "{}: output shape {shape:?} has too many elements",
                            node.describe()
                        ),
                    )
                })?;
                let bytes = elements
                    .checked_mul(dtype.size().unwrap_or(1))
                    .filter(|&b| b as u64 <= memory_limit())
                    .ok_or_else(|| {
                        Error::new(
                            Status::NoSystemMemory,
                            format!(
                                "{}: an output of shape {shape:?} does not fit in memory",
                                node.describe()
                            ),
                        )
                    })?;
                total_bytes = total_bytes.saturating_add(bytes as u64);
                if let Some(id) = slot {
                    check_declared(graph, *id, *dtype, shape)
                        .map_err(|e| e.context(node.describe()))?;
                    types[*id] = Some((*dtype, shape.clone()));
                }
            }
            let all_known = node
                .inputs
                .iter()
                .flatten()
                .all(|id| constants[*id].is_some());
            if all_known {
                // Fold: run the kernel now, on constants only.
                let ins: Vec<Option<&Tensor>> = node
                    .inputs
                    .iter()
                    .map(|i| i.and_then(|id| constants[id].as_deref()))
                    .collect();
                let mut outs = built
                    .outputs
                    .iter()
                    .map(|(dt, shape)| {
                        Ok(Tensor {
                            shape: shape.clone(),
                            data: TensorData::zeros(*dt, shape.iter().product())?,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                built.kernel.run(&ins, &mut outs)?;
                for (slot, t) in node.outputs.iter().zip(outs) {
                    if let Some(id) = slot {
                        constants[*id] = Some(Arc::new(t));
                    }
                }
            } else {
                steps.push(Step {
                    node: index,
                    kernel: built.kernel,
                    inputs: node.inputs.clone(),
                    outputs: node.outputs.clone(),
                    frees: Vec::new(),
                });
            }
        }

        if total_bytes > memory_limit() {
            return Err(Error::new(
                Status::NoSystemMemory,
                format!(
                    "the graph's values need {total_bytes} bytes, more than this machine's memory"
                ),
            ));
        }

        // Liveness: the last step that reads (or, for dead outputs, writes) each value.
        let mut last_use: Vec<Option<usize>> = vec![None; n];
        for (s, step) in steps.iter().enumerate() {
            for id in step.inputs.iter().chain(&step.outputs).flatten() {
                last_use[*id] = Some(s);
            }
        }
        for &o in &graph.outputs {
            last_use[o] = None;
        }
        for &i in &graph.inputs {
            last_use[i] = None;
        }
        for (id, last) in last_use.iter().enumerate() {
            if let Some(s) = last {
                if constants[id].is_none() {
                    steps[*s].frees.push(id);
                }
            }
        }

        Ok(Plan {
            steps,
            constants,
            types,
            inputs: fed,
            outputs: graph.outputs.clone(),
        })
    }

    /// The shapes of the graph outputs.
    pub fn output_shapes(&self) -> Vec<Vec<usize>> {
        self.outputs
            .iter()
            .map(|&o| {
                self.types[o]
                    .as_ref()
                    .map(|t| t.1.clone())
                    .unwrap_or_default()
            })
            .collect()
    }
}

/// The most memory a plan may ask for: the machine's physical memory (1 TiB if unknown).
fn memory_limit() -> u64 {
    match crate::backend::cpu_info().memory_bytes {
        0 => 1 << 40,
        m => m,
    }
}

/// Compares an inferred output type with what the model declared for that value.
fn check_declared(graph: &Graph, id: ValueId, dtype: DataType, shape: &[usize]) -> Result<()> {
    let value = &graph.values[id];
    let Some(decl) = &value.declared else {
        return Ok(());
    };
    if decl.dtype != dtype {
        return Err(Error::new(
            Status::MismatchingDatatype,
            format!(
                "'{}' is declared {} but computes as {}",
                value.name,
                decl.dtype.name(),
                dtype.name()
            ),
        ));
    }
    if let Some(dims) = &decl.dims {
        let ok = dims.len() == shape.len()
            && dims
                .iter()
                .zip(shape)
                .all(|(d, &s)| !matches!(d, Dim::Fixed(n) if *n != s));
        if !ok {
            return Err(Error::new(
                Status::MismatchingShape,
                format!(
                    "'{}' is declared with shape [{}] but computes as {:?}",
                    value.name,
                    super::dims_text(dims).join(", "),
                    shape
                ),
            ));
        }
    }
    Ok(())
}
