//! The images `make image` wrote, checked as a container runtime would read them: for each
//! binary, `target/image/<binary>-<version>.oci.tar` → `index.json` → manifest → config and
//! layer, every blob's digest and size checked against its bytes, then the layer unpacked into a
//! temporary root filesystem and `<rootfs>/usr/local/bin/<binary> --version` run. The binary is
//! static (checked: no ELF interpreter), so that is running what the image holds.
//!
//! Deliberately not skippable: a missing archive fails with "run `make image` first". Reads the
//! archive with tar, flate2, sha2 and serde_json only, never with this crate's own writer code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const BINARIES: [&str; 2] = ["resize-guard-webhook", "resize-guard-controller"];

fn image_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/image")
}

fn sha256(bytes: &[u8]) -> String {
    let hex: String = Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// The archive's files by path.
fn read_archive(binary: &str) -> HashMap<String, Vec<u8>> {
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

/// True if the ELF file has a PT_INTERP program header (needs a dynamic loader).
fn has_interpreter(elf: &[u8]) -> bool {
    assert_eq!(&elf[..4], b"\x7fELF", "not an ELF file");
    assert_eq!(elf[4], 2, "not a 64-bit ELF file");
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum).any(|i| {
        let at = phoff + i * phentsize;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == 3
    })
}

/// Runs `program --version`, retrying while another test thread's fork still holds the freshly
/// written file open (ETXTBSY).
fn run_version(program: &Path) -> String {
    for _ in 0..50 {
        match Command::new(program).arg("--version").output() {
            Ok(out) => {
                assert!(
                    out.status.success(),
                    "{} --version: {out:?}",
                    program.display()
                );
                return String::from_utf8(out.stdout).unwrap();
            }
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("running {}: {e}", program.display()),
        }
    }
    panic!("{} stayed busy", program.display());
}

fn check_image(binary: &str) {
    let files = read_archive(binary);
    assert_eq!(json(&files["oci-layout"])["imageLayoutVersion"], "1.0.0");

    let index = json(&files["index.json"]);
    assert_eq!(index["schemaVersion"], 2);
    let manifests = index["manifests"].as_array().unwrap();
    assert_eq!(manifests.len(), 1);
    let entry = &manifests[0];
    assert_eq!(
        entry["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(entry["platform"]["architecture"], "amd64");
    assert_eq!(
        entry["annotations"]["org.opencontainers.image.ref.name"],
        VERSION
    );
    assert_eq!(
        entry["annotations"]["io.containerd.image.name"],
        format!("ghcr.io/resize-guard/{binary}:{VERSION}")
    );

    let manifest = json(blob(&files, entry));
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.oci.image.config.v1+json"
    );
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(
        layers[0]["mediaType"],
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );

    let config = json(blob(&files, &manifest["config"]));
    assert_eq!(config["architecture"], "amd64");
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

    let mut layer_tar = Vec::new();
    flate2::read::GzDecoder::new(blob(&files, &layers[0]))
        .read_to_end(&mut layer_tar)
        .unwrap();
    assert_eq!(config["rootfs"]["type"], "layers");
    assert_eq!(
        config["rootfs"]["diff_ids"],
        serde_json::json!([sha256(&layer_tar)])
    );

    let rootfs = tempfile::tempdir().unwrap();
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
        if path == entrypoint.trim_start_matches('/') {
            assert_eq!(header.mode().unwrap(), 0o755, "{path}");
        }
        assert!(
            entry.unpack_in(rootfs.path()).unwrap(),
            "{path} escapes the rootfs"
        );
    }
    let program = rootfs.path().join(entrypoint.trim_start_matches('/'));
    let elf = std::fs::read(&program).unwrap();
    assert!(
        !has_interpreter(&elf),
        "{binary} is dynamically linked: it cannot run on scratch"
    );
    assert_eq!(run_version(&program).trim(), format!("{binary} {VERSION}"));
}

#[test]
fn webhook_archive_holds_its_config_and_a_runnable_static_binary() {
    check_image(BINARIES[0]);
}

#[test]
fn controller_archive_holds_its_config_and_a_runnable_static_binary() {
    check_image(BINARIES[1]);
}
