//! The operations on events: init, signal, state, waits and release.

use crate::common::abi::check;
use crate::common::input::Input;
use crate::state::{event_handle, handle, release_checked, Thread};
use onnxifi_rust::ffi::api::*;
use onnxifi_rust::ffi::ext::*;
use onnxifi_rust::ffi::types::*;
use std::os::raw::c_char;

impl Thread<'_> {
    /// `onnxInitEvent` on a fuzzed backend handle (or a NULL out-pointer).
    pub fn init_event(&mut self, inp: &mut Input) {
        let b = handle(inp, &self.sh.backends, &self.sh.graphs);
        let mut e: onnxEvent = 0x10 as onnxEvent;
        let out = inp.or_null_mut(15, &mut e as *mut onnxEvent);
        // SAFETY: a writable out-handle (or NULL).
        let s = check("onnxInitEvent", unsafe { onnxInitEvent(b, out) });
        if s == ONNXIFI_STATUS_SUCCESS {
            self.sh.events.lock().unwrap().push((e as usize, false));
        } else if !out.is_null() {
            assert!(e.is_null());
        }
    }

    /// `onnxSignalEvent`; a signalled event then reads as signalled (or is gone).
    pub fn signal_event(&mut self, inp: &mut Input) {
        let (e, out) = event_handle(inp, self.sh);
        // SAFETY: any handle value is safe to pass.
        let s = check("onnxSignalEvent", unsafe { onnxSignalEvent(e) });
        if s == ONNXIFI_STATUS_SUCCESS {
            assert!(!out, "the caller signalled a run's output event");
            let mut state = 0;
            // SAFETY: a writable state.
            let st = unsafe { onnxGetEventState(e, &mut state) };
            assert!(
                st == ONNXIFI_STATUS_INVALID_EVENT
                    || (st == ONNXIFI_STATUS_SUCCESS && state == ONNXIFI_EVENT_STATE_SIGNALLED)
            );
        }
    }

    /// `onnxGetEventState` (or a NULL state pointer).
    pub fn get_event_state(&mut self, inp: &mut Input) {
        let (e, _) = event_handle(inp, self.sh);
        let mut state = 7;
        let p = inp.or_null_mut(15, &mut state as *mut onnxEventState);
        // SAFETY: a writable state (or NULL).
        let s = check("onnxGetEventState", unsafe { onnxGetEventState(e, p) });
        match s {
            ONNXIFI_STATUS_SUCCESS => assert!(
                state == ONNXIFI_EVENT_STATE_SIGNALLED || state == ONNXIFI_EVENT_STATE_NONSIGNALLED
            ),
            ONNXIFI_STATUS_INVALID_EVENT => assert_eq!(state, ONNXIFI_EVENT_STATE_INVALID),
            _ => assert_eq!(s, ONNXIFI_STATUS_INVALID_POINTER),
        }
    }

    /// `onnxWaitEvent`, only on an event whose wait ends.
    pub fn wait_event(&mut self, inp: &mut Input) {
        let (e, out) = event_handle(inp, self.sh);
        if self.can_wait(inp, e, out) {
            // SAFETY: any handle value is safe to pass; this wait ends (see can_wait).
            check("onnxWaitEvent", unsafe { onnxWaitEvent(e) });
        }
    }

    /// `onnxWaitEventFor` with a timeout of 0 or 1 ms and fuzzed out-pointers.
    pub fn wait_event_for(&mut self, inp: &mut Input) {
        let (e, out) = event_handle(inp, self.sh);
        // A timeout makes the exec sleep: only now and then on an event that may be
        // unsignalled.
        let mut timeout = u32::from(inp.u8() % 2);
        if !self.can_wait(inp, e, out) {
            if !inp.chance(1) {
                return;
            }
            timeout = 1;
        }
        let mut state = 0;
        let mut status = -1;
        let mut msg = [0 as c_char; 128];
        let mut len = (inp.u8() % 129) as usize;
        let with_msg = inp.u8() % 4;
        let msg_ptr = if with_msg != 0 {
            msg.as_mut_ptr()
        } else {
            std::ptr::null_mut()
        };
        let len_ptr: *mut usize = if with_msg != 1 {
            &mut len
        } else {
            std::ptr::null_mut()
        };
        let state_ptr = inp.or_null_mut(15, &mut state as *mut onnxEventState);
        // SAFETY: writable state and status (or NULL), a message buffer of 128 ≥ len
        // bytes (or NULL); the wait ends (a timeout, or see can_wait).
        let s = check("onnxWaitEventFor", unsafe {
            onnxWaitEventFor(e, timeout, state_ptr, &mut status, msg_ptr, len_ptr)
        });
        if s == ONNXIFI_STATUS_SUCCESS {
            check("onnxWaitEventFor's event status", status);
            assert!(
                state == ONNXIFI_EVENT_STATE_SIGNALLED || state == ONNXIFI_EVENT_STATE_NONSIGNALLED
            );
        }
    }

    /// `onnxReleaseEvent`, twice when the first succeeds; a released event is not waited on.
    pub fn release_event(&mut self, inp: &mut Input) {
        let (e, _) = event_handle(inp, self.sh);
        let s = release_checked(
            "onnxReleaseEvent",
            onnxReleaseEvent,
            e,
            ONNXIFI_STATUS_INVALID_EVENT,
        );
        if s == ONNXIFI_STATUS_SUCCESS {
            // SAFETY: any handle value is safe to pass; a released event is not waited on.
            assert_eq!(unsafe { onnxWaitEvent(e) }, ONNXIFI_STATUS_INVALID_EVENT);
        }
    }
}
