//! `onnxifi-run bench`: latency and throughput of a model through the C ABI, in the manner of
//! `onnxruntime_perf_test`: warm-up runs, then a fixed number of runs or a duration, with
//! percentiles, init time, peak memory, threads and SIMD kernels; optionally the slowest
//! operators and a JSON report.
#![forbid(unsafe_code)]

use crate::capi::{Handle, Onnxifi};
use crate::io_plan::{self, InputSources};
use crate::model::{display_name, Format};
use crate::{CliError, Flags};
use onnxifi_rust::ffi::types::{
    ONNXIFI_BACKEND_NUM_THREADS_RUST, ONNXIFI_BACKEND_PROFILE_RUST, ONNXIFI_BACKEND_SIMD_RUST,
};
use onnxifi_rust::trace::json_string;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The text of `onnxifi-run bench --help`.
pub const USAGE: &str = "\
usage: onnxifi-run bench MODEL [options]

Benchmarks MODEL through the backend's C API: warm-up runs, then --iterations runs (or runs
for --duration seconds), showing a progress bar on a terminal. Prints min, mean, p50, p90, p99
and max latency, throughput, onnxInitGraph time, peak resident memory, threads and SIMD
kernels.

options:
  --iterations N      measured runs (default 100, unless --duration is given)
  --duration S        measure for S seconds instead
  --warmup N          runs before measuring (default 5)
  --threads N         compute threads of the backend
  --profile           also list the 15 slowest operators (ONNXIFI_RUST_PROFILE; with
                      ONNXIFI_RUST_PROFILE=shape set, the 100 slowest by shapes)
  --json FILE         write the results as JSON (`-`: stdout)
  --input, --seed, --dim, --from   as for `run`";

/// Arguments of `bench`.
struct BenchArgs {
    model: String,
    from: Option<Format>,
    sources: InputSources,
    iterations: Option<usize>,
    duration: Option<f64>,
    warmup: usize,
    threads: Option<usize>,
    profile: bool,
    json: Option<String>,
}

fn parse(args: Vec<String>) -> Result<Option<BenchArgs>, CliError> {
    let mut a = BenchArgs {
        model: String::new(),
        from: None,
        sources: InputSources::new(),
        iterations: None,
        duration: None,
        warmup: 5,
        threads: None,
        profile: false,
        json: None,
    };
    let mut help = false;
    let positional = Flags::new("bench", args).split(|flag, f| {
        if a.sources.take_flag(f, flag)? {
            return Ok(());
        }
        match flag {
            "--help" | "-h" => help = true,
            "--iterations" => a.iterations = Some(f.positive(flag)?),
            "--duration" => {
                let s = f.real(flag)?;
                if s <= 0.0 {
                    return Err(CliError::usage("--duration must be positive"));
                }
                a.duration = Some(s);
            }
            "--warmup" => a.warmup = f.number(flag)? as usize,
            "--threads" => a.threads = Some(f.positive(flag)?),
            "--profile" => a.profile = true,
            "--json" => a.json = Some(f.value(flag)?),
            "--from" => a.from = Some(Format::from_flag(flag, &f.value(flag)?)?),
            _ => return Err(f.unknown(flag, USAGE)),
        }
        Ok(())
    })?;
    if help {
        return Ok(None);
    }
    if a.iterations.is_some() && a.duration.is_some() {
        return Err(CliError::usage(
            "bench: give --iterations or --duration, not both",
        ));
    }
    a.model = crate::one_model("bench", positional, USAGE)?;
    Ok(Some(a))
}

/// What a benchmark measured.
struct Report {
    init: Duration,
    times: Vec<Duration>,
    wall: Duration,
    threads: u64,
    simd: String,
    /// (operator, calls, total) over every run, warm-up included.
    profile: Vec<(String, u64, Duration)>,
    runs_profiled: usize,
}

/// Rows of `--profile`'s table by operator type.
const PROFILE_ROWS: usize = 15;
/// Rows of `--profile`'s table with `ONNXIFI_RUST_PROFILE=shape` (one per operator and shapes).
const SHAPE_PROFILE_ROWS: usize = 100;

/// `onnxifi-run bench`.
pub fn cmd_bench(lib: Option<PathBuf>, args: Vec<String>) -> Result<(), CliError> {
    let Some(args) = parse(args)? else {
        out!("{USAGE}");
        return Ok(());
    };
    if args.profile {
        // Read once by the library when it first runs a step, after this. A mode the caller
        // chose (`shape`: rows split by shapes) is kept.
        if std::env::var("ONNXIFI_RUST_PROFILE").map_or(true, |v| v.is_empty() || v == "0") {
            std::env::set_var("ONNXIFI_RUST_PROFILE", "1");
        }
    }
    let mut p = io_plan::prepare(&args.model, args.from, &args.sources)?;
    let api = Onnxifi::load(&crate::capi::library_path(lib)).map_err(CliError::failed)?;
    let ids = api.backend_ids().map_err(CliError::failed)?;
    let report = measure(&api, ids[0], &args, &mut p);
    api.release_ids(ids);
    let report = report.map_err(CliError::failed)?;
    print_report(&args, &report);
    if let Some(path) = &args.json {
        let text = json(&args, &report);
        if path == "-" {
            out!("{text}");
        } else {
            std::fs::write(path, text + "\n")
                .map_err(|e| CliError::failed(format!("cannot write {path}: {e}")))?;
        }
    }
    Ok(())
}

fn measure(
    api: &Onnxifi,
    id: Handle,
    args: &BenchArgs,
    p: &mut io_plan::Prepared,
) -> Result<Report, String> {
    let threads = match args.threads {
        Some(n) => n as u64,
        None => api
            .info_u64(id, ONNXIFI_BACKEND_NUM_THREADS_RUST)
            .unwrap_or(0),
    };
    let simd = api
        .info_string(id, ONNXIFI_BACKEND_SIMD_RUST)
        .unwrap_or_else(|_| "unknown".into());
    let backend = api.init_backend(id, args.threads)?;
    let result = (|| {
        let start = Instant::now();
        let graph = api.init_graph(backend, &p.bytes)?;
        let init = start.elapsed();
        let r = (|| -> Result<(Vec<Duration>, Duration), String> {
            let mut outputs =
                io_plan::make_outputs(api, graph, &mut p.inputs, &p.declared_in, &p.declared_out)?;
            api.bind(graph, &mut p.inputs, &mut outputs)?;
            for _ in 0..args.warmup {
                api.run_once(backend, graph)?;
            }
            timed_runs(api, backend, graph, args)
        })();
        api.release_graph(graph);
        r.map(|(times, wall)| (init, times, wall))
    })();
    api.release_backend(backend);
    let (init, times, wall) = result?;
    let profile = if args.profile {
        api.info_string(id, ONNXIFI_BACKEND_PROFILE_RUST)?
            .lines()
            .filter_map(|l| {
                let mut f = l.split('\t');
                let op = f.next()?.to_string();
                let calls = f.next()?.parse().ok()?;
                let ns: u64 = f.next()?.parse().ok()?;
                Some((op, calls, Duration::from_nanos(ns)))
            })
            .collect()
    } else {
        Vec::new()
    };
    let runs_profiled = args.warmup + times.len();
    Ok(Report {
        init,
        times,
        wall,
        threads,
        simd,
        profile,
        runs_profiled,
    })
}

/// The measured runs, with a progress bar on a terminal (stderr).
fn timed_runs(
    api: &Onnxifi,
    backend: Handle,
    graph: Handle,
    args: &BenchArgs,
) -> Result<(Vec<Duration>, Duration), String> {
    let bar = match args.duration {
        Some(s) => indicatif::ProgressBar::new((s * 1000.0) as u64),
        None => indicatif::ProgressBar::new(args.iterations.unwrap_or(100) as u64),
    };
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let start = Instant::now();
    let mut times = Vec::new();
    loop {
        match (args.duration, args.iterations) {
            (Some(s), _) if !times.is_empty() && start.elapsed().as_secs_f64() >= s => break,
            (None, n) if times.len() >= n.unwrap_or(100) => break,
            _ => {}
        }
        times.push(api.run_once(backend, graph)?);
        match args.duration {
            Some(_) => bar.set_position(start.elapsed().as_millis() as u64),
            None => bar.inc(1),
        }
    }
    bar.finish_and_clear();
    Ok((times, start.elapsed()))
}

/// The `p`-th percentile (nearest rank) of sorted times.
fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Peak resident memory of this process (VmHWM), in bytes.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The statistics of a report: min, mean, p50, p90, p99, max (ms).
fn stats(r: &Report) -> [(&'static str, f64); 6] {
    let mut sorted = r.times.clone();
    sorted.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mean = sorted.iter().map(|d| ms(*d)).sum::<f64>() / sorted.len() as f64;
    [
        ("min", ms(sorted[0])),
        ("mean", mean),
        ("p50", ms(percentile(&sorted, 50.0))),
        ("p90", ms(percentile(&sorted, 90.0))),
        ("p99", ms(percentile(&sorted, 99.0))),
        ("max", ms(sorted[sorted.len() - 1])),
    ]
}

fn print_report(args: &BenchArgs, r: &Report) {
    out!("model:       {}", display_name(&args.model));
    out!("threads:     {}   SIMD: {}", r.threads, r.simd);
    out!(
        "init:        {:.3} ms (onnxInitGraph)",
        r.init.as_secs_f64() * 1e3
    );
    out!(
        "runs:        {} after {} warm-up",
        r.times.len(),
        args.warmup
    );
    let line: Vec<String> = stats(r)
        .iter()
        .map(|(k, v)| format!("{k} {v:.3}"))
        .collect();
    out!("latency ms:  {}", line.join("  "));
    out!(
        "throughput:  {:.2} runs/s",
        r.times.len() as f64 / r.wall.as_secs_f64()
    );
    if let Some(b) = peak_rss() {
        out!("peak RSS:    {:.1} MiB", b as f64 / (1 << 20) as f64);
    }
    if args.profile {
        let total: Duration = r.profile.iter().map(|p| p.2).sum();
        out!(
            "slowest operators (per run, over {} runs):",
            r.runs_profiled
        );
        let rows = if std::env::var("ONNXIFI_RUST_PROFILE").as_deref() == Ok("shape") {
            SHAPE_PROFILE_ROWS
        } else {
            PROFILE_ROWS
        };
        for (op, calls, t) in r.profile.iter().take(rows) {
            out!(
                "  {:>9.3} ms {:>5.1}%  {:>6} calls  {op}",
                t.as_secs_f64() * 1e3 / r.runs_profiled as f64,
                100.0 * t.as_secs_f64() / total.as_secs_f64().max(1e-12),
                calls / r.runs_profiled.max(1) as u64
            );
        }
    }
}

fn json(args: &BenchArgs, r: &Report) -> String {
    let latency: Vec<String> = stats(r)
        .iter()
        .map(|(k, v)| format!("\"{k}\": {v:.6}"))
        .collect();
    let profile: Vec<String> = r
        .profile
        .iter()
        .map(|(op, calls, t)| {
            format!(
                "{{\"op\": {}, \"calls\": {calls}, \"total_ms\": {:.6}}}",
                json_string(op),
                t.as_secs_f64() * 1e3
            )
        })
        .collect();
    format!(
        "{{\"model\": {}, \"threads\": {}, \"simd\": {}, \"init_ms\": {:.6}, \"warmup\": {}, \
         \"runs\": {}, \"latency_ms\": {{{}}}, \"throughput_per_s\": {:.6}, \
         \"peak_rss_bytes\": {}, \"profile\": [{}], \"profiled_runs\": {}}}",
        json_string(display_name(&args.model)),
        r.threads,
        json_string(&r.simd),
        r.init.as_secs_f64() * 1e3,
        args.warmup,
        r.times.len(),
        latency.join(", "),
        r.times.len() as f64 / r.wall.as_secs_f64(),
        peak_rss().map_or("null".into(), |b| b.to_string()),
        profile.join(", "),
        r.runs_profiled
    )
}
