"""`Session`: one model compiled on one ONNXIFI backend of libonnxifi-rust, run on numpy arrays.

Every call goes through the library's C API (`_capi`): onnxInitBackend, onnxInitGraph, the
onnxGetOutputShapesRUST extension to size the outputs, onnxSetIOAndRunGraph and the output
event. The library copies what it needs during each call, so the arrays only have to live
until `run` returns (it waits for the run)."""

import ctypes as C
import os
import threading
from collections import namedtuple

import numpy as np
import onnx
from onnx import helper

from . import _capi
from ._capi import OnnxifiError

#: A graph input or output: name, numpy dtype (None when numpy has none for it), ONNX element
#: type code, and shape (ints, or names / None for symbolic and unknown dimensions).
IoInfo = namedtuple("IoInfo", ["name", "dtype", "elem_type", "shape"])

# Element types packed several to a byte in ONNXIFI buffers, as ONNX packs them: bits each.
_SUB_BYTE_BITS = {21: 4, 22: 4, 23: 4, 25: 2, 26: 2}
_SIGNED_SUB_BYTE = {22, 26}


def _np_dtype(elem_type):
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:  # noqa: BLE001 - onnx raises several kinds for unknown codes
        return None


def _io_info(value):
    t = value.type.tensor_type
    shape = None
    if t.HasField("shape"):
        shape = tuple(
            d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in t.shape.dim
        )
    return IoInfo(value.name, _np_dtype(t.elem_type), t.elem_type, shape)


def _model_bytes(model):
    """(serialized bytes, ModelProto or None) of a path, bytes or ModelProto."""
    if isinstance(model, onnx.ModelProto):
        return model.SerializeToString(), model
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), None
    if isinstance(model, (str, os.PathLike)):
        with open(model, "rb") as f:
            return f.read(), None
    raise TypeError(f"a model is a path, bytes or onnx.ModelProto, not {type(model).__name__}")


def _pack_sub_byte(a, bits):
    """The ONNX packing of a sub-byte tensor: elements in order, low bits first."""
    per_byte = 8 // bits
    raw = (a.reshape(-1).view(np.uint8) & ((1 << bits) - 1)).astype(np.uint8)
    pad = (-raw.size) % per_byte
    raw = np.concatenate([raw, np.zeros(pad, np.uint8)]).reshape(-1, per_byte)
    out = np.zeros(raw.shape[0], np.uint8)
    for i in range(per_byte):
        out |= raw[:, i] << (i * bits)
    return out


def _unpack_sub_byte(packed, count, dtype, bits, signed):
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    vals = np.stack([(packed >> (i * bits)) & mask for i in range(per_byte)], axis=1)
    vals = vals.reshape(-1)[:count].astype(np.uint8)
    if signed:
        wide = vals.astype(np.int8)
        wide = np.where(wide >= (1 << (bits - 1)), wide - (1 << bits), wide).astype(np.int8)
        return wide.astype(dtype)
    return vals.view(dtype)


class _Described:
    """A descriptor with the storage it points to kept alive."""

    def __init__(self, name, elem_type, shape, buffer_addr):
        self.name = name.encode()
        self.shape = (C.c_uint64 * max(len(shape), 1))(*shape)
        self.desc = _capi.TensorDescriptor(
            tag=_capi.TAG_TENSOR_DESCRIPTOR_V1,
            name=self.name,
            dataType=elem_type,
            memoryType=_capi.MEMORY_TYPE_CPU,
            dimensions=len(shape),
            shape=C.cast(self.shape, C.POINTER(C.c_uint64)),
            buffer=buffer_addr,
        )


def _descriptor_array(items):
    arr = (_capi.TensorDescriptor * max(len(items), 1))()
    for i, d in enumerate(items):
        arr[i] = d.desc
    return arr


class Session:
    """A model ready to run on libonnxifi-rust.

    `model` is a path, the serialized bytes or an `onnx.ModelProto`; `threads` sets the
    backend's compute threads (default: $ONNXIFI_RUST_NUM_THREADS or all cores); `library` is
    the shared library's path (default: `_capi.library_path()`). Use it as a context manager,
    or call `close()`.
    """

    def __init__(self, model, threads=None, library=None):
        self._api = _capi.load(library)
        self._backend = None
        self._backend_id = None
        self._graph = None
        self._lock = threading.Lock()
        self._shapes = {}
        data, proto = _model_bytes(model)
        try:
            # The library judges the bytes first, so a bad model gets its status and message.
            self._open(data, threads)
            if proto is None:
                proto = onnx.load_from_string(data)
        except BaseException:
            self.close()
            raise
        initialized = {t.name for t in proto.graph.initializer}
        self._inputs = [_io_info(v) for v in proto.graph.input if v.name not in initialized]
        self._outputs = [_io_info(v) for v in proto.graph.output]

    def _open(self, data, threads):
        api = self._api
        count = C.c_size_t(0)
        api.check("onnxGetBackendIDs", api.onnxGetBackendIDs(None, C.byref(count)),
                  (_capi.SUCCESS, _capi.FALLBACK))
        ids = (C.c_void_p * max(count.value, 1))()
        api.check("onnxGetBackendIDs", api.onnxGetBackendIDs(ids, C.byref(count)))
        self._backend_id = C.c_void_p(ids[0])
        for extra in ids[1:count.value]:
            api.onnxReleaseBackendID(extra)
        props = []
        if threads is not None:
            if int(threads) < 1:
                raise ValueError(f"threads must be at least 1, not {threads}")
            props = [_capi.BACKEND_PROPERTY_NUM_THREADS, int(threads)]
        plist = (C.c_uint64 * (len(props) + 1))(*props, 0)
        backend = C.c_void_p()
        api.check("onnxInitBackend",
                  api.onnxInitBackend(self._backend_id, plist, C.byref(backend)))
        self._backend = backend
        graph = C.c_void_p()
        buf = C.create_string_buffer(data, len(data))
        api.check("onnxInitGraph", api.onnxInitGraph(
            backend, None, len(data), buf, 0, None, C.byref(graph)))
        self._graph = graph

    @property
    def inputs(self):
        """The inputs a run takes (graph inputs without an initializer), in model order."""
        return list(self._inputs)

    @property
    def outputs(self):
        """The outputs a run returns, in model order."""
        return list(self._outputs)

    def _prepare_input(self, info, value):
        a = np.asarray(value)
        if info.dtype is not None and a.dtype != info.dtype:
            if a.dtype.kind == info.dtype.kind == "f" and not isinstance(value, np.ndarray):
                a = a.astype(info.dtype)  # Python floats and lists
            elif not isinstance(value, np.ndarray) and a.dtype.kind in "iub":
                a = a.astype(info.dtype)
            else:
                raise TypeError(
                    f"input '{info.name}' is {info.dtype} in the model, {a.dtype} given")
        a = np.require(a, requirements="C")  # (ascontiguousarray would make a scalar 1-D)
        bits = _SUB_BYTE_BITS.get(info.elem_type)
        storage = _pack_sub_byte(a, bits) if bits else a
        return a.shape, storage

    def output_shapes(self, input_shapes):
        """Output shapes for a tuple of input shapes (model input order), as the library infers
        them; a 0 stands for a dimension only a run decides."""
        key = tuple(tuple(int(d) for d in s) for s in input_shapes)
        if key not in self._shapes:
            ins = [_Described(i.name, i.elem_type, s, 0) for i, s in zip(self._inputs, key)]
            caps = [_Described(o.name, o.elem_type, [0] * 64, 0) for o in self._outputs]
            for c in caps:
                c.desc.dimensions = 64
            in_arr = _descriptor_array(ins)
            out_arr = _descriptor_array(caps)
            self._api.check("onnxGetOutputShapesRUST", self._api.onnxGetOutputShapesRUST(
                self._graph, len(ins), in_arr, len(caps), out_arr))
            self._shapes[key] = [
                (int(out_arr[i].dataType),
                 tuple(int(caps[i].shape[j]) for j in range(out_arr[i].dimensions)))
                for i in range(len(caps))
            ]
        return self._shapes[key]

    def run(self, feeds, output_names=None):
        """Runs the model. `feeds` maps input names to arrays (or is a sequence in input order);
        returns a dict from output name to numpy array (only `output_names` when given)."""
        if self._graph is None:
            raise RuntimeError("the session is closed")
        if not isinstance(feeds, dict):
            feeds = list(feeds)
            if len(feeds) != len(self._inputs):
                raise ValueError(f"{len(self._inputs)} inputs expected, {len(feeds)} given")
            feeds = {i.name: v for i, v in zip(self._inputs, feeds)}
        unknown = set(feeds) - {i.name for i in self._inputs}
        if unknown:
            raise KeyError(f"not inputs of the model: {sorted(unknown)}")
        prepared = []
        for info in self._inputs:
            if info.name not in feeds:
                raise KeyError(f"input '{info.name}' is missing")
            prepared.append(self._prepare_input(info, feeds[info.name]))
        shapes = self.output_shapes([s for s, _ in prepared])
        outs = []
        for info, (elem, shape) in zip(self._outputs, shapes):
            if 0 in shape:
                raise OnnxifiError(
                    "onnxGetOutputShapesRUST", 0x0205,
                    f"output '{info.name}' has shape {shape}: its size is only known after a "
                    "run, which an ONNXIFI caller cannot size")
            count = int(np.prod(shape, dtype=np.int64))
            bits = _SUB_BYTE_BITS.get(elem)
            if bits:
                storage = np.empty((count * bits + 7) // 8, np.uint8)
            else:
                dtype = _np_dtype(elem)
                if dtype is None or dtype == np.dtype(object):
                    raise OnnxifiError("onnxSetIOAndRunGraph", 0x0206,
                                       f"output '{info.name}' has no numpy type")
                storage = np.empty(shape, dtype)
            outs.append((info, elem, shape, count, storage))
        in_desc = [_Described(i.name, i.elem_type, s, st.ctypes.data)
                   for i, (s, st) in zip(self._inputs, prepared)]
        out_desc = [_Described(i.name, e, s, st.ctypes.data) for i, e, s, _, st in outs]
        in_arr = _descriptor_array(in_desc)
        out_arr = _descriptor_array(out_desc)
        fence = _capi.MemoryFence(tag=_capi.TAG_MEMORY_FENCE_V1,
                                  type=_capi.SYNCHRONIZATION_EVENT, event=None)
        api = self._api
        with self._lock:
            api.check("onnxSetIOAndRunGraph", api.onnxSetIOAndRunGraph(
                self._graph, len(in_desc), in_arr, len(out_desc), out_arr, C.byref(fence)))
            event = C.c_void_p(fence.event)
            try:
                status, message = api.wait(event)
            finally:
                api.onnxReleaseEvent(event)
        if status != _capi.SUCCESS:
            raise OnnxifiError("the run (onnxWaitEvent)", status, message)
        result = {}
        for info, elem, shape, count, storage in outs:
            bits = _SUB_BYTE_BITS.get(elem)
            if bits:
                storage = _unpack_sub_byte(storage, count, _np_dtype(elem), bits,
                                           elem in _SIGNED_SUB_BYTE).reshape(shape)
            if output_names is None or info.name in output_names:
                result[info.name] = storage
        return result

    def close(self):
        """Releases the graph, the backend and the backend ID (idempotent)."""
        api = self._api
        if self._graph is not None:
            api.onnxReleaseGraph(self._graph)
            self._graph = None
        if self._backend is not None:
            api.onnxReleaseBackend(self._backend)
            self._backend = None
        if self._backend_id is not None:
            api.onnxReleaseBackendID(self._backend_id)
            self._backend_id = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
