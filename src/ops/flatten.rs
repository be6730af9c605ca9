//! `Flatten`: a 2-D view `[prod(dims[..axis]), prod(dims[axis..])]`.

use super::util::CopyKernel;
use super::{BuildCtx, Built, OpDef, MOVED};
use crate::error::{Result, Status};

/// The `Flatten` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Flatten",
    domain: "",
    min_opset: 1,
    newest: 25,
    attributes: &["axis"],
    types: MOVED,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.input(0)?;
    let rank = x.shape.len() as i64;
    let axis = ctx.attr_int("axis", 1)?;
    let a = if axis < 0 { axis + rank } else { axis };
    if a < 0 || a > rank {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("axis {axis} is out of range for rank {rank}"),
        ));
    }
    let a = a as usize;
    let outer = x.shape[..a].iter().product();
    let inner = x.shape[a..].iter().product();
    Ok(Built {
        outputs: vec![(x.dtype, vec![outer, inner])],
        kernel: Box::new(CopyKernel),
    })
}
