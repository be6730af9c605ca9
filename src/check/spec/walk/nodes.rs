//! The walk over nodes: a node's own fields, its attributes and the graphs they hold.
#![forbid(unsafe_code)]

use super::*;

impl<'m> Ctx<'m> {
    /// Checks a node's own fields: operator, domain, IR-versioned fields, device configuration.
    pub(super) fn node_fields(&mut self, node: &'m NodeProto, nloc: &str, env: Env<'_, 'm>) {
        let op = s(&node.op_type);
        if op.is_empty() {
            self.push(Rule::NodeOpType, nloc, "the node has no op_type".into());
        }
        let d = norm_domain(s(&node.domain));
        if !self.pre_opsets && !env.opsets.contains_key(d) {
            let by = if env.in_function {
                "the function"
            } else {
                "the model"
            };
            self.push(
                Rule::OpsetImported,
                nloc,
                format!(
                    "operator '{op}' is from domain '{}', which {by} does not import",
                    show_domain(d)
                ),
            );
        }
        if !s(&node.overload).is_empty() {
            self.need_ir(10, "node overload", nloc);
        }
        if !node.metadata_props.is_empty() {
            self.need_ir(10, "node metadata_props", nloc);
        }
        if !node.device_configurations.is_empty() {
            self.need_ir(11, "node device_configurations", nloc);
        }
    }

    /// Checks a node's (or function's default) attributes.
    pub(super) fn attributes(
        &mut self,
        attrs: &'m [AttributeProto],
        nloc: &str,
        env: Env<'_, 'm>,
        scope: Option<&Scope<'_, 'm>>,
        free: &mut Vec<&'m str>,
    ) {
        let mut seen: HashSet<&str> = HashSet::new();
        for (k, a) in attrs.iter().enumerate() {
            let n = s(&a.name);
            let aloc = format!("{nloc} attribute '{n}'");
            if !n.is_empty() && !seen.insert(n) {
                self.push(
                    Rule::AttributeNamesUnique,
                    aloc.clone(),
                    format!("attribute '{n}' is given more than once"),
                );
            }
            if n.is_empty() {
                self.push(
                    Rule::AttributeNameType,
                    format!("{nloc} attribute #{k}"),
                    "the attribute has no name".into(),
                );
            } else {
                self.ident(n, "attribute name", &aloc);
            }
            self.attribute(a, &aloc, env, scope, free);
        }
    }

    /// Checks one attribute: its type, its single value, and the values it holds.
    pub(super) fn attribute(
        &mut self,
        a: &'m AttributeProto,
        aloc: &str,
        env: Env<'_, 'm>,
        scope: Option<&Scope<'_, 'm>>,
        free: &mut Vec<&'m str>,
    ) {
        use AttributeType as T;
        let set: [(T, bool); 14] = [
            (T::Float, a.f.is_some()),
            (T::Int, a.i.is_some()),
            (T::String, a.s.is_some()),
            (T::Tensor, a.t.is_some()),
            (T::Graph, a.g.is_some()),
            (T::SparseTensor, a.sparse_tensor.is_some()),
            (T::TypeProto, a.tp.is_some()),
            (T::Floats, !a.floats.is_empty()),
            (T::Ints, !a.ints.is_empty()),
            (T::Strings, !a.strings.is_empty()),
            (T::Tensors, !a.tensors.is_empty()),
            (T::Graphs, !a.graphs.is_empty()),
            (T::SparseTensors, !a.sparse_tensors.is_empty()),
            (T::TypeProtos, !a.type_protos.is_empty()),
        ];
        let used: Vec<T> = set.iter().filter(|(_, b)| *b).map(|(t, _)| *t).collect();
        let declared = match a.r#type {
            None | Some(0) => None,
            Some(v) => match T::try_from(v) {
                Ok(t) => Some(t),
                Err(_) => {
                    self.push(
                        Rule::AttributeNameType,
                        aloc,
                        format!("attribute type {v} is not a defined AttributeType"),
                    );
                    return;
                }
            },
        };
        let is_ref = !s(&a.ref_attr_name).is_empty();
        if is_ref && !env.in_function {
            self.push(
                Rule::RefAttrInFunction,
                aloc,
                format!(
                    "the attribute refers to function attribute '{}' outside a function body",
                    s(&a.ref_attr_name)
                ),
            );
        }
        if declared.is_none() && self.ir >= 2 {
            self.push(
                Rule::AttributeNameType,
                aloc,
                "the attribute has no type".into(),
            );
        }
        let names: Vec<&str> = used.iter().map(|t| t.as_str_name()).collect();
        if used.len() > 1 {
            self.push(
                Rule::AttributeOneValue,
                aloc,
                format!(
                    "the attribute sets several value fields ({})",
                    names.join(", ")
                ),
            );
        } else if is_ref && !used.is_empty() {
            self.push(
                Rule::AttributeOneValue,
                aloc,
                format!("a reference attribute also sets a value ({})", names[0]),
            );
        } else if let (Some(t), [u]) = (declared, used.as_slice()) {
            if t != *u {
                self.push(
                    Rule::AttributeTypeMatches,
                    aloc,
                    format!(
                        "the attribute's type is {} but it sets the {} field",
                        t.as_str_name(),
                        u.as_str_name()
                    ),
                );
            }
        } else if let (Some(t), []) = (declared, used.as_slice()) {
            let scalar = matches!(
                t,
                T::Float
                    | T::Int
                    | T::String
                    | T::Tensor
                    | T::Graph
                    | T::SparseTensor
                    | T::TypeProto
            );
            if scalar && !is_ref {
                self.push(
                    Rule::AttributeOneValue,
                    aloc,
                    format!("the {} attribute carries no value", t.as_str_name()),
                );
            }
        }
        if declared.is_some_and(|t| matches!(t, T::SparseTensor | T::SparseTensors))
            || a.sparse_tensor.is_some()
            || !a.sparse_tensors.is_empty()
        {
            self.need_ir(6, "sparse tensor attributes", aloc);
        }

        // The values themselves.
        if let Some(t) = a.t.as_ref() {
            self.tensor(t, aloc);
        }
        for (k, t) in a.tensors.iter().enumerate() {
            self.tensor(t, &format!("{aloc} tensor #{k}"));
        }
        if let Some(sp) = a.sparse_tensor.as_ref() {
            self.sparse(sp, aloc);
        }
        for (k, sp) in a.sparse_tensors.iter().enumerate() {
            self.sparse(sp, &format!("{aloc} sparse tensor #{k}"));
        }
        if let Some(tp) = a.tp.as_ref() {
            self.type_proto(tp, aloc, 0);
        }
        for tp in &a.type_protos {
            self.type_proto(tp, aloc, 0);
        }
        let graphs = a.g.iter().chain(a.graphs.iter());
        for g in graphs {
            self.subgraph(g, aloc, env, scope, free);
        }
    }

    /// Checks a graph held by an attribute, unless the depth limit is reached.
    pub(super) fn subgraph(
        &mut self,
        g: &'m GraphProto,
        aloc: &str,
        env: Env<'_, 'm>,
        scope: Option<&Scope<'_, 'm>>,
        free: &mut Vec<&'m str>,
    ) {
        let gloc = format!("{aloc} graph '{}'", s(&g.name));
        if env.depth + 1 > self.max_depth() {
            self.push(
                Rule::GraphDepthLimit,
                gloc,
                format!(
                    "graphs nest deeper than {} levels; the rest is not checked",
                    self.max_depth()
                ),
            );
            return;
        }
        let sub_env = Env {
            depth: env.depth + 1,
            ..env
        };
        self.graph_free(g, &gloc, Kind::Nested, scope, sub_env, free);
    }
}
