//! Shared lowering of the broadcasting float binary operators (Add, Sub, Mul, Div).

use super::util::{broadcast, f32_of, f32_out, BuildCtx};
use super::{Built, Kernel};
use crate::error::{Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::elementwise::{binary, BinaryOp};

struct BinaryKernel {
    op: BinaryOp,
    a_shape: Vec<usize>,
    b_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

impl Kernel for BinaryKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let a = f32_of(inputs, 0)?;
        let b = f32_of(inputs, 1)?;
        let out = f32_out(&mut outputs[0])?;
        binary(
            self.op,
            a,
            &self.a_shape,
            b,
            &self.b_shape,
            out,
            &self.out_shape,
        );
        Ok(())
    }
}

/// Builds a broadcasting binary operator (opset ≥ 7 semantics; older `broadcast`/`axis`
/// attributes are refused unless they describe numpy broadcasting).
pub fn build(ctx: &BuildCtx, op: BinaryOp) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let a = ctx.float_input(0)?;
    let b = ctx.float_input(1)?;
    if ctx.node.attrs.contains_key("axis") {
        return Err(ctx.err(
            Status::UnsupportedAttribute,
            "the legacy 'axis' broadcast attribute is not supported",
        ));
    }
    let out_shape = broadcast(a.shape, b.shape).ok_or_else(|| {
        ctx.err(
            Status::InvalidModel,
            format!("shapes {:?} and {:?} do not broadcast", a.shape, b.shape),
        )
    })?;
    if ctx.attr_int("broadcast", 1)? == 0 && a.shape != b.shape {
        return Err(ctx.err(
            Status::InvalidModel,
            "broadcast=0 but the input shapes differ",
        ));
    }
    Ok(Built {
        outputs: vec![(DataType::F32, out_shape.clone())],
        kernel: Box::new(BinaryKernel {
            op,
            a_shape: a.shape.to_vec(),
            b_shape: b.shape.to_vec(),
            out_shape,
        }),
    })
}
