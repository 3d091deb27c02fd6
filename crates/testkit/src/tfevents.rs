//! An independent reader of TensorBoard event files, for tests of the code that writes them.
//!
//! It shares nothing with the writer: CRC32C is computed bit by bit from the polynomial (the
//! writer uses a table), and the protobuf is decoded field by field from the numbers in
//! TensorBoard's `event.proto` and `summary.proto` (`Event`: wall_time 1, step 2,
//! file_version 3, summary 5, session_log 7; `Summary.value` 1; `Summary.Value`: tag 1,
//! simple_value 2, image 4; `Summary.Image`: height 1, width 2, colorspace 3,
//! encoded_image_string 4; `SessionLog.status` 1).

use std::path::{Path, PathBuf};

/// CRC-32C (Castagnoli, reflected polynomial `0x82F63B78`), one bit at a time.
pub fn crc32c_bitwise(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The masked CRC of TFRecord framing.
pub fn masked(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// An image value of an event.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    /// Height in pixels.
    pub height: i64,
    /// Width in pixels.
    pub width: i64,
    /// Channels (3: RGB).
    pub colorspace: i64,
    /// The encoded image (PNG).
    pub encoded: Vec<u8>,
}

/// One `Summary.Value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Value {
    /// Its tag.
    pub tag: String,
    /// `simple_value`, when set.
    pub scalar: Option<f32>,
    /// `image`, when set.
    pub image: Option<Image>,
}

/// One decoded `Event`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Event {
    /// Seconds since the Unix epoch.
    pub wall_time: f64,
    /// The global step.
    pub step: i64,
    /// `file_version`, when set (`brain.Event:2` in a file's first event).
    pub file_version: Option<String>,
    /// The summary's values.
    pub values: Vec<Value>,
    /// `session_log.status`, when the event carries a session log (1: START).
    pub session_status: Option<i64>,
}

/// The events of one file, every record's length and both CRCs checked.
///
/// # Panics
/// On a truncated record, a CRC mismatch or a malformed protobuf, naming the record.
pub fn read_file(path: &Path) -> Vec<Event> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut events = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let n = events.len();
        let header = bytes
            .get(at..at + 12)
            .unwrap_or_else(|| panic!("record {n}: truncated header"));
        let len = u64::from_le_bytes(header[..8].try_into().unwrap()) as usize;
        let len_crc = u32::from_le_bytes(header[8..12].try_into().unwrap());
        assert_eq!(
            len_crc,
            masked(crc32c_bitwise(&header[..8])),
            "record {n}: length CRC"
        );
        let data = bytes
            .get(at + 12..at + 12 + len)
            .unwrap_or_else(|| panic!("record {n}: truncated data"));
        let crc_bytes = bytes
            .get(at + 12 + len..at + 16 + len)
            .unwrap_or_else(|| panic!("record {n}: truncated data CRC"));
        assert_eq!(
            u32::from_le_bytes(crc_bytes.try_into().unwrap()),
            masked(crc32c_bitwise(data)),
            "record {n}: data CRC"
        );
        events.push(decode_event(data));
        at += 16 + len;
    }
    events
}

/// The event files of `dir` in the order TensorBoard reads them (sorted by name).
pub fn event_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("events.out.tfevents."))
        })
        .collect();
    files.sort();
    files
}

/// Every `(tag, step, value)` scalar of the files of `dir` in reading order.
pub fn scalars(dir: &Path) -> Vec<(String, i64, f32)> {
    event_files(dir)
        .iter()
        .flat_map(|f| read_file(f))
        .flat_map(|e| {
            e.values
                .into_iter()
                .filter_map(move |v| v.scalar.map(|s| (v.tag, e.step, s)))
        })
        .collect()
}

/// A protobuf field: its number and its payload.
enum Field<'a> {
    Varint(u64),
    Fixed64([u8; 8]),
    Fixed32([u8; 4]),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at).expect("truncated varint");
        *at += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return v;
        }
    }
    panic!("varint longer than 10 bytes")
}

fn fields(buf: &[u8]) -> Vec<(u64, Field<'_>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let key = varint(buf, &mut at);
        let field = match key & 7 {
            0 => Field::Varint(varint(buf, &mut at)),
            1 => {
                at += 8;
                Field::Fixed64(buf[at - 8..at].try_into().unwrap())
            }
            2 => {
                let n = varint(buf, &mut at) as usize;
                at += n;
                Field::Bytes(&buf[at - n..at])
            }
            5 => {
                at += 4;
                Field::Fixed32(buf[at - 4..at].try_into().unwrap())
            }
            w => panic!("wire type {w} of field {}", key >> 3),
        };
        out.push((key >> 3, field));
    }
    out
}

fn decode_event(data: &[u8]) -> Event {
    let mut e = Event::default();
    for (number, field) in fields(data) {
        match (number, field) {
            (1, Field::Fixed64(b)) => e.wall_time = f64::from_le_bytes(b),
            (2, Field::Varint(v)) => e.step = v as i64,
            (3, Field::Bytes(b)) => e.file_version = Some(String::from_utf8(b.to_vec()).unwrap()),
            (5, Field::Bytes(b)) => {
                for (n, f) in fields(b) {
                    match (n, f) {
                        (1, Field::Bytes(v)) => e.values.push(decode_value(v)),
                        (n, _) => panic!("unexpected Summary field {n}"),
                    }
                }
            }
            (7, Field::Bytes(b)) => {
                for (n, f) in fields(b) {
                    if let (1, Field::Varint(s)) = (n, f) {
                        e.session_status = Some(s as i64);
                    }
                }
                e.session_status.get_or_insert(0);
            }
            (n, _) => panic!("unexpected Event field {n}"),
        }
    }
    e
}

fn decode_value(data: &[u8]) -> Value {
    let mut v = Value {
        tag: String::new(),
        scalar: None,
        image: None,
    };
    for (number, field) in fields(data) {
        match (number, field) {
            (1, Field::Bytes(b)) => v.tag = String::from_utf8(b.to_vec()).unwrap(),
            (2, Field::Fixed32(b)) => v.scalar = Some(f32::from_le_bytes(b)),
            (4, Field::Bytes(b)) => {
                let mut img = Image {
                    height: 0,
                    width: 0,
                    colorspace: 0,
                    encoded: Vec::new(),
                };
                for (n, f) in fields(b) {
                    match (n, f) {
                        (1, Field::Varint(x)) => img.height = x as i64,
                        (2, Field::Varint(x)) => img.width = x as i64,
                        (3, Field::Varint(x)) => img.colorspace = x as i64,
                        (4, Field::Bytes(x)) => img.encoded = x.to_vec(),
                        (n, _) => panic!("unexpected Summary.Image field {n}"),
                    }
                }
                v.image = Some(img);
            }
            (n, _) => panic!("unexpected Summary.Value field {n}"),
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_check_values() {
        // The CRC-32C check value (RFC 3720 appendix B.4 lists it for iSCSI).
        assert_eq!(crc32c_bitwise(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c_bitwise(&[0u8; 32]), 0x8A91_36AA);
    }
}
