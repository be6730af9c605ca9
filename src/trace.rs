//! A Chrome trace (the Trace Event Format that Perfetto and `chrome://tracing` read) of what the
//! library does, written when `ONNXIFI_RUST_TRACE=path.json` is set (read once per process):
//! one complete event per operator step of every run (with its node name and the shapes of its
//! inputs and outputs), and spans for graph init, planning, each run, and the copies of inputs
//! and outputs between the caller's buffers and the engine.
//!
//! Events are kept in memory (at most [`MAX_EVENTS`]; later ones are counted and dropped) and the
//! whole file is rewritten as one JSON document, `{"traceEvents": [...]}`, whenever a graph or
//! a backend is released, so that a program that releases what it made leaves a complete trace.
#![forbid(unsafe_code)]

use std::fmt::Write;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The environment variable naming the trace file.
pub const TRACE_ENV: &str = "ONNXIFI_RUST_TRACE";

/// The most events kept.
pub const MAX_EVENTS: usize = 1 << 20;

/// One complete ("X") event.
struct Event {
    name: String,
    category: &'static str,
    start_us: f64,
    duration_us: f64,
    thread: u64,
    args: Vec<(&'static str, String)>,
}

/// The trace being collected.
struct Trace {
    path: String,
    origin: Instant,
    events: Mutex<(Vec<Event>, u64)>,
}

fn trace() -> Option<&'static Trace> {
    static TRACE: OnceLock<Option<Trace>> = OnceLock::new();
    TRACE
        .get_or_init(|| {
            let path = std::env::var(TRACE_ENV).ok().filter(|p| !p.is_empty())?;
            Some(Trace {
                path,
                origin: Instant::now(),
                events: Mutex::new((Vec::new(), 0)),
            })
        })
        .as_ref()
}

/// Whether a trace is being collected.
pub fn enabled() -> bool {
    trace().is_some()
}

/// A small stable number for the current thread (the trace's `tid`).
fn thread_number() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static ID: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    ID.with(|id| *id)
}

/// One event recorded for a caller that asked for a run's timeline (foxi's trace-event list).
#[derive(Clone, Debug)]
pub struct RunEvent {
    /// Operator type or span name.
    pub name: String,
    /// Start, in microseconds since the Unix epoch.
    pub start_us: u64,
    /// Duration in microseconds.
    pub duration_us: u64,
    /// The trace's thread number.
    pub thread: u32,
}

thread_local! {
    /// The events of the run being recorded on this thread, when one is.
    static RECORDER: std::cell::RefCell<Option<Vec<RunEvent>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` recording every span that ends on this thread meanwhile (whether or not a trace
/// file is written), and returns them with its result. A recording already under way on this
/// thread is suspended meanwhile; give it the events with [`adopt`] if they belong to it.
pub fn record_run<R>(f: impl FnOnce() -> R) -> (R, Vec<RunEvent>) {
    let outer = RECORDER.with(|r| r.borrow_mut().replace(Vec::new()));
    let result = f();
    let events = RECORDER.with(|r| std::mem::replace(&mut *r.borrow_mut(), outer));
    (result, events.unwrap_or_default())
}

/// Adds events recorded elsewhere (another thread's [`record_run`]) to this thread's recording,
/// if one is under way.
pub fn adopt(events: Vec<RunEvent>) {
    RECORDER.with(|r| {
        if let Some(v) = r.borrow_mut().as_mut() {
            v.extend(events);
        }
    });
}

fn recording() -> bool {
    RECORDER.with(|r| r.borrow().is_some())
}

/// Microseconds since the Unix epoch of an instant.
fn epoch_us(at: Instant) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let ago = at.elapsed();
    now.saturating_sub(ago).as_micros() as u64
}

/// An open span: recorded when [`Span::end`] is called (or when it is dropped).
pub struct Span {
    name: String,
    category: &'static str,
    start: Instant,
    args: Vec<(&'static str, String)>,
    done: bool,
}

impl Span {
    /// Adds an argument shown with the event.
    pub fn arg(mut self, key: &'static str, value: impl Into<String>) -> Span {
        self.args.push((key, value.into()));
        self
    }

    /// Records the span now.
    pub fn end(mut self) {
        self.record();
    }

    fn record(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        if recording() {
            let event = RunEvent {
                name: self.name.clone(),
                start_us: epoch_us(self.start),
                duration_us: self.start.elapsed().as_micros() as u64,
                thread: thread_number() as u32,
            };
            RECORDER.with(|r| {
                if let Some(v) = r.borrow_mut().as_mut() {
                    v.push(event);
                }
            });
        }
        if let Some(t) = trace() {
            let start_us = self.start.duration_since(t.origin).as_secs_f64() * 1e6;
            let duration_us = self.start.elapsed().as_secs_f64() * 1e6;
            let event = Event {
                name: std::mem::take(&mut self.name),
                category: self.category,
                start_us,
                duration_us,
                thread: thread_number(),
                args: std::mem::take(&mut self.args),
            };
            let mut events = t.events.lock().unwrap_or_else(|e| e.into_inner());
            if events.0.len() < MAX_EVENTS {
                events.0.push(event);
            } else {
                events.1 += 1;
            }
        }
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.record();
    }
}

/// Starts a span of category `category` (`init`, `plan`, `run`, `io`, `op`); `None` when no
/// trace is collected and no run is recorded on this thread, so callers pay nothing then.
pub fn span(category: &'static str, name: impl Into<String>) -> Option<Span> {
    if trace().is_none() && !recording() {
        return None;
    }
    Some(Span {
        name: name.into(),
        category,
        start: Instant::now(),
        args: Vec::new(),
        done: false,
    })
}

/// `s` as a JSON string literal (quotes and escapes included).
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    json_str(&mut out, s);
    out
}

/// Appends `s` as a JSON string literal.
fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Writes everything collected so far to the trace file (a complete JSON document). Failures
/// to write are ignored: tracing must never fail a call.
pub fn flush() {
    let Some(t) = trace() else {
        return;
    };
    let events = t.events.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = String::from("{\"traceEvents\": [\n");
    let pid = std::process::id();
    for (i, e) in events.0.iter().enumerate() {
        if i > 0 {
            out.push_str(",\n");
        }
        out.push_str("{\"name\": ");
        json_str(&mut out, &e.name);
        let _ = write!(
            out,
            ", \"cat\": \"{}\", \"ph\": \"X\", \"ts\": {:.3}, \"dur\": {:.3}, \"pid\": {pid}, \
             \"tid\": {}, \"args\": {{",
            e.category, e.start_us, e.duration_us, e.thread
        );
        for (j, (k, v)) in e.args.iter().enumerate() {
            if j > 0 {
                out.push_str(", ");
            }
            json_str(&mut out, k);
            out.push_str(": ");
            json_str(&mut out, v);
        }
        out.push_str("}}");
    }
    let _ = write!(
        out,
        "\n], \"displayTimeUnit\": \"ms\", \"otherData\": {{\"library\": \"onnxifi-rust {}\", \
         \"dropped_events\": {}}}}}\n",
        env!("CARGO_PKG_VERSION"),
        events.1
    );
    drop(events);
    let _ = std::fs::write(&t.path, out);
}
