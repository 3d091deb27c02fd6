//! CRSs from user strings and `.prj` WKT, and reprojection against known coordinates.

use geom::{Crs, GeomError, Reprojector};

#[test]
fn user_strings() {
    for (text, code) in [
        ("EPSG:32648", 32648),
        ("epsg:4326", 4326),
        ("urn:ogc:def:crs:EPSG::32633", 32633),
        ("urn:ogc:def:crs:OGC:1.3:CRS84", 4326),
        ("urn:ogc:def:crs:EPSG:6.6:3857", 3857),
    ] {
        assert_eq!(Crs::parse(text).unwrap().epsg(), Some(code), "{text}");
    }
    assert_eq!(
        Crs::parse("EPSG:32648").unwrap().describe(),
        "EPSG:32648 (WGS 84 / UTM zone 48N)"
    );
    let err = Crs::parse("UTM48").unwrap_err().to_string();
    assert!(
        err.contains("`UTM48`") && err.contains("EPSG:<code>"),
        "{err}"
    );
    let err = Crs::parse("EPSG:1").unwrap_err().to_string();
    assert!(err.contains("EPSG:1 is not"), "{err}");
}

/// What GDAL writes as a Shapefile's `.prj` for EPSG:32648 (ESRI WKT, no authority).
const ESRI_UTM48N: &str = r#"PROJCS["WGS_1984_UTM_Zone_48N",GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]],PROJECTION["Transverse_Mercator"],PARAMETER["False_Easting",500000.0],PARAMETER["False_Northing",0.0],PARAMETER["Central_Meridian",105.0],PARAMETER["Scale_Factor",0.9996],PARAMETER["Latitude_Of_Origin",0.0],UNIT["Meter",1.0]]"#;

#[test]
fn prj_wkt_resolves_to_epsg_codes() {
    let cases: &[(&str, u32)] = &[
        (ESRI_UTM48N, 32648),
        (
            r#"GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]]"#,
            4326,
        ),
        // An unusual name, but UTM's parameters on WGS 84, southern hemisphere, zone 20.
        (
            r#"PROJCS["my field grid",GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]],PROJECTION["Transverse_Mercator"],PARAMETER["False_Easting",500000.0],PARAMETER["False_Northing",10000000.0],PARAMETER["Central_Meridian",-63.0],PARAMETER["Scale_Factor",0.9996],PARAMETER["Latitude_Of_Origin",0.0],UNIT["Meter",1.0]]"#,
            32720,
        ),
        (
            r#"PROJCS["NAD_1983_UTM_Zone_10N",GEOGCS["GCS_North_American_1983",DATUM["D_North_American_1983",SPHEROID["GRS_1980",6378137.0,298.257222101]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]],PROJECTION["Transverse_Mercator"],PARAMETER["False_Easting",500000.0],PARAMETER["False_Northing",0.0],PARAMETER["Central_Meridian",-123.0],PARAMETER["Scale_Factor",0.9996],PARAMETER["Latitude_Of_Origin",0.0],UNIT["Meter",1.0]]"#,
            26910,
        ),
        (
            r#"PROJCS["WGS_1984_Web_Mercator_Auxiliary_Sphere",GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]],PROJECTION["Mercator_Auxiliary_Sphere"],UNIT["Meter",1.0]]"#,
            3857,
        ),
        // OGC WKT1 with authorities: the outermost one counts, not the datum's or the unit's.
        (
            r#"PROJCS["ETRS89 / UTM zone 32N",GEOGCS["ETRS89",DATUM["European_Terrestrial_Reference_System_1989",SPHEROID["GRS 1980",6378137,298.257222101,AUTHORITY["EPSG","7019"]],AUTHORITY["EPSG","6258"]],PRIMEM["Greenwich",0,AUTHORITY["EPSG","8901"]],UNIT["degree",0.0174532925199433,AUTHORITY["EPSG","9122"]],AUTHORITY["EPSG","4258"]],PROJECTION["Transverse_Mercator"],PARAMETER["latitude_of_origin",0],PARAMETER["central_meridian",9],PARAMETER["scale_factor",0.9996],PARAMETER["false_easting",500000],PARAMETER["false_northing",0],UNIT["metre",1,AUTHORITY["EPSG","9001"]],AXIS["Easting",EAST],AXIS["Northing",NORTH],AUTHORITY["EPSG","25832"]]"#,
            25832,
        ),
        // WKT2 with an ID.
        (
            r#"PROJCRS["WGS 84 / UTM zone 31N",BASEGEOGCRS["WGS 84",DATUM["World Geodetic System 1984",ELLIPSOID["WGS 84",6378137,298.257223563]]],CONVERSION["UTM zone 31N",METHOD["Transverse Mercator"]],CS[Cartesian,2],ID["EPSG",32631]]"#,
            32631,
        ),
    ];
    for &(wkt, code) in cases {
        assert_eq!(Crs::from_wkt(wkt).unwrap().epsg(), Some(code), "{wkt}");
    }
}

#[test]
fn unresolvable_prj_is_a_clear_error() {
    let lambert = r#"PROJCS["Local_Lambert",GEOGCS["GCS_Bessel_1841",DATUM["D_Bessel_1841",SPHEROID["Bessel_1841",6377397.155,299.1528128]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]],PROJECTION["Lambert_Conformal_Conic"],PARAMETER["Central_Meridian",10.0],UNIT["Meter",1.0]]"#;
    let err = Crs::from_wkt(lambert).unwrap_err();
    assert!(matches!(err, GeomError::UnknownCrs { .. }));
    let msg = err.to_string();
    assert!(
        msg.contains("PROJCS \"Local_Lambert\"") && msg.contains("EPSG:<code>"),
        "{msg}"
    );
    for broken in [
        "PROJCS[\"x\"",
        "",
        "GEOGCS[\"a\" junk",
        "[[[[",
        "PROJCS[\"a\"]]]",
    ] {
        assert!(Crs::from_wkt(broken).is_err(), "{broken}");
    }
}

#[test]
fn reprojection_matches_known_coordinates() {
    // EPSG:4326 → EPSG:32648: (105°E, 0°) is the zone's origin (500000, 0); (103°E, 15°N)
    // is (284946.983159, 1659297.727507) by PROJ 9.5.1 (pyproj 3.7.2).
    let to_utm = Reprojector::new(&Crs::wgs84(), &Crs::parse("EPSG:32648").unwrap()).unwrap();
    let (x, y) = to_utm.transform(105.0, 0.0).unwrap();
    assert!((x - 500_000.0).abs() < 1e-6 && y.abs() < 1e-6, "{x} {y}");
    let (x, y) = to_utm.transform(103.0, 15.0).unwrap();
    assert!(
        (x - 284_946.983_159).abs() < 1e-5 && (y - 1_659_297.727_507).abs() < 1e-5,
        "{x} {y}"
    );
    // Round trips through another zone and back stay within a micrometre.
    let utm47 = Crs::parse("EPSG:32647").unwrap();
    let there = Reprojector::new(&Crs::parse("EPSG:32648").unwrap(), &utm47).unwrap();
    let back = Reprojector::new(&utm47, &Crs::parse("EPSG:32648").unwrap()).unwrap();
    for (x, y) in [
        (284_930.37, 1_659_349.57),
        (500_000.0, 1_500_000.0),
        (700_000.0, 10_000.0),
    ] {
        let (u, v) = there.transform(x, y).unwrap();
        let (x2, y2) = back.transform(u, v).unwrap();
        assert!(
            (x2 - x).abs() < 1e-6 && (y2 - y).abs() < 1e-6,
            "{x} {y} → {x2} {y2}"
        );
    }
    assert!(
        Reprojector::new(&Crs::wgs84(), &Crs::wgs84())
            .unwrap()
            .is_identity()
    );
}
