//! `Trilu`: keeps the upper (or lower) triangle of the last two dimensions, above (below) the
//! `k`-th diagonal, and zeroes the rest.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, ANY};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};

/// The `Trilu` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Trilu",
    domain: "",
    min_opset: 14,
    newest: 14,
    attributes: &["upper"],
    types: ANY,
    build,
};

struct TriluKernel {
    upper: bool,
    k: i64,
    rows: usize,
    cols: usize,
}

impl TriluKernel {
    fn compute<T: Elem>(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        let x = x.as_slice::<T>()?;
        let out = out.as_mut_slice::<T>()?;
        let plane = self.rows * self.cols;
        for (o, xs) in out.chunks_mut(plane.max(1)).zip(x.chunks(plane.max(1))) {
            for i in 0..self.rows {
                for j in 0..self.cols {
                    let d = j as i64 - i as i64;
                    let keep = if self.upper { d >= self.k } else { d <= self.k };
                    let at = i * self.cols + j;
                    o[at] = if keep { xs[at] } else { T::default() };
                }
            }
        }
        Ok(())
    }
}

impl Kernel for TriluKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_stored!(x.dtype(), T => self.compute::<T>(x, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 2, 1, 1)?;
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    if rank < 2 {
        return Err(ctx.err(Status::InvalidModel, "input must have rank ≥ 2"));
    }
    let k = match ctx.opt_input(1) {
        Some(_) => *ctx
            .const_ints(1, "k")?
            .first()
            .ok_or_else(|| ctx.err(Status::InvalidModel, "k is empty"))?,
        None => 0,
    };
    Ok(Built {
        outputs: vec![(x.dtype, x.shape.to_vec())],
        kernel: Box::new(TriluKernel {
            upper: ctx.attr_int("upper", 1)? != 0,
            k,
            rows: x.shape[rank - 2],
            cols: x.shape[rank - 1],
        }),
    })
}
