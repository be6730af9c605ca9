//! Running a plan: values live in a table indexed by value id; the storage of dead values goes
//! back to a typed buffer pool and is reused by later steps (and by later runs).

use super::plan::{BuildEnv, Known, Plan, StepKernel};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor, TensorData, Value};

/// An output's element type and shape.
type OutputType = (DataType, Vec<usize>);

/// The most buffers a pool keeps: more than a plan's values can need at once, and a bound on
/// what a stream of runs with growing shapes can leave behind.
const POOL_LIMIT: usize = 256;

/// Storage of dead values, kept for reuse.
#[derive(Default)]
pub struct BufferPool {
    free: Vec<TensorData>,
}

impl BufferPool {
    /// Storage of `len` elements of `dtype`: the best-fitting free buffer of that type, or a
    /// fresh (fallible) allocation. Zero-filled when `zeroed`; otherwise recycled storage keeps
    /// stale values (for kernels that overwrite every element).
    pub fn take(&mut self, dtype: DataType, len: usize, zeroed: bool) -> Result<TensorData> {
        match self.best_fit(dtype, len) {
            Some(i) => {
                let mut data = self.free.swap_remove(i);
                if zeroed {
                    data.reset(len)?;
                } else {
                    data.resize_stale(len)?;
                }
                Ok(data)
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

    /// Gives storage back (dropped instead once the pool holds [`POOL_LIMIT`] buffers).
    pub fn give(&mut self, data: TensorData) {
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

/// Runs `plan` on the graph inputs (in plan order); `pool` holds reusable storage.
pub fn run(
    env: &BuildEnv,
    plan: &Plan,
    inputs: Vec<Tensor>,
    pool: &mut BufferPool,
) -> Result<Vec<Tensor>> {
    let mut values: Vec<Option<Value>> = vec![None; plan.types.len()];
    for (&id, t) in plan.inputs.iter().zip(inputs) {
        values[id] = Some(Value::Tensor(t));
    }
    for step in &plan.steps {
        let mut outs = Vec::with_capacity(step.outputs.len());
        {
            let ins: Vec<Option<&Tensor>> = step
                .inputs
                .iter()
                .map(|slot| match slot {
                    None => Ok(None),
                    Some(id) => match (&values[*id], &plan.constants[*id]) {
                        (Some(v), _) => v.as_tensor().map(Some),
                        (None, Some(c)) => Ok(Some(&**c)),
                        (None, None) => Err(internal("a step input was not computed")),
                    },
                })
                .collect::<Result<_>>()?;
            let memo;
            let (kernel, shapes): (&dyn crate::ops::Kernel, Option<&[OutputType]>) =
                match &step.kernel {
                    StepKernel::Static(k) => (k.as_ref(), None),
                    StepKernel::Deferred(cell) => {
                        memo = env.build_at_run_time(step, cell, &ins, &plan.constants)?;
                        (memo.kernel.as_ref(), Some(&memo.outputs))
                    }
                };
            let allocates = kernel.allocates_outputs();
            let zeroed = !kernel.overwrites_outputs();
            for (i, slot) in step.outputs.iter().enumerate() {
                let Some(id) = slot else { continue };
                if allocates {
                    // The kernel replaces the placeholder with a tensor of its own making.
                    outs.push(Tensor {
                        shape: vec![0],
                        data: TensorData::F32(Vec::new()),
                    });
                    continue;
                }
                let (dtype, shape) = match shapes {
                    Some(s) => {
                        let (d, sh) = s.get(i).ok_or_else(|| internal("output missing"))?;
                        (*d, sh.clone())
                    }
                    None => match &plan.types[*id] {
                        Some(Known::Static(d, sh)) => (*d, sh.clone()),
                        _ => return Err(internal("output without a type")),
                    },
                };
                let len = if allocates { 0 } else { shape.iter().product() };
                outs.push(Tensor {
                    shape,
                    data: pool.take(dtype, len, zeroed)?,
                });
            }
            let traced = crate::trace::span("op", &env.graph.nodes[step.node].op_type).map(|sp| {
                let shapes: Vec<String> = ins
                    .iter()
                    .map(|t| t.map_or("-".to_string(), |t| format!("{:?}", t.shape)))
                    .collect();
                sp.arg("node", env.graph.nodes[step.node].name.clone())
                    .arg("inputs", shapes.join(" "))
            });
            if super::profile::enabled() {
                let start = std::time::Instant::now();
                kernel.run(&ins, &mut outs)?;
                let took = start.elapsed();
                let op = &env.graph.nodes[step.node].op_type;
                if super::profile::by_shape() {
                    let shapes: Vec<String> = ins
                        .iter()
                        .flatten()
                        .map(|t| format!("{:?}", t.shape))
                        .collect();
                    let out = outs.first().map(|t| format!("{:?}", t.shape));
                    let key = format!("{op} {} -> {}", shapes.join(" "), out.unwrap_or_default());
                    super::profile::record(&key, took);
                } else {
                    super::profile::record(op, took);
                }
            } else {
                kernel.run(&ins, &mut outs)?;
            }
            if let Some(sp) = traced {
                let shapes: Vec<String> = outs.iter().map(|t| format!("{:?}", t.shape)).collect();
                sp.arg("outputs", shapes.join(" ")).end();
            }
        }
        for (id, t) in step.outputs.iter().flatten().zip(outs) {
            values[*id] = Some(Value::Tensor(t));
        }
        for id in &step.frees {
            if let Some(Value::Tensor(t)) = values[*id].take() {
                pool.give(t.data);
            }
        }
    }
    let mut result: Vec<Tensor> = Vec::with_capacity(plan.outputs.len());
    for (i, &id) in plan.outputs.iter().enumerate() {
        let t = if let Some(j) = plan.outputs[..i].iter().position(|&o| o == id) {
            result[j].clone()
        } else if let Some(v) = values[id].take() {
            v.into_tensor()?
        } else if let Some(c) = &plan.constants[id] {
            Tensor::clone(c)
        } else {
            return Err(internal("an output was not computed"));
        };
        result.push(t);
    }
    Ok(result)
}
