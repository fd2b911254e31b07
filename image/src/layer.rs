//! One `COPY` as an image layer: a tar of the file and its parent directories, every entry owned
//! by root (0:0) with the same modification time (`SOURCE_DATE_EPOCH`, else 0), directories
//! 0755, the file 0755 if its source is executable by anyone and 0644 otherwise (docker would
//! copy the source's mode; pinning it keeps the digest independent of the builder's umask).
//! The layer blob is the tar gzip-compressed with a zero gzip timestamp; its `diff_id` is the
//! digest of the uncompressed tar. Same bytes in, same digests out.

use std::io::Write as _;

use flate2::{Compression, GzBuilder};

use crate::blob::{Blob, sha256_digest};

/// A layer as the manifest (compressed blob) and the image config (`diff_id`) name it.
#[derive(Debug, Clone)]
pub struct Layer {
    /// The gzip-compressed tar.
    pub blob: Blob,
    /// `sha256:` of the uncompressed tar.
    pub diff_id: String,
}

/// Builds the layer holding `content` at the absolute path `dest`.
pub fn file_layer(
    dest: &str,
    content: &[u8],
    executable: bool,
    mtime: u64,
) -> std::io::Result<Layer> {
    let relative = dest.trim_start_matches('/');
    let mut builder = tar::Builder::new(Vec::new());
    let mut parent = String::new();
    let mut parts: Vec<&str> = relative.split('/').collect();
    let file_name = parts.pop().unwrap_or_default();
    for part in parts {
        parent.push_str(part);
        parent.push('/');
        let mut dir = header(tar::EntryType::Directory, 0o755, 0, mtime);
        builder.append_data(&mut dir, &parent, std::io::empty())?;
    }
    let mode = if executable { 0o755 } else { 0o644 };
    let mut file = header(tar::EntryType::Regular, mode, content.len() as u64, mtime);
    builder.append_data(&mut file, format!("{parent}{file_name}"), content)?;
    let tar = builder.into_inner()?;
    Ok(Layer {
        diff_id: sha256_digest(&tar),
        blob: Blob::new(gzip(&tar)?),
    })
}

/// A ustar header owned by root with a fixed mtime.
pub(crate) fn header(kind: tar::EntryType, mode: u32, size: u64, mtime: u64) -> tar::Header {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_mtime(mtime);
    header.set_uid(0);
    header.set_gid(0);
    header
}

/// gzip with no file name and a zero timestamp, so the output depends on `bytes` only.
pub(crate) fn gzip(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut encoder = GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), Compression::default());
    encoder.write_all(bytes)?;
    encoder.finish()
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use super::*;

    #[test]
    fn holds_the_file_and_its_parents_owned_by_root() {
        let layer = file_layer("/usr/local/bin/tool", b"#!bin", true, 7).unwrap();
        let tar = {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(layer.blob.bytes.as_slice())
                .read_to_end(&mut out)
                .unwrap();
            out
        };
        assert_eq!(layer.diff_id, sha256_digest(&tar));
        assert_eq!(
            crate::tests::tar_entries(tar.as_slice()),
            [
                ("usr/".to_string(), 0o755, 0, 0, 7, 0),
                ("usr/local/".to_string(), 0o755, 0, 0, 7, 0),
                ("usr/local/bin/".to_string(), 0o755, 0, 0, 7, 0),
                ("usr/local/bin/tool".to_string(), 0o755, 0, 0, 7, 5),
            ]
        );
    }

    #[test]
    fn same_content_gives_the_same_blob() {
        let a = file_layer("/a/b", b"x", false, 0).unwrap();
        let b = file_layer("/a/b", b"x", false, 0).unwrap();
        assert_eq!(a.blob, b.blob);
        let c = file_layer("/a/b", b"y", false, 0).unwrap();
        assert_ne!(a.blob.digest, c.blob.digest);
    }
}
