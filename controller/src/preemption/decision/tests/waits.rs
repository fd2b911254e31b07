//! What the controller remembers between reconciles ([`Waits`]): back-off, the stall timer and
//! its claim rule, `minDeferredSeconds` on skewed clocks, the re-plan back-off after budget
//! refusals.

use std::time::Instant;

use super::*;
use crate::preemption::decision::waits::{FIRST_LOOK, LAST_LOOK, REPLAN_MAX};

/// The deferred app at `resourceVersion` `rv`.
fn app_at(rv: &str) -> Pod {
    let mut p = deferred_app();
    p.metadata.resource_version = Some(rv.into());
    p
}

fn awaiting(on: Awaited) -> Decision {
    Decision::Awaiting {
        on,
        why: "planned victims are terminating (batch/slow terminating, grace period 600s)".into(),
    }
}

fn stall_after(secs: u32) -> Policy {
    let mut p = Policy::default();
    p.preemption.stall_after_seconds = secs;
    p
}

/// The duration a paced wait looks again after; panics on anything but a [`Decision::Wait`].
fn wait_after(d: Decision) -> Duration {
    match d {
        Decision::Wait { after, .. } => after,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_wait_backs_off_from_half_a_second_to_thirty_and_starts_again_when_the_pod_changes() {
    let w = Waits::new();
    let policy = stall_after(86_400);
    let t0 = Instant::now();
    let pod = app_at("1");
    let mut t = t0;
    let mut looks = Vec::new();
    for _ in 0..9 {
        let after = wait_after(w.pace(&pod, awaiting(Awaited::PlannedVictims), &policy, t));
        looks.push(after.as_millis());
        t += after;
    }
    assert_eq!(
        looks,
        [
            500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000
        ]
    );
    assert_eq!(FIRST_LOOK, Duration::from_millis(500));
    assert_eq!(LAST_LOOK, Duration::from_secs(30));
    // The pod changed (a watch event): look again soon, then back off again.
    let changed = app_at("2");
    for want in [500, 1_000] {
        let after = wait_after(w.pace(&changed, awaiting(Awaited::PlannedVictims), &policy, t));
        assert_eq!(after.as_millis(), want);
        t += after;
    }
}

/// (what it waits on, seconds since its first look, what the pace makes of it)
#[test]
fn every_kind_of_wait_is_overdue_once_stall_after_seconds_passed_and_says_so() {
    let policy = stall_after(20);
    let cases = [
        (
            Awaited::PlannedVictims,
            "its planned victims terminating",
            "AwaitVictims",
        ),
        (
            Awaited::Unplanned,
            "terminating pods no plan of it named",
            "AwaitTerminating",
        ),
        (
            Awaited::Kubelet,
            "the kubelet admitting a resize resize-guard counts as fitting",
            "AwaitKubelet",
        ),
    ];
    for (on, what, action) in cases {
        let w = Waits::new();
        let pod = app_at("1");
        let t0 = Instant::now();
        assert_eq!(
            wait_after(w.pace(&pod, awaiting(on), &policy, t0)),
            FIRST_LOOK
        );
        // The last look before the timer lands on it, not past it.
        let at = t0 + Duration::from_millis(19_800);
        assert_eq!(
            wait_after(w.pace(&pod, awaiting(on), &policy, at)),
            Duration::from_millis(200),
            "{on:?}"
        );
        for secs in [20, 50, 600] {
            match w.pace(&pod, awaiting(on), &policy, t0 + Duration::from_secs(secs)) {
                Decision::Overdue {
                    on: got,
                    note,
                    after,
                } => {
                    assert_eq!((got, after, got.action()), (on, STALLED_RECHECK, action));
                    assert!(
                        says_all(
                            &note,
                            &[
                                &format!("has waited {secs}s on {what}"),
                                "past preemption.stallAfterSeconds (20s)",
                                "batch/slow terminating, grace period 600s",
                                "node n1's one-plan-at-a-time claim is no longer held for it",
                            ]
                        ),
                        "{on:?}: {note}"
                    );
                }
                other => panic!("{on:?} at {secs}s: {other:?}"),
            }
        }
    }
}

#[test]
fn the_stall_timer_starts_again_for_another_kind_of_wait_a_new_plan_or_generation() {
    let policy = stall_after(20);
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let pod = app_at("1");
    let overdue = |d: &Decision| matches!(d, Decision::Overdue { .. });

    // Victims for 15 s, then the kubelet for 15 s: neither kind waited 20 s.
    let w = Waits::new();
    w.pace(&pod, awaiting(Awaited::PlannedVictims), &policy, at(0));
    w.pace(&pod, awaiting(Awaited::Kubelet), &policy, at(15));
    let d = w.pace(&pod, awaiting(Awaited::Kubelet), &policy, at(30));
    assert!(!overdue(&d), "{d:?}");
    assert!(overdue(&w.pace(
        &pod,
        awaiting(Awaited::Kubelet),
        &policy,
        at(35)
    )));

    // A fresh plan between two waits: its own victims get their own 20 s.
    let w = Waits::new();
    w.pace(&pod, awaiting(Awaited::PlannedVictims), &policy, at(0));
    let preempt = Scene::new(Policy::default(), false).fresh();
    assert!(matches!(preempt, Decision::Preempt { .. }), "{preempt:?}");
    assert_eq!(w.pace(&pod, preempt.clone(), &policy, at(19)), preempt);
    let d = w.pace(&pod, awaiting(Awaited::PlannedVictims), &policy, at(25));
    assert!(!overdue(&d), "{d:?}");

    // A new generation of the resize starts afresh.
    let w = Waits::new();
    w.pace(&pod, awaiting(Awaited::Unplanned), &policy, at(0));
    let mut next = pod.clone();
    next.metadata.generation = Some(3);
    let d = w.pace(&next, awaiting(Awaited::Unplanned), &policy, at(25));
    assert!(!overdue(&d), "{d:?}");

    // A resize no longer pending is forgotten.
    let w = Waits::new();
    w.pace(&pod, awaiting(Awaited::Kubelet), &policy, at(0));
    assert_eq!(
        w.pace(&pod, Decision::Idle, &policy, at(10)),
        Decision::Idle
    );
    let d = w.pace(&pod, awaiting(Awaited::Kubelet), &policy, at(25));
    assert!(!overdue(&d), "{d:?}");
}

#[test]
fn a_victim_stalled_past_its_grace_keeps_its_event_and_is_overdue_on_the_stall_timer() {
    let policy = stall_after(600);
    let w = Waits::new();
    let pod = app_at("1");
    let t0 = Instant::now();
    let stalled = |note: &str| Decision::Stalled {
        note: note.into(),
        after: STALLED_RECHECK,
    };
    w.pace(&pod, awaiting(Awaited::PlannedVictims), &policy, t0);
    // Past grace + slack (resume's own Event, the node still claimed): unchanged, but its last
    // look before the stall timer lands on it.
    let d = w.pace(
        &pod,
        stalled("batch/slow (grace period 45s) still terminating"),
        &policy,
        t0 + Duration::from_secs(110),
    );
    assert_eq!(
        d,
        stalled("batch/slow (grace period 45s) still terminating")
    );
    let d = w.pace(&pod, stalled("x"), &policy, t0 + Duration::from_secs(590));
    assert_eq!(d.requeue(), Some(Duration::from_secs(10)));
    match w.pace(
        &pod,
        stalled("batch/slow (grace period 45s) still terminating"),
        &policy,
        t0 + Duration::from_secs(600),
    ) {
        Decision::Overdue { on, note, .. } => {
            assert_eq!(on, Awaited::PlannedVictims);
            assert!(
                note.contains("batch/slow (grace period 45s) still terminating")
                    && note.contains("claim is no longer held for it"),
                "{note}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_controller_measures_how_long_it_has_seen_a_resize_deferred() {
    let w = Waits::new();
    let t0 = Instant::now();
    let pod = deferred_app();
    assert_eq!(w.deferred_for(&pod, t0), Duration::ZERO);
    assert_eq!(
        w.deferred_for(&pod, t0 + Duration::from_secs(7)),
        Duration::from_secs(7)
    );
    // Not Deferred any more, then Deferred again: counted from the new sighting.
    let mut admitted = pod.clone();
    admitted.status.as_mut().unwrap().conditions = None;
    assert_eq!(
        w.deferred_for(&admitted, t0 + Duration::from_secs(8)),
        Duration::ZERO
    );
    assert_eq!(
        w.deferred_for(&pod, t0 + Duration::from_secs(9)),
        Duration::ZERO
    );
    // A new generation is a new resize.
    let mut next = pod.clone();
    next.metadata.generation = Some(3);
    assert_eq!(
        w.deferred_for(&next, t0 + Duration::from_secs(20)),
        Duration::ZERO
    );
}

/// `minDeferredSeconds: 30`, the condition's `lastTransitionTime` at `since` (the kubelet's
/// clock; now is 1000 s), the controller's own sighting `seen` seconds ago → the wait left, or
/// `None` when it plans.
#[test]
fn min_deferred_seconds_counts_neither_a_kubelet_clock_ahead_nor_a_fresh_sighting_as_age() {
    let cases: [(i64, u64, Option<u64>); 6] = [
        // Both say 10 s: 20 s left (the behaviour before skew was considered).
        (990, 10, Some(20)),
        // The kubelet's clock 1 h ahead: the condition is "from the future" — no age at all.
        (4_600, 3_600, Some(30)),
        // The kubelet's clock 1 h behind: the condition looks an hour old, the controller has
        // seen it for 5 s.
        (-2_600, 5, Some(25)),
        // Both old enough: plan.
        (900, 100, None),
        (970, 30, None),
        // A future time exactly as far ahead as c50689f's `unsigned_abs` would call old enough.
        (1_030, 3_600, Some(30)),
    ];
    let mut policy = Policy::default();
    policy.preemption.min_deferred_seconds = 30;
    for (since, seen, want) in cases {
        let mut pod = deferred_app();
        let cond = &mut pod.status.as_mut().unwrap().conditions.as_mut().unwrap()[0];
        cond.last_transition_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Timestamp::from_second(since).unwrap(),
        ));
        let v = verdict(&pod, vec![filler(false)], &policy);
        let d = super::super::decide(
            &pod,
            &super::super::Inputs {
                verdict: &v,
                plan: None,
                victims: &VictimStates::default(),
                policy: &policy,
                install_namespace: INSTALL_NAMESPACE,
                now: now(),
                grace: &|_| Some(45),
                seen_deferred: Duration::from_secs(seen),
                pending_on_node: 0,
            },
        );
        match (want, &d) {
            (Some(left), Decision::Wait { why, after }) => {
                assert_eq!(*after, Duration::from_secs(left), "{since} {seen}: {why}");
                assert!(why.contains("minDeferredSeconds"), "{why}");
            }
            (None, Decision::Preempt { .. }) => {}
            _ => panic!("condition at {since}, seen {seen}s: {d:?}"),
        }
    }
}

#[test]
fn budget_refusals_back_off_replanning_the_same_victim_from_one_second_to_a_minute() {
    let w = Waits::new();
    let pod = deferred_app();
    let policy = Policy::default();
    let t0 = Instant::now();
    let filler = batch_key("filler", "u-filler");
    let refused = |at: Instant| {
        let replan = crate::preemption::decision::budget_refused(&filler, "needs 1 healthy");
        w.refused(&pod, replan, at).requeue().unwrap().as_secs()
    };
    let waits: Vec<u64> = (0..8)
        .map(|i| refused(t0 + Duration::from_secs(i)))
        .collect();
    assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
    assert_eq!(REPLAN_MAX, Duration::from_secs(60));
    let last = t0 + Duration::from_secs(7);

    // The next fresh plan names filler again (the cached budget still allows it): it waits.
    let fresh = Scene::new(Policy::default(), false).fresh();
    let named = match &fresh {
        Decision::Preempt {
            record: Record::After(rec),
            ..
        } => rec.victims[0].clone(),
        other => panic!("{other:?}"),
    };
    let w2 = Waits::new();
    let refuse_named = |at| {
        w2.refused(
            &pod,
            crate::preemption::decision::budget_refused(&named, ""),
            at,
        )
    };
    refuse_named(t0);
    refuse_named(t0 + Duration::from_secs(1));
    // Two refusals: 2 s from the last.
    let at = t0 + Duration::from_millis(1_500);
    match w2.pace(&pod, fresh.clone(), &policy, at) {
        Decision::Wait { why, after } => {
            assert_eq!(after, Duration::from_millis(1_500));
            assert!(
                why.contains("batch/filler") && why.contains("2 refusal(s)"),
                "{why}"
            );
        }
        other => panic!("{other:?}"),
    }
    // After the back-off, the plan goes.
    assert_eq!(
        w2.pace(&pod, fresh.clone(), &policy, t0 + Duration::from_secs(3)),
        fresh
    );
    // A plan naming other victims is not held; nor a recorded plan resumed.
    assert_eq!(w.pace(&pod, fresh.clone(), &policy, last), fresh);
    let resumed = match fresh.clone() {
        Decision::Preempt {
            victims,
            note,
            limits,
            pending_on_node,
            after,
            ..
        } => Decision::Preempt {
            record: Record::Recorded,
            victims,
            note,
            limits,
            pending_on_node,
            after,
        },
        other => panic!("{other:?}"),
    };
    refuse_named(t0 + Duration::from_secs(10));
    assert_eq!(
        w2.pace(&pod, resumed.clone(), &policy, t0 + Duration::from_secs(10)),
        resumed
    );
}
