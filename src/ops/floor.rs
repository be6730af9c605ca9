//! `Floor`: element-wise rounding down.

use super::{pointwise, BuildCtx, Built, OpDef};
use crate::error::Result;

/// The `Floor` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Floor",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["consumed_inputs"],
    types: super::FLOATS,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    pointwise::build(ctx, |x, _| x.floor(), [0.0; 2])
}
