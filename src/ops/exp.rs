//! `Exp`: element-wise natural exponential.

use super::{pointwise, BuildCtx, Built, OpDef};
use crate::error::Result;

/// The `Exp` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Exp",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["consumed_inputs"],
    types: super::FLOATS,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    pointwise::build(ctx, |x, _| x.exp(), [0.0; 2])
}
