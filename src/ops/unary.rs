//! Shared lowering of the float activation operators (Relu, Sigmoid, Tanh, Clip, Erf, Gelu),
//! and the internal `Activation` operator that graph rewrites make.

use super::util::{f32_of, f32_out, BuildCtx};
use super::{Built, Kernel, OpDef, FLOAT};
use crate::error::Result;
use crate::ir::{DataType, Tensor};
use crate::kernels::activation::Activation;

/// Applies an activation to a whole tensor.
pub struct ActivationKernel(pub Activation);

impl Kernel for ActivationKernel {
    fn overwrites_outputs(&self) -> bool {
        true
    }

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

/// `Activation` (internal): an activation recognised from a pattern of several nodes (e.g. the
/// exporters' `0.5·x·(1 + Erf(x/√2))` GELU), named by the `activation` attributes.
pub static FUSED_DEF: OpDef = OpDef {
    op_type: "Activation",
    domain: super::INTERNAL_DOMAIN,
    min_opset: 1,
    newest: 1,
    attributes: &["activation", "activation_params"],
    types: FLOAT,
    build: build_fused,
};

fn build_fused(ctx: &BuildCtx) -> Result<Built> {
    build(ctx, super::fused_activation(ctx)?)
}
