//! # resize-guard-image
//!
//! Builds the resize-guard container images on a machine with no container engine and no
//! network: `deploy/image/Containerfile` stays the single source of truth for the image config,
//! and this crate reads it ([`containerfile`], only the subset it uses), resolves it with the
//! build arguments `BINARY`, `VERSION`, `REVISION` ([`spec`], docker's ARG scoping), turns each
//! `COPY` into a deterministic layer ([`layer`]), writes the OCI config and manifest of each
//! platform ([`oci`], [`assemble`]), joins the platforms with an image index ([`index`]) and packs
//! it all as an OCI layout and archive ([`layout`]):
//!
//! ```text
//! Containerfile ─parse─▶ stages ─resolve(BINARY, VERSION, REVISION)─▶ ImageSpec
//! ImageSpec + each platform's static binaries ─assemble─▶ layers + config + manifest
//! manifests of linux/amd64, linux/arm64 ─join─▶ image index + index.json
//!   ─▶ target/image/<binary>-<version>.oci.tar   (podman load -i, ctr images import)
//! ```
//!
//! Every timestamp is `SOURCE_DATE_EPOCH` (or 0) and every owner root, so the same binaries,
//! version and revision give the same index digest. [`build`] does it all for one image; the
//! `resize-guard-image` binary runs it for each image `make image` builds, and
//! `resize-guard-push` sends the layouts to a registry ([`push`], `make push`).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod assemble;
pub mod blob;
pub mod containerfile;
pub mod error;
pub mod index;
pub mod layer;
pub mod layout;
pub mod oci;
pub mod push;
pub mod spec;
mod words;

use std::collections::BTreeMap;
use std::path::Path;

pub use assemble::PlatformImage;
pub use error::ImageError;
pub use index::{Image, Reference};
pub use oci::Platform;

/// One image to build: which stage, from which binaries, and what to stamp on it.
#[derive(Debug, Clone)]
pub struct Build<'a> {
    /// The Containerfile's text.
    pub containerfile: &'a str,
    /// `BINARY`: the Containerfile stage and the image's name, e.g. `resize-guard-webhook`.
    pub binary: &'a str,
    /// One build context per platform, in index order: the directory of that platform's
    /// static binaries, which `COPY` reads from.
    pub contexts: &'a [(Platform, &'a Path)],
    /// `VERSION`: the `org.opencontainers.image.version` label and the archive's file name.
    pub version: &'a str,
    /// The tag the image is named under: `make image` gives every build its own (version and
    /// commit, e.g. `0.2.0-g1a2b3c4`), a release build the version.
    pub tag: &'a str,
    /// `REVISION`: the git commit.
    pub revision: &'a str,
    /// Registry and namespace the image is named under, e.g. `registry.invalid/resize-guard`.
    pub registry: &'a str,
    /// Every timestamp, in seconds since 1970 (`SOURCE_DATE_EPOCH`).
    pub epoch: u64,
}

/// Builds the image of `build.binary` from the Containerfile's stage `BINARY` selects, once per
/// platform, joined by an image index.
pub fn build(build: &Build<'_>) -> Result<Image, ImageError> {
    let name = build.binary;
    let build_args = BTreeMap::from([
        ("BINARY".to_string(), name.to_string()),
        ("VERSION".to_string(), build.version.to_string()),
        ("REVISION".to_string(), build.revision.to_string()),
    ]);
    let file = containerfile::parse(build.containerfile)?;
    let spec = spec::resolve(&file, &build_args)?;
    let reference = Reference {
        repository: format!("{}/{name}", build.registry.trim_end_matches('/')),
        tag: build.tag.to_string(),
    };
    let platforms = build
        .contexts
        .iter()
        .map(|(platform, context)| assemble::assemble(&spec, context, *platform, build.epoch))
        .collect::<Result<Vec<_>, _>>()?;
    index::join(reference, platforms)
}

/// The archive's file name: `<binary>-<version>.oci.tar`.
pub fn archive_name(binary: &str, version: &str) -> String {
    format!("{binary}-{version}.oci.tar")
}

#[cfg(test)]
mod tests;
