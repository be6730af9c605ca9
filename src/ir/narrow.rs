//! Narrow element types: the 8- and 4-bit floats (float8 e4m3fn, e4m3fnuz, e5m2, e5m2fnuz,
//! e8m0 and float4 e2m1) and the 4- and 2-bit integers. Each is a one-byte newtype holding the
//! format's bit pattern (floats) or its value (integers); sub-byte types are packed only in
//! serialised form (raw data, caller buffers), see [`Elem::BITS`](super::Elem::BITS).
//!
//! Conversions follow the ONNX `Cast` rules: round to nearest even; with `saturate`
//! out-of-range values and infinities become the largest finite value, without it they become
//! infinity where the format has one and NaN otherwise. Integers from floats truncate toward zero
//! and keep the low bits, like every other integer cast.

use std::cmp::Ordering;

/// Where a minifloat format keeps its special values.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Specials {
    /// IEEE-like: the all-ones exponent holds infinities and NaNs (e5m2).
    Ieee,
    /// Finite only; the all-ones pattern (either sign) is NaN (e4m3fn).
    AllOnesNan,
    /// Finite only, no negative zero; the negative-zero pattern is the one NaN (the `fnuz` types).
    Uz,
    /// Finite only and no NaN (float4 e2m1).
    Finite,
}

/// The layout of a sign-exponent-mantissa minifloat.
#[derive(Clone, Copy)]
struct Format {
    exp_bits: u32,
    man_bits: u32,
    bias: i32,
    specials: Specials,
}

const E4M3FN: Format = Format {
    exp_bits: 4,
    man_bits: 3,
    bias: 7,
    specials: Specials::AllOnesNan,
};
const E4M3FNUZ: Format = Format {
    exp_bits: 4,
    man_bits: 3,
    bias: 8,
    specials: Specials::Uz,
};
const E5M2: Format = Format {
    exp_bits: 5,
    man_bits: 2,
    bias: 15,
    specials: Specials::Ieee,
};
const E5M2FNUZ: Format = Format {
    exp_bits: 5,
    man_bits: 2,
    bias: 16,
    specials: Specials::Uz,
};
const E2M1: Format = Format {
    exp_bits: 2,
    man_bits: 1,
    bias: 1,
    specials: Specials::Finite,
};

impl Format {
    fn sign_bit(self) -> u8 {
        1 << (self.exp_bits + self.man_bits)
    }

    fn exp_max(self) -> u32 {
        (1 << self.exp_bits) - 1
    }

    fn man_max(self) -> u32 {
        (1 << self.man_bits) - 1
    }

    /// Bit pattern of the largest finite value.
    fn max_bits(self) -> u8 {
        let (e, m) = match self.specials {
            Specials::Ieee => (self.exp_max() - 1, self.man_max()),
            Specials::AllOnesNan => (self.exp_max(), self.man_max() - 1),
            Specials::Uz | Specials::Finite => (self.exp_max(), self.man_max()),
        };
        ((e << self.man_bits) | m) as u8
    }

    /// The pattern an overflow gives without saturation (infinity or NaN).
    fn overflow_bits(self, sign: u8) -> u8 {
        match self.specials {
            Specials::Ieee => sign | (self.exp_max() << self.man_bits) as u8,
            Specials::AllOnesNan => sign | self.nan_magnitude(),
            Specials::Uz => self.sign_bit(),
            Specials::Finite => sign | self.max_bits(),
        }
    }

    fn nan_magnitude(self) -> u8 {
        ((self.exp_max() << self.man_bits) | self.man_max()) as u8
    }

    fn decode(self, bits: u8) -> f32 {
        let sign = bits & self.sign_bit() != 0;
        let magnitude = bits & (self.sign_bit() - 1);
        let exp = u32::from(magnitude) >> self.man_bits;
        let man = u32::from(magnitude) & self.man_max();
        match self.specials {
            Specials::AllOnesNan if magnitude == self.nan_magnitude() => return f32::NAN,
            Specials::Uz if bits == self.sign_bit() => return f32::NAN,
            Specials::Ieee if exp == self.exp_max() => {
                let v = if man == 0 { f32::INFINITY } else { f32::NAN };
                return if sign { -v } else { v };
            }
            _ => {}
        }
        let v = if exp == 0 {
            man as f32 * pow2(1 - self.bias - self.man_bits as i32)
        } else {
            (1.0 + man as f32 / (1 << self.man_bits) as f32) * pow2(exp as i32 - self.bias)
        };
        if sign {
            -v
        } else {
            v
        }
    }

    fn encode(self, x: f32, saturate: bool) -> u8 {
        let sign = if x.is_sign_negative() {
            self.sign_bit()
        } else {
            0
        };
        let zero = if self.specials == Specials::Uz {
            0
        } else {
            sign
        };
        if x.is_nan() {
            return match self.specials {
                // The quiet NaN: all-ones exponent, top mantissa bit.
                Specials::Ieee => {
                    sign | ((self.exp_max() << self.man_bits) | (1 << (self.man_bits - 1))) as u8
                }
                Specials::AllOnesNan => sign | self.nan_magnitude(),
                Specials::Uz => self.sign_bit(),
                // float4 has no NaN; the reference (ml_dtypes) gives the zero of the other sign.
                Specials::Finite => sign ^ self.sign_bit(),
            };
        }
        let max = f64::from(self.decode(self.max_bits()));
        let a = f64::from(x.abs());
        let saturating = saturate || self.specials == Specials::Finite;
        if a.is_infinite() {
            return if saturating {
                sign | self.max_bits()
            } else {
                self.overflow_bits(sign)
            };
        }
        if a == 0.0 {
            return zero;
        }
        let emin = 1 - self.bias;
        let e = (exponent_of(a)).max(emin);
        let quantum = f64::from(pow2(e - self.man_bits as i32));
        let n = (a / quantum).round_ties_even();
        if n * quantum > max {
            return if saturating {
                sign | self.max_bits()
            } else {
                self.overflow_bits(sign)
            };
        }
        if n == 0.0 {
            return zero;
        }
        let implicit = f64::from(1u32 << self.man_bits);
        let (exp_field, man) = if n < implicit {
            (0, n as u32)
        } else if n >= 2.0 * implicit {
            ((e + 1 + self.bias) as u32, (n / 2.0 - implicit) as u32)
        } else {
            ((e + self.bias) as u32, (n - implicit) as u32)
        };
        sign | ((exp_field << self.man_bits) | man) as u8
    }
}

/// 2^e as f32, built from its bits (exact: 0 below the smallest subnormal, infinity above the
/// largest finite power).
fn pow2(e: i32) -> f32 {
    match e {
        ..=-150 => 0.0,
        -149..=-127 => f32::from_bits(1 << (e + 149)),
        -126..=127 => f32::from_bits(((e + 127) as u32) << 23),
        _ => f32::INFINITY,
    }
}

/// The binary exponent of a positive finite f64 (`floor(log2(a))`, exactly).
fn exponent_of(a: f64) -> i32 {
    let biased = ((a.to_bits() >> 52) & 0x7ff) as i32;
    if biased == 0 {
        // f64 subnormals never come from f32 inputs; treat them as the smallest exponent.
        -1074
    } else {
        biased - 1023
    }
}

/// How a cast to float8 e8m0 rounds a value that is not a power of two.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum E8M0Rounding {
    /// Toward +infinity (the ONNX default).
    Up,
    /// Toward zero.
    Down,
    /// To the nearest power of two.
    Nearest,
}

/// Encodes a float as float8 e8m0 (a biased power of two; 0xFF is NaN). Negative values are
/// undefined in ONNX; their magnitude is used.
pub fn encode_e8m0(x: f32, saturate: bool, rounding: E8M0Rounding) -> u8 {
    let bits = x.to_bits();
    let exponent = (bits >> 23) & 0xff;
    if exponent == 0xff {
        return 0xff;
    }
    let fraction = bits & 0x7f_ffff;
    let round_up = match rounding {
        E8M0Rounding::Down => false,
        E8M0Rounding::Up => fraction != 0,
        E8M0Rounding::Nearest => {
            let guard = bits & 0x40_0000 != 0;
            let round = bits & 0x20_0000 != 0;
            let sticky = bits & 0x1f_ffff != 0;
            guard && (round || sticky || exponent > 0)
        }
    };
    if round_up && !(saturate && exponent == 0xfe) {
        (exponent + 1) as u8
    } else {
        exponent as u8
    }
}

/// Decodes float8 e8m0.
pub fn decode_e8m0(bits: u8) -> f32 {
    if bits == 0xff {
        f32::NAN
    } else {
        pow2(i32::from(bits) - 127)
    }
}

/// Declares one minifloat newtype over its [`Format`].
macro_rules! minifloat {
    ($(#[$doc:meta])* $name:ident, $format:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq)]
        pub struct $name(pub u8);

        impl $name {
            /// The value as f32.
            pub fn to_f32(self) -> f32 {
                $format.decode(self.0)
            }

            /// The nearest value (ties to even); out-of-range values saturate or overflow.
            pub fn from_f32(x: f32, saturate: bool) -> Self {
                $name($format.encode(x, saturate))
            }
        }

        impl PartialOrd for $name {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                self.to_f32().partial_cmp(&other.to_f32())
            }
        }
    };
}

minifloat!(
    /// float8 e4m3fn: 4 exponent bits, 3 mantissa bits, no infinities.
    F8E4M3Fn,
    E4M3FN
);
minifloat!(
    /// float8 e4m3fnuz: like e4m3fn with bias 8, no negative zero.
    F8E4M3FnUz,
    E4M3FNUZ
);
minifloat!(
    /// float8 e5m2: 5 exponent bits, 2 mantissa bits, IEEE specials.
    F8E5M2,
    E5M2
);
minifloat!(
    /// float8 e5m2fnuz: like e5m2 with bias 16, no infinities, no negative zero.
    F8E5M2FnUz,
    E5M2FNUZ
);
minifloat!(
    /// float4 e2m1: 2 exponent bits, 1 mantissa bit, finite only (packed two per byte).
    F4E2M1,
    E2M1
);

/// float8 e8m0: an unsigned power of two, 2^(bits - 127); 0xFF is NaN.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct F8E8M0(pub u8);

impl F8E8M0 {
    /// The value as f32.
    pub fn to_f32(self) -> f32 {
        decode_e8m0(self.0)
    }
}

impl PartialOrd for F8E8M0 {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        self.to_f32().partial_cmp(&other.to_f32())
    }
}

/// Declares one narrow integer newtype.
macro_rules! narrow_int {
    ($(#[$doc:meta])* $name:ident, $repr:ty, $bits:expr, $signed:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
        pub struct $name(pub $repr);

        impl $name {
            /// Keeps the low bits of an integer (two's complement), like a C cast.
            pub fn wrapping(v: i128) -> Self {
                let low = (v & ((1 << $bits) - 1)) as i16;
                let value = if $signed && low >= 1 << ($bits - 1) {
                    low - (1 << $bits)
                } else {
                    low
                };
                $name(value as $repr)
            }

            /// Decodes the low bits of a byte.
            pub fn from_bits(byte: u8) -> Self {
                Self::wrapping(i128::from(byte))
            }

            /// The value's bit pattern in the low bits of a byte.
            pub fn bits(self) -> u8 {
                (self.0 as u8) & ((1 << $bits) - 1)
            }
        }
    };
}

narrow_int!(
    /// 4-bit signed integer, -8..=7 (packed two per byte).
    I4,
    i8,
    4,
    true
);
narrow_int!(
    /// 4-bit unsigned integer, 0..=15 (packed two per byte).
    U4,
    u8,
    4,
    false
);
narrow_int!(
    /// 2-bit signed integer, -2..=1 (packed four per byte).
    I2,
    i8,
    2,
    true
);
narrow_int!(
    /// 2-bit unsigned integer, 0..=3 (packed four per byte).
    U2,
    u8,
    2,
    false
);

/// An integer from a float: truncation toward zero; NaN and infinities give 0.
pub fn truncate(v: f64) -> i128 {
    if v.is_finite() {
        v.trunc() as i128
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_patterns(format: Format) -> impl Iterator<Item = u8> {
        (0..2 * u16::from(format.sign_bit())).map(|b| b as u8)
    }

    #[test]
    fn powers_of_two_are_exact_through_the_subnormals() {
        assert_eq!(pow2(0), 1.0);
        assert_eq!(pow2(-3), 0.125);
        assert_eq!(pow2(10), 1024.0);
        assert_eq!(pow2(127), 1.7014118e38);
        assert_eq!(pow2(-126), 1.1754944e-38); // f32::MIN_POSITIVE
        assert_eq!(pow2(-149), 1e-45); // the smallest subnormal
        assert_eq!(pow2(-150), 0.0);
        assert_eq!(pow2(128), f32::INFINITY);
    }

    #[test]
    fn every_finite_pattern_round_trips() {
        for format in [E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ, E2M1] {
            for bits in all_patterns(format) {
                let v = format.decode(bits);
                if v.is_nan() || (format.specials == Specials::Uz && bits == 0) {
                    continue;
                }
                assert_eq!(format.encode(v, false), bits, "{bits:#x} = {v}");
            }
        }
    }

    #[test]
    fn known_values_from_the_format_definitions() {
        // Largest finite values: 448, 240, 57344, 57344, 6.
        assert_eq!(F8E4M3Fn(0x7e).to_f32(), 448.0);
        assert_eq!(F8E4M3FnUz(0x7f).to_f32(), 240.0);
        assert_eq!(F8E5M2(0x7b).to_f32(), 57344.0);
        assert_eq!(F8E5M2FnUz(0x7f).to_f32(), 57344.0);
        assert_eq!(F4E2M1(0x7).to_f32(), 6.0);
        // Smallest subnormals: 2^-9, 2^-10, 2^-16, 2^-17, 0.5.
        assert_eq!(F8E4M3Fn(1).to_f32(), 1.0 / 512.0); // 2^-9
        assert_eq!(F8E4M3FnUz(1).to_f32(), 1.0 / 1024.0); // 2^-10
        assert_eq!(F8E5M2(1).to_f32(), 1.0 / 65536.0); // 2^-16
        assert_eq!(F8E5M2FnUz(1).to_f32(), 1.0 / 131072.0); // 2^-17
        assert_eq!(F4E2M1(1).to_f32(), 0.5);
        assert!(F8E4M3FnUz(0x80).to_f32().is_nan());
        assert_eq!(F8E5M2(0x7c).to_f32(), f32::INFINITY);
    }

    #[test]
    fn rounding_saturation_and_overflow() {
        // Ties go to the even mantissa: 5 lies between 4 and 6 in float4.
        assert_eq!(F4E2M1::from_f32(5.0, true).to_f32(), 4.0);
        assert_eq!(F4E2M1::from_f32(0.25, true).0, 0);
        assert_eq!(F4E2M1::from_f32(100.0, false).to_f32(), 6.0);
        assert_eq!(F8E4M3Fn::from_f32(1e6, true).to_f32(), 448.0);
        assert!(F8E4M3Fn::from_f32(1e6, false).to_f32().is_nan());
        assert_eq!(F8E5M2::from_f32(1e6, false).to_f32(), f32::INFINITY);
        assert_eq!(F8E5M2::from_f32(f32::NEG_INFINITY, true).to_f32(), -57344.0);
        assert_eq!(F8E4M3FnUz::from_f32(-0.0, true).0, 0);
        assert_eq!(F8E4M3FnUz::from_f32(-1e-9, true).0, 0);
        assert_eq!(F8E5M2::from_f32(-1e-9, true).0, 0x80);
    }

    #[test]
    fn e8m0_rounding_modes() {
        assert_eq!(encode_e8m0(1.0, true, E8M0Rounding::Up), 127);
        assert_eq!(encode_e8m0(3.0, true, E8M0Rounding::Up), 129);
        assert_eq!(encode_e8m0(3.0, true, E8M0Rounding::Down), 128);
        assert_eq!(encode_e8m0(3.0, true, E8M0Rounding::Nearest), 129);
        assert_eq!(encode_e8m0(2.5, true, E8M0Rounding::Nearest), 128);
        assert_eq!(encode_e8m0(f32::NAN, true, E8M0Rounding::Up), 0xff);
        assert_eq!(decode_e8m0(130), 8.0);
    }

    #[test]
    fn narrow_integers_wrap() {
        assert_eq!(I4::wrapping(8).0, -8);
        assert_eq!(I4::wrapping(-9).0, 7);
        assert_eq!(U4::wrapping(-1).0, 15);
        assert_eq!(I2::wrapping(2).0, -2);
        assert_eq!(U2::wrapping(5).0, 1);
        assert_eq!(I4::from_bits(0xf).0, -1);
        assert_eq!(I4(-1).bits(), 0xf);
    }
}
