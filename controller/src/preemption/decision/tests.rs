//! Every branch of the controller's decision.

use super::*;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use resize_guard_cluster::{Cluster, FixedCluster};
use resize_guard_policy::fixture::{PodBuilder, container, node};
use resize_guard_policy::pod::{REASON_DEFERRED, REASON_INFEASIBLE};
use resize_guard_policy::{Context, assess};

fn now() -> Timestamp {
    Timestamp::from_second(1_000).unwrap()
}

fn deferred_app() -> Pod {
    let mut p = PodBuilder::new("prod", "app")
        .node("n1")
        .priority(1000)
        .container(container("app").guaranteed("250m", "256Mi"))
        .running(0)
        .resize("app", "cpu", "550m")
        .resize_pending(
            REASON_DEFERRED,
            "Node didn't have enough resource: cpu, requested: 550, used: 1500, capacity: 1930",
        )
        .build();
    let cond = &mut p.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
    cond.last_transition_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::from_second(990).unwrap(),
    ));
    p
}

fn filler(terminating: bool) -> Pod {
    let b = PodBuilder::new("batch", "filler")
        .owned_by("ReplicaSet")
        .node("n1")
        .owned_by("ReplicaSet")
        .priority(100)
        .container(container("w").guaranteed("1500m", "256Mi"))
        .running(5);
    if terminating { b.terminating() } else { b }.build()
}

fn verdict(pod: &Pod, others: Vec<Pod>, policy: &Policy) -> Verdict {
    let mut pods = vec![pod.clone()];
    pods.extend(others);
    let cluster = FixedCluster::new(
        policy.clone(),
        vec![node("n1", "1930m", "3Gi")],
        pods,
        vec![],
    );
    let ledger = cluster.ledger("n1");
    let budgets = cluster.budgets();
    assess(
        pod,
        &Context {
            ledger: ledger.as_deref(),
            budgets: &budgets,
            policy,
            install_namespace: "resize-guard",
            minor: None,
        },
    )
}

/// `decide` with every victim's own grace period 45 s.
fn decide(
    pod: &Pod,
    verdict: &Verdict,
    plan: Option<&PlanRecord>,
    victims: &[VictimState],
    policy: &Policy,
    now: Timestamp,
) -> Decision {
    super::decide(pod, verdict, plan, victims, policy, now, &|_| Some(45))
}

#[test]
fn a_deferred_resize_gets_a_fresh_one_victim_plan_recorded_after_the_eviction() {
    let pod = deferred_app();
    let policy = Policy::default();
    let v = verdict(&pod, vec![filler(false)], &policy);
    match decide(&pod, &v, None, &[], &policy, now()) {
        Decision::Preempt {
            record: Record::After(rec),
            victims,
            note,
            ..
        } => {
            assert_eq!(rec.generation, 2);
            let planned: Vec<PodKey> = victims.iter().map(|r| r.victim.clone()).collect();
            assert_eq!(rec.victims, planned);
            assert_eq!(victims[0].victim.name, "filler");
            assert!(
                note.contains("batch/filler (priority 100)") && note.contains("cpu 120m"),
                "{note}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_recorded_plan_is_resumed_not_rechosen() {
    let pod = deferred_app();
    let policy = Policy::default();
    let v = verdict(&pod, vec![filler(false)], &policy);
    let rec = PlanRecord {
        generation: 2,
        victims: vec![
            PodKey {
                namespace: "batch".into(),
                name: "first".into(),
                uid: "u1".into(),
            },
            PodKey {
                namespace: "batch".into(),
                name: "second".into(),
                uid: "u2".into(),
            },
        ],
        time: now(),
        mac: String::new(),
    };
    let d = decide(
        &pod,
        &v,
        Some(&rec),
        &[VictimState::Terminating, VictimState::Present],
        &policy,
        now(),
    );
    match d {
        Decision::Preempt {
            record: Record::Recorded,
            victims,
            ..
        } => assert_eq!(victims[0].victim.name, "second"),
        other => panic!("{other:?}"),
    }
    let d = decide(
        &pod,
        &v,
        Some(&rec),
        &[VictimState::Terminating, VictimState::Gone],
        &policy,
        now(),
    );
    assert!(matches!(d, Decision::Wait { .. }), "{d:?}");
}

#[test]
fn when_every_planned_victim_is_gone_and_still_deferred_it_plans_again() {
    let pod = deferred_app();
    let policy = Policy::default();
    let v = verdict(&pod, vec![filler(false)], &policy);
    let rec = PlanRecord {
        generation: 2,
        victims: vec![PodKey {
            namespace: "batch".into(),
            name: "old".into(),
            uid: "u0".into(),
        }],
        time: now(),
        mac: String::new(),
    };
    let d = decide(&pod, &v, Some(&rec), &[VictimState::Gone], &policy, now());
    assert!(
        matches!(
            d,
            Decision::Preempt {
                record: Record::After(_),
                ..
            }
        ),
        "{d:?}"
    );
}

#[test]
fn a_plan_for_an_older_generation_is_not_resumed() {
    let pod = deferred_app();
    let policy = Policy::default();
    let v = verdict(&pod, vec![filler(false)], &policy);
    let rec = PlanRecord {
        generation: 1,
        victims: vec![PodKey {
            namespace: "batch".into(),
            name: "x".into(),
            uid: "ux".into(),
        }],
        time: now(),
        mac: String::new(),
    };
    let d = decide(
        &pod,
        &v,
        Some(&rec),
        &[VictimState::Present],
        &policy,
        now(),
    );
    match d {
        Decision::Preempt {
            record: Record::After(r),
            victims,
            ..
        } => {
            assert_eq!(r.generation, 2);
            assert_eq!(victims[0].victim.name, "filler");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn terminating_pods_covering_the_shortfall_mean_waiting_not_preempting() {
    let pod = deferred_app();
    let policy = Policy::default();
    let v = verdict(&pod, vec![filler(true)], &policy);
    let d = decide(&pod, &v, None, &[], &policy, now());
    assert!(
        matches!(&d, Decision::Wait { why, .. } if why.contains("batch/filler")),
        "{d:?}"
    );
}

#[test]
fn no_plan_is_reported_with_its_reason() {
    let pod = deferred_app();
    let mut policy = Policy::default();
    policy.preemption.enabled = false;
    let v = verdict(&pod, vec![filler(false)], &policy);
    match decide(&pod, &v, None, &[], &policy, now()) {
        Decision::Failed { reason, note } => {
            assert_eq!(reason, "PreemptionDisabled");
            assert!(note.contains("Node didn't have enough resource"), "{note}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn audit_mode_only_says_what_it_would_preempt() {
    let pod = deferred_app();
    let mut policy = Policy::default();
    policy.mode = resize_guard_policy::policy::Mode::Audit;
    let v = verdict(&pod, vec![filler(false)], &policy);
    let d = decide(&pod, &v, None, &[], &policy, now());
    assert!(
        matches!(&d, Decision::WouldPreempt { note } if note.contains("batch/filler")),
        "{d:?}"
    );
}

#[test]
fn min_deferred_seconds_delays_preemption() {
    let pod = deferred_app();
    let mut policy = Policy::default();
    policy.preemption.min_deferred_seconds = 30;
    let v = verdict(&pod, vec![filler(false)], &policy);
    match decide(&pod, &v, None, &[], &policy, now()) {
        Decision::Wait { after, .. } => assert_eq!(after, Duration::from_secs(20)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn not_deferred_pods_are_idle_and_unblocked_ones_clear_their_plan() {
    let running = PodBuilder::new("prod", "app")
        .node("n1")
        .container(container("app").guaranteed("250m", "256Mi"))
        .running(0)
        .build();
    let policy = Policy::default();
    let v = verdict(&running, vec![], &policy);
    assert_eq!(
        decide(&running, &v, None, &[], &policy, now()),
        Decision::Idle
    );
    let rec = PlanRecord {
        generation: 2,
        victims: vec![],
        time: Timestamp::from_second(997).unwrap(),
        mac: String::new(),
    };
    assert_eq!(
        decide(&running, &v, Some(&rec), &[], &policy, now()),
        Decision::Unblocked { seconds: 3.0 }
    );
}

#[test]
fn a_deferred_resize_that_fits_now_waits_for_the_kubelet() {
    let pod = deferred_app();
    let policy = Policy::default();
    let v = verdict(&pod, vec![], &policy);
    assert!(matches!(
        decide(&pod, &v, None, &[], &policy, now()),
        Decision::Wait { .. }
    ));
}

#[test]
fn infeasible_resizes_are_reverted_to_actual_resources_when_policy_asks() {
    let pod = PodBuilder::new("prod", "app")
        .node("n1")
        .container(container("app").guaranteed("250m", "256Mi"))
        .running(0)
        .resize("app", "cpu", "2430m")
        .resize_pending(
            REASON_INFEASIBLE,
            "Node didn't have enough capacity: cpu, requested: 2430, capacity: 1930",
        )
        .build();
    let mut policy = Policy::default();
    let v = verdict(&pod, vec![], &policy);
    assert_eq!(
        decide(&pod, &v, None, &[], &policy, now()),
        Decision::Idle,
        "off by default"
    );
    policy.feasibility.revert_infeasible = true;
    match decide(&pod, &v, None, &[], &policy, now()) {
        Decision::Revert { patch, note } => {
            assert_eq!(
                patch["spec"]["containers"][0]["resources"]["requests"]["cpu"],
                "250m"
            );
            assert_eq!(
                patch["spec"]["containers"][0]["resources"]["limits"]["cpu"],
                "250m"
            );
            assert!(note.contains("requested: 2430"), "{note}");
        }
        other => panic!("{other:?}"),
    }
    policy.mode = resize_guard_policy::policy::Mode::Audit;
    assert_eq!(
        decide(&pod, &v, None, &[], &policy, now()),
        Decision::Idle,
        "audit mode changes nothing"
    );
}

/// A Deferred resize larger than allocatable (a v1.37 kubelet keeps it Deferred for ever; the
/// API server refuses it unless allocatable shrank after it was stored): a low-priority pod is
/// on the node, yet nothing is preempted — not afresh, not by resuming a recorded plan.
#[test]
fn a_deferred_resize_that_can_never_fit_preempts_nothing() {
    let pod = PodBuilder::new("prod", "app")
        .node("n1")
        .priority(1000)
        .container(container("app").guaranteed("250m", "256Mi"))
        .running(0)
        .resize("app", "cpu", "2430m")
        .resize_pending(
            REASON_DEFERRED,
            "Node didn't have enough resource: cpu, requested: 2430, used: 1500, capacity: 1930",
        )
        .build();
    let policy = Policy::default();
    let v = verdict(&pod, vec![filler(false)], &policy);
    assert!(matches!(v, Verdict::Infeasible(_)), "{v:?}");
    let never = |d: Decision| match d {
        Decision::Failed { reason, note } => {
            assert_eq!(reason, "NeverFits");
            assert!(
                note.contains("cpu 2430m")
                    && note.contains("allocatable cpu is 1930m")
                    && note.contains("requested: 2430, used: 1500, capacity: 1930")
                    && note.contains("preempts nothing"),
                "{note}"
            );
        }
        other => panic!("{other:?}"),
    };
    never(decide(&pod, &v, None, &[], &policy, now()));
    let rec = PlanRecord {
        generation: 2,
        victims: vec![PodKey {
            namespace: "batch".into(),
            name: "filler".into(),
            uid: "u1".into(),
        }],
        time: now(),
        mac: String::new(),
    };
    never(decide(
        &pod,
        &v,
        Some(&rec),
        &[VictimState::Present],
        &policy,
        now(),
    ));
}

#[test]
fn each_victim_goes_with_its_own_grace_period_capped_only_when_policy_says_through_the_api_policy_names()
 {
    let pod = deferred_app();
    let mut policy = Policy::default();
    let v = verdict(&pod, vec![filler(false)], &policy);
    let removal = |d: Decision| match d {
        Decision::Preempt { victims, .. } => victims[0].clone(),
        other => panic!("{other:?}"),
    };
    // No cap by default: the victim's own 45 s, as kube-scheduler honours it.
    let r = removal(decide(&pod, &v, None, &[], &policy, now()));
    assert_eq!((r.grace_seconds, r.via), (45, Via::Eviction));
    policy.preemption.max_grace_period_seconds = Some(60);
    let r = removal(decide(&pod, &v, None, &[], &policy, now()));
    assert_eq!((r.grace_seconds, r.via), (45, Via::Eviction));

    policy.preemption.max_grace_period_seconds = Some(10);
    policy.preemption.pdb = resize_guard_policy::policy::PdbMode::BestEffort;
    let v = verdict(&pod, vec![filler(false)], &policy);
    let r = removal(decide(&pod, &v, None, &[], &policy, now()));
    assert_eq!((r.grace_seconds, r.via), (10, Via::Delete));

    // Unknown (not cached): the API's default of 30 s, still capped.
    let d = super::decide(&pod, &v, None, &[], &policy, now(), &|_| None);
    assert_eq!(removal(d).grace_seconds, 10);
    policy.preemption.max_grace_period_seconds = Some(300);
    let d = super::decide(&pod, &v, None, &[], &policy, now(), &|_| None);
    assert_eq!(removal(d).grace_seconds, 30);
}

#[test]
fn a_plan_with_several_victims_is_recorded_before_any_is_touched() {
    let mut pod = deferred_app();
    pod.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap()
        .insert("cpu".into(), Quantity("1000m".into()));
    let small = |name: &str| {
        PodBuilder::new("batch", name)
            .owned_by("ReplicaSet")
            .node("n1")
            .owned_by("ReplicaSet")
            .priority(100)
            .container(container("w").guaranteed("400m", "64Mi"))
            .running(5)
            .build()
    };
    let policy = Policy::default();
    let others = ["a", "b", "c", "d"].map(small).to_vec();
    let v = verdict(&pod, others, &policy);
    match decide(&pod, &v, None, &[], &policy, now()) {
        Decision::Preempt {
            record: Record::Before(rec),
            victims,
            ..
        } => {
            assert!(victims.len() > 1, "{victims:?}");
            assert_eq!(rec.victims.len(), victims.len());
        }
        other => panic!("{other:?}"),
    }
}

/// An Eviction API answer as kube-apiserver sends it (`code`, causes of `reason`, Retry-After).
fn answer(code: u16, causes: &[(&str, &str)], retry_after: u32) -> kube::core::Status {
    serde_json::from_value(serde_json::json!({
        "status": "Failure", "code": code, "reason": "TooManyRequests",
        "message": "Cannot evict pod as it would violate the pod's disruption budget.",
        "details": {
            "retryAfterSeconds": retry_after,
            "causes": causes.iter().map(|(reason, message)| serde_json::json!({"reason": reason, "message": message})).collect::<Vec<_>>(),
        }
    }))
    .unwrap()
}

#[test]
fn a_budget_refusal_drops_the_plan_and_chooses_again_soon_saying_which_budget() {
    let victim = PodKey {
        namespace: "batch".into(),
        name: "guarded".into(),
        uid: "u".into(),
    };
    // Both of upstream's budget answers: no disruption allowed, and a status not yet computed.
    for (message, retry) in [
        (
            "The disruption budget web needs 2 healthy pods and has 2 currently",
            0,
        ),
        (
            "The disruption budget web is still being processed by the server.",
            10,
        ),
    ] {
        let refusal = answer(429, &[("DisruptionBudget", message)], retry);
        match eviction_refused(&victim, &refusal) {
            Some(Decision::Replan { why, after }) => {
                assert!(why.contains("batch/guarded"), "{why}");
                assert!(why.contains(message), "{why}");
                assert_eq!(after, REPLAN_WAIT);
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn throttling_keeps_the_plan_for_as_long_as_the_server_asks_within_bounds() {
    let victim = PodKey {
        namespace: "batch".into(),
        name: "v".into(),
        uid: "u".into(),
    };
    for (code, retry, wait) in [
        (429, 0, THROTTLE_WAIT),
        (429, 5, Duration::from_secs(5)),
        (503, 0, THROTTLE_WAIT),
        (504, 3600, MAX_THROTTLE_WAIT),
    ] {
        match eviction_refused(&victim, &answer(code, &[], retry)) {
            Some(Decision::Throttled { why, after }) => {
                assert_eq!(after, wait, "{code} {retry}");
                assert!(why.contains(&format!("HTTP {code}")), "{why}");
            }
            other => panic!("{code}: {other:?}"),
        }
    }
    // Two budgets over the victim: upstream's 500 re-plans (the next plan leaves it alone).
    let mut two = answer(500, &[], 0);
    two.message = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.".into();
    assert!(matches!(
        eviction_refused(&victim, &two),
        Some(Decision::Replan { why, .. }) if why.contains("more than one PodDisruptionBudget")
    ));
    // A 429 whose cause is not a budget is throttling too; another 500 or a 403 is not a
    // refusal this decides on.
    assert!(matches!(
        eviction_refused(&victim, &answer(429, &[("FieldValueInvalid", "x")], 0)),
        Some(Decision::Throttled { .. })
    ));
    for code in [500, 403, 404] {
        assert!(eviction_refused(&victim, &answer(code, &[], 0)).is_none());
    }
}

fn two_victim_plan() -> PlanRecord {
    let key = |name: &str, uid: &str| PodKey {
        namespace: "batch".into(),
        name: name.into(),
        uid: uid.into(),
    };
    PlanRecord {
        generation: 2,
        victims: vec![key("first", "u1"), key("second", "u2")],
        time: now(),
        mac: String::new(),
    }
}

#[test]
fn a_recorded_plan_naming_a_pod_a_fresh_plan_could_not_choose_is_dropped_with_the_reason() {
    let pod = deferred_app();
    let policy = Policy::default();
    let v = verdict(&pod, vec![filler(false)], &policy);
    let d = decide(
        &pod,
        &v,
        Some(&two_victim_plan()),
        &[
            VictimState::Present,
            VictimState::Ineligible("it is on node n2, not the resizing pod's node n1".into()),
        ],
        &policy,
        now(),
    );
    match d {
        Decision::DropPlan { why } => assert_eq!(
            why,
            "a fresh plan could not choose batch/second: it is on node n2, not the resizing pod's node n1"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_recorded_plan_over_the_victim_cap_is_dropped_not_resumed() {
    let pod = deferred_app();
    let mut policy = Policy::default();
    policy.preemption.max_victims_per_resize = 1;
    let v = verdict(&pod, vec![filler(false)], &policy);
    let d = decide(
        &pod,
        &v,
        Some(&two_victim_plan()),
        &[VictimState::Present, VictimState::Present],
        &policy,
        now(),
    );
    match d {
        Decision::DropPlan { why } => assert!(why.contains("maxVictimsPerResize (1)"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_recorded_plan_is_not_resumed_once_preemption_is_off_or_in_audit() {
    let pod = deferred_app();
    let mut policy = Policy::default();
    policy.preemption.enabled = false;
    let v = verdict(&pod, vec![filler(false)], &policy);
    let both = [VictimState::Present, VictimState::Present];
    let d = decide(&pod, &v, Some(&two_victim_plan()), &both, &policy, now());
    assert!(
        matches!(&d, Decision::DropPlan { why } if why.contains("preemption.enabled: false")),
        "{d:?}"
    );
    let mut policy = Policy::default();
    policy.mode = resize_guard_policy::policy::Mode::Audit;
    let v = verdict(&pod, vec![filler(false)], &policy);
    let d = decide(&pod, &v, Some(&two_victim_plan()), &both, &policy, now());
    assert!(
        matches!(&d, Decision::DropPlan { why } if why.contains("audit")),
        "{d:?}"
    );
}

#[test]
fn a_recorded_victim_is_not_preempted_while_terminating_pods_already_cover_the_resize() {
    let pod = deferred_app();
    let policy = Policy::default();
    // The filler is terminating and frees all the room: a fresh plan needs no victim.
    let v = verdict(&pod, vec![filler(true)], &policy);
    let d = decide(
        &pod,
        &v,
        Some(&two_victim_plan()),
        &[VictimState::Terminating, VictimState::Present],
        &policy,
        now(),
    );
    assert!(matches!(d, Decision::Wait { .. }), "{d:?}");
}

#[test]
fn a_recorded_victim_is_judged_where_it_is_now_by_the_rules_of_a_fresh_plan() {
    let app = deferred_app();
    let policy = Policy::default();
    let low = |ns: &str, name: &str, node: &str| {
        PodBuilder::new(ns, name)
            .node(node)
            .owned_by("ReplicaSet")
            .priority(100)
            .container(container("w").guaranteed("100m", "64Mi"))
            .running(5)
    };
    let here = low("batch", "here", "n1").build();
    let far = low("batch", "far", "n2").build();
    let system = low("kube-system", "dns", "n1").build();
    let going = low("batch", "going", "n1").terminating().build();
    let higher = low("batch", "higher", "n1").priority(5000).build();
    let cluster = FixedCluster::new(
        policy.clone(),
        vec![node("n1", "1930m", "3Gi"), node("n2", "1930m", "3Gi")],
        vec![
            app.clone(),
            here.clone(),
            far.clone(),
            system.clone(),
            going.clone(),
            higher.clone(),
        ],
        vec![],
    );
    let ledger = cluster.ledger("n1");
    let state = |p: &Pod| {
        let entry = resize_guard_policy::ledger::LedgerEntry::new(p);
        victim_state(
            &PodKey::of(p),
            Some(&entry),
            &app,
            ledger.as_deref(),
            &policy,
            "resize-guard",
        )
    };
    let ineligible = |p: &Pod| match state(p) {
        VictimState::Ineligible(why) => why,
        other => panic!("{}: {other:?}", PodKey::of(p)),
    };
    assert_eq!(state(&here), VictimState::Present);
    assert_eq!(state(&going), VictimState::Terminating);
    assert_eq!(ineligible(&far), "it is not on the resizing pod's node n1");
    assert!(ineligible(&system).starts_with("its namespace is protected"));
    assert!(ineligible(&higher).starts_with("its priority is not below"));
    assert_eq!(ineligible(&app), "it is the resizing pod itself");
    // Gone, or another pod under the recorded name now.
    let key = PodKey::of(&here);
    assert_eq!(
        victim_state(&key, None, &app, ledger.as_deref(), &policy, "resize-guard"),
        VictimState::Gone
    );
    let mut renamed = resize_guard_policy::ledger::LedgerEntry::new(&here);
    renamed.key.name = "other".into();
    assert_eq!(
        victim_state(
            &key,
            Some(&renamed),
            &app,
            ledger.as_deref(),
            &policy,
            "resize-guard"
        ),
        VictimState::Gone
    );
}

#[test]
fn a_victim_terminating_long_past_its_grace_period_stalls_the_plan_with_a_warning() {
    let pod = deferred_app();
    let policy = Policy::default();
    let v = verdict(&pod, vec![filler(false)], &policy);
    let rec = two_victim_plan();
    let states = [VictimState::Terminating, VictimState::Gone];
    let at = |secs: i64| Timestamp::from_second(now().as_second() + secs).unwrap();
    // Grace 45 s (the tests' victims) + 60 s of slack: waiting until then, stalled after.
    assert!(matches!(
        decide(&pod, &v, Some(&rec), &states, &policy, at(105)),
        Decision::Wait { .. }
    ));
    match decide(&pod, &v, Some(&rec), &states, &policy, at(106)) {
        Decision::Stalled { note, after } => {
            assert!(note.contains("batch/first (grace period 45s)"), "{note}");
            assert!(!note.contains("batch/second"), "{note}");
            assert_eq!(after, STALLED_RECHECK);
        }
        other => panic!("{other:?}"),
    }
    // A grace cap shortens the wait.
    let mut capped = Policy::default();
    capped.preemption.max_grace_period_seconds = Some(5);
    assert!(matches!(
        decide(&pod, &v, Some(&rec), &states, &capped, at(66)),
        Decision::Stalled { .. }
    ));
}
