//! The exporters' decomposed layer normalization over the last axis (PyTorch before opset 17,
//! TensorFlow converters), recognised and replaced by one `LayerNormalization` node:
//!
//! ```text
//! m = ReduceMean(x, axes = [-1])        d = Sub(x, m)
//! v = ReduceMean(Pow(d, 2) or Mul(d, d), axes = [-1])
//! s = Sqrt(Add(v, ε))                   n = Div(d, s)  or  Mul(d, Reciprocal(s))
//! y = Mul(n, γ)  (optional)             z = Add(y, β)  (optional)
//! ```
//!
//! with `keepdims` 1 (the default), ε a scalar constant, γ and β constants of at most one
//! dimension (either operand order), and every intermediate read only by the next node (`d`
//! by the two that read it). Without γ the node gets a scale of one `[1.0]`. The node computes
//! its statistics in float64 (`kernels::layer_norm`), the decomposed graph in its own type.

use super::{
    absorb_declared, add_constant, drop_removed, is_default, other_input, producers, scalar_f32,
    sole_consumers,
};
use crate::ir::{Attr, Dim, Graph, Tensor, TensorData, ValueId};
use std::collections::BTreeMap;

/// Whether node `i` is a `ReduceMean` of `x` over the last axis alone, keeping it (axes as the
/// attribute, or as a constant second input from opset 18 on).
fn mean_of_last_axis(g: &Graph, i: usize, x: ValueId) -> bool {
    let n = &g.nodes[i];
    if !is_default(n, "ReduceMean") || n.inputs.first() != Some(&Some(x)) || n.outputs.len() != 1 {
        return false;
    }
    let keeps = match n.attrs.get("keepdims") {
        None => true,
        Some(Attr::Int(k)) => *k == 1,
        Some(_) => false,
    };
    let only_known = n.attrs.keys().all(|k| k == "keepdims" || k == "axes");
    let axes: Option<Vec<i64>> = match (n.attrs.get("axes"), n.inputs.get(1).copied().flatten()) {
        (Some(Attr::Ints(a)), None) => Some(a.clone()),
        (None, Some(a)) => match g.values[a].constant.as_deref().map(|t| &t.data) {
            Some(TensorData::I64(v)) => Some(v.clone()),
            _ => None,
        },
        _ => None,
    };
    keeps && only_known && n.inputs.len() <= 2 && axes.as_deref() == Some(&[-1])
}

/// A constant of at most one dimension (a scale or shift over the last axis).
fn vector_constant(g: &Graph, id: Option<ValueId>) -> Option<ValueId> {
    let id = id?;
    let t = g.values[id].constant.as_deref()?;
    (t.shape.len() <= 1 && t.dtype().is_float()).then_some(id)
}

/// A decomposed layer normalization whose `Sub` node is `sub`.
struct Found {
    /// The normalised tensor.
    x: ValueId,
    epsilon: f32,
    /// γ and β, when the pattern multiplies and adds them.
    scale: Option<ValueId>,
    bias: Option<ValueId>,
    /// The nodes to remove, and the last one (which becomes the `LayerNormalization`).
    gone: Vec<usize>,
    last: usize,
    /// The intermediates of `x`'s shape, and those with the last axis reduced to 1.
    full: Vec<ValueId>,
    reduced: Vec<ValueId>,
}

/// The decomposed layer normalization around the `Sub` node `sub`, if it is one.
fn layer_norm_at(
    g: &Graph,
    prod: &[Option<usize>],
    consumers: &[Option<usize>],
    readers: &[Vec<usize>],
    sub: usize,
) -> Option<Found> {
    let sn = &g.nodes[sub];
    if !is_default(sn, "Sub") || sn.inputs.len() != 2 || sn.outputs.len() != 1 {
        return None;
    }
    let (x, m) = (sn.inputs[0]?, sn.inputs[1]?);
    let mean = prod[m]?;
    if consumers[m] != Some(sub) || !mean_of_last_axis(g, mean, x) {
        return None;
    }
    // d is read by the square and by the division, nothing else.
    let d = sn.outputs[0]?;
    let [r0, r1] = readers[d][..] else {
        return None;
    };
    if g.outputs.contains(&d) {
        return None;
    }
    let is_square = |i: usize| {
        let n = &g.nodes[i];
        (is_default(n, "Mul") && n.inputs == [Some(d), Some(d)])
            || (is_default(n, "Pow")
                && n.inputs.first() == Some(&Some(d))
                && scalar_f32(g, n.inputs.get(1).copied().flatten()) == Some(2.0))
    };
    let (sq, div) = if is_square(r0) { (r0, r1) } else { (r1, r0) };
    if !is_square(sq) || g.nodes[sq].outputs.len() != 1 {
        return None;
    }
    let sq_out = g.nodes[sq].outputs[0]?;
    let var = consumers[sq_out]?;
    if !mean_of_last_axis(g, var, sq_out) {
        return None;
    }
    let v = g.nodes[var].outputs[0]?;
    let add_eps = consumers[v]?;
    let epsilon = scalar_f32(g, other_input(&g.nodes[add_eps], "Add", v)?)?;
    let ve = g.nodes[add_eps].outputs[0]?;
    let sqrt = consumers[ve]?;
    let sqn = &g.nodes[sqrt];
    if !is_default(sqn, "Sqrt") || sqn.inputs.len() != 1 || sqn.outputs.len() != 1 {
        return None;
    }
    let s = sqn.outputs[0]?;
    let mut gone = vec![mean, sub, sq, var, add_eps, sqrt];
    let mut reduced = vec![m, v, ve, s];
    let mut full = vec![d, sq_out];
    // n = d / s, or d · (1 / s)
    let dn = &g.nodes[div];
    if is_default(dn, "Div") && dn.inputs == [Some(d), Some(s)] && consumers[s] == Some(div) {
        // Nothing between: the Div is the last node so far.
    } else {
        let recip = consumers[s]?;
        let rn = &g.nodes[recip];
        if !is_default(rn, "Reciprocal") || rn.outputs.len() != 1 {
            return None;
        }
        let r = rn.outputs[0]?;
        if consumers[r] != Some(div) || other_input(dn, "Mul", d)? != Some(r) {
            return None;
        }
        gone.push(recip);
        reduced.push(r);
    }
    if g.nodes[div].outputs.len() != 1 {
        return None;
    }
    let mut last = div;
    let mut out = g.nodes[div].outputs[0]?;
    let mut scale = None;
    let mut bias = None;
    // · γ, then + β (each optional, β only after γ or alone).
    if let Some(c) = consumers[out] {
        if let Some(gamma) =
            other_input(&g.nodes[c], "Mul", out).and_then(|o| vector_constant(g, o))
        {
            scale = Some(gamma);
            full.push(out);
            gone.push(last);
            (last, out) = (c, g.nodes[c].outputs[0]?);
        }
    }
    if let Some(c) = consumers[out] {
        if let Some(beta) = other_input(&g.nodes[c], "Add", out).and_then(|o| vector_constant(g, o))
        {
            bias = Some(beta);
            full.push(out);
            gone.push(last);
            last = c;
        }
    }
    Some(Found {
        x,
        epsilon,
        scale,
        bias,
        gone,
        last,
        full,
        reduced,
    })
}

/// Whether folding away `v`, of `x`'s shape with the last axis reduced to 1, loses no declared
/// type the planner would check: `v` declares none, or what `x`'s declared type gives.
fn declared_as_reduced(g: &Graph, x: ValueId, v: ValueId) -> bool {
    let Some(vd) = &g.values[v].declared else {
        return true;
    };
    let Some(xd) = &g.values[x].declared else {
        return false;
    };
    match (&vd.dims, &xd.dims) {
        (None, _) => vd.dtype == xd.dtype,
        (Some(v), Some(x)) => {
            let r = x.len();
            vd.dtype == xd.dtype
                && v.len() == r
                && r > 0
                && v[..r - 1]
                    .iter()
                    .zip(&x[..r - 1])
                    .all(|(a, b)| a == b || *a == Dim::Unknown)
                && matches!(v[r - 1], Dim::Fixed(1) | Dim::Unknown)
        }
        (Some(_), None) => false,
    }
}

/// Replaces each decomposed layer normalization by one `LayerNormalization` node.
pub(super) fn fuse_layer_norms(g: &mut Graph) {
    let consumers = sole_consumers(g);
    let prod = producers(g);
    let mut readers = vec![Vec::new(); g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for id in n.inputs.iter().flatten() {
            // A node that reads a value twice (`Mul(d, d)`) counts once.
            if readers[*id].last() != Some(&i) {
                readers[*id].push(i);
            }
        }
    }
    let mut removed = vec![false; g.nodes.len()];
    let mut ones = None;
    for sub in 0..g.nodes.len() {
        let Some(f) = layer_norm_at(g, &prod, &consumers, &readers, sub) else {
            continue;
        };
        if f.gone.iter().chain([&f.last]).any(|&i| removed[i])
            || !f.reduced.iter().all(|&v| declared_as_reduced(g, f.x, v))
        {
            continue;
        }
        let last_out = g.nodes[f.last].outputs[0];
        match last_out {
            Some(out) if absorb_declared(g, &f.full, out) => {}
            _ => continue,
        }
        let scale = match f.scale {
            Some(s) => s,
            None => *ones.get_or_insert_with(|| {
                let one = Tensor {
                    shape: vec![1],
                    data: TensorData::F32(vec![1.0]),
                };
                add_constant(g, "layer_norm_unit_scale".into(), one)
            }),
        };
        let n = &mut g.nodes[f.last];
        n.op_type = "LayerNormalization".into();
        n.domain = String::new();
        n.inputs = vec![Some(f.x), Some(scale), f.bias];
        if f.bias.is_none() {
            n.inputs.pop();
        }
        n.attrs = BTreeMap::from([
            ("axis".to_string(), Attr::Int(-1)),
            ("epsilon".to_string(), Attr::Float(f.epsilon)),
        ]);
        for i in f.gone {
            removed[i] = true;
        }
    }
    drop_removed(g, &removed);
}

#[cfg(test)]
mod tests {
    use super::super::tests::{close_to, fused, ops, run_inputs, vals, HEADER};

    /// Layer normalization of each row of `x` (`cols` wide) by the definition, in f64.
    fn reference(x: &[f32], cols: usize, eps: f64, gamma: &[f64], beta: &[f64]) -> Vec<f64> {
        let at = |v: &[f64], j: usize| if v.len() == 1 { v[0] } else { v[j] };
        x.chunks(cols)
            .flat_map(|row| {
                let n = cols as f64;
                let mean = row.iter().map(|&v| v as f64).sum::<f64>() / n;
                let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
                let inv = 1.0 / (var + eps).sqrt();
                row.iter()
                    .enumerate()
                    .map(move |(j, &v)| (v as f64 - mean) * inv * at(gamma, j) + at(beta, j))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// [`close_to`] within 2e-5 relative.
    fn close(got: &[f32], want: &[f64], what: &str) {
        close_to(got, want, 2e-5, what);
    }

    /// Both usual spellings become one `LayerNormalization` and compute the normalisation: PyTorch's
    /// (Pow, Div, γ then β, axes as an attribute) and the converters' (d·d, Reciprocal and Mul,
    /// γ only, on the left, axes as an input at opset 18); without γ and β a unit scale.
    #[test]
    fn decomposed_layer_norms_become_one_node() {
        let x = vals(3 * 8, 31);
        let gamma: Vec<f32> = vals(8, 32);
        let beta: Vec<f32> = vals(8, 33);
        let list = |v: &[f32]| {
            v.iter()
                .map(|x| format!("{x:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let g64: Vec<f64> = gamma.iter().map(|&v| v as f64).collect();
        let b64: Vec<f64> = beta.iter().map(|&v| v as f64).collect();
        let torch = format!(
            "{HEADER} g (float[3, 8] x) => (float[3, 8] y)
             <float eps = {{1e-5}}, float two = {{2.0}}, float[8] gamma = {{{}}},
              float[8] beta = {{{}}}>
             {{ m = ReduceMean<axes: ints = [-1]>(x)\n d = Sub(x, m)\n p = Pow(d, two)
                v = ReduceMean<axes: ints = [-1], keepdims: int = 1>(p)\n ve = Add(v, eps)
                s = Sqrt(ve)\n n = Div(d, s)\n k = Mul(n, gamma)\n y = Add(k, beta) }}",
            list(&gamma),
            list(&beta)
        );
        let converter = format!(
            "<ir_version: 9, opset_import: [\"\" : 18]>
             g (float[3, 8] x) => (float[3, 8] y)
             <float eps = {{1e-3}}, int64[1] ax = {{-1}}, float[8] gamma = {{{}}}>
             {{ m = ReduceMean(x, ax)\n d = Sub(x, m)\n p = Mul(d, d)\n v = ReduceMean(p, ax)
                ve = Add(eps, v)\n s = Sqrt(ve)\n r = Reciprocal(s)\n n = Mul(r, d)
                y = Mul(gamma, n) }}",
            list(&gamma)
        );
        let bare = format!(
            "{HEADER} g (float[3, 8] x) => (float[3, 8] y) <float eps = {{1e-5}}, float two = {{2.0}}>
             {{ m = ReduceMean<axes: ints = [-1]>(x)\n d = Sub(x, m)\n p = Pow(d, two)
                v = ReduceMean<axes: ints = [-1]>(p)\n ve = Add(v, eps)\n s = Sqrt(ve)
                y = Div(d, s) }}"
        );
        for (text, eps, g, b) in [
            (&torch, 1e-5f32, g64.clone(), b64),
            (&converter, 1e-3, g64, vec![0.0]),
            (&bare, 1e-5, vec![1.0], vec![0.0]),
        ] {
            assert_eq!(ops(&fused(text)), ["LayerNormalization"], "{text}");
            let (shape, got) = run_inputs(text, &[(&[3, 8], &x)]);
            assert_eq!(shape, [3, 8]);
            close(&got, &reference(&x, 8, eps as f64, &g, &b), text);
        }
    }

    /// What is not a layer normalization over the last axis of its own stays as it was and
    /// computes the same: the mean over another axis, a mean that is also a graph output.
    #[test]
    fn other_normalisations_stay() {
        let body = |axes: &str, outs: &str| {
            format!(
                "{HEADER} g (float[3, 8] x) => (float[3, 8] y{outs}) <float eps = {{1e-5}}, float two = {{2.0}}>
                 {{ m = ReduceMean<axes: ints = {axes}>(x)\n d = Sub(x, m)\n p = Pow(d, two)
                    v = ReduceMean<axes: ints = {axes}>(p)\n ve = Add(v, eps)\n s = Sqrt(ve)
                    y = Div(d, s) }}"
            )
        };
        let x = vals(24, 34);
        for text in [body("[0]", ""), body("[-1]", ", float[3, 1] m")] {
            let g = fused(&text);
            assert!(!ops(&g).contains(&"LayerNormalization"), "{text}");
        }
        // The mean read as an output too: the rows normalised all the same.
        let (_, got) = run_inputs(&body("[-1]", ", float[3, 1] m"), &[(&[3, 8], &x)]);
        close(
            &got,
            &reference(&x, 8, 1e-5, &[1.0], &[0.0]),
            "mean as an output",
        );
        // Over axis 0 by hand: columns of 3.
        let (_, got) = run_inputs(&body("[0]", ""), &[(&[3, 8], &x)]);
        for j in 0..8 {
            let col: Vec<f32> = (0..3).map(|i| x[i * 8 + j]).collect();
            let want = reference(&col, 3, 1e-5, &[1.0], &[0.0]);
            let got_col: Vec<f32> = (0..3).map(|i| got[i * 8 + j]).collect();
            close(&got_col, &want, "axis 0");
        }
    }
}
