//! The per-graph run queue: jobs run one after another on a dedicated thread, so that
//! `onnxRunGraph` returns at once while one graph's runs stay serialised and several graphs run
//! concurrently. Dropping the queue (or calling [`RunQueue::drain`]) waits for queued jobs.

use std::sync::mpsc::{channel, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// A FIFO of jobs served by one thread, started on first use.
pub struct RunQueue {
    name: String,
    inner: Mutex<Option<(Sender<Job>, JoinHandle<()>)>>,
}

impl RunQueue {
    /// A queue whose thread will carry the given name.
    pub fn new(name: impl Into<String>) -> Self {
        RunQueue {
            name: name.into(),
            inner: Mutex::new(None),
        }
    }

    /// Queues a job. Fails (giving the job back) when no thread could be started.
    pub fn submit(&self, job: Job) -> Result<(), Job> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.is_none() {
            let (tx, rx) = channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name(self.name.clone())
                .spawn(move || {
                    for job in rx {
                        // A job catches its own panics; this is a last line of defence so that
                        // one broken job does not stop the queue.
                        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    }
                });
            match spawned {
                Ok(handle) => *inner = Some((tx, handle)),
                Err(_) => return Err(job),
            }
        }
        let (tx, _) = inner.as_ref().expect("started above");
        tx.send(job).map_err(|e| e.0)
    }

    /// Waits until every queued job has finished, and stops the thread.
    pub fn drain(&self) {
        let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((tx, handle)) = taken {
            drop(tx);
            if handle.thread().id() != std::thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}

impl Drop for RunQueue {
    fn drop(&mut self) {
        self.drain();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn jobs_run_in_order_and_drain_waits() {
        let q = RunQueue::new("test-queue");
        let log = Arc::new(Mutex::new(Vec::new()));
        for i in 0..10 {
            let log = log.clone();
            q.submit(Box::new(move || {
                std::thread::sleep(std::time::Duration::from_millis(1));
                log.lock().unwrap().push(i)
            }))
            .ok()
            .unwrap();
        }
        q.drain();
        assert_eq!(*log.lock().unwrap(), (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn a_panicking_job_does_not_stop_the_queue() {
        let q = RunQueue::new("test-queue");
        let n = Arc::new(AtomicUsize::new(0));
        q.submit(Box::new(|| panic!("boom"))).ok().unwrap();
        let n2 = n.clone();
        q.submit(Box::new(move || {
            n2.fetch_add(1, Ordering::SeqCst);
        }))
        .ok()
        .unwrap();
        q.drain();
        assert_eq!(n.load(Ordering::SeqCst), 1);
    }
}
