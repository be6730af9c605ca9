//! `CumSum`: running sums along an axis (given as a one-element input), optionally exclusive
//! (each element excluded from its own sum) and/or reversed.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, NUMERIC};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};
use crate::kernels::scalar::Scalar;

/// The `CumSum` operator.
pub static DEF: OpDef = OpDef {
    op_type: "CumSum",
    domain: "",
    min_opset: 11,
    newest: 14,
    attributes: &["exclusive", "reverse"],
    types: NUMERIC,
    build,
};

struct CumSumKernel {
    outer: usize,
    axis_len: usize,
    inner: usize,
    exclusive: bool,
    reverse: bool,
}

impl CumSumKernel {
    fn compute<T: Elem + Scalar>(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        let x = x.as_slice::<T>()?;
        let out = out.as_mut_slice::<T>()?;
        for o in 0..self.outer {
            for i in 0..self.inner {
                let mut acc = T::ZERO;
                for step in 0..self.axis_len {
                    let k = if self.reverse {
                        self.axis_len - 1 - step
                    } else {
                        step
                    };
                    let at = (o * self.axis_len + k) * self.inner + i;
                    if self.exclusive {
                        out[at] = acc;
                        acc = acc.add(x[at]);
                    } else {
                        acc = acc.add(x[at]);
                        out[at] = acc;
                    }
                }
            }
        }
        Ok(())
    }
}

impl Kernel for CumSumKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_numeric!(x.dtype(), T => self.compute::<T>(x, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    if rank == 0 {
        return Err(ctx.err(
            Status::InvalidModel,
            "the input is a scalar, with no axis to sum along",
        ));
    }
    let axis = *ctx
        .const_ints(1, "axis")?
        .first()
        .ok_or_else(|| ctx.err(Status::InvalidModel, "axis is empty"))?;
    let axis = ctx.axis(axis, rank)?;
    Ok(Built {
        outputs: vec![(x.dtype, x.shape.to_vec())],
        kernel: Box::new(CumSumKernel {
            outer: x.shape[..axis].iter().product(),
            axis_len: x.shape[axis],
            inner: x.shape[axis + 1..].iter().product(),
            exclusive: ctx.attr_int("exclusive", 0)? != 0,
            reverse: ctx.attr_int("reverse", 0)? != 0,
        }),
    })
}
