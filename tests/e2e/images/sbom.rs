//! Each image's SBOM, `target/image/<image>-<version>.cdx.json`, checked against the programs in
//! that image's archive: one CycloneDX application per platform and program (its SHA-256 that
//! of the bytes in the layer), and every crate of the dependency tree the program itself carries
//! (its `.dep-v0` section, read here with flate2 and serde_json, not with the code under test)
//! listed with that version, a build-only crate as `excluded`, the graph as the tree says. The
//! crates that matter are pinned against Cargo.lock: kube, rustls, tokio, k8s-openapi and ring
//! in the webhook and controller, rcgen, ring and x509-parser in resize-guard-certs, at the
//! versions the lock file resolves. (`cargo auditable` on stable Cargo records what `cargo
//! metadata` resolves, which may include a crate more than the linker kept: never fewer.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use super::{archive, elf, repo_root};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `name -> versions` of every package in Cargo.lock.
fn lock_versions() -> BTreeMap<String, BTreeSet<String>> {
    let lock = std::fs::read_to_string(repo_root().join("Cargo.lock")).unwrap();
    let mut versions: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for package in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            package
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{key} = \"")))
                .map(|v| v.trim_end_matches('"').to_owned())
        };
        versions
            .entry(field("name").unwrap())
            .or_default()
            .insert(field("version").unwrap());
    }
    versions
}

fn crate_ref(package: &Value) -> String {
    let (name, version) = (
        package["name"].as_str().unwrap(),
        package["version"].as_str().unwrap(),
    );
    match package["source"].as_str().unwrap() {
        "crates.io" => format!("pkg:cargo/{name}@{version}"),
        other => format!("{other}:{name}@{version}"),
    }
}

fn check_sbom(image: &str) {
    let path = super::image_dir().join(format!("{image}-{VERSION}.cdx.json"));
    let bom: Value = serde_json::from_slice(
        &std::fs::read(&path)
            .unwrap_or_else(|e| panic!("{}: {e}: run `make image` first", path.display())),
    )
    .unwrap();
    assert_eq!(bom["bomFormat"], "CycloneDX");
    assert_eq!(bom["specVersion"], "1.5");
    let container = &bom["metadata"]["component"];
    assert_eq!(container["type"], "container");
    assert_eq!(container["name"], image);
    let tag = archive::built_tag();
    assert_eq!(container["version"], tag.as_str());
    let digest = archive::index_digest(image).replace(':', "%3A");
    assert_eq!(
        container["purl"],
        format!("pkg:oci/{image}@{digest}?tag={tag}")
    );

    let components: BTreeMap<&str, &Value> = bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["bom-ref"].as_str().unwrap(), c))
        .collect();
    let graph: BTreeMap<&str, Vec<&str>> = bom["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let on = d["dependsOn"].as_array().unwrap();
            (
                d["ref"].as_str().unwrap(),
                on.iter().map(|r| r.as_str().unwrap()).collect(),
            )
        })
        .collect();
    assert_eq!(
        graph.len(),
        components.len() + 1,
        "one entry per component and the image"
    );
    for target in graph.values().flatten() {
        assert!(
            components.contains_key(target),
            "dependsOn {target} names no component"
        );
    }

    let programs = archive::image_programs(image);
    assert!(!programs.is_empty());
    let mut program_refs = Vec::new();
    let lock = lock_versions();
    for (arch, path, bytes) in &programs {
        let what = format!("{image} linux/{arch} {path}");
        let bom_ref = format!("linux/{arch}:{path}");
        let program = components
            .get(bom_ref.as_str())
            .unwrap_or_else(|| panic!("{what}: no component {bom_ref}"));
        assert_eq!(program["type"], "application");
        let sha: String = Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(program["hashes"][0]["content"], sha.as_str(), "{what}");
        program_refs.push(bom_ref.clone());

        let tree = elf::elf_audit_tree(bytes, &what);
        let packages = tree["packages"].as_array().unwrap();
        let refs: Vec<String> = packages.iter().map(crate_ref).collect();
        let mut names = BTreeMap::new();
        for (package, reference) in packages.iter().zip(&refs) {
            let deps: BTreeSet<&str> = package["dependencies"]
                .as_array()
                .map(|d| {
                    d.iter()
                        .map(|i| refs[i.as_u64().unwrap() as usize].as_str())
                        .collect()
                })
                .unwrap_or_default();
            if package["root"] == true {
                assert_eq!(program["version"], package["version"], "{what}");
                let listed: BTreeSet<&str> = graph[bom_ref.as_str()].iter().copied().collect();
                assert_eq!(listed, deps, "{what}: the program's direct crates");
                continue;
            }
            let component = components
                .get(reference.as_str())
                .unwrap_or_else(|| panic!("{what}: crate {reference} is not in the SBOM"));
            assert_eq!(component["version"], package["version"], "{reference}");
            let listed: BTreeSet<&str> = graph[reference.as_str()].iter().copied().collect();
            assert!(
                listed.is_superset(&deps),
                "{reference}: {listed:?} lacks some of {deps:?}"
            );
            if package["kind"] == "build" {
                continue;
            }
            assert!(
                component.get("scope").is_none(),
                "{reference} runs in {what}"
            );
            let name = package["name"].as_str().unwrap();
            let version = package["version"].as_str().unwrap().to_owned();
            assert!(
                lock.get(name).is_some_and(|v| v.contains(&version)),
                "{what}: {name} {version} is not in Cargo.lock"
            );
            names.insert(name.to_owned(), version);
        }
        // What each program is made of: the API client and its stack, or (resize-guard-certs)
        // the certificate crates.
        let pinned: &[&str] = if path.ends_with("/resize-guard-certs") {
            &["rcgen", "ring", "x509-parser"]
        } else {
            &["kube", "rustls", "tokio", "k8s-openapi", "ring"]
        };
        for &name in pinned {
            let embedded = names
                .get(name)
                .unwrap_or_else(|| panic!("{what} contains no {name}: {names:?}"));
            assert_eq!(
                lock[name].iter().collect::<Vec<_>>(),
                [embedded],
                "{what}: {name} is not the version Cargo.lock resolves"
            );
            assert!(components.contains_key(format!("pkg:cargo/{name}@{embedded}").as_str()));
        }
    }
    program_refs.sort();
    assert_eq!(graph[format!("image:{image}").as_str()], program_refs);
}

#[test]
fn the_webhook_sbom_lists_the_crates_its_programs_really_contain() {
    check_sbom("resize-guard-webhook");
}

#[test]
fn the_controller_sbom_lists_the_crates_of_the_controller_and_certs() {
    check_sbom("resize-guard-controller");
}
