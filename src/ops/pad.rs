//! `Pad`: pads each dimension by `pads[d]` before and `pads[rank + d]` after (negative values
//! crop) in `constant`, `reflect`, `edge` or `wrap` mode. Pads and the constant are attributes
//! before opset 11 and inputs from 11; `axes` (opset 18) restricts them to some dimensions.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, ANY};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor, TensorData};

/// The `Pad` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Pad",
    domain: "",
    min_opset: 1,
    newest: 25,
    attributes: &["mode", "pads", "paddings", "value"],
    types: ANY,
    build,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

struct PadKernel {
    mode: Mode,
    in_shape: Vec<usize>,
    out_shape: Vec<usize>,
    /// Pad before each dimension (negative: crop).
    before: Vec<i64>,
    /// The constant, when it was known while planning (else read from input 2 at run time).
    value: Option<TensorData>,
}

/// The input index an output index `o` reads along a dimension of `n`, or `None` for padding.
fn source(mode: Mode, o: i64, before: i64, n: i64) -> Option<i64> {
    let i = o - before;
    if (0..n).contains(&i) {
        return Some(i);
    }
    match mode {
        Mode::Constant => None,
        Mode::Edge => Some(i.clamp(0, n - 1)),
        Mode::Wrap => Some(i.rem_euclid(n)),
        Mode::Reflect => {
            if n == 1 {
                return Some(0);
            }
            let period = 2 * (n - 1);
            let m = i.rem_euclid(period);
            Some(if m < n { m } else { period - m })
        }
    }
}

impl PadKernel {
    fn pad<T: Elem>(&self, x: &[T], fill: T, out: &mut [T]) {
        let rank = self.out_shape.len();
        let mut idx = vec![0usize; rank];
        for o in out.iter_mut() {
            let mut src = Some(0i64);
            for (d, &i) in idx.iter().enumerate() {
                let n = self.in_shape[d] as i64;
                src = match (src, source(self.mode, i as i64, self.before[d], n)) {
                    (Some(s), Some(i)) => Some(s * n + i),
                    _ => None,
                };
            }
            *o = match src {
                Some(s) => x[s as usize],
                None => fill,
            };
            for d in (0..rank).rev() {
                idx[d] += 1;
                if idx[d] < self.out_shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }

    fn compute<T: Elem>(&self, inputs: &[Option<&Tensor>], out: &mut Tensor) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "Pad input missing");
        let x = inputs[0].ok_or_else(missing)?.as_slice::<T>()?;
        let fill = match (&self.value, inputs.get(2).copied().flatten()) {
            (Some(v), _) => T::slice(v).and_then(|s| s.first().copied()),
            (None, Some(t)) => t.as_slice::<T>()?.first().copied(),
            (None, None) => None,
        }
        .unwrap_or_default();
        self.pad(x, fill, out.as_mut_slice::<T>()?);
        Ok(())
    }
}

impl Kernel for PadKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_stored!(x.dtype(), T => self.compute::<T>(inputs, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let mode = match ctx.attr_string("mode", "constant")?.as_str() {
        "constant" => Mode::Constant,
        "reflect" => Mode::Reflect,
        "edge" => Mode::Edge,
        "wrap" => Mode::Wrap,
        other => return Err(ctx.err(Status::InvalidModel, format!("unknown mode '{other}'"))),
    };
    let (pads, value): (Vec<i64>, Option<TensorData>) = if ctx.opset >= 11 {
        ctx.arity(2, 4, 1, 1)?;
        let given = ctx.const_ints(1, "pads")?;
        let axes: Vec<usize> = match ctx.opt_input(3) {
            Some(_) => {
                let axes = ctx.const_ints(3, "axes")?;
                if rank == 0 && !axes.is_empty() {
                    return Err(ctx.err(
                        Status::InvalidModel,
                        format!("axes {axes:?} of a scalar, which has none"),
                    ));
                }
                axes.iter()
                    .map(|&a| ctx.axis(a, rank))
                    .collect::<Result<_>>()?
            }
            None => (0..rank).collect(),
        };
        if given.len() != 2 * axes.len() {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("{} pads for {} axes", given.len(), axes.len()),
            ));
        }
        let mut pads = vec![0i64; 2 * rank];
        for (k, &a) in axes.iter().enumerate() {
            pads[a] = given[k];
            pads[rank + a] = given[axes.len() + k];
        }
        let value = match ctx.opt_input(2) {
            Some(v) if v.dtype != x.dtype => {
                return Err(ctx.err(Status::InvalidModel, "constant_value has another type"))
            }
            Some(v) => v.constant.map(|t| t.data.clone()),
            None => Some(crate::ir::TensorData::zeros(x.dtype, 1)?),
        };
        (pads, value)
    } else {
        ctx.arity(1, 1, 1, 1)?;
        let pads = ctx
            .attr_ints("pads")?
            .or(ctx.attr_ints("paddings")?)
            .ok_or_else(|| ctx.err(Status::InvalidModel, "'pads' is required"))?
            .to_vec();
        let v = ctx.attr_float("value", 0.0)?;
        let value = crate::dispatch_stored!(x.dtype, T => T::into_data(vec![T::from_f64(v as f64)]),
            other => return Err(ctx.err(Status::UnsupportedDatatype, other.name())));
        (pads, Some(value))
    };
    if pads.len() != 2 * rank {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("{} pads for rank {rank}", pads.len()),
        ));
    }
    let mut out_shape = Vec::with_capacity(rank);
    for d in 0..rank {
        let n = x.shape[d] as i64 + pads[d] + pads[rank + d];
        if n < 0 {
            return Err(ctx.err(Status::InvalidModel, format!("pads {pads:?} crop too much")));
        }
        if mode != Mode::Constant && x.shape[d] == 0 && n > 0 {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("{mode:?} padding of an empty dimension"),
            ));
        }
        out_shape.push(n as usize);
    }
    Ok(Built {
        outputs: vec![(x.dtype, out_shape.clone())],
        kernel: Box::new(PadKernel {
            mode,
            in_shape: x.shape.to_vec(),
            out_shape,
            before: pads[..rank].to_vec(),
            value,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_per_mode() {
        // n = 3, before = 2: output 0..7 maps to input i = o - 2.
        let map = |m| (0..7).map(|o| source(m, o, 2, 3)).collect::<Vec<_>>();
        assert_eq!(map(Mode::Reflect), [2, 1, 0, 1, 2, 1, 0].map(Some).to_vec());
        assert_eq!(map(Mode::Edge), [0, 0, 0, 1, 2, 2, 2].map(Some).to_vec());
        assert_eq!(map(Mode::Wrap), [1, 2, 0, 1, 2, 0, 1].map(Some).to_vec());
        assert_eq!(map(Mode::Constant)[..3], [None, None, Some(0)]);
    }
}
