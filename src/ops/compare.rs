//! The comparison operators, one table: `Equal`, `Less`, `LessOrEqual`, `Greater`,
//! `GreaterOrEqual`. Two inputs of one type, numpy broadcasting, a bool result.

use super::util::BuildCtx;
use super::{binary, Built, Kernel, OpDef, ANY_AND_STRING, NUMERIC};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor, TensorData};
use crate::kernels::broadcast::map2;

/// Which comparison.
#[derive(Clone, Copy, Debug)]
enum Cmp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    fn apply<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Cmp::Eq => a == b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
        }
    }
}

struct CmpKernel {
    cmp: Cmp,
    a_shape: Vec<usize>,
    b_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

impl CmpKernel {
    fn compute<T: Elem>(&self, a: &Tensor, b: &Tensor, out: &mut Tensor) -> Result<()> {
        let cmp = self.cmp;
        map2(
            (a.as_slice::<T>()?, &self.a_shape),
            (b.as_slice::<T>()?, &self.b_shape),
            out.as_mut_slice::<bool>()?,
            &self.out_shape,
            |x, y| cmp.apply(x, y),
        );
        Ok(())
    }
}

impl Kernel for CmpKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "comparison input missing");
        let a = inputs[0].ok_or_else(missing)?;
        let b = inputs[1].ok_or_else(missing)?;
        if let (TensorData::String(x), TensorData::String(y)) = (&a.data, &b.data) {
            let x: Vec<&str> = x.iter().map(String::as_str).collect();
            let y: Vec<&str> = y.iter().map(String::as_str).collect();
            let cmp = self.cmp;
            map2(
                (&x, &self.a_shape),
                (&y, &self.b_shape),
                outputs[0].as_mut_slice::<bool>()?,
                &self.out_shape,
                |p, q| cmp.apply(p, q),
            );
            return Ok(());
        }
        crate::dispatch_stored!(a.dtype(), T => self.compute::<T>(a, b, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn build(ctx: &BuildCtx, cmp: Cmp) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let a = ctx.input(0)?;
    let b = ctx.input(1)?;
    if a.dtype != b.dtype {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("inputs are {} and {}", a.dtype.name(), b.dtype.name()),
        ));
    }
    if !a.dtype.is_stored()
        || a.dtype.is_narrow()
        || (matches!(a.dtype, DataType::Bool | DataType::String) && !matches!(cmp, Cmp::Eq))
    {
        return Err(ctx.err(
            Status::UnsupportedDatatype,
            format!("{} inputs are not supported", a.dtype.name()),
        ));
    }
    let out_shape = binary::output_shape(ctx)?;
    Ok(Built {
        outputs: vec![(DataType::Bool, out_shape.clone())],
        kernel: Box::new(CmpKernel {
            cmp,
            a_shape: a.shape.to_vec(),
            b_shape: b.shape.to_vec(),
            out_shape,
        }),
    })
}

macro_rules! comparison {
    ($def:ident, $name:literal, $cmp:ident, $min:literal, $newest:literal, $types:expr, $f:ident) => {
        #[doc = concat!("The `", $name, "` operator.")]
        pub static $def: OpDef = OpDef {
            op_type: $name,
            domain: "",
            min_opset: $min,
            newest: $newest,
            // The legacy broadcast attributes exist in the versions before 7.
            attributes: if $min < 7 {
                &["axis", "broadcast"]
            } else {
                &[]
            },
            types: $types,
            build: $f,
        };
        fn $f(ctx: &BuildCtx) -> Result<Built> {
            build(ctx, Cmp::$cmp)
        }
    };
}

comparison!(EQUAL, "Equal", Eq, 1, 19, ANY_AND_STRING, build_equal);
comparison!(LESS, "Less", Lt, 1, 13, NUMERIC, build_less);
comparison!(
    LESS_OR_EQUAL,
    "LessOrEqual",
    Le,
    12,
    16,
    NUMERIC,
    build_less_or_equal
);
comparison!(GREATER, "Greater", Gt, 1, 13, NUMERIC, build_greater);
comparison!(
    GREATER_OR_EQUAL,
    "GreaterOrEqual",
    Ge,
    12,
    16,
    NUMERIC,
    build_greater_or_equal
);
