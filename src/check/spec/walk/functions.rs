//! The walk over model-local functions: each function, their ids, and their call graph.
#![forbid(unsafe_code)]

use super::*;

impl<'m> Ctx<'m> {
    /// Checks the model-local functions: each one, their ids, and their call graph.
    pub(super) fn functions(&mut self, fs: &'m [FunctionProto]) {
        let mut ids: HashMap<(&str, &str, &str), usize> = HashMap::new();
        for (i, f) in fs.iter().enumerate() {
            let floc = format!("function '{}' (#{i})", s(&f.name));
            let id = (norm_domain(s(&f.domain)), s(&f.name), s(&f.overload));
            if let Some(j) = ids.insert(id, i) {
                self.push(
                    Rule::FunctionUniqueId,
                    floc.clone(),
                    format!(
                        "function (domain '{}', name '{}', overload '{}') is also defined by function #{j}",
                        id.0, id.1, id.2
                    ),
                );
            }
            self.function(f, &floc);
        }
        self.function_calls(fs, &ids);
    }

    /// Checks one function: its interface and its body.
    pub(super) fn function(&mut self, f: &'m FunctionProto, floc: &str) {
        if s(&f.name).is_empty() {
            self.push(
                Rule::FunctionsWellformed,
                floc,
                "the function has no name".into(),
            );
        }
        if !s(&f.overload).is_empty() {
            self.need_ir(10, "function overload", floc);
        }
        if !f.metadata_props.is_empty() {
            self.need_ir(10, "function metadata_props", floc);
        }
        if !f.value_info.is_empty() {
            self.need_ir(10, "function value_info", floc);
        }
        if !f.attribute_proto.is_empty() {
            self.need_ir(9, "function attribute_proto", floc);
        }
        let opsets = self.opsets(&f.opset_import, floc);
        let mut defs: HashMap<&'m str, Def> = HashMap::new();
        for (i, n) in f.input.iter().enumerate() {
            if n.is_empty() {
                self.push(
                    Rule::FunctionsWellformed,
                    format!("{floc} input #{i}"),
                    "a function input has no name".into(),
                );
            } else if defs.insert(n.as_str(), Def::Input(i)).is_some() {
                self.push(
                    Rule::FunctionsWellformed,
                    format!("{floc} input '{n}' (#{i})"),
                    format!("function input '{n}' is listed more than once"),
                );
            }
        }
        // Attribute parameters: names unique across both lists.
        let mut attr_names: HashSet<&str> = HashSet::new();
        for n in f
            .attribute
            .iter()
            .map(String::as_str)
            .chain(f.attribute_proto.iter().map(|a| s(&a.name)))
        {
            if n.is_empty() {
                self.push(
                    Rule::FunctionsWellformed,
                    floc,
                    "a function attribute parameter has no name".into(),
                );
            } else if !attr_names.insert(n) {
                self.push(
                    Rule::FunctionsWellformed,
                    floc,
                    format!("function attribute parameter '{n}' is declared more than once"),
                );
            }
        }
        let env = Env {
            opsets: &opsets,
            in_function: true,
            depth: 0,
        };
        let mut unused = Vec::new();
        for (k, a) in f.attribute_proto.iter().enumerate() {
            let aloc = format!("{floc} attribute_proto '{}' (#{k})", s(&a.name));
            let outer_env = Env {
                in_function: false,
                ..env
            };
            self.attribute(a, &aloc, outer_env, None, &mut unused);
        }
        let mut vi_names: HashSet<&str> = HashSet::new();
        for (i, vi) in f.value_info.iter().enumerate() {
            let vloc = format!("{floc} value_info '{}' (#{i})", s(&vi.name));
            self.value_info(vi, &vloc, false, "value_info");
            let n = s(&vi.name);
            if !n.is_empty() && !vi_names.insert(n) {
                self.push(
                    Rule::UniqueNames,
                    vloc,
                    format!("value_info name '{n}' is listed more than once"),
                );
            }
        }
        self.body(&f.node, &mut defs, floc, None, env, None, &mut unused);
        let mut outs: HashSet<&str> = HashSet::new();
        for (i, n) in f.output.iter().enumerate() {
            let oloc = format!("{floc} output '{n}' (#{i})");
            if n.is_empty() {
                self.push(
                    Rule::FunctionsWellformed,
                    oloc,
                    "a function output has no name".into(),
                );
                continue;
            }
            if !outs.insert(n.as_str()) {
                self.push(
                    Rule::FunctionsWellformed,
                    oloc.clone(),
                    format!("function output '{n}' is listed more than once"),
                );
            }
            if !defs.contains_key(n.as_str()) {
                self.push(
                    Rule::OutputNotProduced,
                    oloc,
                    format!("function output '{n}' is neither an input nor produced by a node"),
                );
            }
        }
        // value_info entries describe values of this function.
        for (i, vi) in f.value_info.iter().enumerate() {
            let n = s(&vi.name);
            if !n.is_empty() && !defs.contains_key(n) {
                self.push(
                    Rule::FunctionsWellformed,
                    format!("{floc} value_info '{n}' (#{i})"),
                    format!("value_info '{n}' names no input, output or value of the function"),
                );
            }
        }
    }

    /// Reports model-local functions that call themselves, directly or through others.
    pub(super) fn function_calls(
        &mut self,
        fs: &'m [FunctionProto],
        ids: &HashMap<(&str, &str, &str), usize>,
    ) {
        if fs.is_empty() {
            return;
        }
        // Calls made by each function, including from graphs nested in its body.
        let mut calls: Vec<Vec<usize>> = Vec::with_capacity(fs.len());
        for f in fs {
            let mut c = Vec::new();
            let mut stack: Vec<(&NodeProto, usize)> = f.node.iter().map(|n| (n, 0)).collect();
            while let Some((n, depth)) = stack.pop() {
                let id = (norm_domain(s(&n.domain)), s(&n.op_type), s(&n.overload));
                if let Some(&j) = ids.get(&id) {
                    c.push(j);
                }
                if depth < self.max_depth() {
                    for a in &n.attribute {
                        for g in a.g.iter().chain(a.graphs.iter()) {
                            stack.extend(g.node.iter().map(|n| (n, depth + 1)));
                        }
                    }
                }
            }
            c.sort_unstable();
            c.dedup();
            calls.push(c);
        }
        // Iterative depth-first search with three colours.
        let n = fs.len();
        let mut colour = vec![0u8; n]; // 0 new, 1 on stack, 2 finished
        let mut reported = vec![false; n];
        for start in 0..n {
            if colour[start] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
            colour[start] = 1;
            while let Some(&mut (f, ref mut next)) = stack.last_mut() {
                if *next < calls[f].len() {
                    let g = calls[f][*next];
                    *next += 1;
                    match colour[g] {
                        0 => {
                            colour[g] = 1;
                            stack.push((g, 0));
                        }
                        1 if !reported[g] => {
                            reported[g] = true;
                            let path: Vec<&str> = stack
                                .iter()
                                .skip_while(|(h, _)| *h != g)
                                .map(|(h, _)| s(&fs[*h].name))
                                .collect();
                            self.push(
                                Rule::FunctionsAcyclic,
                                format!("function '{}' (#{g})", s(&fs[g].name)),
                                format!(
                                    "the function calls itself through {} -> {}",
                                    path.join(" -> "),
                                    s(&fs[g].name)
                                ),
                            );
                        }
                        _ => {}
                    }
                } else {
                    colour[f] = 2;
                    stack.pop();
                }
            }
        }
    }
}
