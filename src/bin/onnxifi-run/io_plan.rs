//! From a model and the command line to the tensors of a run: the graph inputs to feed (from
//! files, ONNX test data or generated), symbolic dimensions bound by `--dim` or by the files,
//! and the output buffers sized by the library's shape inference.
#![forbid(unsafe_code)]

use crate::capi::{Handle, Onnxifi};
use crate::model::{load_model, Format};
use crate::tensor::{self, count, Fill, HostTensor, Loaded, Rng};
use crate::{CliError, Flags};
use onnxifi_rust::model::onnx;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};

/// One dimension of a declared shape.
#[derive(Clone, Debug)]
enum Dim {
    Fixed(u64),
    Symbol(String),
    Unknown,
}

/// A graph input or output as the model declares it.
pub struct Declared {
    /// Its name.
    pub name: String,
    /// ONNX element type code.
    pub elem: i32,
    /// Declared dimensions (`None`: no shape given).
    dims: Option<Vec<Dim>>,
}

/// The inputs a caller binds (graph inputs without an initializer) and the outputs.
pub fn declared_io(graph: &onnx::GraphProto) -> Result<(Vec<Declared>, Vec<Declared>), String> {
    let weights: Vec<&str> = graph
        .initializer
        .iter()
        .filter_map(|t| t.name.as_deref())
        .collect();
    let one = |v: &onnx::ValueInfoProto| -> Result<Declared, String> {
        use onnx::tensor_shape_proto::dimension::Value as D;
        use onnx::type_proto::Value;
        let name = v.name.clone().unwrap_or_default();
        let Some(Value::TensorType(t)) = v.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
            return Err(format!(
                "'{name}' is not a tensor: ONNXIFI passes only tensors across its C API"
            ));
        };
        let dims = t.shape.as_ref().map(|s| {
            s.dim
                .iter()
                .map(|d| match &d.value {
                    Some(D::DimValue(n)) if *n >= 0 => Dim::Fixed(*n as u64),
                    Some(D::DimParam(p)) if !p.is_empty() => Dim::Symbol(p.clone()),
                    _ => Dim::Unknown,
                })
                .collect()
        });
        Ok(Declared {
            name,
            elem: t.elem_type.unwrap_or(0),
            dims,
        })
    };
    let inputs = graph
        .input
        .iter()
        .filter(|v| !weights.contains(&v.name.as_deref().unwrap_or("")))
        .map(one)
        .collect::<Result<_, _>>()?;
    let outputs = graph.output.iter().map(one).collect::<Result<_, _>>()?;
    Ok((inputs, outputs))
}

/// Every symbolic dimension name of the inputs.
fn symbols(inputs: &[Declared]) -> Vec<String> {
    let mut out: Vec<String> = inputs
        .iter()
        .flat_map(|d| d.dims.iter().flatten())
        .filter_map(|d| match d {
            Dim::Symbol(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Operator inputs that hold shapes, axes, counts or bounds: values there must come from a
/// file, since no generated value is sure to make sense.
const SHAPE_LIKE: &[(&str, &[usize])] = &[
    ("CenterCropPad", &[1, 2]),
    ("Compress", &[1]),
    ("ConstantOfShape", &[0]),
    ("CumSum", &[1]),
    ("Expand", &[1]),
    ("Loop", &[0, 1]),
    ("NonMaxSuppression", &[2]),
    ("OneHot", &[1]),
    ("Pad", &[1, 2, 3]),
    ("Range", &[0, 1, 2]),
    ("ReduceL1", &[1]),
    ("ReduceL2", &[1]),
    ("ReduceLogSum", &[1]),
    ("ReduceLogSumExp", &[1]),
    ("ReduceMax", &[1]),
    ("ReduceMean", &[1]),
    ("ReduceMin", &[1]),
    ("ReduceProd", &[1]),
    ("ReduceSum", &[1]),
    ("ReduceSumSquare", &[1]),
    ("Reshape", &[1]),
    ("Resize", &[1, 2, 3]),
    ("ScatterElements", &[1]),
    ("ScatterND", &[1]),
    ("Slice", &[1, 2, 3, 4]),
    ("Split", &[1]),
    ("Squeeze", &[1]),
    ("Tile", &[1]),
    ("TopK", &[1]),
    ("Trilu", &[1]),
    ("Unsqueeze", &[1]),
    ("Upsample", &[1]),
];

/// How a generated input is filled, from the nodes that read it: reals for floats; for
/// integers, indices below the table size when a Gather reads them, small values otherwise;
/// an error naming the node when a node reads them as a shape, axes or bounds.
fn fill_for(graph: &onnx::GraphProto, input: &Declared) -> Result<Fill, String> {
    let is_float = matches!(input.elem, 1 | 10 | 11 | 16 | 17..=20 | 23 | 24);
    if is_float {
        return Ok(Fill::Real);
    }
    let mut fill = Fill::Below(if input.elem == 9 { 2 } else { 10 });
    for node in &graph.node {
        let op = node.op_type.as_deref().unwrap_or("");
        for (pos, name) in node.input.iter().enumerate() {
            if *name != input.name {
                continue;
            }
            if SHAPE_LIKE
                .iter()
                .any(|(o, positions)| *o == op && positions.contains(&pos))
            {
                let node_name = match node.name.as_deref() {
                    Some(n) if !n.is_empty() => format!("{op} node '{n}'"),
                    _ => format!("a {op} node"),
                };
                return Err(format!(
                    "input '{}' ({}) is read by {node_name} as a shape, axes or bounds: no \
                     generated value is sure to make sense; give its values with --input {}=FILE \
                     (.npy, .npz, .pb or raw bytes)",
                    input.name,
                    tensor::elem_name(input.elem),
                    input.name
                ));
            }
            if matches!(op, "Gather" | "GatherElements" | "GatherND") && pos == 1 {
                let rows = table_rows(graph, node);
                fill = match fill {
                    Fill::Below(k) => Fill::Below(k.min(rows)),
                    f => f,
                };
            }
        }
    }
    Ok(fill)
}

/// Rows along the gathered axis of a Gather whose table is a weight (1 otherwise: index 0 is
/// always valid).
fn table_rows(graph: &onnx::GraphProto, node: &onnx::NodeProto) -> u64 {
    let Some(table) = node.input.first() else {
        return 1;
    };
    let axis = node
        .attribute
        .iter()
        .find(|a| a.name.as_deref() == Some("axis"))
        .and_then(|a| a.i)
        .unwrap_or(0);
    graph
        .initializer
        .iter()
        .find(|t| t.name.as_deref() == Some(table.as_str()))
        .and_then(|t| {
            let rank = t.dims.len() as i64;
            let axis = if axis < 0 { axis + rank } else { axis };
            t.dims.get(usize::try_from(axis).ok()?).copied()
        })
        .filter(|&d| d > 0)
        .map_or(1, |d| d as u64)
}

/// Where the values of inputs come from.
pub struct InputSources {
    /// `--input NAME=FILE` and `--input FILE` (`.npz`, or a named `.pb`, or the only input).
    pub files: Vec<(Option<String>, PathBuf)>,
    /// `--dim SYMBOL=N`.
    pub dims: Vec<(String, u64)>,
    /// `--seed N`: random inputs; deterministic ones otherwise.
    pub seed: Option<u64>,
    /// `--expect DIR`: ONNX test data whose `input_N.pb` feed the inputs not given otherwise.
    pub expect: Option<PathBuf>,
}

impl InputSources {
    /// No files, no `--dim`, no seed, no test data.
    pub fn new() -> InputSources {
        InputSources {
            files: Vec::new(),
            dims: Vec::new(),
            seed: None,
            expect: None,
        }
    }

    /// Takes `--input`, `--seed` or `--dim` (with its value from `f`); `false` for other flags.
    pub fn take_flag(&mut self, f: &mut Flags, arg: &str) -> Result<bool, CliError> {
        match arg {
            "--input" => {
                let v = f.value(arg)?;
                self.files.push(match v.split_once('=') {
                    Some((n, p)) => (Some(n.to_string()), PathBuf::from(p)),
                    None => (None, PathBuf::from(v)),
                });
            }
            "--seed" => self.seed = Some(f.number(arg)?),
            "--dim" => {
                let v = f.value(arg)?;
                let (n, d) = v
                    .split_once('=')
                    .ok_or_else(|| CliError::usage(format!("--dim {v:?}: expected SYMBOL=N")))?;
                let d = d
                    .parse::<u64>()
                    .ok()
                    .filter(|&d| d > 0)
                    .ok_or_else(|| CliError::usage(format!("--dim {v:?}: expected N ≥ 1")))?;
                self.dims.push((n.to_string(), d));
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// A model ready to feed: its serialized bytes, declared inputs and outputs, and the input
/// tensors (what `run` and `bench` both start from).
pub struct Prepared {
    /// The serialized model the library receives.
    pub bytes: Vec<u8>,
    /// The inputs a caller binds.
    pub declared_in: Vec<Declared>,
    /// The outputs.
    pub declared_out: Vec<Declared>,
    /// The tensors to feed, in `declared_in` order.
    pub inputs: Vec<HostTensor>,
}

/// Loads `model` and makes its inputs from `sources`.
pub fn prepare(
    model: &str,
    from: Option<Format>,
    sources: &InputSources,
) -> Result<Prepared, CliError> {
    crate::check_thread_env()?;
    let loaded = load_model(model, from)?;
    let graph = loaded
        .model
        .graph
        .as_ref()
        .ok_or_else(|| CliError::failed("the model has no graph"))?;
    let (declared_in, declared_out) = declared_io(graph).map_err(CliError::failed)?;
    let inputs = make_inputs(graph, &declared_in, sources).map_err(CliError::usage)?;
    Ok(Prepared {
        bytes: loaded.bytes,
        declared_in,
        declared_out,
        inputs,
    })
}

/// The tensors to feed, in graph input order.
pub fn make_inputs(
    graph: &onnx::GraphProto,
    inputs: &[Declared],
    src: &InputSources,
) -> Result<Vec<HostTensor>, String> {
    let known = symbols(inputs);
    for (s, _) in &src.dims {
        if !known.contains(s) {
            return Err(format!(
                "--dim {s}: the model's inputs have no dimension named {s:?} (they have: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ));
        }
    }
    // Values given by files, by input name.
    let mut given: BTreeMap<String, (Option<Loaded>, Vec<u8>, PathBuf)> = BTreeMap::new();
    for (name, path) in &src.files {
        for (inner, loaded, raw) in tensor::read_file(path)? {
            let target = match (name, inner) {
                (Some(n), _) => n.clone(),
                (None, Some(n)) => n,
                (None, None) if inputs.len() == 1 => inputs[0].name.clone(),
                (None, None) => {
                    return Err(format!(
                        "--input {}: the model has {} inputs; say which with NAME=FILE",
                        path.display(),
                        inputs.len()
                    ))
                }
            };
            if !inputs.iter().any(|d| d.name == target) {
                return Err(format!("--input {target}: the model has no such input"));
            }
            given.insert(target, (loaded, raw, path.clone()));
        }
    }
    if let Some(dir) = &src.expect {
        for (i, d) in inputs.iter().enumerate() {
            let path = dir.join(format!("input_{i}.pb"));
            if !given.contains_key(&d.name) && path.exists() {
                let (_, t) = tensor::pb_read(
                    &std::fs::read(&path)
                        .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
                )
                .map_err(|e| format!("{}: {e}", path.display()))?;
                given.insert(d.name.clone(), (Some(t), Vec::new(), path));
            }
        }
    }
    // Bind symbols: --dim first, then the shapes of the tensors read from files.
    let mut bound: BTreeMap<String, u64> = src.dims.iter().cloned().collect();
    for d in inputs {
        let Some((Some(t), _, path)) = given.get(&d.name) else {
            continue;
        };
        check_against(d, t, path, &mut bound)?;
    }
    let mut rng = src.seed.map(Rng::new);
    let mut out = Vec::with_capacity(inputs.len());
    for d in inputs {
        let name = CString::new(d.name.clone()).map_err(|_| "a name holds a NUL")?;
        let tensor = match given.remove(&d.name) {
            Some((Some(t), _, _)) => HostTensor {
                name,
                elem: t.elem,
                shape: t.shape,
                data: t.data,
            },
            Some((None, raw, path)) => {
                let shape = concrete(d, &bound)?;
                let want = tensor::byte_len(d.elem, count(&shape)?)?;
                if raw.len() != want {
                    return Err(format!(
                        "{}: {} bytes, input {} {shape:?} {} needs {want}",
                        path.display(),
                        raw.len(),
                        d.name,
                        tensor::elem_name(d.elem)
                    ));
                }
                HostTensor {
                    name,
                    elem: d.elem,
                    shape,
                    data: raw,
                }
            }
            None => {
                let shape = concrete(d, &bound)?;
                let fill = fill_for(graph, d)?;
                let data = tensor::generate(d.elem, count(&shape)?, fill, rng.as_mut())?;
                HostTensor {
                    name,
                    elem: d.elem,
                    shape,
                    data,
                }
            }
        };
        out.push(tensor);
    }
    Ok(out)
}

/// Checks a tensor read from `path` against the declaration, binding its symbols.
fn check_against(
    d: &Declared,
    t: &Loaded,
    path: &Path,
    bound: &mut BTreeMap<String, u64>,
) -> Result<(), String> {
    let shown = path.display();
    if t.elem != d.elem {
        return Err(format!(
            "{shown}: {} values for input '{}', which is {}",
            tensor::elem_name(t.elem),
            d.name,
            tensor::elem_name(d.elem)
        ));
    }
    let Some(dims) = &d.dims else {
        return Ok(());
    };
    if dims.len() != t.shape.len() {
        return Err(format!(
            "{shown}: shape {:?} for input '{}' of rank {}",
            t.shape,
            d.name,
            dims.len()
        ));
    }
    for (dim, &v) in dims.iter().zip(&t.shape) {
        match dim {
            Dim::Fixed(n) if *n != v => {
                return Err(format!(
                    "{shown}: shape {:?} for input '{}', declared {}",
                    t.shape,
                    d.name,
                    dims_text(dims)
                ))
            }
            Dim::Symbol(s) => match bound.get(s) {
                Some(&b) if b != v => {
                    return Err(format!(
                        "{shown}: dimension {s} is {v} here but {b} elsewhere"
                    ))
                }
                _ => {
                    bound.insert(s.clone(), v);
                }
            },
            _ => {}
        }
    }
    Ok(())
}

/// The declared shape with its symbols bound (unbound symbols are 1).
fn concrete(d: &Declared, bound: &BTreeMap<String, u64>) -> Result<Vec<u64>, String> {
    let dims = d.dims.as_ref().ok_or_else(|| {
        format!(
            "input '{}' has no declared shape: give its values with --input {}=FILE",
            d.name, d.name
        )
    })?;
    dims.iter()
        .map(|dim| match dim {
            Dim::Fixed(0) => Err(format!(
                "input '{}' has a zero dimension, which ONNXIFI descriptors cannot carry",
                d.name
            )),
            Dim::Fixed(n) => Ok(*n),
            Dim::Symbol(s) => Ok(bound.get(s).copied().unwrap_or(1)),
            Dim::Unknown => Err(format!(
                "input '{}' has an unnamed dimension ({}): give its values with --input {}=FILE",
                d.name,
                dims_text(dims),
                d.name
            )),
        })
        .collect()
}

fn dims_text(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => n.to_string(),
            Dim::Symbol(s) => s.clone(),
            Dim::Unknown => "?".into(),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// The output buffers, sized by the library's shape inference for these inputs (or, for a
/// library without that extension, by the declarations with the inputs' symbols).
pub fn make_outputs(
    api: &Onnxifi,
    graph: Handle,
    inputs: &mut [HostTensor],
    declared_in: &[Declared],
    outputs: &[Declared],
) -> Result<Vec<HostTensor>, String> {
    let names: Vec<CString> = outputs
        .iter()
        .map(|d| CString::new(d.name.clone()).map_err(|_| "a name holds a NUL".to_string()))
        .collect::<Result<_, _>>()?;
    let inferred = match api.output_shapes(graph, inputs, &names)? {
        Some(v) => v,
        None => {
            let mut bound = BTreeMap::new();
            for (d, t) in declared_in.iter().zip(inputs.iter()) {
                for (dim, &v) in d.dims.iter().flatten().zip(&t.shape) {
                    if let Dim::Symbol(s) = dim {
                        bound.insert(s.clone(), v);
                    }
                }
            }
            outputs
                .iter()
                .map(|d| Ok((d.elem, concrete(d, &bound)?)))
                .collect::<Result<_, String>>()?
        }
    };
    outputs
        .iter()
        .zip(inferred)
        .map(|(d, (elem, shape))| {
            if shape.contains(&0) {
                return Err(format!(
                    "output '{}' has shape {shape:?}: a 0 is a size only the run decides, and \
                     ONNXIFI needs output buffers sized before the run",
                    d.name
                ));
            }
            HostTensor::zeros(&d.name, elem, shape)
        })
        .collect()
}
