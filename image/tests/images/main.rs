//! What `make image` and `make push` produce, one test binary: the archives and their binaries
//! ([`archive`]), the krew manifest and archives ([`krew`]), and a push to a real registry read
//! back without this crate's code ([`push`]).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod archive;
mod elf;
mod krew;
mod push;
