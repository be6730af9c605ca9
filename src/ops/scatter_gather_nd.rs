//! `GatherND`, `ScatterND` and `ScatterElements`: indexed reads and writes. GatherND picks
//! slices by index tuples (with `batch_dims`); ScatterND writes slices at index tuples;
//! ScatterElements writes single elements along an axis. Scatters copy the data and apply the
//! updates in order with the `reduction` (none, add, mul, max, min).

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, STORED};
use crate::error::{Error, Result, Status};
use crate::ir::{row_major_strides, DataType, Elem, Tensor};
use crate::kernels::scalar::Scalar;

/// The `GatherND` operator.
pub static GATHER_ND_DEF: OpDef = OpDef {
    op_type: "GatherND",
    domain: "",
    min_opset: 11,
    newest: 13,
    attributes: &["batch_dims"],
    types: STORED,
    build: build_gather_nd,
};

/// The `ScatterND` operator.
pub static SCATTER_ND_DEF: OpDef = OpDef {
    op_type: "ScatterND",
    domain: "",
    min_opset: 11,
    newest: 18,
    attributes: &["reduction"],
    types: STORED,
    build: build_scatter_nd,
};

/// The `ScatterElements` operator.
pub static SCATTER_ELEMENTS_DEF: OpDef = OpDef {
    op_type: "ScatterElements",
    domain: "",
    min_opset: 11,
    newest: 18,
    attributes: &["axis", "reduction"],
    types: STORED,
    build: build_scatter_elements,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

fn reduction(ctx: &BuildCtx) -> Result<Reduction> {
    Ok(match ctx.attr_string("reduction", "none")?.as_str() {
        "none" => Reduction::None,
        "add" => Reduction::Add,
        "mul" => Reduction::Mul,
        "max" => Reduction::Max,
        "min" => Reduction::Min,
        other => return Err(ctx.err(Status::InvalidModel, format!("reduction '{other}'"))),
    })
}

fn combine<T: Scalar>(r: Reduction, old: T, new: T) -> T {
    match r {
        Reduction::None => new,
        Reduction::Add => old.add(new),
        Reduction::Mul => old.mul(new),
        Reduction::Max => old.max_nan(new),
        Reduction::Min => old.min_nan(new),
    }
}

/// Normalises index `i` against a dimension of `n`.
fn index(i: i64, n: usize) -> Result<usize> {
    let k = if i < 0 { i + n as i64 } else { i };
    if (0..n as i64).contains(&k) {
        Ok(k as usize)
    } else {
        Err(Error::new(
            Status::InvalidShape,
            format!("index {i} is out of range for a dimension of {n}"),
        ))
    }
}

/// Index tuple `t` (of `len` indices) of a row-major indices buffer. Tuples of length 0 are
/// empty slices, as many as the indices' other dimensions say, not chunks of the buffer.
fn tuple_at(idx: &[i64], t: usize, len: usize) -> Result<&[i64]> {
    idx.get(t * len..(t + 1) * len)
        .ok_or_else(|| Error::new(Status::InvalidShape, "fewer indices than planned"))
}

struct GatherNdKernel {
    data_shape: Vec<usize>,
    batch_dims: usize,
    /// Index tuple length.
    tuple: usize,
    /// Elements per gathered slice.
    slice: usize,
    /// Index tuples per batch.
    per_batch: usize,
    /// Index tuples in all (indices' dimensions but the last).
    tuples: usize,
}

impl GatherNdKernel {
    fn compute<T: Elem>(&self, x: &Tensor, idx: &[i64], out: &mut Tensor) -> Result<()> {
        let x = x.as_slice::<T>()?;
        let out = out.as_mut_slice::<T>()?;
        let st = row_major_strides(&self.data_shape);
        let batch_block: usize = self.data_shape[self.batch_dims..].iter().product();
        if self.tuple == 0 && self.slice == 0 {
            // Empty tuples of empty slices: nothing to read, nothing to write, however many.
            return Ok(());
        }
        for t in 0..self.tuples {
            let chunk = tuple_at(idx, t, self.tuple)?;
            let batch = t / self.per_batch.max(1);
            let mut off = batch * batch_block;
            for (k, &i) in chunk.iter().enumerate() {
                let d = self.batch_dims + k;
                off += index(i, self.data_shape[d])? * st[d];
            }
            out[t * self.slice..(t + 1) * self.slice].copy_from_slice(&x[off..off + self.slice]);
        }
        Ok(())
    }
}

impl Kernel for GatherNdKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let x = inputs[0].ok_or_else(missing)?;
        let idx = inputs[1].ok_or_else(missing)?.to_i64_vec()?;
        crate::dispatch_stored!(x.dtype(), T => self.compute::<T>(x, &idx, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build_gather_nd(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let (x, idx) = (ctx.input(0)?, ctx.input(1)?);
    let b = ctx.attr_int("batch_dims", 0)?.max(0) as usize;
    let tuple = *idx.shape.last().unwrap_or(&0);
    if x.shape.is_empty() {
        return Err(ctx.err(Status::InvalidModel, "data must have rank ≥ 1"));
    }
    if idx.dtype != DataType::I64
        || idx.shape.is_empty()
        || b >= idx.shape.len()
        || b + tuple > x.shape.len()
        || x.shape[..b] != idx.shape[..b]
    {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "data {:?}, indices {:?}, batch_dims {b}",
                x.shape, idx.shape
            ),
        ));
    }
    let mut out = idx.shape[..idx.shape.len() - 1].to_vec();
    out.extend_from_slice(&x.shape[b + tuple..]);
    let per_batch: usize = idx.shape[b..idx.shape.len() - 1].iter().product();
    Ok(Built {
        outputs: vec![(x.dtype, out)],
        kernel: Box::new(GatherNdKernel {
            data_shape: x.shape.to_vec(),
            batch_dims: b,
            tuple,
            slice: x.shape[b + tuple..].iter().product(),
            per_batch,
            tuples: idx.shape[..idx.shape.len() - 1].iter().product(),
        }),
    })
}

struct ScatterNdKernel {
    data_shape: Vec<usize>,
    tuple: usize,
    /// Index tuples in all (indices' dimensions but the last).
    tuples: usize,
    slice: usize,
    reduction: Reduction,
}

impl ScatterNdKernel {
    fn compute<T: Elem + Scalar>(
        &self,
        x: &Tensor,
        idx: &[i64],
        upd: &Tensor,
        out: &mut Tensor,
    ) -> Result<()> {
        let out = out.as_mut_slice::<T>()?;
        out.copy_from_slice(x.as_slice::<T>()?);
        let upd = upd.as_slice::<T>()?;
        let st = row_major_strides(&self.data_shape);
        if self.tuple == 0 && self.slice == 0 {
            // Empty tuples of empty slices: nothing to read, nothing to write, however many.
            return Ok(());
        }
        for t in 0..self.tuples {
            let chunk = tuple_at(idx, t, self.tuple)?;
            let mut off = 0;
            for (k, &i) in chunk.iter().enumerate() {
                off += index(i, self.data_shape[k])? * st[k];
            }
            for j in 0..self.slice {
                out[off + j] = combine(self.reduction, out[off + j], upd[t * self.slice + j]);
            }
        }
        Ok(())
    }
}

impl Kernel for ScatterNdKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let x = inputs[0].ok_or_else(missing)?;
        let idx = inputs[1].ok_or_else(missing)?.to_i64_vec()?;
        let upd = inputs[2].ok_or_else(missing)?;
        if x.dtype() == DataType::Bool {
            return Err(Error::new(Status::UnsupportedDatatype, "ScatterND of bool"));
        }
        crate::dispatch_numeric!(x.dtype(), T => self.compute::<T>(x, &idx, upd, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build_scatter_nd(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(3, 3, 1, 1)?;
    let (x, idx, upd) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    if x.shape.is_empty() || idx.shape.is_empty() {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "data {:?} and indices {:?} must have rank ≥ 1",
                x.shape, idx.shape
            ),
        ));
    }
    let tuple = *idx.shape.last().unwrap_or(&0);
    let mut want = idx.shape[..idx.shape.len().saturating_sub(1)].to_vec();
    want.extend_from_slice(x.shape.get(tuple..).unwrap_or(&[]));
    if idx.dtype != DataType::I64
        || tuple > x.shape.len()
        || *upd.shape != want[..]
        || upd.dtype != x.dtype
    {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "data {:?}, indices {:?}, updates {:?}",
                x.shape, idx.shape, upd.shape
            ),
        ));
    }
    Ok(Built {
        outputs: vec![(x.dtype, x.shape.to_vec())],
        kernel: Box::new(ScatterNdKernel {
            data_shape: x.shape.to_vec(),
            tuple,
            tuples: idx.shape[..idx.shape.len() - 1].iter().product(),
            slice: x.shape[tuple..].iter().product(),
            reduction: reduction(ctx)?,
        }),
    })
}

struct ScatterElementsKernel {
    data_shape: Vec<usize>,
    idx_shape: Vec<usize>,
    axis: usize,
    reduction: Reduction,
}

impl ScatterElementsKernel {
    fn compute<T: Elem + Scalar>(
        &self,
        x: &Tensor,
        idx: &[i64],
        upd: &Tensor,
        out: &mut Tensor,
    ) -> Result<()> {
        let out = out.as_mut_slice::<T>()?;
        out.copy_from_slice(x.as_slice::<T>()?);
        let upd = upd.as_slice::<T>()?;
        let st = row_major_strides(&self.data_shape);
        let rank = self.idx_shape.len();
        let mut pos = vec![0usize; rank];
        for (&k, &u) in idx.iter().zip(upd) {
            let mut off = 0;
            for d in 0..rank {
                let i = if d == self.axis {
                    index(k, self.data_shape[d])?
                } else {
                    pos[d]
                };
                off += i * st[d];
            }
            out[off] = combine(self.reduction, out[off], u);
            for d in (0..rank).rev() {
                pos[d] += 1;
                if pos[d] < self.idx_shape[d] {
                    break;
                }
                pos[d] = 0;
            }
        }
        Ok(())
    }
}

impl Kernel for ScatterElementsKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let x = inputs[0].ok_or_else(missing)?;
        let idx = inputs[1].ok_or_else(missing)?.to_i64_vec()?;
        let upd = inputs[2].ok_or_else(missing)?;
        crate::dispatch_numeric!(x.dtype(), T => self.compute::<T>(x, &idx, upd, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build_scatter_elements(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(3, 3, 1, 1)?;
    let (x, idx, upd) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let rank = x.shape.len();
    if rank == 0 {
        return Err(ctx.err(
            Status::InvalidModel,
            "data is a scalar; ScatterElements needs rank ≥ 1",
        ));
    }
    if idx.shape != upd.shape
        || idx.shape.len() != rank
        || upd.dtype != x.dtype
        || !matches!(idx.dtype, DataType::I32 | DataType::I64)
    {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "data {:?}, indices {:?}, updates {:?}",
                x.shape, idx.shape, upd.shape
            ),
        ));
    }
    Ok(Built {
        outputs: vec![(x.dtype, x.shape.to_vec())],
        kernel: Box::new(ScatterElementsKernel {
            data_shape: x.shape.to_vec(),
            idx_shape: idx.shape.to_vec(),
            axis: ctx.axis(ctx.attr_int("axis", 0)?, rank)?,
            reduction: reduction(ctx)?,
        }),
    })
}
