//! Graph rewrites done once per model before planning:
//! - `Constant` nodes become constant values;
//! - float16/bfloat16 weights read only by nodes computed in float32 (`ops::widen`), and not
//!   as their first input, are widened once (exactly), so the rewrites below see float32
//!   constants and the plans do not widen them again;
//! - `BatchNormalization` after a `Conv` with constant weights is folded into the weights, and
//!   so are `Mul`s and `Add`s of constants per channel after it (`affine`);
//! - the exporters' decomposed GELU, `0.5·x·(1 + Erf(x/√2))` in any of its usual spellings,
//!   becomes one internal `Activation` node, and so do the decomposed HardSwish,
//!   `x·Clip(x + 3, 0, 6)/6` or `x·HardSigmoid(x)`, and SiLU, `x·Sigmoid(x)` (`swish`);
//! - the exporters' decomposed layer normalization over the last axis becomes one
//!   `LayerNormalization` node (`layer_norm`);
//! - around a float32 `MatMul`, the `Add` of a constant per-column bias after a product by a
//!   constant matrix, the `Transpose` of a run-time operand, a following `Mul` or `Div` by a
//!   constant and a following `Add` of any tensor become one `FusedMatMul` (`matmul`);
//! - a `Conv` whose output only an `Add` reads takes the Add's other operand as a residual
//!   added in its write-back (`FusedConv` with a fourth input);
//! - an activation after a `Conv`, `Gemm` or `MatMul` runs inside its write-back (`FusedConv`,
//!   `FusedGemm`, `FusedMatMul`);
//! - a 1×1 convolution whose output only a depthwise convolution reads becomes one
//!   `ConvDepthwise` (computed in bands of rows), which also takes the 1×1 convolution that
//!   alone reads its output (a MobileNetV2 block's projection).
//! - on AVX-512, chains of 1×1, strided and 3×3 convolutions run on the channel-blocked
//!   layout, with reorders at their edges (`nchwc`).
//!
//! Modules: `half` (the half-precision weights), `affine` (the scales and shifts after a
//! convolution), `gelu` (the GELU patterns), `swish` (the HardSwish and SiLU patterns), `layer_norm`
//! (the layer normalizations), `matmul` (the products), `depthwise` (the 1×1 and depthwise
//! pairs), `nchwc` (the convolutions on the channel-blocked layout); the other rewrites and the
//! helpers they share are here.

mod affine;
mod depthwise;
mod gelu;
mod half;
mod layer_norm;
mod matmul;
mod nchwc;
mod swish;

use crate::ir::{Attr, Graph, Node, Tensor, TensorData, ValueId, ValueInfo};
use crate::ops;
use affine::fold_conv_affines;
use depthwise::{fuse_pointwise_depthwise, fuse_projections};
use gelu::fuse_gelu;
use half::widen_half_weights;
use layer_norm::fuse_layer_norms;
use matmul::{fuse_matmuls, is_matmul_by_constant};
use nchwc::block_pointwise_convs;
use std::collections::BTreeMap;
use std::sync::Arc;
use swish::fuse_swishes;

/// Applies every rewrite.
pub fn fuse(mut g: Graph) -> Graph {
    fold_constant_nodes(&mut g);
    widen_half_weights(&mut g);
    fold_batch_norms(&mut g);
    fold_conv_affines(&mut g);
    fuse_gelu(&mut g);
    fuse_swishes(&mut g);
    fuse_layer_norms(&mut g);
    fuse_matmuls(&mut g);
    fuse_residual_adds(&mut g);
    fuse_activations(&mut g);
    fuse_pointwise_depthwise(&mut g);
    fuse_projections(&mut g);
    if blocked_layout() {
        block_pointwise_convs(&mut g);
    }
    g
}

/// Whether chains of convolutions run on the channel-blocked layout (`nchwc`): on AVX-512,
/// where its kernel is tuned, unless `ONNXIFI_RUST_NCHWC=0`.
fn blocked_layout() -> bool {
    use crate::kernels::cpu::{self, Isa};
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        let off = std::env::var("ONNXIFI_RUST_NCHWC").is_ok_and(|v| v == "0");
        cpu::isa() == Isa::Avx512 && !off
    })
}

fn is_default(n: &Node, op: &str) -> bool {
    n.op_type == op && (n.domain.is_empty() || n.domain == "ai.onnx")
}

fn is_internal(n: &Node, op: &str) -> bool {
    n.op_type == op && n.domain == ops::INTERNAL_DOMAIN
}

/// Whether the values `inner` (computed by nodes a rewrite absorbs) can disappear into `outer`
/// (the rewritten node's output, of the same shape) without losing a declared type the plan
/// would check: yes when they declare nothing, or the same as `outer`; when only they declare
/// one, it moves to `outer`, so that the plan still checks it.
fn absorb_declared(g: &mut Graph, inner: &[ValueId], outer: ValueId) -> bool {
    let mut decl = g.values[outer].declared.clone();
    for &v in inner {
        match (&g.values[v].declared, &decl) {
            (None, _) => {}
            (Some(d), None) => decl = Some(d.clone()),
            (Some(d), Some(o)) if d == o => {}
            _ => return false,
        }
    }
    g.values[outer].declared = decl;
    true
}

/// The value of a one-element float32 constant.
fn scalar_f32(g: &Graph, id: Option<ValueId>) -> Option<f32> {
    match constant_f32(g, id) {
        Some((shape, v)) if v.len() == 1 && shape.len() <= 1 => Some(v[0]),
        _ => None,
    }
}

/// For each value, the node that computes it.
fn producers(g: &Graph) -> Vec<Option<usize>> {
    let mut p = vec![None; g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for id in n.outputs.iter().flatten() {
            p[*id] = Some(i);
        }
    }
    p
}

/// For a binary node `n` of type `op`, the input that is not `this`, when `this` is one of
/// its two inputs.
fn other_input(n: &Node, op: &str, this: ValueId) -> Option<Option<ValueId>> {
    if !is_default(n, op) || n.inputs.len() != 2 || n.outputs.len() != 1 {
        return None;
    }
    match (n.inputs[0], n.inputs[1]) {
        (Some(a), b) if a == this => Some(b),
        (a, Some(b)) if b == this => Some(a),
        _ => None,
    }
}

/// For each value, the index of the node that reads it, when exactly one node reads it once
/// and it is not a graph output. Computed once per pass: a pass only rewires a producer to the
/// output of the node it absorbs, which keeps every other entry valid, and removes nodes at its
/// end (see [`drop_removed`]).
fn sole_consumers(g: &Graph) -> Vec<Option<usize>> {
    let mut uses = vec![0usize; g.values.len()];
    let mut reader = vec![None; g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for id in n.inputs.iter().flatten() {
            uses[*id] += 1;
            reader[*id] = Some(i);
        }
    }
    for &o in &g.outputs {
        uses[o] += 1;
    }
    reader
        .into_iter()
        .zip(uses)
        .map(|(r, u)| if u == 1 { r } else { None })
        .collect()
}

/// Makes node `last` the internal `Activation` of `kind` reading `x`, in place of the pattern
/// of nodes `gone` (each read only by the next) ending at it, and marks those removed; `false`
/// (nothing changed) when one of them is already removed or a declared type would be lost.
fn replace_by_activation(
    g: &mut Graph,
    removed: &mut [bool],
    (x, gone, last): (ValueId, Vec<usize>, usize),
    kind: &str,
) -> bool {
    if gone.iter().chain([&last]).any(|&i| removed[i]) {
        return false;
    }
    let inner: Vec<ValueId> = gone.iter().filter_map(|&i| g.nodes[i].outputs[0]).collect();
    let last_out = g.nodes[last].outputs[0];
    match last_out {
        Some(out) if absorb_declared(g, &inner, out) => {}
        _ => return false,
    }
    let n = &mut g.nodes[last];
    n.op_type = "Activation".into();
    n.domain = ops::INTERNAL_DOMAIN.into();
    n.inputs = vec![Some(x)];
    n.attrs = BTreeMap::from([(
        "activation".to_string(),
        Attr::String(kind.as_bytes().to_vec()),
    )]);
    for i in gone {
        removed[i] = true;
    }
    true
}

/// Removes the nodes a pass absorbed.
fn drop_removed(g: &mut Graph, removed: &[bool]) {
    let mut k = 0;
    g.nodes.retain(|_| {
        k += 1;
        !removed[k - 1]
    });
}

fn fold_constant_nodes(g: &mut Graph) {
    let mut keep = Vec::with_capacity(g.nodes.len());
    for n in std::mem::take(&mut g.nodes) {
        let folded = if is_default(&n, "Constant") && n.inputs.is_empty() && n.attrs.len() == 1 {
            let t = match n.attrs.iter().next() {
                Some((k, Attr::Tensor(t))) if k == "value" => Some(t.clone()),
                Some((k, Attr::Float(v))) if k == "value_float" => Some(Tensor {
                    shape: vec![],
                    data: TensorData::F32(vec![*v]),
                }),
                Some((k, Attr::Floats(v))) if k == "value_floats" => Some(Tensor {
                    shape: vec![v.len()],
                    data: TensorData::F32(v.clone()),
                }),
                Some((k, Attr::Int(v))) if k == "value_int" => Some(Tensor {
                    shape: vec![],
                    data: TensorData::I64(vec![*v]),
                }),
                Some((k, Attr::Ints(v))) if k == "value_ints" => Some(Tensor {
                    shape: vec![v.len()],
                    data: TensorData::I64(v.clone()),
                }),
                _ => None,
            };
            match (t, n.outputs.first()) {
                (Some(t), Some(Some(out))) if n.outputs.len() == 1 => {
                    g.values[*out].constant = Some(Arc::new(t));
                    true
                }
                _ => false,
            }
        } else {
            false
        };
        if !folded {
            keep.push(n);
        }
    }
    g.nodes = keep;
}

fn constant_f32(g: &Graph, id: Option<ValueId>) -> Option<(Vec<usize>, &[f32])> {
    let t = g.values[id?].constant.as_deref()?;
    match &t.data {
        TensorData::F32(v) => Some((t.shape.clone(), v.as_slice())),
        _ => None,
    }
}

fn add_constant(g: &mut Graph, name: String, t: Tensor) -> ValueId {
    g.values.push(ValueInfo {
        name,
        declared: None,
        constant: Some(Arc::new(t)),
        packed_only: None,
        widened_from: None,
    });
    g.values.len() - 1
}

fn fold_batch_norms(g: &mut Graph) {
    let consumers = sole_consumers(g);
    let mut removed = vec![false; g.nodes.len()];
    for i in 0..g.nodes.len() {
        if removed[i] {
            continue;
        }
        if let Some(bn) = batch_norm_after(g, &consumers, i) {
            let p: Vec<&[f32]> = (1..5)
                .map(|k| constant_f32(g, g.nodes[bn].inputs[k]).expect("checked").1)
                .collect();
            let eps = match g.nodes[bn].attrs.get("epsilon") {
                Some(Attr::Float(e)) => *e,
                _ => 1e-5,
            };
            let (mul, add) = ops::fold_batch_norm(p[0], p[1], p[2], p[3], eps);
            let out = g.nodes[bn].outputs[0].expect("checked");
            rescale_conv(g, &consumers, i, (&mul, &add), (out, "bn"));
            removed[bn] = true;
        }
    }
    drop_removed(g, &removed);
}

/// Folds `y = mul·conv(x) + add` (one factor and term per output channel) into Conv node
/// `conv`, whose weights (4-D or more, float32 constants, as its bias if any) it rescales and
/// whose output becomes `out`; the new constants are named after the node and `what`.
fn rescale_conv(
    g: &mut Graph,
    consumers: &[Option<usize>],
    conv: usize,
    (mul, add): (&[f32], &[f32]),
    (out, what): (ValueId, &str),
) {
    let w_in = g.nodes[conv].inputs[1].expect("checked");
    let (w_shape, w) = constant_f32(g, Some(w_in)).expect("checked");
    let m = w_shape[0];
    // An empty weight has no rows to scale (chunks of at least one element).
    let per = w.len().checked_div(m).unwrap_or(0).max(1);
    let bias: Vec<f32> = match g.nodes[conv].inputs.get(2).copied().flatten() {
        Some(id) => constant_f32(g, Some(id)).expect("checked").1.to_vec(),
        None => vec![0.0; m],
    };
    let new_b: Vec<f32> = bias
        .iter()
        .zip(mul.iter().zip(add))
        .map(|(&b, (&k, &a))| b * k + a)
        .collect();
    let name = g.nodes[conv].name.clone();
    // Weights only this Conv reads are scaled where they are: a copy would fault a model's
    // worth of fresh pages in (most of a large model's load time is the kernel handing out
    // pages) and hold both copies at the peak.
    let w_id = if consumers[w_in] == Some(conv) {
        w_in
    } else {
        let (w_shape, w) = constant_f32(g, Some(w_in)).expect("checked");
        let copy = Tensor {
            shape: w_shape,
            data: TensorData::F32(w.to_vec()),
        };
        add_constant(g, format!("{name}::{what}_weights"), copy)
    };
    scale_rows(g, w_id, per, mul);
    let b_id = add_constant(
        g,
        format!("{name}::{what}_bias"),
        Tensor {
            shape: vec![m],
            data: TensorData::F32(new_b),
        },
    );
    let node = &mut g.nodes[conv];
    node.inputs.resize(3, None);
    node.inputs[1] = Some(w_id);
    node.inputs[2] = Some(b_id);
    node.outputs[0] = Some(out);
}

/// Multiplies each output channel's `per` weights of constant `w` by its factor in `mul`, in
/// place: `w` is read by the Conv being folded alone (its own weights, or a copy made for it),
/// and its tensor is shared only when another value holds the same tensor, which then gets a
/// copy of its own (`Arc::make_mut`).
fn scale_rows(g: &mut Graph, w: ValueId, per: usize, mul: &[f32]) {
    let t = Arc::make_mut(g.values[w].constant.as_mut().expect("a constant"));
    let TensorData::F32(v) = &mut t.data else {
        unreachable!("checked: float weights")
    };
    for (row, &k) in v.chunks_exact_mut(per).zip(mul) {
        row.iter_mut().for_each(|x| *x *= k);
    }
}

/// The index of a foldable BatchNormalization reading the output of Conv node `i`.
fn batch_norm_after(g: &Graph, consumers: &[Option<usize>], i: usize) -> Option<usize> {
    let conv = &g.nodes[i];
    if !is_default(conv, "Conv") || conv.outputs.len() != 1 {
        return None;
    }
    let (w_shape, _) = constant_f32(g, conv.inputs.get(1).copied().flatten())?;
    if w_shape.len() < 3 {
        return None;
    }
    if let Some(b) = conv.inputs.get(2).copied().flatten() {
        constant_f32(g, Some(b))?;
    }
    let out = conv.outputs[0]?;
    let bn = consumers[out]?;
    let node = &g.nodes[bn];
    let training = matches!(node.attrs.get("training_mode"), Some(Attr::Int(t)) if *t != 0);
    if !is_default(node, "BatchNormalization")
        || node.inputs.len() != 5
        || node.inputs[0] != Some(out)
        || training
        || node.outputs.len() != 1
        || node.outputs[0].is_none()
        || node
            .attrs
            .keys()
            .any(|k| !matches!(k.as_str(), "epsilon" | "momentum" | "training_mode"))
    {
        return None;
    }
    for k in 1..5 {
        let (shape, _) = constant_f32(g, node.inputs[k])?;
        if shape != [w_shape[0]] {
            return None;
        }
    }
    Some(bn)
}

/// The activation a node applies, as the `activation` attribute of `FusedConv`.
fn activation_of(g: &Graph, n: &Node) -> Option<(String, Vec<f32>)> {
    let internal = n.domain == ops::INTERNAL_DOMAIN;
    if !(n.domain.is_empty() || n.domain == "ai.onnx" || internal) || n.outputs.len() != 1 {
        return None;
    }
    match n.op_type.as_str() {
        "Relu" | "Sigmoid" | "Tanh" | "HardSwish" if n.inputs.len() == 1 && !internal => {
            Some((n.op_type.clone(), vec![]))
        }
        "Activation" if internal => match n.attrs.get("activation") {
            Some(Attr::String(kind)) if !n.attrs.contains_key("activation_params") => {
                Some((String::from_utf8_lossy(kind).into_owned(), vec![]))
            }
            _ => None,
        },
        "Clip" if !internal => {
            let bound = |k: usize, attr: &str, default: f32| -> Option<f32> {
                if g.opset < 11 {
                    return Some(match n.attrs.get(attr) {
                        Some(Attr::Float(v)) => *v,
                        _ => default,
                    });
                }
                match n.inputs.get(k).copied().flatten() {
                    None => Some(default),
                    Some(id) => {
                        let (_, v) = constant_f32(g, Some(id))?;
                        (v.len() == 1).then(|| v[0])
                    }
                }
            };
            Some((
                "Clip".into(),
                vec![
                    bound(1, "min", f32::NEG_INFINITY)?,
                    bound(2, "max", f32::INFINITY)?,
                ],
            ))
        }
        _ => None,
    }
}

/// A `Conv` with constant 4-D weights whose output only an `Add` reads becomes a `FusedConv`
/// with the Add's other operand as its residual input (`Y = Conv(X, W, B) + Z`), in the Add's
/// place: the residual may be computed after the convolution in the node order, and the
/// convolution's inputs all come before the Add.
fn fuse_residual_adds(g: &mut Graph) {
    let consumers = sole_consumers(g);
    // (conv node, add node, residual, the Add's output)
    let mut found = Vec::new();
    for (i, conv) in g.nodes.iter().enumerate() {
        if !is_default(conv, "Conv")
            || !(2..=3).contains(&conv.inputs.len())
            || conv.outputs.len() != 1
            || !matches!(constant_f32(g, conv.inputs[1]), Some((w, _)) if w.len() == 4)
        {
            continue;
        }
        let Some(out) = conv.outputs[0] else {
            continue;
        };
        let Some(a) = consumers[out] else {
            continue;
        };
        let add = &g.nodes[a];
        if !add.attrs.is_empty() {
            continue;
        }
        if let (Some(Some(z)), Some(&Some(new_out))) =
            (other_input(add, "Add", out), add.outputs.first())
        {
            found.push((i, a, z, new_out));
        }
    }
    let mut removed = vec![false; g.nodes.len()];
    for (i, a, z, new_out) in found {
        // An Add of two convolutions' outputs absorbs only the first.
        let Some(out) = g.nodes[i].outputs[0] else {
            continue;
        };
        if !is_default(&g.nodes[a], "Add") || !absorb_declared(g, &[out], new_out) {
            continue;
        }
        move_into_add(g, (i, a), ("FusedConv", z, new_out));
        removed[i] = true;
    }
    drop_removed(g, &removed);
}

/// Puts node `i`, made the internal `op_type` with `z` as its fourth input (the first three
/// kept, padded with absent ones) and `out` as its output, in the place of node `add` (the Add
/// it absorbs, which may come after `z`'s producer); node `i` is then to be removed.
fn move_into_add(
    g: &mut Graph,
    (i, add): (usize, usize),
    (op_type, z, out): (&str, ValueId, ValueId),
) {
    let mut fused = g.nodes[i].clone();
    fused.op_type = op_type.into();
    fused.domain = ops::INTERNAL_DOMAIN.into();
    fused.inputs.resize(3, None);
    fused.inputs.push(Some(z));
    fused.outputs[0] = Some(out);
    g.nodes[add] = fused;
}

fn fuse_activations(g: &mut Graph) {
    let consumers = sole_consumers(g);
    let mut removed = vec![false; g.nodes.len()];
    for i in 0..g.nodes.len() {
        if removed[i] {
            continue;
        }
        let conv = &g.nodes[i];
        let fused_name = if is_default(conv, "Conv")
            || (is_internal(conv, "FusedConv") && !conv.attrs.contains_key("activation"))
        {
            "FusedConv"
        } else if is_default(conv, "Gemm") {
            "FusedGemm"
        } else if is_matmul_by_constant(g, conv) || is_internal(conv, "FusedMatMul") {
            "FusedMatMul"
        } else {
            ""
        };
        if !fused_name.is_empty() && conv.outputs.len() == 1 {
            if let Some(out) = conv.outputs[0] {
                if let Some(a) = consumers[out] {
                    let act_node = &g.nodes[a];
                    if act_node.inputs.first() == Some(&Some(out)) {
                        if let Some((kind, params)) = activation_of(g, act_node) {
                            let new_out = act_node.outputs[0];
                            match new_out {
                                Some(o) if absorb_declared(g, &[out], o) => {}
                                _ => continue,
                            }
                            let conv = &mut g.nodes[i];
                            let mut attrs: BTreeMap<String, Attr> = conv.attrs.clone();
                            attrs.insert("activation".into(), Attr::String(kind.into_bytes()));
                            attrs.insert("activation_params".into(), Attr::Floats(params));
                            conv.attrs = attrs;
                            conv.op_type = fused_name.into();
                            conv.domain = ops::INTERNAL_DOMAIN.into();
                            conv.outputs[0] = new_out;
                            removed[a] = true;
                        }
                    }
                }
            }
        }
    }
    drop_removed(g, &removed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::import::import;
    use crate::kernels::reference::erf_f64;

    /// The graph of a model in the ONNX text syntax, after [`fuse`].
    pub(super) fn fused(text: &str) -> Graph {
        let proto = crate::text::parse_model(text).expect("model parses");
        fuse(import(proto, Vec::new()).expect("model imports"))
    }

    pub(super) fn ops(g: &Graph) -> Vec<&str> {
        g.nodes.iter().map(|n| n.op_type.as_str()).collect()
    }

    pub(super) const HEADER: &str = "<ir_version: 8, opset_import: [\"\" : 17]>";

    /// `n` values of a fixed pseudo-random sequence in [-1, 1).
    pub(super) fn vals(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// Asserts `got` as long as `want` and every value within `rel · (1 + |want|)` of it.
    pub(super) fn close_to(got: &[f32], want: &[f64], rel: f64, what: &str) {
        assert_eq!(got.len(), want.len(), "{what}: length");
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            assert!(
                (g as f64 - w).abs() <= rel * (1.0 + w.abs()),
                "{what} [{i}]: {g} vs {w}"
            );
        }
    }

    #[test]
    fn matmul_bias_and_gelu_fuse_and_compute_the_same() {
        let text = format!(
            "{HEADER} g (float[2, 3] x) => (float[2, 2] y)
             <float[3, 2] w = {{1.0, -2.0, 0.5, 1.0, -1.0, 0.25}}, float[2] b = {{0.5, -1.0}},
              float s = {{1.4142135}}, float one = {{1.0}}, float half = {{0.5}}>
             {{ m = MatMul(x, w)\n a = Add(m, b)\n d = Div(a, s)\n e = Erf(d)\n
                p = Add(e, one)\n q = Mul(a, p)\n y = Mul(q, half) }}"
        );
        let g = fused(&text);
        assert_eq!(ops(&g), ["FusedMatMul"]);
        // Through the engine: y = gelu(x·w + b), checked against values computed here.
        let proto = crate::text::parse_model(&text).expect("parses");
        let bytes = prost::Message::encode_to_vec(&proto);
        let exe = crate::graph::compile_executable(&bytes, Vec::new()).expect("compiles");
        let x = [0.5f32, -1.0, 2.0, 1.5, 0.25, -0.75];
        let w = [1.0f64, -2.0, 0.5, 1.0, -1.0, 0.25];
        let b = [0.5f64, -1.0];
        let input = crate::ir::Tensor::new(vec![2, 3], crate::ir::TensorData::F32(x.to_vec()))
            .expect("tensor");
        let out = exe.run(vec![input]).expect("runs");
        let got = out[0].as_f32().expect("f32");
        for i in 0..2 {
            for j in 0..2 {
                let a: f64 = (0..3)
                    .map(|k| x[i * 3 + k] as f64 * w[k * 2 + j])
                    .sum::<f64>()
                    + b[j];
                let want = 0.5 * a * (1.0 + erf_f64(a / std::f64::consts::SQRT_2));
                assert!(
                    (got[i * 2 + j] as f64 - want).abs() < 1e-6,
                    "{i},{j}: {} vs {want}",
                    got[i * 2 + j]
                );
            }
        }
    }

    /// Runs a text model on float32 inputs `(shape, data)` through the engine: its first
    /// output's shape and values.
    pub(super) fn run_inputs(text: &str, inputs: &[(&[usize], &[f32])]) -> (Vec<usize>, Vec<f32>) {
        let proto = crate::text::parse_model(text).expect("parses");
        let bytes = prost::Message::encode_to_vec(&proto);
        let exe = crate::graph::compile_executable(&bytes, Vec::new()).expect("compiles");
        let inputs = inputs
            .iter()
            .map(|(s, d)| {
                crate::ir::Tensor::new(s.to_vec(), crate::ir::TensorData::F32(d.to_vec()))
                    .expect("tensor")
            })
            .collect();
        let out = exe.run(inputs).expect("runs");
        (out[0].shape.clone(), out[0].as_f32().expect("f32").to_vec())
    }

    /// Runs a one-input text model through the engine.
    pub(super) fn run_text(text: &str, shape: Vec<usize>, x: &[f32]) -> Vec<f32> {
        let proto = crate::text::parse_model(text).expect("parses");
        let bytes = prost::Message::encode_to_vec(&proto);
        let exe = crate::graph::compile_executable(&bytes, Vec::new()).expect("compiles");
        let input =
            crate::ir::Tensor::new(shape, crate::ir::TensorData::F32(x.to_vec())).expect("tensor");
        let out = exe.run(vec![input]).expect("runs");
        out[0].as_f32().expect("f32").to_vec()
    }

    #[test]
    fn residual_add_and_relu_fuse_into_the_conv_and_compute_the_same() {
        // y = Relu(Conv1x1(x) + b + r) with the residual r = Mul(x, 2) computed after the Conv
        // in the node order: the fused node must take the Add's place.
        let text = format!(
            "{HEADER} g (float[1, 2, 1, 2] x) => (float[1, 2, 1, 2] y)
             <float[2, 2, 1, 1] w = {{1.0, -2.0, 0.5, 3.0}}, float[2] b = {{0.25, -4.0}},
              float two = {{2.0}}>
             {{ c = Conv(x, w, b)\n r = Mul(x, two)\n a = Add(r, c)\n y = Relu(a) }}"
        );
        assert_eq!(ops(&fused(&text)), ["Mul", "FusedConv"]);
        let x = [1.0f32, -1.0, 0.5, 2.0];
        // Channel-major: x[c][p]; conv[o][p] = Σ_c w[o][c]·x[c][p] + b[o].
        let w = [[1.0f32, -2.0], [0.5, 3.0]];
        let b = [0.25f32, -4.0];
        let got = run_text(&text, vec![1, 2, 1, 2], &x);
        for o in 0..2 {
            for p in 0..2 {
                let conv = w[o][0] * x[p] + w[o][1] * x[2 + p] + b[o];
                let want = (conv + 2.0 * x[o * 2 + p]).max(0.0);
                assert_eq!(got[o * 2 + p], want, "o{o} p{p}");
            }
        }
        // A constant residual that broadcasts along the width still computes the Add; one
        // value per channel folds into the bias instead (`affine`), and computes it too.
        for (r_shape, fused_op, along_width) in [
            ("1, 1, 1, 2", "FusedConv", true),
            ("1, 2, 1, 1", "Conv", false),
        ] {
            let text = format!(
                "{HEADER} g (float[1, 2, 1, 2] x) => (float[1, 2, 1, 2] y)
                 <float[2, 2, 1, 1] w = {{1.0, -2.0, 0.5, 3.0}}, float[{r_shape}] r = {{10.0, -10.0}}>
                 {{ c = Conv(x, w)\n y = Add(c, r) }}"
            );
            assert_eq!(ops(&fused(&text)), [fused_op]);
            let got = run_text(&text, vec![1, 2, 1, 2], &x);
            let r = [10.0f32, -10.0];
            for o in 0..2 {
                for p in 0..2 {
                    let want =
                        w[o][0] * x[p] + w[o][1] * x[2 + p] + r[if along_width { p } else { o }];
                    assert_eq!(got[o * 2 + p], want, "broadcast {r_shape}: o{o} p{p}");
                }
            }
        }
        // A Conv output read twice is not fused.
        let text = format!(
            "{HEADER} g (float[1, 2, 1, 2] x) => (float[1, 2, 1, 2] y, float[1, 2, 1, 2] c)
             <float[2, 2, 1, 1] w = {{1.0, -2.0, 0.5, 3.0}}> {{ c = Conv(x, w)\n y = Add(c, x) }}"
        );
        assert_eq!(ops(&fused(&text)), ["Conv", "Add"]);
    }

    /// BatchNormalization after a Conv is folded into its weights: in place when the Conv is
    /// the weight's only reader, into a copy when two Convs share the weight (each with its own
    /// BatchNormalization, so the shared values must stay as they were for the other).
    #[test]
    fn batch_norm_folds_into_sole_and_shared_weights() {
        // Per channel o: y = (conv - mean)/sqrt(var + eps)·scale + b_bn, eps = 0 here.
        let text = format!(
            "{HEADER} g (float[1, 2, 1, 1] x) => (float[1, 2, 1, 1] y, float[1, 2, 1, 1] z)
             <float[2, 2, 1, 1] w = {{1.0, -2.0, 0.5, 3.0}},
              float[2] s1 = {{2.0, 0.5}}, float[2] b1 = {{1.0, -1.0}},
              float[2] m1 = {{0.5, 0.25}}, float[2] v1 = {{4.0, 1.0}},
              float[2] s2 = {{-1.0, 3.0}}, float[2] b2 = {{0.0, 2.0}},
              float[2] m2 = {{1.0, -1.0}}, float[2] v2 = {{1.0, 16.0}}>
             {{ c1 = Conv(x, w)\n y = BatchNormalization <epsilon = 0.0> (c1, s1, b1, m1, v1)\n
                c2 = Conv(x, w)\n z = BatchNormalization <epsilon = 0.0> (c2, s2, b2, m2, v2) }}"
        );
        let g = fused(&text);
        assert_eq!(ops(&g), ["Conv", "Conv"]);
        // The shared weight is copied: the two Convs read different, new weights.
        assert_ne!(g.nodes[0].inputs[1], g.nodes[1].inputs[1]);
        let x = [1.5f32, -0.5];
        let w = [[1.0f32, -2.0], [0.5, 3.0]];
        let bn = |s: [f32; 2], b: [f32; 2], m: [f32; 2], v: [f32; 2], o: usize| {
            let conv = w[o][0] * x[0] + w[o][1] * x[1];
            (conv - m[o]) / v[o].sqrt() * s[o] + b[o]
        };
        let proto = crate::text::parse_model(&text).expect("parses");
        let bytes = prost::Message::encode_to_vec(&proto);
        let exe = crate::graph::compile_executable(&bytes, Vec::new()).expect("compiles");
        let input =
            crate::ir::Tensor::new(vec![1, 2, 1, 1], crate::ir::TensorData::F32(x.to_vec()))
                .expect("tensor");
        let out = exe.run(vec![input]).expect("runs");
        let (y, z) = (out[0].as_f32().expect("f32"), out[1].as_f32().expect("f32"));
        for o in 0..2 {
            let want_y = bn([2.0, 0.5], [1.0, -1.0], [0.5, 0.25], [4.0, 1.0], o);
            let want_z = bn([-1.0, 3.0], [0.0, 2.0], [1.0, -1.0], [1.0, 16.0], o);
            assert!((y[o] - want_y).abs() < 1e-6, "y[{o}] {} vs {want_y}", y[o]);
            assert!((z[o] - want_z).abs() < 1e-6, "z[{o}] {} vs {want_z}", z[o]);
        }
        // A weight only one Conv reads is scaled in place: the Conv keeps its weight value,
        // which now holds the folded weights.
        let text = format!(
            "{HEADER} g (float[1, 2, 1, 1] x) => (float[1, 2, 1, 1] y)
             <float[2, 2, 1, 1] w = {{1.0, -2.0, 0.5, 3.0}},
              float[2] s1 = {{2.0, 0.5}}, float[2] b1 = {{1.0, -1.0}},
              float[2] m1 = {{0.5, 0.25}}, float[2] v1 = {{4.0, 1.0}}>
             {{ c1 = Conv(x, w)\n y = BatchNormalization <epsilon = 0.0> (c1, s1, b1, m1, v1) }}"
        );
        let g = fused(&text);
        assert_eq!(ops(&g), ["Conv"]);
        let w_id = g.nodes[0].inputs[1].expect("weight");
        assert_eq!(g.values[w_id].name, "w");
        let folded = g.values[w_id].constant.as_deref().expect("constant");
        // Channel 0 scaled by 2/sqrt(4) = 1, channel 1 by 0.5/sqrt(1) = 0.5.
        assert_eq!(folded.as_f32().expect("f32"), [1.0, -2.0, 0.25, 1.5]);
    }
}
