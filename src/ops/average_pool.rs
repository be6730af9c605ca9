//! `AveragePool`: the mean over each window, counting padding or not (`count_include_pad`).

use super::max_pool::{pool_params, pool_windows};
use super::util::{f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::Result;
use crate::ir::{DataType, Tensor};
use crate::kernels::pool::{avg_pool2d_with, Pool2dParams, PoolWindows};

/// The `AveragePool` operator.
pub static DEF: OpDef = OpDef {
    op_type: "AveragePool",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &[
        "auto_pad",
        "ceil_mode",
        "count_include_pad",
        "dilations",
        "kernel_shape",
        "pads",
        "strides",
    ],
    types: FLOAT,
    build,
};

struct AvgPoolKernel {
    params: Pool2dParams,
    windows: PoolWindows,
}

impl Kernel for AvgPoolKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        avg_pool2d_with(
            &self.params,
            &self.windows,
            f32_of(inputs, 0)?,
            f32_out(&mut outputs[0])?,
        );
        Ok(())
    }

    fn overwrites_outputs(&self) -> bool {
        true
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    if ctx.input(0)?.shape.len() > 4 {
        return super::window_nd::build_avg_pool(ctx);
    }
    let (params, shape) = pool_params(ctx)?;
    let count_include_pad = ctx.attr_int("count_include_pad", 0)? != 0;
    let windows = pool_windows(ctx, &params, &shape, count_include_pad)?;
    Ok(Built {
        outputs: vec![(DataType::F32, shape)],
        kernel: Box::new(AvgPoolKernel { params, windows }),
    })
}
