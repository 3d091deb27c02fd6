//! Resolving a WKT CRS (a Shapefile's `.prj`) to an EPSG code of the bundled table.

use crate::{Crs, GeomError};

/// One WKT node: `KEYWORD[child, child, …]`, children being quoted strings, bare numbers or
/// words, and nodes.
#[derive(Debug)]
enum Item {
    Text(String),
    Node(Node),
}

#[derive(Debug)]
struct Node {
    keyword: String,
    children: Vec<Item>,
}

impl Node {
    fn text(&self, i: usize) -> Option<&str> {
        match self.children.get(i)? {
            Item::Text(t) => Some(t),
            Item::Node(_) => None,
        }
    }

    fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.children.iter().filter_map(|c| match c {
            Item::Node(n) => Some(n),
            Item::Text(_) => None,
        })
    }

    fn child(&self, keyword: &str) -> Option<&Node> {
        self.nodes()
            .find(|n| n.keyword.eq_ignore_ascii_case(keyword))
    }

    /// The node's own EPSG code: a direct `AUTHORITY["EPSG","32648"]` or `ID["EPSG",32648]`.
    fn epsg(&self) -> Option<u32> {
        self.nodes()
            .filter(|n| {
                n.keyword.eq_ignore_ascii_case("AUTHORITY") || n.keyword.eq_ignore_ascii_case("ID")
            })
            .find(|n| n.text(0).is_some_and(|a| a.eq_ignore_ascii_case("EPSG")))
            .and_then(|n| n.text(1)?.trim().parse().ok())
    }

    /// `PARAMETER["name", value]` of a WKT1 projected CRS (case- and underscore-insensitive).
    fn parameter(&self, name: &str) -> Option<f64> {
        self.nodes()
            .filter(|n| n.keyword.eq_ignore_ascii_case("PARAMETER"))
            .find(|n| n.text(0).is_some_and(|p| normalise(p) == normalise(name)))
            .and_then(|n| n.text(1)?.trim().parse().ok())
    }
}

/// Parses WKT into its top node; depth and size are bounded by the input, recursion by a limit.
fn parse(wkt: &str) -> Result<Node, String> {
    let mut p = Parser {
        s: wkt.as_bytes(),
        at: 0,
    };
    p.skip_ws();
    let node = p.node(0)?;
    p.skip_ws();
    if p.at != p.s.len() {
        return Err(format!("unexpected text after the CRS at byte {}", p.at));
    }
    Ok(node)
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.at < self.s.len() && self.s[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn word(&mut self) -> String {
        let start = self.at;
        while self.at < self.s.len() && !b"[](),\"".contains(&self.s[self.at]) {
            self.at += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.at])
            .trim()
            .to_string()
    }

    fn node(&mut self, depth: usize) -> Result<Node, String> {
        if depth > 64 {
            return Err("nested more than 64 levels deep".into());
        }
        let keyword = self.word();
        if keyword.is_empty() {
            return Err(format!("expected a keyword at byte {}", self.at));
        }
        self.skip_ws();
        let close = match self.s.get(self.at) {
            Some(b'[') => b']',
            Some(b'(') => b')',
            _ => return Err(format!("expected `[` after {keyword}")),
        };
        self.at += 1;
        let mut children = Vec::new();
        loop {
            self.skip_ws();
            match self.s.get(self.at) {
                None => return Err(format!("{keyword}[ is never closed")),
                Some(&c) if c == close => {
                    self.at += 1;
                    break;
                }
                Some(b',') => self.at += 1,
                Some(b'"') => {
                    self.at += 1;
                    let mut text = Vec::new();
                    loop {
                        match self.s.get(self.at) {
                            None => return Err("a quoted string is never closed".into()),
                            // WKT escapes a quote by doubling it.
                            Some(b'"') if self.s.get(self.at + 1) == Some(&b'"') => {
                                text.push(b'"');
                                self.at += 2;
                            }
                            Some(b'"') => {
                                self.at += 1;
                                break;
                            }
                            Some(&c) => {
                                text.push(c);
                                self.at += 1;
                            }
                        }
                    }
                    children.push(Item::Text(String::from_utf8_lossy(&text).into_owned()));
                }
                Some(_) => {
                    let start = self.at;
                    let word = self.word();
                    self.skip_ws();
                    if matches!(self.s.get(self.at), Some(b'[') | Some(b'(')) {
                        self.at = start;
                        children.push(Item::Node(self.node(depth + 1)?));
                    } else if word.is_empty() {
                        return Err(format!(
                            "unexpected `{}` at byte {}",
                            self.s[self.at] as char, self.at
                        ));
                    } else {
                        children.push(Item::Text(word));
                    }
                }
            }
        }
        Ok(Node { keyword, children })
    }
}

fn normalise(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

pub(crate) fn resolve(wkt: &str) -> Result<Crs, GeomError> {
    let short: String = wkt.chars().take(80).collect();
    let err = |why: String| GeomError::UnknownCrs {
        crs: if wkt.chars().count() > 80 {
            format!("{short}…")
        } else {
            short.clone()
        },
        why,
    };
    let top = parse(wkt).map_err(|e| err(format!("not readable as WKT: {e}")))?;
    // A WKT2 BOUNDCRS wraps the CRS it describes.
    let top = match top.keyword.to_ascii_uppercase().as_str() {
        "BOUNDCRS" => top
            .child("SOURCECRS")
            .and_then(|s| s.nodes().next())
            .unwrap_or(&top),
        _ => &top,
    };
    let code = top.epsg().or_else(|| by_name_or_parameters(top));
    let Some(code) = code else {
        return Err(err(format!(
            "{} \"{}\" has no EPSG authority and is not a CRS recognised by name; give the \
             layer's CRS explicitly (EPSG:<code>)",
            top.keyword,
            top.text(0).unwrap_or("")
        )));
    };
    Crs::from_epsg(code).ok_or_else(|| {
        err(format!(
            "EPSG:{code} is not a 2-D projected or geographic CRS of the bundled EPSG table"
        ))
    })
}

/// EPSG codes of CRSs commonly written without an authority (ESRI's `.prj`).
fn by_name_or_parameters(top: &Node) -> Option<u32> {
    let kw = top.keyword.to_ascii_uppercase();
    let name = normalise(top.text(0).unwrap_or(""));
    let geog = top
        .child("GEOGCS")
        .or_else(|| top.child("BASEGEOGCRS"))
        .or_else(|| top.child("BASEGEODCRS"));
    let datum = |n: &Node| {
        n.child("DATUM")
            .and_then(|d| d.text(0))
            .map(normalise)
            .unwrap_or_default()
    };
    if matches!(kw.as_str(), "GEOGCS" | "GEOGCRS" | "GEODCRS") {
        return geographic_code(&name, &datum(top));
    }
    if !matches!(kw.as_str(), "PROJCS" | "PROJCRS") {
        return None;
    }
    let base = geog.map(|g| {
        let n = normalise(g.text(0).unwrap_or(""));
        geographic_code(&n, &datum(g)).unwrap_or(0)
    });
    if let Some(code) = utm_by_name(&name) {
        return Some(code);
    }
    if name.contains("webmercator") || name.contains("pseudomercator") {
        return Some(3857);
    }
    // Transverse Mercator with UTM's parameters on WGS 84 / NAD83 / ETRS89.
    let projection = top
        .child("PROJECTION")
        .and_then(|p| p.text(0))
        .map(normalise)?;
    if projection != "transversemercator" {
        return None;
    }
    let lon0 = top.parameter("central_meridian")?;
    let k = top.parameter("scale_factor")?;
    let fe = top.parameter("false_easting")?;
    let fn_ = top.parameter("false_northing")?;
    let lat0 = top.parameter("latitude_of_origin").unwrap_or(0.0);
    let zone = (lon0 + 183.0) / 6.0;
    if (zone - zone.round()).abs() > 1e-9 || !(1.0..=60.0).contains(&zone.round()) {
        return None;
    }
    if k != 0.9996 || fe != 500_000.0 || lat0 != 0.0 {
        return None;
    }
    let zone = zone.round() as u32;
    let north = match fn_ {
        0.0 => true,
        10_000_000.0 => false,
        _ => return None,
    };
    match (base?, north) {
        (4326, true) => Some(32600 + zone),
        (4326, false) => Some(32700 + zone),
        (4269, true) if (1..=23).contains(&zone) => Some(26900 + zone),
        (4258, true) if (28..=38).contains(&zone) => Some(25800 + zone),
        _ => None,
    }
}

fn geographic_code(name: &str, datum: &str) -> Option<u32> {
    let is = |n: &str| name == n || datum == n;
    if is("wgs84") || is("wgs1984") || is("gcswgs1984") || name == "wgs84" || datum == "dwgs1984" {
        Some(4326)
    } else if is("nad83")
        || is("gcsnorthamerican1983")
        || datum == "dnorthamerican1983"
        || datum == "northamericandatum1983"
    {
        Some(4269)
    } else if is("etrs89")
        || is("gcsetrs1989")
        || datum == "detrs1989"
        || datum == "europeanterrestrialreferencesystem1989"
    {
        Some(4258)
    } else {
        None
    }
}

/// `WGS_1984_UTM_Zone_48N`, `WGS 84 / UTM zone 48N`, `NAD_1983_UTM_Zone_10N`,
/// `ETRS_1989_UTM_Zone_32N` (names normalised to lowercase alphanumerics).
fn utm_by_name(name: &str) -> Option<u32> {
    let (datum, rest) = if let Some(r) = name
        .strip_prefix("wgs1984utmzone")
        .or_else(|| name.strip_prefix("wgs84utmzone"))
    {
        (4326, r)
    } else if let Some(r) = name
        .strip_prefix("nad1983utmzone")
        .or_else(|| name.strip_prefix("nad83utmzone"))
    {
        (4269, r)
    } else if let Some(r) = name
        .strip_prefix("etrs1989utmzone")
        .or_else(|| name.strip_prefix("etrs89utmzone"))
    {
        (4258, r)
    } else {
        return None;
    };
    let hemisphere = rest.chars().last()?;
    let zone: u32 = rest[..rest.len() - 1].parse().ok()?;
    if !(1..=60).contains(&zone) {
        return None;
    }
    match (datum, hemisphere) {
        (4326, 'n') => Some(32600 + zone),
        (4326, 's') => Some(32700 + zone),
        (4269, 'n') if (1..=23).contains(&zone) => Some(26900 + zone),
        (4258, 'n') if (28..=38).contains(&zone) => Some(25800 + zone),
        _ => None,
    }
}
