//! `GRU` (float32): forward, reverse or bidirectional; gates z, r, h; `linear_before_reset`;
//! biases, `sequence_lens`, initial state, `clip`, custom activations and both layouts.

use super::recurrent::{floats, project, required, Act, Recurrent};
use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOAT};
use crate::error::Result;
use crate::ir::Tensor;

/// The `GRU` operator.
pub static DEF: OpDef = OpDef {
    op_type: "GRU",
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
        "layout",
        "linear_before_reset",
    ],
    types: FLOAT,
    build,
};

struct GruKernel {
    r: Recurrent,
    linear_before_reset: bool,
}

impl Kernel for GruKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let g = &self.r;
        let (s, b, n_in, h) = (g.seq, g.batch, g.input, g.hidden);
        let nd = g.dirs.len();
        let x = g.time_major_x(required(inputs, 0)?);
        let (w, rw) = (required(inputs, 1)?, required(inputs, 2)?);
        let bias = floats(inputs, 3)?;
        let lens = g.lengths(inputs.get(4).copied().flatten())?;
        let mut hs = g.initial(inputs.get(5).copied().flatten())?;
        let mut y = vec![0.0f32; s * nd * b * h];
        let g3 = 3 * h;
        for (d, &reverse) in g.dirs.iter().enumerate() {
            let mut xw = vec![0.0f32; s * b * g3];
            project(&x, s * b, n_in, &w[d * g3 * n_in..], g3, &mut xw);
            let rd = &rw[d * g3 * h..][..g3 * h];
            let (f, act_g) = (g.acts[2 * d], g.acts[2 * d + 1]);
            let bw = |k: usize| bias.map_or(0.0, |bb| bb[d * 6 * h + k]);
            let br = |k: usize| bias.map_or(0.0, |bb| bb[d * 6 * h + g3 + k]);
            let hd = &mut hs[d * b * h..][..b * h];
            // H·Rᵀ per batch row, for the three gates.
            let mut hr = vec![0.0f32; b * g3];
            for step in 0..s {
                project(hd, b, h, rd, g3, &mut hr);
                for bi in 0..b {
                    let len = lens[bi];
                    if step >= len {
                        continue;
                    }
                    let t = if reverse { len - 1 - step } else { step };
                    let xr = &xw[(t * b + bi) * g3..][..g3];
                    let hrr = &hr[bi * g3..][..g3];
                    let prev: Vec<f32> = hd[bi * h..][..h].to_vec();
                    let z: Vec<f32> = (0..h)
                        .map(|j| f.apply(g.clip(xr[j] + hrr[j] + bw(j) + br(j))))
                        .collect();
                    let r: Vec<f32> = (0..h)
                        .map(|j| f.apply(g.clip(xr[h + j] + hrr[h + j] + bw(h + j) + br(h + j))))
                        .collect();
                    let reset: Vec<f32> = r.iter().zip(&prev).map(|(r, p)| r * p).collect();
                    for j in 0..h {
                        let rec = if self.linear_before_reset {
                            r[j] * (hrr[2 * h + j] + br(2 * h + j))
                        } else {
                            // (r ⊙ H)·Rhᵀ for this unit.
                            let row = &rd[(2 * h + j) * h..][..h];
                            row.iter().zip(&reset).map(|(w, v)| w * v).sum::<f32>() + br(2 * h + j)
                        };
                        let cand = act_g.apply(g.clip(xr[2 * h + j] + rec + bw(2 * h + j)));
                        let new = (1.0 - z[j]) * cand + z[j] * prev[j];
                        hd[bi * h + j] = new;
                        y[((t * nd + d) * b + bi) * h + j] = new;
                    }
                }
            }
        }
        g.write(&y, &[&hs], outputs)
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    let (r, outputs) = Recurrent::read(ctx, 3, &[Act::Sigmoid, Act::Tanh], false)?;
    Ok(Built {
        outputs,
        kernel: Box::new(GruKernel {
            r,
            linear_before_reset: ctx.attr_int("linear_before_reset", 0)? != 0,
        }),
    })
}
