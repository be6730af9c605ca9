#!/usr/bin/env python3
"""Collects the models of onnx's own checker tests, with onnx's verdict on each.

    python tests/py/onnx_checker_cases.py CACHE_DIR OUT_DIR

Downloads the pinned onnx source distribution from PyPI (checked against its sha256) into
CACHE_DIR, unless it is there already, and runs its `tests/python/checker_test.py` with pytest
in this process, with `onnx.checker.check_model` wrapped: every model a test hands it is saved
as OUT_DIR/NNNN.onnx, together with the verdict of `check_model(full_check=True)` on it, and the
call then proceeds as the test made it. OUT_DIR/manifest.tsv lists `file, test, verdict,
message` (verdict `accept` or `reject`, message the first line of onnx's error).
"""

import hashlib
import io
import os
import re
import sys
import tarfile
import urllib.request

import onnx
import onnx.checker

VERSION = "1.23.2"
SHA256 = "008cb0467b2bbee41448acc7da8b6f4e704624cb0d327a2d5adafc7ce19bc5b8"
SDIST = f"onnx-{VERSION}.tar.gz"
MEMBER = f"onnx-{VERSION}/tests/python/checker_test.py"


def sdist(cache):
    path = os.path.join(cache, SDIST)
    if not os.path.exists(path):
        index = urllib.request.urlopen("https://pypi.org/simple/onnx/", timeout=120).read()
        links = re.findall(rb'href="([^"]+)"', index)
        url = next(l.decode() for l in links if SDIST.encode() in l).split("#")[0]
        data = urllib.request.urlopen(url, timeout=300).read()
        os.makedirs(cache, exist_ok=True)
        with open(path + ".part", "wb") as f:
            f.write(data)
        os.replace(path + ".part", path)
    with open(path, "rb") as f:
        data = f.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        sys.exit(f"{path}: sha256 {digest}, expected {SHA256}")
    return data


def main(cache, out):
    data = sdist(cache)
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        source = t.extractfile(MEMBER).read()
    test_file = os.path.join(cache, "checker_test.py")
    with open(test_file, "wb") as f:
        f.write(source)

    os.makedirs(out, exist_ok=True)
    manifest = []
    original = onnx.checker.check_model

    def recording(model, *args, **kwargs):
        m = model
        try:
            if isinstance(model, (str, os.PathLike)):
                m = onnx.load(os.fspath(model), load_external_data=False)
            elif isinstance(model, bytes):
                m = onnx.load_from_string(model)
            blob = m.SerializeToString()
        except Exception:  # noqa: BLE001 - a model that cannot be saved is not recorded
            blob = None
        if blob is not None:
            try:
                original(model, full_check=True)
                verdict, message = "accept", ""
            except Exception as e:  # noqa: BLE001 - any refusal is a verdict
                verdict, message = "reject", (str(e).strip().splitlines() or [""])[0]
            name = f"{len(manifest):04d}.onnx"
            with open(os.path.join(out, name), "wb") as f:
                f.write(blob)
            test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0].split("::")[-1]
            manifest.append((name, test, verdict, message.replace("\t", " ")[:300]))
        return original(model, *args, **kwargs)

    original_graph = onnx.checker.check_graph

    def recording_graph(graph, ctx=None, *args, **kwargs):
        # A graph checked on its own becomes a model with the context's IR version and imports.
        try:
            ir = ctx.ir_version if ctx is not None else onnx.IR_VERSION
            imports = dict(ctx.opset_imports) if ctx is not None else {"": 21}
            m = onnx.helper.make_model(
                graph,
                opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in imports.items()],
            )
            m.ir_version = ir
            recording(m)
        except Exception:  # noqa: BLE001 - a graph that cannot be wrapped is not recorded
            pass
        if ctx is None:
            return original_graph(graph, *args, **kwargs)
        return original_graph(graph, ctx, *args, **kwargs)

    onnx.checker.check_model = recording
    onnx.checker.check_graph = recording_graph
    import pytest

    pytest.main([test_file, "-q", "-p", "no:cacheprovider", "-x", "--no-header", "-rN"])
    with open(os.path.join(out, "manifest.tsv"), "w", encoding="utf-8") as f:
        for row in manifest:
            f.write("\t".join(row) + "\n")
    print(f"{len(manifest)} models recorded from onnx {onnx.__version__}'s checker tests")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
