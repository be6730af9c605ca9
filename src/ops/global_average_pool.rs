//! `GlobalAveragePool`: the mean over all spatial positions of each channel.

use super::util::{f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::{Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::pool::global_avg_pool;

/// The `GlobalAveragePool` operator.
pub static DEF: OpDef = OpDef {
    op_type: "GlobalAveragePool",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &[],
    types: FLOAT,
    build,
};

struct GapKernel {
    planes: usize,
    plane: usize,
}

impl Kernel for GapKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        global_avg_pool(
            self.planes,
            self.plane,
            f32_of(inputs, 0)?,
            f32_out(&mut outputs[0])?,
        );
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.float_input(0)?;
    if x.shape.len() < 2 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("input of rank {} needs N and C", x.shape.len()),
        ));
    }
    let plane: usize = x.shape[2..].iter().product();
    if plane == 0 {
        return Err(ctx.err(Status::UnsupportedShape, "empty spatial dimensions"));
    }
    let mut shape = x.shape.to_vec();
    shape[2..].iter_mut().for_each(|d| *d = 1);
    Ok(Built {
        outputs: vec![(DataType::F32, shape)],
        kernel: Box::new(GapKernel {
            planes: x.shape[0] * x.shape[1],
            plane,
        }),
    })
}
