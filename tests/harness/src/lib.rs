//! # resize-guard-harness
//!
//! The real-parts test bench of resize-guard: a real kube-apiserver v1.37.2 + etcd (+
//! kube-scheduler) built from upstream Go modules ([`control_plane`]), hollow nodes running
//! upstream's kubelet ([`hollow_node`]), `kubectl` helpers ([`kubectl`]), and a per-process shared
//! environment ([`env`], one suite's) that tests isolate from each other by namespace; upstream
//! metrics-server v0.8.0 scraping hollow nodes that report per-container usage ([`metrics_server`],
//! [`hollow_usage`]); and the Vertical Pod Autoscaler's recommender, updater and
//! admission-controller v1.6.0, unpatched ([`vpa`]; the loop from usage to resize in
//! [`vpa::usage_loop`]); resize-guard installed from `deploy/` with its programs running
//! ([`installed`]). The end-to-end suites (`tests/e2e`) and the lab (`tests/lab`: benchmarks,
//! demos, sandbox, the version matrix) are built on it; nothing here measures or narrates.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod account;
pub mod admission;
pub mod audit;
pub mod binaries;
pub mod control_plane;
pub mod env;
pub mod hollow_config;
pub mod hollow_node;
pub mod hollow_usage;
pub mod install;
pub mod installed;
pub mod issuer;
pub mod kubectl;
pub mod metrics_server;
pub mod objects;
pub mod process;
pub mod quantity;
pub mod real_node;
pub mod replica;
pub mod review;
pub mod text;
pub mod tls;
pub mod vpa;
pub mod vpa_field;
