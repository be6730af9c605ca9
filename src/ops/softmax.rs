//! `Softmax`: normalised exponentials along one axis (opset ≥ 13), or over the 2-D coercion of
//! the input at `axis` (opset < 13).

use super::util::{f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::Result;
use crate::ir::{DataType, Tensor};
use crate::kernels::softmax::softmax;

/// The `Softmax` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Softmax",
    domain: "",
    min_opset: 1,
    attributes: &["axis"],
    types: FLOAT,
    build,
};

struct SoftmaxKernel {
    outer: usize,
    axis_len: usize,
    inner: usize,
}

impl Kernel for SoftmaxKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        softmax(
            f32_of(inputs, 0)?,
            f32_out(&mut outputs[0])?,
            self.outer,
            self.axis_len,
            self.inner,
        );
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.float_input(0)?;
    let rank = x.shape.len();
    let (outer, axis_len, inner) = if rank == 0 {
        (1, 1, 1)
    } else if ctx.opset >= 13 {
        let axis = ctx.axis(ctx.attr_int("axis", -1)?, rank)?;
        (
            x.shape[..axis].iter().product(),
            x.shape[axis],
            x.shape[axis + 1..].iter().product(),
        )
    } else {
        let axis = ctx.axis(ctx.attr_int("axis", 1)?, rank)?;
        (
            x.shape[..axis].iter().product(),
            x.shape[axis..].iter().product(),
            1,
        )
    };
    Ok(Built {
        outputs: vec![(DataType::F32, x.shape.to_vec())],
        kernel: Box::new(SoftmaxKernel {
            outer,
            axis_len,
            inner,
        }),
    })
}
