//! Prepared weights (packed GEMM panels, conv filters, folded biases), made once per graph and
//! shared by every plan of it: a plan for a new input shape finds the weights already packed.

use crate::error::Result;
use crate::ir::{DataType, Graph, Node, Tensor, ValueId};
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

type Entry = Arc<dyn Any + Send + Sync>;

/// The per-graph cache of prepared weights, keyed by weight value and preparation tag.
#[derive(Default)]
pub struct WeightCache {
    entries: Mutex<HashMap<(ValueId, String), Entry>>,
    made: AtomicUsize,
}

impl WeightCache {
    /// The prepared form of weight `id` under `tag`, made by `make` the first time only.
    pub fn get_or_make<T: Any + Send + Sync>(
        &self,
        id: ValueId,
        tag: &str,
        make: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        let key = (id, tag.to_string());
        let found = self
            .entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some(entry) = found.and_then(|e| e.downcast::<T>().ok()) {
            return Ok(entry);
        }
        // Made outside the lock: packing a large weight must not stall other graphs' plans.
        // Two plans racing on one weight may both pack it; the first one stored wins.
        let made = Arc::new(make()?);
        self.made.fetch_add(1, Ordering::Relaxed);
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let entry = entries.entry(key).or_insert_with(|| made.clone());
        Ok(entry.clone().downcast::<T>().unwrap_or(made))
    }

    /// How many preparations were made (a measure for tests: a new plan packs nothing new).
    pub fn preparations(&self) -> usize {
        self.made.load(Ordering::Relaxed)
    }
}

/// Hands every float32 matrix weight that only GEMM B operands read over to its packed form:
/// packs it into `cache` as each consumer's build will ask for it, then drops its data from the
/// graph (`ValueInfo::packed_only`). One weight at a time, so loading never holds more than the
/// weights and one packed copy (a transformer's weights would otherwise be resident twice).
/// A weight a graph output, a subgraph or another operator also reads keeps its data, as does
/// an empty one, and one whose consumer reads no graph input (the planner folds that product,
/// which needs B's data).
pub fn pack_gemm_weights(graph: &mut Graph, cache: &WeightCache) -> Result<()> {
    let mut uses: Vec<Vec<(usize, usize)>> = vec![Vec::new(); graph.values.len()];
    for (at, node) in graph.nodes.iter().enumerate() {
        for (input, id) in node.inputs.iter().enumerate() {
            if let Some(id) = id {
                uses[*id].push((at, input));
            }
        }
    }
    let fixed = fixed_values(graph);
    for (id, uses) in uses.iter().enumerate() {
        let Some(weight) = &graph.values[id].constant else {
            continue;
        };
        let packable = weight.dtype() == DataType::F32
            && weight.shape.len() == 2
            && !uses.is_empty()
            && !weight.data.is_empty()
            && !graph.outputs.contains(&id)
            // Shared with a subgraph: dropping this reference would free nothing.
            && Arc::strong_count(weight) == 1
            && uses.iter().all(|&(at, input)| {
                let node = &graph.nodes[at];
                crate::ops::packs_weight(node, input)
                    && !node.inputs.iter().flatten().all(|&i| fixed[i])
            });
        if !packable {
            continue;
        }
        for &(at, _) in uses {
            let origin = (id, graph.values[id].widened_from);
            crate::ops::prepack_weight(&graph.nodes[at], origin, weight, cache)?;
        }
        let shape = weight.shape.clone();
        let value = &mut graph.values[id];
        value.packed_only = Some(shape);
        value.constant = None;
    }
    Ok(())
}

/// The weights a plan owns while it is built, each dropped as soon as the last node that reads
/// it has been built and none of them reads it at run time: a convolution's build prepares its
/// filters (packed GEMM panels, Winograd transforms, in the weight cache), after which the
/// weight as loaded is needed by no one (`Kernel::reads_input`).
///
/// Only for the one plan of a graph whose input shapes are all fixed (`Executable::new`):
/// another plan would need the data to prepare its own form, since a convolution's filters
/// take another form for another image size. A released weight keeps its shape
/// (`ValueInfo::packed_only`) and the run hands its readers no tensor for it. Never released:
/// graph outputs, weights that a step reads at run time or builds at run time (deferred),
/// weights shared with a subgraph (or held elsewhere), and weights of types other than
/// float32.
///
/// ResNet-50 held each convolution's filters twice, as loaded and as prepared: 94 MB of the
/// 262 MB its load peaked at.
pub(crate) struct Releaser {
    /// Per value: its readers (node inputs) not yet built.
    pending: Vec<u32>,
    /// Per value: whether it must stay (not a graph weight, read at run time, a graph output).
    kept: Vec<bool>,
    /// Bytes released so far.
    pub released: usize,
}

impl Releaser {
    /// Counts the readers of every value of `graph`.
    pub fn new(graph: &Graph) -> Releaser {
        let mut pending = vec![0u32; graph.values.len()];
        for id in graph.nodes.iter().flat_map(|n| n.inputs.iter().flatten()) {
            pending[*id] += 1;
        }
        // Only the graph's weights (taken out by `take_weights`), not values folded from them:
        // the run hands a step no tensor for a weight, but fails on a missing folded value.
        let mut kept: Vec<bool> = (graph.values.iter())
            .map(|v| v.packed_only.is_none())
            .collect();
        for &id in &graph.outputs {
            kept[id] = true;
        }
        Releaser {
            pending,
            kept,
            released: 0,
        }
    }

    /// After `node` was built (or folded): `reads(i)` tells whether its step reads input `i`
    /// at run time (true for every input of a deferred step, false for a folded node's).
    /// Drops from `constants` the weights whose readers are all built and read none of them
    /// at run time.
    pub fn built(
        &mut self,
        node: &Node,
        reads: impl Fn(usize) -> bool,
        constants: &mut [Option<Arc<Tensor>>],
    ) {
        for (index, id) in node.inputs.iter().enumerate() {
            let Some(id) = *id else { continue };
            self.pending[id] -= 1;
            self.kept[id] |= reads(index);
            if self.pending[id] > 0 || self.kept[id] {
                continue;
            }
            let Some(weight) = &constants[id] else {
                continue;
            };
            // The plan's is the only reference: no subgraph or kernel holds it.
            if weight.dtype() == DataType::F32 && Arc::strong_count(weight) == 1 {
                self.released += weight.data.len() * size_of::<f32>();
                constants[id] = None;
            }
        }
    }
}

/// Moves the graph's weights out (into the table a plan built with a [`Releaser`] owns),
/// leaving their shapes (`ValueInfo::packed_only`) so that builds still see them as graph
/// weights. [`restore_weights`] puts back what the plan kept.
pub(crate) fn take_weights(graph: &mut Graph) -> Vec<Option<Arc<Tensor>>> {
    (graph.values.iter_mut())
        .map(|v| {
            let weight = v.constant.take()?;
            if v.packed_only.is_none() {
                v.packed_only = Some(weight.shape.clone());
            }
            Some(weight)
        })
        .collect()
}

/// Gives the graph back the weights of `taken` that `constants` (the plan's) still holds;
/// the others stay known by their shape only.
pub(crate) fn restore_weights(
    graph: &mut Graph,
    taken: &[bool],
    constants: &[Option<Arc<Tensor>>],
) {
    for ((value, taken), constant) in graph.values.iter_mut().zip(taken).zip(constants) {
        if let (true, Some(weight)) = (taken, constant) {
            value.constant = Some(weight.clone());
            value.packed_only = None;
        }
    }
}

/// Per value: whether it is known without any graph input (a weight, or computed from weights
/// only), which is what the planner folds.
pub(crate) fn fixed_values(graph: &Graph) -> Vec<bool> {
    let mut fixed: Vec<bool> = graph.values.iter().map(|v| v.constant.is_some()).collect();
    for node in &graph.nodes {
        let from_weights = node.inputs.iter().flatten().all(|&id| fixed[id]);
        for &id in node.outputs.iter().flatten() {
            fixed[id] = from_weights;
        }
    }
    fixed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_once_per_weight_and_tag() {
        let c = WeightCache::default();
        let a = c.get_or_make(3, "t", || Ok(vec![1.0f32])).unwrap();
        let b = c
            .get_or_make(3, "t", || -> Result<Vec<f32>> { panic!("made twice") })
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        c.get_or_make(3, "other", || Ok(vec![2.0f32])).unwrap();
        c.get_or_make(4, "t", || Ok(vec![3.0f32])).unwrap();
        assert_eq!(c.preparations(), 3);
        assert!(c
            .get_or_make(5, "t", || -> Result<Vec<f32>> {
                Err(crate::error::Error::new(
                    crate::error::Status::InvalidModel,
                    "bad",
                ))
            })
            .is_err());
    }
}
