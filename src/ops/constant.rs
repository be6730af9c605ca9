//! `Constant`: a tensor fixed by an attribute (`value`, or since opset 12 `value_float(s)`,
//! `value_int(s)`).

use super::util::ConstKernel;
use super::{BuildCtx, Built, OpDef, MOVED};
use crate::error::{Result, Status};
use crate::ir::{Attr, Tensor, TensorData};

/// The `Constant` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Constant",
    domain: "",
    min_opset: 1,
    newest: 25,
    attributes: &[
        "value",
        "value_float",
        "value_floats",
        "value_int",
        "value_ints",
        "value_string",
        "value_strings",
        "sparse_value",
    ],
    types: MOVED,
    build,
};

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(0, 0, 1, 1)?;
    if ctx.node.attrs.len() != 1 {
        return Err(ctx.err(
            Status::InvalidModel,
            "exactly one value attribute must be set",
        ));
    }
    let (name, attr) = ctx.node.attrs.iter().next().expect("one attribute");
    let t = match (name.as_str(), attr) {
        ("value", Attr::Tensor(t)) => t.clone(),
        ("value_float", Attr::Float(v)) => Tensor::new(vec![], TensorData::F32(vec![*v]))?,
        ("value_floats", Attr::Floats(v)) => {
            Tensor::new(vec![v.len()], TensorData::F32(v.clone()))?
        }
        ("value_int", Attr::Int(v)) => Tensor::new(vec![], TensorData::I64(vec![*v]))?,
        ("value_ints", Attr::Ints(v)) => Tensor::new(vec![v.len()], TensorData::I64(v.clone()))?,
        ("value_string" | "value_strings" | "sparse_value", _) => {
            return Err(ctx.err(
                Status::UnsupportedAttribute,
                format!("'{name}' constants are not supported"),
            ))
        }
        (name, a) => {
            return Err(ctx.err(
                Status::InvalidModel,
                format!(
                    "attribute '{name}' of kind {} is not a constant value",
                    a.kind()
                ),
            ))
        }
    };
    Ok(Built {
        outputs: vec![(t.dtype(), t.shape.clone())],
        kernel: Box::new(ConstKernel(t)),
    })
}
