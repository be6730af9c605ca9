//! `HardSigmoid`: `max(0, min(1, alpha · x + beta))`.

use super::{pointwise, BuildCtx, Built, OpDef};
use crate::error::Result;

/// The `HardSigmoid` operator.
pub static DEF: OpDef = OpDef {
    op_type: "HardSigmoid",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &["alpha", "beta", "consumed_inputs"],
    types: super::FLOATS,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    let alpha = ctx.attr_float("alpha", 0.2)?;
    let beta = ctx.attr_float("beta", 0.5)?;
    pointwise::build(ctx, |x, [a, b]| (a * x + b).clamp(0.0, 1.0), [alpha, beta])
}
