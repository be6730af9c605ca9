//! `Cast` (to the type named by `to`) and `CastLike` (to the type of a second input) between
//! every stored type. Integer and bool conversions are exact (integers wrap like a C cast);
//! conversions involving floats go through f64 (float to integer truncates toward zero and
//! saturates; NaN gives 0).

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, ANY};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor, TensorData};

/// The `Cast` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Cast",
    domain: "",
    min_opset: 1,
    attributes: &["to", "saturate", "round_mode"],
    types: ANY,
    build,
};

/// The `CastLike` operator.
pub static LIKE_DEF: OpDef = OpDef {
    op_type: "CastLike",
    domain: "",
    min_opset: 15,
    attributes: &["saturate", "round_mode"],
    types: ANY,
    build: build_like,
};

fn exact(t: DataType) -> bool {
    t.is_integer() || t == DataType::Bool
}

fn convert<A: Elem, B: Elem>(src: &[A], dst: &mut [B]) {
    if exact(A::DTYPE) && exact(B::DTYPE) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = B::from_i128(s.to_i128());
        }
    } else {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = B::from_f64(s.to_f64());
        }
    }
}

fn cast_into<A: Elem>(src: &[A], out: &mut TensorData) -> Result<()> {
    let to = out.dtype();
    crate::dispatch_stored!(to, B => {
        let dst = B::slice_mut(out).ok_or_else(|| Error::new(Status::InternalError, "Cast output"))?;
        convert(src, dst);
        Ok(())
    }, other => Err(Error::new(Status::UnsupportedDatatype, format!("Cast to {}", other.name()))))
}

/// Converts a tensor's elements into `out`, which has the target type and the same length.
pub fn cast_tensor(x: &Tensor, out: &mut TensorData) -> Result<()> {
    crate::dispatch_stored!(x.dtype(), A => cast_into(x.as_slice::<A>()?, out),
        other => Err(Error::new(Status::UnsupportedDatatype, format!("Cast from {}", other.name()))))
}

struct CastKernel;

impl Kernel for CastKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "Cast input missing"))?;
        cast_tensor(x, &mut outputs[0].data)
    }
}

fn build_to(ctx: &BuildCtx, to: DataType) -> Result<Built> {
    let x = ctx.input(0)?;
    for t in [x.dtype, to] {
        if !t.is_stored() {
            return Err(ctx.err(
                Status::UnsupportedDatatype,
                format!("casts involving {} are not supported", t.name()),
            ));
        }
    }
    Ok(Built {
        outputs: vec![(to, x.shape.to_vec())],
        kernel: Box::new(CastKernel),
    })
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let code = ctx.attr_int("to", 0)?;
    let to = DataType::from_code(code)
        .filter(|_| code != 0)
        .ok_or_else(|| ctx.err(Status::InvalidModel, format!("'to' = {code} is not a type")))?;
    build_to(ctx, to)
}

fn build_like(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    build_to(ctx, ctx.input(1)?.dtype)
}
