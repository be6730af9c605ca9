//! `ConvDepthwise` (internal): a 1×1 convolution and the depthwise convolution over its output,
//! computed together in bands of rows (`kernels::conv::PointwiseDepthwise`), so that the
//! intermediate tensor is never written out whole. The graph rewrites make it from a `Conv`
//! (or `FusedConv`) pair: `Y = act(DepthwiseConv(pointwise_act(Conv1x1(X, W1, B1)), W2, B2))`,
//! with inputs `X, W1, B1, W2, B2` (the biases optional, the weights constant) and the
//! depthwise convolution's attributes. With the optional inputs `W3, B3, Z` it also runs the
//! 1×1 convolution that reads the depthwise output (a MobileNetV2 block's projection) and the
//! residual added to it: `Y = projection_act(Conv1x1(…, W3, B3) + Z)`, in the same bands. With
//! the projection, `W1` and `B1` may be omitted: the depthwise convolution then reads `X`
//! itself (a block without expansion, MobileNetV2's first).

use super::conv::Residual;
use super::spatial::window;
use super::util::{f32_of, f32_out};
use super::{fused_activation, fused_activation_named, BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::{Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::activation::Activation;
use crate::kernels::conv::{Conv2d, Conv2dParams, ConvFilters, PointwiseDepthwise};

/// The `ConvDepthwise` operator.
pub static DEF: OpDef = OpDef {
    op_type: "ConvDepthwise",
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
        "pointwise_activation",
        "pointwise_activation_params",
        "projection_activation",
        "projection_activation_params",
    ],
    types: FLOAT,
    build,
};

struct ConvDepthwiseKernel {
    fused: PointwiseDepthwise,
    activation: Activation,
    /// With a projection: its activation and how its residual (input 7) meets its output.
    projection: Option<(Activation, Residual)>,
}

impl Kernel for ConvDepthwiseKernel {
    fn overwrites_outputs(&self) -> bool {
        true
    }

    fn reads_input(&self, index: usize) -> bool {
        // The weights and biases (inputs 1–6) live in the prepared kernel.
        index == 0 || index == 7
    }

    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let out = f32_out(&mut outputs[0])?;
        let acts = |proj_act| (self.activation, proj_act);
        match &self.projection {
            None => self.fused.run(x, out, self.activation),
            Some((act, Residual::None)) => self.fused.run_projected(x, None, out, acts(*act)),
            Some((act, Residual::Same)) => {
                let z = f32_of(inputs, 7)?;
                self.fused.run_projected(x, Some(z), out, acts(*act))
            }
            Some((act, residual @ Residual::Broadcast { .. })) => {
                let z = f32_of(inputs, 7)?;
                residual.broadcast(z, out, *act, |y| {
                    self.fused.run_projected(x, None, y, acts(Activation::None))
                })?;
            }
        }
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(4, 8, 1, 1)?;
    let x = ctx.float_input(0)?;
    let w2 = ctx.float_input(3)?;
    let expand = ctx.opt_input(1).is_some();
    let &[n, cin, h, w] = x.shape else {
        return Err(ctx.err(
            Status::UnsupportedShape,
            format!("input of shape {:?}: only images (N, C, H, W)", x.shape),
        ));
    };
    let w1_shape: &[usize] = if expand {
        ctx.float_input(1)?.shape
    } else {
        &[]
    };
    let mid = if expand {
        w1_shape.first().copied().unwrap_or(0)
    } else {
        cin
    };
    let &[_, 1, kh, kw] = w2.shape else {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("depthwise weights of shape {:?}", w2.shape),
        ));
    };
    let group = ctx.attr_int("group", 1)?;
    if (expand && w1_shape != [mid, cin, 1, 1]) || w2.shape[0] != mid || group != mid as i64 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "weights {w1_shape:?} and {:?} with group {group} are not a 1×1 convolution of \
                 the input {:?} and a depthwise one of its output",
                w2.shape, x.shape
            ),
        ));
    }
    if !expand && (ctx.opt_input(2).is_some() || ctx.opt_input(5).is_none()) {
        return Err(ctx.err(
            Status::InvalidModel,
            "without pointwise weights, a pointwise bias and no projection".to_string(),
        ));
    }
    if let Some(ks) = ctx.attr_ints("kernel_shape")? {
        if ks != [kh as i64, kw as i64] {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("kernel_shape {ks:?} contradicts weights {:?}", w2.shape),
            ));
        }
    }
    let constant = |i: usize| -> Result<Option<&[f32]>> {
        match ctx.opt_input(i) {
            None => Ok(None),
            Some(_) => {
                let t = ctx.float_input(i)?;
                let is_bias = i == 2 || i == 4;
                if is_bias && t.shape != [mid] {
                    return Err(ctx.err(
                        Status::InvalidModel,
                        format!("bias of shape {:?}, expected [{mid}]", t.shape),
                    ));
                }
                match t.constant {
                    Some(c) => c.as_f32().map(Some),
                    None => Err(ctx.err(
                        Status::UnsupportedOperator,
                        format!("input {i} is not a constant"),
                    )),
                }
            }
        }
    };
    let (w2c, b2) = (constant(3)?.unwrap_or_default(), constant(4)?);
    // The intermediate is never a tensor of the plan, whose size the planner would check; the
    // kernel's scratch holds it whole where it does not band.
    ctx.check_fits(DataType::F32, &[n, mid, h, w])?;
    let win = window(ctx, [h, w], 2, &[kh, kw], false)?;
    let pointwise = Conv2dParams::pointwise(n, cin, (h, w), mid);
    let depthwise = pointwise.depthwise_of_output(
        (kh, kw),
        (win.strides[0], win.strides[1]),
        win.pads,
        (win.dilations[0], win.dilations[1]),
    );
    let isa = crate::kernels::cpu::isa();
    let invalid = |e: crate::kernels::KernelError| ctx.err(Status::InvalidModel, e.message);
    let conv = |i: usize, p: Conv2dParams, wt: &[f32], b: Option<&[f32]>| -> Result<Conv2d> {
        let filters = ctx.prepared(i, &super::conv::filters_tag(isa, &p), || {
            ConvFilters::prepare(isa, &p, wt).map_err(invalid)
        })?;
        Conv2d::with_filters(isa, p, filters, b).map_err(invalid)
    };
    let dw = conv(3, depthwise, w2c, b2)?;
    let mut fused = if expand {
        let (w1c, b1) = (constant(1)?.unwrap_or_default(), constant(2)?);
        let pw = conv(1, pointwise, w1c, b1)?;
        let pointwise_act = fused_activation_named(ctx, "pointwise_activation")?;
        PointwiseDepthwise::new(pw, w1c, pointwise_act, dw).map_err(invalid)?
    } else {
        PointwiseDepthwise::depthwise_only(dw).map_err(invalid)?
    };
    let mut out_shape = vec![n, mid, win.out[0], win.out[1]];
    let mut projection = None;
    if ctx.opt_input(5).is_some() {
        let w3 = ctx.float_input(5)?;
        let cout = w3.shape.first().copied().unwrap_or(0);
        if w3.shape != [cout, mid, 1, 1] {
            return Err(ctx.err(
                Status::InvalidModel,
                format!(
                    "projection weights of shape {:?}, expected [_, {mid}, 1, 1]",
                    w3.shape
                ),
            ));
        }
        let w3c = constant(5)?.unwrap_or_default();
        let b3 = match ctx.opt_input(6) {
            None => None,
            Some(t) if t.shape == [cout] => constant(6)?,
            Some(t) => {
                return Err(ctx.err(
                    Status::InvalidModel,
                    format!("projection bias of shape {:?}, expected [{cout}]", t.shape),
                ))
            }
        };
        // The depthwise output is no tensor of the plan either (one thread holds it whole).
        ctx.check_fits(DataType::F32, &out_shape)?;
        let p3 = Conv2dParams::pointwise(n, mid, (win.out[0], win.out[1]), cout);
        fused = fused
            .with_projection(conv(5, p3, w3c, b3)?)
            .map_err(invalid)?;
        out_shape[1] = cout;
        let residual = super::conv::residual_of(ctx, &out_shape, 7)?;
        if let Residual::Broadcast { out, .. } = &residual {
            out_shape = out.clone();
        }
        let act = fused_activation_named(ctx, "projection_activation")?;
        projection = Some((act, residual));
    }
    Ok(Built {
        outputs: vec![(DataType::F32, out_shape)],
        kernel: Box::new(ConvDepthwiseKernel {
            fused,
            activation: fused_activation(ctx)?,
            projection,
        }),
    })
}
