"""The ONNXIFI C API of libonnxifi-rust through ctypes: loading the library, the structures of
the header (56-byte tensor descriptor, 24-byte memory fence), status names, and the calls this
package makes. Nothing here knows about numpy beyond buffer addresses."""

import ctypes as C
import os

TAG_TENSOR_DESCRIPTOR_V1 = 0x43DFBF69
TAG_MEMORY_FENCE_V1 = 0x23E08AAB
SYNCHRONIZATION_EVENT = 0
MEMORY_TYPE_CPU = 0
#: This library's backend property: the number of compute threads.
BACKEND_PROPERTY_NUM_THREADS = 0x5255_5354_0001

SUCCESS = 0
FALLBACK = 1

STATUS_NAMES = {
    0x0000: "SUCCESS", 0x0001: "FALLBACK",
    0x0101: "INVALID_ID", 0x0102: "INVALID_SIZE", 0x0103: "INVALID_POINTER",
    0x0104: "INVALID_PROTOBUF", 0x0105: "INVALID_MODEL", 0x0106: "INVALID_BACKEND",
    0x0107: "INVALID_GRAPH", 0x0108: "INVALID_EVENT", 0x0109: "INVALID_STATE",
    0x010A: "INVALID_NAME", 0x010B: "INVALID_SHAPE", 0x010C: "INVALID_DATATYPE",
    0x010D: "INVALID_MEMORY_TYPE", 0x010E: "INVALID_MEMORY_LOCATION",
    0x010F: "INVALID_FENCE_TYPE", 0x0110: "INVALID_PROPERTY",
    0x0201: "UNSUPPORTED_TAG", 0x0202: "UNSUPPORTED_VERSION", 0x0203: "UNSUPPORTED_OPERATOR",
    0x0204: "UNSUPPORTED_ATTRIBUTE", 0x0205: "UNSUPPORTED_SHAPE", 0x0206: "UNSUPPORTED_DATATYPE",
    0x0207: "UNSUPPORTED_MEMORY_TYPE", 0x0208: "UNSUPPORTED_FENCE_TYPE",
    0x0209: "UNSUPPORTED_PROPERTY",
    0x0301: "UNIDENTIFIED_NAME", 0x0302: "MISMATCHING_SHAPE", 0x0303: "MISMATCHING_DATATYPE",
    0x0401: "NO_SYSTEM_MEMORY", 0x0402: "NO_DEVICE_MEMORY", 0x0403: "NO_SYSTEM_RESOURCES",
    0x0404: "NO_DEVICE_RESOURCES", 0x0405: "BACKEND_UNAVAILABLE", 0x0406: "INTERNAL_ERROR",
}


class OnnxifiError(RuntimeError):
    """A failed ONNXIFI call: `status` is the onnxStatus code, `status_name` its name, and the
    message is the library's own text (onnxGetLastErrorMessage)."""

    def __init__(self, call, status, message):
        self.call = call
        self.status = status
        self.status_name = STATUS_NAMES.get(status, f"0x{status:04x}")
        self.library_message = message
        text = f"{call}: {self.status_name}"
        if message:
            # The library's messages start with the status name already.
            text = f"{call}: {message}" if message.startswith(self.status_name) else (
                f"{text}: {message}")
        super().__init__(text)


class TensorDescriptor(C.Structure):
    """onnxTensorDescriptorV1."""

    _fields_ = [
        ("tag", C.c_int32),
        ("name", C.c_char_p),
        ("dataType", C.c_uint64),
        ("memoryType", C.c_uint64),
        ("dimensions", C.c_uint32),
        ("shape", C.POINTER(C.c_uint64)),
        ("buffer", C.c_uint64),
    ]


class MemoryFence(C.Structure):
    """onnxMemoryFenceV1 (the event variant)."""

    _fields_ = [("tag", C.c_int32), ("type", C.c_uint64), ("event", C.c_void_p)]


assert C.sizeof(TensorDescriptor) == 56 and C.sizeof(MemoryFence) == 24

_HANDLE = C.c_void_p
_STATUS = C.c_int32

_PROTOTYPES = {
    "onnxGetBackendIDs": [C.POINTER(_HANDLE), C.POINTER(C.c_size_t)],
    "onnxReleaseBackendID": [_HANDLE],
    "onnxGetBackendInfo": [_HANDLE, C.c_int32, C.c_void_p, C.POINTER(C.c_size_t)],
    "onnxGetBackendCompatibility": [_HANDLE, C.c_size_t, C.c_void_p],
    "onnxInitBackend": [_HANDLE, C.POINTER(C.c_uint64), C.POINTER(_HANDLE)],
    "onnxReleaseBackend": [_HANDLE],
    "onnxInitGraph": [
        _HANDLE, C.POINTER(C.c_uint64), C.c_size_t, C.c_void_p, C.c_uint32,
        C.POINTER(TensorDescriptor), C.POINTER(_HANDLE),
    ],
    "onnxReleaseGraph": [_HANDLE],
    "onnxSetIOAndRunGraph": [
        _HANDLE, C.c_uint32, C.POINTER(TensorDescriptor), C.c_uint32,
        C.POINTER(TensorDescriptor), C.POINTER(MemoryFence),
    ],
    "onnxWaitEvent": [_HANDLE],
    "onnxReleaseEvent": [_HANDLE],
    "onnxGetLastErrorMessage": [C.c_char_p, C.POINTER(C.c_size_t)],
    "onnxWaitEventFor": [
        _HANDLE, C.c_uint32, C.POINTER(C.c_int32), C.POINTER(_STATUS), C.c_char_p,
        C.POINTER(C.c_size_t),
    ],
    "onnxGetOutputShapesRUST": [
        _HANDLE, C.c_uint32, C.POINTER(TensorDescriptor), C.c_uint32,
        C.POINTER(TensorDescriptor),
    ],
}

_BUNDLED = "libonnxifi-rust.so"


def library_path():
    """Where the library is taken from: $ONNXIFI_RUST_LIB, else the copy bundled in this
    package, else `libonnxifi-rust.so` on the system's library path."""
    explicit = os.environ.get("ONNXIFI_RUST_LIB")
    if explicit:
        return explicit
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)), _BUNDLED)
    if os.path.exists(bundled):
        return bundled
    return _BUNDLED


class Library:
    """The loaded library with typed entry points; `check` turns a status into an exception."""

    def __init__(self, path=None):
        self.path = path or library_path()
        try:
            self.lib = C.CDLL(self.path)
        except OSError as e:
            raise OSError(
                f"cannot load the ONNXIFI library {self.path!r} ({e}); build it with "
                "`cargo build --release` and set ONNXIFI_RUST_LIB, or install the package "
                "with the library bundled"
            ) from None
        for name, args in _PROTOTYPES.items():
            f = getattr(self.lib, name)
            f.argtypes = args
            f.restype = _STATUS
            setattr(self, name, f)

    def last_error(self):
        """This thread's last error message from the library."""
        size = C.c_size_t(0)
        self.onnxGetLastErrorMessage(None, C.byref(size))
        buf = C.create_string_buffer(size.value)
        if self.onnxGetLastErrorMessage(buf, C.byref(size)) != SUCCESS:
            return ""
        return buf.value.decode("utf-8", "replace")

    def wait(self, event):
        """Waits for `event` (onnxWaitEventFor, no timeout); returns the status it carries
        and its message."""
        state = C.c_int32(0)
        status = _STATUS(0)
        size = C.c_size_t(4096)
        message = C.create_string_buffer(size.value)
        self.check("onnxWaitEventFor", self.onnxWaitEventFor(
            event, 0, C.byref(state), C.byref(status), message, C.byref(size)),
            (SUCCESS, FALLBACK))
        return status.value, message.value.decode("utf-8", "replace")

    def check(self, call, status, accept=(SUCCESS,)):
        """Raises OnnxifiError unless `status` is one of `accept`."""
        if status not in accept:
            raise OnnxifiError(call, status, self.last_error())
        return status


_LOADED = {}


def load(path=None):
    """The library at `path` (default: `library_path()`), loaded once per path."""
    key = path or library_path()
    if key not in _LOADED:
        _LOADED[key] = Library(key)
    return _LOADED[key]
