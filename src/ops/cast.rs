//! `Cast` (to the type named by `to`) and `CastLike` (to the type of a second input) between
//! every stored type, the narrow float8/float4/int4/int2 types included. Integer and bool
//! conversions are exact (integers wrap like a C cast); conversions involving floats go through
//! f64 (float to integer truncates toward zero and saturates; NaN gives 0). Casts to float8
//! honour `saturate`, casts to float8 e8m0 also `round_mode`.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, MOVED};
use crate::error::{Error, Result, Status};
use crate::ir::narrow::{
    encode_e8m0, E8M0Rounding, F8E4M3Fn, F8E4M3FnUz, F8E5M2FnUz, F8E5M2, F8E8M0,
};
use crate::ir::{DataType, Elem, Tensor, TensorData};

/// The `Cast` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Cast",
    domain: "",
    min_opset: 1,
    newest: 28,
    attributes: &["to", "saturate", "round_mode"],
    types: MOVED,
    build,
};

/// The `CastLike` operator.
pub static LIKE_DEF: OpDef = OpDef {
    op_type: "CastLike",
    domain: "",
    min_opset: 15,
    newest: 25,
    attributes: &["saturate", "round_mode"],
    types: MOVED,
    build: build_like,
};

/// How values out of a float8 type's range are converted (the `saturate` and `round_mode`
/// attributes).
#[derive(Clone, Copy, Debug)]
pub struct CastOptions {
    /// Out-of-range values become the largest finite value (else infinity or NaN).
    pub saturate: bool,
    /// Rounding of casts to float8 e8m0.
    pub rounding: E8M0Rounding,
}

impl Default for CastOptions {
    fn default() -> Self {
        CastOptions {
            saturate: true,
            rounding: E8M0Rounding::Up,
        }
    }
}

fn exact(t: DataType) -> bool {
    t.is_integer()
        || matches!(
            t,
            DataType::Bool | DataType::I4 | DataType::U4 | DataType::I2 | DataType::U2
        )
}

/// Converts through f32 with an explicit float8 encoder.
fn encode_into<A: Elem, B: Elem>(
    src: &[A],
    out: &mut TensorData,
    encode: impl Fn(f32) -> B,
) -> Result<()> {
    let dst = B::slice_mut(out).ok_or_else(|| Error::new(Status::InternalError, "Cast output"))?;
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = encode(s.to_f64() as f32);
    }
    Ok(())
}

fn convert<A: Elem, B: Elem>(src: &[A], dst: &mut [B]) {
    if exact(A::DTYPE) && exact(B::DTYPE) {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = B::from_i128(s.to_i128());
        }
    } else {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = B::from_f64(s.to_f64());
        }
    }
}

fn cast_into<A: Elem>(src: &[A], out: &mut TensorData, options: CastOptions) -> Result<()> {
    let to = out.dtype();
    let saturate = options.saturate;
    match to {
        DataType::F8E4M3Fn if !saturate => {
            return encode_into(src, out, |v| F8E4M3Fn::from_f32(v, false))
        }
        DataType::F8E4M3FnUz if !saturate => {
            return encode_into(src, out, |v| F8E4M3FnUz::from_f32(v, false))
        }
        DataType::F8E5M2 if !saturate => {
            return encode_into(src, out, |v| F8E5M2::from_f32(v, false))
        }
        DataType::F8E5M2FnUz if !saturate => {
            return encode_into(src, out, |v| F8E5M2FnUz::from_f32(v, false))
        }
        DataType::F8E8M0 => {
            return encode_into(src, out, |v| {
                F8E8M0(encode_e8m0(v, saturate, options.rounding))
            })
        }
        _ => {}
    }
    crate::dispatch_stored!(to, B => {
        let dst = B::slice_mut(out).ok_or_else(|| Error::new(Status::InternalError, "Cast output"))?;
        convert(src, dst);
        Ok(())
    }, other => Err(Error::new(Status::UnsupportedDatatype, format!("Cast to {}", other.name()))))
}

/// A number as text, the way numpy prints it (`astype(str)`): floats in their shortest
/// round-trip form, positional from 1e-4 to 1e16 and scientific (`1e-07`) outside, `nan`,
/// `inf`; integers in decimal; booleans as `True`/`False`.
fn number_text<A: Elem>(x: A) -> String {
    let t = A::DTYPE;
    if t == DataType::Bool {
        return if x.to_f64() != 0.0 { "True" } else { "False" }.into();
    }
    if exact(t) {
        return x.to_i128().to_string();
    }
    let v = x.to_f64();
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    let wide = t == DataType::F64;
    let a = v.abs();
    if a == 0.0 || (1e-4..1e16).contains(&a) {
        let s = if wide {
            format!("{v}")
        } else {
            format!("{}", v as f32)
        };
        if s.contains('.') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let s = if wide {
            format!("{v:e}")
        } else {
            format!("{:e}", v as f32)
        };
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        format!("{mantissa}e{sign}{digits:0>2}")
    }
}

/// A string as a number: decimal or scientific notation, `inf`/`+inf`/`-inf` and `nan` in any
/// case. Text that is no number (undefined in ONNX) gives NaN.
fn parse_number(s: &str) -> f64 {
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        "nan" | "+nan" | "-nan" => f64::NAN,
        _ => t.parse::<f64>().unwrap_or(f64::NAN),
    }
}

fn strings_into(src: &[String], out: &mut TensorData) -> Result<()> {
    if let TensorData::String(dst) = out {
        dst.clone_from_slice(src);
        return Ok(());
    }
    let to = out.dtype();
    crate::dispatch_stored!(to, B => {
        let dst = B::slice_mut(out).ok_or_else(|| Error::new(Status::InternalError, "Cast output"))?;
        for (d, s) in dst.iter_mut().zip(src) {
            *d = match s.trim().parse::<i128>() {
                Ok(i) if exact(B::DTYPE) => B::from_i128(i),
                _ => B::from_f64(parse_number(s)),
            };
        }
        Ok(())
    }, other => Err(Error::new(Status::UnsupportedDatatype, format!("Cast to {}", other.name()))))
}

/// Converts a tensor's elements into `out`, which has the target type and the same length.
pub fn cast_tensor(x: &Tensor, out: &mut TensorData, options: CastOptions) -> Result<()> {
    if let TensorData::String(src) = &x.data {
        return strings_into(src, out);
    }
    if let TensorData::String(dst) = out {
        return crate::dispatch_stored!(x.dtype(), A => {
            for (d, &v) in dst.iter_mut().zip(x.as_slice::<A>()?) {
                *d = number_text(v);
            }
            Ok(())
        }, other => Err(Error::new(Status::UnsupportedDatatype, format!("Cast from {}", other.name()))));
    }
    crate::dispatch_stored!(x.dtype(), A => cast_into(x.as_slice::<A>()?, out, options),
        other => Err(Error::new(Status::UnsupportedDatatype, format!("Cast from {}", other.name()))))
}

struct CastKernel(CastOptions);

impl Kernel for CastKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "Cast input missing"))?;
        cast_tensor(x, &mut outputs[0].data, self.0)
    }
}

fn options(ctx: &BuildCtx) -> Result<CastOptions> {
    let rounding = match ctx.attr_string("round_mode", "up")?.as_str() {
        "up" => E8M0Rounding::Up,
        "down" => E8M0Rounding::Down,
        "nearest" => E8M0Rounding::Nearest,
        other => {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("round_mode '{other}' is not up, down or nearest"),
            ))
        }
    };
    Ok(CastOptions {
        saturate: ctx.attr_int("saturate", 1)? != 0,
        rounding,
    })
}

fn build_to(ctx: &BuildCtx, to: DataType) -> Result<Built> {
    let x = ctx.input(0)?;
    for t in [x.dtype, to] {
        if !t.is_stored() {
            return Err(ctx.err(
                Status::UnsupportedDatatype,
                format!("casts involving {} are not supported", t.name()),
            ));
        }
    }
    Ok(Built {
        outputs: vec![(to, x.shape.to_vec())],
        kernel: Box::new(CastKernel(options(ctx)?)),
    })
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let code = ctx.attr_int("to", 0)?;
    let to = DataType::from_code(code)
        .filter(|_| code != 0)
        .ok_or_else(|| ctx.err(Status::InvalidModel, format!("'to' = {code} is not a type")))?;
    build_to(ctx, to)
}

fn build_like(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    build_to(ctx, ctx.input(1)?.dtype)
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn numbers_print_as_numpy_prints_them() {
        // str(np.float32(x)) for each x; str(np.int64(-7)); str(np.bool_(True)).
        assert_eq!(number_text(0.5f32), "0.5");
        assert_eq!(number_text(1.0f32), "1.0");
        assert_eq!(number_text(0.478_925_47_f32), "0.47892547");
        assert_eq!(number_text(1e-7f32), "1e-07");
        assert_eq!(number_text(-2.5e20f32), "-2.5e+20");
        assert_eq!(number_text(f32::NAN), "nan");
        assert_eq!(number_text(f32::NEG_INFINITY), "-inf");
        assert_eq!(number_text(-7i64), "-7");
        assert_eq!(number_text(true), "True");
        assert_eq!(number_text(f16::from_f32(0.5)), "0.5");
    }

    #[test]
    fn strings_parse_as_the_cast_documentation_says() {
        assert_eq!(parse_number("2.75"), 2.75);
        assert_eq!(parse_number("1e-5"), 1e-5);
        assert_eq!(parse_number("1E8"), 1e8);
        assert_eq!(parse_number("+INF"), f64::INFINITY);
        assert_eq!(parse_number("-inf"), f64::NEG_INFINITY);
        assert!(parse_number("NaN").is_nan());
        let x = Tensor::new(
            vec![3],
            TensorData::String(vec!["100".into(), "-2.5".into(), "INF".into()]),
        )
        .unwrap();
        let mut ints = TensorData::I64(vec![0; 3]);
        cast_tensor(&x, &mut ints, CastOptions::default()).unwrap();
        assert_eq!(ints, TensorData::I64(vec![100, -2, i64::MAX]));
        let mut floats = TensorData::F32(vec![0.0; 3]);
        cast_tensor(&x, &mut floats, CastOptions::default()).unwrap();
        assert_eq!(floats, TensorData::F32(vec![100.0, -2.5, f32::INFINITY]));
        let mut back = TensorData::String(vec![String::new(); 3]);
        let f = Tensor::new(vec![3], floats).unwrap();
        cast_tensor(&f, &mut back, CastOptions::default()).unwrap();
        assert_eq!(
            back,
            TensorData::String(vec!["100.0".into(), "-2.5".into(), "inf".into()])
        );
    }
}
