//! The strict Cloud-Optimized GeoTIFF layout, as GDAL's COG driver writes it and its
//! `validate_cloud_optimized_geotiff.py` checks it:
//!
//! 1. the TIFF header, then GDAL's "ghost" structural metadata (`GDAL_STRUCTURAL_METADATA_SIZE`
//!    and the layout promises below) right after it;
//! 2. every IFD (full resolution first, then the overviews from largest to smallest), each
//!    followed by its out-of-line tag values;
//! 3. the tiles, the smallest overview's first and the full resolution's last, each level's in
//!    row-major order, each tile preceded by its byte count (a little-endian `u32`) and followed
//!    by a copy of its last 4 bytes, so a reader can check a range request landed on a whole
//!    tile.
//!
//! The IFDs are written before any tile, so their `TileOffsets` are computed from the byte
//! counts of the spooled tiles (known once every level is complete): the file is assembled in
//! one pass at the end.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};

/// The promises of GDAL's ghost header. The trailing space is GDAL's: the room for rewriting
/// `NO` as `YES` in place when a later edit breaks the layout.
const GHOST_BODY: &str = "LAYOUT=IFDS_BEFORE_DATA\nBLOCK_ORDER=ROW_MAJOR\n\
BLOCK_LEADER=SIZE_AS_UINT4\nBLOCK_TRAILER=LAST_4_BYTES_REPEATED\n\
KNOWN_INCOMPATIBLE_EDITION=NO\n ";

/// The ghost header: a first line giving the size of the rest, then the promises.
pub(super) fn ghost_header() -> String {
    format!(
        "GDAL_STRUCTURAL_METADATA_SIZE={:06} bytes\n{GHOST_BODY}",
        GHOST_BODY.len()
    )
}

/// One TIFF tag's values, stored in the file's (native) byte order.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Short(Vec<u16>),
    Long(Vec<u32>),
    Long8(Vec<u64>),
    Double(Vec<f64>),
    /// Text without the terminating NUL (added when stored).
    Ascii(String),
}

impl Value {
    fn type_code(&self) -> u16 {
        match self {
            Value::Ascii(_) => 2,
            Value::Short(_) => 3,
            Value::Long(_) => 4,
            Value::Double(_) => 12,
            Value::Long8(_) => 16,
        }
    }

    fn count(&self) -> u64 {
        match self {
            Value::Short(v) => v.len() as u64,
            Value::Long(v) => v.len() as u64,
            Value::Long8(v) => v.len() as u64,
            Value::Double(v) => v.len() as u64,
            Value::Ascii(s) => s.len() as u64 + 1,
        }
    }

    fn byte_len(&self) -> u64 {
        let unit = match self {
            Value::Ascii(_) => 1,
            Value::Short(_) => 2,
            Value::Long(_) => 4,
            Value::Double(_) | Value::Long8(_) => 8,
        };
        unit * self.count()
    }

    fn bytes(&self) -> Vec<u8> {
        match self {
            Value::Short(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            Value::Long(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            Value::Long8(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            Value::Double(v) => v.iter().flat_map(|x| x.to_ne_bytes()).collect(),
            Value::Ascii(s) => s.bytes().chain([0]).collect(),
        }
    }
}

/// One image file directory: tags in ascending order, as TIFF requires.
#[derive(Clone, Debug, Default)]
pub(super) struct Ifd(pub BTreeMap<u16, Value>);

impl Ifd {
    pub fn set(&mut self, tag: u16, value: Value) {
        self.0.insert(tag, value);
    }

    /// The entries' block (count, entries, next-IFD offset).
    fn head_len(&self, big: bool) -> u64 {
        let n = self.0.len() as u64;
        if big { 8 + 20 * n + 8 } else { 2 + 12 * n + 4 }
    }

    /// The values too large for their entry, each padded to an even length.
    fn values_len(&self, big: bool) -> u64 {
        let inline = if big { 8 } else { 4 };
        self.0
            .values()
            .map(|v| v.byte_len())
            .filter(|&l| l > inline)
            .map(|l| l + l % 2)
            .sum()
    }

    /// Bytes this IFD and its values take.
    pub fn len(&self, big: bool) -> u64 {
        self.head_len(big) + self.values_len(big)
    }

    /// This IFD as stored at `at`, pointing to the next one at `next` (0: the last).
    pub fn encode(&self, at: u64, next: u64, big: bool) -> Vec<u8> {
        let inline = if big { 8 } else { 4 };
        let mut head = Vec::with_capacity(self.head_len(big) as usize);
        let mut values = Vec::with_capacity(self.values_len(big) as usize);
        let values_at = at + self.head_len(big);
        if big {
            head.extend((self.0.len() as u64).to_ne_bytes());
        } else {
            head.extend((self.0.len() as u16).to_ne_bytes());
        }
        for (&tag, value) in &self.0 {
            head.extend(tag.to_ne_bytes());
            head.extend(value.type_code().to_ne_bytes());
            if big {
                head.extend(value.count().to_ne_bytes());
            } else {
                head.extend((value.count() as u32).to_ne_bytes());
            }
            let bytes = value.bytes();
            if bytes.len() <= inline {
                let mut field = bytes;
                field.resize(inline, 0);
                head.extend(field);
            } else {
                let offset = values_at + values.len() as u64;
                if big {
                    head.extend(offset.to_ne_bytes());
                } else {
                    head.extend((offset as u32).to_ne_bytes());
                }
                let odd = bytes.len() % 2;
                values.extend(bytes);
                values.extend(std::iter::repeat_n(0, odd));
            }
        }
        if big {
            head.extend(next.to_ne_bytes());
        } else {
            head.extend((next as u32).to_ne_bytes());
        }
        head.extend(values);
        head
    }
}

/// Where the first IFD starts: after the header and the ghost header, on an even byte.
pub(super) fn first_ifd_at(big: bool) -> u64 {
    let at = if big { 16 } else { 8 } + ghost_header().len() as u64;
    at + at % 2
}

/// The file's header: byte order, version and the first IFD's offset, then the ghost header
/// (padded to `first_ifd_at`).
pub(super) fn header(big: bool) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(if cfg!(target_endian = "little") {
        b"II"
    } else {
        b"MM"
    });
    let first = first_ifd_at(big);
    if big {
        out.extend(43u16.to_ne_bytes());
        out.extend(8u16.to_ne_bytes());
        out.extend(0u16.to_ne_bytes());
        out.extend(first.to_ne_bytes());
    } else {
        out.extend(42u16.to_ne_bytes());
        out.extend((first as u32).to_ne_bytes());
    }
    out.extend(ghost_header().bytes());
    out.resize(first as usize, 0);
    out
}

/// Bytes a tile of `count` bytes takes in the file: leader, tile, trailer.
pub(super) fn stored_len(count: u64) -> u64 {
    4 + count + 4
}

/// Copies one spooled tile of `count` bytes from `from` to `to` with its leader and trailer.
pub(super) fn copy_tile(
    from: &mut impl Read,
    to: &mut impl Write,
    count: u64,
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    let leader = u32::try_from(count)
        .map_err(|_| io::Error::other(format!("a tile of {count} bytes passes 4 GiB")))?;
    buf.resize(count as usize, 0);
    from.read_exact(buf)?;
    // GDAL's leader is little-endian whatever the file's byte order.
    to.write_all(&leader.to_le_bytes())?;
    to.write_all(buf)?;
    // Tiles shorter than 4 bytes (never made by the codecs here) repeat what they have.
    let mut trailer = [0u8; 4];
    let tail = &buf[buf.len().saturating_sub(4)..];
    trailer[..tail.len()].copy_from_slice(tail);
    to.write_all(&trailer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ghost_header_is_gdals() {
        let g = ghost_header();
        // GDAL's COG driver declares 140 bytes after the 43-byte first line.
        assert!(g.starts_with("GDAL_STRUCTURAL_METADATA_SIZE=000140 bytes\n"));
        assert_eq!(g.len(), 43 + 140);
        assert_eq!(first_ifd_at(false), 192);
        assert_eq!(first_ifd_at(true), 200);
        assert_eq!(header(false).len(), 192);
    }

    #[test]
    fn ifd_values_inline_or_after_the_entries() {
        let mut ifd = Ifd::default();
        ifd.set(256, Value::Long(vec![7]));
        ifd.set(258, Value::Short(vec![8, 8, 8]));
        ifd.set(42113, Value::Ascii("255".into()));
        let bytes = ifd.encode(100, 0, false);
        assert_eq!(bytes.len() as u64, ifd.len(false));
        // 3 entries: the 6-byte BitsPerSample goes after the 2 + 36 + 4 byte head.
        assert_eq!(bytes.len(), 2 + 36 + 4 + 6);
        let entry = |i: usize| &bytes[2 + 12 * i..2 + 12 * (i + 1)];
        assert_eq!(u32::from_ne_bytes(entry(1)[8..12].try_into().unwrap()), 142);
        assert_eq!(&entry(2)[8..12], b"255\0");
        let big = ifd.encode(100, 0, true);
        assert_eq!(big.len() as u64, ifd.len(true));
        assert_eq!(
            big.len(),
            8 + 60 + 8,
            "every value fits an 8-byte BigTIFF field"
        );
    }
}
