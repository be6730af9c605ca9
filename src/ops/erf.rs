//! `Erf`: the element-wise error function.

use super::{pointwise, BuildCtx, Built, OpDef};
use crate::error::Result;

/// The `Erf` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Erf",
    domain: "",
    min_opset: 9,
    newest: 13,
    attributes: &[],
    types: super::FLOATS,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    pointwise::build(ctx, |x, _| erf(x), [0.0; 2])
}

/// The error function, evaluated in double precision with the series
/// `erf(x) = 2/√π · e^(-x²) · Σ 2ⁿ x^(2n+1) / (1·3·…·(2n+1))`, whose terms are all of one sign
/// (no cancellation). Beyond |x| = 6 the result is ±1 to well under f32 precision.
pub fn erf(x: f32) -> f32 {
    if x.is_nan() {
        return x;
    }
    let x = f64::from(x);
    let a = x.abs();
    if a >= 6.0 {
        return x.signum() as f32;
    }
    let two_x2 = 2.0 * a * a;
    let mut term = a;
    let mut sum = a;
    let mut n = 0.0;
    while term > sum * 1e-17 {
        n += 1.0;
        term *= two_x2 / (2.0 * n + 1.0);
        sum += term;
    }
    let r = (2.0 / std::f64::consts::PI.sqrt() * (-a * a).exp() * sum).min(1.0);
    (r.copysign(x)) as f32
}

#[cfg(test)]
mod tests {
    use super::erf;

    #[test]
    fn known_values() {
        let cases = [
            (0.0, 0.0),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-2.0, -0.995_322_3),
            (3.0, 0.999_977_9),
            (10.0, 1.0),
        ];
        for (x, want) in cases {
            assert!((erf(x) - want).abs() < 1e-6, "erf({x}) = {}", erf(x));
        }
        assert!(erf(f32::NAN).is_nan());
    }
}
