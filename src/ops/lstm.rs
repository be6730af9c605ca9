//! `LSTM` (float32): forward, reverse or bidirectional, with biases, `sequence_lens`, initial
//! states, peepholes, `clip`, `input_forget`, custom activations and both layouts. Gate order
//! is i, o, f, c as ONNX defines it. The input projections of all steps are one GEMM per
//! direction; each step adds the recurrent GEMM and applies the gates.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOAT};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::gemm::{sgemm, MatRef};

/// The `LSTM` operator.
pub static DEF: OpDef = OpDef {
    op_type: "LSTM",
    domain: "",
    min_opset: 7,
    attributes: &[
        "activation_alpha",
        "activation_beta",
        "activations",
        "clip",
        "direction",
        "hidden_size",
        "input_forget",
        "layout",
    ],
    types: FLOAT,
    build,
};

/// An activation function of a recurrent operator, with its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Act {
    /// `max(0, x)`.
    Relu,
    /// `tanh(x)`.
    Tanh,
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `alpha·x + beta`.
    Affine(f32, f32),
    /// `x` or `alpha·x` below 0.
    LeakyRelu(f32),
    /// `x` above alpha, else 0.
    ThresholdedRelu(f32),
    /// `alpha·tanh(beta·x)`.
    ScaledTanh(f32, f32),
    /// `clamp(alpha·x + beta, 0, 1)`.
    HardSigmoid(f32, f32),
    /// `x`, or `alpha·(e^x − 1)` below 0.
    Elu(f32),
    /// `x / (1 + |x|)`.
    Softsign,
    /// `ln(1 + e^x)`.
    Softplus,
}

impl Act {
    /// Applies the function.
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Act::Relu => x.max(0.0),
            Act::Tanh => x.tanh(),
            Act::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            Act::Affine(a, b) => a * x + b,
            Act::LeakyRelu(a) => {
                if x < 0.0 {
                    a * x
                } else {
                    x
                }
            }
            Act::ThresholdedRelu(a) => {
                if x > a {
                    x
                } else {
                    0.0
                }
            }
            Act::ScaledTanh(a, b) => a * (b * x).tanh(),
            Act::HardSigmoid(a, b) => (a * x + b).clamp(0.0, 1.0),
            Act::Elu(a) => {
                if x < 0.0 {
                    a * (x.exp() - 1.0)
                } else {
                    x
                }
            }
            Act::Softsign => x / (1.0 + x.abs()),
            Act::Softplus => x.exp().ln_1p(),
        }
    }
}

/// Reads `activations` / `activation_alpha` / `activation_beta`: `per_dir` functions per
/// direction, the given defaults when the attribute is absent.
pub fn activations(ctx: &BuildCtx, dirs: usize, defaults: &[Act]) -> Result<Vec<Act>> {
    let Some(names) = ctx.node.attrs.get("activations") else {
        return Ok((0..dirs).flat_map(|_| defaults.iter().copied()).collect());
    };
    let crate::ir::Attr::Strings(names) = names else {
        return Err(ctx.err(Status::InvalidModel, "'activations' must be strings"));
    };
    if names.len() != defaults.len() * dirs {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "{} activations, expected {}",
                names.len(),
                defaults.len() * dirs
            ),
        ));
    }
    let alphas = ctx.attr_floats("activation_alpha")?.unwrap_or(&[]);
    let betas = ctx.attr_floats("activation_beta")?.unwrap_or(&[]);
    let (mut ai, mut bi) = (0, 0);
    let mut alpha = |d: f32| {
        let v = alphas.get(ai).copied().unwrap_or(d);
        ai += 1;
        v
    };
    let mut beta = |d: f32| {
        let v = betas.get(bi).copied().unwrap_or(d);
        bi += 1;
        v
    };
    names
        .iter()
        .map(|n| {
            Ok(
                match String::from_utf8_lossy(n).to_ascii_lowercase().as_str() {
                    "relu" => Act::Relu,
                    "tanh" => Act::Tanh,
                    "sigmoid" => Act::Sigmoid,
                    "affine" => Act::Affine(alpha(1.0), beta(0.0)),
                    "leakyrelu" => Act::LeakyRelu(alpha(0.01)),
                    "thresholdedrelu" => Act::ThresholdedRelu(alpha(1.0)),
                    "scaledtanh" => Act::ScaledTanh(alpha(1.0), beta(1.0)),
                    "hardsigmoid" => Act::HardSigmoid(alpha(0.2), beta(0.5)),
                    "elu" => Act::Elu(alpha(1.0)),
                    "softsign" => Act::Softsign,
                    "softplus" => Act::Softplus,
                    other => {
                        return Err(ctx.err(
                            Status::UnsupportedAttribute,
                            format!("activation '{other}' is not supported"),
                        ))
                    }
                },
            )
        })
        .collect()
}

struct LstmKernel {
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    /// Directions: `false` forward, `true` reverse.
    dirs: Vec<bool>,
    /// f, g, h per direction.
    acts: Vec<Act>,
    clip: Option<f32>,
    input_forget: bool,
    batch_major: bool,
    /// The present outputs: 0 Y, 1 Y_h, 2 Y_c.
    order: Vec<usize>,
}

impl Kernel for LstmKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "LSTM input missing");
        let get = |i: usize| inputs.get(i).copied().flatten();
        let (s, b, n_in, h) = (self.seq, self.batch, self.input, self.hidden);
        let nd = self.dirs.len();
        let x_raw = get(0).ok_or_else(missing)?.as_f32()?;
        // Time-major input [seq, batch, input].
        let x: Vec<f32> = if self.batch_major {
            let mut t = vec![0.0; x_raw.len()];
            for bi in 0..b {
                for si in 0..s {
                    t[(si * b + bi) * n_in..][..n_in]
                        .copy_from_slice(&x_raw[(bi * s + si) * n_in..][..n_in]);
                }
            }
            t
        } else {
            x_raw.to_vec()
        };
        let w = get(1).ok_or_else(missing)?.as_f32()?;
        let r = get(2).ok_or_else(missing)?.as_f32()?;
        let bias = get(3).map(|t| t.as_f32()).transpose()?;
        let lens: Vec<usize> = match get(4) {
            Some(t) => t
                .to_i64_vec()?
                .iter()
                .map(|&l| (l.max(0) as usize).min(s))
                .collect(),
            None => vec![s; b],
        };
        let state = |i: usize| -> Result<Vec<f32>> {
            Ok(match get(i) {
                Some(t) => {
                    let v = t.as_f32()?;
                    if self.batch_major {
                        // [batch, dirs, hidden] -> [dirs, batch, hidden]
                        let mut o = vec![0.0; v.len()];
                        for bi in 0..b {
                            for d in 0..nd {
                                o[(d * b + bi) * h..][..h]
                                    .copy_from_slice(&v[(bi * nd + d) * h..][..h]);
                            }
                        }
                        o
                    } else {
                        v.to_vec()
                    }
                }
                None => vec![0.0; nd * b * h],
            })
        };
        let (mut hs, mut cs) = (state(5)?, state(6)?);
        let peep = get(7).map(|t| t.as_f32()).transpose()?;
        let mut y = vec![0.0f32; s * nd * b * h];
        let g4 = 4 * h;
        for (d, &reverse) in self.dirs.iter().enumerate() {
            let wd = &w[d * g4 * n_in..][..g4 * n_in];
            let rd = &r[d * g4 * h..][..g4 * h];
            // Input projections of every step: [seq·batch, 4h] = X · Wᵀ.
            let mut xw = vec![0.0f32; s * b * g4];
            sgemm(
                1.0,
                MatRef::row_major(&x, s * b, n_in),
                MatRef::row_major(wd, g4, n_in).t(),
                0.0,
                &mut xw,
                g4,
            );
            let (f, g, hact) = (self.acts[3 * d], self.acts[3 * d + 1], self.acts[3 * d + 2]);
            let hd = &mut hs[d * b * h..][..b * h];
            let cd = &mut cs[d * b * h..][..b * h];
            let mut gates = vec![0.0f32; b * g4];
            for step in 0..s {
                gates.fill(0.0);
                sgemm(
                    1.0,
                    MatRef::row_major(hd, b, h),
                    MatRef::row_major(rd, g4, h).t(),
                    0.0,
                    &mut gates,
                    g4,
                );
                for bi in 0..b {
                    let len = lens[bi];
                    if step >= len {
                        continue;
                    }
                    let t = if reverse { len - 1 - step } else { step };
                    let gr = &mut gates[bi * g4..][..g4];
                    let xr = &xw[(t * b + bi) * g4..][..g4];
                    for k in 0..g4 {
                        let mut v = gr[k] + xr[k];
                        if let Some(bb) = bias {
                            v += bb[d * 8 * h + k] + bb[d * 8 * h + g4 + k];
                        }
                        gr[k] = v;
                    }
                    let pe = |k: usize| peep.map_or(0.0, |p| p[d * 3 * h + k]);
                    let clip = |v: f32| self.clip.map_or(v, |c| v.clamp(-c, c));
                    for j in 0..h {
                        let c_prev = cd[bi * h + j];
                        let i_g = f.apply(clip(gr[j] + pe(j) * c_prev));
                        let f_g = if self.input_forget {
                            1.0 - i_g
                        } else {
                            f.apply(clip(gr[2 * h + j] + pe(2 * h + j) * c_prev))
                        };
                        let c_hat = g.apply(clip(gr[3 * h + j]));
                        let c_new = f_g * c_prev + i_g * c_hat;
                        let o_g = f.apply(clip(gr[h + j] + pe(h + j) * c_new));
                        let h_new = o_g * hact.apply(c_new);
                        cd[bi * h + j] = c_new;
                        hd[bi * h + j] = h_new;
                        y[((t * nd + d) * b + bi) * h + j] = h_new;
                    }
                }
            }
        }
        // Y, Y_h, Y_c, those present, in order.
        for (which, t) in self.order.iter().zip(outputs.iter_mut()) {
            let dst = t.as_mut_slice::<f32>()?;
            match which {
                0 => {
                    if self.batch_major {
                        for si in 0..s {
                            for d in 0..nd {
                                for bi in 0..b {
                                    dst[((bi * s + si) * nd + d) * h..][..h]
                                        .copy_from_slice(&y[((si * nd + d) * b + bi) * h..][..h]);
                                }
                            }
                        }
                    } else {
                        dst.copy_from_slice(&y);
                    }
                }
                _ => {
                    let src = if *which == 1 { &hs } else { &cs };
                    if self.batch_major {
                        for bi in 0..b {
                            for d in 0..nd {
                                dst[(bi * nd + d) * h..][..h]
                                    .copy_from_slice(&src[(d * b + bi) * h..][..h]);
                            }
                        }
                    } else {
                        dst.copy_from_slice(src);
                    }
                }
            }
        }
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(3, 8, 0, 3)?;
    let x = ctx.float_input(0)?;
    let w = ctx.float_input(1)?;
    let r = ctx.float_input(2)?;
    let batch_major = ctx.attr_int("layout", 0)? != 0;
    if x.shape.len() != 3 {
        return Err(ctx.err(Status::InvalidModel, format!("X has shape {:?}", x.shape)));
    }
    let (seq, batch) = if batch_major {
        (x.shape[1], x.shape[0])
    } else {
        (x.shape[0], x.shape[1])
    };
    let input = x.shape[2];
    let dirs: Vec<bool> = match ctx.attr_string("direction", "forward")?.as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        other => return Err(ctx.err(Status::InvalidModel, format!("direction '{other}'"))),
    };
    let nd = dirs.len();
    let hidden = match ctx.attr_int("hidden_size", 0)? {
        h if h > 0 => h as usize,
        _ => r.shape.get(2).copied().unwrap_or(0),
    };
    let h4 = 4 * hidden;
    let expect = |i: usize, shape: &[usize]| -> Result<()> {
        match ctx.opt_input(i) {
            Some(t) if t.shape != shape || t.dtype != DataType::F32 => Err(ctx.err(
                Status::InvalidModel,
                format!("input {i} has shape {:?}, expected {shape:?}", t.shape),
            )),
            _ => Ok(()),
        }
    };
    if w.shape != [nd, h4, input] || r.shape != [nd, h4, hidden] {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "W {:?} / R {:?} do not fit {nd} direction(s) of {hidden}",
                w.shape, r.shape
            ),
        ));
    }
    expect(3, &[nd, 8 * hidden])?;
    let state_shape = if batch_major {
        [batch, nd, hidden]
    } else {
        [nd, batch, hidden]
    };
    expect(5, &state_shape)?;
    expect(6, &state_shape)?;
    expect(7, &[nd, 3 * hidden])?;
    if let Some(l) = ctx.opt_input(4) {
        if l.shape != [batch] || !matches!(l.dtype, DataType::I32 | DataType::I64) {
            return Err(ctx.err(Status::InvalidModel, "sequence_lens must be int32 [batch]"));
        }
    }
    let acts = activations(ctx, nd, &[Act::Sigmoid, Act::Tanh, Act::Tanh])?;
    let clip = ctx
        .node
        .attrs
        .contains_key("clip")
        .then(|| ctx.attr_float("clip", 0.0))
        .transpose()?;
    let y_shape = if batch_major {
        vec![batch, seq, nd, hidden]
    } else {
        vec![seq, nd, batch, hidden]
    };
    let order = (0..3)
        .filter(|&i| matches!(ctx.node.outputs.get(i), Some(Some(_))))
        .collect();
    Ok(Built {
        outputs: vec![
            (DataType::F32, y_shape),
            (DataType::F32, state_shape.to_vec()),
            (DataType::F32, state_shape.to_vec()),
        ],
        kernel: Box::new(LstmKernel {
            seq,
            batch,
            input,
            hidden,
            dirs,
            acts,
            clip,
            input_forget: ctx.attr_int("input_forget", 0)? != 0,
            batch_major,
            order,
        }),
    })
}
