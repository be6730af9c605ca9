//! Tensors on the CLI's side of the C ABI: ONNX element types, reading inputs (raw bytes,
//! `.npy`, `.npz`, ONNX `TensorProto` `.pb`), generating them, writing `.npy`, summaries and
//! comparison with expected outputs.
#![forbid(unsafe_code)]

use onnxifi_rust::ir::{DataType, Elem, Tensor, TensorData};
pub use onnxifi_rust::kernels::reference::Rng;
use onnxifi_rust::model::onnx;
use prost::Message;
use std::ffi::CString;
use std::io::Read;
use std::path::Path;

/// One graph input or output: name, ONNX element type code, concrete shape, and its bytes
/// (little-endian, sub-byte types packed as ONNX packs them).
pub struct HostTensor {
    /// The graph value's name.
    pub name: CString,
    /// ONNX element type code.
    pub elem: i32,
    /// Concrete shape.
    pub shape: Vec<u64>,
    /// The buffer the backend reads or writes.
    pub data: Vec<u8>,
}

/// The library's view of an element type code.
fn dtype(elem: i32) -> Result<DataType, String> {
    DataType::from_code(elem as i64)
        .filter(|d| d.bits().is_some())
        .ok_or_else(|| format!("element type {elem} has no byte layout in an ONNXIFI buffer"))
}

/// The name of an element type as numpy spells it (`float32`, `int64`, ...), or ONNX's for
/// the types numpy lacks.
pub fn elem_name(elem: i32) -> String {
    let numpy = match elem {
        1 => "float32",
        2 => "uint8",
        3 => "int8",
        4 => "uint16",
        5 => "int16",
        6 => "int32",
        7 => "int64",
        9 => "bool",
        10 => "float16",
        11 => "float64",
        12 => "uint32",
        13 => "uint64",
        16 => "bfloat16",
        _ => "",
    };
    if !numpy.is_empty() {
        return numpy.to_string();
    }
    DataType::from_code(elem as i64).map_or_else(|| format!("type {elem}"), |d| d.name())
}

/// Bytes of `count` elements of `elem` in a buffer.
pub fn byte_len(elem: i32, count: usize) -> Result<usize, String> {
    dtype(elem)?
        .byte_len(count)
        .ok_or_else(|| format!("{count} elements of {} do not fit memory", elem_name(elem)))
}

/// Elements of a shape, refusing overflow.
pub fn count(shape: &[u64]) -> Result<usize, String> {
    shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))
        .ok_or_else(|| format!("shape {shape:?} is too large"))
}

impl HostTensor {
    /// A zeroed tensor (an output buffer).
    pub fn zeros(name: &str, elem: i32, shape: Vec<u64>) -> Result<HostTensor, String> {
        let len = byte_len(elem, count(&shape)?)?;
        let mut data = Vec::new();
        data.try_reserve_exact(len)
            .map_err(|_| format!("'{name}': cannot allocate {len} bytes"))?;
        data.resize(len, 0);
        Ok(HostTensor {
            name: c_name(name)?,
            elem,
            shape,
            data,
        })
    }

    /// The name as text.
    pub fn name_str(&self) -> String {
        self.name.to_string_lossy().into_owned()
    }

    /// The elements as f64 (`None` for types without numeric values here).
    pub fn values(&self) -> Option<Vec<f64>> {
        values(self.elem, &self.shape, &self.data)
    }

    /// `[shape] type` and, for numeric types, min, max, mean and the first values.
    pub fn summary(&self, first: usize) -> String {
        let head = format!("{:?} {}", self.shape, elem_name(self.elem));
        let Some(v) = self.values() else {
            return head;
        };
        let shown: Vec<String> = v
            .iter()
            .take(first)
            .map(|x| fmt_value(*x, self.elem))
            .collect();
        let more = if v.len() > first { ", ..." } else { "" };
        let mut text = format!("{head}: [{}{more}]", shown.join(", "));
        if !v.is_empty() {
            let min = v.iter().copied().fold(f64::INFINITY, f64::min);
            let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            text += &format!("\n       min {min:.6} max {max:.6} mean {mean:.6}");
        }
        text
    }
}

/// The elements of a buffer of `elem` and `shape` as f64 (`None` for types without numeric
/// values here, or when the copies cannot be allocated).
fn values(elem: i32, shape: &[u64], bytes: &[u8]) -> Option<Vec<f64>> {
    let d = dtype(elem).ok()?;
    let data = TensorData::from_le_bytes(d, bytes, count(shape).ok()?).ok()?;
    onnxifi_rust::dispatch_stored!(d, T => T::slice(&data).and_then(|s| {
        let mut out = Vec::new();
        out.try_reserve_exact(s.len()).ok()?;
        out.extend(s.iter().map(|v| v.to_f64()));
        Some(out)
    }), _other => None)
}

fn c_name(name: &str) -> Result<CString, String> {
    CString::new(name).map_err(|_| format!("the name {name:?} holds a NUL"))
}

/// One value as the CLI prints it: 6 decimals for floats, integers as they are.
fn fmt_value(x: f64, elem: i32) -> String {
    match elem {
        1 | 10 | 11 | 16 | 17..=20 | 23 | 24 => format!("{x:.6}"),
        _ => format!("{x}"),
    }
}

// ----------------------------------------------------------------------------- reading

/// One tensor of an input file: its name in the file (`.npz` members, named `.pb`), the
/// tensor when the file says its type and shape, else the raw bytes.
pub type FileTensor = (Option<String>, Option<Loaded>, Vec<u8>);

/// A tensor read from a file, before it is matched with a graph input.
pub struct Loaded {
    /// Element type.
    pub elem: i32,
    /// Shape.
    pub shape: Vec<u64>,
    /// Bytes in ONNXIFI layout.
    pub data: Vec<u8>,
}

/// Reads the tensor(s) of a file by extension: `.npy` (one), `.npz` (by array name), `.pb`
/// (one ONNX TensorProto); anything else is raw bytes (`None` for elem and shape: they come
/// from the model).
pub fn read_file(path: &Path) -> Result<Vec<FileTensor>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    let shown = path.display();
    Ok(match ext.as_str() {
        "npy" => vec![(
            None,
            Some(npy_read(&bytes).map_err(|e| format!("{shown}: {e}"))?),
            vec![],
        )],
        "npz" => npz_read(&bytes)
            .map_err(|e| format!("{shown}: {e}"))?
            .into_iter()
            .map(|(n, t)| (Some(n), Some(t), vec![]))
            .collect(),
        "pb" => {
            let (name, t) = pb_read(&bytes).map_err(|e| format!("{shown}: {e}"))?;
            vec![(name, Some(t), vec![])]
        }
        _ => vec![(None, None, bytes)],
    })
}

/// Decodes an ONNX `TensorProto` (raw or typed fields), with its name if it has one.
pub fn pb_read(bytes: &[u8]) -> Result<(Option<String>, Loaded), String> {
    let proto =
        onnx::TensorProto::decode(bytes).map_err(|e| format!("not an ONNX TensorProto: {e}"))?;
    let name = proto.name.clone().filter(|n| !n.is_empty());
    let t = Tensor::from_proto(&proto).map_err(|e| e.message)?;
    let elem = t.dtype().code();
    dtype(elem)?;
    let mut data = zeroed_bytes(t.dtype().byte_len(t.data.len()).unwrap_or(0))?;
    t.data.write_le_bytes(&mut data);
    Ok((
        name,
        Loaded {
            elem,
            shape: t.shape.iter().map(|&d| d as u64).collect(),
            data,
        },
    ))
}

/// The `.npy` type string of an element type, and back.
const NPY_TYPES: [(&str, i32); 12] = [
    ("f4", 1),
    ("u1", 2),
    ("i1", 3),
    ("u2", 4),
    ("i2", 5),
    ("i4", 6),
    ("i8", 7),
    ("b1", 9),
    ("f2", 10),
    ("f8", 11),
    ("u4", 12),
    ("u8", 13),
];

/// Decodes a `.npy` file (versions 1 to 3, C order, little-endian or byte types).
pub fn npy_read(bytes: &[u8]) -> Result<Loaded, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a .npy file".into());
    }
    let (header_len, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(format!(".npy version {v} is not supported")),
    };
    let header = bytes
        .get(start..start + header_len)
        .and_then(|h| std::str::from_utf8(h).ok())
        .ok_or("truncated .npy header")?;
    let field = |key: &str| -> Result<&str, String> {
        let at = header
            .find(&format!("'{key}'"))
            .ok_or_else(|| format!(".npy header has no '{key}'"))?;
        Ok(header[at + key.len() + 2..].trim_start_matches([':', ' ']))
    };
    let descr = field("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split('\'').next())
        .ok_or(".npy descr is not a string")?;
    if field("fortran_order")?.starts_with("True") {
        return Err("Fortran-order arrays are not supported; save it in C order".into());
    }
    let shape_text = field("shape")?;
    let shape_text = shape_text
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or(".npy shape is not a tuple")?;
    let shape: Vec<u64> = shape_text
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|_| format!(".npy shape has {s:?}")))
        .collect::<Result<_, String>>()?;
    let (order, code) = descr.split_at(1);
    if order == ">" {
        return Err(format!("big-endian .npy data ({descr}) is not supported"));
    }
    let elem = NPY_TYPES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, e)| *e)
        .ok_or_else(|| format!(".npy type {descr} is not supported"))?;
    let len = byte_len(elem, count(&shape)?)?;
    let data = bytes
        .get(start + header_len..start + header_len + len)
        .ok_or_else(|| format!(".npy data is shorter than {len} bytes"))?
        .to_vec();
    Ok(Loaded { elem, shape, data })
}

/// Encodes a tensor as a `.npy` file (version 1.0).
pub fn npy_write(t: &HostTensor) -> Result<Vec<u8>, String> {
    let code = NPY_TYPES
        .iter()
        .find(|(_, e)| *e == t.elem)
        .map(|(c, _)| *c)
        .ok_or_else(|| format!("{} has no .npy type", elem_name(t.elem)))?;
    let order = if matches!(code, "u1" | "i1" | "b1") {
        "|"
    } else {
        "<"
    };
    let dims: Vec<String> = t.shape.iter().map(u64::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header =
        format!("{{'descr': '{order}{code}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&t.data);
    Ok(out)
}

/// The arrays of a `.npz` archive (stored or deflated members), by name.
pub fn npz_read(bytes: &[u8]) -> Result<Vec<(String, Loaded)>, String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| format!("not a .npz (zip) archive: {e}"))?;
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).map_err(|e| e.to_string())?;
        let name = member
            .name()
            .map_err(|e| e.to_string())?
            .trim_end_matches(".npy")
            .to_string();
        let mut data = Vec::new();
        member
            .read_to_end(&mut data)
            .map_err(|e| format!("{name}: {e}"))?;
        out.push((
            name.clone(),
            npy_read(&data).map_err(|e| format!("{name}: {e}"))?,
        ));
    }
    Ok(out)
}

// ----------------------------------------------------------------------------- generating

/// What values an input can be given without a file.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fill {
    /// Real values in [-1, 1).
    Real,
    /// Integers in `[0, n)` (indices into a table of `n` rows, small counts, flags).
    Below(u64),
}

/// `count` elements of `elem` filled as `fill` says: from `rng` (the library's deterministic
/// test generator, so `--seed N` gives the same inputs everywhere) when given, else from the
/// sequence `k(i) = (i·37 + 11) mod 101` (reals `k/50 − 1`, integers `k mod n`).
pub fn generate(
    elem: i32,
    n: usize,
    fill: Fill,
    mut rng: Option<&mut Rng>,
) -> Result<Vec<u8>, String> {
    let d = dtype(elem)?;
    let mut data = TensorData::zeros(d, n).map_err(|e| e.message)?;
    let seeded = rng.is_some();
    let mut value = |i: usize| {
        let k_i = (i * 37 + 11) % 101;
        // A value in [-1, 1): the generator's, or the fixed sequence's.
        let unit = match rng.as_deref_mut() {
            Some(r) => f64::from(r.next_f32()),
            None => k_i as f64 / 50.0 - 1.0,
        };
        match fill {
            Fill::Real => unit,
            Fill::Below(k) if seeded => ((unit + 1.0) / 2.0 * k as f64).floor().min(k as f64 - 1.0),
            Fill::Below(k) => (k_i as u64 % k.max(1)) as f64,
        }
    };
    onnxifi_rust::dispatch_stored!(d, T => {
        if let Some(s) = T::slice_mut(&mut data) {
            for (i, v) in s.iter_mut().enumerate() {
                *v = T::from_f64(value(i));
            }
        }
    }, _other => return Err(format!("cannot generate {} values", elem_name(elem))));
    let mut bytes = zeroed_bytes(d.byte_len(n).unwrap_or(0))?;
    data.write_le_bytes(&mut bytes);
    Ok(bytes)
}

/// `len` zero bytes, or an error instead of an abort when they cannot be allocated.
pub fn zeroed_bytes(len: usize) -> Result<Vec<u8>, String> {
    let mut v = Vec::new();
    v.try_reserve_exact(len)
        .map_err(|_| format!("cannot allocate {len} bytes"))?;
    v.resize(len, 0);
    Ok(v)
}

// ----------------------------------------------------------------------------- comparing

/// How far `got` is from `want`: `Ok(max abs difference)` when every element satisfies
/// `|got − want| ≤ atol + rtol·|want|` (NaN matching NaN), else the first mismatch.
pub fn compare(got: &HostTensor, want: &Loaded, rtol: f64, atol: f64) -> Result<f64, String> {
    if got.elem != want.elem {
        return Err(format!(
            "type {} where {} is expected",
            elem_name(got.elem),
            elem_name(want.elem)
        ));
    }
    if got.shape != want.shape {
        return Err(format!(
            "shape {:?} where {:?} is expected",
            got.shape, want.shape
        ));
    }
    let (Some(g), Some(w)) = (got.values(), values(want.elem, &want.shape, &want.data)) else {
        return if got.data == want.data {
            Ok(0.0)
        } else {
            Err("the bytes differ".into())
        };
    };
    let mut worst = 0.0f64;
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        if a.is_nan() && b.is_nan() || a == b {
            continue;
        }
        let diff = (a - b).abs();
        if diff.is_nan() || diff > atol + rtol * b.abs() {
            return Err(format!(
                "element {i} is {a}, expected {b} (rtol {rtol}, atol {atol})"
            ));
        }
        worst = worst.max(diff);
    }
    Ok(worst)
}
