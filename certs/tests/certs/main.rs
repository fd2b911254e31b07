//! The certs crate from outside, one test binary: the `resize-guard-certs` command line
//! ([`cli`]) and its certificates in real rustls handshakes ([`rustls_handshake`]).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod cli;
mod rustls_handshake;
