//! `Conv`: 1-D and 2-D convolution, NCHW, with pads, strides, dilations and groups (depthwise
//! included). Constant weights are prepacked once at planning time.

use super::spatial::{nchw, out_shape, window};
use super::util::{f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor, TensorData};
use crate::kernels::activation::Activation;
use crate::kernels::conv::{Conv2d, Conv2dParams, ConvFilters};
use crate::kernels::elementwise::{self, BinaryOp};

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

/// `FusedConv` (internal): a `Conv` whose following activation, and optionally a residual
/// `Add` before it, run in its write-back: `Y = act(Conv(X, W, B) + Z)` with the optional
/// fourth input `Z`.
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

/// How a fused residual input meets the convolution's output.
pub(super) enum Residual {
    /// No residual input.
    None,
    /// Of the convolution's output shape: added in the write-back.
    Same,
    /// Broadcast against it (numpy rules): the convolution runs into a scratch buffer, then
    /// the addition and the activation make the output.
    Broadcast {
        conv: Vec<usize>,
        z: Vec<usize>,
        out: Vec<usize>,
    },
}

struct ConvKernel {
    weights: Weights,
    residual: Residual,
    activation: Activation,
}

impl Kernel for ConvKernel {
    fn overwrites_outputs(&self) -> bool {
        true
    }

    fn reads_input(&self, index: usize) -> bool {
        // Prepared filters hold the weights and a copy of the bias.
        !(matches!(self.weights, Weights::Packed(_)) && (index == 1 || index == 2))
    }

    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let out = f32_out(&mut outputs[0])?;
        let at_run_time;
        let conv = match &self.weights {
            Weights::Packed(conv) => conv,
            Weights::AtRunTime(p) => {
                let w = f32_of(inputs, 1)?;
                let b = match inputs.get(2).copied().flatten() {
                    Some(t) => Some(t.as_f32()?),
                    None => None,
                };
                at_run_time = Conv2d::new(*p, w, b)
                    .map_err(|e| Error::new(Status::InvalidModel, e.message))?;
                &at_run_time
            }
        };
        match &self.residual {
            Residual::None => conv.run(x, out, self.activation),
            Residual::Same => {
                let z = f32_of(inputs, 3)?;
                conv.run_with_residual(x, out, Some(z), self.activation)
            }
            Residual::Broadcast { .. } => {
                let z = f32_of(inputs, 3)?;
                self.residual.broadcast(z, out, self.activation, |y| {
                    conv.run(x, y, Activation::None)
                })?;
            }
        }
        Ok(())
    }
}

impl Residual {
    /// For [`Residual::Broadcast`]: `out = act(y + z)` (numpy broadcasting), `y` the
    /// convolution's output, which `compute` writes into a buffer of its own shape. Does
    /// nothing for the other kinds.
    pub(super) fn broadcast(
        &self,
        z: &[f32],
        out: &mut [f32],
        act: Activation,
        compute: impl FnOnce(&mut [f32]),
    ) -> Result<()> {
        let Residual::Broadcast {
            conv: cs,
            z: zs,
            out: os,
        } = self
        else {
            return Ok(());
        };
        let n = cs.iter().product();
        let mut y = Tensor::new(cs.clone(), TensorData::zeros(DataType::F32, n)?)?;
        let y = f32_out(&mut y)?;
        compute(y);
        elementwise::binary(BinaryOp::Add, y, cs, z, zs, out, os);
        act.apply(out);
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 3, 1, 1)?;
    build_with(ctx, Activation::None)
}

fn build_fused(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 4, 1, 1)?;
    build_with(ctx, super::fused_activation(ctx)?)
}

/// How the optional residual input `index` meets a convolution output of shape `conv`.
pub(super) fn residual_of(ctx: &BuildCtx, conv: &[usize], index: usize) -> Result<Residual> {
    if ctx.opt_input(index).is_none() {
        return Ok(Residual::None);
    }
    let z = ctx.float_input(index)?;
    if z.shape == conv {
        return Ok(Residual::Same);
    }
    let out = elementwise::broadcast_shape(conv, z.shape).ok_or_else(|| {
        ctx.err(
            Status::InvalidModel,
            format!(
                "residual of shape {:?} does not broadcast with the convolution's {conv:?}",
                z.shape
            ),
        )
    })?;
    Ok(Residual::Broadcast {
        conv: conv.to_vec(),
        z: z.shape.to_vec(),
        out,
    })
}

fn build_with(ctx: &BuildCtx, activation: Activation) -> Result<Built> {
    if ctx.input(0)?.shape.len() > 4 {
        if ctx.opt_input(3).is_some() {
            return Err(ctx.err(
                Status::UnsupportedShape,
                "a residual is fused only into 1-D and 2-D convolutions".to_string(),
            ));
        }
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
        let filters = ctx.prepared(1, &filters_tag(isa, &params), || {
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
    let conv_shape = out_shape(n, m, win.out, rank);
    let residual = residual_of(ctx, &conv_shape, 3)?;
    let shape = match &residual {
        Residual::Broadcast { out, .. } => out.clone(),
        _ => conv_shape,
    };
    Ok(Built {
        outputs: vec![(DataType::F32, shape)],
        kernel: Box::new(ConvKernel {
            weights,
            residual,
            activation,
        }),
    })
}

/// The weight-cache tag of the prepared filters of convolution `p` on `isa`. The filters' form
/// depends on the input's shape (Winograd takes enough tiles, and its variant depends on how
/// many), so plans of other shapes may need another form.
pub(super) fn filters_tag(isa: crate::kernels::cpu::Isa, p: &Conv2dParams) -> String {
    format!(
        "conv-filters {isa:?} m{} c{} g{} k{}x{} winograd {:?} direct {}",
        p.out_channels,
        p.in_channels,
        p.groups,
        p.kernel_h,
        p.kernel_w,
        crate::kernels::winograd::output_tile(p),
        crate::kernels::conv::has_direct_path(isa, p)
    )
}
