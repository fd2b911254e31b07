//! What `make image` (and `make plugins`), `make push` and `make sign` produce, one test binary:
//! the archives and their binaries ([`archive`]), their SBOMs ([`sbom`]), the krew manifest and
//! archives ([`krew`]; macOS and Windows programs read by [`macho`] and [`pe`]), a push to a real
//! registry read back without this crate's code ([`push`]), the same with credentials from
//! helpers and files ([`credentials`]) and with an identity token at a token realm ([`token`]),
//! and cosign's signature and verification of what was pushed ([`sign`]).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

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

/// A command's stdout then stderr, for assertion messages.
fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
