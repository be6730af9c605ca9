"""onnxifi_rust.Session and the backend's run_model/run_node, against ONNX Runtime's outputs
and hand-computed values."""

import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import onnxifi_rust
import onnxifi_rust.backend as backend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL_CNN = os.path.join(ROOT, "examples", "small_cnn.onnx")
SMALL_CNN_DYNAMIC = os.path.join(ROOT, "examples", "small_cnn_dynamic.onnx")


def _ort(path_or_model, feeds):
    data = path_or_model if isinstance(path_or_model, str) else path_or_model.SerializeToString()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"]).run(None, feeds)


def test_session_matches_onnxruntime_and_describes_its_io():
    rng = np.random.default_rng(0)
    with onnxifi_rust.Session(SMALL_CNN, threads=1) as s:
        assert [i.name for i in s.inputs] == ["input"]
        assert s.inputs[0].shape == (1, 3, 16, 16) and s.inputs[0].dtype == np.float32
        assert [o.name for o in s.outputs] == ["probs"]
        x = rng.standard_normal((1, 3, 16, 16)).astype(np.float32)
        got = s.run({"input": x})
        (want,) = _ort(SMALL_CNN, {"input": x})
        assert got["probs"].shape == want.shape == (1, 10)
        np.testing.assert_allclose(got["probs"], want, rtol=1e-4, atol=1e-5)
        # A sequence in input order gives the same.
        np.testing.assert_array_equal(s.run([x])["probs"], got["probs"])


def test_model_from_bytes_and_proto():
    x = np.linspace(-1, 1, 3 * 16 * 16, dtype=np.float32).reshape(1, 3, 16, 16)
    with open(SMALL_CNN, "rb") as f:
        data = f.read()
    a = onnxifi_rust.Session(data).run({"input": x})["probs"]
    b = onnxifi_rust.Session(onnx.load(SMALL_CNN)).run({"input": x})["probs"]
    np.testing.assert_array_equal(a, b)


def test_symbolic_batch_output_shapes_come_from_the_library():
    rng = np.random.default_rng(1)
    with onnxifi_rust.Session(SMALL_CNN_DYNAMIC) as s:
        assert not isinstance(s.inputs[0].shape[0], int)
        for batch in (1, 3):
            x = rng.standard_normal((batch, 3, 16, 16)).astype(np.float32)
            assert s.output_shapes([x.shape])[0][1] == (batch, 10)
            got = s.run({"input": x})["probs"]
            (want,) = _ort(SMALL_CNN_DYNAMIC, {"input": x})
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_errors_carry_the_library_status_and_message():
    s = onnxifi_rust.Session(SMALL_CNN)
    x = np.zeros((1, 3, 16, 16), np.float32)
    with pytest.raises(TypeError, match="float32"):
        s.run({"input": x.astype(np.float64)})
    with pytest.raises(KeyError, match="missing"):
        s.run({})
    with pytest.raises(KeyError, match="nope"):
        s.run({"input": x, "nope": x})
    with pytest.raises(onnxifi_rust.OnnxifiError) as e:
        s.run({"input": np.zeros((1, 3, 8, 8), np.float32)})
    assert e.value.status_name == "MISMATCHING_SHAPE"
    assert "input" in str(e.value)
    s.close()
    s.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        s.run({"input": x})
    with pytest.raises(onnxifi_rust.OnnxifiError) as e:
        onnxifi_rust.Session(b"\x08\x07\x12\x03abc this is not a model")
    assert e.value.status_name == "INVALID_PROTOBUF"
    pad = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])]))
    with pytest.raises(onnxifi_rust.OnnxifiError) as e:
        onnxifi_rust.Session(pad)
    assert e.value.status_name == "MISMATCHING_SHAPE" and "Relu" in str(e.value)
    with pytest.raises(ValueError):
        onnxifi_rust.Session(SMALL_CNN, threads=0)


def test_integer_bool_and_scalar_io():
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["s"]),
         helper.make_node("Greater", ["s", "t"], ["g"])], "g",
        [helper.make_tensor_value_info("a", TensorProto.INT64, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.INT64, []),
         helper.make_tensor_value_info("t", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("s", TensorProto.INT64, [2, 3]),
         helper.make_tensor_value_info("g", TensorProto.BOOL, [2, 3])]))
    a = np.array([[1, 2, 3], [4, 5, 6]], np.int64)
    out = onnxifi_rust.Session(model).run(
        {"a": a, "b": np.array(10, np.int64), "t": np.array([12, 14, 15], np.int64)})
    np.testing.assert_array_equal(out["s"], a + 10)
    np.testing.assert_array_equal(out["g"], [[False, False, False], [True, True, True]])
    assert out["g"].dtype == np.bool_


def test_int4_is_packed_and_unpacked_as_onnx_packs_it():
    int4 = helper.tensor_dtype_to_np_dtype(TensorProto.INT4)
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT),
         helper.make_node("Identity", ["x"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.INT4, [5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5]),
         helper.make_tensor_value_info("z", TensorProto.INT4, [5])]),
        opset_imports=[helper.make_opsetid("", 21)])
    x = np.array([-8, -1, 0, 3, 7]).astype(int4)
    out = onnxifi_rust.Session(model).run({"x": x})
    np.testing.assert_array_equal(out["y"], [-8, -1, 0, 3, 7])
    np.testing.assert_array_equal(out["z"].astype(np.int8), [-8, -1, 0, 3, 7])


def test_backend_interface():
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")
    model = onnx.load(SMALL_CNN)
    assert backend.is_compatible(model)
    x = np.ones((1, 3, 16, 16), np.float32)
    (probs,) = backend.run_model(model, [x])
    (want,) = _ort(SMALL_CNN, {"input": x})
    np.testing.assert_allclose(probs, want, rtol=1e-4, atol=1e-5)
    rep = backend.prepare(model)
    np.testing.assert_array_equal(rep.run(x)[0], probs)
    node = helper.make_node("Gemm", ["a", "b"], ["c"], transB=1, alpha=2.0)
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = np.array([[1, 0], [1, 1]], np.float32)
    (c,) = backend.run_node(node, [a, b])
    np.testing.assert_array_equal(c, [[2, 6], [6, 14]])  # 2·a·bᵀ by hand
    unsupported = helper.make_model(helper.make_graph(
        [helper.make_node("StringNormalizer", ["s"], ["t"])], "g",
        [helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("t", TensorProto.STRING, [2])]))
    assert not backend.is_compatible(unsupported)
