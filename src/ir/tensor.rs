//! Dense tensors: typed element storage ([`TensorData`]) and a shape ([`Tensor`]).

use super::caller::CallerF32;
use super::dtype::DataType;
use super::elem::Elem;
use super::narrow;
use super::pooled::PooledF32;
use crate::error::{Error, Result, Status};
use crate::model::onnx::TensorProto;

/// Generates [`TensorData`] and its per-variant methods from one list of (variant, Rust type).
macro_rules! tensor_data {
    ($($variant:ident $t:ty),+) => {
        /// Typed element storage: one vector per stored ONNX element type, or floats in a
        /// caller's buffer bound for one run.
        #[derive(Debug)]
        pub enum TensorData {
            $(
                #[doc = concat!("Elements of type `", stringify!($t), "`.")]
                $variant(Vec<$t>),
            )+
            /// Strings (ONNX stores bytes; text that is not UTF-8 is decoded lossily).
            String(Vec<String>),
            /// Float elements in a caller's buffer, used in place during one run (see
            /// [`CallerF32`]); of type float32 like [`TensorData::F32`].
            Caller(CallerF32),
            /// Float elements in a buffer of the run's pool, which may be longer (see
            /// [`PooledF32`]); of type float32 like [`TensorData::F32`]. Tensors leave a run
            /// as [`TensorData::F32`].
            Pooled(PooledF32),
        }

        /// Equal elements of the same type: the three float32 forms compare by their
        /// elements.
        impl PartialEq for TensorData {
            fn eq(&self, other: &TensorData) -> bool {
                if let (Some(a), Some(b)) = (f32::slice(self), f32::slice(other)) {
                    return a == b;
                }
                match (self, other) {
                    $((TensorData::$variant(a), TensorData::$variant(b)) => a == b,)+
                    (TensorData::String(a), TensorData::String(b)) => a == b,
                    _ => false,
                }
            }
        }

        /// A copy in storage of its own: a caller's buffer is copied into a vector, so that no
        /// clone refers to it.
        impl Clone for TensorData {
            fn clone(&self) -> TensorData {
                match self {
                    $(TensorData::$variant(v) => TensorData::$variant(v.clone()),)+
                    TensorData::String(v) => TensorData::String(v.clone()),
                    TensorData::Caller(c) => TensorData::F32(c.as_slice().to_vec()),
                    TensorData::Pooled(p) => TensorData::F32(p.as_slice().to_vec()),
                }
            }
        }

        impl TensorData {
            /// The element type.
            pub fn dtype(&self) -> DataType {
                match self {
                    $(TensorData::$variant(_) => DataType::$variant,)+
                    TensorData::String(_) => DataType::String,
                    TensorData::Caller(_) | TensorData::Pooled(_) => DataType::F32,
                }
            }

            /// Number of elements.
            pub fn len(&self) -> usize {
                match self {
                    $(TensorData::$variant(v) => v.len(),)+
                    TensorData::String(v) => v.len(),
                    TensorData::Caller(c) => c.len(),
                    TensorData::Pooled(p) => p.len(),
                }
            }

            /// Number of elements the storage holds without reallocating (0 for a caller's
            /// buffer, which is never kept for reuse).
            pub fn capacity(&self) -> usize {
                match self {
                    $(TensorData::$variant(v) => v.capacity(),)+
                    TensorData::String(v) => v.capacity(),
                    TensorData::Caller(_) => 0,
                    TensorData::Pooled(p) => p.capacity(),
                }
            }

            /// Zero-filled storage of a type and length; NO_SYSTEM_MEMORY instead of aborting
            /// when the allocation fails.
            pub fn zeros(dtype: DataType, len: usize) -> Result<TensorData> {
                match dtype {
                    $(DataType::$variant => Ok(TensorData::$variant(try_filled(len)?)),)+
                    DataType::String => Ok(TensorData::String(try_filled(len)?)),
                    other => Err(unsupported_type(other)),
                }
            }

            /// Resizes in place to `len` zero elements, keeping the allocation when it is large
            /// enough (fallible like [`TensorData::zeros`]).
            pub fn reset(&mut self, len: usize) -> Result<()> {
                match self {
                    $(TensorData::$variant(v) => refill(v, len),)+
                    TensorData::String(v) => refill(v, len),
                    TensorData::Caller(c) => caller_fill(c, len, true),
                    TensorData::Pooled(p) => {
                        p.set_len(len)?;
                        p.as_mut_slice().fill(0.0);
                        Ok(())
                    }
                }
            }

            /// Resizes in place to `len` elements, keeping the allocation when it is large enough
            /// and leaving the kept elements as they are (for storage its user overwrites
            /// entirely); fallible like [`TensorData::zeros`].
            pub fn resize_stale(&mut self, len: usize) -> Result<()> {
                match self {
                    $(TensorData::$variant(v) => resize_stale(v, len),)+
                    TensorData::String(v) => resize_stale(v, len),
                    TensorData::Caller(c) => caller_fill(c, len, false),
                    TensorData::Pooled(p) => p.set_len(len),
                }
            }

            /// Makes this storage a copy of `src`, in its own allocation when that is large
            /// enough and of the same type.
            pub fn copy_from(&mut self, src: &TensorData) {
                if let TensorData::Pooled(d) = self {
                    if let Some(s) = f32::slice(src) {
                        if d.set_len(s.len()).is_ok() {
                            d.as_mut_slice().copy_from_slice(s);
                            return;
                        }
                    }
                    *self = src.clone();
                    return;
                }
                if let TensorData::Caller(d) = self {
                    // Written in place when it fits; otherwise the copy gets storage of its own.
                    if let (Some(d), Some(s)) = (d.as_mut_slice(), f32::slice(src)) {
                        if d.len() == s.len() {
                            d.copy_from_slice(s);
                            return;
                        }
                    }
                    *self = src.clone();
                    return;
                }
                match (self, src) {
                    $((TensorData::$variant(d), TensorData::$variant(s)) => d.clone_from(s),)+
                    (TensorData::String(d), TensorData::String(s)) => d.clone_from(s),
                    (TensorData::F32(d), TensorData::Caller(s)) => {
                        d.clear();
                        d.extend_from_slice(s.as_slice());
                    }
                    (TensorData::F32(d), TensorData::Pooled(s)) => {
                        d.clear();
                        d.extend_from_slice(s.as_slice());
                    }
                    (d, s) => *d = s.clone(),
                }
            }

            /// Decodes `len` elements from little-endian bytes (sub-byte types packed, first
            /// element in the low bits); the byte count must match exactly. Strings have no
            /// byte layout (UNSUPPORTED_DATATYPE).
            pub fn from_le_bytes(dtype: DataType, bytes: &[u8], len: usize) -> Result<TensorData> {
                match dtype {
                    $(DataType::$variant => Ok(TensorData::$variant(decode_le::<$t>(bytes, len)?)),)+
                    other => Err(unsupported_type(other)),
                }
            }

            /// Replaces the elements with `len` elements decoded from little-endian bytes, like
            /// [`TensorData::from_le_bytes`] but into this storage (its allocation is reused
            /// when large enough, and nothing is zero-filled first).
            pub fn read_le_bytes(&mut self, bytes: &[u8], len: usize) -> Result<()> {
                match self {
                    $(TensorData::$variant(v) => decode_le_into::<$t>(v, bytes, len),)+
                    TensorData::String(_) => Err(unsupported_type(DataType::String)),
                    TensorData::Caller(_) => {
                        *self = TensorData::from_le_bytes(DataType::F32, bytes, len)?;
                        Ok(())
                    }
                    TensorData::Pooled(p) => {
                        if DataType::F32.byte_len(len) != Some(bytes.len()) {
                            return Err(Error::new(
                                Status::InvalidShape,
                                format!("{} bytes do not hold {len} float elements", bytes.len()),
                            ));
                        }
                        p.set_len(len)?;
                        for (d, b) in p.as_mut_slice().iter_mut().zip(bytes.chunks_exact(4)) {
                            *d = f32::from_le(b);
                        }
                        Ok(())
                    }
                }
            }

            /// Encodes as little-endian bytes into `out` (which must have the exact size, see
            /// [`DataType::byte_len`]; sub-byte types are packed, the padding bits zero). Strings
            /// have no byte layout and write nothing.
            pub fn write_le_bytes(&self, out: &mut [u8]) {
                match self {
                    $(TensorData::$variant(v) => encode_le(v, out),)+
                    TensorData::String(_) => {}
                    TensorData::Caller(c) => encode_le(c.as_slice(), out),
                    TensorData::Pooled(p) => encode_le(p.as_slice(), out),
                }
            }
        }
    };
}

tensor_data!(
    F32 f32, F64 f64, F16 half::f16, BF16 half::bf16, I8 i8, U8 u8, I16 i16, U16 u16, I32 i32,
    U32 u32, I64 i64, U64 u64, Bool bool, F8E4M3Fn narrow::F8E4M3Fn,
    F8E4M3FnUz narrow::F8E4M3FnUz, F8E5M2 narrow::F8E5M2, F8E5M2FnUz narrow::F8E5M2FnUz,
    F8E8M0 narrow::F8E8M0, F4E2M1 narrow::F4E2M1, I4 narrow::I4, U4 narrow::U4, I2 narrow::I2,
    U2 narrow::U2
);

fn unsupported_type(t: DataType) -> Error {
    Error::new(
        Status::UnsupportedDatatype,
        format!("tensors of type {} are not supported", t.name()),
    )
}

fn out_of_memory(elements: usize) -> Error {
    Error::new(
        Status::NoSystemMemory,
        format!("cannot allocate a tensor of {elements} elements"),
    )
}

/// `len` default elements, allocated fallibly.
pub fn try_filled<T: Clone + Default>(len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| out_of_memory(len))?;
    v.resize(len, T::default());
    Ok(v)
}

/// [`TensorData::reset`] (zeroed) or [`TensorData::resize_stale`] of a caller's buffer, whose
/// length is fixed: only the same length fits, and only an output's buffer can be zeroed.
fn caller_fill(c: &mut CallerF32, len: usize, zeroed: bool) -> Result<()> {
    if c.len() != len {
        return Err(Error::new(
            Status::InternalError,
            format!("a bound buffer of {} elements cannot hold {len}", c.len()),
        ));
    }
    if zeroed {
        c.as_mut_slice()
            .ok_or_else(|| Error::new(Status::InternalError, "an input buffer is never written"))?
            .fill(0.0);
    }
    Ok(())
}

fn refill<T: Clone + Default>(v: &mut Vec<T>, len: usize) -> Result<()> {
    v.clear();
    v.try_reserve_exact(len).map_err(|_| out_of_memory(len))?;
    v.resize(len, T::default());
    Ok(())
}

fn resize_stale<T: Clone + Default>(v: &mut Vec<T>, len: usize) -> Result<()> {
    if len > v.len() {
        v.try_reserve_exact(len - v.len())
            .map_err(|_| out_of_memory(len))?;
    }
    v.resize(len, T::default());
    Ok(())
}

fn decode_le<T: Elem>(bytes: &[u8], len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    decode_le_into(&mut v, bytes, len)?;
    Ok(v)
}

/// Decodes `len` elements from `bytes` into `v` (cleared first; its allocation reused).
fn decode_le_into<T: Elem>(v: &mut Vec<T>, bytes: &[u8], len: usize) -> Result<()> {
    if T::DTYPE.byte_len(len) != Some(bytes.len()) {
        return Err(Error::new(
            Status::InvalidShape,
            format!(
                "{} bytes do not hold {len} {} elements",
                bytes.len(),
                T::DTYPE.name()
            ),
        ));
    }
    v.clear();
    v.try_reserve_exact(len).map_err(|_| out_of_memory(len))?;
    if T::BITS >= 8 {
        v.extend(bytes.chunks_exact(T::SIZE).map(T::from_le));
    } else {
        let per_byte = 8 / T::BITS;
        v.extend((0..len).map(|i| {
            let shifted = bytes[i / per_byte] >> ((i % per_byte) * T::BITS);
            T::from_le(&[shifted])
        }));
    }
    Ok(())
}

fn encode_le<T: Elem>(v: &[T], out: &mut [u8]) {
    if T::BITS >= 8 {
        for (dst, &x) in out.chunks_exact_mut(T::SIZE).zip(v) {
            x.write_le(dst);
        }
        return;
    }
    out.fill(0);
    let per_byte = 8 / T::BITS;
    let mask = (1u16 << T::BITS) as u8 - 1;
    for (i, &x) in v.iter().enumerate() {
        let mut bits = [0u8];
        x.write_le(&mut bits);
        out[i / per_byte] |= (bits[0] & mask) << ((i % per_byte) * T::BITS);
    }
}

impl TensorData {
    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
        self.as_slice::<f32>()
    }

    /// The elements as `T`, or an UNSUPPORTED_DATATYPE error naming both types.
    pub fn as_slice<T: Elem>(&self) -> Result<&[T]> {
        T::slice(&self.data).ok_or_else(|| {
            Error::new(
                Status::UnsupportedDatatype,
                format!(
                    "expected a {} tensor, got {}",
                    T::DTYPE.name(),
                    self.dtype().name()
                ),
            )
        })
    }

    /// The elements as `T`, mutably.
    pub fn as_mut_slice<T: Elem>(&mut self) -> Result<&mut [T]> {
        let have = self.dtype();
        T::slice_mut(&mut self.data).ok_or_else(|| {
            Error::new(
                Status::InternalError,
                format!("expected a {} tensor, got {}", T::DTYPE.name(), have.name()),
            )
        })
    }

    /// A tensor of the given shape from a vector of elements.
    pub fn from_vec<T: Elem>(shape: Vec<usize>, v: Vec<T>) -> Result<Tensor> {
        Tensor::new(shape, T::into_data(v))
    }

    /// The elements as 64-bit integers (for shape-like inputs of any integer type).
    pub fn to_i64_vec(&self) -> Result<Vec<i64>> {
        match &self.data {
            TensorData::I64(v) => Ok(v.clone()),
            TensorData::I32(v) => Ok(v.iter().map(|&x| x as i64).collect()),
            TensorData::I16(v) => Ok(v.iter().map(|&x| x as i64).collect()),
            TensorData::I8(v) => Ok(v.iter().map(|&x| x as i64).collect()),
            TensorData::U8(v) => Ok(v.iter().map(|&x| x as i64).collect()),
            TensorData::U16(v) => Ok(v.iter().map(|&x| x as i64).collect()),
            TensorData::U32(v) => Ok(v.iter().map(|&x| x as i64).collect()),
            TensorData::U64(v) => Ok(v.iter().map(|&x| x as i64).collect()),
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
        let invalid = |e: Error| {
            Error::new(
                Status::InvalidModel,
                format!("tensor '{name}': {}", e.message),
            )
        };
        let len = numel(&shape).map_err(invalid)?;
        let data = if let Some(raw) = &t.raw_data {
            TensorData::from_le_bytes(dtype, raw, len).map_err(invalid)?
        } else if dtype == DataType::String {
            if t.string_data.len() != len {
                return Err(invalid(Error::new(
                    Status::InvalidModel,
                    format!("{} strings for {len} elements", t.string_data.len()),
                )));
            }
            TensorData::String(
                t.string_data
                    .iter()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .collect(),
            )
        } else if dtype.is_narrow() {
            // One element (float8) or one packed byte (sub-byte types) per int32.
            let bytes: Vec<u8> = t.int32_data.iter().map(|&x| x as u8).collect();
            let len = if dtype.size().is_some() {
                bytes.len()
            } else {
                len
            };
            TensorData::from_le_bytes(dtype, &bytes, len).map_err(invalid)?
        } else {
            let i32s = || t.int32_data.iter();
            match dtype {
                DataType::F32 => TensorData::F32(t.float_data.clone()),
                DataType::F64 => TensorData::F64(t.double_data.clone()),
                DataType::I64 => TensorData::I64(t.int64_data.clone()),
                DataType::I32 => TensorData::I32(t.int32_data.clone()),
                DataType::I16 => TensorData::I16(i32s().map(|&x| x as i16).collect()),
                DataType::U16 => TensorData::U16(i32s().map(|&x| x as u16).collect()),
                DataType::I8 => TensorData::I8(i32s().map(|&x| x as i8).collect()),
                DataType::U8 => TensorData::U8(i32s().map(|&x| x as u8).collect()),
                DataType::Bool => TensorData::Bool(i32s().map(|&x| x != 0).collect()),
                // Half types keep their bit patterns in int32_data.
                DataType::F16 => {
                    TensorData::F16(i32s().map(|&x| half::f16::from_bits(x as u16)).collect())
                }
                DataType::BF16 => {
                    TensorData::BF16(i32s().map(|&x| half::bf16::from_bits(x as u16)).collect())
                }
                DataType::U32 => TensorData::U32(t.uint64_data.iter().map(|&x| x as u32).collect()),
                DataType::U64 => TensorData::U64(t.uint64_data.clone()),
                other => return Err(invalid(unsupported_type(other))),
            }
        };
        Tensor::new(shape, data).map_err(invalid)
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

/// The row-major strides of a tensor of shape `shape`, in elements: the last axis 1, each
/// other the product of the sizes after it (saturating, for shapes not yet checked).
pub fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut s = 1usize;
    for d in (0..shape.len()).rev() {
        strides[d] = s;
        s = s.saturating_mul(shape[d]);
    }
    strides
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
        assert_eq!(TensorData::from_le_bytes(DataType::I64, &b, 3).unwrap(), d);
    }

    #[test]
    fn sub_byte_types_pack_low_bits_first() {
        use super::super::narrow::{I4, U2};
        // Three int4 values -1, 2, -8 pack as 0x2F, 0x08 (the last high nibble is padding).
        let d = TensorData::I4(vec![I4(-1), I4(2), I4(-8)]);
        let mut b = vec![0xAAu8; 2];
        d.write_le_bytes(&mut b);
        assert_eq!(b, [0x2f, 0x08]);
        assert_eq!(TensorData::from_le_bytes(DataType::I4, &b, 3).unwrap(), d);
        // Five uint2 values 1, 2, 3, 0, 1 pack as 0b00_11_10_01, 0b01.
        let d = TensorData::U2(vec![U2(1), U2(2), U2(3), U2(0), U2(1)]);
        let mut b = vec![0u8; 2];
        d.write_le_bytes(&mut b);
        assert_eq!(b, [0b0011_1001, 0b01]);
        assert_eq!(TensorData::from_le_bytes(DataType::U2, &b, 5).unwrap(), d);
        assert!(TensorData::from_le_bytes(DataType::U2, &b, 9).is_err());
    }
}
