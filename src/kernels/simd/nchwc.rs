//! The strip of the channel-blocked convolution (`kernels::nchwc`): its geometry,
//! the checks that make the AVX-512 kernel (`avx512_nchwc`) safe to enter, and the same strip
//! in plain Rust for the other ISAs.

#[cfg(target_arch = "x86_64")]
use crate::kernels::cpu;
use crate::kernels::cpu::Isa;

/// Most output positions of one strip: 24 accumulators, the positions times the blocks
/// written (see [`strip_len`]).
pub(crate) const MAX_STRIP: usize = 24;
/// Blocks of 16 output channels a strip computes together (one 64-float row of the packed
/// filters per input channel).
pub(crate) const GROUP_BLOCKS: usize = 4;

/// Output positions of a strip that writes `blocks_out` blocks (1 to [`GROUP_BLOCKS`]): as
/// many as fill the 24 accumulators, 6 with four blocks, 8 with three, 12 with two, 24 with
/// one. (With six positions whatever the blocks, a layer of 16 or 32 output channels, such as
/// YOLOv8's and PP-OCR's early ones, used a quarter or half of the accumulators.)
pub(crate) fn strip_len(blocks_out: usize) -> usize {
    MAX_STRIP / blocks_out.clamp(1, GROUP_BLOCKS)
}

/// Where one strip reads and writes (offsets in floats). A strip of fewer than
/// [`strip_len`] positions repeats its last one: the repeats compute and store the same
/// values again.
///
/// Most strips are `uniform`: their positions are equally spaced in the input (inside one
/// row, or across rows that follow each other, as a 1×1 convolution at stride 1 reads them),
/// so that the kernel addresses each from the first. Only the others list their positions
/// (in [`StripCursor::x_pos`]): the kernel had spent a tenth of its time (`perf`, a 1×1 layer
/// on a Xeon) stalled on copies of per-strip position arrays written an offset at a time.
#[derive(Clone, Copy, Debug)]
pub(super) struct ConvStrip {
    /// The first position's 16 channels of the pass's first input block.
    pub x_first: usize,
    /// Floats from one position's input to the next's, when `uniform`.
    pub x_step: usize,
    /// Whether position `p` reads from `x_first + p · x_step`; otherwise from the cursor's
    /// `x_pos[p]`.
    pub uniform: bool,
    /// Positions computed (1 to [`strip_len`]); the rest repeat the last.
    pub n: usize,
    /// The first position's 16 channels in every output (and residual) block; position `p`
    /// lies at [`ConvStrip::out_at`].
    pub out_first: usize,
    /// Floats from one input block to the next.
    pub x_block: usize,
    /// Input blocks of this pass.
    pub blocks_in: usize,
    /// Output blocks written (1 to [`GROUP_BLOCKS`]).
    pub blocks_out: usize,
    /// The first pass over the input blocks: the sums start from the biases, not the output.
    pub first: bool,
    /// The last pass: the residual and the clamp apply.
    pub last: bool,
}

impl ConvStrip {
    /// Where position `p` of the strip lies in every output block (a repeat: the last
    /// position's place).
    #[inline(always)]
    pub(super) fn out_at(&self, p: usize) -> usize {
        self.out_first + 16 * p.min(self.n - 1)
    }

    /// Where position `p` reads in the pass's first input block (`x_pos`: the cursor's list).
    #[inline(always)]
    pub(super) fn x_at(&self, x_pos: &[usize; MAX_STRIP], p: usize) -> usize {
        if self.uniform {
            self.x_first + p * self.x_step
        } else {
            x_pos[p]
        }
    }
}

/// One pass over output positions `start..end`, as consecutive strips of [`strip_len`]
/// positions (the last one shorter). Output position `p` lies in row `p / ow` and column `p % ow`; it is
/// written at `16·(p − start)` of every output (and residual) block, and reads input position
/// `row·row_step + col·col_step`, i.e. the floats from `x_base + 16·(row·row_step +
/// col·col_step)` on in the first input block of the pass.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct StripRun {
    /// The first output position of the pass.
    pub start: usize,
    /// One past the last output position of the pass.
    pub end: usize,
    /// Output positions per row (at least 1).
    pub ow: usize,
    /// Input positions from one output row's first input position to the next's.
    pub row_step: usize,
    /// Input positions from one output column's input position to the next's.
    pub col_step: usize,
    /// Floats before the pass's first input block.
    pub x_base: usize,
    /// Floats from one input block to the next.
    pub x_block: usize,
    /// Input blocks of this pass.
    pub blocks_in: usize,
    /// Output blocks written (1 to [`GROUP_BLOCKS`]).
    pub blocks_out: usize,
    /// The first pass over the input blocks: the sums start from the biases, not the output.
    pub first: bool,
    /// The last pass: the residual and the clamp apply.
    pub last: bool,
}

/// Walks the strips of a [`StripRun`] without a division per position: the row and column
/// of the next strip's first position are carried from one strip to the next.
pub(super) struct StripCursor {
    /// Positions per strip ([`strip_len`] of the run's blocks).
    len: usize,
    /// The next strip's first position.
    next: usize,
    row: usize,
    col: usize,
    /// Whether each output row's input follows the previous row's (`row_step = ow ·
    /// col_step`), so that a strip across rows is still uniform.
    rows_follow: bool,
    /// The input offsets of the last strip's positions when it is not uniform (the first
    /// [`strip_len`] entries).
    pub(super) x_pos: [usize; MAX_STRIP],
}

impl StripCursor {
    /// A cursor at the run's first strip (`run.ow ≥ 1`).
    #[inline(always)]
    pub(super) fn new(run: &StripRun) -> Self {
        StripCursor {
            len: strip_len(run.blocks_out),
            next: run.start,
            row: run.start / run.ow,
            col: run.start % run.ow,
            rows_follow: run.ow.checked_mul(run.col_step) == Some(run.row_step),
            x_pos: [0; MAX_STRIP],
        }
    }

    /// The next strip of `run`, or `None` after the last one.
    #[inline(always)]
    pub(super) fn next_strip(&mut self, run: &StripRun) -> Option<ConvStrip> {
        if self.next >= run.end {
            return None;
        }
        let len = self.len;
        let n = (run.end - self.next).min(len);
        let x_first = run.x_base + 16 * (self.row * run.row_step + self.col * run.col_step);
        let uniform = n == len && (self.rows_follow || self.col + n <= run.ow);
        if uniform {
            let col = self.col + n;
            self.row += col / run.ow;
            self.col = col % run.ow;
        } else {
            for i in 0..len {
                if i < n {
                    self.x_pos[i] =
                        run.x_base + 16 * (self.row * run.row_step + self.col * run.col_step);
                    self.col += 1;
                    if self.col == run.ow {
                        self.col = 0;
                        self.row += 1;
                    }
                } else {
                    self.x_pos[i] = self.x_pos[n - 1];
                }
            }
        }
        let out_first = 16 * (self.next - run.start);
        self.next += n;
        Some(ConvStrip {
            x_first,
            x_step: 16 * run.col_step,
            uniform,
            n,
            out_first,
            x_block: run.x_block,
            blocks_in: run.blocks_in,
            blocks_out: run.blocks_out,
            first: run.first,
            last: run.last,
        })
    }
}

/// The largest input position any output position of `run` reads (`None` on overflow or
/// an empty run). Within a row the input positions grow with the column, and each row's last
/// one grows with the row, so the largest is the last position's or, when the run reaches
/// back into the row before, that row's last.
fn largest_input_position(run: &StripRun) -> Option<usize> {
    let last = run.end.checked_sub(1).filter(|&l| l >= run.start)?;
    let at = |row: usize, col: usize| {
        row.checked_mul(run.row_step)?
            .checked_add(col.checked_mul(run.col_step)?)
    };
    let (row, col) = (last / run.ow, last % run.ow);
    let mut most = at(row, col)?;
    if row > 0 && run.start < row * run.ow {
        most = most.max(at(row - 1, run.ow - 1)?);
    }
    Some(most)
}

/// Runs every strip of one pass (see `avx512_nchwc::conv_strip` for one strip's sums):
/// `taps` the kernel taps' offsets in the input (`[0]` for a 1×1 convolution), `x` the input,
/// `w` the pass's `blocks_in · taps.len() · 1024` packed weights, `bias` the group's 64 biases,
/// `z` the residual blocks (empty: none; otherwise every written block), `out` the output
/// blocks (at least `blocks_out`, each from the pass's first position on); meanwhile
/// `prefetch` is fetched into L2, `per_strip` floats of it by each strip in turn (the next
/// pass's filters: the first strip of a pass over few positions otherwise waited for them
/// from memory). The bounds are checked once for the whole pass. Returns `false`, computing
/// nothing, when an offset falls outside its slice.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_strips(
    isa: Isa,
    run: &StripRun,
    taps: &[usize],
    x: &[f32],
    (w, bias): (&[f32], &[f32]),
    (prefetch, per_strip): (&[f32], usize),
    z: &[&[f32]],
    out: &mut [&mut [f32]],
    clamp: Option<(f32, f32)>,
) -> bool {
    if run.end <= run.start {
        return true;
    }
    if run.ow == 0 {
        return false;
    }
    let max_tap = taps.iter().copied().max();
    // The furthest float a strip reads: 16 channels from the largest input position's offset
    // in the pass's last input block, at its largest tap.
    let x_reach = largest_input_position(run)
        .and_then(|p| p.checked_mul(16))
        .and_then(|p| p.checked_add(run.x_base))
        .zip(run.blocks_in.saturating_sub(1).checked_mul(run.x_block))
        .and_then(|(p, b)| p.checked_add(b))
        .zip(max_tap)
        .and_then(|(p, t)| p.checked_add(t))
        .and_then(|p| p.checked_add(16));
    let x_ok = run.blocks_in == 0 || x_reach.is_some_and(|r| r <= x.len());
    let out_reach = (run.end - run.start).checked_mul(16);
    let blocks_ok = (1..=GROUP_BLOCKS).contains(&run.blocks_out)
        && out.len() >= run.blocks_out
        && (z.is_empty() || z.len() >= run.blocks_out);
    let fits = x_ok
        && blocks_ok
        && out_reach.is_some_and(|r| {
            out[..run.blocks_out].iter().all(|o| o.len() >= r)
                && z.iter().take(run.blocks_out).all(|o| o.len() >= r)
        })
        && !taps.is_empty()
        && run
            .blocks_in
            .checked_mul(taps.len())
            .and_then(|n| n.checked_mul(1024))
            .is_some_and(|n| n <= w.len())
        && bias.len() >= 16 * GROUP_BLOCKS;
    if !fits {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && cpu::supported(isa) {
        let zp = std::array::from_fn(|j| match z.get(j) {
            Some(z) if j < run.blocks_out => z.as_ptr(),
            _ => std::ptr::null(),
        });
        let op = std::array::from_fn(|j| match out.get_mut(j) {
            Some(o) if j < run.blocks_out => o.as_mut_ptr(),
            _ => std::ptr::null_mut(),
        });
        // SAFETY: AVX-512F is there (checked); every offset a strip of the run reads lies in
        // its slice: the input up to the largest position's last tap of the last block (checked
        // above; every other position reads below it), the outputs and residuals up to
        // `16·(end − start)` floats, the weights and biases as checked. The output slices are
        // distinct `&mut` borrows, so they overlap neither each other nor the inputs, and only
        // blocks `j < blocks_out` of `z` and `out` are read or written. The kernel reads the
        // prefetched floats only inside `prefetch`.
        unsafe {
            super::avx512_nchwc::conv_strips(
                run,
                (taps, x.as_ptr()),
                (w.as_ptr(), bias.as_ptr()),
                (prefetch.as_ptr(), prefetch.len(), per_strip),
                zp,
                op,
                clamp,
            )
        };
        return true;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (isa, prefetch, per_strip);
    let mut cursor = StripCursor::new(run);
    while let Some(s) = cursor.next_strip(run) {
        portable_strip(&s, &cursor.x_pos, taps, x, (w, bias), z, out, clamp);
    }
    true
}

/// One strip of [`conv_strips`] in plain Rust, the same sums in the same order as the AVX-512
/// kernel (bounds checked by the caller).
#[allow(clippy::too_many_arguments)]
fn portable_strip(
    s: &ConvStrip,
    x_pos: &[usize; MAX_STRIP],
    taps: &[usize],
    x: &[f32],
    (w, bias): (&[f32], &[f32]),
    z: &[&[f32]],
    out: &mut [&mut [f32]],
    clamp: Option<(f32, f32)>,
) {
    let len = strip_len(s.blocks_out);
    let mut acc = [[0f32; 16 * GROUP_BLOCKS]; MAX_STRIP];
    let acc = &mut acc[..len];
    for (p, a) in acc.iter_mut().enumerate() {
        for j in 0..s.blocks_out {
            let src = if s.first {
                &bias[16 * j..16 * j + 16]
            } else {
                &out[j][s.out_at(p)..s.out_at(p) + 16]
            };
            a[16 * j..16 * j + 16].copy_from_slice(src);
        }
    }
    for (cb, t) in (0..s.blocks_in).flat_map(|cb| (0..taps.len()).map(move |t| (cb, t))) {
        for k in 0..16 {
            let at = ((cb * taps.len() + t) * 16 + k) * 64;
            let row = &w[at..at + 64];
            for (p, a) in acc.iter_mut().enumerate() {
                let v = x[s.x_at(x_pos, p) + cb * s.x_block + taps[t] + k];
                for (a, &wv) in a.iter_mut().zip(row) {
                    *a = v.mul_add(wv, *a);
                }
            }
        }
    }
    for (p, a) in acc.iter().enumerate() {
        for j in 0..s.blocks_out {
            for l in 0..16 {
                let at = s.out_at(p) + l;
                let mut v = a[16 * j + l];
                if s.last {
                    if let Some(z) = z.get(j) {
                        v += z[at];
                    }
                    if let Some((lo, hi)) = clamp {
                        // As `min(hi, max(lo, v))` in registers: NaN stays NaN.
                        if !v.is_nan() {
                            v = v.max(lo).min(hi);
                        }
                    }
                }
                out[j][at] = v;
            }
        }
    }
}

/// Reorders one block of 16 channels with the ISA's transpose kernel: `dst` (16 floats per
/// position) from `src` (16 planes of `plane` floats) when `blocking`, else the other way.
/// Returns `false`, writing nothing, when the ISA has no such kernel or a slice is not
/// `16 · plane` floats long.
pub(crate) fn reorder_block(
    isa: Isa,
    src: &[f32],
    dst: &mut [f32],
    plane: usize,
    blocking: bool,
) -> bool {
    let len = plane.checked_mul(16);
    if len != Some(src.len()) || len != Some(dst.len()) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if isa == Isa::Avx512 && cpu::supported(isa) {
        // SAFETY: AVX-512F is there (checked); both slices hold the block's `16 · plane` floats
        // (checked), and a shared and a `&mut` borrow do not overlap.
        unsafe {
            super::avx512_nchwc::reorder_block(src.as_ptr(), dst.as_mut_ptr(), plane, blocking)
        };
        return true;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (isa, blocking);
    false
}
