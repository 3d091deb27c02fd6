//! Mutated GeoJSON and Shapefile inputs: every one is read (or refused with an error) and what
//! is read is burned, without a panic, an abort or a hang.

use std::io::Cursor;

use geom::{
    ClassMapping, Crs, LabelOptions, Labels, Layer, Overlap, SceneGrid, Unlabelled, read_geojson,
    read_shapefile,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const GEOJSON: &str = r#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32648"}},"features":[
{"type":"Feature","id":7,"properties":{"crop":"rice","n":1},"geometry":{"type":"Polygon","coordinates":[[[500001.5,1499998],[500009,1499998.5],[500008,1499991],[500001.5,1499998]],[[500004,1499996],[500006,1499996],[500005,1499994],[500004,1499996]]]}},
{"type":"Feature","properties":{"crop":"maize"},"geometry":{"type":"MultiPolygon","coordinates":[[[[499990,1500005],[500020,1500005],[500020,1499980],[499990,1500005]]],[[[500003,1499999],[500003.3,1499990],[500003.6,1499999],[500003,1499999]]]]}},
{"type":"Feature","properties":{"crop":"rice"},"geometry":{"type":"GeometryCollection","geometries":[{"type":"Polygon","coordinates":[[[500000,1500000],[500002,1499990],[500004,1500000],[500000,1499990],[500000,1500000]]]}]}}
]}"#;

/// Tokens spliced into documents: what breaks parsers and arithmetic.
const TOKENS: &[&str] = &[
    "1e308",
    "-1e308",
    "NaN",
    "null",
    "[]",
    "[[",
    "]]",
    "{}",
    "0",
    "-0",
    "1e-320",
    "\"",
    "\\u0000",
    "9007199254740993",
    ",",
    ":",
    "true",
    "\"crs\"",
    "[[[",
    "2147483648",
    "-2147483649",
];

/// Numbers put in place of a document's numbers: extremes, ties on pixel edges, ints C
/// cannot hold.
const NUMBERS: &[&str] = &[
    "1e308",
    "-1e308",
    "0",
    "-0",
    "1e-320",
    "499999",
    "500020.5",
    "1499999.5",
    "2147483648",
    "-2147483649",
    "4.9e-324",
    "1e16",
    "500005",
    "1500000",
    "3",
    "\"rice\"",
];

/// Replaces one number of a JSON text by another (the document stays JSON most of the time).
fn swap_number(rng: &mut ChaCha8Rng, b: &mut Vec<u8>) {
    let starts: Vec<usize> = (1..b.len())
        .filter(|&i| {
            b[i].is_ascii_digit()
                && !b[i - 1].is_ascii_digit()
                && b[i - 1] != b'.'
                && b[i - 1] != b'-'
        })
        .collect();
    if starts.is_empty() {
        return;
    }
    let at = starts[rng.random_range(0..starts.len())];
    let end = (at..b.len())
        .find(|&i| !(b[i].is_ascii_digit() || b[i] == b'.' || b[i] == b'e'))
        .unwrap_or(b.len());
    let n = NUMBERS[rng.random_range(0..NUMBERS.len())];
    b.splice(at..end, n.bytes());
}

fn mutate(rng: &mut ChaCha8Rng, seed: &[u8], text: bool) -> Vec<u8> {
    let mut b = seed.to_vec();
    if text && rng.random_bool(0.6) {
        for _ in 0..rng.random_range(1..8) {
            swap_number(rng, &mut b);
        }
        return b;
    }
    for _ in 0..rng.random_range(1..4) {
        if b.is_empty() {
            break;
        }
        let at = rng.random_range(0..b.len());
        match rng.random_range(0..6) {
            0 => b[at] ^= 1 << rng.random_range(0..8),
            1 => b[at] = rng.random(),
            2 => {
                let n = rng.random_range(1..16).min(b.len() - at);
                b.drain(at..at + n);
            }
            3 => b.truncate(at),
            4 if text => {
                let t = TOKENS[rng.random_range(0..TOKENS.len())];
                b.splice(at..at, t.bytes());
            }
            _ => {
                // Copy a stretch of the input elsewhere (repeated structures, big counts).
                let n = rng.random_range(1..64).min(b.len() - at);
                let chunk = b[at..at + n].to_vec();
                let to = rng.random_range(0..b.len());
                b.splice(to..to, chunk);
            }
        }
    }
    b
}

/// Burns what was read onto a small scene, both rules, as a user's run would.
fn burn(layer: Layer) {
    let scene = SceneGrid::new(
        "s",
        16,
        12,
        [499_996.0, 1.5, 0.0, 1_500_002.0, 0.0, -1.5],
        Crs::parse("EPSG:32648").unwrap(),
    )
    .unwrap();
    let mut layer = layer;
    if layer.crs().is_none() {
        layer.set_crs(Crs::parse("EPSG:32648").unwrap());
    }
    for all_touched in [false, true] {
        let options = LabelOptions {
            classes: ClassMapping::all(1),
            all_touched,
            overlap: Overlap::LaterWins,
            unlabelled: Unlabelled::Ignore,
        };
        let Ok(mut labels) = Labels::new(vec![layer.clone()], None, options) else {
            continue;
        };
        let Ok(mut on) = labels.on_scene(&scene) else {
            continue;
        };
        let mut out = vec![0u8; 16 * 5];
        for r0 in [0, 5] {
            on.burn_rows(r0, &mut out).unwrap();
        }
        let _ = labels.summaries();
    }
}

#[test]
fn mutated_geojson_never_panics() {
    let mut rng = ChaCha8Rng::seed_from_u64(2828);
    let mut read = 0;
    for _ in 0..4000 {
        let doc = mutate(&mut rng, GEOJSON.as_bytes(), true);
        if let Ok(layer) = read_geojson("fuzz.geojson", &doc) {
            read += 1;
            burn(layer);
        }
    }
    // The mutations must leave many documents readable, or the burning is not exercised.
    assert!(read > 1000, "{read}");
}

fn shapefile_seed() -> (Vec<u8>, Vec<u8>) {
    use shapefile::dbase::{FieldValue, Record, TableWriterBuilder};
    use shapefile::{Point, Polygon, PolygonRing, ShapeWriter, Writer};
    let (mut shp, mut shx, mut dbf) = (
        Cursor::new(Vec::new()),
        Cursor::new(Vec::new()),
        Cursor::new(Vec::new()),
    );
    {
        let table = TableWriterBuilder::new().add_character_field("crop".try_into().unwrap(), 12);
        let mut w = Writer::new(
            ShapeWriter::with_shx(&mut shp, &mut shx),
            table.build_with_dest(&mut dbf),
        );
        let pts = |v: &[(f64, f64)]| {
            v.iter()
                .map(|&(x, y)| Point::new(499_996.0 + x, 1_499_990.0 + y))
                .collect::<Vec<_>>()
        };
        for k in 0..4 {
            let o = k as f64 * 3.0;
            let s = Polygon::with_rings(vec![
                PolygonRing::Outer(pts(&[
                    (o, 0.0),
                    (o, 9.0),
                    (o + 8.0, 9.0),
                    (o + 8.0, 0.0),
                    (o, 0.0),
                ])),
                PolygonRing::Inner(pts(&[
                    (o + 2.0, 2.0),
                    (o + 4.0, 2.0),
                    (o + 4.0, 4.0),
                    (o + 2.0, 4.0),
                    (o + 2.0, 2.0),
                ])),
            ]);
            let mut r = Record::default();
            r.insert("crop".into(), FieldValue::Character(Some("rice".into())));
            w.write_shape_and_record(&s, &r).unwrap();
        }
    }
    (shp.into_inner(), dbf.into_inner())
}

#[test]
fn mutated_shapefiles_never_panic() {
    let (shp, dbf) = shapefile_seed();
    assert_eq!(
        read_shapefile("seed.shp", &shp, Some(&dbf), None)
            .unwrap()
            .features()
            .len(),
        4
    );
    let mut rng = ChaCha8Rng::seed_from_u64(2929);
    let mut read = 0;
    for i in 0..4000 {
        // Mutate the .shp, the .dbf, or both.
        let s = if i % 3 != 1 {
            mutate(&mut rng, &shp, false)
        } else {
            shp.clone()
        };
        let d = if i % 3 != 0 {
            mutate(&mut rng, &dbf, false)
        } else {
            dbf.clone()
        };
        let prj = (i % 5 == 0).then_some("PROJCS[\"WGS_1984_UTM_Zone_48N\"]");
        if let Ok(layer) = read_shapefile("fuzz.shp", &s, Some(&d), prj) {
            read += 1;
            burn(layer);
        }
    }
    assert!(read > 200, "{read}");
}

/// Regression (found by the fuzzing above): an edge from just inside the raster's right
/// border to far right and below it made GDAL's clipping move the walk's end 1.7e8 columns
/// right of the raster; walking those empty columns took 25 s (this test then hangs).
#[test]
fn an_edge_leaving_far_right_of_the_raster_is_walked_quickly() {
    let doc = br#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32648"}},"features":[
{"type":"Feature","properties":{},"geometry":{"type":"Polygon","coordinates":[[[499990,0],[500020,1500005],[2147483648,1499980],[499990,1500005],[499990,0]]]}}]}"#;
    burn(read_geojson("edge.geojson", doc).unwrap());
}
