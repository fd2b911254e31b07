//! # resize-guard-controller
//!
//! Makes room for Deferred in-place resizes. Data flow: a pod watch (kube-runtime
//! [`Controller`](kube::runtime::Controller)) triggers [`reconcile`] for each pod; the cluster
//! view (`resize_guard_cluster`) gives the node's ledger, PDBs and the policy;
//! `resize_guard_policy::assess` judges the resize; [`decision::decide`] turns that and the
//! recorded [`plan`] into a decision; [`actuate`] records the plan, marks and evicts victims and
//! emits Events. Only the holder of the [`leader`] Lease runs the controller ([`run`],
//! [`leading`]), and, with `--certificates=self`, the [`certificates`] manager that keeps the
//! webhook's CA, serving certificate and caBundle, and the [`last_good`] policy copy; every
//! write passes the [`leadership`] fence. Recorded plans are sealed by the controller and
//! re-checked against a fresh plan's rules before they are resumed ([`plan`], [`decision`]).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod actuate;
pub mod args;
pub mod brakes;
pub mod certificates;
pub mod decision;
pub mod last_good;
pub mod leader;
pub mod leadership;
pub mod leading;
pub mod metrics;
pub mod plan;
pub mod reconcile;
pub mod run;
