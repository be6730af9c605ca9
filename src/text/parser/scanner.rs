//! The character-level half of the parser: the cursor, white space and comments,
//! identifiers, quoted strings, numeric literals and their conversions to the proto types,
//! and the error positions. The grammar's rules (`super`) call these on demand.
#![forbid(unsafe_code)]

use super::{Literal, PResult, Parser, MAX_DEPTH};
use crate::text::error::ParseError;
use crate::text::syntax::{is_float_keyword, is_ident_char, is_ident_start};

impl<'a> Parser<'a> {
    /// The character at the cursor, without skipping anything.
    pub(super) fn cur(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    /// Skips white space and `#` comments (to the end of the line).
    pub(super) fn skip_ws(&mut self) {
        let bytes = self.src.as_bytes();
        while self.pos < bytes.len() {
            match bytes[self.pos] {
                b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c => self.pos += 1,
                b'#' => {
                    while self.pos < bytes.len() && bytes[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    /// The next significant character, after white space and comments.
    pub(super) fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.cur()
    }

    /// Whether the input is used up (apart from white space and comments).
    pub(super) fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// Consumes `c` if it is next.
    pub(super) fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// Consumes `c`, or fails saying it was expected.
    pub(super) fn expect(&mut self, c: char) -> PResult<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(format!("`{c}`")))
        }
    }

    /// Consumes `=>`, or fails.
    pub(super) fn expect_arrow(&mut self) -> PResult<()> {
        self.skip_ws();
        if self.src[self.pos..].starts_with("=>") {
            self.pos += 2;
            Ok(())
        } else {
            Err(self.error("`=>`".into()))
        }
    }

    /// The text of the token at the cursor, for error messages.
    pub(super) fn token_here(&self) -> String {
        let rest = &self.src[self.pos..];
        let Some(c) = rest.chars().next() else {
            return "end of input".into();
        };
        let text: String = if is_ident_char(c) || c == '-' {
            let n = rest
                .char_indices()
                .skip(1)
                .find(|&(_, ch)| !(is_ident_char(ch) || ch == '.'))
                .map_or(rest.len(), |(i, _)| i);
            rest[..n].to_string()
        } else if c == '"' {
            // Up to the closing quote, or the end of the line for an unterminated string.
            match rest[1..].find(['"', '\n', '\r']) {
                Some(i) if rest[1 + i..].starts_with('"') => rest[..i + 2].to_string(),
                Some(i) => rest[..i + 1].to_string(),
                None => rest.to_string(),
            }
        } else if rest.starts_with("=>") {
            "=>".into()
        } else {
            c.to_string()
        };
        let mut short: String = text.chars().take(40).collect();
        if short.len() < text.len() {
            short.push('…');
        }
        format!("`{short}`")
    }

    /// An error at the cursor (after white space) saying what was `expected`.
    pub(super) fn error(&mut self, expected: String) -> ParseError {
        self.skip_ws();
        ParseError::at(self.src, self.pos, self.token_here(), expected)
    }

    /// An error at byte `offset`, with the token there.
    pub(super) fn error_at(&self, offset: usize, expected: String) -> ParseError {
        let here = Parser {
            src: self.src,
            pos: offset,
            depth: 0,
        };
        ParseError::at(self.src, offset, here.token_here(), expected)
    }

    /// Enters one nesting level, failing past [`MAX_DEPTH`].
    pub(super) fn enter(&mut self) -> PResult<()> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error(format!("nesting no deeper than {MAX_DEPTH} levels")));
        }
        self.depth += 1;
        Ok(())
    }

    /// Leaves a nesting level.
    pub(super) fn leave(&mut self) {
        self.depth -= 1;
    }

    /// The identifier at the next significant character, without consuming it.
    pub(super) fn peek_ident(&mut self) -> Option<&'a str> {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        let mut chars = rest.char_indices();
        match chars.next() {
            Some((_, c)) if is_ident_start(c) => {}
            _ => return None,
        }
        let n = chars
            .find(|&(_, c)| !is_ident_char(c))
            .map_or(rest.len(), |(i, _)| i);
        Some(&rest[..n])
    }

    /// Consumes an identifier if one is next.
    pub(super) fn ident(&mut self) -> Option<String> {
        let id = self.peek_ident()?;
        self.pos += id.len();
        Some(id.to_string())
    }

    /// Consumes an identifier, or fails.
    pub(super) fn expect_ident(&mut self) -> PResult<String> {
        match self.ident() {
            Some(id) => Ok(id),
            None => Err(self.error("an identifier".into())),
        }
    }

    /// Consumes a quoted string (the cursor is on its `"`), resolving `\c` to `c`.
    pub(super) fn string_body(&mut self) -> PResult<String> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        let mut chars = self.src[self.pos..].char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.pos += i + 1;
                    return Ok(out);
                }
                '\\' => match chars.next() {
                    Some((_, e)) => out.push(e),
                    None => break,
                },
                _ => out.push(c),
            }
        }
        Err(self.error_at(start, "a closing `\"` for this string".into()))
    }

    /// Consumes a quoted string if one is next.
    pub(super) fn string(&mut self) -> PResult<Option<String>> {
        if self.peek() == Some('"') {
            self.string_body().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Consumes a quoted string, or fails.
    pub(super) fn expect_string(&mut self) -> PResult<String> {
        match self.string()? {
            Some(s) => Ok(s),
            None => Err(self.error("a quoted string".into())),
        }
    }

    /// Consumes an identifier or a quoted string if one is next.
    pub(super) fn quotable_id(&mut self) -> PResult<Option<String>> {
        if let Some(id) = self.ident() {
            return Ok(Some(id));
        }
        self.string()
    }

    /// Consumes an identifier or a quoted string, or fails.
    pub(super) fn expect_quotable_id(&mut self) -> PResult<String> {
        match self.quotable_id()? {
            Some(s) => Ok(s),
            None => Err(self.error("an identifier or a quoted name".into())),
        }
    }

    /// Consumes a literal (number, `inf`/`nan`, or string) if one is next.
    pub(super) fn literal(&mut self) -> PResult<Option<Literal>> {
        match self.peek() {
            Some('"') => Ok(Some(Literal::Str(self.string_body()?))),
            Some(c) if c == '-' || c.is_ascii_digit() => self.number().map(Some),
            Some(c) if is_ident_start(c) => match self.peek_ident() {
                Some(id) if is_float_keyword(id) => {
                    self.pos += id.len();
                    Ok(Some(Literal::Float(id.to_string())))
                }
                _ => Ok(None),
            },
            _ => Ok(None),
        }
    }

    /// Consumes a number: `-`? digits (`.` digits*)? ([eE] [+-]? digits)?, or `-inf`/`-nan`.
    pub(super) fn number(&mut self) -> PResult<Literal> {
        let start = self.pos;
        if self.cur() == Some('-') {
            self.pos += 1;
            if let Some(id) = self.peek_ident_here() {
                if is_float_keyword(id) {
                    self.pos += id.len();
                    return Ok(Literal::Float(self.src[start..self.pos].to_string()));
                }
            }
        }
        let digits = self.digits();
        if digits == 0 {
            let err = self.error_at(start, "a number".into());
            self.pos = start;
            return Err(err);
        }
        let mut is_float = false;
        if self.cur() == Some('.') {
            self.pos += 1;
            self.digits();
            is_float = true;
        }
        if matches!(self.cur(), Some('e' | 'E')) {
            self.pos += 1;
            if matches!(self.cur(), Some('+' | '-')) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                return Err(self.error_at(start, "a number with exponent digits".into()));
            }
            is_float = true;
        }
        let text = self.src[start..self.pos].to_string();
        Ok(if is_float {
            Literal::Float(text)
        } else {
            Literal::Int(text)
        })
    }

    /// The identifier starting exactly at the cursor (no white space skipped).
    pub(super) fn peek_ident_here(&self) -> Option<&'a str> {
        let rest = &self.src[self.pos..];
        let first = rest.chars().next()?;
        if !is_ident_start(first) {
            return None;
        }
        let n = rest
            .char_indices()
            .find(|&(_, c)| !is_ident_char(c))
            .map_or(rest.len(), |(i, _)| i);
        Some(&rest[..n])
    }

    /// Consumes ASCII digits at the cursor; returns how many.
    pub(super) fn digits(&mut self) -> usize {
        let n = self.src.as_bytes()[self.pos..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        self.pos += n;
        n
    }

    /// Consumes an integer literal and converts it to `i64`, or fails.
    pub(super) fn expect_int(&mut self) -> PResult<i64> {
        self.skip_ws();
        let start = self.pos;
        match self.literal()? {
            Some(Literal::Int(text)) => self.to_i64(&text, start),
            _ => Err(self.error_at(start, "an integer".into())),
        }
    }

    /// Converts integer text to `i64`, failing on overflow.
    pub(super) fn to_i64(&self, text: &str, at: usize) -> PResult<i64> {
        text.parse::<i64>()
            .map_err(|_| self.error_at(at, "an integer within the 64-bit range".into()))
    }

    /// Converts integer text to `u64` the way `strtoull` does (a `-` wraps around).
    pub(super) fn to_u64(&self, text: &str, at: usize) -> PResult<u64> {
        let (neg, digits) = match text.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, text),
        };
        let v = digits
            .parse::<u64>()
            .map_err(|_| self.error_at(at, "an integer within the unsigned 64-bit range".into()))?;
        Ok(if neg { v.wrapping_neg() } else { v })
    }

    /// Converts number text to `f32`, failing when a finite literal overflows.
    pub(super) fn to_f32(&self, text: &str, at: usize) -> PResult<f32> {
        if let Some(v) = special_float(text) {
            return Ok(v as f32);
        }
        match text.parse::<f32>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.error_at(at, "a number within the float range".into())),
        }
    }

    /// Converts number text to `f64`, failing when a finite literal overflows.
    pub(super) fn to_f64(&self, text: &str, at: usize) -> PResult<f64> {
        if let Some(v) = special_float(text) {
            return Ok(v);
        }
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.error_at(at, "a number within the double range".into())),
        }
    }
}

/// `inf`, `infinity` or `nan` (any case, optional `-`) as a value.
fn special_float(text: &str) -> Option<f64> {
    let (neg, body) = match text.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, text),
    };
    if !is_float_keyword(body) {
        return None;
    }
    let v = if body.eq_ignore_ascii_case("nan") {
        f64::NAN
    } else {
        f64::INFINITY
    };
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lexes one literal from `s`, returning it and what is left.
    fn lex(s: &str) -> (Option<Literal>, &str) {
        let mut p = Parser::new(s);
        let lit = p.literal().ok().flatten();
        (lit, &s[p.pos..])
    }

    #[test]
    fn numbers_take_the_longest_prefix() {
        assert!(matches!(lex("12,"), (Some(Literal::Int(t)), ",") if t == "12"));
        assert!(matches!(lex("-1.5e+3]"), (Some(Literal::Float(t)), "]") if t == "-1.5e+3"));
        assert!(matches!(lex("1.x"), (Some(Literal::Float(t)), "x") if t == "1."));
        assert!(matches!(lex("-Infinity)"), (Some(Literal::Float(t)), ")") if t == "-Infinity"));
        assert!(matches!(lex("nanx"), (None, "nanx")));
        assert!(Parser::new("1e").literal().is_err());
        assert!(Parser::new("- 1").literal().is_err());
        assert!(matches!(lex(".5"), (None, ".5")));
    }

    #[test]
    fn conversions_follow_the_c_library() {
        let p = Parser::new("");
        assert_eq!(p.to_u64("-1", 0).unwrap(), u64::MAX);
        assert!(p.to_u64("18446744073709551616", 0).is_err());
        assert!(p.to_i64("9223372036854775808", 0).is_err());
        assert!(p.to_f32("3.5e38", 0).is_err());
        assert_eq!(p.to_f32("1e-46", 0).unwrap(), 0.0);
        assert!(p.to_f32("-nan", 0).unwrap().is_sign_negative());
        assert_eq!(p.to_f64("-inf", 0).unwrap(), f64::NEG_INFINITY);
        assert_eq!(p.to_f64("1e300", 0).unwrap(), 1e300);
    }
}
