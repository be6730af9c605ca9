//! A 1×1 convolution whose output only a depthwise convolution reads becomes one internal
//! `ConvDepthwise` node in the depthwise convolution's place (computed in bands of rows, so
//! that the intermediate is never written out whole: `kernels::conv::PointwiseDepthwise`).
//! Runs after the activations are fused, so that both convolutions carry theirs. Then a
//! 1×1 convolution that alone reads such a node's output (a MobileNetV2 block's projection,
//! with its residual and activation if fused) joins it, as the node's inputs 5–7, and runs in
//! the same bands.

use super::{absorb_declared, constant_f32, drop_removed, is_default, is_internal, sole_consumers};
use crate::ir::{Attr, Graph, Node};
use crate::ops;
use std::collections::BTreeMap;

/// Fuses every such pair.
pub(super) fn fuse_pointwise_depthwise(g: &mut Graph) {
    let consumers = sole_consumers(g);
    let mut removed = vec![false; g.nodes.len()];
    for i in 0..g.nodes.len() {
        let Some(mid) = pointwise_1x1(g, &g.nodes[i], false) else {
            continue;
        };
        let Some(Some(between)) = g.nodes[i].outputs.first().copied() else {
            continue;
        };
        let Some(d) = consumers[between] else {
            continue;
        };
        let dw = &g.nodes[d];
        if removed[d] || !is_depthwise_over(g, dw, between, mid) {
            continue;
        }
        let Some(Some(out)) = dw.outputs.first().copied() else {
            continue;
        };
        if !absorb_declared(g, &[between], out) {
            continue;
        }
        let (pw, dw) = (&g.nodes[i], &g.nodes[d]);
        let mut attrs = dw.attrs.clone();
        carry_activation(pw, &mut attrs, "pointwise");
        let input = |n: &Node, k: usize| n.inputs.get(k).copied().flatten();
        let fused = Node {
            name: dw.name.clone(),
            op_type: "ConvDepthwise".into(),
            domain: ops::INTERNAL_DOMAIN.into(),
            inputs: vec![
                input(pw, 0),
                input(pw, 1),
                input(pw, 2),
                input(dw, 1),
                input(dw, 2),
            ],
            outputs: vec![Some(out)],
            attrs,
            captured: Vec::new(),
        };
        g.nodes[d] = fused;
        removed[i] = true;
    }
    drop_removed(g, &removed);
}

/// Fuses every 1×1 convolution that alone reads a `ConvDepthwise` output into it, and one that
/// alone reads a depthwise convolution's output (a block without expansion) into a
/// `ConvDepthwise` without pointwise weights.
pub(super) fn fuse_projections(g: &mut Graph) {
    let consumers = sole_consumers(g);
    let mut absorbed = Vec::new();
    for d in 0..g.nodes.len() {
        let n = &g.nodes[d];
        let pair = is_internal(n, "ConvDepthwise") && n.inputs.len() <= 5;
        let alone = n.inputs.first().copied().flatten().is_some_and(|x| {
            let weights = constant_f32(g, n.inputs.get(1).copied().flatten());
            let channels = weights.and_then(|(w, _)| w.first().copied());
            channels.is_some_and(|c| is_depthwise_over(g, n, x, c))
        });
        if !pair && !alone {
            continue;
        }
        let Some(Some(between)) = n.outputs.first().copied() else {
            continue;
        };
        let Some(q) = consumers[between] else {
            continue;
        };
        let proj = &g.nodes[q];
        if proj.inputs.first() != Some(&Some(between)) || pointwise_1x1(g, proj, true).is_none() {
            continue;
        }
        let Some(Some(out)) = proj.outputs.first().copied() else {
            continue;
        };
        if !absorb_declared(g, &[between], out) {
            continue;
        }
        let (first, proj) = (&g.nodes[d], &g.nodes[q]);
        let mut fused = first.clone();
        if alone {
            // X, no pointwise weights or bias, then the depthwise weights and bias.
            let input = |k: usize| first.inputs.get(k).copied().flatten();
            fused.inputs = vec![input(0), None, None, input(1), input(2)];
            fused.op_type = "ConvDepthwise".into();
            fused.domain = ops::INTERNAL_DOMAIN.into();
        }
        fused.inputs.resize(5, None);
        fused
            .inputs
            .extend((1..4).map(|k| proj.inputs.get(k).copied().flatten()));
        carry_activation(proj, &mut fused.attrs, "projection");
        fused.outputs = vec![Some(out)];
        g.nodes[q] = fused;
        absorbed.push(d);
    }
    let mut removed = vec![false; g.nodes.len()];
    absorbed.into_iter().for_each(|d| removed[d] = true);
    drop_removed(g, &removed);
}

/// Copies the fused activation of `from` (`activation`, `activation_params`) into `attrs`
/// under the names `{role}_activation` and `{role}_activation_params`.
fn carry_activation(from: &Node, attrs: &mut BTreeMap<String, Attr>, role: &str) {
    for name in ["activation", "activation_params"] {
        if let Some(a) = from.attrs.get(name) {
            attrs.insert(format!("{role}_{name}"), a.clone());
        }
    }
}

/// Whether `n` is a plain or fused convolution without a residual input (with one allowed
/// when `residual`), whose weights and bias are float32 constants.
fn is_conv_with_constants(g: &Graph, n: &Node, residual: bool) -> bool {
    let inputs = if residual { 2..=4 } else { 2..=3 };
    (is_default(n, "Conv") || is_internal(n, "FusedConv"))
        && inputs.contains(&n.inputs.len())
        && n.outputs.len() == 1
        && n.inputs[0].is_some()
        && constant_f32(g, n.inputs[1]).is_some()
        && n.inputs
            .get(2)
            .copied()
            .flatten()
            .is_none_or(|b| constant_f32(g, Some(b)).is_some())
}

/// The output channels of `n` when it is a 2-D 1×1 convolution with stride 1, no padding and
/// one group (its activation, if any, goes with it), without a residual input unless
/// `residual`.
fn pointwise_1x1(g: &Graph, n: &Node, residual: bool) -> Option<usize> {
    if !is_conv_with_constants(g, n, residual) {
        return None;
    }
    let (w, _) = constant_f32(g, n.inputs[1])?;
    let ints_all = |name: &str, v: i64| match n.attrs.get(name) {
        None => true,
        Some(Attr::Ints(x)) => x.iter().all(|&e| e == v),
        Some(_) => false,
    };
    let auto_pad_none = match n.attrs.get("auto_pad") {
        None => true,
        Some(Attr::String(s)) => s == b"NOTSET" || s == b"VALID",
        Some(_) => false,
    };
    let one_group = matches!(n.attrs.get("group"), None | Some(Attr::Int(1)));
    (w.len() == 4
        && w[2..] == [1, 1]
        && ints_all("strides", 1)
        && ints_all("pads", 0)
        && auto_pad_none
        && one_group)
        .then_some(w[0])
}

/// Whether `n` is a 2-D depthwise convolution of `x` (`channels` channels) whose activation,
/// if any, clamps (Relu, Clip): the banded kernel applies those as it stores.
fn is_depthwise_over(g: &Graph, n: &Node, x: crate::ir::ValueId, channels: usize) -> bool {
    if !is_conv_with_constants(g, n, false) || n.inputs[0] != Some(x) {
        return false;
    }
    let Some((w, _)) = constant_f32(g, n.inputs[1]) else {
        return false;
    };
    let clamps = match n.attrs.get("activation") {
        None => true,
        Some(Attr::String(s)) => s == b"Relu" || s == b"Clip",
        Some(_) => false,
    };
    w.len() == 4
        && w[0] == channels
        && w[1] == 1
        && matches!(n.attrs.get("group"), Some(Attr::Int(c)) if *c == channels as i64)
        && clamps
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fused, ops, run_text, HEADER};

    /// A float constant of the text syntax, `name` of shape `dims` (`n` elements), its values
    /// a fixed pattern of small integers (`i·step mod modulo`, centred) times `scale`.
    fn weights(
        name: &str,
        dims: &str,
        n: usize,
        scale: f32,
        (step, modulo): (usize, usize),
    ) -> String {
        let v: Vec<String> = (0..n)
            .map(|i| {
                format!(
                    "{:.4}",
                    ((i * step % modulo) as f32 - (modulo / 2) as f32) * scale
                )
            })
            .collect();
        format!("float[{dims}] {name} = {{{}}}", v.join(", "))
    }

    /// A MobileNet block's expansion and depthwise layers (Clip and Relu activations, a
    /// stride, pads) become one node and compute what the two convolutions compute: the same
    /// model with the pair kept apart (the 1×1 output also a graph output) is the reference.
    #[test]
    fn pointwise_and_depthwise_fuse_and_compute_the_same() {
        let weights =
            |name: &str, dims: &str, n: usize, scale: f32| weights(name, dims, n, scale, (37, 19));
        let consts = [
            weights("w1", "12, 3, 1, 1", 36, 0.1),
            weights("b1", "12", 12, 0.05),
            weights("w2", "12, 1, 3, 3", 108, 0.07),
            weights("b2", "12", 12, 0.02),
        ]
        .join(", ");
        let body = |extra_out: &str| {
            format!(
                "{HEADER}\nagraph (float[1, 3, 9, 11] x) => (float[1, 12, 5, 6] y{extra_out}) \
                 <{consts}, float lo = {{0.0}}, float hi = {{6.0}}>\n{{\n\
                 e = Conv(x, w1, b1)\n m = Clip(e, lo, hi)\n\
                 d = Conv <group = 12, pads = [1, 1, 1, 1], strides = [2, 2]> (m, w2, b2)\n\
                 y = Relu(d)\n}}"
            )
        };
        let one = body("");
        let g = fused(&one);
        assert_eq!(ops(&g), ["ConvDepthwise"]);
        // Kept apart: `m` is read by the depthwise Conv and is a graph output.
        let apart = body(", float[1, 12, 9, 11] m");
        assert_eq!(ops(&fused(&apart)), ["FusedConv", "FusedConv"]);
        let x: Vec<f32> = (0..297)
            .map(|i| ((i * 13 % 23) as f32 - 11.0) * 0.3)
            .collect();
        let want = run_text(&apart, vec![1, 3, 9, 11], &x);
        assert!(want.iter().any(|&v| v > 0.0));
        computes_the_same(&one, &apart, vec![1, 3, 9, 11], &x, "pair");
    }

    /// Runs the fused model `one` and the model `apart` (the same nodes kept apart) on `x`
    /// (of `shape`) and asserts that their outputs agree.
    fn computes_the_same(one: &str, apart: &str, shape: Vec<usize>, x: &[f32], what: &str) {
        let got = run_text(one, shape.clone(), x);
        let want = run_text(apart, shape, x);
        assert_eq!(got.len(), want.len());
        for (i, (a, b)) in got.iter().zip(want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                "{what} [{i}] {a} vs {b}"
            );
        }
    }

    /// A whole MobileNetV2 block (expansion, depthwise, projection with the residual of the
    /// block's input) becomes one node and computes what the three convolutions and the Add
    /// compute: the same model with the depthwise output also a graph output (so that the
    /// projection stays apart) is the reference; so is one whose projection adds a constant per
    /// channel (folded into the projection's bias).
    #[test]
    fn a_projection_joins_the_pair_and_computes_the_same() {
        let weights =
            |name: &str, dims: &str, n: usize, scale: f32| weights(name, dims, n, scale, (29, 17));
        let consts = [
            weights("w1", "12, 4, 1, 1", 48, 0.1),
            weights("b1", "12", 12, 0.05),
            weights("w2", "12, 1, 3, 3", 108, 0.07),
            weights("b2", "12", 12, 0.02),
            weights("w3", "4, 12, 1, 1", 48, 0.09),
            weights("b3", "4", 4, 0.03),
            weights("c", "4, 1, 1", 4, 0.5),
        ]
        .join(", ");
        let body = |extra_out: &str, residual: &str| {
            format!(
                "{HEADER}\nagraph (float[1, 4, 9, 11] x) => (float[1, 4, 9, 11] y{extra_out}) \
                 <{consts}, float lo = {{0.0}}, float hi = {{6.0}}>\n{{\n\
                 e = Conv(x, w1, b1)\n m = Clip(e, lo, hi)\n\
                 d = Conv <group = 12, pads = [1, 1, 1, 1]> (m, w2, b2)\n\
                 r = Clip(d, lo, hi)\n p = Conv(r, w3, b3)\n y = Add(p, {residual})\n}}"
            )
        };
        let x: Vec<f32> = (0..396)
            .map(|i| ((i * 13 % 23) as f32 - 11.0) * 0.3)
            .collect();
        for residual in ["x", "c"] {
            let one = body("", residual);
            let g = fused(&one);
            assert_eq!(ops(&g), ["ConvDepthwise"], "residual {residual}");
            let apart = body(", float[1, 12, 9, 11] r", residual);
            // A constant per channel folds into the projection's bias instead (`affine`).
            let projection = if residual == "c" { "Conv" } else { "FusedConv" };
            assert_eq!(ops(&fused(&apart)), ["ConvDepthwise", projection]);
            computes_the_same(&one, &apart, vec![1, 4, 9, 11], &x, residual);
        }
    }

    /// A block without expansion (a depthwise convolution with Relu6, then the projection)
    /// becomes one `ConvDepthwise` without pointwise weights, and computes what the two
    /// convolutions compute apart; a depthwise convolution whose output something else reads
    /// too stays apart.
    #[test]
    fn a_projection_joins_a_depthwise_convolution_alone() {
        let consts = [
            weights("w2", "6, 1, 3, 3", 54, 0.07, (29, 17)),
            weights("b2", "6", 6, 0.02, (29, 17)),
            weights("w3", "5, 6, 1, 1", 30, 0.09, (29, 17)),
        ]
        .join(", ");
        let body = |extra_out: &str| {
            format!(
                "{HEADER}\nagraph (float[1, 6, 10, 7] x) => (float[1, 5, 5, 4] y{extra_out}) \
                 <{consts}, float lo = {{0.0}}, float hi = {{6.0}}>\n{{\n\
                 d = Conv <group = 6, pads = [1, 1, 1, 1], strides = [2, 2]> (x, w2, b2)\n\
                 r = Clip(d, lo, hi)\n y = Conv(r, w3)\n}}"
            )
        };
        let x: Vec<f32> = (0..420)
            .map(|i| ((i * 13 % 23) as f32 - 11.0) * 0.3)
            .collect();
        let one = body("");
        assert_eq!(ops(&fused(&one)), ["ConvDepthwise"]);
        let apart = body(", float[1, 6, 5, 4] r");
        assert_eq!(ops(&fused(&apart)), ["FusedConv", "Conv"]);
        computes_the_same(&one, &apart, vec![1, 6, 10, 7], &x, "alone");
    }

    /// A node whose second input is a scalar constant (no dimensions to read a channel count
    /// from) passes the rewrites untouched: `y = x + 1.5`.
    #[test]
    fn a_scalar_second_input_is_left_alone() {
        let text = format!(
            "{HEADER}\nagraph (float[2] x) => (float[2] y) <float c = {{1.5}}>\n{{ y = Add(x, c) }}"
        );
        assert_eq!(ops(&fused(&text)), ["Add"]);
        assert_eq!(run_text(&text, vec![2], &[1.0, -4.0]), [2.5, -2.5]);
    }
}
