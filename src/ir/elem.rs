//! Element types as Rust types: the [`Elem`] trait ties each stored ONNX element type to its
//! Rust type and to its variant of [`TensorData`], so operators are written once, generic over
//! `T: Elem`, and dispatched over a tensor's dtype with [`dispatch_stored!`](crate::dispatch_stored).

use super::dtype::DataType;
use super::narrow::{
    self, F8E4M3Fn, F8E4M3FnUz, F8E5M2FnUz, F4E2M1, F8E5M2, F8E8M0, I2, I4, U2, U4,
};
use super::tensor::TensorData;
use half::{bf16, f16};

/// A Rust type that stores one ONNX element type.
pub trait Elem:
    Copy + Default + PartialEq + PartialOrd + std::fmt::Debug + Send + Sync + 'static
{
    /// The ONNX element type.
    const DTYPE: DataType;
    /// Bytes per element in ONNX's little-endian layout (1 for the sub-byte types).
    const SIZE: usize;
    /// Bits per element when serialised: `8 * SIZE`, or 4 and 2 for the sub-byte types, which
    /// pack several elements per byte, the first in the low bits.
    const BITS: usize;
    /// Reads one element from `SIZE` little-endian bytes.
    fn from_le(bytes: &[u8]) -> Self;
    /// Writes one element as `SIZE` little-endian bytes.
    fn write_le(self, out: &mut [u8]);
    /// The elements, if `data` holds this type.
    fn slice(data: &TensorData) -> Option<&[Self]>;
    /// The elements, mutably, if `data` holds this type.
    fn slice_mut(data: &mut TensorData) -> Option<&mut [Self]>;
    /// Wraps a vector as tensor data.
    fn into_data(v: Vec<Self>) -> TensorData;
    /// The value as f64 (booleans are 0 and 1; used by casts and shape arithmetic).
    fn to_f64(self) -> f64;
    /// The value from f64, as a numeric cast would give it (saturating for integers).
    fn from_f64(v: f64) -> Self;
    /// The value as an exact integer (floats truncate toward zero, saturating).
    fn to_i128(self) -> i128;
    /// The value from an integer (integers wrap like a C cast; floats round to nearest).
    fn from_i128(v: i128) -> Self;
}

/// The elements of a caller's or a pooled buffer (float32) as the type of variant `F32`; none
/// for the other element types.
macro_rules! caller_view {
    (F32, $c:ident, $elems:expr) => {
        $elems
    };
    ($other:ident, $c:ident, $elems:expr) => {{
        let _ = $c;
        None
    }};
}

macro_rules! impl_elem {
    ($variant:ident, $t:ty, $size:expr, $to:expr, $from:expr, $read:expr, $write:expr,
     $to_int:expr, $from_int:expr) => {
        impl_elem!(
            $variant,
            $t,
            $size,
            8 * $size,
            $to,
            $from,
            $read,
            $write,
            $to_int,
            $from_int
        );
    };
    ($variant:ident, $t:ty, $size:expr, $bits:expr, $to:expr, $from:expr, $read:expr,
     $write:expr, $to_int:expr, $from_int:expr) => {
        impl Elem for $t {
            const DTYPE: DataType = DataType::$variant;
            const SIZE: usize = $size;
            const BITS: usize = $bits;
            fn from_le(bytes: &[u8]) -> Self {
                let read: fn(&[u8]) -> $t = $read;
                read(bytes)
            }
            fn write_le(self, out: &mut [u8]) {
                let write: fn($t, &mut [u8]) = $write;
                write(self, out)
            }
            fn slice(data: &TensorData) -> Option<&[Self]> {
                match data {
                    TensorData::$variant(v) => Some(v),
                    TensorData::Caller(c) => caller_view!($variant, c, Some(c.as_slice())),
                    TensorData::Pooled(p) => caller_view!($variant, p, Some(p.as_slice())),
                    _ => None,
                }
            }
            fn slice_mut(data: &mut TensorData) -> Option<&mut [Self]> {
                match data {
                    TensorData::$variant(v) => Some(v),
                    TensorData::Caller(c) => caller_view!($variant, c, c.as_mut_slice()),
                    TensorData::Pooled(p) => caller_view!($variant, p, Some(p.as_mut_slice())),
                    _ => None,
                }
            }
            fn into_data(v: Vec<Self>) -> TensorData {
                TensorData::$variant(v)
            }
            fn to_f64(self) -> f64 {
                let to: fn($t) -> f64 = $to;
                to(self)
            }
            fn from_f64(v: f64) -> Self {
                let from: fn(f64) -> $t = $from;
                from(v)
            }
            fn to_i128(self) -> i128 {
                let to: fn($t) -> i128 = $to_int;
                to(self)
            }
            fn from_i128(v: i128) -> Self {
                let from: fn(i128) -> $t = $from_int;
                from(v)
            }
        }
    };
}

macro_rules! impl_num {
    ($variant:ident, $t:ty, $size:expr) => {
        impl_elem!(
            $variant,
            $t,
            $size,
            |x| x as f64,
            |v| v as $t,
            |b| <$t>::from_le_bytes(b[..$size].try_into().expect("element bytes")),
            |x, out| out[..$size].copy_from_slice(&x.to_le_bytes()),
            |x| x as i128,
            |v| v as $t
        );
    };
}

impl_num!(F32, f32, 4);
impl_num!(F64, f64, 8);
impl_num!(I8, i8, 1);
impl_num!(U8, u8, 1);
impl_num!(I16, i16, 2);
impl_num!(U16, u16, 2);
impl_num!(I32, i32, 4);
impl_num!(U32, u32, 4);
impl_num!(I64, i64, 8);
impl_num!(U64, u64, 8);
impl_elem!(
    F16,
    f16,
    2,
    |x| x.to_f64(),
    f16::from_f64,
    |b| f16::from_le_bytes([b[0], b[1]]),
    |x, out| out[..2].copy_from_slice(&x.to_le_bytes()),
    |x| x.to_f64() as i128,
    |v| f16::from_f64(v as f64)
);
impl_elem!(
    BF16,
    bf16,
    2,
    |x| x.to_f64(),
    bf16::from_f64,
    |b| bf16::from_le_bytes([b[0], b[1]]),
    |x, out| out[..2].copy_from_slice(&x.to_le_bytes()),
    |x| x.to_f64() as i128,
    |v| bf16::from_f64(v as f64)
);
impl_elem!(
    Bool,
    bool,
    1,
    |x| if x { 1.0 } else { 0.0 },
    |v| v != 0.0,
    |b| b[0] != 0,
    |x, out| out[0] = x as u8,
    |x| x as i128,
    |v| v != 0
);

/// Implements [`Elem`] for a minifloat newtype (saturating conversions, as `Cast` by default).
macro_rules! impl_minifloat {
    ($variant:ident, $bits:expr) => {
        impl_elem!(
            $variant,
            $variant,
            1,
            $bits,
            |x| f64::from(x.to_f32()),
            |v| $variant::from_f32(v as f32, true),
            |b| $variant(b[0] & (((1u16 << $bits) - 1) as u8)),
            |x, out| out[0] = x.0,
            |x| narrow::truncate(f64::from(x.to_f32())),
            |v| $variant::from_f32(v as f32, true)
        );
    };
}

impl_minifloat!(F8E4M3Fn, 8);
impl_minifloat!(F8E4M3FnUz, 8);
impl_minifloat!(F8E5M2, 8);
impl_minifloat!(F8E5M2FnUz, 8);
impl_minifloat!(F4E2M1, 4);
impl_elem!(
    F8E8M0,
    F8E8M0,
    1,
    |x| f64::from(x.to_f32()),
    |v| F8E8M0(narrow::encode_e8m0(
        v as f32,
        true,
        narrow::E8M0Rounding::Up
    )),
    |b| F8E8M0(b[0]),
    |x, out| out[0] = x.0,
    |x| narrow::truncate(f64::from(x.to_f32())),
    |v| F8E8M0(narrow::encode_e8m0(
        v as f32,
        true,
        narrow::E8M0Rounding::Up
    ))
);

/// Implements [`Elem`] for a narrow integer newtype.
macro_rules! impl_narrow_int {
    ($variant:ident, $bits:expr) => {
        impl_elem!(
            $variant,
            $variant,
            1,
            $bits,
            |x| f64::from(x.0),
            |v| $variant::wrapping(narrow::truncate(v)),
            |b| $variant::from_bits(b[0]),
            |x, out| out[0] = x.bits(),
            |x| i128::from(x.0),
            $variant::wrapping
        );
    };
}

impl_narrow_int!(I4, 4);
impl_narrow_int!(U4, 4);
impl_narrow_int!(I2, 2);
impl_narrow_int!(U2, 2);

/// Runs `$body` with `$T` bound to the Rust type of a stored `DataType` (every type
/// [`TensorData`] holds, the narrow float8/float4/int4/int2 types included); `$other` names the dtype in the fallback expression for the rest.
#[macro_export]
macro_rules! dispatch_stored {
    ($dtype:expr, $T:ident => $body:expr, $other:ident => $fallback:expr) => {{
        use $crate::ir::DataType as __D;
        match $dtype {
            __D::F32 => {
                type $T = f32;
                $body
            }
            __D::F64 => {
                type $T = f64;
                $body
            }
            __D::F16 => {
                type $T = half::f16;
                $body
            }
            __D::BF16 => {
                type $T = half::bf16;
                $body
            }
            __D::I8 => {
                type $T = i8;
                $body
            }
            __D::U8 => {
                type $T = u8;
                $body
            }
            __D::I16 => {
                type $T = i16;
                $body
            }
            __D::U16 => {
                type $T = u16;
                $body
            }
            __D::I32 => {
                type $T = i32;
                $body
            }
            __D::U32 => {
                type $T = u32;
                $body
            }
            __D::I64 => {
                type $T = i64;
                $body
            }
            __D::U64 => {
                type $T = u64;
                $body
            }
            __D::Bool => {
                type $T = bool;
                $body
            }
            __D::F8E4M3Fn => {
                type $T = $crate::ir::narrow::F8E4M3Fn;
                $body
            }
            __D::F8E4M3FnUz => {
                type $T = $crate::ir::narrow::F8E4M3FnUz;
                $body
            }
            __D::F8E5M2 => {
                type $T = $crate::ir::narrow::F8E5M2;
                $body
            }
            __D::F8E5M2FnUz => {
                type $T = $crate::ir::narrow::F8E5M2FnUz;
                $body
            }
            __D::F8E8M0 => {
                type $T = $crate::ir::narrow::F8E8M0;
                $body
            }
            __D::F4E2M1 => {
                type $T = $crate::ir::narrow::F4E2M1;
                $body
            }
            __D::I4 => {
                type $T = $crate::ir::narrow::I4;
                $body
            }
            __D::U4 => {
                type $T = $crate::ir::narrow::U4;
                $body
            }
            __D::I2 => {
                type $T = $crate::ir::narrow::I2;
                $body
            }
            __D::U2 => {
                type $T = $crate::ir::narrow::U2;
                $body
            }
            $other => $fallback,
        }
    }};
}

/// Like [`dispatch_stored!`](crate::dispatch_stored) over the numeric types only (every stored
/// type but bool).
#[macro_export]
macro_rules! dispatch_numeric {
    ($dtype:expr, $T:ident => $body:expr, $other:ident => $fallback:expr) => {{
        use $crate::ir::DataType as __D;
        match $dtype {
            __D::F32 => {
                type $T = f32;
                $body
            }
            __D::F64 => {
                type $T = f64;
                $body
            }
            __D::F16 => {
                type $T = half::f16;
                $body
            }
            __D::BF16 => {
                type $T = half::bf16;
                $body
            }
            __D::I8 => {
                type $T = i8;
                $body
            }
            __D::U8 => {
                type $T = u8;
                $body
            }
            __D::I16 => {
                type $T = i16;
                $body
            }
            __D::U16 => {
                type $T = u16;
                $body
            }
            __D::I32 => {
                type $T = i32;
                $body
            }
            __D::U32 => {
                type $T = u32;
                $body
            }
            __D::I64 => {
                type $T = i64;
                $body
            }
            __D::U64 => {
                type $T = u64;
                $body
            }
            $other => $fallback,
        }
    }};
}

/// Like [`dispatch_stored!`](crate::dispatch_stored) over the floating-point types only.
#[macro_export]
macro_rules! dispatch_float {
    ($dtype:expr, $T:ident => $body:expr, $other:ident => $fallback:expr) => {{
        use $crate::ir::DataType as __D;
        match $dtype {
            __D::F32 => {
                type $T = f32;
                $body
            }
            __D::F64 => {
                type $T = f64;
                $body
            }
            __D::F16 => {
                type $T = half::f16;
                $body
            }
            __D::BF16 => {
                type $T = half::bf16;
                $body
            }
            $other => $fallback,
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn le_round_trip_per_type() {
        fn check<T: Elem>(x: T) {
            let mut b = vec![0u8; T::SIZE];
            x.write_le(&mut b);
            assert_eq!(T::from_le(&b), x);
            assert_eq!(T::into_data(vec![x]).dtype(), T::DTYPE);
            assert_eq!(T::DTYPE.size(), Some(T::SIZE));
        }
        check(1.5f32);
        check(-2.25f64);
        check(f16::from_f32(0.5));
        check(bf16::from_f32(-3.0));
        check(-7i8);
        check(200u8);
        check(-300i16);
        check(60000u16);
        check(-70000i32);
        check(4_000_000_000u32);
        check(-(1i64 << 40));
        check(u64::MAX);
        check(true);
    }

    #[test]
    fn dispatch_binds_the_rust_type() {
        fn size_of(dt: DataType) -> Option<usize> {
            dispatch_stored!(dt, T => Some(std::mem::size_of::<T>()), _o => None)
        }
        assert_eq!(size_of(DataType::F16), Some(2));
        assert_eq!(size_of(DataType::U64), Some(8));
        assert_eq!(size_of(DataType::Other(8)), None);
    }
}
