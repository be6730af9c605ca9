//! The rewrites that fold nodes around a float32 `MatMul` into one `FusedMatMul`
//! (`ops::mat_mul::FUSED_DEF`), in this order:
//! 1. `MatMul(a, W) + b` (W a constant matrix, b a constant of one value per column): the bias;
//! 2. a `Transpose` that only the product reads, of a run-time operand: read in place through
//!    strides instead (`perm_a`, `perm_b`; attention's query, key and value heads);
//! 3. a following `Mul` or `Div` by a scalar constant: `alpha` (attention's 1/√d);
//! 4. a following `Add` of any tensor: the addend `Z` (a residual, an attention mask), in the
//!    Add's place.
//!
//! The activation after any of them is folded later, with those of the convolutions. Only a
//! product known to be float32 while rewriting is fused ([`known_f32`]), since `FusedMatMul`
//! computes float32 (and float16/bfloat16 widened), not the other types `MatMul` takes.

use super::{
    absorb_declared, constant_f32, drop_removed, is_default, is_internal, other_input, scalar_f32,
    sole_consumers,
};
use crate::exec::weights::fixed_values;
use crate::ir::{Attr, DataType, Dim, Graph, Node, ValueId};
use crate::ops;

/// Applies the four rewrites.
pub(super) fn fuse_matmuls(g: &mut Graph) {
    fuse_matmul_bias(g);
    // The rewrites below neither add values nor change a value's type or whether the planner
    // folds it, so both are computed once for the three.
    let kinds = (known_f32(g), fixed_values(g));
    fuse_transposed_operands(g, &kinds);
    fuse_scales(g, &kinds);
    fuse_addends(g, &kinds);
}

/// Per value: whether it is float32 ([`known_f32`]) and whether the planner folds it
/// ([`fixed_values`]).
type Kinds = (Vec<bool>, Vec<bool>);

/// A `MatMul` whose second operand is a constant float32 matrix (so the product is float32).
pub(super) fn is_matmul_by_constant(g: &Graph, n: &Node) -> bool {
    is_default(n, "MatMul")
        && n.inputs.len() == 2
        && n.outputs.len() == 1
        && matches!(constant_f32(g, n.inputs[1]), Some((shape, _)) if shape.len() == 2)
}

/// Folds `MatMul(a, W) + b` (W a constant matrix, b a constant of shape `[n]`) into
/// `FusedMatMul(a, W, b)`.
fn fuse_matmul_bias(g: &mut Graph) {
    let consumers = sole_consumers(g);
    let mut removed = vec![false; g.nodes.len()];
    for i in 0..g.nodes.len() {
        if removed[i] || !is_matmul_by_constant(g, &g.nodes[i]) {
            continue;
        }
        let n_cols = constant_f32(g, g.nodes[i].inputs[1]).map(|(s, _)| s[1]);
        let Some(out) = g.nodes[i].outputs[0] else {
            continue;
        };
        let Some(a) = consumers[out] else { continue };
        let Some(Some(bias)) = other_input(&g.nodes[a], "Add", out) else {
            continue;
        };
        if !matches!(constant_f32(g, Some(bias)), Some((shape, _)) if Some(shape.as_slice()) == n_cols.as_ref().map(std::slice::from_ref))
        {
            continue;
        }
        let new_out = g.nodes[a].outputs[0];
        match new_out {
            Some(o) if absorb_declared(g, &[out], o) => {}
            _ => continue,
        }
        let n = &mut g.nodes[i];
        make_fused(n);
        n.inputs.push(Some(bias));
        n.outputs[0] = new_out;
        removed[a] = true;
    }
    drop_removed(g, &removed);
}

/// Per value: whether it is float32, as far as the graph tells before planning. A constant or
/// a declared value of that type is; so is the output of a node that computes in its inputs'
/// type (element-wise arithmetic, shape operators, products, normalisations, activations)
/// when its first input is. Nodes come in an order where every input is computed first.
pub(super) fn known_f32(g: &Graph) -> Vec<bool> {
    const SAME_TYPE: &[&str] = &[
        "Conv",
        "Clip",
        "HardSigmoid",
        "HardSwish",
        "BatchNormalization",
        "MaxPool",
        "AveragePool",
        "GlobalAveragePool",
        "Concat",
        "Resize",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Neg",
        "Relu",
        "Erf",
        "Tanh",
        "Sigmoid",
        "Softmax",
        "LayerNormalization",
        "MatMul",
        "Gemm",
        "Reshape",
        "Transpose",
        "Flatten",
        "Squeeze",
        "Unsqueeze",
        "Identity",
    ];
    const INTERNAL: &[&str] = &[
        "FusedMatMul",
        "FusedGemm",
        "FusedConv",
        "ConvDepthwise",
        "Activation",
    ];
    let mut f32s: Vec<bool> = g
        .values
        .iter()
        .map(|v| match (&v.constant, &v.declared) {
            (Some(c), _) => c.dtype() == DataType::F32,
            (None, Some(d)) => d.dtype == DataType::F32,
            _ => false,
        })
        .collect();
    for n in &g.nodes {
        let same = SAME_TYPE.iter().any(|op| is_default(n, op))
            || INTERNAL.iter().any(|op| is_internal(n, op));
        if same && n.inputs.first().copied().flatten().is_some_and(|x| f32s[x]) {
            if let Some(Some(out)) = n.outputs.first() {
                f32s[*out] = true;
            }
        }
    }
    f32s
}

/// A float32 product that a rewrite may turn into (or extend as) a `FusedMatMul`: a `MatMul`
/// or `FusedMatMul` of one output, its operands float32, not both known without the graph's
/// inputs (`fixed`: the planner folds such a product, which it could not once fused with a
/// run-time addend).
fn is_f32_product(n: &Node, f32s: &[bool], fixed: &[bool]) -> bool {
    let product = (is_default(n, "MatMul") && n.inputs.len() == 2) || is_internal(n, "FusedMatMul");
    let operands = &n.inputs[..n.inputs.len().min(2)];
    product
        && n.outputs.len() == 1
        && n.inputs.first().copied().flatten().is_some_and(|a| f32s[a])
        && !operands.iter().flatten().all(|&v| fixed[v])
}

/// For node `i`, a float32 product of at most `max_inputs` inputs and no activation yet: its
/// output and the node that alone reads it.
fn sole_reader(
    g: &Graph,
    i: usize,
    max_inputs: usize,
    consumers: &[Option<usize>],
    (f32s, fixed): (&[bool], &[bool]),
) -> Option<(ValueId, usize)> {
    let n = &g.nodes[i];
    if !is_f32_product(n, f32s, fixed)
        || n.inputs.len() > max_inputs
        || n.attrs.contains_key("activation")
    {
        return None;
    }
    let out = n.outputs[0]?;
    Some((out, consumers[out]?))
}

/// Makes `n` (a `MatMul` or a `FusedMatMul`) a `FusedMatMul`.
fn make_fused(n: &mut Node) {
    n.op_type = "FusedMatMul".into();
    n.domain = ops::INTERNAL_DOMAIN.into();
}

/// A `Transpose` (with its `perm` given) whose output only a float32 product reads, as that
/// product's A or B, is read in place instead: the product takes the Transpose's input and the
/// permutation as `perm_a` or `perm_b`. Not for a constant input (a weight is packed once
/// anyway, and the planner folds its transpose).
fn fuse_transposed_operands(g: &mut Graph, (f32s, fixed): &Kinds) {
    let consumers = sole_consumers(g);
    let producers = super::producers(g);
    let mut removed = vec![false; g.nodes.len()];
    for i in 0..g.nodes.len() {
        if !is_f32_product(&g.nodes[i], f32s, fixed) {
            continue;
        }
        for (j, name) in [(0, "perm_a"), (1, "perm_b")] {
            let Some(Some(v)) = g.nodes[i].inputs.get(j).copied() else {
                continue;
            };
            if g.nodes[i].attrs.contains_key(name) || consumers[v] != Some(i) {
                continue;
            }
            let Some(t) = producers[v].filter(|&t| !removed[t]) else {
                continue;
            };
            let tr = &g.nodes[t];
            let (Some(Attr::Ints(perm)), [Some(src)], [Some(_)]) = (
                tr.attrs.get("perm"),
                tr.inputs.as_slice(),
                tr.outputs.as_slice(),
            ) else {
                continue;
            };
            if !is_default(tr, "Transpose") || tr.attrs.len() != 1 {
                continue;
            }
            let (src, perm) = (*src, perm.clone());
            if g.values[src].constant.is_some() || !declared_as_transpose(g, src, v, &perm) {
                continue;
            }
            let n = &mut g.nodes[i];
            make_fused(n);
            n.attrs.insert(name.into(), Attr::Ints(perm));
            n.inputs[j] = Some(src);
            removed[t] = true;
        }
    }
    drop_removed(g, &removed);
}

/// Whether folding `Transpose(src, perm) = out` away loses no declared type the planner would
/// check: `out` declares none, or one that `src`'s declared type transposed by `perm` gives
/// (the planner checks `src`'s).
fn declared_as_transpose(g: &Graph, src: ValueId, out: ValueId, perm: &[i64]) -> bool {
    let Some(o) = &g.values[out].declared else {
        return true;
    };
    let Some(s) = &g.values[src].declared else {
        return false;
    };
    if o.dtype != s.dtype {
        return false;
    }
    match (&o.dims, &s.dims) {
        (None, _) => true,
        (Some(od), Some(sd)) => {
            od.len() == perm.len()
                && perm.iter().zip(od).all(|(&p, d)| {
                    usize::try_from(p)
                        .ok()
                        .and_then(|p| sd.get(p))
                        .is_some_and(|s| d == s || *d == Dim::Unknown)
                })
        }
        (Some(_), None) => false,
    }
}

/// A float32 product with nothing added after it yet (no bias, addend or activation), whose
/// output only a `Mul` by a scalar constant reads (either operand), or a `Div` by one (as its
/// divisor), takes the factor as `alpha` (`alpha · A·B`).
fn fuse_scales(g: &mut Graph, (f32s, fixed): &Kinds) {
    let consumers = sole_consumers(g);
    let mut removed = vec![false; g.nodes.len()];
    for i in 0..g.nodes.len() {
        let Some((out, c)) = sole_reader(g, i, 2, &consumers, (f32s, fixed)) else {
            continue;
        };
        let s = &g.nodes[c];
        let factor = match other_input(s, "Mul", out) {
            Some(x) => scalar_f32(g, x),
            None if is_default(s, "Div") && s.inputs.first() == Some(&Some(out)) => {
                other_input(s, "Div", out)
                    .and_then(|x| scalar_f32(g, x))
                    .map(|d| 1.0 / d)
            }
            None => None,
        };
        let (Some(factor), Some(&Some(new_out))) = (factor, s.outputs.first()) else {
            continue;
        };
        if !s.attrs.is_empty() || !absorb_declared(g, &[out], new_out) {
            continue;
        }
        let n = &mut g.nodes[i];
        let alpha = match n.attrs.get("alpha") {
            Some(Attr::Float(a)) => *a,
            _ => 1.0,
        };
        make_fused(n);
        n.attrs.insert("alpha".into(), Attr::Float(alpha * factor));
        n.outputs[0] = Some(new_out);
        removed[c] = true;
    }
    drop_removed(g, &removed);
}

/// A float32 product with no addend or activation yet, whose output only an `Add` reads, takes
/// the Add's other operand as its addend `Z` (input 3), in the Add's place: `Z` may be computed
/// after the product in the node order, and the product's inputs all come before the Add.
fn fuse_addends(g: &mut Graph, (f32s, fixed): &Kinds) {
    let consumers = sole_consumers(g);
    let mut removed = vec![false; g.nodes.len()];
    for i in 0..g.nodes.len() {
        let Some((out, a)) = sole_reader(g, i, 3, &consumers, (f32s, fixed)) else {
            continue;
        };
        if removed[a] || !g.nodes[a].attrs.is_empty() {
            continue;
        }
        let (Some(Some(z)), Some(&Some(new_out))) = (
            other_input(&g.nodes[a], "Add", out),
            g.nodes[a].outputs.first(),
        ) else {
            continue;
        };
        // The Add's output may be larger than the product (Z broadcasts it): a declared type
        // of the product carries over only where the Add's output declares the same.
        let kept = match (&g.values[out].declared, &g.values[new_out].declared) {
            (None, _) => true,
            (Some(d), Some(o)) => d == o,
            (Some(_), None) => false,
        };
        if z == out || !kept {
            continue;
        }
        super::move_into_add(g, (i, a), ("FusedMatMul", z, new_out));
        removed[i] = true;
    }
    drop_removed(g, &removed);
}

#[cfg(test)]
mod tests {
    use super::super::tests::{close_to, fused, ops, run_inputs as run, vals, HEADER};
    use crate::ir::{Attr, Graph};

    /// [`close_to`] within 1e-5 relative.
    fn close(got: &[f32], want: &[f64], what: &str) {
        close_to(got, want, 1e-5, what);
    }

    fn attr<'g>(g: &'g Graph, node: usize, name: &str) -> Option<&'g Attr> {
        g.nodes[node].attrs.get(name)
    }

    /// Multi-head attention as exporters write it (heads split by Reshape and Transpose, the
    /// scores divided by √d, a run-time mask added, Softmax, the heads merged back) becomes
    /// two `FusedMatMul` nodes that read the heads in place, scale and add the mask; only the
    /// merging Transpose stays. The output is the attention computed here in f64.
    #[test]
    fn attention_reads_its_heads_in_place_with_scale_and_mask() {
        let (s, h, d) = (3usize, 2usize, 2usize);
        let text = format!(
            "{HEADER} g (float[1, 3, 4] q, float[1, 3, 4] k, float[1, 3, 4] v,
                        float[1, 1, 1, 3] mask) => (float[1, 3, 4] y)
             <int64[4] split = {{1, 3, 2, 2}}, int64[3] merge = {{1, 3, 4}}, float sq = {{1.4142135}}>
             {{ rq = Reshape(q, split)\n tq = Transpose<perm: ints = [0, 2, 1, 3]>(rq)
                rk = Reshape(k, split)\n tk = Transpose<perm: ints = [0, 2, 3, 1]>(rk)
                rv = Reshape(v, split)\n tv = Transpose<perm: ints = [0, 2, 1, 3]>(rv)
                sc = MatMul(tq, tk)\n sd = Div(sc, sq)\n sm = Add(sd, mask)
                p = Softmax<axis: int = -1>(sm)\n c = MatMul(p, tv)
                ct = Transpose<perm: ints = [0, 2, 1, 3]>(c)\n y = Reshape(ct, merge) }}"
        );
        let g = fused(&text);
        let kinds = ops(&g);
        let products: Vec<usize> = (0..g.nodes.len())
            .filter(|&i| kinds[i] == "FusedMatMul")
            .collect();
        assert_eq!(products.len(), 2, "{kinds:?}");
        assert_eq!(
            kinds.iter().filter(|k| **k == "Transpose").count(),
            1,
            "{kinds:?}"
        );
        assert!(
            !kinds.iter().any(|k| ["Div", "Add", "MatMul"].contains(k)),
            "{kinds:?}"
        );
        let (qk, pv) = (products[0], products[1]);
        assert_eq!(attr(&g, qk, "perm_a"), Some(&Attr::Ints(vec![0, 2, 1, 3])));
        assert_eq!(attr(&g, qk, "perm_b"), Some(&Attr::Ints(vec![0, 2, 3, 1])));
        assert!(
            matches!(attr(&g, qk, "alpha"), Some(Attr::Float(a)) if (a - 0.70710677).abs() < 1e-7)
        );
        assert_eq!(g.nodes[qk].inputs.len(), 4, "the mask is the addend");
        assert_eq!(attr(&g, pv, "perm_a"), None);
        assert_eq!(attr(&g, pv, "perm_b"), Some(&Attr::Ints(vec![0, 2, 1, 3])));

        let (q, k, v) = (vals(12, 1), vals(12, 2), vals(12, 3));
        let mask = [0.0f32, -1e4, 0.5];
        let (shape, got) = run(
            &text,
            &[
                (&[1, 3, 4], &q),
                (&[1, 3, 4], &k),
                (&[1, 3, 4], &v),
                (&[1, 1, 1, 3], &mask),
            ],
        );
        assert_eq!(shape, [1, 3, 4]);
        // y[t][hd·h + e] = Σ_u softmax_u(q_h[t]·k_h[u] / √2 + mask[u]) · v_h[u][e]
        let at = |x: &[f32], t: usize, hh: usize, e: usize| x[t * h * d + hh * d + e] as f64;
        let mut want = vec![0.0f64; s * h * d];
        for hh in 0..h {
            for t in 0..s {
                let scores: Vec<f64> = (0..s)
                    .map(|u| {
                        let dot: f64 = (0..d).map(|e| at(&q, t, hh, e) * at(&k, u, hh, e)).sum();
                        dot / std::f32::consts::SQRT_2 as f64 + mask[u] as f64
                    })
                    .collect();
                let top = scores.iter().cloned().fold(f64::MIN, f64::max);
                let exps: Vec<f64> = scores.iter().map(|x| (x - top).exp()).collect();
                let sum: f64 = exps.iter().sum();
                for e in 0..d {
                    want[t * h * d + hh * d + e] =
                        (0..s).map(|u| exps[u] / sum * at(&v, u, hh, e)).sum();
                }
            }
        }
        close(&got, &want, "attention");
    }

    /// The addend takes every form: a matrix per batch (a residual), a row per batch (a mask
    /// per batch), a column (general), one that makes the output larger (general, into
    /// scratch), and a row together with a constant bias (general); with `alpha` from a `Mul`
    /// whose constant comes first and a Relu after. Each is checked against the product
    /// computed here.
    #[test]
    fn addends_of_every_shape_fuse_and_compute_the_same() {
        let (a, b) = (vals(2 * 3 * 4, 4), vals(2 * 4 * 5, 5));
        // c[bi][i][j] = Σ_p a[bi][i][p] · b[bi][p][j]
        let prod = |bi: usize, i: usize, j: usize| -> f64 {
            (0..4)
                .map(|p| a[bi * 12 + i * 4 + p] as f64 * b[bi * 20 + p * 5 + j] as f64)
                .sum()
        };
        for (zs, out) in [
            (vec![2usize, 3, 5], vec![2usize, 3, 5]),
            (vec![2, 1, 5], vec![2, 3, 5]),
            (vec![3, 1], vec![2, 3, 5]),
            (vec![4, 2, 3, 5], vec![4, 2, 3, 5]),
        ] {
            let zn: usize = zs.iter().product();
            let z = vals(zn, 6);
            let dims = |v: &[usize]| {
                v.iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let text = format!(
                "{HEADER} g (float[2, 3, 4] a, float[2, 4, 5] b, float[{}] z) => (float[{}] y)
                 <float two = {{2.0}}>
                 {{ m = MatMul(a, b)\n s = Mul(two, m)\n t = Add(z, s)\n y = Relu(t) }}",
                dims(&zs),
                dims(&out)
            );
            let g = fused(&text);
            assert_eq!(ops(&g), ["FusedMatMul"], "{zs:?}");
            assert_eq!(attr(&g, 0, "alpha"), Some(&Attr::Float(2.0)));
            let (shape, got) = run(&text, &[(&[2, 3, 4], &a), (&[2, 4, 5], &b), (&zs, &z)]);
            assert_eq!(shape, out, "{zs:?}");
            // Broadcast by hand: the output's index, aligned right on Z's shape.
            let r = out.len();
            let mut want = vec![0.0f64; out.iter().product()];
            for (flat, w) in want.iter_mut().enumerate() {
                let mut idx = vec![0usize; r];
                let mut rest = flat;
                for dd in (0..r).rev() {
                    idx[dd] = rest % out[dd];
                    rest /= out[dd];
                }
                let (bi, i, j) = (idx[r - 3], idx[r - 2], idx[r - 1]);
                let off = r - zs.len();
                let zi = (0..zs.len()).fold(0, |acc, dd| {
                    acc * zs[dd] + if zs[dd] == 1 { 0 } else { idx[off + dd] }
                });
                *w = (2.0 * prod(bi, i, j) + z[zi] as f64).max(0.0);
            }
            close(&got, &want, &format!("Z {zs:?}"));
        }
        // A row of Z after a constant bias: one FusedMatMul, both added.
        let w = vals(4 * 5, 7);
        let text = format!(
            "{HEADER} g (float[3, 4] x, float[1, 5] z) => (float[3, 5] y)
             <float[4, 5] w = {{{}}}, float[5] bias = {{1.0, 2.0, 3.0, 4.0, 5.0}}>
             {{ m = MatMul(x, w)\n c = Add(m, bias)\n y = Add(c, z) }}",
            w.iter()
                .map(|v| format!("{v:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert_eq!(ops(&fused(&text)), ["FusedMatMul"]);
        let (x, z) = (vals(12, 8), vals(5, 9));
        let (_, got) = run(&text, &[(&[3, 4], &x), (&[1, 5], &z)]);
        let want: Vec<f64> = (0..15)
            .map(|f| {
                let (i, j) = (f / 5, f % 5);
                let p: f64 = (0..4)
                    .map(|p| x[i * 4 + p] as f64 * w[p * 5 + j] as f64)
                    .sum();
                p + (j + 1) as f64 + z[j] as f64
            })
            .collect();
        close(&got, &want, "bias and row");
    }

    /// What must not fuse stays as it was and computes the same: an integer product (the fused
    /// node computes floats), a Transpose read twice, a divisor that is the product.
    #[test]
    fn what_is_not_a_float_product_of_its_own_stays() {
        let text = format!(
            "{HEADER} g (int64[2, 3] a, int64[2, 2] b) => (int64[3, 2] y)
             {{ t = Transpose<perm: ints = [1, 0]>(a)\n y = MatMul(t, b) }}"
        );
        assert_eq!(ops(&fused(&text)), ["Transpose", "MatMul"]);
        let text = format!(
            "{HEADER} g (float[2, 3] a, float[2, 3] b) => (float[3, 3] y, float[3, 2] t)
             {{ t = Transpose<perm: ints = [1, 0]>(a)\n y = MatMul(t, b) }}"
        );
        assert_eq!(ops(&fused(&text)), ["Transpose", "MatMul"]);
        let text = format!(
            "{HEADER} g (float[2, 3] a, float[3, 2] b) => (float[2, 2] y) <float two = {{2.0}}>
             {{ m = MatMul(a, b)\n y = Div(two, m) }}"
        );
        assert_eq!(ops(&fused(&text)), ["MatMul", "Div"]);
    }
}
