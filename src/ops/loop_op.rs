//! `Loop`: runs its body while the trip count and the condition allow. The body takes the
//! iteration number, the condition and the loop-carried values, and returns the condition, the
//! new loop-carried values and per-iteration scan outputs, which are stacked along a new first
//! axis. The body is compiled once per graph; captured outer values are implicit inputs.

use super::subgraph::{stack, Body, ScanBudget};
use super::util::BuildCtx;
use super::{Built, Kernel, OpDef};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};
use std::sync::Arc;

/// The `Loop` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Loop",
    domain: "",
    min_opset: 1,
    newest: 25,
    attributes: &["body"],
    types: &[DataType::I64],
    build,
};

/// Iterations beyond this are refused (a run-away loop is an error, not a hang).
const MAX_TRIPS: i64 = 1 << 24;

struct LoopKernel {
    body: Arc<Body>,
    /// Loop-carried values.
    carried: usize,
    /// Scan outputs, with the dtype to give an empty one.
    scans: Vec<DataType>,
}

fn scalar_bool(t: &Tensor) -> Result<bool> {
    t.as_slice::<bool>()?
        .first()
        .copied()
        .ok_or_else(|| Error::new(Status::InvalidShape, "the loop condition is empty"))
}

impl Kernel for LoopKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let trips = match inputs.first().copied().flatten() {
            Some(t) => Some(
                *t.to_i64_vec()?
                    .first()
                    .ok_or_else(|| Error::new(Status::InvalidShape, "M is empty"))?,
            ),
            None => None,
        };
        let mut cond = match inputs.get(1).copied().flatten() {
            Some(t) => scalar_bool(t)?,
            None => true,
        };
        let mut carried: Vec<Tensor> = (0..self.carried)
            .map(|k| {
                inputs
                    .get(2 + k)
                    .copied()
                    .flatten()
                    .cloned()
                    .ok_or_else(|| {
                        Error::new(Status::InvalidModel, "a loop-carried input is missing")
                    })
            })
            .collect::<Result<_>>()?;
        let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); self.scans.len()];
        let mut budget = ScanBudget::new();
        let mut i = 0i64;
        while cond && trips.is_none_or(|m| i < m) {
            if i >= MAX_TRIPS {
                return Err(Error::new(
                    Status::UnsupportedShape,
                    format!("the loop ran past {MAX_TRIPS} iterations"),
                ));
            }
            let mut formal = vec![
                Tensor::from_vec(vec![], vec![i])?,
                Tensor::from_vec(vec![], vec![cond])?,
            ];
            formal.extend(carried.iter().cloned());
            let mut out = self.body.run(formal, inputs)?.into_iter();
            cond =
                scalar_bool(&out.next().ok_or_else(|| {
                    Error::new(Status::InvalidModel, "the body gave no outputs")
                })?)?;
            for c in carried.iter_mut() {
                *c = out.next().ok_or_else(|| {
                    Error::new(Status::InvalidModel, "the body gave too few outputs")
                })?;
            }
            for s in scans.iter_mut() {
                let part = out.next().ok_or_else(|| {
                    Error::new(Status::InvalidModel, "the body gave too few outputs")
                })?;
                budget.keep(&part, i as u64 + 1)?;
                s.push(part);
            }
            i += 1;
        }
        let mut results = carried;
        for (parts, dtype) in scans.iter().zip(&self.scans) {
            results.push(stack(parts, *dtype)?);
        }
        for (o, t) in outputs.iter_mut().zip(results) {
            *o = t;
        }
        Ok(())
    }

    fn allocates_outputs(&self) -> bool {
        true
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    let body_g = ctx.attr_graph("body")?;
    let formal_inputs = ctx.node.inputs.len() - ctx.node.captured.len();
    if formal_inputs < 2 {
        return Err(ctx.err(
            Status::InvalidModel,
            "Loop takes M and cond (either may be empty)",
        ));
    }
    let carried = formal_inputs - 2;
    if ctx.node.outputs.iter().any(Option::is_none) {
        return Err(ctx.err(
            Status::UnsupportedAttribute,
            "omitted Loop outputs are not supported",
        ));
    }
    let n_out = ctx.node.outputs.len();
    if n_out < carried || body_g.outputs.len() != 1 + n_out {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "{carried} carried values, {n_out} outputs, a body of {} outputs",
                body_g.outputs.len()
            ),
        ));
    }
    let declared = |k: usize| {
        body_g.values[body_g.outputs[k]]
            .declared
            .as_ref()
            .map_or(DataType::F32, |d| d.dtype)
    };
    let scans: Vec<DataType> = (1 + carried..1 + n_out).map(declared).collect();
    let body = ctx.per_node("body", || Body::new(ctx, body_g, 2 + carried))?;
    let outputs = (0..n_out)
        .map(|k| {
            let dtype = match ctx.opt_input(2 + k) {
                Some(x) if k < carried => x.dtype,
                _ => declared(1 + k),
            };
            (dtype, Vec::new())
        })
        .collect();
    Ok(Built {
        outputs,
        kernel: Box::new(LoopKernel {
            body,
            carried,
            scans,
        }),
    })
}
