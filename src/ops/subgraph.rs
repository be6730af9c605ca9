//! The body of a control-flow operator (If branch, Loop body, Scan body): its compiled
//! executable and, per value it captures from the enclosing graph, the node input that carries
//! it.

use super::util::BuildCtx;
use crate::error::{Error, Result, Status};
use crate::exec::Executable;
use crate::ir::{Graph, Tensor};

/// A compiled subgraph bound to its owning node's implicit inputs.
pub struct Body {
    exe: Executable,
    /// Node input index of each captured value, in the body's capture order.
    captured: Vec<usize>,
}

impl Body {
    /// Compiles `g`, which must take `formal` formal inputs.
    pub fn new(ctx: &BuildCtx, g: &Graph, formal: usize) -> Result<Body> {
        if g.formal_inputs() != formal {
            return Err(ctx.err(
                Status::InvalidModel,
                format!(
                    "the body takes {} inputs, the operator passes {formal}",
                    g.formal_inputs()
                ),
            ));
        }
        let first_implicit = ctx.node.inputs.len() - ctx.node.captured.len();
        let captured = g
            .captures
            .iter()
            .map(|name| {
                ctx.node
                    .captured
                    .iter()
                    .position(|c| c == name)
                    .map(|k| first_implicit + k)
                    .ok_or_else(|| {
                        ctx.err(
                            Status::InternalError,
                            format!("captured '{name}' is not an input"),
                        )
                    })
            })
            .collect::<Result<_>>()?;
        Ok(Body {
            exe: Executable::subgraph(g)?,
            captured,
        })
    }

    /// Runs the body on its formal inputs; the captured ones are taken from `node_inputs`.
    pub fn run(
        &self,
        mut formal: Vec<Tensor>,
        node_inputs: &[Option<&Tensor>],
    ) -> Result<Vec<Tensor>> {
        for &i in &self.captured {
            let t = node_inputs
                .get(i)
                .copied()
                .flatten()
                .ok_or_else(|| Error::new(Status::InternalError, "captured value missing"))?;
            formal.push(t.clone());
        }
        self.exe.run_subgraph(formal)
    }
}

/// The bytes held by the per-iteration outputs of a Loop or Scan, bounded by half the memory
/// limit: stacking them at the end needs as much again.
pub struct ScanBudget {
    held: u64,
    most: u64,
}

impl Default for ScanBudget {
    fn default() -> Self {
        Self::new()
    }
}

impl ScanBudget {
    /// Nothing held yet.
    pub fn new() -> Self {
        ScanBudget {
            held: 0,
            most: crate::backend::memory_limit() / 2,
        }
    }

    /// Counts `part`, kept after `iterations` iterations; NO_SYSTEM_MEMORY past the bound.
    pub fn keep(&mut self, part: &Tensor, iterations: u64) -> Result<()> {
        self.held += (part.len() * part.dtype().size().unwrap_or(1)) as u64;
        if self.held > self.most {
            return Err(Error::new(
                Status::NoSystemMemory,
                format!("the scan outputs of {iterations} iterations do not fit in memory"),
            ));
        }
        Ok(())
    }
}

/// Stacks equally shaped tensors along a new leading axis (`[n, …]`); `n = 0` gives `[0]` of
/// `dtype`.
pub fn stack(parts: &[Tensor], dtype: crate::ir::DataType) -> Result<Tensor> {
    let Some(first) = parts.first() else {
        return Tensor::new(vec![0], crate::ir::TensorData::zeros(dtype, 0)?);
    };
    if parts
        .iter()
        .any(|p| p.shape != first.shape || p.dtype() != first.dtype())
    {
        return Err(Error::new(
            Status::InvalidShape,
            "scan outputs differ in shape or type between iterations",
        ));
    }
    let mut shape = vec![parts.len()];
    shape.extend_from_slice(&first.shape);
    crate::dispatch_stored!(first.dtype(), T => {
        let mut v: Vec<T> = crate::ir::try_filled(0)?;
        v.try_reserve_exact(first.len() * parts.len())
            .map_err(|_| Error::new(Status::NoSystemMemory, "cannot stack the scan outputs"))?;
        for p in parts {
            v.extend_from_slice(p.as_slice::<T>()?);
        }
        Tensor::from_vec(shape, v)
    }, other => Err(Error::new(Status::UnsupportedDatatype, format!("{other:?}"))))
}
