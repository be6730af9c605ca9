//! `Cast` (to the type named by `to`) and `CastLike` (to the type of a second input) between
//! every stored type, the narrow float8/float4/int4/int2 types included. Integer and bool
//! conversions are exact (integers wrap like a C cast); conversions involving floats go through
//! f64 (float to integer truncates toward zero and saturates; NaN gives 0). Casts to float8
//! honour `saturate`, casts to float8 e8m0 also `round_mode`.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, STORED};
use crate::error::{Error, Result, Status};
use crate::ir::narrow::{
    encode_e8m0, E8M0Rounding, F8E4M3Fn, F8E4M3FnUz, F8E5M2FnUz, F8E5M2, F8E8M0,
};
use crate::ir::{DataType, Elem, Tensor, TensorData};

/// The `Cast` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Cast",
    domain: "",
    min_opset: 1,
    newest: 28,
    attributes: &["to", "saturate", "round_mode"],
    types: STORED,
    build,
};

/// The `CastLike` operator.
pub static LIKE_DEF: OpDef = OpDef {
    op_type: "CastLike",
    domain: "",
    min_opset: 15,
    newest: 25,
    attributes: &["saturate", "round_mode"],
    types: STORED,
    build: build_like,
};

/// How values out of a float8 type's range are converted (the `saturate` and `round_mode`
/// attributes).
#[derive(Clone, Copy, Debug)]
pub struct CastOptions {
    /// Out-of-range values become the largest finite value (else infinity or NaN).
    pub saturate: bool,
    /// Rounding of casts to float8 e8m0.
    pub rounding: E8M0Rounding,
}

impl Default for CastOptions {
    fn default() -> Self {
        CastOptions {
            saturate: true,
            rounding: E8M0Rounding::Up,
        }
    }
}

fn exact(t: DataType) -> bool {
    t.is_integer()
        || matches!(
            t,
            DataType::Bool | DataType::I4 | DataType::U4 | DataType::I2 | DataType::U2
        )
}

/// Converts through f32 with an explicit float8 encoder.
fn encode_into<A: Elem, B: Elem>(
    src: &[A],
    out: &mut TensorData,
    encode: impl Fn(f32) -> B,
) -> Result<()> {
    let dst = B::slice_mut(out).ok_or_else(|| Error::new(Status::InternalError, "Cast output"))?;
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = encode(s.to_f64() as f32);
    }
    Ok(())
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

fn cast_into<A: Elem>(src: &[A], out: &mut TensorData, options: CastOptions) -> Result<()> {
    let to = out.dtype();
    let saturate = options.saturate;
    match to {
        DataType::F8E4M3Fn if !saturate => {
            return encode_into(src, out, |v| F8E4M3Fn::from_f32(v, false))
        }
        DataType::F8E4M3FnUz if !saturate => {
            return encode_into(src, out, |v| F8E4M3FnUz::from_f32(v, false))
        }
        DataType::F8E5M2 if !saturate => {
            return encode_into(src, out, |v| F8E5M2::from_f32(v, false))
        }
        DataType::F8E5M2FnUz if !saturate => {
            return encode_into(src, out, |v| F8E5M2FnUz::from_f32(v, false))
        }
        DataType::F8E8M0 => {
            return encode_into(src, out, |v| {
                F8E8M0(encode_e8m0(v, saturate, options.rounding))
            })
        }
        _ => {}
    }
    crate::dispatch_stored!(to, B => {
        let dst = B::slice_mut(out).ok_or_else(|| Error::new(Status::InternalError, "Cast output"))?;
        convert(src, dst);
        Ok(())
    }, other => Err(Error::new(Status::UnsupportedDatatype, format!("Cast to {}", other.name()))))
}

/// Converts a tensor's elements into `out`, which has the target type and the same length.
pub fn cast_tensor(x: &Tensor, out: &mut TensorData, options: CastOptions) -> Result<()> {
    crate::dispatch_stored!(x.dtype(), A => cast_into(x.as_slice::<A>()?, out, options),
        other => Err(Error::new(Status::UnsupportedDatatype, format!("Cast from {}", other.name()))))
}

struct CastKernel(CastOptions);

impl Kernel for CastKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "Cast input missing"))?;
        cast_tensor(x, &mut outputs[0].data, self.0)
    }
}

fn options(ctx: &BuildCtx) -> Result<CastOptions> {
    let rounding = match ctx.attr_string("round_mode", "up")?.as_str() {
        "up" => E8M0Rounding::Up,
        "down" => E8M0Rounding::Down,
        "nearest" => E8M0Rounding::Nearest,
        other => {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("round_mode '{other}' is not up, down or nearest"),
            ))
        }
    };
    Ok(CastOptions {
        saturate: ctx.attr_int("saturate", 1)? != 0,
        rounding,
    })
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
        kernel: Box::new(CastKernel(options(ctx)?)),
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
