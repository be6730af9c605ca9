//! Runs chains of convolutions on the channel-blocked layout (`kernels::nchwc`): every float32
//! `Conv` or `FusedConv` of one group with constant filters, channel counts that are multiples
//! of 16 and either a 1×1 kernel without padding or a strided kernel of at most 49 taps with
//! explicit pads (ResNet's stride-2 3×3 layers) becomes an internal `NchwcConv`, whose input
//! and output are blocked tensors (`[N, C/16, H, W, 16]`). So does a 3×3 kernel at stride 1
//! and dilation 1 (ResNet's other 3×3 layers, which `NchwcConv` runs with Winograd on the
//! blocked tensors where it suits them), but only where it reads the output of another
//! blocked convolution: it continues a chain rather than starting one, since on its own
//! (YOLO's and PP-OCR's 3×3 layers between concatenations and splits, or beside a blocked
//! reader of the same plain value) it would only add reorders. A `ToNchwc` reorder is made once for each plain
//! value such a node reads, and a `FromNchwc` once for each of their outputs that another node,
//! a subgraph or the caller reads, so that a chain (a ResNet's block output feeding the next
//! block's first 1×1 convolution and its residual) stays blocked between its convolutions. A
//! residual is taken only from a value already blocked (an `NchwcConv`'s output or a
//! `ToNchwc` copy made for an earlier reader): those have a multiple of 16 channels, which a
//! valid residual then matches, and broadcasting over N, H and W means the same blocked. Pads
//! are taken only when each is smaller than the kernel along its axis, which bounds the staged
//! copy. A group of converted convolutions linked by the blocked values they read, made only
//! of 1×1 convolutions at stride 1, stays plain: the layout gains them nothing and their
//! reorders cost (PP-OCR's and MobileNet's lone 1×1 layers between depthwise ones). Runs last,
//! after every other fusion.

use super::matmul::known_f32;
use super::{constant_f32, is_default, is_internal};
use crate::ir::{Attr, Graph, Node, ValueId, ValueInfo};
use crate::ops;
use std::collections::BTreeMap;

/// Blocks every such convolution of `g`, but for the groups of them that only 1×1 convolutions
/// at stride 1 make up (see [`pointwise_only_groups`]).
pub(super) fn block_pointwise_convs(g: &mut Graph) {
    let mut trial = g.clone();
    let groups = convert(&mut trial, &[]);
    let excluded = pointwise_only_groups(&groups);
    if excluded.iter().any(|&e| e) {
        convert(g, &excluded);
    } else {
        *g = trial;
    }
}

/// Which of `g`'s nodes the conversion leaves plain: those of every group (the converted
/// nodes linked by the blocked values they read: one's output, a shared `ToNchwc` copy, a
/// residual) made only of 1×1 convolutions at stride 1. Such a group gains nothing from the
/// layout and pays its reorders: blocked with its reorders against the plain GEMM, single
/// 1×1 layers ran 1.1–4.6× slower (`onnxifi-run bench`, 1 thread: 16→32 at 320², 32→16 at
/// 112², 48→48 at 160², 240→240 at 40², …) and level at 7² and 14², and PP-OCRv4's
/// recogniser and detector, whose blocked groups are such layers between depthwise ones, ran
/// 0.86× faster plain. Groups with a spatial or strided convolution are ResNet's chains,
/// which gain from the direct blocked kernels.
fn pointwise_only_groups(groups: &[Option<(usize, bool)>]) -> Vec<bool> {
    let mut spatial = vec![false; groups.len()];
    for &(root, pointwise) in groups.iter().flatten() {
        spatial[root] |= !pointwise;
    }
    groups
        .iter()
        .map(|g| g.is_some_and(|(root, _)| !spatial[root]))
        .collect()
}

/// Converts every candidate of `g` not `excluded` (by node index; an empty slice excludes
/// none) into an `NchwcConv`, with its reorders. Returns, for each of `g`'s nodes before the
/// conversion, `(group, pointwise)` when converted: the index of a node of its group (the same
/// for the whole group) and whether it is a 1×1 convolution at stride 1.
fn convert(g: &mut Graph, excluded: &[bool]) -> Vec<Option<(usize, bool)>> {
    let f32s = known_f32(g);
    let mut blocked: Vec<Option<ValueId>> = vec![None; g.values.len()];
    // The values a converted convolution computes (not the `ToNchwc` copies of plain ones).
    let mut computed_blocked = vec![false; g.values.len()];
    // The node (by index before the conversion) that computes or first read each blocked value.
    let mut owner: Vec<Option<usize>> = vec![None; g.values.len()];
    let mut parent: Vec<usize> = (0..g.nodes.len()).collect();
    let mut pointwise = vec![None; g.nodes.len()];
    // Outputs of converted nodes, by the index their node has in `nodes`.
    let mut converted_outputs: Vec<(usize, ValueId)> = Vec::new();
    let mut nodes: Vec<Node> = Vec::with_capacity(g.nodes.len());
    for (i, n) in std::mem::take(&mut g.nodes).into_iter().enumerate() {
        let spec = match candidate(g, &n, &f32s) {
            Some(spec) if !excluded.get(i).copied().unwrap_or(false) => spec,
            _ => {
                nodes.push(n);
                continue;
            }
        };
        let z = match n.inputs.get(3).copied().flatten() {
            None => None,
            Some(z) => match blocked[z] {
                Some(zb) => Some(zb),
                None => {
                    nodes.push(n);
                    continue;
                }
            },
        };
        let (x, out) = (spec.x, spec.out);
        if spec.continues_only && !computed_blocked.get(x).copied().unwrap_or(false) {
            nodes.push(n);
            continue;
        }
        for v in [Some(x), n.inputs.get(3).copied().flatten()]
            .into_iter()
            .flatten()
        {
            match owner[v] {
                Some(j) => union(&mut parent, i, j),
                None => owner[v] = Some(i),
            }
        }
        pointwise[i] = Some(spec.pointwise);
        let xb = match blocked[x] {
            Some(xb) => xb,
            None => {
                let xb = new_value(g, x);
                blocked.resize(g.values.len(), None);
                blocked[x] = Some(xb);
                nodes.push(internal(&n, "ToNchwc", vec![Some(x)], xb, BTreeMap::new()));
                xb
            }
        };
        let ob = new_value(g, out);
        blocked.resize(g.values.len(), None);
        blocked[out] = Some(ob);
        computed_blocked.resize(g.values.len(), false);
        computed_blocked[out] = true;
        owner[out] = Some(i);
        let mut attrs = BTreeMap::new();
        for key in [
            "strides",
            "pads",
            "dilations",
            "activation",
            "activation_params",
        ] {
            if let Some(a) = n.attrs.get(key) {
                attrs.insert(key.to_string(), a.clone());
            }
        }
        let inputs = vec![Some(xb), n.inputs[1], n.inputs.get(2).copied().flatten(), z];
        converted_outputs.push((nodes.len(), out));
        nodes.push(internal(&n, "NchwcConv", inputs, ob, attrs));
    }
    // The outputs something other than a blocked convolution reads, in plain layout.
    let mut plain_read = vec![false; g.values.len()];
    for n in nodes.iter().filter(|n| !is_internal(n, "NchwcConv")) {
        for v in n.inputs.iter().flatten() {
            plain_read[*v] = true;
        }
    }
    for &o in &g.outputs {
        plain_read[o] = true;
    }
    let mut with_reorders = Vec::with_capacity(nodes.len() + converted_outputs.len());
    let mut next = converted_outputs.iter().peekable();
    for (i, n) in nodes.into_iter().enumerate() {
        let after = match next.peek() {
            Some(&&(at, out)) if at == i => {
                next.next();
                plain_read[out].then_some(out)
            }
            _ => None,
        };
        let back = after.map(|out| {
            let ob = blocked[out].expect("a converted output is blocked");
            internal(&n, "FromNchwc", vec![Some(ob)], out, BTreeMap::new())
        });
        with_reorders.push(n);
        with_reorders.extend(back);
    }
    g.nodes = with_reorders;
    (0..pointwise.len())
        .map(|i| pointwise[i].map(|p| (find(&mut parent, i), p)))
        .collect()
}

/// The root of `i`'s set in the union-find forest `parent` (paths halved on the way).
fn find(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

/// Joins the sets of `i` and `j` in `parent`.
fn union(parent: &mut [usize], i: usize, j: usize) {
    let (a, b) = (find(parent, i), find(parent, j));
    parent[a] = b;
}

/// The input and output of a convolution that can run blocked.
struct Candidate {
    x: ValueId,
    out: ValueId,
    /// Taken only when its input is another blocked convolution's output (a 3×3 kernel at
    /// stride 1).
    continues_only: bool,
    /// A 1×1 kernel at stride 1.
    pointwise: bool,
}

/// Whether node `n` is a float32 convolution the blocked kernel computes.
fn candidate(g: &Graph, n: &Node, f32s: &[bool]) -> Option<Candidate> {
    let fused = is_internal(n, "FusedConv");
    if !(is_default(n, "Conv") || fused) || n.outputs.len() != 1 || n.inputs.len() < 2 {
        return None;
    }
    let x = n.inputs[0]?;
    let out = n.outputs[0]?;
    if !f32s[x] {
        return None;
    }
    let (w_shape, _) = constant_f32(g, n.inputs[1])?;
    let &[m, c, kh, kw] = &w_shape[..] else {
        return None;
    };
    if !crate::kernels::nchwc::blockable(m) || !crate::kernels::nchwc::blockable(c) {
        return None;
    }
    if let Some(b) = n.inputs.get(2).copied().flatten() {
        let (b_shape, _) = constant_f32(g, Some(b))?;
        if b_shape != [m] {
            return None;
        }
    }
    let pointwise = (kh, kw) == (1, 1);
    let strided = matches!(n.attrs.get("strides"), Some(Attr::Ints(s)) if s.iter().any(|&v| v > 1));
    let dilated =
        matches!(n.attrs.get("dilations"), Some(Attr::Ints(d)) if d.iter().any(|&v| v != 1));
    let continues_only = (kh, kw) == (3, 3) && !strided && !dilated;
    if !(pointwise || continues_only || strided && kh * kw <= crate::kernels::nchwc::MAX_TAPS) {
        return None;
    }
    for (key, attr) in &n.attrs {
        let fits = match (key.as_str(), attr) {
            ("group", Attr::Int(1)) => true,
            ("kernel_shape", Attr::Ints(k)) => k == &[kh as i64, kw as i64],
            ("dilations", Attr::Ints(d)) => d.len() == 2 && d.iter().all(|&v| v >= 1),
            ("pads", Attr::Ints(p))
                if p.len() == 4
                    && !(p[0] < kh as i64
                        && p[2] < kh as i64
                        && p[1] < kw as i64
                        && p[3] < kw as i64) =>
            {
                false
            }
            ("pads", Attr::Ints(p)) => {
                p.len() == 4
                    && p.iter().all(|&v| v >= 0)
                    && (!pointwise || p.iter().all(|&v| v == 0))
            }
            ("strides", Attr::Ints(s)) => s.len() == 2 && s.iter().all(|&v| v >= 1),
            // A 1×1 window pads nothing for SAME either: its output is ⌈in / stride⌉.
            ("auto_pad", Attr::String(s)) if pointwise => {
                matches!(&s[..], b"NOTSET" | b"VALID" | b"SAME_UPPER" | b"SAME_LOWER")
            }
            ("auto_pad", Attr::String(s)) => matches!(&s[..], b"NOTSET"),
            ("activation" | "activation_params", _) => fused,
            _ => false,
        };
        if !fits {
            return None;
        }
    }
    Some(Candidate {
        x,
        out,
        continues_only,
        pointwise: pointwise && !strided,
    })
}

/// A new value for the blocked form of `of`.
fn new_value(g: &mut Graph, of: ValueId) -> ValueId {
    let name = format!("{}::nchwc#{}", g.values[of].name, g.values.len());
    g.values.push(ValueInfo {
        name,
        declared: None,
        constant: None,
        packed_only: None,
        widened_from: None,
    });
    g.values.len() - 1
}

/// An internal node named after `from`.
fn internal(
    from: &Node,
    op: &str,
    inputs: Vec<Option<ValueId>>,
    out: ValueId,
    attrs: BTreeMap<String, Attr>,
) -> Node {
    Node {
        name: format!("{}::{op}", from.name),
        op_type: op.into(),
        domain: ops::INTERNAL_DOMAIN.into(),
        inputs,
        outputs: vec![Some(out)],
        attrs,
        captured: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{close_to, ops, vals, HEADER};
    use super::*;
    use crate::ir::import::import;

    pub(super) fn list(v: &[f32]) -> String {
        v.iter()
            .map(|v| format!("{v:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `b[o] + Σ_c w[o][c] · x[c][p]` over the positions `(y·s, x·s)` of one `h×w` image.
    fn pointwise(
        x: &[f32],
        (c, h, w): (usize, usize, usize),
        wt: &[f32],
        b: Option<&[f32]>,
        s: usize,
    ) -> Vec<f64> {
        let m = wt.len() / c;
        let (oh, ow) = (h.div_ceil(s), w.div_ceil(s));
        let mut out = vec![0.0; m * oh * ow];
        for o in 0..m {
            for oy in 0..oh {
                for ox in 0..ow {
                    let p = oy * s * w + ox * s;
                    out[(o * oh + oy) * ow + ox] = b.map_or(0.0, |b| b[o] as f64)
                        + (0..c)
                            .map(|ci| wt[o * c + ci] as f64 * x[ci * h * w + p] as f64)
                            .sum::<f64>();
                }
            }
        }
        out
    }

    /// The model `text` as the rewrites leave it, blocked whatever the CPU, and the outputs
    /// the engine computes for the one input `x` of `shape`.
    pub(super) fn rewritten_and_run(
        text: &str,
        shape: Vec<usize>,
        x: &[f32],
    ) -> (Graph, Vec<crate::ir::Tensor>) {
        let proto = crate::text::parse_model(text).expect("parses");
        let mut g = super::super::fuse(import(proto.clone(), Vec::new()).expect("imports"));
        if !super::super::blocked_layout() {
            block_pointwise_convs(&mut g);
        }
        let bytes = prost::Message::encode_to_vec(&proto);
        let exe = crate::graph::compile_executable(&bytes, Vec::new()).expect("compiles");
        let input =
            crate::ir::Tensor::new(shape, crate::ir::TensorData::F32(x.to_vec())).expect("tensor");
        (g, exe.run(vec![input]).expect("runs"))
    }

    /// A 3×3 convolution with one zero on every side and stride `s` over one `h×w` image, by
    /// the kernels' naive reference.
    fn conv3x3(x: &[f32], (c, h, w): (usize, usize, usize), wt: &[f32], s: usize) -> Vec<f64> {
        let p = crate::kernels::conv::Conv2dParams {
            batch: 1,
            in_channels: c,
            in_h: h,
            in_w: w,
            out_channels: wt.len() / (c * 9),
            kernel_h: 3,
            kernel_w: 3,
            stride_h: s,
            stride_w: s,
            pad_top: 1,
            pad_left: 1,
            pad_bottom: 1,
            pad_right: 1,
            dilation_h: 1,
            dilation_w: 1,
            groups: 1,
        };
        let mut out = vec![0.0f32; p.output_len()];
        let none = crate::kernels::Activation::None;
        crate::kernels::reference::conv2d_ref(&p, x, wt, None, none, &mut out);
        out.into_iter().map(f64::from).collect()
    }

    /// A chain of 1×1 convolutions: one reorder in, the chain blocked (a residual from a blocked
    /// value included), reorders out only where a plain reader (a Sigmoid) or the caller reads;
    /// a strided one, a strided 3×3 one with pads and a 3×3 one at stride 1 that reads a
    /// blocked value; one of 24 channels stays. The engine computes what is computed here.
    #[test]
    fn a_chain_runs_blocked_with_reorders_at_its_edges() {
        let (c, h, w) = (32, 5, 6);
        let (w1, b1, w2, w3) = (
            vals(32 * 32, 1),
            vals(32, 2),
            vals(32 * 32, 3),
            vals(16 * 32, 4),
        );
        let (w4, w5, w6) = (vals(32 * 32 * 9, 5), vals(24 * 32, 6), vals(16 * 32 * 9, 9));
        let text = format!(
            "{HEADER} g (float[1, 32, 5, 6] x) => (float[1, 32, 5, 6] e, float[1, 32, 5, 6] s,
                 float[1, 16, 3, 3] t, float[1, 32, 5, 6] k, float[1, 24, 5, 6] q,
                 float[1, 16, 3, 3] u)
             <float[32, 32, 1, 1] w1 = {{{}}}, float[32] b1 = {{{}}}, float[32, 32, 1, 1] w2 = {{{}}},
              float[16, 32, 1, 1] w3 = {{{}}}, float[32, 32, 3, 3] w4 = {{{}}},
              float[24, 32, 1, 1] w5 = {{{}}}, float[16, 32, 3, 3] w6 = {{{}}}>
             {{ a = Conv(x, w1, b1)\n r = Relu(a)\n d = Conv(r, w2)\n e = Add(d, r)
                s = Sigmoid(r)\n t = Conv<strides: ints = [2, 2]>(x, w3)
                k = Conv<pads: ints = [1, 1, 1, 1]>(r, w4)\n q = Conv(r, w5)
                u = Conv<strides: ints = [2, 2], pads: ints = [1, 1, 1, 1]>(r, w6) }}",
            list(&w1),
            list(&b1),
            list(&w2),
            list(&w3),
            list(&w4),
            list(&w5),
            list(&w6)
        );
        let x = vals(c * h * w, 7);
        let (g, out) = rewritten_and_run(&text, vec![1, c, h, w], &x);
        assert_eq!(
            ops(&g),
            [
                "ToNchwc",
                "NchwcConv",
                "FromNchwc",
                "NchwcConv",
                "FromNchwc",
                "Sigmoid",
                "NchwcConv",
                "FromNchwc",
                "NchwcConv",
                "FromNchwc",
                "Conv",
                "NchwcConv",
                "FromNchwc"
            ]
        );
        let a: Vec<f64> = pointwise(&x, (c, h, w), &w1, Some(&b1), 1)
            .into_iter()
            .map(|v| v.max(0.0))
            .collect();
        let r: Vec<f32> = a.iter().map(|&v| v as f32).collect();
        let e: Vec<f64> = pointwise(&r, (c, h, w), &w2, None, 1)
            .iter()
            .zip(&a)
            .map(|(d, r)| d + r)
            .collect();
        let t = pointwise(&x, (c, h, w), &w3, None, 2);
        let q = pointwise(&r, (c, h, w), &w5, None, 1);
        close_to(out[0].as_f32().unwrap(), &e, 1e-5, "e");
        let s: Vec<f64> = a.iter().map(|&v| 1.0 / (1.0 + (-v).exp())).collect();
        close_to(out[1].as_f32().unwrap(), &s, 1e-5, "s");
        assert_eq!(out[2].shape, [1, 16, 3, 3]);
        close_to(out[2].as_f32().unwrap(), &t, 1e-5, "t");
        close_to(out[4].as_f32().unwrap(), &q, 1e-5, "q");
        // k: 3×3 at stride 1 with one zero on every side (too few tiles for Winograd: the
        // direct blocked kernel).
        close_to(
            out[3].as_f32().unwrap(),
            &conv3x3(&r, (c, h, w), &w4, 1),
            1e-5,
            "k",
        );
        // u: 3×3 at stride 2 with one zero on every side, 16 outputs over 3×3.
        let u = conv3x3(&r, (c, h, w), &w6, 2);
        close_to(out[5].as_f32().unwrap(), &u, 1e-5, "u");
    }

    /// A 3×3 convolution at stride 1 between blocked ones runs Winograd on the blocked tensors
    /// (32 channels over 16×16: 16 tiles of 4×4), with a residual from a blocked value and
    /// the activation after it; one that reads the graph input stays plain, though the chain
    /// made a blocked copy of it (blocked, it would add a reorder of its output).
    #[test]
    fn a_winograd_layer_continues_a_chain() {
        let (c, h, w) = (32, 16, 16);
        let (w1, w2, w3) = (vals(c * c, 11), vals(c * c * 9, 12), vals(c * c * 9, 13));
        let text = format!(
            "{HEADER} g (float[1, 32, 16, 16] x) => (float[1, 32, 16, 16] y, float[1, 32, 16, 16] p)
             <float[32, 32, 1, 1] w1 = {{{}}}, float[32, 32, 3, 3] w2 = {{{}}},
              float[32, 32, 3, 3] w3 = {{{}}}>
             {{ a = Conv(x, w1)\n r = Relu(a)\n k = Conv<pads: ints = [1, 1, 1, 1]>(r, w2)
                s = Add(k, r)\n y = Relu(s)\n p = Conv<pads: ints = [1, 1, 1, 1]>(x, w3) }}",
            list(&w1),
            list(&w2),
            list(&w3)
        );
        let x = vals(c * h * w, 14);
        let (g, out) = rewritten_and_run(&text, vec![1, c, h, w], &x);
        assert_eq!(
            ops(&g),
            ["ToNchwc", "NchwcConv", "NchwcConv", "FromNchwc", "Conv"]
        );
        let r: Vec<f32> = pointwise(&x, (c, h, w), &w1, None, 1)
            .into_iter()
            .map(|v| v.max(0.0) as f32)
            .collect();
        let y: Vec<f64> = conv3x3(&r, (c, h, w), &w2, 1)
            .iter()
            .zip(&r)
            .map(|(&k, &r)| (k + r as f64).max(0.0))
            .collect();
        // Winograd F(4×4, 3×3) rounds more than the direct sum: 1e-4 of the values' scale.
        close_to(out[0].as_f32().unwrap(), &y, 1e-4, "y");
        close_to(
            out[1].as_f32().unwrap(),
            &conv3x3(&x, (c, h, w), &w3, 1),
            1e-4,
            "p",
        );
    }

    /// A residual from a plain value (a graph input) keeps the convolution as it was, and so
    /// does a float64 one.
    #[test]
    fn plain_residuals_and_other_types_stay() {
        let wt = vals(16 * 16, 8);
        let text = format!(
            "{HEADER} g (float[1, 16, 2, 2] x, float[1, 16, 2, 2] z, double[1, 16, 2, 2] u)
                 => (float[1, 16, 2, 2] y, double[1, 16, 2, 2] v)
             <float[16, 16, 1, 1] w = {{{}}}, double[16, 16, 1, 1] wd = {{{}}}>
             {{ c = Conv(x, w)\n y = Add(c, z)\n v = Conv(u, wd) }}",
            list(&wt),
            list(&wt)
        );
        let proto = crate::text::parse_model(&text).expect("parses");
        let mut g = super::super::fuse(import(proto, Vec::new()).expect("imports"));
        block_pointwise_convs(&mut g);
        assert_eq!(ops(&g), ["FusedConv", "Conv"]);
        // Pads as wide as the kernel would stage a copy larger than the image needs: it stays.
        let w3 = vals(16 * 16 * 9, 9);
        let text = format!(
            "{HEADER} g (float[1, 16, 4, 4] x) => (float[1, 16, 4, 4] y)
             <float[16, 16, 3, 3] w = {{{}}}>
             {{ y = Conv<strides: ints = [2, 2], pads: ints = [3, 3, 3, 3]>(x, w) }}",
            list(&w3)
        );
        let proto = crate::text::parse_model(&text).expect("parses");
        let mut g = super::super::fuse(import(proto, Vec::new()).expect("imports"));
        block_pointwise_convs(&mut g);
        assert_eq!(ops(&g), ["Conv"]);
    }

    /// A group of only 1×1 convolutions at stride 1 (two in a chain, and a third reading the
    /// first's input) stays plain: its reorders would cost more than the layout gains. The
    /// engine computes the chain as here.
    #[test]
    fn a_group_of_pointwise_layers_stays_plain() {
        let (c, h, w) = (32, 3, 5);
        let (w1, w2, w3) = (vals(c * c, 21), vals(16 * c, 22), vals(c * c, 23));
        let text = format!(
            "{HEADER} g (float[1, 32, 3, 5] x) => (float[1, 16, 3, 5] y, float[1, 32, 3, 5] q)
             <float[32, 32, 1, 1] w1 = {{{}}}, float[16, 32, 1, 1] w2 = {{{}}},
              float[32, 32, 1, 1] w3 = {{{}}}>
             {{ a = Conv(x, w1)\n r = Relu(a)\n y = Conv(r, w2)\n q = Conv(x, w3) }}",
            list(&w1),
            list(&w2),
            list(&w3)
        );
        let x = vals(c * h * w, 24);
        let (g, out) = rewritten_and_run(&text, vec![1, c, h, w], &x);
        assert_eq!(ops(&g), ["FusedConv", "Conv", "Conv"]);
        let r: Vec<f32> = pointwise(&x, (c, h, w), &w1, None, 1)
            .into_iter()
            .map(|v| v.max(0.0) as f32)
            .collect();
        let y = pointwise(&r, (c, h, w), &w2, None, 1);
        close_to(out[0].as_f32().unwrap(), &y, 1e-5, "y");
        let q = pointwise(&x, (c, h, w), &w3, None, 1);
        close_to(out[1].as_f32().unwrap(), &q, 1e-5, "q");
    }
}

#[cfg(test)]
mod shared_weights {
    use super::super::tests::{close_to, ops, vals, HEADER};
    use super::tests::{list, rewritten_and_run};

    /// Two blocked convolutions of one weight with different biases each add their own (the
    /// packed filters, which hold the bias, are cached per weight and bias). A strided one
    /// reading the same input keeps the group blocked.
    #[test]
    fn shared_filters_keep_their_own_biases() {
        let w = vals(16 * 16, 1);
        let text = format!(
            "{HEADER} g (float[1, 16, 1, 2] x)
                 => (float[1, 16, 1, 2] y, float[1, 16, 1, 2] z, float[1, 16, 1, 1] t)
             <float[16, 16, 1, 1] w = {{{}}}, float[16] b1 = {{{}}}, float[16] b2 = {{{}}}>
             {{ y = Conv(x, w, b1)\n z = Conv(x, w, b2)\n t = Conv<strides: ints = [2, 2]>(x, w) }}",
            list(&w),
            list(&[1.0; 16]),
            list(&[-3.0; 16])
        );
        let x = vals(32, 2);
        let (g, out) = rewritten_and_run(&text, vec![1, 16, 1, 2], &x);
        assert_eq!(
            ops(&g),
            [
                "ToNchwc",
                "NchwcConv",
                "FromNchwc",
                "NchwcConv",
                "FromNchwc",
                "NchwcConv",
                "FromNchwc"
            ]
        );
        for (k, bias) in [(0, 1.0), (1, -3.0)] {
            let want: Vec<f64> = (0..32)
                .map(|i| {
                    let (o, p) = (i / 2, i % 2);
                    bias + (0..16)
                        .map(|c| w[o * 16 + c] as f64 * x[c * 2 + p] as f64)
                        .sum::<f64>()
                })
                .collect();
            close_to(
                out[k].as_f32().unwrap(),
                &want,
                1e-5,
                &format!("output {k}"),
            );
        }
    }
}
