//! From an imported graph to results: execution plans for concrete input shapes (cached), and
//! running them.
#![forbid(unsafe_code)]

mod fuse;
mod plan;
pub mod profile;
mod run;
mod weights;

pub use plan::{fitting_bytes, Plan};
pub use weights::WeightCache;

use crate::check::compat;
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Dim, Graph, Tensor, TensorData, TensorType};
use plan::BuildEnv;
use run::RunScratch;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// How many plans (one per distinct tuple of input shapes) an executable keeps, least recently
/// used first out.
const PLAN_CACHE: usize = 8;

/// A graph input or output as the caller sees it.
#[derive(Clone, Debug)]
pub struct IoSpec {
    /// Its name.
    pub name: String,
    /// Declared type and shape.
    pub declared: TensorType,
}

/// What selects a plan: the input types and shapes, never their contents.
type PlanKey = Vec<(DataType, Vec<usize>)>;

/// A compiled model, ready to run for any input shapes its declarations allow.
pub struct Executable {
    graph: Graph,
    inputs: Vec<IoSpec>,
    outputs: Vec<IoSpec>,
    /// Plans, most recently used last.
    plans: Mutex<Vec<(PlanKey, Arc<Plan>)>>,
    plans_built: AtomicUsize,
    weights: WeightCache,
    /// Per value: whether a half-precision node may leave it in float32
    /// (`ops::widen::float32_values`).
    float32_ok: Vec<bool>,
    /// What runs reuse (see [`RunScratch`]); a run takes it out for its duration.
    scratch: Mutex<RunScratch>,
    /// Bytes of weights dropped once prepared ([`Executable::released_weight_bytes`]).
    released: usize,
}

impl Executable {
    /// A subgraph's executable (If / Loop / Scan bodies): its inputs, formal then captured, take
    /// whatever types and shapes the owning operator passes; plans are made per input shapes
    /// like the main graph's. Unsupported nodes were reported with the main graph.
    pub fn subgraph(graph: &Graph) -> Result<Executable> {
        let spec = |id: usize| {
            let v = &graph.values[id];
            IoSpec {
                name: v.name.clone(),
                declared: v.declared.clone().unwrap_or(TensorType {
                    dtype: DataType::F32,
                    dims: None,
                }),
            }
        };
        let inputs = graph.inputs.iter().map(|&i| spec(i)).collect();
        let outputs = graph.outputs.iter().map(|&i| spec(i)).collect();
        let mut graph = fuse::fuse(graph.clone());
        drop_unused_constants(&mut graph);
        let float32_ok = crate::ops::widen::float32_values(&graph);
        Ok(Executable {
            graph,
            inputs,
            outputs,
            plans: Mutex::new(Vec::new()),
            plans_built: AtomicUsize::new(0),
            weights: WeightCache::default(),
            float32_ok,
            scratch: Mutex::new(RunScratch::default()),
            released: 0,
        })
    }

    /// Runs a subgraph executable on its inputs (formal, then captured), with no check against
    /// declarations beyond what planning does.
    pub fn run_subgraph(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::new(
                Status::InternalError,
                "wrong number of subgraph inputs",
            ));
        }
        let mut inputs = inputs;
        let plan = self.plan_for(&inputs)?;
        let mut outputs = Vec::with_capacity(self.outputs.len());
        self.run_plan(&plan, (&mut inputs, &mut []), &mut outputs)?;
        Ok(outputs)
    }

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
        let mut graph = fuse::fuse(graph);
        drop_unused_constants(&mut graph);
        let weights = WeightCache::default();
        weights::pack_gemm_weights(&mut graph, &weights)?;
        let float32_ok = crate::ops::widen::float32_values(&graph);
        let mut exe = Executable {
            graph,
            inputs,
            outputs,
            plans: Mutex::new(Vec::new()),
            plans_built: AtomicUsize::new(0),
            float32_ok,
            weights,
            scratch: Mutex::new(RunScratch::default()),
            released: 0,
        };
        let fixed: Option<Vec<Vec<usize>>> = exe
            .inputs
            .iter()
            .map(|s| s.declared.fixed_shape())
            .collect();
        if let Some(shapes) = fixed {
            exe.plan_only(&shapes)?;
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

    /// Whether any declared input dimension is symbolic or unknown.
    pub fn has_symbolic_inputs(&self) -> bool {
        self.inputs
            .iter()
            .any(|s| s.declared.fixed_shape().is_none())
    }

    /// Checks input shapes against the declarations (binding symbols consistently), plans for
    /// them, and returns the output shapes (`None` for an output whose shape a run decides).
    pub fn output_shapes(&self, shapes: &[Vec<usize>]) -> Result<Vec<Option<Vec<usize>>>> {
        self.check_input_shapes(shapes.iter().map(Vec::as_slice))?;
        let key: PlanKey = self
            .inputs
            .iter()
            .zip(shapes)
            .map(|(spec, s)| (spec.declared.dtype, s.clone()))
            .collect();
        Ok(self.plan(&key)?.output_shapes())
    }

    /// How many plans were built so far (one per input-shape tuple seen, unless evicted).
    pub fn plans_built(&self) -> usize {
        self.plans_built.load(Ordering::Relaxed)
    }

    /// How many weight preparations (packings) were made so far, over all plans.
    pub fn weight_preparations(&self) -> usize {
        self.weights.preparations()
    }

    fn check_input_shapes<'s>(
        &self,
        shapes: impl ExactSizeIterator<Item = &'s [usize]>,
    ) -> Result<()> {
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

    fn env(&self) -> BuildEnv<'_> {
        BuildEnv {
            graph: &self.graph,
            weights: &self.weights,
            float32_ok: &self.float32_ok,
        }
    }

    /// The cached plan whose key `matches`, moved to the most recently used end.
    fn cached_plan(&self, matches: impl Fn(&PlanKey) -> bool) -> Option<Arc<Plan>> {
        let mut plans = self.plans.lock().unwrap_or_else(|p| p.into_inner());
        let i = plans.iter().position(|(k, _)| matches(k))?;
        let entry = plans.remove(i);
        let plan = entry.1.clone();
        plans.push(entry);
        Some(plan)
    }

    fn plan(&self, shapes: &[(DataType, Vec<usize>)]) -> Result<Arc<Plan>> {
        if let Some(plan) = self.cached_plan(|k| k.as_slice() == shapes) {
            return Ok(plan);
        }
        let plan = Arc::new(self.build_plan(shapes, None)?.0);
        let mut plans = self.plans.lock().unwrap_or_else(|p| p.into_inner());
        if plans.len() >= PLAN_CACHE {
            plans.remove(0);
        }
        plans.push((shapes.to_vec(), plan.clone()));
        Ok(plan)
    }

    /// Plans a graph whose input shapes are all fixed (`shapes`, the declared ones). That plan
    /// is the only one it will have (`check_input_shapes` refuses any other shape), so it is
    /// built owning the graph's weights and drops each one that its readers prepared as soon
    /// as they are built (`weights::Releaser`): ResNet-50's load then peaks with each
    /// convolution's filters resident once, not as loaded and as prepared.
    fn plan_only(&mut self, shapes: &[Vec<usize>]) -> Result<()> {
        self.check_input_shapes(shapes.iter().map(Vec::as_slice))?;
        let key: PlanKey = (self.inputs.iter())
            .zip(shapes)
            .map(|(spec, s)| (spec.declared.dtype, s.clone()))
            .collect();
        let owned = weights::take_weights(&mut self.graph);
        let taken: Vec<bool> = owned.iter().map(Option::is_some).collect();
        let built = self.build_plan(&key, Some(owned));
        if let Ok((plan, released)) = &built {
            weights::restore_weights(&mut self.graph, &taken, &plan.constants);
            self.released = *released;
        }
        let plan = Arc::new(built?.0);
        (self.plans.get_mut().unwrap_or_else(|p| p.into_inner())).push((key, plan));
        Ok(())
    }

    /// Builds a plan for `shapes` (owning the graph's weights `owned` when given, see
    /// [`Plan::build`]), traced and logged; with the bytes of weights it released.
    fn build_plan(
        &self,
        shapes: &[(DataType, Vec<usize>)],
        owned: Option<Vec<Option<Arc<Tensor>>>>,
    ) -> Result<(Plan, usize)> {
        let span = crate::trace::span("plan", "plan").map(|sp| {
            let text: Vec<String> = shapes.iter().map(|(_, s)| format!("{s:?}")).collect();
            sp.arg("input shapes", text.join(" "))
        });
        let started = std::time::Instant::now();
        let (plan, released) = Plan::build(&self.env(), shapes, owned)?;
        drop(span);
        crate::log::log(crate::log::Level::Info, || {
            let text: Vec<String> = shapes.iter().map(|(_, s)| format!("{s:?}")).collect();
            format!(
                "plan built for input shapes {} in {:.1} ms: {} steps ({} built at run time), \
                 {released} bytes of weights held only prepared",
                text.join(" "),
                started.elapsed().as_secs_f64() * 1e3,
                plan.steps.len(),
                plan.deferred_steps()
            )
        });
        self.plans_built.fetch_add(1, Ordering::Relaxed);
        Ok((plan, released))
    }

    /// Bytes of weights whose data the graph dropped once its one plan had prepared them
    /// (`weights::Releaser`): memory freed while loading.
    pub fn released_weight_bytes(&self) -> usize {
        self.released
    }

    /// Runs the model on inputs given in [`Executable::inputs`] order; returns the outputs in
    /// [`Executable::outputs`] order. Call it inside the backend's thread pool.
    pub fn run(&self, mut inputs: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let mut outputs = Vec::with_capacity(self.outputs.len());
        self.run_into(&mut inputs, &mut outputs)?;
        Ok(outputs)
    }

    /// [`Executable::run`] with the caller's vectors: the inputs are drained from `inputs`
    /// (their storage joins the graph's pool once dead) and the outputs appended to `outputs`.
    /// With [`Executable::input_storage`] and [`Executable::recycle`], a warmed-up stream of
    /// runs on the same shapes allocates nothing in the engine.
    pub fn run_into(&self, inputs: &mut Vec<Tensor>, outputs: &mut Vec<Tensor>) -> Result<()> {
        self.run_in_place(inputs, &mut [], outputs)
    }

    /// [`Executable::run_into`] that may compute graph outputs straight into given storage:
    /// `in_place` is empty or holds, per graph output, a tensor of the output's expected type
    /// and shape (over a caller's buffer, see [`crate::ir::CallerF32`]). An output computed
    /// there is appended to `outputs` as that same tensor; the storage of the others is not
    /// written.
    pub fn run_in_place(
        &self,
        inputs: &mut Vec<Tensor>,
        in_place: &mut [Option<Tensor>],
        outputs: &mut Vec<Tensor>,
    ) -> Result<()> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::new(Status::InternalError, "wrong number of inputs"));
        }
        for (spec, t) in self.inputs.iter().zip(inputs.iter()) {
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
        self.check_input_shapes(inputs.iter().map(|t| t.shape.as_slice()))?;
        let plan = self.plan_for(inputs)?;
        self.run_plan(&plan, (inputs, in_place), outputs)
    }

    /// Storage for a run's input of `len` elements of `dtype`: a free buffer of the graph's
    /// pool when one fits (its contents stale: the caller replaces every element, e.g. with
    /// [`TensorData::read_le_bytes`]), else an empty one. With [`Executable::recycle`], a
    /// stream of runs on the same shapes reads its inputs and writes its outputs without
    /// allocating.
    pub fn input_storage(&self, dtype: DataType, len: usize) -> Result<TensorData> {
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        scratch
            .pool
            .take_any(dtype, len)
            .map_or_else(|| TensorData::zeros(dtype, 0), Ok)
    }

    /// Gives the storage of tensors the caller is done with (a run's outputs, once copied out)
    /// back to the graph's pool, for later runs.
    pub fn recycle(&self, tensors: Vec<Tensor>) {
        let mut scratch = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        for t in tensors {
            scratch.give(t);
        }
    }

    /// The plan for the types and shapes of `inputs`.
    fn plan_for(&self, inputs: &[Tensor]) -> Result<Arc<Plan>> {
        let matches = |key: &PlanKey| {
            key.len() == inputs.len()
                && key
                    .iter()
                    .zip(inputs)
                    .all(|((d, s), t)| *d == t.dtype() && *s == t.shape)
        };
        if let Some(plan) = self.cached_plan(matches) {
            return Ok(plan);
        }
        let key: PlanKey = inputs
            .iter()
            .map(|t| (t.dtype(), t.shape.clone()))
            .collect();
        self.plan(&key)
    }

    fn run_plan(
        &self,
        plan: &Plan,
        inputs: (&mut Vec<Tensor>, &mut [Option<Tensor>]),
        outputs: &mut Vec<Tensor>,
    ) -> Result<()> {
        let mut scratch =
            std::mem::take(&mut *self.scratch.lock().unwrap_or_else(|p| p.into_inner()));
        let result = run::run(&self.env(), plan, inputs, outputs, &mut scratch);
        let mut kept = self.scratch.lock().unwrap_or_else(|p| p.into_inner());
        if kept.is_empty() {
            *kept = scratch;
        }
        result
    }
}

/// Drops the data of weights no node reads any more (e.g. BatchNormalization parameters once
/// folded into a convolution), so they do not stay in memory beside their folded form.
fn drop_unused_constants(graph: &mut Graph) {
    let mut used = vec![false; graph.values.len()];
    for node in &graph.nodes {
        for id in node.inputs.iter().flatten() {
            used[*id] = true;
        }
    }
    for &id in &graph.outputs {
        used[id] = true;
    }
    for (value, used) in graph.values.iter_mut().zip(used) {
        if !used {
            value.constant = None;
        }
    }
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
