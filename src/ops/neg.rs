//! `Neg`: element-wise negation.

use super::{pointwise, BuildCtx, Built, OpDef};
use crate::error::Result;

/// The `Neg` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Neg",
    domain: "",
    min_opset: 1,
    attributes: &["consumed_inputs"],
    types: super::FLOATS,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    pointwise::build(ctx, |x, _| -x, [0.0; 2])
}
