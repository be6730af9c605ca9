//! `ArgMax` and `ArgMin`: the index of the largest (smallest) element along `axis`, as int64;
//! the first such index, or the last with `select_last_index`.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, NUMERIC};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};

/// The `ArgMax` operator.
pub static MAX_DEF: OpDef = OpDef {
    op_type: "ArgMax",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["axis", "keepdims", "select_last_index"],
    types: NUMERIC,
    build: build_max,
};

/// The `ArgMin` operator.
pub static MIN_DEF: OpDef = OpDef {
    op_type: "ArgMin",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["axis", "keepdims", "select_last_index"],
    types: NUMERIC,
    build: build_min,
};

struct ArgKernel {
    max: bool,
    last: bool,
    outer: usize,
    axis_len: usize,
    inner: usize,
}

impl ArgKernel {
    fn compute<T: Elem>(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        let x = x.as_slice::<T>()?;
        let out = out.as_mut_slice::<i64>()?;
        for o in 0..self.outer {
            for i in 0..self.inner {
                let at = |k: usize| x[(o * self.axis_len + k) * self.inner + i];
                let mut best = 0;
                for k in 1..self.axis_len {
                    let (v, b) = (at(k), at(best));
                    let better = if self.max { v > b } else { v < b };
                    if better || (self.last && v == b) {
                        best = k;
                    }
                }
                out[o * self.inner + i] = best as i64;
            }
        }
        Ok(())
    }
}

impl Kernel for ArgKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_numeric!(x.dtype(), T => self.compute::<T>(x, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx, max: bool) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    if rank == 0 {
        return Err(ctx.err(
            Status::InvalidModel,
            "the input is a scalar, with no axis to reduce",
        ));
    }
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, rank)?;
    if x.shape[axis] == 0 {
        return Err(ctx.err(Status::InvalidShape, "the reduced axis is empty"));
    }
    let mut out = x.shape.to_vec();
    if ctx.attr_int("keepdims", 1)? != 0 {
        out[axis] = 1;
    } else {
        out.remove(axis);
    }
    Ok(Built {
        outputs: vec![(DataType::I64, out)],
        kernel: Box::new(ArgKernel {
            max,
            last: ctx.attr_int("select_last_index", 0)? != 0,
            outer: x.shape[..axis].iter().product(),
            axis_len: x.shape[axis],
            inner: x.shape[axis + 1..].iter().product(),
        }),
    })
}

fn build_max(ctx: &BuildCtx) -> Result<Built> {
    build(ctx, true)
}

fn build_min(ctx: &BuildCtx) -> Result<Built> {
    build(ctx, false)
}
