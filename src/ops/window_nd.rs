//! Window operators over any number of spatial dimensions, computed directly (float32): the
//! 3-D forms of Conv, MaxPool and AveragePool, and MaxPool's `Indices` output at any rank. The
//! 1-D and 2-D forms keep their vectorised kernels.

use super::spatial::{window_nd, WindowNd};
use super::util::{f32_of, f32_out, BuildCtx};
use super::{Built, Kernel};
use crate::error::{Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::activation::Activation;
use rayon::prelude::*;

/// The geometry of one N-D window operator.
#[derive(Clone, Debug)]
struct Geometry {
    batch: usize,
    in_channels: usize,
    out_channels: usize,
    in_sp: Vec<usize>,
    win: WindowNd,
}

impl Geometry {
    fn out_plane(&self) -> usize {
        self.win.out.iter().product()
    }

    fn in_plane(&self) -> usize {
        self.in_sp.iter().product()
    }

    /// Calls `f(input offset within the plane if inside, inside the padded input)` for every
    /// kernel tap of output position `o` (given as a flat index).
    fn taps(&self, o: usize, mut f: impl FnMut(Option<usize>, bool, usize)) {
        let rank = self.in_sp.len();
        let mut pos = vec![0usize; rank];
        let mut rest = o;
        for d in (0..rank).rev() {
            pos[d] = rest % self.win.out[d];
            rest /= self.win.out[d];
        }
        let taps: usize = self.win.kernel.iter().product();
        let mut k = vec![0usize; rank];
        for t in 0..taps {
            let mut off = 0usize;
            let mut inside = true;
            let mut in_pad = true;
            for d in 0..rank {
                let i = (pos[d] * self.win.strides[d] + k[d] * self.win.dilations[d]) as i64
                    - self.win.begin[d] as i64;
                if i < 0 || i >= self.in_sp[d] as i64 {
                    inside = false;
                }
                if i >= (self.in_sp[d] + self.win.end[d]) as i64 {
                    in_pad = false;
                }
                off = off * self.in_sp[d] + i.clamp(0, self.in_sp[d] as i64 - 1) as usize;
            }
            f(inside.then_some(off), in_pad, t);
            for d in (0..rank).rev() {
                k[d] += 1;
                if k[d] < self.win.kernel[d] {
                    break;
                }
                k[d] = 0;
            }
        }
    }
}

/// The geometry of a window node over input `x`.
fn geometry(
    ctx: &BuildCtx,
    x: &[usize],
    kernel: &[usize],
    out_channels: usize,
    ceil: bool,
) -> Result<Geometry> {
    if x.len() < 3 {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("input {x:?} has no spatial dims"),
        ));
    }
    Ok(Geometry {
        batch: x[0],
        in_channels: x[1],
        out_channels,
        in_sp: x[2..].to_vec(),
        win: window_nd(ctx, &x[2..], kernel, ceil)?,
    })
}

/// The channel count (dimension 1) of an input that [`geometry`] will check has spatial dims;
/// 0 for an input too short to have one, which `geometry` then refuses.
fn channels(x: &[usize]) -> usize {
    x.get(1).copied().unwrap_or(0)
}

fn out_shape(g: &Geometry) -> Vec<usize> {
    let mut s = vec![g.batch, g.out_channels];
    s.extend_from_slice(&g.win.out);
    s
}

/// `kernel_shape`, which must be present and positive.
fn kernel_shape(ctx: &BuildCtx) -> Result<Vec<usize>> {
    match ctx.attr_ints("kernel_shape")? {
        Some(k) if k.iter().all(|&v| v >= 1) => Ok(k.iter().map(|&v| v as usize).collect()),
        _ => Err(ctx.err(
            Status::InvalidModel,
            "'kernel_shape' must hold positive sizes",
        )),
    }
}

struct MaxPoolNd {
    g: Geometry,
    /// Whether Indices is produced, and with column-major spatial order.
    indices: Option<bool>,
}

impl Kernel for MaxPoolNd {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let g = &self.g;
        let (ip, op) = (g.in_plane(), g.out_plane());
        let mut values = vec![0.0f32; g.batch * g.in_channels * op];
        let mut idx = vec![0i64; values.len()];
        for plane in 0..g.batch * g.in_channels {
            let xs = &x[plane * ip..][..ip];
            for o in 0..op {
                let (mut best, mut at) = (f32::NEG_INFINITY, None);
                g.taps(o, |off, _, _| {
                    if let Some(off) = off {
                        if at.is_none() || xs[off] > best {
                            best = xs[off];
                            at = Some(off);
                        }
                    }
                });
                values[plane * op + o] = best;
                let flat = at.unwrap_or(0);
                idx[plane * op + o] = match self.indices {
                    Some(true) => {
                        // Column-major order of the spatial dimensions.
                        let mut rest = flat;
                        let mut pos = vec![0usize; g.in_sp.len()];
                        for d in (0..g.in_sp.len()).rev() {
                            pos[d] = rest % g.in_sp[d];
                            rest /= g.in_sp[d];
                        }
                        let mut cm = 0;
                        for d in (0..g.in_sp.len()).rev() {
                            cm = cm * g.in_sp[d] + pos[d];
                        }
                        (plane * ip + cm) as i64
                    }
                    _ => (plane * ip + flat) as i64,
                };
            }
        }
        let mut outs = outputs.iter_mut();
        if let Some(y) = outs.next() {
            f32_out(y)?.copy_from_slice(&values);
        }
        if let Some(i) = outs.next() {
            i.as_mut_slice::<i64>()?.copy_from_slice(&idx);
        }
        Ok(())
    }
}

/// MaxPool through the N-D path (3-D inputs, or any rank when Indices is asked for).
pub fn build_max_pool(ctx: &BuildCtx) -> Result<Built> {
    let x = ctx.float_input(0)?;
    let g = geometry(
        ctx,
        x.shape,
        &kernel_shape(ctx)?,
        channels(x.shape),
        ctx.attr_int("ceil_mode", 0)? != 0,
    )?;
    let with_indices = matches!(ctx.node.outputs.get(1), Some(Some(_)));
    let shape = out_shape(&g);
    Ok(Built {
        outputs: vec![(DataType::F32, shape.clone()), (DataType::I64, shape)],
        kernel: Box::new(MaxPoolNd {
            indices: with_indices.then_some(ctx.attr_int("storage_order", 0)? != 0),
            g,
        }),
    })
}

struct AvgPoolNd {
    g: Geometry,
    count_include_pad: bool,
}

impl Kernel for AvgPoolNd {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let g = &self.g;
        let (ip, op) = (g.in_plane(), g.out_plane());
        let out = f32_out(&mut outputs[0])?;
        for plane in 0..g.batch * g.in_channels {
            let xs = &x[plane * ip..][..ip];
            for o in 0..op {
                let (mut sum, mut count) = (0.0f64, 0usize);
                g.taps(o, |off, in_pad, _| {
                    if let Some(off) = off {
                        sum += xs[off] as f64;
                        count += 1;
                    } else if self.count_include_pad && in_pad {
                        count += 1;
                    }
                });
                out[plane * op + o] = if count == 0 {
                    0.0
                } else {
                    (sum / count as f64) as f32
                };
            }
        }
        Ok(())
    }
}

/// AveragePool through the N-D path (3-D inputs).
pub fn build_avg_pool(ctx: &BuildCtx) -> Result<Built> {
    let x = ctx.float_input(0)?;
    let g = geometry(
        ctx,
        x.shape,
        &kernel_shape(ctx)?,
        channels(x.shape),
        ctx.attr_int("ceil_mode", 0)? != 0,
    )?;
    Ok(Built {
        outputs: vec![(DataType::F32, out_shape(&g))],
        kernel: Box::new(AvgPoolNd {
            g,
            count_include_pad: ctx.attr_int("count_include_pad", 0)? != 0,
        }),
    })
}

struct ConvNd {
    g: Geometry,
    groups: usize,
    activation: Activation,
}

impl Kernel for ConvNd {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let w = f32_of(inputs, 1)?;
        let bias = match inputs.get(2).copied().flatten() {
            Some(b) => Some(b.as_f32()?),
            None => None,
        };
        let g = &self.g;
        let (ip, op) = (g.in_plane(), g.out_plane());
        let taps: usize = g.win.kernel.iter().product();
        let cg = g.in_channels / self.groups;
        let mg = g.out_channels / self.groups;
        let out = f32_out(&mut outputs[0])?;
        if op == 0 {
            return Ok(());
        }
        out.par_chunks_mut(op).enumerate().for_each(|(plane, dst)| {
            let (n, oc) = (plane / g.out_channels, plane % g.out_channels);
            let grp = oc / mg;
            for (o, d) in dst.iter_mut().enumerate() {
                let mut acc = bias.map_or(0.0, |b| b[oc] as f64);
                g.taps(o, |off, _, t| {
                    if let Some(off) = off {
                        for icg in 0..cg {
                            let ic = grp * cg + icg;
                            acc += x[(n * g.in_channels + ic) * ip + off] as f64
                                * w[(oc * cg + icg) * taps + t] as f64;
                        }
                    }
                });
                *d = self.activation.apply_scalar(acc as f32);
            }
        });
        Ok(())
    }
}

/// Conv through the N-D path (3-D inputs).
pub fn build_conv(ctx: &BuildCtx, activation: Activation) -> Result<Built> {
    ctx.arity(2, 3, 1, 1)?;
    let x = ctx.float_input(0)?;
    let w = ctx.float_input(1)?;
    let groups = ctx.attr_int("group", 1)?;
    let c = x.shape[1];
    if groups < 1
        || w.shape.len() != x.shape.len()
        || c % groups as usize != 0
        || w.shape[1] * groups as usize != c
    {
        return Err(ctx.err(
            Status::InvalidModel,
            format!(
                "weights {:?} do not fit input {:?} with group {groups}",
                w.shape, x.shape
            ),
        ));
    }
    let m = w.shape[0];
    if m % groups as usize != 0 {
        return Err(ctx.err(
            Status::InvalidModel,
            "output channels do not divide into groups",
        ));
    }
    if let Some(b) = ctx.opt_input(2) {
        if b.shape != [m] {
            return Err(ctx.err(Status::InvalidModel, format!("bias {:?}", b.shape)));
        }
    }
    let g = geometry(ctx, x.shape, &w.shape[2..], m, false)?;
    Ok(Built {
        outputs: vec![(DataType::F32, out_shape(&g))],
        kernel: Box::new(ConvNd {
            g,
            groups: groups as usize,
            activation,
        }),
    })
}

struct LpPoolNd {
    g: Geometry,
    p: f64,
}

impl Kernel for LpPoolNd {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let g = &self.g;
        let (ip, op) = (g.in_plane(), g.out_plane());
        let out = f32_out(&mut outputs[0])?;
        for plane in 0..g.batch * g.in_channels {
            let xs = &x[plane * ip..][..ip];
            for o in 0..op {
                let mut sum = 0.0f64;
                g.taps(o, |off, _, _| {
                    if let Some(off) = off {
                        sum += (xs[off] as f64).abs().powf(self.p);
                    }
                });
                out[plane * op + o] = sum.powf(1.0 / self.p) as f32;
            }
        }
        Ok(())
    }
}

/// LpPool (any spatial rank; `global` pools each whole plane, as GlobalLpPool).
pub fn build_lp_pool(ctx: &BuildCtx, global: bool) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    let x = ctx.float_input(0)?;
    let p = ctx.attr_int("p", 2)?;
    if p < 1 {
        return Err(ctx.err(Status::InvalidModel, format!("p = {p}")));
    }
    let kernel = if global {
        x.shape.get(2..).unwrap_or(&[]).to_vec()
    } else {
        kernel_shape(ctx)?
    };
    let g = geometry(
        ctx,
        x.shape,
        &kernel,
        channels(x.shape),
        ctx.attr_int("ceil_mode", 0)? != 0,
    )?;
    Ok(Built {
        outputs: vec![(DataType::F32, out_shape(&g))],
        kernel: Box::new(LpPoolNd { g, p: p as f64 }),
    })
}
