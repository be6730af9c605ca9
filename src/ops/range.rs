//! `Range`: `start, start + delta, …` up to (excluding) `limit`, for the numeric types. The
//! element count depends on the three scalars' contents.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};
use crate::kernels::scalar::Scalar;

/// The `Range` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Range",
    domain: "",
    min_opset: 11,
    newest: 27,
    attributes: &[],
    types: &[
        DataType::F32,
        DataType::F64,
        DataType::I16,
        DataType::I32,
        DataType::I64,
    ],
    build,
};

struct RangeKernel;

fn fill<T: Elem + Scalar>(inputs: &[Option<&Tensor>], out: &mut Tensor) -> Result<()> {
    let scalar = |i: usize| -> Result<T> {
        inputs[i]
            .ok_or_else(|| Error::new(Status::InternalError, "Range input missing"))?
            .as_slice::<T>()?
            .first()
            .copied()
            .ok_or_else(|| Error::new(Status::InvalidShape, "Range takes scalars"))
    };
    let (start, delta) = (scalar(0)?, scalar(2)?);
    // Each element is start + i·delta, as the reference computes it (no accumulated rounding).
    for (i, o) in out.as_mut_slice::<T>()?.iter_mut().enumerate() {
        *o = if T::FLOAT {
            T::of_f64(start.as_f64() + i as f64 * delta.as_f64())
        } else {
            start.add(T::of_f64(i as f64).mul(delta))
        };
    }
    Ok(())
}

impl Kernel for RangeKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let out = &mut outputs[0];
        crate::dispatch_numeric!(out.dtype(), T => fill::<T>(inputs, out),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(3, 3, 1, 1)?;
    let dtype = ctx.input(0)?.dtype;
    let mut v = [0f64; 3];
    for (i, slot) in v.iter_mut().enumerate() {
        let t = ctx.const_input(i, "start, limit and delta")?;
        if t.dtype() != dtype || t.len() != 1 {
            return Err(ctx.err(
                Status::InvalidModel,
                "start, limit and delta must be scalars of one type",
            ));
        }
        *slot = crate::dispatch_numeric!(dtype, T => T::slice(&t.data).map_or(0.0, |s| s[0].as_f64()),
            _other => return Err(ctx.err(Status::UnsupportedDatatype, dtype.name())));
    }
    let [start, limit, delta] = v;
    if delta == 0.0 {
        return Err(ctx.err(Status::InvalidModel, "delta is zero"));
    }
    let n = ((limit - start) / delta).ceil().max(0.0);
    if !n.is_finite() || n > (1u64 << 40) as f64 {
        return Err(ctx.err(Status::UnsupportedShape, format!("{n} elements")));
    }
    Ok(Built {
        outputs: vec![(dtype, vec![n as usize])],
        kernel: Box::new(RangeKernel),
    })
}
