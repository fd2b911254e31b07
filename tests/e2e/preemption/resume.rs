//! Resumed plans end to end, on hollow nodes (upstream's v1.37.2 kubelet) with the real
//! kube-apiserver, read back from its audit log:
//! - a three-victim plan interrupted after its first eviction, while room appeared elsewhere on
//!   the node, is resumed only for the victims a fresh reprieve still needs
//!   (`controller/src/preemption/decision/victim_state.rs` `spare_the_unneeded`);
//! - an older sealed record of the same resize, put back by the pod's author, is dropped as
//!   superseded (`controller/src/preemption/seal.rs` `PlanSeal::verify`) and none of its victims
//!   is evicted — put back once: the controller's clear of its own record cannot erase it;
//! - the controller's plan-annotation write (`controller/src/preemption/actuator/plan_patch.rs`)
//!   lands only over what its decision read: kube-apiserver refuses it whole (422, no causes)
//!   over anything written since, for a clear, a replace, a write over an absent annotation and
//!   on a recreated pod;
//! - the controller's actuator, given a read the pod's author has changed since, keeps the
//!   author's write and evicts nothing (the put-back race made deterministic).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::controller as support;
use crate::scenario::run_guaranteed;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use resize_guard_controller::preemption::actuator::WriteError;
use resize_guard_controller::preemption::actuator::plan_patch::plan_patch;
use resize_guard_controller::preemption::seal::{PlanRecord, seal};
use resize_guard_harness::env::{Env, alone};
use resize_guard_harness::objects::*;
use serde_json::json;

const T: Duration = Duration::from_secs(30);
const PLAN: &str = "resize-guard.io/preemption";

/// These tests start controller replicas that share one Lease with the other suites' replicas:
/// one at a time, so that no replica of another test acts on this test's pods.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Writes `annotation` as pod `name`'s plan annotation with an ordinary merge patch, as the
/// pod's author can.
async fn put_plan(pods: &Api<Pod>, name: &str, annotation: &str) {
    let patch = json!({"metadata": {"annotations": {PLAN: annotation}}});
    pods.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// The victims kube-apiserver granted an eviction of in `ns` (audit log), in order.
fn evicted(env: &Env, ns: &str) -> Vec<String> {
    let granted = resize_guard_harness::audit::evictions(&env.cp, &[ns], 201);
    granted.into_iter().map(|e| e.victim).collect()
}

/// Deletes pod `name` (1 s grace) and waits until it is gone.
async fn delete_and_wait_gone(pods: &Api<Pod>, name: &str) {
    let dp = DeleteParams {
        grace_period_seconds: Some(1),
        ..Default::default()
    };
    pods.delete(name, &dp).await.unwrap();
    for _ in 0..300 {
        if pods.get_opt(name).await.unwrap().is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} never went away");
}

/// A node of 2500m: v1–v3 (500m, `low`, the plan's victims), a bystander (500m, `low`) and
/// `app` (250m, `high`) leave 250m free. `app` asks for 1750m: 1500m more, three victims' worth.
/// The record a controller sealed before its first eviction names v1, v2 and v3; it evicted v1
/// and died. Meanwhile the bystander goes away: 1250m free, still short of 1500m, so the resize
/// stays Deferred, but one more victim now suffices. The controller started next resumes the
/// record for that one victim only — not the two the record still names.
#[tokio::test]
async fn a_resumed_three_victim_plan_evicts_only_what_a_fresh_reprieve_still_needs() {
    let (env, _alone) = alone(&SERIAL).await;
    let victims = ["v1", "v2", "v3", "bystander"];
    let (ns, _, pods) = victims_and_app(env, "minimal", "2500m", &victims).await;
    support::resize_pending_on(env, &pods, &ns, "app", "1750m").await;

    // What a controller that died right after its first eviction left: the three-victim record,
    // sealed as it sealed it (the key in the install namespace's Secret), v1 gone.
    let app = pods.get("app").await.unwrap();
    let generation = app.metadata.generation.unwrap();
    let mut victims = Vec::new();
    for v in ["v1", "v2", "v3"] {
        let uid = pods.get(v).await.unwrap().metadata.uid.unwrap();
        victims.push(json!({"namespace": ns, "name": v, "uid": uid}));
    }
    let rec: PlanRecord = serde_json::from_value(json!({
        "generation": generation,
        "time": k8s_openapi::jiff::Timestamp::now().to_string(),
        "victims": victims,
    }))
    .unwrap();
    let sealed = seal(&support::plan_key(env).await, &rec, &app).unwrap();
    put_plan(&pods, "app", &sealed.to_annotation()).await;
    delete_and_wait_gone(&pods, "v1").await;
    // Room appears elsewhere on the node: a pod the plan never named goes away.
    delete_and_wait_gone(&pods, "bystander").await;
    let still = pods.get("app").await.unwrap();
    assert!(
        resize_pending(&still).is_some() && support::has_plan(&still),
        "1250m free is still short of 1500m: the resize waits on the plan"
    );

    let c = support::start(env, "minimal").await;
    // Admitted, and the plan cleared: the controller saw the resize through and is done.
    support::wait_app_done(&pods, "1750m", T).await;
    let gone = evicted(env, &ns);
    assert_eq!(gone.len(), 1, "one victim was still needed: {gone:?}");
    assert!(gone[0] == "v2" || gone[0] == "v3", "{gone:?}");
    let spared = if gone[0] == "v2" { "v3" } else { "v2" };
    assert!(
        support::preempted(&pods, &[spared]).await.is_empty(),
        "{spared} was not needed"
    );
    drop(c);
}

/// The plan records on `history`'s pod, in the order the watch saw them (each once).
fn records(history: &support::History) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in history.all() {
        if let Some(a) = p.metadata.annotations.as_ref().and_then(|a| a.get(PLAN))
            && out.last() != Some(a)
        {
            out.push(a.clone());
        }
    }
    out
}

/// True once a version of `history`'s pod without a plan came after one carrying `record`.
fn cleared_after(history: &support::History, record: &str) -> bool {
    let all = history.all();
    let at = all.iter().position(|p| {
        p.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.get(PLAN).map(String::as_str) == Some(record))
    });
    at.is_some_and(|i| all[i..].iter().any(|p| !support::has_plan(p)))
}

/// Two sealed records of the same resize, both the controller's own. Its plan needs two
/// victims (so it is recorded before any eviction), and their budget refuses every eviction
/// while the controller's cache counts it as allowing them (as in `failover.rs`
/// `an_eviction_refused_by_a_budget_the_cache_did_not_foresee_replans_at_once`): the controller
/// drops its first record and, a second later, records the plan again. The pod's author then
/// puts the first record back with a plain patch: the controller refuses it as superseded
/// (`PreemptionPlanRejected`) and evicts nothing on its word.
#[tokio::test]
async fn an_older_sealed_record_put_back_by_the_pods_author_is_rejected_as_superseded() {
    let (env, _alone) = alone(&SERIAL).await;
    // 1300m: v1, v2 (500m each) and app (250m) leave 50m; app asks for 1000m, 750m more: both.
    let (ns, node, pods) = env.scenario("superseded", ("n", "1300m", "4Gi"), &[]).await;
    for name in ["v1", "v2"] {
        let mut p = guaranteed_pod(name, &node, "low", "500m", "64Mi");
        p.metadata
            .labels
            .get_or_insert_default()
            .insert("budget".into(), "victims".into());
        create_running(&pods, &p).await.unwrap();
    }
    run_guaranteed(&pods, "app", &node, "high", "250m", "64Mi").await;
    // The Eviction API refuses every eviction under the budget while its status still allows two.
    let (pdbs, _, _) =
        support::stale_budget(env, &ns, "victims", ("budget", "victims"), 2, 2).await;

    let c = support::start(env, "superseded").await;
    c.wait_leading().await;
    let history = support::History::start(&pods, "app").await;
    support::resize_pending_on(env, &pods, &ns, "app", "1000m").await;
    // The first record, then (after the refusal cleared it) a second one of the same generation.
    let deadline = std::time::Instant::now() + T;
    let (first, second) = loop {
        let seen = records(&history);
        if seen.len() >= 2 {
            break (seen[0].clone(), seen[1].clone());
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no second record: {seen:?}\n{}",
            c.process.log_tail(8000)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let parse = |a: &str| -> serde_json::Value { serde_json::from_str(a).unwrap() };
    let (old, new) = (parse(&first), parse(&second));
    assert_eq!(old["generation"], new["generation"], "{old} {new}");
    assert_ne!(old["time"], new["time"], "{old} {new}");
    // Wait for the second to be cleared by its own refusal, so the put-back is what the
    // controller reads next (its next try comes 2 s after the second).
    let deadline = std::time::Instant::now() + T;
    while !cleared_after(&history, &second) {
        assert!(
            std::time::Instant::now() < deadline,
            "the second record stayed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The pod's author (the test's admin identity) puts the first record back, once. A clear
    // the controller still sends for its own second record is conditional on the annotation
    // holding that record (`controller/src/preemption/actuator/plan_patch.rs`): it cannot erase
    // the put-back unjudged.
    put_plan(&pods, "app", &first).await;
    let put_back = std::time::Instant::now();
    let deadline = put_back + T;
    let rejected = loop {
        let rejected = support::events(env, &ns, "PreemptionPlanRejected").await;
        if !rejected.is_empty() {
            break rejected;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no PreemptionPlanRejected after the put-back: records {:?}\n{}",
            records(&history),
            c.process.log_tail(30_000)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Whether a clear of the controller's own record met the put-back this time (logged by
    // `Actuator::apply`): how often the race was run into.
    let refused = c
        .process
        .log_tail(1 << 20)
        .matches("changed since it was read")
        .count();
    eprintln!(
        "rejected {:?} after the put-back: {rejected:?}; plan writes refused as changed: {refused}",
        put_back.elapsed()
    );
    assert!(
        rejected
            .iter()
            .any(|e| e.0 == "app" && e.1.contains("superseded")),
        "{rejected:?}"
    );
    assert!(evicted(env, &ns).is_empty(), "{:?}", evicted(env, &ns));
    assert!(
        support::preempted(&pods, &["v1", "v2"]).await.is_empty(),
        "the old record's victims stay"
    );
    drop(c);
    pdbs.delete("victims", &DeleteParams::default())
        .await
        .unwrap();
}

/// The controller's conditional plan-annotation write (`plan_patch`), made over `read` (the pod
/// as the decision read it) to turn the annotation into `write`: the API server's answer.
async fn plan_write(pods: &Api<Pod>, read: &Pod, write: Option<&str>) -> Result<(), WriteError> {
    let patch = plan_patch(read, PLAN, write).expect("something to write");
    let name = read.metadata.name.as_deref().unwrap();
    pods.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .map(|_| ())
        .map_err(WriteError::Api)
}

/// Asserts that `result` is the API server's refusal of a failed precondition, as the
/// controller recognises it (`WriteError::precondition_failed`).
fn refused_as_changed(result: Result<(), WriteError>, what: &str) {
    let e = result.expect_err(what);
    let answer = e.answer().map(|s| {
        (
            s.code,
            s.reason.clone(),
            s.message.clone(),
            s.details.clone(),
        )
    });
    eprintln!("{what}: {answer:?}");
    assert!(e.precondition_failed(), "{what}: {answer:?}");
}

fn plan_on(p: &Pod) -> Option<String> {
    p.metadata.annotations.as_ref()?.get(PLAN).cloned()
}

/// The plan annotation `app` carries now.
async fn app_plan(pods: &Api<Pod>) -> Option<String> {
    plan_on(&pods.get("app").await.unwrap())
}

/// The pod's author writes `author` as `app`'s plan after the controller's `read`; each of the
/// controller's `writes` (the value, or `None` to clear, and what it is) over that read is then
/// refused as changed, and the author's value stays.
async fn author_wins(pods: &Api<Pod>, read: &Pod, author: &str, writes: &[(Option<&str>, &str)]) {
    put_plan(pods, "app", author).await;
    for (write, what) in writes {
        refused_as_changed(plan_write(pods, read, *write).await, what);
    }
    assert_eq!(app_plan(pods).await.as_deref(), Some(author));
}

/// The write `controller/src/preemption/actuator/plan_patch.rs` builds, on the real API server:
/// it lands over exactly what was read, and over anything written since it is refused whole
/// (422, recognised as a failed precondition) and the author's value stays — for a clear, a
/// replace and a write over an absent annotation (with and without other annotations), and on a
/// recreated pod of the same name. The pod's kubelet updates its status meanwhile: only the
/// annotation is a precondition.
#[tokio::test]
async fn plan_writes_are_refused_when_the_annotation_changed_since_it_was_read() {
    let (env, _alone) = alone(&SERIAL).await;
    let (_ns, node, pods) = env.scenario("planwrites", ("n", "1", "1Gi"), &[]).await;
    let app = guaranteed_pod("app", &node, "high", "250m", "64Mi");
    create_running(&pods, &app).await.unwrap();

    // Over a pod with no annotations at all: the author's write since is kept.
    let read = pods.get("app").await.unwrap();
    assert!(unannotated(&read), "{:?}", read.metadata.annotations);
    author_wins(
        &pods,
        &read,
        "author-1",
        &[(Some("ctrl"), "add over no map")],
    )
    .await;

    // A clear and a replace over a value the author changed since: refused, the author's stays.
    let read = pods.get("app").await.unwrap();
    let writes = [
        (None, "remove over a changed value"),
        (Some("ctrl"), "replace over a changed value"),
    ];
    author_wins(&pods, &read, "author-2", &writes).await;

    // Over exactly what was read: replaced, then removed.
    let read = pods.get("app").await.unwrap();
    plan_write(&pods, &read, Some("ctrl")).await.unwrap();
    let read = pods.get("app").await.unwrap();
    assert_eq!(plan_on(&read).as_deref(), Some("ctrl"));
    plan_write(&pods, &read, None).await.unwrap();
    assert_eq!(app_plan(&pods).await, None);

    // Absent among other annotations: the `null` test passes while it is absent, and fails
    // once the author wrote it.
    let other = json!({"metadata": {"annotations": {"example.com/other": "x"}}});
    pods.patch("app", &PatchParams::default(), &Patch::Merge(&other))
        .await
        .unwrap();
    let read = pods.get("app").await.unwrap();
    assert_eq!(plan_on(&read), None);
    let writes = [(Some("ctrl"), "add over a value written since")];
    author_wins(&pods, &read, "author-3", &writes).await;
    let read = pods.get("app").await.unwrap();
    plan_write(&pods, &read, None).await.unwrap();
    let read = pods.get("app").await.unwrap();
    plan_write(&pods, &read, Some("ctrl")).await.unwrap();
    let after = pods.get("app").await.unwrap();
    assert_eq!(plan_on(&after).as_deref(), Some("ctrl"));
    assert_eq!(
        after
            .metadata
            .annotations
            .unwrap()
            .get("example.com/other")
            .map(String::as_str),
        Some("x")
    );

    // An invalid object is no failed precondition: the answer names its causes.
    let read = pods.get("app").await.unwrap();
    let invalid = plan_patch(&read, "not a valid key", Some("x")).unwrap();
    let e = pods
        .patch("app", &PatchParams::default(), &Patch::Json::<()>(invalid))
        .await
        .map(|_| ())
        .map_err(WriteError::Api)
        .expect_err("an invalid annotation key");
    assert_eq!(e.status(), Some(422), "{e:?}");
    assert!(!e.precondition_failed(), "{e:?}");

    // A recreated pod of the same name: the UID test refuses it.
    let read = pods.get("app").await.unwrap();
    delete_and_wait_gone(&pods, "app").await;
    pods.create(&PostParams::default(), &app).await.unwrap();
    refused_as_changed(
        plan_write(&pods, &read, None).await,
        "remove on a recreated pod",
    );
    // Over the recreated pod as read (no annotations at all): added.
    let read = pods.get("app").await.unwrap();
    assert!(unannotated(&read), "{:?}", read.metadata.annotations);
    plan_write(&pods, &read, Some("ctrl")).await.unwrap();
    assert_eq!(app_plan(&pods).await.as_deref(), Some("ctrl"));
    delete_and_wait_gone(&pods, "app").await;
}

/// The controller's actuator (`controller/src/preemption/actuator.rs`, through the course a
/// decision takes: `controller/src/preemption/reconcile/course.rs`) on the real API server,
/// acting as the controller's ServiceAccount on a decision made over a read of the pod that the
/// pod's author has since changed — the race of a put-back with the controller's clear, made
/// deterministic. The clear keeps the author's value (judged on the next read), and a plan to be
/// recorded before its evictions evicts nothing; over a current read the same plan is recorded
/// and both victims evicted (the test can see evictions). No controller runs meanwhile.
#[tokio::test]
async fn a_decision_over_a_read_the_author_changed_since_writes_and_evicts_nothing() {
    use resize_guard_controller::lease::fence::Leadership;
    use resize_guard_controller::metrics::Metrics;
    use resize_guard_controller::preemption::actuator::Actuator;
    use resize_guard_controller::preemption::brakes::{Brakes, Limits};
    use resize_guard_controller::preemption::decision::{
        Decision, Record, Removal, SHORT_WAIT, Via, Waits,
    };
    use resize_guard_controller::preemption::reconcile::Course;
    use resize_guard_controller::preemption::seal::PlanSeal;
    use resize_guard_harness::control_plane::Identity;
    use resize_guard_policy::pod::PodKey;

    let (env, _alone) = alone(&SERIAL).await;
    let (ns, _, pods) = victims_and_app(env, "stale", "2", &["v1", "v2"]).await;
    resize_guard_harness::install::apply_rbac(env).await;
    let client = env.cp.client_as(Identity::Controller).await.unwrap();
    let course = Course {
        actuator: Actuator {
            events: resize_guard_runtime::Events::start(
                client.clone(),
                kube::runtime::events::Reporter {
                    controller: "e2e-stale".into(),
                    instance: None,
                },
            ),
            client,
            metrics: std::sync::Arc::new(Metrics::new()),
            leadership: Leadership::forever(),
            seal: std::sync::Arc::new(PlanSeal::fixed(&[7; 32])),
        },
        brakes: std::sync::Arc::new(Brakes::new()),
        waits: std::sync::Arc::new(Waits::new()),
    };
    let series = "resize_guard_plan_write_conflicts_total";
    let conflicts = || crate::scenario::metric_line(&course.actuator.metrics.render(), series);

    // Clears decided over the author's first record, after the author put another one.
    put_plan(&pods, "app", "author-1").await;
    let read = pods.get("app").await.unwrap();
    put_plan(&pods, "app", "author-2").await;
    for decision in [
        Decision::ClearPlan,
        Decision::DropPlan {
            why: "superseded".into(),
            after: SHORT_WAIT,
        },
    ] {
        let action = course.run(&read, decision).await.unwrap();
        assert_eq!(
            action,
            kube::runtime::controller::Action::requeue(SHORT_WAIT)
        );
        assert_eq!(
            app_plan(&pods).await.as_deref(),
            Some("author-2"),
            "the author's write was erased unjudged"
        );
    }
    assert_eq!(conflicts(), "resize_guard_plan_write_conflicts_total 2");

    // A two-victim plan (recorded before its evictions) decided over a pod without a plan,
    // after the author wrote one.
    let clear = json!({"metadata": {"annotations": {PLAN: null}}});
    pods.patch("app", &PatchParams::default(), &Patch::Merge(&clear))
        .await
        .unwrap();
    let read = pods.get("app").await.unwrap();
    assert_eq!(plan_on(&read), None);
    put_plan(&pods, "app", "author-3").await;
    let mut victims = Vec::new();
    for name in ["v1", "v2"] {
        let v = pods.get(name).await.unwrap();
        victims.push(Removal {
            victim: PodKey {
                namespace: ns.clone(),
                name: name.into(),
                uid: v.metadata.uid.unwrap(),
            },
            grace_seconds: 1,
            via: Via::Eviction,
        });
    }
    let preempt = |read: &Pod| {
        let rec: PlanRecord = serde_json::from_value(json!({
            "generation": read.metadata.generation.unwrap(),
            "time": k8s_openapi::jiff::Timestamp::now().to_string(),
            "victims": victims.iter().map(|v| &v.victim).collect::<Vec<_>>(),
        }))
        .unwrap();
        Decision::Preempt {
            record: Record::Before(rec),
            victims: victims.clone(),
            note: "e2e".into(),
            limits: Limits::of(&Default::default()),
            pending_on_node: 1,
            after: SHORT_WAIT,
        }
    };
    let action = course.run(&read, preempt(&read)).await.unwrap();
    assert_eq!(
        action,
        kube::runtime::controller::Action::requeue(SHORT_WAIT)
    );
    assert_eq!(app_plan(&pods).await.as_deref(), Some("author-3"));
    assert_eq!(conflicts(), "resize_guard_plan_write_conflicts_total 3");
    assert!(evicted(env, &ns).is_empty(), "{:?}", evicted(env, &ns));
    assert!(support::preempted(&pods, &["v1", "v2"]).await.is_empty());

    // The same plan over a current read: recorded (the author's record replaced), both evicted.
    let read = pods.get("app").await.unwrap();
    course.run(&read, preempt(&read)).await.unwrap();
    let recorded = app_plan(&pods).await.unwrap();
    assert!(recorded.contains("\"count\":2"), "{recorded}");
    assert_eq!(conflicts(), "resize_guard_plan_write_conflicts_total 3");
    let deadline = std::time::Instant::now() + T;
    while evicted(env, &ns).len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "{:?}",
            evicted(env, &ns)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Its Event, posted after any the stale decisions could have queued, is there; the drop
    // refused as changed said nothing about a record it never judged.
    support::wait_event(env, &ns, "PreemptingForResize").await;
    let rejected = support::events(env, &ns, "PreemptionPlanRejected").await;
    assert!(rejected.is_empty(), "{rejected:?}");
}

/// Whether `pod` has no annotations at all.
fn unannotated(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .is_none_or(|a| a.is_empty())
}

/// A namespace `prefix-…` and a node with `cpu` (and 4Gi) running `victims` (low priority, 500m
/// each), then `app` (high, 250m): (namespace, node, pods).
async fn victims_and_app(
    env: &Env,
    prefix: &str,
    cpu: &str,
    victims: &[&str],
) -> (String, String, Api<Pod>) {
    let (ns, node, pods) = env.scenario(prefix, ("n", cpu, "4Gi"), &[]).await;
    for name in victims {
        run_guaranteed(&pods, name, &node, "low", "500m", "64Mi").await;
    }
    run_guaranteed(&pods, "app", &node, "high", "250m", "64Mi").await;
    (ns, node, pods)
}
