//! Scene splits that cannot be empty or leak (issue #13, items 3 and 4): val gets exactly its
//! share of 2×2-tile blocks, no val pixel is in a train tile, and label rasters must line up
//! with their scenes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tiles::{
    GeoRef, LabelMap, Raster, RasterData, SceneOptions, TilesError, prepare_scenes, read_image,
    write_geotiff, write_mask_png,
};

use crate::common::{self, u16_raster};

/// A 30 m grid in UTM 33N (EPSG:32633), like a Landsat clip.
fn utm33(x0: f64, y0: f64, pixel: f64) -> GeoRef {
    GeoRef {
        transform: [x0, pixel, 0.0, y0, 0.0, -pixel],
        geo_key_directory: Some(vec![
            1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32633,
        ]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: Some(0.0),
    }
}

/// Writes a `w × h` 3-band u16 scene and its 0/1 label raster (GeoTIFF with `mask_geo`, or PNG
/// when `None`) into `dir`; returns their paths.
fn scene_pair(
    dir: &Path,
    (w, h): (usize, usize),
    geo: &GeoRef,
    mask_geo: Option<&GeoRef>,
) -> (PathBuf, PathBuf) {
    let scene = dir.join("LC09_clip.tif");
    write_geotiff(&scene, &u16_raster(w, h, 3, 7), Some(geo)).unwrap();
    let labels: Vec<u8> = (0..w * h).map(|i| ((i % w) / 50 % 2) as u8).collect();
    let mask = match mask_geo {
        Some(g) => {
            let p = dir.join("LC09_labels.tif");
            let r = Raster::new(w, h, 1, RasterData::U8(labels)).unwrap();
            write_geotiff(&p, &r, Some(g)).unwrap();
            p
        }
        None => {
            let p = dir.join("LC09_labels.png");
            write_mask_png(&p, &tiles::Mask::new(w, h, labels).unwrap()).unwrap();
            p
        }
    };
    (scene, mask)
}

fn options(scene: &Path, mask: &Path, out: &Path) -> SceneOptions {
    let mut o = SceneOptions::new(
        vec![scene.to_path_buf()],
        vec![mask.to_path_buf()],
        out,
        LabelMap::identity(&["other", "crop"]),
    );
    o.tile_size = 128;
    o.overlap = 16;
    o
}

/// The pixel rectangle `(x0, y0, x1, y1)` of a written tile in the scene, from the tile file's
/// own georeferencing and size (not from the manifest).
fn rect_from_file(out: &Path, split: &str, id: &str, scene: &GeoRef) -> (i64, i64, i64, i64) {
    let (img, g) = read_image(&out.join("images").join(split).join(format!("{id}.tif"))).unwrap();
    let t = g.unwrap().transform;
    let px = scene.transform[1];
    let x0 = ((t[0] - scene.transform[0]) / px).round() as i64;
    let y0 = ((scene.transform[3] - t[3]) / px).round() as i64;
    (x0, y0, x0 + img.width as i64, y0 + img.height as i64)
}

fn intersects(a: (i64, i64, i64, i64), b: (i64, i64, i64, i64)) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// Regression: a 603×627 Landsat scene at `--tile-size 128 --overlap 16` failed with
/// "split `val` is empty" at the default ratio.
#[test]
fn landsat_clip_at_128_16_gets_exactly_its_val_blocks_and_no_leak() {
    let d = tempfile::tempdir().unwrap();
    let geo = utm33(355_000.0, 4_650_000.0, 30.0);
    let (scene, mask) = scene_pair(d.path(), (603, 627), &geo, Some(&geo));
    let out = d.path().join("out");
    let report = prepare_scenes(&options(&scene, &mask, &out)).unwrap();

    // Stride 112, plus a window flush with the far edge (603 - 128, 627 - 128).
    let xs = [0, 112, 224, 336, 448, 475];
    let ys = [0, 112, 224, 336, 448, 499];
    let block = |x: usize, y: usize| {
        let col = xs.iter().position(|&v| v == x).unwrap();
        let row = ys.iter().position(|&v| v == y).unwrap();
        (col / 2, row / 2)
    };
    let tiles = &report.meta.tiles;
    let val: Vec<_> = tiles.iter().filter(|t| t.split == "val").collect();
    let train: Vec<_> = tiles.iter().filter(|t| t.split == "train").collect();
    assert!(!val.is_empty() && !train.is_empty());
    assert_eq!(val.len() + train.len(), tiles.len());

    // 6 × 6 tiles make 9 blocks; val gets ceil(0.2 × 9) = 2 of them, whole.
    let val_blocks: BTreeSet<_> = val.iter().map(|t| block(t.x, t.y)).collect();
    assert_eq!(val_blocks.len(), 2);
    assert_eq!(val.len(), 2 * 4);
    assert!(train.iter().all(|t| !val_blocks.contains(&block(t.x, t.y))));

    // No val pixel in any train tile: rectangles from the files' georeferencing.
    let rect = |t: &tiles::TileRecord| rect_from_file(&out, &t.split, &t.id, &geo);
    for v in &val {
        assert_eq!(
            rect(v),
            (v.x as i64, v.y as i64, v.x as i64 + 128, v.y as i64 + 128)
        );
        for t in &train {
            assert!(!intersects(rect(v), rect(t)), "{} overlaps {}", v.id, t.id);
        }
    }
    // Every grid tile missing from the manifest was a train tile sharing pixels with val.
    let written: BTreeSet<_> = tiles.iter().map(|t| (t.x, t.y)).collect();
    let missing: Vec<_> = ys
        .iter()
        .flat_map(|&y| xs.iter().map(move |&x| (x, y)))
        .filter(|p| !written.contains(p))
        .collect();
    assert_eq!(report.skipped_tiles, 0);
    assert_eq!(report.dropped_tiles, missing.len());
    assert!(report.dropped_tiles > 0);
    for &(x, y) in &missing {
        let r = (x as i64, y as i64, x as i64 + 128, y as i64 + 128);
        assert!(val.iter().any(|v| intersects(rect(v), r)), "({x}, {y})");
    }
    assert!(
        report
            .to_string()
            .contains(&format!("{} train tiles dropped", report.dropped_tiles)),
        "{report}"
    );
    let on_disk = std::fs::read_dir(out.join("images/train")).unwrap().count();
    assert_eq!(on_disk, train.len());
    assert_eq!(report.meta.splits["val"], val.len());

    // Deterministic by seed.
    let again = prepare_scenes(&options(&scene, &mask, &d.path().join("again"))).unwrap();
    assert_eq!(again.meta.tiles, *tiles);
}

#[test]
fn val_fraction_of_blocks_is_exact_for_every_ratio() {
    let d = tempfile::tempdir().unwrap();
    // No overlap: 8 × 6 tiles of 32 px, 4 × 3 = 12 blocks.
    let geo = utm33(500_000.0, 4_000_000.0, 10.0);
    let (scene, mask) = scene_pair(d.path(), (256, 192), &geo, Some(&geo));
    for (i, ratio) in [0.05, 0.2, 0.25, 0.5, 0.7, 0.95].into_iter().enumerate() {
        let mut o = options(&scene, &mask, &d.path().join(format!("out{i}")));
        o.tile_size = 32;
        o.overlap = 0;
        o.val_ratio = ratio;
        o.seed = i as u64;
        let r = prepare_scenes(&o).unwrap();
        let blocks = |split: &str| {
            r.meta
                .tiles
                .iter()
                .filter(|t| t.split == split)
                .map(|t| (t.x / 64, t.y / 64))
                .collect::<BTreeSet<_>>()
        };
        let expect = ((ratio * 12.0_f64).ceil() as usize).clamp(1, 11);
        assert_eq!(blocks("val").len(), expect, "ratio {ratio}");
        assert_eq!(blocks("train").len(), 12 - expect, "ratio {ratio}");
        assert_eq!(r.dropped_tiles, 0, "tiles without overlap share no pixels");
    }
}

#[test]
fn labels_off_by_more_than_half_a_pixel_or_in_another_crs_are_errors() {
    let d = tempfile::tempdir().unwrap();
    let geo = utm33(355_000.0, 4_650_000.0, 30.0);
    let run = |mask_geo: &GeoRef, name: &str| {
        let dir = d.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let (scene, mask) = scene_pair(&dir, (160, 144), &geo, Some(mask_geo));
        let mut o = options(&scene, &mask, &dir.join("out"));
        o.tile_size = 32;
        (prepare_scenes(&o), scene, mask)
    };

    // Shifted 3 pixels east: the scene's corner is at label column -3.
    let (r, scene, mask) = run(&utm33(355_090.0, 4_650_000.0, 30.0), "east");
    let err = r.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TilesError::Misaligned { .. }), "{msg}");
    assert!(
        msg.contains(&scene.display().to_string()) && msg.contains(&mask.display().to_string()),
        "{msg}"
    );
    assert!(msg.contains("-3.00") && msg.contains("gdalwarp"), "{msg}");
    assert!(!d.path().join("east/out/images").exists());

    // A third of a pixel is within tolerance.
    let (r, ..) = run(&utm33(355_010.0, 4_649_990.0, 30.0), "third");
    let r = r.unwrap();
    assert!(r.notes.is_empty(), "{:?}", r.notes);

    // 30.1 m labels drift 160 × 0.1 / 30.1 = 0.53 px by the far corner.
    let (r, ..) = run(&utm33(355_000.0, 4_650_000.0, 30.1), "size");
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("pixel size") && msg.contains("30.1"), "{msg}");

    // Same grid, UTM 34N.
    let mut other = geo.clone();
    other.geo_key_directory = Some(vec![
        1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32634,
    ]);
    let (r, scene, mask) = run(&other, "crs");
    let msg = r.unwrap_err().to_string();
    assert!(
        msg.contains("ProjectedCSTypeGeoKey")
            && msg.contains("32634")
            && msg.contains("32633")
            && msg.contains(&scene.display().to_string())
            && msg.contains(&mask.display().to_string()),
        "{msg}"
    );
    assert!(msg.contains("-t_srs EPSG:32633"), "{msg}");

    // Geographic labels over a projected scene.
    let mut geographic = geo.clone();
    geographic.geo_key_directory = Some(vec![1, 1, 0, 1, 2048, 0, 1, 4326]);
    let (r, ..) = run(&geographic, "geographic");
    let msg = r.unwrap_err().to_string();
    assert!(msg.contains("GTModelTypeGeoKey"), "{msg}");
}

#[test]
fn labels_without_georeferencing_are_accepted_at_the_same_size_with_a_note() {
    let d = tempfile::tempdir().unwrap();
    let geo = utm33(355_000.0, 4_650_000.0, 30.0);
    let (scene, mask) = scene_pair(d.path(), (160, 144), &geo, None);
    let mut o = options(&scene, &mask, &d.path().join("out"));
    o.tile_size = 32;
    let r = prepare_scenes(&o).unwrap();
    assert_eq!(r.notes.len(), 1);
    assert!(
        r.notes[0].contains("LC09_labels.png") && r.notes[0].contains("no georeferencing"),
        "{:?}",
        r.notes
    );
    assert!(r.to_string().starts_with("note: "), "{r}");

    // At another size it is still an error naming both files.
    write_mask_png(&mask, &common::mask_of(160, 140, &[0, 1])).unwrap();
    std::fs::remove_dir_all(d.path().join("out")).unwrap();
    let msg = prepare_scenes(&o).unwrap_err().to_string();
    assert!(
        msg.contains("LC09_clip.tif")
            && msg.contains("LC09_labels.png")
            && msg.contains("160x144")
            && msg.contains("160x140"),
        "{msg}"
    );
}

#[test]
fn too_many_shared_pixels_leave_no_train_tile_and_say_what_to_change() {
    let d = tempfile::tempdir().unwrap();
    let geo = utm33(500_000.0, 4_000_000.0, 10.0);
    // 96 px at tile 64 / overlap 48: origins 0, 16, 32 in both axes, 2 × 2 blocks, and every
    // tile shares pixels with every other.
    let (scene, mask) = scene_pair(d.path(), (96, 96), &geo, Some(&geo));
    let mut o = options(&scene, &mask, &d.path().join("out"));
    o.tile_size = 64;
    o.overlap = 48;
    o.val_ratio = 0.75;
    let err = prepare_scenes(&o).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TilesError::TooLittleData { .. }), "{msg}");
    assert!(msg.contains("--overlap"), "{msg}");
}

#[test]
fn scenes_sharing_a_file_stem_are_an_error() {
    let d = tempfile::tempdir().unwrap();
    let geo = utm33(500_000.0, 4_000_000.0, 10.0);
    for sub in ["a", "b"] {
        std::fs::create_dir_all(d.path().join(sub)).unwrap();
        scene_pair(&d.path().join(sub), (64, 64), &geo, Some(&geo));
    }
    let mut o = SceneOptions::new(
        vec![
            d.path().join("a/LC09_clip.tif"),
            d.path().join("b/LC09_clip.tif"),
        ],
        vec![
            d.path().join("a/LC09_labels.tif"),
            d.path().join("b/LC09_labels.tif"),
        ],
        d.path().join("out"),
        LabelMap::identity(&["other", "crop"]),
    );
    o.tile_size = 32;
    let msg = prepare_scenes(&o).unwrap_err().to_string();
    assert!(msg.contains("same file stem"), "{msg}");
}

/// The progress hook hears each scene's two passes in order (survey, then tiling), ending at
/// the total a progress bar was given.
#[test]
fn progress_hook_hears_both_passes_of_each_scene() {
    let d = tempfile::tempdir().unwrap();
    let geo = utm33(355_000.0, 4_650_000.0, 30.0);
    let (scene, mask) = scene_pair(d.path(), (300, 300), &geo, Some(&geo));
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut opts = options(&scene, &mask, &d.path().join("out"));
    opts.progress = tiles::ProgressHook(Some({
        let heard = heard.clone();
        std::sync::Arc::new(move |p: tiles::SceneProgress| {
            heard.lock().unwrap().push((p.done, p.total))
        })
    }));
    prepare_scenes(&opts).unwrap();
    assert_eq!(*heard.lock().unwrap(), vec![(1, 2), (2, 2)]);
}
