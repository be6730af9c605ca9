//! `RotaryEmbedding` (opset 23): rotates the first `rotary_embedding_dim` features of every head
//! by position-dependent angles given as cos/sin caches (indexed by `position_ids` when given),
//! pairing halves or, `interleaved`, neighbours. Input `[B, H, S, D]` or `[B, S, H·D]`.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOATS};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};

/// The `RotaryEmbedding` operator.
pub static DEF: OpDef = OpDef {
    op_type: "RotaryEmbedding",
    domain: "",
    min_opset: 23,
    newest: 23,
    attributes: &["interleaved", "num_heads", "rotary_embedding_dim"],
    types: FLOATS,
    build,
};

struct RotaryKernel {
    batch: usize,
    heads: usize,
    seq: usize,
    head_size: usize,
    rot: usize,
    interleaved: bool,
    /// `[B, H, S, D]` rather than `[B, S, H·D]`.
    four_d: bool,
}

impl RotaryKernel {
    fn compute<T: Elem>(&self, inputs: &[Option<&Tensor>], out: &mut Tensor) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let x = inputs[0].ok_or_else(missing)?.as_slice::<T>()?;
        let cos = inputs[1].ok_or_else(missing)?.as_slice::<T>()?;
        let sin = inputs[2].ok_or_else(missing)?.as_slice::<T>()?;
        let pos = match inputs.get(3).copied().flatten() {
            Some(p) => Some(p.to_i64_vec()?),
            None => None,
        };
        let out = out.as_mut_slice::<T>()?;
        out.copy_from_slice(x);
        let half = self.rot / 2;
        let rows = cos.len() / half.max(1);
        let (h, s, d) = (self.heads, self.seq, self.head_size);
        for b in 0..self.batch {
            for t in 0..s {
                let row = match &pos {
                    Some(p) => {
                        let r = *p.get(b * s + t).ok_or_else(|| {
                            Error::new(
                                Status::InvalidShape,
                                format!("{} position ids for {} tokens", p.len(), self.batch * s),
                            )
                        })?;
                        if r < 0 || r as usize >= rows {
                            return Err(Error::new(
                                Status::InvalidShape,
                                format!("position id {r} is outside the cache of {rows} rows"),
                            ));
                        }
                        r as usize
                    }
                    None => b * s + t,
                };
                let (Some(c_row), Some(s_row)) = (
                    cos.get(row * half..(row + 1) * half),
                    sin.get(row * half..(row + 1) * half),
                ) else {
                    return Err(Error::new(
                        Status::InvalidShape,
                        format!("row {row} is outside the cos/sin cache of {rows} rows"),
                    ));
                };
                for hh in 0..h {
                    let base = if self.four_d {
                        ((b * h + hh) * s + t) * d
                    } else {
                        (b * s + t) * h * d + hh * d
                    };
                    for i in 0..half {
                        let (a, bi) = if self.interleaved {
                            (base + 2 * i, base + 2 * i + 1)
                        } else {
                            (base + i, base + half + i)
                        };
                        let (x1, x2) = (x[a].to_f64(), x[bi].to_f64());
                        let (c, sn) = (c_row[i].to_f64(), s_row[i].to_f64());
                        out[a] = T::from_f64(c * x1 - sn * x2);
                        out[bi] = T::from_f64(sn * x1 + c * x2);
                    }
                }
            }
        }
        Ok(())
    }
}

impl Kernel for RotaryKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let dtype = outputs[0].dtype();
        crate::dispatch_float!(dtype, T => self.compute::<T>(inputs, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(3, 4, 1, 1)?;
    let dtype = super::pointwise::float_like_input(ctx, 0)?;
    let x = ctx.input(0)?;
    let (batch, heads, seq, head_size, four_d) = match *x.shape {
        [b, h, s, d] => (b, h, s, d, true),
        [b, s, hd] => {
            let n = ctx.attr_int("num_heads", 0)?;
            if n <= 0 || hd % n as usize != 0 {
                return Err(ctx.err(
                    Status::InvalidModel,
                    format!("num_heads {n} does not divide the hidden size {hd}"),
                ));
            }
            (b, n as usize, s, hd / n as usize, false)
        }
        _ => {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("input {:?} is not 3-D or 4-D", x.shape),
            ))
        }
    };
    let rot = match ctx.attr_int("rotary_embedding_dim", 0)? {
        0 => head_size,
        r if r > 0 && r as usize <= head_size && r % 2 == 0 => r as usize,
        r => return Err(ctx.err(Status::InvalidModel, format!("rotary_embedding_dim {r}"))),
    };
    let half = rot / 2;
    for i in [1, 2] {
        let c = ctx.input(i)?;
        let rows_needed = if ctx.opt_input(3).is_some() {
            1
        } else {
            batch * seq
        };
        let ok = c.dtype == dtype
            && c.shape.last() == Some(&half)
            && c.shape.iter().product::<usize>() / half.max(1) >= rows_needed;
        if !ok {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("cache {:?} does not fit rotary dim {rot}", c.shape),
            ));
        }
    }
    Ok(Built {
        outputs: vec![(dtype, x.shape.to_vec())],
        kernel: Box::new(RotaryKernel {
            batch,
            heads,
            seq,
            head_size,
            rot,
            interleaved: ctx.attr_int("interleaved", 0)? != 0,
            four_d,
        }),
    })
}
