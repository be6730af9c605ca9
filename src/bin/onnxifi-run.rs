//! `onnxifi-run`: drives `libonnxifi-rust.so` through its ONNXIFI C ABI, the way a framework
//! does (dlopen + the documented call sequence), to run a model from the command line; also
//! checks models against the ONNX IR specification and converts between the binary protobuf
//! form and the ONNX text syntax.
//!
//! ```text
//! onnxifi-run [--lib PATH] run MODEL [--from FMT] [--input NAME=FILE.bin]... [--dim SYMBOL=N]... [--repeat N]
//! onnxifi-run check MODEL [--from FMT] [--pedantic]
//! onnxifi-run convert IN OUT [--from FMT] [--to FMT]
//! ```
//!
//! The library is found at `--lib PATH`, else env `ONNXIFI_RUST_LIB`, else
//! `libonnxifi_rust.so` / `libonnxifi-rust.so` next to the executable. Inputs without `--input`
//! get the deterministic values of `examples/make_small_cnn.py`
//! (`x[i] = ((i*37+11) % 101)/50 - 1`). Symbolic dimensions default to 1.
//!
//! A model is binary (`.onnx`) or text (`.onnxtxt`, `.txt`); `-` is stdin (or stdout for
//! `convert`'s OUT). Without `--from`, the format of a model read comes from its extension, else
//! from its content (see [`sniff`]). Exit status: 0 success (for `check`: the model is valid),
//! 1 failure (for `check`: the model is invalid, undecodable or unparseable), 2 usage errors
//! and unreadable input.
//! Argument parsing is dependency-free on purpose; each subcommand has its own function.

use onnxifi_rust::check::spec::{check_model_with, Level, Options, RULES};
use onnxifi_rust::model::onnx;
use onnxifi_rust::text;
use prost::Message;
use std::ffi::{c_char, c_void, CString};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// The text of `onnxifi-run help`.
const USAGE: &str = "\
usage: onnxifi-run [--lib PATH] <command> [args]

commands:
  run MODEL [--from FMT] [--input NAME=FILE.bin]... [--dim SYMBOL=N]... [--repeat N]
      run MODEL on the ONNXIFI backend; print each output's name, shape and first values,
      and the latency (min/median) over N runs (default 10)
  check MODEL [--from FMT] [--pedantic]
      check MODEL against every MUST rule of the ONNX IR specification and every operator's
      signature; print each violation as `[rule-id] location: message`, then every reason
      this backend would refuse the model as `[backend] STATUS: message`, and a summary.
      Exit 0 when valid, 1 when not (or when MODEL does not decode or parse), whatever the
      backend's verdict. --pedantic adds the pedantic rules
  convert IN OUT [--from FMT] [--to FMT]
      convert a model between binary protobuf and the ONNX text syntax
  help
      show this text

FMT is `onnx` (binary protobuf) or `text` (ONNX text syntax). Formats come from extensions
(.onnx binary; .onnxtxt, .txt text); a model read with another extension, or from `-` (stdin),
is sniffed: UTF-8 without control characters is text, anything else binary. Writing to `-`
(stdout) or to another extension needs --to.

The library is --lib PATH, else $ONNXIFI_RUST_LIB, else libonnxifi_rust.so next to this
executable. Input files hold raw little-endian elements of the input's type.
Exit status: 0 success, 1 failure (check: invalid model), 2 usage error or unreadable input.";

/// Runs the command line; the exit status is described in [`CliError`].
fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match dispatch(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("onnxifi-run: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}

/// Why a command stopped, and the exit status that tells the caller.
#[derive(Debug)]
struct CliError {
    /// 1: the command failed (or, for `check`, the model is invalid); 2: usage error or
    /// unreadable input.
    code: u8,
    /// What to print after `onnxifi-run: `.
    message: String,
}

impl CliError {
    /// A usage error (bad arguments) or input that cannot be read: exit status 2.
    fn usage(message: impl Into<String>) -> Self {
        CliError {
            code: 2,
            message: message.into(),
        }
    }

    /// A failure of the command itself: exit status 1.
    fn failed(message: impl Into<String>) -> Self {
        CliError {
            code: 1,
            message: message.into(),
        }
    }
}

impl From<String> for CliError {
    fn from(message: String) -> Self {
        CliError::failed(message)
    }
}

impl From<&str> for CliError {
    fn from(message: &str) -> Self {
        CliError::failed(message)
    }
}

/// Splits off the global options and runs the subcommand; returns the exit status.
fn dispatch(mut args: Vec<String>) -> Result<ExitCode, CliError> {
    let mut lib = None;
    while let Some(first) = args.first() {
        match first.as_str() {
            "--lib" => {
                args.remove(0);
                if args.is_empty() {
                    return Err(CliError::usage("--lib needs a path"));
                }
                lib = Some(PathBuf::from(args.remove(0)));
            }
            s if s.starts_with("--lib=") => {
                lib = Some(PathBuf::from(&s["--lib=".len()..]));
                args.remove(0);
            }
            _ => break,
        }
    }
    if args.is_empty() {
        return Err(CliError::usage(format!("no command\n{USAGE}")));
    }
    let command = args.remove(0);
    match command.as_str() {
        "run" => cmd_run(lib, args).map(|()| ExitCode::SUCCESS),
        "check" => cmd_check(args),
        "convert" => cmd_convert(args).map(|()| ExitCode::SUCCESS),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        other => Err(CliError::usage(format!(
            "unknown command {other:?}\n{USAGE}"
        ))),
    }
}

// ----------------------------------------------------------------------------- model files

/// The two ways a model is written down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// A serialized `ModelProto` (`.onnx`).
    Onnx,
    /// The ONNX text syntax (`.onnxtxt`, `.txt`).
    Text,
}

impl Format {
    /// The value of `--from`/`--to`: `onnx` or `text`.
    fn from_flag(flag: &str, value: &str) -> Result<Format, CliError> {
        match value {
            "onnx" => Ok(Format::Onnx),
            "text" => Ok(Format::Text),
            _ => Err(CliError::usage(format!(
                "{flag} {value:?}: expected `text` or `onnx`"
            ))),
        }
    }

    /// The format a path's extension names, if it names one (`-` names none).
    fn from_extension(path: &str) -> Option<Format> {
        let ext = Path::new(path).extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "onnx" => Some(Format::Onnx),
            "onnxtxt" | "txt" => Some(Format::Text),
            _ => None,
        }
    }
}

/// The format of a model's content: text when it is UTF-8 (a byte-order mark allowed) without
/// control characters other than tab, line feed, carriage return and form feed; binary
/// otherwise. A serialized model with a graph always holds such bytes (field tags 1 to 3 and
/// length prefixes below 32), while text never does; trying a protobuf decode first would not
/// do, as the decoder skips unknown fields and can accept text.
fn sniff(bytes: &[u8]) -> Format {
    match std::str::from_utf8(bytes) {
        Ok(s)
            if !s.is_empty()
                && !s
                    .chars()
                    .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r' | '\x0c')) =>
        {
            Format::Text
        }
        _ => Format::Onnx,
    }
}

/// What is shown for a model path (`<stdin>` for `-`).
fn display_name(path: &str) -> &str {
    if path == "-" {
        "<stdin>"
    } else {
        path
    }
}

/// Reads a whole file, or stdin for `-`; failures are exit status 2.
fn read_input(path: &str) -> Result<Vec<u8>, CliError> {
    let mut bytes = Vec::new();
    if path == "-" {
        std::io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .map_err(|e| CliError::usage(format!("cannot read stdin: {e}")))?;
    } else {
        bytes =
            std::fs::read(path).map_err(|e| CliError::usage(format!("cannot read {path}: {e}")))?;
    }
    Ok(bytes)
}

/// A model read from a file or stdin.
struct LoadedModel {
    /// The decoded (or parsed) model.
    model: onnx::ModelProto,
    /// The serialized model: the bytes read for binary input, the encoded parse for text.
    bytes: Vec<u8>,
    /// The format it was read in.
    format: Format,
}

/// Reads and decodes (or parses) a model. The format is `from`, else the extension's, else
/// the content's ([`sniff`]). Unreadable input is exit status 2; input that does not decode
/// or parse is 1, with the parse error's line, column and caret.
fn load_model(path: &str, from: Option<Format>) -> Result<LoadedModel, CliError> {
    let bytes = read_input(path)?;
    let format = from
        .or_else(|| Format::from_extension(path))
        .unwrap_or_else(|| sniff(&bytes));
    let name = display_name(path);
    match format {
        Format::Onnx => {
            let model = onnxifi_rust::model::decode(&bytes)
                .map_err(|e| CliError::failed(format!("{name}: {}", e.message)))?;
            Ok(LoadedModel {
                model,
                bytes,
                format,
            })
        }
        Format::Text => {
            let src = std::str::from_utf8(&bytes).map_err(|e| {
                CliError::failed(format!(
                    "{name}: not ONNX text: invalid UTF-8 at byte {}",
                    e.valid_up_to()
                ))
            })?;
            let src = src.strip_prefix('\u{feff}').unwrap_or(src);
            let model =
                text::parse_model(src).map_err(|e| CliError::failed(format!("{name}: {e}")))?;
            Ok(LoadedModel {
                bytes: model.encode_to_vec(),
                model,
                format,
            })
        }
    }
}

/// Whether two models are the same message (field-wise, or by their encodings, which also
/// settles NaN == NaN).
fn same_model(a: &onnx::ModelProto, b: &onnx::ModelProto) -> bool {
    a == b || a.encode_to_vec() == b.encode_to_vec()
}

/// Splits `--flag=value` / `--flag value` arguments: calls `on_flag(flag, value_source)` for
/// each argument starting with `--`, and collects the others as positionals.
fn split_args(
    args: Vec<String>,
    command: &str,
    mut on_flag: impl FnMut(&str, &mut dyn FnMut() -> Result<String, CliError>) -> Result<(), CliError>,
) -> Result<Vec<String>, CliError> {
    let mut positional = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if a == "-" || !a.starts_with('-') {
            positional.push(a);
            continue;
        }
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f.to_string(), Some(v.to_string())),
            None => (a.clone(), None),
        };
        let mut inline = inline;
        let mut value = || -> Result<String, CliError> {
            inline
                .take()
                .or_else(|| it.next())
                .ok_or_else(|| CliError::usage(format!("{command}: {flag} needs a value")))
        };
        on_flag(&flag, &mut value)?;
    }
    Ok(positional)
}

// ----------------------------------------------------------------------------- check

/// `onnxifi-run check`: prints every violation of the IR specification and a summary; the exit
/// status is 0 for a valid model and 1 for an invalid one.
fn cmd_check(args: Vec<String>) -> Result<ExitCode, CliError> {
    let mut from = None;
    let mut pedantic = false;
    let positional = split_args(args, "check", |flag, value| {
        match flag {
            "--from" => from = Some(Format::from_flag(flag, &value()?)?),
            "--pedantic" => pedantic = true,
            _ => return Err(CliError::usage(format!("check: unknown option {flag:?}"))),
        }
        Ok(())
    })?;
    let [path] = positional.as_slice() else {
        return Err(CliError::usage(format!(
            "check: expected one MODEL, got {}\nusage: onnxifi-run check MODEL [--from text|onnx] [--pedantic]",
            positional.len()
        )));
    };
    let name = display_name(path);
    let loaded = match load_model(path, from) {
        Ok(m) => m,
        Err(e) if e.code == 1 => {
            // Not decodable or not parseable: the model is invalid; say why on stdout.
            println!("{}", e.message);
            println!("{name}: invalid: the model could not be read as ONNX");
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => return Err(e),
    };
    let opts = Options {
        pedantic,
        ..Options::default()
    };
    let rules = RULES
        .iter()
        .filter(|r| pedantic || r.level == Level::Required)
        .count();
    let violations = check_model_with(&loaded.model, &opts);
    for v in &violations {
        println!("{v}");
    }
    // The backend's verdict, in the same listing: every node it would refuse, and why.
    let refusals = onnxifi_rust::graph::refusals(&loaded.model);
    for e in &refusals {
        // An invalid model's refusal repeats the violations listed above.
        if !(violations.is_empty() || e.status != onnxifi_rust::error::Status::InvalidModel) {
            continue;
        }
        println!("[backend] {}: {}", e.status, e.message);
    }
    let backend = if refusals.is_empty() {
        "this backend runs it".to_string()
    } else {
        format!(
            "this backend refuses it ({} problem(s), first {})",
            refusals.len(),
            refusals[0].status
        )
    };
    let format = match loaded.format {
        Format::Onnx => "binary",
        Format::Text => "text",
    };
    if violations.is_empty() {
        println!("{name}: valid ({format} model; {rules} rules of the ONNX IR specification checked, no violations); {backend}");
        Ok(ExitCode::SUCCESS)
    } else {
        let mut broken: Vec<&str> = violations.iter().map(|v| v.rule.id()).collect();
        broken.sort_unstable();
        broken.dedup();
        println!(
            "{name}: invalid: {} violation(s) of {} rule(s) of the ONNX IR specification ({}); {backend}",
            violations.len(),
            broken.len(),
            broken.join(", ")
        );
        Ok(ExitCode::FAILURE)
    }
}

// ----------------------------------------------------------------------------- convert

/// `onnxifi-run convert`: reads IN in one format and writes OUT in the other (or the same).
///
/// Text output is parsed back before it is written: text that does not parse, or that parses
/// to something other than the model's normal form (`text::normalize_model`), is an error;
/// a model that loses fields the syntax cannot hold gets a warning.
fn cmd_convert(args: Vec<String>) -> Result<(), CliError> {
    let mut from = None;
    let mut to = None;
    let positional = split_args(args, "convert", |flag, value| {
        match flag {
            "--from" => from = Some(Format::from_flag(flag, &value()?)?),
            "--to" => to = Some(Format::from_flag(flag, &value()?)?),
            _ => return Err(CliError::usage(format!("convert: unknown option {flag:?}"))),
        }
        Ok(())
    })?;
    let [input, output] = positional.as_slice() else {
        return Err(CliError::usage(format!(
            "convert: expected IN and OUT, got {} argument(s)\nusage: onnxifi-run convert IN OUT [--from text|onnx] [--to text|onnx]",
            positional.len()
        )));
    };
    let to =
        match to.or_else(|| Format::from_extension(output)) {
            Some(f) => f,
            None if output == "-" => return Err(CliError::usage(
                "convert: cannot tell which format to write to stdout: add --to text or --to onnx",
            )),
            None => {
                return Err(CliError::usage(format!(
                    "convert: cannot tell the format of {output:?} from its extension \
                 (.onnx is binary, .onnxtxt and .txt are text): add --to text or --to onnx"
                )))
            }
        };
    let loaded = load_model(input, from)?;
    let out = match to {
        Format::Onnx => loaded.model.encode_to_vec(),
        Format::Text => {
            let printed = text::print_model(&loaded.model);
            let back = text::parse_model(&printed).map_err(|e| {
                CliError::failed(format!(
                    "{}: the model holds something the text syntax cannot spell \
                     (names that are not identifiers, unknown element types, ...); \
                     its text does not parse back:\n{e}",
                    display_name(input)
                ))
            })?;
            if !same_model(&back, &loaded.model) {
                if !same_model(&back, &text::normalize_model(&loaded.model)) {
                    return Err(CliError::failed(format!(
                        "{}: the text printed for this model reads back as a different model",
                        display_name(input)
                    )));
                }
                eprintln!(
                    "onnxifi-run: warning: {}: the text syntax cannot hold everything in this model \
                     (doc strings below the model, metadata below the model, raw tensor encodings, ...); \
                     those parts are dropped or rewritten",
                    display_name(input)
                );
            }
            printed.into_bytes()
        }
    };
    if output == "-" {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(&out)
            .and_then(|()| stdout.flush())
            .map_err(|e| CliError::failed(format!("cannot write stdout: {e}")))?;
    } else {
        std::fs::write(output, &out)
            .map_err(|e| CliError::failed(format!("cannot write {output}: {e}")))?;
    }
    Ok(())
}

/// Arguments of `run`.
struct RunArgs {
    /// The model path (`-`: stdin).
    model: String,
    /// `--from`: the model's format, when not guessed.
    from: Option<Format>,
    /// `--input NAME=FILE`.
    inputs: Vec<(String, PathBuf)>,
    /// `--dim SYMBOL=N`.
    dims: Vec<(String, u64)>,
    /// `--repeat N`.
    repeat: usize,
}

/// Parses the arguments of `run`.
fn parse_run(args: Vec<String>) -> Result<RunArgs, String> {
    let mut model = None;
    let mut from = None;
    let mut inputs = Vec::new();
    let mut dims = Vec::new();
    let mut repeat = 10usize;
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (a.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            "--input" => {
                let v = value("--input")?;
                let (n, f) = v
                    .split_once('=')
                    .ok_or_else(|| format!("--input {v:?}: expected NAME=FILE"))?;
                inputs.push((n.to_string(), PathBuf::from(f)));
            }
            "--dim" => {
                let v = value("--dim")?;
                let (n, d) = v
                    .split_once('=')
                    .ok_or_else(|| format!("--dim {v:?}: expected SYMBOL=N"))?;
                let d: u64 = d.parse().map_err(|_| format!("--dim {v:?}: bad number"))?;
                if d == 0 {
                    return Err(format!("--dim {v:?}: must be positive"));
                }
                dims.push((n.to_string(), d));
            }
            "--from" => {
                let v = value("--from")?;
                from = Some(Format::from_flag("--from", &v).map_err(|e| e.message)?);
            }
            "--repeat" => {
                let v = value("--repeat")?;
                repeat = v
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| format!("--repeat {v:?}: expected a positive number"))?;
            }
            f if f.starts_with('-') && f != "-" => {
                return Err(format!("run: unknown option {f:?}"))
            }
            _ if model.is_none() => model = Some(a),
            _ => return Err(format!("run: unexpected argument {a:?}")),
        }
    }
    Ok(RunArgs {
        model: model.ok_or("run: no MODEL given")?,
        from,
        inputs,
        dims,
        repeat,
    })
}

// ----------------------------------------------------------------------------- the C ABI

/// An opaque ONNXIFI handle (backend ID, backend, graph, event).
type Handle = *mut c_void;

/// `onnxTensorDescriptorV1`.
#[repr(C)]
struct TensorDescriptor {
    tag: i32,
    name: *const c_char,
    data_type: u64,
    memory_type: u64,
    dimensions: u32,
    shape: *const u64,
    buffer: u64,
}

/// `onnxMemoryFenceV1`.
#[repr(C)]
struct MemoryFence {
    tag: i32,
    fence_type: u64,
    event: Handle,
}

/// `ONNXIFI_TAG_TENSOR_DESCRIPTOR_V1`.
const TAG_TENSOR: i32 = 0x43DF_BF69;
/// `ONNXIFI_TAG_MEMORY_FENCE_V1`.
const TAG_FENCE: i32 = 0x23E0_8AAB;
/// `ONNXIFI_STATUS_SUCCESS`.
const SUCCESS: i32 = 0;
/// `ONNXIFI_STATUS_FALLBACK`.
const FALLBACK: i32 = 1;

/// The entry points the CLI uses, resolved from the loaded library.
struct Onnxifi {
    _lib: libloading::Library,
    get_backend_ids: unsafe extern "C" fn(*mut Handle, *mut usize) -> i32,
    release_backend_id: unsafe extern "C" fn(Handle) -> i32,
    get_backend_info: unsafe extern "C" fn(Handle, i32, *mut c_void, *mut usize) -> i32,
    init_backend: unsafe extern "C" fn(Handle, *const u64, *mut Handle) -> i32,
    release_backend: unsafe extern "C" fn(Handle) -> i32,
    init_event: unsafe extern "C" fn(Handle, *mut Handle) -> i32,
    signal_event: unsafe extern "C" fn(Handle) -> i32,
    wait_event: unsafe extern "C" fn(Handle) -> i32,
    release_event: unsafe extern "C" fn(Handle) -> i32,
    #[allow(clippy::type_complexity)]
    init_graph: unsafe extern "C" fn(
        Handle,
        *const u64,
        usize,
        *const c_void,
        u32,
        *const TensorDescriptor,
        *mut Handle,
    ) -> i32,
    set_graph_io: unsafe extern "C" fn(
        Handle,
        u32,
        *const TensorDescriptor,
        u32,
        *const TensorDescriptor,
    ) -> i32,
    run_graph: unsafe extern "C" fn(Handle, *const MemoryFence, *mut MemoryFence) -> i32,
    release_graph: unsafe extern "C" fn(Handle) -> i32,
}

/// Where the library is: `--lib`, else `$ONNXIFI_RUST_LIB`, else next to the executable.
fn library_path(explicit: Option<PathBuf>) -> Result<PathBuf, String> {
    if let Some(p) = explicit {
        return Ok(p);
    }
    if let Some(p) = std::env::var_os("ONNXIFI_RUST_LIB") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate the executable: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    for name in ["libonnxifi_rust.so", "libonnxifi-rust.so"] {
        let p = dir.join(name);
        if p.exists() {
            return Ok(p);
        }
    }
    Err(format!(
        "libonnxifi_rust.so not found next to {}; use --lib PATH or ONNXIFI_RUST_LIB",
        exe.display()
    ))
}

impl Onnxifi {
    /// Loads the library and resolves every entry point the CLI uses.
    fn load(path: &Path) -> Result<Self, String> {
        // SAFETY: loading the backend library runs its initialisers, which is intended.
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("cannot load {}: {e}", path.display()))?;
        macro_rules! sym {
            ($name:literal) => {{
                // SAFETY: the symbol is the ONNXIFI entry point of that name; the field type
                // is its prototype in the ONNXIFI 1.0 header.
                let s = unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("{}: {e}", $name))?;
                *s
            }};
        }
        Ok(Onnxifi {
            get_backend_ids: sym!("onnxGetBackendIDs"),
            release_backend_id: sym!("onnxReleaseBackendID"),
            get_backend_info: sym!("onnxGetBackendInfo"),
            init_backend: sym!("onnxInitBackend"),
            release_backend: sym!("onnxReleaseBackend"),
            init_event: sym!("onnxInitEvent"),
            signal_event: sym!("onnxSignalEvent"),
            wait_event: sym!("onnxWaitEvent"),
            release_event: sym!("onnxReleaseEvent"),
            init_graph: sym!("onnxInitGraph"),
            set_graph_io: sym!("onnxSetGraphIO"),
            run_graph: sym!("onnxRunGraph"),
            release_graph: sym!("onnxReleaseGraph"),
            _lib: lib,
        })
    }

    /// A string info item (`ONNXIFI_BACKEND_NAME`, `_DEVICE`, ...), size protocol included.
    fn info_string(&self, id: Handle, info: i32) -> Result<String, String> {
        let mut size = 0usize;
        // SAFETY: NULL value with a valid size pointer is the documented size query.
        let s = unsafe { (self.get_backend_info)(id, info, std::ptr::null_mut(), &mut size) };
        check(s, FALLBACK, "onnxGetBackendInfo (size)")?;
        let mut buf = vec![0u8; size];
        // SAFETY: buf holds `size` bytes.
        let s = unsafe { (self.get_backend_info)(id, info, buf.as_mut_ptr().cast(), &mut size) };
        check(s, SUCCESS, "onnxGetBackendInfo")?;
        buf.truncate(size);
        while buf.last() == Some(&0) {
            buf.pop();
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
}

/// Turns an unexpected status into an error naming the call.
fn check(got: i32, want: i32, call: &str) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{call} returned status 0x{got:04x}"))
    }
}

// ----------------------------------------------------------------------------- tensors

/// One graph input or output: name, ONNX element type, concrete shape, and its bytes.
struct Tensor {
    name: CString,
    elem_type: i32,
    shape: Vec<u64>,
    data: Vec<u8>,
}

/// Byte size of an ONNX element type the CLI can handle.
fn elem_size(t: i32) -> Option<usize> {
    Some(match t {
        1 | 6 | 12 => 4,      // float, int32, uint32
        2 | 3 | 9 => 1,       // uint8, int8, bool
        4 | 5 | 10 | 16 => 2, // uint16, int16, float16, bfloat16
        7 | 11 | 13 => 8,     // int64, double, uint64
        _ => return None,
    })
}

/// The ONNX name of an element type.
fn elem_name(t: i32) -> &'static str {
    match t {
        1 => "float32",
        2 => "uint8",
        3 => "int8",
        4 => "uint16",
        5 => "int16",
        6 => "int32",
        7 => "int64",
        9 => "bool",
        10 => "float16",
        11 => "float64",
        12 => "uint32",
        13 => "uint64",
        16 => "bfloat16",
        _ => "?",
    }
}

/// The element type and concrete shape of a value, resolving symbols with `dims` (default 1).
fn value_type(v: &onnx::ValueInfoProto, dims: &[(String, u64)]) -> Result<(i32, Vec<u64>), String> {
    use onnx::tensor_shape_proto::dimension::Value as Dim;
    use onnx::type_proto::Value;
    let name = v.name.clone().unwrap_or_default();
    let Some(Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        return Err(format!("{name}: not a tensor"));
    };
    let elem = t.elem_type.unwrap_or(0);
    elem_size(elem).ok_or_else(|| format!("{name}: element type {elem} not supported here"))?;
    let shape = t
        .shape
        .as_ref()
        .ok_or_else(|| format!("{name}: the model gives no shape"))?;
    let mut out = Vec::new();
    for d in &shape.dim {
        out.push(match &d.value {
            Some(Dim::DimValue(n)) if *n > 0 => *n as u64,
            Some(Dim::DimParam(p)) => dims.iter().find(|(s, _)| s == p).map_or(1, |(_, n)| *n),
            _ => return Err(format!("{name}: a dimension is unknown; use --dim")),
        });
    }
    Ok((elem, out))
}

/// Deterministic contents: `((i*37+11) % 101)/50 - 1` for floats, `(i*37+11) % 101` otherwise.
fn deterministic_bytes(elem: i32, n: usize) -> Vec<u8> {
    let k = |i: usize| (i * 37 + 11) % 101;
    let f = |i: usize| k(i) as f32 / 50.0 - 1.0;
    let mut out = Vec::with_capacity(n * elem_size(elem).unwrap_or(1));
    for i in 0..n {
        match elem {
            1 => out.extend_from_slice(&f(i).to_le_bytes()),
            11 => out.extend_from_slice(&f64::from(f(i)).to_le_bytes()),
            6 | 12 => out.extend_from_slice(&(k(i) as u32).to_le_bytes()),
            7 | 13 => out.extend_from_slice(&(k(i) as u64).to_le_bytes()),
            2 | 3 => out.push((k(i) % 100) as u8),
            9 => out.push((k(i) % 2) as u8),
            _ => out.extend_from_slice(&(k(i) as u16).to_le_bytes()),
        }
    }
    out
}

/// The first `count` values of a tensor, formatted.
fn preview(t: &Tensor, count: usize) -> String {
    let size = elem_size(t.elem_type).unwrap_or(1);
    let vals: Vec<String> = t
        .data
        .chunks_exact(size)
        .take(count)
        .map(|c| match t.elem_type {
            1 => format!("{:.6}", f32::from_le_bytes(c.try_into().expect("4 bytes"))),
            11 => format!("{:.6}", f64::from_le_bytes(c.try_into().expect("8 bytes"))),
            6 => i32::from_le_bytes(c.try_into().expect("4 bytes")).to_string(),
            12 => u32::from_le_bytes(c.try_into().expect("4 bytes")).to_string(),
            7 => i64::from_le_bytes(c.try_into().expect("8 bytes")).to_string(),
            13 => u64::from_le_bytes(c.try_into().expect("8 bytes")).to_string(),
            3 => (c[0] as i8).to_string(),
            2 | 9 => c[0].to_string(),
            _ => format!("0x{:04x}", u16::from_le_bytes([c[0], c[1]])),
        })
        .collect();
    let more = if t.data.len() / size > count {
        ", ..."
    } else {
        ""
    };
    format!("[{}{more}]", vals.join(", "))
}

/// A descriptor over a tensor's buffer (the tensor must outlive its use).
fn descriptor(t: &mut Tensor) -> TensorDescriptor {
    TensorDescriptor {
        tag: TAG_TENSOR,
        name: t.name.as_ptr(),
        data_type: t.elem_type as u64,
        memory_type: 0,
        dimensions: t.shape.len() as u32,
        shape: t.shape.as_ptr(),
        buffer: t.data.as_mut_ptr() as u64,
    }
}

// ----------------------------------------------------------------------------- run

/// `onnxifi-run run`: loads the model, binds inputs/outputs, runs it `repeat` times.
///
/// A text model is parsed and encoded; the library receives the serialized `ModelProto`.
fn cmd_run(lib: Option<PathBuf>, args: Vec<String>) -> Result<(), CliError> {
    let args = parse_run(args).map_err(CliError::usage)?;
    let LoadedModel { model, bytes, .. } = load_model(&args.model, args.from)?;
    let graph = model.graph.as_ref().ok_or("the model has no graph")?;
    let weights: Vec<&str> = graph
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();

    let mut inputs = Vec::new();
    for v in &graph.input {
        let name = v.name.clone().unwrap_or_default();
        if weights.contains(&name.as_str()) {
            continue;
        }
        let (elem, shape) = value_type(v, &args.dims)?;
        let count = shape.iter().product::<u64>() as usize;
        let want = count * elem_size(elem).unwrap_or(1);
        let data = match args.inputs.iter().find(|(n, _)| *n == name) {
            Some((_, file)) => {
                let d = std::fs::read(file)
                    .map_err(|e| CliError::usage(format!("cannot read {}: {e}", file.display())))?;
                if d.len() != want {
                    return Err(CliError::usage(format!(
                        "{}: {} bytes, input {name} {shape:?} {} needs {want}",
                        file.display(),
                        d.len(),
                        elem_name(elem)
                    )));
                }
                d
            }
            None => deterministic_bytes(elem, count),
        };
        inputs.push(Tensor {
            name: CString::new(name).map_err(|_| "a name holds a NUL")?,
            elem_type: elem,
            shape,
            data,
        });
    }
    for (n, _) in &args.inputs {
        if !inputs.iter().any(|t| t.name.to_bytes() == n.as_bytes()) {
            return Err(CliError::usage(format!(
                "--input {n}: the model has no such input"
            )));
        }
    }
    let mut outputs = Vec::new();
    for v in &graph.output {
        let (elem, shape) = value_type(v, &args.dims)?;
        let count = shape.iter().product::<u64>() as usize;
        outputs.push(Tensor {
            name: CString::new(v.name.clone().unwrap_or_default()).map_err(|_| "NUL in name")?,
            elem_type: elem,
            shape,
            data: vec![0u8; count * elem_size(elem).unwrap_or(1)],
        });
    }

    let path = library_path(lib)?;
    let api = Onnxifi::load(&path)?;
    let mut n = 0usize;
    // SAFETY: the count query with a NULL array.
    let s = unsafe { (api.get_backend_ids)(std::ptr::null_mut(), &mut n) };
    check(s, FALLBACK, "onnxGetBackendIDs (count)")?;
    let mut ids = vec![std::ptr::null_mut(); n];
    // SAFETY: ids holds n entries.
    let s = unsafe { (api.get_backend_ids)(ids.as_mut_ptr(), &mut n) };
    check(s, SUCCESS, "onnxGetBackendIDs")?;
    let id = *ids.first().ok_or("no ONNXIFI backend")?;
    println!("library: {}", path.display());
    println!(
        "backend: {} on {}",
        api.info_string(id, 1)?,
        api.info_string(id, 5)?
    );
    println!("model:   {}", display_name(&args.model));

    let result = run_on_backend(&api, id, &bytes, &mut inputs, &mut outputs, args.repeat);
    for id in ids {
        // SAFETY: IDs from onnxGetBackendIDs, released once.
        unsafe { (api.release_backend_id)(id) };
    }
    let times = result.map_err(CliError::failed)?;
    for t in &inputs {
        println!(
            "input  {} {:?} {}",
            t.name.to_string_lossy(),
            t.shape,
            elem_name(t.elem_type)
        );
    }
    for t in &outputs {
        println!(
            "output {} {:?} {}: {}",
            t.name.to_string_lossy(),
            t.shape,
            elem_name(t.elem_type),
            preview(t, 10)
        );
    }
    let mut sorted = times.clone();
    sorted.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "latency over {} run(s): min {:.3} ms, median {:.3} ms",
        sorted.len(),
        ms(sorted[0]),
        ms(sorted[sorted.len() / 2])
    );
    Ok(())
}

/// Backend -> graph -> IO -> `repeat` x (event, run, signal, wait) -> release; returns timings.
fn run_on_backend(
    api: &Onnxifi,
    id: Handle,
    model: &[u8],
    inputs: &mut [Tensor],
    outputs: &mut [Tensor],
    repeat: usize,
) -> Result<Vec<Duration>, String> {
    let mut backend = std::ptr::null_mut();
    // SAFETY: a valid ID, no properties, a valid out pointer.
    let s = unsafe { (api.init_backend)(id, std::ptr::null(), &mut backend) };
    check(s, SUCCESS, "onnxInitBackend")?;
    let mut graph = std::ptr::null_mut();
    // SAFETY: the model slice is live for the call; no weight descriptors.
    let s = unsafe {
        (api.init_graph)(
            backend,
            std::ptr::null(),
            model.len(),
            model.as_ptr().cast(),
            0,
            std::ptr::null(),
            &mut graph,
        )
    };
    let result = if s == SUCCESS {
        let r = run_graph(api, backend, graph, inputs, outputs, repeat);
        // SAFETY: the graph made above, released once, after all runs finished.
        unsafe { (api.release_graph)(graph) };
        r
    } else {
        Err(format!("onnxInitGraph returned status 0x{s:04x}"))
    };
    // SAFETY: the backend made above, released once.
    unsafe { (api.release_backend)(backend) };
    result
}

/// Binds the IO of `graph` and runs it `repeat` times, timing each run.
fn run_graph(
    api: &Onnxifi,
    backend: Handle,
    graph: Handle,
    inputs: &mut [Tensor],
    outputs: &mut [Tensor],
    repeat: usize,
) -> Result<Vec<Duration>, String> {
    let ins: Vec<TensorDescriptor> = inputs.iter_mut().map(descriptor).collect();
    let outs: Vec<TensorDescriptor> = outputs.iter_mut().map(descriptor).collect();
    // SAFETY: descriptors over buffers that live until after the last run is waited for.
    let s = unsafe {
        (api.set_graph_io)(
            graph,
            ins.len() as u32,
            ins.as_ptr(),
            outs.len() as u32,
            outs.as_ptr(),
        )
    };
    check(s, SUCCESS, "onnxSetGraphIO")?;
    let mut times = Vec::with_capacity(repeat);
    for _ in 0..repeat {
        let mut input_event = std::ptr::null_mut();
        // SAFETY: a valid backend and out pointer.
        check(
            unsafe { (api.init_event)(backend, &mut input_event) },
            SUCCESS,
            "onnxInitEvent",
        )?;
        let in_fence = MemoryFence {
            tag: TAG_FENCE,
            fence_type: 0,
            event: input_event,
        };
        let mut out_fence = MemoryFence {
            tag: TAG_FENCE,
            fence_type: 0,
            event: std::ptr::null_mut(),
        };
        let start = Instant::now();
        // SAFETY: valid graph and fences; the backend fills out_fence.event.
        let s = unsafe { (api.run_graph)(graph, &in_fence, &mut out_fence) };
        // SAFETY: our own input event, signalled after onnxRunGraph returned, as frameworks do.
        let signalled = unsafe { (api.signal_event)(input_event) };
        let waited = if s == SUCCESS {
            // SAFETY: the output event the backend created; released once.
            unsafe {
                let w = (api.wait_event)(out_fence.event);
                (api.release_event)(out_fence.event);
                w
            }
        } else {
            s
        };
        let took = start.elapsed();
        // SAFETY: our input event, released once.
        unsafe { (api.release_event)(input_event) };
        check(s, SUCCESS, "onnxRunGraph")?;
        check(signalled, SUCCESS, "onnxSignalEvent")?;
        check(waited, SUCCESS, "the run (onnxWaitEvent)")?;
        times.push(took);
    }
    Ok(times)
}
