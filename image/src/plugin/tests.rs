//! The plugin archives (a `.tar.gz` read back with tar and flate2, a `.zip` read back by
//! Python's `zipfile`, independent of the writer here) and the manifest generated from the
//! project's own template: only what was built, each sha256 its archive's, and every way the
//! template and the build can disagree refused.

use std::process::Command;

use serde_yaml_ng::Value;

use super::*;
use crate::executable::tests::{program_for, static_amd64};

const TEMPLATE: &str = include_str!("../../../plugins/resize-guard.yaml");

/// Each platform's program written into its own directory under `root`.
fn programs(root: &Path, platforms: &[Platform]) -> Vec<(Platform, PathBuf)> {
    platforms
        .iter()
        .map(|platform| {
            let dir = root.join(format!("{}-{}", platform.os, platform.architecture));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(program_name(*platform)), program_for(*platform)).unwrap();
            std::fs::write(dir.join(helper_name(*platform)), program_for(*platform)).unwrap();
            (*platform, dir)
        })
        .collect()
}

fn package<'a>(platforms: &'a [(Platform, PathBuf)]) -> Package<'a> {
    Package {
        version: "0.2.0",
        platforms,
        license: b"Apache License\n",
        template: TEMPLATE,
        epoch: 1_700_000_000,
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const PROGRAMS: Programs<'static> = Programs {
    plugin: b"program",
    helper: b"helper",
};

#[test]
fn a_tar_gz_holds_the_program_its_helper_and_the_license_owned_by_root() {
    let bytes = archive(Platform::DARWIN_ARM64, PROGRAMS, b"license", 7).unwrap();
    let entries = crate::tests::tar_entries(flate2::read::GzDecoder::new(bytes.as_slice()));
    assert_eq!(
        entries,
        [
            ("kubectl-resize_guard".into(), 0o755, 0, 0, 7, 7),
            ("kubectl_complete-resize_guard".into(), 0o755, 0, 0, 7, 6),
            ("LICENSE".into(), 0o644, 0, 0, 7, 7),
        ]
    );
    assert_eq!(
        bytes,
        archive(Platform::DARWIN_ARM64, PROGRAMS, b"license", 7).unwrap()
    );
}

#[test]
fn a_zip_is_read_back_by_pythons_zipfile_with_names_modes_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let program = vec![b'x'; 100_000];
    let programs = Programs {
        plugin: &program,
        helper: b"helper",
    };
    let bytes = archive(Platform::WINDOWS_AMD64, programs, b"license", 1_700_000_000).unwrap();
    let path = dir.path().join("a.zip");
    std::fs::write(&path, &bytes).unwrap();
    let script = r#"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    assert z.testzip() is None
    for i in z.infolist():
        print(i.filename, oct(i.external_attr >> 16), i.date_time, i.compress_type,
              len(z.read(i)), z.read(i)[:7].decode())
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&path)
        .output()
        .expect("python3 (the Makefile needs it too)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "kubectl-resize_guard.exe 0o100755 (2023, 11, 14, 22, 13, 20) 8 100000 xxxxxxx\n\
         kubectl_complete-resize_guard.exe 0o100755 (2023, 11, 14, 22, 13, 20) 8 6 helper\n\
         LICENSE 0o100644 (2023, 11, 14, 22, 13, 20) 8 7 license\n"
    );
    assert!(bytes.len() < 1_000, "deflated: {} bytes", bytes.len());
}

#[test]
fn dos_time_clamps_to_what_a_zip_can_say() {
    assert_eq!(zip::dos_time(0), (1 << 5 | 1, 0));
    assert_eq!(zip::dos_time(315_532_800), (1 << 5 | 1, 0));
    assert_eq!(zip::dos_time(u64::MAX).0 >> 9, 127);
}

#[test]
fn writes_every_archive_its_sha256_and_a_manifest_of_those_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let built = programs(
        dir.path(),
        &[
            Platform::LINUX_AMD64,
            Platform::WINDOWS_AMD64,
            Platform::DARWIN_ARM64,
        ],
    );
    let written = write(&package(&built), &out).unwrap();
    assert_eq!(written.len(), 3);
    for w in &written {
        let bytes = std::fs::read(&w.path).unwrap();
        assert_eq!(w.sha256, sha256_hex(&bytes));
        let name = w.path.file_name().unwrap().to_str().unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join(format!("{name}.sha256"))).unwrap(),
            format!("{}  {name}\n", w.sha256)
        );
    }
    let names: Vec<String> = written
        .iter()
        .map(|w| w.path.file_name().unwrap().to_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "kubectl-resize_guard-0.2.0-linux-amd64.tar.gz",
            "kubectl-resize_guard-0.2.0-windows-amd64.zip",
            "kubectl-resize_guard-0.2.0-darwin-arm64.tar.gz",
        ]
    );

    let text = std::fs::read_to_string(out.join(MANIFEST)).unwrap();
    assert!(text.starts_with(
        "# krew manifest of kubectl resize-guard 0.2.0 (linux/amd64, windows/amd64, darwin/arm64)"
    ));
    assert!(!text.contains('@'), "{text}");
    let manifest: Value = serde_yaml_ng::from_str(&text).unwrap();
    assert_eq!(manifest["spec"]["version"], "v0.2.0");
    assert_eq!(manifest["metadata"]["name"], "resize-guard");
    let platforms = manifest["spec"]["platforms"].as_sequence().unwrap();
    // Template order (linux, darwin, windows), each with its own archive's sha256.
    let listed: Vec<(String, String, String, String)> = platforms
        .iter()
        .map(|p| {
            let labels = &p["selector"]["matchLabels"];
            (
                format!(
                    "{}/{}",
                    labels["os"].as_str().unwrap(),
                    labels["arch"].as_str().unwrap()
                ),
                p["uri"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_owned(),
                p["sha256"].as_str().unwrap().to_owned(),
                p["bin"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let sha = |i: usize| written[i].sha256.clone();
    assert_eq!(
        listed,
        [
            (
                "linux/amd64".into(),
                names[0].clone(),
                sha(0),
                "kubectl-resize_guard".into()
            ),
            (
                "darwin/arm64".into(),
                names[2].clone(),
                sha(2),
                "kubectl-resize_guard".into()
            ),
            (
                "windows/amd64".into(),
                names[1].clone(),
                sha(1),
                "kubectl-resize_guard.exe".into()
            ),
        ]
    );
    // The same programs give the same bytes.
    let again = write(&package(&built), &out).unwrap();
    assert_eq!(again, written);
    assert_eq!(std::fs::read_to_string(out.join(MANIFEST)).unwrap(), text);
}

#[test]
fn a_narrower_build_removes_the_archives_it_did_not_build() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let all = programs(dir.path(), &Platform::PLUGINS);
    write(&package(&all), &out).unwrap();
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 11);
    let amd64 = programs(dir.path(), &[Platform::LINUX_AMD64]);
    write(&package(&amd64), &out).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            "kubectl-resize_guard-0.2.0-linux-amd64.tar.gz",
            "kubectl-resize_guard-0.2.0-linux-amd64.tar.gz.sha256",
            "resize-guard.yaml",
        ]
    );
    let text = std::fs::read_to_string(out.join(MANIFEST)).unwrap();
    assert_eq!(text.matches("- selector:").count(), 1, "{text}");
}

#[test]
fn a_program_for_another_platform_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut built = programs(dir.path(), &[Platform::DARWIN_AMD64]);
    // The Linux program where the macOS one belongs, the plugin or its helper.
    for name in [PROGRAM, HELPER] {
        let path = built[0].1.join(name);
        let right = std::fs::read(&path).unwrap();
        std::fs::write(&path, static_amd64()).unwrap();
        let err = write(&package(&built), &dir.path().join("out")).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("is a program for linux/amd64, not darwin/amd64"),
            "{err}"
        );
        assert!(err.to_string().contains(name), "{err}");
        std::fs::write(&path, right).unwrap();
    }
    std::fs::remove_file(built[0].1.join(HELPER)).unwrap();
    let err = write(&package(&built), &dir.path().join("out")).unwrap_err();
    assert!(err.to_string().contains(HELPER), "{err}");
    built[0].1 = dir.path().join("missing");
    assert_eq!(
        write(&package(&built), &dir.path().join("out"))
            .unwrap_err()
            .reason(),
        "IoFailed"
    );
}

#[test]
fn a_template_that_disagrees_with_the_build_is_refused() {
    let archive = |platform| krew::Listed {
        platform,
        archive: "kubectl-resize_guard-0.2.0-linux-amd64.tar.gz",
        program: "kubectl-resize_guard",
        sha256: "00",
    };
    let ok = krew::manifest(TEMPLATE, "0.2.0", &[archive(Platform::LINUX_AMD64)]);
    assert!(ok.is_ok(), "{ok:?}");
    let wrong_name = krew::Listed {
        archive: "other.tar.gz",
        ..archive(Platform::LINUX_AMD64)
    };
    let err = krew::manifest(TEMPLATE, "0.2.0", &[wrong_name]).unwrap_err();
    assert!(err.contains("does not end with /other.tar.gz"), "{err}");
    let wrong_bin = krew::Listed {
        program: "kubectl-resize_guard.exe",
        ..archive(Platform::LINUX_AMD64)
    };
    let err = krew::manifest(TEMPLATE, "0.2.0", &[wrong_bin]).unwrap_err();
    assert!(err.contains("bin"), "{err}");
    let linux_only = TEMPLATE
        .split("  - selector:")
        .take(2)
        .collect::<Vec<_>>()
        .join("  - selector:");
    let err =
        krew::manifest(&linux_only, "0.2.0", &[archive(Platform::WINDOWS_AMD64)]).unwrap_err();
    assert_eq!(
        err,
        "the template has no spec.platforms entry for windows/amd64"
    );
    let err = krew::manifest("kind: Other\n", "0.2.0", &[]).unwrap_err();
    assert!(err.contains("not a krew Plugin"), "{err}");
    let err = krew::manifest(": : :", "0.2.0", &[]).unwrap_err();
    assert!(err.contains("not YAML"), "{err}");
}
