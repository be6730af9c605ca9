"""Writes the ONNX backend test cases of the installed `onnx` package to a directory.

Recent `onnx` wheels ship the node test *generators* (`onnx.backend.test.case.node`) but not
their generated data, so the test suite generates it at test time; the model-level cases the
wheel does ship with data (pytorch-converted, pytorch-operator, simple) are copied beside them:
    python scripts/gen_node_tests.py OUT_DIR
gives OUT_DIR/<test name>/{model.onnx, test_data_set_N/{input_K.pb, output_K.pb}}.
"""

import os
import shutil
import sys

import onnx
from onnx import TensorProto, numpy_helper
from onnx.backend.test.case import node


def write_value(path, value, name):
    if isinstance(value, TensorProto):
        data = value.SerializeToString()
    else:
        data = numpy_helper.from_array(value, name).SerializeToString()
    with open(path, "wb") as f:
        f.write(data)


def main(out):
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    count = 0
    for case in node.collect_testcases(None):
        d = os.path.join(out, case.name)
        os.makedirs(d)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        graph = case.model.graph
        for i, (inputs, outputs) in enumerate(case.data_sets):
            s = os.path.join(d, f"test_data_set_{i}")
            os.makedirs(s)
            try:
                for j, v in enumerate(inputs):
                    write_value(os.path.join(s, f"input_{j}.pb"), v, graph.input[j].name)
                for j, v in enumerate(outputs):
                    write_value(os.path.join(s, f"output_{j}.pb"), v, graph.output[j].name)
            except Exception:  # sequences, maps, optionals: not tensors
                shutil.rmtree(d)
                count -= 1
                break
        count += 1
    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    copied = 0
    for kind in ("pytorch-converted", "pytorch-operator", "simple"):
        root = os.path.join(data, kind)
        for name in sorted(os.listdir(root)):
            src = os.path.join(root, name)
            if os.path.isfile(os.path.join(src, "model.onnx")) and not os.path.exists(
                os.path.join(out, name)
            ):
                shutil.copytree(src, os.path.join(out, name))
                copied += 1
    print(f"{count} node test cases and {copied} model test cases written to {out}")


if __name__ == "__main__":
    main(sys.argv[1])
