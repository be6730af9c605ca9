//! `RoiAlign`: pools each region of interest of an NCHW feature map into an
//! `output_height × output_width` grid, averaging (or taking the maximum of) bilinear samples
//! on a `sampling_ratio` grid per bin (adaptive when 0); `half_pixel` or
//! `output_half_pixel` coordinates.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, FLOAT};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor};

/// The most bilinear samples one region of interest may take (channels × bins × grid points):
/// a few seconds of work. Detection heads take about 10^5 (256 channels × 7×7 bins × 2×2).
const MAX_SAMPLES_PER_ROI: usize = 1 << 28;

/// The `RoiAlign` operator.
pub static DEF: OpDef = OpDef {
    op_type: "RoiAlign",
    domain: "",
    min_opset: 10,
    newest: 22,
    attributes: &[
        "coordinate_transformation_mode",
        "mode",
        "output_height",
        "output_width",
        "sampling_ratio",
        "spatial_scale",
    ],
    types: FLOAT,
    build,
};

struct RoiAlignKernel {
    channels: usize,
    height: usize,
    width: usize,
    out_h: usize,
    out_w: usize,
    sampling_ratio: usize,
    spatial_scale: f64,
    half_pixel: bool,
    max: bool,
}

/// The four bilinear taps of one sample point: (offset, weight) each; all-zero outside.
fn taps(h: usize, w: usize, mut y: f64, mut x: f64) -> [(usize, f64); 4] {
    if y < -1.0 || y > h as f64 || x < -1.0 || x > w as f64 {
        return [(0, 0.0); 4];
    }
    y = y.max(0.0);
    x = x.max(0.0);
    let (mut yl, mut xl) = (y as usize, x as usize);
    let yh = if yl >= h - 1 {
        yl = h - 1;
        y = yl as f64;
        yl
    } else {
        yl + 1
    };
    let xh = if xl >= w - 1 {
        xl = w - 1;
        x = xl as f64;
        xl
    } else {
        xl + 1
    };
    let (ly, lx) = (y - yl as f64, x - xl as f64);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    [
        (yl * w + xl, hy * hx),
        (yl * w + xh, hy * lx),
        (yh * w + xl, ly * hx),
        (yh * w + xh, ly * lx),
    ]
}

impl Kernel for RoiAlignKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let missing = || Error::new(Status::InternalError, "input missing");
        let x = inputs[0].ok_or_else(missing)?.as_f32()?;
        let rois = inputs[1].ok_or_else(missing)?.as_f32()?;
        let batch = inputs[2].ok_or_else(missing)?.to_i64_vec()?;
        let out = outputs[0].as_mut_slice::<f32>()?;
        let (c, h, w) = (self.channels, self.height, self.width);
        let batches = x.len() / (c * h * w).max(1);
        let (ph_n, pw_n) = (self.out_h, self.out_w);
        let offset = if self.half_pixel { 0.5 } else { 0.0 };
        for (n, &bi) in batch.iter().enumerate() {
            if bi < 0 || bi as usize >= batches {
                return Err(Error::new(
                    Status::InvalidShape,
                    format!("batch index {bi} is outside the {batches} images"),
                ));
            }
            let r = &rois[n * 4..n * 4 + 4];
            let s = |v: f32| v as f64 * self.spatial_scale - offset;
            let (x0, y0, x1, y1) = (s(r[0]), s(r[1]), s(r[2]), s(r[3]));
            let (mut rw, mut rh) = (x1 - x0, y1 - y0);
            if !self.half_pixel {
                rw = rw.max(1.0);
                rh = rh.max(1.0);
            }
            let (bh, bw) = (rh / ph_n as f64, rw / pw_n as f64);
            let grid_h = if self.sampling_ratio > 0 {
                self.sampling_ratio
            } else {
                // Saturating: a NaN or huge extent gives 0 or usize::MAX, refused below.
                (rh / ph_n as f64).ceil().max(0.0) as usize
            };
            let grid_w = if self.sampling_ratio > 0 {
                self.sampling_ratio
            } else {
                (rw / pw_n as f64).ceil().max(0.0) as usize
            };
            // A grid that would take hours (an adaptive grid over a huge region, or a huge
            // sampling_ratio) is refused rather than run.
            let samples = [grid_h, grid_w, c, ph_n, pw_n]
                .iter()
                .try_fold(1usize, |acc, &d| acc.checked_mul(d))
                .filter(|&v| v <= MAX_SAMPLES_PER_ROI);
            if samples.is_none() {
                return Err(Error::new(
                    Status::UnsupportedShape,
                    format!(
                        "region {n} needs a {grid_h}×{grid_w} sampling grid per bin for {c} channels of {ph_n}×{pw_n} bins, more than {MAX_SAMPLES_PER_ROI} samples"
                    ),
                ));
            }
            let count = (grid_h * grid_w).max(1) as f64;
            for ch in 0..c {
                let plane = &x[(bi as usize * c + ch) * h * w..][..h * w];
                for ph in 0..ph_n {
                    for pw in 0..pw_n {
                        let mut acc: Option<f64> = None;
                        for iy in 0..grid_h {
                            let y = y0 + ph as f64 * bh + (iy as f64 + 0.5) * bh / grid_h as f64;
                            for ix in 0..grid_w {
                                let xx =
                                    x0 + pw as f64 * bw + (ix as f64 + 0.5) * bw / grid_w as f64;
                                let t = taps(h, w, y, xx);
                                let v = if self.max {
                                    t.iter()
                                        .map(|&(o, wt)| wt * plane[o] as f64)
                                        .fold(f64::NEG_INFINITY, f64::max)
                                } else {
                                    t.iter().map(|&(o, wt)| wt * plane[o] as f64).sum()
                                };
                                acc = Some(match (acc, self.max) {
                                    (None, _) => v,
                                    (Some(a), true) => a.max(v),
                                    (Some(a), false) => a + v,
                                });
                            }
                        }
                        let v = match (acc, self.max) {
                            (None, _) => 0.0,
                            (Some(a), true) => a,
                            (Some(a), false) => a / count,
                        };
                        out[((n * c + ch) * ph_n + ph) * pw_n + pw] = v as f32;
                    }
                }
            }
        }
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(3, 3, 1, 1)?;
    let x = ctx.float_input(0)?;
    let rois = ctx.float_input(1)?;
    let batch = ctx.input(2)?;
    if x.shape.len() != 4
        || rois.shape.len() != 2
        || rois.shape[1] != 4
        || batch.shape != [rois.shape[0]]
        || x.shape[2] == 0
        || x.shape[3] == 0
    {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "X {:?}, rois {:?}, batch_indices {:?}",
                x.shape, rois.shape, batch.shape
            ),
        ));
    }
    let (oh, ow) = (
        ctx.attr_int("output_height", 1)?,
        ctx.attr_int("output_width", 1)?,
    );
    if oh < 1 || ow < 1 {
        return Err(ctx.err(Status::InvalidModel, "output sizes must be positive"));
    }
    let half_pixel = match ctx
        .attr_string(
            "coordinate_transformation_mode",
            if ctx.opset >= 16 {
                "half_pixel"
            } else {
                "output_half_pixel"
            },
        )?
        .as_str()
    {
        "half_pixel" => true,
        "output_half_pixel" => false,
        other => return Err(ctx.err(Status::InvalidModel, format!("mode '{other}'"))),
    };
    let max = match ctx.attr_string("mode", "avg")?.as_str() {
        "avg" => false,
        "max" => true,
        other => return Err(ctx.err(Status::InvalidModel, format!("mode '{other}'"))),
    };
    let (n, c) = (rois.shape[0], x.shape[1]);
    Ok(Built {
        outputs: vec![(DataType::F32, vec![n, c, oh as usize, ow as usize])],
        kernel: Box::new(RoiAlignKernel {
            channels: c,
            height: x.shape[2],
            width: x.shape[3],
            out_h: oh as usize,
            out_w: ow as usize,
            sampling_ratio: ctx.attr_int("sampling_ratio", 0)?.max(0) as usize,
            spatial_scale: ctx.attr_float("spatial_scale", 1.0)? as f64,
            half_pixel,
            max,
        }),
    })
}
