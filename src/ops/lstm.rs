//! `LSTM` (float32): forward, reverse or bidirectional, with biases, `sequence_lens`, initial
//! states, peepholes, `clip`, `input_forget`, custom activations and both layouts. Gate order
//! is i, o, f, c as ONNX defines it. The input projections of all steps are one GEMM per
//! direction; each step adds the recurrent GEMM and applies the gates.

use super::recurrent::{floats, project, required, Act, Recurrent};
use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOAT};
use crate::error::Result;
use crate::ir::Tensor;

/// The `LSTM` operator.
pub static DEF: OpDef = OpDef {
    op_type: "LSTM",
    domain: "",
    min_opset: 7,
    newest: 22,
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

struct LstmKernel {
    r: Recurrent,
    input_forget: bool,
}

impl Kernel for LstmKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let g = &self.r;
        let (s, b, n_in, h) = (g.seq, g.batch, g.input, g.hidden);
        let nd = g.dirs.len();
        let x = g.time_major_x(required(inputs, 0)?);
        let (w, r) = (required(inputs, 1)?, required(inputs, 2)?);
        let bias = floats(inputs, 3)?;
        let lens = g.lengths(inputs.get(4).copied().flatten())?;
        let mut hs = g.initial(inputs.get(5).copied().flatten())?;
        let mut cs = g.initial(inputs.get(6).copied().flatten())?;
        let peep = floats(inputs, 7)?;
        let mut y = vec![0.0f32; s * nd * b * h];
        let g4 = 4 * h;
        for (d, &reverse) in g.dirs.iter().enumerate() {
            let wd = &w[d * g4 * n_in..][..g4 * n_in];
            let rd = &r[d * g4 * h..][..g4 * h];
            // Input projections of every step: [seq·batch, 4h] = X · Wᵀ.
            let mut xw = vec![0.0f32; s * b * g4];
            project(&x, s * b, n_in, wd, g4, &mut xw);
            let (f, gact, hact) = (g.acts[3 * d], g.acts[3 * d + 1], g.acts[3 * d + 2]);
            let hd = &mut hs[d * b * h..][..b * h];
            let cd = &mut cs[d * b * h..][..b * h];
            let mut gates = vec![0.0f32; b * g4];
            for step in 0..s {
                project(hd, b, h, rd, g4, &mut gates);
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
                    for j in 0..h {
                        let c_prev = cd[bi * h + j];
                        let i_g = f.apply(g.clip(gr[j] + pe(j) * c_prev));
                        let f_g = if self.input_forget {
                            1.0 - i_g
                        } else {
                            f.apply(g.clip(gr[2 * h + j] + pe(2 * h + j) * c_prev))
                        };
                        let c_hat = gact.apply(g.clip(gr[3 * h + j]));
                        let c_new = f_g * c_prev + i_g * c_hat;
                        let o_g = f.apply(g.clip(gr[h + j] + pe(h + j) * c_new));
                        let h_new = o_g * hact.apply(c_new);
                        cd[bi * h + j] = c_new;
                        hd[bi * h + j] = h_new;
                        y[((t * nd + d) * b + bi) * h + j] = h_new;
                    }
                }
            }
        }
        g.write(&y, &[&hs, &cs], outputs)
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    let (r, outputs) = Recurrent::read(ctx, 4, &[Act::Sigmoid, Act::Tanh, Act::Tanh], true)?;
    Ok(Built {
        outputs,
        kernel: Box::new(LstmKernel {
            r,
            input_forget: ctx.attr_int("input_forget", 0)? != 0,
        }),
    })
}
