"""Builds the package with the shared library inside it.

Before the Python files are collected, `cargo build --release` is run in the repository that
holds this directory (unless ONNXIFI_RUST_SKIP_CARGO=1), and target/release/libonnxifi_rust.so
is copied into the package as libonnxifi-rust.so. Without a repository around it (an sdist, or
ONNXIFI_RUST_SKIP_CARGO=1 without a built library) the package is built without the library
and finds one at run time through ONNXIFI_RUST_LIB or the system's library path.
"""

import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
BUNDLED = "libonnxifi-rust.so"


class BuildWithLibrary(build_py):
    """build_py that first builds and bundles the Rust library."""

    def run(self):
        built = os.path.join(
            os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")),
            "release",
            "libonnxifi_rust.so",
        )
        if os.path.exists(os.path.join(REPO, "Cargo.toml")):
            if os.environ.get("ONNXIFI_RUST_SKIP_CARGO") != "1":
                subprocess.run(["cargo", "build", "--release", "--lib"], cwd=REPO, check=True)
            if os.path.exists(built):
                shutil.copyfile(built, os.path.join(HERE, "onnxifi_rust", BUNDLED))
        super().run()


setup(cmdclass={"build_py": BuildWithLibrary})
