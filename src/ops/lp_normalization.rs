//! `LpNormalization`: divides each vector along `axis` by its L1 (`p = 1`) or L2 (`p = 2`)
//! norm; a zero vector stays zero.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOATS};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};

/// The `LpNormalization` operator.
pub static DEF: OpDef = OpDef {
    op_type: "LpNormalization",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &["axis", "p"],
    types: FLOATS,
    build,
};

struct LpNormKernel {
    p: i64,
    outer: usize,
    axis_len: usize,
    inner: usize,
}

impl LpNormKernel {
    fn compute<T: Elem>(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        let x = x.as_slice::<T>()?;
        let out = out.as_mut_slice::<T>()?;
        for o in 0..self.outer {
            for i in 0..self.inner {
                let at = |k: usize| (o * self.axis_len + k) * self.inner + i;
                let norm: f64 = if self.p == 1 {
                    (0..self.axis_len).map(|k| x[at(k)].to_f64().abs()).sum()
                } else {
                    (0..self.axis_len)
                        .map(|k| x[at(k)].to_f64().powi(2))
                        .sum::<f64>()
                        .sqrt()
                };
                for k in 0..self.axis_len {
                    let v = x[at(k)].to_f64();
                    out[at(k)] = T::from_f64(if norm == 0.0 { 0.0 } else { v / norm });
                }
            }
        }
        Ok(())
    }
}

impl Kernel for LpNormKernel {
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
    if x.shape.is_empty() {
        return Err(ctx.err(
            Status::InvalidModel,
            "the input is a scalar, with no axis to normalise along",
        ));
    }
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, x.shape.len())?;
    let p = ctx.attr_int("p", 2)?;
    if p != 1 && p != 2 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("p = {p}: only 1 and 2 are defined"),
        ));
    }
    Ok(Built {
        outputs: vec![(dtype, x.shape.to_vec())],
        kernel: Box::new(LpNormKernel {
            p,
            outer: x.shape[..axis].iter().product(),
            axis_len: x.shape[axis],
            inner: x.shape[axis + 1..].iter().product(),
        }),
    })
}
