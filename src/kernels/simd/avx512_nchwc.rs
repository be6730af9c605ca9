//! AVX-512F convolution on the channel-blocked layout (`NCHW16c`): one strip of [`STRIP`]
//! output positions times four blocks of 16 output channels in 24 accumulators; each step of
//! the input channels and kernel taps loads the four blocks' weights once (one 64-float row of
//! the packed filters) and broadcasts the input value of every position.
#![allow(clippy::incompatible_msrv)] // AVX-512 intrinsics are stable since Rust 1.89.

use std::arch::x86_64::*;

use super::nchwc::{ConvStrip, StripCursor, StripRun, GROUP_BLOCKS, STRIP};

/// Every strip of `run` in turn (see [`conv_strip`]), strip `k` prefetching floats `k ·
/// per_strip ..` of `prefetch` (at most `per_strip` of them, none past `prefetch_len`).
///
/// # Safety
/// - The CPU supports AVX-512F.
/// - Every strip of `run` meets [`conv_strip`]'s contract for `taps`, `x`, `w`, `bias`, `z`
///   and `out` (the pass's outputs from its first position on).
/// - `prefetch` is readable for `prefetch_len` floats.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn conv_strips(
    run: &StripRun,
    (taps, x): (&[usize], *const f32),
    (w, bias): (*const f32, *const f32),
    (prefetch, prefetch_len, per_strip): (*const f32, usize, usize),
    z: [*const f32; GROUP_BLOCKS],
    out: [*mut f32; GROUP_BLOCKS],
    clamp: Option<(f32, f32)>,
) {
    let mut cursor = StripCursor::new(run);
    let mut from = 0usize;
    while let Some(s) = cursor.next_strip(run) {
        let len = per_strip.min(prefetch_len.saturating_sub(from));
        // SAFETY: the strip meets `conv_strip`'s contract (this function's); its prefetched
        // floats `from .. from + len` lie inside `prefetch_len` (`len` is 0 past it).
        unsafe {
            conv_strip(
                &s,
                (taps, x),
                (w, bias),
                (prefetch.wrapping_add(from), len),
                z,
                out,
                clamp,
            )
        };
        from = from.saturating_add(per_strip);
    }
}

/// One strip: `out[j][s.out_pos[p] + l] = clamp(acc + z)` for output block `j <
/// s.blocks_out`, position `p < STRIP` and lane `l < 16`, where `acc` starts from `bias[16·j +
/// l]` (when `s.first`) or from the output's own value, and adds, over the strip's input
/// blocks `cb`, the taps `t` and the block's channels `k`, `x[s.x_pos[p] + cb·s.x_block +
/// taps[t] + k] · w[((cb·T + t)·16 + k)·64 + 16·j + l]` (`T = taps.len()`); `z` (null: none) and `clamp` apply only when `s.last`. Meanwhile the
/// `prefetch_len` floats from `prefetch` on are fetched into L2, a cache line per step of the
/// input channels (more when there are more lines than steps).
///
/// # Safety
/// - The CPU supports AVX-512F.
/// - `x` is readable at `s.x_pos[p] + cb·s.x_block + taps[t] + k` for every `p`, `cb <
///   s.blocks_in`, `t` and `k < 16`; `w` for `s.blocks_in · T · 1024` floats and `bias` for 64.
/// - For `j < s.blocks_out`, `out[j]` is valid for reads and writes, and a non-null `z[j]`
///   for reads, of 16 floats at every `s.out_pos[p]`, overlapping neither `x`, `w` nor `bias`.
/// - `prefetch` is readable for `prefetch_len` floats.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn conv_strip(
    s: &ConvStrip,
    (taps, x): (&[usize], *const f32),
    (w, bias): (*const f32, *const f32),
    (prefetch, prefetch_len): (*const f32, usize),
    z: [*const f32; GROUP_BLOCKS],
    out: [*mut f32; GROUP_BLOCKS],
    clamp: Option<(f32, f32)>,
) {
    let nb = s.blocks_out;
    let mut acc: [[__m512; GROUP_BLOCKS]; STRIP] = if s.first {
        // SAFETY: 64 biases (contract).
        let b: [__m512; GROUP_BLOCKS] =
            std::array::from_fn(|j| unsafe { _mm512_loadu_ps(bias.add(16 * j)) });
        [b; STRIP]
    } else {
        std::array::from_fn(|p| {
            std::array::from_fn(|j| {
                if j < nb {
                    // SAFETY: block `j < blocks_out` at position `p` (contract).
                    unsafe { _mm512_loadu_ps(out[j].add(s.out_pos[p])) }
                } else {
                    _mm512_setzero_ps()
                }
            })
        })
    };
    let lines = prefetch_len.div_ceil(16);
    let per_step = lines.div_ceil(16 * (s.blocks_in * taps.len()).max(1));
    let mut line = 0;
    for cb in 0..s.blocks_in {
        for (t, &tap) in taps.iter().enumerate() {
            // SAFETY: tap `t` of input block `cb < blocks_in` and their 1024 weights (contract).
            let (xb, wb) = unsafe {
                (
                    x.add(cb * s.x_block + tap),
                    w.add((cb * taps.len() + t) * 1024),
                )
            };
            for k in 0..16 {
                for _ in 0..per_step {
                    if line < lines {
                        // SAFETY: line `line` starts inside the prefetched range (contract).
                        unsafe { _mm_prefetch::<_MM_HINT_T1>(prefetch.add(16 * line).cast()) };
                        line += 1;
                    }
                }
                // SAFETY: row `(cb·T + t)·16 + k` of the weights, channel `k` of each position's
                // tap (contract).
                unsafe {
                    let wk: [__m512; GROUP_BLOCKS] =
                        std::array::from_fn(|j| _mm512_loadu_ps(wb.add(k * 64 + 16 * j)));
                    for (p, a) in acc.iter_mut().enumerate() {
                        let v = _mm512_set1_ps(*xb.add(s.x_pos[p] + k));
                        for j in 0..GROUP_BLOCKS {
                            a[j] = _mm512_fmadd_ps(v, wk[j], a[j]);
                        }
                    }
                }
            }
        }
    }
    let clamp = clamp
        .filter(|_| s.last)
        .map(|(lo, hi)| (_mm512_set1_ps(lo), _mm512_set1_ps(hi)));
    for (p, a) in acc.iter().enumerate() {
        for j in 0..nb {
            let mut v = a[j];
            if s.last && !z[j].is_null() {
                // SAFETY: the residual's block `j` at position `p` (contract).
                v = _mm512_add_ps(v, unsafe { _mm512_loadu_ps(z[j].add(s.out_pos[p])) });
            }
            if let Some((lo, hi)) = clamp {
                // max(lo, v) and min(hi, v) return v when it is NaN (the second operand).
                v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
            }
            // SAFETY: output block `j < blocks_out` at position `p` (contract).
            unsafe { _mm512_storeu_ps(out[j].add(s.out_pos[p]), v) };
        }
    }
}
