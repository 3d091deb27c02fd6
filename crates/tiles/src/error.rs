//! The one error type of the crate: every variant names the files involved and, where it can,
//! says how to fix the problem.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Everything that can go wrong while reading, auditing, tiling or writing a dataset.
#[derive(Debug, thiserror::Error)]
pub enum TilesError {
    /// A file or directory could not be read, created or written.
    #[error("cannot access {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file exists but cannot be decoded (corrupt, truncated or not the format its name says).
    #[error("cannot decode {}: {reason} (is the file truncated or corrupt?)", path.display())]
    Decode {
        /// The file.
        path: PathBuf,
        /// What the decoder reported.
        reason: String,
    },
    /// A file decodes but holds something segfit does not handle (signed samples, 64-bit…).
    #[error("unsupported raster in {}: {reason}", path.display())]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// What is unsupported and what is expected instead.
        reason: String,
    },
    /// Images were found with no matching mask.
    #[error("{} image(s) have no mask in {}: {}; add the masks, fix `mask_suffix`/`mask_ext`, or set `skip_unpaired` to proceed without them", images.len(), mask_dir.display(), list_paths(images))]
    MissingMasks {
        /// The images without a mask.
        images: Vec<PathBuf>,
        /// Where the masks were looked for.
        mask_dir: PathBuf,
    },
    /// Masks were found with no matching image.
    #[error("{} mask(s) have no image: {}; remove them or add the images (masks pair with images by file stem)", masks.len(), list_paths(masks))]
    MissingImages {
        /// The masks without an image.
        masks: Vec<PathBuf>,
    },
    /// An image and its mask differ in size.
    #[error("image {} is {}x{} but its mask {} is {}x{}; masks must have the image's size", image.display(), image_size.0, image_size.1, mask.display(), mask_size.0, mask_size.1)]
    SizeMismatch {
        /// The image.
        image: PathBuf,
        /// The mask.
        mask: PathBuf,
        /// Image `(width, height)`.
        image_size: (usize, usize),
        /// Mask `(width, height)`.
        mask_size: (usize, usize),
    },
    /// Mask values that the label mapping neither assigns to a class nor ignores.
    #[error("{}", unmapped_message(values, suggestion))]
    UnmappedValues {
        /// Each unmapped value, how many pixels hold it, and the first file it was seen in.
        values: Vec<(u8, u64, PathBuf)>,
        /// A mapping that would cover the values, when one can be guessed.
        suggestion: Option<String>,
    },
    /// A class has no pixels anywhere while stored values are being ignored: the classic 0/255
    /// binary mask read with classes 0/1, where every positive pixel silently becomes ignore.
    #[error("class `{class}` has no pixels in {} while stored value(s) {} are ignored; {hint}", location.display(), ignored.iter().map(|(v, n)| format!("{v} ({n} px)")).collect::<Vec<_>>().join(", "))]
    EmptyClass {
        /// The class without pixels.
        class: String,
        /// The dataset searched.
        location: PathBuf,
        /// Ignored stored values and their pixel counts.
        ignored: Vec<(u8, u64)>,
        /// How to fix the mapping.
        hint: String,
    },
    /// Labels made for a scene (vector layers burned onto it) could not be made.
    #[error("labels of scene {}: {reason}", scene.display())]
    Labels {
        /// The scene.
        scene: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// A split ended up with no samples.
    #[error("split `{split}` is empty (looked in {}); add samples or change the split ratio", location.display())]
    EmptySplit {
        /// The split's name.
        split: String,
        /// Where its samples were looked for.
        location: PathBuf,
    },
    /// There is too little data to give both `train` and `val` at least one sample.
    #[error("too little data to split {} into train and val: {reason}", location.display())]
    TooLittleData {
        /// The input (folder, list file or first scene).
        location: PathBuf,
        /// How much there is and what to change.
        reason: String,
    },
    /// A label raster's georeferencing does not match its scene's: another CRS, or pixels that
    /// land more than half a pixel away from the scene's.
    #[error("label raster {} does not line up with its scene {}: {reason}", mask.display(), scene.display())]
    Misaligned {
        /// The scene.
        scene: PathBuf,
        /// Its label raster.
        mask: PathBuf,
        /// The difference found and how to fix it.
        reason: String,
    },
    /// Images of one dataset differ in band count or sample type.
    #[error("{} has {found} but {} has {expected}; all images of a dataset must have the same bands and sample type", path.display(), first.display())]
    BandMismatch {
        /// The image that differs.
        path: PathBuf,
        /// What it has (e.g. `4 bands of u16`).
        found: String,
        /// The first image seen.
        first: PathBuf,
        /// What the first image has.
        expected: String,
    },
    /// A requested pixel window lies (partly) outside the raster.
    #[error("window x={x} y={y} w={w} h={h} is outside {} ({width}x{height})", path.display())]
    Window {
        /// The raster file.
        path: PathBuf,
        /// Left column.
        x: usize,
        /// Top row.
        y: usize,
        /// Width.
        w: usize,
        /// Height.
        h: usize,
        /// Raster width.
        width: usize,
        /// Raster height.
        height: usize,
    },
    /// An option has a value that cannot work.
    #[error("invalid option `{key}` = {value}: {reason}")]
    InvalidOption {
        /// The option's name.
        key: String,
        /// Its value, as given.
        value: String,
        /// Why it is invalid and what is expected.
        reason: String,
    },
    /// Input files conflict with each other or with what was asked (duplicate stems, a raster
    /// that cannot be stored in the requested format…).
    #[error("{}: {reason}", path.display())]
    InvalidInput {
        /// The file or directory at fault.
        path: PathBuf,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// `dataset.json` or a list file is malformed.
    #[error("malformed {}: {reason}", path.display())]
    Metadata {
        /// The file.
        path: PathBuf,
        /// What the parser reported.
        reason: String,
    },
    /// Reading by URL failed: the URL cannot be read, or its requests kept failing after every
    /// retry (the error names the URL and the byte range).
    #[error(transparent)]
    Remote(#[from] remote::RemoteError),
    /// A STAC item or item collection is malformed, or does not have what was asked of it.
    #[error("STAC item {item}: {reason}")]
    Stac {
        /// The item's id and the file or URL it came from.
        item: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// Assets to be stacked lie on different pixel grids.
    #[error(
        "the assets of STAC item {item} are on different grids: {}; stack assets of one \
         resolution, or set `resample_to` to the asset whose grid the others are resampled to \
         (nearest neighbour)",
        grids.join(", ")
    )]
    GridMismatch {
        /// The item's id and the file or URL it came from.
        item: String,
        /// Each asset with its size and pixel size (`red: 10980x10980 px of 10 x 10`).
        grids: Vec<String>,
    },
    /// A sample index past the end of a dataset.
    #[error("sample index {index} is out of range for a dataset of {len} samples")]
    IndexOutOfRange {
        /// The index asked for.
        index: usize,
        /// The dataset's length.
        len: usize,
    },
}

impl TilesError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        TilesError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn decode(path: &Path, reason: impl ToString) -> Self {
        TilesError::Decode {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn unsupported(path: &Path, reason: impl ToString) -> Self {
        TilesError::Unsupported {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn input(path: &Path, reason: impl ToString) -> Self {
        TilesError::InvalidInput {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        }
    }

    pub(crate) fn option(key: &str, value: impl ToString, reason: impl ToString) -> Self {
        TilesError::InvalidOption {
            key: key.to_string(),
            value: value.to_string(),
            reason: reason.to_string(),
        }
    }
}

/// At most ten paths, then a count, so a folder of 10 000 unpaired images stays readable.
fn list_paths(paths: &[PathBuf]) -> String {
    let mut s = String::new();
    for (i, p) in paths.iter().take(10).enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&p.display().to_string());
    }
    if paths.len() > 10 {
        let _ = write!(s, " and {} more", paths.len() - 10);
    }
    s
}

fn unmapped_message(values: &[(u8, u64, PathBuf)], suggestion: &Option<String>) -> String {
    let mut s = String::from("mask values not covered by the label mapping:");
    for (v, n, p) in values {
        let _ = write!(s, " {v} ({n} px, first in {})", p.display());
        s.push(';');
    }
    s.pop();
    match suggestion {
        Some(hint) => {
            let _ = write!(s, "; {hint}");
        }
        None => s.push_str("; add them to a class or to `ignore`"),
    }
    s
}
