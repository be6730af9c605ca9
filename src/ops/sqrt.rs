//! `Sqrt`: element-wise square root.

use super::{pointwise, BuildCtx, Built, OpDef};
use crate::error::Result;

/// The `Sqrt` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Sqrt",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["consumed_inputs"],
    types: super::FLOATS,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    pointwise::build(ctx, |x, _| x.sqrt(), [0.0; 2])
}
