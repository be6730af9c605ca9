//! Tests of the AVX-512 column driver's tile heights.

use super::{tile_height, MR};

/// The tile heights down a column of `rows` rows, with the row of its micro-panel each
/// starts at.
fn plan(rows: usize, tall: bool) -> Vec<(usize, usize)> {
    let mut tiles = Vec::new();
    let mut r0 = 0;
    while r0 < rows {
        let h = tile_height(rows - r0, tall, r0 % MR);
        tiles.push((h, r0 % MR));
        r0 += h;
    }
    tiles
}

/// Just the heights of [`plan`].
fn heights(rows: usize, tall: bool) -> Vec<usize> {
    plan(rows, tall).into_iter().map(|(h, _)| h).collect()
}

#[test]
fn tall_columns_split_into_twelves_and_eights() {
    assert_eq!(heights(64, true), [12, 12, 12, 12, 8, 8]);
    assert_eq!(heights(16, true), [8, 8]);
    assert_eq!(heights(20, true), [12, 8]);
    assert_eq!(heights(128, true), [vec![12; 10], vec![8]].concat());
    assert_eq!(heights(10, true), [8, 2]);
    assert_eq!(heights(14, true), [8, 6]);
    assert_eq!(heights(17, true), [12, 4, 1]);
    assert_eq!(heights(64, false), [8; 8]);
    assert_eq!(heights(13, false), [8, 5]);
    for rows in 1..200 {
        let tiles = plan(rows, true);
        assert_eq!(tiles.iter().map(|t| t.0).sum::<usize>(), rows);
        // Only the heights the column driver instantiates, from row 0 or 4.
        for &(h, off) in &tiles {
            let ok = match off {
                0 => h <= 8 || h == 12,
                4 => h <= 4 || h == 8 || h == 12,
                _ => false,
            };
            assert!(ok, "{rows}: {tiles:?}");
        }
        // A column of a multiple of 4 rows never has a tile of 4 rows or fewer.
        if rows % 4 == 0 && rows > 4 {
            assert!(
                tiles.iter().all(|t| t.0 == 8 || t.0 == 12),
                "{rows}: {tiles:?}"
            );
        }
    }
}
