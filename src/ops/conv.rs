//! `Conv`: 1-D and 2-D convolution, NCHW, with pads, strides, dilations and groups (depthwise
//! included). Constant weights are prepacked once at planning time.

use super::spatial::{nchw, out_shape, window};
use super::util::{f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::activation::Activation;
use crate::kernels::conv::{Conv2d, Conv2dParams, ConvFilters};

/// The `Conv` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Conv",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &[
        "auto_pad",
        "dilations",
        "group",
        "kernel_shape",
        "pads",
        "strides",
    ],
    types: FLOAT,
    build,
};

enum Weights {
    Packed(Conv2d),
    AtRunTime(Conv2dParams),
}

/// `FusedConv` (internal): a `Conv` whose following activation runs in its write-back.
pub static FUSED_DEF: OpDef = OpDef {
    op_type: "FusedConv",
    domain: super::INTERNAL_DOMAIN,
    min_opset: 1,
    newest: 1,
    attributes: &[
        "auto_pad",
        "dilations",
        "group",
        "kernel_shape",
        "pads",
        "strides",
        "activation",
        "activation_params",
    ],
    types: FLOAT,
    build: build_fused,
};

struct ConvKernel {
    weights: Weights,
    activation: Activation,
}

impl Kernel for ConvKernel {
    fn overwrites_outputs(&self) -> bool {
        true
    }

    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let out = f32_out(&mut outputs[0])?;
        match &self.weights {
            Weights::Packed(conv) => conv.run(x, out, self.activation),
            Weights::AtRunTime(p) => {
                let w = f32_of(inputs, 1)?;
                let b = match inputs.get(2).copied().flatten() {
                    Some(t) => Some(t.as_f32()?),
                    None => None,
                };
                Conv2d::new(*p, w, b)
                    .map_err(|e| Error::new(Status::InvalidModel, e.message))?
                    .run(x, out, self.activation)
            }
        }
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    build_with(ctx, Activation::None)
}

fn build_fused(ctx: &BuildCtx) -> Result<Built> {
    build_with(ctx, super::fused_activation(ctx)?)
}

fn build_with(ctx: &BuildCtx, activation: Activation) -> Result<Built> {
    ctx.arity(2, 3, 1, 1)?;
    if ctx.input(0)?.shape.len() > 4 {
        return super::window_nd::build_conv(ctx, activation);
    }
    let x = ctx.float_input(0)?;
    let w = ctx.float_input(1)?;
    let (n, c, hw, rank) = nchw(ctx, x.shape)?;
    if w.shape.len() != x.shape.len() {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "weights of shape {:?} do not fit input {:?}",
                w.shape, x.shape
            ),
        ));
    }
    let group = ctx.attr_int("group", 1)?;
    if group < 1 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("group {group} must be positive"),
        ));
    }
    let group = group as usize;
    let m = w.shape[0];
    if c % group != 0 || m % group != 0 || w.shape[1] * group != c {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "{c} input channels, {m} output channels and weights {:?} do not fit group {group}",
                w.shape
            ),
        ));
    }
    let kernel: Vec<usize> = w.shape[2..].to_vec();
    if let Some(ks) = ctx.attr_ints("kernel_shape")? {
        if ks.len() != kernel.len()
            || ks
                .iter()
                .zip(&kernel)
                .any(|(&a, &b)| a < 0 || a as usize != b)
        {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("kernel_shape {ks:?} contradicts weights {:?}", w.shape),
            ));
        }
    }
    let win = window(ctx, hw, rank, &kernel, false)?;
    let bias = match ctx.opt_input(2) {
        Some(_) => {
            let b = ctx.float_input(2)?;
            if b.shape != [m] {
                return Err(ctx.err(
                    Status::InvalidModel,
                    format!("bias of shape {:?}, expected [{m}]", b.shape),
                ));
            }
            Some(b)
        }
        None => None,
    };
    let params = Conv2dParams {
        batch: n,
        in_channels: c,
        in_h: hw[0],
        in_w: hw[1],
        out_channels: m,
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
        groups: group,
    };
    let pack = |b: Option<&[f32]>| -> Result<Weights> {
        let wt = w.constant.expect("checked by the caller").as_f32()?;
        let isa = crate::kernels::cpu::isa();
        let tag = format!(
            "conv-filters {isa:?} m{m} c{c} g{group} k{}x{}",
            params.kernel_h, params.kernel_w
        );
        let filters = ctx.prepared(1, &tag, || {
            ConvFilters::prepare(isa, &params, wt)
                .map_err(|e| ctx.err(Status::InvalidModel, e.message))
        })?;
        Conv2d::with_filters(isa, params, filters, b)
            .map(Weights::Packed)
            .map_err(|e| ctx.err(Status::InvalidModel, e.message))
    };
    let weights = match (w.constant, bias.map(|b| b.constant)) {
        (Some(_), None) => pack(None)?,
        (Some(_), Some(Some(bt))) => pack(Some(bt.as_f32()?))?,
        _ => Weights::AtRunTime(params),
    };
    Ok(Built {
        outputs: vec![(DataType::F32, out_shape(n, m, win.out, rank))],
        kernel: Box::new(ConvKernel {
            weights,
            activation,
        }),
    })
}
