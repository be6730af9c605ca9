//! `Dropout`: in inference the output is the input. The optional mask output and training mode
//! are not supported.

use super::util::CopyKernel;
use super::{BuildCtx, Built, OpDef, ANY};
use crate::error::{Result, Status};
use crate::ir::TensorData;

/// The `Dropout` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Dropout",
    domain: "",
    min_opset: 1,
    attributes: &["ratio", "seed", "is_test", "consumed_inputs"],
    types: ANY,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 3, 1, 2)?;
    if ctx.node.outputs.get(1).copied().flatten().is_some() {
        return Err(ctx.err(
            Status::UnsupportedAttribute,
            "the mask output is not supported",
        ));
    }
    if ctx.opset < 7 && ctx.node.attrs.contains_key("is_test") && ctx.attr_int("is_test", 0)? == 0 {
        return Err(ctx.err(
            Status::UnsupportedAttribute,
            "training mode (is_test = 0) is not supported",
        ));
    }
    if ctx.opt_input(2).is_some() {
        let training = ctx.const_input(2, "training_mode")?;
        let on = match &training.data {
            TensorData::Bool(v) => v.iter().any(|&b| b),
            _ => {
                return Err(ctx.err(
                    Status::UnsupportedDatatype,
                    "training_mode must be a bool tensor",
                ))
            }
        };
        if on {
            return Err(ctx.err(
                Status::UnsupportedAttribute,
                "training mode is not supported",
            ));
        }
    }
    let x = ctx.input(0)?;
    Ok(Built {
        outputs: vec![(x.dtype, x.shape.to_vec())],
        kernel: Box::new(CopyKernel),
    })
}
