//! The images `make image` wrote, checked as a container runtime would read them: for each
//! image, `target/image/<image>-<version>.oci.tar` → `index.json` → image index → one manifest
//! per platform built (linux/amd64 and linux/arm64 by default, `PLATFORMS` picks) → config and
//! layers, every blob's digest and size checked against its bytes, then the layers unpacked into
//! a temporary root filesystem and each `<rootfs>/usr/local/bin/<binary> --version` run:
//! natively on amd64, under qemu's `qemu-aarch64` on arm64.
//! Each binary is static and stripped for its platform's CPU (checked in its ELF headers,
//! `elf.rs`), so that is running what the image holds.
//!
//! Deliberately not skippable: a missing archive fails with "run `make image` first". Reads the
//! archive with tar, flate2, sha2 and serde_json only, never with the image crate's writer code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::Read as _;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::{elf, image_dir};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const BINARIES: [&str; 2] = ["resize-guard-webhook", "resize-guard-controller"];

fn sha256(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// The archive `make image` wrote for `binary`: its files by path (also read by `push.rs`).
pub(crate) fn read_archive(binary: &str) -> HashMap<String, Vec<u8>> {
    let path = image_dir().join(format!("{binary}-{VERSION}.oci.tar"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{} is missing ({e}): run `make image` first",
            path.display()
        )
    });
    let mut files = HashMap::new();
    let mut archive = tar::Archive::new(bytes.as_slice());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.header().entry_type().is_file() {
            let name = entry.path().unwrap().to_string_lossy().into_owned();
            let mut content = Vec::new();
            entry.read_to_end(&mut content).unwrap();
            files.insert(name, content);
        }
    }
    files
}

/// The blob a descriptor points to, after checking its size and digest.
fn blob<'a>(files: &'a HashMap<String, Vec<u8>>, descriptor: &Value) -> &'a [u8] {
    let digest = descriptor["digest"].as_str().unwrap();
    let hex = digest.strip_prefix("sha256:").unwrap();
    let bytes = files
        .get(&format!("blobs/sha256/{hex}"))
        .unwrap_or_else(|| panic!("blob {digest} is not in the archive"));
    assert_eq!(
        sha256(bytes),
        digest,
        "blob bytes do not match their digest"
    );
    assert_eq!(descriptor["size"].as_u64(), Some(bytes.len() as u64));
    bytes
}

fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

/// The binaries each image holds under /usr/local/bin, the entrypoint first.
fn binaries_of(image: &str) -> Vec<&str> {
    match image {
        // resize-guard-certs rides in the controller image (deploy/image/Containerfile).
        "resize-guard-controller" => vec![image, "resize-guard-certs"],
        _ => vec![image],
    }
}

/// One platform's manifest, config and layers, as a runtime of that platform reads them.
fn check_platform(files: &HashMap<String, Vec<u8>>, binary: &str, entry: &Value, arch: &str) {
    assert_eq!(
        entry["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(entry["platform"]["architecture"], arch);
    assert_eq!(entry["platform"]["os"], "linux");

    let manifest = json(blob(files, entry));
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.oci.image.config.v1+json"
    );
    let layers = manifest["layers"].as_array().unwrap();
    let shipped = binaries_of(binary);
    assert_eq!(layers.len(), shipped.len(), "one layer per COPY");

    let config = json(blob(files, &manifest["config"]));
    assert_eq!(config["architecture"], arch);
    assert_eq!(config["os"], "linux");
    let entrypoint = format!("/usr/local/bin/{binary}");
    assert_eq!(
        config["config"]["Entrypoint"],
        serde_json::json!([entrypoint])
    );
    assert_eq!(config["config"]["User"], "65532:65532");
    // What docker and buildah set on a scratch image.
    assert_eq!(
        config["config"]["Env"],
        serde_json::json!(["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"])
    );
    let labels = &config["config"]["Labels"];
    let label = |key: &str| {
        labels[format!("org.opencontainers.image.{key}")]
            .as_str()
            .unwrap()
    };
    assert_eq!(label("version"), VERSION);
    assert_eq!(label("title"), binary);
    assert_eq!(
        label("source"),
        "https://github.com/resize-guard/resize-guard"
    );
    assert_eq!(label("licenses"), "Apache-2.0");
    assert!(!label("description").is_empty());
    let revision = label("revision");
    assert!(
        revision == "unknown"
            || (revision.len() == 40 && revision.chars().all(|c| c.is_ascii_hexdigit())),
        "revision label {revision:?} is neither a commit nor `unknown`"
    );
    assert_eq!(config["rootfs"]["type"], "layers");

    let rootfs = tempfile::tempdir().unwrap();
    let mut diff_ids = Vec::new();
    for layer in layers {
        assert_eq!(
            layer["mediaType"],
            "application/vnd.oci.image.layer.v1.tar+gzip"
        );
        let mut layer_tar = Vec::new();
        flate2::read::GzDecoder::new(blob(files, layer))
            .read_to_end(&mut layer_tar)
            .unwrap();
        diff_ids.push(sha256(&layer_tar));
        let mut layer = tar::Archive::new(layer_tar.as_slice());
        for entry in layer.entries().unwrap() {
            let mut entry = entry.unwrap();
            let header = entry.header();
            let path = entry.path().unwrap().to_string_lossy().into_owned();
            assert_eq!(
                (header.uid().unwrap(), header.gid().unwrap()),
                (0, 0),
                "{path}"
            );
            if path.starts_with("usr/local/bin/") {
                assert_eq!(header.mode().unwrap(), 0o755, "{path}");
            }
            assert!(
                entry.unpack_in(rootfs.path()).unwrap(),
                "{path} escapes the rootfs"
            );
        }
    }
    assert_eq!(config["rootfs"]["diff_ids"], serde_json::json!(diff_ids));

    for name in shipped {
        let program = rootfs.path().join("usr/local/bin").join(name);
        let elf = std::fs::read(&program)
            .unwrap_or_else(|e| panic!("{arch} {binary} image lacks {name}: {e}"));
        elf::assert_static_stripped(&elf, arch, &format!("{name} ({arch})"));
        assert_eq!(
            elf::run_version(&program, arch).trim(),
            format!("{name} {VERSION}")
        );
    }
}

fn check_image(binary: &str) {
    let files = read_archive(binary);
    assert_eq!(json(&files["oci-layout"])["imageLayoutVersion"], "1.0.0");

    let layout = json(&files["index.json"]);
    assert_eq!(layout["schemaVersion"], 2);
    let entries = layout["manifests"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    let entry = &entries[0];
    assert_eq!(
        entry["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    // Every build has its own tag (no node keeps a stale image under IfNotPresent): the
    // version, then the commit it was built from, as git names it.
    let tag = built_tag();
    assert_eq!(
        entry["annotations"]["org.opencontainers.image.ref.name"],
        tag
    );
    assert_eq!(
        entry["annotations"]["io.containerd.image.name"],
        format!("registry.invalid/resize-guard/{binary}:{tag}")
    );

    let index = json(blob(&files, entry));
    assert_eq!(index["schemaVersion"], 2);
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let manifests = index["manifests"].as_array().unwrap();
    let arches: Vec<&str> = manifests
        .iter()
        .map(|m| m["platform"]["architecture"].as_str().unwrap())
        .collect();
    assert_eq!(
        arches,
        image_arches(),
        "one manifest per platform, as the webhook's"
    );
    for (manifest, arch) in manifests.iter().zip(arches) {
        check_platform(&files, binary, manifest, arch);
    }
}

/// The CPUs the images were built for (`PLATFORMS`), in index order, read from the webhook
/// image's index: amd64, arm64 or both, in that order.
pub fn image_arches() -> Vec<&'static str> {
    let files = read_archive(BINARIES[0]);
    let layout = json(&files["index.json"]);
    let index = json(blob(&files, &layout["manifests"][0]));
    let arches: Vec<&'static str> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m["platform"]["architecture"].as_str().unwrap() {
            "amd64" => "amd64",
            "arm64" => "arm64",
            other => panic!("an image for {other}: make image builds amd64 and arm64"),
        })
        .collect();
    assert!(
        ["amd64 arm64", "amd64", "arm64"].contains(&arches.join(" ").as_str()),
        "image platforms {arches:?}: each of amd64, arm64 at most once, in that order"
    );
    arches
}

#[test]
fn webhook_archive_indexes_an_image_of_runnable_static_binaries_per_platform() {
    check_image(BINARIES[0]);
}

#[test]
fn controller_archive_indexes_an_image_per_platform_with_the_controller_and_certs() {
    check_image(BINARIES[1]);
}

/// The tag `make image` named the images with, checked against git: `<version>-g<commit>`, with
/// `-dirty` when the tree had uncommitted changes.
pub fn built_tag() -> String {
    let path = super::repo_root().join(format!(
        "target/image/resize-guard-webhook-{VERSION}.oci/index.json"
    ));
    let layout = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: run `make image` (or `make plugins`) first; make test does",
            path.display()
        )
    });
    let tag = json(&layout)["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
        .as_str()
        .unwrap()
        .to_owned();
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=7", "HEAD"])
        .current_dir(super::repo_root())
        .output()
        .unwrap();
    let commit = String::from_utf8(head.stdout).unwrap();
    let clean = format!("{VERSION}-g{}", commit.trim());
    assert!(
        tag == clean || tag == format!("{clean}-dirty"),
        "target/image is stale: the build's tag {tag:?} is not {clean}[-dirty]: \
         run `make image` (or `make plugins`) again"
    );
    tag
}

/// Every program in `binary`'s image: `(architecture, path in the image, bytes)`, platforms in
/// index order (also read by `sbom.rs`).
pub(crate) fn image_programs(binary: &str) -> Vec<(String, String, Vec<u8>)> {
    let files = read_archive(binary);
    let layout = json(&files["index.json"]);
    let index = json(blob(&files, &layout["manifests"][0]));
    let mut programs = Vec::new();
    for entry in index["manifests"].as_array().unwrap() {
        let arch = entry["platform"]["architecture"].as_str().unwrap();
        let manifest = json(blob(&files, entry));
        for layer in manifest["layers"].as_array().unwrap() {
            let mut tar = Vec::new();
            flate2::read::GzDecoder::new(blob(&files, layer))
                .read_to_end(&mut tar)
                .unwrap();
            for file in tar::Archive::new(tar.as_slice()).entries().unwrap() {
                let mut file = file.unwrap();
                let path = format!("/{}", file.path().unwrap().display());
                if file.header().entry_type().is_file() && path.starts_with("/usr/local/bin/") {
                    let mut bytes = Vec::new();
                    file.read_to_end(&mut bytes).unwrap();
                    programs.push((arch.to_owned(), path, bytes));
                }
            }
        }
    }
    programs
}

/// The digest of `binary`'s image index, as `index.json` names it.
pub(crate) fn index_digest(binary: &str) -> String {
    let files = read_archive(binary);
    json(&files["index.json"])["manifests"][0]["digest"]
        .as_str()
        .unwrap()
        .to_owned()
}
