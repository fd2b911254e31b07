//! From an [`ImageSpec`] and one platform's build context (the directory of that platform's
//! static binaries) to the blobs of that platform's image: a layer per `COPY` ([`crate::layer`]),
//! the image config (its os/architecture, `User`, `Env`, `Entrypoint`, `Labels`, the layers'
//! `diff_ids`) and the manifest. [`crate::index`] joins the platforms into one image. Every
//! executable it copies must be a static program for that platform ([`crate::executable`]).

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::blob::Blob;
use crate::error::ImageError;
use crate::executable;
use crate::layer::file_layer;
use crate::oci::{self, Descriptor, Platform};
use crate::spec::ImageSpec;

/// One platform's image: its config, layers and the manifest naming them.
#[derive(Debug, Clone)]
pub struct PlatformImage {
    /// Which platform the binaries were built for.
    pub platform: Platform,
    /// The manifest blob; its digest is this platform's identity in the index.
    pub manifest: Blob,
    /// The config blob.
    pub config: Blob,
    /// The layer blobs, bottom first.
    pub layers: Vec<Blob>,
}

impl PlatformImage {
    /// Every blob: config, layers, manifest.
    pub fn blobs(&self) -> impl Iterator<Item = &Blob> {
        std::iter::once(&self.config)
            .chain(&self.layers)
            .chain(std::iter::once(&self.manifest))
    }
}

/// Builds the `platform` image `spec` describes, reading `COPY` sources from `context` (that
/// platform's binaries); every timestamp is `epoch` (seconds since 1970).
pub fn assemble(
    spec: &ImageSpec,
    context: &Path,
    platform: Platform,
    epoch: u64,
) -> Result<PlatformImage, ImageError> {
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
        let runnable = metadata.permissions().mode() & 0o111 != 0;
        let content = std::fs::read(&path).map_err(ImageError::io("reading", &path))?;
        if runnable {
            executable::check(&content, platform).map_err(|problem| ImageError::Program {
                path: path.clone(),
                problem,
            })?;
        }
        let layer = file_layer(&copy.dest, &content, runnable, epoch)
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
        architecture: platform.architecture,
        os: platform.os,
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
    Ok(PlatformImage {
        platform,
        manifest,
        config,
        layers,
    })
}
