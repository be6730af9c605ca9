//! `Erf`: the element-wise error function.

use super::{pointwise, unary, BuildCtx, Built, OpDef};
use crate::error::Result;
use crate::ir::DataType;
use crate::kernels::activation::Activation;
use crate::kernels::reference::erf_f64;

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
    if ctx.input(0)?.dtype == DataType::F32 {
        return unary::build(ctx, Activation::Erf);
    }
    pointwise::build(ctx, |x, _| erf(x), [0.0; 2])
}

/// The error function in double precision, rounded to f32 (the path of the other float types;
/// float32 tensors use the vectorised [`crate::kernels::activation::erf_approx`]).
pub fn erf(x: f32) -> f32 {
    erf_f64(f64::from(x)) as f32
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
