//! A checker for the requirements (MUST rules) of the ONNX IR specification.
//!
//! [`check_model`] walks a decoded [`ModelProto`] once (main graph, nested subgraphs, model-local
//! functions, training information) and returns every [`Violation`] it finds, in a deterministic
//! order. [`check_model_first`] turns the first one into an [`Error`] with
//! [`Status::InvalidModel`].
//!
//! Every rule in [`RULES`] carries the section of the IR specification (or the normative comment
//! of `onnx.proto`) it comes from. Rules whose text says MUST in some version of the specification
//! but which the newest version relaxed to SHOULD, or which no producer follows, have
//! [`Level::Pedantic`]: they run only when [`Options::pedantic`] is set. `docs/spec-checker.md`
//! lists where this checker and `onnx.checker` disagree, and why.
//!
//! Nodes are also checked against their operators' signatures from [`crate::schema`] (existence
//! at the imported version, arity, attributes, type constraints): see `signature.rs`.
//!
//! It never panics on hostile input: nesting of graphs and types is cut at
//! [`Options::max_depth`], function calls are followed without recursion, and all arithmetic on
//! sizes is checked.
#![forbid(unsafe_code)]

mod names;
mod signature;
mod tensor;
mod walk;

use crate::error::{Error, Status};
use crate::model::onnx::ModelProto;
use std::fmt;

/// How strictly a rule is enforced by default.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    /// Checked always: a violation makes the model invalid.
    Required,
    /// Checked only with [`Options::pedantic`]: a MUST of an older specification text that the
    /// newest one relaxed, or one that neither `onnx.checker` nor common producers follow.
    Pedantic,
}

/// One rule of the specification, as checked here. [`Rule::info`] gives its id and source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// `ir-version`
    IrVersion,
    /// `ir-version-features`
    IrVersionFeatures,
    /// `model-graph`
    ModelGraph,
    /// `opset-imported`
    OpsetImported,
    /// `opset-import-wellformed`
    OpsetImportWellformed,
    /// `one-version-per-domain`
    OneVersionPerDomain,
    /// `graph-name`
    GraphName,
    /// `unique-graph-names`
    UniqueGraphNames,
    /// `io-named`
    IoNamed,
    /// `io-typed-with-shape`
    IoTypedWithShape,
    /// `type-wellformed`
    TypeWellformed,
    /// `unique-names`
    UniqueNames,
    /// `ssa-single-producer`
    SsaSingleProducer,
    /// `input-not-produced`
    InputNotProduced,
    /// `output-not-produced`
    OutputNotProduced,
    /// `topological-order`
    TopologicalOrder,
    /// `no-cycles`
    NoCycles,
    /// `subgraph-scoping`
    SubgraphScoping,
    /// `subgraph-initializer-not-input`
    SubgraphInitializerNotInput,
    /// `node-op-type`
    NodeOpType,
    /// `attribute-name-type`
    AttributeNameType,
    /// `attribute-one-value`
    AttributeOneValue,
    /// `attribute-type-matches`
    AttributeTypeMatches,
    /// `attribute-names-unique`
    AttributeNamesUnique,
    /// `ref-attr-in-function`
    RefAttrInFunction,
    /// `initializer-named`
    InitializerNamed,
    /// `tensor-data-type`
    TensorDataType,
    /// `tensor-field-matches-type`
    TensorFieldMatchesType,
    /// `initializer-dims-match-data`
    InitializerDimsMatchData,
    /// `raw-and-typed-data-exclusive`
    RawAndTypedDataExclusive,
    /// `external-data-wellformed`
    ExternalDataWellformed,
    /// `sparse-tensor-wellformed`
    SparseTensorWellformed,
    /// `functions-wellformed`
    FunctionsWellformed,
    /// `function-unique-id`
    FunctionUniqueId,
    /// `functions-acyclic`
    FunctionsAcyclic,
    /// `training-bindings`
    TrainingBindings,
    /// `device-config-wellformed`
    DeviceConfigWellformed,
    /// `graph-depth-limit`
    GraphDepthLimit,
    /// `c-identifier-names`
    CIdentifierNames,
    /// `model-domain`
    ModelDomain,
    /// `unique-node-names`
    UniqueNodeNames,
    /// `dim-non-negative`
    DimNonNegative,
    /// `type-has-kind`
    TypeHasKind,
    /// `opset-version-known`
    OpsetVersionKnown,
    /// `operator-exists`
    OperatorExists,
    /// `operator-not-deprecated`
    OperatorNotDeprecated,
    /// `operator-arity`
    OperatorArity,
    /// `attribute-known`
    AttributeKnown,
    /// `attribute-required`
    AttributeRequired,
    /// `attribute-schema-type`
    AttributeSchemaType,
    /// `type-constraint`
    TypeConstraint,
    /// `subgraph-output-local`
    SubgraphOutputLocal,
    /// `initializer-matches-input`
    InitializerMatchesInput,
    /// `operator-shape-requirement`
    OperatorShapeRequirement,
}

/// What is known about a rule: its id, a one-line description, where the specification states
/// it, and how strictly it is enforced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleInfo {
    /// The rule this entry describes.
    pub rule: Rule,
    /// A short kebab-case id, used in messages (`ssa-single-producer`).
    pub id: &'static str,
    /// What a model must do to satisfy the rule.
    pub description: &'static str,
    /// The part of the specification the rule comes from.
    pub section: &'static str,
    /// Whether the rule is checked by default.
    pub level: Level,
    /// Whether loading a model (`onnxInitGraph`, `onnxGetBackendCompatibility`) enforces the
    /// rule. Rules that mainstream exporters break and that do not change results are checked
    /// only in strict mode (`onnxifi-run check`, `ONNXIFI_RUST_STRICT=1`).
    pub load: bool,
}

const fn info(
    rule: Rule,
    id: &'static str,
    section: &'static str,
    description: &'static str,
) -> RuleInfo {
    RuleInfo {
        rule,
        id,
        description,
        section,
        level: Level::Required,
        load: true,
    }
}

/// A required rule that only strict mode enforces at load (see [`RuleInfo::load`]).
const fn strict(
    rule: Rule,
    id: &'static str,
    section: &'static str,
    description: &'static str,
) -> RuleInfo {
    RuleInfo {
        rule,
        id,
        description,
        section,
        level: Level::Required,
        load: false,
    }
}

const fn pedantic(
    rule: Rule,
    id: &'static str,
    section: &'static str,
    description: &'static str,
) -> RuleInfo {
    RuleInfo {
        rule,
        id,
        description,
        section,
        level: Level::Pedantic,
        load: false,
    }
}

/// Every rule, in the order of the [`Rule`] enum (`RULES[r as usize].rule == r`).
pub const RULES: &[RuleInfo] = &[
    info(Rule::IrVersion, "ir-version", "ONNX Versioning; onnx.proto ModelProto.ir_version",
        "the model states its IR version, and it is one of the versions the Version enum defines"),
    strict(Rule::IrVersionFeatures, "ir-version-features", "onnx.proto Version enum (per-version changes)",
        "the model uses only fields, types and data types that exist in its IR version, and (IR <= 3) lists every initializer as a graph input"),
    info(Rule::ModelGraph, "model-graph", "Models; onnx.proto ModelProto.graph",
        "the model carries the graph that is evaluated to execute it"),
    info(Rule::OpsetImported, "opset-imported", "Operator Sets; Operators",
        "the model (IR >= 3) imports at least one operator set, and every node's domain is imported by the model (or, in a function body, by the function)"),
    info(Rule::OpsetImportWellformed, "opset-import-wellformed", "Operator Set Identifiers; onnx.proto OperatorSetIdProto",
        "every operator set import states a version of at least 1"),
    info(Rule::OneVersionPerDomain, "one-version-per-domain", "Operator Set Identifiers; onnx.proto ModelProto.opset_import",
        "a model or function imports at most one version of each domain"),
    strict(Rule::GraphName, "graph-name", "Graphs",
        "every graph (main, nested, training) specifies a non-empty name"),
    pedantic(Rule::UniqueGraphNames, "unique-graph-names", "Names Within a Graph (Graph namespace)",
        "graph names are unique within the model (the reference's own expanded-function test models reuse names)"),
    info(Rule::IoNamed, "io-named", "Graphs; onnx.proto ValueInfoProto.name",
        "graph and function inputs and outputs, and value_info entries, have non-empty names"),
    strict(Rule::IoTypedWithShape, "io-typed-with-shape", "Graphs; Static tensor shapes",
        "the main graph's inputs and outputs have a type, and tensor types have a shape (a rank)"),
    info(Rule::TypeWellformed, "type-wellformed", "Standard data types; onnx.proto TypeProto",
        "a stated type has a kind, valid element and key types, and non-negative dimension sizes"),
    info(Rule::UniqueNames, "unique-names", "Names Within a Graph; onnx.proto GraphProto",
        "within a graph, input names, output names, initializer names (dense and sparse), value_info names and non-empty node names are each unique"),
    info(Rule::SsaSingleProducer, "ssa-single-producer", "Graphs; Nodes (single static assignment)",
        "every value has one definition: no two node outputs share a name, and no node output redefines a graph input or initializer"),
    info(Rule::InputNotProduced, "input-not-produced", "Nodes (input)",
        "every non-empty node input names a graph input, an initializer, a node output, or a value visible from an outer graph"),
    info(Rule::OutputNotProduced, "output-not-produced", "Nodes (use sites)",
        "every graph or function output is defined in that graph or function (or visible from an outer graph)"),
    info(Rule::TopologicalOrder, "topological-order", "Graphs; Nodes",
        "nodes are listed in topological order: no node uses a value produced by itself or a later node"),
    info(Rule::NoCycles, "no-cycles", "Graphs; Nodes",
        "node dependencies (including those through subgraphs) form no cycle"),
    info(Rule::SubgraphScoping, "subgraph-scoping", "Nodes (nested subgraphs)",
        "names defined in a nested graph do not shadow visible outer names, and outer references name values defined before the owning node"),
    strict(Rule::SubgraphInitializerNotInput, "subgraph-initializer-not-input", "Nodes (nested subgraphs)",
        "in a nested graph (IR >= 4) no name is both an input and an initializer; in IR <= 3 such inputs come after all others"),
    info(Rule::NodeOpType, "node-op-type", "Nodes (op_type)",
        "every node names the operator it invokes"),
    info(Rule::AttributeNameType, "attribute-name-type", "Attributes; onnx.proto AttributeProto",
        "every attribute has a non-empty name and (IR >= 2) a valid type"),
    info(Rule::AttributeOneValue, "attribute-one-value", "Attributes",
        "an attribute carries exactly one value field (a reference attribute carries none)"),
    info(Rule::AttributeTypeMatches, "attribute-type-matches", "Attributes; onnx.proto AttributeProto.type",
        "the value field in use is the one the attribute's type names"),
    info(Rule::AttributeNamesUnique, "attribute-names-unique", "Names Within a Graph (Attribute namespace)",
        "a node's (or function's) attribute names are unique"),
    info(Rule::RefAttrInFunction, "ref-attr-in-function", "Attributes (ref_attr_name)",
        "reference attributes appear only inside function bodies"),
    info(Rule::InitializerNamed, "initializer-named", "onnx.proto GraphProto.initializer, SparseTensorProto.values",
        "every dense and sparse initializer has a non-empty name"),
    info(Rule::TensorDataType, "tensor-data-type", "Tensor Element Types; onnx.proto TensorProto.data_type",
        "every tensor states a defined element type"),
    info(Rule::TensorFieldMatchesType, "tensor-field-matches-type", "onnx.proto TensorProto (typed data fields)",
        "a tensor stores its elements in the field its element type uses (no raw_data for strings)"),
    info(Rule::InitializerDimsMatchData, "initializer-dims-match-data", "Tensor Definition; onnx.proto TensorProto",
        "tensor dims are non-negative and the stored data holds exactly as many elements as the dims describe"),
    info(Rule::RawAndTypedDataExclusive, "raw-and-typed-data-exclusive", "onnx.proto TensorProto.raw_data",
        "a tensor uses raw_data or a typed field, not both"),
    info(Rule::ExternalDataWellformed, "external-data-wellformed", "External Tensor Data; onnx.proto TensorProto.external_data",
        "external data has a relative location inside the model directory, integer offset/length, and no in-message values"),
    info(Rule::SparseTensorWellformed, "sparse-tensor-wellformed", "onnx.proto SparseTensorProto",
        "sparse tensors have 1-D values, INT64 indices of shape [NNZ] or [NNZ, rank] that are in range and ascending"),
    info(Rule::FunctionsWellformed, "functions-wellformed", "Functions",
        "functions have a name, unique non-empty input/output/attribute names, and a body that obeys the graph rules"),
    info(Rule::FunctionUniqueId, "function-unique-id", "Functions; onnx.proto ModelProto.functions",
        "(domain, name, overload) is unique among the model's functions"),
    info(Rule::FunctionsAcyclic, "functions-acyclic", "Functions (body is a DAG of other operators)",
        "model-local functions do not call themselves, directly or indirectly"),
    strict(Rule::TrainingBindings, "training-bindings", "Training Related Information",
        "binding keys are unique initializers of the main or algorithm graph, values are outputs of the step's graph, and initialization is present when bound"),
    strict(Rule::DeviceConfigWellformed, "device-config-wellformed", "Multi-device configuration (IR >= 11)",
        "device configurations have unique names and a device count matching their device list; nodes refer to known configurations and their own values"),
    info(Rule::GraphDepthLimit, "graph-depth-limit", "implementation limit (not in the specification)",
        "graphs and types nest no deeper than the checker's depth limit"),
    pedantic(Rule::CIdentifierNames, "c-identifier-names", "Names Within a Graph; Static tensor shapes",
        "graph, node, value and attribute names and dimension variables follow C identifier syntax (MUST in older texts, SHOULD in the newest)"),
    pedantic(Rule::ModelDomain, "model-domain", "Models",
        "the model specifies a reverse-DNS domain"),
    strict(Rule::UniqueNodeNames, "unique-node-names", "Names Within a Graph; onnx.proto NodeProto.name",
        "non-empty node names are unique within a graph (exporters such as spox repeat them; names do not change results)"),
    strict(Rule::DimNonNegative, "dim-non-negative", "Static tensor shapes; onnx.proto TensorShapeProto.Dimension",
        "declared dimension sizes are non-negative (Paddle exports write -1 for an unknown size, read as unknown at load)"),
    strict(Rule::TypeHasKind, "type-has-kind", "Standard data types; onnx.proto TypeProto.value",
        "a stated type has a kind (tensor, sequence, map, optional, sparse tensor, opaque)"),
    strict(Rule::OpsetVersionKnown, "opset-version-known", "Operator Sets; onnx.defs (schemas/onnx-operators.tsv)",
        "every imported version of a standard domain exists (loading answers UNSUPPORTED_VERSION instead)"),
    info(Rule::OperatorExists, "operator-exists", "Operators; onnx.defs (schemas/onnx-operators.tsv)",
        "every node of a standard domain names an operator that exists there at the imported version"),
    strict(Rule::OperatorNotDeprecated, "operator-not-deprecated", "Operators; onnx.defs (schemas/onnx-operators.tsv)",
        "no node uses an operator version that the operator set marks deprecated"),
    info(Rule::OperatorArity, "operator-arity", "Nodes; onnx.defs (schemas/onnx-operators.tsv)",
        "a node has as many inputs and outputs as its operator's signature allows, and gives every required one a name"),
    info(Rule::AttributeKnown, "attribute-known", "Attributes; onnx.defs (schemas/onnx-operators.tsv)",
        "a node sets only attributes its operator declares"),
    info(Rule::AttributeRequired, "attribute-required", "Attributes; onnx.defs (schemas/onnx-operators.tsv)",
        "a node sets every attribute its operator requires (If's branches, Loop's and Scan's bodies among them)"),
    info(Rule::AttributeSchemaType, "attribute-schema-type", "Attributes; onnx.defs (schemas/onnx-operators.tsv)",
        "an attribute has the type its operator declares"),
    info(Rule::TypeConstraint, "type-constraint", "Operators (type constraints); onnx.defs (schemas/onnx-operators.tsv)",
        "where value types are known (declared, or carried forward through type constraints), they satisfy the operator's type constraints"),
    strict(Rule::SubgraphOutputLocal, "subgraph-output-local", "Graphs (outputs); onnx.checker",
        "a nested graph's outputs are values it defines (input, initializer or node output), not values of an enclosing graph (execution handles either)"),
    info(Rule::InitializerMatchesInput, "initializer-matches-input", "Graphs (initializers as default values of inputs)",
        "an initializer that is also a graph input has the element type and the fixed dimensions the input declares"),
    info(Rule::OperatorShapeRequirement, "operator-shape-requirement", "Operators (documented shape requirements); onnx.defs",
        "declared dimensions meet the shape requirements this checker knows: Conv and ConvTranspose input channels are a multiple of group and agree with the weights"),
];

impl Rule {
    /// The rule's entry in [`RULES`].
    pub fn info(self) -> &'static RuleInfo {
        &RULES[self as usize]
    }

    /// The rule's kebab-case id.
    pub fn id(self) -> &'static str {
        self.info().id
    }

    /// Finds a rule by its id.
    pub fn from_id(id: &str) -> Option<Rule> {
        RULES.iter().find(|r| r.id == id).map(|r| r.rule)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One broken rule: which, where, and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The rule broken.
    pub rule: Rule,
    /// Where, e.g. `graph 'main' node 'conv1' (#3)`.
    pub location: String,
    /// What is wrong, for people.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}: {}", self.rule, self.location, self.message)
    }
}

/// Knobs of the checker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Also check [`Level::Pedantic`] rules.
    pub pedantic: bool,
    /// How deep graphs (and types) may nest; deeper ones are reported, not entered. Values above
    /// [`MAX_DEPTH_CAP`] are treated as that cap, to bound the stack the walk needs.
    pub max_depth: usize,
}

/// The default nesting limit for graphs and types (fits in a 1 MiB thread stack).
pub const DEFAULT_MAX_DEPTH: usize = 64;

/// The largest nesting limit honoured, whatever [`Options::max_depth`] says.
pub const MAX_DEPTH_CAP: usize = 256;

impl Default for Options {
    fn default() -> Self {
        Options {
            pedantic: false,
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

/// Checks the model against every [`Level::Required`] rule; returns all violations.
pub fn check_model(m: &ModelProto) -> Vec<Violation> {
    check_model_with(m, &Options::default())
}

/// Checks the model with the given options; returns all violations in a deterministic order.
pub fn check_model_with(m: &ModelProto, opts: &Options) -> Vec<Violation> {
    walk::check(m, opts)
}

/// Checks the model; the first violation becomes an [`Status::InvalidModel`] error naming the
/// rule and where it was broken.
pub fn check_model_first(m: &ModelProto) -> Result<(), Error> {
    first_error(check_model(m))
}

/// The check made when a model is loaded: every rule that execution depends on (see
/// [`RuleInfo::load`]), or every required rule when `strict`. The first violation becomes an
/// [`Status::InvalidModel`] error; the message says how many more there are.
///
/// An IR version newer than this backend knows is UNSUPPORTED_VERSION (the ONNXIFI contract),
/// not INVALID_MODEL: the model may well be valid under a specification this backend predates.
pub fn check_model_for_load(m: &ModelProto, strict: bool) -> Result<(), Error> {
    if let Some(v) = m.ir_version.filter(|&v| v > walk::MAX_IR_VERSION) {
        return Err(Error::new(
            Status::UnsupportedVersion,
            format!(
                "the model's IR version {v} is newer than this backend supports (up to {})",
                walk::MAX_IR_VERSION
            ),
        ));
    }
    first_error(
        check_model(m)
            .into_iter()
            .filter(|v| strict || v.rule.info().load)
            .collect(),
    )
}

fn first_error(violations: Vec<Violation>) -> Result<(), Error> {
    let more = violations.len().saturating_sub(1);
    match violations.into_iter().next() {
        None => Ok(()),
        Some(v) if more == 0 => Err(Error::new(Status::InvalidModel, v.to_string())),
        Some(v) => Err(Error::new(
            Status::InvalidModel,
            format!("{v} (and {more} more violation(s): `onnxifi-run check` lists them all)"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_table_matches_enum_order_and_ids_are_unique() {
        for (i, r) in RULES.iter().enumerate() {
            assert_eq!(r.rule as usize, i, "RULES[{i}] is {:?}", r.rule);
            assert_eq!(Rule::from_id(r.id), Some(r.rule));
            assert!(!r.description.is_empty() && !r.section.is_empty());
        }
        assert_eq!(RULES.len(), Rule::OperatorShapeRequirement as usize + 1);
    }

    #[test]
    fn empty_model_reports_missing_version_and_graph() {
        let v = check_model(&ModelProto::default());
        let rules: Vec<Rule> = v.iter().map(|v| v.rule).collect();
        assert!(rules.contains(&Rule::IrVersion), "{v:?}");
        assert!(rules.contains(&Rule::ModelGraph), "{v:?}");
        let e = check_model_first(&ModelProto::default()).unwrap_err();
        assert_eq!(e.status, Status::InvalidModel);
        assert!(e.message.contains("ir-version"), "{e}");
    }
}
