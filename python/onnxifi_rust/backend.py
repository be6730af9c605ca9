"""libonnxifi-rust as an ONNX backend (`onnx.backend.base.Backend`), the interface that
onnx-tensorrt and other backends provide, so that `onnx.backend.test.BackendTest` runs against
it unchanged:

    import onnxifi_rust.backend as backend
    rep = backend.prepare(model)          # a BackendRep; rep.run([x]) gives the outputs
    outputs = backend.run_model(model, [x])
    outputs = backend.run_node(node, [x])

Only the CPU device is supported. `is_compatible` asks the library
(onnxGetBackendCompatibility) and also refuses what the ONNXIFI C API cannot pass: graph
inputs or outputs that are not tensors of a type with a byte layout (strings, sequences,
optionals, maps), or tensors with a zero dimension.
"""

import ctypes as C

import numpy as np
import onnx
from onnx import TensorProto, helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from . import _capi
from .session import Session

# Element types that have no byte layout in an ONNXIFI buffer, or none this package maps.
_NOT_DESCRIBABLE = {TensorProto.UNDEFINED, TensorProto.STRING, TensorProto.COMPLEX64,
                    TensorProto.COMPLEX128}


def _describable(value):
    t = value.type
    if t.WhichOneof("value") != "tensor_type":
        return False
    if t.tensor_type.elem_type in _NOT_DESCRIBABLE:
        return False
    if t.tensor_type.HasField("shape"):
        for d in t.tensor_type.shape.dim:
            if d.HasField("dim_value") and d.dim_value == 0:
                return False
    return True


class OnnxifiRustRep(BackendRep):
    """A prepared model: `run(inputs)` takes arrays in input order (or a dict by name, or one
    array) and returns the outputs as a named tuple in model order."""

    def __init__(self, session):
        self.session = session

    def run(self, inputs, **kwargs):  # noqa: ARG002 - kwargs is part of the interface
        if isinstance(inputs, dict):
            feeds = inputs
        else:
            if isinstance(inputs, np.ndarray) or not isinstance(inputs, (list, tuple)):
                inputs = [inputs]
            feeds = list(inputs)
        out = self.session.run(feeds)
        names = [o.name for o in self.session.outputs]
        return namedtupledict("Outputs", names)(*[out[n] for n in names])


class OnnxifiRustBackend(Backend):
    """The backend class; the module-level functions below are its methods."""

    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs):  # noqa: ARG003
        if not cls.supports_device(device):
            return False
        initialized = {t.name for t in model.graph.initializer}
        io = [v for v in model.graph.input if v.name not in initialized]
        if not all(_describable(v) for v in io + list(model.graph.output)):
            return False
        api = _capi.load(kwargs.get("library"))
        count = C.c_size_t(0)
        api.onnxGetBackendIDs(None, C.byref(count))
        ids = (C.c_void_p * max(count.value, 1))()
        if api.onnxGetBackendIDs(ids, C.byref(count)) != _capi.SUCCESS:
            return False
        data = model.SerializeToString()
        buf = C.create_string_buffer(data, len(data))
        status = api.onnxGetBackendCompatibility(ids[0], len(data), buf)
        for i in range(count.value):
            api.onnxReleaseBackendID(ids[i])
        return status == _capi.SUCCESS

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        """Checks the model (onnx.checker), compiles it on a new backend; kwargs `threads` and
        `library` go to `Session`."""
        if not cls.supports_device(device):
            raise RuntimeError(f"onnxifi-rust runs on the CPU, not on {device}")
        super().prepare(model, device, **kwargs)
        session = Session(model, threads=kwargs.get("threads"), library=kwargs.get("library"))
        return OnnxifiRustRep(session)

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        """Runs one node on `inputs` (arrays in the node's input order; empty names are
        omitted inputs). Output types come from ONNX shape inference, or from
        `outputs_info` ([(numpy dtype, shape)] per output)."""
        super().run_node(node, inputs, device=device, outputs_info=outputs_info)
        arrays = [np.asarray(a) for a in inputs]
        names = [n for n in node.input if n]
        graph_inputs = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in zip(names, arrays)
        ]
        if outputs_info is not None:
            graph_outputs = [
                helper.make_tensor_value_info(
                    n, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shape)
                for n, (dt, shape) in zip(node.output, outputs_info)
            ]
        else:
            graph_outputs = [helper.make_empty_tensor_value_info(n) for n in node.output if n]
        opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
        model = helper.make_model(
            helper.make_graph([node], "run_node", graph_inputs, graph_outputs),
            opset_imports=[helper.make_opsetid(node.domain or "", opset)],
        )
        if outputs_info is None:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
            known = {v.name: v for v in inferred.graph.value_info}
            known.update({v.name: v for v in inferred.graph.output})
            del model.graph.output[:]
            for n in node.output:
                if n:
                    model.graph.output.append(known[n])
        return cls.prepare(model, device, **kwargs).run(arrays)

    @classmethod
    def supports_device(cls, device):
        return Device(device).type == DeviceType.CPU


is_compatible = OnnxifiRustBackend.is_compatible
prepare = OnnxifiRustBackend.prepare
run_model = OnnxifiRustBackend.run_model
run_node = OnnxifiRustBackend.run_node
supports_device = OnnxifiRustBackend.supports_device
