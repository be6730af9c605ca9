//! `ConvTranspose` in 1-D, 2-D and 3-D (float32): the gradient of a convolution, with strides,
//! dilations, groups, pads or `auto_pad`, `output_padding` and `output_shape`. Each output
//! plane is computed on its own (in parallel) by scattering every input element of its group
//! through the kernel.

use super::util::{f32_of, f32_out, BuildCtx};
use super::{Built, Kernel, OpDef, FLOAT};
use crate::error::{Result, Status};
use crate::ir::{DataType, Tensor};
use crate::kernels::conv_transpose::{
    conv_transpose, ConvTransposeFilters, ConvTransposeParams, Filters,
};
use std::sync::Arc;

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

/// The weights as the kernel takes them: packed once when they are constant.
enum Weights {
    /// Packed at build time (shared by every plan through the weight cache).
    Packed(Arc<ConvTransposeFilters>),
    /// Read from the input at each run.
    AtRunTime,
}

struct ConvTransposeKernel {
    params: ConvTransposeParams,
    weights: Weights,
}

impl Kernel for ConvTransposeKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = f32_of(inputs, 0)?;
        let bias = match inputs.get(2).copied().flatten() {
            Some(b) => Some(b.as_f32()?),
            None => None,
        };
        let filters = match &self.weights {
            Weights::Packed(f) => Filters::Packed(f),
            Weights::AtRunTime => Filters::Plain(f32_of(inputs, 1)?),
        };
        let out = f32_out(&mut outputs[0])?;
        conv_transpose(&self.params, x, filters, bias, out);
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
    // 1-D and 2-D geometries as 3-D ones with leading sizes of 1.
    let lead = |v: &[usize], fill: usize| -> [usize; 3] {
        let mut a = [fill; 3];
        a[3 - rank..].copy_from_slice(v);
        a
    };
    let to_usize = |v: &[i64]| v.iter().map(|&x| x as usize).collect::<Vec<_>>();
    let params = ConvTransposeParams {
        batch: n,
        in_channels: c,
        out_channels: m,
        groups,
        in_sp: lead(&x.shape[2..], 1),
        out_sp: lead(&out_sp, 1),
        kernel: lead(&kernel, 1),
        strides: lead(&to_usize(&strides), 1),
        dilations: lead(&to_usize(&dilations), 1),
        pads_begin: lead(&to_usize(&begin), 0),
    };
    params
        .validate()
        .map_err(|e| ctx.err(Status::InvalidModel, e.message))?;
    let weights = match w.constant {
        Some(wt) => {
            let isa = crate::kernels::cpu::isa();
            let tag = format!("conv-transpose-filters {isa:?} c{c} m{m} g{groups} k{kernel:?}");
            let filters = ctx.prepared(1, &tag, || {
                ConvTransposeFilters::prepare(isa, &params, wt.as_f32()?)
                    .map_err(|e| ctx.err(Status::InvalidModel, e.message))
            })?;
            Weights::Packed(filters)
        }
        None => Weights::AtRunTime,
    };
    Ok(Built {
        outputs: vec![(DataType::F32, shape)],
        kernel: Box::new(ConvTransposeKernel { params, weights }),
    })
}
