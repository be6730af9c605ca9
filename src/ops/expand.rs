//! `Expand`: broadcasts the input to the shape given by its second input's contents (numpy
//! rules: the result has the broadcast of both shapes).

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, STORED};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};
use crate::kernels::broadcast::{broadcast_shapes, map1};

/// The `Expand` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Expand",
    domain: "",
    min_opset: 8,
    newest: 13,
    attributes: &[],
    types: STORED,
    build,
};

/// Copies `x` (of `in_shape`) repeated along broadcast dimensions into an output of `out_shape`.
pub struct BroadcastCopy {
    /// The input's shape.
    pub in_shape: Vec<usize>,
    /// The output's shape.
    pub out_shape: Vec<usize>,
}

impl BroadcastCopy {
    fn copy<T: Elem>(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        map1(
            (x.as_slice::<T>()?, &self.in_shape),
            out.as_mut_slice::<T>()?,
            &self.out_shape,
            |v| v,
        );
        Ok(())
    }
}

impl Kernel for BroadcastCopy {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_stored!(x.dtype(), T => self.copy::<T>(x, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let x = ctx.input(0)?;
    let target = ctx.const_dims(1, "shape")?;
    let out_shape = broadcast_shapes(&[x.shape, &target]).ok_or_else(|| {
        ctx.err(
            Status::InvalidModel,
            format!("{:?} does not broadcast to {target:?}", x.shape),
        )
    })?;
    Ok(Built {
        outputs: vec![(x.dtype, out_shape.clone())],
        kernel: Box::new(BroadcastCopy {
            in_shape: x.shape.to_vec(),
            out_shape,
        }),
    })
}
