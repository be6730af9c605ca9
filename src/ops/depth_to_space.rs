//! `DepthToSpace` (DCR or CRD order) and `SpaceToDepth`: move `blocksize × blocksize` blocks
//! between the channel and the spatial dimensions of an NCHW tensor, as transposes of a 6-D
//! view.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, STORED};
use crate::error::{Error, Result, Status};
use crate::ir::Tensor;
use crate::kernels::transpose::transpose;

/// The `DepthToSpace` operator.
pub static DEF: OpDef = OpDef {
    op_type: "DepthToSpace",
    domain: "",
    min_opset: 1,
    newest: 28,
    attributes: &["blocksize", "mode"],
    types: STORED,
    build: build_d2s,
};

/// The `SpaceToDepth` operator.
pub static SPACE_TO_DEPTH_DEF: OpDef = OpDef {
    op_type: "SpaceToDepth",
    domain: "",
    min_opset: 1,
    newest: 28,
    attributes: &["blocksize", "mode"],
    types: STORED,
    build: build_s2d,
};

/// A transpose of the input seen as `view`.
struct ViewTranspose {
    view: Vec<usize>,
    perm: Vec<usize>,
}

impl Kernel for ViewTranspose {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        crate::dispatch_stored!(x.dtype(), T => {
            transpose(x.as_slice::<T>()?, &self.view, &self.perm, outputs[0].as_mut_slice::<T>()?);
            Ok(())
        }, other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

fn nchw(ctx: &BuildCtx) -> Result<([usize; 4], usize)> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.input(0)?;
    let b = ctx.attr_int("blocksize", 0)?;
    if x.shape.len() != 4 || b <= 0 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "needs a 4-D input and a positive blocksize ({:?}, {b})",
                x.shape
            ),
        ));
    }
    Ok(([x.shape[0], x.shape[1], x.shape[2], x.shape[3]], b as usize))
}

fn build_d2s(ctx: &BuildCtx) -> Result<Built> {
    let ([n, c, h, w], b) = nchw(ctx)?;
    let b2 = b
        .checked_mul(b)
        .ok_or_else(|| ctx.err(Status::InvalidModel, format!("blocksize {b} is too large")))?;
    if c % b2 != 0 {
        return Err(ctx.err(
            Status::InvalidModel,
            "channels are not a multiple of blocksize²",
        ));
    }
    let c2 = c / b2;
    let (view, perm) = match ctx.attr_string("mode", "DCR")?.as_str() {
        "DCR" => (vec![n, b, b, c2, h, w], vec![0, 3, 4, 1, 5, 2]),
        "CRD" => (vec![n, c2, b, b, h, w], vec![0, 1, 4, 2, 5, 3]),
        other => return Err(ctx.err(Status::InvalidModel, format!("mode '{other}'"))),
    };
    let too_large = || ctx.err(Status::UnsupportedShape, "the output is too large");
    let (oh, ow) = (
        h.checked_mul(b).ok_or_else(too_large)?,
        w.checked_mul(b).ok_or_else(too_large)?,
    );
    Ok(Built {
        outputs: vec![(ctx.input(0)?.dtype, vec![n, c2, oh, ow])],
        kernel: Box::new(ViewTranspose { view, perm }),
    })
}

fn build_s2d(ctx: &BuildCtx) -> Result<Built> {
    let ([n, c, h, w], b) = nchw(ctx)?;
    if h % b != 0 || w % b != 0 {
        return Err(ctx.err(
            Status::InvalidModel,
            "spatial size is not a multiple of blocksize",
        ));
    }
    let oc = b
        .checked_mul(b)
        .and_then(|b2| b2.checked_mul(c))
        .ok_or_else(|| ctx.err(Status::UnsupportedShape, "the output is too large"))?;
    // DCR puts the block offset before the channel, CRD after it.
    let perm = match ctx.attr_string("mode", "DCR")?.as_str() {
        "DCR" => vec![0, 3, 5, 1, 2, 4],
        "CRD" => vec![0, 1, 3, 5, 2, 4],
        other => return Err(ctx.err(Status::InvalidModel, format!("mode '{other}'"))),
    };
    Ok(Built {
        outputs: vec![(ctx.input(0)?.dtype, vec![n, oc, h / b, w / b])],
        kernel: Box::new(ViewTranspose {
            view: vec![n, c, h / b, b, w / b, b],
            perm,
        }),
    })
}
