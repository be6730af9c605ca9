//! float16/bfloat16 weights that only nodes computed in float32 read (`ops::widen`), widened
//! once at load so that the rewrites after it see float32 constants in half-precision models.

use crate::ir::{DataType, Graph};
use crate::ops;
use std::sync::Arc;

/// Widens the float16/bfloat16 constants whose every reader computes in float32 (see
/// [`ops::widen::widens`]) and does not learn its type from the constant (its first input, or
/// any float input of an operator whose float inputs share a type, does; see
/// [`ops::widen::half_type`]; a constant read first is widened only where the reader's inputs
/// share a type and one of them is computed at run time, to tell it): the conversion is exact,
/// and the readers would widen it anyway.
/// Constants a subgraph captures, or that are graph outputs, keep their type.
pub(super) fn widen_half_weights(g: &mut Graph) {
    let mut readers: Vec<Vec<usize>> = vec![Vec::new(); g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        for id in n.inputs.iter().flatten() {
            readers[*id].push(i);
        }
    }
    let mut captured = Vec::new();
    for n in &g.nodes {
        ops::widen::captured(n, &mut captured);
    }
    for (id, readers) in readers.iter().enumerate() {
        let Some(t) = g.values[id].constant.as_deref() else {
            continue;
        };
        let half = t.dtype();
        if !matches!(half, DataType::F16 | DataType::BF16)
            || readers.is_empty()
            || g.outputs.contains(&id)
            || captured.contains(&g.values[id].name)
        {
            continue;
        }
        let widened_by_all = readers.iter().all(|&i| {
            let n = &g.nodes[i];
            let first = n.inputs.iter().flatten().next();
            // Read first, the constant may tell the node's type only where another input
            // computed at run time is there to tell it.
            let computed = n
                .inputs
                .iter()
                .flatten()
                .any(|&v| g.values[v].constant.is_none());
            ops::lookup(&n.domain, &n.op_type).is_some_and(|def| {
                ops::widen::widens(def, half)
                    && (first != Some(&id) || (ops::widen::types_node(def, 1) && computed))
            })
        });
        if !widened_by_all {
            continue;
        }
        if let Ok(wide) = ops::widen::widen(t) {
            g.values[id].constant = Some(Arc::new(wide));
            g.values[id].widened_from = Some(half);
            if let Some(d) = g.values[id].declared.as_mut() {
                d.dtype = DataType::F32;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{fused, HEADER};
    use crate::ir::{DataType, Tensor};

    #[test]
    fn only_constants_every_reader_widens_become_float32() {
        // A float16 constant that another reader reads as float16 (Concat computes on float16
        // itself) keeps its type; the one read only by float32 computations is widened.
        let text = format!(
            "{HEADER} g (float16[2] x) => (float16[4] y, float16[2] z)
             <float16[2] c = {{15360, 16384}}, float16[2] d = {{15360, 16384}}>
             {{ y = Concat <axis = 0> (x, c)\n w = Mul(x, c)\n z = Add(d, w) }}"
        );
        let g = fused(&text);
        let constant = |name: &str| -> &Tensor {
            let v = g.values.iter().find(|v| v.name == name).expect("a value");
            v.constant.as_deref().expect("a constant")
        };
        assert_eq!(constant("c").dtype(), DataType::F16);
        assert_eq!(constant("d").as_f32().unwrap(), [1.0, 2.0]);
    }
}
