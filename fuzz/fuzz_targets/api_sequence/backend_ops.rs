//! The operations on backend IDs and backends, and the library-wide calls (last error message,
//! extension functions).

use crate::common::abi::check;
use crate::common::input::Input;
use crate::state::{handle, models, release_checked, Thread, MAX_BACKENDS};
use onnxifi_rust::ffi::api::*;
use onnxifi_rust::ffi::ext::*;
use onnxifi_rust::ffi::types::*;
use std::os::raw::{c_char, c_void};
use std::sync::OnceLock;

impl Thread<'_> {
    /// `onnxGetBackendIDs` with room for 0 to 4 IDs (or NULL pointers).
    pub fn get_backend_ids(&mut self, inp: &mut Input) {
        let mut ids = [std::ptr::null_mut::<c_void>(); 4];
        let mut n = (inp.u8() % 5) as usize;
        let ids_ptr = inp.or_null_mut(14, ids.as_mut_ptr());
        let n_ptr = inp.or_null_mut(15, &mut n as *mut usize);
        // SAFETY: `ids` holds 4 ≥ n entries; `n` is writable (or NULL).
        let s = check("onnxGetBackendIDs", unsafe {
            onnxGetBackendIDs(ids_ptr, n_ptr)
        });
        match s {
            ONNXIFI_STATUS_SUCCESS => {
                assert!(n == 1 && !ids[0].is_null());
                self.sh.ids.lock().unwrap().push(ids[0] as usize);
            }
            ONNXIFI_STATUS_FALLBACK => assert_eq!(n, 1),
            _ => assert_eq!(s, ONNXIFI_STATUS_INVALID_POINTER),
        }
    }

    /// `onnxReleaseBackendID`, twice when the first succeeds.
    pub fn release_backend_id(&mut self, inp: &mut Input) {
        let id = handle(inp, &self.sh.ids, &self.sh.backends);
        release_checked(
            "onnxReleaseBackendID",
            onnxReleaseBackendID,
            id,
            ONNXIFI_STATUS_INVALID_ID,
        );
    }

    /// `onnxGetBackendInfo` of a known or random kind into a buffer of a fuzzed size.
    pub fn get_backend_info(&mut self, inp: &mut Input) {
        let id = handle(inp, &self.sh.ids, &self.sh.backends);
        let kind = if inp.chance(13) {
            inp.pick(&[
                0,
                1,
                2,
                3,
                4,
                5,
                6,
                7,
                8,
                10,
                11,
                12,
                13,
                14,
                20,
                21,
                22,
                30,
                31,
                0x5253_0001,
                0x5253_0002,
                0x5253_0003,
                0x5253_0004,
                9,
                40,
                46,
                -1,
            ])
        } else {
            inp.u64() as i32
        };
        let mut buf = vec![0u8; 8192];
        let mut size = if inp.chance(12) {
            inp.pick(&[0usize, 1, 7, 8, 9, 16, 64, 8192])
        } else {
            (inp.u64() % 8193) as usize
        };
        let cap = size;
        let buf_ptr = inp.or_null_mut(14, buf.as_mut_ptr() as *mut c_void);
        let size_ptr = inp.or_null_mut(15, &mut size as *mut usize);
        // SAFETY: `buf` holds 8192 ≥ size bytes; `size` is writable (or NULL).
        let s = check("onnxGetBackendInfo", unsafe {
            onnxGetBackendInfo(id, kind, buf_ptr, size_ptr)
        });
        if s == ONNXIFI_STATUS_SUCCESS {
            assert!(size <= cap, "SUCCESS wrote {size} > {cap} bytes");
        } else if s == ONNXIFI_STATUS_FALLBACK {
            assert!(size > cap || buf_ptr.is_null());
        }
    }

    /// `onnxGetBackendCompatibility` of one of the models (or of no bytes).
    pub fn get_backend_compatibility(&mut self, inp: &mut Input) {
        let id = handle(inp, &self.sh.ids, &self.sh.backends);
        let m = &models()[inp.u8() as usize % 3];
        let len = if inp.chance(15) { m.len() } else { 0 };
        // SAFETY: `len` ≤ m.len() readable bytes.
        check("onnxGetBackendCompatibility", unsafe {
            onnxGetBackendCompatibility(id, len, m.as_ptr().cast())
        });
    }

    /// `onnxInitBackend` with fuzzed properties (at most MAX_BACKENDS successes per thread).
    pub fn init_backend(&mut self, inp: &mut Input) {
        if self.backends_made >= MAX_BACKENDS {
            return;
        }
        let id = handle(inp, &self.sh.ids, &self.sh.backends);
        static NO_END: OnceLock<Vec<u64>> = OnceLock::new();
        let mut props: Vec<u64> = Vec::new();
        for _ in 0..inp.u8() % 4 {
            let (k, v) = inp.pick(&[
                (ONNXIFI_BACKEND_PROPERTY_OPTIMIZATION, 1),
                (ONNXIFI_BACKEND_PROPERTY_OPTIMIZATION, 7),
                (ONNXIFI_BACKEND_PROPERTY_LOG_LEVEL, 4),
                (ONNXIFI_BACKEND_PROPERTY_LOG_LEVEL, 0),
                (ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST, 1),
                (ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST, 2),
                (ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST, 0),
                (ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST, 1025),
                (ONNXIFI_BACKEND_PROPERTY_NUM_THREADS_RUST, u64::MAX),
                (ONNXIFI_BACKEND_CUDA_STREAM, 0),
                (0x77, 0),
            ]);
            props.extend([k, v]);
        }
        props.push(0);
        let list = match inp.u8() % 16 {
            0 => std::ptr::null(),
            // 4097 pairs of (OPTIMIZATION, 0) and no terminator within the limit.
            1 => NO_END
                .get_or_init(|| {
                    let mut v = [1u64, 0].repeat(4097);
                    v.push(0);
                    v
                })
                .as_ptr(),
            _ => props.as_ptr(),
        };
        let mut b: onnxBackend = 0x10 as onnxBackend;
        let out = inp.or_null_mut(15, &mut b as *mut onnxBackend);
        // SAFETY: a terminated property list (or NULL), a writable out-handle (or NULL).
        let s = check("onnxInitBackend", unsafe { onnxInitBackend(id, list, out) });
        if s == ONNXIFI_STATUS_SUCCESS {
            assert!(!b.is_null());
            self.backends_made += 1;
            self.sh.backends.lock().unwrap().push(b as usize);
        } else if !out.is_null() {
            assert!(b.is_null(), "a failed onnxInitBackend left a handle");
        }
    }

    /// `onnxReleaseBackend`, twice when the first succeeds.
    pub fn release_backend(&mut self, inp: &mut Input) {
        let b = handle(inp, &self.sh.backends, &self.sh.ids);
        release_checked(
            "onnxReleaseBackend",
            onnxReleaseBackend,
            b,
            ONNXIFI_STATUS_INVALID_BACKEND,
        );
    }

    /// `onnxGetLastErrorMessage` into a buffer of a fuzzed length (or NULL pointers).
    pub fn get_last_error_message(&mut self, inp: &mut Input) {
        let mut buf = [0 as c_char; 256];
        let mut len = (inp.u8() as usize) % 257;
        let cap = len;
        let p = inp.or_null_mut(14, buf.as_mut_ptr());
        let lp = inp.or_null_mut(15, &mut len as *mut usize);
        // SAFETY: a buffer of 256 ≥ len bytes (or NULL), a writable length (or NULL).
        let s = check("onnxGetLastErrorMessage", unsafe {
            onnxGetLastErrorMessage(p, lp)
        });
        if s == ONNXIFI_STATUS_SUCCESS {
            assert!(len <= cap && len >= 1 && buf[len - 1] == 0);
        }
    }

    /// `onnxGetExtensionFunctionAddress` of a known or wrong name (or NULL pointers).
    pub fn get_extension_function_address(&mut self, inp: &mut Input) {
        let id = handle(inp, &self.sh.ids, &self.sh.backends);
        let name: &[u8] = inp.pick(&[
            &b"onnxSetIOAndRunGraph\0"[..],
            b"onnxSetIOAndRunGraphFunction\0",
            b"onnxWaitEventFor\0",
            b"onnxGetOutputShapesRUST\0",
            b"onnxGetLastErrorMessage\0",
            b"onnxReleaseTraceEvents\0",
            b"onnxRunGraph\0",
            b"Function\0",
            b"\0",
            b"\xff\0",
        ]);
        let name_ptr = inp.or_null(15, name.as_ptr() as *const c_char);
        let mut f: onnxExtensionFunctionPointer = None;
        let fp = inp.or_null_mut(15, &mut f as *mut onnxExtensionFunctionPointer);
        // SAFETY: a NUL-terminated name (or NULL), a writable function pointer (or NULL).
        let s = check("onnxGetExtensionFunctionAddress", unsafe {
            onnxGetExtensionFunctionAddress(id, name_ptr, fp)
        });
        assert_eq!(s == ONNXIFI_STATUS_SUCCESS, f.is_some());
    }
}
