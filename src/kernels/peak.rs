//! The measured fp32 FMA peak of one core: what the benchmarks' "% of peak" is taken against.
//!
//! A core's peak is its FMA units' throughput at the clock it holds under a vector load, which
//! neither the nominal clock nor the ISA gives (Zen 4 issues one 512-bit FMA per cycle, Zen 5
//! and most AVX-512 Xeons two). It is measured by running independent FMA chains, enough of
//! them to cover the FMA latency on every unit, for a few milliseconds at a time.
#![forbid(unsafe_code)]

use super::cpu::{self, Isa};
use super::simd;
use std::hint::black_box;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// FMA steps per timed burst: about 2 ms for AVX-512 (16 FMAs a step, two a cycle at 4 GHz).
const BURST: usize = 1 << 20;

/// The fp32 FMA peak of the calling thread's core for `isa`, in GFLOP/s: the fastest of
/// `rounds` bursts of about 2 ms after a warm-up of about 50 ms (so that the core reaches the clock it keeps
/// under load). `None` when `isa` has no FMA registers (portable) or the CPU lacks it.
pub fn fma_peak_gflops(isa: Isa, rounds: usize) -> Option<f64> {
    burst_rate(isa, BURST)?;
    let warm = Instant::now();
    while warm.elapsed() < Duration::from_millis(50) {
        black_box(burst_rate(isa, BURST));
    }
    let mut best = 0.0f64;
    for _ in 0..rounds.max(1) {
        best = best.max(burst_rate(isa, BURST)? / 1e9);
    }
    Some(best)
}

/// The flops a second of one burst of `steps` steps of [`simd::fma_chains`] on `isa`; `None`
/// where it has none.
fn burst_rate(isa: Isa, steps: usize) -> Option<f64> {
    let t = Instant::now();
    let (sum, flops) = black_box(simd::fma_chains(
        isa,
        steps,
        black_box(1.0),
        black_box(2f32.powi(-10)),
    ))?;
    let secs = t.elapsed().as_secs_f64();
    black_box(sum);
    Some(flops / secs.max(1e-9))
}

/// Whether the kernels run AVX-512 on a core whose 512-bit FMAs have about twice the lane
/// throughput of its 256-bit ones (two full-width FMA pipes: most AVX-512 Xeons, Zen 5), rather
/// than the same (Zen 4, which splits a 512-bit FMA into halves; parts with one 512-bit
/// unit). On such a core the GEMMs of a few small tiles are bound by how fast their operands
/// arrive rather than by the multiplications (see `winograd::output_tile`). Measured once per
/// process, in about 2 ms: the fastest of four interleaved short bursts of each width, their
/// ratio (the clock cancels) above 1.5. `false` where the kernels are not AVX-512.
pub fn wide_fma() -> bool {
    static WIDE: OnceLock<bool> = OnceLock::new();
    *WIDE.get_or_init(|| {
        if cpu::isa() != Isa::Avx512 || !cpu::supported(Isa::Avx2Fma) {
            return false;
        }
        // Bursts of an eighth of a peak burst.
        let rate = |isa: Isa| burst_rate(isa, BURST / 8);
        let (mut wide, mut narrow) = (0.0f64, 0.0f64);
        for _ in 0..4 {
            wide = wide.max(rate(Isa::Avx512).unwrap_or(0.0));
            narrow = narrow.max(rate(Isa::Avx2Fma).unwrap_or(0.0));
        }
        wide > 1.5 * narrow
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cpu;

    #[test]
    fn chains_compute_their_closed_form() {
        // With a = 1 every lane adds b once a step: lanes · iters · b, exactly.
        for isa in cpu::test_isas() {
            let lanes = match isa {
                Isa::Avx512 => 16.0 * 16.0,
                Isa::Avx2Fma => 12.0 * 8.0,
                Isa::Portable => {
                    assert!(simd::fma_chains(isa, 10, 1.0, 1.0).is_none());
                    assert!(fma_peak_gflops(isa, 1).is_none());
                    continue;
                }
            };
            let b = 2f32.powi(-10);
            let (sum, flops) = simd::fma_chains(isa, 1000, black_box(1.0), b).unwrap();
            assert_eq!(sum, lanes * 1000.0 * b, "{isa:?}");
            assert_eq!(flops, f64::from(lanes) * 1000.0 * 2.0, "{isa:?}");
            // a = 0.5 halves the chains towards 2b: b·(2 − 2^(1−iters)) per lane.
            let (sum, _) = simd::fma_chains(isa, 3, black_box(0.5), b).unwrap();
            assert_eq!(sum, lanes * b * 1.75, "{isa:?}");
            let peak = fma_peak_gflops(isa, 2).unwrap();
            assert!(peak.is_finite() && peak > 0.0, "{isa:?}: {peak}");
        }
    }
}
