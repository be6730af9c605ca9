//! `onnxifi-run run`: one model through the backend's C ABI, its outputs summarised, saved as
//! `.npy` or compared with ONNX test data.
#![forbid(unsafe_code)]

use crate::capi::Onnxifi;
use crate::io_plan::{self, InputSources};
use crate::model::{display_name, Format};
use crate::tensor::{self, HostTensor};
use crate::{CliError, Flags};
use onnxifi_rust::ffi::types::{ONNXIFI_BACKEND_DEVICE, ONNXIFI_BACKEND_NAME};
use std::path::PathBuf;
use std::time::Duration;

/// The text of `onnxifi-run run --help`.
pub const USAGE: &str = "\
usage: onnxifi-run run MODEL [options]

Runs MODEL (binary .onnx or ONNX text) on the backend through its ONNXIFI C API and prints
each output's shape, type, first values, min, max and mean, then the latency.

options:
  --input NAME=FILE   values of input NAME: .npy, .pb (ONNX TensorProto) or raw little-endian
                      bytes; --input FILE.npz gives every array of the archive by name
  --seed N            random inputs from seed N (floats in [-1, 1), integers that index
                      their Gather tables, small counts); without it, a fixed sequence
  --dim SYMBOL=N      the value of a symbolic input dimension (default 1)
  --expect DIR        ONNX test data (DIR/input_N.pb feed the inputs not given otherwise,
                      DIR/output_N.pb are compared with the outputs; exit 1 on a mismatch)
  --rtol R, --atol A  tolerances of --expect (default 1e-3 and 1e-7, as ONNX's tests)
  --save DIR          write every output to DIR/NAME.npy
  --threads N         compute threads of the backend (default: $ONNXIFI_RUST_NUM_THREADS, or
                      every core)
  --repeat N          runs to time (default 10)
  --from text|onnx    the model's format when its extension does not say
Integer inputs that a node reads as a shape, axes or bounds are not generated: give them with
--input. Output shapes come from the library's shape inference.";

/// Arguments of `run`.
struct RunArgs {
    model: String,
    from: Option<Format>,
    sources: InputSources,
    repeat: usize,
    threads: Option<usize>,
    save: Option<PathBuf>,
    rtol: f64,
    atol: f64,
}

fn parse(args: Vec<String>) -> Result<Option<RunArgs>, CliError> {
    let mut a = RunArgs {
        model: String::new(),
        from: None,
        sources: InputSources::new(),
        repeat: 10,
        threads: None,
        save: None,
        rtol: 1e-3,
        atol: 1e-7,
    };
    let mut help = false;
    let positional = Flags::new("run", args).split(|flag, f| {
        if a.sources.take_flag(f, flag)? {
            return Ok(());
        }
        match flag {
            "--help" | "-h" => help = true,
            "--expect" => a.sources.expect = Some(PathBuf::from(f.value(flag)?)),
            "--save" => a.save = Some(PathBuf::from(f.value(flag)?)),
            "--threads" => a.threads = Some(f.positive(flag)?),
            "--repeat" => a.repeat = f.positive(flag)?,
            "--rtol" => a.rtol = f.real(flag)?,
            "--atol" => a.atol = f.real(flag)?,
            "--from" => a.from = Some(Format::from_flag(flag, &f.value(flag)?)?),
            _ => return Err(f.unknown(flag, USAGE)),
        }
        Ok(())
    })?;
    if help {
        return Ok(None);
    }
    a.model = crate::one_model("run", positional, USAGE)?;
    Ok(Some(a))
}

/// `onnxifi-run run`.
pub fn cmd_run(lib: Option<PathBuf>, args: Vec<String>) -> Result<(), CliError> {
    let Some(args) = parse(args)? else {
        out!("{USAGE}");
        return Ok(());
    };
    let mut p = io_plan::prepare(&args.model, args.from, &args.sources)?;
    let api = Onnxifi::load(&crate::capi::library_path(lib)).map_err(CliError::failed)?;
    let ids = api.backend_ids().map_err(CliError::failed)?;
    let result = run_with(&api, ids[0], &args, &mut p);
    api.release_ids(ids);
    let (outputs, times) = result.map_err(CliError::failed)?;

    for t in &p.inputs {
        out!(
            "input  {} {:?} {}",
            t.name_str(),
            t.shape,
            tensor::elem_name(t.elem)
        );
    }
    for t in &outputs {
        out!("output {} {}", t.name_str(), t.summary(10));
    }
    let mut sorted = times;
    sorted.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    out!(
        "latency over {} run(s): min {:.3} ms, median {:.3} ms",
        sorted.len(),
        ms(sorted[0]),
        ms(sorted[sorted.len() / 2])
    );
    if let Some(dir) = &args.save {
        save(dir, &outputs)?;
    }
    if let Some(dir) = &args.sources.expect {
        expect(dir, &outputs, args.rtol, args.atol)?;
    }
    Ok(())
}

/// Backend → graph → outputs sized → bound → `repeat` runs → released.
fn run_with(
    api: &Onnxifi,
    id: crate::capi::Handle,
    args: &RunArgs,
    p: &mut io_plan::Prepared,
) -> Result<(Vec<HostTensor>, Vec<Duration>), String> {
    out!("library: {}", api.path.display());
    out!(
        "backend: {} on {}",
        api.info_string(id, ONNXIFI_BACKEND_NAME)?,
        api.info_string(id, ONNXIFI_BACKEND_DEVICE)?
    );
    out!("model:   {}", display_name(&args.model));
    let backend = api.init_backend(id, args.threads)?;
    let result = (|| {
        let graph = api.init_graph(backend, &p.bytes)?;
        let r = (|| {
            let mut outputs =
                io_plan::make_outputs(api, graph, &mut p.inputs, &p.declared_in, &p.declared_out)?;
            api.bind(graph, &mut p.inputs, &mut outputs)?;
            let times = (0..args.repeat)
                .map(|_| api.run_once(backend, graph))
                .collect::<Result<Vec<_>, _>>()?;
            Ok((outputs, times))
        })();
        api.release_graph(graph);
        r
    })();
    api.release_backend(backend);
    result
}

/// Writes every output to `dir/NAME.npy` (characters other than letters, digits, `-`, `_`
/// and `.` in names become `_`).
fn save(dir: &PathBuf, outputs: &[HostTensor]) -> Result<(), CliError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::failed(format!("cannot create {}: {e}", dir.display())))?;
    for t in outputs {
        let file: String = t
            .name_str()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("{file}.npy"));
        let bytes = tensor::npy_write(t).map_err(CliError::failed)?;
        std::fs::write(&path, bytes)
            .map_err(|e| CliError::failed(format!("cannot write {}: {e}", path.display())))?;
        out!("saved  {} -> {}", t.name_str(), path.display());
    }
    Ok(())
}

/// Compares the outputs with `dir/output_N.pb`; a mismatch or a missing file fails.
fn expect(
    dir: &std::path::Path,
    outputs: &[HostTensor],
    rtol: f64,
    atol: f64,
) -> Result<(), CliError> {
    let mut failed = 0;
    for (i, t) in outputs.iter().enumerate() {
        let path = dir.join(format!("output_{i}.pb"));
        let bytes = std::fs::read(&path)
            .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?;
        let (_, want) = tensor::pb_read(&bytes)
            .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
        match tensor::compare(t, &want, rtol, atol) {
            Ok(diff) => out!(
                "expect {}: ok (max abs difference {diff:.3e})",
                t.name_str()
            ),
            Err(e) => {
                failed += 1;
                out!("expect {}: MISMATCH: {e}", t.name_str());
            }
        }
    }
    if failed > 0 {
        return Err(CliError::failed(format!(
            "{failed} of {} output(s) differ from {}",
            outputs.len(),
            dir.display()
        )));
    }
    Ok(())
}
