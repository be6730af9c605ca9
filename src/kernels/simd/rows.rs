//! Rows of C whose lengths the GEMM's micro-kernel entries check once per task
//! ([`CheckedRows`]). Its fields are visible to `simd` alone, which reads them after the check.
#![forbid(unsafe_code)]

/// Rows of C, with the residual's rows beside them, whose lengths were checked once for all
/// the columns of a task: [`super::micro_column`] then only checks that its columns lie within
/// `width`. (Checking up to 192 rows, and as many residual rows, for every 32-wide column took
/// 1% of MobileNetV2's samples at 1 thread.) Outside `simd` the rows are reached only through
/// [`CheckedRows::iter_mut`], which lends their contents, never the slots: their lengths stay
/// as checked.
pub(crate) struct CheckedRows<'r, 'c, 'z> {
    pub(super) rows: &'r mut [&'c mut [f32]],
    pub(super) residual: &'z [&'z [f32]],
    pub(super) width: usize,
}

impl<'r, 'c, 'z> CheckedRows<'r, 'c, 'z> {
    /// `rows` and `residual` (empty, or a piece per row) checked to hold `width` floats each;
    /// panics where one is shorter.
    pub(crate) fn new(
        rows: &'r mut [&'c mut [f32]],
        residual: &'z [&'z [f32]],
        width: usize,
    ) -> Self {
        assert!(rows.iter().all(|r| r.len() >= width));
        assert!(
            residual.is_empty()
                || (residual.len() >= rows.len()
                    && residual.iter().take(rows.len()).all(|r| r.len() >= width))
        );
        CheckedRows {
            rows,
            residual,
            width,
        }
    }

    /// The number of rows.
    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    /// The rows' contents.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut [f32]> + use<'_, 'c> {
        self.rows.iter_mut().map(|r| &mut **r)
    }
}
