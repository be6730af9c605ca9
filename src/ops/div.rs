//! `Div`: element-wise div with numpy broadcasting.

use super::{binary, BuildCtx, Built, OpDef, FLOAT};
use crate::error::Result;
use crate::kernels::elementwise::BinaryOp;

/// The `Div` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Div",
    domain: "",
    min_opset: 1,
    attributes: &["axis", "broadcast", "consumed_inputs"],
    types: FLOAT,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    binary::build(ctx, BinaryOp::Div)
}
