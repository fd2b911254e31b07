//! The kubelet's queue of pending resizes: which Deferred resize it retries first when room
//! appears.
//!
//! On every pod removal (and pod addition, resize, reconcile, and every 3 minutes) the v1.37
//! kubelet retries **all** pending resizes in one pass, in the queue's order, admitting each
//! one that fits given the admissions made earlier in the same pass
//! (`retryPendingResizes`, `pkg/kubelet/allocation/allocation_manager.go`). The queue is kept
//! sorted by `sortPendingResizes` (same file):
//! 1. resizes that do not increase any request first (`isResizeIncreasingRequests`);
//! 2. higher `spec.priority` first;
//! 3. Guaranteed before other QoS classes (`v1qos.GetPodQOS`);
//! 4. the one whose `PodResizePending` condition is oldest (`lastTransitionTime`) first, a pod
//!    without one last.
//!
//! So while victims terminate one by one, a *lower-priority* pending resize is admitted ahead of
//! the preemptor whenever it fits and the preemptor does not yet: [`crate::victims`] uses this
//! order to find which pending resizes could take the room it frees.

use std::cmp::Ordering;

use k8s_openapi::api::core::v1::{Pod, PodSpec, PodStatus};
use k8s_openapi::jiff::Timestamp;

use crate::resources::Resources;
use crate::upstream::pod;
use crate::upstream::qos::{QosClass, current_qos_class};
use crate::upstream::requests::{Accounting, spec_requests};

/// One resize in the kubelet's pending queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingResize {
    /// What the pod holds once the kubelet admits the resize: its request in the resizing view,
    /// `max(desired, allocated, actual)`.
    pub request: Resources,
    /// Upstream `isResizeIncreasingRequests`: some cpu or memory request grows.
    pub increasing: bool,
    /// `spec.priority`.
    pub priority: i32,
    /// The pod's QoS class is Guaranteed.
    pub guaranteed: bool,
    /// `lastTransitionTime` of the `PodResizePending` condition, if it has one.
    pub since: Option<Timestamp>,
}

impl PendingResize {
    /// The pod's place in the queue, when the kubelet holds its resize as Deferred (Infeasible
    /// resizes are not retried; a terminating pod's room is coming back anyway).
    pub fn of(p: &Pod) -> Option<PendingResize> {
        if !pod::is_resize_deferred(p) || p.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let spec = p.spec.as_ref()?;
        Some(PendingResize::queued(p, spec, p.status.as_ref()))
    }

    /// The place a resize of `pod` to `spec` takes (or will take) in the queue. `status` is the
    /// pod's stored status: its allocation, and its `PodResizePending` time if it has one.
    pub fn queued(pod: &Pod, spec: &PodSpec, status: Option<&PodStatus>) -> PendingResize {
        let desired = spec_requests(spec, None, Accounting::Desired);
        let admitted = spec_requests(spec, status, Accounting::Admitted);
        PendingResize {
            request: spec_requests(spec, status, Accounting::Resizing),
            // Upstream compares the desired requests with the allocated ones; the admitted view
            // is max(allocated, actual), which differs only while a shrink is being actuated.
            increasing: desired.cpu > admitted.cpu || desired.memory > admitted.memory,
            priority: spec.priority.unwrap_or(0),
            guaranteed: current_qos_class(pod) == QosClass::Guaranteed,
            since: status
                .and_then(pod::resize_pending_in)
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0),
        }
    }

    /// True when the kubelet retries `self` before `other`: upstream's comparator returning -1,
    /// including its quirks (a non-increasing resize sorts first even against another
    /// non-increasing one; equal keys put `self` second).
    pub fn retried_before(&self, other: &PendingResize) -> bool {
        if !self.increasing {
            return true;
        }
        if !other.increasing {
            return false;
        }
        match self.priority.cmp(&other.priority) {
            Ordering::Greater => return true,
            Ordering::Less => return false,
            Ordering::Equal => {}
        }
        if self.guaranteed != other.guaranteed {
            return self.guaranteed;
        }
        match (self.since, other.since) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(a), Some(b)) => a < b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::replica_pod;

    fn key(increasing: bool, priority: i32, guaranteed: bool, since: Option<i64>) -> PendingResize {
        PendingResize {
            request: Resources::ZERO,
            increasing,
            priority,
            guaranteed,
            since: since.map(|s| Timestamp::from_second(s).unwrap()),
        }
    }

    #[test]
    fn order_is_non_increasing_then_priority_then_guaranteed_then_oldest() {
        let shrink = key(false, 0, false, None);
        let high = key(true, 100, false, None);
        let low_guaranteed = key(true, 10, true, Some(50));
        let low_old = key(true, 10, false, Some(1));
        let low_new = key(true, 10, false, Some(2));
        let low_none = key(true, 10, false, None);
        let order = [
            &shrink,
            &high,
            &low_guaranteed,
            &low_old,
            &low_new,
            &low_none,
        ];
        for (i, a) in order.iter().enumerate() {
            for b in &order[i + 1..] {
                assert!(a.retried_before(b), "{a:?} before {b:?}");
                assert!(!b.retried_before(a), "{b:?} not before {a:?}");
            }
        }
    }

    #[test]
    fn only_deferred_resizes_are_queued() {
        let base = || {
            replica_pod("ns", "p", "500m", "64Mi", 0)
                .priority(7)
                .resize("c", "cpu", "900m")
        };
        let deferred = base().resize_pending("Deferred", "full").build();
        let q = PendingResize::of(&deferred).unwrap();
        assert_eq!(q.request.cpu, 900);
        assert!(q.increasing && q.guaranteed);
        assert_eq!(q.priority, 7);
        assert!(PendingResize::of(&base().build()).is_none());
        let infeasible = base().resize_pending("Infeasible", "too big").build();
        assert!(PendingResize::of(&infeasible).is_none());
        let leaving = base()
            .resize_pending("Deferred", "full")
            .terminating()
            .build();
        assert!(PendingResize::of(&leaving).is_none());
    }
}
