//! Answering the admission probe (`resize_guard_policy::admission_probe`): a dry-run resize by
//! resize-guard's own controller (or post-install check) of a pod in resize-guard's namespace is
//! allowed unjudged with one warning naming this replica and the stage, and nothing else — no
//! patch, no Event (dry run), no usage read. Any other request, a tenant's dry run included, is
//! judged as always and never gets that warning.

use std::sync::OnceLock;

use resize_guard_policy::admission_probe::{is_probe, note};

use super::{Resize, Reviewed, Stage, finish, response};

/// The decision label (metrics, the `decision` audit annotation) of an answered probe.
pub const DECISION: &str = "probe";

/// This process's replica name, as the probe's answer names it.
static REPLICA: OnceLock<String> = OnceLock::new();

/// Names this replica in probe answers (`--instance`, else the host name: the pod's name). The
/// first name given stays; before one is given, answers say `unnamed`.
pub fn name_replica(name: &str) {
    let _ = REPLICA.get_or_init(|| name.to_owned());
}

fn replica() -> &'static str {
    REPLICA.get().map_or("unnamed", String::as_str)
}

/// The answer to `resize` if it is a probe of `install_namespace`.
pub(super) fn answer(resize: &Resize, install_namespace: &str) -> Option<Reviewed> {
    let asked = &resize.asked;
    if !is_probe(
        resize.dry_run,
        &asked.user,
        &asked.namespace,
        install_namespace,
    ) {
        return None;
    }
    Some(answered(resize.stage, &resize.uid))
}

fn answered(stage: Stage, uid: &str) -> Reviewed {
    let mut resp = response(uid);
    resp.warnings = Some(vec![note(replica(), stage.name())]);
    resp.audit_annotations = [("decision".to_owned(), DECISION.to_owned())].into();
    finish(resp, DECISION.to_owned(), None, uid.to_owned())
}

#[cfg(test)]
mod tests {
    use resize_guard_cluster::FixedCluster;
    use resize_guard_policy::admission_probe::arrival;
    use resize_guard_policy::policy::Policy;

    use super::super::review;
    use super::*;

    fn body(dry_run: bool, user: &str, namespace: &str) -> Vec<u8> {
        let pod = serde_json::json!({
            "metadata": {"name": "resize-guard-controller-0", "namespace": namespace, "uid": "p1"},
            "spec": {"containers": [{"name": "controller"}]}
        });
        serde_json::to_vec(&serde_json::json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "u1", "operation": "UPDATE", "subResource": "resize",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "name": "resize-guard-controller-0", "namespace": namespace,
                "dryRun": dry_run, "userInfo": {"username": user},
                "object": pod, "oldObject": pod
            }
        }))
        .unwrap()
    }

    fn warnings(r: &Reviewed) -> Vec<String> {
        let v = serde_json::to_value(&r.review).unwrap();
        v["response"]["warnings"]
            .as_array()
            .map(|w| w.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default()
    }

    const CONTROLLER: &str = "system:serviceaccount:resize-guard:resize-guard-controller";

    #[test]
    fn a_probe_is_allowed_with_the_note_and_nothing_else_at_either_stage() {
        // No policy in force: a probe is answered all the same (reaching resize-guard is the
        // question, not what it would decide).
        let cluster = FixedCluster::new(Policy::default(), vec![], vec![], vec![]);
        for stage in [Stage::Mutate, Stage::Validate] {
            let r = review(stage, &body(true, CONTROLLER, "resize-guard"), &cluster).unwrap();
            assert!(r.allowed);
            assert_eq!(r.decision, DECISION);
            assert!(r.event.is_none() && !r.wants_usage && r.usage_of.is_none());
            let w = warnings(&r);
            assert_eq!(w.len(), 1, "{w:?}");
            let got = arrival(w.iter().map(String::as_str)).unwrap();
            assert_eq!(got.stage, stage.name());
            let v = serde_json::to_value(&r.review).unwrap();
            assert!(v["response"]["patch"].is_null(), "{v}");
            assert_eq!(v["response"]["uid"], "u1");
        }
    }

    #[test]
    fn anything_else_is_judged_and_never_gets_the_note() {
        let cluster = FixedCluster::new(Policy::default(), vec![], vec![], vec![]);
        for (dry_run, user, ns) in [
            // A real resize by the controller in its own namespace.
            (false, CONTROLLER, "resize-guard"),
            // A tenant's dry run, in its namespace and (were it allowed) in resize-guard's.
            (true, "alice", "shop"),
            (true, "alice", "resize-guard"),
            // A tenant's own account named like the controller's.
            (
                true,
                "system:serviceaccount:shop:resize-guard-controller",
                "shop",
            ),
            // The controller's dry run of a tenant's pod.
            (true, CONTROLLER, "shop"),
        ] {
            let r = review(Stage::Mutate, &body(dry_run, user, ns), &cluster).unwrap();
            assert_ne!(r.decision, DECISION, "{user} in {ns}");
            let w = warnings(&r);
            assert!(
                arrival(w.iter().map(String::as_str)).is_none(),
                "{user} in {ns}: {w:?}"
            );
        }
    }
}
