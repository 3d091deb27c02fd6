//! Just enough of the zip format to read a `torch.save` archive: the end-of-central-directory
//! record (and its zip64 form), the central directory, and the local headers that locate each
//! entry's bytes. Entries must be stored uncompressed, which is how torch writes them.

/// One archive entry: its name and its (uncompressed) bytes.
pub(super) struct Entry<'a> {
    /// The path inside the archive, e.g. `pytorch_model/data/0`.
    pub name: &'a str,
    /// The entry's contents, borrowed from the file.
    pub data: &'a [u8],
}

const LOCAL_HEADER: u32 = 0x0403_4b50;
const CENTRAL_HEADER: u32 = 0x0201_4b50;
const END_OF_CENTRAL_DIR: u32 = 0x0605_4b50;
const ZIP64_LOCATOR: u32 = 0x0706_4b50;
const ZIP64_END_OF_CENTRAL_DIR: u32 = 0x0606_4b50;
const ZIP64_EXTRA: u16 = 0x0001;
/// Fixed sizes of the records, before their variable-length parts.
const LOCAL_LEN: usize = 30;
const CENTRAL_LEN: usize = 46;
const EOCD_LEN: usize = 22;

/// `len` bytes of `bytes` at `at`, or an error naming `what` lies outside the file.
fn slice<'a>(bytes: &'a [u8], at: u64, len: u64, what: &str) -> Result<&'a [u8], String> {
    usize::try_from(at)
        .ok()
        .zip(usize::try_from(len).ok())
        .and_then(|(at, len)| bytes.get(at..at.checked_add(len)?))
        .ok_or_else(|| {
            format!(
                "{what} (bytes {at}..+{len}) lies outside the {}-byte file; it is truncated or corrupt",
                bytes.len()
            )
        })
}

fn le<const N: usize>(bytes: &[u8], at: usize, what: &str) -> Result<[u8; N], String> {
    bytes
        .get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| format!("{what} is cut short; the file is truncated or corrupt"))
}

fn u16_at(bytes: &[u8], at: usize, what: &str) -> Result<u16, String> {
    le(bytes, at, what).map(u16::from_le_bytes)
}

fn u32_at(bytes: &[u8], at: usize, what: &str) -> Result<u32, String> {
    le(bytes, at, what).map(u32::from_le_bytes)
}

fn u64_at(bytes: &[u8], at: usize, what: &str) -> Result<u64, String> {
    le(bytes, at, what).map(u64::from_le_bytes)
}

/// Every entry of the zip archive `bytes`, in central-directory order, each checked
/// against its CRC-32.
pub(super) fn entries(bytes: &[u8]) -> Result<Vec<Entry<'_>>, String> {
    if !bytes.starts_with(&LOCAL_HEADER.to_le_bytes()) {
        return Err(not_a_zip(bytes));
    }
    let eocd = find_eocd(bytes)?;
    let mut count = u64::from(u16_at(bytes, eocd + 10, "end of central directory")?);
    let mut cd_size = u64::from(u32_at(bytes, eocd + 12, "end of central directory")?);
    let mut cd_offset = u64::from(u32_at(bytes, eocd + 16, "end of central directory")?);
    if count == 0xFFFF || cd_size == 0xFFFF_FFFF || cd_offset == 0xFFFF_FFFF {
        (count, cd_size, cd_offset) = zip64_eocd(bytes, eocd)?;
    }
    let cd = slice(bytes, cd_offset, cd_size, "the central directory")?;
    let mut out = Vec::new();
    let mut pos = 0;
    for index in 0..count {
        let (entry, len) = central_entry(bytes, cd, pos, index)?;
        out.push(entry);
        pos += len;
    }
    Ok(out)
}

/// The error for a file that is not a zip archive, recognising torch's legacy formats.
fn not_a_zip(bytes: &[u8]) -> String {
    // Legacy `torch.save` files open with a pickled magic number (protocol 2: 0x80 0x02);
    // the even older tar format has `ustar` at byte 257.
    if bytes.first() == Some(&0x80) || bytes.get(257..262) == Some(b"ustar") {
        "this is a legacy (pre-1.6, non-zip) torch.save file, which is not supported; re-save \
         it with torch>=1.6 (`torch.save(torch.load(f), f)`) or convert it to safetensors"
            .to_string()
    } else {
        "not a torch.save checkpoint: it does not start like a zip archive".to_string()
    }
}

/// The offset of the end-of-central-directory record: the last `PK\5\6` whose comment
/// length reaches exactly the end of the file.
fn find_eocd(bytes: &[u8]) -> Result<usize, String> {
    let last = bytes
        .len()
        .checked_sub(EOCD_LEN)
        .ok_or("the zip archive is truncated: no end-of-central-directory record")?;
    let first = last.saturating_sub(usize::from(u16::MAX));
    (first..=last)
        .rev()
        .find(|&at| {
            bytes[at..at + 4] == END_OF_CENTRAL_DIR.to_le_bytes()
                && at + EOCD_LEN + usize::from(u16::from_le_bytes([bytes[at + 20], bytes[at + 21]]))
                    == bytes.len()
        })
        .ok_or_else(|| {
            "the zip archive is truncated or corrupt: no end-of-central-directory record"
                .to_string()
        })
}

/// `(entry count, central directory size, central directory offset)` from the zip64 records
/// that the end-of-central-directory record defers to.
fn zip64_eocd(bytes: &[u8], eocd: usize) -> Result<(u64, u64, u64), String> {
    let what = "zip64 end-of-central-directory locator";
    let locator = eocd
        .checked_sub(20)
        .ok_or_else(|| format!("{what} is missing"))?;
    if u32_at(bytes, locator, what)? != ZIP64_LOCATOR {
        return Err(format!("{what} is missing or corrupt"));
    }
    let record = u64_at(bytes, locator + 8, what)?;
    let what = "zip64 end-of-central-directory record";
    let record = slice(bytes, record, 56, what)?;
    if u32_at(record, 0, what)? != ZIP64_END_OF_CENTRAL_DIR {
        return Err(format!("{what} is corrupt"));
    }
    Ok((
        u64_at(record, 32, what)?,
        u64_at(record, 40, what)?,
        u64_at(record, 48, what)?,
    ))
}

/// The entry whose central-directory header is at `cd[pos..]`, and that header's length.
fn central_entry<'a>(
    bytes: &'a [u8],
    cd: &'a [u8],
    pos: usize,
    index: u64,
) -> Result<(Entry<'a>, usize), String> {
    let what = format!("central directory entry {index}");
    if u32_at(cd, pos, &what)? != CENTRAL_HEADER {
        return Err(format!("{what} is corrupt (bad signature)"));
    }
    let flags = u16_at(cd, pos + 8, &what)?;
    let method = u16_at(cd, pos + 10, &what)?;
    let crc = u32_at(cd, pos + 16, &what)?;
    let mut compressed = u64::from(u32_at(cd, pos + 20, &what)?);
    let mut size = u64::from(u32_at(cd, pos + 24, &what)?);
    let name_len = usize::from(u16_at(cd, pos + 28, &what)?);
    let extra_len = usize::from(u16_at(cd, pos + 30, &what)?);
    let comment_len = usize::from(u16_at(cd, pos + 32, &what)?);
    let mut local = u64::from(u32_at(cd, pos + 42, &what)?);
    let name = cd
        .get(pos + CENTRAL_LEN..pos + CENTRAL_LEN + name_len)
        .ok_or_else(|| format!("{what} is cut short"))?;
    let name = std::str::from_utf8(name).map_err(|_| format!("{what} has a non-UTF-8 name"))?;
    let extra_at = pos + CENTRAL_LEN + name_len;
    let extra = cd
        .get(extra_at..extra_at + extra_len)
        .ok_or_else(|| format!("entry {name} is cut short"))?;
    // Zip64 keeps the real values of the fields saturated at 0xFFFFFFFF in an extra
    // field, in this order.
    {
        let wide: Vec<&mut u64> = [&mut size, &mut compressed, &mut local]
            .into_iter()
            .filter(|v| **v == 0xFFFF_FFFF)
            .collect();
        if !wide.is_empty() {
            let mut values = zip64_extra(extra).ok_or_else(|| {
                format!("entry {name} needs a zip64 extra field but has no valid one")
            })?;
            for field in wide {
                *field = values
                    .next()
                    .ok_or_else(|| format!("entry {name} has a short zip64 extra field"))?;
            }
        }
    }
    if flags & 1 != 0 {
        return Err(format!("entry {name} is encrypted"));
    }
    if method != 0 || compressed != size {
        return Err(format!(
            "entry {name} is compressed (method {method}); torch.save stores entries \
             uncompressed, so re-save the checkpoint with torch.save or convert it to safetensors"
        ));
    }
    let data = local_data(bytes, local, name, size)?;
    if crc32fast::hash(data) != crc {
        return Err(format!(
            "entry {name} is corrupt: its CRC-32 does not match the stored one"
        ));
    }
    let len = CENTRAL_LEN + name_len + extra_len + comment_len;
    Ok((Entry { name, data }, len))
}

/// The 8-byte values of the zip64 extra field among `extra`'s fields.
fn zip64_extra(mut extra: &[u8]) -> Option<impl Iterator<Item = u64> + '_> {
    while extra.len() >= 4 {
        let id = u16::from_le_bytes([extra[0], extra[1]]);
        let len = usize::from(u16::from_le_bytes([extra[2], extra[3]]));
        let body = extra.get(4..4 + len)?;
        if id == ZIP64_EXTRA {
            return Some(
                body.chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())),
            );
        }
        extra = &extra[4 + len..];
    }
    None
}

/// The `size` bytes of entry `name`, whose local header is at `local`.
fn local_data<'a>(bytes: &'a [u8], local: u64, name: &str, size: u64) -> Result<&'a [u8], String> {
    let what = format!("local header of entry {name}");
    let header = slice(bytes, local, LOCAL_LEN as u64, &what)?;
    if u32_at(header, 0, &what)? != LOCAL_HEADER {
        return Err(format!("{what} is corrupt (bad signature)"));
    }
    // The local header's name and extra field (torch pads the latter to align tensor
    // data) can differ in length from the central directory's.
    let name_len = u64::from(u16_at(header, 26, &what)?);
    let extra_len = u64::from(u16_at(header, 28, &what)?);
    let local_name = slice(
        bytes,
        local.saturating_add(LOCAL_LEN as u64),
        name_len,
        &what,
    )?;
    if local_name != name.as_bytes() {
        return Err(format!(
            "{what} names a different entry; the archive is corrupt"
        ));
    }
    let start = local.saturating_add(LOCAL_LEN as u64 + name_len + extra_len);
    slice(bytes, start, size, &format!("data of entry {name}"))
}
