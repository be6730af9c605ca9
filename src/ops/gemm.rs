//! `Gemm`: `Y = alpha · A' · B' + beta · C`, with optional transposes and a broadcast `C`.
//! A constant `B` is prepacked once; a `C` that is one value per column (or per row) becomes the
//! GEMM's fused bias, and a following activation (internal `FusedGemm`) its fused epilogue.

use super::util::{broadcast, f32_of, f32_out, InputInfo};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::{Error, Result, Status};
use crate::exec::WeightCache;
use crate::ir::{Attr, DataType, Node, Tensor, ValueId};
use crate::kernels::activation::Activation;
use crate::kernels::cpu;
use crate::kernels::gemm::{sgemm_ep, sgemm_packed, Bias, Epilogue, MatRef, PackedB};
use std::sync::Arc;

/// The `Gemm` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Gemm",
    domain: "",
    min_opset: 1,
    newest: 13,
    attributes: &["alpha", "beta", "transA", "transB", "broadcast"],
    types: FLOAT,
    build,
};

/// `FusedGemm` (internal): a `Gemm` whose following activation runs in its write-back.
pub static FUSED_DEF: OpDef = OpDef {
    op_type: "FusedGemm",
    domain: super::INTERNAL_DOMAIN,
    min_opset: 1,
    newest: 1,
    attributes: &[
        "alpha",
        "beta",
        "transA",
        "transB",
        "broadcast",
        "activation",
        "activation_params",
    ],
    types: FLOAT,
    build: build_fused,
};

/// How `beta · C` enters the result.
enum CTerm {
    /// No C, or beta = 0.
    None,
    /// A constant per-column or per-row vector, already scaled by beta: the fused bias.
    Bias { per_row: bool, values: Vec<f32> },
    /// Anything else: C broadcast into Y first, accumulated with this beta.
    Dense { shape: Vec<usize>, beta: f32 },
}

struct GemmKernel {
    m: usize,
    n: usize,
    k: usize,
    trans_a: bool,
    trans_b: bool,
    alpha: f32,
    packed_b: Option<std::sync::Arc<PackedB>>,
    c: CTerm,
    activation: Activation,
}

/// The weight-cache tag of a constant B (`k × n` after its transpose, if `trans_b`) packed for
/// a GEMM: the same for `Gemm` and `MatMul` (`trans_b` false), whose packings are identical;
/// `pairs`: packed as bfloat16 pairs.
fn packed_b_tag(k: usize, n: usize, trans_b: bool, pairs: bool) -> String {
    let form = if pairs { " bf16" } else { "" };
    format!("gemm-b k{k} n{n} t{trans_b}{form}")
}

/// Whether a constant B of a node of half-precision type `half` (`None`: float32) is packed
/// as bfloat16 pairs: for bfloat16 nodes where the CPU multiplies them (AVX512_BF16;
/// `PackedB::bf16_pairs`). The product then rounds A to bfloat16 as it packs it (A is a
/// bfloat16 value of the model, though an earlier node may have left it in float32), and does
/// twice the work per instruction.
fn packs_pairs(half: Option<DataType>) -> bool {
    half == Some(DataType::BF16) && cpu::bf16_dot()
}

/// `data` (B, `k × n` after its transpose, if `trans_b`) packed for the GEMM, as bfloat16 pairs
/// when `pairs`.
fn pack_b(data: &[f32], (k, n, trans_b): (usize, usize, bool), pairs: bool) -> Result<PackedB> {
    let b = mat(&data[..k * n], k, n, trans_b);
    if !pairs {
        return Ok(PackedB::new(b));
    }
    PackedB::bf16_pairs(b).ok_or_else(|| Error::new(Status::InternalError, "no AVX512_BF16"))
}

/// B prepacked (`k × n` after its transpose, if `trans_b`), shared by every plan of the graph:
/// packed from its data when it is a constant, found packed when it is a weight held only in
/// packed form (`ValueInfo::packed_only`); `None` when B is known only at run time. A bfloat16
/// node's B is in bfloat16 pairs where [`packs_pairs`] says so.
pub(super) fn prepacked_b(
    ctx: &BuildCtx,
    b: &InputInfo,
    (k, n, trans_b): (usize, usize, bool),
) -> Result<Option<Arc<PackedB>>> {
    let pairs = packs_pairs(ctx.half);
    let tag = packed_b_tag(k, n, trans_b, pairs);
    match (b.constant, b.weight) {
        (Some(t), _) => {
            Ok(Some(ctx.prepared(1, &tag, || {
                pack_b(t.as_f32()?, (k, n, trans_b), pairs)
            })?))
        }
        (None, Some(_)) => Ok(Some(ctx.prepared(1, &tag, || {
            Err(ctx.err(
                Status::InternalError,
                format!("B is held packed for another shape than {k}×{n}"),
            ))
        })?)),
        (None, None) => Ok(None),
    }
}

/// Whether `node` reads input `input` only in the packed form [`prepack_weight`] makes when that
/// input is a float32 matrix weight: B of `Gemm` and `MatMul` (and their fused forms).
pub fn packs_weight(node: &Node, input: usize) -> bool {
    let default = node.domain.is_empty() || node.domain == "ai.onnx";
    let internal = node.domain == super::INTERNAL_DOMAIN;
    input == 1
        && match node.op_type.as_str() {
            "Gemm" | "MatMul" => default,
            "FusedGemm" | "FusedMatMul" => internal,
            _ => false,
        }
}

/// Packs `weight` (graph value `id`, a float32 matrix; `widened_from`: the half-precision type
/// it was widened from at load, which is then `node`'s type) into `cache` as `node`'s builds
/// will ask for it, ahead of planning (see [`packs_weight`]).
pub fn prepack_weight(
    node: &Node,
    (id, widened_from): (ValueId, Option<DataType>),
    weight: &Tensor,
    cache: &WeightCache,
) -> Result<()> {
    let trans_b = node.op_type.ends_with("Gemm")
        && matches!(node.attrs.get("transB"), Some(Attr::Int(t)) if *t != 0);
    let (rows, cols) = match weight.shape[..] {
        [rows, cols] => (rows, cols),
        _ => {
            return Err(Error::new(
                Status::InternalError,
                "only a matrix is prepacked",
            ))
        }
    };
    let (k, n) = if trans_b { (cols, rows) } else { (rows, cols) };
    let data = weight.as_f32()?;
    let pairs = packs_pairs(widened_from);
    cache.get_or_make(id, &packed_b_tag(k, n, trans_b, pairs), || {
        pack_b(data, (k, n, trans_b), pairs)
    })?;
    Ok(())
}

/// A row-major `rows × cols` matrix, or its transpose when `trans` (stored `cols × rows`).
pub fn mat(data: &[f32], rows: usize, cols: usize, trans: bool) -> MatRef<'_> {
    if trans {
        MatRef {
            data,
            rows,
            cols,
            row_stride: 1,
            col_stride: rows,
        }
    } else {
        MatRef {
            data,
            rows,
            cols,
            row_stride: cols,
            col_stride: 1,
        }
    }
}

/// Writes `c` (of a shape that broadcasts to `[m, n]`) broadcast into `y`.
fn broadcast_rows(c: &[f32], c_shape: &[usize], y: &mut [f32], m: usize, n: usize) {
    let (rows, cols) = match c_shape {
        [] => (1, 1),
        [x] => (1, *x),
        [r, x] => (*r, *x),
        _ => unreachable!("checked when built"),
    };
    for i in 0..m {
        let src = if rows == 1 { 0 } else { i };
        let row = &mut y[i * n..(i + 1) * n];
        if cols == 1 {
            row.fill(c[src]);
        } else {
            row.copy_from_slice(&c[src * n..(src + 1) * n]);
        }
    }
}

impl Kernel for GemmKernel {
    fn overwrites_outputs(&self) -> bool {
        true
    }

    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let a = mat(f32_of(inputs, 0)?, self.m, self.k, self.trans_a);
        let y = f32_out(&mut outputs[0])?;
        let mut beta = 0.0;
        let mut ep = Epilogue {
            bias: Bias::None,
            residual: None,
            activation: self.activation,
        };
        match &self.c {
            CTerm::None => {}
            CTerm::Bias {
                per_row: true,
                values,
            } => ep.bias = Bias::PerRow(values),
            CTerm::Bias {
                per_row: false,
                values,
            } => ep.bias = Bias::PerCol(values),
            CTerm::Dense { shape, beta: b } => {
                broadcast_rows(f32_of(inputs, 2)?, shape, y, self.m, self.n);
                beta = *b;
            }
        }
        match &self.packed_b {
            Some(pb) => sgemm_packed(self.alpha, a, pb, beta, y, self.n, &ep),
            None => {
                let b = mat(f32_of(inputs, 1)?, self.k, self.n, self.trans_b);
                sgemm_ep(self.alpha, a, b, beta, y, self.n, &ep)
            }
        }
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    build_with(ctx, Activation::None)
}

fn build_fused(ctx: &BuildCtx) -> Result<Built> {
    build_with(ctx, super::fused_activation(ctx)?)
}

fn build_with(ctx: &BuildCtx, activation: Activation) -> Result<Built> {
    ctx.arity(2, 3, 1, 1)?;
    let a = ctx.float_input(0)?;
    let b = ctx.float_input(1)?;
    let trans_a = ctx.attr_int("transA", 0)? != 0;
    let trans_b = ctx.attr_int("transB", 0)? != 0;
    if a.shape.len() != 2 || b.shape.len() != 2 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("A {:?} and B {:?} must be matrices", a.shape, b.shape),
        ));
    }
    let (m, k) = if trans_a {
        (a.shape[1], a.shape[0])
    } else {
        (a.shape[0], a.shape[1])
    };
    let (k2, n) = if trans_b {
        (b.shape[1], b.shape[0])
    } else {
        (b.shape[0], b.shape[1])
    };
    if k != k2 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("inner dimensions differ: A' is {m}×{k}, B' is {k2}×{n}"),
        ));
    }
    let beta = ctx.attr_float("beta", 1.0)?;
    let c = match ctx.opt_input(2) {
        None => CTerm::None,
        Some(_) => {
            let c = ctx.float_input(2)?;
            if c.shape.len() > 2 || broadcast(c.shape, &[m, n]).as_deref() != Some(&[m, n][..]) {
                return Err(ctx.err(
                    Status::InvalidModel,
                    format!("C {:?} does not broadcast to [{m}, {n}]", c.shape),
                ));
            }
            let numel: usize = c.shape.iter().product();
            let per_col = numel == n && c.shape.last() == Some(&n) && n > 1;
            let per_row = numel == m && c.shape == [m, 1] && m > 1;
            match c.constant {
                _ if beta == 0.0 => CTerm::None,
                Some(t) if per_col || per_row => CTerm::Bias {
                    per_row,
                    values: t.as_f32()?.iter().map(|v| v * beta).collect(),
                },
                _ => CTerm::Dense {
                    shape: c.shape.to_vec(),
                    beta,
                },
            }
        }
    };
    let packed_b = prepacked_b(ctx, &b, (k, n, trans_b))?;
    Ok(Built {
        outputs: vec![(DataType::F32, vec![m, n])],
        kernel: Box::new(GemmKernel {
            m,
            n,
            k,
            trans_a,
            trans_b,
            alpha: ctx.attr_float("alpha", 1.0)?,
            packed_b,
            c,
            activation,
        }),
    })
}
