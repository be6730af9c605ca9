//! `Reshape`: the same elements under a new shape (`0` copies a dimension unless `allowzero`,
//! `-1` is inferred).

use super::util::CopyKernel;
use super::{BuildCtx, Built, OpDef, MOVED};
use crate::error::{Result, Status};

/// The `Reshape` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Reshape",
    domain: "",
    min_opset: 5,
    newest: 25,
    attributes: &["allowzero"],
    types: MOVED,
    build,
};

/// Resolves a requested shape against the input shape.
pub fn resolve(
    input: &[usize],
    requested: &[i64],
    allow_zero: bool,
) -> std::result::Result<Vec<usize>, String> {
    let total: usize = input.iter().product();
    let mut out = Vec::with_capacity(requested.len());
    let mut infer_at = None;
    for (i, &d) in requested.iter().enumerate() {
        match d {
            -1 => {
                if infer_at.replace(i).is_some() {
                    return Err("more than one -1 in the shape".into());
                }
                out.push(1);
            }
            0 if !allow_zero => {
                let v = *input
                    .get(i)
                    .ok_or_else(|| format!("0 at position {i} copies no input dimension"))?;
                out.push(v);
            }
            d if d >= 0 => out.push(d as usize),
            d => return Err(format!("invalid dimension {d}")),
        }
    }
    if allow_zero && infer_at.is_some() && requested.contains(&0) {
        return Err("-1 together with 0 under allowzero=1".into());
    }
    let known = out
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| format!("the element count of shape {requested:?} overflows"))?;
    if let Some(i) = infer_at {
        if known == 0 || !total.is_multiple_of(known) {
            return Err(format!(
                "cannot infer -1: {total} elements do not divide into {known}"
            ));
        }
        out[i] = total / known;
    } else if known != total {
        return Err(format!(
            "shape {requested:?} holds {known} elements, the input {input:?} has {total}"
        ));
    }
    Ok(out)
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let x = ctx.input(0)?;
    let shape = ctx
        .const_input(1, "shape")?
        .to_i64_vec()
        .map_err(|e| ctx.err(Status::InvalidModel, e.message))?;
    let allow_zero = ctx.opset >= 14 && ctx.attr_int("allowzero", 0)? != 0;
    let out = resolve(x.shape, &shape, allow_zero).map_err(|m| ctx.err(Status::InvalidModel, m))?;
    Ok(Built {
        outputs: vec![(x.dtype, out)],
        kernel: Box::new(CopyKernel),
    })
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn zero_and_minus_one() {
        assert_eq!(resolve(&[2, 3, 4], &[0, -1], false).unwrap(), vec![2, 12]);
        assert_eq!(
            resolve(&[2, 3, 4], &[4, 0, 2], false).unwrap(),
            vec![4, 3, 2]
        );
        assert_eq!(resolve(&[0, 3], &[3, 0], true).unwrap(), vec![3, 0]);
        assert!(resolve(&[2, 3], &[-1, -1], false).is_err());
        assert!(resolve(&[2, 3], &[4, 2], false).is_err());
    }
}
