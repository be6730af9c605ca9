//! `Softmax`, `LogSoftmax` and `Hardmax`: normalised exponentials (their logarithm; a one-hot
//! of the first maximum) along one axis (opset ≥ 13), or over the 2-D coercion of the input at
//! `axis` (opset < 13).

use super::util::{f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};
use crate::kernels::softmax::{log_softmax, softmax};

/// The `Softmax` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Softmax",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["axis"],
    types: super::FLOATS,
    build,
};

/// `LogSoftmax`.
pub static LOG_DEF: OpDef = OpDef {
    op_type: "LogSoftmax",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["axis"],
    types: super::FLOATS,
    build: build_log,
};

/// `Hardmax`.
pub static HARD_DEF: OpDef = OpDef {
    op_type: "Hardmax",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["axis"],
    types: super::FLOATS,
    build: build_hard,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Soft,
    Log,
    Hard,
}

struct SoftmaxKernel {
    kind: Kind,
    outer: usize,
    axis_len: usize,
    inner: usize,
}

/// One-hot of the first maximum along the axis.
fn hardmax(x: &[f32], out: &mut [f32], outer: usize, axis_len: usize, inner: usize) {
    out.fill(0.0);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * axis_len + k) * inner + i;
            let mut best = 0;
            for k in 1..axis_len {
                if x[at(k)] > x[at(best)] {
                    best = k;
                }
            }
            if axis_len > 0 {
                out[at(best)] = 1.0;
            }
        }
    }
}

impl SoftmaxKernel {
    /// float64, float16 and bfloat16 go through the float32 kernels.
    fn through_f32<T: Elem>(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        let xs: Vec<f32> = x
            .as_slice::<T>()?
            .iter()
            .map(|v| v.to_f64() as f32)
            .collect();
        let mut ys = vec![0.0f32; xs.len()];
        self.kind_fn()(&xs, &mut ys, self.outer, self.axis_len, self.inner);
        for (o, v) in out.as_mut_slice::<T>()?.iter_mut().zip(ys) {
            *o = T::from_f64(v as f64);
        }
        Ok(())
    }

    fn kind_fn(&self) -> fn(&[f32], &mut [f32], usize, usize, usize) {
        match self.kind {
            Kind::Soft => softmax,
            Kind::Log => log_softmax,
            Kind::Hard => hardmax,
        }
    }
}

impl Kernel for SoftmaxKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        if x.dtype() != DataType::F32 {
            return crate::dispatch_float!(x.dtype(), T => self.through_f32::<T>(x, &mut outputs[0]),
                other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))));
        }
        self.kind_fn()(
            f32_of(inputs, 0)?,
            f32_out(&mut outputs[0])?,
            self.outer,
            self.axis_len,
            self.inner,
        );
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    build_kind(ctx, Kind::Soft)
}

fn build_log(ctx: &BuildCtx) -> Result<Built> {
    build_kind(ctx, Kind::Log)
}

fn build_hard(ctx: &BuildCtx) -> Result<Built> {
    build_kind(ctx, Kind::Hard)
}

fn build_kind(ctx: &BuildCtx, kind: Kind) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let dtype = super::pointwise::float_like_input(ctx, 0)?;
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let (outer, axis_len, inner) = if rank == 0 {
        (1, 1, 1)
    } else if ctx.opset >= 13 {
        let axis = ctx.axis(ctx.attr_int("axis", -1)?, rank)?;
        (
            x.shape[..axis].iter().product(),
            x.shape[axis],
            x.shape[axis + 1..].iter().product(),
        )
    } else {
        let axis = ctx.axis(ctx.attr_int("axis", 1)?, rank)?;
        (
            x.shape[..axis].iter().product(),
            x.shape[axis..].iter().product(),
            1,
        )
    };
    Ok(Built {
        outputs: vec![(dtype, x.shape.to_vec())],
        kernel: Box::new(SoftmaxKernel {
            kind,
            outer,
            axis_len,
            inner,
        }),
    })
}
