//! Model files: the binary and text formats, how a model's format is told, reading and
//! decoding (or parsing) a model.
#![forbid(unsafe_code)]

use crate::CliError;
use onnxifi_rust::model::onnx;
use onnxifi_rust::text;
use prost::Message;
use std::io::Read;
use std::path::Path;

/// The two ways a model is written down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A serialized `ModelProto` (`.onnx`).
    Onnx,
    /// The ONNX text syntax (`.onnxtxt`, `.txt`).
    Text,
}

impl Format {
    /// The value of `--from`/`--to`: `onnx` or `text`.
    pub fn from_flag(flag: &str, value: &str) -> Result<Format, CliError> {
        match value {
            "onnx" => Ok(Format::Onnx),
            "text" => Ok(Format::Text),
            _ => Err(CliError::usage(format!(
                "{flag} {value:?}: expected `text` or `onnx`"
            ))),
        }
    }

    /// The format a path's extension names, if it names one (`-` names none).
    pub fn from_extension(path: &str) -> Option<Format> {
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
pub fn sniff(bytes: &[u8]) -> Format {
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
pub fn display_name(path: &str) -> &str {
    if path == "-" {
        "<stdin>"
    } else {
        path
    }
}

/// Reads a whole file, or stdin for `-`; failures are exit status 2.
pub fn read_input(path: &str) -> Result<Vec<u8>, CliError> {
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
pub struct LoadedModel {
    /// The decoded (or parsed) model.
    pub model: onnx::ModelProto,
    /// The serialized model: the bytes read for binary input, the encoded parse for text.
    pub bytes: Vec<u8>,
    /// The format it was read in.
    pub format: Format,
}

/// Reads and decodes (or parses) a model. The format is `from`, else the extension's, else
/// the content's ([`sniff`]). Unreadable input is exit status 2; input that does not decode
/// or parse is 1, with the parse error's line, column and caret.
pub fn load_model(path: &str, from: Option<Format>) -> Result<LoadedModel, CliError> {
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
pub fn same_model(a: &onnx::ModelProto, b: &onnx::ModelProto) -> bool {
    a == b || a.encode_to_vec() == b.encode_to_vec()
}
