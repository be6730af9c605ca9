//! Shared lowering of the variadic broadcasting float operators (Max, Min, Sum, Mean): the inputs
//! are folded pairwise, left to right, into a result of their common broadcast shape.

use super::util::{broadcast, f32_of, f32_out, BuildCtx};
use super::{Built, Kernel};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};
use crate::kernels::broadcast::{map1, map2};
use crate::kernels::elementwise::{binary, BinaryOp};
use crate::kernels::scalar::Scalar;

struct VariadicKernel {
    op: BinaryOp,
    shapes: Vec<Vec<usize>>,
    out_shape: Vec<usize>,
    /// Multiplies the result (`1 / n` for Mean).
    scale: Option<f32>,
}

/// Copies `x` of shape `shape` into `out` of shape `out_shape`, repeating it along broadcast
/// dimensions.
fn broadcast_to(x: &[f32], shape: &[usize], out: &mut [f32], out_shape: &[usize]) {
    if shape == out_shape {
        out.copy_from_slice(x);
        return;
    }
    let rank = out_shape.len();
    let lead = rank - shape.len();
    // Source stride of each output dimension (0 where the input is broadcast).
    let mut strides = vec![0usize; rank];
    let mut acc = 1;
    for d in (0..shape.len()).rev() {
        strides[d + lead] = if shape[d] == 1 { 0 } else { acc };
        acc *= shape[d];
    }
    let mut idx = vec![0usize; rank];
    for o in out.iter_mut() {
        let src: usize = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        *o = x[src];
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < out_shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

impl Kernel for VariadicKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let out = f32_out(&mut outputs[0])?;
        broadcast_to(f32_of(inputs, 0)?, &self.shapes[0], out, &self.out_shape);
        if self.shapes.len() > 1 {
            let mut acc = out.to_vec();
            for (i, shape) in self.shapes.iter().enumerate().skip(1) {
                let x = f32_of(inputs, i)?;
                binary(
                    self.op,
                    &acc,
                    &self.out_shape,
                    x,
                    shape,
                    out,
                    &self.out_shape,
                );
                acc.copy_from_slice(out);
            }
        }
        if let Some(s) = self.scale {
            out.iter_mut().for_each(|v| *v *= s);
        }
        Ok(())
    }
}

/// The same fold for any numeric type, through the generic broadcast walk.
struct TypedVariadicKernel {
    op: BinaryOp,
    shapes: Vec<Vec<usize>>,
    out_shape: Vec<usize>,
    mean: bool,
}

impl TypedVariadicKernel {
    fn fold<T: Scalar + Elem>(&self, inputs: &[Option<&Tensor>], out: &mut Tensor) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let first = inputs[0].ok_or_else(missing)?.as_slice::<T>()?;
        let out = out.as_mut_slice::<T>()?;
        map1((first, &self.shapes[0]), out, &self.out_shape, |v| v);
        let op = self.op;
        for (i, shape) in self.shapes.iter().enumerate().skip(1) {
            let x = inputs[i].ok_or_else(missing)?.as_slice::<T>()?;
            let acc = out.to_vec();
            map2(
                (&acc, &self.out_shape),
                (x, shape),
                out,
                &self.out_shape,
                |a, b| match op {
                    BinaryOp::Max => a.max_nan(b),
                    BinaryOp::Min => a.min_nan(b),
                    _ => a.add(b),
                },
            );
        }
        if self.mean && self.shapes.len() > 1 {
            let n = T::of_f64(self.shapes.len() as f64);
            out.iter_mut().for_each(|v| *v = v.div(n));
        }
        Ok(())
    }
}

impl Kernel for TypedVariadicKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let dtype = outputs[0].dtype();
        crate::dispatch_numeric!(dtype, T => self.fold::<T>(inputs, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

/// Builds a variadic operator over one or more inputs of one numeric type; `mean` divides the
/// folded sum by the number of inputs.
pub fn build(ctx: &BuildCtx, op: BinaryOp, mean: bool) -> Result<Built> {
    let dtype = ctx.input(0)?.dtype;
    if dtype != DataType::F32 {
        return build_typed(ctx, op, mean, dtype);
    }
    ctx.arity(1, usize::MAX, 1, 1)?;
    let mut shapes = Vec::with_capacity(ctx.inputs.len());
    let mut out_shape = ctx.float_input(0)?.shape.to_vec();
    for i in 0..ctx.inputs.len() {
        let x = ctx.float_input(i)?;
        out_shape = broadcast(&out_shape, x.shape).ok_or_else(|| {
            ctx.err(
                Status::InvalidModel,
                format!(
                    "input {i} of shape {:?} does not broadcast to {out_shape:?}",
                    x.shape
                ),
            )
        })?;
        shapes.push(x.shape.to_vec());
    }
    let n = shapes.len();
    Ok(Built {
        outputs: vec![(DataType::F32, out_shape.clone())],
        kernel: Box::new(VariadicKernel {
            op,
            shapes,
            out_shape,
            scale: (mean && n > 1).then(|| 1.0 / n as f32),
        }),
    })
}

fn build_typed(ctx: &BuildCtx, op: BinaryOp, mean: bool, dtype: DataType) -> Result<Built> {
    ctx.arity(1, usize::MAX, 1, 1)?;
    if dtype == DataType::Bool || !dtype.is_stored() || dtype.is_narrow() {
        return Err(ctx.err(
            Status::UnsupportedDatatype,
            format!("{} inputs are not supported", dtype.name()),
        ));
    }
    let mut shapes = Vec::with_capacity(ctx.inputs.len());
    let mut out_shape = ctx.input(0)?.shape.to_vec();
    for i in 0..ctx.inputs.len() {
        let x = ctx.input(i)?;
        if x.dtype != dtype {
            return Err(ctx.err(Status::InvalidModel, "inputs differ in type"));
        }
        out_shape = broadcast(&out_shape, x.shape).ok_or_else(|| {
            ctx.err(
                Status::InvalidModel,
                format!("input {i} of shape {:?} does not broadcast", x.shape),
            )
        })?;
        shapes.push(x.shape.to_vec());
    }
    Ok(Built {
        outputs: vec![(dtype, out_shape.clone())],
        kernel: Box::new(TypedVariadicKernel {
            op,
            shapes,
            out_shape,
            mean,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::broadcast_to;

    #[test]
    fn broadcast_to_repeats() {
        let mut out = [0.0; 6];
        broadcast_to(&[1.0, 2.0, 3.0], &[3], &mut out, &[2, 3]);
        assert_eq!(out, [1.0, 2.0, 3.0, 1.0, 2.0, 3.0]);
        broadcast_to(&[1.0, 2.0], &[2, 1], &mut out, &[2, 3]);
        assert_eq!(out, [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
    }
}
