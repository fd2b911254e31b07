//! [`image_sbom`] on miniature programs carrying hand-written dependency trees (the encoding
//! `cargo auditable` uses: zlib-compressed JSON in a `.dep-v0` section), and the refusal of a
//! program without one. The SBOMs of the real images are checked against the programs' own
//! trees and Cargo.lock in `tests/e2e/images/sbom.rs`.

use std::io::Write as _;

use serde_json::{Value, json};

use super::*;
use crate::blob::Blob;
use crate::executable::tests::elf_with_section;
use crate::index::Reference;

/// A program for `machine` whose embedded tree is `tree`.
pub(crate) fn audited_program(machine: u16, tree: &Value) -> Vec<u8> {
    let mut encoder = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    encoder
        .write_all(serde_json::to_string(tree).unwrap().as_bytes())
        .unwrap();
    elf_with_section(machine, ".dep-v0", &encoder.finish().unwrap())
}

/// A webhook's tree: itself, the policy crate (local), tokio and its proc macro, libc; `extra`
/// adds a crate tokio depends on.
pub(crate) fn tree(extra: Option<&str>) -> Value {
    let mut packages = vec![
        json!({"name": "resize-guard-webhook", "version": "0.2.0", "source": "local",
               "dependencies": [1, 2], "root": true}),
        json!({"name": "resize-guard-policy", "version": "0.2.0", "source": "local"}),
        json!({"name": "tokio", "version": "1.48.0", "source": "crates.io",
               "dependencies": [3, 4]}),
        json!({"name": "tokio-macros", "version": "2.6.0", "source": "crates.io",
               "kind": "build"}),
        json!({"name": "libc", "version": "0.2.177", "source": "crates.io"}),
    ];
    if let Some(name) = extra {
        packages[2]["dependencies"] = json!([3, 4, 5]);
        packages.push(json!({"name": name, "version": "1.0.0", "source": "crates.io"}));
    }
    json!({"packages": packages, "format": 1})
}

fn image() -> Image {
    Image {
        reference: Reference {
            repository: "registry.invalid/resize-guard/resize-guard-webhook".into(),
            tag: "0.2.0-gabc1234".into(),
        },
        platforms: Vec::new(),
        index: Blob::new(b"index".to_vec()),
        layout_index: Vec::new(),
    }
}

fn sbom_json(programs: &[(Platform, Vec<u8>)]) -> Value {
    let source = Path::new("target/x/resize-guard-webhook");
    let programs: Vec<Program<'_>> = programs
        .iter()
        .map(|(platform, bytes)| Program {
            platform: *platform,
            path: "/usr/local/bin/resize-guard-webhook",
            source,
            bytes,
        })
        .collect();
    let bom = image_sbom(&image(), "resize-guard-webhook", &programs, 1_700_000_000).unwrap();
    serde_json::to_value(bom).unwrap()
}

/// The string `field` of each element of the JSON array `list`.
pub(crate) fn each<'a>(list: &'a Value, field: &str) -> Vec<&'a str> {
    let elements = list.as_array().unwrap().iter();
    elements.map(|e| e[field].as_str().unwrap()).collect()
}

fn component<'a>(bom: &'a Value, bom_ref: &str) -> &'a Value {
    bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["bom-ref"] == bom_ref)
        .unwrap_or_else(|| panic!("no component {bom_ref}: {bom:#}"))
}

/// The `dependsOn` list of `bom_ref`'s dependency entry.
pub(crate) fn depends_on(bom: &Value, bom_ref: &str) -> Value {
    bom["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["ref"] == bom_ref)
        .unwrap_or_else(|| panic!("no dependency entry for {bom_ref}"))["dependsOn"]
        .clone()
}

#[test]
fn one_application_per_platform_and_every_crate_once() {
    let bom = sbom_json(&[
        (Platform::LINUX_AMD64, audited_program(0x3E, &tree(None))),
        (Platform::LINUX_ARM64, audited_program(0xB7, &tree(None))),
    ]);
    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["specVersion"], "1.5");
    assert!(
        bom.get("serialNumber").is_none(),
        "a random serial breaks reproducibility"
    );
    assert_eq!(bom["metadata"]["timestamp"], "2023-11-14T22:13:20Z");
    let image = &bom["metadata"]["component"];
    assert_eq!(image["type"], "container");
    assert_eq!(image["version"], "0.2.0-gabc1234");
    let digest = Blob::new(b"index".to_vec()).digest.replace(':', "%3A");
    assert_eq!(
        image["purl"],
        format!("pkg:oci/resize-guard-webhook@{digest}?tag=0.2.0-gabc1234")
    );

    let refs = each(&bom["components"], "bom-ref");
    assert_eq!(
        refs,
        [
            "linux/amd64:/usr/local/bin/resize-guard-webhook",
            "linux/arm64:/usr/local/bin/resize-guard-webhook",
            "local:resize-guard-policy@0.2.0",
            "pkg:cargo/libc@0.2.177",
            "pkg:cargo/tokio-macros@2.6.0",
            "pkg:cargo/tokio@1.48.0",
        ]
    );
    let program = component(&bom, "linux/arm64:/usr/local/bin/resize-guard-webhook");
    assert_eq!(program["type"], "application");
    assert_eq!(program["name"], "resize-guard-webhook");
    assert_eq!(program["version"], "0.2.0");
    assert_eq!(program["hashes"][0]["alg"], "SHA-256");
    assert_eq!(
        program["properties"],
        json!([
            {"name": PATH_PROPERTY, "value": "/usr/local/bin/resize-guard-webhook"},
            {"name": PLATFORM_PROPERTY, "value": "linux/arm64"},
        ])
    );
    let tokio = component(&bom, "pkg:cargo/tokio@1.48.0");
    assert_eq!(tokio["purl"], "pkg:cargo/tokio@1.48.0");
    assert!(tokio.get("scope").is_none() && tokio.get("properties").is_none());
    // A workspace crate has no purl: crates.io does not have it.
    assert!(
        component(&bom, "local:resize-guard-policy@0.2.0")
            .get("purl")
            .is_none()
    );
    // A proc macro is not in the program.
    let macros = component(&bom, "pkg:cargo/tokio-macros@2.6.0");
    assert_eq!(macros["scope"], "excluded");
    assert_eq!(
        macros["properties"],
        json!([{"name": DEPENDENCY_KIND_PROPERTY, "value": "build"}])
    );

    assert_eq!(
        depends_on(&bom, "image:resize-guard-webhook"),
        json!([
            "linux/amd64:/usr/local/bin/resize-guard-webhook",
            "linux/arm64:/usr/local/bin/resize-guard-webhook"
        ])
    );
    assert_eq!(
        depends_on(&bom, "linux/amd64:/usr/local/bin/resize-guard-webhook"),
        json!(["local:resize-guard-policy@0.2.0", "pkg:cargo/tokio@1.48.0"])
    );
    assert_eq!(
        depends_on(&bom, "pkg:cargo/tokio@1.48.0"),
        json!(["pkg:cargo/libc@0.2.177", "pkg:cargo/tokio-macros@2.6.0"])
    );
    assert_eq!(depends_on(&bom, "pkg:cargo/libc@0.2.177"), json!([]));
    // Every component has an entry, every dependsOn names a component.
    let entries = bom["dependencies"].as_array().unwrap();
    assert_eq!(entries.len(), refs.len() + 1);
    for entry in entries {
        for target in entry["dependsOn"].as_array().unwrap() {
            let target = target.as_str().unwrap();
            assert!(refs.contains(&target), "{target} is not a component");
        }
    }
}

#[test]
fn a_crate_on_some_platforms_only_names_them() {
    let bom = sbom_json(&[
        (Platform::LINUX_AMD64, audited_program(0x3E, &tree(None))),
        (
            Platform::LINUX_ARM64,
            audited_program(0xB7, &tree(Some("arm-only"))),
        ),
    ]);
    assert_eq!(
        component(&bom, "pkg:cargo/arm-only@1.0.0")["properties"],
        json!([{"name": PLATFORMS_PROPERTY, "value": "linux/arm64"}])
    );
    assert!(
        component(&bom, "pkg:cargo/libc@0.2.177")
            .get("properties")
            .is_none()
    );
}

#[test]
fn the_same_programs_give_the_same_document() {
    let programs = [(Platform::LINUX_AMD64, audited_program(0x3E, &tree(None)))];
    assert_eq!(sbom_json(&programs), sbom_json(&programs));
}

#[test]
fn a_program_without_a_dependency_tree_is_refused_with_the_fix() {
    let bytes = crate::executable::tests::static_amd64();
    let programs = [Program {
        platform: Platform::LINUX_AMD64,
        path: "/usr/local/bin/resize-guard-webhook",
        source: Path::new("target/x/resize-guard-webhook"),
        bytes: &bytes,
    }];
    let err = image_sbom(&image(), "resize-guard-webhook", &programs, 0).unwrap_err();
    assert_eq!(err.reason(), "NoAuditData");
    let message = err.to_string();
    assert!(
        message.contains("target/x/resize-guard-webhook"),
        "{message}"
    );
    assert!(message.contains("cargo auditable"), "{message}");

    let garbled = elf_with_section(0x3E, ".dep-v0", b"not zlib");
    let programs = [Program {
        bytes: &garbled,
        ..programs[0]
    }];
    let err = image_sbom(&image(), "resize-guard-webhook", &programs, 0).unwrap_err();
    assert!(err.to_string().contains("unreadable"), "{err}");
}
