//! The per-tile transforms of the Winograd convolution ([`super`]): a tile's input
//! transform, read from either layout, and the output transform of a lane group's tiles,
//! written to either layout with the bias and the activation.
#![forbid(unsafe_code)]

use super::transforms::Variant;
use super::{Lanes, Layout, BLOCKED_UNIT, L};
use crate::kernels::activation::Activation;
use crate::kernels::conv::Conv2dParams;
use crate::kernels::cpu::Isa;
use crate::kernels::simd;

/// The input transform of tile `t` for every channel: `vt[e·in_c + c] = (Bᵀ d B)_e` where `d`
/// is the `T×T` input window of the tile in channel `c` (zero outside the image).
#[inline(always)]
#[allow(clippy::needless_range_loop)] // index loops over the window read most plainly
pub(super) fn input_tile<const R: usize, const T: usize, V: Variant<R, T>>(
    p: &Conv2dParams,
    layout: Layout,
    x: &[f32],
    t: usize,
    tw: usize,
    vt: &mut [f32],
) {
    let ic = p.in_channels;
    let (h, w) = (p.in_h, p.in_w);
    let plane = h * w;
    let y0 = (t / tw * R) as isize - p.pad_top as isize;
    let x0 = (t % tw * R) as isize - p.pad_left as isize;
    let inside = y0 >= 0 && x0 >= 0 && y0 as usize + T <= h && x0 as usize + T <= w;
    for c0 in (0..ic).step_by(L) {
        let lanes = L.min(ic - c0);
        // cols[j][i] = d[i][j] per lane.
        let mut cols = [[[0.0f32; L]; T]; T];
        if layout == Layout::Blocked {
            // The lanes' channels lie side by side at each position (`L` divides the block,
            // and the channels are whole blocks).
            let block = &x[(c0 / BLOCKED_UNIT) * plane * BLOCKED_UNIT..][..plane * BLOCKED_UNIT];
            let lane0 = c0 % BLOCKED_UNIT;
            for i in 0..T {
                let y = y0 + i as isize;
                if !inside && (y < 0 || y >= h as isize) {
                    continue;
                }
                for j in 0..T {
                    let xx = x0 + j as isize;
                    if inside || (xx >= 0 && xx < w as isize) {
                        let at = (y as usize * w + xx as usize) * BLOCKED_UNIT + lane0;
                        cols[j][i].copy_from_slice(&block[at..at + L]);
                    }
                }
            }
        } else if inside {
            let base = y0 as usize * w + x0 as usize;
            for l in 0..lanes {
                let src = &x[(c0 + l) * plane + base..];
                for i in 0..T {
                    let row = &src[i * w..i * w + T];
                    for j in 0..T {
                        cols[j][i][l] = row[j];
                    }
                }
            }
        } else {
            for l in 0..lanes {
                let src = &x[(c0 + l) * plane..(c0 + l + 1) * plane];
                for i in 0..T {
                    let y = y0 + i as isize;
                    if y < 0 || y >= h as isize {
                        continue;
                    }
                    for j in 0..T {
                        let xx = x0 + j as isize;
                        if xx >= 0 && xx < w as isize {
                            cols[j][i][l] = src[y as usize * w + xx as usize];
                        }
                    }
                }
            }
        }
        // Columns first (over i), then rows (over j).
        let mut tmp = [[[0.0f32; L]; T]; T]; // tmp[j][xi]
        for j in 0..T {
            tmp[j] = V::bt(&cols[j]);
        }
        for xi in 0..T {
            let row: [Lanes; T] = std::array::from_fn(|j| tmp[j][xi]);
            let out = V::bt(&row);
            for (nu, vals) in out.iter().enumerate() {
                let at = (xi * T + nu) * ic + c0;
                // A fixed-length copy compiles to one vector store; the tail copies element-wise.
                if lanes == L {
                    vt[at..at + L].copy_from_slice(vals);
                } else {
                    for (d, &v) in vt[at..at + lanes].iter_mut().zip(vals) {
                        *d = v;
                    }
                }
            }
        }
    }
}

/// `y[i][j][l] + b[l]` for every output `(i, j)` of a tile and lane `l`, at `flat[at(i, j,
/// l)]`, then activated.
#[inline(always)]
fn activated<const R: usize>(
    y: &[[Lanes; R]; R],
    b: &Lanes,
    act: Activation,
    flat: &mut [f32],
    at: impl Fn(usize, usize, usize) -> usize,
) {
    for (i, yi) in y.iter().enumerate() {
        for (j, yij) in yi.iter().enumerate() {
            for (l, (&v, &bl)) in yij.iter().zip(b).enumerate() {
                flat[at(i, j, l)] = v + bl;
            }
        }
    }
    act.apply_inline(flat);
}

/// The output transform ([`output_tiles`], compiled for `lane_isa`) of the tiles `which` into
/// `planes` (in `layout`, the first of their channels `o_first`), lane group by lane group;
/// `m` and `at` as for [`output_tiles`].
pub(super) fn transform_out<const R: usize, const T: usize, V: Variant<R, T>>(
    lane_isa: Isa,
    p: &Conv2dParams,
    (m, at): (&[f32], (usize, usize, usize, usize)),
    which: std::ops::Range<usize>,
    ep: (Option<&[f32]>, Activation),
    (layout, o_first, planes): (Layout, usize, &mut [&mut [f32]]),
) {
    for_lane_groups(layout, o_first, planes, |o0, lanes| {
        simd::vectorize(
            lane_isa,
            #[inline(always)]
            || output_tiles::<R, T, V>(p, m, at, which.clone(), o0, ep, lanes),
        );
    });
}

/// Where the output transform writes the `L` output channels of a lane group.
enum OutLanes<'a, 'b> {
    /// Their planes (fewer at the end), each from row `y_base` on.
    Planes(&'a mut [&'b mut [f32]]),
    /// Their block's positions from row `y_base` on, 16 floats each, the group's lanes from
    /// this one on ([`Layout::Blocked`]).
    Block(&'a mut [f32], usize),
}

/// Calls `f(o0, lanes)` for each group of `L` output channels that `planes` hold, the first
/// from channel `o_first`: in the plain layout `planes` are at most `L` channels' planes (one
/// group), in the blocked one whole blocks (two groups each).
fn for_lane_groups<'b>(
    layout: Layout,
    o_first: usize,
    planes: &mut [&'b mut [f32]],
    mut f: impl FnMut(usize, OutLanes<'_, 'b>),
) {
    match layout {
        Layout::Plain => f(o_first, OutLanes::Planes(planes)),
        Layout::Blocked => {
            for (k, block) in planes.iter_mut().enumerate() {
                for lane0 in (0..BLOCKED_UNIT).step_by(L) {
                    f(
                        o_first + k * BLOCKED_UNIT + lane0,
                        OutLanes::Block(block, lane0),
                    );
                }
            }
        }
    }
}

/// The output transform for output channels `o0 .. o0+L` (`lanes`: fewer at the end of the
/// plain layout) and the tiles `which` of the `n` of the band or block starting at tile `t0`
/// (`tw` tiles per row): `Aᵀ M A + bias`, activated, cropped to the image.
#[inline(always)]
fn output_tiles<const R: usize, const T: usize, V: Variant<R, T>>(
    p: &Conv2dParams,
    m: &[f32],
    (n, t0, tw, y_base): (usize, usize, usize, usize),
    which: std::ops::Range<usize>,
    o0: usize,
    (bias, act): (Option<&[f32]>, Activation),
    mut lanes_out: OutLanes,
) {
    // A variant's input tile is its output tile and the filter's reach; `flat` below holds
    // at most 4×4 outputs per lane.
    const { assert!(T == R + 2 && R <= 4) };
    let oc = p.out_channels;
    let (oh, ow) = (p.out_h(), p.out_w());
    let lanes = L.min(oc - o0);
    let mut b = [0.0f32; L];
    if let Some(bias) = bias {
        b[..lanes].copy_from_slice(&bias[o0..o0 + lanes]);
    }
    for t in which {
        let tg = t0 + t;
        let (y0, x0) = (tg / tw * R, tg % tw * R);
        // s[nu][i]: columns transformed (over xi).
        let mut s = [[[0.0f32; L]; R]; T];
        for (nu, s_nu) in s.iter_mut().enumerate() {
            let mut col = [[0.0f32; L]; T];
            for (xi, c) in col.iter_mut().enumerate() {
                let at = ((xi * T + nu) * n + t) * oc + o0;
                if lanes == L {
                    c.copy_from_slice(&m[at..at + L]);
                } else {
                    for (d, &v) in c.iter_mut().zip(&m[at..at + lanes]) {
                        *d = v;
                    }
                }
            }
            *s_nu = V::at(&col);
        }
        // y[i][j] per lane, then bias and activation on all R² values of each lane.
        let mut y = [[[0.0f32; L]; R]; R];
        for (i, yi) in y.iter_mut().enumerate() {
            let row: [Lanes; T] = std::array::from_fn(|nu| s[nu][i]);
            *yi = V::at(&row);
        }
        let rows = R.min(oh - y0);
        let cols = R.min(ow - x0);
        let planes = match &mut lanes_out {
            OutLanes::Planes(planes) => planes,
            OutLanes::Block(block, lane0) => {
                // [i][j][l]: each position's lanes side by side, as the block holds them.
                let mut flat = [0.0f32; 16 * L];
                let flat = &mut flat[..R * R * L];
                activated(&y, &b, act, flat, |i, j, l| (i * R + j) * L + l);
                for i in 0..rows {
                    let at = ((y0 - y_base + i) * ow + x0) * BLOCKED_UNIT + *lane0;
                    for j in 0..cols {
                        let at = at + j * BLOCKED_UNIT;
                        block[at..at + L].copy_from_slice(&flat[(i * R + j) * L..][..L]);
                    }
                }
                continue;
            }
        };
        // [l][i][j], R² values per lane (room for the largest tile, R = 4).
        let mut flat = [0.0f32; 16 * L];
        let flat = &mut flat[..R * R * L];
        activated(&y, &b, act, flat, |i, j, l| (l * R + i) * R + j);
        for (l, dst) in planes.iter_mut().enumerate().take(lanes) {
            for i in 0..rows {
                let at = (y0 - y_base + i) * ow + x0;
                let src = &flat[(l * R + i) * R..][..R];
                if cols == R {
                    dst[at..at + R].copy_from_slice(src);
                } else {
                    for (d, &v) in dst[at..at + cols].iter_mut().zip(src) {
                        *d = v;
                    }
                }
            }
        }
    }
}
