"""Per-layer time of onnxifi-rust against ONNX Runtime on one model and thread count.

This library's side comes from its own trace (ONNXIFI_RUST_TRACE, written by `onnxifi-run
bench`), ONNX Runtime's from its profiler (intra-op spinning off). Both fuse nodes, so layers
are paired by kind, in execution order: the k-th convolution of one with the k-th of the
other, likewise matrix products (this library's `ConvDepthwise` is a 1×1 convolution and the
depthwise one after it in one node, with the 1×1 projection after that when it has one: it
pairs with the sum of the next two or three of ONNX Runtime's convolutions); the rest is
summed by operator type. Each layer's time is the median over the measured runs. ONNX Runtime's profiler adds its own cost to every node, so its per-node sum runs
above its plain latency: the script also times ONNX Runtime without the profiler and prints
that overhead per node, to be subtracted from its layers when reading the gaps; use
`compare_ort.py` for the latency.

    .venv/bin/python bench/perlayer.py MODEL [--threads T] [--iters N] [--cli PATH] [--top K]

MODEL is a .onnx file or a built-in model name of compare_ort.py (resnet50, mobilenetv2, ...).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_ort  # noqa: E402

CONV = {"Conv", "FusedConv", "ConvDepthwise", "NchwcConv"}
PRODUCT = {"MatMul", "FusedMatMul", "Gemm", "FusedGemm"}


def kind(op):
    """The pairing family of an operator type: conv, product, or the type itself."""
    if op in CONV:
        return "conv"
    if op in PRODUCT:
        return "product"
    return op


def conv_width(layer):
    """How many plain convolutions a layer of ours stands for: a `ConvDepthwise` two, or three
    when it has a projection (a sixth input; absent inputs are listed as '-'), one fewer
    without pointwise weights (its second input absent)."""
    if layer[1] != "ConvDepthwise":
        return 1
    inputs = re.findall(r"\[[^\]]*\]|-", str(layer[2]))
    width = 3 if len(inputs) > 5 and inputs[5] != "-" else 2
    return width - 1 if len(inputs) > 1 and inputs[1] == "-" else width


def layers(events):
    """(name, op, shapes, [durations in ms]) per node, in order of first appearance."""
    order, seen = [], {}
    for name, op, shapes, dur in events:
        if name not in seen:
            seen[name] = (name, op, shapes, [])
            order.append(name)
        seen[name][3].append(dur / 1000.0)
    return [seen[n] for n in order]


def ours(path, threads, iters, cli):
    """This library's layers: `onnxifi-run bench` with its trace on, the 3 warm-up runs left out."""
    trace = tempfile.NamedTemporaryFile(suffix=".json", delete=False).name
    env = dict(os.environ, ONNXIFI_RUST_TRACE=trace, ONNXIFI_RUST_NUM_THREADS=str(threads))
    subprocess.run([cli, "bench", path, "--iterations", str(iters), "--warmup", "3",
                    "--threads", str(threads)], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    with open(trace) as f:
        data = json.load(f)
    os.unlink(trace)
    evs = data["traceEvents"] if isinstance(data, dict) else data
    runs = [e for e in evs if e.get("cat") == "run"]
    first = sorted(e["ts"] for e in runs)[3] if len(runs) > 3 else 0
    out = []
    for e in sorted(evs, key=lambda e: e.get("ts", 0)):
        if e.get("cat") == "op" and e.get("ts", 0) >= first:
            a = e.get("args", {})
            out.append((a.get("node", e["name"]), e["name"], a.get("inputs", ""), e["dur"]))
    return layers(out)


def onnxruntime(path, threads, iters):
    """ONNX Runtime's layers from its profiler (intra-op spinning off), 3 warm-up runs left out,
    and its median latency in ms without the profiler (the same options otherwise)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    feeds = compare_ort.make_inputs(compare_ort.input_specs(onnx.load(path)))
    plain = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(3):
        plain.run(None, feeds)
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        plain.run(None, feeds)
        times.append(1000 * (time.perf_counter() - t))
    del plain
    so.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        so.profile_file_prefix = os.path.join(tmp, "ort")
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        for _ in range(3):
            sess.run(None, feeds)
        for _ in range(iters):
            sess.run(None, feeds)
        prof = sess.end_profiling()
        with open(prof) as f:
            evs = json.load(f)
    runs = sorted(e["ts"] for e in evs if e.get("name") == "model_run")
    first = runs[3] if len(runs) > 3 else 0
    out = []
    for e in sorted(evs, key=lambda e: e.get("ts", 0)):
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and e["ts"] >= first:
            a = e.get("args", {})
            shapes = " ".join(str(list(d.values())[0]) for d in a.get("input_type_shape", []))
            out.append((e["name"][: -len("_kernel_time")], a.get("op_name", "?"), shapes,
                        e["dur"]))
    return layers(out), statistics.median(times)


def med(ls):
    """A layer's median time in ms."""
    return statistics.median(ls[3])


def main():
    """Prints the sums by kind and the paired layers, widest gaps first."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--cli", default=os.path.join(compare_ort.ROOT, "target", "release",
                                                  "onnxifi-run"))
    ap.add_argument("--top", type=int, default=15, help="paired layers to list, widest gap first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model
        if not path.endswith(".onnx"):
            model = compare_ort.BUILDERS[path][0]()
            path = os.path.join(tmp, args.model + ".onnx")
            onnx.save(model, path)
        a = ours(path, args.threads, args.iters, args.cli)
        b, plain = onnxruntime(path, args.threads, args.iters)
    print(f"# {args.model}, {args.threads} threads, {args.iters} runs; per-node medians, ms")
    print(f"sum of layers: ours {sum(map(med, a)):.2f}, ORT {sum(map(med, b)):.2f} "
          "(ORT's profiler inflates its own)")
    by = {}
    for side, ls in (("ours", a), ("ort", b)):
        for x in ls:
            k = kind(x[1])
            by.setdefault(k, {"ours": 0.0, "ort": 0.0, "n_ours": 0, "n_ort": 0})
            by[k][side] += med(x)
            by[k]["n_" + side] += 1
    print("\n| kind | ours ms (nodes) | ORT ms (nodes) |\n|---|---|---|")
    for k, v in sorted(by.items(), key=lambda kv: -max(kv[1]["ours"], kv[1]["ort"])):
        print(f"| {k} | {v['ours']:.3f} ({v['n_ours']}) | {v['ort']:.3f} ({v['n_ort']}) |")
    per_node = (sum(map(med, b)) - plain) / max(len(b), 1)
    print(f"\nONNX Runtime without its profiler: {plain:.2f} ms, so the profiler adds about "
          f"{1000 * per_node:.0f} µs per node")
    for fam in ("conv", "product"):
        xa = [x for x in a if kind(x[1]) == fam]
        xb = [x for x in b if kind(x[1]) == fam]
        # ORT's nodes per node of ours: a ConvDepthwise stands for two convolutions, three
        # with its projection (inputs 5–7).
        widths = [conv_width(x) for x in xa]
        if not xa or sum(widths) != len(xb):
            if xa or xb:
                print(f"\n{fam}: {sum(widths)} against {len(xb)} nodes, not paired")
            continue
        rows, j = [], 0
        for i, (x, w) in enumerate(zip(xa, widths)):
            ys = xb[j: j + w]
            j += w
            rows.append((i, x, len(ys), med(x), sum(map(med, ys)) - w * per_node))
        rows.sort(key=lambda r: -(r[3] - r[4]))
        print(f"\n{fam}, widest gaps first (ORT less its profiler's cost per node):"
              "\n| # | our node | our inputs | ours ms | ORT ms (nodes) | ratio |"
              "\n|---|---|---|---|---|---|")
        for i, x, w, ta, tb in rows[: args.top]:
            print(f"| {i} | {x[1]} | {x[2][:60]} | {ta:.3f} | {tb:.3f} ({w}) | "
                  f"{ta / max(tb, 1e-9):.2f} |")


if __name__ == "__main__":
    main()
