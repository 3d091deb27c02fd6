//! Rasters by URL and STAC items, read through a real HTTP server started by each test
//! (`testkit::http::RangeServer` on 127.0.0.1, no other network): windows read over HTTP
//! (and through object_store's S3 client, path-style against the same server) are the local
//! file's bits, faults are retried, a window fetches only its tiles, and a STAC item's assets
//! stack into what a locally stacked GeoTIFF holds, resampled nearest-neighbour when asked.

use std::path::{Path, PathBuf};
use std::time::Duration;

use testkit::http::{Fault, RangeServer};
use tiles::{
    BandStack, ChunkedReader, CogOptions, CogWriter, GeoRef, Raster, RasterData, RasterShape,
    Remote, RemoteError, RemoteOptions, SampleKind, SceneInput, StackOptions, TilesError,
    WindowSource, parse_stac, read_stac,
};

/// UTM 48N, the CRS of Sentinel-2 tiles over the Mekong delta.
fn geo(x0: f64, y0: f64, px: f64, nodata: Option<f64>) -> GeoRef {
    GeoRef {
        transform: [x0, px, 0.0, y0, 0.0, -px],
        geo_key_directory: Some(vec![
            1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32648,
        ]),
        geo_double_params: None,
        geo_ascii_params: Some("WGS 84 / UTM zone 48N|".into()),
        nodata,
    }
}

/// Samples with structure (so tiles compress unevenly, as real ones do) and noise.
fn u16_raster(w: usize, h: usize, bands: usize, seed: u64) -> Raster {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let data = (0..w * h * bands)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let (px, b) = (i / bands, i % bands);
            let (x, y) = (px % w, px / w);
            (((x / 7 + y / 5) * 97 + b * 1000) as u64 + s % 64) as u16
        })
        .collect();
    Raster::new(w, h, bands, RasterData::U16(data)).unwrap()
}

/// Writes `r` as a tiled, Deflate-compressed GeoTIFF with overviews ([`CogWriter`]).
fn write_cog(path: &Path, r: &Raster, g: &GeoRef, tile: usize) {
    let shape = RasterShape {
        width: r.width,
        height: r.height,
        bands: r.bands,
        kind: r.kind(),
    };
    let opts = CogOptions {
        tile,
        ..Default::default()
    };
    let mut w = CogWriter::create(path, shape, Some(g), opts).unwrap();
    w.write_rows(&r.data).unwrap();
    w.finish().unwrap();
}

/// Retries without the production waits, so fault tests take milliseconds.
fn fast() -> RemoteOptions {
    RemoteOptions {
        backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
        ..Default::default()
    }
}

/// Windows that are tile-aligned, cross tile edges, touch the right/bottom edges, one pixel.
fn windows(w: usize, h: usize) -> Vec<(usize, usize, usize, usize)> {
    vec![
        (0, 0, 128, 128),
        (100, 90, 200, 150),
        (w - 77, h - 33, 77, 33),
        (5, 7, 1, 1),
        (0, 130, w, 64),
    ]
}

struct Scene {
    _dir: tempfile::TempDir,
    path: PathBuf,
    raster: Raster,
}

/// A 4-band u16 scene of `w × h` written with 128² tiles.
fn scene(w: usize, h: usize) -> Scene {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("scene.tif");
    let raster = u16_raster(w, h, 4, 7);
    write_cog(
        &path,
        &raster,
        &geo(600_000.0, 1_100_000.0, 10.0, Some(0.0)),
        128,
    );
    Scene {
        _dir: dir,
        path,
        raster,
    }
}

fn assert_same_windows(local: &mut ChunkedReader, url: &mut ChunkedReader) {
    assert_eq!(
        (url.width(), url.height(), url.bands(), url.kind()),
        (local.width(), local.height(), local.bands(), local.kind())
    );
    assert_eq!(url.geo(), local.geo());
    assert_eq!(url.chunk_size(), local.chunk_size());
    for (x, y, w, h) in windows(local.width(), local.height()) {
        let a = local.read_window(x, y, w, h).unwrap();
        let b = url.read_window(x, y, w, h).unwrap();
        assert_eq!(a.data, b.data, "window ({x}, {y}) {w}x{h}");
    }
    assert_eq!(url.read_all().unwrap().data, local.read_all().unwrap().data);
}

#[test]
fn a_tiled_geotiff_over_http_reads_the_local_files_bits() {
    let s = scene(333, 301);
    let server = RangeServer::start();
    server.serve("cogs/scene.tif", std::fs::read(&s.path).unwrap());
    let remote = Remote::new(fast());
    let mut url = ChunkedReader::open_url(&server.url("cogs/scene.tif"), &remote).unwrap();
    let mut local = ChunkedReader::open(&s.path).unwrap();
    assert_same_windows(&mut local, &mut url);
    assert_eq!(url.read_all().unwrap().data, s.raster.data);
    // `open_location` dispatches on the text.
    let again = ChunkedReader::open_location(&server.url("cogs/scene.tif"), &remote).unwrap();
    assert_eq!(again.location(), Path::new(&server.url("cogs/scene.tif")));
    assert_eq!(remote.stats().retries, 0);
}

#[test]
fn a_503_and_a_dropped_connection_are_retried_to_the_same_pixels() {
    let s = scene(333, 301);
    let server = RangeServer::start();
    server.serve("scene.tif", std::fs::read(&s.path).unwrap());
    let remote = Remote::new(fast());
    // The HEAD of `open` gets the 503, its retry a connection closed without an answer.
    server.fail_next(Fault::Unavailable);
    server.fail_next(Fault::Drop);
    let mut url = ChunkedReader::open_url(&server.url("scene.tif"), &remote).unwrap();
    // The first tile reads of a window: a body cut off half-way, a 503.
    server.fail_next(Fault::Drop);
    server.fail_next(Fault::Unavailable);
    let mut local = ChunkedReader::open(&s.path).unwrap();
    assert_same_windows(&mut local, &mut url);
    let log = server.requests();
    let statuses: Vec<(u16, Option<Fault>)> = log.iter().map(|r| (r.status, r.fault)).collect();
    assert_eq!(
        statuses.iter().filter(|s| s.1.is_some()).count(),
        4,
        "{statuses:?}"
    );
    assert!(statuses.contains(&(503, Some(Fault::Unavailable))));
    // The dropped body sent only half of what it announced.
    let dropped = log
        .iter()
        .find(|r| r.fault == Some(Fault::Drop) && r.method == "GET")
        .unwrap();
    let (a, b) = dropped.range.unwrap();
    assert_eq!(dropped.bytes, (b - a) / 2);
    assert_eq!(remote.stats().retries, 4);
}

#[test]
fn a_server_that_keeps_failing_gives_an_error_naming_the_url_after_the_last_retry() {
    let s = scene(200, 150);
    let server = RangeServer::start();
    server.serve("scene.tif", std::fs::read(&s.path).unwrap());
    let opts = RemoteOptions {
        retries: 2,
        ..fast()
    };
    let remote = Remote::new(opts);
    let url = server.url("scene.tif");
    let mut reader = ChunkedReader::open_url(&url, &remote).unwrap();
    for _ in 0..3 {
        server.fail_next(Fault::Unavailable);
    }
    let err = reader.read_window(0, 0, 10, 10).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            &err,
            TilesError::Remote(RemoteError::Fetch { attempts: 3, .. })
        ),
        "{err:?}"
    );
    assert!(
        msg.contains(&url) && msg.contains("3 attempt(s)") && msg.contains("503"),
        "{msg}"
    );
    // The reader recovers once the server does.
    let mut local = ChunkedReader::open(&s.path).unwrap();
    assert_eq!(
        reader.read_window(0, 0, 10, 10).unwrap().data,
        local.read_window(0, 0, 10, 10).unwrap().data
    );
    // A missing object is final at once, and named.
    let missing = server.url("nope.tif");
    let err = ChunkedReader::open_url(&missing, &remote).unwrap_err();
    assert!(
        matches!(&err, TilesError::Remote(RemoteError::NotFound { url, .. }) if *url == missing),
        "{err:?}"
    );
}

/// The byte range of every full-resolution tile, read from the file's own tags.
fn tile_ranges(path: &Path) -> Vec<(u64, u64)> {
    let mut d = tiff::decoder::Decoder::new(std::fs::File::open(path).unwrap()).unwrap();
    let offsets = d.get_tag_u64_vec(tiff::tags::Tag::TileOffsets).unwrap();
    let counts = d.get_tag_u64_vec(tiff::tags::Tag::TileByteCounts).unwrap();
    offsets
        .into_iter()
        .zip(counts)
        .map(|(o, n)| (o, o + n))
        .collect()
}

#[test]
fn a_window_fetches_only_its_tiles_and_no_byte_twice() {
    // 5 × 4 tiles of 128².
    let s = scene(600, 500);
    let tiles = tile_ranges(&s.path);
    assert_eq!(tiles.len(), 20);
    let len = std::fs::metadata(&s.path).unwrap().len();
    let server = RangeServer::start();
    server.serve("scene.tif", std::fs::read(&s.path).unwrap());
    let remote = Remote::new(fast());
    let mut url = ChunkedReader::open_url(&server.url("scene.tif"), &remote).unwrap();
    // Opening: a HEAD and a few header/IFD blocks, far less than the file.
    let opening = remote.stats();
    assert!(opening.requests <= 4, "{opening:?}");
    assert!(opening.bytes < len / 4, "{opening:?} of {len}");
    // Tiles (1, 1) and (2, 1): a window inside them fetches those two and nothing else.
    server.clear_requests();
    url.read_window(140, 130, 200, 100).unwrap();
    let log = server.requests();
    let fetched: u64 = log.iter().map(|r| r.bytes).sum();
    let wanted = [tiles[6], tiles[7]];
    let need: u64 = wanted.iter().map(|(a, b)| b - a).sum();
    // Adjacent in the file, so one request; a few bytes of gap at most.
    assert_eq!(log.len(), 1, "{log:?}");
    let (a, b) = log[0].range.unwrap();
    assert!(
        a <= wanted[0].0 && b >= wanted[1].1 && fetched <= need + 1024,
        "{log:?}"
    );
    // The same window again: all cached, no request.
    server.clear_requests();
    url.read_window(150, 140, 100, 50).unwrap();
    assert!(server.requests().is_empty());
    // The whole raster: every byte at most once (the 32 MiB cache holds this small file).
    url.read_all().unwrap();
    assert!(remote.stats().bytes <= len, "{:?} of {len}", remote.stats());
    // With no cache budget, each band of rows fetches within its own row of tiles, about once.
    let lean = Remote::new(RemoteOptions {
        cache_bytes: 0,
        ..fast()
    });
    let mut url = ChunkedReader::open_url(&server.url("scene.tif"), &lean).unwrap();
    for band in 0..4 {
        server.clear_requests();
        let y = band * 128;
        url.read_window(0, y, 600, 128.min(500 - y)).unwrap();
        let row = &tiles[band * 5..band * 5 + 5];
        let (first, last) = (row[0].0, row[4].1);
        let log = server.requests();
        assert!(!log.is_empty());
        for r in &log {
            let (a, b) = r.range.unwrap();
            assert!(a + 1024 >= first && b <= last + 1024, "row {band}: {r:?}");
        }
        let got: u64 = log.iter().map(|r| r.bytes).sum();
        assert!(got <= last - first + 5 * 1024, "row {band}: {got}");
    }
}

#[test]
fn s3_urls_read_through_a_path_style_endpoint_with_signed_requests() {
    let s = scene(333, 301);
    let server = RangeServer::start();
    server.serve("bucket/scenes/scene.tif", std::fs::read(&s.path).unwrap());
    let opts = RemoteOptions {
        config: vec![
            ("aws_endpoint".into(), server.endpoint()),
            ("aws_allow_http".into(), "true".into()),
            ("aws_region".into(), "us-west-2".into()),
            ("aws_access_key_id".into(), "AKIDTEST".into()),
            ("aws_secret_access_key".into(), "secret".into()),
        ],
        ..fast()
    };
    let remote = Remote::new(opts);
    let mut url = ChunkedReader::open_url("s3://bucket/scenes/scene.tif", &remote).unwrap();
    server.fail_next(Fault::Drop);
    let mut local = ChunkedReader::open(&s.path).unwrap();
    assert_same_windows(&mut local, &mut url);
    let log = server.requests();
    assert!(log.iter().all(|r| r.path == "/bucket/scenes/scene.tif"));
    // SigV4 with the configured key, for the region given.
    assert!(
        log.iter()
            .all(|r| r.authorization.as_deref().is_some_and(|a| {
                a.starts_with("AWS4-HMAC-SHA256 Credential=AKIDTEST/")
                    && a.contains("/us-west-2/s3/")
            }))
    );
    // An unknown setting is named.
    let bad = Remote::new(RemoteOptions {
        config: vec![("aws_endpiont".into(), "x".into())],
        ..fast()
    });
    let err = ChunkedReader::open_url("s3://bucket/scenes/scene.tif", &bad).unwrap_err();
    assert!(err.to_string().contains("aws_endpiont"), "{err}");
}

/// Sentinel-2-like single-band assets and the same bands stacked locally.
struct Assets {
    dir: tempfile::TempDir,
    bands: Vec<Raster>,
}

const KEYS: [(&str, &str, &str); 4] = [
    ("B02", "B02", "blue"),
    ("B03", "B03", "green"),
    ("B04", "B04", "red"),
    ("B08", "B08", "nir"),
];

fn assets(w: usize, h: usize) -> Assets {
    let dir = tempfile::tempdir().unwrap();
    let g = geo(600_000.0, 1_100_000.0, 10.0, Some(0.0));
    let bands: Vec<Raster> = (0..4).map(|i| u16_raster(w, h, 1, 11 + i as u64)).collect();
    for ((key, _, _), r) in KEYS.iter().zip(&bands) {
        write_cog(&dir.path().join(format!("{key}.tif")), r, &g, 128);
    }
    Assets { dir, bands }
}

/// A STAC item whose assets are the `KEYS` files, relative to the item.
fn item_json(extra: &str) -> String {
    let assets: Vec<String> = KEYS
        .iter()
        .map(|(key, name, common)| {
            format!(
                r#""{key}": {{"href": "{key}.tif", "type": "image/tiff; application=geotiff; profile=cloud-optimized",
                   "roles": ["data"], "eo:bands": [{{"name": "{name}", "common_name": "{common}"}}]}}"#
            )
        })
        .collect();
    format!(
        r#"{{"type": "Feature", "stac_version": "1.0.0", "id": "S2A_48PXS_20240115",
            "properties": {{"datetime": "2024-01-15T03:30:00Z"}},
            "assets": {{{}{extra}, "thumbnail": {{"href": "thumb.png", "roles": ["thumbnail"]}}}}}}"#,
        assets.join(",")
    )
}

/// The bands `order` (indices into `KEYS`) interleaved, as a local 4-band GeoTIFF would hold.
fn stacked(bands: &[Raster], order: &[usize]) -> Raster {
    let (w, h) = (bands[0].width, bands[0].height);
    let mut data = Vec::with_capacity(w * h * order.len());
    for p in 0..w * h {
        for &b in order {
            let RasterData::U16(v) = &bands[b].data else {
                unreachable!()
            };
            data.push(v[p]);
        }
    }
    Raster::new(w, h, order.len(), RasterData::U16(data)).unwrap()
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_stac_item_served_over_http_stacks_like_the_local_multiband_geotiff() {
    let (w, h) = (300, 260);
    let a = assets(w, h);
    let server = RangeServer::start();
    for (key, _, _) in KEYS {
        let file = a.dir.path().join(format!("{key}.tif"));
        server.serve(&format!("stac/{key}.tif"), std::fs::read(file).unwrap());
    }
    server.serve("stac/item.json", item_json("").into_bytes());
    let remote = Remote::new(fast());
    let items = read_stac(&server.url("stac/item.json"), &remote).unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0].asset("B04").unwrap().href,
        server.url("stac/B04.tif")
    );
    // The model's order: red, green, blue, nir.
    let options = StackOptions {
        assets: names(&["red", "green", "blue", "nir"]),
        resample_to: None,
    };
    let mut stack = BandStack::open(&items[0], &options, &remote).unwrap();
    let picked: Vec<(&str, Option<&str>)> = stack
        .band_sources()
        .iter()
        .map(|b| (b.asset.as_str(), b.name.common_name.as_deref()))
        .collect();
    assert_eq!(
        picked,
        [
            ("B04", Some("red")),
            ("B03", Some("green")),
            ("B02", Some("blue")),
            ("B08", Some("nir"))
        ]
    );
    // The local stack, written and read back as one 4-band GeoTIFF.
    let expected = stacked(&a.bands, &[2, 1, 0, 3]);
    let local_path = a.dir.path().join("stacked.tif");
    let g = geo(600_000.0, 1_100_000.0, 10.0, Some(0.0));
    write_cog(&local_path, &expected, &g, 128);
    let mut local = ChunkedReader::open(&local_path).unwrap();
    assert_eq!((stack.width(), stack.height(), stack.bands()), (w, h, 4));
    assert_eq!(stack.geo(), local.geo());
    assert_eq!(stack.kind(), SampleKind::U16);
    for (x, y, ww, hh) in windows(w, h) {
        assert_eq!(
            stack.read_window(x, y, ww, hh).unwrap().data,
            local.read_window(x, y, ww, hh).unwrap().data,
            "window ({x}, {y}) {ww}x{hh}"
        );
    }
    assert_eq!(stack.read_window(0, 0, w, h).unwrap().data, expected.data);
    // The way a binary takes it: the scenes an argument names, each opened when its turn comes.
    let scenes = SceneInput::list(&server.url("stac/item.json"), &remote).unwrap();
    assert_eq!(scenes.len(), 1);
    assert_eq!(scenes[0].name(), "S2A_48PXS_20240115");
    let mut scene = scenes[0].open(&options, &remote).unwrap();
    assert_eq!(
        scene.read_window(33, 44, 100, 90).unwrap().data,
        local.read_window(33, 44, 100, 90).unwrap().data
    );
    // The same item from the local file (relative hrefs resolve next to it), as an
    // ItemCollection.
    let collection = format!(
        r#"{{"type": "FeatureCollection", "features": [{}]}}"#,
        item_json("")
    );
    let path = a.dir.path().join("search.json");
    std::fs::write(&path, collection).unwrap();
    let items = read_stac(path.to_str().unwrap(), &remote).unwrap();
    let mut from_disk = BandStack::open(&items[0], &options, &remote).unwrap();
    assert_eq!(
        from_disk.read_window(10, 20, 30, 40).unwrap().data,
        local.read_window(10, 20, 30, 40).unwrap().data
    );
}

#[test]
fn assets_on_different_grids_are_an_error_naming_them_and_their_resolutions() {
    let a = assets(64, 64);
    // A 20 m band over the same area.
    let swir = u16_raster(32, 32, 1, 5);
    let g20 = geo(600_000.0, 1_100_000.0, 20.0, Some(0.0));
    write_cog(&a.dir.path().join("B11.tif"), &swir, &g20, 16);
    let extra =
        r#", "B11": {"href": "B11.tif", "eo:bands": [{"name": "B11", "common_name": "swir16"}]}"#;
    let item_path = a.dir.path().join("item.json");
    let json = item_json(extra);
    let item = parse_stac(&json, item_path.to_str().unwrap())
        .unwrap()
        .remove(0);
    let options = StackOptions {
        assets: names(&["red", "swir16"]),
        resample_to: None,
    };
    let err = BandStack::open(&item, &options, &Remote::new(fast())).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TilesError::GridMismatch { .. }), "{err:?}");
    assert!(
        msg.contains("B04 (64x64 px of 10 x 10)")
            && msg.contains("B11 (32x32 px of 20 x 20)")
            && msg.contains("S2A_48PXS_20240115")
            && msg.contains("resample_to"),
        "{msg}"
    );
    // resample_to must name one of the stacked assets.
    let wrong = StackOptions {
        resample_to: Some("nir".into()),
        ..options
    };
    let msg = BandStack::open(&item, &wrong, &Remote::new(fast()))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("resample_to `nir` is not one of the stacked assets"),
        "{msg}"
    );
}

#[test]
fn resample_to_takes_the_source_pixel_under_each_centre() {
    let a = assets(64, 48);
    // A 20 m band whose grid starts 10 m east and 10 m south of the 10 m grid's corner and
    // covers 32 × 24 pixels: column 0 of the 10 m grid has its centre west of it.
    let swir = u16_raster(32, 24, 1, 5);
    let nodata = 9999.0;
    let g20 = geo(600_010.0, 1_099_990.0, 20.0, Some(nodata));
    write_cog(&a.dir.path().join("B11.tif"), &swir, &g20, 16);
    let extra =
        r#", "B11": {"href": "B11.tif", "eo:bands": [{"name": "B11", "common_name": "swir16"}]}"#;
    let item_path = a.dir.path().join("item.json");
    let item = parse_stac(&item_json(extra), item_path.to_str().unwrap())
        .unwrap()
        .remove(0);
    let options = StackOptions {
        assets: names(&["swir16", "red"]),
        resample_to: Some("red".into()),
    };
    let mut stack = BandStack::open(&item, &options, &Remote::new(fast())).unwrap();
    assert_eq!((stack.width(), stack.height()), (64, 48));
    assert_eq!(
        stack.geo().unwrap().transform,
        geo(600_000.0, 1_100_000.0, 10.0, None).transform
    );
    // 10 m pixel x has its centre at 10x + 5 m, which is 10x - 5 m into the 20 m grid:
    // outside for x = 0, else 20 m column (x - 1) / 2; rows likewise.
    let src = |x: usize, y: usize| -> u16 {
        if x == 0 || y == 0 {
            return nodata as u16;
        }
        let RasterData::U16(v) = &swir.data else {
            unreachable!()
        };
        v[((y - 1) / 2) * 32 + (x - 1) / 2]
    };
    let RasterData::U16(red) = &a.bands[2].data else {
        unreachable!()
    };
    for (x0, y0, w, h) in [
        (0, 0, 64, 48),
        (0, 0, 1, 1),
        (17, 9, 30, 21),
        (63, 47, 1, 1),
    ] {
        let got = stack.read_window(x0, y0, w, h).unwrap();
        let RasterData::U16(got) = got.data else {
            panic!("u16 stack")
        };
        for y in 0..h {
            for x in 0..w {
                let (gx, gy) = (x0 + x, y0 + y);
                let at = (y * w + x) * 2;
                assert_eq!(got[at], src(gx, gy), "swir at ({gx}, {gy})");
                assert_eq!(got[at + 1], red[gy * 64 + gx], "red at ({gx}, {gy})");
            }
        }
    }
}
