//! An OCI image layout read back for a push (what `make image` writes next to each archive):
//! what the tag names, the manifests an index lists and every blob, each checked against its
//! digest.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use serde::Deserialize;

use super::PushError;
use crate::oci::{CONTAINERD_NAME, INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE};

/// An image layout read back: what the tag names, the manifests under it and their blobs.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The layout directory.
    pub dir: PathBuf,
    /// The full name the image was built under (`io.containerd.image.name`).
    pub name: String,
    /// What the tag names: the image index, or the one manifest of a single-platform layout.
    pub top: Document,
    /// The manifests an index lists, in its order (empty when `top` is a manifest).
    pub manifests: Vec<Document>,
    /// The config and layer digests of every manifest, each once, in manifest order.
    pub blobs: Vec<String>,
}

/// A manifest or an image index, pushed as its bytes.
#[derive(Debug, Clone)]
pub struct Document {
    /// Its media type, sent as `Content-Type`.
    pub media_type: String,
    /// Its digest (`sha256:…`).
    pub digest: String,
    /// Its bytes.
    pub bytes: Bytes,
}

#[derive(Deserialize)]
struct Index {
    manifests: Vec<IndexEntry>,
}

#[derive(Deserialize)]
struct IndexEntry {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: String,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct Manifest {
    config: Descriptor,
    layers: Vec<Descriptor>,
}

#[derive(Deserialize)]
struct Descriptor {
    digest: String,
}

impl Layout {
    /// Reads `dir/index.json` (one image index or one image manifest), the index's manifests and
    /// the blobs they name.
    pub fn read(dir: &Path) -> Result<Layout, PushError> {
        let bad = |problem: String| PushError::Layout {
            dir: dir.to_path_buf(),
            problem,
        };
        let index = std::fs::read(dir.join("index.json"))
            .map_err(|e| bad(format!("index.json: {e} (run `make image` first)")))?;
        let index: Index =
            serde_json::from_slice(&index).map_err(|e| bad(format!("index.json: {e}")))?;
        let [entry] = index.manifests.as_slice() else {
            return Err(bad(format!(
                "index.json lists {} entries, expected one",
                index.manifests.len()
            )));
        };
        let top = Document {
            media_type: entry.media_type.clone(),
            digest: entry.digest.clone(),
            bytes: Bytes::from(read_blob(dir, &entry.digest).map_err(bad)?),
        };
        let manifests = match entry.media_type.as_str() {
            MANIFEST_MEDIA_TYPE => Vec::new(),
            INDEX_MEDIA_TYPE => {
                let nested: Index = serde_json::from_slice(&top.bytes)
                    .map_err(|e| bad(format!("image index {}: {e}", top.digest)))?;
                if nested.manifests.is_empty() {
                    return Err(bad(format!("image index {} lists no manifest", top.digest)));
                }
                nested
                    .manifests
                    .into_iter()
                    .map(|m| {
                        if m.media_type != MANIFEST_MEDIA_TYPE {
                            return Err(bad(format!(
                                "image index {} lists a {} ({}), expected image manifests",
                                top.digest, m.media_type, m.digest
                            )));
                        }
                        Ok(Document {
                            bytes: Bytes::from(read_blob(dir, &m.digest).map_err(bad)?),
                            media_type: m.media_type,
                            digest: m.digest,
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?
            }
            other => return Err(bad(format!("index.json names a {other}"))),
        };
        let mut blobs: Vec<String> = Vec::new();
        let images = if manifests.is_empty() {
            std::slice::from_ref(&top)
        } else {
            manifests.as_slice()
        };
        for manifest in images {
            let parsed: Manifest = serde_json::from_slice(&manifest.bytes)
                .map_err(|e| bad(format!("manifest {}: {e}", manifest.digest)))?;
            for digest in std::iter::once(parsed.config.digest)
                .chain(parsed.layers.into_iter().map(|l| l.digest))
            {
                if !blobs.contains(&digest) {
                    blobs.push(digest);
                }
            }
        }
        Ok(Layout {
            dir: dir.to_path_buf(),
            name: entry
                .annotations
                .get(CONTAINERD_NAME)
                .cloned()
                .unwrap_or_default(),
            top,
            manifests,
            blobs,
        })
    }

    /// The repository and the tag of the name it was built under, e.g.
    /// `registry.invalid/resize-guard/resize-guard-webhook` and `0.2.0-g1a2b3c4`.
    pub fn built(&self) -> (&str, &str) {
        match self.name.rsplit_once(':') {
            Some((r, t)) if !t.contains('/') => (r, t),
            _ => (self.name.as_str(), ""),
        }
    }

    /// The repository's last path component and the tag of the name it was built under, e.g.
    /// `resize-guard-webhook` and `0.1.0`.
    pub fn short_name(&self) -> (String, String) {
        let (repo, tag) = self.built();
        let base = repo.rsplit('/').next().unwrap_or(repo);
        (base.to_owned(), tag.to_owned())
    }
}

/// Reads `blobs/sha256/<hex>` and checks its digest.
pub(super) fn read_blob(dir: &Path, digest: &str) -> Result<Vec<u8>, String> {
    let hex = digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()))
        .ok_or_else(|| format!("unsupported digest {digest:?}"))?;
    let path = dir.join("blobs/sha256").join(hex);
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let actual = crate::blob::sha256_digest(&bytes);
    if actual != digest {
        return Err(format!("{} has digest {actual}", path.display()));
    }
    Ok(bytes)
}
