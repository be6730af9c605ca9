//! The channel-blocked layout's internal operators, which the graph rewrite
//! `exec::fuse::nchwc` makes (see `kernels::nchwc`):
//! - `ToNchwc`: `[N, C, H, W]` → `[N, C/16, H, W, 16]` (C a multiple of 16);
//! - `FromNchwc`: the inverse;
//! - `NchwcConv`: a 2-D convolution of one group on blocked tensors, `Y = act(Conv(X, W, B) +
//!   Z)` with constant OIHW weights `W`, an optional bias `B` and an optional blocked residual
//!   `Z`, and the `strides`, `pads`, `dilations`, `activation` and `activation_params`
//!   attributes (explicit pads: the rewrite takes no `auto_pad` but for 1×1 kernels, which
//!   pad nothing).

use super::conv::{residual_of, Residual};
use super::util::{f32_of, f32_out};
use super::{fused_activation, BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::activation::Activation;
use crate::kernels::cpu;
use crate::kernels::nchwc::{self, BlockedConv, Window, BLOCK, MAX_TAPS};
use std::sync::Arc;

/// The `ToNchwc` operator.
pub static TO_DEF: OpDef = OpDef {
    op_type: "ToNchwc",
    domain: super::INTERNAL_DOMAIN,
    min_opset: 1,
    newest: 1,
    attributes: &[],
    types: FLOAT,
    build: build_to,
};

/// The `FromNchwc` operator.
pub static FROM_DEF: OpDef = OpDef {
    op_type: "FromNchwc",
    domain: super::INTERNAL_DOMAIN,
    min_opset: 1,
    newest: 1,
    attributes: &[],
    types: FLOAT,
    build: build_from,
};

/// The `NchwcConv` operator.
pub static CONV_DEF: OpDef = OpDef {
    op_type: "NchwcConv",
    domain: super::INTERNAL_DOMAIN,
    min_opset: 1,
    newest: 1,
    attributes: &[
        "strides",
        "pads",
        "dilations",
        "activation",
        "activation_params",
    ],
    types: FLOAT,
    build: build_conv,
};

/// A reorder between the plain and the blocked layout of `n` images of `c` channels of
/// `plane` positions.
struct Reorder {
    dims: (usize, usize, usize),
    blocking: bool,
}

impl Kernel for Reorder {
    fn overwrites_outputs(&self) -> bool {
        true
    }

    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let out = f32_out(&mut outputs[0])?;
        let isa = cpu::isa();
        let done = if self.blocking {
            nchwc::to_blocked(isa, x, self.dims, out)
        } else {
            nchwc::to_plain(isa, x, self.dims, out)
        };
        done.map_err(|e| Error::new(Status::InternalError, e.message))
    }
}

fn build_to(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.float_input(0)?;
    let &[n, c, h, w] = x.shape else {
        return Err(ctx.err(
            Status::UnsupportedShape,
            format!("input of shape {:?}: only images (N, C, H, W)", x.shape),
        ));
    };
    if !nchwc::blockable(c) {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("{c} channels do not split into blocks of {BLOCK}"),
        ));
    }
    Ok(Built {
        outputs: vec![(DataType::F32, vec![n, c / BLOCK, h, w, BLOCK])],
        kernel: Box::new(Reorder {
            dims: (n, c, h * w),
            blocking: true,
        }),
    })
}

fn build_from(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.float_input(0)?;
    let &[n, cb, h, w, BLOCK] = x.shape else {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("input of shape {:?} is not blocked", x.shape),
        ));
    };
    let c = cb * BLOCK;
    Ok(Built {
        outputs: vec![(DataType::F32, vec![n, c, h, w])],
        kernel: Box::new(Reorder {
            dims: (n, c, h * w),
            blocking: false,
        }),
    })
}

struct ConvKernel {
    conv: Arc<BlockedConv>,
    image: (usize, usize, usize),
    residual: Residual,
    activation: Activation,
}

impl Kernel for ConvKernel {
    fn overwrites_outputs(&self) -> bool {
        true
    }

    fn reads_input(&self, index: usize) -> bool {
        // The prepared filters hold the weights and the bias.
        index == 0 || index == 3
    }

    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let out = f32_out(&mut outputs[0])?;
        let isa = cpu::isa();
        let run = |z: Option<&[f32]>, out: &mut [f32], act| {
            self.conv
                .run(isa, x, self.image, z, out, act)
                .map_err(|e| Error::new(Status::InternalError, e.message))
        };
        match &self.residual {
            Residual::None => run(None, out, self.activation),
            Residual::Same => run(Some(f32_of(inputs, 3)?), out, self.activation),
            Residual::Broadcast { .. } => {
                let z = f32_of(inputs, 3)?;
                let mut failed = Ok(());
                self.residual.broadcast(z, out, self.activation, |y| {
                    failed = run(None, y, Activation::None);
                })?;
                failed
            }
        }
    }
}

fn build_conv(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 4, 1, 1)?;
    let x = ctx.float_input(0)?;
    let w = ctx.float_input(1)?;
    let &[n, cb, h, wd, BLOCK] = x.shape else {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("input of shape {:?} is not blocked", x.shape),
        ));
    };
    let c = cb * BLOCK;
    let (Some(weights), &[m, wc, kh, kw]) = (w.constant, w.shape) else {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "weights of shape {:?}: constant 2-D filters expected",
                w.shape
            ),
        ));
    };
    if wc != c || !nchwc::blockable(m) || kh * kw == 0 || kh * kw > MAX_TAPS {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "weights of shape {:?} do not fit {c} input channels in blocks of {BLOCK}",
                w.shape
            ),
        ));
    }
    let pair = |name: &str, default: usize| -> Result<(usize, usize)> {
        match ctx.attr_ints(name)? {
            None => Ok((default, default)),
            Some(&[a, b]) if a >= default as i64 && b >= default as i64 => {
                Ok((a as usize, b as usize))
            }
            Some(v) => Err(ctx.err(Status::InvalidModel, format!("{name} {v:?}"))),
        }
    };
    let (stride, dilation) = (pair("strides", 1)?, pair("dilations", 1)?);
    let pads = match ctx.attr_ints("pads")? {
        None => [0; 4],
        Some(&[t, l, b, r]) if t >= 0 && l >= 0 && b >= 0 && r >= 0 => {
            [t as usize, l as usize, b as usize, r as usize]
        }
        Some(v) => return Err(ctx.err(Status::InvalidModel, format!("pads {v:?}"))),
    };
    let window = Window {
        kernel: (kh, kw),
        stride,
        pads,
        dilation,
    };
    let bias = match ctx.opt_input(2) {
        None => None,
        Some(_) => {
            let b = ctx.float_input(2)?;
            match (b.constant, b.shape) {
                (Some(t), [len]) if *len == m => Some(t.as_f32()?),
                _ => {
                    return Err(ctx.err(
                        Status::InvalidModel,
                        format!("bias of shape {:?}: a constant [{m}] expected", b.shape),
                    ))
                }
            }
        }
    };
    let wt = weights.as_f32()?;
    // The packed form holds the bias too, so the cache key names the bias's weight: two
    // convolutions sharing filters may have different biases. A bias that is no graph weight
    // (a rewrite's constant) cannot be named, and its filters are packed for this node alone.
    let make = || {
        BlockedConv::new(c, m, window, wt, bias)
            .map_err(|e| ctx.err(Status::InvalidModel, e.message))
    };
    let bias_key = match ctx.opt_input(2) {
        None => Some("none".to_string()),
        Some(b) => b.weight.map(|id| format!("{id:?}")),
    };
    let conv = match bias_key {
        Some(key) => {
            let tag = format!("nchwc-conv m{m} c{c} {window:?} bias {key}");
            ctx.prepared(1, &tag, make)?
        }
        None => Arc::new(make()?),
    };
    let Some((oh, ow)) = conv.out_hw((h, wd)) else {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("a {kh}×{kw} kernel over {window:?} does not fit an input of {h}×{wd}"),
        ));
    };
    let conv_shape = vec![n, m / BLOCK, oh, ow, BLOCK];
    let residual = residual_of(ctx, &conv_shape, 3)?;
    let shape = match &residual {
        Residual::Broadcast { z, out, .. } => {
            // Broadcasting blocked tensors means what it means on plain ones only when the
            // channel blocks match: a residual of fewer channels would not broadcast there.
            if z.len() != 5 || z[1] != m / BLOCK || z[4] != BLOCK {
                return Err(ctx.err(
                    Status::InvalidModel,
                    format!("residual of shape {z:?} does not broadcast with {conv_shape:?}"),
                ));
            }
            out.clone()
        }
        _ => conv_shape,
    };
    Ok(Built {
        outputs: vec![(DataType::F32, shape)],
        kernel: Box::new(ConvKernel {
            conv,
            image: (n, h, wd),
            residual,
            activation: fused_activation(ctx)?,
        }),
    })
}
