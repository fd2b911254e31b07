//! Preemption for Deferred in-place resizes (ARCHITECTURE.md, "controller/"): decisions are values,
//! a thin layer carries them out, and the loop runs one way.
//!
//! - [`reconcile`]: the kube-runtime reconciler and the loop it owns: reads the view, calls
//!   `resize_guard_policy::assess` and [`decision::decide`], then takes the decision its
//!   [`reconcile::Course`]: the [`brakes`]' verdict (a plan held back is decided again,
//!   [`decision::held_back`]), [`actuator::Actuator::apply`], and the [`outcome`] handed to the
//!   next decision ([`decision::eviction_refused`]).
//! - [`decision`]: what to do for one pod, as a [`decision::Decision`] that also says when to
//!   look again and which Events it leads to; pure.
//! - [`brakes`]: rate, one plan per node, victims per resize, circuit breaker.
//! - [`actuator`]: records the plan, removes victims, emits the decision's Events; decides
//!   nothing, reports an [`outcome::Outcome`].
//! - [`seal`]: the seal on the plan recorded on the preemptor (victims encrypted, the tag over
//!   every field).
//! - [`write`]: why one write was not made or failed.

pub mod actuator;
pub mod brakes;
pub mod decision;
pub mod outcome;
pub mod reconcile;
pub mod seal;
pub mod write;
