//! # resize-guard-controller
//!
//! Makes room for Deferred in-place resizes, and, while it leads, keeps the webhook's
//! certificates and the last good policy copy. Three rooms, a probe and the wiring around them:
//!
//! - [`preemption`]: a pod watch (kube-runtime [`Controller`](kube::runtime::Controller))
//!   triggers [`preemption::reconcile`] for each pod, which owns the one-way loop: the cluster
//!   view (`resize_guard_cluster`) gives the node's ledger, PDBs and the policy;
//!   `resize_guard_policy::assess` judges the resize; [`preemption::decision::decide`] turns
//!   that and the recorded plan into a decision; the [`preemption::brakes`] judge a plan; the
//!   [`preemption::actuator`] records the plan, marks and evicts victims and emits the Events
//!   the decision carries, and reports an [`preemption::outcome`] the next decision reads.
//!   Recorded plans are sealed by the controller ([`preemption::seal`]) and re-checked against a
//!   fresh plan's rules before they are resumed.
//! - [`lease`]: who may write. Only the holder of the Lease ([`lease::elector`]) runs the work
//!   the Lease guards, and every write passes the [`lease::fence`].
//! - [`certificates`]: the webhook's CA, serving certificate and caBundle.
//! - [`admission_probe`]: every replica checks that resizes still reach the webhook (a dry-run
//!   resize of its own pod through the API server), for `/readyz`, metrics and an Event.
//!
//! Wiring: [`args`] (the command line), [`run`] (starts the view, the elector, the admission
//! probe and the admin server), [`leading`] (the work the Lease guards: the preemption
//! controller, the [`certificates`] manager with `--certificates=self`, the [`last_good`] policy
//! copy), [`metrics`]. Supervision and retry jitter are the process's
//! (`resize_guard_runtime::supervisor`, `resize_guard_runtime::jitter`).
//!
//! Layers, top to bottom (an import points only down; `tests/controller/layers.rs` checks it):
//! `run`; `leading`; `args`; `preemption::reconcile`; `preemption::actuator`, `certificates`,
//! `last_good`, `admission_probe`; `preemption::decision`; `preemption::brakes`,
//! `preemption::outcome`; `preemption::seal`; `preemption::write`; `lease`, `metrics`.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod admission_probe;
pub mod args;
pub mod certificates;
pub mod last_good;
pub mod leading;
pub mod lease;
pub mod metrics;
pub mod preemption;
pub mod run;

#[cfg(test)]
mod tests;
