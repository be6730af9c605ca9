//! `onnxifi-run info`: every `onnxGetBackendInfo` value of every backend the library offers,
//! then this library's own items (SIMD kernels, default threads, operator table).

use crate::capi::{Handle, Onnxifi};
use crate::{CliError, Flags};
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
    (0, "ONNXIFI version", Kind::Number),
    (1, "name", Kind::Text),
    (2, "vendor", Kind::Text),
    (3, "version", Kind::Text),
    (4, "extensions", Kind::Text),
    (5, "device", Kind::Text),
    (
        6,
        "device type",
        Kind::Flags(&[
            (1, "NPU"),
            (2, "DSP"),
            (4, "GPU"),
            (8, "CPU"),
            (16, "FPGA"),
            (32, "HETEROGENEOUS"),
        ]),
    ),
    (7, "ONNX IR versions", Kind::Text),
    (8, "opset versions", Kind::Text),
    (
        10,
        "capabilities",
        Kind::Flags(&[
            (1, "THREAD_SAFE"),
            (2, "SYMBOLIC_BATCH_SIZE"),
            (4, "SYMBOLIC_SIZE_TENSORS"),
            (8, "VARIABLE_BATCH_SIZE"),
            (16, "VARIABLE_SIZE_OUTPUTS"),
            (32, "HOT_PLUGGABLE"),
        ]),
    ),
    (11, "init properties", Kind::Number),
    (
        12,
        "memory types",
        Kind::Flags(&[
            (0, "CPU"),
            (1, "CUDA_BUFFER"),
            (2, "OPENCL_BUFFER"),
            (4, "OPENGLES_TEXTURE_2D"),
            (8, "D3D_RESOURCE"),
        ]),
    ),
    (13, "graph init properties", Kind::Number),
    (
        14,
        "synchronization types",
        Kind::Flags(&[(0, "EVENT"), (2, "IMPLICIT")]),
    ),
    (20, "memory size (bytes)", Kind::Number),
    (21, "max graph size (bytes)", Kind::Number),
    (22, "max graph count", Kind::Number),
    (30, "peak fp32 MACs/s", Kind::Number),
    (31, "peak fp16 MACs/s", Kind::Number),
    (35, "memory bandwidth (bytes/s)", Kind::Number),
    (36, "CPU memory read bandwidth", Kind::Number),
    (37, "CPU memory write bandwidth", Kind::Number),
    (40, "PCI bus ID", Kind::Bytes),
    (41, "PCI device ID", Kind::Bytes),
    (42, "PCI domain ID", Kind::Bytes),
    (0x5253_0001, "SIMD kernels", Kind::Text),
    (0x5253_0004, "default threads", Kind::Number),
];

/// `ONNXIFI_BACKEND_OPERATORS_RUST`.
const OPERATORS: i32 = 0x5253_0002;

/// `onnxifi-run info`.
pub fn cmd_info(lib: Option<PathBuf>, args: Vec<String>) -> Result<(), CliError> {
    let mut f = Flags::new("info", args);
    let mut operators = false;
    while let Some(a) = f.next_arg() {
        match a.as_str() {
            "--help" | "-h" => {
                out!("{USAGE}");
                return Ok(());
            }
            "--operators" => operators = true,
            _ => {
                return Err(CliError::usage(format!(
                    "info: unexpected argument {a:?}\n{USAGE}"
                )))
            }
        }
    }
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
                0 => format!("{}.{}", v >> 32, v & 0xFFFF_FFFF),
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
        let table = api.info_string(id, OPERATORS)?;
        out!("  operators ({}):", table.lines().count());
        for line in table.lines() {
            out!("    {line}");
        }
    }
    Ok(())
}
