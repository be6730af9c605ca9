//! `OneHot`: for each index, a vector of `depth` values holding `values[1]` at the index and
//! `values[0]` elsewhere, inserted at `axis`. Negative indices count from the end.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, NUMERIC};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};
use crate::kernels::scalar::Scalar;

/// The `OneHot` operator.
pub static DEF: OpDef = OpDef {
    op_type: "OneHot",
    domain: "",
    min_opset: 9,
    newest: 28,
    attributes: &["axis"],
    types: NUMERIC,
    build,
};

struct OneHotKernel {
    depth: usize,
    outer: usize,
    inner: usize,
}

impl OneHotKernel {
    fn compute<T: Elem>(&self, idx: &Tensor, values: &Tensor, out: &mut Tensor) -> Result<()> {
        let v = values.as_slice::<T>()?;
        let (off, on) = (v[0], v[1]);
        let out = out.as_mut_slice::<T>()?;
        out.fill(off);
        let idx: Vec<f64> = crate::dispatch_numeric!(idx.dtype(), I => idx.as_slice::<I>()?.iter().map(|x| x.as_f64()).collect(),
            other => return Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))));
        for o in 0..self.outer {
            for i in 0..self.inner {
                let mut k = idx[o * self.inner + i].trunc() as i64;
                if k < 0 {
                    k += self.depth as i64;
                }
                if (0..self.depth as i64).contains(&k) {
                    out[(o * self.depth + k as usize) * self.inner + i] = on;
                }
            }
        }
        Ok(())
    }
}

impl Kernel for OneHotKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let idx = inputs[0].ok_or_else(missing)?;
        let values = inputs[2].ok_or_else(missing)?;
        crate::dispatch_stored!(values.dtype(), T => self.compute::<T>(idx, values, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(3, 3, 1, 1)?;
    let idx = ctx.input(0)?;
    let depth_t = ctx.const_input(1, "depth")?;
    let depth = crate::dispatch_numeric!(depth_t.dtype(), T => depth_t.as_slice::<T>()?.first().map(|v| v.as_f64()),
        other => return Err(ctx.err(Status::InvalidModel, format!("depth of type {}", other.name()))))
    .ok_or_else(|| ctx.err(Status::InvalidModel, "depth is empty"))?;
    if !(depth >= 1.0 && depth < (1u64 << 32) as f64) {
        return Err(ctx.err(Status::InvalidModel, format!("depth {depth}")));
    }
    let depth = depth as usize;
    let values = ctx.input(2)?;
    if values.shape.iter().product::<usize>() != 2 {
        return Err(ctx.err(Status::InvalidModel, "values must hold [off, on]"));
    }
    let rank = idx.shape.len() + 1;
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, rank)?;
    let mut out = idx.shape.to_vec();
    out.insert(axis, depth);
    Ok(Built {
        outputs: vec![(values.dtype, out)],
        kernel: Box::new(OneHotKernel {
            depth,
            outer: idx.shape[..axis].iter().product(),
            inner: idx.shape[axis..].iter().product(),
        }),
    })
}
