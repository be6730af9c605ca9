//! `Attention` (opset 23 to 25): scaled dot-product attention over 4-D `[B, H, S, D]` or 3-D
//! `[B, S, H·D]` inputs, with grouped key/value heads, a bool or additive mask (padded to the
//! key length), causal masking aligned to a past cache, sliding windows, `nonpad_kv_seqlen`,
//! softcapping, the past/present key-value cache and the optional `qk_matmul_output`.
//! Computed in f64 per (batch, head); a fully masked row gives zeros.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOATS};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};

/// The `Attention` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Attention",
    domain: "",
    min_opset: 23,
    newest: 25,
    attributes: &[
        "is_causal",
        "kv_num_heads",
        "left_window_size",
        "q_num_heads",
        "qk_matmul_output_mode",
        "right_window_size",
        "scale",
        "softcap",
        "softmax_precision",
    ],
    types: FLOATS,
    build,
};

/// Sizes and options fixed at build time.
#[derive(Clone, Debug)]
struct Geometry {
    batch: usize,
    q_heads: usize,
    kv_heads: usize,
    q_len: usize,
    /// New keys (without the past).
    new_kv: usize,
    past: usize,
    head: usize,
    v_head: usize,
    three_d: bool,
    scale: f64,
    softcap: f64,
    causal: bool,
    left: i64,
    right: i64,
    mode: i64,
    /// Mask shape (right-aligned to `[B, H, q, kv]`).
    mask_shape: Option<Vec<usize>>,
    /// Which outputs are present: Y, present_key, present_value, qk_matmul_output.
    present: [bool; 4],
}

struct AttentionKernel(Geometry);

/// `x[b, h, s, d]` of a 4-D `[B, H, S, D]` tensor, or of a 3-D `[B, S, H·D]` one.
fn at(x: &[f64], three_d: bool, heads: usize, len: usize, dim: usize, idx: [usize; 4]) -> f64 {
    let [b, h, s, d] = idx;
    if three_d {
        x[(b * len + s) * heads * dim + h * dim + d]
    } else {
        x[((b * heads + h) * len + s) * dim + d]
    }
}

impl AttentionKernel {
    fn compute<T: Elem>(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let g = &self.0;
        let get = |i: usize| inputs.get(i).copied().flatten();
        let f64s = |t: &Tensor| -> Result<Vec<f64>> {
            Ok(t.as_slice::<T>()?.iter().map(|v| v.to_f64()).collect())
        };
        let missing = || Error::new(Status::InternalError, "Attention input missing");
        let q = f64s(get(0).ok_or_else(missing)?)?;
        let k_new = f64s(get(1).ok_or_else(missing)?)?;
        let v_new = f64s(get(2).ok_or_else(missing)?)?;
        let kv_len = g.past + g.new_kv;
        // present_key / present_value: [B, Hkv, past + new, D].
        let concat = |past: Option<&Tensor>, new: &[f64], dim: usize| -> Result<Vec<f64>> {
            let past = past.map(f64s).transpose()?;
            let mut out = vec![0.0; g.batch * g.kv_heads * kv_len * dim];
            for b in 0..g.batch {
                for h in 0..g.kv_heads {
                    for s in 0..kv_len {
                        for d in 0..dim {
                            out[((b * g.kv_heads + h) * kv_len + s) * dim + d] = if s < g.past {
                                past.as_ref().map_or(0.0, |p| {
                                    p[((b * g.kv_heads + h) * g.past + s) * dim + d]
                                })
                            } else {
                                at(
                                    new,
                                    g.three_d,
                                    g.kv_heads,
                                    g.new_kv,
                                    dim,
                                    [b, h, s - g.past, d],
                                )
                            };
                        }
                    }
                }
            }
            Ok(out)
        };
        let keys = concat(get(4), &k_new, g.head)?;
        let values = concat(get(5), &v_new, g.v_head)?;
        let mask: Option<(Vec<f64>, bool)> = match get(3) {
            Some(m) if m.dtype() == DataType::Bool => Some((
                m.as_slice::<bool>()?
                    .iter()
                    .map(|&b| b as u8 as f64)
                    .collect(),
                true,
            )),
            Some(m) => Some((f64s(m)?, false)),
            None => None,
        };
        let nonpad = get(6).map(|t| t.to_i64_vec()).transpose()?;
        let group = g.q_heads / g.kv_heads;
        let mut y = vec![0.0f64; g.batch * g.q_heads * g.q_len * g.v_head];
        let mut qk_out = vec![0.0f64; g.batch * g.q_heads * g.q_len * kv_len];
        let mut row = vec![0.0f64; kv_len];
        let mut bias = vec![0.0f64; kv_len];
        for b in 0..g.batch {
            for h in 0..g.q_heads {
                let hk = h / group;
                for i in 0..g.q_len {
                    // The bias of this row: mask, causal, window, padding.
                    for (j, bj) in bias.iter_mut().enumerate() {
                        let mut v = 0.0;
                        if let (Some((m, is_bool)), Some(shape)) = (&mask, &g.mask_shape) {
                            let mv = mask_value(m, shape, [b, h, i, j]);
                            v += match (mv, is_bool) {
                                (None, true) | (None, false) => f64::NEG_INFINITY,
                                (Some(x), true) => {
                                    if x != 0.0 {
                                        0.0
                                    } else {
                                        f64::NEG_INFINITY
                                    }
                                }
                                (Some(x), false) => x,
                            };
                        }
                        let offset = match &nonpad {
                            Some(n) if g.past == 0 => n[b] - g.q_len as i64,
                            _ => g.past as i64,
                        };
                        let diff = i as i64 + offset - j as i64;
                        if g.causal && diff < 0 {
                            v = f64::NEG_INFINITY;
                        }
                        if (g.left >= 0 && diff > g.left) || (g.right >= 0 && -diff > g.right) {
                            v = f64::NEG_INFINITY;
                        }
                        if let Some(n) = &nonpad {
                            if j as i64 >= n[b] {
                                v = f64::NEG_INFINITY;
                            }
                        }
                        *bj = v;
                    }
                    for (j, r) in row.iter_mut().enumerate() {
                        let mut s = 0.0;
                        for d in 0..g.head {
                            s += at(&q, g.three_d, g.q_heads, g.q_len, g.head, [b, h, i, d])
                                * keys[((b * g.kv_heads + hk) * kv_len + j) * g.head + d];
                        }
                        s *= g.scale;
                        if g.softcap > 0.0 {
                            s = g.softcap * (s / g.softcap).tanh();
                        }
                        *r = s;
                    }
                    let qk_at = ((b * g.q_heads + h) * g.q_len + i) * kv_len;
                    if g.mode <= 1 {
                        qk_out[qk_at..qk_at + kv_len].copy_from_slice(&row);
                    }
                    for (r, bj) in row.iter_mut().zip(&bias) {
                        *r += bj;
                    }
                    if g.mode == 2 {
                        qk_out[qk_at..qk_at + kv_len].copy_from_slice(&row);
                    }
                    let all_masked = bias.iter().all(|v| *v == f64::NEG_INFINITY);
                    let max = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let max = if max == f64::NEG_INFINITY { 0.0 } else { max };
                    let mut sum = 0.0;
                    for r in row.iter_mut() {
                        *r = (*r - max).exp();
                        sum += *r;
                    }
                    let sum = if sum == 0.0 { 1.0 } else { sum };
                    for r in row.iter_mut() {
                        *r = if all_masked { 0.0 } else { *r / sum };
                    }
                    if g.mode == 3 {
                        qk_out[qk_at..qk_at + kv_len].copy_from_slice(&row);
                    }
                    for d in 0..g.v_head {
                        let mut acc = 0.0;
                        for (j, p) in row.iter().enumerate() {
                            acc += p * values[((b * g.kv_heads + hk) * kv_len + j) * g.v_head + d];
                        }
                        let yi = if g.three_d {
                            (b * g.q_len + i) * g.q_heads * g.v_head + h * g.v_head + d
                        } else {
                            ((b * g.q_heads + h) * g.q_len + i) * g.v_head + d
                        };
                        y[yi] = acc;
                    }
                }
            }
        }
        let results = [y, keys, values, qk_out];
        let mut outs = outputs.iter_mut();
        for (k, data) in results.iter().enumerate() {
            if g.present[k] {
                let o = outs.next().ok_or_else(missing)?.as_mut_slice::<T>()?;
                for (dst, v) in o.iter_mut().zip(data) {
                    *dst = T::from_f64(*v);
                }
            }
        }
        Ok(())
    }
}

/// The mask value for `[b, h, i, j]` (right-aligned broadcast); `None` past the mask's key
/// length (padding).
fn mask_value(m: &[f64], shape: &[usize], idx: [usize; 4]) -> Option<f64> {
    let rank = shape.len();
    let mut off = 0;
    for (k, &n) in shape.iter().enumerate() {
        let i = idx[4 - rank + k];
        let i = if n == 1 {
            0
        } else if k == rank - 1 && i >= n {
            return None;
        } else {
            i
        };
        off = off * n + i;
    }
    Some(m[off])
}

impl Kernel for AttentionKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let q = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "Q missing"))?;
        crate::dispatch_float!(q.dtype(), T => self.compute::<T>(inputs, outputs),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(3, 7, 1, 4)?;
    let dtype = super::pointwise::float_like_input(ctx, 0)?;
    let (q, k, v) = (ctx.input(0)?, ctx.input(1)?, ctx.input(2)?);
    let bad = |m: String| ctx.err(Status::InvalidModel, m);
    if q.shape.len() != k.shape.len() || q.shape.len() != v.shape.len() {
        return Err(bad("Q, K and V differ in rank".into()));
    }
    let three_d = match q.shape.len() {
        3 => true,
        4 => false,
        r => return Err(bad(format!("inputs of rank {r}"))),
    };
    let (batch, q_heads, kv_heads, q_len, new_kv, head, v_head) = if three_d {
        let qh = ctx.attr_int("q_num_heads", 0)?;
        let kh = ctx.attr_int("kv_num_heads", 0)?;
        if qh <= 0 || kh <= 0 {
            return Err(bad("3-D inputs need q_num_heads and kv_num_heads".into()));
        }
        let (qh, kh) = (qh as usize, kh as usize);
        if q.shape[2] % qh != 0 || k.shape[2] % kh != 0 || v.shape[2] % kh != 0 {
            return Err(bad("hidden sizes do not divide into heads".into()));
        }
        (
            q.shape[0],
            qh,
            kh,
            q.shape[1],
            k.shape[1],
            q.shape[2] / qh,
            v.shape[2] / kh,
        )
    } else {
        (
            q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3],
        )
    };
    let k_head = if three_d {
        k.shape[2] / kv_heads
    } else {
        k.shape[3]
    };
    // V has K's batch, heads and sequence length (its head size may differ).
    let v_fits = if three_d {
        v.shape[..2] == k.shape[..2]
    } else {
        v.shape[..3] == k.shape[..3]
    };
    if k_head != head || kv_heads == 0 || q_heads % kv_heads != 0 || k.shape[0] != batch || !v_fits
    {
        return Err(bad(format!(
            "Q {:?}, K {:?}, V {:?} do not fit together",
            q.shape, k.shape, v.shape
        )));
    }
    let past = match (ctx.opt_input(4), ctx.opt_input(5)) {
        (Some(pk), Some(pv)) => {
            if pk.shape.len() != 4 || pk.shape[..2] != [batch, kv_heads] || pk.shape[3] != head {
                return Err(bad(format!("past_key {:?}", pk.shape)));
            }
            if pv.shape != [batch, kv_heads, pk.shape[2], v_head] {
                return Err(bad(format!("past_value {:?}", pv.shape)));
            }
            pk.shape[2]
        }
        (None, None) => 0,
        _ => return Err(bad("past_key and past_value go together".into())),
    };
    let kv_len = past + new_kv;
    let mask_shape = match ctx.opt_input(3) {
        Some(m) => {
            let r = m.shape.len();
            let full = [batch, q_heads, q_len, kv_len];
            let fits = (1..=4).contains(&r)
                && m.shape.iter().enumerate().all(|(k, &n)| {
                    let want = full[4 - r + k];
                    n == 1 || n == want || (k == r - 1 && n <= want)
                });
            if !fits {
                return Err(bad(format!(
                    "attn_mask {:?} does not fit {full:?}",
                    m.shape
                )));
            }
            Some(m.shape.to_vec())
        }
        None => None,
    };
    if let Some(n) = ctx.opt_input(6) {
        if n.shape.iter().product::<usize>() != batch || past != 0 {
            return Err(bad(
                "nonpad_kv_seqlen needs one length per batch and no past".into(),
            ));
        }
    }
    let scale = match ctx.node.attrs.get("scale") {
        Some(_) => ctx.attr_float("scale", 1.0)? as f64,
        None => 1.0 / (head as f64).sqrt(),
    };
    let present = [0, 1, 2, 3].map(|i| matches!(ctx.node.outputs.get(i), Some(Some(_))));
    let y_shape = if three_d {
        vec![batch, q_len, q_heads * v_head]
    } else {
        vec![batch, q_heads, q_len, v_head]
    };
    Ok(Built {
        outputs: vec![
            (dtype, y_shape),
            (dtype, vec![batch, kv_heads, kv_len, head]),
            (dtype, vec![batch, kv_heads, kv_len, v_head]),
            (dtype, vec![batch, q_heads, q_len, kv_len]),
        ],
        kernel: Box::new(AttentionKernel(Geometry {
            batch,
            q_heads,
            kv_heads,
            q_len,
            new_kv,
            past,
            head,
            v_head,
            three_d,
            scale,
            softcap: ctx.attr_float("softcap", 0.0)? as f64,
            causal: ctx.attr_int("is_causal", 0)? != 0,
            left: ctx.attr_int("left_window_size", -1)?,
            right: ctx.attr_int("right_window_size", -1)?,
            mode: ctx.attr_int("qk_matmul_output_mode", 0)?,
            mask_shape,
            present,
        })),
    })
}
