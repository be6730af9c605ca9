"""Side-by-side latency of onnxifi-rust (through its ONNXIFI C API, via ctypes) and ONNX Runtime
on the same models, inputs and thread count, in one process.

Rounds are interleaved (a batch of ours, a pause, a batch of ORT, a pause ...) so a noisy
neighbour hits both alike and neither library's idle threads steal the other's cores; each
round takes the median of --runs calls per library, and the paired ratio ours/ORT of each round is reported
as median [min, max] (below 1.0 means onnxifi-rust is faster). Outputs are checked to agree.

    .venv/bin/python bench/compare_ort.py [--threads N] [--rounds R] [--runs K] [--lib PATH]
"""

import argparse
import ctypes as C
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TAG_DESC = 0x43DFBF69
TAG_FENCE = 0x23E08AAB


class Desc(C.Structure):
    _fields_ = [("tag", C.c_int32), ("name", C.c_char_p), ("dataType", C.c_uint64),
                ("memoryType", C.c_uint64), ("dimensions", C.c_uint32),
                ("shape", C.POINTER(C.c_uint64)), ("buffer", C.c_uint64)]


class Fence(C.Structure):
    _fields_ = [("tag", C.c_int32), ("type", C.c_uint64), ("event", C.c_void_p)]


class Onnxifi:
    """The minimal ONNXIFI call sequence, for one graph."""

    def __init__(self, lib_path):
        self.lib = C.CDLL(lib_path)
        for name in ["onnxGetBackendIDs", "onnxInitBackend", "onnxInitGraph", "onnxSetGraphIO",
                     "onnxInitEvent", "onnxSignalEvent", "onnxRunGraph", "onnxWaitEvent",
                     "onnxReleaseEvent", "onnxReleaseGraph", "onnxReleaseBackend",
                     "onnxReleaseBackendID"]:
            getattr(self.lib, name).restype = C.c_int32
        ids = (C.c_void_p * 1)()
        n = C.c_size_t(1)
        self.check(self.lib.onnxGetBackendIDs(ids, C.byref(n)), "onnxGetBackendIDs")
        self.backend_id = C.c_void_p(ids[0])
        self.backend = C.c_void_p()
        self.check(self.lib.onnxInitBackend(self.backend_id, None, C.byref(self.backend)), "onnxInitBackend")

    @staticmethod
    def check(status, what):
        if status != 0:
            raise RuntimeError(f"{what} returned {status:#x}")

    def load(self, model_bytes, inputs, outputs):
        """Compiles the model and binds numpy inputs and (preallocated) outputs."""
        self.graph = C.c_void_p()
        self.check(self.lib.onnxInitGraph(self.backend, None, C.c_size_t(len(model_bytes)),
                                          model_bytes, 0, None, C.byref(self.graph)), "onnxInitGraph")
        self.keep = []

        def descs(arrays):
            arr = (Desc * len(arrays))()
            for d, (name, a) in zip(arr, arrays.items()):
                shape = (C.c_uint64 * a.ndim)(*a.shape)
                self.keep.append(shape)
                name_b = name.encode()
                self.keep.append(name_b)
                d.tag, d.name, d.dataType, d.memoryType = TAG_DESC, name_b, 1, 0
                d.dimensions, d.shape, d.buffer = a.ndim, shape, a.ctypes.data
            return arr

        ins, outs = descs(inputs), descs(outputs)
        self.check(self.lib.onnxSetGraphIO(self.graph, len(inputs), ins, len(outputs), outs), "onnxSetGraphIO")

    def run(self):
        ev = C.c_void_p()
        self.check(self.lib.onnxInitEvent(self.backend, C.byref(ev)), "onnxInitEvent")
        fin = Fence(TAG_FENCE, 0, ev)
        fout = Fence(TAG_FENCE, 0, None)
        self.check(self.lib.onnxRunGraph(self.graph, C.byref(fin), C.byref(fout)), "onnxRunGraph")
        self.check(self.lib.onnxSignalEvent(ev), "onnxSignalEvent")
        self.check(self.lib.onnxWaitEvent(C.c_void_p(fout.event)), "onnxWaitEvent")
        self.lib.onnxReleaseEvent(ev)
        self.lib.onnxReleaseEvent(C.c_void_p(fout.event))

    def unload(self):
        self.lib.onnxReleaseGraph(self.graph)


def conv_block_model():
    """Two ResNet-style 3×3 convolutions (64 channels, 56×56) with BN, ReLU and a residual add."""
    rng = np.random.default_rng(1)
    inits, nodes = [], []
    x = "x"
    for i in range(2):
        w = rng.standard_normal((64, 64, 3, 3), dtype=np.float32) * 0.05
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        for p, v in [("s", 1.0), ("b", 0.0), ("m", 0.0), ("v", 1.0)]:
            inits.append(numpy_helper.from_array(
                (v + 0.1 * rng.standard_normal(64)).astype(np.float32) if p != "v" else
                (1 + 0.1 * rng.random(64)).astype(np.float32), f"{p}{i}"))
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("BatchNormalization", [f"c{i}", f"s{i}", f"b{i}", f"m{i}", f"v{i}"], [f"n{i}"]))
        if i == 0:
            nodes.append(helper.make_node("Relu", ["n0"], ["r0"]))
            x = "r0"
    nodes.append(helper.make_node("Add", ["n1", "x"], ["sum"]))
    nodes.append(helper.make_node("Relu", ["sum"], ["y"]))
    g = helper.make_graph(nodes, "conv_block",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 56, 56])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def mlp_model():
    """A 3-layer perceptron, batch 64: 512 → 1024 → 1024 → 10, ReLU between, softmax last."""
    rng = np.random.default_rng(2)
    sizes = [512, 1024, 1024, 10]
    inits, nodes, x = [], [], "x"
    for i in range(3):
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((sizes[i + 1], sizes[i])) * 0.03).astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(sizes[i + 1]) * 0.1).astype(np.float32), f"b{i}"))
        nodes.append(helper.make_node("Gemm", [x, f"w{i}", f"b{i}"], [f"g{i}"], transB=1))
        x = f"g{i}"
        if i < 2:
            nodes.append(helper.make_node("Relu", [x], [f"r{i}"]))
            x = f"r{i}"
    nodes.append(helper.make_node("Softmax", [x], ["y"], axis=1))
    g = helper.make_graph(nodes, "mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 512])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 10])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def models():
    yield "small_cnn (example)", onnx.load(os.path.join(ROOT, "examples", "small_cnn.onnx"))
    yield "conv_block 64ch 56x56", conv_block_model()
    yield "mlp batch 64", mlp_model()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--lib", default=os.path.join(ROOT, "target", "release", "libonnxifi_rust.so"))
    args = ap.parse_args()
    os.environ["ONNXIFI_RUST_NUM_THREADS"] = str(args.threads)

    ours = Onnxifi(args.lib)
    print(f"threads={args.threads} rounds={args.rounds} runs/round={args.runs}; ratio = onnxifi-rust / onnxruntime {ort.__version__} latency")
    for name, model in models():
        data = model.SerializeToString()
        rng = np.random.default_rng(0)
        inputs = {}
        for vi in model.graph.input:
            if vi.name in {i.name for i in model.graph.initializer}:
                continue
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            inputs[vi.name] = rng.standard_normal(shape).astype(np.float32)
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        expected = sess.run(None, inputs)
        outputs = {o.name: np.zeros_like(e) for o, e in zip(model.graph.output, expected)}
        ours.load(data, inputs, outputs)
        ours.run()
        for (k, got), want in zip(outputs.items(), expected):
            err = float(np.max(np.abs(got - want)))
            if not np.allclose(got, want, rtol=1e-3, atol=1e-4):
                print(f"  {name}: output {k} differs from onnxruntime (max abs err {err})")
                sys.exit(1)
        for _ in range(3):
            ours.run()
            sess.run(None, inputs)
        ratios, t_ours, t_ort = [], [], []
        for _ in range(args.rounds):
            # Each library gets a batch of runs to itself, with a pause before the other's batch:
            # ONNX Runtime's workers spin after a run, and would otherwise starve our pool.
            a, b = [], []
            for _ in range(args.runs):
                t = time.perf_counter(); ours.run(); a.append(time.perf_counter() - t)
            time.sleep(0.05)
            for _ in range(args.runs):
                t = time.perf_counter(); sess.run(None, inputs); b.append(time.perf_counter() - t)
            time.sleep(0.05)
            ma, mb = statistics.median(a), statistics.median(b)
            t_ours.append(ma); t_ort.append(mb); ratios.append(ma / mb)
        ours.unload()
        print(f"  {name:24s} ours {statistics.median(t_ours)*1e3:8.3f} ms  ort {statistics.median(t_ort)*1e3:8.3f} ms  "
              f"ratio {statistics.median(ratios):.2f} [min {min(ratios):.2f}, max {max(ratios):.2f}]")


if __name__ == "__main__":
    main()
