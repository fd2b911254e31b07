//! The OCI documents an image layout holds (image-spec v1.1): per platform the image [`Config`]
//! and the [`Manifest`] pointing at it and the layers; the [`Index`] listing the manifests by
//! [`Platform`]; and `index.json`, another [`Index`] naming that one. Typed so the
//! JSON keys and their order are fixed: the same image serialises to the same bytes.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use crate::blob::Blob;

/// `mediaType` of an image index.
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// `mediaType` of an image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// `mediaType` of an image config.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// `mediaType` of a gzip-compressed layer.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// Annotation naming a manifest's tag in an index.
pub const REF_NAME: &str = "org.opencontainers.image.ref.name";
/// Annotation containerd's `ctr images import` takes the full image name from.
pub const CONTAINERD_NAME: &str = "io.containerd.image.name";

/// A pointer to a blob.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// What the blob is.
    pub media_type: &'static str,
    /// Its digest.
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// The platform, on a manifest listed in an index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    /// Annotations, on a manifest listed in an index.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl Descriptor {
    /// A plain descriptor of `blob`.
    pub fn of(media_type: &'static str, blob: &Blob) -> Self {
        Self {
            media_type,
            digest: blob.digest.clone(),
            size: blob.size(),
            platform: None,
            annotations: BTreeMap::new(),
        }
    }
}

/// Operating system and CPU architecture, in Go's `GOOS`/`GOARCH` names as the image-spec uses
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Platform {
    /// `amd64` or `arm64`.
    pub architecture: &'static str,
    /// `linux` (every image), `darwin` or `windows` (the kubectl plugin).
    pub os: &'static str,
}

impl Platform {
    /// `os/architecture`, in Go's names.
    pub const fn of(os: &'static str, architecture: &'static str) -> Platform {
        Platform { architecture, os }
    }

    /// `linux/amd64`.
    pub const LINUX_AMD64: Platform = Platform::of("linux", "amd64");
    /// `linux/arm64`.
    pub const LINUX_ARM64: Platform = Platform::of("linux", "arm64");

    /// `darwin/amd64` (macOS on Intel): the kubectl plugin only, never an image.
    pub const DARWIN_AMD64: Platform = Platform::of("darwin", "amd64");
    /// `darwin/arm64` (macOS on Apple silicon): the kubectl plugin only.
    pub const DARWIN_ARM64: Platform = Platform::of("darwin", "arm64");
    /// `windows/amd64`: the kubectl plugin only.
    pub const WINDOWS_AMD64: Platform = Platform::of("windows", "amd64");

    /// The platforms an image is built for (`make image`): Linux only, the images run on nodes.
    pub const IMAGES: [Platform; 2] = [Self::LINUX_AMD64, Self::LINUX_ARM64];
    /// The platforms the kubectl plugin is packaged for (`make image`, `make plugins`), in
    /// krew's names.
    pub const PLUGINS: [Platform; 5] = [
        Self::LINUX_AMD64,
        Self::LINUX_ARM64,
        Self::DARWIN_AMD64,
        Self::DARWIN_ARM64,
        Self::WINDOWS_AMD64,
    ];

    /// Parses `os/architecture` as an image platform; only [`Platform::IMAGES`] are known.
    pub fn parse(s: &str) -> Option<Platform> {
        Self::IMAGES.into_iter().find(|p| p.to_string() == s)
    }

    /// Parses `os/architecture` as a plugin platform; only [`Platform::PLUGINS`] are known.
    pub fn parse_plugin(s: &str) -> Option<Platform> {
        Self::PLUGINS.into_iter().find(|p| p.to_string() == s)
    }

    /// Parses a command line's `os/arch=DIR` where only `known` platforms may stand: the
    /// platform and its directory, or an error naming what was expected.
    pub fn parse_with_dir(s: &str, known: &[Platform]) -> Result<(Platform, PathBuf), String> {
        let example = known
            .last()
            .map_or("linux/amd64".into(), Platform::to_string);
        let (platform, dir) = s.split_once('=').ok_or_else(|| {
            format!("{s:?}: expected os/arch=DIR, e.g. {example}=target/…/release")
        })?;
        let names: Vec<String> = known.iter().map(Platform::to_string).collect();
        let platform = known
            .iter()
            .copied()
            .find(|p| p.to_string() == platform)
            .ok_or_else(|| {
                format!(
                    "{platform:?}: unknown platform (known: {})",
                    names.join(", ")
                )
            })?;
        if dir.is_empty() {
            return Err(format!("{s:?}: the directory is empty"));
        }
        Ok((platform, PathBuf::from(dir)))
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)
    }
}

/// The image config (`application/vnd.oci.image.config.v1+json`).
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    /// RFC 3339 creation time (from `SOURCE_DATE_EPOCH`).
    pub created: String,
    /// `amd64` or `arm64`.
    pub architecture: &'static str,
    /// `linux`.
    pub os: &'static str,
    /// How a container runs.
    pub config: RunConfig,
    /// The layers' uncompressed digests.
    pub rootfs: RootFs,
    /// One entry per instruction that made a layer.
    pub history: Vec<History>,
}

/// The `config` object of an image config; Docker's capitalised keys.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "PascalCase")]
pub struct RunConfig {
    /// `uid[:gid]` or a name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Environment, `NAME=value`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// The program and its fixed arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<Vec<String>>,
    /// Image labels.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// `rootfs` of an image config.
#[derive(Debug, Clone, Serialize)]
pub struct RootFs {
    /// Always `layers`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `sha256:` digests of the uncompressed layer tars, bottom first.
    pub diff_ids: Vec<String>,
}

/// One history entry of an image config.
#[derive(Debug, Clone, Serialize)]
pub struct History {
    /// RFC 3339 time.
    pub created: String,
    /// The instruction, e.g. `COPY a /usr/local/bin/a`.
    pub created_by: String,
}

/// An image manifest.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`MANIFEST_MEDIA_TYPE`].
    pub media_type: &'static str,
    /// The image config.
    pub config: Descriptor,
    /// The layers, bottom first.
    pub layers: Vec<Descriptor>,
}

/// An image index: the multi-platform image (one manifest per platform) and the `index.json` of
/// a layout (naming that index).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    /// Always 2.
    pub schema_version: u32,
    /// [`INDEX_MEDIA_TYPE`].
    pub media_type: &'static str,
    /// The manifests (or, in `index.json`, the image index).
    pub manifests: Vec<Descriptor>,
}
