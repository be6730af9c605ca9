#!/usr/bin/env python3
"""Hostile-model test set: "nothing a model does can crash the host".

Builds, at test time, thousands of hostile variants of real ONNX models and runs every one
through libonnxifi_rust.so in child processes limited in address space (RLIMIT_AS, 4 GiB by
default) and in time. A crash (death by a signal, including SIGABRT from an allocation failure
or a stack overflow, or a panic escaping to the process) or a hang (timeout) fails the run; a
clean refusal (an ONNXIFI status with a message) or a successful run is fine.

Usage (from the repository root, after `cargo build --release`):

    .venv/bin/python scripts/hostile_models.py [--count N] [--out DIR] [--jobs J] [--seed S]
        [--family F,...] [--keep] [--timeout SEC] [--mem-gib G] [--strict]

Seeds (only those present are used): the ONNX backend node tests in .testdata/node (made first
by scripts/test.sh), the model families of .testdata/families and the wheel models of
.testdata/real/cases (both made by `cargo test`, before the C tests). Node seeds are the ones
whose unmodified model runs; each variant feeds the seed's test-data inputs by name when their
declaration is unchanged, and generated inputs (--seed 1) otherwise.

Every variant goes through up to three children, each with the same limits:
  run    `onnxifi-run run MODEL --repeat 1 --seed 1 [--input NAME=FILE ...]` (C ABI:
         onnxInitBackend, onnxInitGraph, onnxGetOutputShapesRUST, onnxSetGraphIO, onnxRunGraph)
  check  `onnxifi-run check MODEL` (decoder, IR-spec checker, and the backend's refusal listing,
         which compiles the graph as onnxGetBackendCompatibility does, outside the C ABI guard)
  probe  this script's `--probe MODEL` (ctypes, stdlib only): onnxGetBackendCompatibility and
         onnxInitGraph on the raw bytes, for models that decode but whose inputs the CLI cannot
         make (huge or unknown dims, no graph), so they still reach the library's C ABI.
Template models (huge_attributes, resource_bomb) come twice: with their shape/size constants
as initializers (seen by onnxInitGraph) and with them as graph inputs fed from files at run
time (only onnxRunGraph meets them).

Families: truncate, byte_flip, huge_dims, shape_overflow, raw_data_mismatch, wrong_dtype,
deep_nesting, long_chain, cycles, duplicate_names, missing_inputs, huge_attributes,
external_data, opset_domain, empty_model, resource_bomb (see the `family_*` functions and
tests/hostile/README.md). The set is deterministic given --seed and the seed models.

Outcomes per variant: `ran` (the run stage ran the graph), `refused` (an ONNXIFI status from
the library), `cli` (onnxifi-run declined before or after the library, e.g. it could not make
an input), `internal` (INTERNAL_ERROR or a panic caught at the C ABI: a bug, reported, fails
only with --strict), `crash`, `hang`. Exit status 1 on any crash or hang (with the reproducing
model, kept under OUT/failures, and its command), 0 otherwise, 2 on usage errors.
"""

import os
import sys

# ------------------------------------------------------------------------------- probe child
# The probe child runs once per variant: it imports only os, sys and ctypes (argparse alone
# would triple its start-up time), and exits before the rest of the module is imported.

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIB_PATH = os.environ.get("ONNXIFI_RUST_LIB",
                          os.path.join(ROOT_DIR, "target", "release", "libonnxifi_rust.so"))

STATUS_NAMES = {
    0x0000: "SUCCESS", 0x0001: "FALLBACK", 0x0101: "INVALID_ID", 0x0102: "INVALID_SIZE",
    0x0103: "INVALID_POINTER", 0x0104: "INVALID_PROTOBUF", 0x0105: "INVALID_MODEL",
    0x0106: "INVALID_BACKEND", 0x0107: "INVALID_GRAPH", 0x0108: "INVALID_EVENT",
    0x0109: "INVALID_STATE", 0x010A: "INVALID_NAME", 0x010B: "INVALID_SHAPE",
    0x010C: "INVALID_DATATYPE", 0x010D: "INVALID_MEMORY_TYPE", 0x010E: "INVALID_MEMORY_LOCATION",
    0x010F: "INVALID_FENCE_TYPE", 0x0110: "INVALID_PROPERTY", 0x0201: "UNSUPPORTED_TAG",
    0x0202: "UNSUPPORTED_VERSION", 0x0203: "UNSUPPORTED_OPERATOR",
    0x0204: "UNSUPPORTED_ATTRIBUTE", 0x0205: "UNSUPPORTED_SHAPE", 0x0206: "UNSUPPORTED_DATATYPE",
    0x0207: "UNSUPPORTED_MEMORY_TYPE", 0x0208: "UNSUPPORTED_FENCE_TYPE",
    0x0209: "UNSUPPORTED_PROPERTY", 0x0301: "UNIDENTIFIED_NAME", 0x0302: "MISMATCHING_SHAPE",
    0x0303: "MISMATCHING_DATATYPE", 0x0401: "NO_SYSTEM_MEMORY", 0x0402: "NO_DEVICE_MEMORY",
    0x0403: "NO_SYSTEM_RESOURCES", 0x0404: "NO_DEVICE_RESOURCES", 0x0405: "BACKEND_UNAVAILABLE",
    0x0406: "INTERNAL_ERROR",
}
#: This library's backend property: the number of compute threads.
PROPERTY_NUM_THREADS = 0x5255_5354_0001


def probe(model_path):
    """The probe child: onnxGetBackendCompatibility and onnxInitGraph on a model's bytes,
    through ctypes. Prints `compat STATUS` and `init STATUS: message`; exit 0 whatever the
    statuses (only a crash or a hang is the parent's concern)."""
    import ctypes as C

    lib = C.CDLL(LIB_PATH)
    lib.onnxGetBackendIDs.argtypes = [C.c_void_p, C.POINTER(C.c_size_t)]
    lib.onnxGetBackendCompatibility.argtypes = [C.c_void_p, C.c_size_t, C.c_char_p]
    lib.onnxInitBackend.argtypes = [C.c_void_p, C.POINTER(C.c_uint64), C.POINTER(C.c_void_p)]
    lib.onnxInitGraph.argtypes = [C.c_void_p, C.c_void_p, C.c_size_t, C.c_char_p, C.c_uint32,
                                  C.c_void_p, C.POINTER(C.c_void_p)]
    for name in ("onnxReleaseGraph", "onnxReleaseBackend", "onnxReleaseBackendID"):
        getattr(lib, name).argtypes = [C.c_void_p]
    lib.onnxGetLastErrorMessage.argtypes = [C.c_char_p, C.POINTER(C.c_size_t)]

    def message():
        buf = C.create_string_buffer(4096)
        size = C.c_size_t(4096)
        if lib.onnxGetLastErrorMessage(buf, C.byref(size)) != 0:
            return ""
        return buf.value.decode("utf-8", "replace")

    def name(status):
        return STATUS_NAMES.get(status, f"0x{status:04x}")

    with open(model_path, "rb") as f:
        data = f.read()
    count = C.c_size_t(0)
    lib.onnxGetBackendIDs(None, C.byref(count))
    ids = (C.c_void_p * count.value)()
    lib.onnxGetBackendIDs(ids, C.byref(count))
    status = lib.onnxGetBackendCompatibility(ids[0], len(data), data)
    print(f"compat {name(status)}: {message() if status > 1 else ''}"[:400])
    props = (C.c_uint64 * 3)(PROPERTY_NUM_THREADS, 1, 0)
    backend = C.c_void_p()
    status = lib.onnxInitBackend(ids[0], props, C.byref(backend))
    if status != 0:
        print(f"backend {name(status)}: {message()}")
        return 0
    graph = C.c_void_p()
    status = lib.onnxInitGraph(backend, None, len(data), data, 0, None, C.byref(graph))
    print(f"init {name(status)}: {message() if status else ''}"[:400])
    if status == 0:
        lib.onnxReleaseGraph(graph)
    lib.onnxReleaseBackend(backend)
    for i in range(count.value):
        lib.onnxReleaseBackendID(ids[i])
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["--probe"]:
    sys.exit(probe(sys.argv[2]))

import argparse  # noqa: E402 - after the probe's early exit, see above
import dataclasses  # noqa: E402
import functools  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import Counter, defaultdict  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(ROOT_DIR)
CLI = ROOT / "target" / "release" / "onnxifi-run"
LIB = Path(LIB_PATH)
TESTDATA = ROOT / ".testdata"


# ----------------------------------------------------------------------- protobuf by hand
# Deep nesting is written directly in the wire format: the onnx/protobuf Python objects copy
# a whole subtree per level (quadratic) and refuse deep messages.

def varint(n):
    """A protobuf varint (negative numbers as their 64-bit two's complement)."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def pb_int(field_no, value):
    """A varint field."""
    return varint(field_no << 3) + varint(value)


def pb_bytes(field_no, payload):
    """A length-delimited field (bytes, string or message)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(field_no << 3 | 2) + varint(len(payload)) + payload


def pb_nested(frames, core):
    """Messages nested in one another without quadratic copying: `frames` lists, outermost
    first, (before, field_no, after) for a message made of `before`, the next message as field
    `field_no`, then `after`; `core` is the innermost message's bytes."""
    lengths = []
    inner = len(core)
    for before, field_no, after in reversed(frames):
        lengths.append(inner)
        inner = (len(before) + len(varint(field_no << 3 | 2)) + len(varint(inner)) + inner
                 + len(after))
    lengths.reverse()
    parts = []
    for (before, field_no, _), length in zip(frames, lengths):
        parts += [before, varint(field_no << 3 | 2), varint(length)]
    parts.append(core)
    parts += [after for _, _, after in reversed(frames)]
    return b"".join(parts)


def pb_value_info(name, elem=1, dims=(1,)):
    """A ValueInfoProto of a tensor."""
    shape = b"".join(pb_bytes(1, pb_int(1, d)) for d in dims)
    tensor = pb_int(1, elem) + pb_bytes(2, shape)
    return pb_bytes(1, name) + pb_bytes(2, pb_bytes(1, tensor))


def pb_node(inputs, outputs, op, attrs=b""):
    """A NodeProto (attrs: encoded AttributeProto fields, each as field 5)."""
    return (b"".join(pb_bytes(1, i) for i in inputs) + b"".join(pb_bytes(2, o) for o in outputs)
            + pb_bytes(4, op) + attrs)


def pb_model_prefix(opset=17):
    """The ModelProto fields before its graph: IR version 8, the default-domain opset."""
    return pb_int(1, 8) + pb_bytes(8, pb_int(2, opset))


def leaf_graph(out):
    """A graph whose only node is a Constant float [1] named `out`."""
    value = pb_int(1, 1) + pb_int(2, 1) + pb_bytes(9, b"\x00\x00\x80\x3f")  # dims, type, raw
    attr = pb_bytes(5, pb_bytes(1, "value") + pb_bytes(5, value) + pb_int(20, 4))
    return (pb_bytes(1, pb_node([], [out], "Constant", attr)) + pb_bytes(2, f"leaf_{out}")
            + pb_bytes(12, pb_value_info(out)))


def nested_if(depth):
    """A model with `depth` If nodes each nested in the then-branch of the previous one (every
    else-branch a constant), all reading the outer `cond`."""
    frames = [(pb_model_prefix(), 7, b"")]
    for level in range(depth):
        out = f"y{level}"
        graph_after = pb_bytes(2, f"g{level}") + pb_bytes(12, pb_value_info(out))
        if level == 0:
            graph_after += pb_bytes(11, pb_value_info("cond", 9, ()))
        else_attr = pb_bytes(5, pb_bytes(1, "else_branch") + pb_int(20, 5)
                             + pb_bytes(6, leaf_graph(f"e{level}")))
        frames.append((b"", 1, graph_after))
        frames.append((pb_node(["cond"], [out], "If")[:], 5, else_attr))
        frames.append((pb_bytes(1, "then_branch") + pb_int(20, 5), 6, b""))
    return pb_nested(frames, leaf_graph(f"y{depth}"))


def nested_loop(depth):
    """A model with `depth` Loop nodes, each in the body of the previous one; every loop runs
    once (M = 1) and carries x through."""
    m_init = pb_int(2, 7) + pb_bytes(8, "M") + pb_bytes(9, (1).to_bytes(8, "little"))
    frames = [(pb_model_prefix(), 7, b"")]
    for level in range(depth):
        x_in, x_out = ("x" if level == 0 else f"x_in{level}"), f"x_out{level}"
        if level == 0:
            graph_after = (pb_bytes(2, "main") + pb_bytes(5, m_init)
                           + pb_bytes(11, pb_value_info("x")) + pb_bytes(12, pb_value_info(x_out)))
        else:
            graph_after = (pb_bytes(2, f"body{level}")
                           + pb_bytes(11, pb_value_info(f"i{level}", 7, ()))
                           + pb_bytes(11, pb_value_info(f"c{level}", 9, ()))
                           + pb_bytes(11, pb_value_info(x_in))
                           + pb_bytes(12, pb_value_info(f"co{level}", 9, ()))
                           + pb_bytes(12, pb_value_info(x_out))
                           + pb_bytes(1, pb_node([f"c{level}"], [f"co{level}"], "Identity")))
        frames.append((b"", 1, graph_after))
        frames.append((pb_node(["M", "", x_in], [x_out], "Loop"), 5, b""))
        frames.append((pb_bytes(1, "body") + pb_int(20, 5), 6, b""))
    n = depth
    leaf = (pb_bytes(2, "leaf") + pb_bytes(11, pb_value_info(f"i{n}", 7, ()))
            + pb_bytes(11, pb_value_info(f"c{n}", 9, ())) + pb_bytes(11, pb_value_info(f"x_in{n}"))
            + pb_bytes(12, pb_value_info(f"co{n}", 9, ()))
            + pb_bytes(12, pb_value_info(f"x_out{n}"))
            + pb_bytes(1, pb_node([f"c{n}"], [f"co{n}"], "Identity"))
            + pb_bytes(1, pb_node([f"x_in{n}"], [f"x_out{n}"], "Relu")))
    return pb_nested(frames, leaf)


def nested_sequence_type(depth):
    """A model whose input type is sequence(sequence(...tensor...)) `depth` levels deep."""
    tensor = pb_bytes(1, pb_int(1, 1) + pb_bytes(2, pb_bytes(1, pb_int(1, 1))))
    frames = [(pb_model_prefix(), 7, b""),
              (pb_bytes(1, pb_node(["x"], ["y"], "Identity")) + pb_bytes(2, "main")
               + pb_bytes(12, pb_value_info("y", 1)), 11, b""),
              (pb_bytes(1, "x"), 2, b"")]
    frames += [(b"", 4, b""), (b"", 1, b"")] * depth  # TypeProto.sequence_type.elem_type
    return pb_nested(frames, tensor)


# ------------------------------------------------------------------------------- variants

@dataclass
class Variant:
    """One hostile model: its family, a description, its bytes and the run stage's options."""
    family: str
    label: str
    data: bytes
    #: Options of the run stage (None: no run stage, see `variant`).
    run_args: list = field(default_factory=lambda: ["--seed", "1"])
    timeout: float = 20.0
    #: (input name, serialized TensorProto) fed to the run stage from files (--input NAME=FILE).
    inputs: list = field(default_factory=list)


@dataclass
class Seed:
    """A real model to mutate: its name, decoded model, bytes and the files holding its
    test-data inputs by input name."""
    name: str
    model: object
    data: bytes
    feeds: dict
    kind: str


HUGE = [2**31, 2**32, 2**40, 2**62, 2**63 - 1, -1, -2, -(2**31), -(2**63), 0]
# Dims whose product wraps around in 64 bits (to 0, 2, 1, 6 or 2**64 - 2).
WRAPPING = [([2**32, 2**32], 0), ([2**62, 4], 0), ([6148914691236517206, 3], 2),
            ([-1, -1], 1), ([-2, -3], 6), ([2**63 - 1, 2], 0), ([-(2**62), -4], 0),
            ([2**31, 2**31, 2**31], 0), ([2**21, 2**21, 2**22], 0), ([3, 2**63 - 1, 3], 0)]
ELEM_SIZES = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 16: 2}
BAD_DTYPES = [0, 8, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 99, -1, 2**31 - 1, -(2**31)]


def onnx_mods():
    """The onnx package (imported only by the parent: the probe child must start fast)."""
    import onnx
    from onnx import helper, numpy_helper
    return onnx, helper, numpy_helper


def serialize(model):
    """A model's bytes; protobuf refuses very large messages, which then get no variant."""
    return model.SerializeToString()


def clone(seed):
    """A mutable copy of a seed's model."""
    onnx, _, _ = onnx_mods()
    m = onnx.ModelProto()
    m.CopyFrom(seed.model)
    return m


def graph_inputs(graph):
    """The inputs a caller binds (graph inputs without an initializer)."""
    weights = {t.name for t in graph.initializer}
    return [vi for vi in graph.input if vi.name not in weights]


def feed_args(model, seed):
    """Run-stage options: the seed's test-data file for every input whose declaration is the
    seed's own, generated values (--seed 1) for the others."""
    declared = {vi.name: vi.type.SerializeToString() for vi in graph_inputs(seed.model.graph)}
    args = ["--seed", "1"]
    for vi in graph_inputs(model.graph):
        same = declared.get(vi.name) == vi.type.SerializeToString()
        if same and vi.name in seed.feeds and "=" not in vi.name:
            args += ["--input", f"{vi.name}={seed.feeds[vi.name]}"]
    return args


def variant(family, seed, label, model, timeout=20.0):
    """A variant made by editing a copy of `seed`'s model. Its run stage is skipped (None) when
    onnxifi-run would have to make an input of more than MAX_INPUT_BYTES: generating gigabytes
    of input is the CLI's time, not the library's; the probe still gives the model to
    onnxInitGraph."""
    args = None if input_bytes(model) > MAX_INPUT_BYTES else feed_args(model, seed)
    return Variant(family, f"{seed.name}: {label}", serialize(model), args, timeout)


MAX_INPUT_BYTES = 256 << 20


def input_bytes(model):
    """The bytes of the largest input onnxifi-run would make for a model (symbolic dims count
    as 1, as the CLI binds them; zero or negative dims as 0, which it refuses anyway)."""
    largest = 0
    for v in graph_inputs(model.graph):
        t = v.type.tensor_type
        count = ELEM_SIZES.get(t.elem_type, 4)
        for d in t.shape.dim:
            if d.HasField("dim_value"):
                count *= max(d.dim_value, 0)
        largest = max(largest, count)
    return largest


def tensor_shapes(model):
    """Every (what, TensorShapeProto) of the main graph's declared tensors."""
    g = model.graph
    out = []
    for what, vis in (("input", graph_inputs(g)), ("value_info", g.value_info),
                      ("output", g.output)):
        for vi in vis:
            if vi.type.HasField("tensor_type"):
                out.append((f"{what} '{vi.name}'", vi.type.tensor_type.shape))
    return out


def tensors(model):
    """Every TensorProto of the main graph a mutation can reach: initializers and the values
    of Constant nodes."""
    g = model.graph
    out = [(f"initializer '{t.name}'", t) for t in g.initializer]
    for node in g.node:
        for a in node.attribute:
            if a.HasField("t"):
                out.append((f"{node.op_type} '{node.output[0] if node.output else ''}' {a.name}",
                            a.t))
    return out


def promote_input(model, seed, rng):
    """Makes one fed input of a model without tensors an initializer holding its test data
    (the declaration kept, or dropped), so tensor mutations have something to reach."""
    onnx, _, _ = onnx_mods()
    fed = [vi for vi in graph_inputs(model.graph) if vi.name in seed.feeds]
    if not fed:
        return False
    vi = rng.choice(fed)
    t = onnx.TensorProto()
    t.ParseFromString(Path(seed.feeds[vi.name]).read_bytes())
    t.name = vi.name
    model.graph.initializer.append(t)
    if rng.random() < 0.5:
        model.graph.input.remove(vi)
    return True


def pick_tensor(model, seed, rng):
    """A tensor of the model to mutate (promoting an input when there is none); None if the
    model has none."""
    found = tensors(model)
    if not found and promote_input(model, seed, rng):
        found = tensors(model)
    return rng.choice(found) if found else None


def to_raw(t):
    """Rewrites a tensor's data as raw_data (its typed fields cleared); False if it cannot."""
    _, _, numpy_helper = onnx_mods()
    try:
        arr = numpy_helper.to_array(t)
        raw = arr.tobytes()
    except Exception:  # noqa: BLE001 - any undecodable tensor keeps its form
        return False
    name = t.name
    dims = list(t.dims)
    dtype = t.data_type
    t.Clear()
    t.name, t.data_type, t.raw_data = name, dtype, raw
    t.dims.extend(dims)
    return True


# ------------------------------------------------------------------- model builders (small)

def make_model(nodes, inputs, outputs, inits=(), opset=17, functions=(), extra_opsets=()):
    """A model from onnx.helper pieces (IR version 8 unless the opset needs older)."""
    _, helper, _ = onnx_mods()
    graph = helper.make_graph(list(nodes), "hostile", list(inputs), list(outputs), list(inits))
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8, functions=list(functions))


def vi(name, elem, dims):
    """A tensor ValueInfoProto (dims: ints or symbol names; None: no shape)."""
    _, helper, _ = onnx_mods()
    return helper.make_tensor_value_info(name, elem, dims)


def const(name, values, elem=7, dims=None):
    """An initializer from a Python list (int64 by default), given as raw data so huge values
    keep their bits."""
    import numpy as np
    _, helper, _ = onnx_mods()
    np_type = {7: np.int64, 1: np.float32, 6: np.int32, 9: np.bool_}[elem]
    onnx, _, _ = onnx_mods()
    arr = np.array(values, dtype=np_type)
    t = onnx.TensorProto(name=name, data_type=elem, raw_data=arr.tobytes())
    t.dims.extend(list(arr.shape) if dims is None else dims)
    return t


def node(op, inputs, outputs, **attrs):
    """A NodeProto."""
    _, helper, _ = onnx_mods()
    return helper.make_node(op, inputs, outputs, **attrs)


def reduced(nodes, inputs, inits, big, opset=17, small_out=True):
    """A model computing `big` with `nodes`; its output is ReduceSum(big) reshaped to [1] (a
    shape known before the run, so the CLI can size it and the library meets the huge value
    inside the run) when `small_out`, `big` itself otherwise."""
    nodes = list(nodes)
    if small_out:
        nodes.append(node("ReduceSum", [big], ["sum"], keepdims=0))
        nodes.append(node("Reshape", ["sum", "keep_one"], ["out"]))
        inits = list(inits) + [const("keep_one", [1])]
        return make_model(nodes, inputs, [vi("out", 1, [1])], inits, opset)
    return make_model(nodes, inputs, [vi(big, 1, None)], inits, opset)


# ------------------------------------------------------------------------------ families
# Each family is a function (ctx, rng, n) yielding up to n variants. Template families build
# their list of specs first (label, builder) and take n of them in a shuffled order.

class Context:
    """What the families share: the seeds, by kind."""

    def __init__(self, seeds):
        self.seeds = seeds
        self.by_kind = defaultdict(list)
        for s in seeds:
            self.by_kind[s.kind].append(s)

    def pick(self, rng, bigger=0.12):
        """A seed: a real or family model with probability `bigger`, a node model otherwise."""
        big = self.by_kind["real"] + self.by_kind["family"]
        if big and (rng.random() < bigger or not self.by_kind["node"]):
            return rng.choice(big)
        return rng.choice(self.by_kind["node"])


def family_truncate(ctx, rng, n):
    """The serialized bytes cut short: at random offsets, and at 0, 1, half and len - 1."""
    for i in range(n):
        seed = ctx.pick(rng)
        size = len(seed.data)
        cut = [1, size // 2, size - 1, 0][i % 4] if i % 5 == 4 else rng.randrange(0, size)
        yield Variant("truncate", f"{seed.name}: first {cut} of {size} bytes",
                      seed.data[:cut], feed_args(seed.model, seed))


def flip_bytes(data, rng):
    """Random byte edits: xor, 0x00, 0xff, 0x80 (a varint continuation), insertions, deletions;
    returns the bytes and a description."""
    out = bytearray(data)
    edits = rng.choice([1, 1, 2, 4, 8, 32])
    what = []
    for _ in range(edits):
        pos = rng.randrange(len(out))
        kind = rng.choice(["xor", "xor", "zero", "ff", "cont", "insert", "delete"])
        if kind == "xor":
            out[pos] ^= rng.randrange(1, 256)
        elif kind == "zero":
            out[pos] = 0
        elif kind == "ff":
            out[pos] = 0xFF
        elif kind == "cont":
            out[pos] |= 0x80
        elif kind == "insert":
            out[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.choice([1, 4, 10])))
        elif len(out) > 1:
            del out[pos:pos + rng.choice([1, 2, 8])]
        what.append(f"{kind}@{pos}")
    return bytes(out), " ".join(what)


def family_byte_flip(ctx, rng, n):
    """Random byte edits of the serialized model (small models, so most hit structure)."""
    for _ in range(n):
        seed = ctx.pick(rng, bigger=0.08)
        data, what = flip_bytes(seed.data, rng)
        yield Variant("byte_flip", f"{seed.name}: {what}", data, feed_args(seed.model, seed))


def family_huge_dims(ctx, rng, n):
    """Huge, negative and zero dims (2^31, 2^40, 2^62, ...) in inputs, value_info, outputs and
    tensor dims; ranks of 10,000."""
    for _ in range(n):
        seed = ctx.pick(rng)
        m = clone(seed)
        value = rng.choice(HUGE)
        if rng.random() < 0.35:
            found = pick_tensor(m, seed, rng)
            if found:
                where, t = found
                if t.dims and rng.random() < 0.8:
                    k = rng.randrange(len(t.dims))
                    t.dims[k] = value
                    label = f"{where} dims[{k}] = {value}"
                else:
                    t.dims.append(value)
                    label = f"{where} extra dim {value}"
                yield variant("huge_dims", seed, label, m)
                continue
        shapes = tensor_shapes(m)
        if not shapes:
            continue
        where, shape = rng.choice(shapes)
        if rng.random() < 0.08:
            del shape.dim[:]
            for _ in range(10000):
                shape.dim.add().dim_value = 1
            label = f"{where} rank 10000"
        elif shape.dim and rng.random() < 0.85:
            k = rng.randrange(len(shape.dim))
            shape.dim[k].dim_value = value
            label = f"{where} dim[{k}] = {value}"
        else:
            shape.dim.add().dim_value = value
            label = f"{where} extra dim {value}"
        yield variant("huge_dims", seed, label, m)


def family_shape_overflow(ctx, rng, n):
    """Dims whose product overflows 64 bits and wraps to a small count, on tensors whose
    raw_data holds exactly that wrapped count (so a wrapping size check agrees), and on
    declared shapes."""
    for _ in range(n):
        seed = ctx.pick(rng)
        m = clone(seed)
        dims, wrapped = rng.choice(WRAPPING)
        found = pick_tensor(m, seed, rng) if rng.random() < 0.7 else None
        if found:
            where, t = found
            size = ELEM_SIZES.get(t.data_type, 4)
            to_raw(t)
            del t.dims[:]
            t.dims.extend(dims)
            t.raw_data = bytes(size * wrapped)
            yield variant("shape_overflow", seed, f"{where} dims {dims} raw {size * wrapped} B", m)
            continue
        shapes = tensor_shapes(m)
        if not shapes:
            continue
        where, shape = rng.choice(shapes)
        del shape.dim[:]
        for d in dims:
            shape.dim.add().dim_value = d
        yield variant("shape_overflow", seed, f"{where} shape {dims}", m)


def family_raw_data_mismatch(ctx, rng, n):
    """raw_data (or typed data) whose length does not match the dims."""
    kinds = ["short1", "half", "empty", "long1", "double", "huge_dims_tiny_raw", "typed_short",
             "typed_long", "raw_and_typed", "odd"]
    for i in range(n):
        seed = ctx.pick(rng)
        m = clone(seed)
        found = pick_tensor(m, seed, rng)
        if not found:
            continue
        where, t = found
        kind = kinds[i % len(kinds)]
        if kind.startswith("typed"):
            t.ClearField("raw_data")
            del t.float_data[:], t.int64_data[:], t.int32_data[:], t.double_data[:]
            count = 1
            for d in t.dims:
                count *= max(d, 0)
            count = count - 1 if kind == "typed_short" else count + 3
            t.data_type = 1
            t.float_data.extend([0.5] * max(0, min(count, 1 << 20)))
        elif not to_raw(t):
            continue
        raw = t.raw_data
        if kind == "short1":
            t.raw_data = raw[:-1]
        elif kind == "half":
            t.raw_data = raw[: len(raw) // 2]
        elif kind == "empty":
            t.raw_data = b""
        elif kind == "long1":
            t.raw_data = raw + b"\x01"
        elif kind == "double":
            t.raw_data = raw + raw
        elif kind == "huge_dims_tiny_raw":
            del t.dims[:]
            t.dims.extend([2**20, 2**20, 2**10])
            t.raw_data = raw[:4]
        elif kind == "raw_and_typed":
            t.float_data.extend([1.0, 2.0])
        elif kind == "odd":
            t.raw_data = raw[:-3] if len(raw) > 3 else b"\x01\x02\x03"
        yield variant("raw_data_mismatch", seed, f"{where} {kind}", m)


def family_wrong_dtype(ctx, rng, n):
    """Wrong or unknown data_type codes on tensors, declared types and type attributes."""
    for i in range(n):
        seed = ctx.pick(rng)
        m = clone(seed)
        code = rng.choice(BAD_DTYPES)
        target = i % 3
        if target == 0:
            found = pick_tensor(m, seed, rng)
            if not found:
                continue
            where, t = found
            t.data_type = code
            label = f"{where} data_type {code}"
        elif target == 1:
            typed = [(w, vi) for w, vis in (("input", m.graph.input), ("output", m.graph.output),
                                           ("value_info", m.graph.value_info))
                     for vi in vis if vi.type.HasField("tensor_type")]
            if not typed:
                continue
            where, v = rng.choice(typed)
            v.type.tensor_type.elem_type = code
            label = f"{where} '{v.name}' elem_type {code}"
        else:
            attrs = [(nd, a) for nd in m.graph.node for a in nd.attribute
                     if a.name in ("to", "dtype", "output_dtype", "stash_type")]
            if not attrs:
                nd = m.graph.node[rng.randrange(len(m.graph.node))]
                out = nd.output[0] if nd.output else "x"
                m.graph.node.append(node("Cast", [out], [out + "_cast"], to=1))
                m.graph.output.append(vi(out + "_cast", 1, None))
                attrs = [(m.graph.node[-1], m.graph.node[-1].attribute[0])]
            nd, a = rng.choice(attrs)
            a.i = code
            label = f"{nd.op_type} {a.name} = {code}"
        yield variant("wrong_dtype", seed, label, m)


def function_chain(depth, fan=1, recursive=None):
    """A model whose graph calls local function f0, which calls f1 (`fan` times), ... down to
    f{depth-1}, an Identity; `recursive`: "self" (f0 calls f0) or "mutual" (f0 <-> f1)."""
    _, helper, _ = onnx_mods()
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    funcs = []
    if recursive:
        callee = {"self": ["f0"], "mutual": ["f1", "f0"]}[recursive]
        for k, target in enumerate(callee):
            funcs.append(helper.make_function("local", f"f{k}", ["x"], ["y"],
                                              [node(target, ["x"], ["y"], domain="local")], opsets))
    else:
        for k in range(depth):
            if k == depth - 1:
                body = [node("Identity", ["x"], ["y"])]
            elif fan == 1:
                body = [node(f"f{k + 1}", ["x"], ["y"], domain="local")]
            else:
                body = [node(f"f{k + 1}", ["x"], [f"t{j}"], domain="local") for j in range(fan)]
                body.append(node("Sum", [f"t{j}" for j in range(fan)], ["y"]))
            funcs.append(helper.make_function("local", f"f{k}", ["x"], ["y"], body, opsets))
    graph_nodes = [node("f0", ["x"], ["y"], domain="local")]
    return make_model(graph_nodes, [vi("x", 1, [2])], [vi("y", 1, [2])], functions=funcs,
                      extra_opsets=[("local", 1)])


def family_deep_nesting(ctx, rng, n):
    """If and Loop nested up to 10,000 levels, sequence types 10,000 deep, local-function call
    chains up to 10,000 deep, call trees whose inlining would make 2^64 nodes, recursion."""
    specs = []
    for d in (8, 30, 32, 33, 34, 50, 100, 1000, 10000):
        specs.append((f"If nested {d} deep", lambda d=d: nested_if(d), ["--seed", "1", "--input",
                                                                      "cond=" + str(COND_TRUE)]))
    for d in (8, 30, 33, 100, 10000):
        specs.append((f"Loop nested {d} deep", lambda d=d: nested_loop(d), None))
    for d in (50, 101, 10000):
        specs.append((f"sequence type {d} deep", lambda d=d: nested_sequence_type(d), None))
    for d in (10, 100, 1000, 10000):
        specs.append((f"function chain {d} deep", lambda d=d: serialize(function_chain(d)), None))
    for d in (20, 64):
        specs.append((f"function call tree 2^{d}",
                      lambda d=d: serialize(function_chain(d, 2)), None))
    for kind in ("self", "mutual"):
        specs.append((f"function recursion ({kind})",
                      lambda k=kind: serialize(function_chain(2, recursive=k)), None))
    rng.shuffle(specs)
    for label, build, args in specs[:n]:
        yield Variant("deep_nesting", label, build(), args or ["--seed", "1"], timeout=60.0)


def chain_model(length, op="Relu", reverse=False, wide=False):
    """`length` nodes in a chain (or, `wide`, all reading x, each a graph output... summed by a
    Sum node); `reverse` lists the nodes last first."""
    if wide:
        nodes = [node(op, ["x"], [f"t{i}"]) for i in range(length)]
        nodes.append(node("Sum", [f"t{i}" for i in range(length)], ["y"]))
    else:
        names = ["x"] + [f"t{i}" for i in range(length - 1)] + ["y"]
        nodes = [node(op, [names[i]], [names[i + 1]]) for i in range(length)]
    if reverse:
        nodes.reverse()
    return make_model(nodes, [vi("x", 1, [4])], [vi("y", 1, [4])])


def family_long_chain(ctx, rng, n):
    """50,000-node chains, in order and reversed; 50,000 nodes fanned into one Sum."""
    specs = [("Relu chain 50000", lambda: chain_model(50000)),
             ("Relu chain 50000 listed in reverse", lambda: chain_model(50000, reverse=True)),
             ("50000 Relu into one Sum", lambda: chain_model(50000, wide=True))]
    rng.shuffle(specs)
    for label, build in specs[:n]:
        yield Variant("long_chain", label, serialize(build()), timeout=90.0)


def family_cycles(ctx, rng, n):
    """A node reading its own output, two- and three-node loops, back edges in real graphs,
    a cycle inside an If branch."""
    for i in range(n):
        kind = i % 5
        if kind == 3:
            yield Variant("cycles", "two-node loop a = Add(x, b), b = Relu(a)", serialize(
                make_model([node("Add", ["x", "b"], ["a"]), node("Relu", ["a"], ["b"])],
                           [vi("x", 1, [4])], [vi("a", 1, [4])])))
            continue
        if kind == 4:
            inner = make_model([node("Relu", ["t"], ["t"])], [], [vi("t", 1, [4])]).graph
            yield Variant("cycles", "If then-branch node reading its own output", serialize(
                make_model([node("If", ["c"], ["y"], then_branch=inner, else_branch=inner)],
                           [vi("c", 9, [])], [vi("y", 1, [4])])),
                ["--seed", "1", "--input", f"c={COND_TRUE}"])
            continue
        seed = ctx.pick(rng)
        m = clone(seed)
        nodes = m.graph.node
        a = rng.randrange(len(nodes))
        later = [j for j in range(a, len(nodes)) if nodes[j].output]
        if not later:
            continue
        b = later[-1] if kind == 1 else (a if kind == 0 else rng.choice(later))
        if not nodes[a].input:
            nodes[a].input.append("")
        k = rng.randrange(len(nodes[a].input))
        nodes[a].input[k] = nodes[b].output[0]
        label = (f"node {a} ({nodes[a].op_type}) input {k} <- output of node {b} "
                 f"({nodes[b].op_type})")
        yield variant("cycles", seed, label, m)


def family_duplicate_names(ctx, rng, n):
    """Names defined twice: node outputs, graph inputs/outputs, initializers, a node output
    shadowing a graph input, attributes and opset imports given twice."""
    kinds = ["node_output", "graph_output", "graph_input", "initializer", "shadow_input",
             "attribute", "opset", "empty_output"]
    for i in range(n):
        seed = ctx.pick(rng)
        m = clone(seed)
        g = m.graph
        kind = kinds[i % len(kinds)]
        nd = g.node[rng.randrange(len(g.node))]
        if kind == "node_output" and len(g.node) > 1:
            other = g.node[(list(g.node).index(nd) + 1) % len(g.node)]
            if not (other.output and nd.output):
                continue
            other.output[0] = nd.output[0]
        elif kind == "node_output":
            g.node.append(g.node[0])
        elif kind == "graph_output":
            g.output.append(g.output[rng.randrange(len(g.output))])
        elif kind == "graph_input" and g.input:
            g.input.append(g.input[rng.randrange(len(g.input))])
        elif kind == "initializer":
            found = pick_tensor(m, seed, rng)
            if not found or not g.initializer:
                continue
            t = g.initializer[rng.randrange(len(g.initializer))]
            g.initializer.append(t)
            g.initializer[-1].dims.append(3)
        elif kind == "shadow_input" and g.input and nd.output:
            nd.output[0] = g.input[rng.randrange(len(g.input))].name
        elif kind == "attribute" and nd.attribute:
            nd.attribute.append(nd.attribute[0])
        elif kind == "attribute":
            nd.attribute.extend([onnx_mods()[1].make_attribute("axis", 1)] * 2)
        elif kind == "opset":
            m.opset_import.add(domain="", version=1)
        elif kind == "empty_output" and nd.output:
            nd.output[0] = ""
        else:
            continue
        yield variant("duplicate_names", seed, f"{kind} (node {nd.op_type})", m)


def family_missing_inputs(ctx, rng, n):
    """Names nothing defines: a node input renamed, a graph input or initializer removed, a
    graph output nobody produces, required inputs dropped or extra ones added, empty op_type."""
    kinds = ["rename", "drop_graph_input", "drop_initializer", "output_unproduced",
             "drop_node_inputs", "extra_inputs", "empty_op", "drop_all_nodes"]
    for i in range(n):
        seed = ctx.pick(rng)
        m = clone(seed)
        g = m.graph
        kind = kinds[i % len(kinds)]
        nd = g.node[rng.randrange(len(g.node))]
        if kind == "rename" and nd.input:
            nd.input[rng.randrange(len(nd.input))] = "no_such_value"
        elif kind == "drop_graph_input" and g.input:
            del g.input[rng.randrange(len(g.input))]
        elif kind == "drop_initializer":
            if not pick_tensor(m, seed, rng) or not g.initializer:
                continue
            del g.initializer[rng.randrange(len(g.initializer))]
        elif kind == "output_unproduced":
            g.output[rng.randrange(len(g.output))].name = "never_made"
        elif kind == "drop_node_inputs":
            del nd.input[:]
        elif kind == "extra_inputs":
            nd.input.extend(["x_extra"] * 40)
            g.input.append(vi("x_extra", 1, [1]))
        elif kind == "empty_op":
            nd.op_type = ""
        elif kind == "drop_all_nodes":
            del g.node[:]
        else:
            continue
        yield variant("missing_inputs", seed, f"{kind} (node {nd.op_type})", m)


def huge_attribute_specs():
    """(label, builder, also fed at run time?) of small models whose attributes or constant
    inputs ask for huge (or nonsensical) sizes or indices: Pad, Resize, ConstantOfShape, Tile,
    Expand, Range, Reshape and more. "reduced": the huge value is summed to one number (the CLI
    can size the output, the library meets the value inside); "direct": it is the output."""
    import numpy as np
    specs = []

    def add(label, build, fed=True):
        specs.append((label, build, fed))

    x4 = [vi("x", 1, [1, 1, 2, 2])]
    for p in (2**31, 2**40, 2**62, -(2**40), 2**63 - 1):
        add(f"Pad pads {p}", lambda p=p: reduced(
            [node("Pad", ["x", "pads"], ["big"])], x4,
            [const("pads", [0, 0, 0, p, 0, 0, 0, p])], "big"))
    for mode in ("reflect", "edge", "wrap"):
        add(f"Pad {mode} pads 2^40", lambda m=mode: reduced(
            [node("Pad", ["x", "pads"], ["big"], mode=m)], x4,
            [const("pads", [0, 0, 0, 2**40, 0, 0, 0, 0])], "big", opset=19))
    for s in (1e9, 1e18, float("inf"), float("nan"), -1.0, 0.0, 1e-30):
        add(f"Resize scales {s}", lambda s=s: reduced(
            [node("Resize", ["x", "", "scales"], ["big"], mode="nearest")], x4,
            [const("scales", [1, 1, s, s], 1)], "big"))
    for s in (2**31, 2**40, 2**62, -5, 0):
        add(f"Resize sizes {s}", lambda s=s: reduced(
            [node("Resize", ["x", "", "", "sizes"], ["big"], mode="linear")], x4,
            [const("sizes", [1, 1, s, s])], "big"))
    for dims, _ in WRAPPING + [([2**40], 0), ([2**62], 0), ([-1], 0), ([2**31, 2**31], 0),
                               ([2**30, 3], 0)]:
        add(f"ConstantOfShape {dims}", lambda d=dims: reduced(
            [node("ConstantOfShape", ["shape"], ["big"])], [], [const("shape", d)], "big"))
        add(f"Expand to {dims}", lambda d=dims: reduced(
            [node("Expand", ["x", "shape"], ["big"])], [vi("x", 1, [1])],
            [const("shape", d)], "big"))
        add(f"Tile repeats {dims}", lambda d=dims: reduced(
            [node("Tile", ["x", "reps"], ["big"])], [vi("x", 1, [1] * len(d))],
            [const("reps", d)], "big"))
        add(f"Reshape to {dims}", lambda d=dims: reduced(
            [node("Reshape", ["x", "shape"], ["big"])], [vi("x", 1, [4])],
            [const("shape", d)], "big"))
    for start, limit, delta, elem in ((0, 2**62, 1, 7), (0, 10, 0, 7), (0, 1e18, 1, 1),
                                      (0, 1, 1e-30, 1), (0, 2**40, 1, 7),
                                      (-(2**63), 2**63 - 1, 1, 7), (0, 1, 0.0, 1),
                                      (0, float("inf"), 1, 1), (0, float("nan"), 1, 1)):
        add(f"Range {start}..{limit} step {delta}",
            lambda a=start, b=limit, c=delta, e=elem: reduced(
                [node("Range", ["s", "l", "d"], ["r"]), node("Cast", ["r"], ["big"], to=1)],
                [], [const("s", a, e), const("l", b, e), const("d", c, e)], "big"))
    # The huge value as the graph output itself (onnxGetOutputShapesRUST meets it).
    for label, op, ins, init in (
            ("Pad pads 2^40", "Pad", x4, const("pads", [0, 0, 0, 2**40, 0, 0, 0, 2**40])),
            ("Resize scales 1e9", "Resize", x4, const("scales", [1, 1, 1e9, 1e9], 1)),
            ("ConstantOfShape [2^40]", "ConstantOfShape", [], const("shape", [2**40])),
            ("ConstantOfShape [2^32, 2^32] (wraps to 0)", "ConstantOfShape", [],
             const("shape", [2**32, 2**32])),
            ("Expand to [2^31, 2^31]", "Expand", [vi("x", 1, [1])], const("shape", [2**31, 2**31])),
            ("Tile repeats [2^40]", "Tile", [vi("x", 1, [1])], const("reps", [2**40])),
            ("Reshape to [2^62, 4] (wraps to 0)", "Reshape", [vi("x", 1, [4])],
             const("shape", [2**62, 4]))):
        resize = {"mode": "nearest"} if op == "Resize" else {}
        names = [v.name for v in ins] + (["", init.name] if op == "Resize" else [init.name])
        add(f"{label} (direct)", lambda op=op, ins=ins, init=init, names=names, a=resize: reduced(
            [node(op, names, ["big"], **a)], ins, [init], "big", small_out=False), False)
    for dims in ([2**40, -1], [-1, -1], [0, 2**40], [2**32, 2**32, 0], [3, -2]):
        add(f"Reshape allowzero to {dims}", lambda d=dims: reduced(
            [node("Reshape", ["x", "shape"], ["big"], allowzero=1)], [vi("x", 1, [4])],
            [const("shape", d)], "big"))
    conv_in = [vi("x", 1, [1, 1, 4, 4]), vi("w", 1, [1, 1, 2, 2])]
    for attrs in ({"strides": [0, 0]}, {"dilations": [2**40, 2**40]}, {"pads": [2**40] * 4},
                  {"pads": [-(2**40)] * 4}, {"kernel_shape": [2**40, 2**40]}, {"group": 0},
                  {"group": 2**40}, {"strides": [-1, -1]}, {"dilations": [0, 0]},
                  {"pads": [2**62, 0, 2**62, 0]}):
        add(f"Conv {attrs}", lambda a=attrs: reduced([node("Conv", ["x", "w"], ["big"], **a)],
                                                      conv_in, [], "big"))
        add(f"ConvTranspose {attrs}", lambda a=attrs: reduced(
            [node("ConvTranspose", ["x", "w"], ["big"], **a)], conv_in, [], "big"))
    for op in ("MaxPool", "AveragePool", "LpPool"):
        for attrs in ({"kernel_shape": [0, 0]}, {"kernel_shape": [2, 2], "strides": [0, 0]},
                      {"kernel_shape": [2**40, 2**40]},
                      {"kernel_shape": [2, 2], "pads": [2**40] * 4},
                      {"kernel_shape": [2, 2], "dilations": [2**40, 2**40]},
                      {"kernel_shape": [2, 2], "pads": [-3] * 4}):
            add(f"{op} {attrs}", lambda o=op, a=attrs: reduced(
                [node(o, ["x"], ["big"], **a)], [vi("x", 1, [1, 1, 4, 4])], [], "big"))
    for axis in (2**40, 2**63 - 1, -(2**63), 2, -3):
        for op in ("Softmax", "Concat", "Flatten", "CumSumAxis", "Gather", "Split", "ArgMax",
                   "ReduceSumAxes", "Unsqueeze", "Squeeze", "TopK"):
            add(f"{op} axis {axis}", lambda o=op, a=axis: axis_model(o, a))
    for k in (2**40, 2**62, -1, 0, 2**31):
        add(f"TopK k {k}", lambda k=k: reduced(
            [node("TopK", ["x", "k"], ["big", "idx"])], x23, [const("k", [k])], "big"))
        add(f"OneHot depth {k}", lambda k=k: reduced(
            [node("OneHot", ["i", "depth", "vals"], ["big"])], [],
            [const("i", [0, 1]), const("depth", [k]), const("vals", [0.0, 1.0], 1)], "big"))
        add(f"EyeLike k {k}", lambda k=k: reduced([node("EyeLike", ["x"], ["big"], k=k)],
                                                   x23, [], "big"))
        add(f"Trilu k {k}", lambda k=k: reduced([node("Trilu", ["x", "k"], ["big"])], x23,
                                                 [const("k", k)], "big"))
        add(f"DepthToSpace blocksize {k}", lambda k=k: reduced(
            [node("DepthToSpace", ["x"], ["big"], blocksize=k)], x4, [], "big"))
        add(f"SpaceToDepth blocksize {k}", lambda k=k: reduced(
            [node("SpaceToDepth", ["x"], ["big"], blocksize=k)], x4, [], "big"))
        add(f"LSTM hidden_size {k}", lambda k=k: lstm_model(k))
        add(f"Split num_outputs {k}", lambda k=k: make_model(
            [node("Split", ["x"], ["a", "b"], axis=1, num_outputs=k)], x23,
            [vi("a", 1, None), vi("b", 1, None)], opset=18))
        add(f"NonMaxSuppression max_output {k}", lambda k=k: nms_model(k))
    for starts, ends, steps in (([0], [2**63 - 1], [0]), ([-(2**63)], [2**63 - 1], [1]),
                                ([2**62], [-(2**62)], [-(2**63)]), ([0], [3], [2**63 - 1])):
        add(f"Slice {starts}:{ends}:{steps}", lambda s=starts, e=ends, t=steps: reduced(
            [node("Slice", ["x", "s", "e", "a", "t"], ["big"])], x23,
            [const("s", s), const("e", e), const("a", [1]), const("t", t)], "big"))
    for perm in ([0, 2**40], [1, 1], [-1, 0], [0]):
        add(f"Transpose perm {perm}", lambda p=perm: reduced(
            [node("Transpose", ["x"], ["big"], perm=p)], x23, [], "big"))
    for shape in ([2**40], [2**31, 2**31], [-1]):
        add(f"RandomNormal shape {shape}", lambda s=shape: reduced(
            [node("RandomNormal", [], ["big"], shape=s)], [], [], "big"))
    add("Expand to float[2^28] (1 GiB, within the limit) (direct)", lambda: make_model(
        [node("Expand", ["x", "shape"], ["big"])], [vi("x", 1, [1])], [vi("big", 1, None)],
        [const("shape", [2**28])]), False)
    x23 = [vi("x", 1, [2, 3])]
    for index in (2**40, -(2**63), 2**63 - 1, 3, -4, 2**31):
        add(f"Gather index {index}", lambda i=index: reduced(
            [node("Gather", ["x", "i"], ["big"], axis=1)], x23, [const("i", [0, i])], "big"))
        add(f"GatherElements index {index}", lambda i=index: reduced(
            [node("GatherElements", ["x", "i"], ["big"], axis=1)], x23,
            [const("i", [[0, i, 0], [1, 1, 1]])], "big"))
        add(f"GatherND index {index}", lambda i=index: reduced(
            [node("GatherND", ["x", "i"], ["big"])], x23, [const("i", [[1, i]])], "big"))
        add(f"ScatterElements index {index}", lambda i=index: reduced(
            [node("ScatterElements", ["x", "i", "u"], ["big"], axis=1)], x23,
            [const("i", [[i, 0, 0], [0, 0, 0]]), const("u", [[1.0] * 3] * 2, 1)], "big"))
        add(f"ScatterND index {index}", lambda i=index: reduced(
            [node("ScatterND", ["x", "i", "u"], ["big"])], x23,
            [const("i", [[0, i]]), const("u", [1.0], 1)], "big"))
        add(f"OneHot index {index}", lambda i=index: reduced(
            [node("OneHot", ["i", "depth", "vals"], ["big"])], [],
            [const("i", [0, i]), const("depth", [3]), const("vals", [0.0, 1.0], 1)], "big"))
        add(f"Slice axes [{index}]", lambda i=index: reduced(
            [node("Slice", ["x", "s", "e", "a"], ["big"])], x23,
            [const("s", [0]), const("e", [1]), const("a", [i])], "big"))
    add("Constant value_ints of 2^20 entries", lambda: make_model(
        [node("Constant", [], ["y"], value_ints=list(np.arange(2**20)))], [], [vi("y", 7, None)]))
    add("Constant value tensor dims [2^40] raw 4 B", lambda: make_model(
        [node("Constant", [], ["y"], value=const("v", [1.0], 1, dims=[2**40]))], [],
        [vi("y", 1, None)]))
    return specs + op_edge_specs() + internal_domain_specs()


def op_edge_specs():
    """(label, builder) of operators at the edges of their arithmetic: pads whose begin and
    end cancel out (the size looks fine, the offsets are huge), split sizes summing by
    wrap-around, integer division by zero and MIN / -1, zero group or head counts, block
    sizes whose square wraps to 0, indices and sequence lengths out of range, NaN grids."""
    specs = []

    def add(label, build):
        specs.append((label, build))

    x4 = [vi("x", 1, [1, 1, 2, 2])]
    for p in (2**62, 2**63 - 1, 2**40):
        add(f"Pad pads begin {p} end -{p}", lambda p=p: reduced(
            [node("Pad", ["x", "pads"], ["big"])], x4,
            [const("pads", [0, 0, p, 0, 0, 0, -p, 0])], "big"))
        for op in ("Conv", "MaxPool", "AveragePool", "ConvTranspose"):
            attrs = {"pads": [p, 0, -p, 0]}
            ins = x4 + ([vi("w", 1, [1, 1, 1, 1])] if op.startswith("Conv") else [])
            if not op.startswith("Conv"):
                attrs["kernel_shape"] = [1, 1]
            add(f"{op} pads begin {p} end -{p}", lambda o=op, a=attrs, i=ins: reduced(
                [node(o, [v.name for v in i], ["big"], **a)], i, [], "big"))
    x23 = [vi("x", 1, [2, 3])]
    for split in ([-1, 4], [4, -1], [2**62, 2**62, 2**62, 2**62 + 3], [0, 3],
                  [2**63 - 1, 2**63 - 1, 5]):
        outs = [f"o{i}" for i in range(len(split))]
        add(f"Split sizes {split} of 3", lambda sp=split, outs=outs: make_model(
            [node("Split", ["x", "split"], outs, axis=1)], x23,
            [vi(o, 1, None) for o in outs], [const("split", sp)]))
    for elem, lo in ((7, -(2**63)), (6, -(2**31))):
        for op, a, b in (("Div", [7, lo], [0, -1]), ("Mod", [7, lo], [0, -1]),
                         ("Div", [lo], [-1]), ("Mod", [lo], [-1])):
            for fmod in ((0, 1) if op == "Mod" else (None,)):
                attrs = {} if fmod is None else {"fmod": fmod}
                add(f"{op}{attrs} int{'64' if elem == 7 else '32'} {a} / {b}",
                    lambda op=op, a=a, b=b, e=elem, at=attrs: make_model(
                        [node(op, ["a", "b"], ["y"], **at)], [], [vi("y", e, [len(a)])],
                        [const("a", a, e), const("b", b, e)]))
    for bits in (64, 65, 2**40):
        add(f"BitShift by {bits}", lambda b=bits: make_model(
            [node("Cast", ["a"], ["ua"], to=13), node("Cast", ["b"], ["ub"], to=13),
             node("BitShift", ["ua", "ub"], ["y"], direction="LEFT")], [], [vi("y", 13, [1])],
            [const("a", [1]), const("b", [b])]))
    for groups in (0, 3, 2**40, -1):
        add(f"GroupNormalization num_groups {groups}", lambda g=groups: reduced(
            [node("GroupNormalization", ["x", "sc", "b"], ["big"], num_groups=g)], x4,
            [const("sc", [1.0], 1), const("b", [0.0], 1)], "big", opset=21))
    for size in (0, -1, 2**40, 2**63 - 1):
        add(f"LRN size {size}", lambda n=size: reduced([node("LRN", ["x"], ["big"], size=n)],
                                                        x4, [], "big"))
    for p in (0, 3, 2**40):
        add(f"LpNormalization p {p}", lambda p=p: reduced(
            [node("LpNormalization", ["x"], ["big"], p=p)], x23, [], "big"))
    for heads in (0, 5, 2**40, -2):
        add(f"Attention q_num_heads {heads}", lambda h=heads: reduced(
            [node("Attention", ["q", "k", "v"], ["big"], q_num_heads=h, kv_num_heads=2)],
            [vi("q", 1, [1, 2, 4]), vi("k", 1, [1, 2, 4]), vi("v", 1, [1, 2, 4])], [], "big",
            opset=23))
        add(f"Attention kv_num_heads {heads}", lambda h=heads: reduced(
            [node("Attention", ["q", "k", "v"], ["big"], q_num_heads=2, kv_num_heads=h)],
            [vi("q", 1, [1, 2, 4]), vi("k", 1, [1, 2, 4]), vi("v", 1, [1, 2, 4])], [], "big",
            opset=23))
        add(f"RotaryEmbedding num_heads {heads}", lambda h=heads: reduced(
            [node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["big"], num_heads=h)],
            [vi("x", 1, [1, 2, 4]), vi("cos", 1, [4, 1]), vi("sin", 1, [4, 1])],
            [const("pos", [[0, 1]])], "big", opset=23))
    for dim in (3, 2**40, -2):
        add(f"RotaryEmbedding rotary_embedding_dim {dim}", lambda d=dim: reduced(
            [node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["big"], num_heads=1,
                  rotary_embedding_dim=d)],
            [vi("x", 1, [1, 2, 4]), vi("cos", 1, [4, 1]), vi("sin", 1, [4, 1])],
            [const("pos", [[0, 2**40]])], "big", opset=23))
    for bs in (2**32, 2**31 + 1):
        for op in ("DepthToSpace", "SpaceToDepth"):
            add(f"{op} blocksize {bs} (square wraps)", lambda o=op, b=bs: reduced(
                [node(o, ["x"], ["big"], blocksize=b)], x4, [], "big"))
    for batch in (5, -1, 2**40):
        add(f"RoiAlign batch index {batch}", lambda b=batch: reduced(
            [node("RoiAlign", ["x", "rois", "bi"], ["big"], output_height=2, output_width=2)],
            x4, [const("rois", [[0.0, 0.0, 1.0, 1.0]], 1), const("bi", [b])], "big"))
    for attrs in ({"output_height": 2**40}, {"sampling_ratio": 2**40}, {"spatial_scale": 1e30},
                  {"spatial_scale": float("nan")}, {"output_width": 0}):
        add(f"RoiAlign {attrs}", lambda a=attrs: reduced(
            [node("RoiAlign", ["x", "rois", "bi"], ["big"], **a)],
            x4, [const("rois", [[0.0, 0.0, 1.0, 1.0]], 1), const("bi", [0])], "big"))
    for index in (2**40, -1, 4, 2**63 - 1):
        add(f"MaxUnpool index {index}", lambda i=index: reduced(
            [node("MaxUnpool", ["x", "i"], ["big"], kernel_shape=[2, 2], strides=[2, 2])],
            x4, [const("i", [[[[0, 1], [2, i]]]])], "big"))
    for shape in ([1, 1, 2**40, 2**40], [1, 1, 1, 1], [-1, -1, -1, -1]):
        add(f"MaxUnpool output_shape {shape}", lambda sh=shape: reduced(
            [node("MaxUnpool", ["x", "i", "s"], ["big"], kernel_shape=[2, 2], strides=[2, 2])],
            x4, [const("i", [[[[0, 1], [2, 3]]]]), const("s", sh)], "big"))
    for g in (float("nan"), float("inf"), 1e30, -1e30):
        for mode in ("linear", "nearest", "cubic"):
            add(f"GridSample grid {g} {mode}", lambda g=g, m=mode: reduced(
                [node("GridSample", ["x", "grid"], ["big"], mode=m, padding_mode="border")],
                x4, [const("grid", [[[[g, 0.0], [0.0, g]]]], 1)], "big", opset=20))
    for lens in (2**30, -1, 3, 2**31 - 1):
        for op in ("LSTM", "GRU", "RNN"):
            gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
            add(f"{op} sequence_lens {lens} of 2", lambda o=op, n=gates, ln=lens: make_model(
                [node(o, ["x", "w", "r", "", "lens"], ["y"], hidden_size=1)],
                [vi("x", 1, [2, 1, 1])], [vi("y", 1, None)],
                [const("w", [0.5] * n, 1, [1, n, 1]), const("r", [0.5] * n, 1, [1, n, 1]),
                 const("lens", [ln], 6)]))
    for cond in ([1] * 8, [1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]):
        add(f"Compress condition of {len(cond)} on a dim of 3", lambda c=cond: reduced(
            [node("Compress", ["x", "c"], ["big"], axis=1)], x23, [const("c", c, 9)], "big"))
    for start, end in ((2**62, -(2**62)), (-(2**63), 2**63 - 1), (5, 1)):
        add(f"Shape start {start} end {end}", lambda a=start, b=end: make_model(
            [node("Shape", ["x"], ["y"], start=a, end=b)], x23, [vi("y", 7, None)]))
    for bd in (2**40, -1, 2):
        add(f"GatherND batch_dims {bd}", lambda b=bd: reduced(
            [node("GatherND", ["x", "i"], ["big"], batch_dims=b)], x23,
            [const("i", [[0], [1]])], "big"))
    for shape in ([2**40, 2**40], [0, 0], [-5, -5]):
        add(f"ConvTranspose output_shape {shape}", lambda sh=shape: reduced(
            [node("ConvTranspose", ["x", "w"], ["big"], output_shape=sh)],
            x4 + [vi("w", 1, [1, 1, 1, 1])], [], "big"))
    for op_pad in ([2**40, 2**40], [5, 5], [-3, -3]):
        add(f"ConvTranspose output_padding {op_pad}", lambda p=op_pad: reduced(
            [node("ConvTranspose", ["x", "w"], ["big"], output_padding=p, strides=[2, 2])],
            x4 + [vi("w", 1, [1, 1, 1, 1])], [], "big"))
    for eq in ("ii->i", "ij->jj", "i,j->", "...ij,...jk->...ik", "abcdefghijklmnopqrstuvwxyz->",
               "ij->" + "i" * 100, "", "->", "i,i,i,i,i,i,i,i,i,i,i,i->", "é->é"):
        add(f"Einsum {eq!r}", lambda e=eq: reduced(
            [node("Einsum", ["x", "x"] if "," in e and e.count(",") == 1 else ["x"], ["big"],
                  equation=e)], x23, [], "big"))
    for s in (1e9, float("nan"), 0.0):
        add(f"Upsample scales {s}", lambda s=s: reduced(
            [node("Upsample", ["x", "scales"], ["big"])], x4,
            [const("scales", [1, 1, s, s], 1)], "big", opset=9))
    for roi in ([0, 0, -1e30, -1e30, 1, 1, 1e30, 1e30], [0, 0, float("nan"), 0, 1, 1, 1, 1]):
        add(f"Resize tf_crop_and_resize roi {roi[2]}", lambda r=roi: reduced(
            [node("Resize", ["x", "roi", "", "sizes"], ["big"], mode="linear",
                  coordinate_transformation_mode="tf_crop_and_resize")],
            x4, [const("roi", r, 1), const("sizes", [1, 1, 3, 3])], "big"))
    for axes in (2**40, -(2**63)):
        add(f"Scan scan_input_axes [{axes}]", lambda a=axes: scan_model(a))
    return specs


def scan_model(axis):
    """A Scan over x: float[2, 3] along `axis` whose body passes each slice through."""
    body = make_model([node("Identity", ["s"], ["o"])], [vi("s", 1, [3])],
                      [vi("o", 1, [3])]).graph
    return reduced([node("Scan", ["x"], ["big"], body=body, num_scan_inputs=1,
                         scan_input_axes=[axis])], [vi("x", 1, [2, 3])], [], "big")


def internal_domain_specs():
    """(label, builder) of models calling this backend's internal fused operators (domain
    onnxifi.rust) directly, with inconsistent shapes and activation parameters."""
    specs = []
    internal = [("onnxifi.rust", 1)]

    def add(label, build):
        specs.append((label, build))

    def model(op, ins, inits, **attrs):
        nodes = [node(op, [v.name for v in ins] + [t.name for t in inits], ["big"],
                      domain="onnxifi.rust", **attrs),
                 node("ReduceSum", ["big"], ["sum"], keepdims=0),
                 node("Reshape", ["sum", "keep_one"], ["out"])]
        return make_model(nodes, ins, [vi("out", 1, [1])],
                          list(inits) + [const("keep_one", [1])], extra_opsets=internal)

    for act, params in (("Clip", [float("nan"), float("-inf")]), ("Clip", []), ("Nope", []),
                        ("Relu", [1.0, 2.0, 3.0]), ("Gelu", [])):
        at = {"activation": act}
        if params:
            at["activation_params"] = params
        add(f"onnxifi.rust::Activation {act} {params}", lambda a=at: model(
            "Activation", [vi("x", 1, [2, 3])], [], **a))
        add(f"onnxifi.rust::FusedMatMul {act} [2,3]x[4,5]", lambda a=at: model(
            "FusedMatMul", [vi("x", 1, [2, 3])], [const("w", [0.5] * 20, 1, [4, 5])], **a))
        add(f"onnxifi.rust::FusedGemm {act} transB", lambda a=at: model(
            "FusedGemm", [vi("x", 1, [2, 3])], [const("w", [0.5] * 20, 1, [4, 5])],
            transB=1, **a))
        add(f"onnxifi.rust::FusedConv {act} 3-channel weights", lambda a=at: model(
            "FusedConv", [vi("x", 1, [1, 1, 4, 4])], [const("w", [0.5] * 12, 1, [1, 3, 2, 2])],
            **a))
        add(f"onnxifi.rust::ConvDepthwise {act}", lambda a=at: model(
            "ConvDepthwise", [vi("x", 1, [1, 2, 4, 4])],
            [const("w1", [0.5] * 6, 1, [3, 2, 1, 1]), const("b1", [0.1] * 3, 1, [3]),
             const("w2", [0.5] * 27, 1, [3, 1, 3, 3]), const("b2", [0.1] * 3, 1, [3])],
            group=3, pads=[1, 1, 1, 1], pointwise_activation=a["activation"], **a))
    add("onnxifi.rust::ConvDepthwise group not the channels", lambda: model(
        "ConvDepthwise", [vi("x", 1, [1, 2, 4, 4])],
        [const("w1", [0.5] * 6, 1, [3, 2, 1, 1]), const("b1", [0.1] * 3, 1, [3]),
         const("w2", [0.5] * 27, 1, [3, 1, 3, 3])], group=2))
    add("onnxifi.rust::ConvDepthwise dense second weights", lambda: model(
        "ConvDepthwise", [vi("x", 1, [1, 2, 4, 4])],
        [const("w1", [0.5] * 6, 1, [3, 2, 1, 1]), const("b1", [0.1] * 3, 1, [3]),
         const("w2", [0.5] * 81, 1, [3, 3, 3, 3])], group=3))
    # A small output over an intermediate of 2^16 channels at 1024² (256 GiB): refused while
    # planning, not allocated.
    add("onnxifi.rust::ConvDepthwise 256 GiB intermediate", lambda: model(
        "ConvDepthwise", [vi("x", 1, [1, 1, 1024, 1024])],
        [const("w1", [0.5] * 65536, 1, [65536, 1, 1, 1]), const("b1", [0.0] * 65536, 1, [65536]),
         const("w2", [0.5] * 65536, 1, [65536, 1, 1, 1])], group=65536,
        strides=[1024, 1024]))
    add("onnxifi.rust::ConvDepthwise without weights", lambda: model(
        "ConvDepthwise", [vi("x", 1, [1, 2, 4, 4])], []))
    add("onnxifi.rust::FusedConv without weights", lambda: model(
        "FusedConv", [vi("x", 1, [1, 1, 4, 4])], []))
    add("onnxifi.rust::FusedMatMul one input", lambda: model(
        "FusedMatMul", [vi("x", 1, [2, 3])], []))
    return specs


def axis_model(op, axis):
    """`op` on x: float[2, 3] with an out-of-range axis (attribute or input as the op wants)."""
    x23 = [vi("x", 1, [2, 3])]
    if op == "CumSumAxis":
        return reduced([node("CumSum", ["x", "a"], ["big"])], x23, [const("a", axis)], "big")
    if op == "ReduceSumAxes":
        return reduced([node("ReduceSum", ["x", "a"], ["big"])], x23, [const("a", [axis])], "big")
    if op in ("Unsqueeze", "Squeeze"):
        return reduced([node(op, ["x", "a"], ["big"])], x23, [const("a", [axis])], "big")
    if op == "Gather":
        return reduced([node("Gather", ["x", "i"], ["big"], axis=axis)], x23,
                       [const("i", [0])], "big")
    if op == "Split":
        return make_model([node("Split", ["x"], ["a", "b"], axis=axis)], x23,
                          [vi("a", 1, None), vi("b", 1, None)])
    if op == "TopK":
        return reduced([node("TopK", ["x", "k"], ["big", "i"], axis=axis)], x23,
                       [const("k", [1])], "big")
    if op == "Concat":
        return reduced([node("Concat", ["x", "x"], ["big"], axis=axis)], x23, [], "big")
    if op == "ArgMax":
        return make_model([node("ArgMax", ["x"], ["y"], axis=axis)], x23, [vi("y", 7, None)])
    return reduced([node(op, ["x"], ["big"], axis=axis)], x23, [], "big")


def lstm_model(hidden):
    """An LSTM with hidden_size `hidden` but 1-element weights."""
    return make_model([node("LSTM", ["x", "w", "r"], ["y"], hidden_size=hidden)],
                      [vi("x", 1, [1, 1, 1])],
                      [vi("y", 1, None)],
                      [const("w", [0.5] * 4, 1, [1, 4, 1]), const("r", [0.5] * 4, 1, [1, 4, 1])])


def nms_model(max_out):
    """NonMaxSuppression asking for `max_out` boxes of two."""
    return make_model(
        [node("NonMaxSuppression", ["boxes", "scores", "m"], ["sel"])], [],
        [vi("sel", 7, None)],
        [const("boxes", [0, 0, 1, 1, 0, 0, 1, 1], 1, [1, 2, 4]),
         const("scores", [0.9, 0.8], 1, [1, 1, 2]), const("m", [max_out])])


def fed_at_run_time(model):
    """Moves a template model's initializers into graph inputs that the run stage feeds from
    files, so that onnxInitGraph cannot see their values and the run meets them; returns the
    (name, TensorProto bytes) to feed, or [] when the model has no initializer."""
    g = model.graph
    feeds = []
    kept = []
    for t in g.initializer:
        if t.name.startswith("keep_"):
            kept.append(t)
            continue
        g.input.append(vi(t.name, t.data_type, list(t.dims)))
        feeds.append((t.name, t.SerializeToString()))
    del g.initializer[:]
    g.initializer.extend(kept)
    return feeds


@functools.lru_cache(maxsize=None)
def template_items(specs_name):
    """Every (label, model bytes, inputs to feed) of a template list: each model as built
    (constants visible at init) and, when it has constants, fed at run time."""
    items = []
    for label, build, *fed in globals()[specs_name]():
        items.append((f"{label} [constants at init]", serialize(build()), []))
        if fed and not fed[0]:
            continue
        model = build()
        feeds = fed_at_run_time(model)
        if feeds:
            items.append((f"{label} [fed at run time]", serialize(model), feeds))
    return items


def family_templates(family, specs_name, rng, n, timeout):
    """n variants of a template list, in a shuffled order."""
    items = list(template_items(specs_name))
    rng.shuffle(items)
    for label, data, inputs in items[:n]:
        yield Variant(family, label, data, timeout=timeout, inputs=inputs)


def family_huge_attributes(ctx, rng, n):
    """Attributes and constant inputs asking for huge or nonsensical sizes (templates)."""
    yield from family_templates("huge_attributes", "huge_attribute_specs", rng, n, 20.0)


EXTERNAL_LOCATIONS = ["/etc/passwd", "/dev/zero", "/dev/urandom", "../../../../../etc/passwd",
                      "../../.ssh/id_rsa", "/proc/self/mem", "/", "", "no_such_file.bin",
                      "a" * 5000, "weights.bin\x00/etc/passwd", "C:\\Windows\\win.ini"]


def family_external_data(ctx, rng, n):
    """Tensors whose data lives "outside": /etc/passwd, /dev/zero, ../ paths, huge offsets and
    lengths, with and without raw_data."""
    _, helper, _ = onnx_mods()
    for i in range(n):
        seed = ctx.pick(rng)
        m = clone(seed)
        found = pick_tensor(m, seed, rng)
        if not found:
            continue
        where, t = found
        location = EXTERNAL_LOCATIONS[i % len(EXTERNAL_LOCATIONS)]
        entries = {"location": location}
        if rng.random() < 0.5:
            entries["offset"] = str(rng.choice([0, 2**62, -1, 4096]))
            entries["length"] = str(rng.choice([4, 2**62, -8, 2**40]))
        if rng.random() < 0.5:
            t.ClearField("raw_data")
            del t.float_data[:], t.int64_data[:], t.int32_data[:]
        t.data_location = 1
        del t.external_data[:]
        for key, value in entries.items():
            t.external_data.add(key=key, value=value)
        yield variant("external_data", seed, f"{where} external {entries}", m)


def family_opset_domain(ctx, rng, n):
    """Unknown opset versions and domains, missing opset imports, odd IR versions, unknown
    operators."""
    kinds = ["opset_0", "opset_neg", "opset_huge", "opset_999", "no_opset", "domain_unknown",
             "node_domain", "op_unknown", "ir_0", "ir_huge", "ir_neg", "opset_1", "long_domain"]
    for i in range(n):
        seed = ctx.pick(rng)
        m = clone(seed)
        kind = kinds[i % len(kinds)]
        nd = m.graph.node[rng.randrange(len(m.graph.node))]
        default = [o for o in m.opset_import if o.domain in ("", "ai.onnx")]
        if kind.startswith("opset_") and default:
            default[0].version = {"opset_0": 0, "opset_neg": -5, "opset_huge": 2**62,
                                  "opset_999": 999, "opset_1": 1}[kind]
        elif kind == "no_opset":
            del m.opset_import[:]
        elif kind == "domain_unknown":
            for o in m.opset_import:
                o.domain = "com.example.nowhere"
        elif kind == "node_domain":
            nd.domain = rng.choice(["ai.onnx.ml", "com.microsoft", "ai.onnx.preview.training",
                                    "org.pytorch.aten"])
        elif kind == "op_unknown":
            nd.op_type = rng.choice(["NoSuchOp", "add", "Add ", "If\x00", "\u00e9"])
        elif kind == "ir_0":
            m.ir_version = 0
        elif kind == "ir_huge":
            m.ir_version = 2**62
        elif kind == "ir_neg":
            m.ir_version = -1
        elif kind == "long_domain":
            nd.domain = "d" * 100000
            m.opset_import.add(domain=nd.domain, version=1)
        else:
            continue
        yield variant("opset_domain", seed, f"{kind} (node {nd.op_type})", m)


def empty_specs():
    """(label, bytes) of empty and near-empty models and bare protobuf oddities."""
    _, helper, _ = onnx_mods()
    empty_graph = make_model([], [], [])
    passthrough = make_model([], [vi("x", 1, [2])], [vi("x", 1, [2])])
    no_outputs = make_model([node("Relu", ["x"], ["y"])], [vi("x", 1, [2])], [])
    no_shape = make_model([node("Relu", ["x"], ["y"])], [vi("x", 1, None)], [vi("y", 1, None)])
    return [
        ("zero bytes", b""),
        ("one zero byte", b"\x00"),
        ("ir_version only", pb_int(1, 8)),
        ("graph field empty", pb_int(1, 8) + pb_bytes(7, b"")),
        ("length prefix claims 2^62 bytes", b"\x3a" + varint(2**62) + b"\x00" * 16),
        ("length prefix claims 2^31 bytes", b"\x3a" + varint(2**31) + b"\x00" * 16),
        ("varint of 11 bytes", b"\x08" + b"\xff" * 10 + b"\x01"),
        ("unterminated varint", b"\x08" + b"\xff" * 9),
        ("group wire type", b"\x0b\x0c"),
        ("field 0", b"\x00\x01"),
        ("1 MiB of 0xff", b"\xff" * (1 << 20)),
        ("1 MiB of zeros", b"\x00" * (1 << 20)),
        ("ONNX text where binary is expected",
         b"<ir_version: 8>\nagraph (float[N] x) => (y) {\n y = Relu(x)\n}\n"),
        ("graph without nodes", serialize(empty_graph)),
        ("graph passing its input through", serialize(passthrough)),
        ("graph without outputs", serialize(no_outputs)),
        ("input without shape", serialize(no_shape)),
        ("1000 empty graphs repeated", (pb_bytes(7, b"") * 1000)),
        ("unknown fields 10000", b"".join(pb_int(1000 + i, i) for i in range(10000))),
        ("sparse_initializer without values",
         pb_model_prefix() + pb_bytes(7, pb_bytes(15, pb_bytes(2, b""))
                                      + pb_bytes(12, pb_value_info("y")))),
    ]


def family_empty_model(ctx, rng, n):
    """Empty files, models without graph/nodes/outputs, malformed protobuf framing."""
    specs = empty_specs()
    for label, data in specs[:n]:
        yield Variant("empty_model", label, data)


def resource_bomb_specs():
    """(label, builder) of small models whose intermediate values explode: repeated Concat
    doubling, MatMul over a huge broadcast batch, broadcasting Add/Where, Einsum outer
    products, Tile towers."""
    specs = []

    def add(label, build):
        specs.append((label, build))

    for levels in (20, 31, 40, 64):
        add(f"Concat doubling x{levels} from float[1024]", lambda k=levels: reduced(
            [node("Concat", [f"d{i}", f"d{i}"], [f"d{i + 1}"], axis=0) for i in range(k)],
            [vi("d0", 1, [1024])], [], f"d{k}"))
        add(f"Tile doubling x{levels}", lambda k=levels: reduced(
            [node("Tile", [f"d{i}", "two"], [f"d{i + 1}"]) for i in range(k)],
            [vi("d0", 1, [16])], [const("two", [2])], f"d{k}"))
        add(f"Mul self-broadcast tower x{levels}", lambda k=levels: reduced(
            [node("Unsqueeze", [f"d{i}", "ax"], [f"u{i}"]) for i in range(k)]
            + [node("Add", [f"u{i}", f"d{i}"], [f"d{i + 1}"]) for i in range(k)],
            [vi("d0", 1, [4])], [const("ax", [-1])], f"d{k}"))
    for batch in ([2**40, 2, 4, 3], [2**20, 2**20, 4, 3], [2**31, 4, 3], [2**62, 4, 3],
                  [2**28, 4, 3], [2**33, 1, 4, 3]):
        add(f"MatMul a: Expand to {batch}", lambda b=batch: reduced(
            [node("Expand", ["a0", "shape"], ["a"]), node("MatMul", ["a", "b"], ["big"])],
            [vi("a0", 1, [4, 3]), vi("b", 1, [3, 5])], [const("shape", b)], "big"))
    for n in (2**20, 2**24, 2**31):
        add(f"Add broadcast [{n},1] + [1,{n}]", lambda n=n: reduced(
            [node("Expand", ["x", "s1"], ["a"]), node("Expand", ["x", "s2"], ["b"]),
             node("Add", ["a", "b"], ["big"])],
            [vi("x", 1, [1, 1])], [const("s1", [n, 1]), const("s2", [1, n])], "big"))
        add(f"Where broadcast [{n},1,1] x [1,{n},1] x [1,1,{n}]", lambda n=n: reduced(
            [node("Expand", ["c0", "s1"], ["c"]), node("Expand", ["x", "s2"], ["a"]),
             node("Expand", ["x", "s3"], ["b"]), node("Where", ["c", "a", "b"], ["big"])],
            [vi("x", 1, [1, 1, 1]), vi("c0", 9, [1, 1, 1])],
            [const("s1", [n, 1, 1]), const("s2", [1, n, 1]), const("s3", [1, 1, n])], "big"))
        add(f"Einsum outer product i,j,k of {n}", lambda n=n: reduced(
            [node("Expand", ["x", "s"], ["v"]), node("Einsum", ["v", "v", "v"], ["big"],
                                                     equation="i,j,k->ijk")],
            [vi("x", 1, [1])], [const("s", [n])], "big"))
        add(f"Shape-driven ConstantOfShape [{n}]*3", lambda n=n: reduced(
            [node("Shape", ["x"], ["s"]), node("Mul", ["s", "n"], ["s2"]),
             node("ConstantOfShape", ["s2"], ["big"])],
            [vi("x", 1, [1, 1, 1])], [const("n", [n])], "big"))
        add(f"Gemm with Expand to [{n}, {n}]", lambda n=n: reduced(
            [node("Expand", ["x", "s"], ["a"]), node("Gemm", ["a", "a"], ["big"])],
            [vi("x", 1, [1, 1])], [const("s", [n, n])], "big"))
        add(f"Conv over Pad to {n}", lambda n=n: reduced(
            [node("Pad", ["x", "pads"], ["p"]), node("Conv", ["p", "w"], ["big"])],
            [vi("x", 1, [1, 1, 2, 2]), vi("w", 1, [1, 1, 1, 1])],
            [const("pads", [0, 0, 0, 0, 0, 0, n, n])], "big"))
        add(f"NonZero of ones[{n}, {n}]", lambda n=n: make_model(
            [node("ConstantOfShape", ["s"], ["ones"], value=const("v", [1.0], 1, [1])),
             node("NonZero", ["ones"], ["nz"]), node("ReduceSum", ["nz"], ["out"], keepdims=0)],
            [], [vi("out", 7, None)], [const("s", [n, n])]))
        add(f"CumSum over Expand [{n}]", lambda n=n: reduced(
            [node("Expand", ["x", "s"], ["v"]), node("CumSum", ["v", "ax"], ["big"])],
            [vi("x", 1, [1])], [const("s", [n]), const("ax", 0)], "big"))
    add("Loop with 2^31 scan outputs of float[1024]", lambda: loop_scan_model(2**31))
    # Pads far wider than the input with a large stride: a small output over a huge padded
    # plane (a materialised padded copy of it would not fit in memory), plain and depthwise;
    # with stride 1 along one axis the output itself is huge.
    for pad in (10**6, 10**9):
        for strides in ([pad, pad], [pad, 1]):
            for group in (1, 4):
                add(f"Conv group {group} pads {pad} strides {strides}",
                    lambda p=pad, s=strides, g=group: reduced(
                        [node("Conv", ["x", "w"], ["big"], pads=[p, p, p, p], strides=s,
                              group=g)],
                        [vi("x", 1, [1, 4, 3, 6]), vi("w", 1, [4, 4 // g, 3, 3])], [], "big"))
    return specs


COND_TRUE = None  # set by main(): a .pb file holding a bool scalar `true`
MEM_KIB = 4 << 20  # set by main(): the children's RLIMIT_AS in KiB (for reproducing commands)


def loop_scan_model(trips):
    """A Loop running `trips` times whose body emits a float[1024] scan output each time (the
    stacked output grows to trips x 1024)."""
    body = make_model([node("Identity", ["c"], ["co"]), node("Expand", ["one", "s"], ["v"])],
                      [vi("i", 7, []), vi("c", 9, [])], [vi("co", 9, []), vi("v", 1, [1024])],
                      [const("one", [1.0], 1, [1]), const("s", [1024])]).graph
    return reduced([node("Loop", ["M", ""], ["big"], body=body)], [], [const("M", trips)], "big")


def family_resource_bomb(ctx, rng, n):
    """Small models whose intermediate values explode (templates)."""
    yield from family_templates("resource_bomb", "resource_bomb_specs", rng, n, 30.0)


# Families in run order: (name, function, weight for the share of --count, fixed list size
# (None: as many as asked)).
FAMILIES = [
    ("truncate", family_truncate, 9, None),
    ("byte_flip", family_byte_flip, 18, None),
    ("huge_dims", family_huge_dims, 11, None),
    ("shape_overflow", family_shape_overflow, 5, None),
    ("raw_data_mismatch", family_raw_data_mismatch, 7, None),
    ("wrong_dtype", family_wrong_dtype, 7, None),
    ("deep_nesting", family_deep_nesting, 0, 25),
    ("long_chain", family_long_chain, 0, 3),
    ("cycles", family_cycles, 5, None),
    ("duplicate_names", family_duplicate_names, 5, None),
    ("missing_inputs", family_missing_inputs, 5, None),
    ("huge_attributes", family_huge_attributes, 40, "huge_attribute_specs"),
    ("external_data", family_external_data, 3, None),
    ("opset_domain", family_opset_domain, 5, None),
    ("empty_model", family_empty_model, 0, 20),
    ("resource_bomb", family_resource_bomb, 6, "resource_bomb_specs"),
]


def quotas(count, only):
    """How many variants each family makes: fixed families their whole (small) list, template
    families at most their list, the rest shared by weight so the total is `count`."""
    chosen = [f for f in FAMILIES if not only or f[0] in only]
    out = {}
    for name, _, weight, size in chosen:
        if isinstance(size, int):
            out[name] = size
    left = max(0, count - sum(out.values()))
    weights = {name: w for name, _, w, _ in chosen if name not in out}
    total = sum(weights.values()) or 1
    for name, _, _, size in chosen:
        if name in out:
            continue
        want = round(left * weights[name] / total)
        if isinstance(size, str):
            want = min(want, len(template_items(size)))
        out[name] = want
    short = count - sum(out.values())
    if short > 0:
        flexible = [name for name, _, _, size in chosen if size is None] or [chosen[0][0]]
        for i in range(short):
            out[flexible[i % len(flexible)]] += 1
    return out


def generate(ctx, count, seed, only):
    """Every variant, family by family, each family from its own random stream."""
    import random
    wanted = quotas(count, only)
    for name, fn, _, size in FAMILIES:
        n = wanted.get(name, 0)
        rng = random.Random(f"{seed}/{name}")
        made = 0
        # Mutation families skip edits a seed cannot take: they get more passes to make up.
        for _ in range(4 if size is None else 1):
            if made >= n:
                break
            for v in fn(ctx, rng, n - made):
                made += 1
                yield v
                if made >= n:
                    break


# ------------------------------------------------------------------------------- seeds

def load_seeds(rng, node_count, jobs):
    """The seed models: node tests that run unmodified (up to `node_count`, in a shuffled
    order), every model family, the wheel models up to 5 MB."""
    onnx, _, _ = onnx_mods()
    seeds = []
    for kind, pattern, limit in (("family", "families/*/model.onnx", None),
                                 ("real", "real/cases/*/model.onnx", 5 << 20)):
        for path in sorted(TESTDATA.glob(pattern)):
            if limit and path.stat().st_size > limit:
                continue
            seeds.append(make_seed(onnx, path, path.parent, kind))
    node_dirs = sorted(p.parent for p in TESTDATA.glob("node/*/model.onnx"))
    rng.shuffle(node_dirs)
    candidates = [make_seed(onnx, d / "model.onnx", d / "test_data_set_0", "node")
                  for d in node_dirs[: node_count * 2]]
    with ThreadPoolExecutor(jobs) as pool:
        ok = list(pool.map(seed_runs, candidates))
    seeds += [s for s, good in zip(candidates, ok) if good][:node_count]
    return seeds


def make_seed(onnx, path, data_dir, kind):
    """A Seed: the model and its test-data inputs by name (input_K.pb feeds the K-th input a
    caller binds)."""
    data = path.read_bytes()
    model = onnx.ModelProto()
    model.ParseFromString(data)
    feeds = {}
    for k, v in enumerate(graph_inputs(model.graph)):
        f = data_dir / f"input_{k}.pb"
        if f.is_file():
            feeds[v.name] = str(f)
    name = f"{kind}/{path.parent.name}"
    return Seed(name, model, data, feeds, kind)


def seed_runs(seed):
    """Whether the unmodified seed runs through the CLI (with its test-data inputs)."""
    proc = subprocess.run([str(CLI), "run", "-", "--repeat", "1"] + feed_args(seed.model, seed),
                          input=seed.data, capture_output=True, env=child_env(), timeout=60)
    return proc.returncode == 0


# ------------------------------------------------------------------------------- running

def child_env():
    """The environment of every child: one compute thread, backtraces on."""
    env = dict(os.environ)
    env.update(ONNXIFI_RUST_NUM_THREADS="1", RUST_BACKTRACE="1", ONNXIFI_RUST_LIB=str(LIB))
    return env


def limiter(mem_bytes):
    """A preexec_fn capping the child's address space (blow-ups become allocation failures)
    and forbidding core dumps."""
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def needs_probe(run):
    """Whether the probe can reach more than the run stage did: not when the run stage got to
    onnxInitGraph, nor when the bytes do not decode (the CLI and onnxInitGraph decode with the
    same function, and `check` decodes them too)."""
    return "model:" not in run.stdout and "not a valid ModelProto" not in run.stderr


def write_inputs(v, index, out_dir):
    """Writes the tensors a variant feeds to OUT/inputs (kept: failing commands name them);
    returns the run stage's --input options."""
    args = []
    for k, (name, data) in enumerate(v.inputs):
        f = out_dir / "inputs" / f"{index:05d}-{k}.pb"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(data)
        args += ["--input", f"{name}={f}"]
    return args


def stage_commands(path, v, feeds):
    """The children of a variant: (stage, argv). The probe runs only when it can reach more
    than the run stage did (see needs_probe)."""
    run_args = v.run_args or []
    return [("run", [str(CLI), "run", str(path), "--repeat", "1"] + run_args + feeds),
            ("check", [str(CLI), "check", str(path)]),
            ("probe", [sys.executable, "-S", str(Path(__file__).resolve()), "--probe", str(path)])]


@dataclass
class StageResult:
    """What one child did."""
    stage: str
    verdict: str  # ok | refused | cli | internal | crash | hang
    detail: str
    stdout: str = ""
    stderr: str = ""
    argv: list = field(default_factory=list)
    seconds: float = 0.0


STATUS_RE = re.compile(r"(onnx\w+|the run) failed: ([A-Z_]+)")
PROBE_RE = re.compile(r"^(compat|init|backend) ([A-Z_0-9x]+):", re.M)


def run_stage(stage, argv, timeout, mem_bytes):
    """Runs one child under the limits and classifies what it did."""
    start = time.monotonic()
    result = run_child(stage, argv, timeout, mem_bytes)
    result.seconds = time.monotonic() - start
    return result


def run_child(stage, argv, timeout, mem_bytes):
    """One child's StageResult (its time not yet set)."""
    try:
        proc = subprocess.run(argv, capture_output=True, timeout=timeout, env=child_env(),
                              preexec_fn=limiter(mem_bytes), cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace")
        err = (e.stderr or b"").decode("utf-8", "replace")
        where = ("in the library (onnxInitGraph or later)" if "model:" in out else
                 "before onnxInitGraph" if stage == "run" else f"in {stage}")
        return StageResult(stage, "hang", f"no exit after {timeout:.0f} s {where}", out, err,
                           argv)
    out = proc.stdout.decode("utf-8", "replace")
    err = proc.stderr.decode("utf-8", "replace")
    return StageResult(stage, *classify(stage, proc.returncode, out, err), out, err, argv)


def classify(stage, rc, out, err):
    """(verdict, detail) of a finished child."""
    if rc < 0:
        return "crash", f"killed by {signal.Signals(-rc).name}: {crash_signature(err)}"
    if rc not in (0, 1, 2) or "memory allocation of" in err or "overflowed its stack" in err:
        return "crash", f"exit {rc}: {crash_signature(err)}"
    if "panicked at" in err or "INTERNAL_ERROR" in err + out:
        return "internal", crash_signature(err) or "INTERNAL_ERROR"
    if stage == "probe" and "Traceback" in err:
        return "cli", "probe: " + cli_reason(err)
    if stage == "probe":
        statuses = dict(PROBE_RE.findall(out))
        init = statuses.get("init", statuses.get("backend", "?"))
        return ("ok" if init == "SUCCESS" else "refused"), f"init {init}"
    if stage == "check":
        return "ok", "valid" if rc == 0 else "invalid"
    if rc == 0:
        return "ok", "ran"
    m = STATUS_RE.search(err)
    if m:
        return "refused", f"{m.group(1)} {m.group(2)}"
    return "cli", cli_reason(err)


def cli_reason(err):
    """A short, number-free reason for a refusal by onnxifi-run itself."""
    line = err.strip().splitlines()[-1] if err.strip() else "no message"
    line = re.sub(r"'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\S*/\S*|\d+", "_", line)
    return line[:90]


def crash_signature(err):
    """What identifies a crash: the panic location and message, the allocation failure or the
    stack overflow line, with the first frame of this project's code in the backtrace."""
    what = None
    for pattern in (r"panicked at ([^\n]+)\n([^\n]*)", r"(memory allocation of) \d+ (bytes failed)",
                    r"(thread '[^']*' has overflowed its stack)", r"(fatal runtime error[^\n]*)"):
        m = re.search(pattern, err)
        if m:
            what = " ".join(g.strip() for g in m.groups())
            break
    if what is None:
        lines = err.strip().splitlines()
        what = lines[-1] if lines else "(no stderr)"
    frame = re.search(r"^\s*\d+: (<?(?:onnxifi_rust|onnxifi_run)::[^\n]*)", err, re.M)
    if frame:
        what += f" in {frame.group(1).strip()}"
    return what[:300]


@dataclass
class Outcome:
    """A variant's verdict: its worst stage, each stage's result, where its model is."""
    variant: Variant
    path: Path
    stages: list

    @property
    def verdict(self):
        order = ["crash", "hang", "internal", "refused", "cli", "ok"]
        return min((s.verdict for s in self.stages), key=order.index)

    def stage(self, name):
        return next((s for s in self.stages if s.stage == name), None)


def run_variant(v, index, out_dir, mem_bytes, keep):
    """Writes a variant's model, runs its three children, keeps the model when something went
    wrong (or with --keep), deletes it otherwise."""
    path = out_dir / v.family / f"{index:05d}.onnx"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(v.data)
    feeds = write_inputs(v, index, out_dir)
    stages = []
    for stage, argv in stage_commands(path, v, feeds):
        if stage == "run" and v.run_args is None:
            stages.append(StageResult("run", "cli", "skipped: an input of over "
                                      f"{MAX_INPUT_BYTES >> 20} MiB to make"))
        elif stage == "probe" and not needs_probe(stages[0]):
            continue
        else:
            stages.append(run_stage(stage, argv, v.timeout, mem_bytes))
    outcome = Outcome(v, path, stages)
    if outcome.verdict in ("crash", "hang", "internal"):
        kept = out_dir / "failures" / f"{index:05d}-{v.family}.onnx"
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, kept)
        outcome.path = kept
        for s in stages:
            s.argv = [str(kept) if a == str(path) else a for a in s.argv]
    if not keep:
        path.unlink()
    return outcome


def run_all(variants, jobs, out_dir, mem_bytes, keep, verbose):
    """Runs the variants on `jobs` threads (at most 2 x jobs generated ahead); returns every
    outcome in variant order."""
    outcomes = []
    lock = threading.Semaphore(jobs * 2)

    def done(future):
        lock.release()
        if verbose:
            o = future.result()
            stages = " ".join(f"{s.stage}={s.verdict}({s.seconds:.2f}s)" for s in o.stages)
            print(f"{o.path.name} {o.variant.family}: {o.variant.label[:100]} | {stages}",
                  flush=True)

    with ThreadPoolExecutor(jobs) as pool:
        futures = []
        for index, v in enumerate(variants):
            lock.acquire()
            f = pool.submit(run_variant, v, index, out_dir, mem_bytes, keep)
            f.add_done_callback(done)
            futures.append(f)
        outcomes = [f.result() for f in futures]
    return outcomes


# ------------------------------------------------------------------------------- report

def reproduce(stage):
    """A shell command reproducing one child."""
    argv = " ".join(shlex_quote(a) for a in stage.argv)
    return (f"(ulimit -v {MEM_KIB}; ONNXIFI_RUST_NUM_THREADS=1 RUST_BACKTRACE=1 "
            f"ONNXIFI_RUST_LIB={LIB} {argv})")


def shlex_quote(s):
    import shlex
    return shlex.quote(s)


def summarize(outcomes, elapsed):
    """Prints the per-family table, the run stage's statuses, caught panics and every distinct
    crash and hang; returns (crashes + hangs, internal errors)."""
    fams = defaultdict(Counter)
    statuses = Counter()
    for o in outcomes:
        c = fams[o.variant.family]
        run = o.stage("run")
        c["variants"] += 1
        c[o.verdict] += 1
        c["ran"] += run.verdict == "ok"
        c["lib_refused"] += run.verdict == "refused"
        c["cli_refused"] += run.verdict == "cli"
        c["reached_init"] += "model:" in run.stdout
        c["reached_run"] += ("latency over" in run.stdout or "onnxRunGraph failed" in run.stderr
                             or "the run failed" in run.stderr)
        probe_stage = o.stage("probe")
        c["probe_run"] += probe_stage is not None
        c["probe_init_ok"] += probe_stage is not None and probe_stage.detail == "init SUCCESS"
        c["child_s"] += sum(s.seconds for s in o.stages)
        if run.verdict in ("refused", "cli"):
            statuses[f"{run.verdict}: {run.detail}"] += 1
    cols = ["variants", "ran", "lib_refused", "cli_refused", "reached_init", "reached_run",
            "probe_run", "probe_init_ok", "internal", "crash", "hang", "child_s"]
    print(f"\n{'family':<18}" + "".join(f"{c:>13}" for c in cols))
    total = Counter()
    for fam, c in fams.items():
        total.update(c)
        print(f"{fam:<18}" + "".join(f"{c[k]:>13.0f}" for k in cols))
    print(f"{'TOTAL':<18}" + "".join(f"{total[k]:>13.0f}" for k in cols))
    print(f"\n{len(outcomes)} variants in {elapsed:.1f} s. ran = the run stage ran the graph; "
          "lib_refused = an ONNXIFI status; cli_refused = onnxifi-run declined (e.g. an input "
          "it cannot make); reached_init/run = the run stage called onnxInitGraph/onnxRunGraph; "
          "probe_run = variants that decode but whose run stage did not reach onnxInitGraph, "
          "given to the ctypes probe; probe_init_ok = onnxInitGraph accepted them; "
          "child_s = seconds in children.")
    print("\nmost common run-stage refusals:")
    for what, k in statuses.most_common(12):
        print(f"  {k:>5}  {what}")
    report_slowest(outcomes)
    bad = report_problems(outcomes, "internal", "caught panics / INTERNAL_ERROR (not crashes)")
    fatal = report_problems(outcomes, "crash", "CRASHES")
    fatal += report_problems(outcomes, "hang", "HANGS")
    return fatal, bad


def report_problems(outcomes, verdict, title):
    """Prints each distinct problem of a kind (by its signature, whatever the stage) with its
    first reproducer; returns how many variants had one."""
    groups = defaultdict(list)
    for o in outcomes:
        for s in o.stages:
            if s.verdict == verdict:
                groups[s.detail].append((o, s))
    if not groups:
        return 0
    count = len({id(o) for hits in groups.values() for o, _ in hits})
    print(f"\n{title}: {count} variant(s), {len(groups)} distinct")
    for detail, hits in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        o, s = hits[0]
        stages = ", ".join(sorted({st.stage for _, st in hits}))
        families = Counter(h.variant.family for h, _ in hits)
        print(f"\n* {detail}\n  {len(hits)} child(ren) ({stages}) in families "
              f"{dict(families)}\n  first: {o.variant.family}: {o.variant.label[:200]}"
              f"\n  model: {o.path}\n  command: {reproduce(s)}")
        others = sorted({h.variant.label[:100] for h, _ in hits} - {o.variant.label[:100]})
        for label in others[:6]:
            print(f"  also: {label}")
        tail = "\n    ".join(s.stderr.strip().splitlines()[-14:])
        if tail:
            print(f"  stderr tail:\n    {tail}")
    return count


def report_slowest(outcomes, k=8):
    """Prints the slowest children (where the run time goes)."""
    stages = sorted(((s.seconds, o, s) for o in outcomes for s in o.stages),
                    key=lambda t: -t[0])[:k]
    print("\nslowest children:")
    for seconds, o, s in stages:
        print(f"  {seconds:6.2f} s  {s.stage:<5} {o.variant.family}: {o.variant.label[:90]}")


# ------------------------------------------------------------------------------- main

def write_cond_true(out_dir):
    """A TensorProto file holding the bool scalar `true` (the `cond` of the If models)."""
    global COND_TRUE
    onnx, helper, _ = onnx_mods()
    path = out_dir / "cond_true.pb"
    tensor = helper.make_tensor("cond", onnx.TensorProto.BOOL, [], [True])
    path.write_bytes(tensor.SerializeToString())
    COND_TRUE = path


MARKER = ".hostile-models"


def prepare_out(out):
    """Empties OUT for a run; refuses a non-empty directory this script did not make."""
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            print(f"hostile_models: {out} is not empty and was not made by this script; "
                  "give another --out", file=sys.stderr)
            return False
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by scripts/hostile_models.py; emptied by its next run\n")
    return True


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--count", type=int, default=2000, help="variants to run (default 2000)")
    p.add_argument("--out", type=Path, default=ROOT / "target" / "hostile-models",
                   help="working directory; failing models are kept in OUT/failures")
    p.add_argument("--jobs", type=int, default=2, help="children at a time (default 2)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--family", default="", help="comma-separated families to run (default all)")
    p.add_argument("--keep", action="store_true", help="keep every variant's model in OUT")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds per child (default: 20, more for the big families)")
    p.add_argument("--mem-gib", type=float, default=4.0, help="RLIMIT_AS of a child (GiB)")
    p.add_argument("--node-seeds", type=int, default=150, help="node-test seed models")
    p.add_argument("--verbose", action="store_true", help="one line per variant as it ends")
    p.add_argument("--strict", action="store_true",
                   help="also fail on caught panics and INTERNAL_ERROR")
    args = p.parse_args(argv)
    args.family = {f for f in args.family.split(",") if f}
    unknown = args.family - {f[0] for f in FAMILIES}
    if unknown:
        p.error(f"unknown families {sorted(unknown)}; known: {[f[0] for f in FAMILIES]}")
    return args


def main(argv):
    args = parse_args(argv)
    for need in (CLI, LIB):
        if not need.is_file():
            print(f"hostile_models: {need} missing: run `cargo build --release` first",
                  file=sys.stderr)
            return 2
    import random
    start = time.monotonic()
    if not prepare_out(args.out):
        return 2
    write_cond_true(args.out)
    seeds = load_seeds(random.Random(args.seed), args.node_seeds, args.jobs)
    kinds = Counter(s.kind for s in seeds)
    print(f"hostile_models: seed {args.seed}, {args.count} variants, {args.jobs} jobs, "
          f"RLIMIT_AS {args.mem_gib:g} GiB; seeds: {dict(kinds)} "
          f"({time.monotonic() - start:.1f} s)")
    if not seeds:
        print("hostile_models: no seed models in .testdata: run scripts/test.sh (or "
              "scripts/gen_node_tests.py .testdata/node) first", file=sys.stderr)
        return 2
    variants = generate(Context(seeds), args.count, args.seed, args.family)
    if args.timeout:
        variants = (dataclasses.replace(v, timeout=args.timeout) for v in variants)
    mem = int(args.mem_gib * (1 << 30))
    global MEM_KIB
    MEM_KIB = mem >> 10
    outcomes = run_all(variants, args.jobs, args.out, mem, args.keep, args.verbose)
    fatal, bad = summarize(outcomes, time.monotonic() - start)
    if fatal or (args.strict and bad):
        print(f"\nhostile_models: FAILED: {fatal} crash/hang variant(s)"
              + (f", {bad} internal error(s)" if args.strict else ""))
        return 1
    print("\nhostile_models: no crash, no hang")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
