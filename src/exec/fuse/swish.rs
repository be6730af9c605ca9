//! The exporters' gated activations, `x` times a gate computed from `x`, recognised and
//! replaced by one internal `Activation` node:
//! - HardSwish: `x · Clip(x + 3, 0, 6)` then `/ 6` or `· (1/6)`, or `x · (Clip(x + 3, 0, 6) / 6)`
//!   (operands in either order), and `x · HardSigmoid(x)` with `alpha = 1/6, beta = 0.5`;
//! - SiLU (swish): `x · Sigmoid(x)`.

use super::matmul::known_f32;
use super::{
    activation_of, drop_removed, is_default, other_input, producers, replace_by_activation,
    scalar_f32, sole_consumers,
};
use crate::ir::{Attr, Graph, ValueId};

/// Whether `v` is `want` within float32 rounding.
fn near(v: f32, want: f32) -> bool {
    (v - want).abs() <= 1e-6 * want.abs().max(1.0)
}

/// The node after value `v` (its sole reader) when it divides by 6 or multiplies by 1/6.
fn sixth_after(g: &Graph, consumers: &[Option<usize>], v: ValueId) -> Option<usize> {
    let n = consumers[v]?;
    let node = &g.nodes[n];
    let by_six = is_default(node, "Div")
        && node.inputs.len() == 2
        && node.inputs[0] == Some(v)
        && scalar_f32(g, node.inputs[1]).is_some_and(|c| c == 6.0);
    let by_sixth = other_input(node, "Mul", v)
        .is_some_and(|c| scalar_f32(g, c).is_some_and(|c| near(c, 1.0 / 6.0)));
    (by_six || by_sixth).then_some(n)
}

/// The nodes of a decomposed SiLU whose gate (`Sigmoid`) is node `c`: `(x, [c], the Mul)`,
/// when `x` is known to be float32 (`f32s`: the `Activation` computes float32, and half
/// precision through it, but not float64).
fn silu_at(
    g: &Graph,
    consumers: &[Option<usize>],
    f32s: &[bool],
    c: usize,
) -> Option<(ValueId, Vec<usize>, usize)> {
    let gate = &g.nodes[c];
    if !is_default(gate, "Sigmoid") || gate.inputs.len() != 1 || gate.outputs.len() != 1 {
        return None;
    }
    let (x, s) = (gate.inputs[0]?, gate.outputs[0]?);
    if !f32s[x] {
        return None;
    }
    let m = consumers[s]?;
    (other_input(&g.nodes[m], "Mul", s)? == Some(x)).then(|| (x, vec![c], m))
}

/// The nodes of a decomposed HardSwish whose gate (`Clip` or `HardSigmoid`) is node `c`:
/// `(x, nodes to remove, last node)`, each removed node's output read only by the next. The
/// `Clip` form adds a float32 constant to `x`, which is therefore float32; the `HardSigmoid`
/// form needs `x` known to be (`f32s`).
fn hard_swish_at(
    g: &Graph,
    (prod, consumers): (&[Option<usize>], &[Option<usize>]),
    f32s: &[bool],
    c: usize,
) -> Option<(ValueId, Vec<usize>, usize)> {
    let gate = &g.nodes[c];
    let gate_out = *gate.outputs.first()?;
    let gate_out = gate_out?;
    let (x, mut gone, scaled) = if is_default(gate, "HardSigmoid") {
        let attr = |k: &str, default: f32| match gate.attrs.get(k) {
            Some(Attr::Float(v)) => *v,
            _ => default,
        };
        if gate.inputs.len() != 1
            || !near(attr("alpha", 0.2), 1.0 / 6.0)
            || attr("beta", 0.5) != 0.5
            || !gate.inputs[0].is_some_and(|x| f32s[x])
        {
            return None;
        }
        (gate.inputs[0]?, vec![c], true)
    } else {
        // Clip(a, 0, 6) of a = x + 3.
        match activation_of(g, gate) {
            Some((kind, b)) if kind == "Clip" && b == [0.0, 6.0] => {}
            _ => return None,
        }
        let a = gate.inputs.first().copied().flatten()?;
        if consumers[a] != Some(c) {
            return None;
        }
        let add = prod[a]?;
        let an = &g.nodes[add];
        if !is_default(an, "Add") || an.inputs.len() != 2 {
            return None;
        }
        let x = match (an.inputs[0], an.inputs[1]) {
            (Some(x), three) | (three, Some(x)) if scalar_f32(g, three) == Some(3.0) => x,
            _ => return None,
        };
        (x, vec![add, c], false)
    };
    // The gate, divided by 6 first or not, times x.
    let (gated, scaled) = match sixth_after(g, consumers, gate_out) {
        Some(d) if !scaled => {
            gone.push(d);
            (g.nodes[d].outputs[0]?, true)
        }
        _ => (gate_out, scaled),
    };
    let m = consumers[gated]?;
    if other_input(&g.nodes[m], "Mul", gated)? != Some(x) {
        return None;
    }
    if scaled {
        return Some((x, gone, m));
    }
    let m_out = g.nodes[m].outputs[0]?;
    let last = sixth_after(g, consumers, m_out)?;
    gone.push(m);
    Some((x, gone, last))
}

/// Replaces every decomposed HardSwish and SiLU by one internal `Activation` node.
pub(super) fn fuse_swishes(g: &mut Graph) {
    let consumers = sole_consumers(g);
    let prod = producers(g);
    let f32s = known_f32(g);
    let mut removed = vec![false; g.nodes.len()];
    for c in 0..g.nodes.len() {
        if removed[c] {
            continue;
        }
        let (found, kind) = match silu_at(g, &consumers, &f32s, c) {
            Some(f) => (f, "Silu"),
            None => match hard_swish_at(g, (&prod, &consumers), &f32s, c) {
                Some(f) => (f, "HardSwish"),
                None => continue,
            },
        };
        replace_by_activation(g, &mut removed, found, kind);
    }
    drop_removed(g, &removed);
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fused, ops, HEADER};
    use crate::ir::Attr;

    fn model(body: &str) -> String {
        format!(
            "{HEADER} g (float[4] x) => (float[4] y)
             <float three = {{3.0}}, float zero = {{0.0}}, float six = {{6.0}},
              float sixth = {{0.16666667}}> {{ {body} }}"
        )
    }

    #[test]
    fn every_hard_swish_spelling_becomes_one_node() {
        let bodies = [
            // (x · Clip(x + 3, 0, 6)) / 6: PaddleOCR's export.
            "a = Add(x, three)\n c = Clip(a, zero, six)\n m = Mul(x, c)\n y = Div(m, six)",
            // (Clip(3 + x, 0, 6) · x) · (1/6)
            "a = Add(three, x)\n c = Clip(a, zero, six)\n m = Mul(c, x)\n y = Mul(m, sixth)",
            // x · (Clip(x + 3, 0, 6) / 6)
            "a = Add(x, three)\n c = Clip(a, zero, six)\n d = Div(c, six)\n y = Mul(x, d)",
            // x · HardSigmoid(x) with PyTorch's constants.
            "h = HardSigmoid <alpha: float = 0.16666667, beta: float = 0.5> (x)\n y = Mul(x, h)",
        ];
        for body in bodies {
            let g = fused(&model(body));
            assert_eq!(ops(&g), ["Activation"], "{body}");
            assert!(
                matches!(g.nodes[0].attrs.get("activation"), Some(Attr::String(s)) if s == b"HardSwish")
            );
        }
    }

    #[test]
    fn sigmoid_times_its_input_becomes_silu() {
        for body in [
            "s = Sigmoid(x)\n y = Mul(x, s)",
            "s = Sigmoid(x)\n y = Mul(s, x)",
        ] {
            let g = fused(&model(body));
            assert_eq!(ops(&g), ["Activation"], "{body}");
            assert!(
                matches!(g.nodes[0].attrs.get("activation"), Some(Attr::String(s)) if s == b"Silu")
            );
        }
        // Float64 stays (the activation computes float32), and so does a type the graph does
        // not tell.
        let text = format!(
            "{HEADER} g (double[4] x) => (double[4] y) {{ s = Sigmoid(x)\n y = Mul(x, s) }}"
        );
        assert_eq!(ops(&fused(&text)), ["Sigmoid", "Mul"]);
        // A sigmoid gating another tensor stays.
        let g = fused(&model("a = Add(x, three)\n s = Sigmoid(x)\n y = Mul(a, s)"));
        assert_eq!(ops(&g), ["Add", "Sigmoid", "Mul"]);
    }

    #[test]
    fn near_misses_stay_as_they_are() {
        let cases = [
            // Clip at 3, not 6.
            (
                "a = Add(x, three)\n c = Clip(a, zero, three)\n m = Mul(x, c)\n y = Div(m, six)",
                vec!["Add", "Clip", "Mul", "Div"],
            ),
            // The gate times another tensor (a squeeze-and-excitation scale).
            (
                "a = Add(x, three)\n c = Clip(a, zero, six)\n m = Mul(a, c)\n y = Div(m, six)",
                vec!["Add", "Clip", "Mul", "Div"],
            ),
            // HardSigmoid's default alpha (0.2).
            (
                "h = HardSigmoid(x)\n y = Mul(x, h)",
                vec!["HardSigmoid", "Mul"],
            ),
            // Not divided by 6.
            (
                "a = Add(x, three)\n c = Clip(a, zero, six)\n y = Mul(x, c)",
                vec!["Add", "Clip", "Mul"],
            ),
        ];
        for (body, want) in cases {
            assert_eq!(ops(&fused(&model(body))), want, "{body}");
        }
    }
}
