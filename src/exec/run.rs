//! Running a plan: values live in a table indexed by value id; the storage of dead values goes
//! back to a typed buffer pool and is reused by later steps (and by later runs). The table, the
//! step's output list and the spare shape vectors are kept between runs too ([`RunScratch`]),
//! so that a warmed-up run of a plan whose steps are all built allocates nothing here.

use super::plan::{BuildEnv, Known, Plan, Step, StepKernel};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, PooledF32, Tensor, TensorData, Value, ValueId};

/// An output's element type and shape.
type OutputType = (DataType, Vec<usize>);

/// The most buffers a pool keeps: more than a plan's values can need at once, and a bound on
/// what a stream of runs with growing shapes can leave behind.
const POOL_LIMIT: usize = 256;

/// The rank new shape vectors have room for.
const SHAPE_ROOM: usize = 8;

/// Steps with at most this many inputs pass them to the kernel from a table on the stack;
/// wider ones (a Concat of many tensors) from a heap vector.
const INLINE_INPUTS: usize = 16;

/// Storage of dead values, kept for reuse.
#[derive(Default)]
pub struct BufferPool {
    free: Vec<TensorData>,
}

impl BufferPool {
    /// Storage of `len` elements of `dtype`: the best-fitting free buffer of that type, or a
    /// fresh (fallible) allocation. Zero-filled when `zeroed`; otherwise recycled storage keeps
    /// stale values (for kernels that overwrite every element). Recycled float storage is
    /// handed out as [`TensorData::Pooled`], which keeps the whole buffer, so that serving a
    /// smaller tensor does not make the next larger one write its elements twice.
    pub fn take(&mut self, dtype: DataType, len: usize, zeroed: bool) -> Result<TensorData> {
        match self.best_fit(dtype, len) {
            Some(i) => {
                let mut data = match self.free.swap_remove(i) {
                    // Placed for `len` so that a buffer `best_fit` chose for its capacity keeps
                    // room for it wherever its aligned start is.
                    TensorData::F32(v) => TensorData::Pooled(PooledF32::new(v, len)?),
                    other => other,
                };
                if zeroed {
                    data.reset(len)?;
                } else {
                    data.resize_stale(len)?;
                }
                Ok(data)
            }
            // Fresh float storage starts on a cache line (see `PooledF32`).
            None if dtype == DataType::F32 => {
                Ok(TensorData::Pooled(PooledF32::new(Vec::new(), len)?))
            }
            None => TensorData::zeros(dtype, len),
        }
    }

    /// The best-fitting free buffer of `dtype` that holds `len` elements, as it is (its length
    /// and contents stale), for a caller that replaces every element.
    pub fn take_any(&mut self, dtype: DataType, len: usize) -> Option<TensorData> {
        let i = self.best_fit(dtype, len)?;
        Some(self.free.swap_remove(i))
    }

    /// The index of the smallest free buffer of `dtype` with room for `len` elements.
    fn best_fit(&self, dtype: DataType, len: usize) -> Option<usize> {
        self.free
            .iter()
            .enumerate()
            .filter(|(_, b)| b.dtype() == dtype && b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i)
    }

    /// Gives storage back (dropped instead once the pool holds [`POOL_LIMIT`] buffers). A
    /// caller's buffer is never kept: it is valid only during its run.
    pub fn give(&mut self, data: TensorData) {
        if matches!(data, TensorData::Caller(_)) {
            return;
        }
        if data.capacity() > 0 && self.free.len() < POOL_LIMIT {
            self.free.push(data);
        }
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }
}

fn internal(msg: &str) -> Error {
    Error::new(Status::InternalError, msg.to_string())
}

/// What a graph's runs reuse: the pool of dead values' storage, the value table, the list a
/// step's outputs are made in, and spare shape vectors.
#[derive(Default)]
pub struct RunScratch {
    /// Storage of dead values.
    pub pool: BufferPool,
    values: Vec<Option<Value>>,
    outs: Vec<Tensor>,
    shapes: Vec<Vec<usize>>,
}

impl RunScratch {
    /// A shape vector holding `dims`, from the spares when there is one. New ones get room for
    /// [`SHAPE_ROOM`] dimensions, so that the spares serve any rank up to that.
    fn shape(&mut self, dims: &[usize]) -> Vec<usize> {
        let mut v = match self.shapes.pop() {
            Some(v) if v.capacity() >= dims.len() => v,
            _ => Vec::with_capacity(dims.len().max(SHAPE_ROOM)),
        };
        v.clear();
        v.extend_from_slice(dims);
        v
    }

    /// Keeps a dead tensor's storage and shape vector for reuse.
    pub fn give(&mut self, t: Tensor) {
        self.pool.give(t.data);
        self.give_shape(t.shape);
    }

    /// Keeps a shape vector for reuse.
    fn give_shape(&mut self, shape: Vec<usize>) {
        if shape.capacity() >= SHAPE_ROOM && self.shapes.len() < POOL_LIMIT {
            self.shapes.push(shape);
        }
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.pool.is_empty() && self.values.capacity() == 0
    }
}

/// Runs `plan` on the graph inputs (in plan order, drained from `inputs`) and appends the graph
/// outputs to `outputs`; `scratch` holds what runs reuse.
///
/// `in_place` is empty, or holds per graph output (in plan order) the storage it may be
/// computed into: a tensor of its final type and shape over the caller's buffer. The step
/// that computes the output writes there directly when its kernel writes into storage it is
/// given and the output's type and shape match; the output is then appended as that tensor.
/// Unused entries are left as they are.
pub fn run(
    env: &BuildEnv,
    plan: &Plan,
    (inputs, in_place): (&mut Vec<Tensor>, &mut [Option<Tensor>]),
    outputs: &mut Vec<Tensor>,
    scratch: &mut RunScratch,
) -> Result<()> {
    let mut values = std::mem::take(&mut scratch.values);
    values.clear();
    values.resize_with(plan.types.len(), || None);
    let mut outs = std::mem::take(&mut scratch.outs);
    let result = run_steps(
        env,
        plan,
        (inputs, in_place),
        outputs,
        scratch,
        (&mut values, &mut outs),
    );
    // Whatever a failed run left behind goes back to the pool.
    for v in values.iter_mut() {
        if let Some(Value::Tensor(t)) = v.take() {
            scratch.give(t);
        }
    }
    for t in outs.drain(..) {
        scratch.give(t);
    }
    scratch.values = values;
    scratch.outs = outs;
    result
}

fn run_steps(
    env: &BuildEnv,
    plan: &Plan,
    (inputs, in_place): (&mut Vec<Tensor>, &mut [Option<Tensor>]),
    result: &mut Vec<Tensor>,
    scratch: &mut RunScratch,
    (values, outs): (&mut [Option<Value>], &mut Vec<Tensor>),
) -> Result<()> {
    for (&id, t) in plan.inputs.iter().zip(inputs.drain(..)) {
        values[id] = Some(Value::Tensor(t));
    }
    for step in &plan.steps {
        outs.clear();
        // `(input, output, output shape)` when the output takes its dying input's storage.
        let mut forward = None;
        {
            let mut inline: [Option<&Tensor>; INLINE_INPUTS] = [None; INLINE_INPUTS];
            let mut heap: Vec<Option<&Tensor>> = Vec::new();
            let ins: &mut [Option<&Tensor>] = if step.inputs.len() <= INLINE_INPUTS {
                &mut inline[..step.inputs.len()]
            } else {
                heap.resize(step.inputs.len(), None);
                &mut heap
            };
            for (slot, input) in ins.iter_mut().zip(&step.inputs) {
                *slot = match input {
                    None => None,
                    Some(id) => match (&values[*id], &plan.constants[*id]) {
                        (Some(v), _) => Some(v.as_tensor()?),
                        (None, Some(c)) => Some(&**c),
                        // Its consumer reads its packed form, made when it was built.
                        (None, None) if env.graph.values[*id].packed_only.is_some() => None,
                        (None, None) => return Err(internal("a step input was not computed")),
                    },
                };
            }
            let ins: &[Option<&Tensor>] = ins;
            let memo;
            let (kernel, shapes): (&dyn crate::ops::Kernel, Option<&[OutputType]>) =
                match &step.kernel {
                    StepKernel::Static(k) => (k.as_ref(), None),
                    StepKernel::Deferred(cell) => {
                        memo = env.build_at_run_time(step, cell, ins, plan)?;
                        (memo.kernel.as_ref(), Some(&memo.outputs))
                    }
                };
            if kernel.forwards_input() {
                let out_type = match shapes {
                    Some(s) => s.first().map(|(d, sh)| (*d, sh.as_slice())),
                    None => match step
                        .outputs
                        .first()
                        .copied()
                        .flatten()
                        .map(|o| &plan.types[o])
                    {
                        Some(Some(Known::Static(d, sh))) => Some((*d, sh.as_slice())),
                        _ => None,
                    },
                };
                if let Some((from, to, dims)) =
                    out_type.and_then(|(d, sh)| forwardable(plan, step, ins, (d, sh), in_place))
                {
                    forward = Some((from, to, scratch.shape(dims)));
                }
            }
            let allocates = kernel.allocates_outputs();
            let zeroed = !kernel.overwrites_outputs();
            for (i, slot) in step.outputs.iter().enumerate() {
                if forward.is_some() {
                    break;
                }
                let Some(id) = slot else { continue };
                if allocates {
                    // The kernel replaces the placeholder with a tensor of its own making.
                    outs.push(Tensor {
                        shape: Vec::new(),
                        data: TensorData::F32(Vec::new()),
                    });
                    continue;
                }
                let (dtype, dims) = match shapes {
                    Some(s) => {
                        let (d, sh) = s.get(i).ok_or_else(|| internal("output missing"))?;
                        (*d, sh.as_slice())
                    }
                    None => match &plan.types[*id] {
                        Some(Known::Static(d, sh)) => (*d, sh.as_slice()),
                        _ => return Err(internal("output without a type")),
                    },
                };
                if let Some(t) = take_in_place(plan, in_place, *id, dtype, dims) {
                    let mut t = t;
                    if zeroed {
                        t.data.reset(t.len())?;
                    }
                    outs.push(t);
                    continue;
                }
                let len = dims.iter().product();
                let shape = scratch.shape(dims);
                outs.push(Tensor {
                    shape,
                    data: scratch.pool.take(dtype, len, zeroed)?,
                });
            }
            let work = match &forward {
                Some((_, _, shape)) => Work::Forward(shape),
                None => Work::Run(kernel, outs),
            };
            run_kernel(env, (step.node, &step.inputs), ins, work)?;
        }
        if let Some((from, to, shape)) = forward {
            let Some(Value::Tensor(mut t)) = values[from].take() else {
                return Err(internal("a forwarded input was not a tensor"));
            };
            let old = std::mem::replace(&mut t.shape, shape);
            scratch.give_shape(old);
            values[to] = Some(Value::Tensor(t));
        }
        for (id, t) in step.outputs.iter().flatten().zip(outs.drain(..)) {
            values[*id] = Some(Value::Tensor(t));
        }
        for id in &step.frees {
            if let Some(Value::Tensor(t)) = values[*id].take() {
                scratch.give(t);
            }
        }
    }
    let base = result.len();
    for (i, &id) in plan.outputs.iter().enumerate() {
        let mut t = if let Some(j) = plan.outputs[..i].iter().position(|&o| o == id) {
            result[base + j].clone()
        } else if let Some(v) = values[id].take() {
            v.into_tensor()?
        } else if let Some(c) = &plan.constants[id] {
            Tensor::clone(c)
        } else {
            return Err(internal("an output was not computed"));
        };
        // Tensors leave a run in storage of their exact length (the buffer, shortened).
        if let TensorData::Pooled(p) = t.data {
            t.data = TensorData::F32(p.into_vec());
        }
        result.push(t);
    }
    Ok(())
}

/// For a step whose kernel forwards its input 0 to its output 0 ([`Kernel::forwards_input`]),
/// whose output is of type and shape `out`: `(input, output, shape)` when the input's storage
/// can become the output's instead of being copied. That is when the input dies at this step
/// and the step reads it once; it is a tensor the run owns (not a constant, not a caller's
/// buffer) of the output's type and length; and the output is not a graph output that has
/// caller storage to be computed into (it is then copied there, as before).
///
/// [`Kernel::forwards_input`]: crate::ops::Kernel::forwards_input
fn forwardable<'d>(
    plan: &Plan,
    step: &Step,
    ins: &[Option<&Tensor>],
    (dtype, dims): (DataType, &'d [usize]),
    in_place: &[Option<Tensor>],
) -> Option<(ValueId, ValueId, &'d [usize])> {
    let (Some(Some(from)), [Some(to)]) = (step.inputs.first(), step.outputs.as_slice()) else {
        return None;
    };
    let once = step.inputs.iter().flatten().filter(|&i| i == from).count() == 1;
    let dies = step.frees.contains(from);
    let bound = !in_place.is_empty() && plan.outputs.contains(to);
    let t = ins.first().copied().flatten()?;
    let owned = plan.constants[*from].is_none() && !matches!(t.data, TensorData::Caller(_));
    let fits = t.dtype() == dtype && t.len() == dims.iter().product::<usize>();
    (once && dies && !bound && owned && fits).then_some((*from, *to, dims))
}

/// The caller's storage for value `id` when it is a graph output given storage in `in_place`
/// of exactly type `dtype` and shape `dims` (taken out of `in_place`); else `None`.
fn take_in_place(
    plan: &Plan,
    in_place: &mut [Option<Tensor>],
    id: usize,
    dtype: DataType,
    dims: &[usize],
) -> Option<Tensor> {
    if in_place.is_empty() {
        return None;
    }
    let j = plan.outputs.iter().position(|&o| o == id)?;
    let slot = in_place.get_mut(j)?;
    if slot
        .as_ref()
        .is_some_and(|t| t.dtype() == dtype && t.shape == dims)
    {
        slot.take()
    } else {
        None
    }
}

/// What a step does: run its kernel into its outputs, or nothing, its output (of this shape)
/// taking its input's storage (see [`forwardable`]).
enum Work<'k, 'o> {
    Run(&'k dyn crate::ops::Kernel, &'o mut [Tensor]),
    Forward(&'o [usize]),
}

/// The shape of each of a step's inputs (`ids`, handed to its kernel as `ins`) as profiles and
/// traces show it: `None` for an omitted input; a weight held only prepared has its shape.
fn input_shapes<'a>(
    env: &'a BuildEnv,
    ids: &'a [Option<ValueId>],
    ins: &'a [Option<&'a Tensor>],
) -> impl Iterator<Item = Option<&'a [usize]>> + 'a {
    ins.iter().zip(ids).map(|(t, id)| match (t, id) {
        (Some(t), _) => Some(t.shape.as_slice()),
        (None, Some(id)) => env.graph.values[*id].packed_only.as_deref(),
        (None, None) => None,
    })
}

/// Runs one step's kernel (graph node `node`, input values `ids`), timed and traced when
/// profiling or tracing is on; a forwarded step is recorded too, so that profiles and traces
/// name every step.
fn run_kernel(
    env: &BuildEnv,
    (node, ids): (usize, &[Option<ValueId>]),
    ins: &[Option<&Tensor>],
    work: Work,
) -> Result<()> {
    let profiling = super::profile::enabled();
    let traced = crate::trace::span("op", &env.graph.nodes[node].op_type).map(|sp| {
        let shapes: Vec<String> = input_shapes(env, ids, ins)
            .map(|s| s.map_or("-".to_string(), |s| format!("{s:?}")))
            .collect();
        sp.arg("node", env.graph.nodes[node].name.clone())
            .arg("inputs", shapes.join(" "))
    });
    if !profiling && traced.is_none() {
        return match work {
            Work::Run(kernel, outs) => kernel.run(ins, outs),
            Work::Forward(_) => Ok(()),
        };
    }
    let start = std::time::Instant::now();
    let outs: Vec<&[usize]> = match work {
        Work::Run(kernel, outs) => {
            kernel.run(ins, outs)?;
            outs.iter().map(|t| t.shape.as_slice()).collect()
        }
        Work::Forward(shape) => vec![shape],
    };
    let took = start.elapsed();
    if profiling {
        let op = &env.graph.nodes[node].op_type;
        if super::profile::by_shape() {
            let shapes: Vec<String> = input_shapes(env, ids, ins)
                .flatten()
                .map(|s| format!("{s:?}"))
                .collect();
            let out = outs.first().map(|s| format!("{s:?}"));
            let key = format!("{op} {} -> {}", shapes.join(" "), out.unwrap_or_default());
            super::profile::record(&key, took);
        } else {
            super::profile::record(op, took);
        }
    }
    if let Some(sp) = traced {
        let shapes: Vec<String> = outs.iter().map(|s| format!("{s:?}")).collect();
        sp.arg("outputs", shapes.join(" ")).end();
    }
    Ok(())
}
