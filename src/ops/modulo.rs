//! `Mod`: the element-wise remainder, with the divisor's sign (`fmod = 0`, integers only) or the
//! dividend's (`fmod = 1`), with numpy broadcasting.

use super::{binary, BuildCtx, Built, OpDef, NUMERIC};
use crate::error::Result;

/// The `Mod` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Mod",
    domain: "",
    min_opset: 10,
    newest: 28,
    attributes: &["fmod"],
    types: NUMERIC,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    let fmod = ctx.attr_int("fmod", 0)? != 0;
    binary::build(
        ctx,
        if fmod {
            binary::Arith::FMod
        } else {
            binary::Arith::Mod
        },
    )
}
