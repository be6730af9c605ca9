#!/usr/bin/env python3
"""Writes the models and expected outputs the Rust FFI tests use, into OUTDIR.

Called by ffi-tests at test time (nothing here is committed as data):

* ``add.onnx``: Y = A + B, all float[2,3] (expected values are computed by the tests by hand).
* ``reshape.onnx``: Y = Reshape(X float[2,3], S int64[2]) declared float[3,2]; S is a graph
  input, so a bad S makes the *run* fail.
* ``invalid.onnx``: a Relu reading a value nothing defines (INVALID_MODEL).
* ``custom_op.onnx``: an operator of an unknown domain (UNSUPPORTED_OPERATOR).
* ``small_cnn.onnx`` / ``small_cnn_dynamic.onnx``: copies of the bundled examples.
* ``small_cnn_noinit.onnx``: the small CNN with its initializers turned into graph inputs, and
  ``weights.txt`` + ``weights.bin`` holding them (``name dtype offset dims...`` per line) for
  the weight-descriptor path of onnxInitGraph.
* ``small_cnn.b{1,2,3}.out.bin``: onnxruntime's output of the dynamic model for the
  deterministic input at batch 1, 2, 3 (raw little-endian float32).
"""

import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples"))
import make_small_cnn  # noqa: E402


def save(model, out, name, opset=13):
    """Sets the IR/opset versions and writes the model (without running the checker)."""
    model.ir_version = 8
    onnx.save(model, os.path.join(out, name))


def simple(nodes, inputs, outputs, name, opsets=(("", 13),), inits=()):
    """Builds a model from nodes and (name, elem_type, shape) input/output triples."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=list(inits),
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets]
    )


def main(out):
    """Writes everything into `out`."""
    os.makedirs(out, exist_ok=True)
    f = TensorProto.FLOAT
    add = simple(
        [helper.make_node("Add", ["A", "B"], ["Y"])],
        [("A", f, [2, 3]), ("B", f, [2, 3])],
        [("Y", f, [2, 3])],
        "add",
    )
    onnx.checker.check_model(add)
    save(add, out, "add.onnx")

    reshape = simple(
        [helper.make_node("Reshape", ["X", "S"], ["Y"])],
        [("X", f, [2, 3]), ("S", TensorProto.INT64, [2])],
        [("Y", f, [3, 2])],
        "reshape",
    )
    onnx.checker.check_model(reshape)
    save(reshape, out, "reshape.onnx")

    invalid = simple(
        [helper.make_node("Relu", ["nowhere"], ["Y"])],
        [("X", f, [2, 3])],
        [("Y", f, [2, 3])],
        "invalid",
    )
    save(invalid, out, "invalid.onnx")

    custom = simple(
        [helper.make_node("Frobnicate", ["X"], ["Y"], domain="com.example.nosuch")],
        [("X", f, [2, 3])],
        [("Y", f, [2, 3])],
        "custom_op",
        opsets=(("", 13), ("com.example.nosuch", 1)),
    )
    save(custom, out, "custom_op.onnx")

    for name in ("small_cnn.onnx", "small_cnn_dynamic.onnx"):
        shutil.copyfile(os.path.join(ROOT, "examples", name), os.path.join(out, name))

    cnn = onnx.load(os.path.join(ROOT, "examples", "small_cnn.onnx"))
    inits = list(cnn.graph.initializer)
    lines = []
    blob = bytearray()
    for t in inits:
        arr = numpy_helper.to_array(t).astype("<f4")
        lines.append(" ".join([t.name, "f32", str(len(blob))] + [str(d) for d in arr.shape]))
        blob += arr.tobytes()
        cnn.graph.input.append(helper.make_tensor_value_info(t.name, f, list(arr.shape)))
    del cnn.graph.initializer[:]
    onnx.save(cnn, os.path.join(out, "small_cnn_noinit.onnx"))
    with open(os.path.join(out, "weights.txt"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(out, "weights.bin"), "wb") as fh:
        fh.write(bytes(blob))

    dynamic = os.path.join(out, "small_cnn_dynamic.onnx")
    for batch in (1, 2, 3):
        x = make_small_cnn.deterministic_input([batch, 3, 16, 16])
        (y,) = make_small_cnn.run_onnxruntime(dynamic, {"input": x})
        ref = make_small_cnn.numpy_forward(x)
        if not np.allclose(y, ref, rtol=1e-4, atol=1e-6):
            print("onnxruntime and the numpy forward pass disagree", file=sys.stderr)
            return 1
        np.asarray(y, dtype="<f4").tofile(os.path.join(out, f"small_cnn.b{batch}.out.bin"))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
