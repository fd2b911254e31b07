//! `make push` against a real registry: CNCF distribution built from its Go module
//! (`third_party/registry/build.sh`, found through `RESIZE_GUARD_REGISTRY_BIN`; never skipped) on
//! loopback. Both images `make image` wrote are pushed by the target an operator runs, then read
//! back with a plain HTTP client written here (not the code under test): the tag names the image
//! index of the archive (same digest), the index lists the platforms it was built for, each
//! platform's manifest is served by its digest, every blob hashes to its digest and is the
//! archive's own, and each config has the entrypoint, non-root user and OCI labels of
//! `deploy/image/Containerfile`; each image's SBOM is found from the index digest alone (the
//! referrers API, or the referrers tag this registry version needs) and is the file `make image`
//! wrote. A second push uploads nothing and lists each SBOM once; an unreachable registry, a
//! missing layout and a missing SBOM fail with the URL or the path named.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const VERSION: &str = env!("CARGO_PKG_VERSION");
const BINARIES: [&str; 2] = ["resize-guard-webhook", "resize-guard-controller"];

pub use super::repo_root;

pub fn layout(binary: &str) -> PathBuf {
    let dir = super::image_dir().join(format!("{binary}-{VERSION}.oci"));
    assert!(
        dir.join("index.json").is_file(),
        "{} is missing: run `make image` first (make test does)",
        dir.display()
    );
    dir
}

/// The registry process, stopped on drop.
pub struct Registry {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn start_registry() -> Registry {
    start_registry_with(|_| String::new(), None)
}

/// A registry with what `config` returns (given the registry's own directory, where it may
/// write files) appended to its configuration, e.g. an `auth:` section; ready when `GET /v2/`
/// answers `ready` (200 without auth, 401 with).
pub fn start_registry_with(
    config: impl FnOnce(&std::path::Path) -> String,
    ready: Option<u16>,
) -> Registry {
    let hint = "build it with third_party/registry/build.sh and run the tests with \
                RESIZE_GUARD_REGISTRY_BIN=\"$(third_party/registry/build.sh | tail -n 1)/registry\" \
                (make e2e does)";
    let bin = std::env::var_os("RESIZE_GUARD_REGISTRY_BIN")
        .unwrap_or_else(|| panic!("RESIZE_GUARD_REGISTRY_BIN is not set: {hint}"));
    assert!(
        PathBuf::from(&bin).is_file(),
        "{bin:?} is not a file: {hint}"
    );
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let extra = config(dir.path());
    let config = dir.path().join("config.yml");
    std::fs::write(
        &config,
        format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: 127.0.0.1:{port}\n{extra}",
            dir.path().join("data").display()
        ),
    )
    .unwrap();
    let child = Command::new(&bin)
        .arg("serve")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("registry.log")).unwrap())
        .spawn()
        .unwrap();
    let registry = Registry {
        child,
        port,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok((status, _, _)) = get(port, "/v2/", "*/*")
            && status == ready.unwrap_or(200)
        {
            return registry;
        }
        assert!(Instant::now() < deadline, "the registry did not serve /v2/");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An HTTP answer: status, lower-cased headers, body.
pub type Answer = (u16, Vec<(String, String)>, Vec<u8>);

/// A GET over HTTP/1.1.
pub fn get(port: u16, path: &str, accept: &str) -> std::io::Result<Answer> {
    get_with(port, path, accept, None)
}

/// A GET over HTTP/1.1 with an `Authorization` header when given.
pub fn get_with(
    port: u16,
    path: &str,
    accept: &str,
    authorization: Option<&str>,
) -> std::io::Result<Answer> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let auth = authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: {accept}\r\n{auth}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no header end"))?;
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Ok((status, headers, body))
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(nl) = b.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&b[..nl]).trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.extend_from_slice(&b[nl + 2..nl + 2 + size]);
        b = &b[nl + 2 + size + 2..];
    }
    out
}

/// `sha256:<hex>`, computed here rather than by the crate under test.
pub fn sha256(b: &[u8]) -> String {
    use sha2::Digest as _;
    let hash = sha2::Sha256::digest(b);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `make push` as an operator runs it, with `vars` (`REGISTRY=…`).
pub fn make_push(vars: &[String]) -> std::process::Output {
    Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(repo_root())
        .arg("push")
        .args(vars)
        .output()
        .unwrap()
}

/// The push command itself (the one `make push` runs), for the error paths.
pub fn push(args: &[String]) -> std::process::Output {
    Command::new(super::push_tool())
        .args(args)
        .output()
        .unwrap()
}

pub const INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

/// GETs a manifest or index by tag or digest as `accept`, checking the registry's digest header
/// against the bytes; the bytes and their digest.
pub fn get_manifest(port: u16, repo: &str, reference: &str, accept: &str) -> (Vec<u8>, String) {
    let (status, headers, body) =
        get(port, &format!("{repo}/manifests/{reference}"), accept).unwrap();
    assert_eq!(
        status,
        200,
        "{reference}: {}",
        String::from_utf8_lossy(&body)
    );
    let digest = sha256(&body);
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "docker-content-digest" && v == &digest),
        "{headers:?}"
    );
    assert!(
        headers
            .iter()
            .any(|(k, v)| k == "content-type" && v == accept),
        "{reference} served as {headers:?}"
    );
    (body, digest)
}

/// The SBOM `make image` wrote beside the image.
pub fn sbom_file(binary: &str) -> PathBuf {
    let path = super::image_dir().join(format!("{binary}-{VERSION}.cdx.json"));
    assert!(
        path.is_file(),
        "{} is missing: run `make image` first (make test does)",
        path.display()
    );
    path
}

pub const CYCLONEDX: &str = "application/vnd.cyclonedx+json";

/// What refers to `digest` in `repo` (`/v2/<name>`), as a client finds it: the referrers API,
/// or, where the registry answers 404 there (CNCF distribution v3.1 has none), the referrers tag
/// `sha256-<hex>` the distribution spec falls back to.
pub fn referrers(port: u16, repo: &str, digest: &str) -> Vec<Value> {
    let (status, _, body) = get(port, &format!("{repo}/referrers/{digest}"), INDEX).unwrap();
    let body = match status {
        200 => body,
        404 => {
            let tag = digest.replacen(':', "-", 1);
            let (status, _, body) = get(port, &format!("{repo}/manifests/{tag}"), INDEX).unwrap();
            assert_eq!(
                status,
                200,
                "no referrers tag {tag}: {}",
                String::from_utf8_lossy(&body)
            );
            body
        }
        other => panic!(
            "referrers of {digest}: {other} {}",
            String::from_utf8_lossy(&body)
        ),
    };
    let index: Value = serde_json::from_slice(&body).unwrap();
    index["manifests"].as_array().unwrap().clone()
}

/// The SBOM attached to `digest`, found from the digest alone: its one CycloneDX referrer, whose
/// subject is that digest; the SBOM's bytes.
pub fn attached_sbom(port: u16, repo: &str, digest: &str) -> Vec<u8> {
    let sboms: Vec<Value> = referrers(port, repo, digest)
        .into_iter()
        .filter(|r| r["artifactType"] == CYCLONEDX)
        .collect();
    assert_eq!(sboms.len(), 1, "one SBOM refers to {digest}: {sboms:?}");
    let artifact = sboms[0]["digest"].as_str().unwrap();
    let (bytes, got) = get_manifest(port, repo, artifact, MANIFEST);
    assert_eq!(got, artifact);
    let manifest: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(manifest["artifactType"], CYCLONEDX);
    assert_eq!(manifest["subject"]["digest"], digest);
    assert_eq!(manifest["subject"]["mediaType"], INDEX);
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.oci.empty.v1+json"
    );
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], CYCLONEDX);
    let blob = layers[0]["digest"].as_str().unwrap();
    let (status, _, sbom) = get(port, &format!("{repo}/blobs/{blob}"), "*/*").unwrap();
    assert_eq!(status, 200, "{blob}");
    assert_eq!(sha256(&sbom), blob);
    sbom
}

/// One platform's manifest as the registry serves it: config and layers fetched and hashed, the
/// layers the archive's very blobs, the config the Containerfile's.
fn check_pushed_platform(
    port: u16,
    repo: &str,
    binary: &str,
    entry: &Value,
    archive: &HashMap<String, Vec<u8>>,
) {
    let want = entry["digest"].as_str().unwrap();
    let (bytes, digest) = get_manifest(port, repo, want, MANIFEST);
    assert_eq!(digest, want, "the registry holds the index's manifest");
    let manifest: Value = serde_json::from_slice(&bytes).unwrap();
    let mut config = Value::Null;
    let mut files = Vec::new();
    let mut blobs = vec![manifest["config"].clone()];
    blobs.extend(manifest["layers"].as_array().unwrap().iter().cloned());
    for blob in &blobs {
        let digest = blob["digest"].as_str().unwrap();
        let (status, _, bytes) = get(port, &format!("{repo}/blobs/{digest}"), "*/*").unwrap();
        assert_eq!(status, 200, "{digest}");
        assert_eq!(sha256(&bytes), digest);
        assert_eq!(bytes.len() as u64, blob["size"].as_u64().unwrap());
        let hex = digest.strip_prefix("sha256:").unwrap();
        assert!(
            archive.get(&format!("blobs/sha256/{hex}")) == Some(&bytes),
            "{digest} is not the archive's blob"
        );
        if blob["mediaType"] == "application/vnd.oci.image.config.v1+json" {
            config = serde_json::from_slice(&bytes).unwrap();
        } else {
            let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
            for entry in tar.entries().unwrap() {
                files.push(entry.unwrap().path().unwrap().display().to_string());
            }
        }
    }
    let arch = entry["platform"]["architecture"].as_str().unwrap();
    assert_eq!(config["architecture"], arch);
    assert_eq!(config["os"], "linux");
    let c = &config["config"];
    assert_eq!(
        c["Entrypoint"],
        serde_json::json!([format!("/usr/local/bin/{binary}")])
    );
    assert_eq!(c["User"], "65532:65532", "a non-root user");
    assert_eq!(c["Labels"]["org.opencontainers.image.title"], binary);
    assert_eq!(c["Labels"]["org.opencontainers.image.version"], VERSION);
    assert_eq!(
        c["Labels"]["org.opencontainers.image.source"],
        "https://github.com/resize-guard/resize-guard"
    );
    assert_eq!(
        c["Labels"]["org.opencontainers.image.licenses"],
        "Apache-2.0"
    );
    assert!(
        c["Labels"]["org.opencontainers.image.revision"].is_string(),
        "{c}"
    );
    assert!(
        files
            .iter()
            .any(|f| f.ends_with(&format!("usr/local/bin/{binary}"))),
        "{files:?}"
    );
    if binary == "resize-guard-controller" {
        assert!(
            files
                .iter()
                .any(|f| f.ends_with("usr/local/bin/resize-guard-certs")),
            "{files:?}"
        );
    }
}

#[test]
fn both_multi_platform_images_are_pushed_and_read_back_as_built() {
    let registry = start_registry();
    let port = registry.port;
    let target = format!("127.0.0.1:{port}/platform/rg");
    let vars = vec![format!("REGISTRY={target}"), "PLAIN_HTTP=1".to_owned()];

    let out = make_push(&vars);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tag = super::archive::built_tag();
    for binary in BINARIES {
        // What the archive names, and the layout the push reads says the same.
        let archive = super::archive::read_archive(binary);
        let index_json: Value = serde_json::from_slice(&archive["index.json"]).unwrap();
        let layout_json = std::fs::read(layout(binary).join("index.json")).unwrap();
        assert_eq!(
            layout_json, archive["index.json"],
            "layout and archive differ"
        );
        assert_eq!(index_json["manifests"][0]["mediaType"], INDEX);
        let want = index_json["manifests"][0]["digest"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            stdout.contains(&format!("{target}/{binary}:{tag}@{want}  ("))
                && stdout.contains(&match super::archive::image_arches().len() {
                    1 => "; 1 platform manifest)".to_owned(),
                    n => format!("; {n} platform manifests)"),
                }),
            "{stdout}"
        );
        // What runs it: the kustomize `images:` entry for deploy/'s name and the Helm flags,
        // both pinning the digest the registry stored.
        assert!(
            stdout.contains(&format!(
                "  - name: registry.invalid/resize-guard/{binary}\n    newName: {target}/{binary}\n    digest: {want}\n"
            )),
            "{stdout}"
        );
        // Its SBOM, pushed beside it and found from the index digest alone.
        assert!(
            stdout.contains(&format!("  SBOM {target}/{binary}@sha256:"))
                && stdout.contains(&format!(
                    "refers to {want}; referrers tag {})",
                    want.replacen(':', "-", 1)
                )),
            "{stdout}"
        );
        let repo = format!("/v2/platform/rg/{binary}");
        assert_eq!(
            attached_sbom(port, &repo, &want),
            std::fs::read(sbom_file(binary)).unwrap(),
            "the SBOM found from {want} is the file make image wrote"
        );
        let key = binary.trim_start_matches("resize-guard-");
        assert!(
            stdout.contains(&format!(
                "--set image.{key}.repository={target}/{binary},image.{key}.digest={want}"
            )),
            "{stdout}"
        );

        let (bytes, digest) = get_manifest(port, &repo, &tag, INDEX);
        assert_eq!(digest, want, "the tag names the archive's image index");
        let index: Value = serde_json::from_slice(&bytes).unwrap();
        let manifests = index["manifests"].as_array().unwrap();
        let platforms: Vec<String> = manifests
            .iter()
            .map(|m| format!("{}/{}", m["platform"]["os"], m["platform"]["architecture"]))
            .map(|p| p.replace('"', ""))
            .collect();
        let built: Vec<String> = super::archive::image_arches()
            .iter()
            .map(|arch| format!("linux/{arch}"))
            .collect();
        assert_eq!(
            platforms, built,
            "the index lists the platforms make image built"
        );
        for entry in manifests {
            check_pushed_platform(port, &repo, binary, entry, &archive);
        }
    }

    // Again: everything is there already, and the tag still names the same manifests.
    let out = make_push(&vars);
    let again = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert_eq!(again.matches("(0 blobs uploaded,").count(), 2, "{again}");
    // The SBOM is listed once, not once per push.
    for binary in BINARIES {
        let index = super::archive::read_archive(binary);
        let index: Value = serde_json::from_slice(&index["index.json"]).unwrap();
        let digest = index["manifests"][0]["digest"].as_str().unwrap();
        let all = referrers(port, &format!("/v2/platform/rg/{binary}"), digest);
        assert_eq!(all.len(), 1, "{all:?}");
    }

    // Another tag: only the manifest moves.
    let mut tagged = vars.clone();
    tagged.push("TAG=candidate".to_owned());
    assert!(make_push(&tagged).status.success());
    let (status, _, _) = get(
        port,
        "/v2/platform/rg/resize-guard-webhook/manifests/candidate",
        INDEX,
    )
    .unwrap();
    assert_eq!(status, 200);
}

#[test]
fn an_unreachable_registry_and_a_missing_layout_fail_naming_what() {
    let out = make_push(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("usage: make push REGISTRY="));
    let port = free_port();
    let out = push(&[
        "--registry".into(),
        format!("127.0.0.1:{port}/rg"),
        "--plain-http".into(),
        "--no-sbom".into(),
        layout("resize-guard-webhook").display().to_string(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.starts_with(&format!(
            "error: HEAD http://127.0.0.1:{port}/v2/rg/resize-guard-webhook/blobs/sha256:"
        )),
        "{err}"
    );
    let out = push(&[
        "--registry".into(),
        format!("127.0.0.1:{port}/rg"),
        "/nonexistent/layout.oci".into(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        err.contains("image layout /nonexistent/layout.oci: index.json:")
            && err.contains("run `make image` first"),
        "{err}"
    );
    // A layout without its SBOM beside it: nothing is pushed, and the message says how to skip it.
    let dir = tempfile::tempdir().unwrap();
    let alone = dir
        .path()
        .join(format!("resize-guard-webhook-{VERSION}.oci"));
    std::os::unix::fs::symlink(layout("resize-guard-webhook"), &alone).unwrap();
    let out = push(&[
        "--registry".into(),
        format!("127.0.0.1:{port}/rg"),
        alone.display().to_string(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        err.trim(),
        format!(
            "error: SBOM {}: missing: `make image` writes it beside the image (or push with \
             --no-sbom, make push NO_SBOM=1, to leave it out)",
            dir.path()
                .join(format!("resize-guard-webhook-{VERSION}.cdx.json"))
                .display()
        )
    );
}
