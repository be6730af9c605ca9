//! `Transpose`: permutes the axes (reverses them by default).

use super::{BuildCtx, Built, Kernel, OpDef, ANY};
use crate::error::{Error, Result, Status};
use crate::ir::{Tensor, TensorData};
use crate::kernels::transpose::transpose;

/// The `Transpose` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Transpose",
    domain: "",
    min_opset: 1,
    attributes: &["perm"],
    types: ANY,
    build,
};

struct TransposeKernel {
    shape: Vec<usize>,
    perm: Vec<usize>,
}

impl Kernel for TransposeKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "missing input"))?;
        match (&x.data, &mut outputs[0].data) {
            (TensorData::F32(a), TensorData::F32(o)) => transpose(a, &self.shape, &self.perm, o),
            (TensorData::F64(a), TensorData::F64(o)) => transpose(a, &self.shape, &self.perm, o),
            (TensorData::I8(a), TensorData::I8(o)) => transpose(a, &self.shape, &self.perm, o),
            (TensorData::U8(a), TensorData::U8(o)) => transpose(a, &self.shape, &self.perm, o),
            (TensorData::I32(a), TensorData::I32(o)) => transpose(a, &self.shape, &self.perm, o),
            (TensorData::I64(a), TensorData::I64(o)) => transpose(a, &self.shape, &self.perm, o),
            (TensorData::Bool(a), TensorData::Bool(o)) => transpose(a, &self.shape, &self.perm, o),
            _ => return Err(Error::new(Status::InternalError, "Transpose type mismatch")),
        }
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let perm: Vec<usize> = match ctx.attr_ints("perm")? {
        None => (0..rank).rev().collect(),
        Some(p) => {
            let mut seen = vec![false; rank];
            let mut perm = Vec::with_capacity(rank);
            for &a in p {
                let a = ctx.axis(a, rank)?;
                if std::mem::replace(&mut seen[a], true) {
                    return Err(
                        ctx.err(Status::InvalidModel, format!("perm {p:?} repeats an axis"))
                    );
                }
                perm.push(a);
            }
            if perm.len() != rank {
                return Err(ctx.err(
                    Status::InvalidModel,
                    format!("perm {p:?} does not fit rank {rank}"),
                ));
            }
            perm
        }
    };
    let out_shape = perm.iter().map(|&p| x.shape[p]).collect();
    Ok(Built {
        outputs: vec![(x.dtype, out_shape)],
        kernel: Box::new(TransposeKernel {
            shape: x.shape.to_vec(),
            perm,
        }),
    })
}
