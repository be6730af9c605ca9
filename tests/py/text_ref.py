"""Helper for tests/text_reference.rs: runs the reference ONNX text parser and printer.

Line protocol (no JSON, so the Rust side needs no extra crates):

  parse MANIFEST       MANIFEST lines are "KIND<TAB>PATH", KIND one of model, graph,
                       function, node; PATH a UTF-8 text file. For each line prints
                       "OK <hex of the serialized proto>" or "ERR <message on one line>".
  print-backend OUTDIR writes onnx.printer.to_text() of every backend test model to
                       OUTDIR/<n>.txt and prints "<n><TAB><model path relative to data/>".
  dump-cases OUTDIR    builds the models of onnx.backend.test.case (node and model cases,
                       the generators behind the backend test data) and writes each as
                       OUTDIR/<n>.onnx and its onnx.printer text as OUTDIR/<n>.txt; prints
                       "<n><TAB><case name>".
"""
import glob
import os
import sys

import onnx
import onnx.parser
import onnx.printer

PARSERS = {
    "model": onnx.parser.parse_model,
    "graph": onnx.parser.parse_graph,
    "function": onnx.parser.parse_function,
    "node": onnx.parser.parse_node,
}


def parse(manifest):
    with open(manifest, encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f if l.strip()]
    for line in lines:
        kind, path = line.split("\t", 1)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            proto = PARSERS[kind](text)
            print("OK " + proto.SerializeToString().hex())
        except Exception as e:  # the reference raises several exception types
            msg = f"{type(e).__name__}: {e}".replace("\n", " | ").replace("\r", " ")
            print("ERR " + msg)


def print_backend(outdir):
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    paths = sorted(glob.glob(os.path.join(root, "**", "*.onnx"), recursive=True))
    for i, path in enumerate(paths):
        model = onnx.load(path, load_external_data=False)
        with open(os.path.join(outdir, f"{i}.txt"), "w", encoding="utf-8") as f:
            f.write(onnx.printer.to_text(model))
        print(f"{i}\t{os.path.relpath(path, root)}")


def dump_cases(outdir):
    import warnings

    warnings.simplefilter("ignore")
    from onnx.backend.test.case.model import collect_testcases as model_cases
    from onnx.backend.test.case.node import collect_testcases as node_cases

    cases = node_cases() + model_cases()
    for i, case in enumerate(cases):
        if case.model is None:
            continue
        with open(os.path.join(outdir, f"{i}.onnx"), "wb") as f:
            f.write(case.model.SerializeToString())
        try:
            text = onnx.printer.to_text(case.model)
            with open(os.path.join(outdir, f"{i}.txt"), "w", encoding="utf-8") as f:
                f.write(text)
        except Exception:  # the reference printer cannot print every model
            pass
        print(f"{i}\t{case.name}")


def main():
    if sys.argv[1] == "parse":
        parse(sys.argv[2])
    elif sys.argv[1] == "print-backend":
        print_backend(sys.argv[2])
    elif sys.argv[1] == "dump-cases":
        dump_cases(sys.argv[2])
    else:
        raise SystemExit(f"unknown command {sys.argv[1]}")


if __name__ == "__main__":
    main()
