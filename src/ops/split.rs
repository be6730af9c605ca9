//! `Split`: cuts the input along `axis` into pieces whose sizes come from the `split` attribute
//! (before opset 13), the `split` input (from 13), `num_outputs` (from 18) or equal parts.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, STORED};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};

/// The `Split` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Split",
    domain: "",
    min_opset: 2,
    newest: 18,
    attributes: &["axis", "split", "num_outputs"],
    types: STORED,
    build,
};

struct SplitKernel {
    /// Product of the dimensions before the axis.
    outer: usize,
    /// Elements per piece per outer index (piece size × inner).
    chunks: Vec<usize>,
}

impl SplitKernel {
    fn split<T: Elem>(&self, x: &[T], outputs: &mut [Tensor]) -> Result<()> {
        let row: usize = self.chunks.iter().sum();
        let mut at = 0;
        for (c, out) in self.chunks.iter().zip(outputs.iter_mut()) {
            let dst = out.as_mut_slice::<T>()?;
            for o in 0..self.outer {
                let src = o * row + at;
                dst[o * c..(o + 1) * c].copy_from_slice(&x[src..src + c]);
            }
            at += c;
        }
        Ok(())
    }
}

impl Kernel for SplitKernel {
    fn overwrites_outputs(&self) -> bool {
        // Output `i` is `outer` pieces of `chunks[i]` elements: all of it.
        true
    }

    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_stored!(x.dtype(), T => self.split(x.as_slice::<T>()?, outputs),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 2, 1, usize::MAX)?;
    if ctx.node.outputs.iter().any(Option::is_none) {
        return Err(ctx.err(
            Status::UnsupportedAttribute,
            "omitted Split outputs are not supported",
        ));
    }
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    if rank == 0 {
        return Err(ctx.err(Status::InvalidModel, "cannot split a scalar"));
    }
    let axis = ctx.axis(ctx.attr_int("axis", 0)?, rank)?;
    let n_out = ctx.node.outputs.len();
    let len = x.shape[axis];
    let sizes: Vec<usize> = {
        let given = if ctx.opset >= 13 {
            match ctx.opt_input(1) {
                Some(_) => Some(ctx.const_ints(1, "split")?),
                None => None,
            }
        } else {
            ctx.attr_ints("split")?.map(<[i64]>::to_vec)
        };
        match given {
            Some(s) => {
                if s.iter().any(|&v| v < 0) || s.len() != n_out {
                    return Err(ctx.err(
                        Status::InvalidModel,
                        format!("split {s:?} for {n_out} outputs"),
                    ));
                }
                s.iter().map(|&v| v as usize).collect()
            }
            None => {
                // Equal parts; from opset 18 (num_outputs) the last one may be smaller.
                let piece = len.div_ceil(n_out.max(1));
                if ctx.opset < 18 && len % n_out != 0 {
                    return Err(ctx.err(
                        Status::InvalidModel,
                        format!("{len} does not split into {n_out} equal parts"),
                    ));
                }
                (0..n_out)
                    .map(|i| piece.min(len.saturating_sub(i * piece)))
                    .collect()
            }
        }
    };
    if sizes.iter().sum::<usize>() != len {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("split sizes {sizes:?} do not add up to {len}"),
        ));
    }
    let inner: usize = x.shape[axis + 1..].iter().product();
    let outputs = sizes
        .iter()
        .map(|&s| {
            let mut shape = x.shape.to_vec();
            shape[axis] = s;
            (x.dtype, shape)
        })
        .collect();
    Ok(Built {
        outputs,
        kernel: Box::new(SplitKernel {
            outer: x.shape[..axis].iter().product(),
            chunks: sizes.iter().map(|s| s * inner).collect(),
        }),
    })
}
