//! The controller without a cluster, one test binary: the `resize-guard-controller` program's
//! flags, version and failures ([`cli`]; being an integration test of this crate, it also makes
//! `cargo test` build the binary the end-to-end suites run, with the `testing` feature they
//! need), and its import graph checked against the layers `controller/src/lib.rs` lists
//! ([`layers`]).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod cli;
mod layers;
