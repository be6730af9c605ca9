//! The CPU backend: its identity and info values, capabilities, and the backend object with its
//! own named rayon pool.
#![forbid(unsafe_code)]

use crate::error::{Error, Result, Status};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Environment variable that sets the number of compute threads of each backend.
pub const THREADS_ENV: &str = "ONNXIFI_RUST_NUM_THREADS";

/// Upper bound on compute threads per backend, whatever the environment asks for.
pub const MAX_THREADS: usize = 1024;

/// Facts about the machine, read once.
#[derive(Clone, Debug)]
pub struct CpuInfo {
    /// The CPU model name (from /proc/cpuinfo), or the architecture.
    pub model: String,
    /// Logical cores available to this process.
    pub cores: usize,
    /// Physical memory in bytes (from /proc/meminfo), 0 if unknown.
    pub memory_bytes: u64,
    /// Clock in MHz (from /proc/cpuinfo), 0 if unknown.
    pub mhz: f64,
}

/// The machine's facts.
pub fn cpu_info() -> &'static CpuInfo {
    static INFO: OnceLock<CpuInfo> = OnceLock::new();
    INFO.get_or_init(|| {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let field = |key: &str| {
            cpuinfo.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == key).then(|| v.trim().to_string())
            })
        };
        let model = field("model name").unwrap_or_else(|| std::env::consts::ARCH.to_string());
        let mhz = field("cpu MHz").and_then(|v| v.parse().ok()).unwrap_or(0.0);
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024);
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        CpuInfo {
            model,
            cores,
            memory_bytes,
            mhz,
        }
    })
}

/// Peak fp32 multiply-accumulates per second: cores × clock × SIMD lanes × 2 FMA pipes.
pub fn peak_fp32_macs() -> u64 {
    let info = cpu_info();
    let lanes = match crate::kernels::cpu::isa() {
        crate::kernels::cpu::Isa::Avx512 => 16.0,
        crate::kernels::cpu::Isa::Avx2Fma => 8.0,
        crate::kernels::cpu::Isa::Portable => 4.0,
    };
    (info.cores as f64 * info.mhz * 1e6 * lanes * 2.0) as u64
}

/// Memory copy bandwidth in bytes per second, measured once (copying 64 MiB a few times).
pub fn memory_bandwidth() -> u64 {
    static BW: OnceLock<u64> = OnceLock::new();
    *BW.get_or_init(|| {
        let n = 8 << 20; // 8 Mi f64 = 64 MiB
        let src = vec![1.0f64; n];
        let mut dst = vec![0.0f64; n];
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            dst.copy_from_slice(&src);
            std::hint::black_box(&mut dst);
            best = best.min(t.elapsed().as_secs_f64());
        }
        // A copy reads and writes every byte.
        (2.0 * (n * 8) as f64 / best.max(1e-9)) as u64
    })
}

/// Optimization goal requested at `onnxInitBackend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Optimization {
    /// Throughput (the default).
    HighThroughput,
    /// Latency.
    LowLatency,
    /// Power.
    LowPower,
    /// Delay.
    LowDelay,
}

/// Settings of a backend, from its property list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// Optimization goal.
    pub optimization: Optimization,
    /// Log level asked for by property (1 debug … 4 error), see [`crate::log`].
    pub log_level: Option<u64>,
    /// Compute threads asked for by property (`None`: [`thread_count`]).
    pub threads: Option<usize>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            optimization: Optimization::HighThroughput,
            log_level: None,
            threads: None,
        }
    }
}

impl Settings {
    /// Parses `(key, value)` pairs of backend properties.
    pub fn from_properties(props: &[(u64, u64)]) -> Result<Settings> {
        let mut s = Settings::default();
        for &(key, value) in props {
            match key {
                1 => {
                    s.optimization = match value {
                        0 => Optimization::HighThroughput,
                        1 => Optimization::LowLatency,
                        2 => Optimization::LowPower,
                        3 => Optimization::LowDelay,
                        v => {
                            return Err(Error::new(
                                Status::InvalidProperty,
                                format!("optimization value {v} is not defined"),
                            ))
                        }
                    }
                }
                2 => {
                    if !(1..=4).contains(&value) {
                        return Err(Error::new(
                            Status::InvalidProperty,
                            format!("log level {value} is not defined"),
                        ));
                    }
                    s.log_level = Some(value);
                }
                NUM_THREADS_PROPERTY => {
                    if !(1..=MAX_THREADS as u64).contains(&value) {
                        return Err(Error::new(
                            Status::InvalidProperty,
                            format!("thread count {value} is not in 1..={MAX_THREADS}"),
                        ));
                    }
                    s.threads = Some(value as usize);
                }
                4 | 8 => {
                    return Err(Error::new(
                        Status::UnsupportedProperty,
                        "CUDA streams and OpenCL contexts do not apply to a CPU backend",
                    ))
                }
                k => {
                    return Err(Error::new(
                        Status::UnsupportedProperty,
                        format!("backend property {k:#x} is not supported"),
                    ))
                }
            }
        }
        Ok(s)
    }
}

/// The backend property key that sets the number of compute threads (the value of
/// `ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST` in the C header).
pub const NUM_THREADS_PROPERTY: u64 = 0x5255_5354_0001;

/// The most memory one model, plan or value may ask for, read once: the least of the machine's
/// physical memory, this process's cgroup memory limit (`memory.max`, cgroup v2, or
/// `memory.limit_in_bytes`, v1) and its address-space limit (`RLIMIT_AS`, from
/// `/proc/self/limits`); 1 TiB when none is known. Checked before allocating, so a model too
/// big for the process is refused with NO_SYSTEM_MEMORY instead of failing an allocation.
pub fn memory_limit() -> u64 {
    static LIMIT: OnceLock<u64> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cgroup = [
            "/sys/fs/cgroup/memory.max",
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
        ]
        .iter()
        .filter_map(|p| read(p).trim().parse::<u64>().ok())
        .min();
        let address_space = address_space_limit(&read("/proc/self/limits"));
        [
            Some(cpu_info().memory_bytes).filter(|&m| m > 0),
            cgroup,
            address_space,
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(1 << 40)
    })
}

/// The soft "Max address space" limit in a `/proc/self/limits` text, when one is set.
fn address_space_limit(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max address space"))?;
    line["Max address space".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Number of compute threads: `ONNXIFI_RUST_NUM_THREADS` if set to a positive number, else all
/// cores.
/// The environment is read once per process.
pub fn thread_count() -> usize {
    static COUNT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *COUNT.get_or_init(|| {
        std::env::var(THREADS_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n > 0)
            .unwrap_or(cpu_info().cores)
            .min(MAX_THREADS)
    })
}

/// An initialised backend: settings and the thread pool its graphs compute on.
pub struct Backend {
    /// Settings from `onnxInitBackend`.
    pub settings: Settings,
    /// The compute pool.
    pub pool: Arc<rayon::ThreadPool>,
}

impl Backend {
    /// Creates a backend with its own pool of threads: as many as the settings ask for, else
    /// [`thread_count`].
    pub fn new(settings: Settings) -> Result<Backend> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(settings.threads.unwrap_or_else(thread_count))
            .thread_name(|i| format!("onnxifi-rust-{i}"))
            // Runs catch their own panics; should one still escape, never abort the host.
            .panic_handler(|_| {})
            .build()
            .map_err(|e| {
                Error::new(
                    Status::NoSystemResources,
                    format!("cannot start compute threads: {e}"),
                )
            })?;
        if let Some(level) = settings.log_level {
            crate::log::note_backend_level(level);
        }
        crate::log::log(crate::log::Level::Info, || {
            format!(
                "backend made: {} compute threads, {} kernels",
                pool.current_num_threads(),
                crate::kernels::cpu::name(crate::kernels::cpu::isa())
            )
        });
        Ok(Backend {
            settings,
            pool: Arc::new(pool),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_space_limit_is_read_from_proc_limits() {
        let set = "Limit                     Soft Limit           Hard Limit           Units     \n\
                   Max stack size            8388608              unlimited            bytes     \n\
                   Max address space         4294967296           unlimited            bytes     \n";
        assert_eq!(address_space_limit(set), Some(4 << 30));
        let unset =
            "Max address space         unlimited            unlimited            bytes     \n";
        assert_eq!(address_space_limit(unset), None);
        assert_eq!(address_space_limit(""), None);
        assert!(memory_limit() >= 64 << 20);
    }

    #[test]
    fn properties_are_validated() {
        assert_eq!(Settings::from_properties(&[]).unwrap(), Settings::default());
        assert_eq!(
            Settings::from_properties(&[(1, 1)]).unwrap().optimization,
            Optimization::LowLatency
        );
        assert_eq!(
            Settings::from_properties(&[(1, 9)]).unwrap_err().status,
            Status::InvalidProperty
        );
        assert_eq!(
            Settings::from_properties(&[(2, 0)]).unwrap_err().status,
            Status::InvalidProperty
        );
        assert_eq!(
            Settings::from_properties(&[(0x1234, 0)])
                .unwrap_err()
                .status,
            Status::UnsupportedProperty
        );
        assert_eq!(
            Settings::from_properties(&[(4, 0)]).unwrap_err().status,
            Status::UnsupportedProperty
        );
        assert_eq!(
            Settings::from_properties(&[(NUM_THREADS_PROPERTY, 3)])
                .unwrap()
                .threads,
            Some(3)
        );
        for bad in [0, MAX_THREADS as u64 + 1] {
            assert_eq!(
                Settings::from_properties(&[(NUM_THREADS_PROPERTY, bad)])
                    .unwrap_err()
                    .status,
                Status::InvalidProperty
            );
        }
    }

    #[test]
    fn machine_facts_are_plausible() {
        let i = cpu_info();
        assert!(i.cores >= 1);
        assert!(!i.model.is_empty());
        if cfg!(target_os = "linux") {
            assert!(i.memory_bytes > 64 << 20);
        }
    }
}
