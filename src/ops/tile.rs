//! `Tile`: repeats the input `repeats[d]` times along each dimension `d`.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, STORED};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};

/// The `Tile` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Tile",
    domain: "",
    min_opset: 6,
    newest: 13,
    attributes: &[],
    types: STORED,
    build,
};

struct TileKernel {
    in_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

impl TileKernel {
    fn tile<T: Elem>(&self, x: &[T], out: &mut [T]) {
        let rank = self.in_shape.len();
        let mut idx = vec![0usize; rank];
        for o in out.iter_mut() {
            let mut src = 0;
            for (&i, &n) in idx.iter().zip(&self.in_shape) {
                src = src * n + i % n;
            }
            *o = x[src];
            for d in (0..rank).rev() {
                idx[d] += 1;
                if idx[d] < self.out_shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
}

impl Kernel for TileKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_stored!(x.dtype(), T => {
            self.tile(x.as_slice::<T>()?, outputs[0].as_mut_slice::<T>()?);
            Ok(())
        }, other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let x = ctx.input(0)?;
    let repeats = ctx.const_ints(1, "repeats")?;
    if repeats.len() != x.shape.len() || repeats.iter().any(|&r| r < 0) {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("repeats {repeats:?} for shape {:?}", x.shape),
        ));
    }
    let out_shape: Vec<usize> = x
        .shape
        .iter()
        .zip(&repeats)
        .map(|(&d, &r)| d.checked_mul(r as usize))
        .collect::<Option<_>>()
        .ok_or_else(|| ctx.err(Status::UnsupportedShape, "the tiled shape overflows"))?;
    Ok(Built {
        outputs: vec![(x.dtype, out_shape.clone())],
        kernel: Box::new(TileKernel {
            in_shape: x.shape.to_vec(),
            out_shape,
        }),
    })
}
