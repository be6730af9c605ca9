//! `Scan` (opset 9 on): iterates its body over slices of the scan inputs along their scan axes
//! (forward or reverse), threading state values; per-iteration scan outputs are stacked along
//! their output axes (forward or reverse). The body is compiled once per graph.

use super::subgraph::{stack, Body, ScanBudget};
use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, ANY};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::transpose::transpose;
use std::sync::Arc;

/// The `Scan` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Scan",
    domain: "",
    min_opset: 9,
    newest: 25,
    attributes: &[
        "body",
        "num_scan_inputs",
        "scan_input_axes",
        "scan_input_directions",
        "scan_output_axes",
        "scan_output_directions",
    ],
    types: ANY,
    build,
};

struct ScanKernel {
    body: Arc<Body>,
    states: usize,
    /// Per scan input: axis and reverse flag.
    inputs: Vec<(usize, bool)>,
    /// Per scan output: axis and reverse flag, and its dtype.
    outputs: Vec<(usize, bool, DataType)>,
}

/// Moves axis `from` of `t` to position `to` (a transpose).
fn move_axis(t: &Tensor, from: usize, to: usize) -> Result<Tensor> {
    if from == to {
        return Ok(t.clone());
    }
    let rank = t.shape.len();
    let mut perm: Vec<usize> = (0..rank).filter(|&d| d != from).collect();
    perm.insert(to, from);
    let shape: Vec<usize> = perm.iter().map(|&p| t.shape[p]).collect();
    crate::dispatch_stored!(t.dtype(), T => {
        let mut out: Vec<T> = crate::ir::try_filled(t.len())?;
        transpose(t.as_slice::<T>()?, &t.shape, &perm, &mut out);
        Tensor::from_vec(shape, out)
    }, other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
}

/// Slice `i` along axis 0 of a tensor whose axis 0 has been moved first.
fn slice0(t: &Tensor, i: usize) -> Result<Tensor> {
    let inner: usize = t.shape[1..].iter().product();
    crate::dispatch_stored!(t.dtype(), T => {
        let v = t.as_slice::<T>()?[i * inner..(i + 1) * inner].to_vec();
        Tensor::from_vec(t.shape[1..].to_vec(), v)
    }, other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
}

impl Kernel for ScanKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InvalidModel, "a Scan input is missing");
        let mut states: Vec<Tensor> = (0..self.states)
            .map(|k| {
                inputs
                    .get(k)
                    .copied()
                    .flatten()
                    .cloned()
                    .ok_or_else(missing)
            })
            .collect::<Result<_>>()?;
        let seqs: Vec<Tensor> = self
            .inputs
            .iter()
            .enumerate()
            .map(|(j, &(axis, _))| {
                let t = inputs
                    .get(self.states + j)
                    .copied()
                    .flatten()
                    .ok_or_else(missing)?;
                if axis >= t.shape.len() {
                    return Err(Error::new(Status::InvalidShape, "scan axis out of range"));
                }
                move_axis(t, axis, 0)
            })
            .collect::<Result<_>>()?;
        let steps = seqs.first().map_or(0, |t| t.shape[0]);
        if seqs.iter().any(|t| t.shape[0] != steps) {
            return Err(Error::new(
                Status::InvalidShape,
                "scan inputs differ in length",
            ));
        }
        let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); self.outputs.len()];
        let mut budget = ScanBudget::new();
        for step in 0..steps {
            let mut formal = states.clone();
            for (t, &(_, reverse)) in seqs.iter().zip(&self.inputs) {
                formal.push(slice0(t, if reverse { steps - 1 - step } else { step })?);
            }
            let mut out = self.body.run(formal, inputs)?.into_iter();
            for s in states.iter_mut() {
                *s = out.next().ok_or_else(missing)?;
            }
            for sc in scans.iter_mut() {
                let part = out.next().ok_or_else(missing)?;
                budget.keep(&part, step as u64 + 1)?;
                sc.push(part);
            }
        }
        let mut results = states;
        for (mut parts, &(axis, reverse, dtype)) in scans.into_iter().zip(&self.outputs) {
            if reverse {
                parts.reverse();
            }
            let stacked = stack(&parts, dtype)?;
            results.push(if axis < stacked.shape.len() {
                move_axis(&stacked, 0, axis)?
            } else {
                stacked
            });
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
    let n_in = ctx.node.inputs.len() - ctx.node.captured.len();
    let m = ctx.attr_int("num_scan_inputs", 0)?;
    if m < 1 || m as usize > n_in {
        return Err(ctx.err(Status::InvalidModel, format!("num_scan_inputs = {m}")));
    }
    let m = m as usize;
    let states = n_in - m;
    let n_out = ctx.node.outputs.len();
    if ctx.node.outputs.iter().any(Option::is_none) || n_out < states {
        return Err(ctx.err(
            Status::InvalidModel,
            "Scan outputs: states then scan outputs",
        ));
    }
    let k = n_out - states;
    if body_g.outputs.len() != n_out || body_g.inputs.len() < states + m {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "the body has {} inputs and {} outputs; the node needs {} and {n_out}",
                body_g.inputs.len(),
                body_g.outputs.len(),
                states + m
            ),
        ));
    }
    let list = |name: &str, n: usize| -> Result<Vec<i64>> {
        match ctx.attr_ints(name)? {
            Some(v) if v.len() == n => Ok(v.to_vec()),
            Some(v) => Err(ctx.err(Status::InvalidModel, format!("'{name}' = {v:?}"))),
            None => Ok(vec![0; n]),
        }
    };
    let in_axes = list("scan_input_axes", m)?;
    let in_dirs = list("scan_input_directions", m)?;
    let out_axes = list("scan_output_axes", k)?;
    let out_dirs = list("scan_output_directions", k)?;
    let mut inputs = Vec::with_capacity(m);
    for j in 0..m {
        let x = ctx.input(states + j)?;
        inputs.push((ctx.axis(in_axes[j], x.shape.len())?, in_dirs[j] != 0));
    }
    let declared = |i: usize| {
        body_g.values[body_g.outputs[i]]
            .declared
            .as_ref()
            .map_or(DataType::F32, |d| d.dtype)
    };
    let mut outputs_spec = Vec::with_capacity(k);
    for j in 0..k {
        // The output's rank is the body output's rank + 1 when declared; axes may be negative.
        let rank = body_g.values[body_g.outputs[states + j]]
            .declared
            .as_ref()
            .and_then(|d| d.dims.as_ref())
            .map_or(1, |d| d.len() + 1);
        let axis = if out_axes[j] < 0 {
            (out_axes[j] + rank as i64).max(0) as usize
        } else {
            out_axes[j] as usize
        };
        outputs_spec.push((axis, out_dirs[j] != 0, declared(states + j)));
    }
    let body = ctx.per_node("body", || Body::new(ctx, body_g, states + m))?;
    let outputs = (0..n_out)
        .map(|i| {
            let dtype = match ctx.opt_input(i) {
                Some(x) if i < states => x.dtype,
                _ => declared(i),
            };
            (dtype, Vec::new())
        })
        .collect();
    Ok(Built {
        outputs,
        kernel: Box::new(ScanKernel {
            body,
            states,
            inputs,
            outputs: outputs_spec,
        }),
    })
}
