//! The kubectl plugin as krew ships it, for each platform built: an archive holding the program
//! (`kubectl-resize_guard`, `.exe` on Windows), its shell-completion helper
//! (`kubectl_complete-resize_guard`, which kubectl runs from `PATH` and which hands the words to
//! the program beside it) and the repository's LICENSE — `.tar.gz` for Linux and macOS, `.zip`
//! for Windows (krew's convention) — its `.sha256` (sha256sum's line), and one krew manifest
//! listing them all ([`krew`]). Both programs must be static programs for their platform
//! ([`crate::executable`]). Owners root, modes 0755/0644 and every time
//! `SOURCE_DATE_EPOCH`: the same programs give the same bytes.
//!
//! [`write`] also removes the archives of platforms not built this time, so the directory never
//! holds an archive the manifest does not list.

pub mod krew;
pub mod zip;

use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use crate::error::ImageError;
use crate::executable;
use crate::layer::{gzip, header};
use crate::oci::Platform;

/// The program's name, as krew runs it for `kubectl resize-guard`.
pub const PROGRAM: &str = "kubectl-resize_guard";
/// The completion helper's name, as kubectl (v1.26+) looks it up for `kubectl resize-guard`.
pub const HELPER: &str = "kubectl_complete-resize_guard";
/// The manifest's file name.
pub const MANIFEST: &str = "resize-guard.yaml";

/// The program's file name on `platform`.
pub fn program_name(platform: Platform) -> String {
    executable_name(PROGRAM, platform)
}

/// The completion helper's file name on `platform`.
pub fn helper_name(platform: Platform) -> String {
    executable_name(HELPER, platform)
}

fn executable_name(name: &str, platform: Platform) -> String {
    if platform.os == "windows" {
        format!("{name}.exe")
    } else {
        name.to_string()
    }
}

/// The archive's file name: `kubectl-resize_guard-<version>-<os>-<arch>.tar.gz` (`.zip` on
/// Windows).
pub fn archive_name(version: &str, platform: Platform) -> String {
    let extension = if platform.os == "windows" {
        "zip"
    } else {
        "tar.gz"
    };
    format!(
        "{PROGRAM}-{version}-{}-{}.{extension}",
        platform.os, platform.architecture
    )
}

/// The programs one archive carries, built for its platform.
#[derive(Debug, Clone, Copy)]
pub struct Programs<'a> {
    /// The plugin ([`PROGRAM`]).
    pub plugin: &'a [u8],
    /// The completion helper ([`HELPER`]).
    pub helper: &'a [u8],
}

/// The archive of `programs` (built for `platform`) and `license`, in that order.
pub fn archive(
    platform: Platform,
    programs: Programs<'_>,
    license: &[u8],
    epoch: u64,
) -> std::io::Result<Vec<u8>> {
    let (plugin, helper) = (program_name(platform), helper_name(platform));
    let entries = [
        zip::Entry {
            name: &plugin,
            mode: 0o755,
            content: programs.plugin,
        },
        zip::Entry {
            name: &helper,
            mode: 0o755,
            content: programs.helper,
        },
        zip::Entry {
            name: "LICENSE",
            mode: 0o644,
            content: license,
        },
    ];
    if platform.os == "windows" {
        return zip::archive(&entries, epoch);
    }
    let mut builder = tar::Builder::new(Vec::new());
    for entry in &entries {
        let size = entry.content.len() as u64;
        let mut file = header(tar::EntryType::Regular, entry.mode, size, epoch);
        builder.append_data(&mut file, entry.name, entry.content)?;
    }
    gzip(&builder.into_inner()?)
}

/// What to package.
#[derive(Debug, Clone)]
pub struct Package<'a> {
    /// The plugin's version (archive names, the manifest's `v<version>`).
    pub version: &'a str,
    /// Each platform and the directory holding its program, in manifest order.
    pub platforms: &'a [(Platform, PathBuf)],
    /// The LICENSE file's bytes.
    pub license: &'a [u8],
    /// The manifest template's text (`plugins/resize-guard.yaml`).
    pub template: &'a str,
    /// Every timestamp, in seconds since 1970 (`SOURCE_DATE_EPOCH`).
    pub epoch: u64,
}

/// One archive written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Its platform.
    pub platform: Platform,
    /// Its path.
    pub path: PathBuf,
    /// Lower-case hex SHA-256 of its bytes.
    pub sha256: String,
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ImageError> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(ImageError::io("writing", &tmp))?;
    std::fs::rename(&tmp, path).map_err(ImageError::io("renaming into place", path))
}

/// The program at `source`, refused unless it is a static program for `platform`.
fn read_program(source: &Path, platform: Platform) -> Result<Vec<u8>, ImageError> {
    let program = std::fs::read(source).map_err(ImageError::io("reading", source))?;
    executable::check(&program, platform).map_err(|problem| ImageError::Program {
        path: source.to_path_buf(),
        problem,
    })?;
    Ok(program)
}

/// Writes every platform's archive and `.sha256` and the manifest [`MANIFEST`] into `out_dir`,
/// and removes the archives of the other known platforms; the archives, in order.
pub fn write(package: &Package<'_>, out_dir: &Path) -> Result<Vec<Written>, ImageError> {
    if package.platforms.is_empty() {
        return Err(ImageError::resolve("no plugin platform to package"));
    }
    std::fs::create_dir_all(out_dir).map_err(ImageError::io("creating", out_dir))?;
    let mut written = Vec::new();
    for (i, (platform, dir)) in package.platforms.iter().enumerate() {
        if package.platforms[..i].iter().any(|(p, _)| p == platform) {
            return Err(ImageError::resolve(format!(
                "plugin platform {platform} given twice"
            )));
        }
        let plugin = read_program(&dir.join(program_name(*platform)), *platform)?;
        let helper = read_program(&dir.join(helper_name(*platform)), *platform)?;
        let programs = Programs {
            plugin: &plugin,
            helper: &helper,
        };
        let name = archive_name(package.version, *platform);
        let path = out_dir.join(&name);
        let bytes = archive(*platform, programs, package.license, package.epoch)
            .map_err(ImageError::io("packing", &path))?;
        let sha256: String = Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        write_file(&path, &bytes)?;
        let sum = out_dir.join(format!("{name}.sha256"));
        write_file(&sum, format!("{sha256}  {name}\n").as_bytes())?;
        written.push(Written {
            platform: *platform,
            path,
            sha256,
        });
    }
    let names: Vec<(String, String)> = written
        .iter()
        .map(|w| {
            (
                archive_name(package.version, w.platform),
                program_name(w.platform),
            )
        })
        .collect();
    let listed: Vec<krew::Listed<'_>> = written
        .iter()
        .zip(&names)
        .map(|(w, (archive, program))| krew::Listed {
            platform: w.platform,
            archive,
            program,
            sha256: &w.sha256,
        })
        .collect();
    let manifest = krew::manifest(package.template, package.version, &listed)
        .map_err(|problem| ImageError::resolve(format!("plugins/resize-guard.yaml: {problem}")))?;
    write_file(&out_dir.join(MANIFEST), manifest.as_bytes())?;
    for platform in Platform::PLUGINS {
        if written.iter().any(|w| w.platform == platform) {
            continue;
        }
        let stale = out_dir.join(archive_name(package.version, platform));
        for path in [
            stale.clone(),
            PathBuf::from(format!("{}.sha256", stale.display())),
        ] {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(ImageError::io("removing the stale", path)(e)),
            }
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests;
