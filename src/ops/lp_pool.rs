//! `LpPool` and `GlobalLpPool`: the p-norm of each window (the whole plane for the global
//! form), in any number of spatial dimensions.

use super::util::BuildCtx;
use super::{window_nd, Built, OpDef, FLOAT};
use crate::error::Result;

/// The `LpPool` operator.
pub static DEF: OpDef = OpDef {
    op_type: "LpPool",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &[
        "auto_pad",
        "ceil_mode",
        "dilations",
        "kernel_shape",
        "p",
        "pads",
        "strides",
    ],
    types: FLOAT,
    build,
};

/// The `GlobalLpPool` operator.
pub static GLOBAL_DEF: OpDef = OpDef {
    op_type: "GlobalLpPool",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &["p"],
    types: FLOAT,
    build: build_global,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    window_nd::build_lp_pool(ctx, false)
}

fn build_global(ctx: &BuildCtx) -> Result<Built> {
    window_nd::build_lp_pool(ctx, true)
}
