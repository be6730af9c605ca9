//! The float element-wise math operators without a kernel of their own, one table:
//! trigonometric and hyperbolic functions, `Round`, `Sign`, `Softsign`, `HardSwish`, `Mish`,
//! `Celu`, `ThresholdedRelu`, `Shrink`, `Gelu`, `IsNaN` and `IsInf`.

use super::util::BuildCtx;
use super::{pointwise, Built, OpDef, FLOATS};
use crate::error::{Result, Status};

macro_rules! unary {
    ($def:ident, $name:literal, $min:literal, $newest:literal, $f:ident, $body:expr) => {
        #[doc = concat!("The `", $name, "` operator.")]
        pub static $def: OpDef = OpDef {
            op_type: $name,
            domain: "",
            min_opset: $min,
            newest: $newest,
            attributes: &[],
            types: FLOATS,
            build: $f,
        };
        fn $f(ctx: &BuildCtx) -> Result<Built> {
            pointwise::build(ctx, $body, [0.0; 2])
        }
    };
}

unary!(COS, "Cos", 7, 22, build_cos, |x, _| x.cos());
unary!(SIN, "Sin", 7, 22, build_sin, |x, _| x.sin());
unary!(TAN, "Tan", 7, 22, build_tan, |x, _| x.tan());
unary!(ACOS, "Acos", 7, 22, build_acos, |x, _| x.acos());
unary!(ASIN, "Asin", 7, 22, build_asin, |x, _| x.asin());
unary!(ATAN, "Atan", 7, 22, build_atan, |x, _| x.atan());
unary!(SINH, "Sinh", 9, 22, build_sinh, |x, _| x.sinh());
unary!(COSH, "Cosh", 9, 22, build_cosh, |x, _| x.cosh());
unary!(ASINH, "Asinh", 9, 22, build_asinh, |x, _| x.asinh());
unary!(ACOSH, "Acosh", 9, 22, build_acosh, |x, _| x.acosh());
unary!(ATANH, "Atanh", 9, 22, build_atanh, |x, _| x.atanh());
unary!(ROUND, "Round", 11, 22, build_round, |x, _| x
    .round_ties_even());
unary!(SOFTSIGN, "Softsign", 1, 22, build_softsign, |x, _| x
    / (1.0 + x.abs()));
unary!(HARD_SWISH, "HardSwish", 14, 22, build_hard_swish, |x, _| x
    * (x / 6.0 + 0.5).clamp(0.0, 1.0));
unary!(MISH, "Mish", 18, 22, build_mish, |x, _| {
    let sp = if x > 20.0 { x } else { x.exp().ln_1p() };
    x * sp.tanh()
});

/// The `Sign` operator.
pub static SIGN: OpDef = OpDef {
    op_type: "Sign",
    domain: "",
    min_opset: 9,
    newest: 13,
    attributes: &[],
    types: super::NUMERIC,
    build: build_sign,
};

fn build_sign(ctx: &BuildCtx) -> Result<Built> {
    if ctx.input(0)?.dtype.is_integer() {
        return super::int_unary::build(ctx, super::int_unary::IntUnary::Sign);
    }
    pointwise::build(
        ctx,
        |x, _| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        },
        [0.0; 2],
    )
}

/// The `Celu` operator.
pub static CELU: OpDef = OpDef {
    op_type: "Celu",
    domain: "",
    min_opset: 12,
    newest: 28,
    attributes: &["alpha"],
    types: FLOATS,
    build: build_celu,
};

fn build_celu(ctx: &BuildCtx) -> Result<Built> {
    let alpha = ctx.attr_float("alpha", 1.0)?;
    pointwise::build(
        ctx,
        |x, [a, _]| x.max(0.0) + (a * ((x / a).exp() - 1.0)).min(0.0),
        [alpha, 0.0],
    )
}

/// The `ThresholdedRelu` operator.
pub static THRESHOLDED_RELU: OpDef = OpDef {
    op_type: "ThresholdedRelu",
    domain: "",
    min_opset: 10,
    newest: 22,
    attributes: &["alpha"],
    types: FLOATS,
    build: build_thresholded_relu,
};

fn build_thresholded_relu(ctx: &BuildCtx) -> Result<Built> {
    let alpha = ctx.attr_float("alpha", 1.0)?;
    pointwise::build(ctx, |x, [a, _]| if x > a { x } else { 0.0 }, [alpha, 0.0])
}

/// The `Shrink` operator (float types).
pub static SHRINK: OpDef = OpDef {
    op_type: "Shrink",
    domain: "",
    min_opset: 9,
    newest: 9,
    attributes: &["bias", "lambd"],
    types: FLOATS,
    build: build_shrink,
};

fn build_shrink(ctx: &BuildCtx) -> Result<Built> {
    let bias = ctx.attr_float("bias", 0.0)?;
    let lambd = ctx.attr_float("lambd", 0.5)?;
    pointwise::build(
        ctx,
        |x, [b, l]| {
            if x < -l {
                x + b
            } else if x > l {
                x - b
            } else {
                0.0
            }
        },
        [bias, lambd],
    )
}

/// The `Gelu` operator (opset 20): exact (`approximate = "none"`) or the tanh approximation.
pub static GELU: OpDef = OpDef {
    op_type: "Gelu",
    domain: "",
    min_opset: 20,
    newest: 20,
    attributes: &["approximate"],
    types: FLOATS,
    build: build_gelu,
};

fn build_gelu(ctx: &BuildCtx) -> Result<Built> {
    match ctx.attr_string("approximate", "none")?.as_str() {
        "none" if ctx.input(0)?.dtype == crate::ir::DataType::F32 => {
            super::unary::build(ctx, crate::kernels::activation::Activation::Gelu)
        }
        "none" => pointwise::build(
            ctx,
            |x, _| 0.5 * x * (1.0 + super::erf::erf(x * std::f32::consts::FRAC_1_SQRT_2)),
            [0.0; 2],
        ),
        "tanh" => pointwise::build(
            ctx,
            |x, _| {
                let x64 = x as f64;
                let inner = (2.0 / std::f64::consts::PI).sqrt() * (x64 + 0.044715 * x64.powi(3));
                (0.5 * x64 * (1.0 + inner.tanh())) as f32
            },
            [0.0; 2],
        ),
        other => Err(ctx.err(
            Status::InvalidModel,
            format!("approximate = '{other}' is not 'none' or 'tanh'"),
        )),
    }
}

/// The `IsNaN` operator.
pub static IS_NAN: OpDef = OpDef {
    op_type: "IsNaN",
    domain: "",
    min_opset: 9,
    newest: 20,
    attributes: &[],
    types: FLOATS,
    build: build_is_nan,
};

fn build_is_nan(ctx: &BuildCtx) -> Result<Built> {
    pointwise::build_predicate(ctx, |x, _| x.is_nan(), [false; 2])
}

/// The `IsInf` operator.
pub static IS_INF: OpDef = OpDef {
    op_type: "IsInf",
    domain: "",
    min_opset: 10,
    newest: 20,
    attributes: &["detect_negative", "detect_positive"],
    types: FLOATS,
    build: build_is_inf,
};

fn build_is_inf(ctx: &BuildCtx) -> Result<Built> {
    let neg = ctx.attr_int("detect_negative", 1)? != 0;
    let pos = ctx.attr_int("detect_positive", 1)? != 0;
    pointwise::build_predicate(
        ctx,
        |x, [neg, pos]| (x == f64::INFINITY && pos) || (x == f64::NEG_INFINITY && neg),
        [neg, pos],
    )
}
