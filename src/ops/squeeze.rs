//! `Squeeze`: removes dimensions of size 1 (the listed `axes`, or all of them). Axes are an
//! attribute before opset 13 and an optional constant input from 13.

use super::util::CopyKernel;
use super::{BuildCtx, Built, OpDef, MOVED};
use crate::error::{Result, Status};

/// The `Squeeze` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Squeeze",
    domain: "",
    min_opset: 1,
    newest: 25,
    attributes: &["axes"],
    types: MOVED,
    build,
};

/// The `axes` of Squeeze / Unsqueeze: the attribute before opset 13, the optional constant
/// second input from 13.
pub fn axes(ctx: &BuildCtx) -> Result<Option<Vec<i64>>> {
    if ctx.opset >= 13 {
        if ctx.node.attrs.contains_key("axes") {
            return Err(ctx.err(
                Status::InvalidModel,
                "from opset 13, axes are an input, not an attribute",
            ));
        }
        match ctx.opt_input(1) {
            None => Ok(None),
            Some(_) => Ok(Some(
                ctx.const_input(1, "axes")?
                    .to_i64_vec()
                    .map_err(|e| ctx.err(Status::InvalidModel, e.message))?,
            )),
        }
    } else {
        Ok(ctx.attr_ints("axes")?.map(|a| a.to_vec()))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    let max_in = if ctx.opset >= 13 { 2 } else { 1 };
    ctx.arity(1, max_in, 1, 1)?;
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let mut drop = vec![false; rank];
    match axes(ctx)? {
        None => {
            for (d, &n) in x.shape.iter().enumerate() {
                drop[d] = n == 1;
            }
        }
        Some(axes) => {
            if rank == 0 && !axes.is_empty() {
                return Err(ctx.err(Status::InvalidModel, "a scalar has no axis to squeeze"));
            }
            for &a in &axes {
                let d = ctx.axis(a, rank)?;
                if std::mem::replace(&mut drop[d], true) {
                    return Err(ctx.err(
                        Status::InvalidModel,
                        format!("axes {axes:?} repeat an axis"),
                    ));
                }
                if x.shape[d] != 1 {
                    return Err(ctx.err(
                        Status::InvalidModel,
                        format!("axis {a} has size {}, not 1", x.shape[d]),
                    ));
                }
            }
        }
    }
    let out = (0..rank)
        .filter(|&d| !drop[d])
        .map(|d| x.shape[d])
        .collect();
    Ok(Built {
        outputs: vec![(x.dtype, out)],
        kernel: Box::new(CopyKernel),
    })
}
