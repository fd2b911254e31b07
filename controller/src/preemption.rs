//! Preemption for Deferred in-place resizes (ARCHITECTURE.md §5): decisions are values, a thin
//! layer carries them out.
//!
//! - [`reconcile`]: the kube-runtime reconciler; reads the view, calls
//!   `resize_guard_policy::assess`, [`decision::decide`], then [`actuate::Actuator::apply`].
//! - [`decision`]: what to do for one pod, as a [`decision::Decision`] that also says when to
//!   look again; pure.
//! - [`brakes`]: rate, one plan per node, victims per resize, circuit breaker.
//! - [`actuate`]: records the plan, removes victims, emits Events; decides nothing.
//! - [`seal`]: the seal on the plan recorded on the preemptor (victims encrypted, the tag over every field).

pub mod actuate;
pub mod brakes;
pub mod decision;
pub mod reconcile;
pub mod seal;
