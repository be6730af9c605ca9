//! Shared lowering of the float activation operators (Relu, Sigmoid, Tanh, Clip).

use super::util::{f32_of, f32_out, BuildCtx};
use super::{Built, Kernel};
use crate::error::Result;
use crate::ir::{DataType, Tensor};
use crate::kernels::activation::Activation;

/// Applies an activation to a whole tensor.
pub struct ActivationKernel(pub Activation);

impl Kernel for ActivationKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let out = f32_out(&mut outputs[0])?;
        out.copy_from_slice(x);
        self.0.apply(out);
        Ok(())
    }
}

/// Builds an activation node with one float input of any shape.
pub fn build(ctx: &BuildCtx, act: Activation) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.float_input(0)?;
    Ok(Built {
        outputs: vec![(DataType::F32, x.shape.to_vec())],
        kernel: Box::new(ActivationKernel(act)),
    })
}
