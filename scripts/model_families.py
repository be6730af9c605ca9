#!/usr/bin/env python3
"""Small but faithful ONNX models of six real model families, with ONNX Runtime reference data.

Usage (from the repository root, after scripts/setup-test-env.sh):

    .venv/bin/python scripts/model_families.py [OUTDIR]

OUTDIR defaults to ``.testdata/families`` under the repository root. Every model is built with
``onnx.helper`` (IR version 8, default-domain opset 17) the way the PyTorch / transformers
exporters write such graphs: scoped node names, ``Constant`` nodes for axes and shape pieces,
shapes computed at run time (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) rather than
hard-coded, axes of Unsqueeze/Squeeze/Slice/Split as int64 inputs. Weights are deterministic
random (numpy ``default_rng`` seeded from the case name) scaled so activations stay O(1).

Cases (one directory each):

``bert_block``    BERT encoder: word + token-type + position embeddings (position ids from Range
                  over the sequence length, token types sliced from a buffer and expanded),
                  LayerNormalization, one encoder layer (4 heads, extended attention mask
                  ``(1 - mask) * -10000``, exact erf GELU, post-LN residuals).
``gpt2_block``    GPT-2: embeddings, pre-LN block with a fused c_attn projection Split into Q/K/V,
                  causal mask = Trilu of a ConstantOfShape ones matrix used by Where, tanh-GELU
                  written with Pow/Tanh, final LayerNormalization, LM head tied to the token
                  embedding (Transpose + MatMul), V = 100.
``llama_block``   LLaMA: RMSNorm written out (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul),
                  rotary embedding computed in-graph (Range positions x inv_freq via MatMul, Cos,
                  Sin, rotate_half via Slice/Neg/Concat), grouped-query attention (4 query heads,
                  2 key/value heads repeated with Unsqueeze/Expand/Reshape), additive causal mask
                  from Range/LessOrEqual/Where, SwiGLU MLP, final RMSNorm.
``vad_lstm_if``   Silero-VAD-like: If on Equal(sr, 16000) whose branches both turn the outer
                  ``input`` into [1, 16, 32] features (Reshape -> Conv1d -> Relu, different
                  kernels/strides/padding per branch; the 16 kHz one is the then-branch), then
                  Transpose to [seq, batch, feat], LSTM (hidden 32, state from h/c), last step,
                  Relu, Gemm to 1, Sigmoid.
``yolo_head``     YOLO-like: Conv(stride 2)+SiLU twice, nearest Resize x2 (scales input, empty
                  roi), Concat with the stride-2 feature, Conv+SiLU, 1x1 detect Conv, Split into
                  box (ltrb distances decoded against an anchor grid to xywh) and class channels,
                  Sigmoid on classes, Concat, Reshape to [1, C, N], Transpose to [1, N, C].
``ctc_head``      CRNN/CTC recogniser: Conv+Relu, MaxPool, Conv+Relu, ReduceMean over height,
                  Transpose to [1, T, C], MatMul + Add to 20 classes, Softmax and ArgMax (greedy
                  CTC labels). Width is symbolic, as in PaddleOCR text recognisers.

Each case is written as::

    OUTDIR/<case>/model.onnx      the model
    OUTDIR/<case>/input_<i>.pb    onnx.TensorProto named after graph input i
    OUTDIR/<case>/output_<i>.pb   onnx.TensorProto named after graph output i (ONNX Runtime)
    OUTDIR/<case>/meta.json       names, dtypes, shapes, op histogram, sanity-check notes

(the same flat layout as scripts/real_models.py). Every model passes
``onnx.checker.check_model(full_check=True)``, uses only operators the backend supports, and is
run by ONNX Runtime (CPUExecutionProvider, one thread, graph optimisations disabled). A few
semantic checks guard the references (masked / future tokens must not leak, the If takes its
then-branch at 16 kHz). Re-running the script gives byte-identical files.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import shutil
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTDIR = ROOT / ".testdata" / "families"
OPSET = 17
IR_VERSION = 8
PRODUCER = "onnxifi-rust scripts/model_families.py"

SUPPORTED_OPS = frozenset("""
    Add Sub Mul Div Pow Sqrt Exp Log Erf Tanh Sigmoid Relu Neg Reciprocal Cast Constant
    ConstantOfShape Shape Gather Unsqueeze Squeeze Concat Reshape Transpose Slice Split Expand
    Range Equal Less LessOrEqual Greater Where Not And Trilu MatMul Gemm Softmax LogSoftmax ArgMax
    ReduceMean ReduceSum ReduceMax LayerNormalization Conv MaxPool Resize Identity LSTM If Cos Sin
    Pad Clip Max Min Flatten
""".split())

F32_MIN = float(np.finfo(np.float32).min)  # what transformers uses as "minus infinity"
INT64_MAX = int(np.iinfo(np.int64).max)  # exporters' "slice to the end"
FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL

Dim = Union[int, str]  # a fixed extent, or the name of a scalar int64 tensor in the graph


# ----------------------------------------------------------------------------------------------
# graph building
# ----------------------------------------------------------------------------------------------

class GraphBuilder:
    """Collects nodes and initializers, naming them the way torch.onnx.export does.

    Nodes are named ``/<scope>/<Op>`` (``_<n>`` appended on repeats) with outputs
    ``<node>_output_<i>``; parameters are named ``<scope.dotted>.<name>``.
    """

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.nodes: List[onnx.NodeProto] = []
        self.initializers: List[onnx.TensorProto] = []
        self._counts: collections.Counter = collections.Counter()
        self._scope: List[str] = []

    def branch(self) -> "GraphBuilder":
        """A builder for a control-flow body. Names stay unique model-wide and parameters land in
        the outer graph's initializers (the body captures them from the enclosing scope)."""
        sub = GraphBuilder(self.rng)
        sub.initializers = self.initializers
        sub._counts = self._counts
        sub._scope = list(self._scope)
        return sub

    @contextlib.contextmanager
    def scope(self, *names: str) -> Iterator[None]:
        self._scope.extend(names)
        try:
            yield
        finally:
            del self._scope[len(self._scope) - len(names):]

    def _unique(self, base: str) -> str:
        n = self._counts[base]
        self._counts[base] += 1
        return base if n == 0 else f"{base}_{n}"

    def op(self, op_type: str, *inputs: str, n_out: int = 1,
           out: Optional[Sequence[str]] = None, **attrs) -> Union[str, List[str]]:
        """Appends a node; returns its output name (or the list of them when n_out > 1).
        `out` names outputs explicitly (graph outputs); a None entry keeps the default name."""
        name = self._unique("/" + "/".join(self._scope + [op_type]))
        outs = [o or f"{name}_output_{i}" for i, o in enumerate(out or [None] * n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=name, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def const(self, value, dtype=np.int64) -> str:
        """A Constant node (exporters emit these for axes, shape pieces and scalars)."""
        tensor = numpy_helper.from_array(np.asarray(value, dtype=dtype))
        return self.op("Constant", value=tensor)

    def param(self, name: str, array: np.ndarray) -> str:
        full = ".".join(self._scope + [name])
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), full))
        return full

    def normal(self, name: str, shape: Sequence[int], scale: float, mean: float = 0.0) -> str:
        return self.param(name, self.rng.normal(mean, scale, shape).astype(np.float32))

    def graph(self, name: str, inputs: List[onnx.ValueInfoProto],
              outputs: List[onnx.ValueInfoProto]) -> onnx.GraphProto:
        return helper.make_graph(self.nodes, name, inputs, outputs, self.initializers)


def tensor_info(name: str, elem: int, shape: Sequence[Dim]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, list(shape))


# -- shape arithmetic, as exporters write it -------------------------------------------------

def dim(g: GraphBuilder, x: str, axis: int) -> str:
    """Scalar int64: x.shape[axis] (Shape -> Gather)."""
    return g.op("Gather", g.op("Shape", x), g.const(axis), axis=0)


def unsqueeze(g: GraphBuilder, x: str, axes: Sequence[int]) -> str:
    return g.op("Unsqueeze", x, g.const(list(axes)))


def squeeze(g: GraphBuilder, x: str, axes: Sequence[int]) -> str:
    return g.op("Squeeze", x, g.const(list(axes)))


def shape_of(g: GraphBuilder, *parts: Dim) -> str:
    """1-D int64 shape tensor: scalar tensors are Unsqueezed, ints become Constants; Concat."""
    pieces = [unsqueeze(g, p, [0]) if isinstance(p, str) else g.const([p]) for p in parts]
    return g.op("Concat", *pieces, axis=0)


def slice_last(g: GraphBuilder, x: str, start: Dim, end: Dim) -> str:
    """x[..., start:end] with start/end scalar tensors or ints (Slice, axes [-1])."""
    bound = [unsqueeze(g, v, [0]) if isinstance(v, str) else g.const([v]) for v in (start, end)]
    return g.op("Slice", x, bound[0], bound[1], g.const([-1]))


# -- layers ----------------------------------------------------------------------------------

def linear(g: GraphBuilder, x: str, n_in: int, n_out: int, name: str, bias: bool = True) -> str:
    """x @ W (+ b), W ~ N(0, 1/n_in) so that the output stays O(1)."""
    with g.scope(name):
        y = g.op("MatMul", x, g.normal("weight", (n_in, n_out), 1.0 / math.sqrt(n_in)))
        return g.op("Add", y, g.normal("bias", (n_out,), 0.05)) if bias else y


def conv(g: GraphBuilder, x: str, c_in: int, c_out: int, kernel: Sequence[int],
         stride: int = 1, pad: int = 0, zero_mean: bool = False) -> str:
    """Conv with N(0, 1/fan_in) weights; zero_mean makes every filter an edge detector
    (no response to flat input beyond its bias)."""
    fan_in = c_in * int(np.prod(kernel))
    w = g.rng.normal(0.0, 1.0 / math.sqrt(fan_in), (c_out, c_in, *kernel))
    if zero_mean:
        w -= w.mean(axis=tuple(range(1, w.ndim)), keepdims=True)
    w = g.param("weight", w.astype(np.float32))
    b = g.normal("bias", (c_out,), 0.05)
    return g.op("Conv", x, w, b, kernel_shape=list(kernel), strides=[stride] * len(kernel),
                pads=[pad] * (2 * len(kernel)))


def layer_norm(g: GraphBuilder, x: str, hidden: int, name: str, eps: float,
               out: Optional[str] = None) -> str:
    with g.scope(name):
        gamma = g.normal("weight", (hidden,), 0.1, mean=1.0)
        beta = g.normal("bias", (hidden,), 0.05)
        return g.op("LayerNormalization", x, gamma, beta, axis=-1, epsilon=eps, out=[out])


def rms_norm(g: GraphBuilder, x: str, hidden: int, name: str, eps: float = 1e-6,
             out: Optional[str] = None) -> str:
    """LlamaRMSNorm: w * (x / sqrt(mean(x^2) + eps)), computed in float32."""
    with g.scope(name):
        xf = g.op("Cast", x, to=FLOAT)
        var = g.op("ReduceMean", g.op("Pow", xf, g.const(2.0, np.float32)), axes=[-1], keepdims=1)
        inv = g.op("Reciprocal", g.op("Sqrt", g.op("Add", var, g.const(eps, np.float32))))
        y = g.op("Cast", g.op("Mul", xf, inv), to=FLOAT)
        return g.op("Mul", g.normal("weight", (hidden,), 0.1, mean=1.0), y, out=[out])


def gelu_erf(g: GraphBuilder, x: str) -> str:
    """x * 0.5 * (1 + erf(x / sqrt(2)))."""
    e = g.op("Erf", g.op("Div", x, g.const(math.sqrt(2.0), np.float32)))
    y = g.op("Mul", x, g.op("Add", e, g.const(1.0, np.float32)))
    return g.op("Mul", y, g.const(0.5, np.float32))


def gelu_tanh(g: GraphBuilder, x: str) -> str:
    """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))."""
    cube = g.op("Mul", g.const(0.044715, np.float32), g.op("Pow", x, g.const(3.0, np.float32)))
    inner = g.op("Mul", g.const(math.sqrt(2.0 / math.pi), np.float32), g.op("Add", x, cube))
    half_x = g.op("Mul", g.const(0.5, np.float32), x)
    return g.op("Mul", half_x, g.op("Add", g.const(1.0, np.float32), g.op("Tanh", inner)))


def silu(g: GraphBuilder, x: str) -> str:
    return g.op("Mul", x, g.op("Sigmoid", x))


def split_heads(g: GraphBuilder, x: str, heads: int, head_dim: int) -> str:
    """[B, S, heads*D] -> [B, heads, S, D]; B and S read from x's shape (heads may be -1)."""
    shape = shape_of(g, dim(g, x, 0), dim(g, x, 1), heads, head_dim)
    return g.op("Transpose", g.op("Reshape", x, shape), perm=[0, 2, 1, 3])


def merge_heads(g: GraphBuilder, x: str, hidden: int) -> str:
    """[B, heads, S, D] -> [B, S, heads*D]."""
    t = g.op("Transpose", x, perm=[0, 2, 1, 3])
    return g.op("Reshape", t, shape_of(g, dim(g, t, 0), dim(g, t, 1), hidden))


def attend(g: GraphBuilder, q: str, k_t: str, v: str, scale: Callable[[str], str],
           mask: Callable[[str], str]) -> str:
    """softmax(mask(scale(q @ k_t))) @ v."""
    scores = mask(scale(g.op("MatMul", q, k_t)))
    return g.op("MatMul", g.op("Softmax", scores, axis=-1), v)


def divide_by(g: GraphBuilder, value: float) -> Callable[[str], str]:
    return lambda s: g.op("Div", s, g.const(value, np.float32))


def embedding(g: GraphBuilder, name: str, rows: int, hidden: int, ids: str,
              scale: float) -> Tuple[str, str]:
    """Gather from a [rows, hidden] table; returns (embeddings, table name)."""
    with g.scope(name):
        table = g.normal("weight", (rows, hidden), scale)
        return g.op("Gather", table, ids, axis=0), table


def positions(g: GraphBuilder, seq: str) -> str:
    """Range(0, seq, 1): int64 [S]."""
    return g.op("Range", g.const(0), seq, g.const(1))


# ----------------------------------------------------------------------------------------------
# the cases
# ----------------------------------------------------------------------------------------------

Feeds = Dict[str, np.ndarray]


@dataclass
class Spec:
    """What a case builder returns besides the nodes it added to the GraphBuilder."""
    inputs: List[onnx.ValueInfoProto]
    outputs: List[onnx.ValueInfoProto]
    feeds: Feeds
    feed_note: str


TOKENS = ["batch_size", "sequence_length"]


def token_ids(rng: np.random.Generator, n: int, vocab: int, first: int = 1) -> np.ndarray:
    return rng.integers(first, vocab, size=(1, n), dtype=np.int64)


def bert_block(g: GraphBuilder, rng: np.random.Generator) -> Spec:
    V, P, H, NH, FF = 100, 32, 32, 4, 64
    D = H // NH
    ids, mask = "input_ids", "attention_mask"

    with g.scope("embeddings"):
        seq = dim(g, ids, 1)
        pos_ids = unsqueeze(g, positions(g, seq), [0])
        buffer = g.param("token_type_ids", np.zeros((1, P), dtype=np.int64))
        types = g.op("Slice", buffer, g.const([0]), unsqueeze(g, seq, [0]), g.const([1]))
        types = g.op("Expand", types, g.op("Shape", ids))
        x = g.op("Add", embedding(g, "word_embeddings", V, H, ids, 0.5)[0],
                 embedding(g, "token_type_embeddings", 2, H, types, 0.1)[0])
        x = g.op("Add", x, embedding(g, "position_embeddings", P, H, pos_ids, 0.2)[0])
        x = layer_norm(g, x, H, "LayerNorm", 1e-12)

    # get_extended_attention_mask: mask[:, None, None, :], (1 - mask) * -10000
    ext = g.op("Cast", unsqueeze(g, mask, [1, 2]), to=FLOAT)
    ext = g.op("Sub", g.const(1.0, np.float32), ext)
    ext = g.op("Mul", ext, g.const(-10000.0, np.float32))

    with g.scope("encoder", "layer.0"):
        with g.scope("attention", "self"):
            q, k, v = (split_heads(g, linear(g, x, H, H, n), NH, D) for n in ("query", "key", "value"))
            k_t = g.op("Transpose", k, perm=[0, 1, 3, 2])
            ctx = attend(g, q, k_t, v, divide_by(g, math.sqrt(D)), lambda s: g.op("Add", s, ext))
            ctx = merge_heads(g, ctx, H)
        with g.scope("attention", "output"):
            x = layer_norm(g, g.op("Add", linear(g, ctx, H, H, "dense"), x), H, "LayerNorm", 1e-12)
        with g.scope("intermediate"):
            inter = gelu_erf(g, linear(g, x, H, FF, "dense"))
        with g.scope("output"):
            y = g.op("Add", linear(g, inter, FF, H, "dense"), x)
            layer_norm(g, y, H, "LayerNorm", 1e-12, out="last_hidden_state")

    # [CLS] w1 .. w10 [SEP] [PAD] x4, as a tokenizer pads a short sentence to 16.
    S, pad = 16, 4
    input_ids = np.zeros((1, S), dtype=np.int64)
    input_ids[0, 0], input_ids[0, S - pad - 1] = 2, 3
    input_ids[0, 1:S - pad - 1] = rng.integers(5, V, S - pad - 2)
    attention_mask = np.ones((1, S), dtype=np.int64)
    attention_mask[0, S - pad:] = 0
    return Spec([tensor_info(ids, INT64, TOKENS), tensor_info(mask, INT64, TOKENS)],
                [tensor_info("last_hidden_state", FLOAT, TOKENS + [H])],
                {ids: input_ids, mask: attention_mask},
                "[CLS] 10 tokens [SEP] + 4 [PAD] (ids 0), attention_mask 0 on the padding")


def causal_allowed_trilu(g: GraphBuilder, scores: str) -> str:
    """Bool [Sq, Sk]: lower triangle of ConstantOfShape ones (Trilu upper=0)."""
    shape = shape_of(g, dim(g, scores, 2), dim(g, scores, 3))
    ones = g.op("ConstantOfShape", shape, value=helper.make_tensor("value", FLOAT, [1], [1.0]))
    return g.op("Cast", g.op("Trilu", ones, upper=0), to=BOOL)


def gpt2_block(g: GraphBuilder, rng: np.random.Generator) -> Spec:
    V, P, H, NH = 100, 32, 32, 2
    D = H // NH
    ids = "input_ids"
    with g.scope("transformer"):
        tokens, wte = embedding(g, "wte", V, H, ids, 0.3)
        pos_ids = unsqueeze(g, positions(g, dim(g, ids, 1)), [0])
        x = g.op("Add", tokens, embedding(g, "wpe", P, H, pos_ids, 0.1)[0])
        with g.scope("h.0"):
            h = layer_norm(g, x, H, "ln_1", 1e-5)
            with g.scope("attn"):
                qkv = linear(g, h, H, 3 * H, "c_attn")
                q, k, v = g.op("Split", qkv, g.const([H, H, H]), axis=2, n_out=3)
                q, k, v = (split_heads(g, t, NH, D) for t in (q, k, v))
                k_t = g.op("Transpose", k, perm=[0, 1, 3, 2])

                def causal(s: str) -> str:
                    return g.op("Where", causal_allowed_trilu(g, s), s, g.const(F32_MIN, np.float32))

                ctx = attend(g, q, k_t, v, divide_by(g, math.sqrt(D)), causal)
                x = g.op("Add", x, linear(g, merge_heads(g, ctx, H), H, H, "c_proj"))
            h = layer_norm(g, x, H, "ln_2", 1e-5)
            with g.scope("mlp"):
                m = linear(g, gelu_tanh(g, linear(g, h, H, 4 * H, "c_fc")), 4 * H, H, "c_proj")
            x = g.op("Add", x, m)
        x = layer_norm(g, x, H, "ln_f", 1e-5)
    with g.scope("lm_head"):  # tied to transformer.wte
        g.op("MatMul", x, g.op("Transpose", wte, perm=[1, 0]), out=["logits"])

    return Spec([tensor_info(ids, INT64, TOKENS)],
                [tensor_info("logits", FLOAT, TOKENS + [V])],
                {ids: token_ids(rng, 12, V)}, "12 token ids in [1, 100)")


def rotate_half(g: GraphBuilder, x: str) -> str:
    """cat(-x[..., d/2:], x[..., :d/2]) with d/2 computed from the shape."""
    half = g.op("Div", dim(g, x, 3), g.const(2))
    x1 = slice_last(g, x, 0, half)
    x2 = slice_last(g, x, half, INT64_MAX)
    return g.op("Concat", g.op("Neg", x2), x1, axis=-1)


def rope(g: GraphBuilder, x: str, cos: str, sin: str) -> str:
    return g.op("Add", g.op("Mul", x, cos), g.op("Mul", rotate_half(g, x), sin))


def repeat_kv(g: GraphBuilder, x: str, kv_heads: int, n_rep: int, head_dim: int) -> str:
    """[B, kv, S, D] -> [B, kv * n_rep, S, D] (Unsqueeze, Expand, Reshape)."""
    b, s = dim(g, x, 0), dim(g, x, 2)
    e = g.op("Expand", unsqueeze(g, x, [2]), shape_of(g, b, kv_heads, n_rep, s, head_dim))
    return g.op("Reshape", e, shape_of(g, b, kv_heads * n_rep, s, head_dim))


def llama_block(g: GraphBuilder, rng: np.random.Generator) -> Spec:
    V, H, NH, NKV, FF, THETA = 100, 32, 4, 2, 64, 10000.0
    D = H // NH
    ids = "input_ids"
    with g.scope("model"):
        x = embedding(g, "embed_tokens", V, H, ids, 0.5)[0]
        pos = positions(g, dim(g, ids, 1))
        with g.scope("rotary_emb"):
            inv_freq = 1.0 / THETA ** (np.arange(0, D, 2, dtype=np.float32) / D)
            p = unsqueeze(g, g.op("Cast", pos, to=FLOAT), [1])  # [S, 1]
            freqs = g.op("MatMul", p, g.param("inv_freq", inv_freq[None, :].astype(np.float32)))
            emb = g.op("Concat", freqs, freqs, axis=-1)  # [S, D]
            cos = unsqueeze(g, g.op("Cos", emb), [0, 1])
            sin = unsqueeze(g, g.op("Sin", emb), [0, 1])
        with g.scope("causal_mask"):  # key position <= query position, additive
            allowed = g.op("LessOrEqual", unsqueeze(g, pos, [0]), unsqueeze(g, pos, [1]))
            mask = g.op("Where", allowed, g.const(0.0, np.float32), g.const(F32_MIN, np.float32))
            mask = unsqueeze(g, mask, [0, 1])
        with g.scope("layers.0"):
            h = rms_norm(g, x, H, "input_layernorm")
            with g.scope("self_attn"):
                q = split_heads(g, linear(g, h, H, NH * D, "q_proj", bias=False), -1, D)
                k = split_heads(g, linear(g, h, H, NKV * D, "k_proj", bias=False), -1, D)
                v = split_heads(g, linear(g, h, H, NKV * D, "v_proj", bias=False), -1, D)
                q, k = rope(g, q, cos, sin), rope(g, k, cos, sin)
                k = repeat_kv(g, k, NKV, NH // NKV, D)
                v = repeat_kv(g, v, NKV, NH // NKV, D)
                k_t = g.op("Transpose", k, perm=[0, 1, 3, 2])
                ctx = attend(g, q, k_t, v,
                             lambda s: g.op("Mul", s, g.const(D ** -0.5, np.float32)),
                             lambda s: g.op("Add", s, mask))
                x = g.op("Add", x, linear(g, merge_heads(g, ctx, H), H, H, "o_proj", bias=False))
            h = rms_norm(g, x, H, "post_attention_layernorm")
            with g.scope("mlp"):
                gate = silu(g, linear(g, h, H, FF, "gate_proj", bias=False))
                up = linear(g, h, H, FF, "up_proj", bias=False)
                x = g.op("Add", x, linear(g, g.op("Mul", gate, up), FF, H, "down_proj", bias=False))
        rms_norm(g, x, H, "norm", out="hidden")

    return Spec([tensor_info(ids, INT64, TOKENS)],
                [tensor_info("hidden", FLOAT, TOKENS + [H])],
                {ids: token_ids(rng, 10, V)}, "10 token ids in [1, 100)")


VAD_SAMPLES, VAD_CHANNELS, VAD_STEPS, VAD_HIDDEN = 256, 16, 32, 32
# sr -> (kernel, stride, pad); both give (256 + 2 pad - kernel) / stride + 1 = 32 steps.
VAD_ENCODERS = {16000: (16, 8, 4), 8000: (8, 8, 0)}


def vad_encoder(g: GraphBuilder, x: str, sr: int) -> str:
    kernel, stride, pad = VAD_ENCODERS[sr]
    with g.scope(f"encoder_{sr // 1000}k"):
        x3 = g.op("Reshape", x, shape_of(g, dim(g, x, 0), 1, -1))  # [B, 1, samples]
        return g.op("Relu", conv(g, x3, 1, VAD_CHANNELS, [kernel], stride, pad))


def vad_lstm_if(g: GraphBuilder, rng: np.random.Generator) -> Spec:
    C, T, HID = VAD_CHANNELS, VAD_STEPS, VAD_HIDDEN
    feat_info = [1, C, T]
    branches = {}
    for key, sr in (("then_branch", 16000), ("else_branch", 8000)):
        b = g.branch()
        feat = vad_encoder(b, "input", sr)
        branches[key] = helper.make_graph(b.nodes, f"{key}_{sr}", [],
                                          [tensor_info(feat, FLOAT, feat_info)])
    is_16k = g.op("Equal", "sr", g.const(16000))
    feat = g.op("If", is_16k, **branches)
    seq = g.op("Transpose", feat, perm=[2, 0, 1])  # [T, B, C]
    with g.scope("lstm"):
        w = g.normal("weight_ih", (1, 4 * HID, C), 1.0 / math.sqrt(C))
        r = g.normal("weight_hh", (1, 4 * HID, HID), 1.0 / math.sqrt(HID))
        bias = g.normal("bias", (1, 8 * HID), 0.1)
        y, _, _ = g.op("LSTM", seq, w, r, bias, "", "h", "c", hidden_size=HID,
                       out=[None, "hn", "cn"])
    with g.scope("decoder"):
        last = squeeze(g, g.op("Slice", y, g.const([-1]), g.const([INT64_MAX]), g.const([0])), [0, 1])
        logit = g.op("Gemm", g.op("Relu", last), g.normal("weight", (1, HID), 1.0 / math.sqrt(HID)),
                     g.normal("bias", (1,), 0.1), transB=1)
        g.op("Sigmoid", logit, out=["prob"])

    t = np.arange(VAD_SAMPLES) / 16000.0
    audio = 0.5 * np.sin(2 * np.pi * 200.0 * t) + rng.normal(0.0, 0.01, VAD_SAMPLES)
    state = np.zeros((1, 1, HID), dtype=np.float32)
    return Spec([tensor_info("input", FLOAT, [1, VAD_SAMPLES]), tensor_info("sr", INT64, []),
                 tensor_info("h", FLOAT, [1, 1, HID]), tensor_info("c", FLOAT, [1, 1, HID])],
                [tensor_info("prob", FLOAT, [1, 1]), tensor_info("hn", FLOAT, [1, 1, HID]),
                 tensor_info("cn", FLOAT, [1, 1, HID])],
                {"input": audio.astype(np.float32)[None], "sr": np.array(16000, dtype=np.int64),
                 "h": state, "c": state.copy()},
                "256 samples of a 200 Hz sine at 16 kHz (amplitude 0.5, noise 0.01), sr=16000, zero h/c")


def conv_silu(g: GraphBuilder, x: str, name: str, c_in: int, c_out: int, k: int, s: int) -> str:
    with g.scope(name):
        with g.scope("conv"):
            y = conv(g, x, c_in, c_out, [k, k], s, k // 2)
        with g.scope("act"):
            return silu(g, y)


def yolo_head(g: GraphBuilder, rng: np.random.Generator) -> Spec:
    NC, STRIDE, SIDE = 6, 2, 16
    f1 = conv_silu(g, "images", "model.0", 3, 8, 3, 2)  # [1, 8, 16, 16]
    f2 = conv_silu(g, f1, "model.1", 8, 16, 3, 2)  # [1, 16, 8, 8]
    with g.scope("model.2"):
        up = g.op("Resize", f2, g.const(np.zeros(0), np.float32), g.const([1, 1, 2, 2], np.float32),
                  mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    with g.scope("model.3"):
        cat = g.op("Concat", up, f1, axis=1)  # [1, 24, 16, 16]
    f3 = conv_silu(g, cat, "model.4", 24, 16, 3, 1)
    with g.scope("model.5"):
        with g.scope("cv"):
            head = conv(g, f3, 16, 4 + NC, [1, 1])
        box, cls = g.op("Split", head, g.const([4, NC]), axis=1, n_out=2)
        # dist2bbox: ltrb distances around anchor points (cell centres) -> xywh, times stride.
        lt, rb = g.op("Split", box, g.const([2, 2]), axis=1, n_out=2)
        ys, xs = np.mgrid[0:SIDE, 0:SIDE].astype(np.float32) + 0.5
        anchors = g.param("anchors", np.stack([xs, ys])[None])
        x1y1, x2y2 = g.op("Sub", anchors, lt), g.op("Add", anchors, rb)
        centre = g.op("Div", g.op("Add", x1y1, x2y2), g.const(2.0, np.float32))
        wh = g.op("Sub", x2y2, x1y1)
        dbox = g.op("Mul", g.op("Concat", centre, wh, axis=1), g.const(float(STRIDE), np.float32))
        y = g.op("Concat", dbox, g.op("Sigmoid", cls), axis=1)
        y = g.op("Reshape", y, shape_of(g, dim(g, y, 0), dim(g, y, 1), -1))  # [1, C, N]
        g.op("Transpose", y, perm=[0, 2, 1], out=["output0"])

    # A small scene: sky-to-grass gradient, a red disc and a blue box, light noise.
    yy, xx = np.mgrid[0:32, 0:32].astype(np.float32) / 31.0
    img = np.stack([0.45 + 0.1 * xx, 0.55 + 0.25 * yy, 0.85 - 0.5 * yy])
    disc = (xx - 0.3) ** 2 + (yy - 0.35) ** 2 < 0.03
    img[:, disc] = np.array([0.85, 0.15, 0.1], np.float32)[:, None]
    img[:, 18:28, 16:29] = np.array([0.1, 0.2, 0.7], np.float32)[:, None, None]
    img = np.clip(img + rng.normal(0.0, 0.02, img.shape), 0.0, 1.0).astype(np.float32)
    return Spec([tensor_info("images", FLOAT, [1, 3, 32, 32])],
                [tensor_info("output0", FLOAT, [1, SIDE * SIDE, 4 + NC])],
                {"images": img[None]}, "RGB [0,1] 32x32: gradient, red disc, blue box, noise 0.02")


def text_line(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """Dark glyph-like strokes on light paper, 3 x H x W in [0, 1]: words of 2-4 glyphs
    (5 pixels wide, 1 apart) separated by 6-pixel spaces."""
    gray = np.full((height, width), 0.92) - 0.06 * np.linspace(0.0, 1.0, width)[None]
    starts, x0 = [], 2
    while x0 + 5 <= width - 2:
        n = int(rng.integers(2, 5))
        starts += [x0 + 6 * i for i in range(n) if x0 + 6 * i + 5 <= width - 2]
        x0 += 6 * n + 6
    for x0 in starts:
        for _ in range(rng.integers(1, 4)):
            kind = rng.integers(0, 3)
            if kind == 0:  # vertical stem
                c = x0 + rng.integers(0, 5)
                gray[3:13, c] = 0.12
            elif kind == 1:  # horizontal bar
                r = rng.integers(3, 13)
                gray[r, x0:x0 + 5] = 0.12
            else:  # dot
                r = rng.integers(3, 12)
                gray[r:r + 2, x0 + 2:x0 + 4] = 0.12
    gray = np.clip(gray + rng.normal(0.0, 0.02, gray.shape), 0.0, 1.0)
    return np.stack([gray, gray * 0.98, gray * 0.95])


def ctc_head(g: GraphBuilder, rng: np.random.Generator) -> Spec:
    NCLS = 20
    with g.scope("backbone"):
        with g.scope("conv1"):
            y = g.op("Relu", conv(g, "x", 3, 8, [3, 3], 1, 1, zero_mean=True))
        y = g.op("MaxPool", y, kernel_shape=[2, 2], strides=[2, 2])
        with g.scope("conv2"):
            y = g.op("Relu", conv(g, y, 8, 16, [3, 3], 1, 1, zero_mean=True))  # [B, 16, 8, W/2]
    with g.scope("neck"):
        y = g.op("Transpose", g.op("ReduceMean", y, axes=[2], keepdims=0), perm=[0, 2, 1])
    with g.scope("head", "fc"):  # class 0 is the CTC blank, favoured where there is no ink
        w = g.normal("weight", (16, NCLS), 4.0 / math.sqrt(16))
        b = g.rng.normal(0.0, 0.05, NCLS).astype(np.float32)
        b[0] += 1.0
        logits = g.op("Add", g.op("MatMul", y, w), g.param("bias", b))
    with g.scope("head"):
        probs = g.op("Softmax", logits, axis=2, out=["probs"])
        g.op("ArgMax", probs, axis=2, keepdims=0, out=["labels"])

    img = text_line(rng, 16, 64)
    return Spec([tensor_info("x", FLOAT, ["batch_size", 3, 16, "width"])],
                [tensor_info("probs", FLOAT, ["batch_size", "time", NCLS]),
                 tensor_info("labels", INT64, ["batch_size", "time"])],
                {"x": ((img - 0.5) / 0.5).astype(np.float32)[None]},
                "synthetic text line 16x64, (x - 0.5) / 0.5 in [-1, 1]")


# ----------------------------------------------------------------------------------------------
# semantic checks of the references (cheap reruns through ORT)
# ----------------------------------------------------------------------------------------------

Session = ort.InferenceSession
Check = Callable[[onnx.ModelProto, Session, Feeds, List[np.ndarray]], str]


def run(session: Session, feeds: Feeds) -> List[np.ndarray]:
    return session.run(None, feeds)


def check_padding_ignored(model, session, feeds, outs) -> str:
    """Changing the padded token ids must not change the unpadded positions."""
    keep = feeds["attention_mask"][0].astype(bool)
    other = dict(feeds, input_ids=np.where(keep, feeds["input_ids"], 77))
    diff = float(np.abs(run(session, other)[0][:, keep] - outs[0][:, keep]).max())
    assert diff < 1e-5, f"padding leaks into attention: {diff}"
    return f"padding ignored (max diff {diff:.1e} when padded ids change)"


def check_causal(model, session, feeds, outs) -> str:
    """Changing the last token must not change any earlier position."""
    ids = feeds["input_ids"].copy()
    ids[0, -1] = (ids[0, -1] + 1) % 100
    new = run(session, {"input_ids": ids})[0]
    before = float(np.abs(new[:, :-1] - outs[0][:, :-1]).max())
    last = float(np.abs(new[:, -1] - outs[0][:, -1]).max())
    assert before < 1e-5 and last > 1e-3, (before, last)
    return f"causal (earlier positions diff {before:.1e}, last position diff {last:.2g})"


def conv1d_relu(x: np.ndarray, w: np.ndarray, b: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """x [C_in, L], w [C_out, C_in, K] -> relu(conv) [C_out, L_out], in float64."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (pad, pad)))
    k = w.shape[2]
    cols = np.stack([xp[:, i:i + k] for i in range(0, xp.shape[1] - k + 1, stride)])
    return np.maximum(np.einsum("lck,ock->ol", cols, w) + b[:, None], 0.0)


def check_vad_branch(model, session, feeds, outs) -> str:
    """The If output equals the 16 kHz encoder computed in numpy; sr=8000 changes the result."""
    if_node = next(n for n in model.graph.node if n.op_type == "If")
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.append(tensor_info(if_node.output[0], FLOAT, [1, VAD_CHANNELS, VAD_STEPS]))
    feat = run(make_session(probe), feeds)[-1][0]
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    _, stride, pad = VAD_ENCODERS[16000]
    want = conv1d_relu(feeds["input"], weights["encoder_16k.weight"], weights["encoder_16k.bias"],
                       stride, pad)
    err = float(np.abs(feat - want).max())
    assert err < 1e-5, f"If did not take the 16 kHz then-branch (err {err})"
    other = float(np.abs(run(session, dict(feeds, sr=np.array(8000, np.int64)))[0] - outs[0]).max())
    assert other > 1e-6, "sr=8000 gives the same probability"
    return (f"If took then-branch (|feat - numpy| {err:.1e}); prob {outs[0].item():.4f}, "
            f"|prob(8 kHz) - prob| {other:.2g}")


def check_ctc(model, session, feeds, outs) -> str:
    """ArgMax must be unambiguous (top-2 margin) and agree with the probabilities."""
    probs, labels = outs
    top2 = np.sort(probs, axis=-1)[..., -2:]
    margin = float((top2[..., 1] - top2[..., 0]).min())
    assert margin > 1e-3, f"ArgMax nearly tied (margin {margin})"
    assert np.array_equal(labels, probs.argmax(-1))
    seq = [int(c) for i, c in enumerate(labels[0]) if c != 0 and (i == 0 or c != labels[0][i - 1])]
    return (f"{int((labels != 0).sum())}/{labels.size} non-blank frames, greedy CTC decode {seq}, "
            f"min top-2 margin {margin:.2g}")


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[GraphBuilder, np.random.Generator], Spec]
    check: Optional[Check] = None


CASES: List[Case] = [
    Case("bert_block", bert_block, check_padding_ignored),
    Case("gpt2_block", gpt2_block, check_causal),
    Case("llama_block", llama_block, check_causal),
    Case("vad_lstm_if", vad_lstm_if, check_vad_branch),
    Case("yolo_head", yolo_head),
    Case("ctc_head", ctc_head, check_ctc),
]


# ----------------------------------------------------------------------------------------------
# model assembly, validation, ORT, files
# ----------------------------------------------------------------------------------------------

def all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """Nodes of the graph and, recursively, of its control-flow bodies."""
    for n in graph.node:
        yield n
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(a.g)


def op_histogram(model: onnx.ModelProto) -> Dict[str, int]:
    return dict(sorted(collections.Counter(n.op_type for n in all_nodes(model.graph)).items()))


def build_model(case: Case) -> Tuple[onnx.ModelProto, Spec]:
    seed = zlib.crc32(case.name.encode())
    g = GraphBuilder(np.random.default_rng([seed, 0]))
    spec = case.build(g, np.random.default_rng([seed, 1]))
    graph = g.graph(case.name, spec.inputs, spec.outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              ir_version=IR_VERSION, producer_name=PRODUCER)
    onnx.checker.check_model(model, full_check=True)
    unsupported = sorted(set(op_histogram(model)) - SUPPORTED_OPS)
    if unsupported:
        raise SystemExit(f"{case.name}: operators the backend lacks: {unsupported}")
    return model, spec


def make_session(model: onnx.ModelProto) -> Session:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def describe(a: np.ndarray) -> str:
    s = f"{a.dtype}{list(a.shape)}"
    if a.ndim == 0:
        return f"{s} = {a.item()}"
    return f"{s} [{a.min():.4g}, {a.max():.4g}]" if a.size else s


def tensor_records(tensors: List[Tuple[str, np.ndarray]]) -> List[dict]:
    return [{"name": n, "dtype": str(a.dtype), "shape": list(a.shape)} for n, a in tensors]


def write_case(outdir: Path, case: Case) -> dict:
    model, spec = build_model(case)
    session = make_session(model)
    in_names = [i.name for i in model.graph.input]
    out_names = [o.name for o in model.graph.output]
    if in_names != [i.name for i in session.get_inputs()] or sorted(spec.feeds) != sorted(in_names):
        raise SystemExit(f"{case.name}: graph inputs {in_names}, feeds {sorted(spec.feeds)}")
    results = session.run(out_names, spec.feeds)
    for name, arr in zip(out_names, results):
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise SystemExit(f"{case.name}: output {name} is not finite")
    note = case.check(model, session, spec.feeds, results) if case.check else ""

    case_dir = outdir / case.name
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    (case_dir / "model.onnx").write_bytes(model.SerializeToString())
    inputs = [(n, spec.feeds[n]) for n in in_names]
    outputs = list(zip(out_names, results))
    for prefix, tensors in (("input", inputs), ("output", outputs)):
        for k, (name, arr) in enumerate(tensors):
            tp = numpy_helper.from_array(np.asarray(arr), name)
            (case_dir / f"{prefix}_{k}.pb").write_bytes(tp.SerializeToString())
    meta = {
        "case": case.name,
        "ir_version": model.ir_version,
        "opset_imports": {o.domain or "ai.onnx": o.version for o in model.opset_import},
        "input_names": in_names,
        "output_names": out_names,
        "inputs": tensor_records(inputs),
        "outputs": tensor_records(outputs),
        "input_description": spec.feed_note,
        "op_histogram": op_histogram(model),
        "check": note,
        "ort_version": ort.__version__,
    }
    (case_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")

    print(f"\n## {case.name}  ({len(model.SerializeToString())} bytes, "
          f"{sum(meta['op_histogram'].values())} nodes)")
    print(f"   inputs: {spec.feed_note}")
    for n, a in inputs:
        print(f"     in  {n}: {describe(a)}")
    for n, a in outputs:
        print(f"     out {n}: {describe(a)}")
    if note:
        print(f"   check: {note}")
    print("   ops: " + ", ".join(f"{k}x{v}" for k, v in meta["op_histogram"].items()))
    return meta


def main(argv: List[str]) -> int:
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    outdir = Path(argv[1]).resolve() if len(argv) == 2 else DEFAULT_OUTDIR
    outdir.mkdir(parents=True, exist_ok=True)
    metas = [write_case(outdir, case) for case in CASES]
    union = sorted(set().union(*(m["op_histogram"] for m in metas)))
    print(f"\n{len(metas)} cases written under {outdir}; {len(union)} op types: {' '.join(union)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
