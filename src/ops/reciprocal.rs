//! `Reciprocal`: element-wise `1 / x`.

use super::{pointwise, BuildCtx, Built, OpDef};
use crate::error::Result;

/// The `Reciprocal` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Reciprocal",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["consumed_inputs"],
    types: super::FLOATS,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    pointwise::build(ctx, |x, _| 1.0 / x, [0.0; 2])
}
