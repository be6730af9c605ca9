//! ONNX operator schemas as data: for every operator of the `ai.onnx`, `ai.onnx.ml` and preview
//! domains and each of its since-versions, the formal inputs and outputs, the attributes and the
//! type constraints. The table (`schemas/onnx-operators.tsv`) is generated from `onnx.defs` by
//! `scripts/gen_schemas.py` and compiled in by `build.rs`; a test compares it with the installed
//! onnx. The checker enforces these signatures and the operator registry is versioned by them.
#![forbid(unsafe_code)]

/// Whether a formal parameter takes exactly one value, maybe none, or any number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamOption {
    /// Exactly one value.
    Single,
    /// One value or none (an empty name, or absent at the end).
    Optional,
    /// Any number of values (at least `min_arity`); always the last parameter.
    Variadic,
}

/// A formal input or output of an operator.
#[derive(Clone, Copy, Debug)]
pub struct Formal {
    /// The parameter's name in the specification.
    pub name: &'static str,
    /// A type-constraint parameter (`T`) or a literal type (`tensor(int64)`).
    pub type_str: &'static str,
    /// Single, optional or variadic.
    pub option: ParamOption,
    /// For a variadic parameter: whether all its values share one type.
    pub homogeneous: bool,
    /// For a variadic parameter: the fewest values it takes.
    pub min_arity: u32,
}

/// An attribute an operator declares.
#[derive(Clone, Copy, Debug)]
pub struct AttrSpec {
    /// The attribute name.
    pub name: &'static str,
    /// The attribute type as ONNX spells it (`INT`, `FLOATS`, `GRAPH` …).
    pub kind: &'static str,
    /// Whether a node must set it.
    pub required: bool,
    /// The default as `kind:value` (`i:1`, `f:0.0001`, `s:up`, `ints:1,2`), if there is one.
    pub default: Option<&'static str>,
}

/// The types a type-constraint parameter may take.
#[derive(Clone, Copy, Debug)]
pub struct TypeConstraint {
    /// The parameter (`T`, `T1` …).
    pub param: &'static str,
    /// The allowed types (`tensor(float)`, `seq(tensor(int64))` …).
    pub allowed: &'static [&'static str],
}

/// One entry of a schema, in table order: inputs, outputs, attributes, constraints.
#[derive(Clone, Copy, Debug)]
pub enum Part {
    /// A formal input.
    Input(Formal),
    /// A formal output.
    Output(Formal),
    /// An attribute.
    Attribute(AttrSpec),
    /// A type constraint.
    Constraint(TypeConstraint),
}

/// The signature of one operator at one since-version.
#[derive(Debug)]
pub struct OpSchema {
    /// The domain ("" for `ai.onnx`).
    pub domain: &'static str,
    /// The operator type.
    pub name: &'static str,
    /// The operator-set version that introduced this signature.
    pub since_version: i64,
    /// Whether this version is deprecated (no longer to be used).
    pub deprecated: bool,
    /// Whether the operator is defined by a function body (it can be expanded).
    pub has_function: bool,
    /// Fewest inputs a node may have.
    pub min_inputs: u32,
    /// Most inputs (`u32::MAX` for unbounded).
    pub max_inputs: u32,
    /// Fewest outputs.
    pub min_outputs: u32,
    /// Most outputs (`u32::MAX` for unbounded).
    pub max_outputs: u32,
    /// Inputs, outputs, attributes and constraints.
    pub parts: &'static [Part],
}

impl OpSchema {
    /// The formal inputs, in order.
    pub fn inputs(&self) -> impl Iterator<Item = &'static Formal> {
        self.parts.iter().filter_map(|p| match p {
            Part::Input(f) => Some(f),
            _ => None,
        })
    }

    /// The formal outputs, in order.
    pub fn outputs(&self) -> impl Iterator<Item = &'static Formal> {
        self.parts.iter().filter_map(|p| match p {
            Part::Output(f) => Some(f),
            _ => None,
        })
    }

    /// The declared attributes, sorted by name.
    pub fn attributes(&self) -> impl Iterator<Item = &'static AttrSpec> {
        self.parts.iter().filter_map(|p| match p {
            Part::Attribute(a) => Some(a),
            _ => None,
        })
    }

    /// The attribute called `name`, if declared.
    pub fn attribute(&self, name: &str) -> Option<&'static AttrSpec> {
        self.attributes().find(|a| a.name == name)
    }

    /// The type constraint of parameter `param`, if there is one.
    pub fn constraint(&self, param: &str) -> Option<&'static TypeConstraint> {
        self.parts.iter().find_map(|p| match p {
            Part::Constraint(c) if c.param == param => Some(c),
            _ => None,
        })
    }
}

mod table {
    use super::{AttrSpec, Formal, OpSchema, ParamOption, Part, TypeConstraint};
    include!(concat!(env!("OUT_DIR"), "/schemas.rs"));
}

pub use table::{DOMAINS, IR_VERSION, SCHEMAS};

/// The canonical spelling of a domain: "" for the default (`ai.onnx` or empty).
pub fn canonical_domain(domain: &str) -> &str {
    if domain == "ai.onnx" {
        ""
    } else {
        domain
    }
}

/// The oldest and newest operator-set versions of a domain, if the table knows it.
pub fn domain_versions(domain: &str) -> Option<(i64, i64)> {
    let d = canonical_domain(domain);
    DOMAINS
        .iter()
        .find(|(name, _, _)| *name == d)
        .map(|&(_, lo, hi)| (lo, hi))
}

/// Every since-version of an operator, oldest first (empty when the domain has no such
/// operator).
pub fn versions(domain: &str, name: &str) -> &'static [OpSchema] {
    let d = canonical_domain(domain);
    let start = SCHEMAS.partition_point(|s| (s.domain, s.name) < (d, name));
    let end = start + SCHEMAS[start..].partition_point(|s| (s.domain, s.name) == (d, name));
    &SCHEMAS[start..end]
}

/// The schema an operator has under operator-set version `opset` of its domain: the newest
/// since-version not above it. `None` when the operator does not exist there (yet).
pub fn resolve(domain: &str, name: &str, opset: i64) -> Option<&'static OpSchema> {
    versions(domain, name)
        .iter()
        .rev()
        .find(|s| s.since_version <= opset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_for_binary_search() {
        for w in SCHEMAS.windows(2) {
            let a = (w[0].domain, w[0].name, w[0].since_version);
            let b = (w[1].domain, w[1].name, w[1].since_version);
            assert!(a < b, "{a:?} before {b:?}");
        }
    }

    #[test]
    fn resolves_facts_of_the_specification() {
        // Gelu was added in opset 20; Relu changed last at 14; Cast's `to` is required.
        assert!(resolve("", "Gelu", 19).is_none());
        assert_eq!(resolve("", "Gelu", 20).unwrap().since_version, 20);
        assert_eq!(resolve("ai.onnx", "Relu", 17).unwrap().since_version, 14);
        assert!(resolve("", "Relu", 17).unwrap().constraint("T").is_some());
        let cast = resolve("", "Cast", 13).unwrap();
        assert!(cast.attribute("to").unwrap().required);
        assert!(cast.attribute("saturate").is_none());
        let add = resolve("", "Add", 14).unwrap();
        assert_eq!((add.min_inputs, add.max_inputs), (2, 2));
        let concat = resolve("", "Concat", 13).unwrap();
        assert_eq!(concat.max_inputs, u32::MAX);
        assert_eq!(
            concat.inputs().next().unwrap().option,
            ParamOption::Variadic
        );
        assert!(resolve("", "Gemmm", 13).is_none());
        assert!(resolve("ai.onnx.ml", "LabelEncoder", 4).is_some());
        assert_eq!(domain_versions("ai.onnx").unwrap().0, 1);
        assert_eq!(
            resolve("", "LayerNormalization", 17)
                .unwrap()
                .attribute("epsilon")
                .unwrap()
                .default,
            Some("f:1e-05")
        );
    }
}
