//! The operations on graphs: init, release, set I/O, runs and output shapes.

use crate::common::abi::{check, event_fence};
use crate::common::input::Input;
use crate::state::{event_handle, handle, models, release_checked, Thread, MAX_GRAPHS};
use onnxifi_rust::ffi::api::*;
use onnxifi_rust::ffi::ext::*;
use onnxifi_rust::ffi::types::*;
use std::os::raw::c_void;

impl Thread<'_> {
    /// `onnxInitGraph` of one of the models with fuzzed properties and weight counts (at most
    /// MAX_GRAPHS successes per thread).
    pub fn init_graph(&mut self, inp: &mut Input) {
        if self.graphs_made >= MAX_GRAPHS {
            return;
        }
        let b = handle(inp, &self.sh.backends, &self.sh.ids);
        let m = &models()[if inp.chance(12) {
            0
        } else {
            inp.u8() as usize % 3
        }];
        let props = [inp.pick(&[0u64, 0, 0, 1, 0x5255_5354_0001]), 0, 0];
        let (count, weights) = match inp.u8() % 8 {
            0 => (1 + u32::from(inp.u8() % 4), std::ptr::null()),
            _ => (
                0,
                std::ptr::NonNull::<onnxTensorDescriptorV1>::dangling().as_ptr() as *const _,
            ),
        };
        let mut g: onnxGraph = 0x10 as onnxGraph;
        let out = inp.or_null_mut(15, &mut g as *mut onnxGraph);
        let model_ptr = inp.or_null(15, m.as_ptr() as *const c_void);
        // SAFETY: a terminated property list, m.len() readable bytes (or NULL), no
        // weight descriptor is read (count 0, or NULL), a writable out-handle (or NULL).
        let s = check("onnxInitGraph", unsafe {
            onnxInitGraph(b, props.as_ptr(), m.len(), model_ptr, count, weights, out)
        });
        if s == ONNXIFI_STATUS_SUCCESS {
            assert!(!g.is_null());
            self.graphs_made += 1;
            self.sh.graphs.lock().unwrap().push(g as usize);
        } else if !out.is_null() {
            assert!(g.is_null(), "a failed onnxInitGraph left a handle");
        }
    }

    /// `onnxReleaseGraph` (after settling this thread's input fences), twice when the first
    /// succeeds.
    pub fn release_graph(&mut self, inp: &mut Input) {
        let g = handle(inp, &self.sh.graphs, &self.sh.backends);
        // Releasing waits for the graph's queued runs: settle their input fences.
        self.settle(inp);
        release_checked(
            "onnxReleaseGraph",
            onnxReleaseGraph,
            g,
            ONNXIFI_STATUS_INVALID_GRAPH,
        );
    }

    /// `onnxSetGraphIO` with the Add descriptors (no output now and then).
    pub fn set_graph_io(&mut self, inp: &mut Input) {
        let g = handle(inp, &self.sh.graphs, &self.sh.backends);
        let Some((d, _)) = self.descriptors(inp) else {
            return;
        };
        let n_out = if inp.chance(15) { 1 } else { 0 };
        // SAFETY: descriptors naming NUL-terminated names, shapes of 2 entries, buffers
        // of 24 bytes that outlive every graph of this exec.
        check("onnxSetGraphIO", unsafe {
            onnxSetGraphIO(g, 2, d.as_ptr(), n_out, d[2..].as_ptr())
        });
    }

    /// `onnxRunGraph` with an input fence on a new or fuzzed event; on success the input
    /// event is owed (settled before anything that blocks).
    pub fn run_graph(&mut self, inp: &mut Input) {
        let sh = self.sh;
        let g = handle(inp, &sh.graphs, &sh.backends);
        let (e, _) = if inp.chance(4) {
            let b = handle(inp, &sh.backends, &sh.ids);
            let mut e: onnxEvent = std::ptr::null_mut();
            // SAFETY: a writable out-handle.
            if unsafe { onnxInitEvent(b, &mut e) } == ONNXIFI_STATUS_SUCCESS {
                sh.events.lock().unwrap().push((e as usize, false));
            }
            (e, false)
        } else {
            event_handle(inp, sh)
        };
        let in_fence = onnxMemoryFenceV1 {
            tag: if inp.chance(15) {
                ONNXIFI_TAG_MEMORY_FENCE_V1
            } else {
                0
            },
            r#type: if inp.chance(15) {
                ONNXIFI_SYNCHRONIZATION_EVENT
            } else {
                2
            },
            event: e,
        };
        let mut out_fence = event_fence(std::ptr::null_mut());
        // SAFETY: readable and writable fences.
        let s = check("onnxRunGraph", unsafe {
            onnxRunGraph(g, &in_fence, &mut out_fence)
        });
        if s == ONNXIFI_STATUS_SUCCESS {
            assert!(!out_fence.event.is_null());
            sh.events
                .lock()
                .unwrap()
                .push((out_fence.event as usize, true));
            self.owed.push(e);
        }
    }

    /// `onnxSetIOAndRunGraph` with the Add descriptors and a (sometimes untagged) output fence.
    pub fn set_io_and_run_graph(&mut self, inp: &mut Input) {
        let g = handle(inp, &self.sh.graphs, &self.sh.backends);
        let Some((d, _)) = self.descriptors(inp) else {
            return;
        };
        let mut out_fence = onnxMemoryFenceV1 {
            tag: if inp.chance(15) {
                ONNXIFI_TAG_MEMORY_FENCE_V1
            } else {
                0
            },
            ..event_fence(std::ptr::null_mut())
        };
        // SAFETY: as for onnxSetGraphIO, and a writable output fence.
        let s = check("onnxSetIOAndRunGraph", unsafe {
            onnxSetIOAndRunGraph(g, 2, d.as_ptr(), 1, d[2..].as_ptr(), &mut out_fence)
        });
        if s == ONNXIFI_STATUS_SUCCESS {
            assert!(!out_fence.event.is_null());
            self.sh
                .events
                .lock()
                .unwrap()
                .push((out_fence.event as usize, true));
        }
    }

    /// `onnxGetOutputShapesRUST` for the Add inputs into an output shape of 0 to 4 entries.
    pub fn get_output_shapes(&mut self, inp: &mut Input) {
        let g = handle(inp, &self.sh.graphs, &self.sh.backends);
        let Some((mut d, _)) = self.descriptors(inp) else {
            return;
        };
        let mut shape = [0u64; 4];
        let cap = u32::from(inp.u8() % 5);
        d[2].dimensions = cap;
        d[2].shape = shape.as_mut_ptr();
        let (ins, outs) = d.split_at_mut(2);
        // SAFETY: readable input descriptors; a writable output descriptor whose shape
        // has `cap` ≤ 4 writable entries.
        let s = check("onnxGetOutputShapesRUST", unsafe {
            onnxGetOutputShapesRUST(g, 2, ins.as_ptr(), 1, outs.as_mut_ptr())
        });
        if s == ONNXIFI_STATUS_SUCCESS {
            assert_eq!((outs[0].dimensions, &shape[..2]), (2, &[2u64, 3][..]));
        }
    }
}
