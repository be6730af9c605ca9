//! The transforms of the two Winograd variants, F(4×4, 3×3) and F(2×2, 3×3): the filter
//! transform `G` (in f64, applied once at preparation) and the input and output transforms
//! `Bᵀ` and `Aᵀ`, on one column of a tile per lane (also applied to rows, the matrices being
//! applied on both sides).
//!
//! Interpolation points 0, ±1, ±2, ∞ for F(4×4, 3×3) and 0, ±1, ∞ for F(2×2, 3×3) (Lavin &
//! Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).
#![forbid(unsafe_code)]

use super::{Lanes, L};

/// A variant F(R×R, 3×3): `R×R` outputs per tile from a `T×T` input tile, `T = R + 2`.
pub(super) trait Variant<const R: usize, const T: usize> {
    /// The filter transform `G`, `T×3`.
    const G: [[f64; 3]; T];
    /// `Bᵀ·d` for one column of `T` values per lane.
    fn bt(d: &[Lanes; T]) -> [Lanes; T];
    /// `Aᵀ·m` for one column of `T` values per lane.
    fn at(m: &[Lanes; T]) -> [Lanes; R];
}

/// F(4×4, 3×3): 36 multiplications per tile and channel pair where the direct method needs
/// 144.
pub(super) struct F4;

/// F(2×2, 3×3): 16 multiplications per tile and channel pair where the direct method needs
/// 36; smaller transforms and tiles that fit 7×7 images better (8×8 covered rather than 8×8
/// by 4×4 tiles of which only 2×2 are whole).
pub(super) struct F2;

impl Variant<4, 6> for F4 {
    const G: [[f64; 3]; 6] = [
        [0.25, 0.0, 0.0],
        [-1.0 / 6.0, -1.0 / 6.0, -1.0 / 6.0],
        [-1.0 / 6.0, 1.0 / 6.0, -1.0 / 6.0],
        [1.0 / 24.0, 1.0 / 12.0, 1.0 / 6.0],
        [1.0 / 24.0, -1.0 / 12.0, 1.0 / 6.0],
        [0.0, 0.0, 1.0],
    ];

    #[inline(always)]
    fn bt(d: &[Lanes; 6]) -> [Lanes; 6] {
        let mut o = [[0.0f32; L]; 6];
        for l in 0..L {
            let (d0, d1, d2, d3, d4, d5) = (d[0][l], d[1][l], d[2][l], d[3][l], d[4][l], d[5][l]);
            o[0][l] = 4.0 * d0 - 5.0 * d2 + d4;
            o[1][l] = (d3 + d4) - 4.0 * (d1 + d2);
            o[2][l] = (d4 - d3) + 4.0 * (d1 - d2);
            o[3][l] = (d4 - d2) + 2.0 * (d3 - d1);
            o[4][l] = (d4 - d2) - 2.0 * (d3 - d1);
            o[5][l] = 4.0 * d1 - 5.0 * d3 + d5;
        }
        o
    }

    #[inline(always)]
    fn at(m: &[Lanes; 6]) -> [Lanes; 4] {
        let mut o = [[0.0f32; L]; 4];
        for l in 0..L {
            let (a, b) = (m[1][l] + m[2][l], m[1][l] - m[2][l]);
            let (c, d) = (m[3][l] + m[4][l], m[3][l] - m[4][l]);
            o[0][l] = m[0][l] + a + c;
            o[1][l] = b + 2.0 * d;
            o[2][l] = a + 4.0 * c;
            o[3][l] = b + 8.0 * d + m[5][l];
        }
        o
    }
}

impl Variant<2, 4> for F2 {
    const G: [[f64; 3]; 4] = [
        [1.0, 0.0, 0.0],
        [0.5, 0.5, 0.5],
        [0.5, -0.5, 0.5],
        [0.0, 0.0, 1.0],
    ];

    #[inline(always)]
    fn bt(d: &[Lanes; 4]) -> [Lanes; 4] {
        let mut o = [[0.0f32; L]; 4];
        for l in 0..L {
            let (d0, d1, d2, d3) = (d[0][l], d[1][l], d[2][l], d[3][l]);
            o[0][l] = d0 - d2;
            o[1][l] = d1 + d2;
            o[2][l] = d2 - d1;
            o[3][l] = d1 - d3;
        }
        o
    }

    #[inline(always)]
    fn at(m: &[Lanes; 4]) -> [Lanes; 2] {
        let mut o = [[0.0f32; L]; 2];
        for l in 0..L {
            o[0][l] = m[0][l] + m[1][l] + m[2][l];
            o[1][l] = m[1][l] - m[2][l] - m[3][l];
        }
        o
    }
}
