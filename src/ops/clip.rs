//! `Clip`: clamps every element into `[min, max]` (attributes before opset 11, optional scalar
//! inputs since; bounds that are not constants are read at run time).

use super::unary::ActivationKernel;
use super::util::{f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::activation::Activation;

/// The `Clip` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Clip",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["min", "max", "consumed_inputs"],
    types: FLOAT,
    build,
};

/// Where a bound comes from.
#[derive(Clone, Copy)]
enum Bound {
    Fixed(f32),
    Input(usize),
}

/// Clip whose bounds are inputs known only at run time.
struct DynamicClip {
    min: Bound,
    max: Bound,
}

fn scalar(inputs: &[Option<&Tensor>], i: usize) -> Result<f32> {
    let v = f32_of(inputs, i)?;
    v.first()
        .copied()
        .filter(|_| v.len() == 1)
        .ok_or_else(|| Error::new(Status::InvalidShape, "Clip bounds must be scalars"))
}

impl Kernel for DynamicClip {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let value = |b: Bound| match b {
            Bound::Fixed(v) => Ok(v),
            Bound::Input(i) => scalar(inputs, i),
        };
        let (min, max) = (value(self.min)?, value(self.max)?);
        let out = f32_out(&mut outputs[0])?;
        out.copy_from_slice(f32_of(inputs, 0)?);
        Activation::Clip { min, max }.apply(out);
        Ok(())
    }
}

fn bound(ctx: &BuildCtx, i: usize, name: &str, default: f32) -> Result<Bound> {
    if ctx.opset < 11 {
        return Ok(Bound::Fixed(ctx.attr_float(name, default)?));
    }
    match ctx.opt_input(i) {
        None => Ok(Bound::Fixed(default)),
        Some(_) => {
            let info = ctx.float_input(i)?;
            if info.shape.iter().product::<usize>() != 1 {
                return Err(ctx.err(Status::InvalidModel, format!("'{name}' must be a scalar")));
            }
            Ok(match info.constant {
                Some(t) => Bound::Fixed(t.as_f32()?[0]),
                None => Bound::Input(i),
            })
        }
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 3, 1, 1)?;
    let x = ctx.float_input(0)?;
    let min = bound(ctx, 1, "min", f32::NEG_INFINITY)?;
    let max = bound(ctx, 2, "max", f32::INFINITY)?;
    let kernel: Box<dyn Kernel> = match (min, max) {
        (Bound::Fixed(min), Bound::Fixed(max)) => {
            Box::new(ActivationKernel(Activation::Clip { min, max }))
        }
        _ => Box::new(DynamicClip { min, max }),
    };
    Ok(Built {
        outputs: vec![(DataType::F32, x.shape.to_vec())],
        kernel,
    })
}
