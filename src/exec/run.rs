//! Running a plan: values live in a table indexed by value id; float buffers of dead values go
//! back to a free list and are reused by later steps (and by later runs).

use super::plan::Plan;
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor, TensorData};

/// Takes a float buffer of `len` elements from the free list (best fit), or allocates one.
fn take_buffer(free: &mut Vec<Vec<f32>>, len: usize) -> Vec<f32> {
    let best = free
        .iter()
        .enumerate()
        .filter(|(_, b)| b.capacity() >= len)
        .min_by_key(|(_, b)| b.capacity())
        .map(|(i, _)| i);
    let mut buf = match best {
        Some(i) => free.swap_remove(i),
        None => Vec::with_capacity(len),
    };
    buf.clear();
    buf.resize(len, 0.0);
    buf
}

/// Runs `plan` on the fed inputs; `free` is the pool of reusable float buffers.
pub fn run(plan: &Plan, inputs: Vec<Tensor>, free: &mut Vec<Vec<f32>>) -> Result<Vec<Tensor>> {
    let mut values: Vec<Option<Tensor>> = vec![None; plan.types.len()];
    for (slot, t) in plan.inputs.iter().zip(inputs) {
        if let Some(id) = slot {
            values[*id] = Some(t);
        }
    }
    for step in &plan.steps {
        let mut outs = Vec::with_capacity(step.outputs.len());
        for id in step.outputs.iter().flatten() {
            let (dtype, shape) = plan.types[*id]
                .as_ref()
                .ok_or_else(|| Error::new(Status::InternalError, "output without a type"))?;
            let len = shape.iter().product();
            let data = if *dtype == DataType::F32 {
                TensorData::F32(take_buffer(free, len))
            } else {
                TensorData::zeros(*dtype, len)?
            };
            outs.push(Tensor {
                shape: shape.clone(),
                data,
            });
        }
        {
            let ins: Vec<Option<&Tensor>> = step
                .inputs
                .iter()
                .map(|slot| {
                    slot.and_then(|id| values[id].as_ref().or(plan.constants[id].as_deref()))
                })
                .collect();
            if ins
                .iter()
                .zip(&step.inputs)
                .any(|(t, slot)| slot.is_some() && t.is_none())
            {
                return Err(Error::new(
                    Status::InternalError,
                    "a step input was not computed",
                ));
            }
            step.kernel.run(&ins, &mut outs)?;
        }
        for (id, t) in step.outputs.iter().flatten().zip(outs) {
            values[*id] = Some(t);
        }
        for id in &step.frees {
            if let Some(Tensor {
                data: TensorData::F32(buf),
                ..
            }) = values[*id].take()
            {
                free.push(buf);
            }
        }
    }
    let mut result: Vec<Tensor> = Vec::with_capacity(plan.outputs.len());
    for (i, &id) in plan.outputs.iter().enumerate() {
        let t = if let Some(j) = plan.outputs[..i].iter().position(|&o| o == id) {
            result[j].clone()
        } else if let Some(t) = values[id].take() {
            t
        } else if let Some(c) = &plan.constants[id] {
            (**c).clone()
        } else {
            return Err(Error::new(
                Status::InternalError,
                "an output was not computed",
            ));
        };
        result.push(t);
    }
    Ok(result)
}
