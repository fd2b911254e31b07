//! resize-guard's own facts about a pod: its key, node, controlling owner, how long its resize has
//! been pending, whether the controller acts on it now, and whether its quantities parse.
//!
//! The small helpers that mirror upstream (priority, criticality, sidecars, the kubelet's resize
//! conditions) live in [`crate::upstream::pod`]; these build on them.

use std::fmt;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::upstream::pod::{REASON_DEFERRED, all_containers, resize_pending};
use crate::upstream::quantity::{QuantityError, parse_nanos};

/// Namespace, name and UID of a pod. Displays as `namespace/name`; serialized with these three
/// field names (the controller records its planned victims this way).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PodKey {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid` (empty for objects not yet stored).
    pub uid: String,
}

impl PodKey {
    /// The key of a pod.
    pub fn of(pod: &Pod) -> Self {
        PodKey {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for PodKey {
    /// `namespace/name`, as `kubectl` and Events name pods.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The node the pod is bound to, if any.
pub fn node_name(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// True when deletion has started (`metadata.deletionTimestamp` is set).
pub fn is_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// Who controls a pod, as far as preemption cares (`metadata.ownerReferences`, the entry with
/// `controller: true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Controller {
    /// No controlling owner: a bare pod, gone for good once preempted.
    None,
    /// A DaemonSet, which recreates the pod on the same node at once.
    DaemonSet,
    /// Anything else (ReplicaSet, StatefulSet, Job, …), which recreates it elsewhere or later.
    #[default]
    Other,
}

/// The pod's controlling owner.
pub fn controller(pod: &Pod) -> Controller {
    let owner = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true));
    match owner {
        None => Controller::None,
        Some(o) if o.kind == "DaemonSet" && o.api_version.starts_with("apps/") => {
            Controller::DaemonSet
        }
        Some(_) => Controller::Other,
    }
}

/// `status.startTime`, which orders pods of equal priority (older is more important).
pub fn start_time(pod: &Pod) -> Option<&Time> {
    pod.status.as_ref().and_then(|s| s.start_time.as_ref())
}

/// How long at `now` the `PodResizePending` condition has held, by its `lastTransitionTime` (the
/// kubelet's wall clock): zero without one, or when it lies in the future.
pub fn resize_pending_for(pod: &Pod, now: Timestamp) -> Duration {
    resize_pending(pod)
        .and_then(|c| c.last_transition_time.as_ref())
        .and_then(|since| Duration::try_from(now.duration_since(since.0)).ok())
        .unwrap_or(Duration::ZERO)
}

/// The stricter test the controller acts on (ARCHITECTURE.md, "controller/"): the first
/// `PodResizePending` condition is `Deferred` with status `True`, it speaks of the current
/// generation when it carries an `observedGeneration` (older kubelets do not), and the pod is bound
/// to a node.
pub fn is_deferred_now(pod: &Pod) -> bool {
    let Some(cond) = resize_pending(pod) else {
        return false;
    };
    let current = match (cond.observed_generation, pod.metadata.generation) {
        (Some(observed), Some(generation)) => observed == generation,
        _ => true,
    };
    cond.reason.as_deref() == Some(REASON_DEFERRED)
        && cond.status == "True"
        && current
        && node_name(pod).is_some()
        && !is_terminating(pod)
}

/// Checks every cpu/memory quantity in the pod's spec is valid syntax, naming the first bad one.
pub fn validate_quantities(pod: &Pod) -> Result<(), QuantityError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    let containers = all_containers(spec).filter_map(|c| c.resources.as_ref());
    for req in containers.chain(spec.resources.as_ref()) {
        for list in [req.requests.as_ref(), req.limits.as_ref()]
            .into_iter()
            .flatten()
        {
            for (name, q) in list {
                if name == "cpu" || name == "memory" {
                    parse_nanos(&q.0)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PodCondition, PodSpec, PodStatus};

    use super::*;
    use crate::upstream::pod::{RESIZE_PENDING, is_resize_deferred};

    fn pod_with_conditions(generation: i64, conds: Vec<PodCondition>) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.generation = Some(generation);
        pod.spec = Some(PodSpec {
            node_name: Some("n1".into()),
            ..Default::default()
        });
        pod.status = Some(PodStatus {
            conditions: Some(conds),
            ..Default::default()
        });
        pod
    }

    fn cond(type_: &str, reason: &str, status: &str, observed: Option<i64>) -> PodCondition {
        PodCondition {
            type_: type_.into(),
            reason: Some(reason.into()),
            status: status.into(),
            observed_generation: observed,
            ..Default::default()
        }
    }

    #[test]
    fn deferred_requires_current_generation_true_status_and_a_node() {
        let p = pod_with_conditions(3, vec![cond(RESIZE_PENDING, "Deferred", "True", Some(3))]);
        assert!(is_deferred_now(&p));
        let stale = pod_with_conditions(4, vec![cond(RESIZE_PENDING, "Deferred", "True", Some(3))]);
        assert!(!is_deferred_now(&stale));
        assert!(
            is_resize_deferred(&stale),
            "upstream ignores the generation"
        );
        let false_status =
            pod_with_conditions(3, vec![cond(RESIZE_PENDING, "Deferred", "False", Some(3))]);
        assert!(!is_deferred_now(&false_status));
        let mut unbound = p.clone();
        unbound.spec = Some(PodSpec::default());
        assert!(!is_deferred_now(&unbound));
    }

    #[test]
    fn deferred_without_observed_generation_is_accepted_for_older_kubelets() {
        let p = pod_with_conditions(3, vec![cond(RESIZE_PENDING, "Deferred", "True", None)]);
        assert!(is_deferred_now(&p));
    }

    #[test]
    fn only_the_first_resize_pending_condition_counts_like_upstream() {
        let p = pod_with_conditions(
            1,
            vec![
                cond(RESIZE_PENDING, "Infeasible", "True", Some(1)),
                cond(RESIZE_PENDING, "Deferred", "True", Some(1)),
            ],
        );
        assert!(!is_deferred_now(&p));
    }
}
