//! `NonZero`: the indices of the non-zero elements, as an int64 `[rank, count]` tensor whose
//! `count` depends on the data (the kernel allocates its output).

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, ANY};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};

/// The `NonZero` operator.
pub static DEF: OpDef = OpDef {
    op_type: "NonZero",
    domain: "",
    min_opset: 9,
    newest: 13,
    attributes: &[],
    types: ANY,
    build,
};

struct NonZeroKernel;

fn positions<T: Elem>(x: &Tensor) -> Result<Vec<usize>> {
    let zero = T::default();
    Ok(x.as_slice::<T>()?
        .iter()
        .enumerate()
        .filter(|(_, v)| **v != zero)
        .map(|(i, _)| i)
        .collect())
}

impl Kernel for NonZeroKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        let found = crate::dispatch_stored!(x.dtype(), T => positions::<T>(x)?,
            other => return Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))));
        let rank = x.shape.len();
        let n = found.len();
        let mut out: Vec<i64> = crate::ir::try_filled(x.shape.len() * n)?;
        for (k, &flat) in found.iter().enumerate() {
            let mut rest = flat;
            for d in (0..x.shape.len()).rev() {
                out[d * n + k] = (rest % x.shape[d]) as i64;
                rest /= x.shape[d];
            }
        }
        outputs[0] = Tensor::from_vec(vec![rank, n], out)?;
        Ok(())
    }

    fn allocates_outputs(&self) -> bool {
        true
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    Ok(Built {
        outputs: vec![(DataType::I64, Vec::new())],
        kernel: Box::new(NonZeroKernel),
    })
}
