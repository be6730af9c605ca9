//! `If`: runs the `then_branch` or `else_branch` subgraph depending on a one-element bool
//! condition. Each branch is compiled once per graph (its own plans per input shapes); the
//! values a branch captures from the enclosing graph arrive as the node's implicit inputs. The
//! outputs take the chosen branch's shapes, so they are allocated by the kernel.

use super::subgraph::Body;
use super::util::BuildCtx;
use super::{Built, Kernel, OpDef};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};
use std::sync::Arc;

/// The `If` operator.
pub static DEF: OpDef = OpDef {
    op_type: "If",
    domain: "",
    min_opset: 1,
    newest: 25,
    attributes: &["else_branch", "then_branch"],
    types: &[DataType::Bool],
    build,
};

struct IfKernel {
    branches: Arc<(Body, Body)>,
    outputs: usize,
}

impl Kernel for IfKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "If input missing");
        let cond = inputs[0].ok_or_else(missing)?.as_slice::<bool>()?;
        let &[cond] = cond else {
            return Err(Error::new(
                Status::InvalidShape,
                format!("the If condition has {} elements, not 1", cond.len()),
            ));
        };
        let branch = if cond {
            &self.branches.0
        } else {
            &self.branches.1
        };
        let results = branch.run(Vec::new(), inputs)?;
        if results.len() != self.outputs {
            return Err(Error::new(
                Status::InvalidModel,
                format!(
                    "the branch gave {} outputs, the If node has {}",
                    results.len(),
                    self.outputs
                ),
            ));
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
    let cond = ctx.input(0)?;
    if cond.dtype != DataType::Bool || cond.shape.iter().product::<usize>() != 1 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "the condition is {} {:?}, not one bool",
                cond.dtype.name(),
                cond.shape
            ),
        ));
    }
    let then_g = ctx.attr_graph("then_branch")?;
    let else_g = ctx.attr_graph("else_branch")?;
    let n = ctx.node.outputs.len();
    if then_g.outputs.len() != n || else_g.outputs.len() != n {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "branches give {} and {} outputs, the node has {n}",
                then_g.outputs.len(),
                else_g.outputs.len()
            ),
        ));
    }
    let branches = ctx.per_node("branches", || {
        Ok((Body::new(ctx, then_g, 0)?, Body::new(ctx, else_g, 0)?))
    })?;
    let outputs = then_g
        .outputs
        .iter()
        .map(|&o| {
            let dtype = then_g.values[o]
                .declared
                .as_ref()
                .map_or(DataType::F32, |d| d.dtype);
            (dtype, Vec::new())
        })
        .collect();
    Ok(Built {
        outputs,
        kernel: Box::new(IfKernel {
            branches,
            outputs: n,
        }),
    })
}
