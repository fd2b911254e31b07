//! Signing what `make push` pushed, as docs/src/signing.md tells an operator: `make push` to a real
//! registry on loopback (CNCF distribution, `third_party/registry/build.sh`), a cosign key pair,
//! `make sign` with it (cosign v3 built from its Go module by `third_party/cosign/build.sh`, found
//! through `RESIZE_GUARD_COSIGN_BIN`; never skipped), the SBOMs pushed after the signatures (so
//! the push adds to the referrers index cosign wrote), then `cosign verify` by each image index's
//! digest: it passes with the signing key, fails with another key, fails for a digest that was
//! never signed (one platform's manifest), and still passes after the images are pushed again;
//! `SIGNATURE_FORMAT=legacy` signs in cosign's older `.sig` tag format, verified as such. Each
//! image's SBOM is found from the digest by cosign's own `cosign tree` and read back as the file
//! `make image` wrote. No transparency log and no network: the signatures are key-only (`TLOG=0`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use super::text;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use super::push::{
    CYCLONEDX, attached_sbom, layout, make_push, referrers, repo_root, sbom_file, start_registry,
};

const PASSWORD: &str = "resize-guard-test-key";

fn cosign_bin() -> PathBuf {
    let hint = "build it with third_party/cosign/build.sh and run the tests with \
                RESIZE_GUARD_COSIGN_BIN=\"$(third_party/cosign/build.sh | tail -n 1)/cosign\" \
                (make e2e does)";
    let bin = std::env::var_os("RESIZE_GUARD_COSIGN_BIN")
        .unwrap_or_else(|| panic!("RESIZE_GUARD_COSIGN_BIN is not set: {hint}"));
    let bin = PathBuf::from(bin);
    assert!(bin.is_file(), "{} is not a file: {hint}", bin.display());
    bin
}

/// cosign with a home of its own (no docker config, no sigstore cache of the machine's).
fn cosign(home: &Path, args: &[&str]) -> Output {
    Command::new(cosign_bin())
        .args(args)
        .env("HOME", home)
        .env("COSIGN_PASSWORD", PASSWORD)
        .env_remove("DOCKER_CONFIG")
        .output()
        .unwrap()
}

/// The digest `make image` wrote for `binary`'s image index (what `make push` put under the tag).
fn index_digest(binary: &str) -> String {
    let index: Value =
        serde_json::from_slice(&std::fs::read(layout(binary).join("index.json")).unwrap()).unwrap();
    index["manifests"][0]["digest"].as_str().unwrap().to_owned()
}

/// `cosign verify` of `reference` with `public` (a key-only signature: no Rekor entry to check).
fn verify(home: &Path, public: &Path, reference: &str) -> Output {
    verify_with(home, public, reference, &[])
}

fn verify_with(home: &Path, public: &Path, reference: &str, extra: &[&str]) -> Output {
    let key = public.display().to_string();
    let mut args = vec![
        "verify",
        "--key",
        &key,
        "--insecure-ignore-tlog",
        "--allow-http-registry",
        "--output",
        "json",
    ];
    args.extend_from_slice(extra);
    args.push(reference);
    cosign(home, &args)
}

#[test]
fn what_make_push_pushed_is_signed_verified_and_its_sbom_found() {
    let registry = start_registry();
    let port = registry.port;
    let target = format!("127.0.0.1:{port}/signed");
    let home = tempfile::tempdir().unwrap();
    let keys = home.path();

    // The images first, without their SBOMs: those come after the signatures, so the push must add
    // to the referrers index cosign wrote, not replace it.
    let vars = [format!("REGISTRY={target}"), "PLAIN_HTTP=1".to_owned()];
    let out = make_push(&[vars[0].clone(), vars[1].clone(), "NO_SBOM=1".into()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains("SBOM"), "{}", text(&out));

    for prefix in ["release", "other"] {
        let out = cosign(
            keys,
            &[
                "generate-key-pair",
                "--output-key-prefix",
                &keys.join(prefix).display().to_string(),
            ],
        );
        assert!(out.status.success(), "{}", text(&out));
    }
    let (release, other) = (keys.join("release.pub"), keys.join("other.pub"));

    // The operator's recipe, then the SBOMs pushed beside the signatures.
    let out = make_sign(&target, &keys.join("release.key"), &[]);
    assert!(out.status.success(), "{}", text(&out));
    let pushed = make_push(&vars);
    assert!(pushed.status.success(), "{}", text(&pushed));
    assert_eq!(
        text(&pushed).matches("  SBOM ").count(),
        2,
        "{}",
        text(&pushed)
    );

    for binary in ["resize-guard-webhook", "resize-guard-controller"] {
        let digest = index_digest(binary);
        let signed = format!("{target}/{binary}@{digest}");
        assert!(
            text(&out).contains(&format!("make sign: {signed}")),
            "{}",
            text(&out)
        );

        let ok = verify(keys, &release, &signed);
        assert!(ok.status.success(), "{signed}: {}", text(&ok));
        let claims: Value = serde_json::from_slice(&ok.stdout).unwrap();
        assert_eq!(
            claims[0]["critical"]["image"]["docker-manifest-digest"], digest,
            "{claims}"
        );

        let bad = verify(keys, &other, &signed);
        assert!(
            !bad.status.success(),
            "another key verified {signed}: {}",
            text(&bad)
        );

        // One platform's manifest: a real image in the repository, never signed.
        let index: Value = serde_json::from_slice(
            &std::fs::read(
                layout(binary)
                    .join("blobs/sha256")
                    .join(digest.trim_start_matches("sha256:")),
            )
            .unwrap(),
        )
        .unwrap();
        let platform = index["manifests"][0]["digest"].as_str().unwrap();
        let unsigned = format!("{target}/{binary}@{platform}");
        let bad = verify(keys, &release, &unsigned);
        assert!(!bad.status.success(), "{unsigned} verified: {}", text(&bad));

        // The SBOM, found from the digest by cosign and read back as make image wrote it, listed
        // beside cosign's signature.
        let repo = format!("/v2/signed/{binary}");
        let listed = referrers(port, &repo, &digest);
        let types: Vec<&str> = listed
            .iter()
            .map(|r| r["artifactType"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            types,
            ["application/vnd.dev.sigstore.bundle.v0.3+json", CYCLONEDX],
            "{listed:?}"
        );
        let sbom = listed
            .iter()
            .find(|r| r["artifactType"] == CYCLONEDX)
            .unwrap();
        let tree = cosign(keys, &["tree", "--allow-http-registry", &signed]);
        assert!(tree.status.success(), "{}", text(&tree));
        assert!(
            text(&tree).contains(sbom["digest"].as_str().unwrap())
                && text(&tree).contains(CYCLONEDX),
            "cosign tree {signed}: {}",
            text(&tree)
        );
        assert_eq!(
            attached_sbom(port, &repo, &digest),
            std::fs::read(sbom_file(binary)).unwrap()
        );
    }

    // Pushed again: the images and their SBOMs are there already; the signatures stay.
    let out = make_push(&vars);
    assert!(out.status.success(), "{}", text(&out));
    for binary in ["resize-guard-webhook", "resize-guard-controller"] {
        let signed = format!("{target}/{binary}@{}", index_digest(binary));
        let ok = verify(keys, &release, &signed);
        assert!(
            ok.status.success(),
            "after a second push, {signed}: {}",
            text(&ok)
        );
    }

    // cosign's older format (the `sha256-<hex>.sig` tag), for verifiers that read only that.
    let out = make_sign(
        &target,
        &keys.join("other.key"),
        &["SIGNATURE_FORMAT=legacy"],
    );
    assert!(out.status.success(), "{}", text(&out));
    for binary in ["resize-guard-webhook", "resize-guard-controller"] {
        let signed = format!("{target}/{binary}@{}", index_digest(binary));
        let ok = verify_with(keys, &other, &signed, &["--new-bundle-format=false"]);
        assert!(ok.status.success(), "legacy {signed}: {}", text(&ok));
        let bundle = verify(keys, &other, &signed);
        assert!(
            !bundle.status.success(),
            "{signed} has no bundle signed with the other key: {}",
            text(&bundle)
        );
    }

    let usage = make_sign(&target, Path::new(""), &[]);
    assert_eq!(usage.status.code(), Some(2), "{}", text(&usage));
    assert!(
        text(&usage).contains("usage: make sign REGISTRY="),
        "{}",
        text(&usage)
    );
    drop(registry);
}

/// `make sign` as an operator runs it, with the key's password in the environment.
fn make_sign(target: &str, key: &Path, vars: &[&str]) -> Output {
    let home = key.parent().unwrap_or(Path::new("/"));
    Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(repo_root())
        .arg("sign")
        .arg(format!("REGISTRY={target}"))
        .arg(format!("KEY={}", key.display()))
        .arg("TLOG=0")
        .arg("PLAIN_HTTP=1")
        .arg(format!("COSIGN={}", cosign_bin().display()))
        .args(vars)
        .env("HOME", home)
        .env("COSIGN_PASSWORD", PASSWORD)
        .output()
        .unwrap()
}
