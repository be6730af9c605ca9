//! Prepared weights (packed GEMM panels, conv filters, folded biases), made once per graph and
//! shared by every plan of it: a plan for a new input shape finds the weights already packed.

use crate::error::Result;
use crate::ir::ValueId;
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
