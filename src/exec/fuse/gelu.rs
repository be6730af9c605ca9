//! The exporters' decomposed GELU, `0.5·x·(1 + Erf(x/√2))` in any of its usual spellings,
//! recognised and replaced by one internal `Activation` node.

use super::{
    drop_removed, is_default, other_input, producers, replace_by_activation, scalar_f32,
    sole_consumers,
};
use crate::ir::{Graph, ValueId};

/// Whether `v` is `want` as a model may store it: within float32 rounding (10⁻⁴ relative), or
/// exactly `want` rounded to float16 or bfloat16 (both store √2 as 181/128).
fn near(v: f32, want: f32) -> bool {
    (v - want).abs() <= 1e-4 * want.abs()
        || v == half::f16::from_f32(want).to_f32()
        || v == half::bf16::from_f32(want).to_f32()
}

/// The nodes of a decomposed GELU ending at the `Erf` node `e`: `(x, nodes to remove, last
/// node)`. Matched spellings, each node's output read only by the next:
/// `d = x / √2` or `x · (1/√2)`; `e = Erf(d)`; `p = e + 1`; then either
/// `(x · p) · 0.5` or `(x · 0.5) · p` (operands in either order).
fn gelu_at(
    g: &Graph,
    prod: &[Option<usize>],
    consumers: &[Option<usize>],
    e: usize,
) -> Option<(ValueId, Vec<usize>, usize)> {
    let erf = &g.nodes[e];
    if !is_default(erf, "Erf") || erf.inputs.len() != 1 || erf.outputs.len() != 1 {
        return None;
    }
    let d_id = erf.inputs[0]?;
    if consumers[d_id] != Some(e) {
        return None;
    }
    let d = prod[d_id]?;
    let dn = &g.nodes[d];
    let x = dn.inputs.first().copied().flatten()?;
    let scale_ok = match (
        dn.op_type.as_str(),
        scalar_f32(g, dn.inputs.get(1).copied().flatten()),
    ) {
        ("Div", Some(c)) => near(c, std::f32::consts::SQRT_2),
        ("Mul", Some(c)) => near(c, std::f32::consts::FRAC_1_SQRT_2),
        _ => false,
    };
    if !scale_ok || !(is_default(dn, "Div") || is_default(dn, "Mul")) || dn.inputs.len() != 2 {
        return None;
    }
    let e_out = erf.outputs[0]?;
    let p = consumers[e_out]?;
    if scalar_f32(g, other_input(&g.nodes[p], "Add", e_out)?) != Some(1.0) {
        return None;
    }
    let p_out = g.nodes[p].outputs[0]?;
    let q = consumers[p_out]?;
    let q_other = other_input(&g.nodes[q], "Mul", p_out)??;
    let q_out = g.nodes[q].outputs[0]?;
    if q_other == x {
        // (x · p) · 0.5
        let r = consumers[q_out]?;
        if scalar_f32(g, other_input(&g.nodes[r], "Mul", q_out)?) != Some(0.5) {
            return None;
        }
        return Some((x, vec![d, e, p, q], r));
    }
    // (x · 0.5) · p
    let h = prod[q_other]?;
    if consumers[q_other] != Some(q)
        || other_input(&g.nodes[h], "Mul", x).map(|c| scalar_f32(g, c)) != Some(Some(0.5))
    {
        return None;
    }
    Some((x, vec![d, e, p, h], q))
}

/// Replaces each decomposed GELU by one internal `Activation` node.
pub(super) fn fuse_gelu(g: &mut Graph) {
    let consumers = sole_consumers(g);
    let prod = producers(g);
    let mut removed = vec![false; g.nodes.len()];
    for e in 0..g.nodes.len() {
        if removed[e] {
            continue;
        }
        if let Some(found) = gelu_at(g, &prod, &consumers, e) {
            replace_by_activation(g, &mut removed, found, "Gelu");
        }
    }
    drop_removed(g, &removed);
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fused, ops, HEADER};
    use crate::ir::Attr;

    #[test]
    fn every_gelu_spelling_becomes_one_node() {
        let bodies = [
            // (x · (1 + erf(x/√2))) · 0.5
            "d = Div(x, s)\n e = Erf(d)\n p = Add(e, one)\n q = Mul(x, p)\n y = Mul(q, half)",
            // 0.5 · ((1 + erf(x·(1/√2))) · x)
            "d = Mul(x, r)\n e = Erf(d)\n p = Add(one, e)\n q = Mul(p, x)\n y = Mul(half, q)",
            // (x · 0.5) · (erf(x/√2) + 1)
            "h = Mul(x, half)\n d = Div(x, s)\n e = Erf(d)\n p = Add(e, one)\n y = Mul(h, p)",
        ];
        for body in bodies {
            let text = format!(
                "{HEADER} g (float[4] x) => (float[4] y)
                 <float s = {{1.4142135}}, float r = {{0.70710677}}, float one = {{1.0}},
                  float half = {{0.5}}> {{ {body} }}"
            );
            let g = fused(&text);
            assert_eq!(ops(&g), ["Activation"], "{body}");
            assert!(
                matches!(g.nodes[0].attrs.get("activation"), Some(Attr::String(s)) if s == b"Gelu")
            );
        }
        // float16 constants (√2 and 1/√2 rounded to 181/128 and 181/256) in every spelling,
        // read first or second: widened to float32 for the rewrites.
        for body in bodies {
            let text = format!(
                "{HEADER} g (float16[4] x) => (float16[4] y)
                 <float16 s = {{15784}}, float16 r = {{14760}}, float16 one = {{15360}},
                  float16 half = {{14336}}> {{ {body} }}"
            );
            assert_eq!(ops(&fused(&text)), ["Activation"], "float16: {body}");
        }
        // A wrong constant is not a GELU.
        let text = format!(
            "{HEADER} g (float[4] x) => (float[4] y) <float s = {{2.0}}, float one = {{1.0}},
             float half = {{0.5}}> {{ d = Div(x, s)\n e = Erf(d)\n p = Add(e, one)\n
             q = Mul(x, p)\n y = Mul(q, half) }}"
        );
        assert_eq!(ops(&fused(&text)), ["Div", "Erf", "Add", "Mul", "Mul"]);
        // An intermediate that is also a graph output must stay computed.
        let text = format!(
            "{HEADER} g (float[4] x) => (float[4] y, float[4] e) <float s = {{1.4142135}},
             float one = {{1.0}}, float half = {{0.5}}> {{ d = Div(x, s)\n e = Erf(d)\n
             p = Add(e, one)\n q = Mul(x, p)\n y = Mul(q, half) }}"
        );
        assert_eq!(ops(&fused(&text)), ["Div", "Erf", "Add", "Mul", "Mul"]);
    }
}
