//! One multi-platform image: the [`PlatformImage`]s of every platform joined by an OCI image
//! index (one manifest descriptor per platform, `platform` set, in the order given), and the
//! layout's `index.json` that names that index with its tag (annotation
//! `org.opencontainers.image.ref.name`) and full name (`io.containerd.image.name`, what
//! `ctr images import` tags it as). This nesting (`index.json` → image index → manifests) is
//! what buildx's and buildah's OCI exporters write; a registry stores the image index under the
//! tag and a runtime pulling it picks its own platform's manifest.
//!
//! ```text
//! index.json ─▶ image index (tag) ─┬▶ manifest linux/amd64 ─▶ config, layers
//!                                  └▶ manifest linux/arm64 ─▶ config, layers
//! ```

use std::collections::BTreeMap;
use std::fmt;

use crate::assemble::PlatformImage;
use crate::blob::Blob;
use crate::error::ImageError;
use crate::oci::{self, Descriptor};

/// Where an image is pushed: `registry.invalid/resize-guard/resize-guard-webhook` and
/// `0.2.0-g1a2b3c4`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// Registry and repository.
    pub repository: String,
    /// The tag.
    pub tag: String,
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.repository, self.tag)
    }
}

/// A built multi-platform image: every platform's blobs, the image index and `index.json`.
#[derive(Debug, Clone)]
pub struct Image {
    /// Its name.
    pub reference: Reference,
    /// One image per platform, in index order.
    pub platforms: Vec<PlatformImage>,
    /// The image index blob; its digest is the image's identity (what the tag names).
    pub index: Blob,
    /// The layout's `index.json`, pointing at [`Image::index`].
    pub layout_index: Vec<u8>,
}

impl Image {
    /// Every blob: each platform's config, layers and manifest, then the image index.
    pub fn blobs(&self) -> impl Iterator<Item = &Blob> {
        self.platforms
            .iter()
            .flat_map(PlatformImage::blobs)
            .chain(std::iter::once(&self.index))
    }
}

/// Joins `platforms` (at least one, no platform twice) into the image named `reference`.
pub fn join(reference: Reference, platforms: Vec<PlatformImage>) -> Result<Image, ImageError> {
    if platforms.is_empty() {
        return Err(ImageError::resolve(format!(
            "{reference}: no platform to build"
        )));
    }
    for (i, image) in platforms.iter().enumerate() {
        if platforms[..i].iter().any(|p| p.platform == image.platform) {
            return Err(ImageError::resolve(format!(
                "{reference}: platform {} given twice",
                image.platform
            )));
        }
    }
    let index = oci::Index {
        schema_version: 2,
        media_type: oci::INDEX_MEDIA_TYPE,
        manifests: platforms
            .iter()
            .map(|image| Descriptor {
                platform: Some(image.platform),
                ..Descriptor::of(oci::MANIFEST_MEDIA_TYPE, &image.manifest)
            })
            .collect(),
    };
    let index = Blob::new(serde_json::to_vec(&index).map_err(ImageError::json("image index"))?);
    let layout_index = oci::Index {
        schema_version: 2,
        media_type: oci::INDEX_MEDIA_TYPE,
        manifests: vec![Descriptor {
            annotations: BTreeMap::from([
                (oci::REF_NAME.to_string(), reference.tag.clone()),
                (oci::CONTAINERD_NAME.to_string(), reference.to_string()),
            ]),
            ..Descriptor::of(oci::INDEX_MEDIA_TYPE, &index)
        }],
    };
    let layout_index =
        serde_json::to_vec(&layout_index).map_err(ImageError::json("layout index.json"))?;
    Ok(Image {
        reference,
        platforms,
        index,
        layout_index,
    })
}
