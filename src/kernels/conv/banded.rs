//! A pointwise (1×1) convolution and the depthwise convolution that reads its output, as one
//! kernel ([`PointwiseDepthwise`]): the expansion and depthwise layers of a MobileNet block.
//!
//! Run one after the other, the pointwise layer writes its whole output (at 112² with 96
//! channels, 4.8 MB, beyond L2) and the depthwise layer reads it back. Here the depthwise output
//! is made in bands of rows instead: for each band, the pointwise GEMM computes only the rows
//! of its output that the band's windows read, into a buffer of a few hundred KiB, and the
//! depthwise plane kernel reads them from there while they are in L2. Consecutive bands share
//! the rows their windows overlap on: those move to the top of the buffer rather than being
//! computed again. With several threads, each takes a range of the channels (its rows of the
//! pointwise weights and its depthwise planes), so their outputs are disjoint and nothing is
//! computed twice.
//!
//! Where the intermediate is small enough to stay in L2 anyway, or the ISA has no depthwise
//! plane kernel, the two convolutions run one after the other through a scratch buffer.
//!
//! The block's projection (a 1×1 convolution of the depthwise output) may run in the same
//! bands, from each band's depthwise rows in L2 ([`PointwiseDepthwise::with_projection`]); with
//! several threads, each then takes a range of the output rows, or on planes too short for
//! that a range of the channels and the projection's partial sum over them, the partial sums
//! added afterwards. A block without expansion has
//! no pointwise convolution: the depthwise kernel reads the input's rows in place
//! ([`PointwiseDepthwise::depthwise_only`]).
#![forbid(unsafe_code)]

use std::sync::OnceLock;

use rayon::prelude::*;

use super::{Conv2d, ConvFilters, GemmInput, Path};
use crate::kernels::activation::Activation;
use crate::kernels::gemm::{self, Bias, Epilogue, MatRef, PackedA};
use crate::kernels::{depthwise, scratch, simd, KernelError};

/// Bytes of pointwise output rows a band's buffer is sized for (per thread; L2 is 1 MiB on
/// Zen 4 and 5, 2 MiB on Sapphire Rapids).
const BAND_BYTES: usize = 384 << 10;

/// An intermediate of fewer bytes per image stays in L2 between the two layers: no bands.
const BANDED_MIN_BYTES: usize = 1 << 20;

/// Channels per unit of the split between threads (the AVX-512 micro-kernel's rows).
const CHANNEL_UNIT: usize = 8;

/// Output rows each thread takes at least when a projected block splits its rows between the
/// threads: each part computes the pointwise rows its windows share with the next part's
/// again, (reach − stride) rows. 12 lets two threads split a 28² block (MobileNetV2's 32→192→32
/// blocks, whose intermediates fit L2 and run unbanded on one thread: per node 0.91× the time
/// of three parallel layers, four interleaved runs of 300); its 14² blocks, one recomputed row
/// in seven, ran 1.05× slower split.
const PART_MIN_ROWS: usize = 12;

/// The most threads among which a projected block too short to split its rows splits its
/// channels and the projection's shared dimension ([`PointwiseDepthwise::run_split`]). Each
/// part writes a partial sum of the whole output, which the caller then adds up, so the
/// traffic grows with the parts while the work of each shrinks; beyond this many the block
/// runs as three parallel layers. (Measured at 2 threads only.)
const SPLIT_MAX_PARTS: usize = 4;

/// The most threads for which the pair's channel split keeps each part's expansion weights
/// packed ([`PointwiseDepthwise::part_expansions`]); beyond, each band packs its own.
const CACHED_PARTS: usize = 32;

/// The most output planes a projected block splits its rows between threads for: each part
/// writes its rows of every plane, through a slice per plane held on the stack.
const SPLIT_MAX_PLANES: usize = 512;

/// `Y = act(depthwise(act₁(pointwise(X))))` for a 1×1 convolution with stride 1 and no padding
/// followed by a depthwise convolution of its output, computed in bands of output rows (see
/// the module documentation).
#[derive(Clone, Debug)]
pub struct PointwiseDepthwise {
    /// The 1×1 convolution before the depthwise one; `None` where the depthwise convolution
    /// reads the input itself ([`PointwiseDepthwise::depthwise_only`]).
    pointwise: Option<Pointwise>,
    depthwise: Conv2d,
    /// The 1×1 convolution over the depthwise output, when the block's projection runs in the
    /// same bands ([`PointwiseDepthwise::with_projection`]).
    projection: Option<Conv2d>,
    /// [`BAND_BYTES`] and [`BANDED_MIN_BYTES`] (smaller in tests, to cover many bands on small
    /// images).
    band_bytes: (usize, usize),
    /// The projection's weights split for `parts` threads (index `parts`), made on the first
    /// run that splits that way ([`PointwiseDepthwise::run_split`]).
    splits: [OnceLock<ProjectionSplit>; SPLIT_MAX_PARTS + 1],
    /// The expansion's weights packed for each part of the pair's channel split between
    /// `parts` threads (index `parts`), made on the first run that splits that way.
    part_expansions: [OnceLock<Vec<PackedA>>; CACHED_PARTS + 1],
}

/// A projection split along its shared dimension (the depthwise output's channels) between
/// threads: part `k` takes channels `channels[k]`, `expand[k]` holds those rows of the
/// expansion's weights and `weights[k]` those columns of the projection's, packed.
#[derive(Clone, Debug)]
struct ProjectionSplit {
    channels: Vec<(usize, usize)>,
    expand: Vec<PackedA>,
    weights: Vec<PackedA>,
}

/// The expansion of a [`PointwiseDepthwise`].
#[derive(Clone, Debug)]
struct Pointwise {
    conv: Conv2d,
    act: Activation,
    /// The weights `[mid_channels, in_channels]`, row-major: the band GEMMs read row ranges
    /// of them.
    weights: Vec<f32>,
}

/// Where a projected block's output rows go.
enum ProjOut<'a, 'c> {
    /// The image's output planes.
    Whole(&'a mut [f32]),
    /// A slice per output plane, holding a thread's rows of it (several threads write the
    /// planes at once, each its own rows).
    Planes(&'a mut [&'c mut [f32]]),
}

/// Where the depthwise output of a band goes.
enum Target<'a, 'c> {
    /// Into its planes of the output (from plane `c0` on).
    Planes(&'a mut [f32]),
    /// Into a buffer of the band's rows, which the projection then reads:
    /// `output = act(weights · band + bias + residual)`, the band's rows of every output
    /// plane. `weights` are the projection's columns for the band's channels (all of them, or
    /// a thread's part); `output` holds output rows from `first_row` on; `residual` is the
    /// image's, in the output's layout.
    Project {
        weights: &'a PackedA,
        bias: Option<&'a [f32]>,
        residual: Option<&'a [f32]>,
        output: ProjOut<'a, 'c>,
        first_row: usize,
        act: Activation,
    },
}

impl PointwiseDepthwise {
    /// The pair `pointwise` (a 1×1 convolution with stride 1, no padding, one group, whose
    /// weights `pointwise_weights` are `[mid_c, in_c]`) then `pointwise_act`, then
    /// `depthwise` over its output (same batch and image size, `mid_c` channels), prepared
    /// for the same ISA.
    pub fn new(
        pointwise: Conv2d,
        pointwise_weights: &[f32],
        pointwise_act: Activation,
        depthwise: Conv2d,
    ) -> Result<Self, KernelError> {
        let (p1, p2) = (&pointwise.p, &depthwise.p);
        let pointwise_1x1 =
            matches!(pointwise.path, Path::Gemm(GemmInput::Pointwise)) && p1.groups == 1;
        let chained = p2.is_depthwise()
            && p2.in_channels == p1.out_channels
            && (p2.batch, p2.in_h, p2.in_w) == (p1.batch, p1.in_h, p1.in_w);
        if !pointwise_1x1 || !chained || pointwise.isa != depthwise.isa {
            return Err(KernelError::new(format!(
                "pointwise-depthwise: {p1:?} then {p2:?} is not a 1×1 convolution and a \
                 depthwise one over its output"
            )));
        }
        if pointwise_weights.len() != p1.weights_len() {
            return Err(KernelError::new(format!(
                "pointwise-depthwise: {} pointwise weights, expected {}",
                pointwise_weights.len(),
                p1.weights_len()
            )));
        }
        Ok(PointwiseDepthwise {
            pointwise: Some(Pointwise {
                conv: pointwise,
                act: pointwise_act,
                weights: pointwise_weights.to_vec(),
            }),
            depthwise,
            projection: None,
            band_bytes: (BAND_BYTES, BANDED_MIN_BYTES),
            splits: Default::default(),
            part_expansions: std::array::from_fn(|_| OnceLock::new()),
        })
    }

    /// The depthwise convolution alone, reading its input in place: with
    /// [`PointwiseDepthwise::with_projection`], a MobileNetV2 block without expansion (its
    /// first), whose depthwise rows the projection reads band by band.
    pub fn depthwise_only(depthwise: Conv2d) -> Result<Self, KernelError> {
        if !depthwise.p.is_depthwise() {
            return Err(KernelError::new(format!(
                "pointwise-depthwise: {:?} is not a depthwise convolution",
                depthwise.p
            )));
        }
        Ok(PointwiseDepthwise {
            pointwise: None,
            depthwise,
            projection: None,
            band_bytes: (BAND_BYTES, BANDED_MIN_BYTES),
            splits: Default::default(),
            part_expansions: std::array::from_fn(|_| OnceLock::new()),
        })
    }

    /// Panics unless `input` is as long as the input and `output` holds `output_len` floats.
    fn check_lengths(&self, input: &[f32], output: &[f32], output_len: usize) {
        assert_eq!(
            input.len(),
            self.input_len(),
            "pointwise-depthwise: input length"
        );
        assert_eq!(
            output.len(),
            output_len,
            "pointwise-depthwise: output length"
        );
    }

    /// Floats of the input: the pointwise convolution's, or the depthwise one's without it.
    fn input_len(&self) -> usize {
        let p = self
            .pointwise
            .as_ref()
            .map_or(&self.depthwise.p, |pw| &pw.conv.p);
        p.input_len()
    }

    /// The same pair followed by `projection`, a 1×1 convolution (stride 1, no padding, one
    /// group, same ISA) over the depthwise output: a MobileNetV2 block's projection, computed
    /// band by band while the band's depthwise rows are in L2 ([`PointwiseDepthwise::run_projected`]).
    pub fn with_projection(mut self, projection: Conv2d) -> Result<Self, KernelError> {
        let (p2, p3) = (&self.depthwise.p, &projection.p);
        let pointwise_1x1 =
            matches!(projection.path, Path::Gemm(GemmInput::Pointwise)) && p3.groups == 1;
        let chained = p3.in_channels == p2.out_channels
            && (p3.batch, p3.in_h, p3.in_w) == (p2.batch, p2.out_h(), p2.out_w());
        if !pointwise_1x1 || !chained || projection.isa != self.depthwise.isa {
            return Err(KernelError::new(format!(
                "pointwise-depthwise: {p3:?} is not a 1×1 convolution of the depthwise \
                 output {p2:?}"
            )));
        }
        self.projection = Some(projection);
        Ok(self)
    }

    /// The same kernel with bands sized for `band` bytes, taken from `min` bytes of
    /// intermediate per image on (tests).
    #[cfg(test)]
    fn with_band_bytes(mut self, band: usize, min: usize) -> Self {
        self.band_bytes = (band, min);
        self
    }

    /// Runs both convolutions: `output = act(depthwise(act₁(pointwise(input))))`, `input` of the
    /// pointwise convolution's input length, `output` of the depthwise one's output length.
    pub fn run(&self, input: &[f32], output: &mut [f32], act: Activation) {
        let p2 = &self.depthwise.p;
        self.check_lengths(input, output, p2.output_len());
        if output.is_empty() {
            return;
        }
        // Without a pointwise convolution, bands would only cut the depthwise one in pieces.
        if self.pointwise.is_none() || !self.banded(act) {
            match &self.pointwise {
                Some(pw) => scratch::with_f32(pw.conv.p.output_len(), |mid| {
                    pw.conv.run(input, mid, pw.act);
                    self.depthwise.run(mid, output, act);
                }),
                None => self.depthwise.run(input, output, act),
            }
            return;
        }
        let mid_c = p2.in_channels;
        let (in_len, out_len) = (self.input_len() / p2.batch, p2.out_h() * p2.out_w());
        let threads = rayon::current_num_threads();
        let units = mid_c.div_ceil(CHANNEL_UNIT);
        let parts = threads.min(units).max(1);
        let part_c = units.div_ceil(parts) * CHANNEL_UNIT;
        let expansions = self.part_expansions(parts, part_c);
        for (x, out) in input
            .chunks_exact(in_len)
            .zip(output.chunks_exact_mut(mid_c * out_len))
        {
            let part = |(i, o): (usize, &mut [f32])| {
                let c0 = i * part_c;
                let channels = (c0, c0 + o.len() / out_len);
                let expand = expansions.map(|e| &e[i]);
                let target = Target::Planes(o);
                self.run_channels(x, channels, expand, (0, p2.out_h()), act, target);
            };
            if parts > 1 {
                out.par_chunks_mut(part_c * out_len)
                    .enumerate()
                    .for_each(part);
            } else {
                part((0, out));
            }
        }
    }

    /// The expansion's weights packed for each range of `part_c` channels (the last one
    /// shorter), made on the first call for `parts`; `None` on one part (the convolution's
    /// own packed weights serve it), beyond [`CACHED_PARTS`], or without an expansion.
    fn part_expansions(&self, parts: usize, part_c: usize) -> Option<&[PackedA]> {
        let pw = self.pointwise.as_ref().filter(|_| parts > 1)?;
        let made = self.part_expansions.get(parts)?.get_or_init(|| {
            let mid_c = self.depthwise.p.in_channels;
            (0..mid_c.div_ceil(part_c))
                .map(|i| pw.packed_rows(i * part_c, ((i + 1) * part_c).min(mid_c)))
                .collect()
        });
        Some(made)
    }

    /// Runs the pair and the projection ([`PointwiseDepthwise::with_projection`]):
    /// `output = proj_act(projection(act(depthwise(act₁(pointwise(input))))) + residual)`,
    /// `residual` (when given) of the output's length and layout. Band by band: the projection
    /// reads each band's depthwise rows from L2, and the depthwise output (the block's widest
    /// tensor) is never written out whole. With more threads, each takes a range of the output
    /// rows (at least [`PART_MIN_ROWS`]) and writes its rows of every output plane in place
    /// (blocks of at most [`SPLIT_MAX_PLANES`] planes); where the rows are too few for that,
    /// each takes a range of the channels and the projection's sum over them
    /// ([`Self::run_split`], on at most [`SPLIT_MAX_PARTS`] threads), or else the pair runs
    /// into a scratch buffer (its threads splitting the channels) and the projection after it.
    pub fn run_projected(
        &self,
        input: &[f32],
        residual: Option<&[f32]>,
        output: &mut [f32],
        (act, proj_act): (Activation, Activation),
    ) {
        let proj = (self.projection.as_ref()).expect("pointwise-depthwise: no projection");
        let (p2, p3) = (&self.depthwise.p, &proj.p);
        self.check_lengths(input, output, p3.output_len());
        assert!(
            residual.is_none_or(|z| z.len() == output.len()),
            "pointwise-depthwise: residual length"
        );
        if output.is_empty() {
            return;
        }
        let (oh, plane) = (p2.out_h(), p2.out_h() * p2.out_w());
        let parts = rayon::current_num_threads();
        // Split between threads by rows, each part's bands in L2 whatever the intermediate's
        // size: one parallel region for the block instead of one per layer (and per K block).
        let banded = if parts > 1 {
            oh >= parts * PART_MIN_ROWS
                && p3.out_channels <= SPLIT_MAX_PLANES
                && self.bands_apply(act)
        } else {
            self.banded(act)
        };
        if !banded {
            if let Some(split) = self.projection_split(parts, act) {
                self.run_split(input, residual, output, (act, proj_act), split);
                return;
            }
            scratch::with_f32(p2.output_len(), |mid| {
                self.run(input, mid, act);
                proj.run_with_residual(mid, output, residual, proj_act);
            });
            return;
        }
        let (in_len, out_len) = (self.input_len() / p2.batch, p3.output_len() / p3.batch);
        let acts = (act, proj_act);
        for (i, (x, out)) in input
            .chunks_exact(in_len)
            .zip(output.chunks_exact_mut(out_len))
            .enumerate()
        {
            let z = residual.map(|z| &z[i * out_len..(i + 1) * out_len]);
            if parts == 1 {
                self.project_rows(x, z, ProjOut::Whole(out), (0, oh), acts);
                continue;
            }
            let mut planes: [&mut [f32]; SPLIT_MAX_PLANES] =
                std::array::from_fn(|_| Default::default());
            for (piece, dst) in planes.iter_mut().zip(out.chunks_exact_mut(plane)) {
                *piece = dst;
            }
            let planes = &mut planes[..p3.out_channels];
            self.project_parts(x, z, planes, (0, parts, parts), acts);
        }
    }

    /// The projection split between `parts` threads by channels, when a projected block too
    /// short to split its rows takes that way: an expansion before the depthwise convolution
    /// (without one, the depthwise input is the block's input and nothing would stay on the
    /// core that made it), at most [`SPLIT_MAX_PARTS`] parts of at least one channel unit,
    /// and bands that apply ([`Self::bands_apply`]).
    fn projection_split(&self, parts: usize, act: Activation) -> Option<&ProjectionSplit> {
        let mid_c = self.depthwise.p.in_channels;
        let usable = (2..=SPLIT_MAX_PARTS).contains(&parts)
            && mid_c >= parts * CHANNEL_UNIT
            && self.pointwise.is_some()
            && self.bands_apply(act);
        let proj = self.projection.as_ref().filter(|_| usable)?;
        let pw = self.pointwise.as_ref()?;
        let weights = proj
            .single_packed()
            .expect("a 1×1 convolution has packed filters");
        Some(self.splits[parts].get_or_init(|| {
            let units = mid_c.div_ceil(CHANNEL_UNIT);
            let edge = |k: usize| (k * units / parts * CHANNEL_UNIT).min(mid_c);
            let channels: Vec<_> = (0..parts).map(|k| (edge(k), edge(k + 1))).collect();
            let expand = (channels.iter())
                .map(|&(c0, c1)| pw.packed_rows(c0, c1))
                .collect();
            let weights = (channels.iter())
                .map(|&(c0, c1)| weights.columns(c0, c1))
                .collect();
            ProjectionSplit {
                channels,
                expand,
                weights,
            }
        }))
    }

    /// [`Self::run_projected`] split between threads by channels: part `k` computes the
    /// expansion and depthwise planes of its channels and the projection's sum over them
    /// alone, part 0 into the output (with the bias and residual), the others into scratch;
    /// their sums are then added into the output, and the projection's activation applied.
    /// Each thread reads only the planes it made, and the block is one parallel region where
    /// three layers on their own make three (the threads of each reading planes the other
    /// made).
    fn run_split(
        &self,
        input: &[f32],
        residual: Option<&[f32]>,
        output: &mut [f32],
        (act, proj_act): (Activation, Activation),
        split: &ProjectionSplit,
    ) {
        let proj = self.projection.as_ref().expect("checked by run_projected");
        let (p2, p3) = (&self.depthwise.p, &proj.p);
        let (in_len, out_len) = (self.input_len() / p2.batch, p3.output_len() / p3.batch);
        let oh = p2.out_h();
        let parts = split.channels.len();
        scratch::with_f32((parts - 1) * out_len, |partials| {
            for (i, (x, out)) in input
                .chunks_exact(in_len)
                .zip(output.chunks_exact_mut(out_len))
                .enumerate()
            {
                let part = |k: usize, dst: &mut [f32]| {
                    let target = Target::Project {
                        weights: &split.weights[k],
                        bias: proj.bias.as_deref().filter(|_| k == 0),
                        residual: residual
                            .filter(|_| k == 0)
                            .map(|z| &z[i * out_len..(i + 1) * out_len]),
                        output: ProjOut::Whole(dst),
                        first_row: 0,
                        act: Activation::None,
                    };
                    let expand = Some(&split.expand[k]);
                    self.run_channels(x, split.channels[k], expand, (0, oh), act, target);
                };
                rayon::join(
                    || part(0, out),
                    || {
                        (partials.par_chunks_mut(out_len).enumerate())
                            .for_each(|(k, dst)| part(k + 1, dst))
                    },
                );
                simd::vectorize(
                    proj.isa,
                    #[inline(always)]
                    || {
                        for sum in partials.chunks_exact(out_len) {
                            out.iter_mut().zip(sum).for_each(|(o, s)| *o += s);
                        }
                    },
                );
                proj_act.apply_isa(proj.isa, out);
            }
        });
    }

    /// Parts `k0..k1` of `parts` (output row ranges, [`part_rows`]) of one image's projected
    /// block, in parallel, each into its rows of the output planes: `planes` holds a slice
    /// per plane, its rows of those parts. The halves of the parts split every plane's slice
    /// (the right halves' slices held on this stack).
    fn project_parts(
        &self,
        x: &[f32],
        residual: Option<&[f32]>,
        planes: &mut [&mut [f32]],
        (k0, k1, parts): (usize, usize, usize),
        acts: (Activation, Activation),
    ) {
        let p2 = &self.depthwise.p;
        let (oh, ow) = (p2.out_h(), p2.out_w());
        if k1 - k0 == 1 {
            let rows = part_rows(k0, parts, oh);
            self.project_rows(x, residual, ProjOut::Planes(planes), rows, acts);
            return;
        }
        let k = (k0 + k1) / 2;
        let at = (part_rows(k, parts, oh).0 - part_rows(k0, parts, oh).0) * ow;
        let mut right: [&mut [f32]; SPLIT_MAX_PLANES] = std::array::from_fn(|_| Default::default());
        let right = &mut right[..planes.len()];
        for (left, right) in planes.iter_mut().zip(right.iter_mut()) {
            (*left, *right) = std::mem::take(left).split_at_mut(at);
        }
        rayon::join(
            || self.project_parts(x, residual, planes, (k0, k, parts), acts),
            || self.project_parts(x, residual, right, (k, k1, parts), acts),
        );
    }

    /// Output rows `r0..r1` of one image's projected block, band by band, into `output`
    /// (which holds the rows from `r0` on).
    fn project_rows(
        &self,
        x: &[f32],
        residual: Option<&[f32]>,
        output: ProjOut,
        (r0, r1): (usize, usize),
        (act, proj_act): (Activation, Activation),
    ) {
        let proj = self.projection.as_ref().expect("checked by run_projected");
        let target = Target::Project {
            weights: proj
                .single_packed()
                .expect("a 1×1 convolution has packed filters"),
            bias: proj.bias.as_deref(),
            residual,
            output,
            first_row: r0,
            act: proj_act,
        };
        let channels = (0, self.depthwise.p.in_channels);
        self.run_channels(x, channels, None, (r0, r1), act, target);
    }

    /// Whether the pair runs in bands (with the depthwise activation `act`): an intermediate
    /// beyond L2, and [`Self::bands_apply`]. (A projected block on several threads needs only
    /// the latter and rows enough for its parts: [`Self::run_projected`].)
    ///
    /// With the projection as well, the same threshold: from a quarter of it, MobileNetV2's
    /// blocks at 28² and 14² (intermediates of 0.3–0.6 MB) ran slower banded (in the model at 1
    /// thread, 576 channels at 14² 0.91–0.97 → 1.14–1.17 ms, 384 at 14² 0.65–0.70 → 0.84).
    fn banded(&self, act: Activation) -> bool {
        let p2 = &self.depthwise.p;
        // The tensor the bands keep in L2: the pointwise output, or without it the depthwise
        // output, which the projection reads.
        let mid = match &self.pointwise {
            Some(_) => p2.in_channels * p2.in_h * p2.in_w,
            None => p2.output_len() / p2.batch,
        };
        mid * size_of::<f32>() >= self.band_bytes.1 && self.bands_apply(act)
    }

    /// Whether bands can compute the pair at all (whatever the intermediate's size): input
    /// channels, an activation the plane kernel clamps in its stores, and a plane kernel for
    /// the geometry.
    fn bands_apply(&self, act: Activation) -> bool {
        let p2 = &self.depthwise.p;
        self.pointwise
            .as_ref()
            .is_none_or(|pw| pw.conv.p.in_channels > 0)
            && (act == Activation::None || act.clamp_bounds().is_some())
            && depthwise::plane_geometry(p2).is_some_and(|g| g.has_kernel(self.depthwise.isa))
    }

    /// Output rows `r0..r1` of depthwise output planes `c0..c1` of one image from its input
    /// `x`, band by band, into `target`. `expand` holds the expansion's weights for those
    /// channels, packed; without it each band's GEMM takes the convolution's packed weights
    /// for all the channels, or packs a range of them from [`Pointwise::weights`].
    fn run_channels(
        &self,
        x: &[f32],
        (c0, c1): (usize, usize),
        expand: Option<&PackedA>,
        (r0, r1): (usize, usize),
        act: Activation,
        mut target: Target,
    ) {
        let p2 = &self.depthwise.p;
        let isa = self.depthwise.isa;
        let (h, w, ch) = (p2.in_h, p2.in_w, c1 - c0);
        let (oh, ow, s) = (p2.out_h(), p2.out_w(), p2.stride_h);
        // The residual's planes (the image's output planes) are this far apart.
        let plane = oh * ow;
        let reach = (p2.kernel_h - 1) * p2.dilation_h + 1;
        // Projecting, the band's depthwise rows take a second buffer (in L2 beside the first:
        // halving the budget to fit both in 384 KiB made MobileNetV2's banded blocks 2–6%
        // slower at 1 thread).
        let projecting = matches!(target, Target::Project { .. });
        let rows = band_rows(ch * w * size_of::<f32>(), self.band_bytes.0, reach, s).min(r1 - r0);
        // The rows of a band's windows, at most: the buffer holds `cap` rows of each plane.
        let cap = ((rows - 1) * s + reach).min(h);
        let ConvFilters::Depthwise(filters) = &*self.depthwise.filters else {
            unreachable!("a depthwise convolution has depthwise filters")
        };
        let khw = p2.kernel_h * p2.kernel_w;
        let filters = &filters[c0 * khw..c1 * khw];
        let bias_dw = self.depthwise.bias.as_ref().map(|b| &b[c0..c1]);
        let mut base = depthwise::plane_geometry(p2).expect("checked by run");
        // The depthwise kernel reads a band's input rows from the buffer the pointwise GEMM
        // fills, or without a pointwise convolution from the input's planes themselves.
        let (buf_len, in_plane) = match &self.pointwise {
            Some(_) => (ch * cap * w, cap * w),
            None => (0, h * w),
        };
        base.plane_len = (in_plane, oh * ow);
        let band_len = if projecting { ch * rows * ow } else { 0 };
        scratch::with_f32(buf_len, |buf| {
            scratch::with_f32(band_len, |band| {
                // The input rows `held.0..held.1` are in rows `0..` of the buffer's planes.
                let mut held = (0, 0);
                for oy0 in (r0..r1).step_by(rows) {
                    let oy1 = (oy0 + rows).min(r1);
                    // The input rows the band's windows read: `lo..hi`, inside the image.
                    let hi = ((oy1 - 1) * s + reach).saturating_sub(p2.pad_top).min(h);
                    let lo = (oy0 * s).saturating_sub(p2.pad_top).min(hi);
                    let source: &[f32] = match &self.pointwise {
                        Some(pw) => {
                            pw.rows_into(buf, (cap, held), (lo, hi), x, (c0, c1, expand));
                            held = (lo, hi);
                            buf
                        }
                        None => &x[c0 * h * w + lo * w..],
                    };
                    // Output row `oy0 + r` reads input row `(oy0 + r)·s + ky·d − pad_top`, which
                    // is row `r·s + ky·d − (pad_top + lo − oy0·s)` of the source (the subtraction
                    // cannot go below zero while the band reads any row).
                    let mut g = base;
                    g.in_hw.0 = hi - lo;
                    g.out_hw.0 = oy1 - oy0;
                    g.pad.0 = (p2.pad_top + lo).saturating_sub(oy0 * s);
                    let o = match &mut target {
                        Target::Planes(out) => &mut out[oy0 * ow..],
                        Target::Project { .. } => {
                            g.plane_len.1 = (oy1 - oy0) * ow;
                            &mut band[..ch * (oy1 - oy0) * ow]
                        }
                    };
                    let done = simd::depthwise_planes(
                        isa,
                        &g,
                        ch,
                        source,
                        filters,
                        bias_dw,
                        act.clamp_bounds(),
                        o,
                    );
                    assert!(
                        done,
                        "pointwise-depthwise: the plane kernel declined a band"
                    );
                    if let Target::Project {
                        weights,
                        bias,
                        residual,
                        output,
                        first_row,
                        act,
                    } = &mut target
                    {
                        let cols = (oy1 - oy0) * ow;
                        let at = (oy0 - *first_row) * ow;
                        let z = residual.map(|z| &z[oy0 * ow..]);
                        let ep = Epilogue {
                            bias: bias.map_or(Bias::None, Bias::PerRow),
                            residual: z.map(|z| (z, plane)),
                            activation: *act,
                        };
                        project(weights, &band[..ch * cols], cols, (output, at, plane), &ep);
                    }
                }
            })
        });
    }
}

impl Pointwise {
    /// Rows `c0..c1` of the weights (those output channels' `[c1 − c0, in_c]` matrix).
    fn weight_rows(&self, c0: usize, c1: usize) -> MatRef<'_> {
        let cin = self.conv.p.in_channels;
        MatRef::row_major(&self.weights[c0 * cin..c1 * cin], c1 - c0, cin)
    }

    /// [`Pointwise::weight_rows`], packed as a GEMM's A.
    fn packed_rows(&self, c0: usize, c1: usize) -> PackedA {
        PackedA::with_isa(self.conv.isa, self.weight_rows(c0, c1))
    }

    /// Makes the buffer's planes (`cap` rows each, of pointwise output channels `c0..c1`)
    /// hold input rows `lo..hi` of the image `x`, the buffer holding rows `held` before: the
    /// rows both share move to the top, the others are computed by the pointwise GEMM (with
    /// `packed`, those channels' weights packed, when given).
    fn rows_into(
        &self,
        buf: &mut [f32],
        (cap, held): (usize, (usize, usize)),
        (lo, hi): (usize, usize),
        x: &[f32],
        (c0, c1, packed): (usize, usize, Option<&PackedA>),
    ) {
        let p1 = &self.conv.p;
        let (h, w, cin) = (p1.in_h, p1.in_w, p1.in_channels);
        let keep = if (held.0..held.1).contains(&lo) {
            held.1 - lo
        } else {
            0
        };
        if keep > 0 && lo > held.0 {
            let from = (lo - held.0) * w;
            for plane in buf.chunks_exact_mut(cap * w) {
                plane.copy_within(from..from + keep * w, 0);
            }
        }
        let first = lo + keep;
        if hi > first {
            let ep = Epilogue {
                bias: (self.conv.bias.as_ref()).map_or(Bias::None, |b| Bias::PerRow(&b[c0..c1])),
                residual: None,
                activation: self.act,
            };
            let b = MatRef {
                data: &x[first * w..],
                rows: cin,
                cols: (hi - first) * w,
                row_stride: h * w,
                col_stride: 1,
            };
            let c = &mut buf[keep * w..];
            // All the channels: the convolution's own packed weights, rather than packing
            // them again for every band of every run.
            let all = (c0, c1) == (0, p1.out_channels);
            let packed = packed.or(self.conv.single_packed().filter(|_| all));
            match packed {
                Some(a) => gemm::sgemm_packed_a_with(false, 1.0, a, b, 0.0, c, cap * w, &ep),
                None => {
                    let a = self.weight_rows(c0, c1);
                    gemm::sgemm_with(self.conv.isa, false, 1.0, a, b, 0.0, c, cap * w, &ep)
                }
            }
        }
    }
}

/// The projection of one band: `output = epilogue(weights · band)` over every output plane,
/// from column `at` of the planes' pieces in `output` on (the planes `plane` floats long),
/// `band` holding the band's `cols` depthwise outputs of each of the weights' input channels.
fn project(
    weights: &PackedA,
    band: &[f32],
    cols: usize,
    (output, at, plane): (&mut ProjOut, usize, usize),
    ep: &Epilogue,
) {
    let b = MatRef {
        data: band,
        rows: weights.cols(),
        cols,
        row_stride: cols,
        col_stride: 1,
    };
    match output {
        ProjOut::Whole(output) => {
            gemm::sgemm_packed_a_with(false, 1.0, weights, b, 0.0, &mut output[at..], plane, ep)
        }
        ProjOut::Planes(planes) => {
            gemm::sgemm_packed_a_rows(1.0, weights, b, 0.0, planes, (at, plane), ep)
        }
    }
}

/// Output rows `r0..r1` of part `k` of `parts` over `oh` rows, as even as whole rows allow
/// (boundaries rounded down to the plane kernels' four-row step had split 28 rows 12 + 16).
fn part_rows(k: usize, parts: usize, oh: usize) -> (usize, usize) {
    (k * oh / parts, (k + 1) * oh / parts)
}

/// Output rows per band: the most whose input window (`(rows − 1)·stride + reach` rows of
/// `row_bytes` each) fits in `budget` bytes, rounded down to a multiple of the plane kernels'
/// four-row step, and at least four.
fn band_rows(row_bytes: usize, budget: usize, reach: usize, stride: usize) -> usize {
    let window = budget / row_bytes.max(1);
    let rows = window.saturating_sub(reach) / stride + 1;
    (rows / 4 * 4).max(4)
}

#[cfg(test)]
mod tests;
