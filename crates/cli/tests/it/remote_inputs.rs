//! Imagery where it lives, predicted by many tasks (issue 29): `predict --input` by URL and
//! from STAC items, read from a range-serving HTTP server started by the test, gives the maps
//! of the same files read locally; `--inputs … --shard I/N` covers a manifest exactly once,
//! with completion markers a rerun honours; `stats merge` sums the per-scene statistics into
//! the totals of one run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use testkit::http::{Fault, RangeServer};
use tiles::{GeoRef, Raster, RasterData, TiffOptions};

use crate::common::*;

const TILE: &[&str] = &["--tile", "64", "--overlap", "16"];

/// UTM 48N, 10 m pixels, top-left corner at `(x0, 1_700_000)`.
fn utm_geo(x0: f64, pixel: f64) -> GeoRef {
    GeoRef {
        transform: [x0, pixel, 0.0, 1_700_000.0, 0.0, -pixel],
        geo_key_directory: Some(vec![1, 1, 0, 1, 3072, 0, 1, 32648]),
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: None,
    }
}

/// `bands` u8 planes of a `w × h` scene with smooth structure (so the model finds regions),
/// different for each `seed`: `planes[b][y * w + x]`.
fn planes(w: usize, h: usize, bands: usize, seed: usize) -> Vec<Vec<u8>> {
    (0..bands)
        .map(|b| {
            (0..w * h)
                .map(|i| {
                    let (x, y) = ((i % w) as f64, (i / w) as f64);
                    let s = seed as f64;
                    let v = ((x / (9.0 + s)).sin() + (y / (13.0 + b as f64)).cos()) * 60.0
                        + 120.0
                        + ((i * 31 + seed * 7 + b * 11) % 23) as f64;
                    v.clamp(0.0, 255.0) as u8
                })
                .collect()
        })
        .collect()
}

/// The planes interleaved into one raster.
fn raster(w: usize, h: usize, planes: &[Vec<u8>]) -> Raster {
    let bands = planes.len();
    let data = (0..w * h * bands)
        .map(|s| planes[s % bands][s / bands])
        .collect();
    Raster::new(w, h, bands, RasterData::U8(data)).unwrap()
}

/// A tiled (32×32), Deflate-compressed GeoTIFF: what a COG's full-resolution image is.
fn write_tiled(path: &Path, image: &Raster, geo: &GeoRef) {
    let options = TiffOptions {
        tile_size: Some(32),
        ..Default::default()
    };
    tiles::write_geotiff_with(path, image, Some(geo), &options).unwrap();
}

/// A 3-band scene `w × h` at `x0`, written tiled to `path`.
fn write_scene(path: &Path, w: usize, h: usize, seed: usize, x0: f64) {
    write_tiled(
        path,
        &raster(w, h, &planes(w, h, 3, seed)),
        &utm_geo(x0, 10.0),
    );
}

/// The class indices of a class map, decoded by `tiles` (not by the writer under test).
fn class_map(path: &Path) -> (Vec<u8>, Option<[f64; 6]>) {
    let (image, geo) = tiles::read_image(path).unwrap();
    let RasterData::U8(px) = image.data else {
        panic!("{}: class maps are u8", path.display())
    };
    (px, geo.map(|g| g.transform))
}

/// Runs segfit, asserting success; returns stderr (where the per-scene lines go).
fn run_ok(args: &[&str]) -> String {
    let out = segfit(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "segfit {args:?} failed\nstdout:\n{}\nstderr:\n{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

fn predict_args<'a>(model: &'a Path, out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let base = ["predict", "--model", s(model), "--output", s(out)];
    [&base[..], TILE, extra].concat()
}

#[test]
fn a_tiled_geotiff_by_url_predicts_the_map_of_the_local_file_even_through_faults() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let model = varied_model(t);
    let local = t.join("scene.tif");
    // With a nodata corner (0 in every band, declared as GDAL_NODATA).
    let (w, h) = (120, 100);
    let mut bands = planes(w, h, 3, 1);
    for plane in &mut bands {
        for y in 0..10 {
            plane[y * w..y * w + 12].fill(0);
        }
    }
    let geo = GeoRef {
        nodata: Some(0.0),
        ..utm_geo(300_000.0, 10.0)
    };
    write_tiled(&local, &raster(w, h, &bands), &geo);
    let server = RangeServer::start();
    server.serve_file("cogs/scene.tif", local.clone()).unwrap();
    let url = server.url("cogs/scene.tif");

    let (by_path, by_url) = (t.join("local"), t.join("remote"));
    let extra = ["--probabilities", "u8", "--vector", "--stats"];
    let stats = |dir: &Path| dir.join("all.json").to_string_lossy().into_owned();
    let (sa, sb) = (stats(&by_path), stats(&by_url));
    run_ok(&predict_args(
        &model,
        &by_path,
        &[&["--input", s(&local)][..], &extra, &[&sa]].concat(),
    ));
    run_ok(&predict_args(
        &model,
        &by_url,
        &[&["--input", &url][..], &extra, &[&sb]].concat(),
    ));

    // The comparisons below mean something: the model finds several classes here.
    let (px, transform) = class_map(&by_url.join("scene.tif"));
    assert!(px.iter().any(|&c| c != px[1000]), "a one-class map");
    assert_eq!(transform, Some(geo.transform), "the URL's georeferencing");
    assert!((0..10).all(|y| px[y * w..y * w + 12].iter().all(|&c| c == 255)));
    assert!(px[10 * w..].iter().all(|&c| c < 3));
    // Range requests, not one download: every GET asked for a range.
    let log = server.requests();
    assert!(log.iter().any(|r| r.method == "GET"), "{log:?}");
    assert!(
        log.iter()
            .filter(|r| r.method == "GET")
            .all(|r| r.range.is_some()),
        "{log:?}"
    );
    // The rasters (class map, probabilities, their sidecars) and polygons are the same
    // bytes; the statistics name the input differently but count the same.
    let (a, b) = (contents(&by_path), contents(&by_url));
    for name in [
        "scene.tif",
        "scene_prob.tif",
        "scene.geojson",
        "scene.qml",
        "scene.tif.aux.xml",
    ] {
        assert!(a.contains_key(name), "{name} not among {:?}", a.keys());
        assert!(
            a[name] == b[name],
            "{name} differs between the local and the URL read"
        );
    }
    let totals = |p: &Path| -> Value {
        let v: Value = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
        v["total"]["classes"].clone()
    };
    assert_eq!(
        totals(&by_path.join("scene.stats.json")),
        totals(&by_url.join("scene.stats.json"))
    );

    // A 503 and a connection dropped half-way: retried, and the same map.
    server.clear_requests();
    server.fail_next(Fault::Unavailable);
    server.fail_next(Fault::Drop);
    let faulty = t.join("faulty");
    run_ok(&predict_args(&model, &faulty, &["--input", &url]));
    let log = server.requests();
    assert!(log.iter().any(|r| r.status == 503), "{log:?}");
    assert!(log.iter().any(|r| r.fault == Some(Fault::Drop)), "{log:?}");
    assert_eq!(
        class_map(&faulty.join("scene.tif")),
        class_map(&by_path.join("scene.tif"))
    );
    assert!(std::fs::read(faulty.join("scene.tif")).unwrap() == a["scene.tif"]);
}

#[test]
fn a_missing_url_is_one_error_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let server = RangeServer::start();
    let url = server.url("cogs/missing.tif");
    let model = fixture();
    let base = predict_args(&model, tmp.path(), &["--input", &url]);
    let err = fails(&base);
    assert!(err.contains(&url), "{err}");
}

/// Five scenes, three local and two by URL, and a manifest naming them (comments, blank
/// lines, relative paths).
struct Manifest {
    dir: PathBuf,
    path: PathBuf,
    server: RangeServer,
    names: Vec<&'static str>,
}

fn manifest(t: &Path) -> Manifest {
    let dir = t.join("scenes");
    std::fs::create_dir_all(&dir).unwrap();
    let names = vec!["s0", "s1", "s2", "u3", "u4"];
    for (i, name) in names.iter().enumerate() {
        // Side by side, 64 px (640 m) apart: overlapping neighbours.
        write_scene(
            &dir.join(format!("{name}.tif")),
            96,
            72 + 8 * i,
            i,
            300_000.0 + 640.0 * i as f64,
        );
    }
    let server = RangeServer::start();
    for name in ["u3", "u4"] {
        server
            .serve_file(&format!("cogs/{name}.tif"), dir.join(format!("{name}.tif")))
            .unwrap();
    }
    let text = format!(
        "# a province, one scene a line\ns0.tif\n\n{}\n  s1.tif  \n# the last by URL\n{}\n{}\n",
        dir.join("s2.tif").display(),
        server.url("cogs/u3.tif"),
        server.url("cogs/u4.tif"),
    );
    let path = dir.join("scenes.txt");
    std::fs::write(&path, text).unwrap();
    Manifest {
        dir,
        path,
        server,
        names,
    }
}

#[test]
fn shards_cover_a_manifest_exactly_once_and_reruns_redo_only_unfinished_scenes() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let model = varied_model(t);
    let m = manifest(t);
    let (one, sharded) = (t.join("one"), t.join("sharded"));
    let extra = |stats: &str| -> Vec<String> {
        ["--inputs", s(&m.path), "--vector", "--stats", stats]
            .map(String::from)
            .to_vec()
    };
    let total_one = t.join("total-one.json");
    let args = extra(s(&total_one));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_ok(&predict_args(&model, &one, &args));
    for i in 0..3 {
        let stats = t.join(format!("total-{i}.json"));
        let shard = format!("{i}/3");
        let mut args = extra(s(&stats));
        args.extend(["--shard".to_string(), shard]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let stderr = run_ok(&predict_args(&model, &sharded, &args));
        // Scenes i, i+3, … of the listed five.
        let want = (i..5).step_by(3).count();
        assert!(
            stderr.contains(&format!("shard {i}/3: {want} of the 5 listed scenes")),
            "{stderr}"
        );
    }

    // Exactly the files of one run, byte for byte: class maps, polygons, per-scene
    // statistics and completion markers.
    let (a, b) = (contents(&one), contents(&sharded));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (name, bytes) in &a {
        assert!(
            b[name] == *bytes,
            "{name} differs between one run and 3 shards"
        );
    }
    for name in &m.names {
        for file in ["tif", "geojson", "stats.json", "done.json"] {
            assert!(a.contains_key(&format!("{name}.{file}")), "{name}.{file}");
        }
    }
    let marker: Value = serde_json::from_slice(&a["u3.done.json"]).expect("a marker is JSON");
    let listed: Vec<&str> = marker["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        listed.contains(&"u3.tif") && listed.contains(&"u3.stats.json"),
        "{listed:?}"
    );

    // A rerun: `u3` lost its marker (killed after its outputs, before the marker), `s1` lost
    // its class map (killed half-way through an earlier redo). Only those two are predicted
    // again, to the same bytes; the others are skipped and untouched.
    std::fs::remove_file(sharded.join("u3.done.json")).unwrap();
    std::fs::remove_file(sharded.join("s1.tif")).unwrap();
    let mtimes = |dir: &Path| -> BTreeMap<String, std::time::SystemTime> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().modified().unwrap(),
                )
            })
            .collect()
    };
    let before = mtimes(&sharded);
    m.server.clear_requests();
    let stats = t.join("total-rerun.json");
    let args = extra(s(&stats));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let stderr = run_ok(&predict_args(&model, &sharded, &args));
    let skipped: Vec<&str> = stderr.lines().filter(|l| l.contains("skipped")).collect();
    assert_eq!(skipped.len(), 3, "{stderr}");
    for name in ["s0", "s2", "u4"] {
        assert!(
            skipped
                .iter()
                .any(|l| l.contains(&format!("{name}.done.json"))),
            "{name} not skipped: {stderr}"
        );
    }
    let redone: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with('[') && l.contains(" -> "))
        .collect();
    assert_eq!(redone.len(), 2, "{stderr}");
    // Only u3's object was fetched.
    let log = m.server.requests();
    assert!(
        !log.is_empty() && log.iter().all(|r| r.path == "/cogs/u3.tif"),
        "{log:?}"
    );
    let after = mtimes(&sharded);
    for (name, time) in &before {
        if !name.starts_with("u3") && !name.starts_with("s1") {
            assert_eq!(after[name], *time, "{name} was rewritten");
        }
    }
    let again = contents(&sharded);
    assert_eq!(
        again.keys().collect::<Vec<_>>(),
        a.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &a {
        assert!(again[name] == *bytes, "{name} differs after the rerun");
    }

    // The per-scene statistics merge into the totals of the one run.
    let reports: Vec<String> = m
        .names
        .iter()
        .map(|n| {
            sharded
                .join(format!("{n}.stats.json"))
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let merged = t.join("merged.json");
    let mut args = vec!["stats", "merge"];
    args.extend(reports.iter().map(String::as_str));
    args.extend(["--output", s(&merged)]);
    let table = ok(&args);
    assert!(table.contains("hectares"), "{table}");
    let read = |p: &Path| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let (merged, whole) = (read(&merged), read(&total_one));
    assert_same_totals(&merged["total"], &whole["total"]);
    assert_eq!(
        merged["inputs"].as_array().unwrap().len(),
        whole["inputs"].as_array().unwrap().len()
    );
    // The same, as CSV; and a report given twice is refused.
    let csv = t.join("merged.csv");
    let mut args = vec!["stats", "merge"];
    args.extend(reports.iter().map(String::as_str));
    args.extend(["--output", s(&csv)]);
    ok(&args);
    assert!(
        std::fs::read_to_string(&csv)
            .unwrap()
            .starts_with("input,class_index,class,pixels")
    );
    let err = fails(&["stats", "merge", &reports[0], &reports[1], &reports[0]]);
    assert!(err.contains("twice"), "{err}");
    assert!(m.dir.join("s0.tif").is_file());
}

/// Pixels equal, areas and mean probabilities equal up to rounding (the reports give means to
/// 6 decimals; merging weights them by pixels).
fn assert_same_totals(merged: &Value, whole: &Value) {
    assert_eq!(merged["crs"], whole["crs"]);
    let rows = |v: &Value| -> Vec<Value> {
        let mut rows = v["classes"].as_array().unwrap().clone();
        rows.push(v["nodata"].clone());
        rows
    };
    let (m, w) = (rows(merged), rows(whole));
    assert_eq!(m.len(), w.len());
    for (a, b) in m.iter().zip(&w) {
        assert_eq!(a["class"], b["class"]);
        assert_eq!(a["pixels"], b["pixels"], "{a} vs {b}");
        let close = |k: &str, tol: f64| match (a[k].as_f64(), b[k].as_f64()) {
            (Some(x), Some(y)) => {
                assert!((x - y).abs() <= tol * y.abs().max(1.0), "{k}: {a} vs {b}")
            }
            (x, y) => assert_eq!(x, y, "{k}: {a} vs {b}"),
        };
        close("area_m2", 1e-9);
        close("mean_probability", 1e-6);
    }
}

#[test]
fn a_stac_item_served_over_http_predicts_the_map_of_the_stacked_geotiff() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let model = varied_model(t);
    let (w, h) = (112, 96);
    let bands = planes(w, h, 3, 5);
    // The reference: one local 3-band GeoTIFF, bands red, green, blue.
    let stacked = t.join("T48PXS.tif");
    let geo = utm_geo(400_000.0, 10.0);
    write_tiled(&stacked, &raster(w, h, &bands), &geo);
    // The item's assets: one single-band COG per band, served with the item.
    let server = RangeServer::start();
    for (b, key) in ["B04", "B03", "B02"].iter().enumerate() {
        let path = t.join(format!("{key}.tif"));
        write_tiled(&path, &raster(w, h, &bands[b..b + 1]), &geo);
        server
            .serve_file(&format!("stac/T48PXS/{key}.tif"), path)
            .unwrap();
    }
    let asset = |key: &str, common: &str| {
        json!({"href": format!("{key}.tif"), "type": "image/tiff; application=geotiff",
               "eo:bands": [{"name": key, "common_name": common}]})
    };
    let item = json!({
        "type": "Feature", "stac_version": "1.0.0", "id": "T48PXS",
        "geometry": null, "properties": {},
        "assets": {"B04": asset("B04", "red"), "B03": asset("B03", "green"),
                   "B02": asset("B02", "blue")}
    });
    server.serve("stac/T48PXS/item.json", item.to_string().into_bytes());
    let url = server.url("stac/T48PXS/item.json");

    let (local, remote) = (t.join("local"), t.join("stac"));
    run_ok(&predict_args(&model, &local, &["--input", s(&stacked)]));
    // Assets by common name (red, green) and by key (B02).
    run_ok(&predict_args(
        &model,
        &remote,
        &["--input", &url, "--assets", "red,green,B02"],
    ));
    let (want, got) = (
        class_map(&local.join("T48PXS.tif")),
        class_map(&remote.join("T48PXS.tif")),
    );
    assert_eq!(got.1, want.1, "georeferencing");
    assert!(want.0.iter().any(|&c| c != want.0[0]), "a one-class map");
    assert!(
        got.0 == want.0,
        "the STAC stack's class map differs from the stacked file's"
    );

    // A 503, then a connection dropped half-way through the item's body (a GET): retried.
    server.clear_requests();
    server.fail_next(Fault::Unavailable);
    server.fail_next(Fault::Drop);
    let faulty = t.join("faulty");
    run_ok(&predict_args(
        &model,
        &faulty,
        &["--input", &url, "--assets", "red,green,B02"],
    ));
    let log = server.requests();
    let dropped = log.iter().find(|r| r.fault == Some(Fault::Drop));
    assert!(
        dropped.is_some_and(|r| r.method == "GET" && r.path.ends_with("item.json")),
        "{log:?}"
    );
    assert!(class_map(&faulty.join("T48PXS.tif")) == want);

    // The model takes 3 bands: 2 assets are refused naming them; no --assets names the flag.
    let err = fails(&predict_args(
        &model,
        &t.join("x"),
        &["--input", &url, "--assets", "red,green"],
    ));
    assert!(
        err.contains("red,green") && err.contains("3 bands"),
        "{err}"
    );
    let err = fails(&predict_args(&model, &t.join("x"), &["--input", &url]));
    assert!(err.contains("--assets"), "{err}");
    let err = fails(&predict_args(
        &model,
        &t.join("x"),
        &["--input", &url, "--assets", "red,green,swir"],
    ));
    assert!(err.contains("swir"), "{err}");
}

#[test]
fn a_coarser_asset_is_refused_unless_resampled_onto_the_named_grid() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let model = varied_model(t);
    let (w, h) = (96, 80);
    let fine = planes(w, h, 2, 3);
    let coarse = &planes(w / 2, h / 2, 1, 4)[0];
    // Nearest neighbour onto the 10 m grid: each 20 m pixel covers the 2×2 block whose centres
    // it contains.
    let upsampled: Vec<u8> = (0..w * h)
        .map(|i| coarse[(i / w / 2) * (w / 2) + (i % w) / 2])
        .collect();
    let stacked = t.join("item.tif");
    let reference = [fine[0].clone(), fine[1].clone(), upsampled];
    write_tiled(
        &stacked,
        &raster(w, h, &reference),
        &utm_geo(500_000.0, 10.0),
    );
    let server = RangeServer::start();
    let files = [
        ("B04", raster(w, h, &fine[0..1]), utm_geo(500_000.0, 10.0)),
        ("B03", raster(w, h, &fine[1..2]), utm_geo(500_000.0, 10.0)),
        (
            "B11",
            raster(w / 2, h / 2, std::slice::from_ref(coarse)),
            utm_geo(500_000.0, 20.0),
        ),
    ];
    let mut assets = serde_json::Map::new();
    for (key, image, geo) in &files {
        let path = t.join(format!("{key}.tif"));
        write_tiled(&path, image, geo);
        server.serve_file(&format!("{key}.tif"), path).unwrap();
        assets.insert(
            key.to_string(),
            json!({"href": server.url(&format!("{key}.tif"))}),
        );
    }
    let item = t.join("item.json");
    let json = json!({"type": "Feature", "id": "item", "properties": {}, "assets": assets});
    std::fs::write(&item, json.to_string()).unwrap();

    let err = fails(&predict_args(
        &model,
        &t.join("x"),
        &["--input", s(&item), "--assets", "B04,B03,B11"],
    ));
    assert!(
        err.contains("B11") && err.contains("B04") && err.contains("--resample-to"),
        "{err}"
    );
    let (local, remote) = (t.join("local"), t.join("stac"));
    run_ok(&predict_args(&model, &local, &["--input", s(&stacked)]));
    run_ok(&predict_args(
        &model,
        &remote,
        &[
            "--input",
            s(&item),
            "--assets",
            "B04,B03,B11",
            "--resample-to",
            "B04",
        ],
    ));
    assert!(class_map(&remote.join("item.tif")) == class_map(&local.join("item.tif")));
}

#[test]
fn zone_statistics_of_shards_merge_to_those_of_one_run_counting_overlaps_once() {
    use crate::labels::{ll, two_zone_scenes};
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let dir = t.join("scenes");
    std::fs::create_dir(&dir).unwrap();
    // Two scenes in two UTM zones that overlap by 160 m: the second one's pixels in the
    // overlap count for the first only, also when another task predicts the first.
    let scenes = two_zone_scenes(&dir);
    let ring: Vec<[f64; 2]> = [
        (-60.0, -60.0),
        (1300.0, -60.0),
        (1300.0, 800.0),
        (-60.0, 800.0),
        (-60.0, -60.0),
    ]
    .iter()
    .map(|&(u, v)| ll(u, v))
    .collect();
    let zones = t.join("districts.geojson");
    let layer = json!({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"name": "all"},
         "geometry": {"type": "Polygon", "coordinates": [ring]}}]});
    std::fs::write(&zones, layer.to_string()).unwrap();
    let list = t.join("scenes.txt");
    let lines: Vec<String> = scenes
        .iter()
        .map(|s| s.path.display().to_string())
        .collect();
    std::fs::write(&list, lines.join("\n")).unwrap();
    let model = varied_model(t);
    let common = [
        "--inputs",
        s(&list),
        "--zones",
        s(&zones),
        "--zone-field",
        "name",
        "--stats",
    ];
    let whole = t.join("whole.json");
    run_ok(&predict_args(
        &model,
        &t.join("one"),
        &[&common[..], &[s(&whole)]].concat(),
    ));
    let out = t.join("sharded");
    for i in 0..2 {
        let shard = format!("{i}/2");
        let stats = t.join(format!("shard-{i}.json"));
        run_ok(&predict_args(
            &model,
            &out,
            &[&common[..], &[s(&stats), "--shard", &shard]].concat(),
        ));
    }
    let merged = t.join("merged.json");
    ok(&[
        "stats",
        "merge",
        s(&out.join("a48.stats.json")),
        s(&out.join("b49.stats.json")),
        "--output",
        s(&merged),
    ]);
    let read = |p: &Path| -> Value { serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap() };
    let (m, w) = (read(&merged), read(&whole));
    let by_class = |v: &Value| -> BTreeMap<(String, u64), (u64, f64)> {
        v["zones"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    (
                        r["zone"].as_str().unwrap().to_string(),
                        r["class_index"].as_u64().unwrap(),
                    ),
                    (
                        r["pixels"].as_u64().unwrap(),
                        r["area_m2"].as_f64().unwrap(),
                    ),
                )
            })
            .collect()
    };
    let (mz, wz) = (by_class(&m), by_class(&w));
    assert_eq!(mz.keys().collect::<Vec<_>>(), wz.keys().collect::<Vec<_>>());
    let pixels: u64 = wz.values().map(|v| v.0).sum();
    // The overlap was counted once: fewer zone pixels than the two scenes hold.
    let held: u64 = w["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            s["classes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["pixels"].as_u64().unwrap())
                .sum::<u64>()
        })
        .sum();
    assert!(pixels < held, "{pixels} zone pixels of {held}");
    for (k, (px, area)) in &wz {
        assert_eq!(mz[k].0, *px, "{k:?}");
        assert!((mz[k].1 - area).abs() <= 1e-9 * area.max(1.0), "{k:?}");
    }
}

#[test]
fn scenes_that_would_share_output_names_are_refused_naming_both() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    let model = fixture();
    let server = RangeServer::start();
    let (a, b) = (server.url("a/B04.tif"), server.url("b/B04.tif"));
    let list = t.join("scenes.txt");
    std::fs::write(&list, format!("{a}\n{b}\n")).unwrap();
    let err = fails(&predict_args(
        &model,
        &t.join("out"),
        &["--inputs", s(&list)],
    ));
    assert!(
        err.contains(&a) && err.contains(&b) && err.contains("`B04`"),
        "{err}"
    );
    // A manifest by URL, its lines relative to it: listed (the error names both URLs of the
    // folder the manifest is in).
    server.serve(
        "a/scenes.txt",
        b"# two of one name\nB04.tif\nsub/B04.tif\n".to_vec(),
    );
    let manifest = server.url("a/scenes.txt");
    let err = fails(&predict_args(
        &model,
        &t.join("out"),
        &["--inputs", &manifest],
    ));
    assert!(
        err.contains(&a) && err.contains(&server.url("a/sub/B04.tif")),
        "{err}"
    );
    server.clear_requests();
    // Two items of one id in a collection; nothing is read or written before the error.
    let item = |href: &str| {
        json!({"type": "Feature", "id": "T48PXS", "properties": {},
               "assets": {"red": {"href": href}}})
    };
    let collection = t.join("search.json");
    let json = json!({"type": "FeatureCollection",
                      "features": [item("x/r.tif"), item("y/r.tif")]});
    std::fs::write(&collection, json.to_string()).unwrap();
    let out = t.join("out2");
    let args = [
        "--inputs",
        s(&collection),
        "--assets",
        "red",
        "--shard",
        "1/2",
    ];
    let err = fails(&predict_args(&model, &out, &args));
    assert!(
        err.contains("T48PXS") && err.contains("search.json"),
        "{err}"
    );
    assert!(server.requests().is_empty());
    assert!(std::fs::read_dir(&out).map_or(true, |mut d| d.next().is_none()));
}
