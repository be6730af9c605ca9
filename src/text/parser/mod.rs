//! Scanner and recursive-descent parser for the ONNX text syntax.
//!
//! The syntax is small and context sensitive (a `.` joins a qualified operator name, `-` starts
//! a number, `inf` is a float only where a value is expected), so the parser scans characters
//! on demand instead of running a separate token pass.
//!
//! This module holds the grammar's rules (models, graphs, types, nodes, functions);
//! `scanner` the character level (cursor, white space, identifiers, strings, literals, errors)
//! and `attributes` the attribute values and their storage.
#![forbid(unsafe_code)]

use super::error::ParseError;
use super::syntax::{elem_type_code, is_type_keyword};
use crate::model::onnx::tensor_proto::DataLocation;
use crate::model::onnx::tensor_shape_proto::{dimension, Dimension};
use crate::model::onnx::type_proto::{self, Value as TypeValue};
use crate::model::onnx::{
    FunctionProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

mod attributes;
mod scanner;

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

    /// `< key: value, ... >`: `entry(self, key)` parses the value of a known key and answers
    /// false for an unknown one, which fails with `expected` at the key.
    fn header(
        &mut self,
        expected: &str,
        mut entry: impl FnMut(&mut Self, &str) -> PResult<bool>,
    ) -> PResult<()> {
        self.expect('<')?;
        loop {
            self.skip_ws();
            let at = self.pos;
            let key = self.expect_ident()?;
            self.expect(':')?;
            if !entry(self, &key)? {
                return Err(self.error_at(at, expected.into()));
            }
            if !self.eat(',') {
                break;
            }
        }
        self.expect('>')
    }

    /// `< key: value, ... >` before a model.
    fn model_header(&mut self, m: &mut ModelProto) -> PResult<()> {
        let expected = "a model key (ir_version, opset_import, producer_name, producer_version, \
                        domain, model_version, doc_string, metadata_props)";
        self.header(expected, |p, key| {
            match key {
                "ir_version" => m.ir_version = Some(p.expect_int()?),
                "model_version" => m.model_version = Some(p.expect_int()?),
                "producer_name" => m.producer_name = Some(p.expect_string()?),
                "producer_version" => m.producer_version = Some(p.expect_string()?),
                "domain" => m.domain = Some(p.expect_string()?),
                "doc_string" => m.doc_string = Some(p.expect_string()?),
                "opset_import" => m.opset_import.extend(p.opset_list()?),
                "metadata_props" => m.metadata_props.extend(p.str_str_list(true)?),
                _ => return Ok(false),
            }
            Ok(true)
        })
    }

    /// `[ item (',' item)* ]`, or `[]` when `allow_empty`.
    fn bracketed<T>(
        &mut self,
        allow_empty: bool,
        mut item: impl FnMut(&mut Self) -> PResult<T>,
    ) -> PResult<Vec<T>> {
        self.expect('[')?;
        let mut out = Vec::new();
        if allow_empty && self.eat(']') {
            return Ok(out);
        }
        loop {
            out.push(item(self)?);
            if !self.eat(',') {
                break;
            }
        }
        self.expect(']')?;
        Ok(out)
    }

    /// `[ "domain" : version, ... ]`
    fn opset_list(&mut self) -> PResult<Vec<OperatorSetIdProto>> {
        self.bracketed(true, |p| {
            let domain = p.expect_string()?;
            p.expect(':')?;
            let version = p.expect_int()?;
            Ok(OperatorSetIdProto {
                domain: Some(domain),
                version: Some(version),
            })
        })
    }

    /// `[ "key" : "value", ... ]`; empty only when `allow_empty`.
    fn str_str_list(&mut self, allow_empty: bool) -> PResult<Vec<StringStringEntryProto>> {
        self.bracketed(allow_empty, |p| {
            let key = p.expect_string()?;
            p.expect(':')?;
            let value = p.expect_string()?;
            Ok(StringStringEntryProto {
                key: Some(key),
                value: Some(value),
            })
        })
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
        let expected = "a function key (domain, overload, doc_string, opset_import)";
        self.header(expected, |p, key| {
            match key {
                "domain" => f.domain = Some(p.expect_string()?),
                "overload" => f.overload = Some(p.expect_string()?),
                "doc_string" => f.doc_string = Some(p.expect_string()?),
                "opset_import" => f.opset_import.extend(p.opset_list()?),
                _ => return Ok(false),
            }
            Ok(true)
        })
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
