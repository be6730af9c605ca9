//! The reductions, one table: `ReduceSum`, `ReduceMean`, `ReduceMax`, `ReduceMin`,
//! `ReduceProd`, `ReduceL1`, `ReduceL2`, `ReduceLogSum`, `ReduceLogSumExp`, `ReduceSumSquare`.
//! Axes come from the attribute or (ReduceSum from opset 13, the others from 18) the optional
//! second input; `keepdims` keeps reduced axes as size 1; with no axes every axis is reduced,
//! unless `noop_with_empty_axes` makes the node an identity. Max and Min compare in the element
//! type; the others accumulate in f64.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, ANY, NUMERIC};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};
use crate::kernels::scalar::Scalar;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reduce {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

struct ReduceKernel {
    op: Reduce,
    in_shape: Vec<usize>,
    /// Per input dimension: the output stride, 0 for a reduced dimension.
    out_strides: Vec<usize>,
    /// Input elements per output element.
    count: usize,
}

impl ReduceKernel {
    /// Calls `f(output offset, element)` for every input element.
    fn walk<T: Copy>(&self, x: &[T], mut f: impl FnMut(usize, T)) {
        let rank = self.in_shape.len();
        let mut idx = vec![0usize; rank];
        let mut off = 0usize;
        for &v in x {
            f(off, v);
            for d in (0..rank).rev() {
                idx[d] += 1;
                off += self.out_strides[d];
                if idx[d] < self.in_shape[d] {
                    break;
                }
                off -= self.out_strides[d] * idx[d];
                idx[d] = 0;
            }
        }
    }

    fn compute<T: Scalar + Elem>(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        let x = x.as_slice::<T>()?;
        let out = out.as_mut_slice::<T>()?;
        match self.op {
            Reduce::Max | Reduce::Min => {
                let max = self.op == Reduce::Max;
                let mut acc: Vec<Option<T>> = vec![None; out.len()];
                self.walk(x, |o, v| {
                    acc[o] = Some(match acc[o] {
                        None => v,
                        Some(a) if max => a.max_nan(v),
                        Some(a) => a.min_nan(v),
                    })
                });
                let empty = T::of_f64(if max {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                });
                for (o, a) in out.iter_mut().zip(acc) {
                    *o = a.unwrap_or(empty);
                }
            }
            op => {
                let shift: Vec<f64> = if op == Reduce::LogSumExp {
                    let mut m = vec![f64::NEG_INFINITY; out.len()];
                    self.walk(x, |o, v| m[o] = m[o].max(v.as_f64()));
                    m.iter()
                        .map(|&v| if v.is_finite() { v } else { 0.0 })
                        .collect()
                } else {
                    Vec::new()
                };
                let init = if op == Reduce::Prod { 1.0 } else { 0.0 };
                let mut acc = vec![init; out.len()];
                self.walk(x, |o, v| {
                    let v = v.as_f64();
                    match op {
                        Reduce::Prod => acc[o] *= v,
                        Reduce::L1 => acc[o] += v.abs(),
                        Reduce::L2 | Reduce::SumSquare => acc[o] += v * v,
                        Reduce::LogSumExp => acc[o] += (v - shift[o]).exp(),
                        _ => acc[o] += v,
                    }
                });
                for (i, (o, a)) in out.iter_mut().zip(acc).enumerate() {
                    *o = T::of_f64(match op {
                        Reduce::Mean => a / self.count as f64,
                        Reduce::L2 => a.sqrt(),
                        Reduce::LogSum => a.ln(),
                        Reduce::LogSumExp => a.ln() + shift[i],
                        _ => a,
                    });
                }
            }
        }
        Ok(())
    }
}

impl ReduceKernel {
    /// Max (any) and Min (all) of booleans.
    fn compute_bool(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        let x = x.as_slice::<bool>()?;
        let out = out.as_mut_slice::<bool>()?;
        let any = self.op == Reduce::Max;
        out.fill(!any);
        self.walk(x, |o, v| {
            if any {
                out[o] |= v;
            } else {
                out[o] &= v;
            }
        });
        Ok(())
    }
}

impl Kernel for ReduceKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        if x.dtype() == crate::ir::DataType::Bool {
            return self.compute_bool(x, &mut outputs[0]);
        }
        crate::dispatch_numeric!(x.dtype(), T => self.compute::<T>(x, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

/// The axes to reduce over, as given (attribute or input), or `None` when none are given.
fn given_axes(ctx: &BuildCtx, input_from: i64) -> Result<Option<Vec<i64>>> {
    if ctx.opset >= input_from {
        match ctx.opt_input(1) {
            Some(_) => Ok(Some(ctx.const_ints(1, "axes")?)),
            None => Ok(None),
        }
    } else {
        Ok(ctx.attr_ints("axes")?.map(<[i64]>::to_vec))
    }
}

fn build(ctx: &BuildCtx, op: Reduce, input_from: i64) -> Result<Built> {
    ctx.arity(1, 2, 1, 1)?;
    let x = ctx.input(0)?;
    if x.dtype == crate::ir::DataType::Bool && !matches!(op, Reduce::Max | Reduce::Min) {
        return Err(ctx.err(
            Status::UnsupportedDatatype,
            "bool inputs reduce by Max or Min only",
        ));
    }
    let rank = x.shape.len();
    let keep = ctx.attr_int("keepdims", 1)? != 0;
    let noop = ctx.attr_int("noop_with_empty_axes", 0)? != 0;
    let axes = given_axes(ctx, input_from)?.unwrap_or_default();
    if rank == 0 && !axes.is_empty() {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("axes {axes:?} of a scalar, which has none"),
        ));
    }
    let mut reduced = vec![axes.is_empty() && !noop; rank];
    for &a in &axes {
        reduced[ctx.axis(a, rank)?] = true;
    }
    if axes.is_empty() && noop {
        return Ok(Built {
            outputs: vec![(x.dtype, x.shape.to_vec())],
            kernel: Box::new(super::util::CopyKernel),
        });
    }
    let mut out_shape = Vec::with_capacity(rank);
    let mut kept_dims = Vec::with_capacity(rank);
    for (d, &r) in reduced.iter().enumerate() {
        if !r {
            out_shape.push(x.shape[d]);
            kept_dims.push(d);
        } else if keep {
            out_shape.push(1);
        }
    }
    let mut out_strides = vec![0usize; rank];
    let mut acc = 1;
    for &d in kept_dims.iter().rev() {
        out_strides[d] = acc;
        acc *= x.shape[d];
    }
    let count = (0..rank)
        .filter(|&d| reduced[d])
        .map(|d| x.shape[d])
        .product();
    Ok(Built {
        outputs: vec![(x.dtype, out_shape)],
        kernel: Box::new(ReduceKernel {
            op,
            in_shape: x.shape.to_vec(),
            out_strides,
            count,
        }),
    })
}

macro_rules! reduction {
    ($def:ident, $name:literal, $op:ident, $input_from:literal, $newest:literal, $f:ident) => {
        reduction!($def, $name, $op, $input_from, $newest, $f, NUMERIC);
    };
    ($def:ident, $name:literal, $op:ident, $input_from:literal, $newest:literal, $f:ident,
     $types:ident) => {
        #[doc = concat!("The `", $name, "` operator.")]
        pub static $def: OpDef = OpDef {
            op_type: $name,
            domain: "",
            min_opset: 1,
            newest: $newest,
            attributes: &["axes", "keepdims", "noop_with_empty_axes"],
            types: $types,
            build: $f,
        };
        fn $f(ctx: &BuildCtx) -> Result<Built> {
            build(ctx, Reduce::$op, $input_from)
        }
    };
}

reduction!(SUM, "ReduceSum", Sum, 13, 13, build_sum);
reduction!(MEAN, "ReduceMean", Mean, 18, 18, build_mean);
reduction!(MAX, "ReduceMax", Max, 18, 20, build_max, ANY);
reduction!(MIN, "ReduceMin", Min, 18, 20, build_min, ANY);
reduction!(PROD, "ReduceProd", Prod, 18, 18, build_prod);
reduction!(L1, "ReduceL1", L1, 18, 18, build_l1);
reduction!(L2, "ReduceL2", L2, 18, 18, build_l2);
reduction!(LOG_SUM, "ReduceLogSum", LogSum, 18, 28, build_log_sum);
reduction!(
    LOG_SUM_EXP,
    "ReduceLogSumExp",
    LogSumExp,
    18,
    28,
    build_log_sum_exp
);
reduction!(
    SUM_SQUARE,
    "ReduceSumSquare",
    SumSquare,
    18,
    18,
    build_sum_square
);
