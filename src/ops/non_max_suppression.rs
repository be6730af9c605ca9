//! `NonMaxSuppression`: per batch and class, greedily keeps the highest-scoring boxes whose IoU
//! with every kept box is at most `iou_threshold` (and whose score exceeds `score_threshold`),
//! up to `max_output_boxes_per_class`; returns `[selected, 3]` int64 (batch, class, box). The
//! number selected depends on the data (the kernel allocates its output).

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};

/// The `NonMaxSuppression` operator.
pub static DEF: OpDef = OpDef {
    op_type: "NonMaxSuppression",
    domain: "",
    min_opset: 10,
    newest: 11,
    attributes: &["center_point_box"],
    types: &[DataType::F32],
    build,
};

struct NmsKernel {
    center: bool,
}

/// `(y1, x1, y2, x2)` with y1 ≤ y2, x1 ≤ x2.
fn corners(b: &[f32], center: bool) -> [f32; 4] {
    if center {
        let (xc, yc, w, h) = (b[0], b[1], b[2], b[3]);
        [yc - h / 2.0, xc - w / 2.0, yc + h / 2.0, xc + w / 2.0]
    } else {
        [
            b[0].min(b[2]),
            b[1].min(b[3]),
            b[0].max(b[2]),
            b[1].max(b[3]),
        ]
    }
}

fn iou(a: [f32; 4], b: [f32; 4]) -> f32 {
    let ih = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let iw = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = ih * iw;
    let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    if union <= 0.0 {
        0.0
    } else {
        inter / union
    }
}

fn scalar(t: Option<&Tensor>) -> Result<Option<f64>> {
    let Some(t) = t else { return Ok(None) };
    Ok(match t.dtype() {
        DataType::I64 => t.as_slice::<i64>()?.first().map(|&v| v as f64),
        DataType::F32 => t.as_slice::<f32>()?.first().map(|&v| v as f64),
        other => {
            return Err(Error::new(
                Status::InvalidModel,
                format!("{other:?} scalar"),
            ))
        }
    })
}

impl Kernel for NmsKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let boxes = inputs[0].ok_or_else(missing)?;
        let scores = inputs[1].ok_or_else(missing)?;
        let max_out = scalar(inputs.get(2).copied().flatten())?
            .unwrap_or(0.0)
            .max(0.0) as usize;
        let iou_t = scalar(inputs.get(3).copied().flatten())?.unwrap_or(0.0) as f32;
        let score_t = scalar(inputs.get(4).copied().flatten())?;
        let (bx, sc) = (boxes.as_f32()?, scores.as_f32()?);
        let (nb, nbox) = (boxes.shape[0], boxes.shape[1]);
        let nclass = scores.shape[1];
        let mut selected: Vec<i64> = Vec::new();
        for b in 0..nb {
            for c in 0..nclass {
                let s = &sc[(b * nclass + c) * nbox..][..nbox];
                let mut order: Vec<usize> = (0..nbox)
                    .filter(|&i| score_t.is_none_or(|t| s[i] as f64 > t))
                    .collect();
                order.sort_by(|&i, &j| s[j].total_cmp(&s[i]).then(i.cmp(&j)));
                let mut kept: Vec<usize> = Vec::new();
                for i in order {
                    if kept.len() >= max_out {
                        break;
                    }
                    let bi = corners(&bx[(b * nbox + i) * 4..][..4], self.center);
                    let clash = kept.iter().any(|&k| {
                        iou(bi, corners(&bx[(b * nbox + k) * 4..][..4], self.center)) > iou_t
                    });
                    if !clash {
                        kept.push(i);
                        selected.extend([b as i64, c as i64, i as i64]);
                    }
                }
            }
        }
        let n = selected.len() / 3;
        outputs[0] = Tensor::from_vec(vec![n, 3], selected)?;
        Ok(())
    }

    fn allocates_outputs(&self) -> bool {
        true
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 5, 1, 1)?;
    let (boxes, scores) = (ctx.input(0)?, ctx.input(1)?);
    let ok = boxes.dtype == DataType::F32
        && scores.dtype == DataType::F32
        && boxes.shape.len() == 3
        && boxes.shape[2] == 4
        && scores.shape.len() == 3
        && scores.shape[0] == boxes.shape[0]
        && scores.shape[2] == boxes.shape[1];
    if !ok {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("boxes {:?} and scores {:?}", boxes.shape, scores.shape),
        ));
    }
    Ok(Built {
        outputs: vec![(DataType::I64, Vec::new())],
        kernel: Box::new(NmsKernel {
            center: ctx.attr_int("center_point_box", 0)? != 0,
        }),
    })
}
