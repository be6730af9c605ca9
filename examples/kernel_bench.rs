//! Benchmarks of the CPU kernels: sgemm (256³, 512³, 1024³) and a ResNet-style 3×3 convolution,
//! per ISA, with 1 and 2 threads. Reports the median GFLOP/s over interleaved rounds, timed in
//! the workers' on-CPU time (see the comment in `main`).
//!
//! `cargo run --release --example kernel_bench [rounds]`; `KB_ISA=avx512|avx2|portable` limits
//! the ISAs, `KB_CASE=substring` the cases. `KB_CONV="ic,hw,oc,k,s,pad[,groups];..."` adds
//! convolutions (one image, square images and kernels, bias and Relu), e.g. a model's layers;
//! `KB_PWDW="ic,hw,mid,k,s;..."` adds 1×1 convolutions followed by a depthwise one (MobileNet's
//! expansion and depthwise layers), banded and apart;
//! `KB_GEMM="m,k,n;..."` adds fully connected layers (B prepacked, `Gemm` with `transB`; on
//! AVX-512 with AVX512_BF16 also as bfloat16 pairs, the cases named `bf16`);
//! `KB_NCHWC="ic,hw,oc,s;..."` or `"ic,hw,oc,k,s,pad;..."` adds convolutions on
//! channel-blocked tensors;
//! `KB_POOL="c,hw,k,s,pad;..."` adds max poolings (the process's ISA; a "flop" is a window tap);
//! `KB_COLD=n` cycles each through `n` copies of its data (outer caches, as inside a model);
//! `KB_WALL=1` times in wall-clock time instead (which counts a worker's idle waits);
//! `KB_THREADS=1,4,16` sets the pool sizes (default 1,2).

use std::time::Instant;

use onnxifi_rust::kernels::conv::{Conv2d, Conv2dParams, PointwiseDepthwise};
use onnxifi_rust::kernels::cpu::{self, Isa};
use onnxifi_rust::kernels::gemm::{self, Epilogue, MatRef};
use onnxifi_rust::kernels::nchwc::{BlockedConv, Window};
use onnxifi_rust::kernels::pool::{self, Pool2dParams};
use onnxifi_rust::kernels::reference::Rng;
use onnxifi_rust::kernels::Activation;

/// One benchmark case: a name, its flop count and a closure running it once.
struct Case {
    name: String,
    flops: f64,
    run: Box<dyn FnMut() + Send>,
    pool: rayon::ThreadPool,
    samples: Vec<f64>,
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let want = std::env::var("KB_ISA").ok();
    let isas: Vec<Isa> = [Isa::Avx512, Isa::Avx2Fma, Isa::Portable]
        .into_iter()
        .filter(|&i| cpu::supported(i))
        .filter(|&i| want.as_deref().is_none_or(|w| cpu::name(i).starts_with(w)))
        .collect();
    let thread_counts: Vec<usize> = std::env::var("KB_THREADS")
        .unwrap_or_else(|_| "1,2".into())
        .split(',')
        .filter_map(|t| t.trim().parse().ok())
        .filter(|&t| t > 0)
        .collect();
    let mut rng = Rng::new(1);
    let mut cases = Vec::new();
    for &isa in &isas {
        for &threads in &thread_counts {
            for n in [256usize, 512, 1024] {
                let a = rng.vec(n * n);
                let b = rng.vec(n * n);
                let mut c = vec![0.0f32; n * n];
                cases.push(Case {
                    name: format!("sgemm {n}^3 {} t{threads}", cpu::name(isa)),
                    flops: 2.0 * (n * n * n) as f64,
                    run: Box::new(move || {
                        gemm::sgemm_with(
                            isa,
                            true,
                            1.0,
                            MatRef::row_major(&a, n, n),
                            MatRef::row_major(&b, n, n),
                            0.0,
                            &mut c,
                            n,
                            &Epilogue::NONE,
                        )
                    }),
                    pool: pool(threads),
                    samples: Vec::new(),
                });
            }
            if threads == 1 {
                // The micro-kernel alone: a packed A of `m` rows and a B read in place, both
                // in L1/L2, K = 256 (one block); the driver's overhead is one call per product.
                for m in [8usize, 64] {
                    let (n, k) = (32, 256);
                    let a = rng.vec(m * k);
                    let pa = gemm::PackedA::with_isa(isa, MatRef::row_major(&a, m, k));
                    let b = rng.vec(k * n);
                    let mut c = vec![0.0f32; m * n];
                    cases.push(Case {
                        name: format!("micro {m}x{n}x{k} {} t1", cpu::name(isa)),
                        flops: 2.0 * (64 * m * n * k) as f64,
                        run: Box::new(move || {
                            for _ in 0..64 {
                                gemm::sgemm_packed_a(
                                    1.0,
                                    &pa,
                                    MatRef::row_major(&b, k, n),
                                    0.0,
                                    &mut c,
                                    n,
                                    &Epilogue::NONE,
                                )
                            }
                        }),
                        pool: pool(1),
                        samples: Vec::new(),
                    });
                }
            }
            let p = Conv2dParams {
                batch: 1,
                in_channels: 64,
                in_h: 56,
                in_w: 56,
                out_channels: 64,
                kernel_h: 3,
                kernel_w: 3,
                stride_h: 1,
                stride_w: 1,
                pad_top: 1,
                pad_left: 1,
                pad_bottom: 1,
                pad_right: 1,
                dilation_h: 1,
                dilation_w: 1,
                groups: 1,
            };
            let name = format!("conv 64x56x56 3x3 {} t{threads}", cpu::name(isa));
            cases.push(conv_case(name, isa, p, threads, &mut rng));
        }
    }
    for v in specs("KB_CONV") {
        let (ic, hw, oc, k, s, pad, groups) = match v[..] {
            [ic, hw, oc, k, s, pad] => (ic, hw, oc, k, s, pad, 1),
            [ic, hw, oc, k, s, pad, g] => (ic, hw, oc, k, s, pad, g),
            _ => continue,
        };
        let p = Conv2dParams {
            batch: 1,
            in_channels: ic,
            in_h: hw,
            in_w: hw,
            out_channels: oc,
            kernel_h: k,
            kernel_w: k,
            stride_h: s,
            stride_w: s,
            pad_top: pad,
            pad_left: pad,
            pad_bottom: pad,
            pad_right: pad,
            dilation_h: 1,
            dilation_w: 1,
            groups,
        };
        for &isa in &isas {
            for &threads in &thread_counts {
                let name = format!(
                    "conv {ic}->{oc} {hw}² {k}x{k}/{s} g{groups} {} t{threads}",
                    cpu::name(isa)
                );
                cases.push(conv_case(name, isa, p, threads, &mut rng));
            }
        }
    }
    for v in specs("KB_NCHWC") {
        let (ic, hw, oc, k, s, pad) = match v[..] {
            [ic, hw, oc, s] => (ic, hw, oc, 1, s, 0),
            [ic, hw, oc, k, s, pad] => (ic, hw, oc, k, s, pad),
            _ => continue,
        };
        let win = Window {
            kernel: (k, k),
            stride: (s, s),
            pads: [pad; 4],
            dilation: (1, 1),
        };
        for &threads in &thread_counts {
            let name = format!("nchwc {ic}->{oc} {hw}² {k}x{k}/{s} t{threads}");
            cases.push(blocked_case(name, (ic, hw, oc), win, threads, &mut rng));
        }
    }
    for v in specs("KB_GEMM") {
        let [m, k, n] = v[..] else { continue };
        for &isa in &isas {
            for &threads in &thread_counts {
                let name = format!("gemm {m}x{k}x{n} packed B {} t{threads}", cpu::name(isa));
                cases.push(gemm_case(name, isa, (m, k, n), threads, false, &mut rng));
                if isa == Isa::Avx512 && cpu::bf16_dot() {
                    let name = format!("gemm {m}x{k}x{n} packed B bf16 t{threads}");
                    cases.push(gemm_case(name, isa, (m, k, n), threads, true, &mut rng));
                }
            }
        }
    }
    for v in specs("KB_PWDW") {
        let [ic, hw, mid, k, s] = v[..] else { continue };
        for &isa in &isas {
            for &threads in &thread_counts {
                for fused in [false, true] {
                    let how = if fused { "banded" } else { "apart" };
                    let name = format!(
                        "1x1+dw {ic}->{mid} {hw}² {k}x{k}/{s} {how} {} t{threads}",
                        cpu::name(isa)
                    );
                    let shape = (ic, hw, mid, k, s);
                    cases.push(pointwise_depthwise_case(
                        name, isa, shape, threads, fused, &mut rng,
                    ));
                }
            }
        }
    }
    for v in specs("KB_POOL") {
        let [c, hw, k, s, pad] = v[..] else { continue };
        for &threads in &thread_counts {
            let name = format!("maxpool {c}x{hw}² {k}x{k}/{s} pad {pad} t{threads}");
            cases.push(max_pool_case(name, (c, hw, k, s, pad), threads, &mut rng));
        }
    }
    if let Ok(filter) = std::env::var("KB_CASE") {
        cases.retain(|c| c.name.contains(&filter));
    }
    // Warm up, then interleave rounds; each sample runs the case for at least ~50 ms.
    for c in cases.iter_mut() {
        let Case { pool, run, .. } = c;
        pool.install(run);
    }
    let wall_clock = std::env::var_os("KB_WALL").is_some();
    for _ in 0..rounds {
        for c in cases.iter_mut() {
            let Case {
                pool,
                run,
                samples,
                flops,
                ..
            } = c;
            // Timed in on-CPU time of the pool's workers (robust to other processes on a shared
            // machine): seconds = (sum of the workers' CPU time) / threads, i.e. the wall time
            // if every worker had a core to itself (rayon's spinning counts, so it is
            // conservative). Falls back to wall time where schedstat is unavailable.
            let threads = pool.current_num_threads() as f64;
            let cpu = |pool: &rayon::ThreadPool| -> Option<u64> {
                pool.broadcast(|_| thread_cpu_ns()).into_iter().sum()
            };
            let c0 = cpu(pool);
            let t0 = Instant::now();
            let mut reps = 0usize;
            while reps == 0 || t0.elapsed().as_secs_f64() < 0.05 {
                pool.install(&mut *run);
                reps += 1;
            }
            let wall = t0.elapsed().as_secs_f64();
            let secs = match (c0, cpu(pool)) {
                (Some(a), Some(b)) if !wall_clock => (b - a) as f64 * 1e-9 / threads,
                _ => wall,
            };
            samples.push(*flops * reps as f64 / secs / 1e9);
        }
    }
    println!(
        "{:<36} {:>10} {:>10} {:>10}",
        "case", "median", "min", "max"
    );
    for c in cases.iter_mut() {
        c.samples.sort_by(f64::total_cmp);
        let med = c.samples[c.samples.len() / 2];
        println!(
            "{:<36} {:>7.1} GF {:>7.1} GF {:>7.1} GF",
            c.name,
            med,
            c.samples[0],
            c.samples[c.samples.len() - 1]
        );
    }
}

/// The `;`-separated lists of comma-separated sizes in the environment variable `var` (an
/// entry that does not parse is skipped by its caller's pattern).
fn specs(var: &str) -> Vec<Vec<usize>> {
    std::env::var(var)
        .unwrap_or_default()
        .split(';')
        .map(|spec| {
            spec.split(',')
                .filter_map(|x| x.trim().parse().ok())
                .collect()
        })
        .collect()
}

/// Copies of a layer's data a case cycles through (`KB_COLD`, default 1).
fn cold_copies() -> usize {
    std::env::var("KB_COLD")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// A pool of `threads` threads for one case.
fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

/// A convolution case: random input, weights and bias, Relu, on a pool of `threads` threads.
/// With `KB_COLD=n` the case holds `n` copies of the layer (their own weights, input and
/// output) and each run takes the next, so that weights and activations come from the outer
/// caches as they do inside a model.
fn conv_case(name: String, isa: Isa, p: Conv2dParams, threads: usize, rng: &mut Rng) -> Case {
    let copies = cold_copies();
    let mut layers: Vec<_> = (0..copies)
        .map(|_| {
            let x = rng.vec(p.input_len());
            let w = rng.vec(p.weights_len());
            let bias = rng.vec(p.out_channels);
            let conv = Conv2d::with_isa(isa, p, &w, Some(&bias)).unwrap();
            (conv, x, vec![0.0f32; p.output_len()])
        })
        .collect();
    let mut next = 0;
    Case {
        name,
        flops: 2.0 * (p.output_len() * p.weights_len() / p.out_channels) as f64,
        run: Box::new(move || {
            let (conv, x, out) = &mut layers[next];
            conv.run(x, out, Activation::Relu);
            next = (next + 1) % copies;
        }),
        pool: pool(threads),
        samples: Vec::new(),
    }
}

/// A convolution on channel-blocked tensors (`kernels::nchwc`, the process's ISA): `ic`
/// channels of `hw`² to `oc` over `win`, with a bias and Relu; `KB_COLD` as for
/// [`conv_case`].
fn blocked_case(
    name: String,
    (ic, hw, oc): (usize, usize, usize),
    win: Window,
    threads: usize,
    rng: &mut Rng,
) -> Case {
    let copies = cold_copies();
    let taps = win.kernel.0 * win.kernel.1;
    let mut layers: Vec<_> = (0..copies)
        .map(|_| {
            let w = rng.vec(ic * oc * taps);
            let conv = BlockedConv::new(ic, oc, win, &w, Some(&rng.vec(oc))).unwrap();
            let (oh, ow) = conv.out_hw((hw, hw)).unwrap();
            (conv, rng.vec(ic * hw * hw), vec![0.0f32; oc * oh * ow])
        })
        .collect();
    let flops = 2.0 * (ic * taps * layers[0].2.len()) as f64;
    let mut next = 0;
    Case {
        name,
        flops,
        run: Box::new(move || {
            let (conv, x, out) = &mut layers[next];
            conv.run(cpu::isa(), x, (1, hw, hw), None, out, Activation::Relu)
                .unwrap();
            next = (next + 1) % copies;
        }),
        pool: pool(threads),
        samples: Vec::new(),
    }
}

/// A max pooling of `c` planes of `hw`², `k×k` windows at stride `s` with `pad` on every side
/// (the process's ISA), counted as one "flop" per window tap; `KB_COLD` as for [`conv_case`].
fn max_pool_case(
    name: String,
    (c, hw, k, s, pad): (usize, usize, usize, usize, usize),
    threads: usize,
    rng: &mut Rng,
) -> Case {
    let out = (hw + 2 * pad - k) / s + 1;
    let p = Pool2dParams {
        batch: 1,
        channels: c,
        in_h: hw,
        in_w: hw,
        kernel_h: k,
        kernel_w: k,
        stride_h: s,
        stride_w: s,
        pad_top: pad,
        pad_left: pad,
        pad_bottom: pad,
        pad_right: pad,
        dilation_h: 1,
        dilation_w: 1,
        out_h: out,
        out_w: out,
    };
    let copies = cold_copies();
    let mut layers: Vec<_> = (0..copies)
        .map(|_| (rng.vec(c * hw * hw), vec![0.0f32; c * out * out]))
        .collect();
    let mut next = 0;
    Case {
        name,
        flops: (c * out * out * k * k) as f64,
        run: Box::new(move || {
            let (x, y) = &mut layers[next];
            pool::max_pool2d(&p, x, y);
            next = (next + 1) % copies;
        }),
        pool: pool(threads),
        samples: Vec::new(),
    }
}

/// A 1×1 convolution (`ic → mid` channels at `hw`², Relu6) and a depthwise `k×k` convolution
/// with stride `s` of its output (Relu6): as one banded kernel ([`PointwiseDepthwise`]) or as
/// the two convolutions through an intermediate tensor; `KB_COLD` as for [`conv_case`].
fn pointwise_depthwise_case(
    name: String,
    isa: Isa,
    (ic, hw, mid, k, s): (usize, usize, usize, usize, usize),
    threads: usize,
    fused: bool,
    rng: &mut Rng,
) -> Case {
    let p1 = Conv2dParams::pointwise(1, ic, (hw, hw), mid);
    let p2 = p1.depthwise_of_output((k, k), (s, s), [k / 2; 4], (1, 1));
    let relu6 = Activation::Clip { min: 0.0, max: 6.0 };
    let copies = cold_copies();
    let mut layers: Vec<_> = (0..copies)
        .map(|_| {
            let (w1, b1) = (rng.vec(p1.weights_len()), rng.vec(mid));
            let (w2, b2) = (rng.vec(p2.weights_len()), rng.vec(mid));
            let pw = Conv2d::with_isa(isa, p1, &w1, Some(&b1)).unwrap();
            let dw = Conv2d::with_isa(isa, p2, &w2, Some(&b2)).unwrap();
            let x = rng.vec(p1.input_len());
            let (mid, out) = (vec![0.0f32; p1.output_len()], vec![0.0f32; p2.output_len()]);
            let both = PointwiseDepthwise::new(pw.clone(), &w1, relu6, dw.clone()).unwrap();
            (both, (pw, dw), x, mid, out)
        })
        .collect();
    let mut next = 0;
    Case {
        name,
        flops: 2.0 * (p1.output_len() * ic + p2.output_len() * k * k) as f64,
        run: Box::new(move || {
            let (both, (pw, dw), x, mid, out) = &mut layers[next];
            if fused {
                both.run(x, out, relu6);
            } else {
                pw.run(x, mid, relu6);
                dw.run(mid, out, relu6);
            }
            next = (next + 1) % copies;
        }),
        pool: pool(threads),
        samples: Vec::new(),
    }
}

/// A fully connected layer: `A (m×k) · Bᵀ` with `B` (`n×k`, a `Gemm` with `transB`) prepacked
/// and a per-column bias, on a pool of `threads` threads; `KB_COLD` as for [`conv_case`].
/// With `bf16`, B is packed as bfloat16 pairs (`PackedB::bf16_pairs`).
fn gemm_case(
    name: String,
    isa: Isa,
    (m, k, n): (usize, usize, usize),
    threads: usize,
    bf16: bool,
    rng: &mut Rng,
) -> Case {
    let copies = cold_copies();
    let mut layers: Vec<_> = (0..copies)
        .map(|_| {
            let b = rng.vec(n * k);
            let bt = MatRef::row_major(&b, n, k).t();
            let packed = match bf16 {
                true => gemm::PackedB::bf16_pairs(bt).expect("AVX512_BF16"),
                false => gemm::PackedB::with_isa(isa, bt),
            };
            (packed, rng.vec(n), rng.vec(m * k), vec![0.0f32; m * n])
        })
        .collect();
    let mut next = 0;
    Case {
        name,
        flops: 2.0 * (m * n * k) as f64,
        run: Box::new(move || {
            let (packed, bias, a, c) = &mut layers[next];
            let ep = Epilogue {
                bias: gemm::Bias::PerCol(bias),
                ..Epilogue::NONE
            };
            gemm::sgemm_packed(1.0, MatRef::row_major(a, m, k), packed, 0.0, c, n, &ep);
            next = (next + 1) % copies;
        }),
        pool: pool(threads),
        samples: Vec::new(),
    }
}

/// Nanoseconds the calling thread has spent on a CPU (Linux `schedstat`), if available.
fn thread_cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}
