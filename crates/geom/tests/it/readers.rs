//! Readers on files written in the test: GeoJSON text, a Shapefile written with the
//! `shapefile` crate, a FlatGeobuf written with the `flatgeobuf` crate.

use std::io::Cursor;

use geo_types::MultiPolygon;
use geom::{GeomError, read_flatgeobuf, read_geojson, read_shapefile};

use crate::{poly, rect};

fn rings(mp: &MultiPolygon<f64>) -> Vec<Vec<Vec<(f64, f64)>>> {
    mp.0.iter()
        .map(|p| {
            std::iter::once(p.exterior())
                .chain(p.interiors())
                .map(|r| r.0.iter().map(|c| (c.x, c.y)).collect())
                .collect()
        })
        .collect()
}

#[test]
fn geojson_polygons_multipolygons_holes_and_attributes() {
    let text = br#"{"type":"FeatureCollection","features":[
      {"type":"Feature","id":"f-a","properties":{"crop":"rice","n":3},"geometry":{"type":"Polygon",
        "coordinates":[[[0,0],[10,0],[10,10],[0,10],[0,0]],[[2,2],[4,2],[4,4],[2,4],[2,2]]]}},
      {"type":"Feature","properties":{"crop":null,"n":2.5},"geometry":{"type":"MultiPolygon",
        "coordinates":[[[[20,0],[30,0],[30,5],[20,0]]],[[[40,0],[45,0],[45,5],[40,0]]]]}},
      {"type":"Feature","properties":{"crop":"maize"},"geometry":{"type":"Point","coordinates":[1,2]}},
      {"type":"Feature","properties":{"crop":"x"},"geometry":null},
      {"type":"Feature","properties":{"crop":"open"},"geometry":{"type":"Polygon",
        "coordinates":[[[0,0],[1,0],[1,1]]]}},
      {"type":"Feature","properties":{"crop":"bowtie"},"geometry":{"type":"Polygon",
        "coordinates":[[[0,0],[2,2],[2,0],[0,2],[0,0]]]}},
      {"type":"Feature","properties":{"crop":"line"},"geometry":{"type":"Polygon",
        "coordinates":[[[0,0],[1,1],[0,0]]]}}
    ]}"#;
    let layer = read_geojson("fields.geojson", text).unwrap();
    assert_eq!(layer.crs().unwrap().epsg(), Some(4326));
    assert_eq!(layer.fields(), ["crop", "n"]);
    let f = layer.features();
    assert_eq!(f.len(), 4);
    assert_eq!(f[0].id, "f-a");
    assert_eq!(
        f[0].attributes,
        [Some("rice".to_string()), Some("3".to_string())]
    );
    assert_eq!(rings(&f[0].geometry)[0].len(), 2, "exterior and one hole");
    assert_eq!((f[1].id.as_str(), f[1].geometry.0.len()), ("#1", 2));
    assert_eq!(f[1].attributes, [None, Some("2.5".to_string())]);
    // The unclosed ring was closed.
    assert_eq!(
        rings(&f[2].geometry)[0][0],
        [(0.0, 0.0), (1.0, 0.0), (1.0, 1.0), (0.0, 0.0)]
    );
    let issues = layer.issues();
    assert_eq!(issues.skipped_not_polygonal.first_ids, ["#2"]);
    assert_eq!(issues.skipped_empty.first_ids, ["#3", "#6"]);
    assert_eq!(issues.closed_rings.first_ids, ["#4"]);
    assert_eq!(issues.self_intersecting.first_ids, ["#5"]);
    assert_eq!(issues.dropped_rings.first_ids, ["#6"]);
    assert!(
        issues
            .lines()
            .iter()
            .any(|l| l.starts_with("1 (#5) features self-intersect"))
    );
}

#[test]
fn geojson_legacy_crs_member_and_errors() {
    let utm = br#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"urn:ogc:def:crs:EPSG::32648"}},"features":[]}"#;
    let layer = read_geojson("utm.geojson", utm).unwrap();
    assert_eq!(layer.crs().unwrap().epsg(), Some(32648));
    assert!(layer.features().is_empty());
    let bad = br#"{"type":"FeatureCollection","crs":{"type":"name","properties":{"name":"EPSG:999999"}},"features":[]}"#;
    let err = read_geojson("bad.geojson", bad).unwrap_err().to_string();
    assert!(
        err.starts_with("reading layer bad.geojson: its `crs` member"),
        "{err}"
    );
    let err = read_geojson("t.geojson", b"{\"type\":")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("reading layer t.geojson: not GeoJSON"),
        "{err}"
    );
}

fn shapefile_bytes(prj: bool) -> (Vec<u8>, Vec<u8>, Option<String>) {
    use shapefile::dbase::{FieldValue, Record, TableWriterBuilder};
    use shapefile::{Point, Polygon, PolygonRing, ShapeWriter, Writer};
    let (mut shp, mut shx, mut dbf) = (
        Cursor::new(Vec::new()),
        Cursor::new(Vec::new()),
        Cursor::new(Vec::new()),
    );
    {
        let table = TableWriterBuilder::new()
            .add_character_field("crop".try_into().unwrap(), 20)
            .add_numeric_field("code".try_into().unwrap(), 6, 0);
        let mut w = Writer::new(
            ShapeWriter::with_shx(&mut shp, &mut shx),
            table.build_with_dest(&mut dbf),
        );
        let pts = |v: &[(f64, f64)]| v.iter().map(|&(x, y)| Point::new(x, y)).collect::<Vec<_>>();
        // A field with a hole, and a second outer ring: two polygons in one record.
        let shapes = [
            Polygon::with_rings(vec![
                PolygonRing::Outer(pts(&[
                    (0.0, 0.0),
                    (0.0, 10.0),
                    (10.0, 10.0),
                    (10.0, 0.0),
                    (0.0, 0.0),
                ])),
                PolygonRing::Inner(pts(&[
                    (2.0, 2.0),
                    (4.0, 2.0),
                    (4.0, 4.0),
                    (2.0, 4.0),
                    (2.0, 2.0),
                ])),
                PolygonRing::Outer(pts(&[
                    (20.0, 0.0),
                    (20.0, 5.0),
                    (25.0, 5.0),
                    (25.0, 0.0),
                    (20.0, 0.0),
                ])),
            ]),
            Polygon::new(PolygonRing::Outer(pts(&[
                (30.0, 0.0),
                (30.0, 3.0),
                (33.0, 3.0),
                (30.0, 0.0),
            ]))),
        ];
        for (i, s) in shapes.iter().enumerate() {
            let mut r = Record::default();
            r.insert(
                "crop".into(),
                FieldValue::Character(Some(["rice", "maize"][i].into())),
            );
            r.insert("code".into(), FieldValue::Numeric(Some(i as f64 + 1.0)));
            w.write_shape_and_record(s, &r).unwrap();
        }
    }
    let prj = prj.then(|| {
        r#"PROJCS["WGS_1984_UTM_Zone_48N",GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]],PROJECTION["Transverse_Mercator"],PARAMETER["False_Easting",500000.0],PARAMETER["False_Northing",0.0],PARAMETER["Central_Meridian",105.0],PARAMETER["Scale_Factor",0.9996],PARAMETER["Latitude_Of_Origin",0.0],UNIT["Meter",1.0]]"#.to_string()
    });
    (shp.into_inner(), dbf.into_inner(), prj)
}

#[test]
fn shapefile_written_by_the_shapefile_crate() {
    let (shp, dbf, prj) = shapefile_bytes(true);
    let layer = read_shapefile("fields.shp", &shp, Some(&dbf), prj.as_deref()).unwrap();
    assert_eq!(layer.crs().unwrap().epsg(), Some(32648));
    assert_eq!(layer.fields(), ["crop", "code"]);
    let f = layer.features();
    assert_eq!(f.len(), 2);
    assert_eq!(
        f[0].attributes,
        [Some("rice".to_string()), Some("1".to_string())]
    );
    assert_eq!(f[1].attributes[0].as_deref(), Some("maize"));
    let r = rings(&f[0].geometry);
    assert_eq!(
        (r.len(), r[0].len(), r[1].len()),
        (2, 2, 1),
        "the hole joined the first outer ring"
    );
    assert_eq!(r[0][1][0], (2.0, 2.0));
    assert!(layer.issues().lines().is_empty(), "{:?}", layer.issues());
}

#[test]
fn shapefile_without_prj_has_no_crs_until_given() {
    use geom::{ClassMapping, LabelOptions, Labels, Overlap, Unlabelled};
    let (shp, dbf, _) = shapefile_bytes(false);
    let layer = read_shapefile("fields.shp", &shp, Some(&dbf), None).unwrap();
    assert!(layer.crs().is_none());
    let options = LabelOptions {
        classes: ClassMapping::all(1),
        all_touched: false,
        overlap: Overlap::LaterWins,
        unlabelled: Unlabelled::Ignore,
    };
    let err = Labels::new(vec![layer.clone()], None, options.clone())
        .err()
        .unwrap()
        .to_string();
    assert_eq!(
        err,
        "layer fields.shp has no CRS (no .prj file); give it explicitly (--labels-crs EPSG:<code>)"
    );
    let mut layer = layer;
    layer.set_crs(geom::Crs::parse("EPSG:32648").unwrap());
    assert!(Labels::new(vec![layer], None, options).is_ok());
    // A .dbf that does not match the .shp.
    let err = read_shapefile("fields.shp", &shp, Some(&dbf[..40]), None).unwrap_err();
    assert!(matches!(err, GeomError::Read { .. }), "{err}");
}

#[test]
fn flatgeobuf_written_by_the_flatgeobuf_crate() {
    use flatgeobuf::{ColumnType, FgbCrs, FgbWriter, FgbWriterOptions, GeometryType};
    use geozero::{ColumnValue, PropertyProcessor};
    let mut w = FgbWriter::create_with_options(
        "fields",
        GeometryType::MultiPolygon,
        FgbWriterOptions {
            crs: FgbCrs {
                code: 32648,
                ..Default::default()
            },
            ..Default::default()
        },
    )
    .unwrap();
    w.add_column("crop", ColumnType::String, |_, _| {});
    w.add_column("area", ColumnType::Double, |_, _| {});
    let shapes = [
        MultiPolygon(vec![poly(
            &[(0.0, 0.0), (10.0, 0.0), (10.0, 10.0), (0.0, 10.0)],
            &[&[(2.0, 2.0), (4.0, 2.0), (4.0, 4.0), (2.0, 4.0)]],
        )]),
        MultiPolygon(vec![rect(20.0, 0.0, 25.0, 5.0), rect(30.0, 0.0, 31.0, 1.0)]),
    ];
    for (i, mp) in shapes.iter().enumerate() {
        let g = geo_types::Geometry::MultiPolygon(mp.clone());
        w.add_feature_geom(g, |feat| {
            feat.property(0, "crop", &ColumnValue::String(["rice", "fallow"][i]))
                .unwrap();
            feat.property(1, "area", &ColumnValue::Double(i as f64 + 0.5))
                .unwrap();
        })
        .unwrap();
    }
    let mut bytes = Vec::new();
    w.write(&mut bytes).unwrap();
    let layer = read_flatgeobuf("fields.fgb", &bytes).unwrap();
    assert_eq!(layer.crs().unwrap().epsg(), Some(32648));
    assert_eq!(layer.fields(), ["crop", "area"]);
    // The writer's spatial index orders features along a Hilbert curve: find them by name.
    let f = layer.features();
    assert_eq!(f.len(), 2);
    let by = |crop: &str| {
        f.iter()
            .find(|f| f.attributes[0].as_deref() == Some(crop))
            .unwrap()
    };
    assert_eq!(by("rice").attributes[1].as_deref(), Some("0.5"));
    assert_eq!(by("fallow").attributes[1].as_deref(), Some("1.5"));
    assert_eq!(rings(&by("rice").geometry), rings(&shapes[0]));
    assert_eq!(rings(&by("fallow").geometry), rings(&shapes[1]));
    assert!(read_flatgeobuf("x.fgb", b"not fgb").is_err());
}
