//! Keeping a pool's other workers polling for work while a run computes.
//!
//! A run is a burst of parallel regions (one or two per operator) separated by short serial
//! stretches. rayon lets an idle worker sleep soon after it runs out of work, and waking it
//! again costs a futex wake-up and a reschedule, tens of microseconds on a virtual machine,
//! paid at every region. While a run is in progress, [`with_hot_workers`] keeps the other
//! workers looking for work instead, so its regions start at once; between runs they sleep.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a helper keeps polling without finding work before it lets its thread sleep (a
/// long serial stretch of the run).
const IDLE_SPIN: Duration = Duration::from_micros(300);

/// Sets the flag when dropped, also when the run panics.
struct Done(Arc<AtomicBool>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Runs `f` on this worker of the current rayon pool while the pool's other workers poll for
/// work instead of sleeping. Each helper stops when `f` has returned, or after [`IDLE_SPIN`]
/// without work. Outside a pool, or in a pool of one thread, it just runs `f`.
pub fn with_hot_workers<R>(f: impl FnOnce() -> R) -> R {
    let (Some(me), threads) = (rayon::current_thread_index(), rayon::current_num_threads()) else {
        return f();
    };
    if threads < 2 {
        return f();
    }
    let done = Done(Arc::new(AtomicBool::new(false)));
    for _ in 1..threads {
        let done = done.0.clone();
        rayon::spawn(move || {
            // This worker may pick a helper up while it waits inside `f` (for a stolen job): it
            // must go back to `f` at once.
            if rayon::current_thread_index() == Some(me) {
                return;
            }
            let mut idle_since = Instant::now();
            while !done.load(Ordering::Acquire) {
                match rayon::yield_now() {
                    Some(rayon::Yield::Executed) => idle_since = Instant::now(),
                    _ if idle_since.elapsed() > IDLE_SPIN => return,
                    _ => std::hint::spin_loop(),
                }
            }
        });
    }
    let result = f();
    drop(done);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    /// Results are those of `f`; the helpers end (the pool runs later work, and a run after
    /// the first starts) whether `f` returns or panics.
    #[test]
    fn runs_f_and_releases_the_workers() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        // Miri runs this about 10,000 times slower.
        let (rounds, n) = if cfg!(miri) { (3, 100) } else { (50, 10_000) };
        for round in 0..rounds {
            let sum: u64 = pool
                .install(|| with_hot_workers(|| (0..n).into_par_iter().map(|x| x * round).sum()));
            assert_eq!(sum, round * (n * (n - 1) / 2));
        }
        let panicked = pool
            .install(|| std::panic::catch_unwind(|| with_hot_workers(|| panic!("a failing run"))));
        assert!(panicked.is_err());
        let after: Vec<usize> = pool.install(|| (0..64).into_par_iter().map(|x| x + 1).collect());
        assert_eq!(after, (1..=64).collect::<Vec<_>>());
        // Outside a pool it only runs `f`.
        assert_eq!(with_hot_workers(|| 7), 7);
    }
}
