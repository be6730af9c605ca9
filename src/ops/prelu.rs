//! `PRelu`: `x` where positive, `slope · x` elsewhere, the slope broadcast to `x`'s shape.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, NUMERIC};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};
use crate::kernels::broadcast::map2;
use crate::kernels::scalar::Scalar;

/// The `PRelu` operator.
pub static DEF: OpDef = OpDef {
    op_type: "PRelu",
    domain: "",
    min_opset: 1,
    newest: 16,
    attributes: &["consumed_inputs"],
    types: NUMERIC,
    build,
};

struct PreluKernel {
    x_shape: Vec<usize>,
    slope_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

impl PreluKernel {
    fn compute<T: Elem + Scalar>(&self, x: &Tensor, s: &Tensor, out: &mut Tensor) -> Result<()> {
        map2(
            (x.as_slice::<T>()?, &self.x_shape),
            (s.as_slice::<T>()?, &self.slope_shape),
            out.as_mut_slice::<T>()?,
            &self.out_shape,
            |v, a| if v < T::ZERO { v.mul(a) } else { v },
        );
        Ok(())
    }
}

impl Kernel for PreluKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let x = inputs[0].ok_or_else(missing)?;
        let s = inputs[1].ok_or_else(missing)?;
        crate::dispatch_numeric!(x.dtype(), T => self.compute::<T>(x, s, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let x = ctx.input(0)?;
    let s = ctx.input(1)?;
    if x.dtype != s.dtype {
        return Err(ctx.err(Status::InvalidModel, "X and slope differ in type"));
    }
    // A 1-D slope of one value per channel applies along axis 1 (what opset < 7 exporters and
    // PyTorch's multi-parameter PReLU write).
    let slope_shape: Vec<usize> = if s.shape.len() == 1
        && x.shape.len() > 2
        && s.shape[0] == x.shape[1]
        && s.shape[0] != x.shape[x.shape.len() - 1]
    {
        let mut v = vec![s.shape[0]];
        v.resize(x.shape.len() - 1, 1);
        v
    } else {
        s.shape.to_vec()
    };
    let out_shape = crate::kernels::broadcast::broadcast_shapes(&[x.shape, &slope_shape])
        .ok_or_else(|| {
            ctx.err(
                Status::InvalidModel,
                format!("slope {:?} does not broadcast to X {:?}", s.shape, x.shape),
            )
        })?;
    if out_shape != x.shape {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("slope {:?} does not broadcast to X {:?}", s.shape, x.shape),
        ));
    }
    Ok(Built {
        outputs: vec![(x.dtype, out_shape.clone())],
        kernel: Box::new(PreluKernel {
            x_shape: x.shape.to_vec(),
            slope_shape,
            out_shape,
        }),
    })
}
