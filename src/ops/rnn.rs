//! `RNN` (float32): `H = f(X·Wᵀ + H·Rᵀ + Wb + Rb)`, forward, reverse or bidirectional, with
//! `sequence_lens`, initial state, `clip`, custom activations and both layouts.

use super::recurrent::{floats, project, required, Act, Recurrent};
use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOAT};
use crate::error::Result;
use crate::ir::Tensor;

/// The `RNN` operator.
pub static DEF: OpDef = OpDef {
    op_type: "RNN",
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
    ],
    types: FLOAT,
    build,
};

struct RnnKernel(Recurrent);

impl Kernel for RnnKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let g = &self.0;
        let (s, b, n_in, h) = (g.seq, g.batch, g.input, g.hidden);
        let nd = g.dirs.len();
        let x = g.time_major_x(required(inputs, 0)?);
        let (w, rw) = (required(inputs, 1)?, required(inputs, 2)?);
        let bias = floats(inputs, 3)?;
        let lens = g.lengths(inputs.get(4).copied().flatten())?;
        let mut hs = g.initial(inputs.get(5).copied().flatten())?;
        let mut y = vec![0.0f32; s * nd * b * h];
        for (d, &reverse) in g.dirs.iter().enumerate() {
            let mut xw = vec![0.0f32; s * b * h];
            project(&x, s * b, n_in, &w[d * h * n_in..], h, &mut xw);
            let rd = &rw[d * h * h..][..h * h];
            let f = g.acts[d];
            let hd = &mut hs[d * b * h..][..b * h];
            let mut hr = vec![0.0f32; b * h];
            for step in 0..s {
                project(hd, b, h, rd, h, &mut hr);
                for bi in 0..b {
                    let len = lens[bi];
                    if step >= len {
                        continue;
                    }
                    let t = if reverse { len - 1 - step } else { step };
                    for j in 0..h {
                        let bb = bias.map_or(0.0, |v| v[d * 2 * h + j] + v[d * 2 * h + h + j]);
                        let v = f.apply(g.clip(xw[(t * b + bi) * h + j] + hr[bi * h + j] + bb));
                        hd[bi * h + j] = v;
                        y[((t * nd + d) * b + bi) * h + j] = v;
                    }
                }
            }
        }
        g.write(&y, &[&hs], outputs)
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    let (r, outputs) = Recurrent::read(ctx, 1, &[Act::Tanh], false)?;
    Ok(Built {
        outputs,
        kernel: Box::new(RnnKernel(r)),
    })
}
