//! `Pow`: `a` raised to the power `b` element-wise, with numpy broadcasting. Base and exponent
//! may have different numeric types (opset ≥ 12); the result has the base's type.

use super::{binary, BuildCtx, Built, Kernel, OpDef};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};
use crate::kernels::broadcast::map2;
use crate::kernels::scalar::Scalar;

/// The `Pow` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Pow",
    domain: "",
    min_opset: 1,
    newest: 15,
    attributes: &["axis", "broadcast"],
    types: super::NUMERIC,
    build,
};

/// Base and exponent of different types: the exponent is read as f64.
struct MixedPow {
    a_shape: Vec<usize>,
    b_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

impl MixedPow {
    fn compute<T: Scalar + Elem>(&self, a: &Tensor, b: &[f64], out: &mut Tensor) -> Result<()> {
        map2(
            (a.as_slice::<T>()?, &self.a_shape),
            (b, &self.b_shape),
            out.as_mut_slice::<T>()?,
            &self.out_shape,
            |x, y| T::of_f64(x.as_f64().powf(y)),
        );
        Ok(())
    }
}

impl Kernel for MixedPow {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "Pow input missing");
        let a = inputs[0].ok_or_else(missing)?;
        let b = inputs[1].ok_or_else(missing)?;
        let exponent: Vec<f64> = crate::dispatch_numeric!(b.dtype(), T => {
            b.as_slice::<T>()?.iter().map(|v| v.as_f64()).collect()
        }, other => return Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))));
        crate::dispatch_numeric!(a.dtype(), T => self.compute::<T>(a, &exponent, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let a = ctx.input(0)?;
    let b = ctx.input(1)?;
    if a.dtype == b.dtype {
        return binary::build(ctx, binary::Arith::Pow);
    }
    for x in [a, b] {
        if !(x.dtype.is_float() || x.dtype.is_integer()) {
            return Err(ctx.err(
                Status::UnsupportedDatatype,
                format!("{} inputs are not supported", x.dtype.name()),
            ));
        }
    }
    let out_shape = binary::output_shape(ctx)?;
    Ok(Built {
        outputs: vec![(a.dtype, out_shape.clone())],
        kernel: Box::new(MixedPow {
            a_shape: a.shape.to_vec(),
            b_shape: b.shape.to_vec(),
            out_shape,
        }),
    })
}
