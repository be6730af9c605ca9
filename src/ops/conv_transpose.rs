//! `ConvTranspose` in 1-D, 2-D and 3-D (float32): the gradient of a convolution, with strides,
//! dilations, groups, pads or `auto_pad`, `output_padding` and `output_shape`. Each output
//! plane is computed on its own (in parallel) by scattering every input element of its group
//! through the kernel.

use super::util::{f32_of, f32_out, BuildCtx};
use super::{Built, Kernel, OpDef, FLOAT};
use crate::error::{Result, Status};
use crate::ir::{DataType, Tensor};
use rayon::prelude::*;

/// The `ConvTranspose` operator.
pub static DEF: OpDef = OpDef {
    op_type: "ConvTranspose",
    domain: "",
    min_opset: 1,
    newest: 22,
    attributes: &[
        "auto_pad",
        "dilations",
        "group",
        "kernel_shape",
        "output_padding",
        "output_shape",
        "pads",
        "strides",
    ],
    types: FLOAT,
    build,
};

struct ConvTransposeKernel {
    in_channels: usize,
    out_channels: usize,
    groups: usize,
    in_sp: Vec<usize>,
    out_sp: Vec<usize>,
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads_begin: Vec<usize>,
}

impl ConvTransposeKernel {
    /// For every (input position, kernel position) pair of one spatial dimension `d`, the output
    /// position it reaches, if inside.
    fn reach(&self, d: usize) -> Vec<Option<usize>> {
        let (n_in, n_k) = (self.in_sp[d], self.kernel[d]);
        let mut out = Vec::with_capacity(n_in * n_k);
        for i in 0..n_in {
            for k in 0..n_k {
                let o = (i * self.strides[d] + k * self.dilations[d]) as i64
                    - self.pads_begin[d] as i64;
                out.push(
                    (0..self.out_sp[d] as i64)
                        .contains(&o)
                        .then_some(o as usize),
                );
            }
        }
        out
    }
}

impl Kernel for ConvTransposeKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let w = f32_of(inputs, 1)?;
        let bias = match inputs.get(2).copied().flatten() {
            Some(b) => Some(b.as_f32()?),
            None => None,
        };
        let out = f32_out(&mut outputs[0])?;
        let rank = self.in_sp.len();
        // Pad the geometry to 3-D (leading size-1 dimensions).
        let pad3 = |v: &[usize], fill: usize| {
            let mut p = vec![fill; 3 - rank];
            p.extend_from_slice(v);
            p
        };
        let (in_sp, out_sp, ksz) = (
            pad3(&self.in_sp, 1),
            pad3(&self.out_sp, 1),
            pad3(&self.kernel, 1),
        );
        let reach: Vec<Vec<Option<usize>>> = {
            let mut r: Vec<Vec<Option<usize>>> = (0..3 - rank).map(|_| vec![Some(0)]).collect();
            r.extend((0..rank).map(|d| self.reach(d)));
            r
        };
        let in_plane: usize = in_sp.iter().product();
        let out_plane: usize = out_sp.iter().product();
        let k_plane: usize = ksz.iter().product();
        let cg = self.in_channels / self.groups;
        let mg = self.out_channels / self.groups;
        if out_plane == 0 {
            return Ok(());
        }
        out.par_chunks_mut(out_plane)
            .enumerate()
            .for_each(|(plane, dst)| {
                let (n, oc) = (plane / self.out_channels, plane % self.out_channels);
                let (g, ocg) = (oc / mg, oc % mg);
                dst.fill(bias.map_or(0.0, |b| b[oc]));
                for icg in 0..cg {
                    let ic = g * cg + icg;
                    let xs = &x[(n * self.in_channels + ic) * in_plane..][..in_plane];
                    let wk = &w[(ic * mg + ocg) * k_plane..][..k_plane];
                    for (at, &v) in xs.iter().enumerate() {
                        let (iz, iy, ix) = (
                            at / (in_sp[1] * in_sp[2]),
                            at / in_sp[2] % in_sp[1],
                            at % in_sp[2],
                        );
                        if v == 0.0 {
                            continue;
                        }
                        for kz in 0..ksz[0] {
                            let Some(oz) = reach[0][iz * ksz[0] + kz] else {
                                continue;
                            };
                            for ky in 0..ksz[1] {
                                let Some(oy) = reach[1][iy * ksz[1] + ky] else {
                                    continue;
                                };
                                let row = (oz * out_sp[1] + oy) * out_sp[2];
                                let wrow = (kz * ksz[1] + ky) * ksz[2];
                                for kx in 0..ksz[2] {
                                    if let Some(ox) = reach[2][ix * ksz[2] + kx] {
                                        dst[row + ox] += v * wk[wrow + kx];
                                    }
                                }
                            }
                        }
                    }
                }
            });
        Ok(())
    }
}

fn build(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 3, 1, 1)?;
    let x = ctx.float_input(0)?;
    let w = ctx.float_input(1)?;
    let rank = x.shape.len().saturating_sub(2);
    if !(1..=3).contains(&rank) || w.shape.len() != rank + 2 {
        return Err(ctx.err(
            Status::UnsupportedShape,
            format!(
                "input {:?} / weights {:?}: 1-D to 3-D only",
                x.shape, w.shape
            ),
        ));
    }
    let group = ctx.attr_int("group", 1)?;
    let (n, c) = (x.shape[0], x.shape[1]);
    if group < 1 || c % group as usize != 0 || w.shape[0] != c {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("{c} channels, group {group}, weights {:?}", w.shape),
        ));
    }
    let groups = group as usize;
    let m = w.shape[1] * groups;
    let kernel = w.shape[2..].to_vec();
    let list = |name: &str, default: i64| -> Result<Vec<i64>> {
        match ctx.attr_ints(name)? {
            None => Ok(vec![default; rank]),
            Some(v) if v.len() == rank => Ok(v.to_vec()),
            Some(v) => Err(ctx.err(Status::InvalidModel, format!("'{name}' = {v:?}"))),
        }
    };
    let strides = list("strides", 1)?;
    let dilations = list("dilations", 1)?;
    let out_pad = list("output_padding", 0)?;
    if let Some(ks) = ctx.attr_ints("kernel_shape")? {
        if ks.iter().map(|&k| k as usize).ne(kernel.iter().copied()) {
            return Err(ctx.err(Status::InvalidModel, "kernel_shape contradicts the weights"));
        }
    }
    if strides.iter().chain(&dilations).any(|&v| v < 1) || out_pad.iter().any(|&v| v < 0) {
        return Err(ctx.err(
            Status::InvalidModel,
            "bad strides, dilations or output_padding",
        ));
    }
    let auto_pad = ctx.attr_string("auto_pad", "NOTSET")?;
    // Saturating: hostile attributes must not overflow (the sizes are checked further on).
    let span = |d: usize| {
        (kernel[d] as i64 - 1)
            .saturating_mul(dilations[d])
            .saturating_add(1)
    };
    let full = |d: usize| {
        strides[d]
            .saturating_mul(x.shape[2 + d] as i64 - 1)
            .saturating_add(out_pad[d])
            .saturating_add(span(d))
    };
    let mut begin = vec![0i64; rank];
    let mut end = vec![0i64; rank];
    let out_shape = ctx.attr_ints("output_shape")?;
    if let Some(os) = out_shape {
        if os.len() < rank || os.iter().any(|&v| v < 0) {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("output_shape {os:?}: fewer than {rank} spatial sizes, or negative"),
            ));
        }
        let os = &os[os.len() - rank..];
        for d in 0..rank {
            let total = full(d).saturating_sub(os[d]);
            if total < 0 {
                // A larger output than the input covers: the rest is output padding (zeros).
                end[d] = total;
            } else if auto_pad == "SAME_UPPER" {
                begin[d] = total / 2;
                end[d] = total - total / 2;
            } else {
                begin[d] = total - total / 2;
                end[d] = total / 2;
            }
        }
    } else {
        match auto_pad.as_str() {
            "NOTSET" | "VALID" => {
                if auto_pad == "NOTSET" {
                    if let Some(p) = ctx.attr_ints("pads")? {
                        if p.len() != 2 * rank {
                            return Err(ctx.err(Status::InvalidModel, format!("pads {p:?}")));
                        }
                        begin.copy_from_slice(&p[..rank]);
                        end.copy_from_slice(&p[rank..]);
                    }
                }
            }
            "SAME_UPPER" | "SAME_LOWER" => {
                for d in 0..rank {
                    let target = (x.shape[2 + d] as i64).saturating_mul(strides[d]);
                    let total = full(d).saturating_sub(target).max(0);
                    if auto_pad == "SAME_UPPER" {
                        begin[d] = total / 2;
                        end[d] = total - total / 2;
                    } else {
                        begin[d] = total - total / 2;
                        end[d] = total / 2;
                    }
                }
            }
            other => return Err(ctx.err(Status::InvalidModel, format!("auto_pad '{other}'"))),
        }
    }
    let mut out_sp = Vec::with_capacity(rank);
    for d in 0..rank {
        let o = full(d).saturating_sub(begin[d]).saturating_sub(end[d]);
        if o < 0 || begin[d] < 0 {
            return Err(ctx.err(Status::InvalidModel, "pads exceed the output"));
        }
        out_sp.push(o as usize);
    }
    if let Some(b) = ctx.opt_input(2) {
        if b.shape != [m] {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("bias {:?}, expected [{m}]", b.shape),
            ));
        }
    }
    let mut shape = vec![n, m];
    shape.extend_from_slice(&out_sp);
    Ok(Built {
        outputs: vec![(DataType::F32, shape)],
        kernel: Box::new(ConvTransposeKernel {
            in_channels: c,
            out_channels: m,
            groups,
            in_sp: x.shape[2..].to_vec(),
            out_sp,
            kernel,
            strides: strides.iter().map(|&v| v as usize).collect(),
            dilations: dilations.iter().map(|&v| v as usize).collect(),
            pads_begin: begin.iter().map(|&v| v as usize).collect(),
        }),
    })
}
