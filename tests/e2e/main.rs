//! resize-guard's end-to-end suites, one test binary grouped by subject: the shipped programs
//! (`resize-guard-webhook`, `resize-guard-controller`, `kubectl-resize_guard`) and manifests
//! (`deploy/`, the chart) against a real kube-apiserver and etcd, upstream's kubelet in hollow
//! nodes, a real node with containerd, and the real VPA and metrics-server
//! (`resize_guard_harness`); and the release artefacts as shipped ([`images`]: what `make image`
//! and `make plugins` wrote, pushed to a real registry, signed by cosign, installed by krew).
//!
//! A suite is a module (a file); it owns its control plane and whatever it installs there
//! (webhook configurations, a controller that preempts cluster-wide), so each suite runs in a
//! process of its own: `make e2e` (`tests/e2e/run.sh`) lists the tests and runs one process per
//! suite; `cargo test --test e2e -- admission::memory::` runs one by hand. Where a new test goes:
//! the subject it proves (admission, preemption, certificates, images, install, plugin, upstream,
//! versions, vpa, real_node, environment), in the suite whose set-up it shares, with the set-ups
//! every suite repeats in [`scenario`].
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod admission;
mod certificates;
mod cluster_view;
mod environment;
mod images;
mod install;
mod plugin;
mod preemption;
mod real_node;
mod scenario;
mod upstream;
mod versions;
mod vpa;
