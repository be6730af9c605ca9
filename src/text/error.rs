//! The error returned when ONNX text does not parse.
#![forbid(unsafe_code)]

use std::fmt;

/// Where and why parsing ONNX text failed.
///
/// `line` and `column` are 1-based; the column counts characters (not bytes) from the start of
/// the line. [`fmt::Display`] renders the message, the offending source line and a caret
/// under the column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line of the offending token.
    pub line: usize,
    /// 1-based column (in characters) of the offending token.
    pub column: usize,
    /// The offending token as it appears in the source (`end of input` at the end).
    pub found: String,
    /// What the parser expected (or why the token is wrong).
    pub expected: String,
    /// The full text of the source line holding the token, without its line break.
    pub source_line: String,
}

impl ParseError {
    /// Builds an error at byte `offset` of `src`; `found` is the offending token's text.
    pub(crate) fn at(src: &str, offset: usize, found: String, expected: String) -> Self {
        let offset = floor_char_boundary(src, offset.min(src.len()));
        let line_start = src[..offset].rfind('\n').map_or(0, |i| i + 1);
        let line_end = src[offset..].find('\n').map_or(src.len(), |i| offset + i);
        let line = src[..offset].matches('\n').count() + 1;
        let column = src[line_start..offset].chars().count() + 1;
        let source_line = src[line_start..line_end].trim_end_matches('\r').to_string();
        ParseError {
            line,
            column,
            found,
            expected,
            source_line,
        }
    }
}

/// The largest char boundary of `s` at or below `i`.
fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "parse error at line {}, column {}: expected {}, found {}",
            self.line, self.column, self.expected, self.found
        )?;
        let gutter = self.line.to_string();
        writeln!(f, "{gutter} | {}", self.source_line)?;
        // Tabs in the prefix stay tabs so the caret lines up under them.
        let pad: String = self
            .source_line
            .chars()
            .take(self.column - 1)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        write!(f, "{} | {pad}^", " ".repeat(gutter.len()))
    }
}

impl std::error::Error for ParseError {}

impl From<ParseError> for crate::error::Error {
    fn from(e: ParseError) -> Self {
        crate::error::Error::new(crate::error::Status::InvalidModel, e.to_string())
    }
}
