//! The channel-blocked layout's internal operators, which the graph rewrite
//! `exec::fuse::nchwc` makes (see `kernels::nchwc`):
//! - `ToNchwc`: `[N, C, H, W]` → `[N, C/16, H, W, 16]` (C a multiple of 16);
//! - `FromNchwc`: the inverse;
//! - `NchwcConv`: a 2-D convolution of one group on blocked tensors, `Y = act(Conv(X, W, B) +
//!   Z)` with constant OIHW weights `W`, an optional bias `B` and an optional blocked residual
//!   `Z`, and the `strides`, `pads`, `dilations`, `activation` and `activation_params`
//!   attributes (explicit pads: the rewrite takes no `auto_pad` but for 1×1 kernels, which
//!   pad nothing). A 3×3 kernel at stride 1 that Winograd suits (`kernels::winograd::
//!   output_tile`, known once the shapes are) runs Winograd on the blocked tensors; every other
//!   one the direct blocked kernel (`kernels::nchwc::BlockedConv`).

use super::conv::{residual_of, Residual};
use super::util::{f32_of, f32_out};
use super::{fused_activation, BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::activation::Activation;
use crate::kernels::conv::Conv2dParams;
use crate::kernels::cpu;
use crate::kernels::nchwc::{self, BlockedConv, Window, BLOCK, MAX_TAPS};
use crate::kernels::winograd::{self, WinogradFilters};
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

/// Positions of an `h × w` image, or an error naming a size that overflows.
fn positions(ctx: &BuildCtx, h: usize, w: usize) -> Result<usize> {
    h.checked_mul(w).ok_or_else(|| {
        ctx.err(
            Status::UnsupportedShape,
            format!("an image of {h}×{w} positions is too large"),
        )
    })
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
            dims: (n, c, positions(ctx, h, w)?),
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
    let c = cb.checked_mul(BLOCK).ok_or_else(|| {
        ctx.err(
            Status::UnsupportedShape,
            format!("{cb} channel blocks are too many"),
        )
    })?;
    Ok(Built {
        outputs: vec![(DataType::F32, vec![n, c, h, w])],
        kernel: Box::new(Reorder {
            dims: (n, c, positions(ctx, h, w)?),
            blocking: false,
        }),
    })
}

/// How a blocked convolution computes.
enum Blocked {
    /// The direct kernel on blocked tensors.
    Direct(Arc<BlockedConv>),
    /// Winograd on blocked tensors, for the convolution `p` (its filters prepared for it).
    Winograd {
        filters: Arc<WinogradFilters>,
        p: Conv2dParams,
        bias: Option<Vec<f32>>,
    },
}

struct ConvKernel {
    conv: Blocked,
    image: (usize, usize, usize),
    residual: Residual,
    activation: Activation,
}

impl ConvKernel {
    /// `out = act(conv(x) + bias + z)` (`z`: a residual of the output's shape).
    fn compute(
        &self,
        x: &[f32],
        z: Option<&[f32]>,
        out: &mut [f32],
        act: Activation,
    ) -> Result<()> {
        let isa = cpu::isa();
        match &self.conv {
            Blocked::Direct(conv) => conv
                .run(isa, x, self.image, z, out, act)
                .map_err(|e| Error::new(Status::InternalError, e.message)),
            Blocked::Winograd { filters, p, bias } => {
                if x.len() != p.input_len()
                    || out.len() != p.output_len()
                    || z.is_some_and(|z| z.len() != out.len())
                {
                    return Err(Error::new(
                        Status::InternalError,
                        format!(
                            "blocked Winograd convolution: {} inputs, {} outputs for {p:?}",
                            x.len(),
                            out.len()
                        ),
                    ));
                }
                let early = if z.is_some() { Activation::None } else { act };
                let ep = (bias.as_deref(), early);
                winograd::run(isa, p, filters, ep, winograd::Layout::Blocked, x, out);
                if let Some(z) = z {
                    for (o, &r) in out.iter_mut().zip(z) {
                        *o += r;
                    }
                    act.apply_isa(isa, out);
                }
                Ok(())
            }
        }
    }
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
        let run = |z: Option<&[f32]>, out: &mut [f32], act| self.compute(x, z, out, act);
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
    let c = cb.checked_mul(BLOCK).ok_or_else(|| {
        ctx.err(
            Status::UnsupportedShape,
            format!("{cb} channel blocks are too many"),
        )
    })?;
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
    if let Some((p, r)) = winograd_geometry(n, (c, h, wd), m, &window) {
        let tag = format!("nchwc-winograd r{r} m{m} c{c}");
        let isa = cpu::isa();
        let filters = ctx.prepared(1, &tag, || Ok(WinogradFilters::prepare(isa, r, m, c, wt)))?;
        let conv = Blocked::Winograd {
            filters,
            p,
            bias: bias.map(|b| b.to_vec()),
        };
        return finish(
            ctx,
            conv,
            (n, h, wd),
            vec![n, m / BLOCK, p.out_h(), p.out_w(), BLOCK],
        );
    }
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
    finish(ctx, Blocked::Direct(conv), (n, h, wd), conv_shape)
}

/// The convolution of `n` images of `c × h × w` into `m` channels over `window` as Winograd
/// takes it, and its output tile, when Winograd suits it (a 3×3 kernel at stride 1; see
/// `kernels::winograd::output_tile`).
fn winograd_geometry(
    n: usize,
    (c, h, w): (usize, usize, usize),
    m: usize,
    window: &Window,
) -> Option<(Conv2dParams, usize)> {
    if window.kernel != (3, 3) || window.stride != (1, 1) || window.dilation != (1, 1) {
        return None;
    }
    let [pad_top, pad_left, pad_bottom, pad_right] = window.pads;
    // Pads narrower than the kernel (the rewrite takes no others), and the tensors' sizes
    // products that fit, with room for Winograd's lengths: the output of a 3×3 window at
    // stride 1 is at most the input's size plus 2 each way, its tiles at most 4 more, and a
    // tile's transformed values (36 per channel) at most 2.25 times its input's floats, so
    // the factor 64 bounds them.
    let fits = |dims: [usize; 4]| {
        dims.iter()
            .try_fold(1usize, |a, &v| a.checked_mul(v))
            .is_some()
    };
    if window.pads.iter().any(|&p| p > 2)
        || !fits([
            n,
            c.max(m).checked_mul(64)?,
            h.checked_add(8)?,
            w.checked_add(8)?,
        ])
        || h + pad_top + pad_bottom < 3
        || w + pad_left + pad_right < 3
    {
        return None;
    }
    let p = Conv2dParams {
        batch: n,
        in_channels: c,
        in_h: h,
        in_w: w,
        out_channels: m,
        kernel_h: 3,
        kernel_w: 3,
        stride_h: 1,
        stride_w: 1,
        pad_top,
        pad_left,
        pad_bottom,
        pad_right,
        dilation_h: 1,
        dilation_w: 1,
        groups: 1,
    };
    winograd::output_tile(&p).map(|r| (p, r))
}

/// The node built: its output shape (the convolution's, `conv_shape`, or with a residual
/// that broadcasts, the broadcast one) and kernel.
fn finish(
    ctx: &BuildCtx,
    conv: Blocked,
    image: (usize, usize, usize),
    conv_shape: Vec<usize>,
) -> Result<Built> {
    let m = conv_shape[1] * BLOCK;
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
            image,
            residual,
            activation: fused_activation(ctx)?,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::TensorData;
    use crate::kernels::reference::Rng;

    /// A 3×3 window at stride 1 with `pads`, dilation `d`.
    fn window3(pads: [usize; 4], d: usize) -> Window {
        Window {
            kernel: (3, 3),
            stride: (1, 1),
            pads,
            dilation: (d, d),
        }
    }

    /// Winograd takes the 3×3 layers at stride 1 its own rules take (F(4×4, 3×3) for 32
    /// channels over 16², 16 tiles), and no dilated, strided or widely padded one.
    #[test]
    fn winograd_takes_what_suits_it() {
        let pads = [1; 4];
        let (p, r) = winograd_geometry(1, (32, 16, 16), 32, &window3(pads, 1)).expect("suits");
        assert_eq!((r, p.out_h(), p.out_w()), (4, 16, 16));
        assert!(winograd_geometry(1, (32, 16, 16), 32, &window3(pads, 2)).is_none());
        assert!(winograd_geometry(1, (32, 16, 16), 32, &window3([3, 1, 1, 1], 1)).is_none());
        let strided = Window {
            stride: (2, 2),
            ..window3(pads, 1)
        };
        assert!(winograd_geometry(1, (32, 16, 16), 32, &strided).is_none());
        // Too few tiles (4 of 4×4 over 8²): the direct blocked kernel.
        assert!(winograd_geometry(1, (32, 8, 8), 32, &window3(pads, 1)).is_none());
        // Sizes whose products overflow are not taken.
        assert!(winograd_geometry(usize::MAX / 2, (32, 16, 16), 32, &window3(pads, 1)).is_none());
    }

    fn list(v: &[f32]) -> String {
        v.iter()
            .map(|v| format!("{v:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A model naming `NchwcConv` itself, a 3×3 layer at stride 1 that Winograd suits, runs
    /// it on the blocked tensors with the bias, a residual of the output's shape or one that
    /// broadcasts over the positions, and the activation after the residual: the values of
    /// the direct sum in f64, on any ISA.
    #[test]
    fn a_blocked_winograd_layer_adds_its_residual_before_the_activation() {
        let (c, h, w) = (32, 16, 16);
        let mut rng = Rng::new(1);
        let (wt, b) = (rng.vec(c * c * 9), rng.vec(c));
        let text = format!(
            r#"<ir_version: 8, opset_import: ["" : 17, "onnxifi.rust" : 1]>
g (float[1, 2, 16, 16, 16] x, float[1, 2, 16, 16, 16] z, float[1, 2, 1, 1, 16] v)
    => (float[1, 2, 16, 16, 16] y, float[1, 2, 16, 16, 16] u)
    <float[32, 32, 3, 3] w = {{{}}}, float[32] b = {{{}}}>
{{ y = onnxifi.rust.NchwcConv<pads: ints = [1, 1, 1, 1], activation: string = "Relu">(x, w, b, z)
   u = onnxifi.rust.NchwcConv<pads: ints = [1, 1, 1, 1], activation: string = "Relu">(x, w, b, v) }}"#,
            list(&wt),
            list(&b)
        );
        let proto = crate::text::parse_model(&text).expect("parses");
        let bytes = prost::Message::encode_to_vec(&proto);
        let exe = crate::graph::compile_executable(&bytes, Vec::new()).expect("compiles");
        let (x, z, v) = (rng.vec(c * h * w), rng.vec(c * h * w), rng.vec(c));
        let t = |shape: Vec<usize>, d: &[f32]| {
            crate::ir::Tensor::new(shape, TensorData::F32(d.to_vec())).expect("tensor")
        };
        let out = exe
            .run(vec![
                t(vec![1, 2, h, w, 16], &x),
                t(vec![1, 2, h, w, 16], &z),
                t(vec![1, 2, 1, 1, 16], &v),
            ])
            .expect("runs");
        // Channel `k` at position `p` of a blocked image.
        let at = |k: usize, p: usize| ((k / 16) * h * w + p) * 16 + k % 16;
        for (o, residual) in [(0, &z[..]), (1, &v[..])] {
            let got = out[o].as_f32().expect("floats");
            for k in 0..c {
                for y in 0..h {
                    for xx in 0..w {
                        let mut sum = b[k] as f64;
                        for ci in 0..c {
                            for (ky, kx) in (0..3).flat_map(|a| (0..3).map(move |b| (a, b))) {
                                let (iy, ix) = ((y + ky) as isize - 1, (xx + kx) as isize - 1);
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= w as isize {
                                    continue;
                                }
                                let p = iy as usize * w + ix as usize;
                                let wv = wt[((k * c + ci) * 3 + ky) * 3 + kx] as f64;
                                sum += wv * x[at(ci, p)] as f64;
                            }
                        }
                        let r = if o == 0 {
                            residual[at(k, y * w + xx)]
                        } else {
                            residual[k]
                        };
                        let want = (sum + r as f64).max(0.0);
                        let g = got[at(k, y * w + xx)] as f64;
                        assert!(
                            (g - want).abs() <= 1e-4 * (1.0 + want.abs()),
                            "output {o}, channel {k} at ({y}, {xx}): {g} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
