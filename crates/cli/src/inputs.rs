//! What `segfit predict` reads: the scenes `--input` or a `--inputs` manifest names (local
//! images and folders, GeoTIFFs by URL, STAC items), the `--shard` of them this task takes,
//! the names their outputs get, and the checks of STAC `--assets` against the model.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, Result, bail, ensure};
use augment::SegformerProcessor;
use tiles::{
    ChunkedReader, GeoRef, Raster, Remote, SceneInput, StackOptions, WindowSource, is_tiff, is_url,
};

/// One scene to predict.
pub struct Scene {
    /// How messages and reports name it: the path, the URL, or the STAC item and its file.
    pub label: String,
    /// The stem of its outputs (`<name>.tif`, `<name>.geojson`…): the file stem or item id.
    pub name: String,
    source: Source,
}

enum Source {
    /// A file on disk: PNG, JPEG or (Geo)TIFF.
    File(PathBuf),
    /// A GeoTIFF by URL, or a STAC item (its assets local or remote).
    Input(SceneInput),
}

impl Scene {
    fn file(path: PathBuf) -> Self {
        Self {
            label: path.display().to_string(),
            name: crate::output::stem_of(&path),
            source: Source::File(path),
        }
    }

    fn input(input: SceneInput) -> Self {
        match input {
            SceneInput::Raster(location) if !is_url(&location) => {
                Self::file(PathBuf::from(location))
            }
            SceneInput::Raster(location) => Self {
                name: input_name(&location),
                label: location.clone(),
                source: Source::Input(SceneInput::Raster(location)),
            },
            SceneInput::Stac(item) => {
                let label = format!("STAC item `{}` ({})", item.id(), item.origin());
                let input = SceneInput::Stac(item);
                Self {
                    label,
                    name: input.name(),
                    source: Source::Input(input),
                }
            }
        }
    }

    /// Whether it is read a window at a time (a GeoTIFF, local or by URL, or a STAC stack)
    /// rather than decoded whole (PNG, JPEG).
    pub fn streams(&self) -> bool {
        match &self.source {
            Source::File(path) => is_tiff(path),
            Source::Input(_) => true,
        }
    }

    /// Whether it is a STAC item.
    pub fn is_stac(&self) -> bool {
        matches!(self.source, Source::Input(SceneInput::Stac(_)))
    }

    /// The local file, when it is one.
    pub fn path(&self) -> Option<&Path> {
        match &self.source {
            Source::File(path) => Some(path),
            Source::Input(_) => None,
        }
    }

    /// Opens it for windowed reads (headers only: no pixels yet). A STAC item's assets are
    /// stacked as `stack` says.
    pub fn open(&self, stack: &StackOptions, remote: &Remote) -> Result<Box<dyn WindowSource>> {
        match &self.source {
            Source::File(path) => {
                let reader = ChunkedReader::open(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                Ok(Box::new(reader))
            }
            Source::Input(input @ SceneInput::Stac(_)) => match input.open(stack, remote) {
                Ok(reader) => Ok(reader),
                // The library names its option; here it is a flag.
                Err(tiles::TilesError::GridMismatch { grids, .. }) => bail!(
                    "{}: --assets {} lie on different grids: {}; add --resample-to ASSET (one \
                     of them: the others are resampled onto its grid, nearest neighbour), or \
                     pick assets of one resolution",
                    self.label,
                    stack.assets.join(","),
                    grids.join(", ")
                ),
                Err(e) => Err(e).with_context(|| {
                    format!("{}: --assets {}", self.label, stack.assets.join(","))
                }),
            },
            Source::Input(input) => input
                .open(stack, remote)
                .with_context(|| format!("reading {}", self.label)),
        }
    }
}

/// The output stem of a URL ([`SceneInput::name`]).
fn input_name(location: &str) -> String {
    SceneInput::Raster(location.to_string()).name()
}

/// Whether `arg` names a STAC file (`.json`, a URL's query left out).
fn is_json(arg: &str) -> bool {
    let name = arg.split(['?', '#']).next().unwrap_or(arg);
    name.to_ascii_lowercase().ends_with(".json")
}

/// The scenes one `--input` names: a local image or folder of images, a GeoTIFF by URL, or
/// the items of a STAC Item / ItemCollection (`.json`, path or URL). `flag` names the
/// argument in errors.
pub fn list_scenes(input: &str, flag: &str, remote: &Remote) -> Result<Vec<Scene>> {
    if is_url(input) || is_json(input) {
        let listed = SceneInput::list(input, remote).with_context(|| format!("{flag} {input}"))?;
        ensure!(
            !listed.is_empty(),
            "{flag} {input}: the STAC collection has no items"
        );
        return Ok(listed.into_iter().map(Scene::input).collect());
    }
    let path = Path::new(input);
    if path.is_file() {
        return Ok(vec![Scene::file(path.to_path_buf())]);
    }
    ensure!(
        path.is_dir(),
        "{flag} {input}: no such file or directory (nor an https://, s3://, gs:// or az:// URL)"
    );
    let files = tiles::list_images(path).with_context(|| format!("listing {input}"))?;
    ensure!(
        !files.is_empty(),
        "{flag} {input}: no PNG, JPEG or TIFF images in this folder"
    );
    Ok(files.into_iter().map(Scene::file).collect())
}

/// The scenes of a `--inputs` manifest: a STAC ItemCollection (`.json`), or a text file of
/// one path or URL per line (`#` comments and blank lines skipped; relative paths are
/// relative to the manifest's folder), each listed as [`list_scenes`] does.
pub fn read_manifest(manifest: &str, remote: &Remote) -> Result<Vec<Scene>> {
    if is_json(manifest) {
        return list_scenes(manifest, "--inputs", remote);
    }
    let text = if is_url(manifest) {
        let bytes = remote
            .read_all(manifest)
            .with_context(|| format!("--inputs {manifest}"))?;
        String::from_utf8(bytes)
            .map_err(|_| anyhow::anyhow!("--inputs {manifest}: not UTF-8 text"))?
    } else {
        std::fs::read_to_string(manifest).with_context(|| format!("--inputs {manifest}"))?
    };
    let mut scenes = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let entry = resolve(line, manifest);
        let listed = list_scenes(
            &entry,
            &format!("--inputs {manifest} line {}:", i + 1),
            remote,
        )?;
        scenes.extend(listed);
    }
    ensure!(
        !scenes.is_empty(),
        "--inputs {manifest}: lists no scenes (one path or URL per line; # starts a comment)"
    );
    Ok(scenes)
}

/// A manifest line as a path or URL: URLs and absolute paths as they are, relative ones
/// against the manifest's folder (a URL manifest's: the URL up to its last `/`).
fn resolve(line: &str, manifest: &str) -> String {
    if is_url(line) || Path::new(line).is_absolute() {
        return line.to_string();
    }
    if is_url(manifest) {
        let path = manifest.split(['?', '#']).next().unwrap_or(manifest);
        let folder = path.rsplit_once('/').map_or(path, |(folder, _)| folder);
        return format!("{folder}/{line}");
    }
    let folder = Path::new(manifest).parent().unwrap_or(Path::new(""));
    folder.join(line).to_string_lossy().into_owned()
}

/// Fails when two scenes would write the same outputs (`<out>/<name>.tif`…), naming both.
pub fn check_names(scenes: &[Scene]) -> Result<()> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    for s in scenes {
        if let Some(first) = seen.insert(&s.name, &s.label) {
            bail!(
                "{first} and {} both name their outputs `{}` (<name>.tif, …); rename one, or \
                 predict them into different --output folders",
                s.label,
                s.name
            );
        }
    }
    Ok(())
}

/// `--shard I/N`: the `I`-th of `N` shards, `I` counting from 0 (`JOB_COMPLETION_INDEX`,
/// `SLURM_ARRAY_TASK_ID` with `--array=0-(N-1)`). Scene `k` of the listed scenes (in manifest
/// order, after expanding folders and collections) belongs to shard `k mod N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// 0-based.
    pub index: usize,
    /// At least 1.
    pub count: usize,
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let usage = "expected I/N with 0 <= I < N, e.g. 0/4 (the index counts from 0)";
        let (i, n) = s.split_once('/').ok_or_else(|| format!("`{s}`: {usage}"))?;
        let (Ok(index), Ok(count)) = (i.trim().parse::<usize>(), n.trim().parse::<usize>()) else {
            return Err(format!("`{s}`: {usage}"));
        };
        if count == 0 || index >= count {
            return Err(format!(
                "`{s}`: {usage}; shards of {count} are numbered 0/{count} to {}/{count}",
                count.max(1) - 1
            ));
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    /// Whether scene `k` (0-based, in listing order) is this shard's.
    pub fn takes(&self, k: usize) -> bool {
        k % self.count == self.index
    }
}

/// The whole scene in memory, with its georeferencing: a local file decoded whole, or every
/// window of a URL's or STAC item's scene read as one.
pub fn read_whole(
    scene: &Scene,
    stack: &StackOptions,
    remote: &Remote,
) -> Result<(Raster, Option<GeoRef>)> {
    if let Some(path) = scene.path() {
        return tiles::read_image(path).with_context(|| format!("reading {}", path.display()));
    }
    let mut reader = scene.open(stack, remote)?;
    let (w, h) = (reader.width(), reader.height());
    let geo = reader.geo().cloned();
    let image = reader
        .read_window(0, 0, w, h)
        .with_context(|| format!("reading {}", scene.label))?;
    Ok((image, geo))
}

/// `--assets` goes with STAC items: each item needs it, and it picks nothing in a GeoTIFF.
pub fn check_assets(scenes: &[Scene], assets: &[String]) -> Result<()> {
    if let Some(item) = scenes.iter().find(|s| s.is_stac()) {
        ensure!(
            !assets.is_empty(),
            "{}: a STAC item's bands are its assets; name them in the model's band order with \
             --assets, by key or eo:bands common name (e.g. --assets red,green,blue,nir)",
            item.label
        );
    } else {
        ensure!(
            assets.is_empty(),
            "--assets {}: picks the assets of STAC items, but no input is one; give a STAC item \
             or collection (.json), or drop --assets (a run's data.bands picks the bands of \
             GeoTIFFs)",
            assets.join(",")
        );
    }
    Ok(())
}

/// The bands a STAC item's `--assets` stacked against what the model's preprocessing takes:
/// the bands a run's `data.bands` picks must exist, and the model must see as many bands as
/// it has channels (a run's preprocessing.json records them). Other scenes are checked where
/// they are read.
pub fn check_bands(
    scene: &Scene,
    stacked: usize,
    processor: &SegformerProcessor,
    channels: usize,
    assets: &[String],
) -> Result<()> {
    if !scene.is_stac() {
        return Ok(());
    }
    let given = format!(
        "{}: --assets {} stack {stacked} band(s)",
        scene.label,
        assets.join(",")
    );
    if let Some(picked) = &processor.band_indices
        && let Some(&bad) = picked.iter().find(|&&b| b >= stacked)
    {
        bail!(
            "{given}, but the run's preprocessing picks bands {picked:?} (data.bands, 0-based), \
             band {bad} among them; give the assets of the training images' bands, in their \
             order ({} or more)",
            picked.iter().max().map_or(0, |m| m + 1)
        );
    }
    let seen = processor.output_bands(stacked);
    ensure!(
        seen == channels,
        "{given}, but the model takes {channels} bands (its preprocessing records {channels}); \
         give {channels} assets in the training images' band order (e.g. --assets red,green,blue,nir)"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_a_list_exactly_once() {
        let shards: Vec<Shard> = (0..3).map(|i| format!("{i}/3").parse().unwrap()).collect();
        for k in 0..10 {
            assert_eq!(shards.iter().filter(|s| s.takes(k)).count(), 1);
        }
        assert!(shards[1].takes(4) && shards[1].takes(1) && !shards[1].takes(2));
        for bad in ["3/3", "1/0", "a/2", "2", "-1/2"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
    }

    #[test]
    fn manifests_skip_comments_and_resolve_relative_paths() {
        let dir = tempfile::tempdir().unwrap();
        let raster = tiles::Raster::new(2, 2, 1, tiles::RasterData::U8(vec![0; 4])).unwrap();
        std::fs::create_dir(dir.path().join("s")).unwrap();
        for n in ["a", "b"] {
            tiles::write_geotiff(&dir.path().join(format!("s/{n}.tif")), &raster, None).unwrap();
        }
        let manifest = dir.path().join("scenes.txt");
        std::fs::write(&manifest, "# scenes\n\ns/a.tif\n  s/b.tif  \n").unwrap();
        let remote = Remote::new(Default::default());
        let scenes = read_manifest(manifest.to_str().unwrap(), &remote).unwrap();
        let names: Vec<&str> = scenes.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(check_names(&scenes).is_ok());
        std::fs::write(&manifest, "s/a.tif\ns/../s/a.tif\n").unwrap();
        let twice = read_manifest(manifest.to_str().unwrap(), &remote).unwrap();
        let err = check_names(&twice).unwrap_err().to_string();
        assert!(err.contains("s/a.tif and") && err.contains("`a`"), "{err}");
        std::fs::write(&manifest, "# nothing\n").unwrap();
        assert!(read_manifest(manifest.to_str().unwrap(), &remote).is_err());
    }

    #[test]
    fn stacked_bands_are_checked_against_the_runs_band_selection_and_channels() {
        let dir = tempfile::tempdir().unwrap();
        let item = dir.path().join("item.json");
        let json = r#"{"type": "Feature", "id": "i", "assets": {"red": {"href": "r.tif"}}}"#;
        std::fs::write(&item, json).unwrap();
        let remote = Remote::new(Default::default());
        let scenes = list_scenes(item.to_str().unwrap(), "--input", &remote).unwrap();
        let assets: Vec<String> = ["red", "green", "blue"].map(String::from).to_vec();
        let run = SegformerProcessor {
            band_indices: Some(vec![3, 0, 1]),
            ..Default::default()
        };
        let err = check_bands(&scenes[0], 3, &run, 3, &assets)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--assets red,green,blue stack 3 band(s)")
                && err.contains("band 3 among them")
                && err.contains("4 or more"),
            "{err}"
        );
        assert!(check_bands(&scenes[0], 4, &run, 3, &assets).is_ok());
        let all = SegformerProcessor::default();
        let err = check_bands(&scenes[0], 3, &all, 4, &assets)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("takes 4 bands") && err.contains("give 4 assets"),
            "{err}"
        );
        assert!(check_bands(&scenes[0], 4, &all, 4, &assets).is_ok());
    }
}
