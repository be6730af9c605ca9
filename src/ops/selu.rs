//! `Selu`: `gamma · x` if `x > 0`, else `gamma · alpha · (e^x - 1)`.

use super::{pointwise, BuildCtx, Built, OpDef};
use crate::error::Result;

/// The `Selu` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Selu",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &["alpha", "gamma", "consumed_inputs"],
    types: super::FLOATS,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    let alpha = ctx.attr_float("alpha", 1.673_263_2)?;
    let gamma = ctx.attr_float("gamma", 1.050_701)?;
    pointwise::build(
        ctx,
        |x, [a, g]| if x > 0.0 { g * x } else { g * a * x.exp_m1() },
        [alpha, gamma],
    )
}
