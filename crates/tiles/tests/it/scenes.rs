//! Scenes → tiles: tile windows, georeferencing shifted to each tile, nodata skipping, the
//! manifest, and tiles that load back through `SegDataset`.

use tiles::{
    GeoRef, LabelMap, Mask, Raster, RasterData, SceneOptions, SegDataset, TiffOptions,
    prepare_scenes, read_image, write_geotiff_with,
};

use crate::common::{self, crop_u16, u16_raster};

#[test]
fn georeferenced_scene_tiles_keep_world_coordinates_and_pixels() {
    let d = tempfile::tempdir().unwrap();
    let (w, h) = (200, 150);
    let scene = u16_raster(w, h, 4, 42);
    let geo = GeoRef {
        transform: [420_000.0, 3.0, 0.0, 1_650_000.0, 0.0, -3.0],
        geo_key_directory: Some(vec![1, 1, 0, 1, 1025, 0, 1, 1]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: Some(0.0),
    };
    let tiled = TiffOptions {
        tile_size: Some(32),
        ..Default::default()
    };
    write_geotiff_with(&d.path().join("scene.tif"), &scene, Some(&geo), &tiled).unwrap();
    // Labels: 0/1 stripes, with the left 40 columns nodata (255 = ignore).
    let labels: Vec<u8> = (0..w * h)
        .map(|i| {
            if i % w < 40 {
                255
            } else {
                ((i / w / 10) % 2) as u8
            }
        })
        .collect();
    let lab = Raster::new(w, h, 1, RasterData::U8(labels.clone())).unwrap();
    write_geotiff_with(&d.path().join("labels.tif"), &lab, Some(&geo), &tiled).unwrap();

    let mut o = SceneOptions::new(
        vec![d.path().join("scene.tif")],
        vec![d.path().join("labels.tif")],
        d.path().join("out"),
        LabelMap::identity(&["outer", "rice_paddy"]),
    );
    o.tile_size = 48;
    o.overlap = 16;
    o.val_ratio = 0.3;
    let report = prepare_scenes(&o).unwrap();

    // Origins every 32 px plus one flush with the far edge: x 0,32,..,128,152 / y 0,..,96,102.
    let xs = [0, 32, 64, 96, 128, 152];
    let ys = [0, 32, 64, 96, 102];
    // Tiles at x = 0 are 40/48 nodata (> 50%): skipped.
    assert_eq!(report.skipped_tiles, ys.len());
    // Train tiles sharing pixels with a val tile are dropped, not written.
    assert_eq!(
        report.meta.tiles.len() + report.dropped_tiles,
        (xs.len() - 1) * ys.len()
    );
    assert_eq!(
        report.meta.splits.values().sum::<usize>(),
        report.meta.tiles.len()
    );
    assert!(report.meta.splits["train"] > 0 && report.meta.splits["val"] > 0);

    for t in &report.meta.tiles {
        assert!(xs.contains(&t.x) && ys.contains(&t.y) && t.x != 0, "{t:?}");
        let path = d
            .path()
            .join("out/images")
            .join(&t.split)
            .join(format!("{}.tif", t.id));
        let (img, g) = read_image(&path).unwrap();
        let RasterData::U16(px) = &img.data else {
            panic!()
        };
        assert_eq!(*px, crop_u16(&scene, t.x, t.y, 48, 48), "{}", t.id);
        // Pixel (0, 0) of the tile is pixel (x, y) of the scene, computed from the scene transform.
        let g = g.unwrap();
        let expect = (420_000.0 + 3.0 * t.x as f64, 1_650_000.0 - 3.0 * t.y as f64);
        assert_eq!(g.pixel_to_world(0.0, 0.0), expect);
        assert_eq!(t.transform.unwrap(), g.transform);
        assert_eq!(g.nodata, Some(0.0));
    }

    // Tiles load back with their masks, label-mapped.
    let train = SegDataset::open(&d.path().join("out"), "train").unwrap();
    let s = train.get(0).unwrap();
    let rec = report.meta.tiles.iter().find(|t| t.id == s.id).unwrap();
    let expect: Vec<u8> = (0..48 * 48)
        .map(|i| labels[(rec.y + i / 48) * w + rec.x + i % 48])
        .collect();
    assert_eq!(s.mask.unwrap(), Mask::new(48, 48, expect).unwrap());
    assert!(s.geo.is_some());
    let json = std::fs::read_to_string(d.path().join("out/dataset.json")).unwrap();
    assert!(json.contains("\"tiles\"") && json.contains("scene.tif"));
}

#[test]
fn scenes_without_georeferencing_become_png_tiles() {
    let d = tempfile::tempdir().unwrap();
    let img = common::u8_raster(96, 96, 3, 3);
    tiles::write_png(&d.path().join("s.png"), &img).unwrap();
    tiles::write_mask_png(&d.path().join("m.png"), &common::mask_of(96, 96, &[0, 1])).unwrap();
    let mut o = SceneOptions::new(
        vec![d.path().join("s.png")],
        vec![d.path().join("m.png")],
        d.path().join("out"),
        LabelMap::identity(&["a", "b"]),
    );
    o.tile_size = 16;
    o.val_ratio = 0.5;
    let r = prepare_scenes(&o).unwrap();
    assert_eq!(r.meta.tiles.len(), 36);
    let t = &r.meta.tiles[7];
    assert!(t.transform.is_none());
    let (tile, g) = read_image(
        &d.path()
            .join("out/images")
            .join(&t.split)
            .join(format!("{}.png", t.id)),
    )
    .unwrap();
    assert!(g.is_none());
    assert_eq!(tile.get_f32(3, 5, 1), img.get_f32(t.y + 3, t.x + 5, 1));
}

#[test]
fn bad_scene_options_and_mismatched_labels_are_clear_errors() {
    let d = tempfile::tempdir().unwrap();
    tiles::write_png(&d.path().join("s.png"), &common::u8_raster(64, 64, 3, 3)).unwrap();
    tiles::write_mask_png(&d.path().join("m.png"), &common::mask_of(64, 60, &[0])).unwrap();
    let mut o = SceneOptions::new(
        vec![d.path().join("s.png")],
        vec![d.path().join("m.png")],
        d.path().join("out"),
        LabelMap::identity(&["a", "b"]),
    );
    o.tile_size = 32;
    o.overlap = 32;
    assert!(
        prepare_scenes(&o)
            .unwrap_err()
            .to_string()
            .contains("overlap")
    );
    o.overlap = 0;
    let msg = prepare_scenes(&o).unwrap_err().to_string();
    assert!(msg.contains("64x64") && msg.contains("64x60"), "{msg}");
    tiles::write_mask_png(&d.path().join("m.png"), &common::mask_of(64, 64, &[0, 7])).unwrap();
    std::fs::remove_dir_all(d.path().join("out")).ok();
    let msg = prepare_scenes(&o).unwrap_err().to_string();
    assert!(msg.contains("7 (") && msg.contains("m.png"), "{msg}");
}

#[test]
fn a_failed_run_leaves_no_half_written_dataset() {
    let d = tempfile::tempdir().unwrap();
    tiles::write_png(&d.path().join("s.png"), &common::u8_raster(64, 64, 3, 3)).unwrap();
    tiles::write_mask_png(&d.path().join("m.png"), &common::mask_of(64, 64, &[0, 1])).unwrap();
    let mut o = SceneOptions::new(
        vec![d.path().join("s.png")],
        vec![d.path().join("m.png")],
        d.path().join("out"),
        LabelMap::identity(&["a", "b"]),
    );
    o.tile_size = 32;
    // Four tiles in one 2x2 block: too little to give train and val a block each.
    let err = prepare_scenes(&o).unwrap_err();
    assert!(
        matches!(err, tiles::TilesError::TooLittleData { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("--tile-size (now 32)"), "{err}");
    assert!(!d.path().join("out/images").exists());
    o.tile_size = 16;
    o.val_ratio = 0.5;
    assert_eq!(prepare_scenes(&o).unwrap().meta.tiles.len(), 16);
}
