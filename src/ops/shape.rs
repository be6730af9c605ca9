//! `Shape`: the input's shape as a 1-D int64 tensor (opset 15 `start`/`end` select a slice of
//! the dimensions).

use super::util::ConstKernel;
use super::{BuildCtx, Built, OpDef, MOVED};
use crate::error::Result;
use crate::ir::{DataType, Tensor, TensorData};

/// The `Shape` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Shape",
    domain: "",
    min_opset: 1,
    newest: 25,
    attributes: &["start", "end"],
    types: MOVED,
    build,
};

/// The dimension range `[start, end)` selected by the `start`/`end` attributes, clamped to
/// `0..=rank` after negative values count from the back.
fn range(start: i64, end: Option<i64>, rank: usize) -> (usize, usize) {
    let r = rank as i64;
    let norm = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let s = norm(start);
    let e = end.map_or(rank, norm);
    (s, e.max(s))
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.input(0)?;
    let (start, end) = if ctx.opset >= 15 {
        let end = match ctx.node.attrs.contains_key("end") {
            true => Some(ctx.attr_int("end", 0)?),
            false => None,
        };
        (ctx.attr_int("start", 0)?, end)
    } else {
        (0, None)
    };
    let (s, e) = range(start, end, x.shape.len());
    let dims: Vec<i64> = x.shape[s..e].iter().map(|&d| d as i64).collect();
    let out = Tensor {
        shape: vec![dims.len()],
        data: TensorData::I64(dims),
    };
    Ok(Built {
        outputs: vec![(DataType::I64, out.shape.clone())],
        kernel: Box::new(ConstKernel(out)),
    })
}

#[cfg(test)]
mod tests {
    use super::range;

    #[test]
    fn start_end_clamp() {
        assert_eq!(range(0, None, 3), (0, 3));
        assert_eq!(range(-1, None, 3), (2, 3));
        assert_eq!(range(1, Some(-1), 3), (1, 2));
        assert_eq!(range(-10, Some(10), 3), (0, 3));
        assert_eq!(range(2, Some(1), 3), (2, 2));
    }
}
