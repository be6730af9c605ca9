//! `LRN`: local response normalisation across channels,
//! `y = x / (bias + alpha / size · Σ x²)^beta` over a window of `size` channels around each one.

use super::util::{f32_of, f32_out, BuildCtx};
use super::{Built, Kernel, OpDef, FLOAT};
use crate::error::{Result, Status};
use crate::ir::{DataType, Tensor};

/// The `LRN` operator.
pub static DEF: OpDef = OpDef {
    op_type: "LRN",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["alpha", "beta", "bias", "size"],
    types: FLOAT,
    build,
};

struct LrnKernel {
    batch: usize,
    channels: usize,
    plane: usize,
    size: usize,
    alpha: f64,
    beta: f64,
    bias: f64,
}

impl Kernel for LrnKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let out = f32_out(&mut outputs[0])?;
        let (c, p) = (self.channels, self.plane);
        let before = (self.size - 1) / 2;
        let after = self.size - 1 - before;
        for n in 0..self.batch {
            for ch in 0..c {
                let lo = ch.saturating_sub(before);
                let hi = (ch + after).min(c - 1);
                for i in 0..p {
                    let sum: f64 = (lo..=hi)
                        .map(|k| (x[(n * c + k) * p + i] as f64).powi(2))
                        .sum();
                    let at = (n * c + ch) * p + i;
                    let denom = (self.bias + self.alpha / self.size as f64 * sum).powf(self.beta);
                    out[at] = (x[at] as f64 / denom) as f32;
                }
            }
        }
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.float_input(0)?;
    let size = ctx.attr_int("size", 0)?;
    if x.shape.len() < 2 || size < 1 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("input {:?} with size {size}", x.shape),
        ));
    }
    Ok(Built {
        outputs: vec![(DataType::F32, x.shape.to_vec())],
        kernel: Box::new(LrnKernel {
            batch: x.shape[0],
            channels: x.shape[1],
            plane: x.shape[2..].iter().product(),
            size: size as usize,
            alpha: ctx.attr_float("alpha", 1e-4)? as f64,
            beta: ctx.attr_float("beta", 0.75)? as f64,
            bias: ctx.attr_float("bias", 1.0)? as f64,
        }),
    })
}
