//! # resize-guard-image
//!
//! Builds the resize-guard container images on a machine with no container engine and no
//! network: `deploy/image/Containerfile` stays the single source of truth for the image config,
//! and this crate reads it ([`containerfile`], only the subset it uses), resolves it with the
//! build arguments `BINARY`, `VERSION`, `REVISION` ([`spec`], docker's ARG scoping), turns each
//! `COPY` into a deterministic layer ([`layer`]), writes the OCI config, manifest and index
//! ([`oci`], [`assemble`]) and packs them as an OCI layout and archive ([`layout`]):
//!
//! ```text
//! Containerfile ─parse─▶ stages ─resolve(BINARY, VERSION, REVISION)─▶ ImageSpec
//! ImageSpec + static binary ─assemble─▶ layer.tar.gz + config + manifest + index.json
//!   ─▶ target/image/<binary>-<version>.oci.tar   (podman load -i, ctr images import)
//! ```
//!
//! Every timestamp is `SOURCE_DATE_EPOCH` (or 0) and every owner root, so the same binary,
//! version and revision give the same manifest digest. [`build`] does it all for one binary; the
//! `resize-guard-image` binary runs it for each binary `make image` built, and
//! `resize-guard-push` sends the layouts to a registry ([`push`], `make push`).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod assemble;
pub mod blob;
pub mod containerfile;
pub mod error;
pub mod layer;
pub mod layout;
pub mod oci;
pub mod push;
pub mod spec;
mod words;

use std::collections::BTreeMap;
use std::path::Path;

pub use assemble::{Image, Reference};
pub use error::ImageError;

/// One image to build: which binary, and what to stamp on it.
#[derive(Debug, Clone)]
pub struct Build<'a> {
    /// The Containerfile's text.
    pub containerfile: &'a str,
    /// The static binary; its file name is `BINARY` and its directory the build context.
    pub binary: &'a Path,
    /// `VERSION`, also the tag.
    pub version: &'a str,
    /// `REVISION`: the git commit.
    pub revision: &'a str,
    /// Registry and namespace the image is named under, e.g. `ghcr.io/resize-guard`.
    pub registry: &'a str,
    /// Every timestamp, in seconds since 1970 (`SOURCE_DATE_EPOCH`).
    pub epoch: u64,
}

/// Builds the image of `build.binary` from the Containerfile's stage `BINARY` selects.
pub fn build(build: &Build<'_>) -> Result<Image, ImageError> {
    let Some(name) = build.binary.file_name().and_then(|n| n.to_str()) else {
        return Err(ImageError::Source {
            path: build.binary.to_path_buf(),
        });
    };
    let context = match build.binary.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let build_args = BTreeMap::from([
        ("BINARY".to_string(), name.to_string()),
        ("VERSION".to_string(), build.version.to_string()),
        ("REVISION".to_string(), build.revision.to_string()),
    ]);
    let file = containerfile::parse(build.containerfile)?;
    let spec = spec::resolve(&file, &build_args)?;
    let reference = Reference {
        repository: format!("{}/{name}", build.registry.trim_end_matches('/')),
        tag: build.version.to_string(),
    };
    assemble::assemble(&spec, context, reference, build.epoch)
}

/// The archive's file name: `<binary>-<version>.oci.tar`.
pub fn archive_name(binary: &str, version: &str) -> String {
    format!("{binary}-{version}.oci.tar")
}

#[cfg(test)]
mod tests;
