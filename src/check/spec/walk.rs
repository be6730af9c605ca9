//! The walk over a model: model fields, graphs and their scopes; nodes and attributes
//! (`nodes`), functions (`functions`), training information and device configurations
//! (`training`).
#![forbid(unsafe_code)]

use super::names::{is_c_identifier, is_reverse_dns, norm_domain, show_domain};
use super::{Level, Options, Rule, Violation};
use crate::model::onnx::{
    attribute_proto::AttributeType, AttributeProto, FunctionProto, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, TrainingInfoProto, ValueInfoProto,
};
use std::collections::{HashMap, HashSet};

mod functions;
mod nodes;
mod training;

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
}
