//! `TopK`: the `k` largest (or smallest) elements along `axis` and their int64 indices, sorted
//! (ties keep the lower index first). `k` is an attribute before opset 10, an input from 10.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, NUMERIC};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};

/// The `TopK` operator.
pub static DEF: OpDef = OpDef {
    op_type: "TopK",
    domain: "",
    min_opset: 1,
    newest: 24,
    attributes: &["axis", "k", "largest", "sorted"],
    types: NUMERIC,
    build,
};

/// Whether a value is unordered with itself (a NaN).
#[allow(clippy::eq_op)]
fn is_nan<T: PartialEq>(v: T) -> bool {
    v != v
}

struct TopKKernel {
    k: usize,
    largest: bool,
    outer: usize,
    axis_len: usize,
    inner: usize,
}

impl TopKKernel {
    fn compute<T: Elem>(&self, x: &Tensor, outputs: &mut [Tensor]) -> Result<()> {
        let x = x.as_slice::<T>()?;
        let mut order: Vec<usize> = Vec::with_capacity(self.axis_len);
        let mut picked: Vec<(T, i64)> = Vec::with_capacity(self.outer * self.inner * self.k);
        for o in 0..self.outer {
            for i in 0..self.inner {
                let at = |k: usize| x[(o * self.axis_len + k) * self.inner + i];
                order.clear();
                order.extend(0..self.axis_len);
                // NaN sorts as the largest value, as numpy and ONNX Runtime do.
                let key = |a: &usize, b: &usize| {
                    let (va, vb) = (at(*a), at(*b));
                    let ord = match va.partial_cmp(&vb) {
                        Some(o) => o,
                        None => is_nan(va).cmp(&is_nan(vb)),
                    };
                    let ord = if self.largest { ord.reverse() } else { ord };
                    ord.then(a.cmp(b))
                };
                order.sort_by(key);
                for &k in &order[..self.k] {
                    picked.push((at(k), k as i64));
                }
            }
        }
        // picked is in (outer, inner, k) order; the outputs are (outer, k, inner).
        let (values, rest) = outputs.split_at_mut(1);
        let mut vals = values.first_mut().map(|t| t.as_mut_slice::<T>());
        let mut idxs = rest.first_mut().map(|t| t.as_mut_slice::<i64>());
        for o in 0..self.outer {
            for i in 0..self.inner {
                for j in 0..self.k {
                    let (v, k) = picked[(o * self.inner + i) * self.k + j];
                    let at = (o * self.k + j) * self.inner + i;
                    if let Some(Ok(vs)) = vals.as_mut() {
                        vs[at] = v;
                    }
                    if let Some(Ok(is)) = idxs.as_mut() {
                        is[at] = k;
                    }
                }
            }
        }
        Ok(())
    }
}

impl Kernel for TopKKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_numeric!(x.dtype(), T => self.compute::<T>(x, outputs),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    if ctx.node.outputs.len() != 2 || ctx.node.outputs.iter().any(Option::is_none) {
        return Err(ctx.err(
            Status::UnsupportedAttribute,
            "both outputs (values, indices) must be present",
        ));
    }
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    if rank == 0 {
        return Err(ctx.err(
            Status::InvalidModel,
            "the input is a scalar, with no axis to sort along",
        ));
    }
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, rank)?;
    let k = if ctx.opset >= 10 {
        ctx.arity(2, 2, 2, 2)?;
        let k = ctx.const_ints(1, "k")?;
        *k.first()
            .ok_or_else(|| ctx.err(Status::InvalidModel, "k is empty"))?
    } else {
        ctx.arity(1, 1, 2, 2)?;
        ctx.attr_int("k", -1)?
    };
    if k < 0 || k as usize > x.shape[axis] {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("k = {k} for an axis of size {}", x.shape[axis]),
        ));
    }
    let mut out = x.shape.to_vec();
    out[axis] = k as usize;
    Ok(Built {
        outputs: vec![(x.dtype, out.clone()), (DataType::I64, out)],
        kernel: Box::new(TopKKernel {
            k: k as usize,
            largest: ctx.attr_int("largest", 1)? != 0,
            outer: x.shape[..axis].iter().product(),
            axis_len: x.shape[axis],
            inner: x.shape[axis + 1..].iter().product(),
        }),
    })
}
