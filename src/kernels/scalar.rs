//! Arithmetic on every numeric element type, written once: [`Scalar`] gives the operations the
//! generic element-wise kernels need with the semantics ONNX (and numpy) give them: integers wrap
//! and an integer division by zero gives 0 instead of trapping; half types compute in f32;
//! `max`/`min` propagate NaN.

use half::{bf16, f16};

/// A numeric element type.
pub trait Scalar: Copy + PartialOrd + Default + Send + Sync + 'static {
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// Whether the type is a floating-point type.
    const FLOAT: bool;
    /// `self + o`.
    fn add(self, o: Self) -> Self;
    /// `self - o`.
    fn sub(self, o: Self) -> Self;
    /// `self * o`.
    fn mul(self, o: Self) -> Self;
    /// `self / o` (integers: truncating, 0 when `o` is 0).
    fn div(self, o: Self) -> Self;
    /// The remainder with the sign of the divisor (integer `Mod` with `fmod = 0`).
    fn modulo(self, o: Self) -> Self;
    /// The remainder with the sign of the dividend (C's `fmod`, `Mod` with `fmod = 1`).
    fn fmod(self, o: Self) -> Self;
    /// `-self` (wrapping for integers).
    fn neg(self) -> Self;
    /// `|self|` (wrapping for the most negative integer).
    fn abs(self) -> Self;
    /// The larger value; NaN if either is NaN.
    fn max_nan(self, o: Self) -> Self;
    /// The smaller value; NaN if either is NaN.
    fn min_nan(self, o: Self) -> Self;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
    /// The value as f64.
    fn as_f64(self) -> f64;
    /// The value from f64 (saturating for integers, NaN to 0).
    fn of_f64(v: f64) -> Self;
}

macro_rules! int_scalar {
    ($($t:ty),+) => {$(
        impl Scalar for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const FLOAT: bool = false;
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn sub(self, o: Self) -> Self { self.wrapping_sub(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            fn div(self, o: Self) -> Self { self.checked_div(o).unwrap_or(0) }
            fn modulo(self, o: Self) -> Self {
                let r = self.checked_rem(o).unwrap_or(0);
                #[allow(unused_comparisons)]
                let opposite = r != 0 && ((r < 0) != (o < 0));
                if opposite { r.wrapping_add(o) } else { r }
            }
            fn fmod(self, o: Self) -> Self { self.checked_rem(o).unwrap_or(0) }
            fn neg(self) -> Self { (0 as $t).wrapping_sub(self) }
            #[allow(unused_comparisons)]
            fn abs(self) -> Self { if self < 0 { self.neg() } else { self } }
            fn max_nan(self, o: Self) -> Self { if o > self { o } else { self } }
            fn min_nan(self, o: Self) -> Self { if o < self { o } else { self } }
            fn is_nan(self) -> bool { false }
            fn as_f64(self) -> f64 { self as f64 }
            fn of_f64(v: f64) -> Self { v as $t }
        }
    )+};
}

int_scalar!(i8, u8, i16, u16, i32, u32, i64, u64);

macro_rules! float_scalar {
    ($($t:ty),+) => {$(
        impl Scalar for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const FLOAT: bool = true;
            fn add(self, o: Self) -> Self { self + o }
            fn sub(self, o: Self) -> Self { self - o }
            fn mul(self, o: Self) -> Self { self * o }
            fn div(self, o: Self) -> Self { self / o }
            fn modulo(self, o: Self) -> Self {
                let r = self % o;
                if r != 0.0 && ((r < 0.0) != (o < 0.0)) { r + o } else { r }
            }
            fn fmod(self, o: Self) -> Self { self % o }
            fn neg(self) -> Self { -self }
            fn abs(self) -> Self { self.abs() }
            fn max_nan(self, o: Self) -> Self {
                if self.is_nan() || o.is_nan() { <$t>::NAN } else { self.max(o) }
            }
            fn min_nan(self, o: Self) -> Self {
                if self.is_nan() || o.is_nan() { <$t>::NAN } else { self.min(o) }
            }
            fn is_nan(self) -> bool { self.is_nan() }
            fn as_f64(self) -> f64 { self as f64 }
            fn of_f64(v: f64) -> Self { v as $t }
        }
    )+};
}

float_scalar!(f32, f64);

macro_rules! half_scalar {
    ($($t:ty),+) => {$(
        impl Scalar for $t {
            const ZERO: Self = <$t>::ZERO;
            const ONE: Self = <$t>::ONE;
            const FLOAT: bool = true;
            fn add(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() + o.to_f32()) }
            fn sub(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() - o.to_f32()) }
            fn mul(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() * o.to_f32()) }
            fn div(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() / o.to_f32()) }
            fn modulo(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32().modulo(o.to_f32()))
            }
            fn fmod(self, o: Self) -> Self { <$t>::from_f32(self.to_f32() % o.to_f32()) }
            fn neg(self) -> Self { -self }
            fn abs(self) -> Self { <$t>::from_f32(self.to_f32().abs()) }
            fn max_nan(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32().max_nan(o.to_f32()))
            }
            fn min_nan(self, o: Self) -> Self {
                <$t>::from_f32(self.to_f32().min_nan(o.to_f32()))
            }
            fn is_nan(self) -> bool { self.is_nan() }
            fn as_f64(self) -> f64 { self.to_f64() }
            fn of_f64(v: f64) -> Self { <$t>::from_f64(v) }
        }
    )+};
}

half_scalar!(f16, bf16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_semantics() {
        assert_eq!(7i64.div(0), 0);
        assert_eq!((-7i32).div(2), -3);
        assert_eq!((-7i32).modulo(3), 2);
        assert_eq!(7i32.modulo(-3), -2);
        assert_eq!((-7i32).fmod(3), -1);
        assert_eq!(5u8.modulo(3), 2);
        assert_eq!(Scalar::abs(i8::MIN), i8::MIN);
        assert_eq!(250u8.add(10), 4);
        assert_eq!(3u32.neg(), u32::MAX - 2);
    }

    #[test]
    fn float_semantics() {
        assert_eq!((-7.5f32).modulo(2.0), 0.5);
        assert_eq!((-7.5f64).fmod(2.0), -1.5);
        assert!(1.0f32.max_nan(f32::NAN).is_nan());
        assert_eq!(
            f16::from_f32(1.5).add(f16::from_f32(2.0)),
            f16::from_f32(3.5)
        );
        assert_eq!(bf16::of_f64(2.0).mul(bf16::ONE), bf16::from_f32(2.0));
    }
}
