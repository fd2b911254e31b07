//! The preemption plan recorded on the preemptor (annotation `resize-guard.io/preemption`), so a
//! restarted or newly elected controller resumes the same plan instead of choosing again — the
//! guard against double preemption across restarts that upstream's alpha lacks (KEP-5836
//! "Accept Double Preemption").
//!
//! The controller writes it (a plan with several victims before any of them is touched; a
//! one-victim plan after its eviction, off the critical path); `kubectl resize-guard explain`
//! reads its clear part. Both go through these types, so they cannot disagree about its format.
//!
//! **Who may read what.** The annotation is readable by whoever may read the preemptor, so it
//! names no pod of another namespace: [`SealedPlan`] (format [`PLAN_FORMAT`]) holds in clear
//! only what the preemptor's namespace may see — the generation, the time, how many victims
//! there are and the names of those in the preemptor's own namespace (as
//! `crate::audience::Audience::Namespace` would list them). The full victim list (namespace,
//! name, UID) is encrypted under a key only the controller can read, with the clear part and
//! the preemptor's UID as associated data, so the AEAD's tag seals every field and binds the
//! record to its pod. [`PlanRecord`] is the opened plan, in the controller's memory only.
//!
//! The annotation sits on a pod its author may edit, so it is untrusted input: the controller
//! acts only on records that open under its key, and re-checks every victim against the rules
//! of a fresh plan each time it resumes one. This crate only defines the formats and the bytes
//! that are bound; the key and the cipher live in the controller
//! (`controller/src/preemption/seal.rs`).

use crate::pod::PodKey;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// The annotation holding the plan.
pub const PLAN_ANNOTATION: &str = "resize-guard.io/preemption";

/// The record format written now (`"v": 2`). Format 1 (victims in clear, an HMAC beside them)
/// has no `v` and is refused as unreadable.
pub const PLAN_FORMAT: u32 = 2;

/// An opened plan: what the controller decided, in its memory only (never written in clear).
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
    /// The names of the victims in `namespace` (the preemptor's), in plan order.
    pub fn names_in(&self, namespace: &str) -> Vec<String> {
        self.victims
            .iter()
            .filter(|v| v.namespace == namespace)
            .map(|v| v.name.clone())
            .collect()
    }
}

/// The annotation's value: the clear part the preemptor's namespace may read, and the sealed
/// victim list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealedPlan {
    /// The format, [`PLAN_FORMAT`].
    pub v: u32,
    /// The preemptor's `metadata.generation` the plan was made for.
    pub generation: i64,
    /// When the plan was made.
    pub time: Timestamp,
    /// How many victims the plan has, in every namespace.
    pub count: usize,
    /// The names of the victims in the preemptor's own namespace, in plan order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub own: Vec<String>,
    /// The AEAD nonce, hex.
    pub nonce: String,
    /// The victim list (JSON array of namespace/name/uid) encrypted, with the tag, hex.
    pub sealed: String,
}

impl SealedPlan {
    /// The clear part on a pod, if any and readable (an unreadable one is treated as absent).
    pub fn of(pod: &Pod) -> Option<SealedPlan> {
        SealedPlan::read(pod)?.ok()
    }

    /// The plan annotation on a pod, if present: the record, or why it cannot be read.
    pub fn read(pod: &Pod) -> Option<Result<SealedPlan, String>> {
        let raw = pod.metadata.annotations.as_ref()?.get(PLAN_ANNOTATION)?;
        Some(SealedPlan::parse(raw))
    }

    /// A record from the annotation's value. A record of another format (format 1 had victims
    /// in clear and no `v`) is an error, not a guess.
    pub fn parse(raw: &str) -> Result<SealedPlan, String> {
        #[derive(Deserialize)]
        struct Version {
            #[serde(default)]
            v: Option<u32>,
        }
        let version: Version =
            serde_json::from_str(raw).map_err(|e| format!("it does not parse: {e}"))?;
        if version.v != Some(PLAN_FORMAT) {
            return Err(match version.v {
                None => format!(
                    "it is in an older format (no \"v\"; this controller reads \"v\": {PLAN_FORMAT})"
                ),
                Some(v) => {
                    format!("it is format {v}; this controller reads \"v\": {PLAN_FORMAT}")
                }
            });
        }
        serde_json::from_str(raw).map_err(|e| format!("it does not parse: {e}"))
    }

    /// The bytes the AEAD's tag binds besides the victims: the format, the preemptor's UID (a
    /// record copied onto another pod does not open), the generation, the time, the count and
    /// the own-namespace names. Fields are separated by newlines, which none of them can
    /// contain (a name is a DNS subdomain).
    pub fn associated_data(&self, preemptor_uid: &str) -> Vec<u8> {
        let mut m = format!(
            "resize-guard.io/preemption v{}\n{preemptor_uid}\n{}\n{}\n{}\n",
            self.v, self.generation, self.time, self.count
        );
        for name in &self.own {
            m.push_str(name);
            m.push('\n');
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
    use crate::fixture::pod_key as key;

    fn sealed() -> SealedPlan {
        SealedPlan {
            v: PLAN_FORMAT,
            generation: 2,
            time: Timestamp::from_second(1_700_000_000).unwrap(),
            count: 2,
            own: vec!["mine".into()],
            nonce: "00".into(),
            sealed: "ab01".into(),
        }
    }

    fn pod_with(raw: &str) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.annotations = Some([(PLAN_ANNOTATION.to_owned(), raw.to_owned())].into());
        pod
    }

    #[test]
    fn round_trips_through_the_annotation() {
        let rec = sealed();
        assert_eq!(SealedPlan::of(&pod_with(&rec.to_annotation())), Some(rec));
    }

    #[test]
    fn garbage_and_old_format_annotations_are_ignored_not_fatal() {
        let pod = pod_with("{oops");
        assert_eq!(SealedPlan::of(&pod), None);
        assert!(SealedPlan::read(&pod).unwrap().is_err());
        let v1 = r#"{"generation":2,"victims":[{"namespace":"batch","name":"f","uid":"u"}],"time":"2026-12-01T10:00:00Z","mac":"ab"}"#;
        let why = SealedPlan::read(&pod_with(v1)).unwrap().unwrap_err();
        assert!(why.contains("older format"), "{why}");
        let v3 = sealed().to_annotation().replace("\"v\":2", "\"v\":3");
        let why = SealedPlan::read(&pod_with(&v3)).unwrap().unwrap_err();
        assert!(why.contains("format 3"), "{why}");
    }

    #[test]
    fn the_clear_part_names_only_own_namespace_victims() {
        let rec = PlanRecord {
            generation: 2,
            victims: vec![key("shop", "a"), key("batch", "b"), key("shop", "c")],
            time: Timestamp::from_second(1_700_000_000).unwrap(),
        };
        assert_eq!(rec.names_in("shop"), ["a", "c"]);
        assert_eq!(rec.names_in("batch"), ["b"]);
        assert!(rec.names_in("other").is_empty());
    }

    #[test]
    fn the_associated_data_binds_the_preemptor_and_every_clear_field() {
        let rec = sealed();
        let m = rec.associated_data("me");
        assert_ne!(m, rec.associated_data("someone-else"));
        let changed: [fn(&mut SealedPlan); 4] = [
            |r| r.generation = 3,
            |r| r.count = 3,
            |r| r.own = vec!["other".into()],
            |r| r.time = Timestamp::from_second(1_700_000_001).unwrap(),
        ];
        for change in changed {
            let mut other = rec.clone();
            change(&mut other);
            assert_ne!(m, other.associated_data("me"), "{other:?}");
        }
    }
}
