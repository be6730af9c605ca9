//! `GlobalMaxPool`: the maximum over all spatial positions of each channel (`[N, C, …]` to
//! `[N, C, 1, …]`).

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOATS};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};
use crate::kernels::scalar::Scalar;

/// The `GlobalMaxPool` operator.
pub static DEF: OpDef = OpDef {
    op_type: "GlobalMaxPool",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &[],
    types: FLOATS,
    build,
};

struct GlobalMaxKernel {
    /// Spatial positions per channel.
    plane: usize,
}

impl GlobalMaxKernel {
    fn compute<T: Elem + Scalar>(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        let x = x.as_slice::<T>()?;
        for (o, plane) in out
            .as_mut_slice::<T>()?
            .iter_mut()
            .zip(x.chunks(self.plane))
        {
            *o = plane
                .iter()
                .copied()
                .reduce(|a, b| a.max_nan(b))
                .unwrap_or(T::ZERO);
        }
        Ok(())
    }
}

impl Kernel for GlobalMaxKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_float!(x.dtype(), T => self.compute::<T>(x, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let dtype = super::pointwise::float_like_input(ctx, 0)?;
    let x = ctx.input(0)?;
    if x.shape.len() < 2 {
        return Err(ctx.err(Status::InvalidModel, "input must have rank ≥ 2"));
    }
    let plane: usize = x.shape[2..].iter().product();
    if plane == 0 {
        return Err(ctx.err(Status::InvalidShape, "empty spatial dimensions"));
    }
    let mut out = x.shape[..2].to_vec();
    out.resize(x.shape.len(), 1);
    Ok(Built {
        outputs: vec![(dtype, out)],
        kernel: Box::new(GlobalMaxKernel { plane }),
    })
}
