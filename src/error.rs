//! Status codes (one per `ONNXIFI_STATUS_*`) and the crate's error type.
#![forbid(unsafe_code)]

use std::fmt;

/// Every status an ONNXIFI function can return, with the header's numeric values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Status {
    /// The call succeeded.
    Success = 0x0000,
    /// Success with a caveat (size protocol: value not stored; or emulated execution).
    Fallback = 0x0001,
    /// The backend ID is invalid.
    InvalidId = 0x0101,
    /// A size argument is invalid (zero).
    InvalidSize = 0x0102,
    /// A pointer argument is NULL or otherwise invalid.
    InvalidPointer = 0x0103,
    /// The model bytes are not a valid protobuf.
    InvalidProtobuf = 0x0104,
    /// The model breaks a rule of the ONNX specification.
    InvalidModel = 0x0105,
    /// The backend handle is invalid.
    InvalidBackend = 0x0106,
    /// The graph handle is invalid.
    InvalidGraph = 0x0107,
    /// The event handle is invalid.
    InvalidEvent = 0x0108,
    /// The object is in a state that forbids the call (an event signalled twice).
    InvalidState = 0x0109,
    /// A tensor name is unknown or duplicated.
    InvalidName = 0x010A,
    /// A tensor shape is invalid (a zero dimension).
    InvalidShape = 0x010B,
    /// A data type value is unknown.
    InvalidDatatype = 0x010C,
    /// A memory type value is unknown.
    InvalidMemoryType = 0x010D,
    /// A buffer location is invalid (NULL).
    InvalidMemoryLocation = 0x010E,
    /// A fence type value is unknown.
    InvalidFenceType = 0x010F,
    /// A property value is invalid.
    InvalidProperty = 0x0110,
    /// A structure tag is not the one this version knows.
    UnsupportedTag = 0x0201,
    /// The IR or opset version is not supported.
    UnsupportedVersion = 0x0202,
    /// An operator is not supported.
    UnsupportedOperator = 0x0203,
    /// An attribute or attribute value is not supported (also: an unknown info query).
    UnsupportedAttribute = 0x0204,
    /// A shape is not supported.
    UnsupportedShape = 0x0205,
    /// A data type is not supported.
    UnsupportedDatatype = 0x0206,
    /// A memory type is not supported.
    UnsupportedMemoryType = 0x0207,
    /// A fence type is not supported.
    UnsupportedFenceType = 0x0208,
    /// A property key is not supported.
    UnsupportedProperty = 0x0209,
    /// A graph input or output has no descriptor, or I/O has not been set.
    UnidentifiedName = 0x0301,
    /// A shape contradicts the model.
    MismatchingShape = 0x0302,
    /// A data type contradicts the model.
    MismatchingDatatype = 0x0303,
    /// System memory ran out.
    NoSystemMemory = 0x0401,
    /// Device memory ran out.
    NoDeviceMemory = 0x0402,
    /// A system resource (a thread) could not be had.
    NoSystemResources = 0x0403,
    /// A device resource could not be had.
    NoDeviceResources = 0x0404,
    /// The backend is gone.
    BackendUnavailable = 0x0405,
    /// A bug or unexpected condition inside the backend.
    InternalError = 0x0406,
}

impl Status {
    /// Every status, in code order.
    pub const ALL: [Status; 36] = {
        use Status::*;
        [
            Success,
            Fallback,
            InvalidId,
            InvalidSize,
            InvalidPointer,
            InvalidProtobuf,
            InvalidModel,
            InvalidBackend,
            InvalidGraph,
            InvalidEvent,
            InvalidState,
            InvalidName,
            InvalidShape,
            InvalidDatatype,
            InvalidMemoryType,
            InvalidMemoryLocation,
            InvalidFenceType,
            InvalidProperty,
            UnsupportedTag,
            UnsupportedVersion,
            UnsupportedOperator,
            UnsupportedAttribute,
            UnsupportedShape,
            UnsupportedDatatype,
            UnsupportedMemoryType,
            UnsupportedFenceType,
            UnsupportedProperty,
            UnidentifiedName,
            MismatchingShape,
            MismatchingDatatype,
            NoSystemMemory,
            NoDeviceMemory,
            NoSystemResources,
            NoDeviceResources,
            BackendUnavailable,
            InternalError,
        ]
    };

    /// The status with this numeric value, if the header defines one.
    pub fn from_code(code: i32) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.code() == code)
    }

    /// The numeric value returned through the C ABI.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The header's name for this status, without the `ONNXIFI_STATUS_` prefix.
    pub fn name(self) -> &'static str {
        use Status::*;
        match self {
            Success => "SUCCESS",
            Fallback => "FALLBACK",
            InvalidId => "INVALID_ID",
            InvalidSize => "INVALID_SIZE",
            InvalidPointer => "INVALID_POINTER",
            InvalidProtobuf => "INVALID_PROTOBUF",
            InvalidModel => "INVALID_MODEL",
            InvalidBackend => "INVALID_BACKEND",
            InvalidGraph => "INVALID_GRAPH",
            InvalidEvent => "INVALID_EVENT",
            InvalidState => "INVALID_STATE",
            InvalidName => "INVALID_NAME",
            InvalidShape => "INVALID_SHAPE",
            InvalidDatatype => "INVALID_DATATYPE",
            InvalidMemoryType => "INVALID_MEMORY_TYPE",
            InvalidMemoryLocation => "INVALID_MEMORY_LOCATION",
            InvalidFenceType => "INVALID_FENCE_TYPE",
            InvalidProperty => "INVALID_PROPERTY",
            UnsupportedTag => "UNSUPPORTED_TAG",
            UnsupportedVersion => "UNSUPPORTED_VERSION",
            UnsupportedOperator => "UNSUPPORTED_OPERATOR",
            UnsupportedAttribute => "UNSUPPORTED_ATTRIBUTE",
            UnsupportedShape => "UNSUPPORTED_SHAPE",
            UnsupportedDatatype => "UNSUPPORTED_DATATYPE",
            UnsupportedMemoryType => "UNSUPPORTED_MEMORY_TYPE",
            UnsupportedFenceType => "UNSUPPORTED_FENCE_TYPE",
            UnsupportedProperty => "UNSUPPORTED_PROPERTY",
            UnidentifiedName => "UNIDENTIFIED_NAME",
            MismatchingShape => "MISMATCHING_SHAPE",
            MismatchingDatatype => "MISMATCHING_DATATYPE",
            NoSystemMemory => "NO_SYSTEM_MEMORY",
            NoDeviceMemory => "NO_DEVICE_MEMORY",
            NoSystemResources => "NO_SYSTEM_RESOURCES",
            NoDeviceResources => "NO_DEVICE_RESOURCES",
            BackendUnavailable => "BACKEND_UNAVAILABLE",
            InternalError => "INTERNAL_ERROR",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An error: the status the C caller sees, and a message for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The ONNXIFI status this error maps to.
    pub status: Status,
    /// What went wrong, naming the node, value or argument involved.
    pub message: String,
}

impl Error {
    /// Makes an error from a status and a message.
    pub fn new(status: Status, message: impl Into<String>) -> Self {
        Error {
            status,
            message: message.into(),
        }
    }

    /// Prefixes the message with where the error happened (a node, a value).
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl std::error::Error for Error {}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// Returns early with an error of the given status and formatted message.
#[macro_export]
macro_rules! bail {
    ($status:ident, $($fmt:tt)+) => {
        return Err($crate::error::Error::new($crate::error::Status::$status, format!($($fmt)+)))
    };
}
