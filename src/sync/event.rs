//! A one-shot event: not signalled, then signalled once with a status and a message.

use crate::error::{Error, Status};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long [`Event::wait`] polls before it sleeps.
const WAIT_SPIN: Duration = Duration::from_micros(100);

/// What an event holds once signalled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The status of the work the event stands for (SUCCESS for a plain signal).
    pub status: Status,
    /// A message explaining a failure; empty on success.
    pub message: String,
}

/// Work to do once an event is signalled (`Some`) or abandoned unsignalled (`None`).
pub type Callback = Box<dyn FnOnce(Option<Outcome>) + Send + 'static>;

#[derive(Default)]
struct State {
    outcome: Option<Outcome>,
    abandoned: bool,
    callbacks: Vec<Callback>,
}

/// A single-shot event.
#[derive(Default)]
pub struct Event {
    state: Mutex<State>,
    signalled: Condvar,
    /// Set (under the lock) once the event is signalled or abandoned: what [`Event::wait`]
    /// polls before it sleeps.
    settled: AtomicBool,
    /// Made by `onnxRunGraph` for its output fence: only that run may signal it.
    run_owned: bool,
}

impl Event {
    /// A new, not signalled event.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new event that only the run producing it signals (an output fence's event): the
    /// caller's [`Event::signal_by_caller`] is refused, so nothing downstream can start while
    /// the run still writes its outputs.
    pub fn for_run() -> Self {
        Event {
            run_owned: true,
            ..Self::default()
        }
    }

    /// `onnxSignalEvent`: signals success, unless a run owns the event (INVALID_STATE).
    pub fn signal_by_caller(&self) -> Result<(), Error> {
        if self.run_owned {
            return Err(Error::new(
                Status::InvalidState,
                "this event belongs to the run that created it and is signalled when that run ends",
            ));
        }
        self.signal_success()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Signals the event with an outcome; fails with INVALID_STATE if it was already signalled.
    pub fn signal(&self, outcome: Outcome) -> Result<(), Error> {
        let mut state = self.lock();
        if state.outcome.is_some() {
            return Err(Error::new(
                Status::InvalidState,
                "the event is already signalled",
            ));
        }
        state.outcome = Some(outcome.clone());
        self.settled.store(true, Ordering::Release);
        let callbacks = std::mem::take(&mut state.callbacks);
        drop(state);
        self.signalled.notify_all();
        for cb in callbacks {
            cb(Some(outcome.clone()));
        }
        Ok(())
    }

    /// Calls `cb` once the event is signalled (with its outcome) or abandoned unsignalled
    /// (with `None`) — at once, on this thread, if that already happened; otherwise on the
    /// thread that signals or abandons it.
    pub fn on_signal(&self, cb: Callback) {
        let mut state = self.lock();
        let now = match &state.outcome {
            Some(o) => Some(Some(o.clone())),
            None if state.abandoned => Some(None),
            None => None,
        };
        match now {
            Some(result) => {
                drop(state);
                cb(result);
            }
            None => state.callbacks.push(cb),
        }
    }

    /// Signals success.
    pub fn signal_success(&self) -> Result<(), Error> {
        self.signal(Outcome {
            status: Status::Success,
            message: String::new(),
        })
    }

    /// Marks the event as released by its owner: waiters that would wait forever wake up.
    pub fn abandon(&self) {
        let mut state = self.lock();
        state.abandoned = true;
        self.settled.store(true, Ordering::Release);
        let callbacks = if state.outcome.is_none() {
            std::mem::take(&mut state.callbacks)
        } else {
            Vec::new()
        };
        drop(state);
        self.signalled.notify_all();
        for cb in callbacks {
            cb(None);
        }
    }

    /// The outcome if signalled, without waiting.
    pub fn outcome(&self) -> Option<Outcome> {
        self.lock().outcome.clone()
    }

    /// Waits until signalled. Returns `None` if the event was abandoned before being signalled.
    /// Polls for [`WAIT_SPIN`] first (yielding the core to runnable threads), so that a run
    /// ending soon hands its result over without a wake-up.
    pub fn wait(&self) -> Option<Outcome> {
        let start = Instant::now();
        while !self.settled.load(Ordering::Acquire) && start.elapsed() < WAIT_SPIN {
            std::thread::yield_now();
        }
        let mut state = self.lock();
        loop {
            if let Some(o) = &state.outcome {
                return Some(o.clone());
            }
            if state.abandoned {
                return None;
            }
            state = self
                .signalled
                .wait(state)
                .unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Waits at most `timeout`; `None` when it ran out (or the event was abandoned).
    pub fn wait_for(&self, timeout: Duration) -> Option<Outcome> {
        let deadline = Instant::now() + timeout;
        let mut state = self.lock();
        loop {
            if let Some(o) = &state.outcome {
                return Some(o.clone());
            }
            let now = Instant::now();
            if state.abandoned || now >= deadline {
                return None;
            }
            state = self
                .signalled
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_run_owned_event_refuses_the_callers_signal() {
        let e = Event::for_run();
        assert_eq!(
            e.signal_by_caller().unwrap_err().status,
            Status::InvalidState
        );
        assert!(e.outcome().is_none());
        e.signal_success().unwrap();
        assert_eq!(
            e.signal_by_caller().unwrap_err().status,
            Status::InvalidState
        );
        let caller = Event::new();
        caller.signal_by_caller().unwrap();
        assert_eq!(caller.outcome().unwrap().status, Status::Success);
    }

    #[test]
    fn signal_once_then_invalid_state() {
        let e = Event::new();
        assert!(e.outcome().is_none());
        e.signal_success().unwrap();
        assert_eq!(e.outcome().unwrap().status, Status::Success);
        assert_eq!(e.signal_success().unwrap_err().status, Status::InvalidState);
    }

    #[test]
    fn wait_wakes_on_signal_from_another_thread() {
        let e = Arc::new(Event::new());
        let e2 = e.clone();
        let t = std::thread::spawn(move || e2.wait());
        std::thread::sleep(Duration::from_millis(20));
        e.signal(Outcome {
            status: Status::MismatchingShape,
            message: "x".into(),
        })
        .unwrap();
        assert_eq!(t.join().unwrap().unwrap().status, Status::MismatchingShape);
    }

    #[test]
    fn callbacks_run_on_signal_or_at_once() {
        let e = Event::new();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s1 = seen.clone();
        e.on_signal(Box::new(move |o| {
            s1.lock().unwrap().push(o.map(|o| o.status))
        }));
        assert!(seen.lock().unwrap().is_empty());
        e.signal_success().unwrap();
        let s2 = seen.clone();
        e.on_signal(Box::new(move |o| {
            s2.lock().unwrap().push(o.map(|o| o.status))
        }));
        assert_eq!(*seen.lock().unwrap(), vec![Some(Status::Success); 2]);
        let dropped = Event::new();
        let s3 = seen.clone();
        dropped.on_signal(Box::new(move |o| {
            s3.lock().unwrap().push(o.map(|o| o.status))
        }));
        dropped.abandon();
        assert_eq!(seen.lock().unwrap().last(), Some(&None));
    }

    #[test]
    fn wait_for_times_out_and_abandon_wakes() {
        let e = Arc::new(Event::new());
        assert!(e.wait_for(Duration::from_millis(10)).is_none());
        let e2 = e.clone();
        let t = std::thread::spawn(move || e2.wait());
        std::thread::sleep(Duration::from_millis(10));
        e.abandon();
        assert!(t.join().unwrap().is_none());
    }
}
