//! Conversions that pack GEMM operands: rows interleaved into an A micro-panel
//! ([`interleave_rows`]), and float32 rounded into bfloat16 pairs ([`bf16_pairs`]), each by
//! its SIMD kernel where the CPU has one.

use super::cpu::Isa;
#[cfg(target_arch = "x86_64")]
use super::{avx2, avx512, cpu};

/// Interleaves `rows.len()` rows k-major into `dst` (an A micro-panel of that many rows):
/// `dst[m·k + r] = rows[r][k]` for `k < dst.len() / m`, `m = rows.len()`. With AVX2 (`isa`
/// AVX2 or AVX-512, and the CPU has it) and a multiple of four rows, by 8×8 and 4×4
/// transposes in registers (eight rows at a time, then four: panels of 12 rows take one of each); the scalar loop
/// they replace took 3–5% of a 1024³ MatMul at one thread.
///
/// # Panics
/// If there are no rows, or one is shorter than `dst.len() / m`.
pub(crate) fn interleave_rows(isa: Isa, rows: &[&[f32]], dst: &mut [f32]) {
    let m = rows.len();
    assert!(m > 0, "interleave_rows: no rows");
    let kc = dst.len() / m;
    assert!(
        rows.iter().all(|r| r.len() >= kc),
        "interleave_rows: short row"
    );
    #[cfg(target_arch = "x86_64")]
    if matches!(isa, Isa::Avx2Fma | Isa::Avx512)
        && cpu::supported(Isa::Avx2Fma)
        && m.is_multiple_of(4)
        && kc > 0
    {
        let d = dst.as_mut_ptr();
        let mut r0 = 0;
        while r0 < m {
            // SAFETY: the CPU supports AVX2 (checked above); every row holds `kc` floats and
            // `dst` `m·kc` (checked above), of which the block of rows `r0 ..` writes floats
            // `m·k + r0 ..` (up to `m·(kc − 1) + m`), and `dst` is a `&mut` borrow, so
            // disjoint from the rows.
            unsafe {
                if m - r0 >= 8 {
                    let ptrs: [*const f32; 8] = std::array::from_fn(|r| rows[r0 + r].as_ptr());
                    avx2::interleave_rows8(&ptrs, kc, d.add(r0), m);
                    r0 += 8;
                } else {
                    let ptrs: [*const f32; 4] = std::array::from_fn(|r| rows[r0 + r].as_ptr());
                    avx2::interleave_rows4(&ptrs, kc, d.add(r0), m);
                    r0 += 4;
                }
            }
        }
        return;
    }
    let _ = isa;
    for (k, d) in dst.chunks_exact_mut(m).enumerate() {
        for (v, row) in d.iter_mut().zip(rows) {
            *v = row[k];
        }
    }
}

/// Rounds `src` to bfloat16 (to nearest, ties to even; a NaN stays a NaN; a subnormal float
/// becomes a zero of its sign, as `vcvtne2ps2bf16` does and as `vdpbf16ps` would read it)
/// two values per 32-bit slot of `dst`: `dst[i]` holds `src[2i]` in its low half and
/// `src[2i + 1]` in its high half, zeros past `src`'s end (the layout of the GEMM's bfloat16
/// pairs, [`super::Dot::Bf16`]). By `vcvtne2ps2bf16` where the CPU has AVX512_BF16, else one value at
/// a time.
///
/// # Panics
/// If `src` has more than `2 · dst.len()` values.
pub(crate) fn bf16_pairs(src: &[f32], dst: &mut [f32]) {
    assert!(src.len() <= 2 * dst.len(), "bf16_pairs: short destination");
    let (head, zeros) = dst.split_at_mut(src.len().div_ceil(2));
    zeros.fill(0.0);
    #[cfg(target_arch = "x86_64")]
    if cpu::bf16_dot_hardware() {
        // SAFETY: the CPU supports AVX-512F and AVX512_BF16 (checked); `head` holds
        // ⌈src.len()/2⌉ slots, and is a `&mut` borrow, so disjoint from `src`.
        unsafe { avx512::bf16_pairs(src.as_ptr(), src.len(), head.as_mut_ptr()) };
        return;
    }
    let bits = |x: f32| {
        let x = if x.is_subnormal() {
            0.0f32.copysign(x)
        } else {
            x
        };
        u32::from(half::bf16::from_f32(x).to_bits())
    };
    for (d, two) in head.iter_mut().zip(src.chunks(2)) {
        let hi = two.get(1).map_or(0, |&x| bits(x));
        *d = f32::from_bits(bits(two[0]) | hi << 16);
    }
}

#[cfg(test)]
mod tests {
    /// `bf16_pairs` (by `vcvtne2ps2bf16` where the CPU has AVX512_BF16) against the `half`
    /// crate's rounding, value by value: ties to even both ways, NaNs, infinities, signed
    /// zeros, subnormals (zeros of their sign) and the largest finite values, at every length
    /// to 70 (full and masked vectors, odd lengths with a half-empty last slot, zeros after
    /// it).
    #[test]
    fn bf16_pairs_round_to_nearest_even() {
        use half::bf16;
        let special = [
            1.0 + 2f32.powi(-8),
            1.0 + 3.0 * 2f32.powi(-8),
            -(1.0 + 2f32.powi(-8) + 2f32.powi(-20)),
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            f32::MAX,
            1e-39,
            -3e-42,
            f32::MIN_POSITIVE,
        ];
        let src: Vec<f32> = (0..70)
            .map(|i| {
                special
                    .get(i % 17)
                    .copied()
                    .unwrap_or(i as f32 * 0.37 - 9.1)
            })
            .collect();
        for len in 0..=70 {
            let mut dst = vec![f32::NAN; 36];
            super::bf16_pairs(&src[..len], &mut dst);
            for (i, d) in dst.iter().enumerate() {
                let bits = d.to_bits();
                for (half_at, shift) in [(2 * i, 0), (2 * i + 1, 16)] {
                    let got = bf16::from_bits((bits >> shift) as u16);
                    match src[..len].get(half_at) {
                        Some(&x) if x.is_nan() => assert!(got.is_nan(), "len {len} [{half_at}]"),
                        Some(&x) if x.is_subnormal() => assert_eq!(
                            got.to_bits(),
                            bf16::from_f32(0.0f32.copysign(x)).to_bits(),
                            "len {len} [{half_at}] of {x:e}"
                        ),
                        Some(&x) => assert_eq!(
                            got.to_bits(),
                            bf16::from_f32(x).to_bits(),
                            "len {len} [{half_at}] of {x:e}"
                        ),
                        None => assert_eq!(got.to_bits(), 0, "len {len} [{half_at}] past the end"),
                    }
                }
            }
        }
    }

    /// `interleave_rows` puts row `r`'s column `k` at `m·k + r` for panels of 1 to 16 rows,
    /// on every ISA the CPU has, for lengths around the 8- and 4-column transpose blocks
    /// (tails of 1 to 7 columns included), rows longer than used and rows that share one
    /// buffer.
    #[test]
    fn interleave_rows_is_a_k_major_panel() {
        use crate::kernels::cpu::{self, Isa};
        let data: Vec<f32> = (0..16 * 41).map(|i| i as f32 * 0.5 - 7.0).collect();
        for isa in [Isa::Portable, Isa::Avx2Fma, Isa::Avx512] {
            let Some(isa) = cpu::test_isa(isa) else {
                continue;
            };
            for m in [1, 4, 6, 8, 12, 16] {
                for kc in [0, 1, 3, 4, 7, 8, 9, 16, 23, 33] {
                    let rows: Vec<&[f32]> = (0..m).map(|r| &data[r * 40 + r..][..kc + 1]).collect();
                    let mut dst = vec![f32::NAN; m * kc];
                    super::interleave_rows(isa, &rows, &mut dst);
                    for k in 0..kc {
                        for r in 0..m {
                            assert_eq!(
                                dst[m * k + r],
                                data[r * 40 + r + k],
                                "{isa:?} m {m} kc {kc} ({k}, {r})"
                            );
                        }
                    }
                }
            }
        }
    }
}
