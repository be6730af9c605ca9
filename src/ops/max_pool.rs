//! `MaxPool`: the maximum over each window (padding never wins), 1-D and 2-D.

use super::spatial::{nchw, out_shape, window};
use super::util::{f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::{Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::pool::{max_pool2d_with, Pool2dParams, PoolWindows};

/// The `MaxPool` operator.
pub static DEF: OpDef = OpDef {
    op_type: "MaxPool",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &[
        "auto_pad",
        "ceil_mode",
        "dilations",
        "kernel_shape",
        "pads",
        "storage_order",
        "strides",
    ],
    types: FLOAT,
    build,
};

/// Pooling parameters shared by MaxPool and AveragePool.
pub fn pool_params(ctx: &BuildCtx) -> Result<(Pool2dParams, Vec<usize>)> {
    let x = ctx.float_input(0)?;
    let (n, c, hw, rank) = nchw(ctx, x.shape)?;
    let kernel: Vec<usize> = match ctx.attr_ints("kernel_shape")? {
        Some(k) if k.iter().all(|&v| v >= 1) => k.iter().map(|&v| v as usize).collect(),
        Some(k) => {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("kernel_shape {k:?} must be positive"),
            ))
        }
        None => return Err(ctx.err(Status::InvalidModel, "attribute 'kernel_shape' is required")),
    };
    let ceil_mode = ctx.attr_int("ceil_mode", 0)? != 0;
    let win = window(ctx, hw, rank, &kernel, ceil_mode)?;
    let p = Pool2dParams {
        batch: n,
        channels: c,
        in_h: hw[0],
        in_w: hw[1],
        kernel_h: win.kernel[0],
        kernel_w: win.kernel[1],
        stride_h: win.strides[0],
        stride_w: win.strides[1],
        pad_top: win.pads[0],
        pad_left: win.pads[1],
        pad_bottom: win.pads[2],
        pad_right: win.pads[3],
        dilation_h: win.dilations[0],
        dilation_w: win.dilations[1],
        out_h: win.out[0],
        out_w: win.out[1],
    };
    Ok((p, out_shape(n, c, win.out, rank)))
}

/// The windows of `p` (see [`PoolWindows`]), once the output (`out_shape`) and the windows'
/// tables (two ranges per output row and column, twice when the pads count) are known to fit in
/// memory.
pub fn pool_windows(
    ctx: &BuildCtx,
    p: &Pool2dParams,
    out_shape: &[usize],
    count_include_pad: bool,
) -> Result<PoolWindows> {
    ctx.check_fits(crate::ir::DataType::F32, out_shape)?;
    let ranges = p.out_h.saturating_add(p.out_w).saturating_mul(4);
    ctx.check_fits(crate::ir::DataType::I64, &[ranges])?;
    Ok(PoolWindows::new(p, count_include_pad))
}

struct MaxPoolKernel(PoolWindows, Pool2dParams);

impl Kernel for MaxPoolKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        max_pool2d_with(
            &self.1,
            &self.0,
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
    ctx.arity(1, 1, 1, 2)?;
    if ctx.node.outputs.get(1).is_some_and(|o| o.is_some()) || ctx.input(0)?.shape.len() > 4 {
        return super::window_nd::build_max_pool(ctx);
    }
    let (p, shape) = pool_params(ctx)?;
    let windows = pool_windows(ctx, &p, &shape, false)?;
    Ok(Built {
        outputs: vec![(DataType::F32, shape)],
        kernel: Box::new(MaxPoolKernel(windows, p)),
    })
}
