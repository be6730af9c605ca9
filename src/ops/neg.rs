//! `Neg`: element-wise negation.

use super::{pointwise, BuildCtx, Built, OpDef};
use crate::error::Result;

/// The `Neg` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Neg",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["consumed_inputs"],
    types: super::NUMERIC,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    if ctx.input(0)?.dtype.is_integer() {
        return super::int_unary::build(ctx, super::int_unary::IntUnary::Neg);
    }
    pointwise::build(ctx, |x, _| -x, [0.0; 2])
}
