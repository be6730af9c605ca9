//! Window geometry shared by Conv and the pooling operators: kernel, strides, pads, dilations,
//! `auto_pad` and `ceil_mode`, for 1-D and 2-D spatial inputs (1-D runs as 2-D with height 1).

use super::util::BuildCtx;
use crate::error::{Result, Status};

/// Resolved geometry of a 2-D window operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Kernel height and width.
    pub kernel: [usize; 2],
    /// Strides.
    pub strides: [usize; 2],
    /// Dilations.
    pub dilations: [usize; 2],
    /// Padding: top, left, bottom, right.
    pub pads: [usize; 4],
    /// Output height and width.
    pub out: [usize; 2],
}

/// Resolved geometry of a window operator over any number of spatial dimensions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowNd {
    /// Kernel extent per dimension.
    pub kernel: Vec<usize>,
    /// Strides.
    pub strides: Vec<usize>,
    /// Dilations.
    pub dilations: Vec<usize>,
    /// Padding before each dimension.
    pub begin: Vec<usize>,
    /// Padding after each dimension.
    pub end: Vec<usize>,
    /// Output extent per dimension.
    pub out: Vec<usize>,
}

/// Reads the window attributes of a node whose input has `spatial` = `[H, W]` (height 1 for
/// 1-D inputs) and `rank` spatial dimensions, and computes the output size.
pub fn window(
    ctx: &BuildCtx,
    spatial: [usize; 2],
    rank: usize,
    kernel: &[usize],
    ceil_mode: bool,
) -> Result<Window> {
    let w = window_nd(ctx, &spatial[2 - rank..], kernel, ceil_mode)?;
    let two = |v: &[usize], fill: usize| -> [usize; 2] {
        if rank == 1 {
            [fill, v[0]]
        } else {
            [v[0], v[1]]
        }
    };
    let b = two(&w.begin, 0);
    let e = two(&w.end, 0);
    Ok(Window {
        kernel: two(kernel, 1),
        strides: two(&w.strides, 1),
        dilations: two(&w.dilations, 1),
        pads: [b[0], b[1], e[0], e[1]],
        out: two(&w.out, 1),
    })
}

/// The window geometry over the spatial dimensions `input` (any number of them).
pub fn window_nd(
    ctx: &BuildCtx,
    input: &[usize],
    kernel: &[usize],
    ceil_mode: bool,
) -> Result<WindowNd> {
    let rank = input.len();
    let list = |name: &str, default: usize| -> Result<Vec<usize>> {
        match ctx.attr_ints(name)? {
            None => Ok(vec![default; rank]),
            Some(v) if v.len() == rank && v.iter().all(|&x| x >= 1) => {
                Ok(v.iter().map(|&x| x as usize).collect())
            }
            Some(v) => Err(ctx.err(
                Status::InvalidModel,
                format!("'{name}' = {v:?} must hold {rank} positive values"),
            )),
        }
    };
    let strides = list("strides", 1)?;
    let dilations = list("dilations", 1)?;
    if kernel.len() != rank || kernel.contains(&0) {
        return Err(ctx.err(
            Status::InvalidModel,
            format!("kernel shape {kernel:?} does not fit {rank} spatial dims"),
        ));
    }
    // Window extents `dilation·(kernel − 1) + 1`, refusing overflow.
    let spans = (0..rank)
        .map(|i| {
            dilations[i]
                .checked_mul(kernel[i] - 1)
                .and_then(|v| v.checked_add(1))
                .ok_or_else(|| {
                    ctx.err(
                        Status::InvalidModel,
                        format!("dilations {dilations:?} overflow"),
                    )
                })
        })
        .collect::<Result<Vec<usize>>>()?;
    let auto_pad = ctx.attr_string("auto_pad", "NOTSET")?;
    let mut begin = vec![0usize; rank];
    let mut end = vec![0usize; rank];
    let mut out = vec![0usize; rank];
    match auto_pad.as_str() {
        "NOTSET" => {
            if let Some(p) = ctx.attr_ints("pads")? {
                if p.len() != 2 * rank || p.iter().any(|&x| x < 0) {
                    return Err(ctx.err(
                        Status::InvalidModel,
                        format!("pads {p:?} must hold {} non-negative values", 2 * rank),
                    ));
                }
                for i in 0..rank {
                    begin[i] = p[i] as usize;
                    end[i] = p[i + rank] as usize;
                }
            }
            for i in 0..rank {
                let span = spans[i];
                let padded = input[i]
                    .checked_add(begin[i])
                    .and_then(|v| v.checked_add(end[i]))
                    .ok_or_else(|| {
                        ctx.err(
                            Status::InvalidModel,
                            format!("pads {} + {} overflow", begin[i], end[i]),
                        )
                    })?;
                if padded < span {
                    return Err(ctx.err(
                        Status::InvalidModel,
                        format!("the window ({span}) is larger than the padded input ({padded})"),
                    ));
                }
                let steps = padded - span;
                out[i] = if ceil_mode {
                    let mut o = steps.div_ceil(strides[i]) + 1;
                    // The last window must start inside the input or the leading padding.
                    if (o - 1) * strides[i] >= input[i] + begin[i] {
                        o -= 1;
                    }
                    o
                } else {
                    steps / strides[i] + 1
                };
            }
        }
        "VALID" => {
            for i in 0..rank {
                let span = spans[i];
                if input[i] < span {
                    return Err(
                        ctx.err(Status::InvalidModel, "the window is larger than the input")
                    );
                }
                out[i] = (input[i] - span) / strides[i] + 1;
            }
        }
        "SAME_UPPER" | "SAME_LOWER" => {
            for i in 0..rank {
                let span = spans[i];
                out[i] = input[i].div_ceil(strides[i]);
                // An empty input dimension gives an empty output and needs no padding.
                let total = (out[i].saturating_sub(1) * strides[i])
                    .checked_add(span)
                    .ok_or_else(|| ctx.err(Status::InvalidModel, "the window overflows"))?
                    .saturating_sub(input[i]);
                let small = total / 2;
                if auto_pad == "SAME_UPPER" {
                    begin[i] = small;
                    end[i] = total - small;
                } else {
                    begin[i] = total - small;
                    end[i] = small;
                }
            }
        }
        other => {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("auto_pad '{other}' is not a valid value"),
            ));
        }
    }
    Ok(WindowNd {
        kernel: kernel.to_vec(),
        strides,
        dilations,
        begin,
        end,
        out,
    })
}

/// Splits an NC(H)W input shape into batch, channels, `[H, W]` and the spatial rank; only 1-D
/// and 2-D spatial inputs are supported.
pub fn nchw(ctx: &BuildCtx, shape: &[usize]) -> Result<(usize, usize, [usize; 2], usize)> {
    match shape.len() {
        3 => Ok((shape[0], shape[1], [1, shape[2]], 1)),
        4 => Ok((shape[0], shape[1], [shape[2], shape[3]], 2)),
        r => Err(ctx.err(
            Status::UnsupportedShape,
            format!(
                "input of rank {r}: only 1-D and 2-D spatial inputs (rank 3 or 4) are supported"
            ),
        )),
    }
}

/// The output shape `[N, C, (H,) W]` for a spatial rank.
pub fn out_shape(n: usize, c: usize, out: [usize; 2], rank: usize) -> Vec<usize> {
    if rank == 1 {
        vec![n, c, out[1]]
    } else {
        vec![n, c, out[0], out[1]]
    }
}
