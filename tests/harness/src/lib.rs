//! # resize-guard-harness
//!
//! The real-parts test bench of resize-guard: a real kube-apiserver v1.37.2 + etcd (+
//! kube-scheduler) built from upstream Go modules ([`control_plane`]), hollow nodes running
//! upstream's kubelet ([`hollow_node`]), `kubectl` helpers ([`kubectl`]), and a per-test-binary shared
//! environment ([`env`]) that tests isolate from each other by namespace; upstream metrics-server
//! v0.8.0 scraping hollow nodes that report per-container usage ([`metrics_server`],
//! [`hollow_usage`]); and the Vertical Pod Autoscaler's recommender, updater and
//! admission-controller v1.6.0, unpatched ([`vpa`]; the loop from usage to resize in
//! [`vpa::usage_loop`]). The memory and
//! scale benchmarks (`resize-guard-rss`, `resize-guard-scale`) share a realistic pod set
//! ([`scale_pods`]), the programs under measurement ([`programs`]), review timing through the API
//! server ([`review_latency`]), a busy hollow node with a Deferred resize ([`busy_node`]) and
//! their report ([`growth`], [`scale_report`]).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod account;
pub mod admission;
pub mod bench;
pub mod binaries;
pub mod busy_node;
pub mod control_plane;
pub mod demo;
pub mod env;
pub mod growth;
pub mod hollow_config;
pub mod hollow_node;
pub mod hollow_usage;
pub mod install;
pub mod issuer;
pub mod kubectl;
pub mod matrix;
pub mod metrics_server;
pub mod objects;
pub mod process;
pub mod programs;
pub mod quantity;
pub mod real_node;
pub mod replica;
pub mod review_latency;
pub mod sandbox;
pub mod scale_pods;
pub mod scale_report;
pub mod vpa;
pub mod vpa_field;
