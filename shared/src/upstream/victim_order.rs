//! The scheduler's victim order: upstream `MoreImportantPod`
//! (`pkg/scheduler/util/utils.go`), which DefaultPreemption's `SelectVictimsOnNode`
//! (`pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go`) sorts candidates
//! by before it reprieves them, most important first. The reprieve itself runs on the kubelet's
//! accounting and lives with resize-guard's planner (`shared/src/victims/race.rs`, `reprieve`).

use std::cmp::Ordering;

use crate::ledger::LedgerEntry;

/// Upstream `MoreImportantPod` as an ordering: most important first. Ties (same priority and
/// start time) fall back to namespace/name so plans are deterministic.
pub fn importance(a: &LedgerEntry, b: &LedgerEntry) -> Ordering {
    b.priority
        .cmp(&a.priority)
        .then_with(|| match (a.start_time, b.start_time) {
            (Some(x), Some(y)) => x.cmp(&y),
            // A pod that has not started counts as starting now: the least senior.
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        })
        .then_with(|| a.key.cmp(&b.key))
}
