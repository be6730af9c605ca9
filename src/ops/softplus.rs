//! `Softplus`: `ln(e^x + 1)`, computed without overflow.

use super::{pointwise, BuildCtx, Built, OpDef};
use crate::error::Result;

/// The `Softplus` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Softplus",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &[],
    types: super::FLOATS,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    pointwise::build(ctx, softplus, [0.0; 2])
}

fn softplus(x: f32, _: [f32; 2]) -> f32 {
    if x > 0.0 {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    }
}
