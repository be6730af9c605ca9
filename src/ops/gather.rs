//! `Gather`: picks entries of the data along `axis` by index (indices known while planning).

use super::{BuildCtx, Built, Kernel, OpDef, ANY};
use crate::error::{Error, Result, Status};
use crate::ir::{Tensor, TensorData};

/// The `Gather` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Gather",
    domain: "",
    min_opset: 1,
    attributes: &["axis"],
    types: ANY,
    build,
};

struct GatherKernel {
    /// Product of the dimensions before `axis`.
    outer: usize,
    /// Size of the `axis` dimension of the data.
    axis_len: usize,
    /// Product of the dimensions after `axis`.
    inner: usize,
    /// Normalised (non-negative) indices, flattened.
    indices: Vec<usize>,
}

impl GatherKernel {
    fn gather<T: Copy>(&self, data: &[T], out: &mut [T]) {
        let n = self.inner;
        if n == 0 {
            return;
        }
        let mut dst = out.chunks_mut(n);
        for o in 0..self.outer {
            for &k in &self.indices {
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
        match (&x.data, &mut outputs[0].data) {
            (TensorData::F32(a), TensorData::F32(o)) => self.gather(a, o),
            (TensorData::F64(a), TensorData::F64(o)) => self.gather(a, o),
            (TensorData::I8(a), TensorData::I8(o)) => self.gather(a, o),
            (TensorData::U8(a), TensorData::U8(o)) => self.gather(a, o),
            (TensorData::I32(a), TensorData::I32(o)) => self.gather(a, o),
            (TensorData::I64(a), TensorData::I64(o)) => self.gather(a, o),
            (TensorData::Bool(a), TensorData::Bool(o)) => self.gather(a, o),
            _ => return Err(Error::new(Status::InternalError, "Gather type mismatch")),
        }
        Ok(())
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
    let raw = ctx
        .const_input(1, "indices")?
        .to_i64_vec()
        .map_err(|e| ctx.err(e.status, e.message))?;
    let axis_len = x.shape[axis];
    let mut indices = Vec::with_capacity(raw.len());
    for &i in &raw {
        let k = if i < 0 { i + axis_len as i64 } else { i };
        if k < 0 || k >= axis_len as i64 {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("index {i} is out of range for axis {axis} of size {axis_len}"),
            ));
        }
        indices.push(k as usize);
    }
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
