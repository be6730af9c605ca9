//! Element-wise activation functions, vectorised (fused into GEMM/conv epilogues).
//!
//! `Sigmoid` and `Tanh` use a branch-free `exp` approximation ([`exp_approx`], relative error
//! ≈ 2 ulp) that the compiler vectorises, so they run at SIMD speed.
#![forbid(unsafe_code)]

use super::cpu::{self, Isa};
use super::simd;

/// An activation applied element-wise after a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub enum Activation {
    /// Identity.
    #[default]
    None,
    /// `max(x, 0)`.
    Relu,
    /// `x` if `x ≥ 0`, else `alpha · x`.
    LeakyRelu(f32),
    /// `min(max(x, min), max)`.
    Clip {
        /// Lower bound.
        min: f32,
        /// Upper bound.
        max: f32,
    },
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// The error function (the `Erf` operator).
    Erf,
    /// `x · Φ(x) = 0.5 · x · (1 + erf(x / √2))`, the exact GELU.
    Gelu,
    /// `x · min(max(x + 3, 0), 6) / 6`, computed in that order (as the exporters' decomposed
    /// form is).
    HardSwish,
    /// `x · sigmoid(x)` (SiLU, swish), with the sigmoid of [`Activation::Sigmoid`].
    Silu,
}

impl Activation {
    /// Applies the activation in place, with the process's best ISA.
    pub fn apply(&self, x: &mut [f32]) {
        self.apply_isa(cpu::isa(), x);
    }

    /// Applies the activation in place, vectorised for `isa` (falls back to portable if the CPU
    /// lacks it).
    pub fn apply_isa(&self, isa: Isa, x: &mut [f32]) {
        if *self != Activation::None {
            simd::vectorize(
                isa,
                #[inline(always)]
                || self.apply_inline(x),
            );
        }
    }

    /// The loops of [`Activation::apply`], to be inlined into a caller that is already
    /// compiled for the right ISA (inside `simd::vectorize`).
    #[inline(always)]
    pub(crate) fn apply_inline(&self, x: &mut [f32]) {
        match *self {
            Activation::None => {}
            Activation::Relu => x.iter_mut().for_each(|v| *v = relu(*v)),
            Activation::LeakyRelu(alpha) => x
                .iter_mut()
                .for_each(|v| *v = if *v < 0.0 { *v * alpha } else { *v }),
            Activation::Clip { min, max } => x.iter_mut().for_each(|v| *v = clip(*v, min, max)),
            Activation::Sigmoid => x.iter_mut().for_each(|v| *v = sigmoid(*v)),
            Activation::Tanh => x.iter_mut().for_each(|v| *v = tanh(*v)),
            Activation::Erf => x.iter_mut().for_each(|v| *v = erf_approx(*v)),
            Activation::Gelu => x.iter_mut().for_each(|v| *v = gelu(*v)),
            Activation::HardSwish => x.iter_mut().for_each(|v| *v = hard_swish(*v)),
            Activation::Silu => x.iter_mut().for_each(|v| *v *= sigmoid(*v)),
        }
    }

    /// The bounds `(lo, hi)` when the activation is the clamp `min(max(x, lo), hi)` (NaN kept),
    /// which SIMD kernels apply in registers before they store: Relu and Clip.
    pub(crate) fn clamp_bounds(&self) -> Option<(f32, f32)> {
        match *self {
            Activation::Relu => Some((0.0, f32::INFINITY)),
            Activation::Clip { min, max } => Some((min, max)),
            _ => None,
        }
    }

    /// The activation of one value (scalar path, same numerics as [`Activation::apply`]).
    pub fn apply_scalar(&self, v: f32) -> f32 {
        match *self {
            Activation::None => v,
            Activation::Relu => relu(v),
            Activation::LeakyRelu(alpha) => {
                if v < 0.0 {
                    v * alpha
                } else {
                    v
                }
            }
            Activation::Clip { min, max } => clip(v, min, max),
            Activation::Sigmoid => sigmoid(v),
            Activation::Tanh => tanh(v),
            Activation::Erf => erf_approx(v),
            Activation::Gelu => gelu(v),
            Activation::HardSwish => hard_swish(v),
            Activation::Silu => v * sigmoid(v),
        }
    }
}

/// `v · min(max(v + 3, 0), 6) / 6`; NaN propagates.
#[inline(always)]
fn hard_swish(v: f32) -> f32 {
    v * clip(v + 3.0, 0.0, 6.0) / 6.0
}

/// `max(v, 0)`, keeping NaN.
#[inline(always)]
fn relu(v: f32) -> f32 {
    if v < 0.0 {
        0.0
    } else {
        v
    }
}

/// `min(max(v, lo), hi)`, keeping NaN.
#[inline(always)]
fn clip(v: f32, lo: f32, hi: f32) -> f32 {
    let v = if v < lo { lo } else { v };
    if v > hi {
        hi
    } else {
        v
    }
}

/// Branch-free, vectorisable `e^x` for f32 (relative error ≈ 2 ulp on the normal range).
///
/// `x = n·ln2 + r`, `|r| ≤ ln2/2`, `e^r` by a degree-6 polynomial (Taylor-like coefficients
/// tuned for the interval), `2^n` built from the exponent bits. Inputs are clamped to
/// `[-87.3, 88.7]`, so the result saturates to ~`1.2e-38` / ~`3.3e38` instead of 0 / inf;
/// NaN propagates.
#[inline(always)]
pub fn exp_approx(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln2 split in a part with few mantissa bits (exact products) and a correction.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5 * 2^23: adding it rounds to the nearest integer in the low mantissa bits.
    const SHIFT: f32 = 12_582_912.0;
    let x = x.clamp(-87.3, 88.7);
    let t = x * LOG2E + SHIFT;
    let n = t - SHIFT;
    let bits = t.to_bits().wrapping_sub(SHIFT.to_bits()) as i32; // the integer n
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_1e-4_f32;
    let p = p * r + 1.398_2e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 0.166_666_65;
    let p = p * r + 0.5;
    let er = (p * r * r) + r + 1.0;
    let scale = f32::from_bits(((bits + 127) as u32) << 23);
    er * scale
}

/// Logistic sigmoid via [`exp_approx`].
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp_approx(-x))
}

/// Hyperbolic tangent via [`exp_approx`]; odd-polynomial for small `|x|` to keep relative
/// accuracy near 0.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    let ax = x.abs();
    let e = exp_approx(-2.0 * ax);
    let big = (1.0 - e) / (1.0 + e);
    let x2 = x * x;
    // tanh x = x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 …, |x| < 0.125
    let small = ax * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))));
    let t = if ax < 0.125 { small } else { big };
    if x.is_nan() {
        x
    } else {
        t.copysign(x)
    }
}

/// Branch-free, vectorisable error function for f32 (error ≤ 2e-7 relative below |x| = 1,
/// ≤ 1e-7 absolute above).
///
/// `|x| < 1`: `x · P(x²)`, a degree-5 polynomial in `x²` fitted for relative error;
/// `1 ≤ |x| < 4`: a degree-12 polynomial in `t = (|x| − 2.5) / 1.5` fitted for absolute error;
/// beyond 4, `erf` is 1 to within half an f32 ulp. The coefficients are least-squares fits on
/// Chebyshev nodes, made for this crate. NaN propagates.
#[inline(always)]
pub fn erf_approx(x: f32) -> f32 {
    let a = x.abs();
    let u = a * a;
    let p = -5.667_873e-4_f32;
    let p = p * u + 4.927_39e-3;
    let p = p * u - 2.672_086_7e-2;
    let p = p * u + 0.112_805_78;
    let p = p * u - 0.376_123_9;
    let p = p * u + std::f32::consts::FRAC_2_SQRT_PI;
    let small = a * p;
    let t = (a.min(4.0) - 2.5) * (1.0 / 1.5);
    let q = -1.129_985_6e-3_f32;
    let q = q * t + 1.851_575_1e-3;
    let q = q * t + 3.426_010_3e-3;
    let q = q * t - 1.079_767_9e-2;
    let q = q * t + 7.483_717_5e-3;
    let q = q * t + 9.810_808e-3;
    let q = q * t - 3.216_437e-2;
    let q = q * t + 4.632_206_3e-2;
    let q = q * t - 4.360_218_7e-2;
    let q = q * t + 2.819_584_7e-2;
    let q = q * t - 1.225_590_9e-2;
    let q = q * t + 3.266_969e-3;
    let q = q * t + 0.999_593_1;
    let big = if a >= 4.0 { 1.0 } else { q.min(1.0) };
    let r = if a < 1.0 { small } else { big };
    if x.is_nan() {
        x
    } else {
        r.copysign(x)
    }
}

/// The exact GELU, `0.5 · x · (1 + erf(x / √2))`, with [`erf_approx`] (absolute error
/// ≤ 1e-7 · |x|/2 where erf is near −1).
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf_approx(x * std::f32::consts::FRAC_1_SQRT_2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::reference;

    fn inputs() -> Vec<f32> {
        let mut v: Vec<f32> = (-2000..=2000).map(|i| i as f32 * 0.01).collect();
        v.extend([
            -100.0, -90.0, -88.0, -50.0, 50.0, 88.0, 90.0, 1e-6, -1e-6, 1e-30, 0.0, -0.0,
        ]);
        v
    }

    #[test]
    fn exp_is_accurate() {
        for x in inputs() {
            if x.abs() > 87.0 {
                continue;
            }
            let want = (x as f64).exp();
            let got = exp_approx(x) as f64;
            assert!(
                ((got - want) / want).abs() < 5e-7,
                "exp({x}) = {got}, want {want}"
            );
        }
        assert!(exp_approx(f32::NAN).is_nan());
    }

    #[test]
    fn hand_values() {
        let mut v = [-1.0f32, 0.0, 2.0, 7.0];
        Activation::Relu.apply(&mut v);
        assert_eq!(v, [0.0, 0.0, 2.0, 7.0]);
        let mut v = [-1.0f32, 0.5, 7.0];
        Activation::Clip { min: 0.0, max: 6.0 }.apply(&mut v);
        assert_eq!(v, [0.0, 0.5, 6.0]);
        let mut v = [-2.0f32, 3.0];
        Activation::LeakyRelu(0.1).apply(&mut v);
        assert_eq!(v, [-0.2, 3.0]);
        let mut v = [0.0f32];
        Activation::Sigmoid.apply(&mut v);
        assert_eq!(v, [0.5]);
        let mut v = [0.0f32, 1.0];
        Activation::Tanh.apply(&mut v);
        assert_eq!(v[0], 0.0);
        assert!((v[1] - 0.761_594_2).abs() < 1e-6);
    }

    #[test]
    fn matches_reference_on_every_isa() {
        let acts = [
            Activation::None,
            Activation::Relu,
            Activation::LeakyRelu(0.01),
            Activation::Clip {
                min: -1.0,
                max: 2.5,
            },
            Activation::Sigmoid,
            Activation::Tanh,
            Activation::Erf,
            Activation::Gelu,
            Activation::HardSwish,
            Activation::Silu,
        ];
        for isa in cpu::test_isas() {
            for act in acts {
                let x = inputs();
                let mut got = x.clone();
                act.apply_isa(isa, &mut got);
                for (&xi, &g) in x.iter().zip(&got) {
                    let want = reference::activation_ref(act, xi);
                    // GELU scales erf's absolute error (≤ 1e-7) by |x|/2.
                    let scale = if act == Activation::Gelu {
                        xi.abs().max(1.0)
                    } else {
                        1.0
                    };
                    let tol = 1e-6 * want.abs().max(1e-3) + 1e-7 * scale;
                    assert!(
                        (g - want).abs() <= tol,
                        "{act:?} {isa:?} x={xi}: {g} vs {want}"
                    );
                    assert_eq!(g, act.apply_scalar(xi), "scalar/vector mismatch");
                }
            }
        }
    }
}
