//! End-to-end tests of [`build`] on stand-in binaries: determinism, what changes the digest, and
//! one manifest per platform from each platform's own binaries.

use std::os::unix::fs::PermissionsExt as _;

use super::*;

const PROJECT: &str = include_str!("../../deploy/image/Containerfile");

/// One tar entry as the tests compare it: path, mode, uid, gid, mtime, size.
pub(crate) type TarEntry = (String, u32, u64, u64, u64, u64);

/// The entries of the uncompressed tar stream `tar`, in order.
pub(crate) fn tar_entries(tar: impl std::io::Read) -> Vec<TarEntry> {
    tar::Archive::new(tar)
        .entries()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let h = e.header();
            (
                e.path().unwrap().display().to_string(),
                h.mode().unwrap(),
                h.uid().unwrap(),
                h.gid().unwrap(),
                h.mtime().unwrap(),
                h.size().unwrap(),
            )
        })
        .collect()
}

/// A stand-in static x86-64 program: an ELF header, then `content`.
fn fake_binary(dir: &Path, name: &str, content: &[u8]) -> std::path::PathBuf {
    let mut program = crate::executable::tests::static_amd64();
    program.extend(content);
    write_program(dir, name, &program)
}

fn write_program(dir: &Path, name: &str, content: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    path
}

/// The project Containerfile's build of `binary` from `contexts`: version 0.1.0, revision abc,
/// epoch 0.
fn project<'a>(binary: &'a str, contexts: &'a [(Platform, &'a Path)]) -> Build<'a> {
    Build {
        containerfile: PROJECT,
        binary,
        contexts,
        version: "0.1.0",
        tag: "0.1.0",
        revision: "abc",
        registry: "registry.invalid/resize-guard",
        epoch: 0,
    }
}

/// The image of `binary`'s stage from its directory, as linux/amd64 only.
fn build_with(binary: &Path, revision: &str, epoch: u64) -> Image {
    let name = binary.file_name().unwrap().to_str().unwrap();
    build(&Build {
        revision,
        epoch,
        ..project(name, &[(Platform::LINUX_AMD64, binary.parent().unwrap())])
    })
    .unwrap()
}

#[test]
fn same_input_gives_the_same_manifest_digest() {
    let dir = tempfile::tempdir().unwrap();
    let binary = fake_binary(dir.path(), "resize-guard-webhook", b"fake");
    let first = build_with(&binary, "abc", 0);
    // Other mode bits on the same executable file change nothing.
    std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    let second = build_with(&binary, "abc", 0);
    assert_eq!(first.index, second.index);
    assert_eq!(first.layout_index, second.layout_index);
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
    fake_binary(dir.path(), "resize-guard-certs", b"certs");
    let binary = fake_binary(dir.path(), "resize-guard-controller", b"one");
    let base = build_with(&binary, "abc", 0).index.digest;
    assert_ne!(build_with(&binary, "def", 0).index.digest, base);
    assert_ne!(build_with(&binary, "abc", 1).index.digest, base);
    fake_binary(dir.path(), "resize-guard-controller", b"two");
    assert_ne!(build_with(&binary, "abc", 0).index.digest, base);
}

#[test]
fn names_the_image_after_the_binary() {
    let dir = tempfile::tempdir().unwrap();
    fake_binary(dir.path(), "resize-guard-certs", b"certs");
    let binary = fake_binary(dir.path(), "resize-guard-controller", b"x");
    let image = build_with(&binary, "abc", 0);
    assert_eq!(
        image.reference.to_string(),
        "registry.invalid/resize-guard/resize-guard-controller:0.1.0"
    );
    let index: serde_json::Value = serde_json::from_slice(&image.layout_index).unwrap();
    assert_eq!(index["manifests"][0]["digest"], image.index.digest.as_str());
    assert_eq!(
        index["manifests"][0]["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let annotations = &index["manifests"][0]["annotations"];
    assert_eq!(annotations["org.opencontainers.image.ref.name"], "0.1.0");
    assert_eq!(
        annotations["io.containerd.image.name"],
        "registry.invalid/resize-guard/resize-guard-controller:0.1.0"
    );
    assert_eq!(
        archive_name("resize-guard-controller", "0.1.0"),
        "resize-guard-controller-0.1.0.oci.tar"
    );
}

#[test]
fn rejects_a_binary_with_no_stage_of_its_name() {
    let dir = tempfile::tempdir().unwrap();
    fake_binary(dir.path(), "other-tool", b"x");
    let err = build(&project(
        "other-tool",
        &[(Platform::LINUX_AMD64, dir.path())],
    ))
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
        image.layout_index
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

/// Stand-ins for both platforms' binaries (the controller image also holds resize-guard-certs).
fn two_platforms(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (amd64, arm64) = (dir.join("amd64"), dir.join("arm64"));
    for (context, machine) in [(&amd64, 0x3E), (&arm64, 0xB7)] {
        std::fs::create_dir_all(context).unwrap();
        let tree = crate::sbom::tests::tree(None);
        let program = crate::sbom::tests::audited_program(machine, &tree);
        write_program(context, "resize-guard-controller", &program);
        write_program(context, "resize-guard-certs", &program);
    }
    (amd64, arm64)
}

/// Both Linux platforms, each built from its own directory.
fn linux<'a>(amd64: &'a Path, arm64: &'a Path) -> [(Platform, &'a Path); 2] {
    [
        (Platform::LINUX_AMD64, amd64),
        (Platform::LINUX_ARM64, arm64),
    ]
}

#[test]
fn indexes_one_manifest_per_platform_built_from_that_platforms_binaries() {
    let dir = tempfile::tempdir().unwrap();
    let (amd64, arm64) = two_platforms(dir.path());
    let contexts = linux(&amd64, &arm64);
    let image = build(&project("resize-guard-controller", &contexts)).unwrap();
    let index: serde_json::Value = serde_json::from_slice(&image.index.bytes).unwrap();
    assert_eq!(
        index["mediaType"],
        "application/vnd.oci.image.index.v1+json"
    );
    let manifests = index["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 2);
    for (entry, (image, arch)) in manifests
        .iter()
        .zip(image.platforms.iter().zip(["amd64", "arm64"]))
    {
        assert_eq!(entry["digest"], image.manifest.digest.as_str());
        assert_eq!(entry["platform"]["architecture"], arch);
        assert_eq!(entry["platform"]["os"], "linux");
        let config: serde_json::Value = serde_json::from_slice(&image.config.bytes).unwrap();
        assert_eq!(config["architecture"], arch);
        // The controller and resize-guard-certs: one layer each.
        assert_eq!(image.layers.len(), 2);
    }
    assert_ne!(
        image.platforms[0].layers[0].digest,
        image.platforms[1].layers[0].digest
    );
}

#[test]
fn refuses_a_platform_given_twice_and_an_unknown_one() {
    let dir = tempfile::tempdir().unwrap();
    let (amd64, _) = two_platforms(dir.path());
    let twice = [(Platform::LINUX_AMD64, amd64.as_path()); 2];
    let err = build(&project("resize-guard-controller", &twice)).unwrap_err();
    assert!(
        err.to_string().contains("platform linux/amd64 given twice"),
        "{err}"
    );
    assert_eq!(Platform::parse("linux/arm64"), Some(Platform::LINUX_ARM64));
    assert_eq!(Platform::parse("darwin/arm64"), None);
}

#[test]
fn a_command_lines_platform_and_directory_are_parsed_among_the_known_ones() {
    let parse = Platform::parse_with_dir;
    assert_eq!(
        parse("linux/arm64=out/release", &Platform::IMAGES),
        Ok((Platform::LINUX_ARM64, "out/release".into()))
    );
    assert_eq!(
        parse("darwin/arm64=d", &Platform::PLUGINS),
        Ok((Platform::DARWIN_ARM64, "d".into()))
    );
    assert_eq!(
        parse("darwin/arm64=d", &Platform::IMAGES),
        Err("\"darwin/arm64\": unknown platform (known: linux/amd64, linux/arm64)".into())
    );
    assert_eq!(
        parse("linux/amd64", &Platform::PLUGINS),
        Err("\"linux/amd64\": expected os/arch=DIR, e.g. windows/amd64=target/…/release".into())
    );
    assert_eq!(
        parse("linux/amd64=", &Platform::IMAGES),
        Err("\"linux/amd64=\": the directory is empty".into())
    );
}

#[test]
fn a_build_tag_names_the_image_while_the_version_labels_it() {
    let dir = tempfile::tempdir().unwrap();
    fake_binary(dir.path(), "resize-guard-certs", b"certs");
    let binary = fake_binary(dir.path(), "resize-guard-controller", b"x");
    let contexts = [(Platform::LINUX_AMD64, binary.parent().unwrap())];
    let image = build(&Build {
        tag: "0.1.0-g1a2b3c4",
        ..project("resize-guard-controller", &contexts)
    })
    .unwrap();
    assert_eq!(
        image.reference.to_string(),
        "registry.invalid/resize-guard/resize-guard-controller:0.1.0-g1a2b3c4"
    );
    let config: serde_json::Value =
        serde_json::from_slice(&image.platforms[0].config.bytes).unwrap();
    let labels = &config["config"]["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"], "0.1.0",
        "{labels}"
    );
}

#[test]
fn refuses_a_program_for_another_cpu_or_a_dynamic_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_, arm64) = two_platforms(dir.path());
    let wrong = [(Platform::LINUX_AMD64, arm64.as_path())];
    let err = build(&project("resize-guard-controller", &wrong)).unwrap_err();
    assert_eq!(err.reason(), "WrongProgram");
    assert!(
        err.to_string()
            .ends_with("resize-guard-controller is a program for linux/arm64, not linux/amd64"),
        "{err}"
    );
    let dynamic = crate::executable::tests::elf(0x3E, Some(3));
    write_program(dir.path(), "resize-guard-webhook", &dynamic);
    let context = [(Platform::LINUX_AMD64, dir.path())];
    let err = build(&project("resize-guard-webhook", &context)).unwrap_err();
    assert!(err.to_string().contains("dynamically linked"), "{err}");
}

#[test]
fn the_sbom_lists_every_program_of_every_platform() {
    let dir = tempfile::tempdir().unwrap();
    let (amd64, arm64) = two_platforms(dir.path());
    let contexts = linux(&amd64, &arm64);
    let spec = project("resize-guard-controller", &contexts);
    let image = build(&spec).unwrap();
    let bom = serde_json::to_value(sbom(&spec, &image).unwrap()).unwrap();
    let programs = crate::sbom::tests::depends_on(&bom, "image:resize-guard-controller");
    assert_eq!(
        programs,
        serde_json::json!([
            "linux/amd64:/usr/local/bin/resize-guard-certs",
            "linux/amd64:/usr/local/bin/resize-guard-controller",
            "linux/arm64:/usr/local/bin/resize-guard-certs",
            "linux/arm64:/usr/local/bin/resize-guard-controller",
        ])
    );
    assert_eq!(
        sbom_name("resize-guard-controller", "0.1.0"),
        "resize-guard-controller-0.1.0.cdx.json"
    );
}
