//! `onnxifi-run check`: the IR-spec verdict and the backend's compatibility verdict.
#![forbid(unsafe_code)]

use crate::model::{display_name, load_model, Format};
use crate::{CliError, Flags};
use onnxifi_rust::check::spec::{check_model_with, Level, Options, RULES};
use std::process::ExitCode;

/// `onnxifi-run check`: prints every violation of the IR specification and a summary; the exit
/// status is 0 for a valid model and 1 for an invalid one.
pub fn cmd_check(args: Vec<String>) -> Result<ExitCode, CliError> {
    let mut from = None;
    let mut pedantic = false;
    let positional = Flags::new("check", args).split(|flag, f| {
        match flag {
            "--from" => from = Some(Format::from_flag(flag, &f.value(flag)?)?),
            "--pedantic" => pedantic = true,
            _ => return Err(f.unknown(flag, crate::CHECK_USAGE)),
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
            out!("{}", e.message);
            out!("{name}: invalid: the model could not be read as ONNX");
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
        out!("{v}");
    }
    // The backend's verdict, in the same listing: every node it would refuse, and why.
    let refusals = onnxifi_rust::graph::refusals(&loaded.model);
    for e in &refusals {
        // An invalid model's refusal repeats the violations listed above.
        if !(violations.is_empty() || e.status != onnxifi_rust::error::Status::InvalidModel) {
            continue;
        }
        out!("[backend] {}: {}", e.status, e.message);
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
        out!("{name}: valid ({format} model; {rules} rules of the ONNX IR specification checked, no violations); {backend}");
        Ok(ExitCode::SUCCESS)
    } else {
        let mut broken: Vec<&str> = violations.iter().map(|v| v.rule.id()).collect();
        broken.sort_unstable();
        broken.dedup();
        out!(
            "{name}: invalid: {} violation(s) of {} rule(s) of the ONNX IR specification ({}); {backend}",
            violations.len(),
            broken.len(),
            broken.join(", ")
        );
        Ok(ExitCode::FAILURE)
    }
}
