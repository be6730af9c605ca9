//! The execution plan for one tuple of input *shapes* (never input contents): nodes lowered to
//! kernels, constant subgraphs folded (shape arithmetic included, once the input shapes are
//! known), and for every step the values that die after it (so their buffers are reused).
//!
//! A node whose inputs' shapes or contents only a run can know (a Reshape whose target is
//! computed from a graph input, anything downstream of a data-dependent shape) becomes a
//! *deferred* step: it is built during the run from the actual inputs, and the build is memoised
//! for as long as those inputs keep their shapes (and, for the inputs whose contents the build
//! read, their contents). Nothing else is re-planned.

use super::weights::{Releaser, WeightCache};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Dim, Graph, Node, Tensor, TensorData, ValueId};
use crate::ops::{self, BuildCtx, Built, InputInfo, Kernel, OpDef};
use std::sync::{Arc, Mutex};

/// What a value is known to be while planning: its type and shape, or only its dtype for a
/// value whose shape a run decides.
#[derive(Clone, Debug, PartialEq)]
pub enum Known {
    /// Type and concrete shape.
    Static(DataType, Vec<usize>),
    /// Shape (and possibly type) decided at run time.
    Dynamic,
}

/// What a deferred build depended on for one input: type, shape, and the contents when the
/// build read them (`None` for an omitted input).
type InputKey = Option<(DataType, Vec<usize>, Option<Tensor>)>;

/// The last run-time build of a deferred step, reused while its key matches.
pub struct Memo {
    /// Per input, what the build depended on.
    key: Vec<InputKey>,
    /// Which inputs' contents the build read.
    reads: u64,
    /// The kernel.
    pub kernel: Arc<dyn Kernel>,
    /// Output types and shapes.
    pub outputs: Vec<(DataType, Vec<usize>)>,
}

/// How a step gets its kernel.
pub enum StepKernel {
    /// Built while planning.
    Static(Box<dyn Kernel>),
    /// Built during the run from the actual inputs (memoised).
    Deferred(Mutex<Option<Arc<Memo>>>),
}

/// One kernel invocation.
pub struct Step {
    /// Index of the node in the graph.
    pub node: usize,
    /// The kernel, or how to get it.
    pub kernel: StepKernel,
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
    /// Known data per value: weights and folded constants.
    pub constants: Vec<Option<Arc<Tensor>>>,
    /// Type and shape per value, as far as planning knows them (`None`: not computed).
    pub types: Vec<Option<Known>>,
    /// Graph inputs fed at run time, in order.
    pub inputs: Vec<ValueId>,
    /// Graph outputs.
    pub outputs: Vec<ValueId>,
    /// The most bytes that static values need at once (liveness peak, weights excluded).
    pub peak_bytes: u64,
    /// Per value: its half-precision type when a node left it in float32 (`types` holds
    /// float32 for it; see `ops::widen::float32_values`).
    pub wide: Vec<Option<DataType>>,
}

/// What a node's build needs besides its inputs.
pub struct BuildEnv<'a> {
    /// The graph.
    pub graph: &'a Graph,
    /// The graph's prepared-weight cache.
    pub weights: &'a WeightCache,
    /// Per value: whether a half-precision node may leave it in float32
    /// (`ops::widen::float32_values`).
    pub float32_ok: &'a [bool],
}

/// What a build made: the built node, the inputs whose contents it read, and per output
/// position the half-precision type of an output left in float32.
type Made = (Built, u64, Vec<Option<DataType>>);

impl BuildEnv<'_> {
    /// Builds `node` from its inputs (`logical`: per input, the half-precision type of one
    /// left in float32). `Ok(Err(()))` when the build needs contents that only a run knows
    /// (the planner defers the node). With `may_keep`, outputs that every reader widens stay
    /// float32.
    fn build(
        &self,
        def: &OpDef,
        index: usize,
        inputs: Vec<Option<InputInfo>>,
        logical: &[Option<DataType>],
        may_keep: bool,
    ) -> Result<std::result::Result<Made, ()>> {
        let node = &self.graph.nodes[index];
        // Half-precision data that the operator computes in float32 are widened for the
        // build, and its kernel wrapped (`ops::widen`).
        let half = ops::widen::half_type(def, &inputs, logical);
        let wide = match half {
            Some(h) => Some(ops::widen::WideInputs::new(&inputs, h, Some(self.weights))?),
            None => None,
        };
        let inputs = match (&wide, half) {
            (Some(w), Some(h)) => w.infos(inputs, h),
            _ => inputs,
        };
        let mut ctx = BuildCtx::new(node, index, self.graph.opset, inputs, Some(self.weights));
        ctx.half = half;
        let result = (def.build)(&ctx);
        let reads = ctx.content_reads();
        let wants_run_time_data = ctx.wants_run_time_data();
        drop(ctx);
        let result = match (wide, half) {
            (Some(w), Some(h)) => result.map(|built| {
                let keep: Vec<bool> = (node.outputs.iter())
                    .map(|o| may_keep && o.is_some_and(|id| self.float32_ok[id]))
                    .collect();
                w.wrap(def, built, h, &keep)
            }),
            _ => result.map(|built| {
                let none = vec![None; built.outputs.len()];
                (built, none)
            }),
        };
        match result {
            Ok((built, kept)) => {
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
                Ok(Ok((built, reads, kept)))
            }
            Err(_) if wants_run_time_data => Ok(Err(())),
            Err(e) => Err(e),
        }
    }

    /// Builds a deferred step's node from the actual run-time inputs, or reuses the memo.
    pub fn build_at_run_time(
        &self,
        step: &Step,
        memo: &Mutex<Option<Arc<Memo>>>,
        ins: &[Option<&Tensor>],
        plan: &Plan,
    ) -> Result<Arc<Memo>> {
        let constants = &plan.constants;
        let current = memo.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(m) = current {
            let same = m.key.len() == ins.len()
                && m.key
                    .iter()
                    .zip(ins)
                    .enumerate()
                    .all(|(i, (k, t))| match (k, t) {
                        (None, None) => true,
                        (Some((dt, shape, contents)), Some(t)) => {
                            *dt == t.dtype()
                                && *shape == t.shape
                                && (m.reads & (1 << i.min(63)) == 0
                                    || contents.as_ref() == Some(*t))
                        }
                        _ => false,
                    });
            if same {
                return Ok(m);
            }
        }
        let node = &self.graph.nodes[step.node];
        let def = lookup(node)?;
        let infos = step
            .inputs
            .iter()
            .zip(ins)
            .map(|(id, t)| {
                let id = (*id)?;
                if let Some(shape) = &self.graph.values[id].packed_only {
                    return Some(InputInfo {
                        weight: Some(id),
                        ..InputInfo::new(DataType::F32, shape)
                    });
                }
                let t = (*t)?;
                let constant = constants[id].as_deref();
                Some(InputInfo {
                    dtype: t.dtype(),
                    shape: &t.shape,
                    constant,
                    run_time: Some(t),
                    weight: weight_of(self.graph, id, constant),
                })
            })
            .collect();
        let logical: Vec<Option<DataType>> = (step.inputs.iter())
            .map(|id| id.and_then(|id| plan.wide[id]))
            .collect();
        // Outputs built at run time are never left in float32: the plan does not know them.
        let (built, reads, _) = self
            .build(def, step.node, infos, &logical, false)?
            .map_err(|()| {
                Error::new(
                    Status::InternalError,
                    format!("{}: contents missing at run time", node.describe()),
                )
            })?;
        if !built.kernel.allocates_outputs() {
            for (dtype, shape) in &built.outputs {
                fitting_bytes(*dtype, shape).map_err(|e| e.context(node.describe()))?;
            }
        }
        let key = ins
            .iter()
            .enumerate()
            .map(|(i, t)| {
                t.map(|t| {
                    let contents = (reads & (1 << i.min(63)) != 0).then(|| t.clone());
                    (t.dtype(), t.shape.clone(), contents)
                })
            })
            .collect();
        let fresh = Arc::new(Memo {
            key,
            reads,
            kernel: Arc::from(built.kernel),
            outputs: built.outputs,
        });
        *memo.lock().unwrap_or_else(|p| p.into_inner()) = Some(fresh.clone());
        Ok(fresh)
    }
}

fn lookup(node: &Node) -> Result<&'static OpDef> {
    ops::lookup(&node.domain, &node.op_type).ok_or_else(|| {
        Error::new(
            Status::UnsupportedOperator,
            format!("{}: not supported", node.describe()),
        )
    })
}

/// The graph value `id` as a weight shared by all plans, when `constant` is the graph's own or
/// the weight is held only in packed form.
fn weight_of(graph: &Graph, id: ValueId, constant: Option<&Tensor>) -> Option<ValueId> {
    if graph.values[id].packed_only.is_some() {
        return Some(id);
    }
    let own = graph.values[id].constant.as_deref()?;
    std::ptr::eq(own, constant?).then_some(id)
}

/// Bytes of a value of `dtype` and `shape`: UNSUPPORTED_SHAPE when its element count
/// overflows, NO_SYSTEM_MEMORY when it cannot fit in memory (`backend::memory_limit`). The
/// planner checks every value with it, and operator builders check the tables and scratch they
/// size from an output before the planner sees it (`BuildCtx::check_fits`).
pub fn fitting_bytes(dtype: DataType, shape: &[usize]) -> Result<u64> {
    let too_many = || {
        Error::new(
            Status::UnsupportedShape,
            format!("an output of shape {shape:?} has too many elements"),
        )
    };
    let elements = crate::ir::numel(shape).map_err(|_| too_many())?;
    let bytes = elements
        .checked_mul(dtype.size().unwrap_or(1))
        .ok_or_else(too_many)? as u64;
    if bytes > crate::backend::memory_limit() {
        return Err(Error::new(
            Status::NoSystemMemory,
            format!("an output of shape {shape:?} does not fit in memory"),
        ));
    }
    Ok(bytes)
}

impl Plan {
    /// Plans `env.graph` for the given input types and shapes. With `owned`, the graph's weights
    /// (taken out of it by `weights::take_weights`), the plan owns them and drops each one that
    /// no step will read as soon as its readers are built (`weights::Releaser`); it returns the
    /// bytes so released.
    pub fn build(
        env: &BuildEnv,
        input_shapes: &[(DataType, Vec<usize>)],
        owned: Option<Vec<Option<Arc<Tensor>>>>,
    ) -> Result<(Plan, usize)> {
        let graph = env.graph;
        let n = graph.values.len();
        let mut releaser = owned.is_some().then(|| Releaser::new(graph));
        let mut constants: Vec<Option<Arc<Tensor>>> =
            owned.unwrap_or_else(|| graph.values.iter().map(|v| v.constant.clone()).collect());
        let mut types: Vec<Option<Known>> = constants
            .iter()
            .zip(&graph.values)
            .map(|(c, v)| match (c, &v.packed_only) {
                (Some(t), _) => Some(Known::Static(t.dtype(), t.shape.clone())),
                (None, Some(shape)) => Some(Known::Static(DataType::F32, shape.clone())),
                (None, None) => None,
            })
            .collect();
        for (&id, (dtype, shape)) in graph.inputs.iter().zip(input_shapes) {
            types[id] = Some(Known::Static(*dtype, shape.clone()));
        }

        let mut wide: Vec<Option<DataType>> = vec![None; n];
        let mut steps = Vec::new();
        for (index, node) in graph.nodes.iter().enumerate() {
            let def = lookup(node)?;
            let logical: Vec<Option<DataType>> = (node.inputs.iter())
                .map(|id| id.and_then(|id| wide[id]))
                .collect();
            let mut infos = Vec::with_capacity(node.inputs.len());
            let mut dynamic = false;
            for input in &node.inputs {
                infos.push(match input {
                    None => None,
                    Some(id) => match &types[*id] {
                        Some(Known::Static(dtype, shape)) => {
                            let constant = constants[*id].as_deref();
                            Some(InputInfo {
                                dtype: *dtype,
                                shape,
                                constant,
                                run_time: None,
                                weight: weight_of(graph, *id, constant),
                            })
                        }
                        Some(Known::Dynamic) => {
                            dynamic = true;
                            None
                        }
                        None => {
                            return Err(Error::new(
                                Status::InternalError,
                                format!("{}: input without a type", node.describe()),
                            ))
                        }
                    },
                });
            }
            let built = if dynamic {
                None
            } else {
                env.build(def, index, infos, &logical, true)?.ok()
            };
            let Some((built, _, kept)) = built else {
                for id in node.outputs.iter().flatten() {
                    types[*id] = Some(Known::Dynamic);
                }
                if let Some(r) = &mut releaser {
                    r.built(node, |_| true, &mut constants);
                }
                steps.push(Step {
                    node: index,
                    kernel: StepKernel::Deferred(Mutex::new(None)),
                    inputs: node.inputs.clone(),
                    outputs: node.outputs.clone(),
                    frees: Vec::new(),
                });
                continue;
            };
            let sizes_known = !built.kernel.allocates_outputs();
            for ((slot, (dtype, shape)), half) in node.outputs.iter().zip(&built.outputs).zip(kept)
            {
                if sizes_known {
                    fitting_bytes(*dtype, shape).map_err(|e| e.context(node.describe()))?;
                }
                if let Some(id) = slot {
                    wide[*id] = half;
                    if sizes_known {
                        check_declared(graph, *id, half.unwrap_or(*dtype), shape)
                            .map_err(|e| e.context(node.describe()))?;
                        types[*id] = Some(Known::Static(*dtype, shape.clone()));
                    } else {
                        types[*id] = Some(Known::Dynamic);
                    }
                }
            }
            // Every input the kernel reads at run time is a constant: `Shape` and `Size` of a
            // computed value read none, so the shape arithmetic after them folds too (YOLOv8's
            // anchor grid, `Shape → Gather → Cast → Range`, had 84 of 209 steps built at run
            // time and outputs whose sizes only a run could tell).
            let all_known = node.inputs.iter().enumerate().all(|(i, id)| match id {
                Some(id) => constants[*id].is_some() || !built.kernel.reads_input(i),
                None => true,
            });
            if all_known {
                // Fold: run the kernel now, on constants only (an input it does not read is
                // handed as absent).
                let ins: Vec<Option<&Tensor>> = node
                    .inputs
                    .iter()
                    .map(|i| i.and_then(|id| constants[id].as_deref()))
                    .collect();
                let mut outs = built
                    .outputs
                    .iter()
                    .map(|(dt, shape)| {
                        let len = if sizes_known {
                            shape.iter().product()
                        } else {
                            0
                        };
                        Ok(Tensor {
                            shape: shape.clone(),
                            data: TensorData::zeros(*dt, len)?,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                built.kernel.run(&ins, &mut outs)?;
                for (slot, t) in node.outputs.iter().zip(outs) {
                    if let Some(id) = slot {
                        types[*id] = Some(Known::Static(t.dtype(), t.shape.clone()));
                        constants[*id] = Some(Arc::new(t));
                    }
                }
                if let Some(r) = &mut releaser {
                    r.built(node, |_| false, &mut constants);
                }
            } else {
                if let Some(r) = &mut releaser {
                    r.built(node, |i| built.kernel.reads_input(i), &mut constants);
                }
                steps.push(Step {
                    node: index,
                    kernel: StepKernel::Static(built.kernel),
                    inputs: node.inputs.clone(),
                    outputs: node.outputs.clone(),
                    frees: Vec::new(),
                });
            }
        }

        // Liveness: the last step that reads (or, for dead outputs, writes) each value.
        let mut last_use: Vec<Option<usize>> = vec![None; n];
        for (s, step) in steps.iter().enumerate() {
            for id in step.inputs.iter().chain(&step.outputs).flatten() {
                last_use[*id] = Some(s);
            }
        }
        // Graph outputs outlive the steps; graph inputs (owned by the run) go back to the pool
        // after their last reader like intermediate values.
        for &o in &graph.outputs {
            last_use[o] = None;
        }
        for (id, last) in last_use.iter().enumerate() {
            if let Some(s) = last {
                if constants[id].is_none() && graph.values[id].packed_only.is_none() {
                    steps[*s].frees.push(id);
                }
            }
        }

        let peak_bytes = liveness_peak(&steps, &types, graph);
        if peak_bytes > crate::backend::memory_limit() {
            return Err(Error::new(
                Status::NoSystemMemory,
                format!(
                    "the graph needs {peak_bytes} bytes of intermediate values at once, more than this machine's memory"
                ),
            ));
        }

        let plan = Plan {
            steps,
            constants,
            types,
            inputs: graph.inputs.clone(),
            outputs: graph.outputs.clone(),
            peak_bytes,
            wide,
        };
        Ok((plan, releaser.map_or(0, |r| r.released)))
    }

    /// The shapes of the graph outputs; `None` for one that a run decides.
    pub fn output_shapes(&self) -> Vec<Option<Vec<usize>>> {
        self.outputs
            .iter()
            .map(|&o| match &self.types[o] {
                Some(Known::Static(_, shape)) => Some(shape.clone()),
                _ => None,
            })
            .collect()
    }

    /// How many steps are built at run time.
    pub fn deferred_steps(&self) -> usize {
        self.steps
            .iter()
            .filter(|s| matches!(s.kernel, StepKernel::Deferred(_)))
            .count()
    }
}

/// The most bytes of static values alive at once: graph inputs, then each step's outputs
/// allocated before its dying values are freed.
fn liveness_peak(steps: &[Step], types: &[Option<Known>], graph: &Graph) -> u64 {
    let bytes = |id: ValueId| match &types[id] {
        Some(Known::Static(dt, shape)) => {
            (shape.iter().product::<usize>() as u64).saturating_mul(dt.size().unwrap_or(1) as u64)
        }
        _ => 0,
    };
    let mut live: u64 = graph.inputs.iter().map(|&i| bytes(i)).sum();
    let mut peak = live;
    for step in steps {
        for id in step.outputs.iter().flatten() {
            live = live.saturating_add(bytes(*id));
        }
        peak = peak.max(live);
        for id in &step.frees {
            live = live.saturating_sub(bytes(*id));
        }
    }
    peak
}

/// Compares an inferred output type with what the model declared for that value.
pub fn check_declared(graph: &Graph, id: ValueId, dtype: DataType, shape: &[usize]) -> Result<()> {
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
