//! `Unsqueeze`: inserts dimensions of size 1 at the listed `axes` of the output. Axes are an
//! attribute before opset 13 and a constant input from 13.

use super::util::CopyKernel;
use super::{squeeze, BuildCtx, Built, OpDef, MOVED};
use crate::error::{Result, Status};

/// The `Unsqueeze` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Unsqueeze",
    domain: "",
    min_opset: 1,
    newest: 25,
    attributes: &["axes"],
    types: MOVED,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    let n_in = if ctx.opset >= 13 { 2 } else { 1 };
    ctx.arity(n_in, n_in, 1, 1)?;
    let x = ctx.input(0)?;
    let axes =
        squeeze::axes(ctx)?.ok_or_else(|| ctx.err(Status::InvalidModel, "axes are required"))?;
    let rank = x.shape.len() + axes.len();
    let mut insert = vec![false; rank];
    for &a in &axes {
        let d = ctx.axis(a, rank)?;
        if std::mem::replace(&mut insert[d], true) {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("axes {axes:?} repeat an axis"),
            ));
        }
    }
    let mut rest = x.shape.iter();
    let out = insert
        .iter()
        .map(|&ins| if ins { 1 } else { *rest.next().unwrap_or(&1) })
        .collect();
    Ok(Built {
        outputs: vec![(x.dtype, out)],
        kernel: Box::new(CopyKernel),
    })
}
