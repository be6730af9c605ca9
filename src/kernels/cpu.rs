//! CPU feature detection: which SIMD instruction set the kernels use.
//!
//! The best available [`Isa`] is detected once per process ([`isa`]). Setting the
//! environment variable `ONNXIFI_RUST_FORCE_PORTABLE=1` forces [`Isa::Portable`].
#![forbid(unsafe_code)]

use std::sync::OnceLock;

/// The instruction-set family a kernel is compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// x86-64 with AVX-512F (plus AVX2 and FMA).
    Avx512,
    /// x86-64 with AVX2 and FMA.
    Avx2Fma,
    /// Plain Rust, whatever the compiler's baseline target gives (SSE2 on x86-64).
    Portable,
}

/// The name of an [`Isa`], for logs and benchmarks.
pub fn name(isa: Isa) -> &'static str {
    match isa {
        Isa::Avx512 => "avx512",
        Isa::Avx2Fma => "avx2+fma",
        Isa::Portable => "portable",
    }
}

/// Whether the running CPU can execute code compiled for `isa`.
///
/// Unlike [`isa`] this ignores `ONNXIFI_RUST_FORCE_PORTABLE`; it answers what the hardware can do.
pub fn supported(isa: Isa) -> bool {
    match isa {
        Isa::Portable => true,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => {
            std::arch::is_x86_feature_detected!("avx512f")
                && std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
        }
        #[cfg(not(target_arch = "x86_64"))]
        _ => false,
    }
}

/// The best instruction set of this CPU, detected once (honours `ONNXIFI_RUST_FORCE_PORTABLE=1`).
pub fn isa() -> Isa {
    static DETECTED: OnceLock<Isa> = OnceLock::new();
    *DETECTED.get_or_init(|| {
        let forced = std::env::var("ONNXIFI_RUST_FORCE_PORTABLE")
            .map(|v| !v.is_empty() && v != "0")
            .unwrap_or(false);
        if forced {
            Isa::Portable
        } else if supported(Isa::Avx512) {
            Isa::Avx512
        } else if supported(Isa::Avx2Fma) {
            Isa::Avx2Fma
        } else {
            Isa::Portable
        }
    })
}

/// Whether the GEMM may multiply bfloat16 operands with AVX512_BF16's dot-product instruction
/// (`vdpbf16ps`): the process's ISA is AVX-512 ([`isa`], so `ONNXIFI_RUST_FORCE_PORTABLE`
/// turns it off too) and the CPU has AVX512_BF16. Detected once.
pub fn bf16_dot() -> bool {
    static DETECTED: OnceLock<bool> = OnceLock::new();
    *DETECTED.get_or_init(|| isa() == Isa::Avx512 && bf16_dot_hardware())
}

/// Whether the CPU itself has AVX-512F and AVX512_BF16 (whatever [`isa`] chose).
pub fn bf16_dot_hardware() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        supported(Isa::Avx512) && std::arch::is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The instruction sets the tests should exercise on this machine.
///
/// Every supported [`Isa`] is returned. If the environment variable
/// `ONNXIFI_RUST_REQUIRE_ISA` names an ISA (`avx512` or `avx2`) the CPU lacks, this panics, so
/// that a CI run that expects the SIMD paths to be tested fails instead of silently skipping.
pub fn test_isas() -> Vec<Isa> {
    if let Ok(req) = std::env::var("ONNXIFI_RUST_REQUIRE_ISA") {
        for want in req.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let isa = match want {
                "avx512bf16" => {
                    assert!(
                        bf16_dot_hardware(),
                        "ONNXIFI_RUST_REQUIRE_ISA={req}: this CPU lacks AVX512_BF16"
                    );
                    continue;
                }
                "avx512" => Isa::Avx512,
                "avx2" | "avx2fma" | "avx2+fma" => Isa::Avx2Fma,
                "portable" => Isa::Portable,
                other => panic!("ONNXIFI_RUST_REQUIRE_ISA: unknown ISA {other:?}"),
            };
            assert!(
                supported(isa),
                "ONNXIFI_RUST_REQUIRE_ISA={req}: this CPU lacks {}",
                name(isa)
            );
        }
    }
    [Isa::Avx512, Isa::Avx2Fma, Isa::Portable]
        .into_iter()
        .filter(|&i| supported(i))
        .collect()
}

/// Whether the tests should exercise the bfloat16 dot-product GEMM ([`bf16_dot`]); panics when
/// `ONNXIFI_RUST_REQUIRE_ISA` names `avx512bf16` and the GEMM would not use it.
pub fn test_bf16_dot() -> bool {
    let required = std::env::var("ONNXIFI_RUST_REQUIRE_ISA")
        .is_ok_and(|req| req.split(',').any(|w| w.trim() == "avx512bf16"));
    assert!(
        !required || bf16_dot(),
        "ONNXIFI_RUST_REQUIRE_ISA names avx512bf16, but the GEMM does not use it"
    );
    test_isas();
    bf16_dot()
}

/// Returns `isa` if the CPU supports it; panics when a required ISA is missing (see [`test_isas`]).
///
/// Used by the per-ISA tests: `None` means "skip, not available".
pub fn test_isa(isa: Isa) -> Option<Isa> {
    let list = test_isas();
    list.contains(&isa).then_some(isa)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detection_is_consistent() {
        let i = isa();
        assert!(supported(i));
        assert!(!name(i).is_empty());
        assert!(test_isas().contains(&Isa::Portable));
    }
}
