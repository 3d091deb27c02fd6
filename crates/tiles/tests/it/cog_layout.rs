//! The byte layout of `CogWriter`'s files against GDAL's COG definition, read with a TIFF
//! parser written here (not the writer's code): ghost header, every IFD before the data,
//! the smallest overview's tiles first, row-major tiles with size leaders and trailers; and
//! the legend (ColorMap, PAM category names, QGIS style) and band metadata.

use std::collections::BTreeMap;
use std::path::Path;

use tiles::{
    BandInfo, ClassLegend, CogOptions, CogWriter, GeoRef, RasterData, RasterShape, SampleKind,
};

/// One IFD: where it starts and ends (entries and out-of-line values), and its tags' values
/// as integers (or the text of ASCII tags).
struct Ifd {
    start: u64,
    end: u64,
    tags: BTreeMap<u16, Vec<u64>>,
    text: BTreeMap<u16, String>,
}

fn u(b: &[u8], at: u64, n: usize) -> u64 {
    let at = at as usize;
    let mut v = 0u64;
    for i in (0..n).rev() {
        v = v << 8 | b[at + i] as u64;
    }
    v
}

/// Parses a little-endian classic or BigTIFF's IFD chain.
fn parse(b: &[u8]) -> (bool, Vec<Ifd>) {
    assert_eq!(&b[..2], b"II", "little-endian");
    let big = u(b, 2, 2) == 43;
    let mut at = if big { u(b, 8, 8) } else { u(b, 4, 4) };
    let mut ifds = Vec::new();
    while at != 0 {
        let (n, entry, field) = if big {
            (u(b, at, 8), 20, 8)
        } else {
            (u(b, at, 2), 12, 4)
        };
        let first = at + if big { 8 } else { 2 };
        let mut end = first + n * entry + field as u64;
        let mut tags = BTreeMap::new();
        let mut text = BTreeMap::new();
        for i in 0..n {
            let e = first + i * entry;
            let (tag, kind) = (u(b, e, 2) as u16, u(b, e + 2, 2));
            let count = if big { u(b, e + 4, 8) } else { u(b, e + 4, 4) };
            let unit = match kind {
                2 => 1,
                3 => 2,
                4 => 4,
                12 | 16 => 8,
                other => panic!("tag {tag}: unexpected type {other}"),
            };
            let len = unit * count;
            let value_at = e + if big { 12 } else { 8 };
            let data = if len as usize <= field {
                value_at
            } else {
                let off = u(b, value_at, field);
                end = end.max(off + len);
                off
            };
            if kind == 2 {
                let s = &b[data as usize..(data + len) as usize];
                text.insert(
                    tag,
                    String::from_utf8_lossy(s).trim_end_matches('\0').into(),
                );
            } else if kind != 12 {
                let vals = (0..count).map(|k| u(b, data + k * unit, unit as usize));
                tags.insert(tag, vals.collect());
            }
        }
        ifds.push(Ifd {
            start: at,
            end,
            tags,
            text,
        });
        at = u(b, first + n * entry, field);
    }
    (big, ifds)
}

/// Writes a `w × h × bands` raster of `kind` with deterministic content.
fn write(path: &Path, shape: RasterShape, geo: Option<&GeoRef>, legend: Option<ClassLegend>) {
    let options = CogOptions {
        tile: 64,
        min_overview: 40,
        ..CogOptions::default()
    };
    let mut w = CogWriter::create(path, shape, geo, options).unwrap();
    if let Some(l) = legend {
        w = w.with_legend(l).unwrap();
    }
    let n = shape.width * shape.height * shape.bands;
    let data = match shape.kind {
        SampleKind::U8 => RasterData::U8((0..n).map(|i| (i * 7 % 13) as u8).collect()),
        SampleKind::U16 => RasterData::U16((0..n).map(|i| (i * 31 % 1000) as u16).collect()),
        SampleKind::F32 => RasterData::F32((0..n).map(|i| (i % 97) as f32 * 0.01).collect()),
    };
    w.write_rows(&data).unwrap();
    w.finish().unwrap();
}

/// Checks GDAL's COG rules on `path`; returns its IFDs' sizes (full resolution first).
fn check_cog(path: &Path) -> Vec<(u64, u64)> {
    let b = std::fs::read(path).unwrap();
    let (big, ifds) = parse(&b);
    // The ghost header right after the TIFF header, its size counting what follows line 1.
    let ghost_at = if big { 16 } else { 8 };
    let line: String = b[ghost_at..ghost_at + 43]
        .iter()
        .map(|&c| c as char)
        .collect();
    assert!(
        line.starts_with("GDAL_STRUCTURAL_METADATA_SIZE="),
        "{line:?}"
    );
    assert!(line.ends_with(" bytes\n"), "{line:?}");
    let size: usize = line[30..36].parse().unwrap();
    let body = String::from_utf8(b[ghost_at + 43..ghost_at + 43 + size].to_vec()).unwrap();
    for key in [
        "LAYOUT=IFDS_BEFORE_DATA\n",
        "BLOCK_ORDER=ROW_MAJOR\n",
        "BLOCK_LEADER=SIZE_AS_UINT4\n",
        "BLOCK_TRAILER=LAST_4_BYTES_REPEATED\n",
        "KNOWN_INCOMPATIBLE_EDITION=NO\n",
    ] {
        assert!(body.contains(key), "ghost header lacks {key:?}: {body:?}");
    }
    let first = (ghost_at + 43 + size) as u64;
    assert_eq!(
        ifds[0].start,
        first + first % 2,
        "the main IFD follows the ghost header"
    );

    // Every IFD (and its values) before any tile, in the order full, largest, …, smallest.
    let ifds_end = ifds.iter().map(|i| i.end).max().unwrap();
    for pair in ifds.windows(2) {
        assert!(
            pair[0].start < pair[1].start,
            "IFDs in decreasing size order"
        );
    }
    // The data: smallest level first, each level row-major and contiguous, each tile with its
    // leader and trailer, the file ending with the full resolution's last tile.
    let mut at = ifds_end + ifds_end % 2;
    for ifd in ifds.iter().rev() {
        let offsets = &ifd.tags[&324];
        let counts = &ifd.tags[&325];
        assert_eq!(offsets.len(), counts.len());
        for (&o, &c) in offsets.iter().zip(counts) {
            assert!(o > ifds_end, "tile at {o} inside the IFDs (end {ifds_end})");
            assert_eq!(o, at + 4, "tiles follow each other in row-major order");
            assert_eq!(u(&b, o - 4, 4), c, "leader holds the byte count");
            let (o, c) = (o as usize, c as usize);
            assert_eq!(b[o + c - 4..o + c], b[o + c..o + c + 4], "trailer repeats");
            at = (o + c + 4) as u64;
        }
    }
    assert_eq!(
        at,
        b.len() as u64,
        "nothing after the full resolution's last tile"
    );
    ifds.iter()
        .map(|i| (i.tags[&256][0], i.tags[&257][0]))
        .collect()
}

fn shape(width: usize, height: usize, bands: usize, kind: SampleKind) -> RasterShape {
    RasterShape {
        width,
        height,
        bands,
        kind,
    }
}

#[test]
fn the_layout_is_gdals_cog_for_odd_sizes_bands_and_no_overviews() {
    let dir = tempfile::tempdir().unwrap();
    for (w, h, bands, kind, levels) in [
        // 300x170 -> 150x85 -> 75x43 -> 38x22
        (300, 170, 1, SampleKind::U8, 4),
        (131, 77, 3, SampleKind::F32, 3),
        (40, 17, 2, SampleKind::U16, 1),
    ] {
        let path = dir.path().join(format!("{w}x{h}.tif"));
        write(&path, shape(w, h, bands, kind), None, None);
        let sizes = check_cog(&path);
        assert_eq!(sizes.len(), levels, "{w}x{h}");
        assert_eq!(sizes[0], (w as u64, h as u64));
        // The pixels read back with the `tiff` crate (IFD 0).
        let (back, _) = tiles::read_image(&path).unwrap();
        assert_eq!((back.width, back.height, back.bands), (w, h, bands));
    }
}

#[test]
fn a_legend_is_a_colour_map_category_names_and_a_qgis_style() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("classes.tif");
    let geo = GeoRef {
        transform: [500_000.0, 10.0, 0.0, 4_200_000.0, 0.0, -10.0],
        geo_key_directory: None,
        geo_double_params: None,
        geo_ascii_params: None,
        nodata: Some(255.0),
    };
    let legend = ClassLegend {
        colours: vec![[40, 40, 40], [0, 200, 80]],
        names: vec!["background".into(), "rice & paddy".into()],
    };
    write(
        &path,
        shape(150, 90, 1, SampleKind::U8),
        Some(&geo),
        Some(legend),
    );
    check_cog(&path);
    let b = std::fs::read(&path).unwrap();
    let (_, ifds) = parse(&b);
    for ifd in &ifds {
        assert_eq!(ifd.tags[&262], [3], "photometric palette");
        let map = &ifd.tags[&320];
        assert_eq!(map.len(), 768);
        assert_eq!((map[1], map[257], map[513]), (0, 200 * 257, 80 * 257));
        assert_eq!(ifd.text[&42113], "255", "nodata on every level");
    }
    let pam = std::fs::read_to_string(dir.path().join("classes.tif.aux.xml")).unwrap();
    assert!(pam.contains(
        "<CategoryNames>\n      <Category>background</Category>\n      \
         <Category>rice &amp; paddy</Category>\n    </CategoryNames>"
    ));
    let qml = std::fs::read_to_string(dir.path().join("classes.qml")).unwrap();
    assert!(qml.contains("value=\"1\" color=\"#00c850\" alpha=\"255\" label=\"rice &amp; paddy\""));

    // A legend is for one u8 band.
    let w = CogWriter::create(
        &dir.path().join("f.tif"),
        shape(10, 10, 1, SampleKind::F32),
        None,
        CogOptions::default(),
    )
    .unwrap();
    let e = w.with_legend(ClassLegend::default()).err().unwrap();
    assert!(e.to_string().contains("one u8 band"), "{e}");
}

#[test]
fn band_names_and_scale_go_to_gdal_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prob.tif");
    let mut w = CogWriter::create(
        &path,
        shape(20, 10, 2, SampleKind::U8),
        None,
        CogOptions::default(),
    )
    .unwrap()
    .with_band_info(BandInfo {
        names: vec!["a".into(), "b".into()],
        scale_offset: Some((0.5, 0.0)),
    })
    .unwrap();
    w.write_rows(&RasterData::U8(vec![3; 400])).unwrap();
    w.finish().unwrap();
    let b = std::fs::read(&path).unwrap();
    let (_, ifds) = parse(&b);
    let xml = &ifds[0].text[&42112];
    for item in [
        "<Item name=\"SCALE\" sample=\"1\" role=\"scale\">0.5</Item>",
        "<Item name=\"OFFSET\" sample=\"0\" role=\"offset\">0.0</Item>",
        "<Item name=\"DESCRIPTION\" sample=\"1\" role=\"description\">b</Item>",
    ] {
        assert!(xml.contains(item), "{item} not in {xml}");
    }
    assert_eq!(
        ifds[0].tags[&338],
        [0],
        "the second band is an extra sample"
    );
}
