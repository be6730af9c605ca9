"""Test helper for the spec checker: lists ONNX backend-test models and runs onnx.checker.

Usage:
  onnx_check.py models OUT_DIR   write the node test cases' models under OUT_DIR/node/ and print
                                 one path per line: every backend-test model.onnx (node, simple,
                                 pytorch-converted, pytorch-operator, real, light).
  onnx_check.py check PATH...    run onnx.checker.check_model(full_check=True) on each file and
                                 print "PATH<TAB>OK" or "PATH<TAB>FAIL<TAB>first line of the error".
"""

import glob
import os
import sys
import warnings


def models(out_dir):
    import onnx
    from onnx.backend.test.case.node import collect_testcases

    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    paths = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    for case in cases:
        if case.model is None:
            continue
        d = os.path.join(out_dir, "node", case.name)
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, "model.onnx")
        with open(p, "wb") as f:
            f.write(case.model.SerializeToString())
        paths.append(p)
    for kind in ("node", "simple", "pytorch-converted", "pytorch-operator", "real"):
        paths += glob.glob(os.path.join(data, kind, "*", "model.onnx"))
    paths += glob.glob(os.path.join(data, "light", "*.onnx"))
    for p in sorted(paths):
        print(p)


def check(paths):
    import onnx

    for p in paths:
        try:
            # By path, so that external data is looked up next to the model.
            onnx.checker.check_model(p, full_check=True)
            print(f"{p}\tOK")
        except Exception as e:  # noqa: BLE001 - any failure is a rejection
            msg = (str(e).strip().splitlines() or [type(e).__name__])[0]
            print(f"{p}\tFAIL\t{msg}")
        sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "models":
        models(sys.argv[2])
    elif len(sys.argv) >= 2 and sys.argv[1] == "check":
        paths = sys.argv[2:]
        if paths == ["-"]:
            paths = [l.rstrip("\n") for l in sys.stdin if l.strip()]
        check(paths)
    else:
        sys.exit(__doc__)
