//! `onnxifi-run info`: every `onnxGetBackendInfo` value of every backend the library offers,
//! then this library's own items (SIMD kernels, default threads, operator table).
#![forbid(unsafe_code)]

use crate::capi::{Handle, Onnxifi};
use crate::{CliError, Flags};
use onnxifi_rust::ffi::types::*;
use std::path::PathBuf;

/// The text of `onnxifi-run info --help`.
pub const USAGE: &str = "\
usage: onnxifi-run info [--operators]

Prints every onnxGetBackendInfo value of each backend: name, vendor, version, extensions,
device and its type, ONNX IR and opset versions, capabilities, memory types, memory size, peak
MACs, bandwidth, and this library's SIMD kernels and default thread count. --operators adds
the operator table (one line per operator: domain:type, since-versions, types).";

/// How an info value is shown.
enum Kind {
    Text,
    Number,
    Bytes,
    Flags(&'static [(u64, &'static str)]),
}

/// The standard info items, in the header's order, then this library's.
const ITEMS: &[(i32, &str, Kind)] = &[
    (
        ONNXIFI_BACKEND_ONNXIFI_VERSION,
        "ONNXIFI version",
        Kind::Number,
    ),
    (ONNXIFI_BACKEND_NAME, "name", Kind::Text),
    (ONNXIFI_BACKEND_VENDOR, "vendor", Kind::Text),
    (ONNXIFI_BACKEND_VERSION, "version", Kind::Text),
    (ONNXIFI_BACKEND_EXTENSIONS, "extensions", Kind::Text),
    (ONNXIFI_BACKEND_DEVICE, "device", Kind::Text),
    (
        ONNXIFI_BACKEND_DEVICE_TYPE,
        "device type",
        Kind::Flags(&[
            (ONNXIFI_DEVICE_TYPE_NPU, "NPU"),
            (ONNXIFI_DEVICE_TYPE_DSP, "DSP"),
            (ONNXIFI_DEVICE_TYPE_GPU, "GPU"),
            (ONNXIFI_DEVICE_TYPE_CPU, "CPU"),
            (ONNXIFI_DEVICE_TYPE_FPGA, "FPGA"),
            (ONNXIFI_DEVICE_TYPE_HETEROGENEOUS, "HETEROGENEOUS"),
        ]),
    ),
    (
        ONNXIFI_BACKEND_ONNX_IR_VERSION,
        "ONNX IR versions",
        Kind::Text,
    ),
    (ONNXIFI_BACKEND_OPSET_VERSION, "opset versions", Kind::Text),
    (
        ONNXIFI_BACKEND_CAPABILITIES,
        "capabilities",
        Kind::Flags(&[
            (ONNXIFI_CAPABILITY_THREAD_SAFE, "THREAD_SAFE"),
            (
                ONNXIFI_CAPABILITY_SYMBOLIC_BATCH_SIZE,
                "SYMBOLIC_BATCH_SIZE",
            ),
            (
                ONNXIFI_CAPABILITY_SYMBOLIC_SIZE_TENSORS,
                "SYMBOLIC_SIZE_TENSORS",
            ),
            (
                ONNXIFI_CAPABILITY_VARIABLE_BATCH_SIZE,
                "VARIABLE_BATCH_SIZE",
            ),
            (
                ONNXIFI_CAPABILITY_VARIABLE_SIZE_OUTPUTS,
                "VARIABLE_SIZE_OUTPUTS",
            ),
            (ONNXIFI_CAPABILITY_HOT_PLUGGABLE, "HOT_PLUGGABLE"),
        ]),
    ),
    (
        ONNXIFI_BACKEND_INIT_PROPERTIES,
        "init properties",
        Kind::Number,
    ),
    (
        ONNXIFI_BACKEND_MEMORY_TYPES,
        "memory types",
        Kind::Flags(&[
            (ONNXIFI_MEMORY_TYPE_CPU, "CPU"),
            (ONNXIFI_MEMORY_TYPE_CUDA_BUFFER, "CUDA_BUFFER"),
            (ONNXIFI_MEMORY_TYPE_OPENCL_BUFFER, "OPENCL_BUFFER"),
            (
                ONNXIFI_MEMORY_TYPE_OPENGLES_TEXTURE_2D,
                "OPENGLES_TEXTURE_2D",
            ),
            (ONNXIFI_MEMORY_TYPE_D3D_RESOURCE, "D3D_RESOURCE"),
        ]),
    ),
    (
        ONNXIFI_BACKEND_GRAPH_INIT_PROPERTIES,
        "graph init properties",
        Kind::Number,
    ),
    (
        ONNXIFI_BACKEND_SYNCHRONIZATION_TYPES,
        "synchronization types",
        Kind::Flags(&[
            (ONNXIFI_SYNCHRONIZATION_EVENT, "EVENT"),
            (ONNXIFI_SYNCHRONIZATION_IMPLICIT, "IMPLICIT"),
        ]),
    ),
    (
        ONNXIFI_BACKEND_MEMORY_SIZE,
        "memory size (bytes)",
        Kind::Number,
    ),
    (
        ONNXIFI_BACKEND_MAX_GRAPH_SIZE,
        "max graph size (bytes)",
        Kind::Number,
    ),
    (
        ONNXIFI_BACKEND_MAX_GRAPH_COUNT,
        "max graph count",
        Kind::Number,
    ),
    (ONNXIFI_BACKEND_MACS_FP32, "peak fp32 MACs/s", Kind::Number),
    (ONNXIFI_BACKEND_MACS_FP16, "peak fp16 MACs/s", Kind::Number),
    (
        ONNXIFI_BACKEND_MEMORY_BANDWIDTH,
        "memory bandwidth (bytes/s)",
        Kind::Number,
    ),
    (
        ONNXIFI_BACKEND_CPU_MEMORY_READ_BANDWIDTH,
        "CPU memory read bandwidth",
        Kind::Number,
    ),
    (
        ONNXIFI_BACKEND_CPU_MEMORY_WRITE_BANDWIDTH,
        "CPU memory write bandwidth",
        Kind::Number,
    ),
    (ONNXIFI_BACKEND_PCI_BUS_ID, "PCI bus ID", Kind::Bytes),
    (ONNXIFI_BACKEND_PCI_DEVICE_ID, "PCI device ID", Kind::Bytes),
    (ONNXIFI_BACKEND_PCI_DOMAIN_ID, "PCI domain ID", Kind::Bytes),
    (ONNXIFI_BACKEND_SIMD_RUST, "SIMD kernels", Kind::Text),
    (
        ONNXIFI_BACKEND_NUM_THREADS_RUST,
        "default threads",
        Kind::Number,
    ),
];

/// `onnxifi-run info`.
pub fn cmd_info(lib: Option<PathBuf>, args: Vec<String>) -> Result<(), CliError> {
    let (mut operators, mut help) = (false, false);
    let positional = Flags::new("info", args).split(|flag, f| {
        match flag {
            "--help" | "-h" => help = true,
            "--operators" => operators = true,
            _ => return Err(f.unknown(flag, USAGE)),
        }
        Ok(())
    })?;
    if help {
        out!("{USAGE}");
        return Ok(());
    }
    crate::no_positional("info", &positional, USAGE)?;
    let api = Onnxifi::load(&crate::capi::library_path(lib)).map_err(CliError::failed)?;
    let ids = api.backend_ids().map_err(CliError::failed)?;
    out!("library: {}", api.path.display());
    let result = ids.iter().enumerate().try_for_each(|(i, &id)| {
        out!("backend {i}:");
        print_backend(&api, id, operators)
    });
    api.release_ids(ids);
    result.map_err(CliError::failed)
}

fn print_backend(api: &Onnxifi, id: Handle, operators: bool) -> Result<(), String> {
    for (info, label, kind) in ITEMS {
        let value = match kind {
            Kind::Text => api.info_string(id, *info),
            Kind::Number => api.info_u64(id, *info).map(|v| match *info {
                ONNXIFI_BACKEND_ONNXIFI_VERSION => format!("{}.{}", v >> 32, v & 0xFFFF_FFFF),
                _ if v == u64::MAX => "unlimited".into(),
                _ => v.to_string(),
            }),
            Kind::Flags(names) => api.info_u64(id, *info).map(|v| {
                // A 0 "bit" (CPU memory, event fences) is always there, as the header says.
                let set: Vec<&str> = names
                    .iter()
                    .filter(|(bit, _)| *bit == 0 || v & bit != 0)
                    .map(|(_, n)| *n)
                    .collect();
                format!(
                    "{} (0x{v:x})",
                    if set.is_empty() {
                        "none".into()
                    } else {
                        set.join(" | ")
                    }
                )
            }),
            Kind::Bytes => api
                .info_bytes(id, *info)
                .map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
        };
        // Items a backend does not have (a PCI ID on a CPU) answer with a status: shown as such.
        let shown = value.unwrap_or_else(|e| format!("({})", e.rsplit(": ").next().unwrap_or(&e)));
        out!("  {label:<28} {shown}");
    }
    if operators {
        let table = api.info_string(id, ONNXIFI_BACKEND_OPERATORS_RUST)?;
        out!("  operators ({}):", table.lines().count());
        for line in table.lines() {
            out!("    {line}");
        }
    }
    Ok(())
}
