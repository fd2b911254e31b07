//! Resuming a recorded plan: each victim read with its own state, every rule of a fresh plan
//! re-applied, a victim stuck terminating reported.

use super::*;

#[test]
fn a_recorded_plan_is_resumed_not_rechosen() {
    let s = Scene::new(Policy::default(), false);
    let rec = two_victim_plan();
    match s.resume(
        Some(&rec),
        &[VictimState::Terminating, VictimState::Present],
    ) {
        Decision::Preempt {
            record: Record::Recorded,
            victims,
            ..
        } => assert_eq!(victims[0].victim.name, "second"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn when_every_planned_victim_is_gone_and_still_deferred_it_plans_again() {
    let rec = plan(2, &[("old", "u0")]);
    let d = Scene::new(Policy::default(), false).resume(Some(&rec), &[VictimState::Gone]);
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
    let rec = plan(1, &[("x", "ux")]);
    match Scene::new(Policy::default(), false).resume(Some(&rec), &[VictimState::Present]) {
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

fn two_victim_plan() -> PlanRecord {
    plan(2, &[("first", "u1"), ("second", "u2")])
}

#[test]
fn a_recorded_plan_naming_a_pod_a_fresh_plan_could_not_choose_is_dropped_with_the_reason() {
    let d = Scene::new(Policy::default(), false).resume(
        Some(&two_victim_plan()),
        &[
            VictimState::Present,
            VictimState::Ineligible("it is on node n2, not the resizing pod's node n1".into()),
        ],
    );
    match d {
        Decision::DropPlan { why, after } => assert_eq!(
            (why.as_str(), after),
            (
                "a fresh plan could not choose batch/second: it is on node n2, not the resizing pod's node n1",
                SHORT_WAIT
            )
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_recorded_plan_over_the_victim_cap_is_dropped_not_resumed() {
    let mut policy = Policy::default();
    policy.preemption.max_victims_per_resize = 1;
    let d = Scene::new(policy, false).resume(
        Some(&two_victim_plan()),
        &[VictimState::Present, VictimState::Present],
    );
    match d {
        Decision::DropPlan { why, .. } => assert!(why.contains("maxVictimsPerResize (1)"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_recorded_plan_is_not_resumed_once_preemption_is_off_or_in_audit() {
    let mut policy = Policy::default();
    policy.preemption.enabled = false;
    let both = [VictimState::Present, VictimState::Present];
    let d = Scene::new(policy, false).resume(Some(&two_victim_plan()), &both);
    assert!(
        matches!(&d, Decision::DropPlan { why, .. } if why.contains("preemption.enabled: false")),
        "{d:?}"
    );
    let mut policy = Policy::default();
    policy.mode = resize_guard_policy::policy::Mode::Audit;
    let d = Scene::new(policy, false).resume(Some(&two_victim_plan()), &both);
    assert!(
        matches!(&d, Decision::DropPlan { why, .. } if why.contains("audit")),
        "{d:?}"
    );
}

#[test]
fn a_recorded_plan_awaits_its_victims_while_the_room_is_on_its_way() {
    use VictimState::{Gone, Present, Terminating};
    // (row, whether the filler is terminating, the two planned victims' states)
    for (row, filler_terminating, states) in [
        (
            "one victim terminating, the other gone",
            false,
            [Terminating, Gone],
        ),
        // The filler frees all the room: a fresh plan needs no victim.
        (
            "terminating pods already cover the resize",
            true,
            [Terminating, Present],
        ),
    ] {
        let d = Scene::new(Policy::default(), filler_terminating)
            .resume(Some(&two_victim_plan()), &states);
        assert!(
            matches!(
                d,
                Decision::Awaiting {
                    on: Awaited::PlannedVictims,
                    ..
                }
            ),
            "{row}: {d:?}"
        );
    }
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
        Decision::Awaiting {
            on: Awaited::PlannedVictims,
            ..
        }
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

#[test]
fn each_victim_is_read_with_its_own_state_whatever_order_the_states_come_in() {
    let s = Scene::new(Policy::default(), false);
    let key = |name: &str| batch_key(name, &format!("u-{name}"));
    // The plan names zeta, then alpha; their states come alpha first (and sort alpha first):
    // read by position, zeta would be taken for the running one.
    let rec = plan_at(2, vec![key("zeta"), key("alpha")], now());
    let states: VictimStates = [
        (key("alpha"), VictimState::Present),
        (key("zeta"), VictimState::Terminating),
    ]
    .into_iter()
    .collect();
    let d = crate::preemption::decision::decide(
        &s.pod,
        &crate::preemption::decision::Inputs {
            verdict: &s.verdict,
            plan: Some(&rec),
            victims: &states,
            policy: &s.policy,
            install_namespace: resize_guard_policy::fixture::INSTALL_NAMESPACE,
            now: now(),
            grace: &|_| Some(45),
            seen_deferred: SEEN_LONG_AGO,
            pending_on_node: 0,
        },
    );
    match d {
        Decision::Preempt {
            record: Record::Recorded,
            victims,
            after,
            ..
        } => {
            let names: Vec<&str> = victims.iter().map(|r| r.victim.name.as_str()).collect();
            assert_eq!(names, ["alpha"]);
            assert_eq!(after, SHORT_WAIT);
        }
        other => panic!("{other:?}"),
    }
    // A victim no state was given for is gone.
    assert_eq!(states.of(&key("omega")), &VictimState::Gone);
}

/// A three-victim plan interrupted after its first eviction while room appeared elsewhere on
/// the node: the victims the fresh reprieve lets live are spared, never evicted by the resume.
#[test]
fn a_resumed_plan_evicts_only_the_victims_a_fresh_reprieve_still_needs() {
    use resize_guard_policy::budget::Budgets;
    use resize_guard_policy::ledger::NodeLedger;

    let app = deferred_app();
    let small = |name: &str, start: i64| {
        PodBuilder::new("batch", name)
            .owned_by("ReplicaSet")
            .node("n1")
            .priority(100)
            .container(container("work").guaranteed("100m", "64Mi"))
            .running(start)
            .build()
    };
    let (filler, extra) = (filler(false), small("extra", 7));
    let key = |p: &Pod| PodKey::of(p);
    let rec = plan_at(
        2,
        vec![batch_key("gone", "u-gone"), key(&filler), key(&extra)],
        now(),
    );
    let present = |states: &[(&Pod, VictimState)]| -> VictimStates {
        states
            .iter()
            .map(|(p, s)| (key(p), s.clone()))
            .chain([(batch_key("gone", "u-gone"), VictimState::Gone)])
            .collect()
    };
    let policy = Policy::default();
    // The states of the plan's victims among `pods` after the reprieve.
    let spared = |pods: &[Pod], states: &[(&Pod, VictimState)]| -> VictimStates {
        let ledger = NodeLedger::new(&field_node(), pods);
        let mut states = present(states);
        spare_the_unneeded(
            &mut states,
            &app,
            Some(&ledger),
            &Budgets::default(),
            &policy,
            INSTALL_NAMESPACE,
        );
        states
    };
    // 250m -> 550m on 1930m beside the 1500m filler and a 100m pod: the filler alone is needed.
    let states = spared(
        &[app.clone(), filler.clone(), extra.clone()],
        &[
            (&filler, VictimState::Present),
            (&extra, VictimState::Present),
        ],
    );
    assert_eq!(*states.of(&key(&filler)), VictimState::Present);
    assert_eq!(*states.of(&key(&extra)), VictimState::Spare);

    // The filler finished on its own meanwhile (a Job): the resize fits, every victim is spared.
    let states = spared(
        &[app.clone(), extra.clone()],
        &[(&extra, VictimState::Present)],
    );
    assert_eq!(*states.of(&key(&extra)), VictimState::Spare);

    // The decision never evicts a spared victim: with the filler still needed it is the only
    // one; with nothing needed and nothing terminating the resize is judged afresh.
    let v = verdict(&app, vec![filler.clone(), extra.clone()], &policy);
    let needed = present(&[
        (&filler, VictimState::Present),
        (&extra, VictimState::Spare),
    ]);
    let by_key = |states: &VictimStates| {
        rec.victims
            .iter()
            .map(|v| states.of(v).clone())
            .collect::<Vec<_>>()
    };
    match decide(&app, &v, Some(&rec), &by_key(&needed), &policy, now()) {
        Decision::Preempt {
            record: Record::Recorded,
            victims,
            ..
        } => {
            let names: Vec<&str> = victims.iter().map(|r| r.victim.name.as_str()).collect();
            assert_eq!(names, ["filler"]);
        }
        other => panic!("{other:?}"),
    }
    let spared = present(&[(&extra, VictimState::Spare)]);
    let d = decide(&app, &v, Some(&rec), &by_key(&spared), &policy, now());
    assert!(
        !matches!(
            d,
            Decision::Preempt {
                record: Record::Recorded,
                ..
            }
        ),
        "{d:?}"
    );
}

#[test]
fn a_resumed_plan_waits_on_its_victims_by_name_with_their_state_and_grace() {
    let s = Scene::new(Policy::default(), false);
    let rec = two_victim_plan();
    match s.resume(Some(&rec), &[VictimState::Terminating, VictimState::Gone]) {
        Decision::Awaiting {
            on: Awaited::PlannedVictims,
            why,
        } => assert!(
            why.contains("(batch/first terminating, grace period 45s)")
                && !why.contains("batch/second"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
}
