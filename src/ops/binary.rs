//! Shared lowering of the broadcasting binary arithmetic operators (Add, Sub, Mul, Div, Pow,
//! Mod): float32 runs the SIMD kernels; every other numeric type runs the generic broadcast
//! walk with [`Scalar`] arithmetic (integers wrap; integer division by zero gives 0).

use super::util::{broadcast, f32_of, f32_out, BuildCtx};
use super::{Built, Kernel};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};
use crate::kernels::broadcast::map2;
use crate::kernels::elementwise::{binary, BinaryOp};
use crate::kernels::scalar::Scalar;

/// A binary arithmetic operation on two values of one numeric type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `a ^ b`.
    Pow,
    /// Remainder with the divisor's sign (`Mod`, `fmod = 0`).
    Mod,
    /// Remainder with the dividend's sign (`Mod`, `fmod = 1`).
    FMod,
}

impl Arith {
    fn simd(self) -> Option<BinaryOp> {
        Some(match self {
            Arith::Add => BinaryOp::Add,
            Arith::Sub => BinaryOp::Sub,
            Arith::Mul => BinaryOp::Mul,
            Arith::Div => BinaryOp::Div,
            Arith::Pow => BinaryOp::Pow,
            Arith::Mod | Arith::FMod => return None,
        })
    }

    /// Applies the operation.
    pub fn apply<T: Scalar>(self, a: T, b: T) -> T {
        match self {
            Arith::Add => a.add(b),
            Arith::Sub => a.sub(b),
            Arith::Mul => a.mul(b),
            Arith::Div => a.div(b),
            Arith::Pow => T::of_f64(a.as_f64().powf(b.as_f64())),
            Arith::Mod => a.modulo(b),
            Arith::FMod => a.fmod(b),
        }
    }
}

struct SimdKernel {
    op: BinaryOp,
    a_shape: Vec<usize>,
    b_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

impl Kernel for SimdKernel {
    fn overwrites_outputs(&self) -> bool {
        true
    }

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

struct TypedKernel {
    op: Arith,
    a_shape: Vec<usize>,
    b_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

impl TypedKernel {
    fn compute<T: Scalar + Elem>(&self, a: &Tensor, b: &Tensor, out: &mut Tensor) -> Result<()> {
        let op = self.op;
        map2(
            (a.as_slice::<T>()?, &self.a_shape),
            (b.as_slice::<T>()?, &self.b_shape),
            out.as_mut_slice::<T>()?,
            &self.out_shape,
            |x, y| op.apply(x, y),
        );
        Ok(())
    }
}

impl Kernel for TypedKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "binary input missing");
        let a = inputs[0].ok_or_else(missing)?;
        let b = inputs[1].ok_or_else(missing)?;
        crate::dispatch_numeric!(a.dtype(), T => self.compute::<T>(a, b, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

/// The broadcast output shape of inputs 0 and 1 (opset ≥ 7 semantics; older `broadcast`/`axis`
/// attributes are refused unless they describe numpy broadcasting).
pub fn output_shape(ctx: &BuildCtx) -> Result<Vec<usize>> {
    let a = ctx.input(0)?;
    let b = ctx.input(1)?;
    if ctx.node.attrs.contains_key("axis") {
        return Err(ctx.err(
            Status::UnsupportedAttribute,
            "the legacy 'axis' broadcast attribute is not supported",
        ));
    }
    let out = broadcast(a.shape, b.shape).ok_or_else(|| {
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
    Ok(out)
}

/// Builds a broadcasting binary arithmetic operator on two inputs of one numeric type.
pub fn build(ctx: &BuildCtx, op: Arith) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let a = ctx.input(0)?;
    let b = ctx.input(1)?;
    if a.dtype != b.dtype {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("inputs are {} and {}", a.dtype.name(), b.dtype.name()),
        ));
    }
    if a.dtype == DataType::Bool || !a.dtype.is_stored() || a.dtype.is_narrow() {
        return Err(ctx.err(
            Status::UnsupportedDatatype,
            format!("{} inputs are not supported", a.dtype.name()),
        ));
    }
    let out_shape = output_shape(ctx)?;
    let (a_shape, b_shape) = (a.shape.to_vec(), b.shape.to_vec());
    let kernel: Box<dyn Kernel> = match op.simd() {
        Some(simd) if a.dtype == DataType::F32 => Box::new(SimdKernel {
            op: simd,
            a_shape,
            b_shape,
            out_shape: out_shape.clone(),
        }),
        _ => Box::new(TypedKernel {
            op,
            a_shape,
            b_shape,
            out_shape: out_shape.clone(),
        }),
    };
    Ok(Built {
        outputs: vec![(a.dtype, out_shape)],
        kernel,
    })
}
