//! The preemption plan recorded on the preemptor (annotation `resize-guard.io/preemption`), so a
//! restarted or newly elected controller resumes the same plan instead of choosing again — the
//! guard against double preemption across restarts that upstream's alpha lacks (KEP-5836
//! "Accept Double Preemption").
//!
//! The controller writes it (a plan with several victims before any of them is touched; a
//! one-victim plan after its eviction, off the critical path); `kubectl resize-guard explain`
//! reads it. Both go through this one type, so they cannot disagree about its format.

use crate::pod::PodKey;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The annotation holding the plan.
pub const PLAN_ANNOTATION: &str = "resize-guard.io/preemption";

/// A recorded plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRecord {
    /// The preemptor's `metadata.generation` the plan was made for.
    pub generation: i64,
    /// Victims, by namespace, name and UID (a recreated pod of the same name is not the victim).
    pub victims: Vec<PodKey>,
    /// When the plan was made.
    pub time: Timestamp,
}

impl PlanRecord {
    /// The plan on a pod, if any and readable (an unreadable one is treated as absent).
    pub fn of(pod: &Pod) -> Option<PlanRecord> {
        let raw = pod.metadata.annotations.as_ref()?.get(PLAN_ANNOTATION)?;
        serde_json::from_str(raw).ok()
    }

    /// The annotation value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_annotation() {
        let rec = PlanRecord {
            generation: 2,
            victims: vec![PodKey {
                namespace: "batch".into(),
                name: "filler".into(),
                uid: "u1".into(),
            }],
            time: Timestamp::from_second(1_700_000_000).unwrap(),
        };
        let mut pod = Pod::default();
        pod.metadata.annotations = Some([(PLAN_ANNOTATION.to_owned(), rec.to_annotation())].into());
        assert_eq!(PlanRecord::of(&pod), Some(rec));
    }

    #[test]
    fn garbage_annotations_are_ignored_not_fatal() {
        let mut pod = Pod::default();
        pod.metadata.annotations = Some([(PLAN_ANNOTATION.to_owned(), "{oops".to_owned())].into());
        assert_eq!(PlanRecord::of(&pod), None);
    }
}
