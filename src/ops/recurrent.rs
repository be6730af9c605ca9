//! What the recurrent operators (RNN, GRU, LSTM) share: their activation functions, reading the
//! common attributes and inputs, the time-major/batch-major layouts, and writing Y, Y_h and Y_c.

use super::util::BuildCtx;
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::gemm::{sgemm, MatRef};

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

/// Element type and shape of each output position (Y, Y_h).
pub type OutputTypes = Vec<(DataType, Vec<usize>)>;

/// The geometry and options of a recurrent node.
#[derive(Clone, Debug)]
pub struct Recurrent {
    /// Time steps.
    pub seq: usize,
    /// Batch size.
    pub batch: usize,
    /// Input features.
    pub input: usize,
    /// Hidden size.
    pub hidden: usize,
    /// Per direction: `true` for reverse.
    pub dirs: Vec<bool>,
    /// The activation functions, `per_dir` per direction.
    pub acts: Vec<Act>,
    /// Gate pre-activation clip.
    pub clip: Option<f32>,
    /// `layout = 1`: `[batch, seq, …]` tensors.
    pub batch_major: bool,
    /// Which outputs are present: 0 Y, 1 Y_h, 2 Y_c (LSTM).
    pub order: Vec<usize>,
}

impl Recurrent {
    /// Reads the node: `gates` gate blocks in W/R, default activations `defaults`; `lstm`
    /// adds LSTM's initial cell state and peephole inputs and its Y_c output.
    pub fn read(
        ctx: &BuildCtx,
        gates: usize,
        defaults: &[Act],
        lstm: bool,
    ) -> Result<(Recurrent, OutputTypes)> {
        let n_out = if lstm { 3 } else { 2 };
        ctx.arity(3, if lstm { 8 } else { 6 }, 0, n_out)?;
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
        let gh = gates * hidden;
        if w.shape != [nd, gh, input] || r.shape != [nd, gh, hidden] {
            return Err(ctx.err(
                Status::InvalidModel,
                format!(
                    "W {:?} / R {:?} do not fit {nd} direction(s) of {hidden}",
                    w.shape, r.shape
                ),
            ));
        }
        let state_shape = if batch_major {
            vec![batch, nd, hidden]
        } else {
            vec![nd, batch, hidden]
        };
        let mut expected = vec![(3, vec![nd, 2 * gh]), (5, state_shape.clone())];
        if lstm {
            expected.push((6, state_shape.clone()));
            expected.push((7, vec![nd, 3 * hidden]));
        }
        for (i, shape) in expected {
            if let Some(t) = ctx.opt_input(i) {
                if t.shape != shape {
                    return Err(ctx.err(
                        Status::InvalidModel,
                        format!("input {i} has shape {:?}, expected {shape:?}", t.shape),
                    ));
                }
            }
        }
        if let Some(l) = ctx.opt_input(4) {
            if l.shape != [batch] || !matches!(l.dtype, DataType::I32 | DataType::I64) {
                return Err(ctx.err(Status::InvalidModel, "sequence_lens must be int32 [batch]"));
            }
        }
        let acts = activations(ctx, nd, defaults)?;
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
        let order = (0..n_out)
            .filter(|&i| matches!(ctx.node.outputs.get(i), Some(Some(_))))
            .collect();
        let mut outputs = vec![
            (DataType::F32, y_shape),
            (DataType::F32, state_shape.clone()),
        ];
        if lstm {
            outputs.push((DataType::F32, state_shape));
        }
        Ok((
            Recurrent {
                seq,
                batch,
                input,
                hidden,
                dirs,
                acts,
                clip,
                batch_major,
                order,
            },
            outputs,
        ))
    }

    /// X as time-major `[seq, batch, input]`.
    pub fn time_major_x(&self, x: &[f32]) -> Vec<f32> {
        let (s, b, n) = (self.seq, self.batch, self.input);
        if !self.batch_major {
            return x.to_vec();
        }
        let mut t = vec![0.0; x.len()];
        for bi in 0..b {
            for si in 0..s {
                t[(si * b + bi) * n..][..n].copy_from_slice(&x[(bi * s + si) * n..][..n]);
            }
        }
        t
    }

    /// The initial hidden state as `[dirs, batch, hidden]` (zeros when absent).
    pub fn initial(&self, t: Option<&Tensor>) -> Result<Vec<f32>> {
        let (b, h, nd) = (self.batch, self.hidden, self.dirs.len());
        Ok(match t {
            Some(t) => {
                let v = t.as_f32()?;
                if self.batch_major {
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
    }

    /// The valid length of each batch entry (`sequence_lens`, or every step).
    pub fn lengths(&self, t: Option<&Tensor>) -> Result<Vec<usize>> {
        Ok(match t {
            Some(t) => t
                .to_i64_vec()?
                .iter()
                .map(|&l| (l.max(0) as usize).min(self.seq))
                .collect(),
            None => vec![self.seq; self.batch],
        })
    }

    /// Clips a gate pre-activation.
    pub fn clip(&self, v: f32) -> f32 {
        self.clip.map_or(v, |c| v.clamp(-c, c))
    }

    /// Writes Y (time-major `[seq, dirs, batch, hidden]` in `y`) and the final states
    /// (`[dirs, batch, hidden]` each: Y_h, then Y_c) into the present outputs, in the node's
    /// layout.
    pub fn write(&self, y: &[f32], states: &[&[f32]], outputs: &mut [Tensor]) -> Result<()> {
        let (s, b, hd, nd) = (self.seq, self.batch, self.hidden, self.dirs.len());
        for (which, t) in self.order.iter().zip(outputs.iter_mut()) {
            let dst = t.as_mut_slice::<f32>()?;
            match (which, self.batch_major) {
                (0, false) => dst.copy_from_slice(y),
                (0, true) => {
                    for si in 0..s {
                        for d in 0..nd {
                            for bi in 0..b {
                                dst[((bi * s + si) * nd + d) * hd..][..hd]
                                    .copy_from_slice(&y[((si * nd + d) * b + bi) * hd..][..hd]);
                            }
                        }
                    }
                }
                (k, false) => dst.copy_from_slice(states[k - 1]),
                (k, true) => {
                    let h = states[k - 1];
                    for bi in 0..b {
                        for d in 0..nd {
                            dst[(bi * nd + d) * hd..][..hd]
                                .copy_from_slice(&h[(d * b + bi) * hd..][..hd]);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// `out[rows, n] = src[rows, cols] · w[n, cols]ᵀ`: the input projections of every step
/// (`src` = X) or one step's recurrent projections (`src` = H).
pub fn project(src: &[f32], rows: usize, cols: usize, w: &[f32], n: usize, out: &mut [f32]) {
    out.fill(0.0);
    sgemm(
        1.0,
        MatRef::row_major(src, rows, cols),
        MatRef::row_major(&w[..n * cols], n, cols).t(),
        0.0,
        out,
        n,
    );
}

/// The present input `i`, as floats.
pub fn floats<'t>(inputs: &[Option<&'t Tensor>], i: usize) -> Result<Option<&'t [f32]>> {
    inputs
        .get(i)
        .copied()
        .flatten()
        .map(|t| t.as_f32())
        .transpose()
}

/// Input `i`, which must be present, as floats.
pub fn required<'t>(inputs: &[Option<&'t Tensor>], i: usize) -> Result<&'t [f32]> {
    floats(inputs, i)?.ok_or_else(|| Error::new(Status::InternalError, "recurrent input missing"))
}
