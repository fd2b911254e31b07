//! Every branch of the controller's decision.

use super::*;
use resize_guard_cluster::{Cluster, FixedCluster};
use resize_guard_policy::assess;
use resize_guard_policy::fixture::{
    INSTALL_NAMESPACE, PodBuilder, container, context, field_app, field_filler, field_node, node,
};
use resize_guard_policy::upstream::pod::{REASON_DEFERRED, REASON_INFEASIBLE};

fn now() -> Timestamp {
    Timestamp::from_second(1_000).unwrap()
}

/// How long the tests' controller has seen their resizes Deferred, unless a test says: long
/// enough never to be the shorter measure of `minDeferredSeconds`.
const SEEN_LONG_AGO: Duration = Duration::from_secs(3600);

/// The field test's app (prod/app on n1, 250m Guaranteed, priority 1000) resizing to `cpu`,
/// pending with the kubelet's `reason` and `message`.
fn resizing_app(cpu: &str, reason: &str, message: &str) -> PodBuilder {
    field_app("250m")
        .resize("app", "cpu", cpu)
        .resize_pending(reason, message)
}

/// The field test's resize to 550m, Deferred since 990 s.
fn deferred_app() -> Pod {
    deferred_to(550)
}

/// The field test's app resizing to `milli` CPU, Deferred since 990 s (the kubelet saw 1500m
/// used of 1930m).
fn deferred_to(milli: u32) -> Pod {
    let message = format!(
        "Node didn't have enough resource: cpu, requested: {milli}, used: 1500, capacity: 1930"
    );
    let mut p = resizing_app(&format!("{milli}m"), REASON_DEFERRED, &message).build();
    let cond = &mut p.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
    cond.last_transition_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::from_second(990).unwrap(),
    ));
    p
}

fn filler(terminating: bool) -> Pod {
    let b = field_filler().priority(100);
    if terminating { b.terminating() } else { b }.build()
}

fn verdict(pod: &Pod, others: Vec<Pod>, policy: &Policy) -> Verdict {
    let mut pods = vec![pod.clone()];
    pods.extend(others);
    let cluster = FixedCluster::new(policy.clone(), vec![field_node()], pods, vec![]);
    let ledger = cluster.ledger("n1");
    let budgets = cluster.budgets();
    assess(pod, &context(ledger.as_deref(), &budgets, policy))
}

/// `decide` with every victim's own grace period 45 s, and the recorded plan's victims in the
/// states given, in the plan's order (the tests' shorthand; `decide` reads them by key).
fn decide(
    pod: &Pod,
    verdict: &Verdict,
    plan: Option<&PlanRecord>,
    victims: &[VictimState],
    policy: &Policy,
    now: Timestamp,
) -> Decision {
    let states: VictimStates = plan
        .iter()
        .flat_map(|p| p.victims.iter().cloned())
        .zip(victims.iter().cloned())
        .collect();
    super::decide(
        pod,
        &super::Inputs {
            verdict,
            plan,
            victims: &states,
            policy,
            install_namespace: INSTALL_NAMESPACE,
            now,
            grace: &|_| Some(45),
            seen_deferred: SEEN_LONG_AGO,
            pending_on_node: 0,
        },
    )
}

/// The deferred app on n1 beside the filler, judged under a policy: most tests' starting point.
struct Scene {
    pod: Pod,
    policy: Policy,
    verdict: Verdict,
}

impl Scene {
    /// The filler running (a victim to choose) or already terminating (room being freed).
    fn new(policy: Policy, filler_terminating: bool) -> Self {
        let pod = deferred_app();
        let verdict = verdict(&pod, vec![filler(filler_terminating)], &policy);
        Scene {
            pod,
            policy,
            verdict,
        }
    }

    /// `decide` at `now()` with no plan recorded.
    fn fresh(&self) -> Decision {
        self.resume(None, &[])
    }

    /// `decide` at `now()` with `plan` recorded and its victims in `victims`, in the plan's order.
    fn resume(&self, plan: Option<&PlanRecord>, victims: &[VictimState]) -> Decision {
        decide(&self.pod, &self.verdict, plan, victims, &self.policy, now())
    }
}

/// A `Failed` decision's reason and note, after checking it retries after [`FAILED_RETRY`].
fn failed(d: Decision) -> (&'static str, String) {
    match d {
        Decision::Failed {
            reason,
            note,
            after,
        } => {
            assert_eq!(after, FAILED_RETRY, "{reason}: {note}");
            (reason, note)
        }
        other => panic!("{other:?}"),
    }
}

/// Whether `text` says each of `parts`.
fn says_all(text: &str, parts: &[&str]) -> bool {
    parts.iter().all(|part| text.contains(part))
}

/// A victim's key in the tests' `batch` namespace.
fn batch_key(name: &str, uid: &str) -> PodKey {
    PodKey {
        namespace: "batch".into(),
        name: name.into(),
        uid: uid.into(),
    }
}

/// A plan recorded at `at` for `generation`, naming `victims` in order, unsealed.
fn plan_at(generation: i64, victims: Vec<PodKey>, at: Timestamp) -> PlanRecord {
    PlanRecord {
        generation,
        victims,
        time: at,
    }
}

/// A plan recorded now for `generation`, naming `batch` pods `(name, uid)` in order.
fn plan(generation: i64, victims: &[(&str, &str)]) -> PlanRecord {
    let keys = victims.iter().map(|(n, u)| batch_key(n, u)).collect();
    plan_at(generation, keys, now())
}

#[test]
fn a_deferred_resize_gets_a_fresh_one_victim_plan_recorded_after_the_eviction() {
    match Scene::new(Policy::default(), false).fresh() {
        Decision::Preempt {
            record: Record::After(rec),
            victims,
            note,
            after,
            ..
        } => {
            assert_eq!(after, SHORT_WAIT);
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
fn terminating_pods_covering_the_shortfall_mean_waiting_not_preempting() {
    let d = Scene::new(Policy::default(), true).fresh();
    assert!(
        matches!(&d, Decision::Awaiting { on: Awaited::Unplanned, why } if why.contains("batch/filler")),
        "{d:?}"
    );
}

#[test]
fn no_plan_is_reported_with_its_reason() {
    let mut policy = Policy::default();
    policy.preemption.enabled = false;
    let (reason, note) = failed(Scene::new(policy, false).fresh());
    assert_eq!(reason, "PreemptionDisabled");
    assert!(note.contains("Node didn't have enough resource"), "{note}");
}

#[test]
fn audit_mode_only_says_what_it_would_preempt() {
    let mut policy = Policy::default();
    policy.mode = resize_guard_policy::policy::Mode::Audit;
    let d = Scene::new(policy, false).fresh();
    assert!(
        matches!(&d, Decision::WouldPreempt { note, after } if note.contains("batch/filler") && *after == WOULD_PREEMPT_RECHECK),
        "{d:?}"
    );
}

#[test]
fn min_deferred_seconds_delays_preemption() {
    let mut policy = Policy::default();
    policy.preemption.min_deferred_seconds = 30;
    match Scene::new(policy, false).fresh() {
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
    let rec = plan_at(2, vec![], Timestamp::from_second(997).unwrap());
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
    match decide(&pod, &v, None, &[], &policy, now()) {
        Decision::Awaiting {
            on: Awaited::Kubelet,
            why,
        } => assert!(
            says_all(
                &why,
                &[
                    "counts the resize as fitting on node n1",
                    "other pods hold cpu 0",
                    "allocatable cpu 1930m",
                    "the kubelet keeps it Deferred: \"Node didn't have enough resource: cpu, requested: 550, used: 1500, capacity: 1930\"",
                ]
            ),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn infeasible_resizes_are_reverted_to_actual_resources_when_policy_asks() {
    let pod = resizing_app(
        "2430m",
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
    // Never where resize-guard must leave pods alone: an excluded namespace, and kube-system
    // and the install namespace even when kube-system's resizes are judged.
    policy.namespaces.exclude = vec!["payments".into()];
    for namespace in ["payments", "kube-system", INSTALL_NAMESPACE] {
        let mut elsewhere = pod.clone();
        elsewhere.metadata.namespace = Some(namespace.into());
        assert_eq!(
            decide(&elsewhere, &v, None, &[], &policy, now()),
            Decision::Idle,
            "{namespace}"
        );
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
    let pod = resizing_app(
        "2430m",
        REASON_DEFERRED,
        "Node didn't have enough resource: cpu, requested: 2430, used: 1500, capacity: 1930",
    )
    .build();
    let policy = Policy::default();
    let v = verdict(&pod, vec![filler(false)], &policy);
    assert!(matches!(v, Verdict::Infeasible(_)), "{v:?}");
    let never = |d: Decision| {
        let (reason, note) = failed(d);
        assert_eq!(reason, "NeverFits");
        assert!(
            note.contains("cpu 2430m")
                && note.contains("allocatable cpu is 1930m")
                && note.contains("requested: 2430, used: 1500, capacity: 1930")
                && note.contains("preempts nothing"),
            "{note}"
        );
    };
    never(decide(&pod, &v, None, &[], &policy, now()));
    let rec = plan(2, &[("filler", "u1")]);
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
    use resize_guard_policy::policy::PdbMode::{BestEffort, Respect};
    // (the policy's cap, its PDB mode, the victim's own grace period 45 s known or not cached,
    // the grace period sent, how)
    let cases = [
        // No cap by default: the victim's own 45 s, as kube-scheduler honours it.
        (None, Respect, true, 45, Via::Eviction),
        (Some(60), Respect, true, 45, Via::Eviction),
        (Some(10), BestEffort, true, 10, Via::Delete),
        // Unknown (not cached): the API's default of 30 s, still capped.
        (Some(10), BestEffort, false, 10, Via::Delete),
        (Some(300), BestEffort, false, 30, Via::Delete),
    ];
    for (cap, pdb, known, grace_seconds, via) in cases {
        let mut policy = Policy::default();
        policy.preemption.max_grace_period_seconds = cap;
        policy.preemption.pdb = pdb;
        let s = Scene::new(policy, false);
        let own = |_: &PodKey| known.then_some(45);
        let d = super::decide(
            &s.pod,
            &super::Inputs {
                verdict: &s.verdict,
                plan: None,
                victims: &VictimStates::default(),
                policy: &s.policy,
                install_namespace: INSTALL_NAMESPACE,
                now: now(),
                grace: &own,
                seen_deferred: SEEN_LONG_AGO,
                pending_on_node: 0,
            },
        );
        match d {
            Decision::Preempt { victims, .. } => assert_eq!(
                (victims[0].grace_seconds, victims[0].via),
                (grace_seconds, via),
                "cap {cap:?}, {pdb:?}, own grace known: {known}"
            ),
            other => panic!("cap {cap:?}, {pdb:?}, own grace known: {known}: {other:?}"),
        }
    }
}

#[test]
fn a_plan_with_several_victims_is_recorded_before_any_is_touched() {
    let pod = deferred_to(1000);
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

mod recorded;
mod waits;

#[test]
fn every_decision_says_when_to_look_again() {
    let d = Scene::new(Policy::default(), false).fresh();
    assert_eq!(d.requeue(), Some(SHORT_WAIT), "{d:?}");
    let untrusted = plan_untrusted(&Untrusted::BadSeal);
    assert_eq!(untrusted.requeue(), Some(SHORT_WAIT));
    for waits_for_a_change in [
        Decision::Idle,
        Decision::ClearPlan,
        Decision::Unblocked { seconds: 1.0 },
        Decision::Revert {
            patch: serde_json::json!({}),
            note: String::new(),
        },
    ] {
        assert_eq!(waits_for_a_change.requeue(), None, "{waits_for_a_change:?}");
    }
    let stalled = Decision::Stalled {
        note: String::new(),
        after: STALLED_RECHECK,
    };
    assert_eq!(stalled.requeue(), Some(STALLED_RECHECK));
}
