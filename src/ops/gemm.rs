//! `Gemm`: `Y = alpha · A' · B' + beta · C`, with optional transposes and a broadcast `C`.

use super::util::{broadcast, f32_of, f32_out};
use super::{BuildCtx, Built, Kernel, OpDef, FLOAT};
use crate::error::{Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::gemm::{sgemm, MatRef};

/// The `Gemm` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Gemm",
    domain: "",
    min_opset: 1,
    attributes: &["alpha", "beta", "transA", "transB", "broadcast"],
    types: FLOAT,
    build,
};

struct GemmKernel {
    m: usize,
    n: usize,
    k: usize,
    trans_a: bool,
    trans_b: bool,
    alpha: f32,
    beta: f32,
    c_shape: Option<Vec<usize>>,
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
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let a = f32_of(inputs, 0)?;
        let b = f32_of(inputs, 1)?;
        let y = f32_out(&mut outputs[0])?;
        let mut beta = 0.0;
        if let Some(c_shape) = &self.c_shape {
            if self.beta != 0.0 {
                // Y starts as C broadcast to [m, n]; the product accumulates onto it.
                broadcast_rows(f32_of(inputs, 2)?, c_shape, y, self.m, self.n);
                beta = self.beta;
            }
        }
        sgemm(
            self.alpha,
            mat(a, self.m, self.k, self.trans_a),
            mat(b, self.k, self.n, self.trans_b),
            beta,
            y,
            self.n,
        );
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
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
    let c_shape = match ctx.opt_input(2) {
        Some(_) => {
            let c = ctx.float_input(2)?;
            if c.shape.len() > 2 || broadcast(c.shape, &[m, n]).as_deref() != Some(&[m, n][..]) {
                return Err(ctx.err(
                    Status::InvalidModel,
                    format!("C {:?} does not broadcast to [{m}, {n}]", c.shape),
                ));
            }
            Some(c.shape.to_vec())
        }
        None => None,
    };
    Ok(Built {
        outputs: vec![(DataType::F32, vec![m, n])],
        kernel: Box::new(GemmKernel {
            m,
            n,
            k,
            trans_a,
            trans_b,
            alpha: ctx.attr_float("alpha", 1.0)?,
            beta: ctx.attr_float("beta", 1.0)?,
            c_shape,
        }),
    })
}
