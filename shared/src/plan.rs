//! The preemption plan recorded on the preemptor (annotation `resize-guard.io/preemption`), so a
//! restarted or newly elected controller resumes the same plan instead of choosing again — the
//! guard against double preemption across restarts that upstream's alpha lacks (KEP-5836
//! "Accept Double Preemption").
//!
//! The controller writes it (a plan with several victims before any of them is touched; a
//! one-victim plan after its eviction, off the critical path); `kubectl resize-guard explain`
//! reads it. Both go through this one type, so they cannot disagree about its format.
//!
//! The annotation sits on a pod its author may edit, so it is untrusted input: the controller
//! seals each record with an HMAC over [`PlanRecord::sealed_message`] (the preemptor's UID and
//! every field) under a key only it can read, acts only on records whose seal verifies, and
//! re-checks every victim against the rules of a fresh plan each time it resumes one. This
//! crate only defines the bytes that are sealed; the key and the HMAC live in the controller.

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
    /// The controller's seal: hex HMAC-SHA256 of [`PlanRecord::sealed_message`]. Empty on a
    /// record nobody sealed (never acted on).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
}

impl PlanRecord {
    /// The plan on a pod, if any and readable (an unreadable one is treated as absent).
    pub fn of(pod: &Pod) -> Option<PlanRecord> {
        PlanRecord::read(pod)?.ok()
    }

    /// The plan annotation on a pod, if present: the record, or why it cannot be read.
    pub fn read(pod: &Pod) -> Option<Result<PlanRecord, String>> {
        let raw = pod.metadata.annotations.as_ref()?.get(PLAN_ANNOTATION)?;
        Some(serde_json::from_str(raw).map_err(|e| format!("it does not parse: {e}")))
    }

    /// The bytes the controller's seal covers: a version tag, the preemptor's UID (a record
    /// copied onto another pod does not verify), the generation, the time and every victim.
    /// Fields are separated by newlines, which none of them can contain.
    pub fn sealed_message(&self, preemptor_uid: &str) -> Vec<u8> {
        let mut m = format!(
            "resize-guard.io/preemption v1\n{preemptor_uid}\n{}\n{}\n",
            self.generation, self.time
        );
        for v in &self.victims {
            m.push_str(&format!("{}\n{}\n{}\n", v.namespace, v.name, v.uid));
        }
        m.into_bytes()
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
            mac: "ab01".into(),
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
        assert!(PlanRecord::read(&pod).unwrap().is_err());
    }

    #[test]
    fn the_sealed_message_binds_the_preemptor_and_every_victim() {
        let key = |name: &str| PodKey {
            namespace: "batch".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
        };
        let rec = PlanRecord {
            generation: 3,
            victims: vec![key("a"), key("b")],
            time: Timestamp::from_second(1_700_000_000).unwrap(),
            mac: String::new(),
        };
        let m = rec.sealed_message("me");
        assert_ne!(m, rec.sealed_message("someone-else"));
        let mut other = rec.clone();
        other.victims[1].uid = "uid-c".into();
        assert_ne!(m, other.sealed_message("me"));
        let mut other = rec.clone();
        other.generation = 4;
        assert_ne!(m, other.sealed_message("me"));
        // The seal itself is not part of what it seals.
        let mut sealed = rec.clone();
        sealed.mac = "00".into();
        assert_eq!(m, sealed.sealed_message("me"));
    }
}
