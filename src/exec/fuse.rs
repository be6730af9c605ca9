//! Graph rewrites done once per model before planning: `Constant` nodes become constant values,
//! `BatchNormalization` after a `Conv` with constant weights is folded into the weights, and an
//! activation after a `Conv` or `Gemm` runs inside its write-back (`FusedConv`, `FusedGemm`).

use crate::ir::{Attr, Graph, Node, Tensor, TensorData, ValueId, ValueInfo};
use crate::ops;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Applies every rewrite.
pub fn fuse(mut g: Graph) -> Graph {
    fold_constant_nodes(&mut g);
    fold_batch_norms(&mut g);
    fuse_activations(&mut g);
    g
}

fn is_default(n: &Node, op: &str) -> bool {
    n.op_type == op && (n.domain.is_empty() || n.domain == "ai.onnx")
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
            let conv = &g.nodes[i];
            let (w_shape, w) = constant_f32(g, conv.inputs[1]).expect("checked");
            let m = w_shape[0];
            let bias: Vec<f32> = match conv.inputs.get(2).copied().flatten() {
                Some(id) => constant_f32(g, Some(id)).expect("checked").1.to_vec(),
                None => vec![0.0; m],
            };
            let p: Vec<&[f32]> = (1..5)
                .map(|k| constant_f32(g, g.nodes[bn].inputs[k]).expect("checked").1)
                .collect();
            let eps = match g.nodes[bn].attrs.get("epsilon") {
                Some(Attr::Float(e)) => *e,
                _ => 1e-5,
            };
            let (mul, add) = ops::fold_batch_norm(p[0], p[1], p[2], p[3], eps);
            let per = w.len() / m;
            let new_w: Vec<f32> = w
                .iter()
                .enumerate()
                .map(|(k, &x)| x * mul[k / per])
                .collect();
            let new_b: Vec<f32> = bias
                .iter()
                .zip(&mul)
                .zip(&add)
                .map(|((&b, &k), &a)| b * k + a)
                .collect();
            let name = g.nodes[i].name.clone();
            let w_id = add_constant(
                g,
                format!("{name}::bn_weights"),
                Tensor {
                    shape: w_shape,
                    data: TensorData::F32(new_w),
                },
            );
            let b_id = add_constant(
                g,
                format!("{name}::bn_bias"),
                Tensor {
                    shape: vec![m],
                    data: TensorData::F32(new_b),
                },
            );
            let out = g.nodes[bn].outputs[0];
            let conv = &mut g.nodes[i];
            conv.inputs.resize(3, None);
            conv.inputs[1] = Some(w_id);
            conv.inputs[2] = Some(b_id);
            conv.outputs[0] = out;
            removed[bn] = true;
        }
    }
    drop_removed(g, &removed);
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
    if !(n.domain.is_empty() || n.domain == "ai.onnx") || n.outputs.len() != 1 {
        return None;
    }
    match n.op_type.as_str() {
        "Relu" | "Sigmoid" | "Tanh" if n.inputs.len() == 1 => Some((n.op_type.clone(), vec![])),
        "Clip" => {
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

fn fuse_activations(g: &mut Graph) {
    let consumers = sole_consumers(g);
    let mut removed = vec![false; g.nodes.len()];
    for i in 0..g.nodes.len() {
        if removed[i] {
            continue;
        }
        let conv = &g.nodes[i];
        let fused_name = if is_default(conv, "Conv") {
            "FusedConv"
        } else if is_default(conv, "Gemm") {
            "FusedGemm"
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
