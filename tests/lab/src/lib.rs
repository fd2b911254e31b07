//! # resize-guard-lab
//!
//! Everything that measures or shows resize-guard on real parts, apart from the test environment it
//! is built on (`resize_guard_harness`) and from the end-to-end suites (`tests/e2e`): the memory
//! and scale runs of the release binaries (`resize-guard-rss`, `resize-guard-scale`) with a
//! realistic pod set ([`scale_pods`]), the programs under measurement ([`programs`]), review timing
//! through the API server ([`review_latency`]), the API server's own time to list every pod
//! ([`bare_list`]), a busy hollow node with a Deferred resize ([`busy_node`]) and their report
//! ([`growth`], [`scale_report`]), the README's goals table from every benchmark's summary
//! ([`bench_report`]); the narrated demos ([`demo`]: `make demo`, `make demo-node`, `make
//! demo-vpa`, `make vpa-lag`), the sandbox ([`sandbox`]) and the version matrix's table
//! ([`matrix`]), and Kubernetes' own resize e2e specs judged against their expectations table
//! ([`upstream_specs`], `make upstream-e2e`). The benchmarks that start a control plane or an
//! in-process API server are this crate's `benches/`; in-process micro-benchmarks stay with the
//! crate they measure. What every benchmark shares (percentiles, goals, the JSON summary under
//! `target/bench/`) is `resize_guard_bench` (`tests/lab/bench/`), a crate of its own that depends
//! on `serde_json` only, so the policy crate's and the webhook's benchmarks use it too.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod bare_list;
pub mod bench_report;
pub mod busy_node;
pub mod demo;
pub mod growth;
pub mod matrix;
pub mod programs;
pub mod review_latency;
pub mod sandbox;
pub mod scale_pods;
pub mod scale_report;
pub mod upstream_specs;
