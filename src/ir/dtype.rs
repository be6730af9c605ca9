//! Element types: ONNX's `TensorProto.DataType` codes, their sizes and names.

/// Element types (values are ONNX's `TensorProto.DataType`, which ONNXIFI shares).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    /// 32-bit float.
    F32,
    /// 64-bit float.
    F64,
    /// 8-bit signed integer.
    I8,
    /// 8-bit unsigned integer.
    U8,
    /// 16-bit signed integer.
    I16,
    /// 16-bit unsigned integer.
    U16,
    /// 32-bit signed integer.
    I32,
    /// 32-bit unsigned integer.
    U32,
    /// 64-bit signed integer.
    I64,
    /// 64-bit unsigned integer.
    U64,
    /// Boolean, one byte each.
    Bool,
    /// IEEE half.
    F16,
    /// bfloat16.
    BF16,
    /// float8 e4m3fn.
    F8E4M3Fn,
    /// float8 e4m3fnuz.
    F8E4M3FnUz,
    /// float8 e5m2.
    F8E5M2,
    /// float8 e5m2fnuz.
    F8E5M2FnUz,
    /// float8 e8m0 (a power of two).
    F8E8M0,
    /// float4 e2m1 (packed two per byte when serialised).
    F4E2M1,
    /// 4-bit signed integer (packed two per byte when serialised).
    I4,
    /// 4-bit unsigned integer (packed two per byte when serialised).
    U4,
    /// 2-bit signed integer (packed four per byte when serialised).
    I2,
    /// 2-bit unsigned integer (packed four per byte when serialised).
    U2,
    /// Strings (stored, moved, cast and compared; no byte layout across the C ABI).
    String,
    /// A type ONNX defines that this backend stores nowhere (complex, float6).
    Other(i32),
}

impl DataType {
    /// Maps an ONNX/ONNXIFI data type code; `None` for codes ONNX does not define.
    pub fn from_code(code: i64) -> Option<DataType> {
        Some(match code {
            1 => DataType::F32,
            2 => DataType::U8,
            3 => DataType::I8,
            4 => DataType::U16,
            5 => DataType::I16,
            6 => DataType::I32,
            7 => DataType::I64,
            9 => DataType::Bool,
            10 => DataType::F16,
            11 => DataType::F64,
            12 => DataType::U32,
            13 => DataType::U64,
            16 => DataType::BF16,
            17 => DataType::F8E4M3Fn,
            18 => DataType::F8E4M3FnUz,
            19 => DataType::F8E5M2,
            20 => DataType::F8E5M2FnUz,
            21 => DataType::U4,
            22 => DataType::I4,
            23 => DataType::F4E2M1,
            24 => DataType::F8E8M0,
            25 => DataType::U2,
            26 => DataType::I2,
            8 => DataType::String,
            14 | 15 | 27 | 28 => DataType::Other(code as i32),
            _ => return None,
        })
    }

    /// The ONNX data type code.
    pub fn code(self) -> i32 {
        match self {
            DataType::F32 => 1,
            DataType::U8 => 2,
            DataType::I8 => 3,
            DataType::U16 => 4,
            DataType::I16 => 5,
            DataType::I32 => 6,
            DataType::I64 => 7,
            DataType::Bool => 9,
            DataType::F16 => 10,
            DataType::F64 => 11,
            DataType::U32 => 12,
            DataType::U64 => 13,
            DataType::BF16 => 16,
            DataType::F8E4M3Fn => 17,
            DataType::F8E4M3FnUz => 18,
            DataType::F8E5M2 => 19,
            DataType::F8E5M2FnUz => 20,
            DataType::U4 => 21,
            DataType::I4 => 22,
            DataType::F4E2M1 => 23,
            DataType::F8E8M0 => 24,
            DataType::U2 => 25,
            DataType::I2 => 26,
            DataType::String => 8,
            DataType::Other(c) => c,
        }
    }

    /// Bytes per element, for the stored types of at least one byte (`None` for sub-byte
    /// types, see [`DataType::byte_len`]).
    pub fn size(self) -> Option<usize> {
        match self.bits()? {
            bits if bits >= 8 => Some(bits / 8),
            _ => None,
        }
    }

    /// Bits per element when serialised, for the types this backend stores.
    pub fn bits(self) -> Option<usize> {
        Some(match self {
            DataType::F32 | DataType::I32 | DataType::U32 => 32,
            DataType::F64 | DataType::I64 | DataType::U64 => 64,
            DataType::I16 | DataType::U16 | DataType::F16 | DataType::BF16 => 16,
            DataType::I8
            | DataType::U8
            | DataType::Bool
            | DataType::F8E4M3Fn
            | DataType::F8E4M3FnUz
            | DataType::F8E5M2
            | DataType::F8E5M2FnUz
            | DataType::F8E8M0 => 8,
            DataType::F4E2M1 | DataType::I4 | DataType::U4 => 4,
            DataType::I2 | DataType::U2 => 2,
            DataType::String | DataType::Other(_) => return None,
        })
    }

    /// Bytes that `elements` elements take serialised (sub-byte types packed, the last byte
    /// padded); `None` for unstored types or on overflow.
    pub fn byte_len(self, elements: usize) -> Option<usize> {
        let bits = elements.checked_mul(self.bits()?)?;
        Some(bits.div_ceil(8))
    }

    /// Whether tensors of this type can be held by [`TensorData`].
    pub fn is_stored(self) -> bool {
        !matches!(self, DataType::Other(_))
    }

    /// Whether this is one of the narrow float8/float4/int4/int2 types, which are stored, moved
    /// and cast but not computed on.
    pub fn is_narrow(self) -> bool {
        self.is_stored()
            && !self.is_float()
            && !self.is_integer()
            && !matches!(self, DataType::Bool | DataType::String)
    }

    /// Whether this is a floating-point type (f16, bf16, f32, f64).
    pub fn is_float(self) -> bool {
        matches!(
            self,
            DataType::F32 | DataType::F64 | DataType::F16 | DataType::BF16
        )
    }

    /// Whether this is an integer type (signed or unsigned, any width).
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            DataType::I8
                | DataType::U8
                | DataType::I16
                | DataType::U16
                | DataType::I32
                | DataType::U32
                | DataType::I64
                | DataType::U64
        )
    }

    /// The ONNX spelling (`float`, `int64` …).
    pub fn name(self) -> String {
        match self {
            DataType::F32 => "float".into(),
            DataType::F64 => "double".into(),
            DataType::I8 => "int8".into(),
            DataType::U8 => "uint8".into(),
            DataType::I16 => "int16".into(),
            DataType::U16 => "uint16".into(),
            DataType::I32 => "int32".into(),
            DataType::U32 => "uint32".into(),
            DataType::I64 => "int64".into(),
            DataType::U64 => "uint64".into(),
            DataType::Bool => "bool".into(),
            DataType::F16 => "float16".into(),
            DataType::BF16 => "bfloat16".into(),
            DataType::F8E4M3Fn => "float8e4m3fn".into(),
            DataType::F8E4M3FnUz => "float8e4m3fnuz".into(),
            DataType::F8E5M2 => "float8e5m2".into(),
            DataType::F8E5M2FnUz => "float8e5m2fnuz".into(),
            DataType::F8E8M0 => "float8e8m0".into(),
            DataType::F4E2M1 => "float4e2m1".into(),
            DataType::U4 => "uint4".into(),
            DataType::I4 => "int4".into(),
            DataType::U2 => "uint2".into(),
            DataType::I2 => "int2".into(),
            DataType::String => "string".into(),
            DataType::Other(14) => "complex64".into(),
            DataType::Other(15) => "complex128".into(),
            DataType::Other(27) => "float6e2m3".into(),
            DataType::Other(28) => "float6e3m2".into(),
            DataType::Other(c) => format!("type#{c}"),
        }
    }
}
