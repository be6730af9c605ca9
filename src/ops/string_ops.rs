//! The string operators: `StringConcat` (element-wise, numpy broadcasting), `StringSplit` (each
//! element split on a delimiter or on runs of whitespace, padded with empty strings) and
//! `StringNormalizer` (stop words removed, case changed).

use super::util::BuildCtx;
use super::{binary, Built, Kernel, OpDef};
use crate::error::{Error, Result, Status};
use crate::ir::{DataType, Tensor, TensorData};
use crate::kernels::broadcast::map2;

const STRING: &[DataType] = &[DataType::String];

/// The `StringConcat` operator.
pub static CONCAT: OpDef = OpDef {
    op_type: "StringConcat",
    domain: "",
    min_opset: 20,
    newest: 20,
    attributes: &[],
    types: STRING,
    build: build_concat,
};

/// The `StringSplit` operator.
pub static SPLIT: OpDef = OpDef {
    op_type: "StringSplit",
    domain: "",
    min_opset: 20,
    newest: 20,
    attributes: &["delimiter", "maxsplit"],
    types: STRING,
    build: build_split,
};

/// The `StringNormalizer` operator.
pub static NORMALIZER: OpDef = OpDef {
    op_type: "StringNormalizer",
    domain: "",
    min_opset: 10,
    newest: 10,
    attributes: &[
        "case_change_action",
        "is_case_sensitive",
        "locale",
        "stopwords",
    ],
    types: STRING,
    build: build_normalizer,
};

/// The strings of a present input.
fn strings<'t>(inputs: &[Option<&'t Tensor>], i: usize) -> Result<&'t [String]> {
    match inputs.get(i).copied().flatten().map(|t| &t.data) {
        Some(TensorData::String(v)) => Ok(v),
        _ => Err(Error::new(
            Status::InternalError,
            format!("input {i} is not a string tensor"),
        )),
    }
}

fn require_strings(ctx: &BuildCtx, n: usize) -> Result<()> {
    for i in 0..n {
        let t = ctx.input(i)?.dtype;
        if t != DataType::String {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("input {i} is {}, not string", t.name()),
            ));
        }
    }
    Ok(())
}

struct ConcatKernel {
    a_shape: Vec<usize>,
    b_shape: Vec<usize>,
    out_shape: Vec<usize>,
}

impl Kernel for ConcatKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let a: Vec<&str> = strings(inputs, 0)?.iter().map(String::as_str).collect();
        let b: Vec<&str> = strings(inputs, 1)?.iter().map(String::as_str).collect();
        let TensorData::String(out) = &mut outputs[0].data else {
            return Err(Error::new(Status::InternalError, "StringConcat output"));
        };
        map2(
            (&a, &self.a_shape),
            (&b, &self.b_shape),
            out,
            &self.out_shape,
            |x, y| format!("{x}{y}"),
        );
        Ok(())
    }
}

fn build_concat(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(2, 2, 1, 1)?;
    require_strings(ctx, 2)?;
    let out_shape = binary::output_shape(ctx)?;
    Ok(Built {
        outputs: vec![(DataType::String, out_shape.clone())],
        kernel: Box::new(ConcatKernel {
            a_shape: ctx.input(0)?.shape.to_vec(),
            b_shape: ctx.input(1)?.shape.to_vec(),
            out_shape,
        }),
    })
}

struct SplitKernel {
    /// `None`: split on runs of whitespace, ignoring leading and trailing whitespace.
    delimiter: Option<String>,
    /// Most splits per element (`None`: no limit).
    maxsplit: Option<usize>,
    shape: Vec<usize>,
}

impl SplitKernel {
    fn split<'s>(&self, s: &'s str) -> Vec<&'s str> {
        let limit = self.maxsplit.map_or(usize::MAX, |m| m.saturating_add(1));
        match &self.delimiter {
            Some(d) => s.splitn(limit, d.as_str()).collect(),
            None => {
                let mut parts = Vec::new();
                let mut rest = s.trim_start();
                while !rest.is_empty() {
                    if parts.len() + 1 == limit {
                        parts.push(rest.trim_end());
                        break;
                    }
                    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                    parts.push(&rest[..end]);
                    rest = rest[end..].trim_start();
                }
                parts
            }
        }
    }
}

impl Kernel for SplitKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = strings(inputs, 0)?;
        let parts: Vec<Vec<&str>> = x.iter().map(|s| self.split(s)).collect();
        let width = parts.iter().map(Vec::len).max().unwrap_or(0);
        let mut y = Vec::with_capacity(x.len() * width);
        for p in &parts {
            y.extend(p.iter().map(|s| s.to_string()));
            y.extend(std::iter::repeat_n(String::new(), width - p.len()));
        }
        let mut y_shape = self.shape.clone();
        y_shape.push(width);
        outputs[0] = Tensor::new(y_shape, TensorData::String(y))?;
        if let Some(z) = outputs.get_mut(1) {
            let counts = parts.iter().map(|p| p.len() as i64).collect();
            *z = Tensor::new(self.shape.clone(), TensorData::I64(counts))?;
        }
        Ok(())
    }

    fn allocates_outputs(&self) -> bool {
        true
    }
}

fn build_split(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 2)?;
    require_strings(ctx, 1)?;
    let x = ctx.input(0)?;
    let delimiter = Some(ctx.attr_string("delimiter", "")?).filter(|d| !d.is_empty());
    let maxsplit = match ctx.attr_int("maxsplit", -1)? {
        m if m < 0 => None,
        m => Some(m as usize),
    };
    let mut y_shape = x.shape.to_vec();
    y_shape.push(0);
    Ok(Built {
        outputs: vec![
            (DataType::String, y_shape),
            (DataType::I64, x.shape.to_vec()),
        ],
        kernel: Box::new(SplitKernel {
            delimiter,
            maxsplit,
            shape: x.shape.to_vec(),
        }),
    })
}

/// How `StringNormalizer` changes case.
#[derive(Clone, Copy)]
enum Case {
    Keep,
    Lower,
    Upper,
}

struct NormalizerKernel {
    case: Case,
    case_sensitive: bool,
    stopwords: Vec<String>,
    /// Whether the input is `[1, C]` (else `[C]`).
    row: bool,
}

impl Kernel for NormalizerKernel {
    fn run(&self, inputs: &[Option<&Tensor>], outputs: &mut [Tensor]) -> Result<()> {
        let x = strings(inputs, 0)?;
        let stop = |w: &str| {
            self.stopwords.iter().any(|s| {
                if self.case_sensitive {
                    s == w
                } else {
                    s.to_lowercase() == w.to_lowercase()
                }
            })
        };
        let mut kept: Vec<String> = x
            .iter()
            .filter(|w| !stop(w))
            .map(|w| match self.case {
                Case::Keep => w.clone(),
                Case::Lower => w.to_lowercase(),
                Case::Upper => w.to_uppercase(),
            })
            .collect();
        if kept.is_empty() {
            kept.push(String::new());
        }
        let shape = if self.row {
            vec![1, kept.len()]
        } else {
            vec![kept.len()]
        };
        outputs[0] = Tensor::new(shape, TensorData::String(kept))?;
        Ok(())
    }

    fn allocates_outputs(&self) -> bool {
        true
    }
}

fn build_normalizer(ctx: &BuildCtx) -> Result<Built> {
    ctx.arity(1, 1, 1, 1)?;
    require_strings(ctx, 1)?;
    let x = ctx.input(0)?;
    let row = match x.shape {
        [_] => false,
        [1, _] => true,
        other => {
            return Err(ctx.err(
                Status::UnsupportedShape,
                format!("the input must be [C] or [1, C], not {other:?}"),
            ))
        }
    };
    let case = match ctx.attr_string("case_change_action", "NONE")?.as_str() {
        "NONE" => Case::Keep,
        "LOWER" => Case::Lower,
        "UPPER" => Case::Upper,
        other => {
            return Err(ctx.err(
                Status::InvalidModel,
                format!("case_change_action '{other}' is not NONE, LOWER or UPPER"),
            ))
        }
    };
    Ok(Built {
        outputs: vec![(DataType::String, x.shape.to_vec())],
        kernel: Box::new(NormalizerKernel {
            case,
            case_sensitive: ctx.attr_int("is_case_sensitive", 0)? != 0,
            stopwords: ctx.attr_strings("stopwords")?,
            row,
        }),
    })
}
