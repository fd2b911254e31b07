//! The brakes on their own: rate, node claims, the cap across plans, the breaker; the
//! per-namespace budget and the breaker per scope; the counts persisted and read back.

use resize_guard_policy::policy::BreakerScope;

use super::persisted::Now;
use super::*;

fn pod(uid: &str, generation: i64) -> Pod {
    let mut p = Pod::default();
    p.metadata.uid = Some(uid.into());
    p.metadata.namespace = Some("prod".into());
    p.metadata.name = Some(format!("pod-{uid}"));
    p.metadata.generation = Some(generation);
    p
}

/// Cluster-wide limits: no namespace budget binds (one minute refills any plan) and one breaker
/// for the cluster, as before the brakes were per tenant.
fn limits(per_resize: u32, per_minute: u32, futile_plans: u32) -> Limits {
    Limits {
        per_resize,
        per_minute,
        per_namespace_minute: 60_000,
        breaker: CircuitBreaker {
            futile_plans,
            window_seconds: 600,
            pause_seconds: 300,
            scope: BreakerScope::Cluster,
        },
    }
}

/// Fresh brakes under `limits(per_resize, per_minute, futile_plans)`, and the time they start at.
fn brakes(per_resize: u32, per_minute: u32, futile_plans: u32) -> (Brakes, Limits, Instant) {
    let l = limits(per_resize, per_minute, futile_plans);
    (Brakes::new(), l, Instant::now())
}

/// Admits and removes every victim (the node's pending resizes: 1, so no progress).
fn run(b: &Brakes, p: &Pod, node: &str, n: u32, fresh: bool, l: Limits, now: Instant) {
    let mut a = b.admit(p, node, n, fresh, 1, l, now).unwrap();
    for _ in 0..n {
        a.removed();
    }
}

#[test]
fn evictions_never_exceed_the_rate_over_any_minute() {
    let (b, l, t0) = brakes(5, 12, 0);
    let mut removed = Vec::new();
    // One-victim plans on distinct nodes by distinct pods, tried every second for 3 minutes.
    for s in 0..180u64 {
        let now = t0 + Duration::from_secs(s);
        let p = pod(&format!("u{s}"), 1);
        if let Ok(mut a) = b.admit(&p, &format!("n{s}"), 1, true, 1, l, now) {
            a.removed();
            removed.push(s);
        }
    }
    // A full bucket (5) at once, then 12 a minute.
    for (i, &s) in removed.iter().enumerate() {
        let in_window = removed[i..].iter().take_while(|&&t| t < s + 60).count();
        assert!(in_window <= 5 + 12, "{in_window} in the minute from {s}s");
    }
    assert!(removed.len() >= 5 + 12 * 2, "{}", removed.len());
    assert!(removed.len() <= 5 + 12 * 3, "{}", removed.len());
}

#[test]
fn a_bucket_holds_exactly_one_plan_of_the_largest_size_a_plan_may_be() {
    let (b, l, now) = brakes(4, 6, 0);
    assert_eq!(l.bucket_size(), 4);
    // The largest plan goes at once on fresh brakes; then the bucket is empty: one more victim
    // waits for the rate (6 a minute: 10 s a token).
    run(&b, &pod("a", 1), "n1", 4, true, l, now);
    match b.admit(&pod("b", 1), "n2", 1, true, 1, l, now) {
        Err(Held::Rate { wait }) => {
            assert!(
                wait.abs_diff(Duration::from_secs(10)) < Duration::from_millis(1),
                "{wait:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_plan_waits_until_the_bucket_holds_all_its_victims_and_unused_tokens_go_back() {
    let (b, l, now) = brakes(3, 6, 0);
    // Three reserved, one removed: two go back.
    {
        let mut a = b.admit(&pod("a", 1), "n1", 3, true, 1, l, now).unwrap();
        a.removed();
    }
    b.release(&pod("a", 1), Some("n1"), true);
    run(&b, &pod("b", 1), "n2", 2, true, l, now);
    match b.admit(&pod("c", 1), "n3", 2, true, 1, l, now) {
        Err(Held::Rate { wait }) => assert_eq!(wait, Duration::from_secs(20)),
        other => panic!("{other:?}"),
    }
    let refilled = now + Duration::from_secs(20);
    assert!(b.admit(&pod("c", 1), "n3", 2, true, 1, l, refilled).is_ok());
}

#[test]
fn one_plan_in_flight_per_node_until_it_ends_or_goes_quiet() {
    let (b, l, now) = brakes(5, 60, 0);
    let (p, q) = (pod("p", 1), pod("q", 1));
    run(&b, &p, "n1", 1, true, l, now);
    assert_eq!(
        b.admit(&q, "n1", 1, true, 1, l, now).unwrap_err(),
        Held::NodeBusy {
            holder: "prod/pod-p".into()
        }
    );
    // A plan of another namespace hears that the node is busy, not whose plan it is.
    let mut other = pod("o", 1);
    other.metadata.namespace = Some("tenant-b".into());
    let held = b.admit(&other, "n1", 1, true, 1, l, now).unwrap_err();
    assert_eq!(
        held,
        Held::NodeBusy {
            holder: OTHER_NAMESPACE.into()
        }
    );
    assert_eq!(
        held.brake(l),
        "one plan at a time per node: the plan of a pod in another namespace is in flight"
    );
    // Another node is free; the holder itself may go on (a resumed plan).
    assert!(b.admit(&q, "n2", 1, true, 1, l, now).is_ok());
    assert!(b.admit(&p, "n1", 1, false, 1, l, now).is_ok());
    // Kept fresh while its victims terminate, then released when the plan ends.
    b.touch(&p, Some("n1"), now + CLAIM_TTL);
    let fresh_still = now + CLAIM_TTL + Duration::from_secs(1);
    assert!(b.admit(&q, "n1", 1, true, 1, l, fresh_still).is_err());
    b.release(&p, Some("n1"), false);
    assert!(b.admit(&q, "n1", 1, true, 1, l, now).is_ok());
    // A claim nobody hears of expires.
    let b = Brakes::new();
    run(&b, &p, "n1", 1, true, l, now);
    assert!(b.admit(&q, "n1", 1, true, 1, l, now + CLAIM_TTL).is_ok());
}

#[test]
fn a_resize_costs_at_most_max_victims_per_resize_over_all_its_plans() {
    let (b, l, now) = brakes(3, 600, 0);
    let p = pod("p", 1);
    run(&b, &p, "n1", 2, true, l, now);
    b.release(&p, Some("n1"), false);
    assert_eq!(
        b.admit(&p, "n1", 2, true, 1, l, now).unwrap_err(),
        Held::Spent { spent: 2, more: 2 }
    );
    // One more fits; a new resize (generation) starts afresh; an admitted resize is forgotten.
    run(&b, &p, "n1", 1, true, l, now);
    assert!(b.admit(&p, "n1", 1, true, 1, l, now).is_err());
    let later = now + Duration::from_secs(1); // the bucket refilled
    assert!(b.admit(&pod("p", 2), "n1", 3, true, 1, l, later).is_ok());
    b.release(&pod("p", 2), Some("n1"), true);
    assert!(b.admit(&pod("p", 2), "n1", 3, true, 1, l, later).is_ok());
}

#[test]
fn futile_plans_open_the_breaker_for_every_resize_until_the_pause_ends() {
    let (b, l, now) = brakes(10, 600, 2);
    let (p, q) = (pod("p", 1), pod("q", 1));
    // Each resize's first plan removes a victim; the second plan of p is futile (1), not yet
    // enough; a plan after a refusal (nothing removed) is not futile.
    run(&b, &p, "n1", 1, true, l, now);
    run(&b, &q, "n2", 1, true, l, now);
    drop(b.admit(&p, "n1", 1, true, 1, l, now).unwrap());
    assert!(b.admit(&p, "n1", 1, true, 1, l, now).is_ok());
    assert!(!b.paused(now));
    // q's second plan is the second futile one: the breaker opens.
    match b.admit(&q, "n2", 1, true, 1, l, now).unwrap_err() {
        Held::Paused {
            opened_now, futile, ..
        } => assert!(opened_now && futile == 2),
        other => panic!("{other:?}"),
    }
    assert!(b.paused(now));
    let (pausing, ended) = (
        now + Duration::from_secs(299),
        now + Duration::from_secs(300),
    );
    assert!(matches!(
        b.admit(&pod("r", 1), "n3", 1, true, 1, l, pausing),
        Err(Held::Paused {
            opened_now: false,
            ..
        })
    ));
    assert!(b.admit(&pod("r", 1), "n3", 1, true, 1, l, ended).is_ok());
    assert!(!b.paused(ended));
}

#[test]
fn the_breaker_is_off_with_zero_futile_plans() {
    let (b, l, now) = brakes(10, 600, 0);
    let p = pod("p", 1);
    for _ in 0..5 {
        run(&b, &p, "n1", 1, true, l, now);
    }
    assert!(!b.paused(now));
}

#[test]
fn room_taken_by_the_nodes_other_resizes_is_progress_not_futility() {
    let (b, l, now) = brakes(2, 600, 1);
    let p = pod("p", 1);
    // Five resizes pending on the node; p's plan removes 2 victims; three others were admitted
    // (2 pending now) but not p: its next plan is neither futile nor charged the first 2.
    {
        let mut a = b.admit(&p, "n1", 2, true, 5, l, now).unwrap();
        a.removed();
        a.removed();
    }
    let later = now + Duration::from_secs(10);
    {
        let mut a = b.admit(&p, "n1", 2, true, 2, l, later).unwrap();
        a.removed();
    }
    assert!(!b.paused(later));
    // Nothing admitted since (still 2 pending): futile, and with futilePlans 1 the breaker opens.
    let again = later + Duration::from_secs(10);
    assert!(matches!(
        b.admit(&p, "n1", 1, true, 2, l, again),
        Err(Held::Paused {
            opened_now: true,
            ..
        })
    ));
}

/// A pod of `namespace`.
fn pod_in(namespace: &str, uid: &str, generation: i64) -> Pod {
    let mut p = pod(uid, generation);
    p.metadata.namespace = Some(namespace.into());
    p
}

/// Per-tenant limits: `per_resize` victims a plan, the cluster's rate, a namespace's rate, and
/// a breaker per `scope` opening at `futile_plans`.
fn tenant_limits(
    per_resize: u32,
    per_minute: u32,
    per_namespace_minute: u32,
    futile_plans: u32,
    scope: BreakerScope,
) -> Limits {
    let mut l = limits(per_resize, per_minute, futile_plans);
    l.per_namespace_minute = per_namespace_minute;
    l.breaker.scope = scope;
    l
}

#[test]
fn one_namespace_spends_only_its_own_budget_and_the_cluster_rate_stays_the_outer_bound() {
    // Plans of 2; the cluster 60 a minute, a namespace 6 (one token back every 10 s).
    let l = tenant_limits(2, 60, 6, 0, BreakerScope::Namespace);
    let (b, now) = (Brakes::new(), Instant::now());
    run(&b, &pod_in("tenant-a", "a1", 1), "n1", 2, true, l, now);
    // 2 s later the cluster's bucket is full again (60 a minute), A's holds 0.2 of a token.
    let later = now + Duration::from_secs(2);
    match b.admit(&pod_in("tenant-a", "a2", 1), "n2", 1, true, 1, l, later) {
        Err(Held::NamespaceRate { namespace, wait }) => {
            assert_eq!(namespace, "tenant-a");
            assert_eq!(wait.as_millis(), 8_000);
        }
        other => panic!("{other:?}"),
    }
    // Tenant B's plan goes at once, on the cluster's tokens and its own budget.
    run(&b, &pod_in("tenant-b", "b1", 1), "n3", 2, true, l, later);
    // A's budget is back after its own refill, not before.
    let refilled = now + Duration::from_secs(10);
    assert!(matches!(
        b.admit(
            &pod_in("tenant-a", "a2", 1),
            "n2",
            1,
            true,
            1,
            l,
            refilled - Duration::from_secs(1)
        ),
        Err(Held::NamespaceRate { .. })
    ));
    assert!(
        b.admit(&pod_in("tenant-a", "a2", 1), "n2", 1, true, 1, l, refilled)
            .is_ok()
    );

    // Many namespaces at once never exceed the cluster's rate: 12 a minute, 6 per namespace.
    let l = tenant_limits(1, 12, 6, 0, BreakerScope::Namespace);
    let (b, t0) = (Brakes::new(), Instant::now());
    let mut removed = Vec::new();
    for s in 0..120u64 {
        let now = t0 + Duration::from_secs(s);
        for ns in 0..5 {
            let p = pod_in(&format!("t{ns}"), &format!("u{s}-{ns}"), 1);
            if let Ok(mut a) = b.admit(&p, &format!("n{s}-{ns}"), 1, true, 1, l, now) {
                a.removed();
                removed.push(s);
            }
        }
    }
    assert!(removed.len() <= 1 + 12 * 2, "{}", removed.len());
    assert!(removed.len() >= 12 * 2 - 1, "{}", removed.len());
}

#[test]
fn a_namespace_breaker_pauses_only_that_namespace_and_a_node_breaker_only_that_node() {
    let l = tenant_limits(10, 600, 600, 2, BreakerScope::Namespace);
    let (b, now) = (Brakes::new(), Instant::now());
    let (a1, a2) = (pod_in("tenant-a", "a1", 1), pod_in("tenant-a", "a2", 1));
    // Two futile plans of tenant A (each resize's second plan, no progress on its node).
    for (p, node) in [(&a1, "n1"), (&a2, "n2")] {
        run(&b, p, node, 1, true, l, now);
    }
    run(&b, &a1, "n1", 1, true, l, now);
    match b.admit(&a2, "n2", 1, true, 1, l, now).unwrap_err() {
        Held::Paused {
            reach, opened_now, ..
        } => {
            assert_eq!(reach, breaker::Reach::Namespace("tenant-a".into()));
            assert!(opened_now);
        }
        other => panic!("{other:?}"),
    }
    // A stays paused on any node; B preempts on A's very nodes.
    assert!(matches!(
        b.admit(&pod_in("tenant-a", "a3", 1), "n9", 1, true, 1, l, now),
        Err(Held::Paused { .. })
    ));
    b.release(&a1, Some("n1"), true);
    assert!(
        b.admit(&pod_in("tenant-b", "b1", 1), "n1", 1, true, 1, l, now)
            .is_ok()
    );

    // Per node: futile plans on n1 pause n1 for everyone, and nothing else.
    let l = tenant_limits(10, 600, 600, 2, BreakerScope::Node);
    let b = Brakes::new();
    let (p, q) = (pod_in("tenant-a", "p", 1), pod_in("tenant-b", "q", 1));
    run(&b, &p, "n1", 1, true, l, now);
    run(&b, &p, "n1", 1, true, l, now);
    b.release(&p, Some("n1"), false);
    run(&b, &q, "n1", 1, true, l, now);
    assert!(matches!(
        b.admit(&q, "n1", 1, true, 1, l, now),
        Err(Held::Paused {
            opened_now: true,
            reach: breaker::Reach::Node(_),
            ..
        })
    ));
    assert!(matches!(
        b.admit(&pod_in("tenant-c", "r", 1), "n1", 1, true, 1, l, now),
        Err(Held::Paused { .. })
    ));
    assert!(
        b.admit(&pod_in("tenant-a", "s", 1), "n2", 1, true, 1, l, now)
            .is_ok()
    );

    // A pause stays open when the scope changes: this node breaker holds under namespace scope.
    let by_namespace = tenant_limits(10, 600, 600, 2, BreakerScope::Namespace);
    assert!(matches!(
        b.admit(
            &pod_in("tenant-d", "t", 1),
            "n1",
            1,
            true,
            1,
            by_namespace,
            now
        ),
        Err(Held::Paused { .. })
    ));
}

/// Both clocks at `instant`, with the wall clock at `wall_ms`.
fn at(instant: Instant, wall_ms: i64) -> Now {
    Now { instant, wall_ms }
}

const WALL: i64 = 1_800_000_000_000;

#[test]
fn the_counts_persisted_by_one_leader_are_continued_by_the_next() {
    // Plans of up to 4; the cluster refills 6 a minute, a namespace 3.
    let l = tenant_limits(4, 6, 3, 2, BreakerScope::Namespace);
    let (old, t0) = (Brakes::new(), Instant::now());
    let (a, z) = (pod_in("tenant-a", "a", 1), pod_in("tenant-z", "z", 1));
    // A's resize costs 2 victims, then 1 more in a futile plan; Z's plan has 2 victims in
    // flight (its leader dies before they are counted).
    run(&old, &a, "n1", 2, true, l, t0);
    old.release(&a, Some("n1"), false);
    let t1 = t0 + Duration::from_secs(40);
    run(&old, &a, "n1", 1, true, l, t1);
    old.release(&a, Some("n1"), false);
    let in_flight = old
        .admit(&z, "n2", 2, true, 1, l, t1 + Duration::from_secs(20))
        .unwrap();
    let mut doc = old.snapshot(at(t1 + Duration::from_secs(20), WALL)).doc;
    drop(in_flight);
    // It let plans through, so it declares a reserve of one whole plan.
    assert_eq!(doc.reserve, 4);
    let text = serde_json::to_string(&doc).unwrap();

    // Another process, 5 s of wall time later, on its own monotonic clock.
    let (new, t) = (Brakes::new(), Instant::now() + Duration::from_secs(1000));
    let wait_for_three =
        |b: &Brakes| match b.admit(&pod_in("tenant-b", "b", 1), "n3", 3, true, 1, l, t) {
            Err(Held::Rate { wait }) => wait.as_secs_f64(),
            other => panic!("{other:?}"),
        };
    assert_eq!(
        new.restore(&text, at(t, WALL + 5_000)),
        persisted::Restored::Whole
    );
    // The reserve is charged at the takeover: every bucket is empty then, so a plan of 3 waits
    // for 3 tokens at 6 a minute (a fresh leader would have let it go at once).
    let secs = wait_for_three(&new);
    assert!((29.9..30.1).contains(&secs), "{secs}");
    // Without a reserve the cluster's bucket is where the old one left it (2 of 4) plus 5 s of
    // refill: a plan of 3 waits 5 s more.
    doc.reserve = 0;
    let unreserved = Brakes::new();
    unreserved.restore(&serde_json::to_string(&doc).unwrap(), at(t, WALL + 5_000));
    let secs = wait_for_three(&unreserved);
    assert!((4.9..5.1).contains(&secs), "{secs}");
    // Z's victims in flight count as spent: its resize (cap 4) cannot have 3 more.
    assert_eq!(
        new.admit(&z, "n2", 3, false, 1, l, t + Duration::from_secs(60))
            .unwrap_err(),
        Held::Spent { spent: 2, more: 3 }
    );
    // A's futile plan is counted: one more in the namespace opens its breaker.
    let later = t + Duration::from_secs(60);
    match new.admit(&a, "n1", 1, true, 1, l, later).unwrap_err() {
        Held::Paused {
            opened_now, futile, ..
        } => assert!(opened_now && futile == 2, "{futile}"),
        other => panic!("{other:?}"),
    }
    // ... and that pause is persisted too: a third leader finds A paused, less what passed.
    let doc = new.snapshot(at(later, WALL + 65_000)).doc;
    let third = Brakes::new();
    let t3 = Instant::now() + Duration::from_secs(5000);
    third.restore(
        &serde_json::to_string(&doc).unwrap(),
        at(t3, WALL + 165_000),
    );
    match third.admit(&pod_in("tenant-a", "a9", 1), "n7", 1, true, 1, l, t3) {
        Err(Held::Paused { left, reach, .. }) => {
            assert_eq!(left, Duration::from_secs(200));
            assert_eq!(reach, breaker::Reach::Namespace("tenant-a".into()));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn garbage_state_starts_every_bucket_empty_never_full() {
    let l = tenant_limits(2, 60, 6, 3, BreakerScope::Namespace);
    let t = Instant::now();
    for garbage in [
        "",
        "not json",
        "[]",
        "{\"format\": 2}",
        "{\"cluster\": {\"tokens\": 2, \"refilledMs\": 0}}",
    ] {
        let b = Brakes::new();
        let restored = b.restore(garbage, at(t, WALL));
        assert_eq!(restored.label(), "unreadable", "{garbage:?}: {restored:?}");
        // Empty now: a plan of one waits a second for the cluster's token ...
        assert!(
            matches!(
                b.admit(&pod_in("x", "u", 1), "n1", 1, true, 1, l, t),
                Err(Held::Rate { .. })
            ),
            "{garbage:?}"
        );
        // ... and then on a namespace it never saw, whose bucket starts empty too (6 a minute).
        let after = t + Duration::from_secs(2);
        assert!(
            matches!(
                b.admit(&pod_in("y", "v", 1), "n2", 1, true, 1, l, after),
                Err(Held::NamespaceRate { .. })
            ),
            "{garbage:?}"
        );
        assert!(
            b.admit(
                &pod_in("y", "v", 1),
                "n2",
                1,
                true,
                1,
                l,
                t + Duration::from_secs(10)
            )
            .is_ok()
        );
    }
}

#[test]
fn what_is_read_back_is_clamped_and_an_unreadable_entry_is_its_most_conservative() {
    let l = tenant_limits(2, 60, 6, 3, BreakerScope::Namespace);
    let t = Instant::now();
    let doc = serde_json::json!({
        "format": 1, "writtenMs": WALL,
        // More tokens than any bucket holds, refilled in the future: cut to the size, no credit.
        "cluster": {"tokens": 1e300, "refilledMs": WALL + 3_600_000},
        "namespaces": {
            "tenant-a": {"tokens": -5.0, "refilledMs": WALL},
            "tenant-b": {"tokens": "lots", "refilledMs": WALL},
            "../etc": {"tokens": 2.0, "refilledMs": WALL}
        },
        "resizes": {"u1": {"generation": 1, "victims": "x"}},
        "breakers": {
            "namespace/tenant-c": "open?",
            "namespace/tenant-d": {"futileMs": [], "pausedUntilMs": WALL + 10 * 86_400_000_i64},
            "planet/earth": {"futileMs": []}
        }
    });
    let b = Brakes::new();
    let restored = b.restore(&doc.to_string(), at(t, WALL));
    let persisted::Restored::Partial(lost) = &restored else {
        panic!("{restored:?}");
    };
    assert_eq!(lost.len(), 5, "{lost:?}");
    // Cluster: 2 tokens (its size), so one plan of 2 goes, not more.
    run(&b, &pod_in("e", "e1", 1), "n1", 2, true, l, t);
    assert!(matches!(
        b.admit(&pod_in("f", "f1", 1), "n2", 1, true, 1, l, t),
        Err(Held::Rate { .. })
    ));
    let later = t + Duration::from_secs(2);
    // Negative tokens are none; unreadable tokens are none.
    for ns in ["tenant-a", "tenant-b"] {
        assert!(
            matches!(
                b.admit(&pod_in(ns, "u", 1), "n3", 1, true, 1, l, later),
                Err(Held::NamespaceRate { .. })
            ),
            "{ns}"
        );
    }
    // An unreadable breaker is open; one reaching ten days ahead is cut to pauseSeconds.
    for ns in ["tenant-c", "tenant-d"] {
        match b.admit(&pod_in(ns, "u", 1), "n4", 1, true, 1, l, later) {
            Err(Held::Paused { left, .. }) => assert_eq!(left, Duration::from_secs(300), "{ns}"),
            other => panic!("{ns}: {other:?}"),
        }
    }
    let ended = later + Duration::from_secs(300);
    assert!(
        b.admit(&pod_in("tenant-c", "u", 1), "n4", 1, true, 1, l, ended)
            .is_ok()
    );
}

#[tokio::test]
async fn a_plan_whose_state_could_not_be_saved_is_held_and_gives_its_tokens_back() {
    let l = tenant_limits(2, 60, 60, 0, BreakerScope::Namespace);
    let (b, now) = (Brakes::new(), Instant::now());
    let p = pod_in("tenant-a", "a", 1);
    // Nothing persists the brakes (a unit test, a tool): nothing to wait for.
    assert!(
        b.admit(&p, "n1", 1, true, 1, l, now)
            .unwrap()
            .saved()
            .await
            .is_ok()
    );
    b.persisting.store(true, Ordering::Release);
    let admitted = b.admit(&p, "n1", 1, true, 1, l, now).unwrap();
    b.saved
        .send_modify(|s| s.failed = Some((u64::MAX, "forbidden".into())));
    match admitted.saved().await.unwrap_err() {
        Held::Unsaved { why } => assert_eq!(why, "forbidden"),
        other => panic!("{other:?}"),
    }
    drop(admitted);
    b.saved.send_modify(|s| {
        s.failed = None;
        s.through = u64::MAX;
    });
    // Its tokens came back: a plan of 2 goes (the first plan's one victim was never removed).
    assert!(
        b.admit(&p, "n1", 2, true, 1, l, now)
            .unwrap()
            .saved()
            .await
            .is_ok()
    );
}
