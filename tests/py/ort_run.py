"""Helper for tests/ops_ort.rs: runs a model given in ONNX text syntax with onnxruntime.

Usage: ort_run.py MODEL_TXT MANIFEST OUTDIR

The model is parsed by the reference parser (onnx.parser.parse_model), checked with
onnx.checker, and run by onnxruntime on the CPU with graph optimizations disabled, so the
result is a plain evaluation of the graph as written.

MANIFEST has one line per graph input, "NAME<TAB>DIMS<TAB>PATH": DIMS comma-separated (empty
for a scalar), PATH a file of little-endian float32 values. For output i (graph order) the
values are written to OUTDIR/<i>.bin as little-endian float32, and a line "<i><TAB><DIMS>" is
printed. Errors go to stderr with a non-zero exit status.
"""
import os
import sys

import numpy as np
import onnx
import onnx.checker
import onnx.parser
import onnxruntime as ort


def main(model_txt, manifest, outdir):
    with open(model_txt, encoding="utf-8") as f:
        model = onnx.parser.parse_model(f.read())
    onnx.checker.check_model(model, full_check=True)
    feeds = {}
    with open(manifest, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            name, dims, path = line.split("\t")
            shape = [int(d) for d in dims.split(",")] if dims else []
            feeds[name] = np.fromfile(path, dtype="<f4").reshape(shape)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(
        model.SerializeToString(), opts, providers=["CPUExecutionProvider"]
    )
    outs = sess.run(None, feeds)
    for i, o in enumerate(outs):
        o = np.asarray(o, dtype="<f4")
        o.tofile(os.path.join(outdir, f"{i}.bin"))
        print(f"{i}\t{','.join(str(d) for d in o.shape)}")


if __name__ == "__main__":
    main(*sys.argv[1:])
