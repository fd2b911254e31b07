//! The brakes on their own: rate, node claims, the cap across plans, the breaker.

use super::*;

fn pod(uid: &str, generation: i64) -> Pod {
    let mut p = Pod::default();
    p.metadata.uid = Some(uid.into());
    p.metadata.namespace = Some("prod".into());
    p.metadata.name = Some(format!("pod-{uid}"));
    p.metadata.generation = Some(generation);
    p
}

fn limits(per_resize: u32, per_minute: u32, futile_plans: u32) -> Limits {
    Limits {
        per_resize,
        per_minute,
        breaker: CircuitBreaker {
            futile_plans,
            window_seconds: 600,
            pause_seconds: 300,
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
