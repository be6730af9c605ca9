//! `Transpose`: permutes the axes (reverses them by default).

use super::{BuildCtx, Built, Kernel, OpDef, STORED};
use crate::error::{Error, Result, Status};
use crate::ir::Tensor;
use crate::kernels::transpose::transpose;

/// The `Transpose` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Transpose",
    domain: "",
    min_opset: 1,
    newest: 25,
    attributes: &["perm"],
    types: STORED,
    build,
};

struct TransposeKernel {
    shape: Vec<usize>,
    perm: Vec<usize>,
}

impl Kernel for TransposeKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "missing input"))?;
        crate::dispatch_stored!(x.dtype(), T => {
            transpose(x.as_slice::<T>()?, &self.shape, &self.perm, outputs[0].as_mut_slice::<T>()?);
            Ok(())
        }, other => Err(Error::new(Status::UnsupportedDatatype, format!("Transpose of {}", other.name()))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let perm: Vec<usize> = match ctx.attr_ints("perm")? {
        None => (0..rank).rev().collect(),
        Some(p) => {
            if p.len() != rank {
                return Err(ctx.err(
                    Status::InvalidModel,
                    format!("perm {p:?} does not fit rank {rank}"),
                ));
            }
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
