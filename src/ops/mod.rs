//! ONNX operators: one file per operator, each with its opset range, attributes, shape rule and
//! lowering to kernels. [`REGISTRY`] lists them all; the compatibility check, the planner and the
//! README's operator table all read it.
#![forbid(unsafe_code)]

mod binary;
mod pointwise;
mod spatial;
mod subgraph;
mod unary;
mod util;
mod variadic;
mod window_nd;

mod abs;
mod add;
mod arg_max;
mod attention;
mod average_pool;
mod batch_normalization;
mod bitwise;
mod cast;
mod ceil;
mod clip;
mod compare;
mod concat;
mod constant;
mod constant_of_shape;
mod conv;
mod conv_depthwise;
mod conv_transpose;
mod cum_sum;
mod depth_to_space;
mod div;
mod dropout;
mod einsum;
mod elu;
mod erf;
mod exp;
mod expand;
mod flatten;
mod floor;
mod gather;
mod gather_elements;
mod gemm;
mod global_average_pool;
mod global_max_pool;
mod grid_sample;
mod gru;
mod hard_sigmoid;
mod identity;
mod if_op;
mod int_unary;
mod layer_normalization;
mod leaky_relu;
mod log;
mod logical;
mod loop_op;
mod lp_normalization;
mod lp_pool;
mod lrn;
mod lstm;
mod mat_mul;
mod math_unary;
mod max;
mod max_pool;
mod max_unpool;
mod mean;
mod min;
mod modulo;
mod mul;
mod nchwc;
mod neg;
mod non_max_suppression;
mod non_zero;
mod normalization;
mod one_hot;
mod pad;
mod pow;
mod prelu;
mod range;
mod reciprocal;
mod recurrent;
mod reduce;
mod relu;
mod reshape;
mod resize;
mod rms_normalization;
mod rnn;
mod roi_align;
mod rotary_embedding;
mod scan;
mod scatter_gather_nd;
mod selu;
mod shape;
mod sigmoid;
mod size;
mod slice;
mod softmax;
mod softplus;
mod split;
mod sqrt;
mod squeeze;
mod string_ops;
mod sub;
mod sum;
mod tanh;
mod tile;
mod top_k;
mod transpose;
mod trilu;
mod unsqueeze;
mod where_op;
pub mod widen;

pub use batch_normalization::fold as fold_batch_norm;
pub use gemm::{packs_weight, prepack_weight};
pub use util::{BuildCtx, InputInfo};

/// Domain of the operators this backend creates itself when it fuses nodes.
pub const INTERNAL_DOMAIN: &str = "onnxifi.rust";

use crate::error::Result;
use crate::ir::{DataType, Tensor};

/// What building a node produces: its output types and shapes, and the kernel that computes them.
pub struct Built {
    /// Element type and shape of each output *position* of the node (omitted optional
    /// outputs included; the kernel is handed the present ones only, in order).
    pub outputs: Vec<(DataType, Vec<usize>)>,
    /// The prepared computation.
    pub kernel: Box<dyn Kernel>,
}

/// A node's prepared computation. Outputs arrive allocated with the right type and shape
/// (one per present output), unless [`Kernel::allocates_outputs`] says otherwise.
pub trait Kernel: Send + Sync {
    /// Computes the outputs from the inputs (`None` for omitted optional inputs).
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()>;

    /// Whether the output shapes depend on the input *contents* (NonZero, TopK with a
    /// run-time k …): then the outputs arrive empty, of the right type, and the kernel sets
    /// their shapes and data; the shapes reported by the build are placeholders.
    fn allocates_outputs(&self) -> bool {
        false
    }

    /// Whether [`Kernel::run`] writes every element of every output. The outputs of such a
    /// kernel arrive with stale content (recycled storage is not zero-filled first); the others
    /// get zeroed outputs.
    fn overwrites_outputs(&self) -> bool {
        false
    }

    /// Whether output 0 holds exactly input 0's elements, in order, under another shape
    /// (Reshape, Flatten, Squeeze, Unsqueeze, Identity). When that input dies at this step, the
    /// run hands its storage to the output instead of running the kernel, which would copy it.
    fn forwards_input(&self) -> bool {
        false
    }

    /// Whether [`Kernel::run`] reads input `index`. False for a weight the build prepared
    /// (packed filters, copied biases): when no step reads a weight, the executable may drop
    /// its data (`exec::weights::release_prepared`). False for every input of a kernel whose
    /// result the build fixed (`Shape`): the planner folds a node whose every read input is a
    /// constant.
    fn reads_input(&self, _index: usize) -> bool {
        true
    }
}

/// The definition of one supported operator.
pub struct OpDef {
    /// Operator type, as in `NodeProto.op_type`.
    pub op_type: &'static str,
    /// Domain ("" is the default ONNX domain).
    pub domain: &'static str,
    /// Oldest opset version supported (the oldest since-version implemented, for operators of
    /// the standard domains).
    pub min_opset: i64,
    /// Newest since-version implemented: every since-version of the operator from the one in
    /// force at `min_opset` to this one is. A model whose imported opset resolves the operator
    /// to a newer version is refused with UNSUPPORTED_VERSION.
    pub newest: i64,
    /// Every attribute the operator knows.
    pub attributes: &'static [&'static str],
    /// Element types accepted for the main data input(s).
    pub types: &'static [DataType],
    /// Validates the node and prepares its kernel for concrete input shapes.
    pub build: fn(&BuildCtx) -> Result<Built>,
}

/// Float only.
pub const FLOAT: &[DataType] = &[DataType::F32];
/// The types the backend computes on: the wide numeric types and bool.
const COMPUTED: [DataType; 13] = [
    DataType::F32,
    DataType::F64,
    DataType::F16,
    DataType::BF16,
    DataType::I8,
    DataType::U8,
    DataType::I16,
    DataType::U16,
    DataType::I32,
    DataType::U32,
    DataType::I64,
    DataType::U64,
    DataType::Bool,
];

/// The narrow float8/float4/int4/int2 types.
const NARROW: [DataType; 10] = [
    DataType::F8E4M3Fn,
    DataType::F8E4M3FnUz,
    DataType::F8E5M2,
    DataType::F8E5M2FnUz,
    DataType::F8E8M0,
    DataType::F4E2M1,
    DataType::I4,
    DataType::U4,
    DataType::I2,
    DataType::U2,
];

/// `a` followed by `b` (`R` must be `N + M`), for building type lists at compile time.
const fn concat<const N: usize, const M: usize, const R: usize>(
    a: [DataType; N],
    b: [DataType; M],
) -> [DataType; R] {
    assert!(N + M == R, "concat: R must be N + M");
    let mut out = [DataType::F32; R];
    let mut i = 0;
    while i < N {
        out[i] = a[i];
        i += 1;
    }
    while i < R {
        out[i] = b[i - N];
        i += 1;
    }
    out
}

const STORED_TYPES: [DataType; 23] = concat(COMPUTED, NARROW);

/// Every type the backend computes on (the wide numeric types and bool).
pub const ANY: &[DataType] = &COMPUTED;

/// Every stored type: [`ANY`] plus the narrow float8/float4/int4/int2 types, which only
/// data-movement operators and casts accept.
pub const STORED: &[DataType] = &STORED_TYPES;

/// Every type a tensor can hold: [`STORED`] plus strings, which only copying operators
/// (Identity, Reshape …), shape queries, casts and the string operators accept.
pub const MOVED: &[DataType] = &concat::<23, 1, 24>(STORED_TYPES, [DataType::String]);

/// [`ANY`] plus strings (Equal).
pub const ANY_AND_STRING: &[DataType] = &concat::<13, 1, 14>(COMPUTED, [DataType::String]);

/// Every numeric type (all stored types but bool).
pub const NUMERIC: &[DataType] = &[
    DataType::F32,
    DataType::F64,
    DataType::F16,
    DataType::BF16,
    DataType::I8,
    DataType::U8,
    DataType::I16,
    DataType::U16,
    DataType::I32,
    DataType::U32,
    DataType::I64,
    DataType::U64,
];

/// The floating-point types.
pub const FLOATS: &[DataType] = &[DataType::F32, DataType::F64, DataType::F16, DataType::BF16];

/// Every supported operator, one line each.
pub static REGISTRY: &[&OpDef] = &[
    &abs::DEF,
    &math_unary::ACOS,
    &math_unary::ACOSH,
    &unary::FUSED_DEF,
    &add::DEF,
    &logical::AND,
    &arg_max::MAX_DEF,
    &arg_max::MIN_DEF,
    &math_unary::ASIN,
    &math_unary::ASINH,
    &math_unary::ATAN,
    &math_unary::ATANH,
    &attention::DEF,
    &average_pool::DEF,
    &batch_normalization::DEF,
    &bitwise::SHIFT,
    &bitwise::AND,
    &bitwise::NOT,
    &bitwise::OR,
    &bitwise::XOR,
    &cast::DEF,
    &cast::LIKE_DEF,
    &ceil::DEF,
    &math_unary::CELU,
    &clip::DEF,
    &concat::DEF,
    &constant::DEF,
    &constant_of_shape::DEF,
    &conv::DEF,
    &conv_depthwise::DEF,
    &conv_transpose::DEF,
    &math_unary::COS,
    &math_unary::COSH,
    &cum_sum::DEF,
    &depth_to_space::DEF,
    &div::DEF,
    &dropout::DEF,
    &einsum::DEF,
    &elu::DEF,
    &compare::EQUAL,
    &erf::DEF,
    &exp::DEF,
    &expand::DEF,
    &flatten::DEF,
    &floor::DEF,
    &nchwc::FROM_DEF,
    &conv::FUSED_DEF,
    &gemm::FUSED_DEF,
    &mat_mul::FUSED_DEF,
    &gru::DEF,
    &gather::DEF,
    &gather_elements::DEF,
    &scatter_gather_nd::GATHER_ND_DEF,
    &math_unary::GELU,
    &gemm::DEF,
    &global_average_pool::DEF,
    &lp_pool::GLOBAL_DEF,
    &global_max_pool::DEF,
    &compare::GREATER,
    &compare::GREATER_OR_EQUAL,
    &grid_sample::DEF,
    &normalization::GROUP_DEF,
    &hard_sigmoid::DEF,
    &math_unary::HARD_SWISH,
    &softmax::HARD_DEF,
    &identity::DEF,
    &if_op::DEF,
    &normalization::INSTANCE_DEF,
    &math_unary::IS_INF,
    &math_unary::IS_NAN,
    &lrn::DEF,
    &lstm::DEF,
    &layer_normalization::DEF,
    &leaky_relu::DEF,
    &compare::LESS,
    &compare::LESS_OR_EQUAL,
    &log::DEF,
    &softmax::LOG_DEF,
    &loop_op::DEF,
    &lp_normalization::DEF,
    &lp_pool::DEF,
    &mat_mul::DEF,
    &max::DEF,
    &max_pool::DEF,
    &max_unpool::DEF,
    &mean::DEF,
    &min::DEF,
    &math_unary::MISH,
    &modulo::DEF,
    &mul::DEF,
    &nchwc::CONV_DEF,
    &neg::DEF,
    &non_max_suppression::DEF,
    &non_zero::DEF,
    &logical::NOT,
    &one_hot::DEF,
    &logical::OR,
    &prelu::DEF,
    &pad::DEF,
    &pow::DEF,
    &rms_normalization::DEF,
    &rnn::DEF,
    &range::DEF,
    &reciprocal::DEF,
    &reduce::L1,
    &reduce::L2,
    &reduce::LOG_SUM,
    &reduce::LOG_SUM_EXP,
    &reduce::MAX,
    &reduce::MEAN,
    &reduce::MIN,
    &reduce::PROD,
    &reduce::SUM,
    &reduce::SUM_SQUARE,
    &relu::DEF,
    &reshape::DEF,
    &resize::DEF,
    &roi_align::DEF,
    &rotary_embedding::DEF,
    &math_unary::ROUND,
    &scan::DEF,
    &scatter_gather_nd::SCATTER_ELEMENTS_DEF,
    &scatter_gather_nd::SCATTER_ND_DEF,
    &selu::DEF,
    &shape::DEF,
    &math_unary::SHRINK,
    &sigmoid::DEF,
    &math_unary::SIGN,
    &math_unary::SIN,
    &math_unary::SINH,
    &size::DEF,
    &slice::DEF,
    &softmax::DEF,
    &softplus::DEF,
    &math_unary::SOFTSIGN,
    &depth_to_space::SPACE_TO_DEPTH_DEF,
    &split::DEF,
    &sqrt::DEF,
    &squeeze::DEF,
    &string_ops::CONCAT,
    &string_ops::NORMALIZER,
    &string_ops::SPLIT,
    &sub::DEF,
    &sum::DEF,
    &math_unary::TAN,
    &tanh::DEF,
    &math_unary::THRESHOLDED_RELU,
    &tile::DEF,
    &nchwc::TO_DEF,
    &top_k::DEF,
    &transpose::DEF,
    &trilu::DEF,
    &unsqueeze::DEF,
    &resize::UPSAMPLE_DEF,
    &where_op::DEF,
    &logical::XOR,
];

/// The activation named by the `activation` / `activation_params` attributes of the internal
/// fused operators.
pub fn fused_activation(ctx: &BuildCtx) -> Result<crate::kernels::activation::Activation> {
    fused_activation_named(ctx, "activation")
}

/// The activation named by the attributes `name` and `{name}_params` of an internal fused
/// operator (none when both are absent).
pub fn fused_activation_named(
    ctx: &BuildCtx,
    name: &str,
) -> Result<crate::kernels::activation::Activation> {
    use crate::kernels::activation::Activation;
    let kind = ctx.attr_string(name, "")?;
    let params = ctx.attr_floats(&format!("{name}_params"))?.unwrap_or(&[]);
    Ok(match (kind.as_str(), params) {
        ("", []) => Activation::None,
        ("Relu", []) => Activation::Relu,
        ("Sigmoid", []) => Activation::Sigmoid,
        ("Tanh", []) => Activation::Tanh,
        ("Gelu", []) => Activation::Gelu,
        ("HardSwish", []) => Activation::HardSwish,
        ("Silu", []) => Activation::Silu,
        ("Clip", [min, max]) => Activation::Clip {
            min: *min,
            max: *max,
        },
        (other, p) => {
            return Err(ctx.err(
                crate::error::Status::InvalidModel,
                format!("unknown fused activation {other} {p:?}"),
            ))
        }
    })
}

/// Finds an operator by domain and type.
pub fn lookup(domain: &str, op_type: &str) -> Option<&'static OpDef> {
    let domain = if domain == "ai.onnx" { "" } else { domain };
    REGISTRY
        .iter()
        .copied()
        .find(|d| d.op_type == op_type && d.domain == domain)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_names_are_unique_and_sorted() {
        let names: Vec<_> = REGISTRY.iter().map(|d| d.op_type).collect();
        let mut sorted = names.clone();
        sorted.sort_by_key(|n| n.to_string());
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted);
        assert!(lookup("", "Conv").is_some());
        assert!(lookup("ai.onnx", "Relu").is_some());
        assert!(lookup("com.example", "Relu").is_none());
        assert!(lookup("", "NoSuchOp").is_none());
    }

    #[test]
    fn registry_versions_and_attributes_agree_with_the_schemas() {
        let mut problems = Vec::new();
        for d in REGISTRY.iter().filter(|d| d.domain.is_empty()) {
            let versions = crate::schema::versions("", d.op_type);
            if versions.is_empty() {
                problems.push(format!("{}: no schema", d.op_type));
                continue;
            }
            let since: Vec<i64> = versions.iter().map(|s| s.since_version).collect();
            if !since.contains(&d.newest) {
                problems.push(format!(
                    "{}: newest {} is not a since-version {since:?}",
                    d.op_type, d.newest
                ));
            }
            if d.min_opset > d.newest {
                problems.push(format!(
                    "{}: min_opset {} above newest {}",
                    d.op_type, d.min_opset, d.newest
                ));
            }
            // Every attribute the implementation reads is declared by a version it implements.
            let in_range: Vec<_> = versions
                .iter()
                .filter(|s| s.since_version <= d.newest)
                .filter(|s| {
                    let next = versions.iter().find(|n| n.since_version > s.since_version);
                    next.is_none_or(|n| n.since_version > d.min_opset)
                })
                .collect();
            for a in d.attributes {
                if !in_range.iter().any(|s| s.attribute(a).is_some()) {
                    problems.push(format!(
                        "{}: attribute '{a}' is declared by no implemented version",
                        d.op_type
                    ));
                }
            }
        }
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
