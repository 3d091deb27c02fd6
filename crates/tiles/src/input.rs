//! What a scene argument names: a GeoTIFF (a path or a URL) or the items of a STAC file, each
//! listed without reading pixels and opened as a [`WindowSource`] when its turn comes.

use std::path::Path;

use remote::Remote;

use crate::error::TilesError;
use crate::stac::{BandStack, StacItem, StackOptions, read_stac};
use crate::tiff_read::ChunkedReader;
use crate::window::WindowSource;

/// One scene named by an input: a GeoTIFF, or one item of a STAC file.
#[derive(Clone, Debug, PartialEq)]
pub enum SceneInput {
    /// A GeoTIFF by path or URL.
    Raster(String),
    /// A STAC item, its assets stacked by [`StackOptions`].
    Stac(Box<StacItem>),
}

impl SceneInput {
    /// Every scene `input` names: the items of a STAC Item or ItemCollection (a `.json` path
    /// or URL; read here, no pixels), else the one GeoTIFF it is.
    pub fn list(input: &str, remote: &Remote) -> Result<Vec<SceneInput>, TilesError> {
        // The name without a URL's query (a signed URL's token).
        let name = input.split(['?', '#']).next().unwrap_or(input);
        if name.to_ascii_lowercase().ends_with(".json") {
            let items = read_stac(input, remote)?;
            Ok(items
                .into_iter()
                .map(|i| SceneInput::Stac(Box::new(i)))
                .collect())
        } else {
            Ok(vec![SceneInput::Raster(input.to_string())])
        }
    }

    /// A name for the scene's outputs: the file's stem, or the item's id (`/` and `\` as `_`).
    pub fn name(&self) -> String {
        match self {
            SceneInput::Raster(location) => {
                let path = location.split(['?', '#']).next().unwrap_or(location);
                let file = path.rsplit(['/', '\\']).next().unwrap_or(path);
                Path::new(file)
                    .file_stem()
                    .map_or_else(|| file.to_string(), |s| s.to_string_lossy().into_owned())
            }
            SceneInput::Stac(item) => item.id().replace(['/', '\\'], "_"),
        }
    }

    /// Opens the scene: the GeoTIFF ([`ChunkedReader::open_location`]; `stack` is not used),
    /// or the item's assets stacked as `stack` says ([`BandStack::open`]).
    pub fn open(
        &self,
        stack: &StackOptions,
        remote: &Remote,
    ) -> Result<Box<dyn WindowSource>, TilesError> {
        Ok(match self {
            SceneInput::Raster(location) => {
                Box::new(ChunkedReader::open_location(location, remote)?)
            }
            SceneInput::Stac(item) => Box::new(BandStack::open(item, stack, remote)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_file_stems_or_item_ids() {
        let raster = |s: &str| SceneInput::Raster(s.to_string()).name();
        assert_eq!(raster("/data/T48PXS_B04.tif"), "T48PXS_B04");
        assert_eq!(raster("s3://bucket/a/scene.tiff"), "scene");
        assert_eq!(raster("https://host/x/B08.tif?sig=abc/def"), "B08");
        let dir = tempfile::tempdir().unwrap();
        let item = dir.path().join("item.JSON");
        let json = r#"{"type": "Feature", "id": "a/b", "assets": {"red": {"href": "r.tif"}}}"#;
        std::fs::write(&item, json).unwrap();
        let remote = Remote::new(Default::default());
        let listed = SceneInput::list(item.to_str().unwrap(), &remote).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].name(), "a_b");
        let tif = SceneInput::list("/data/x.tif", &remote).unwrap();
        assert_eq!(tif, vec![SceneInput::Raster("/data/x.tif".into())]);
    }
}
