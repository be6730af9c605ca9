//! `Identity`: the output is the input.

use super::util::CopyKernel;
use super::{BuildCtx, Built, OpDef, MOVED};
use crate::error::Result;

/// The `Identity` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Identity",
    domain: "",
    min_opset: 1,
    newest: 25,
    attributes: &[],
    types: MOVED,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.input(0)?;
    Ok(Built {
        outputs: vec![(x.dtype, x.shape.to_vec())],
        kernel: Box::new(CopyKernel),
    })
}
