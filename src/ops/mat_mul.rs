//! `MatMul`: numpy matrix product — 1-D operands promoted, batch dimensions broadcast.

use super::gemm::prepacked_b;
use super::util::{broadcast, f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT, NUMERIC};
use crate::error::{Error, Result, Status};
use crate::ir::{row_major_strides, DataType, Elem, Tensor};
use crate::kernels::activation::Activation;
use crate::kernels::cpu;
use crate::kernels::gemm::{sgemm_packed, sgemm_with, Bias, Epilogue, MatRef, PackedB};
use crate::kernels::{broadcast, scratch};
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

/// `FusedMatMul` (internal): `Y = act(alpha · A′·B′ + bias + Z)`, a float32 `MatMul` with what
/// the graph rewrites (`exec::fuse::matmul`) fold into it:
/// - `perm_a`, `perm_b`: the operands are `Transpose(A, perm_a)` and `Transpose(B, perm_b)` of
///   the inputs, read in place through strides (attention's heads);
/// - `alpha`: a following `Mul` or `Div` by a constant (attention's 1/√d);
/// - input 2: a following `Add` of a constant bias of one value per column;
/// - input 3: a following `Add` of any tensor `Z` that broadcasts to the product (a residual, an
///   attention mask), added in the write-back when it is a matrix or a row per batch;
/// - `activation`: a following activation.
pub static FUSED_DEF: OpDef = OpDef {
    op_type: "FusedMatMul",
    domain: super::INTERNAL_DOMAIN,
    min_opset: 1,
    newest: 1,
    attributes: &[
        "activation",
        "activation_params",
        "alpha",
        "perm_a",
        "perm_b",
    ],
    types: FLOAT,
    build: build_fused,
};

/// Where an operand's matrices' elements are in its stored tensor: `row·i + col·j` from the
/// start of a batch's matrix (a plain row-major `r×c` matrix: `row = c`, `col = 1`).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Strides {
    row: usize,
    col: usize,
}

/// How a `FusedMatMul` adds its input `Z`.
#[derive(Debug)]
enum Addend {
    /// Per batch, the offset of its `m×n` matrix in `Z` (rows `n` apart), added in the
    /// write-back as a residual.
    Matrix(Vec<usize>),
    /// Per batch, the offset of one row of `n` values in `Z`, added to every row of the
    /// batch's product in the write-back (as a per-column bias).
    Row(Vec<usize>),
    /// Any other broadcast (or a row together with a constant bias): the product, of shape
    /// `product`, goes to scratch first, and `Z` (of shape `z`) is added to it element by
    /// element into the output, of shape `out`, then the activation applied.
    General {
        product: Vec<usize>,
        z: Vec<usize>,
        out: Vec<usize>,
    },
}

struct MatMulKernel {
    m: usize,
    n: usize,
    k: usize,
    /// For each output batch, the offsets of its A and B matrices in the inputs.
    batches: Vec<(usize, usize)>,
    /// A's and B's matrices' strides.
    strides: (Strides, Strides),
    /// B prepacked, when it is a constant shared by every batch.
    packed_b: Option<std::sync::Arc<PackedB>>,
    /// `alpha` (`FusedMatMul`; 1 otherwise).
    alpha: f32,
    /// One value per column added before the activation (`FusedMatMul`).
    bias: Option<Vec<f32>>,
    /// Input 3 of a `FusedMatMul`, and how it is added.
    addend: Option<Addend>,
    /// Applied last (`FusedMatMul`).
    activation: Activation,
}

impl MatMulKernel {
    /// Any other numeric type: a plain triple loop (floats accumulate in f64, integers wrap).
    fn generic<T: Elem + Scalar>(&self, a: &Tensor, b: &Tensor, y: &mut Tensor) -> Result<()> {
        let (a, b) = (a.as_slice::<T>()?, b.as_slice::<T>()?);
        let y = y.as_mut_slice::<T>()?;
        let (m, n, k) = (self.m, self.n, self.k);
        let (sa, sb) = self.strides;
        for (bi, &(oa, ob)) in self.batches.iter().enumerate() {
            let at = |i: usize, p: usize| a[oa + i * sa.row + p * sa.col];
            let bt = |p: usize, j: usize| b[ob + p * sb.row + j * sb.col];
            for i in 0..m {
                for j in 0..n {
                    y[(bi * m + i) * n + j] = if T::FLOAT {
                        T::of_f64((0..k).map(|p| at(i, p).as_f64() * bt(p, j).as_f64()).sum())
                    } else {
                        (0..k).fold(T::ZERO, |acc, p| acc.add(at(i, p).mul(bt(p, j))))
                    };
                }
            }
        }
        Ok(())
    }

    /// The write-back of batch `bi`: the constant bias, or `Z`'s row or matrix for it.
    fn epilogue<'e>(&'e self, z: &'e [f32], bi: usize, activation: Activation) -> Epilogue<'e> {
        let (m, n) = (self.m, self.n);
        let bias = match (&self.bias, &self.addend) {
            (Some(b), _) => Bias::PerCol(b),
            (None, Some(Addend::Row(offsets))) => Bias::PerCol(&z[offsets[bi]..][..n]),
            _ => Bias::None,
        };
        let residual = match &self.addend {
            Some(Addend::Matrix(offsets)) => Some((&z[offsets[bi]..][..m * n], n)),
            _ => None,
        };
        Epilogue {
            bias,
            residual,
            activation,
        }
    }

    /// The products of every batch into `y` (batch after batch, `m×n` each), with the
    /// write-back of [`MatMulKernel::epilogue`] and `activation`.
    fn products(
        &self,
        a: &[f32],
        b: Option<&[f32]>,
        z: &[f32],
        y: &mut [f32],
        act: Activation,
    ) -> Result<()> {
        let (m, n, k) = (self.m, self.n, self.k);
        let (sa, sb) = self.strides;
        let a_mat = |oa: usize| MatRef {
            data: &a[oa..],
            rows: m,
            cols: k,
            row_stride: sa.row,
            col_stride: sa.col,
        };
        // A prepacked B (maybe held only packed, when its input is absent) is all that is read.
        if let Some(pb) = &self.packed_b {
            let ep = self.epilogue(z, 0, act);
            sgemm_packed(self.alpha, a_mat(self.batches[0].0), pb, 0.0, y, n, &ep);
            return Ok(());
        }
        let b = b.ok_or_else(|| Error::new(Status::InternalError, "MatMul input missing"))?;
        // Small products of many batches (attention heads): one batch per task, each GEMM on
        // one thread; large ones: one after another, each GEMM parallel inside.
        let per_thread = self.batches.len() >= 2
            && rayon::current_num_threads() > 1
            && 2 * m * n * k < BATCH_PARALLEL_MAX_FLOPS;
        let product = |y: &mut [f32], bi: usize, parallel: bool| {
            let (oa, ob) = self.batches[bi];
            let b_mat = MatRef {
                data: &b[ob..],
                rows: k,
                cols: n,
                row_stride: sb.row,
                col_stride: sb.col,
            };
            let ep = self.epilogue(z, bi, act);
            sgemm_with(
                cpu::isa(),
                parallel,
                self.alpha,
                a_mat(oa),
                b_mat,
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
                .enumerate()
                .for_each(|(bi, y)| product(y, bi, false));
        } else {
            y.chunks_mut(m * n)
                .enumerate()
                .for_each(|(bi, y)| product(y, bi, true));
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
        let b = match self.packed_b {
            Some(_) => None,
            None => Some(f32_of(inputs, 1)?),
        };
        let z = match self.addend {
            Some(_) => f32_of(inputs, 3)?,
            None => &[],
        };
        let y = f32_out(&mut outputs[0])?;
        match &self.addend {
            Some(Addend::General {
                product,
                z: zs,
                out,
            }) => {
                let len = product.iter().product();
                scratch::with_f32(len, |p| -> Result<()> {
                    self.products(a, b, z, p, Activation::None)?;
                    broadcast::map2((p, product), (z, zs), y, out, |p, z| p + z);
                    Ok(())
                })?;
                self.activation.apply(y);
                Ok(())
            }
            _ => self.products(a, b, z, y, self.activation),
        }
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let (kernel, out) = plan(ctx, (None, None), None)?;
    Ok(Built {
        outputs: vec![(ctx.input(0)?.dtype, out)],
        kernel: Box::new(kernel),
    })
}

fn build_fused(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 4, 1, 1)?;
    ctx.float_input(0)?;
    let perm =
        |name: &str| -> Result<Option<Vec<i64>>> { Ok(ctx.attr_ints(name)?.map(<[i64]>::to_vec)) };
    let (perm_a, perm_b) = (perm("perm_a")?, perm("perm_b")?);
    let b = ctx.float_input(1)?;
    if perm_b.is_some() && (b.constant.is_some() || b.weight.is_some()) {
        return Err(ctx.err(
            Status::InvalidModel,
            "perm_b transposes a run-time B; a constant B is transposed by folding",
        ));
    }
    let bias = match ctx.opt_input(2) {
        None => None,
        Some(_) => Some(ctx.float_input(2)?),
    };
    let addend = match ctx.opt_input(3) {
        None => None,
        Some(_) => Some(ctx.float_input(3)?.shape),
    };
    let (mut kernel, out) = plan(ctx, (perm_a, perm_b), addend)?;
    kernel.activation = super::fused_activation(ctx)?;
    kernel.alpha = ctx.attr_float("alpha", 1.0)?;
    if let Some(bias) = bias {
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
        // One bias per column at a time in the write-back: a row of Z is added after.
        if let Some(Addend::Row(_)) = kernel.addend {
            kernel.addend = Some(general_addend(&out, ctx.float_input(3)?.shape));
        }
    }
    let out = match &kernel.addend {
        Some(Addend::General { out, .. }) => out.clone(),
        _ => out,
    };
    Ok(Built {
        outputs: vec![(DataType::F32, out)],
        kernel: Box::new(kernel),
    })
}

/// An operand's shape as the product reads it and the stride of each of its dimensions in the
/// stored (row-major) tensor of shape `stored`: that tensor, or its transpose by `perm`.
fn view(
    ctx: &BuildCtx,
    stored: &[usize],
    perm: Option<&[i64]>,
) -> Result<(Vec<usize>, Vec<usize>)> {
    let strides = row_major_strides(stored);
    let Some(perm) = perm else {
        return Ok((stored.to_vec(), strides));
    };
    let mut seen = vec![false; stored.len()];
    let valid = perm.len() == stored.len()
        && perm.iter().all(|&p| {
            usize::try_from(p)
                .ok()
                .filter(|&p| p < seen.len() && !seen[p])
                .map(|p| seen[p] = true)
                .is_some()
        });
    if !valid {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "perm {perm:?} is not a permutation of the {} axes of {stored:?}",
                stored.len()
            ),
        ));
    }
    Ok(perm
        .iter()
        .map(|&p| (stored[p as usize], strides[p as usize]))
        .unzip())
}

/// The offset of the matrix at output batch index `idx` in an operand whose batch dimensions
/// are `dims` (aligned to the right of `idx`; a dimension of 1 broadcasts) with strides `strides`.
fn batch_offset(dims: &[usize], strides: &[usize], idx: &[usize]) -> usize {
    let off = idx.len() - dims.len();
    dims.iter()
        .zip(strides)
        .enumerate()
        .map(|(i, (&d, &s))| if d == 1 { 0 } else { idx[off + i] * s })
        .sum()
}

/// The general way to add `Z` of shape `z` to a product of shape `product` (the shapes
/// broadcast: checked by [`plan`]).
fn general_addend(product: &[usize], z: &[usize]) -> Addend {
    Addend::General {
        product: product.to_vec(),
        z: z.to_vec(),
        out: broadcast(product, z).unwrap_or_else(|| product.to_vec()),
    }
}

/// The kernel of a `MatMul` of the two first inputs, read through the transposes `perms`, with
/// the addend of shape `addend` (`FusedMatMul`'s input 3), and the product's shape.
fn plan(
    ctx: &BuildCtx,
    (perm_a, perm_b): (Option<Vec<i64>>, Option<Vec<i64>>),
    addend: Option<&[usize]>,
) -> Result<(MatMulKernel, Vec<usize>)> {
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
    let (a_shape, a_str) = view(ctx, a.shape, perm_a.as_deref())?;
    let (b_shape, b_str) = view(ctx, b.shape, perm_b.as_deref())?;
    // Promote 1-D operands to matrices; remember which axes to drop from the result.
    let (a2, a_str2) = if a_shape.len() == 1 {
        (vec![1, a_shape[0]], vec![a_shape[0], a_str[0]])
    } else {
        (a_shape.clone(), a_str)
    };
    let (b2, b_str2) = if b_shape.len() == 1 {
        (vec![b_shape[0], 1], vec![b_str[0], 1])
    } else {
        (b_shape.clone(), b_str)
    };
    let (ra, rb) = (a2.len(), b2.len());
    let (m, k) = (a2[ra - 2], a2[ra - 1]);
    let (k2, n) = (b2[rb - 2], b2[rb - 1]);
    if k != k2 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("inner dimensions differ: {a_shape:?} × {b_shape:?}"),
        ));
    }
    let strides = (
        Strides {
            row: a_str2[ra - 2],
            col: a_str2[ra - 1],
        },
        Strides {
            row: b_str2[rb - 2],
            col: b_str2[rb - 1],
        },
    );
    let a_batch = &a2[..ra - 2];
    let b_batch = &b2[..rb - 2];
    let batch = broadcast(a_batch, b_batch).ok_or_else(|| {
        ctx.err(
            Status::InvalidModel,
            format!("batch dimensions of {a_shape:?} and {b_shape:?} do not broadcast"),
        )
    })?;
    // Refuse outputs that cannot fit before preparing anything proportional to them.
    let total = crate::ir::numel(&batch).map_err(|e| ctx.err(e.status, e.message))?;
    let out_bytes = (total as u128) * (m.max(1) * n.max(1)) as u128 * 4;
    if out_bytes > crate::backend::memory_limit() as u128 {
        return Err(ctx.err(
            Status::NoSystemMemory,
            format!("an output of {total} matrices of {m}×{n} does not fit in memory"),
        ));
    }
    let mut out = batch.clone();
    if a_shape.len() > 1 {
        out.push(m);
    }
    if b_shape.len() > 1 {
        out.push(n);
    }
    if let Some(zs) = addend {
        if broadcast(&out, zs).is_none() {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("the addend of shape {zs:?} does not broadcast with the product {out:?}"),
            ));
        }
    }
    // How Z adds: a matrix or a row per batch (its offsets filled below), else in general.
    let z_form = addend.map(|zs| {
        let r = out.len();
        let fits = zs.len() <= r
            && a_shape.len() > 1
            && b_shape.len() > 1
            && broadcast(&out, zs).as_deref() == Some(out.as_slice());
        let padded: Vec<usize> = std::iter::repeat_n(1, r.saturating_sub(zs.len()))
            .chain(zs.iter().copied())
            .collect();
        let z_str = row_major_strides(&padded);
        match fits.then(|| (padded[r - 2], padded[r - 1])) {
            Some((zm, zn)) if zm == m && zn == n => Some((true, padded, z_str)),
            Some((1, zn)) if zn == n => Some((false, padded, z_str)),
            _ => None,
        }
        .ok_or_else(|| general_addend(&out, zs))
    });
    let mut batches = per_batch(ctx, total)?;
    let mut z_offsets = match &z_form {
        Some(Ok(_)) => per_batch(ctx, total)?,
        _ => Vec::new(),
    };
    let (a_bstr, b_bstr) = (&a_str2[..ra - 2], &b_str2[..rb - 2]);
    let mut idx = vec![0usize; batch.len()];
    for _ in 0..total {
        batches.push((
            batch_offset(a_batch, a_bstr, &idx),
            batch_offset(b_batch, b_bstr, &idx),
        ));
        if let Some(Ok((_, zp, zs))) = &z_form {
            let r = zp.len();
            z_offsets.push(batch_offset(&zp[..r - 2], &zs[..r - 2], &idx));
        }
        for d in (0..batch.len()).rev() {
            idx[d] += 1;
            if idx[d] < batch[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    // With B shared by every batch and A's matrices one after another, fold the batches of A
    // into M (and a Z that follows them, or the same row for all).
    let a_rows_follow = strides.0 == (Strides { row: k, col: 1 })
        && batches
            .iter()
            .enumerate()
            .all(|(i, &(oa, _))| oa == i * m * k);
    let z_follows = match &z_form {
        Some(Ok((true, ..))) => z_offsets.iter().enumerate().all(|(i, &o)| o == i * m * n),
        Some(Ok((false, ..))) => z_offsets.iter().all(|&o| o == z_offsets[0]),
        _ => true,
    };
    let fold = total > 1 && b_batch.iter().product::<usize>() == 1 && a_rows_follow && z_follows;
    let (m_run, batches) = if fold {
        z_offsets.truncate(1);
        (m * total, vec![(0, batches[0].1)])
    } else {
        (m, batches)
    };
    let addend = z_form.map(|f| match f {
        Ok((true, ..)) => Addend::Matrix(z_offsets.clone()),
        Ok((false, ..)) => Addend::Row(z_offsets.clone()),
        Err(general) => general,
    });
    let shared_b = a.dtype == DataType::F32
        && batches.len() == 1
        && perm_b.is_none()
        && (a_shape.len() <= 2 || b_batch.iter().product::<usize>() == 1);
    let packed_b = if shared_b {
        prepacked_b(ctx, &b, (k, n, false))?
    } else {
        None
    };
    Ok((
        MatMulKernel {
            m: m_run,
            n,
            k,
            batches,
            strides,
            packed_b,
            alpha: 1.0,
            bias: None,
            addend,
            activation: Activation::None,
        },
        out,
    ))
}

/// An empty vector with room for an entry per batch of `total`, or NO_SYSTEM_MEMORY.
fn per_batch<T>(ctx: &BuildCtx, total: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(total).map_err(|_| {
        ctx.err(
            Status::NoSystemMemory,
            format!("{total} batches do not fit in memory"),
        )
    })?;
    Ok(v)
}
