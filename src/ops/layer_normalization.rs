//! `LayerNormalization` (opset 17): normalises over the dimensions from `axis` on, then scales
//! and shifts by `Scale` and `B` (broadcast to those dimensions). The optional `Mean` and
//! `InvStdDev` outputs keep the reduced dimensions as size 1. Statistics are computed in f64.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOATS};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};
use crate::kernels::broadcast::{broadcast_shapes, map1};
use rayon::prelude::*;

/// The `LayerNormalization` operator.
pub static DEF: OpDef = OpDef {
    op_type: "LayerNormalization",
    domain: "",
    min_opset: 17,
    newest: 17,
    attributes: &["axis", "epsilon", "stash_type"],
    types: FLOATS,
    build,
};

struct LayerNormKernel {
    /// Rows (product of the dimensions before the axis).
    rows: usize,
    /// Elements per row.
    inner: usize,
    /// The normalised dimensions, and the shapes of Scale and B.
    norm_shape: Vec<usize>,
    scale_shape: Vec<usize>,
    bias_shape: Option<Vec<usize>>,
    epsilon: f64,
    /// Which outputs are present: Y, Mean, InvStdDev.
    present: [bool; 3],
}

impl LayerNormKernel {
    /// `t` broadcast to the normalised dimensions, as f64.
    fn expand<T: Elem>(&self, t: &Tensor, shape: &[usize]) -> Result<Vec<f64>> {
        let mut out = vec![0.0; self.inner];
        map1(
            (t.as_slice::<T>()?, shape),
            &mut out,
            &self.norm_shape,
            |v| v.to_f64(),
        );
        Ok(out)
    }

    /// The common case without temporaries: float32, Scale and B of the normalised shape (B
    /// possibly omitted), no Mean or InvStdDev output, by the vectorised kernel
    /// (`kernels::layer_norm`). The arithmetic of [`LayerNormKernel::compute`], its sums
    /// taken in another order.
    fn compute_f32_rows(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<bool> {
        use crate::ir::DataType::F32;
        let f32_input = |i: usize| {
            inputs
                .get(i)
                .copied()
                .flatten()
                .filter(|t| t.dtype() == F32)
        };
        let whole = |t: &Tensor| t.shape.iter().product::<usize>() == self.inner;
        let (Some(x), Some(scale)) = (f32_input(0), f32_input(1).filter(|t| whole(t))) else {
            return Ok(false);
        };
        let bias = match (inputs.get(2).copied().flatten(), f32_input(2)) {
            (None, _) => None,
            (Some(_), Some(b)) if whole(b) => Some(b.as_slice::<f32>()?),
            _ => return Ok(false),
        };
        if self.present != [true, false, false] {
            return Ok(false);
        }
        let scale = scale.as_slice::<f32>()?;
        let (x, inner) = (x.as_slice::<f32>()?, self.inner);
        let y = outputs[0].as_mut_slice::<f32>()?;
        if inner == 0 {
            return Ok(true);
        }
        crate::kernels::layer_norm::layer_norm_rows(x, scale, bias, self.epsilon, y);
        Ok(true)
    }

    fn compute<T: Elem>(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "LayerNormalization input missing");
        let x = inputs[0].ok_or_else(missing)?.as_slice::<T>()?;
        let scale = self.expand::<T>(inputs[1].ok_or_else(missing)?, &self.scale_shape)?;
        let bias = match (&self.bias_shape, inputs.get(2).copied().flatten()) {
            (Some(shape), Some(b)) => self.expand::<T>(b, shape)?,
            _ => vec![0.0; self.inner],
        };
        let mut stats = vec![(0.0f64, 0.0f64); self.rows];
        let inner = self.inner;
        let mut outs = outputs.iter_mut();
        if self.present[0] {
            let y = outs.next().ok_or_else(missing)?.as_mut_slice::<T>()?;
            if inner > 0 {
                y.par_chunks_mut(inner)
                    .zip(x.par_chunks(inner))
                    .zip(stats.par_iter_mut())
                    .for_each(|((yr, xr), st)| {
                        let n = inner as f64;
                        let mean = xr.iter().map(|v| v.to_f64()).sum::<f64>() / n;
                        let var = xr.iter().map(|v| (v.to_f64() - mean).powi(2)).sum::<f64>() / n;
                        let inv = 1.0 / (var + self.epsilon).sqrt();
                        for (j, (o, v)) in yr.iter_mut().zip(xr).enumerate() {
                            *o = T::from_f64((v.to_f64() - mean) * inv * scale[j] + bias[j]);
                        }
                        *st = (mean, inv);
                    });
            }
        } else {
            for (r, st) in stats.iter_mut().enumerate() {
                let xr = &x[r * inner..(r + 1) * inner];
                let n = inner as f64;
                let mean = xr.iter().map(|v| v.to_f64()).sum::<f64>() / n;
                let var = xr.iter().map(|v| (v.to_f64() - mean).powi(2)).sum::<f64>() / n;
                *st = (mean, 1.0 / (var + self.epsilon).sqrt());
            }
        }
        // Mean and InvStdDev are in the stash type, float32.
        for (k, pick) in [(1, 0usize), (2, 1)] {
            if self.present[k] {
                let out = outs.next().ok_or_else(missing)?.as_mut_slice::<f32>()?;
                for (o, st) in out.iter_mut().zip(&stats) {
                    *o = if pick == 0 { st.0 as f32 } else { st.1 as f32 };
                }
            }
        }
        Ok(())
    }
}

impl Kernel for LayerNormKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let dtype = inputs[0]
            .ok_or_else(|| Error::new(Status::InternalError, "input missing"))?
            .dtype();
        if self.compute_f32_rows(inputs, outputs)? {
            return Ok(());
        }
        crate::dispatch_float!(dtype, T => self.compute::<T>(inputs, outputs),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }

    fn overwrites_outputs(&self) -> bool {
        true
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 3, 1, 3)?;
    let x = ctx.input(0)?;
    let dtype = super::pointwise::float_like_input(ctx, 0)?;
    let rank = x.shape.len();
    let axis = ctx.axis(ctx.attr_int("axis", -1)?, rank)?;
    if ctx.attr_int("stash_type", 1)? != 1 {
        return Err(ctx.err(
            Status::UnsupportedAttribute,
            "only stash_type = 1 (float32 statistics) is supported",
        ));
    }
    let norm_shape = x.shape[axis..].to_vec();
    let fits = |s: &[usize]| {
        s.len() <= norm_shape.len()
            && broadcast_shapes(&[s, &norm_shape]).as_deref() == Some(&norm_shape[..])
    };
    let scale = ctx.input(1)?;
    let bias = ctx.opt_input(2);
    for t in std::iter::once(scale).chain(bias) {
        if t.dtype != dtype || !fits(t.shape) {
            return Err(ctx.err(
                Status::InvalidModel,
                format!(
                    "Scale/B of type {} and shape {:?} do not fit {:?}",
                    t.dtype.name(),
                    t.shape,
                    norm_shape
                ),
            ));
        }
    }
    let mut stat_shape = x.shape[..axis].to_vec();
    stat_shape.resize(rank, 1);
    let present = [0, 1, 2].map(|i| matches!(ctx.node.outputs.get(i), Some(Some(_))));
    // One entry per output position; the kernel receives the present ones only.
    let outputs = vec![
        (dtype, x.shape.to_vec()),
        (crate::ir::DataType::F32, stat_shape.clone()),
        (crate::ir::DataType::F32, stat_shape),
    ];
    Ok(Built {
        outputs,
        kernel: Box::new(LayerNormKernel {
            rows: x.shape[..axis].iter().product(),
            inner: norm_shape.iter().product(),
            norm_shape,
            scale_shape: scale.shape.to_vec(),
            bias_shape: bias.map(|b| b.shape.to_vec()),
            epsilon: ctx.attr_float("epsilon", 1e-5)? as f64,
            present,
        }),
    })
}
