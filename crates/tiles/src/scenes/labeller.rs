//! Where a scene's class values come from: its label raster, or a [`SceneLabeller`] that makes
//! them on the scene's own grid (vector layers burned onto it).

use std::path::{Path, PathBuf};

use raster::{GeoRef, Mask};

use super::source::Source;
use crate::error::TilesError;

/// The error a [`SceneLabeller`] returns; it reaches the user as one line naming the scene.
pub type LabellerError = Box<dyn std::error::Error + Send + Sync>;

/// Labels made for each scene on its own pixel grid, a band of rows at a time, instead of read
/// from one label raster per scene: e.g. polygon layers burned onto each scene (segfit's
/// `prepare --labels`). The values written are stored mask values, mapped by
/// [`SceneOptions::labels`](super::SceneOptions::labels) like a label raster's.
///
/// [`prepare_labelled_scenes`](super::prepare_labelled_scenes) calls [`start`](Self::start)
/// for each scene in order and then [`rows`](Self::rows) for its row bands (increasing,
/// possibly overlapping) to survey it; once every scene is surveyed it does the same again for
/// the scenes' kept tiles while writing them.
pub trait SceneLabeller {
    /// Starts scene `index` (file `scene`, `width × height` pixels, georeferenced by `geo`
    /// when it is).
    fn start(
        &mut self,
        index: usize,
        scene: &Path,
        width: usize,
        height: usize,
        geo: Option<&GeoRef>,
    ) -> Result<(), LabellerError>;

    /// Writes the values of rows `y..y + out.len() / width` of the started scene into `out`
    /// (row-major, whole rows).
    fn rows(&mut self, y: usize, out: &mut [u8]) -> Result<(), LabellerError>;

    /// What the tile manifest records as the tiles' label source (the first label layer).
    fn source(&self) -> PathBuf;
}

/// One scene's class values, a band of rows at a time.
pub(super) enum LabelRows<'a> {
    Raster {
        path: PathBuf,
        source: Source,
    },
    Made {
        labeller: &'a mut dyn SceneLabeller,
        scene: PathBuf,
        width: usize,
    },
}

impl<'a> LabelRows<'a> {
    /// The label raster at `path`.
    pub(super) fn raster(path: &Path) -> Result<LabelRows<'a>, TilesError> {
        Ok(LabelRows::Raster {
            path: path.to_path_buf(),
            source: Source::open_mask(path)?,
        })
    }

    /// Scene `index`'s labels from `labeller`, started on the scene's grid.
    pub(super) fn made(
        labeller: &'a mut dyn SceneLabeller,
        index: usize,
        scene: &Path,
        (width, height): (usize, usize),
        geo: Option<&GeoRef>,
    ) -> Result<LabelRows<'a>, TilesError> {
        labeller
            .start(index, scene, width, height, geo)
            .map_err(|e| labels_error(scene, e))?;
        Ok(LabelRows::Made {
            labeller,
            scene: scene.to_path_buf(),
            width,
        })
    }

    /// The label raster's size and georeferencing; `None` for made labels (on the scene's
    /// grid by construction).
    pub(super) fn raster_grid(&self) -> Option<((usize, usize), Option<&GeoRef>, &Path)> {
        match self {
            LabelRows::Raster { path, source } => Some((source.size(), source.geo(), path)),
            LabelRows::Made { .. } => None,
        }
    }

    /// Rows `y..y + h` as stored values.
    pub(super) fn rows(&mut self, y: usize, h: usize) -> Result<Mask, TilesError> {
        match self {
            LabelRows::Raster { path, source } => source.mask_rows(path, y, h),
            LabelRows::Made {
                labeller,
                scene,
                width,
            } => {
                let mut data = vec![0u8; *width * h];
                labeller
                    .rows(y, &mut data)
                    .map_err(|e| labels_error(scene, e))?;
                Ok(Mask::new(*width, h, data).expect("whole rows"))
            }
        }
    }
}

fn labels_error(scene: &Path, e: LabellerError) -> TilesError {
    TilesError::Labels {
        scene: scene.to_path_buf(),
        reason: e.to_string(),
    }
}
