//! # resize-guard-certs
//!
//! TLS material for the resize-guard admission webhook, the HTTPS server kube-apiserver calls.
//! Small and pure: (service, namespace, lifetimes) in, PEM strings out; no kube client, no async
//! runtime. The caller publishes [`Bundle::ca_bundle_base64`] as the webhook configuration's
//! `caBundle` (with server-side apply) and serves `tls.crt`/`tls.key`.
//!
//! Data flow:
//! - a [`CertSpec`] ([`spec`]) names the serving certificate: [`CertSpec::for_service`] for the
//!   in-cluster Service DNS names, [`CertSpec::for_loopback`] for `127.0.0.1`/`::1`/`localhost`;
//! - [`generate`] ([`issue`]) makes a self-signed ECDSA P-256 CA and a leaf signed by it;
//!   [`renew_leaf`] makes a new leaf from the same CA, so `caBundle` never changes on rotation;
//! - [`expires_within`] ([`expiry`]) reads a certificate's `notAfter` to decide when to renew;
//! - [`Authority`] ([`authority`]) is a CA as a value, taken back from storage with
//!   [`Authority::from_pem`] or made with [`Authority::issue`], that [`Authority::sign`]s leaves
//!   at an explicit `now` (what a controller that manages the certificates itself uses);
//! - [`fn@inspect`] ([`mod@inspect`]) reads a certificate's names, issuer and validity, and
//!   [`signed_by`] / [`key_matches`] check a leaf against a CA and a private key;
//! - [`write_dir`] ([`volume`]) lays the bundle out like the kubelet projects a Secret volume:
//!
//! ```text
//! DIR/..<timestamp>/{tls.crt, tls.key, ca.crt, ca.key}   one generation (keys mode 0600)
//! DIR/..data -> ..<timestamp>                             renamed over atomically per write
//! DIR/tls.crt -> ..data/tls.crt  (and tls.key, ca.crt, ca.key)
//! ```
//!
//! so a reloader that watches `DIR` sees a rename of `..data` and then reads a consistent pair,
//! exactly as it would when a real Secret is updated. The `resize-guard-certs` binary wraps
//! these functions (`generate`, `renew`, `check`) for scripts and tests.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod authority;
pub mod error;
pub mod expiry;
pub mod inspect;
pub mod issue;
pub mod spec;
pub mod volume;

pub use authority::{Authority, Leaf};
pub use error::CertError;
pub use expiry::{expires_within, not_after};
pub use inspect::{CertInfo, inspect, key_matches, signed_by};
pub use issue::{Bundle, generate, renew_leaf};
pub use spec::CertSpec;
pub use volume::{read_dir, write_dir};
