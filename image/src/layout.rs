//! Writing an [`Image`] (every platform) as an OCI image layout: the directory form (`oci-layout`,
//! `index.json`, `blobs/sha256/<hex>`) and the same tree packed as an OCI archive, a plain tar that
//! `podman load -i`, `skopeo copy oci-archive:` and `ctr images import` read. Archive entries come
//! in a fixed order with fixed owners, modes and mtimes, so the archive's bytes depend on the image
//! only. Both are written next to their destination and renamed into place.

use std::path::Path;

use crate::error::ImageError;
use crate::index::Image;
use crate::layer::header;

/// `oci-layout`: the layout version marker.
const OCI_LAYOUT: &[u8] = br#"{"imageLayoutVersion":"1.0.0"}"#;

/// The layout's files in archive order: `(path, bytes)`; `None` bytes is a directory.
fn entries(image: &Image) -> Vec<(String, Option<&[u8]>)> {
    let mut entries = vec![
        ("oci-layout".to_string(), Some(OCI_LAYOUT)),
        (
            "index.json".to_string(),
            Some(image.layout_index.as_slice()),
        ),
        ("blobs/".to_string(), None),
        ("blobs/sha256/".to_string(), None),
    ];
    let mut blobs: Vec<_> = image.blobs().collect();
    blobs.sort_by(|a, b| a.digest.cmp(&b.digest));
    blobs.dedup_by(|a, b| a.digest == b.digest);
    for blob in blobs {
        entries.push((format!("blobs/sha256/{}", blob.hex()), Some(&blob.bytes)));
    }
    entries
}

/// Packs the layout into an OCI archive (tar) at `path`; every entry's mtime is `epoch`.
pub fn write_archive(image: &Image, path: &Path, epoch: u64) -> Result<(), ImageError> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, content) in entries(image) {
        let result = match content {
            None => {
                let mut dir = header(tar::EntryType::Directory, 0o755, 0, epoch);
                builder.append_data(&mut dir, &name, std::io::empty())
            }
            Some(bytes) => {
                let mut file = header(tar::EntryType::Regular, 0o644, bytes.len() as u64, epoch);
                builder.append_data(&mut file, &name, bytes)
            }
        };
        result.map_err(ImageError::io("packing", path))?;
    }
    let bytes = builder
        .into_inner()
        .map_err(ImageError::io("packing", path))?;
    replace_file(path, &bytes)
}

/// Writes the layout as a directory at `dir`, replacing what was there.
pub fn write_layout(image: &Image, dir: &Path) -> Result<(), ImageError> {
    let staging = sibling(dir, ".staging");
    remove_dir(&staging)?;
    std::fs::create_dir_all(&staging).map_err(ImageError::io("creating", &staging))?;
    for (name, content) in entries(image) {
        let path = staging.join(&name);
        match content {
            None => std::fs::create_dir_all(&path).map_err(ImageError::io("creating", &path))?,
            Some(bytes) => {
                std::fs::write(&path, bytes).map_err(ImageError::io("writing", &path))?
            }
        }
    }
    remove_dir(dir)?;
    std::fs::rename(&staging, dir).map_err(ImageError::io("renaming into place", dir))
}

fn remove_dir(dir: &Path) -> Result<(), ImageError> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(ImageError::io("removing", dir)(e))
        }
        _ => Ok(()),
    }
}

fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), ImageError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(ImageError::io("creating", parent))?;
    }
    let staging = sibling(path, ".partial");
    std::fs::write(&staging, bytes).map_err(ImageError::io("writing", &staging))?;
    std::fs::rename(&staging, path).map_err(ImageError::io("renaming into place", path))
}

/// `path` with `suffix` appended to its file name.
fn sibling(path: &Path, suffix: &str) -> std::path::PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    name.into()
}
