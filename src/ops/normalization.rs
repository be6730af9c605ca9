//! `InstanceNormalization` and `GroupNormalization`: normalise each (image, channel group) over
//! its channels' spatial positions, then scale and shift per channel (Instance, and Group from
//! opset 21) or per group (Group before 21). Statistics are computed in f64.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOATS};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};

/// The `InstanceNormalization` operator.
pub static INSTANCE_DEF: OpDef = OpDef {
    op_type: "InstanceNormalization",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &["epsilon", "consumed_inputs"],
    types: FLOATS,
    build: build_instance,
};

/// The `GroupNormalization` operator.
pub static GROUP_DEF: OpDef = OpDef {
    op_type: "GroupNormalization",
    domain: "",
    min_opset: 18,
    newest: 21,
    attributes: &["epsilon", "num_groups", "stash_type"],
    types: FLOATS,
    build: build_group,
};

struct GroupNormKernel {
    batch: usize,
    channels: usize,
    groups: usize,
    plane: usize,
    epsilon: f64,
    /// Scale and bias are per group (GroupNormalization before opset 21) instead of per channel.
    per_group_affine: bool,
}

impl GroupNormKernel {
    fn compute<T: Elem>(&self, inputs: &[Option<&Tensor>], out: &mut Tensor) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let x = inputs[0].ok_or_else(missing)?.as_slice::<T>()?;
        let scale = inputs[1].ok_or_else(missing)?.as_slice::<T>()?;
        let bias = inputs[2].ok_or_else(missing)?.as_slice::<T>()?;
        let out = out.as_mut_slice::<T>()?;
        let cpg = self.channels / self.groups;
        let size = cpg * self.plane;
        for n in 0..self.batch {
            for g in 0..self.groups {
                let start = (n * self.channels + g * cpg) * self.plane;
                let xs = &x[start..start + size];
                let count = size.max(1) as f64;
                let mean = xs.iter().map(|v| v.to_f64()).sum::<f64>() / count;
                let var = xs.iter().map(|v| (v.to_f64() - mean).powi(2)).sum::<f64>() / count;
                let inv = 1.0 / (var + self.epsilon).sqrt();
                for c in 0..cpg {
                    let ch = g * cpg + c;
                    let a = if self.per_group_affine { g } else { ch };
                    let (s, b) = (scale[a].to_f64(), bias[a].to_f64());
                    let at = start + c * self.plane;
                    for (o, v) in out[at..at + self.plane]
                        .iter_mut()
                        .zip(&xs[c * self.plane..])
                    {
                        *o = T::from_f64((v.to_f64() - mean) * inv * s + b);
                    }
                }
            }
        }
        Ok(())
    }
}

impl Kernel for GroupNormKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let dtype = outputs[0].dtype();
        crate::dispatch_float!(dtype, T => self.compute::<T>(inputs, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build_with(ctx: &BuildCtx, groups: Option<usize>, per_group_affine: bool) -> Result<Built> {
    ctx.arity(3, 3, 1, 1)?;
    let dtype = super::pointwise::float_like_input(ctx, 0)?;
    let x = ctx.input(0)?;
    if x.shape.len() < 2 {
        return Err(ctx.err(Status::InvalidModel, "input must have rank ≥ 2"));
    }
    let channels = x.shape[1];
    let groups = groups.unwrap_or(channels);
    if groups == 0 || channels % groups != 0 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("{channels} channels do not split into {groups} groups"),
        ));
    }
    let affine = if per_group_affine { groups } else { channels };
    for i in [1, 2] {
        let t = ctx.input(i)?;
        if t.dtype != dtype || t.shape.iter().product::<usize>() != affine {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("input {i} of shape {:?}, expected {affine} values", t.shape),
            ));
        }
    }
    Ok(Built {
        outputs: vec![(dtype, x.shape.to_vec())],
        kernel: Box::new(GroupNormKernel {
            batch: x.shape[0],
            channels,
            groups,
            plane: x.shape[2..].iter().product(),
            epsilon: ctx.attr_float("epsilon", 1e-5)? as f64,
            per_group_affine,
        }),
    })
}

fn build_instance(ctx: &BuildCtx) -> Result<Built> {
    build_with(ctx, None, false)
}

fn build_group(ctx: &BuildCtx) -> Result<Built> {
    let groups = ctx.attr_int("num_groups", 0)?;
    if groups <= 0 {
        return Err(ctx.err(Status::InvalidModel, "num_groups must be positive"));
    }
    build_with(ctx, Some(groups as usize), ctx.opset < 21)
}
