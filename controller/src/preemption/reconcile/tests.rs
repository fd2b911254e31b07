//! The course of a decision against a fake API server (tower-test, as kube-rs's controller-rs
//! tests its reconciler): the brakes, the actuator and the decisions their outcomes lead to —
//! the requests made, in order, for each kind of decision and each answer the API server can
//! give, and none once leadership is gone.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, StatusCode};
use kube::runtime::events::Reporter;
use serde_json::{Value, json};

use super::*;
use crate::lease::fence::{Fenced, Leadership};
use crate::metrics::Metrics;
use crate::preemption::actuator::{Actuator, WriteError};
use crate::preemption::brakes::Limits;
use crate::preemption::decision::Decision;
use crate::preemption::decision::{NODE_BUSY_WAIT, REPLAN_WAIT, Record, Removal, SHORT_WAIT, Via};
use crate::preemption::seal::PLAN_ANNOTATION;
use crate::preemption::seal::PlanRecord;
use crate::tests::{Log, Seen, fake_api};
use resize_guard_policy::pod::PodKey;
use resize_guard_runtime::Events;

/// The writes [`writes`] lists: the preemptor's plan record (written or cleared), each
/// victim's eviction (or delete) and its `DisruptionTarget` mark.
const PATCH_APP: &str = "PATCH /api/v1/namespaces/prod/pods/app";
const EVICT_V1: &str = "POST /api/v1/namespaces/batch/pods/v1/eviction";
const MARK_V1: &str = "PATCH /api/v1/namespaces/batch/pods/v1/status";
const EVICT_V2: &str = "POST /api/v1/namespaces/batch/pods/v2/eviction";
const MARK_V2: &str = "PATCH /api/v1/namespaces/batch/pods/v2/status";
const DELETE_V1: &str = "DELETE /api/v1/namespaces/batch/pods/v1";

type Answer = Box<dyn FnMut(&Seen) -> (StatusCode, Value) + Send>;

/// A fake API server answering with `answer`; returns the client and the requests seen.
fn fake(answer: Answer) -> (kube::Client, Log) {
    let (service, seen) = fake_api(answer);
    // The retry layer production puts on kube's stack (`resize_guard_runtime::api_client`).
    let service = tower::ServiceBuilder::new()
        .layer(resize_guard_runtime::api_client::layer())
        .map_err(tower::BoxError::from)
        .service(service);
    (kube::Client::new(service, "default"), seen)
}

/// The Eviction API's refusal under a PodDisruptionBudget, as kube-apiserver words it.
fn budget_refusal() -> (StatusCode, Value) {
    (
        StatusCode::TOO_MANY_REQUESTS,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
               "reason": "TooManyRequests",
               "message": "Cannot evict pod as it would violate the pod's disruption budget.",
               "details": {"causes": [{"reason": "DisruptionBudget",
                   "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]}}),
    )
}

fn status(code: u16, reason: &str) -> (StatusCode, Value) {
    (
        StatusCode::from_u16(code).unwrap(),
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
               "reason": reason, "message": format!("fake: {reason}")}),
    )
}

/// What a successful write answers: a pod (for pod writes) or a Status.
fn ok(seen: &Seen) -> (StatusCode, Value) {
    if seen.path.contains("/events") {
        return (
            StatusCode::CREATED,
            json!({"kind": "Event", "apiVersion": "events.k8s.io/v1",
            "metadata": {"name": "e", "namespace": "prod"}, "eventTime": "2026-12-01T00:00:00.000000Z"}),
        );
    }
    if seen.path.ends_with("/eviction") || seen.method == Method::DELETE {
        return (
            StatusCode::CREATED,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success"}),
        );
    }
    let name = seen
        .path
        .trim_end_matches("/status")
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    (
        StatusCode::OK,
        json!({"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": "prod"}}),
    )
}

/// Refuses requests whose path ends with `suffix` with `refusal`; answers the rest as [`ok`].
fn refusing(suffix: &'static str, refusal: (StatusCode, Value)) -> Answer {
    Box::new(move |s: &Seen| {
        if s.path.ends_with(suffix) {
            refusal.clone()
        } else {
            ok(s)
        }
    })
}

/// The course of a replica that leads for good, on a fake API server answering with `answer`;
/// with the requests seen.
fn leading(answer: Answer) -> (Course, Log) {
    let (client, seen) = fake(answer);
    (course(client, Leadership::forever()), seen)
}

fn course(client: kube::Client, leadership: Leadership) -> Course {
    let actuator = Actuator {
        events: Events::start(
            client.clone(),
            Reporter {
                controller: "test".into(),
                instance: None,
            },
        ),
        client,
        metrics: Arc::new(Metrics::new()),
        leadership,
        seal: Arc::new(crate::preemption::seal::PlanSeal::fixed(&[7; 32])),
    };
    Course {
        actuator,
        brakes: Arc::new(crate::preemption::brakes::Brakes::new()),
        waits: Arc::new(crate::preemption::decision::Waits::new()),
    }
}

fn preemptor() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "app", "namespace": "prod", "uid": "u-app", "generation": 2},
        "spec": {"nodeName": "n1", "priority": 1000, "containers": [{"name": "app"}]}
    }))
    .unwrap()
}

fn removal(name: &str, via: Via) -> Removal {
    Removal {
        victim: PodKey {
            namespace: "batch".into(),
            name: name.into(),
            uid: format!("u-{name}"),
        },
        grace_seconds: 7,
        via,
    }
}

fn plan(victims: &[Removal]) -> PlanRecord {
    PlanRecord {
        generation: 2,
        victims: victims.iter().map(|r| r.victim.clone()).collect(),
        time: k8s_openapi::jiff::Timestamp::from_second(1_000).unwrap(),
    }
}

/// The policy's default limits on preemption.
fn default_limits() -> Limits {
    Limits::of(&resize_guard_policy::policy::Policy::default())
}

/// A plan to preempt `victims` under `limits`, its record `record`.
fn preemption(record: Record, victims: Vec<Removal>, limits: Limits) -> Decision {
    Decision::Preempt {
        record,
        victims,
        note: "n".into(),
        limits,
        pending_on_node: 1,
        after: SHORT_WAIT,
    }
}

/// A fresh one-victim plan evicting `name` under `limits`.
fn one(name: &str, limits: Limits) -> Decision {
    let victims = vec![removal(name, Via::Eviction)];
    preemption(Record::After(plan(&victims)), victims, limits)
}

/// The preemptor's twin `uid` on `node`.
fn on(node: &str, uid: &str) -> Pod {
    let mut p = preemptor();
    p.metadata.uid = Some(uid.into());
    p.metadata.name = Some(uid.into());
    p.spec.as_mut().unwrap().node_name = Some(node.into());
    p
}

/// Carries out a plan to preempt `victims`.
async fn preempt(
    a: &Course,
    record: Record,
    victims: Vec<Removal>,
) -> Result<Action, ActuateError> {
    a.run(&preemptor(), preemption(record, victims, default_limits()))
        .await
}

/// A fresh plan evicting v1 then v2, recorded before (what a multi-victim plan does).
async fn preempt_two(a: &Course) -> Action {
    let victims = vec![removal("v1", Via::Eviction), removal("v2", Via::Eviction)];
    preempt(a, Record::Before(plan(&victims)), victims)
        .await
        .unwrap()
}

/// The requests other than Event posts (published off the critical path, in any order).
fn writes(seen: &Log) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|s| !s.path.contains("/events"))
        .map(Seen::line)
        .collect()
}

fn events(seen: &Log) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|s| s.path.contains("/events"))
        .map(|s| s.body["reason"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Once the Events are out: the one Event, a Warning `WriteForbidden` that names `grant`, the
/// part of `deploy/` holding the missing permission.
async fn forbidden(seen: &Log, grant: &str) -> Value {
    settle().await;
    assert_eq!(events(seen), ["WriteForbidden"]);
    let event = events_of(seen, "WriteForbidden").swap_remove(0);
    assert_eq!(event["type"], "Warning");
    let note = event["note"].as_str().unwrap_or_default();
    assert!(note.contains(grant), "{note}");
    event
}

/// The bodies of the Events with `reason` posted so far.
fn events_of(seen: &Log, reason: &str) -> Vec<Value> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|s| s.path.contains("/events") && s.body["reason"] == reason)
        .map(|s| s.body.clone())
        .collect()
}

/// Lets spawned Event publishes run.
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
}

#[tokio::test]
async fn a_multi_victim_plan_is_recorded_then_each_victim_evicted_and_marked() {
    let (a, seen) = leading(Box::new(ok));
    let action = preempt_two(&a).await;
    assert_eq!(action, Action::requeue(SHORT_WAIT));
    assert_eq!(
        writes(&seen),
        [PATCH_APP, EVICT_V1, MARK_V1, EVICT_V2, MARK_V2]
    );
    let log = seen.lock().unwrap().clone();
    // A JSON Patch over what was read (no annotations at all): the UID, then the map tested.
    let plan_patch = &log[0].body;
    assert_eq!(
        plan_patch[0],
        json!({"op": "test", "path": "/metadata/uid", "value": "u-app"})
    );
    assert_eq!(
        plan_patch[1],
        json!({"op": "test", "path": "/metadata/annotations", "value": null})
    );
    assert_eq!(plan_patch[2]["op"], "add");
    // Both victims are in another namespace than the preemptor's: the annotation counts them,
    // names neither, and opens under the controller's key to exactly them.
    let value = plan_patch[2]["value"][crate::preemption::seal::PLAN_ANNOTATION]
        .as_str()
        .unwrap();
    for hidden in ["batch", "v1", "v2", "u-v1", "u-v2"] {
        assert!(!value.contains(hidden), "{hidden} in {value}");
    }
    let mut app: Pod = serde_json::from_value(json!({
        "metadata": {"name": "app", "namespace": "prod", "uid": "u-app"}
    }))
    .unwrap();
    app.metadata.annotations = Some(
        [(
            crate::preemption::seal::PLAN_ANNOTATION.to_owned(),
            value.to_owned(),
        )]
        .into(),
    );
    let key = crate::preemption::seal::PlanKey::new(&[7; 32]).unwrap();
    let opened = crate::preemption::seal::verified(&key, &app)
        .unwrap()
        .unwrap();
    let names: Vec<&str> = opened.victims.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["v1", "v2"]);
    assert!(value.contains("\"count\":2"), "{value}");
    let eviction = log
        .iter()
        .find(|s| s.path.ends_with("v1/eviction"))
        .unwrap();
    assert_eq!(eviction.body["deleteOptions"]["gracePeriodSeconds"], 7);
    assert_eq!(
        eviction.body["deleteOptions"]["preconditions"]["uid"],
        "u-v1"
    );
    let mark = log.iter().find(|s| s.path.ends_with("v1/status")).unwrap();
    assert_eq!(mark.body["metadata"]["uid"], "u-v1");
    assert_eq!(
        mark.body["status"]["conditions"][0]["reason"],
        "PreemptionByResizeGuard"
    );
    settle().await;
    let mut evs = events(&seen);
    evs.sort();
    assert_eq!(evs, ["Preempted", "Preempted", "PreemptingForResize"]);
}

#[tokio::test]
async fn a_one_victim_plan_is_recorded_after_its_eviction() {
    let (a, seen) = leading(Box::new(ok));
    let victims = vec![removal("v1", Via::Eviction)];
    preempt(&a, Record::After(plan(&victims)), victims)
        .await
        .unwrap();
    assert_eq!(writes(&seen), [EVICT_V1, MARK_V1, PATCH_APP]);
}

#[tokio::test]
async fn a_budget_refusal_clears_the_plan_and_touches_no_further_victim() {
    let (a, seen) = leading(refusing("v1/eviction", budget_refusal()));
    let action = preempt_two(&a).await;
    assert_eq!(action, Action::requeue(REPLAN_WAIT));
    assert_eq!(writes(&seen), [PATCH_APP, EVICT_V1, PATCH_APP]);
    // The clear tests for the record this very plan wrote (not for the pod as first read,
    // which had none), then removes it.
    let log = seen.lock().unwrap().clone();
    let recorded = log[0].body[2]["value"][crate::preemption::seal::PLAN_ANNOTATION].clone();
    let path = "/metadata/annotations/resize-guard.io~1preemption";
    assert_eq!(
        log[2].body,
        json!([
            {"op": "test", "path": "/metadata/uid", "value": "u-app"},
            {"op": "test", "path": path, "value": recorded},
            {"op": "remove", "path": path},
        ])
    );
    assert!(
        a.actuator
            .metrics
            .render()
            .contains("outcome=\"pdb_blocked\"")
    );
    settle().await;
    assert_eq!(events(&seen), ["PreemptionReplanned"]);
    let note = seen
        .lock()
        .unwrap()
        .iter()
        .find(|s| s.path.contains("/events"))
        .map(|s| s.body["note"].as_str().unwrap_or_default().to_owned())
        .unwrap();
    assert!(note.contains("needs 2 healthy pods"), "{note}");
}

#[tokio::test]
async fn a_throttled_eviction_is_asked_once_and_the_plan_kept_for_later() {
    // API Priority and Fairness: 429 with Retry-After, a plain-text body, no budget cause.
    let (a, seen) = leading(refusing("/eviction", status(429, "TooManyRequests")));
    let action = preempt_two(&a).await;
    assert_eq!(
        action,
        Action::requeue(crate::preemption::decision::THROTTLE_WAIT)
    );
    // The plan stays recorded (no clearing patch), the eviction was sent once (not retried by
    // the client), and nothing counts as fenced.
    assert_eq!(writes(&seen), [PATCH_APP, EVICT_V1]);
    let metrics = a.actuator.metrics.render();
    assert!(metrics.contains("outcome=\"throttled\""), "{metrics}");
    assert!(
        metrics.contains("resize_guard_fenced_writes_total 0"),
        "{metrics}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_throttled_plan_record_is_retried_by_the_client_and_the_plan_goes_on() {
    let mut throttled = false;
    let (a, seen) = leading(Box::new(move |s: &Seen| {
        if s.method == Method::PATCH && s.path.ends_with("pods/app") && !throttled {
            throttled = true;
            status(429, "TooManyRequests")
        } else {
            ok(s)
        }
    }));

    let action = preempt_two(&a).await;
    assert_eq!(action, Action::requeue(SHORT_WAIT));
    assert_eq!(writes(&seen)[..3], [PATCH_APP, PATCH_APP, EVICT_V1]);
}

#[tokio::test]
async fn best_effort_marks_then_deletes_with_the_uid_precondition_and_grace() {
    let (a, seen) = leading(Box::new(ok));
    let victims = vec![removal("v1", Via::Delete)];
    preempt(&a, Record::Recorded, victims).await.unwrap();
    assert_eq!(writes(&seen), [MARK_V1, DELETE_V1]);
    let delete = seen.lock().unwrap()[1].clone();
    assert_eq!(delete.body["gracePeriodSeconds"], 7);
    assert_eq!(delete.body["preconditions"]["uid"], "u-v1");
}

#[tokio::test]
async fn a_victim_already_gone_or_replaced_is_skipped_and_the_plan_goes_on() {
    let (a, seen) = leading(Box::new(|s: &Seen| {
        if s.path.ends_with("gone/eviction") {
            status(404, "NotFound")
        } else if s.path.ends_with("replaced/eviction") {
            // The UID precondition failed: a new pod of that name.
            status(409, "Conflict")
        } else {
            ok(s)
        }
    }));

    let victims = vec![
        removal("gone", Via::Eviction),
        removal("replaced", Via::Eviction),
        removal("v3", Via::Eviction),
    ];
    preempt(&a, Record::Recorded, victims).await.unwrap();
    assert_eq!(
        writes(&seen),
        [
            "POST /api/v1/namespaces/batch/pods/gone/eviction",
            "POST /api/v1/namespaces/batch/pods/replaced/eviction",
            "POST /api/v1/namespaces/batch/pods/v3/eviction",
            "PATCH /api/v1/namespaces/batch/pods/v3/status",
        ]
    );
    assert!(
        a.actuator
            .metrics
            .render()
            .contains("resize_guard_victims_total 1")
    );
}

#[tokio::test]
async fn losing_the_lease_mid_plan_stops_every_later_write_events_included() {
    let leadership = Leadership::forever();
    let fence = leadership.clone();
    let (client, seen) = fake(Box::new(move |s: &Seen| {
        if s.path.ends_with("v1/eviction") {
            // The Lease is lost while the first eviction is being answered.
            fence.revoke();
        }
        ok(s)
    }));
    let a = course(client, leadership);
    let victims = vec![removal("v1", Via::Eviction), removal("v2", Via::Eviction)];
    let err = preempt(&a, Record::Recorded, victims).await.unwrap_err();
    assert_eq!(err.reason(), "NotLeader", "{}", err.chain());
    settle().await;
    assert_eq!(writes(&seen), [EVICT_V1]);
    assert!(events(&seen).is_empty(), "{:?}", events(&seen));
    assert!(
        a.actuator
            .metrics
            .render()
            .contains("resize_guard_fenced_writes_total 1"),
        "{}",
        a.actuator.metrics.render()
    );
}

#[tokio::test]
async fn the_requeue_is_the_decisions_own() {
    let (a, _seen) = leading(Box::new(ok));
    let failed = Decision::Failed {
        reason: "NoVictims",
        note: "n".into(),
        after: Duration::from_secs(42),
    };
    let action = a.run(&preemptor(), failed).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(42)));
    let audit = Decision::WouldPreempt {
        note: "n".into(),
        after: Duration::from_secs(7),
    };
    let action = a.run(&preemptor(), audit).await.unwrap();
    assert_eq!(action, Action::requeue(Duration::from_secs(7)));
    let action = a.run(&preemptor(), Decision::Idle).await.unwrap();
    assert_eq!(action, Action::await_change());
}

mod claims;
mod conflicts;
mod withheld;

/// kube-apiserver's RBAC refusal, as it words it for the controller's ServiceAccount.
fn rbac_refusal(verb: &str, resource: &str) -> (StatusCode, Value) {
    (
        StatusCode::FORBIDDEN,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 403,
               "reason": "Forbidden",
               "message": format!("pods \"v1\" is forbidden: User \"system:serviceaccount:resize-guard:resize-guard-controller\" cannot {verb} resource \"{resource}\" in API group \"\" in the namespace \"batch\"")}),
    )
}

#[tokio::test]
async fn a_forbidden_delete_stops_the_plan_and_says_which_grant_is_missing() {
    // pdb: bestEffort without deploy/components/best-effort-deletes.
    let (a, seen) = leading(Box::new(|s: &Seen| {
        if s.method == Method::DELETE {
            rbac_refusal("delete", "pods")
        } else {
            ok(s)
        }
    }));
    let victims = vec![removal("v1", Via::Delete), removal("v2", Via::Delete)];
    let e = preempt(&a, Record::Before(plan(&victims)), victims)
        .await
        .unwrap_err();
    assert_eq!(e.reason(), "Forbidden");
    // Nothing after the refused DELETE: no second victim.
    assert_eq!(writes(&seen), [PATCH_APP, MARK_V1, DELETE_V1]);
    let metrics = a.actuator.metrics.render();
    assert!(metrics.contains("outcome=\"forbidden\""), "{metrics}");
    assert!(!metrics.contains("outcome=\"error\""), "{metrics}");
    let event = forbidden(&seen, "deploy/components/best-effort-deletes").await;
    assert_eq!(event["regarding"]["name"], "app");
    let note = event["note"].as_str().unwrap();
    assert!(note.contains("cannot delete resource"), "{note}");
}

#[tokio::test]
async fn a_forbidden_revert_says_which_grant_is_missing() {
    // feasibility.revertInfeasible without deploy/components/revert-infeasible.
    let (a, seen) = leading(refusing("/resize", rbac_refusal("patch", "pods/resize")));
    let e = a
        .run(
            &preemptor(),
            Decision::Revert {
                patch: json!({"spec": {"containers": [{"name": "app"}]}}),
                note: "n".into(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(e.reason(), "Forbidden");
    assert!(
        a.actuator
            .metrics
            .render()
            .contains("outcome=\"forbidden\"")
    );
    let event = forbidden(&seen, "deploy/components/revert-infeasible").await;
    let note = event["note"].as_str().unwrap();
    assert!(note.contains("reverting the Infeasible resize"), "{note}");
}

/// Events and conditions are read by their pod's namespace: the preemptor's `prod` sees its
/// victim of `batch` counted, the victim's `batch` sees why (priority, node), not who.
#[tokio::test]
async fn events_name_no_pod_of_another_namespace_than_their_own() {
    let (a, seen) = leading(Box::new(ok));
    let victims = vec![removal("v1", Via::Eviction)];
    let mut decision = preemption(Record::After(plan(&victims)), victims, default_limits());
    if let Decision::Preempt { note, .. } = &mut decision {
        *note =
            "preempting batch/v1 (priority 0) on node n1 to free cpu 100m for this resize".into();
    }
    a.run(&preemptor(), decision).await.unwrap();
    settle().await;
    let log = seen.lock().unwrap().clone();
    let event = |reason: &str| {
        let mut all = events_of(&seen, reason);
        assert!(!all.is_empty(), "no {reason} Event");
        all.swap_remove(0)
    };
    let preempting = event("PreemptingForResize");
    assert_eq!(
        preempting["note"],
        "preempting a pod in another namespace on node n1 to free cpu 100m for this resize"
    );
    let preempted = event("Preempted");
    assert_eq!(preempted["regarding"]["namespace"], "batch");
    let note = preempted["note"].as_str().unwrap();
    assert!(
        note.contains("a higher-priority pod in another namespace (priority 1000) on node n1"),
        "{note}"
    );
    assert!(!preempted.to_string().contains("prod"), "{preempted}");
    let mark = log.iter().find(|s| s.path.ends_with("v1/status")).unwrap();
    assert!(!mark.body.to_string().contains("prod/app"), "{}", mark.body);
}

/// A rejected plan record is quoted as written on the preemptor: the annotation shows its
/// readers the same names.
#[tokio::test]
async fn a_rejected_plan_record_is_quoted_as_written() {
    let (a, seen) = leading(Box::new(ok));
    let why = "it names batch/v1: its namespace is protected";
    a.run(
        &preemptor(),
        Decision::DropPlan {
            why: why.into(),
            after: SHORT_WAIT,
        },
    )
    .await
    .unwrap();
    settle().await;
    let log = seen.lock().unwrap().clone();
    let rejected = log
        .iter()
        .find(|s| s.path.contains("/events") && s.body["reason"] == "PreemptionPlanRejected")
        .expect("a PreemptionPlanRejected Event");
    assert!(
        rejected.body["note"].as_str().unwrap().contains(why),
        "{}",
        rejected.body
    );
}

#[test]
fn a_fenced_write_parks_the_pod_only_when_the_replica_really_lost_the_lease() {
    let fenced = |f: Fenced| ActuateError::Preempt {
        victim: "batch/filler".into(),
        source: WriteError::Fenced(f),
    };
    for f in [Fenced::NotLeader, Fenced::Lapsed] {
        assert_eq!(
            after_error(&fenced(f), false),
            Action::await_change(),
            "{f:?}"
        );
        assert_eq!(
            after_error(&fenced(f), true),
            Action::requeue(ERROR_BACKOFF),
            "{f:?}: still leading"
        );
    }
    let api = ActuateError::RecordPlan {
        pod: "prod/app".into(),
        source: WriteError::Api(kube::Error::LinesCodecMaxLineLengthExceeded),
    };
    assert_eq!(after_error(&api, false), Action::requeue(ERROR_BACKOFF));
    assert_eq!(after_error(&api, true), Action::requeue(ERROR_BACKOFF));
}
