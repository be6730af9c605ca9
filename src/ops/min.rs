//! `Min`: element-wise minimum of one or more inputs, with numpy broadcasting.

use super::{variadic, BuildCtx, Built, OpDef};
use crate::error::Result;
use crate::kernels::elementwise::BinaryOp;

/// The `Min` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Min",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["consumed_inputs"],
    types: super::NUMERIC,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    variadic::build(ctx, BinaryOp::Min, false)
}
