//! # resize-guard-webhook
//!
//! The mutating and validating admission webhook on `pods/resize`. Data flow: kube-apiserver POSTs
//! an AdmissionReview → [`server`] checks the request and hands the body to [`review`], which reads
//! the cluster view (`resize_guard_cluster`: reflectors + live policy), calls
//! `resize_guard_policy::classify` and maps the verdict to a response and an Event intent →
//! [`server`] answers, records [`metrics`] and publishes the Event. TLS comes from [`tls`]: a
//! certificate resolver fed by [`serving_secret`] (the `kubernetes.io/tls` Secret, watched through
//! the API; the default) or [`cert_dir`] (`--cert-dir` files), swapped on every change. A resize
//! that lowers a memory limit also reads the pod's usage from `metrics.k8s.io` ([`usage`]) for the
//! memory rule.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod args;
pub mod cert_dir;
pub mod connections;
pub mod incoming;
pub mod intake;
pub mod metrics;
pub mod review;
pub mod server;
pub mod serving_secret;
pub mod tls;
pub mod usage;
