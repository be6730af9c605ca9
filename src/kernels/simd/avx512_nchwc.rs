//! AVX-512F convolution on the channel-blocked layout (`NCHW16c`): one strip of output
//! positions times the blocks of 16 output channels it writes (up to four) in 24
//! accumulators (6 positions of four blocks, 8 of three, 12 of two, 24 of one); each step of
//! the input channels and kernel taps loads the blocks' weights once (from one 64-float row of
//! the packed filters) and broadcasts the input value of every position.
#![allow(clippy::incompatible_msrv)] // AVX-512 intrinsics are stable since Rust 1.89.

use std::arch::x86_64::*;

use super::nchwc::{ConvStrip, StripCursor, StripRun, GROUP_BLOCKS, MAX_STRIP};

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
        let pf = (prefetch.wrapping_add(from), len);
        let xs = (&cursor.x_pos, taps, x);
        // SAFETY: the strip meets `conv_strip`'s contract (this function's), for the
        // positions and blocks of its width (`strip_len(blocks_out)` positions, which the
        // cursor described); its prefetched floats `from .. from + len` lie inside
        // `prefetch_len` (`len` is 0 past it).
        unsafe {
            match s.blocks_out {
                1 => conv_strip::<24, 1>(&s, xs, (w, bias), pf, z, out, clamp),
                2 => conv_strip::<12, 2>(&s, xs, (w, bias), pf, z, out, clamp),
                3 => conv_strip::<8, 3>(&s, xs, (w, bias), pf, z, out, clamp),
                _ => conv_strip::<6, 4>(&s, xs, (w, bias), pf, z, out, clamp),
            }
        };
        from = from.saturating_add(per_strip);
    }
}

/// One strip of `P` positions and `B` output blocks (`B = s.blocks_out`, `P·B = 24`):
/// `out[j][s.out_at(p) + l] = clamp(acc + z)` for output block `j < B`, position `p < P`
/// and lane `l < 16`, where `acc` starts from `bias[16·j + l]` (when `s.first`) or from the
/// output's own value, and adds, over the strip's input blocks `cb`, the taps `t` and the
/// block's channels `k`, `x[s.x_at(x_pos, p) + cb·s.x_block + taps[t] + k] · w[((cb·T +
/// t)·16 + k)·64 + 16·j + l]` (`T = taps.len()`); `z` (null: none) and `clamp` apply only
/// when `s.last`. Meanwhile the
/// `prefetch_len` floats from `prefetch` on are fetched into L2, spread evenly over the steps
/// of the input blocks and taps.
///
/// # Safety
/// - The CPU supports AVX-512F; `B ≤ GROUP_BLOCKS`, `P ≤ MAX_STRIP`.
/// - `x` is readable at `s.x_at(x_pos, p) + cb·s.x_block + taps[t] + k` for every `p < P`,
///   `cb < s.blocks_in`, `t` and `k < 16`; `w` for `s.blocks_in · T · 1024` floats and `bias`
///   for 64.
/// - For `j < B`, `out[j]` is valid for reads and writes, and a non-null `z[j]` for reads,
///   of 16 floats at every `s.out_at(p)`, `p < P`, overlapping neither `x`, `w` nor `bias`.
/// - `prefetch` is readable for `prefetch_len` floats.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn conv_strip<const P: usize, const B: usize>(
    s: &ConvStrip,
    (x_pos, taps, x): (&[usize; MAX_STRIP], &[usize], *const f32),
    (w, bias): (*const f32, *const f32),
    (prefetch, prefetch_len): (*const f32, usize),
    z: [*const f32; GROUP_BLOCKS],
    out: [*mut f32; GROUP_BLOCKS],
    clamp: Option<(f32, f32)>,
) {
    // Position `p`, block `j` at `p·B + j`: one flat array of the 24 registers (nested arrays
    // of 12 × 2 were kept in memory, every sum stored back after its FMA).
    let mut acc = [_mm512_setzero_ps(); 24];
    for p in 0..P {
        for j in 0..B {
            // SAFETY: 64 biases, of which the first `16·B` are read; block `j < B` at position
            // `p < P` (contract).
            acc[j * P + p] = unsafe {
                if s.first {
                    _mm512_loadu_ps(bias.add(16 * j))
                } else {
                    _mm512_loadu_ps(out[j].add(s.out_at(p)))
                }
            };
        }
    }
    let lines = prefetch_len.div_ceil(16);
    let per_block = lines.div_ceil((s.blocks_in * taps.len()).max(1));
    let mut line = 0;
    for cb in 0..s.blocks_in {
        for (t, &tap) in taps.iter().enumerate() {
            for _ in 0..per_block {
                if line < lines {
                    // SAFETY: line `line` starts inside the prefetched range (contract).
                    unsafe { _mm_prefetch::<_MM_HINT_T1>(prefetch.add(16 * line).cast()) };
                    line += 1;
                }
            }
            // SAFETY: tap `t` of input block `cb < blocks_in` and their 1024 weights (contract).
            let (xb, wb) = unsafe {
                (
                    x.add(cb * s.x_block + tap),
                    w.add((cb * taps.len() + t) * 1024),
                )
            };
            if s.uniform {
                // Equally spaced positions are addressed from the first (no offset to load per
                // position and channel). `kernel_bench`, 1 thread, cold, 21 paired rounds in one
                // process on a Xeon, against the same strips listed: four-block strips
                // (ResNet-50's layers) 1.005–1.023× as fast, one- and two-block strips (16→16
                // 3×3 at 80², 48→32 1×1 at 80²) 1.25× and 1.12×.
                let step = s.x_step;
                // SAFETY: position `p` reads from `x_first + p · x_step` (the contract's
                // `x_at`).
                unsafe { block::<P, B>(&mut acc, xb.add(s.x_first), wb, |p| p * step) };
            } else {
                // SAFETY: position `p` reads from `x_pos[p]` (the contract's `x_at`).
                unsafe { block::<P, B>(&mut acc, xb, wb, |p| x_pos[p]) };
            }
        }
    }
    let clamp = clamp
        .filter(|_| s.last)
        .map(|(lo, hi)| (_mm512_set1_ps(lo), _mm512_set1_ps(hi)));
    for p in 0..P {
        for j in 0..B {
            let mut v = acc[j * P + p];
            if s.last && !z[j].is_null() {
                // SAFETY: the residual's block `j` at position `p` (contract).
                v = _mm512_add_ps(v, unsafe { _mm512_loadu_ps(z[j].add(s.out_at(p))) });
            }
            if let Some((lo, hi)) = clamp {
                // max(lo, v) and min(hi, v) return v when it is NaN (the second operand).
                v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
            }
            // SAFETY: output block `j < blocks_out` at position `p` (contract).
            unsafe { _mm512_storeu_ps(out[j].add(s.out_at(p)), v) };
        }
    }
}

/// The 16 input channels of one block and tap (see [`conv_strip`]'s sums): position `p`
/// reads channel `k` at `x + at(p) + k`, weight row `k` is `w + 64·k`.
///
/// # Safety
/// - The CPU supports AVX-512F; `B ≤ GROUP_BLOCKS`, `P·B ≤ 24`.
/// - `x` is readable at `at(p) + k` for every `p < P` and `k < 16`, and `w` for 1024 floats.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn block<const P: usize, const B: usize>(
    acc: &mut [__m512; 24],
    x: *const f32,
    w: *const f32,
    at: impl Fn(usize) -> usize,
) {
    for k in 0..16 {
        // SAFETY: row `k` of the block's weights and channel `k` of each position (contract).
        unsafe {
            let wk: [__m512; B] = std::array::from_fn(|j| _mm512_loadu_ps(w.add(k * 64 + 16 * j)));
            for p in 0..P {
                let v = _mm512_set1_ps(*x.add(at(p) + k));
                for j in 0..B {
                    acc[j * P + p] = _mm512_fmadd_ps(v, wk[j], acc[j * P + p]);
                }
            }
        }
    }
}

/// Transposes the 16×16 matrix whose rows are `r` (row `i`, lane `j` becomes row `j`, lane
/// `i`): pairs of rows interleaved by floats, then by pairs of floats, then 128-bit lanes
/// exchanged in two steps (64 shuffles).
#[target_feature(enable = "avx512f")]
#[inline]
fn transpose16(r: &mut [__m512; 16]) {
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // `u[4g + m]` holds, in 128-bit lane `L`, rows `4g .. 4g + 4` of column `4L + m`.
    let mut u = [_mm512_setzero_ps(); 16];
    for g in 0..4 {
        let (a, b) = (t[4 * g], t[4 * g + 2]);
        let (c, d) = (t[4 * g + 1], t[4 * g + 3]);
        let pd = _mm512_castps_pd;
        u[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(a), pd(b)));
        u[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(a), pd(b)));
        u[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(pd(c), pd(d)));
        u[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(pd(c), pd(d)));
    }
    for m in 0..4 {
        // Lanes 0–1 and 2–3 of rows 0–7, then of rows 8–15, for column `4L + m`.
        let v = _mm512_shuffle_f32x4::<0x44>(u[m], u[4 + m]);
        let w = _mm512_shuffle_f32x4::<0xEE>(u[m], u[4 + m]);
        let v2 = _mm512_shuffle_f32x4::<0x44>(u[8 + m], u[12 + m]);
        let w2 = _mm512_shuffle_f32x4::<0xEE>(u[8 + m], u[12 + m]);
        r[m] = _mm512_shuffle_f32x4::<0x88>(v, v2);
        r[4 + m] = _mm512_shuffle_f32x4::<0xDD>(v, v2);
        r[8 + m] = _mm512_shuffle_f32x4::<0x88>(w, w2);
        r[12 + m] = _mm512_shuffle_f32x4::<0xDD>(w, w2);
    }
}

/// Reorders one block of 16 channels between the plain layout (`src` or `dst` holding 16
/// planes of `plane` floats) and the blocked one (16 floats per position): blocked from
/// plain when `blocking`, else plain from blocked. Sixteen positions at a time by a 16×16
/// transpose in registers; the last `plane % 16` by masked loads and stores.
///
/// # Safety
/// - The CPU supports AVX-512F.
/// - `src` is readable and `dst` writable for `16 · plane` floats, and they do not overlap.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn reorder_block(src: *const f32, dst: *mut f32, plane: usize, blocking: bool) {
    let mut p = 0;
    while p < plane {
        let n = (plane - p).min(16);
        let mask: __mmask16 = if n == 16 { 0xFFFF } else { (1u16 << n) - 1 };
        let mut r = [_mm512_setzero_ps(); 16];
        // SAFETY: every access is inside the block's `16 · plane` floats: the plain side's
        // planes `i` at positions `p .. p + n` (masked lanes are not touched), the blocked
        // side's positions `p .. p + n` (contract).
        unsafe {
            if blocking {
                for (i, r) in r.iter_mut().enumerate() {
                    *r = _mm512_maskz_loadu_ps(mask, src.add(i * plane + p));
                }
            } else {
                for (j, r) in r.iter_mut().enumerate().take(n) {
                    *r = _mm512_loadu_ps(src.add((p + j) * 16));
                }
            }
            transpose16(&mut r);
            if blocking {
                for (j, r) in r.iter().enumerate().take(n) {
                    _mm512_storeu_ps(dst.add((p + j) * 16), *r);
                }
            } else {
                for (i, r) in r.iter().enumerate() {
                    _mm512_mask_storeu_ps(dst.add(i * plane + p), mask, *r);
                }
            }
        }
        p += n;
    }
}
