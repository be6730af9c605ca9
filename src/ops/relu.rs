//! `Relu`: element-wise relu.

use super::{unary, BuildCtx, Built, OpDef, FLOAT};
use crate::error::Result;
use crate::kernels::activation::Activation;

/// The `Relu` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Relu",
    domain: "",
    min_opset: 1,
    newest: 14,
    attributes: &["consumed_inputs"],
    types: FLOAT,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    unary::build(ctx, Activation::Relu)
}
