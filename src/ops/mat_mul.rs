//! `MatMul`: numpy matrix product — 1-D operands promoted, batch dimensions broadcast.

use super::gemm::mat;
use super::util::{broadcast, f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::{Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::gemm::{sgemm, sgemm_packed, Epilogue, PackedB};

/// The `MatMul` operator.
pub static DEF: OpDef = OpDef {
    op_type: "MatMul",
    domain: "",
    min_opset: 1,
    attributes: &[],
    types: FLOAT,
    build,
};

struct MatMulKernel {
    m: usize,
    n: usize,
    k: usize,
    /// For each output batch, the batch index into A and into B.
    batches: Vec<(usize, usize)>,
    /// B prepacked, when it is a constant shared by every batch.
    packed_b: Option<std::sync::Arc<PackedB>>,
}

impl Kernel for MatMulKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let a = f32_of(inputs, 0)?;
        let b = f32_of(inputs, 1)?;
        let y = f32_out(&mut outputs[0])?;
        let (m, n, k) = (self.m, self.n, self.k);
        if let Some(pb) = &self.packed_b {
            sgemm_packed(1.0, mat(a, m, k, false), pb, 0.0, y, n, &Epilogue::NONE);
            return Ok(());
        }
        for (i, &(ia, ib)) in self.batches.iter().enumerate() {
            sgemm(
                1.0,
                mat(&a[ia * m * k..(ia + 1) * m * k], m, k, false),
                mat(&b[ib * k * n..(ib + 1) * k * n], k, n, false),
                0.0,
                &mut y[i * m * n..(i + 1) * m * n],
                n,
            );
        }
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let a = ctx.float_input(0)?;
    let b = ctx.float_input(1)?;
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
    if out_bytes > crate::exec::memory_limit() as u128 {
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
    let packed_b = match b.constant {
        Some(t)
            if batches.len() == 1
                && (a.shape.len() <= 2 || b_batch.iter().product::<usize>() == 1) =>
        {
            Some(ctx.prepared(1, &format!("matmul-b k{k} n{n}"), || {
                Ok(PackedB::new(mat(&t.as_f32()?[..k * n], k, n, false)))
            })?)
        }
        _ => None,
    };
    let mut out = batch.clone();
    if a.shape.len() > 1 {
        out.push(m);
    }
    if b.shape.len() > 1 {
        out.push(n);
    }
    Ok(Built {
        outputs: vec![(DataType::F32, out)],
        kernel: Box::new(MatMulKernel {
            m: m_run,
            n,
            k,
            batches,
            packed_b,
        }),
    })
}
