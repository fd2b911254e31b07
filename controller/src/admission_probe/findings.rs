//! What the probes found so far, where the rest of the program sees it: the metrics
//! (`resize_guard_admission_probe_total{result}`, `resize_guard_admission_probe_bypassed`), the
//! note `/readyz` carries while the latest probe did not reach the webhook, a log line per
//! change (and per error), and a Warning Event on the probed pod when probes start to bypass
//! the webhook.

use std::sync::{Mutex, PoisonError};

use k8s_openapi::api::core::v1::ObjectReference;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use resize_guard_runtime::events::{EventIntent, EventReason};
use resize_guard_runtime::exposition::Exposition;

use super::outcome::{Outcome, RESULTS};

/// The Warning Event's reason on the probed pod when probes start to bypass the webhook.
pub const BYPASSED_REASON: EventReason = EventReason::AdmissionProbeBypassed;

/// Label of the probe counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeResult {
    /// `reached`, `bypassed` or `error`.
    pub result: String,
}

/// The probes' findings (shared by the probe loop and `/readyz`).
#[derive(Debug)]
pub struct Findings {
    /// `namespace/name` of the probed pod, for messages.
    pod: String,
    latest: Mutex<Option<Outcome>>,
    total: Family<ProbeResult, Counter>,
    bypassed: Gauge,
}

impl Findings {
    /// Findings about probes of pod `pod` (`namespace/name`), with their metrics registered in
    /// `exposition` (every `result` series starts at 0).
    pub fn new(pod: &str, exposition: &Exposition) -> Findings {
        let total = Family::<ProbeResult, Counter>::default();
        for result in RESULTS {
            // Created at 0 (the guard is dropped at once).
            drop(total.get_or_create(&ProbeResult {
                result: result.to_owned(),
            }));
        }
        let bypassed = Gauge::default();
        exposition.register_with(|registry| {
            registry.register(
                "admission_probe",
                "Dry-run resizes this replica sent through the API server to see whether they reach the webhook, by result (reached, bypassed: admitted without the webhook, error: no answer to judge by)",
                total.clone(),
            );
            registry.register(
                "admission_probe_bypassed",
                "1 while this replica's latest admission probe was admitted without reaching the webhook (resizes fail open), else 0",
                bypassed.clone(),
            );
        });
        Findings {
            pod: pod.to_owned(),
            latest: Mutex::new(None),
            total,
            bypassed,
        }
    }

    /// Records one probe's outcome: counts it, sets the gauge, logs a change (every error too)
    /// and returns the Event to record — a Warning on `pod` (the probed pod as the API server
    /// returned it) when probes start to bypass the webhook.
    pub fn record(&self, outcome: Outcome, pod: Option<ObjectReference>) -> Option<EventIntent> {
        self.total
            .get_or_create(&ProbeResult {
                result: outcome.result().to_owned(),
            })
            .inc();
        self.bypassed
            .set(i64::from(matches!(outcome, Outcome::Bypassed)));
        // A poisoned lock still holds the last outcome: a panic elsewhere must not stop this.
        let mut latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = latest.as_ref().map(Outcome::result) != Some(outcome.result());
        let pod_name = &self.pod;
        let event = match &outcome {
            Outcome::Reached(a) if changed => {
                tracing::info!(pod = %pod_name, replica = %a.replica, stage = %a.stage,
                    "admission probe: dry-run resizes reach the webhook");
                None
            }
            Outcome::Reached(a) => {
                tracing::debug!(pod = %pod_name, replica = %a.replica, stage = %a.stage,
                    "admission probe reached the webhook");
                None
            }
            Outcome::Bypassed if changed => {
                tracing::warn!(pod = %pod_name, "{}", bypassed_message(pod_name));
                pod.map(|regarding| EventIntent {
                    regarding,
                    related: None,
                    reason: BYPASSED_REASON,
                    action: "Probe".to_owned(),
                    note: bypassed_message(pod_name),
                })
            }
            Outcome::Bypassed => {
                tracing::debug!(pod = %pod_name, "admission probe bypassed the webhook again");
                None
            }
            Outcome::Error(why) => {
                tracing::warn!(pod = %pod_name, reason = %why, "admission probe failed");
                None
            }
        };
        *latest = Some(outcome);
        event
    }

    /// What `/readyz` says while the latest probe did not reach the webhook (`None` while it
    /// did, and before the first probe).
    pub fn note(&self) -> Option<String> {
        let latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        match latest.as_ref()? {
            Outcome::Reached(_) => None,
            Outcome::Bypassed => Some(format!(
                "admission probe bypassed the webhook: {}",
                bypassed_message(&self.pod)
            )),
            Outcome::Error(why) => Some(format!("admission probe failed: {why}")),
        }
    }
}

fn bypassed_message(pod: &str) -> String {
    format!(
        "the API server admitted a dry-run resize of pod {pod} without resize-guard's webhook \
         (failurePolicy Ignore, or no webhook configuration calls it): resizes are not being \
         judged. Check the webhook's pods, Service, NetworkPolicy and caBundle: kubectl \
         resize-guard check"
    )
}

#[cfg(test)]
mod tests {
    use resize_guard_policy::admission_probe::Arrival;
    use resize_guard_runtime::exposition::assert_lines;

    use super::*;

    fn reached() -> Outcome {
        Outcome::Reached(Arrival {
            replica: "w-1".into(),
            stage: "mutate".into(),
        })
    }

    fn pod() -> Option<ObjectReference> {
        Some(ObjectReference {
            namespace: Some("resize-guard".into()),
            name: Some("c-0".into()),
            uid: Some("u".into()),
            ..ObjectReference::default()
        })
    }

    #[test]
    fn the_metrics_have_the_alerts_names_and_follow_each_probe() {
        let exposition = Exposition::new("resize-guard-controller");
        let f = Findings::new("resize-guard/c-0", &exposition);
        assert_lines(
            &exposition.render(),
            &[
                "resize_guard_admission_probe_total{result=\"reached\"} 0",
                "resize_guard_admission_probe_total{result=\"bypassed\"} 0",
                "resize_guard_admission_probe_total{result=\"error\"} 0",
                "resize_guard_admission_probe_bypassed 0",
                "# TYPE resize_guard_admission_probe counter",
                "# TYPE resize_guard_admission_probe_bypassed gauge",
            ],
        );
        f.record(reached(), pod());
        f.record(Outcome::Bypassed, pod());
        f.record(Outcome::Bypassed, pod());
        assert_lines(
            &exposition.render(),
            &[
                "resize_guard_admission_probe_bypassed 1",
                "resize_guard_admission_probe_total{result=\"bypassed\"} 2",
                "resize_guard_admission_probe_total{result=\"reached\"} 1",
            ],
        );
        // An error is not a bypass: the gauge says only what the latest probe saw.
        f.record(Outcome::Error("timeout".into()), None);
        assert_lines(
            &exposition.render(),
            &[
                "resize_guard_admission_probe_bypassed 0",
                "resize_guard_admission_probe_total{result=\"error\"} 1",
            ],
        );
    }

    #[test]
    fn readyz_notes_only_what_did_not_reach_the_webhook() {
        let f = Findings::new("resize-guard/c-0", &Exposition::new("x"));
        assert_eq!(f.note(), None, "no note before the first probe");
        f.record(reached(), pod());
        assert_eq!(f.note(), None);
        f.record(Outcome::Bypassed, pod());
        let note = f.note().unwrap();
        assert!(
            note.starts_with("admission probe bypassed the webhook: the API server admitted a dry-run resize of pod resize-guard/c-0 without")
                && note.contains("kubectl resize-guard check"),
            "{note}"
        );
        f.record(
            Outcome::Error("the API server answered HTTP 403: no".into()),
            None,
        );
        assert_eq!(
            f.note().unwrap(),
            "admission probe failed: the API server answered HTTP 403: no"
        );
        f.record(reached(), pod());
        assert_eq!(f.note(), None);
    }

    #[test]
    fn a_warning_event_marks_each_start_of_bypassing_only() {
        let f = Findings::new("resize-guard/c-0", &Exposition::new("x"));
        let first = f.record(Outcome::Bypassed, pod()).unwrap();
        assert!(first.reason.is_warning());
        assert_eq!(first.reason, BYPASSED_REASON);
        assert_eq!(first.regarding.name.as_deref(), Some("c-0"));
        assert!(
            first.note.contains("pod resize-guard/c-0"),
            "{}",
            first.note
        );
        assert!(
            f.record(Outcome::Bypassed, pod()).is_none(),
            "not again while it lasts"
        );
        assert!(f.record(reached(), pod()).is_none());
        assert!(
            f.record(Outcome::Bypassed, pod()).is_some(),
            "again after a recovery"
        );
        assert!(f.record(Outcome::Error("x".into()), None).is_none());
        assert!(
            f.record(Outcome::Bypassed, pod()).is_some(),
            "after an error too"
        );
        // Without the pod's reference there is nothing to record it on.
        assert!(f.record(reached(), None).is_none());
        assert!(f.record(Outcome::Bypassed, None).is_none());
    }
}
