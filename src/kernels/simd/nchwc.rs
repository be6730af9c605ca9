//! The strip of the channel-blocked convolution (`kernels::nchwc`): its geometry,
//! the checks that make the AVX-512 kernel (`avx512_nchwc`) safe to enter, and the same strip
//! in plain Rust for the other ISAs.

#[cfg(target_arch = "x86_64")]
use crate::kernels::cpu;
use crate::kernels::cpu::Isa;

/// Output positions of one strip (24 accumulators with [`GROUP_BLOCKS`]).
pub(crate) const STRIP: usize = 6;
/// Blocks of 16 output channels a strip computes together (one 64-float row of the packed
/// filters per input channel).
pub(crate) const GROUP_BLOCKS: usize = 4;

/// Where one strip reads and writes (offsets in floats). A strip of fewer than [`STRIP`]
/// positions repeats its last one: the repeats compute and store the same values again.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ConvStrip {
    /// Each position's 16 channels of the first input block of the strip's pass.
    pub x_pos: [usize; STRIP],
    /// Floats from one input block to the next.
    pub x_block: usize,
    /// Input blocks of this pass.
    pub blocks_in: usize,
    /// Each position's 16 channels in every output (and residual) block.
    pub out_pos: [usize; STRIP],
    /// Output blocks written (1 to [`GROUP_BLOCKS`]).
    pub blocks_out: usize,
    /// The first pass over the input blocks: the sums start from the biases, not the output.
    pub first: bool,
    /// The last pass: the residual and the clamp apply.
    pub last: bool,
}

/// Runs one strip (see `avx512_nchwc::conv_strip` for the sums): `taps` the kernel taps'
/// offsets in the input (`[0]` for a 1×1 convolution), `x` the input, `w` the pass's
/// `blocks_in · taps.len() · 1024` packed weights, `bias` the group's 64 biases, `z` the residual
/// blocks (empty: none; otherwise every written block), `out` the output blocks (at least
/// `blocks_out`); `prefetch` is fetched into L2 meanwhile (the next pass's filters: the first
/// strip of a pass over few positions otherwise waited for them from memory). Returns
/// `false`, computing nothing, when an offset falls outside its slice.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_strip(
    isa: Isa,
    s: &ConvStrip,
    taps: &[usize],
    x: &[f32],
    (w, bias): (&[f32], &[f32]),
    prefetch: &[f32],
    z: &[&[f32]],
    out: &mut [&mut [f32]],
    clamp: Option<(f32, f32)>,
) -> bool {
    let reach = |pos: &[usize; STRIP], extra: usize| {
        pos.iter()
            .map(|&p| p.checked_add(extra).and_then(|e| e.checked_add(16)))
            .try_fold(0usize, |m, e| e.map(|e| m.max(e)))
    };
    let max_tap = taps.iter().copied().max();
    let x_extra = s
        .blocks_in
        .saturating_sub(1)
        .checked_mul(s.x_block)
        .zip(max_tap)
        .and_then(|(e, t)| e.checked_add(t));
    let x_ok = s.blocks_in == 0
        || x_extra
            .and_then(|e| reach(&s.x_pos, e))
            .is_some_and(|r| r <= x.len());
    let out_reach = reach(&s.out_pos, 0);
    let blocks_ok = (1..=GROUP_BLOCKS).contains(&s.blocks_out)
        && out.len() >= s.blocks_out
        && (z.is_empty() || z.len() >= s.blocks_out);
    let fits = x_ok
        && blocks_ok
        && out_reach.is_some_and(|r| {
            out[..s.blocks_out].iter().all(|o| o.len() >= r)
                && z.iter().take(s.blocks_out).all(|o| o.len() >= r)
        })
        && !taps.is_empty()
        && s.blocks_in
            .checked_mul(taps.len())
            .and_then(|n| n.checked_mul(1024))
            .is_some_and(|n| n <= w.len())
        && bias.len() >= 16 * GROUP_BLOCKS;
    if !fits {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && cpu::supported(isa) {
        let zp = std::array::from_fn(|j| match z.get(j) {
            Some(z) if j < s.blocks_out => z.as_ptr(),
            _ => std::ptr::null(),
        });
        let op = std::array::from_fn(|j| match out.get_mut(j) {
            Some(o) if j < s.blocks_out => o.as_mut_ptr(),
            _ => std::ptr::null_mut(),
        });
        // SAFETY: AVX-512F is there (checked); every offset the strip reads or writes lies in
        // its slice (checked above), the output slices are distinct `&mut` borrows, so they
        // overlap neither each other nor the inputs, and only blocks `j < blocks_out` of `z`
        // and `out` are read or written.
        unsafe {
            super::avx512_nchwc::conv_strip(
                s,
                (taps, x.as_ptr()),
                (w.as_ptr(), bias.as_ptr()),
                (prefetch.as_ptr(), prefetch.len()),
                zp,
                op,
                clamp,
            )
        };
        return true;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (isa, prefetch);
    portable_strip(s, taps, x, (w, bias), z, out, clamp);
    true
}

/// [`conv_strip`] in plain Rust, the same sums in the same order (bounds checked by the
/// caller).
fn portable_strip(
    s: &ConvStrip,
    taps: &[usize],
    x: &[f32],
    (w, bias): (&[f32], &[f32]),
    z: &[&[f32]],
    out: &mut [&mut [f32]],
    clamp: Option<(f32, f32)>,
) {
    let mut acc = [[0f32; 16 * GROUP_BLOCKS]; STRIP];
    for (p, a) in acc.iter_mut().enumerate() {
        for j in 0..s.blocks_out {
            let src = if s.first {
                &bias[16 * j..16 * j + 16]
            } else {
                &out[j][s.out_pos[p]..s.out_pos[p] + 16]
            };
            a[16 * j..16 * j + 16].copy_from_slice(src);
        }
    }
    for (cb, t) in (0..s.blocks_in).flat_map(|cb| (0..taps.len()).map(move |t| (cb, t))) {
        for k in 0..16 {
            let at = ((cb * taps.len() + t) * 16 + k) * 64;
            let row = &w[at..at + 64];
            for (p, a) in acc.iter_mut().enumerate() {
                let v = x[s.x_pos[p] + cb * s.x_block + taps[t] + k];
                for (a, &wv) in a.iter_mut().zip(row) {
                    *a = v.mul_add(wv, *a);
                }
            }
        }
    }
    for (p, a) in acc.iter().enumerate() {
        for j in 0..s.blocks_out {
            for l in 0..16 {
                let at = s.out_pos[p] + l;
                let mut v = a[16 * j + l];
                if s.last {
                    if let Some(z) = z.get(j) {
                        v += z[at];
                    }
                    if let Some((lo, hi)) = clamp {
                        // As `min(hi, max(lo, v))` in registers: NaN stays NaN.
                        if !v.is_nan() {
                            v = v.max(lo).min(hi);
                        }
                    }
                }
                out[j][at] = v;
            }
        }
    }
}
