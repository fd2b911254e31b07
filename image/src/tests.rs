//! End-to-end tests of [`build`] on a stand-in binary: determinism and what changes the digest.

use std::os::unix::fs::PermissionsExt as _;

use super::*;

const PROJECT: &str = include_str!("../../deploy/image/Containerfile");

fn fake_binary(dir: &Path, name: &str, content: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    path
}

fn build_with(binary: &Path, revision: &str, epoch: u64) -> Image {
    build(&Build {
        containerfile: PROJECT,
        binary,
        version: "0.1.0",
        revision,
        registry: "ghcr.io/resize-guard",
        epoch,
    })
    .unwrap()
}

#[test]
fn same_input_gives_the_same_manifest_digest() {
    let dir = tempfile::tempdir().unwrap();
    let binary = fake_binary(dir.path(), "resize-guard-webhook", b"\x7fELF fake");
    let first = build_with(&binary, "abc", 0);
    // Other mode bits on the same executable file change nothing.
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    let second = build_with(&binary, "abc", 0);
    assert_eq!(first.manifest, second.manifest);
    assert_eq!(first.index, second.index);
    let archive = |image: &Image| {
        let path = dir.path().join("out.oci.tar");
        layout::write_archive(image, &path, 0).unwrap();
        std::fs::read(path).unwrap()
    };
    assert_eq!(archive(&first), archive(&second));
}

#[test]
fn revision_epoch_and_content_each_change_the_digest() {
    let dir = tempfile::tempdir().unwrap();
    let binary = fake_binary(dir.path(), "resize-guard-controller", b"one");
    let base = build_with(&binary, "abc", 0).manifest.digest;
    assert_ne!(build_with(&binary, "def", 0).manifest.digest, base);
    assert_ne!(build_with(&binary, "abc", 1).manifest.digest, base);
    fake_binary(dir.path(), "resize-guard-controller", b"two");
    assert_ne!(build_with(&binary, "abc", 0).manifest.digest, base);
}

#[test]
fn names_the_image_after_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    let binary = fake_binary(dir.path(), "resize-guard-controller", b"x");
    let image = build_with(&binary, "abc", 0);
    assert_eq!(
        image.reference.to_string(),
        "ghcr.io/resize-guard/resize-guard-controller:0.1.0"
    );
    let index: serde_json::Value = serde_json::from_slice(&image.index).unwrap();
    let annotations = &index["manifests"][0]["annotations"];
    assert_eq!(annotations["org.opencontainers.image.ref.name"], "0.1.0");
    assert_eq!(
        annotations["io.containerd.image.name"],
        "ghcr.io/resize-guard/resize-guard-controller:0.1.0"
    );
    assert_eq!(
        archive_name("resize-guard-controller", "0.1.0"),
        "resize-guard-controller-0.1.0.oci.tar"
    );
}

#[test]
fn rejects_a_binary_with_no_stage_of_its_name() {
    let dir = tempfile::tempdir().unwrap();
    let binary = fake_binary(dir.path(), "other-tool", b"x");
    let err = build(&Build {
        containerfile: PROJECT,
        binary: &binary,
        version: "0.1.0",
        revision: "abc",
        registry: "ghcr.io/resize-guard",
        epoch: 0,
    })
    .unwrap_err();
    assert!(err.to_string().contains("FROM other-tool"), "{err}");
}

#[test]
fn writes_the_layout_directory_with_every_blob() {
    let dir = tempfile::tempdir().unwrap();
    let binary = fake_binary(dir.path(), "resize-guard-webhook", b"x");
    let image = build_with(&binary, "abc", 0);
    let layout_dir = dir.path().join("out").join("image.oci");
    layout::write_layout(&image, &layout_dir).unwrap();
    // Written twice: the second replaces the first.
    layout::write_layout(&image, &layout_dir).unwrap();
    assert_eq!(
        std::fs::read(layout_dir.join("index.json")).unwrap(),
        image.index
    );
    let mut names: Vec<_> = std::fs::read_dir(layout_dir.join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut expected: Vec<_> = image.blobs().map(|b| b.hex().to_string()).collect();
    expected.sort();
    assert_eq!(names, expected);
    assert!(layout_dir.join("oci-layout").is_file());
}
