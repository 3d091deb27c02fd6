//! The bytes of an event file: TFRecord framing with masked CRC-32C, and the few protobuf
//! messages of TensorBoard's `event.proto` / `summary.proto` that a training log needs.
//!
//! Field numbers, from `tensorboard/compat/proto`: `Event` wall_time 1 (double), step 2
//! (int64), file_version 3 (string), summary 5, session_log 7; `Summary.value` 1;
//! `Summary.Value` tag 1, simple_value 2 (float), image 4; `Summary.Image` height 1, width 2,
//! colorspace 3 (int32), encoded_image_string 4; `SessionLog.status` 1 (START = 1).

/// CRC-32C (Castagnoli) lookup table for the reflected polynomial `0x82F63B78`.
const CRC_TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// CRC-32C of `data`.
pub(crate) fn crc32c(data: &[u8]) -> u32 {
    !data.iter().fold(!0u32, |crc, &b| {
        CRC_TABLE[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8)
    })
}

/// TFRecord's masked CRC: CRCs of data that holds CRCs are weak, so the stored value is
/// rotated and offset.
fn masked_crc(data: &[u8]) -> u32 {
    crc32c(data).rotate_right(15).wrapping_add(0xa282_ead8)
}

/// One TFRecord: length (u64 LE), its masked CRC, the data, the data's masked CRC.
pub(crate) fn frame(data: &[u8]) -> Vec<u8> {
    let len = (data.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(data.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc(&len).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&masked_crc(data).to_le_bytes());
    out
}

/// The complete records at the start of `bytes`, each as `(its bytes with framing, its data)`;
/// stops at the first truncated or corrupt one (what a killed writer leaves at the end).
pub(crate) fn records(bytes: &[u8]) -> Vec<(&[u8], &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(header) = bytes.get(at..at + 12) {
        let (len, len_crc) = header.split_at(8);
        if u32::from_le_bytes(len_crc.try_into().expect("4 bytes")) != masked_crc(len) {
            break;
        }
        let n = u64::from_le_bytes(len.try_into().expect("8 bytes")) as usize;
        let Some(data) = bytes.get(at + 12..at + 12 + n) else {
            break;
        };
        let Some(crc) = bytes.get(at + 12 + n..at + 16 + n) else {
            break;
        };
        if u32::from_le_bytes(crc.try_into().expect("4 bytes")) != masked_crc(data) {
            break;
        }
        out.push((&bytes[at..at + 16 + n], data));
        at += 16 + n;
    }
    out
}

/// A protobuf message being written, field by field.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u64, wire_type: u64) {
        self.varint(field << 3 | wire_type);
    }

    fn uint(mut self, field: u64, v: u64) -> Self {
        self.key(field, 0);
        self.varint(v);
        self
    }

    fn double(mut self, field: u64, v: f64) -> Self {
        self.key(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn float(mut self, field: u64, v: f32) -> Self {
        self.key(field, 5);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    fn bytes(mut self, field: u64, b: &[u8]) -> Self {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
}

/// What an event carries besides its time and step.
pub(crate) enum Body<'a> {
    /// `file_version`, the first event of every file.
    FileVersion,
    /// `session_log { status: START }`: the run (re)starts at this step, and TensorBoard
    /// discards what it already loaded at this step or later.
    Start,
    /// Scalars, `(tag, value)`.
    Scalars(&'a [(String, f32)]),
    /// One PNG image.
    Image {
        /// Its tag.
        tag: &'a str,
        /// The PNG file's bytes.
        png: &'a [u8],
        /// Width and height in pixels.
        size: (usize, usize),
    },
}

/// The serialized `Event`.
pub(crate) fn event(wall_time: f64, step: u64, body: Body<'_>) -> Vec<u8> {
    let e = Message::default().double(1, wall_time).uint(2, step);
    let e = match body {
        Body::FileVersion => e.bytes(3, b"brain.Event:2"),
        Body::Start => e.bytes(7, &Message::default().uint(1, 1).0),
        Body::Scalars(values) => {
            let summary = values.iter().fold(Message::default(), |s, (tag, v)| {
                let value = Message::default().bytes(1, tag.as_bytes()).float(2, *v);
                s.bytes(1, &value.0)
            });
            e.bytes(5, &summary.0)
        }
        Body::Image { tag, png, size } => {
            // Colorspace 3: RGB, what the overlay grid is.
            let image = Message::default()
                .uint(1, size.1 as u64)
                .uint(2, size.0 as u64)
                .uint(3, 3)
                .bytes(4, png);
            let value = Message::default()
                .bytes(1, tag.as_bytes())
                .bytes(4, &image.0);
            e.bytes(5, &Message::default().bytes(1, &value.0).0)
        }
    };
    e.0
}

/// The `step` field of a serialized event (0 when absent, as protobuf defaults it); `None`
/// when the bytes are not a well-formed message.
pub(crate) fn event_step(data: &[u8]) -> Option<u64> {
    let mut at = 0;
    let mut step = 0;
    let varint = |at: &mut usize| -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *data.get(*at)?;
            *at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    };
    while at < data.len() {
        let key = varint(&mut at)?;
        match (key >> 3, key & 7) {
            (2, 0) => step = varint(&mut at)?,
            (_, 0) => {
                varint(&mut at)?;
            }
            (_, 1) => at += 8,
            (_, 2) => at += varint(&mut at)? as usize,
            (_, 5) => at += 4,
            _ => return None,
        }
    }
    (at == data.len()).then_some(step)
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::tfevents;

    #[test]
    fn table_crc_matches_the_bitwise_reference() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        for n in [0, 1, 9, 31, 255, 1000] {
            assert_eq!(crc32c(&data[..n]), tfevents::crc32c_bitwise(&data[..n]));
        }
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn records_stop_at_a_truncated_or_corrupt_tail() {
        let a = frame(&event(1.0, 3, Body::FileVersion));
        let b = frame(&event(2.0, 4, Body::Start));
        let mut bytes = [a.clone(), b.clone()].concat();
        assert_eq!(records(&bytes).len(), 2);
        assert_eq!(records(&bytes[..bytes.len() - 1]).len(), 1);
        let last = bytes.len() - 6;
        bytes[last] ^= 1;
        assert_eq!(records(&bytes).len(), 1);
        assert_eq!(event_step(records(&a)[0].1), Some(3));
    }

    #[test]
    fn events_decode_independently() {
        let values = vec![
            ("train/loss".to_string(), 0.25f32),
            ("val/iou/rice paddy".to_string(), f32::NAN),
        ];
        let png = [0x89, b'P', b'N', b'G', 1, 2, 3];
        let bytes = [
            frame(&event(1700000000.5, 0, Body::FileVersion)),
            frame(&event(1700000001.0, 300, Body::Scalars(&values))),
            frame(&event(
                1700000002.0,
                301,
                Body::Image {
                    tag: "val/overlays",
                    png: &png,
                    size: (40, 30),
                },
            )),
            frame(&event(1700000003.0, 1 << 40, Body::Start)),
        ]
        .concat();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.out.tfevents.1.test");
        std::fs::write(&path, &bytes).unwrap();
        let e = tfevents::read_file(&path);
        assert_eq!(e.len(), 4);
        assert_eq!(e[0].file_version.as_deref(), Some("brain.Event:2"));
        assert_eq!(e[0].wall_time, 1700000000.5);
        assert_eq!(e[1].step, 300);
        assert_eq!(e[1].values.len(), 2);
        assert_eq!(e[1].values[0].tag, "train/loss");
        assert_eq!(e[1].values[0].scalar, Some(0.25));
        assert_eq!(e[1].values[1].tag, "val/iou/rice paddy");
        assert!(e[1].values[1].scalar.unwrap().is_nan());
        let img = e[2].values[0].image.as_ref().unwrap();
        assert_eq!(
            (e[2].step, e[2].values[0].tag.as_str()),
            (301, "val/overlays")
        );
        assert_eq!((img.width, img.height, img.colorspace), (40, 30, 3));
        assert_eq!(img.encoded, png);
        assert_eq!((e[3].step, e[3].session_status), (1 << 40, Some(1)));
    }
}
