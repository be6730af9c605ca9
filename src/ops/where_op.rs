//! `Where`: picks from `X` where the condition holds, from `Y` elsewhere, with numpy
//! broadcasting of all three inputs.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, ANY};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};
use crate::kernels::broadcast::{broadcast_shapes, map3};

/// The `Where` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Where",
    domain: "",
    min_opset: 9,
    newest: 16,
    attributes: &[],
    types: &[DataType::Bool],
    build,
};

struct WhereKernel {
    shapes: [Vec<usize>; 3],
    out_shape: Vec<usize>,
}

impl WhereKernel {
    fn compute<T: Elem>(&self, c: &Tensor, x: &Tensor, y: &Tensor, out: &mut Tensor) -> Result<()> {
        map3(
            (c.as_slice::<bool>()?, &self.shapes[0]),
            (x.as_slice::<T>()?, &self.shapes[1]),
            (y.as_slice::<T>()?, &self.shapes[2]),
            out.as_mut_slice::<T>()?,
            &self.out_shape,
            |c, a, b| if c { a } else { b },
        );
        Ok(())
    }
}

impl Kernel for WhereKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "Where input missing");
        let c = inputs[0].ok_or_else(missing)?;
        let x = inputs[1].ok_or_else(missing)?;
        let y = inputs[2].ok_or_else(missing)?;
        crate::dispatch_stored!(x.dtype(), T => self.compute::<T>(c, x, y, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(3, 3, 1, 1)?;
    let (c, x, y) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    if c.dtype != DataType::Bool {
        return Err(ctx.err(Status::InvalidModel, "the condition must be bool"));
    }
    if x.dtype != y.dtype || !ANY.contains(&x.dtype) {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("X is {}, Y is {}", x.dtype.name(), y.dtype.name()),
        ));
    }
    let out_shape = broadcast_shapes(&[c.shape, x.shape, y.shape]).ok_or_else(|| {
        ctx.err(
            Status::InvalidModel,
            format!(
                "shapes {:?}, {:?} and {:?} do not broadcast",
                c.shape, x.shape, y.shape
            ),
        )
    })?;
    Ok(Built {
        outputs: vec![(x.dtype, out_shape.clone())],
        kernel: Box::new(WhereKernel {
            shapes: [c.shape.to_vec(), x.shape.to_vec(), y.shape.to_vec()],
            out_shape,
        }),
    })
}
