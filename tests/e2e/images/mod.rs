//! What `make image` (and `make plugins`), `make push` and `make sign` produce: the archives and
//! their binaries ([`archive`]), their SBOMs ([`sbom`]), the krew manifest and archives
//! ([`krew`]; macOS and Windows programs read by [`macho`] and [`pe`]), a push to a real registry
//! read back without the image crate's code ([`push`]), the same with credentials from helpers
//! and files ([`credentials`]) and with an identity token at a token realm ([`token`]), and
//! cosign's signature and verification of what was pushed ([`sign`]).
//!
//! Needs what `make test` builds before it runs `make e2e`: `target/image` written by
//! `make image` or `make plugins` for this commit (a missing or stale build fails naming the
//! command, never skips), the registry and cosign from `third_party/` (`make e2e` passes them),
//! kubectl of the control plane (krew runs as `kubectl krew`), krew and qemu-user (fetched by
//! their `third_party/` scripts on first use).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod archive;
mod credentials;
mod elf;
mod krew;
mod macho;
mod pe;
mod push;
mod sbom;
mod sign;
mod token;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// A command's stdout then stderr, for assertion messages.
fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The checkout's root.
pub fn repo_root() -> PathBuf {
    let e2e = Path::new(env!("CARGO_MANIFEST_DIR"));
    e2e.ancestors().nth(2).unwrap_or(e2e).to_path_buf()
}

/// `target/image`, once its images are known to be built from this commit
/// ([`archive::built_tag`]): a missing or stale build fails here, naming `make image`.
pub fn image_dir() -> PathBuf {
    static CHECKED: OnceLock<String> = OnceLock::new();
    CHECKED.get_or_init(archive::built_tag);
    repo_root().join("target/image")
}

/// The image tool `name` as `make image` built it for this machine and `make push` runs it
/// (`IMAGE_BIN` in `scripts/lib/release.sh`: static on Linux, in its own target directory).
pub fn image_tool(name: &str) -> PathBuf {
    image_dir();
    let triple = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", arch) => format!("{arch}-unknown-linux-musl"),
        ("macos", arch) => format!("{arch}-apple-darwin"),
        (os, arch) => panic!("no image tools are built for {os}/{arch}"),
    };
    let path = repo_root()
        .join("target/image-build")
        .join(triple)
        .join("release")
        .join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `make image` (or `make plugins`) first; make test does",
        path.display()
    );
    path
}

/// `resize-guard-push` as `make push` runs it.
pub fn push_tool() -> PathBuf {
    image_tool("resize-guard-push")
}
