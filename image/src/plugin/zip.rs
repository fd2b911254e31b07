//! A ZIP archive of a few files, as krew wants a Windows plugin shipped: deflated entries, Unix
//! modes in the external attributes, every entry stamped with the same time (the DOS time of
//! `SOURCE_DATE_EPOCH`, UTC, no earlier than 1980), no extra fields and no comment, so the bytes
//! depend on the files alone. No ZIP64: an entry or archive of 4 GiB or more is an error.
//! (APPNOTE.TXT: local file header, data, central directory, end of central directory.)

use std::io::Write as _;

use flate2::Compression;
use flate2::write::DeflateEncoder;
use time::OffsetDateTime;

/// One file to store.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// Its name in the archive (ASCII, `/`-separated).
    pub name: &'a str,
    /// Unix permission bits, e.g. `0o755`.
    pub mode: u32,
    /// Its bytes.
    pub content: &'a [u8],
}

const LOCAL_HEADER: u32 = 0x0403_4B50;
const CENTRAL_HEADER: u32 = 0x0201_4B50;
const END_OF_CENTRAL_DIRECTORY: u32 = 0x0605_4B50;
/// Version 2.0: deflate.
const VERSION: u16 = 20;
/// Made by Unix (3), version 2.0: the external attributes hold `st_mode` in their high half.
const MADE_BY_UNIX: u16 = (3 << 8) | VERSION;
const DEFLATE: u16 = 8;
/// `S_IFREG`.
const REGULAR_FILE: u32 = 0o100_000;

/// DOS date and time (2-second resolution) of `epoch`, UTC; 1980-01-01 00:00 at the earliest.
pub fn dos_time(epoch: u64) -> (u16, u16) {
    let Some(t) = i64::try_from(epoch)
        .ok()
        .and_then(|s| OffsetDateTime::from_unix_timestamp(s).ok())
        .filter(|t| (1980..=2107).contains(&t.year()))
    else {
        return if epoch < 315_532_800 {
            (1 << 5 | 1, 0)
        } else {
            // 2107-12-31 23:59:58, the latest a DOS date holds.
            (127 << 9 | 12 << 5 | 31, 23 << 11 | 59 << 5 | 29)
        };
    };
    let year = u16::try_from(t.year() - 1980).unwrap_or(0);
    let date = year << 9 | u16::from(u8::from(t.month())) << 5 | u16::from(t.day());
    let time = u16::from(t.hour()) << 11 | u16::from(t.minute()) << 5 | u16::from(t.second() / 2);
    (date, time)
}

fn too_big(what: &str) -> std::io::Error {
    std::io::Error::other(format!("{what} is 4 GiB or more (ZIP64 is not written)"))
}

fn u32_of(n: usize, what: &str) -> std::io::Result<u32> {
    u32::try_from(n).map_err(|_| too_big(what))
}

/// The ZIP archive of `entries`, in the order given, each stamped with `epoch`.
pub fn archive(entries: &[Entry<'_>], epoch: u64) -> std::io::Result<Vec<u8>> {
    let (date, time) = dos_time(epoch);
    let mut out = Vec::new();
    let mut central = Vec::new();
    for entry in entries {
        let mut crc = flate2::Crc::new();
        crc.update(entry.content);
        let mut encoder = DeflateEncoder::new(Vec::new(), Compression::default());
        encoder.write_all(entry.content)?;
        let data = encoder.finish()?;
        let offset = u32_of(out.len(), "the archive")?;
        let name = entry.name.as_bytes();
        let name_len = u16::try_from(name.len()).map_err(|_| too_big("a name"))?;
        let (compressed, size) = (
            u32_of(data.len(), entry.name)?,
            u32_of(entry.content.len(), entry.name)?,
        );
        // Fields shared by the local and the central header, from "version needed" on.
        let mut common = Vec::new();
        for half in [VERSION, 0, DEFLATE, time, date] {
            common.extend(half.to_le_bytes());
        }
        for word in [crc.sum(), compressed, size] {
            common.extend(word.to_le_bytes());
        }
        common.extend(name_len.to_le_bytes());
        common.extend(0u16.to_le_bytes());

        out.extend(LOCAL_HEADER.to_le_bytes());
        out.extend(&common);
        out.extend(name);
        out.extend(&data);

        central.extend(CENTRAL_HEADER.to_le_bytes());
        central.extend(MADE_BY_UNIX.to_le_bytes());
        central.extend(&common);
        // Comment length, disk number, internal attributes.
        central.extend([0u8; 6]);
        central.extend(((REGULAR_FILE | entry.mode) << 16).to_le_bytes());
        central.extend(offset.to_le_bytes());
        central.extend(name);
    }
    let count = u16::try_from(entries.len()).map_err(|_| too_big("the entry count"))?;
    let central_offset = u32_of(out.len(), "the archive")?;
    let central_size = u32_of(central.len(), "the central directory")?;
    out.extend(central);
    out.extend(END_OF_CENTRAL_DIRECTORY.to_le_bytes());
    out.extend([0u8; 4]);
    out.extend(count.to_le_bytes());
    out.extend(count.to_le_bytes());
    out.extend(central_size.to_le_bytes());
    out.extend(central_offset.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    Ok(out)
}
