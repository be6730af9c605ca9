//! `Tanh`: element-wise tanh.

use super::{unary, BuildCtx, Built, OpDef, FLOAT};
use crate::error::Result;
use crate::kernels::activation::Activation;

/// The `Tanh` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Tanh",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["consumed_inputs"],
    types: FLOAT,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    unary::build(ctx, Activation::Tanh)
}
