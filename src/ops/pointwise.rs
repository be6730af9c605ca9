//! Shared lowering of the simple float element-wise operators (Abs, Exp, Elu, Cos, Gelu …): a
//! scalar function with up to two parameters applied to every element. float32 is computed
//! directly; float64, float16 and bfloat16 go through the same f32 function.

use super::util::BuildCtx;
use super::{Built, Kernel};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};

/// A scalar function of an element and the operator's parameters.
pub type ScalarFn = fn(f32, [f32; 2]) -> f32;

struct PointwiseKernel {
    f: ScalarFn,
    params: [f32; 2],
}

impl PointwiseKernel {
    fn apply<T: Elem>(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        let (f, p) = (self.f, self.params);
        for (o, &v) in out.as_mut_slice::<T>()?.iter_mut().zip(x.as_slice::<T>()?) {
            *o = T::from_f64(f(v.to_f64() as f32, p) as f64);
        }
        Ok(())
    }
}

impl Kernel for PointwiseKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        if let (Ok(src), Ok(dst)) = (x.as_f32(), outputs[0].as_mut_slice::<f32>()) {
            for (o, &v) in dst.iter_mut().zip(src) {
                *o = (self.f)(v, self.params);
            }
            return Ok(());
        }
        crate::dispatch_float!(x.dtype(), T => self.apply::<T>(x, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

/// The floating-point input `i`.
pub fn float_like_input(ctx: &BuildCtx, i: usize) -> Result<DataType> {
    let x = ctx.input(i)?;
    if !x.dtype.is_float() {
        return Err(ctx.err(
            Status::UnsupportedDatatype,
            format!(
                "input {i} is {}; only floating-point types are supported",
                x.dtype.name()
            ),
        ));
    }
    Ok(x.dtype)
}

/// Builds a one-input, one-output float operator computing `f(x, params)` per element.
pub fn build(ctx: &BuildCtx, f: ScalarFn, params: [f32; 2]) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let dtype = float_like_input(ctx, 0)?;
    Ok(Built {
        outputs: vec![(dtype, ctx.input(0)?.shape.to_vec())],
        kernel: Box::new(PointwiseKernel { f, params }),
    })
}

/// A predicate on float elements with a bool result (IsNaN, IsInf).
pub type PredicateFn = fn(f64, [bool; 2]) -> bool;

struct PredicateKernel {
    f: PredicateFn,
    flags: [bool; 2],
}

impl PredicateKernel {
    fn apply<T: Elem>(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        for (o, &v) in out
            .as_mut_slice::<bool>()?
            .iter_mut()
            .zip(x.as_slice::<T>()?)
        {
            *o = (self.f)(v.to_f64(), self.flags);
        }
        Ok(())
    }
}

impl Kernel for PredicateKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_float!(x.dtype(), T => self.apply::<T>(x, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

/// Builds a float predicate operator with a bool output.
pub fn build_predicate(ctx: &BuildCtx, f: PredicateFn, flags: [bool; 2]) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    float_like_input(ctx, 0)?;
    Ok(Built {
        outputs: vec![(DataType::Bool, ctx.input(0)?.shape.to_vec())],
        kernel: Box::new(PredicateKernel { f, flags }),
    })
}
