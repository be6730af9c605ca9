#!/usr/bin/env python3
"""Builds the bundled example models and, at test time, their expected outputs.

Models (weights drawn from a fixed numpy seed, so the files are reproducible):

* ``small_cnn.onnx``: ``input`` float[1,3,16,16] -> Conv 3->8 3x3 pad 1 (+bias) -> Relu ->
  MaxPool 2x2 stride 2 -> depthwise Conv 8->8 3x3 pad 1 (group 8) -> BatchNormalization ->
  Clip [0, 6] -> GlobalAveragePool -> Flatten -> Gemm 8->10 (transB=1) -> Softmax -> ``probs``
  float[1,10].
* ``small_cnn_dynamic.onnx``: the same graph with a symbolic batch dimension ``N``.

The deterministic input used everywhere (tests, the ``onnxifi-run`` CLI) is
``x[i] = ((i * 37 + 11) % 101) / 50 - 1`` over the flattened tensor (values in [-1, 1]).

Usage:
    make_small_cnn.py                     # (re)writes examples/small_cnn*.onnx
    make_small_cnn.py --model M.onnx --input-out IN.bin --expected OUT.bin [--batch B]
        # writes the deterministic input and onnxruntime's output for model M as raw
        # little-endian float32 (the tests call this; expected outputs are never committed)
"""

import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20240611
OPSET = 13
IR_VERSION = 8


def deterministic_input(shape):
    """Returns the deterministic float32 input of the given shape (see module doc)."""
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.int64)
    return (((i * 37 + 11) % 101).astype(np.float32) / np.float32(50.0) - np.float32(1.0)).reshape(
        shape
    )


def weights():
    """Returns the model's initializers as a name -> float32 array dict, from the fixed seed."""
    rng = np.random.default_rng(SEED)
    f = np.float32
    return {
        "conv1_w": (rng.standard_normal((8, 3, 3, 3)) * 0.4).astype(f),
        "conv1_b": (rng.standard_normal(8) * 0.1).astype(f),
        "dw_w": (rng.standard_normal((8, 1, 3, 3)) * 0.5).astype(f),
        "dw_b": (rng.standard_normal(8) * 0.1).astype(f),
        "bn_scale": (1.0 + 0.2 * rng.standard_normal(8)).astype(f),
        "bn_bias": (0.1 * rng.standard_normal(8)).astype(f),
        "bn_mean": (0.2 * rng.standard_normal(8)).astype(f),
        "bn_var": (0.5 + rng.random(8)).astype(f),
        "clip_min": np.array(0.0, dtype=f),
        "clip_max": np.array(6.0, dtype=f),
        "fc_w": (rng.standard_normal((10, 8)) * 1.5).astype(f),
        "fc_b": (rng.standard_normal(10) * 0.2).astype(f),
    }


def build(batch, name):
    """Builds the small CNN with the given batch dimension (an int or a symbol name)."""
    nodes = [
        helper.make_node(
            "Conv", ["input", "conv1_w", "conv1_b"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]
        ),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node(
            "Conv",
            ["p1", "dw_w", "dw_b"],
            ["c2"],
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            group=8,
        ),
        helper.make_node(
            "BatchNormalization",
            ["c2", "bn_scale", "bn_bias", "bn_mean", "bn_var"],
            ["bn"],
            epsilon=1e-5,
        ),
        helper.make_node("Clip", ["bn", "clip_min", "clip_max"], ["clip"]),
        helper.make_node("GlobalAveragePool", ["clip"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    inits = [numpy_helper.from_array(v, k) for k, v in weights().items()]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [batch, 10])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        producer_name="onnxifi-rust examples/make_small_cnn.py",
        opset_imports=[helper.make_opsetid("", OPSET)],
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def numpy_forward(x):
    """The small CNN written out in numpy, an independent check of onnxruntime's output."""
    w = weights()
    n = x.shape[0]

    def conv3x3(a, k, b, groups):
        cin = a.shape[1]
        cout = k.shape[0]
        pad = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
        h, wd = a.shape[2], a.shape[3]
        out = np.zeros((n, cout, h, wd), dtype=np.float64)
        per_in, per_out = cin // groups, cout // groups
        for o in range(cout):
            g = o // per_out
            for ci in range(per_in):
                c = g * per_in + ci
                for dy in range(3):
                    for dx in range(3):
                        out[:, o] += k[o, ci, dy, dx] * pad[:, c, dy : dy + h, dx : dx + wd]
            out[:, o] += b[o]
        return out

    def col(v):
        return v.reshape(1, -1, 1, 1).astype(np.float64)

    a = np.maximum(conv3x3(x.astype(np.float64), w["conv1_w"], w["conv1_b"], 1), 0.0)
    a = a.reshape(n, 8, 8, 2, 8, 2).max(axis=(3, 5))
    a = conv3x3(a, w["dw_w"], w["dw_b"], 8)
    a = (a - col(w["bn_mean"])) / np.sqrt(col(w["bn_var"]) + 1e-5) * col(w["bn_scale"]) + col(
        w["bn_bias"]
    )
    a = np.clip(a, 0.0, 6.0).mean(axis=(2, 3))
    logits = a @ w["fc_w"].T.astype(np.float64) + w["fc_b"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def run_onnxruntime(model_path, feeds):
    """Runs the model with onnxruntime on the CPU and returns the list of outputs."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def main():
    """Command-line entry point (see the module doc)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out-dir", default=HERE, help="where the models are written")
    ap.add_argument("--model", help="model to compute the expected output of")
    ap.add_argument("--batch", type=int, default=1, help="batch size of the input (dynamic model)")
    ap.add_argument("--input-out", help="write the deterministic input here (raw f32 LE)")
    ap.add_argument("--expected", help="write onnxruntime's output here (raw f32 LE)")
    args = ap.parse_args()

    if args.model is None:
        for batch, fname in ((1, "small_cnn.onnx"), ("N", "small_cnn_dynamic.onnx")):
            model = build(batch, fname.removesuffix(".onnx"))
            path = os.path.join(args.out_dir, fname)
            onnx.save(model, path)
            print(f"wrote {path}")
        return 0

    model = onnx.load(args.model)
    inp = model.graph.input[0]
    shape = [
        d.dim_value if d.HasField("dim_value") else args.batch
        for d in inp.type.tensor_type.shape.dim
    ]
    x = deterministic_input(shape)
    (out,) = run_onnxruntime(args.model, {inp.name: x})
    # Cross-check onnxruntime against the plain numpy forward pass (onnx.reference 1.23's
    # BatchNormalization disagrees with both, so it is not used).
    ref = numpy_forward(x)
    if np.shape(out) != ref.shape or not np.allclose(out, ref, rtol=1e-4, atol=1e-6):
        print("onnxruntime and the numpy forward pass disagree", file=sys.stderr)
        return 1
    if args.input_out:
        x.astype("<f4").tofile(args.input_out)
    if args.expected:
        np.asarray(out, dtype="<f4").tofile(args.expected)
    print(f"input {list(x.shape)} -> output {list(np.shape(out))}: {np.ravel(out)[:10]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
