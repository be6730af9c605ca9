"""onnxifi_rust: run ONNX models on libonnxifi-rust (an ONNXIFI CPU backend) from Python.

    import onnxifi_rust
    with onnxifi_rust.Session("model.onnx", threads=2) as s:
        outputs = s.run({"x": x})

`onnxifi_rust.backend` is an `onnx.backend.base.Backend` (prepare, run_model, run_node,
supports_device). Everything goes through the library's ONNXIFI C API (ctypes); the library is
the copy bundled in the package, or the one named by $ONNXIFI_RUST_LIB.
"""

from ._capi import OnnxifiError, library_path
from .session import IoInfo, Session

__all__ = ["IoInfo", "OnnxifiError", "Session", "library_path"]
__version__ = "0.1.0"
