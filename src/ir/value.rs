//! What a graph value holds at run time: a tensor, a sequence, a map or an optional. Only
//! tensors cross the ONNXIFI boundary; the other kinds live inside a run (sequence and optional
//! operators, loop-carried values).

use super::dtype::DataType;
use super::tensor::Tensor;
use crate::error::{Error, Result, Status};

/// A run-time value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A dense tensor.
    Tensor(Tensor),
    /// An ordered list of values (ONNX `seq(...)`).
    Sequence(Vec<Value>),
    /// Keys and values of a map (ONNX `map(K, V)`): a key tensor and a value per key.
    Map {
        /// The keys, one element each.
        keys: Tensor,
        /// The values, one per key.
        values: Vec<Value>,
    },
    /// A value that may be absent (ONNX `optional(...)`).
    Optional(Option<Box<Value>>),
}

impl Value {
    /// The tensor inside, or an error naming what the value is instead.
    pub fn as_tensor(&self) -> Result<&Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => Err(Error::new(
                Status::UnsupportedDatatype,
                format!("expected a tensor, got {}", other.kind()),
            )),
        }
    }

    /// Takes the tensor out, or errs like [`Value::as_tensor`].
    pub fn into_tensor(self) -> Result<Tensor> {
        match self {
            Value::Tensor(t) => Ok(t),
            other => Err(Error::new(
                Status::UnsupportedDatatype,
                format!("expected a tensor, got {}", other.kind()),
            )),
        }
    }

    /// "tensor(float)", "sequence", "map", "optional": for messages.
    pub fn kind(&self) -> String {
        match self {
            Value::Tensor(t) => format!("tensor({})", t.dtype().name()),
            Value::Sequence(_) => "sequence".into(),
            Value::Map { .. } => "map".into(),
            Value::Optional(_) => "optional".into(),
        }
    }

    /// The element type, for a tensor.
    pub fn dtype(&self) -> Option<DataType> {
        match self {
            Value::Tensor(t) => Some(t.dtype()),
            _ => None,
        }
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Value {
        Value::Tensor(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_access_and_kinds() {
        let t = Tensor::f32(vec![2], vec![1.0, 2.0]).unwrap();
        let v = Value::from(t.clone());
        assert_eq!(v.as_tensor().unwrap(), &t);
        assert_eq!(v.kind(), "tensor(float)");
        let s = Value::Sequence(vec![v.clone(), v]);
        assert_eq!(
            s.as_tensor().unwrap_err().status,
            Status::UnsupportedDatatype
        );
        assert_eq!(Value::Optional(None).kind(), "optional");
        assert_eq!(s.dtype(), None);
    }
}
