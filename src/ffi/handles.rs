//! Registries of live objects behind the opaque handles.
//!
//! A handle given to C is a never-reused id, not a pointer. Looking it up takes the registry's
//! lock, clones the object's `Arc` and releases the lock, so a NULL, stale, double-released or
//! foreign handle is simply "not found" — it is never dereferenced — and an object stays alive for
//! as long as any call is using it, even if another thread releases the handle meanwhile.

use std::collections::HashMap;
use std::os::raw::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// One id counter for every kind, so that an id of one kind is never valid as another kind.
/// Ids are spaced by 16 and start high, so small integers and typical small pointers are never ids.
static NEXT_ID: AtomicU64 = AtomicU64::new(0x6f6e_6e78_0000_0000);

/// A map from handle ids to live objects of one kind.
pub struct Registry<T> {
    objects: Mutex<Option<HashMap<u64, Arc<T>>>>,
}

impl<T> Registry<T> {
    /// An empty registry, usable in a `static`.
    pub const fn new() -> Self {
        Registry {
            objects: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<HashMap<u64, Arc<T>>>> {
        // A panic while the lock was held cannot leave the map half-updated (every update is one
        // insert or remove), so a poisoned lock is still safe to use.
        self.objects
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers an object and returns its new handle.
    pub fn insert(&self, object: Arc<T>) -> *mut c_void {
        let id = NEXT_ID.fetch_add(16, Ordering::Relaxed);
        self.lock()
            .get_or_insert_with(HashMap::new)
            .insert(id, object);
        id as usize as *mut c_void
    }

    /// The object behind a handle, if the handle is live.
    pub fn get(&self, handle: *mut c_void) -> Option<Arc<T>> {
        let id = handle as usize as u64;
        self.lock().as_ref()?.get(&id).cloned()
    }

    /// Removes a handle; returns its object if the handle was live.
    pub fn remove(&self, handle: *mut c_void) -> Option<Arc<T>> {
        let id = handle as usize as u64;
        self.lock().as_mut()?.remove(&id)
    }

    /// Number of live handles.
    pub fn len(&self) -> usize {
        self.lock().as_ref().map_or(0, HashMap::len)
    }

    /// Whether no handle is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Default for Registry<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_unique_and_die_on_remove() {
        let reg: Registry<u32> = Registry::new();
        let a = reg.insert(Arc::new(1));
        let b = reg.insert(Arc::new(2));
        assert_ne!(a, b);
        assert_eq!(*reg.get(a).unwrap(), 1);
        assert_eq!(*reg.remove(a).unwrap(), 1);
        assert!(reg.get(a).is_none());
        assert!(reg.remove(a).is_none());
        assert!(reg.get(std::ptr::null_mut()).is_none());
        assert!(reg.get(0xdead_beef as *mut c_void).is_none());
        assert_eq!(*reg.get(b).unwrap(), 2);
    }

    #[test]
    fn kinds_do_not_share_ids() {
        let x: Registry<u8> = Registry::new();
        let y: Registry<u8> = Registry::new();
        let hx = x.insert(Arc::new(0));
        assert!(y.get(hx).is_none());
    }
}
