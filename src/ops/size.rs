//! `Size`: the number of elements of the input, as an int64 scalar.

use super::util::{BuildCtx, ConstKernel};
use super::{Built, OpDef, MOVED};
use crate::error::Result;
use crate::ir::{DataType, Tensor};

/// The `Size` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Size",
    domain: "",
    min_opset: 1,
    newest: 25,
    attributes: &[],
    types: MOVED,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let n = crate::ir::numel(ctx.input(0)?.shape)? as i64;
    Ok(Built {
        outputs: vec![(DataType::I64, vec![])],
        kernel: Box::new(ConstKernel(Tensor::from_vec(vec![], vec![n])?)),
    })
}
