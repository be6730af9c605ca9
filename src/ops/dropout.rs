//! `Dropout`: in inference the output is the input and the optional mask is all true. Training
//! mode is supported only with a zero ratio (nothing dropped); random dropping is refused.

use super::{BuildCtx, Built, Kernel, OpDef, ANY};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor, TensorData};

/// The `Dropout` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Dropout",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &["ratio", "seed", "is_test", "consumed_inputs"],
    types: ANY,
    build,
};

/// Inference-mode Dropout: the output is the input; the mask, when asked for, is all true.
struct DropoutKernel {
    mask: bool,
}

impl Kernel for DropoutKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        outputs[0].data = x.data.clone();
        if self.mask {
            if let Some(m) = outputs.get_mut(1) {
                m.as_mut_slice::<bool>()?.fill(true);
            }
        }
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 3, 1, 2)?;
    let mask = ctx.node.outputs.get(1).copied().flatten().is_some();
    if mask && ctx.node.outputs[0].is_none() {
        return Err(ctx.err(
            Status::UnsupportedAttribute,
            "a mask without the output is not supported",
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
        // Training with ratio 0 drops nothing: the same as inference.
        let ratio_zero = match ctx.opt_input(1) {
            Some(_) => {
                let r = ctx.const_input(1, "ratio")?;
                crate::dispatch_float!(r.dtype(), T => r.as_slice::<T>()?.iter().all(|v| v.to_f64() == 0.0),
                    _o => false)
            }
            None => false,
        };
        if on && !ratio_zero {
            return Err(ctx.err(
                Status::UnsupportedAttribute,
                "training mode with a non-zero ratio (random dropping) is not supported",
            ));
        }
    }
    let x = ctx.input(0)?;
    Ok(Built {
        outputs: vec![
            (x.dtype, x.shape.to_vec()),
            (crate::ir::DataType::Bool, x.shape.to_vec()),
        ],
        kernel: Box::new(DropoutKernel { mask }),
    })
}
