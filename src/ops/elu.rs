//! `Elu`: `x` if `x ≥ 0`, else `alpha · (e^x - 1)`.

use super::{pointwise, BuildCtx, Built, OpDef};
use crate::error::Result;

/// The `Elu` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Elu",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &["alpha", "consumed_inputs"],
    types: super::FLOATS,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    let alpha = ctx.attr_float("alpha", 1.0)?;
    pointwise::build(
        ctx,
        |x, [a, _]| if x < 0.0 { a * x.exp_m1() } else { x },
        [alpha, 0.0],
    )
}
