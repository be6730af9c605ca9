//! Scratch buffers kept between kernel calls, so that a warmed-up run allocates nothing for its
//! temporaries (packing buffers, staged inputs, transform buffers).
//!
//! The buffers belong to the process, not to a thread: [`take`] lends the smallest free one
//! that holds the request (among equal ones, one this thread gave back: its lines may still be
//! in this core's cache), or a new one when none does, and [`give`] returns it. Buffers are
//! never grown or handed to a larger request when a smaller one fits, so the set only gains
//! buffers, and a stream of runs settles once it has met its most borrowers of each size at
//! once, whichever pool worker happens to run which kernel. (Preferring a thread's own buffer
//! over the smallest, and growing the largest free one on a miss, let small requests take the
//! large buffers that concurrent large requests then grew again from small ones: at 2 threads
//! `tests/zero_alloc.rs` saw a run allocate after ten clean ones in 12 of 40 test runs; with
//! this rule, 3 of 40.)
//!
//! Every buffer starts on a cache line ([`AlignedVec`]): the GEMM's packed panels are read
//! with 64-byte loads.
#![forbid(unsafe_code)]

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use super::aligned::AlignedVec;

/// Buffers larger than this (in floats, 16 MiB) are not kept.
pub(crate) const KEEP_MAX: usize = 1 << 22;

/// The most buffers kept: enough for every worker of a large pool to hold a few at once.
const KEEP_COUNT: usize = 64;

/// The free buffers, each with the [`thread_tag`] of the thread that gave it back.
static FREE: Mutex<Vec<(AlignedVec, usize)>> = Mutex::new(Vec::new());

/// A number per thread (from 1), for preferring a thread's own buffers.
fn thread_tag() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(1);
    thread_local! {
        static TAG: Cell<usize> = const { Cell::new(0) };
    }
    TAG.with(|t| {
        if t.get() == 0 {
            t.set(NEXT.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    })
}

/// A buffer of at least `len` floats (its length; the contents stale), to hand back with
/// [`give`].
pub fn take(len: usize) -> AlignedVec {
    let me = thread_tag();
    let found = {
        let mut free = FREE.lock().unwrap_or_else(|p| p.into_inner());
        let fit = free
            .iter()
            .enumerate()
            .filter(|(_, (b, _))| b.len() >= len)
            .min_by_key(|(_, (b, tag))| (b.len(), *tag != me))
            .map(|(i, _)| i);
        fit.map(|i| free.swap_remove(i).0)
    };
    found.unwrap_or_else(|| AlignedVec::zeroed(len))
}

/// Returns a buffer from [`take`] for later calls (dropped when too large, or when as many are
/// kept as can be and all are larger).
pub fn give(buf: AlignedVec) {
    if buf.is_empty() || buf.len() > KEEP_MAX {
        return;
    }
    let tag = thread_tag();
    let mut free = FREE.lock().unwrap_or_else(|p| p.into_inner());
    if free.capacity() == 0 {
        // Room for all of them at once: keeping a buffer never allocates afterwards.
        free.reserve_exact(KEEP_COUNT);
    }
    if free.len() < KEEP_COUNT {
        free.push((buf, tag));
    } else if let Some(smallest) = free.iter_mut().min_by_key(|(b, _)| b.len()) {
        if smallest.0.len() < buf.len() {
            *smallest = (buf, tag);
        }
    }
}

/// Runs `f` on a scratch slice of `len` floats. The contents are stale: `f` must write every
/// element it reads. An empty slice takes no buffer (the smallest free one would otherwise be
/// lent, and a nested request of its size would have to allocate another).
pub fn with_f32<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    if len == 0 {
        return f(&mut []);
    }
    let mut buf = take(len);
    let result = f(&mut buf[..len]);
    give(buf);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lends_the_requested_length_and_takes_it_back() {
        with_f32(1000, |b| {
            assert_eq!(b.len(), 1000);
            b.fill(7.0);
        });
        with_f32(500, |b| assert_eq!(b.len(), 500));
        // A buffer handed back is lent again (other tests may hold some meanwhile).
        let buf = take(3000);
        assert!(buf.len() >= 3000);
        let at = buf.as_ptr() as usize;
        give(buf);
        let free = FREE.lock().unwrap_or_else(|p| p.into_inner());
        assert!(free.iter().any(|(b, _)| b.as_ptr() as usize == at));
    }

    #[test]
    fn nested_borrowers_get_distinct_buffers() {
        with_f32(64, |outer| {
            outer.fill(1.0);
            with_f32(64, |inner| {
                inner.fill(2.0);
                assert_ne!(outer.as_ptr(), inner.as_ptr());
            });
            assert!(outer.iter().all(|&v| v == 1.0));
        });
    }
}
