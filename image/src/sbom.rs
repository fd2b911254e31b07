//! The SBOM of an image: a CycloneDX 1.5 JSON document built from the dependency trees its
//! programs carry (`cargo auditable` embeds each program's tree, compressed, in a `.dep-v0`
//! section; [`auditable_info`] reads it back), so it lists what was compiled into those very
//! bytes, not what a manifest says should have been.
//!
//! ```text
//! image (container, pkg:oci/<name>@<index digest>)
//!  └─ dependsOn: one application per platform and program (linux/amd64:/usr/local/bin/…)
//!      └─ dependsOn: the crates of that program (library, pkg:cargo/<name>@<version>)
//!          └─ dependsOn: their crates, as Cargo.lock resolved them
//! ```
//!
//! A crate used only at build time (a proc macro, a build script's dependency) is listed with
//! scope `excluded`: it is not in the program. A crate that only some platforms' programs
//! contain says which (property `resize-guard:platforms`). Nothing in it is random or read from
//! the clock (no `serialNumber`; the timestamp is `SOURCE_DATE_EPOCH`), so the same image gives
//! the same SBOM.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use auditable_serde::{DependencyKind, Package, Source, VersionInfo};
use serde::Serialize;
use sha2::{Digest as _, Sha256};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::error::ImageError;
use crate::index::Image;
use crate::oci::Platform;

/// The largest dependency tree read from a program, decompressed (the project's are ~40 kB).
const AUDIT_JSON_LIMIT: usize = 8 * 1024 * 1024;
/// Property naming the platforms a crate is in, when not every platform's program has it.
pub const PLATFORMS_PROPERTY: &str = "resize-guard:platforms";
/// Property naming a program's platform.
pub const PLATFORM_PROPERTY: &str = "resize-guard:platform";
/// Property naming a program's path in the image.
pub const PATH_PROPERTY: &str = "resize-guard:path";
/// CycloneDX's Rust taxonomy property for a build-time dependency.
pub const DEPENDENCY_KIND_PROPERTY: &str = "cdx:rustc:dependency_kind";

/// A CycloneDX document (the subset written here).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bom {
    /// Always `CycloneDX`.
    pub bom_format: &'static str,
    /// Always `1.5`.
    pub spec_version: &'static str,
    /// The document's revision: 1.
    pub version: u32,
    /// What the document describes, when and by what tool.
    pub metadata: Metadata,
    /// The programs and every crate in them, sorted by `bom-ref`.
    pub components: Vec<Component>,
    /// Who depends on whom, one entry per component and one for the image.
    pub dependencies: Vec<Dependency>,
}

/// `metadata`.
#[derive(Debug, Clone, Serialize)]
pub struct Metadata {
    /// RFC 3339, from `SOURCE_DATE_EPOCH`.
    pub timestamp: String,
    /// The tool that wrote it.
    pub tools: Tools,
    /// The image.
    pub component: Component,
}

/// `metadata.tools` (the 1.5 form).
#[derive(Debug, Clone, Serialize)]
pub struct Tools {
    /// `resize-guard-image`.
    pub components: Vec<Component>,
}

/// One component: the image, a program or a crate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Component {
    /// `container`, `application` or `library`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Unique within the document.
    #[serde(rename = "bom-ref", skip_serializing_if = "String::is_empty")]
    pub bom_ref: String,
    /// Name.
    pub name: String,
    /// Version.
    pub version: String,
    /// `excluded` for a crate used only to build.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<&'static str>,
    /// SHA-256 of a program.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hashes: Vec<Hash>,
    /// Package URL: `pkg:cargo/…` for a crate from a registry, `pkg:oci/…` for the image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purl: Option<String>,
    /// Name-value facts, sorted by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub properties: Vec<Property>,
}

/// A component's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hash {
    /// `SHA-256`.
    pub alg: &'static str,
    /// Lower-case hex.
    pub content: String,
}

/// A name-value property.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Property {
    /// Namespaced name, e.g. `resize-guard:platform`.
    pub name: &'static str,
    /// Its value.
    pub value: String,
}

/// One node of the dependency graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dependency {
    /// The `bom-ref` of the dependent.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The `bom-ref`s it depends on, sorted.
    pub depends_on: Vec<String>,
}

/// One program of an image: where it is, for which platform, and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct Program<'a> {
    /// Its platform.
    pub platform: Platform,
    /// Its absolute path in the image, e.g. `/usr/local/bin/resize-guard-webhook`.
    pub path: &'a str,
    /// The program file it was copied from (named in errors).
    pub source: &'a Path,
    /// Its bytes.
    pub bytes: &'a [u8],
}

/// The dependency tree `cargo auditable` embedded in `program`.
pub fn audit_data(program: &Program<'_>) -> Result<VersionInfo, ImageError> {
    auditable_info::audit_info_from_slice(program.bytes, AUDIT_JSON_LIMIT).map_err(|e| {
        let problem = match e {
            auditable_info::Error::NoAuditData => {
                "it carries no dependency tree (no .dep-v0 section): build it with \
                 `cargo auditable` (make image does)"
                    .to_string()
            }
            other => format!("its dependency tree is unreadable: {other}"),
        };
        ImageError::AuditData {
            path: program.source.to_path_buf(),
            problem,
        }
    })
}

/// The `bom-ref` (and for a registry crate the purl) of a crate.
fn crate_ref(package: &Package) -> (String, Option<String>) {
    let base = format!("pkg:cargo/{}@{}", package.name, package.version);
    match &package.source {
        Source::CratesIo => (base.clone(), Some(base)),
        // A workspace, git or other registry crate: no purl would find it on crates.io.
        other => (
            format!(
                "{}:{}@{}",
                String::from(other.clone()),
                package.name,
                package.version
            ),
            None,
        ),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What is known of one crate across the image's programs.
#[derive(Default)]
struct CrateFacts {
    component: Option<Component>,
    runtime: bool,
    platforms: BTreeSet<String>,
    depends_on: BTreeSet<String>,
}

/// The SBOM of `image` (named `name`) from its `programs` (every platform's); `epoch` is
/// `SOURCE_DATE_EPOCH`.
pub fn image_sbom(
    image: &Image,
    name: &str,
    programs: &[Program<'_>],
    epoch: u64,
) -> Result<Bom, ImageError> {
    let tag = &image.reference.tag;
    let timestamp = OffsetDateTime::from_unix_timestamp(i64::try_from(epoch).unwrap_or(i64::MAX))
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .ok_or_else(|| ImageError::resolve(format!("SOURCE_DATE_EPOCH {epoch} is out of range")))?;
    let all_platforms: BTreeSet<String> = programs.iter().map(|p| p.platform.to_string()).collect();
    let mut crates: BTreeMap<String, CrateFacts> = BTreeMap::new();
    let mut components = Vec::new();
    let mut dependencies = Vec::new();
    let mut program_refs = Vec::new();
    for program in programs {
        let info = audit_data(program)?;
        let platform = program.platform.to_string();
        let refs: Vec<(String, Option<String>)> = info.packages.iter().map(crate_ref).collect();
        let mut root = None;
        for (package, (bom_ref, purl)) in info.packages.iter().zip(&refs) {
            let depends_on = package.dependencies.iter().filter_map(|&i| refs.get(i));
            if package.root {
                root = Some((package, depends_on.map(|(r, _)| r.clone()).collect()));
                continue;
            }
            let facts = crates.entry(bom_ref.clone()).or_default();
            facts.runtime |= package.kind == DependencyKind::Runtime;
            facts.platforms.insert(platform.clone());
            facts.depends_on.extend(depends_on.map(|(r, _)| r.clone()));
            facts.component.get_or_insert_with(|| Component {
                kind: "library",
                bom_ref: bom_ref.clone(),
                name: package.name.clone(),
                version: package.version.to_string(),
                scope: None,
                hashes: Vec::new(),
                purl: purl.clone(),
                properties: Vec::new(),
            });
        }
        let Some((root, depends_on)) = root else {
            return Err(ImageError::AuditData {
                path: program.source.to_path_buf(),
                problem: "its dependency tree has no root package".into(),
            });
        };
        let bom_ref = format!("{platform}:{}", program.path);
        components.push(Component {
            kind: "application",
            bom_ref: bom_ref.clone(),
            name: program
                .path
                .rsplit('/')
                .next()
                .unwrap_or(program.path)
                .to_string(),
            version: root.version.to_string(),
            scope: None,
            hashes: vec![Hash {
                alg: "SHA-256",
                content: hex(&Sha256::digest(program.bytes)),
            }],
            purl: None,
            properties: vec![
                Property {
                    name: PATH_PROPERTY,
                    value: program.path.to_string(),
                },
                Property {
                    name: PLATFORM_PROPERTY,
                    value: platform,
                },
            ],
        });
        program_refs.push(bom_ref.clone());
        dependencies.push(Dependency {
            reference: bom_ref,
            depends_on,
        });
    }
    for (bom_ref, facts) in crates {
        let Some(mut component) = facts.component else {
            continue;
        };
        if !facts.runtime {
            component.scope = Some("excluded");
            component.properties.push(Property {
                name: DEPENDENCY_KIND_PROPERTY,
                value: "build".into(),
            });
        }
        if facts.platforms != all_platforms {
            component.properties.push(Property {
                name: PLATFORMS_PROPERTY,
                value: facts.platforms.into_iter().collect::<Vec<_>>().join(","),
            });
        }
        components.push(component);
        dependencies.push(Dependency {
            reference: bom_ref,
            depends_on: facts.depends_on.into_iter().collect(),
        });
    }
    let image_ref = format!("image:{name}");
    dependencies.push(Dependency {
        reference: image_ref.clone(),
        depends_on: program_refs,
    });
    for dependency in &mut dependencies {
        dependency.depends_on.sort();
        dependency.depends_on.dedup();
    }
    components.sort_by(|a, b| a.bom_ref.cmp(&b.bom_ref));
    dependencies.sort_by(|a, b| a.reference.cmp(&b.reference));
    let digest = &image.index.digest;
    Ok(Bom {
        bom_format: "CycloneDX",
        spec_version: "1.5",
        version: 1,
        metadata: Metadata {
            timestamp,
            tools: Tools {
                components: vec![Component {
                    kind: "application",
                    bom_ref: String::new(),
                    name: "resize-guard-image".into(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    scope: None,
                    hashes: Vec::new(),
                    purl: None,
                    properties: Vec::new(),
                }],
            },
            component: Component {
                kind: "container",
                bom_ref: image_ref,
                name: name.to_string(),
                version: tag.clone(),
                scope: None,
                hashes: Vec::new(),
                // No repository_url: the image is named by its digest wherever it is pushed.
                purl: Some(format!(
                    "pkg:oci/{name}@{}?tag={tag}",
                    digest.replacen(':', "%3A", 1)
                )),
                properties: Vec::new(),
            },
        },
        components,
        dependencies,
    })
}

#[cfg(test)]
pub(crate) mod tests;
