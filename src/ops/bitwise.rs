//! The integer bit operators, one table: `BitwiseAnd`, `BitwiseOr`, `BitwiseXor` (numpy
//! broadcasting), `BitwiseNot`, and `BitShift` (`direction` LEFT or RIGHT; signed right shifts
//! are arithmetic; a shift of the type's width or more, or a negative one, moves every bit out).

use super::util::BuildCtx;
use super::{binary, Built, Kernel, OpDef};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};
use crate::kernels::broadcast::{map1, map2};

/// The integer types.
const INTEGERS: &[DataType] = &[
    DataType::I8,
    DataType::U8,
    DataType::I16,
    DataType::U16,
    DataType::I32,
    DataType::U32,
    DataType::I64,
    DataType::U64,
];

/// Integers as u64 bit patterns (sign-extended) and back (truncated).
trait Bits: Elem {
    const SIGNED: bool;
    fn bits(self) -> u64;
    fn from_bits(v: u64) -> Self;
}

macro_rules! bits {
    ($signed:literal: $($t:ty),+) => {$(
        impl Bits for $t {
            const SIGNED: bool = $signed;
            fn bits(self) -> u64 { self as u64 }
            fn from_bits(v: u64) -> Self { v as $t }
        }
    )+};
}
bits!(true: i8, i16, i32, i64);
bits!(false: u8, u16, u32, u64);

#[derive(Clone, Copy, Debug)]
enum Op {
    And,
    Or,
    Xor,
    Left,
    Right,
}

struct BinaryBits {
    op: Op,
    a_shape: Vec<usize>,
    b_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

impl BinaryBits {
    fn compute<T: Bits>(&self, a: &Tensor, b: &Tensor, out: &mut Tensor) -> Result<()> {
        let op = self.op;
        let width = (T::SIZE * 8) as u64;
        map2(
            (a.as_slice::<T>()?, &self.a_shape),
            (b.as_slice::<T>()?, &self.b_shape),
            out.as_mut_slice::<T>()?,
            &self.out_shape,
            |x, y| {
                let (x, y) = (x.bits(), y.bits());
                let mask = if width == 64 {
                    u64::MAX
                } else {
                    (1u64 << width) - 1
                };
                // A negative (signed) or too large shift moves every bit out.
                let out_of_range = (T::SIGNED && (y as i64) < 0) || (y & mask) >= width;
                T::from_bits(match op {
                    Op::And => x & y,
                    Op::Or => x | y,
                    Op::Xor => x ^ y,
                    Op::Left if out_of_range => 0,
                    Op::Left => (x << y) & mask,
                    // Signed right shifts are arithmetic: the sign fills in.
                    Op::Right if T::SIGNED && out_of_range => {
                        if (x as i64) < 0 {
                            u64::MAX
                        } else {
                            0
                        }
                    }
                    Op::Right if out_of_range => 0,
                    Op::Right if T::SIGNED => ((x as i64) >> y) as u64,
                    Op::Right => (x & mask) >> y,
                })
            },
        );
        Ok(())
    }
}

impl Kernel for BinaryBits {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let (a, b) = (
            inputs[0].ok_or_else(missing)?,
            inputs[1].ok_or_else(missing)?,
        );
        let out = &mut outputs[0];
        match a.dtype() {
            DataType::I8 => self.compute::<i8>(a, b, out),
            DataType::U8 => self.compute::<u8>(a, b, out),
            DataType::I16 => self.compute::<i16>(a, b, out),
            DataType::U16 => self.compute::<u16>(a, b, out),
            DataType::I32 => self.compute::<i32>(a, b, out),
            DataType::U32 => self.compute::<u32>(a, b, out),
            DataType::I64 => self.compute::<i64>(a, b, out),
            DataType::U64 => self.compute::<u64>(a, b, out),
            other => Err(Error::new(
                Status::UnsupportedDatatype,
                format!("{other:?}"),
            )),
        }
    }
}

fn build(ctx: &BuildCtx, op: Op) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    if a.dtype != b.dtype || !INTEGERS.contains(&a.dtype) {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("inputs are {} and {}", a.dtype.name(), b.dtype.name()),
        ));
    }
    let out_shape = binary::output_shape(ctx)?;
    Ok(Built {
        outputs: vec![(a.dtype, out_shape.clone())],
        kernel: Box::new(BinaryBits {
            op,
            a_shape: a.shape.to_vec(),
            b_shape: b.shape.to_vec(),
            out_shape,
        }),
    })
}

macro_rules! bit_op {
    ($def:ident, $name:literal, $op:ident, $min:literal, $newest:literal, $f:ident) => {
        #[doc = concat!("The `", $name, "` operator.")]
        pub static $def: OpDef = OpDef {
            op_type: $name,
            domain: "",
            min_opset: $min,
            newest: $newest,
            attributes: &[],
            types: INTEGERS,
            build: $f,
        };
        fn $f(ctx: &BuildCtx) -> Result<Built> {
            build(ctx, Op::$op)
        }
    };
}

bit_op!(AND, "BitwiseAnd", And, 18, 18, build_and);
bit_op!(OR, "BitwiseOr", Or, 18, 18, build_or);
bit_op!(XOR, "BitwiseXor", Xor, 18, 18, build_xor);

/// The `BitShift` operator.
pub static SHIFT: OpDef = OpDef {
    op_type: "BitShift",
    domain: "",
    min_opset: 11,
    newest: 28,
    attributes: &["direction"],
    types: INTEGERS,
    build: build_shift,
};

fn build_shift(ctx: &BuildCtx) -> Result<Built> {
    match ctx.attr_string("direction", "")?.as_str() {
        "LEFT" => build(ctx, Op::Left),
        "RIGHT" => build(ctx, Op::Right),
        other => Err(ctx.err(Status::InvalidModel, format!("direction '{other}'"))),
    }
}

/// The `BitwiseNot` operator.
pub static NOT: OpDef = OpDef {
    op_type: "BitwiseNot",
    domain: "",
    min_opset: 18,
    newest: 18,
    attributes: &[],
    types: INTEGERS,
    build: build_not,
};

struct NotBits;

fn not<T: Bits>(x: &Tensor, out: &mut Tensor) -> Result<()> {
    let shape = x.shape.clone();
    map1(
        (x.as_slice::<T>()?, &shape),
        out.as_mut_slice::<T>()?,
        &shape,
        |v| T::from_bits(!v.bits()),
    );
    Ok(())
}

impl Kernel for NotBits {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        let out = &mut outputs[0];
        match x.dtype() {
            DataType::I8 => not::<i8>(x, out),
            DataType::U8 => not::<u8>(x, out),
            DataType::I16 => not::<i16>(x, out),
            DataType::U16 => not::<u16>(x, out),
            DataType::I32 => not::<i32>(x, out),
            DataType::U32 => not::<u32>(x, out),
            DataType::I64 => not::<i64>(x, out),
            DataType::U64 => not::<u64>(x, out),
            other => Err(Error::new(
                Status::UnsupportedDatatype,
                format!("{other:?}"),
            )),
        }
    }
}

fn build_not(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.input(0)?;
    if !INTEGERS.contains(&x.dtype) {
        return Err(ctx.err(Status::InvalidModel, format!("{} input", x.dtype.name())));
    }
    Ok(Built {
        outputs: vec![(x.dtype, x.shape.to_vec())],
        kernel: Box::new(NotBits),
    })
}
