//! `Gather`: picks entries of the data along `axis` by index (indices normalised once when they
//! are constant, at run time otherwise).

use super::{BuildCtx, Built, Kernel, OpDef, STORED};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};

/// The `Gather` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Gather",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["axis"],
    types: STORED,
    build,
};

struct GatherKernel {
    /// Product of the dimensions before `axis`.
    outer: usize,
    /// Size of the `axis` dimension of the data.
    axis_len: usize,
    /// Product of the dimensions after `axis`.
    inner: usize,
    /// Normalised indices, when they were known while planning.
    indices: Option<Vec<usize>>,
}

/// Normalises indices against an axis of `len` (negative ones count from the end).
fn normalise(raw: &[i64], len: usize) -> Result<Vec<usize>> {
    raw.iter()
        .map(|&i| {
            let k = if i < 0 { i + len as i64 } else { i };
            if k < 0 || k >= len as i64 {
                Err(Error::new(
                    Status::InvalidShape,
                    format!("Gather index {i} is out of range for an axis of size {len}"),
                ))
            } else {
                Ok(k as usize)
            }
        })
        .collect()
}

impl GatherKernel {
    fn gather<T: Copy>(&self, indices: &[usize], data: &[T], out: &mut [T]) {
        let n = self.inner;
        if n == 0 {
            return;
        }
        let mut dst = out.chunks_mut(n);
        for o in 0..self.outer {
            for &k in indices {
                let src = (o * self.axis_len + k) * n;
                if let Some(d) = dst.next() {
                    d.copy_from_slice(&data[src..src + n]);
                }
            }
        }
    }
}

impl Kernel for GatherKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "missing input"))?;
        let run_time;
        let indices = match &self.indices {
            Some(i) => i,
            None => {
                let idx =
                    inputs[1].ok_or_else(|| Error::new(Status::InternalError, "missing input"))?;
                run_time = normalise(&idx.to_i64_vec()?, self.axis_len)?;
                &run_time
            }
        };
        crate::dispatch_stored!(x.dtype(), T => {
            self.gather(indices, x.as_slice::<T>()?, outputs[0].as_mut_slice::<T>()?);
            Ok(())
        }, other => Err(Error::new(Status::UnsupportedDatatype, format!("Gather of {}", other.name()))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    if rank == 0 {
        return Err(ctx.err(Status::InvalidModel, "data must have rank ≥ 1"));
    }
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, rank)?;
    let idx_info = ctx.input(1)?;
    if !matches!(idx_info.dtype, DataType::I32 | DataType::I64) {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("indices are {}, not int32 or int64", idx_info.dtype.name()),
        ));
    }
    let axis_len = x.shape[axis];
    let indices = match idx_info.constant {
        Some(t) => Some(
            normalise(&t.to_i64_vec()?, axis_len)
                .map_err(|e| ctx.err(Status::InvalidModel, e.message))?,
        ),
        None => None,
    };
    let mut out_shape = x.shape[..axis].to_vec();
    out_shape.extend_from_slice(idx_info.shape);
    out_shape.extend_from_slice(&x.shape[axis + 1..]);
    Ok(Built {
        outputs: vec![(x.dtype, out_shape)],
        kernel: Box::new(GatherKernel {
            outer: x.shape[..axis].iter().product(),
            axis_len,
            inner: x.shape[axis + 1..].iter().product(),
            indices,
        }),
    })
}
