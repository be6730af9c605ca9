//! The walk over a model: model fields, graphs and their scopes, nodes, attributes, functions,
//! training information and device configurations.
#![forbid(unsafe_code)]

use super::names::{is_c_identifier, is_reverse_dns, norm_domain, show_domain};
use super::{Level, Options, Rule, Violation};
use crate::model::onnx::{
    attribute_proto::AttributeType, AttributeProto, FunctionProto, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, TrainingInfoProto, ValueInfoProto,
};
use std::collections::{HashMap, HashSet};

/// The newest IR version this checker knows (the `IR_VERSION` of `proto/onnx.proto`).
pub(crate) const MAX_IR_VERSION: i64 = 14;

/// Imported operator sets: normalised domain to version.
pub(crate) type Opsets<'m> = HashMap<&'m str, i64>;

/// Where a value is defined within one graph or function body.
#[derive(Clone, Copy, Debug)]
enum Def {
    /// A graph (or function) input, by position.
    Input(usize),
    /// A dense or sparse initializer, by position.
    Init(usize),
    /// The output of a node, by node position.
    Node(usize),
}

impl Def {
    /// Position in evaluation order: inputs and initializers come first, then node `i` at `i+1`.
    fn site(self) -> usize {
        match self {
            Def::Input(_) | Def::Init(_) => 0,
            Def::Node(i) => i + 1,
        }
    }
}

/// The names visible from a nested graph: one enclosing graph's definitions up to the node that
/// owns the nested graph, then that graph's own enclosing scope.
struct Scope<'s, 'm> {
    defs: &'s HashMap<&'m str, Def>,
    /// Definitions whose site is below this are visible.
    limit: usize,
    /// The enclosing graph's location, for messages.
    loc: &'s str,
    parent: Option<&'s Scope<'s, 'm>>,
}

/// What a name resolves to in the enclosing scopes.
enum Lookup<'s> {
    /// Defined before the owning node in some enclosing graph.
    Visible,
    /// Defined in an enclosing graph, but by its node `node` at or after the owning node.
    Later { loc: &'s str, node: usize },
    /// Not defined anywhere outside.
    Missing,
}

impl<'s> Scope<'s, '_> {
    fn lookup(&self, name: &str) -> Lookup<'s> {
        let mut first_later = None;
        let mut scope = Some(self);
        while let Some(s) = scope {
            if let Some(def) = s.defs.get(name) {
                if def.site() < s.limit {
                    return Lookup::Visible;
                }
                if first_later.is_none() {
                    if let Def::Node(node) = *def {
                        first_later = Some(Lookup::Later { loc: s.loc, node });
                    }
                }
            }
            scope = s.parent;
        }
        first_later.unwrap_or(Lookup::Missing)
    }
}

/// The kind of graph being checked, which decides the rules on its interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `ModelProto.graph`.
    Main,
    /// A graph held by an attribute.
    Nested,
    /// `TrainingInfoProto.initialization`.
    TrainingInit,
    /// `TrainingInfoProto.algorithm`, evaluated together with the main graph.
    TrainingAlgorithm,
}

/// What the nodes being checked may rely on.
#[derive(Clone, Copy)]
struct Env<'e, 'm> {
    /// The operator sets node domains must come from.
    opsets: &'e Opsets<'m>,
    /// Whether these nodes are (inside) a function body.
    in_function: bool,
    /// Nesting depth of the graph being checked (the main graph is 0).
    depth: usize,
}

/// The checker's state: options, the model's IR version, and the violations found so far.
pub(crate) struct Ctx<'m> {
    opts: Options,
    /// The model's IR version (the newest known when missing or out of range).
    pub(crate) ir: i64,
    /// Whether the model is older than IR 3 (no operator set imports existed).
    pre_opsets: bool,
    out: Vec<Violation>,
    graph_names: HashMap<&'m str, String>,
}

/// Runs every check on a model.
pub(crate) fn check(m: &ModelProto, opts: &Options) -> Vec<Violation> {
    let ir = match m.ir_version {
        Some(v) if (1..=MAX_IR_VERSION).contains(&v) => v,
        _ => MAX_IR_VERSION,
    };
    let mut cx = Ctx {
        opts: Options {
            max_depth: opts.max_depth.min(super::MAX_DEPTH_CAP),
            ..*opts
        },
        ir,
        pre_opsets: matches!(m.ir_version, Some(v) if (1..3).contains(&v)),
        out: Vec::new(),
        graph_names: HashMap::new(),
    };
    cx.model(m);
    let mut opsets = Opsets::new();
    for o in &m.opset_import {
        if let Some(v) = o.version {
            opsets.insert(norm_domain(s(&o.domain)), v);
        }
    }
    super::signature::check(&mut cx, m, &opsets);
    cx.out
}

/// Location of a node for messages: `node 'conv1' (#3)`, or `node #3 (Relu)` when unnamed.
/// How a node is named in violation locations.
pub(crate) fn node_loc(graph_loc: &str, node: &NodeProto, i: usize) -> String {
    match node.name.as_deref() {
        Some(n) if !n.is_empty() => format!("{graph_loc} node '{n}' (#{i})"),
        _ => format!(
            "{graph_loc} node #{i} ({})",
            node.op_type.as_deref().unwrap_or("")
        ),
    }
}

fn s(o: &Option<String>) -> &str {
    o.as_deref().unwrap_or("")
}

impl<'m> Ctx<'m> {
    /// Whether a rule is checked under the current options.
    pub(crate) fn enabled(&self, rule: Rule) -> bool {
        rule.info().level == Level::Required || self.opts.pedantic
    }

    /// Records a violation (if the rule is enabled).
    pub(crate) fn push(&mut self, rule: Rule, location: impl Into<String>, message: String) {
        if self.enabled(rule) {
            self.out.push(Violation {
                rule,
                location: location.into(),
                message,
            });
        }
    }

    /// Records an `ir-version-features` violation when `what` needs a newer IR than the model's.
    pub(crate) fn need_ir(&mut self, min: i64, what: &str, location: &str) {
        if self.ir < min {
            self.push(
                Rule::IrVersionFeatures,
                location,
                format!(
                    "{what} needs IR version {min}, but the model declares {}",
                    self.ir
                ),
            );
        }
    }

    /// The nesting limit for graphs and types.
    pub(crate) fn max_depth(&self) -> usize {
        self.opts.max_depth
    }

    /// Checks a name for C identifier syntax (pedantic).
    fn ident(&mut self, name: &str, what: &str, location: &str) {
        if self.opts.pedantic && !name.is_empty() && !is_c_identifier(name) {
            self.push(
                Rule::CIdentifierNames,
                location,
                format!("{what} '{name}' is not a C identifier"),
            );
        }
    }

    fn model(&mut self, m: &'m ModelProto) {
        let loc = "model";
        match m.ir_version {
            None => self.push(Rule::IrVersion, loc, "ir_version is missing".into()),
            Some(v) if !(1..=MAX_IR_VERSION).contains(&v) => self.push(
                Rule::IrVersion,
                loc,
                format!("ir_version {v} is not a known IR version (1..={MAX_IR_VERSION})"),
            ),
            Some(_) => {}
        }
        if self.enabled(Rule::ModelDomain) {
            let d = s(&m.domain);
            if d.is_empty() {
                self.push(
                    Rule::ModelDomain,
                    loc,
                    "the model specifies no domain".into(),
                );
            } else if !is_reverse_dns(d) {
                self.push(
                    Rule::ModelDomain,
                    loc,
                    format!("model domain '{d}' is not a reverse-DNS name"),
                );
            }
        }

        let opsets = self.opsets(&m.opset_import, "model");
        if !self.pre_opsets && m.opset_import.is_empty() {
            self.push(
                Rule::OpsetImported,
                loc,
                "the model imports no operator set".into(),
            );
        }

        self.device_configurations(m);

        if !m.functions.is_empty() {
            self.need_ir(8, "model-local functions", loc);
        }
        self.functions(&m.functions);

        let env = Env {
            opsets: &opsets,
            in_function: false,
            depth: 0,
        };
        let Some(g) = m.graph.as_ref() else {
            self.push(Rule::ModelGraph, loc, "the model has no graph".into());
            return;
        };
        let main_loc = format!("graph '{}'", s(&g.name));
        let main_defs = self.graph(g, &main_loc, Kind::Main, None, env);
        if !m.training_info.is_empty() {
            self.need_ir(7, "training_info", loc);
        }
        self.training(m, g, &main_defs, &main_loc, env);
    }

    /// Reads an `opset_import` list, checking its entries.
    fn opsets(&mut self, list: &'m [OperatorSetIdProto], owner: &str) -> Opsets<'m> {
        let mut map = Opsets::new();
        for (i, o) in list.iter().enumerate() {
            let d = norm_domain(s(&o.domain));
            let loc = format!("{owner} opset_import #{i} ('{}')", show_domain(d));
            match o.version {
                Some(v) if v >= 1 => {}
                Some(v) => self.push(
                    Rule::OpsetImportWellformed,
                    loc.clone(),
                    format!("operator set version {v} is not positive"),
                ),
                None => self.push(
                    Rule::OpsetImportWellformed,
                    loc.clone(),
                    "operator set import has no version".into(),
                ),
            }
            let v = o.version.unwrap_or(0);
            if let Some(prev) = map.insert(d, v) {
                self.push(
                    Rule::OneVersionPerDomain,
                    loc,
                    format!(
                        "domain '{}' is imported more than once (versions {prev} and {v})",
                        show_domain(d)
                    ),
                );
            }
        }
        map
    }

    /// Checks a graph of any kind; returns its definitions (for training bindings).
    fn graph(
        &mut self,
        g: &'m GraphProto,
        loc: &str,
        kind: Kind,
        outer: Option<&Scope<'_, 'm>>,
        env: Env<'_, 'm>,
    ) -> HashMap<&'m str, Def> {
        let mut free = Vec::new();
        self.graph_free(g, loc, kind, outer, env, &mut free)
    }

    /// Checks a graph; adds to `free` the names it takes from enclosing scopes.
    fn graph_free(
        &mut self,
        g: &'m GraphProto,
        loc: &str,
        kind: Kind,
        outer: Option<&Scope<'_, 'm>>,
        env: Env<'_, 'm>,
        free: &mut Vec<&'m str>,
    ) -> HashMap<&'m str, Def> {
        let name = s(&g.name);
        if name.is_empty() {
            self.push(Rule::GraphName, loc, "the graph has no name".into());
        } else {
            self.ident(name, "graph name", loc);
            if !self.enabled(Rule::UniqueGraphNames) {
                // Pedantic: not tracked unless asked for.
            } else if let Some(first) = self.graph_names.get(name) {
                let first = first.clone();
                self.push(
                    Rule::UniqueGraphNames,
                    loc,
                    format!("graph name '{name}' is also used by {first}"),
                );
            } else {
                self.graph_names.insert(name, loc.to_string());
            }
        }
        if !g.metadata_props.is_empty() {
            self.need_ir(10, "graph metadata_props", loc);
        }
        let top = matches!(
            kind,
            Kind::Main | Kind::TrainingInit | Kind::TrainingAlgorithm
        );
        // For the algorithm graph, clashes with the main graph break single assignment of the
        // combined graph; for nested graphs they are shadowing. The initialization graph runs on
        // its own and may reuse the names of the state variables it computes.
        let clash_rule = match kind {
            Kind::TrainingAlgorithm => Some(Rule::SsaSingleProducer),
            Kind::TrainingInit => None,
            Kind::Main | Kind::Nested => Some(Rule::SubgraphScoping),
        };

        let mut defs: HashMap<&'m str, Def> = HashMap::new();
        // Inputs.
        for (i, vi) in g.input.iter().enumerate() {
            let vloc = format!("{loc} input '{}' (#{i})", s(&vi.name));
            self.value_info(vi, &vloc, kind == Kind::Main, "input");
            let n = s(&vi.name);
            if n.is_empty() {
                continue;
            }
            if defs.insert(n, Def::Input(i)).is_some() {
                self.push(
                    Rule::UniqueNames,
                    vloc.clone(),
                    format!("input name '{n}' is listed more than once"),
                );
            }
            self.shadow(n, outer, clash_rule, &vloc, "input");
        }
        // Initializers, dense then sparse.
        let mut init_names: HashMap<&'m str, ()> = HashMap::new();
        let mut init_inputs: Vec<usize> = Vec::new();
        let n_dense = g.initializer.len();
        let sparse_names = g
            .sparse_initializer
            .iter()
            .map(|sp| sp.values.as_ref().and_then(|v| v.name.as_deref()));
        let dense_names = g.initializer.iter().map(|t| t.name.as_deref());
        for (i, n) in dense_names.chain(sparse_names).enumerate() {
            let (what, idx) = if i < n_dense {
                ("initializer", i)
            } else {
                ("sparse_initializer", i - n_dense)
            };
            let n = n.unwrap_or("");
            let iloc = format!("{loc} {what} '{n}' (#{idx})");
            if i < n_dense {
                self.tensor(&g.initializer[idx], &iloc);
            } else {
                self.need_ir(6, "sparse_initializer", &iloc);
                self.sparse(&g.sparse_initializer[idx], &iloc);
            }
            if n.is_empty() {
                self.push(
                    Rule::InitializerNamed,
                    iloc,
                    format!("the {what} has no name"),
                );
                continue;
            }
            self.ident(n, "initializer name", &iloc);
            if init_names.insert(n, ()).is_some() {
                self.push(
                    Rule::UniqueNames,
                    iloc,
                    format!("initializer name '{n}' is used by more than one initializer"),
                );
                continue;
            }
            match defs.get(n).copied() {
                Some(Def::Input(pos)) => {
                    if i < n_dense {
                        self.initializer_fits_input(&g.initializer[idx], &g.input[pos], &iloc);
                    }
                    if !top {
                        if self.ir >= 4 {
                            self.push(
                                Rule::SubgraphInitializerNotInput,
                                iloc,
                                format!(
                                    "'{n}' is both an input and an initializer of a nested graph"
                                ),
                            );
                        } else {
                            init_inputs.push(pos);
                        }
                    }
                }
                _ => {
                    if kind == Kind::Main && self.ir <= 3 {
                        self.push(
                            Rule::IrVersionFeatures,
                            iloc.clone(),
                            format!(
                                "initializer '{n}' is not a graph input, which IR version {} requires",
                                self.ir
                            ),
                        );
                    }
                    defs.insert(n, Def::Init(i));
                    self.shadow(n, outer, clash_rule, &iloc, "initializer");
                }
            }
        }
        if !init_inputs.is_empty() {
            // IR <= 3: inputs that are initializers follow all the actual inputs.
            let first_init = init_inputs.iter().copied().min().unwrap_or(0);
            let init_set: HashSet<usize> = init_inputs.iter().copied().collect();
            if let Some(late) = (first_init..g.input.len()).find(|p| !init_set.contains(p)) {
                self.push(
                    Rule::SubgraphInitializerNotInput,
                    format!("{loc} input '{}' (#{late})", s(&g.input[late].name)),
                    "an actual input follows an input that is an initializer".into(),
                );
            }
        }

        // Value infos.
        let mut vi_names: HashSet<&str> = HashSet::new();
        for (i, vi) in g.value_info.iter().enumerate() {
            let vloc = format!("{loc} value_info '{}' (#{i})", s(&vi.name));
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

        // Nodes.
        self.body(&g.node, &mut defs, loc, outer, env, clash_rule, free);

        // Outputs.
        let mut out_names: HashSet<&str> = HashSet::new();
        for (i, vi) in g.output.iter().enumerate() {
            let vloc = format!("{loc} output '{}' (#{i})", s(&vi.name));
            self.value_info(vi, &vloc, kind == Kind::Main, "output");
            let n = s(&vi.name);
            if n.is_empty() {
                continue;
            }
            if !out_names.insert(n) {
                self.push(
                    Rule::UniqueNames,
                    vloc.clone(),
                    format!("output name '{n}' is listed more than once"),
                );
            }
            if defs.contains_key(n) {
                continue;
            }
            match outer.map_or(Lookup::Missing, |o| o.lookup(n)) {
                Lookup::Visible => {
                    free.push(n);
                    if kind == Kind::Nested {
                        self.push(
                            Rule::SubgraphOutputLocal,
                            vloc,
                            format!("output '{n}' is a value of an enclosing graph, not one this graph defines"),
                        );
                    }
                }
                Lookup::Later { loc: oloc, node } => {
                    free.push(n);
                    self.push(
                        Rule::SubgraphScoping,
                        vloc,
                        format!("output '{n}' refers to a value that {oloc} defines only at node #{node}, at or after the owning node"),
                    )
                }
                Lookup::Missing => self.push(
                    Rule::OutputNotProduced,
                    vloc,
                    format!("output '{n}' is not defined by any input, initializer or node"),
                ),
            }
        }
        defs
    }

    /// An initializer that is also a graph input (a default value) has the element type and
    /// the fixed dimensions the input declares.
    fn initializer_fits_input(
        &mut self,
        t: &crate::model::onnx::TensorProto,
        input: &ValueInfoProto,
        iloc: &str,
    ) {
        use crate::model::onnx::{tensor_shape_proto::dimension::Value as D, type_proto::Value};
        let Some(Value::TensorType(tt)) = input.r#type.as_ref().and_then(|t| t.value.as_ref())
        else {
            return;
        };
        let name = s(&t.name);
        if let (Some(declared), Some(have)) = (tt.elem_type.filter(|&e| e != 0), t.data_type) {
            if declared != have {
                self.push(
                    Rule::InitializerMatchesInput,
                    iloc,
                    format!("initializer '{name}' has element type {have}, but the graph input declares {declared}"),
                );
                return;
            }
        }
        let Some(shape) = &tt.shape else { return };
        let fixed: Vec<Option<i64>> = shape
            .dim
            .iter()
            .map(|d| match d.value {
                Some(D::DimValue(v)) if v >= 0 => Some(v),
                _ => None,
            })
            .collect();
        let clash = fixed.len() != t.dims.len()
            || fixed
                .iter()
                .zip(&t.dims)
                .any(|(f, &d)| f.is_some_and(|f| f != d));
        if clash {
            let show: Vec<String> = fixed
                .iter()
                .map(|f| f.map_or("?".to_string(), |v| v.to_string()))
                .collect();
            self.push(
                Rule::InitializerMatchesInput,
                iloc,
                format!(
                    "initializer '{name}' has dims {:?}, but the graph input declares [{}]",
                    t.dims,
                    show.join(", ")
                ),
            );
        }
    }

    /// Reports a definition in a nested (or algorithm) graph that clashes with an outer name.
    fn shadow(
        &mut self,
        name: &str,
        outer: Option<&Scope<'_, 'm>>,
        rule: Option<Rule>,
        loc: &str,
        what: &str,
    ) {
        if let (Some(o), Some(rule)) = (outer, rule) {
            if let Lookup::Visible = o.lookup(name) {
                self.push(
                    rule,
                    loc,
                    format!("{what} '{name}' reuses a name already defined in an enclosing graph"),
                );
            }
        }
    }

    /// Checks a value info: its name, type, and (for the main graph's interface) its shape.
    fn value_info(&mut self, vi: &'m ValueInfoProto, loc: &str, main_io: bool, what: &str) {
        let n = s(&vi.name);
        if n.is_empty() {
            self.push(Rule::IoNamed, loc, format!("the {what} has no name"));
        } else {
            self.ident(n, "value name", loc);
        }
        if !vi.metadata_props.is_empty() {
            self.need_ir(10, "value_info metadata_props", loc);
        }
        match vi.r#type.as_ref() {
            Some(tp) => {
                self.type_proto(tp, loc, 0);
                if main_io {
                    self.main_io_shape(tp, loc);
                }
            }
            None if main_io => self.push(
                Rule::IoTypedWithShape,
                loc,
                format!("the main graph's {what} '{n}' has no type"),
            ),
            None => {}
        }
    }

    /// Checks the nodes of a graph or function body whose other definitions are in `defs`.
    #[allow(clippy::too_many_arguments)]
    fn body(
        &mut self,
        nodes: &'m [NodeProto],
        defs: &mut HashMap<&'m str, Def>,
        loc: &str,
        outer: Option<&Scope<'_, 'm>>,
        env: Env<'_, 'm>,
        clash_rule: Option<Rule>,
        free: &mut Vec<&'m str>,
    ) {
        // Definitions made by node outputs.
        for (i, node) in nodes.iter().enumerate() {
            for (k, o) in node.output.iter().enumerate() {
                if o.is_empty() {
                    continue;
                }
                match defs.get(o.as_str()).copied() {
                    Some(prev) => {
                        let by = match prev {
                            Def::Input(p) => format!("graph input #{p}"),
                            Def::Init(p) => format!("initializer #{p}"),
                            Def::Node(j) if j == i => "an earlier output of the same node".into(),
                            Def::Node(j) => format!("node #{j}"),
                        };
                        self.push(
                            Rule::SsaSingleProducer,
                            node_loc(loc, node, i),
                            format!("output #{k} '{o}' is already defined by {by}"),
                        );
                    }
                    None => {
                        defs.insert(o.as_str(), Def::Node(i));
                        if self.opts.pedantic {
                            self.ident(o, "value name", &node_loc(loc, node, i));
                        }
                        if outer.is_some() {
                            let nloc = node_loc(loc, node, i);
                            self.shadow(o, outer, clash_rule, &nloc, "node output");
                        }
                    }
                }
            }
        }

        let mut node_names: HashMap<&str, usize> = HashMap::new();
        // deps[i]: nodes whose outputs node i uses (for the cycle check).
        let mut deps: Vec<Vec<usize>> = Vec::new();
        let mut backward = false;
        for (i, node) in nodes.iter().enumerate() {
            let nloc = node_loc(loc, node, i);
            let name = s(&node.name);
            if !name.is_empty() {
                self.ident(name, "node name", &nloc);
                if let Some(j) = node_names.insert(name, i) {
                    self.push(
                        Rule::UniqueNodeNames,
                        nloc.clone(),
                        format!("node name '{name}' is also used by node #{j}"),
                    );
                }
            }
            self.node_fields(node, &nloc, env);

            let mut my_deps = Vec::new();
            let mut use_name = |cx: &mut Self, n: &'m str, how: &str| {
                match defs.get(n).copied() {
                    Some(Def::Node(j)) => {
                        my_deps.push(j);
                        if j >= i {
                            backward = true;
                            let whom = if j == i {
                                "this node itself".to_string()
                            } else {
                                format!("later node #{j}")
                            };
                            cx.push(
                                Rule::TopologicalOrder,
                                nloc.clone(),
                                format!("{how} '{n}' is produced by {whom}"),
                            );
                        }
                    }
                    Some(_) => {}
                    None => match outer.map_or(Lookup::Missing, |o| o.lookup(n)) {
                        Lookup::Visible => free.push(n),
                        Lookup::Later { loc: oloc, node: j } => {
                            // Still a dependency of the owning node, for the cycle check.
                            free.push(n);
                            cx.push(
                                Rule::SubgraphScoping,
                                nloc.clone(),
                                format!("{how} '{n}' refers to a value that {oloc} produces only at node #{j}, at or after the node owning this graph"),
                            )
                        }
                        Lookup::Missing => cx.push(
                            Rule::InputNotProduced,
                            nloc.clone(),
                            format!("{how} '{n}' is not a graph input, initializer, or output of any node"),
                        ),
                    },
                }
            };
            for (k, inp) in node.input.iter().enumerate() {
                if !inp.is_empty() {
                    use_name(self, inp.as_str(), &format!("input #{k}"));
                }
            }
            // Attributes; nested graphs see this graph's values defined before this node.
            let scope = Scope {
                defs,
                limit: i + 1,
                loc,
                parent: outer,
            };
            let mut sub_free: Vec<&'m str> = Vec::new();
            self.attributes(&node.attribute, &nloc, env, Some(&scope), &mut sub_free);
            for n in sub_free {
                match defs.get(n).copied() {
                    Some(Def::Node(j)) => {
                        my_deps.push(j);
                        if j >= i {
                            backward = true;
                        }
                    }
                    Some(_) => {}
                    None => free.push(n),
                }
            }
            deps.push(my_deps);
        }
        if backward {
            self.cycles(nodes, &deps, loc);
        }
    }

    /// Reports one node on a dependency cycle, if there is a cycle.
    fn cycles(&mut self, nodes: &[NodeProto], deps: &[Vec<usize>], loc: &str) {
        let n = nodes.len();
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut indeg = vec![0usize; n];
        for (i, ds) in deps.iter().enumerate() {
            for &j in ds {
                users[j].push(i);
                indeg[i] += 1;
            }
        }
        let mut ready: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
        let mut done = vec![false; n];
        while let Some(j) = ready.pop() {
            done[j] = true;
            for &u in &users[j] {
                indeg[u] -= 1;
                if indeg[u] == 0 {
                    ready.push(u);
                }
            }
        }
        let Some(start) = (0..n).find(|&i| !done[i]) else {
            return;
        };
        // Every node left has a predecessor left; walking back must revisit a node on a cycle.
        let mut seen = vec![false; n];
        let mut cur = start;
        while !seen[cur] {
            seen[cur] = true;
            match deps[cur].iter().copied().find(|&j| !done[j]) {
                Some(j) => cur = j,
                None => break,
            }
        }
        let mut members = vec![cur];
        let mut next = deps[cur].iter().copied().find(|&j| !done[j]);
        while let Some(j) = next {
            if j == cur || members.len() > 16 {
                break;
            }
            members.push(j);
            next = deps[j].iter().copied().find(|&k| !done[k]);
        }
        members.sort_unstable();
        members.dedup();
        let list: Vec<String> = members.iter().map(|m| format!("#{m}")).collect();
        self.push(
            Rule::NoCycles,
            node_loc(loc, &nodes[cur], cur),
            format!(
                "node dependencies form a cycle through nodes {}",
                list.join(", ")
            ),
        );
    }

    /// Checks a node's own fields: operator, domain, IR-versioned fields, device configuration.
    fn node_fields(&mut self, node: &'m NodeProto, nloc: &str, env: Env<'_, 'm>) {
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
    fn attributes(
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
    fn attribute(
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
    fn subgraph(
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

    /// Checks the model-local functions: each one, their ids, and their call graph.
    fn functions(&mut self, fs: &'m [FunctionProto]) {
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
    fn function(&mut self, f: &'m FunctionProto, floc: &str) {
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
    fn function_calls(
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

    /// Checks the training information: its graphs and its bindings.
    fn training(
        &mut self,
        m: &'m ModelProto,
        main: &'m GraphProto,
        main_defs: &HashMap<&'m str, Def>,
        main_loc: &str,
        env: Env<'_, 'm>,
    ) {
        let main_inits: HashSet<&str> = main
            .initializer
            .iter()
            .filter_map(|t| t.name.as_deref())
            .chain(
                main.sparse_initializer
                    .iter()
                    .filter_map(|sp| sp.values.as_ref().and_then(|v| v.name.as_deref())),
            )
            .collect();
        let main_outputs: HashSet<&str> = main.output.iter().map(|v| s(&v.name)).collect();
        let everything = Scope {
            defs: main_defs,
            limit: usize::MAX,
            loc: main_loc,
            parent: None,
        };
        let mut update_keys: HashMap<&str, usize> = HashMap::new();
        for (t, ti) in m.training_info.iter().enumerate() {
            let tloc = format!("training_info #{t}");
            self.training_info(
                ti,
                &tloc,
                &main_inits,
                &main_outputs,
                &everything,
                env,
                &mut update_keys,
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn training_info(
        &mut self,
        ti: &'m TrainingInfoProto,
        tloc: &str,
        main_inits: &HashSet<&str>,
        main_outputs: &HashSet<&str>,
        main_scope: &Scope<'_, 'm>,
        env: Env<'_, 'm>,
        update_keys: &mut HashMap<&'m str, usize>,
    ) {
        // The initialization step runs on its own; it may read the state variables (the main
        // graph's initializers) but nothing else of the main graph.
        let init_only: HashMap<&'m str, Def> = main_scope
            .defs
            .iter()
            .filter(|(_, d)| matches!(d, Def::Init(_)))
            .map(|(k, d)| (*k, *d))
            .collect();
        let init_scope = Scope {
            defs: &init_only,
            limit: usize::MAX,
            loc: main_scope.loc,
            parent: None,
        };
        let mut init_outputs: HashSet<&str> = HashSet::new();
        if let Some(g) = ti.initialization.as_ref() {
            let gloc = format!("{tloc} initialization graph '{}'", s(&g.name));
            self.graph(g, &gloc, Kind::TrainingInit, Some(&init_scope), env);
            init_outputs.extend(g.output.iter().map(|v| s(&v.name)));
        }
        let mut algo_inits: HashSet<&str> = HashSet::new();
        let mut algo_outputs: HashSet<&str> = HashSet::new();
        if let Some(g) = ti.algorithm.as_ref() {
            let gloc = format!("{tloc} algorithm graph '{}'", s(&g.name));
            self.graph(g, &gloc, Kind::TrainingAlgorithm, Some(main_scope), env);
            algo_inits.extend(g.initializer.iter().filter_map(|t| t.name.as_deref()));
            algo_inits.extend(
                g.sparse_initializer
                    .iter()
                    .filter_map(|sp| sp.values.as_ref().and_then(|v| v.name.as_deref())),
            );
            algo_outputs.extend(g.output.iter().map(|v| s(&v.name)));
        }
        if !ti.initialization_binding.is_empty() && ti.initialization.is_none() {
            self.push(
                Rule::TrainingBindings,
                tloc,
                "initialization_binding is given but the initialization graph is missing".into(),
            );
        }
        let mut init_keys: HashSet<&str> = HashSet::new();
        for (k, b) in ti.initialization_binding.iter().enumerate() {
            let bloc = format!("{tloc} initialization_binding #{k}");
            let (key, value) = (s(&b.key), s(&b.value));
            if !init_keys.insert(key) {
                self.push(
                    Rule::TrainingBindings,
                    bloc.clone(),
                    format!("key '{key}' is bound more than once"),
                );
            }
            if !main_inits.contains(key) && !algo_inits.contains(key) {
                self.push(
                    Rule::TrainingBindings,
                    bloc.clone(),
                    format!("key '{key}' is not an initializer of the main or algorithm graph"),
                );
            }
            if ti.initialization.is_some() && !init_outputs.contains(value) {
                self.push(
                    Rule::TrainingBindings,
                    bloc,
                    format!("value '{value}' is not an output of the initialization graph"),
                );
            }
        }
        for (k, b) in ti.update_binding.iter().enumerate() {
            let bloc = format!("{tloc} update_binding #{k}");
            let (key, value) = (s(&b.key), s(&b.value));
            if update_keys.insert(key, k).is_some() {
                self.push(
                    Rule::TrainingBindings,
                    bloc.clone(),
                    format!("key '{key}' is updated by more than one binding"),
                );
            }
            if !main_inits.contains(key) && !algo_inits.contains(key) {
                self.push(
                    Rule::TrainingBindings,
                    bloc.clone(),
                    format!("key '{key}' is not an initializer of the main or algorithm graph"),
                );
            }
            if !algo_outputs.contains(value) && !main_outputs.contains(value) {
                self.push(
                    Rule::TrainingBindings,
                    bloc,
                    format!("value '{value}' is not an output of the algorithm or main graph"),
                );
            }
        }
    }

    /// Checks the model's device configurations and the nodes' references to them.
    fn device_configurations(&mut self, m: &'m ModelProto) {
        if m.configuration.is_empty() && !any_node_device_config(m) {
            return;
        }
        if !m.configuration.is_empty() {
            self.need_ir(11, "device configurations", "model");
        }
        let mut names: HashSet<&str> = HashSet::new();
        for (i, c) in m.configuration.iter().enumerate() {
            let n = s(&c.name);
            let cloc = format!("model configuration '{n}' (#{i})");
            if n.is_empty() {
                self.push(
                    Rule::DeviceConfigWellformed,
                    cloc.clone(),
                    "the configuration has no name".into(),
                );
            } else if !names.insert(n) {
                self.push(
                    Rule::DeviceConfigWellformed,
                    cloc.clone(),
                    format!("configuration name '{n}' is used more than once"),
                );
            }
            match c.num_devices {
                Some(d) if d >= 1 => {
                    if !c.device.is_empty() && c.device.len() != d as usize {
                        self.push(
                            Rule::DeviceConfigWellformed,
                            cloc,
                            format!(
                                "{} device names are given for num_devices {d}",
                                c.device.len()
                            ),
                        );
                    }
                }
                _ => self.push(
                    Rule::DeviceConfigWellformed,
                    cloc,
                    "num_devices is missing or not positive".into(),
                ),
            }
        }
        if let Some(g) = m.graph.as_ref() {
            let gloc = format!("graph '{}'", s(&g.name));
            for (i, node) in g.node.iter().enumerate() {
                for (k, dc) in node.device_configurations.iter().enumerate() {
                    let dloc = format!("{} device_configuration #{k}", node_loc(&gloc, node, i));
                    let id = s(&dc.configuration_id);
                    if !names.contains(id) {
                        self.push(
                            Rule::DeviceConfigWellformed,
                            dloc.clone(),
                            format!("configuration_id '{id}' names no model configuration"),
                        );
                    }
                    for sp in &dc.sharding_spec {
                        let t = s(&sp.tensor_name);
                        if !node.input.iter().chain(node.output.iter()).any(|x| x == t) {
                            self.push(
                                Rule::DeviceConfigWellformed,
                                dloc.clone(),
                                format!("sharding_spec tensor '{t}' is not an input or output of the node"),
                            );
                        }
                        for sd in &sp.sharded_dim {
                            if sd.axis.is_none() {
                                self.push(
                                    Rule::DeviceConfigWellformed,
                                    dloc.clone(),
                                    format!("a sharded_dim of '{t}' has no axis"),
                                );
                            }
                            for ss in &sd.simple_sharding {
                                if ss.num_shards.is_none_or(|x| x < 1) {
                                    self.push(
                                        Rule::DeviceConfigWellformed,
                                        dloc.clone(),
                                        format!(
                                            "a simple_sharding of '{t}' has no positive num_shards"
                                        ),
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn any_node_device_config(m: &ModelProto) -> bool {
    m.graph
        .as_ref()
        .is_some_and(|g| g.node.iter().any(|n| !n.device_configurations.is_empty()))
}
