//! Runs a model repeatedly through the engine (no C ABI), for profiling:
//! `cargo run --release --example profile_model -- MODEL.onnx [RUNS]`. Inputs are zeros.
//! With `ONNXIFI_RUST_PROFILE=1` it also prints the time per operator type.

use onnxifi_rust::graph::compile_executable;
use onnxifi_rust::ir::{Tensor, TensorData};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: profile_model MODEL.onnx [RUNS]");
    let runs: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(100);
    let bytes = std::fs::read(path).expect("readable model");
    let t0 = Instant::now();
    let exe = compile_executable(&bytes, Vec::new()).expect("model compiles");
    println!("compiled in {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
    let inputs: Vec<Tensor> = exe
        .inputs()
        .iter()
        .map(|s| {
            let shape = s.declared.fixed_shape().expect("fixed input shapes");
            let n = shape.iter().product();
            Tensor::new(
                shape,
                TensorData::zeros(s.declared.dtype, n).expect("stored type"),
            )
            .expect("tensor")
        })
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(onnxifi_rust::backend::thread_count())
        .build()
        .expect("pool");
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        // As the C ABI runs a graph: the pool's other workers poll for work during the run.
        pool.install(|| onnxifi_rust::sync::hot::with_hot_workers(|| exe.run(inputs.clone())))
            .expect("run");
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{runs} runs: min {:.3} ms, median {:.3} ms",
        times[0],
        times[runs / 2]
    );
    // With ONNXIFI_RUST_PROFILE=1: time per operator type over all runs.
    let rows = onnxifi_rust::exec::profile::report(false);
    let total: f64 = rows.iter().map(|r| r.total.as_secs_f64()).sum();
    for r in rows {
        let t = r.total.as_secs_f64();
        println!(
            "{:60} {:6} calls {:9.3} ms/run {:5.1}%",
            r.op,
            r.calls,
            t * 1e3 / runs as f64,
            100.0 * t / total.max(1e-12)
        );
    }
}
