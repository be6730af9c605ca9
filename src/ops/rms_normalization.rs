//! `RMSNormalization` (opset 23): `x / sqrt(mean(x²) + epsilon) · scale` over the dimensions
//! from `axis` on, `scale` broadcast to them. Statistics are computed in f64.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOATS};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};
use crate::kernels::broadcast::{broadcast_shapes, map1};

/// The `RMSNormalization` operator.
pub static DEF: OpDef = OpDef {
    op_type: "RMSNormalization",
    domain: "",
    min_opset: 23,
    newest: 23,
    attributes: &["axis", "epsilon", "stash_type"],
    types: FLOATS,
    build,
};

struct RmsNormKernel {
    inner: usize,
    norm_shape: Vec<usize>,
    scale_shape: Vec<usize>,
    epsilon: f64,
}

impl RmsNormKernel {
    fn compute<T: Elem>(&self, x: &Tensor, scale: &Tensor, out: &mut Tensor) -> Result<()> {
        let mut s = vec![0.0f64; self.inner];
        map1(
            (scale.as_slice::<T>()?, &self.scale_shape),
            &mut s,
            &self.norm_shape,
            |v| v.to_f64(),
        );
        let x = x.as_slice::<T>()?;
        if self.inner == 0 {
            return Ok(());
        }
        for (yr, xr) in out
            .as_mut_slice::<T>()?
            .chunks_mut(self.inner)
            .zip(x.chunks(self.inner))
        {
            let ms = xr.iter().map(|v| v.to_f64().powi(2)).sum::<f64>() / self.inner as f64;
            let inv = 1.0 / (ms + self.epsilon).sqrt();
            for ((o, v), sc) in yr.iter_mut().zip(xr).zip(&s) {
                *o = T::from_f64(v.to_f64() * inv * sc);
            }
        }
        Ok(())
    }
}

impl Kernel for RmsNormKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let x = inputs[0].ok_or_else(missing)?;
        let scale = inputs[1].ok_or_else(missing)?;
        crate::dispatch_float!(x.dtype(), T => self.compute::<T>(x, scale, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let dtype = super::pointwise::float_like_input(ctx, 0)?;
    let x = ctx.input(0)?;
    let scale = ctx.input(1)?;
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, x.shape.len())?;
    let norm_shape = x.shape[axis..].to_vec();
    let fits = scale.shape.len() <= norm_shape.len()
        && broadcast_shapes(&[scale.shape, &norm_shape]).as_deref() == Some(&norm_shape[..]);
    if scale.dtype != dtype || !fits {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("scale {:?} does not fit {norm_shape:?}", scale.shape),
        ));
    }
    Ok(Built {
        outputs: vec![(dtype, x.shape.to_vec())],
        kernel: Box::new(RmsNormKernel {
            inner: norm_shape.iter().product(),
            norm_shape,
            scale_shape: scale.shape.to_vec(),
            epsilon: ctx.attr_float("epsilon", 1e-5)? as f64,
        }),
    })
}
