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
//! each program's embedded dependency tree ─▶ target/image/<binary>-<version>.cdx.json
//! ```
//!
//! Every program packed must be a static program for its platform ([`executable`]); [`sbom`]
//! writes each image's CycloneDX SBOM from the dependency trees `cargo auditable` embedded in its
//! programs; [`plugin`] packs the kubectl plugin for krew (archives, sha256, the manifest).
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
pub mod executable;
pub mod index;
pub mod layer;
pub mod layout;
pub mod oci;
pub mod plugin;
pub mod push;
pub mod sbom;
pub mod spec;
mod words;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
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

/// The Containerfile's stage `build.binary` with the build arguments resolved.
fn resolve(build: &Build<'_>) -> Result<spec::ImageSpec, ImageError> {
    let build_args = BTreeMap::from([
        ("BINARY".to_string(), build.binary.to_string()),
        ("VERSION".to_string(), build.version.to_string()),
        ("REVISION".to_string(), build.revision.to_string()),
    ]);
    let file = containerfile::parse(build.containerfile)?;
    spec::resolve(&file, &build_args)
}

/// Builds the image of `build.binary` from the Containerfile's stage `BINARY` selects, once per
/// platform, joined by an image index.
pub fn build(build: &Build<'_>) -> Result<Image, ImageError> {
    let name = build.binary;
    let spec = resolve(build)?;
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

/// The SBOM of `image`, built by [`build`] from `build`: every platform's programs (the
/// executable files its `COPY`s bring) and the crates in them, from their embedded dependency
/// trees ([`sbom`]).
pub fn sbom(build: &Build<'_>, image: &Image) -> Result<sbom::Bom, ImageError> {
    let spec = resolve(build)?;
    let mut files = Vec::new();
    for (platform, context) in build.contexts {
        for copy in &spec.copies {
            let path = context.join(&copy.src);
            let metadata = std::fs::metadata(&path).map_err(ImageError::io("reading", &path))?;
            if metadata.permissions().mode() & 0o111 == 0 {
                continue;
            }
            let bytes = std::fs::read(&path).map_err(ImageError::io("reading", &path))?;
            files.push((*platform, copy.dest.as_str(), path, bytes));
        }
    }
    let programs: Vec<sbom::Program<'_>> = files
        .iter()
        .map(|(platform, dest, path, bytes)| sbom::Program {
            platform: *platform,
            path: dest,
            source: path,
            bytes,
        })
        .collect();
    sbom::image_sbom(image, build.binary, &programs, build.epoch)
}

/// The SBOM's file name: `<binary>-<version>.cdx.json`.
pub fn sbom_name(binary: &str, version: &str) -> String {
    format!("{binary}-{version}.cdx.json")
}

/// The archive's file name: `<binary>-<version>.oci.tar`.
pub fn archive_name(binary: &str, version: &str) -> String {
    format!("{binary}-{version}.oci.tar")
}

#[cfg(test)]
mod tests;
