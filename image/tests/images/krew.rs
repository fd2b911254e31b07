//! The kubectl plugin as krew ships it: the two archives `make image` wrote
//! (`target/image/kubectl-resize_guard-<version>-linux-{amd64,arm64}.tar.gz`), their `.sha256`
//! files, and the krew manifest `target/image/resize-guard.yaml` generated from
//! `plugins/resize-guard.yaml`, checked by krew's own `validate-krew-manifest` (krew v0.4.3 built
//! from its Go module by `scripts/build-krew.sh`; `RESIZE_GUARD_KREW_DIR` overrides).
//!
//! Each archive holds exactly the plugin (static, stripped, for its CPU, and runs: natively or
//! under qemu-user) and the repository's LICENSE. The manifest passes krew's structural
//! validation as generated; then krew installs every platform for real (`kubectl krew install
//! --manifest`, through the real kubectl of `RESIZE_GUARD_K8S_BIN_DIR`), downloading each archive
//! from a loopback HTTP server written here with the manifest's URIs pointed at it, so krew
//! itself checks each sha256 against the archive's bytes and finds the LICENSE. A manifest with a
//! wrong sha256 is refused. Nothing is skipped: a missing part fails with how to get it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

use crate::elf;

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn image_dir() -> PathBuf {
    repo_root().join("target/image")
}

fn archive_name(arch: &str) -> String {
    format!("kubectl-resize_guard-{VERSION}-linux-{arch}.tar.gz")
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("{}: {e}: run `make image` first", path.display()))
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The directory of krew's tools, built (or reused) by the project's script.
fn krew_dir() -> PathBuf {
    let out = Command::new(repo_root().join("scripts/build-krew.sh"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/build-krew.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(stdout.lines().last().unwrap())
}

/// The manifest's `sha256:` and `uri:` values, in platform order (read as text: krew's validator
/// parses the YAML).
fn manifest_values(manifest: &str, key: &str) -> Vec<String> {
    manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .map(|v| v.trim_matches('"').to_owned())
        .collect()
}

/// `validate-krew-manifest -manifest <path>` (plus `extra`), with krew and kubectl on PATH.
fn validate(manifest: &Path, path_dirs: &[&Path], extra: &[&str]) -> std::process::Output {
    let mut path = std::env::join_paths(path_dirs).unwrap();
    if let Some(old) = std::env::var_os("PATH") {
        path.push(":");
        path.push(old);
    }
    Command::new(krew_dir().join("validate-krew-manifest"))
        .arg("-manifest")
        .arg(manifest)
        .args(extra)
        .env("PATH", path)
        .output()
        .unwrap()
}

#[test]
fn each_plugin_archive_holds_the_static_plugin_for_its_cpu_and_the_license() {
    let license = read(&repo_root().join("LICENSE"));
    for arch in elf::ARCHES {
        let path = image_dir().join(archive_name(arch));
        let bytes = read(&path);
        let sums = String::from_utf8(read(&path.with_extension("gz.sha256"))).unwrap();
        assert_eq!(
            sums,
            format!("{}  {}\n", hex_sha256(&bytes), archive_name(arch)),
            "the .sha256 file is sha256sum's line for the archive"
        );
        let dir = tempfile::tempdir().unwrap();
        let mut names = Vec::new();
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(bytes.as_slice()));
        for entry in tar.entries().unwrap() {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().display().to_string();
            let header = entry.header();
            assert_eq!((header.uid().unwrap(), header.gid().unwrap()), (0, 0));
            assert_eq!(
                header.mode().unwrap() & 0o022,
                0,
                "{name} is group/world-writable"
            );
            let mut content = Vec::new();
            entry.read_to_end(&mut content).unwrap();
            std::fs::write(dir.path().join(&name), &content).unwrap();
            names.push(name);
        }
        assert_eq!(names, ["kubectl-resize_guard", "LICENSE"], "{arch}");
        assert_eq!(read(&dir.path().join("LICENSE")), license);
        let plugin = dir.path().join("kubectl-resize_guard");
        elf::assert_static_stripped(&read(&plugin), arch, &archive_name(arch));
        std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        assert_eq!(
            elf::run_version(&plugin, arch).trim(),
            format!("kubectl resize-guard {VERSION}")
        );
    }
}

#[test]
fn the_generated_krew_manifest_names_each_archive_by_its_sha256_and_passes_krews_validator() {
    let path = image_dir().join("resize-guard.yaml");
    let manifest = String::from_utf8(read(&path)).unwrap();
    let want: Vec<String> = elf::ARCHES
        .iter()
        .map(|arch| hex_sha256(&read(&image_dir().join(archive_name(arch)))))
        .collect();
    assert_eq!(manifest_values(&manifest, "sha256"), want);
    let uris = manifest_values(&manifest, "uri");
    assert_eq!(uris.len(), 2);
    for (uri, arch) in uris.iter().zip(elf::ARCHES) {
        assert!(uri.ends_with(&format!("/{}", archive_name(arch))), "{uri}");
    }
    assert!(manifest.contains(&format!("version: v{VERSION}\n")));
    assert!(!manifest.contains('@'), "a placeholder is left: {manifest}");

    let out = validate(&path, &[], &["-skip-install"]);
    assert!(
        out.status.success(),
        "validate-krew-manifest refused {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );

    // The template itself is not a manifest anyone can install.
    let template = repo_root().join("plugins/resize-guard.yaml");
    let out = validate(&template, &[], &["-skip-install"]);
    assert!(!out.status.success(), "the template has no real sha256");
}

/// Serves `target/image/<name>` over plain HTTP on loopback until the test ends; its base URL.
fn serve_archives() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = String::new();
            if BufReader::new(&stream).read_line(&mut request).is_err() {
                continue;
            }
            let name = request
                .split(' ')
                .nth(1)
                .unwrap_or("/")
                .trim_start_matches('/');
            let answer = match std::fs::read(image_dir().join(name)) {
                Ok(body) if !name.contains('/') => {
                    let mut a = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/gzip\r\nConnection: close\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    a.extend(body);
                    a
                }
                _ => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    .to_vec(),
            };
            let _ = stream.write_all(&answer);
        }
    });
    base
}

#[test]
fn krew_installs_both_platforms_from_the_generated_manifest_and_refuses_a_wrong_sha256() {
    let hint = "set RESIZE_GUARD_K8S_BIN_DIR=\"$(scripts/build-control-plane.sh | tail -n 1)\" \
                (make test does): krew runs as `kubectl krew`";
    let k8s = PathBuf::from(
        std::env::var_os("RESIZE_GUARD_K8S_BIN_DIR")
            .unwrap_or_else(|| panic!("RESIZE_GUARD_K8S_BIN_DIR is not set: {hint}")),
    );
    assert!(
        k8s.join("kubectl").is_file(),
        "no kubectl in {}: {hint}",
        k8s.display()
    );
    let krew = krew_dir();
    let manifest = String::from_utf8(read(&image_dir().join("resize-guard.yaml"))).unwrap();
    let base = serve_archives();
    let local = manifest
        .lines()
        .map(|line| match line.trim().strip_prefix("uri: ") {
            Some(uri) => {
                let name = uri.rsplit('/').next().unwrap();
                format!(
                    "{}uri: {base}/{name}",
                    &line[..line.len() - line.trim_start().len()]
                )
            }
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_eq!(
        local.matches(&format!("uri: {base}/")).count(),
        2,
        "{local}"
    );

    // krew wants the file named after the plugin.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("resize-guard.yaml");
    std::fs::write(&path, &local).unwrap();
    let out = validate(&path, &[&krew, &k8s], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "krew could not install it: {stderr}");
    assert!(
        stderr.contains("all 2 spec.platforms installed fine"),
        "{stderr}"
    );

    // The arm64 archive's sha256 on the amd64 platform: krew refuses to install it.
    let sums = manifest_values(&local, "sha256");
    let swapped = local.replacen(&sums[0], &sums[1], 1);
    std::fs::write(&path, swapped).unwrap();
    let out = validate(&path, &[&krew, &k8s], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a wrong sha256 was installed: {stderr}"
    );
    assert!(
        stderr.contains("spec.platforms[0] failed to install"),
        "{stderr}"
    );
}
