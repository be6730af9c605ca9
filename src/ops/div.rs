//! `Div`: element-wise div with numpy broadcasting.

use super::{binary, BuildCtx, Built, OpDef};
use crate::error::Result;

/// The `Div` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Div",
    domain: "",
    min_opset: 1,
    newest: 14,
    attributes: &["axis", "broadcast", "consumed_inputs"],
    types: super::NUMERIC,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    binary::build(ctx, binary::Arith::Div)
}
