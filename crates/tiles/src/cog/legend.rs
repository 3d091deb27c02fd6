//! What GIS tools show of a raster besides its pixels: a class map's colours (a TIFF
//! `ColorMap`) and class names (GDAL category names in a PAM `<file>.aux.xml`, and a QGIS
//! style `<stem>.qml`), and bands' names and scale/offset (GDAL's `GDAL_METADATA` tag).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::layout::Value;

/// The legend of a class map (one `u8` band of class indices).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassLegend {
    /// The RGB colour of class `i`, at most 256; values without a colour are black. Written
    /// as the TIFF `ColorMap` (photometric "palette"), which GDAL, rasterio and QGIS read as
    /// the band's colour table; GDAL gives the entry of the `GDAL_NODATA` value alpha 0.
    pub colours: Vec<[u8; 3]>,
    /// The name of class `i`: GDAL's category names (a PAM `<file>.aux.xml` sidecar) and the
    /// labels of the QGIS style (`<stem>.qml`). Empty: neither file is written.
    pub names: Vec<String>,
}

/// What GDAL reports of a raster's bands: their descriptions and how stored values map to
/// physical ones. Stored in the `GDAL_METADATA` tag.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BandInfo {
    /// The description of band `i` (GDAL's band description, QGIS's band name).
    pub names: Vec<String>,
    /// `(scale, offset)` for every band: the physical value is `stored × scale + offset`
    /// (GDAL's `GetScale`/`GetOffset`), e.g. `(1/254, 0)` for probabilities stored as bytes.
    pub scale_offset: Option<(f64, f64)>,
}

impl BandInfo {
    /// The `GDAL_METADATA` XML, or `None` when there is nothing to say.
    pub(super) fn gdal_metadata(&self, bands: usize) -> Option<Value> {
        if self.names.is_empty() && self.scale_offset.is_none() {
            return None;
        }
        let mut xml = String::from("<GDALMetadata>\n");
        for b in 0..bands {
            if let Some((scale, offset)) = self.scale_offset {
                // `{:?}` keeps every digit of the f64 (shortest round-trip form).
                let _ = writeln!(
                    xml,
                    "  <Item name=\"OFFSET\" sample=\"{b}\" role=\"offset\">{offset:?}</Item>"
                );
                let _ = writeln!(
                    xml,
                    "  <Item name=\"SCALE\" sample=\"{b}\" role=\"scale\">{scale:?}</Item>"
                );
            }
            if let Some(name) = self.names.get(b) {
                let _ = writeln!(
                    xml,
                    "  <Item name=\"DESCRIPTION\" sample=\"{b}\" role=\"description\">{}</Item>",
                    escape(name)
                );
            }
        }
        xml.push_str("</GDALMetadata>");
        Some(Value::Ascii(xml))
    }
}

impl ClassLegend {
    /// The TIFF `ColorMap` of a `u8` band: 256 reds, then greens, then blues, 16-bit.
    pub(super) fn colour_map(&self) -> Value {
        let mut map = vec![0u16; 3 * 256];
        for (i, rgb) in self.colours.iter().take(256).enumerate() {
            for (c, &v) in rgb.iter().enumerate() {
                // 8 bits to 16: 255 → 65535, as GDAL writes (and divides back by 257).
                map[c * 256 + i] = v as u16 * 257;
            }
        }
        Value::Short(map)
    }

    /// The PAM sidecar GDAL reads category names from.
    pub(super) fn pam_xml(&self) -> String {
        let mut xml =
            String::from("<PAMDataset>\n  <PAMRasterBand band=\"1\">\n    <CategoryNames>\n");
        for name in &self.names {
            let _ = writeln!(xml, "      <Category>{}</Category>", escape(name));
        }
        xml.push_str("    </CategoryNames>\n  </PAMRasterBand>\n</PAMDataset>\n");
        xml
    }

    /// A QGIS style (paletted renderer) with the names and colours; `nodata` transparent.
    pub(super) fn qml(&self, nodata: Option<f64>) -> String {
        let mut xml = String::from(
            "<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>\n\
             <qgis version=\"3.28\" styleCategories=\"Symbology\">\n  <pipe>\n    \
             <rasterrenderer type=\"paletted\" band=\"1\" opacity=\"1\" alphaBand=\"-1\">\n      \
             <colorPalette>\n",
        );
        for (i, name) in self.names.iter().enumerate() {
            let [r, g, b] = self.colours.get(i).copied().unwrap_or_default();
            let alpha = if nodata == Some(i as f64) { 0 } else { 255 };
            let _ = writeln!(
                xml,
                "        <paletteEntry value=\"{i}\" color=\"#{r:02x}{g:02x}{b:02x}\" \
                 alpha=\"{alpha}\" label=\"{}\"/>",
                escape(name)
            );
        }
        xml.push_str("      </colorPalette>\n    </rasterrenderer>\n  </pipe>\n</qgis>\n");
        xml
    }
}

/// `<file>.aux.xml`, where GDAL looks for a file's PAM metadata.
pub(super) fn pam_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".aux.xml");
    PathBuf::from(s)
}

/// `<stem>.qml`, the style QGIS loads with a layer by default.
pub(super) fn qml_path(path: &Path) -> PathBuf {
    path.with_extension("qml")
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&apos;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sidecars_escape_names_and_scale_keeps_every_digit() {
        let legend = ClassLegend {
            colours: vec![[40, 40, 40], [0, 200, 80]],
            names: vec!["outer".into(), "rice <paddy> & co".into()],
        };
        assert!(
            legend
                .pam_xml()
                .contains("<Category>rice &lt;paddy&gt; &amp; co</Category>")
        );
        let Value::Short(map) = legend.colour_map() else {
            panic!("a ColorMap is SHORT")
        };
        assert_eq!(
            (map[1], map[256 + 1], map[512 + 1]),
            (0, 200 * 257, 80 * 257)
        );
        assert!(
            legend
                .qml(Some(1.0))
                .contains("color=\"#00c850\" alpha=\"0\"")
        );
        let info = BandInfo {
            names: vec![],
            scale_offset: Some((1.0 / 254.0, 0.0)),
        };
        let Some(Value::Ascii(xml)) = info.gdal_metadata(2) else {
            panic!("scale makes metadata")
        };
        let scale: f64 = xml
            .split("role=\"scale\">")
            .nth(2)
            .and_then(|s| s.split('<').next())
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(scale, 1.0 / 254.0);
        assert_eq!(BandInfo::default().gdal_metadata(3), None);
    }
}
