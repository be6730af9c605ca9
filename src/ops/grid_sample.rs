//! `GridSample`: samples an N-D input at the normalised coordinates of a grid (`[-1, 1]` per
//! axis, x first), by nearest, (multi)linear or (multi)cubic interpolation, with `zeros`,
//! `border` or `reflection` padding and either `align_corners` convention.

use super::util::{f32_of, f32_out, BuildCtx};
use super::{Built, Kernel, OpDef, FLOAT};
use crate::error::{Result, Status};
use crate::ir::{DataType, Tensor};

/// The `GridSample` operator.
pub static DEF: OpDef = OpDef {
    op_type: "GridSample",
    domain: "",
    min_opset: 16,
    newest: 22,
    attributes: &["align_corners", "mode", "padding_mode"],
    types: FLOAT,
    build,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Padding {
    Zeros,
    Border,
    Reflection,
}

struct GridSampleKernel {
    mode: Mode,
    padding: Padding,
    align: bool,
    batch: usize,
    channels: usize,
    dims: Vec<usize>,
    /// Output spatial positions per image.
    positions: usize,
}

/// Reflects `x` into `[lo, hi]`.
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    if x < lo {
        let d = lo - x;
        let n = (d / range) as i64;
        let r = d - n as f64 * range;
        if n % 2 == 0 {
            lo + r
        } else {
            hi - r
        }
    } else if x > hi {
        let d = x - hi;
        let n = (d / range) as i64;
        let r = d - n as f64 * range;
        if n % 2 == 0 {
            hi - r
        } else {
            lo + r
        }
    } else {
        x
    }
}

fn cubic(x: f64) -> [f64; 4] {
    let a = -0.75;
    let x = x.abs();
    [
        ((a * (x + 1.0) - 5.0 * a) * (x + 1.0) + 8.0 * a) * (x + 1.0) - 4.0 * a,
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0,
        ((a + 2.0) * (1.0 - x) - (a + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0,
        ((a * (2.0 - x) - 5.0 * a) * (2.0 - x) + 8.0 * a) * (2.0 - x) - 4.0 * a,
    ]
}

impl GridSampleKernel {
    fn border(&self, d: usize) -> (f64, f64) {
        let n = self.dims[d] as f64;
        if self.align {
            (0.0, n - 1.0)
        } else {
            (-0.5, n - 0.5)
        }
    }

    /// The index of tap `i` along dimension `d` after padding, or `None` for a zero.
    fn index(&self, d: usize, i: i64) -> Option<usize> {
        let n = self.dims[d] as i64;
        if n == 0 {
            return None;
        }
        match self.padding {
            Padding::Zeros => (0..n).contains(&i).then_some(i as usize),
            Padding::Border => Some(i.clamp(0, n - 1) as usize),
            Padding::Reflection => {
                let (lo, hi) = self.border(d);
                Some((reflect(i as f64, lo, hi) as i64).clamp(0, n - 1) as usize)
            }
        }
    }

    fn sample(&self, plane: &[f32], coords: &[f64]) -> f32 {
        let k = self.dims.len();
        // Per dimension: (tap index or None, weight).
        let taps: Vec<Vec<(Option<usize>, f64)>> = (0..k)
            .map(|d| {
                let x = coords[d];
                match self.mode {
                    Mode::Nearest => vec![(self.index(d, x.round_ties_even() as i64), 1.0)],
                    Mode::Linear => {
                        let f = x.floor();
                        let t = x - f;
                        // Saturating: a coordinate far outside (1e30) must not overflow.
                        vec![
                            (self.index(d, f as i64), 1.0 - t),
                            (self.index(d, (f as i64).saturating_add(1)), t),
                        ]
                    }
                    Mode::Cubic => {
                        let f = x.floor();
                        let c = cubic(x - f);
                        (0..4)
                            .map(|j| {
                                let i = (f as i64).saturating_add(j as i64 - 1);
                                (self.index(d, i), c[j])
                            })
                            .collect()
                    }
                }
            })
            .collect();
        let mut sum = 0.0f64;
        let mut pick = vec![0usize; k];
        loop {
            let mut w = 1.0;
            let mut off = Some(0usize);
            for d in 0..k {
                let (i, wt) = taps[d][pick[d]];
                w *= wt;
                off = match (off, i) {
                    (Some(o), Some(i)) => Some(o * self.dims[d] + i),
                    _ => None,
                };
            }
            if let Some(o) = off {
                sum += w * plane[o] as f64;
            }
            let mut d = k;
            loop {
                if d == 0 {
                    return sum as f32;
                }
                d -= 1;
                pick[d] += 1;
                if pick[d] < taps[d].len() {
                    break;
                }
                pick[d] = 0;
            }
        }
    }
}

impl Kernel for GridSampleKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let grid = f32_of(inputs, 1)?;
        let out = f32_out(&mut outputs[0])?;
        let k = self.dims.len();
        let plane: usize = self.dims.iter().product();
        let mut coords = vec![0.0f64; k];
        for n in 0..self.batch {
            for p in 0..self.positions {
                let g = &grid[(n * self.positions + p) * k..][..k];
                for d in 0..k {
                    // The grid lists x (the last dimension) first.
                    let v = g[k - 1 - d] as f64;
                    let len = self.dims[d] as f64;
                    let mut c = if self.align {
                        (v + 1.0) / 2.0 * (len - 1.0)
                    } else {
                        ((v + 1.0) * len - 1.0) / 2.0
                    };
                    if self.mode == Mode::Nearest {
                        c = c.round_ties_even();
                    }
                    let (lo, hi) = self.border(d);
                    if c < lo || c > hi {
                        c = match self.padding {
                            Padding::Border => c.clamp(0.0, len - 1.0),
                            Padding::Reflection => reflect(c, lo, hi),
                            Padding::Zeros => c,
                        };
                    }
                    coords[d] = c;
                }
                for ch in 0..self.channels {
                    let xs = &x[(n * self.channels + ch) * plane..][..plane];
                    out[(n * self.channels + ch) * self.positions + p] = self.sample(xs, &coords);
                }
            }
        }
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    let x = ctx.float_input(0)?;
    let grid = ctx.float_input(1)?;
    let k = x.shape.len().saturating_sub(2);
    if k == 0 || grid.shape.len() != k + 2 || grid.shape[0] != x.shape[0] || grid.shape[k + 1] != k
    {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("X {:?} and grid {:?} do not fit", x.shape, grid.shape),
        ));
    }
    if x.shape[2..].contains(&0) {
        return Err(ctx.err(Status::InvalidShape, "empty spatial dimensions"));
    }
    let mode = match ctx
        .attr_string(
            "mode",
            if ctx.opset >= 20 {
                "linear"
            } else {
                "bilinear"
            },
        )?
        .as_str()
    {
        "nearest" => Mode::Nearest,
        "linear" | "bilinear" => Mode::Linear,
        "cubic" | "bicubic" => Mode::Cubic,
        other => return Err(ctx.err(Status::InvalidModel, format!("mode '{other}'"))),
    };
    let padding = match ctx.attr_string("padding_mode", "zeros")?.as_str() {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        other => return Err(ctx.err(Status::InvalidModel, format!("padding_mode '{other}'"))),
    };
    let mut out = x.shape[..2].to_vec();
    out.extend_from_slice(&grid.shape[1..k + 1]);
    Ok(Built {
        outputs: vec![(DataType::F32, out)],
        kernel: Box::new(GridSampleKernel {
            mode,
            padding,
            align: ctx.attr_int("align_corners", 0)? != 0,
            batch: x.shape[0],
            channels: x.shape[1],
            dims: x.shape[2..].to_vec(),
            positions: grid.shape[1..k + 1].iter().product(),
        }),
    })
}
