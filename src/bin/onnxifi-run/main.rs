//! `onnxifi-run`: drives `libonnxifi-rust.so` through its ONNXIFI C ABI, the way a framework
//! does (dlopen + the documented call sequence): runs and benchmarks models, prints the
//! backend's info, checks models against the ONNX IR specification and the backend, and
//! converts between the binary protobuf form and the ONNX text syntax.
//!
//! Modules: `capi` (the library's C ABI), `model` (model files and formats), `tensor` (input
//! and output tensors: files, generation, summaries), `io_plan` (a run's inputs and outputs),
//! one module per command (`run`, `bench`, `info`, `check`, `convert`).
//!
//! Exit status: 0 success (for `check`: the model is valid), 1 failure (for `check`: the
//! model is invalid, undecodable or unparseable; for `run --expect`: an output differs), 2
//! usage errors and unreadable input. Output to a closed pipe ends the program quietly.

/// Prints a line on stdout; a closed pipe (`onnxifi-run ... | head -1`) ends the program
/// quietly with status 0 instead of a panic.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::print_line(format_args!($($arg)*))
    };
}

mod bench;
mod capi;
mod check;
mod convert;
mod info;
mod io_plan;
mod model;
mod peak;
mod run;
mod tensor;

use std::path::PathBuf;
use std::process::ExitCode;

/// The text of `onnxifi-run help`.
const USAGE: &str = "\
usage: onnxifi-run [--lib PATH] <command> [args]
       onnxifi-run --version

commands:
  run MODEL [options]     run MODEL on the backend; print each output's summary and the latency
  bench MODEL [options]   benchmark MODEL: warm-up, then latency percentiles, throughput,
                          init time, peak memory; --profile lists the slowest operators
  info                    every onnxGetBackendInfo value, the SIMD kernels and the operators
  peak                    the measured fp32 FMA peak of one core (what benchmarks take % of)
  check MODEL [options]   the ONNX IR-spec verdict and every node this backend would refuse
  convert IN OUT          binary protobuf <-> ONNX text syntax
  help [COMMAND]          this text, or a command's (also: COMMAND --help)

The library is --lib PATH, else $ONNXIFI_RUST_LIB, else libonnxifi_rust.so next to this
executable, else ../lib/libonnxifi-rust.so from it (an installed layout), else the dynamic
loader's search path. Failed library calls are reported with their status name and the
library's own message.
Exit status: 0 success, 1 failure (check: invalid model), 2 usage error or unreadable input.";

/// The text of `onnxifi-run check --help`.
const CHECK_USAGE: &str = "\
usage: onnxifi-run check MODEL [--from text|onnx] [--pedantic]

Checks MODEL against every MUST rule of the ONNX IR specification and every operator's
signature; prints each violation as `[rule-id] location: message`, then every reason this
backend would refuse the model as `[backend] STATUS: message`, and a summary. Exit 0 when
valid, 1 when not (or when MODEL does not decode or parse), whatever the backend's verdict.
--pedantic adds the pedantic rules.";

/// The text of `onnxifi-run convert --help`.
const CONVERT_USAGE: &str = "\
usage: onnxifi-run convert IN OUT [--from text|onnx] [--to text|onnx]

Converts a model between binary protobuf and the ONNX text syntax. Formats come from
extensions (.onnx binary; .onnxtxt, .txt text); a model read with another extension, or from
`-` (stdin), is sniffed. Writing to `-` (stdout) or to another extension needs --to.";

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

/// Writes one line to stdout (see [`out!`]).
pub(crate) fn print_line(args: std::fmt::Arguments) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = writeln!(stdout, "{args}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("onnxifi-run: cannot write stdout: {e}");
        std::process::exit(1);
    }
}

/// Why a command stopped, and the exit status that tells the caller.
#[derive(Debug)]
pub(crate) struct CliError {
    /// 1: the command failed (or, for `check`, the model is invalid); 2: usage error or
    /// unreadable input.
    pub code: u8,
    /// What to print after `onnxifi-run: `.
    pub message: String,
}

impl CliError {
    /// A usage error (bad arguments) or input that cannot be read: exit status 2.
    pub fn usage(message: impl Into<String>) -> Self {
        CliError {
            code: 2,
            message: message.into(),
        }
    }

    /// A failure of the command itself: exit status 1.
    pub fn failed(message: impl Into<String>) -> Self {
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

/// A command's arguments, read one at a time: `--flag value` and `--flag=value` alike.
pub(crate) struct Flags {
    command: &'static str,
    args: std::vec::IntoIter<String>,
    inline: Option<String>,
}

impl Flags {
    /// The arguments of `command`.
    pub fn new(command: &'static str, args: Vec<String>) -> Flags {
        Flags {
            command,
            args: args.into_iter(),
            inline: None,
        }
    }

    /// The next flag or positional argument (a `--flag=value` gives `--flag`, its value kept
    /// for [`Flags::value`]).
    fn next_arg(&mut self) -> Option<String> {
        self.inline = None;
        let a = self.args.next()?;
        if a.starts_with("--") {
            if let Some((flag, value)) = a.split_once('=') {
                self.inline = Some(value.to_string());
                return Some(flag.to_string());
            }
        }
        Some(a)
    }

    /// Reads every argument: `on_flag(flag, self)` for each one starting with `-` (not `-`
    /// alone, which names stdin or stdout), which takes the flag's value from `self` if it
    /// has one; returns the other (positional) arguments.
    pub fn split(
        mut self,
        mut on_flag: impl FnMut(&str, &mut Flags) -> Result<(), CliError>,
    ) -> Result<Vec<String>, CliError> {
        let mut positional = Vec::new();
        while let Some(arg) = self.next_arg() {
            if arg.starts_with('-') && arg != "-" {
                on_flag(&arg, &mut self)?;
            } else {
                positional.push(arg);
            }
        }
        Ok(positional)
    }

    /// A usage error for an option `command` does not know, with its usage text.
    pub fn unknown(&self, flag: &str, usage: &str) -> CliError {
        CliError::usage(format!(
            "{}: unknown option {flag:?}\n{usage}",
            self.command
        ))
    }

    /// The value of `flag`.
    pub fn value(&mut self, flag: &str) -> Result<String, CliError> {
        self.inline
            .take()
            .or_else(|| self.args.next())
            .ok_or_else(|| CliError::usage(format!("{}: {flag} needs a value", self.command)))
    }

    /// The value of `flag` as a whole number.
    pub fn number(&mut self, flag: &str) -> Result<u64, CliError> {
        let v = self.value(flag)?;
        v.parse()
            .map_err(|_| CliError::usage(format!("{flag} {v:?}: expected a whole number")))
    }

    /// The value of `flag` as a number ≥ 1.
    pub fn positive(&mut self, flag: &str) -> Result<usize, CliError> {
        let v = self.value(flag)?;
        v.parse()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| CliError::usage(format!("{flag} {v:?}: expected a positive number")))
    }

    /// The value of `flag` as a non-negative real.
    pub fn real(&mut self, flag: &str) -> Result<f64, CliError> {
        let v = self.value(flag)?;
        v.parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| CliError::usage(format!("{flag} {v:?}: expected a number ≥ 0")))
    }
}

/// A usage error naming the first of `positional`, for a `command` that takes none.
pub(crate) fn no_positional(
    command: &str,
    positional: &[String],
    usage: &str,
) -> Result<(), CliError> {
    match positional.first() {
        Some(a) => Err(CliError::usage(format!(
            "{command}: unexpected argument {a:?}\n{usage}"
        ))),
        None => Ok(()),
    }
}

/// The single MODEL argument of `command`; a usage error for none or several.
pub(crate) fn one_model(
    command: &str,
    positional: Vec<String>,
    usage: &str,
) -> Result<String, CliError> {
    match <[String; 1]>::try_from(positional) {
        Ok([model]) => Ok(model),
        Err(p) if p.is_empty() => Err(CliError::usage(format!(
            "{command}: no MODEL given\n{usage}"
        ))),
        Err(p) => Err(CliError::usage(format!(
            "{command}: expected one MODEL, got {:?}",
            p
        ))),
    }
}

/// Refuses an `ONNXIFI_RUST_NUM_THREADS` the library would not take, instead of letting it be
/// ignored.
pub(crate) fn check_thread_env() -> Result<(), CliError> {
    let Some(v) = std::env::var_os("ONNXIFI_RUST_NUM_THREADS") else {
        return Ok(());
    };
    let text = v.to_string_lossy();
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=1024).contains(&n) => Ok(()),
        _ => Err(CliError::usage(format!(
            "ONNXIFI_RUST_NUM_THREADS={text:?} is not a thread count (1 to 1024): fix or unset it, \
             or use --threads N"
        ))),
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
    let wants_help = args.iter().any(|a| a == "--help" || a == "-h");
    let ok = |r: Result<(), CliError>| r.map(|()| ExitCode::SUCCESS);
    match command.as_str() {
        "run" => ok(run::cmd_run(lib, args)),
        "bench" => ok(bench::cmd_bench(lib, args)),
        "info" => ok(info::cmd_info(lib, args)),
        "peak" => ok(peak::cmd_peak(args)),
        "check" if wants_help => help(CHECK_USAGE),
        "check" => check::cmd_check(args),
        "convert" if wants_help => help(CONVERT_USAGE),
        "convert" => ok(convert::cmd_convert(args)),
        "help" | "--help" | "-h" => help(match args.first().map(String::as_str) {
            Some("run") => run::USAGE,
            Some("bench") => bench::USAGE,
            Some("info") => info::USAGE,
            Some("peak") => peak::USAGE,
            Some("check") => CHECK_USAGE,
            Some("convert") => CONVERT_USAGE,
            _ => USAGE,
        }),
        "--version" | "-V" | "version" => {
            out!("onnxifi-run {}", env!("CARGO_PKG_VERSION"));
            Ok(ExitCode::SUCCESS)
        }
        other => Err(CliError::usage(format!(
            "unknown command {other:?}\n{USAGE}"
        ))),
    }
}

/// Prints a usage text; exit status 0.
fn help(text: &str) -> Result<ExitCode, CliError> {
    out!("{text}");
    Ok(ExitCode::SUCCESS)
}
