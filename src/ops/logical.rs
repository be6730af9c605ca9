//! The logical operators, one table: `And`, `Or`, `Xor` (two bool inputs, numpy broadcasting)
//! and `Not`.

use super::util::BuildCtx;
use super::{binary, Built, Kernel, OpDef};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::broadcast::{map1, map2};

const BOOL: &[DataType] = &[DataType::Bool];

#[derive(Clone, Copy, Debug)]
enum Logic {
    And,
    Or,
    Xor,
}

struct LogicKernel {
    op: Logic,
    a_shape: Vec<usize>,
    b_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

impl Kernel for LogicKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "logical input missing");
        let a = inputs[0].ok_or_else(missing)?.as_slice::<bool>()?;
        let b = inputs[1].ok_or_else(missing)?.as_slice::<bool>()?;
        let op = self.op;
        map2(
            (a, &self.a_shape),
            (b, &self.b_shape),
            outputs[0].as_mut_slice::<bool>()?,
            &self.out_shape,
            |x, y| match op {
                Logic::And => x & y,
                Logic::Or => x | y,
                Logic::Xor => x ^ y,
            },
        );
        Ok(())
    }
}

fn bool_input(ctx: &BuildCtx, i: usize) -> Result<()> {
    let x = ctx.input(i)?;
    if x.dtype != DataType::Bool {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("input {i} is {}, not bool", x.dtype.name()),
        ));
    }
    Ok(())
}

fn build(ctx: &BuildCtx, op: Logic) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    bool_input(ctx, 0)?;
    bool_input(ctx, 1)?;
    let out_shape = binary::output_shape(ctx)?;
    Ok(Built {
        outputs: vec![(DataType::Bool, out_shape.clone())],
        kernel: Box::new(LogicKernel {
            op,
            a_shape: ctx.input(0)?.shape.to_vec(),
            b_shape: ctx.input(1)?.shape.to_vec(),
            out_shape,
        }),
    })
}

macro_rules! logical {
    ($def:ident, $name:literal, $op:ident, $f:ident) => {
        #[doc = concat!("The `", $name, "` operator.")]
        pub static $def: OpDef = OpDef {
            op_type: $name,
            domain: "",
            min_opset: 1,
            newest: 7,
            attributes: &["axis", "broadcast"],
            types: BOOL,
            build: $f,
        };
        fn $f(ctx: &BuildCtx) -> Result<Built> {
            build(ctx, Logic::$op)
        }
    };
}

logical!(AND, "And", And, build_and);
logical!(OR, "Or", Or, build_or);
logical!(XOR, "Xor", Xor, build_xor);

/// The `Not` operator.
pub static NOT: OpDef = OpDef {
    op_type: "Not",
    domain: "",
    min_opset: 1,
    newest: 1,
    attributes: &[],
    types: BOOL,
    build: build_not,
};

struct NotKernel;

impl Kernel for NotKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "Not input missing"))?;
        let shape = x.shape.clone();
        map1(
            (x.as_slice::<bool>()?, &shape),
            outputs[0].as_mut_slice::<bool>()?,
            &shape,
            |v| !v,
        );
        Ok(())
    }
}

fn build_not(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    bool_input(ctx, 0)?;
    Ok(Built {
        outputs: vec![(DataType::Bool, ctx.input(0)?.shape.to_vec())],
        kernel: Box::new(NotKernel),
    })
}
