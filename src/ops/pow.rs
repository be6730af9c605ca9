//! `Pow`: `a` raised to the power `b` element-wise, with numpy broadcasting (float base and exponent).

use super::{binary, BuildCtx, Built, OpDef, FLOAT};
use crate::error::Result;
use crate::kernels::elementwise::BinaryOp;

/// The `Pow` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Pow",
    domain: "",
    min_opset: 1,
    attributes: &["axis", "broadcast"],
    types: FLOAT,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    binary::build(ctx, BinaryOp::Pow)
}
