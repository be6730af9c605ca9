//! `Slice`: takes `starts[i]..ends[i]` by `steps[i]` along `axes[i]` (attributes before opset
//! 10, inputs from 10), with ONNX's clamping of out-of-range bounds for either step sign.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, STORED};
use crate::error::{Error, Result, Status};
use crate::ir::Tensor;

/// The `Slice` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Slice",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["axes", "ends", "starts"],
    types: STORED,
    build,
};

/// A strided window of a row-major tensor: per dimension a start and a (possibly negative)
/// step; the output shape gives the count.
pub struct Window {
    /// The input's shape.
    pub in_shape: Vec<usize>,
    /// First index per dimension.
    pub starts: Vec<usize>,
    /// Step per dimension.
    pub steps: Vec<isize>,
    /// The output's shape.
    pub out_shape: Vec<usize>,
}

impl Window {
    /// Copies the window of `x` into `out`.
    pub fn copy<T: Copy>(&self, x: &[T], out: &mut [T]) {
        let rank = self.in_shape.len();
        if out.is_empty() {
            return;
        }
        if rank == 0 {
            out[0] = x[0];
            return;
        }
        let mut strides = vec![1isize; rank];
        for d in (0..rank - 1).rev() {
            strides[d] = strides[d + 1] * self.in_shape[d + 1] as isize;
        }
        let inner = self.out_shape[rank - 1];
        let (inner_start, inner_step) = (self.starts[rank - 1] as isize, self.steps[rank - 1]);
        let mut idx = vec![0usize; rank - 1];
        for row in out.chunks_mut(inner) {
            let mut base = inner_start * strides[rank - 1];
            for d in 0..rank - 1 {
                base += (self.starts[d] as isize + idx[d] as isize * self.steps[d]) * strides[d];
            }
            if inner_step == 1 {
                let b = base as usize;
                row.copy_from_slice(&x[b..b + inner]);
            } else {
                for (j, o) in row.iter_mut().enumerate() {
                    *o = x[(base + j as isize * inner_step) as usize];
                }
            }
            for d in (0..rank - 1).rev() {
                idx[d] += 1;
                if idx[d] < self.out_shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
}

impl Kernel for Window {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_stored!(x.dtype(), T => {
            self.copy(x.as_slice::<T>()?, outputs[0].as_mut_slice::<T>()?);
            Ok(())
        }, other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

/// The clamped start and element count of `start..end` by `step` over a dimension of `dim`.
fn clamp(start: i64, end: i64, step: i64, dim: usize) -> (usize, usize) {
    let d = dim as i64;
    let fix = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let (s, e) = (fix(start), fix(end));
    // ceil(span / |step|) in i128: a step near i64::MAX or i64::MIN must not overflow.
    let stride = i128::from(step.unsigned_abs());
    let count = |span: i64| ((i128::from(span) + stride - 1) / stride) as usize;
    if step > 0 {
        let s = s.clamp(0, d);
        let e = e.clamp(0, d);
        let n = if e > s { count(e - s) } else { 0 };
        (s as usize, n)
    } else if d == 0 {
        // Backwards over an empty dimension: nothing (and `0..=-1` is no range to clamp to).
        (0, 0)
    } else {
        let s = s.clamp(0, d - 1);
        let e = e.clamp(-1, d - 1);
        let n = if s > e { count(s - e) } else { 0 };
        (s as usize, n)
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let (starts, ends, axes, steps) = if ctx.opset >= 10 {
        ctx.arity(3, 5, 1, 1)?;
        let starts = ctx.const_ints(1, "starts")?;
        let ends = ctx.const_ints(2, "ends")?;
        let axes = match ctx.opt_input(3) {
            Some(_) => Some(ctx.const_ints(3, "axes")?),
            None => None,
        };
        let steps = match ctx.opt_input(4) {
            Some(_) => Some(ctx.const_ints(4, "steps")?),
            None => None,
        };
        (starts, ends, axes, steps)
    } else {
        ctx.arity(1, 1, 1, 1)?;
        let req = |n: &str| -> Result<Vec<i64>> {
            Ok(ctx
                .attr_ints(n)?
                .ok_or_else(|| ctx.err(Status::InvalidModel, format!("'{n}' is required")))?
                .to_vec())
        };
        (
            req("starts")?,
            req("ends")?,
            ctx.attr_ints("axes")?.map(<[i64]>::to_vec),
            None,
        )
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(ctx.err(
            Status::InvalidModel,
            "starts, ends, axes and steps differ in length",
        ));
    }
    let mut w = Window {
        in_shape: x.shape.to_vec(),
        starts: vec![0; rank],
        steps: vec![1; rank],
        out_shape: x.shape.to_vec(),
    };
    if rank == 0 && !starts.is_empty() {
        return Err(ctx.err(
            Status::InvalidModel,
            "the input is a scalar, with no axis to slice",
        ));
    }
    let mut seen = vec![false; rank];
    for i in 0..starts.len() {
        let a = ctx.axis(axes[i], rank)?;
        if std::mem::replace(&mut seen[a], true) {
            return Err(ctx.err(Status::InvalidModel, format!("axis {} repeats", axes[i])));
        }
        if steps[i] == 0 {
            return Err(ctx.err(Status::InvalidModel, "a step is zero"));
        }
        let (s, n) = clamp(starts[i], ends[i], steps[i], x.shape[a]);
        w.starts[a] = s;
        w.steps[a] = steps[i] as isize;
        w.out_shape[a] = n;
    }
    Ok(Built {
        outputs: vec![(x.dtype, w.out_shape.clone())],
        kernel: Box::new(w),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamping_follows_the_spec() {
        assert_eq!(clamp(1, 1000, 1, 5), (1, 4));
        assert_eq!(clamp(-2, i64::MAX, 1, 5), (3, 2));
        assert_eq!(clamp(-1, i64::MIN, -1, 5), (4, 5));
        assert_eq!(clamp(4, 0, -2, 5), (4, 2));
        assert_eq!(clamp(3, 2, 1, 5), (3, 0));
        assert_eq!(clamp(0, 5, 3, 5), (0, 2));
        // Steps at the ends of i64 take one element (once: `span + step - 1` overflowed).
        assert_eq!(clamp(0, 5, i64::MAX, 5), (0, 1));
        assert_eq!(clamp(4, i64::MIN, i64::MIN, 5), (4, 1));
        // Backwards over an empty dimension (once: `clamp(0, -1)` panicked).
        assert_eq!(clamp(0, -10, -1, 0), (0, 0));
        assert_eq!(clamp(-1, i64::MIN, -1, 0), (0, 0));
    }

    #[test]
    fn window_copies_reversed_and_strided() {
        // x: 3×4 = 0..12; rows 2,0 (step -2), columns 1..4 step 2
        let x: Vec<i32> = (0..12).collect();
        let w = Window {
            in_shape: vec![3, 4],
            starts: vec![2, 1],
            steps: vec![-2, 2],
            out_shape: vec![2, 2],
        };
        let mut out = [0; 4];
        w.copy(&x, &mut out);
        assert_eq!(out, [9, 11, 1, 3]);
    }
}
