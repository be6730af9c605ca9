//! `LeakyRelu`: `x` if `x ≥ 0`, else `alpha · x`.

use super::{unary, BuildCtx, Built, OpDef, FLOAT};
use crate::error::Result;
use crate::kernels::activation::Activation;

/// The `LeakyRelu` operator.
pub static DEF: OpDef = OpDef {
    op_type: "LeakyRelu",
    domain: "",
    min_opset: 1,
    newest: 16,
    attributes: &["alpha", "consumed_inputs"],
    types: FLOAT,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    let alpha = ctx.attr_float("alpha", 0.01)?;
    unary::build(ctx, Activation::LeakyRelu(alpha))
}
