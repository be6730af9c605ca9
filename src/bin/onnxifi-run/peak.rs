//! `onnxifi-run peak`: the measured fp32 FMA peak of one core, per SIMD instruction set the CPU
//! has: what `bench/compare_ort.py` takes its "% of peak" against.
#![forbid(unsafe_code)]

use crate::{CliError, Flags};
use onnxifi_rust::kernels::cpu::{self, Isa};
use onnxifi_rust::kernels::peak::fma_peak_gflops;

/// The text of `onnxifi-run peak --help`.
pub const USAGE: &str = "\
usage: onnxifi-run peak [--rounds N] [--json]

Measures the fp32 FMA throughput of one core (the thread's own) for each SIMD instruction set
the CPU has: independent FMA chains after a warm-up of about 50 ms, the fastest of --rounds
bursts of a few milliseconds (default 20). The first line is the instruction set the kernels
use. --json prints {\"isa\": NAME, \"gflops\": X, \"per_isa\": {NAME: X, ...}} instead.";

/// Runs `onnxifi-run peak`.
pub fn cmd_peak(args: Vec<String>) -> Result<(), CliError> {
    let (mut rounds, mut json, mut help) = (20, false, false);
    let positional = Flags::new("peak", args).split(|flag, f| {
        match flag {
            "--help" | "-h" => help = true,
            "--rounds" => rounds = f.positive(flag)?,
            "--json" => json = true,
            _ => return Err(f.unknown(flag, USAGE)),
        }
        Ok(())
    })?;
    if help {
        out!("{USAGE}");
        return Ok(());
    }
    crate::no_positional("peak", &positional, USAGE)?;
    let used = cpu::isa();
    // The kernels' instruction set first, then the others the CPU has.
    let order = [used, Isa::Avx512, Isa::Avx2Fma];
    let mut seen = Vec::new();
    for isa in order {
        if cpu::supported(isa) && !seen.iter().any(|&(i, _)| i == isa) {
            if let Some(g) = fma_peak_gflops(isa, rounds) {
                seen.push((isa, g));
            }
        }
    }
    if json {
        let per: Vec<String> = seen
            .iter()
            .map(|(i, g)| format!("\"{}\": {g:.1}", cpu::name(*i)))
            .collect();
        let first = seen.first();
        out!(
            "{{\"isa\": \"{}\", \"gflops\": {}, \"per_isa\": {{{}}}}}",
            cpu::name(first.map_or(used, |f| f.0)),
            first.map_or("null".into(), |f| format!("{:.1}", f.1)),
            per.join(", ")
        );
    } else if seen.is_empty() {
        out!(
            "fp32 FMA peak: not measured ({} kernels have no FMA registers)",
            cpu::name(used)
        );
    } else {
        for (isa, g) in &seen {
            let mark = if *isa == used { " (the kernels')" } else { "" };
            out!(
                "fp32 FMA peak of one core, {}{mark}: {g:.1} GFLOP/s",
                cpu::name(*isa)
            );
        }
    }
    Ok(())
}
