//! # resize-guard-harness
//!
//! The real-parts test bench of resize-guard: a real kube-apiserver v1.37.2 + etcd (+
//! kube-scheduler) built from upstream Go modules ([`control_plane`]), hollow nodes running
//! upstream's kubelet ([`hollow_node`]), `kubectl` helpers ([`kubectl`]), and a per-test-binary shared
//! environment ([`env`]) that tests isolate from each other by namespace; and the Vertical Pod
//! Autoscaler's updater and admission-controller v1.6.0, unpatched ([`vpa`]).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod admission;
pub mod bench;
pub mod binaries;
pub mod control_plane;
pub mod demo;
pub mod env;
pub mod hollow_node;
pub mod install;
pub mod kubectl;
pub mod objects;
pub mod process;
pub mod sandbox;
pub mod vpa;
pub mod vpa_field;
