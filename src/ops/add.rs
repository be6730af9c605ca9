//! `Add`: element-wise add with numpy broadcasting.

use super::{binary, BuildCtx, Built, OpDef, FLOAT};
use crate::error::Result;
use crate::kernels::elementwise::BinaryOp;

/// The `Add` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Add",
    domain: "",
    min_opset: 1,
    attributes: &["axis", "broadcast", "consumed_inputs"],
    types: FLOAT,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    binary::build(ctx, BinaryOp::Add)
}
