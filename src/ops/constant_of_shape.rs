//! `ConstantOfShape`: a tensor of the shape given by its input's contents, filled with the
//! one-element `value` attribute (a float32 zero by default).

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor, TensorData};

/// The `ConstantOfShape` operator.
pub static DEF: OpDef = OpDef {
    op_type: "ConstantOfShape",
    domain: "",
    min_opset: 9,
    newest: 25,
    attributes: &["value"],
    types: &[DataType::I64],
    build,
};

/// Fills the output with the first element of the value.
struct FillKernel(TensorData);

impl Kernel for FillKernel {
    fn run(&self, _inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        crate::dispatch_stored!(self.0.dtype(), T => {
            let fill = T::slice(&self.0)
                .and_then(|v| v.first().copied())
                .ok_or_else(|| Error::new(Status::InternalError, "empty fill value"))?;
            outputs[0].as_mut_slice::<T>()?.fill(fill);
            Ok(())
        }, other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let shape = ctx.const_dims(0, "shape")?;
    let value = match ctx.attr_tensor("value")? {
        Some(t) if t.len() == 1 => t.data.clone(),
        Some(t) => {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("'value' has {} elements, not 1", t.len()),
            ))
        }
        None => TensorData::F32(vec![0.0]),
    };
    Ok(Built {
        outputs: vec![(value.dtype(), shape)],
        kernel: Box::new(FillKernel(value)),
    })
}
