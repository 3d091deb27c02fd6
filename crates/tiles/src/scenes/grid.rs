//! The tile grid of a scene and its train/val split by 2×2-tile blocks.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::TilesError;
use crate::pairs::hash_unit;

/// Tile origins along one axis: every `stride`, plus one flush with the far edge so the whole
/// scene is covered.
pub(super) fn origins(len: usize, tile: usize, stride: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..=len - tile).step_by(stride).collect();
    if *v.last().expect("len >= tile") + tile < len {
        v.push(len - tile);
    }
    v
}

/// Where a kept tile goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    Train,
    Val,
    /// A train tile sharing pixels with a val tile: left out so val stays unseen.
    Dropped,
}

impl Role {
    pub(super) fn split(self) -> Option<&'static str> {
        match self {
            Role::Train => Some("train"),
            Role::Val => Some("val"),
            Role::Dropped => None,
        }
    }
}

/// A tile worth keeping (not mostly empty): its place in the grid and in the scene.
#[derive(Clone, Debug)]
pub(super) struct Planned {
    /// Index of the scene.
    pub scene: usize,
    /// Column and row in the scene's tile grid.
    pub col: usize,
    pub row: usize,
    /// Top-left pixel in the scene.
    pub x: usize,
    pub y: usize,
    pub role: Role,
}

/// How the blocks were split.
#[derive(Debug)]
pub(super) struct SplitSummary {
    /// Train tiles dropped for sharing pixels with a val tile.
    pub dropped: usize,
}

/// Splits kept tiles by 2×2-tile blocks: `ceil(val_ratio × blocks)` blocks go to `val` (at
/// least one, and never all, when there are two or more), the blocks with the smallest
/// `hash(seed, stem@bx,by)`, then every train tile that shares a pixel with a val tile of its
/// scene is dropped.
///
/// NOTE: overlapping neighbours share pixels, so tiles are split by blocks rather than one by
/// one: only tiles on block borders can overlap a tile of the other split.
pub(super) fn assign_splits(
    tiles: &mut [Planned],
    stems: &[String],
    tile: usize,
    val_ratio: f64,
    seed: u64,
    location: &Path,
) -> Result<SplitSummary, TilesError> {
    let mut blocks: BTreeMap<(usize, usize, usize), Vec<usize>> = BTreeMap::new();
    for (i, t) in tiles.iter().enumerate() {
        blocks
            .entry((t.scene, t.col / 2, t.row / 2))
            .or_default()
            .push(i);
    }
    let n = blocks.len();
    if val_ratio > 0.0 && n < 2 {
        return Err(TilesError::TooLittleData {
            location: location.to_path_buf(),
            reason: format!(
                "{} {} tile(s) in {n} block of 2x2 tiles, and train and val need a block \
                 each; lower --tile-size (now {tile}) or add scenes",
                if stems.len() == 1 {
                    "the scene gives"
                } else {
                    "the scenes give"
                },
                tiles.len()
            ),
        });
    }
    let n_val = val_blocks(n, val_ratio);
    let mut order: Vec<_> = blocks.into_iter().collect();
    let key =
        |&(s, bx, by): &(usize, usize, usize)| hash_unit(seed, &format!("{}@{bx},{by}", stems[s]));
    order.sort_by(|(a, _), (b, _)| key(a).total_cmp(&key(b)).then(a.cmp(b)));
    for (rank, (_, members)) in order.iter().enumerate() {
        let role = if rank < n_val { Role::Val } else { Role::Train };
        for &i in members {
            tiles[i].role = role;
        }
    }
    let dropped = drop_overlapping(tiles, tile);
    if !tiles.iter().any(|t| t.role == Role::Train) {
        return Err(TilesError::TooLittleData {
            location: location.to_path_buf(),
            reason: format!(
                "all {dropped} train tile(s) share pixels with val tiles and were dropped; \
                 lower --overlap or --val-ratio, or add scenes"
            ),
        });
    }
    Ok(SplitSummary { dropped })
}

/// `ceil(val_ratio × blocks)`, kept in `1..blocks` when there are two or more blocks.
fn val_blocks(blocks: usize, val_ratio: f64) -> usize {
    if val_ratio <= 0.0 || blocks == 0 {
        return 0;
    }
    // The epsilon keeps 0.7 × 10 (7.000000000000001 in floating point) at 7.
    let want = (val_ratio * blocks as f64 - 1e-9).ceil() as usize;
    want.clamp(1, blocks.saturating_sub(1).max(1))
}

/// Marks train tiles that share a pixel with a val tile of the same scene as dropped; returns
/// how many.
fn drop_overlapping(tiles: &mut [Planned], tile: usize) -> usize {
    let val: Vec<(usize, usize, usize)> = tiles
        .iter()
        .filter(|t| t.role == Role::Val)
        .map(|t| (t.scene, t.x, t.y))
        .collect();
    let mut dropped = 0;
    for t in tiles.iter_mut().filter(|t| t.role == Role::Train) {
        let overlaps = val.iter().any(|&(s, x, y)| {
            s == t.scene && x < t.x + tile && t.x < x + tile && y < t.y + tile && t.y < y + tile
        });
        if overlaps {
            t.role = Role::Dropped;
            dropped += 1;
        }
    }
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn val_blocks_round_up_and_leave_train_a_block() {
        assert_eq!(val_blocks(9, 0.2), 2);
        assert_eq!(val_blocks(10, 0.7), 7);
        assert_eq!(val_blocks(10, 0.2), 2);
        assert_eq!(val_blocks(2, 0.01), 1);
        assert_eq!(val_blocks(2, 0.99), 1);
        assert_eq!(val_blocks(5, 0.0), 0);
    }

    #[test]
    fn origins_cover_the_axis_with_a_flush_last_tile() {
        assert_eq!(origins(603, 128, 112), [0, 112, 224, 336, 448, 475]);
        assert_eq!(origins(64, 32, 32), [0, 32]);
    }
}
