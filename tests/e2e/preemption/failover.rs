//! Restarts and failover: a recorded plan is resumed, not re-chosen (no extra victims), only the
//! Lease holder acts, and a follower takes over when the leader dies — on hollow nodes
//! (upstream's v1.37.2 kubelet), which retry a Deferred resize when a victim is removed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::scenario::controller as support;
use crate::scenario::run_guaranteed;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use resize_guard_controller::preemption::seal::{
    PLAN_KEY_FIELD, PLAN_KEY_SECRET, PlanKey, PlanRecord, seal,
};
use resize_guard_harness::env::alone;
use resize_guard_harness::install::wait_ready;
use resize_guard_harness::objects::*;
use serde_json::json;

const T: Duration = Duration::from_secs(30);

/// Who wrote a planted plan.
#[derive(Clone, Copy)]
enum Writer {
    /// The controller, with its key (what a controller that died mid-plan left).
    Controller,
    /// The pod's author, with a key of its own: the best it can forge (the format is public,
    /// the key is not).
    Author,
    /// A controller of the previous format (victims in clear, HMAC-SHA256 under the same
    /// Secret's bytes): a record an upgrade finds on a pod mid-plan.
    FormatOne,
}

/// Writes `plan` as pod `name`'s plan annotation with an ordinary merge patch, as `writer`
/// would have written it.
async fn plant(
    env: &resize_guard_harness::env::Env,
    pods: &Api<Pod>,
    name: &str,
    plan: serde_json::Value,
    writer: Writer,
) {
    let pod = pods.get(name).await.unwrap();
    let rec: PlanRecord = serde_json::from_value(plan).unwrap();
    let value = match writer {
        Writer::Controller => seal(&support::plan_key(env).await, &rec, &pod)
            .unwrap()
            .to_annotation(),
        Writer::Author => seal(&PlanKey::new(&[0x42; 32]).unwrap(), &rec, &pod)
            .unwrap()
            .to_annotation(),
        Writer::FormatOne => format_one(env, &rec, &pod.metadata.uid.unwrap()).await,
    };
    let patch = json!({"metadata": {"annotations": {"resize-guard.io/preemption": value}}});
    pods.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// `rec` as the previous controller sealed it for the pod with UID `uid`: every field in
/// clear, and an HMAC-SHA256 under the Secret's bytes over the format-1 message.
async fn format_one(env: &resize_guard_harness::env::Env, rec: &PlanRecord, uid: &str) -> String {
    resize_guard_harness::install::apply_rbac(env).await;
    support::plan_key(env).await;
    let api: Api<Secret> = Api::namespaced(env.client().await, "resize-guard");
    let secret = api.get(PLAN_KEY_SECRET).await.unwrap();
    let key = ring::hmac::Key::new(
        ring::hmac::HMAC_SHA256,
        &secret.data.unwrap()[PLAN_KEY_FIELD].0,
    );
    let mut m = format!(
        "resize-guard.io/preemption v1\n{uid}\n{}\n{}\n",
        rec.generation, rec.time
    );
    for v in &rec.victims {
        m.push_str(&format!("{}\n{}\n{}\n", v.namespace, v.name, v.uid));
    }
    let mac: String = ring::hmac::sign(&key, m.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    json!({"generation": rec.generation, "victims": rec.victims, "time": rec.time, "mac": mac})
        .to_string()
}

/// A planted plan's targets: a kube-system pod, a higher-priority pod and an unrelated
/// namespace's pod on the preemptor's node (50m each, so the node's free room stays what the
/// field test leaves), and a pod on another node. Returns them as plan victims, with their pod
/// APIs for the checks.
async fn targets(
    env: &resize_guard_harness::env::Env,
    prefix: &str,
    node: &str,
) -> (Vec<serde_json::Value>, Vec<(Api<Pod>, String)>) {
    let client = env.client().await;
    let other_ns = env.namespace(&format!("{prefix}-other")).await;
    let other_node = env.node(&format!("{prefix}-n2"), "2", "2Gi").await;
    let ns_of = |ns: &str| -> Api<Pod> { Api::namespaced(client.clone(), ns) };
    let name = |what: &str| format!("{prefix}-{what}");
    let list: [(String, String, &str, String); 4] = [
        ("kube-system".into(), name("system"), "low", node.to_owned()),
        (other_ns.clone(), name("higher"), "high", node.to_owned()),
        (other_ns.clone(), name("unrelated"), "low", node.to_owned()),
        (other_ns.clone(), name("elsewhere"), "low", other_node),
    ];
    let mut victims = Vec::new();
    let mut apis = Vec::new();
    for (ns, pod, class, on) in list {
        let api = ns_of(&ns);
        run_guaranteed(&api, &pod, &on, class, "50m", "32Mi").await;
        let uid = api.get(&pod).await.unwrap().metadata.uid.unwrap();
        victims.push(json!({"namespace": ns, "name": pod, "uid": uid}));
        apis.push((api, pod));
    }
    (victims, apis)
}

/// None of `targets` was asked to go.
async fn untouched(targets: &[(Api<Pod>, String)]) {
    for (api, name) in targets {
        let p = api.get(name).await.unwrap();
        assert!(
            p.metadata.deletion_timestamp.is_none(),
            "{name} was preempted"
        );
    }
}

/// These tests start and kill controller replicas that share one Lease: they run one at a time so
/// that no replica of another test acts on this test's pods.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_restarted_controller_resumes_the_recorded_plan_and_takes_no_extra_victims() {
    let (env, _alone) = alone(&SERIAL).await;
    let (ns, node, pods) = env.scenario("resume", ("n", "2500m", "4Gi"), &[]).await;
    for name in ["v1", "v2", "v3", "v4"] {
        run_guaranteed(&pods, name, &node, "low", "500m", "64Mi").await;
        tokio::time::sleep(Duration::from_millis(1100)).await; // distinct start times
    }
    run_guaranteed(&pods, "app", &node, "high", "250m", "64Mi").await;
    env.try_resize_cpu(&ns, "app", "1250m").await;
    wait_pod(&pods, "app", T, |p| resize_pending(p).is_some())
        .await
        .unwrap();

    // What a controller that died mid-plan left behind: a plan naming v1 and v2 (a fresh plan
    // would pick the youngest, v4 and v3), with v1 already terminating.
    let uid = |p: Pod| p.metadata.uid.unwrap();
    let (u1, u2) = (
        uid(pods.get("v1").await.unwrap()),
        uid(pods.get("v2").await.unwrap()),
    );
    let plan = json!({"generation": 2, "time": "2026-11-30T00:00:00Z", "victims": [
        {"namespace": ns, "name": "v1", "uid": u1}, {"namespace": ns, "name": "v2", "uid": u2}]});
    // Sealed as that controller sealed it (the key in the install namespace's Secret).
    plant(env, &pods, "app", plan, Writer::Controller).await;
    pods.delete(
        "v1",
        &DeleteParams {
            grace_period_seconds: Some(40),
            ..Default::default()
        },
    )
    .await
    .unwrap();

    let c = support::start(env, "resume").await;
    // Admitted, and the plan cleared: the controller saw the resize through and is done with it.
    support::wait_app_done(&pods, "1250m", T).await;
    assert_eq!(
        support::preempted(&pods, &["v1", "v2", "v3", "v4"]).await,
        ["v1", "v2"],
        "resumed, nothing extra"
    );
    // The Preempted Event is published after the eviction, off the critical path: count once
    // v2's is there (the plan was cleared after both evictions, so any other would be too).
    let preempted = support::wait_event_for(env, &ns, "Preempted", "v2").await;
    assert_eq!(
        preempted.len(),
        1,
        "only v2 needed preempting: {preempted:?}"
    );
    assert_eq!(preempted[0].0, "v2");
    drop(c);
}

#[tokio::test]
async fn only_the_leader_acts_and_a_follower_takes_over_when_it_dies() {
    let (env, _alone) = alone(&SERIAL).await;
    let a = support::start(env, "replica-a").await;
    let b = support::start(env, "replica-b").await;
    let mut leader = None;
    // (Another test's replica may hold the Lease for a while: wait it out.)
    for _ in 0..400 {
        match (a.is_leader().await, b.is_leader().await) {
            (true, false) => leader = Some("replica-a"),
            (false, true) => leader = Some("replica-b"),
            (true, true) => panic!(
                "two leaders:\n{:?}\n{:?}",
                resize_guard_harness::install::http_get(a.health_port, "/metrics").await,
                resize_guard_harness::install::http_get(b.health_port, "/metrics").await
            ),
            _ => {}
        }
        if leader.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let leader = leader.expect("a leader");

    let (ns, _node, pods) = env.field_test("leader").await;
    env.try_resize_cpu(&ns, "app", "550m").await;
    // Admitted, and the plan cleared: the leader has seen the resize through, so every replica
    // had its chance to act by now.
    support::wait_app_done(&pods, "550m", T).await;
    let acted = support::wait_event(env, &ns, "PreemptingForResize").await;
    assert!(
        acted.iter().all(|e| e.2 == leader),
        "only {leader} acts: {acted:?}"
    );

    // Kill the leader without letting it release the Lease; the follower must take over within
    // the lease duration (4 s) plus a renew interval.
    let (dead, follower) = if leader == a.identity {
        (&a, &b)
    } else {
        (&b, &a)
    };
    let killed = Instant::now();
    std::process::Command::new("kill")
        .args(["-KILL", &dead.process.pid().to_string()])
        .status()
        .unwrap();
    let took_over = follower.leads_within(200).await.then(|| killed.elapsed());
    let took_over = took_over.expect("the follower never took over");
    eprintln!(
        "failover: {} took the lease {:.1} s after the leader was killed",
        follower.identity,
        took_over.as_secs_f64()
    );
    // Lease duration (4 s) + one renew interval (1 s) + the follower's retry period (1 s), with
    // slack for a loaded 2-core machine.
    assert!(took_over < Duration::from_secs(12), "{took_over:?}");

    let (ns2, _node2, pods2) = env.field_test("failover").await;
    env.try_resize_cpu(&ns2, "app", "550m").await;
    support::wait_app_done(&pods2, "550m", T).await;
    let acted = support::wait_event(env, &ns2, "PreemptingForResize").await;
    assert!(acted.iter().all(|e| e.2 == follower.identity), "{acted:?}");
}

#[tokio::test]
async fn killed_right_after_the_first_eviction_a_new_replica_finishes_the_same_plan() {
    let (env, _alone) = alone(&SERIAL).await;
    let (ns, node, pods) = env.scenario("crash", ("n", "2500m", "4Gi"), &[]).await;
    for name in ["v1", "v2", "v3", "v4"] {
        let mut p = guaranteed_pod(name, &node, "low", "500m", "64Mi");
        p.spec.as_mut().unwrap().termination_grace_period_seconds = Some(30);
        create_running(&pods, &p).await.unwrap();
    }
    run_guaranteed(&pods, "app", &node, "high", "250m", "64Mi").await;
    // Wait for any other test's replica to let go of the Lease, so this one leads.
    let first = support::start(env, "crash-1").await;
    first.leads_within(400).await;
    assert!(first.is_leader().await);
    env.try_resize_cpu(&ns, "app", "1250m").await;
    // SIGKILL the moment the first victim starts terminating.
    loop {
        if !support::preempted(&pods, &["v1", "v2", "v3", "v4"])
            .await
            .is_empty()
        {
            std::process::Command::new("kill")
                .args(["-KILL", &first.process.pid().to_string()])
                .status()
                .unwrap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let plan: serde_json::Value = serde_json::from_str(
        &pods.get("app").await.unwrap().metadata.annotations.unwrap()["resize-guard.io/preemption"],
    )
    .unwrap();
    // The victims are in the preemptor's own namespace: the record's clear part names them.
    let planned: Vec<String> = plan["own"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(plan["count"], 2, "{plan}");
    assert_eq!(planned.len(), 2, "{plan}");
    let _second = support::start(env, "crash-2").await;
    // Admitted, and the plan cleared by the new replica: it has finished with the resize, so any
    // extra victim it would take is taken by now.
    support::wait_app_done(&pods, "1250m", Duration::from_secs(60)).await;
    let mut gone = support::preempted(&pods, &["v1", "v2", "v3", "v4"]).await;
    gone.sort();
    let mut planned = planned;
    planned.sort();
    assert_eq!(
        gone, planned,
        "exactly the recorded plan's victims, none extra"
    );
}

/// A plan planted on the field test's `app`: the victims it names, who wrote it, and the
/// identity of the controller then started.
struct Planted {
    victims: Vec<serde_json::Value>,
    writer: Writer,
    identity: &'static str,
}

impl Planted {
    fn new(victims: Vec<serde_json::Value>, writer: Writer, identity: &'static str) -> Self {
        Planted {
            victims,
            writer,
            identity,
        }
    }
}

/// Plants `planted` on `app`, resizes `app` to 550m, starts a controller and waits until the
/// resize completed with no plan left; then asserts the first `PreemptionPlanRejected` Event's
/// note names each of `rejected`, the fresh plan took the filler and left `targets` alone.
async fn planted_plan_rejected(
    env: &'static resize_guard_harness::env::Env,
    ns: &str,
    pods: &Api<Pod>,
    planted: Planted,
    targets: &[(Api<Pod>, String)],
    rejected: &[&str],
) {
    plant(
        env,
        pods,
        "app",
        json!({"generation": 2, "time": "2026-11-30T00:00:00Z", "victims": planted.victims}),
        planted.writer,
    )
    .await;
    support::resize_pending_on(env, pods, ns, "app", "550m").await;
    let c = support::start(env, planted.identity).await;
    support::wait_app_done(pods, "550m", T).await;
    let events = support::wait_event(env, ns, "PreemptionPlanRejected").await;
    for words in rejected {
        assert!(events[0].1.contains(words), "{words:?} in {events:?}");
    }
    assert_eq!(support::preempted(pods, &["filler"]).await, ["filler"]);
    untouched(targets).await;
    drop(c);
}

#[tokio::test]
async fn a_plan_planted_by_the_pods_author_is_dropped_and_only_the_fresh_plan_acts() {
    let (env, _alone) = alone(&SERIAL).await;
    let (ns, node, pods) = env.field_test("planted").await;
    let (mut victims, targets) = targets(env, "planted", &node).await;
    // (d) more victims than the cap (5) once the filler is named too, plus (a)-(c), (e).
    let filler = pods.get("filler").await.unwrap().metadata.uid.unwrap();
    victims.push(json!({"namespace": ns, "name": "filler", "uid": filler}));
    victims.push(
        json!({"namespace": ns, "name": "ghost", "uid": "00000000-0000-0000-0000-000000000000"}),
    );
    let planted = Planted::new(victims, Writer::Author, "planted");
    let rejected = ["its seal does not verify"];
    planted_plan_rejected(env, &ns, &pods, planted, &targets, &rejected).await;
}

#[tokio::test]
async fn a_sealed_plan_naming_pods_a_fresh_plan_could_not_choose_is_dropped_with_the_reason() {
    let (env, _alone) = alone(&SERIAL).await;
    let (ns, node, pods) = env.field_test("recheck").await;
    let (victims, targets) = targets(env, "recheck", &node).await;
    // Sealed with the controller's own key: only the re-check of every rule can refuse it.
    let named: Vec<serde_json::Value> = victims[..2].to_vec();
    let planted = Planted::new(named, Writer::Controller, "recheck");
    let rejected = [
        "kube-system/recheck-system: its namespace is protected",
        "recheck-higher: its priority is not below the resizing pod's",
    ];
    planted_plan_rejected(env, &ns, &pods, planted, &targets, &rejected).await;
}

#[tokio::test]
async fn a_format_one_record_an_upgrade_finds_is_dropped_and_the_resize_planned_afresh() {
    let (env, _alone) = alone(&SERIAL).await;
    let (ns, node, pods) = env.field_test("format1").await;
    let (victims, targets) = targets(env, "format1", &node).await;
    // Validly sealed by the previous format, naming pods of another namespace in clear: it is
    // not resumed (nor re-checked), it is dropped as unreadable and a fresh plan takes the
    // filler.
    let planted = Planted::new(victims[2..].to_vec(), Writer::FormatOne, "format1");
    let rejected = ["the plan annotation is unreadable (it is in an older format"];
    planted_plan_rejected(env, &ns, &pods, planted, &targets, &rejected).await;
}

#[tokio::test]
async fn restarted_with_a_broken_or_missing_policy_it_keeps_the_last_good_one_or_does_nothing() {
    let (env, _alone) = alone(&SERIAL).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client().await, "resize-guard");
    let metric = |m: &str, origin: &str| {
        m.lines()
            .any(|l| l.trim() == format!("resize_guard_policy_in_force{{origin=\"{origin}\"}} 1"))
    };
    // An audit-mode trial: the leader persists it as the last good copy.
    let c = support::start(env, "failsafe-1").await;
    resize_guard_harness::install::set_policy(env, "mode: audit\n").await;
    for _ in 0..300 {
        let copy = cms.get_opt("resize-guard-last-good").await.unwrap();
        if copy.is_some_and(|c| c.data.unwrap_or_default()["policy.yaml"] == "mode: audit\n") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(c);

    // Restarted with a typo: the last good copy (audit) is in force; a Deferred resize with a
    // victim is only reported (WouldPreempt), nothing is evicted.
    resize_guard_harness::install::set_policy(env, "mdoe: enforce\n").await;
    // From here to the end every replica runs without an enforcing policy: the audit log must
    // show no eviction and no pod removed in the test's namespace over the whole window.
    let window = k8s_openapi::jiff::Timestamp::now();
    let c = support::start_unready(env, "failsafe-2").await;
    wait_ready(c.health_port, &c.process, T).await;
    let health = |path: &'static str| resize_guard_harness::install::http_get(c.health_port, path);
    assert!(metric(&health("/metrics").await.unwrap(), "last-good"));
    let ready = health("/readyz").await.unwrap();
    assert!(
        ready.contains("ok (degraded: the policy ConfigMap is invalid"),
        "{ready}"
    );
    let (ns, _node, pods) = env.field_test("failsafe").await;
    support::resize_pending_on(env, &pods, &ns, "app", "550m").await;
    let would = support::wait_event(env, &ns, "WouldPreempt").await;
    assert!(
        would[0].1.contains("audit mode: would preempt"),
        "{would:?}"
    );
    assert!(support::preempted(&pods, &["filler"]).await.is_empty());
    drop(c);

    // Restarted with no good policy anywhere (garbled, then missing, then key-less, and no last
    // good copy): nothing is acted on; readiness, the metric and a NoPolicy Event say why.
    cms.delete("resize-guard-last-good", &Default::default())
        .await
        .unwrap();
    for (step, why) in [
        ("garbled", "the policy ConfigMap is invalid"),
        ("missing", "the policy ConfigMap does not exist"),
        ("key-less", "has no key policy.yaml"),
    ] {
        match step {
            "garbled" => resize_guard_harness::install::set_policy(env, "mode: [\n").await,
            "missing" => {
                cms.delete("resize-guard", &Default::default())
                    .await
                    .unwrap();
            }
            _ => {
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"name": "resize-guard"}, "data": {"other.yaml": "mode: enforce\n"}
                }))
                .unwrap();
                cms.create(&PostParams::default(), &cm).await.unwrap();
            }
        }
        let c = support::start_unready(env, &format!("failsafe-{step}")).await;
        // The positive marker that this replica had its chance: it leads (so it reconciled every
        // cached pod, the Deferred resize among them) and published its own `NoPolicy` Event.
        c.wait_leading().await;
        let mut no_policy = Vec::new();
        for _ in 0..300 {
            no_policy = support::events(env, "resize-guard", "NoPolicy").await;
            if no_policy.iter().any(|e| e.2 == c.identity) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            no_policy.iter().any(|e| e.2 == c.identity),
            "{step}: no NoPolicy Event from {}: {no_policy:?}",
            c.identity
        );
        let health =
            |path: &'static str| resize_guard_harness::install::http_get(c.health_port, path);
        let mut why_unready = String::new();
        for _ in 0..300 {
            why_unready = health("/readyz").await.unwrap_err();
            if why_unready.contains("no policy in force") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(why_unready.contains(why), "{step}: {why_unready}");
        assert!(metric(&health("/metrics").await.unwrap(), "none"), "{step}");
        let events = env
            .kubectl()
            .events_of("resize-guard", "configmap/resize-guard")
            .await
            .unwrap()
            .stdout;
        assert!(events.contains("NoPolicy"), "{step}: {events}");
        assert!(
            support::preempted(&pods, &["filler"]).await.is_empty(),
            "{step}"
        );
        drop(c);
        // Over its whole life (read once it stopped), the replica wrote nothing to a pod.
        let agent = format!("(failsafe-{step})");
        let writes: Vec<String> = env
            .cp
            .audit_events()
            .iter()
            .filter(|e| e["userAgent"].as_str().is_some_and(|a| a.contains(&agent)))
            .filter(|e| e["objectRef"]["resource"] == "pods" && e["verb"] != "get")
            .filter(|e| !matches!(e["verb"].as_str(), Some("list" | "watch")))
            .map(|e| format!("{} {}", e["verb"], e["objectRef"]))
            .collect();
        assert!(writes.is_empty(), "{step}: {writes:?}");
    }
    // The whole window, from the audit log: no eviction asked for and no pod deleted in the
    // field test's namespace, by any replica.
    let removals: Vec<String> = env
        .cp
        .audit_events()
        .iter()
        .filter(|e| e["objectRef"]["namespace"] == ns.as_str())
        .filter(|e| {
            e["requestReceivedTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .is_some_and(|t| t >= window)
        })
        .filter(|e| {
            (e["verb"] == "create" && e["objectRef"]["subresource"] == "eviction")
                || (e["verb"] == "delete" && e["objectRef"]["resource"] == "pods")
        })
        .map(|e| format!("{} {} by {}", e["verb"], e["objectRef"], e["userAgent"]))
        .collect();
    assert!(removals.is_empty(), "{removals:?}");
    // And the audit log does record this namespace's pod requests (else the check is blind).
    assert!(
        env.cp
            .audit_events()
            .iter()
            .any(|e| e["objectRef"]["namespace"] == ns.as_str()
                && e["objectRef"]["resource"] == "pods"
                && e["verb"] == "patch"),
        "the audit log holds no pod patch in {ns}"
    );
    // Back to the shipped policy for the other tests.
    cms.delete("resize-guard", &Default::default())
        .await
        .unwrap();
    resize_guard_harness::install::apply_rbac(env).await;
}

/// The earliest `eventTime` of a `PreemptionReplanned` Event in `ns` (events.k8s.io/v1).
async fn replanned_at(
    env: &resize_guard_harness::env::Env,
    ns: &str,
) -> k8s_openapi::jiff::Timestamp {
    use k8s_openapi::api::events::v1::Event;
    let api: Api<Event> = Api::namespaced(env.client().await, ns);
    api.list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("PreemptionReplanned"))
        .filter_map(|e| e.event_time.map(|t| t.0))
        .min()
        .expect("a PreemptionReplanned Event with an eventTime")
}

/// A counter's value in a replica's `/metrics` (0 when not exported yet).
async fn counter(c: &support::Controller, name: &str) -> f64 {
    let metrics = resize_guard_harness::install::http_get(c.health_port, "/metrics")
        .await
        .unwrap();
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The Eviction API really answers 429 for a budget the controller's cache holds an older state
/// of: kube-controller-manager counted the budget (one disruption allowed) and stopped, then the
/// budget's spec changed, so kube-apiserver refuses every eviction under it ("still being
/// processed by the server", `Retry-After: 10`; upstream `checkAndDecrement`,
/// `pkg/registry/core/pod/storage/eviction.go`) while the cache still says one is allowed. The
/// controller must see that refusal as it came — re-plan and say so — not have its client
/// retry it until the leadership fence passes.
#[tokio::test]
async fn an_eviction_refused_by_a_budget_the_cache_did_not_foresee_replans_at_once() {
    let (env, _alone) = alone(&SERIAL).await;
    let (ns, _node, pods) = env.field_test("refused").await;
    let (pdbs, counted, changed) =
        support::stale_budget(env, &ns, "filler", ("app", "filler"), 1, 1).await;
    assert_eq!(counted.status.unwrap().disruptions_allowed, Some(1));
    let status = changed.status.unwrap();
    assert!(status.observed_generation < changed.metadata.generation);
    assert_eq!(
        status.disruptions_allowed,
        Some(1),
        "the stale count the cache sees"
    );

    let c = support::start(env, "refusal").await;
    c.wait_leading().await;
    let fenced = counter(&c, "resize_guard_fenced_writes_total").await;
    support::resize_pending_on(env, &pods, &ns, "app", "550m").await;
    let replanned = support::wait_event(env, &ns, "PreemptionReplanned").await;
    assert!(
        replanned[0].0 == "app"
            && replanned[0].1.contains(&format!("{ns}/filler"))
            && replanned[0].1.contains("still being processed"),
        "{replanned:?}"
    );
    // Seen as it came: exactly one refused eviction precedes the re-plan's Event. A blind retry
    // (honouring the server's Retry-After) would have sent the same eviction again, and been
    // refused again, before the error reached the controller. From the audit log and the
    // Event's own time, so however slow the machine, order and not speed decides.
    let said = replanned_at(env, &ns).await;
    let refusals_before: Vec<_> = resize_guard_harness::audit::evictions(&env.cp, &[&ns], 429)
        .into_iter()
        .filter(|e| e.victim == "filler" && e.received < said)
        .collect();
    assert_eq!(
        refusals_before.len(),
        1,
        "refused evictions before {said}: {refusals_before:?}"
    );
    assert_eq!(
        counter(&c, "resize_guard_fenced_writes_total").await,
        fenced,
        "no write ran out of its fence"
    );
    let filler = pods.get("filler").await.unwrap();
    assert!(
        filler.metadata.deletion_timestamp.is_none(),
        "the budget held"
    );
    let metrics = resize_guard_harness::install::http_get(c.health_port, "/metrics")
        .await
        .unwrap();
    assert!(
        metrics.contains("resize_guard_preemptions_total{outcome=\"pdb_blocked\"}"),
        "{metrics}"
    );
    pdbs.delete("filler", &DeleteParams::default())
        .await
        .unwrap();
}

/// A low-priority pod on `node` owned (as a controller) by a `kind` named `owner`: the owner
/// object need not exist (no garbage collector runs in this binary's control plane).
fn owned_pod(name: &str, node: &str, cpu: &str, kind: &str, owner: &str) -> Pod {
    let mut p = guaranteed_pod(name, node, "low", cpu, "64Mi");
    p.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": kind, "name": owner,
            "uid": format!("00000000-0000-0000-0000-{:012}", name.len()), "controller": true,
        }))
        .unwrap(),
    ]);
    p
}

/// The brakes under a flood of Deferred resizes: `RESIZE_GUARD_FLOOD=full` gives the 200
/// resizes on 20 nodes; by default 20 on 4. Each node holds `k` high-priority pods that each grow
/// by 100m, `ceil(k/3) + 1` ReplicaSet-owned 300m victims, one bare 300m pod (the youngest: the
/// first a planner would take) and one DaemonSet-owned 100m pod, and no free room, so every resize
/// is Deferred and the node needs `ceil(k/3)` victims. With `maxEvictionsPerMinute: 12` and
/// `maxVictimsPerResize` what one plan needs, read back from the audit log: the evictions never
/// outrun the bucket (one plan at once, then 12 a minute), no node loses more victims than it needs
/// (one plan in flight per node), the DaemonSet's pods, the bare pods and the spare victims stay,
/// and every resize completes. The same disagreement, held: the cache keeps choosing the victim the
/// Eviction API refuses. Each refusal re-plans (`PreemptionReplanned`, one Event series), and the
/// same resize asks again after 1 s, then 2 s, 4 s … (at most 60 s) rather than every second for as
/// long as the budget's status stays stale.
#[tokio::test]
async fn a_budget_the_cache_disagrees_with_is_asked_again_ever_more_slowly() {
    let (env, _alone) = alone(&SERIAL).await;
    let (ns, _node, pods) = env.field_test("backoff").await;
    let (pdbs, _, _) = support::stale_budget(env, &ns, "filler", ("app", "filler"), 1, 1).await;

    let c = support::start(env, "refusal-backoff").await;
    c.wait_leading().await;
    const BLOCKED: &str = "resize_guard_preemptions_total{outcome=\"pdb_blocked\"}";
    let before = counter(&c, BLOCKED).await;
    support::resize_pending_on(env, &pods, &ns, "app", "550m").await;
    let mut refusals = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut first: Option<Instant> = None;
    while refusals.len() < 4 {
        let n = counter(&c, BLOCKED).await - before;
        if n as usize > refusals.len() {
            let at = *first.get_or_insert_with(Instant::now);
            refusals.push(at.elapsed());
        }
        assert!(
            Instant::now() < deadline,
            "refusals so far {refusals:?}: the controller stopped asking"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!("budget refusals after the first: {refusals:?}");
    // 1 s, 2 s, 4 s apart: the fourth at least 7 s after the first (every second: about 3 s).
    assert!(refusals[3] >= Duration::from_millis(6_500), "{refusals:?}");
    let replanned: Vec<_> = support::events(env, &ns, "PreemptionReplanned")
        .await
        .into_iter()
        .filter(|e| e.0 == "app")
        .collect();
    assert_eq!(replanned.len(), 1, "one Event series: {replanned:?}");
    assert!(
        !crate::scenario::terminating(&pods, "filler").await,
        "the budget held"
    );
    pdbs.delete("filler", &DeleteParams::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_flood_of_deferred_resizes_is_braked_by_rate_node_and_cap() {
    let (env, _alone) = alone(&SERIAL).await;
    let full = std::env::var("RESIZE_GUARD_FLOOD").is_ok_and(|v| v == "full");
    let (nodes, k): (u32, u32) = if full { (20, 10) } else { (4, 5) };
    let needed = k.div_ceil(3);
    // The cap is what one plan needs: with k equal-priority resizes racing for the room, a plan
    // must make its resize fit whichever of them the kubelet admits first (`victims/race.rs`).
    let (per_minute, cap) = (12.0_f64, f64::from(needed));
    // (Set after the start: installing resets the policy.)
    let c = support::start(env, "flood").await;
    resize_guard_harness::install::set_policy(
        env,
        &format!("mode: enforce\npreemption:\n  enabled: true\n  maxVictimsPerResize: {needed}\n  maxEvictionsPerMinute: 12\n"),
    )
    .await;
    c.wait_policy(|p| p.contains("maxEvictionsPerMinute: 12"))
        .await;
    c.wait_leading().await;

    let ns = env.namespace("flood").await;
    let pods: Api<Pod> = Api::namespaced(env.client().await, &ns);
    let mut node_of = std::collections::HashMap::new();
    let mut growing = Vec::new();
    let setup = (0..nodes).map(|n| {
        let (env, pods) = (env, pods.clone());
        async move {
            let cpu = format!("{}m", k * 100 + (needed + 2) * 300 + 100);
            let node = env.node(&format!("flood{n}"), &cpu, "8Gi").await;
            let mut names = Vec::new();
            let ds = owned_pod(&format!("n{n}-ds"), &node, "100m", "DaemonSet", "agent");
            create_running(&pods, &ds).await.unwrap();
            for v in 0..=needed {
                let name = format!("n{n}-v{v}");
                create_running(
                    &pods,
                    &owned_pod(&name, &node, "300m", "ReplicaSet", "batch"),
                )
                .await
                .unwrap();
                names.push((name, node.clone(), false));
            }
            // The youngest of the low-priority pods, the first a planner would take, but bare.
            let bare = guaranteed_pod(&format!("n{n}-bare"), &node, "low", "300m", "64Mi");
            create_running_as_is(&pods, &bare).await.unwrap();
            for i in 0..k {
                let name = format!("n{n}-app{i}");
                run_guaranteed(&pods, &name, &node, "high", "100m", "64Mi").await;
                names.push((name, node.clone(), true));
            }
            names.push((format!("n{n}-ds"), node, false));
            names
        }
    });
    for names in futures::future::join_all(setup).await {
        for (name, node, grows) in names {
            if grows {
                growing.push(name.clone());
            }
            node_of.insert(name, node);
        }
    }

    // Every resize at once, through pods/resize.
    let asked = Instant::now();
    support::resize_all(&pods, &growing, "200m").await;
    let deadline = Duration::from_secs(if full { 900 } else { 180 });
    for name in &growing {
        let left = deadline.saturating_sub(asked.elapsed());
        wait_pod(&pods, name, left, |p| {
            allocated_cpu(p).as_deref() == Some("200m") && resize_pending(p).is_none()
        })
        .await
        .unwrap();
    }
    let took = asked.elapsed();

    // What the controller did, from the audit log: its evictions, in order.
    let evictions: Vec<(f64, String)> =
        resize_guard_harness::audit::evictions(&env.cp, &[&ns], 201)
            .into_iter()
            .map(|e| (e.at, e.victim))
            .collect();
    eprintln!(
        "flood: {} resizes on {nodes} nodes completed in {took:?} with {} evictions",
        growing.len(),
        evictions.len()
    );
    // The bucket: in any stretch of w seconds, at most 2 + 12·w/60 (+1 for the moment between
    // admission and the request).
    for i in 0..evictions.len() {
        for j in i..evictions.len() {
            let w = evictions[j].0 - evictions[i].0;
            let count = (j - i + 1) as f64;
            assert!(
                count <= cap + per_minute * w / 60.0 + 1.0,
                "{count} evictions within {w:.1}s: {evictions:?}"
            );
        }
    }
    // One plan in flight per node: no node lost more victims than its resizes needed.
    for n in 0..nodes {
        let node = &node_of[&format!("n{n}-ds")];
        let lost = evictions
            .iter()
            .filter(|(_, v)| &node_of[v] == node)
            .count();
        assert!(
            lost <= needed as usize,
            "node {node}: {lost} victims for {needed} needed: {evictions:?}"
        );
        assert!(
            support::preempted(&pods, &[&format!("n{n}-ds")])
                .await
                .is_empty(),
            "the DaemonSet's pod stays"
        );
        assert!(
            support::preempted(&pods, &[&format!("n{n}-bare")])
                .await
                .is_empty(),
            "the bare pod stays"
        );
    }
    assert!(evictions.len() as f64 <= cap * growing.len() as f64);
    assert!(
        evictions.iter().all(|(_, v)| v.contains("-v")),
        "{evictions:?}"
    );
    let metrics = resize_guard_harness::install::http_get(c.health_port, "/metrics")
        .await
        .unwrap();
    assert!(
        metrics.contains("outcome=\"held_eviction_rate\"")
            && metrics.contains("outcome=\"held_node_busy\""),
        "both brakes held plans back: {metrics}"
    );
    drop(c);
    // Back to the shipped policy for the other tests.
    let cms: Api<ConfigMap> = Api::namespaced(env.client().await, "resize-guard");
    cms.delete("resize-guard", &Default::default())
        .await
        .unwrap();
    resize_guard_harness::install::apply_rbac(env).await;
}
