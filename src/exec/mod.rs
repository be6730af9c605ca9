//! From an imported graph to results: execution plans for concrete input shapes (cached), and
//! running them.
#![forbid(unsafe_code)]

mod plan;
mod run;

pub use plan::Plan;

use crate::check::compat;
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Dim, Graph, Tensor, TensorType};
use std::sync::{Arc, Mutex};

/// How many plans (one per distinct input shape set) an executable keeps.
const PLAN_CACHE: usize = 8;

/// A graph input or output as the caller sees it.
#[derive(Clone, Debug)]
pub struct IoSpec {
    /// Its name.
    pub name: String,
    /// Declared type and shape.
    pub declared: TensorType,
}

/// What an input contributes to a plan: its shape, and for integer inputs its contents
/// (integer inputs are shape-like: their values are folded into the plan).
#[derive(Clone, Debug, PartialEq)]
struct PlanKey(Vec<(Vec<usize>, Option<Tensor>)>);

/// A compiled model, ready to run for any input shapes its declarations allow.
pub struct Executable {
    graph: Graph,
    inputs: Vec<IoSpec>,
    outputs: Vec<IoSpec>,
    plans: Mutex<Vec<(PlanKey, Arc<Plan>)>>,
    buffers: Mutex<Vec<Vec<f32>>>,
}

impl Executable {
    /// Checks the graph against the backend and, when every input shape is fixed, plans it.
    pub fn new(graph: Graph) -> Result<Executable> {
        compat::check_graph(&graph)?;
        let spec = |id: usize| -> Result<IoSpec> {
            let v = &graph.values[id];
            let declared = v.declared.clone().ok_or_else(|| {
                Error::new(
                    Status::InvalidModel,
                    format!("'{}' has no declared type", v.name),
                )
            })?;
            Ok(IoSpec {
                name: v.name.clone(),
                declared,
            })
        };
        let inputs = graph
            .inputs
            .iter()
            .map(|&i| spec(i))
            .collect::<Result<Vec<_>>>()?;
        let outputs = graph
            .outputs
            .iter()
            .map(|&i| {
                let v = &graph.values[i];
                Ok(IoSpec {
                    name: v.name.clone(),
                    declared: v.declared.clone().unwrap_or(TensorType {
                        dtype: DataType::F32,
                        dims: None,
                    }),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        for s in &inputs {
            if s.declared.dims.is_none() {
                return Err(Error::new(
                    Status::InvalidModel,
                    format!("graph input '{}' has no shape", s.name),
                ));
            }
        }
        let exe = Executable {
            graph,
            inputs,
            outputs,
            plans: Mutex::new(Vec::new()),
            buffers: Mutex::new(Vec::new()),
        };
        let fixed: Option<Vec<Vec<usize>>> = exe
            .inputs
            .iter()
            .map(|s| s.declared.fixed_shape())
            .collect();
        if let Some(shapes) = fixed {
            if !exe.has_value_inputs() {
                exe.output_shapes(&shapes)?;
            }
        }
        Ok(exe)
    }

    /// The graph inputs the caller binds, in model order.
    pub fn inputs(&self) -> &[IoSpec] {
        &self.inputs
    }

    /// The graph outputs, in model order.
    pub fn outputs(&self) -> &[IoSpec] {
        &self.outputs
    }

    /// The imported graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Whether some input's contents shape the plan (integer inputs).
    pub fn has_value_inputs(&self) -> bool {
        self.inputs.iter().any(|s| is_value_input(s.declared.dtype))
    }

    /// Whether any declared input dimension is symbolic or unknown.
    pub fn has_symbolic_inputs(&self) -> bool {
        self.inputs
            .iter()
            .any(|s| s.declared.fixed_shape().is_none())
    }

    /// Checks input shapes against the declarations (binding symbols consistently) and, when
    /// the outputs do not depend on input values, returns the output shapes.
    pub fn output_shapes(&self, shapes: &[Vec<usize>]) -> Result<Option<Vec<Vec<usize>>>> {
        self.check_input_shapes(shapes)?;
        if self.has_value_inputs() {
            return Ok(None);
        }
        let key = PlanKey(shapes.iter().map(|s| (s.clone(), None)).collect());
        let plan = self.plan(key)?;
        Ok(Some(plan.output_shapes()))
    }

    fn check_input_shapes(&self, shapes: &[Vec<usize>]) -> Result<()> {
        if shapes.len() != self.inputs.len() {
            return Err(Error::new(
                Status::InternalError,
                "wrong number of input shapes",
            ));
        }
        let mut symbols: Vec<(&str, usize)> = Vec::new();
        for (spec, shape) in self.inputs.iter().zip(shapes) {
            let dims = spec.declared.dims.as_deref().unwrap_or(&[]);
            if dims.len() != shape.len() {
                return Err(Error::new(
                    Status::MismatchingShape,
                    format!(
                        "input '{}' has rank {} in the model, {} given",
                        spec.name,
                        dims.len(),
                        shape.len()
                    ),
                ));
            }
            for (d, &s) in dims.iter().zip(shape) {
                match d {
                    Dim::Fixed(n) if *n != s => {
                        return Err(Error::new(
                            Status::MismatchingShape,
                            format!(
                                "input '{}' has shape {:?} in the model, {:?} given",
                                spec.name,
                                dims_text(dims),
                                shape
                            ),
                        ))
                    }
                    Dim::Symbol(name) => match symbols.iter().find(|(n, _)| n == name) {
                        Some(&(_, v)) if v != s => {
                            return Err(Error::new(
                                Status::MismatchingShape,
                                format!(
                                    "dimension '{name}' is {v} in one input and {s} in '{}'",
                                    spec.name
                                ),
                            ))
                        }
                        Some(_) => {}
                        None => symbols.push((name, s)),
                    },
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn plan(&self, key: PlanKey) -> Result<Arc<Plan>> {
        {
            let plans = self.plans.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, p)) = plans.iter().find(|(k, _)| *k == key) {
                return Ok(p.clone());
            }
        }
        let plan = Arc::new(Plan::build(&self.graph, &key.0)?);
        let mut plans = self.plans.lock().unwrap_or_else(|p| p.into_inner());
        if plans.len() >= PLAN_CACHE {
            plans.remove(0);
        }
        plans.push((key, plan.clone()));
        Ok(plan)
    }

    /// Runs the model on inputs given in [`Executable::inputs`] order; returns the outputs in
    /// [`Executable::outputs`] order. Call it inside the backend's thread pool.
    pub fn run(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::new(Status::InternalError, "wrong number of inputs"));
        }
        for (spec, t) in self.inputs.iter().zip(&inputs) {
            if t.dtype() != spec.declared.dtype {
                return Err(Error::new(
                    Status::MismatchingDatatype,
                    format!(
                        "input '{}' is {} in the model, {} given",
                        spec.name,
                        spec.declared.dtype.name(),
                        t.dtype().name()
                    ),
                ));
            }
        }
        let shapes: Vec<Vec<usize>> = inputs.iter().map(|t| t.shape.clone()).collect();
        self.check_input_shapes(&shapes)?;
        let key = PlanKey(
            inputs
                .iter()
                .map(|t| {
                    (
                        t.shape.clone(),
                        is_value_input(t.dtype()).then(|| t.clone()),
                    )
                })
                .collect(),
        );
        let plan = self.plan(key)?;
        let mut buffers =
            std::mem::take(&mut *self.buffers.lock().unwrap_or_else(|p| p.into_inner()));
        let result = run::run(&plan, inputs, &mut buffers);
        let mut kept = self.buffers.lock().unwrap_or_else(|p| p.into_inner());
        if kept.is_empty() {
            *kept = buffers;
        }
        result
    }
}

/// Integer and boolean inputs are treated as shape-like: their contents join the plan key.
fn is_value_input(t: DataType) -> bool {
    t != DataType::F32 && t != DataType::F64
}

fn dims_text(dims: &[Dim]) -> Vec<String> {
    dims.iter()
        .map(|d| match d {
            Dim::Fixed(n) => n.to_string(),
            Dim::Symbol(s) => s.clone(),
            Dim::Unknown => "?".into(),
        })
        .collect()
}
