//! From an [`ImageSpec`] and its build context to the blobs of one image: a layer per `COPY`
//! ([`crate::layer`]), the image config (amd64/linux, `User`, `Env`, `Entrypoint`, `Labels`, the
//! layers' `diff_ids`), the manifest, and the `index.json` that names it with its tag (annotation
//! `org.opencontainers.image.ref.name`) and full name (`io.containerd.image.name`, what
//! `ctr images import` tags it as).

use std::collections::BTreeMap;
use std::fmt;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::blob::Blob;
use crate::error::ImageError;
use crate::layer::file_layer;
use crate::oci::{self, Descriptor, Platform};
use crate::spec::ImageSpec;

/// Where an image is pushed: `ghcr.io/resize-guard/resize-guard-webhook` and `0.1.0`.
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

/// A built image: every blob and the `index.json` of its layout.
#[derive(Debug, Clone)]
pub struct Image {
    /// Its name.
    pub reference: Reference,
    /// The manifest blob; its digest is the image's identity.
    pub manifest: Blob,
    /// The config blob.
    pub config: Blob,
    /// The layer blobs, bottom first.
    pub layers: Vec<Blob>,
    /// `index.json`.
    pub index: Vec<u8>,
}

impl Image {
    /// Every blob: config, layers, manifest.
    pub fn blobs(&self) -> impl Iterator<Item = &Blob> {
        std::iter::once(&self.config)
            .chain(&self.layers)
            .chain(std::iter::once(&self.manifest))
    }
}

/// Builds the image `spec` describes, reading `COPY` sources from `context`; every timestamp is
/// `epoch` (seconds since 1970).
pub fn assemble(
    spec: &ImageSpec,
    context: &Path,
    reference: Reference,
    epoch: u64,
) -> Result<Image, ImageError> {
    let created = OffsetDateTime::from_unix_timestamp(i64::try_from(epoch).unwrap_or(i64::MAX))
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .ok_or_else(|| ImageError::resolve(format!("SOURCE_DATE_EPOCH {epoch} is out of range")))?;
    let mut layers = Vec::new();
    let mut diff_ids = Vec::new();
    let mut history = Vec::new();
    for copy in &spec.copies {
        let path = context.join(&copy.src);
        let metadata = std::fs::metadata(&path).map_err(ImageError::io("reading", &path))?;
        if !metadata.is_file() {
            return Err(ImageError::Source { path });
        }
        let executable = metadata.permissions().mode() & 0o111 != 0;
        let content = std::fs::read(&path).map_err(ImageError::io("reading", &path))?;
        let layer = file_layer(&copy.dest, &content, executable, epoch)
            .map_err(ImageError::io("writing the layer of", &path))?;
        layers.push(layer.blob);
        diff_ids.push(layer.diff_id);
        history.push(oci::History {
            created: created.clone(),
            created_by: format!(
                "COPY {} {} # resize-guard-image",
                copy.src.display(),
                copy.dest
            ),
        });
    }
    let config = oci::Config {
        created,
        architecture: "amd64",
        os: "linux",
        config: oci::RunConfig {
            user: spec.user.clone(),
            env: spec.env.clone(),
            entrypoint: spec.entrypoint.clone(),
            labels: spec.labels.clone(),
        },
        rootfs: oci::RootFs {
            kind: "layers",
            diff_ids,
        },
        history,
    };
    let config = Blob::new(serde_json::to_vec(&config).map_err(ImageError::json("image config"))?);
    let manifest = oci::Manifest {
        schema_version: 2,
        media_type: oci::MANIFEST_MEDIA_TYPE,
        config: Descriptor::of(oci::CONFIG_MEDIA_TYPE, &config),
        layers: layers
            .iter()
            .map(|blob| Descriptor::of(oci::LAYER_MEDIA_TYPE, blob))
            .collect(),
    };
    let manifest = Blob::new(serde_json::to_vec(&manifest).map_err(ImageError::json("manifest"))?);
    let index = oci::Index {
        schema_version: 2,
        media_type: oci::INDEX_MEDIA_TYPE,
        manifests: vec![Descriptor {
            platform: Some(Platform {
                architecture: "amd64",
                os: "linux",
            }),
            annotations: BTreeMap::from([
                (oci::REF_NAME.to_string(), reference.tag.clone()),
                (oci::CONTAINERD_NAME.to_string(), reference.to_string()),
            ]),
            ..Descriptor::of(oci::MANIFEST_MEDIA_TYPE, &manifest)
        }],
    };
    let index = serde_json::to_vec(&index).map_err(ImageError::json("index"))?;
    Ok(Image {
        reference,
        manifest,
        config,
        layers,
        index,
    })
}
