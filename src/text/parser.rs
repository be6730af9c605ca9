//! Scanner and recursive-descent parser for the ONNX text syntax.
//!
//! The syntax is small and context sensitive (a `.` joins a qualified operator name, `-` starts
//! a number, `inf` is a float only where a value is expected), so the parser scans characters
//! on demand instead of running a separate token pass.
#![forbid(unsafe_code)]

use super::error::ParseError;
use super::syntax::{
    attr_type_from_name, elem_type_code, is_float_keyword, is_ident_char, is_ident_start,
    is_type_keyword,
};
use crate::model::onnx::attribute_proto::AttributeType;
use crate::model::onnx::tensor_proto::DataLocation;
use crate::model::onnx::tensor_shape_proto::{dimension, Dimension};
use crate::model::onnx::type_proto::{self, Value as TypeValue};
use crate::model::onnx::{
    AttributeProto, FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    StringStringEntryProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

/// Deepest nesting of graphs, types and attribute values the parser accepts.
pub const MAX_DEPTH: usize = 64;

/// Result of a parsing step.
type PResult<T> = Result<T, ParseError>;

/// A literal as written, kept as text until its use decides how to convert it.
#[derive(Clone, Debug)]
enum Literal {
    /// An integer: optional `-`, digits.
    Int(String),
    /// A float: has a fraction or exponent, or is `inf`/`nan`.
    Float(String),
    /// A quoted string with its escapes resolved.
    Str(String),
}

/// The value of one attribute, before it is stored in an [`AttributeProto`].
enum Single {
    Int(String),
    Float(String),
    Str(String),
    Tensor(TensorProto),
    Graph(GraphProto),
    Type(TypeProto),
    Ref,
}

impl Single {
    /// The scalar attribute type this value has by itself.
    fn kind(&self) -> AttributeType {
        match self {
            Single::Int(_) => AttributeType::Int,
            Single::Float(_) => AttributeType::Float,
            Single::Str(_) => AttributeType::String,
            Single::Tensor(_) => AttributeType::Tensor,
            Single::Graph(_) => AttributeType::Graph,
            Single::Type(_) => AttributeType::TypeProto,
            Single::Ref => AttributeType::Undefined,
        }
    }
}

/// The scalar type whose values make up a list type (and scalars map to themselves).
fn element_kind(t: AttributeType) -> AttributeType {
    match t {
        AttributeType::Floats => AttributeType::Float,
        AttributeType::Ints => AttributeType::Int,
        AttributeType::Strings => AttributeType::String,
        AttributeType::Tensors => AttributeType::Tensor,
        AttributeType::Graphs => AttributeType::Graph,
        AttributeType::SparseTensors => AttributeType::SparseTensor,
        AttributeType::TypeProtos => AttributeType::TypeProto,
        other => other,
    }
}

/// The list type holding values of a scalar type.
fn list_kind(t: AttributeType) -> AttributeType {
    match t {
        AttributeType::Float => AttributeType::Floats,
        AttributeType::Int => AttributeType::Ints,
        AttributeType::String => AttributeType::Strings,
        AttributeType::Tensor => AttributeType::Tensors,
        AttributeType::Graph => AttributeType::Graphs,
        AttributeType::SparseTensor => AttributeType::SparseTensors,
        AttributeType::TypeProto => AttributeType::TypeProtos,
        other => other,
    }
}

/// Whether an attribute type is a list type.
fn is_list_kind(t: AttributeType) -> bool {
    element_kind(t) != t
}

/// The parser state: the source and a byte offset into it.
pub struct Parser<'a> {
    src: &'a str,
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    /// A parser at the start of `src`.
    pub fn new(src: &'a str) -> Self {
        Parser {
            src,
            pos: 0,
            depth: 0,
        }
    }

    // ----- scanning -----------------------------------------------------------------------

    /// The character at the cursor, without skipping anything.
    fn cur(&self) -> Option<char> {
        self.src[self.pos..].chars().next()
    }

    /// Skips white space and `#` comments (to the end of the line).
    fn skip_ws(&mut self) {
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
    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.cur()
    }

    /// Whether the input is used up (apart from white space and comments).
    fn at_end(&mut self) -> bool {
        self.peek().is_none()
    }

    /// Consumes `c` if it is next.
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// Consumes `c`, or fails saying it was expected.
    fn expect(&mut self, c: char) -> PResult<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(format!("`{c}`")))
        }
    }

    /// Consumes `=>`, or fails.
    fn expect_arrow(&mut self) -> PResult<()> {
        self.skip_ws();
        if self.src[self.pos..].starts_with("=>") {
            self.pos += 2;
            Ok(())
        } else {
            Err(self.error("`=>`".into()))
        }
    }

    /// The text of the token at the cursor, for error messages.
    fn token_here(&self) -> String {
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
    fn error(&mut self, expected: String) -> ParseError {
        self.skip_ws();
        ParseError::at(self.src, self.pos, self.token_here(), expected)
    }

    /// An error at byte `offset`, with the token there.
    fn error_at(&self, offset: usize, expected: String) -> ParseError {
        let here = Parser {
            src: self.src,
            pos: offset,
            depth: 0,
        };
        ParseError::at(self.src, offset, here.token_here(), expected)
    }

    /// Enters one nesting level, failing past [`MAX_DEPTH`].
    fn enter(&mut self) -> PResult<()> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error(format!("nesting no deeper than {MAX_DEPTH} levels")));
        }
        self.depth += 1;
        Ok(())
    }

    /// Leaves a nesting level.
    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// The identifier at the next significant character, without consuming it.
    fn peek_ident(&mut self) -> Option<&'a str> {
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
    fn ident(&mut self) -> Option<String> {
        let id = self.peek_ident()?;
        self.pos += id.len();
        Some(id.to_string())
    }

    /// Consumes an identifier, or fails.
    fn expect_ident(&mut self) -> PResult<String> {
        match self.ident() {
            Some(id) => Ok(id),
            None => Err(self.error("an identifier".into())),
        }
    }

    /// Consumes a quoted string (the cursor is on its `"`), resolving `\c` to `c`.
    fn string_body(&mut self) -> PResult<String> {
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
    fn string(&mut self) -> PResult<Option<String>> {
        if self.peek() == Some('"') {
            self.string_body().map(Some)
        } else {
            Ok(None)
        }
    }

    /// Consumes a quoted string, or fails.
    fn expect_string(&mut self) -> PResult<String> {
        match self.string()? {
            Some(s) => Ok(s),
            None => Err(self.error("a quoted string".into())),
        }
    }

    /// Consumes an identifier or a quoted string if one is next.
    fn quotable_id(&mut self) -> PResult<Option<String>> {
        if let Some(id) = self.ident() {
            return Ok(Some(id));
        }
        self.string()
    }

    /// Consumes an identifier or a quoted string, or fails.
    fn expect_quotable_id(&mut self) -> PResult<String> {
        match self.quotable_id()? {
            Some(s) => Ok(s),
            None => Err(self.error("an identifier or a quoted name".into())),
        }
    }

    /// Consumes a literal (number, `inf`/`nan`, or string) if one is next.
    fn literal(&mut self) -> PResult<Option<Literal>> {
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
    fn number(&mut self) -> PResult<Literal> {
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
    fn peek_ident_here(&self) -> Option<&'a str> {
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
    fn digits(&mut self) -> usize {
        let n = self.src.as_bytes()[self.pos..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count();
        self.pos += n;
        n
    }

    /// Consumes an integer literal and converts it to `i64`, or fails.
    fn expect_int(&mut self) -> PResult<i64> {
        self.skip_ws();
        let start = self.pos;
        match self.literal()? {
            Some(Literal::Int(text)) => self.to_i64(&text, start),
            _ => Err(self.error_at(start, "an integer".into())),
        }
    }

    /// Converts integer text to `i64`, failing on overflow.
    fn to_i64(&self, text: &str, at: usize) -> PResult<i64> {
        text.parse::<i64>()
            .map_err(|_| self.error_at(at, "an integer within the 64-bit range".into()))
    }

    /// Converts integer text to `u64` the way `strtoull` does (a `-` wraps around).
    fn to_u64(&self, text: &str, at: usize) -> PResult<u64> {
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
    fn to_f32(&self, text: &str, at: usize) -> PResult<f32> {
        if let Some(v) = special_float(text) {
            return Ok(v as f32);
        }
        match text.parse::<f32>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.error_at(at, "a number within the float range".into())),
        }
    }

    /// Converts number text to `f64`, failing when a finite literal overflows.
    fn to_f64(&self, text: &str, at: usize) -> PResult<f64> {
        if let Some(v) = special_float(text) {
            return Ok(v);
        }
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(v),
            _ => Err(self.error_at(at, "a number within the double range".into())),
        }
    }

    // ----- top level ----------------------------------------------------------------------

    /// Fails unless only white space and comments remain.
    pub fn finish(&mut self) -> PResult<()> {
        if self.at_end() {
            Ok(())
        } else {
            Err(self.error("end of input".into()))
        }
    }

    /// model ::= header? graph function*
    pub fn model(&mut self) -> PResult<ModelProto> {
        let mut model = ModelProto::default();
        if self.peek() == Some('<') {
            self.model_header(&mut model)?;
        }
        model.graph = Some(self.graph()?);
        while !self.at_end() {
            model.functions.push(self.function()?);
        }
        Ok(model)
    }

    /// `< key: value, ... >` before a model.
    fn model_header(&mut self, m: &mut ModelProto) -> PResult<()> {
        self.expect('<')?;
        loop {
            self.skip_ws();
            let at = self.pos;
            let key = self.expect_ident()?;
            self.expect(':')?;
            match key.as_str() {
                "ir_version" => m.ir_version = Some(self.expect_int()?),
                "model_version" => m.model_version = Some(self.expect_int()?),
                "producer_name" => m.producer_name = Some(self.expect_string()?),
                "producer_version" => m.producer_version = Some(self.expect_string()?),
                "domain" => m.domain = Some(self.expect_string()?),
                "doc_string" => m.doc_string = Some(self.expect_string()?),
                "opset_import" => m.opset_import.extend(self.opset_list()?),
                "metadata_props" => m.metadata_props.extend(self.str_str_list(true)?),
                _ => {
                    return Err(self.error_at(
                        at,
                        "a model key (ir_version, opset_import, producer_name, producer_version, \
                         domain, model_version, doc_string, metadata_props)"
                            .into(),
                    ))
                }
            }
            if !self.eat(',') {
                break;
            }
        }
        self.expect('>')
    }

    /// `[ "domain" : version, ... ]`
    fn opset_list(&mut self) -> PResult<Vec<OperatorSetIdProto>> {
        self.expect('[')?;
        let mut out = Vec::new();
        if self.eat(']') {
            return Ok(out);
        }
        loop {
            let domain = self.expect_string()?;
            self.expect(':')?;
            let version = self.expect_int()?;
            out.push(OperatorSetIdProto {
                domain: Some(domain),
                version: Some(version),
            });
            if !self.eat(',') {
                break;
            }
        }
        self.expect(']')?;
        Ok(out)
    }

    /// `[ "key" : "value", ... ]`; empty only when `allow_empty`.
    fn str_str_list(&mut self, allow_empty: bool) -> PResult<Vec<StringStringEntryProto>> {
        self.expect('[')?;
        let mut out = Vec::new();
        if allow_empty && self.eat(']') {
            return Ok(out);
        }
        loop {
            let key = self.expect_string()?;
            self.expect(':')?;
            let value = self.expect_string()?;
            out.push(StringStringEntryProto {
                key: Some(key),
                value: Some(value),
            });
            if !self.eat(',') {
                break;
            }
        }
        self.expect(']')?;
        Ok(out)
    }

    // ----- graphs -------------------------------------------------------------------------

    /// graph ::= name '(' inputs ')' '=>' '(' outputs ')' ('<' infos-or-initializers '>')? nodes
    pub fn graph(&mut self) -> PResult<GraphProto> {
        self.enter()?;
        let name = self.expect_quotable_id()?;
        let g = self.graph_rest(name);
        self.leave();
        g
    }

    /// The graph after its name.
    fn graph_rest(&mut self, name: String) -> PResult<GraphProto> {
        let mut g = GraphProto {
            name: Some(name),
            ..Default::default()
        };
        self.expect('(')?;
        if !self.eat(')') {
            loop {
                let (info, init) = self.value_info_or_initializer(true)?;
                if let Some(t) = init {
                    g.initializer.push(t);
                }
                g.input.push(info);
                if !self.eat(',') {
                    break;
                }
            }
            self.expect(')')?;
        }
        self.expect_arrow()?;
        self.expect('(')?;
        if !self.eat(')') {
            loop {
                g.output.push(self.value_info(true)?);
                if !self.eat(',') {
                    break;
                }
            }
            self.expect(')')?;
        }
        if self.eat('<') && !self.eat('>') {
            loop {
                let (info, init) = self.value_info_or_initializer(true)?;
                match init {
                    Some(t) => g.initializer.push(t),
                    None => g.value_info.push(info),
                }
                if !self.eat(',') {
                    break;
                }
            }
            self.expect('>')?;
        }
        g.node = self.node_list()?;
        Ok(g)
    }

    /// `type? name`; the type is optional when `type_optional`.
    fn value_info(&mut self, type_optional: bool) -> PResult<ValueInfoProto> {
        let ty = match self.peek_ident() {
            Some(id) if is_type_keyword(id) => Some(self.type_()?),
            _ if type_optional => None,
            _ => return Err(self.error("a type".into())),
        };
        let name = self.expect_quotable_id()?;
        Ok(ValueInfoProto {
            name: Some(name),
            r#type: ty,
            ..Default::default()
        })
    }

    /// `type? name ('=' data)?`: a value info, and the initializer when data follows.
    fn value_info_or_initializer(
        &mut self,
        type_optional: bool,
    ) -> PResult<(ValueInfoProto, Option<TensorProto>)> {
        self.skip_ws();
        let type_at = self.pos;
        let info = self.value_info(type_optional)?;
        if !self.eat('=') {
            return Ok((info, None));
        }
        let Some(ty) = info.r#type.as_ref() else {
            return Err(self.error_at(type_at, "a tensor type before an initializer".into()));
        };
        let mut tensor = self.tensor_header(ty, type_at)?;
        tensor.name.clone_from(&info.name);
        match self.peek() {
            Some('{') => self.tensor_data(&mut tensor)?,
            Some('[') => {
                tensor.external_data = self.str_str_list(false)?;
                tensor.data_location = Some(DataLocation::External as i32);
            }
            _ => return Err(self.error("`{` or `[` (tensor data)".into())),
        }
        Ok((info, Some(tensor)))
    }

    /// A `TensorProto` with the element type and dimensions of a tensor type.
    fn tensor_header(&self, ty: &TypeProto, at: usize) -> PResult<TensorProto> {
        let Some(TypeValue::TensorType(tt)) = &ty.value else {
            return Err(self.error_at(at, "a tensor type".into()));
        };
        let Some(shape) = &tt.shape else {
            return Err(self.error_at(at, "a tensor type with a shape (not `[]`)".into()));
        };
        let mut dims = Vec::with_capacity(shape.dim.len());
        for d in &shape.dim {
            match d.value {
                Some(dimension::Value::DimValue(v)) => dims.push(v),
                _ => return Err(self.error_at(at, "numeric dimensions in a tensor".into())),
            }
        }
        Ok(TensorProto {
            dims,
            data_type: tt.elem_type,
            ..Default::default()
        })
    }

    /// `{ value, ... }` filling the data field that suits the tensor's element type.
    fn tensor_data(&mut self, t: &mut TensorProto) -> PResult<()> {
        self.expect('{')?;
        if self.eat('}') {
            return Ok(());
        }
        let dtype = t.data_type.unwrap_or(0);
        loop {
            self.skip_ws();
            let at = self.pos;
            let lit = self.literal()?;
            match (dtype, lit) {
                (1 | 14, Some(Literal::Int(s) | Literal::Float(s))) => {
                    t.float_data.push(self.to_f32(&s, at)?)
                }
                (11 | 15, Some(Literal::Int(s) | Literal::Float(s))) => {
                    t.double_data.push(self.to_f64(&s, at)?)
                }
                (7, Some(Literal::Int(s))) => t.int64_data.push(self.to_i64(&s, at)?),
                (12 | 13, Some(Literal::Int(s))) => t.uint64_data.push(self.to_u64(&s, at)?),
                (8, Some(Literal::Str(s))) => t.string_data.push(s.into_bytes()),
                (6, Some(Literal::Int(s))) => {
                    let v = self.to_i64(&s, at)?;
                    let v = i32::try_from(v).map_err(|_| {
                        self.error_at(at, "an integer within the int32 range".into())
                    })?;
                    t.int32_data.push(v);
                }
                (8, _) => return Err(self.error_at(at, "a quoted string".into())),
                (1 | 14 | 11 | 15, _) => return Err(self.error_at(at, "a number".into())),
                (0, _) => return Err(self.error_at(at, "a tensor with an element type".into())),
                (_, Some(Literal::Int(s))) => {
                    // Every other element type keeps its values in int32_data.
                    t.int32_data.push(self.to_i64(&s, at)? as i32)
                }
                _ => return Err(self.error_at(at, "an integer".into())),
            }
            if !self.eat(',') {
                break;
            }
        }
        self.expect('}')
    }

    // ----- types --------------------------------------------------------------------------

    /// type ::= prim ('[' dims? ']')? | seq(type) | map(prim, type) | optional(type)
    ///        | sparse_tensor(tensor-type) | opaque(domain, name) | opaque(name) | opaque()
    pub fn type_(&mut self) -> PResult<TypeProto> {
        self.enter()?;
        let t = self.type_inner();
        self.leave();
        t
    }

    /// The body of [`Parser::type_`].
    fn type_inner(&mut self) -> PResult<TypeProto> {
        self.skip_ws();
        let at = self.pos;
        let id = self.expect_ident()?;
        let value = match id.as_str() {
            "seq" => {
                self.expect('(')?;
                let elem = self.type_()?;
                self.expect(')')?;
                TypeValue::SequenceType(Box::new(type_proto::Sequence {
                    elem_type: Some(Box::new(elem)),
                }))
            }
            "optional" => {
                self.expect('(')?;
                let elem = self.type_()?;
                self.expect(')')?;
                TypeValue::OptionalType(Box::new(type_proto::Optional {
                    elem_type: Some(Box::new(elem)),
                }))
            }
            "map" => {
                self.expect('(')?;
                self.skip_ws();
                let key_at = self.pos;
                let key = self.expect_ident()?;
                let key_type = elem_type_code(&key)
                    .ok_or_else(|| self.error_at(key_at, "an element type as map key".into()))?;
                self.expect(',')?;
                let value = self.type_()?;
                self.expect(')')?;
                TypeValue::MapType(Box::new(type_proto::Map {
                    key_type: Some(key_type),
                    value_type: Some(Box::new(value)),
                }))
            }
            "opaque" => {
                // opaque '(' (qualified-id (',' id)?)? ')': one name is the type's name, two are
                // domain and name (as onnx.parser reads them).
                self.expect('(')?;
                let mut domain = None;
                let mut name = None;
                if !self.eat(')') {
                    let (prefix, last) = self.qualified_id()?;
                    let first = if prefix.is_empty() {
                        last
                    } else {
                        format!("{prefix}.{last}")
                    };
                    if self.eat(',') {
                        domain = Some(first);
                        name = Some(self.expect_ident()?);
                    } else {
                        name = Some(first);
                    }
                    self.expect(')')?;
                }
                TypeValue::OpaqueType(type_proto::Opaque { domain, name })
            }
            "sparse_tensor" => {
                self.expect('(')?;
                self.skip_ws();
                let elem_at = self.pos;
                let elem = self.expect_ident()?;
                let code = elem_type_code(&elem)
                    .ok_or_else(|| self.error_at(elem_at, "an element type".into()))?;
                let shape = self.shape()?;
                self.expect(')')?;
                TypeValue::SparseTensorType(type_proto::SparseTensor {
                    elem_type: Some(code),
                    shape,
                })
            }
            other => {
                let code =
                    elem_type_code(other).ok_or_else(|| self.error_at(at, "a type".into()))?;
                let shape = self.shape()?;
                TypeValue::TensorType(type_proto::Tensor {
                    elem_type: Some(code),
                    shape,
                })
            }
        };
        Ok(TypeProto {
            value: Some(value),
            ..Default::default()
        })
    }

    /// The shape after an element type: nothing is a scalar (empty shape), `[]` is unknown
    /// rank (no shape), `[d, ...]` lists dimensions.
    fn shape(&mut self) -> PResult<Option<TensorShapeProto>> {
        if !self.eat('[') {
            return Ok(Some(TensorShapeProto::default()));
        }
        if self.eat(']') {
            return Ok(None);
        }
        let mut shape = TensorShapeProto::default();
        loop {
            shape.dim.push(self.dim()?);
            if !self.eat(',') {
                break;
            }
        }
        self.expect(']')?;
        Ok(Some(shape))
    }

    /// tensor-dim ::= '?' | id | "quoted" | int
    fn dim(&mut self) -> PResult<Dimension> {
        if self.eat('?') {
            return Ok(Dimension::default());
        }
        if let Some(param) = self.quotable_id()? {
            return Ok(Dimension {
                value: Some(dimension::Value::DimParam(param)),
                ..Default::default()
            });
        }
        let v = self.expect_int()?;
        Ok(Dimension {
            value: Some(dimension::Value::DimValue(v)),
            ..Default::default()
        })
    }

    // ----- nodes --------------------------------------------------------------------------

    /// node-list ::= '{' node* '}'
    pub fn node_list(&mut self) -> PResult<Vec<NodeProto>> {
        self.expect('{')?;
        let mut nodes = Vec::new();
        while !self.eat('}') {
            if self.at_end() {
                return Err(self.error("`}`".into()));
            }
            nodes.push(self.node()?);
        }
        Ok(nodes)
    }

    /// A node list in braces, or nodes one after another up to the end of input.
    pub fn nodes(&mut self) -> PResult<Vec<NodeProto>> {
        if self.peek() == Some('{') {
            return self.node_list();
        }
        let mut nodes = Vec::new();
        while !self.at_end() {
            nodes.push(self.node()?);
        }
        Ok(nodes)
    }

    /// node ::= ('[' name ']')? outputs '=' op ('<' attrs '>')? '(' inputs ')' ('<' attrs '>')?
    pub fn node(&mut self) -> PResult<NodeProto> {
        let mut n = NodeProto::default();
        if self.eat('[') {
            n.name = Some(self.quotable_id()?.unwrap_or_default());
            self.expect(']')?;
        }
        n.output = self.name_list()?;
        self.expect('=')?;
        // A node may be written without an operator (`y = (x)`): onnx.parser reads it as an
        // empty op_type, which the checker then reports (`node-op-type`).
        if matches!(self.peek(), Some('(' | '<')) {
            n.domain = Some(String::new());
            n.op_type = Some(String::new());
        } else {
            let (domain, op) = self.qualified_id()?;
            n.domain = Some(domain);
            n.op_type = Some(op);
            if self.eat(':') {
                n.overload = Some(self.expect_ident()?);
            }
        }
        let attrs_first = self.peek() == Some('<');
        if attrs_first {
            n.attribute = self.attr_list()?;
        }
        self.expect('(')?;
        n.input = self.name_list()?;
        self.expect(')')?;
        if !attrs_first && self.peek() == Some('<') {
            n.attribute = self.attr_list()?;
        }
        Ok(n)
    }

    /// Comma-separated names where an item may be left empty (an absent optional value); an
    /// empty last item is dropped, so `(x,)` is `[x]` and `()` is `[]`.
    fn name_list(&mut self) -> PResult<Vec<String>> {
        let mut items: Vec<Option<String>> = Vec::new();
        loop {
            items.push(self.quotable_id()?);
            if !self.eat(',') {
                break;
            }
        }
        if matches!(items.last(), Some(None)) {
            items.pop();
        }
        Ok(items.into_iter().map(Option::unwrap_or_default).collect())
    }

    /// qualified-id ::= '.'? id ('.' id)*; returns (domain, op_type).
    fn qualified_id(&mut self) -> PResult<(String, String)> {
        self.eat('.');
        let mut parts = vec![self.expect_ident()?];
        while self.eat('.') {
            parts.push(self.expect_ident()?);
        }
        let op = parts.pop().unwrap_or_default();
        Ok((parts.join("."), op))
    }

    /// attr-list ::= '<' attr (',' attr)* '>'
    fn attr_list(&mut self) -> PResult<Vec<AttributeProto>> {
        self.expect('<')?;
        let mut attrs = Vec::new();
        loop {
            let name = self.expect_ident()?;
            attrs.push(self.attr_after_name(name)?);
            if !self.eat(',') {
                break;
            }
        }
        self.expect('>')?;
        Ok(attrs)
    }

    /// attr ::= id (':' attr-type)? '=' value, after the name.
    fn attr_after_name(&mut self, name: String) -> PResult<AttributeProto> {
        let mut declared = None;
        if self.eat(':') {
            self.skip_ws();
            let at = self.pos;
            let tname = self.expect_ident()?;
            declared = Some(
                attr_type_from_name(&tname)
                    .ok_or_else(|| self.error_at(at, "an attribute type".into()))?,
            );
        }
        self.expect('=')?;
        let mut attr = AttributeProto {
            name: Some(name),
            ..Default::default()
        };
        self.enter()?;
        let r = self.attr_value(&mut attr, declared);
        self.leave();
        r?;
        Ok(attr)
    }

    /// Parses an attribute value into `attr`, checking it against the declared type.
    fn attr_value(
        &mut self,
        attr: &mut AttributeProto,
        declared: Option<AttributeType>,
    ) -> PResult<()> {
        self.skip_ws();
        let at = self.pos;
        if self.eat('[') {
            let mut elem = declared.map(element_kind);
            let mut values = Vec::new();
            if !self.eat(']') {
                loop {
                    self.skip_ws();
                    let v_at = self.pos;
                    let v = self.single_value(elem)?;
                    if matches!(v, Single::Ref) {
                        return Err(
                            self.error_at(v_at, "a value (not a reference) in a list".into())
                        );
                    }
                    let k = elem.get_or_insert(v.kind());
                    values.push((v, v_at, *k));
                    if !self.eat(',') {
                        break;
                    }
                }
                self.expect(']')?;
            }
            let Some(elem) = elem else {
                return Err(self.error_at(at, "a type annotation on an empty list".into()));
            };
            for (v, v_at, k) in values {
                self.store(attr, v, k, true, v_at)?;
            }
            attr.r#type = Some(list_kind(elem) as i32);
            return Ok(());
        }
        if self.peek() == Some('@') {
            self.pos += 1;
            attr.ref_attr_name = Some(self.expect_ident()?);
            attr.r#type = declared.map(|t| t as i32);
            return Ok(());
        }
        if let Some(t) = declared {
            if is_list_kind(t) {
                return Err(self.error_at(at, format!("a list for type {}", t.as_str_name())));
            }
        }
        let v = self.single_value(declared)?;
        let k = declared.unwrap_or(v.kind());
        self.store(attr, v, k, false, at)?;
        attr.r#type = Some(k as i32);
        Ok(())
    }

    /// Stores one value of kind `k` into the scalar or list field of `attr`.
    fn store(
        &self,
        attr: &mut AttributeProto,
        v: Single,
        k: AttributeType,
        list: bool,
        at: usize,
    ) -> PResult<()> {
        let mismatch = |v: &Single| {
            self.error_at(
                at,
                format!(
                    "a value of type {} (found {})",
                    k.as_str_name(),
                    v.kind().as_str_name()
                ),
            )
        };
        match (k, v) {
            (AttributeType::Float, Single::Int(s) | Single::Float(s)) => {
                let f = self.to_f32(&s, at)?;
                if list {
                    attr.floats.push(f)
                } else {
                    attr.f = Some(f)
                }
            }
            (AttributeType::Int, Single::Int(s)) => {
                let i = self.to_i64(&s, at)?;
                if list {
                    attr.ints.push(i)
                } else {
                    attr.i = Some(i)
                }
            }
            (AttributeType::String, Single::Str(s)) => {
                if list {
                    attr.strings.push(s.into_bytes())
                } else {
                    attr.s = Some(s.into_bytes())
                }
            }
            (AttributeType::Tensor, Single::Tensor(t)) => {
                if list {
                    attr.tensors.push(t)
                } else {
                    attr.t = Some(t)
                }
            }
            (AttributeType::Graph, Single::Graph(g)) => {
                if list {
                    attr.graphs.push(g)
                } else {
                    attr.g = Some(g)
                }
            }
            (AttributeType::TypeProto, Single::Type(t)) => {
                if list {
                    attr.type_protos.push(t)
                } else {
                    attr.tp = Some(t)
                }
            }
            (_, v) => return Err(mismatch(&v)),
        }
        Ok(())
    }

    /// single-attr-value ::= literal | '@' id | tensor-constant | graph | type (when declared).
    fn single_value(&mut self, declared: Option<AttributeType>) -> PResult<Single> {
        if self.eat('@') {
            self.expect_ident()?;
            return Ok(Single::Ref);
        }
        if declared.map(element_kind) == Some(AttributeType::TypeProto) {
            return Ok(Single::Type(self.type_()?));
        }
        self.skip_ws();
        let at = self.pos;
        if let Some(lit) = self.literal()? {
            return Ok(match lit {
                Literal::Int(s) => Single::Int(s),
                Literal::Float(s) => Single::Float(s),
                Literal::Str(s) => Single::Str(s),
            });
        }
        match self.peek_ident() {
            Some(id) if is_type_keyword(id) => {
                let ty = self.type_()?;
                let mut t = self.tensor_header(&ty, at)?;
                t.name = Some(self.ident().unwrap_or_default());
                self.eat('=');
                if self.peek() != Some('{') {
                    return Err(self.error("`{` (tensor data)".into()));
                }
                self.tensor_data(&mut t)?;
                Ok(Single::Tensor(t))
            }
            Some(_) => {
                let name = self.expect_ident()?;
                self.enter()?;
                let g = self.graph_rest(name);
                self.leave();
                Ok(Single::Graph(g?))
            }
            None => Err(self.error("an attribute value".into())),
        }
    }

    // ----- functions ----------------------------------------------------------------------

    /// function ::= header? name ('<' params '>')? '(' ins ')' '=>' '(' outs ')'
    ///              ('<' value-infos '>')? nodes
    pub fn function(&mut self) -> PResult<FunctionProto> {
        let mut f = FunctionProto::default();
        if self.peek() == Some('<') {
            self.function_header(&mut f)?;
        }
        f.name = Some(self.expect_quotable_id()?);
        if self.eat('<') {
            loop {
                let name = self.expect_ident()?;
                if matches!(self.peek(), Some(':' | '=')) {
                    f.attribute_proto.push(self.attr_after_name(name)?);
                } else {
                    f.attribute.push(name);
                }
                if !self.eat(',') {
                    break;
                }
            }
            self.expect('>')?;
        }
        let mut infos = Vec::new();
        f.input = self.function_io(&mut infos)?;
        self.expect_arrow()?;
        f.output = self.function_io(&mut infos)?;
        if self.eat('<') && !self.eat('>') {
            loop {
                infos.push(self.value_info(true)?);
                if !self.eat(',') {
                    break;
                }
            }
            self.expect('>')?;
        }
        f.value_info = infos;
        f.node = self.node_list()?;
        Ok(f)
    }

    /// `< key: value, ... >` before a function.
    fn function_header(&mut self, f: &mut FunctionProto) -> PResult<()> {
        self.expect('<')?;
        loop {
            self.skip_ws();
            let at = self.pos;
            let key = self.expect_ident()?;
            self.expect(':')?;
            match key.as_str() {
                "domain" => f.domain = Some(self.expect_string()?),
                "overload" => f.overload = Some(self.expect_string()?),
                "doc_string" => f.doc_string = Some(self.expect_string()?),
                "opset_import" => f.opset_import.extend(self.opset_list()?),
                _ => {
                    return Err(self.error_at(
                        at,
                        "a function key (domain, overload, doc_string, opset_import)".into(),
                    ))
                }
            }
            if !self.eat(',') {
                break;
            }
        }
        self.expect('>')
    }

    /// `( type? name, ... )`; typed entries are also recorded as value infos.
    fn function_io(&mut self, infos: &mut Vec<ValueInfoProto>) -> PResult<Vec<String>> {
        self.expect('(')?;
        let mut names = Vec::new();
        if self.eat(')') {
            return Ok(names);
        }
        loop {
            let info = self.value_info(true)?;
            names.push(info.name.clone().unwrap_or_default());
            if info.r#type.is_some() {
                infos.push(info);
            }
            if !self.eat(',') {
                break;
            }
        }
        self.expect(')')?;
        Ok(names)
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
