//! `MaxUnpool`: scatters the values of a max pooling back to the positions its `Indices` name
//! (flat indices into the unpooled tensor), zeros elsewhere. The output size is the inverse of
//! the pooling geometry, or `output_shape` when given.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOAT};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};

/// The `MaxUnpool` operator.
pub static DEF: OpDef = OpDef {
    op_type: "MaxUnpool",
    domain: "",
    min_opset: 9,
    newest: 22,
    attributes: &["kernel_shape", "pads", "strides"],
    types: FLOAT,
    build,
};

struct MaxUnpoolKernel {
    /// The shape the pooling geometry gives (the indices address it).
    inferred: Vec<usize>,
    /// The output's shape (`output_shape`, or the inferred one); the inferred block sits in
    /// its leading corner.
    shape: Vec<usize>,
}

impl Kernel for MaxUnpoolKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let x = inputs[0].ok_or_else(missing)?.as_f32()?;
        let idx = inputs[1].ok_or_else(missing)?.to_i64_vec()?;
        let out = outputs[0].as_mut_slice::<f32>()?;
        out.fill(0.0);
        let n: usize = self.inferred.iter().product();
        for (&v, &i) in x.iter().zip(&idx) {
            if i < 0 || i as usize >= n {
                return Err(Error::new(
                    Status::InvalidShape,
                    format!("index {i} is outside the unpooled {n} elements"),
                ));
            }
            // Row-major coordinates in the inferred shape, then the offset in the output.
            let mut rest = i as usize;
            let mut off = 0;
            let mut scale = 1;
            for d in (0..self.inferred.len()).rev() {
                let c = rest % self.inferred[d];
                rest /= self.inferred[d];
                if c >= self.shape[d] {
                    off = usize::MAX;
                    break;
                }
                off += c * scale;
                scale *= self.shape[d];
            }
            if off != usize::MAX {
                out[off] = v;
            }
        }
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 3, 1, 1)?;
    let x = ctx.float_input(0)?;
    let idx = ctx.input(1)?;
    if idx.shape != x.shape || idx.dtype != DataType::I64 || x.shape.len() < 3 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("X {:?} and I {:?} must match", x.shape, idx.shape),
        ));
    }
    let rank = x.shape.len() - 2;
    let list = |name: &str, default: i64, n: usize| -> Result<Vec<i64>> {
        match ctx.attr_ints(name)? {
            None => Ok(vec![default; n]),
            Some(v) if v.len() == n && v.iter().all(|&x| x >= 0) => Ok(v.to_vec()),
            Some(v) => Err(ctx.err(Status::InvalidModel, format!("'{name}' = {v:?}"))),
        }
    };
    let kernel = ctx
        .attr_ints("kernel_shape")?
        .filter(|k| k.len() == rank && k.iter().all(|&v| v >= 1))
        .ok_or_else(|| ctx.err(Status::InvalidModel, "'kernel_shape' is required"))?;
    let strides = list("strides", 1, rank)?;
    let pads = list("pads", 0, 2 * rank)?;
    let mut inferred = x.shape[..2].to_vec();
    for d in 0..rank {
        let v = (x.shape[2 + d] as i64 - 1)
            .checked_mul(strides[d])
            .and_then(|v| v.checked_add(kernel[d]))
            .and_then(|v| v.checked_sub(pads[d]))
            .and_then(|v| v.checked_sub(pads[rank + d]))
            .ok_or_else(|| ctx.err(Status::UnsupportedShape, "the output is too large"))?;
        if v < 0 {
            return Err(ctx.err(Status::InvalidModel, "the pads exceed the output"));
        }
        inferred.push(v as usize);
    }
    let shape: Vec<usize> = if ctx.opt_input(2).is_some() {
        let s = ctx.const_ints(2, "output_shape")?;
        if s.len() != x.shape.len() || s.iter().any(|&d| d < 0) {
            return Err(ctx.err(Status::InvalidModel, format!("output_shape {s:?}")));
        }
        s.iter().map(|&d| d as usize).collect()
    } else {
        inferred.clone()
    };
    ctx.check_fits(DataType::F32, &inferred)?;
    ctx.check_fits(DataType::F32, &shape)?;
    Ok(Built {
        outputs: vec![(DataType::F32, shape.clone())],
        kernel: Box::new(MaxUnpoolKernel { inferred, shape }),
    })
}
