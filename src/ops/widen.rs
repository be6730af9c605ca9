//! float16 and bfloat16 nodes computed by the float32 kernels.
//!
//! An operator whose fast kernels are float32 only (Conv, Gemm, the pools, the activations
//! …), or whose half-precision path is a plain loop (MatMul), computes a node on float16 or
//! bfloat16 data in float32: its half-precision inputs are widened (F16C conversions where the
//! CPU has them), the float32 kernel runs, and its float outputs are rounded back to the
//! node's type (to nearest, ties to even). Constant inputs are widened once, when the node is
//! built (once per graph for the graph's own weights, so their packed forms are shared by every
//! plan as for float32 weights). This is the arithmetic ONNX Runtime's CPU provider does for
//! these nodes too (it inserts casts around them): each node rounds once, to its own type.
#![forbid(unsafe_code)]

use super::{Built, InputInfo, Kernel, OpDef};
use crate::error::{Error, Result, Status};
use crate::exec::WeightCache;
use crate::ir::{Attr, DataType, Graph, Node, PooledF32, Subgraph, Tensor, TensorData};
use crate::kernels::scratch;
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;
use smallvec::SmallVec;
use std::sync::Arc;

/// Operators of the default domain that have a half-precision path of their own but compute
/// faster through float32: MatMul's own path is a triple loop, the others convert each element
/// through the generic scalar code, where float32 has vector kernels (and, with float32
/// constants, the rewrites of `exec::fuse`: the exporters' decomposed GELU, a MatMul's bias).
const FASTER_IN_F32: &[&str] = &[
    "MatMul",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Sum",
    "Pow",
    "Erf",
    "Gelu",
    "Sqrt",
    "Exp",
    "Softmax",
    "LayerNormalization",
];

/// How many leading outputs of a node `def` builds have the type of its input: all but
/// LayerNormalization's statistics (its outputs 1 and 2, float32 by default whatever the input).
fn typed_outputs(def: &OpDef) -> usize {
    if def.domain.is_empty() && def.op_type == "LayerNormalization" {
        1
    } else {
        usize::MAX
    }
}

/// Whether `def` computes a node whose data are `dtype` through its float32 kernels.
pub fn widens(def: &OpDef, dtype: DataType) -> bool {
    matches!(dtype, DataType::F16 | DataType::BF16)
        && def.types.contains(&DataType::F32)
        && (!def.types.contains(&dtype)
            || (def.domain.is_empty() && FASTER_IN_F32.contains(&def.op_type)))
}

/// Whether `def` computes nodes whose main data are `dtype`, itself or through float32.
pub fn computes(def: &OpDef, dtype: DataType) -> bool {
    def.types.contains(&dtype) || widens(def, dtype)
}

/// Operators of the default domain whose float inputs all have the node's type, so that any
/// of them tells it (for the others, the first input does: Pow's exponent, BatchNormalization's
/// statistics may have other types).
const ONE_FLOAT_TYPE: &[&str] = &["Add", "Sub", "Mul", "Div", "Sum", "MatMul", "Gemm", "Conv"];

/// Whether input `i` of a node of `def` tells the node's type (see [`half_type`]).
pub fn types_node(def: &OpDef, i: usize) -> bool {
    i == 0 || (def.domain.is_empty() && ONE_FLOAT_TYPE.contains(&def.op_type))
}

/// The half-precision type that `def` widens for a node with these inputs: the type of its
/// first present input, or of any float16/bfloat16 input of an operator whose float inputs
/// share one type (a float16 constant read first may have been widened already, by
/// `exec::fuse`), when [`widens`] says so.
///
/// `logical` gives, per input, the half-precision type of an input that an earlier node left
/// in float32 (see [`float32_values`]): the node's type is the input's logical type.
pub fn half_type(
    def: &OpDef,
    inputs: &[Option<InputInfo>],
    logical: &[Option<DataType>],
) -> Option<DataType> {
    let mut present = inputs.iter().enumerate().filter_map(|(i, x)| {
        let x = x.as_ref()?;
        Some((i, logical.get(i).copied().flatten().unwrap_or(x.dtype)))
    });
    let (_, first) = present.clone().next()?;
    let dtype = present
        .find(|&(i, t)| types_node(def, i) && matches!(t, DataType::F16 | DataType::BF16))
        .map_or(first, |(_, t)| t);
    widens(def, dtype).then_some(dtype)
}

/// Per value of `g`: whether a node that computes it in float32 may leave it in float32
/// instead of rounding it to its half-precision type, because every node that reads it
/// computes in float32 too (it would widen the value right back). Graph outputs and values
/// a subgraph captures keep their type. Leaving such a value wide saves two conversions and a
/// rounding (this is where ONNX Runtime rounds too: at the end of a run of float32 nodes).
pub fn float32_values(g: &Graph) -> Vec<bool> {
    let mut ok = vec![true; g.values.len()];
    let mut read = vec![false; g.values.len()];
    let mut captures = Vec::new();
    for n in &g.nodes {
        let widening =
            super::lookup(&n.domain, &n.op_type).is_some_and(|def| widens(def, DataType::F16));
        for id in n.inputs.iter().flatten() {
            read[*id] = true;
            ok[*id] &= widening;
        }
        captured(n, &mut captures);
    }
    for name in captures {
        if let Some(v) = g.values.iter().position(|v| v.name == name) {
            ok[v] = false;
        }
    }
    for &o in &g.outputs {
        ok[o] = false;
    }
    ok.iter().zip(read).map(|(&o, r)| o && r).collect()
}

/// Adds to `names` the outer values that the subgraphs of `n` (at any depth) capture.
pub fn captured(n: &Node, names: &mut Vec<String>) {
    for a in n.attrs.values() {
        let subs: &[Subgraph] = match a {
            Attr::Graph(s) => std::slice::from_ref(s),
            Attr::Graphs(v) => v,
            _ => &[],
        };
        for sub in subs {
            names.extend(sub.0.captures.iter().cloned());
            sub.0.nodes.iter().for_each(|inner| captured(inner, names));
        }
    }
}

/// The float32 form of a node's half-precision inputs whose contents are known at build time.
pub struct WideInputs {
    /// Per input: its widened contents, and whether they are a constant of the plan (kept by
    /// the kernel) rather than a run-time value the build read (a deferred build's input).
    tensors: Vec<Option<(Arc<Tensor>, bool)>>,
}

impl WideInputs {
    /// Widens the known contents of the `half` inputs among `inputs`; a graph weight is
    /// widened once per graph, in `cache`.
    pub fn new(
        inputs: &[Option<InputInfo>],
        half: DataType,
        cache: Option<&WeightCache>,
    ) -> Result<WideInputs> {
        let tensors = inputs
            .iter()
            .map(|info| {
                let Some(info) = info.as_ref().filter(|i| i.dtype == half) else {
                    return Ok(None);
                };
                if let Some(c) = info.constant {
                    let wide = match (info.weight, cache) {
                        (Some(id), Some(cache)) => cache.get_or_make(id, "float32", || widen(c))?,
                        _ => Arc::new(widen(c)?),
                    };
                    return Ok(Some((wide, true)));
                }
                match info.run_time {
                    Some(t) => Ok(Some((Arc::new(widen(t)?), false))),
                    None => Ok(None),
                }
            })
            .collect::<Result<_>>()?;
        Ok(WideInputs { tensors })
    }

    /// The inputs as the float32 build sees them: the `half` ones typed float32, with their
    /// widened contents.
    pub fn infos<'a>(
        &'a self,
        inputs: Vec<Option<InputInfo<'a>>>,
        half: DataType,
    ) -> Vec<Option<InputInfo<'a>>> {
        inputs
            .into_iter()
            .zip(&self.tensors)
            .map(|(info, wide)| {
                info.map(|mut info| {
                    if info.dtype == half {
                        info.dtype = DataType::F32;
                        match wide {
                            Some((t, true)) => info.constant = Some(t),
                            Some((t, false)) => info.run_time = Some(t),
                            None => {}
                        }
                    }
                    info
                })
            })
            .collect()
    }

    /// Wraps the float32 build of `def` so that it takes and gives `half` data: its float32
    /// outputs of the input's type are reported (and rounded at run time) as `half`, but those
    /// kept in float32.
    ///
    /// `keep[j]`: output position `j`, when it is of the node's type, stays float32 (see
    /// [`float32_values`]); the second result says, per position, the half-precision type of
    /// each output so kept.
    pub fn wrap(
        self,
        def: &OpDef,
        built: Built,
        half: DataType,
        keep: &[bool],
    ) -> (Built, Vec<Option<DataType>>) {
        let typed = typed_outputs(def);
        // Per output position: of the node's type (rounded, or kept float32), or not.
        let own: Vec<bool> = (built.outputs.iter().enumerate())
            .map(|(j, (t, _))| j < typed && *t == DataType::F32)
            .collect();
        let kept: Vec<Option<DataType>> = (own.iter().enumerate())
            .map(|(j, &o)| (o && keep.get(j).copied().unwrap_or(false)).then_some(half))
            .collect();
        let narrow: Vec<bool> = own
            .iter()
            .zip(&kept)
            .map(|(&o, k)| o && k.is_none())
            .collect();
        let outputs = (built.outputs.into_iter().zip(&narrow))
            .map(|((t, s), &n)| (if n { half } else { t }, s))
            .collect();
        let constants = self
            .tensors
            .into_iter()
            .map(|w| w.and_then(|(t, constant)| constant.then_some(t)))
            .collect();
        let built = Built {
            outputs,
            kernel: Box::new(Widened {
                inner: built.kernel,
                half,
                constants,
                narrow,
            }),
        };
        (built, kept)
    }
}

/// Per input or output of one node, on the stack for the usual few.
type Per<T> = SmallVec<[T; 4]>;

/// A float32 kernel run on half-precision data.
struct Widened {
    /// The float32 kernel.
    inner: Box<dyn Kernel>,
    /// The node's half-precision type.
    half: DataType,
    /// Per input: its float32 form, when it is a constant of the plan.
    constants: Vec<Option<Arc<Tensor>>>,
    /// Per output position: whether the float32 kernel's output is rounded to `half`.
    narrow: Vec<bool>,
}

impl Kernel for Widened {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        // The float32 temporaries' data are scratch buffers (`kernels::scratch`): a warmed-up
        // run allocates only their shapes.
        let wide: Per<Option<Tensor>> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| match t {
                Some(t) if t.dtype() == self.half && self.constant(i).is_none() => {
                    let mut w = scratch_tensor(&t.shape, t.len())?;
                    widen_into(t, &mut w)?;
                    Ok(Some(w))
                }
                _ => Ok(None),
            })
            .collect::<Result<_>>()?;
        let ins: Per<Option<&Tensor>> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| match (self.constant(i), &wide[i]) {
                (Some(c), _) if t.is_some() => Some(c),
                (_, Some(w)) => Some(w),
                _ => *t,
            })
            .collect();
        // The outputs of the node's type are the float32 kernel's float outputs (every
        // half-precision input was widened, so the kernel makes no half-precision value).
        let allocates = self.inner.allocates_outputs();
        let zeroed = !self.inner.overwrites_outputs();
        // Which outputs are rounded: those handed over in the node's type; a kernel that makes
        // its own outputs gets float32 placeholders, so there the positions tell (every
        // position is handed over unless an optional output is omitted).
        let rounded: Per<bool> = if allocates {
            if outputs.len() != self.narrow.len() && self.narrow.iter().any(|&n| n) {
                return Err(Error::new(
                    Status::InternalError,
                    "a float16 node that sizes its own outputs has an optional output omitted",
                ));
            }
            self.narrow.iter().copied().collect()
        } else {
            outputs.iter().map(|o| o.dtype() == self.half).collect()
        };
        let mut outs: Per<Tensor> = (outputs.iter_mut().zip(&rounded))
            .map(|(o, &r)| {
                if !r {
                    return Ok(std::mem::replace(o, placeholder()));
                }
                if allocates {
                    return Ok(placeholder());
                }
                let mut w = scratch_tensor(&o.shape, o.len())?;
                if zeroed {
                    if let TensorData::Pooled(p) = &mut w.data {
                        p.as_mut_slice().fill(0.0);
                    }
                }
                Ok(w)
            })
            .collect::<Result<_>>()?;
        let ran = self.inner.run(&ins, &mut outs);
        let mut narrowed = Ok(());
        for ((o, w), &r) in outputs.iter_mut().zip(outs).zip(&rounded) {
            if !r {
                *o = w;
                continue;
            }
            if ran.is_ok() && narrowed.is_ok() {
                narrowed = narrow_into(&w, o, self.half, allocates);
            }
            give_back(w);
        }
        drop(ins);
        wide.into_iter().flatten().for_each(give_back);
        ran.and(narrowed)
    }

    fn allocates_outputs(&self) -> bool {
        self.inner.allocates_outputs()
    }

    fn overwrites_outputs(&self) -> bool {
        // Rounding writes every element of a narrowed output; the others are the inner
        // kernel's own.
        self.inner.overwrites_outputs() || self.narrow.iter().all(|&n| n)
    }
}

impl Widened {
    /// The float32 form of input `i`, when it is a constant of the plan.
    fn constant(&self, i: usize) -> Option<&Tensor> {
        self.constants.get(i).and_then(|c| c.as_deref())
    }
}

/// An empty float32 tensor standing in for an output handed to the inner kernel.
fn placeholder() -> Tensor {
    Tensor {
        shape: Vec::new(),
        data: TensorData::F32(Vec::new()),
    }
}

/// A float32 tensor of `shape` (`len` elements) in a scratch buffer, its contents stale.
fn scratch_tensor(shape: &[usize], len: usize) -> Result<Tensor> {
    let mut p = PooledF32::from_aligned(scratch::take(len));
    p.set_len(len)?;
    Ok(Tensor {
        shape: shape.to_vec(),
        data: TensorData::Pooled(p),
    })
}

/// Returns the scratch buffer of a temporary from [`scratch_tensor`].
fn give_back(t: Tensor) {
    if let TensorData::Pooled(p) = t.data {
        scratch::give(p.into_aligned());
    }
}

/// `t` (float16 or bfloat16) as a float32 tensor.
pub fn widen(t: &Tensor) -> Result<Tensor> {
    let mut out = Tensor::f32(t.shape.clone(), crate::ir::try_filled(t.len())?)?;
    widen_into(t, &mut out)?;
    Ok(out)
}

/// Writes `t` (float16 or bfloat16) into the float32 tensor `out` of its length.
fn widen_into(t: &Tensor, out: &mut Tensor) -> Result<()> {
    let dst = out.as_mut_slice::<f32>()?;
    match &t.data {
        TensorData::F16(v) if v.len() == dst.len() => {
            in_pieces(dst, v, |d, s| s.convert_to_f32_slice(d))
        }
        TensorData::BF16(v) if v.len() == dst.len() => {
            in_pieces(dst, v, |d, s| s.convert_to_f32_slice(d))
        }
        other => {
            return Err(Error::new(
                Status::InternalError,
                format!(
                    "widening a {} tensor of {} into {} floats",
                    other.dtype().name(),
                    other.len(),
                    dst.len()
                ),
            ))
        }
    }
    Ok(())
}

/// Elements converted per task: a large tensor is converted on every thread of the pool (one
/// thread converted MobileNetV2's activations slower than two ran its convolutions).
const PIECE: usize = 1 << 14;

/// Runs `convert` on `dst` and `src` (of one length), in pieces of [`PIECE`] elements spread
/// over the current pool when there are several.
fn in_pieces<D: Send, S: Sync>(dst: &mut [D], src: &[S], convert: impl Fn(&mut [D], &[S]) + Sync) {
    if dst.len() <= PIECE || rayon::current_num_threads() == 1 {
        return convert(dst, src);
    }
    dst.par_chunks_mut(PIECE)
        .zip(src.par_chunks(PIECE))
        .for_each(|(d, s)| convert(d, s));
}

/// Rounds the float32 `wide` into `out` (of type `half`: float16 or bfloat16), to nearest with
/// ties to even; with `resize` (the inner kernel set the shape) `out` becomes a fresh tensor of
/// that shape.
fn narrow_into(wide: &Tensor, out: &mut Tensor, half: DataType, resize: bool) -> Result<()> {
    let src = wide.as_f32()?;
    if resize {
        out.shape = wide.shape.clone();
        out.data = TensorData::zeros(half, src.len())?;
    }
    match &mut out.data {
        TensorData::F16(v) if v.len() == src.len() => {
            in_pieces(v, src, |d, s| d.convert_from_f32_slice(s))
        }
        TensorData::BF16(v) if v.len() == src.len() => {
            in_pieces(v, src, |d, s| d.convert_from_f32_slice(s))
        }
        other => {
            return Err(Error::new(
                Status::InternalError,
                format!(
                    "rounding {} floats into a {} output of {}",
                    src.len(),
                    other.dtype().name(),
                    other.len()
                ),
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    #[test]
    fn rounds_to_nearest_even_both_ways() {
        // 1 + 2^-11 lies halfway between float16's 1 and 1 + 2^-10: ties go to the even 1;
        // 1 + 3·2^-11 lies halfway between 1 + 2^-10 and 1 + 2^-9: to the even 1 + 2^-9.
        let x = Tensor::f32(
            vec![3],
            vec![1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11), -65520.0],
        )
        .unwrap();
        let mut h = Tensor::from_vec(vec![3], vec![f16::ZERO; 3]).unwrap();
        narrow_into(&x, &mut h, DataType::F16, false).unwrap();
        let got: Vec<f32> = h
            .as_slice::<f16>()
            .unwrap()
            .iter()
            .map(|v| v.to_f32())
            .collect();
        assert_eq!(got, [1.0, 1.0 + 2f32.powi(-9), f32::NEG_INFINITY]);
        // bfloat16 keeps 8 significant bits: 1 + 2^-8 ties to 1, 1 + 3·2^-8 to 1 + 2^-6.
        let x = Tensor::f32(
            vec![2],
            vec![1.0 + 2f32.powi(-8), 1.0 + 3.0 * 2f32.powi(-8)],
        )
        .unwrap();
        let mut b = Tensor::from_vec(vec![2], vec![bf16::ZERO; 2]).unwrap();
        narrow_into(&x, &mut b, DataType::BF16, false).unwrap();
        let got: Vec<f32> = b
            .as_slice::<bf16>()
            .unwrap()
            .iter()
            .map(|v| v.to_f32())
            .collect();
        assert_eq!(got, [1.0, 1.0 + 2f32.powi(-6)]);
        assert_eq!(
            widen(&b).unwrap().as_f32().unwrap(),
            [1.0, 1.0 + 2f32.powi(-6)]
        );
    }

    #[test]
    fn values_stay_float32_only_between_float32_readers() {
        let text = "<ir_version: 8, opset_import: [\"\" : 17]>
            g (float16[2] x, bool b) => (float16[4] y, float16[2] z, float16[2] w) {
              a = Mul(x, x)
              r = Add(a, x)
              y = Concat <axis = 0> (r, r)
              s = Relu(x)
              z = Sub(s, x)
              w = If (b) <
                then_branch = t () => (float16[2] o) { o = Identity(s) },
                else_branch = e () => (float16[2] o) { o = Identity(x) }
              >
            }";
        let proto = crate::text::parse_model(text).expect("parses");
        let g = crate::ir::import(proto, Vec::new()).expect("imports");
        let ok = float32_values(&g);
        let at = |name: &str| ok[g.values.iter().position(|v| v.name == name).expect(name)];
        // Read by an Add only.
        assert!(at("a"));
        // Read by Concat (which computes in half precision itself); a graph output; read by
        // a Sub but also captured by a branch.
        assert!(!at("r") && !at("z") && !at("s"));
        assert!(!at("y") && !at("w"));
    }
}
