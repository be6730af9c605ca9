//! `onnxGetBackendInfo` values, encoded as the bytes the caller receives.
#![forbid(unsafe_code)]

use super::types::*;
use crate::backend;
use crate::error::{Error, Result, Status};
use crate::ir::import::{MAX_IR_VERSION, MAX_OPSET, MIN_IR_VERSION};

/// Extension functions this backend serves (listed in `ONNXIFI_BACKEND_EXTENSIONS`).
pub const EXTENSIONS: &str = "onnx_extension_function";

fn string(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

fn u64le(v: u64) -> Vec<u8> {
    v.to_ne_bytes().to_vec()
}

/// The value of one info query, as bytes (strings include their NUL terminator).
pub fn value(kind: onnxBackendInfo) -> Result<Vec<u8>> {
    let cpu = backend::cpu_info();
    Ok(match kind {
        ONNXIFI_BACKEND_ONNXIFI_VERSION => u64le(1 << 32),
        ONNXIFI_BACKEND_NAME => string("onnxifi-rust"),
        ONNXIFI_BACKEND_VENDOR => string("onnxifi-rust developers"),
        ONNXIFI_BACKEND_VERSION => string(env!("CARGO_PKG_VERSION")),
        ONNXIFI_BACKEND_EXTENSIONS => string(EXTENSIONS),
        ONNXIFI_BACKEND_DEVICE => string(&cpu.model),
        ONNXIFI_BACKEND_DEVICE_TYPE => u64le(ONNXIFI_DEVICE_TYPE_CPU),
        ONNXIFI_BACKEND_ONNX_IR_VERSION => string(
            &(MIN_IR_VERSION..=MAX_IR_VERSION)
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        ONNXIFI_BACKEND_OPSET_VERSION => string(&format!("ai.onnx:{MAX_OPSET}")),
        ONNXIFI_BACKEND_CAPABILITIES => u64le(
            ONNXIFI_CAPABILITY_THREAD_SAFE
                | ONNXIFI_CAPABILITY_SYMBOLIC_BATCH_SIZE
                | ONNXIFI_CAPABILITY_SYMBOLIC_SIZE_TENSORS,
        ),
        ONNXIFI_BACKEND_INIT_PROPERTIES => u64le(0),
        ONNXIFI_BACKEND_MEMORY_TYPES => u64le(ONNXIFI_MEMORY_TYPE_CPU),
        ONNXIFI_BACKEND_GRAPH_INIT_PROPERTIES => u64le(0),
        ONNXIFI_BACKEND_SYNCHRONIZATION_TYPES => u64le(ONNXIFI_SYNCHRONIZATION_EVENT),
        ONNXIFI_BACKEND_MEMORY_SIZE => u64le(cpu.memory_bytes),
        ONNXIFI_BACKEND_MAX_GRAPH_SIZE => u64le(cpu.memory_bytes),
        ONNXIFI_BACKEND_MAX_GRAPH_COUNT => u64le(u64::MAX),
        ONNXIFI_BACKEND_MACS_FP32 => u64le(backend::peak_fp32_macs()),
        ONNXIFI_BACKEND_MACS_FP16 => u64le(0),
        ONNXIFI_BACKEND_MEMORY_BANDWIDTH => u64le(backend::memory_bandwidth()),
        ONNXIFI_BACKEND_SIMD_RUST => string(crate::kernels::cpu::name(crate::kernels::cpu::isa())),
        ONNXIFI_BACKEND_OPERATORS_RUST => string(operator_table()),
        ONNXIFI_BACKEND_PROFILE_RUST => string(&profile_table()),
        ONNXIFI_BACKEND_NUM_THREADS_RUST => u64le(backend::thread_count() as u64),
        other => {
            return Err(Error::new(
                Status::UnsupportedAttribute,
                format!("backend info {other} does not apply to this backend"),
            ))
        }
    })
}

/// One line per registered operator: `domain:op_type oldest..newest types` (made once: the
/// registry is fixed, and the size-query protocol asks for a value twice).
fn operator_table() -> &'static str {
    static TABLE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TABLE.get_or_init(make_operator_table)
}

fn make_operator_table() -> String {
    let mut lines: Vec<String> = crate::ops::REGISTRY
        .iter()
        .map(|d| {
            let domain = if d.domain.is_empty() {
                "ai.onnx"
            } else {
                d.domain
            };
            let types: Vec<String> = d.types.iter().map(|t| t.name()).collect();
            format!(
                "{domain}:{} {}..{} {}",
                d.op_type,
                d.min_opset,
                d.newest,
                types.join(",")
            )
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

/// One line per profiled operator, slowest first: `op_type<TAB>calls<TAB>total_ns` (with
/// `ONNXIFI_RUST_PROFILE=shape` the first field also names the shapes).
fn profile_table() -> String {
    crate::exec::profile::report(false)
        .iter()
        .map(|r| format!("{}\t{}\t{}", r.op, r.calls, r.total.as_nanos()))
        .collect::<Vec<_>>()
        .join("\n")
}
