//! Attributes: `attr-list`, each attribute's value (numbers, strings, tensors, graphs, types,
//! lists of them, references to a function's attributes) and its storage in an
//! `AttributeProto` under the declared or inferred type.
#![forbid(unsafe_code)]

use super::{Literal, PResult, Parser};
use crate::model::onnx::attribute_proto::AttributeType;
use crate::model::onnx::{AttributeProto, GraphProto, TensorProto, TypeProto};
use crate::text::syntax::{attr_type_from_name, is_type_keyword};

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

impl<'a> Parser<'a> {
    /// attr-list ::= '<' attr (',' attr)* '>'
    pub(super) fn attr_list(&mut self) -> PResult<Vec<AttributeProto>> {
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
    pub(super) fn attr_after_name(&mut self, name: String) -> PResult<AttributeProto> {
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
}
