//! `Concat`: joins tensors of one type along an axis.

use super::{BuildCtx, Built, Kernel, OpDef, STORED};
use crate::error::{Error, Result, Status};
use crate::ir::Tensor;

/// The `Concat` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Concat",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["axis"],
    types: STORED,
    build,
};

struct ConcatKernel {
    /// Elements each input contributes per outer index.
    chunks: Vec<usize>,
}

fn gather<T: Copy>(parts: &[&[T]], chunks: &[usize], out: &mut [T]) {
    let row: usize = chunks.iter().sum();
    if row == 0 {
        return;
    }
    for (o, dst) in out.chunks_mut(row).enumerate() {
        let mut at = 0;
        for (p, &c) in parts.iter().zip(chunks) {
            dst[at..at + c].copy_from_slice(&p[o * c..(o + 1) * c]);
            at += c;
        }
    }
}

impl Kernel for ConcatKernel {
    fn overwrites_outputs(&self) -> bool {
        // Each output row is the inputs' rows side by side, their lengths summing to the row.
        true
    }

    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let dtype = outputs[0].dtype();
        crate::dispatch_stored!(dtype, T => {
            let parts = inputs
                .iter()
                .map(|t| {
                    t.ok_or_else(|| Error::new(Status::InternalError, "Concat input missing"))?
                        .as_slice::<T>()
                })
                .collect::<Result<Vec<&[T]>>>()?;
            gather(&parts, &self.chunks, outputs[0].as_mut_slice::<T>()?);
            Ok(())
        }, other => Err(Error::new(Status::UnsupportedDatatype, format!("Concat of {}", other.name()))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, usize::MAX, 1, 1)?;
    let first = ctx.input(0)?;
    let rank = first.shape.len();
    if rank == 0 {
        return Err(ctx.err(
            Status::InvalidModel,
            "inputs are scalars; Concat needs rank ≥ 1",
        ));
    }
    if ctx.opset >= 4 && !ctx.node.attrs.contains_key("axis") {
        return Err(ctx.err(Status::InvalidModel, "attribute 'axis' is required"));
    }
    let axis = ctx.axis(ctx.attr_int("axis", 1)?, rank)?;
    let inner: usize = first.shape[axis + 1..].iter().product();
    let mut out_shape = first.shape.to_vec();
    out_shape[axis] = 0;
    let mut chunks = Vec::with_capacity(ctx.inputs.len());
    for i in 0..ctx.inputs.len() {
        let x = ctx.input(i)?;
        if x.dtype != first.dtype {
            return Err(ctx.err(
                Status::InvalidModel,
                format!(
                    "input {i} is {}, input 0 is {}",
                    x.dtype.name(),
                    first.dtype.name()
                ),
            ));
        }
        let same_rest =
            x.shape.len() == rank && (0..rank).all(|d| d == axis || x.shape[d] == first.shape[d]);
        if !same_rest {
            return Err(ctx.err(
                Status::InvalidModel,
                format!(
                    "input {i} has shape {:?}, incompatible with {:?} on axis {axis}",
                    x.shape, first.shape
                ),
            ));
        }
        out_shape[axis] += x.shape[axis];
        chunks.push(x.shape[axis] * inner);
    }
    Ok(Built {
        outputs: vec![(first.dtype, out_shape)],
        kernel: Box::new(ConcatKernel { chunks }),
    })
}
