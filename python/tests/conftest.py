"""Makes the package importable from the source tree when it is not installed (the test
command installs it; a developer may run pytest on the tree with ONNXIFI_RUST_LIB set)."""

import os
import sys

try:
    import onnxifi_rust  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
