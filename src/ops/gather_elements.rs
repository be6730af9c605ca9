//! `GatherElements`: `out[i…] = data[i… with index[i…] along axis]`, the output having the
//! indices' shape.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, STORED};
use crate::error::{Error, Result, Status};
use crate::ir::{row_major_strides, DataType, Elem, Tensor};

/// The `GatherElements` operator.
pub static DEF: OpDef = OpDef {
    op_type: "GatherElements",
    domain: "",
    min_opset: 11,
    newest: 13,
    attributes: &["axis"],
    types: STORED,
    build,
};

struct GatherElementsKernel {
    data_shape: Vec<usize>,
    index_shape: Vec<usize>,
    axis: usize,
}

impl GatherElementsKernel {
    fn compute<T: Elem>(&self, x: &Tensor, idx: &[i64], out: &mut Tensor) -> Result<()> {
        let x = x.as_slice::<T>()?;
        let out = out.as_mut_slice::<T>()?;
        let rank = self.data_shape.len();
        let strides = row_major_strides(&self.data_shape);
        let n = self.data_shape[self.axis] as i64;
        let mut pos = vec![0usize; rank];
        for (o, &k) in out.iter_mut().zip(idx) {
            let k = if k < 0 { k + n } else { k };
            if !(0..n).contains(&k) {
                return Err(Error::new(
                    Status::InvalidShape,
                    format!("GatherElements index {k} is out of range for size {n}"),
                ));
            }
            let mut src = 0;
            for d in 0..rank {
                let i = if d == self.axis { k as usize } else { pos[d] };
                src += i * strides[d];
            }
            *o = x[src];
            for d in (0..rank).rev() {
                pos[d] += 1;
                if pos[d] < self.index_shape[d] {
                    break;
                }
                pos[d] = 0;
            }
        }
        Ok(())
    }
}

impl Kernel for GatherElementsKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let x = inputs[0].ok_or_else(missing)?;
        let idx = inputs[1].ok_or_else(missing)?.to_i64_vec()?;
        crate::dispatch_stored!(x.dtype(), T => self.compute::<T>(x, &idx, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let x = ctx.input(0)?;
    let idx = ctx.input(1)?;
    let rank = x.shape.len();
    if idx.shape.len() != rank || rank == 0 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "indices {:?} and data {:?} differ in rank",
                idx.shape, x.shape
            ),
        ));
    }
    if !matches!(idx.dtype, DataType::I32 | DataType::I64) {
        return Err(ctx.err(Status::InvalidModel, "indices must be int32 or int64"));
    }
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, rank)?;
    if (0..rank).any(|d| d != axis && idx.shape[d] > x.shape[d]) {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("indices {:?} exceed data {:?}", idx.shape, x.shape),
        ));
    }
    Ok(Built {
        outputs: vec![(x.dtype, idx.shape.to_vec())],
        kernel: Box::new(GatherElementsKernel {
            data_shape: x.shape.to_vec(),
            index_shape: idx.shape.to_vec(),
            axis,
        }),
    })
}
