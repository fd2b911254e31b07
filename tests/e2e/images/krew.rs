//! The kubectl plugin as krew ships it: the archives `make image` (Linux) or `make plugins`
//! (also macOS and Windows) wrote (`target/image/kubectl-resize_guard-<version>-<os>-<arch>`
//! `.tar.gz`, `.zip` on Windows), their `.sha256` files, and the krew manifest
//! `target/image/resize-guard.yaml` generated from `plugins/resize-guard.yaml`, checked by krew's
//! own `validate-krew-manifest` (krew v0.4.3 from its Go module by `third_party/krew/build.sh`;
//! `RESIZE_GUARD_KREW_DIR` overrides).
//!
//! The manifest lists exactly the archives in the directory, its Linux platforms those of the
//! images. Each archive holds exactly the plugin, its completion helper and the repository's
//! LICENSE; both programs are for the platform and carry their dependency trees: on Linux static,
//! stripped and run (natively or under qemu; the helper hands a completion to the plugin beside
//! it where the platform is this machine's), on macOS a signed Mach-O loading only system
//! libraries ([`super::macho`]), on Windows a PE32+ console program importing only Windows' DLLs
//! ([`super::pe`]). The manifest passes krew's structural validation as generated; then krew
//! installs every platform for real (`kubectl krew install --manifest`, through the real
//! kubectl of `RESIZE_GUARD_K8S_BIN_DIR`), downloading each archive from a loopback HTTP server
//! written here with the manifest's URIs pointed at it, so krew itself checks each sha256 against
//! the archive's bytes and unpacks it. A manifest with a wrong sha256 is refused. Nothing is
//! skipped: a missing part fails with how to get it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest as _, Sha256};

use super::{elf, image_dir, repo_root};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// One platform the manifest lists, as krew names it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Listed {
    os: String,
    arch: String,
    uri: String,
    sha256: String,
    bin: String,
}

impl Listed {
    fn archive(&self) -> String {
        let extension = if self.os == "windows" {
            "zip"
        } else {
            "tar.gz"
        };
        format!(
            "kubectl-resize_guard-{VERSION}-{}-{}.{extension}",
            self.os, self.arch
        )
    }
}

/// The manifest's `spec.platforms`, parsed.
fn listed(manifest: &str) -> Vec<Listed> {
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(manifest).unwrap();
    let text = |v: &serde_yaml_ng::Value| v.as_str().unwrap().to_owned();
    doc["spec"]["platforms"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| Listed {
            os: text(&p["selector"]["matchLabels"]["os"]),
            arch: text(&p["selector"]["matchLabels"]["arch"]),
            uri: text(&p["uri"]),
            sha256: text(&p["sha256"]),
            bin: text(&p["bin"]),
        })
        .collect()
}

fn manifest_text() -> String {
    String::from_utf8(read(&image_dir().join("resize-guard.yaml"))).unwrap()
}

/// The files an archive holds, in order: `(name, mode, content)`; a `.zip` is read by Python's
/// `zipfile` (krew reads it with Go's archive/zip in the install test below).
fn unpack(platform: &Listed, bytes: &[u8]) -> Vec<(String, u32, Vec<u8>)> {
    if platform.os != "windows" {
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
        return tar
            .entries()
            .unwrap()
            .map(|entry| {
                let mut entry = entry.unwrap();
                let header = entry.header();
                assert_eq!((header.uid().unwrap(), header.gid().unwrap()), (0, 0));
                let mode = header.mode().unwrap();
                let name = entry.path().unwrap().display().to_string();
                let mut content = Vec::new();
                entry.read_to_end(&mut content).unwrap();
                (name, mode, content)
            })
            .collect();
    }
    let dir = tempfile::tempdir().unwrap();
    let zip = dir.path().join("plugin.zip");
    std::fs::write(&zip, bytes).unwrap();
    let script = "import sys, zipfile\n\
                  with zipfile.ZipFile(sys.argv[1]) as z:\n\
                  \x20   assert z.testzip() is None\n\
                  \x20   for i in z.infolist():\n\
                  \x20       print(i.filename, i.external_attr >> 16 & 0o7777)\n\
                  \x20   z.extractall(sys.argv[2])\n";
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&zip)
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let (name, mode) = line.split_once(' ').unwrap();
            let content = std::fs::read(dir.path().join(name)).unwrap();
            (name.to_owned(), mode.parse().unwrap(), content)
        })
        .collect()
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
    let out = Command::new(repo_root().join("third_party/krew/build.sh"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "third_party/krew/build.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    PathBuf::from(stdout.lines().last().unwrap())
}

/// `validate-krew-manifest -manifest <path>` (plus `extra`), with krew and kubectl on PATH and
/// a krew root of its own (krew creates its directories there, never in the runner's home).
fn validate(manifest: &Path, path_dirs: &[&Path], extra: &[&str]) -> std::process::Output {
    let mut path = std::env::join_paths(path_dirs).unwrap();
    if let Some(old) = std::env::var_os("PATH") {
        path.push(":");
        path.push(old);
    }
    let root = tempfile::tempdir().unwrap();
    Command::new(krew_dir().join("validate-krew-manifest"))
        .arg("-manifest")
        .arg(manifest)
        .args(extra)
        .env("PATH", path)
        .env("KREW_ROOT", root.path())
        .output()
        .unwrap()
}

#[test]
fn each_plugin_archive_holds_the_plugin_and_its_completion_helper_for_its_platform_and_the_license()
{
    let license = read(&repo_root().join("LICENSE"));
    let platforms = listed(&manifest_text());
    let linux: Vec<&str> = platforms
        .iter()
        .filter(|p| p.os == "linux")
        .map(|p| p.arch.as_str())
        .collect();
    assert_eq!(
        linux,
        super::archive::image_arches(),
        "the plugin is built with the images"
    );
    // The directory holds the archives the manifest lists, no other.
    let mut present: Vec<String> = std::fs::read_dir(image_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("kubectl-resize_guard-") && !n.ends_with(".sha256"))
        .collect();
    present.sort();
    let mut names: Vec<String> = platforms.iter().map(Listed::archive).collect();
    names.sort();
    assert_eq!(present, names, "archives in target/image vs the manifest");

    for platform in &platforms {
        let name = platform.archive();
        let what = format!("{}/{} ({name})", platform.os, platform.arch);
        let path = image_dir().join(&name);
        let bytes = read(&path);
        let sums = String::from_utf8(read(&image_dir().join(format!("{name}.sha256")))).unwrap();
        assert_eq!(
            sums,
            format!("{}  {name}\n", hex_sha256(&bytes)),
            "the .sha256 file is sha256sum's line for the archive"
        );
        let files = unpack(platform, &bytes);
        let entries: Vec<(&str, u32)> = files.iter().map(|(n, m, _)| (n.as_str(), *m)).collect();
        let helper = platform.bin.replace("kubectl-", "kubectl_complete-");
        assert_eq!(
            entries,
            [
                (platform.bin.as_str(), 0o755),
                (helper.as_str(), 0o755),
                ("LICENSE", 0o644)
            ],
            "{what}"
        );
        assert_eq!(files[2].2, license);
        let unpacked = tempfile::tempdir().unwrap();
        let mut trees = Vec::new();
        for (name, _, program) in &files[..2] {
            let what = format!("{what} {name}");
            let tree = match platform.os.as_str() {
                "linux" => {
                    elf::assert_static_stripped(program, &platform.arch, &what);
                    let path = unpacked.path().join(name);
                    std::fs::write(&path, program).unwrap();
                    std::fs::set_permissions(
                        &path,
                        std::os::unix::fs::PermissionsExt::from_mode(0o755),
                    )
                    .unwrap();
                    elf::elf_audit_tree(program, &what)
                }
                "darwin" => super::macho::check(program, &platform.arch, &what),
                "windows" => super::pe::check(program, &what).1,
                other => panic!("{what}: no check for {other}"),
            };
            trees.push(tree);
        }
        if platform.os == "linux" {
            let plugin = unpacked.path().join(&platform.bin);
            assert_eq!(
                elf::run_version(&plugin, &platform.arch).trim(),
                format!("kubectl resize-guard {VERSION}")
            );
            // The helper runs the plugin beside it: that needs the kernel to run the platform's
            // programs (qemu-user runs one program, not the one it execs).
            let native = match std::env::consts::ARCH {
                "x86_64" => "amd64",
                "aarch64" => "arm64",
                other => other,
            };
            if platform.arch == native {
                let helper = unpacked.path().join(&helper);
                let answer = elf::run(&helper, &platform.arch, &["wh"]);
                assert!(answer.starts_with("what-if\t"), "{what}: {answer}");
                assert_eq!(
                    answer,
                    elf::run(&plugin, &platform.arch, &["__complete", "wh"]),
                    "{what}: the helper's answer is the plugin's"
                );
            }
        }
        for tree in &trees {
            let root = tree["packages"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["root"] == true)
                .unwrap();
            assert_eq!(root["name"], "resize-guard-kubectl", "{what}");
            assert_eq!(root["version"], VERSION, "{what}");
        }
    }
}

#[test]
fn the_generated_krew_manifest_names_each_archive_by_its_sha256_and_passes_krews_validator() {
    let path = image_dir().join("resize-guard.yaml");
    let manifest = manifest_text();
    let platforms = listed(&manifest);
    assert!(!platforms.is_empty());
    for platform in &platforms {
        let name = platform.archive();
        assert_eq!(
            platform.sha256,
            hex_sha256(&read(&image_dir().join(&name))),
            "{name}"
        );
        assert!(
            platform.uri.ends_with(&format!("/v{VERSION}/{name}")),
            "{}",
            platform.uri
        );
        let exe = if platform.os == "windows" { ".exe" } else { "" };
        assert_eq!(platform.bin, format!("kubectl-resize_guard{exe}"));
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
fn krew_installs_every_platform_from_the_generated_manifest_and_refuses_a_wrong_sha256() {
    let hint = "set RESIZE_GUARD_K8S_BIN_DIR=\"$(third_party/control-plane/build.sh | tail -n 1)\" \
                (make e2e does): krew runs as `kubectl krew`";
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
    let manifest = manifest_text();
    let count = listed(&manifest).len();
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
        count,
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
        stderr.contains(&format!("all {count} spec.platforms installed fine")),
        "{stderr}"
    );

    // Another sha256 on the first platform: krew refuses to install it.
    let first = &listed(&local)[0].sha256;
    let wrong = local.replacen(first.as_str(), &"f".repeat(64), 1);
    std::fs::write(&path, wrong).unwrap();
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
