//! Shared lowering of the simple float element-wise operators (Abs, Exp, Elu, …): a scalar
//! function with up to two parameters applied to every element.

use super::util::{f32_of, f32_out, BuildCtx};
use super::{Built, Kernel};
use crate::error::Result;
use crate::ir::{DataType, Tensor};

/// A scalar function of an element and the operator's parameters.
pub type ScalarFn = fn(f32, [f32; 2]) -> f32;

struct PointwiseKernel {
    f: ScalarFn,
    params: [f32; 2],
}

impl Kernel for PointwiseKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let out = f32_out(&mut outputs[0])?;
        for (o, &v) in out.iter_mut().zip(x) {
            *o = (self.f)(v, self.params);
        }
        Ok(())
    }
}

/// Builds a one-input, one-output float operator computing `f(x, params)` per element.
pub fn build(ctx: &BuildCtx, f: ScalarFn, params: [f32; 2]) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.float_input(0)?;
    Ok(Built {
        outputs: vec![(DataType::F32, x.shape.to_vec())],
        kernel: Box::new(PointwiseKernel { f, params }),
    })
}
