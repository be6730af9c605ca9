//! `MatMul`: numpy matrix product — 1-D operands promoted, batch dimensions broadcast.

use super::gemm::{mat, prepacked_b};
use super::util::{broadcast, f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT, NUMERIC};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};
use crate::kernels::activation::Activation;
use crate::kernels::cpu;
use crate::kernels::gemm::{sgemm_packed, sgemm_with, Bias, Epilogue, PackedB};
use rayon::prelude::*;

/// Batched products below this many flops each (`2·m·n·k`) run one batch per task, each on one
/// thread, instead of one after another with a parallel GEMM each (BERT-base's attention
/// products, 2·128·64·128 = 2 Mflop per head, are far below it).
const BATCH_PARALLEL_MAX_FLOPS: usize = 1 << 24;
use crate::kernels::scalar::Scalar;

/// The `MatMul` operator.
pub static DEF: OpDef = OpDef {
    op_type: "MatMul",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &[],
    types: NUMERIC,
    build,
};

/// `FusedMatMul` (internal): a float `MatMul` whose following bias `Add` (a constant with one
/// value per column, the optional third input) and activation run in its write-back.
pub static FUSED_DEF: OpDef = OpDef {
    op_type: "FusedMatMul",
    domain: super::INTERNAL_DOMAIN,
    min_opset: 1,
    newest: 1,
    attributes: &["activation", "activation_params"],
    types: FLOAT,
    build: build_fused,
};

struct MatMulKernel {
    m: usize,
    n: usize,
    k: usize,
    /// For each output batch, the batch index into A and into B.
    batches: Vec<(usize, usize)>,
    /// B prepacked, when it is a constant shared by every batch.
    packed_b: Option<std::sync::Arc<PackedB>>,
    /// One value per column added before the activation (`FusedMatMul`).
    bias: Option<Vec<f32>>,
    /// Applied last (`FusedMatMul`).
    activation: Activation,
}

impl MatMulKernel {
    /// Any other numeric type: a plain triple loop (floats accumulate in f64, integers wrap).
    fn generic<T: Elem + Scalar>(&self, a: &Tensor, b: &Tensor, y: &mut Tensor) -> Result<()> {
        let (a, b) = (a.as_slice::<T>()?, b.as_slice::<T>()?);
        let y = y.as_mut_slice::<T>()?;
        let (m, n, k) = (self.m, self.n, self.k);
        for (bi, &(ia, ib)) in self.batches.iter().enumerate() {
            let (a, b) = (&a[ia * m * k..][..m * k], &b[ib * k * n..][..k * n]);
            for i in 0..m {
                for j in 0..n {
                    y[(bi * m + i) * n + j] = if T::FLOAT {
                        T::of_f64(
                            (0..k)
                                .map(|p| a[i * k + p].as_f64() * b[p * n + j].as_f64())
                                .sum(),
                        )
                    } else {
                        (0..k).fold(T::ZERO, |acc, p| acc.add(a[i * k + p].mul(b[p * n + j])))
                    };
                }
            }
        }
        Ok(())
    }
}

impl Kernel for MatMulKernel {
    fn overwrites_outputs(&self) -> bool {
        true
    }

    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "MatMul input missing");
        let ta = inputs[0].ok_or_else(missing)?;
        if ta.dtype() != DataType::F32 {
            let tb = inputs[1].ok_or_else(missing)?;
            return crate::dispatch_numeric!(ta.dtype(), T => self.generic::<T>(ta, tb, &mut outputs[0]),
                other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))));
        }
        let a = f32_of(inputs, 0)?;
        let y = f32_out(&mut outputs[0])?;
        let (m, n, k) = (self.m, self.n, self.k);
        let ep = Epilogue {
            bias: self.bias.as_deref().map_or(Bias::None, Bias::PerCol),
            residual: None,
            activation: self.activation,
        };
        // A prepacked B (maybe held only packed, when its input is absent) is all that is read.
        if let Some(pb) = &self.packed_b {
            sgemm_packed(1.0, mat(a, m, k, false), pb, 0.0, y, n, &ep);
            return Ok(());
        }
        let b = f32_of(inputs, 1)?;
        // Small products of many batches (attention heads): one batch per task, each GEMM on
        // one thread; large ones: one after another, each GEMM parallel inside.
        let per_thread = self.batches.len() >= 2
            && rayon::current_num_threads() > 1
            && 2 * m * n * k < BATCH_PARALLEL_MAX_FLOPS;
        let product = |y: &mut [f32], &(ia, ib): &(usize, usize), parallel: bool| {
            sgemm_with(
                cpu::isa(),
                parallel,
                1.0,
                mat(&a[ia * m * k..(ia + 1) * m * k], m, k, false),
                mat(&b[ib * k * n..(ib + 1) * k * n], k, n, false),
                0.0,
                y,
                n,
                &ep,
            );
        };
        if m * n == 0 {
            // An empty product (a 0 among M and N) has nothing to write.
            return Ok(());
        }
        let y = &mut y[..self.batches.len() * m * n];
        if per_thread {
            y.par_chunks_mut(m * n)
                .zip(self.batches.par_iter())
                .for_each(|(y, ab)| product(y, ab, false));
        } else {
            y.chunks_mut(m * n)
                .zip(&self.batches)
                .for_each(|(y, ab)| product(y, ab, true));
        }
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let (kernel, out) = plan(ctx)?;
    Ok(Built {
        outputs: vec![(ctx.input(0)?.dtype, out)],
        kernel: Box::new(kernel),
    })
}

fn build_fused(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 3, 1, 1)?;
    ctx.float_input(0)?;
    let (mut kernel, out) = plan(ctx)?;
    kernel.activation = super::fused_activation(ctx)?;
    if ctx.opt_input(2).is_some() {
        let bias = ctx.float_input(2)?;
        match bias.constant {
            Some(t) if bias.shape == [kernel.n] => kernel.bias = Some(t.as_f32()?.to_vec()),
            _ => {
                return Err(ctx.err(
                    Status::InvalidModel,
                    format!(
                        "the fused bias must be a constant of shape [{}], not {:?}",
                        kernel.n, bias.shape
                    ),
                ))
            }
        }
    }
    Ok(Built {
        outputs: vec![(DataType::F32, out)],
        kernel: Box::new(kernel),
    })
}

/// The kernel of a `MatMul` of the two first inputs, and its output shape.
fn plan(ctx: &BuildCtx) -> Result<(MatMulKernel, Vec<usize>)> {
    let a = ctx.input(0)?;
    let b = ctx.input(1)?;
    if a.dtype != b.dtype || !(a.dtype.is_float() || a.dtype.is_integer()) {
        return Err(ctx.err(
            Status::UnsupportedDatatype,
            format!("inputs are {} and {}", a.dtype.name(), b.dtype.name()),
        ));
    }
    if a.shape.is_empty() || b.shape.is_empty() {
        return Err(ctx.err(Status::InvalidModel, "MatMul operands must have rank ≥ 1"));
    }
    // Promote 1-D operands to matrices; remember which axes to drop from the result.
    let a2: Vec<usize> = if a.shape.len() == 1 {
        vec![1, a.shape[0]]
    } else {
        a.shape.to_vec()
    };
    let b2: Vec<usize> = if b.shape.len() == 1 {
        vec![b.shape[0], 1]
    } else {
        b.shape.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != k2 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("inner dimensions differ: {:?} × {:?}", a.shape, b.shape),
        ));
    }
    let a_batch = &a2[..a2.len() - 2];
    let b_batch = &b2[..b2.len() - 2];
    let batch = broadcast(a_batch, b_batch).ok_or_else(|| {
        ctx.err(
            Status::InvalidModel,
            format!(
                "batch dimensions of {:?} and {:?} do not broadcast",
                a.shape, b.shape
            ),
        )
    })?;
    // Map every output batch index to the A and B batch it reads (broadcast dims read index 0).
    let index_in = |src: &[usize], out_idx: &[usize]| -> usize {
        let off = out_idx.len() - src.len();
        src.iter().enumerate().fold(0, |acc, (i, &d)| {
            acc * d + if d == 1 { 0 } else { out_idx[off + i] }
        })
    };
    // Refuse outputs that cannot fit before preparing anything proportional to them.
    let total = crate::ir::numel(&batch).map_err(|e| ctx.err(e.status, e.message))?;
    let out_bytes = (total as u128) * (m.max(1) * n.max(1)) as u128 * 4;
    if out_bytes > crate::backend::memory_limit() as u128 {
        return Err(ctx.err(
            Status::NoSystemMemory,
            format!("an output of {total} matrices of {m}×{n} does not fit in memory"),
        ));
    }
    let mut batches = Vec::new();
    batches.try_reserve_exact(total).map_err(|_| {
        ctx.err(
            Status::NoSystemMemory,
            format!("{total} batches do not fit in memory"),
        )
    })?;
    let mut idx = vec![0usize; batch.len()];
    for _ in 0..total {
        batches.push((index_in(a_batch, &idx), index_in(b_batch, &idx)));
        for d in (0..batch.len()).rev() {
            idx[d] += 1;
            if idx[d] < batch[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    // With B shared by every batch and A contiguous, fold the batches of A into M.
    let (m_run, batches) = if b_batch.iter().product::<usize>() == 1
        && batches.iter().enumerate().all(|(i, &(ia, _))| ia == i)
    {
        (m * total, vec![(0, 0)])
    } else {
        (m, batches)
    };
    let shared_b = a.dtype == DataType::F32
        && batches.len() == 1
        && (a.shape.len() <= 2 || b_batch.iter().product::<usize>() == 1);
    let packed_b = if shared_b {
        prepacked_b(ctx, &b, (k, n, false))?
    } else {
        None
    };
    let mut out = batch.clone();
    if a.shape.len() > 1 {
        out.push(m);
    }
    if b.shape.len() > 1 {
        out.push(n);
    }
    Ok((
        MatMulKernel {
            m: m_run,
            n,
            k,
            batches,
            packed_b,
            bias: None,
            activation: Activation::None,
        },
        out,
    ))
}
