//! `Einsum`: the Einstein summation named by `equation` (explicit `->` output or the implicit
//! alphabetical one, `...` broadcasting), over numeric tensors. Computed by walking every
//! combination of the equation's indices, accumulating in f64 (integers round-trip exactly
//! below 2⁵³).

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, NUMERIC};
use crate::error::{Error, Result, Status};
use crate::ir::{Elem, Tensor};
use crate::kernels::scalar::Scalar;

/// The `Einsum` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Einsum",
    domain: "",
    min_opset: 12,
    newest: 28,
    attributes: &["equation"],
    types: NUMERIC,
    build,
};

/// The equation resolved against the input shapes: every index letter numbered, each operand
/// and the output as index lists, and each index's extent.
struct Plan {
    operands: Vec<Vec<usize>>,
    output: Vec<usize>,
    extents: Vec<usize>,
}

struct EinsumKernel(Plan);

impl EinsumKernel {
    fn compute<T: Elem + Scalar>(
        &self,
        inputs: &[Option<&Tensor>],
        out: &mut Tensor,
    ) -> Result<()> {
        let p = &self.0;
        let data: Vec<Vec<f64>> = inputs
            .iter()
            .map(|t| {
                let t = t.ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
                Ok(t.as_slice::<T>()?.iter().map(|v| v.as_f64()).collect())
            })
            .collect::<Result<_>>()?;
        let n = p.extents.len();
        let total: usize = p.extents.iter().product();
        let mut acc = vec![0.0f64; out.len()];
        let mut idx = vec![0usize; n];
        let offset = |dims: &[usize], idx: &[usize]| {
            dims.iter().fold(0, |acc, &d| acc * p.extents[d] + idx[d])
        };
        for _ in 0..total {
            let prod: f64 = p
                .operands
                .iter()
                .zip(&data)
                .map(|(dims, d)| d[offset(dims, &idx)])
                .product();
            acc[offset(&p.output, &idx)] += prod;
            for d in (0..n).rev() {
                idx[d] += 1;
                if idx[d] < p.extents[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        for (o, v) in out.as_mut_slice::<T>()?.iter_mut().zip(acc) {
            *o = T::of_f64(v);
        }
        Ok(())
    }
}

impl Kernel for EinsumKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let dtype = outputs[0].dtype();
        crate::dispatch_numeric!(dtype, T => self.compute::<T>(inputs, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

/// Splits one operand's term into letters, expanding `...` to `ellipsis` placeholder letters
/// (upper-case private names `#0`, `#1` … are represented as chars from U+E000).
fn term(t: &str, rank: usize) -> std::result::Result<Vec<char>, String> {
    let t = t.trim();
    let letters = t.replace("...", "").chars().count();
    if t.contains("...") {
        if rank < letters {
            return Err(format!("'{t}' has more letters than rank {rank}"));
        }
        let dots = rank - letters;
        let (a, b) = t.split_once("...").unwrap_or((t, ""));
        let mut v: Vec<char> = a.chars().collect();
        v.extend((0..dots).map(|k| char::from_u32(0xE000 + (dots - 1 - k) as u32).unwrap_or('?')));
        v.extend(b.chars());
        Ok(v)
    } else if letters != rank {
        Err(format!(
            "'{t}' names {letters} axes, the operand has {rank}"
        ))
    } else {
        Ok(t.chars().collect())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, usize::MAX, 1, 1)?;
    let eq: String = ctx
        .attr_string("equation", "")?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ctx.inputs.len() {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("'{eq}' for {} inputs", ctx.inputs.len()),
        ));
    }
    let dtype = ctx.input(0)?.dtype;
    let mut letters: Vec<char> = Vec::new();
    let mut extents: Vec<usize> = Vec::new();
    let mut operands = Vec::new();
    let mut ellipsis_rank = 0;
    for (i, t) in terms.iter().enumerate() {
        let x = ctx.input(i)?;
        if x.dtype != dtype {
            return Err(ctx.err(Status::InvalidModel, "inputs differ in type"));
        }
        let chars = term(t, x.shape.len()).map_err(|m| ctx.err(Status::InvalidModel, m))?;
        ellipsis_rank = ellipsis_rank.max(chars.iter().filter(|c| **c as u32 >= 0xE000).count());
        let mut dims = Vec::new();
        for (c, &n) in chars.iter().zip(x.shape) {
            let k = match letters.iter().position(|l| l == c) {
                Some(k) => {
                    if extents[k] == 1 {
                        extents[k] = n;
                    } else if n != extents[k] && n != 1 {
                        return Err(ctx.err(
                            Status::InvalidModel,
                            format!("index '{c}' is {} and {n}", extents[k]),
                        ));
                    }
                    k
                }
                None => {
                    letters.push(*c);
                    extents.push(n);
                    letters.len() - 1
                }
            };
            dims.push(k);
        }
        operands.push(dims);
    }
    if operands
        .iter()
        .zip(&terms)
        .enumerate()
        .any(|(i, (dims, _))| {
            ctx.input(i)
                .is_ok_and(|x| dims.iter().zip(x.shape).any(|(&k, &n)| n != extents[k]))
        })
    {
        return Err(ctx.err(
            Status::UnsupportedShape,
            "broadcast size-1 operands are not supported",
        ));
    }
    let out_chars: Vec<char> = match rhs {
        Some(r) => term(&r, ellipsis_rank + r.replace("...", "").chars().count())
            .map_err(|m| ctx.err(Status::InvalidModel, m))?,
        None => {
            // Implicit form: the ellipsis, then the letters used once, alphabetically.
            let mut once: Vec<char> = letters
                .iter()
                .copied()
                .filter(|c| (*c as u32) < 0xE000)
                .filter(|c| terms.iter().map(|t| t.matches(*c).count()).sum::<usize>() == 1)
                .collect();
            once.sort();
            let mut v: Vec<char> = (0..ellipsis_rank)
                .map(|k| char::from_u32(0xE000 + (ellipsis_rank - 1 - k) as u32).unwrap_or('?'))
                .collect();
            v.extend(once);
            v
        }
    };
    let output: Vec<usize> = out_chars
        .iter()
        .map(|c| {
            letters.iter().position(|l| l == c).ok_or_else(|| {
                ctx.err(
                    Status::InvalidModel,
                    format!("output index '{c}' is not an input index"),
                )
            })
        })
        .collect::<Result<_>>()?;
    let out_shape: Vec<usize> = output.iter().map(|&k| extents[k]).collect();
    Ok(Built {
        outputs: vec![(dtype, out_shape)],
        kernel: Box::new(EinsumKernel(Plan {
            operands,
            output,
            extents,
        })),
    })
}
