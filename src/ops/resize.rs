//! `Resize` (opset 10 to 19) and `Upsample` (7 to 9): nearest (four rounding modes), linear and
//! cubic interpolation with every `coordinate_transformation_mode`, `exclude_outside`,
//! `extrapolation_value`, antialiasing, `axes` and `keep_aspect_ratio_policy`.
//!
//! Interpolation is separable: for each resized axis the plan holds, per output index, the
//! input indices it reads (clamped to the edge) and their weights. Float32 tensors resized on
//! their last two axes only go through [`crate::kernels::resize`] (each output element from its
//! row and column taps, nearest-neighbour axes as gathers, rows in parallel); the rest applies
//! the axes one after another in f64.

use super::util::BuildCtx;
use super::{Built, Kernel, OpDef, NUMERIC};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Elem, Tensor};
use crate::kernels::resize::{self, AxisTaps};

/// The `Resize` operator.
pub static DEF: OpDef = OpDef {
    op_type: "Resize",
    domain: "",
    min_opset: 10,
    newest: 19,
    attributes: &[
        "antialias",
        "axes",
        "coordinate_transformation_mode",
        "cubic_coeff_a",
        "exclude_outside",
        "extrapolation_value",
        "keep_aspect_ratio_policy",
        "mode",
        "nearest_mode",
    ],
    types: NUMERIC,
    build,
};

/// The `Upsample` operator.
pub static UPSAMPLE_DEF: OpDef = OpDef {
    op_type: "Upsample",
    domain: "",
    min_opset: 7,
    newest: 10,
    attributes: &["mode", "scales"],
    types: NUMERIC,
    build: build_upsample,
};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Nearest(Rounding),
    Linear,
    Cubic(f64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rounding {
    PreferFloor,
    PreferCeil,
    Floor,
    Ceil,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

/// The interpolation options shared by every axis.
#[derive(Clone, Copy, Debug)]
struct Options {
    mode: Mode,
    coord: Coord,
    antialias: bool,
    exclude_outside: bool,
}

/// One resized axis: per output index, `taps` (input index, weight) pairs.
#[derive(Debug)]
struct AxisPlan {
    out_len: usize,
    taps: usize,
    index: Vec<usize>,
    weight: Vec<f64>,
    /// Output indices whose source lies outside the input (tf_crop_and_resize).
    outside: Vec<bool>,
}

/// The weights of the taps around a source coordinate with fractional part `ratio` in (0, 1].
fn coeffs(opts: &Options, ratio: f64, scale: f64) -> Vec<f64> {
    let cubic = |a: f64, x: f64| {
        let x = x.abs();
        if x <= 1.0 {
            (a + 2.0) * x.powi(3) - (a + 3.0) * x * x + 1.0
        } else if x < 2.0 {
            a * x.powi(3) - 5.0 * a * x * x + 8.0 * a * x - 4.0 * a
        } else {
            0.0
        }
    };
    let normalised = |c: Vec<f64>| {
        let s: f64 = c.iter().sum();
        c.into_iter().map(|v| v / s).collect()
    };
    match opts.mode {
        Mode::Nearest(r) => {
            if ratio == 1.0 {
                return vec![0.0, 1.0];
            }
            let up = match r {
                Rounding::PreferFloor => ratio > 0.5,
                Rounding::PreferCeil => ratio >= 0.5,
                Rounding::Floor => false,
                Rounding::Ceil => true,
            };
            if up {
                vec![0.0, 1.0]
            } else {
                vec![1.0, 0.0]
            }
        }
        Mode::Linear if opts.antialias && scale < 1.0 => {
            let start = (-1.0 / scale).floor() as i64 + 1;
            let footprint = 2 - 2 * start;
            normalised(
                (start..start + footprint)
                    .map(|i| (1.0 - ((i as f64 - ratio) * scale).abs()).clamp(0.0, 1.0))
                    .collect(),
            )
        }
        Mode::Linear => vec![1.0 - ratio, ratio],
        Mode::Cubic(a) if opts.antialias && scale < 1.0 => {
            let start = (-2.0 / scale).floor() as i64 + 1;
            let end = 2 - start;
            normalised(
                (start..end)
                    .map(|i| cubic(a, scale * (i as f64 - ratio)))
                    .collect(),
            )
        }
        Mode::Cubic(a) => vec![
            cubic(a, ratio + 1.0),
            cubic(a, ratio),
            cubic(a, 1.0 - ratio),
            cubic(a, 2.0 - ratio),
        ],
    }
}

/// Plans one axis: `scale` is the axis's scale factor, `roi` its (start, end) for
/// tf_crop_and_resize.
fn plan_axis(
    opts: &Options,
    in_len: usize,
    out_len: usize,
    scale: f64,
    roi: (f64, f64),
) -> AxisPlan {
    let out_w = scale * in_len as f64;
    let n_in = in_len as f64;
    let mut plan = AxisPlan {
        out_len,
        taps: 0,
        index: Vec::new(),
        weight: Vec::new(),
        outside: vec![false; out_len],
    };
    for y in 0..out_len {
        let yf = y as f64;
        let x = match opts.coord {
            Coord::AlignCorners if out_w == 1.0 => 0.0,
            Coord::AlignCorners => yf * (n_in - 1.0) / (out_w - 1.0),
            Coord::Asymmetric => yf / scale,
            Coord::TfCropAndResize => {
                let x = if out_w == 1.0 {
                    (roi.1 - roi.0) * (n_in - 1.0) / 2.0
                } else {
                    yf * (roi.1 - roi.0) * (n_in - 1.0) / (out_w - 1.0)
                } + roi.0 * (n_in - 1.0);
                plan.outside[y] = x < 0.0 || x > n_in - 1.0;
                x
            }
            Coord::PytorchHalfPixel if out_w == 1.0 => -0.5,
            Coord::PytorchHalfPixel | Coord::HalfPixel => (yf + 0.5) / scale - 0.5,
            Coord::HalfPixelSymmetric => {
                let adjustment = out_len as f64 / out_w;
                let offset = n_in / 2.0 * (1.0 - adjustment);
                offset + (yf + 0.5) / scale - 0.5
            }
        };
        // The tap on the left of x is preferred: ratio in (0, 1].
        let base = x.ceil() - 1.0;
        let ratio = x - base;
        let mut c = coeffs(opts, ratio, scale);
        let n = c.len();
        // Saturating: a region of interest far outside the input (1e30) must not overflow;
        // the taps are clamped into the input below anyway.
        let start = (base as i64).saturating_sub(n as i64 / 2 - 1);
        let idx: Vec<i64> = (0..n as i64).map(|k| start.saturating_add(k)).collect();
        if opts.exclude_outside {
            for (w, &i) in c.iter_mut().zip(&idx) {
                if i < 0 || i >= in_len as i64 {
                    *w = 0.0;
                }
            }
            let s: f64 = c.iter().sum();
            let s = if s == 0.0 { 1.0 } else { s };
            c.iter_mut().for_each(|w| *w /= s);
        }
        plan.taps = n;
        for (w, i) in c.into_iter().zip(idx) {
            plan.index.push(i.clamp(0, in_len as i64 - 1) as usize);
            plan.weight.push(w);
        }
    }
    plan
}

struct ResizeKernel {
    in_shape: Vec<usize>,
    /// Per axis, the plan (`None`: copied as it is).
    axes: Vec<Option<AxisPlan>>,
    extrapolation: f64,
    /// The float32 path, where only the last two axes are resized and every output reads
    /// inside the input: the planes and their row and column taps.
    planes: Option<PlaneResize>,
}

/// A resize of the last two axes only, as [`resize::resize_planes`] computes it.
struct PlaneResize {
    planes: usize,
    in_hw: (usize, usize),
    rows: AxisTaps,
    cols: AxisTaps,
}

impl PlaneResize {
    /// The plane path of `plans` (one per axis of `in_shape`, resizing it to `out_shape`), if
    /// it has one.
    fn of(in_shape: &[usize], out_shape: &[usize], plans: &[Option<AxisPlan>]) -> Option<Self> {
        let rank = in_shape.len();
        if rank < 2 || plans[..rank - 2].iter().any(Option::is_some) {
            return None;
        }
        // Axes left out of the plans are copied, except empty outputs (the other path, which
        // writes nothing): an axis resized to 0 has no plan, and the planes would count the
        // input's leading axes instead of the output's.
        if out_shape.contains(&0) {
            return None;
        }
        if plans.iter().flatten().any(|p| p.outside.contains(&true)) {
            return None;
        }
        let taps = |a: usize| match &plans[a] {
            Some(p) => AxisTaps::new(p.out_len, p.taps, p.index.clone(), &p.weight),
            None => AxisTaps::identity(in_shape[a]),
        };
        Some(PlaneResize {
            planes: in_shape[..rank - 2].iter().product(),
            in_hw: (in_shape[rank - 2], in_shape[rank - 1]),
            rows: taps(rank - 2),
            cols: taps(rank - 1),
        })
    }
}

impl ResizeKernel {
    fn compute<T: Elem>(&self, x: &Tensor, out: &mut Tensor) -> Result<()> {
        let mut shape = self.in_shape.clone();
        let mut cur: Vec<f64> = x.as_slice::<T>()?.iter().map(|v| v.to_f64()).collect();
        for (axis, plan) in self.axes.iter().enumerate() {
            let Some(plan) = plan else { continue };
            let outer: usize = shape[..axis].iter().product();
            let inner: usize = shape[axis + 1..].iter().product();
            let in_len = shape[axis];
            let mut next = vec![0.0; outer * plan.out_len * inner];
            for o in 0..outer {
                for y in 0..plan.out_len {
                    let dst = (o * plan.out_len + y) * inner;
                    for t in 0..plan.taps {
                        let (i, w) = (
                            plan.index[y * plan.taps + t],
                            plan.weight[y * plan.taps + t],
                        );
                        if w == 0.0 {
                            continue;
                        }
                        let src = (o * in_len + i) * inner;
                        for k in 0..inner {
                            next[dst + k] += w * cur[src + k];
                        }
                    }
                }
            }
            shape[axis] = plan.out_len;
            cur = next;
        }
        if self
            .axes
            .iter()
            .flatten()
            .any(|p| p.outside.contains(&true))
        {
            let rank = shape.len();
            let mut idx = vec![0usize; rank];
            for v in cur.iter_mut() {
                let outside = self
                    .axes
                    .iter()
                    .enumerate()
                    .any(|(d, p)| p.as_ref().is_some_and(|p| p.outside[idx[d]]));
                if outside {
                    *v = self.extrapolation;
                }
                for d in (0..rank).rev() {
                    idx[d] += 1;
                    if idx[d] < shape[d] {
                        break;
                    }
                    idx[d] = 0;
                }
            }
        }
        for (o, v) in out.as_mut_slice::<T>()?.iter_mut().zip(cur) {
            *o = T::from_f64(if T::DTYPE.is_integer() { v.round() } else { v });
        }
        Ok(())
    }
}

impl Kernel for ResizeKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = inputs[0].ok_or_else(|| Error::new(Status::InternalError, "input missing"))?;
        if let (Some(p), DataType::F32) = (&self.planes, x.dtype()) {
            let out = outputs[0].as_mut_slice::<f32>()?;
            let isa = crate::kernels::cpu::isa();
            resize::resize_planes(isa, p.planes, p.in_hw, (&p.rows, &p.cols), x.as_f32()?, out);
            return Ok(());
        }
        crate::dispatch_numeric!(x.dtype(), T => self.compute::<T>(x, &mut outputs[0]),
            other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
    }
}

/// The float contents of an optional input (`None` when absent or empty).
fn floats(ctx: &BuildCtx, i: usize, what: &str) -> Result<Option<Vec<f64>>> {
    if ctx.opt_input(i).is_none() {
        return Ok(None);
    }
    let t = ctx.const_input(i, what)?;
    if t.is_empty() {
        return Ok(None);
    }
    let v = crate::dispatch_numeric!(t.dtype(), T => t.as_slice::<T>()?.iter().map(|v| v.to_f64()).collect(),
        other => return Err(ctx.err(Status::InvalidModel, format!("{what} of type {}", other.name()))));
    Ok(Some(v))
}

/// Builds the kernel from parsed options; `scales`/`sizes` cover `axes`.
#[allow(clippy::too_many_arguments)]
fn finish(
    ctx: &BuildCtx,
    opts: Options,
    axes: Vec<usize>,
    scales: Option<Vec<f64>>,
    sizes: Option<Vec<f64>>,
    roi: Option<Vec<f64>>,
    policy: &str,
    extrapolation: f64,
) -> Result<Built> {
    let x = ctx.input(0)?;
    let rank = x.shape.len();
    let n = axes.len();
    let mut scale = vec![1.0f64; rank];
    let mut out = x.shape.to_vec();
    match (scales, sizes) {
        (Some(s), None) => {
            if s.len() != n || s.iter().any(|&v| v.is_nan() || v <= 0.0 || !v.is_finite()) {
                return Err(ctx.err(Status::InvalidModel, format!("scales {s:?}")));
            }
            for (k, &a) in axes.iter().enumerate() {
                scale[a] = s[k];
                let o = (s[k] * x.shape[a] as f64).floor();
                if o > (1u64 << 40) as f64 {
                    return Err(ctx.err(Status::UnsupportedShape, "the output is too large"));
                }
                out[a] = o as usize;
            }
        }
        (None, Some(z)) => {
            if z.len() != n || z.iter().any(|&v| v < 0.0) {
                return Err(ctx.err(Status::InvalidModel, format!("sizes {z:?}")));
            }
            for (k, &a) in axes.iter().enumerate() {
                scale[a] = z[k] / x.shape[a] as f64;
                out[a] = z[k] as usize;
            }
            if policy != "stretch" {
                let pick = axes.iter().map(|&a| scale[a]);
                let s = match policy {
                    "not_larger" => pick.fold(f64::INFINITY, f64::min),
                    "not_smaller" => pick.fold(0.0, f64::max),
                    other => {
                        return Err(ctx.err(
                            Status::InvalidModel,
                            format!("keep_aspect_ratio_policy '{other}'"),
                        ))
                    }
                };
                for &a in &axes {
                    scale[a] = s;
                    out[a] = (s * x.shape[a] as f64 + 0.5) as usize;
                }
            }
        }
        _ => {
            return Err(ctx.err(
                Status::InvalidModel,
                "exactly one of scales and sizes must be given",
            ))
        }
    }
    let roi_of = |a: usize| -> (f64, f64) {
        match &roi {
            Some(r) if r.len() == 2 * n => {
                let k = axes.iter().position(|&b| b == a).unwrap_or(0);
                (r[k], r[n + k])
            }
            _ => (0.0, 1.0),
        }
    };
    if opts.coord == Coord::TfCropAndResize && roi.as_ref().is_some_and(|r| r.len() != 2 * n) {
        return Err(ctx.err(Status::InvalidModel, "roi must hold 2 values per axis"));
    }
    // The axis plans hold one entry per output index: refuse outputs that cannot exist first.
    ctx.check_fits(x.dtype, &out)?;
    let mut plans: Vec<Option<AxisPlan>> = (0..rank).map(|_| None).collect();
    for &a in &axes {
        let (r0, r1) = roi_of(a);
        let identity = (scale[a] - 1.0).abs() < 1e-12
            && out[a] == x.shape[a]
            && (opts.coord != Coord::TfCropAndResize || (r0 == 0.0 && r1 == 1.0));
        if identity || out[a] == 0 {
            continue;
        }
        if x.shape[a] == 0 {
            return Err(ctx.err(Status::InvalidShape, "cannot resize an empty axis"));
        }
        plans[a] = Some(plan_axis(&opts, x.shape[a], out[a], scale[a], (r0, r1)));
    }
    let planes = if x.dtype == DataType::F32 {
        PlaneResize::of(x.shape, &out, &plans)
    } else {
        None
    };
    Ok(Built {
        outputs: vec![(x.dtype, out)],
        kernel: Box::new(ResizeKernel {
            in_shape: x.shape.to_vec(),
            axes: plans,
            extrapolation,
            planes,
        }),
    })
}

fn mode_of(ctx: &BuildCtx, nearest: Rounding) -> Result<Mode> {
    Ok(match ctx.attr_string("mode", "nearest")?.as_str() {
        "nearest" => Mode::Nearest(nearest),
        "linear" | "bilinear" => Mode::Linear,
        "cubic" => Mode::Cubic(ctx.attr_float("cubic_coeff_a", -0.75)? as f64),
        other => return Err(ctx.err(Status::InvalidModel, format!("mode '{other}'"))),
    })
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    let rank = ctx.input(0)?.shape.len();
    if ctx.opset < 11 {
        ctx.arity(2, 2, 1, 1)?;
        let opts = Options {
            mode: mode_of(ctx, Rounding::Floor)?,
            coord: Coord::Asymmetric,
            antialias: false,
            exclude_outside: false,
        };
        let scales = floats(ctx, 1, "scales")?;
        return finish(
            ctx,
            opts,
            (0..rank).collect(),
            scales,
            None,
            None,
            "stretch",
            0.0,
        );
    }
    ctx.arity(1, 4, 1, 1)?;
    let nearest = match ctx
        .attr_string("nearest_mode", "round_prefer_floor")?
        .as_str()
    {
        "round_prefer_floor" => Rounding::PreferFloor,
        "round_prefer_ceil" => Rounding::PreferCeil,
        "floor" => Rounding::Floor,
        "ceil" => Rounding::Ceil,
        other => return Err(ctx.err(Status::InvalidModel, format!("nearest_mode '{other}'"))),
    };
    let coord = match ctx
        .attr_string("coordinate_transformation_mode", "half_pixel")?
        .as_str()
    {
        "half_pixel" => Coord::HalfPixel,
        "half_pixel_symmetric" => Coord::HalfPixelSymmetric,
        "pytorch_half_pixel" => Coord::PytorchHalfPixel,
        "align_corners" => Coord::AlignCorners,
        "asymmetric" => Coord::Asymmetric,
        "tf_crop_and_resize" => Coord::TfCropAndResize,
        other => {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("coordinate_transformation_mode '{other}'"),
            ))
        }
    };
    let mode = mode_of(ctx, nearest)?;
    let antialias = ctx.attr_int("antialias", 0)? != 0;
    if antialias && matches!(mode, Mode::Nearest(_)) {
        return Err(ctx.err(Status::InvalidModel, "antialias needs linear or cubic mode"));
    }
    let opts = Options {
        mode,
        coord,
        antialias,
        exclude_outside: ctx.attr_int("exclude_outside", 0)? != 0,
    };
    let axes: Vec<usize> = match ctx.attr_ints("axes")? {
        Some(a) if rank == 0 && !a.is_empty() => {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("axes {a:?} of a scalar, which has none"),
            ))
        }
        Some(a) => a
            .iter()
            .map(|&v| ctx.axis(v, rank))
            .collect::<Result<_>>()?,
        None => (0..rank).collect(),
    };
    let roi = floats(ctx, 1, "roi")?;
    let scales = floats(ctx, 2, "scales")?;
    let sizes = floats(ctx, 3, "sizes")?;
    let policy = ctx.attr_string("keep_aspect_ratio_policy", "stretch")?;
    let extrapolation = ctx.attr_float("extrapolation_value", 0.0)? as f64;
    finish(ctx, opts, axes, scales, sizes, roi, &policy, extrapolation)
}

fn build_upsample(ctx: &BuildCtx) -> Result<Built> {
    let rank = ctx.input(0)?.shape.len();
    let opts = Options {
        mode: mode_of(ctx, Rounding::Floor)?,
        coord: Coord::Asymmetric,
        antialias: false,
        exclude_outside: false,
    };
    let scales = if ctx.opset >= 9 {
        ctx.arity(2, 2, 1, 1)?;
        floats(ctx, 1, "scales")?
    } else {
        ctx.arity(1, 1, 1, 1)?;
        ctx.attr_floats("scales")?
            .map(|s| s.iter().map(|&v| v as f64).collect())
    };
    finish(
        ctx,
        opts,
        (0..rank).collect(),
        scales,
        None,
        None,
        "stretch",
        0.0,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_half_pixel_upsample_by_two() {
        let opts = Options {
            mode: Mode::Linear,
            coord: Coord::HalfPixel,
            antialias: false,
            exclude_outside: false,
        };
        // in [a, b] -> 4 outputs at x = -0.25, 0.25, 0.75, 1.25
        let p = plan_axis(&opts, 2, 4, 2.0, (0.0, 1.0));
        let at = |y: usize| {
            let (a, b) = (10.0, 20.0);
            (0..p.taps)
                .map(|t| p.weight[y * p.taps + t] * [a, b][p.index[y * p.taps + t]])
                .sum::<f64>()
        };
        assert_eq!([at(0), at(1), at(2), at(3)], [10.0, 12.5, 17.5, 20.0]);
    }

    #[test]
    fn nearest_prefers_floor_on_ties() {
        let opts = Options {
            mode: Mode::Nearest(Rounding::PreferFloor),
            coord: Coord::Asymmetric,
            antialias: false,
            exclude_outside: false,
        };
        // scale 2/3, asymmetric: x = 1.5 y -> 0, 1.5 (a tie: the floor, 1), 3 (exact)
        let p = plan_axis(&opts, 4, 3, 2.0 / 3.0, (0.0, 1.0));
        assert_eq!(p.taps, 2);
        let pick = |y: usize| {
            let w = &p.weight[y * 2..y * 2 + 2];
            p.index[y * 2 + usize::from(w[1] > 0.5)]
        };
        assert_eq!([pick(0), pick(1), pick(2)], [0, 1, 3]);
    }
}
