//! `BatchNormalization` in inference mode: `y = scale · (x − mean) / √(var + ε) + bias`, per
//! channel, folded into one multiply-add per element.

use super::util::{f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::{Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::elementwise::channel_affine;

/// The `BatchNormalization` operator.
pub static DEF: OpDef = OpDef {
    op_type: "BatchNormalization",
    domain: "",
    min_opset: 1,
    newest: 15,
    attributes: &[
        "epsilon",
        "momentum",
        "training_mode",
        "spatial",
        "is_test",
        "consumed_inputs",
    ],
    types: FLOAT,
    build,
};

/// Per-channel multiplier and offset equivalent to the normalisation.
pub fn fold(
    scale: &[f32],
    bias: &[f32],
    mean: &[f32],
    var: &[f32],
    eps: f32,
) -> (Vec<f32>, Vec<f32>) {
    let mul: Vec<f32> = scale
        .iter()
        .zip(var)
        .map(|(&s, &v)| s / (v + eps).sqrt())
        .collect();
    let add = bias
        .iter()
        .zip(mean)
        .zip(&mul)
        .map(|((&b, &m), &k)| b - m * k)
        .collect();
    (mul, add)
}

struct BnKernel {
    n: usize,
    c: usize,
    spatial: usize,
    eps: f32,
    folded: Option<(Vec<f32>, Vec<f32>)>,
}

impl Kernel for BnKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let out = f32_out(&mut outputs[0])?;
        let computed;
        let (mul, add) = match &self.folded {
            Some(f) => (&f.0, &f.1),
            None => {
                computed = fold(
                    f32_of(inputs, 1)?,
                    f32_of(inputs, 2)?,
                    f32_of(inputs, 3)?,
                    f32_of(inputs, 4)?,
                    self.eps,
                );
                (&computed.0, &computed.1)
            }
        };
        channel_affine(x, out, self.n, self.c, self.spatial, mul, add);
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(5, 5, 1, 5)?;
    if ctx.attr_int("training_mode", 0)? != 0
        || ctx.node.outputs.iter().skip(1).any(|o| o.is_some())
    {
        return Err(ctx.err(
            Status::UnsupportedAttribute,
            "training mode (running statistics outputs) is not supported",
        ));
    }
    if ctx.opset < 7 && ctx.attr_int("is_test", 0)? == 0 && ctx.node.outputs.len() > 1 {
        return Err(ctx.err(
            Status::UnsupportedAttribute,
            "training mode is not supported",
        ));
    }
    if ctx.attr_int("spatial", 1)? == 0 {
        return Err(ctx.err(Status::UnsupportedAttribute, "spatial=0 is not supported"));
    }
    let x = ctx.float_input(0)?;
    if x.shape.len() < 2 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("input of rank {} has no channel axis", x.shape.len()),
        ));
    }
    let c = x.shape[1];
    let mut params = Vec::with_capacity(4);
    for i in 1..5 {
        let p = ctx.float_input(i)?;
        if p.shape != [c] {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("input {i} has shape {:?}, expected [{c}]", p.shape),
            ));
        }
        params.push(p.constant);
    }
    let eps = ctx.attr_float("epsilon", 1e-5)?;
    let folded = match (params[0], params[1], params[2], params[3]) {
        (Some(s), Some(b), Some(m), Some(v)) => Some(fold(
            s.as_f32()?,
            b.as_f32()?,
            m.as_f32()?,
            v.as_f32()?,
            eps,
        )),
        _ => None,
    };
    Ok(Built {
        outputs: vec![(DataType::F32, x.shape.to_vec())],
        kernel: Box::new(BnKernel {
            n: x.shape[0],
            c,
            spatial: x.shape[2..].iter().product(),
            eps,
            folded,
        }),
    })
}
