//! `onnxifi-run convert`: binary protobuf <-> ONNX text syntax.
#![forbid(unsafe_code)]

use crate::model::{display_name, load_model, same_model, Format};
use crate::{CliError, Flags};
use onnxifi_rust::text;
use prost::Message;
use std::io::Write;

/// `onnxifi-run convert`: reads IN in one format and writes OUT in the other (or the same).
///
/// Text output is parsed back before it is written: text that does not parse, or that parses
/// to something other than the model's normal form (`text::normalize_model`), is an error;
/// a model that loses fields the syntax cannot hold gets a warning.
pub fn cmd_convert(args: Vec<String>) -> Result<(), CliError> {
    let mut from = None;
    let mut to = None;
    let positional = Flags::new("convert", args).split(|flag, f| {
        match flag {
            "--from" => from = Some(Format::from_flag(flag, &f.value(flag)?)?),
            "--to" => to = Some(Format::from_flag(flag, &f.value(flag)?)?),
            _ => return Err(f.unknown(flag, crate::CONVERT_USAGE)),
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
