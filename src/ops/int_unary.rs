//! `Abs`, `Neg` and `Sign` on integer tensors (the float forms are point-wise functions): a
//! generic element-wise kernel over [`Scalar`] arithmetic (wrapping at the type's limits).

use super::util::BuildCtx;
use super::{Built, Kernel};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};
use crate::kernels::scalar::Scalar;

/// Which integer operation.
#[derive(Clone, Copy, Debug)]
pub enum IntUnary {
    /// `|x|`.
    Abs,
    /// `-x`.
    Neg,
    /// `-1`, `0` or `1`.
    Sign,
}

struct IntUnaryKernel(IntUnary);

impl IntUnaryKernel {
    fn apply<T: Scalar + Elem>(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        for (o, &v) in out.as_mut_slice::<T>()?.iter_mut().zip(x.as_slice::<T>()?) {
            *o = match self.0 {
                IntUnary::Abs => v.abs(),
                IntUnary::Neg => v.neg(),
                IntUnary::Sign if v > T::ZERO => T::ONE,
                IntUnary::Sign if v < T::ZERO => T::ONE.neg(),
                IntUnary::Sign => T::ZERO,
            };
        }
        Ok(())
    }
}

impl Kernel for IntUnaryKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_numeric!(x.dtype(), T => self.apply::<T>(x, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

/// Builds the integer form of `op` (the input must be an integer tensor).
pub fn build(ctx: &BuildCtx, op: IntUnary) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.input(0)?;
    if !x.dtype.is_integer() {
        return Err(ctx.err(
            Status::UnsupportedDatatype,
            format!("{} inputs are not supported", x.dtype.name()),
        ));
    }
    Ok(Built {
        outputs: vec![(x.dtype, x.shape.to_vec())],
        kernel: Box::new(IntUnaryKernel(op)),
    })
}
