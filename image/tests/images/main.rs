//! What `make image` (and `make plugins`) and `make push` produce, one test binary: the archives
//! and their binaries ([`archive`]), their SBOMs ([`sbom`]), the krew manifest and archives
//! ([`krew`]; macOS and Windows programs read by [`macho`] and [`pe`]), and a push to a real
//! registry read back without this crate's code ([`push`]).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod archive;
mod elf;
mod krew;
mod macho;
mod pe;
mod push;
mod sbom;
