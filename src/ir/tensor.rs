//! Element types and dense tensors.

use crate::error::{Error, Result, Status};
use crate::model::onnx::TensorProto;

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
    /// A type ONNX defines that this backend stores nowhere (strings, complex, float8, int4 …).
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
            8 | 14 | 15 | 17..=28 => DataType::Other(code as i32),
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
            DataType::Other(c) => c,
        }
    }

    /// Bytes per element, for the types this backend stores.
    pub fn size(self) -> Option<usize> {
        Some(match self {
            DataType::F32 | DataType::I32 | DataType::U32 => 4,
            DataType::F64 | DataType::I64 | DataType::U64 => 8,
            DataType::I8 | DataType::U8 | DataType::Bool => 1,
            DataType::I16 | DataType::U16 | DataType::F16 | DataType::BF16 => 2,
            DataType::Other(_) => return None,
        })
    }

    /// Whether tensors of this type can be held by [`TensorData`].
    pub fn is_stored(self) -> bool {
        matches!(
            self,
            DataType::F32
                | DataType::F64
                | DataType::I8
                | DataType::U8
                | DataType::I32
                | DataType::I64
                | DataType::Bool
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
            DataType::Other(c) => format!("type#{c}"),
        }
    }
}

/// Typed element storage.
#[derive(Clone, Debug, PartialEq)]
pub enum TensorData {
    /// 32-bit floats.
    F32(Vec<f32>),
    /// 64-bit floats.
    F64(Vec<f64>),
    /// 8-bit signed integers.
    I8(Vec<i8>),
    /// 8-bit unsigned integers.
    U8(Vec<u8>),
    /// 32-bit signed integers.
    I32(Vec<i32>),
    /// 64-bit signed integers.
    I64(Vec<i64>),
    /// Booleans.
    Bool(Vec<bool>),
}

/// Applies `$body` to the vector inside any [`TensorData`] variant, rebuilding the same variant.
#[macro_export]
macro_rules! map_tensor_data {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            $crate::ir::TensorData::F32($v) => $crate::ir::TensorData::F32($body),
            $crate::ir::TensorData::F64($v) => $crate::ir::TensorData::F64($body),
            $crate::ir::TensorData::I8($v) => $crate::ir::TensorData::I8($body),
            $crate::ir::TensorData::U8($v) => $crate::ir::TensorData::U8($body),
            $crate::ir::TensorData::I32($v) => $crate::ir::TensorData::I32($body),
            $crate::ir::TensorData::I64($v) => $crate::ir::TensorData::I64($body),
            $crate::ir::TensorData::Bool($v) => $crate::ir::TensorData::Bool($body),
        }
    };
}

impl TensorData {
    /// The element type.
    pub fn dtype(&self) -> DataType {
        match self {
            TensorData::F32(_) => DataType::F32,
            TensorData::F64(_) => DataType::F64,
            TensorData::I8(_) => DataType::I8,
            TensorData::U8(_) => DataType::U8,
            TensorData::I32(_) => DataType::I32,
            TensorData::I64(_) => DataType::I64,
            TensorData::Bool(_) => DataType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            TensorData::F32(v) => v.len(),
            TensorData::F64(v) => v.len(),
            TensorData::I8(v) => v.len(),
            TensorData::U8(v) => v.len(),
            TensorData::I32(v) => v.len(),
            TensorData::I64(v) => v.len(),
            TensorData::Bool(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Zero-filled storage of a type and length.
    pub fn zeros(dtype: DataType, len: usize) -> Result<TensorData> {
        Ok(match dtype {
            DataType::F32 => TensorData::F32(vec![0.0; len]),
            DataType::F64 => TensorData::F64(vec![0.0; len]),
            DataType::I8 => TensorData::I8(vec![0; len]),
            DataType::U8 => TensorData::U8(vec![0; len]),
            DataType::I32 => TensorData::I32(vec![0; len]),
            DataType::I64 => TensorData::I64(vec![0; len]),
            DataType::Bool => TensorData::Bool(vec![false; len]),
            other => {
                return Err(Error::new(
                    Status::UnsupportedDatatype,
                    format!("tensors of type {} are not supported", other.name()),
                ))
            }
        })
    }

    /// Decodes little-endian bytes.
    pub fn from_le_bytes(dtype: DataType, bytes: &[u8]) -> Result<TensorData> {
        fn chunks<const N: usize, T>(b: &[u8], f: impl Fn([u8; N]) -> T) -> Vec<T> {
            b.chunks_exact(N)
                .map(|c| f(c.try_into().expect("chunk of N")))
                .collect()
        }
        let size = dtype.size().unwrap_or(1);
        if !bytes.len().is_multiple_of(size) {
            return Err(Error::new(
                Status::InvalidModel,
                format!(
                    "{} bytes is not a whole number of {} elements",
                    bytes.len(),
                    dtype.name()
                ),
            ));
        }
        Ok(match dtype {
            DataType::F32 => TensorData::F32(chunks(bytes, f32::from_le_bytes)),
            DataType::F64 => TensorData::F64(chunks(bytes, f64::from_le_bytes)),
            DataType::I8 => TensorData::I8(bytes.iter().map(|&b| b as i8).collect()),
            DataType::U8 => TensorData::U8(bytes.to_vec()),
            DataType::I32 => TensorData::I32(chunks(bytes, i32::from_le_bytes)),
            DataType::I64 => TensorData::I64(chunks(bytes, i64::from_le_bytes)),
            DataType::Bool => TensorData::Bool(bytes.iter().map(|&b| b != 0).collect()),
            other => {
                return Err(Error::new(
                    Status::UnsupportedDatatype,
                    format!("tensors of type {} are not supported", other.name()),
                ))
            }
        })
    }

    /// Encodes as little-endian bytes into `out` (which must have the exact size).
    pub fn write_le_bytes(&self, out: &mut [u8]) {
        fn put<const N: usize, T: Copy>(v: &[T], out: &mut [u8], f: impl Fn(T) -> [u8; N]) {
            for (dst, &x) in out.chunks_exact_mut(N).zip(v) {
                dst.copy_from_slice(&f(x));
            }
        }
        match self {
            TensorData::F32(v) => put(v, out, f32::to_le_bytes),
            TensorData::F64(v) => put(v, out, f64::to_le_bytes),
            TensorData::I8(v) => put(v, out, i8::to_le_bytes),
            TensorData::U8(v) => out.copy_from_slice(v),
            TensorData::I32(v) => put(v, out, i32::to_le_bytes),
            TensorData::I64(v) => put(v, out, i64::to_le_bytes),
            TensorData::Bool(v) => put(v, out, |b: bool| [b as u8]),
        }
    }
}

/// A dense tensor: shape and data, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Dimensions, outermost first.
    pub shape: Vec<usize>,
    /// Elements.
    pub data: TensorData,
}

impl Tensor {
    /// Makes a tensor, checking that the data fits the shape.
    pub fn new(shape: Vec<usize>, data: TensorData) -> Result<Tensor> {
        let n = numel(&shape)?;
        if n != data.len() {
            return Err(Error::new(
                Status::InvalidShape,
                format!(
                    "shape {shape:?} holds {n} elements but the data has {}",
                    data.len()
                ),
            ));
        }
        Ok(Tensor { shape, data })
    }

    /// A float tensor.
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> Result<Tensor> {
        Tensor::new(shape, TensorData::F32(data))
    }

    /// The element type.
    pub fn dtype(&self) -> DataType {
        self.data.dtype()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The float elements, or an UNSUPPORTED_DATATYPE error.
    pub fn as_f32(&self) -> Result<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Ok(v),
            other => Err(Error::new(
                Status::UnsupportedDatatype,
                format!("expected a float tensor, got {}", other.dtype().name()),
            )),
        }
    }

    /// The elements as 64-bit integers (for shape-like inputs of type int32/int64).
    pub fn to_i64_vec(&self) -> Result<Vec<i64>> {
        match &self.data {
            TensorData::I64(v) => Ok(v.clone()),
            TensorData::I32(v) => Ok(v.iter().map(|&x| x as i64).collect()),
            other => Err(Error::new(
                Status::UnsupportedDatatype,
                format!("expected an integer tensor, got {}", other.dtype().name()),
            )),
        }
    }

    /// Decodes a `TensorProto` (raw or typed data; external data is refused).
    pub fn from_proto(t: &TensorProto) -> Result<Tensor> {
        let name = t.name.as_deref().unwrap_or("");
        let code = t.data_type.unwrap_or(0) as i64;
        let dtype = DataType::from_code(code).ok_or_else(|| {
            Error::new(
                Status::InvalidModel,
                format!("tensor '{name}' has unknown data type {code}"),
            )
        })?;
        if t.data_location == Some(1) || !t.external_data.is_empty() {
            return Err(Error::new(
                Status::UnsupportedAttribute,
                format!("tensor '{name}' keeps its data in an external file, which a model passed as bytes cannot reach"),
            ));
        }
        let mut shape = Vec::with_capacity(t.dims.len());
        for &d in &t.dims {
            if d < 0 {
                return Err(Error::new(
                    Status::InvalidModel,
                    format!("tensor '{name}' has a negative dimension {d}"),
                ));
            }
            shape.push(d as usize);
        }
        if !dtype.is_stored() {
            return Err(Error::new(
                Status::UnsupportedDatatype,
                format!(
                    "tensor '{name}' has type {}, which is not supported",
                    dtype.name()
                ),
            ));
        }
        let data = if let Some(raw) = &t.raw_data {
            TensorData::from_le_bytes(dtype, raw)?
        } else {
            match dtype {
                DataType::F32 => TensorData::F32(t.float_data.clone()),
                DataType::F64 => TensorData::F64(t.double_data.clone()),
                DataType::I64 => TensorData::I64(t.int64_data.clone()),
                DataType::I32 => TensorData::I32(t.int32_data.clone()),
                DataType::I8 => TensorData::I8(t.int32_data.iter().map(|&x| x as i8).collect()),
                DataType::U8 => TensorData::U8(t.int32_data.iter().map(|&x| x as u8).collect()),
                DataType::Bool => TensorData::Bool(t.int32_data.iter().map(|&x| x != 0).collect()),
                _ => unreachable!("checked by is_stored"),
            }
        };
        Tensor::new(shape, data).map_err(|e| {
            Error::new(
                Status::InvalidModel,
                format!("tensor '{name}': {}", e.message),
            )
        })
    }
}

/// Number of elements of a shape, refusing overflow.
pub fn numel(shape: &[usize]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| {
            Error::new(
                Status::UnsupportedShape,
                format!("shape {shape:?} is too large"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_and_typed_float_data_decode_the_same() {
        let raw = TensorProto {
            dims: vec![2],
            data_type: Some(1),
            raw_data: Some([1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat()),
            ..Default::default()
        };
        let typed = TensorProto {
            dims: vec![2],
            data_type: Some(1),
            float_data: vec![1.5, -2.0],
            ..Default::default()
        };
        assert_eq!(
            Tensor::from_proto(&raw).unwrap(),
            Tensor::from_proto(&typed).unwrap()
        );
    }

    #[test]
    fn length_mismatch_is_an_invalid_model() {
        let t = TensorProto {
            dims: vec![3],
            data_type: Some(1),
            float_data: vec![1.0],
            ..Default::default()
        };
        assert_eq!(
            Tensor::from_proto(&t).unwrap_err().status,
            Status::InvalidModel
        );
    }

    #[test]
    fn le_bytes_round_trip() {
        let d = TensorData::I64(vec![1, -2, 1 << 40]);
        let mut b = vec![0u8; 24];
        d.write_le_bytes(&mut b);
        assert_eq!(TensorData::from_le_bytes(DataType::I64, &b).unwrap(), d);
    }
}
