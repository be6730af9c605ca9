//! A `Mul` and an `Add` (or `Sub`) of constants, one value or one per output channel, right
//! after a `Conv` with constant weights, folded into its weights and bias:
//! `s·(W∗x + b) + t = (s·W)∗x + (s·b + t)`. PaddleOCR's networks put such a learnable scale
//! and shift after every convolution; each was two passes over the convolution's output.

use super::{
    absorb_declared, constant_f32, drop_removed, is_default, rescale_conv, sole_consumers,
};
use crate::ir::{Graph, ValueId};

/// How a node after the convolution transforms each channel's values.
enum Step {
    /// Multiplied by a factor per channel.
    Scale(Vec<f32>),
    /// Added a term per channel.
    Shift(Vec<f32>),
}

/// The values of constant `c` per output channel of a convolution's output (`m` channels,
/// `rank` dimensions) when broadcasting it against that output keeps the output's shape and
/// gives each channel one value: a single value, or `m` values along the channel axis.
fn per_channel(g: &Graph, c: Option<ValueId>, m: usize, rank: usize) -> Option<Vec<f32>> {
    let (shape, v) = constant_f32(g, c)?;
    if shape.len() > rank {
        return None;
    }
    if v.len() == 1 {
        return Some(vec![v[0]; m]);
    }
    // Aligned at the right with the output's dimensions: the channel axis is `rank − 1 − k`
    // counted from the end.
    let channel_from_end = rank - 2;
    let ones_elsewhere = shape
        .iter()
        .rev()
        .enumerate()
        .all(|(k, &d)| d == 1 || (k == channel_from_end && d == m));
    (v.len() == m && shape.len() > channel_from_end && ones_elsewhere).then(|| v.to_vec())
}

/// The step node `n` applies to the value `x` it reads (`m` channels, output rank `rank`).
fn step_of(g: &Graph, n: usize, x: ValueId, m: usize, rank: usize) -> Option<Step> {
    let node = &g.nodes[n];
    if node.inputs.len() != 2 || node.outputs.len() != 1 || !node.attrs.is_empty() {
        return None;
    }
    let (a, b) = (node.inputs[0], node.inputs[1]);
    let other = if a == Some(x) && b != Some(x) {
        b
    } else if b == Some(x) && a != Some(x) {
        a
    } else {
        return None;
    };
    let v = per_channel(g, other, m, rank)?;
    if is_default(node, "Mul") {
        Some(Step::Scale(v))
    } else if is_default(node, "Add") {
        Some(Step::Shift(v))
    } else if is_default(node, "Sub") && a == Some(x) {
        Some(Step::Shift(v.iter().map(|t| -t).collect()))
    } else {
        None
    }
}

/// Folds every run of per-channel constant `Mul`/`Add`/`Sub` nodes after a plain `Conv` (each
/// node's input read by it alone) into the convolution.
pub(super) fn fold_conv_affines(g: &mut Graph) {
    let consumers = sole_consumers(g);
    let mut removed = vec![false; g.nodes.len()];
    for i in 0..g.nodes.len() {
        let conv = &g.nodes[i];
        if removed[i] || !is_default(conv, "Conv") || conv.outputs.len() != 1 {
            continue;
        }
        let Some((w_shape, _)) = constant_f32(g, conv.inputs.get(1).copied().flatten()) else {
            continue;
        };
        let bias_in = conv.inputs.get(2).copied().flatten();
        if w_shape.len() < 3 || bias_in.is_some_and(|b| constant_f32(g, Some(b)).is_none()) {
            continue;
        }
        let (m, rank) = (w_shape[0], w_shape.len());
        // The run of steps, each reading the previous one's output.
        let (mut scale, mut shift) = (vec![1.0f32; m], vec![0.0f32; m]);
        let mut gone = Vec::new();
        let mut at = conv.outputs[0];
        while let Some(x) = at {
            let Some(n) = consumers[x].filter(|&n| !removed[n]) else {
                break;
            };
            match step_of(g, n, x, m, rank) {
                Some(Step::Scale(s)) => {
                    scale.iter_mut().zip(&s).for_each(|(a, &k)| *a *= k);
                    shift.iter_mut().zip(&s).for_each(|(a, &k)| *a *= k);
                }
                Some(Step::Shift(t)) => shift.iter_mut().zip(&t).for_each(|(a, &k)| *a += k),
                None => break,
            }
            gone.push(n);
            at = g.nodes[n].outputs[0];
        }
        let (Some(&last), Some(conv_out)) = (gone.last(), g.nodes[i].outputs[0]) else {
            continue;
        };
        let Some(out) = g.nodes[last].outputs[0] else {
            continue;
        };
        let mut inner = vec![conv_out];
        inner.extend(
            gone[..gone.len() - 1]
                .iter()
                .filter_map(|&n| g.nodes[n].outputs[0]),
        );
        if !absorb_declared(g, &inner, out) {
            continue;
        }
        rescale_conv(g, &consumers, i, (&scale, &shift), (out, "affine"));
        for n in gone {
            removed[n] = true;
        }
    }
    drop_removed(g, &removed);
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fused, ops, HEADER};
    use crate::ir::TensorData;

    /// A 1×1 convolution of two channels into two, followed by `body` reading its output `c`.
    fn model(body: &str, consts: &str) -> String {
        format!(
            "{HEADER} g (float[1, 2, 2, 2] x) => (float[1, 2, 2, 2] y)
             <float[2, 2, 1, 1] w = {{1.0, 2.0, 3.0, 4.0}}, float[2] b = {{0.5, -0.5}}{consts}>
             {{ c = Conv(x, w, b)\n {body} }}"
        )
    }

    /// The folded weights and bias of the graph's only node.
    fn folded(text: &str) -> (Vec<f32>, Vec<f32>) {
        let g = fused(text);
        assert_eq!(ops(&g), ["Conv"], "{text}");
        let get = |k: usize| match &g.values[g.nodes[0].inputs[k].unwrap()]
            .constant
            .as_deref()
            .unwrap()
            .data
        {
            TensorData::F32(v) => v.clone(),
            other => panic!("{other:?}"),
        };
        (get(1), get(2))
    }

    #[test]
    fn scalar_and_per_channel_scales_and_shifts_fold_into_the_weights() {
        // y = 2·c + 1: every weight doubled, bias 2·b + 1.
        let (w, b) = folded(&model(
            "m = Mul(c, s)\n y = Add(t, m)",
            ", float[1] s = {2.0}, float[1] t = {1.0}",
        ));
        assert_eq!(w, [2.0, 4.0, 6.0, 8.0]);
        assert_eq!(b, [2.0, 0.0]);
        // Per channel ([2, 1, 1] and [1, 2, 1, 1]), a Sub, and the scale applied last.
        let (w, b) = folded(&model(
            "a = Sub(c, t)\n y = Mul(s, a)",
            ", float[2, 1, 1] t = {1.0, 2.0}, float[1, 2, 1, 1] s = {10.0, -1.0}",
        ));
        assert_eq!(w, [10.0, 20.0, -3.0, -4.0]);
        assert_eq!(b, [-5.0, 2.5]);
    }

    #[test]
    fn what_does_not_fold_stays() {
        // A constant along the width is not per channel.
        let g = fused(&model("y = Mul(c, s)", ", float[2] s = {2.0, 3.0}"));
        assert_eq!(ops(&g), ["Conv", "Mul"]);
        // `t − c` negates the convolution: not a shift.
        let g = fused(&model("y = Sub(t, c)", ", float[1] t = {1.0}"));
        assert_eq!(ops(&g), ["Conv", "Sub"]);
        // A run-time operand.
        let text = format!(
            "{HEADER} g (float[1, 2, 2, 2] x, float[1] s) => (float[1, 2, 2, 2] y)
             <float[2, 2, 1, 1] w = {{1.0, 2.0, 3.0, 4.0}}> {{ c = Conv(x, w)\n y = Mul(c, s) }}"
        );
        assert_eq!(ops(&fused(&text)), ["Conv", "Mul"]);
        // The convolution's output also read elsewhere (a graph output).
        let text = format!(
            "{HEADER} g (float[1, 2, 2, 2] x) => (float[1, 2, 2, 2] y, float[1, 2, 2, 2] c)
             <float[2, 2, 1, 1] w = {{1.0, 2.0, 3.0, 4.0}}, float[1] s = {{2.0}}>
             {{ c = Conv(x, w)\n y = Mul(c, s) }}"
        );
        assert_eq!(ops(&fused(&text)), ["Conv", "Mul"]);
    }
}
