//! Nodata end to end in `prepare` (issue #13, item 2): a pixel that is nodata in every band
//! (the GeoTIFF's `GDAL_NODATA`, or the `nodata` option overriding it) is ignored in the written
//! masks whatever the labels hold there, and stays out of the band statistics; a pixel nodata in
//! only some bands is an ordinary pixel.

use std::fs::File;
use std::path::{Path, PathBuf};

use tiles::{
    BandStats, DatasetMeta, FolderOptions, GeoRef, LabelMap, Mask, Raster, RasterData,
    SceneOptions, SegDataset, StatsAccumulator, TilesError, prepare_folder, prepare_scenes,
    write_geotiff, write_mask_png,
};

use crate::common::noise;

const BORDER: usize = 10;

fn utm(nodata: Option<f64>) -> GeoRef {
    GeoRef {
        transform: [300_000.0, 30.0, 0.0, 5_000_000.0, 0.0, -30.0],
        geo_key_directory: Some(vec![1, 1, 0, 2, 1024, 0, 1, 1, 3072, 0, 1, 32633]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata,
    }
}

fn on_border(w: usize, h: usize, i: usize) -> bool {
    let (x, y) = (i % w, i / w);
    x < BORDER || y < BORDER || x >= w - BORDER || y >= h - BORDER
}

/// A 3-band u16 scene: 0 in every band on a `BORDER`-pixel frame, values 1..=4000 inside,
/// except that every 7th inside pixel has one band at 0 (nodata in one band only: valid).
fn framed_scene(w: usize, h: usize, seed: u64) -> Raster {
    let n = noise(seed, w * h * 3);
    let data = (0..w * h * 3)
        .map(|s| {
            let (i, b) = (s / 3, s % 3);
            if on_border(w, h, i) || (i % 7 == 0 && b == i % 3) {
                0
            } else {
                (n[s] % 4000 + 1) as u16
            }
        })
        .collect();
    Raster::new(w, h, 3, RasterData::U16(data)).unwrap()
}

/// Labels 0/1 in stripes, and `under_border` on the frame.
fn framed_labels(w: usize, h: usize, under_border: u8) -> Mask {
    let data = (0..w * h)
        .map(|i| {
            if on_border(w, h, i) {
                under_border
            } else {
                ((i % w) / 20 % 2) as u8
            }
        })
        .collect();
    Mask::new(w, h, data).unwrap()
}

/// Population mean, std, min, max and count per band over the pixels not 0 in every band,
/// computed directly from the samples.
fn direct_stats(pixels: &[Vec<u16>]) -> Vec<(f64, f64, f64, f64, u64)> {
    (0..3)
        .map(|b| {
            let v: Vec<f64> = pixels
                .iter()
                .filter(|px| px.iter().any(|&s| s != 0))
                .map(|px| px[b] as f64)
                .collect();
            let n = v.len() as f64;
            let mean = v.iter().sum::<f64>() / n;
            let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
            let min = v.iter().copied().fold(f64::INFINITY, f64::min);
            let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (mean, var.sqrt(), min, max, v.len() as u64)
        })
        .collect()
}

fn assert_stats(got: &[BandStats], want: &[(f64, f64, f64, f64, u64)]) {
    assert_eq!(got.len(), want.len());
    for (b, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!((g.count, g.min, g.max), (w.4, w.2, w.3), "band {b}");
        assert!(
            (g.mean - w.0).abs() < 1e-9 * w.0,
            "band {b}: {g:?} vs {w:?}"
        );
        assert!((g.std - w.1).abs() < 1e-6 * w.1, "band {b}: {g:?} vs {w:?}");
    }
}

/// The pixels (3 samples each) of the `t × t` window at `(x, y)` of `r`.
fn window(r: &Raster, x: usize, y: usize, t: usize) -> Vec<Vec<u16>> {
    let RasterData::U16(v) = &r.data else {
        panic!("u16 scene")
    };
    let mut out = Vec::new();
    for row in y..y + t {
        for col in x..x + t {
            let i = (row * r.width + col) * 3;
            out.push(v[i..i + 3].to_vec());
        }
    }
    out
}

/// An 8-bit grey PNG read with the `image` crate, not with tiles.
fn png_values(path: &Path) -> Vec<u8> {
    image::open(path).unwrap().into_luma8().into_raw()
}

/// The `GDAL_NODATA` (tag 42113) string of a TIFF, read with the `tiff` crate directly.
fn gdal_nodata_tag(path: &Path) -> Option<String> {
    let mut dec = tiff::decoder::Decoder::new(File::open(path).unwrap()).unwrap();
    dec.find_tag(tiff::tags::Tag::Unknown(42113))
        .unwrap()
        .map(|v| v.into_string().unwrap().trim_end_matches('\0').to_string())
}

const W: usize = 192;
const H: usize = 128;
const T: usize = 64;

fn scene_files(dir: &Path, nodata: Option<f64>, under_border: u8) -> (Raster, PathBuf, PathBuf) {
    let scene = framed_scene(W, H, 5);
    let (sp, mp) = (dir.join("scene.tif"), dir.join("labels.png"));
    write_geotiff(&sp, &scene, Some(&utm(nodata))).unwrap();
    write_mask_png(&mp, &framed_labels(W, H, under_border)).unwrap();
    (scene, sp, mp)
}

fn scene_options(scene: &Path, labels: &Path, out: &Path) -> SceneOptions {
    let mut o = SceneOptions::new(
        vec![scene.to_path_buf()],
        vec![labels.to_path_buf()],
        out,
        LabelMap::identity(&["other", "crop"]),
    );
    o.tile_size = T;
    o.max_empty_fraction = 0.9;
    o
}

/// Checks every written tile mask against the scene: 255 exactly where the scene is nodata in
/// every band (the frame), the label elsewhere; returns the train tiles' pixels.
fn check_scene_tiles(out: &Path, scene: &Raster, labels: &Mask, nodata_tag: &str) -> Vec<Vec<u16>> {
    let meta = DatasetMeta::load(out).unwrap().unwrap();
    assert!(!meta.tiles.is_empty());
    let mut train = Vec::new();
    for t in &meta.tiles {
        let mask = png_values(&out.join(format!("masks/{}/{}.png", t.split, t.id)));
        for (k, &v) in mask.iter().enumerate() {
            let i = (t.y + k / T) * W + t.x + k % T;
            let want = if on_border(W, H, i) {
                255
            } else {
                labels.data[i]
            };
            assert_eq!(v, want, "tile {} pixel {k}", t.id);
        }
        let tif = out.join(format!("images/{}/{}.tif", t.split, t.id));
        assert_eq!(gdal_nodata_tag(&tif).as_deref(), Some(nodata_tag));
        if t.split == "train" {
            train.extend(window(scene, t.x, t.y, T));
        }
    }
    assert_stats(&meta.band_stats, &direct_stats(&train));
    train
}

#[test]
fn scene_nodata_from_the_tag_is_ignored_and_left_out_of_the_stats() {
    let d = tempfile::tempdir().unwrap();
    // 7 under the frame is not a class: nodata pixels need no mapping.
    let (scene, sp, mp) = scene_files(d.path(), Some(0.0), 7);
    let out = d.path().join("out");
    let report = prepare_scenes(&scene_options(&sp, &mp, &out)).unwrap();
    let labels = framed_labels(W, H, 7);
    let train = check_scene_tiles(&out, &scene, &labels, "0");
    // The frame really is in the train tiles, and so are pixels with one band at 0.
    assert!(train.iter().any(|px| px.iter().all(|&s| s == 0)));
    assert!(
        train
            .iter()
            .any(|px| px.contains(&0) && px.iter().any(|&s| s != 0))
    );
    assert!(
        report.notes.iter().any(|n| n.contains("mask value 255")),
        "{:?}",
        report.notes
    );
}

#[test]
fn scene_nodata_option_overrides_the_tag() {
    let d = tempfile::tempdir().unwrap();
    // No tag: the option alone makes the frame nodata, and the tiles declare it.
    let (scene, sp, mp) = scene_files(d.path(), None, 7);
    let out = d.path().join("untagged");
    let mut o = scene_options(&sp, &mp, &out);
    o.nodata = Some(0.0);
    prepare_scenes(&o).unwrap();
    check_scene_tiles(&out, &scene, &framed_labels(W, H, 7), "0");

    // Neither tag nor option: no nodata, so the 7s under the frame are unmapped labels.
    let err = prepare_scenes(&scene_options(&sp, &mp, &d.path().join("plain"))).unwrap_err();
    assert!(
        matches!(&err, TilesError::UnmappedValues { values, .. } if values[0].0 == 7),
        "{err}"
    );

    // A tag of 0 overridden by another value: the frame is ordinary class-0 ground again.
    let d2 = tempfile::tempdir().unwrap();
    let (_, sp, mp) = scene_files(d2.path(), Some(0.0), 0);
    let out = d2.path().join("out");
    let mut o = scene_options(&sp, &mp, &out);
    o.nodata = Some(65535.0);
    prepare_scenes(&o).unwrap();
    let meta = DatasetMeta::load(&out).unwrap().unwrap();
    for t in &meta.tiles {
        let mask = png_values(&out.join(format!("masks/{}/{}.png", t.split, t.id)));
        assert!(!mask.contains(&255), "tile {}", t.id);
        let tif = out.join(format!("images/{}/{}.tif", t.split, t.id));
        assert_eq!(gdal_nodata_tag(&tif).as_deref(), Some("65535"));
    }
}

/// Two GeoTIFF images with PNG masks in flat folders: `a` has the nodata frame, `b` none.
fn folder(root: &Path, nodata: Option<f64>, under_border: u8) -> [(Raster, Mask); 2] {
    let (w, h) = (48, 40);
    let a = (framed_scene(w, h, 1), framed_labels(w, h, under_border));
    let mut b = (framed_scene(w, h, 2), framed_labels(w, h, 0));
    // `b`: no pixel nodata in every band.
    if let RasterData::U16(v) = &mut b.0.data {
        for px in v.chunks_exact_mut(3) {
            px[1] = px[1].max(9);
        }
    }
    std::fs::create_dir_all(root.join("images")).unwrap();
    std::fs::create_dir_all(root.join("masks")).unwrap();
    for (name, (img, mask)) in [("a", &a), ("b", &b)] {
        write_geotiff(
            &root.join(format!("images/{name}.tif")),
            img,
            Some(&utm(nodata)),
        )
        .unwrap();
        write_mask_png(&root.join(format!("masks/{name}.png")), mask).unwrap();
    }
    [a, b]
}

fn split_of(out: &Path, name: &str) -> &'static str {
    if out.join(format!("images/train/{name}.tif")).is_file() {
        "train"
    } else {
        "val"
    }
}

#[test]
fn folder_nodata_masks_are_rewritten_with_a_free_ignore_value() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    let pairs = folder(r, Some(0.0), 9);
    // 255 is a class here, so the nodata pixels need another ignore value.
    let labels = LabelMap::new(&[("outer", &[0]), ("rice_paddy", &[1, 255])]);
    let out = r.join("out");
    let mut o = FolderOptions::new(r.join("images"), r.join("masks"), &out, labels);
    o.hard_link = false;
    let report = prepare_folder(&o).unwrap();
    let (w, h) = (48, 40);
    let frame = (0..w * h).filter(|&i| on_border(w, h, i)).count() as u64;
    let audit = report.audit.as_ref().unwrap();
    let nodata: u64 = audit.splits.values().map(|s| s.nodata_pixels).sum();
    assert_eq!(nodata, frame);
    assert!(
        report.notes.iter().any(|n| n.contains("mask value 254")),
        "{:?}",
        report.notes
    );

    // `a`'s mask holds 254 on the frame, its labels elsewhere; `b`'s is the source mask.
    let a_mask = png_values(&out.join(format!("masks/{}/a.png", split_of(&out, "a"))));
    for (i, &v) in a_mask.iter().enumerate() {
        let want = if on_border(w, h, i) {
            254
        } else {
            pairs[0].1.data[i]
        };
        assert_eq!(v, want, "pixel {i}");
    }
    let b_mask = png_values(&out.join(format!("masks/{}/b.png", split_of(&out, "b"))));
    assert_eq!(b_mask, pairs[1].1.data);

    // dataset.json ignores 254, so loading maps the frame to ignore.
    let meta = DatasetMeta::load(&out).unwrap().unwrap();
    assert_eq!(meta.labels.ignore, [255, 254]);
    let ds = SegDataset::open(&out, split_of(&out, "a")).unwrap();
    let i = ds.ids().position(|id| id == "a").unwrap();
    let mask = ds.get(i).unwrap().mask.unwrap();
    for (k, &c) in mask.data.iter().enumerate() {
        assert_eq!(c == Mask::IGNORE, on_border(w, h, k), "pixel {k}");
    }

    // Train band stats over the train image's valid pixels only.
    let train = if split_of(&out, "a") == "train" {
        &pairs[0].0
    } else {
        &pairs[1].0
    };
    assert_stats(&meta.band_stats, &direct_stats(&all_pixels(train)));
    // A prepared dataset audits clean (the frame is ignored, not unmapped).
    tiles::audit_prepared(&out).unwrap();
}

/// Every pixel of `r` (3 samples each).
fn all_pixels(r: &Raster) -> Vec<Vec<u16>> {
    let RasterData::U16(v) = &r.data else {
        panic!("u16")
    };
    v.chunks_exact(3).map(|p| p.to_vec()).collect()
}

#[test]
fn folder_nodata_option_overrides_the_tag() {
    let d = tempfile::tempdir().unwrap();
    let r = d.path();
    let pairs = folder(r, None, 0);
    let labels = LabelMap::identity(&["other", "crop"]);
    let out = r.join("out");
    let mut o = FolderOptions::new(r.join("images"), r.join("masks"), &out, labels.clone());
    o.nodata = Some(0.0);
    let report = prepare_folder(&o).unwrap();
    let (w, h) = (48, 40);
    let a_mask = png_values(&out.join(format!("masks/{}/a.png", split_of(&out, "a"))));
    for (i, &v) in a_mask.iter().enumerate() {
        let want = if on_border(w, h, i) {
            255
        } else {
            pairs[0].1.data[i]
        };
        assert_eq!(v, want, "pixel {i}");
    }
    let train = if split_of(&out, "a") == "train" { 0 } else { 1 };
    assert_stats(
        &report.meta.band_stats,
        &direct_stats(&all_pixels(&pairs[train].0)),
    );

    // Without tag or option the frame is ordinary class-0 ground.
    let out = r.join("plain");
    let o = FolderOptions::new(r.join("images"), r.join("masks"), &out, labels);
    let report = prepare_folder(&o).unwrap();
    let nodata: u64 = report
        .audit
        .unwrap()
        .splits
        .values()
        .map(|s| s.nodata_pixels)
        .sum();
    assert_eq!(nodata, 0);
    let a_mask = png_values(&out.join(format!("masks/{}/a.png", split_of(&out, "a"))));
    assert_eq!(a_mask, pairs[0].1.data);
}

#[test]
fn stats_skip_only_pixels_nodata_in_every_band() {
    // Pixels: (0, 0) nodata; (0, 5) nodata in band 0 only, so its 0 counts; (3, 4).
    let r = Raster::new(3, 1, 2, RasterData::U8(vec![0, 0, 0, 5, 3, 4])).unwrap();
    let mut acc = StatsAccumulator::new(2, tiles::SampleKind::U8);
    acc.add(&r, Some(0.0));
    let s = acc.finish();
    assert_eq!(
        (s[0].count, s[0].min, s[0].max, s[0].mean),
        (2, 0.0, 3.0, 1.5)
    );
    assert_eq!(
        (s[1].count, s[1].min, s[1].max, s[1].mean),
        (2, 4.0, 5.0, 4.5)
    );

    // The same rule for floats, NaN nodata included.
    let f = Raster::new(
        3,
        1,
        2,
        RasterData::F32(vec![f32::NAN, f32::NAN, f32::NAN, 2.0, 1.0, 4.0]),
    )
    .unwrap();
    assert_eq!(tiles::nodata_pixels(&f, f64::NAN), [true, false, false]);
    let mut acc = StatsAccumulator::new(2, tiles::SampleKind::F32);
    acc.add(&f, Some(f64::NAN));
    let s = acc.finish();
    assert_eq!((s[0].count, s[1].count), (1, 2));
    assert_eq!((s[0].mean, s[1].mean), (1.0, 3.0));
}

#[test]
fn gdal_nodata_is_written_as_gdal_does_and_read_back() {
    let d = tempfile::tempdir().unwrap();
    let r = Raster::new(2, 2, 1, RasterData::F32(vec![0.5; 4])).unwrap();
    for (nd, text) in [
        (f64::NAN, "nan"),
        (255.0, "255"),
        (-9999.0, "-9999"),
        (0.5, "0.5"),
        (f64::NEG_INFINITY, "-inf"),
    ] {
        let p = d.path().join(format!("{text}.tif"));
        write_geotiff(&p, &r, Some(&utm(Some(nd)))).unwrap();
        assert_eq!(gdal_nodata_tag(&p).as_deref(), Some(text));
        let back = tiles::read_image(&p).unwrap().1.unwrap().nodata.unwrap();
        assert!(
            back == nd || (nd.is_nan() && back.is_nan()),
            "{text}: {back}"
        );
    }
}
